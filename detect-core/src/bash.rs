//! The bash normaliser: two commands that do the same thing in the same place get the same text.
//!
//! Rules (decisions.md section 1), in this order:
//! 1. CRLF becomes LF; backslash-newline continuations are joined.
//! 2. Full-line comments and trailing ` # comments` outside quotes are dropped.
//! 3. The remaining non-empty lines are joined with ` ; ` and whitespace is collapsed.
//! 4. Repeatedly, leading `VAR=value` assignments (also after `export` / `env`) and leading
//!    `cd DIR &&`, `cd DIR ;`, `pushd DIR &&`, `pushd DIR ;` prefixes are stripped.
//!
//! A bare `cd DIR` is left as it is, and so is anything that would leave nothing behind.
//! The function works on `char`s only, so no input can make it panic, and it is idempotent.

/// Normalise a bash command for call identity and target keys.
pub fn normalize_bash(command: &str) -> String {
    let mut out = String::with_capacity(command.len());
    normalize_bash_into(command, &mut out);
    out
}

/// [`normalize_bash`] written into `out` (cleared first); a one-line command without `#` (the
/// usual one) allocates nothing.
pub(crate) fn normalize_bash_into(command: &str, out: &mut String) {
    out.clear();
    if memchr::memchr3(b'\n', b'\r', b'#', command.as_bytes()).is_some() {
        collapse_whitespace(&join_lines(command), out);
    } else {
        // One line and no comment: the join is the line, trimmed.
        collapse_whitespace(command, out);
    }
    let mut text = out.as_str();
    while let Some(rest) = strip_one_prefix(text) {
        text = rest;
    }
    // What is left is a suffix of the collapsed text.
    let start = out.len() - text.len();
    out.drain(..start);
}

/// Quote state while scanning a command left to right.
#[derive(Clone, Copy, PartialEq, Eq, Default)]
enum Quote {
    #[default]
    None,
    Single,
    Double,
}

/// Quote and backslash-escape state of a left-to-right scan of shell text: the one place that
/// knows which characters are quoted.
#[derive(Clone, Copy, Default)]
pub(crate) struct Scanner {
    quote: Quote,
    escaped: bool,
}

impl Scanner {
    /// Feed the next character. True when it stands outside quotes and unescaped, where it can
    /// be shell syntax (a separator, a comment, an operator); quotes and backslashes are consumed.
    pub(crate) fn feed(&mut self, ch: char) -> bool {
        if self.escaped {
            self.escaped = false;
            return false;
        }
        match self.quote {
            Quote::None => match ch {
                '\\' => self.escaped = true,
                '\'' => self.quote = Quote::Single,
                '"' => self.quote = Quote::Double,
                _ => return true,
            },
            Quote::Single => {
                if ch == '\'' {
                    self.quote = Quote::None;
                }
            }
            Quote::Double => match ch {
                '\\' => self.escaped = true,
                '"' => self.quote = Quote::None,
                _ => {}
            },
        }
        false
    }

    /// A line break ends an escape (continuations were joined before scanning).
    fn line_break(&mut self) {
        self.escaped = false;
    }
}

/// Steps 1-3 up to the join: drop comments, keep non-empty lines, join them with ` ; `.
fn join_lines(command: &str) -> String {
    let text: std::borrow::Cow<'_, str> = if command.contains('\r') || command.contains("\\\n") {
        command.replace("\r\n", "\n").replace("\\\n", "").into()
    } else {
        command.into()
    };
    let mut joined = String::with_capacity(text.len());
    // Append a finished line, trimmed, unless it is empty.
    let flush = |line: &mut String, joined: &mut String| {
        let trimmed = line.trim();
        if !trimmed.is_empty() {
            if !joined.is_empty() {
                joined.push_str(" ; ");
            }
            joined.push_str(trimmed);
        }
        line.clear();
    };
    let mut line = String::new();
    let mut scanner = Scanner::default();
    let mut in_comment = false;
    // Whether the previous character (in the original text) was whitespace or a line start: a `#`
    // only starts a comment there.
    let mut at_word_start = true;
    for ch in text.chars() {
        if ch == '\n' {
            // A newline ends a comment; inside quotes it is part of the string but still
            // splits lines, so that the join is the same on a second pass.
            in_comment = false;
            scanner.line_break();
            at_word_start = true;
            flush(&mut line, &mut joined);
            continue;
        }
        if in_comment {
            continue;
        }
        if scanner.feed(ch) && ch == '#' && at_word_start {
            in_comment = true;
            continue;
        }
        at_word_start = ch.is_whitespace();
        line.push(ch);
    }
    flush(&mut line, &mut joined);
    joined
}

