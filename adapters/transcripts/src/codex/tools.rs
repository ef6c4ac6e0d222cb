//! Codex CLI's tools mapped onto the detector's call model (opencode's tool names and input
//! keys), so detect-core stays agent-agnostic:
//!
//! | Codex | detector | input | metadata |
//! |---|---|---|---|
//! | `exec_command` (`cmd`: a string or an argv), `shell`, `shell_command`, `container.exec`, `local_shell_call` | `bash` | `command` (+ `workdir`) | `exit`: structured (`CommandExecution`, `exec_command_end`, `metadata.exit_code`) else `Process exited with code N` / `Exit code: N`; unknown while the process runs |
//! | `apply_patch` (freeform `custom_tool_call`, or JSON `{input}`) | `apply_patch` | `patchText` | `diff`, `files` (per file `filePath`, `type`, `additions`, `deletions`) only when it landed |
//! | `write_stdin` with empty `chars`, `wait_agent`, `wait` | `poll` | `session_id` / `targets` | |
//! | `write_stdin` with `chars` | `write_stdin` | `session_id`, `chars` | |
//! | `read_file` | `read` | `filePath`, `offset`, `limit` | |
//! | `grep_files` | `grep` | `pattern`, `path`, `include` | |
//! | `spawn_agent` | `task` | as sent | `toolUseId`, `agentId`, `nickname` (the child thread) |
//! | `web_search_call` | `websearch` | `query` | |
//! | anything else (`update_plan`, `view_image`, `mcp__…`) | unchanged | as sent | |
//!
//! Arguments that are not JSON (a redacted or truncated log) are kept whole as
//! `{"arguments": TEXT}`: an opaque identity, equal for equal texts, never an error.
//!
//! The output's hash leaves out what changes from run to run of the same command (`Chunk ID`,
//! `Wall time`, a running process's session number), so a command that keeps printing the
//! same thing hashes the same.

use crate::common::{argv_command, as_object, number_after, object_or_null, renamed};
use serde_json::{Map, Value, json};
use std::borrow::Cow;

/// Tools that wait on something running: a poll is never a loop by itself.
pub const POLL_TOOLS: &[&str] = &["wait_agent", "wait"];

/// Tools that run a shell command.
const SHELL_TOOLS: &[&str] = &[
    "exec_command",
    "shell",
    "shell_command",
    "container.exec",
    "local_shell",
    "local_shell_call",
];

/// The detector's name for a Codex tool called with `input` (already read from its
/// arguments).
pub fn detector_tool<'n>(name: &'n str, input: &Value) -> Cow<'n, str> {
    Cow::Borrowed(match name {
        shell if SHELL_TOOLS.contains(&shell) => "bash",
        "apply_patch" => "apply_patch",
        "read_file" => "read",
        "grep_files" => "grep",
        "spawn_agent" => "task",
        "web_search_call" => "websearch",
        "write_stdin" if is_empty_poll(input) => "poll",
        poll if POLL_TOOLS.contains(&poll) => "poll",
        other => other,
    })
}

/// `write_stdin` that writes nothing: it only waits for more output of a running process.
fn is_empty_poll(input: &Value) -> bool {
    match input.get("chars") {
        None | Some(Value::Null) => true,
        Some(Value::String(chars)) => chars.is_empty(),
        Some(_) => false,
    }
}

/// A call's input as the detector reads it: `arguments` parsed (or kept opaque), renamed to
/// opencode's keys, the knobs that do not change what a call does left out.
pub(crate) fn mapped_input(name: &str, input: Value) -> Value {
    let input = as_object(input);
    match name {
        shell if SHELL_TOOLS.contains(&shell) => shell_input(input),
        "apply_patch" => renamed(
            renamed(input, &[("input", "patchText")]),
            &[("patch", "patchText")],
        ),
        "read_file" => renamed(
            renamed(input, &[("file_path", "filePath")]),
            &[("path", "filePath")],
        ),
        "grep_files" => input,
        "write_stdin" => {
            let keep = if is_empty_poll(&input) {
                &["session_id"][..]
            } else {
                &["session_id", "chars"][..]
            };
            only(input, keep)
        }
        "wait_agent" | "wait" => only(input, &["targets", "ids", "id"]),
        _ => input,
    }
}

