//! One line of a Claude Code transcript, as far as the reader needs it: every field lenient
//! (a value of another type reads as absent), every other field and record type skipped
//! without being built (a line may carry a 60 kB system prompt the reader never looks at).

use crate::lenient::{Count, Flag, List, Obj, StrOr, Text};
use serde::Deserialize;
use serde_json::Value;
use std::borrow::Cow;

/// The envelope of a line and the parts of its records the reader uses.
#[derive(Deserialize, Default)]
#[serde(default)]
pub(crate) struct Line<'a> {
    #[serde(rename = "type", borrow)]
    pub kind: Text<'a>,
    #[serde(rename = "sessionId", borrow)]
    pub session_id: Text<'a>,
    #[serde(rename = "agentId", borrow)]
    pub agent_id: Text<'a>,
    #[serde(rename = "isSidechain")]
    pub is_sidechain: Flag,
    #[serde(rename = "isMeta")]
    pub is_meta: Flag,
    #[serde(borrow)]
    pub uuid: Text<'a>,
    #[serde(rename = "parentUuid", borrow)]
    pub parent_uuid: Text<'a>,
    #[serde(borrow)]
    pub cwd: Text<'a>,
    #[serde(rename = "gitBranch", borrow)]
    pub git_branch: Text<'a>,
    #[serde(borrow)]
    pub version: Text<'a>,
    #[serde(borrow)]
    pub timestamp: Text<'a>,
    #[serde(borrow)]
    pub message: Obj<Message<'a>>,
    #[serde(rename = "toolUseResult", borrow)]
    pub tool_use_result: ToolUseResult<'a>,
    /// `summary` records.
    #[serde(borrow)]
    pub summary: Text<'a>,
    /// `custom-title` records.
    #[serde(rename = "customTitle", borrow)]
    pub custom_title: Text<'a>,
    /// `ai-title` records.
    #[serde(rename = "aiTitle", borrow)]
    pub ai_title: Text<'a>,
}

/// `message` of a `user` or `assistant` line.
#[derive(Deserialize, Default)]
#[serde(default)]
pub(crate) struct Message<'a> {
    #[serde(borrow)]
    pub role: Text<'a>,
    #[serde(borrow)]
    pub model: Text<'a>,
    #[serde(borrow)]
    pub content: Content<'a>,
}

/// Message or tool-result content: a plain string, or a list of blocks.
#[derive(Deserialize, Default)]
#[serde(transparent)]
pub(crate) struct Content<'a>(#[serde(borrow)] StrOr<'a, List<Obj<Block<'a>>>>);

/// One content block: `text`, `tool_use`, `tool_result`, `thinking`, `image`, …
#[derive(Deserialize, Default)]
#[serde(default)]
pub(crate) struct Block<'a> {
    #[serde(rename = "type", borrow)]
    pub kind: Text<'a>,
    #[serde(borrow)]
    pub text: Text<'a>,
    /// `tool_use`: the call's id, tool name and input.
    #[serde(borrow)]
    pub id: Text<'a>,
    #[serde(borrow)]
    pub name: Text<'a>,
    pub input: Option<Value>,
    /// `tool_result`: the call it answers, its content, whether it failed.
    #[serde(borrow)]
    pub tool_use_id: Text<'a>,
    #[serde(borrow)]
    pub content: Content<'a>,
    pub is_error: Flag,
}

impl Content<'_> {
    /// The text of the content: the string, or the text blocks joined by newlines.
    pub fn text(&self) -> Cow<'_, str> {
        if let StrOr::Str(text) = &self.0 {
            return Cow::Borrowed(text);
        }
        let mut texts = self
            .blocks()
            .filter(|b| b.kind.as_str() == Some("text"))
            .filter_map(|b| b.text.as_str());
        match (texts.next(), texts.next()) {
            (None, _) => Cow::Borrowed(""),
            (Some(only), None) => Cow::Borrowed(only),
            (Some(first), Some(second)) => {
                let mut all = format!("{first}\n{second}");
                for text in texts {
                    all.push('\n');
                    all.push_str(text);
                }
                Cow::Owned(all)
            }
        }
    }

    /// The string content, when it is one.
    pub fn as_str(&self) -> Option<&str> {
        match &self.0 {
            StrOr::Str(text) => Some(text),
            _ => None,
        }
    }

    /// The blocks (none for a string).
    pub fn blocks(&self) -> impl Iterator<Item = &Block<'_>> {
        let blocks = match &self.0 {
            StrOr::Other(List(blocks)) => blocks.as_slice(),
            _ => &[],
        };
        blocks.iter().filter_map(|b| b.0.as_ref())
    }
}

/// A line's `toolUseResult`: an object whose shape depends on the tool, or (for errors) a
/// plain string such as `"Error: Exit code 1"`.
#[derive(Deserialize, Default)]
#[serde(transparent)]
pub(crate) struct ToolUseResult<'a>(#[serde(borrow)] StrOr<'a, Obj<ResultFields<'a>>>);

