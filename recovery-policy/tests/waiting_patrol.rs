//! Named cases for the waiting patrol, at the boundaries of every rule.

use recovery_policy::Policy;
use recovery_policy::restart_guard::SessionStatus;
use recovery_policy::waiting_patrol::{
    PatrolAction, PatrolDecision, PatrolDecisionName as N, PatrolEvent, PatrolObservation, Tracker,
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

#[test]
fn next_wakeup_is_when_an_unchanged_pane_would_be_nudged() {
    const NOW: i64 = 10_000;
    let config = WaitingPatrolConfig::default(); // threshold 600 (more than), dedup 3600
    let tracker = |unchanged_since: i64, last_nudge_at: Option<i64>| Tracker {
        pane_hash: "h".to_owned(),
        unchanged_since,
        last_nudge_at,
    };
    let cases: Vec<(&str, Vec<Tracker>, Option<i64>)> = vec![
        ("nothing watched", vec![], None),
        (
            "just seen: more than the threshold later",
            vec![tracker(NOW, None)],
            Some(NOW + 601),
        ),
        (
            "part of the threshold gone",
            vec![tracker(NOW - 300, None)],
            Some(NOW + 301),
        ),
        (
            "nudged recently: the dedup decides",
            vec![tracker(NOW - 2000, Some(NOW - 1000))],
            Some(NOW + 2600),
        ),
        (
            "a pane changed after the nudge: the threshold decides",
            vec![tracker(NOW - 100, Some(NOW - 3599))],
            Some(NOW + 501),
        ),
        (
            "overdue (its pane was unreadable): only a listing decides",
            vec![tracker(NOW - 900, None)],
            None,
        ),
        (
            "the earliest of several",
            vec![tracker(NOW - 100, None), tracker(NOW - 500, None)],
            Some(NOW + 101),
        ),
    ];
    for (case, trackers, want) in cases {
        let state = WaitingPatrolState {
            trackers: trackers
                .into_iter()
                .enumerate()
                .map(|(i, t)| (format!("k{i}"), t))
                .collect(),
        };
        assert_eq!(state.next_wakeup(&config, NOW), want, "{case}");
    }
}

#[test]
fn a_tick_at_the_wakeup_nudges() {
    let config = WaitingPatrolConfig::default();
    let mut state = WaitingPatrolState::default();
    state.handle(&config, &PatrolEvent::Tick(vec![waiting("h1")]), 1000);
    let at = state.next_wakeup(&config, 1000).expect("a nudge is ahead");
    let before = state.handle(&config, &PatrolEvent::Tick(vec![waiting("h1")]), at - 1);
    assert_eq!(before[0].name, N::Unchanged);
    let decided = state.handle(&config, &PatrolEvent::Tick(vec![waiting("h1")]), at);
    assert_eq!(decided[0].name, N::Nudge);
    assert_eq!(state.next_wakeup(&config, at), Some(at + 3600), "the dedup");
}
