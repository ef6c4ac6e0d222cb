//! The session and call model, and the session file (`agentwatch-sessions/1`) that holds it.
//!
//! A session is read typed and borrowed from its text ([`parse_session_text`]), through one set of
//! derived types; a session that does not read is read again through `serde_path_to_error`, so
//! that every error names the session and the place in it (`calls[3].input`).

use crate::config::DetectConfig;
use crate::detector::SessionDetector;
use crate::json::{Json, MapOnly};
use crate::matcher::{CallRef, LineCountsText};
use crate::meta::{MetaFacts, ReadMetadata};
use crate::output::{COMMITTED_KEY, output_hash, output_shows_commit};
use crate::scan::scan_session_texts;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Map, Value};
use std::borrow::Cow;
use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

/// The `format` tag of a session file.
pub const SESSION_FILE_FORMAT: &str = "agentwatch-sessions/1";

/// One agent session: its calls in message order, then part order.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
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

impl<'de> Deserialize<'de> for Label {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Text;
        impl serde::de::Visitor<'_> for Text {
            type Value = Label;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("must_flag or must_not_flag")
            }
            fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<Label, E> {
                Label::parse(text)
                    .ok_or_else(|| E::invalid_value(serde::de::Unexpected::Str(text), &self))
            }
        }
        d.deserialize_str(Text)
    }
}

impl Session {
    /// The session's label under `profile`: its `labels` entry for the profile, else `label`.
    pub fn label_for(&self, profile: crate::Profile) -> Option<Label> {
        self.labels.get(profile.as_str()).copied().or(self.label)
    }
}

/// One tool call.
#[derive(Debug, Clone, PartialEq, Serialize)]
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

/// Start and end of a call, unix milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct CallTime {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end: Option<i64>,
}

impl CallTime {
    /// When the call's effect happened: its end, else its start.
    pub fn effect_ms(self) -> Option<i64> {
        self.end.or(self.start)
    }
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

    /// The call with what the detector keeps of `output`: its hash without noise
    /// ([`output_hash`]), and for a bash call whose output shows a commit it made
    /// ([`output_shows_commit`]), `metadata.committed`. Adapters build calls through this (or
    /// the two functions) so that every source reads outputs alike.
    pub fn with_output(mut self, output: &str) -> Self {
        self.output_hash = Some(output_hash(output));
        if self.tool == "bash" && output_shows_commit(output) {
            if !self.metadata.is_object() {
                self.metadata = Value::Object(Map::new());
            }
            if let Value::Object(map) = &mut self.metadata {
                map.insert(COMMITTED_KEY.to_owned(), Value::Bool(true));
            }
        }
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
        self.time.and_then(CallTime::effect_ms)
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
#[derive(Debug, Clone, PartialEq, Serialize)]
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

    /// Parse a session file. Unknown keys are ignored; a missing or mistyped key is an error
    /// naming the session and the place in it (`calls[3].input`).
    ///
    /// The document is read one session at a time ([`scan_session_texts`], else
    /// [`stream_session_texts`]): no JSON tree of the whole file is built.
    pub fn from_json(text: &str) -> Result<Self, ParseError> {
        let mut parsed = Vec::new();
        let scanned = scan_session_texts(text.as_bytes(), &[], &mut |t| {
            parsed.push((t.serial, parse_session_text(t.index, &t.text)));
        });
        let streamed = match scanned {
            Ok(crate::scan::Scanned::Read(streamed)) if scanned_cleanly(&parsed) => streamed,
            // Reading a slice cannot fail; the unusual document is read again by serde.
            _ => {
                parsed.clear();
                let mut de = serde_json::Deserializer::from_str(text);
                stream_session_texts(&mut de, &[], &mut |t| {
                    parsed.push((t.serial, parse_session_text(t.index, &t.text)));
                })?
            }
        };
        Ok(Self::new(counted_sessions(&streamed, parsed, |s| {
            s.id.as_str()
        })?))
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
    /// A session that does not read: `index` is its place in the list, `id` its id when it
    /// has a readable one, `at` the place in it (`calls[3].input`, empty for the session itself).
    #[error("session #{index}{}: {message}", session_place(id.as_deref(), at))]
    Session {
        index: usize,
        id: Option<String>,
        at: String,
        message: String,
    },
    #[error("session id {0} appears twice")]
    DuplicateSession(String),
}

/// ` (ID) at PLACE`, for what is known of either.
fn session_place(id: Option<&str>, at: &str) -> String {
    let mut place = String::new();
    if let Some(id) = id {
        place.push_str(&format!(" ({id})"));
    }
    if !at.is_empty() {
        place.push_str(&format!(" at {at}"));
    }
    place
}

pub(crate) fn check_format(format: Option<&Value>) -> Result<(), ParseError> {
    match format {
        Some(Value::String(f)) if f == SESSION_FILE_FORMAT => Ok(()),
        Some(Value::String(f)) => Err(ParseError::Format(f.clone())),
        Some(other) => Err(ParseError::Format(other.to_string())),
        None => Err(ParseError::Format("(missing)".to_owned())),
    }
}

/// A session as a session file holds it, borrowed from its text where the JSON allows; `C` is
/// how each call is read ([`CallDoc`], or `detect`'s [`CallText`]). The one reader of the
/// format: what its types cannot say (an empty id, a profile name, a bash command that is not
/// text) is checked by [`SessionDoc::stub`] and [`check_call`], which name the place.
#[derive(Deserialize)]
pub(crate) struct SessionDoc<C> {
    pub(crate) id: String,
    pub(crate) parent_id: Option<String>,
    pub(crate) title: Option<String>,
    pub(crate) agent: Option<String>,
    pub(crate) directory: Option<String>,
    pub(crate) label: Option<Label>,
    pub(crate) labels: Option<BTreeMap<String, Label>>,
    pub(crate) note: Option<String>,
    pub(crate) line_counts: Option<BTreeMap<String, u64>>,
    pub(crate) loop_start: Option<usize>,
    pub(crate) calls: Vec<MapOnly<C>>,
}

#[derive(Deserialize)]
#[serde(bound(deserialize = "M: Deserialize<'de> + Default"))]
struct CallDoc<'a, M> {
    #[serde(borrow)]
    tool: Cow<'a, str>,
    input: Map<String, Value>,
    #[serde(borrow)]
    status: Cow<'a, str>,
    #[serde(default)]
    metadata: M,
    time: Option<MapOnly<TimeDoc>>,
    output_hash: Option<String>,
}

/// A call as `detect` reads it (issue 19): borrowed from the text, its input as [`Json`] (no
/// map, no owned string but where escapes force one), its metadata as the facts the matcher
/// reads ([`MetaFacts`]: outputs and file contents skipped). It reads only what [`CallDoc`]
/// reads (an output hash with escapes it does not read at all), and the same way.
#[derive(Deserialize)]
pub(crate) struct CallText<'a> {
    #[serde(borrow)]
    pub(crate) tool: Cow<'a, str>,
    #[serde(borrow)]
    pub(crate) input: Json<'a>,
    #[serde(borrow)]
    pub(crate) status: Cow<'a, str>,
    #[serde(default)]
    pub(crate) metadata: MetaFacts<'a>,
    pub(crate) time: Option<MapOnly<TimeDoc>>,
    pub(crate) output_hash: Option<&'a str>,
}

