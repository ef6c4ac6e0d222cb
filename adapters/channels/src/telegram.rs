//! Telegram Bot API `sendMessage`, plain text.

use crate::{ChannelError, Outcome, TelegramChannel};
use agentwatch_http::{Client, Settings, Target, head, percent_encode};
use alert_state::AlertEvent;
use serde_json::{Value, json};

/// Telegram's limit is 4096 characters; stay clear of it.
const TEXT_CHARS: usize = 4000;

pub(crate) fn deliver(
    channel: &TelegramChannel,
    event: &AlertEvent,
) -> Result<Outcome, ChannelError> {
    // Real tokens (`123456:ABC-def_…`) stay as they are; anything else is percent-encoded so it
    // cannot change the URL's shape.
    let token = percent_encode(&channel.token);
    let target = Target::new(channel.api_base.trim_end_matches('/'))
        .join_hidden(
            &format!("/bot{token}/sendMessage"),
            "/bot<redacted>/sendMessage",
        )
        .with_secret(&channel.token)
        .with_secret(&token);
    if channel.token.trim().is_empty() {
        return Err(ChannelError::Config(format!(
            "the Telegram channel to {} has no bot token",
            target.shown()
        )));
    }
    let body = json!({ "chat_id": channel.chat_id, "text": text(event) }).to_string();
    let answer = Client::new(Settings::new(channel.timeout))
        .post_json(&target, &[], &body)?
        .body;
    // The Bot API answers `{"ok": true, "result": …}` or `{"ok": false, "description": …}`.
    match serde_json::from_str::<Value>(&answer) {
        Ok(value) if value.get("ok") == Some(&Value::Bool(true)) => Ok(Outcome::Sent),
        Ok(value) => Err(ChannelError::Rejected {
            url: target.shown().to_owned(),
            message: target.scrub(&format!(
                "Telegram did not take the message: {}",
                value
                    .get("description")
                    .and_then(Value::as_str)
                    .map_or_else(|| head(&answer, 200), |d| head(d, 200))
            )),
        }),
        Err(_) => Err(ChannelError::Rejected {
            url: target.shown().to_owned(),
            message: target.scrub(&format!(
                "the answer is not the Bot API's JSON: {}",
                head(&answer, 200)
            )),
        }),
    }
}

/// The message: severity and transition, title, summary, the link, dedup key, source.
fn text(event: &AlertEvent) -> String {
    let text = format!(
        "[{}] {}: {}\n{}\n{}\ndedup key: {}\nsource: {}",
        event.severity.as_str().to_uppercase(),
        event.state,
        event.title,
        event.summary,
        event.link().map(|l| format!("{l}\n")).unwrap_or_default(),
        event.dedup_key,
        event.source,
    );
    head(&text, TEXT_CHARS)
}
