//! Codex CLI rollouts (`$CODEX_HOME/sessions/YYYY/MM/DD/rollout-*.jsonl`, `archived_sessions/`,
//! `agents.md` §2).
//!
//! [`CodexReader`] reads one rollout a line at a time ([`CodexReader::push_line`], or
//! [`CodexReader::push_text`] with what [`crate::tail::read_new`] found), in either era: the
//! envelope `{timestamp, type, payload}` or the older bare lines. It pairs each call
//! (`function_call`, `custom_tool_call`, `local_shell_call`) with its `*_output` by `call_id`
//! and hands the completed calls in the detector's model ([`CodexReader::take_calls`];
//! [`tools`] for the mapping). Exit codes come from the structured events when Codex wrote
//! them (`item_completed` `CommandExecution`, `exec_command_end`), else from the output; a
//! patch landed when `patch_apply_end` says so, when an `item_completed` `FileChange`
//! completed (paginated history, what `codex exec` writes), or when the `apply_patch` output
//! reports it. The reader is serializable, so a restart continues where it stopped. It never
//! fails: a line that is not JSON is counted and skipped, arguments that are not JSON are an
//! opaque identity, unknown record types and fields are ignored, a call with no output waits
//! (at most [`MAX_PENDING`] of them).
//!
//! The session is the rollout's thread: `session_meta.id` (the file name's uuid), its parent
//! `source.subagent.thread_spawn.parent_thread_id` for a subagent. A `session_meta` of another
//! thread later in the file (a fork replaying its parent's lines) does not change it.
//!
//! [`read_codex_sessions`] reads a whole file (for `agentwatch detect`); [`sniff`] tells a
//! rollout from other formats.

mod record;
pub mod tools;

use crate::Error;
use crate::common::{
    Counters, Finished, MAX_PENDING, count_line, prompt_title, unix_ms, with_output_facts,
    with_refusal,
};
use crate::lenient::StrOr;
use crate::tail::NewText;
use detect_core::{Call, CallStatus, Session, output_hash};
use record::{Change, Item, parse_line};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::collections::VecDeque;
use tools::{Landing, Output, detector_tool, mapped_input, parse_arguments, patch_landing};

/// The envelope's record types Codex writes (`agents.md` §2.3-2.4, §7); another is counted
/// as unknown ([`Counters::unknown_types`]).
const RECORD_TYPES: &[&str] = &[
    "session_meta",
    "response_item",
    "event_msg",
    "turn_context",
    "compacted",
    "world_state",
    "inter_agent_communication",
    "inter_agent_communication_metadata",
    "token_usage_record",
];

/// The response items Codex persists (`policy.rs`) that are not calls or outputs; another is
/// counted as unknown.
const ITEM_TYPES: &[&str] = &[
    "message",
    "reasoning",
    "image_generation_call",
    "compaction",
    "context_compaction",
    "ghost_snapshot",
];

/// Completed call ids remembered, so a call written twice is read once.
const RECENT_IDS: usize = 1024;
/// Structured results (exit codes, patch landings) kept until their call's output comes.
const EVENTS_KEPT: usize = 256;
/// Spawns remembered in [`CodexMeta::spawns`].
const MAX_SPAWNS: usize = 4096;

/// What is known of the rollout's thread.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CodexMeta {
    /// The detector's session id: the thread id.
    pub thread_id: Option<String>,
    /// For a subagent: the thread that spawned it.
    pub parent_thread_id: Option<String>,
    /// For a fork: the thread it was forked from (not a parent: the fork is a copy).
    pub forked_from_id: Option<String>,
    /// `cli`, `exec`, `vscode`, `subagent`, `subagent:review`, …
    pub source: Option<String>,
    pub agent_nickname: Option<String>,
    pub agent_role: Option<String>,
    pub title: Option<String>,
    /// The latest `turn_context.cwd`, else `session_meta.cwd`, else the `<cwd>` of the
    /// environment context (the bare era's only place for it).
    pub cwd: Option<String>,
    pub git_branch: Option<String>,
    pub git_commit: Option<String>,
    pub repository_url: Option<String>,
    pub model_provider: Option<String>,
    /// The latest `turn_context.model`.
    pub model: Option<String>,
    pub cli_version: Option<String>,
    pub originator: Option<String>,
    /// `legacy` or `paginated` (0.14x on).
    pub history_mode: Option<String>,
    pub spawns: Vec<CodexSpawn>,
    pub counters: Counters,
}

