//! Prometheus Alertmanager: `POST {url}/api/v2/alerts` to every peer of a cluster.
//!
//! Alertmanager keys an alert on its label set, resolves an alert whose `endsAt` passed, and
//! deduplicates what several senders post. So an open alert is posted again every tick with an
//! `endsAt` a few intervals ahead ([`AlertmanagerChannel::ends_after`]); a resolve posts the
//! same labels with `endsAt = now`; a new severity is a new label set, so an escalation also ends
//! the alert under its old severity. Every peer gets every post (the cluster gossips silences
//! and notifications, not alerts), as Prometheus does.

use crate::{ChannelError, Outcome, iso8601};
use agentwatch_http::{Client, Settings, Target, head};
use alert_state::{AlertEvent, EventState, Severity};
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

/// The `alertname`, and the agentwatch job that raised it, for each kind of alert, by the prefix
/// of its dedup key. Routes and inhibition rules in `alertmanager.yml` match on these names.
pub const ALERT_KINDS: &[AlertKind] = &[
    AlertKind {
        prefix: alert_state::DEDUP_KEY_PREFIX,
        alertname: "AgentwatchSessionLoop",
        job: "watch",
    },
    AlertKind {
        prefix: "agent-deck:",
        alertname: "AgentwatchDeckEscalation",
        job: "deck",
    },
    AlertKind {
        prefix: "loop-recovery:",
        alertname: "AgentwatchLoopRecovery",
        job: "recover",
    },
];

/// The `alertname` of an alert whose dedup key has no known prefix.
pub const FALLBACK_ALERTNAME: &str = "Agentwatch";

/// A kind of alert (see [`ALERT_KINDS`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AlertKind {
    /// The dedup key's prefix (`opencode-loop:`).
    pub prefix: &'static str,
    /// The `alertname` label (`AgentwatchSessionLoop`).
    pub alertname: &'static str,
    /// The `job` label: the agentwatch job that raises it (`watch`).
    pub job: &'static str,
}

/// The kind of an alert by its dedup key.
#[must_use]
pub fn alert_kind(dedup_key: &str) -> AlertKind {
    ALERT_KINDS
        .iter()
        .copied()
        .find(|k| dedup_key.starts_with(k.prefix))
        .unwrap_or(AlertKind {
            prefix: "",
            alertname: FALLBACK_ALERTNAME,
            job: "agentwatch",
        })
}

/// How far ahead an open alert's `endsAt` is by default: three 5-minute ticks.
pub const DEFAULT_ENDS_AFTER: Duration = Duration::from_secs(900);

/// The alerts of one host to the peers of one Alertmanager cluster.
#[derive(Clone, PartialEq, Eq)]
pub struct AlertmanagerChannel {
    /// The peers' base URLs (`http://am1:9093`); each gets every post.
    pub urls: Vec<String>,
    /// Connect timeout and whole-request timeout, per peer.
    pub timeout: Duration,
    /// The `host` label: which machine the alert is about (the watchdog's host name).
    pub host: String,
    /// An open alert's `endsAt` is this long after the post: Alertmanager resolves it then
    /// unless it is posted again.
    pub ends_after: Duration,
}

impl AlertmanagerChannel {
    /// A channel to `urls` with [`crate::DEFAULT_HTTP_TIMEOUT`] and [`DEFAULT_ENDS_AFTER`].
    pub fn new(urls: Vec<String>, host: impl Into<String>) -> Self {
        Self {
            urls,
            timeout: crate::DEFAULT_HTTP_TIMEOUT,
            host: host.into(),
            ends_after: DEFAULT_ENDS_AFTER,
        }
    }
}

impl fmt::Debug for AlertmanagerChannel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let urls: Vec<String> = self
            .urls
            .iter()
            .map(|u| agentwatch_http::shown_url(u))
            .collect();
        f.debug_struct("AlertmanagerChannel")
            .field("urls", &urls)
            .field("timeout", &self.timeout)
            .field("host", &self.host)
            .field("ends_after", &self.ends_after)
            .finish()
    }
}

/// One alert as Alertmanager's API v2 takes it (`postableAlert`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AmAlert {
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    /// Unix seconds.
    pub starts_at: i64,
    /// Unix seconds; at or before Alertmanager's clock, the alert is resolved.
    pub ends_at: i64,
    /// The dashboard link ([`AlertEvent::link`]), when there is one.
    pub generator_url: Option<String>,
}