#[derive(Deserialize)]
pub(crate) struct TimeDoc {
    pub(crate) start: Option<UnixMs>,
    pub(crate) end: Option<UnixMs>,
}

impl TimeDoc {
    fn time(self) -> CallTime {
        CallTime {
            start: self.start.map(|ms| ms.0),
            end: self.end.map(|ms| ms.0),
        }
    }
}

/// A number of unix milliseconds: an integer, or a finite number cut to one.
pub(crate) struct UnixMs(pub(crate) i64);

impl<'de> Deserialize<'de> for UnixMs {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Ms;
        impl serde::de::Visitor<'_> for Ms {
            type Value = UnixMs;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a number (unix ms)")
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<UnixMs, E> {
                Ok(UnixMs(v))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<UnixMs, E> {
                i64::try_from(v)
                    .map(UnixMs)
                    .map_err(|_| E::invalid_value(serde::de::Unexpected::Unsigned(v), &self))
            }
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<UnixMs, E> {
                if v.is_finite() {
                    // Saturating: a float beyond i64 is cut to its bound.
                    Ok(UnixMs(v as i64))
                } else {
                    Err(E::invalid_value(serde::de::Unexpected::Float(v), &self))
                }
            }
        }
        d.deserialize_any(Ms)
    }
}

/// A call's metadata as it is built: whole ([`Value`]), or only what the matcher reads.
trait Metadata {
    /// Whether this is only part of the metadata, read in a shape the whole may not have.
    const PARTIAL: bool;
    fn into_value(self) -> Value;
}

impl Metadata for Value {
    const PARTIAL: bool = false;
    fn into_value(self) -> Value {
        self
    }
}

impl Metadata for Option<ReadMetadata> {
    const PARTIAL: bool = true;
    fn into_value(self) -> Value {
        self.map_or(Value::Null, ReadMetadata::into_value)
    }
}

/// What the types of [`SessionDoc`] let through but the format refuses: the place in the
/// session and why.
#[derive(Debug)]
pub(crate) struct Refused {
    at: String,
    message: String,
}

/// What the format refuses of a call its types let through, or nothing; `index` is its place in
/// `calls`, `command` its input's `command`.
fn check_call(index: usize, tool: &str, command: Option<&Json<'_>>) -> Result<(), Refused> {
    let refused = |field: &str, message: String| Refused {
        at: format!("calls[{index}].{field}"),
        message,
    };
    if tool.is_empty() {
        return Err(refused("tool", "must not be empty".to_owned()));
    }
    if tool == "bash"
        && let Some(command) = command
        && command.as_str().is_none()
    {
        return Err(refused(
            "input.command",
            format!("a bash command must be a string, found {}", command.kind()),
        ));
    }
    Ok(())
}

impl<M: Metadata> CallDoc<'_, M> {
    /// The call, or why the format refuses it; `index` is its place in `calls`.
    fn into_call(self, index: usize) -> Result<Call, Refused> {
        let command = self.input.get("command").map(Json::of);
        check_call(index, &self.tool, command.as_ref())?;
        let time = self.time.map(|MapOnly(t)| t.time());
        Ok(Call {
            tool: self.tool.into_owned(),
            input: Value::Object(self.input),
            status: CallStatus::from_text(&self.status),
            metadata: self.metadata.into_value(),
            time,
            output_hash: self.output_hash,
        })
    }
}

impl<M: Metadata> SessionDoc<CallDoc<'_, M>> {
    /// The session without its calls, each call handed to `on_call` as it is built; or why the
    /// format refuses it, with the session's id when it has one.
    fn read(
        mut self,
        mut on_call: impl FnMut(&Session, Call),
    ) -> Result<Session, (Option<String>, Refused)> {
        let session = self
            .stub()
            .map_err(|r| (Some(self.id.clone()).filter(|id| !id.is_empty()), r))?;
        for (index, call) in self.calls.into_iter().enumerate() {
            let call = call
                .0
                .into_call(index)
                .map_err(|r| (Some(session.id.clone()), r))?;
            on_call(&session, call);
        }
        Ok(session)
    }
}

/// A session read from any serde format (the store keeps them as JSON) through the one reader,
/// [`SessionDoc`].
impl<'de> Deserialize<'de> for Session {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let MapOnly(doc) = MapOnly::<SessionDoc<CallDoc<'de, Value>>>::deserialize(d)?;
        let mut calls = Vec::new();
        let mut session = doc
            .read(|_, call| calls.push(call))
            .map_err(|(_, r)| serde::de::Error::custom(format!("at {}: {}", r.at, r.message)))?;
        session.calls = calls;
        Ok(session)
    }
}

impl<C> SessionDoc<C> {
    /// A session of no keys, filled by a reader that reads them one by one.
    pub(crate) fn empty() -> Self {
        Self {
            id: String::new(),
            parent_id: None,
            title: None,
            agent: None,
            directory: None,
            label: None,
            labels: None,
            note: None,
            line_counts: None,
            loop_start: None,
            calls: Vec::new(),
        }
    }

