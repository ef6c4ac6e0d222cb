//! Session restart guard for agent-deck: restart critical sessions that died, and conductors whose
//! Telegram poller died, without ever restart-looping the host.
//!
//! # Flow: tick, re-check, restart, result
//!
//! 1. [`GuardEvent::Tick`]: the caller lists the sessions ([`SessionObservation`], built from
//!    `agent-deck list` / `session show --json`, the opt-in flag file and the poller scan). The
//!    policy picks at most **one** candidate and answers `recheck` (action [`GuardAction::Recheck`]);
//!    every other candidate is `deferred` (a wait, never a drop: it is reconsidered next tick, the
//!    longest-erroring first) or held by a guard.
//! 2. [`GuardEvent::Recheck`]: just before restarting, the caller re-reads that session's status
//!    (and last output) and feeds the fresh observation back. The policy re-applies **every** rule
//!    to it, so an unsolicited or late re-check can never bypass a guard. A session that recovered,
//!    was stopped, or cannot be read is not restarted; otherwise the answer is `restart`
//!    ([`GuardAction::Restart`]) and the restart is counted from that moment.
//! 3. [`GuardEvent::RestartResult`]: the caller feeds back what `session restart --json` said
//!    (the agent-deck adapter's `restart_reply`). `"skipped": true` is a **refusal** (someone else's guard fired):
//!    neither a success nor a failure, and its slot is not given back.
//!
//! # Rules (decisions.md section 3; defaults in brackets)
//!
//! * Critical: title starts with `conductor-`, group `conductor` or `watchers`, `is_conductor`, or
//!   the opt-in flag file (`opt_in`, an input boolean). Other sessions are never restarted.
//! * Triggers: a critical session in `error`; or a conductor (`is_conductor`, `conductor-` title or
//!   `conductor` group) with a `plugin:telegram@...` channel, alive (running/waiting/idle) and
//!   `pollers == 0` live pollers owning its state dir, at most once per `poller_dedup` \[3600 s\];
//!   a poller restart that failed does not count, so the next tick retries it (and two failures
//!   in a row escalate, as for any restart).
//! * `stopped` sessions are never restarted (the user stopped them). Auth-held sessions are never
//!   restarted; the first sighting of a hold escalates (`auth-hold`), once per hold.
//! * Per session at most `per_session_limit` \[3\] restarts in any `window` \[300 s\] (a restart at `t`
//!   counts while `now - t < window`); hitting the limit escalates once per full window.
//! * Globally one restart per `global_spacing` \[60 s\], measured from the later of the decision and
//!   the reported result.
//! * A restarted session is left alone for `quiet_after_restart` \[60 s\].
//! * A rate limit (`429` as a number, `rate limit`, `rate_limit`, `rate-limit`, `too many requests`,
//!   any case) in the restart's reply or the session's last output backs the session off
//!   `rate_limit_backoff` \[900 s\] and escalates (once per back-off).
//! * `failures_before_escalation` \[2\] consecutive failed restarts escalate (once per run of
//!   failures).
//! * Dry-run only marks the actions (restarts and escalations); decisions are identical.
//!
//! # Decisions
//!
//! | name | when |
//! |---|---|
//! | `not-critical` | a non-critical session entered `error` (logged once per episode); left alone |
//! | `auth-hold-escalated` | first sighting of an auth hold; action: escalate `auth-hold` |
//! | `auth-held` | still auth-held; never restarted |
//! | `backing-off` | inside a rate-limit back-off |
//! | `quiet-after-restart` | restarted less than `quiet_after_restart` ago |
//! | `restart-limit-escalated` | the per-session window is full; action: escalate `restart-limit` |
//! | `restart-limit` | the window is still full; already escalated for it |
//! | `poller-dedup` | poller missing, but the conductor was restarted for it less than `poller_dedup` ago |
//! | `rate-limit-backoff` | a rate limit was seen; back-off starts; action: escalate `rate-limit` |
//! | `deferred` | global spacing not over, or another session restarts first; reconsidered next tick |
//! | `recheck` | the tick's chosen candidate; action: re-read its status, then feed a `recheck` |
//! | `stopped` | re-check says `stopped`: never restarted |
//! | `status-unreadable` | re-check could not read the status: not restarting now |
//! | `recovered` | re-check says the session is fine (or its poller is back): not restarting |
//! | `restart` | re-check confirms; action: `session restart --json` |
//! | `restart-succeeded` | result: restarted |
//! | `restart-refused` | result: `"skipped": true`; not a success, not a failure |
//! | `restart-failed` | result: failed |
//! | `restart-failed-escalated` | result: failed for the Nth time in a row; action: escalate `restart-failed` |
//! | `unexpected-result` | a result with no restart pending for that session; ignored |

