//! Text from files and servers on its way to a terminal or the journal: control characters
//! (a newline that would forge a `tick done` line, an escape sequence that would drive the
//! terminal, C1 controls, DEL) and the Unicode line separators and bidirectional overrides are
//! written as escapes, so one value stays one visible field.
//!
//! One escaping, two forms: [`escape_control`] for display (a table cell, a verdict line: the
//! text as it reads, nothing added), and [`quote`], the same escapes inside double quotes with
//! `"` and `\` escaped too, so the value's end is unambiguous: the journal's quoted logfmt value
//! ([`logfmt_value`]) and a name quoted inside a sentence. Where the two overlap (text with no
//! quote or backslash) `quote` is `escape_control` between quotes; a test checks it.

use std::borrow::Cow;

/// Whether `c` must be escaped before it reaches a terminal or the journal: the C0 and C1
/// controls and DEL, the Unicode line and paragraph separators, and the bidirectional embeddings,
/// overrides and isolates (which reorder what a reader sees).
fn needs_escape(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{2028}' | '\u{2029}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// Pushes `c`, escaped (`\n`, `\u{1b}`) when [`needs_escape`] names it: the one escaping.
fn push_escaped(out: &mut String, c: char) {
    if needs_escape(c) {
        out.extend(c.escape_default());
    } else {
        out.push(c);
    }
}

/// `text` with every character `needs_escape` names escaped (`\n`, `\u{1b}`, `\u{9b}`);
/// unchanged (and not copied) when it holds none.
pub fn escape_control(text: &str) -> Cow<'_, str> {
    if !text.chars().any(needs_escape) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        push_escaped(&mut out, c);
    }
    Cow::Owned(out)
}

/// `text` in double quotes, escaped as [`escape_control`] escapes it and with every quote and
/// backslash escaped (`\"`, `\\`), so one value stays one line and one field: the journal's
/// quoted value ([`logfmt_value`]) and a name quoted in a human message.
pub fn quote(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        if matches!(c, '"' | '\\') {
            out.push('\\');
        }
        push_escaped(&mut out, c);
    }
    out.push('"');
    out
}

/// A logfmt value: bare when it is one plain token (no space, quote, `=`, backslash or anything
/// [`escape_control`] escapes, not empty), else [`quote`]d.
pub fn logfmt_value(text: &str) -> Cow<'_, str> {
    if is_plain(text) {
        Cow::Borrowed(text)
    } else {
        Cow::Owned(quote(text))
    }
}

/// Whether `text` is one plain logfmt token (see [`logfmt_value`]).
fn is_plain(text: &str) -> bool {
    !text.is_empty()
        && !text
            .chars()
            .any(|c| c.is_whitespace() || matches!(c, '"' | '\'' | '=' | '\\') || needs_escape(c))
}

/// Characters of a call shown in a message at most (cut in the middle past it).
pub const SHOWN_CHARS: usize = 120;

/// A call as a person reads it in a message: a shell command whole, a file tool's file, a
/// search's pattern, else the tool and its input; whitespace collapsed, shortened in the
/// middle past [`SHOWN_CHARS`], secrets redacted.
pub fn shown_call(call: &detect_core::Call) -> String {
    let text = |key: &str| call.input.get(key).and_then(serde_json::Value::as_str);
    let raw = match call.tool.as_str() {
        "bash" => text("command").map(str::to_owned),
        "read" | "edit" | "write" | "multiedit" => {
            text("filePath").map(|path| format!("{} {path}", call.tool))
        }
        "grep" | "glob" => text("pattern").map(|p| format!("{} {p}", call.tool)),
        _ => None,
    }
    .unwrap_or_else(|| format!("{} {}", call.tool, detect_core::canonical_json(&call.input)));
    let collapsed = raw.split_whitespace().collect::<Vec<_>>().join(" ");
    let redacted = agentwatch_http::redact_text(&collapsed);
    agentwatch_transcripts::shortened(&redacted, SHOWN_CHARS).replace('`', "'")
}

#[cfg(test)]
mod shown_call_tests {
    use super::*;
    use detect_core::Call;
    use serde_json::json;

