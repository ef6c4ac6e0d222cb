//! Helpers shared by the integration tests: counting a transcript's tool calls without the
//! reader (a plain `serde_json::Value` walk per agent), the call at which a watcher reading a
//! session call by call first flags it, and scrubbing real transcripts into fixtures.
#![allow(dead_code)]

use agentwatch_transcripts::{
    ClaudeReader, CodexReader, FileCursor, GeminiReader, NewText, read_new,
};
use detect_core::{Call, DetectConfig, Session, SessionDetector, judge_sessions};
use serde_json::Value;
use std::path::Path;

/// The `tool_use` blocks of a transcript's assistant lines, `(id, name)` in file order, each id
/// once: counted with a plain `serde_json::Value` walk, independently of the reader.
pub fn tool_uses(bytes: &[u8]) -> Vec<(String, String)> {
    let mut seen = std::collections::HashSet::new();
    let mut uses = Vec::new();
    for line in bytes.split(|b| *b == b'\n') {
        let Ok(value) = serde_json::from_slice::<Value>(line) else {
            continue;
        };
        if value["type"] != "assistant" {
            continue;
        }
        for block in value["message"]["content"].as_array().into_iter().flatten() {
            if block["type"] == "tool_use" {
                let id = block["id"].as_str().unwrap_or_default().to_owned();
                if seen.insert(id.clone()) {
                    uses.push((id, block["name"].as_str().unwrap_or_default().to_owned()));
                }
            }
        }
    }
    uses
}

/// The tool_use ids answered by a tool_result in the transcript.
pub fn answered_ids(bytes: &[u8]) -> std::collections::HashSet<String> {
    let mut ids = std::collections::HashSet::new();
    for line in bytes.split(|b| *b == b'\n') {
        let Ok(value) = serde_json::from_slice::<Value>(line) else {
            continue;
        };
        if value["type"] != "user" {
            continue;
        }
        for block in value["message"]["content"].as_array().into_iter().flatten() {
            if block["type"] == "tool_result" {
                ids.insert(block["tool_use_id"].as_str().unwrap_or_default().to_owned());
            }
        }
    }
    ids
}

/// The calls of a Codex rollout (`response_item` `function_call`, `custom_tool_call`,
/// `local_shell_call`), `(call_id, name)` in file order, each id once.
pub fn codex_calls(bytes: &[u8]) -> Vec<(String, String)> {
    let mut seen = std::collections::HashSet::new();
    let mut calls = Vec::new();
    for line in bytes.split(|b| *b == b'\n') {
        let Ok(value) = serde_json::from_slice::<Value>(line) else {
            continue;
        };
        let item = if value["type"] == "response_item" {
            &value["payload"]
        } else {
            &value
        };
        let kind = item["type"].as_str().unwrap_or_default();
        if !["function_call", "custom_tool_call", "local_shell_call"].contains(&kind) {
            continue;
        }
        let id = item["call_id"].as_str().unwrap_or_default().to_owned();
        if seen.insert(id.clone()) {
            calls.push((id, item["name"].as_str().unwrap_or(kind).to_owned()));
        }
    }
    calls
}

/// The call ids a Codex rollout answers (`*_output` items).
pub fn codex_answered(bytes: &[u8]) -> std::collections::HashSet<String> {
    let mut ids = std::collections::HashSet::new();
    for line in bytes.split(|b| *b == b'\n') {
        let Ok(value) = serde_json::from_slice::<Value>(line) else {
            continue;
        };
        let item = &value["payload"];
        if item["type"]
            .as_str()
            .is_some_and(|t| t.ends_with("_output"))
        {
            ids.insert(item["call_id"].as_str().unwrap_or_default().to_owned());
        }
    }
    ids
}

/// The finished tool calls of a Gemini session (`toolCalls[]` entries with status
/// `success`, `error` or `cancelled`, in messages and in `$set.messages` checkpoints, or
/// in the `messages` of an older whole-file `.json`), `(id, name)` in the order first seen
/// finished, each id once.
pub fn gemini_calls(bytes: &[u8]) -> Vec<(String, String)> {
    let mut seen = std::collections::HashSet::new();
    let mut calls = Vec::new();
    let whole = serde_json::from_slice::<Value>(bytes)
        .ok()
        .filter(Value::is_object);
    let lines: Vec<Value> = match whole {
        Some(doc) => vec![doc],
        None => bytes
            .split(|b| *b == b'\n')
            .filter_map(|line| serde_json::from_slice::<Value>(line).ok())
            .collect(),
    };
    for value in lines {
        let mut messages = vec![&value];
        messages.extend(value["$set"]["messages"].as_array().into_iter().flatten());
        messages.extend(value["messages"].as_array().into_iter().flatten());
        for message in messages {
            for call in message["toolCalls"].as_array().into_iter().flatten() {
                let done = matches!(
                    call["status"].as_str(),
                    Some("success" | "error" | "cancelled")
                );
                let id = call["id"].as_str().unwrap_or_default().to_owned();
                if done && seen.insert(id.clone()) {
                    calls.push((id, call["name"].as_str().unwrap_or_default().to_owned()));
                }
            }
        }
    }
    calls
}

/// The call (1-based) at which a watcher reading `session` call by call with the default
/// profile first flags it; `None` when it never does.
pub fn first_flag_at(session: &Session) -> Option<usize> {
    let config = DetectConfig::default();
    let mut detector = SessionDetector::new(session, &config);
    for (i, call) in session.calls.iter().enumerate() {
        detector.push(call);
        if detector.verdict().flagged {
            return Some(i + 1);
        }
    }
    None
}