use crate::{Decision, Policy, PolicyState, UnixSeconds, decision_names, elapsed};
use serde::{Deserialize, Deserializer, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// Tunables of the restart guard; defaults follow the design.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RestartGuardConfig {
    /// Most restarts of one session within `window`.
    pub per_session_limit: u32,
    /// The per-session sliding window (seconds).
    pub window: u32,
    /// Least time between two restarts of any sessions (seconds).
    pub global_spacing: u32,
    /// A restarted session is left alone this long (seconds).
    pub quiet_after_restart: u32,
    /// Back-off after a rate limit (seconds).
    pub rate_limit_backoff: u32,
    /// Least time between two poller-liveness restarts of one conductor (seconds).
    pub poller_dedup: u32,
    /// Consecutive failed restarts that escalate.
    pub failures_before_escalation: u32,
    /// Mark actions as a dry run; decisions are unchanged.
    pub dry_run: bool,
}

impl Default for RestartGuardConfig {
    fn default() -> Self {
        Self {
            per_session_limit: 3,
            window: 300,
            global_spacing: 60,
            quiet_after_restart: 60,
            rate_limit_backoff: 900,
            poller_dedup: 3600,
            failures_before_escalation: 2,
            dry_run: false,
        }
    }
}

/// An agent-deck session status (`StatusString`), compared case-insensitively.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum SessionStatus {
    Running,
    Waiting,
    Idle,
    Error,
    Stopped,
    Queued,
    /// A status string this crate does not know (agent-deck prints `unknown` for `starting`).
    Other(String),
    /// The status could not be read (absent or `null`).
    #[default]
    Unreadable,
}

impl SessionStatus {
    /// Reads a status string; `None` is [`SessionStatus::Unreadable`].
    pub fn parse(text: Option<&str>) -> Self {
        let Some(text) = text else {
            return Self::Unreadable;
        };
        match text.trim().to_ascii_lowercase().as_str() {
            "running" => Self::Running,
            "waiting" => Self::Waiting,
            "idle" => Self::Idle,
            "error" => Self::Error,
            "stopped" => Self::Stopped,
            "queued" => Self::Queued,
            "" => Self::Unreadable,
            other => Self::Other(other.to_owned()),
        }
    }

    /// Running, waiting or idle: the session's process is up.
    pub fn is_alive(&self) -> bool {
        matches!(self, Self::Running | Self::Waiting | Self::Idle)
    }

    /// The status as agent-deck prints it.
    pub fn as_str(&self) -> &str {
        match self {
            Self::Running => "running",
            Self::Waiting => "waiting",
            Self::Idle => "idle",
            Self::Error => "error",
            Self::Stopped => "stopped",
            Self::Queued => "queued",
            Self::Other(text) => text,
            Self::Unreadable => "unreadable",
        }
    }
}

impl<'de> Deserialize<'de> for SessionStatus {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text: Option<String> = Option::deserialize(deserializer)?;
        Ok(Self::parse(text.as_deref()))
    }
}

/// agent-deck's `auth_hold` object (`session show --json`, HEAD): present only while held.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
pub struct AuthHold {
    #[serde(default)]
    pub reason: String,
}

/// What the caller knows about one session. Field names follow agent-deck's JSON.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
pub struct SessionObservation {
    pub id: String,
    #[serde(default)]
    pub title: String,
    #[serde(default)]
    pub group: Option<String>,
    #[serde(default)]
    pub is_conductor: bool,
    /// The opt-in flag file `autorestart/<id>` exists.
    #[serde(default)]
    pub opt_in: bool,
    #[serde(default)]
    pub status: SessionStatus,
    #[serde(default)]
    pub auth_hold: Option<AuthHold>,
    #[serde(default)]
    pub channels: Vec<String>,
    /// Live Telegram pollers owning this session's state dir; `None` when not checked.
    #[serde(default)]
    pub pollers: Option<u32>,
    /// The session's last output (`session output -q`), checked for rate limits.
    #[serde(default)]
    pub last_output: Option<String>,
}

