//! Random tick sequences against a reference model of the lifecycle, plus the routing invariants
//! of the design.

use alert_state::{
    AlertConfig, AlertEvent, AlertState, ChannelConfig, Decision, DecisionKind, EventState,
    GroupBy, LlmOpinion, OpinionPlan, OpinionSkip, OpinionVerdict, Refusals, RootObservation,
    Severity, Tick, TickOutcome, dedup_key_for_root, plan_llm_opinions, process_tick,
};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use std::collections::{BTreeMap, BTreeSet};

const ROOTS: [&str; 4] = ["r0", "r1", "r2", "r3"];

/// What one root does in one tick.
#[derive(Debug, Clone, Copy)]
enum RootStatus {
    /// Neither observed nor reported gone.
    Unseen,
    Healthy,
    Flagged(Option<LlmOpinion>),
    Gone,
}

/// What agentwatch's hook refused in an observed root's tree: calls refused (0 to 3), whether
/// it stopped the session, whether the tree's latest call is a refused one.
#[derive(Debug, Clone, Copy, Default)]
struct Refused {
    blocked: u32,
    stopped: bool,
    stands: bool,
}

impl Refused {
    fn refusals(self) -> Refusals {
        if self.blocked == 0 {
            return Refusals::default();
        }
        Refusals {
            blocked: self.blocked,
            call: "pytest -x".to_owned(),
            of_call: self.blocked,
            stopped: self.stopped,
        }
    }
}

#[derive(Debug, Clone)]
struct Step {
    advance_s: i64,
    statuses: [RootStatus; 4],
    refused: [Refused; 4],
}

fn refused() -> impl Strategy<Value = Refused> {
    prop_oneof![
        3 => Just(Refused::default()),
        2 => (1..=3u32, proptest::bool::weighted(0.3), proptest::bool::ANY).prop_map(
            |(blocked, stopped, stands)| Refused { blocked, stopped, stands }
        ),
    ]
}

fn root_status() -> impl Strategy<Value = RootStatus> {
    let opinion = prop_oneof![
        Just(None),
        Just(Some(LlmOpinion::Yes)),
        Just(Some(LlmOpinion::No))
    ];
    prop_oneof![
        1 => Just(RootStatus::Unseen),
        2 => Just(RootStatus::Healthy),
        5 => opinion.prop_map(RootStatus::Flagged),
        1 => Just(RootStatus::Gone),
    ]
}

fn step() -> impl Strategy<Value = Step> {
    let advance = prop_oneof![
        Just(0i64),
        Just(150),
        Just(299),
        Just(300),
        Just(301),
        0..=700i64
    ];
    (
        advance,
        [root_status(), root_status(), root_status(), root_status()],
        [refused(), refused(), refused(), refused()],
    )
        .prop_map(|(advance_s, statuses, refused)| Step {
            advance_s,
            statuses,
            refused,
        })
}

fn severity() -> impl Strategy<Value = Severity> {
    prop_oneof![
        Just(Severity::Info),
        Just(Severity::Warning),
        Just(Severity::Critical)
    ]
}

fn channel(index: usize) -> impl Strategy<Value = ChannelConfig> {
    let rate_limit = prop_oneof![Just(0u64), Just(150), Just(300), Just(600)];
    (proptest::bool::weighted(0.8), severity(), rate_limit).prop_map(
        move |(enabled, min_severity, rate_limit_s)| ChannelConfig {
            name: format!("ch{index}"),
            channel_type: "desktop".to_owned(),
            enabled,
            min_severity,
            rate_limit_s,
            // The reference model keeps one window per channel.
            group_by: GroupBy::Channel,
        },
    )
}

