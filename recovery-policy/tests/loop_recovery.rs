//! Named cases for the confirmed-loop restart, at the boundaries of every rule.

use recovery_policy::Policy;
use recovery_policy::loop_recovery::{
    ActionOutcome, LoopAction, LoopDecision, LoopDecisionName as N, LoopEvent, LoopRecoveryConfig,
    LoopRecoveryState, LoopReport, ReportError, ReportStatus, RouterConfigError, RouterReplyError,
    RouterVerdict, parse_loop_report, parse_router_reply, router_brief,
};
use recovery_policy::notice::{NoticeAction, Phase};
use serde_json::json;

/// A fresh suspected report of the probe at `at`.
fn suspected(at: i64) -> LoopEvent {
    report(
        json!({"suspected": 1, "at": at, "action": "none", "reason": "unrewarded",
                  "sequence": ["GO OBJECTIVE", "GO WARP"], "milestone": {"rank": 12, "label": "MT. MOON"}}),
    )
}

fn clear(at: i64) -> LoopEvent {
    report(json!({"suspected": 0, "at": at, "action": "none"}))
}

fn report(value: serde_json::Value) -> LoopEvent {
    LoopEvent::Report(LoopReport::from_value(value).expect("a JSON object"))
}

fn outcome(ok: bool) -> LoopEvent {
    LoopEvent::Outcome(ActionOutcome { ok, detail: None })
}

fn router(reply: &str) -> LoopEvent {
    LoopEvent::RouterVerdict(RouterVerdict::from_content(reply))
}

fn with_router() -> LoopRecoveryConfig {
    LoopRecoveryConfig {
        router_url: Some("http://127.0.0.1:4000/v1".into()),
        model: Some("free-model".into()),
        ..LoopRecoveryConfig::default()
    }
}

/// Runs a timeline; returns every decision.
fn run(config: &LoopRecoveryConfig, timeline: &[(i64, LoopEvent)]) -> Vec<LoopDecision> {
    let mut state = LoopRecoveryState::default();
    timeline
        .iter()
        .map(|(now, event)| state.handle(config, event, *now))
        .collect()
}

fn names(decisions: &[LoopDecision]) -> Vec<N> {
    decisions.iter().map(|d| d.name).collect()
}

fn last(decisions: &[LoopDecision]) -> &LoopDecision {
    decisions.last().expect("at least one decision")
}

/// Confirms a loop with probes at `t` and `t + 300` (each read 5 s after its probe).
fn confirm_at(t: i64) -> Vec<(i64, LoopEvent)> {
    vec![(t + 5, suspected(t)), (t + 305, suspected(t + 300))]
}

// --- probes and freshness --------------------------------------------------------------------------

#[test]
fn probes_269_s_apart_wait_and_270_s_apart_confirm() {
    for (gap, expected) in [
        (269, N::WaitingProbeGap),
        (270, N::Restart),
        (271, N::Restart),
    ] {
        let decisions = run(
            &LoopRecoveryConfig::default(),
            &[(1005, suspected(1000)), (1005 + gap, suspected(1000 + gap))],
        );
        assert_eq!(
            names(&decisions),
            vec![N::WaitingSecondProbe, expected],
            "gap {gap}"
        );
    }
}

#[test]
fn report_600_s_old_is_fresh_and_601_s_old_is_stale() {
    for (age, expected) in [
        (0, N::WaitingSecondProbe),
        (600, N::WaitingSecondProbe),
        (601, N::ReportStale),
    ] {
        let decisions = run(
            &LoopRecoveryConfig::default(),
            &[(1000 + age, suspected(1000))],
        );
        assert_eq!(last(&decisions).name, expected, "age {age}");
    }
    let stale = run(&LoopRecoveryConfig::default(), &[(1601, suspected(1000))]);
    assert_eq!(
        last(&stale).reason,
        "report is 601 s old (limit 600 s); streak reset"
    );
}

#[test]
fn report_from_the_future_is_stale() {
    let decisions = run(&LoopRecoveryConfig::default(), &[(999, suspected(1000))]);
    assert_eq!(last(&decisions).name, N::ReportStale);
    assert_eq!(
        last(&decisions).reason,
        "report is 1 s in the future; streak reset"
    );
}

#[test]
fn first_probe_waits_for_the_second() {
    let decisions = run(&LoopRecoveryConfig::default(), &[(1005, suspected(1000))]);
    assert_eq!(
        last(&decisions).reason,
        "waiting for second probe: first probe 5 s ago"
    );
}