impl AmAlert {
    /// The alert that says `event` is open from `starts_at` until `ends_at`. The `severity`
    /// label is the event's, so call it with the event that last opened or escalated the alert
    /// (a resolve event's severity is `info`; see [`AmAlert::ended`]).
    #[must_use]
    pub fn open(
        channel: &AlertmanagerChannel,
        event: &AlertEvent,
        starts_at: i64,
        ends_at: i64,
    ) -> Self {
        let kind = alert_kind(&event.dedup_key);
        let root = subject(event, kind);
        let mut labels = BTreeMap::new();
        let mut label = |name: &str, value: &str| {
            if !value.is_empty() {
                labels.insert(name.to_owned(), value.to_owned());
            }
        };
        label("alertname", kind.alertname);
        label("dedup_key", &event.dedup_key);
        label("root", &root);
        label("severity", event.severity.as_str());
        label("host", &channel.host);
        label("job", kind.job);
        if let Some(k) = event.details.get("kind").and_then(Value::as_str) {
            label("kind", k);
        }
        let link = event.link().map(str::to_owned);
        let mut annotations = BTreeMap::new();
        annotations.insert("summary".to_owned(), event.title.clone());
        annotations.insert(
            "description".to_owned(),
            if event.summary.trim().is_empty() {
                event.title.clone()
            } else {
                head(&event.summary, 2000)
            },
        );
        if let Some(link) = &link {
            annotations.insert("dashboard".to_owned(), link.clone());
        }
        // The transition this alert tells (as every other channel sends it): a receiver of
        // posts repeated at least once knows them for the same event.
        annotations.insert("event_id".to_owned(), event.event_id());
        // What agentwatch's hook refused in the tree, on every post of an alert that has any
        // (the labels stay: a refusal is the same alert, told more).
        if let Some(refusals) = event.refusals() {
            annotations.insert("blocked".to_owned(), refusals.sentence());
        }
        Self {
            labels,
            annotations,
            starts_at,
            ends_at: ends_at.max(starts_at),
            generator_url: link,
        }
    }

    /// The same alert, ended at `at` (a resolve: Alertmanager shows it resolved from then).
    #[must_use]
    pub fn ended(mut self, at: i64) -> Self {
        self.ends_at = at.max(self.starts_at);
        self
    }

    /// The API's JSON.
    #[must_use]
    pub fn to_json(&self) -> Value {
        let mut alert = Map::new();
        alert.insert("labels".into(), json!(self.labels));
        alert.insert("annotations".into(), json!(self.annotations));
        alert.insert("startsAt".into(), Value::String(iso8601(self.starts_at)));
        alert.insert("endsAt".into(), Value::String(iso8601(self.ends_at)));
        if let Some(url) = &self.generator_url {
            alert.insert("generatorURL".into(), Value::String(url.clone()));
        }
        Value::Object(alert)
    }
}

/// What the alert is about: the detector's root session, the deck's session, else the dedup key
/// without its prefix.
fn subject(event: &AlertEvent, kind: AlertKind) -> String {
    ["root", "session"]
        .iter()
        .find_map(|k| event.details.get(*k).and_then(Value::as_str))
        .map_or_else(
            || {
                event
                    .dedup_key
                    .strip_prefix(kind.prefix)
                    .unwrap_or(&event.dedup_key)
                    .to_owned()
            },
            str::to_owned,
        )
}

/// The alerts that announce `event` at `now` on their own (no memory of earlier posts): a
/// trigger, escalate or blocked event is open from `starts_at` until `now + ends_after` (a
/// blocked one keeps its severity: the same labels, the `blocked` annotation); an escalation also
/// ends the alert under the warning label it replaces; a resolve ends both severities' alerts
/// (it cannot know which one Alertmanager holds).
#[must_use]
pub fn alerts_for_event(
    channel: &AlertmanagerChannel,
    event: &AlertEvent,
    starts_at: i64,
    now: i64,
) -> Vec<AmAlert> {
    let until = now.saturating_add(secs(channel.ends_after));
    let as_severity = |severity: Severity| AlertEvent {
        severity,
        ..event.clone()
    };
    match event.state {
        EventState::Trigger | EventState::Blocked => {
            vec![AmAlert::open(channel, event, starts_at, until)]
        }
        EventState::Escalate => {
            let mut alerts = vec![AmAlert::open(channel, event, starts_at, until)];
            if event.severity != Severity::Warning {
                alerts.push(
                    AmAlert::open(channel, &as_severity(Severity::Warning), starts_at, now)
                        .ended(now),
                );
            }
            alerts
        }
        EventState::Resolve => [Severity::Warning, Severity::Critical]
            .into_iter()
            .map(|s| AmAlert::open(channel, &as_severity(s), starts_at, now).ended(now))
            .collect(),
    }
}

