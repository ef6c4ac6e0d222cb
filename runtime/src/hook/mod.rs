//! `agentwatch hook AGENT`: agentwatch inside the agent. The agent runs it before each tool
//! call with its pre-tool event on standard input; it reads what the session did since its last
//! call (the transcript, from a byte offset kept in a small state file per session), judges the
//! session and the call about to run with the configured detector, and answers with the ladder
//! (`recovery_policy::hook_ladder`): let it run, warn, refuse, or stop the session.
//!
//! One tick, as every job here: **observe** (the event, the session's new lines:
//! `session`), **decide** (pure: the detector's [`detect_core::PendingCall`] and the ladder),
//! **act** (the answer on standard output in the agent's protocol, the state written back, the
//! refusal recorded for the watch).
//!
//! It fails open: whatever goes wrong (bad input, a transcript that cannot be read, a state
//! that cannot be written, an agent of an unknown version) the call runs, the answer is empty
//! and the problem is one journal line. Nothing but the agent's protocol JSON is ever written
//! to standard output.

mod session;
mod state;

use crate::config;
use crate::journal::Line;
use crate::stored;
use agentwatch_hooks::{Agent, PreToolEvent, answer, parse_event};
use detect_core::{DetectConfig, call_identity};
use recovery_policy::hook_ladder::{
    ActMode, HookAction, LadderConfig, LadderDecision, PendingEvent,
};
use std::io::Read;
use std::path::{Path, PathBuf};

pub use session::SessionRead;
pub use state::{HookState, state_path};

/// What one hook call needs besides its standard input.
#[derive(Debug, Clone)]
pub struct HookSetup {
    /// `[act]`.
    pub ladder: LadderConfig,
    /// `[watchdog.detector]`.
    pub detector: DetectConfig,
    /// Where the per-session states are kept (`$XDG_STATE_HOME/agentwatch/hooks`).
    pub state_dir: PathBuf,
    /// The opencode server of a session whose plugin names none (`[opencode] servers`' first).
    pub opencode_url: Option<String>,
    /// The opencode servers' password (`[opencode] password_env`'s variable), never logged.
    pub opencode_password: Option<String>,
}

/// What the hook answers and what it did.
#[derive(Debug)]
pub struct HookAnswer {
    /// Standard output, in the agent's protocol (empty: the call runs).
    pub stdout: Vec<u8>,
    /// The decision, when one was made (none when the hook failed open early).
    pub decision: Option<LadderDecision>,
    /// The session and the call the decision is about, for the watch's record of refusals.
    pub session_id: Option<String>,
    /// The call as shown in the messages.
    pub shown: Option<String>,
    /// The journal line of this call.
    pub line: Line,
}

/// Options of `agentwatch hook AGENT`.
#[derive(Debug, Clone, Default)]
pub struct HookOptions {
    /// `--config FILE`.
    pub config: Option<PathBuf>,
    /// `--db PATH`: the store, beside which the states are kept (`hooks/`).
    pub db: Option<PathBuf>,
    /// `--now`: the time (tests); default the clock.
    pub now: Option<i64>,
}

/// `agentwatch hook AGENT` as a process: the event read from `stdin` (bounded), answered, the
/// journal line appended to `hooks/hook.log` beside the store; standard output's bytes
/// returned. Never fails: a configuration that does not load is the defaults (and a line).
pub fn run_process(agent: Agent, stdin: &mut dyn Read, options: &HookOptions) -> Vec<u8> {
    let env = &config::process_env;
    let now = crate::clock::now_or_clock(options.now);
    let (config, problem) = match config::load(options.config.as_deref(), &[], env) {
        Ok(loaded) => (loaded.config, None),
        Err(e) => (config::Config::default(), Some(e.to_string())),
    };
    let state_dir = stored::store_path(&config, options.db.as_deref(), env)
        .ok()
        .and_then(|db| db.parent().map(|dir| dir.join("hooks")))
        .unwrap_or_else(|| std::env::temp_dir().join("agentwatch-hooks"));
    install_journal(&state_dir);
    let setup = HookSetup {
        ladder: config.act,
        detector: config.watchdog.detector.clone(),
        state_dir,
        opencode_url: config.opencode.servers.first().cloned(),
        opencode_password: env(&config.opencode.password_env),
    };
    let mut bytes = Vec::new();
    let read = stdin
        .take(agentwatch_hooks::event::MAX_EVENT_BYTES as u64 + 1)
        .read_to_end(&mut bytes);
    let answered = match read {
        Ok(_) => answer(agent, &bytes, &setup, now),
        Err(e) => failed_open(
            Line::info("hook", now).field("agent", agent),
            format!("standard input: {e}"),
        ),
    };
    let line = match problem {
        Some(problem) => answered
            .line
            .at_least(crate::journal::Priority::Warning)
            .field(
                "warning",
                format!("configuration not loaded, defaults used: {problem}"),
            ),
        None => answered.line,
    };
    line.emit();
    answered.stdout
}

