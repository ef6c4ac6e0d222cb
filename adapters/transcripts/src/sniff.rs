//! Which agent wrote a transcript, from its first records ([`identify`]).
//!
//! Each agent may begin a file with any record type it writes: Claude Code an interactive
//! session's `file-history-snapshot` (no session id, only a `messageId`), a `summary`, a
//! `queue-operation`, `progress`, `system` or a user message; Codex its `session_meta`, a
//! bare-era first line or a bare item; Gemini its metadata line, a history edit (`$set`,
//! `$rewindTo`) or a message. So the decision is made on the first record that says which
//! agent wrote it, among the first [`SNIFF_LINES`] non-blank lines: a line that is not JSON
//! (a torn first line) or a record no agent is known by (a type none of them writes, an
//! empty object) is passed over. The three claims are disjoint: no record is two agents'.
//!
//! A whole JSON document (the older Gemini `session-*.json`, pretty-printed) is told by its
//! top-level keys as far as the bytes go, never by the lines inside it.

use crate::lenient::{Obj, Text};
use serde::Deserialize;
use serde::de::{Deserializer, IgnoredAny, MapAccess, Visitor};
use std::fmt;

/// Lines of a file looked at, at most, to tell its agent.
pub const SNIFF_LINES: usize = 64;

/// The agents whose transcripts this crate reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TranscriptAgent {
    Claude,
    Codex,
    Gemini,
}

impl TranscriptAgent {
    /// Every agent, in the order their readers are tried.
    pub const ALL: [TranscriptAgent; 3] = [Self::Claude, Self::Codex, Self::Gemini];

    /// The agent's name for a person.
    pub fn display_name(self) -> &'static str {
        match self {
            Self::Claude => "Claude Code",
            Self::Codex => "Codex CLI",
            Self::Gemini => "Gemini CLI",
        }
    }

    /// What its files are called, for errors (`a Codex CLI rollout`).
    pub fn file_noun(self) -> &'static str {
        match self {
            Self::Claude => "a Claude Code transcript",
            Self::Codex => "a Codex CLI rollout",
            Self::Gemini => "a Gemini CLI session",
        }
    }
}

impl fmt::Display for TranscriptAgent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.display_name())
    }
}

/// Claude Code's record types besides `user` and `assistant` (`agents.md` §1.3, §7): a
/// record of one of these types is Claude Code's whatever else it carries (an interactive
/// session's first `file-history-snapshot` has no session id).
pub const CLAUDE_RECORD_TYPES: &[&str] = &[
    "summary",
    "ai-title",
    "custom-title",
    "last-prompt",
    "progress",
    "system",
    "file-history-snapshot",
    "queue-operation",
    "attachment",
    "api-request",
    "api-request-shape",
    "api-request-blob",
    "atis-latch",
    "tools-used",
    "cost-state",
];

/// Codex's bare-era items (a line that is the item itself, before the envelope).
pub const CODEX_BARE_ITEMS: &[&str] = &[
    "message",
    "reasoning",
    "function_call",
    "function_call_output",
    "custom_tool_call",
    "custom_tool_call_output",
    "local_shell_call",
    "web_search_call",
];

/// Gemini's message types (`chatRecordingTypes.ts`; `model` in some third-party readers).
pub const GEMINI_MESSAGE_TYPES: &[&str] = &["user", "gemini", "model", "info", "error", "warning"];

/// What a line shows of itself, enough to tell whose record it is; everything else is
/// skipped unbuilt.
#[derive(Deserialize, Default)]
#[serde(default)]
struct Probe<'a> {
    #[serde(rename = "type", borrow)]
    kind: Text<'a>,
    payload: Obj<IgnoredAny>,
    #[serde(borrow)]
    id: Text<'a>,
    #[serde(borrow)]
    timestamp: Text<'a>,
    instructions: Option<IgnoredAny>,
    git: Obj<IgnoredAny>,
    #[serde(borrow)]
    record_type: Text<'a>,
    #[serde(rename = "sessionId")]
    session_id: Option<IgnoredAny>,
    uuid: Option<IgnoredAny>,
    #[serde(rename = "leafUuid")]
    leaf_uuid: Option<IgnoredAny>,
    #[serde(rename = "messageId")]
    message_id: Option<IgnoredAny>,
    message: Option<IgnoredAny>,
    #[serde(rename = "projectHash")]
    project_hash: Option<IgnoredAny>,
    #[serde(rename = "startTime")]
    start_time: Option<IgnoredAny>,
    messages: Option<IgnoredAny>,
    #[serde(rename = "$set")]
    set: Obj<IgnoredAny>,
    #[serde(rename = "$rewindTo", borrow)]
    rewind_to: Text<'a>,
}

