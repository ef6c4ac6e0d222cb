//! The session and call model, and the session file (`agentwatch-sessions/1`) that holds it.
//!
//! A session is read typed and borrowed from its text ([`parse_session_text`]); a session that
//! does not read that way is walked by hand as a JSON tree, so that every error names the session
//! and the call index it is about, as the fixture format requires.

use crate::config::DetectConfig;
use crate::detector::SessionDetector;
use crate::matcher::ReadMetadata;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Map, Value};
use std::borrow::Cow;
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
    /// The document is read one session at a time ([`stream_session_texts`]): no JSON tree of the
    /// whole file is built.
    pub fn from_json(text: &str) -> Result<Self, ParseError> {
        let mut de = serde_json::Deserializer::from_str(text);
        let mut parsed = Vec::new();
        let streamed = stream_session_texts(&mut de, &[], &mut |t| {
            parsed.push((t.serial, parse_session_text(t.index, t.text.get())));
        })?;
        Ok(Self::new(counted_sessions(&streamed, parsed, |s| {
            s.id.as_str()
        })?))
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
                    Some(v) => unix_ms(v)
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

/// A number of unix milliseconds: an integer, or a finite number cut to one.
fn unix_ms(value: &Value) -> Option<i64> {
    value
        .as_i64()
        .or_else(|| value.as_f64().filter(|f| f.is_finite()).map(|f| f as i64))
}

/// `T` read only from a JSON object: a derived struct also reads from a list, which the walk of a
/// session file refuses.
pub(crate) struct MapOnly<T>(pub T);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for MapOnly<T> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Object<T>(std::marker::PhantomData<T>);
        impl<'de, T: Deserialize<'de>> serde::de::Visitor<'de> for Object<T> {
            type Value = T;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
                T::deserialize(serde::de::value::MapAccessDeserializer::new(map))
            }
        }
        d.deserialize_map(Object(std::marker::PhantomData))
            .map(MapOnly)
    }
}

/// A session as a session file holds it, borrowed from its text where the JSON allows; `M` is
/// how much of each call's metadata is built.
#[derive(Deserialize)]
#[serde(bound(deserialize = "M: Deserialize<'de> + Default"))]
struct SessionDoc<'a, M> {
    id: String,
    parent_id: Option<String>,
    title: Option<String>,
    agent: Option<String>,
    directory: Option<String>,
    label: Option<Label>,
    labels: Option<BTreeMap<String, Label>>,
    note: Option<String>,
    line_counts: Option<BTreeMap<String, u64>>,
    loop_start: Option<usize>,
    #[serde(borrow)]
    calls: Vec<MapOnly<CallDoc<'a, M>>>,
}

#[derive(Deserialize)]
#[serde(bound(deserialize = "M: Deserialize<'de> + Default"))]
struct CallDoc<'a, M> {
    #[serde(borrow)]
    tool: Cow<'a, str>,
    input: Value,
    #[serde(borrow)]
    status: Cow<'a, str>,
    #[serde(default)]
    metadata: M,
    time: Option<MapOnly<TimeDoc>>,
    output_hash: Option<String>,
}

#[derive(Deserialize)]
struct TimeDoc {
    start: Option<Value>,
    end: Option<Value>,
}

/// A call's metadata as it is built: whole ([`Value`]), or only what the matcher reads.
trait Metadata {
    fn into_value(self) -> Value;
}

impl Metadata for Value {
    fn into_value(self) -> Value {
        self
    }
}

impl Metadata for Option<ReadMetadata> {
    fn into_value(self) -> Value {
        self.map_or(Value::Null, ReadMetadata::into_value)
    }
}