/// A subagent started by a `spawn_agent` call of this rollout.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CodexSpawn {
    pub call_id: String,
    /// The child's thread id.
    pub thread_id: Option<String>,
    pub nickname: Option<String>,
}

/// A call waiting for its output.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Pending {
    call_id: String,
    /// Codex's name for the tool.
    name: String,
    /// The input, read from the arguments and mapped ([`tools::mapped_input`]).
    input: Value,
    start: Option<i64>,
}

/// A patch's outcome from an event, before its call's output.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
enum PatchEvent {
    Landed(Landing),
    Failed,
}

/// A call as Codex's `PreToolUse` hook names it (`Bash {command}`, `apply_patch {command}`), in
/// the detector's model with status `running`: for when the rollout does not hold the call yet
/// ([`CodexReader::pending_call`] is the rollout's own form).
pub fn hook_call(name: &str, input: &Value) -> Call {
    let command = input.get("command").cloned().unwrap_or(Value::Null);
    let (name, input) = match name {
        "Bash" => ("exec_command", serde_json::json!({ "cmd": command })),
        "apply_patch" => ("apply_patch", serde_json::json!({ "input": command })),
        other => (other, input.clone()),
    };
    let input = mapped_input(name, input);
    let tool = tools::detector_tool(name, &input).into_owned();
    Call::completed(tool, input).with_status(CallStatus::Running)
}

/// The incremental reader of one Codex rollout.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CodexReader {
    /// The thread id the file's name gives, when known.
    thread_hint: Option<String>,
    meta: CodexMeta,
    #[serde(default)]
    pending: VecDeque<Pending>,
    #[serde(default)]
    recent_ids: VecDeque<String>,
    #[serde(default)]
    ready: Vec<Finished>,
    #[serde(default)]
    exits: VecDeque<(String, i64)>,
    #[serde(default)]
    patches: VecDeque<(String, PatchEvent)>,
    /// A `session_meta` of this thread was read.
    #[serde(default)]
    own_meta: bool,
    /// Each call's output excerpt kept in its metadata ([`crate::common::excerpt`]): for a
    /// reader whose caller shows what a call returned (the hook's messages).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    excerpts: bool,
}