/// The hook's journal: its own file (`hooks/hook.log`, kept under about 1 MiB: the previous one
/// is `hook.log.1`), since the agent owns its standard streams.
fn install_journal(state_dir: &Path) {
    const MAX_LOG: u64 = 1 << 20;
    if std::fs::create_dir_all(state_dir).is_err() {
        return;
    }
    let path = state_dir.join("hook.log");
    if std::fs::metadata(&path).is_ok_and(|m| m.len() > MAX_LOG) {
        let _ = std::fs::rename(&path, state_dir.join("hook.log.1"));
    }
    if let Ok(file) = std::fs::File::options()
        .create(true)
        .append(true)
        .open(&path)
    {
        let journal = crate::journal::Journal::new(file, false);
        let _ = tracing_core::dispatcher::set_global_default(tracing_core::Dispatch::new(journal));
    }
}

/// Answers one pre-tool event of `agent` (`stdin`) at `now` (unix seconds).
pub fn answer(agent: Agent, stdin: &[u8], setup: &HookSetup, now: i64) -> HookAnswer {
    let line = Line::info("hook", now).field("agent", agent);
    let event = match parse_event(agent, stdin) {
        Ok(event) => event,
        Err(e) => return failed_open(line, format!("event: {e}")),
    };
    let line = line.field("session", &event.session_id);
    if setup.ladder.mode == ActMode::Off {
        return HookAnswer {
            stdout: Vec::new(),
            decision: None,
            session_id: Some(event.session_id),
            shown: None,
            line: line.field("decision", "off"),
        };
    }
    match judge(&event, setup) {
        Ok((decision, shown)) => {
            let stdout = answer::render(agent, decision.action.as_ref());
            let line = line
                .field("decision", decision.name_str())
                .field("call", crate::text::escape_control(&shown))
                .field("reason", &decision.reason);
            let line = if decision.action.is_some() {
                line.at_least(crate::journal::Priority::Warning)
            } else {
                line
            };
            HookAnswer {
                stdout,
                decision: Some(decision),
                session_id: Some(event.session_id),
                shown: Some(shown),
                line,
            }
        }
        Err(problem) => failed_open(line, problem),
    }
}

/// Let the call run, and say why in the journal.
fn failed_open(line: Line, problem: String) -> HookAnswer {
    HookAnswer {
        stdout: Vec::new(),
        decision: None,
        session_id: None,
        shown: None,
        line: line
            .at_least(crate::journal::Priority::Warning)
            .field("outcome", "allowed")
            .field("problem", crate::text::escape_control(&problem)),
    }
}

/// Observe the session, decide on the pending call, keep the state: the decision and the call
/// as shown.
fn judge(event: &PreToolEvent, setup: &HookSetup) -> Result<(LadderDecision, String), String> {
    let mut held = state::Held::open(setup, event)?;
    let read = session::read(event, setup, &mut held.state)?;
    let pending_call = read.pending;
    let shown = crate::text::shown_call(&pending_call);
    let key = call_identity(&pending_call.tool, &pending_call.input);
    let detector = held.state.detector(&setup.detector)?;
    let pending = detector.pending(&pending_call);
    let event = PendingEvent {
        pending,
        returned: held.state.returned(&key),
        call_key: key,
        shown: shown.clone(),
        can: answer::can(event.agent),
    };
    let decision = held.state.ladder.decide(&setup.ladder, &event);
    if matches!(
        decision.action,
        Some(HookAction::Refuse(_) | HookAction::Stop(_))
    ) {
        held.state.refused = held.state.refused.saturating_add(1);
    }
    held.save()?;
    Ok((decision, shown))
}

/// The action of a decision, if any: what the answer carries.
pub fn action_of(decision: &LadderDecision) -> Option<&HookAction> {
    decision.action.as_ref()
}
