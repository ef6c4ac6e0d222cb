//! One line of a Gemini CLI session (or the whole older `.json` file), as far as the reader
//! needs it: the first line's metadata (`{sessionId, projectHash, startTime, kind, …}`), a
//! message (`{id, timestamp, type, content, toolCalls?, model?}`), `{"$set": {…}}` and
//! `{"$rewindTo": id}`. Every field lenient, everything else skipped unbuilt.

use crate::lenient::{List, Obj, StrOr, Text};
use serde::Deserialize;
use serde_json::Value;

/// A record: the first line's metadata, a message, or an edit of the history (`$set`,
/// `$rewindTo`). The older whole-file `.json` is the metadata with `messages` in it; a message
/// in `$set.messages` or `messages` is a record too.
#[derive(Deserialize, Default)]
#[serde(default)]
pub(crate) struct Record<'a> {
    // metadata (and the fields `$set` may carry)
    #[serde(rename = "sessionId", borrow)]
    pub session_id: Text<'a>,
    #[serde(rename = "projectHash", borrow)]
    pub project_hash: Text<'a>,
    #[serde(rename = "startTime", borrow)]
    pub start_time: Text<'a>,
    /// `main` or `subagent`.
    #[serde(borrow)]
    pub kind: Text<'a>,
    #[serde(borrow)]
    pub directories: List<Text<'a>>,
    #[serde(borrow)]
    pub summary: Text<'a>,
    /// `$set.messages` (a checkpoint replacing every message), or the whole `.json`'s.
    pub messages: Option<List<Obj<Record<'a>>>>,

    // a message
    #[serde(borrow)]
    pub id: Text<'a>,
    #[serde(borrow)]
    pub timestamp: Text<'a>,
    /// `user`, `gemini` (or `model`), `info`, `error`, `warning`.
    #[serde(rename = "type", borrow)]
    pub message_type: Text<'a>,
    #[serde(borrow)]
    pub content: StrOr<'a, List<Obj<Part<'a>>>>,
    #[serde(borrow)]
    pub model: Text<'a>,
    #[serde(rename = "toolCalls", borrow)]
    pub tool_calls: List<Obj<ToolCall<'a>>>,

    // edits
    #[serde(rename = "$set")]
    pub set: Obj<Box<Record<'a>>>,
    #[serde(rename = "$rewindTo", borrow)]
    pub rewind_to: Text<'a>,
}

/// A content part: text, or a function call / response (which the reader reads from
/// `toolCalls` instead).
#[derive(Deserialize, Default)]
#[serde(default)]
pub(crate) struct Part<'a> {
    #[serde(borrow)]
    pub text: Text<'a>,
    #[serde(rename = "functionResponse", borrow)]
    pub function_response: Obj<FunctionResponse<'a>>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
pub(crate) struct FunctionResponse<'a> {
    #[serde(borrow)]
    pub response: Obj<Response<'a>>,
}

/// A tool's answer: `output` on success, `error` on failure (text, or structured for some
/// tools).
#[derive(Deserialize, Default)]
#[serde(default)]
pub(crate) struct Response<'a> {
    #[serde(borrow)]
    pub output: StrOr<'a, Value>,
    #[serde(borrow)]
    pub error: StrOr<'a, Value>,
}

/// One `toolCalls[]` entry: the call and, once it ran, its result.
#[derive(Deserialize, Default)]
#[serde(default)]
pub(crate) struct ToolCall<'a> {
    #[serde(borrow)]
    pub id: Text<'a>,
    #[serde(borrow)]
    pub name: Text<'a>,
    pub args: Option<Value>,
    /// `validating`, `scheduled`, `executing`, `awaiting_approval`, `success`, `error`,
    /// `cancelled`.
    #[serde(borrow)]
    pub status: Text<'a>,
    #[serde(borrow)]
    pub timestamp: Text<'a>,
    #[serde(borrow)]
    pub result: List<Obj<Part<'a>>>,
    /// A string, or a `FileDiff` for an edit or a write.
    #[serde(rename = "resultDisplay", borrow)]
    pub result_display: StrOr<'a, Obj<FileDiff<'a>>>,
    /// A subagent's session id, on the call that started it.
    #[serde(rename = "agentId", borrow)]
    pub agent_id: Text<'a>,
}

