//! Gemini CLI's tools mapped onto the detector's call model (opencode's tool names and input
//! keys), so detect-core stays agent-agnostic:
//!
//! | Gemini | detector | input | metadata |
//! |---|---|---|---|
//! | `read_file` | `read` | `filePath`, `offset` (`start_line`), `limit` (`end_line`) | `total_lines`, `lines_read` (from a truncated read's status, or a whole read's lines) |
//! | `replace`, `edit` | `edit` | `filePath`, `oldString`, `newString`, `replaceAll` | `diff`, `filediff` only when it landed (`success` and a `FileDiff`) |
//! | `write_file` | `write` | `filePath`, `content` | `type` (create / update), `diff`, `filediff` |
//! | `run_shell_command` | `bash` | `command` (+ `dir_path`, `is_background`) | `exit`: `Exit Code: N` of the output (status is `success` even when the command failed), else 0 on success; unknown for a command moved to the background |
//! | `grep_search`, `search_file_content`, `grep` | `grep` | `pattern`, `path`, `include` | |
//! | `glob` | `glob` | `pattern`, `path` | |
//! | `read_background_output`, `list_background_processes` | `poll` | as sent | |
//! | `invoke_agent`, `delegate_to_agent` | `task` | as sent | `toolUseId`, `agentId` (the subagent's session) |
//! | `web_fetch`, `google_web_search` | `webfetch`, `websearch` | as sent | |
//! | anything else (`list_directory`, `mcp_…`) | unchanged | as sent | |
//!
//! `wait_for_previous` (a scheduling knob of every tool) and `replace`'s free-text
//! `instruction` are left out of inputs: the same edit asked twice is the same call.

use super::record::ToolCall;
use crate::common::{as_object, number_after, object_or_null, renamed};
use serde_json::{Map, Value, json};
use std::borrow::Cow;

/// Tools that wait on something running: a poll is never a loop by itself.
pub const POLL_TOOLS: &[&str] = &["read_background_output", "list_background_processes"];

/// The detector's name for a Gemini tool.
pub fn detector_tool(name: &str) -> Cow<'_, str> {
    Cow::Borrowed(match name {
        "read_file" => "read",
        "replace" | "edit" => "edit",
        "write_file" => "write",
        "run_shell_command" => "bash",
        "grep_search" | "search_file_content" | "grep" => "grep",
        "glob" => "glob",
        "invoke_agent" | "delegate_to_agent" => "task",
        "web_fetch" => "webfetch",
        "google_web_search" => "websearch",
        poll if POLL_TOOLS.contains(&poll) => "poll",
        other => other,
    })
}

/// A call's input as the detector reads it.
pub(crate) fn mapped_input(name: &str, args: Value) -> Value {
    let mut input = as_object(args);
    if let Value::Object(map) = &mut input {
        map.remove("wait_for_previous");
    }
    match name {
        "read_file" => read_input(input),
        "replace" | "edit" => {
            if let Value::Object(map) = &mut input {
                map.remove("instruction");
            }
            renamed(
                input,
                &[
                    ("file_path", "filePath"),
                    ("old_string", "oldString"),
                    ("new_string", "newString"),
                    ("allow_multiple", "replaceAll"),
                ],
            )
        }
        "write_file" => renamed(input, &[("file_path", "filePath")]),
        "grep_search" | "search_file_content" | "grep" | "glob" => {
            renamed(input, &[("dir_path", "path")])
        }
        _ => input,
    }
}

/// `{filePath, offset, limit}` from `file_path` (or the older `absolute_path`), `start_line`
/// / `end_line` (or the older `offset` / `limit`).
fn read_input(input: Value) -> Value {
    let mut input = renamed(
        renamed(input, &[("file_path", "filePath")]),
        &[("absolute_path", "filePath")],
    );
    let Value::Object(map) = &mut input else {
        return input;
    };
    let start = map.remove("start_line");
    let end = map.remove("end_line");
    let first = start.as_ref().and_then(Value::as_u64);
    if let Some(start) = start {
        map.entry("offset").or_insert(start);
    }
    if let Some(last) = end.as_ref().and_then(Value::as_u64) {
        let limit = last.saturating_sub(first.unwrap_or(1)).saturating_add(1);
        map.entry("limit").or_insert(limit.into());
    } else if let Some(end) = end {
        map.insert("end_line".into(), end);
    }
    input
}

/// Whether a failed call is agentwatch's own hook refusing it: Gemini records a call its
/// `BeforeTool` hook denied as `Tool execution blocked: <reason>` (and one a hook stopped as
/// `Agent execution stopped by hook: <reason>`), in its `resultDisplay` and its function
/// response's `error`; agentwatch's reasons begin with [`detect_core::HOOK_MARKER`].
pub(crate) fn refused_by_agentwatch(call: &ToolCall<'_>) -> bool {
    let refused = |text: &str| {
        [
            "Tool execution blocked: ",
            "Agent execution stopped by hook: ",
        ]
        .iter()
        .filter_map(|prefix| text.strip_prefix(prefix))
        .any(|reason| reason.starts_with(detect_core::HOOK_MARKER))
    };
    let display = match &call.result_display {
        crate::lenient::StrOr::Str(text) => refused(text),
        _ => false,
    };
    display || refused(&call.result_text())
}