impl SessionObservation {
    /// Why the session is critical (restartable), or `None`.
    pub fn critical_because(&self) -> Option<&'static str> {
        if self.is_conductor {
            Some("is_conductor")
        } else if self.title.starts_with("conductor-") {
            Some("conductor- title")
        } else if self.group.as_deref() == Some("conductor") {
            Some("conductor group")
        } else if self.group.as_deref() == Some("watchers") {
            Some("watchers group")
        } else if self.opt_in {
            Some("opt-in flag")
        } else {
            None
        }
    }

    /// A conductor: `is_conductor`, a `conductor-` title or the `conductor` group.
    pub fn is_a_conductor(&self) -> bool {
        self.is_conductor
            || self.title.starts_with("conductor-")
            || self.group.as_deref() == Some("conductor")
    }

    /// Has the Telegram channel (`plugin:telegram@...`).
    pub fn has_telegram(&self) -> bool {
        self.channels
            .iter()
            .any(|c| c.starts_with("plugin:telegram@"))
    }

    fn label(&self) -> String {
        if self.title.is_empty() {
            self.id.clone()
        } else {
            format!("{} ({})", self.title, self.id)
        }
    }

    /// Alive, not auth-held, and nothing that would restart it (not in error, its poller there):
    /// the trouble an escalation was about is over.
    pub fn is_fine(&self) -> bool {
        self.status.is_alive() && self.auth_hold.is_none() && self.trigger().is_none()
    }

    fn trigger(&self) -> Option<Trigger> {
        if self.status == SessionStatus::Error {
            Some(Trigger::Error)
        } else if self.status.is_alive()
            && self.is_a_conductor()
            && self.has_telegram()
            && self.pollers == Some(0)
        {
            Some(Trigger::PollerMissing)
        } else {
            None
        }
    }
}

/// Whether `text` mentions a rate limit: `429` as a whole number, `rate limit`, `rate_limit`,
/// `rate-limit` or `too many requests`, case-insensitive.
pub fn mentions_rate_limit(text: &str) -> bool {
    let lower = text.to_lowercase();
    if [
        "rate limit",
        "rate_limit",
        "rate-limit",
        "too many requests",
    ]
    .iter()
    .any(|p| lower.contains(p))
    {
        return true;
    }
    let bytes = lower.as_bytes();
    lower.match_indices("429").any(|(start, _)| {
        let before = start.checked_sub(1).and_then(|i| bytes.get(i));
        let after = bytes.get(start + 3);
        !before.is_some_and(u8::is_ascii_digit) && !after.is_some_and(u8::is_ascii_digit)
    })
}

/// What `agent-deck session restart <id> --json` answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RestartReply {
    /// Restarted (an optional warning).
    Restarted { warning: Option<String> },
    /// `"skipped": true`: agent-deck refused (freshness guard, auth hold...).
    Refused { reason: String },
    /// Non-zero exit, `"success": false`, or a reply that cannot be read.
    Failed { error: String },
}

const MAX_QUOTED: usize = 200;

/// `text` trimmed and cut after 200 characters (with `...`): how replies and outputs are quoted
/// in decisions. Adapters that read replies quote with it too.
pub fn clip(text: &str) -> String {
    let text = text.trim();
    match text.char_indices().nth(MAX_QUOTED) {
        Some((cut, _)) => format!("{}...", &text[..cut]),
        None => text.to_owned(),
    }
}

impl RestartReply {
    fn text(&self) -> &str {
        match self {
            Self::Restarted { warning } => warning.as_deref().unwrap_or(""),
            Self::Refused { reason } => reason,
            Self::Failed { error } => error,
        }
    }
}

/// The result of a restart the policy decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RestartResult {
    pub session: String,
    pub reply: RestartReply,
    /// The session's last output read after the restart, if the caller read it.
    pub last_output: Option<String>,
}

/// What the caller saw. A listing and a re-check deserialise from their timeline form
/// (`agentwatch replay`, `docs/replay.md`): `{"sessions": [SESSION, ...]}`, `{"recheck":
/// SESSION}`. A restart's result is what agent-deck printed, which only its adapter reads
/// (`agentwatch_agentdeck::cli::restart_reply`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum GuardEvent {
    /// The session listing.
    #[serde(rename = "sessions")]
    Tick(Vec<SessionObservation>),
    /// The fresh observation of the session a `recheck` named.
    Recheck(SessionObservation),
    /// What the restart answered.
    #[serde(skip_deserializing)]
    RestartResult(RestartResult),
}

/// Why a session is a restart candidate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Trigger {
    /// A critical session in `error`.
    Error,
    /// A live conductor with the Telegram channel and no live poller.
    PollerMissing,
}

/// Kinds of escalation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Severity {
    AuthHold,
    RestartLimit,
    RateLimit,
    RestartFailed,
}

decision_names! {
    /// The machine names of the restart guard's decisions (see the module docs).
    pub enum GuardDecisionName {
        NotCritical => "not-critical",
        AuthHoldEscalated => "auth-hold-escalated",
        AuthHeld => "auth-held",
        BackingOff => "backing-off",
        QuietAfterRestart => "quiet-after-restart",
        RestartLimitEscalated => "restart-limit-escalated",
        RestartLimit => "restart-limit",
        PollerDedup => "poller-dedup",
        RateLimitBackoff => "rate-limit-backoff",
        Deferred => "deferred",
        Recheck => "recheck",
        Stopped => "stopped",
        StatusUnreadable => "status-unreadable",
        Recovered => "recovered",
        Restart => "restart",
        RestartSucceeded => "restart-succeeded",
        RestartRefused => "restart-refused",
        RestartFailed => "restart-failed",
        RestartFailedEscalated => "restart-failed-escalated",
        UnexpectedResult => "unexpected-result",
    }
}