impl Probe<'_> {
    fn agent(&self) -> Option<TranscriptAgent> {
        [
            (TranscriptAgent::Claude, self.is_claude()),
            (TranscriptAgent::Codex, self.is_codex()),
            (TranscriptAgent::Gemini, self.is_gemini()),
        ]
        .into_iter()
        .find_map(|(agent, yes)| yes.then_some(agent))
    }

    /// A string `type` and no `payload`, and a Claude-only type or one of its ids.
    fn is_claude(&self) -> bool {
        let Some(kind) = self.kind.as_str() else {
            return false;
        };
        let ids = self.session_id.is_some()
            || self.uuid.is_some()
            || self.leaf_uuid.is_some()
            || self.message_id.is_some();
        self.payload.0.is_none() && (ids || CLAUDE_RECORD_TYPES.contains(&kind))
    }

    /// The envelope, a bare-era first line (`id` and `timestamp`, `instructions` or `git`,
    /// no `type`), a bare item, or a bare-era state marker; never with a Claude id.
    fn is_codex(&self) -> bool {
        let foreign = self.session_id.is_some() || self.uuid.is_some();
        let kind = self.kind.as_str();
        let envelope = kind.is_some() && self.payload.0.is_some();
        let first_line = kind.is_none()
            && self.id.as_str().is_some()
            && (self.timestamp.as_str().is_some()
                || self.instructions.is_some()
                || self.git.0.is_some());
        let bare_item = kind.is_some_and(|k| CODEX_BARE_ITEMS.contains(&k));
        let marker = kind.is_none() && self.record_type.as_str().is_some();
        !foreign && (envelope || first_line || bare_item || marker)
    }

    /// The metadata line (`sessionId` with `projectHash`, `startTime` or `messages`, no
    /// `type`), a history edit, or a message (`id` and a Gemini message type, none of
    /// Claude's fields).
    fn is_gemini(&self) -> bool {
        let kind = self.kind.as_str();
        let metadata = kind.is_none()
            && self.session_id.is_some()
            && (self.project_hash.is_some()
                || self.start_time.is_some()
                || self.messages.is_some());
        let edit = self.set.0.is_some() || self.rewind_to.as_str().is_some();
        let message = self.id.as_str().is_some()
            && kind.is_some_and(|k| GEMINI_MESSAGE_TYPES.contains(&k))
            && self.session_id.is_none()
            && self.uuid.is_none()
            && self.message.is_none()
            && self.payload.0.is_none();
        metadata || edit || message
    }
}

/// The agent one line (without its newline) says wrote it, if any.
pub fn identify_line(line: &[u8]) -> Option<TranscriptAgent> {
    if !crate::common::may_be_object(line) {
        return None;
    }
    match serde_json::from_slice::<Obj<Probe<'_>>>(line) {
        Ok(Obj(Some(probe))) => probe.agent(),
        _ => None,
    }
}

/// The agent that wrote `bytes` (a whole file, or its first lines): the first of its first
/// [`SNIFF_LINES`] non-blank lines that says, else, for one JSON document spread over lines,
/// its top-level keys; else why none does.
pub fn identify(bytes: &[u8]) -> Result<TranscriptAgent, String> {
    let first = match by_lines(bytes) {
        Lines::Empty => return Err("it is empty".to_owned()),
        Lines::Agent(agent) => return Ok(agent),
        Lines::Unknown(first) => first,
    };
    match document_keys(bytes, first) {
        Some(keys) => document_agent(&keys).ok_or_else(|| {
            format!(
                "it is one JSON document (keys {}) of no agent's transcript",
                keys.join(", ")
            )
        }),
        None => Err(format!(
            "none of its first {SNIFF_LINES} lines is a record of Claude Code, Codex CLI or \
             Gemini CLI"
        )),
    }
}