fn config() -> impl Strategy<Value = AlertConfig> {
    let channels = (channel(0), channel(1), channel(2), 1..=3usize)
        .prop_map(|(a, b, c, n)| [a, b, c].into_iter().take(n).collect::<Vec<_>>());
    (1..=4u32, 0..=3u32, proptest::bool::weighted(0.8), channels).prop_map(
        |(escalate_after_ticks, max_llm_opinions_per_tick, local_llm_enabled, channels)| {
            AlertConfig {
                escalate_after_ticks,
                max_llm_opinions_per_tick,
                local_llm_enabled,
                source: "agentwatch@prop".to_owned(),
                channels,
                silences: Default::default(),
                // The reference model has no reminders; `Repeat` has its table test in spec.rs.
                repeat_interval_s: 0,
                // Nor a minimum gap: every flagged tick counts in the model.
                escalate_min_gap_s: 0,
            }
        },
    )
}

/// The reference model: the decisions.md lifecycle written as plainly as possible, with the
/// hook's refusals of issue 47: a standing refusal is a looping tree; an open alert reports
/// the first refusal and the stop once each (a `blocked` event where no escalation is due).
#[derive(Debug, Default)]
struct Model {
    /// root -> (severity, `flagged_ticks`, the refusals told as (blocked, stopped)) of its open
    /// alert
    open: BTreeMap<String, (Severity, u32, (u32, bool))>,
}

impl Model {
    /// The expected lifecycle decisions for one root, as (kind, severity, `flagged_ticks`).
    fn step(
        &mut self,
        config: &AlertConfig,
        root: &str,
        (status, refused): (RootStatus, Refused),
        opinion_used: Option<LlmOpinion>,
    ) -> Option<(DecisionKind, Severity, u32)> {
        let said_yes = opinion_used == Some(LlmOpinion::Yes);
        let seen = (refused.blocked, refused.stopped);
        let looping = match status {
            RootStatus::Flagged(_) => true,
            RootStatus::Healthy => refused.stands,
            RootStatus::Unseen | RootStatus::Gone => false,
        };
        match (status, looping, self.open.get(root).copied()) {
            (_, true, None) => {
                let severity = if said_yes || config.escalate_after_ticks == 1 {
                    Severity::Critical
                } else {
                    Severity::Warning
                };
                self.open.insert(root.to_owned(), (severity, 1, seen));
                Some((DecisionKind::Trigger, severity, 1))
            }
            (_, true, Some((severity, ticks, told))) => {
                let ticks = ticks + 1;
                let news = (seen.0 > 0 && told.0 == 0) || (seen.1 && !told.1);
                let told = if seen.0 > 0 || seen.1 { seen } else { told };
                let quiet = if news {
                    DecisionKind::Blocked
                } else {
                    DecisionKind::StillFlagged
                };
                let (kind, severity) = if severity == Severity::Critical {
                    (quiet, severity)
                } else if ticks >= config.escalate_after_ticks || said_yes {
                    (DecisionKind::Escalate, Severity::Critical)
                } else {
                    (quiet, severity)
                };
                self.open.insert(root.to_owned(), (severity, ticks, told));
                Some((kind, severity, ticks))
            }
            (RootStatus::Healthy, false, Some((_, ticks, _))) => {
                self.open.remove(root);
                Some((DecisionKind::ResolveFixed, Severity::Info, ticks))
            }
            (RootStatus::Gone, _, Some((_, ticks, _))) => {
                self.open.remove(root);
                Some((DecisionKind::ResolveGone, Severity::Info, ticks))
            }
            _ => None,
        }
    }
}

/// What the event stream says about one alert instance.
#[derive(Debug, Default)]
struct Observed {
    open: bool,
    escalated: bool,
    /// Channels that delivered an event of the current open alert.
    delivered_to: BTreeSet<String>,
}

/// The tick's observations of a step: each root seen (with its refusals), and the roots gone.
fn observations(step: &Step) -> (Vec<RootObservation>, Vec<String>) {
    let mut roots = Vec::new();
    let mut gone = Vec::new();
    for ((root, status), refused) in ROOTS.iter().zip(step.statuses).zip(step.refused) {
        let observed = match status {
            RootStatus::Unseen => continue,
            RootStatus::Gone => {
                gone.push((*root).to_owned());
                continue;
            }
            RootStatus::Healthy => RootObservation::not_flagged(*root, "build"),
            RootStatus::Flagged(opinion) => {
                RootObservation::flagged(*root, "build", "loop").with_opinion(opinion)
            }
        };
        roots.push(observed.with_refusals(refused.refusals(), refused.stands));
    }
    (roots, gone)
}