#[test]
fn the_same_probe_read_twice_waits_for_the_next() {
    let decisions = run(
        &LoopRecoveryConfig::default(),
        &[(1005, suspected(1000)), (1065, suspected(1000))],
    );
    assert_eq!(
        names(&decisions),
        vec![N::WaitingSecondProbe, N::WaitingNextProbe]
    );
    assert_eq!(
        last(&decisions).reason,
        "waiting for next probe: the probe of 65 s ago: already counted"
    );
}

#[test]
fn a_too_close_probe_never_replaces_the_first() {
    // Probes at 1000, 1200 (too close), 1300: 1300 - 1000 = 300 confirms.
    let decisions = run(
        &LoopRecoveryConfig::default(),
        &[
            (1005, suspected(1000)),
            (1205, suspected(1200)),
            (1305, suspected(1300)),
        ],
    );
    assert_eq!(
        names(&decisions),
        vec![N::WaitingSecondProbe, N::WaitingProbeGap, N::Restart]
    );
    assert_eq!(
        decisions[1].reason,
        "waiting for next probe: the probe of 5 s ago is 200 s after the first (needs 270 s)"
    );
}

#[test]
fn clear_stale_invalid_or_unreadable_reports_break_the_streak() {
    let breakers: [(LoopEvent, N); 6] = [
        (clear(1100), N::ReportClear),
        (suspected(400), N::ReportStale),
        (
            LoopEvent::ReportUnreadable("no such file".into()),
            N::ReportUnreadable,
        ),
        (
            report(json!({"suspected": 1, "at": 1100, "action": "restart"})),
            N::ReportInvalid,
        ),
        (
            report(json!({"suspected": true, "at": 1100, "action": "none"})),
            N::ReportInvalid,
        ),
        (
            report(json!({"suspected": 1, "at": 1100.5, "action": "none"})),
            N::ReportInvalid,
        ),
    ];
    for (breaker, name) in breakers {
        let decisions = run(
            &LoopRecoveryConfig::default(),
            &[
                (1005, suspected(1000)),
                (1105, breaker),
                (1305, suspected(1300)),
                (1605, suspected(1600)),
            ],
        );
        assert_eq!(
            names(&decisions),
            vec![
                N::WaitingSecondProbe,
                name,
                N::WaitingSecondProbe,
                N::Restart
            ],
            "the streak restarts after {name}"
        );
        assert!(
            decisions[1].reason.ends_with("streak reset"),
            "{}",
            decisions[1].reason
        );
    }
}

// --- acting, outcome and cooldown ------------------------------------------------------------------

#[test]
fn restart_carries_the_countdown_notice() {
    let decisions = run(&LoopRecoveryConfig::default(), &confirm_at(1000));
    let restart = last(&decisions);
    assert_eq!(
        restart.reason,
        "loop confirmed by two probes 300 s apart (the last 5 s ago); no router configured; restarting in 60 s"
    );
    let Some(LoopAction::Restart {
        probe_at,
        execute_at,
        dry_run,
        notice,
    }) = &restart.action
    else {
        panic!("expected a restart action, got {:?}", restart.action);
    };
    assert_eq!((*probe_at, *execute_at, *dry_run), (1300, 1365, false));
    assert_eq!(notice.id, "1305-restart");
    assert_eq!(notice.phase, Phase::Countdown);
    assert_eq!(notice.action, NoticeAction::Restart);
    assert_eq!(
        (notice.announced_at, notice.execute_at, notice.updated_at),
        (1305, 1365, 1305)
    );
    assert_eq!(notice.stuck_seconds, Some(305 + 600));
    assert_eq!(notice.loop_names, vec!["GO OBJECTIVE", "GO WARP"]);
    assert_eq!(
        (notice.from_rung, notice.from_label.as_deref()),
        (Some(12), Some("MT. MOON"))
    );
    assert_eq!((notice.to_rung, notice.to_label.as_deref()), (None, None));
}

#[test]
fn cooldown_3599_s_after_a_success_waits_and_3600_s_counts_again() {
    // Restart succeeds at 1400; probes at 1400 + 3599 and + 3600.
    for (after, expected) in [(3599, N::Cooldown), (3600, N::WaitingSecondProbe)] {
        let mut timeline = confirm_at(1000);
        timeline.push((1400, outcome(true)));
        timeline.push((1400 + after, suspected(1400 + after)));
        let decisions = run(&LoopRecoveryConfig::default(), &timeline);
        assert_eq!(decisions[2].name, N::RestartSucceeded);
        assert_eq!(
            decisions[2].reason,
            "restart succeeded; recovery cooldown for 3600 s"
        );
        assert_eq!(last(&decisions).name, expected, "{after} s after");
    }
    let mut timeline = confirm_at(1000);
    timeline.extend([(1400, outcome(true)), (3260, suspected(3255))]);
    assert_eq!(
        last(&run(&LoopRecoveryConfig::default(), &timeline)).reason,
        "recovery cooldown, 1740 s left"
    );
}

