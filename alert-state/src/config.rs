//! Configuration: lifecycle knobs and notification channels, validated before use.

use crate::event::Severity;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Default of [`AlertConfig::escalate_after_ticks`].
pub const DEFAULT_ESCALATE_AFTER_TICKS: u32 = 3;
/// Default of [`AlertConfig::max_llm_opinions_per_tick`].
pub const DEFAULT_MAX_LLM_OPINIONS_PER_TICK: u32 = 3;
/// Default of [`ChannelConfig::rate_limit_s`].
pub const DEFAULT_RATE_LIMIT_S: u64 = 300;
/// Default of [`AlertConfig::source`] when the caller knows no host name; callers should use
/// [`source_for_host`].
pub const DEFAULT_SOURCE: &str = "agentwatch";

/// The `source` of events sent from a host: `agentwatch@{host}`.
#[must_use]
pub fn source_for_host(host: &str) -> String {
    format!("agentwatch@{host}")
}

/// Everything that shapes the alert decisions. Missing fields take their defaults when
/// deserialised; unknown fields are an error (a typo must not silently become a default).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AlertConfig {
    /// An open warning alert escalates on its `escalate_after_ticks`th flagged tick (default 3). With 1,
    /// a new alert opens as critical.
    pub escalate_after_ticks: u32,
    /// A flagged judgement counts towards `escalate_after_ticks` only when it comes at least
    /// this many seconds after the last one counted (the trigger counts as the first). 0 (the
    /// default here; the watchdog's config sets 240): every judgement counts.
    #[serde(default)]
    pub escalate_min_gap_s: i64,
    /// At most this many LLM second opinions are used per tick (default 3); 0 asks none.
    pub max_llm_opinions_per_tick: u32,
    /// Whether a local LLM is asked for second opinions at all (default true).
    pub local_llm_enabled: bool,
    /// The `source` of every event; the caller sets `agentwatch@<host>` ([`source_for_host`]).
    pub source: String,
    /// Where events go. Empty: events are decided but routed nowhere.
    pub channels: Vec<ChannelConfig>,
    /// Silenced alerts: dedup key to the time (unix seconds) the silence ends. A trigger or
    /// escalate of a silenced alert goes to no channel before then (its resolve still does).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub silences: BTreeMap<String, i64>,
    /// An alert still flagged this long (seconds) after its last event fires again as a
    /// [`Repeat`](crate::DecisionKind::Repeat) reminder, as Alertmanager's `repeat_interval`.
    /// 0 (the default here; the watchdog's config sets 4 h): never.
    #[serde(default)]
    pub repeat_interval_s: i64,
}

impl Default for AlertConfig {
    fn default() -> Self {
        Self {
            escalate_after_ticks: DEFAULT_ESCALATE_AFTER_TICKS,
            escalate_min_gap_s: 0,
            max_llm_opinions_per_tick: DEFAULT_MAX_LLM_OPINIONS_PER_TICK,
            local_llm_enabled: true,
            source: DEFAULT_SOURCE.to_owned(),
            channels: Vec::new(),
            silences: BTreeMap::new(),
            repeat_interval_s: 0,
        }
    }
}

impl AlertConfig {
    /// Checks the values a tick relies on.
    ///
    /// # Errors
    ///
    /// [`ConfigError`] naming the offending key.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.escalate_after_ticks == 0 {
            return Err(ConfigError::EscalateAfterTicksZero);
        }
        if self.source.trim().is_empty() {
            return Err(ConfigError::EmptySource);
        }
        for (index, channel) in self.channels.iter().enumerate() {
            if channel.name.trim().is_empty() {
                return Err(ConfigError::EmptyChannelName { index });
            }
            if let Some(first) = self.channels[..index]
                .iter()
                .position(|c| c.name == channel.name)
            {
                return Err(ConfigError::DuplicateChannelName {
                    name: channel.name.clone(),
                    index,
                    first,
                });
            }
        }
        Ok(())
    }
}

/// One notification channel: `{name, type, enabled, min_severity, rate_limit_s}`; `rate_limit_s`
/// defaults to 300.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChannelConfig {
    /// Unique name; router state is kept per name.
    pub name: String,
    /// How the caller delivers (`desktop` today). The router does not interpret it.
    #[serde(rename = "type")]
    pub channel_type: String,
    /// A disabled channel gets nothing, resolves included.
    pub enabled: bool,
    /// Trigger and escalate events below this severity are suppressed.
    pub min_severity: Severity,
    /// After a trigger or escalate is delivered, the channel takes no other trigger or escalate
    /// for this many seconds (default 300). 0 turns the limit off.
    #[serde(default = "default_rate_limit_s")]
    pub rate_limit_s: u64,
    /// What shares a rate-limit window: the whole channel, or each dedup key its own
    /// (as Alertmanager's `group_by`).
    #[serde(default)]
    pub group_by: GroupBy,
}

/// What a channel's rate-limit window covers, as Alertmanager's `group_by`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GroupBy {
    /// One window for the channel: a person reads it, so a burst becomes one notification.
    #[default]
    Channel,
    /// Each dedup key its own window: a receiver that deduplicates per key never has a new
    /// key's first event held behind another key's.
    Key,
}

impl GroupBy {
    /// Whether this is `channel` (the default, left out of serialised routes).
    #[must_use]
    pub fn is_channel(&self) -> bool {
        *self == Self::Channel
    }

    /// The config spelling (`channel`, `key`).
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Channel => "channel",
            Self::Key => "key",
        }
    }
}

fn default_rate_limit_s() -> u64 {
    DEFAULT_RATE_LIMIT_S
}

/// A configuration value the alert pipeline cannot work with.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// `escalate_after_ticks = 0` has no meaning.
    #[error("escalate_after_ticks must be at least 1 (got 0)")]
    EscalateAfterTicksZero,
    /// Events need a source.
    #[error("source must not be empty (use `agentwatch@<host>`)")]
    EmptySource,
    /// A channel without a name cannot keep router state.
    #[error("channels[{index}].name must not be empty")]
    EmptyChannelName {
        /// Position in `channels`.
        index: usize,
    },
    /// Two channels share a name, so their router state would mix.
    #[error("channels[{index}].name `{name}` is already used by channels[{first}]")]
    DuplicateChannelName {
        /// The repeated name.
        name: String,
        /// Position of the repeat.
        index: usize,
        /// Position of the first channel with that name.
        first: usize,
    },
}
