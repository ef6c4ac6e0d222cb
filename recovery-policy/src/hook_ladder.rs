//! The hook ladder: what agentwatch's pre-tool hook answers when an agent is about to run a
//! call, one session at a time. Warn first, then refuse the looping call, then stop the session;
//! a call that breaks the pattern always runs, and a session that is not flagged never meets any
//! of it.
//!
//! # Rules (issue 47; `[act]` in the configuration, defaults in brackets)
//!
//! * `mode` \[`block`\]: `off` answers every call with `allow`; `warn` only warns; `block` warns,
//!   then refuses; `stop` warns, refuses, and after `max_blocks` refusals stops the session where
//!   the agent can be stopped.
//! * A call is *the loop's call* when the session is flagged (the detector, on the calls it has
//!   made), the call changes nothing (not an edit or write sent for the first time), and this very
//!   call ran at least `min_repeats` \[3\] times among the session's last 16 calls, returning what
//!   an earlier run returned at least once or failing every time. Any other call is allowed.
//! * The first loop's call of a loop is *warned*: it runs, and the warning reaches the model as
//!   added context where the agent takes it (else the warning is the first refusal). From then
//!   on every loop's call is refused (`block`); after `max_blocks` \[3\] refusals, the next one
//!   stops the session (`stop` mode, agents that can stop; others keep refusing and say so).
//! * The session no longer flagged forgets the ladder: the next loop starts with a warning.
//!
//! # Decisions
//!
//! | name | when |
//! |---|---|
//! | `off` | mode `off`: everything runs |
//! | `not-flagged` | the session is not flagged; the ladder is forgotten |
//! | `changes` | the call would change something (an edit, a write): it runs |
//! | `other-call` | the session is flagged but this call is not the loop's: it runs |
//! | `warn` | the loop's first call: warned (action `Warn`, or `Refuse` where the agent takes no added context) |
//! | `warned` | mode `warn`, warned before: it runs, nothing is said again |
//! | `block` | the loop's call again: refused (action `Refuse`) |
//! | `stop` | refused `max_blocks` times and asked again: the session is stopped (action `Stop`) |

use crate::{Decision, Policy, UnixSeconds, decision_names};
use detect_core::{HOOK_MARKER, PendingCall};
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;

/// How far the hook may go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ActMode {
    /// Every call runs; the hook only answers `allow`.
    Off,
    /// Warn the model once per loop; never refuse.
    Warn,
    /// Warn, then refuse the looping call.
    #[default]
    Block,
    /// Warn, refuse, and after `max_blocks` refusals stop the session.
    Stop,
}

impl ActMode {
    /// Every mode, in order.
    pub const ALL: [ActMode; 4] = [ActMode::Off, ActMode::Warn, ActMode::Block, ActMode::Stop];

    /// The name in the configuration.
    pub fn as_str(self) -> &'static str {
        match self {
            ActMode::Off => "off",
            ActMode::Warn => "warn",
            ActMode::Block => "block",
            ActMode::Stop => "stop",
        }
    }
}

/// The ladder's tunables (`[act]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LadderConfig {
    pub mode: ActMode,
    /// Refusals before the session is stopped (`stop` mode).
    pub max_blocks: u32,
    /// How often a call must have run among the session's last 16 to be the loop's.
    pub min_repeats: u32,
}

impl Default for LadderConfig {
    fn default() -> Self {
        Self {
            mode: ActMode::Block,
            max_blocks: 3,
            min_repeats: 3,
        }
    }
}

/// What the agent lets a hook do (`shared/reference/hooks.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct AgentCan {
    /// Add context to a call that runs (else a warning is a refusal).
    pub add_context: bool,
    /// Stop the session from a pre-tool hook.
    pub stop: bool,
}

/// A call the agent is about to run, as the caller saw it.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct PendingEvent {
    /// What the detector says of it ([`detect_core::SessionDetector::pending`]).
    pub pending: PendingCall,
    /// A key of the call (its identity), to tell one loop's call from another's.
    pub call_key: String,
    /// The call as a person reads it (a command, `Read src/x.py`), already shortened and
    /// redacted by the caller.
    pub shown: String,
    /// What its last run returned, in a line (shortened, redacted), when known.
    pub returned: Option<String>,
    /// What the agent lets the hook do.
    pub can: AgentCan,
}

/// What the caller answers the agent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "message", rename_all = "snake_case")]
pub enum HookAction {
    /// Let the call run with this added context for the model.
    Warn(String),
    /// Refuse the call; the model reads the message.
    Refuse(String),
    /// Refuse the call and stop the session; the model and the user read the message.
    Stop(String),
}

impl HookAction {
    /// The message the model reads.
    pub fn message(&self) -> &str {
        match self {
            HookAction::Warn(m) | HookAction::Refuse(m) | HookAction::Stop(m) => m,
        }
    }
}

decision_names! {
    /// The machine names of the ladder's decisions (see the module docs).
    pub enum LadderDecisionName {
        Off => "off",
        NotFlagged => "not-flagged",
        Changes => "changes",
        OtherCall => "other-call",
        Warn => "warn",
        Warned => "warned",
        Block => "block",
        Stop => "stop",
    }
}

/// One decision of the ladder.
pub type LadderDecision = Decision<LadderDecisionName, HookAction>;