impl<M: Metadata> CallDoc<'_, M> {
    /// The call, if it is one [`parse_call`] accepts (else `None`: that walk names the error).
    fn into_call(self) -> Option<Call> {
        if self.tool.is_empty() || !self.input.is_object() {
            return None;
        }
        if self.tool == "bash" && self.input.get("command").is_some_and(|c| !c.is_string()) {
            return None;
        }
        let ms = |v: Option<Value>| match v {
            None => Some(None),
            Some(v) => unix_ms(&v).map(Some),
        };
        let time = match self.time {
            None => None,
            Some(MapOnly(t)) => Some(CallTime {
                start: ms(t.start)?,
                end: ms(t.end)?,
            }),
        };
        Some(Call {
            tool: self.tool.into_owned(),
            input: self.input,
            status: CallStatus::from_text(&self.status),
            metadata: self.metadata.into_value(),
            time,
            output_hash: self.output_hash,
        })
    }
}

impl<M> SessionDoc<'_, M> {
    /// The session without its calls, if its keys are ones [`parse_session`] accepts.
    fn stub(&mut self) -> Option<Session> {
        let labels = self.labels.take().unwrap_or_default();
        if self.id.is_empty() || labels.keys().any(|k| k.parse::<crate::Profile>().is_err()) {
            return None;
        }
        Some(Session {
            id: std::mem::take(&mut self.id),
            parent_id: self.parent_id.take(),
            title: self.title.take(),
            agent: self.agent.take(),
            directory: self.directory.take(),
            label: self.label,
            labels,
            note: self.note.take(),
            line_counts: self.line_counts.take().unwrap_or_default(),
            loop_start: self.loop_start,
            calls: Vec::new(),
        })
    }
}

/// The typed read of a session's text: its stub and its calls, or `None` when the text is not
/// a session [`parse_session`] accepts (or is one the typed read refuses, a repeated key).
fn read_typed<'a, M: Deserialize<'a> + Default + Metadata + 'a>(
    text: &'a str,
) -> Option<(Session, impl Iterator<Item = Option<Call>> + 'a)> {
    let MapOnly(mut doc): MapOnly<SessionDoc<'a, M>> = serde_json::from_str(text).ok()?;
    let stub = doc.stub()?;
    Some((stub, doc.calls.into_iter().map(|call| call.0.into_call())))
}

/// The session walked as a JSON tree: the exact error for a text the typed read refuses.
fn parse_session_tree(index: usize, text: &str) -> Result<Session, ParseError> {
    let value = serde_json::from_str(text).map_err(|e| ParseError::Json {
        line: e.line(),
        column: e.column(),
        message: e.to_string(),
    })?;
    parse_session(index, value)
}

/// Parse one session of a session file from its JSON text; `index` is its place in the list,
/// which names it in errors. The same session, or the same error, as [`SessionFile::from_value`].
pub fn parse_session_text(index: usize, text: &str) -> Result<Session, ParseError> {
    parse_session_as::<Value>(index, text)
}

/// [`parse_session_text`] keeping of each call's metadata only what the matcher reads (as
/// [`detect_session_text`] does): a session the detector judges as the whole one, in less
/// memory, for a caller that replays its calls (the backtest).
pub fn parse_judged_session_text(index: usize, text: &str) -> Result<Session, ParseError> {
    parse_session_as::<Option<ReadMetadata>>(index, text)
}

fn parse_session_as<'a, M: Deserialize<'a> + Default + Metadata + 'a>(
    index: usize,
    text: &'a str,
) -> Result<Session, ParseError> {
    if let Some((mut session, calls)) = read_typed::<M>(text)
        && let Some(calls) = calls.collect::<Option<Vec<Call>>>()
    {
        session.calls = calls;
        return Ok(session);
    }
    parse_session_tree(index, text)
}

/// Parse one session of a session file from its JSON text and push its calls into a new
/// detector as they are read, dropping them: the session comes back without calls. Of each
/// call's metadata only what the matcher reads is built. The same errors as
/// [`parse_session_text`]; the detector is the one that would have been fed its calls.
pub fn detect_session_text(
    index: usize,
    text: &str,
    config: &DetectConfig,
) -> Result<(Session, SessionDetector), ParseError> {
    if let Some((session, calls)) = read_typed::<Option<ReadMetadata>>(text) {
        let mut detector = SessionDetector::new(&session, config);
        if calls
            .map(|call| call.map(|call| detector.push(&call)))
            .all(|pushed| pushed.is_some())
        {
            return Ok((session, detector));
        }
    }
    let mut session = parse_session_tree(index, text)?;
    let mut detector = SessionDetector::new(&session, config);
    for call in &session.calls {
        detector.push(call);
    }
    session.calls = Vec::new();
    Ok((session, detector))
}