/// Whole seconds of a duration, saturating.
fn secs(duration: Duration) -> i64 {
    i64::try_from(duration.as_secs()).unwrap_or(i64::MAX)
}

/// When the alert of `event` opened: `details.opened_at`, else `now`.
#[must_use]
pub fn opened_at(event: &AlertEvent, now: i64) -> i64 {
    event
        .details
        .get("opened_at")
        .and_then(Value::as_i64)
        .unwrap_or(now)
}

/// Posts `alerts` to every peer. Every peer is tried even when one fails.
///
/// # Errors
/// [`ChannelError::Config`] without a URL; otherwise the failure of the one peer that failed, or
/// [`ChannelError::Peers`] naming each failure when several did (already redacted).
pub fn post(channel: &AlertmanagerChannel, alerts: &[AmAlert]) -> Result<Outcome, ChannelError> {
    if channel.urls.is_empty() {
        return Err(ChannelError::Config(
            "the alertmanager channel has no urls".to_owned(),
        ));
    }
    let body = Value::Array(alerts.iter().map(AmAlert::to_json).collect()).to_string();
    let client = Client::new(Settings::new(channel.timeout));
    let mut failures: Vec<ChannelError> = Vec::new();
    for url in &channel.urls {
        let target = Target::new(url.trim_end_matches('/')).join("/api/v2/alerts");
        if let Err(e) = client.post_json(&target, &[], &body) {
            failures.push(e.into());
        }
    }
    let total = channel.urls.len();
    match failures.len() {
        0 => Ok(Outcome::Sent),
        1 if total == 1 => Err(failures.remove(0)),
        failed => Err(ChannelError::Peers {
            failed,
            total,
            errors: failures
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; "),
        }),
    }
}

