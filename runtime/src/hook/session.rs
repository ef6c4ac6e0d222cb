//! The hook's observe step: what the session did since the hook's last call, read from its
//! transcript by the agent's own reader (the one every other entry uses) from where the last
//! call stopped, pushed into the session's detector; and the call about to run, in the
//! detector's model.
//!
//! The call about to run is counted once: Claude Code and Gemini CLI have not written it yet,
//! Codex CLI has (its rollout holds the `function_call` before the hook runs), and a call with
//! no result waits in the reader, never in the detector.

use super::HookSetup;
use super::state::HookState;
use agentwatch_hooks::{Agent, PreToolEvent};
use agentwatch_opencode::http::{OpencodeServer, ServerSpec, Timeouts};
use agentwatch_transcripts::{
    ClaudeReader, CodexReader, EXCERPT_KEY, FileKind, GeminiReader, NewText, claude, codex, gemini,
    read_new,
};
use detect_core::{Call, Session, call_identity};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// Bytes of a transcript read per step (a longer line is dropped and counted).
const CHUNK_BYTES: usize = 8 << 20;
/// Bytes of a transcript one hook call reads at most: the first call on a long session reads
/// it whole; later calls read what is new.
const MAX_BYTES_PER_CALL: u64 = 512 << 20;

/// The reader of the session's transcript, as the state keeps it.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "agent", content = "state", rename_all = "lowercase")]
pub(crate) enum Reader {
    Claude(ClaudeReader),
    Codex(CodexReader),
    Gemini(GeminiReader),
}

impl Reader {
    /// A reader for `path`, keeping output excerpts (the messages say what a call returned).
    fn new(agent: Agent, path: &Path, event: &PreToolEvent) -> Option<Self> {
        let name = path.to_string_lossy();
        Some(match agent {
            Agent::Claude => {
                let kind = match &event.agent_id {
                    Some(agent) => FileKind::Subagent {
                        agent_id: Some(agent.clone()),
                        parent_session_id: Some(event.session_id.clone()),
                        agent_type: None,
                    },
                    None => FileKind::from_file_name(&name),
                };
                Reader::Claude(ClaudeReader::new(kind).with_excerpts())
            }
            Agent::Codex => Reader::Codex(
                CodexReader::new(agentwatch_transcripts::discover::codex_thread_id(&name))
                    .with_excerpts(),
            ),
            Agent::Gemini => Reader::Gemini(
                GeminiReader::new(gemini::GeminiFile::from_path(&name)).with_excerpts(),
            ),
            Agent::Opencode => return None,
        })
    }

    fn reset(&mut self) {
        match self {
            Reader::Claude(r) => r.reset(),
            Reader::Codex(r) => r.reset(),
            Reader::Gemini(r) => r.reset(),
        }
    }

    fn push_text(&mut self, new: &NewText) {
        match self {
            Reader::Claude(r) => r.push_text(new),
            Reader::Codex(r) => r.push_text(new),
            Reader::Gemini(r) => r.push_text(new),
        }
    }

    /// The calls completed since the last take, and whether they are the whole history anew
    /// (Gemini rewrote what it had handed out: the detector starts again).
    fn take_calls(&mut self) -> (Vec<Call>, bool) {
        match self {
            Reader::Claude(r) => (r.take_calls(), false),
            Reader::Codex(r) => (r.take_calls(), false),
            Reader::Gemini(r) => {
                let calls = r.take_calls();
                (calls, r.rewound())
            }
        }
    }
}

/// What the observe step found.
#[derive(Debug)]
pub struct SessionRead {
    /// The call about to run, in the detector's model.
    pub pending: Call,
    /// Calls of the session read in this hook call.
    pub calls_read: usize,
}

/// Read `event`'s session on from `state`, and the call about to run.
pub(super) fn read(
    event: &PreToolEvent,
    setup: &HookSetup,
    state: &mut HookState,
) -> Result<SessionRead, String> {
    if event.agent == Agent::Opencode {
        return read_opencode(event, setup, state);
    }
    let path = transcript_of(event)?;
    let shown = path.to_string_lossy().into_owned();
    let session = Session {
        directory: event.cwd.clone(),
        ..Session::new(event.session_id.clone())
    };
    if state.transcript.as_deref() != Some(shown.as_str()) || !state.restores(&setup.detector) {
        state.restart(Some(shown), &session, &setup.detector);
    }
    let mut reader = match state.reader.take() {
        Some(reader) => reader,
        None => Reader::new(event.agent, &path, event)
            .ok_or_else(|| format!("{} has no transcript reader", event.agent))?,
    };
    let read = tail(&path, &mut reader, state, setup, &session);
    let pending = pending_call(event, &reader);
    state.reader = Some(reader);
    Ok(SessionRead {
        pending,
        calls_read: read?,
    })
}

