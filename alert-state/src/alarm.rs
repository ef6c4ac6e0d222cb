//! Alarms raised by another watchdog (agent-deck's restart guard: a restart limit hit, a restart
//! that failed twice, an auth hold, a rate limit) through the same lifecycle, channel gates and
//! rate limits as the loop alerts, under the caller's dedup key (`deck:{session}`).
//!
//! | open alert | this tick | decision | event |
//! |---|---|---|---|
//! | none | raised | [`Trigger`](DecisionKind::Trigger) at the alarm's severity | `trigger` |
//! | warning | raised critical | [`Escalate`](DecisionKind::Escalate) | `escalate` |
//! | open | raised, not more severe | [`StillFlagged`](DecisionKind::StillFlagged) (`flagged_ticks += 1`) | none |
//! | open | raised, not more severe, `repeat_interval_s` after its last event | [`Repeat`](DecisionKind::Repeat) | `trigger` (a reminder) |
//! | open | cleared (the subject recovered, or is gone) | [`ResolveFixed`](DecisionKind::ResolveFixed), `resolved_because: recovered` | `resolve` |
//! | none | cleared | nothing | none |

use crate::config::AlertConfig;
use crate::event::{AlertEvent, EventState, Severity};
use crate::lifecycle::{
    Decision, DecisionKind, ResolveCause, TickError, TickOutcome, decision, event_for, resolve,
    route_events,
};
use crate::opinion::OpinionPlan;
use crate::state::{Alert, AlertState};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeSet;

/// One alarm raised this tick.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Alarm {
    /// The alert's dedup key (`deck:{session}`).
    pub dedup_key: String,
    /// What it is about (the session id); the alert's `root`.
    pub subject: String,
    /// What kind of trouble (`restart-limit`, ...); the alert's `agent`.
    pub kind: String,
    /// `warning` or `critical` (`info` is taken as warning).
    pub severity: Severity,
    pub title: String,
    /// One sentence for the operator (the event summary).
    pub summary: String,
    /// Context copied to the event's `details.alarm`.
    #[serde(default)]
    pub details: Value,
}

/// One tick of alarms.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AlarmTick {
    /// Unix seconds.
    pub now: i64,
    /// The alarms raised this tick, one per dedup key.
    #[serde(default)]
    pub raised: Vec<Alarm>,
    /// Dedup keys whose subject is fine again (or gone): their open alerts resolve.
    #[serde(default)]
    pub cleared: Vec<String>,
}

/// Runs one tick of alarms: raised ones open or escalate their alert, cleared ones resolve it;
/// the events are routed as [`crate::process_tick`] routes them. Pure.
///
/// # Errors
///
/// [`TickError`] when the config is invalid, a key is empty, raised twice, or both raised and
/// cleared. The caller's state is untouched.
pub fn process_alarms(
    state: &AlertState,
    config: &AlertConfig,
    tick: &AlarmTick,
) -> Result<TickOutcome, TickError> {
    config.validate()?;
    let mut raised_keys = BTreeSet::new();
    for (index, alarm) in tick.raised.iter().enumerate() {
        if alarm.dedup_key.is_empty() {
            return Err(TickError::EmptyRoot {
                list: "raised",
                index,
            });
        }
        if !raised_keys.insert(alarm.dedup_key.as_str()) {
            let first = tick
                .raised
                .iter()
                .position(|a| a.dedup_key == alarm.dedup_key)
                .unwrap_or(index);
            return Err(TickError::DuplicateRoot {
                root: alarm.dedup_key.clone(),
                index,
                first,
            });
        }
    }
    if let Some(key) = tick
        .cleared
        .iter()
        .find(|k| raised_keys.contains(k.as_str()))
    {
        return Err(TickError::RootSeenAndGone { root: key.clone() });
    }
    let now = tick.now;
    let mut next = state.clone();
    let mut decisions: Vec<Decision> = Vec::new();
    let mut pending: Vec<(usize, AlertEvent)> = Vec::new();
    let mut raised: Vec<&Alarm> = tick.raised.iter().collect();
    raised.sort_by(|a, b| a.dedup_key.cmp(&b.dedup_key));
    for alarm in raised {
        let (decision, event) = raise(&mut next, config, alarm, now);
        if let Some(event) = event {
            pending.push((decisions.len(), event));
        }
        decisions.push(decision);
    }
    let cleared: BTreeSet<&str> = tick.cleared.iter().map(String::as_str).collect();
    for key in cleared {
        if let Some(alert) = next.open_alerts.remove(key) {
            let (decision, event) = resolve(alert, config, now, ResolveCause::Recovered);
            pending.push((decisions.len(), event));
            decisions.push(decision);
        }
    }
    let decisions = route_events(&mut next, config, decisions, pending, now);
    Ok(TickOutcome {
        state: next,
        opinion_plan: OpinionPlan::default(),
        decisions,
        now,
    })
}

