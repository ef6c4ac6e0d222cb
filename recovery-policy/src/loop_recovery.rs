//! Confirmed-loop restart: restart the watched service only when two fresh, separate watchdog
//! probes report the same suspected loop.
//!
//! # Observations ([`LoopEvent`])
//!
//! * a loop report ([`parse_loop_report`]) or the fact that none could be read;
//! * the router's verdict, after the policy asked for it ([`parse_router_reply`]);
//! * the outcome of a restart the policy decided.
//!
//! # Rules (decisions.md section 3), in the order they are applied to a report
//!
//! 1. A report is *fresh suspected* when `suspected == 1` (an integer), `at` is an integer,
//!    `0 <= now - at <= max_report_age` \[600 s\] and `action == "none"`. Anything else (clear,
//!    stale, from the future, invalid, unreadable) **breaks the streak** and clears the vetoes; the
//!    cooldown stays.
//! 2. While a decided restart has no reported outcome, nothing else acts (`awaiting-outcome`). A
//!    lost outcome is treated as a success: the cooldown runs from the decision.
//! 3. After a *successful* restart nothing acts for `cooldown` \[3600 s\], clear reports included.
//!    Suspected probes seen during the cooldown are not counted, so a new confirmation needs two
//!    new probes after it. A *failed* restart starts no cooldown, but its probes are used up: a
//!    retry also needs two new probes.
//! 4. The first fresh suspected probe of a streak is kept (a later, too-close probe never replaces
//!    it). A probe already counted (same `at`, or older) waits for the next one. The loop is
//!    confirmed when a probe's `at` is at least `min_probe_gap` \[270 s\] after the first's.
//! 5. Router (optional, set when `router_url` or `model` is set): one without the other blocks
//!    with a message saying which is missing. Otherwise the policy asks the router (action
//!    `ask-router`) **once per probe**; the caller feeds back the reply: `{"stuck": true}` acts,
//!    `{"stuck": false}` vetoes, malformed or unreachable blocks. With `veto_limit = N`, once the
//!    same streak was vetoed N times the next confirmation acts without asking. Vetoes count per
//!    probe, never per run, so a fast timer cannot burn through them.
//! 6. Acting emits a `restart` action with the recovery notice in its `countdown` phase
//!    (`executeAt = now + countdown`). The caller writes the notice, waits until `executeAt`,
//!    writes `acting`, restarts, writes `done`/`failed` and feeds the outcome back.
//!
//! # Decisions
//!
//! | name | when |
//! |---|---|
//! | `report-unreadable` | no report could be read; streak broken |
//! | `report-clear` | the latest probe is clear (`suspected == 0`); streak broken |
//! | `report-stale` | the report is older than `max_report_age` or from the future; streak broken |
//! | `report-invalid` | `suspected`/`at`/`action` are not usable; streak broken |
//! | `awaiting-outcome` | a restart was decided and its outcome is not in yet |
//! | `cooldown` | a successful restart was less than `cooldown` ago |
//! | `waiting-second-probe` | first fresh suspected probe of a streak |
//! | `waiting-next-probe` | this probe was already counted (or used by a past restart) |
//! | `waiting-probe-gap` | a newer probe, but less than `min_probe_gap` after the first |
//! | `router-misconfigured` | confirmed, but only one of `router_url`/`model` is set |
//! | `ask-router` | confirmed; action: ask the router about this probe |
//! | `router-vetoed` | the router said `{"stuck": false}` |
//! | `router-blocked` | the router's reply was malformed or it was unreachable |
//! | `restart` | confirmed (and confirmed by the router, or no router, or veto limit reached) |
//! | `restart-succeeded` | outcome fed back: success; the cooldown starts |
//! | `restart-failed` | outcome fed back: failure; no cooldown |
//! | `restart-cancelled` | the restart was called off during its countdown; nothing ran, no cooldown |
//! | `unexpected-router-reply` | a router reply with no question pending; ignored |
//! | `unexpected-outcome` | an outcome with no restart pending; ignored |

