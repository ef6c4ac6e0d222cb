//! A lean reading of `/session/:id/message` answers for the watch loop.
//!
//! Tool outputs and most metadata (bash output, read previews, diagnostics) are the bulk of a
//! message list and the detector never reads them. This parser walks the JSON with typed structs
//! and keeps only what the detector needs: tool, status, input, times, and the metadata keys
//! `exit`, `diff`, `filediff.{additions,deletions}`, `files[].{additions,deletions}`,
//! `total_lines`, `lines_read`. A read's output is scanned for its "total N lines" note in place,
//! without being copied, and hashed ([`detect_core::output_hash`]); so is `metadata.output` (the
//! output of a user-run shell part).

use crate::problem::TOO_MANY;
use detect_core::{
    COMMITTED_KEY, Call, CallStatus, CallTime, HOOK_MARKER, output_commit, output_hash,
    total_lines_in_output,
};
use serde::de::{self, IgnoredAny, MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};
use std::fmt;

/// One message: its info and its tool parts, reduced (text, reasoning and step parts are read
/// through and not kept: nothing of them reaches the detector).
#[derive(Debug, Clone, Deserialize)]
pub struct LiteMessage {
    pub info: LiteInfo,
    #[serde(default, deserialize_with = "tool_parts")]
    pub parts: Vec<LitePart>,
}

/// What the watch loop reads of a message's info.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct LiteInfo {
    pub id: String,
    #[serde(default)]
    pub role: Option<String>,
    #[serde(default)]
    pub agent: Option<String>,
    #[serde(default)]
    pub mode: Option<String>,
    #[serde(default)]
    pub time: Option<LiteMessageTime>,
    #[serde(default)]
    pub error: Option<IgnoredAny>,
    /// An assistant message's model (`modelID`).
    #[serde(default, rename = "modelID")]
    pub model_id: Option<String>,
    /// An assistant message's provider (`providerID`).
    #[serde(default, rename = "providerID")]
    pub provider_id: Option<String>,
    /// What an assistant message cost, in US dollars (`cost`).
    #[serde(default)]
    pub cost: Option<f64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub struct LiteMessageTime {
    #[serde(default)]
    pub created: Option<i64>,
    #[serde(default)]
    pub completed: Option<i64>,
}

/// A tool part (the only parts kept): the tool and its state, boxed (a part without one costs
/// a pointer).
#[derive(Debug, Clone)]
pub struct LitePart {
    pub tool: Option<String>,
    pub state: Option<Box<LiteState>>,
}

/// A part as it is read: any part, its `type` said.
#[derive(Deserialize)]
struct AnyPart {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    tool: Option<String>,
    #[serde(default, deserialize_with = "object_or_none")]
    state: Option<Box<LiteState>>,
}

/// A message's parts, the tool parts kept (see [`LiteMessage`]).
fn tool_parts<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<LitePart>, D::Error> {
    struct ToolParts;
    impl<'de> Visitor<'de> for ToolParts {
        type Value = Vec<LitePart>;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a list of parts")
        }
        fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            let mut parts = Vec::new();
            while let Some(part) = seq.next_element::<AnyPart>()? {
                if part.kind == "tool" {
                    parts.push(LitePart {
                        tool: part.tool,
                        state: part.state,
                    });
                }
            }
            Ok(parts)
        }
    }
    deserializer.deserialize_seq(ToolParts)
}

#[derive(Debug, Clone, Deserialize)]
pub struct LiteState {
    pub status: String,
    /// The call's input as its JSON text, read as a value only when its call is made
    /// ([`Input::value`]).
    #[serde(default)]
    pub input: Option<Input>,
    #[serde(default)]
    pub metadata: Option<Box<DetectorMetadata>>,
    #[serde(default)]
    pub output: Option<Box<OutputNote>>,
    #[serde(default, deserialize_with = "object_or_none")]
    pub time: Option<LiteCallTime>,
    /// An error state whose message begins with [`HOOK_MARKER`]: agentwatch's hook refused
    /// the call (the plugin's throw, kept verbatim as `state.error`); the text is not kept.
    #[serde(default, rename = "error", deserialize_with = "hook_refusal")]
    pub refused: bool,
}