/// What the first lines of a file say ([`identify`]).
enum Lines<'a> {
    /// No line that is not blank.
    Empty,
    /// The first of the first [`SNIFF_LINES`] that says.
    Agent(TranscriptAgent),
    /// None says; the first line that is not blank.
    Unknown(&'a [u8]),
}

fn by_lines(bytes: &[u8]) -> Lines<'_> {
    let mut lines = bytes
        .split(|b| *b == b'\n')
        .filter(|l| !l.iter().all(u8::is_ascii_whitespace))
        .peekable();
    let Some(first) = lines.peek().copied() else {
        return Lines::Empty;
    };
    match lines.take(SNIFF_LINES).find_map(identify_line) {
        Some(agent) => Lines::Agent(agent),
        None => Lines::Unknown(first),
    }
}

/// [`identify`]'s agent, without the reason when there is none: for a caller that only asks
/// whether a document is a transcript (`detect` on a session file). The same answer for less
/// work: only Gemini writes one document, told by its key `sessionId`, so bytes that cannot
/// spell that key (neither the word nor a `\u` escape is in them) are not read through for
/// their keys (on a 227 MB session file that read was 10% of `detect` on 100 000 calls, none of
/// it in parallel).
pub fn transcript_agent(bytes: &[u8]) -> Option<TranscriptAgent> {
    match by_lines(bytes) {
        Lines::Empty => None,
        Lines::Agent(agent) => Some(agent),
        Lines::Unknown(_)
            if memchr::memmem::find(bytes, b"sessionId").is_none()
                && memchr::memmem::find(bytes, b"\\u").is_none() =>
        {
            None
        }
        Lines::Unknown(first) => document_keys(bytes, first).and_then(|k| document_agent(&k)),
    }
}

/// The top-level keys of a JSON document whose first line is not a whole JSON value (a
/// pretty-printed object), as far as `bytes` go: `None` when its first line is whole, or when
/// not one key and its value read.
fn document_keys(bytes: &[u8], first: &[u8]) -> Option<Vec<String>> {
    let opens = first.trim_ascii().first() == Some(&b'{');
    if !opens || serde_json::from_slice::<IgnoredAny>(first).is_ok() {
        return None;
    }
    let mut keys = Vec::new();
    // The bytes may stop inside the document: the keys read until then are what counts.
    let _ = serde_json::Deserializer::from_slice(bytes).deserialize_map(TopKeys(&mut keys));
    (!keys.is_empty()).then_some(keys)
}

/// The agent whose whole-file document has these top-level keys: only Gemini writes one
/// (before 0.39, `{sessionId, projectHash, startTime, lastUpdated, messages}`).
fn document_agent(keys: &[String]) -> Option<TranscriptAgent> {
    let has = |key: &str| keys.iter().any(|k| k == key);
    let gemini = has("sessionId")
        && (has("projectHash") || has("startTime") || has("messages"))
        && !has("type")
        && !has("payload");
    gemini.then_some(TranscriptAgent::Gemini)
}

/// `Ok` when `bytes` are `agent`'s ([`identify`]), else why not (another agent's, or none).
pub(crate) fn expect(bytes: &[u8], agent: TranscriptAgent) -> Result<(), String> {
    match identify(bytes)? {
        found if found == agent => Ok(()),
        other => Err(format!("it is {}", other.file_noun())),
    }
}

/// Collects an object's keys whose values read whole, at most 32.
struct TopKeys<'k>(&'k mut Vec<String>);