/// A finished call's metadata: what the detector reads of its result.
pub(crate) fn metadata(name: &str, call: &ToolCall<'_>, text: &str, success: bool) -> Value {
    match name {
        "read_file" if success => read_metadata(text),
        "replace" | "edit" | "write_file" => landing_metadata(name, call, success),
        "run_shell_command" => match shell_exit(text, success) {
            Some(code) => json!({ "exit": code }),
            None => Value::Null,
        },
        "invoke_agent" | "delegate_to_agent" => {
            let mut meta = Map::new();
            if let Some(id) = call.id.non_empty() {
                meta.insert("toolUseId".into(), id.into());
            }
            if let Some(agent) = call.agent_id.non_empty() {
                meta.insert("agentId".into(), agent.into());
            }
            object_or_null(meta)
        }
        _ => Value::Null,
    }
}

/// A read's length: `Showing lines A-B of N total lines` of a truncated read, else the
/// lines of a whole read.
fn read_metadata(text: &str) -> Value {
    let status = text.find("Showing lines ").and_then(|at| {
        let range = &text[at + "Showing lines ".len()..];
        let first = number_after(range, "")?;
        let last = number_after(range, "-")?;
        let total = u64::try_from(number_after(range, " of ")?).ok()?;
        Some((total, u64::try_from(last - first + 1).ok()))
    });
    match status {
        Some((total, shown)) => {
            let mut meta = json!({ "total_lines": total });
            if let Some(shown) = shown {
                meta["lines_read"] = shown.into();
            }
            meta
        }
        None => {
            let lines = text.lines().count() as u64;
            json!({ "total_lines": lines, "lines_read": lines })
        }
    }
}

/// An edit's or write's metadata: `diff` and `filediff` when it landed (status `success`
/// and a `FileDiff`); a write's `type`.
fn landing_metadata(name: &str, call: &ToolCall<'_>, success: bool) -> Value {
    let mut meta = Map::new();
    let diff = call.file_diff().filter(|_| success);
    if name == "write_file"
        && let Some(diff) = diff
    {
        let kind = if diff.is_new_file.0 == Some(true) {
            "create"
        } else {
            "update"
        };
        meta.insert("type".into(), kind.into());
    }
    if let Some(diff) = diff {
        let stat = diff.diff_stat.0.as_ref();
        let n = |c: Option<crate::lenient::Count>| c.and_then(|c| c.0).unwrap_or(0);
        let additions = n(stat.map(|s| s.model_added_lines)) + n(stat.map(|s| s.user_added_lines));
        let deletions =
            n(stat.map(|s| s.model_removed_lines)) + n(stat.map(|s| s.user_removed_lines));
        let text = diff.file_diff.as_str().unwrap_or_default();
        let changed = additions + deletions > 0 || !text.trim().is_empty();
        if changed {
            let shown = if text.trim().is_empty() {
                format!("+{additions} -{deletions}")
            } else {
                text.to_owned()
            };
            meta.insert("diff".into(), shown.into());
            meta.insert(
                "filediff".into(),
                json!({"additions": additions, "deletions": deletions}),
            );
        }
    }
    object_or_null(meta)
}

/// A shell command's exit: `Exit Code: N` of its output; else 0 when it succeeded (and did
/// not move to the background); else unknown.
fn shell_exit(text: &str, success: bool) -> Option<i64> {
    if let Some(code) = number_after(text, "Exit Code: ") {
        return Some(code);
    }
    (success && !text.contains("moved to background")).then_some(0)
}

