//! Claude Code transcripts (`~/.claude/projects/*/<session>.jsonl` and its subagents' files).
//!
//! [`ClaudeReader`] reads one transcript a line at a time ([`ClaudeReader::push_line`], or
//! [`ClaudeReader::push_text`] with what [`crate::tail::read_new`] found), pairs each
//! `tool_use` block with its `tool_result` by id, and hands the completed calls in the
//! detector's model ([`ClaudeReader::take_calls`], [`tools`] for the mapping). It is
//! serializable, so a restart continues where it stopped. It never fails: a line that is not
//! JSON is counted and skipped, unknown record types and fields are ignored, a call with no
//! result waits (at most [`MAX_PENDING`] of them; older ones are dropped as orphans).
//!
//! [`read_claude_sessions`] reads a whole file into sessions (for `agentwatch detect`);
//! [`sniff`] tells a Claude Code transcript from other formats.

mod record;
pub mod tools;

use crate::Error;
use crate::common::{
    Finished, count_line, prompt_title, trimmed_title, unix_ms, with_output_facts, with_refusal,
};
use crate::tail::NewText;
use detect_core::{Call, CallStatus, Session, output_hash};
use record::{Block, Content, Line, ToolUseResult, parse_line};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::{HashMap, VecDeque};
use tools::{Outcome, map_call, map_unanswered, refused_by_agentwatch, spawned_agent};

/// Completed call ids remembered, so a `tool_use` written twice is read once.
const RECENT_IDS: usize = 1024;
/// Inline sidechains (child sessions) kept per file, and their line ids remembered.
const MAX_SIDECHAINS: usize = 1024;
const SIDECHAIN_UUIDS: usize = 65_536;
/// Spawns (Task / Agent calls) remembered in [`TranscriptMeta::spawns`].
const MAX_SPAWNS: usize = 4096;
pub use crate::common::{Counters, MAX_PENDING, TITLE_CHARS};

/// A call Claude Code is about to run (a pre-tool hook's `tool_name` and `tool_input`), in the
/// detector's model as a call of its transcript will read, with status `running`.
pub fn pending_call(name: &str, input: Value) -> Call {
    let (tool, input) = map_unanswered(name, input);
    Call::completed(tool, input).with_status(CallStatus::Running)
}

/// The id of a subagent's session: unique and stable, and its parent is `session_id`, so a
/// subagent's loop rolls up to the session that spawned it.
pub fn subagent_session_id(session_id: &str, agent_id: &str) -> String {
    format!("{session_id}:agent-{agent_id}")
}

/// What a transcript file is, which decides its session's id and parent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum FileKind {
    /// `<session>.jsonl`: a session's own transcript. Inline `isSidechain` lines in it (the
    /// oldest subagent layout) are child sessions.
    Main { session_id: Option<String> },
    /// A subagent's transcript (`<session>/subagents/agent-<id>.jsonl`, or the older flat
    /// `agent-<id>.jsonl`): every line is the subagent's. What is not given here is taken
    /// from the lines (`sessionId` is the parent's, `agentId` the subagent's).
    Subagent {
        agent_id: Option<String>,
        parent_session_id: Option<String>,
        agent_type: Option<String>,
    },
}

impl FileKind {
    /// The kind a file name tells: `agent-<id>.jsonl` is a subagent, anything else a main
    /// transcript whose session id is the name without `.jsonl`.
    pub fn from_file_name(name: &str) -> Self {
        let name = name.rsplit('/').next().unwrap_or(name);
        let stem = name.strip_suffix(".jsonl").unwrap_or(name);
        match stem.strip_prefix("agent-") {
            Some(agent) => FileKind::Subagent {
                agent_id: (!agent.is_empty()).then(|| agent.to_owned()),
                parent_session_id: None,
                agent_type: None,
            },
            None => FileKind::Main {
                session_id: (!stem.is_empty()).then(|| stem.to_owned()),
            },
        }
    }
}

/// Where a session's title came from, weakest first: a later source of the same or a
/// stronger kind replaces it (Claude Code's own records are last-wins).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TitleSource {
    /// The first prompt the user typed.
    Prompt,
    /// A `summary` record.
    Summary,
    /// An `ai-title` record.
    AiTitle,
    /// A `custom-title` record (the user renamed the session).
    CustomTitle,
}