impl<'de> Visitor<'de> for TopKeys<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(key) = map.next_key::<String>()? {
            map.next_value::<IgnoredAny>()?;
            self.0.push(key);
            if self.0.len() >= 32 {
                break;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use TranscriptAgent::{Claude, Codex, Gemini};

    /// One row per record type each agent may write first, as the real agents write them
    /// (`agents.md`; the versions it covers: Claude Code 1.0.x to 2.1.x, Codex 0.1xx,
    /// Gemini 0.4x-0.6x), each followed by a line of the same agent that would decide too.
    #[test]
    fn each_first_record_type_tells_its_agent() {
        let rows: &[(&str, TranscriptAgent, &str)] = &[
            (
                "claude: file-history-snapshot (interactive 2.1.x)",
                Claude,
                r#"{"type":"file-history-snapshot","messageId":"5c1e0d3a-1f8b-4b5e-9d7e-2a6c0f4b8e11","snapshot":{"messageId":"5c1e0d3a-1f8b-4b5e-9d7e-2a6c0f4b8e11","trackedFileBackups":{},"timestamp":"2026-02-12T16:01:02.000Z"},"isSnapshotUpdate":false}"#,
            ),
            (
                "claude: summary (1.0.x, 2.0.x)",
                Claude,
                r#"{"type":"summary","summary":"Fix the failing check","leafUuid":"0bf0c2d4-0000-4000-8000-000000000001"}"#,
            ),
            (
                "claude: queue-operation (2.1.x)",
                Claude,
                r#"{"type":"queue-operation","operation":"enqueue","timestamp":"2026-12-06T00:28:01.000Z","sessionId":"4d56a0c2-0000-4000-8000-000000000001","content":"go"}"#,
            ),
            (
                "claude: progress hook_progress (2.1.x)",
                Claude,
                r#"{"parentUuid":null,"isSidechain":false,"userType":"external","cwd":"/home/u/p","sessionId":"s1","version":"2.1.39","gitBranch":"main","type":"progress","data":{"type":"hook_progress","hookEvent":"SessionStart","hookName":"SessionStart:startup","command":"x"},"parentToolUseID":"t","toolUseID":"t","timestamp":"2026-02-12T16:01:02.000Z","uuid":"u1"}"#,
            ),
            (
                "claude: progress without ids",
                Claude,
                r#"{"type":"progress","data":{"type":"hook_progress"}}"#,
            ),
            (
                "claude: system compact_boundary",
                Claude,
                r#"{"parentUuid":null,"logicalParentUuid":"u0","isSidechain":false,"type":"system","subtype":"compact_boundary","content":"Conversation compacted","isMeta":false,"timestamp":"2026-02-12T16:01:02.000Z","uuid":"u2","level":"info","compactMetadata":{"trigger":"auto","preTokens":155000},"sessionId":"s1","version":"2.1.39"}"#,
            ),
            (
                "claude: attachment (2.1.328)",
                Claude,
                r#"{"type":"attachment","attachment":{"type":"hook_stopped_continuation"}}"#,
            ),
            (
                "claude: a user message (1.0.x)",
                Claude,
                r#"{"parentUuid":null,"isSidechain":false,"userType":"external","cwd":"/p","sessionId":"s1","version":"1.0.51","type":"user","message":{"role":"user","content":"go"},"uuid":"u1","timestamp":"2025-07-01T10:00:00.000Z"}"#,
            ),
            (
                "codex: session_meta (wrapped)",
                Codex,
                r#"{"timestamp":"2026-02-23T11:48:00.000Z","type":"session_meta","payload":{"id":"01a2516e-0000-7000-8000-000000000001","timestamp":"2026-02-23T11:48:00.000Z","cwd":"/p","originator":"codex_cli_rs","cli_version":"0.104.0"}}"#,
            ),
            (
                "codex: a bare-era first line",
                Codex,
                r#"{"id":"44444444-4444-4444-8444-444444444444","timestamp":"2025-08-01T10:00:00.000Z","instructions":null,"git":{"branch":"dev"}}"#,
            ),
            (
                "codex: a bare response item",
                Codex,
                r#"{"type":"function_call","name":"shell","arguments":"{\"command\":[\"ls\"]}","call_id":"call_1"}"#,
            ),
            (
                "codex: a bare-era state marker",
                Codex,
                r#"{"record_type":"state"}"#,
            ),
            (
                "codex: a wrapped response item first (a fork)",
                Codex,
                r#"{"timestamp":"t","type":"response_item","payload":{"type":"message","role":"user","content":[]}}"#,
            ),
            (
                "gemini: the metadata line (0.39+)",
                Gemini,
                r#"{"sessionId":"797a7c17-05da-4959-aacf-e71a42e062ea","projectHash":"ab12","startTime":"2026-12-06T02:51:00.000Z","lastUpdated":"2026-12-06T02:51:00.000Z","kind":"main"}"#,
            ),
            (
                "gemini: a $set",
                Gemini,
                r#"{"$set":{"lastUpdated":"2026-12-06T02:51:01.000Z"}}"#,
            ),
            ("gemini: a $rewindTo", Gemini, r#"{"$rewindTo":"m7"}"#),
            (
                "gemini: a user message",
                Gemini,
                r#"{"id":"m1","timestamp":"2026-12-06T02:51:02.000Z","type":"user","content":[{"text":"go"}]}"#,
            ),
            (
                "gemini: a gemini message",
                Gemini,
                r#"{"id":"m2","timestamp":"t","type":"gemini","content":"","model":"gemini-3","toolCalls":[]}"#,
            ),
            (
                "gemini: a whole .json on one line (0.4x-0.38)",
                Gemini,
                r#"{"sessionId":"s","projectHash":"h","startTime":"t","lastUpdated":"t","messages":[]}"#,
            ),
        ];
        for (what, agent, line) in rows {
            assert_eq!(identify_line(line.as_bytes()), Some(*agent), "{what}");
            let claims: Vec<_> = TranscriptAgent::ALL
                .into_iter()
                .filter(|a| identify_line(line.as_bytes()) == Some(*a))
                .collect();
            assert_eq!(claims, [*agent], "{what}: one agent only");
            // Whatever comes before it that says nothing: a torn line, an unknown record.
            let text =
                format!("{{\"type\":\"user\",\"mes\n{{\"type\":\"no-such\"}}\n{{}}\n{line}\n");
            assert_eq!(identify(text.as_bytes()), Ok(*agent), "{what}");
        }
    }

    #[test]
    fn what_no_agent_wrote_says_why() {
        for (bytes, why) in [
            ("", "it is empty"),
            ("\n \n", "it is empty"),
            ("<html>\n", "none of its first 64 lines"),
            (r#"{"a":1}"#, "none of its first 64 lines"),
            (r#"{"type":"user"}"#, "none of its first 64 lines"),
            (r#"{"id":"ses_1","calls":[]}"#, "none of its first 64 lines"),
            (
                "{\n  \"format\": \"agentwatch-sessions/1\",\n  \"sessions\": [\n",
                "one JSON document (keys format)",
            ),
            (
                "{\n  \"info\": {\"id\": \"ses\"},\n  \"messages\": []\n}\n",
                "keys info, messages",
            ),
        ] {
            let err = identify(bytes.as_bytes()).unwrap_err();
            assert!(err.contains(why), "{bytes:?}: {err}");
        }
    }

    #[test]
    fn a_pretty_printed_gemini_document_is_told_by_its_first_keys() {
        let doc = "{\n  \"sessionId\": \"s\",\n  \"projectHash\": \"h\",\n  \"startTime\": \"t\",\n  \"messages\": [\n    {\n      \"id\": \"m1\",\n";
        assert_eq!(identify(doc.as_bytes()), Ok(Gemini));
        let no_id = "{\n  \"projectHash\": \"h\",\n  \"messages\": []\n}\n";
        assert!(identify(no_id.as_bytes()).is_err());
    }

    /// `transcript_agent` is `identify` without the reasons: the same agent for every document,
    /// a key spelled through an escape included.
    #[test]
    fn transcript_agent_answers_as_identify() {
        let escaped =
            "{\n  \"session\\u0049d\": \"s\",\n  \"projectHash\": \"h\",\n  \"messages\": [\n";
        for doc in [
            "",
            "<html>\n",
            r#"{"type":"summary","summary":"s","leafUuid":"u"}"#,
            "{\n  \"format\": \"agentwatch-sessions/1\",\n  \"sessions\": [\n",
            "{\n  \"sessionId\": \"s\",\n  \"projectHash\": \"h\",\n  \"messages\": [\n",
            "{\n  \"projectHash\": \"h\",\n  \"messages\": []\n}\n",
            escaped,
        ] {
            assert_eq!(
                transcript_agent(doc.as_bytes()),
                identify(doc.as_bytes()).ok(),
                "{doc}"
            );
        }
        assert_eq!(transcript_agent(escaped.as_bytes()), Some(Gemini));
    }
}
