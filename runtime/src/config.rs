//! The effective configuration: defaults, the TOML file, its machine-local overlay, environment
//! variables, then `--set` flags, in that order (later wins).
//!
//! Keys are named as in the designs: `watchdog.detector.window` is `[watchdog.detector] window`.
//! Every file is checked on its own first, so an unknown key or a bad value is reported with the
//! file it came from; secrets are never stored here, only the names of the variables that hold them.

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

/// What [`load`] filled in because the configuration named none.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Defaulted {
    /// None of `opencode.servers`, `opencode.registry`, `opencode.db` was configured: the
    /// sources are the registry file and opencode's database (when they exist) and
    /// [`DEFAULT_OPENCODE_SERVER`] (when it answers).
    pub sources: bool,
    /// `channels` was not configured: the journal (a log channel) and, when `notify-send` is
    /// on PATH, the desktop.
    pub channels: bool,
    /// `watchdog.local_llm_enabled` was not configured: the second opinion is asked only while
    /// something answers at `watchdog.llm.url` (a model nobody set up is off, not a failure).
    pub local_llm: bool,
}

/// The server a configuration that names no source reads when it answers (opencode's port).
pub const DEFAULT_OPENCODE_SERVER: &str = "http://127.0.0.1:4096";

/// `[watchdog]`: the opencode loop watchdog.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WatchdogSection {
    /// Gates the whole watchdog: a disabled tick records nothing and exits 0.
    pub enabled: bool,
    /// Ask the local LLM for a second opinion on flagged trees.
    pub local_llm_enabled: bool,
    /// The model asked for second opinions; unset (or `--set watchdog.model=null`): the
    /// design's fallback, `verification.model`, else [`DEFAULT_LLM_MODEL`] ([`Config::llm_model`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    pub escalate_after_ticks: u32,
    /// A flagged judgement counts towards `escalate_after_ticks` only this many seconds after
    /// the last one counted (default 240), so the timer, `run`, `--follow` and manual runs
    /// escalate after the same wall time; an LLM "yes" still escalates at once.
    pub escalate_min_gap_s: u64,
    pub max_llm_opinions_per_tick: u32,
    /// Agent names with the lower `top` threshold (the design's `watchdog.read_only_agents`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub read_only_agents: Option<Vec<String>>,
    /// The `source` of alert events; default `agentwatch@<host>`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// Base URL for links in alerts; not set: where `[serve] listen` serves the pages
    /// (`http://127.0.0.1:8080/admin`), so a link follows the server. Empty: no links.
    pub dashboard_base_url: String,
    /// A tree whose newest call is older than this many seconds is stale: not judged as looping
    /// now, its open alert resolves (`resolve_stale`), and live sources (servers, opencode.db)
    /// report only sessions active within it. `0` means no limit (read and judge all history).
    pub stale_after_s: u64,
    /// A source the job is told to read (a configured or registry server, a configured
    /// database) that failed this many ticks in a row raises a `blind:{source}` alert; `0`: never.
    pub blind_after_ticks: u32,
    /// An alert still firing gets a reminder event this many seconds after its last one (as
    /// Alertmanager's `repeat_interval`, default 4 h; at most 30 days); `0`: never.
    pub repeat_interval_s: u64,
    pub detector: DetectConfig,
    pub llm: LlmSection,
}

impl Default for WatchdogSection {
    fn default() -> Self {
        Self {
            enabled: true,
            local_llm_enabled: true,
            model: None,
            escalate_after_ticks: alert_state::DEFAULT_ESCALATE_AFTER_TICKS,
            escalate_min_gap_s: DEFAULT_ESCALATE_MIN_GAP_S,
            max_llm_opinions_per_tick: alert_state::DEFAULT_MAX_LLM_OPINIONS_PER_TICK,
            read_only_agents: None,
            source: None,
            dashboard_base_url: "http://127.0.0.1:8080/admin".to_owned(),
            stale_after_s: DEFAULT_STALE_AFTER_S,
            blind_after_ticks: 3,
            repeat_interval_s: 4 * 3_600,
            detector: DetectConfig::default(),
            llm: LlmSection::default(),
        }
    }
}

/// The model asked when neither `watchdog.model` nor `verification.model` names one.
pub const DEFAULT_LLM_MODEL: &str = "qwen2.5-coder-router:14b";

/// `[verification]`: the design's router verification settings; only `model` is read here
/// (the second opinion's model when `watchdog.model` is unset).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct VerificationSection {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
}

/// `[local_compute]`: `enabled = false` keeps every local model call off, whatever
/// `watchdog.local_llm_enabled` says (the design's global gate).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LocalComputeSection {
    pub enabled: bool,
}

impl Default for LocalComputeSection {
    fn default() -> Self {
        Self { enabled: true }
    }
}

/// `watchdog.stale_after_s` by default: an hour without a new call.
pub const DEFAULT_STALE_AFTER_S: u64 = 3600;
/// Default of `watchdog.escalate_min_gap_s`: with 3 counted judgements an alert escalates about
/// ten minutes after it opened, however often the job judges.
pub const DEFAULT_ESCALATE_MIN_GAP_S: u64 = 240;

/// The longest `watchdog.stale_after_s` (30 days); `0` means no limit.
pub const MAX_STALE_AFTER_S: u64 = 30 * 86_400;

impl WatchdogSection {
    /// The time (unix ms) before which a tree's newest call makes it stale at `now` (unix
    /// seconds); `None` when `stale_after_s = 0` (no limit).
    pub fn stale_cutoff_ms(&self, now: i64) -> Option<i64> {
        (self.stale_after_s > 0).then(|| {
            let age = i64::try_from(self.stale_after_s).unwrap_or(i64::MAX);
            now.saturating_sub(age).saturating_mul(1000)
        })
    }
}

/// `[watchdog.llm]`: where the second opinion comes from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LlmSection {
    /// `http://127.0.0.1:11434` for Ollama, or an OpenAI-compatible base such as `…/v1`.
    pub url: String,
    /// `ollama` or `openai`.
    pub dialect: String,
    /// The environment variable holding the API key, if the endpoint needs one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_key_env: Option<String>,
    pub timeout_s: f64,
}

impl Default for LlmSection {
    fn default() -> Self {
        Self {
            url: "http://127.0.0.1:11434".to_owned(),
            dialect: "ollama".to_owned(),
            api_key_env: None,
            timeout_s: 20.0,
        }
    }
}

/// `[opencode]`: where sessions come from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OpencodeSection {
    /// Server base URLs, all read every tick.
    pub servers: Vec<String>,
    /// A registry file listing servers: a JSON list of URLs or of objects with a `url`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub registry: Option<String>,
    /// opencode's own database, read-only (sessions of TUIs that open no port).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub db: Option<String>,
    /// Basic-auth user.
    pub username: String,
    /// The environment variable holding the servers' password.
    pub password_env: String,
    pub connect_timeout_s: f64,
    pub request_timeout_s: f64,
    /// How long one server may take in one tick, all its requests together (unset: twice
    /// `request_timeout_s`): a server that lists many sessions and answers none of them costs
    /// this, whatever it lists; the sessions it left unread keep their cursors for the next tick.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source_deadline_s: Option<f64>,
    /// Message reads of one server in flight at once.
    pub max_parallel: u32,
    /// What a looping tree gets besides its alert: `alert` (nothing more) or `abort` (once its
    /// alert is critical, `POST /session/:id/abort` on its flagged sessions whose last call did
    /// not land, once per alert).
    pub on_loop: String,
}

impl OpencodeSection {
    /// Whether `on_loop = "abort"`.
    pub fn aborts(&self) -> bool {
        self.on_loop == "abort"
    }

    /// How long one server may take in one tick: `source_deadline_s`, else twice the request
    /// timeout (the listing and one round of message reads).
    pub fn source_deadline(&self) -> std::time::Duration {
        duration(
            self.source_deadline_s
                .unwrap_or(2.0 * self.request_timeout_s),
        )
    }
}

impl Default for OpencodeSection {
    fn default() -> Self {
        Self {
            servers: Vec::new(),
            registry: None,
            db: None,
            username: "opencode".to_owned(),
            password_env: "OPENCODE_SERVER_PASSWORD".to_owned(),
            connect_timeout_s: 2.0,
            request_timeout_s: 10.0,
            source_deadline_s: None,
            max_parallel: 4,
            on_loop: "alert".to_owned(),
        }
    }
}

/// `[claude]` (and the other agents' sections): where an agent writes its session transcripts,
/// read where they are with nothing to configure.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TranscriptsSection {
    /// Read the agent's transcripts whenever its directory exists.
    pub enabled: bool,
    /// The agent's directory (`[claude]`: `$CLAUDE_CONFIG_DIR`, else `~/.claude`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dir: Option<String>,
}

impl Default for TranscriptsSection {
    fn default() -> Self {
        Self {
            enabled: true,
            dir: None,
        }
    }
}

