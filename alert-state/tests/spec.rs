//! The alert lifecycle and notifier pipeline of the design (decisions.md section 2), one named
//! case per rule.

use alert_state::{
    AlertConfig, AlertEvent, AlertState, ChannelConfig, ConfigError, Decision, DecisionKind,
    Delivery, EventState, GroupBy, LlmOpinion, OpinionSkip, OpinionVerdict, Refusals,
    RootObservation, Route, Severity, Suppression, Tick, TickError, TickOutcome, parse_llm_opinion,
    plan_llm_opinions, process_tick,
};
use serde_json::json;

const T0: i64 = 1_796_000_000;
const TICK_S: i64 = 300;

const YES: Option<LlmOpinion> = Some(LlmOpinion::Yes);
const NO: Option<LlmOpinion> = Some(LlmOpinion::No);
const NONE: Option<LlmOpinion> = None;

fn channel(name: &str, min_severity: Severity) -> ChannelConfig {
    ChannelConfig {
        name: name.to_owned(),
        channel_type: "desktop".to_owned(),
        enabled: true,
        min_severity,
        rate_limit_s: 300,
        group_by: GroupBy::Channel,
    }
}

fn config() -> AlertConfig {
    AlertConfig {
        source: "agentwatch@test".to_owned(),
        channels: vec![channel("desktop", Severity::Warning)],
        ..AlertConfig::default()
    }
}

fn flagged(root: &str, opinion: Option<LlmOpinion>) -> RootObservation {
    RootObservation::flagged(root, "build", format!("top: read {root}.rs x14"))
        .with_opinion(opinion)
}

fn healthy(root: &str) -> RootObservation {
    RootObservation::not_flagged(root, "build")
}

/// Drives ticks like the oneshot timer: `now` advances by 300 s per tick unless set.
struct Watchdog {
    state: AlertState,
    config: AlertConfig,
    now: i64,
}

impl Watchdog {
    fn new(config: AlertConfig) -> Self {
        Self {
            state: AlertState::default(),
            config,
            now: T0 - TICK_S,
        }
    }

    fn tick(&mut self, roots: Vec<RootObservation>, gone: &[&str]) -> TickOutcome {
        self.tick_at(self.now + TICK_S, roots, gone)
    }

    fn tick_at(&mut self, now: i64, roots: Vec<RootObservation>, gone: &[&str]) -> TickOutcome {
        self.now = now;
        let tick = Tick {
            now,
            roots,
            gone: gone.iter().map(|g| (*g).to_owned()).collect(),
            stale: vec![],
        };
        let outcome = process_tick(&self.state, &self.config, &tick).expect("valid tick");
        self.state = outcome.state_if_all_sent();
        outcome
    }
}

fn only(outcome: &TickOutcome) -> &Decision {
    assert_eq!(
        outcome.decisions.len(),
        1,
        "expected one decision: {:#?}",
        outcome.decisions
    );
    &outcome.decisions[0]
}

fn event(decision: &Decision) -> &AlertEvent {
    &decision
        .dispatch
        .as_ref()
        .expect("decision has an event")
        .event
}

fn routes(decision: &Decision) -> &[Route] {
    &decision
        .dispatch
        .as_ref()
        .expect("decision has an event")
        .routes
}

fn decision_for<'a>(outcome: &'a TickOutcome, root: &str, kind: DecisionKind) -> &'a Decision {
    outcome
        .decisions
        .iter()
        .find(|d| d.root == root && d.kind == kind)
        .unwrap_or_else(|| panic!("no {kind} decision for {root}: {:#?}", outcome.decisions))
}

// ---------------------------------------------------------------------------------------------
// Trigger

#[test]
fn first_flag_opens_an_alert_whose_severity_follows_the_llm_opinion() {
    let cases = [
        ("opinion yes", YES, Severity::Critical),
        ("opinion no", NO, Severity::Warning),
        ("no opinion", NONE, Severity::Warning),
    ];
    for (name, opinion, severity) in cases {
        let mut watchdog = Watchdog::new(config());
        let outcome = watchdog.tick(vec![flagged("ses_a", opinion)], &[]);
        let decision = only(&outcome);
        assert_eq!(decision.kind, DecisionKind::Trigger, "{name}");
        let alert = decision.alert.as_ref().expect("alert record");
        assert_eq!(alert.flagged_ticks, 1, "{name}");
        assert_eq!(alert.severity, severity, "{name}");
        assert_eq!(alert.opened_at, T0, "{name}");
        assert_eq!(alert.last_fired_at, T0, "{name}");
        assert_eq!(alert.resolved_at, None, "{name}");
        let event = event(decision);
        assert_eq!(event.state, EventState::Trigger, "{name}");
        assert_eq!(event.severity, severity, "{name}");
        assert_eq!(event.dedup_key, "opencode-loop:ses_a", "{name}");
        assert_eq!(event.title, "opencode loop: build", "{name}");
        assert_eq!(event.summary, "top: read ses_a.rs x14", "{name}");
        assert_eq!(event.source, "agentwatch@test", "{name}");
        assert!(
            decision.reason.contains(severity.as_str()),
            "{name}: {}",
            decision.reason
        );
        assert_eq!(watchdog.state.open_alerts.len(), 1, "{name}");
    }
}

#[test]
fn first_flag_over_the_opinion_cap_opens_a_warning_and_reports_the_unused_opinion() {
    let mut watchdog = Watchdog::new(config());
    let roots = ["ses_a", "ses_b", "ses_c", "ses_d"];
    let outcome = watchdog.tick(roots.iter().map(|r| flagged(r, YES)).collect(), &[]);

    for root in &roots[..3] {
        let trigger = decision_for(&outcome, root, DecisionKind::Trigger);
        assert_eq!(
            event(trigger).severity,
            Severity::Critical,
            "{root} is within the cap of 3"
        );
    }
    let trigger = decision_for(&outcome, "ses_d", DecisionKind::Trigger);
    assert_eq!(event(trigger).severity, Severity::Warning);
    assert!(trigger.reason.contains("cap of 3"), "{}", trigger.reason);
    let ignored = decision_for(&outcome, "ses_d", DecisionKind::OpinionIgnored);
    assert!(
        ignored.reason.contains("`yes` not used"),
        "{}",
        ignored.reason
    );
    assert!(ignored.dispatch.is_none());
}

#[test]
fn with_the_local_llm_disabled_an_opinion_is_ignored_and_the_alert_opens_as_warning() {
    let mut watchdog = Watchdog::new(AlertConfig {
        local_llm_enabled: false,
        ..config()
    });
    let outcome = watchdog.tick(vec![flagged("ses_a", YES)], &[]);
    assert_eq!(
        event(decision_for(&outcome, "ses_a", DecisionKind::Trigger)).severity,
        Severity::Warning
    );
    let ignored = decision_for(&outcome, "ses_a", DecisionKind::OpinionIgnored);
    assert!(
        ignored.reason.contains("local_llm_enabled is false"),
        "{}",
        ignored.reason
    );
}

#[test]
fn escalate_after_one_tick_opens_as_critical() {
    let mut watchdog = Watchdog::new(AlertConfig {
        escalate_after_ticks: 1,
        ..config()
    });
    let outcome = watchdog.tick(vec![flagged("ses_a", NONE)], &[]);
    assert_eq!(event(only(&outcome)).severity, Severity::Critical);
}

#[test]
fn quiet_and_unknown_roots_produce_no_decision() {
    let mut watchdog = Watchdog::new(config());
    let outcome = watchdog.tick(vec![healthy("ses_a")], &["ses_b"]);
    assert!(outcome.decisions.is_empty());
    assert_eq!(outcome.state, AlertState::default());
}

// ---------------------------------------------------------------------------------------------
// Escalate

