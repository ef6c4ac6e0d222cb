//! Notification routing: which configured channel gets an event, and why not when it does not.

use crate::config::{ChannelConfig, GroupBy};
use crate::event::{AlertEvent, EventState, Severity};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// Why a channel did not get an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Suppression {
    /// The channel is disabled.
    Disabled,
    /// A trigger or escalate below the channel's `min_severity`.
    BelowSeverity,
    /// The channel delivered a trigger or escalate less than `rate_limit_s` ago.
    RateLimited,
    /// A resolve for an alert this channel delivered no event of.
    NotDeliveredBefore,
    /// A trigger or escalate of an alert silenced by an operator (`alerts silence`).
    Silenced,
}

/// What happened to an event on one channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Delivery {
    /// The caller must send the event through this channel.
    Delivered,
    /// The caller must not send it; the reason says why.
    Suppressed(Suppression),
}

impl Delivery {
    /// Whether the caller sends the event through the channel.
    #[must_use]
    pub fn is_delivered(self) -> bool {
        self == Self::Delivered
    }
}

/// The routing decision for one event on one configured channel.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Route {
    /// The channel's name.
    pub channel: String,
    /// The channel's type, so the caller knows how to deliver.
    #[serde(rename = "type")]
    pub channel_type: String,
    /// The channel's rate-limit window ([`window_of`]), so a send records in the right one
    /// (left out of the JSON when `channel`, the seed's behaviour).
    #[serde(default, skip_serializing_if = "GroupBy::is_channel")]
    pub group_by: GroupBy,
    /// Delivered or suppressed (with the machine reason).
    pub delivery: Delivery,
    /// One sentence for the journal.
    pub reason: String,
}

/// The last trigger or escalate a channel delivered: the start of its rate-limit window.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LastAlarm {
    /// When (unix seconds).
    pub at: i64,
    /// Which alert.
    pub dedup_key: String,
}

/// What routing remembers between ticks.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouterState {
    /// Per rate-limit window ([`window_of`]: the channel's name, or `{name}\n{dedup key}` on a
    /// `group_by = "key"` channel), its last delivered trigger or escalate (resolves do not
    /// count; a key's window ends with its resolve).
    pub last_alarm: BTreeMap<String, LastAlarm>,
    /// Per open alert's dedup key, the channels that delivered at least one of its events; a
    /// resolve goes only to these. The entry is dropped when the alert resolves.
    pub delivered: BTreeMap<String, BTreeSet<String>>,
}

/// The rate-limit window an event of `dedup_key` falls in on `channel`: the channel's own
/// (`group_by = "channel"`), or one per key (`group_by = "key"`).
#[must_use]
pub fn window_of(channel: &str, group_by: GroupBy, dedup_key: &str) -> String {
    match group_by {
        GroupBy::Channel => channel.to_owned(),
        GroupBy::Key => format!("{channel}\n{dedup_key}"),
    }
}

/// The rate-limit window a `severity` event of `dedup_key` starts on `channel`: a critical
/// event has a window of its own beside [`window_of`]'s (`{window}\ncritical`), so an escalate
/// is never held behind the warning that opened its alert (Alertmanager, too, notifies again
/// when the severity changes); a warning or info event waits for both.
#[must_use]
pub fn alarm_window(
    channel: &str,
    group_by: GroupBy,
    dedup_key: &str,
    severity: Severity,
) -> String {
    let window = window_of(channel, group_by, dedup_key);
    if severity == Severity::Critical {
        format!("{window}\n{CRITICAL_WINDOW}")
    } else {
        window
    }
}

/// What ends a critical window's name (see [`alarm_window`]).
const CRITICAL_WINDOW: &str = "critical";

/// Both windows of `dedup_key` on `channel` (the usual one and the critical one).
#[must_use]
pub fn windows_of(channel: &str, group_by: GroupBy, dedup_key: &str) -> [String; 2] {
    [Severity::Warning, Severity::Critical].map(|s| alarm_window(channel, group_by, dedup_key, s))
}

/// Whether a stored window belongs to the channel called `name`.
#[must_use]
pub fn window_is_of(window: &str, name: &str) -> bool {
    window
        .strip_prefix(name)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('\n'))
}