use crate::notice::{NoticeDraft, RecoveryNotice};
use crate::{Decision, Policy, PolicyState, UnixSeconds, decision_names, elapsed};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Tunables of the confirmed-loop restart; defaults follow the spec.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LoopRecoveryConfig {
    /// A report older than this (seconds) is stale.
    pub max_report_age: u32,
    /// Two probes confirm a loop only when at least this far apart (seconds).
    pub min_probe_gap: u32,
    /// Nothing acts for this long after a successful restart (seconds).
    pub cooldown: u32,
    /// Seconds between announcing a restart on the notice and performing it.
    pub countdown: u32,
    /// The watchdog's report window (seconds): a loop had lasted this long when first reported.
    pub report_window: u32,
    /// Base URL of an OpenAI-compatible router (ending in `/v1`). Needs `model`.
    pub router_url: Option<String>,
    /// The router's model. Needs `router_url`.
    pub model: Option<String>,
    /// After this many vetoes of one streak, act without asking. `None`: vetoes never expire.
    pub veto_limit: Option<u32>,
    /// Mark actions as a dry run; decisions are unchanged.
    pub dry_run: bool,
}

impl Default for LoopRecoveryConfig {
    fn default() -> Self {
        Self {
            max_report_age: 600,
            min_probe_gap: 270,
            cooldown: 3600,
            countdown: 60,
            report_window: 600,
            router_url: None,
            model: None,
            veto_limit: None,
            dry_run: false,
        }
    }
}

/// A usable router configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Router {
    pub url: String,
    pub model: String,
}

/// A half-configured router: recovery is blocked until it is fixed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum RouterConfigError {
    #[error("router_url is set but model is missing")]
    MissingModel,
    #[error("model is set but router_url is missing")]
    MissingUrl,
}

impl LoopRecoveryConfig {
    /// The router, if one is configured. An empty or blank value counts as unset.
    pub fn router(&self) -> Result<Option<Router>, RouterConfigError> {
        let set = |value: &Option<String>| {
            value
                .as_deref()
                .map(str::trim)
                .filter(|v| !v.is_empty())
                .map(str::to_owned)
        };
        match (set(&self.router_url), set(&self.model)) {
            (None, None) => Ok(None),
            (Some(url), Some(model)) => Ok(Some(Router { url, model })),
            (Some(_), None) => Err(RouterConfigError::MissingModel),
            (None, Some(_)) => Err(RouterConfigError::MissingUrl),
        }
    }
}

// ------------------------------------------------------------------------------------------------
// The loop report

/// The watchdog's loop report (`loop.json`), the fields this policy reads. `raw` keeps the whole
/// object for the router brief.
#[derive(Debug, Clone, PartialEq)]
pub struct LoopReport {
    /// `1` suspected, `0` clear; `None` when absent or not an integer.
    pub suspected: Option<i64>,
    /// Probe time (unix seconds); `None` when absent or not an integer.
    pub at: Option<i64>,
    /// Must be `"none"`: the watchdog itself never acts.
    pub action: Option<String>,
    pub reason: Option<String>,
    /// The repeating block of macro names.
    pub sequence: Vec<String>,
    /// `milestone.rank`.
    pub rank: Option<i64>,
    /// `milestone.label`.
    pub label: Option<String>,
    pub raw: Value,
}

/// Why a report text could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReportError {
    #[error("loop report is not valid JSON: {detail}")]
    NotJson { detail: String },
    #[error("loop report is not a JSON object")]
    NotAnObject,
}

/// Parses the loop report JSON. Only "not JSON" and "not an object" are errors; missing or
/// mistyped fields give `None` and make the report not fresh-suspected.
pub fn parse_loop_report(text: &str) -> Result<LoopReport, ReportError> {
    let value: Value = serde_json::from_str(text).map_err(|err| ReportError::NotJson {
        detail: err.to_string(),
    })?;
    LoopReport::from_value(value)
}