/// The design's timeline, one row per 5-minute tick of the same root.
#[test]
fn persistent_loop_timeline() {
    struct Row {
        what: &'static str,
        opinion: Option<LlmOpinion>,
        kind: DecisionKind,
        flagged_ticks: u32,
        severity: Severity,
        event: Option<EventState>,
    }
    let rows = [
        Row {
            what: "tick 1 triggers as warning",
            opinion: NO,
            kind: DecisionKind::Trigger,
            flagged_ticks: 1,
            severity: Severity::Warning,
            event: Some(EventState::Trigger),
        },
        Row {
            what: "tick 2 counts, no event",
            opinion: NONE,
            kind: DecisionKind::StillFlagged,
            flagged_ticks: 2,
            severity: Severity::Warning,
            event: None,
        },
        Row {
            what: "tick 3 escalates",
            opinion: NONE,
            kind: DecisionKind::Escalate,
            flagged_ticks: 3,
            severity: Severity::Critical,
            event: Some(EventState::Escalate),
        },
        Row {
            what: "tick 4 nothing: critical already",
            opinion: NONE,
            kind: DecisionKind::StillFlagged,
            flagged_ticks: 4,
            severity: Severity::Critical,
            event: None,
        },
        Row {
            what: "tick 5 nothing even on a yes",
            opinion: YES,
            kind: DecisionKind::StillFlagged,
            flagged_ticks: 5,
            severity: Severity::Critical,
            event: None,
        },
    ];
    let mut watchdog = Watchdog::new(config());
    for row in rows {
        let outcome = watchdog.tick(vec![flagged("ses_a", row.opinion)], &[]);
        let decision = decision_for(&outcome, "ses_a", row.kind);
        let alert = decision.alert.as_ref().expect("alert record");
        assert_eq!(alert.flagged_ticks, row.flagged_ticks, "{}", row.what);
        assert_eq!(alert.severity, row.severity, "{}", row.what);
        assert_eq!(alert.opened_at, T0, "{}", row.what);
        assert_eq!(
            decision.dispatch.as_ref().map(|d| d.event.state),
            row.event,
            "{}",
            row.what
        );
        let events: Vec<_> = outcome.events().collect();
        assert_eq!(
            events.len(),
            usize::from(row.event.is_some()),
            "{}: one event at most",
            row.what
        );
    }
    let alert = watchdog
        .state
        .open_alert_for_root("ses_a")
        .expect("still open");
    assert_eq!(
        alert.last_fired_at,
        T0 + 2 * TICK_S,
        "last event was the escalate of tick 3"
    );
}

#[test]
fn the_escalate_event_says_why() {
    let mut watchdog = Watchdog::new(config());
    watchdog.tick(vec![flagged("ses_a", NONE)], &[]);
    watchdog.tick(vec![flagged("ses_a", NONE)], &[]);
    let outcome = watchdog.tick(vec![flagged("ses_a", NONE)], &[]);
    let decision = only(&outcome);
    assert!(
        decision
            .reason
            .contains("flagged tick 3 reached escalate_after_ticks 3"),
        "{}",
        decision.reason
    );
    let event = event(decision);
    assert_eq!(
        event.summary,
        "top: read ses_a.rs x14 (still looping after 3 flagged ticks)"
    );
    assert_eq!(event.details["flagged_ticks"], json!(3));
}

#[test]
fn a_yes_on_a_later_tick_escalates_early() {
    for first in [NO, NONE] {
        let mut watchdog = Watchdog::new(config());
        watchdog.tick(vec![flagged("ses_a", first)], &[]);
        let outcome = watchdog.tick(vec![flagged("ses_a", YES)], &[]);
        let decision = only(&outcome);
        assert_eq!(
            decision.kind,
            DecisionKind::Escalate,
            "first opinion {first:?}"
        );
        assert_eq!(decision.alert.as_ref().map(|a| a.flagged_ticks), Some(2));
        assert!(
            decision
                .reason
                .contains("the local LLM said yes on flagged tick 2"),
            "{}",
            decision.reason
        );
        assert_eq!(event(decision).severity, Severity::Critical);
        assert_eq!(event(decision).details["llm_opinion"], json!("yes"));

        let outcome = watchdog.tick(vec![flagged("ses_a", NONE)], &[]);
        assert_eq!(
            only(&outcome).kind,
            DecisionKind::StillFlagged,
            "no second escalate at tick 3"
        );
    }
}

/// With `escalate_min_gap_s`, escalation follows wall time, not how often the job judges: a
/// flagged judgement counts only `gap` seconds after the last counted one (the trigger first).
#[test]
fn escalation_counts_judgements_at_least_the_minimum_gap_apart() {
    // (how the job judges, seconds between judgements, judgements, escalates at judgement)
    let cases: [(&str, i64, usize, Option<usize>); 5] = [
        ("the 5-minute timer", 300, 3, Some(3)),
        ("--follow, a judgement every 4 s", 4, 200, Some(121)),
        ("three manual --once runs in a minute", 20, 3, None),
        ("a judgement a minute for seven minutes", 60, 8, None),
        ("a judgement a minute", 60, 12, Some(9)),
    ];
    for (how, every, judgements, escalates_at) in cases {
        let mut watchdog = Watchdog::new(AlertConfig {
            escalate_min_gap_s: 240,
            ..config()
        });
        let mut escalated = None;
        for n in 1..=judgements {
            let now = T0 + every * i64::try_from(n - 1).expect("small");
            let outcome = watchdog.tick_at(now, vec![flagged("ses_a", NONE)], &[]);
            if only(&outcome).kind == DecisionKind::Escalate {
                escalated = Some(n);
            }
        }
        assert_eq!(escalated, escalates_at, "{how}");
    }
}

#[test]
fn a_judgement_under_the_minimum_gap_says_it_was_not_counted_and_a_yes_still_escalates() {
    let mut watchdog = Watchdog::new(AlertConfig {
        escalate_min_gap_s: 240,
        ..config()
    });
    watchdog.tick_at(T0, vec![flagged("ses_a", NONE)], &[]);
    let outcome = watchdog.tick_at(T0 + 4, vec![flagged("ses_a", NONE)], &[]);
    let decision = only(&outcome);
    assert_eq!(decision.kind, DecisionKind::StillFlagged);
    assert_eq!(decision.alert.as_ref().map(|a| a.flagged_ticks), Some(1));
    assert!(
        decision.reason.contains(
            "flagged again 4 s after the last counted judgement, under escalate_min_gap_s 240: \
             not counted (still 1 of 3)"
        ),
        "{}",
        decision.reason
    );
    let outcome = watchdog.tick_at(T0 + 8, vec![flagged("ses_a", YES)], &[]);
    assert_eq!(only(&outcome).kind, DecisionKind::Escalate);
}

#[test]
fn a_no_on_a_later_tick_does_not_escalate() {
    let mut watchdog = Watchdog::new(config());
    watchdog.tick(vec![flagged("ses_a", NO)], &[]);
    let outcome = watchdog.tick(vec![flagged("ses_a", NO)], &[]);
    assert_eq!(only(&outcome).kind, DecisionKind::StillFlagged);
    assert!(
        only(&outcome).reason.contains("flagged tick 2 of 3"),
        "{}",
        only(&outcome).reason
    );
}

#[test]
fn a_trigger_confirmed_by_the_llm_never_escalates() {
    let mut watchdog = Watchdog::new(config());
    watchdog.tick(vec![flagged("ses_a", YES)], &[]);
    for _ in 2..=4 {
        let outcome = watchdog.tick(vec![flagged("ses_a", NONE)], &[]);
        assert_eq!(only(&outcome).kind, DecisionKind::StillFlagged);
        assert_eq!(outcome.events().count(), 0);
    }
}

// ---------------------------------------------------------------------------------------------
// Resolve and reopen

#[test]
fn an_open_alert_resolves_when_fixed_or_gone() {
    type Resolution = (
        &'static str,
        Vec<RootObservation>,
        Vec<&'static str>,
        DecisionKind,
        &'static str,
    );
    let cases: [Resolution; 2] = [
        (
            "fixed",
            vec![healthy("ses_a")],
            vec![],
            DecisionKind::ResolveFixed,
            "no longer flagged",
        ),
        (
            "gone",
            vec![],
            vec!["ses_a"],
            DecisionKind::ResolveGone,
            "gone from the opencode server",
        ),
    ];
    for (because, roots, gone, kind, words) in cases {
        let mut watchdog = Watchdog::new(config());
        watchdog.tick(vec![flagged("ses_a", NO)], &[]);
        watchdog.tick(vec![flagged("ses_a", NONE)], &[]);
        let outcome = watchdog.tick(roots, &gone);
        let decision = only(&outcome);
        assert_eq!(decision.kind, kind, "{because}");
        assert!(
            decision.reason.contains(words),
            "{because}: {}",
            decision.reason
        );
        let alert = decision.alert.as_ref().expect("final record");
        assert_eq!(alert.severity, Severity::Info, "{because}");
        assert_eq!(alert.resolved_at, Some(T0 + 2 * TICK_S), "{because}");
        assert_eq!(alert.last_fired_at, T0 + 2 * TICK_S, "{because}");
        assert_eq!(alert.flagged_ticks, 2, "{because}");
        let event = event(decision);
        assert_eq!(event.state, EventState::Resolve, "{because}");
        assert_eq!(event.severity, Severity::Info, "{because}");
        assert!(
            event.summary.contains(words),
            "{because}: {}",
            event.summary
        );
        assert_eq!(event.details["resolved_because"], json!(because));
        assert_eq!(
            routes(decision)[0].delivery,
            Delivery::Delivered,
            "{because}: the trigger went to desktop"
        );
        assert!(watchdog.state.open_alerts.is_empty(), "{because}");
        assert!(
            watchdog.state.router.delivered.is_empty(),
            "{because}: delivery record dropped"
        );
    }
}