/// The plan: capped, only when enabled, only flagged roots not critical already.
fn check_plan(
    plan: &OpinionPlan,
    flagged: usize,
    config: &AlertConfig,
    model: &Model,
) -> Result<(), TestCaseError> {
    let asked: Vec<&str> = plan.roots_to_ask().collect();
    prop_assert!(asked.len() <= config.max_llm_opinions_per_tick as usize);
    prop_assert_eq!(plan.decisions.len(), flagged);
    if !config.local_llm_enabled {
        prop_assert!(asked.is_empty());
    }
    for decision in &plan.decisions {
        prop_assert!(!decision.reason.is_empty());
        if decision.verdict == OpinionVerdict::Ask {
            let open = model.open.get(&decision.root);
            prop_assert!(open.is_none_or(|(severity, _, _)| *severity != Severity::Critical));
        }
        if decision.verdict == OpinionVerdict::Skip(OpinionSkip::CapReached) {
            prop_assert_eq!(asked.len(), config.max_llm_opinions_per_tick as usize);
        }
    }
    Ok(())
}

/// The lifecycle's decisions and open alerts against the model's; every supplied opinion used
/// or reported.
fn check_lifecycle(
    step: &Step,
    (tick, outcome): (&Tick, &TickOutcome),
    config: &AlertConfig,
    model: &mut Model,
) -> Result<(), TestCaseError> {
    let plan = &outcome.opinion_plan;
    let mut expected = Vec::new();
    for ((root, status), refused) in ROOTS.iter().zip(step.statuses).zip(step.refused) {
        let supplied = match status {
            RootStatus::Flagged(opinion) => opinion,
            _ => None,
        };
        let used = if plan.should_ask(root) {
            supplied
        } else {
            None
        };
        if let Some((kind, severity, ticks)) = model.step(config, root, (status, refused), used) {
            expected.push(((*root).to_owned(), kind, severity, ticks));
        }
    }
    let actual: Vec<_> = outcome
        .decisions
        .iter()
        .filter(|d| d.kind != DecisionKind::OpinionIgnored)
        .map(|d| {
            let alert = d
                .alert
                .as_ref()
                .expect("lifecycle decisions carry the alert");
            (d.root.clone(), d.kind, alert.severity, alert.flagged_ticks)
        })
        .collect();
    prop_assert_eq!(actual, expected);
    let open_keys: BTreeSet<&String> = outcome.state.open_alerts.keys().collect();
    let model_keys: BTreeSet<String> = model.open.keys().map(|r| dedup_key_for_root(r)).collect();
    prop_assert_eq!(open_keys, model_keys.iter().collect::<BTreeSet<_>>());
    for observation in &tick.roots {
        if observation.opinion.is_some() && !plan.should_ask(&observation.root) {
            let reported = outcome
                .decisions
                .iter()
                .any(|d| d.root == observation.root && d.kind == DecisionKind::OpinionIgnored);
            prop_assert!(reported);
        }
    }
    Ok(())
}

/// The event stream seen so far: per alert instance, and each channel's last alarm.
#[derive(Debug, Default)]
struct Stream {
    observed: BTreeMap<String, Observed>,
    last_alarm_delivery: BTreeMap<String, i64>,
}

