//! Invariants of the recovery policies over random timelines, driven by the one driver
//! (`agentwatch_runtime::drive`) with a simulated caller that reacts to the actions the way a real
//! one would (answers `ask-router`, feeds restart outcomes and re-checks), with random answers.
//!
//! Every property also checks that a dry run reaches the same decisions and that saving and loading
//! the state between every event changes nothing.

use agentwatch_runtime::drive::{DecisionOf, Perform, drive};
use proptest::prelude::*;
use recovery_policy::loop_recovery::{
    ActionOutcome, LoopAction, LoopDecision, LoopDecisionName, LoopEvent, LoopRecoveryConfig,
    LoopRecoveryState, LoopReport, RouterVerdict,
};
use recovery_policy::restart_guard::{
    AuthHold, GuardAction, GuardDecision, GuardDecisionName, GuardEvent, RestartGuardConfig,
    RestartGuardState, RestartReply, RestartResult, SessionObservation, SessionStatus, Trigger,
};
use recovery_policy::waiting_patrol::{
    PatrolAction, PatrolDecision, PatrolDecisionName, PatrolEvent, PatrolObservation,
    WaitingPatrolConfig, WaitingPatrolState,
};
use recovery_policy::{PolicyState, load_state, save_state};
use std::collections::BTreeMap;
use std::convert::Infallible;

fn proptest_config() -> ProptestConfig {
    ProptestConfig {
        cases: 64,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// With `persist`, the state goes through a save/load round trip before an event, as between two
/// oneshot runs, and must come back identical.
fn persisted<S: PolicyState + PartialEq + std::fmt::Debug>(state: &S, persist: bool) {
    if persist {
        let text = save_state(state).expect("state serialises");
        let loaded = load_state::<S>(&text);
        assert_eq!(loaded.warning, None);
        assert_eq!(
            &loaded.state, state,
            "state survives a save/load round trip"
        );
    }
}

// ==================================================================================================
// Confirmed-loop restart

#[derive(Debug, Clone)]
enum ReportKind {
    /// A fresh-looking suspected report whose probe is `age` seconds old (may be stale).
    Suspected {
        age: i64,
    },
    /// The previous report's probe again.
    Repeat,
    Clear,
    Unreadable,
    Invalid,
}

#[derive(Debug, Clone)]
enum ReplyKind {
    Stuck(bool),
    Malformed,
    Unreachable,
    Lost,
}

#[derive(Debug, Clone)]
struct LoopStep {
    dt: i64,
    report: ReportKind,
    reply: ReplyKind,
    /// `None`: the outcome is lost.
    outcome: Option<bool>,
    outcome_after: i64,
}

fn loop_step() -> impl Strategy<Value = LoopStep> {
    let report = prop_oneof![
        6 => (0i64..=700).prop_map(|age| ReportKind::Suspected { age }),
        2 => Just(ReportKind::Repeat),
        1 => Just(ReportKind::Clear),
        1 => Just(ReportKind::Unreadable),
        1 => Just(ReportKind::Invalid),
    ];
    let reply = prop_oneof![
        3 => any::<bool>().prop_map(ReplyKind::Stuck),
        1 => Just(ReplyKind::Malformed),
        1 => Just(ReplyKind::Unreachable),
        1 => Just(ReplyKind::Lost),
    ];
    let outcome = prop_oneof![3 => Just(Some(true)), 2 => Just(Some(false)), 1 => Just(None)];
    (1i64..=400, report, reply, outcome, 0i64..=120).prop_map(
        |(dt, report, reply, outcome, outcome_after)| LoopStep {
            dt,
            report,
            reply,
            outcome,
            outcome_after,
        },
    )
}

fn loop_config() -> impl Strategy<Value = LoopRecoveryConfig> {
    (any::<bool>(), prop::option::of(0u32..3)).prop_map(|(router, veto_limit)| LoopRecoveryConfig {
        router_url: router.then(|| "http://127.0.0.1:9/v1".to_owned()),
        model: router.then(|| "m".to_owned()),
        veto_limit,
        ..LoopRecoveryConfig::default()
    })
}

/// What was fed and decided, in order.
#[derive(Debug, Clone, PartialEq)]
struct Fed<E, D> {
    now: i64,
    event: E,
    decisions: Vec<D>,
}

/// The simulated caller of the confirmed-loop restart: the step's router reply and outcome.
struct LoopCaller<'a> {
    step: &'a LoopStep,
    persist: bool,
    now: i64,
    /// The event being fed (exactly one decision answers each).
    fed: Option<LoopEvent>,
    log: &'a mut Vec<Fed<LoopEvent, LoopDecision>>,
}

impl Perform<LoopRecoveryState> for LoopCaller<'_> {
    type Error = Infallible;

    fn decided(
        &mut self,
        now: i64,
        decision: &LoopDecision,
        _: Option<&LoopAction>,
    ) -> Result<(), Infallible> {
        let event = self.fed.take().expect("one decision per event");
        self.log.push(Fed {
            now,
            event,
            decisions: vec![decision.clone()],
        });
        Ok(())
    }

    fn perform(
        &mut self,
        state: &LoopRecoveryState,
        action: &LoopAction,
        now: i64,
    ) -> Result<Option<(i64, LoopEvent)>, Infallible> {
        let event = match action {
            LoopAction::AskRouter { .. } => match self.step.reply {
                ReplyKind::Stuck(stuck) => LoopEvent::RouterVerdict(RouterVerdict::Stuck(stuck)),
                ReplyKind::Malformed => {
                    LoopEvent::RouterVerdict(RouterVerdict::from_content("maybe"))
                }
                ReplyKind::Unreachable => {
                    LoopEvent::RouterVerdict(RouterVerdict::Unreachable("timeout".into()))
                }
                ReplyKind::Lost => return Ok(None),
            },
            // A dry run's restart is fed an outcome too, so both runs see the same events.
            LoopAction::Restart { .. } => match self.step.outcome {
                Some(ok) => {
                    self.now = now + self.step.outcome_after;
                    LoopEvent::Outcome(ActionOutcome { ok, detail: None })
                }
                None => return Ok(None),
            },
        };
        persisted(state, self.persist);
        self.fed = Some(event.clone());
        Ok(Some((self.now, event)))
    }
}