#[test]
fn a_flag_after_resolve_opens_a_fresh_alert_with_flagged_ticks_one() {
    let mut watchdog = Watchdog::new(config());
    for _ in 0..3 {
        watchdog.tick(vec![flagged("ses_a", NONE)], &[]);
    }
    watchdog.tick(vec![healthy("ses_a")], &[]);
    let outcome = watchdog.tick(vec![flagged("ses_a", NONE)], &[]);
    let decision = only(&outcome);
    assert_eq!(decision.kind, DecisionKind::Trigger);
    let alert = decision.alert.as_ref().expect("alert record");
    assert_eq!(alert.flagged_ticks, 1);
    assert_eq!(
        alert.severity,
        Severity::Warning,
        "fresh alert, not the old critical one"
    );
    assert_eq!(alert.opened_at, T0 + 4 * TICK_S);
    let outcome = watchdog.tick(vec![flagged("ses_a", NONE)], &[]);
    assert_eq!(
        only(&outcome).kind,
        DecisionKind::StillFlagged,
        "counting restarted at 1"
    );
}

// ---------------------------------------------------------------------------------------------
// LLM opinions

#[test]
fn llm_replies_are_parsed_strictly() {
    let cases = [
        ("yes", YES),
        ("no", NO),
        ("YES", YES),
        ("No", NO),
        ("  yes\n", YES),
        ("\tno \r\n", NO),
        ("Yes.", NONE),
        ("yes, it loops", NONE),
        ("y", NONE),
        ("nope", NONE),
        ("", NONE),
        ("   ", NONE),
        ("\u{ff59}es", NONE),
        ("\"yes\"", NONE),
    ];
    for (reply, expected) in cases {
        assert_eq!(parse_llm_opinion(reply), expected, "reply {reply:?}");
    }
}

#[test]
fn the_opinion_plan_asks_only_where_the_answer_can_change_the_outcome() {
    let mut watchdog = Watchdog::new(config());
    // ses_crit opens critical; ses_two will be at flagged tick 2 (3 next: escalates anyway);
    // ses_one opens in the second tick (flagged tick 2 next: may escalate early on a yes).
    watchdog.tick(
        vec![flagged("ses_crit", YES), flagged("ses_two", NONE)],
        &[],
    );
    watchdog.tick(
        vec![
            flagged("ses_crit", NONE),
            flagged("ses_two", NONE),
            flagged("ses_one", NONE),
        ],
        &[],
    );
    let plan = plan_llm_opinions(
        &watchdog.state,
        &watchdog.config,
        ["ses_two", "ses_crit", "ses_new", "ses_one", "ses_new"],
    );
    let verdicts: Vec<(&str, OpinionVerdict)> = plan
        .decisions
        .iter()
        .map(|d| (d.root.as_str(), d.verdict))
        .collect();
    assert_eq!(
        verdicts,
        [
            ("ses_new", OpinionVerdict::Ask),
            ("ses_one", OpinionVerdict::Ask),
            (
                "ses_crit",
                OpinionVerdict::Skip(OpinionSkip::AlreadyCritical)
            ),
            (
                "ses_two",
                OpinionVerdict::Skip(OpinionSkip::EscalatesAnyway)
            ),
        ]
    );
    assert_eq!(
        plan.roots_to_ask().collect::<Vec<_>>(),
        ["ses_new", "ses_one"]
    );
    assert!(plan.decisions.iter().all(|d| !d.reason.is_empty()));
}

#[test]
fn the_opinion_cap_prefers_new_roots_then_the_oldest_open_warning() {
    let mut watchdog = Watchdog::new(config());
    watchdog.tick(vec![flagged("ses_old", NONE)], &[]);
    watchdog.tick(vec![flagged("ses_young", NONE)], &[]);
    let state = AlertState {
        open_alerts: watchdog
            .state
            .open_alerts
            .iter()
            .map(|(key, alert)| (key.clone(), alert.clone()))
            .collect(),
        ..AlertState::default()
    };
    let config = AlertConfig {
        escalate_after_ticks: 10,
        ..config()
    };
    let flagged_roots = ["ses_young", "ses_old", "ses_n2", "ses_n1"];
    let expected_asks: [&[&str]; 5] = [
        &[],
        &["ses_n1"],
        &["ses_n1", "ses_n2"],
        &["ses_n1", "ses_n2", "ses_old"],
        &["ses_n1", "ses_n2", "ses_old", "ses_young"],
    ];
    for (cap, expected) in expected_asks.into_iter().enumerate() {
        let config = AlertConfig {
            max_llm_opinions_per_tick: cap as u32,
            ..config.clone()
        };
        let plan = plan_llm_opinions(&state, &config, flagged_roots);
        assert_eq!(
            plan.roots_to_ask().collect::<Vec<_>>(),
            expected,
            "cap {cap}"
        );
        let capped = plan
            .decisions
            .iter()
            .filter(|d| d.verdict == OpinionVerdict::Skip(OpinionSkip::CapReached))
            .count();
        assert_eq!(capped, 4 - expected.len(), "cap {cap}");
    }
}

#[test]
fn with_the_local_llm_disabled_nobody_is_asked() {
    let config = AlertConfig {
        local_llm_enabled: false,
        ..config()
    };
    let plan = plan_llm_opinions(&AlertState::default(), &config, ["ses_a", "ses_b"]);
    assert_eq!(plan.roots_to_ask().count(), 0);
    assert!(
        plan.decisions
            .iter()
            .all(|d| d.verdict == OpinionVerdict::Skip(OpinionSkip::LlmDisabled))
    );
}

#[test]
fn only_the_plan_asks_and_only_its_answers_reach_the_tick() {
    let config = AlertConfig {
        max_llm_opinions_per_tick: 1,
        ..config()
    };
    let state = AlertState::default();
    // Two new roots, a cap of one: ses_a (first by id) is asked, ses_b is not.
    let plan = plan_llm_opinions(&state, &config, ["ses_b", "ses_a"]);
    let mut asked_for = Vec::new();
    let opinions = plan.ask(|planned| {
        asked_for = planned.iter().map(|r| (*r).to_owned()).collect();
        // A careless asker answers for everyone: the answer about ses_b is dropped.
        [("ses_a", YES), ("ses_b", YES), ("ses_zz", YES)]
            .into_iter()
            .map(|(root, opinion)| (root.to_owned(), opinion))
            .collect()
    });
    assert_eq!(asked_for, ["ses_a"]);
    assert_eq!(opinions.get("ses_a"), Some(LlmOpinion::Yes));
    assert_eq!(
        (opinions.get("ses_b"), opinions.get("ses_zz")),
        (None, None)
    );
    let mut roots = vec![flagged("ses_a", None), flagged("ses_b", None)];
    opinions.attach(&mut roots);
    assert_eq!((roots[0].opinion, roots[1].opinion), (YES, None));
    let outcome = process_tick(
        &state,
        &config,
        &Tick {
            now: T0,
            roots,
            gone: vec![],
            stale: vec![],
        },
    )
    .expect("valid tick");
    let severity = |root: &str| outcome.state.open_alert_for_root(root).map(|a| a.severity);
    assert_eq!(
        severity("ses_a"),
        Some(Severity::Critical),
        "the yes was used"
    );
    assert_eq!(
        severity("ses_b"),
        Some(Severity::Warning),
        "no opinion, a warning"
    );

    // Nothing to ask: the model is not called at all.
    let quiet = AlertConfig {
        local_llm_enabled: false,
        ..config
    };
    let opinions = plan_llm_opinions(&state, &quiet, ["ses_a"]).ask(|_| panic!("not asked"));
    assert_eq!(opinions.get("ses_a"), None);
}

#[test]
fn an_opinion_on_a_root_that_is_not_flagged_is_reported_and_unused() {
    let mut watchdog = Watchdog::new(config());
    let outcome = watchdog.tick(vec![healthy("ses_a").with_opinion(YES)], &[]);
    let decision = only(&outcome);
    assert_eq!(decision.kind, DecisionKind::OpinionIgnored);
    assert!(
        decision.reason.contains("not flagged"),
        "{}",
        decision.reason
    );
    assert!(watchdog.state.open_alerts.is_empty());
}

// ---------------------------------------------------------------------------------------------
// Routing