/// A subagent started by a `Task` / `Agent` call of this transcript.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Spawn {
    /// The spawning `tool_use` id (a subagent's `.meta.json` names it as `toolUseId`).
    pub tool_use_id: String,
    pub agent_id: Option<String>,
    /// `subagent_type` of the call (`Explore`, `general-purpose`, …).
    pub agent_type: Option<String>,
    pub description: Option<String>,
}

/// What is known of the transcript's session.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TranscriptMeta {
    /// The detector's session id: the main session's id, or
    /// [`subagent_session_id`]`(parent, agent)` for a subagent.
    pub session_id: Option<String>,
    /// For a subagent: the session that spawned it.
    pub parent_session_id: Option<String>,
    pub agent_id: Option<String>,
    pub agent_type: Option<String>,
    pub title: Option<String>,
    pub title_source: Option<TitleSource>,
    pub cwd: Option<String>,
    pub git_branch: Option<String>,
    /// The model of the latest assistant line.
    pub model: Option<String>,
    /// Claude Code's version that wrote the latest line.
    pub version: Option<String>,
    pub spawns: Vec<Spawn>,
    pub counters: Counters,
    /// `sessionId` and `agentId` as the lines give them.
    #[serde(default)]
    line_session_id: Option<String>,
    #[serde(default)]
    line_agent_id: Option<String>,
}

/// A call waiting for its result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Pending {
    id: String,
    name: String,
    input: Value,
    start: Option<i64>,
    /// The inline sidechain it belongs to (index into `sidechains`), `None` for the file's own.
    lane: Option<usize>,
}

/// An inline sidechain of a main transcript: a child session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Sidechain {
    /// `agent-<agentId>`, or `sidechain-<uuid of its first line>` without an agent id.
    key: String,
    agent_id: Option<String>,
    title: Option<String>,
    ready: Vec<Finished>,
}

/// Calls completed in an inline sidechain, with what is known of it.
#[derive(Debug, Clone, PartialEq)]
pub struct SidechainCalls {
    pub session_id: String,
    pub parent_session_id: Option<String>,
    pub agent_id: Option<String>,
    pub agent_type: Option<String>,
    pub title: Option<String>,
    pub calls: Vec<Call>,
}

/// The incremental reader of one Claude Code transcript file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClaudeReader {
    kind: FileKind,
    meta: TranscriptMeta,
    #[serde(default)]
    pending: VecDeque<Pending>,
    #[serde(default)]
    recent_ids: VecDeque<String>,
    #[serde(default)]
    ready: Vec<Finished>,
    #[serde(default)]
    sidechains: Vec<Sidechain>,
    /// Line uuid to sidechain, for inline sidechains without `agentId` (chained by
    /// `parentUuid`); the oldest forgotten past [`SIDECHAIN_UUIDS`].
    #[serde(default)]
    sidechain_uuids: HashMap<String, usize>,
    #[serde(default)]
    sidechain_uuid_order: VecDeque<String>,
    /// Each call's output excerpt kept in its metadata ([`crate::common::excerpt`]): for a
    /// reader whose caller shows what a call returned (the hook's messages).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    excerpts: bool,
}

impl ClaudeReader {
    pub fn new(kind: FileKind) -> Self {
        let mut reader = Self {
            kind,
            meta: TranscriptMeta::default(),
            pending: VecDeque::new(),
            recent_ids: VecDeque::new(),
            ready: Vec::new(),
            sidechains: Vec::new(),
            sidechain_uuids: HashMap::new(),
            sidechain_uuid_order: VecDeque::new(),
            excerpts: false,
        };
        reader.refresh_ids();
        reader
    }

    /// The same reader keeping each call's output excerpt in its metadata
    /// (`metadata.excerpt`, [`crate::excerpt`]); the detector does not read it.
    #[must_use]
    pub fn with_excerpts(mut self) -> Self {
        self.excerpts = true;
        self
    }

    /// Forget everything read (the file was read again from its start), keeping its kind.
    pub fn reset(&mut self) {
        let excerpts = self.excerpts;
        *self = Self::new(self.kind.clone());
        self.excerpts = excerpts;
    }