fn drive_loop(
    config: &LoopRecoveryConfig,
    steps: &[LoopStep],
    persist: bool,
) -> Vec<Fed<LoopEvent, LoopDecision>> {
    let mut state = LoopRecoveryState::default();
    let mut log = Vec::new();
    let mut now = 1_000_000i64;
    let mut last_at = now;
    for step in steps {
        now += step.dt;
        let report = |value: serde_json::Value| {
            LoopEvent::Report(LoopReport::from_value(value).expect("object"))
        };
        let event = match step.report {
            ReportKind::Suspected { age } => {
                last_at = now - age;
                report(serde_json::json!({"suspected": 1, "at": last_at, "action": "none"}))
            }
            ReportKind::Repeat => {
                report(serde_json::json!({"suspected": 1, "at": last_at, "action": "none"}))
            }
            ReportKind::Clear => {
                report(serde_json::json!({"suspected": 0, "at": now, "action": "none"}))
            }
            ReportKind::Unreadable => LoopEvent::ReportUnreadable("gone".into()),
            ReportKind::Invalid => {
                report(serde_json::json!({"suspected": 1, "at": now, "action": "restart"}))
            }
        };
        persisted(&state, persist);
        let mut caller = LoopCaller {
            step,
            persist,
            now,
            fed: Some(event.clone()),
            log: &mut log,
        };
        let Ok(_) = drive(&mut state, config, &event, now, &mut caller);
        now = caller.now;
    }
    log
}

fn undry_loop(mut decision: LoopDecision) -> LoopDecision {
    if let Some(LoopAction::Restart { dry_run, .. }) = decision.action.as_mut() {
        *dry_run = false;
    }
    decision
}