fn suppression(route: &Route) -> Option<Suppression> {
    match route.delivery {
        Delivery::Delivered => None,
        Delivery::Suppressed(why) => Some(why),
    }
}

#[test]
fn severity_gate_and_disabled_channel() {
    let mut config = config();
    config.channels = vec![
        channel("all", Severity::Info),
        channel("warn", Severity::Warning),
        channel("crit", Severity::Critical),
        ChannelConfig {
            enabled: false,
            ..channel("off", Severity::Info)
        },
    ];
    let mut watchdog = Watchdog::new(config);
    let trigger = watchdog.tick(vec![flagged("ses_a", NONE)], &[]);
    let got: Vec<_> = routes(only(&trigger))
        .iter()
        .map(|r| (r.channel.as_str(), suppression(r)))
        .collect();
    assert_eq!(
        got,
        [
            ("all", None),
            ("warn", None),
            ("crit", Some(Suppression::BelowSeverity)),
            ("off", Some(Suppression::Disabled)),
        ]
    );
    assert!(
        routes(only(&trigger))[2]
            .reason
            .contains("warning is below `crit`'s min_severity critical")
    );

    let escalate = watchdog.tick(vec![flagged("ses_a", YES)], &[]);
    let got: Vec<_> = routes(only(&escalate))
        .iter()
        .map(|r| (r.channel.as_str(), suppression(r)))
        .collect();
    assert_eq!(
        got,
        [
            ("all", None),
            ("warn", None),
            ("crit", None),
            ("off", Some(Suppression::Disabled)),
        ],
        "the escalate is 300 s after the trigger: rate limit over, critical passes every gate"
    );
}

/// A critical event has its own rate-limit window (Alertmanager, too, notifies again when the
/// severity changes): an escalate 10 s after its trigger is not held behind it, and a warning
/// after a critical waits for both windows. A resolve tells what the alert had become.
#[test]
fn an_escalate_is_not_held_behind_the_warning_that_opened_its_alert() {
    let mut watchdog = Watchdog::new(config());
    let trigger = watchdog.tick_at(T0, vec![flagged("ses_a", NONE)], &[]);
    assert_eq!(suppression(&routes(only(&trigger))[0]), None);
    let escalate = watchdog.tick_at(T0 + 10, vec![flagged("ses_a", YES)], &[]);
    assert_eq!(event(only(&escalate)).state, EventState::Escalate);
    assert_eq!(
        suppression(&routes(only(&escalate))[0]),
        None,
        "{:?}",
        routes(only(&escalate))
    );
    // Another loop's warning 20 s later waits: the critical's window holds it too.
    let held = watchdog.tick_at(
        T0 + 20,
        vec![flagged("ses_a", YES), flagged("ses_b", NONE)],
        &[],
    );
    let warning = decision_for(&held, "ses_b", DecisionKind::Trigger);
    assert_eq!(
        suppression(&routes(warning)[0]),
        Some(Suppression::RateLimited)
    );
    let resolve = watchdog.tick_at(T0 + 30, vec![healthy("ses_a")], &[]);
    let resolved = decision_for(&resolve, "ses_a", DecisionKind::ResolveFixed);
    assert_eq!(event(resolved).details["was_severity"], "critical");
}

/// Alertmanager's `group_by`: on a `key` channel each dedup key has its own rate-limit window,
/// so a second loop's first word is never held behind the first loop's; on a `channel` channel
/// the burst shares one window (a person reads it). A key's window ends with its resolve.
#[test]
fn group_by_key_gives_each_loop_its_own_window_and_channel_shares_one() {
    let mut config = config();
    config.channels = vec![
        channel("desk", Severity::Warning),
        ChannelConfig {
            group_by: GroupBy::Key,
            ..channel("json", Severity::Warning)
        },
    ];
    let mut watchdog = Watchdog::new(config);
    watchdog.tick_at(T0, vec![flagged("ses_a", NONE)], &[]);
    let second = watchdog.tick_at(
        T0 + 60,
        vec![flagged("ses_a", NONE), flagged("ses_b", NONE)],
        &[],
    );
    let trigger = decision_for(&second, "ses_b", DecisionKind::Trigger);
    let got: Vec<_> = routes(trigger)
        .iter()
        .map(|r| (r.channel.as_str(), suppression(r)))
        .collect();
    assert_eq!(
        got,
        [("desk", Some(Suppression::RateLimited)), ("json", None)]
    );
    assert!(
        routes(trigger)[1].reason.contains("of this key"),
        "{:?}",
        routes(trigger)[1]
    );
    assert_eq!(
        watchdog.state.router.last_alarm.len(),
        3,
        "desk, json×ses_a, json×ses_b"
    );

    watchdog.tick_at(
        T0 + 120,
        vec![healthy("ses_a"), flagged("ses_b", NONE)],
        &[],
    );
    let windows: Vec<&str> = watchdog
        .state
        .router
        .last_alarm
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        windows,
        ["desk", "json\nopencode-loop:ses_b"],
        "ses_a's window ended with it"
    );
    assert_eq!(
        watchdog.state.next_wakeup(&watchdog.config, T0 + 120),
        Some(T0 + 300),
        "the earliest window to free: desk's, opened at T0"
    );
}

/// Decided boundary: the rate-limit window is half-open, `(t, t + rate_limit_s)` is blocked and
/// `t + rate_limit_s` is free again.
#[test]
fn rate_limit_boundary_is_exclusive_at_rate_limit_s() {
    let cases = [
        (0, Some(Suppression::RateLimited)),
        (1, Some(Suppression::RateLimited)),
        (299, Some(Suppression::RateLimited)),
        (300, None),
        (301, None),
    ];
    for (elapsed, expected) in cases {
        let mut watchdog = Watchdog::new(config());
        watchdog.tick_at(T0, vec![flagged("ses_a", NONE)], &[]);
        let outcome = watchdog.tick_at(
            T0 + elapsed,
            vec![flagged("ses_a", NONE), flagged("ses_b", NONE)],
            &[],
        );
        let trigger = decision_for(&outcome, "ses_b", DecisionKind::Trigger);
        assert_eq!(
            suppression(&routes(trigger)[0]),
            expected,
            "{elapsed} s after the last delivery"
        );
        if expected.is_some() {
            let reason = &routes(trigger)[0].reason;
            assert!(
                reason.contains(&format!("free again at {}", alert_state::iso8601(T0 + 300))),
                "{reason}"
            );
            assert!(reason.contains("opencode-loop:ses_a"), "{reason}");
        }
    }
}

#[test]
fn a_zero_rate_limit_never_suppresses() {
    let mut config = config();
    config.channels[0].rate_limit_s = 0;
    let mut watchdog = Watchdog::new(config);
    let outcome = watchdog.tick(vec![flagged("ses_a", NONE), flagged("ses_b", NONE)], &[]);
    assert_eq!(outcome.deliveries().count(), 2);
}

#[test]
fn a_delivery_stamped_after_now_counts_as_recent() {
    let mut watchdog = Watchdog::new(config());
    watchdog.tick_at(T0, vec![flagged("ses_a", NONE)], &[]);
    let outcome = watchdog.tick_at(
        T0 - 1000,
        vec![flagged("ses_a", NONE), flagged("ses_b", NONE)],
        &[],
    );
    let trigger = decision_for(&outcome, "ses_b", DecisionKind::Trigger);
    assert_eq!(
        suppression(&routes(trigger)[0]),
        Some(Suppression::RateLimited)
    );
    assert!(routes(trigger)[0].reason.contains("clock went back"));
}

#[test]
fn when_alerts_compete_for_a_rate_limited_channel_the_most_severe_wins() {
    let mut watchdog = Watchdog::new(config());
    let outcome = watchdog.tick(vec![flagged("ses_a", NONE), flagged("ses_b", YES)], &[]);
    let warning = decision_for(&outcome, "ses_a", DecisionKind::Trigger);
    let critical = decision_for(&outcome, "ses_b", DecisionKind::Trigger);
    assert_eq!(suppression(&routes(critical)[0]), None);
    assert_eq!(
        suppression(&routes(warning)[0]),
        Some(Suppression::RateLimited)
    );
    assert!(routes(warning)[0].reason.contains("opencode-loop:ses_b"));
    let keys: Vec<_> = outcome
        .decisions
        .iter()
        .map(|d| d.dedup_key.as_str())
        .collect();
    assert_eq!(
        keys,
        ["opencode-loop:ses_a", "opencode-loop:ses_b"],
        "decisions listed by key"
    );
}