/// The transcript of `event`'s session: the path the agent names (a Claude Code subagent's
/// own file beside it).
fn transcript_of(event: &PreToolEvent) -> Result<PathBuf, String> {
    let path = event
        .transcript_path
        .clone()
        .ok_or_else(|| "the event names no transcript_path".to_owned())?;
    Ok(match (&event.agent_id, event.agent) {
        (Some(agent), Agent::Claude) => path
            .with_extension("")
            .join("subagents")
            .join(format!("agent-{agent}.jsonl")),
        _ => path,
    })
}

/// Push every line written since the state's cursor into `reader` and the calls it completes
/// into the detector; the calls read. A transcript not written yet is a session with no calls.
fn tail(
    path: &Path,
    reader: &mut Reader,
    state: &mut HookState,
    setup: &HookSetup,
    session: &Session,
) -> Result<usize, String> {
    let mut read_bytes = 0u64;
    let mut calls = 0;
    loop {
        let new = match read_new(path, &state.cursor, CHUNK_BYTES) {
            Ok(new) => new,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(calls),
            Err(e) => return Err(format!("{}: {e}", path.display())),
        };
        if new.restarted {
            let transcript = state.transcript.clone();
            state.restart(transcript, session, &setup.detector);
            reader.reset();
        }
        reader.push_text(&new);
        read_bytes += new.text.len() as u64;
        state.cursor = new.cursor.clone();
        calls += push_calls(reader, state, setup, session)?;
        if !new.more || read_bytes >= MAX_BYTES_PER_CALL {
            return Ok(calls);
        }
    }
}

/// The reader's completed calls into the detector and the excerpts kept.
fn push_calls(
    reader: &mut Reader,
    state: &mut HookState,
    setup: &HookSetup,
    session: &Session,
) -> Result<usize, String> {
    let (calls, anew) = reader.take_calls();
    if anew {
        let (transcript, cursor) = (state.transcript.clone(), state.cursor.clone());
        state.restart(transcript, session, &setup.detector);
        state.cursor = cursor;
    }
    let mut counted = 0;
    for call in &calls {
        if !call.status.is_counted() {
            continue;
        }
        counted += 1;
        let excerpt = call
            .metadata
            .get(EXCERPT_KEY)
            .and_then(serde_json::Value::as_str)
            .map(str::to_owned);
        state.remember(call_identity(&call.tool, &call.input), excerpt);
        state.detector(&setup.detector)?.push(call);
    }
    Ok(counted)
}

/// The call about to run in the detector's model: as the agent's transcript will hold it
/// (Codex: as its rollout holds it already).
fn pending_call(event: &PreToolEvent, reader: &Reader) -> Call {
    let input = event.tool_input.clone();
    match (event.agent, reader) {
        (Agent::Codex, Reader::Codex(codex_reader)) => event
            .tool_use_id
            .as_deref()
            .and_then(|id| codex_reader.pending_call(id))
            .unwrap_or_else(|| codex::hook_call(&event.tool_name, &input)),
        (Agent::Gemini, _) => gemini::pending_call(&event.tool_name, input),
        _ => claude::pending_call(&event.tool_name, input),
    }
}

/// An opencode session read on from the state's cursor through the server the plugin runs in
/// (its settled messages only, as the watch reads them); the call about to run is opencode's
/// own tool and arguments.
fn read_opencode(
    event: &PreToolEvent,
    setup: &HookSetup,
    state: &mut HookState,
) -> Result<SessionRead, String> {
    let url = event
        .server_url
        .clone()
        .or_else(|| setup.opencode_url.clone())
        .ok_or_else(|| "the event names no server_url".to_owned())?;
    let session = Session {
        directory: event.cwd.clone(),
        ..Session::new(event.session_id.clone())
    };
    if state.transcript.as_deref() != Some(url.as_str()) || !state.restores(&setup.detector) {
        state.restart(Some(url.clone()), &session, &setup.detector);
    }
    let mut spec = ServerSpec::new(url);
    spec.password.clone_from(&setup.opencode_password);
    let server = OpencodeServer::new(spec, OPENCODE_TIMEOUTS);
    let (messages, found) = server
        .messages_after(&event.session_id, state.opencode_cursor.as_deref())
        .map_err(|e| e.to_string())?;
    if state.opencode_cursor.is_some() && !found {
        state.restart(state.transcript.clone(), &session, &setup.detector);
    }
    let mut calls_read = 0;
    for message in messages.iter().take_while(|m| m.is_settled()) {
        for call in message.calls().filter(|c| c.status.is_counted()) {
            state.remember(call_identity(&call.tool, &call.input), None);
            state.detector(&setup.detector)?.push(&call);
            calls_read += 1;
        }
        state.opencode_cursor = Some(message.info.id.clone());
    }
    let pending = Call::completed(event.tool_name.clone(), event.tool_input.clone())
        .with_status(detect_core::CallStatus::Running);
    Ok(SessionRead {
        pending,
        calls_read,
    })
}

/// An opencode server's requests from the hook: short, the agent waits on them.
const OPENCODE_TIMEOUTS: Timeouts = Timeouts {
    connect: std::time::Duration::from_millis(500),
    request: std::time::Duration::from_secs(4),
};
