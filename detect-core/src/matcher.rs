//! The call matcher: identity, target, landed, and the lines a read returned.
//!
//! Everything the signals need from one call is computed once, into [`CallFacts`], by
//! [`CallFacts::of`]. The detector never looks at a call's JSON again.

use crate::bash::normalize_bash;
use crate::config::{DetectConfig, Rule};
use crate::model::{Call, CallStatus, MapOnly};
use crate::shell;
use serde::Deserialize;
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// How many characters of a grep / glob pattern make its target.
pub const PATTERN_TARGET_CHARS: usize = 60;
/// opencode's default `limit` of a read.
pub const DEFAULT_READ_LIMIT: u64 = 2000;

/// Canonical JSON: object keys sorted recursively, no whitespace, integers printed as integers
/// (so `1.0` and `1` match). Independent of serde_json's map order features.
pub fn canonical_json(value: &Value) -> String {
    let mut out = String::new();
    write_canonical(value, &mut out);
    out
}

fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                let _ = write!(out, "{i}");
            } else if let Some(u) = n.as_u64() {
                let _ = write!(out, "{u}");
            } else {
                let f = n.as_f64().unwrap_or(0.0);
                if f.fract() == 0.0 && f.abs() < 9.0e15 {
                    let _ = write!(out, "{}", f as i64);
                } else {
                    let _ = write!(out, "{f}");
                }
            }
        }
        Value::String(s) => write_json_string(s, out),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort_unstable();
            out.push('{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_json_string(key, out);
                out.push(':');
                write_canonical(&map[key], out);
            }
            out.push('}');
        }
    }
}

fn write_json_string(s: &str, out: &mut String) {
    out.push('"');
    for ch in s.chars() {
        match ch {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Bash input keys the model writes freely; they do not change what the call does.
const BASH_NOISE_KEYS: &[&str] = &["description", "timeout"];

/// Call identity: `tool` + canonical JSON of the input, with the bash command normalised and the
/// bash noise keys removed.
pub fn call_identity(tool: &str, input: &Value) -> String {
    identity_with_command(tool, input, None)
}

/// [`call_identity`], reusing a bash command normalised already (the matcher needs it twice).
fn identity_with_command(tool: &str, input: &Value, normalized: Option<&str>) -> String {
    let mut out = String::with_capacity(96);
    out.push_str(tool);
    out.push(' ');
    match (tool, input) {
        ("bash", Value::Object(map)) => {
            let mut keys: Vec<&String> = map
                .keys()
                .filter(|k| !BASH_NOISE_KEYS.contains(&k.as_str()))
                .collect();
            keys.sort_unstable();
            out.push('{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_json_string(key, &mut out);
                out.push(':');
                match (key.as_str(), &map[key]) {
                    ("command", Value::String(command)) => match normalized {
                        Some(n) => write_json_string(n, &mut out),
                        None => write_json_string(&normalize_bash(command), &mut out),
                    },
                    (_, value) => write_canonical(value, &mut out),
                }
            }
            out.push('}');
        }
        _ => write_canonical(input, &mut out),
    }
    out
}

/// The last path component (after `/` or `\`).
pub fn basename(path: &str) -> &str {
    let trimmed = path.trim_end_matches(['/', '\\']);
    trimmed.rsplit(['/', '\\']).next().unwrap_or(trimmed)
}

/// Resolve `path` against `directory` lexically (no file system access): relative paths are
/// joined, `.` and `..` components folded.
pub fn resolve_path(directory: Option<&str>, path: &str) -> String {
    let joined = match directory {
        Some(dir) if !path.starts_with('/') && !dir.is_empty() => format!("{dir}/{path}"),
        _ => path.to_owned(),
    };
    let absolute = joined.starts_with('/');
    let mut parts: Vec<&str> = Vec::new();
    for part in joined.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                if parts.last().is_some_and(|p| *p != "..") {
                    parts.pop();
                } else if !absolute {
                    parts.push("..");
                }
            }
            other => parts.push(other),
        }
    }
    let body = parts.join("/");
    if absolute { format!("/{body}") } else { body }
}

/// What a read call contributes to the coverage signal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadFacts {
    /// Full path of the file read.
    pub path: String,
    /// Lines returned, capped at the file's length.
    pub lines: u64,
    /// The file's length in lines.
    pub file_lines: u64,
}

/// Lines of one file a call showed (`precise`: the `reread` signal).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ViewRange {
    /// The file, resolved against the session directory.
    pub path: String,
    /// First and last line shown (1-based, inclusive).
    pub first: u64,
    pub last: u64,
}