impl LoopReport {
    /// Reads a report from an already-parsed JSON value.
    pub fn from_value(raw: Value) -> Result<Self, ReportError> {
        let object = raw.as_object().ok_or(ReportError::NotAnObject)?;
        let text = |v: Option<&Value>| v.and_then(Value::as_str).map(str::to_owned);
        let milestone = object.get("milestone");
        Ok(Self {
            suspected: object.get("suspected").and_then(Value::as_i64),
            at: object.get("at").and_then(Value::as_i64),
            action: text(object.get("action")),
            reason: text(object.get("reason")),
            sequence: object
                .get("sequence")
                .and_then(Value::as_array)
                .map(|names| {
                    names
                        .iter()
                        .filter_map(Value::as_str)
                        .map(str::to_owned)
                        .collect()
                })
                .unwrap_or_default(),
            rank: milestone
                .and_then(|m| m.get("rank"))
                .and_then(Value::as_i64),
            label: text(milestone.and_then(|m| m.get("label"))),
            raw,
        })
    }

    /// Classifies the report at `now` (rule 1).
    pub fn status(&self, now: UnixSeconds, max_report_age: u32) -> ReportStatus {
        match self.suspected {
            Some(0) => return ReportStatus::Clear,
            Some(1) => {}
            Some(other) => {
                return ReportStatus::Invalid(format!("suspected is {other}, expected 0 or 1"));
            }
            None => return ReportStatus::Invalid("suspected is missing or not an integer".into()),
        }
        if self.action.as_deref() != Some("none") {
            let found = self
                .action
                .as_deref()
                .map_or_else(|| "missing".to_owned(), |a| format!("\"{a}\""));
            return ReportStatus::Invalid(format!("action is {found}, expected \"none\""));
        }
        let Some(at) = self.at else {
            return ReportStatus::Invalid("at is missing or not an integer".into());
        };
        let age = elapsed(now, at);
        if age < 0 || age > i64::from(max_report_age) {
            return ReportStatus::Stale { at, age };
        }
        ReportStatus::FreshSuspected { at }
    }
}

/// A report's standing at a given time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReportStatus {
    FreshSuspected {
        at: i64,
    },
    Clear,
    /// Older than the limit (`age > max`), or from the future (`age < 0`).
    Stale {
        at: i64,
        age: i64,
    },
    Invalid(String),
}

/// The fields of the report the router sees (it never sees or chooses commands).
pub const ROUTER_BRIEF_KEYS: [&str; 7] = [
    "reason",
    "sequence",
    "window",
    "places",
    "milestone",
    "dominant",
    "map",
];

/// The router's system prompt: classification only.
pub const ROUTER_SYSTEM_PROMPT: &str = "You classify whether a suspected macro loop is truly stuck: the same few macros \
repeat with no new places and no rewards. Return only JSON {\"stuck\":true|false}. No instructions or commands.";

/// The part of the report sent to the router.
pub fn router_brief(report: &LoopReport) -> Value {
    let mut brief = serde_json::Map::new();
    if let Some(object) = report.raw.as_object() {
        for key in ROUTER_BRIEF_KEYS {
            if let Some(value) = object.get(key) {
                brief.insert(key.to_owned(), value.clone());
            }
        }
    }
    Value::Object(brief)
}

/// Why a router reply is not a verdict. Any of these blocks recovery.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RouterReplyError {
    #[error("router reply is not JSON: {detail}")]
    NotJson { detail: String },
    #[error("router reply is not a JSON object")]
    NotAnObject,
    #[error("router reply has no boolean \"stuck\"")]
    NoStuckFlag,
    /// The design allows exactly `{"stuck": bool}`: a reply that says more (`"command": …`)
    /// is not the verdict asked for, whatever its flag.
    #[error("router reply has fields besides \"stuck\": {keys}")]
    ExtraFields { keys: String },
}

/// Parses the model's answer: exactly the JSON object `{"stuck": true|false}` (whitespace
/// aside), optionally inside one code fence (```` ```json ... ``` ````). Anything else, another
/// field beside `stuck` included, is an error (which blocks recovery).
pub fn parse_router_reply(content: &str) -> Result<bool, RouterReplyError> {
    let body = strip_code_fence(content.trim());
    let value: Value = serde_json::from_str(body).map_err(|err| RouterReplyError::NotJson {
        detail: err.to_string(),
    })?;
    let object = value.as_object().ok_or(RouterReplyError::NotAnObject)?;
    let stuck = object
        .get("stuck")
        .and_then(Value::as_bool)
        .ok_or(RouterReplyError::NoStuckFlag)?;
    if object.len() > 1 {
        let keys: Vec<&str> = object
            .keys()
            .map(String::as_str)
            .filter(|k| *k != "stuck")
            .collect();
        return Err(RouterReplyError::ExtraFields {
            keys: keys.join(", "),
        });
    }
    Ok(stuck)
}