impl RouterState {
    /// Routes `event` to every configured channel, in configuration order, and reserves the
    /// deliveries in `self` (so a later event of the same tick sees the channel's window).
    /// [`process_tick`](crate::process_tick) routes on a scratch copy: the stored state records a
    /// delivery only when the send succeeded ([`AlertState::record_sent`](crate::AlertState::record_sent)).
    ///
    /// Trigger and escalate events are delivered to a channel when it is enabled, the event's
    /// severity is at least its `min_severity`, and it delivered no trigger or escalate in the
    /// half-open window `(now - rate_limit_s, now]`: a channel that delivered at `t` is free
    /// again at exactly `t + rate_limit_s`. A critical event counts only critical deliveries
    /// (its own window, [`alarm_window`]): an escalate is never held behind a warning. A delivery stamped after `now` (the clock went back)
    /// counts as recent. Reasons are checked in this order: disabled, below severity, rate
    /// limited.
    ///
    /// A resolve bypasses the severity gate and the rate limit, and does not start a rate-limit
    /// window, but goes only to enabled channels that delivered an earlier event of the alert;
    /// afterwards the alert's delivery record is dropped.
    ///
    /// `silenced_until`: the alert is silenced before that time (unix seconds): its trigger or
    /// escalate goes to no channel (checked after disabled and below severity, before the rate
    /// limit; no window starts). Its resolve is routed as usual.
    #[must_use = "the routes say which channels must send the event"]
    pub fn route(
        &mut self,
        channels: &[ChannelConfig],
        event: &AlertEvent,
        silenced_until: Option<i64>,
        now: i64,
    ) -> Vec<Route> {
        let routes = channels
            .iter()
            .map(|channel| {
                let (mut delivery, mut reason) = self.decide(channel, event, now);
                let would_go = matches!(
                    delivery,
                    Delivery::Delivered | Delivery::Suppressed(Suppression::RateLimited)
                );
                if let Some(until) = silenced_until.filter(|until| *until > now)
                    && would_go
                    && event.state != EventState::Resolve
                {
                    delivery = Delivery::Suppressed(Suppression::Silenced);
                    reason = format!(
                        "{} is silenced until {}",
                        event.dedup_key,
                        crate::time::iso8601(until)
                    );
                }
                if event.state == EventState::Resolve && channel.group_by == GroupBy::Key {
                    for window in windows_of(&channel.name, channel.group_by, &event.dedup_key) {
                        self.last_alarm.remove(&window);
                    }
                }
                if delivery.is_delivered() && event.state != EventState::Resolve {
                    self.last_alarm.insert(
                        alarm_window(
                            &channel.name,
                            channel.group_by,
                            &event.dedup_key,
                            event.severity,
                        ),
                        LastAlarm {
                            at: now,
                            dedup_key: event.dedup_key.clone(),
                        },
                    );
                    self.delivered
                        .entry(event.dedup_key.clone())
                        .or_default()
                        .insert(channel.name.clone());
                }
                Route {
                    channel: channel.name.clone(),
                    channel_type: channel.channel_type.clone(),
                    group_by: channel.group_by,
                    delivery,
                    reason,
                }
            })
            .collect();
        if event.state == EventState::Resolve {
            self.delivered.remove(&event.dedup_key);
        }
        routes
    }

    /// Whether `channel` may take a trigger or escalate of `dedup_key` and `severity` at `now`:
    /// it delivered none in that key's windows ([`alarm_window`]: a critical event's own, a
    /// lower one's and the critical one) in the half-open interval `(now - rate_limit_s, now]`
    /// (one stamped after `now`, the clock having gone back, counts as recent). A caller
    /// holding rate-limited events sends them once this is true.
    #[must_use]
    pub fn is_free(
        &self,
        channel: &ChannelConfig,
        dedup_key: &str,
        severity: Severity,
        now: i64,
    ) -> bool {
        self.blocking(channel, dedup_key, severity, now).is_none()
    }

    /// The delivery that holds a `severity` event of `dedup_key` back on `channel` at `now`,
    /// if one does.
    fn blocking(
        &self,
        channel: &ChannelConfig,
        dedup_key: &str,
        severity: Severity,
        now: i64,
    ) -> Option<&LastAlarm> {
        let tiers: &[Severity] = if severity == Severity::Critical {
            &[Severity::Critical]
        } else {
            &[Severity::Critical, Severity::Warning]
        };
        tiers
            .iter()
            .filter_map(|tier| {
                let window = alarm_window(&channel.name, channel.group_by, dedup_key, *tier);
                self.last_alarm.get(&window)
            })
            .find(|last| i128::from(now) - i128::from(last.at) < i128::from(channel.rate_limit_s))
    }