/// What the caller must do.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum GuardAction {
    /// Re-read this session's status (and last output) now and feed it back as a re-check.
    Recheck { session: String, trigger: Trigger },
    /// `agent-deck [-p P] session restart <session> --json`, then feed back the result.
    Restart {
        session: String,
        trigger: Trigger,
        dry_run: bool,
    },
    /// Tell a person (log, Telegram...). `dry_run` (written only when true) marks a dry run's
    /// escalation as it marks a restart: the caller tells no one.
    Escalate {
        session: String,
        severity: Severity,
        message: String,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        dry_run: bool,
    },
}

/// A decision of this policy.
pub type GuardDecision = Decision<GuardDecisionName, GuardAction>;

/// What the guard remembers about one session.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct SessionRecord {
    /// Restart decisions still inside the window.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub restarts: Vec<i64>,
    /// The last restart (decision or reported result, whichever is later).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_restart_at: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backoff_until: Option<i64>,
    /// When this error (or trigger) episode was first seen; orders deferred candidates.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trouble_since: Option<i64>,
    /// The oldest restart of the full window that was escalated (one escalation per window).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit_escalated_for: Option<i64>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub auth_hold_escalated: bool,
    #[serde(skip_serializing_if = "is_zero")]
    pub consecutive_failures: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub poller_restart_at: Option<i64>,
    /// A restart decided at this time whose result is not in yet.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub awaiting_result_since: Option<i64>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// What the guard remembers between runs.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct RestartGuardState {
    /// The last restart of any session.
    pub last_restart_at: Option<i64>,
    pub sessions: BTreeMap<String, SessionRecord>,
}

impl PolicyState for RestartGuardState {
    const POLICY: &'static str = "restart-guard";
    const VERSION: u32 = 1;
}

use GuardDecisionName as Name;

fn add(t: i64, secs: u32) -> i64 {
    t.saturating_add(i64::from(secs))
}

impl SessionRecord {
    fn restarts_in_window(
        &self,
        config: &RestartGuardConfig,
        now: UnixSeconds,
    ) -> impl Iterator<Item = i64> + '_ {
        let window = i64::from(config.window);
        self.restarts
            .iter()
            .copied()
            .filter(move |&t| elapsed(now, t) < window)
    }

    fn forget_the_future(&mut self, now: UnixSeconds) {
        for t in self
            .restarts
            .iter_mut()
            .chain(self.last_restart_at.iter_mut())
        {
            *t = (*t).min(now);
        }
        for t in [
            &mut self.trouble_since,
            &mut self.poller_restart_at,
            &mut self.awaiting_result_since,
        ]
        .into_iter()
        .flatten()
        {
            *t = (*t).min(now);
        }
    }

    fn prune(&mut self, config: &RestartGuardConfig, now: UnixSeconds) {
        let window = i64::from(config.window);
        self.restarts.retain(|&t| elapsed(now, t) < window);
        if self.backoff_until.is_some_and(|until| until <= now) {
            self.backoff_until = None;
        }
        if self
            .last_restart_at
            .is_some_and(|t| elapsed(now, t) >= i64::from(config.quiet_after_restart))
        {
            self.last_restart_at = None;
        }
        // A result that never came: after a window, stop waiting for it.
        if self
            .awaiting_result_since
            .is_some_and(|t| elapsed(now, t) >= i64::from(config.window))
        {
            self.awaiting_result_since = None;
        }
        if self
            .poller_restart_at
            .is_some_and(|t| elapsed(now, t) >= i64::from(config.poller_dedup))
        {
            self.poller_restart_at = None;
        }
        if self.restarts.is_empty() {
            self.limit_escalated_for = None;
        }
    }

    fn is_empty(&self) -> bool {
        *self == Self::default()
    }
}

enum Consider {
    Nothing,
    Decided(GuardDecision),
    Candidate { trigger: Trigger, since: i64 },
}

