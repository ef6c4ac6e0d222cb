//! Named cases for the agent-deck session restart guard, at the boundaries of every rule.

use recovery_policy::Policy;
use recovery_policy::restart_guard::{
    AuthHold, GuardAction, GuardDecision, GuardDecisionName as N, GuardEvent, RestartGuardConfig,
    RestartGuardState, RestartReply, RestartResult, SessionObservation, SessionRecord,
    SessionStatus, Severity, Trigger, mentions_rate_limit,
};

fn obs(id: &str, title: &str, group: &str, status: &str) -> SessionObservation {
    SessionObservation {
        id: id.into(),
        title: title.into(),
        group: Some(group.into()),
        status: SessionStatus::parse(Some(status)),
        ..SessionObservation::default()
    }
}

fn conductor(status: &str) -> SessionObservation {
    obs("c1", "conductor-travel", "conductor", status)
}

fn watcher(status: &str) -> SessionObservation {
    obs("w1", "gmail-watcher", "watchers", status)
}

fn restarted() -> RestartReply {
    RestartReply::Restarted { warning: None }
}

#[derive(Default)]
struct Guard {
    config: RestartGuardConfig,
    state: RestartGuardState,
}

impl Guard {
    fn with(config: RestartGuardConfig) -> Self {
        Self {
            config,
            state: RestartGuardState::default(),
        }
    }

    fn tick(&mut self, now: i64, sessions: &[SessionObservation]) -> Vec<GuardDecision> {
        self.state
            .handle(&self.config, &GuardEvent::Tick(sessions.to_vec()), now)
    }

    fn recheck(&mut self, now: i64, fresh: &SessionObservation) -> GuardDecision {
        one(self
            .state
            .handle(&self.config, &GuardEvent::Recheck(fresh.clone()), now))
    }

    fn result(
        &mut self,
        now: i64,
        session: &str,
        reply: RestartReply,
        last_output: Option<&str>,
    ) -> GuardDecision {
        let result = RestartResult {
            session: session.into(),
            reply,
            last_output: last_output.map(str::to_owned),
        };
        one(self
            .state
            .handle(&self.config, &GuardEvent::RestartResult(result), now))
    }

    /// Tick, re-check and result at `now` for one session; returns the tick's decision for it and the
    /// re-check's decision (the result is fed only after a restart).
    fn cycle(&mut self, now: i64, session: &SessionObservation) -> (N, N) {
        let tick = self.tick(now, std::slice::from_ref(session));
        let tick_name = tick
            .iter()
            .find(|d| d.session.as_deref() == Some(&session.id))
            .map_or(N::Recovered, |d| d.name);
        if tick_name != N::Recheck {
            return (tick_name, tick_name);
        }
        let recheck = self.recheck(now, session);
        if recheck.name == N::Restart {
            self.result(now, &session.id, restarted(), None);
        }
        (tick_name, recheck.name)
    }
}

fn one(mut decisions: Vec<GuardDecision>) -> GuardDecision {
    assert_eq!(decisions.len(), 1, "{decisions:?}");
    decisions.remove(0)
}

// --- who is critical -------------------------------------------------------------------------------

#[test]
fn critical_session_rule() {
    let mut plain = obs("p", "worker", "work", "error");
    let cases: [(SessionObservation, Option<&str>); 7] = [
        (conductor("error"), Some("conductor- title")),
        (
            obs("x", "planner", "conductor", "error"),
            Some("conductor group"),
        ),
        (watcher("error"), Some("watchers group")),
        (
            SessionObservation {
                is_conductor: true,
                ..plain.clone()
            },
            Some("is_conductor"),
        ),
        (
            SessionObservation {
                opt_in: true,
                ..plain.clone()
            },
            Some("opt-in flag"),
        ),
        (obs("y", "worker", "conductor/sub", "error"), None),
        (plain.clone(), None),
    ];
    for (session, expected) in cases {
        assert_eq!(session.critical_because(), expected, "{session:?}");
    }
    plain.title = "my-conductor-x".into();
    assert_eq!(
        plain.critical_because(),
        None,
        "the prefix must start the title"
    );
}