/// One element of a session file's `sessions` list, as it was read.
#[derive(Debug)]
pub struct SessionText {
    /// Its place among every element read from the document (a repeated `sessions` key goes on).
    pub serial: usize,
    /// Its place in its list, which names it in errors.
    pub index: usize,
    /// Its JSON text (syntax checked, nothing built).
    pub text: Box<RawValue>,
}

/// What [`stream_session_texts`] found besides the sessions it handed over.
#[derive(Debug, Clone, PartialEq)]
pub struct Streamed {
    /// The top-level keys asked for in `keep`, when present (the last of a repeated key).
    pub kept: Map<String, Value>,
    /// The sessions that count are those whose serial is at least this: a repeated `sessions`
    /// key replaces the earlier list, as in any JSON object.
    pub first_serial: usize,
    /// Whether the document has the shape of a session file (an object, the format, a list of
    /// sessions), with the first error in the order [`SessionFile::from_value`] reports it. The
    /// sessions themselves are checked by [`counted_sessions`].
    pub outcome: Result<(), ParseError>,
}

/// Read a session file from `de` one session at a time, handing each element of the `sessions`
/// list to `on_text` as JSON text as soon as it is read, so that a caller may parse it anywhere
/// ([`parse_session_text`], [`detect_session_text`]); only one session's text is held at a time.
/// The whole document is read (a syntax error anywhere is [`ParseError::Json`], as with
/// [`SessionFile::from_json`]); the document's shape is reported in [`Streamed::outcome`]. Top-level
/// keys named in `keep` are kept as JSON (e.g. to recognise another format); other keys are
/// skipped without being built.
pub fn stream_session_texts<'de, R: serde_json::de::Read<'de>>(
    de: &mut serde_json::Deserializer<R>,
    keep: &[&str],
    on_text: &mut dyn FnMut(SessionText),
) -> Result<Streamed, ParseError> {
    let json = |e: serde_json::Error| ParseError::Json {
        line: e.line(),
        column: e.column(),
        message: e.to_string(),
    };
    let mut state = StreamState {
        keep,
        on_text,
        serial: 0,
        kept: Map::new(),
        format: None,
        list: None,
        object: false,
    };
    serde::de::DeserializeSeed::deserialize(RootSeed(&mut state), &mut *de).map_err(json)?;
    de.end().map_err(json)?;
    let first_serial = match &state.list {
        Some(ListState::List { first_serial }) => *first_serial,
        _ => state.serial,
    };
    let outcome = if !state.object {
        Err(ParseError::NotAnObject)
    } else {
        check_format(state.format.as_ref()).and_then(|()| match state.list.take() {
            Some(ListState::List { .. }) => Ok(()),
            Some(ListState::NotAList) | None => Err(ParseError::NoSessions),
        })
    };
    Ok(Streamed {
        kept: state.kept,
        first_serial,
        outcome,
    })
}

/// The sessions that count, in order, from what was parsed of each element of a streamed
/// document (`(serial, result)`, in any order): the first error as [`SessionFile::from_value`]
/// reports it (the document's shape, then a session that does not parse or an id seen twice,
/// in list order), or every session of the last `sessions` list.
pub fn counted_sessions<T>(
    streamed: &Streamed,
    mut parsed: Vec<(usize, Result<T, ParseError>)>,
    id: impl Fn(&T) -> &str,
) -> Result<Vec<T>, ParseError> {
    streamed.outcome.clone()?;
    parsed.retain(|(serial, _)| *serial >= streamed.first_serial);
    parsed.sort_unstable_by_key(|(serial, _)| *serial);
    let mut seen = HashSet::new();
    let mut sessions = Vec::with_capacity(parsed.len());
    for (_, result) in parsed {
        let session = result?;
        if !seen.insert(id(&session).to_owned()) {
            return Err(ParseError::DuplicateSession(id(&session).to_owned()));
        }
        sessions.push(session);
    }
    Ok(sessions)
}

