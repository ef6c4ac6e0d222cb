//! The session and call model, and the session file (`agentwatch-sessions/1`) that holds it.
//!
//! Parsing walks the JSON by hand rather than through derived `Deserialize`, so that every error
//! names the session and the call index it is about, as the fixture format requires.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::{BTreeMap, HashSet};

/// The `format` tag of a session file.
pub const SESSION_FILE_FORMAT: &str = "agentwatch-sessions/1";

/// One agent session: its calls in message order, then part order.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Session {
    pub id: String,
    #[serde(default)]
    pub parent_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub directory: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<Label>,
    /// Labels for one profile (by its name), in place of `label` under that profile: a session
    /// that pins one profile's gate may be a loop another profile must catch.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, Label>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// Line counts of files, keyed by full path.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub line_counts: BTreeMap<String, u64>,
    /// For a labelled loop: the index in `calls` of the call where the loop begins (the
    /// backtest measures its latency from there).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loop_start: Option<usize>,
    pub calls: Vec<Call>,
}

/// What a labelled session must do under the detector.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Label {
    MustFlag,
    MustNotFlag,
}

impl Label {
    pub fn as_str(self) -> &'static str {
        match self {
            Label::MustFlag => "must_flag",
            Label::MustNotFlag => "must_not_flag",
        }
    }

    fn parse(text: &str) -> Option<Label> {
        match text {
            "must_flag" => Some(Label::MustFlag),
            "must_not_flag" => Some(Label::MustNotFlag),
            _ => None,
        }
    }
}

impl Session {
    /// The session's label under `profile`: its `labels` entry for the profile, else `label`.
    pub fn label_for(&self, profile: crate::Profile) -> Option<Label> {
        self.labels.get(profile.as_str()).copied().or(self.label)
    }
}

/// One tool call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Call {
    pub tool: String,
    /// The tool's input object as the model sent it.
    pub input: Value,
    pub status: CallStatus,
    #[serde(default, skip_serializing_if = "Value::is_null")]
    pub metadata: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time: Option<CallTime>,
    /// A hash of the tool's output ([`output_hash`]), when the source had one; the output
    /// itself is never kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_hash: Option<String>,
}

/// The hash of a tool output kept in [`Call::output_hash`]: 64-bit FNV-1a of the UTF-8 bytes,
/// as 16 lowercase hex digits. Stable across versions and platforms (it is stored in fixtures).
pub fn output_hash(output: &str) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in output.as_bytes() {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("{hash:016x}")
}

/// Start and end of a call, unix milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct CallTime {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end: Option<i64>,
}

/// A call's status. Only `completed` and `error` calls count; the rest are ignored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CallStatus {
    Pending,
    Running,
    Completed,
    Error,
    /// A status this version does not know: not counted.
    #[serde(untagged)]
    Other(String),
}

impl CallStatus {
    pub fn from_text(status: &str) -> Self {
        match status {
            "pending" => Self::Pending,
            "running" => Self::Running,
            "completed" => Self::Completed,
            "error" => Self::Error,
            other => Self::Other(other.to_owned()),
        }
    }

    /// Whether the detector counts a call with this status.
    pub fn is_counted(&self) -> bool {
        matches!(self, Self::Completed | Self::Error)
    }
}

impl Call {
    /// A completed call with no metadata and no time: the usual start when building from code.
    pub fn completed(tool: impl Into<String>, input: Value) -> Self {
        Self {
            tool: tool.into(),
            input,
            status: CallStatus::Completed,
            metadata: Value::Null,
            time: None,
            output_hash: None,
        }
    }

    pub fn with_metadata(mut self, metadata: Value) -> Self {
        self.metadata = metadata;
        self
    }

    pub fn with_status(mut self, status: CallStatus) -> Self {
        self.status = status;
        self
    }

    /// The call with the hash of `output` ([`output_hash`]).
    pub fn with_output(mut self, output: &str) -> Self {
        self.output_hash = Some(output_hash(output));
        self
    }

    pub fn with_time(mut self, start: i64, end: i64) -> Self {
        self.time = Some(CallTime {
            start: Some(start),
            end: Some(end),
        });
        self
    }

    /// When the call started (unix ms), if known.
    pub fn start_ms(&self) -> Option<i64> {
        self.time.and_then(|t| t.start)
    }

    /// When the call's effect happened (its end, else its start), if known.
    pub fn end_ms(&self) -> Option<i64> {
        self.time.and_then(|t| t.end.or(t.start))
    }
}