proptest! {
    #![proptest_config(proptest_config())]

    #[test]
    fn loop_recovery_invariants(config in loop_config(), steps in prop::collection::vec(loop_step(), 1..60)) {
        let log = drive_loop(&config, &steps, false);
        let cooldown = i64::from(config.cooldown);

        // Reference model of the probes that may count: fresh suspected reports since the last
        // streak break, newer than the probe the last restart used.
        let mut streak: Vec<i64> = Vec::new();
        let mut used_through = i64::MIN;
        // The last restart: (decided at, cooldown start if it succeeded or the outcome is pending).
        let mut last_restart: Option<(i64, Option<i64>)> = None;
        for fed in &log {
            let decision = &fed.decisions[0];
            match &fed.event {
                LoopEvent::Report(report) => {
                    // Freshness computed here from the raw fields, independently of the policy.
                    let fresh = report.suspected == Some(1)
                        && report.action.as_deref() == Some("none")
                        && report.at.is_some_and(|at| (0..=i64::from(config.max_report_age)).contains(&(fed.now - at)));
                    match report.at {
                        Some(at) if fresh => {
                            if at > used_through {
                                streak.push(at);
                            }
                        }
                        _ => streak.clear(),
                    }
                }
                LoopEvent::ReportUnreadable(_) => streak.clear(),
                LoopEvent::Outcome(outcome) => {
                    if let Some((decided, pending)) = last_restart.as_mut()
                        && decision.name != LoopDecisionName::UnexpectedOutcome
                    {
                        *pending = outcome.ok.then_some(fed.now.max(*decided));
                    }
                }
                LoopEvent::RouterVerdict(_) => {}
                LoopEvent::Cancelled(_) => {
                    if let Some((_, pending)) = last_restart.as_mut()
                        && decision.name != LoopDecisionName::UnexpectedOutcome
                    {
                        *pending = None;
                    }
                }
            }
            if decision.name == LoopDecisionName::Restart {
                // Never an action without two fresh, separate probes.
                let (low, high) = (streak.iter().min().copied(), streak.iter().max().copied());
                let separate = matches!((low, high), (Some(a), Some(b)) if b - a >= i64::from(config.min_probe_gap));
                prop_assert!(separate, "restart at {} without two separate fresh probes: {:?}", fed.now, streak);
                // Never two actions within the cooldown of a successful (or unreported) one.
                if let Some((_, Some(from))) = last_restart {
                    prop_assert!(fed.now - from >= cooldown, "restart at {} within the cooldown from {}", fed.now, from);
                }
                let Some(LoopAction::Restart { probe_at, notice, execute_at, .. }) = &decision.action else {
                    panic!("a restart decision carries a restart action");
                };
                prop_assert_eq!(*execute_at, notice.announced_at + i64::from(config.countdown));
                used_through = used_through.max(*probe_at);
                streak.clear();
                last_restart = Some((fed.now, Some(fed.now)));
            }
            prop_assert!(!decision.reason.is_empty());
        }

        // Dry run: the same decisions; persistence: the same decisions.
        let dry = LoopRecoveryConfig { dry_run: true, ..config.clone() };
        let dry_log = drive_loop(&dry, &steps, false);
        let strip = |log: &[Fed<LoopEvent, LoopDecision>]| -> Vec<LoopDecision> {
            log.iter().flat_map(|f| f.decisions.iter().cloned().map(undry_loop)).collect()
        };
        prop_assert_eq!(strip(&log), strip(&dry_log));
        prop_assert_eq!(&log, &drive_loop(&config, &steps, true));
    }
}

// ==================================================================================================
// Session restart guard

#[derive(Debug, Clone)]
struct SessionDraw {
    status: Option<&'static str>,
    auth_hold: bool,
    pollers: Option<u32>,
}

#[derive(Debug, Clone)]
enum ResultKind {
    Restarted,
    Refused,
    Failed,
    RateLimited,
    Lost,
}

#[derive(Debug, Clone)]
struct GuardStep {
    dt: i64,
    sessions: [SessionDraw; 3],
    /// The status at re-check, if it changed since the tick.
    recheck_status: Option<Option<&'static str>>,
    recheck_after: i64,
    result: ResultKind,
    result_after: i64,
    /// A re-check nobody asked for (a late or confused caller), of this session, this long after the tick.
    unsolicited: Option<(usize, i64)>,
}

