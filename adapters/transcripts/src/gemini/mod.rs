//! Gemini CLI sessions (`$GEMINI_CLI_HOME/.gemini/tmp/<project>/chats/session-*.jsonl`, a
//! subagent's `chats/<parent session id>/<id>.jsonl`, the older whole-file `session-*.json`;
//! `agents.md` §3).
//!
//! Gemini does not only append: it re-appends a whole message (same `id`) each time one of
//! its tool calls changes status, `{"$set": {"messages": […]}}` replaces every message (a
//! checkpoint), `{"$rewindTo": id}` drops a message and everything after it, and the older
//! `.json` is rewritten whole. A call and its result are one `toolCalls[]` entry, complete
//! once its status is `success`, `error` or `cancelled`.
//!
//! [`GeminiReader`] keeps the session's history as Gemini would load it (the latest record
//! of each message, in the order messages first appeared) and hands its completed calls in
//! the detector's model ([`tools`] for the mapping).
//!
//! # The contract of [`GeminiReader::take_calls`]
//!
//! The caller feeds a detector with what `take_calls` returns and asks
//! [`GeminiReader::rewound`] after each take:
//!
//! - `rewound() == false`: the calls are those completed since the last take; the calls
//!   handed out before are still the history's first calls, unchanged. Push them.
//! - `rewound() == true`: the history already handed out changed (a rewind, a checkpoint
//!   that differs, a call re-appended with another result, a rewritten `.json`). The calls
//!   are then the *whole* history: reset the detector and push them all.
//!   [`GeminiReader::generation`] counts these rewrites (it is kept with the reader's state).
//!
//! ```
//! # use agentwatch_transcripts::{GeminiFile, GeminiReader};
//! # use detect_core::{DetectConfig, Session, SessionDetector};
//! let config = DetectConfig::default();
//! let session = Session::new("s");
//! let mut detector = SessionDetector::new(&session, &config);
//! let mut reader = GeminiReader::new(GeminiFile::default());
//! reader.push_line(br#"{"$rewindTo":"m1"}"#);
//! let calls = reader.take_calls();
//! if reader.rewound() {
//!     detector = SessionDetector::new(&session, &config);
//! }
//! for call in &calls {
//!     detector.push(call);
//! }
//! ```
//!
//! Gemini's own loop detector may append a "Potential loop detected" message (that a later
//! checkpoint drops): it is kept as [`GeminiMeta::agent_loop_verdict`], the agent's own
//! verdict, for the alert to show.
//!
//! To replay the history after a rewrite, the reader keeps every call of the session (a long
//! string in an input, such as a written file's text, as its length and hash). It never
//! fails: a line that is not JSON is counted and skipped, unknown records and fields are
//! ignored. [`read_gemini_sessions`] reads a whole file; [`sniff`] recognises one.

pub(crate) mod record;
pub mod tools;

use crate::Error;
use crate::common::{
    Counters, Finished, compact_long_strings, count_line, file_lines, may_be_object, prompt_title,
    trimmed_title, unix_ms, with_output_facts, with_refusal,
};
use crate::tail::NewText;
use detect_core::{Call, CallStatus, Session, canonical_json, output_hash, text_hash};
use record::{Record, ToolCall, parse_line};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Messages kept at most; a message past it is dropped (and counted).
pub const MAX_MESSAGES: usize = 200_000;
/// Spawns (subagent calls) remembered in [`GeminiMeta::spawns`].
const MAX_SPAWNS: usize = 4096;
/// Characters of the agent's loop verdict kept.
const VERDICT_CHARS: usize = 400;

/// What a session file's path says of it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GeminiFile {
    /// The session id, when the path gives it whole (a subagent's file name); a main
    /// session's is read from its first line.
    pub session_id: Option<String>,
    /// A subagent's parent session (its directory's name).
    pub parent_session_id: Option<String>,
    /// The project's directory (`tmp/<project>/.project_root`): Gemini writes no `cwd`.
    pub project_root: Option<String>,
}

