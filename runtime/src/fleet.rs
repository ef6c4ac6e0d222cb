//! Alertmanager channels in the opencode tick: what each channel holds, posted every tick.
//!
//! Alertmanager resolves an alert whose `endsAt` passed, so an open alert must be posted again
//! every tick with its `endsAt` moved ahead. The router (alert-state) decides which events reach a
//! channel, as for every channel; this module remembers, per Alertmanager channel, the alerts it
//! holds (the event that last opened or escalated each) and the alerts to end (resolved, or
//! replaced by a new severity label), and each tick posts all of them in one request per peer:
//!
//! - a trigger, escalate or blocked event routed to the channel: held (an escalation moves the
//!   old severity's alert to the ending list: a new label set is a new alert to Alertmanager; a
//!   blocked event keeps the labels and adds the `blocked` annotation);
//! - a resolve routed to the channel: its held alert moves to the ending list with `endsAt = now`;
//! - a held alert the alert state no longer has open (a state set aside): ended at `now`;
//! - every held alert is re-asserted with `endsAt = now + ends_after`. A re-assertion is not a
//!   new notification: it is neither routed nor rate limited, and Alertmanager notifies only on
//!   new label sets;
//! - a post that fails (Alertmanager down) is a failed delivery with the reason; the ending list
//!   is kept and everything is posted again next tick, so nothing is lost and the tick never
//!   fails. An ending alert older than `ends_after` is dropped: its last `endsAt` has passed, so
//!   Alertmanager resolved it on its own.
//!
//! The held alerts are stored under [`ALERTMANAGER_STATE_KEY`] beside the alert state.

use crate::config::Config;
use crate::notify::{SendReport, alertmanager_channel};
use agentwatch_channels::alertmanager::{AmAlert, opened_at, post};
use agentwatch_channels::{AlertmanagerChannel, Outcome};
use alert_state::{AlertEvent, EventState, Severity};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// The store key of what the Alertmanager channels hold.
pub const ALERTMANAGER_STATE_KEY: &str = "alertmanager";

/// The channel type this module serves.
pub const ALERTMANAGER_TYPE: &str = "alertmanager";

/// What every Alertmanager channel holds, by channel name.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HeldAlerts {
    pub channels: BTreeMap<String, ChannelHeld>,
}

/// What one Alertmanager channel holds.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChannelHeld {
    /// Open alerts by dedup key: re-asserted every tick.
    pub open: BTreeMap<String, Held>,
    /// Alerts to end that no successful post has carried yet.
    #[serde(default)]
    pub ending: Vec<Held>,
}

/// One alert as the channel last posted (or must post) it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Held {
    /// The event that opened or escalated it: its labels and annotations.
    pub event: AlertEvent,
    pub starts_at: i64,
    /// When it ended (ending alerts only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<i64>,
}

impl Held {
    fn ended(self, at: i64) -> Self {
        Self {
            ended_at: Some(at),
            ..self
        }
    }
}

impl ChannelHeld {
    /// Folds this tick's events routed to the channel into what it holds. `open_keys`: the
    /// alerts open after the tick (a held alert not among them is ended).
    pub fn apply<'a>(
        &mut self,
        events: impl IntoIterator<Item = &'a AlertEvent>,
        open_keys: &BTreeSet<&str>,
        now: i64,
    ) {
        for event in events {
            let key = event.dedup_key.clone();
            match event.state {
                EventState::Trigger | EventState::Escalate | EventState::Blocked => {
                    let previous = self.open.remove(&key);
                    let starts_at = previous
                        .as_ref()
                        .map_or_else(|| opened_at(event, now), |p| p.starts_at);
                    if let Some(previous) = previous
                        && previous.event.severity != event.severity
                    {
                        self.ending.push(previous.ended(now));
                    }
                    self.open.insert(
                        key,
                        Held {
                            event: event.clone(),
                            starts_at,
                            ended_at: None,
                        },
                    );
                }
                EventState::Resolve => match self.open.remove(&key) {
                    Some(held) => self.ending.push(held.ended(now)),
                    // Nothing held (state lost): end the alert under either severity.
                    None => {
                        for severity in [Severity::Warning, Severity::Critical] {
                            self.ending.push(Held {
                                event: AlertEvent {
                                    severity,
                                    ..event.clone()
                                },
                                starts_at: opened_at(event, now),
                                ended_at: Some(now),
                            });
                        }
                    }
                },
            }
        }
        let stale: Vec<String> = self
            .open
            .keys()
            .filter(|k| !open_keys.contains(k.as_str()))
            .cloned()
            .collect();
        for key in stale {
            if let Some(held) = self.open.remove(&key) {
                self.ending.push(held.ended(now));
            }
        }
    }

    /// Drops ending alerts whose last `endsAt` has passed anyway (ended more than `ends_after`
    /// ago): Alertmanager resolved them on its own.
    pub fn prune(&mut self, channel: &AlertmanagerChannel, now: i64) {
        let keep = i64::try_from(channel.ends_after.as_secs()).unwrap_or(i64::MAX);
        self.ending
            .retain(|h| h.ended_at.is_none_or(|at| now.saturating_sub(at) <= keep));
    }

    /// The alerts to post at `now`: every open one until `now + ends_after`, every ending one
    /// ended at its time.
    #[must_use]
    pub fn alerts(&self, channel: &AlertmanagerChannel, now: i64) -> Vec<AmAlert> {
        let until = now.saturating_add(i64::try_from(channel.ends_after.as_secs()).unwrap_or(0));
        let ending = self.ending.iter().map(|h| {
            let at = h.ended_at.unwrap_or(now);
            AmAlert::open(channel, &h.event, h.starts_at, at).ended(at)
        });
        self.open
            .values()
            .map(|h| AmAlert::open(channel, &h.event, h.starts_at, until))
            .chain(ending)
            .collect()
    }
}

