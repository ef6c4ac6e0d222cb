//! The pre-tool event an agent writes on the hook's standard input, read into one shape
//! ([`PreToolEvent`]) whatever the agent (`shared/reference/hooks.md`):
//!
//! | agent | event | ids | transcript |
//! |---|---|---|---|
//! | Claude Code | `PreToolUse` | `session_id`, `tool_use_id` | `transcript_path` (the call not yet in it) |
//! | Codex CLI | `PreToolUse` | `session_id`, `turn_id`, `tool_use_id` | `transcript_path`, the rollout (the call in it already) |
//! | Gemini CLI | `BeforeTool` | `session_id` | `transcript_path` (the call not yet in it) |
//! | opencode | `tool.execute.before` (agentwatch's plugin) | `session_id`, `call_id` | none: the session is opencode's |
//!
//! Every field but the session id and the tool's name is optional; a value of another type
//! reads as absent. What is not a pre-tool event of the agent is an error naming what is wrong
//! (the hook lets the call run and says so in its log).

use crate::Agent;
use serde::Deserialize;
use serde_json::Value;
use std::path::PathBuf;

/// The most the hook reads from its standard input: an event is a few kilobytes, a tool input
/// (a file written whole) at most a few megabytes.
pub const MAX_EVENT_BYTES: usize = 16 << 20;

/// A call the agent is about to run.
#[derive(Debug, Clone, PartialEq)]
pub struct PreToolEvent {
    pub agent: Agent,
    pub session_id: String,
    /// The session's transcript, where the agent names it.
    pub transcript_path: Option<PathBuf>,
    pub cwd: Option<String>,
    /// The tool, as the agent names it (`Bash`, `run_shell_command`, `bash`).
    pub tool_name: String,
    /// Its input as the model sent it (`{}` when absent).
    pub tool_input: Value,
    /// The call's id, where the agent gives one (Gemini does not).
    pub tool_use_id: Option<String>,
    /// A Claude Code subagent's id, when the call is a subagent's.
    pub agent_id: Option<String>,
    /// opencode: the server the plugin runs in, when it knows it.
    pub server_url: Option<String>,
}

/// Why standard input is not a pre-tool event.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EventError {
    #[error("the event is empty")]
    Empty,
    #[error("the event is larger than {MAX_EVENT_BYTES} bytes")]
    TooLarge,
    #[error("the event is not a JSON object: {0}")]
    NotJson(String),
    #[error("`{event}` is not {agent}'s pre-tool event (`{expected}`)")]
    OtherEvent {
        agent: Agent,
        event: String,
        expected: &'static str,
    },
    #[error("the event has no `{0}`")]
    Missing(&'static str),
}

/// The fields any of the agents write; each read leniently.
#[derive(Deserialize, Default)]
#[serde(default)]
struct Raw {
    hook_event_name: Lenient,
    session_id: Lenient,
    #[serde(rename = "sessionID")]
    session_id_camel: Lenient,
    transcript_path: Lenient,
    cwd: Lenient,
    tool_name: Lenient,
    tool: Lenient,
    tool_input: Option<Value>,
    args: Option<Value>,
    tool_use_id: Lenient,
    call_id: Lenient,
    #[serde(rename = "callID")]
    call_id_camel: Lenient,
    agent_id: Lenient,
    server_url: Lenient,
}

/// A string field; any other value reads as absent.
#[derive(Default)]
struct Lenient(Option<String>);

impl<'de> Deserialize<'de> for Lenient {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(match Value::deserialize(d)? {
            Value::String(s) if !s.trim().is_empty() => Lenient(Some(s)),
            _ => Lenient(None),
        })
    }
}

/// The pre-tool event's name for `agent` (the hook answers no other).
pub fn expected_event(agent: Agent) -> &'static str {
    match agent {
        Agent::Claude | Agent::Codex => "PreToolUse",
        Agent::Gemini => "BeforeTool",
        Agent::Opencode => "tool.execute.before",
    }
}