#[test]
fn a_resolve_bypasses_severity_and_rate_limit_for_channels_that_delivered_the_alert() {
    let mut watchdog = Watchdog::new(config());
    watchdog.tick_at(T0, vec![flagged("ses_a", NONE)], &[]);
    let outcome = watchdog.tick_at(T0 + 10, vec![healthy("ses_a")], &[]);
    let route = &routes(only(&outcome))[0];
    assert_eq!(
        route.delivery,
        Delivery::Delivered,
        "info < warning and 10 s < 300 s, still delivered"
    );
    assert!(route.reason.contains("bypass"), "{}", route.reason);
}

/// An alert records the source that saw its tree (the latest one that did), for the caller's
/// "gone" rule; an observation without a source keeps the recorded one.
#[test]
fn an_alert_records_the_source_that_saw_its_tree() {
    let mut watchdog = Watchdog::new(config());
    let open = watchdog.tick(vec![flagged("ses_a", NONE).from_source("http://a")], &[]);
    assert_eq!(only(&open).alert.as_ref().unwrap().source, "http://a");
    watchdog.tick(vec![flagged("ses_a", NONE)], &[]);
    assert_eq!(
        watchdog.state.open_alerts["opencode-loop:ses_a"].source,
        "http://a"
    );
    watchdog.tick(vec![flagged("ses_a", NONE).from_source("/db")], &[]);
    assert_eq!(
        watchdog.state.open_alerts["opencode-loop:ses_a"].source,
        "/db"
    );
    // A state stored before sources were recorded loads with none.
    let mut json = serde_json::to_value(&watchdog.state).unwrap();
    json["open_alerts"]["opencode-loop:ses_a"]
        .as_object_mut()
        .unwrap()
        .remove("source");
    let old: AlertState = serde_json::from_value(json).unwrap();
    assert_eq!(old.open_alerts["opencode-loop:ses_a"].source, "");
}

/// A stale root (no new call within the stale age) resolves its open alert as `resolve_stale`,
/// with a readable reason and a resolve event for the channels that saw the alert; a stale root
/// also listed as gone resolves once, as stale; a stale root without an alert is nothing.
#[test]
fn a_stale_root_resolves_its_open_alert_as_stale() {
    let mut watchdog = Watchdog::new(config());
    watchdog.tick(vec![flagged("ses_a", NONE)], &[]);
    watchdog.tick(vec![flagged("ses_b", NONE)], &[]);
    watchdog.now += TICK_S;
    let tick = Tick {
        now: watchdog.now,
        roots: vec![],
        gone: vec!["ses_a".into(), "ses_b".into()],
        stale: vec!["ses_a".into(), "ses_c".into()],
    };
    let outcome = process_tick(&watchdog.state, &watchdog.config, &tick).expect("valid tick");
    let kinds: Vec<(&str, DecisionKind)> = outcome
        .decisions
        .iter()
        .map(|d| (d.root.as_str(), d.kind))
        .collect();
    assert_eq!(
        kinds,
        [
            ("ses_a", DecisionKind::ResolveStale),
            ("ses_b", DecisionKind::ResolveGone)
        ]
    );
    let stale = &outcome.decisions[0];
    assert_eq!(stale.kind.as_str(), "resolve_stale");
    assert!(stale.reason.contains("stale_after_s"), "{}", stale.reason);
    let event = event(stale);
    assert_eq!(event.state, EventState::Resolve);
    assert!(event.summary.contains("stale"), "{}", event.summary);
    assert_eq!(event.details["resolved_because"], json!("stale"));
    assert_eq!(routes(stale)[0].delivery, Delivery::Delivered);
    assert!(outcome.state.open_alerts.is_empty());
}

#[test]
fn a_resolve_does_not_start_a_rate_limit_window() {
    let mut watchdog = Watchdog::new(config());
    watchdog.tick_at(T0, vec![flagged("ses_a", NONE)], &[]);
    let outcome = watchdog.tick_at(T0 + 300, vec![flagged("ses_b", NONE)], &["ses_a"]);
    let resolve = decision_for(&outcome, "ses_a", DecisionKind::ResolveGone);
    let trigger = decision_for(&outcome, "ses_b", DecisionKind::Trigger);
    assert_eq!(routes(resolve)[0].delivery, Delivery::Delivered);
    assert_eq!(routes(trigger)[0].delivery, Delivery::Delivered);
    assert_eq!(
        watchdog.state.router.last_alarm["desktop"].dedup_key,
        "opencode-loop:ses_b"
    );
}

#[test]
fn a_resolve_goes_only_to_channels_that_delivered_an_earlier_event_of_the_alert() {
    let mut config = config();
    config.channels = vec![
        channel("warn", Severity::Warning),
        channel("crit", Severity::Critical),
    ];
    let mut watchdog = Watchdog::new(config);
    watchdog.tick(vec![flagged("ses_a", NONE)], &[]);
    let outcome = watchdog.tick(vec![healthy("ses_a")], &[]);
    let got: Vec<_> = routes(only(&outcome))
        .iter()
        .map(|r| (r.channel.as_str(), suppression(r)))
        .collect();
    assert_eq!(
        got,
        [
            ("warn", None),
            ("crit", Some(Suppression::NotDeliveredBefore))
        ]
    );

    // An escalate that reached `crit` earns it the resolve too.
    watchdog.tick(vec![flagged("ses_b", NONE)], &[]);
    watchdog.tick(vec![flagged("ses_b", YES)], &[]);
    let outcome = watchdog.tick(vec![], &["ses_b"]);
    let got: Vec<_> = routes(only(&outcome))
        .iter()
        .map(|r| (r.channel.as_str(), suppression(r)))
        .collect();
    assert_eq!(got, [("warn", None), ("crit", None)]);
}

#[test]
fn a_resolve_respects_a_channel_disabled_since_it_delivered() {
    let mut watchdog = Watchdog::new(config());
    watchdog.tick(vec![flagged("ses_a", NONE)], &[]);
    watchdog.config.channels[0].enabled = false;
    let outcome = watchdog.tick(vec![healthy("ses_a")], &[]);
    assert_eq!(
        suppression(&routes(only(&outcome))[0]),
        Some(Suppression::Disabled)
    );
}

#[test]
fn a_resolve_of_an_alert_delivered_nowhere_goes_nowhere() {
    let mut watchdog = Watchdog::new(AlertConfig {
        channels: vec![],
        ..config()
    });
    watchdog.tick(vec![flagged("ses_a", NONE)], &[]);
    watchdog.config.channels = vec![channel("desktop", Severity::Warning)];
    let outcome = watchdog.tick(vec![healthy("ses_a")], &[]);
    assert_eq!(
        suppression(&routes(only(&outcome))[0]),
        Some(Suppression::NotDeliveredBefore)
    );
}

// ---------------------------------------------------------------------------------------------
// Wire formats and state

#[test]
fn alert_event_has_the_pagerduty_events_v2_shape() {
    let mut watchdog = Watchdog::new(config());
    let mut observation = flagged("ses_a", YES);
    observation.details = json!({"top": 14, "top_what": "read lib.rs"});
    let outcome = watchdog.tick(vec![observation], &[]);
    let wire = serde_json::to_value(event(only(&outcome))).expect("serialise");
    assert_eq!(
        wire,
        json!({
            "dedup_key": "opencode-loop:ses_a",
            "severity": "critical",
            "state": "trigger",
            "title": "opencode loop: build",
            "summary": "top: read ses_a.rs x14",
            "details": {
                "root": "ses_a",
                "agent": "build",
                "flagged_ticks": 1,
                "opened_at": T0,
                "llm_opinion": "yes",
                "verdict": {"top": 14, "top_what": "read lib.rs"}
            },
            "source": "agentwatch@test"
        })
    );
    let back: AlertEvent = serde_json::from_value(wire).expect("deserialise");
    assert_eq!(&back, event(only(&outcome)));
}

#[test]
fn a_blank_agent_name_still_gives_a_title() {
    let mut watchdog = Watchdog::new(config());
    let outcome = watchdog.tick(vec![RootObservation::flagged("ses_a", " ", "")], &[]);
    let event = event(only(&outcome));
    assert_eq!(event.title, "opencode loop: unknown agent");
    assert_eq!(event.summary, "root session ses_a is looping");
}