#[test]
fn cooldown_survives_clear_reports_and_needs_two_new_probes() {
    let mut timeline = confirm_at(1000);
    timeline.extend([
        (1400, outcome(true)),
        (2000, clear(1995)),
        (4900, suspected(4895)), // inside the cooldown: not counted
        (5005, suspected(5000)), // first probe after the cooldown
        (5305, suspected(5300)),
    ]);
    let decisions = run(&LoopRecoveryConfig::default(), &timeline);
    assert_eq!(
        names(&decisions),
        vec![
            N::WaitingSecondProbe,
            N::Restart,
            N::RestartSucceeded,
            N::ReportClear,
            N::Cooldown,
            N::WaitingSecondProbe,
            N::Restart
        ]
    );
}

#[test]
fn a_failed_restart_starts_no_cooldown_but_needs_two_new_probes() {
    let mut timeline = confirm_at(1000);
    timeline.extend([
        (1400, outcome(false)),
        (1410, suspected(1300)), // the probe the restart used
        (1605, suspected(1600)),
        (1905, suspected(1900)),
    ]);
    let decisions = run(&LoopRecoveryConfig::default(), &timeline);
    assert_eq!(
        names(&decisions),
        vec![
            N::WaitingSecondProbe,
            N::Restart,
            N::RestartFailed,
            N::WaitingNextProbe,
            N::WaitingSecondProbe,
            N::Restart
        ]
    );
    assert_eq!(
        decisions[2].reason,
        "restart failed; no cooldown, a retry needs two new probes"
    );
    assert_eq!(
        decisions[3].reason,
        "waiting for next probe: the probe of 110 s ago was used by the last restart"
    );
}

#[test]
fn a_lost_outcome_counts_as_a_success_until_the_cooldown_ends() {
    let mut timeline = confirm_at(1000);
    timeline.extend([
        (1905, suspected(1900)),
        (1305 + 3600, suspected(4900)),
        (5205, suspected(5200)),
    ]);
    let decisions = run(&LoopRecoveryConfig::default(), &timeline);
    assert_eq!(
        names(&decisions),
        vec![
            N::WaitingSecondProbe,
            N::Restart,
            N::AwaitingOutcome,
            N::WaitingSecondProbe,
            N::Restart
        ]
    );
    assert_eq!(
        decisions[2].reason,
        "restart decided 600 s ago has no reported outcome; treated as done, cooldown 3000 s left"
    );
}

#[test]
fn unsolicited_outcomes_and_router_replies_are_ignored() {
    let decisions = run(
        &with_router(),
        &[(10, outcome(true)), (20, router("{\"stuck\": true}"))],
    );
    assert_eq!(
        names(&decisions),
        vec![N::UnexpectedOutcome, N::UnexpectedRouterReply]
    );
}

// --- router ----------------------------------------------------------------------------------------

#[test]
fn router_configuration_one_without_the_other_blocks_and_says_which_is_missing() {
    let url_only = LoopRecoveryConfig {
        router_url: Some("http://127.0.0.1:4000/v1".into()),
        ..Default::default()
    };
    let model_only = LoopRecoveryConfig {
        model: Some("m".into()),
        ..Default::default()
    };
    let blank_model = LoopRecoveryConfig {
        model: Some("  ".into()),
        ..url_only.clone()
    };
    assert_eq!(url_only.router(), Err(RouterConfigError::MissingModel));
    assert_eq!(model_only.router(), Err(RouterConfigError::MissingUrl));
    assert_eq!(blank_model.router(), Err(RouterConfigError::MissingModel));
    assert_eq!(LoopRecoveryConfig::default().router(), Ok(None));
    for (config, missing) in [
        (url_only, "router_url is set but model is missing"),
        (model_only, "model is set but router_url is missing"),
    ] {
        let decisions = run(&config, &confirm_at(1000));
        let blocked = last(&decisions);
        assert_eq!(blocked.name, N::RouterMisconfigured);
        assert!(blocked.reason.contains(missing), "{}", blocked.reason);
        assert!(blocked.action.is_none());
    }
}