/// `bytes` (the hook's standard input) read as `agent`'s pre-tool event.
pub fn parse_event(agent: Agent, bytes: &[u8]) -> Result<PreToolEvent, EventError> {
    if bytes.len() > MAX_EVENT_BYTES {
        return Err(EventError::TooLarge);
    }
    if bytes.trim_ascii().is_empty() {
        return Err(EventError::Empty);
    }
    let value: Value =
        serde_json::from_slice(bytes).map_err(|e| EventError::NotJson(e.to_string()))?;
    if !value.is_object() {
        return Err(EventError::NotJson("not an object".into()));
    }
    let raw = Raw::deserialize(value).map_err(|e| EventError::NotJson(e.to_string()))?;
    let expected = expected_event(agent);
    if let Some(event) = raw.hook_event_name.0
        && event != expected
    {
        return Err(EventError::OtherEvent {
            agent,
            event,
            expected,
        });
    }
    let session_id = raw
        .session_id
        .0
        .or(raw.session_id_camel.0)
        .ok_or(EventError::Missing("session_id"))?;
    let tool_name = raw
        .tool_name
        .0
        .or(raw.tool.0)
        .ok_or(EventError::Missing("tool_name"))?;
    Ok(PreToolEvent {
        agent,
        session_id,
        transcript_path: raw.transcript_path.0.map(PathBuf::from),
        cwd: raw.cwd.0,
        tool_name,
        tool_input: raw
            .tool_input
            .or(raw.args)
            .filter(|v| !v.is_null())
            .unwrap_or_else(|| Value::Object(Default::default())),
        tool_use_id: raw.tool_use_id.0.or(raw.call_id.0).or(raw.call_id_camel.0),
        agent_id: raw.agent_id.0,
        server_url: raw.server_url.0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The events as the agents write them (hooks.md, verified with the real CLIs).
    #[test]
    fn each_agents_event_reads_into_one_shape() {
        let rows = [
            (
                Agent::Claude,
                json!({"session_id": "07489e12", "transcript_path": "/h/.claude/projects/-w/07489e12.jsonl",
                       "cwd": "/w", "prompt_id": "0e85", "permission_mode": "bypassPermissions",
                       "effort": {"level": "medium"}, "hook_event_name": "PreToolUse", "tool_name": "Bash",
                       "tool_input": {"command": "python3 -c \"import nosuchmodule\"", "description": "x"},
                       "tool_use_id": "toolu_1"}),
                Some("toolu_1"),
            ),
            (
                Agent::Codex,
                json!({"session_id": "01a2516e", "turn_id": "01a2516e",
                       "transcript_path": "/h/.codex/sessions/2026/12/07/rollout-x-01a2516e.jsonl",
                       "cwd": "/w", "hook_event_name": "PreToolUse", "model": "m",
                       "permission_mode": "bypassPermissions", "tool_name": "Bash",
                       "tool_input": {"command": "python3 -c \"import nosuchmodule\""}, "tool_use_id": "call_1"}),
                Some("call_1"),
            ),
            (
                Agent::Gemini,
                json!({"session_id": "0a59ed7f", "transcript_path": "/h/.gemini/tmp/w/chats/session-x.jsonl",
                       "cwd": "/w", "hook_event_name": "BeforeTool", "timestamp": "2026-12-07T16:57:35.511Z",
                       "tool_name": "run_shell_command",
                       "tool_input": {"command": "python3 -c \"import nosuchmodule\"", "description": "x"}}),
                None,
            ),
            (
                Agent::Opencode,
                json!({"hook_event_name": "tool.execute.before", "session_id": "ses_1", "call_id": "toolu_1",
                       "tool": "bash", "tool_input": {"command": "python3 -c \"import nosuchmodule\""},
                       "cwd": "/w", "server_url": "http://127.0.0.1:4096/"}),
                Some("toolu_1"),
            ),
        ];
        for (agent, event, id) in rows {
            let read = parse_event(agent, event.to_string().as_bytes()).unwrap();
            assert_eq!(read.agent, agent);
            assert!(!read.session_id.is_empty());
            assert_eq!(
                read.tool_input["command"],
                "python3 -c \"import nosuchmodule\""
            );
            assert_eq!(read.tool_use_id.as_deref(), id, "{agent}");
            assert_eq!(read.cwd.as_deref(), Some("/w"));
        }
    }

    /// Table: what is not a pre-tool event, and the error that says so.
    #[test]
    fn what_is_not_an_event_says_why() {
        let rows: [(&[u8], &str); 6] = [
            (b"", "empty"),
            (b"not json", "not a JSON object"),
            (b"[1,2]", "not a JSON object"),
            (
                br#"{"hook_event_name":"PostToolUse","session_id":"s","tool_name":"Bash"}"#,
                "`PostToolUse` is not claude's",
            ),
            (
                br#"{"hook_event_name":"PreToolUse","tool_name":"Bash"}"#,
                "no `session_id`",
            ),
            (br#"{"session_id":"s","tool_name":7}"#, "no `tool_name`"),
        ];
        for (bytes, says) in rows {
            let error = parse_event(Agent::Claude, bytes).unwrap_err().to_string();
            assert!(error.contains(says), "{error}");
        }
    }

    #[test]
    fn a_field_of_another_type_reads_as_absent() {
        let event = json!({"session_id": "s", "tool_name": "Bash", "transcript_path": 3,
                           "tool_input": null, "cwd": ["x"]});
        let read = parse_event(Agent::Claude, event.to_string().as_bytes()).unwrap();
        assert_eq!(read.transcript_path, None);
        assert_eq!(read.cwd, None);
        assert_eq!(read.tool_input, json!({}));
    }
}