impl TranscriptsSection {
    /// The directory to read: `dir` when set, else the agent's variable (`env_var`), else
    /// `default` under the home directory.
    pub fn directory(&self, env_var: &str, default: &str, env: Env<'_>) -> PathBuf {
        self.directory_under(env_var, "", default, env)
    }

    /// [`Self::directory`] where the agent's variable names a home and its directory is
    /// `under` it (Gemini CLI: `$GEMINI_CLI_HOME/.gemini`).
    pub fn directory_under(
        &self,
        env_var: &str,
        under: &str,
        default: &str,
        env: Env<'_>,
    ) -> PathBuf {
        match (&self.dir, env(env_var).filter(|v| !v.is_empty())) {
            (Some(dir), _) => expand_home(dir, env),
            (None, Some(home)) if under.is_empty() => PathBuf::from(home),
            (None, Some(home)) => PathBuf::from(home).join(under),
            (None, None) => expand_home(default, env),
        }
    }
}

/// `[follow]`: `agentwatch watch --follow`, the servers' event streams.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FollowSection {
    /// `agentwatch run` follows the event streams instead of ticking opencode every
    /// `run.watch_interval_s` (which stays the poll of a server without a stream).
    pub enabled: bool,
    /// The alert lifecycle runs at most once per this many seconds (the events in between are
    /// judged together).
    pub min_interval_s: u64,
    /// A stream that sends nothing (opencode's heartbeat comes every 10 s) for this long is
    /// dropped and opened again.
    pub heartbeat_s: u64,
    /// The longest wait between two attempts to open a dropped stream (the wait doubles from
    /// one second).
    pub max_backoff_s: u64,
}

impl Default for FollowSection {
    fn default() -> Self {
        Self {
            enabled: false,
            min_interval_s: 2,
            heartbeat_s: 30,
            max_backoff_s: 30,
        }
    }
}

/// `[serve]`: the admin pages, JSON API and metrics (`agentwatch serve`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServeSection {
    /// Serve inside `agentwatch run` (the `serve` command serves whatever this says).
    pub enabled: bool,
    /// `ADDR:PORT`. Anything but a loopback address needs a token.
    pub listen: String,
    /// The environment variable holding the token: when set, every POST needs
    /// `Authorization: Bearer <token>`, and the server may listen beyond loopback (where every
    /// request needs it).
    pub token_env: String,
    /// Host names the server may be reached by, besides its IP addresses and `localhost` (a
    /// request addressed to any other name is refused: DNS rebinding).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub allowed_hosts: Vec<String>,
}

/// The address `serve` listens on by default.
pub const DEFAULT_SERVE_LISTEN: &str = "127.0.0.1:8080";

impl Default for ServeSection {
    fn default() -> Self {
        Self {
            enabled: false,
            listen: DEFAULT_SERVE_LISTEN.to_owned(),
            token_env: "AGENTWATCH_SERVE_TOKEN".to_owned(),
            allowed_hosts: Vec::new(),
        }
    }
}

/// `[store]`: the SQLite database.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StoreSection {
    /// Default `$XDG_STATE_HOME/agentwatch/agentwatch.db`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
}

/// `[recover]`: `agentwatch recover`, the confirmed-loop restart of a service (the spec
/// `loop-recovery.md`). Paths default to the spec's; its environment variables override them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RecoverSection {
    /// The loop report the recovery reads (`$FLY_LOOP_REPORT`); empty: `loop-report.json`
    /// beside the store, where the opencode job writes it when `opencode_report` is on.
    pub report: String,
    /// The unit restarted on a confirmed loop (`my-agent.service`). Empty: the recover job is
    /// not set up (`agentwatch run` skips it, `agentwatch recover` says so, exit 78).
    pub unit: String,
    /// Have the opencode job write the loop report each tick from its verdicts (suspected when
    /// a tree is flagged; see `opencode_directory`), so an opencode loop drives the confirmed
    /// restart of `unit` with no probe of the user's own.
    pub opencode_report: bool,
    /// With `opencode_report`: only trees whose root session works under this directory count
    /// (the project the unit runs). Empty: every tree.
    pub opencode_directory: String,
    /// Restart through the user's service manager (`systemctl --user`).
    pub user: bool,
    /// The program and leading arguments that run systemctl, as an argv (no shell).
    pub systemctl: Vec<String>,
    /// The restart is killed and counts as failed after this long.
    pub restart_timeout_s: f64,
    /// The recovery notice a page polls (`$FLY_RECOVERY_NOTICE`); empty: none is written.
    pub notice: String,
    /// `KEY=value` file with `FLY_LOOP_ROUTER_URL`, `FLY_LOOP_MODEL`, `FLY_LOOP_ROUTER_KEY`;
    /// optional, refused when its mode is wider than 0640. Empty: none.
    pub env_file: String,
    /// OpenAI-compatible router base URL ending in `/v1` (`$FLY_LOOP_ROUTER_URL`). Needs `model`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub router_url: Option<String>,
    /// The router's model (`$FLY_LOOP_MODEL`). Needs `router_url`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    pub router_timeout_s: f64,
    /// Seconds between the `countdown` notice and the restart.
    pub countdown: u32,
    /// Nothing acts for this long after a successful restart.
    pub cooldown: u32,
    /// Two probes confirm a loop when at least this far apart (`$WD_LOOP_INTERVAL` - 30).
    pub min_probe_gap: u32,
    /// A report older than this is stale.
    pub max_report_age: u32,
    /// How long a loop had lasted when first reported (the notice's `stuckSeconds`).
    pub report_window: u32,
    /// After this many router vetoes of one streak, act without asking. Unset: never.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub veto_limit: Option<u32>,
}

impl Default for RecoverSection {
    fn default() -> Self {
        let policy = recovery_policy::loop_recovery::LoopRecoveryConfig::default();
        Self {
            report: String::new(),
            unit: String::new(),
            opencode_report: false,
            opencode_directory: String::new(),
            user: false,
            systemctl: vec!["systemctl".to_owned()],
            restart_timeout_s: 180.0,
            notice: String::new(),
            env_file: String::new(),
            router_url: None,
            model: None,
            router_timeout_s: 20.0,
            countdown: policy.countdown,
            cooldown: policy.cooldown,
            min_probe_gap: policy.min_probe_gap,
            max_report_age: policy.max_report_age,
            report_window: policy.report_window,
            veto_limit: None,
        }
    }
}

/// A job `agentwatch run` can run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum JobName {
    /// The sessions watchdog of every agent (`agentwatch watch --once`); `opencode`, its old
    /// name, still reads.
    #[serde(alias = "opencode")]
    Watch,
    /// The agent-deck watchdog (`agentwatch deck --once`).
    Deck,
    /// The confirmed-loop restart (`agentwatch recover --once`).
    Recover,
}

impl JobName {
    /// Every job, in the order ties are run.
    pub const ALL: [Self; 3] = [Self::Watch, Self::Deck, Self::Recover];

    /// The job's name, as in the config, the journal and its run lock.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Watch => "watch",
            Self::Deck => "deck",
            Self::Recover => "recover",
        }
    }

    /// Why the job has nothing to do under `config`, if it has not: watch while
    /// `watchdog.enabled = false`, recover while `recover.unit` names no unit. `agentwatch run`
    /// asks at every tick (so the switch works both ways without a restart) and `status` shows
    /// such a job as disabled, never as stale.
    pub fn disabled_because(self, config: &Config) -> Option<&'static str> {
        match self {
            Self::Watch if !config.watchdog.enabled => Some("watchdog.enabled = false"),
            Self::Recover if config.recover.unit.is_empty() => Some("recover.unit is not set"),
            _ => None,
        }
    }

    /// Seconds between the job's ticks: `run.watch_interval_s`, `deck.interval_s`,
    /// `run.recover_interval_s`.
    pub fn interval_s(self, config: &Config) -> u64 {
        match self {
            Self::Watch => config.run.watch_interval_s,
            Self::Deck => config.deck.interval_s,
            Self::Recover => config.run.recover_interval_s,
        }
    }
}

/// `[run]`: `agentwatch run`, every listed job in one long-running process.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RunSection {
    /// The jobs to run (`watch`, `deck`, `recover`), each scheduled from the start; a tick of
    /// watch while `watchdog.enabled = false`, or of recover while `recover.unit` is empty, does
    /// nothing (`result=disabled`).
    pub jobs: Vec<JobName>,
    /// Seconds between the sessions watchdog's ticks (the timer's 5 minutes); its old name
    /// reads too.
    #[serde(alias = "opencode_interval_s")]
    pub watch_interval_s: u64,
    /// Seconds between recover checks (the timer's minute). The deck's is `deck.interval_s`.
    pub recover_interval_s: u64,
}

impl Default for RunSection {
    fn default() -> Self {
        Self {
            jobs: JobName::ALL.to_vec(),
            watch_interval_s: 300,
            recover_interval_s: 60,
        }
    }
}