impl GeminiFile {
    /// What a path (or a name) says: `…/chats/<parent>/<id>.jsonl` is a subagent of
    /// `<parent>`; anything else a main session whose id is in its lines.
    pub fn from_path(path: &str) -> Self {
        let mut parts = path.rsplit('/');
        let name = parts.next().unwrap_or(path);
        let parent = parts.next();
        let chats = parts.next();
        match (chats, parent, name.strip_suffix(".jsonl")) {
            (Some("chats"), Some(parent), Some(id)) if !id.starts_with("session-") => Self {
                session_id: Some(id.to_owned()),
                parent_session_id: Some(parent.to_owned()),
                project_root: None,
            },
            _ => Self::default(),
        }
    }
}

/// Gemini's own verdict that the session loops.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentVerdict {
    /// The message Gemini wrote (`Potential loop detected. Details: …`), shortened.
    pub text: String,
    /// When, unix milliseconds.
    pub at_ms: Option<i64>,
    /// Completed calls in the history when it was written: more since means the session
    /// went on.
    pub calls_before: usize,
}

/// Where a session's title came from, weakest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum GeminiTitleSource {
    Prompt,
    Summary,
}

/// A subagent started by an `invoke_agent` call of this session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GeminiSpawn {
    pub call_id: String,
    /// The subagent's session id (its file under `chats/<this session>/`).
    pub agent_id: String,
    pub agent_name: Option<String>,
}

/// What is known of the session.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GeminiMeta {
    pub session_id: Option<String>,
    pub parent_session_id: Option<String>,
    /// `main` or `subagent`.
    pub kind: Option<String>,
    pub project_hash: Option<String>,
    pub start_time: Option<String>,
    /// The first of the session's `directories`, else the project's directory, else the
    /// workspace the session context names.
    pub cwd: Option<String>,
    pub title: Option<String>,
    pub title_source: Option<GeminiTitleSource>,
    /// `$set.summary`: a main session's summary (also its title), a subagent's answer.
    pub summary: Option<String>,
    /// The model of the latest `gemini` message.
    pub model: Option<String>,
    pub agent_loop_verdict: Option<AgentVerdict>,
    pub spawns: Vec<GeminiSpawn>,
    pub counters: Counters,
    /// Messages in the history now.
    pub messages: usize,
}

/// One `toolCalls[]` entry as read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Entry {
    /// The call as the detector sees it, for comparing histories.
    fingerprint: u64,
    /// `success`, `error` or `cancelled`.
    terminal: bool,
    call: Finished,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Message {
    id: String,
    calls: Vec<Entry>,
}

/// A call Gemini CLI is about to run (a `BeforeTool` hook's `tool_name` and `tool_input`), in
/// the detector's model as the call its session file will hold reads, with status `running`.
pub fn pending_call(name: &str, args: Value) -> Call {
    let mut input = tools::mapped_input(name, args);
    compact_long_strings(&mut input, &["command"]);
    Call::completed(tools::detector_tool(name).into_owned(), input).with_status(CallStatus::Running)
}

/// The incremental reader of one Gemini CLI session file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GeminiReader {
    file: GeminiFile,
    meta: GeminiMeta,
    #[serde(default)]
    messages: Vec<Message>,
    /// The fingerprints of the calls handed out, in order.
    #[serde(default)]
    handed: Vec<u64>,
    #[serde(default)]
    generation: u64,
    #[serde(default)]
    rewound: bool,
    /// A whole-file read ended: calls still running are handed out as such.
    #[serde(default)]
    finished: bool,
    /// The file was read again from its start: the next take hands the whole history.
    #[serde(default)]
    rewrite_next: bool,
    /// Each call's output excerpt kept in its metadata ([`crate::common::excerpt`]): for a
    /// reader whose caller shows what a call returned (the hook's messages).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    excerpts: bool,
}

impl GeminiReader {
    pub fn new(file: GeminiFile) -> Self {
        let meta = GeminiMeta {
            session_id: file.session_id.clone(),
            parent_session_id: file.parent_session_id.clone(),
            cwd: file.project_root.clone(),
            ..GeminiMeta::default()
        };
        Self {
            file,
            meta,
            messages: Vec::new(),
            handed: Vec::new(),
            generation: 0,
            rewound: false,
            finished: false,
            rewrite_next: false,
            excerpts: false,
        }
    }

