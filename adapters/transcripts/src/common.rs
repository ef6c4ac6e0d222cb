//! What the agents' readers share: a call kept until taken, titles from prompts, timestamps,
//! the small reshaping of tool inputs, numbers read out of result texts.

use detect_core::{Call, CallStatus, CallTime};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;

/// Calls waiting for their result at most; the oldest is dropped (an orphan) past it.
pub const MAX_PENDING: usize = 512;

/// What a reader counted in a file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counters {
    /// Non-blank lines read.
    pub lines: u64,
    /// Lines that are not a JSON object: skipped.
    pub corrupt_lines: u64,
    /// Lines too long for the tail's budget: dropped unread.
    pub oversized_lines: u64,
    /// Lines dropped past a reader's bound (Claude Code's inline sidechains past their limit,
    /// Gemini messages past theirs).
    pub dropped_lines: u64,
    /// Tool calls read (distinct ids).
    pub calls: u64,
    /// Calls paired with their result.
    pub completed: u64,
    /// Calls that never got a result: dropped past [`MAX_PENDING`], or still waiting when the
    /// whole file was read (a reader's `finish`).
    pub orphans: u64,
    /// Results whose call was not seen (or was already answered).
    pub unmatched_results: u64,
    /// Records of a type the reader does not know, by type (at most [`UNKNOWN_TYPES`] names;
    /// past them, under `…`): skipped, never fatal, named so a new agent version's records
    /// show (`agentwatch doctor`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub unknown_types: BTreeMap<String, u64>,
}

/// Names of unknown record types counted at most, per file.
pub const UNKNOWN_TYPES: usize = 32;

impl Counters {
    /// One more record of a type the reader does not know.
    pub(crate) fn unknown(&mut self, kind: &str) {
        let name =
            if self.unknown_types.len() < UNKNOWN_TYPES || self.unknown_types.contains_key(kind) {
                kind
            } else {
                "…"
            };
        let short: String = name.chars().take(64).collect();
        *self.unknown_types.entry(short).or_default() += 1;
    }
}

/// Whether `text` can be one JSON object: between blanks, it opens with `{` and closes with
/// `}`. Asked before parsing a line to tell a format: a document of one session per line (a
/// session file of 100 KB lines, each ending `},`) then costs nothing to pass over, where
/// parsing each line to its end to learn it is not one object cost 5% of `detect` on a
/// 227 MB file.
pub fn may_be_object(text: &[u8]) -> bool {
    let text = text.trim_ascii();
    text.first() == Some(&b'{') && text.last() == Some(&b'}')
}

/// The lines of a whole file, without their `\n` (and a `\r` before it).
pub(crate) fn file_lines(bytes: &[u8]) -> impl Iterator<Item = &[u8]> {
    bytes
        .split(|b| *b == b'\n')
        .map(|line| line.strip_suffix(b"\r").unwrap_or(line))
}

/// Count a line a reader was pushed: `false` for a blank one (ignored, not counted).
pub(crate) fn count_line(line: &[u8], counters: &mut Counters) -> bool {
    if line.iter().all(u8::is_ascii_whitespace) {
        return false;
    }
    counters.lines += 1;
    true
}

/// Characters of a prompt kept as a title.
pub const TITLE_CHARS: usize = 100;

/// A call completed (or, at a reader's `finish`, left without a result), kept until taken.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Finished {
    pub tool: String,
    pub input: Value,
    pub status: CallStatus,
    #[serde(default)]
    pub metadata: Value,
    pub start: Option<i64>,
    pub end: Option<i64>,
    pub output_hash: Option<String>,
}

impl From<Finished> for Call {
    fn from(f: Finished) -> Call {
        let time = (f.start.is_some() || f.end.is_some()).then_some(CallTime {
            start: f.start,
            end: f.end,
        });
        Call {
            tool: f.tool,
            input: f.input,
            status: f.status,
            metadata: f.metadata,
            time,
            output_hash: f.output_hash,
        }
    }
}

/// A prompt's title: its whitespace collapsed, at most [`TITLE_CHARS`] characters; `None` for
/// text an agent writes itself into the user's turn (`<command-name>`, `<system-reminder>`,
/// `<environment_context>`, `<session_context>`, …).
pub(crate) fn prompt_title(text: &str) -> Option<String> {
    let text = text.trim_start();
    if text.starts_with('<') {
        return None;
    }
    trimmed_title(text, TITLE_CHARS)
}

