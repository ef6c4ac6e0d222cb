//! What the alert lifecycle keeps between ticks: the open alerts and the router's memory.

use crate::config::{AlertConfig, GroupBy};
use crate::event::{AlertEvent, EventState, Severity, is_loop_key};
use crate::refusal::Refusals;
use crate::router::{RouterState, alarm_window, window_is_of};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One alert of one root session, from trigger to resolve.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Alert {
    /// `opencode-loop:{root}`.
    pub dedup_key: String,
    /// The root session id.
    pub root: String,
    /// The agent named when the alert opened.
    pub agent: String,
    /// `opencode loop: {agent}`.
    pub title: String,
    /// `warning` or `critical` while open, `info` once resolved.
    pub severity: Severity,
    /// Flagged ticks since the alert opened, this one included (1 on trigger).
    pub flagged_ticks: u32,
    /// When the trigger fired (unix seconds).
    pub opened_at: i64,
    /// When the latest flagged judgement that counted towards `flagged_ticks` came; `None`:
    /// the trigger's (a state stored before this field). Judgements closer than
    /// `escalate_min_gap_s` to it are not counted, so escalation follows wall time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counted_at: Option<i64>,
    /// When the alert's latest event (trigger, escalate, resolve) fired.
    pub last_fired_at: i64,
    /// When it resolved; `None` while open.
    pub resolved_at: Option<i64>,
    /// The source that last saw its tree (a server URL, a database path); empty when unknown
    /// (a state stored before sources were recorded). Only a complete answer from this source
    /// may resolve the alert as gone.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub source: String,
    /// What agentwatch's hook refused in its tree, as last observed (every event of the alert
    /// carries it as `details.blocked`); a `blocked` event said what was new in it.
    #[serde(default, skip_serializing_if = "Refusals::is_empty")]
    pub refusals: Refusals,
}

impl Alert {
    /// A fresh open alert at `now`: flagged tick 1, its trigger fired now.
    pub(crate) fn opened(
        dedup_key: String,
        root: String,
        agent: String,
        title: String,
        severity: Severity,
        source: String,
        now: i64,
    ) -> Self {
        Self {
            dedup_key,
            root,
            agent,
            title,
            severity,
            flagged_ticks: 1,
            opened_at: now,
            counted_at: None,
            last_fired_at: now,
            resolved_at: None,
            source,
            refusals: Refusals::default(),
        }
    }

    /// Seconds since the latest judgement that counted (the trigger when none has since).
    #[must_use]
    pub fn counting_gap(&self, now: i64) -> i64 {
        now.saturating_sub(self.counted_at.unwrap_or(self.opened_at))
    }

    /// Whether a flagged judgement at `now` counts towards `escalate_after_ticks`: it comes at
    /// least `escalate_min_gap_s` after the last one counted, so a timer, `--follow` and manual
    /// runs escalate after the same wall time however often they judge.
    #[must_use]
    pub fn counts_at(&self, config: &AlertConfig, now: i64) -> bool {
        self.counting_gap(now) >= config.escalate_min_gap_s
    }
}

/// Everything the next tick needs: the open alerts and the router's memory. The caller stores it
/// between oneshot runs (it is plain serde data) and passes it back unchanged.
///
/// Resolved alerts leave the state: the [`Decision`](crate::Decision) that resolves one carries its final record
/// for the caller's history, and a later flag of the same root opens a fresh alert.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AlertState {
    /// Open alerts by dedup key; at most one per key by construction.
    pub open_alerts: BTreeMap<String, Alert>,
    /// Last deliveries per channel and per open alert.
    pub router: RouterState,
}

impl AlertState {
    /// No open alert, no delivery history.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Record that `event` reached `channel` at `at` (the caller's send succeeded). A trigger,
    /// escalate or blocked event starts the channel's rate-limit window and entitles the channel to the alert's
    /// resolve, but only while the alert is open; a resolve records nothing.
    pub fn record_sent(&mut self, event: &AlertEvent, channel: &str, group_by: GroupBy, at: i64) {
        if event.state == EventState::Resolve {
            return;
        }
        self.router.last_alarm.insert(
            alarm_window(channel, group_by, &event.dedup_key, event.severity),
            crate::router::LastAlarm {
                at,
                dedup_key: event.dedup_key.clone(),
            },
        );
        if self.open_alerts.contains_key(&event.dedup_key) {
            self.router
                .delivered
                .entry(event.dedup_key.clone())
                .or_default()
                .insert(channel.to_owned());
        }
    }

    /// When the alert lifecycle next has something to do by time alone: the moment the first
    /// enabled channel inside its rate-limit window is free again, so an event the limit held
    /// back (in the caller's outbox) can go out ([`crate::RouterState::is_free`] turns true).
    /// Strictly after `now`; `None` when no channel is
    /// rate limited. Every other transition (trigger, escalate, resolve, and a `repeat_interval_s`
    /// reminder, which needs the alert still flagged) needs a tick's observation, so the job's
    /// own cadence brings it; a silence holds nothing back (its events are not sent later).
    #[must_use]
    pub fn next_wakeup(&self, config: &AlertConfig, now: i64) -> Option<i64> {
        config
            .channels
            .iter()
            .filter(|c| c.enabled && c.rate_limit_s > 0)
            .flat_map(|c| {
                let limit = i64::try_from(c.rate_limit_s).unwrap_or(i64::MAX);
                self.router
                    .last_alarm
                    .iter()
                    .filter(|(window, _)| window_is_of(window, &c.name))
                    .map(move |(_, last)| last.at.saturating_add(limit))
            })
            .filter(|&free| free > now)
            .min()
    }

    /// The open alert of a root session, if any.
    #[must_use]
    pub fn open_alert_for_root(&self, root: &str) -> Option<&Alert> {
        self.open_alerts
            .values()
            .find(|a| a.root == root && is_loop_key(&a.dedup_key))
    }

    /// Take the open loop alert of a root session out of the state.
    pub(crate) fn take_loop_alert(&mut self, root: &str) -> Option<Alert> {
        let key = self.open_alert_for_root(root)?.dedup_key.clone();
        self.open_alerts.remove(&key)
    }
}