impl ToolUseResult<'_> {
    pub fn fields(&self) -> Option<&ResultFields<'_>> {
        match &self.0 {
            StrOr::Other(Obj(fields)) => fields.as_ref(),
            _ => None,
        }
    }

    pub fn text(&self) -> Option<&str> {
        match &self.0 {
            StrOr::Str(text) => Some(text),
            _ => None,
        }
    }

    pub fn is_present(&self) -> bool {
        self.fields().is_some() || self.text().is_some()
    }
}

/// The fields of the tools' results the mapping reads (Read, Edit, Write, NotebookEdit, Bash,
/// Agent); file contents (`originalFile`, `content`) are skipped, not built.
#[derive(Deserialize, Default)]
#[serde(default)]
pub(crate) struct ResultFields<'a> {
    /// Write: `create` or `update`; Read: `text`, `image`, …
    #[serde(rename = "type", borrow)]
    pub kind: Text<'a>,
    /// Read: the file read.
    pub file: Obj<ReadFile>,
    /// Edit, Write: the hunks applied.
    #[serde(rename = "structuredPatch")]
    pub structured_patch: List<Obj<Hunk<'a>>>,
    /// Edit, Write: `git diff` figures, when the file is in a repository.
    #[serde(rename = "gitDiff")]
    pub git_diff: Obj<LineChanges>,
    /// Agent / Task: the subagent started.
    #[serde(rename = "agentId", borrow)]
    pub agent_id: Text<'a>,
    #[serde(rename = "agentType", borrow)]
    pub agent_type: Text<'a>,
    /// Bash: cut short, or moved to the background (its exit is not known yet).
    pub interrupted: Flag,
    #[serde(rename = "backgroundTaskId", borrow)]
    pub background_task_id: Text<'a>,
    /// NotebookEdit: the change, or why it failed.
    #[serde(borrow)]
    pub error: Text<'a>,
    #[serde(borrow)]
    pub edit_mode: Text<'a>,
}

/// `toolUseResult.file` of a Read.
#[derive(Deserialize, Default)]
#[serde(default)]
pub(crate) struct ReadFile {
    #[serde(rename = "totalLines")]
    pub total_lines: Count,
    #[serde(rename = "numLines")]
    pub num_lines: Count,
}

/// One hunk of a `structuredPatch`.
#[derive(Deserialize, Default)]
#[serde(default)]
pub(crate) struct Hunk<'a> {
    #[serde(rename = "oldStart")]
    pub old_start: Count,
    #[serde(rename = "oldLines")]
    pub old_lines: Count,
    #[serde(rename = "newStart")]
    pub new_start: Count,
    #[serde(rename = "newLines")]
    pub new_lines: Count,
    #[serde(borrow)]
    pub lines: List<Text<'a>>,
}

/// Added and deleted lines.
#[derive(Deserialize, Default)]
#[serde(default)]
pub(crate) struct LineChanges {
    pub additions: Count,
    pub deletions: Count,
}

/// Parse one line; `None` when it is not a JSON object.
pub(crate) fn parse_line(line: &[u8]) -> Option<Line<'_>> {
    match serde_json::from_slice::<Obj<Line<'_>>>(line) {
        Ok(Obj(line)) => line,
        Err(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tool_result_line_reads_its_parts() {
        let line = br#"{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"a"},{"type":"image"},{"type":"text","text":"b"}],"is_error":false}]},"toolUseResult":{"type":"text","file":{"filePath":"x","content":"big","numLines":2,"startLine":1,"totalLines":9}},"timestamp":"2026-12-06T00:28:08.819Z"}"#;
        let line = parse_line(line).unwrap();
        assert_eq!(line.kind.as_str(), Some("user"));
        let message = line.message.0.unwrap();
        let block = message.content.blocks().next().unwrap();
        assert_eq!(block.tool_use_id.as_str(), Some("t1"));
        assert_eq!(block.content.text(), "a\nb");
        assert_eq!(block.is_error.0, Some(false));
        let fields = line.tool_use_result.fields().unwrap();
        let file = fields.file.0.as_ref().unwrap();
        assert_eq!((file.total_lines.0, file.num_lines.0), (Some(9), Some(2)));
    }

    #[test]
    fn odd_shapes_read_as_absent_and_not_json_is_none() {
        let line = parse_line(br#"{"type":7,"message":"hi","toolUseResult":[1],"cwd":null}"#);
        let line = line.unwrap();
        assert!(line.kind.as_str().is_none() && line.message.0.is_none());
        assert!(!line.tool_use_result.is_present());
        assert!(parse_line(b"[1,2]").is_none());
        assert!(parse_line(b"{\"type\":\"user\"").is_none());
        assert!(parse_line(b"\xff\xfe").is_none());
    }
}