    /// Whether `channel` takes `event`, and why: a resolve follows the alert's earlier
    /// deliveries; a trigger or escalate must pass enabled, min_severity and the rate limit.
    fn decide(&self, channel: &ChannelConfig, event: &AlertEvent, now: i64) -> (Delivery, String) {
        if event.state == EventState::Resolve {
            return self.decide_resolve(channel, event);
        }
        let name = &channel.name;
        if !channel.enabled {
            return suppressed(Suppression::Disabled, format!("`{name}` is disabled"));
        }
        if event.severity < channel.min_severity {
            return suppressed(
                Suppression::BelowSeverity,
                format!(
                    "{} is below `{name}`'s min_severity {}",
                    event.severity, channel.min_severity
                ),
            );
        }
        if let Some(reason) = self.rate_limited(channel, event, now) {
            return suppressed(Suppression::RateLimited, reason);
        }
        let of = match channel.group_by {
            GroupBy::Channel => "",
            GroupBy::Key => " of this key",
        };
        (
            Delivery::Delivered,
            format!(
                "routed to `{name}`: {} >= min_severity {} and no trigger or escalate{of} in \
                 the last {} s",
                event.severity, channel.min_severity, channel.rate_limit_s
            ),
        )
    }

    /// A resolve goes to an enabled channel that delivered an earlier event of its alert,
    /// whatever its severity and the rate limit.
    fn decide_resolve(&self, channel: &ChannelConfig, event: &AlertEvent) -> (Delivery, String) {
        let name = &channel.name;
        let delivered_before = self
            .delivered
            .get(&event.dedup_key)
            .is_some_and(|channels| channels.contains(name));
        if !delivered_before {
            return suppressed(
                Suppression::NotDeliveredBefore,
                format!("`{name}` delivered no earlier event of this alert, so no resolve"),
            );
        }
        if !channel.enabled {
            return suppressed(
                Suppression::Disabled,
                format!("`{name}` is disabled (it had delivered this alert before)"),
            );
        }
        (
            Delivery::Delivered,
            format!(
                "resolve routed to `{name}`: it delivered an earlier event of this alert \
                 (resolves bypass min_severity and the rate limit)"
            ),
        )
    }

    /// Why `channel` may not take `event` yet, if its window had a trigger or escalate within
    /// the rate limit: what it was given, when, and when it is free again.
    fn rate_limited(
        &self,
        channel: &ChannelConfig,
        event: &AlertEvent,
        now: i64,
    ) -> Option<String> {
        let last = self.blocking(channel, &event.dedup_key, event.severity, now)?;
        let limit = i128::from(channel.rate_limit_s);
        let elapsed = i128::from(now) - i128::from(last.at);
        let free_at = i128::from(last.at) + limit;
        let when = if elapsed >= 0 {
            format!("{elapsed} s ago")
        } else {
            format!("{} s after now (the clock went back)", -elapsed)
        };
        Some(format!(
            "`{}` was given {} at {} ({when}); rate limit {limit} s, free again at {}",
            channel.name,
            last.dedup_key,
            crate::time::iso8601(last.at),
            i64::try_from(free_at).map_or_else(|_| free_at.to_string(), crate::time::iso8601)
        ))
    }
}

/// A channel left out of a delivery, and why.
fn suppressed(why: Suppression, reason: String) -> (Delivery, String) {
    (Delivery::Suppressed(why), reason)
}

#[cfg(test)]
mod silence_tests {
    use super::*;
    use crate::event::Severity;

    fn channel() -> ChannelConfig {
        ChannelConfig {
            name: "desk".into(),
            channel_type: "desktop".into(),
            enabled: true,
            min_severity: Severity::Warning,
            rate_limit_s: 300,
            group_by: GroupBy::Channel,
        }
    }

    fn event(state: EventState) -> AlertEvent {
        AlertEvent {
            dedup_key: "opencode-loop:ses_a".into(),
            severity: Severity::Warning,
            state,
            title: "t".into(),
            summary: "s".into(),
            details: serde_json::Value::Null,
            source: "agentwatch@test".into(),
        }
    }

    #[test]
    fn a_silenced_alert_goes_nowhere_until_the_silence_ends() {
        let channels = [channel()];
        for (until, now, want) in [
            (
                Some(2_000),
                1_000,
                Delivery::Suppressed(Suppression::Silenced),
            ),
            (Some(1_000), 1_000, Delivery::Delivered),
            (None, 1_000, Delivery::Delivered),
        ] {
            let mut router = RouterState::default();
            let routes = router.route(&channels, &event(EventState::Trigger), until, now);
            assert_eq!(routes[0].delivery, want, "{until:?} {now}");
            assert_eq!(router.last_alarm.is_empty(), !want.is_delivered());
        }
    }

    #[test]
    fn a_resolve_is_not_silenced() {
        let channels = [channel()];
        let mut router = RouterState::default();
        let _ = router.route(&channels, &event(EventState::Trigger), None, 1_000);
        let routes = router.route(&channels, &event(EventState::Resolve), Some(9_000), 1_100);
        assert_eq!(routes[0].delivery, Delivery::Delivered);
    }
}
