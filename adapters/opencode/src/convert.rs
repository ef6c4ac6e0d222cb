//! opencode's message/part JSON to detect-core sessions.
//!
//! The same `{info, parts}` message shape comes from `GET /session/:id/message`, from
//! `opencode export`, and (as `message.data` / `part.data` rows) from `opencode.db`. Metadata is
//! parsed leniently: every key is optional, as older opencode versions differ.

use detect_core::{
    COMMITTED_KEY, Call, CallStatus, CallTime, HOOK_MARKER, Session, output_commit, output_hash,
    total_lines_in_output,
};
use serde_json::{Map, Value};

/// Why an opencode document could not be converted.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ConvertError {
    #[error("{what}: expected {expected}")]
    Shape {
        what: String,
        expected: &'static str,
    },
}

fn shape(what: impl Into<String>, expected: &'static str) -> ConvertError {
    ConvertError::Shape {
        what: what.into(),
        expected,
    }
}

/// A session from an `opencode export` document: `{info: Session, messages: [{info, parts}]}`.
pub fn session_from_export(export: &Value) -> Result<Session, ConvertError> {
    let info = export
        .get("info")
        .ok_or_else(|| shape("export", "an object with `info` and `messages`"))?;
    let messages = export
        .get("messages")
        .and_then(Value::as_array)
        .ok_or_else(|| shape("export.messages", "a list of {info, parts}"))?;
    session_from_messages(info, messages)
}

/// A session from its `Session` info object and its messages in chronological order.
pub fn session_from_messages(info: &Value, messages: &[Value]) -> Result<Session, ConvertError> {
    let info = info
        .as_object()
        .ok_or_else(|| shape("session info", "an object"))?;
    let id = text(info, "id").ok_or_else(|| shape("session info.id", "a string"))?;
    let mut session = Session::new(id);
    session.parent_id = text(info, "parentID");
    session.title = text(info, "title");
    session.directory = text(info, "directory");
    session.agent = text(info, "agent");
    for (index, message) in messages.iter().enumerate() {
        let message_info = message.get("info").and_then(Value::as_object);
        if session.agent.is_none()
            && let Some(mi) = message_info
            && mi.get("role").and_then(Value::as_str) == Some("assistant")
        {
            session.agent = text(mi, "agent").or_else(|| text(mi, "mode"));
        }
        let parts = message
            .get("parts")
            .and_then(Value::as_array)
            .ok_or_else(|| shape(format!("message #{index}.parts"), "a list"))?;
        session
            .calls
            .extend(parts.iter().filter_map(call_from_part));
    }
    Ok(session)
}

fn text(obj: &Map<String, Value>, key: &str) -> Option<String> {
    obj.get(key).and_then(Value::as_str).map(str::to_owned)
}

/// The call of a `tool` part, or `None` for other parts and tool parts without a usable state.
pub fn call_from_part(part: &Value) -> Option<Call> {
    if part.get("type").and_then(Value::as_str) != Some("tool") {
        return None;
    }
    let tool = part.get("tool")?.as_str()?.to_owned();
    let state = part.get("state")?.as_object()?;
    // agentwatch's own hook refusal (the plugin's throw, kept verbatim as `state.error`).
    let refused = state
        .get("error")
        .and_then(Value::as_str)
        .is_some_and(|e| e.starts_with(HOOK_MARKER));
    let status = match CallStatus::from_text(state.get("status")?.as_str()?) {
        CallStatus::Error if refused => CallStatus::Blocked,
        status => status,
    };
    let input = match state.get("input") {
        Some(v @ Value::Object(_)) => v.clone(),
        _ => Value::Object(Map::new()),
    };
    let mut metadata = match state.get("metadata") {
        Some(Value::Object(m)) => m.clone(),
        _ => Map::new(),
    };
    // The read tool notes the file's length in its output; keep it where the detector looks.
    if !metadata.contains_key("total_lines")
        && let Some(total) = state
            .get("output")
            .and_then(Value::as_str)
            .and_then(total_lines_in_output)
    {
        metadata.insert("total_lines".to_owned(), Value::from(total));
    }
    // The output is hashed, never kept: `state.output`, or `metadata.output` for a user-run
    // shell part.
    let output = state
        .get("output")
        .and_then(Value::as_str)
        .or_else(|| metadata.get("output").and_then(Value::as_str));
    let output_hash = output.map(output_hash);
    // A commit the output shows lands, whatever the exit (`git commit && pytest` failing),
    // unless the session landed it already: its hash is kept.
    if tool == "bash"
        && let Some(commit) = output.and_then(output_commit)
    {
        metadata.insert(COMMITTED_KEY.to_owned(), Value::from(commit));
    }
    let time = state
        .get("time")
        .and_then(Value::as_object)
        .map(|t| CallTime {
            start: t.get("start").and_then(Value::as_i64),
            end: t.get("end").and_then(Value::as_i64),
        });
    Some(Call {
        tool,
        input,
        status,
        metadata: if metadata.is_empty() {
            Value::Null
        } else {
            Value::Object(metadata)
        },
        time,
        output_hash,
    })
}
