//! From configured channels to delivered events: builds the channel adapters (secrets read from
//! the environment variables the config names) and sends one event, reporting the outcome.

use crate::config::{ChannelSection, Config, Env, parse_severity};
use crate::journal::{Line, Priority};
use agentwatch_channels::{
    AlertmanagerChannel, ChannelError, ChannelKind, DesktopChannel, LogChannel, Outcome,
    TelegramChannel, WebhookChannel, WebhookMode, deliver,
};
use agentwatch_store::{AlertRow, ChannelSetting, Store};
use alert_state::{AlertEvent, Decision, DecisionKind, Severity};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Apply the run-time settings stored by `agentwatch channels set` over the configured ones.
pub fn apply_settings(config: &mut Config, settings: &[ChannelSetting]) {
    for setting in settings {
        if let Some(ch) = config.channels.iter_mut().find(|c| c.name == setting.name)
            && parse_severity(&setting.min_severity).is_ok()
        {
            ch.enabled = setting.enabled;
            ch.min_severity = setting.min_severity.clone();
        }
    }
}

/// Load stored channel settings and apply them, and the alerts' silences (a store that cannot
/// be read changes nothing).
pub fn apply_stored_settings(config: &mut Config, store: &Store) {
    if let Ok(settings) = store.channel_settings() {
        apply_settings(config, &settings);
    }
    config.silences = alert_notes(store)
        .into_iter()
        .filter_map(|(key, note)| note.silenced_until.map(|until| (key, until)))
        .collect();
}

/// The state key of the operators' acks and silences (`agentwatch alerts ack|silence`).
pub const ALERT_NOTES_KEY: &str = "alert-notes";

/// What an operator said about one open alert.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AlertNote {
    /// The `opened_at` of the alert it is about: a later alert of the same key starts clean.
    pub opened_at: i64,
    /// When it was acknowledged.
    #[serde(default)]
    pub acked_at: Option<i64>,
    /// Its events go to no channel before this time (unix seconds).
    #[serde(default)]
    pub silenced_until: Option<i64>,
}

/// The acks and silences that still hold, by dedup key: those of an alert that is still open
/// and is the one noted. A resolve ends them. Unreadable notes are none.
pub fn alert_notes(store: &Store) -> BTreeMap<String, AlertNote> {
    let notes: BTreeMap<String, AlertNote> = store
        .load_state(ALERT_NOTES_KEY)
        .ok()
        .flatten()
        .and_then(|text| serde_json::from_str(&text).ok())
        .unwrap_or_default();
    let open = store.alerts(false).unwrap_or_default();
    notes
        .into_iter()
        .filter(|(key, note)| {
            open.iter()
                .any(|a| &a.dedup_key == key && a.opened_at == note.opened_at)
        })
        .collect()
}

/// The Alertmanager adapter of an `alertmanager` channel: its peers, the `host` label (default
/// the host name), `endsAt` ahead by `ends_after_s`.
pub fn alertmanager_channel(section: &ChannelSection) -> AlertmanagerChannel {
    AlertmanagerChannel {
        urls: section.urls.clone().unwrap_or_default(),
        timeout: crate::config::duration(section.timeout_s),
        host: section.host.clone().unwrap_or_else(crate::clock::host_name),
        ends_after: section.ends_after_s.map_or(
            agentwatch_channels::alertmanager::DEFAULT_ENDS_AFTER,
            std::time::Duration::from_secs,
        ),
    }
}