    /// The same reader keeping each call's output excerpt in its metadata
    /// (`metadata.excerpt`, [`crate::excerpt`]); the detector does not read it.
    #[must_use]
    pub fn with_excerpts(mut self) -> Self {
        self.excerpts = true;
        self
    }

    /// Forget everything read (the file was read again from its start), keeping what its
    /// path says. The next take hands the whole history, as a rewrite ([`Self::rewound`])
    /// when calls had been handed out: a caller may reset its detector at once or on that
    /// answer, alike.
    pub fn reset(&mut self) {
        let mut fresh = Self::new(self.file.clone());
        fresh.generation = self.generation;
        fresh.rewrite_next = !self.handed.is_empty();
        fresh.excerpts = self.excerpts;
        *self = fresh;
    }

    pub fn file(&self) -> &GeminiFile {
        &self.file
    }

    pub fn meta(&self) -> &GeminiMeta {
        &self.meta
    }

    /// Whether the last [`GeminiReader::take_calls`] handed the whole history because what
    /// had been handed out changed: the caller resets its detector first.
    pub fn rewound(&self) -> bool {
        self.rewound
    }

    /// How many times the history handed out was rewritten.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Calls in the history not complete yet.
    pub fn pending_calls(&self) -> usize {
        self.entries().filter(|e| !e.terminal).count()
    }

    /// The calls to push since the last take; see the module's contract for
    /// [`GeminiReader::rewound`].
    pub fn take_calls(&mut self) -> Vec<Call> {
        let finished = self.finished;
        let current: Vec<&Entry> = self.entries().filter(|e| e.terminal || finished).collect();
        let extends = !self.rewrite_next
            && self.handed.len() <= current.len()
            && self
                .handed
                .iter()
                .zip(&current)
                .all(|(h, e)| *h == e.fingerprint);
        let from = if extends { self.handed.len() } else { 0 };
        let calls: Vec<Call> = current[from..]
            .iter()
            .map(|e| Call::from(e.call.clone()))
            .collect();
        let fingerprints: Vec<u64> = current[from..].iter().map(|e| e.fingerprint).collect();
        self.rewound = !extends;
        self.rewrite_next = false;
        if extends {
            self.handed.extend(fingerprints);
        } else {
            self.generation += 1;
            self.handed = fingerprints;
        }
        calls
    }

    /// Push what the tail read: its lines, and the lines it dropped for their length. The
    /// caller resets the reader first when the tail says `restarted`.
    pub fn push_text(&mut self, new: &NewText) {
        self.meta.counters.oversized_lines += new.skipped_lines;
        for line in new.lines() {
            self.push_line(line);
        }
    }

    /// Read one line (without its newline) of a `.jsonl` session. Blank lines are ignored; a
    /// line that is not a JSON object is counted in [`Counters::corrupt_lines`].
    pub fn push_line(&mut self, line: &[u8]) {
        if !count_line(line, &mut self.meta.counters) {
            return;
        }
        let Some(record) = parse_line(line) else {
            self.meta.counters.corrupt_lines += 1;
            return;
        };
        if let Some(set) = &record.set.0 {
            self.read_set(set);
        } else if let Some(id) = record.rewind_to.as_str() {
            self.rewind_to(id);
        } else if record.id.as_str().is_some() {
            self.upsert(&record);
        } else {
            // The first line's metadata (or an older `.json` written on one line, whose
            // `messages` are its history).
            self.read_set(&record);
        }
    }

    /// A whole file's bytes: the older `.json` (one document, [`Self::push_document`]), else
    /// its lines.
    pub fn push_whole(&mut self, bytes: &[u8]) {
        if whole_document(bytes).is_some() {
            self.push_document(bytes);
        } else {
            for line in file_lines(bytes) {
                self.push_line(line);
            }
        }
    }