fn strip_code_fence(text: &str) -> &str {
    let Some(rest) = text.strip_prefix("```") else {
        return text;
    };
    let Some(inner) = rest.strip_suffix("```") else {
        return text;
    };
    // Drop the info string (`json`) on the opening line, if any.
    match inner.split_once('\n') {
        Some((info, body)) if !info.trim_start().starts_with('{') => body.trim(),
        _ => inner.trim(),
    }
}

// ------------------------------------------------------------------------------------------------
// Policy

/// What the caller saw. Deserialises from its timeline form (`agentwatch replay`,
/// `docs/replay.md`): one key and its payload, `{"report": {...}}`, `{"report_unreadable":
/// "why"}`, `{"router_reply": "the model's text"}`, `{"router_unreachable": "why"}`,
/// `{"outcome": {"ok": bool, "detail"?}}`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(from = "LoopEventLine")]
pub enum LoopEvent {
    /// A readable report.
    Report(LoopReport),
    /// No report could be read (missing file, not JSON, not an object): the detail says why.
    ReportUnreadable(String),
    /// The router answered the question the policy asked.
    RouterVerdict(RouterVerdict),
    /// The restart the policy decided has finished.
    Outcome(ActionOutcome),
    /// The restart the policy decided was called off before anything was restarted (the run was
    /// stopped during its countdown): the detail says why.
    Cancelled(String),
}

/// The timeline form of a [`LoopEvent`].
#[derive(Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
enum LoopEventLine {
    /// The report object; a payload that is not an object reads as unreadable.
    Report(Value),
    ReportUnreadable(String),
    /// The model's reply text, parsed strictly ([`RouterVerdict::from_content`]).
    RouterReply(String),
    RouterUnreachable(String),
    Outcome(ActionOutcome),
}

impl From<LoopEventLine> for LoopEvent {
    fn from(line: LoopEventLine) -> Self {
        match line {
            LoopEventLine::Report(value) => match LoopReport::from_value(value) {
                Ok(report) => Self::Report(report),
                Err(err) => Self::ReportUnreadable(err.to_string()),
            },
            LoopEventLine::ReportUnreadable(why) => Self::ReportUnreadable(why),
            LoopEventLine::RouterReply(text) => {
                Self::RouterVerdict(RouterVerdict::from_content(&text))
            }
            LoopEventLine::RouterUnreachable(why) => {
                Self::RouterVerdict(RouterVerdict::Unreachable(why))
            }
            LoopEventLine::Outcome(outcome) => Self::Outcome(outcome),
        }
    }
}

/// The router's answer, as the caller got it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RouterVerdict {
    /// A well-formed reply: `{"stuck": true|false}`.
    Stuck(bool),
    /// A reply that is not a verdict (see [`parse_router_reply`]).
    Malformed(String),
    /// No reply: connection refused, timeout, HTTP error...
    Unreachable(String),
}

impl RouterVerdict {
    /// The verdict for a model's reply text.
    pub fn from_content(content: &str) -> Self {
        match parse_router_reply(content) {
            Ok(stuck) => Self::Stuck(stuck),
            Err(err) => Self::Malformed(err.to_string()),
        }
    }
}

/// How the restart went.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ActionOutcome {
    pub ok: bool,
    #[serde(default)]
    pub detail: Option<String>,
}

