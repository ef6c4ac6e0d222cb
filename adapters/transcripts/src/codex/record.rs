//! One line of a Codex rollout, as far as the reader needs it. A line is the envelope
//! `{timestamp, type, payload}` (September 2025 on) or, in the older bare era, the item itself
//! (`{"type":"function_call",…}`), the session's first line `{id, timestamp, instructions,
//! git}` or a `{"record_type":"state"}` marker. One lenient struct reads all of them: every
//! field optional, a value of another type read as absent, everything else skipped unbuilt
//! (`base_instructions` alone is tens of kilobytes).

use crate::lenient::{Flag, Int, List, Obj, StrOr, Text};
use serde::Deserialize;
use serde_json::Value;
use std::collections::BTreeMap;

/// A line, the envelope's payload, or an `item_completed` event's item: the fields of every
/// record the reader uses.
#[derive(Deserialize, Default)]
#[serde(default)]
pub(crate) struct Item<'a> {
    #[serde(rename = "type", borrow)]
    pub kind: Text<'a>,
    #[serde(borrow)]
    pub timestamp: Text<'a>,
    /// The envelope's record.
    pub payload: Obj<Box<Item<'a>>>,
    /// Bare-era markers.
    #[serde(borrow)]
    pub record_type: Text<'a>,

    // session_meta (and the bare era's first line)
    #[serde(borrow)]
    pub id: Text<'a>,
    #[serde(borrow)]
    pub cwd: Text<'a>,
    pub git: Obj<Git<'a>>,
    #[serde(borrow)]
    pub model_provider: Text<'a>,
    #[serde(borrow)]
    pub cli_version: Text<'a>,
    #[serde(borrow)]
    pub originator: Text<'a>,
    #[serde(borrow)]
    pub source: StrOr<'a, Obj<Source<'a>>>,
    #[serde(borrow)]
    pub parent_thread_id: Text<'a>,
    #[serde(borrow)]
    pub forked_from_id: Text<'a>,
    #[serde(borrow)]
    pub history_mode: Text<'a>,
    #[serde(borrow)]
    pub agent_nickname: Text<'a>,
    #[serde(borrow)]
    pub agent_role: Text<'a>,

    // turn_context
    #[serde(borrow)]
    pub model: Text<'a>,

    // response_item: message
    #[serde(borrow)]
    pub role: Text<'a>,
    pub content: List<Obj<ContentItem<'a>>>,

    // response_item: calls and their outputs
    #[serde(borrow)]
    pub name: Text<'a>,
    #[serde(borrow)]
    pub namespace: Text<'a>,
    /// `function_call`: a JSON string (sometimes an object; redacted logs: any text).
    #[serde(borrow)]
    pub arguments: StrOr<'a, Value>,
    /// `custom_tool_call`: the freeform input (an `apply_patch` patch).
    #[serde(borrow)]
    pub input: StrOr<'a, Value>,
    #[serde(borrow)]
    pub call_id: Text<'a>,
    /// `*_output`: a string, a JSON string of `{output, metadata: {exit_code}}`, an object
    /// `{content, success}` or a list of content items.
    #[serde(borrow)]
    pub output: StrOr<'a, Value>,
    /// `local_shell_call`, `web_search_call`.
    pub action: Obj<Action<'a>>,
    #[serde(borrow)]
    pub status: Text<'a>,

    // event_msg
    /// `user_message`.
    #[serde(borrow)]
    pub message: Text<'a>,
    /// `patch_apply_end`.
    pub success: Flag,
    /// `patch_apply_end`, `FileChange`: per path.
    pub changes: Obj<BTreeMap<String, Obj<Change<'a>>>>,
    /// `exec_command_end`, `CommandExecution`.
    pub exit_code: Int,
    /// `item_completed`.
    pub item: Obj<Box<Item<'a>>>,
}

/// `session_meta.git`.
#[derive(Deserialize, Default)]
#[serde(default)]
pub(crate) struct Git<'a> {
    #[serde(borrow)]
    pub branch: Text<'a>,
    #[serde(borrow)]
    pub commit_hash: Text<'a>,
    #[serde(borrow)]
    pub repository_url: Text<'a>,
}

/// `session_meta.source` when it is an object: `{"subagent": "review"}` or
/// `{"subagent": {"thread_spawn": {…}}}`.
#[derive(Deserialize, Default)]
#[serde(default)]
pub(crate) struct Source<'a> {
    #[serde(borrow)]
    pub subagent: StrOr<'a, Obj<Subagent<'a>>>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
pub(crate) struct Subagent<'a> {
    #[serde(borrow)]
    pub thread_spawn: Obj<ThreadSpawn<'a>>,
    #[serde(borrow)]
    pub other: Text<'a>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
pub(crate) struct ThreadSpawn<'a> {
    #[serde(borrow)]
    pub parent_thread_id: Text<'a>,
    #[serde(borrow)]
    pub agent_nickname: Text<'a>,
    #[serde(borrow)]
    pub agent_role: Text<'a>,
}

/// A content item of a message (`input_text`, `output_text`, `text`, …).
#[derive(Deserialize, Default)]
#[serde(default)]
pub(crate) struct ContentItem<'a> {
    #[serde(rename = "type", borrow)]
    pub kind: Text<'a>,
    #[serde(borrow)]
    pub text: Text<'a>,
}