fn status() -> impl Strategy<Value = Option<&'static str>> {
    prop_oneof![
        4 => Just(Some("error")),
        2 => Just(Some("running")),
        1 => Just(Some("waiting")),
        1 => Just(Some("idle")),
        2 => Just(Some("stopped")),
        1 => Just(None),
    ]
}

fn session_draw() -> impl Strategy<Value = SessionDraw> {
    (
        status(),
        prop::bool::weighted(0.1),
        prop_oneof![Just(None), Just(Some(0)), Just(Some(1))],
    )
        .prop_map(|(status, auth_hold, pollers)| SessionDraw {
            status,
            auth_hold,
            pollers,
        })
}

fn guard_step() -> impl Strategy<Value = GuardStep> {
    let result = prop_oneof![
        4 => Just(ResultKind::Restarted),
        1 => Just(ResultKind::Refused),
        2 => Just(ResultKind::Failed),
        1 => Just(ResultKind::RateLimited),
        1 => Just(ResultKind::Lost),
    ];
    (
        0i64..=90,
        [session_draw(), session_draw(), session_draw()],
        prop::option::weighted(0.3, status()),
        0i64..=3,
        result,
        0i64..=30,
        prop::option::weighted(0.3, (0usize..3, 0i64..=90)),
    )
        .prop_map(
            |(dt, sessions, recheck_status, recheck_after, result, result_after, unsolicited)| {
                GuardStep {
                    dt,
                    sessions,
                    recheck_status,
                    recheck_after,
                    result,
                    result_after,
                    unsolicited,
                }
            },
        )
}

fn observe(index: usize, draw: &SessionDraw, opt_in: bool) -> SessionObservation {
    let (id, title, group) = [
        ("c1", "conductor-a", "conductor"),
        ("w1", "mail", "watchers"),
        ("p1", "worker", "work"),
    ][index];
    SessionObservation {
        id: id.into(),
        title: title.into(),
        group: Some(group.into()),
        is_conductor: false,
        opt_in: index == 2 && opt_in,
        status: SessionStatus::parse(draw.status),
        auth_hold: draw.auth_hold.then(|| AuthHold {
            reason: "auth_death".into(),
        }),
        channels: if index == 0 {
            vec!["plugin:telegram@claude-plugins-official".into()]
        } else {
            vec![]
        },
        pollers: draw.pollers,
        last_output: None,
    }
}

/// A restart decided: when, which session, why, and the fresh observation it was based on.
#[derive(Debug, Clone)]
struct Restart {
    at: i64,
    session: String,
    trigger: Trigger,
    fresh: SessionObservation,
    /// Its result said it failed (a failed poller restart does not start the poller dedup).
    failed: bool,
}

/// The simulated caller of the restart guard: re-checks read the step's listing (with its
/// re-check status), restarts answer the step's result.
struct GuardCaller<'a> {
    step: &'a GuardStep,
    listing: &'a [SessionObservation],
    persist: bool,
    now: i64,
    /// The observation of the last re-check fed.
    fresh: Option<SessionObservation>,
    decisions: &'a mut Vec<(i64, GuardDecision)>,
    restarts: &'a mut Vec<Restart>,
}

impl GuardCaller<'_> {
    fn recheck_of(&self, session: &str) -> SessionObservation {
        let mut fresh = self
            .listing
            .iter()
            .find(|s| s.id == session)
            .cloned()
            .expect("listed");
        if let Some(status) = self.step.recheck_status {
            fresh.status = SessionStatus::parse(status);
        }
        fresh
    }
}