/// A real transcript made fit to commit: every occurrence of each `(from, to)` replaced
/// (machine paths), and in records that are not conversation (`attachment`, `api-request*`,
/// …) every string longer than 160 characters replaced by its length (system prompts, tool
/// lists, skill texts: large, and not ours to copy; their keys come out sorted).
/// Conversation lines (`user`, `assistant`) are kept byte for byte.
pub fn scrub(bytes: &[u8], replacements: &[(String, String)]) -> Vec<u8> {
    scrub_with(bytes, replacements, |value| {
        matches!(value["type"].as_str(), Some("user" | "assistant"))
    })
}

/// [`scrub`] with the conversation records told by `keep` (kept byte for byte).
pub fn scrub_with(
    bytes: &[u8],
    replacements: &[(String, String)],
    keep: impl Fn(&Value) -> bool,
) -> Vec<u8> {
    let mut text = String::from_utf8_lossy(bytes).into_owned();
    for (from, to) in replacements {
        text = text.replace(from.as_str(), to);
    }
    let mut out = Vec::new();
    for line in text.lines() {
        let Ok(mut value) = serde_json::from_str::<Value>(line) else {
            out.extend_from_slice(line.as_bytes());
            out.push(b'\n');
            continue;
        };
        if keep(&value) {
            // As written, in Claude Code's key order.
            out.extend_from_slice(line.as_bytes());
        } else {
            shorten_strings(&mut value);
            out.extend_from_slice(value.to_string().as_bytes());
        }
        out.push(b'\n');
    }
    out
}

pub fn shorten_strings(value: &mut Value) {
    match value {
        Value::String(s) if s.chars().count() > 160 => {
            *s = format!("(scrubbed: {} characters)", s.chars().count());
        }
        Value::Array(items) => items.iter_mut().for_each(shorten_strings),
        Value::Object(map) => map.values_mut().for_each(shorten_strings),
        _ => {}
    }
}

/// The roots of the flagged trees of `sessions` under `config`.
pub fn flagged(sessions: &[Session], config: &DetectConfig) -> Vec<String> {
    judge_sessions(sessions, config)
        .trees
        .into_iter()
        .filter(|t| t.flagged)
        .map(|t| t.root)
        .collect()
}

/// `git ARGS` in `dir` as a test user; fails the test when git does.
pub fn git(dir: &Path, args: &[&str]) {
    let out = std::process::Command::new("git")
        .args([
            "-c",
            "user.name=Test",
            "-c",
            "user.email=test@example.invalid",
        ])
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "Test")
        .env("GIT_AUTHOR_EMAIL", "test@example.invalid")
        .env("GIT_COMMITTER_NAME", "Test")
        .env("GIT_COMMITTER_EMAIL", "test@example.invalid")
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A git repository in `dir` holding `files` (paths relative to it), committed.
pub fn init_repo(dir: &Path, files: &[(&str, &str)]) {
    for (name, text) in files {
        let path = dir.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    git(dir, &["init", "-q", "-b", "main"]);
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-qm", "start"]);
}

/// A reader fed by the tail, as a source drives it.
pub trait Tailed {
    fn reset(&mut self);
    fn push_text(&mut self, new: &NewText);
    /// Take the new calls into what a detector holds (`held`).
    fn take_into(&mut self, held: &mut Vec<Call>);
}

impl Tailed for ClaudeReader {
    fn reset(&mut self) {
        ClaudeReader::reset(self);
    }
    fn push_text(&mut self, new: &NewText) {
        ClaudeReader::push_text(self, new);
    }
    fn take_into(&mut self, held: &mut Vec<Call>) {
        held.extend(self.take_calls());
    }
}

impl Tailed for CodexReader {
    fn reset(&mut self) {
        CodexReader::reset(self);
    }
    fn push_text(&mut self, new: &NewText) {
        CodexReader::push_text(self, new);
    }
    fn take_into(&mut self, held: &mut Vec<Call>) {
        held.extend(self.take_calls());
    }
}

impl Tailed for GeminiReader {
    fn reset(&mut self) {
        GeminiReader::reset(self);
    }
    fn push_text(&mut self, new: &NewText) {
        GeminiReader::push_text(self, new);
    }
    /// By the reader's contract: a rewound take is the whole history.
    fn take_into(&mut self, held: &mut Vec<Call>) {
        let calls = self.take_calls();
        if self.rewound() {
            held.clear();
        }
        held.extend(calls);
    }
}

/// Read what is new in `path` into `reader` (reset when the tail restarts), at most
/// `budget` bytes a call; whether the tail restarted.
pub fn catch_up<R: Tailed>(
    path: &Path,
    cursor: &mut FileCursor,
    reader: &mut R,
    budget: usize,
) -> bool {
    let mut restarted = false;
    loop {
        let new = read_new(path, cursor, budget).unwrap();
        if new.restarted {
            reader.reset();
            restarted = true;
        }
        reader.push_text(&new);
        *cursor = new.cursor;
        if !new.more {
            return restarted;
        }
    }
}

/// Read `bytes` through a file grown `piece` bytes at a time, taking after each: the calls a
/// detector holds at the end, and the reader. The file only grows, so the tail never
/// restarts.
pub fn tail_in_pieces<R: Tailed>(bytes: &[u8], mut reader: R, piece: usize) -> (Vec<Call>, R) {
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.jsonl");
    let mut file = std::fs::File::create(&path).unwrap();
    let mut cursor = FileCursor::default();
    let mut held = Vec::new();
    for chunk in bytes.chunks(piece) {
        file.write_all(chunk).unwrap();
        assert!(!catch_up(&path, &mut cursor, &mut reader, 1 << 20));
        reader.take_into(&mut held);
    }
    (held, reader)
}
