//! The per-dedup-key alert state machine and the one-call-per-tick entry point.

use crate::config::{AlertConfig, ConfigError, GroupBy};
use crate::event::{AlertEvent, EventState, Severity, loop_key, title_for_agent};
use crate::opinion::{
    LlmOpinion, OpinionDecision, OpinionPlan, OpinionVerdict, Opinions, plan_llm_opinions,
};
use crate::refusal::Refusals;
use crate::router::{Route, windows_of};
use crate::state::{Alert, AlertState};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

impl Opinions {
    /// Put each answer on its root's observation, for [`process_tick`] (which checks them
    /// against the same plan, recomputed from the state). Here, beside the observation, so
    /// that the opinions know nothing of the tick.
    pub fn attach(&self, roots: &mut [RootObservation]) {
        for root in roots {
            if let Some(opinion) = self.get(&root.root) {
                root.opinion = Some(opinion);
            }
        }
    }
}

/// What the detector (and maybe the LLM) said about one root session this tick.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RootObservation {
    /// The root session id.
    pub root: String,
    /// Whether any session of the root's tree is flagged.
    pub flagged: bool,
    /// The agent name, for the title.
    #[serde(default)]
    pub agent: String,
    /// The LLM's second opinion, only for roots the [`OpinionPlan`] said to ask.
    #[serde(default)]
    pub opinion: Option<LlmOpinion>,
    /// One line saying why the tree is flagged (the event summary).
    #[serde(default)]
    pub summary: String,
    /// The detector's verdict or any other context; copied to the event's `details.verdict`.
    #[serde(default)]
    pub details: Value,
    /// Where the tree was seen (a server URL, a database path); recorded on its alert.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub source: String,
    /// The agent family whose key the alert takes (`claude`: `claude-loop:{root}`); empty:
    /// opencode's `opencode-loop:{root}`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub family: String,
    /// The work the tree does, as a person names it (`Claude Code: Fix the money rounding in
    /// /home/me/shop`); the alert's title while it is known. Empty: `opencode loop: {agent}`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub title: String,
    /// What agentwatch's own pre-tool hook refused in the tree so far (the calls it refused
    /// never ran, so the detector does not count them).
    #[serde(default, skip_serializing_if = "Refusals::is_empty")]
    pub refusals: Refusals,
    /// The tree's latest call is one the hook refused (no call ran since): the hook judged the
    /// tree looping and the agent has not moved on, so the tree counts as looping
    /// ([`RootObservation::looping`]) even where the detector does not flag it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub refusal_stands: bool,
}

impl RootObservation {
    /// The same observation, naming the tree's work (see [`RootObservation::title`]).
    #[must_use]
    pub fn titled(mut self, title: impl Into<String>) -> Self {
        self.title = title.into();
        self
    }

    /// The same observation, with what the hook refused in the tree (see
    /// [`RootObservation::refusal_stands`]).
    #[must_use]
    pub fn with_refusals(mut self, refusals: Refusals, stands: bool) -> Self {
        self.refusals = refusals;
        self.refusal_stands = stands;
        self
    }

    /// Whether the lifecycle takes the tree as looping: the detector flags it, or the hook's
    /// refusal of its latest call stands.
    #[must_use]
    pub fn looping(&self) -> bool {
        self.flagged || self.refusal_stands
    }

    /// The alert title this observation gives: its own, else the agent's.
    fn alert_title(&self) -> String {
        if self.title.trim().is_empty() {
            title_for_agent(&self.agent)
        } else {
            self.title.clone()
        }
    }

    /// The dedup key of this root's loop alert.
    #[must_use]
    pub fn dedup_key(&self) -> String {
        loop_key(&self.family, &self.root)
    }

    /// The same observation, of an agent family's sessions (see [`RootObservation::family`]).
    #[must_use]
    pub fn of_family(mut self, family: impl Into<String>) -> Self {
        self.family = family.into();
        self
    }