impl CodexReader {
    /// A reader for a rollout of thread `thread_id` (from its file name, when known: see
    /// [`crate::discover::codex_thread_id`]).
    pub fn new(thread_id: Option<String>) -> Self {
        Self {
            meta: CodexMeta {
                thread_id: thread_id.clone(),
                ..CodexMeta::default()
            },
            thread_hint: thread_id,
            pending: VecDeque::new(),
            recent_ids: VecDeque::new(),
            ready: Vec::new(),
            exits: VecDeque::new(),
            patches: VecDeque::new(),
            own_meta: false,
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

    /// Forget everything read (the file was read again from its start), keeping the thread id
    /// its name gave.
    pub fn reset(&mut self) {
        let excerpts = self.excerpts;
        *self = Self::new(self.thread_hint.clone());
        self.excerpts = excerpts;
    }

    pub fn meta(&self) -> &CodexMeta {
        &self.meta
    }

    /// Calls waiting for their output.
    pub fn pending_calls(&self) -> usize {
        self.pending.len()
    }

    /// The call `call_id` as it waits for its output (the rollout holds a call before it runs:
    /// a pre-tool hook finds the pending call here), in the detector's model with status
    /// `running`.
    pub fn pending_call(&self, call_id: &str) -> Option<Call> {
        let p = self.pending.iter().find(|p| p.call_id == call_id)?;
        let tool = tools::detector_tool(&p.name, &p.input).into_owned();
        Some(Call::completed(tool, p.input.clone()).with_status(CallStatus::Running))
    }

    /// The calls completed since the last take, in the order their outputs were written.
    pub fn take_calls(&mut self) -> Vec<Call> {
        self.ready.drain(..).map(Call::from).collect()
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
        let at = line.timestamp.as_str().and_then(unix_ms);
        match (line.kind.as_str(), &line.payload.0) {
            (Some(kind), Some(payload)) => self.read_record(kind, payload, at),
            // The bare era: the line is the item itself, or the session's first line.
            (Some(_), None) => self.read_response_item(&line, None),
            (None, _) if line.record_type.as_str().is_some() => {}
            (None, _) if line.id.as_str().is_some() => self.read_session_meta(&line),
            (None, _) => {}
        }
    }

    /// The end of the file was reached for good (a whole-file read): calls still waiting for
    /// an output become calls without one (status `running`, not counted by the detector)
    /// and are counted as orphans.
    pub fn finish(&mut self) {
        while let Some(p) = self.pending.pop_front() {
            self.meta.counters.orphans += 1;
            self.ready.push(Finished {
                tool: detector_tool(&p.name, &p.input).into_owned(),
                input: p.input,
                status: CallStatus::Running,
                metadata: Value::Null,
                start: p.start,
                end: None,
                output_hash: None,
            });
        }
    }

    /// The thread's session with every call not yet taken.
    pub fn take_session(&mut self) -> Session {
        let mut session = Session::new(self.meta.thread_id.clone().unwrap_or_default());
        self.describe(&mut session);
        session.calls = self.take_calls();
        session
    }

    /// What the lines read so far say of the thread, set on `session` (what they do not say
    /// is left as it is): its parent thread, title, agent (its role, else its nickname) and
    /// working directory. The whole-file read and the live source describe a thread alike.
    pub fn describe(&self, session: &mut Session) {
        let meta = &self.meta;
        let agent = meta.agent_role.as_ref().or(meta.agent_nickname.as_ref());
        let known = [
            (&mut session.parent_id, meta.parent_thread_id.as_ref()),
            (&mut session.title, meta.title.as_ref()),
            (&mut session.agent, agent),
            (&mut session.directory, meta.cwd.as_ref()),
        ];
        for (slot, value) in known {
            if let Some(value) = value {
                *slot = Some(value.clone());
            }
        }
    }

    fn read_record(&mut self, kind: &str, payload: &Item<'_>, at: Option<i64>) {
        if !RECORD_TYPES.contains(&kind) {
            self.meta.counters.unknown(kind);
        }
        match kind {
            "session_meta" => self.read_session_meta(payload),
            "turn_context" => {
                if let Some(model) = payload.model.non_empty() {
                    self.meta.model = Some(model);
                }
                if let Some(cwd) = payload.cwd.non_empty() {
                    self.meta.cwd = Some(cwd);
                }
            }
            "response_item" => self.read_response_item(payload, at),
            "event_msg" => self.read_event(payload),
            _ => {}
        }
    }

    /// Whether a `session_meta` of thread `id` is this file's own.
    fn is_own(&self, id: Option<&str>) -> bool {
        match (&self.thread_hint, &self.meta.thread_id, id) {
            (Some(known), _, Some(id)) | (None, Some(known), Some(id)) => known == id,
            (None, None, _) => true,
            (_, _, None) => !self.own_meta,
        }
    }

    fn read_session_meta(&mut self, p: &Item<'_>) {
        if !self.is_own(p.id.as_str().filter(|id| !id.is_empty())) {
            return;
        }
        self.own_meta = true;
        let meta = &mut self.meta;
        let set = |slot: &mut Option<String>, value: Option<String>| {
            if value.is_some() {
                *slot = value;
            }
        };
        set(&mut meta.thread_id, p.id.non_empty());
        set(&mut meta.parent_thread_id, p.parent_thread());
        set(&mut meta.forked_from_id, p.forked_from_id.non_empty());
        set(&mut meta.source, p.source_name());
        let spawn = p.spawn();
        set(
            &mut meta.agent_nickname,
            p.agent_nickname
                .non_empty()
                .or_else(|| spawn.and_then(|s| s.agent_nickname.non_empty())),
        );
        set(
            &mut meta.agent_role,
            p.agent_role
                .non_empty()
                .or_else(|| spawn.and_then(|s| s.agent_role.non_empty())),
        );
        set(&mut meta.cwd, p.cwd.non_empty());
        if let Some(git) = &p.git.0 {
            set(&mut meta.git_branch, git.branch.non_empty());
            set(&mut meta.git_commit, git.commit_hash.non_empty());
            set(&mut meta.repository_url, git.repository_url.non_empty());
        }
        set(&mut meta.model_provider, p.model_provider.non_empty());
        set(&mut meta.cli_version, p.cli_version.non_empty());
        set(&mut meta.originator, p.originator.non_empty());
        set(&mut meta.history_mode, p.history_mode.non_empty());
    }

    fn read_response_item(&mut self, p: &Item<'_>, at: Option<i64>) {
        let Some(kind) = p.kind.as_str() else {
            return;
        };
        match kind {
            "message" if p.role.as_str() == Some("user") => self.offer_prompt(&p.content_text()),
            "function_call" | "tool_search_call" => {
                let input = match &p.arguments {
                    StrOr::Str(text) => parse_arguments(text),
                    StrOr::Other(value) => value.clone(),
                    StrOr::Absent => Value::Null,
                };
                let name = tool_name(p, kind);
                self.begin_call(p, &name, input, at);
            }
            "custom_tool_call" => {
                let input = match &p.input {
                    StrOr::Str(text) => json!({ "input": text }),
                    StrOr::Other(value) => value.clone(),
                    StrOr::Absent => Value::Null,
                };
                self.begin_call(p, &tool_name(p, kind), input, at);
            }
            "local_shell_call" => {
                let action = p.action.0.as_ref();
                let command = match action.map(|a| &a.command) {
                    Some(StrOr::Other(argv)) => Value::Array(argv.clone()),
                    Some(StrOr::Str(s)) => Value::String(s.to_string()),
                    _ => Value::Null,
                };
                let mut input = json!({ "command": command });
                if let Some(dir) = action.and_then(|a| a.working_directory.non_empty()) {
                    input["workdir"] = dir.into();
                }
                self.begin_call(p, "local_shell_call", input, at);
            }
            "web_search_call" => self.web_search(p, at),
            output if output.ends_with("_output") => self.complete_call(p, at),
            other if !ITEM_TYPES.contains(&other) => {
                self.meta
                    .counters
                    .unknown(&format!("response_item:{other}"));
            }
            _ => {}
        }
    }

    fn read_event(&mut self, p: &Item<'_>) {
        match p.kind.as_str() {
            Some("user_message") => {
                if let Some(text) = p.message.as_str() {
                    self.offer_prompt(text);
                }
            }
            Some("exec_command_end") => {
                if let (Some(id), Some(code)) = (p.call_id.non_empty(), p.exit_code.0) {
                    self.note_exit(id, code);
                }
            }
            Some("patch_apply_end") => {
                let Some(id) = p.call_id.non_empty() else {
                    return;
                };
                let event = match p.success.0 {
                    Some(false) => PatchEvent::Failed,
                    _ => PatchEvent::Landed(changes_landing(p)),
                };
                self.note_patch(id, event);
            }
            Some("item_completed") => {
                if let Some(item) = &p.item.0 {
                    self.read_completed_item(item);
                }
            }
            _ => {}
        }
    }

    /// A paginated history's completed item: a command's exit, a patch's files, the prompt.
    fn read_completed_item(&mut self, item: &Item<'_>) {
        let id = item.id.non_empty();
        match (item.kind.as_str(), id) {
            (Some("CommandExecution"), Some(id)) => {
                if let Some(code) = item.exit_code.0 {
                    self.note_exit(id, code);
                }
            }
            (Some("FileChange"), Some(id)) => {
                let event = match item.status.as_str() {
                    Some("completed") | None => PatchEvent::Landed(changes_landing(item)),
                    Some(_) => PatchEvent::Failed,
                };
                self.note_patch(id, event);
            }
            (Some("UserMessage"), _) => self.offer_prompt(&item.content_text()),
            _ => {}
        }
    }

    fn note_exit(&mut self, call_id: String, code: i64) {
        self.exits.push_back((call_id, code));
        if self.exits.len() > EVENTS_KEPT {
            self.exits.pop_front();
        }
    }

    fn note_patch(&mut self, call_id: String, event: PatchEvent) {
        self.patches.push_back((call_id, event));
        if self.patches.len() > EVENTS_KEPT {
            self.patches.pop_front();
        }
    }

    fn begin_call(&mut self, p: &Item<'_>, name: &str, input: Value, start: Option<i64>) {
        let call_id = p.call_id.non_empty().or_else(|| p.id.non_empty());
        let call_id = call_id.unwrap_or_default();
        let seen = |known: &String| *known == call_id;
        if !call_id.is_empty()
            && (self.pending.iter().any(|q| q.call_id == call_id)
                || self.recent_ids.iter().any(seen))
        {
            return;
        }
        self.meta.counters.calls += 1;
        self.pending.push_back(Pending {
            call_id,
            name: name.to_owned(),
            input: mapped_input(name, input),
            start,
        });
        if self.pending.len() > MAX_PENDING {
            self.pending.pop_front();
            self.meta.counters.orphans += 1;
        }
    }

    /// A hosted web search: a call with no output of its own.
    fn web_search(&mut self, p: &Item<'_>, at: Option<i64>) {
        let query = p.action.0.as_ref().and_then(|a| a.query.non_empty());
        self.meta.counters.calls += 1;
        self.meta.counters.completed += 1;
        let done = p.status.as_str().is_none_or(|s| s == "completed");
        self.ready.push(Finished {
            tool: "websearch".to_owned(),
            input: json!({ "query": query }),
            status: if done {
                CallStatus::Completed
            } else {
                CallStatus::Error
            },
            metadata: Value::Null,
            start: at,
            end: at,
            output_hash: None,
        });
    }

    fn complete_call(&mut self, p: &Item<'_>, end: Option<i64>) {
        let call_id = p.call_id.as_str().unwrap_or_default();
        let Some(at) = self.pending.iter().position(|q| q.call_id == call_id) else {
            self.meta.counters.unmatched_results += 1;
            return;
        };
        let Some(pending) = self.pending.remove(at) else {
            return;
        };
        let output = match &p.output {
            StrOr::Str(text) => Output::read(Some(text), None),
            StrOr::Other(value) => Output::read(None, Some(value)),
            StrOr::Absent => Output::default(),
        };
        let finished = self.finish_call(pending, output, end);
        self.ready.push(finished);
        self.meta.counters.completed += 1;
    }

    /// A call and its output in the detector's model.
    fn finish_call(&mut self, pending: Pending, mut output: Output, end: Option<i64>) -> Finished {
        let ran = self.exits.iter().position(|(id, _)| *id == pending.call_id);
        if let Some(at) = ran {
            output.exit = self.exits.remove(at).map(|(_, code)| code);
        }
        let tool = detector_tool(&pending.name, &pending.input).into_owned();
        // Refused before it ran: no command event of its own (agentwatch's hook, `agents.md`).
        if ran.is_none() && tools::refused_by_agentwatch(&output.text) {
            self.remember(&pending.call_id);
            return Finished {
                tool,
                input: pending.input,
                status: CallStatus::Blocked,
                metadata: with_refusal(Value::Null, &output.text),
                start: pending.start,
                end,
                output_hash: Some(output_hash(&output.stable_text())),
            };
        }
        let failed_exit = output.exit.is_some_and(|code| code != 0);
        let (metadata, failed) = match tool.as_str() {
            "bash" => (
                output
                    .exit
                    .map_or(Value::Null, |code| json!({ "exit": code })),
                failed_exit,
            ),
            "apply_patch" => {
                let landing = self.patch_outcome(&pending, &output);
                let landed = landing.as_ref().is_some_and(Landing::changed);
                let metadata = match landing {
                    Some(landing) if landed => landing.metadata(),
                    _ => Value::Null,
                };
                (metadata, !landed && !tools::reports_applied(&output.text))
            }
            "task" => {
                let metadata = tools::spawn_metadata(&pending.call_id, &output.text);
                self.note_spawn(&pending.call_id, &metadata);
                (metadata, failed_exit)
            }
            _ => (Value::Null, failed_exit),
        };
        self.remember(&pending.call_id);
        let bash = tool == "bash";
        Finished {
            tool,
            input: pending.input,
            status: if failed || output.failed {
                CallStatus::Error
            } else {
                CallStatus::Completed
            },
            metadata: with_output_facts(metadata, bash, &output.text, self.excerpts),
            start: pending.start,
            end,
            output_hash: Some(output_hash(&output.stable_text())),
        }
    }

    /// What a patch changed: the event Codex wrote for it, else (the output reporting it
    /// applied) the files its text names.
    fn patch_outcome(&mut self, pending: &Pending, output: &Output) -> Option<Landing> {
        if let Some(at) = self
            .patches
            .iter()
            .position(|(id, _)| *id == pending.call_id)
        {
            return match self.patches.remove(at).map(|(_, event)| event) {
                Some(PatchEvent::Landed(landing)) => Some(landing),
                _ => None,
            };
        }
        let applied = tools::reports_applied(&output.text) && output.exit.is_none_or(|c| c == 0);
        let patch = pending.input.get("patchText").and_then(Value::as_str);
        applied.then(|| patch_landing(patch.unwrap_or_default()))
    }

    fn note_spawn(&mut self, call_id: &str, metadata: &Value) {
        if self.meta.spawns.len() >= MAX_SPAWNS {
            return;
        }
        let text = |key: &str| metadata.get(key).and_then(Value::as_str).map(str::to_owned);
        self.meta.spawns.push(CodexSpawn {
            call_id: call_id.to_owned(),
            thread_id: text("agentId"),
            nickname: text("nickname"),
        });
    }

    fn remember(&mut self, call_id: &str) {
        self.recent_ids.push_back(call_id.to_owned());
        if self.recent_ids.len() > RECENT_IDS {
            self.recent_ids.pop_front();
        }
    }

    /// A user message: the first prompt typed is the title; an environment context gives
    /// the working directory when nothing else did.
    fn offer_prompt(&mut self, text: &str) {
        if self.meta.cwd.is_none()
            && let Some(cwd) = between(text, "<cwd>", "</cwd>")
        {
            self.meta.cwd = Some(cwd.to_owned());
        }
        if self.meta.title.is_none() && !text.trim_start().starts_with("# AGENTS.md") {
            self.meta.title = prompt_title(text);
        }
    }
}

/// The tool's name: a namespaced MCP tool as `namespace__name`, any other as named.
fn tool_name(p: &Item<'_>, kind: &str) -> String {
    let name = p.name.as_str().unwrap_or_default();
    if kind == "tool_search_call" {
        return "tool_search".to_owned();
    }
    match p.namespace.as_str() {
        Some(ns) if ns.starts_with("mcp__") && !name.starts_with("mcp__") => {
            format!("{ns}__{name}")
        }
        _ => name.to_owned(),
    }
}

/// The landing a `changes` map describes (`patch_apply_end`, `FileChange`).
fn changes_landing(p: &Item<'_>) -> Landing {
    let mut landing = Landing::default();
    for (path, change) in p.changes.0.iter().flatten() {
        let Some(change) = &change.0 else {
            continue;
        };
        let (kind, diff, content) = change_parts(change);
        landing.push(path, kind, diff, content);
    }
    landing
}

/// A change's kind, diff and content, in the current or the older externally tagged shape.
fn change_parts<'c>(change: &'c Change<'_>) -> (&'c str, Option<&'c str>, Option<&'c str>) {
    for (kind, body) in [
        ("add", &change.add),
        ("update", &change.update),
        ("delete", &change.delete),
    ] {
        if let Some(body) = &body.0 {
            return (kind, body.unified_diff.as_str(), body.content.as_str());
        }
    }
    let kind = change.kind.as_str().unwrap_or("update");
    (kind, change.unified_diff.as_str(), change.content.as_str())
}

/// The text between the first `open` and the `close` after it.
fn between<'t>(text: &'t str, open: &str, close: &str) -> Option<&'t str> {
    let start = text.find(open)? + open.len();
    let len = text[start..].find(close)?;
    Some(text[start..start + len].trim()).filter(|s| !s.is_empty())
}

