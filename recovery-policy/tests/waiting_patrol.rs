//! Named cases for the waiting patrol, at the boundaries of every rule.

use recovery_policy::restart_guard::SessionStatus;
use recovery_policy::waiting_patrol::{
    PatrolAction, PatrolDecision, PatrolDecisionName as N, PatrolEvent, PatrolObservation,
    WaitingPatrolConfig, WaitingPatrolState,
};

fn child(status: &str, pane: Option<&str>) -> PatrolObservation {
    PatrolObservation {
        id: "k1".into(),
        parent_session_id: Some("c1".into()),
        status: SessionStatus::parse(Some(status)),
        pane_hash: pane.map(str::to_owned),
    }
}

fn waiting(pane: &str) -> PatrolObservation {
    child("waiting", Some(pane))
}

/// Feeds one listing per `(now, sessions)`; `None` is a failed listing. Returns every decision.
fn run(
    config: &WaitingPatrolConfig,
    timeline: &[(i64, Option<Vec<PatrolObservation>>)],
) -> Vec<(i64, PatrolDecision)> {
    let mut state = WaitingPatrolState::default();
    let mut out = Vec::new();
    for (now, sessions) in timeline {
        let event = match sessions {
            Some(list) => PatrolEvent::Tick(list.clone()),
            None => PatrolEvent::ListingUnavailable,
        };
        out.extend(
            state
                .handle(config, &event, *now)
                .into_iter()
                .map(|d| (*now, d)),
        );
    }
    out
}

fn names(decisions: &[(i64, PatrolDecision)]) -> Vec<N> {
    decisions.iter().map(|(_, d)| d.name).collect()
}

fn nudge_times(decisions: &[(i64, PatrolDecision)]) -> Vec<i64> {
    decisions
        .iter()
        .filter(|(_, d)| d.name == N::Nudge)
        .map(|(t, _)| *t)
        .collect()
}

#[test]
fn nudge_after_601_s_unchanged_not_at_600() {
    for (at, expected) in [(600, N::Unchanged), (601, N::Nudge)] {
        let decisions = run(
            &WaitingPatrolConfig::default(),
            &[
                (0, Some(vec![waiting("aa")])),
                (at, Some(vec![waiting("aa")])),
            ],
        );
        assert_eq!(
            names(&decisions),
            vec![N::Watching, expected],
            "{at} s unchanged"
        );
    }
    let decisions = run(
        &WaitingPatrolConfig::default(),
        &[
            (0, Some(vec![waiting("aa")])),
            (601, Some(vec![waiting("aa")])),
        ],
    );
    let (_, nudge) = &decisions[1];
    assert_eq!(
        nudge.reason,
        "waiting with an unchanged pane for 601 s; nudging"
    );
    assert_eq!(
        nudge.action,
        Some(PatrolAction::Nudge {
            session: "k1".into(),
            message: "report status?".into(),
            no_wait: true,
            dry_run: false
        })
    );
}

#[test]
fn after_a_nudge_at_most_one_per_3600_s() {
    let timeline: Vec<(i64, Option<Vec<PatrolObservation>>)> =
        [0, 601, 601 + 3599, 601 + 3600, 601 + 3600 + 60]
            .iter()
            .map(|&t| (t, Some(vec![waiting("aa")])))
            .collect();
    let decisions = run(&WaitingPatrolConfig::default(), &timeline);
    assert_eq!(
        names(&decisions),
        vec![
            N::Watching,
            N::Nudge,
            N::NudgeDeduped,
            N::Nudge,
            N::NudgeDeduped
        ]
    );
    assert_eq!(
        decisions[2].1.reason,
        "pane unchanged for 4200 s; last nudge 3599 s ago, next in 1 s"
    );
}