    /// A flagged root without an LLM opinion.
    #[must_use]
    pub fn flagged(
        root: impl Into<String>,
        agent: impl Into<String>,
        summary: impl Into<String>,
    ) -> Self {
        Self {
            root: root.into(),
            flagged: true,
            agent: agent.into(),
            opinion: None,
            summary: summary.into(),
            details: Value::Null,
            source: String::new(),
            family: String::new(),
            title: String::new(),
            refusals: Refusals::default(),
            refusal_stands: false,
        }
    }

    /// A root whose tree is not flagged.
    #[must_use]
    pub fn not_flagged(root: impl Into<String>, agent: impl Into<String>) -> Self {
        Self {
            root: root.into(),
            flagged: false,
            agent: agent.into(),
            opinion: None,
            summary: String::new(),
            details: Value::Null,
            source: String::new(),
            family: String::new(),
            title: String::new(),
            refusals: Refusals::default(),
            refusal_stands: false,
        }
    }

    /// The same observation, seen in `source`.
    #[must_use]
    pub fn from_source(mut self, source: impl Into<String>) -> Self {
        self.source = source.into();
        self
    }

    /// The same observation with an LLM opinion.
    #[must_use]
    pub fn with_opinion(mut self, opinion: Option<LlmOpinion>) -> Self {
        self.opinion = opinion;
        self
    }
}

/// One watchdog tick's input.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Tick {
    /// Unix seconds.
    pub now: i64,
    /// Every root session the server returned, flagged or not, each once.
    #[serde(default)]
    pub roots: Vec<RootObservation>,
    /// Root sessions the server no longer returns.
    #[serde(default)]
    pub gone: Vec<String>,
    /// Root sessions whose tree had no new call within the stale age: not judged as looping now.
    /// An open alert on one resolves as [`DecisionKind::ResolveStale`]. A root here must not be
    /// observed in `roots`; one also in `gone` resolves as stale.
    #[serde(default)]
    pub stale: Vec<String>,
}

/// What a tick decided about one alert.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DecisionKind {
    /// A new alert opened; a `trigger` event goes out.
    Trigger,
    /// An open warning alert became critical; an `escalate` event goes out.
    Escalate,
    /// An open alert is flagged again without a transition; no event.
    StillFlagged,
    /// An open alert still flagged `repeat_interval_s` after its last event: a reminder
    /// `trigger` event of the same key and severity goes out.
    Repeat,
    /// An open alert's root is present and no longer flagged; a `resolve` event goes out.
    ResolveFixed,
    /// An open alert's root is gone from the server; a `resolve` event goes out.
    ResolveGone,
    /// An open alert's tree had no new call within the stale age; a `resolve` event goes out.
    ResolveStale,
    /// An open alert's tree shows refusals of agentwatch's hook it has not reported (the first
    /// refusal, or the stop) and no other transition is due; a `blocked` event goes out.
    Blocked,
    /// An LLM opinion was supplied for a root the plan did not ask about; it was not used.
    OpinionIgnored,
}

impl DecisionKind {
    /// The `snake_case` machine name.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Trigger => "trigger",
            Self::Escalate => "escalate",
            Self::StillFlagged => "still_flagged",
            Self::Repeat => "repeat",
            Self::ResolveFixed => "resolve_fixed",
            Self::ResolveGone => "resolve_gone",
            Self::ResolveStale => "resolve_stale",
            Self::Blocked => "blocked",
            Self::OpinionIgnored => "opinion_ignored",
        }
    }
}

impl fmt::Display for DecisionKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An event and where it goes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Dispatch {
    /// The event to send.
    pub event: AlertEvent,
    /// One route per configured channel, in configuration order: delivered or suppressed.
    pub routes: Vec<Route>,
}