impl RestartGuardState {
    /// Applies one observation at `now` and returns its decisions, in a stable order.
    pub fn handle(
        &mut self,
        config: &RestartGuardConfig,
        event: &GuardEvent,
        now: UnixSeconds,
    ) -> Vec<GuardDecision> {
        self.forget_the_future(config, now);
        let decisions = match event {
            GuardEvent::Tick(sessions) => self.on_tick(config, sessions, now),
            GuardEvent::Recheck(fresh) => vec![self.on_recheck(config, fresh, now)],
            GuardEvent::RestartResult(result) => vec![self.on_result(config, result, now)],
        };
        self.sessions.retain(|_, record| !record.is_empty());
        decisions
    }

    fn forget_the_future(&mut self, config: &RestartGuardConfig, now: UnixSeconds) {
        if let Some(t) = self.last_restart_at.as_mut() {
            *t = (*t).min(now);
        }
        for record in self.sessions.values_mut() {
            record.forget_the_future(now);
            if let Some(until) = record.backoff_until.as_mut() {
                *until = (*until).min(add(now, config.rate_limit_backoff));
            }
            record.prune(config, now);
        }
        if self
            .last_restart_at
            .is_some_and(|t| elapsed(now, t) >= i64::from(config.global_spacing))
        {
            self.last_restart_at = None;
        }
    }

    fn global_wait(&self, config: &RestartGuardConfig, now: UnixSeconds) -> Option<(i64, i64)> {
        let last = self.last_restart_at?;
        let left = elapsed(add(last, config.global_spacing), now);
        (left > 0).then_some((elapsed(now, last), left))
    }

    /// Forgets the trouble episode of a session that is fine (or stopped).
    fn settle(&mut self, obs: &SessionObservation) {
        if let Some(record) = self.sessions.get_mut(&obs.id) {
            record.trouble_since = None;
            if obs.auth_hold.is_none() {
                record.auth_hold_escalated = false;
            }
            if obs.status.is_alive() {
                record.consecutive_failures = 0;
            }
        }
    }

    fn on_tick(
        &mut self,
        config: &RestartGuardConfig,
        sessions: &[SessionObservation],
        now: UnixSeconds,
    ) -> Vec<GuardDecision> {
        let mut decisions = Vec::new();
        let mut candidates: Vec<(Trigger, i64, &SessionObservation)> = Vec::new();
        let mut seen = BTreeSet::new();
        for obs in sessions {
            if !seen.insert(obs.id.as_str()) {
                continue; // a duplicate id: the first listing wins
            }
            match self.consider(config, obs, now) {
                Consider::Nothing => {}
                Consider::Decided(decision) => decisions.push(decision),
                Consider::Candidate { trigger, since } => candidates.push((trigger, since, obs)),
            }
        }
        for (id, record) in &mut self.sessions {
            if !seen.contains(id.as_str()) {
                // Gone from the listing: its episode ends; its restart history stays.
                record.trouble_since = None;
                record.auth_hold_escalated = false;
                record.consecutive_failures = 0;
            }
        }
        candidates.sort_by(|a, b| (a.0, a.1, &a.2.id).cmp(&(b.0, b.1, &b.2.id)));
        let mut chosen: Option<&str> = None;
        for (trigger, _, obs) in candidates {
            let decision = if let Some(first) = chosen {
                GuardDecision::new(
                    Name::Deferred,
                    format!("another restart goes first ({first}); deferred, not dropped"),
                )
            } else if let Some((ago, left)) = self.global_wait(config, now) {
                GuardDecision::new(
                    Name::Deferred,
                    format!(
                        "global spacing: last restart {ago} s ago, waiting {left} s more; deferred, not dropped"
                    ),
                )
            } else {
                chosen = Some(&obs.id);
                let what = match trigger {
                    Trigger::Error => "in error",
                    Trigger::PollerMissing => "telegram poller missing",
                };
                GuardDecision::new(
                    Name::Recheck,
                    format!(
                        "{} {what}; re-read its status before restarting",
                        obs.label()
                    ),
                )
                .with_action(GuardAction::Recheck {
                    session: obs.id.clone(),
                    trigger,
                })
            };
            decisions.push(decision.about(&obs.id));
        }
        decisions
    }

    fn consider(
        &mut self,
        config: &RestartGuardConfig,
        obs: &SessionObservation,
        now: UnixSeconds,
    ) -> Consider {
        let Some(trigger) = obs.trigger() else {
            self.settle(obs);
            return Consider::Nothing;
        };
        let record = self.sessions.entry(obs.id.clone()).or_default();
        let first_sighting = record.trouble_since.is_none();
        let since = *record.trouble_since.get_or_insert(now);
        if obs.critical_because().is_none() {
            // Only an error can trigger here: a poller trigger needs a conductor, which is critical.
            return if first_sighting {
                Consider::Decided(not_critical(obs))
            } else {
                Consider::Nothing
            };
        }
        match self.hold(config, obs, trigger, now) {
            Some(decision) => Consider::Decided(decision),
            None => Consider::Candidate { trigger, since },
        }
    }