impl Session {
    pub fn new(id: impl Into<String>) -> Self {
        Self {
            id: id.into(),
            ..Self::default()
        }
    }
}

/// A session file: `{"format": "agentwatch-sessions/1", "sessions": [...]}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionFile {
    pub format: String,
    pub sessions: Vec<Session>,
}

impl SessionFile {
    pub fn new(sessions: Vec<Session>) -> Self {
        Self {
            format: SESSION_FILE_FORMAT.to_owned(),
            sessions,
        }
    }

    /// Parse a session file. Unknown keys are ignored; a missing or mistyped required key is an
    /// error naming the session and the call index.
    ///
    /// The document is read one session at a time ([`stream_sessions`]): no JSON tree of the
    /// whole file is built.
    pub fn from_json(text: &str) -> Result<Self, ParseError> {
        let mut de = serde_json::Deserializer::from_str(text);
        let mut sessions = Vec::new();
        let streamed = stream_sessions(&mut de, &[], &mut |serial, session| {
            sessions.push((serial, session));
        })?;
        streamed.outcome?;
        Ok(Self::new(
            sessions
                .into_iter()
                .filter(|(serial, _)| *serial >= streamed.first_serial)
                .map(|(_, session)| session)
                .collect(),
        ))
    }

    pub fn from_value(value: &Value) -> Result<Self, ParseError> {
        let root = value.as_object().ok_or(ParseError::NotAnObject)?;
        check_format(root.get("format"))?;
        let list = match root.get("sessions") {
            Some(Value::Array(list)) => list,
            _ => return Err(ParseError::NoSessions),
        };
        let mut sessions = Vec::with_capacity(list.len());
        let mut seen = HashSet::new();
        for (index, item) in list.iter().enumerate() {
            let session = parse_session(index, item.clone())?;
            if !seen.insert(session.id.clone()) {
                return Err(ParseError::DuplicateSession(session.id));
            }
            sessions.push(session);
        }
        Ok(Self::new(sessions))
    }

    /// Pretty JSON in the on-disk form.
    pub fn to_json_pretty(&self) -> String {
        // Serialising plain data (strings, numbers, maps with string keys) cannot fail.
        serde_json::to_string_pretty(self).unwrap_or_default()
    }
}

/// Why a session file could not be read.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ParseError {
    #[error("not JSON (line {line}, column {column}): {message}")]
    Json {
        line: usize,
        column: usize,
        message: String,
    },
    #[error("a session file is a JSON object with `format` and `sessions`")]
    NotAnObject,
    #[error("unsupported format {0}; expected \"{SESSION_FILE_FORMAT}\"")]
    Format(String),
    #[error("`sessions` must be a list")]
    NoSessions,
    #[error("session #{index}: {message}")]
    Session { index: usize, message: String },
    #[error("session {session}, call {call}: {message}")]
    Call {
        session: String,
        call: usize,
        message: String,
    },
    #[error("session id {0} appears twice")]
    DuplicateSession(String),
}

fn opt_string(obj: &Map<String, Value>, key: &str) -> Result<Option<String>, String> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(other) => Err(format!("`{key}` must be a string, found {}", kind(other))),
    }
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

fn check_format(format: Option<&Value>) -> Result<(), ParseError> {
    match format {
        Some(Value::String(f)) if f == SESSION_FILE_FORMAT => Ok(()),
        Some(Value::String(f)) => Err(ParseError::Format(f.clone())),
        Some(other) => Err(ParseError::Format(other.to_string())),
        None => Err(ParseError::Format("(missing)".to_owned())),
    }
}