#[test]
fn a_non_critical_session_in_error_is_left_alone_and_noted_once() {
    let mut guard = Guard::default();
    let worker = obs("p", "worker", "work", "error");
    let first = one(guard.tick(0, std::slice::from_ref(&worker)));
    assert_eq!(first.name, N::NotCritical);
    assert!(first.action.is_none());
    assert!(
        guard.tick(60, std::slice::from_ref(&worker)).is_empty(),
        "noted once per episode"
    );
    assert_eq!(
        guard.recheck(61, &worker).name,
        N::NotCritical,
        "a re-check cannot make it critical"
    );
}

// --- tick, re-check, restart -----------------------------------------------------------------------

#[test]
fn a_critical_session_in_error_is_rechecked_then_restarted() {
    let mut guard = Guard::default();
    let tick = one(guard.tick(100, &[conductor("error")]));
    assert_eq!(tick.name, N::Recheck);
    assert_eq!(
        tick.action,
        Some(GuardAction::Recheck {
            session: "c1".into(),
            trigger: Trigger::Error
        })
    );
    let restart = guard.recheck(101, &conductor("error"));
    assert_eq!(restart.name, N::Restart);
    assert_eq!(
        restart.action,
        Some(GuardAction::Restart {
            session: "c1".into(),
            trigger: Trigger::Error,
            dry_run: false
        })
    );
    assert_eq!(
        restart.reason,
        "conductor-travel (c1) in error for 1 s (critical: conductor- title); confirmed at re-check, restarting (1 of 3 in 300 s)"
    );
    assert_eq!(
        guard.result(104, "c1", restarted(), None).name,
        N::RestartSucceeded
    );
}

#[test]
fn recheck_skips_a_session_that_recovered_was_stopped_or_cannot_be_read() {
    for (fresh, expected) in [
        ("running", N::Recovered),
        ("stopped", N::Stopped),
        ("", N::StatusUnreadable),
    ] {
        let mut guard = Guard::default();
        assert_eq!(one(guard.tick(0, &[conductor("error")])).name, N::Recheck);
        let decision = guard.recheck(1, &conductor(fresh));
        assert_eq!(decision.name, expected, "fresh status {fresh:?}");
        assert!(decision.action.is_none());
        // Nothing was counted: the next error restarts at once.
        assert_eq!(
            guard.cycle(2, &conductor("error")),
            (N::Recheck, N::Restart)
        );
    }
}

#[test]
fn stopped_sessions_are_never_restarted() {
    let mut guard = Guard::default();
    assert!(
        guard
            .tick(0, &[conductor("stopped"), watcher("stopped")])
            .is_empty()
    );
    let decision = guard.recheck(1, &conductor("stopped"));
    assert_eq!(decision.name, N::Stopped);
    assert_eq!(
        decision.reason,
        "status is stopped at re-check: stopped by the user, never restarted"
    );
}