/// Whether a value is a text that begins with [`HOOK_MARKER`]; any other value is skipped.
fn hook_refusal<'de, D: Deserializer<'de>>(deserializer: D) -> Result<bool, D::Error> {
    struct Refusal;
    impl<'de> Visitor<'de> for Refusal {
        type Value = bool;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("any value")
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<bool, E> {
            Ok(v.starts_with(HOOK_MARKER))
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<bool, A::Error> {
            while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
            Ok(false)
        }
        fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<bool, A::Error> {
            while seq.next_element::<IgnoredAny>()?.is_some() {}
            Ok(false)
        }
        fn visit_bool<E: de::Error>(self, _: bool) -> Result<bool, E> {
            Ok(false)
        }
        fn visit_i64<E: de::Error>(self, _: i64) -> Result<bool, E> {
            Ok(false)
        }
        fn visit_u64<E: de::Error>(self, _: u64) -> Result<bool, E> {
            Ok(false)
        }
        fn visit_f64<E: de::Error>(self, _: f64) -> Result<bool, E> {
            Ok(false)
        }
        fn visit_unit<E: de::Error>(self) -> Result<bool, E> {
            Ok(false)
        }
    }
    deserializer.deserialize_any(Refusal)
}

/// The longest tool input read as JSON, in bytes of its text. A longer one (a hostile or broken
/// server's megabytes of `[1,1,1,…]`) is not built as a `Value`, which costs about 16 times its
/// text: it stands as `{"oversized_input": {"bytes": N, "hash": H}}`, the same for the same
/// text, so a call repeated with it still repeats.
pub const MAX_INPUT_BYTES: usize = 1 << 20;

/// A tool input as the answer wrote it: its JSON text (about its size in memory; a page of
/// calls costs its text, whatever the inputs' shape, where values built at once cost up to 16
/// times it), or the stand-in of one over [`MAX_INPUT_BYTES`].
#[derive(Debug, Clone)]
pub enum Input {
    Text(Box<serde_json::value::RawValue>),
    Oversized { bytes: usize, hash: String },
}

impl<'de> Deserialize<'de> for Input {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = Box::<serde_json::value::RawValue>::deserialize(deserializer)?;
        let text = raw.get();
        Ok(if text.len() > MAX_INPUT_BYTES {
            Self::Oversized {
                bytes: text.len(),
                hash: output_hash(text),
            }
        } else {
            Self::Text(raw)
        })
    }
}

impl Input {
    /// The input as a value, built now: the stand-in of an oversized input; one that is JSON
    /// but no value (nested deeper than serde_json builds, a number past `f64`) stands as
    /// `{"unreadable_input": {"bytes": N, "hash": H}}`, the same for the same text.
    #[must_use]
    pub fn value(&self) -> Value {
        let stand_in = |key: &str, bytes: usize, hash: &str| serde_json::json!({ key: {"bytes": bytes, "hash": hash} });
        match self {
            Self::Oversized { bytes, hash } => stand_in("oversized_input", *bytes, hash),
            Self::Text(raw) => serde_json::from_str(raw.get()).unwrap_or_else(|_| {
                stand_in("unreadable_input", raw.get().len(), &output_hash(raw.get()))
            }),
        }
    }
}

/// `Some` only for a JSON object; anything else reads as absent, as the export reader
/// ([`crate::call_from_part`]) takes it (a derived struct would also read a list).
fn object_or_none<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    deserializer: D,
) -> Result<Option<T>, D::Error> {
    struct ObjectOrNone<T>(std::marker::PhantomData<T>);
    impl<'de, T: Deserialize<'de>> Visitor<'de> for ObjectOrNone<T> {
        type Value = Option<T>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("an object")
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<Option<T>, A::Error> {
            T::deserialize(serde::de::value::MapAccessDeserializer::new(map)).map(Some)
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(
            self,
            mut seq: A,
        ) -> Result<Option<T>, A::Error> {
            while seq.next_element::<IgnoredAny>()?.is_some() {}
            Ok(None)
        }
        fn visit_unit<E: serde::de::Error>(self) -> Result<Option<T>, E> {
            Ok(None)
        }
        fn visit_bool<E: serde::de::Error>(self, _: bool) -> Result<Option<T>, E> {
            Ok(None)
        }
        fn visit_i64<E: serde::de::Error>(self, _: i64) -> Result<Option<T>, E> {
            Ok(None)
        }
        fn visit_u64<E: serde::de::Error>(self, _: u64) -> Result<Option<T>, E> {
            Ok(None)
        }
        fn visit_f64<E: serde::de::Error>(self, _: f64) -> Result<Option<T>, E> {
            Ok(None)
        }
        fn visit_str<E: serde::de::Error>(self, _: &str) -> Result<Option<T>, E> {
            Ok(None)
        }
    }
    deserializer.deserialize_any(ObjectOrNone(std::marker::PhantomData))
}

