//! Claude Code's tools mapped onto the detector's call model (opencode's tool names and input
//! keys), so detect-core stays agent-agnostic:
//!
//! | Claude Code | detector | input | metadata |
//! |---|---|---|---|
//! | `Read` | `read` | `filePath`, `offset`, `limit` | `total_lines`, `lines_read` from `toolUseResult.file` |
//! | `Edit`, `MultiEdit`, `NotebookEdit` | `edit` | `filePath`, … | `diff` and `filediff` only when the edit landed |
//! | `Write` | `write` | `filePath`, `content` | `type` (create / update), `diff` when there is a patch |
//! | `Bash` | `bash` | `command`, … | `exit` (0 when not an error; `Exit code N`; else unknown) |
//! | `Grep`, `Glob` | `grep`, `glob` | `pattern`, `path`, … | |
//! | `Task`, `Agent` | `task` | as sent | `toolUseId`, `agentId`, `agentType` (the subagent link) |
//! | `BashOutput`, `TaskOutput` | `poll` | as sent | |
//! | `mcp__server__tool` | unchanged | as sent | |
//! | anything else | lowercased | as sent | |

use super::record::{Hunk, ResultFields, ToolUseResult};
use crate::common::{as_object, number_after, object_or_null, renamed};
use detect_core::HOOK_MARKER;
use serde_json::{Map, Value, json};
use std::borrow::Cow;

/// Claude Code tools that wait on a background job: a poll is never a loop by itself.
pub const POLL_TOOLS: &[&str] = &["BashOutput", "TaskOutput"];

/// The detector's name for a Claude Code tool.
pub fn detector_tool(name: &str) -> Cow<'_, str> {
    Cow::Borrowed(match name {
        "Read" => "read",
        "Edit" | "MultiEdit" | "NotebookEdit" => "edit",
        "Write" => "write",
        "Bash" => "bash",
        "Grep" => "grep",
        "Glob" => "glob",
        "Task" | "Agent" => "task",
        poll if POLL_TOOLS.contains(&poll) => "poll",
        // MCP tools keep their full name: `mcp__github__get_file` and `mcp__fs__get_file`
        // are different tools.
        mcp if mcp.starts_with("mcp__") => mcp,
        other if other.bytes().any(|b| b.is_ascii_uppercase()) => {
            return Cow::Owned(other.to_ascii_lowercase());
        }
        other => other,
    })
}

/// How a call ended: its `tool_result` and the line's `toolUseResult`.
pub(crate) struct Outcome<'r> {
    /// The result's text (a string, or its text blocks joined).
    pub text: &'r str,
    pub is_error: bool,
    /// The line's `toolUseResult`, when the line answers this call alone.
    pub detail: &'r ToolUseResult<'r>,
}

impl Outcome<'_> {
    fn fields(&self) -> Option<&ResultFields<'_>> {
        self.detail.fields()
    }
}

/// A call in the detector's model: tool, input, metadata.
#[derive(Debug, PartialEq)]
pub(crate) struct Mapped {
    pub tool: String,
    pub input: Value,
    pub metadata: Value,
}

/// Map a completed Claude Code call.
pub(crate) fn map_call(name: &str, id: &str, input: Value, outcome: &Outcome<'_>) -> Mapped {
    let tool = detector_tool(name).into_owned();
    let input = as_object(input);
    let (input, metadata) = match name {
        "Read" => (
            renamed(input, &[("file_path", "filePath")]),
            read_metadata(outcome),
        ),
        "Edit" => (renamed(input, EDIT_KEYS), landing_metadata(name, outcome)),
        "MultiEdit" => (
            renamed(input, &[("file_path", "filePath")]),
            landing_metadata(name, outcome),
        ),
        "NotebookEdit" => (
            renamed(input, NOTEBOOK_KEYS),
            landing_metadata(name, outcome),
        ),
        "Write" => (
            renamed(input, &[("file_path", "filePath")]),
            write_metadata(outcome),
        ),
        "Bash" => (input, bash_metadata(outcome)),
        "Task" | "Agent" => (input, spawn_metadata(id, outcome)),
        _ => (input, Value::Null),
    };
    Mapped {
        tool,
        input,
        metadata,
    }
}