/// `{command, workdir?}` from `cmd` / `command` (a string or an argv) and `workdir` /
/// `working_directory`; arguments that were not JSON stay opaque.
fn shell_input(input: Value) -> Value {
    if input.get("arguments").is_some() && input.get("cmd").is_none() {
        return input;
    }
    let command = ["cmd", "command"]
        .iter()
        .find_map(|key| match input.get(*key)? {
            Value::String(s) => Some(s.clone()),
            Value::Array(argv) => argv_command(argv),
            _ => None,
        });
    let Some(command) = command else {
        return input;
    };
    let mut out = Map::new();
    out.insert("command".into(), command.into());
    if let Some(dir) = ["workdir", "working_directory", "cwd"]
        .iter()
        .find_map(|key| input.get(*key).and_then(Value::as_str))
    {
        out.insert("workdir".into(), dir.into());
    }
    Value::Object(out)
}

/// The keys of `input` listed in `keep`.
fn only(input: Value, keep: &[&str]) -> Value {
    match input {
        Value::Object(mut map) => {
            map.retain(|k, _| keep.contains(&k.as_str()));
            Value::Object(map)
        }
        other => other,
    }
}

/// Whether a call's output is agentwatch's own hook refusing it: Codex answers a call its
/// `PreToolUse` hook denied with `Command blocked by PreToolUse hook: <reason>. Command: …`,
/// and agentwatch's reasons begin with [`detect_core::HOOK_MARKER`]. Another hook's refusal
/// is not.
pub(crate) fn refused_by_agentwatch(text: &str) -> bool {
    text.strip_prefix("Command blocked by PreToolUse hook: ")
        .is_some_and(|reason| reason.starts_with(detect_core::HOOK_MARKER))
}

/// A function call's `arguments` as a value: parsed when it is JSON, else kept whole under
/// `arguments`.
pub(crate) fn parse_arguments(arguments: &str) -> Value {
    if arguments.trim().is_empty() {
        return Value::Object(Map::new());
    }
    match serde_json::from_str::<Value>(arguments) {
        Ok(value @ Value::Object(_)) => value,
        Ok(other) => json!({ "arguments": other }),
        Err(_) => json!({ "arguments": arguments }),
    }
}

/// A call's output as Codex wrote it, made plain: the text the model saw, the exit code it
/// states, whether it says it failed.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Output {
    pub text: String,
    /// `metadata.exit_code` of a JSON output, else the exit stated in its text.
    pub exit: Option<i64>,
    /// `success: false` of an output object.
    pub failed: bool,
    /// `Process running with session ID N`: not finished yet.
    pub running: bool,
}

impl Output {
    /// Read an output field: a string (maybe itself JSON `{output, metadata}`), an object
    /// `{content|output, success}`, or a list of content items.
    pub fn read(output: Option<&str>, structured: Option<&Value>) -> Self {
        let mut out = match (output, structured) {
            (Some(text), _) => match serde_json::from_str::<Value>(text) {
                Ok(value @ Value::Object(_)) if value.get("output").is_some() => {
                    Self::from_value(&value)
                }
                _ => Self {
                    text: text.to_owned(),
                    ..Self::default()
                },
            },
            (None, Some(value)) => Self::from_value(value),
            (None, None) => Self::default(),
        };
        if out.exit.is_none() {
            out.exit = number_after(&out.text, "Process exited with code ")
                .or_else(|| number_after(&out.text, "Exit code: "));
        }
        out.running = out.exit.is_none() && out.text.contains("Process running with session ID");
        out
    }