    pub fn kind(&self) -> &FileKind {
        &self.kind
    }

    pub fn meta(&self) -> &TranscriptMeta {
        &self.meta
    }

    /// Calls waiting for their result.
    pub fn pending_calls(&self) -> usize {
        self.pending.len()
    }

    /// The calls of this transcript's own session completed since the last take, in the order
    /// their results were written.
    pub fn take_calls(&mut self) -> Vec<Call> {
        self.ready.drain(..).map(Call::from).collect()
    }

    /// The calls of inline sidechains completed since the last take, per sidechain (only
    /// those with new calls).
    pub fn take_sidechains(&mut self) -> Vec<SidechainCalls> {
        let parent = self.meta.session_id.clone();
        let spawns = &self.meta.spawns;
        let mut taken = Vec::new();
        for side in self.sidechains.iter_mut().filter(|s| !s.ready.is_empty()) {
            let agent_type = side.agent_id.as_ref().and_then(|agent| {
                spawns
                    .iter()
                    .find(|s| s.agent_id.as_ref() == Some(agent))
                    .and_then(|s| s.agent_type.clone())
            });
            taken.push(SidechainCalls {
                session_id: format!("{}:{}", parent.as_deref().unwrap_or("unknown"), side.key),
                parent_session_id: parent.clone(),
                agent_id: side.agent_id.clone(),
                agent_type,
                title: side.title.clone(),
                calls: side.ready.drain(..).map(Call::from).collect(),
            });
        }
        taken
    }

    /// Push what the tail read: its lines, and the lines it dropped for their length. The
    /// caller resets the reader first when the tail says `restarted`.
    pub fn push_text(&mut self, new: &NewText) {
        self.meta.counters.oversized_lines += new.skipped_lines;
        for line in new.lines() {
            self.push_line(line);
        }
    }

    /// Read one line (without its newline). Blank lines are ignored; a line that is not a JSON
    /// object is counted in [`Counters::corrupt_lines`].
    pub fn push_line(&mut self, line: &[u8]) {
        if !count_line(line, &mut self.meta.counters) {
            return;
        }
        let Some(line) = parse_line(line) else {
            self.meta.counters.corrupt_lines += 1;
            return;
        };
        self.note_envelope(&line);
        let lane = match self.lane_of(&line) {
            Ok(lane) => lane,
            Err(Dropped) => {
                self.meta.counters.dropped_lines += 1;
                return;
            }
        };
        match line.kind.as_str() {
            Some("assistant") => self.read_assistant(&line, lane),
            Some("user") => self.read_user(&line, lane),
            Some("summary") => self.offer_title(line.summary.as_str(), TitleSource::Summary),
            Some("ai-title") => self.offer_title(line.ai_title.as_str(), TitleSource::AiTitle),
            Some("custom-title") => {
                self.offer_title(line.custom_title.as_str(), TitleSource::CustomTitle)
            }
            Some(kind) if !crate::sniff::CLAUDE_RECORD_TYPES.contains(&kind) => {
                self.meta.counters.unknown(kind);
            }
            _ => {}
        }
    }

    /// The end of the file was reached for good (a whole-file read): calls still waiting for
    /// a result become calls without one (status `running`, which the detector does not
    /// count) and are counted as orphans.
    pub fn finish(&mut self) {
        while let Some(p) = self.pending.pop_front() {
            self.meta.counters.orphans += 1;
            let (tool, input) = map_unanswered(&p.name, p.input);
            let finished = Finished {
                tool,
                input,
                status: CallStatus::Running,
                metadata: Value::Null,
                start: p.start,
                end: None,
                output_hash: None,
            };
            self.lane_ready(p.lane).push(finished);
        }
    }

    /// The file's sessions with every call not yet taken: its own, then its inline
    /// sidechains (children of it).
    pub fn take_sessions(&mut self) -> Vec<Session> {
        let mut own = Session::new(self.meta.session_id.clone().unwrap_or_default());
        self.describe(&mut own);
        own.calls = self.take_calls();
        let mut sessions = vec![own];
        for side in self.take_sidechains() {
            let mut session = Session::new(side.session_id);
            session.parent_id = side.parent_session_id;
            session.title = side.title;
            session.agent = side.agent_type;
            session.directory = self.meta.cwd.clone();
            session.calls = side.calls;
            sessions.push(session);
        }
        sessions
    }