decision_names! {
    /// The machine names of the confirmed-loop restart's decisions (see the module docs).
    pub enum LoopDecisionName {
        ReportUnreadable => "report-unreadable",
        ReportClear => "report-clear",
        ReportStale => "report-stale",
        ReportInvalid => "report-invalid",
        AwaitingOutcome => "awaiting-outcome",
        Cooldown => "cooldown",
        WaitingSecondProbe => "waiting-second-probe",
        WaitingNextProbe => "waiting-next-probe",
        WaitingProbeGap => "waiting-probe-gap",
        RouterMisconfigured => "router-misconfigured",
        AskRouter => "ask-router",
        RouterVetoed => "router-vetoed",
        RouterBlocked => "router-blocked",
        Restart => "restart",
        RestartSucceeded => "restart-succeeded",
        RestartFailed => "restart-failed",
        RestartCancelled => "restart-cancelled",
        UnexpectedRouterReply => "unexpected-router-reply",
        UnexpectedOutcome => "unexpected-outcome",
    }
}

/// What the caller must do.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum LoopAction {
    /// Ask the router about the report of probe `probe_at` ([`ROUTER_SYSTEM_PROMPT`] and
    /// [`router_brief`], sent by the caller's chat client) and feed back its verdict.
    AskRouter { probe_at: i64 },
    /// Write `notice`, wait until `execute_at`, restart the service, feed back the outcome.
    Restart {
        probe_at: i64,
        execute_at: i64,
        dry_run: bool,
        notice: Box<RecoveryNotice>,
    },
}

/// A decision of this policy.
pub type LoopDecision = Decision<LoopDecisionName, LoopAction>;

/// What the policy remembers between runs.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct LoopRecoveryState {
    /// `at` of the streak's first fresh suspected probe.
    pub first_probe_at: Option<i64>,
    /// `at` of the streak's latest counted probe.
    pub last_probe_at: Option<i64>,
    /// Probes with `at` at or before this were used by a past restart and never count again.
    pub used_through: Option<i64>,
    /// Router vetoes of the current streak.
    pub vetoes: u32,
    /// The confirmation the router was asked about, awaiting its verdict.
    pub asked: Option<Confirmation>,
    /// A restart decided and not yet reported.
    pub in_flight: Option<InFlight>,
    /// Start of the cooldown: the last successful restart (or an in-flight one).
    pub cooldown_from: Option<i64>,
}

impl PolicyState for LoopRecoveryState {
    const POLICY: &'static str = "loop-recovery";
    const VERSION: u32 = 1;
}

/// A confirmed loop: the two probes and what the notice needs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Confirmation {
    pub first_probe_at: i64,
    pub probe_at: i64,
    pub reason: Option<String>,
    pub sequence: Vec<String>,
    pub rank: Option<i64>,
    pub label: Option<String>,
}

/// A restart decided at `decided_at` whose outcome is not in yet.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InFlight {
    pub decided_at: i64,
    pub probe_at: i64,
    /// The cooldown start to restore if the restart fails.
    pub previous_cooldown_from: Option<i64>,
}

use LoopDecisionName as Name;

impl LoopRecoveryState {
    /// Applies one observation at `now` and returns the decision (exactly one per event).
    pub fn handle(
        &mut self,
        config: &LoopRecoveryConfig,
        event: &LoopEvent,
        now: UnixSeconds,
    ) -> LoopDecision {
        self.forget_the_future(now);
        match event {
            LoopEvent::Report(report) => self.on_report(config, report, now),
            LoopEvent::ReportUnreadable(detail) => {
                self.break_streak();
                LoopDecision::new(
                    Name::ReportUnreadable,
                    format!("no readable watchdog report ({detail}); streak reset"),
                )
            }
            LoopEvent::RouterVerdict(verdict) => self.on_verdict(config, verdict, now),
            LoopEvent::Outcome(outcome) => self.on_outcome(config, outcome, now),
            LoopEvent::Cancelled(detail) => self.on_cancelled(detail),
        }
    }

    /// A clock that went backwards must not stretch a wait forever: timestamps after `now` are
    /// pulled back to `now`.
    fn forget_the_future(&mut self, now: UnixSeconds) {
        if let Some(from) = self.cooldown_from.as_mut() {
            *from = (*from).min(now);
        }
        if let Some(in_flight) = self.in_flight.as_mut() {
            in_flight.decided_at = in_flight.decided_at.min(now);
        }
    }

    fn break_streak(&mut self) {
        self.first_probe_at = None;
        self.last_probe_at = None;
        self.asked = None;
        self.vetoes = 0;
    }