/// One decision of a tick: one line of the journal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Decision {
    /// What happened.
    pub kind: DecisionKind,
    /// The alert's dedup key.
    pub dedup_key: String,
    /// The root session id.
    pub root: String,
    /// One sentence saying why.
    pub reason: String,
    /// The alert record after this decision (the final record for a resolve); `None` for
    /// [`DecisionKind::OpinionIgnored`].
    pub alert: Option<Alert>,
    /// The event and its routes, for trigger, escalate, resolve and blocked.
    pub dispatch: Option<Dispatch>,
}

/// The result of one tick.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TickOutcome {
    /// The state to store for the next tick.
    pub state: AlertState,
    /// The opinion plan this tick honoured (the same as [`plan_llm_opinions`] gave before).
    pub opinion_plan: OpinionPlan,
    /// The decisions, ordered by dedup key.
    pub decisions: Vec<Decision>,
    /// The tick's `now`.
    #[serde(default)]
    pub now: i64,
}

impl TickOutcome {
    /// The state as it is once every delivered route's send succeeded (what a caller that does
    /// not send, such as a replay, stores).
    #[must_use]
    pub fn state_if_all_sent(&self) -> AlertState {
        let mut state = self.state.clone();
        for (event, route) in self.deliveries() {
            state.record_sent(event, &route.channel, route.group_by, self.now);
        }
        state
    }

    /// Every event decided this tick (trigger, escalate, resolve, blocked), delivered anywhere
    /// or not.
    pub fn events(&self) -> impl Iterator<Item = &AlertEvent> {
        self.decisions
            .iter()
            .filter_map(|d| d.dispatch.as_ref().map(|dispatch| &dispatch.event))
    }

    /// Every (event, route) pair the caller must actually send.
    pub fn deliveries(&self) -> impl Iterator<Item = (&AlertEvent, &Route)> {
        self.decisions
            .iter()
            .filter_map(|d| d.dispatch.as_ref())
            .flat_map(|dispatch| {
                dispatch
                    .routes
                    .iter()
                    .filter(|route| route.delivery.is_delivered())
                    .map(move |route| (&dispatch.event, route))
            })
    }
}

/// A tick that cannot be processed. The state is unchanged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TickError {
    /// The configuration is invalid.
    #[error("invalid alert config: {0}")]
    Config(#[from] ConfigError),
    /// A root id is empty.
    #[error("{list}[{index}]: root session id must not be empty")]
    EmptyRoot {
        /// `roots`, `gone` or `stale`.
        list: &'static str,
        /// Position in that list.
        index: usize,
    },
    /// A root is observed twice in one tick.
    #[error("roots[{index}]: root `{root}` is already listed at roots[{first}]")]
    DuplicateRoot {
        /// The repeated root.
        root: String,
        /// Position of the repeat.
        index: usize,
        /// Position of the first observation.
        first: usize,
    },
    /// A root is both observed and gone.
    #[error("root `{root}` is listed both in roots and in gone")]
    RootSeenAndGone {
        /// The contradictory root.
        root: String,
    },
    /// A root is both observed (judged) and stale (not judged).
    #[error("root `{root}` is listed both in roots and in stale")]
    RootSeenAndStale {
        /// The contradictory root.
        root: String,
    },
}