/// A call with no result (yet): mapped as far as its input goes.
pub(crate) fn map_unanswered(name: &str, input: Value) -> (String, Value) {
    let input = as_object(input);
    let input = match name {
        "Read" | "MultiEdit" | "Write" => renamed(input, &[("file_path", "filePath")]),
        "Edit" => renamed(input, EDIT_KEYS),
        "NotebookEdit" => renamed(input, NOTEBOOK_KEYS),
        _ => input,
    };
    (detector_tool(name).into_owned(), input)
}

const EDIT_KEYS: &[(&str, &str)] = &[
    ("file_path", "filePath"),
    ("old_string", "oldString"),
    ("new_string", "newString"),
    ("replace_all", "replaceAll"),
];

const NOTEBOOK_KEYS: &[(&str, &str)] = &[
    ("notebook_path", "filePath"),
    ("new_source", "newSource"),
    ("cell_id", "cellId"),
    ("cell_type", "cellType"),
    ("edit_mode", "editMode"),
];

fn read_metadata(outcome: &Outcome<'_>) -> Value {
    let mut meta = Map::new();
    if let Some(file) = outcome.fields().and_then(|f| f.file.0.as_ref())
        && !outcome.is_error
    {
        if let Some(total) = file.total_lines.0 {
            meta.insert("total_lines".into(), total.into());
        }
        if let Some(read) = file.num_lines.0 {
            meta.insert("lines_read".into(), read.into());
        }
    }
    object_or_null(meta)
}

/// An edit's metadata: `diff` (hunk headers, never blank) and `filediff` when it landed.
fn landing_metadata(name: &str, outcome: &Outcome<'_>) -> Value {
    let mut meta = Map::new();
    if let Some(landing) = landing(name, outcome) {
        meta.insert("diff".into(), landing.diff.into());
        meta.insert(
            "filediff".into(),
            json!({"additions": landing.additions, "deletions": landing.deletions}),
        );
    }
    object_or_null(meta)
}

fn write_metadata(outcome: &Outcome<'_>) -> Value {
    let mut meta = Map::new();
    if let Some(kind) = outcome.fields().and_then(|f| f.kind.non_empty()) {
        meta.insert("type".into(), kind.into());
    }
    if let Some(landing) = landing("Write", outcome) {
        meta.insert("diff".into(), landing.diff.into());
        meta.insert(
            "filediff".into(),
            json!({"additions": landing.additions, "deletions": landing.deletions}),
        );
    }
    object_or_null(meta)
}

fn bash_metadata(outcome: &Outcome<'_>) -> Value {
    match exit_code(outcome) {
        Some(code) => json!({ "exit": code }),
        None => Value::Null,
    }
}

fn spawn_metadata(id: &str, outcome: &Outcome<'_>) -> Value {
    let mut meta = Map::new();
    meta.insert("toolUseId".into(), id.into());
    if let Some(agent) = spawned_agent(outcome) {
        meta.insert("agentId".into(), agent.into());
    }
    if let Some(kind) = outcome.fields().and_then(|f| f.agent_type.non_empty()) {
        meta.insert("agentType".into(), kind.into());
    }
    Value::Object(meta)
}

/// Whether a failed result is agentwatch's own hook refusing the call: Claude Code writes a
/// `PreToolUse` refusal as `PreToolUse:<Tool> hook error: <reason>` (a JSON deny), or
/// `PreToolUse:<Tool> hook error: [<hook command>]: <reason>` (exit 2), and agentwatch's
/// reasons begin with [`HOOK_MARKER`]. Another hook's refusal is not.
pub(crate) fn refused_by_agentwatch(outcome: &Outcome<'_>) -> bool {
    let refused = |text: &str| {
        let Some(rest) = text.strip_prefix("PreToolUse:") else {
            return false;
        };
        let Some((_, reason)) = rest.split_once(" hook error: ") else {
            return false;
        };
        reason.starts_with(HOOK_MARKER)
            || (reason.starts_with('[') && reason.contains(&format!("]: {HOOK_MARKER}")))
    };
    let detail = outcome
        .detail
        .text()
        .and_then(|t| t.strip_prefix("Error: "));
    outcome.is_error && (refused(outcome.text) || detail.is_some_and(refused))
}