fn parse_session(index: usize, value: Value) -> Result<Session, ParseError> {
    let err = |message: String| ParseError::Session { index, message };
    let Value::Object(mut obj) = value else {
        return Err(err("must be an object".to_owned()));
    };
    let obj = &mut obj;
    let id = match obj.get("id") {
        Some(Value::String(id)) if !id.is_empty() => id.clone(),
        Some(Value::String(_)) => return Err(err("`id` is empty".to_owned())),
        Some(other) => return Err(err(format!("`id` must be a string, found {}", kind(other)))),
        None => return Err(err("missing required key `id`".to_owned())),
    };
    let named = |message: String| ParseError::Session {
        index,
        message: format!("({id}) {message}"),
    };
    let label = match opt_string(obj, "label").map_err(named)?.as_deref() {
        None => None,
        Some(text) => Some(Label::parse(text).ok_or_else(|| {
            named(format!(
                "`label` must be must_flag or must_not_flag, found {text:?}"
            ))
        })?),
    };
    let mut labels = BTreeMap::new();
    match obj.get("labels") {
        None | Some(Value::Null) => {}
        Some(Value::Object(map)) => {
            for (profile, value) in map {
                if profile.parse::<crate::Profile>().is_err() {
                    return Err(named(format!(
                        "`labels` keys must be profile names, found {profile:?}"
                    )));
                }
                let label = value.as_str().and_then(Label::parse).ok_or_else(|| {
                    named(format!(
                        "labels[{profile:?}] must be must_flag or must_not_flag"
                    ))
                })?;
                labels.insert(profile.clone(), label);
            }
        }
        Some(other) => {
            return Err(named(format!(
                "`labels` must be an object, found {}",
                kind(other)
            )));
        }
    }
    let mut line_counts = BTreeMap::new();
    match obj.get("line_counts") {
        None | Some(Value::Null) => {}
        Some(Value::Object(map)) => {
            for (path, lines) in map {
                let n = lines.as_u64().ok_or_else(|| {
                    named(format!("line_counts[{path:?}] must be a whole number"))
                })?;
                line_counts.insert(path.clone(), n);
            }
        }
        Some(other) => {
            return Err(named(format!(
                "`line_counts` must be an object, found {}",
                kind(other)
            )));
        }
    }
    let loop_start = match obj.get("loop_start") {
        None | Some(Value::Null) => None,
        Some(v) => Some(
            v.as_u64()
                .and_then(|n| usize::try_from(n).ok())
                .ok_or_else(|| {
                    named("`loop_start` must be a whole number (a call index)".to_owned())
                })?,
        ),
    };
    let raw_calls = match obj.get_mut("calls") {
        Some(Value::Array(calls)) => std::mem::take(calls),
        Some(other) => {
            return Err(named(format!(
                "`calls` must be a list, found {}",
                kind(other)
            )));
        }
        None => return Err(named("missing required key `calls`".to_owned())),
    };
    let mut calls = Vec::with_capacity(raw_calls.len());
    for (call_index, raw) in raw_calls.into_iter().enumerate() {
        calls.push(parse_call(raw).map_err(|message| ParseError::Call {
            session: id.clone(),
            call: call_index,
            message,
        })?);
    }
    Ok(Session {
        parent_id: opt_string(obj, "parent_id").map_err(named)?,
        title: opt_string(obj, "title").map_err(named)?,
        agent: opt_string(obj, "agent").map_err(named)?,
        directory: opt_string(obj, "directory").map_err(named)?,
        note: opt_string(obj, "note").map_err(named)?,
        label,
        labels,
        line_counts,
        loop_start,
        calls,
        id,
    })
}

fn parse_call(value: Value) -> Result<Call, String> {
    let Value::Object(mut obj) = value else {
        return Err("a call must be an object".to_owned());
    };
    let tool = match obj.get("tool") {
        Some(Value::String(t)) if !t.is_empty() => t.clone(),
        Some(Value::String(_)) => return Err("`tool` is empty".to_owned()),
        Some(other) => return Err(format!("`tool` must be a string, found {}", kind(other))),
        None => return Err("missing required key `tool`".to_owned()),
    };
    let input = match obj.get_mut("input") {
        Some(v @ Value::Object(_)) => v.take(),
        Some(other) => return Err(format!("`input` must be an object, found {}", kind(other))),
        None => return Err("missing required key `input`".to_owned()),
    };
    if tool == "bash"
        && let Some(command) = input.get("command")
        && !command.is_string()
    {
        return Err(format!(
            "bash `input.command` must be a string, found {}",
            kind(command)
        ));
    }
    let status = match obj.get("status") {
        Some(Value::String(s)) => CallStatus::from_text(s),
        Some(other) => return Err(format!("`status` must be a string, found {}", kind(other))),
        None => return Err("missing required key `status`".to_owned()),
    };
    let time = match obj.get("time") {
        None | Some(Value::Null) => None,
        Some(Value::Object(t)) => {
            let ms = |key: &str| -> Result<Option<i64>, String> {
                match t.get(key) {
                    None | Some(Value::Null) => Ok(None),
                    Some(v) => v
                        .as_i64()
                        .or_else(|| v.as_f64().filter(|f| f.is_finite()).map(|f| f as i64))
                        .map(Some)
                        .ok_or_else(|| format!("`time.{key}` must be a number (unix ms)")),
                }
            };
            Some(CallTime {
                start: ms("start")?,
                end: ms("end")?,
            })
        }
        Some(other) => return Err(format!("`time` must be an object, found {}", kind(other))),
    };
    Ok(Call {
        tool,
        input,
        status,
        output_hash: opt_string(&obj, "output_hash")?,
        metadata: obj.remove("metadata").unwrap_or(Value::Null),
        time,
    })
}