    fn cooldown_left(&self, config: &LoopRecoveryConfig, now: UnixSeconds) -> Option<i64> {
        let from = self.cooldown_from?;
        let left = i64::from(config.cooldown).saturating_sub(elapsed(now, from));
        (left > 0).then_some(left)
    }

    /// A report, in the order the spec checks it: fresh and suspected, nothing pending (an
    /// outcome, the cooldown, a probe already used), a new probe far enough from the first of
    /// the streak; then a confirmed loop goes to the router or is acted on.
    fn on_report(
        &mut self,
        config: &LoopRecoveryConfig,
        report: &LoopReport,
        now: UnixSeconds,
    ) -> LoopDecision {
        let step = |state: &mut Self| -> Result<LoopDecision, LoopDecision> {
            let at = state.fresh_probe(config, report, now)?;
            state.nothing_pending(config, at, now)?;
            let (first, gap) = state.count_probe(config, at, now)?;
            let confirmation = Confirmation {
                first_probe_at: first,
                probe_at: at,
                reason: report.reason.clone(),
                sequence: report.sequence.clone(),
                rank: report.rank,
                label: report.label.clone(),
            };
            Ok(state.on_confirmed(config, confirmation, gap, now))
        };
        step(self).unwrap_or_else(|decision| decision)
    }

    /// The probe time of a fresh suspected report; any other report breaks the streak.
    fn fresh_probe(
        &mut self,
        config: &LoopRecoveryConfig,
        report: &LoopReport,
        now: UnixSeconds,
    ) -> Result<UnixSeconds, LoopDecision> {
        let decision = match report.status(now, config.max_report_age) {
            ReportStatus::FreshSuspected { at } => return Ok(at),
            ReportStatus::Clear => {
                LoopDecision::new(Name::ReportClear, "latest probe is clear; streak reset")
            }
            ReportStatus::Stale { age, .. } => {
                let why = if age < 0 {
                    format!("report is {} s in the future", age.saturating_neg())
                } else {
                    format!("report is {age} s old (limit {} s)", config.max_report_age)
                };
                LoopDecision::new(Name::ReportStale, format!("{why}; streak reset"))
            }
            ReportStatus::Invalid(why) => LoopDecision::new(
                Name::ReportInvalid,
                format!("report unusable: {why}; streak reset"),
            ),
        };
        self.break_streak();
        Err(decision)
    }

    /// Nothing to do while a restart's outcome is awaited, during the cooldown, or for a probe
    /// the last restart already used.
    fn nothing_pending(
        &mut self,
        config: &LoopRecoveryConfig,
        at: UnixSeconds,
        now: UnixSeconds,
    ) -> Result<(), LoopDecision> {
        if let Some(in_flight) = &self.in_flight {
            if let Some(left) = self.cooldown_left(config, now) {
                return Err(LoopDecision::new(
                    Name::AwaitingOutcome,
                    format!(
                        "restart decided {} s ago has no reported outcome; treated as done, cooldown {left} s left",
                        elapsed(now, in_flight.decided_at)
                    ),
                ));
            }
            // The outcome never came and the cooldown it implied is over.
            self.in_flight = None;
        }
        if let Some(left) = self.cooldown_left(config, now) {
            return Err(LoopDecision::new(
                Name::Cooldown,
                format!("recovery cooldown, {left} s left"),
            ));
        }
        if let Some(used) = self.used_through
            && at <= used
        {
            return Err(LoopDecision::new(
                Name::WaitingNextProbe,
                format!(
                    "waiting for next probe: the probe of {} s ago was used by the last restart",
                    elapsed(now, at)
                ),
            ));
        }
        Ok(())
    }