/// The adapter for one configured channel.
pub fn channel_kind(section: &ChannelSection, env: Env<'_>) -> Result<ChannelKind, String> {
    let timeout = crate::config::duration(section.timeout_s);
    match section.channel_type.as_str() {
        "desktop" => Ok(ChannelKind::Desktop(DesktopChannel {
            program: section
                .program
                .clone()
                .unwrap_or_else(|| "notify-send".to_owned()),
        })),
        "webhook" => {
            let mode = section
                .mode
                .as_deref()
                .and_then(WebhookMode::from_name)
                .unwrap_or(WebhookMode::Json);
            let routing_key = match (&mode, &section.routing_key_env) {
                (WebhookMode::PagerDuty, Some(var)) => Some(env(var).ok_or_else(|| {
                    format!(
                        "channel {}: routing key variable {var} is not set",
                        section.name
                    )
                })?),
                (WebhookMode::PagerDuty, None) => {
                    return Err(format!(
                        "channel {}: pagerduty mode needs routing_key_env",
                        section.name
                    ));
                }
                _ => None,
            };
            Ok(ChannelKind::Webhook(WebhookChannel {
                url: section.url.clone().unwrap_or_default(),
                mode,
                routing_key,
                timeout,
            }))
        }
        "log" => Ok(ChannelKind::Log(LogChannel {
            path: section.path.as_ref().map(std::path::PathBuf::from),
        })),
        "telegram" => {
            let var = section.token_env.clone().unwrap_or_default();
            let token = env(&var).ok_or_else(|| {
                format!("channel {}: token variable {var} is not set", section.name)
            })?;
            Ok(ChannelKind::Telegram(TelegramChannel {
                api_base: section
                    .api_base
                    .clone()
                    .unwrap_or_else(|| "https://api.telegram.org".to_owned()),
                token,
                chat_id: section.chat_id.clone().unwrap_or_default(),
                timeout,
            }))
        }
        "alertmanager" => Ok(ChannelKind::Alertmanager(alertmanager_channel(section))),
        other => Err(format!("channel {}: unknown type {other}", section.name)),
    }
}

/// An event as a journal line (`alert=TIME dedup=… state=… severity=… title=… summary=…`): an
/// error for a critical alert, a warning for a warning, info for a resolve.
pub fn alert_line(event: &AlertEvent, now: i64) -> Line {
    let priority = match event.severity {
        Severity::Critical => Priority::Err,
        Severity::Warning => Priority::Warning,
        Severity::Info => Priority::Info,
    };
    Line::new(priority, "alert", now)
        .field("dedup", &event.dedup_key)
        .field("state", event.state.as_str())
        .field("severity", event.severity.as_str())
        .field("title", &event.title)
        .field("summary", &event.summary)
        .field("source", &event.source)
        .field_opt("link", event.link())
}

/// What happened to one delivery.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct SendReport {
    pub channel: String,
    /// `sent`, `warning`, `failed` or `dry_run`.
    pub result: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// A failure after the event went out (no answer within the timeout): the channel may
    /// have taken it, so it may hold the alert and should hear its resolve.
    #[serde(skip)]
    pub in_doubt: bool,
}

impl SendReport {
    pub fn new(channel: &str, result: &str, message: Option<String>) -> Self {
        Self {
            channel: channel.to_owned(),
            result: result.to_owned(),
            message,
            in_doubt: false,
        }
    }
}

/// Deliver `event` through one built channel adapter and report it under `name` (an
/// Alertmanager channel stamps it with the system clock; the opencode tick re-asserts its open
/// alerts through [`crate::fleet`] at the tick's time instead).
pub fn deliver_report(name: &str, kind: &ChannelKind, event: &AlertEvent) -> SendReport {
    match deliver(kind, event) {
        Ok(Outcome::Sent) => SendReport::new(name, "sent", None),
        Ok(Outcome::Warning(w)) => SendReport::new(name, "warning", Some(w)),
        Err(e) => SendReport {
            // Sent, unanswered: the receiver may have taken it.
            in_doubt: matches!(e, ChannelError::Timeout { .. }),
            ..SendReport::new(name, "failed", Some(e.to_string()))
        },
    }
}

/// Send `event` at `now` to the channel named `name` (or only report, in a dry run). A `log`
/// channel without a `path` writes the event to the journal as one [`alert_line`].
pub fn send(
    config: &Config,
    name: &str,
    event: &AlertEvent,
    dry_run: bool,
    now: i64,
    env: Env<'_>,
) -> SendReport {
    let report = |result: &str, message: Option<String>| SendReport::new(name, result, message);
    let Some(section) = config.channels.iter().find(|c| c.name == name) else {
        return report("failed", Some(format!("channel {name} is not configured")));
    };
    if dry_run {
        return report("dry_run", None);
    }
    if section.channel_type == "log" && section.path.is_none() {
        alert_line(event, now).emit();
        return report("sent", None);
    }
    let mut sent = match channel_kind(section, env) {
        Ok(kind) => deliver_report(name, &kind, event),
        Err(e) => report("failed", Some(e)),
    };
    // What a channel answered goes to the journal, the outbox and the test-alert answer: free of
    // every secret the configuration names, not only the channel's own.
    sent.message = sent
        .message
        .map(|m| crate::config::scrub_secrets(config, env, &m));
    sent
}

/// A delivery's journal line for `job`: an error when it failed, a warning when it went out with
/// one, else info.
pub fn delivery_line(job: &str, now: i64, result: &str) -> Line {
    let priority = match result {
        "failed" => Priority::Err,
        "warning" => Priority::Warning,
        _ => Priority::Info,
    };
    Line::new(priority, job, now)
}