#[test]
fn three_restarts_within_300_s_are_allowed_and_the_fourth_waits() {
    let mut guard = Guard::default();
    for t in [0, 60, 120] {
        assert_eq!(
            guard.cycle(t, &conductor("error")),
            (N::Recheck, N::Restart),
            "restart at {t}"
        );
    }
    let fourth = one(guard.tick(180, &[conductor("error")]));
    assert_eq!(fourth.name, N::RestartLimitEscalated);
    assert_eq!(
        fourth.reason,
        "3 restarts in the last 300 s; next allowed in 120 s; escalating"
    );
    let Some(GuardAction::Escalate {
        severity: Severity::RestartLimit,
        message,
        ..
    }) = &fourth.action
    else {
        panic!("expected an escalation: {fourth:?}");
    };
    assert_eq!(
        message,
        "conductor-travel (c1) keeps crashing: 3 restarts in 300 s; needs human attention"
    );
    // Same full window: no second escalation.
    let again = one(guard.tick(299, &[conductor("error")]));
    assert_eq!(
        (again.name, again.action.is_none()),
        (N::RestartLimit, true)
    );
    assert_eq!(
        guard.recheck(299, &conductor("error")).name,
        N::RestartLimit,
        "a re-check cannot bypass the limit"
    );
    // At 300 the restart at 0 has left the window.
    assert_eq!(
        guard.cycle(300, &conductor("error")),
        (N::Recheck, N::Restart)
    );
    // Restarts at 300, 360, 420 fill a new window (oldest 300): it escalates again, once.
    assert_eq!(
        guard.cycle(360, &conductor("error")),
        (N::Recheck, N::Restart)
    );
    assert_eq!(
        guard.cycle(420, &conductor("error")),
        (N::Recheck, N::Restart)
    );
    assert_eq!(
        guard.cycle(480, &conductor("error")).0,
        N::RestartLimitEscalated
    );
    assert_eq!(guard.cycle(540, &conductor("error")).0, N::RestartLimit);
}

#[test]
fn two_sessions_59_s_apart_wait_and_60_s_apart_restart() {
    for (gap, expected) in [(59, N::Deferred), (60, N::Restart)] {
        let mut guard = Guard::default();
        assert_eq!(
            guard.cycle(1000, &conductor("error")),
            (N::Recheck, N::Restart)
        );
        let decision = guard.recheck(1000 + gap, &watcher("error"));
        assert_eq!(decision.name, expected, "gap {gap}");
    }
    let mut guard = Guard::default();
    guard.cycle(1000, &conductor("error"));
    let deferred = one(guard.tick(1059, &[watcher("error")]));
    assert_eq!(deferred.name, N::Deferred);
    assert_eq!(
        deferred.reason,
        "global spacing: last restart 59 s ago, waiting 1 s more; deferred, not dropped"
    );
}

#[test]
fn global_spacing_runs_from_the_end_of_the_restart() {
    let mut guard = Guard::default();
    assert_eq!(one(guard.tick(0, &[conductor("error")])).name, N::Recheck);
    assert_eq!(guard.recheck(0, &conductor("error")).name, N::Restart);
    guard.result(10, "c1", restarted(), None);
    assert_eq!(guard.recheck(69, &watcher("error")).name, N::Deferred);
    assert_eq!(guard.recheck(70, &watcher("error")).name, N::Restart);
}

#[test]
fn one_candidate_per_tick_the_others_wait_their_turn() {
    let mut guard = Guard::default();
    let first = guard.tick(0, &[watcher("error"), conductor("error")]);
    let summary: Vec<(N, Option<&str>)> = first
        .iter()
        .map(|d| (d.name, d.session.as_deref()))
        .collect();
    assert_eq!(
        summary,
        vec![(N::Recheck, Some("c1")), (N::Deferred, Some("w1"))],
        "same age: ordered by id"
    );
    assert_eq!(
        first[1].reason,
        "another restart goes first (c1); deferred, not dropped"
    );
    assert_eq!(guard.recheck(0, &conductor("error")).name, N::Restart);
    guard.result(0, "c1", restarted(), None);
    // Still inside the spacing and c1's quiet period: both wait.
    let waiting = guard.tick(59, &[conductor("error"), watcher("error")]);
    let summary: Vec<(N, Option<&str>)> = waiting
        .iter()
        .map(|d| (d.name, d.session.as_deref()))
        .collect();
    assert_eq!(
        summary,
        vec![
            (N::QuietAfterRestart, Some("c1")),
            (N::Deferred, Some("w1"))
        ]
    );
    // The deferred watcher has waited longest (since 0; c1's new episode starts at 59): it goes first.
    let later = guard.tick(60, &[conductor("error"), watcher("error")]);
    let summary: Vec<(N, Option<&str>)> = later
        .iter()
        .map(|d| (d.name, d.session.as_deref()))
        .collect();
    assert_eq!(
        summary,
        vec![(N::Recheck, Some("w1")), (N::Deferred, Some("c1"))]
    );
}