    /// Every per-session rule, in order; `None` when the session may restart (global spacing aside).
    fn hold(
        &mut self,
        config: &RestartGuardConfig,
        obs: &SessionObservation,
        trigger: Trigger,
        now: UnixSeconds,
    ) -> Option<GuardDecision> {
        let label = obs.label();
        let record = self.sessions.entry(obs.id.clone()).or_default();
        let decision = if let Some(hold) = &obs.auth_hold {
            auth_hold(config, record, obs, hold, &label)
        } else if let Some(decision) = wait_hold(config, record, obs, &label, trigger, now) {
            decision
        } else {
            let output = obs
                .last_output
                .as_deref()
                .filter(|o| mentions_rate_limit(o))?;
            let seen_in = format!("last output: {}", clip(output));
            rate_limit_backoff(config, record, &obs.id, &label, &seen_in, now)
        };
        Some(decision.about(&obs.id))
    }

    fn on_recheck(
        &mut self,
        config: &RestartGuardConfig,
        fresh: &SessionObservation,
        now: UnixSeconds,
    ) -> GuardDecision {
        let id = fresh.id.as_str();
        match fresh.status {
            SessionStatus::Stopped => {
                self.settle(fresh);
                return GuardDecision::new(
                    Name::Stopped,
                    "status is stopped at re-check: stopped by the user, never restarted",
                )
                .about(id);
            }
            SessionStatus::Unreadable => {
                return GuardDecision::new(
                    Name::StatusUnreadable,
                    "status unreadable at re-check; not restarting now",
                )
                .about(id);
            }
            _ => {}
        }
        let Some(trigger) = fresh.trigger() else {
            self.settle(fresh);
            let status = fresh.status.as_str();
            return GuardDecision::new(
                Name::Recovered,
                format!("status is {status} at re-check and no trigger holds; not restarting"),
            )
            .about(id);
        };
        let Some(critical) = fresh.critical_because() else {
            return not_critical(fresh);
        };
        if let Some(decision) = self.hold(config, fresh, trigger, now) {
            return decision;
        }
        if let Some((ago, left)) = self.global_wait(config, now) {
            return GuardDecision::new(
                Name::Deferred,
                format!("global spacing: last restart {ago} s ago, waiting {left} s more; deferred, not dropped"),
            )
            .about(id);
        }
        let record = self.sessions.entry(fresh.id.clone()).or_default();
        let since = *record.trouble_since.get_or_insert(now);
        record.restarts.push(now);
        record.last_restart_at = Some(now);
        record.awaiting_result_since = Some(now);
        if trigger == Trigger::PollerMissing {
            record.poller_restart_at = Some(now);
        }
        let count = record.restarts_in_window(config, now).count();
        self.last_restart_at = Some(now);
        let what = match trigger {
            Trigger::Error => format!("in error for {} s", now.saturating_sub(since)),
            Trigger::PollerMissing => "alive but its telegram poller is missing".to_owned(),
        };
        GuardDecision::new(
            Name::Restart,
            format!(
                "{} {what} (critical: {critical}); confirmed at re-check, restarting ({count} of {} in {} s)",
                fresh.label(),
                config.per_session_limit,
                config.window
            ),
        )
        .about(id)
        .with_action(GuardAction::Restart { session: fresh.id.clone(), trigger, dry_run: config.dry_run })
    }

    fn on_result(
        &mut self,
        config: &RestartGuardConfig,
        result: &RestartResult,
        now: UnixSeconds,
    ) -> GuardDecision {
        let id = result.session.as_str();
        let pending = self
            .sessions
            .get(id)
            .is_some_and(|r| r.awaiting_result_since.is_some());
        let (true, Some(record)) = (pending, self.sessions.get_mut(id)) else {
            return GuardDecision::new(
                Name::UnexpectedResult,
                "restart result with no restart pending for this session; ignored",
            )
            .about(id);
        };
        // A poller restart is the one whose decision started the poller dedup.
        let for_poller = record.poller_restart_at.is_some()
            && record.poller_restart_at == record.awaiting_result_since;
        record.awaiting_result_since = None;
        record.last_restart_at = Some(record.last_restart_at.map_or(now, |t| t.max(now)));
        self.last_restart_at = Some(self.last_restart_at.map_or(now, |t| t.max(now)));

        if let Some(seen_in) = rate_limit_in(result) {
            return rate_limit_backoff(config, record, id, id, &seen_in, now).about(id);
        }
        let decision = match &result.reply {
            RestartReply::Restarted { warning } => {
                record.consecutive_failures = 0;
                record.trouble_since = None;
                let warning = warning
                    .as_deref()
                    .map(|w| format!(" (warning: {})", clip(w)))
                    .unwrap_or_default();
                GuardDecision::new(
                    Name::RestartSucceeded,
                    format!("agent-deck restarted the session{warning}; the next tick verifies it"),
                )
            }
            RestartReply::Refused { reason } => GuardDecision::new(
                Name::RestartRefused,
                format!(
                    "agent-deck refused the restart (skipped: {}); neither a success nor a failure",
                    clip(reason)
                ),
            ),
            RestartReply::Failed { error } => restart_failed(config, record, id, error, for_poller),
        };
        decision.about(id)
    }
}

