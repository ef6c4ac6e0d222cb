//! `[[channels]]`: where alerts go, and the checks each channel type needs.

use super::*;

/// One `[[channels]]` entry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ChannelSection {
    pub name: String,
    /// `desktop`, `webhook`, `log`, `telegram` or `alertmanager`.
    #[serde(rename = "type")]
    pub channel_type: String,
    pub enabled: bool,
    pub min_severity: String,
    pub rate_limit_s: u64,
    /// webhook: the URL.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// webhook: `json` (default), `pagerduty`, `slack` (a Slack-compatible incoming webhook) or
    /// `ntfy` (`url` is the topic's URL).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    /// alertmanager: the base URLs of the cluster's peers (`http://am1:9093`), each posted to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub urls: Option<Vec<String>>,
    /// alertmanager: an open alert's `endsAt` is this many seconds after each tick (default 900,
    /// three 5-minute ticks); Alertmanager resolves an alert no tick re-asserts by then.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ends_after_s: Option<u64>,
    /// alertmanager: the `host` label (default the host name).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// webhook in pagerduty mode: the variable holding the routing key.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub routing_key_env: Option<String>,
    /// desktop: the program (default `notify-send`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub program: Option<String>,
    /// log: a file to append JSON lines to (default standard error).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// telegram: the variable holding the bot token.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token_env: Option<String>,
    /// telegram: the chat id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chat_id: Option<String>,
    /// telegram: the API base (default `https://api.telegram.org`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_base: Option<String>,
    pub timeout_s: f64,
    /// What shares a rate-limit window and a notification: `channel` or `key`; unset: by type
    /// ([`ChannelSection::group_by`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub group_by: Option<GroupBy>,
    /// After this many failed deliveries in a row the channel is an alert
    /// (`blind:channel:NAME`) to the other channels (default 3; 0: never).
    pub fail_after: u32,
}

impl ChannelSection {
    /// The checks of one channel's keys, `at` naming it (`channels[2]`).
    pub(super) fn validate(&self, at: &str) -> Result<(), Error> {
        if !CHANNEL_TYPES.contains(&self.channel_type.as_str()) {
            return Err(config_err(format!(
                "{at}.type: must be one of {}",
                CHANNEL_TYPES.join(", ")
            )));
        }
        parse_severity(&self.min_severity).map_err(|_| {
            config_err(format!(
                "{at}.min_severity: must be info, warning or critical"
            ))
        })?;
        if self.channel_type == "webhook" {
            let Some(url) = &self.url else {
                return Err(config_err(format!("{at}.url: required for a webhook")));
            };
            if !is_http_url(url) {
                // Not echoed: a webhook's path is often its secret.
                return Err(config_err(format!(
                    "{at}.url: must start with http:// or https:// (https://host/path)"
                )));
            }
        }
        if let Some(mode) = &self.mode
            && agentwatch_channels::WebhookMode::from_name(mode).is_none()
        {
            return Err(config_err(format!(
                "{at}.mode: must be json, pagerduty, slack or ntfy"
            )));
        }
        if self.channel_type == "alertmanager" {
            let urls = self.urls.as_deref().unwrap_or_default();
            if urls.is_empty() {
                return Err(config_err(format!(
                    "{at}.urls: required for alertmanager (the peers' base URLs)"
                )));
            }
            if let Some(url) = urls.iter().find(|u| !is_http_url(u)) {
                return Err(config_err(format!(
                    "{at}.urls: {:?} is not an http:// or https:// URL",
                    agentwatch_channels::shown_url(url)
                )));
            }
        }
        if self.channel_type == "telegram" && (self.token_env.is_none() || self.chat_id.is_none()) {
            return Err(config_err(format!(
                "{at}: telegram needs token_env and chat_id"
            )));
        }
        Ok(())
    }

    /// The channel's `group_by`, as set or by type: `channel` for what a person reads (desktop,
    /// Telegram, Slack- and ntfy-style webhooks: one grouped notification, one rate window),
    /// `key` for receivers that deduplicate per key (webhook `json` and `pagerduty`,
    /// Alertmanager, the log channel's JSON lines: one event per key, a window per key).
    pub fn group_by(&self) -> GroupBy {
        self.group_by.unwrap_or(match self.channel_type.as_str() {
            "desktop" | "telegram" => GroupBy::Channel,
            "webhook" if matches!(self.mode.as_deref(), Some("slack" | "ntfy")) => GroupBy::Channel,
            _ => GroupBy::Key,
        })
    }
}

/// Whether `url` starts with `http://` or `https://` (in any case).
pub(super) fn is_http_url(url: &str) -> bool {
    let lower = url.trim_start().to_ascii_lowercase();
    lower.starts_with("http://") || lower.starts_with("https://")
}

impl Default for ChannelSection {
    fn default() -> Self {
        Self {
            name: String::new(),
            channel_type: String::new(),
            enabled: true,
            min_severity: "warning".to_owned(),
            rate_limit_s: alert_state::DEFAULT_RATE_LIMIT_S,
            url: None,
            mode: None,
            urls: None,
            ends_after_s: None,
            host: None,
            routing_key_env: None,
            program: None,
            path: None,
            token_env: None,
            chat_id: None,
            api_base: None,
            group_by: None,
            fail_after: DEFAULT_CHANNEL_FAIL_AFTER,
            timeout_s: 10.0,
        }
    }
}

/// Default of a channel's `fail_after`.
pub const DEFAULT_CHANNEL_FAIL_AFTER: u32 = 3;

/// The channel types this build can deliver to.
pub const CHANNEL_TYPES: &[&str] = &["desktop", "webhook", "log", "telegram", "alertmanager"];

/// `info`, `warning` or `critical`.
pub fn parse_severity(text: &str) -> Result<Severity, String> {
    match text {
        "info" => Ok(Severity::Info),
        "warning" => Ok(Severity::Warning),
        "critical" => Ok(Severity::Critical),
        other => Err(format!("{other:?} is not info, warning or critical")),
    }
}

// ------------------------------------------------------------------------------------------------
// Configuration: `[deck]`