/// What [`stream_sessions`] found besides the sessions it handed over.
#[derive(Debug, Clone, PartialEq)]
pub struct Streamed {
    /// The top-level keys asked for in `keep`, when present (the last of a repeated key).
    pub kept: Map<String, Value>,
    /// The sessions that count are those whose serial is at least this: a repeated `sessions`
    /// key replaces the earlier list, as in any JSON object.
    pub first_serial: usize,
    /// Whether the document is a valid session file (format, list, every session, unique ids),
    /// with the first error in the order [`SessionFile::from_value`] reports it.
    pub outcome: Result<(), ParseError>,
}

/// Read a session file from `de` one session at a time, handing each valid session to
/// `on_session` with a serial number as soon as it is read; only one session's JSON is held at
/// a time. The whole document is read (a syntax error anywhere is [`ParseError::Json`], as with
/// [`SessionFile::from_json`]); other errors are reported in [`Streamed::outcome`], and sessions
/// handed over before an error are the caller's to drop. Top-level keys named in `keep` are kept
/// as JSON (e.g. to recognise another format); other keys are skipped without being built.
pub fn stream_sessions<'de, R: serde_json::de::Read<'de>>(
    de: &mut serde_json::Deserializer<R>,
    keep: &[&str],
    on_session: &mut dyn FnMut(usize, Session),
) -> Result<Streamed, ParseError> {
    let json = |e: serde_json::Error| ParseError::Json {
        line: e.line(),
        column: e.column(),
        message: e.to_string(),
    };
    let mut state = StreamState {
        keep,
        on_session,
        serial: 0,
        kept: Map::new(),
        format: None,
        list: None,
        object: false,
    };
    serde::de::DeserializeSeed::deserialize(RootSeed(&mut state), &mut *de).map_err(json)?;
    de.end().map_err(json)?;
    let first_serial = match &state.list {
        Some(ListState::List { first_serial, .. }) => *first_serial,
        _ => state.serial,
    };
    let outcome = if !state.object {
        Err(ParseError::NotAnObject)
    } else {
        check_format(state.format.as_ref()).and_then(|()| match state.list.take() {
            Some(ListState::List { first_error, .. }) => first_error.map_or(Ok(()), Err),
            Some(ListState::NotAList) | None => Err(ParseError::NoSessions),
        })
    };
    Ok(Streamed {
        kept: state.kept,
        first_serial,
        outcome,
    })
}

struct StreamState<'k, 'f> {
    keep: &'k [&'k str],
    on_session: &'f mut dyn FnMut(usize, Session),
    serial: usize,
    kept: Map<String, Value>,
    format: Option<Value>,
    list: Option<ListState>,
    object: bool,
}

enum ListState {
    List {
        first_serial: usize,
        first_error: Option<ParseError>,
    },
    NotAList,
}

impl std::fmt::Debug for StreamState<'_, '_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamState")
            .field("serial", &self.serial)
            .finish_non_exhaustive()
    }
}

/// Skip whatever value comes (a document or `sessions` of the wrong type), reading it through.
macro_rules! skip_scalars {
    ($out:ty, $value:expr) => {
        fn visit_bool<E: serde::de::Error>(self, _: bool) -> Result<$out, E> {
            Ok($value)
        }
        fn visit_i64<E: serde::de::Error>(self, _: i64) -> Result<$out, E> {
            Ok($value)
        }
        fn visit_u64<E: serde::de::Error>(self, _: u64) -> Result<$out, E> {
            Ok($value)
        }
        fn visit_f64<E: serde::de::Error>(self, _: f64) -> Result<$out, E> {
            Ok($value)
        }
        fn visit_str<E: serde::de::Error>(self, _: &str) -> Result<$out, E> {
            Ok($value)
        }
        fn visit_unit<E: serde::de::Error>(self) -> Result<$out, E> {
            Ok($value)
        }
    };
}