#[test]
fn a_pane_change_resets_the_timer_but_not_the_nudge_dedup() {
    let decisions = run(
        &WaitingPatrolConfig::default(),
        &[
            (0, Some(vec![waiting("aa")])),
            (500, Some(vec![waiting("bb")])),
            (1100, Some(vec![waiting("bb")])),
            (1101, Some(vec![waiting("bb")])),
            (1200, Some(vec![waiting("cc")])),
            (1801, Some(vec![waiting("cc")])),
        ],
    );
    assert_eq!(
        names(&decisions),
        vec![
            N::Watching,
            N::PaneChanged,
            N::Unchanged,
            N::Nudge,
            N::PaneChanged,
            N::NudgeDeduped
        ]
    );
}

#[test]
fn a_status_change_forgets_the_session() {
    let decisions = run(
        &WaitingPatrolConfig::default(),
        &[
            (0, Some(vec![waiting("aa")])),
            (601, Some(vec![waiting("aa")])),
            (700, Some(vec![child("running", Some("aa"))])),
            (800, Some(vec![waiting("aa")])),
            (1401, Some(vec![waiting("aa")])),
        ],
    );
    assert_eq!(
        names(&decisions),
        vec![N::Watching, N::Nudge, N::Forgotten, N::Watching, N::Nudge]
    );
    assert_eq!(decisions[2].1.reason, "status is now running; forgotten");
}

#[test]
fn only_child_sessions_in_waiting_are_watched() {
    let orphan = PatrolObservation {
        parent_session_id: None,
        ..waiting("aa")
    };
    let blank_parent = PatrolObservation {
        parent_session_id: Some(String::new()),
        ..waiting("aa")
    };
    let running = child("running", Some("aa"));
    for quiet in [orphan, blank_parent, running] {
        let decisions = run(
            &WaitingPatrolConfig::default(),
            &[(0, Some(vec![quiet.clone()])), (5000, Some(vec![quiet]))],
        );
        assert!(decisions.is_empty(), "{decisions:?}");
    }
}

#[test]
fn an_unreadable_pane_neither_nudges_nor_resets() {
    let decisions = run(
        &WaitingPatrolConfig::default(),
        &[
            (0, Some(vec![waiting("aa")])),
            (400, Some(vec![child("waiting", None)])),
            (601, Some(vec![waiting("aa")])),
        ],
    );
    assert_eq!(
        names(&decisions),
        vec![N::Watching, N::PaneUnreadable, N::Nudge]
    );
}

#[test]
fn a_failed_listing_keeps_trackers_but_an_empty_one_forgets_them() {
    let kept = run(
        &WaitingPatrolConfig::default(),
        &[
            (0, Some(vec![waiting("aa")])),
            (300, None),
            (601, Some(vec![waiting("aa")])),
        ],
    );
    assert_eq!(
        names(&kept),
        vec![N::Watching, N::ListingUnavailable, N::Nudge]
    );
    assert_eq!(
        kept[1].1.reason,
        "session listing unavailable; 1 tracker(s) kept"
    );
    let gone = run(
        &WaitingPatrolConfig::default(),
        &[
            (0, Some(vec![waiting("aa")])),
            (300, Some(vec![])),
            (601, Some(vec![waiting("aa")])),
        ],
    );
    assert_eq!(names(&gone), vec![N::Watching, N::Forgotten, N::Watching]);
    assert_eq!(gone[1].1.reason, "session gone from the listing; forgotten");
}

#[test]
fn thresholds_are_configurable_and_dry_run_only_marks_the_action() {
    let config = WaitingPatrolConfig {
        threshold: 60,
        nudge_dedup: 120,
        dry_run: true,
        ..WaitingPatrolConfig::default()
    };
    let timeline: Vec<_> = [0, 61, 180, 181]
        .iter()
        .map(|&t| (t, Some(vec![waiting("aa")])))
        .collect();
    let decisions = run(&config, &timeline);
    assert_eq!(nudge_times(&decisions), vec![61, 181]);
    assert!(matches!(
        decisions[1].1.action,
        Some(PatrolAction::Nudge { dry_run: true, .. })
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