/// Every run of whitespace becomes one space; leading and trailing whitespace goes. Appended to
/// `out`, which is empty.
fn collapse_whitespace(text: &str, out: &mut String) {
    if !text.is_ascii() {
        for word in text.split_whitespace() {
            if !out.is_empty() {
                out.push(' ');
            }
            out.push_str(word);
        }
        return;
    }
    // The usual command is ASCII: the same words, found byte by byte (Unicode's whitespace
    // there is tab to carriage return and space).
    let is_space = |b: &u8| matches!(b, b'\t'..=b'\r' | b' ');
    let bytes = text.as_bytes();
    // Most commands already have one space between words and none around them: copied whole.
    let collapsed = !bytes.first().is_some_and(is_space)
        && !bytes.last().is_some_and(is_space)
        && !bytes
            .windows(2)
            .any(|w| is_space(&w[0]) && (w[0] != b' ' || is_space(&w[1])));
    if collapsed && out.is_empty() {
        out.push_str(text);
        return;
    }
    let mut at = 0;
    while let Some(start) = bytes[at..]
        .iter()
        .position(|b| !is_space(b))
        .map(|n| at + n)
    {
        let end = bytes[start..]
            .iter()
            .position(is_space)
            .map_or(bytes.len(), |n| start + n);
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(&text[start..end]);
        at = end;
    }
}

/// One shell word at the start of `text` (quotes and escapes respected): `(word, rest)`.
/// The word stops at whitespace or at a `;` outside quotes. `text` has collapsed whitespace.
fn split_word(text: &str) -> (&str, &str) {
    // The collapsed text's only whitespace is a space.
    match unquoted_stop(text, |b| b == b';' || b == b' ') {
        Some(i) => (&text[..i], &text[i..]),
        None => (text, ""),
    }
}

/// The index of the first byte of `text` outside quotes and unescaped for which `stop` holds.
/// `stop` must hold only for ASCII bytes: quotes and backslashes are ASCII too (a character
/// beyond ASCII, fed byte by byte as Latin-1, is never syntax), so the index is a char boundary.
#[inline]
pub(crate) fn unquoted_stop(text: &str, stop: impl Fn(u8) -> bool) -> Option<usize> {
    let bytes = text.as_bytes();
    // Most words hold no quote and no backslash: no scanner until the first one.
    let first = bytes
        .iter()
        .position(|&b| stop(b) || matches!(b, b'\\' | b'\'' | b'"'))?;
    if stop(bytes[first]) {
        return Some(first);
    }
    let mut scanner = Scanner::default();
    bytes[first..]
        .iter()
        .position(|&b| scanner.feed(char::from(b)) && stop(b))
        .map(|i| first + i)
}

/// `NAME=value` with a shell variable name.
pub(crate) fn is_assignment(word: &str) -> bool {
    // One pass over the bytes: a letter or `_`, then letters, digits or `_` up to the `=`.
    let bytes = word.as_bytes();
    if !bytes
        .first()
        .is_some_and(|b| *b == b'_' || b.is_ascii_alphabetic())
    {
        return false;
    }
    for &b in &bytes[1..] {
        if b == b'=' {
            return true;
        }
        if !(b == b'_' || b.is_ascii_alphanumeric()) {
            return false;
        }
    }
    false
}

/// If `text` starts with a `&&` or `;` separator (after optional space), the text after it.
fn after_separator(text: &str) -> Option<&str> {
    let t = text.trim_start();
    t.strip_prefix("&&")
        .or_else(|| t.strip_prefix(';'))
        .map(str::trim_start)
}

/// Strip one leading prefix, or `None` when there is none (or nothing would remain). The
/// remainder is always a suffix of `text`.
fn strip_one_prefix(text: &str) -> Option<&str> {
    let (first, rest) = split_word(text);
    let rest = rest.trim_start();
    let remainder = match first {
        "cd" | "pushd" => {
            let (dir, after_dir) = split_word(rest);
            if dir.is_empty() {
                return None;
            }
            after_separator(after_dir)?
        }
        "export" | "env" => {
            let mut cursor = rest;
            let mut assignments = 0;
            loop {
                let (word, after) = split_word(cursor);
                if !is_assignment(word) {
                    break;
                }
                assignments += 1;
                cursor = after.trim_start();
            }
            if assignments == 0 {
                return None;
            }
            if first == "export" {
                after_separator(cursor)?
            } else {
                after_separator(cursor).unwrap_or(cursor)
            }
        }
        word if is_assignment(word) => after_separator(rest).unwrap_or(rest),
        _ => return None,
    };
    let remainder = remainder.trim();
    // Never leave a text that would read differently on a second pass (a leading `#` would
    // become a comment) or that is only a separator.
    if remainder.is_empty() || remainder.starts_with([';', '#']) || remainder.starts_with("&&") {
        return None;
    }
    Some(remainder)
}

#[cfg(test)]
mod tests {
    use super::{
        Scanner, collapse_whitespace, is_assignment, normalize_bash, split_word, unquoted_stop,
    };
    use proptest::prelude::*;