/// Everything the detector needs from one counted call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallFacts {
    pub identity: String,
    /// The `top` key: `tool` and what the call is about (basename, first words, pattern).
    pub target: String,
    pub landed: bool,
    /// The landing is a bash command that writes files (`precise` only). The detector demotes a
    /// repeat of an earlier one (the same `sed -i` again changes nothing); [`CallFacts::of`] sees
    /// one call alone and cannot.
    pub write: bool,
    /// Set for reads of a file whose length is known.
    pub read: Option<ReadFacts>,
    /// A poll: `sleep`, then a look at something (`precise`: counts towards `slow` only).
    pub wait: bool,
    /// The lines of one file the call showed, when known (`precise`).
    pub view: Option<ViewRange>,
    /// What the call saw (`precise`, rule `repeat`): `#` and its output hash where it has one,
    /// otherwise its status and `metadata.exit`. Empty when the rule is off.
    pub result: String,
    pub start_ms: Option<i64>,
    pub end_ms: Option<i64>,
}

/// The session context a call is judged in.
#[derive(Debug, Clone, Copy)]
pub struct CallContext<'a> {
    pub directory: Option<&'a str>,
    pub line_counts: &'a BTreeMap<String, u64>,
}

/// What a call saw, for `repeat`: its output hash where it has one, otherwise its status and
/// exit code. Two calls with the same identity and result made no progress between them.
fn call_result(call: &Call) -> String {
    if let Some(hash) = &call.output_hash {
        return format!("#{hash}");
    }
    let status = if call.status == CallStatus::Error {
        "error"
    } else {
        "completed"
    };
    match call.metadata.get("exit") {
        Some(exit) => format!("{status} {exit}"),
        None => status.to_owned(),
    }
}

impl CallFacts {
    /// The facts of a call, or `None` when the call does not count (pending, running, unknown).
    pub fn of(call: &Call, ctx: CallContext<'_>, config: &DetectConfig) -> Option<Self> {
        if !call.status.is_counted() {
            return None;
        }
        let tool = call.tool.as_str();
        let str_input = |key: &str| call.input.get(key).and_then(Value::as_str);
        let normalized_command = if tool == "bash" {
            str_input("command").map(normalize_bash)
        } else {
            None
        };
        let identity = identity_with_command(tool, &call.input, normalized_command.as_deref());
        let mut shape = shell::Shape::default();
        let target = if config.is_reader(tool)
            && let Some(path) = str_input("filePath")
        {
            format!("{tool} {}", basename(path))
        } else if let Some(command) = &normalized_command {
            if config.applies(Rule::PathTargets) {
                let mut target = String::with_capacity(command.len().min(96) + 5);
                target.push_str("bash ");
                shape = shell::precise_target(command, &mut target, config.applies(Rule::Rereads));
                target
            } else {
                // The first two words, written straight into the target.
                let mut target = String::with_capacity(command.len().min(64) + 5);
                target.push_str("bash ");
                for (i, word) in command.split_whitespace().take(2).enumerate() {
                    if i > 0 {
                        target.push(' ');
                    }
                    target.push_str(word);
                }
                target
            }
        } else if config.is_search(tool)
            && let Some(pattern) = str_input("pattern")
        {
            let head: String = pattern.chars().take(PATTERN_TARGET_CHARS).collect();
            format!("{tool} {head}")
        } else {
            identity.clone()
        };
        let mut landed = is_landed(call, normalized_command.as_deref(), config);
        let mut write = false;
        if !landed
            && tool == "bash"
            && config.applies(Rule::BashWrites)
            && call.metadata.get("exit").and_then(Value::as_i64) == Some(0)
            && let Some(command) = str_input("command")
            && shell::writes_files(command)
        {
            landed = true;
            write = true;
        }
        let read = if config.is_reader(tool) {
            read_facts(call, ctx)
        } else {
            None
        };
        let view = if config.applies(Rule::Rereads) {
            view_range(call, tool, shape.view, ctx, config)
        } else {
            None
        };
        Some(Self {
            identity,
            target,
            landed,
            write,
            read,
            wait: shape.wait && config.applies(Rule::Waits),
            view,
            result: if config.applies(Rule::Repeat) {
                call_result(call)
            } else {
                String::new()
            },
            start_ms: call.start_ms(),
            end_ms: call.end_ms(),
        })
    }
}

/// A call's metadata as the matcher reads it, and nothing more: `exit`, `total_lines`,
/// `lines_read`, `diff`, and the `additions` and `deletions` of `filediff` and of each of `files`
/// (not the files' contents). Read for `detect`, it answers every question [`CallFacts::of`]
/// asks of the metadata as the whole metadata does; a metadata it cannot read (not an object,
/// a repeated key) is read whole instead.
#[derive(Deserialize)]
pub(crate) struct ReadMetadata {
    /// Kept when `null`: [`call_result`] writes it.
    #[serde(default, deserialize_with = "present")]
    exit: Option<Value>,
    total_lines: Option<Value>,
    lines_read: Option<Value>,
    diff: Option<Value>,
    filediff: Option<MapOnly<Changed>>,
    files: Option<Vec<MapOnly<Changed>>>,
}