    fn from_value(value: &Value) -> Self {
        let text = match value {
            Value::String(s) => s.clone(),
            Value::Array(items) => items_text(items),
            Value::Object(map) => match map.get("output").or_else(|| map.get("content")) {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Array(items)) => items_text(items),
                _ => String::new(),
            },
            _ => String::new(),
        };
        Self {
            text,
            exit: value.pointer("/metadata/exit_code").and_then(Value::as_i64),
            failed: value.get("success") == Some(&Value::Bool(false)),
            running: false,
        }
    }

    /// What the output hash is taken over: the text without the lines that change from run
    /// to run (`Chunk ID`, `Wall time`, a running process's number), the exit code first.
    pub fn stable_text(&self) -> String {
        let mut stable = match self.exit {
            Some(code) => format!("exit {code}\n"),
            None => String::new(),
        };
        for line in self.text.split_inclusive('\n') {
            if line.starts_with("Chunk ID: ") || line.starts_with("Wall time: ") {
                continue;
            }
            if let Some(rest) = line.strip_prefix("Process running with session ID ") {
                stable.push_str("Process running with session ID ");
                stable.push_str(rest.trim_start_matches(|c: char| c.is_ascii_digit()));
                continue;
            }
            stable.push_str(line);
        }
        stable
    }
}

fn items_text(items: &[Value]) -> String {
    items
        .iter()
        .filter_map(|i| i.get("text").and_then(Value::as_str))
        .collect::<Vec<_>>()
        .join("\n")
}

/// What a landed patch changed, per file.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Landing {
    /// The unified diffs (or, when none is known, one line per file).
    pub diff: String,
    pub files: Vec<FileChange>,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub(crate) struct FileChange {
    pub path: String,
    /// `add`, `update`, `delete`, `move`.
    pub kind: String,
    pub additions: u64,
    pub deletions: u64,
}

impl Landing {
    /// A landing that changed something: at least one file.
    pub fn changed(&self) -> bool {
        !self.files.is_empty()
    }

    pub fn metadata(&self) -> Value {
        let files: Vec<Value> = self
            .files
            .iter()
            .map(|f| {
                json!({"filePath": f.path, "type": f.kind,
                       "additions": f.additions, "deletions": f.deletions})
            })
            .collect();
        json!({"diff": self.diff, "files": files})
    }

    pub fn push(&mut self, path: &str, kind: &str, diff: Option<&str>, content: Option<&str>) {
        let (mut additions, mut deletions) = (0, 0);
        match diff {
            Some(diff) => {
                for line in diff.lines() {
                    if line.starts_with('+') && !line.starts_with("+++") {
                        additions += 1;
                    } else if line.starts_with('-') && !line.starts_with("---") {
                        deletions += 1;
                    }
                }
                self.diff.push_str(diff);
                if !diff.ends_with('\n') {
                    self.diff.push('\n');
                }
            }
            None => {
                let lines = content.map_or(0, |c| c.lines().count() as u64);
                if kind == "delete" {
                    deletions = lines;
                } else {
                    additions = lines;
                }
                self.diff.push_str(&format!("{kind} {path}\n"));
            }
        }
        self.files.push(FileChange {
            path: path.to_owned(),
            kind: kind.to_owned(),
            additions,
            deletions,
        });
    }
}

/// The files a freeform patch (`*** Begin Patch` … `*** End Patch`) changes, with its lines
/// added and deleted: what landed when the tool reports success.
pub(crate) fn patch_landing(patch: &str) -> Landing {
    let mut landing = Landing {
        diff: patch.to_owned(),
        files: Vec::new(),
    };
    let headers = [
        ("*** Add File: ", "add"),
        ("*** Update File: ", "update"),
        ("*** Delete File: ", "delete"),
    ];
    for line in patch.lines() {
        if let Some((path, kind)) = headers
            .iter()
            .find_map(|(h, kind)| line.strip_prefix(h).map(|p| (p.trim(), *kind)))
        {
            landing.files.push(FileChange {
                path: path.to_owned(),
                kind: kind.to_owned(),
                additions: 0,
                deletions: 0,
            });
            continue;
        }
        let Some(file) = landing.files.last_mut() else {
            continue;
        };
        if line.starts_with("*** Move to: ") {
            file.kind = "move".to_owned();
        } else if line.starts_with('+') {
            file.additions += 1;
        } else if line.starts_with('-') {
            file.deletions += 1;
        }
    }
    landing
}