/// `text` with its whitespace collapsed, cut at `max_chars` characters (with `…`); `None` when
/// blank.
pub(crate) fn trimmed_title(text: &str, max_chars: usize) -> Option<String> {
    let mut title = String::new();
    let mut chars = 0;
    for word in text.split_whitespace() {
        if !title.is_empty() {
            title.push(' ');
            chars += 1;
        }
        for c in word.chars() {
            if chars >= max_chars {
                title.push('…');
                return Some(title);
            }
            title.push(c);
            chars += 1;
        }
    }
    (!title.is_empty()).then_some(title)
}

/// Unix milliseconds of an RFC 3339 timestamp (`2026-12-06T00:28:08.631Z`).
pub(crate) fn unix_ms(timestamp: &str) -> Option<i64> {
    timestamp
        .parse::<jiff::Timestamp>()
        .ok()
        .map(|t| t.as_millisecond())
}

/// The detector reads an input object; anything else the model sent is kept under `value`.
pub(crate) fn as_object(input: Value) -> Value {
    match input {
        Value::Object(_) => input,
        Value::Null => Value::Object(Map::new()),
        other => json!({ "value": other }),
    }
}

/// `input` with keys renamed (a key already present under the new name is left alone).
pub(crate) fn renamed(mut input: Value, renames: &[(&str, &str)]) -> Value {
    if let Value::Object(map) = &mut input {
        for (from, to) in renames {
            if !map.contains_key(*to)
                && let Some(value) = map.remove(*from)
            {
                map.insert((*to).to_owned(), value);
            }
        }
    }
    input
}

pub(crate) fn object_or_null(map: Map<String, Value>) -> Value {
    if map.is_empty() {
        Value::Null
    } else {
        Value::Object(map)
    }
}

/// The whole number written right after the first `label` in `text` (`Exit code 1`,
/// `Process exited with code 0`, `Exit Code: -1`), at most 18 digits.
pub(crate) fn number_after(text: &str, label: &str) -> Option<i64> {
    let at = text.find(label)?;
    let rest = &text[at + label.len()..];
    let negative = rest.starts_with('-');
    let digits: String = rest[usize::from(negative)..]
        .chars()
        .take_while(char::is_ascii_digit)
        .take(18)
        .collect();
    let code: i64 = digits.parse().ok()?;
    Some(if negative { -code } else { code })
}

/// A shell command from an argv: the script of `bash -lc SCRIPT` (and `sh -c`, `zsh -lc`, …),
/// else the words joined, each quoted when it needs it.
pub(crate) fn argv_command(argv: &[Value]) -> Option<String> {
    let words: Vec<&str> = argv.iter().map(Value::as_str).collect::<Option<_>>()?;
    if let [shell, flag, script] = words.as_slice() {
        let shell = shell.rsplit('/').next().unwrap_or(shell);
        let is_shell = matches!(shell, "bash" | "sh" | "zsh" | "dash");
        if is_shell && matches!(*flag, "-c" | "-lc" | "-ic" | "-l -c") {
            return Some((*script).to_owned());
        }
    }
    let quoted: Vec<String> = words.iter().map(|w| shell_word(w)).collect();
    (!quoted.is_empty()).then(|| quoted.join(" "))
}