/// `local_shell_call.action` (`exec` with an argv) and `web_search_call.action`.
#[derive(Deserialize, Default)]
#[serde(default)]
pub(crate) struct Action<'a> {
    #[serde(rename = "type", borrow)]
    pub kind: Text<'a>,
    pub command: StrOr<'a, Vec<Value>>,
    #[serde(borrow)]
    pub working_directory: Text<'a>,
    #[serde(borrow)]
    pub query: Text<'a>,
}

/// One file's change: `{type, unified_diff, move_path}` (current), or the older externally
/// tagged `{"add": {content}}` / `{"update": {unified_diff}}` / `{"delete": {…}}`.
#[derive(Deserialize, Default)]
#[serde(default)]
pub(crate) struct Change<'a> {
    #[serde(rename = "type", borrow)]
    pub kind: Text<'a>,
    #[serde(borrow)]
    pub unified_diff: Text<'a>,
    #[serde(borrow)]
    pub content: Text<'a>,
    pub add: Obj<ChangeBody<'a>>,
    pub update: Obj<ChangeBody<'a>>,
    pub delete: Obj<ChangeBody<'a>>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
pub(crate) struct ChangeBody<'a> {
    #[serde(borrow)]
    pub unified_diff: Text<'a>,
    #[serde(borrow)]
    pub content: Text<'a>,
}

impl<'a> Item<'a> {
    /// The text of its content items joined by newlines.
    pub fn content_text(&self) -> String {
        let mut text = String::new();
        for item in self.content.0.iter().filter_map(|c| c.0.as_ref()) {
            if let Some(t) = item.text.as_str() {
                if !text.is_empty() {
                    text.push('\n');
                }
                text.push_str(t);
            }
        }
        text
    }

    /// The parent thread of a subagent's session_meta.
    pub fn parent_thread(&self) -> Option<String> {
        self.spawn()
            .and_then(|s| s.parent_thread_id.non_empty())
            .or_else(|| self.parent_thread_id.non_empty())
    }

    pub fn spawn(&self) -> Option<&ThreadSpawn<'a>> {
        let StrOr::Other(Obj(Some(source))) = &self.source else {
            return None;
        };
        match &source.subagent {
            StrOr::Other(Obj(Some(sub))) => sub.thread_spawn.0.as_ref(),
            _ => None,
        }
    }

    /// `source` in a word: `cli`, `exec`, `vscode`, `subagent`, `subagent:review`, …
    pub fn source_name(&self) -> Option<String> {
        match &self.source {
            StrOr::Str(s) => Some(s.to_string()),
            StrOr::Other(Obj(Some(source))) => match &source.subagent {
                StrOr::Str(kind) => Some(format!("subagent:{kind}")),
                StrOr::Other(Obj(Some(sub))) => Some(match sub.other.as_str() {
                    Some(other) => format!("subagent:{other}"),
                    None => "subagent".to_owned(),
                }),
                _ => None,
            },
            _ => None,
        }
    }
}

/// Parse one line; `None` when it is not a JSON object.
pub(crate) fn parse_line(line: &[u8]) -> Option<Item<'_>> {
    match serde_json::from_slice::<Obj<Item<'_>>>(line) {
        Ok(Obj(item)) => item,
        Err(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_envelope_and_a_bare_item_read_alike() {
        let wrapped = parse_line(br#"{"timestamp":"2026-12-06T02:00:45.729Z","ordinal":9,"type":"response_item","payload":{"type":"function_call","id":"fc","name":"exec_command","arguments":"{\"cmd\":\"ls\"}","call_id":"c1"},"metadata":{"history_sequence":4}}"#).unwrap();
        assert_eq!(wrapped.kind.as_str(), Some("response_item"));
        let call = wrapped.payload.0.unwrap();
        assert_eq!(call.kind.as_str(), Some("function_call"));
        assert!(matches!(&call.arguments, StrOr::Str(a) if a == r#"{"cmd":"ls"}"#));
        let bare = parse_line(br#"{"type":"function_call","name":"shell","arguments":"{\"command\":[\"ls\"]}","call_id":"c1"}"#).unwrap();
        assert!(bare.payload.0.is_none());
        assert_eq!(bare.call_id.as_str(), Some("c1"));
    }

    #[test]
    fn a_subagent_source_names_its_parent() {
        let meta = parse_line(br#"{"type":"session_meta","payload":{"id":"child","source":{"subagent":{"thread_spawn":{"parent_thread_id":"p1","depth":1,"agent_nickname":"Euler"}}}}}"#).unwrap();
        let meta = meta.payload.0.unwrap();
        assert_eq!(meta.parent_thread().as_deref(), Some("p1"));
        assert_eq!(meta.source_name().as_deref(), Some("subagent"));
        let review = parse_line(br#"{"source":{"subagent":"review"}}"#).unwrap();
        assert_eq!(review.source_name().as_deref(), Some("subagent:review"));
        assert_eq!(review.parent_thread(), None);
        let odd = parse_line(br#"{"source":7,"changes":[1],"exit_code":-2,"item":"x"}"#).unwrap();
        assert_eq!((odd.source_name(), odd.exit_code.0), (None, Some(-2)));
        assert!(odd.changes.0.is_none() && odd.item.0.is_none());
        assert!(parse_line(b"[1]").is_none() && parse_line(b"{").is_none());
    }
}