#[derive(Debug, Clone, Copy, Deserialize)]
pub struct LiteCallTime {
    #[serde(default)]
    pub start: Option<i64>,
    #[serde(default)]
    pub end: Option<i64>,
}

/// The "total N lines" note and the hash of a tool output, read without copying the output,
/// and the commit it shows ([`detect_core::output_commit`]).
#[derive(Debug, Clone, Default)]
pub struct OutputNote {
    pub total_lines: Option<u64>,
    pub hash: Option<String>,
    pub commit: Option<String>,
}

impl<'de> Deserialize<'de> for OutputNote {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct NoteVisitor;
        impl<'de> Visitor<'de> for NoteVisitor {
            type Value = OutputNote;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a tool output")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<OutputNote, E> {
                Ok(OutputNote {
                    total_lines: total_lines_in_output(v),
                    hash: Some(output_hash(v)),
                    commit: output_commit(v).map(str::to_owned),
                })
            }
            fn visit_unit<E: de::Error>(self) -> Result<OutputNote, E> {
                Ok(OutputNote::default())
            }
            fn visit_none<E: de::Error>(self) -> Result<OutputNote, E> {
                Ok(OutputNote::default())
            }
        }
        deserializer.deserialize_any(NoteVisitor)
    }
}

/// The metadata keys the detector reads; everything else is skipped while parsing. The second
/// field is the hash of `metadata.output` (a user-run shell part's output), when a string; the
/// third, the commit that output shows (its hash).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DetectorMetadata(
    pub Map<String, Value>,
    pub Option<String>,
    pub Option<String>,
);

/// Keep `{additions, deletions}` of a diff summary object.
fn change_counts(value: &Value) -> Value {
    let mut out = Map::new();
    for key in ["additions", "deletions"] {
        if let Some(v) = value.get(key).filter(|v| v.is_number()) {
            out.insert(key.to_owned(), v.clone());
        }
    }
    Value::Object(out)
}

/// The detector's view of a full metadata object (the same keys [`DetectorMetadata`] keeps).
pub fn detector_metadata(metadata: &Value) -> Value {
    let mut out = Map::new();
    if let Value::Object(map) = metadata {
        for (key, value) in map {
            if let Some(kept) = keep(key, value.clone()) {
                out.insert(key.clone(), kept);
            }
        }
    }
    if out.is_empty() {
        Value::Null
    } else {
        Value::Object(out)
    }
}

fn keep(key: &str, value: Value) -> Option<Value> {
    match key {
        "exit" | "diff" | "total_lines" | "lines_read" => Some(value),
        "filediff" => Some(change_counts(&value)),
        "files" => Some(Value::Array(
            value
                .as_array()
                .map(|files| files.iter().map(change_counts).collect())
                .unwrap_or_default(),
        )),
        _ => None,
    }
}

impl<'de> Deserialize<'de> for DetectorMetadata {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct MetaVisitor;
        impl<'de> Visitor<'de> for MetaVisitor {
            type Value = DetectorMetadata;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("tool metadata")
            }
            fn visit_map<A: MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<DetectorMetadata, A::Error> {
                let mut out = Map::new();
                let mut hash = None;
                let mut commit = None;
                while let Some(key) = map.next_key::<String>()? {
                    match key.as_str() {
                        "output" => {
                            let note = map.next_value::<OutputNote>()?;
                            (hash, commit) = (note.hash, note.commit);
                        }
                        "exit" | "diff" | "total_lines" | "lines_read" | "filediff" | "files" => {
                            let value: Value = map.next_value()?;
                            if let Some(kept) = keep(&key, value) {
                                out.insert(key, kept);
                            }
                        }
                        _ => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                Ok(DetectorMetadata(out, hash, commit))
            }
            fn visit_unit<E: de::Error>(self) -> Result<DetectorMetadata, E> {
                Ok(DetectorMetadata::default())
            }
            fn visit_none<E: de::Error>(self) -> Result<DetectorMetadata, E> {
                Ok(DetectorMetadata::default())
            }
        }
        deserializer.deserialize_any(MetaVisitor)
    }
}