/// Runs one tick: every observed root and every gone root through the state machine, then every
/// resulting event through the router. Pure: the returned state replaces `state`.
///
/// Decisions are listed by dedup key. Events compete for rate-limited channels in this order:
/// resolves (which never consume a channel's rate limit), then critical before warning, then by
/// dedup key; so when several alerts fire at once, a channel gets the most severe one.
///
/// # Errors
///
/// [`TickError`] when the config is invalid or the tick contradicts itself (an empty root id, a
/// root observed twice, a root both observed and gone). The caller's state is untouched.
pub fn process_tick(
    state: &AlertState,
    config: &AlertConfig,
    tick: &Tick,
) -> Result<TickOutcome, TickError> {
    config.validate()?;
    validate_tick(tick)?;
    let now = tick.now;
    let opinion_plan = plan_llm_opinions(
        state,
        config,
        tick.roots
            .iter()
            .filter(|r| r.flagged)
            .map(|r| r.root.as_str()),
    );

    let mut next = state.clone();
    let mut decisions: Vec<Decision> = Vec::new();
    let mut pending: Vec<(usize, AlertEvent)> = Vec::new();

    let mut observations: Vec<&RootObservation> = tick.roots.iter().collect();
    observations.sort_by(|a, b| a.root.cmp(&b.root));
    for observation in observations {
        let step = observe_root(&mut next, config, &opinion_plan, observation, now);
        for (decision, event) in step {
            if let Some(event) = event {
                pending.push((decisions.len(), event));
            }
            decisions.push(decision);
        }
    }

    let stale: BTreeSet<&str> = tick.stale.iter().map(String::as_str).collect();
    for root in &stale {
        if let Some(alert) = next.take_loop_alert(root) {
            let (decision, event) = resolve(alert, config, now, ResolveCause::Stale);
            pending.push((decisions.len(), event));
            decisions.push(decision);
        }
    }
    let gone: BTreeSet<&str> = tick.gone.iter().map(String::as_str).collect();
    for root in gone.difference(&stale) {
        if let Some(alert) = next.take_loop_alert(root) {
            let (decision, event) = resolve(alert, config, now, ResolveCause::Gone);
            pending.push((decisions.len(), event));
            decisions.push(decision);
        }
    }

    let decisions = route_events(&mut next, config, decisions, pending, now);
    Ok(TickOutcome {
        state: next,
        opinion_plan,
        decisions,
        now,
    })
}

/// Routes the events of a tick's decisions (`pending`: decision index, event) and attaches each
/// dispatch; returns the decisions ordered by dedup key. Resolves go first (they never consume a
/// rate limit), then critical before warning, then by dedup key.
pub(crate) fn route_events(
    next: &mut AlertState,
    config: &AlertConfig,
    mut decisions: Vec<Decision>,
    mut pending: Vec<(usize, AlertEvent)>,
    now: i64,
) -> Vec<Decision> {
    pending.sort_by(|(_, a), (_, b)| {
        let priority = |e: &AlertEvent| (e.state != EventState::Resolve, Reverse(e.severity));
        priority(a)
            .cmp(&priority(b))
            .then_with(|| a.dedup_key.cmp(&b.dedup_key))
    });
    // Routing reserves channels within this tick (a second alarm to a channel is rate limited),
    // but the stored state records a delivery only once the caller reports the send succeeded
    // ([`AlertState::record_sent`]): a failed send neither blocks the channel nor earns a resolve.
    let mut reserved = next.router.clone();
    for (index, event) in pending {
        let silenced_until = config.silences.get(&event.dedup_key).copied();
        let routes = reserved.route(&config.channels, &event, silenced_until, now);
        if event.state == EventState::Resolve {
            next.router.delivered.remove(&event.dedup_key);
            // A key's own windows end with it, so the stored state does not grow per key.
            for channel in config
                .channels
                .iter()
                .filter(|c| c.group_by == GroupBy::Key)
            {
                for window in windows_of(&channel.name, channel.group_by, &event.dedup_key) {
                    next.router.last_alarm.remove(&window);
                }
            }
        }
        if let Some(decision) = decisions.get_mut(index) {
            decision.dispatch = Some(Dispatch { event, routes });
        }
    }

    decisions.sort_by(|a, b| a.dedup_key.cmp(&b.dedup_key));
    decisions
}