    /// The session without its calls, or why the format refuses it.
    pub(crate) fn stub(&mut self) -> Result<Session, Refused> {
        if self.id.is_empty() {
            return Err(Refused {
                at: "id".to_owned(),
                message: "must not be empty".to_owned(),
            });
        }
        let labels = self.labels.take().unwrap_or_default();
        if let Some(name) = labels.keys().find(|k| k.parse::<crate::Profile>().is_err()) {
            return Err(Refused {
                at: "labels".to_owned(),
                message: format!("{name:?} is not a profile name (design, precise)"),
            });
        }
        Ok(Session {
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

/// Read one session's text through [`SessionDoc`], handing each call to `on_call` as it is
/// built; the stub comes back. Every error names the session and the place in it.
fn read_session<'a, M: Deserialize<'a> + Default + Metadata + 'a>(
    index: usize,
    text: &'a str,
    on_call: impl FnMut(&Session, Call),
) -> Result<Session, ParseError> {
    let doc = match serde_json::from_str::<MapOnly<SessionDoc<CallDoc<'a, M>>>>(text) {
        Ok(MapOnly(doc)) => doc,
        // Building only what the matcher reads is a shortcut: metadata of a shape it does not
        // know is read whole, as any reader of the format would.
        Err(_) if M::PARTIAL => return read_session::<Value>(index, text, on_call),
        Err(_) => return Err(placed_error(index, text)),
    };
    doc.read(on_call).map_err(|(id, r)| ParseError::Session {
        index,
        id,
        at: r.at,
        message: r.message,
    })
}

/// Why `text` does not read as a [`SessionDoc`]: read again, rarely, through
/// `serde_path_to_error` to learn the place, so that the common path pays nothing for it.
fn placed_error(index: usize, text: &str) -> ParseError {
    if let Err(e) = serde_json::from_str::<serde::de::IgnoredAny>(text) {
        return ParseError::Json {
            line: e.line(),
            column: e.column(),
            message: e.to_string(),
        };
    }
    let mut de = serde_json::Deserializer::from_str(text);
    let Err(error) =
        serde_path_to_error::deserialize::<_, MapOnly<SessionDoc<CallDoc<'_, Value>>>>(&mut de)
    else {
        // The two reads cannot disagree; say so rather than panic if they ever do.
        return ParseError::Session {
            index,
            id: session_id(text),
            at: String::new(),
            message: "does not read as a session".to_owned(),
        };
    };
    let inner = error.inner();
    // serde_json's message ends with the position in this session's text, which means nothing
    // to a reader of the whole file: the place says where.
    let mut message = inner.to_string();
    let position = format!(" at line {} column {}", inner.line(), inner.column());
    if let Some(stripped) = message.strip_suffix(&position) {
        message.truncate(stripped.len());
    }
    let at = error.path().to_string();
    ParseError::Session {
        index,
        id: session_id(text),
        at: if at == "." { String::new() } else { at },
        message: message
            .replace("invalid type: map,", "invalid type: an object,")
            .replace("invalid type: sequence,", "invalid type: a list,")
            .replace("expected a map", "expected an object")
            .replace("expected a sequence", "expected a list"),
    }
}

/// The session's id when it has a readable one (for an error message).
fn session_id(text: &str) -> Option<String> {
    #[derive(Deserialize)]
    struct IdOnly {
        id: String,
    }
    serde_json::from_str::<MapOnly<IdOnly>>(text)
        .ok()
        .map(|MapOnly(doc)| doc.id)
        .filter(|id| !id.is_empty())
}

/// Parse one session of a session file from its JSON text; `index` is its place in the list,
/// which names it in errors.
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
    let mut calls = Vec::new();
    let mut session = read_session::<M>(index, text, |_, call| calls.push(call))?;
    session.calls = calls;
    Ok(session)
}

/// A session's calls read typed and borrowed from its text in the matcher's form ([`CallText`]:
/// no [`Call`], no [`Value`]), kept for a caller that pushes them into detectors itself, some
/// more than once: the backtest walks every prefix and may start a detector over (issue 19).
#[derive(Debug)]
pub struct SessionCalls<'a> {
    calls: Vec<ReadCall<'a>>,
}

/// One call of [`SessionCalls`], checked as the format wants it.
#[derive(Debug)]
struct ReadCall<'a> {
    tool: Cow<'a, str>,
    input: Json<'a>,
    status: CallStatus,
    meta: MetaFacts<'a>,
    output_hash: Option<&'a str>,
    time: Option<CallTime>,
}

impl<'a> SessionCalls<'a> {
    /// The session of `text` without its calls, and its calls; `None` for a session this read does
    /// not take (any error, an input that is not an object, an output hash with escapes): read it
    /// the usual way ([`parse_judged_session_text`]) for its answer or its exact error.
    pub fn read(text: &'a str) -> Option<(Session, Self)> {
        let MapOnly(mut doc) =
            serde_json::from_str::<MapOnly<SessionDoc<CallText<'a>>>>(text).ok()?;
        let session = doc.stub().ok()?;
        let calls = doc
            .calls
            .into_iter()
            .enumerate()
            .map(|(i, MapOnly(call))| {
                if !matches!(call.input, Json::Object(_)) {
                    return None;
                }
                check_call(i, &call.tool, call.input.get("command")).ok()?;
                Some(ReadCall {
                    status: CallStatus::from_text(&call.status),
                    time: call.time.map(|MapOnly(t)| t.time()),
                    tool: call.tool,
                    input: call.input,
                    meta: call.metadata,
                    output_hash: call.output_hash,
                })
            })
            .collect::<Option<Vec<_>>>()?;
        Some((session, Self { calls }))
    }

    /// How many calls (counted or not) the session has.
    pub fn len(&self) -> usize {
        self.calls.len()
    }

    /// Whether the session has no calls.
    pub fn is_empty(&self) -> bool {
        self.calls.is_empty()
    }

    /// When call `i`'s effect happened (its end, else its start), as [`Call::end_ms`].
    pub fn end_ms(&self, i: usize) -> Option<i64> {
        self.calls[i].time.and_then(CallTime::effect_ms)
    }

    /// Push the calls of `range` into `detector`, in order, as [`SessionDetector::push`] would
    /// push them as [`Call`]s (calls that do not count are skipped).
    pub fn push(&self, range: std::ops::Range<usize>, detector: &mut SessionDetector) {
        for call in &self.calls[range] {
            let counted = CallRef::new(
                &call.tool,
                &call.input,
                &call.status,
                || call.meta.clone(),
                call.output_hash,
                call.time,
            );
            if let Some(call) = counted {
                detector.push_ref(&call);
            }
        }
    }
}

/// Parse one session of a session file from its JSON text and push its calls into a new
/// detector as they are read, dropping them: the session comes back without calls and without
/// line counts, and the detector with its calls done ([`SessionDetector::calls_done`]: the line
/// counts are read borrowed for the calls' sake and not kept). Of each
/// call only what the matcher reads is built, borrowed from the text ([`CallText`]); a session
/// that does not read so is read again through [`parse_session_text`]'s reader. The same errors
/// as [`parse_session_text`]; the detector is the one that would have been fed its calls.
pub fn detect_session_text(
    index: usize,
    text: &str,
    config: &DetectConfig,
) -> Result<(Session, SessionDetector), ParseError> {
    let (session, mut detector) = match detect_borrowed(text, config) {
        Some(detected) => detected,
        None => detect_calls(index, text, config)?,
    };
    detector.calls_done();
    Ok((session, detector))
}

/// [`detect_session_text`] through [`parse_session_text`]'s reader: each call built as a
/// [`Call`] (with only the metadata the matcher reads) and pushed.
fn detect_calls(
    index: usize,
    text: &str,
    config: &DetectConfig,
) -> Result<(Session, SessionDetector), ParseError> {
    let mut detector = None;
    let mut session = read_session::<Option<ReadMetadata>>(index, text, |stub, call| {
        detector
            .get_or_insert_with(|| SessionDetector::new(stub, config))
            .push(&call);
    })?;
    let detector = detector.unwrap_or_else(|| SessionDetector::new(&session, config));
    session.line_counts = BTreeMap::new();
    Ok((session, detector))
}

/// `detect`'s read of a session (issue 19): each call typed and borrowed straight into the
/// matcher's form ([`CallText`] to [`CallRef`]), no [`Call`] and no [`Value`], and pushed into
/// the detector as it is read (no list of calls) when `calls` comes after the keys the session
/// is made of, as this tool writes it. `None` for a session it does not read (whatever the
/// reason): [`detect_session_text`] then reads it the usual way, for its answer or its exact
/// error.
fn detect_borrowed(text: &str, config: &DetectConfig) -> Option<(Session, SessionDetector)> {
    watch_session_text(
        text,
        &|session| SessionDetector::taking_line_counts(session, config),
        &mut |_, _, _, _| true,
    )
}

/// How [`watch_session_text`] makes a session's detector, from the session read up to its
/// calls (its line counts may be taken: they are read borrowed for the calls' sake).
pub type NewDetector<'n> = dyn Fn(&mut Session) -> SessionDetector + 'n;