    /// What the lines read so far say of the file's own session, set on `session` (what
    /// they do not say is left as it is): its parent, title, agent type and working
    /// directory. The whole-file read and the live source describe a session alike.
    pub fn describe(&self, session: &mut Session) {
        let meta = &self.meta;
        let known = [
            (&mut session.parent_id, &meta.parent_session_id),
            (&mut session.title, &meta.title),
            (&mut session.agent, &meta.agent_type),
            (&mut session.directory, &meta.cwd),
        ];
        for (slot, value) in known {
            if value.is_some() {
                slot.clone_from(value);
            }
        }
    }

    /// Session and agent ids, working directory, branch and version from a line's envelope.
    fn note_envelope(&mut self, line: &Line<'_>) {
        let own_line = line.is_sidechain.0 != Some(true) || self.kind_is_subagent();
        let meta = &mut self.meta;
        let mut ids_changed = false;
        if meta.line_session_id.is_none() && line.session_id.non_empty().is_some() {
            meta.line_session_id = line.session_id.non_empty();
            ids_changed = true;
        }
        if own_line && meta.line_agent_id.is_none() && line.agent_id.non_empty().is_some() {
            meta.line_agent_id = line.agent_id.non_empty();
            ids_changed = true;
        }
        if let Some(cwd) = line.cwd.non_empty() {
            meta.cwd = Some(cwd);
        }
        if let Some(branch) = line.git_branch.as_str() {
            // "" outside a git repository.
            meta.git_branch = (!branch.is_empty()).then(|| branch.to_owned());
        }
        if let Some(version) = line.version.non_empty() {
            meta.version = Some(version);
        }
        if ids_changed {
            self.refresh_ids();
        }
    }

    fn kind_is_subagent(&self) -> bool {
        matches!(self.kind, FileKind::Subagent { .. })
    }

    /// The session id, parent and agent from the file's kind, else from its lines.
    fn refresh_ids(&mut self) {
        let meta = &mut self.meta;
        match &self.kind {
            FileKind::Main { session_id } => {
                meta.session_id = session_id.clone().or_else(|| meta.line_session_id.clone());
            }
            FileKind::Subagent {
                agent_id,
                parent_session_id,
                agent_type,
            } => {
                let parent = parent_session_id
                    .clone()
                    .or_else(|| meta.line_session_id.clone());
                let agent = agent_id.clone().or_else(|| meta.line_agent_id.clone());
                meta.session_id = match (&parent, &agent) {
                    (Some(parent), Some(agent)) => Some(subagent_session_id(parent, agent)),
                    (None, Some(agent)) => Some(format!("agent-{agent}")),
                    (_, None) => parent.clone(),
                };
                meta.parent_session_id = parent;
                meta.agent_id = agent;
                meta.agent_type = agent_type.clone();
            }
        }
    }

    /// Which session a line belongs to: the file's own (`None`), or an inline sidechain.
    fn lane_of(&mut self, line: &Line<'_>) -> Result<Option<usize>, Dropped> {
        if line.is_sidechain.0 != Some(true) || self.kind_is_subagent() {
            return Ok(None);
        }
        let key = match (line.agent_id.as_str(), line.parent_uuid.as_str()) {
            (Some(agent), _) if !agent.is_empty() => format!("agent-{agent}"),
            (_, Some(parent)) if self.sidechain_uuids.contains_key(parent) => {
                let lane = self.sidechain_uuids[parent];
                self.remember_sidechain_uuid(line, lane);
                return Ok(Some(lane));
            }
            _ => format!("sidechain-{}", line.uuid.as_str().unwrap_or("unknown")),
        };
        let lane = match self.sidechains.iter().position(|s| s.key == key) {
            Some(lane) => lane,
            None if self.sidechains.len() >= MAX_SIDECHAINS => return Err(Dropped),
            None => {
                self.sidechains.push(Sidechain {
                    key,
                    agent_id: line.agent_id.non_empty(),
                    title: None,
                    ready: Vec::new(),
                });
                self.sidechains.len() - 1
            }
        };
        self.remember_sidechain_uuid(line, lane);
        Ok(Some(lane))
    }

