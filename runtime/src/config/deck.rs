//! `[deck]`: the agent-deck watchdog's section and the design's environment variables.

use super::*;

/// `[deck]`: the agent-deck watchdog.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DeckSection {
    /// agent-deck's runtime root (`AGENT_DECK_ROOT`): `watchdog/restart.log`,
    /// `watchdog/escalations.log`, `watchdog/patrol.log`, opt-in flags `watchdog/autorestart/ID`.
    pub root: String,
    /// The agent-deck binary (`AGENT_DECK_BIN`); default `agent-deck` on `PATH`, else
    /// `/usr/local/bin/agent-deck`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bin: Option<String>,
    /// Watch only this profile (`AGENT_DECK_PROFILE`); also the `-p` of sessions listed without one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
    /// Daemon: seconds between ticks.
    pub interval_s: u64,
    /// Daemon: least seconds between two ticks when hook files keep changing.
    pub min_tick_gap_s: u64,
    /// Daemon: how often the hook status files' mtimes are polled (seconds) when the hook
    /// directory cannot be watched.
    pub hook_poll_s: u64,
    /// The hook status directory; default `$XDG_DATA_HOME/agent-deck/hooks`, else `ROOT/hooks`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hooks_dir: Option<String>,
    /// Timeout of list, show and send (seconds).
    pub command_timeout_s: f64,
    /// Timeout of `session restart` (seconds).
    pub restart_timeout_s: f64,
    pub tmux_bin: String,
    /// The tmux server of sessions whose JSON names none: a socket path (`-S`) or a socket name
    /// (`-L`, agent-deck's `[tmux].socket_name`); default the user's server.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tmux_socket: Option<String>,
    /// agent-deck's `config.toml` (conductors' env files); default `ROOT/config.toml`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent_deck_config: Option<String>,
    /// Telegram chat for escalations (`TELEGRAM_ESCALATION_CHAT_ID`); unset: no Telegram.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub telegram_chat_id: Option<String>,
    /// The variable holding the bot token.
    pub telegram_token_env: String,
    /// Read `TELEGRAM_BOT_TOKEN=` from this file when the variable is unset (agent-deck's own).
    pub telegram_token_file: String,
    pub telegram_api_base: String,
    pub telegram_timeout_s: f64,
    /// `[[channels]]` that get escalations, by name; default every configured channel.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub channels: Option<Vec<String>>,
    pub restart_guard: RestartGuardConfig,
    pub waiting_patrol: WaitingPatrolConfig,
}

impl Default for DeckSection {
    fn default() -> Self {
        Self {
            root: "~/.agent-deck".to_owned(),
            bin: None,
            profile: None,
            interval_s: 15,
            min_tick_gap_s: 5,
            hook_poll_s: 1,
            hooks_dir: None,
            command_timeout_s: 30.0,
            restart_timeout_s: 90.0,
            tmux_bin: "tmux".to_owned(),
            tmux_socket: None,
            agent_deck_config: None,
            telegram_chat_id: None,
            telegram_token_env: "TELEGRAM_BOT_TOKEN".to_owned(),
            telegram_token_file: "~/.claude/channels/telegram/.env".to_owned(),
            telegram_api_base: agentwatch_channels::TELEGRAM_API_BASE.to_owned(),
            telegram_timeout_s: 10.0,
            channels: None,
            restart_guard: RestartGuardConfig::default(),
            waiting_patrol: WaitingPatrolConfig::default(),
        }
    }
}

/// The design's environment variables and the keys they set. `true`: a whole number of seconds.
pub const DECK_ENV: &[(&str, &str, bool)] = &[
    ("AGENT_DECK_ROOT", "deck.root", false),
    ("AGENT_DECK_BIN", "deck.bin", false),
    ("AGENT_DECK_PROFILE", "deck.profile", false),
    (
        "TELEGRAM_ESCALATION_CHAT_ID",
        "deck.telegram_chat_id",
        false,
    ),
    (
        "POLLER_RESTART_DEDUP_S",
        "deck.restart_guard.poller_dedup",
        true,
    ),
    (
        "WAITING_PATROL_THRESHOLD_S",
        "deck.waiting_patrol.threshold",
        true,
    ),
    (
        "WAITING_PATROL_NUDGE_DEDUP_S",
        "deck.waiting_patrol.nudge_dedup",
        true,
    ),
    (
        "MIN_GLOBAL_RESTART_INTERVAL_S",
        "deck.restart_guard.global_spacing",
        true,
    ),
];

/// The environment layer of `[deck]` (between the files and `--set`).
pub fn apply_deck_env(table: &mut toml::Table, env: Env<'_>) -> Result<(), Error> {
    for (var, key, seconds) in DECK_ENV {
        let Some(value) = env(var) else { continue };
        let value = if *seconds {
            let n: u32 = value.trim().parse().map_err(|_| {
                Error::config(format!(
                    "{var}={value:?}: must be a whole number of seconds"
                ))
            })?;
            toml::Value::Integer(i64::from(n))
        } else {
            toml::Value::String(value)
        };
        set_path(table, key, value)?;
    }
    Ok(())
}

impl DeckSection {
    /// Checks what no type can.
    pub fn validate(&self, channels: &[ChannelSection]) -> Result<(), Error> {
        let bad = |m: String| Err(Error::config(m));
        let message = &self.waiting_patrol.message;
        if message.trim().is_empty() || message.starts_with('-') {
            return bad(format!(
                "deck.waiting_patrol.message = {message:?}: must be text that does not start with '-'"
            ));
        }
        if let Some(names) = &self.channels {
            for name in names {
                if !channels.iter().any(|c| &c.name == name) {
                    return bad(format!(
                        "deck.channels: {name:?} is not a configured channel"
                    ));
                }
            }
        }
        Ok(())
    }
}
