//! # agentwatch-channels: delivering alert events
//!
//! `alert-state` decides which [`AlertEvent`] goes to which channel; this crate delivers it. One
//! call, [`deliver`], one event, one channel, one [`Outcome`] or [`ChannelError`]. No retries, no
//! rate limits, no queue: the router and the caller's journal own those.
//!
//! | channel | what it does |
//! |---|---|
//! | [`DesktopChannel`] | runs `notify-send -u URGENCY -- TITLE SUMMARY` as an argv (never a shell); urgency critical → `critical`, warning → `normal`, info → `low`. A missing program is an [`Outcome::Warning`], not an error: a headless box has no desktop. |
//! | [`WebhookChannel`] [`Json`](WebhookMode::Json) | `POST url` with the event as JSON, exactly as `alert-state` serialises it. |
//! | [`WebhookChannel`] [`PagerDuty`](WebhookMode::PagerDuty) | `POST url` (Events API v2, [`PAGERDUTY_EVENTS_URL`]) with `{routing_key, event_action, dedup_key, payload}`; trigger and escalate are `trigger` (PagerDuty updates the open incident of the dedup key), resolve is `resolve` without a payload (PagerDuty ignores one on resolve). |
//! | [`WebhookChannel`] [`Slack`](WebhookMode::Slack) | `POST url` (a Slack-compatible incoming webhook: Slack, Mattermost, Rocket.Chat, Discord's `/slack` endpoint) with `{text}`: one mrkdwn line `*[SEVERITY] state* title`, the summary, the dedup key and source; `&`, `<`, `>` escaped as Slack asks. |
//! | [`WebhookChannel`] [`Ntfy`](WebhookMode::Ntfy) | `url` is `https://ntfy.sh/TOPIC` (or a self-hosted server's); `POST` to the server's root with ntfy's JSON `{topic, title, message, priority, tags}`: priority 5 critical, 4 warning, 3 a resolve. |
//! | [`AlertmanagerChannel`] | `POST {url}/api/v2/alerts` to every peer of a Prometheus Alertmanager cluster, labels `alertname` (per kind, [`alertmanager::ALERT_KINDS`]), `dedup_key`, `root`, `severity`, `host`, `job`; annotations `summary`, `description`, `dashboard`. Open until `now + ends_after`; a resolve ends the alert at `now`. A caller that re-posts open alerts every tick uses [`alertmanager::post`] with its own list ([`AmAlert`]). |
//! | [`TelegramChannel`] | `POST {api_base}/bot{token}/sendMessage` with `{chat_id, text}`, plain text (no parse mode, so nothing in a title needs escaping). |
//! | [`LogChannel`] | one JSON line per event (the event as `alert-state` serialises it, so it reads back as an [`AlertEvent`]) appended to a file, or written to stderr. |
//!
//! ## Secrets
//!
//! Telegram bot tokens, PagerDuty routing keys, and a URL's user-info and query never appear in a
//! [`ChannelError`], in its `Debug`, or in the `Debug` of a channel: URLs are shown as
//! `scheme://host/path` (user-info dropped, query shown as `?<redacted>`), the Telegram URL as
//! `{api_base}/bot<redacted>/sendMessage`, and every message taken from a transport error or a
//! server's answer is scrubbed of the secrets before it is kept. A secret in the *path* of a
//! generic webhook URL (Slack-style `/services/T…/B…/XXXX`) cannot be told from a path and is
//! shown.
//!
//! ## Timeouts
//!
//! HTTP channels use their `timeout` both to connect and for the whole request. The desktop
//! program is killed after [`DESKTOP_TIMEOUT`] (a `notify-send` waiting on a wedged D-Bus must
//! not stall the watchdog's tick).
//!
//! ```no_run
//! use agentwatch_channels::{ChannelKind, DesktopChannel, Outcome, deliver};
//! # fn event() -> alert_state::AlertEvent { unimplemented!() }
//! let channel = ChannelKind::Desktop(DesktopChannel::default());
//! match deliver(&channel, &event()) {
//!     Ok(Outcome::Sent) => {}
//!     Ok(Outcome::Warning(why)) => eprintln!("warning: {why}"),
//!     Err(e) => eprintln!("error: {e}"),
//! }
//! ```
#![forbid(unsafe_code)]

