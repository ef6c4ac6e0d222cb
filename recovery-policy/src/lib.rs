//! Recovery policies for agentwatch: the decisions that restart, nudge or wait.
//!
//! # Model: Sans-IO
//!
//! Like `quinn-proto` and `str0m`, this crate never performs I/O. It has no clock, reads no file,
//! environment variable or process table, and talks to no network. Every policy is a plain state
//! machine driven by the caller:
//!
//! ```text
//!   (state, observation, now) --policy--> (state', decisions)
//! ```
//!
//! * An *observation* is what the caller saw: a loop report, a session listing, a router reply, the
//!   outcome of an action it performed. `now` is unix seconds, passed in.
//! * A *decision* ([`Decision`]) always carries a short machine `name` (`waiting-second-probe`,
//!   `deferred`, `nudge`, ...) and a `reason`, a sentence a person reads in the journal
//!   ("recovery cooldown, 1740 s left"). Some decisions carry an *action* the caller must perform
//!   (restart, nudge, escalate, ask the router, re-check a session).
//! * Where an action's result matters, the caller feeds it back as another observation (the
//!   restart's outcome, the router's verdict, the fresh status of a session).
//! * The *state* serialises ([`save_state`] / [`load_state`]), so a oneshot caller (a systemd timer)
//!   stores it between runs. A lost or corrupt state starts clean and says so.
//!
//! Dry-run is a flag in each policy's config that only marks the actions (`dry_run: true`): a
//! dry run reaches exactly the decisions a real run would, and the caller performs none of them.
//!
//! # Policies
//!
//! * [`loop_recovery`]: restart a service after two fresh, separate probes confirm a loop, with a
//!   cooldown, an optional router veto and the stream [`notice`].
//! * [`notice`]: the recovery notice file (schema v1) and the splash visibility rule.
//! * [`restart_guard`]: agent-deck session restarts (critical sessions in `error`, conductors whose
//!   Telegram poller died) behind per-session, global, quiet-period and rate-limit guards.
//! * [`waiting_patrol`]: one `report status?` nudge for a child session stuck in `waiting`.
//! * [`hook_ladder`]: inside the agent, what agentwatch's pre-tool hook answers a call: warn,
//!   refuse the looping call, stop the session; a call that breaks the pattern always runs.
//!
//! The rules are those of `decisions.md` section 3; each module documents its decision names.
#![forbid(unsafe_code)]

pub mod hook_ladder;
pub mod loop_recovery;
pub mod notice;
pub mod restart_guard;
mod state;
pub mod waiting_patrol;

pub use state::{LoadedState, PolicyState, StateError, load_state, save_state};

use serde::Serialize;

/// Unix time in seconds, as passed in by the caller.
pub type UnixSeconds = i64;

/// The one contract every policy speaks (after quinn-proto's and str0m's): an event in with `now`,
/// its decisions out, and [`Policy::next_wakeup`]. The state is `self`; the caller owns the clock and performs the actions, feeding
/// their outcomes back as later events (`agentwatch_runtime::drive` does exactly that).
pub trait Policy {
    /// The tunables, passed with every event.
    type Config;
    /// What the caller saw (an observation, or the outcome of an action it performed).
    type Event;
    /// The policy's decision names.
    type Name: DecisionName;
    /// What the policy asks the caller to do.
    type Action;

    /// Applies one event at `now`; its decisions, in the order decided (at least one for an
    /// event that is about something, each with its reason).
    fn feed(
        &mut self,
        config: &Self::Config,
        event: &Self::Event,
        now: UnixSeconds,
    ) -> Vec<Decision<Self::Name, Self::Action>>;

    /// When the policy next has something to decide by time alone (quinn-proto's
    /// `poll_timeout`): the end of a wait that holds something back. Strictly after `now`; `None`
    /// when only a new observation can change anything. The caller calls again then, or at its
    /// own interval if sooner; it never sleeps inside a decision.
    fn next_wakeup(&self, config: &Self::Config, now: UnixSeconds) -> Option<UnixSeconds>;
}

/// A decision's machine name: a closed set per policy, printed in kebab-case.
pub trait DecisionName: Copy + std::fmt::Debug + Eq {
    /// The short machine name, e.g. `waiting-second-probe`.
    fn as_str(self) -> &'static str;
}

/// One decision of a policy: what it decided, why, about which session, and what to do.
///
/// Serialises as `{"decision": NAME, "reason": TEXT[, "session": ID], "action": ACTION|null}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision<N, A> {
    /// Short machine name (see each policy's name enum).
    pub name: N,
    /// One sentence for a person reading the journal.
    pub reason: String,
    /// The session the decision is about, for policies that watch several.
    pub session: Option<String>,
    /// What the caller must do, if anything.
    pub action: Option<A>,
}

impl<N: DecisionName, A> Decision<N, A> {
    pub(crate) fn new(name: N, reason: impl Into<String>) -> Self {
        Self {
            name,
            reason: reason.into(),
            session: None,
            action: None,
        }
    }

    pub(crate) fn about(mut self, session: &str) -> Self {
        self.session = Some(session.to_owned());
        self
    }

    pub(crate) fn with_action(mut self, action: A) -> Self {
        self.action = Some(action);
        self
    }

    /// The decision's machine name as text.
    pub fn name_str(&self) -> &'static str {
        self.name.as_str()
    }
}

impl<N: DecisionName, A: Serialize> Serialize for Decision<N, A> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let fields = 3 + usize::from(self.session.is_some());
        let mut out = serializer.serialize_struct("Decision", fields)?;
        out.serialize_field("decision", self.name.as_str())?;
        out.serialize_field("reason", &self.reason)?;
        if let Some(session) = &self.session {
            out.serialize_field("session", session)?;
        }
        out.serialize_field("action", &self.action)?;
        out.end()
    }
}

/// `now - then`, saturating instead of overflowing on absurd inputs.
pub(crate) fn elapsed(now: UnixSeconds, then: UnixSeconds) -> i64 {
    now.saturating_sub(then)
}

/// Declares a kebab-case decision-name enum with its `as_str`.
macro_rules! decision_names {
    ($(#[$meta:meta])* $vis:vis enum $name:ident { $($(#[$vmeta:meta])* $variant:ident => $text:literal,)* }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        $vis enum $name {
            $($(#[$vmeta])* $variant,)*
        }

        impl $crate::DecisionName for $name {
            fn as_str(self) -> &'static str {
                match self {
                    $(Self::$variant => $text,)*
                }
            }
        }

        impl $name {
            /// Every name of this policy, for documentation and tests.
            pub const ALL: &'static [$name] = &[$(Self::$variant,)*];
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str($crate::DecisionName::as_str(*self))
            }
        }
    };
}
pub(crate) use decision_names;