#[test]
fn router_verdicts_act_veto_or_block() {
    let cases = [
        ("{\"stuck\": true}", N::Restart),
        ("```json\n{\"stuck\": true}\n```", N::Restart),
        ("{\"stuck\": false}", N::RouterVetoed),
        ("{\"stuck\": \"yes\"}", N::RouterBlocked),
        ("I think it is stuck", N::RouterBlocked),
    ];
    for (reply, expected) in cases {
        let mut timeline = confirm_at(1000);
        timeline.push((1306, router(reply)));
        let decisions = run(&with_router(), &timeline);
        assert_eq!(decisions[1].name, N::AskRouter);
        assert_eq!(
            decisions[1].action,
            Some(LoopAction::AskRouter { probe_at: 1300 })
        );
        assert_eq!(last(&decisions).name, expected, "reply {reply:?}");
    }
    let mut timeline = confirm_at(1000);
    timeline.push((
        1306,
        LoopEvent::RouterVerdict(RouterVerdict::Unreachable("connection refused".into())),
    ));
    let decisions = run(&with_router(), &timeline);
    assert_eq!(last(&decisions).name, N::RouterBlocked);
    assert_eq!(
        last(&decisions).reason,
        "router unreachable (connection refused); recovery blocked until the next probe"
    );
}

#[test]
fn the_router_is_asked_once_per_probe_so_vetoes_count_per_probe() {
    let mut timeline = confirm_at(1000);
    timeline.extend([
        (1306, router("{\"stuck\": false}")),
        (1365, suspected(1300)), // the 1-minute timer reads the same probe again
        (1425, suspected(1300)),
        (1605, suspected(1600)), // next probe: asked again
    ]);
    let decisions = run(&with_router(), &timeline);
    assert_eq!(
        names(&decisions),
        vec![
            N::WaitingSecondProbe,
            N::AskRouter,
            N::RouterVetoed,
            N::WaitingNextProbe,
            N::WaitingNextProbe,
            N::AskRouter
        ]
    );
    assert_eq!(
        decisions[2].reason,
        "router says not stuck at probe 1300 (veto 1, no limit); waiting for next probe"
    );
}

#[test]
fn veto_limit_2_acts_on_the_third_confirmation_without_asking() {
    let config = LoopRecoveryConfig {
        veto_limit: Some(2),
        ..with_router()
    };
    let mut timeline = confirm_at(1000);
    timeline.extend([
        (1306, router("{\"stuck\": false}")),
        (1605, suspected(1600)),
        (1606, router("{\"stuck\": false}")),
        (1905, suspected(1900)),
    ]);
    let decisions = run(&config, &timeline);
    assert_eq!(
        names(&decisions),
        vec![
            N::WaitingSecondProbe,
            N::AskRouter,
            N::RouterVetoed,
            N::AskRouter,
            N::RouterVetoed,
            N::Restart
        ]
    );
    assert_eq!(
        decisions[4].reason,
        "router says not stuck at probe 1600 (veto 2 of 2); waiting for next probe"
    );
    assert!(
        last(&decisions)
            .reason
            .contains("veto limit reached (2 vetoes), acting without the router")
    );
}

#[test]
fn a_clear_report_resets_the_vetoes() {
    let config = LoopRecoveryConfig {
        veto_limit: Some(1),
        ..with_router()
    };
    let mut timeline = confirm_at(1000);
    timeline.extend([(1306, router("{\"stuck\": false}")), (1605, clear(1600))]);
    timeline.extend(confirm_at(1900));
    let decisions = run(&config, &timeline);
    assert_eq!(
        last(&decisions).name,
        N::AskRouter,
        "vetoes were reset, so the router is asked again"
    );
}

#[test]
fn router_reply_parser_accepts_only_a_stuck_flag() {
    let extra = |keys: &str| {
        Err(RouterReplyError::ExtraFields {
            keys: keys.to_owned(),
        })
    };
    let cases: [(&str, Result<bool, RouterReplyError>); 11] = [
        ("{\"stuck\": true}", Ok(true)),
        ("  {\"stuck\":false}\n", Ok(false)),
        ("```json\n{\"stuck\": false}\n```", Ok(false)),
        ("```\n{\"stuck\": true}\n```", Ok(true)),
        ("```{\"stuck\": true}```", Ok(true)),
        ("{\"stuck\": \"yes\"}", Err(RouterReplyError::NoStuckFlag)),
        ("{}", Err(RouterReplyError::NoStuckFlag)),
        ("[true]", Err(RouterReplyError::NotAnObject)),
        ("true", Err(RouterReplyError::NotAnObject)),
        // The design allows exactly {"stuck": bool}: a reply that chooses more is a veto.
        (
            "{\"stuck\": true, \"command\": \"rm -rf /\"}",
            extra("command"),
        ),
        (
            "{\"stuck\": false, \"why\": \"x\", \"also\": 1}",
            extra("also, why"),
        ),
    ];
    for (reply, expected) in cases {
        assert_eq!(parse_router_reply(reply), expected, "reply {reply:?}");
    }
    assert!(matches!(
        parse_router_reply("Sure! {\"stuck\": true}"),
        Err(RouterReplyError::NotJson { .. })
    ));
    assert!(matches!(
        parse_router_reply(""),
        Err(RouterReplyError::NotJson { .. })
    ));
}