/// What [`is_landed`] reads of a changed file.
#[derive(Deserialize)]
struct Changed {
    additions: Option<Value>,
    deletions: Option<Value>,
}

fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

impl Changed {
    fn into_value(self) -> Value {
        let mut map = Map::new();
        for (key, value) in [("additions", self.additions), ("deletions", self.deletions)] {
            if let Some(value) = value {
                map.insert(key.to_owned(), value);
            }
        }
        Value::Object(map)
    }
}

impl ReadMetadata {
    pub(crate) fn into_value(self) -> Value {
        let mut map = Map::new();
        let scalars = [
            ("exit", self.exit),
            ("total_lines", self.total_lines),
            ("lines_read", self.lines_read),
            ("diff", self.diff),
        ];
        for (key, value) in scalars {
            if let Some(value) = value {
                map.insert(key.to_owned(), value);
            }
        }
        if let Some(MapOnly(filediff)) = self.filediff {
            map.insert("filediff".to_owned(), filediff.into_value());
        }
        if let Some(files) = self.files {
            let files = files.into_iter().map(|f| f.0.into_value()).collect();
            map.insert("files".to_owned(), Value::Array(files));
        }
        Value::Object(map)
    }
}

/// Whether a call landed: a real edit, a completed write, or a successful `git commit`.
fn is_landed(call: &Call, normalized_command: Option<&str>, config: &DetectConfig) -> bool {
    let tool = call.tool.as_str();
    let meta = &call.metadata;
    if config.is_edit(tool) {
        let has_diff = meta
            .get("diff")
            .and_then(Value::as_str)
            .is_some_and(|d| !d.trim().is_empty());
        let changed = |v: &Value| {
            let n = |k: &str| v.get(k).and_then(Value::as_u64).unwrap_or(0);
            n("additions").saturating_add(n("deletions")) > 0
        };
        let filediff = meta.get("filediff").is_some_and(changed);
        let files = meta
            .get("files")
            .and_then(Value::as_array)
            .is_some_and(|files| files.iter().any(changed));
        return has_diff || filediff || files;
    }
    if config.is_write(tool) {
        return call.status == CallStatus::Completed;
    }
    if let Some(command) = normalized_command {
        return command.contains("git commit")
            && meta.get("exit").and_then(Value::as_i64) == Some(0);
    }
    false
}

/// The lines a call showed: a bash viewer's (from its command; a whole-file view when the file's
/// length is known), or a reader tool's with an `offset` or `limit` (a limit alone from line 1;
/// no limit: to the end of a file of known length).
fn view_range(
    call: &Call,
    tool: &str,
    shown: Option<(String, Option<(u64, u64)>)>,
    ctx: CallContext<'_>,
    config: &DetectConfig,
) -> Option<ViewRange> {
    let known_length = |path: &str| {
        call.metadata
            .get("total_lines")
            .and_then(Value::as_u64)
            .or_else(|| ctx.line_counts.get(path).copied())
    };
    let (path, first, last) = if let Some((file, lines)) = shown {
        let path = resolve_path(ctx.directory, &file);
        let (a, b) = match lines {
            Some(range) => range,
            None => (1, known_length(&path)?),
        };
        (path, a, b)
    } else if config.is_reader(tool) {
        let path = resolve_path(ctx.directory, call.input.get("filePath")?.as_str()?);
        let number = |key: &str| call.input.get(key).and_then(Value::as_u64);
        let (offset, limit) = (number("offset"), number("limit"));
        if offset.is_none() && limit.is_none() {
            return None;
        }
        let first = offset.unwrap_or(1).max(1);
        let last = match limit {
            // Saturating: offset and limit come from the model and can be any u64.
            Some(l) => first.saturating_add(l.max(1) - 1),
            None => known_length(&path)?,
        };
        let last = known_length(&path).map_or(last, |n| last.min(n.max(first)));
        (path, first, last)
    } else {
        return None;
    };
    (last >= first).then_some(ViewRange { path, first, last })
}

/// Parse opencode's "total N lines" note from a read's output text.
pub fn total_lines_in_output(output: &str) -> Option<u64> {
    let at = output.rfind("total ")?;
    let rest = &output[at + "total ".len()..];
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    if digits.is_empty() || !rest[digits.len()..].starts_with(" line") {
        return None;
    }
    digits.parse().ok()
}

