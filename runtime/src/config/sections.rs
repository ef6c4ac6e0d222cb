//! The file model: each section of the configuration file, its defaults and the checks its type
//! cannot make.

use super::*;

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
