//! The recovery notice's JSON and splash boundaries, and saving/loading policy state.

use recovery_policy::loop_recovery::{
    LoopEvent, LoopRecoveryConfig, LoopRecoveryState, LoopReport,
};
use recovery_policy::notice::{
    HiddenBecause, NoticeAction, NoticeDraft, NoticeError, Phase, RecoveryNotice, Splash,
    parse_notice, splash_visibility,
};
use recovery_policy::restart_guard::RestartGuardState;
use recovery_policy::waiting_patrol::WaitingPatrolState;
use recovery_policy::{StateError, load_state, save_state};
use serde_json::{Value, json};

fn sample(name: &str) -> String {
    let path = format!("{}/tests/samples/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).expect("sample exists")
}

// --- notice JSON -----------------------------------------------------------------------------------

#[test]
fn notice_samples_round_trip_to_the_same_json() {
    for name in [
        "fly_recovery_notice_seed_contract.json",
        "fly_recovery_notice_latest_contract.json",
        "fly_recovery_notice_restart_done.json",
    ] {
        let text = sample(name);
        let original: Value = serde_json::from_str(&text).expect("valid JSON");
        let notice = parse_notice(&text).expect("a v1 notice");
        let written: Value = serde_json::from_str(&notice.to_json()).expect("valid JSON");
        assert_eq!(written, original, "{name}");
    }
}

#[test]
fn notice_built_by_the_policy_matches_the_restart_done_sample() {
    let draft = NoticeDraft {
        from_rung: Some(12),
        from_label: Some("MT. MOON".into()),
        reason: Some("unrewarded".into()),
        loop_names: vec!["GO WARP".into()],
        stuck_seconds: Some(905),
    };
    let announced = RecoveryNotice::announce_restart(draft, 1_790_000_305, 60);
    assert_eq!(announced.execute_at, announced.announced_at + 60);
    let done = announced
        .advance(Phase::Acting, 1_790_000_365)
        .advance(Phase::Done, 1_790_000_371);
    let expected: Value =
        serde_json::from_str(&sample("fly_recovery_notice_restart_done.json")).expect("JSON");
    assert_eq!(
        serde_json::from_str::<Value>(&done.to_json()).expect("JSON"),
        expected
    );
}

#[test]
fn notice_keeps_at_most_four_loop_names_and_omits_reset_fields_for_a_restart() {
    let draft = NoticeDraft {
        loop_names: (1..=6).map(|i| format!("M{i}")).collect(),
        ..NoticeDraft::default()
    };
    let notice = RecoveryNotice::announce_restart(draft, 100, 60);
    let value: Value = serde_json::from_str(&notice.to_json()).expect("JSON");
    assert_eq!(value["loop"], json!(["M1", "M2", "M3", "M4"]));
    assert_eq!(value["id"], json!("100-restart"));
    assert!(value.get("toRung").is_none() && value.get("toLabel").is_none());
    assert_eq!(notice.action, NoticeAction::Restart);
}

#[test]
fn notice_parser_rejects_other_versions_and_garbage() {
    let v2 = sample("fly_recovery_notice_seed_contract.json").replace("\"v\": 1", "\"v\": 2");
    assert_eq!(
        parse_notice(&v2),
        Err(NoticeError::UnsupportedVersion { found: 2 })
    );
    let empty_id =
        sample("fly_recovery_notice_seed_contract.json").replace("\"1790629095-reset\"", "\"\"");
    assert_eq!(parse_notice(&empty_id), Err(NoticeError::EmptyId));
    assert!(matches!(
        parse_notice("{\"v\":1}"),
        Err(NoticeError::Malformed { .. })
    ));
    let bad_phase =
        sample("fly_recovery_notice_seed_contract.json").replace("countdown", "sleeping");
    assert!(matches!(
        parse_notice(&bad_phase),
        Err(NoticeError::Malformed { .. })
    ));
}

// --- splash ----------------------------------------------------------------------------------------

fn notice_in(phase: Phase, updated_at: i64) -> RecoveryNotice {
    let announced = RecoveryNotice::announce_restart(NoticeDraft::default(), 1000, 60);
    announced.advance(phase, updated_at)
}

#[test]
fn splash_boundaries_are_inclusive() {
    use HiddenBecause::*;
    // (phase, age = now - updatedAt, expected)
    let cases = [
        (Phase::Countdown, 0, Splash::Countdown { remaining: 60 }),
        (Phase::Countdown, 60, Splash::Countdown { remaining: 0 }),
        (Phase::Countdown, 900, Splash::Countdown { remaining: 0 }),
        (Phase::Countdown, 901, Splash::Hidden(Stale)),
        (Phase::Countdown, -120, Splash::Countdown { remaining: 180 }),
        (Phase::Countdown, -121, Splash::Hidden(FromTheFuture)),
        (Phase::Acting, 600, Splash::Acting),
        (Phase::Acting, 601, Splash::Hidden(PhaseOver)),
        (Phase::Done, 8, Splash::Done),
        (Phase::Done, 9, Splash::Hidden(PhaseOver)),
        (Phase::Failed, 20, Splash::Failed),
        (Phase::Failed, 21, Splash::Hidden(PhaseOver)),
        (Phase::Done, -120, Splash::Done),
        (Phase::Acting, 901, Splash::Hidden(Stale)),
    ];
    for (phase, age, expected) in cases {
        let notice = notice_in(phase, 1000);
        assert_eq!(
            splash_visibility(&notice, 1000 + age),
            expected,
            "{phase:?} at age {age}"
        );
        assert_eq!(notice.splash(1000 + age), expected);
    }
}

#[test]
fn splash_never_panics_on_extreme_times() {
    let notice = notice_in(Phase::Countdown, i64::MIN);
    assert_eq!(
        splash_visibility(&notice, i64::MAX),
        Splash::Hidden(HiddenBecause::Stale)
    );
    let notice = notice_in(Phase::Acting, i64::MAX);
    assert_eq!(
        splash_visibility(&notice, i64::MIN),
        Splash::Hidden(HiddenBecause::FromTheFuture)
    );
}

// --- state -----------------------------------------------------------------------------------------

fn busy_loop_state() -> LoopRecoveryState {
    let mut state = LoopRecoveryState::default();
    let report = LoopReport::from_value(json!({"suspected": 1, "at": 1000, "action": "none"}))
        .expect("object");
    state.handle(
        &LoopRecoveryConfig::default(),
        &LoopEvent::Report(report),
        1005,
    );
    state
}

#[test]
fn saved_state_loads_back_unchanged() {
    let state = busy_loop_state();
    let text = save_state(&state).expect("serialises");
    assert!(
        text.starts_with("{\"policy\":\"loop-recovery\",\"v\":1,"),
        "{text}"
    );
    let loaded = load_state::<LoopRecoveryState>(&text);
    assert_eq!(loaded.warning, None);
    assert_eq!(loaded.state, state);
}

#[test]
fn unknown_or_corrupt_state_starts_clean_with_a_warning() {
    let good = save_state(&busy_loop_state()).expect("serialises");
    let future = good.replace("\"v\":1", "\"v\":7");
    let cases: [(&str, StateError); 5] = [
        ("", StateError::Empty),
        ("  \n", StateError::Empty),
        (
            &future,
            StateError::UnsupportedVersion {
                found: 7,
                supported: 1,
            },
        ),
        (
            "{\"policy\":\"waiting-patrol\",\"v\":1,\"state\":{}}",
            StateError::WrongPolicy {
                found: "waiting-patrol".into(),
                expected: "loop-recovery",
            },
        ),
        (
            "{\"observed_at\": 1000, \"restarted_at\": 1301}",
            StateError::Corrupt {
                detail: String::new(),
            },
        ),
    ];
    for (text, expected) in cases {
        let loaded = load_state::<LoopRecoveryState>(text);
        assert_eq!(loaded.state, LoopRecoveryState::default(), "{text:?}");
        let warning = loaded.warning.expect("a warning");
        match (&warning, &expected) {
            (StateError::Corrupt { .. }, StateError::Corrupt { .. }) => {}
            _ => assert_eq!(warning, expected, "{text:?}"),
        }
        assert!(warning.to_string().contains("starting clean"), "{warning}");
    }
    let truncated = &good[..good.len() / 2];
    assert!(matches!(
        load_state::<LoopRecoveryState>(truncated).warning,
        Some(StateError::Corrupt { .. })
    ));
    let wrong_shape = "{\"policy\":\"loop-recovery\",\"v\":1,\"state\":{\"vetoes\":\"many\"}}";
    assert!(matches!(
        load_state::<LoopRecoveryState>(wrong_shape).warning,
        Some(StateError::Corrupt { .. })
    ));
}

#[test]
fn every_policy_state_round_trips_when_empty() {
    let guard = save_state(&RestartGuardState::default()).expect("serialises");
    assert_eq!(load_state::<RestartGuardState>(&guard).warning, None);
    let patrol = save_state(&WaitingPatrolState::default()).expect("serialises");
    assert_eq!(load_state::<WaitingPatrolState>(&patrol).warning, None);
    assert!(matches!(
        load_state::<WaitingPatrolState>(&guard).warning,
        Some(StateError::WrongPolicy { .. })
    ));
}

#[test]
fn events_read_their_timeline_form() {
    use recovery_policy::loop_recovery::{LoopEvent, RouterVerdict};
    use recovery_policy::restart_guard::GuardEvent;
    use recovery_policy::waiting_patrol::PatrolEvent;
    let read = |text: &str| serde_json::from_str::<LoopEvent>(text);
    assert!(matches!(
        read(r#"{"report":{"suspected":1,"at":5,"action":"none"}}"#),
        Ok(LoopEvent::Report(r)) if r.at == Some(5)
    ));
    assert_eq!(
        read(r#"{"report":[1]}"#).unwrap(),
        LoopEvent::ReportUnreadable("loop report is not a JSON object".into()),
        "a payload that is not an object reads as unreadable"
    );
    assert_eq!(
        read(r#"{"router_reply":"{\"stuck\": true}"}"#).unwrap(),
        LoopEvent::RouterVerdict(RouterVerdict::Stuck(true))
    );
    assert_eq!(
        read(r#"{"router_unreachable":"timeout"}"#).unwrap(),
        LoopEvent::RouterVerdict(RouterVerdict::Unreachable("timeout".into()))
    );
    assert!(read(r#"{"outcome":{"ok":"yes"}}"#).is_err());
    assert!(read(r#"{"rport":{}}"#).is_err());
    assert!(matches!(
        serde_json::from_str::<GuardEvent>(r#"{"sessions":[{"id":"c1"}]}"#),
        Ok(GuardEvent::Tick(s)) if s.len() == 1
    ));
    assert!(matches!(
        serde_json::from_str::<GuardEvent>(r#"{"recheck":{"id":"c1","status":"error"}}"#),
        Ok(GuardEvent::Recheck(_))
    ));
    assert!(
        serde_json::from_str::<GuardEvent>(r#"{"restart_result":{}}"#).is_err(),
        "agent-deck's reply is its adapter's to read"
    );
    assert_eq!(
        serde_json::from_str::<PatrolEvent>(r#"{"sessions":null}"#).unwrap(),
        PatrolEvent::ListingUnavailable
    );
    assert_eq!(
        serde_json::from_str::<PatrolEvent>(r#"{"sessions":[]}"#).unwrap(),
        PatrolEvent::Tick(vec![])
    );
}