/// The subagent a Task / Agent call started: `toolUseResult.agentId`, else the `agentId: …`
/// line of the result text.
pub(crate) fn spawned_agent(outcome: &Outcome<'_>) -> Option<String> {
    if let Some(id) = outcome.fields().and_then(|f| f.agent_id.non_empty()) {
        return Some(id);
    }
    let at = outcome.text.find("agentId: ")?;
    let id: String = outcome.text[at + "agentId: ".len()..]
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
        .collect();
    (!id.is_empty()).then_some(id)
}

/// What a landed edit changed.
struct Landing {
    diff: String,
    additions: u64,
    deletions: u64,
}

/// Whether an edit or write landed, and what it changed: never for an error; a non-empty
/// `structuredPatch` (or `gitDiff` with changed lines); a Write that reports `create` /
/// `update`; a NotebookEdit without an `error`; and, for a result without `toolUseResult`
/// (subagent transcripts omit it), a result text that reports the file updated or created.
fn landing(name: &str, outcome: &Outcome<'_>) -> Option<Landing> {
    if outcome.is_error {
        return None;
    }
    let Some(fields) = outcome.fields() else {
        return (!outcome.detail.is_present() && reports_update(outcome.text)).then(|| Landing {
            diff: "(the result reports the file updated)".to_owned(),
            additions: 0,
            deletions: 0,
        });
    };
    if name == "NotebookEdit" {
        return fields.error.non_empty().is_none().then(|| Landing {
            diff: format!(
                "notebook cell {}",
                fields.edit_mode.as_str().unwrap_or("edit")
            ),
            additions: 0,
            deletions: 0,
        });
    }
    let hunks: Vec<&Hunk<'_>> = fields
        .structured_patch
        .0
        .iter()
        .filter_map(|h| h.0.as_ref())
        .collect();
    if !hunks.is_empty() {
        return Some(patch_landing(&hunks));
    }
    if let Some(git) = &fields.git_diff.0 {
        let (additions, deletions) = (git.additions.0.unwrap_or(0), git.deletions.0.unwrap_or(0));
        if additions.saturating_add(deletions) > 0 {
            return Some(Landing {
                diff: format!("git diff +{additions} -{deletions}"),
                additions,
                deletions,
            });
        }
    }
    match fields.kind.as_str() {
        Some(kind @ ("create" | "update")) if name == "Write" => Some(Landing {
            diff: format!("({kind})"),
            additions: 0,
            deletions: 0,
        }),
        _ => None,
    }
}