    /// Table: (tool, input, as a message shows it).
    #[test]
    fn a_call_as_a_person_reads_it() {
        let long = format!("python3 -c \"{}\"", "x = 1; ".repeat(40));
        let rows = [
            (
                "bash",
                json!({"command": "python3  -c \"import nosuchmodule\"\n"}),
                "python3 -c \"import nosuchmodule\"".to_owned(),
            ),
            (
                "read",
                json!({"filePath": "/w/src/a.rs", "offset": 3}),
                "read /w/src/a.rs".to_owned(),
            ),
            (
                "grep",
                json!({"pattern": "fn main"}),
                "grep fn main".to_owned(),
            ),
            (
                "todowrite",
                json!({"todos": []}),
                "todowrite {\"todos\":[]}".to_owned(),
            ),
            (
                "bash",
                json!({"command": "curl https://u:secret@h.example/x"}),
                "curl https://h.example/x".to_owned(),
            ),
            (
                "bash",
                json!({"command": "echo `date`"}),
                "echo 'date'".to_owned(),
            ),
        ];
        for (tool, input, shown) in rows {
            assert_eq!(shown_call(&Call::completed(tool, input)), shown);
        }
        let cut = shown_call(&Call::completed("bash", json!({"command": long})));
        assert_eq!(cut.chars().count(), SHOWN_CHARS);
        assert!(
            cut.starts_with("python3 -c") && cut.contains('…') && cut.ends_with("1; \""),
            "{cut}"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_escaped_and_plain_text_is_kept() {
        let rows = [
            ("ses_abc", "ses_abc"),
            ("a\nb", "a\\nb"),
            ("x\u{1b}[2Jy", "x\\u{1b}[2Jy"),
            ("csi\u{9b}31m", "csi\\u{9b}31m"),
            ("tab\there", "tab\\there"),
            ("del\u{7f}", "del\\u{7f}"),
            ("line\u{2028}sep", "line\\u{2028}sep"),
            ("rlo\u{202e}txt", "rlo\\u{202e}txt"),
            ("ümlaut", "ümlaut"),
        ];
        for (input, want) in rows {
            assert_eq!(escape_control(input), want, "{input:?}");
        }
        assert!(matches!(escape_control("plain"), Cow::Borrowed(_)));
    }

    #[test]
    fn quoted_values_stay_on_one_line() {
        assert_eq!(
            quote("opencode loop: explore"),
            "\"opencode loop: explore\""
        );
        assert_eq!(quote("say \"hi\""), r#""say \"hi\"""#);
        assert_eq!(quote("a\nb\\c"), r#""a\nb\\c""#);
        assert_eq!(quote("\r\u{85}"), r#""\r\u{85}""#);
    }

    #[test]
    fn logfmt_values_are_bare_only_when_plain() {
        let rows = [
            ("ses_abc", "ses_abc"),
            ("2026-01-15T14:30:01+00:00", "2026-01-15T14:30:01+00:00"),
            ("", "\"\""),
            ("two words", "\"two words\""),
            ("k=v", "\"k=v\""),
            ("it's", "\"it's\""),
            ("a\nwatchdog=forged", "\"a\\nwatchdog=forged\""),
            ("\u{1b}[2J", "\"\\u{1b}[2J\""),
        ];
        for (input, want) in rows {
            assert_eq!(logfmt_value(input), want, "{input:?}");
        }
    }

    /// Text mixing plain letters with everything either function treats specially.
    fn tricky() -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::prelude::*;
        let chars = vec![
            'a', 'Z', '0', '-', ':', ' ', '=', '\'', '"', '\\', '\n', '\r', '\t', '\u{1b}',
            '\u{7f}', '\u{85}', '\u{9b}', '\u{2028}', '\u{202e}', '\u{2067}', 'ü', '\u{a0}',
        ];
        prop::collection::vec(prop::sample::select(chars), 0..24)
            .prop_map(|c| c.into_iter().collect())
    }

    proptest::proptest! {
        /// The quoting functions agree where they overlap: `quote` is `escape_control` in quotes
        /// for text with no quote or backslash, `logfmt_value` is the text itself or its `quote`,
        /// and nothing they write holds a character that needs escaping or a raw line break.
        #[test]
        fn the_quoting_functions_agree_where_they_overlap(text in tricky()) {
            let quoted = quote(&text);
            if !text.contains(['"', '\\']) {
                proptest::prop_assert_eq!(&quoted, &format!("\"{}\"", escape_control(&text)));
            }
            let value = logfmt_value(&text);
            if is_plain(&text) {
                proptest::prop_assert_eq!(&*value, text.as_str());
                proptest::prop_assert_eq!(escape_control(&text), text.as_str());
            } else {
                proptest::prop_assert_eq!(&*value, quoted.as_str());
            }
            for written in [quoted.as_str(), &value, &escape_control(&text)] {
                proptest::prop_assert!(!written.chars().any(needs_escape), "{:?}", written);
            }
            // Inside the quotes, every quote is escaped: the value ends at the last one.
            let inner = &quoted[1..quoted.len() - 1];
            let mut escaped = false;
            for c in inner.chars() {
                proptest::prop_assert!(escaped || c != '"', "{:?}", quoted);
                escaped = !escaped && c == '\\';
            }
            proptest::prop_assert!(!escaped, "{:?}", quoted);
        }
    }
}

/// How long ago `seconds` was, as a person says it: `just now`, `42 s ago`, `3 min ago`,
/// `5 h ago`, `71 days ago`; a time in the future is `in the future`.
pub fn ago(seconds: i64) -> String {
    match seconds {
        ..0 => "in the future".to_owned(),
        0..5 => "just now".to_owned(),
        5..120 => format!("{seconds} s ago"),
        120..7_200 => format!("{} min ago", seconds / 60),
        7_200..172_800 => format!("{} h ago", seconds / 3_600),
        _ => format!("{} days ago", seconds / 86_400),
    }
}

/// How far ahead `seconds` is, as a person says it: `in 45 s`, `in 4 min`, `in 5 h`, `in 3 days`;
/// a time already past is `passed`. The counterpart of [`ago`] for a silence's or a backoff's end.
pub fn ahead(seconds: i64) -> String {
    match seconds {
        ..0 => "passed".to_owned(),
        0..120 => format!("in {seconds} s"),
        120..7_200 => format!("in {} min", seconds / 60),
        7_200..172_800 => format!("in {} h", seconds / 3_600),
        _ => format!("in {} days", seconds / 86_400),
    }
}

/// A duration, short: `45 s`, `12 min`, `2 h`.
pub fn duration(seconds: i64) -> String {
    match seconds {
        ..120 => format!("{seconds} s"),
        120..7_200 => format!("{} min", seconds / 60),
        _ => format!("{} h", seconds / 3_600),
    }
}

/// Rows as an aligned table: each column as wide as its widest cell (counted in characters),
/// two spaces between columns, no trailing spaces. Cells are escaped with [`escape_control`].
pub fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let cells: Vec<Vec<String>> = std::iter::once(header.iter().map(|h| (*h).to_owned()).collect())
        .chain(
            rows.iter()
                .map(|r| r.iter().map(|c| escape_control(c).into_owned()).collect()),
        )
        .collect();
    let columns = cells.iter().map(Vec::len).max().unwrap_or(0);
    let width = |i: usize| {
        cells
            .iter()
            .filter_map(|r| r.get(i))
            .map(|c| c.chars().count())
            .max()
            .unwrap_or(0)
    };
    let widths: Vec<usize> = (0..columns).map(width).collect();
    let mut out = String::new();
    for row in &cells {
        let mut line = String::new();
        for (i, cell) in row.iter().enumerate() {
            line.push_str(cell);
            let pad = widths[i].saturating_sub(cell.chars().count());
            line.extend(std::iter::repeat_n(' ', pad + 2));
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// Whether to colour standard output: it is a terminal and `NO_COLOR` is unset or empty.
pub fn colour_stdout() -> bool {
    use std::io::IsTerminal;
    std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// `text` in bold red when `colour`, else as is.
pub fn warn_colour(text: &str, colour: bool) -> String {
    if colour {
        format!("\u{1b}[1;31m{text}\u{1b}[0m")
    } else {
        text.to_owned()
    }
}

#[cfg(test)]
mod status_text_tests {
    use super::*;

    #[test]
    fn ages_read_as_a_person_says_them() {
        for (s, want) in [
            (-1, "in the future"),
            (0, "just now"),
            (42, "42 s ago"),
            (180, "3 min ago"),
            (18_000, "5 h ago"),
            (71 * 86_400, "71 days ago"),
        ] {
            assert_eq!(ago(s), want, "{s}");
        }
    }

    #[test]
    fn times_ahead_read_as_a_person_says_them() {
        for (s, want) in [
            (-1, "passed"),
            (0, "in 0 s"),
            (52, "in 52 s"),
            (240, "in 4 min"),
            (18_000, "in 5 h"),
            (86_400, "in 24 h"),
            (3 * 86_400, "in 3 days"),
        ] {
            assert_eq!(ahead(s), want, "{s}");
        }
    }

    #[test]
    fn tables_align_and_escape() {
        let t = table(
            &["job", "last tick"],
            &[
                vec!["opencode".into(), "3 min ago".into()],
                vec!["deck\n".into(), "never".into()],
            ],
        );
        assert_eq!(
            t,
            "job       last tick\nopencode  3 min ago\ndeck\\n    never\n"
        );
    }
}