// --- the report ------------------------------------------------------------------------------------

fn sample(name: &str) -> String {
    let path = format!("{}/tests/samples/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).expect("sample exists")
}

#[test]
fn loop_report_samples_parse() {
    let full = parse_loop_report(&sample("fly_loop_report_full.json")).expect("full report");
    assert_eq!(
        (full.suspected, full.at, full.action.as_deref()),
        (Some(1), Some(1_790_000_000), Some("none"))
    );
    assert_eq!(
        (full.rank, full.label.as_deref()),
        (Some(12), Some("MT. MOON"))
    );
    assert_eq!(full.sequence, vec!["GO OBJECTIVE", "GO WARP"]);
    assert_eq!(
        full.status(1_790_000_600, 600),
        ReportStatus::FreshSuspected { at: 1_790_000_000 }
    );
    let brief = router_brief(&full);
    let keys: Vec<&String> = brief.as_object().expect("object").keys().collect();
    assert_eq!(
        keys.len(),
        7,
        "reason, sequence, window, places, milestone, dominant, map: {keys:?}"
    );
    assert!(brief.get("eventLog").is_none() && brief.get("action").is_none());

    let seed =
        parse_loop_report(&sample("fly_loop_report_seed_fixture.json")).expect("seed report");
    assert_eq!(
        seed.status(1000, 600),
        ReportStatus::FreshSuspected { at: 1000 }
    );
    let fixture =
        parse_loop_report(&sample("fly_loop_report_test_fixture.json")).expect("test fixture");
    assert_eq!(fixture.sequence, vec!["GO WARP"]);
}

#[test]
fn loop_report_parser_rejects_non_objects_only() {
    assert!(matches!(
        parse_loop_report("{"),
        Err(ReportError::NotJson { .. })
    ));
    assert_eq!(parse_loop_report("[1]"), Err(ReportError::NotAnObject));
    assert_eq!(parse_loop_report("null"), Err(ReportError::NotAnObject));
    let empty = parse_loop_report("{}").expect("an object");
    assert_eq!(
        empty.status(0, 600),
        ReportStatus::Invalid("suspected is missing or not an integer".into())
    );
}

#[test]
fn dry_run_only_marks_the_action() {
    let dry = LoopRecoveryConfig {
        dry_run: true,
        ..Default::default()
    };
    let real = run(&LoopRecoveryConfig::default(), &confirm_at(1000));
    let dried = run(&dry, &confirm_at(1000));
    assert_eq!(names(&real), names(&dried));
    assert_eq!(real[1].reason, dried[1].reason);
    assert!(matches!(
        dried[1].action,
        Some(LoopAction::Restart { dry_run: true, .. })
    ));
}

#[test]
fn decision_names_are_unique_kebab_case() {
    use recovery_policy::DecisionName;
    let mut seen = std::collections::BTreeSet::new();
    for name in N::ALL {
        let text = name.as_str();
        assert!(
            text.chars().all(|c| c.is_ascii_lowercase() || c == '-'),
            "{text}"
        );
        assert!(seen.insert(text), "duplicate {text}");
    }
}

#[test]
fn next_wakeup_is_the_cooldown_end_or_when_a_second_probe_can_confirm() {
    const T0: i64 = 1_790_000_000;
    let config = LoopRecoveryConfig::default();
    let mut state = LoopRecoveryState::default();
    assert_eq!(state.next_wakeup(&config, T0), None, "nothing seen");
    state.handle(&config, &suspected(T0), T0 + 5);
    assert_eq!(state.next_wakeup(&config, T0 + 5), Some(T0 + 270));
    assert_eq!(
        state.next_wakeup(&config, T0 + 270),
        None,
        "due: only a probe decides"
    );
    let decided = state.handle(&config, &suspected(T0 + 300), T0 + 305);
    assert_eq!(decided.name, N::Restart);
    assert_eq!(
        state.next_wakeup(&config, T0 + 305),
        None,
        "an outcome is pending"
    );
    state.handle(&config, &outcome(true), T0 + 365);
    assert_eq!(state.next_wakeup(&config, T0 + 400), Some(T0 + 365 + 3600));
    assert_eq!(
        state.next_wakeup(&config, T0 + 365 + 3600),
        None,
        "cooldown over"
    );
}