struct RootSeed<'s, 'k, 'f>(&'s mut StreamState<'k, 'f>);

impl<'de> serde::de::DeserializeSeed<'de> for RootSeed<'_, '_, '_> {
    type Value = ();
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for RootSeed<'_, '_, '_> {
    type Value = ();
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a session file")
    }
    skip_scalars!((), ());
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
        Ok(())
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let state = self.0;
        state.object = true;
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "format" => state.format = Some(map.next_value()?),
                "sessions" => {
                    let first_serial = state.serial;
                    state.list = Some(map.next_value_seed(ListSeed(state, first_serial))?);
                }
                k if state.keep.contains(&k) => {
                    let value: Value = map.next_value()?;
                    state.kept.insert(key, value);
                }
                _ => {
                    map.next_value::<serde::de::IgnoredAny>()?;
                }
            }
        }
        Ok(())
    }
}

struct ListSeed<'s, 'k, 'f>(&'s mut StreamState<'k, 'f>, usize);

impl<'de> serde::de::DeserializeSeed<'de> for ListSeed<'_, '_, '_> {
    type Value = ListState;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<ListState, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for ListSeed<'_, '_, '_> {
    type Value = ListState;
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a list of sessions")
    }
    skip_scalars!(ListState, ListState::NotAList);
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<ListState, A::Error> {
        while map
            .next_entry::<serde::de::IgnoredAny, serde::de::IgnoredAny>()?
            .is_some()
        {}
        Ok(ListState::NotAList)
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<ListState, A::Error> {
        let (state, first_serial) = (self.0, self.1);
        let mut first_error = None;
        let mut seen: HashSet<String> = HashSet::new();
        let mut index = 0;
        loop {
            if first_error.is_some() {
                // Read the rest through for syntax errors, building nothing.
                if seq.next_element::<serde::de::IgnoredAny>()?.is_none() {
                    break;
                }
                continue;
            }
            let Some(value) = seq.next_element::<Value>()? else {
                break;
            };
            match parse_session(index, value) {
                Ok(session) if !seen.insert(session.id.clone()) => {
                    first_error = Some(ParseError::DuplicateSession(session.id));
                }
                Ok(session) => {
                    (state.on_session)(state.serial, session);
                    state.serial += 1;
                }
                Err(e) => first_error = Some(e),
            }
            index += 1;
        }
        Ok(ListState::List {
            first_serial,
            first_error,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn output_hash_is_fnv1a_64_in_hex() {
        assert_eq!(output_hash(""), "cbf29ce484222325");
        assert_eq!(output_hash("a"), "af63dc4c8601ec8c");
        assert_ne!(output_hash("ok\n"), output_hash("ok"));
    }

    #[test]
    fn loop_start_and_output_hash_are_optional_and_round_trip() {
        let file = json!({"format": SESSION_FILE_FORMAT, "sessions": [
            {"id": "a", "loop_start": 1, "calls": [
                {"tool": "bash", "input": {"command": "ls"}, "status": "completed",
                 "output_hash": "00000000000000ff"},
                {"tool": "bash", "input": {"command": "ls"}, "status": "completed"}]},
            {"id": "b", "calls": []}]});
        let parsed = SessionFile::from_value(&file).unwrap();
        assert_eq!(parsed.sessions[0].loop_start, Some(1));
        assert_eq!(
            parsed.sessions[0].calls[0].output_hash.as_deref(),
            Some("00000000000000ff")
        );
        assert_eq!(parsed.sessions[0].calls[1].output_hash, None);
        assert_eq!(parsed.sessions[1].loop_start, None);
        let again = SessionFile::from_json(&parsed.to_json_pretty()).unwrap();
        assert_eq!(again, parsed);
        assert!(!parsed.to_json_pretty().contains("\"loop_start\": null"));
    }

    #[test]
    fn bad_loop_start_or_output_hash_is_named() {
        let bad_start = json!({"format": SESSION_FILE_FORMAT, "sessions": [
            {"id": "a", "loop_start": -1, "calls": []}]});
        let e = SessionFile::from_value(&bad_start).unwrap_err().to_string();
        assert!(e.contains("(a)") && e.contains("loop_start"), "{e}");
        let bad_hash = json!({"format": SESSION_FILE_FORMAT, "sessions": [
            {"id": "a", "calls": [{"tool": "ls", "input": {}, "status": "completed",
                                   "output_hash": 7}]}]});
        let e = SessionFile::from_value(&bad_hash).unwrap_err().to_string();
        assert!(e.contains("call 0") && e.contains("output_hash"), "{e}");
    }

    #[test]
    fn labels_per_profile_replace_the_label_under_their_profile() {
        let file = json!({"format": SESSION_FILE_FORMAT, "sessions": [
            {"id": "a", "label": "must_not_flag", "labels": {"precise": "must_flag"}, "calls": []},
            {"id": "b", "label": "must_flag", "calls": []}]});
        let parsed = SessionFile::from_value(&file).unwrap();
        let (a, b) = (&parsed.sessions[0], &parsed.sessions[1]);
        use crate::Profile::{Design, Precise};
        assert_eq!(a.label_for(Design), Some(Label::MustNotFlag));
        assert_eq!(a.label_for(Precise), Some(Label::MustFlag));
        assert_eq!(b.label_for(Precise), Some(Label::MustFlag));
        let again = SessionFile::from_json(&parsed.to_json_pretty()).unwrap();
        assert_eq!(again, parsed);
        assert!(!parsed.to_json_pretty().contains("\"labels\": {}"));
        for (labels, named) in [
            (json!({"fast": "must_flag"}), "profile names"),
            (json!({"precise": "maybe"}), "labels[\"precise\"]"),
            (json!(["precise"]), "`labels` must be an object"),
        ] {
            let bad = json!({"format": SESSION_FILE_FORMAT, "sessions": [
                {"id": "a", "labels": labels, "calls": []}]});
            let e = SessionFile::from_value(&bad).unwrap_err().to_string();
            assert!(e.contains("(a)") && e.contains(named), "{e}");
        }
    }

    /// The streamed reader says what parsing the whole tree says: the same sessions, or the same
    /// first error, whatever the key order (sessions before format, a repeated key).
    #[test]
    fn streamed_parse_equals_the_whole_tree() {
        let call = r#"{"tool":"bash","input":{"command":"ls"},"status":"completed"}"#;
        let docs = [
            format!(
                r#"{{"format":"{SESSION_FILE_FORMAT}","sessions":[{{"id":"a","calls":[{call}]}}]}}"#
            ),
            format!(
                r#"{{"sessions":[{{"id":"a","calls":[{call}]}}],"format":"{SESSION_FILE_FORMAT}"}}"#
            ),
            r#"{"sessions":[{"id":"a","calls":[7]}],"format":"x/2"}"#.to_owned(),
            format!(
                r#"{{"format":"{SESSION_FILE_FORMAT}","sessions":[{{"id":"a","calls":[]}}],"sessions":[{{"id":"b","calls":[]}},{{"id":"c","calls":[]}}]}}"#
            ),
            format!(
                r#"{{"format":"{SESSION_FILE_FORMAT}","sessions":[{{"id":"a","calls":[]}},{{"id":"a","calls":[]}}]}}"#
            ),
            format!(
                r#"{{"format":"{SESSION_FILE_FORMAT}","sessions":[{{"id":"a"}},{{"id":"a","calls":[]}}]}}"#
            ),
            format!(r#"{{"format":"{SESSION_FILE_FORMAT}","sessions":{{"id":"a"}}}}"#),
            format!(
                r#"{{"format":"{SESSION_FILE_FORMAT}","sessions":null,"other":[1,{{"x":[]}}]}}"#
            ),
            r#"{"format":7,"sessions":[]}"#.to_owned(),
            r#"[{"format":"agentwatch-sessions/1"}]"#.to_owned(),
            r#""text""#.to_owned(),
            r#"{"sessions":[]}"#.to_owned(),
        ];
        for doc in &docs {
            let whole = SessionFile::from_value(&serde_json::from_str(doc).unwrap());
            assert_eq!(SessionFile::from_json(doc), whole, "{doc}");
        }
        // Syntax errors anywhere win, as when the whole tree was parsed first.
        for doc in [
            r#"{"format":"x/2","sessions":[{"id":"a"}] trailing"#,
            r#"{"sessions":[{"id":"a","calls":[7]}],"format":"#,
            r#"{"format":"agentwatch-sessions/1","sessions":[]} x"#,
        ] {
            let e = SessionFile::from_json(doc).unwrap_err();
            assert!(matches!(e, ParseError::Json { .. }), "{doc}: {e}");
        }
    }
}