impl LiteMessage {
    /// Whether the message is final: a user message, or an assistant step that completed or
    /// failed, with every tool part finished. Later reads cannot change what it contributes.
    pub fn is_settled(&self) -> bool {
        let info_done = match self.info.role.as_deref() {
            Some("assistant") => {
                self.info.error.is_some() || self.info.time.is_some_and(|t| t.completed.is_some())
            }
            _ => true,
        };
        info_done
            && self.parts.iter().all(|p| {
                p.state
                    .as_ref()
                    .is_some_and(|s| s.status == "completed" || s.status == "error")
            })
    }

    /// The agent of an assistant message.
    pub fn agent(&self) -> Option<&str> {
        if self.info.role.as_deref() != Some("assistant") {
            return None;
        }
        self.info.agent.as_deref().or(self.info.mode.as_deref())
    }

    /// The calls of the message's tool parts, in part order.
    pub fn calls(&self) -> impl Iterator<Item = Call> + '_ {
        self.parts.iter().filter_map(lite_call)
    }
}

impl LitePart {
    /// The part's call, if it is a tool part with a state.
    pub fn call(&self) -> Option<Call> {
        lite_call(self)
    }
}

fn lite_call(part: &LitePart) -> Option<Call> {
    let state = part.state.as_ref()?;
    let DetectorMetadata(mut metadata, metadata_output, metadata_commit) =
        state.metadata.as_deref().cloned().unwrap_or_default();
    if !metadata.contains_key("total_lines")
        && let Some(total) = state.output.as_ref().and_then(|o| o.total_lines)
    {
        metadata.insert("total_lines".to_owned(), Value::from(total));
    }
    let tool = part.tool.clone()?;
    // A commit the output shows lands, whatever the exit (`git commit && pytest` failing),
    // unless the session landed it already: its hash is kept.
    let commit = match &state.output {
        Some(output) if output.hash.is_some() => output.commit.as_deref(),
        _ => metadata_commit.as_deref(),
    };
    if let Some(commit) = commit.filter(|_| tool == "bash") {
        metadata.insert(COMMITTED_KEY.to_owned(), Value::from(commit));
    }
    Some(Call {
        tool,
        input: match state.input.as_ref().map(Input::value) {
            Some(v @ Value::Object(_)) => v,
            _ => Value::Object(Map::new()),
        },
        status: match CallStatus::from_text(&state.status) {
            CallStatus::Error if state.refused => CallStatus::Blocked,
            status => status,
        },
        metadata: if metadata.is_empty() {
            Value::Null
        } else {
            Value::Object(metadata)
        },
        time: state.time.map(|t| CallTime {
            start: t.start,
            end: t.end,
        }),
        output_hash: state
            .output
            .as_ref()
            .and_then(|o| o.hash.clone())
            .or(metadata_output),
    })
}

/// What a session's assistant messages say about its model and spending, accumulated message by
/// message in order: the latest model and provider, and the cost since the session last landed
/// (the messages after the one whose calls landed; all of them before any landing).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Spend {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    /// `None` until an assistant message reports a cost.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_since_landed_usd: Option<f64>,
}

impl Spend {
    /// Take one settled message; `landed`: one of its calls landed (the count starts again after
    /// it). A cost that is not a finite, non-negative number is ignored.
    pub fn observe(&mut self, message: &LiteMessage, landed: bool) {
        let info = &message.info;
        if info.role.as_deref() == Some("assistant") {
            if let Some(model) = info.model_id.as_deref().filter(|m| !m.is_empty()) {
                self.model_id = Some(model.to_owned());
                self.provider = info.provider_id.clone().filter(|p| !p.is_empty());
            }
            if let Some(cost) = info.cost.filter(|c| c.is_finite() && *c >= 0.0) {
                self.cost_since_landed_usd = Some(self.cost_since_landed_usd.unwrap_or(0.0) + cost);
            }
        }
        if landed {
            self.cost_since_landed_usd = self.cost_since_landed_usd.map(|_| 0.0);
        }
    }
}