/// Whether an `apply_patch` output reports the patch applied.
pub(crate) fn reports_applied(text: &str) -> bool {
    text.contains("Success. Updated the following files")
        || text.contains("Done! Updated the following files")
}

/// A spawn's metadata: the call's id and the child from the output (`{"agent_id": …,
/// "nickname": …}`).
pub(crate) fn spawn_metadata(call_id: &str, output: &str) -> Value {
    let mut meta = Map::new();
    meta.insert("toolUseId".into(), call_id.into());
    if let Ok(Value::Object(answer)) = serde_json::from_str::<Value>(output) {
        for (from, to) in [("agent_id", "agentId"), ("nickname", "nickname")] {
            if let Some(v) = answer.get(from).and_then(Value::as_str) {
                meta.insert(to.into(), v.into());
            }
        }
    }
    object_or_null(meta)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_names_map_onto_the_detector_model() {
        let none = json!({});
        for (codex, input, detector) in [
            ("exec_command", &none, "bash"),
            ("shell", &none, "bash"),
            ("shell_command", &none, "bash"),
            ("container.exec", &none, "bash"),
            ("local_shell_call", &none, "bash"),
            ("apply_patch", &none, "apply_patch"),
            ("read_file", &none, "read"),
            ("grep_files", &none, "grep"),
            ("spawn_agent", &none, "task"),
            ("wait_agent", &none, "poll"),
            (
                "write_stdin",
                &json!({"session_id": 3, "chars": ""}),
                "poll",
            ),
            ("write_stdin", &json!({"session_id": 3}), "poll"),
            (
                "write_stdin",
                &json!({"session_id": 3, "chars": "y\n"}),
                "write_stdin",
            ),
            ("update_plan", &none, "update_plan"),
            ("mcp__github__get_file", &none, "mcp__github__get_file"),
        ] {
            assert_eq!(detector_tool(codex, input), detector, "{codex} {input}");
        }
    }

    #[test]
    fn shell_inputs_keep_the_command_and_its_directory() {
        for (args, want) in [
            (
                json!({"cmd": "cargo test", "yield_time_ms": 1000, "max_output_tokens": 5}),
                json!({"command": "cargo test"}),
            ),
            (
                json!({"cmd": ["bash", "-lc", "ls -la"], "workdir": "/p"}),
                json!({"command": "ls -la", "workdir": "/p"}),
            ),
            (
                json!({"command": ["rg", "x y"], "timeout_ms": 10}),
                json!({"command": "rg 'x y'"}),
            ),
            (
                json!({"arguments": "cmd=[REDACTED]"}),
                json!({"arguments": "cmd=[REDACTED]"}),
            ),
        ] {
            assert_eq!(mapped_input("exec_command", args.clone()), want, "{args}");
        }
        assert_eq!(
            mapped_input(
                "write_stdin",
                json!({"session_id": 4, "chars": "", "yield_time_ms": 5000})
            ),
            json!({"session_id": 4})
        );
        assert_eq!(
            mapped_input("apply_patch", json!({"input": "*** Begin Patch"})),
            json!({"patchText": "*** Begin Patch"})
        );
    }

    #[test]
    fn arguments_that_are_not_json_are_an_opaque_identity() {
        assert_eq!(parse_arguments(r#"{"cmd":"ls"}"#), json!({"cmd": "ls"}));
        assert_eq!(
            parse_arguments("[REDACTED]"),
            json!({"arguments": "[REDACTED]"})
        );
        assert_eq!(
            parse_arguments(r#"{"cmd":"l"#),
            json!({"arguments": r#"{"cmd":"l"#})
        );
        assert_eq!(parse_arguments("[1,2]"), json!({"arguments": [1, 2]}));
        assert_eq!(parse_arguments(""), json!({}));
    }

    #[test]
    fn outputs_state_their_exit_in_every_era() {
        for (output, exit, running) in [
            (
                "Chunk ID: bf8c9e\nWall time: 0.0000 seconds\nProcess exited with code 0\nOriginal token count: 5\nOutput:\nok\n",
                Some(0),
                false,
            ),
            (
                "Exit code: 1\nWall time: 0 seconds\nOutput:\nfail\n",
                Some(1),
                false,
            ),
            (
                r#"{"output":"boom","metadata":{"exit_code":2,"duration_seconds":0.2}}"#,
                Some(2),
                false,
            ),
            (
                "Chunk ID: e803b6\nWall time: 0.5010 seconds\nProcess running with session ID 83418\nOriginal token count: 0\nOutput:\n",
                None,
                true,
            ),
            ("aborted by user", None, false),
        ] {
            let out = Output::read(Some(output), None);
            assert_eq!((out.exit, out.running), (exit, running), "{output}");
        }
        let object = Output::read(None, Some(&json!({"content": "no", "success": false})));
        assert!(object.failed && object.text == "no");
    }

    #[test]
    fn the_hash_leaves_out_what_changes_between_runs() {
        let a = Output::read(
            Some(
                "Chunk ID: 1\nWall time: 0.1 seconds\nProcess exited with code 1\nOutput:\nfail\n",
            ),
            None,
        );
        let b = Output::read(
            Some(
                "Chunk ID: 2\nWall time: 0.3 seconds\nProcess exited with code 1\nOutput:\nfail\n",
            ),
            None,
        );
        let c = Output::read(
            Some(
                "Chunk ID: 2\nWall time: 0.3 seconds\nProcess exited with code 1\nOutput:\nfail 2\n",
            ),
            None,
        );
        assert_eq!(a.stable_text(), b.stable_text());
        assert_ne!(a.stable_text(), c.stable_text());
        let r1 = Output::read(Some("Process running with session ID 83418\n"), None);
        let r2 = Output::read(Some("Process running with session ID 5\n"), None);
        assert_eq!(r1.stable_text(), r2.stable_text());
    }

    #[test]
    fn a_patch_lists_its_files_and_lines() {
        let landing = patch_landing(
            "*** Begin Patch\n*** Update File: a.rs\n@@\n-x\n+y\n+z\n*** Add File: b.txt\n+hi\n*** Delete File: c\n*** Update File: d\n*** Move to: e\n*** End Patch\n",
        );
        let files: Vec<_> = landing
            .files
            .iter()
            .map(|f| (f.path.as_str(), f.kind.as_str(), f.additions, f.deletions))
            .collect();
        assert_eq!(
            files,
            [
                ("a.rs", "update", 2, 1),
                ("b.txt", "add", 1, 0),
                ("c", "delete", 0, 0),
                ("d", "move", 0, 0)
            ]
        );
        assert!(
            patch_landing("*** Begin Patch\n*** End Patch")
                .files
                .is_empty()
        );
        assert!(reports_applied(
            "Exit code: 0\nOutput:\nSuccess. Updated the following files:\nM a\n"
        ));
    }

    #[test]
    fn a_spawn_names_its_child() {
        assert_eq!(
            spawn_metadata("c1", r#"{"agent_id":"t2","nickname":"Euler"}"#),
            json!({"toolUseId": "c1", "agentId": "t2", "nickname": "Euler"})
        );
        assert_eq!(spawn_metadata("c1", "nope"), json!({"toolUseId": "c1"}));
    }
}