impl Perform<RestartGuardState> for GuardCaller<'_> {
    type Error = Infallible;

    fn decided(
        &mut self,
        now: i64,
        decision: &GuardDecision,
        _: Option<&GuardAction>,
    ) -> Result<(), Infallible> {
        self.decisions.push((now, decision.clone()));
        Ok(())
    }

    fn perform(
        &mut self,
        state: &RestartGuardState,
        action: &GuardAction,
        now: i64,
    ) -> Result<Option<(i64, GuardEvent)>, Infallible> {
        let event = match action {
            GuardAction::Escalate { .. } => return Ok(None),
            GuardAction::Recheck { session, .. } => {
                let fresh = self.recheck_of(session);
                self.fresh = Some(fresh.clone());
                self.now = now + self.step.recheck_after;
                GuardEvent::Recheck(fresh)
            }
            GuardAction::Restart {
                session, trigger, ..
            } => {
                self.restarts.push(Restart {
                    at: now,
                    session: session.clone(),
                    trigger: *trigger,
                    fresh: self.fresh.clone().expect("a restart follows a re-check"),
                    failed: matches!(self.step.result, ResultKind::Failed),
                });
                let reply = match self.step.result {
                    ResultKind::Restarted => RestartReply::Restarted { warning: None },
                    ResultKind::Refused => RestartReply::Refused {
                        reason: "fresh".into(),
                    },
                    ResultKind::Failed => RestartReply::Failed {
                        error: "rc=1".into(),
                    },
                    ResultKind::RateLimited => RestartReply::Failed {
                        error: "HTTP 429".into(),
                    },
                    ResultKind::Lost => return Ok(None),
                };
                self.now = now + self.step.result_after;
                GuardEvent::RestartResult(RestartResult {
                    session: session.clone(),
                    reply,
                    last_output: None,
                })
            }
        };
        persisted(state, self.persist);
        Ok(Some((self.now, event)))
    }
}

fn drive_guard(
    config: &RestartGuardConfig,
    steps: &[GuardStep],
    opt_in: bool,
    persist: bool,
) -> (Vec<(i64, GuardDecision)>, Vec<Restart>) {
    let mut state = RestartGuardState::default();
    let mut decisions = Vec::new();
    let mut restarts = Vec::new();
    let mut now = 1_000_000i64;
    for step in steps {
        now += step.dt;
        let listing: Vec<SessionObservation> = step
            .sessions
            .iter()
            .enumerate()
            .map(|(i, draw)| observe(i, draw, opt_in))
            .collect();
        let mut caller = GuardCaller {
            step,
            listing: &listing,
            persist,
            now,
            fresh: None,
            decisions: &mut decisions,
            restarts: &mut restarts,
        };
        persisted(&state, persist);
        let Ok(_) = drive(
            &mut state,
            config,
            &GuardEvent::Tick(listing.clone()),
            now,
            &mut caller,
        );
        if let Some((index, after)) = step.unsolicited {
            let fresh = caller.recheck_of(&listing[index].id);
            caller.fresh = Some(fresh.clone());
            caller.now += after;
            let at = caller.now;
            persisted(&state, persist);
            let Ok(_) = drive(
                &mut state,
                config,
                &GuardEvent::Recheck(fresh),
                at,
                &mut caller,
            );
        }
        now = caller.now;
    }
    (decisions, restarts)
}

fn undry_guard((now, mut decision): (i64, GuardDecision)) -> (i64, GuardDecision) {
    if let Some(GuardAction::Restart { dry_run, .. } | GuardAction::Escalate { dry_run, .. }) =
        decision.action.as_mut()
    {
        *dry_run = false;
    }
    (now, decision)
}