fn validate_tick(tick: &Tick) -> Result<(), TickError> {
    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
    for (index, observation) in tick.roots.iter().enumerate() {
        if observation.root.is_empty() {
            return Err(TickError::EmptyRoot {
                list: "roots",
                index,
            });
        }
        if let Some(&first) = seen.get(observation.root.as_str()) {
            return Err(TickError::DuplicateRoot {
                root: observation.root.clone(),
                index,
                first,
            });
        }
        seen.insert(&observation.root, index);
    }
    for (index, root) in tick.gone.iter().enumerate() {
        if root.is_empty() {
            return Err(TickError::EmptyRoot {
                list: "gone",
                index,
            });
        }
        if seen.contains_key(root.as_str()) {
            return Err(TickError::RootSeenAndGone { root: root.clone() });
        }
    }
    for (index, root) in tick.stale.iter().enumerate() {
        if root.is_empty() {
            return Err(TickError::EmptyRoot {
                list: "stale",
                index,
            });
        }
        if seen.contains_key(root.as_str()) {
            return Err(TickError::RootSeenAndStale { root: root.clone() });
        }
    }
    Ok(())
}

/// A decision and the event it sends, if any.
type Step = (Decision, Option<AlertEvent>);

/// The decisions one observed root produces: maybe an ignored opinion, then its lifecycle step.
fn observe_root(
    next: &mut AlertState,
    config: &AlertConfig,
    plan: &OpinionPlan,
    observation: &RootObservation,
    now: i64,
) -> Vec<Step> {
    let root = observation.root.as_str();
    let dedup_key = observation.dedup_key();
    let planned = plan.decision_for(root);
    let asked = planned.is_some_and(|d| d.verdict == OpinionVerdict::Ask);
    let used = if asked { observation.opinion } else { None };
    let opinion = OpinionUse {
        used,
        note: describe_opinion(planned, used),
    };
    let mut steps = Vec::new();

    if let Some(supplied) = observation.opinion
        && !asked
    {
        let why = planned.map_or("the root is not flagged this tick", |d| d.reason.as_str());
        steps.push((
            Decision {
                kind: DecisionKind::OpinionIgnored,
                dedup_key: dedup_key.clone(),
                root: root.to_owned(),
                reason: format!("LLM opinion `{supplied}` not used: {why}"),
                alert: None,
                dispatch: None,
            },
            None,
        ));
    }

    // A tree whose work is named names its open alert, also when it was renamed since.
    if let Some(alert) = next.open_alerts.get_mut(&dedup_key)
        && !observation.title.trim().is_empty()
    {
        alert.title.clone_from(&observation.title);
    }
    let news = next
        .open_alerts
        .get_mut(&dedup_key)
        .is_some_and(|alert| take_refusals(alert, observation));
    let lifecycle = match (observation.looping(), next.open_alerts.get_mut(&dedup_key)) {
        (false, None) => None,
        (false, Some(_)) => next
            .open_alerts
            .remove(&dedup_key)
            .map(|alert| resolve(alert, config, now, ResolveCause::Fixed))
            .map(|(decision, event)| (decision, Some(event))),
        (true, None) => {
            let (step, alert) = open_alert(config, observation, &opinion, now);
            next.open_alerts.insert(dedup_key, alert);
            Some(step)
        }
        (true, Some(alert)) => {
            if !observation.source.is_empty() {
                alert.source.clone_from(&observation.source);
            }
            let step = flag_open_alert(alert, config, observation, &opinion, now);
            Some(if news {
                report_refusals(alert, config, observation, &opinion, now, step)
            } else {
                step
            })
        }
    };
    steps.extend(lifecycle);
    steps
}

/// Keep what the hook refused in the tree on its open alert; whether it is news (the first
/// refusal, or the stop). An observation without refusals leaves the alert's as they are.
fn take_refusals(alert: &mut Alert, observation: &RootObservation) -> bool {
    if observation.refusals.is_empty() {
        return false;
    }
    let news = observation.refusals.news_since(&alert.refusals);
    alert.refusals.clone_from(&observation.refusals);
    news
}