    fn remember_sidechain_uuid(&mut self, line: &Line<'_>, lane: usize) {
        let Some(uuid) = line.uuid.non_empty() else {
            return;
        };
        if self.sidechain_uuids.insert(uuid.clone(), lane).is_none() {
            self.sidechain_uuid_order.push_back(uuid);
        }
        while self.sidechain_uuid_order.len() > SIDECHAIN_UUIDS {
            if let Some(old) = self.sidechain_uuid_order.pop_front() {
                self.sidechain_uuids.remove(&old);
            }
        }
    }

    fn lane_ready(&mut self, lane: Option<usize>) -> &mut Vec<Finished> {
        match lane.and_then(|i| self.sidechains.get_mut(i)) {
            Some(side) => &mut side.ready,
            None => &mut self.ready,
        }
    }

    /// An assistant line: its model, and each `tool_use` block as a call waiting for its result.
    fn read_assistant(&mut self, line: &Line<'_>, lane: Option<usize>) {
        let Some(message) = &line.message.0 else {
            return;
        };
        if lane.is_none()
            && let Some(model) = message.model.non_empty()
            && model != "<synthetic>"
        {
            self.meta.model = Some(model);
        }
        let start = line.timestamp.as_str().and_then(unix_ms);
        for block in message.content.blocks() {
            if block.kind.as_str() == Some("tool_use") {
                self.begin_call(block, start, lane);
            }
        }
    }

    fn begin_call(&mut self, block: &Block<'_>, start: Option<i64>, lane: Option<usize>) {
        let id = block.id.as_str().unwrap_or_default();
        let seen = |known: &String| known == id;
        if !id.is_empty()
            && (self.pending.iter().any(|p| p.id == id) || self.recent_ids.iter().any(seen))
        {
            return;
        }
        self.meta.counters.calls += 1;
        self.pending.push_back(Pending {
            id: id.to_owned(),
            name: block.name.as_str().unwrap_or_default().to_owned(),
            input: block.input.clone().unwrap_or(Value::Null),
            start,
            lane,
        });
        if self.pending.len() > MAX_PENDING {
            self.pending.pop_front();
            self.meta.counters.orphans += 1;
        }
    }

    /// A user line: the results it carries, or (the first time) the prompt as a title.
    fn read_user(&mut self, line: &Line<'_>, lane: Option<usize>) {
        let Some(message) = &line.message.0 else {
            return;
        };
        let results: Vec<&Block<'_>> = message
            .content
            .blocks()
            .filter(|b| b.kind.as_str() == Some("tool_result"))
            .collect();
        if results.is_empty() {
            if line.is_meta.0 != Some(true) {
                self.offer_prompt(&message.content, lane);
            }
            return;
        }
        let end = line.timestamp.as_str().and_then(unix_ms);
        // `toolUseResult` describes the line's one result; with several it is ambiguous.
        let none = ToolUseResult::default();
        let detail = if results.len() == 1 {
            &line.tool_use_result
        } else {
            &none
        };
        for block in results {
            self.complete_call(block, end, detail);
        }
    }

    fn complete_call(&mut self, block: &Block<'_>, end: Option<i64>, detail: &ToolUseResult<'_>) {
        let id = block.tool_use_id.as_str().unwrap_or_default();
        let Some(at) = self.pending.iter().position(|p| p.id == id) else {
            self.meta.counters.unmatched_results += 1;
            return;
        };
        let Some(pending) = self.pending.remove(at) else {
            return;
        };
        let text = block.content.text();
        let outcome = Outcome {
            text: &text,
            is_error: block.is_error.0 == Some(true),
            detail,
        };
        let mapped = map_call(&pending.name, &pending.id, pending.input, &outcome);
        let blocked = refused_by_agentwatch(&outcome);
        if mapped.tool == "task" && !blocked {
            self.note_spawn(&pending.id, &mapped.input, &outcome);
        }
        let bash = mapped.tool == "bash";
        let finished = Finished {
            tool: mapped.tool,
            input: mapped.input,
            status: match (blocked, outcome.is_error) {
                (true, _) => CallStatus::Blocked,
                (false, true) => CallStatus::Error,
                (false, false) => CallStatus::Completed,
            },
            metadata: if blocked {
                // The reason is in the result's text, else (the text cut short) its detail.
                let said = [Some(&*text), detail.text()]
                    .into_iter()
                    .flatten()
                    .find(|t| t.contains(detect_core::HOOK_MARKER))
                    .unwrap_or_default();
                with_refusal(mapped.metadata, said)
            } else {
                with_output_facts(mapped.metadata, bash, &text, self.excerpts)
            },
            start: pending.start,
            end,
            output_hash: Some(output_hash(&text)),
        };
        self.lane_ready(pending.lane).push(finished);
        self.meta.counters.completed += 1;
        self.recent_ids.push_back(pending.id);
        if self.recent_ids.len() > RECENT_IDS {
            self.recent_ids.pop_front();
        }
    }