#[test]
fn a_restarted_session_is_left_alone_for_60_s() {
    for (after, expected) in [(59, N::QuietAfterRestart), (60, N::Recheck)] {
        let mut guard = Guard::default();
        guard.cycle(0, &conductor("error"));
        assert_eq!(
            one(guard.tick(after, &[conductor("error")])).name,
            expected,
            "{after} s after"
        );
    }
}

// --- results ---------------------------------------------------------------------------------------

#[test]
fn skipped_true_is_a_refusal_not_a_success_or_a_failure() {
    let mut guard = Guard::default();
    let refused = RestartReply::Refused {
        reason: "session is running and was started 12s ago".into(),
    };
    let failed = RestartReply::Failed {
        error: "boom".into(),
    };
    let mut names = Vec::new();
    for (t, reply) in [
        (0, refused.clone()),
        (300, failed.clone()),
        (600, refused),
        (900, failed),
    ] {
        assert_eq!(
            one(guard.tick(t, &[conductor("error")])).name,
            N::Recheck,
            "at {t}"
        );
        assert_eq!(guard.recheck(t, &conductor("error")).name, N::Restart);
        names.push(guard.result(t, "c1", reply, None).name);
    }
    assert_eq!(
        names,
        vec![
            N::RestartRefused,
            N::RestartFailed,
            N::RestartRefused,
            N::RestartFailedEscalated
        ]
    );
}

#[test]
fn two_consecutive_failures_escalate_once() {
    let mut guard = Guard::default();
    let mut names = Vec::new();
    for t in [0, 60, 120] {
        guard.tick(t, &[conductor("error")]);
        guard.recheck(t, &conductor("error"));
        names.push(
            guard
                .result(
                    t,
                    "c1",
                    RestartReply::Failed {
                        error: "restart rc=1".into(),
                    },
                    None,
                )
                .name,
        );
    }
    assert_eq!(
        names,
        vec![
            N::RestartFailed,
            N::RestartFailedEscalated,
            N::RestartFailed
        ]
    );
}

#[test]
fn a_result_with_no_restart_pending_is_ignored() {
    let mut guard = Guard::default();
    assert_eq!(
        guard.result(0, "c1", restarted(), None).name,
        N::UnexpectedResult
    );
}

// --- rate limits -----------------------------------------------------------------------------------

#[test]
fn rate_limit_text_detection() {
    let cases = [
        ("Rate limited, try later", true),
        ("HTTP 429", true),
        ("API Error: 429 Too Many Requests", true),
        ("(429)", true),
        ("rate_limit_error", true),
        ("too many requests", true),
        ("pid 14291 exited", false),
        ("usage limit reached", false),
        ("", false),
    ];
    for (text, expected) in cases {
        assert_eq!(mentions_rate_limit(text), expected, "{text:?}");
    }
}

#[test]
fn a_rate_limit_backs_off_899_s_waits_and_900_s_goes() {
    for (after, expected) in [(899, N::BackingOff), (900, N::Recheck)] {
        let mut guard = Guard::default();
        guard.tick(0, &[conductor("error")]);
        guard.recheck(0, &conductor("error"));
        let backoff = guard.result(
            0,
            "c1",
            RestartReply::Failed {
                error: "API Error: 429 Too Many Requests".into(),
            },
            None,
        );
        assert_eq!(backoff.name, N::RateLimitBackoff);
        assert!(matches!(
            backoff.action,
            Some(GuardAction::Escalate {
                severity: Severity::RateLimit,
                ..
            })
        ));
        assert_eq!(
            one(guard.tick(after, &[conductor("error")])).name,
            expected,
            "{after} s after"
        );
    }
}