/// What one channel's post did this tick.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SyncReport {
    pub channel: String,
    /// `sent`, `failed`, `dry_run` or `disabled` (nothing posted).
    pub result: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Open alerts posted (re-asserted or new).
    pub open: usize,
    /// Alerts posted as ended.
    pub ending: usize,
}

impl SyncReport {
    /// The report of one event this channel carried in the post.
    #[must_use]
    pub fn send_report(&self) -> SendReport {
        SendReport::new(&self.channel, &self.result, self.message.clone())
    }
}

/// Whether any configured channel is an Alertmanager channel.
#[must_use]
pub fn configured(config: &Config) -> bool {
    config
        .channels
        .iter()
        .any(|c| c.channel_type == ALERTMANAGER_TYPE)
}

/// Fold the events the router delivered to each Alertmanager channel (`routed`: channel name,
/// event) into what it holds, end what the alert state no longer has open (`open_keys`), and
/// drop endings Alertmanager ended on its own. Channels no longer configured are forgotten.
///
/// A real tick folds before its transaction, which stores what the channels hold together
/// with the alert state: a transition and what Alertmanager must be told are one truth, and a
/// tick that ends (kill, full disk) before its post leaves the post to the next tick's (at
/// least once; each alert carries its event's `event_id`).
pub fn fold(
    config: &Config,
    held: &mut HeldAlerts,
    routed: &[(String, AlertEvent)],
    open_keys: &BTreeSet<&str>,
    now: i64,
) {
    held.channels.retain(|name, _| {
        config
            .channels
            .iter()
            .any(|c| &c.name == name && c.channel_type == ALERTMANAGER_TYPE)
    });
    for section in alertmanager_sections(config) {
        let channel = alertmanager_channel(section);
        let state = held.channels.entry(section.name.clone()).or_default();
        state.apply(
            routed
                .iter()
                .filter(|(name, _)| name == &section.name)
                .map(|(_, e)| e),
            open_keys,
            now,
        );
        state.prune(&channel, now);
    }
}

/// The configured Alertmanager channels.
fn alertmanager_sections(config: &Config) -> impl Iterator<Item = &crate::config::ChannelSection> {
    config
        .channels
        .iter()
        .filter(|c| c.channel_type == ALERTMANAGER_TYPE)
}