fn not_critical(obs: &SessionObservation) -> GuardDecision {
    GuardDecision::new(
        Name::NotCritical,
        format!(
            "{} is in error but not critical (no conductor- title, conductor/watchers group, is_conductor or opt-in flag); left alone",
            obs.label()
        ),
    )
    .about(&obs.id)
}

fn limit_hold(
    config: &RestartGuardConfig,
    record: &mut SessionRecord,
    obs: &SessionObservation,
    label: &str,
    now: UnixSeconds,
) -> Option<GuardDecision> {
    let in_window: Vec<i64> = record.restarts_in_window(config, now).collect();
    if in_window.len() < usize::try_from(config.per_session_limit).unwrap_or(usize::MAX) {
        return None;
    }
    let oldest = in_window.iter().copied().min().unwrap_or(now);
    let next = elapsed(add(oldest, config.window), now);
    let count = in_window.len();
    let summary = format!(
        "{count} restarts in the last {} s; next allowed in {next} s",
        config.window
    );
    if record.limit_escalated_for == Some(oldest) {
        return Some(GuardDecision::new(
            Name::RestartLimit,
            format!("{summary}; already escalated"),
        ));
    }
    record.limit_escalated_for = Some(oldest);
    let message = format!(
        "{label} keeps crashing: {count} restarts in {} s; needs human attention",
        config.window
    );
    Some(
        GuardDecision::new(
            Name::RestartLimitEscalated,
            format!("{summary}; escalating"),
        )
        .with_action(GuardAction::Escalate {
            session: obs.id.clone(),
            severity: Severity::RestartLimit,
            message,
            dry_run: config.dry_run,
        }),
    )
}

fn rate_limit_backoff(
    config: &RestartGuardConfig,
    record: &mut SessionRecord,
    id: &str,
    label: &str,
    seen_in: &str,
    now: UnixSeconds,
) -> GuardDecision {
    let until = add(now, config.rate_limit_backoff);
    record.backoff_until = Some(until);
    let message = format!(
        "{label} hit a rate limit ({seen_in}); restarts paused for {} s",
        config.rate_limit_backoff
    );
    GuardDecision::new(
        Name::RateLimitBackoff,
        format!(
            "rate limit seen ({seen_in}); backing off {} s, escalating",
            config.rate_limit_backoff
        ),
    )
    .with_action(GuardAction::Escalate {
        session: id.to_owned(),
        severity: Severity::RateLimit,
        message,
        dry_run: config.dry_run,
    })
}

/// A session held for an auth failure: escalated once, then held quietly; never restarted.
fn auth_hold(
    config: &RestartGuardConfig,
    record: &mut SessionRecord,
    obs: &SessionObservation,
    hold: &AuthHold,
    label: &str,
) -> GuardDecision {
    let reason = if hold.reason.is_empty() {
        "auth hold"
    } else {
        hold.reason.as_str()
    };
    if record.auth_hold_escalated {
        return GuardDecision::new(
            Name::AuthHeld,
            format!("held for an auth failure ({reason}); never restarted"),
        );
    }
    record.auth_hold_escalated = true;
    let message = format!(
        "{label} is held for an auth failure ({reason}); a restart cannot fix a credential. Repair the login, then restart it explicitly."
    );
    GuardDecision::new(
        Name::AuthHoldEscalated,
        format!("held for an auth failure ({reason}); escalating, never restarted"),
    )
    .with_action(GuardAction::Escalate {
        session: obs.id.clone(),
        severity: Severity::AuthHold,
        message,
        dry_run: config.dry_run,
    })
}