/// One raised alarm against the open alerts: opens a new alert, holds or reminds an open one at
/// the same or a lower severity, or escalates it.
fn raise(
    next: &mut AlertState,
    config: &AlertConfig,
    alarm: &Alarm,
    now: i64,
) -> (Decision, Option<AlertEvent>) {
    let severity = alarm.severity.max(Severity::Warning);
    let Some(alert) = next.open_alerts.get_mut(&alarm.dedup_key) else {
        return open_alarm(next, config, alarm, severity, now);
    };
    alert.flagged_ticks = alert.flagged_ticks.saturating_add(1);
    if severity <= alert.severity {
        return hold_or_remind(alert, config, alarm, now);
    }
    escalate(alert, config, alarm, severity, now)
}

/// What an event of `alarm` says of its alert in `details`.
fn alarm_details(alarm: &Alarm, alert: &Alert) -> serde_json::Value {
    serde_json::json!({
        "subject": alert.root,
        "kind": alarm.kind,
        "flagged_ticks": alert.flagged_ticks,
        "opened_at": alert.opened_at,
        "alarm": alarm.details,
    })
}

/// A first raise: a new open alert and its trigger event.
fn open_alarm(
    next: &mut AlertState,
    config: &AlertConfig,
    alarm: &Alarm,
    severity: Severity,
    now: i64,
) -> (Decision, Option<AlertEvent>) {
    let key = &alarm.dedup_key;
    let alert = Alert::opened(
        key.clone(),
        alarm.subject.clone(),
        alarm.kind.clone(),
        alarm.title.clone(),
        severity,
        String::new(),
        now,
    );
    let event = event_for(
        &alert,
        EventState::Trigger,
        alarm.summary.clone(),
        alarm_details(alarm, &alert),
        config,
    );
    let reason = format!("{} raised: opened {key} as {severity}", alarm.kind);
    let decided = decision(DecisionKind::Trigger, &alert, reason);
    next.open_alerts.insert(key.clone(), alert);
    (decided, Some(event))
}

/// A raise no more severe than the open alert: no event until a repeat interval has passed
/// since its last one, then a reminder, as a loop alert gets.
fn hold_or_remind(
    alert: &mut Alert,
    config: &AlertConfig,
    alarm: &Alarm,
    now: i64,
) -> (Decision, Option<AlertEvent>) {
    let key = &alarm.dedup_key;
    let every = config.repeat_interval_s;
    let since = now.saturating_sub(alert.last_fired_at);
    if every <= 0 || since < every {
        let reason = format!(
            "{} raised again while {key} is open as {}; no new event",
            alarm.kind, alert.severity
        );
        return (decision(DecisionKind::StillFlagged, alert, reason), None);
    }
    alert.last_fired_at = now;
    let mut details = alarm_details(alarm, alert);
    details["repeat_interval_s"] = serde_json::json!(every);
    let summary = format!(
        "{} (still raised: {} ticks since it opened)",
        alarm.summary, alert.flagged_ticks
    );
    let event = event_for(alert, EventState::Trigger, summary, details, config);
    let reason = format!(
        "{} raised again while {key} is open as {}; its last event was {since} s ago, at \
         least repeat_interval_s {every}: reminded",
        alarm.kind, alert.severity
    );
    (decision(DecisionKind::Repeat, alert, reason), Some(event))
}