impl Spend {
    /// The spend of a session known in full: the latest assistant message's model and provider,
    /// and the cost of the assistant messages created after `landed_at_ms` (the end of its latest
    /// landed call; all of them when it never landed), as [`Spend::observe`] counts it message by
    /// message.
    pub fn of_messages(infos: &[LiteInfo], landed_at_ms: Option<i64>) -> Self {
        let mut spend = Self::default();
        for info in infos {
            let after = match (landed_at_ms, info.time.and_then(|t| t.created)) {
                (Some(landed), Some(created)) => created > landed,
                (Some(_), None) => false,
                (None, _) => true,
            };
            let counted = LiteInfo {
                cost: if after {
                    info.cost
                } else {
                    info.cost.map(|_| 0.0)
                },
                ..info.clone()
            };
            spend.observe(
                &LiteMessage {
                    info: counted,
                    parts: Vec::new(),
                },
                false,
            );
        }
        spend
    }
}

/// Most messages one answer may hold (a page is asked for [`crate::http::MESSAGE_PAGE`]; a
/// server that ignores the page size answers with a whole session, and none has this many).
pub const MAX_PAGE_MESSAGES: usize = 10_000;

/// Most tool calls one answer may hold, over all its messages.
pub const MAX_PAGE_CALLS: usize = 100_000;

/// Parse a `/session/:id/message` answer: at most [`MAX_PAGE_MESSAGES`] messages and
/// [`MAX_PAGE_CALLS`] tool calls, else an error (`more than N … in one answer (the limit)`).
pub fn parse_messages(text: &str) -> Result<Vec<LiteMessage>, serde_json::Error> {
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let messages = deserializer.deserialize_seq(Page)?;
    deserializer.end()?;
    Ok(messages)
}

/// [`parse_messages`] from a reader, as the answer arrives (buffer it: serde_json reads byte
/// by byte): only what the lean structs keep is held, each message judged against the bounds
/// as it is read.
pub fn read_messages(reader: impl std::io::Read) -> Result<Vec<LiteMessage>, serde_json::Error> {
    let mut deserializer = serde_json::Deserializer::from_reader(reader);
    let messages = deserializer.deserialize_seq(Page)?;
    deserializer.end()?;
    Ok(messages)
}

/// The visitor of a page of messages, within [`MAX_PAGE_MESSAGES`] and [`MAX_PAGE_CALLS`].
struct Page;