    #[test]
    fn assignments_are_a_name_then_an_equals_sign() {
        for (word, is) in [
            ("A=1", true),
            ("_x=", true),
            ("a1_b=c=d", true),
            ("1a=2", false),
            ("=x", false),
            ("a-b=1", false),
            ("abc", false),
            ("é=1", false),
            ("", false),
        ] {
            assert_eq!(is_assignment(word), is, "{word:?}");
        }
    }

    proptest! {
        /// The ASCII paths find what the char paths find.
        #[test]
        fn ascii_paths_agree_with_char_paths(text in "[a-c ;'\"\\\t\n\r\u{b}\u{c}\u{a0}é]{0,24}") {
            let mut fast = String::new();
            collapse_whitespace(&text, &mut fast);
            prop_assert_eq!(&fast, &text.split_whitespace().collect::<Vec<_>>().join(" "));
            let mut scanner = Scanner::default();
            let by_chars = fast
                .char_indices()
                .find(|&(_, ch)| scanner.feed(ch) && (ch == ';' || ch.is_whitespace()))
                .map_or((fast.as_str(), ""), |(i, _)| (&fast[..i], &fast[i..]));
            prop_assert_eq!(split_word(&fast), by_chars);
        }

        /// The search for a byte outside quotes finds what a scan of every character finds.
        #[test]
        fn unquoted_stops_are_the_scanners(text in "[a-c ;&|<>'\"\\\t\n\u{a0}é]{0,24}") {
            let stop = |b: u8| matches!(b, b' ' | b';' | b'&' | b'|' | b'<' | b'>' | b'\n');
            let mut scanner = Scanner::default();
            let by_chars = text
                .char_indices()
                .find(|&(_, ch)| scanner.feed(ch) && u8::try_from(ch).is_ok_and(stop))
                .map(|(i, _)| i);
            prop_assert_eq!(unquoted_stop(&text, stop), by_chars);
        }
    }

    /// Each row: (what the rule says, input, expected normal form).
    const CASES: &[(&str, &str, &str)] = &[
        (
            "plain command unchanged",
            "pytest -x tests",
            "pytest -x tests",
        ),
        ("CRLF becomes LF", "echo a\r\necho b", "echo a ; echo b"),
        (
            "continuation joined",
            "cargo test \\\n  --lib",
            "cargo test --lib",
        ),
        ("full-line comment dropped", "# run tests\npytest", "pytest"),
        ("trailing comment dropped", "pytest -x # quick", "pytest -x"),
        ("hash inside quotes kept", "echo 'a # b'", "echo 'a # b'"),
        (
            "hash inside double quotes kept",
            "echo \"a # b\"",
            "echo \"a # b\"",
        ),
        ("hash inside a word kept", "echo a#b $#", "echo a#b $#"),
        ("escaped quote does not open", "echo \\\" # c", "echo \\\""),
        ("lines joined with ;", "cd /p\npytest\n\n", "pytest"),
        ("whitespace collapsed", "ls   -la\t  src", "ls -la src"),
        (
            "cd && stripped",
            "cd /home/u/proj && pytest -x",
            "pytest -x",
        ),
        ("cd ; stripped", "cd /home/u/proj; pytest", "pytest"),
        ("pushd && stripped", "pushd src && make", "make"),
        ("quoted cd dir stripped", "cd \"my dir\" && ls", "ls"),
        ("bare cd kept", "cd /home/u/proj", "cd /home/u/proj"),
        ("cd with nothing after kept", "cd /p &&", "cd /p &&"),
        (
            "assignment stripped",
            "RUST_LOG=debug cargo run",
            "cargo run",
        ),
        ("several assignments", "A=1 B='x y' make all", "make all"),
        ("export prefix stripped", "export A=1 B=2 && make", "make"),
        ("env prefix stripped", "env A=1 make", "make"),
        (
            "repeated prefixes",
            "cd /p && A=1 cd src && B=2 make",
            "make",
        ),
        ("lone assignment kept", "A=1", "A=1"),
        ("not an assignment", "1A=2 make", "1A=2 make"),
        (
            "git commit kept whole",
            "cd /p && git commit -m 'x'",
            "git commit -m 'x'",
        ),
        ("empty input", "", ""),
        ("only comments", "# a\n   # b", ""),
    ];

    #[test]
    fn normaliser_rules_table() {
        for (rule, input, expected) in CASES {
            assert_eq!(
                normalize_bash(input),
                *expected,
                "rule: {rule}; input {input:?}"
            );
        }
    }

    #[test]
    fn normaliser_is_idempotent_on_table() {
        for (rule, input, _) in CASES {
            let once = normalize_bash(input);
            assert_eq!(normalize_bash(&once), once, "rule: {rule}");
        }
    }
}