/// A raise more severe than the open alert: the alert takes the new severity and kind.
fn escalate(
    alert: &mut Alert,
    config: &AlertConfig,
    alarm: &Alarm,
    severity: Severity,
    now: i64,
) -> (Decision, Option<AlertEvent>) {
    let was = alert.severity;
    alert.severity = severity;
    alert.last_fired_at = now;
    alert.agent.clone_from(&alarm.kind);
    let event = event_for(
        alert,
        EventState::Escalate,
        alarm.summary.clone(),
        alarm_details(alarm, alert),
        config,
    );
    let reason = format!(
        "{} raised: escalated {} from {was} to {severity}",
        alarm.kind, alarm.dedup_key
    );
    (decision(DecisionKind::Escalate, alert, reason), Some(event))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ChannelConfig;
    use crate::router::{Delivery, Suppression};

    const T: i64 = 1_796_000_000;

    fn config() -> AlertConfig {
        AlertConfig {
            channels: vec![ChannelConfig {
                name: "hook".into(),
                channel_type: "webhook".into(),
                enabled: true,
                min_severity: Severity::Warning,
                rate_limit_s: 300,
                group_by: crate::config::GroupBy::Channel,
            }],
            ..AlertConfig::default()
        }
    }

    fn alarm(session: &str, kind: &str, severity: Severity) -> Alarm {
        Alarm {
            dedup_key: format!("deck:{session}"),
            subject: session.into(),
            kind: kind.into(),
            severity,
            title: format!("agent-deck {kind}: {session}"),
            summary: format!("{session}: {kind}"),
            details: Value::Null,
        }
    }

    fn tick(now: i64, raised: Vec<Alarm>, cleared: &[&str]) -> AlarmTick {
        AlarmTick {
            now,
            raised,
            cleared: cleared.iter().map(|k| (*k).to_owned()).collect(),
        }
    }

    /// Runs `tick` and stores the state as if every delivered send succeeded.
    fn run(state: &mut AlertState, tick: &AlarmTick) -> Vec<Decision> {
        let outcome = process_alarms(state, &config(), tick).unwrap();
        *state = outcome.state_if_all_sent();
        outcome.decisions
    }

    #[test]
    fn an_escalation_opens_an_alert_once_and_resolves_when_the_session_recovers() {
        let mut state = AlertState::default();
        let first = run(
            &mut state,
            &tick(
                T,
                vec![alarm("c1", "restart-limit", Severity::Critical)],
                &[],
            ),
        );
        assert_eq!(first[0].kind, DecisionKind::Trigger);
        let event = &first[0].dispatch.as_ref().unwrap().event;
        assert_eq!(
            (event.dedup_key.as_str(), event.severity, event.state),
            ("deck:c1", Severity::Critical, EventState::Trigger)
        );
        assert!(state.open_alerts.contains_key("deck:c1"));

        // Raised again (a second kind of trouble, same session): no second event.
        let again = run(
            &mut state,
            &tick(
                T + 60,
                vec![alarm("c1", "restart-failed", Severity::Critical)],
                &[],
            ),
        );
        assert_eq!(again[0].kind, DecisionKind::StillFlagged);
        assert!(again[0].dispatch.is_none());

        // Recovered: resolved, to the channel that saw the trigger.
        let recovered = run(&mut state, &tick(T + 120, vec![], &["deck:c1"]));
        assert_eq!(recovered[0].kind, DecisionKind::ResolveFixed);
        let dispatch = recovered[0].dispatch.as_ref().unwrap();
        assert_eq!(dispatch.event.state, EventState::Resolve);
        assert_eq!(dispatch.event.details["resolved_because"], "recovered");
        assert!(dispatch.routes[0].delivery.is_delivered());
        assert!(state.open_alerts.is_empty());
        // Nothing open: clearing again does nothing.
        assert!(run(&mut state, &tick(T + 180, vec![], &["deck:c1"])).is_empty());
    }

    #[test]
    fn an_alarm_still_raised_is_repeated_every_repeat_interval() {
        let config = AlertConfig {
            repeat_interval_s: 3600,
            ..config()
        };
        let mut state = AlertState::default();
        let raised = |now| tick(now, vec![alarm("c1", "auth-hold", Severity::Critical)], &[]);
        for (now, want) in [
            (T, DecisionKind::Trigger),
            (T + 1800, DecisionKind::StillFlagged),
            (T + 3599, DecisionKind::StillFlagged),
            (T + 3600, DecisionKind::Repeat),
            (T + 3660, DecisionKind::StillFlagged),
            (T + 7200, DecisionKind::Repeat),
        ] {
            let outcome = process_alarms(&state, &config, &raised(now)).unwrap();
            state = outcome.state_if_all_sent();
            let decided = &outcome.decisions[0];
            assert_eq!(decided.kind, want, "at +{}: {}", now - T, decided.reason);
            let event = decided.dispatch.as_ref().map(|d| &d.event);
            assert_eq!(
                event.is_some(),
                want != DecisionKind::StillFlagged,
                "+{}",
                now - T
            );
            if want == DecisionKind::Repeat {
                let event = event.unwrap();
                assert_eq!(
                    (event.state, event.severity),
                    (EventState::Trigger, Severity::Critical)
                );
                assert!(event.summary.contains("still raised"), "{}", event.summary);
                assert!(decided.reason.contains("reminded"), "{}", decided.reason);
            }
        }
        // 0 turns reminders off.
        let quiet = AlertConfig {
            repeat_interval_s: 0,
            ..config
        };
        let outcome = process_alarms(&state, &quiet, &raised(T + 90_000)).unwrap();
        assert_eq!(outcome.decisions[0].kind, DecisionKind::StillFlagged);
    }

    #[test]
    fn a_warning_escalates_to_critical() {
        let mut state = AlertState::default();
        run(
            &mut state,
            &tick(T, vec![alarm("c1", "rate-limit", Severity::Warning)], &[]),
        );
        let up = run(
            &mut state,
            &tick(
                T + 400,
                vec![alarm("c1", "restart-limit", Severity::Critical)],
                &[],
            ),
        );
        assert_eq!(up[0].kind, DecisionKind::Escalate);
        assert_eq!(up[0].alert.as_ref().unwrap().severity, Severity::Critical);
    }

    #[test]
    fn the_channel_rate_limit_holds_across_sessions() {
        let mut state = AlertState::default();
        run(
            &mut state,
            &tick(
                T,
                vec![alarm("c1", "restart-limit", Severity::Critical)],
                &[],
            ),
        );
        let second = run(
            &mut state,
            &tick(
                T + 299,
                vec![alarm("c2", "auth-hold", Severity::Critical)],
                &[],
            ),
        );
        assert_eq!(second[0].kind, DecisionKind::Trigger);
        assert_eq!(
            second[0].dispatch.as_ref().unwrap().routes[0].delivery,
            Delivery::Suppressed(Suppression::RateLimited)
        );
        let third = run(
            &mut state,
            &tick(
                T + 300,
                vec![alarm("c3", "auth-hold", Severity::Critical)],
                &[],
            ),
        );
        assert!(
            third[0].dispatch.as_ref().unwrap().routes[0]
                .delivery
                .is_delivered()
        );
    }

    #[test]
    fn contradictory_ticks_are_errors() {
        let state = AlertState::default();
        let a = alarm("c1", "auth-hold", Severity::Critical);
        for bad in [
            tick(T, vec![a.clone(), a.clone()], &[]),
            tick(T, vec![a.clone()], &["deck:c1"]),
            tick(
                T,
                vec![Alarm {
                    dedup_key: String::new(),
                    ..a.clone()
                }],
                &[],
            ),
        ] {
            assert!(process_alarms(&state, &config(), &bad).is_err(), "{bad:?}");
        }
    }
}