    /// Count the probe at `at` in the streak: the first probe waits for a second, a probe
    /// already counted or too close to the first waits for the next; two probes at least
    /// `min_probe_gap` apart confirm the loop (the first's time and the gap).
    fn count_probe(
        &mut self,
        config: &LoopRecoveryConfig,
        at: UnixSeconds,
        now: UnixSeconds,
    ) -> Result<(UnixSeconds, i64), LoopDecision> {
        let Some(first) = self.first_probe_at else {
            self.first_probe_at = Some(at);
            self.last_probe_at = Some(at);
            return Err(LoopDecision::new(
                Name::WaitingSecondProbe,
                format!(
                    "waiting for second probe: first probe {} s ago",
                    elapsed(now, at)
                ),
            ));
        };
        if self.last_probe_at.is_some_and(|last| at <= last) || at <= first {
            let why = match &self.asked {
                Some(asked) if asked.probe_at == at => "the router was asked about it".to_owned(),
                _ => "already counted".to_owned(),
            };
            return Err(LoopDecision::new(
                Name::WaitingNextProbe,
                format!(
                    "waiting for next probe: the probe of {} s ago: {why}",
                    elapsed(now, at)
                ),
            ));
        }
        self.last_probe_at = Some(at);
        let gap = elapsed(at, first);
        if gap < i64::from(config.min_probe_gap) {
            return Err(LoopDecision::new(
                Name::WaitingProbeGap,
                format!(
                    "waiting for next probe: the probe of {} s ago is {gap} s after the first (needs {} s)",
                    elapsed(now, at),
                    config.min_probe_gap
                ),
            ));
        }
        Ok((first, gap))
    }

    /// A confirmed loop: blocked by a router configured halfway, acted on with no router or
    /// past the veto limit, else the router is asked.
    fn on_confirmed(
        &mut self,
        config: &LoopRecoveryConfig,
        confirmation: Confirmation,
        gap: i64,
        now: UnixSeconds,
    ) -> LoopDecision {
        let at = confirmation.probe_at;
        let confirmed = format!(
            "loop confirmed by two probes {gap} s apart (the last {} s ago)",
            elapsed(now, at)
        );
        match config.router() {
            Err(err) => LoopDecision::new(
                Name::RouterMisconfigured,
                format!("{confirmed}; router configuration incomplete: {err}; recovery blocked"),
            ),
            Ok(None) => self.act(
                config,
                confirmation,
                now,
                format!("{confirmed}; no router configured"),
            ),
            Ok(Some(_)) => match config.veto_limit {
                Some(limit) if self.vetoes >= limit => {
                    let vetoes = match self.vetoes {
                        1 => "1 veto".to_owned(),
                        n => format!("{n} vetoes"),
                    };
                    let why = format!(
                        "{confirmed}; veto limit reached ({vetoes}), acting without the router"
                    );
                    self.act(config, confirmation, now, why)
                }
                _ => {
                    self.asked = Some(confirmation);
                    LoopDecision::new(Name::AskRouter, format!("{confirmed}; asking the router"))
                        .with_action(LoopAction::AskRouter { probe_at: at })
                }
            },
        }
    }

    fn on_verdict(
        &mut self,
        config: &LoopRecoveryConfig,
        verdict: &RouterVerdict,
        now: UnixSeconds,
    ) -> LoopDecision {
        let Some(confirmation) = self.asked.take() else {
            return LoopDecision::new(
                Name::UnexpectedRouterReply,
                "router reply with no question pending; ignored",
            );
        };
        let probe = confirmation.probe_at;
        match verdict {
            RouterVerdict::Stuck(true) => self.act(
                config,
                confirmation,
                now,
                format!("router confirms the loop at probe {probe}"),
            ),
            RouterVerdict::Stuck(false) => {
                self.vetoes = self.vetoes.saturating_add(1);
                let count = match config.veto_limit {
                    Some(limit) => format!("veto {} of {limit}", self.vetoes),
                    None => format!("veto {}, no limit", self.vetoes),
                };
                LoopDecision::new(
                    Name::RouterVetoed,
                    format!(
                        "router says not stuck at probe {probe} ({count}); waiting for next probe"
                    ),
                )
            }
            RouterVerdict::Malformed(why) => LoopDecision::new(
                Name::RouterBlocked,
                format!("router reply malformed ({why}); recovery blocked until the next probe"),
            ),
            RouterVerdict::Unreachable(why) => LoopDecision::new(
                Name::RouterBlocked,
                format!("router unreachable ({why}); recovery blocked until the next probe"),
            ),
        }
    }