/// The hunks' headers as the diff (the detector needs it non-blank, not the file's text), and
/// the lines added and deleted.
fn patch_landing(hunks: &[&Hunk<'_>]) -> Landing {
    let mut landing = Landing {
        diff: String::new(),
        additions: 0,
        deletions: 0,
    };
    for hunk in hunks {
        let n = |c: crate::lenient::Count| c.0.unwrap_or(0);
        if !landing.diff.is_empty() {
            landing.diff.push('\n');
        }
        landing.diff.push_str(&format!(
            "@@ -{},{} +{},{} @@",
            n(hunk.old_start),
            n(hunk.old_lines),
            n(hunk.new_start),
            n(hunk.new_lines)
        ));
        for line in hunk.lines.0.iter().filter_map(|l| l.as_str()) {
            match line.as_bytes().first() {
                Some(b'+') => landing.additions += 1,
                Some(b'-') => landing.deletions += 1,
                _ => {}
            }
        }
    }
    landing
}

/// Claude Code's result texts for an edit or write that changed a file.
fn reports_update(text: &str) -> bool {
    [
        "has been updated",
        "updated successfully",
        "created successfully",
    ]
    .iter()
    .any(|phrase| text.contains(phrase))
}

/// A Bash call's exit status: 0 when it did not fail (unless it was interrupted or moved to
/// the background, where it is not known); `Exit code N` from a failure's text; else unknown.
fn exit_code(outcome: &Outcome<'_>) -> Option<i64> {
    if !outcome.is_error {
        let unfinished = outcome.fields().is_some_and(|f| {
            f.interrupted.0 == Some(true) || f.background_task_id.non_empty().is_some()
        });
        return (!unfinished).then_some(0);
    }
    let exit = |text: &str| number_after(text, "Exit code ");
    exit(outcome.text).or_else(|| outcome.detail.text().and_then(exit))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::claude::record::parse_line;

    /// Map `name(input)` answered by a user line `result_line` (its first tool_result).
    fn mapped(name: &str, input: Value, result_line: &str) -> Mapped {
        let line = parse_line(result_line.as_bytes()).expect("a JSON line");
        let message = line.message.0.as_ref().expect("a message");
        let block = message.content.blocks().next().unwrap();
        let text = block.content.text();
        let outcome = Outcome {
            text: &text,
            is_error: block.is_error.0 == Some(true),
            detail: &line.tool_use_result,
        };
        map_call(name, "toolu_1", input, &outcome)
    }

    fn result(content: &str, is_error: bool, tool_use_result: &str) -> String {
        format!(
            r#"{{"type":"user","message":{{"role":"user","content":[{{"type":"tool_result","tool_use_id":"toolu_1","content":{content},"is_error":{is_error}}}]}}{}}}"#,
            if tool_use_result.is_empty() {
                String::new()
            } else {
                format!(r#","toolUseResult":{tool_use_result}"#)
            }
        )
    }

    #[test]
    fn tool_names_map_onto_the_detector_model() {
        for (claude, detector) in [
            ("Read", "read"),
            ("Edit", "edit"),
            ("MultiEdit", "edit"),
            ("NotebookEdit", "edit"),
            ("Write", "write"),
            ("Bash", "bash"),
            ("Grep", "grep"),
            ("Glob", "glob"),
            ("Task", "task"),
            ("Agent", "task"),
            ("BashOutput", "poll"),
            ("TaskOutput", "poll"),
            ("WebFetch", "webfetch"),
            ("TodoWrite", "todowrite"),
            ("mcp__github__Get_File", "mcp__github__Get_File"),
            ("mcp__fs__Get_File", "mcp__fs__Get_File"),
            ("custom", "custom"),
        ] {
            assert_eq!(detector_tool(claude), detector, "{claude}");
        }
    }

    #[test]
    fn a_read_keeps_its_range_and_the_file_length() {
        let m = mapped(
            "Read",
            json!({"file_path": "/p/a.py", "offset": 10, "limit": 5}),
            &result(
                r#""10\tx""#,
                false,
                r#"{"type":"text","file":{"filePath":"/p/a.py","content":"x","numLines":5,"startLine":10,"totalLines":120}}"#,
            ),
        );
        assert_eq!(m.tool, "read");
        assert_eq!(
            m.input,
            json!({"filePath": "/p/a.py", "offset": 10, "limit": 5})
        );
        assert_eq!(m.metadata, json!({"total_lines": 120, "lines_read": 5}));
    }

    #[test]
    fn an_edit_lands_only_with_a_patch_and_no_error() {
        let input = json!({"file_path": "a", "old_string": "x", "new_string": "y"});
        let patch = r#"{"filePath":"a","oldString":"x","newString":"y","originalFile":"x\n","structuredPatch":[{"oldStart":1,"oldLines":1,"newStart":1,"newLines":1,"lines":["-x","+y"]}],"userModified":false,"replaceAll":false}"#;
        let landed = mapped("Edit", input.clone(), &result(r#""updated""#, false, patch));
        assert_eq!(landed.tool, "edit");
        assert_eq!(
            landed.input,
            json!({"filePath": "a", "oldString": "x", "newString": "y"})
        );
        assert_eq!(
            landed.metadata,
            json!({"diff": "@@ -1,1 +1,1 @@", "filediff": {"additions": 1, "deletions": 1}})
        );
        let empty = r#"{"filePath":"a","structuredPatch":[]}"#;
        for (line, why) in [
            (result(r#""ok""#, false, empty), "an empty patch"),
            (
                result(
                    r#""<tool_use_error>String to replace not found</tool_use_error>""#,
                    true,
                    r#""Error: String to replace not found""#,
                ),
                "an error",
            ),
            (result(r#""updated""#, true, patch), "a patch on an error"),
        ] {
            assert_eq!(
                mapped("Edit", input.clone(), &line).metadata,
                Value::Null,
                "{why}"
            );
        }
        // Subagent transcripts carry no toolUseResult: the result text tells.
        let told = mapped(
            "Edit",
            input.clone(),
            &result(r#""The file a has been updated successfully.""#, false, ""),
        );
        assert!(
            told.metadata["diff"]
                .as_str()
                .is_some_and(|d| !d.is_empty())
        );
    }

    #[test]
    fn a_write_records_create_or_update() {
        let m = mapped(
            "Write",
            json!({"file_path": "b.txt", "content": "x\n"}),
            &result(
                r#""File created successfully at: b.txt""#,
                false,
                r#"{"type":"create","filePath":"b.txt","content":"x\n","structuredPatch":[],"originalFile":null}"#,
            ),
        );
        assert_eq!(m.tool, "write");
        assert_eq!(m.input, json!({"filePath": "b.txt", "content": "x\n"}));
        assert_eq!(m.metadata["type"], "create");
        assert_eq!(m.metadata["diff"], "(create)");
    }

    #[test]
    fn bash_exit_status_comes_from_the_result() {
        let input = json!({"command": "make test", "description": "run"});
        for (line, exit) in [
            (
                result(
                    r#""ok""#,
                    false,
                    r#"{"stdout":"ok","stderr":"","interrupted":false}"#,
                ),
                json!({"exit": 0}),
            ),
            (
                result(r#""Exit code 1""#, true, r#""Error: Exit code 1""#),
                json!({"exit": 1}),
            ),
            (
                result(r#""boom""#, true, r#""Error: Exit code 127\nboom""#),
                json!({"exit": 127}),
            ),
            (
                result(r#"[{"type":"text","text":"Exit code 2\nfail"}]"#, true, ""),
                json!({"exit": 2}),
            ),
            (
                result(
                    r#""Command timed out""#,
                    true,
                    r#""Error: Command timed out""#,
                ),
                Value::Null,
            ),
            (
                result(
                    r#""""#,
                    false,
                    r#"{"stdout":"","stderr":"","interrupted":true}"#,
                ),
                Value::Null,
            ),
            (
                result(
                    r#""started""#,
                    false,
                    r#"{"stdout":"","backgroundTaskId":"b1"}"#,
                ),
                Value::Null,
            ),
        ] {
            let m = mapped("Bash", input.clone(), &line);
            assert_eq!((m.tool.as_str(), m.metadata), ("bash", exit), "{line}");
            assert_eq!(m.input, input);
        }
    }

    #[test]
    fn a_spawn_records_its_call_and_the_agent() {
        let m = mapped(
            "Agent",
            json!({"description": "sub", "prompt": "p", "subagent_type": "Explore"}),
            &result(
                r#"[{"type":"text","text":"Async agent launched successfully.\nagentId: a3ef12 (internal ID)"}]"#,
                false,
                r#"{"isAsync":true,"status":"async_launched","agentId":"a3ef12","prompt":"p"}"#,
            ),
        );
        assert_eq!(m.tool, "task");
        assert_eq!(
            m.metadata,
            json!({"toolUseId": "toolu_1", "agentId": "a3ef12"})
        );
        let from_text = mapped(
            "Task",
            json!({}),
            &result(r#""done\nagentId: b77 (use SendMessage)""#, false, ""),
        );
        assert_eq!(from_text.metadata["agentId"], "b77");
    }

    #[test]
    fn input_that_is_not_an_object_is_kept_under_value() {
        let m = mapped("Bash", json!("ls"), &result(r#""a""#, false, ""));
        assert_eq!(m.input, json!({"value": "ls"}));
        assert_eq!(map_unanswered("Read", Value::Null).1, json!({}));
    }
}