/// An alert decision's journal line for `job`: a critical alert opened, escalated or told of
/// agentwatch's refusals (`blocked`) is an error, a warning alert a warning, a resolve or
/// anything else info. An alert whose tree the hook refused calls of says so (`blocked=`).
pub fn decision_line(job: &str, now: i64, decision: &Decision) -> Line {
    let opened = matches!(
        decision.kind,
        DecisionKind::Trigger | DecisionKind::Escalate | DecisionKind::Blocked
    );
    let priority = match &decision.alert {
        Some(a) if opened && a.severity == Severity::Critical => Priority::Err,
        Some(_) if opened => Priority::Warning,
        _ if decision.kind == DecisionKind::OpinionIgnored => Priority::Warning,
        _ => Priority::Info,
    };
    let line = Line::new(priority, job, now)
        .field("dedup", &decision.dedup_key)
        .field("state", decision.kind.as_str());
    let line = match &decision.alert {
        Some(a) => line
            .field("severity", a.severity.as_str())
            .field("title", &a.title)
            .field("flagged_ticks", a.flagged_ticks)
            .field_opt(
                "blocked",
                (!a.refusals.is_empty()).then(|| a.refusals.sentence()),
            ),
        None => line,
    };
    line.field("reason", &decision.reason)
}

/// The `watchdog_alerts` rows of a tick's decisions (`agentwatch alerts`, the pages): each
/// alert as the decision left it.
pub fn alert_rows(decisions: &[Decision]) -> Vec<AlertRow> {
    decisions
        .iter()
        .filter_map(|d| d.alert.as_ref().map(|a| (d, a)))
        .map(|(d, a)| AlertRow {
            dedup_key: a.dedup_key.clone(),
            session_root: a.root.clone(),
            state: if a.resolved_at.is_some() {
                "resolved"
            } else {
                "open"
            }
            .to_owned(),
            severity: a.severity.as_str().to_owned(),
            title: a.title.clone(),
            // A judgement without an event keeps the stored summary (written empty).
            summary: d
                .dispatch
                .as_ref()
                .map(|x| x.event.summary.clone())
                .unwrap_or_default(),
            reason: d.reason.clone(),
            refusals: (!a.refusals.is_empty())
                .then(|| serde_json::to_value(&a.refusals).ok())
                .flatten(),
            flagged_ticks: i64::from(a.flagged_ticks),
            opened_at: a.opened_at,
            last_fired_at: Some(a.last_fired_at),
            resolved_at: a.resolved_at,
        })
        .collect()
}

#[cfg(test)]
mod notes_tests {
    use super::*;

    fn row(state: &str, opened_at: i64, resolved_at: Option<i64>) -> AlertRow {
        AlertRow {
            dedup_key: "opencode-loop:ses_a".into(),
            session_root: "ses_a".into(),
            state: state.into(),
            severity: "warning".into(),
            title: "t".into(),
            summary: "s".into(),
            flagged_ticks: 1,
            opened_at,
            last_fired_at: Some(opened_at),
            resolved_at,
            reason: String::new(),
            refusals: None,
        }
    }

    #[test]
    fn a_silence_holds_while_its_alert_is_open_and_a_resolve_ends_it() {
        let dir = std::env::temp_dir().join(format!("aw-notes-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let mut store = Store::open(&dir.join("aw.db")).unwrap();
        store.upsert_alerts(&[row("open", 100, None)]).unwrap();
        let note = AlertNote {
            opened_at: 100,
            acked_at: Some(110),
            silenced_until: Some(7_300),
        };
        let text = serde_json::to_string(&BTreeMap::from([("opencode-loop:ses_a", note)])).unwrap();
        store.save_state(ALERT_NOTES_KEY, &text, 110).unwrap();
        let mut config = Config::default();
        apply_stored_settings(&mut config, &store);
        assert_eq!(config.silences.get("opencode-loop:ses_a"), Some(&7_300));
        assert_eq!(config.alert_config("h").silences, config.silences);

        // Resolved, then opened again: the note was about the first alert.
        for rows in [row("resolved", 100, Some(200)), row("open", 300, None)] {
            store.upsert_alerts(&[rows]).unwrap();
            apply_stored_settings(&mut config, &store);
            assert!(config.silences.is_empty());
            assert!(alert_notes(&store).is_empty());
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