#[test]
fn state_survives_a_serde_round_trip_between_oneshot_runs() {
    let mut config = config();
    config.channels.push(channel("crit", Severity::Critical));
    let mut in_memory = Watchdog::new(config.clone());
    in_memory.tick(vec![flagged("ses_a", NONE), flagged("ses_b", YES)], &[]);
    in_memory.tick(
        vec![
            flagged("ses_a", NONE),
            healthy("ses_b"),
            flagged("ses_c", NO),
        ],
        &[],
    );

    let stored = serde_json::to_string(&in_memory.state).expect("serialise");
    let loaded: AlertState = serde_json::from_str(&stored).expect("deserialise");
    assert_eq!(loaded, in_memory.state);
    assert_eq!(
        serde_json::to_string(&loaded).expect("serialise"),
        stored,
        "byte-identical"
    );
    assert!(!loaded.open_alerts.is_empty() && !loaded.router.last_alarm.is_empty());

    let mut reloaded = Watchdog {
        state: loaded,
        config,
        now: in_memory.now,
    };
    for roots in [vec![flagged("ses_a", NONE)], vec![healthy("ses_a")]] {
        let a = in_memory.tick(roots.clone(), &["ses_c"]);
        let b = reloaded.tick(roots, &["ses_c"]);
        assert_eq!(
            a, b,
            "a loaded state decides exactly like the in-memory one"
        );
    }
}

#[test]
fn state_and_config_reject_unknown_fields() {
    assert!(
        serde_json::from_str::<AlertState>(
            r#"{"open_alerts":{},"router":{"last_alarm":{},"delivered":{}},"x":1}"#
        )
        .is_err()
    );
    let typo = r#"{"name":"d","type":"desktop","enabled":true,"min_severty":"warning"}"#;
    assert!(serde_json::from_str::<ChannelConfig>(typo).is_err());
    let minimal = r#"{"name":"d","type":"desktop","enabled":true,"min_severity":"warning"}"#;
    let channel: ChannelConfig = serde_json::from_str(minimal).expect("rate_limit_s defaults");
    assert_eq!(channel.rate_limit_s, 300);
    let config: AlertConfig =
        serde_json::from_str(r#"{"local_llm_enabled":false}"#).expect("defaults");
    assert_eq!(
        (
            config.escalate_after_ticks,
            config.max_llm_opinions_per_tick
        ),
        (3, 3)
    );
}

// ---------------------------------------------------------------------------------------------
// Errors

#[test]
fn invalid_ticks_and_configs_are_errors_that_name_the_problem() {
    let state = AlertState::default();
    let tick = |roots: Vec<RootObservation>, gone: &[&str]| Tick {
        now: T0,
        roots,
        gone: gone.iter().map(|g| (*g).to_owned()).collect(),
        stale: vec![],
    };
    let cases: Vec<(AlertConfig, Tick, TickError, &str)> = vec![
        (
            config(),
            tick(vec![flagged("ses_a", NONE), healthy("ses_a")], &[]),
            TickError::DuplicateRoot {
                root: "ses_a".into(),
                index: 1,
                first: 0,
            },
            "roots[1]: root `ses_a` is already listed at roots[0]",
        ),
        (
            config(),
            tick(vec![healthy("ses_a")], &["ses_a"]),
            TickError::RootSeenAndGone {
                root: "ses_a".into(),
            },
            "root `ses_a` is listed both in roots and in gone",
        ),
        (
            config(),
            Tick {
                stale: vec!["ses_a".into()],
                ..tick(vec![healthy("ses_a")], &[])
            },
            TickError::RootSeenAndStale {
                root: "ses_a".into(),
            },
            "root `ses_a` is listed both in roots and in stale",
        ),
        (
            config(),
            tick(vec![], &["ses_a", ""]),
            TickError::EmptyRoot {
                list: "gone",
                index: 1,
            },
            "gone[1]: root session id must not be empty",
        ),
        (
            AlertConfig {
                escalate_after_ticks: 0,
                ..config()
            },
            tick(vec![], &[]),
            TickError::Config(ConfigError::EscalateAfterTicksZero),
            "invalid alert config: escalate_after_ticks must be at least 1 (got 0)",
        ),
        (
            AlertConfig {
                source: " ".into(),
                ..config()
            },
            tick(vec![], &[]),
            TickError::Config(ConfigError::EmptySource),
            "invalid alert config: source must not be empty (use `agentwatch@<host>`)",
        ),
        (
            AlertConfig {
                channels: vec![channel("d", Severity::Info), channel("d", Severity::Info)],
                ..config()
            },
            tick(vec![], &[]),
            TickError::Config(ConfigError::DuplicateChannelName {
                name: "d".into(),
                index: 1,
                first: 0,
            }),
            "invalid alert config: channels[1].name `d` is already used by channels[0]",
        ),
        (
            AlertConfig {
                channels: vec![channel("", Severity::Info)],
                ..config()
            },
            tick(vec![], &[]),
            TickError::Config(ConfigError::EmptyChannelName { index: 0 }),
            "invalid alert config: channels[0].name must not be empty",
        ),
    ];
    for (config, tick, error, message) in cases {
        let got = process_tick(&state, &config, &tick).expect_err(message);
        assert_eq!(got, error);
        assert_eq!(got.to_string(), message);
    }
}

#[test]
fn extreme_values_do_not_panic() {
    let mut config = config();
    config.channels[0].rate_limit_s = u64::MAX;
    config.max_llm_opinions_per_tick = u32::MAX;
    config.escalate_after_ticks = u32::MAX;
    let mut watchdog = Watchdog::new(config);
    watchdog.tick_at(i64::MIN, vec![flagged("ses_a", NONE)], &[]);
    let outcome = watchdog.tick_at(
        i64::MAX,
        vec![flagged("ses_a", NONE), flagged("ses_b", YES)],
        &[],
    );
    let trigger = decision_for(&outcome, "ses_b", DecisionKind::Trigger);
    // i64::MAX - i64::MIN == u64::MAX: exactly the rate limit has elapsed, so the channel is free.
    assert_eq!(suppression(&routes(trigger)[0]), None);
    let mut state = watchdog.state.clone();
    if let Some(alert) = state.open_alerts.get_mut("opencode-loop:ses_a") {
        alert.flagged_ticks = u32::MAX;
    }
    let tick = Tick {
        now: 0,
        roots: vec![flagged("ses_a", NONE)],
        gone: vec![],
        stale: vec![],
    };
    let outcome = process_tick(&state, &watchdog.config, &tick).expect("valid");
    assert_eq!(
        only(&outcome).alert.as_ref().map(|a| a.flagged_ticks),
        Some(u32::MAX)
    );
}

#[test]
fn a_failed_send_neither_blocks_the_channel_nor_earns_the_resolve() {
    let config = config();
    // Tick 1: ses_a triggers and is routed to `desktop`, but the send fails (no record_sent).
    let first = process_tick(
        &AlertState::default(),
        &config,
        &Tick {
            now: T0,
            roots: vec![flagged("ses_a", NONE)],
            gone: vec![],
            stale: vec![],
        },
    )
    .expect("valid");
    assert_eq!(suppression(&routes(only(&first))[0]), None);
    let state = first.state.clone();
    assert!(state.router.last_alarm.is_empty(), "{:?}", state.router);
    assert!(state.router.delivered.is_empty(), "{:?}", state.router);

    // 60 s later another alert is free to use the channel: the failed send started no window.
    let second = process_tick(
        &state,
        &config,
        &Tick {
            now: T0 + 60,
            roots: vec![flagged("ses_a", NONE), flagged("ses_b", NONE)],
            gone: vec![],
            stale: vec![],
        },
    )
    .expect("valid");
    let trigger = decision_for(&second, "ses_b", DecisionKind::Trigger);
    assert_eq!(suppression(&routes(trigger)[0]), None);
    let mut state = second.state.clone();
    // This one was sent.
    state.record_sent(event(trigger), "desktop", GroupBy::Channel, T0 + 60);
    assert_eq!(state.router.last_alarm["desktop"].at, T0 + 60);

    // ses_a resolves: `desktop` never received its trigger, so it gets no resolve either.
    let third = process_tick(
        &state,
        &config,
        &Tick {
            now: T0 + 120,
            roots: vec![healthy("ses_a"), flagged("ses_b", NONE)],
            gone: vec![],
            stale: vec![],
        },
    )
    .expect("valid");
    let resolve = decision_for(&third, "ses_a", DecisionKind::ResolveFixed);
    assert_eq!(
        suppression(&routes(resolve)[0]),
        Some(Suppression::NotDeliveredBefore)
    );
}

#[test]
fn within_one_tick_a_channel_takes_one_alarm_even_before_any_send() {
    let outcome = process_tick(
        &AlertState::default(),
        &config(),
        &Tick {
            now: T0,
            roots: vec![flagged("ses_a", NONE), flagged("ses_b", NONE)],
            gone: vec![],
            stale: vec![],
        },
    )
    .expect("valid");
    let delivered = outcome.deliveries().count();
    assert_eq!(delivered, 1, "{:#?}", outcome.decisions);
}

/// A case name, the channels, their last deliveries, the wakeup wanted.
type WakeupCase<'a> = (
    &'a str,
    Vec<ChannelConfig>,
    Vec<(String, alert_state::LastAlarm)>,
    Option<i64>,
);