proptest! {
    #![proptest_config(proptest_config())]

    #[test]
    fn restart_guard_invariants(steps in prop::collection::vec(guard_step(), 1..40), opt_in in any::<bool>()) {
        let config = RestartGuardConfig::default();
        let (decisions, restarts) = drive_guard(&config, &steps, opt_in, false);
        let window = i64::from(config.window);
        let mut by_session: BTreeMap<&str, Vec<i64>> = BTreeMap::new();
        for (index, restart) in restarts.iter().enumerate() {
            // Never more than the per-session limit in any window.
            let times = by_session.entry(restart.session.as_str()).or_default();
            times.push(restart.at);
            let in_window = times.iter().filter(|&&t| restart.at - t < window).count();
            prop_assert!(in_window <= config.per_session_limit as usize, "{} restarts of {} within {} s", in_window, restart.session, window);
            // Never two restarts closer than the global spacing.
            if let Some(previous) = index.checked_sub(1).map(|i| &restarts[i]) {
                prop_assert!(restart.at - previous.at >= i64::from(config.global_spacing),
                    "restarts at {} and {}", previous.at, restart.at);
            }
            // A stopped or auth-held session is never restarted; only a real trigger restarts.
            prop_assert!(restart.fresh.status != SessionStatus::Stopped);
            prop_assert!(restart.fresh.auth_hold.is_none());
            prop_assert!(restart.fresh.critical_because().is_some());
            match restart.trigger {
                Trigger::Error => prop_assert_eq!(&restart.fresh.status, &SessionStatus::Error),
                Trigger::PollerMissing => {
                    prop_assert!(restart.fresh.status.is_alive() && restart.fresh.pollers == Some(0));
                    let previous_poller = restarts[..index]
                        .iter()
                        .rev()
                        .find(|r| r.session == restart.session && r.trigger == Trigger::PollerMissing && !r.failed);
                    if let Some(previous) = previous_poller {
                        prop_assert!(restart.at - previous.at >= i64::from(config.poller_dedup));
                    }
                }
            }
        }
        for (_, decision) in &decisions {
            prop_assert!(!decision.reason.is_empty());
            if decision.name == GuardDecisionName::Restart {
                let restarts = matches!(decision.action, Some(GuardAction::Restart { .. }));
                prop_assert!(restarts, "a restart decision carries a restart action");
            }
        }

        let dry = RestartGuardConfig { dry_run: true, ..config.clone() };
        let (dry_decisions, _) = drive_guard(&dry, &steps, opt_in, false);
        let strip = |d: &[(i64, GuardDecision)]| -> Vec<(i64, GuardDecision)> { d.iter().cloned().map(undry_guard).collect() };
        prop_assert_eq!(strip(&decisions), strip(&dry_decisions));
        prop_assert_eq!(&decisions, &drive_guard(&config, &steps, opt_in, true).0);
    }
}

// ==================================================================================================
// Waiting patrol

#[derive(Debug, Clone)]
enum PaneDraw {
    Same,
    New(u8),
    Unreadable,
}

#[derive(Debug, Clone)]
struct PatrolSessionDraw {
    present: bool,
    waiting: bool,
    pane: PaneDraw,
}

#[derive(Debug, Clone)]
struct PatrolStep {
    dt: i64,
    listing_ok: bool,
    sessions: [PatrolSessionDraw; 3],
}

fn patrol_step() -> impl Strategy<Value = PatrolStep> {
    let pane = prop_oneof![7 => Just(PaneDraw::Same), 2 => (0u8..3).prop_map(PaneDraw::New), 1 => Just(PaneDraw::Unreadable)];
    let session = (prop::bool::weighted(0.9), prop::bool::weighted(0.85), pane).prop_map(
        |(present, waiting, pane)| PatrolSessionDraw {
            present,
            waiting,
            pane,
        },
    );
    (
        1i64..=400,
        prop::bool::weighted(0.9),
        [session.clone(), session.clone(), session],
    )
        .prop_map(|(dt, listing_ok, sessions)| PatrolStep {
            dt,
            listing_ok,
            sessions,
        })
}

/// One tick of the patrol: when, the listing fed (`None`: unavailable), and the decisions.
type PatrolTick = (i64, Option<Vec<PatrolObservation>>, Vec<PatrolDecision>);

/// The simulated caller of the waiting patrol: nudges are sent, nothing comes back.
struct PatrolCaller(Vec<PatrolDecision>);

impl Perform<WaitingPatrolState> for PatrolCaller {
    type Error = Infallible;

    fn decided(
        &mut self,
        _: i64,
        decision: &DecisionOf<WaitingPatrolState>,
        _: Option<&PatrolAction>,
    ) -> Result<(), Infallible> {
        self.0.push(decision.clone());
        Ok(())
    }

