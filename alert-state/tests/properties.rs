//! Random tick sequences against a reference model of the lifecycle, plus the routing invariants
//! of the design.

use alert_state::{
    AlertConfig, AlertState, ChannelConfig, DecisionKind, EventState, GroupBy, LlmOpinion,
    OpinionSkip, OpinionVerdict, RootObservation, Severity, Tick, dedup_key_for_root,
    plan_llm_opinions, process_tick,
};
use proptest::prelude::*;
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

#[derive(Debug, Clone)]
struct Step {
    advance_s: i64,
    statuses: [RootStatus; 4],
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
    )
        .prop_map(|(advance_s, statuses)| Step {
            advance_s,
            statuses,
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

/// The reference model: the decisions.md lifecycle written as plainly as possible.
#[derive(Debug, Default)]
struct Model {
    /// root -> (severity, `flagged_ticks`) of its open alert
    open: BTreeMap<String, (Severity, u32)>,
}

impl Model {
    /// The expected lifecycle decisions for one root, as (kind, severity, `flagged_ticks`).
    fn step(
        &mut self,
        config: &AlertConfig,
        root: &str,
        status: RootStatus,
        opinion_used: Option<LlmOpinion>,
    ) -> Option<(DecisionKind, Severity, u32)> {
        let said_yes = opinion_used == Some(LlmOpinion::Yes);
        match (status, self.open.get(root).copied()) {
            (RootStatus::Flagged(_), None) => {
                let severity = if said_yes || config.escalate_after_ticks == 1 {
                    Severity::Critical
                } else {
                    Severity::Warning
                };
                self.open.insert(root.to_owned(), (severity, 1));
                Some((DecisionKind::Trigger, severity, 1))
            }
            (RootStatus::Flagged(_), Some((severity, ticks))) => {
                let ticks = ticks + 1;
                let (kind, severity) = if severity == Severity::Critical {
                    (DecisionKind::StillFlagged, severity)
                } else if ticks >= config.escalate_after_ticks || said_yes {
                    (DecisionKind::Escalate, Severity::Critical)
                } else {
                    (DecisionKind::StillFlagged, severity)
                };
                self.open.insert(root.to_owned(), (severity, ticks));
                Some((kind, severity, ticks))
            }
            (RootStatus::Healthy, Some((_, ticks))) => {
                self.open.remove(root);
                Some((DecisionKind::ResolveFixed, Severity::Info, ticks))
            }
            (RootStatus::Gone, Some((_, ticks))) => {
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

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn random_tick_sequences_follow_the_model_and_the_routing_rules(
        config in config(),
        steps in proptest::collection::vec(step(), 1..40),
    ) {
        let mut state = AlertState::default();
        let mut model = Model::default();
        let mut observed: BTreeMap<String, Observed> = BTreeMap::new();
        let mut last_alarm_delivery: BTreeMap<String, i64> = BTreeMap::new();
        let mut now = 1_796_000_000i64;

        for step in steps {
            now += step.advance_s;
            let mut roots = Vec::new();
            let mut gone = Vec::new();
            for (root, status) in ROOTS.iter().zip(step.statuses) {
                match status {
                    RootStatus::Unseen => {}
                    RootStatus::Gone => gone.push((*root).to_owned()),
                    RootStatus::Healthy => roots.push(RootObservation::not_flagged(*root, "build")),
                    RootStatus::Flagged(opinion) => {
                        roots.push(RootObservation::flagged(*root, "build", "loop").with_opinion(opinion));
                    }
                }
            }

            // The plan: capped, only when enabled, only flagged roots not critical already.
            let flagged: Vec<&str> = roots.iter().filter(|r| r.flagged).map(|r| r.root.as_str()).collect();
            let plan = plan_llm_opinions(&state, &config, flagged.iter().copied());
            let asked: Vec<&str> = plan.roots_to_ask().collect();
            prop_assert!(asked.len() <= config.max_llm_opinions_per_tick as usize);
            prop_assert_eq!(plan.decisions.len(), flagged.len());
            if !config.local_llm_enabled {
                prop_assert!(asked.is_empty());
            }
            for decision in &plan.decisions {
                prop_assert!(!decision.reason.is_empty());
                if decision.verdict == OpinionVerdict::Ask {
                    let open = model.open.get(&decision.root);
                    prop_assert!(open.is_none_or(|(severity, _)| *severity != Severity::Critical));
                }
                if decision.verdict == OpinionVerdict::Skip(OpinionSkip::CapReached) {
                    prop_assert_eq!(asked.len(), config.max_llm_opinions_per_tick as usize);
                }
            }

            let tick = Tick {
                now,
                roots,
                gone,
                stale: vec![],
            };
            let outcome = process_tick(&state, &config, &tick).expect("generated ticks are valid");
            prop_assert_eq!(&outcome.opinion_plan, &plan);

            // Lifecycle against the model.
            let mut expected = Vec::new();
            for (root, status) in ROOTS.iter().zip(step.statuses) {
                let supplied = match status {
                    RootStatus::Flagged(opinion) => opinion,
                    _ => None,
                };
                let used = if plan.should_ask(root) { supplied } else { None };
                if let Some((kind, severity, ticks)) = model.step(&config, root, status, used) {
                    expected.push(((*root).to_owned(), kind, severity, ticks));
                }
            }
            let actual: Vec<_> = outcome
                .decisions
                .iter()
                .filter(|d| d.kind != DecisionKind::OpinionIgnored)
                .map(|d| {
                    let alert = d.alert.as_ref().expect("lifecycle decisions carry the alert");
                    (d.root.clone(), d.kind, alert.severity, alert.flagged_ticks)
                })
                .collect();
            prop_assert_eq!(actual, expected);
            let open_keys: BTreeSet<&String> = outcome.state.open_alerts.keys().collect();
            let model_keys: BTreeSet<String> = model.open.keys().map(|r| dedup_key_for_root(r)).collect();
            prop_assert_eq!(open_keys, model_keys.iter().collect::<BTreeSet<_>>());

            // Every supplied opinion is either used or reported.
            for observation in &tick.roots {
                if observation.opinion.is_some() && !plan.should_ask(&observation.root) {
                    prop_assert!(outcome.decisions.iter().any(|d| d.root == observation.root && d.kind == DecisionKind::OpinionIgnored));
                }
            }

            // Event stream invariants, per alert instance and per channel.
            for decision in &outcome.decisions {
                prop_assert!(!decision.reason.is_empty());
                let Some(dispatch) = &decision.dispatch else { continue };
                let event = &dispatch.event;
                prop_assert_eq!(&event.source, "agentwatch@prop");
                prop_assert_eq!(dispatch.routes.len(), config.channels.len());
                let alert = observed.entry(event.dedup_key.clone()).or_default();
                match event.state {
                    EventState::Trigger => {
                        prop_assert!(!alert.open, "at most one open alert per key");
                        *alert = Observed { open: true, ..Observed::default() };
                    }
                    EventState::Escalate => {
                        prop_assert!(alert.open, "escalate only an open alert");
                        prop_assert!(!alert.escalated, "at most one escalate per open alert");
                        alert.escalated = true;
                    }
                    EventState::Resolve => {
                        prop_assert!(alert.open, "every resolve matches one unresolved trigger");
                        alert.open = false;
                    }
                }
                for (route, channel) in dispatch.routes.iter().zip(&config.channels) {
                    prop_assert_eq!(&route.channel, &channel.name);
                    prop_assert!(!route.reason.is_empty());
                    if !route.delivery.is_delivered() {
                        continue;
                    }
                    prop_assert!(channel.enabled);
                    if event.state == EventState::Resolve {
                        prop_assert!(alert.delivered_to.contains(&channel.name),
                            "a resolve reached {} which saw no event of the alert", channel.name);
                    } else {
                        prop_assert!(event.severity >= channel.min_severity);
                        if let Some(last) = last_alarm_delivery.get(&channel.name) {
                            prop_assert!(now - last >= channel.rate_limit_s as i64,
                                "{} got two alarms {} s apart (limit {})", channel.name, now - last, channel.rate_limit_s);
                        }
                        last_alarm_delivery.insert(channel.name.clone(), now);
                        alert.delivered_to.insert(channel.name.clone());
                    }
                }
            }

            // The stored state loads back identical.
            let sent = outcome.state_if_all_sent();
            let stored = serde_json::to_string(&sent).expect("serialise");
            let loaded: AlertState = serde_json::from_str(&stored).expect("deserialise");
            prop_assert_eq!(&loaded, &sent);
            state = loaded;
        }
    }
}