/// Whether `bytes` are a Codex rollout: the first of their first lines that says which
/// agent wrote it is Codex's ([`crate::sniff::identify`]: the envelope, a bare-era first line,
/// a bare item or a state marker).
pub fn sniff(bytes: &[u8]) -> bool {
    first_record(bytes).is_ok()
}

fn first_record(bytes: &[u8]) -> Result<(), String> {
    crate::sniff::expect(bytes, crate::TranscriptAgent::Codex)
}

/// Read a whole Codex rollout (already decompressed, for a `.jsonl.zst`) into its thread's
/// session (for `agentwatch detect`). `file_name` (a path or a name) gives the thread id when
/// it ends with one (`rollout-…-<uuid>.jsonl`). Calls left without an output are kept with
/// status `running` (counted as orphans, not judged).
pub fn read_codex_sessions(bytes: &[u8], file_name: &str) -> Result<Vec<Session>, Error> {
    first_record(bytes).map_err(|reason| Error::NotCodex {
        file: file_name.to_owned(),
        reason,
    })?;
    let placement = crate::Placement::of(crate::TranscriptAgent::Codex, Some(file_name), bytes);
    crate::whole::read_whole(placement, bytes, u64::MAX)
        .map(|whole| whole.sessions)
        .map_err(|e| Error::NotCodex {
            file: file_name.to_owned(),
            reason: e.to_string(),
        })
}

#[cfg(test)]
mod tests;