/// One tick of every Alertmanager channel: [`fold`] in `routed` (empty when the tick folded
/// them already), then post what each holds to every peer (unless `dry_run`, or the channel is
/// disabled). Never fails: a failed post is reported and kept for the next tick.
pub fn sync(
    config: &Config,
    held: &mut HeldAlerts,
    routed: &[(String, AlertEvent)],
    open_keys: &BTreeSet<&str>,
    now: i64,
    dry_run: bool,
) -> Vec<SyncReport> {
    fold(config, held, routed, open_keys, now);
    let mut reports = Vec::new();
    for section in alertmanager_sections(config) {
        let channel = alertmanager_channel(section);
        let state = held.channels.entry(section.name.clone()).or_default();
        let alerts = state.alerts(&channel, now);
        let report = |result: &str, message: Option<String>| SyncReport {
            channel: section.name.clone(),
            result: result.to_owned(),
            message,
            open: state.open.len(),
            ending: state.ending.len(),
        };
        let outcome = if alerts.is_empty() {
            continue;
        } else if dry_run {
            report("dry_run", None)
        } else if !section.enabled {
            report("disabled", Some("the channel is disabled".to_owned()))
        } else {
            match post(&channel, &alerts) {
                Ok(Outcome::Sent) => report("sent", None),
                Ok(Outcome::Warning(w)) => report("warning", Some(w)),
                Err(e) => report("failed", Some(e.to_string())),
            }
        };
        if outcome.result == "sent" {
            state.ending.clear();
        }
        reports.push(outcome);
    }
    reports
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const KEY: &str = "opencode-loop:ses_a";

    fn event(state: EventState, severity: Severity) -> AlertEvent {
        AlertEvent {
            dedup_key: KEY.into(),
            severity,
            state,
            title: "opencode loop: explore".into(),
            summary: "top".into(),
            details: json!({"root": "ses_a", "opened_at": 100}),
            source: "agentwatch@devbox".into(),
        }
    }

    fn channel() -> AlertmanagerChannel {
        AlertmanagerChannel::new(vec!["http://am:9093".into()], "devbox")
    }

    /// `(severity, starts_at, ends_at)` of each alert posted at `now`.
    fn posted(held: &ChannelHeld, now: i64) -> Vec<(String, i64, i64)> {
        held.alerts(&channel(), now)
            .into_iter()
            .map(|a| (a.labels["severity"].clone(), a.starts_at, a.ends_at))
            .collect()
    }

    fn s(text: &str) -> String {
        text.to_owned()
    }

    #[test]
    fn trigger_reassert_escalate_resolve() {
        let open: BTreeSet<&str> = [KEY].into();
        let mut held = ChannelHeld::default();
        held.apply([&event(EventState::Trigger, Severity::Warning)], &open, 100);
        assert_eq!(posted(&held, 100), [(s("warning"), 100, 1000)]);
        // A tick with no event re-asserts, moving endsAt.
        held.apply([], &open, 400);
        assert_eq!(posted(&held, 400), [(s("warning"), 100, 1300)]);
        held.apply(
            [&event(EventState::Escalate, Severity::Critical)],
            &open,
            700,
        );
        assert_eq!(
            posted(&held, 700),
            [(s("critical"), 100, 1600), (s("warning"), 100, 700)]
        );
        held.ending.clear(); // the post succeeded
        held.apply(
            [&event(EventState::Resolve, Severity::Info)],
            &BTreeSet::new(),
            1000,
        );
        assert_eq!(posted(&held, 1000), [(s("critical"), 100, 1000)]);
        assert!(held.open.is_empty());
    }

    /// A `blocked` event (agentwatch's hook refused calls) replaces the held event under the
    /// same labels: nothing ends, and every re-assertion carries the `blocked` annotation.
    #[test]
    fn a_blocked_event_is_held_as_the_same_alert_with_its_annotation() {
        let open: BTreeSet<&str> = [KEY].into();
        let mut held = ChannelHeld::default();
        held.apply([&event(EventState::Trigger, Severity::Warning)], &open, 100);
        let mut blocked = event(EventState::Blocked, Severity::Warning);
        blocked.details["blocked"] = json!({"blocked": 1, "call": "make", "of_call": 1});
        held.apply([&blocked], &open, 400);
        assert_eq!(posted(&held, 400), [(s("warning"), 100, 1300)]);
        held.apply([], &open, 700);
        let alerts = held.alerts(&channel(), 700);
        assert_eq!(
            alerts[0].annotations.get("blocked").map(String::as_str),
            Some("agentwatch blocked 1 call of `make`")
        );
    }

    #[test]
    fn a_held_alert_the_state_lost_is_ended_and_old_endings_are_dropped() {
        let mut held = ChannelHeld::default();
        held.apply(
            [&event(EventState::Trigger, Severity::Warning)],
            &[KEY].into(),
            100,
        );
        held.apply([], &BTreeSet::new(), 400);
        assert_eq!(posted(&held, 400), [(s("warning"), 100, 400)]);
        held.prune(&channel(), 400 + 900);
        assert_eq!(held.ending.len(), 1, "kept while its endsAt may be ahead");
        held.prune(&channel(), 400 + 901);
        assert!(held.ending.is_empty());
    }

    #[test]
    fn a_resolve_with_nothing_held_ends_both_severities() {
        let mut held = ChannelHeld::default();
        held.apply(
            [&event(EventState::Resolve, Severity::Info)],
            &BTreeSet::new(),
            500,
        );
        assert_eq!(
            posted(&held, 500),
            [(s("warning"), 100, 500), (s("critical"), 100, 500)]
        );
    }
}