#[test]
fn a_rate_limit_in_the_last_output_backs_off_instead_of_restarting() {
    let mut guard = Guard::default();
    guard.tick(0, &[conductor("error")]);
    let fresh = SessionObservation {
        last_output: Some("Error: rate limit exceeded".into()),
        ..conductor("error")
    };
    let decision = guard.recheck(1, &fresh);
    assert_eq!(decision.name, N::RateLimitBackoff);
    assert_eq!(
        one(guard.tick(2, &[conductor("error")])).name,
        N::BackingOff
    );
    // Found after a successful restart too: back off.
    let mut guard = Guard::default();
    guard.tick(0, &[conductor("error")]);
    guard.recheck(0, &conductor("error"));
    assert_eq!(
        guard
            .result(3, "c1", restarted(), Some("HTTP 429 from the API"))
            .name,
        N::RateLimitBackoff
    );
}

// --- auth hold -------------------------------------------------------------------------------------

#[test]
fn an_auth_held_session_is_escalated_once_and_never_restarted() {
    let mut guard = Guard::default();
    let held = SessionObservation {
        auth_hold: Some(AuthHold {
            reason: "auth_death".into(),
        }),
        ..conductor("error")
    };
    let first = one(guard.tick(0, std::slice::from_ref(&held)));
    assert_eq!(first.name, N::AuthHoldEscalated);
    let Some(GuardAction::Escalate {
        severity: Severity::AuthHold,
        message,
        ..
    }) = &first.action
    else {
        panic!("expected an auth-hold escalation: {first:?}");
    };
    assert!(
        message.contains("a restart cannot fix a credential"),
        "{message}"
    );
    assert_eq!(
        one(guard.tick(60, std::slice::from_ref(&held))).name,
        N::AuthHeld
    );
    assert_eq!(
        guard.recheck(61, &held).name,
        N::AuthHeld,
        "a re-check never restarts a held session"
    );
    // The hold clears (session healthy), then a new hold escalates again.
    assert!(guard.tick(120, &[conductor("running")]).is_empty());
    assert_eq!(one(guard.tick(180, &[held])).name, N::AuthHoldEscalated);
}