/// Delivers one event on its own at `now` ([`alerts_for_event`], then [`post`]).
pub(crate) fn deliver(
    channel: &AlertmanagerChannel,
    event: &AlertEvent,
    now: i64,
) -> Result<Outcome, ChannelError> {
    post(
        channel,
        &alerts_for_event(channel, event, opened_at(event, now), now),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(key: &str, state: EventState, severity: Severity, details: Value) -> AlertEvent {
        AlertEvent {
            dedup_key: key.into(),
            severity,
            state,
            title: "opencode loop: explore".into(),
            summary: "ses_c: top: read money.py x22".into(),
            details,
            source: "agentwatch@devbox".into(),
        }
    }

    fn channel() -> AlertmanagerChannel {
        AlertmanagerChannel::new(vec!["http://am:9093".into()], "devbox")
    }

    /// Each row: dedup key, details (with the dashboard link), alertname, job, root label.
    #[test]
    fn labels_name_the_kind_job_and_subject() {
        let rows = [
            (
                "opencode-loop:ses_a",
                json!({"root": "ses_a", "opened_at": 10, "link": "http://devbox:8080/admin/trees/ses_a"}),
                "AgentwatchSessionLoop",
                "watch",
                "ses_a",
            ),
            (
                "agent-deck:restart-limit:s1",
                json!({"session": "s1", "kind": "restart-limit"}),
                "AgentwatchDeckEscalation",
                "deck",
                "s1",
            ),
            (
                "loop-recovery:flysim.service",
                json!(null),
                "AgentwatchLoopRecovery",
                "recover",
                "flysim.service",
            ),
            (
                "other:x",
                json!(null),
                FALLBACK_ALERTNAME,
                "agentwatch",
                "other:x",
            ),
        ];
        for (key, details, alertname, job, root) in rows {
            let e = event(key, EventState::Trigger, Severity::Warning, details);
            let alert = AmAlert::open(&channel(), &e, 10, 910);
            assert_eq!(alert.labels["alertname"], alertname, "{key}");
            assert_eq!(alert.labels["job"], job, "{key}");
            assert_eq!(alert.labels["root"], root, "{key}");
            assert_eq!(alert.labels["dedup_key"], key);
            assert_eq!(alert.labels["host"], "devbox");
            assert_eq!(alert.labels["severity"], "warning");
            let link = e.link();
            assert_eq!(alert.annotations.get("dashboard").map(String::as_str), link);
            assert_eq!(alert.generator_url.as_deref(), link);
        }
    }

    #[test]
    fn the_wire_shape_is_alertmanagers_postable_alert() {
        let e = event(
            "opencode-loop:ses_a",
            EventState::Trigger,
            Severity::Warning,
            json!({"root": "ses_a"}),
        );
        let value = AmAlert::open(&channel(), &e, 1_768_487_401, 1_768_488_301).to_json();
        assert_eq!(
            value,
            json!({
                "labels": {
                    "alertname": "AgentwatchSessionLoop", "dedup_key": "opencode-loop:ses_a",
                    "root": "ses_a", "severity": "warning", "host": "devbox", "job": "watch",
                },
                "annotations": {
                    "summary": "opencode loop: explore",
                    "description": "ses_c: top: read money.py x22",
                    "event_id": e.event_id(),
                },
                "startsAt": "2026-01-15T14:30:01+00:00",
                "endsAt": "2026-01-15T14:45:01+00:00",
            })
        );
    }

    #[test]
    fn an_escalation_ends_the_warning_and_a_resolve_ends_both() {
        let details = json!({"root": "ses_a", "opened_at": 100});
        let ch = channel();
        let escalate = event(
            "opencode-loop:ses_a",
            EventState::Escalate,
            Severity::Critical,
            details.clone(),
        );
        let alerts = alerts_for_event(&ch, &escalate, 100, 700);
        let shape: Vec<(&str, i64, i64)> = alerts
            .iter()
            .map(|a| (a.labels["severity"].as_str(), a.starts_at, a.ends_at))
            .collect();
        assert_eq!(shape, [("critical", 100, 1600), ("warning", 100, 700)]);

        let resolve = event(
            "opencode-loop:ses_a",
            EventState::Resolve,
            Severity::Info,
            details,
        );
        let shape: Vec<(String, i64)> = alerts_for_event(&ch, &resolve, 100, 1000)
            .iter()
            .map(|a| (a.labels["severity"].clone(), a.ends_at))
            .collect();
        assert_eq!(
            shape,
            [("warning".to_owned(), 1000), ("critical".to_owned(), 1000)]
        );
    }

    /// A `blocked` event (agentwatch's hook refused calls) is the same alert told more: the
    /// trigger's labels, open until `now + ends_after`, the refusals as the `blocked`
    /// annotation; every later post of an alert with refusals keeps it.
    #[test]
    fn a_blocked_event_keeps_the_labels_and_adds_an_annotation() {
        let details = json!({"root": "ses_a", "opened_at": 100,
            "blocked": {"blocked": 3, "call": "pytest -x", "of_call": 3, "stopped": true}});
        let key = "opencode-loop:ses_a";
        let ch = channel();
        let trigger = event(
            key,
            EventState::Trigger,
            Severity::Warning,
            json!({"root": "ses_a"}),
        );
        let blocked = event(key, EventState::Blocked, Severity::Warning, details);
        let [alert] = alerts_for_event(&ch, &blocked, 100, 700)
            .try_into()
            .unwrap();
        assert_eq!(alert.labels, AmAlert::open(&ch, &trigger, 100, 1600).labels);
        assert_eq!((alert.starts_at, alert.ends_at), (100, 1600));
        assert_eq!(
            alert.annotations.get("blocked").map(String::as_str),
            Some("agentwatch blocked 3 calls of `pytest -x`; the session stopped")
        );
        assert_eq!(
            AmAlert::open(&ch, &trigger, 100, 1600)
                .annotations
                .get("blocked"),
            None
        );
    }

    #[test]
    fn an_end_before_the_start_is_clamped_to_the_start() {
        let e = event(
            "opencode-loop:ses_a",
            EventState::Trigger,
            Severity::Warning,
            json!(null),
        );
        let alert = AmAlert::open(&channel(), &e, 500, 400);
        assert_eq!(alert.ends_at, 500);
        assert_eq!(alert.ended(10).ends_at, 500);
    }
}