    fn perform(
        &mut self,
        _: &WaitingPatrolState,
        _: &PatrolAction,
        _: i64,
    ) -> Result<Option<(i64, PatrolEvent)>, Infallible> {
        Ok(None)
    }
}

fn drive_patrol(
    config: &WaitingPatrolConfig,
    steps: &[PatrolStep],
    persist: bool,
) -> Vec<PatrolTick> {
    let mut state = WaitingPatrolState::default();
    let mut panes = [0u8; 3];
    let mut now = 1_000_000i64;
    let mut log = Vec::new();
    for step in steps {
        now += step.dt;
        let listing = step.listing_ok.then(|| {
            step.sessions
                .iter()
                .enumerate()
                .filter(|(_, draw)| draw.present)
                .map(|(i, draw)| {
                    let pane_hash = match draw.pane {
                        PaneDraw::Same => Some(panes[i]),
                        PaneDraw::New(n) => {
                            panes[i] = n;
                            Some(n)
                        }
                        PaneDraw::Unreadable => None,
                    };
                    PatrolObservation {
                        id: format!("k{i}"),
                        parent_session_id: (i != 2).then(|| "c1".to_owned()),
                        status: SessionStatus::parse(Some(if draw.waiting {
                            "waiting"
                        } else {
                            "running"
                        })),
                        pane_hash: pane_hash.map(|h| format!("hash-{h}")),
                    }
                })
                .collect::<Vec<_>>()
        });
        let event = match &listing {
            Some(list) => PatrolEvent::Tick(list.clone()),
            None => PatrolEvent::ListingUnavailable,
        };
        persisted(&state, persist);
        let mut caller = PatrolCaller(Vec::new());
        let Ok(_) = drive(&mut state, config, &event, now, &mut caller);
        log.push((now, listing, caller.0));
    }
    log
}

proptest! {
    #![proptest_config(proptest_config())]

    #[test]
    fn waiting_patrol_invariants(steps in prop::collection::vec(patrol_step(), 1..40)) {
        let config = WaitingPatrolConfig::default();
        let log = drive_patrol(&config, &steps, false);
        // Reference model per session: (hash, unchanged since, last nudge), from observations only.
        let mut model: BTreeMap<String, (String, i64, Option<i64>)> = BTreeMap::new();
        for (now, listing, decisions) in &log {
            let Some(listing) = listing else { continue };
            let mut nudged: Vec<&str> = decisions
                .iter()
                .filter(|d| d.name == PatrolDecisionName::Nudge)
                .filter_map(|d| d.session.as_deref())
                .collect();
            for obs in listing {
                let watched = obs.parent_session_id.is_some() && obs.status == SessionStatus::Waiting;
                if !watched {
                    model.remove(&obs.id);
                    prop_assert!(!nudged.contains(&obs.id.as_str()), "nudged an unwatched session");
                    continue;
                }
                let Some(hash) = &obs.pane_hash else {
                    prop_assert!(!nudged.contains(&obs.id.as_str()), "nudged without a pane");
                    continue;
                };
                let entry = model.entry(obs.id.clone()).or_insert_with(|| (hash.clone(), *now, None));
                if &entry.0 != hash {
                    *entry = (hash.clone(), *now, entry.2);
                }
                if let Some(position) = nudged.iter().position(|id| *id == obs.id) {
                    nudged.remove(position);
                    prop_assert!(now - entry.1 > i64::from(config.threshold), "nudge after only {} s unchanged", now - entry.1);
                    if let Some(last) = entry.2 {
                        prop_assert!(now - last >= i64::from(config.nudge_dedup), "nudges {} s apart", now - last);
                    }
                    entry.2 = Some(*now);
                }
            }
            model.retain(|id, _| listing.iter().any(|o| &o.id == id));
            prop_assert!(nudged.is_empty(), "nudged a session not in the listing: {:?}", nudged);
            for decision in decisions {
                if let Some(PatrolAction::Nudge { message, no_wait, .. }) = &decision.action {
                    prop_assert_eq!(message.as_str(), "report status?");
                    prop_assert!(*no_wait);
                }
            }
        }
        let dry = WaitingPatrolConfig { dry_run: true, ..config.clone() };
        let names = |log: &[PatrolTick]| -> Vec<(PatrolDecisionName, String)> {
            log.iter().flat_map(|(_, _, d)| d.iter().map(|d| (d.name, d.reason.clone()))).collect()
        };
        prop_assert_eq!(names(&log), names(&drive_patrol(&dry, &steps, false)));
        prop_assert_eq!(&log, &drive_patrol(&config, &steps, true));
    }
}