impl Stream {
    /// Event stream invariants of a tick's decisions, per alert instance and per channel.
    fn check(
        &mut self,
        outcome: &TickOutcome,
        config: &AlertConfig,
        now: i64,
    ) -> Result<(), TestCaseError> {
        for decision in &outcome.decisions {
            prop_assert!(!decision.reason.is_empty());
            let Some(dispatch) = &decision.dispatch else {
                continue;
            };
            let event = &dispatch.event;
            prop_assert_eq!(&event.source, "agentwatch@prop");
            prop_assert_eq!(dispatch.routes.len(), config.channels.len());
            let alert = self.observed.entry(event.dedup_key.clone()).or_default();
            alert.check(decision, event)?;
            for (route, channel) in dispatch.routes.iter().zip(&config.channels) {
                prop_assert_eq!(&route.channel, &channel.name);
                prop_assert!(!route.reason.is_empty());
                if !route.delivery.is_delivered() {
                    continue;
                }
                prop_assert!(channel.enabled);
                if event.state == EventState::Resolve {
                    prop_assert!(
                        alert.delivered_to.contains(&channel.name),
                        "a resolve reached {} which saw no event of the alert",
                        channel.name
                    );
                } else {
                    prop_assert!(event.severity >= channel.min_severity);
                    // A critical event has a window of its own; a lower one waits for both.
                    let critical = format!("{}\ncritical", channel.name);
                    let tiers = if event.severity == Severity::Critical {
                        vec![critical.clone()]
                    } else {
                        vec![critical.clone(), channel.name.clone()]
                    };
                    for tier in &tiers {
                        if let Some(last) = self.last_alarm_delivery.get(tier) {
                            prop_assert!(
                                now - last >= channel.rate_limit_s as i64,
                                "{} got two alarms {} s apart (limit {})",
                                channel.name,
                                now - last,
                                channel.rate_limit_s
                            );
                        }
                    }
                    let window = if event.severity == Severity::Critical {
                        critical
                    } else {
                        channel.name.clone()
                    };
                    self.last_alarm_delivery.insert(window, now);
                    alert.delivered_to.insert(channel.name.clone());
                }
            }
        }
        Ok(())
    }
}

impl Observed {
    /// One event of this alert instance: it follows the lifecycle's order.
    fn check(&mut self, decision: &Decision, event: &AlertEvent) -> Result<(), TestCaseError> {
        match event.state {
            EventState::Trigger => {
                prop_assert!(!self.open, "at most one open alert per key");
                *self = Observed {
                    open: true,
                    ..Observed::default()
                };
            }
            EventState::Escalate => {
                prop_assert!(self.open, "escalate only an open alert");
                prop_assert!(!self.escalated, "at most one escalate per open alert");
                self.escalated = true;
            }
            EventState::Resolve => {
                prop_assert!(self.open, "every resolve matches one unresolved trigger");
                self.open = false;
            }
            EventState::Blocked => {
                prop_assert!(self.open, "a blocked event only for an open alert");
                let refusals = event
                    .refusals()
                    .expect("a blocked event carries its refusals");
                prop_assert_eq!(&event.summary, &refusals.sentence());
                let record = decision.alert.as_ref().expect("the alert record");
                prop_assert_eq!(event.severity, record.severity, "the alert's severity");
                prop_assert!(event.severity != Severity::Info);
            }
        }
        Ok(())
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn random_tick_sequences_follow_the_model_and_the_routing_rules(
        config in config(),
        steps in proptest::collection::vec(step(), 1..40),
    ) {
        let mut state = AlertState::default();
        let mut model = Model::default();
        let mut stream = Stream::default();
        let mut now = 1_796_000_000i64;

        for step in steps {
            now += step.advance_s;
            let (roots, gone) = observations(&step);
            let flagged: Vec<&str> = roots.iter().filter(|r| r.flagged).map(|r| r.root.as_str()).collect();
            let plan = plan_llm_opinions(&state, &config, flagged.iter().copied());
            check_plan(&plan, flagged.len(), &config, &model)?;

            let tick = Tick { now, roots, gone, stale: vec![] };
            let outcome = process_tick(&state, &config, &tick).expect("generated ticks are valid");
            prop_assert_eq!(&outcome.opinion_plan, &plan);
            check_lifecycle(&step, (&tick, &outcome), &config, &mut model)?;
            stream.check(&outcome, &config, now)?;

            // The stored state loads back identical.
            let sent = outcome.state_if_all_sent();
            let stored = serde_json::to_string(&sent).expect("serialise");
            let loaded: AlertState = serde_json::from_str(&stored).expect("deserialise");
            prop_assert_eq!(&loaded, &sent);
            state = loaded;
        }
    }
}