/// One word for a shell: as is when it is plain, else in single quotes.
fn shell_word(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./=:,+@%".contains(&b));
    if plain {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

/// A string longer than this, in a tool input a reader keeps for a whole session (Gemini's,
/// replayed after a rewind), is kept as its length and hash: the call's identity still tells
/// equal inputs from different ones, without holding a written file's text.
pub(crate) const KEPT_STRING_BYTES: usize = 4096;

/// `value` with every string longer than [`KEPT_STRING_BYTES`] replaced by
/// `"(N bytes, fnv HASH)"`, except the values of the keys in `keep` (a bash `command`, which
/// the detector parses).
pub(crate) fn compact_long_strings(value: &mut Value, keep: &[&str]) {
    match value {
        Value::String(s) if s.len() > KEPT_STRING_BYTES => {
            *s = format!("({} bytes, fnv {})", s.len(), detect_core::text_hash(s));
        }
        Value::Array(items) => items.iter_mut().for_each(|v| compact_long_strings(v, keep)),
        Value::Object(map) => {
            for (key, v) in map.iter_mut() {
                if !keep.contains(&key.as_str()) {
                    compact_long_strings(v, keep);
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `may_be_object` passes over no line that parses as one JSON object.
    #[test]
    fn what_may_be_one_object() {
        for (line, may) in [
            (r#"{"type":"user"}"#, true),
            ("  {\"a\":1}\r", true),
            ("{}", true),
            (r#"{"id":"s1","calls":[]},"#, false),
            (r#"{"format":"agentwatch-sessions/1","sessions":["#, false),
            ("[1]", false),
            ("{", false),
            ("", false),
        ] {
            assert_eq!(may_be_object(line.as_bytes()), may, "{line:?}");
            let parses =
                serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(line).is_ok();
            assert!(may || !parses, "{line:?} parses as an object");
        }
    }

    #[test]
    fn numbers_after_labels() {
        for (text, label, want) in [
            ("Exit code 1", "Exit code ", Some(1)),
            (
                "x\nProcess exited with code 127\n",
                "Process exited with code ",
                Some(127),
            ),
            ("Exit Code: -1", "Exit Code: ", Some(-1)),
            ("Exit code: none", "Exit code: ", None),
            ("nothing", "Exit code ", None),
            (
                "Exit code 99999999999999999999999",
                "Exit code ",
                Some(999_999_999_999_999_999),
            ),
        ] {
            assert_eq!(number_after(text, label), want, "{text}");
        }
    }

    #[test]
    fn argv_commands() {
        let argv = |words: &[&str]| -> Vec<Value> { words.iter().map(|w| json!(w)).collect() };
        assert_eq!(
            argv_command(&argv(&["bash", "-lc", "cargo test && ls"])).as_deref(),
            Some("cargo test && ls")
        );
        assert_eq!(
            argv_command(&argv(&["/bin/sh", "-c", "ls"])).as_deref(),
            Some("ls")
        );
        assert_eq!(
            argv_command(&argv(&["rg", "-n", "fn main", "src"])).as_deref(),
            Some("rg -n 'fn main' src")
        );
        assert_eq!(
            argv_command(&argv(&["echo", "it's"])).as_deref(),
            Some(r"echo 'it'\''s'")
        );
        assert_eq!(argv_command(&[json!(1)]), None);
        assert_eq!(argv_command(&[]), None);
    }

    #[test]
    fn long_strings_are_kept_as_their_hash_except_kept_keys() {
        let long = "x".repeat(KEPT_STRING_BYTES + 1);
        let mut v = json!({"content": long, "command": long, "list": [long], "short": "s"});
        compact_long_strings(&mut v, &["command"]);
        let hashed = format!(
            "({} bytes, fnv {})",
            KEPT_STRING_BYTES + 1,
            detect_core::text_hash(&long)
        );
        assert_eq!(v["content"], json!(hashed));
        assert_eq!(v["list"][0], json!(hashed));
        assert_eq!(v["command"], json!(long));
        assert_eq!(v["short"], "s");
    }
}

/// The metadata key of a blocked call's refusal: agentwatch's own reason, as the agent recorded
/// it (from [`detect_core::HOOK_MARKER`] on), so the watch can tell what the hook said (a
/// refusal, or that it stopped the session).
pub const REFUSAL_KEY: &str = "refusal";

/// Characters of a refusal kept.
const REFUSAL_CHARS: usize = 600;

/// `metadata` of a call agentwatch's hook refused, with the reason found in `output` (the
/// agent's record of the refusal, which quotes it) under [`REFUSAL_KEY`].
pub(crate) fn with_refusal(metadata: Value, output: &str) -> Value {
    let Some(at) = output.find(detect_core::HOOK_MARKER) else {
        return metadata;
    };
    let reason = shortened(output[at..].trim_end(), REFUSAL_CHARS);
    let mut map = match metadata {
        Value::Object(map) => map,
        _ => Map::new(),
    };
    map.insert(REFUSAL_KEY.to_owned(), Value::String(reason));
    Value::Object(map)
}

/// Characters of an output kept as its excerpt.
pub const EXCERPT_CHARS: usize = 160;

/// The metadata key of a call's output excerpt ([`excerpt`]), set by a reader asked for them
/// (`with_excerpts`); the detector does not read it.
pub const EXCERPT_KEY: &str = "excerpt";

/// The line of a tool's output a person reads first: the last line that reads as an error
/// (a traceback's last line, `error: …`, `FAILED …`), else its last line; the agents' own
/// framing left out (`Exit code: 1`, `Wall time: …`, a markup tag alone on its line) and its
/// labels taken off (`Output: ` before the text); at most [`EXCERPT_CHARS`] characters,
/// shortened in the middle. `None` for an output with no such line.
pub fn excerpt(output: &str) -> Option<String> {
    const ERROR_WORDS: &[&str] = &[
        "error",
        "exception",
        "failed",
        "fatal",
        "not found",
        "no such",
    ];
    let mut last = None;
    let mut last_error = None;
    for line in output.lines().filter_map(content_of) {
        let lower = line.to_ascii_lowercase();
        if ERROR_WORDS.iter().any(|w| lower.contains(w)) {
            last_error = Some(line);
        }
        last = Some(line);
    }
    last_error
        .or(last)
        .map(|line| shortened(line, EXCERPT_CHARS))
}

/// A line of output without the agent's framing: `None` for a line that is only framing.
fn content_of(line: &str) -> Option<&str> {
    const DROPPED: &[&str] = &[
        "exit code",
        "process exited with code",
        "process group pgid",
        "background pids",
        "signal:",
        "wall time",
        "chunk id",
        "original token count",
        "command:",
        "directory:",
        "error: (none)",
    ];
    const LABELS: &[&str] = &["output:", "stdout:", "stderr:"];
    let line = line.trim();
    let lower = line.to_ascii_lowercase();
    let tag_alone = line.starts_with('<') && line.ends_with('>') && !line[1..].contains('<');
    if line.is_empty() || tag_alone || DROPPED.iter().any(|f| lower.starts_with(f)) {
        return None;
    }
    let content = LABELS
        .iter()
        .find(|l| lower.starts_with(*l))
        .map_or(line, |l| line[l.len()..].trim());
    (!content.is_empty() && content != "(empty)").then_some(content)
}

/// `text` at most `max` characters, cut in the middle (`…`) when longer.
pub fn shortened(text: &str, max: usize) -> String {
    let count = text.chars().count();
    if count <= max {
        return text.to_owned();
    }
    let head = max.saturating_sub(1) / 2;
    let tail = max.saturating_sub(1) - head;
    let mut out: String = text.chars().take(head).collect();
    out.push('…');
    out.extend(text.chars().skip(count - tail));
    out
}

/// `metadata` with what a call's `output` says beyond its hash, as every source records it: for
/// a shell call (`bash`), the commit it shows it made (`committed`, its hash:
/// [`detect_core::output_commit`], as `Call::with_output` records it); with `excerpts`, the
/// output's excerpt ([`excerpt`]). An object is given the keys; `null` becomes an object
/// holding them.
pub(crate) fn with_output_facts(
    metadata: Value,
    bash: bool,
    output: &str,
    excerpts: bool,
) -> Value {
    let commit = bash.then(|| detect_core::output_commit(output)).flatten();
    let text = excerpts.then(|| excerpt(output)).flatten();
    if commit.is_none() && text.is_none() {
        return metadata;
    }
    let mut map = match metadata {
        Value::Object(map) => map,
        Value::Null => Map::new(),
        other => return other,
    };
    if let Some(commit) = commit {
        map.insert(detect_core::COMMITTED_KEY.to_owned(), Value::from(commit));
    }
    if let Some(text) = text {
        map.insert(EXCERPT_KEY.to_owned(), Value::String(text));
    }
    Value::Object(map)
}

#[cfg(test)]
mod excerpt_tests {
    use super::*;

    /// Table: (output, excerpt).
    #[test]
    fn the_line_a_person_reads_first() {
        let rows = [
            (
                "Traceback (most recent call last):\n  File \"<string>\", line 1, in <module>\nModuleNotFoundError: No module named 'nosuchmodule'\n",
                Some("ModuleNotFoundError: No module named 'nosuchmodule'"),
            ),
            (
                "Exit code: 1\nOutput:\n===== 1 failed, 3 passed in 0.12s =====\n",
                Some("===== 1 failed, 3 passed in 0.12s ====="),
            ),
            (
                "Process exited with code 0\nOutput:\nhello\n",
                Some("hello"),
            ),
            ("a.py\nb.py\n", Some("b.py")),
            ("\n  \n", None),
            (
                "<untrusted_context>\nCommand: sh check.sh\nDirectory: (root)\nOutput: check failed: no value\nError: (none)\nExit Code: 1\n</untrusted_context>\n",
                Some("check failed: no value"),
            ),
        ];
        for (output, expected) in rows {
            assert_eq!(excerpt(output).as_deref(), expected, "{output:?}");
        }
    }

    #[test]
    fn a_long_line_is_cut_in_the_middle() {
        let line = format!("error: {}", "x".repeat(400));
        let cut = excerpt(&line).unwrap();
        assert_eq!(cut.chars().count(), EXCERPT_CHARS);
        assert!(cut.starts_with("error: xx") && cut.contains('…'));
        assert_eq!(shortened("short", 10), "short");
    }
}