    fn note_spawn(&mut self, id: &str, input: &Value, outcome: &Outcome<'_>) {
        if self.meta.spawns.len() >= MAX_SPAWNS {
            return;
        }
        let text = |key: &str| input.get(key).and_then(Value::as_str).map(str::to_owned);
        self.meta.spawns.push(Spawn {
            tool_use_id: id.to_owned(),
            agent_id: spawned_agent(outcome),
            agent_type: text("subagent_type"),
            description: text("description"),
        });
    }

    /// The first prompt typed (not a command wrapper, reminder or notification) as the title
    /// of its session, when nothing better has named it.
    fn offer_prompt(&mut self, content: &Content<'_>, lane: Option<usize>) {
        let title = match content.as_str() {
            Some(text) => prompt_title(text),
            None => content
                .blocks()
                .filter(|b| b.kind.as_str() == Some("text"))
                .find_map(|b| b.text.as_str().and_then(prompt_title)),
        };
        let Some(title) = title else {
            return;
        };
        match lane.and_then(|i| self.sidechains.get_mut(i)) {
            Some(side) => {
                side.title.get_or_insert(title);
            }
            None if self.meta.title.is_none() => {
                self.meta.title = Some(title);
                self.meta.title_source = Some(TitleSource::Prompt);
            }
            None => {}
        }
    }

    fn offer_title(&mut self, text: Option<&str>, source: TitleSource) {
        let Some(title) = text.and_then(|t| trimmed_title(t, usize::MAX)) else {
            return;
        };
        if self
            .meta
            .title_source
            .is_none_or(|current| current <= source)
        {
            self.meta.title = Some(title);
            self.meta.title_source = Some(source);
        }
    }
}

/// A sidechain that would pass [`MAX_SIDECHAINS`].
struct Dropped;

/// Whether `bytes` are a Claude Code transcript: the first of their first lines that says
/// which agent wrote it is Claude Code's ([`crate::sniff::identify`]; any record type it
/// writes may come first). Cheap: it reads a few lines.
pub fn sniff(bytes: &[u8]) -> bool {
    first_record(bytes).is_ok()
}

fn first_record(bytes: &[u8]) -> Result<(), String> {
    crate::sniff::expect(bytes, crate::TranscriptAgent::Claude)
}

/// Read a whole Claude Code transcript into sessions (for `agentwatch detect`): the file's own
/// session, then its inline sidechains as children of it. `file_name` (a path or a name)
/// tells a subagent's file (`agent-<id>.jsonl`) from a session's. A last line without its
/// newline is read when it is whole; calls left without a result are kept with status
/// `running` (counted as orphans, not judged).
pub fn read_claude_sessions(bytes: &[u8], file_name: &str) -> Result<Vec<Session>, Error> {
    first_record(bytes).map_err(|reason| Error::NotClaude {
        file: file_name.to_owned(),
        reason,
    })?;
    let placement = crate::Placement::of(crate::TranscriptAgent::Claude, Some(file_name), bytes);
    crate::whole::read_whole(placement, bytes, u64::MAX)
        .map(|whole| whole.sessions)
        .map_err(|e| Error::NotClaude {
            file: file_name.to_owned(),
            reason: e.to_string(),
        })
}

#[cfg(test)]
mod tests;