struct StreamState<'k, 'f> {
    keep: &'k [&'k str],
    on_text: &'f mut dyn FnMut(SessionText),
    serial: usize,
    kept: Map<String, Value>,
    format: Option<Value>,
    list: Option<ListState>,
    object: bool,
}

enum ListState {
    List { first_serial: usize },
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
        let mut index = 0;
        while let Some(text) = seq.next_element::<Box<RawValue>>()? {
            (state.on_text)(SessionText {
                serial: state.serial,
                index,
                text,
            });
            state.serial += 1;
            index += 1;
        }
        Ok(ListState::List { first_serial })
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

    /// The typed read gives what the walk of the JSON tree gives, session and error alike, on
    /// the shapes where they could part: lists where objects belong, `null`s, repeated keys,
    /// escaped keys, numbers of every kind, and metadata in every form the matcher reads. And
    /// `detect`'s read (only the metadata the matcher reads) feeds the detector the same.
    #[test]
    fn typed_read_equals_the_tree_walk() {
        let call = |body: &str| format!(r#"{{"id":"s","directory":"/p","calls":[{body}]}}"#);
        let bash = |meta: &str| {
            call(&format!(
                r#"{{"tool":"bash","input":{{"command":"git commit -m x"}},"status":"completed","metadata":{meta}}}"#
            ))
        };
        let edit = |meta: &str| {
            call(&format!(
                r#"{{"tool":"edit","input":{{"filePath":"a.rs"}},"status":"completed","metadata":{meta}}}"#
            ))
        };
        let mut texts = vec![
            r#"{"id":"s","calls":[]}"#.to_owned(),
            r#"["s",null,null,null,null,null,null,null,null,[]]"#.to_owned(),
            r#"{"id":"","calls":[]}"#.to_owned(),
            r#"{"id":7,"calls":[]}"#.to_owned(),
            r#"{"id":"s","id":"t","calls":[]}"#.to_owned(),
            r#"{"id":"s","calls":[],"label":"must_flag","loop_start":0,"line_counts":{"/p/a.rs":9}}"#.to_owned(),
            r#"{"id":"s","calls":[],"label":"maybe"}"#.to_owned(),
            r#"{"id":"s","calls":[],"labels":{"precise":"must_flag","design":"must_not_flag"}}"#.to_owned(),
            r#"{"id":"s","calls":[],"labels":{"fast":"must_flag"}}"#.to_owned(),
            r#"{"id":"s","calls":[],"labels":{"precise":null}}"#.to_owned(),
            r#"{"id":"s","calls":[],"labels":["precise"]}"#.to_owned(),
            r#"{"id":"s","calls":[],"labels":null}"#.to_owned(),
            r#"{"id":"s","calls":[],"label":null,"line_counts":null,"loop_start":null,"title":null}"#.to_owned(),
            r#"{"id":"s","calls":[],"line_counts":{"a":1.5}}"#.to_owned(),
            r#"{"id":"s","calls":[],"line_counts":{"a":1,"a":2}}"#.to_owned(),
            r#"{"id":"s","calls":[],"loop_start":-1}"#.to_owned(),
            r#"{"id":"s","calls":null}"#.to_owned(),
            r#"{"id":"s"}"#.to_owned(),
            call(r#"["bash",{"command":"ls"},"completed"]"#),
            call(r#"{"tool":"","input":{},"status":"completed"}"#),
            call(r#"{"tool":"bash","input":null,"status":"completed"}"#),
            call(r#"{"tool":"bash","input":{"command":7},"status":"completed"}"#),
            call(r#"{"tool":"bash","input":{"command":"ls"},"status":3}"#),
            call(r#"{"tool":"bash","input":{"command":"ls"},"status":"odd"}"#),
            call(r#"{"tool":"bash","tool":"read","input":{"command":"ls"},"status":"completed"}"#),
            call(r#"{"tool":"bash","input":{"command":"ls"},"status":"completed"}"#),
            call(r#"{"tool":"bash","input":{"command":"ls"},"status":"completed","output_hash":7}"#),
            call(r#"{"tool":"bash","input":{"command":"ls"},"status":"error","output_hash":null}"#),
            call(r#"{"tool":"bash","input":{"command":"ls"},"status":"completed","time":[1,2]}"#),
            call(r#"{"tool":"bash","input":{"command":"ls"},"status":"completed","time":{"start":1.5,"end":1e3}}"#),
            call(r#"{"tool":"bash","input":{"command":"ls"},"status":"completed","time":{"start":"1"}}"#),
            call(r#"{"tool":"bash","input":{"command":"ls"},"status":"completed","time":null}"#),
            call(r#"{"tool":"read","input":{"filePath":"a.rs","offset":2.0,"limit":10},"status":"completed","metadata":{"total_lines":null,"lines_read":5}}"#),
            call(r#"{"tool":"read","input":{"filePath":"a.rs","offset":40},"status":"completed","metadata":{"total_lines":50,"preview":"x"}}"#),
            call(r#"{"tool":"write","input":{"filePath":"a.rs"},"status":"completed","metadata":[1]}"#),
        ];
        for meta in [
            "null",
            r#""x""#,
            "[0]",
            "{}",
            r#"{"exit":0}"#,
            r#"{"exit":null}"#,
            r#"{"exit":{"code":0}}"#,
            r#"{"exit":1,"exit":0}"#,
            r#"{"exit":0,"output":"long"}"#,
        ] {
            texts.push(bash(meta));
        }
        for meta in [
            r#"{"diff":"  
"}"#,
            r#"{"diff":"-a
+b"}"#,
            r#"{"diff":5}"#,
            r#"{"filediff":[1,2]}"#,
            r#"{"filediff":null}"#,
            r#"{"filediff":{"additions":0,"deletions":0,"before":"x","after":"y"}}"#,
            r#"{"filediff":{"additions":3}}"#,
            r#"{"filediff":{"additions":-3,"deletions":null}}"#,
            r#"{"files":[{"additions":0},7,null,{"deletions":2}]}"#,
            r#"{"files":[{"additions":0}]}"#,
            r#"{"files":"x"}"#,
            r#"{"files":null,"diff":null}"#,
        ] {
            texts.push(edit(meta));
        }
        for text in &texts {
            let tree = parse_session_tree(3, text);
            assert_eq!(parse_session_text(3, text), tree, "{text}");
            for profile in [crate::Profile::Design, crate::Profile::Precise] {
                let config = DetectConfig::with_profile(profile);
                let detected = detect_session_text(3, text, &config);
                match tree.clone() {
                    Ok(mut session) => {
                        let mut fed = SessionDetector::new(&session, &config);
                        session.calls.iter().for_each(|c| fed.push(c));
                        session.calls.clear();
                        let judged = parse_judged_session_text(3, text).unwrap();
                        let mut replayed = SessionDetector::new(&judged, &config);
                        judged.calls.iter().for_each(|c| replayed.push(c));
                        assert_eq!(replayed.snapshot(), fed.snapshot(), "{text}");
                        let (stub, detector) = detected.unwrap();
                        assert_eq!(stub, session, "{text}");
                        assert_eq!(detector.snapshot(), fed.snapshot(), "{text}");
                        assert_eq!(detector.verdict(), fed.verdict(), "{text}");
                        assert_eq!(
                            detector.latest_own_landing(),
                            fed.latest_own_landing(),
                            "{text}"
                        );
                    }
                    Err(e) => assert_eq!(detected.unwrap_err(), e, "{text}"),
                }
            }
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