impl<'de> Visitor<'de> for Page {
    type Value = Vec<LiteMessage>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a list of messages")
    }

    fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut messages = Vec::new();
        let mut calls = 0usize;
        while let Some(message) = seq.next_element::<LiteMessage>()? {
            calls += message.parts.len();
            let over = if messages.len() >= MAX_PAGE_MESSAGES {
                Some((MAX_PAGE_MESSAGES, "messages"))
            } else {
                (calls > MAX_PAGE_CALLS).then_some((MAX_PAGE_CALLS, "tool calls"))
            };
            if let Some((limit, what)) = over {
                return Err(de::Error::custom(format!(
                    "{TOO_MANY}{limit} {what} in one answer (the limit)"
                )));
            }
            messages.push(message);
        }
        Ok(messages)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tool part refused by a plugin's `tool.execute.before` throw, as opencode 1.18.33
    /// keeps it (`hooks.md`, "Records"): `state.status: "error"`, the message verbatim as
    /// `state.error`. Only agentwatch's own (it begins `agentwatch:`) is `blocked`, in the
    /// lean reader (HTTP pages, the event stream) and the export / database reader alike.
    #[test]
    fn agentwatchs_own_refusals_are_blocked_and_no_other() {
        let own = serde_json::json!("agentwatch: you have run this exact bash call 6 times");
        for (what, status, error, want) in [
            (
                "agentwatch's refusal",
                "error",
                own.clone(),
                CallStatus::Blocked,
            ),
            (
                "another plugin's refusal",
                "error",
                serde_json::json!("AGENTWATCH-LOOP: you have run this 6 times"),
                CallStatus::Error,
            ),
            (
                "an error that is not a text",
                "error",
                serde_json::json!({"message": "agentwatch: x"}),
                CallStatus::Error,
            ),
            ("no error text", "error", Value::Null, CallStatus::Error),
            ("not an error", "completed", own, CallStatus::Completed),
        ] {
            let part = serde_json::json!({"type": "tool", "tool": "bash", "callID": "toolu_1",
                "state": {"status": status, "input": {"command": "python3 -c 1"}, "error": error}});
            let page = serde_json::json!([{"info": {"id": "msg_1"}, "parts": [part]}]);
            let messages = read_messages(page.to_string().as_bytes()).unwrap();
            let lean = messages[0].calls().next().unwrap();
            assert_eq!(lean.status, want, "{what}: the lean reader");
            let export = crate::call_from_part(&part).unwrap();
            assert_eq!(export.status, want, "{what}: the export reader");
        }
    }

    /// A tool input over the limit is not built: it stands as its size and hash, the same for
    /// the same text; one within it is read as it is.
    #[test]
    fn an_oversized_input_stands_as_its_hash() {
        let page = |input: &str| {
            format!(
                r#"[{{"info": {{"id": "msg_1"}}, "parts": [{{"type": "tool", "tool": "bash",
                    "state": {{"status": "completed", "input": {input}}}}}]}}]"#
            )
        };
        let huge = format!(r#"{{"a": [{}1]}}"#, "1,".repeat(MAX_INPUT_BYTES));
        let read = |input: &str| {
            let text = page(input);
            let messages = read_messages(text.as_bytes()).unwrap();
            messages[0].parts[0]
                .state
                .as_ref()
                .unwrap()
                .input
                .as_ref()
                .map(Input::value)
        };
        let stand_in = read(&huge).unwrap();
        assert_eq!(stand_in["oversized_input"]["bytes"], huge.len());
        assert_eq!(read(&huge), Some(stand_in));
        assert_eq!(
            read(r#"{"command": "ls"}"#),
            Some(serde_json::json!({"command": "ls"}))
        );
        assert!(read_messages(page(&huge[..huge.len() - 2]).as_bytes()).is_err());
    }

    /// Each row: role, modelID, providerID, cost, landed; then the spend after it.
    #[test]
    fn spend_follows_the_assistant_messages_and_restarts_at_a_landing() {
        type Row<'a> = (&'a str, Option<&'a str>, Option<&'a str>, Option<f64>, bool);
        type Want<'a> = (Option<&'a str>, Option<&'a str>, Option<f64>);
        let rows: [(Row<'_>, Want<'_>); 7] = [
            (
                ("user", Some("m-user"), Some("p"), Some(9.0), false),
                (None, None, None),
            ),
            (
                ("assistant", Some("m1"), Some("p1"), Some(0.5), false),
                (Some("m1"), Some("p1"), Some(0.5)),
            ),
            (
                ("assistant", Some("m2"), Some("p2"), Some(0.25), false),
                (Some("m2"), Some("p2"), Some(0.75)),
            ),
            (
                ("assistant", None, None, Some(0.125), true),
                (Some("m2"), Some("p2"), Some(0.0)),
            ),
            (
                ("assistant", Some("m2"), Some("p2"), Some(f64::NAN), false),
                (Some("m2"), Some("p2"), Some(0.0)),
            ),
            (
                ("assistant", Some("m2"), Some("p2"), Some(-1.0), false),
                (Some("m2"), Some("p2"), Some(0.0)),
            ),
            (
                ("assistant", Some("m3"), None, Some(0.0625), false),
                (Some("m3"), None, Some(0.0625)),
            ),
        ];
        let mut spend = Spend::default();
        for ((role, model, provider, cost, landed), want) in rows {
            let message = LiteMessage {
                info: LiteInfo {
                    id: "msg".into(),
                    role: Some(role.into()),
                    agent: None,
                    mode: None,
                    time: None,
                    error: None,
                    model_id: model.map(str::to_owned),
                    provider_id: provider.map(str::to_owned),
                    cost,
                },
                parts: Vec::new(),
            };
            spend.observe(&message, landed);
            assert_eq!(
                (
                    spend.model_id.as_deref(),
                    spend.provider.as_deref(),
                    spend.cost_since_landed_usd
                ),
                want,
                "{role} {model:?} {cost:?} {landed}"
            );
        }
    }

    /// Each row: costs of three assistant messages created at 1, 2, 3; the landing; the cost.
    #[test]
    fn spend_of_whole_messages_counts_after_the_landing() {
        let rows = [
            ([Some(1.0), Some(2.0), Some(4.0)], None, Some(7.0)),
            ([Some(1.0), Some(2.0), Some(4.0)], Some(2), Some(4.0)),
            ([Some(1.0), Some(2.0), Some(4.0)], Some(3), Some(0.0)),
            ([None, None, None], Some(1), None),
            ([Some(1.0), None, None], Some(1), Some(0.0)),
        ];
        for (costs, landed, want) in rows {
            let infos: Vec<LiteInfo> = costs
                .iter()
                .zip(1..)
                .map(|(cost, created)| LiteInfo {
                    id: format!("msg_{created}"),
                    role: Some("assistant".into()),
                    agent: None,
                    mode: None,
                    time: Some(LiteMessageTime {
                        created: Some(created),
                        completed: Some(created),
                    }),
                    error: None,
                    model_id: Some("m".into()),
                    provider_id: Some("p".into()),
                    cost: *cost,
                })
                .collect();
            let spend = Spend::of_messages(&infos, landed);
            assert_eq!(spend.cost_since_landed_usd, want, "{costs:?} {landed:?}");
            assert_eq!(spend.model_id.as_deref(), Some("m"));
        }
    }

    #[test]
    fn model_provider_and_cost_are_read_from_the_reference_shape() {
        let text = r#"[{"info": {"id": "msg_a", "role": "assistant", "time": {"created": 1, "completed": 2},
            "parentID": "msg_u", "modelID": "claude-sonnet-4-5", "providerID": "anthropic", "mode": "build",
            "agent": "build", "path": {"cwd": "/p", "root": "/p"}, "cost": 0.0123,
            "tokens": {"input": 10, "output": 5, "reasoning": 0, "cache": {"read": 0, "write": 0}}, "finish": "stop"},
            "parts": []}]"#;
        let messages = parse_messages(text).unwrap();
        let info = &messages[0].info;
        assert_eq!(info.model_id.as_deref(), Some("claude-sonnet-4-5"));
        assert_eq!(info.provider_id.as_deref(), Some("anthropic"));
        assert_eq!(info.cost, Some(0.0123));
    }

    #[test]
    fn keeps_what_the_detector_reads_and_nothing_else() {
        let text = r#"[{"info": {"id": "msg_1", "role": "assistant", "agent": "build", "time": {"created": 1, "completed": 2}},
          "parts": [{"type": "step-start"},
                    {"type": "tool", "tool": "bash", "callID": "c", "state": {"status": "completed",
                      "input": {"command": "ls"}, "output": "a\nb", "title": "ls",
                      "metadata": {"output": "a\nb", "exit": 0, "truncated": false}, "time": {"start": 5, "end": 6}}},
                    {"type": "tool", "tool": "read", "state": {"status": "completed", "input": {"filePath": "/a"},
                      "output": "1: x\n(End of file - total 212 lines)", "metadata": {"preview": "x", "loaded": []}}},
                    {"type": "tool", "tool": "edit", "state": {"status": "completed", "input": {"filePath": "/a"},
                      "metadata": {"diff": "@@", "filediff": {"file": "/a", "patch": "@@", "additions": 1, "deletions": 2}, "diagnostics": {}}}}]}]"#;
        let messages = parse_messages(text).unwrap();
        assert!(messages[0].is_settled());
        assert_eq!(messages[0].agent(), Some("build"));
        let calls: Vec<Call> = messages[0].calls().collect();
        assert_eq!(calls.len(), 3);
        assert_eq!(calls[0].metadata, serde_json::json!({"exit": 0}));
        assert_eq!(
            calls[0].time,
            Some(CallTime {
                start: Some(5),
                end: Some(6)
            })
        );
        assert_eq!(calls[1].metadata, serde_json::json!({"total_lines": 212}));
        assert_eq!(
            calls[2].metadata,
            serde_json::json!({"diff": "@@", "filediff": {"additions": 1, "deletions": 2}})
        );
        // Outputs are hashed, never kept; a part without an output has no hash.
        assert_eq!(calls[0].output_hash, Some(output_hash("a\nb")));
        assert_eq!(
            calls[1].output_hash,
            Some(output_hash("1: x\n(End of file - total 212 lines)"))
        );
        assert_eq!(calls[2].output_hash, None);
    }

    #[test]
    fn a_user_run_shell_part_is_hashed_from_metadata_output() {
        // `POST /session/:id/shell` parts carry their output in metadata only.
        let text = r#"[{"info": {"id": "m", "role": "assistant", "time": {"created": 1, "completed": 2}},
          "parts": [{"type": "tool", "tool": "bash", "state": {"status": "completed",
                      "input": {"command": "ls"}, "metadata": {"output": "x\ny", "exit": 0}}}]}]"#;
        let messages = parse_messages(text).unwrap();
        let lite: Vec<Call> = messages[0].calls().collect();
        assert_eq!(lite[0].output_hash, Some(output_hash("x\ny")));
        let value: Value = serde_json::from_str(text).unwrap();
        let full = crate::call_from_part(&value[0]["parts"][0]).unwrap();
        assert_eq!(full.output_hash, lite[0].output_hash);
        assert_eq!(full.metadata["exit"], 0);
    }

    /// A commit the output shows is kept as `metadata.committed`, by both readers, from the
    /// output or a user-run shell part's `metadata.output` (which records no exit).
    #[test]
    fn a_commit_in_the_output_is_kept() {
        let text = r#"[{"info": {"id": "m", "role": "assistant", "time": {"created": 1, "completed": 2}},
          "parts": [{"type": "tool", "tool": "bash", "state": {"status": "completed",
                      "input": {"command": "git commit -qm x && pytest"}, "output": "[main 4e1f0a2] x\n 1 file changed\n1 failed",
                      "metadata": {"exit": 1}}},
                    {"type": "tool", "tool": "bash", "state": {"status": "completed",
                      "input": {"command": "git commit -qm y"}, "metadata": {"output": "[main 9b7c3d1] y"}}},
                    {"type": "tool", "tool": "read", "state": {"status": "completed",
                      "input": {"filePath": "/a"}, "output": "[main 4e1f0a2] x"}}]}]"#;
        let messages = parse_messages(text).unwrap();
        let lite: Vec<Call> = messages[0].calls().collect();
        let value: Value = serde_json::from_str(text).unwrap();
        let full: Vec<Call> = (0..3)
            .map(|i| crate::call_from_part(&value[0]["parts"][i]).unwrap())
            .collect();
        assert_eq!(
            lite[0].metadata,
            serde_json::json!({"exit": 1, "committed": "4e1f0a2"})
        );
        assert_eq!(
            lite[1].metadata,
            serde_json::json!({"committed": "9b7c3d1"})
        );
        assert_eq!(lite[2].metadata, Value::Null);
        for (l, f) in lite.iter().zip(&full) {
            assert_eq!(l.output_hash, f.output_hash);
            assert_eq!(l.metadata.get("committed"), f.metadata.get("committed"));
        }
    }

    #[test]
    fn unfinished_steps_are_not_settled() {
        let running = r#"[{"info": {"id": "m", "role": "assistant", "time": {"created": 1, "completed": 2}},
            "parts": [{"type": "tool", "tool": "bash", "state": {"status": "running", "input": {}}}]}]"#;
        assert!(!parse_messages(running).unwrap()[0].is_settled());
        let streaming =
            r#"[{"info": {"id": "m", "role": "assistant", "time": {"created": 1}}, "parts": []}]"#;
        assert!(!parse_messages(streaming).unwrap()[0].is_settled());
        let failed = r#"[{"info": {"id": "m", "role": "assistant", "time": {"created": 1}, "error": {"name": "x"}}, "parts": []}]"#;
        assert!(parse_messages(failed).unwrap()[0].is_settled());
    }
}