/// What [`watch_session_text`]'s watcher is told after each call of a session: the session
/// (without calls), how many of its calls are read (counted or not), the call's effect time (its
/// end, else its start, as [`Call::end_ms`]), and the detector it was pushed into. It answers
/// whether to read on.
pub type CallWatcher<'w> =
    dyn FnMut(&Session, usize, Option<i64>, &mut SessionDetector) -> bool + 'w;

/// `detect`'s borrowed read of a session ([`detect_session_text`]) for a caller that looks at the
/// detector after each call (the backtest judges its prefixes as they are read, issue 19): the
/// session without its calls and the detector of all of them (made by `new_detector`), with no
/// list of calls built. `None` for a session this read does not take, or when `after_call` says
/// stop: read it again the usual way ([`SessionCalls::read`], [`parse_session_text`]) for its
/// answer or its error.
pub fn watch_session_text(
    text: &str,
    new_detector: &NewDetector<'_>,
    after_call: &mut CallWatcher<'_>,
) -> Option<(Session, SessionDetector)> {
    match crate::hand::watch(text, new_detector, after_call) {
        Ok(read) => read,
        Err(crate::hand::Untouched) => serde_watch(text, new_detector, after_call),
    }
}

/// [`watch_session_text`] through serde's reader, for a session the hand reader leaves alone.
pub(crate) fn serde_watch(
    text: &str,
    new_detector: &NewDetector<'_>,
    after_call: &mut CallWatcher<'_>,
) -> Option<(Session, SessionDetector)> {
    let mut de = serde_json::Deserializer::from_str(text);
    let visitor = DetectVisitor {
        new_detector,
        after_call,
    };
    let detected = serde::de::Deserializer::deserialize_map(&mut de, visitor).ok()?;
    de.end().ok()?;
    Some(detected)
}

/// [`detect_borrowed`]'s reader: the keys of [`SessionDoc`] (each at most once), the calls
/// pushed as they come; any key of the session after `calls` fails it (a detector is made from
/// the session before its first call).
struct DetectVisitor<'c, 'w, 'h> {
    new_detector: &'c NewDetector<'c>,
    after_call: &'w mut CallWatcher<'h>,
}

/// Where the calls of [`watch_session_text`] go, one at a time as they are read: into a detector
/// made already, with the session's line counts as they were read, then to the watcher.
pub(crate) struct CallSink<'d, 'l, 'h> {
    pub(crate) session: &'d Session,
    pub(crate) detector: &'d mut SessionDetector,
    pub(crate) line_counts: &'d LineCountsText<'l>,
    pub(crate) after_call: &'d mut CallWatcher<'h>,
    /// How many calls were taken.
    pub(crate) read: usize,
}

impl CallSink<'_, '_, '_> {
    /// Take the next call: checked as the format wants it ([`check_call`], an input that is an
    /// object), pushed when it counts, and shown to the watcher; false when the call is refused
    /// or the watcher says stop.
    pub(crate) fn take(&mut self, call: CallText<'_>) -> bool {
        if !matches!(call.input, Json::Object(_))
            || check_call(self.read, &call.tool, call.input.get("command")).is_err()
        {
            return false;
        }
        self.read += 1;
        let status = CallStatus::from_text(&call.status);
        let time = call.time.map(|MapOnly(t)| t.time());
        let meta = call.metadata;
        let counted = CallRef::new(
            &call.tool,
            &call.input,
            &status,
            || meta,
            call.output_hash,
            time,
        );
        if let Some(call) = counted {
            self.detector.push_ref_with(&call, self.line_counts);
        }
        let effect_ms = time.and_then(CallTime::effect_ms);
        (self.after_call)(self.session, self.read, effect_ms, self.detector)
    }
}

/// [`DetectVisitor`]'s reader of `calls`.
struct CallsSeed<'s, 'd, 'l, 'h>(&'s mut CallSink<'d, 'l, 'h>);

/// Why [`detect_borrowed`] does not read a session (never shown: the usual read says why).
const NOT_READ: &str = "not read by detect's borrowed read";

impl<'de> serde::de::Visitor<'de> for DetectVisitor<'_, '_, '_> {
    type Value = (Session, SessionDetector);

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a session")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        use serde::de::Error as _;
        fn once<'de, T: Deserialize<'de>, A: serde::de::MapAccess<'de>>(
            slot: &mut Option<T>,
            map: &mut A,
        ) -> Result<(), A::Error> {
            if slot.is_some() {
                return Err(A::Error::custom(NOT_READ));
            }
            *slot = Some(map.next_value()?);
            Ok(())
        }
        let mut doc = SessionDoc::<CallText<'de>>::empty();
        let mut id = None;
        // `Option` fields: a key seen, its value (`null` is none).
        let (mut parent_id, mut title, mut agent, mut directory) = (None, None, None, None);
        let (mut label, mut labels, mut note, mut line_counts, mut loop_start) =
            (None, None, None, None, None);
        let mut detected = None;
        while let Some(key) = map.next_key_seed(crate::json::CowStr)? {
            if detected.is_some() && key != "calls" && is_session_key(&key) {
                return Err(A::Error::custom(NOT_READ));
            }
            match &*key {
                "id" => once(&mut id, &mut map)?,
                "parent_id" => once(&mut parent_id, &mut map)?,
                "title" => once(&mut title, &mut map)?,
                "agent" => once(&mut agent, &mut map)?,
                "directory" => once(&mut directory, &mut map)?,
                "label" => once(&mut label, &mut map)?,
                "labels" => once(&mut labels, &mut map)?,
                "note" => once(&mut note, &mut map)?,
                "line_counts" => once(&mut line_counts, &mut map)?,
                "loop_start" => once(&mut loop_start, &mut map)?,
                "calls" => {
                    if detected.is_some() {
                        return Err(A::Error::custom(NOT_READ));
                    }
                    doc.id = id.take().ok_or_else(|| A::Error::custom(NOT_READ))?;
                    doc.parent_id = parent_id.take().flatten();
                    doc.title = title.take().flatten();
                    doc.agent = agent.take().flatten();
                    doc.directory = directory.take().flatten();
                    doc.label = label.take().flatten();
                    doc.labels = labels.take().flatten();
                    doc.note = note.take().flatten();
                    doc.loop_start = loop_start.take().flatten();
                    let mut session = doc.stub().map_err(|_| A::Error::custom(NOT_READ))?;
                    let mut detector = (self.new_detector)(&mut session);
                    let line_counts: Option<LineCountsText<'de>> = line_counts.take().flatten();
                    map.next_value_seed(CallsSeed(&mut CallSink {
                        session: &session,
                        detector: &mut detector,
                        line_counts: &line_counts.unwrap_or_default(),
                        after_call: &mut *self.after_call,
                        read: 0,
                    }))?;
                    detected = Some((session, detector));
                }
                _ => {
                    map.next_value::<serde::de::IgnoredAny>()?;
                }
            }
        }
        detected.ok_or_else(|| A::Error::custom(NOT_READ))
    }
}

/// Whether `key` is one of [`SessionDoc`]'s.
pub(crate) fn is_session_key(key: &str) -> bool {
    matches!(
        key,
        "id" | "parent_id"
            | "title"
            | "agent"
            | "directory"
            | "label"
            | "labels"
            | "note"
            | "line_counts"
            | "loop_start"
            | "calls"
    )
}