/// One session's ladder: what it was told and how often it was refused.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct LadderState {
    /// The loop's call the session was warned about.
    pub warned: Option<String>,
    /// Loop's calls refused since the warning.
    pub blocks: u32,
    /// The session was stopped.
    pub stopped: bool,
}

impl LadderState {
    /// The decision on one pending call (exactly one, with its reason).
    pub fn decide(&mut self, config: &LadderConfig, event: &PendingEvent) -> LadderDecision {
        use LadderDecisionName as N;
        let pending = &event.pending;
        if config.mode == ActMode::Off {
            return Decision::new(N::Off, "act.mode is off: every call runs");
        }
        if !pending.flagged {
            *self = Self::default();
            return Decision::new(N::NotFlagged, "the session is not flagged");
        }
        if pending.changes {
            return Decision::new(N::Changes, "the call changes something: it runs");
        }
        if !is_loop_call(pending, config) {
            return Decision::new(
                N::OtherCall,
                format!(
                    "the session is flagged, but this call ran {} times of the last 16: it runs",
                    pending.same_calls
                ),
            );
        }
        if self.warned.is_none() {
            return self.warn(event);
        }
        if config.mode == ActMode::Warn {
            return Decision::new(N::Warned, "warned before (act.mode is warn): it runs");
        }
        if config.mode == ActMode::Stop && self.blocks >= config.max_blocks && event.can.stop {
            self.stopped = true;
            let message = stop_message(event, self.blocks);
            return Decision::new(N::Stop, format!("refused {} times: stopped", self.blocks))
                .with_action(HookAction::Stop(message));
        }
        self.blocks = self.blocks.saturating_add(1);
        let message = block_message(event, config, self.blocks);
        Decision::new(
            N::Block,
            format!("the loop's call again: refusal {}", self.blocks),
        )
        .with_action(HookAction::Refuse(message))
    }

    fn warn(&mut self, event: &PendingEvent) -> LadderDecision {
        self.warned = Some(event.call_key.clone());
        let message = warn_message(event);
        let (action, how) = if event.can.add_context {
            (HookAction::Warn(message), "it runs, the model is told why")
        } else {
            (
                HookAction::Refuse(message),
                "refused once, as the agent takes no added context",
            )
        };
        Decision::new(
            LadderDecisionName::Warn,
            format!("the loop's first call: warned, {how}"),
        )
        .with_action(action)
    }
}

/// Whether `pending` is the loop's call: it ran `min_repeats` times among the last calls and
/// either returned what an earlier run did or failed every time.
fn is_loop_call(pending: &PendingCall, config: &LadderConfig) -> bool {
    pending.same_calls >= config.min_repeats.max(1)
        && (pending.echoed > 0 || pending.failed == pending.same_calls)
}

/// What the last runs of the call came to, as a clause: `it failed each time: …`.
fn outcome(event: &PendingEvent) -> String {
    let p = &event.pending;
    let mut out = String::new();
    if p.failed == p.same_calls {
        out.push_str("it failed each time");
    } else if p.echoed + 1 >= p.same_calls {
        out.push_str("it returned the same each time");
    } else {
        out.push_str("it keeps returning what it returned before");
    }
    if let Some(returned) = &event.returned {
        let _ = write!(out, ": `{returned}`");
    }
    out
}

/// `N times in your last M calls`.
fn how_often(pending: &PendingCall) -> String {
    let window = pending
        .last_ago
        .map_or(16, |ago| ago.max(pending.same_calls));
    format!("{} times in your last {window} calls", pending.same_calls)
}

const INSTEAD: &str = "Try something different (read the error, change the code or the command), or stop and say what blocks you.";

fn warn_message(event: &PendingEvent) -> String {
    format!(
        "{HOOK_MARKER} you have run `{}` {}, and {}. Running it again will not change that. {INSTEAD}",
        event.shown,
        how_often(&event.pending),
        outcome(event)
    )
}

fn block_message(event: &PendingEvent, config: &LadderConfig, blocks: u32) -> String {
    let next = match config.mode {
        ActMode::Stop if event.can.stop && blocks >= config.max_blocks => {
            " Asking for it again stops the session.".to_owned()
        }
        ActMode::Stop if event.can.stop => format!(
            " After {} refusals the session is stopped.",
            config.max_blocks
        ),
        _ => String::new(),
    };
    format!(
        "{HOOK_MARKER} this call was not run: `{}` ran {}, and {}. {INSTEAD}{next}",
        event.shown,
        how_often(&event.pending),
        outcome(event)
    )
}

fn stop_message(event: &PendingEvent, blocks: u32) -> String {
    format!(
        "{HOOK_MARKER} the session is stopped: `{}` was refused {blocks} times and asked for again; \
         {}. Say what blocks you.",
        event.shown,
        outcome(event)
    )
}

impl Policy for LadderState {
    type Config = LadderConfig;
    type Event = PendingEvent;
    type Name = LadderDecisionName;
    type Action = HookAction;

    /// [`LadderState::decide`]: one decision per pending call.
    fn feed(
        &mut self,
        config: &LadderConfig,
        event: &PendingEvent,
        _now: UnixSeconds,
    ) -> Vec<LadderDecision> {
        vec![self.decide(config, event)]
    }

    /// The ladder acts only when a call comes.
    fn next_wakeup(&self, _config: &LadderConfig, _now: UnixSeconds) -> Option<UnixSeconds> {
        None
    }
}