    /// Read a whole older `.json` session (`{sessionId, …, messages: […]}`), which replaces
    /// whatever was read before; a file that is not a JSON object counts as a corrupt line
    /// and changes nothing.
    pub fn push_document(&mut self, bytes: &[u8]) {
        self.meta.counters.lines += 1;
        let Some(doc) = parse_line(bytes) else {
            self.meta.counters.corrupt_lines += 1;
            return;
        };
        self.read_metadata(&doc);
        self.replace_messages(doc.messages.as_ref().map_or(&[][..], |m| &m.0));
    }

    /// The end of the file was reached for good (a whole-file read): calls still running
    /// are handed out (status `running`, not counted by the detector) and counted as orphans.
    pub fn finish(&mut self) {
        if !self.finished {
            self.meta.counters.orphans += self.pending_calls() as u64;
        }
        self.finished = true;
    }

    /// The session with every call of its history (a whole-file read).
    pub fn take_session(&mut self) -> Session {
        self.handed.clear();
        let calls = self.take_calls();
        self.rewound = false;
        let mut session = Session::new(self.meta.session_id.clone().unwrap_or_default());
        self.describe(&mut session);
        session.calls = calls;
        session
    }

    /// What the history read so far says of the session, set on `session` (what it does not
    /// say is left as it is): its parent, title, working directory, and `subagent` as the
    /// agent of a subagent's session. The whole-file read and the live source describe a
    /// session alike.
    pub fn describe(&self, session: &mut Session) {
        let meta = &self.meta;
        let agent = (meta.kind.as_deref() == Some("subagent")).then(|| "subagent".to_owned());
        let known = [
            (&mut session.parent_id, meta.parent_session_id.clone()),
            (&mut session.title, meta.title.clone()),
            (&mut session.agent, agent),
            (&mut session.directory, meta.cwd.clone()),
        ];
        for (slot, value) in known {
            if value.is_some() {
                *slot = value;
            }
        }
    }

    fn entries(&self) -> impl Iterator<Item = &Entry> {
        self.messages.iter().flat_map(|m| &m.calls)
    }

    fn read_metadata(&mut self, r: &Record<'_>) {
        let meta = &mut self.meta;
        if meta.session_id.is_none() {
            meta.session_id = r.session_id.non_empty();
        }
        if let Some(kind) = r.kind.non_empty() {
            meta.kind = Some(kind);
        }
        if let Some(hash) = r.project_hash.non_empty() {
            meta.project_hash = Some(hash);
        }
        if let Some(start) = r.start_time.non_empty() {
            meta.start_time = Some(start);
        }
        if let Some(dir) = r.directories.0.iter().find_map(|d| d.non_empty()) {
            meta.cwd = Some(dir);
        }
        if let Some(summary) = r
            .summary
            .as_str()
            .and_then(|s| trimmed_title(s, usize::MAX))
        {
            // A subagent's summary is its answer, not a name for it.
            let subagent =
                meta.kind.as_deref() == Some("subagent") || meta.parent_session_id.is_some();
            if !subagent {
                meta.title = Some(summary.clone());
                meta.title_source = Some(GeminiTitleSource::Summary);
            }
            meta.summary = Some(summary);
        }
    }

    fn read_set(&mut self, set: &Record<'_>) {
        self.read_metadata(set);
        if let Some(messages) = &set.messages {
            self.replace_messages(&messages.0);
        }
    }