impl RunSection {
    /// Checks what no type can: each job listed once (the intervals are in [`BOUNDS`]).
    pub fn validate(&self) -> Result<(), Error> {
        for (i, job) in self.jobs.iter().enumerate() {
            if self.jobs[..i].contains(job) {
                return Err(config_err(format!(
                    "run.jobs: {} is listed twice",
                    job.as_str()
                )));
            }
        }
        Ok(())
    }
}

/// The spec's variables that set `[recover]` keys (the router key is read by `recover` itself).
pub const RECOVER_ENV: &[(&str, &str)] = &[
    ("FLY_LOOP_REPORT", "recover.report"),
    ("FLY_RECOVERY_NOTICE", "recover.notice"),
    ("FLY_LOOP_ROUTER_URL", "recover.router_url"),
    ("FLY_LOOP_MODEL", "recover.model"),
];

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
    fn validate(&self, at: &str) -> Result<(), Error> {
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
fn is_http_url(url: &str) -> bool {
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

fn xdg_dir(env: Env<'_>, var: &str, fallback: &str) -> Option<PathBuf> {
    env(var)
        .map(PathBuf::from)
        .or_else(|| env("HOME").map(|h| Path::new(&h).join(fallback)))
}

/// Expand a leading `~/` with `$HOME`.
pub fn expand_home(path: &str, env: Env<'_>) -> PathBuf {
    match (path.strip_prefix("~/"), env("HOME")) {
        (Some(rest), Some(home)) => Path::new(&home).join(rest),
        _ => PathBuf::from(path),
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

/// A TOML error as it may be shown: where (the key, or the line and column) and what kind of
/// problem, never the text there or the value (a config file may hold a token or a
/// secret-bearing URL, and an error reaches terminals and journals).
fn shown_toml_error(error: &toml::de::Error, text: Option<&str>) -> String {
    // Without the input, toml's own rendering is the message and the key path (`in `a.b``).
    let mut bare = error.clone();
    bare.set_input(None);
    let rendered = bare.to_string();
    let key = rendered
        .lines()
        .filter_map(|l| l.strip_prefix("in `").and_then(|k| k.strip_suffix('`')))
        .next_back();
    let position = match (error.span(), text) {
        (Some(span), Some(text)) => {
            let before = text.get(..span.start).unwrap_or(text);
            let line = before.matches('\n').count() + 1;
            let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
            Some(format!("line {line}, column {column}"))
        }
        _ => None,
    };
    let message = without_value(error.message());
    match (key, position) {
        (Some(key), _) => format!("{key}: {message}"),
        (None, Some(position)) => format!("{position}: {message}"),
        (None, None) => message,
    }
}

/// A serde/TOML message without the value it quotes: `invalid type: string "…", expected a
/// boolean` becomes `invalid type: string, expected a boolean`; the same for `invalid value` and
/// `unknown variant`. Other messages name keys or describe syntax, and are kept.
fn without_value(message: &str) -> String {
    let expected = |rest: &str| {
        rest.rfind(", expected ")
            .map_or("", |at| &rest[at..])
            .to_owned()
    };
    for prefix in ["invalid type: ", "invalid value: "] {
        if let Some(rest) = message.strip_prefix(prefix) {
            let kind = rest.split([' ', ',']).next().unwrap_or("value");
            return format!("{prefix}{kind}{}", expected(rest));
        }
    }
    if let Some(rest) = message.strip_prefix("unknown variant ") {
        return format!("unknown variant{}", expected(rest));
    }
    message.lines().next().unwrap_or_default().to_owned()
}

/// Read and check one TOML file on its own.
/// Read and check a config file. Every way it cannot be read is a configuration error (78)
/// naming the file: missing, unreadable, or not text at all (binary garbage is not "bad data"
/// to the user, who wrote it as config).
fn read_table(path: &Path) -> Result<Table, Error> {
    let text = std::fs::read(path)
        .map_err(|e| config_err(format!("config file {}: {e}", path.display())))
        .and_then(|bytes| {
            String::from_utf8(bytes).map_err(|e| {
                config_err(format!(
                    "config file {}: not UTF-8 text (invalid byte at offset {})",
                    path.display(),
                    e.utf8_error().valid_up_to()
                ))
            })
        })?;
    read_text(path, &text)
}

/// Check the text of `path` on its own.
fn read_text(path: &Path, text: &str) -> Result<Table, Error> {
    let table: Table = toml::from_str(text).map_err(|e| {
        config_err(format!(
            "{}: {}",
            path.display(),
            shown_toml_error(&e, Some(text))
        ))
    })?;
    Config::deserialize(Value::Table(table.clone())).map_err(|e| {
        config_err(format!(
            "{}: {}",
            path.display(),
            shown_toml_error(&e, None)
        ))
    })?;
    warn_if_readable_secrets(path, text);
    Ok(table)
}

/// A config file readable by group or others that holds what looks like a secret (a URL with
/// a password, a token or key in its query, a Slack-style key path, a `token`/`secret`/
/// `password`/`api_key` value) gets a warning on stderr naming the file and the fix, never the
/// secret. Secrets belong in the environment or a 0640 env file.
fn warn_if_readable_secrets(path: &Path, text: &str) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let Ok(meta) = std::fs::metadata(path) else {
            return;
        };
        let mode = meta.permissions().mode() & 0o777;
        if mode & 0o077 == 0 || !holds_secret(text) {
            return;
        }
        eprintln!(
            "{}agentwatch: warning: {} is readable by {} (mode {mode:04o}) and holds what looks like a secret (a token or a password in a URL): run chmod 600 on it, or move the secret to the environment",
            crate::journal::prefix(crate::journal::Priority::Warning),
            path.display(),
            if mode & 0o007 != 0 {
                "others"
            } else {
                "its group"
            }
        );
    }
    #[cfg(not(unix))]
    let _ = (path, text);
}

/// Whether TOML text holds what looks like a secret: a URL whose redacted form differs (a
/// password, a `?token=`/`key=` query, a Slack-style path key), or a secret-named key with a
/// string value.
fn holds_secret(text: &str) -> bool {
    let Ok(table) = toml::from_str::<Table>(text) else {
        return false;
    };
    fn walk(key: &str, value: &Value) -> bool {
        match value {
            Value::String(s) => {
                let lower = key.to_ascii_lowercase();
                let named = [
                    "token",
                    "secret",
                    "password",
                    "api_key",
                    "apikey",
                    "routing_key",
                ]
                .iter()
                .any(|n| lower == *n || lower.ends_with(&format!("_{n}")))
                    && !lower.ends_with("_env")
                    && !s.is_empty();
                let url = (s.starts_with("http://") || s.starts_with("https://"))
                    && agentwatch_http::shown_url(s) != *s;
                named || url
            }
            Value::Array(items) => items.iter().any(|v| walk(key, v)),
            Value::Table(t) => t.iter().any(|(k, v)| walk(k, v)),
            _ => false,
        }
    }
    table.iter().any(|(k, v)| walk(k, v))
}

/// Deep-merge `overlay` into `base`: tables merge key by key, anything else is replaced.
fn merge(base: &mut Table, overlay: Table) {
    for (key, value) in overlay {
        match (base.get_mut(&key), value) {
            (Some(Value::Table(b)), Value::Table(o)) => merge(b, o),
            (_, v) => {
                base.insert(key, v);
            }
        }
    }
}

/// Set `a.b.c = value` in a table, creating tables on the way.
pub(crate) fn set_path(table: &mut Table, dotted: &str, value: Value) -> Result<(), Error> {
    let mut parts: Vec<&str> = dotted.split('.').collect();
    let Some(last) = parts.pop().filter(|k| !k.is_empty()) else {
        return Err(Error::usage(format!("--set {dotted}: empty key")));
    };
    let mut here = table;
    for part in parts {
        let entry = here
            .entry(part.to_owned())
            .or_insert_with(|| Value::Table(Table::new()));
        here = match entry {
            Value::Table(t) => t,
            _ => {
                return Err(config_err(format!(
                    "--set {dotted}: `{part}` is not a table"
                )));
            }
        };
    }
    here.insert(last.to_owned(), value);
    Ok(())
}

/// Removes `a.b.c` from a table, if it is there.
fn remove_path(table: &mut Table, dotted: &str) {
    match dotted.split_once('.') {
        None => {
            table.remove(dotted);
        }
        Some((head, rest)) => {
            if let Some(Value::Table(inner)) = table.get_mut(head) {
                remove_path(inner, rest);
            }
        }
    }
}

/// A `--set` value: a TOML literal (`10`, `true`, `["a"]`, `"x"`), else a plain string.
fn parse_value(text: &str) -> Value {
    toml::from_str::<Table>(&format!("v = {text}"))
        .ok()
        .and_then(|mut t| t.remove("v"))
        .unwrap_or_else(|| Value::String(text.to_owned()))
}

/// One `--set KEY=VALUE` flag, the one dialect of every command and of `cargo xtask`: a dotted
/// key (a detector short key such as `top_min` stands for `watchdog.detector.top_min`) and a TOML
/// literal value (`10`, `true`, `["a"]`, `"x"`), else the text as a plain string.
pub fn parse_set(item: &str) -> Result<(String, Value), Error> {
    let (key, value) = item
        .split_once('=')
        .ok_or_else(|| Error::usage(format!("--set {item}: expected KEY=VALUE")))?;
    let key = key.trim();
    // The spec's name for `read_only_agents` is a short key too.
    let key = if detect_core::DETECT_KEYS.contains(&key) || key == "read_only_agent_keywords" {
        format!("watchdog.detector.{key}")
    } else {
        key.to_owned()
    };
    Ok((key, parse_value(value.trim())))
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

/// Every secret the configuration leads to: the values of the variables it names for tokens,
/// keys and passwords (`*_env`, the router key), and the secret parts of its URLs (user-info,
/// query values, path keys). What [`scrub_secrets`] removes.
pub fn secret_values(config: &Config, env: Env<'_>) -> Vec<String> {
    let mut vars: Vec<&str> = vec![
        &config.opencode.password_env,
        &config.serve.token_env,
        &config.deck.telegram_token_env,
        "FLY_LOOP_ROUTER_KEY",
    ];
    vars.extend(config.watchdog.llm.api_key_env.as_deref());
    for ch in &config.channels {
        vars.extend(ch.token_env.as_deref());
        vars.extend(ch.routing_key_env.as_deref());
    }
    let mut secrets: Vec<String> = vars
        .into_iter()
        .filter_map(env)
        .flat_map(|v| [v.trim().to_owned(), v])
        .collect();
    let mut urls: Vec<&str> = config.opencode.servers.iter().map(String::as_str).collect();
    urls.push(&config.watchdog.llm.url);
    urls.push(&config.deck.telegram_api_base);
    urls.extend(config.recover.router_url.as_deref());
    for ch in &config.channels {
        urls.extend(ch.url.as_deref());
        urls.extend(ch.api_base.as_deref());
        urls.extend(ch.urls.iter().flatten().map(String::as_str));
    }
    for url in urls {
        secrets.extend(agentwatch_http::url_parts(url).secrets);
    }
    // Longest first, so a secret that contains another is removed whole.
    secrets.retain(|s| s.trim().len() >= 4);
    secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
    secrets.dedup();
    secrets
}

/// `text` (an error a channel, a server or a file gave) as it may be shown, stored or logged:
/// every secret of the configuration removed, then what looks like one
/// ([`agentwatch_http::redact_text`]).
pub fn scrub_secrets(config: &Config, env: Env<'_>, text: &str) -> String {
    agentwatch_http::redact_text(&agentwatch_http::scrub(text, &secret_values(config, env)))
}

/// The longest timeout a key may set: one day.
pub const MAX_TIMEOUT_S: f64 = 86_400.0;

/// A validated timeout as a [`Duration`](std::time::Duration); total (an out-of-range value saturates, never panics).
pub fn duration(seconds: f64) -> std::time::Duration {
    std::time::Duration::try_from_secs_f64(seconds.clamp(0.0, MAX_TIMEOUT_S)).unwrap_or_default()
}

// ------------------------------------------------------------------------------------------------
// Bounds: one table of every number a file or a live edit may set

/// The range of one numeric key, and why its upper end is there: past it a tick could stall,
/// a signal could never fire, or memory would grow with the value. [`Config::validate`] checks
/// every row (a file, `--set`, the environment), and the live edits of `agentwatch serve` check
/// their key against the same row before they write; the README's table is [`bounds_table`].
#[derive(Debug, Clone, Copy)]
pub struct Bound {
    /// The dotted key; `channels[].x` is every channel's `x`.
    pub key: &'static str,
    pub min: f64,
    /// `min` itself is refused (a timeout of 0 s).
    pub min_exclusive: bool,
    pub max: f64,
    /// What the upper end keeps alive.
    pub why: &'static str,
    /// The values the key has in a configuration (none when unset).
    values: fn(&Config) -> Vec<f64>,
}

impl Bound {
    /// Whether `value` lies within the range.
    pub fn admits(&self, value: f64) -> bool {
        let above_min = if self.min_exclusive {
            value > self.min
        } else {
            value >= self.min
        };
        value.is_finite() && above_min && value <= self.max
    }

    /// The range in words: `from 1 to 10000`, `> 0 and at most 600`.
    pub fn range(&self) -> String {
        if self.min_exclusive {
            format!("> {} and at most {}", self.min, self.max)
        } else {
            format!("from {} to {}", self.min, self.max)
        }
    }

    /// The error for a value outside the range, naming the key and the bound (not the value).
    pub fn refusal(&self, key: &str) -> String {
        format!("{key}: must be {} ({})", self.range(), self.why)
    }
}

/// The longest a detector count may be: the window and every count within it.
pub const MAX_DETECTOR_COUNT: f64 = 10_000.0;
/// The longest a network or process timeout may be: a tick waits for it.
pub const MAX_CALL_TIMEOUT_S: f64 = 600.0;
/// A day in seconds: the longest interval or hold.
const DAY: f64 = 86_400.0;

macro_rules! bound {
    ($key:literal, $min:expr, $excl:expr, $max:expr, $why:literal, |$c:ident| $values:expr) => {
        Bound {
            key: $key,
            min: $min,
            min_exclusive: $excl,
            max: $max,
            why: $why,
            values: |$c: &Config| $values,
        }
    };
}

/// Every numeric key of the configuration with its range.
pub const BOUNDS: &[Bound] = &[
    bound!(
        "watchdog.detector.window",
        1.0,
        false,
        MAX_DETECTOR_COUNT,
        "the window is kept and scanned for every session each tick",
        |c| vec![c.watchdog.detector.window as f64]
    ),
    bound!(
        "watchdog.detector.min_calls",
        1.0,
        false,
        MAX_DETECTOR_COUNT,
        "no signal fires before a span holds this many calls",
        |c| vec![c.watchdog.detector.min_calls as f64]
    ),
    bound!(
        "watchdog.detector.top_min",
        1.0,
        false,
        MAX_DETECTOR_COUNT,
        "`top` counts within the window: at most `window`",
        |c| vec![f64::from(c.watchdog.detector.top_min)]
    ),
    bound!(
        "watchdog.detector.top_min_ro",
        1.0,
        false,
        MAX_DETECTOR_COUNT,
        "`top` counts within the window: at most `window`",
        |c| vec![f64::from(c.watchdog.detector.top_min_ro)]
    ),
    bound!(
        "watchdog.detector.cum_min",
        1.0,
        false,
        MAX_DETECTOR_COUNT,
        "`slow` must be reachable by a session",
        |c| vec![f64::from(c.watchdog.detector.cum_min)]
    ),
    bound!(
        "watchdog.detector.cycle_min",
        1.0,
        false,
        MAX_DETECTOR_COUNT,
        "`cycle` must be reachable by a session",
        |c| vec![f64::from(c.watchdog.detector.cycle_min)]
    ),
    bound!(
        "watchdog.detector.repeat_min",
        1.0,
        false,
        MAX_DETECTOR_COUNT,
        "`repeat` must be reachable by a session",
        |c| vec![f64::from(c.watchdog.detector.repeat_min)]
    ),
    bound!(
        "watchdog.detector.dup_min",
        0.0,
        true,
        1.0,
        "a share of the window",
        |c| vec![c.watchdog.detector.dup_min]
    ),
    bound!(
        "watchdog.detector.cover_min",
        0.0,
        true,
        1_000.0,
        "`coverage` must be reachable within a window",
        |c| vec![c.watchdog.detector.cover_min]
    ),
    bound!(
        "watchdog.detector.reread_min",
        0.0,
        true,
        1_000.0,
        "`reread` must be reachable within a window",
        |c| vec![c.watchdog.detector.reread_min]
    ),
    bound!(
        "watchdog.escalate_after_ticks",
        1.0,
        false,
        1_000.0,
        "an alert escalates within days, not never",
        |c| vec![f64::from(c.watchdog.escalate_after_ticks)]
    ),
    bound!(
        "watchdog.escalate_min_gap_s",
        0.0,
        false,
        86_400.0,
        "0: every judgement counts; else at most a day between counted ones",
        |c| vec![c.watchdog.escalate_min_gap_s as f64]
    ),
    bound!(
        "watchdog.max_llm_opinions_per_tick",
        0.0,
        false,
        100.0,
        "each opinion is a call the tick waits for",
        |c| vec![f64::from(c.watchdog.max_llm_opinions_per_tick)]
    ),
    bound!(
        "watchdog.blind_after_ticks",
        0.0,
        false,
        1_000.0,
        "0: never; a failing source is reported within days",
        |c| vec![f64::from(c.watchdog.blind_after_ticks)]
    ),
    bound!(
        "watchdog.stale_after_s",
        0.0,
        false,
        MAX_STALE_AFTER_S as f64,
        "0: no limit; else 30 days",
        |c| vec![c.watchdog.stale_after_s as f64]
    ),
    bound!(
        "watchdog.repeat_interval_s",
        0.0,
        false,
        MAX_STALE_AFTER_S as f64,
        "0: never; else a reminder within 30 days",
        |c| vec![c.watchdog.repeat_interval_s as f64]
    ),
    bound!(
        "watchdog.llm.timeout_s",
        0.0,
        true,
        MAX_CALL_TIMEOUT_S,
        "the tick waits for it",
        |c| vec![c.watchdog.llm.timeout_s]
    ),
    bound!(
        "opencode.connect_timeout_s",
        0.0,
        true,
        MAX_CALL_TIMEOUT_S,
        "the tick waits for it",
        |c| vec![c.opencode.connect_timeout_s]
    ),
    bound!(
        "opencode.request_timeout_s",
        0.0,
        true,
        MAX_CALL_TIMEOUT_S,
        "the tick waits for it",
        |c| vec![c.opencode.request_timeout_s]
    ),
    bound!(
        "opencode.source_deadline_s",
        0.0,
        true,
        2.0 * MAX_CALL_TIMEOUT_S,
        "the tick waits for each source this long at most",
        |c| c.opencode.source_deadline_s.into_iter().collect()
    ),
    bound!(
        "opencode.max_parallel",
        1.0,
        false,
        64.0,
        "each read in flight is a thread and a connection",
        |c| vec![f64::from(c.opencode.max_parallel)]
    ),
    bound!(
        "act.max_blocks",
        1.0,
        false,
        1_000.0,
        "a session is stopped after at most this many refusals",
        |c| vec![f64::from(c.act.max_blocks)]
    ),
    bound!(
        "act.min_repeats",
        2.0,
        false,
        16.0,
        "the detector remembers a session's last 16 calls",
        |c| vec![f64::from(c.act.min_repeats)]
    ),
    bound!(
        "follow.min_interval_s",
        1.0,
        false,
        3_600.0,
        "the alert lifecycle runs at least hourly",
        |c| vec![c.follow.min_interval_s as f64]
    ),
    bound!(
        "follow.heartbeat_s",
        1.0,
        false,
        3_600.0,
        "a silent stream is reopened within an hour",
        |c| vec![c.follow.heartbeat_s as f64]
    ),
    bound!(
        "follow.max_backoff_s",
        1.0,
        false,
        3_600.0,
        "a dropped stream is retried within an hour",
        |c| vec![c.follow.max_backoff_s as f64]
    ),
    bound!(
        "run.watch_interval_s",
        1.0,
        false,
        DAY,
        "a tick at least daily",
        |c| vec![c.run.watch_interval_s as f64]
    ),
    bound!(
        "run.recover_interval_s",
        1.0,
        false,
        DAY,
        "a check at least daily",
        |c| vec![c.run.recover_interval_s as f64]
    ),
    bound!(
        "recover.restart_timeout_s",
        0.0,
        true,
        3_600.0,
        "the check waits for the restart",
        |c| vec![c.recover.restart_timeout_s]
    ),
    bound!(
        "recover.router_timeout_s",
        0.0,
        true,
        MAX_CALL_TIMEOUT_S,
        "the check waits for it",
        |c| vec![c.recover.router_timeout_s]
    ),
    bound!(
        "recover.countdown",
        0.0,
        false,
        3_600.0,
        "the restart comes within an hour of its notice",
        |c| vec![f64::from(c.recover.countdown)]
    ),
    bound!(
        "recover.cooldown",
        0.0,
        false,
        7.0 * DAY,
        "recovery acts again within a week",
        |c| vec![f64::from(c.recover.cooldown)]
    ),
    bound!(
        "recover.min_probe_gap",
        0.0,
        false,
        DAY,
        "two probes can confirm within a day",
        |c| vec![f64::from(c.recover.min_probe_gap)]
    ),
    bound!(
        "recover.max_report_age",
        1.0,
        false,
        DAY,
        "a report older than a day is not fresh",
        |c| vec![f64::from(c.recover.max_report_age)]
    ),
    bound!(
        "recover.report_window",
        0.0,
        false,
        DAY,
        "a duration shown on the notice",
        |c| vec![f64::from(c.recover.report_window)]
    ),
    bound!(
        "recover.veto_limit",
        0.0,
        false,
        100.0,
        "vetoes delay, never deny",
        |c| c.recover.veto_limit.map(f64::from).into_iter().collect()
    ),
    bound!(
        "deck.interval_s",
        1.0,
        false,
        DAY,
        "a tick at least daily",
        |c| vec![c.deck.interval_s as f64]
    ),
    bound!(
        "deck.min_tick_gap_s",
        0.0,
        false,
        3_600.0,
        "hook changes are looked at within an hour",
        |c| vec![c.deck.min_tick_gap_s as f64]
    ),
    bound!(
        "deck.hook_poll_s",
        1.0,
        false,
        3_600.0,
        "hook files are polled at least hourly",
        |c| vec![c.deck.hook_poll_s as f64]
    ),
    bound!(
        "deck.command_timeout_s",
        0.0,
        true,
        MAX_CALL_TIMEOUT_S,
        "the tick waits for it",
        |c| vec![c.deck.command_timeout_s]
    ),
    bound!(
        "deck.restart_timeout_s",
        0.0,
        true,
        3_600.0,
        "the tick waits for the restart",
        |c| vec![c.deck.restart_timeout_s]
    ),
    bound!(
        "deck.telegram_timeout_s",
        0.0,
        true,
        MAX_CALL_TIMEOUT_S,
        "the tick waits for it",
        |c| vec![c.deck.telegram_timeout_s]
    ),
    bound!(
        "deck.restart_guard.per_session_limit",
        1.0,
        false,
        100.0,
        "restarts in one window",
        |c| vec![f64::from(c.deck.restart_guard.per_session_limit)]
    ),
    bound!(
        "deck.restart_guard.window",
        1.0,
        false,
        DAY,
        "the limit's window",
        |c| vec![f64::from(c.deck.restart_guard.window)]
    ),
    bound!(
        "deck.restart_guard.global_spacing",
        0.0,
        false,
        DAY,
        "a restart can come within a day",
        |c| vec![f64::from(c.deck.restart_guard.global_spacing)]
    ),
    bound!(
        "deck.restart_guard.quiet_after_restart",
        0.0,
        false,
        DAY,
        "a session is watched again within a day",
        |c| vec![f64::from(c.deck.restart_guard.quiet_after_restart)]
    ),
    bound!(
        "deck.restart_guard.rate_limit_backoff",
        0.0,
        false,
        DAY,
        "a rate-limited session is looked at within a day",
        |c| vec![f64::from(c.deck.restart_guard.rate_limit_backoff)]
    ),
    bound!(
        "deck.restart_guard.poller_dedup",
        0.0,
        false,
        7.0 * DAY,
        "a poller is restarted again within a week",
        |c| vec![f64::from(c.deck.restart_guard.poller_dedup)]
    ),
    bound!(
        "deck.restart_guard.failures_before_escalation",
        0.0,
        false,
        100.0,
        "failed restarts escalate",
        |c| vec![f64::from(c.deck.restart_guard.failures_before_escalation)]
    ),
    bound!(
        "deck.waiting_patrol.threshold",
        1.0,
        false,
        DAY,
        "a waiting pane is nudged within a day",
        |c| vec![f64::from(c.deck.waiting_patrol.threshold)]
    ),
    bound!(
        "deck.waiting_patrol.nudge_dedup",
        0.0,
        false,
        7.0 * DAY,
        "a pane is nudged again within a week",
        |c| vec![f64::from(c.deck.waiting_patrol.nudge_dedup)]
    ),
    bound!(
        "channels[].rate_limit_s",
        0.0,
        false,
        DAY,
        "a channel hears of a new alert within a day",
        |c| c.channels.iter().map(|ch| ch.rate_limit_s as f64).collect()
    ),
    bound!(
        "channels[].timeout_s",
        0.0,
        true,
        MAX_CALL_TIMEOUT_S,
        "the tick waits for the delivery",
        |c| c.channels.iter().map(|ch| ch.timeout_s).collect()
    ),
    bound!(
        "channels[].ends_after_s",
        1.0,
        false,
        DAY,
        "Alertmanager resolves an alert no tick re-asserts",
        |c| c
            .channels
            .iter()
            .filter_map(|ch| ch.ends_after_s)
            .map(|s| s as f64)
            .collect()
    ),
];

/// The row of `key` (`channels[0].timeout_s` is the row of `channels[].timeout_s`).
pub fn bound_of(key: &str) -> Option<&'static Bound> {
    let general = match (key.find('['), key.find(']')) {
        (Some(open), Some(close)) if open < close => {
            format!("{}[]{}", &key[..open], &key[close + 1..])
        }
        _ => key.to_owned(),
    };
    BOUNDS.iter().find(|b| b.key == general)
}

/// Check every row of [`BOUNDS`], and that `top` can fire within the window.
fn check_bounds(config: &Config) -> Result<(), Error> {
    for bound in BOUNDS {
        for (i, value) in (bound.values)(config).into_iter().enumerate() {
            if !bound.admits(value) {
                let key = bound.key.replace("[]", &format!("[{i}]"));
                return Err(config_err(bound.refusal(&key)));
            }
        }
    }
    let d = &config.watchdog.detector;
    for (key, value) in [("top_min", d.top_min), ("top_min_ro", d.top_min_ro)] {
        if value as usize > d.window {
            return Err(config_err(format!(
                "watchdog.detector.{key}: must be at most window ({}): `top` counts within the window, so it could never fire",
                d.window
            )));
        }
    }
    Ok(())
}

/// The README's table of [`BOUNDS`]: key, range, why.
pub fn bounds_table() -> String {
    let mut out = String::from("| key | range | why the upper end |\n|---|---|---|\n");
    for b in BOUNDS {
        out.push_str(&format!("| `{}` | {} | {} |\n", b.key, b.range(), b.why));
    }
    out
}

/// A key of the default configuration, as `agentwatch man` lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyDefault {
    /// Dotted (`watchdog.detector.window`; a channel's keys under `channels[]`).
    pub key: String,
    /// The default as JSON text, which TOML reads the same for these values.
    pub value: String,
    /// The range [`BOUNDS`] allows, when it has a row for the key.
    pub range: Option<String>,
}

/// Every leaf key of [`Config::default()`] with its value and range, then a channel's keys
/// (`channels[].…`, from [`ChannelSection::default()`]). Lists of tables and unset (`null`)
/// keys are left out; `channels` (empty by default) is listed through the channel's keys.
pub fn default_keys() -> Vec<KeyDefault> {
    let mut keys = Vec::new();
    flatten_defaults(
        "",
        &serde_json::to_value(Config::default()).unwrap_or_default(),
        &mut keys,
    );
    let channel = serde_json::to_value(ChannelSection::default()).unwrap_or_default();
    flatten_defaults("channels[]", &channel, &mut keys);
    keys
}

/// The leaves of `value` (a table) under `prefix`, in the table's order.
fn flatten_defaults(prefix: &str, value: &serde_json::Value, out: &mut Vec<KeyDefault>) {
    use serde_json::Value as Json;
    let Some(table) = value.as_object() else {
        return;
    };
    for (key, v) in table {
        if prefix.is_empty() && key == "channels" {
            continue;
        }
        let dotted = if prefix.is_empty() {
            key.clone()
        } else {
            format!("{prefix}.{key}")
        };
        match v {
            Json::Object(_) => flatten_defaults(&dotted, v, out),
            Json::Array(items) if items.iter().any(Json::is_object) => {}
            Json::Null => {}
            other => out.push(KeyDefault {
                range: bound_of(&dotted).map(Bound::range),
                key: dotted,
                value: other.to_string(),
            }),
        }
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::code;

    fn no_env(_: &str) -> Option<String> {
        None
    }

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        std::fs::create_dir_all(dir).unwrap();
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    fn temp(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("aw-config-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    /// `run.jobs` by default holds the jobs whose systems are there.
    #[test]
    fn run_jobs_default_to_the_jobs_whose_systems_are_there() {
        let dir = temp("jobs");
        let bin = dir.join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        let deck = bin.join("agent-deck");
        std::fs::write(&deck, "#!/bin/sh\n").unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&deck, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let path = bin.display().to_string();
        let with_deck = move |k: &str| (k == "PATH").then(|| path.clone());
        let recover = "[recover]\nunit = \"sim.service\"\n";
        let listed = "[run]\njobs = [\"opencode\", \"deck\"]\n";
        // (config text, agent-deck on PATH, run.jobs)
        let cases: [(&str, bool, &[JobName]); 5] = [
            ("", false, &[JobName::Watch]),
            ("", true, &[JobName::Watch, JobName::Deck]),
            (
                "[deck]\ninterval_s = 60\n",
                false,
                &[JobName::Watch, JobName::Deck],
            ),
            (recover, false, &[JobName::Watch, JobName::Recover]),
            (listed, false, &[JobName::Watch, JobName::Deck]),
        ];
        for (text, on_path, jobs) in cases {
            let file = write(&dir, "config.toml", text);
            let env: Env<'_> = if on_path { &with_deck } else { &no_env };
            let loaded = load(Some(&file), &[], env).unwrap();
            assert_eq!(loaded.config.run.jobs, jobs, "{text:?} on PATH: {on_path}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn defaults_follow_the_design() {
        let loaded = load(None, &[], &no_env).unwrap();
        let c = loaded.config;
        assert!(c.watchdog.enabled && c.watchdog.local_llm_enabled);
        assert_eq!(c.watchdog.detector, DetectConfig::default());
        assert_eq!(
            (
                c.watchdog.escalate_after_ticks,
                c.watchdog.max_llm_opinions_per_tick
            ),
            (3, 3)
        );
        assert!(loaded.files.is_empty());
    }

    /// With no config: the seed's registry, opencode's database and port, the journal, and the
    /// desktop when notify-send is on PATH. Naming any source or channel replaces the defaults.
    #[test]
    fn unconfigured_sources_and_channels_default_and_explicit_config_replaces_them() {
        let dir = temp("defaults");
        let bin = dir.join("bin");
        write(&bin, "notify-send", "#!/bin/sh\n");
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(
            bin.join("notify-send"),
            std::fs::Permissions::from_mode(0o755),
        )
        .unwrap();
        let home = dir.join("home");
        let (home_s, bin_s) = (home.display().to_string(), bin.display().to_string());
        // (config file, notify-send on PATH, servers, default registry+db, channels)
        type Case<'a> = (&'a str, bool, &'a [&'a str], bool, &'a [&'a str]);
        let cases: &[Case<'_>] = &[
            // (config file, notify-send on PATH, servers, default registry+db, channels)
            (
                "",
                true,
                &[DEFAULT_OPENCODE_SERVER],
                true,
                &["journal", "desktop"],
            ),
            ("", false, &[DEFAULT_OPENCODE_SERVER], true, &["journal"]),
            (
                "[opencode]\nservers = [\"http://h:1\"]\n",
                true,
                &["http://h:1"],
                false,
                &["journal", "desktop"],
            ),
            (
                "[opencode]\nservers = []\n",
                false,
                &[],
                false,
                &["journal"],
            ),
            (
                "[opencode]\ndb = \"/x.db\"\n",
                false,
                &[],
                false,
                &["journal"],
            ),
            (
                "channels = []\n",
                true,
                &[DEFAULT_OPENCODE_SERVER],
                true,
                &[],
            ),
            (
                "[[channels]]\nname = \"mine\"\ntype = \"log\"\n",
                true,
                &[DEFAULT_OPENCODE_SERVER],
                true,
                &["mine"],
            ),
        ];
        for (i, (text, on_path, servers, default_files, channels)) in cases.iter().enumerate() {
            let file = write(&dir, &format!("c{i}.toml"), text);
            let env = |k: &str| match k {
                "HOME" => Some(home_s.clone()),
                "PATH" if *on_path => Some(bin_s.clone()),
                _ => None,
            };
            let c = load(Some(&file), &[], &env).unwrap().config;
            assert_eq!(c.opencode.servers, *servers, "case {i}: {text}");
            assert_eq!(c.defaulted.sources, *default_files, "case {i}");
            let data = home.join(".local/share/opencode");
            let registry =
                default_files.then(|| data.join("rc-servers.json").display().to_string());
            assert_eq!(c.opencode.registry, registry, "case {i}");
            let names: Vec<&str> = c.channels.iter().map(|c| c.name.as_str()).collect();
            assert_eq!(names, *channels, "case {i}: {text}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_server_without_its_scheme_is_refused_naming_the_fix() {
        for (url, ok) in [
            ("http://127.0.0.1:4096", true),
            ("HTTPS://h", true),
            ("localhost:4096", false),
            ("http://", false),
            ("ftp://h", false),
        ] {
            assert_eq!(check_server_url(url).is_ok(), ok, "{url}");
        }
        let e = check_server_url("localhost:4096").unwrap_err();
        assert!(e.contains("http://localhost:4096"), "{e}");
        let dir = temp("scheme");
        let file = write(
            &dir,
            "c.toml",
            "[opencode]\nservers = [\"localhost:4096\"]\n",
        );
        let e = load(Some(&file), &[], &no_env).unwrap_err();
        assert_eq!(e.exit_code(), code::CONFIG);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn file_then_overlay_then_env_then_flags() {
        let dir = temp("layers");
        let main = write(
            &dir,
            "config.toml",
            "[watchdog.detector]\nwindow = 50\ntop_min = 11\n[store]\npath = \"/from/file.db\"\n",
        );
        write(
            &dir,
            "config.local.toml",
            "[watchdog.detector]\ntop_min = 9\n",
        );
        let env = |k: &str| (k == "AGENTWATCH_DB").then(|| "/from/env.db".to_owned());
        let sets = [
            "window=45".to_owned(),
            "watchdog.local_llm_enabled=false".to_owned(),
        ];
        let loaded = load(Some(&main), &sets, &env).unwrap();
        let c = &loaded.config;
        assert_eq!(c.watchdog.detector.top_min, 9, "overlay wins over file");
        assert_eq!(c.watchdog.detector.window, 45, "flag wins over file");
        assert_eq!(
            c.store.path.as_deref(),
            Some("/from/env.db"),
            "env wins over file"
        );
        assert!(!c.watchdog.local_llm_enabled);
        assert_eq!(loaded.files.len(), 2);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Each row: file text or flag, what the error must name.
    #[test]
    fn unknown_keys_and_bad_values_are_named() {
        let dir = temp("bad");
        let rows = [
            ("[watchdog]\nenabeld = true\n", "enabeld"),
            ("[watchdog.detector]\nwindow = 0\n", "window"),
            ("[watchdog.detector]\ndup_min = 2.0\n", "dup_min"),
            ("[watchdog.detector]\ntop_min = \"x\"\n", "top_min"),
            ("[[channels]]\nname = \"a\"\ntype = \"webhook\"\n", "url"),
            (
                "[[channels]]\nname = \"a\"\ntype = \"alertmanager\"\n",
                "urls",
            ),
            (
                "[[channels]]\nname = \"a\"\ntype = \"alertmanager\"\nurls = [\"am:9093\"]\n",
                "urls",
            ),
            (
                "[[channels]]\nname = \"a\"\ntype = \"webhook\"\nurl = \"http://h\"\nmode = \"fax\"\n",
                "ntfy",
            ),
            (
                "[[channels]]\nname = \"a\"\ntype = \"desktop\"\nmin_severity = \"loud\"\n",
                "min_severity",
            ),
            ("[watchdog\nbroken", "config.toml"),
            ("[opencode]\nrequest_timeout_s = -1\n", "request_timeout_s"),
            (
                "[opencode]\nrequest_timeout_s = 1e300\n",
                "request_timeout_s",
            ),
            (
                "[watchdog.llm]\ntimeout_s = inf\n",
                "watchdog.llm.timeout_s",
            ),
            (
                "[recover]\nrestart_timeout_s = 1e300\n",
                "recover.restart_timeout_s",
            ),
            (
                "[deck]\ncommand_timeout_s = 1e300\n",
                "deck.command_timeout_s",
            ),
            (
                "[watchdog]\nstale_after_s = 99999999\n",
                "watchdog.stale_after_s",
            ),
            ("[watchdog]\nstale_after_s = -1\n", "stale_after_s"),
            (
                "[[channels]]\nname = \"a\"\ntype = \"log\"\ntimeout_s = 1e300\n",
                "channels[0].timeout_s",
            ),
        ];
        for (text, named) in rows {
            let path = write(&dir, "config.toml", text);
            let err = load(Some(&path), &[], &no_env).unwrap_err();
            assert!(err.to_string().contains(named), "{text:?}: {err}");
            assert_eq!(err.exit_code(), code::CONFIG, "{text:?}");
        }
        // A channel's mistakes fail at load, naming the key and the file that set it (issue 49):
        // an unknown type, a webhook URL without its scheme (never echoed: it may be a secret).
        for (text, named) in [
            (
                "[[channels]]\nname = \"a\"\ntype = \"log\"\n[[channels]]\nname = \"b\"\ntype = \"webhok\"\n",
                "channels[1].type: must be one of",
            ),
            (
                "[[channels]]\nname = \"h\"\ntype = \"webhook\"\nurl = \"hooks.example/T0/SECRET\"\n",
                "channels[0].url: must start with http:// or https://",
            ),
        ] {
            let path = write(&dir, "config.toml", text);
            let err = load(Some(&path), &[], &no_env).unwrap_err();
            let shown = err.to_string();
            assert!(
                shown.starts_with(&format!("{}: {named}", path.display())),
                "{shown}"
            );
            assert!(
                !shown.contains("webhok") && !shown.contains("SECRET"),
                "{shown}"
            );
            assert_eq!(err.exit_code(), code::CONFIG);
        }
        let set = ["channels=[{name = \"x\", type = \"pigeon\"}]".to_owned()];
        let err = load(None, &set, &no_env).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("--set channels: channels[0].type"),
            "{err}"
        );
        let err = load(None, &["watchdog.nonsense=1".to_owned()], &no_env).unwrap_err();
        assert!(err.to_string().contains("nonsense"), "{err}");
        // A config file that cannot be read at all is a configuration error too (78).
        let err = load(Some(&dir.join("missing.toml")), &[], &no_env).unwrap_err();
        assert_eq!(err.exit_code(), code::CONFIG);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Config errors name the key (or the line and column of a syntax error) and never echo
    /// the value or the offending line: a secret put in the wrong place must not reach a
    /// terminal or a journal through an error.
    #[test]
    fn detect_and_xtask_read_set_flags_in_the_config_dialect() {
        let flags = |sets: &[&str]| {
            let sets: Vec<String> = sets.iter().map(|s| (*s).to_owned()).collect();
            detector_from_flags(None, &sets)
        };
        let agents = |c: DetectConfig| c.read_only_agents;
        let plan_explore = vec!["plan".to_owned(), "explore".to_owned()];
        for sets in [
            &["read_only_agents=plan,explore"][..],
            &["read_only_agents=[\"plan\", \"explore\"]"],
            &["watchdog.detector.read_only_agents=plan, explore"],
            &["read_only_agent_keywords=plan,explore"],
        ] {
            assert_eq!(agents(flags(sets).unwrap()), plan_explore, "{sets:?}");
        }
        let precise = detector_from_flags(Some("precise"), &[]).unwrap();
        assert_eq!(flags(&["profile=\"precise\""]).unwrap(), precise);
        assert_eq!(
            flags(&["watchdog.detector.profile=precise"]).unwrap(),
            precise
        );
        let tuned = flags(&["top_min=10", "watchdog.detector.dup_min=1", "window=30"]).unwrap();
        assert_eq!((tuned.top_min, tuned.dup_min, tuned.window), (10, 1.0, 30));
        // The same flags mean the same through the full loader.
        let sets = vec![
            "top_min=10".to_owned(),
            "read_only_agents=plan,explore".to_owned(),
        ];
        let loaded = load(None, &sets, &no_env).unwrap().config;
        assert_eq!(loaded.watchdog.detector.top_min, 10);
        assert_eq!(loaded.watchdog.detector.read_only_agents, plan_explore);

        for (sets, names) in [
            (&["opencode.db=/x"][..], "opencode.db"),
            (&["top_min=many"], "top_min"),
            (&["window=0"], "window"),
            (&["top_min"], "KEY=VALUE"),
            (&["bogus_key=1"], "bogus_key"),
        ] {
            let err = flags(sets).unwrap_err().to_string();
            assert!(err.contains(names), "{sets:?}: {err}");
            assert!(!err.contains("many"), "a value is never echoed: {err}");
        }
    }

    #[test]
    fn every_config_read_error_is_a_config_error_naming_the_file() {
        let dir = temp("read-errors");
        std::fs::create_dir_all(&dir).unwrap();
        let garbage = dir.join("garbage.toml");
        std::fs::write(&garbage, [0x7f, b'E', b'L', b'F', 0xff, 0xfe, 0x00, 0x9c]).unwrap();
        let half = dir.join("half.toml");
        std::fs::write(&half, "[watchdog]\nstale_after_s = 12").unwrap();
        std::fs::write(&half, "[watchdog\nstale_af").unwrap();
        let missing = dir.join("missing.toml");
        for (path, says) in [
            (&garbage, "not UTF-8 text"),
            (&half, "half.toml"),
            (&missing, "missing.toml"),
            (&dir, "read-errors"),
        ] {
            let err = load(Some(path), &[], &no_env).unwrap_err();
            assert_eq!(err.exit_code(), 78, "{}: {err}", path.display());
            let shown = err.to_string();
            assert!(shown.contains(&path.display().to_string()), "{shown}");
            assert!(shown.contains(says), "{shown}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn config_errors_name_the_key_and_never_echo_the_value() {
        const SECRET: &str = "sk-live-SECRET123";
        let dir = temp("secret-errors");
        let files = [
            (
                format!("[watchdog]\nmodel = {SECRET}\n"),
                "line 2, column 9",
            ),
            (
                format!("[watchdog]\nmodel = \"ok\"\nenabled = \"{SECRET}\"\n"),
                "watchdog.enabled",
            ),
            (
                format!("[watchdog]\nescalate_after_ticks = \"{SECRET}\"\n"),
                "watchdog.escalate_after_ticks",
            ),
            (
                format!("[watchdog.llm]\ndialect = \"{SECRET}\"\n"),
                "watchdog.llm.dialect",
            ),
            (
                format!(
                    "[[channels]]\nname = \"a\"\ntype = \"webhook\"\nurl = \"https://h/x\"\nmode = \"{SECRET}\"\n"
                ),
                "channels[0].mode",
            ),
            (
                format!(
                    "[[channels]]\nname = \"a\"\ntype = \"log\"\nmin_severity = \"{SECRET}\"\n"
                ),
                "channels[0].min_severity",
            ),
            (format!("[serve]\nlisten = \"{SECRET}\"\n"), "serve.listen"),
            (
                format!("[watchdog]\nenabled = [\"{SECRET}\", 1]\n"),
                "watchdog.enabled: invalid type: sequence",
            ),
        ];
        for (text, named) in &files {
            let path = write(&dir, "config.toml", text);
            let err = load(Some(&path), &[], &no_env).unwrap_err().to_string();
            assert!(err.contains(named), "{text:?}: {err}");
            assert!(!err.contains("SECRET123"), "{text:?} echoed: {err}");
            assert!(!err.contains('\n'), "{text:?}: one line: {err}");
        }
        for set in [
            format!("watchdog.enabled=\"{SECRET}\""),
            format!("watchdog.enabled={SECRET}"),
            format!("top_min={SECRET}"),
            format!("watchdog.stale_after_s=\"{SECRET}\""),
        ] {
            let err = load(None, std::slice::from_ref(&set), &no_env)
                .unwrap_err()
                .to_string();
            let key = set.split('=').next().unwrap_or_default();
            assert!(
                err.contains(key.rsplit('.').next().unwrap_or(key)),
                "{set}: {err}"
            );
            assert!(!err.contains("SECRET123"), "{set} echoed: {err}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// The README's table of bounds is the code's (`AGENTWATCH_BLESS_README=1` rewrites it).
    #[test]
    fn the_readme_lists_every_bound() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../README.md");
        let readme = std::fs::read_to_string(&path).unwrap();
        let start = "<!-- bounds:start (runtime/src/config.rs BOUNDS; a test keeps this table in step) -->\n";
        let end = "<!-- bounds:end -->";
        let (head, rest) = readme
            .split_once(start)
            .expect("the README's bounds section");
        let (table, tail) = rest.split_once(end).expect("its end");
        if std::env::var_os("AGENTWATCH_BLESS_README").is_some() {
            std::fs::write(&path, format!("{head}{start}{}{end}{tail}", bounds_table())).unwrap();
            return;
        }
        assert_eq!(table, bounds_table(), "run with AGENTWATCH_BLESS_README=1");
    }

    /// Each bound refuses the value past it and takes the value at it, by file and by `--set`.
    #[test]
    fn every_bound_is_enforced_at_both_ends() {
        for b in BOUNDS {
            let key = b.key.replace("channels[].", "channels.0.");
            if key.starts_with("channels.") {
                continue;
            }
            for (value, ok) in [
                (b.max, true),
                (b.max + 1.0, false),
                (b.min, !b.min_exclusive),
            ] {
                let literal = if b.max.fract() == 0.0 && b.min.fract() == 0.0 && !b.min_exclusive {
                    format!("{}", value as i64)
                } else {
                    format!("{value:?}")
                };
                let mut sets = vec![format!("{key}={literal}")];
                if key == "watchdog.detector.top_min" || key == "watchdog.detector.top_min_ro" {
                    sets.push(format!(
                        "watchdog.detector.window={}",
                        MAX_DETECTOR_COUNT as i64
                    ));
                }
                if key == "watchdog.detector.window" && value < 12.0 {
                    sets.push("top_min=1".to_owned());
                    sets.push("top_min_ro=1".to_owned());
                }
                let got = load(None, &sets, &no_env);
                assert_eq!(got.is_ok(), ok, "{sets:?}: {got:?}");
                if let Err(e) = got {
                    assert!(e.to_string().contains(&key), "{key}: {e}");
                }
            }
        }
    }

    /// What counts as a secret worth a warning in a readable config file.
    #[test]
    fn secrets_in_config_text_are_recognised() {
        let rows = [
            ("[[channels]]\nurl = \"https://h/x?token=abc\"\n", true),
            (
                "[[channels]]\nurl = \"https://hooks.slack.com/services/T000/B000/XXXX\"\n",
                true,
            ),
            (
                "[opencode]\nservers = [\"http://user:pw@host:4096\"]\n",
                true,
            ),
            ("[[channels]]\nbot_token = \"123:abc\"\n", true),
            ("[[channels]]\nurl = \"https://h/events\"\n", false),
            ("[[channels]]\nrouting_key_env = \"PD_KEY\"\n", false),
            (
                "[opencode]\npassword_env = \"OPENCODE_SERVER_PASSWORD\"\n",
                false,
            ),
            ("not toml [", false),
        ];
        for (text, secret) in rows {
            assert_eq!(holds_secret(text), secret, "{text:?}");
        }
    }

    #[test]
    fn printed_config_loads_back_identical() {
        let sets = [
            "top_min=7".to_owned(),
            "opencode.servers=[\"http://127.0.0.1:4096\"]".to_owned(),
        ];
        let c = load(None, &sets, &no_env).unwrap().config;
        let mut back: Config = toml::from_str(&c.to_toml()).unwrap();
        // Which parts were defaults is known to `load`, not written to the file.
        assert!(c.defaulted.channels && !back.defaulted.channels);
        back.defaulted = c.defaulted;
        assert_eq!(back, c);
    }

    #[test]
    fn the_design_model_fallback_and_local_compute_gate() {
        let effective = |text: &str, sets: &[&str]| {
            let dir = temp("model");
            let path = write(&dir, "config.toml", text);
            let sets: Vec<String> = sets.iter().map(|s| (*s).to_owned()).collect();
            load(Some(&path), &sets, &no_env).unwrap().config
        };
        let c = effective("", &[]);
        assert_eq!(c.llm_model(), DEFAULT_LLM_MODEL);
        assert!(c.local_llm_enabled());
        let both = "[watchdog]\nmodel = \"mine\"\n[verification]\nmodel = \"verifier\"\n";
        assert_eq!(effective(both, &[]).llm_model(), "mine");
        // `null` (TOML has none) or an absent key falls back to `verification.model`.
        let unset = effective(both, &["watchdog.model=null"]);
        assert_eq!(unset.watchdog.model, None, "never the text \"null\"");
        assert_eq!(unset.llm_model(), "verifier");
        assert_eq!(
            effective("[verification]\nmodel = \"verifier\"\n", &[]).llm_model(),
            "verifier"
        );
        assert_eq!(
            effective(both, &["watchdog.model=\"\""]).llm_model(),
            "verifier"
        );
        // Either gate off keeps the local model off.
        let off = effective("[local_compute]\nenabled = false\n", &[]);
        assert!(off.watchdog.local_llm_enabled && !off.local_llm_enabled());
        assert!(!off.alert_config("h").local_llm_enabled);
        let off = effective("", &["watchdog.local_llm_enabled=false"]);
        assert!(!off.alert_config("h").local_llm_enabled);
        // Printed, the keys load back the same.
        let printed = unset.to_toml();
        let back: Config = toml::from_str(&printed).unwrap();
        assert_eq!(back.verification, unset.verification);
        assert_eq!(back.watchdog.model, None);
    }

    #[test]
    fn recover_follows_the_spec_variables() {
        let c = load(None, &[], &no_env).unwrap().config.recover;
        // Generic defaults: no unit (recover not set up), the report beside the store, no
        // notice, plain systemctl.
        assert_eq!((c.unit.as_str(), c.report.as_str()), ("", ""));
        assert_eq!((c.notice.as_str(), c.env_file.as_str()), ("", ""));
        assert_eq!(c.systemctl, ["systemctl"]);
        assert_eq!((c.min_probe_gap, c.cooldown, c.countdown), (270, 3600, 60));
        let env = |k: &str| match k {
            "FLY_LOOP_REPORT" => Some("/r/loop.json".to_owned()),
            "FLY_RECOVERY_NOTICE" => Some("/n/notice.json".to_owned()),
            "FLY_LOOP_ROUTER_URL" => Some("http://127.0.0.1:4000/v1".to_owned()),
            "FLY_LOOP_MODEL" => Some("free".to_owned()),
            "WD_LOOP_INTERVAL" => Some("600".to_owned()),
            _ => None,
        };
        let c = load(None, &[], &env).unwrap().config.recover;
        assert_eq!(c.report, "/r/loop.json");
        assert_eq!(c.notice, "/n/notice.json");
        assert_eq!(c.router_url.as_deref(), Some("http://127.0.0.1:4000/v1"));
        assert_eq!(c.model.as_deref(), Some("free"));
        assert_eq!(c.min_probe_gap, 570);
        let bad = |k: &str| (k == "WD_LOOP_INTERVAL").then(|| "5m".to_owned());
        let err = load(None, &[], &bad).unwrap_err();
        assert!(err.to_string().contains("WD_LOOP_INTERVAL"), "{err}");
        for set in ["recover.unit=-x", "recover.systemctl=[]"] {
            let err = load(None, &[set.to_owned()], &no_env).unwrap_err();
            assert_eq!(err.exit_code(), code::CONFIG, "{set}: {err}");
        }
    }
}