/// A looping tree's step when its refusals are news: an escalation (whose summary says them)
/// stands; a judgement without a transition, or a reminder, becomes the `blocked` event.
fn report_refusals(
    alert: &mut Alert,
    config: &AlertConfig,
    observation: &RootObservation,
    opinion: &OpinionUse,
    now: i64,
    step: Step,
) -> Step {
    if !matches!(
        step.0.kind,
        DecisionKind::StillFlagged | DecisionKind::Repeat
    ) {
        return step;
    }
    alert.last_fired_at = now;
    let sentence = alert.refusals.sentence();
    let did = if alert.refusals.stopped {
        "stopped a session of the tree"
    } else {
        "refused calls of the tree"
    };
    let event = event_for(
        alert,
        EventState::Blocked,
        sentence.clone(),
        open_details(alert, observation, opinion.used),
        config,
    );
    let reason = format!(
        "flagged tick {}: agentwatch's hook {did} ({sentence}), not reported yet: told the \
         channels of {} at its {} severity",
        alert.flagged_ticks, alert.dedup_key, alert.severity
    );
    (decision(DecisionKind::Blocked, alert, reason), Some(event))
}

/// The LLM opinion a tick uses for one root, and how to say so in a reason.
struct OpinionUse {
    used: Option<LlmOpinion>,
    note: String,
}

impl OpinionUse {
    fn said_yes(&self) -> bool {
        self.used == Some(LlmOpinion::Yes)
    }
}

/// First flag with no open alert: a fresh alert at flagged tick 1 and its trigger.
fn open_alert(
    config: &AlertConfig,
    observation: &RootObservation,
    opinion: &OpinionUse,
    now: i64,
) -> (Step, Alert) {
    let escalate_after = config.escalate_after_ticks;
    let note = &opinion.note;
    let (severity, cause) = if opinion.said_yes() {
        (Severity::Critical, format!("as critical because {note}"))
    } else if escalate_after <= 1 {
        let why = format!("escalate_after_ticks is {escalate_after}");
        (
            Severity::Critical,
            format!("as critical because {why}; {note}"),
        )
    } else {
        (Severity::Warning, format!("as warning; {note}"))
    };
    let dedup_key = observation.dedup_key();
    let mut alert = Alert::opened(
        dedup_key.clone(),
        observation.root.clone(),
        observation.agent.clone(),
        observation.alert_title(),
        severity,
        observation.source.clone(),
        now,
    );
    if !observation.refusals.is_empty() {
        alert.refusals.clone_from(&observation.refusals);
    }
    let event = event_for(
        &alert,
        EventState::Trigger,
        told(&alert, base_summary(observation)),
        open_details(&alert, observation, opinion.used),
        config,
    );
    let why = if observation.flagged {
        "first flagged tick with no open alert"
    } else {
        "agentwatch's hook refused the tree's latest call (it judged the tree looping) with no \
         open alert"
    };
    let reason = format!("{why}: opened {dedup_key} {cause}");
    (
        (decision(DecisionKind::Trigger, &alert, reason), Some(event)),
        alert,
    )
}

