//! Webhooks: the event as JSON, or a PagerDuty Events API v2 event.

use crate::{ChannelError, Outcome, WebhookChannel, WebhookMode};
use agentwatch_http::{Client, Settings, Target, head};
use alert_state::{AlertEvent, EventState};
use serde_json::{Map, Value, json};

/// PagerDuty's limit on `payload.summary`.
const PAGERDUTY_SUMMARY_CHARS: usize = 1024;

pub(crate) fn deliver(
    channel: &WebhookChannel,
    event: &AlertEvent,
) -> Result<Outcome, ChannelError> {
    let mut target = Target::new(channel.url.as_str());
    // A routing key is a secret whatever the mode (a key pasted into the URL's path is hidden
    // there too).
    if let Some(key) = &channel.routing_key {
        target = target.with_secret(key);
    }
    let body = match channel.mode {
        WebhookMode::Json => serde_json::to_string(event).map_err(|e| {
            ChannelError::Config(format!("the event cannot be written as JSON: {e}"))
        })?,
        WebhookMode::PagerDuty => {
            let routing_key = channel
                .routing_key
                .as_deref()
                .map(str::trim)
                .filter(|k| !k.is_empty())
                .ok_or_else(|| {
                    ChannelError::Config(format!(
                        "the PagerDuty webhook to {} has no routing_key",
                        target.shown()
                    ))
                })?;
            pagerduty_body(event, routing_key).to_string()
        }
    };
    Client::new(Settings::new(channel.timeout)).post_json(&target, &[], &body)?;
    Ok(Outcome::Sent)
}

/// The Events API v2 body. Trigger and escalate are both `trigger`: PagerDuty keeps one incident
/// per `dedup_key` and takes a second trigger as an update (the new severity and summary). A
/// resolve carries no payload: PagerDuty ignores a payload on `resolve`.
fn pagerduty_body(event: &AlertEvent, routing_key: &str) -> Value {
    let action = match event.state {
        EventState::Trigger | EventState::Escalate => "trigger",
        EventState::Resolve => "resolve",
    };
    let mut body = json!({
        "routing_key": routing_key,
        "event_action": action,
        "dedup_key": event.dedup_key,
    });
    if event.state != EventState::Resolve {
        // PagerDuty shows `summary` as the incident's title, so it leads with ours.
        let summary = if event.summary.trim().is_empty() {
            event.title.clone()
        } else {
            format!("{}: {}", event.title, event.summary)
        };
        let mut payload = Map::new();
        payload.insert(
            "summary".into(),
            Value::String(head(&summary, PAGERDUTY_SUMMARY_CHARS - 1)),
        );
        payload.insert("source".into(), Value::String(event.source.clone()));
        payload.insert(
            "severity".into(),
            Value::String(event.severity.as_str().to_owned()),
        );
        match &event.details {
            Value::Null => {}
            Value::Object(_) => {
                payload.insert("custom_details".into(), event.details.clone());
            }
            other => {
                payload.insert("custom_details".into(), json!({ "details": other }));
            }
        }
        body["payload"] = Value::Object(payload);
        if let Some(link) = event.link() {
            body["links"] = json!([{ "href": link, "text": "agentwatch: this tree's verdicts" }]);
        }
    }
    body
}