// ==================================================================================================
// Never panic, whatever the times

fn any_time() -> impl Strategy<Value = i64> {
    prop_oneof![
        Just(i64::MIN),
        Just(i64::MAX),
        Just(0i64),
        Just(-1i64),
        any::<i64>(),
        0i64..5000
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn extreme_and_backward_times_never_panic(
        times in prop::collection::vec((any_time(), any_time(), 0u8..6), 1..30),
        tiny_config in any::<bool>(),
    ) {
        let loop_config = if tiny_config {
            LoopRecoveryConfig { max_report_age: u32::MAX, min_probe_gap: 0, cooldown: u32::MAX, countdown: u32::MAX, report_window: u32::MAX, veto_limit: Some(0), ..LoopRecoveryConfig::default() }
        } else {
            LoopRecoveryConfig { router_url: Some("u".into()), model: Some("m".into()), ..LoopRecoveryConfig::default() }
        };
        let guard_config = if tiny_config {
            RestartGuardConfig { per_session_limit: 0, window: u32::MAX, global_spacing: u32::MAX, quiet_after_restart: u32::MAX, rate_limit_backoff: u32::MAX, poller_dedup: u32::MAX, failures_before_escalation: 0, dry_run: false }
        } else {
            RestartGuardConfig::default()
        };
        let patrol_config = WaitingPatrolConfig { threshold: if tiny_config { 0 } else { u32::MAX }, ..WaitingPatrolConfig::default() };
        let mut loop_state = LoopRecoveryState::default();
        let mut guard_state = RestartGuardState::default();
        let mut patrol_state = WaitingPatrolState::default();
        for (now, at, kind) in times {
            let event = match kind {
                0 | 1 => LoopEvent::Report(LoopReport::from_value(serde_json::json!({"suspected": 1, "at": at, "action": "none"})).expect("object")),
                2 => LoopEvent::RouterVerdict(RouterVerdict::Stuck(at % 2 == 0)),
                3 => LoopEvent::Outcome(ActionOutcome { ok: at % 2 == 0, detail: None }),
                4 => LoopEvent::ReportUnreadable(String::new()),
                _ => LoopEvent::RouterVerdict(RouterVerdict::from_content("```")),
            };
            let _ = loop_state.handle(&loop_config, &event, now);

            let session = SessionObservation {
                id: "c1".into(),
                title: "conductor-x".into(),
                status: SessionStatus::parse(Some(if at % 3 == 0 { "running" } else { "error" })),
                channels: vec!["plugin:telegram@x".into()],
                pollers: Some(0),
                last_output: (kind == 5).then(|| "429".to_owned()),
                ..SessionObservation::default()
            };
            // What agent-deck's `{"success":true,"skipped":true}` reads as, whatever its exit code.
            let reply = RestartReply::Refused { reason: "no reason given".into() };
            for event in [
                GuardEvent::Tick(vec![session.clone()]),
                GuardEvent::Recheck(session),
                GuardEvent::RestartResult(RestartResult { session: "c1".into(), reply, last_output: None }),
            ] {
                let _ = guard_state.handle(&guard_config, &event, now);
            }

            let child = PatrolObservation {
                id: "k1".into(),
                parent_session_id: Some("c1".into()),
                status: SessionStatus::Waiting,
                pane_hash: (kind != 4).then(|| format!("{}", at % 2)),
            };
            let _ = patrol_state.handle(&patrol_config, &PatrolEvent::Tick(vec![child]), now);
        }
    }
}
