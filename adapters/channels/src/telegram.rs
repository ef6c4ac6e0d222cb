//! Telegram Bot API `sendMessage`, plain text.

use crate::http::{Post, head, scrub, url_parts};
use crate::{ChannelError, Outcome, TelegramChannel};
use alert_state::AlertEvent;
use serde_json::{Value, json};

/// Telegram's limit is 4096 characters; stay clear of it.
const TEXT_CHARS: usize = 4000;

pub(crate) fn deliver(
    channel: &TelegramChannel,
    event: &AlertEvent,
) -> Result<Outcome, ChannelError> {
    let base = channel.api_base.trim_end_matches('/');
    let base_parts = url_parts(base);
    let token = encode_token(&channel.token);
    let url = format!("{base}/bot{token}/sendMessage");
    let shown_url = format!("{}/bot<redacted>/sendMessage", base_parts.shown);
    let mut secrets = base_parts.secrets;
    secrets.push(channel.token.clone());
    secrets.push(token);
    if channel.token.trim().is_empty() {
        return Err(ChannelError::Config(format!(
            "the Telegram channel to {shown_url} has no bot token"
        )));
    }
    let body = json!({ "chat_id": channel.chat_id, "text": text(event) }).to_string();
    let post = Post {
        url: &url,
        shown_url: scrub(&shown_url, &secrets),
        secrets,
        timeout: channel.timeout,
    };
    let answer = post.send_json(&body)?;
    // The Bot API answers `{"ok": true, "result": …}` or `{"ok": false, "description": …}`.
    match serde_json::from_str::<Value>(&answer) {
        Ok(value) if value.get("ok") == Some(&Value::Bool(true)) => Ok(Outcome::Sent),
        Ok(value) => Err(ChannelError::Rejected {
            url: post.shown_url.clone(),
            message: post.scrub(&format!(
                "Telegram did not take the message: {}",
                value
                    .get("description")
                    .and_then(Value::as_str)
                    .map_or_else(|| head(&answer, 200), |d| head(d, 200))
            )),
        }),
        Err(_) => Err(ChannelError::Rejected {
            url: post.shown_url.clone(),
            message: post.scrub(&format!(
                "the answer is not the Bot API's JSON: {}",
                head(&answer, 200)
            )),
        }),
    }
}

/// The message: severity and transition, title, summary, dedup key, source.
fn text(event: &AlertEvent) -> String {
    let text = format!(
        "[{}] {}: {}\n{}\n\ndedup key: {}\nsource: {}",
        event.severity.as_str().to_uppercase(),
        event.state,
        event.title,
        event.summary,
        event.dedup_key,
        event.source,
    );
    head(&text, TEXT_CHARS)
}

/// The token as a path segment: the characters of real tokens (`123456:ABC-def_…`) as they are,
/// anything else percent-encoded so it cannot change the URL's shape.
fn encode_token(token: &str) -> String {
    let mut out = String::with_capacity(token.len());
    for byte in token.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b'.' | b'~' | b':') {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_keep_their_usual_characters_and_encode_the_rest() {
        assert_eq!(encode_token("123456:AB-c_d"), "123456:AB-c_d");
        assert_eq!(encode_token("a/b?c d"), "a%2Fb%3Fc%20d");
    }
}
