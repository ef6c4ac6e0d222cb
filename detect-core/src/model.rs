//! The session and call model, and how one session of a session file (`agentwatch-sessions/1`)
//! is read into it.
//!
//! A session is read typed and borrowed from its text ([`parse_session_text`]), through one set of
//! derived types ([`SessionDoc`]); a session that does not read is read again through
//! `serde_path_to_error`, so that every error names the session and the place in it
//! (`calls[3].input`). Cutting a document into sessions' texts is [`crate::document`]'s and
//! [`crate::scan`]'s, the whole file [`crate::file`]'s; pushing a session's calls into a detector
//! as they are read is [`crate::sink`]'s, [`crate::hand`]'s and [`crate::watch`]'s.

use crate::config::Profile;
use crate::json::{Json, MapOnly};
use crate::meta::{MetaFacts, ReadMetadata};
use crate::output::{COMMITTED_KEY, output_commit, output_hash};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::borrow::Cow;
use std::collections::BTreeMap;

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
    pub fn label_for(&self, profile: Profile) -> Option<Label> {
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

/// What every agentwatch hook message begins with (`agentwatch: …`): an agent's record of a
/// call refused with a reason that begins so is agentwatch's own refusal, which an adapter
/// reads as [`CallStatus::Blocked`]; another hook's refusal stays an error.
pub const HOOK_MARKER: &str = "agentwatch:";

/// A call's status. Only `completed` and `error` calls count; the rest are ignored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CallStatus {
    Pending,
    Running,
    Completed,
    Error,
    /// A call a pre-tool hook refused (agentwatch's own, `agentwatch hook`): it never ran, so
    /// it is neither progress nor a new repeat; not counted. Adapters set it from the record
    /// the agent writes for a refused call.
    Blocked,
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
            "blocked" => Self::Blocked,
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
    /// ([`output_commit`]), `metadata.committed`, the commit's hash. Adapters build calls
    /// through this (or the two functions) so that every source reads outputs alike.
    pub fn with_output(mut self, output: &str) -> Self {
        self.output_hash = Some(output_hash(output));
        if self.tool == "bash"
            && let Some(commit) = output_commit(output)
        {
            if !self.metadata.is_object() {
                self.metadata = Value::Object(Map::new());
            }
            if let Value::Object(map) = &mut self.metadata {
                map.insert(COMMITTED_KEY.to_owned(), Value::from(commit));
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
    pub(crate) fn time(self) -> CallTime {
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
pub(crate) trait Metadata {
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
pub(crate) fn check_call(
    index: usize,
    tool: &str,
    command: Option<&Json<'_>>,
) -> Result<(), Refused> {
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
/// `SessionDoc`.
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
        if let Some(name) = labels.keys().find(|k| k.parse::<Profile>().is_err()) {
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
pub(crate) fn read_session<'a, M: Deserialize<'a> + Default + Metadata + 'a>(
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
/// [`crate::detect_session_text`] does): a session the detector judges as the whole one, in less
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn with_output_keeps_the_hash_and_a_commit() {
        let commit = Call::completed("bash", serde_json::json!({"command": "git commit -qam x"}))
            .with_output("[main 4e1f0a2] x\n 1 file changed");
        assert_eq!(commit.metadata, serde_json::json!({"committed": "4e1f0a2"}));
        assert_eq!(
            commit.output_hash.as_deref(),
            Some(output_hash("[main 4e1f0a2] x\n 1 file changed").as_str())
        );
        let read = Call::completed("read", serde_json::json!({"filePath": "a"}))
            .with_output("[main 4e1f0a2] x");
        assert_eq!(read.metadata, Value::Null);
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
}