#[test]
fn next_wakeup_is_when_the_first_rate_limited_channel_is_free() {
    use alert_state::LastAlarm;
    let now = T0;
    let sent = |name: &str, at: i64| {
        (
            name.to_owned(),
            LastAlarm {
                at,
                dedup_key: "opencode-loop:ses_a".to_owned(),
            },
        )
    };
    let mut disabled = channel("pager", Severity::Warning);
    disabled.enabled = false;
    let mut unlimited = channel("pager", Severity::Warning);
    unlimited.rate_limit_s = 0;
    let cases: Vec<WakeupCase<'_>> = vec![
        (
            "nothing sent",
            vec![channel("desktop", Severity::Warning)],
            vec![],
            None,
        ),
        (
            "inside the window: free at its end",
            vec![channel("desktop", Severity::Warning)],
            vec![sent("desktop", now - 100)],
            Some(now + 200),
        ),
        (
            "the window ended: nothing held back",
            vec![channel("desktop", Severity::Warning)],
            vec![sent("desktop", now - 300)],
            None,
        ),
        (
            "the first of two channels",
            vec![
                channel("desktop", Severity::Warning),
                channel("pager", Severity::Warning),
            ],
            vec![sent("desktop", now - 100), sent("pager", now - 250)],
            Some(now + 50),
        ),
        (
            "a disabled channel takes nothing",
            vec![disabled],
            vec![sent("pager", now - 100)],
            None,
        ),
        (
            "no rate limit",
            vec![unlimited],
            vec![sent("pager", now - 100)],
            None,
        ),
        (
            "a channel no longer configured",
            vec![channel("desktop", Severity::Warning)],
            vec![sent("gone", now - 100)],
            None,
        ),
    ];
    for (case, channels, last_alarm, want) in cases {
        let config = AlertConfig {
            channels,
            ..config()
        };
        let mut state = AlertState::default();
        state.router.last_alarm = last_alarm.into_iter().collect();
        assert_eq!(state.next_wakeup(&config, now), want, "{case}");
    }
}

#[test]
fn a_silenced_or_open_alert_alone_needs_no_wakeup() {
    let mut config = config();
    config
        .silences
        .insert("opencode-loop:ses_a".to_owned(), T0 + 3600);
    config.channels.clear();
    let tick = Tick {
        now: T0,
        roots: vec![RootObservation::flagged("ses_a", "build", "top")],
        gone: vec![],
        stale: vec![],
    };
    let outcome = process_tick(&AlertState::default(), &config, &tick).expect("valid");
    assert_eq!(outcome.state.open_alerts.len(), 1);
    assert_eq!(outcome.state.next_wakeup(&config, T0), None);
}

#[test]
fn an_alert_still_firing_repeats_every_repeat_interval() {
    // Ticks every 300 s, a reminder every 1200 s after the last event; the escalation at tick 3
    // is an event too, so the reminders count from it.
    let mut w = Watchdog::new(AlertConfig {
        repeat_interval_s: 1_200,
        ..config()
    });
    let rows: [(i64, DecisionKind); 10] = [
        (T0, DecisionKind::Trigger),
        (T0 + 300, DecisionKind::StillFlagged),
        (T0 + 600, DecisionKind::Escalate),
        (T0 + 900, DecisionKind::StillFlagged),
        (T0 + 1_200, DecisionKind::StillFlagged),
        (T0 + 1_500, DecisionKind::StillFlagged),
        (T0 + 1_800, DecisionKind::Repeat),
        (T0 + 2_100, DecisionKind::StillFlagged),
        (T0 + 2_700, DecisionKind::StillFlagged),
        (T0 + 3_000, DecisionKind::Repeat),
    ];
    for (now, kind) in rows {
        let out = w.tick_at(now, vec![flagged("ses_a", NONE)], &[]);
        let d = only(&out);
        assert_eq!(d.kind, kind, "at {now}: {}", d.reason);
        if kind == DecisionKind::Repeat {
            let e = event(d);
            assert_eq!(e.state, EventState::Trigger);
            assert_eq!(
                e.severity,
                Severity::Critical,
                "the reminder keeps the severity"
            );
            assert_eq!(e.dedup_key, "opencode-loop:ses_a");
            assert!(
                d.reason.contains("repeat_interval_s 1200: reminded"),
                "{}",
                d.reason
            );
            assert_eq!(
                routes(d)[0].delivery,
                Delivery::Delivered,
                "past the rate limit"
            );
        }
    }
    // 0 never repeats.
    let mut w = Watchdog::new(config());
    for i in 0..20 {
        let out = w.tick_at(T0 + i * 3_600, vec![flagged("ses_a", NONE)], &[]);
        assert_ne!(only(&out).kind, DecisionKind::Repeat);
    }
}

/// Titles that name the work: a tree whose session has a title names its alert, in every event
/// resolve included; a later observation without a title keeps it; a renamed session renames it.
#[test]
fn an_alert_is_titled_by_the_work_it_watches() {
    let work = "Claude Code: Fix the money rounding in /home/me/shop";
    let mut watchdog = Watchdog::new(config());
    let trigger = watchdog.tick(vec![flagged("ses_a", NONE).titled(work)], &[]);
    assert_eq!(event(only(&trigger)).title, work);
    let untitled = watchdog.tick(vec![flagged("ses_a", NONE)], &[]);
    assert_eq!(
        only(&untitled).alert.as_ref().map(|a| a.title.as_str()),
        Some(work)
    );
    let renamed = "Claude Code: Round money with Decimal in /home/me/shop";
    watchdog.tick(vec![flagged("ses_a", NONE).titled(renamed)], &[]);
    let resolve = watchdog.tick(vec![healthy("ses_a")], &[]);
    assert_eq!(event(only(&resolve)).title, renamed);
    let other = watchdog.tick(vec![flagged("ses_b", NONE)], &[]);
    assert_eq!(
        event(only(&other)).title,
        "opencode loop: build",
        "no title: the agent's"
    );
}

// ---------------------------------------------------------------------------------------------
// agentwatch's own refusals (issue 47)

const CALL: &str = "pytest tests/test_x.py";

/// What the hook refused in a tree: `blocked` calls of [`CALL`], maybe the stop.
fn refusals(blocked: u32, stopped: bool) -> Refusals {
    Refusals {
        blocked,
        call: CALL.to_owned(),
        of_call: blocked,
        stopped,
    }
}

/// A flagged tree whose latest call the hook refused (`blocked` so far).
fn refused(root: &str, blocked: u32, stopped: bool) -> RootObservation {
    flagged(root, NONE).with_refusals(refusals(blocked, stopped), true)
}