impl<'de> serde::de::DeserializeSeed<'de> for CallsSeed<'_, '_, '_, '_> {
    type Value = ();
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> serde::de::Visitor<'de> for CallsSeed<'_, '_, '_, '_> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a list of calls")
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        use serde::de::Error as _;
        while let Some(MapOnly(call)) = seq.next_element::<MapOnly<CallText<'de>>>()? {
            if !self.0.take(call) {
                return Err(A::Error::custom(NOT_READ));
            }
        }
        Ok(())
    }
}

/// One element of a session file's `sessions` list, as it was read.
#[derive(Debug)]
pub struct SessionText {
    /// Its place among every element read from the document (a repeated `sessions` key goes on).
    pub serial: usize,
    /// Its place in its list, which names it in errors.
    pub index: usize,
    /// Where its text begins in the input, when the scan cut it out ([`scan_session_texts`]):
    /// a caller may read it again alone there (its length is the text's).
    pub offset: Option<u64>,
    /// Its JSON text (nothing built; checked by serde's reader, not by the scan, see
    /// [`scan_session_texts`]).
    pub text: SharedText,
}

/// A session's JSON text, a range of a block of the file shared by every session cut from it
/// ([`scan_session_texts`]: no copy per session), read as a `str`.
#[derive(Clone)]
pub struct SharedText {
    block: Arc<String>,
    start: usize,
    end: usize,
}

impl SharedText {
    /// The text of `block` at `range`; `None` when that is not a text of it.
    pub(crate) fn new(block: Arc<String>, range: std::ops::Range<usize>) -> Option<Self> {
        block.get(range.clone())?;
        Some(Self {
            block,
            start: range.start,
            end: range.end,
        })
    }
}

impl std::ops::Deref for SharedText {
    type Target = str;
    fn deref(&self) -> &str {
        // Always a text of the block ([`SharedText::new`]).
        self.block.get(self.start..self.end).unwrap_or_default()
    }
}

impl From<Box<str>> for SharedText {
    fn from(text: Box<str>) -> Self {
        let end = text.len();
        Self {
            block: Arc::new(text.into_string()),
            start: 0,
            end,
        }
    }
}

impl PartialEq for SharedText {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl std::fmt::Debug for SharedText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(&**self, f)
    }
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
    /// sessions), with the first error a reader of the whole document meets. The
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

/// Whether what was parsed of the texts [`scan_session_texts`] handed over stands: no text was
/// found not to be JSON (else the document must be read again through [`stream_session_texts`],
/// for the error a reader of the whole document gives).
pub fn scanned_cleanly<T>(parsed: &[(usize, Result<T, ParseError>)]) -> bool {
    !parsed
        .iter()
        .any(|(_, result)| matches!(result, Err(ParseError::Json { .. })))
}

/// The sessions that count, in order, from what was parsed of each element of a streamed
/// document (`(serial, result)`, in any order): the first error a reader of the whole
/// document meets (the document's shape, then a session that does not parse or an id seen twice,
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

