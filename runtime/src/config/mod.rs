//! The effective configuration: defaults, the TOML file, its machine-local overlay, environment
//! variables, then `--set` flags, in that order (later wins).
//!
//! Keys are named as in the designs: `watchdog.detector.window` is `[watchdog.detector] window`.
//! Every file is checked on its own first, so an unknown key or a bad value is reported with the
//! file it came from; secrets are never stored here, only the names of the variables that hold them.

mod bounds;
mod channels;
mod deck;
mod layers;
mod sections;
pub use bounds::*;
pub use channels::*;
pub use deck::*;
pub use layers::*;
pub use sections::*;

use crate::error::Error;
use alert_state::{AlertConfig, ChannelConfig, GroupBy, Severity};
use detect_core::DetectConfig;
use recovery_policy::restart_guard::RestartGuardConfig;
use recovery_policy::waiting_patrol::WaitingPatrolConfig;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use toml::{Table, Value};

/// The whole configuration.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    pub watchdog: WatchdogSection,
    pub opencode: OpencodeSection,
    /// `[follow]`: `agentwatch watch --follow`.
    pub follow: FollowSection,
    pub store: StoreSection,
    /// `[deck]`: the agent-deck watchdog (`agentwatch deck`).
    pub deck: DeckSection,
    pub recover: RecoverSection,
    /// `[verification]`: the design's router verification model, which `watchdog.model`
    /// falls back to.
    pub verification: VerificationSection,
    /// `[local_compute]`: the design's global switch of local model calls.
    pub local_compute: LocalComputeSection,
    /// `[serve]`: the admin pages and API (`agentwatch serve`, or inside `agentwatch run`).
    pub serve: ServeSection,
    /// `[run]`: which jobs `agentwatch run` runs, and how often.
    pub run: RunSection,
    /// `[claude]`: Claude Code's transcripts.
    pub claude: TranscriptsSection,
    /// `[codex]`: OpenAI Codex CLI's rollouts (`dir`: its home, `$CODEX_HOME` or `~/.codex`).
    pub codex: TranscriptsSection,
    /// `[gemini]`: Google Gemini CLI's chat recordings (`dir`: its `.gemini` directory,
    /// `$GEMINI_CLI_HOME/.gemini` or `~/.gemini`).
    pub gemini: TranscriptsSection,
    /// `[act]`: what agentwatch's pre-tool hook does inside the agent (`agentwatch hook`):
    /// `mode` (`off`, `warn`, `block`, `stop`), `max_blocks`, `min_repeats`.
    pub act: recovery_policy::hook_ladder::LadderConfig,
    /// Notification channels (`[[channels]]`).
    pub channels: Vec<ChannelSection>,
    /// Which parts are the defaults for a configuration that does not name them (set by
    /// [`load`]; never read from or written to a file).
    #[serde(skip)]
    pub defaulted: Defaulted,
    /// Silenced alerts, dedup key to the end of the silence (unix seconds): what
    /// `agentwatch alerts silence` stored, loaded by [`crate::notify::apply_stored_settings`];
    /// never read from or written to a file.
    #[serde(skip)]
    pub silences: std::collections::BTreeMap<String, i64>,
}

/// Where the configuration came from.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Loaded {
    pub config: Config,
    /// Files read, in order.
    pub files: Vec<PathBuf>,
    /// The `--set` flags, applied last (a server's live edits show the values they decide).
    pub sets: Vec<String>,
    /// Old names the configuration still uses, each with its new name (`OLD: now NEW`): read as
    /// the new ones, noted once per load, listed by `doctor`.
    pub old_names: Vec<String>,
}

/// Environment lookups, passed in so tests and callers control them.
pub type Env<'a> = &'a dyn Fn(&str) -> Option<String>;

/// The process environment.
pub fn process_env(key: &str) -> Option<String> {
    std::env::var(key).ok().filter(|v| !v.is_empty())
}