pub mod alertmanager;
mod desktop;
mod log;
mod telegram;
mod webhook;

pub use alertmanager::{AlertmanagerChannel, AmAlert};

use agentwatch_http::Redacted;
/// A URL as errors and `Debug` show it (user-info dropped, query redacted).
pub use agentwatch_http::shown_url;
use alert_state::AlertEvent;
use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

/// The program a [`DesktopChannel`] runs by default (looked up on `PATH`).
pub const DEFAULT_DESKTOP_PROGRAM: &str = "notify-send";
/// How long the desktop program may run before it is killed.
pub const DESKTOP_TIMEOUT: Duration = Duration::from_secs(10);
/// The Telegram Bot API base URL.
pub const TELEGRAM_API_BASE: &str = "https://api.telegram.org";
/// The PagerDuty Events API v2 enqueue URL.
pub const PAGERDUTY_EVENTS_URL: &str = "https://events.pagerduty.com/v2/enqueue";
/// A sensible timeout for the HTTP channels.
pub const DEFAULT_HTTP_TIMEOUT: Duration = Duration::from_secs(10);

/// One configured channel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChannelKind {
    Desktop(DesktopChannel),
    Webhook(WebhookChannel),
    Log(LogChannel),
    Telegram(TelegramChannel),
    Alertmanager(AlertmanagerChannel),
}

/// A desktop notification through `notify-send` (or a compatible program).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DesktopChannel {
    /// A program name looked up on `PATH`, or a path. Default [`DEFAULT_DESKTOP_PROGRAM`].
    pub program: String,
}

impl Default for DesktopChannel {
    fn default() -> Self {
        Self {
            program: DEFAULT_DESKTOP_PROGRAM.to_owned(),
        }
    }
}

/// An HTTP POST of the event.
#[derive(Clone, PartialEq, Eq)]
pub struct WebhookChannel {
    pub url: String,
    pub mode: WebhookMode,
    /// The PagerDuty integration key; required in [`WebhookMode::PagerDuty`], unused otherwise.
    /// Never shown in errors or `Debug`.
    pub routing_key: Option<String>,
    /// Connect timeout and whole-request timeout.
    pub timeout: Duration,
}

impl WebhookChannel {
    /// A channel with [`DEFAULT_HTTP_TIMEOUT`] and no routing key.
    pub fn new(url: impl Into<String>, mode: WebhookMode) -> Self {
        Self {
            url: url.into(),
            mode,
            routing_key: None,
            timeout: DEFAULT_HTTP_TIMEOUT,
        }
    }
}

impl fmt::Debug for WebhookChannel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WebhookChannel")
            .field("url", &shown_url(&self.url))
            .field("mode", &self.mode)
            .field("routing_key", &self.routing_key.as_ref().map(|_| Redacted))
            .field("timeout", &self.timeout)
            .finish()
    }
}

/// The body a [`WebhookChannel`] posts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WebhookMode {
    /// The [`AlertEvent`] as JSON.
    Json,
    /// A PagerDuty Events API v2 event.
    PagerDuty,
    /// A Slack-compatible incoming webhook's `{text}`.
    Slack,
    /// ntfy's JSON publish (`url` is the topic's URL).
    Ntfy,
}

impl WebhookMode {
    /// Every mode by its configuration name.
    pub const NAMES: &[(&str, WebhookMode)] = &[
        ("json", WebhookMode::Json),
        ("pagerduty", WebhookMode::PagerDuty),
        ("slack", WebhookMode::Slack),
        ("ntfy", WebhookMode::Ntfy),
    ];

    /// The mode of a configuration name (`json`, `pagerduty`, `slack`, `ntfy`).
    #[must_use]
    pub fn from_name(name: &str) -> Option<Self> {
        Self::NAMES
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, m)| *m)
    }
}

/// JSON lines of events.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogChannel {
    /// A file to append to (created when missing; its directory must exist), or `None` for
    /// stderr.
    pub path: Option<PathBuf>,
}

/// A message from a Telegram bot to one chat.
#[derive(Clone, PartialEq, Eq)]
pub struct TelegramChannel {
    /// Default [`TELEGRAM_API_BASE`].
    pub api_base: String,
    /// The bot token (`123456:ABC…`). Never shown in errors or `Debug`.
    pub token: String,
    /// A chat id (`-1001234567890`) or `@channelname`.
    pub chat_id: String,
    /// Connect timeout and whole-request timeout.
    pub timeout: Duration,
}