/// The largest file length (and lines per read) the coverage signal counts.
pub const MAX_FILE_LINES: u64 = 1 << 40;

/// Lines returned by a read: `metadata.lines_read` when known, else
/// `min(limit or 2000, L - offset + 1)`, always capped at the file length `L`. `L` is the read's
/// `metadata.total_lines`, else the session's `line_counts`; unknown `L` gives `None`.
fn read_facts(call: &Call, ctx: CallContext<'_>) -> Option<ReadFacts> {
    let raw_path = call.input.get("filePath")?.as_str()?;
    let path = resolve_path(ctx.directory, raw_path);
    let meta_u64 = |key: &str| call.metadata.get(key).and_then(Value::as_u64);
    // Capped at 2^40 lines (no real file comes near): the window sums lines over its reads
    // and takes them away again as reads leave it, so each term must keep every sum in range.
    let file_lines = meta_u64("total_lines")
        .or_else(|| ctx.line_counts.get(&path).copied())?
        .min(MAX_FILE_LINES);
    let input_u64 = |key: &str| {
        call.input.get(key).and_then(|v| {
            v.as_u64().or_else(|| {
                v.as_f64()
                    .filter(|f| *f >= 0.0 && f.is_finite())
                    .map(|f| f as u64)
            })
        })
    };
    let lines = match meta_u64("lines_read") {
        Some(n) => n,
        None => {
            let offset = input_u64("offset").unwrap_or(1).max(1);
            let limit = input_u64("limit").unwrap_or(DEFAULT_READ_LIMIT);
            limit.min(file_lines.saturating_add(1).saturating_sub(offset))
        }
    };
    Some(ReadFacts {
        path,
        lines: lines.min(file_lines),
        file_lines,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn identity_sorts_keys_and_drops_bash_noise() {
        let a = call_identity(
            "bash",
            &json!({"command": "cd /p && ls", "description": "list"}),
        );
        let b = call_identity("bash", &json!({"timeout": 5, "command": "ls"}));
        assert_eq!(a, b);
        let c = call_identity("read", &json!({"filePath": "/a", "offset": 1}));
        let d = call_identity("read", &json!({"offset": 1.0, "filePath": "/a"}));
        assert_eq!(c, d);
        assert_ne!(
            c,
            call_identity("read", &json!({"filePath": "/a", "offset": 2}))
        );
        // `description` is noise for bash only.
        assert_ne!(
            call_identity("task", &json!({"description": "a"})),
            call_identity("task", &json!({"description": "b"}))
        );
    }

    #[test]
    fn basenames_and_paths() {
        assert_eq!(basename("/a/b/mod.rs"), "mod.rs");
        assert_eq!(basename("mod.rs"), "mod.rs");
        assert_eq!(basename("/a/b/"), "b");
        assert_eq!(
            resolve_path(Some("/home/u/p"), "src/../lib.rs"),
            "/home/u/p/lib.rs"
        );
        assert_eq!(resolve_path(Some("/home/u/p"), "/etc/./x"), "/etc/x");
        assert_eq!(resolve_path(None, "a/./b"), "a/b");
    }

    /// Found by `cargo xtask fuzz` (session-file): a read whose offset plus limit passes u64::MAX
    /// panicked (debug) or wrapped into a bogus range (release).
    #[test]
    fn a_read_range_at_the_end_of_u64_saturates() {
        let config = DetectConfig::with_profile(crate::Profile::Precise);
        let counts = BTreeMap::new();
        let ctx = CallContext {
            directory: Some("/repo"),
            line_counts: &counts,
        };
        let read = |offset: u64, limit: u64| Call {
            tool: "read".to_owned(),
            input: json!({"filePath": "a.py", "offset": offset, "limit": limit}),
            status: crate::CallStatus::Completed,
            metadata: Value::Null,
            time: None,
            output_hash: None,
        };
        for (offset, limit, first, last) in [
            (u64::MAX, u64::MAX, u64::MAX, u64::MAX),
            (u64::MAX - 1, 5, u64::MAX - 1, u64::MAX),
            (10, 5, 10, 14),
        ] {
            let facts = CallFacts::of(&read(offset, limit), ctx, &config).unwrap();
            let view = facts
                .view
                .expect("a read with offset and limit shows a range");
            assert_eq!((view.first, view.last), (first, last), "{offset} {limit}");
        }
    }

    #[test]
    fn total_lines_note() {
        assert_eq!(
            total_lines_in_output("...\n(End of file - total 212 lines)\n"),
            Some(212)
        );
        assert_eq!(total_lines_in_output("no note"), None);
        assert_eq!(total_lines_in_output("total x lines"), None);
    }
}