/// `$XDG_CONFIG_HOME/agentwatch/config.toml` (or `~/.config/…`).
pub fn default_config_path(env: Env<'_>) -> Option<PathBuf> {
    env("AGENTWATCH_CONFIG").map(PathBuf::from).or_else(|| {
        xdg_dir(env, "XDG_CONFIG_HOME", ".config").map(|d| d.join("agentwatch/config.toml"))
    })
}

/// `$XDG_STATE_HOME/agentwatch/agentwatch.db` (or `~/.local/state/…`); `None` when neither
/// variable is set (never a database in the working directory).
pub fn default_db_path(env: Env<'_>) -> Option<PathBuf> {
    xdg_dir(env, "XDG_STATE_HOME", ".local/state").map(|d| d.join("agentwatch/agentwatch.db"))
}

/// opencode's data directory: `$XDG_DATA_HOME/opencode` (or `~/.local/share/opencode`), where
/// its `opencode.db` lives and the seed's `rc-servers.json` registry is kept.
pub fn opencode_data_dir(env: Env<'_>) -> Option<PathBuf> {
    xdg_dir(env, "XDG_DATA_HOME", ".local/share").map(|d| d.join("opencode"))
}

/// `program` as PATH finds it: a name with a `/` as it is, else the first executable file of
/// that name in a PATH directory.
pub fn find_program(program: &str, env: Env<'_>) -> Option<PathBuf> {
    let executable = |p: &Path| {
        use std::os::unix::fs::PermissionsExt;
        p.metadata()
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if program.contains('/') {
        let path = PathBuf::from(program);
        return executable(&path).then_some(path);
    }
    let path = env("PATH")?;
    std::env::split_paths(&path)
        .filter(|dir| !dir.as_os_str().is_empty())
        .map(|dir| dir.join(program))
        .find(|p| executable(p))
}

/// Fill in the sources and channels a configuration does not name (see [`Defaulted`]).
fn apply_defaults(config: &mut Config, table: &Table, env: Env<'_>) {
    let watchdog_names = |key: &str| {
        table
            .get("watchdog")
            .and_then(Value::as_table)
            .is_some_and(|t| t.contains_key(key))
    };
    config.defaulted.local_llm = !watchdog_names("local_llm_enabled");
    if !watchdog_names("dashboard_base_url") {
        config.watchdog.dashboard_base_url = dashboard_at(&config.serve.listen);
    }
    let opencode = table.get("opencode").and_then(Value::as_table);
    let names_source = opencode.is_some_and(|t| {
        ["servers", "registry", "db"]
            .iter()
            .any(|k| t.contains_key(*k))
    });
    if !names_source {
        config.defaulted.sources = true;
        config.opencode.servers = vec![DEFAULT_OPENCODE_SERVER.to_owned()];
        if let Some(dir) = opencode_data_dir(env) {
            config.opencode.registry = Some(dir.join("rc-servers.json").display().to_string());
            config.opencode.db = Some(dir.join("opencode.db").display().to_string());
        }
    }
    let names_jobs = table
        .get("run")
        .and_then(Value::as_table)
        .is_some_and(|t| t.contains_key("jobs"));
    if !names_jobs {
        config.run.jobs = present_jobs(config, table, env);
    }
    if !table.contains_key("channels") {
        config.defaulted.channels = true;
        config.channels.push(ChannelSection {
            name: "journal".to_owned(),
            channel_type: "log".to_owned(),
            ..ChannelSection::default()
        });
        if find_program(agentwatch_channels::DEFAULT_DESKTOP_PROGRAM, env).is_some() {
            config.channels.push(ChannelSection {
                name: "desktop".to_owned(),
                channel_type: "desktop".to_owned(),
                ..ChannelSection::default()
            });
        }
    }
}

/// The pages `serve` gives at `listen` (`[serve] listen`), as an alert links them when
/// `watchdog.dashboard_base_url` is not set: `http://127.0.0.1:8080/admin`; an address that
/// listens everywhere is linked through its loopback.
fn dashboard_at(listen: &str) -> String {
    match listen.parse::<std::net::SocketAddr>() {
        Ok(mut addr) => {
            if addr.ip().is_unspecified() {
                addr.set_ip(match addr {
                    std::net::SocketAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
                    std::net::SocketAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
                });
            }
            format!("http://{addr}/admin")
        }
        Err(_) => format!("http://{listen}/admin"),
    }
}

/// The jobs whose systems are there, for a config that names no `run.jobs`: opencode always
/// (it reads every agent's sessions), deck when agent-deck is configured (`[deck]`,
/// `AGENT_DECK_BIN`) or on `PATH`, recover when `recover.unit` is set. A job that is not
/// configured to run is never "not running".
fn present_jobs(config: &Config, table: &Table, env: Env<'_>) -> Vec<JobName> {
    let deck = table.contains_key("deck")
        || env("AGENT_DECK_BIN").is_some()
        || find_program("agent-deck", env).is_some();
    JobName::ALL
        .into_iter()
        .filter(|job| match job {
            JobName::Watch => true,
            JobName::Deck => deck,
            JobName::Recover => !config.recover.unit.is_empty(),
        })
        .collect()
}

/// A server URL must say its scheme: `localhost:4096` is an error naming the fix.
pub fn check_server_url(url: &str) -> Result<(), String> {
    let lower = url.to_ascii_lowercase();
    let rest = lower
        .strip_prefix("http://")
        .or_else(|| lower.strip_prefix("https://"));
    match rest {
        Some(host) if !host.is_empty() && !host.starts_with('/') => Ok(()),
        Some(_) => Err(format!("{url:?} names no host")),
        None => Err(format!(
            "{url:?} is not a URL: write it with its scheme, e.g. http://{}",
            url.split_once("://").map_or(url, |(_, r)| r)
        )),
    }
}

fn config_err(message: String) -> Error {
    Error::config(message)
}

/// A check's error (`channels[1].type: must be one of …`) with where its key was set: the last
/// layer (a file, `--set KEY`) that sets its section (`/home/me/.config/agentwatch/config.toml:
/// channels[1].type: …`).
fn where_set(error: Error, layers: &[(String, Table)]) -> Error {
    let Error::Config(message) = &error else {
        return error;
    };
    let section: String = message
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect();
    match layers.iter().rev().find(|(_, t)| t.contains_key(&section)) {
        Some((from, _)) => config_err(format!("{from}: {message}")),
        None => error,
    }
}

/// The detector's configuration from `--profile` and `--set` flags alone, for the commands that
/// judge files (`agentwatch detect`, `cargo xtask backtest`): the same dialect and checks as a
/// config file's `[watchdog.detector]` table. A key outside that table is an error naming it.
pub fn detector_from_flags(profile: Option<&str>, sets: &[String]) -> Result<DetectConfig, Error> {
    let mut detector = Table::new();
    if let Some(profile) = profile {
        // A flag of its own, so a bad name is a usage error that names the flag.
        let _: detect_core::Profile = profile
            .parse()
            .map_err(|e| Error::usage(format!("--profile {profile}: {e}")))?;
        detector.insert("profile".to_owned(), Value::String(profile.to_owned()));
    }
    for item in sets {
        let (key, value) = parse_set(item)?;
        let Some(short) = key.strip_prefix("watchdog.detector.") else {
            return Err(Error::usage(format!(
                "--set {key}: only detector keys apply here (watchdog.detector.*; known: {})",
                detect_core::DETECT_KEYS.join(", ")
            )));
        };
        set_path(&mut detector, short, value)?;
    }
    let config = DetectConfig::deserialize(Value::Table(detector))
        .map_err(|e| config_err(format!("watchdog.detector: {}", shown_toml_error(&e, None))))?;
    config
        .validate()
        .map_err(|e| config_err(format!("watchdog.detector: {e}")))?;
    Ok(config)
}

/// Load the effective configuration.
///
/// `explicit`: `--config FILE` (must exist). Otherwise the default file if it exists. The overlay
/// is `config.local.toml` beside the main file, or in the user's configuration directory when
/// there is none ([`overlay_path`]). `sets`: `--set key=value` flags (dotted keys; the
/// detector's short keys such as `top_min` are accepted too).
pub fn load(explicit: Option<&Path>, sets: &[String], env: Env<'_>) -> Result<Loaded, Error> {
    load_layers(explicit, None, sets, env)
}

/// The configuration as it would load with `text` in the overlay's place: what a live edit
/// checks before it writes.
pub fn load_with_overlay(
    explicit: Option<&Path>,
    text: &str,
    env: Env<'_>,
) -> Result<Loaded, Error> {
    load_layers(explicit, Some(text), &[], env)
}

/// `config.local.toml`, the machine-local overlay live edits write: beside `--config FILE`, else
/// beside the default `config.toml` (`$XDG_CONFIG_HOME/agentwatch/`), whether or not it exists.
pub fn overlay_path(explicit: Option<&Path>, env: Env<'_>) -> Option<PathBuf> {
    explicit
        .map(Path::to_path_buf)
        .or_else(|| default_config_path(env))
        .map(|main| main.with_file_name("config.local.toml"))
}

/// The environment's settings over the files' (`AGENTWATCH_DB`, the deck and recover
/// variables, `WD_LOOP_INTERVAL`).
fn apply_env(table: &mut Table, env: Env<'_>) -> Result<(), Error> {
    if let Some(db) = env("AGENTWATCH_DB") {
        set_path(table, "store.path", Value::String(db))?;
    }
    if let Some(user) = env("OPENCODE_SERVER_USERNAME") {
        set_path(table, "opencode.username", Value::String(user))?;
    }
    apply_deck_env(table, env)?;
    for (var, key) in RECOVER_ENV {
        if let Some(value) = env(var) {
            set_path(table, key, Value::String(value))?;
        }
    }
    if let Some(interval) = env("WD_LOOP_INTERVAL") {
        let gap = interval
            .trim()
            .parse::<i64>()
            .ok()
            .filter(|s| *s >= 0)
            .ok_or_else(|| {
                config_err("WD_LOOP_INTERVAL: must be a whole number of seconds".to_owned())
            })?;
        set_path(
            table,
            "recover.min_probe_gap",
            Value::Integer((gap - 30).max(0)),
        )?;
    }
    Ok(())
}

fn load_layers(
    explicit: Option<&Path>,
    overlay_text: Option<&str>,
    sets: &[String],
    env: Env<'_>,
) -> Result<Loaded, Error> {
    let mut table = Table::new();
    let mut files = Vec::new();
    // Where each layer came from, for an error naming the file that set a bad key.
    let mut layers: Vec<(String, Table)> = Vec::new();
    let main = match explicit {
        Some(p) => Some(p.to_path_buf()),
        None => default_config_path(env).filter(|p| p.is_file()),
    };
    if let Some(main) = &main {
        let read = read_table(main)?;
        layers.push((main.display().to_string(), read.clone()));
        merge(&mut table, read);
        files.push(main.clone());
    }
    if let Some(overlay) = overlay_path(explicit, env) {
        let read = match overlay_text {
            Some(text) => Some(read_text(&overlay, text)?),
            None if overlay.is_file() => {
                files.push(overlay.clone());
                Some(read_table(&overlay)?)
            }
            None => None,
        };
        if let Some(read) = read {
            layers.push((overlay.display().to_string(), read.clone()));
            merge(&mut table, read);
        }
    }
    apply_env(&mut table, env)?;
    for item in sets {
        let (key, value) = parse_set(item)?;
        // `KEY=null` (TOML has no null): the key unset, as if absent (`watchdog.model=null`
        // falls back to `verification.model`), never the text "null".
        if value.as_str() == Some("null") {
            remove_path(&mut table, &key);
        } else {
            let mut set = Table::new();
            set_path(&mut set, &key, value.clone())?;
            layers.push((format!("--set {key}"), set));
            set_path(&mut table, &key, value)?;
        }
    }
    let old_names = noted_old_names(&table);
    let mut config = Config::deserialize(Value::Table(table.clone()))
        .map_err(|e| config_err(format!("configuration: {}", shown_toml_error(&e, None))))?;
    apply_defaults(&mut config, &table, env);
    config.validate().map_err(|e| where_set(e, &layers))?;
    Ok(Loaded {
        config,
        files,
        sets: sets.to_vec(),
        old_names,
    })
}

/// [`old_names`], each noted in the journal (`config=… message="run.watch_interval_s: now
/// run.watch_interval_s (the old name still works; …)"`).
fn noted_old_names(table: &Table) -> Vec<String> {
    let old_names = old_names(table);
    for note in &old_names {
        crate::journal::Line::warning("config", crate::clock::now_or_clock(None))
            .field(
                "message",
                format!("{note} (the old name still works; rename it when you next edit the file)"),
            )
            .emit();
    }
    old_names
}

/// The names a configuration uses that the sessions job's rename (from `opencode` to `watch`)
/// replaced, each as `OLD: now NEW`.
pub fn old_names(table: &Table) -> Vec<String> {
    let run = table.get("run").and_then(Value::as_table);
    let mut out = Vec::new();
    if run.is_some_and(|r| r.contains_key("opencode_interval_s")) {
        out.push("run.opencode_interval_s: now run.watch_interval_s".to_owned());
    }
    let jobs = run.and_then(|r| r.get("jobs")).and_then(Value::as_array);
    if jobs.is_some_and(|j| j.iter().any(|v| v.as_str() == Some("opencode"))) {
        out.push(r#"run.jobs "opencode": now "watch""#.to_owned());
    }
    out
}

impl Config {
    /// Check the values no type can: ranges, known names, required companions.
    pub fn validate(&self) -> Result<(), Error> {
        check_bounds(self)?;
        self.detector()
            .validate()
            .map_err(|e| config_err(format!("watchdog.detector: {e}")))?;
        self.alert_config("check")
            .validate()
            .map_err(|e| config_err(format!("watchdog: {e}")))?;
        if !["alert", "abort"].contains(&self.opencode.on_loop.as_str()) {
            return Err(config_err(
                "opencode.on_loop: must be alert or abort".to_owned(),
            ));
        }
        for url in &self.opencode.servers {
            check_server_url(url).map_err(|e| config_err(format!("opencode.servers: {e}")))?;
        }
        if !["ollama", "openai"].contains(&self.watchdog.llm.dialect.as_str()) {
            return Err(config_err(
                "watchdog.llm.dialect: must be ollama or openai".to_owned(),
            ));
        }
        if self.recover.systemctl.first().is_none_or(|p| p.is_empty()) {
            return Err(config_err(
                "recover.systemctl: must name a program, e.g. [\"sudo\", \"-n\", \"systemctl\"]"
                    .to_owned(),
            ));
        }
        if !self.recover.unit.is_empty() {
            agentwatch_systemd::check_unit_name(&self.recover.unit)
                .map_err(|e| config_err(format!("recover.unit: {e}")))?;
        }
        let mut names = std::collections::HashSet::new();
        for (i, ch) in self.channels.iter().enumerate() {
            let at = format!("channels[{i}]");
            if ch.name.is_empty() {
                return Err(config_err(format!("{at}.name: required")));
            }
            if !names.insert(ch.name.as_str()) {
                return Err(config_err(format!("{at}.name = {:?}: used twice", ch.name)));
            }
            ch.validate(&at)?;
        }
        self.deck.validate(&self.channels)?;
        if self.serve.listen.parse::<std::net::SocketAddr>().is_err() {
            return Err(config_err(format!(
                "serve.listen: must be an address and port such as {DEFAULT_SERVE_LISTEN}"
            )));
        }
        if self.serve.token_env.trim().is_empty() {
            return Err(config_err(
                "serve.token_env: must name an environment variable".to_owned(),
            ));
        }
        self.run.validate()?;
        Ok(())
    }

    /// The detector's config, with `watchdog.read_only_agents` applied.
    pub fn detector(&self) -> DetectConfig {
        let mut detector = self.watchdog.detector.clone();
        if let Some(agents) = &self.watchdog.read_only_agents {
            detector.read_only_agents = agents.clone();
        }
        detector
    }

    /// The second opinion's model: `watchdog.model`, else `verification.model`, else
    /// [`DEFAULT_LLM_MODEL`] (an empty name counts as unset).
    pub fn llm_model(&self) -> &str {
        [&self.watchdog.model, &self.verification.model]
            .into_iter()
            .filter_map(|m| m.as_deref().map(str::trim))
            .find(|m| !m.is_empty())
            .unwrap_or(DEFAULT_LLM_MODEL)
    }

    /// Whether a second opinion may be asked: both the global `local_compute.enabled` and
    /// `watchdog.local_llm_enabled` (the design's two gates).
    pub fn local_llm_enabled(&self) -> bool {
        self.local_compute.enabled && self.watchdog.local_llm_enabled
    }

    /// The `group_by` of the channel called `name` (`channel` for one not configured, such as
    /// the deck job's Telegram escalation chat).
    pub fn group_by_of(&self, name: &str) -> GroupBy {
        self.channels
            .iter()
            .find(|c| c.name == name)
            .map_or(GroupBy::Channel, ChannelSection::group_by)
    }

    /// The alert pipeline's config; `host` fills the default source `agentwatch@<host>`.
    pub fn alert_config(&self, host: &str) -> AlertConfig {
        AlertConfig {
            escalate_after_ticks: self.watchdog.escalate_after_ticks,
            escalate_min_gap_s: i64::try_from(self.watchdog.escalate_min_gap_s).unwrap_or(i64::MAX),
            max_llm_opinions_per_tick: self.watchdog.max_llm_opinions_per_tick,
            local_llm_enabled: self.local_llm_enabled(),
            source: self
                .watchdog
                .source
                .clone()
                .unwrap_or_else(|| alert_state::source_for_host(host)),
            channels: self
                .channels
                .iter()
                .map(|c| ChannelConfig {
                    name: c.name.clone(),
                    channel_type: c.channel_type.clone(),
                    enabled: c.enabled,
                    min_severity: parse_severity(&c.min_severity).unwrap_or(Severity::Warning),
                    rate_limit_s: c.rate_limit_s,
                    group_by: c.group_by(),
                })
                .collect(),
            silences: self.silences.clone(),
            repeat_interval_s: i64::try_from(self.watchdog.repeat_interval_s).unwrap_or(i64::MAX),
        }
    }

    /// The configuration as TOML, for `agentwatch config`.
    pub fn to_toml(&self) -> String {
        toml::to_string_pretty(self).unwrap_or_default()
    }

    /// The configuration as it may be shown (`config`, `channels --json`): every URL through
    /// the one redaction ([`agentwatch_http::shown_url`]), so a webhook's `?token=`, a
    /// Slack-style path key or a `user:pw@` never reaches a terminal or a log.
    #[must_use]
    pub fn shown(&self) -> Self {
        let url = |u: &str| agentwatch_http::shown_url(u);
        let mut shown = self.clone();
        shown.opencode.servers = self.opencode.servers.iter().map(|u| url(u)).collect();
        shown.watchdog.llm.url = url(&self.watchdog.llm.url);
        shown.watchdog.dashboard_base_url = url(&self.watchdog.dashboard_base_url);
        shown.recover.router_url = self.recover.router_url.as_deref().map(url);
        shown.deck.telegram_api_base = url(&self.deck.telegram_api_base);
        for channel in &mut shown.channels {
            channel.url = channel.url.as_deref().map(url);
            channel.api_base = channel.api_base.as_deref().map(url);
        }
        shown
    }
}

#[cfg(test)]
mod tests;