    /// A checkpoint (or a whole `.json`): every message replaced.
    fn replace_messages(&mut self, messages: &[crate::lenient::Obj<Record<'_>>]) {
        self.messages.clear();
        for message in messages.iter().filter_map(|m| m.0.as_ref()) {
            if message.id.as_str().is_some() {
                self.upsert(message);
            }
        }
        self.meta.messages = self.messages.len();
    }

    fn rewind_to(&mut self, id: &str) {
        if let Some(at) = self.messages.iter().position(|m| m.id == id) {
            self.messages.truncate(at);
            self.meta.messages = self.messages.len();
        }
    }

    /// A message record: replaces the message of its id where it stands, else is appended.
    fn upsert(&mut self, r: &Record<'_>) {
        let id = r.id.as_str().unwrap_or_default();
        let start = r.timestamp.as_str().and_then(unix_ms);
        self.note_message(r);
        let calls = r
            .tool_calls
            .0
            .iter()
            .filter_map(|c| c.0.as_ref())
            .map(|c| self.entry(c, start))
            .collect();
        let message = Message {
            id: id.to_owned(),
            calls,
        };
        // The latest record of a message is most often the last one.
        match self.messages.iter().rposition(|m| m.id == id) {
            Some(at) => self.messages[at] = message,
            None if self.messages.len() >= MAX_MESSAGES => self.meta.counters.dropped_lines += 1,
            None => self.messages.push(message),
        }
        self.meta.messages = self.messages.len();
    }

    /// What a message says of the session: the prompt as a title, the model, the agent's
    /// own loop verdict, the workspace.
    fn note_message(&mut self, r: &Record<'_>) {
        if let Some(kind) = r.message_type.as_str()
            && !crate::sniff::GEMINI_MESSAGE_TYPES.contains(&kind)
        {
            self.meta.counters.unknown(kind);
        }
        match r.message_type.as_str() {
            Some("gemini" | "model") => {
                if let Some(model) = r.model.non_empty() {
                    self.meta.model = Some(model);
                }
            }
            Some(_) => {
                let text = r.text();
                if is_loop_verdict(&text) {
                    let calls_before = self.entries().filter(|e| e.terminal).count();
                    self.meta.agent_loop_verdict = Some(AgentVerdict {
                        text: trimmed_title(text.trim_start_matches("System: "), VERDICT_CHARS)
                            .unwrap_or_default(),
                        at_ms: r.timestamp.as_str().and_then(unix_ms),
                        calls_before,
                    });
                } else if r.message_type.as_str() == Some("user") {
                    self.offer_prompt(&text);
                }
            }
            None => {}
        }
    }

    fn offer_prompt(&mut self, text: &str) {
        if self.meta.cwd.is_none()
            && let Some(dir) = workspace_directory(text)
        {
            self.meta.cwd = Some(dir.to_owned());
        }
        if self.meta.title.is_none()
            && let Some(title) = prompt_title(text)
        {
            self.meta.title = Some(title);
            self.meta.title_source = Some(GeminiTitleSource::Prompt);
        }
    }

    /// One `toolCalls[]` entry in the detector's model.
    fn entry(&mut self, c: &ToolCall<'_>, start: Option<i64>) -> Entry {
        let name = c.name.as_str().unwrap_or_default();
        let status = c.status.as_str().unwrap_or_default();
        let terminal = matches!(status, "success" | "error" | "cancelled");
        let mut input = tools::mapped_input(name, c.args.clone().unwrap_or(Value::Null));
        compact_long_strings(&mut input, &["command"]);
        let text = c.result_text();
        let success = status == "success";
        let refused = status == "error" && tools::refused_by_agentwatch(c);
        let metadata = if refused {
            with_refusal(Value::Null, &text)
        } else if terminal {
            with_output_facts(
                tools::metadata(name, c, &text, success),
                tools::detector_tool(name) == "bash",
                &text,
                self.excerpts,
            )
        } else {
            Value::Null
        };
        if terminal && tools::detector_tool(name) == "task" {
            self.note_spawn(c);
        }
        let call = Finished {
            tool: tools::detector_tool(name).into_owned(),
            input,
            status: match status {
                "success" => CallStatus::Completed,
                "error" if refused => CallStatus::Blocked,
                "error" => CallStatus::Error,
                _ if terminal => CallStatus::Other(status.to_owned()),
                _ => CallStatus::Running,
            },
            metadata,
            start,
            end: c.timestamp.as_str().and_then(unix_ms),
            output_hash: terminal.then(|| output_hash(&tools::stable_text(status, &text))),
        };
        let id = c.id.as_str().unwrap_or_default();
        Entry {
            fingerprint: fingerprint(id, &call),
            terminal,
            call,
        }
    }

    fn note_spawn(&mut self, c: &ToolCall<'_>) {
        let (Some(call_id), Some(agent_id)) = (c.id.non_empty(), c.agent_id.non_empty()) else {
            return;
        };
        if self.meta.spawns.len() >= MAX_SPAWNS
            || self.meta.spawns.iter().any(|s| s.call_id == call_id)
        {
            return;
        }
        let agent_name = c
            .args
            .as_ref()
            .and_then(|a| a.get("agent_name"))
            .and_then(Value::as_str)
            .map(str::to_owned);
        self.meta.spawns.push(GeminiSpawn {
            call_id,
            agent_id,
            agent_name,
        });
    }
}

/// A call's identity for comparing histories: its id and everything the detector reads of
/// it, times included (landings are matched by time), so the calls a detector holds are the
/// history's exactly.
fn fingerprint(id: &str, call: &Finished) -> u64 {
    let text = format!(
        "{id}\n{}\n{}\n{:?}\n{}\n{}\n{:?}\n{:?}",
        call.tool,
        canonical_json(&call.input),
        call.status,
        canonical_json(&call.metadata),
        call.output_hash.as_deref().unwrap_or_default(),
        call.start,
        call.end,
    );
    u64::from_str_radix(&text_hash(&text), 16).unwrap_or_default()
}

/// Whether a message is Gemini's loop detector speaking.
fn is_loop_verdict(text: &str) -> bool {
    let lower = text.to_ascii_lowercase();
    lower.contains("potential loop detected") || lower.contains("potential loop was detected")
}

/// The first workspace directory the session context lists (`- **Workspace Directories:**`
/// then `  - /path`).
fn workspace_directory(text: &str) -> Option<&str> {
    let at = text.find("Workspace Directories:")?;
    let mut lines = text[at..].lines().skip(1);
    let dir = lines.next()?.trim().strip_prefix("- ")?.trim();
    dir.starts_with('/').then_some(dir)
}

/// Whether `bytes` are a Gemini CLI session: the first of their first lines that says which
/// agent wrote it is Gemini's (the metadata, a history edit, a message), or the whole file
/// is the older `.json` ([`crate::sniff::identify`]).
pub fn sniff(bytes: &[u8]) -> bool {
    first_record(bytes).is_ok()
}

fn first_record(bytes: &[u8]) -> Result<(), String> {
    crate::sniff::expect(bytes, crate::TranscriptAgent::Gemini)
}

/// The older whole-file `.json` (one object with `messages`), when `bytes` are one.
fn whole_document(bytes: &[u8]) -> Option<Record<'_>> {
    let start = bytes.iter().position(|b| !b.is_ascii_whitespace())?;
    let body = &bytes[start..];
    // A JSON Lines file's first line ends before its last byte; the older file is one
    // (pretty-printed) object.
    let one_object =
        may_be_object(body) && serde_json::from_slice::<serde::de::IgnoredAny>(body).is_ok();
    if !one_object {
        return None;
    }
    let doc = parse_line(body)?;
    doc.messages.is_some().then_some(doc)
}

/// Read a whole Gemini CLI session (`.jsonl`, or the older `.json`) into its session (for
/// `agentwatch detect`). `file_name` (a path or a name) gives a subagent's ids
/// ([`GeminiFile::from_path`]). Calls still running are kept with status `running` (counted
/// as orphans, not judged).
pub fn read_gemini_sessions(bytes: &[u8], file_name: &str) -> Result<Vec<Session>, Error> {
    first_record(bytes).map_err(|reason| Error::NotGemini {
        file: file_name.to_owned(),
        reason,
    })?;
    let placement = crate::Placement::of(crate::TranscriptAgent::Gemini, Some(file_name), bytes);
    crate::whole::read_whole(placement, bytes, u64::MAX)
        .map(|whole| whole.sessions)
        .map_err(|e| Error::NotGemini {
            file: file_name.to_owned(),
            reason: e.to_string(),
        })
}

#[cfg(test)]
mod tests;