    fn act(
        &mut self,
        config: &LoopRecoveryConfig,
        confirmation: Confirmation,
        now: UnixSeconds,
        why: String,
    ) -> LoopDecision {
        let stuck_seconds = elapsed(now, confirmation.first_probe_at)
            .max(0)
            .saturating_add(i64::from(config.report_window));
        let draft = NoticeDraft {
            from_rung: confirmation.rank,
            from_label: confirmation.label,
            reason: confirmation.reason,
            loop_names: confirmation.sequence,
            stuck_seconds: Some(stuck_seconds),
        };
        let notice = RecoveryNotice::announce_restart(draft, now, config.countdown);
        let probe_at = confirmation.probe_at;
        self.in_flight = Some(InFlight {
            decided_at: now,
            probe_at,
            previous_cooldown_from: self.cooldown_from,
        });
        self.cooldown_from = Some(now);
        self.used_through = Some(
            self.used_through
                .map_or(probe_at, |used| used.max(probe_at)),
        );
        self.break_streak();
        let execute_at = notice.execute_at;
        LoopDecision::new(
            Name::Restart,
            format!("{why}; restarting in {} s", elapsed(execute_at, now)),
        )
        .with_action(LoopAction::Restart {
            probe_at,
            execute_at,
            dry_run: config.dry_run,
            notice: Box::new(notice),
        })
    }

    fn on_outcome(
        &mut self,
        config: &LoopRecoveryConfig,
        outcome: &ActionOutcome,
        now: UnixSeconds,
    ) -> LoopDecision {
        let Some(in_flight) = self.in_flight.take() else {
            return LoopDecision::new(
                Name::UnexpectedOutcome,
                "restart outcome with no restart pending; ignored",
            );
        };
        let detail = outcome
            .detail
            .as_deref()
            .map(|d| format!(" ({d})"))
            .unwrap_or_default();
        if outcome.ok {
            let from = now.max(in_flight.decided_at);
            self.cooldown_from = Some(from);
            let until = from.saturating_add(i64::from(config.cooldown));
            LoopDecision::new(
                Name::RestartSucceeded,
                format!(
                    "restart succeeded{detail}; recovery cooldown for {} s",
                    elapsed(until, now)
                ),
            )
        } else {
            self.cooldown_from = in_flight.previous_cooldown_from;
            LoopDecision::new(
                Name::RestartFailed,
                format!("restart failed{detail}; no cooldown, a retry needs two new probes"),
            )
        }
    }
}

impl Policy for LoopRecoveryState {
    type Config = LoopRecoveryConfig;
    type Event = LoopEvent;
    type Name = LoopDecisionName;
    type Action = LoopAction;

    /// [`LoopRecoveryState::handle`]: exactly one decision per event.
    fn feed(
        &mut self,
        config: &LoopRecoveryConfig,
        event: &LoopEvent,
        now: i64,
    ) -> Vec<LoopDecision> {
        vec![self.handle(config, event, now)]
    }

    /// The end of a cooldown, or the moment a second probe of the current streak could confirm
    /// the loop (`first probe + min_probe_gap`). `None` when only a new report can change
    /// anything (or a restart's outcome is pending).
    fn next_wakeup(&self, config: &LoopRecoveryConfig, now: UnixSeconds) -> Option<i64> {
        if self.in_flight.is_some() {
            return None;
        }
        if let Some(left) = self.cooldown_left(config, now) {
            return Some(now.saturating_add(left));
        }
        self.first_probe_at
            .map(|first| first.saturating_add(i64::from(config.min_probe_gap)))
            .filter(|&at| at > now)
    }
}

impl LoopRecoveryState {
    /// The decided restart never ran: no cooldown (the one before it comes back), and, as after
    /// a failure, its probes are used up.
    fn on_cancelled(&mut self, detail: &str) -> LoopDecision {
        let Some(in_flight) = self.in_flight.take() else {
            return LoopDecision::new(
                Name::UnexpectedOutcome,
                "cancellation with no restart pending; ignored",
            );
        };
        self.cooldown_from = in_flight.previous_cooldown_from;
        LoopDecision::new(
            Name::RestartCancelled,
            format!(
                "the pending restart was cancelled before it ran ({detail}); nothing was restarted, no cooldown, a retry needs two new probes",
            ),
        )
    }
}
