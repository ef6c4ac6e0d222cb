//! Webhooks: the event as JSON, a PagerDuty Events API v2 event, a Slack-compatible incoming
//! webhook's message, or an ntfy notification.

use crate::{ChannelError, Outcome, WebhookChannel, WebhookMode};
use agentwatch_http::{Client, Settings, Target, head};
use alert_state::{AlertEvent, EventState, Severity};
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
        WebhookMode::Json => json_body(event)?.to_string(),
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
        WebhookMode::Slack => slack_body(event).to_string(),
        WebhookMode::Ntfy => {
            let (root, topic) = ntfy_topic(&channel.url).ok_or_else(|| {
                ChannelError::Config(format!(
                    "the ntfy webhook {} names no topic (use https://ntfy.sh/TOPIC)",
                    target.shown()
                ))
            })?;
            target = Target::new(root);
            if let Some(key) = &channel.routing_key {
                target = target.with_secret(key);
            }
            ntfy_body(event, topic).to_string()
        }
    };
    let id = event.event_id();
    Client::new(Settings::new(channel.timeout)).post_json(
        &target,
        &[("Idempotency-Key", id.as_str())],
        &body,
    )?;
    Ok(Outcome::Sent)
}

/// The `json` mode's body: the event as it is, with its [`AlertEvent::event_id`].
fn json_body(event: &AlertEvent) -> Result<Value, ChannelError> {
    let mut body = serde_json::to_value(event)
        .map_err(|e| ChannelError::Config(format!("the event cannot be written as JSON: {e}")))?;
    body["event_id"] = Value::String(event.event_id());
    Ok(body)
}

/// How much of a summary the chat messages keep.
const MESSAGE_CHARS: usize = 3000;

/// `[SEVERITY] state`: the head of a chat message.
fn headline(event: &AlertEvent) -> String {
    format!(
        "[{}] {}",
        event.severity.as_str().to_uppercase(),
        event.state
    )
}

/// Slack's mrkdwn escapes: `&`, `<` and `>` only (Slack's "Escaping text").
fn slack_escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// A Slack-compatible incoming webhook body: `{"text": …}` (Slack, Mattermost, Rocket.Chat and
/// Discord's `/slack` endpoint all take it).
fn slack_body(event: &AlertEvent) -> Value {
    let mut text = format!(
        "*{}* {}\n{}\ndedup key: `{}` · source: {}",
        headline(event),
        slack_escape(&event.title),
        slack_escape(&head(&event.summary, MESSAGE_CHARS)),
        slack_escape(&event.dedup_key),
        slack_escape(&event.source),
    );
    if let Some(link) = event.link() {
        // Slack's link syntax `<url|label>`; `|` and `>` cannot be escaped inside it.
        text.push_str(&format!(
            "\n<{}|open the tree>",
            link.replace(['|', '>'], "")
        ));
    }
    json!({ "text": text })
}

/// `https://ntfy.sh/TOPIC` split into the server's root (`https://ntfy.sh/`) and the topic; `None`
/// when the URL's path ends in no topic.
fn ntfy_topic(url: &str) -> Option<(String, String)> {
    let url = url
        .split(['?', '#'])
        .next()
        .unwrap_or(url)
        .trim_end_matches('/');
    let (scheme, rest) = url.split_once("://")?;
    let (root, topic) = rest.rsplit_once('/')?;
    if topic.is_empty() {
        return None;
    }
    Some((format!("{scheme}://{root}/"), topic.to_owned()))
}

/// ntfy's JSON publish: `{topic, title, message, priority, tags}` (priority 5 critical, 4
/// warning, 3 a resolve; the tags are emoji shortcodes ntfy shows before the title: a
/// `blocked` event, agentwatch's hook refusing calls, `no_entry` at the alert's priority).
fn ntfy_body(event: &AlertEvent, topic: String) -> Value {
    let (priority, tag) = match (event.state, event.severity) {
        (EventState::Resolve, _) | (_, Severity::Info) => (3, "white_check_mark"),
        (EventState::Blocked, Severity::Warning) => (4, "no_entry"),
        (EventState::Blocked, Severity::Critical) => (5, "no_entry"),
        (_, Severity::Warning) => (4, "warning"),
        (_, Severity::Critical) => (5, "rotating_light"),
    };
    let mut body = json!({
        "topic": topic,
        "title": format!("{} {}", headline(event), event.title),
        "message": format!(
            "{}\ndedup key: {} · source: {}",
            head(&event.summary, MESSAGE_CHARS),
            event.dedup_key,
            event.source
        ),
        "priority": priority,
        "tags": [tag],
    });
    if let Some(link) = event.link() {
        body["click"] = Value::String(link.to_owned());
    }
    body
}

/// The Events API v2 body. Trigger, escalate and blocked are all `trigger`: PagerDuty keeps one
/// incident per `dedup_key` and takes a second trigger as an update (the new severity and
/// summary; it knows no other action to say agentwatch's hook refused calls). A resolve
/// carries no payload: PagerDuty ignores a payload on `resolve`.
fn pagerduty_body(event: &AlertEvent, routing_key: &str) -> Value {
    let action = match event.state {
        EventState::Trigger | EventState::Escalate | EventState::Blocked => "trigger",
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Each row: URL, the root posted to and the topic.
    #[test]
    fn ntfy_urls_split_into_root_and_topic() {
        let rows = [
            (
                "https://ntfy.sh/alerts",
                Some(("https://ntfy.sh/", "alerts")),
            ),
            (
                "https://ntfy.sh/alerts/",
                Some(("https://ntfy.sh/", "alerts")),
            ),
            (
                "http://127.0.0.1:8090/a_b?x=1",
                Some(("http://127.0.0.1:8090/", "a_b")),
            ),
            ("http://h/base/t", Some(("http://h/base/", "t"))),
            ("https://ntfy.sh", None),
            ("https://ntfy.sh/", None),
            ("not a url", None),
        ];
        for (url, expected) in rows {
            let got = ntfy_topic(url);
            let got = got.as_ref().map(|(r, t)| (r.as_str(), t.as_str()));
            assert_eq!(got, expected, "{url}");
        }
    }

    #[test]
    fn slack_text_escapes_only_what_slack_asks() {
        assert_eq!(slack_escape("a<b>&c*d"), "a&lt;b&gt;&amp;c*d");
    }
}