/// One tick of a refusal timeline: what the tree shows, and the decision with its event
/// (state, severity, summary) when it has one.
type RefusalRow = (
    RootObservation,
    DecisionKind,
    Option<(EventState, Severity, &'static str)>,
);

/// Run `rows` one tick each (300 s apart) on one tree, `ses_a`.
fn run_refusals(config: AlertConfig, rows: Vec<RefusalRow>) -> Watchdog {
    let mut watchdog = Watchdog::new(config);
    for (i, (observation, kind, sent)) in rows.into_iter().enumerate() {
        let outcome = watchdog.tick(vec![observation], &[]);
        let d = only(&outcome);
        assert_eq!(d.kind, kind, "row {i}: {}", d.reason);
        let got = d
            .dispatch
            .as_ref()
            .map(|x| (x.event.state, x.event.severity, x.event.summary.as_str()));
        assert_eq!(got, sent, "row {i}: {}", d.reason);
    }
    watchdog
}

/// The hook refuses the loop's call, refuses it again, then stops the session; the session
/// then moves on. The alert tells the first refusal and the stop, each once, at its severity,
/// and keeps the count; its resolve closes it as any alert's.
#[test]
fn the_first_refusal_and_the_stop_are_each_told_once() {
    use DecisionKind::*;
    use EventState as E;
    let config = AlertConfig {
        escalate_after_ticks: 10,
        ..config()
    };
    let w = Severity::Warning;
    let rows: Vec<RefusalRow> = vec![
        (
            flagged("ses_a", NONE),
            Trigger,
            Some((E::Trigger, w, "top: read ses_a.rs x14")),
        ),
        (
            refused("ses_a", 1, false),
            Blocked,
            Some((
                E::Blocked,
                w,
                "agentwatch blocked 1 call of `pytest tests/test_x.py`",
            )),
        ),
        (refused("ses_a", 2, false), StillFlagged, None),
        (
            refused("ses_a", 3, true),
            Blocked,
            Some((
                E::Blocked,
                w,
                "agentwatch blocked 3 calls of `pytest tests/test_x.py`; the session stopped",
            )),
        ),
        (refused("ses_a", 3, true), StillFlagged, None),
        (
            healthy("ses_a").with_refusals(refusals(3, true), false),
            ResolveFixed,
            Some((
                E::Resolve,
                Severity::Info,
                "loop over: root session ses_a is no longer flagged",
            )),
        ),
    ];
    let watchdog = run_refusals(config, rows);
    assert!(watchdog.state.open_alerts.is_empty());
}

/// A blocked event says what it reports in `details.blocked`, beside the alert's own details,
/// and every later event of the alert (its resolve included) carries the count; the alert
/// record keeps it.
#[test]
fn a_blocked_event_carries_the_refusals_in_its_details() {
    let mut watchdog = Watchdog::new(config());
    watchdog.tick(vec![flagged("ses_a", NONE)], &[]);
    let out = watchdog.tick(vec![refused("ses_a", 2, false)], &[]);
    let d = decision_for(&out, "ses_a", DecisionKind::Blocked);
    let e = event(d);
    assert_eq!(e.dedup_key, "opencode-loop:ses_a");
    assert_eq!(e.title, "opencode loop: build");
    assert_eq!(
        e.details["blocked"],
        json!({"blocked": 2, "call": CALL, "of_call": 2, "stopped": false})
    );
    assert_eq!(e.details["opened_at"], T0);
    assert_eq!(e.refusals(), Some(refusals(2, false)));
    assert_eq!(d.alert.as_ref().map(|a| a.refusals.blocked), Some(2));
    assert!(
        d.reason
            .contains("agentwatch's hook refused calls of the tree"),
        "{}",
        d.reason
    );
    let gone = watchdog.tick(vec![], &["ses_a"]);
    let resolve = event(decision_for(&gone, "ses_a", DecisionKind::ResolveGone));
    assert_eq!(resolve.refusals(), Some(refusals(2, false)));
}

/// A refusal means the hook judged the tree looping. With no open alert: a flagged tree opens
/// one whose summary says what the hook refused (no `blocked` event after it: the trigger
/// told); a tree the detector does not flag opens one while the refusal of its latest call
/// stands, and it resolves once a call runs again. Refusals the agent has moved on from open
/// nothing.
#[test]
fn a_refusal_with_no_open_alert_opens_one_that_says_so() {
    use DecisionKind::*;
    use EventState as E;
    let w = Severity::Warning;
    let rows: Vec<RefusalRow> = vec![
        (
            refused("ses_a", 2, false),
            Trigger,
            Some((
                E::Trigger,
                w,
                "top: read ses_a.rs x14; agentwatch blocked 2 calls of `pytest tests/test_x.py`",
            )),
        ),
        (refused("ses_a", 3, false), StillFlagged, None),
    ];
    run_refusals(config(), rows);

    let standing =
        |blocked, stands| healthy("ses_b").with_refusals(refusals(blocked, false), stands);
    let mut watchdog = Watchdog::new(config());
    let out = watchdog.tick(vec![standing(1, true)], &[]);
    let d = only(&out);
    assert_eq!(d.kind, Trigger, "{}", d.reason);
    assert_eq!(
        event(d).summary,
        "root session ses_b is looping; agentwatch blocked 1 call of `pytest tests/test_x.py`"
    );
    assert!(
        d.reason
            .contains("agentwatch's hook refused the tree's latest call"),
        "{}",
        d.reason
    );
    assert_eq!(
        only(&watchdog.tick(vec![standing(2, true)], &[])).kind,
        StillFlagged
    );
    assert_eq!(
        only(&watchdog.tick(vec![standing(2, false)], &[])).kind,
        ResolveFixed
    );
    let moved_on = watchdog.tick(vec![standing(2, false)], &[]);
    assert!(moved_on.decisions.is_empty(), "{:#?}", moved_on.decisions);
}

/// One event per alert per tick: where an escalation is due in the tick the first refusal
/// shows, the escalate tells it (and every later alarm of the alert says the count); the stop
/// later is a `blocked` event at critical.
#[test]
fn an_escalation_due_tells_the_refusal_and_the_stop_keeps_critical() {
    use DecisionKind::*;
    use EventState as E;
    let (w, c) = (Severity::Warning, Severity::Critical);
    let rows: Vec<RefusalRow> = vec![
        (
            flagged("ses_a", NONE),
            Trigger,
            Some((E::Trigger, w, "top: read ses_a.rs x14")),
        ),
        (flagged("ses_a", NONE), StillFlagged, None),
        (
            refused("ses_a", 1, false),
            Escalate,
            Some((
                E::Escalate,
                c,
                "top: read ses_a.rs x14 (still looping after 3 flagged ticks); agentwatch \
                 blocked 1 call of `pytest tests/test_x.py`",
            )),
        ),
        (refused("ses_a", 2, false), StillFlagged, None),
        (
            refused("ses_a", 3, true),
            Blocked,
            Some((
                E::Blocked,
                c,
                "agentwatch blocked 3 calls of `pytest tests/test_x.py`; the session stopped",
            )),
        ),
        (refused("ses_a", 4, true), StillFlagged, None),
    ];
    run_refusals(config(), rows);
}

/// A blocked event is routed as a trigger is: the severity gate, the rate limit (it delays,
/// the caller's outbox sends it later), a silence; a channel that delivered it gets the
/// resolve.
#[test]
fn a_blocked_event_is_routed_as_an_alarm() {
    let mut config = config();
    config.escalate_after_ticks = 10;
    config.channels = vec![
        channel("warn", Severity::Warning),
        channel("crit", Severity::Critical),
    ];
    let mut watchdog = Watchdog::new(config);
    watchdog.tick(vec![flagged("ses_a", NONE)], &[]);
    let soon = watchdog.tick_at(T0 + 60, vec![refused("ses_a", 1, false)], &[]);
    let got: Vec<_> = routes(only(&soon)).iter().map(suppression).collect();
    assert_eq!(
        got,
        [
            Some(Suppression::RateLimited),
            Some(Suppression::BelowSeverity)
        ],
        "60 s after the trigger on `warn`; a warning on `crit`"
    );
    let stop = watchdog.tick_at(T0 + 400, vec![refused("ses_a", 2, true)], &[]);
    let got: Vec<_> = routes(only(&stop)).iter().map(suppression).collect();
    assert_eq!(got, [None, Some(Suppression::BelowSeverity)]);
    let resolve = watchdog.tick_at(T0 + 700, vec![healthy("ses_a")], &[]);
    let got: Vec<_> = routes(only(&resolve)).iter().map(suppression).collect();
    assert_eq!(got, [None, Some(Suppression::NotDeliveredBefore)]);
}

/// The first refusal and the stop are two events of one alert: each has its own identity (a
/// receiver that drops repeats keeps both), apart from the trigger's.
#[test]
fn each_blocked_event_is_its_own_event() {
    let mut watchdog = Watchdog::new(AlertConfig {
        escalate_after_ticks: 10,
        ..config()
    });
    let trigger = watchdog.tick(vec![flagged("ses_a", NONE)], &[]);
    let first = watchdog.tick(vec![refused("ses_a", 1, false)], &[]);
    let stop = watchdog.tick(vec![refused("ses_a", 3, true)], &[]);
    let ids: Vec<String> = [&trigger, &first, &stop]
        .iter()
        .map(|o| event(only(o)).event_id())
        .collect();
    assert_eq!(
        ids.iter().collect::<std::collections::BTreeSet<_>>().len(),
        3,
        "{ids:?}"
    );
}

/// The observation and the alert state carry the refusals through serde; what was stored
/// before them reads as none.
#[test]
fn refusals_round_trip_and_older_records_read_as_none() {
    let observation = refused("ses_a", 3, true);
    let text = serde_json::to_string(&observation).unwrap();
    assert_eq!(
        serde_json::from_str::<RootObservation>(&text).unwrap(),
        observation
    );
    let old: RootObservation =
        serde_json::from_value(json!({"root": "ses_a", "flagged": true})).unwrap();
    assert!(old.refusals.is_empty() && !old.refusal_stands);
    let mut watchdog = Watchdog::new(config());
    watchdog.tick(vec![observation], &[]);
    let stored = serde_json::to_string(&watchdog.state).unwrap();
    assert!(stored.contains("\"stopped\":true"), "{stored}");
    assert_eq!(
        serde_json::from_str::<AlertState>(&stored).unwrap(),
        watchdog.state
    );
}