/// `resultDisplay` of `replace` / `write_file`.
#[derive(Deserialize, Default)]
#[serde(default)]
pub(crate) struct FileDiff<'a> {
    #[serde(rename = "fileDiff", borrow)]
    pub file_diff: Text<'a>,
    #[serde(rename = "isNewFile")]
    pub is_new_file: crate::lenient::Flag,
    #[serde(rename = "diffStat")]
    pub diff_stat: Obj<DiffStat>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
pub(crate) struct DiffStat {
    pub model_added_lines: crate::lenient::Count,
    pub model_removed_lines: crate::lenient::Count,
    pub user_added_lines: crate::lenient::Count,
    pub user_removed_lines: crate::lenient::Count,
}

impl Record<'_> {
    /// The text of its content: a string, or its text parts joined by newlines.
    pub fn text(&self) -> String {
        match &self.content {
            StrOr::Str(text) => text.to_string(),
            StrOr::Other(List(parts)) => parts
                .iter()
                .filter_map(|p| p.0.as_ref()?.text.as_str())
                .collect::<Vec<_>>()
                .join("\n"),
            StrOr::Absent => String::new(),
        }
    }
}

impl ToolCall<'_> {
    /// The tool's answer as the model saw it: the `output` (or `error`) of its function
    /// responses, else the display text.
    pub fn result_text(&self) -> String {
        let mut text = String::new();
        for part in self.result.0.iter().filter_map(|p| p.0.as_ref()) {
            let Some(response) = part
                .function_response
                .0
                .as_ref()
                .and_then(|f| f.response.0.as_ref())
            else {
                continue;
            };
            for value in [&response.output, &response.error] {
                match value {
                    StrOr::Str(s) => text.push_str(s),
                    StrOr::Other(v) => text.push_str(&v.to_string()),
                    StrOr::Absent => {}
                }
            }
        }
        if text.is_empty()
            && let StrOr::Str(display) = &self.result_display
        {
            text.push_str(display);
        }
        text
    }

    pub fn file_diff(&self) -> Option<&FileDiff<'_>> {
        match &self.result_display {
            StrOr::Other(Obj(diff)) => diff.as_ref(),
            _ => None,
        }
    }
}

/// Parse one line (or a whole `.json` file); `None` when it is not a JSON object.
pub(crate) fn parse_line(line: &[u8]) -> Option<Record<'_>> {
    match serde_json::from_slice::<Obj<Record<'_>>>(line) {
        Ok(Obj(line)) => line,
        Err(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_with_a_finished_call_reads_its_parts() {
        let line = parse_line(br#"{"id":"m1","timestamp":"2026-12-06T02:02:12.104Z","type":"gemini","content":"","model":"gemini-x","toolCalls":[{"id":"c1","name":"run_shell_command","args":{"command":"sh check.sh"},"result":[{"functionResponse":{"id":"c1","name":"run_shell_command","response":{"output":"Output: fail\nExit Code: 1"}}}],"status":"success","timestamp":"2026-12-06T02:02:12.294Z","resultDisplay":"fail"}]}"#).unwrap();
        let m = &line;
        assert_eq!(
            (m.id.as_str(), m.message_type.as_str()),
            (Some("m1"), Some("gemini"))
        );
        let call = m.tool_calls.0[0].0.as_ref().unwrap();
        assert_eq!(call.result_text(), "Output: fail\nExit Code: 1");
        assert!(call.file_diff().is_none());
    }

    #[test]
    fn edits_of_the_history_read_as_such() {
        let set = parse_line(br#"{"$set":{"messages":[{"id":"a","type":"user","content":[{"text":"hi"}]}],"lastUpdated":"x"}}"#).unwrap();
        let set = set.set.0.unwrap();
        let messages = set.messages.unwrap();
        assert_eq!(messages.0[0].0.as_ref().unwrap().text(), "hi");
        let rewind = parse_line(br#"{"$rewindTo":"m7"}"#).unwrap();
        assert_eq!(rewind.rewind_to.as_str(), Some("m7"));
        let odd =
            parse_line(br#"{"$set":3,"toolCalls":{"a":1},"content":7,"messages":"x"}"#).unwrap();
        assert!(odd.set.0.is_none() && odd.tool_calls.0.is_empty());
        assert!(odd.messages.is_some_and(|m| m.0.is_empty()));
        assert!(parse_line(b"[]").is_none());
    }
}