#[test]
fn auth_hold_from_agent_deck_show_json() {
    let path = format!(
        "{}/tests/samples/agent_deck_session_show_head.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let all: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).expect("sample")).expect("JSON");
    let held: SessionObservation =
        serde_json::from_value(all["errored_auth_held"].clone()).expect("session");
    assert_eq!(held.status, SessionStatus::Error);
    assert_eq!(
        held.auth_hold.as_ref().map(|h| h.reason.as_str()),
        Some("auth_death")
    );
    let healthy: SessionObservation =
        serde_json::from_value(all["healthy_conductor"].clone()).expect("session");
    assert!(healthy.has_telegram() && healthy.is_a_conductor() && healthy.auth_hold.is_none());
}

// --- poller liveness -------------------------------------------------------------------------------

fn deaf_conductor(pollers: Option<u32>) -> SessionObservation {
    SessionObservation {
        channels: vec!["plugin:telegram@claude-plugins-official".into()],
        pollers,
        ..conductor("running")
    }
}

#[test]
fn a_conductor_without_a_live_poller_is_restarted_at_most_once_per_3600_s() {
    let mut guard = Guard::default();
    let tick = one(guard.tick(0, &[deaf_conductor(Some(0))]));
    assert_eq!(
        tick.action,
        Some(GuardAction::Recheck {
            session: "c1".into(),
            trigger: Trigger::PollerMissing
        })
    );
    let restart = guard.recheck(1, &deaf_conductor(Some(0)));
    assert_eq!(
        restart.action,
        Some(GuardAction::Restart {
            session: "c1".into(),
            trigger: Trigger::PollerMissing,
            dry_run: false
        })
    );
    guard.result(1, "c1", restarted(), None);
    for (t, expected) in [(3600, N::PollerDedup), (3601, N::Recheck)] {
        assert_eq!(
            one(guard.tick(t, &[deaf_conductor(Some(0))])).name,
            expected,
            "at {t}"
        );
    }
}

#[test]
fn a_failed_poller_restart_is_retried_next_tick_and_two_failures_escalate() {
    let mut guard = Guard::default();
    let failed = || RestartReply::Failed {
        error: "restart rc=1".into(),
    };
    let mut names = Vec::new();
    for t in [0, 61, 122] {
        let tick = one(guard.tick(t, &[deaf_conductor(Some(0))]));
        names.push(tick.name);
        if tick.name != N::Recheck {
            continue;
        }
        assert_eq!(guard.recheck(t, &deaf_conductor(Some(0))).name, N::Restart);
        names.push(guard.result(t + 1, "c1", failed(), None).name);
    }
    assert_eq!(
        names,
        [
            N::Recheck,
            N::RestartFailed,
            // Not poller-dedup: the failed restart restarted nothing.
            N::Recheck,
            N::RestartFailedEscalated,
            N::Recheck,
            N::RestartFailed,
        ]
    );
    // A poller restart that worked still holds the dedup for an hour.
    guard.tick(300, &[deaf_conductor(Some(0))]);
    guard.recheck(300, &deaf_conductor(Some(0)));
    guard.result(301, "c1", restarted(), None);
    assert_eq!(
        one(guard.tick(400, &[deaf_conductor(Some(0))])).name,
        N::PollerDedup
    );
}

#[test]
fn a_dry_run_marks_its_escalations_too() {
    let held = |dry_run| {
        let mut guard = Guard::with(RestartGuardConfig {
            dry_run,
            ..RestartGuardConfig::default()
        });
        let held = SessionObservation {
            auth_hold: Some(AuthHold {
                reason: "auth_death".into(),
            }),
            ..conductor("error")
        };
        one(guard.tick(0, &[held]))
    };
    let dry = held(true);
    assert!(
        matches!(
            dry.action,
            Some(GuardAction::Escalate { dry_run: true, .. })
        ),
        "{dry:?}"
    );
    let json = serde_json::to_value(&dry.action).unwrap();
    assert_eq!(json["dry_run"], true, "{json}");
    // A real run's escalation reads as before (docs/replay.md): no `dry_run` key.
    let real = serde_json::to_value(&held(false).action).unwrap();
    assert_eq!(real.get("dry_run"), None, "{real}");
}

#[test]
fn poller_liveness_needs_a_live_conductor_with_telegram_and_zero_pollers() {
    let not_conductor = SessionObservation {
        id: "w".into(),
        title: "worker".into(),
        group: None,
        ..deaf_conductor(Some(0))
    };
    let no_channel = SessionObservation {
        channels: vec![],
        ..deaf_conductor(Some(0))
    };
    let stopped = SessionObservation {
        status: SessionStatus::Stopped,
        ..deaf_conductor(Some(0))
    };
    for quiet in [
        deaf_conductor(None),
        deaf_conductor(Some(1)),
        not_conductor,
        no_channel,
        stopped,
    ] {
        let mut guard = Guard::default();
        assert!(
            guard.tick(0, std::slice::from_ref(&quiet)).is_empty(),
            "{quiet:?}"
        );
    }
    // The poller came back before the re-check.
    let mut guard = Guard::default();
    guard.tick(0, &[deaf_conductor(Some(0))]);
    assert_eq!(
        guard.recheck(1, &deaf_conductor(Some(1))).name,
        N::Recovered
    );
}

#[test]
fn dry_run_only_marks_the_action() {
    let mut guard = Guard::with(RestartGuardConfig {
        dry_run: true,
        ..RestartGuardConfig::default()
    });
    guard.tick(0, &[conductor("error")]);
    let restart = guard.recheck(0, &conductor("error"));
    assert_eq!(
        restart.action,
        Some(GuardAction::Restart {
            session: "c1".into(),
            trigger: Trigger::Error,
            dry_run: true
        })
    );
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
fn next_wakeup_is_when_the_first_wait_holding_a_troubled_session_ends() {
    const NOW: i64 = 10_000;
    let config = RestartGuardConfig::default(); // spacing 60, quiet 60, window 300, limit 3
    let troubled = |record: SessionRecord| SessionRecord {
        trouble_since: Some(NOW - 500),
        ..record
    };
    let state = |last_restart_at: Option<i64>, records: Vec<SessionRecord>| RestartGuardState {
        last_restart_at,
        sessions: records
            .into_iter()
            .enumerate()
            .map(|(i, r)| (format!("s{i}"), r))
            .collect(),
    };
    let cases: Vec<(&str, RestartGuardState, Option<i64>)> = vec![
        ("nothing known", state(None, vec![]), None),
        (
            "in trouble, nothing holds it: only a listing decides",
            state(None, vec![troubled(SessionRecord::default())]),
            None,
        ),
        (
            "rate-limit back-off ends",
            state(
                None,
                vec![troubled(SessionRecord {
                    backoff_until: Some(NOW + 700),
                    ..SessionRecord::default()
                })],
            ),
            Some(NOW + 700),
        ),
        (
            "quiet after a restart ends",
            state(
                None,
                vec![troubled(SessionRecord {
                    last_restart_at: Some(NOW - 20),
                    ..SessionRecord::default()
                })],
            ),
            Some(NOW + 40),
        ),
        (
            "a full window frees when its oldest restart leaves it",
            state(
                None,
                vec![troubled(SessionRecord {
                    restarts: vec![NOW - 250, NOW - 200, NOW - 100],
                    ..SessionRecord::default()
                })],
            ),
            Some(NOW + 50),
        ),
        (
            "a window that is not full holds nothing",
            state(
                None,
                vec![troubled(SessionRecord {
                    restarts: vec![NOW - 250, NOW - 200],
                    ..SessionRecord::default()
                })],
            ),
            None,
        ),
        (
            "poller dedup ends",
            state(
                None,
                vec![troubled(SessionRecord {
                    poller_restart_at: Some(NOW - 3000),
                    ..SessionRecord::default()
                })],
            ),
            Some(NOW + 600),
        ),
        (
            "a deferred candidate waits for the global spacing",
            state(Some(NOW - 45), vec![troubled(SessionRecord::default())]),
            Some(NOW + 15),
        ),
        (
            "the global spacing alone, nobody in trouble: nothing to do",
            state(
                Some(NOW - 45),
                vec![SessionRecord {
                    last_restart_at: Some(NOW - 45),
                    ..SessionRecord::default()
                }],
            ),
            None,
        ),
        (
            "the earliest of several",
            state(
                Some(NOW - 10),
                vec![
                    troubled(SessionRecord {
                        backoff_until: Some(NOW + 700),
                        ..SessionRecord::default()
                    }),
                    troubled(SessionRecord {
                        last_restart_at: Some(NOW - 30),
                        ..SessionRecord::default()
                    }),
                ],
            ),
            Some(NOW + 30),
        ),
        (
            "a wait that ends now is over, not due again",
            state(
                None,
                vec![troubled(SessionRecord {
                    backoff_until: Some(NOW),
                    ..SessionRecord::default()
                })],
            ),
            None,
        ),
    ];
    for (case, state, want) in cases {
        assert_eq!(state.next_wakeup(&config, NOW), want, "{case}");
    }
}

#[test]
fn next_wakeup_lets_a_deferred_watcher_restart_as_soon_as_the_spacing_allows() {
    let config = RestartGuardConfig::default();
    let mut state = RestartGuardState::default();
    let t0 = 1_000;
    state.handle(
        &config,
        &GuardEvent::Tick(vec![conductor("error"), watcher("error")]),
        t0,
    );
    state.handle(&config, &GuardEvent::Recheck(conductor("error")), t0);
    assert_eq!(
        state.next_wakeup(&config, t0),
        Some(t0 + 60),
        "the watcher waits for the spacing"
    );
    let decided = state.handle(
        &config,
        &GuardEvent::Tick(vec![conductor("running"), watcher("error")]),
        t0 + 60,
    );
    assert_eq!(decided[0].name, N::Recheck, "{decided:?}");
}