impl TelegramChannel {
    /// A channel to the real Bot API with [`DEFAULT_HTTP_TIMEOUT`].
    pub fn new(token: impl Into<String>, chat_id: impl Into<String>) -> Self {
        Self {
            api_base: TELEGRAM_API_BASE.to_owned(),
            token: token.into(),
            chat_id: chat_id.into(),
            timeout: DEFAULT_HTTP_TIMEOUT,
        }
    }
}

impl fmt::Debug for TelegramChannel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TelegramChannel")
            .field("api_base", &shown_url(&self.api_base))
            .field("token", &Redacted)
            .field("chat_id", &self.chat_id)
            .field("timeout", &self.timeout)
            .finish()
    }
}

/// A delivery that did not fail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The channel accepted the event.
    Sent,
    /// Nothing was sent, and that is not a failure (no desktop notifier installed). The text says
    /// why, for the journal at warning level.
    Warning(String),
}

/// Why a channel could not deliver an event. Holds no secret (see the crate docs).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChannelError {
    /// The channel's settings cannot work (a PagerDuty webhook without a routing key).
    #[error("channel misconfigured: {0}")]
    Config(String),
    /// The desktop program exists but could not be started.
    #[error("{program}: could not start: {message}")]
    Spawn { program: String, message: String },
    /// The desktop program failed; `stderr` is the head of what it wrote.
    #[error("{program}: {status}: {stderr}")]
    Exited {
        program: String,
        status: String,
        stderr: String,
    },
    /// The desktop program ran past [`DESKTOP_TIMEOUT`] and was killed.
    #[error("{program}: still running after {timeout:?}; killed")]
    CommandTimeout { program: String, timeout: Duration },
    /// No connection (refused, DNS, TLS, bad URL).
    #[error("{url}: unreachable: {message}")]
    Unreachable { url: String, message: String },
    /// No complete answer within the channel's timeout.
    #[error("{url}: no answer within {timeout:?} ({message})")]
    Timeout {
        url: String,
        timeout: Duration,
        message: String,
    },
    /// A non-2xx answer; `body` is its head.
    #[error("{url}: HTTP {status}: {body}")]
    Status {
        url: String,
        status: u16,
        body: String,
    },
    /// A 2xx answer that says the event was not taken (Telegram's `"ok": false`) or cannot be
    /// read.
    #[error("{url}: {message}")]
    Rejected { url: String, message: String },
    /// The log file could not be written.
    #[error("log {target}: {message}")]
    Log { target: String, message: String },
    /// Several peers of an Alertmanager cluster did not take the alerts; `errors` names each.
    #[error("{failed} of {total} Alertmanagers did not take the alerts: {errors}")]
    Peers {
        failed: usize,
        total: usize,
        errors: String,
    },
}

agentwatch_http::impl_from_http_error!(ChannelError);

/// Delivers one event through one channel, at the system clock's time (only an Alertmanager
/// channel reads it, for `startsAt` and `endsAt`; see [`deliver_at`]).
///
/// # Errors
/// As [`deliver_at`].
pub fn deliver(kind: &ChannelKind, event: &AlertEvent) -> Result<Outcome, ChannelError> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
    deliver_at(kind, event, now)
}

/// Delivers one event through one channel at `now` (unix seconds).
///
/// # Errors
/// A [`ChannelError`] naming the program, URL (redacted) or file when the channel failed. A
/// desktop channel whose program does not exist returns `Ok(Outcome::Warning(..))` instead.
pub fn deliver_at(
    kind: &ChannelKind,
    event: &AlertEvent,
    now: i64,
) -> Result<Outcome, ChannelError> {
    match kind {
        ChannelKind::Desktop(channel) => desktop::deliver(channel, event, DESKTOP_TIMEOUT),
        ChannelKind::Webhook(channel) => webhook::deliver(channel, event),
        ChannelKind::Log(channel) => log::deliver(channel, event),
        ChannelKind::Telegram(channel) => telegram::deliver(channel, event),
        ChannelKind::Alertmanager(channel) => alertmanager::deliver(channel, event, now),
    }
}

/// Times in events and messages, as the alert core says them.
pub use alert_state::iso8601;