pub(crate) enum ListState {
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
                offset: None,
                text: Box::<str>::from(text).into(),
            });
            state.serial += 1;
            index += 1;
        }
        Ok(ListState::List { first_serial })
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn with_output_keeps_the_hash_and_a_commit() {
        let commit = Call::completed("bash", serde_json::json!({"command": "git commit -qam x"}))
            .with_output("[main 4e1f0a2] x\n 1 file changed");
        assert_eq!(commit.metadata, serde_json::json!({"committed": true}));
        assert_eq!(
            commit.output_hash.as_deref(),
            Some(output_hash("[main 4e1f0a2] x\n 1 file changed").as_str())
        );
        let read = Call::completed("read", serde_json::json!({"filePath": "a"}))
            .with_output("[main 4e1f0a2] x");
        assert_eq!(read.metadata, Value::Null);
    }

    #[test]
    fn loop_start_and_output_hash_are_optional_and_round_trip() {
        let file = json!({"format": SESSION_FILE_FORMAT, "sessions": [
            {"id": "a", "loop_start": 1, "calls": [
                {"tool": "bash", "input": {"command": "ls"}, "status": "completed",
                 "output_hash": "00000000000000ff"},
                {"tool": "bash", "input": {"command": "ls"}, "status": "completed"}]},
            {"id": "b", "calls": []}]});
        let parsed = SessionFile::from_json(&file.to_string()).unwrap();
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

    /// A session read through serde (as the store reads its cache) goes through the same reader
    /// and its checks.
    #[test]
    fn a_session_deserialises_through_the_one_reader() {
        let session = Session {
            calls: vec![Call::completed("bash", json!({"command": "ls"})).with_output("x")],
            ..Session::new("a")
        };
        let text = serde_json::to_string(&session).unwrap();
        assert_eq!(serde_json::from_str::<Session>(&text).unwrap(), session);
        let empty_tool = r#"{"id":"a","calls":[{"tool":"","input":{},"status":"completed"}]}"#;
        let e = serde_json::from_str::<Session>(empty_tool)
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("at calls[0].tool: must not be empty"), "{e}");
    }

    /// A number beyond u64 in a call's input is read as the float nearest to it, so writing
    /// the file back and reading it again gives the same session (a fuzzer found serde_json's
    /// default, faster parser one ulp off: the workspace enables `float_roundtrip`).
    #[test]
    fn a_huge_number_survives_a_round_trip() {
        let text = format!(
            r#"{{"format":"{SESSION_FILE_FORMAT}","sessions":[{{"id":"a","calls":[{{"tool":"read","input":{{"filePath":"/a","offset":118446744073709551616}},"status":"completed"}}]}}]}}"#
        );
        let once = SessionFile::from_json(&text).unwrap();
        let twice = SessionFile::from_json(&once.to_json_pretty()).unwrap();
        assert_eq!(twice, once);
    }

    #[test]
    fn bad_loop_start_or_output_hash_is_named() {
        let bad_start = json!({"format": SESSION_FILE_FORMAT, "sessions": [
            {"id": "a", "loop_start": -1, "calls": []}]});
        let e = SessionFile::from_json(&bad_start.to_string())
            .unwrap_err()
            .to_string();
        assert!(e.contains("(a)") && e.contains("loop_start"), "{e}");
        let bad_hash = json!({"format": SESSION_FILE_FORMAT, "sessions": [
            {"id": "a", "calls": [{"tool": "ls", "input": {}, "status": "completed",
                                   "output_hash": 7}]}]});
        let e = SessionFile::from_json(&bad_hash.to_string())
            .unwrap_err()
            .to_string();
        assert!(e.contains("(a) at calls[0].output_hash"), "{e}");
    }

    #[test]
    fn labels_per_profile_replace_the_label_under_their_profile() {
        let file = json!({"format": SESSION_FILE_FORMAT, "sessions": [
            {"id": "a", "label": "must_not_flag", "labels": {"precise": "must_flag"}, "calls": []},
            {"id": "b", "label": "must_flag", "calls": []}]});
        let parsed = SessionFile::from_json(&file.to_string()).unwrap();
        let (a, b) = (&parsed.sessions[0], &parsed.sessions[1]);
        use crate::Profile::{Design, Precise};
        assert_eq!(a.label_for(Design), Some(Label::MustNotFlag));
        assert_eq!(a.label_for(Precise), Some(Label::MustFlag));
        assert_eq!(b.label_for(Precise), Some(Label::MustFlag));
        let again = SessionFile::from_json(&parsed.to_json_pretty()).unwrap();
        assert_eq!(again, parsed);
        assert!(!parsed.to_json_pretty().contains("\"labels\": {}"));
        for (labels, named) in [
            (
                json!({"fast": "must_flag"}),
                "at labels: \"fast\" is not a profile name",
            ),
            (
                json!({"precise": "maybe"}),
                "at labels.precise: invalid value: string \"maybe\"",
            ),
            (
                json!(["precise"]),
                "at labels: invalid type: a list, expected an object",
            ),
        ] {
            let bad = json!({"format": SESSION_FILE_FORMAT, "sessions": [
                {"id": "a", "labels": labels, "calls": []}]});
            let e = SessionFile::from_json(&bad.to_string())
                .unwrap_err()
                .to_string();
            assert!(e.contains("(a)") && e.contains(named), "{e}");
        }
    }

    /// Every shape a session can take reads, or fails naming the session and the place in it:
    /// lists where objects belong, `null`s, repeated keys, escaped keys, numbers of every kind,
    /// and metadata in every form the matcher reads. And `detect`'s read (only the metadata the
    /// matcher reads) feeds the detector the same, and fails the same.
    #[test]
    fn every_shape_reads_or_names_its_place() {
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
        // Each shape, and the error it gives (`None`: it reads).
        let mut cases: Vec<(String, Option<&str>)> = vec![
            (r#"{"id":"s","calls":[]}"#.to_owned(), None),
            (r#"["s",null,null,null,null,null,null,null,null,[]]"#.to_owned(), Some("session #3: invalid type: a list, expected an object")),
            (r#"{"id":"","calls":[]}"#.to_owned(), Some("session #3 at id: must not be empty")),
            (r#"{"id":7,"calls":[]}"#.to_owned(), Some("session #3 at id: invalid type: integer `7`, expected a string")),
            (r#"{"id":"s","id":"t","calls":[]}"#.to_owned(), Some("session #3: duplicate field `id`")),
            (r#"{"id":"s","calls":[],"label":"must_flag","loop_start":0,"line_counts":{"/p/a.rs":9}}"#.to_owned(), None),
            (r#"{"id":"s","calls":[],"label":"maybe"}"#.to_owned(), Some("session #3 (s) at label: invalid value: string \"maybe\", expected must_flag or must_not_flag")),
            (r#"{"id":"s","calls":[],"labels":{"precise":"must_flag","design":"must_not_flag"}}"#.to_owned(), None),
            (r#"{"id":"s","calls":[],"labels":{"fast":"must_flag"}}"#.to_owned(), Some("session #3 (s) at labels: \"fast\" is not a profile name (design, precise)")),
            (r#"{"id":"s","calls":[],"labels":{"precise":null}}"#.to_owned(), Some("session #3 (s) at labels.precise: invalid type: null, expected must_flag or must_not_flag")),
            (r#"{"id":"s","calls":[],"labels":["precise"]}"#.to_owned(), Some("session #3 (s) at labels: invalid type: a list, expected an object")),
            (r#"{"id":"s","calls":[],"labels":null}"#.to_owned(), None),
            (r#"{"id":"s","calls":[],"label":null,"line_counts":null,"loop_start":null,"title":null}"#.to_owned(), None),
            (r#"{"id":"s","calls":[],"line_counts":{"a":1.5}}"#.to_owned(), Some("session #3 (s) at line_counts.a: invalid type: floating point `1.5`, expected u64")),
            (r#"{"id":"s","calls":[],"line_counts":{"a":1,"a":2}}"#.to_owned(), None),
            (r#"{"id":"s","calls":[],"loop_start":-1}"#.to_owned(), Some("session #3 (s) at loop_start: invalid value: integer `-1`, expected usize")),
            (r#"{"id":"s","calls":null}"#.to_owned(), Some("session #3 (s) at calls: invalid type: null, expected a list")),
            (r#"{"id":"s"}"#.to_owned(), Some("session #3 (s): missing field `calls`")),
            (call(r#"["bash",{"command":"ls"},"completed"]"#), Some("session #3 (s) at calls[0]: invalid type: a list, expected an object")),
            (call(r#"{"tool":"","input":{},"status":"completed"}"#), Some("session #3 (s) at calls[0].tool: must not be empty")),
            (call(r#"{"tool":"bash","input":null,"status":"completed"}"#), Some("session #3 (s) at calls[0].input: invalid type: null, expected an object")),
            (call(r#"{"tool":"bash","input":{"command":7},"status":"completed"}"#), Some("session #3 (s) at calls[0].input.command: a bash command must be a string, found a number")),
            (call(r#"{"tool":"bash","input":{"command":"ls"},"status":3}"#), Some("session #3 (s) at calls[0].status: invalid type: integer `3`, expected a string")),
            (call(r#"{"tool":"bash","input":{"command":"ls"},"status":"odd"}"#), None),
            (call(r#"{"tool":"bash","tool":"read","input":{"command":"ls"},"status":"completed"}"#), Some("session #3 (s) at calls[0]: duplicate field `tool`")),
            (call(r#"{"tool":"bash","input":{"command":"ls"},"status":"completed"}"#), None),
            (call(r#"{"tool":"bash","input":{"command":"ls"},"status":"completed","output_hash":7}"#), Some("session #3 (s) at calls[0].output_hash: invalid type: integer `7`, expected a string")),
            (call(r#"{"tool":"bash","input":{"command":"ls"},"status":"error","output_hash":null}"#), None),
            (call(r#"{"tool":"bash","input":{"command":"ls"},"status":"completed","time":[1,2]}"#), Some("session #3 (s) at calls[0].time: invalid type: a list, expected an object")),
            (call(r#"{"tool":"bash","input":{"command":"ls"},"status":"completed","time":{"start":1.5,"end":1e3}}"#), None),
            (call(r#"{"tool":"bash","input":{"command":"ls"},"status":"completed","time":{"start":"1"}}"#), Some("session #3 (s) at calls[0].time.start: invalid type: string \"1\", expected a number (unix ms)")),
            (call(r#"{"tool":"bash","input":{"command":"ls"},"status":"completed","time":null}"#), None),
            (call(r#"{"tool":"read","input":{"filePath":"a.rs","offset":2.0,"limit":10},"status":"completed","metadata":{"total_lines":null,"lines_read":5}}"#), None),
            (call(r#"{"tool":"read","input":{"filePath":"a.rs","offset":40},"status":"completed","metadata":{"total_lines":50,"preview":"x"}}"#), None),
            (call(r#"{"tool":"write","input":{"filePath":"a.rs"},"status":"completed","metadata":[1]}"#), None),
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
            cases.push((bash(meta), None));
        }
        for meta in [
            r#"{"diff":"  \n"}"#,
            r#"{"diff":"-a\n+b"}"#,
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
            cases.push((edit(meta), None));
        }
        for (text, error) in &cases {
            let tree = parse_session_text(3, text);
            assert_eq!(
                tree.as_ref().err().map(ToString::to_string).as_deref(),
                *error,
                "{text}"
            );
            for profile in [crate::Profile::Design, crate::Profile::Precise] {
                let config = DetectConfig::with_profile(profile);
                let detected = detect_session_text(3, text, &config);
                match tree.clone() {
                    Ok(mut session) => {
                        let mut fed = SessionDetector::new(&session, &config);
                        session.calls.iter().for_each(|c| fed.push(c));
                        fed.calls_done();
                        session.calls.clear();
                        session.line_counts.clear();
                        let judged = parse_judged_session_text(3, text).unwrap();
                        let mut replayed = SessionDetector::new(&judged, &config);
                        judged.calls.iter().for_each(|c| replayed.push(c));
                        replayed.calls_done();
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

    /// Session texts of every shape `detect`'s borrowed read meets (escapes, unicode, numbers
    /// written as text, nulls, missing and unknown fields, repeated keys, metadata of every
    /// shape, what the format refuses), each with whether that read takes it.
    pub(crate) fn borrowed_read_cases() -> Vec<(String, bool)> {
        let session = |calls: &str| {
            format!(
                r#"{{"id":"s","directory":"/p","line_counts":{{"/p/a.rs":120,"/p/\u00e9.rs":40}},"calls":[{calls}]}}"#
            )
        };
        let times = |call: &str, n: usize| vec![call; n].join(",");
        let read = r#"{"tool":"read","input":{"filePath":"a.rs","offset":1,"limit":50},"status":"completed","output_hash":"00000000000000aa"}"#;
        let bash = r#"{"tool":"bash","input":{"command":"cd /p && cargo test","description":"x"},"status":"completed","metadata":{"exit":101}}"#;
        // Each text, and whether the borrowed read takes it (else the usual read answers).
        let mut cases: Vec<(String, bool)> = vec![
            (session(""), true),
            (session(&times(read, 12)), true),
            (session(&times(bash, 12)), true),
            (session(&[times(read, 6), times(bash, 6)].join(",")), true),
            // Escapes and unicode in keys and values, and `\u` escapes of plain letters.
            (
                session(&times(
                    r#"{"tool":"read","input":{"file\u0050ath":"\u00e9.rs","offset":"1"},"status":"completed"}"#,
                    9,
                )),
                true,
            ),
            (
                session(&times(
                    r#"{"tool":"bash","input":{"command":"echo \"a\tb\" \u2603 | grep 'x\\y'","k\n":"\u0000"},"status":"completed","metadata":{"e\u0078it":0}}"#,
                    9,
                )),
                true,
            ),
            (
                session(&times(
                    r#"{"t\u006fol":"b\u0061sh","input":{"command":"ls"},"status":"compl\u0065ted"}"#,
                    9,
                )),
                true,
            ),
            // Numbers of every kind, and numbers written as text.
            (
                session(&times(
                    r#"{"tool":"read","input":{"filePath":"a.rs","offset":2.0,"limit":1e2},"status":"completed","metadata":{"total_lines":"80","lines_read":5.0}}"#,
                    9,
                )),
                true,
            ),
            (
                session(&times(
                    r#"{"tool":"read","input":{"filePath":"a.rs","offset":18446744073709551616,"limit":-3},"status":"completed","metadata":{"total_lines":90,"lines_read":"5"}}"#,
                    9,
                )),
                true,
            ),
            (
                session(&times(
                    r#"{"tool":"bash","input":{"command":"git commit -m x"},"status":"completed","metadata":{"exit":"0"}}"#,
                    9,
                )),
                true,
            ),
            (
                session(&times(
                    r#"{"tool":"bash","input":{"command":"git commit -m x"},"status":"completed","metadata":{"exit":0.0}}"#,
                    9,
                )),
                true,
            ),
            // Nulls, missing and unknown fields, statuses that do not count.
            (
                session(&times(
                    r#"{"tool":"bash","input":{"command":"ls","x":null},"status":"completed","metadata":null,"time":null,"output_hash":null,"extra":[1,{"a":2}]}"#,
                    9,
                )),
                true,
            ),
            (
                session(&times(
                    r#"{"tool":"bash","input":{"command":null},"status":"completed","metadata":{"exit":null}}"#,
                    9,
                )),
                false,
            ),
            (
                session(&times(
                    r#"{"tool":"glob","input":{},"status":"running"}"#,
                    9,
                )),
                true,
            ),
            (
                session(&times(
                    r#"{"tool":"glob","input":{"pattern":"*"},"status":"odd","time":{"start":5}}"#,
                    9,
                )),
                true,
            ),
            (
                session(&times(
                    r#"{"tool":"grep","input":{"pattern":"a"},"status":"error","time":{"start":1.5,"end":9}}"#,
                    9,
                )),
                true,
            ),
            // Repeated keys: the last counts.
            (
                session(&times(
                    r#"{"tool":"bash","input":{"command":"ls","command":"pwd"},"status":"completed","metadata":{"exit":1,"exit":0,"diff":"x","diff":" "}}"#,
                    9,
                )),
                true,
            ),
            // Metadata of every shape the matcher reads.
            (
                session(&times(
                    r#"{"tool":"edit","input":{"filePath":"a.rs"},"status":"completed","metadata":{"diff":"\n \t"}}"#,
                    9,
                )),
                true,
            ),
            (
                session(&times(
                    r#"{"tool":"edit","input":{"filePath":"a.rs"},"status":"completed","metadata":{"diff":"-a\n+b","filediff":{"before":"x\n","after":"y"}}}"#,
                    3,
                )),
                true,
            ),
            (
                session(&times(
                    r#"{"tool":"edit","input":{"filePath":"a.rs"},"status":"completed","metadata":{"filediff":{"additions":0,"deletions":2,"additions":0}}}"#,
                    3,
                )),
                true,
            ),
            (
                session(&times(
                    r#"{"tool":"edit","input":{"filePath":"a.rs"},"status":"completed","metadata":{"files":[7,null,{"additions":-1},{"deletions":"2"},[{"additions":3}]]}}"#,
                    9,
                )),
                true,
            ),
            (
                session(&times(
                    r#"{"tool":"edit","input":{"filePath":"a.rs"},"status":"completed","metadata":{"files":[{"additions":1}],"filediff":[1]}}"#,
                    3,
                )),
                true,
            ),
            (
                session(&times(
                    r#"{"tool":"write","input":{"filePath":"a.rs"},"status":"completed","metadata":[{"diff":"x"}]}"#,
                    3,
                )),
                true,
            ),
            (
                session(&times(
                    r#"{"tool":"edit","input":{"filePath":"a.rs"},"status":"completed","metadata":"diff"}"#,
                    9,
                )),
                true,
            ),
            // What the borrowed read leaves to the usual one: an output hash with escapes, and
            // what the format refuses.
            (
                session(&times(
                    r#"{"tool":"read","input":{"filePath":"a.rs"},"status":"completed","output_hash":"\u0061"}"#,
                    9,
                )),
                false,
            ),
            (
                session(r#"{"tool":"bash","input":[],"status":"completed"}"#),
                false,
            ),
            (
                session(r#"{"tool":"bash","input":{"command":7},"status":"completed"}"#),
                false,
            ),
            (
                session(r#"{"tool":"","input":{},"status":"completed"}"#),
                false,
            ),
            (
                session(r#"{"tool":"bash","input":{},"status":"completed","time":[1]}"#),
                false,
            ),
            (
                session(r#"{"tool":"bash","input":{},"status":"completed""#),
                false,
            ),
            (r#"{"id":"","calls":[]}"#.to_owned(), false),
        ];
        cases.push((
            session(&times(bash, 3))
                .replace(r#""id":"s""#, r#""id":"s","title":"x (@explore subagent)""#),
            true,
        ));
        // The session's own keys: the calls are pushed as they are read when they come after
        // the keys the detector is made of; anything else is left to the usual read.
        let calls = times(bash, 12);
        for (text, borrowed) in [
            (
                format!(
                    r#"{{"x":[{{"calls":1}}],"d\u0069rectory":"/p","id":"s","parent_id":null,"title":null,"labels":{{"precise":"must_flag"}},"label":"must_not_flag","note":"n","loop_start":2,"calls":[{calls}],"y":{{"id":1}}}}"#
                ),
                true,
            ),
            (format!(r#"{{"calls":[{calls}],"id":"s"}}"#), false),
            (
                format!(r#"{{"id":"s","calls":[{calls}],"line_counts":{{"/p/a.rs":1}}}}"#),
                false,
            ),
            (
                format!(r#"{{"id":"s","calls":[{calls}],"note":null}}"#),
                false,
            ),
            (
                format!(r#"{{"id":"s","calls":[],"calls":[{calls}]}}"#),
                false,
            ),
            (format!(r#"{{"id":"s","id":"t","calls":[{calls}]}}"#), false),
            (format!(r#"{{"id":"s","calls":[{calls}]}} x"#), false),
            (r#"{"id":"s","calls":null}"#.to_owned(), false),
            (r#"{"id":"s"}"#.to_owned(), false),
            (
                r#"{"id":"s","labels":{"x":"must_flag"},"calls":[]}"#.to_owned(),
                false,
            ),
            (
                r#"["s",null,null,null,null,null,null,null,null,null,[]]"#.to_owned(),
                false,
            ),
        ] {
            cases.push((text, borrowed));
        }
        cases
    }

    /// `detect`'s typed, borrowed read of a session judges as the usual read, whatever the text
    /// holds, and leaves to it what it does not read.
    #[test]
    fn the_borrowed_read_judges_as_the_usual_read() {
        for (text, borrowed) in &borrowed_read_cases() {
            for profile in crate::Profile::ALL {
                let config = DetectConfig::with_profile(profile);
                // As `detect_session_text` hands both over: their calls done.
                let done = |(s, mut d): (Session, SessionDetector)| {
                    d.calls_done();
                    (s, d)
                };
                let usual = detect_calls(3, text, &config).map(done);
                let Some((stub, detector)) = detect_borrowed(text, &config).map(done) else {
                    assert!(!borrowed, "not read borrowed: {text}");
                    assert_eq!(
                        detect_session_text(3, text, &config).map(|(s, d)| (s, d.snapshot())),
                        usual.map(|(s, d)| (s, d.snapshot())),
                        "{text}"
                    );
                    continue;
                };
                assert!(borrowed, "read borrowed: {text}");
                let (usual_stub, usual) = usual.unwrap();
                assert_eq!(stub, usual_stub, "{text}");
                assert_eq!(detector.snapshot(), usual.snapshot(), "{profile} {text}");
                assert_eq!(detector.verdict(), usual.verdict(), "{profile} {text}");
                assert_eq!(
                    detector.latest_own_landing(),
                    usual.latest_own_landing(),
                    "{text}"
                );
            }
        }
    }

    /// The streamed reader says what a reader of the whole document would: the same sessions, or
    /// the same first error, whatever the key order (sessions before format, a repeated key).
    #[test]
    fn streamed_parse_reads_as_the_whole_document() {
        let call = r#"{"tool":"bash","input":{"command":"ls"},"status":"completed"}"#;
        let ok = |ids: &[&str]| Ok(ids.iter().map(|id| (*id).to_owned()).collect::<Vec<_>>());
        let err = |message: &str| Err(message.to_owned());
        let docs = [
            (
                format!(
                    r#"{{"format":"{SESSION_FILE_FORMAT}","sessions":[{{"id":"a","calls":[{call}]}}]}}"#
                ),
                ok(&["a"]),
            ),
            (
                format!(
                    r#"{{"sessions":[{{"id":"a","calls":[{call}]}}],"format":"{SESSION_FILE_FORMAT}"}}"#
                ),
                ok(&["a"]),
            ),
            // The document's shape is reported before its sessions.
            (
                r#"{"sessions":[{"id":"a","calls":[7]}],"format":"x/2"}"#.to_owned(),
                err(r#"unsupported format x/2; expected "agentwatch-sessions/1""#),
            ),
            // A repeated key replaces the earlier list, as in any JSON object.
            (
                format!(
                    r#"{{"format":"{SESSION_FILE_FORMAT}","sessions":[{{"id":"a","calls":[]}}],"sessions":[{{"id":"b","calls":[]}},{{"id":"c","calls":[]}}]}}"#
                ),
                ok(&["b", "c"]),
            ),
            (
                format!(
                    r#"{{"format":"{SESSION_FILE_FORMAT}","sessions":[{{"id":"a","calls":[]}},{{"id":"a","calls":[]}}]}}"#
                ),
                err("session id a appears twice"),
            ),
            // The first error in list order.
            (
                format!(
                    r#"{{"format":"{SESSION_FILE_FORMAT}","sessions":[{{"id":"a"}},{{"id":"a","calls":[]}}]}}"#
                ),
                err("session #0 (a): missing field `calls`"),
            ),
            (
                format!(r#"{{"format":"{SESSION_FILE_FORMAT}","sessions":{{"id":"a"}}}}"#),
                err("`sessions` must be a list"),
            ),
            (
                format!(
                    r#"{{"format":"{SESSION_FILE_FORMAT}","sessions":null,"other":[1,{{"x":[]}}]}}"#
                ),
                err("`sessions` must be a list"),
            ),
            (
                r#"{"format":7,"sessions":[]}"#.to_owned(),
                err(r#"unsupported format 7; expected "agentwatch-sessions/1""#),
            ),
            (
                r#"[{"format":"agentwatch-sessions/1"}]"#.to_owned(),
                err("a session file is a JSON object with `format` and `sessions`"),
            ),
            (
                r#""text""#.to_owned(),
                err("a session file is a JSON object with `format` and `sessions`"),
            ),
            (
                r#"{"sessions":[]}"#.to_owned(),
                err(r#"unsupported format (missing); expected "agentwatch-sessions/1""#),
            ),
        ];
        for (doc, read) in &docs {
            let got = SessionFile::from_json(doc)
                .map(|f| f.sessions.into_iter().map(|s| s.id).collect::<Vec<_>>())
                .map_err(|e| e.to_string());
            assert_eq!(got, read.clone(), "{doc}");
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