/// The waits that hold a session back, in order: a rate-limit backoff, the quiet after a
/// restart, the per-session limit, and the poller dedup. `None` when none holds.
fn wait_hold(
    config: &RestartGuardConfig,
    record: &mut SessionRecord,
    obs: &SessionObservation,
    label: &str,
    trigger: Trigger,
    now: UnixSeconds,
) -> Option<GuardDecision> {
    if let Some(until) = record.backoff_until.filter(|&until| until > now) {
        return Some(GuardDecision::new(
            Name::BackingOff,
            format!("rate-limited: backing off, {} s left", elapsed(until, now)),
        ));
    }
    if let Some(last) = record
        .last_restart_at
        .filter(|&t| add(t, config.quiet_after_restart) > now)
    {
        return Some(GuardDecision::new(
            Name::QuietAfterRestart,
            format!(
                "restarted {} s ago; left alone for {} s more",
                elapsed(now, last),
                elapsed(add(last, config.quiet_after_restart), now)
            ),
        ));
    }
    if let Some(decision) = limit_hold(config, record, obs, label, now) {
        return Some(decision);
    }
    let last = record
        .poller_restart_at
        .filter(|&t| trigger == Trigger::PollerMissing && add(t, config.poller_dedup) > now)?;
    Some(GuardDecision::new(
        Name::PollerDedup,
        format!(
            "telegram poller missing, but restarted for it {} s ago; next poller restart in {} s",
            elapsed(now, last),
            elapsed(add(last, config.poller_dedup), now)
        ),
    ))
}

/// Where a restart result shows a rate limit, the reply first, then the last output.
fn rate_limit_in(result: &RestartResult) -> Option<String> {
    let reply_text = result.reply.text();
    if mentions_rate_limit(reply_text) {
        return Some(format!("restart reply: {}", clip(reply_text)));
    }
    result
        .last_output
        .as_deref()
        .filter(|o| mentions_rate_limit(o))
        .map(|o| format!("last output: {}", clip(o)))
}

/// A failed restart: one more failure in a row, escalated when the count reaches
/// `failures_before_escalation`.
fn restart_failed(
    config: &RestartGuardConfig,
    record: &mut SessionRecord,
    id: &str,
    error: &str,
    for_poller: bool,
) -> GuardDecision {
    // A failed poller restart did not restart anything: the dedup (one poller restart per hour)
    // counts only restarts that happened, so the next tick may try again, as agent-deck's own
    // watchdog does; the other guards still hold.
    if for_poller {
        record.poller_restart_at = None;
    }
    record.consecutive_failures = record.consecutive_failures.saturating_add(1);
    let failures = record.consecutive_failures;
    let error = clip(error);
    if failures != config.failures_before_escalation {
        return GuardDecision::new(
            Name::RestartFailed,
            format!("restart failed ({error}); {failures} failure(s) in a row"),
        );
    }
    let message = format!("{id} failed to restart {failures}x consecutively; last error: {error}");
    GuardDecision::new(
        Name::RestartFailedEscalated,
        format!("restart failed ({error}); {failures} failures in a row, escalating"),
    )
    .with_action(GuardAction::Escalate {
        session: id.to_owned(),
        severity: Severity::RestartFailed,
        message,
        dry_run: config.dry_run,
    })
}

impl Policy for RestartGuardState {
    type Config = RestartGuardConfig;
    type Event = GuardEvent;
    type Name = GuardDecisionName;
    type Action = GuardAction;

    /// [`RestartGuardState::handle`].
    fn feed(
        &mut self,
        config: &RestartGuardConfig,
        event: &GuardEvent,
        now: UnixSeconds,
    ) -> Vec<GuardDecision> {
        self.handle(config, event, now)
    }

    /// The first moment a wait that holds back a session in trouble (in error, or its poller
    /// missing) ends: its rate-limit back-off, its quiet time after a restart, its full restart
    /// window, its poller dedup, or the global spacing a deferred candidate waits for. `None`
    /// when no session is in trouble, or none is held by time (auth holds, non-critical
    /// sessions): then only a new listing can change anything. May come early (the session may
    /// recover meanwhile), never late.
    fn next_wakeup(&self, config: &RestartGuardConfig, now: UnixSeconds) -> Option<i64> {
        let limit = usize::try_from(config.per_session_limit).unwrap_or(usize::MAX);
        let mut troubled = false;
        let mut ends: Vec<i64> = Vec::new();
        for record in self.sessions.values().filter(|r| r.trouble_since.is_some()) {
            troubled = true;
            ends.extend(record.backoff_until);
            ends.extend(
                record
                    .last_restart_at
                    .map(|t| add(t, config.quiet_after_restart)),
            );
            ends.extend(
                record
                    .poller_restart_at
                    .map(|t| add(t, config.poller_dedup)),
            );
            let in_window: Vec<i64> = record.restarts_in_window(config, now).collect();
            if in_window.len() >= limit {
                ends.extend(in_window.iter().min().map(|&t| add(t, config.window)));
            }
        }
        if troubled {
            ends.extend(self.last_restart_at.map(|t| add(t, config.global_spacing)));
        }
        ends.into_iter().filter(|&t| t > now).min()
    }
}