/// Flagged again: count the tick; escalate a warning once it is due or the LLM says yes.
fn flag_open_alert(
    alert: &mut Alert,
    config: &AlertConfig,
    observation: &RootObservation,
    opinion: &OpinionUse,
    now: i64,
) -> Step {
    let gap = alert.counting_gap(now);
    let counted = alert.counts_at(config, now);
    if counted {
        alert.flagged_ticks = alert.flagged_ticks.saturating_add(1);
        alert.counted_at = Some(now);
    }
    let ticks = alert.flagged_ticks;
    let escalate_after = config.escalate_after_ticks;
    let note = &opinion.note;
    if alert.severity >= Severity::Critical {
        let reason =
            format!("flagged tick {ticks}: the alert is critical already, no repeated escalation");
        return still_flagged_or_repeat(alert, config, observation, opinion, now, reason);
    }
    let by_ticks = counted && ticks >= escalate_after;
    let by_llm = opinion.said_yes();
    if !by_ticks && !by_llm {
        let min_gap = config.escalate_min_gap_s;
        let reason = if counted {
            format!("flagged tick {ticks} of {escalate_after} before escalation; {note}")
        } else {
            format!(
                "flagged again {gap} s after the last counted judgement, under \
                 escalate_min_gap_s {min_gap}: not counted (still {ticks} of {escalate_after}); \
                 {note}"
            )
        };
        return still_flagged_or_repeat(alert, config, observation, opinion, now, reason);
    }
    let due = format!("flagged tick {ticks} reached escalate_after_ticks {escalate_after}");
    let (cause, summary) = if by_ticks {
        let cause = if by_llm {
            format!("{due} and {note}")
        } else {
            due
        };
        let summary = format!(
            "{} (still looping after {ticks} flagged ticks)",
            base_summary(observation)
        );
        (cause, told(alert, summary))
    } else {
        let summary = format!("{} (confirmed by the local LLM)", base_summary(observation));
        (
            format!("{note} on flagged tick {ticks}"),
            told(alert, summary),
        )
    };
    alert.severity = Severity::Critical;
    alert.last_fired_at = now;
    let event = event_for(
        alert,
        EventState::Escalate,
        summary,
        open_details(alert, observation, opinion.used),
        config,
    );
    let reason = format!(
        "escalated {} from warning to critical: {cause}",
        alert.dedup_key
    );
    (decision(DecisionKind::Escalate, alert, reason), Some(event))
}