/// What the output hash is taken over: the status and the text without what changes from
/// run to run of the same command (process group and background process ids).
pub(crate) fn stable_text(status: &str, text: &str) -> String {
    let mut stable = format!("{status}\n");
    for line in text.split_inclusive('\n') {
        if line.starts_with("Process Group PGID:") || line.starts_with("Background PIDs:") {
            continue;
        }
        match line.find("(PID: ") {
            Some(at) => {
                stable.push_str(&line[..at]);
                let rest = &line[at + "(PID: ".len()..];
                stable.push_str("(PID: ");
                stable.push_str(rest.trim_start_matches(|c: char| c.is_ascii_digit()));
            }
            None => stable.push_str(line),
        }
    }
    stable
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gemini::record::parse_line;

    fn call(json: &str) -> ToolCall<'_> {
        let line = parse_line(json.as_bytes()).unwrap();
        line.tool_calls.0.into_iter().next().unwrap().0.unwrap()
    }

    #[test]
    fn tool_names_map_onto_the_detector_model() {
        for (gemini, detector) in [
            ("read_file", "read"),
            ("replace", "edit"),
            ("write_file", "write"),
            ("run_shell_command", "bash"),
            ("grep_search", "grep"),
            ("search_file_content", "grep"),
            ("glob", "glob"),
            ("read_background_output", "poll"),
            ("list_background_processes", "poll"),
            ("invoke_agent", "task"),
            ("web_fetch", "webfetch"),
            ("google_web_search", "websearch"),
            ("list_directory", "list_directory"),
            ("mcp_github_get_file", "mcp_github_get_file"),
        ] {
            assert_eq!(detector_tool(gemini), detector, "{gemini}");
        }
    }

    #[test]
    fn inputs_take_opencode_keys() {
        for (name, args, want) in [
            (
                "read_file",
                json!({"file_path": "a", "start_line": 10, "end_line": 19}),
                json!({"filePath": "a", "offset": 10, "limit": 10}),
            ),
            (
                "read_file",
                json!({"absolute_path": "/a", "offset": 5, "limit": 2}),
                json!({"filePath": "/a", "offset": 5, "limit": 2}),
            ),
            (
                "read_file",
                json!({"file_path": "a", "end_line": 5}),
                json!({"filePath": "a", "limit": 5}),
            ),
            (
                "replace",
                json!({"file_path": "a", "instruction": "why", "old_string": "x", "new_string": "y", "wait_for_previous": true}),
                json!({"filePath": "a", "oldString": "x", "newString": "y"}),
            ),
            (
                "write_file",
                json!({"file_path": "a", "content": "c"}),
                json!({"filePath": "a", "content": "c"}),
            ),
            (
                "grep_search",
                json!({"pattern": "p", "dir_path": "src"}),
                json!({"pattern": "p", "path": "src"}),
            ),
            (
                "run_shell_command",
                json!({"command": "ls", "description": "d"}),
                json!({"command": "ls", "description": "d"}),
            ),
        ] {
            assert_eq!(mapped_input(name, args.clone()), want, "{name} {args}");
        }
    }

    #[test]
    fn a_shell_command_exit_is_in_its_text() {
        let out = |text: &str, success| {
            metadata("run_shell_command", &ToolCall::default(), text, success)
        };
        assert_eq!(
            out("Output: fail\nExit Code: 1\nProcess Group PGID: 7", true),
            json!({"exit": 1})
        );
        assert_eq!(
            out("Output: ok\nProcess Group PGID: 7", true),
            json!({"exit": 0})
        );
        assert_eq!(
            out("Command moved to background (PID: 29339).", true),
            Value::Null
        );
        assert_eq!(out("denied", false), Value::Null);
    }

    #[test]
    fn an_edit_lands_with_a_diff_on_success_only() {
        let line = r#"{"toolCalls":[{"id":"c","name":"replace","status":"success","resultDisplay":{"fileDiff":"@@ -1 +1 @@\n-a\n+b\n","diffStat":{"model_added_lines":1,"model_removed_lines":1,"user_added_lines":0,"user_removed_lines":0},"isNewFile":false}}]}"#;
        let c = call(line);
        let landed = metadata("replace", &c, "", true);
        assert_eq!(landed["filediff"], json!({"additions": 1, "deletions": 1}));
        assert!(landed["diff"].as_str().is_some_and(|d| d.contains("+b")));
        assert_eq!(metadata("replace", &c, "", false), Value::Null);
        let write = call(
            r#"{"toolCalls":[{"id":"c","name":"write_file","status":"success","resultDisplay":{"fileDiff":"@@ -0,0 +1 @@\n+hi\n","isNewFile":true}}]}"#,
        );
        assert_eq!(metadata("write_file", &write, "", true)["type"], "create");
        let plain = call(
            r#"{"toolCalls":[{"id":"c","name":"replace","status":"success","resultDisplay":"no changes"}]}"#,
        );
        assert_eq!(metadata("replace", &plain, "", true), Value::Null);
    }

    #[test]
    fn reads_know_their_lengths() {
        assert_eq!(
            read_metadata(
                "\nIMPORTANT: The file content has been truncated.\nStatus: Showing lines 1-1 of 3 total lines.\n--- FILE CONTENT (truncated) ---\nline one"
            ),
            json!({"total_lines": 3, "lines_read": 1})
        );
        assert_eq!(
            read_metadata("a\nb\n"),
            json!({"total_lines": 2, "lines_read": 2})
        );
    }

    #[test]
    fn the_hash_leaves_out_process_ids() {
        let a = stable_text(
            "success",
            "Output: x\nExit Code: 1\nProcess Group PGID: 16146\n",
        );
        let b = stable_text(
            "success",
            "Output: x\nExit Code: 1\nProcess Group PGID: 99\n",
        );
        assert_eq!(a, b);
        assert_ne!(a, stable_text("error", "Output: x\nExit Code: 1\n"));
        assert_eq!(
            stable_text(
                "success",
                "Command moved to background (PID: 29339). Output hidden."
            ),
            stable_text(
                "success",
                "Command moved to background (PID: 1). Output hidden."
            )
        );
    }
}