/// Flagged again with no transition: a [`DecisionKind::Repeat`] reminder when the alert's last
/// event is `repeat_interval_s` old, else [`DecisionKind::StillFlagged`] with `reason`.
fn still_flagged_or_repeat(
    alert: &mut Alert,
    config: &AlertConfig,
    observation: &RootObservation,
    opinion: &OpinionUse,
    now: i64,
    reason: String,
) -> Step {
    let every = config.repeat_interval_s;
    let since = now.saturating_sub(alert.last_fired_at);
    if every <= 0 || since < every {
        return (decision(DecisionKind::StillFlagged, alert, reason), None);
    }
    alert.last_fired_at = now;
    let summary = format!(
        "{} (still looping: flagged {} ticks since it opened)",
        base_summary(observation),
        alert.flagged_ticks
    );
    let summary = told(alert, summary);
    let mut details = open_details(alert, observation, opinion.used);
    details["repeat_interval_s"] = serde_json::json!(every);
    let event = event_for(alert, EventState::Trigger, summary, details, config);
    let reason = format!(
        "{reason}; its last event was {since} s ago, at least repeat_interval_s {every}: \
         reminded"
    );
    (decision(DecisionKind::Repeat, alert, reason), Some(event))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ResolveCause {
    Fixed,
    Gone,
    Stale,
    /// An alarm's subject is healthy again ([`crate::process_alarms`]).
    Recovered,
}

pub(crate) fn resolve(
    mut alert: Alert,
    config: &AlertConfig,
    now: i64,
    cause: ResolveCause,
) -> (Decision, AlertEvent) {
    let was = alert.severity;
    alert.severity = Severity::Info;
    alert.resolved_at = Some(now);
    alert.last_fired_at = now;
    let root = alert.root.clone();
    let ticks = alert.flagged_ticks;
    let (kind, summary, why, because) = match cause {
        ResolveCause::Fixed => (
            DecisionKind::ResolveFixed,
            format!("loop over: root session {root} is no longer flagged"),
            format!("root {root} is present and no longer flagged"),
            "fixed",
        ),
        ResolveCause::Gone => (
            DecisionKind::ResolveGone,
            format!("loop over: root session {root} is gone from the opencode server"),
            format!("root {root} is gone from the opencode server"),
            "gone",
        ),
        ResolveCause::Recovered => (
            DecisionKind::ResolveFixed,
            format!("recovered: {root} is healthy again"),
            format!("{root} recovered"),
            "recovered",
        ),
        ResolveCause::Stale => (
            DecisionKind::ResolveStale,
            format!("loop over: root session {root} is stale (no new call within the stale age)"),
            format!("root {root} had no new call within watchdog.stale_after_s"),
            "stale",
        ),
    };
    let mut details = base_details(&alert);
    details.insert("resolved_at".to_owned(), Value::from(now));
    details.insert("resolved_because".to_owned(), Value::from(because));
    // A resolve may reach a channel before the escalate it ends (held, then superseded): it
    // says what the alert had become.
    details.insert("was_severity".to_owned(), Value::from(was.as_str()));
    let event = event_for(
        &alert,
        EventState::Resolve,
        summary,
        Value::Object(details),
        config,
    );
    let reason = format!(
        "{why}: resolved the {was} alert {} after {ticks} flagged tick(s)",
        alert.dedup_key
    );
    (decision(kind, &alert, reason), event)
}

pub(crate) fn decision(kind: DecisionKind, alert: &Alert, reason: String) -> Decision {
    Decision {
        kind,
        dedup_key: alert.dedup_key.clone(),
        root: alert.root.clone(),
        reason,
        alert: Some(alert.clone()),
        dispatch: None,
    }
}

pub(crate) fn event_for(
    alert: &Alert,
    state: EventState,
    summary: String,
    details: Value,
    config: &AlertConfig,
) -> AlertEvent {
    AlertEvent {
        dedup_key: alert.dedup_key.clone(),
        severity: alert.severity,
        state,
        title: alert.title.clone(),
        summary,
        details,
        source: config.source.clone(),
    }
}

fn base_summary(observation: &RootObservation) -> String {
    let summary = observation.summary.trim();
    if summary.is_empty() {
        format!("root session {} is looping", observation.root)
    } else {
        summary.to_owned()
    }
}

/// A summary with the hook's refusals in the alert's tree said after it, when it has any.
fn told(alert: &Alert, summary: String) -> String {
    if alert.refusals.is_empty() {
        summary
    } else {
        format!("{summary}; {}", alert.refusals.sentence())
    }
}

fn base_details(alert: &Alert) -> Map<String, Value> {
    let mut details = Map::new();
    details.insert("root".to_owned(), Value::from(alert.root.as_str()));
    details.insert("agent".to_owned(), Value::from(alert.agent.as_str()));
    details.insert("flagged_ticks".to_owned(), Value::from(alert.flagged_ticks));
    details.insert("opened_at".to_owned(), Value::from(alert.opened_at));
    if !alert.refusals.is_empty()
        && let Ok(blocked) = serde_json::to_value(&alert.refusals)
    {
        details.insert("blocked".to_owned(), blocked);
    }
    details
}

fn open_details(
    alert: &Alert,
    observation: &RootObservation,
    opinion: Option<LlmOpinion>,
) -> Value {
    let mut details = base_details(alert);
    details.insert(
        "llm_opinion".to_owned(),
        opinion.map_or(Value::Null, |o| Value::from(o.as_str())),
    );
    if !observation.details.is_null() {
        details.insert("verdict".to_owned(), observation.details.clone());
    }
    Value::Object(details)
}

/// How the opinion figured in this tick, as a clause for a reason sentence.
fn describe_opinion(planned: Option<&OpinionDecision>, used: Option<LlmOpinion>) -> String {
    match (planned, used) {
        (_, Some(opinion)) => format!("the local LLM said {opinion}"),
        (Some(decision), None) if decision.verdict == OpinionVerdict::Ask => {
            "the local LLM gave no usable answer".to_owned()
        }
        (Some(decision), None) => decision.reason.clone(),
        (None, None) => "no LLM opinion".to_owned(),
    }
}
