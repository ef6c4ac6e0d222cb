//! The command line's arguments, one struct per subcommand, and how each becomes the runtime's
//! options. Flags are defined here only; the runtime knows nothing of clap.

use agentwatch_runtime::{doctor, jobs, operator, serve};
use std::path::PathBuf;

#[derive(Debug, clap::Args)]
pub struct DeckArgs {
    /// Run one tick and exit (a timer or cron repeats it); without it, run as a daemon.
    #[arg(long)]
    pub once: bool,
    /// Decide everything, do nothing: no restart, no nudge, no message, no file or store write.
    #[arg(long)]
    pub dry_run: bool,
    /// Log every decision (also the quiet ones) and every session seen.
    #[arg(long)]
    pub verbose: bool,
    /// Print one JSON object per tick.
    #[arg(long)]
    pub json: bool,
    /// Configuration file (default `$XDG_CONFIG_HOME/agentwatch/config.toml`).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// The SQLite database (default `$XDG_STATE_HOME/agentwatch/agentwatch.db`).
    #[arg(long)]
    pub db: Option<PathBuf>,
    /// Override a configuration key (`--set deck.interval_s=30`; repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// The tick's time, unix seconds (with `--once`; for tests and replays).
    #[arg(long)]
    pub now: Option<i64>,
}

#[derive(Debug, clap::Args)]
pub struct RecoverArgs {
    /// Run one check and exit (a timer repeats it); without it, keep running.
    #[arg(long)]
    pub once: bool,
    /// Decide everything, do nothing: no notice, no restart, no state written.
    #[arg(long)]
    pub dry_run: bool,
    /// Configuration file (default `$XDG_CONFIG_HOME/agentwatch/config.toml`).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// The run's time, unix seconds (for tests and replays; default the clock). Fixes the clock
    /// for the whole run: the countdown is then simulated, not slept.
    #[arg(long)]
    pub now: Option<i64>,
    /// Print the run (decisions, notices written, restart) as one JSON object.
    #[arg(long)]
    pub json: bool,
    /// The SQLite database (default `$XDG_STATE_HOME/agentwatch/agentwatch.db`).
    #[arg(long)]
    pub db: Option<PathBuf>,
    /// Override a configuration key (`--set recover.unit=my-agent.service`; repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
}

#[derive(Debug, clap::Args)]
pub struct WatchArgs {
    /// Run one tick and exit (a timer repeats it); without it (or `--follow`), keep running.
    #[arg(long)]
    pub once: bool,
    /// Decide everything, send nothing, write nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Print every session's verdict.
    #[arg(long)]
    pub verbose: bool,
    /// Print one JSON object describing the tick.
    #[arg(long)]
    pub json: bool,
    /// Configuration file (default `$XDG_CONFIG_HOME/agentwatch/config.toml`).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// An opencode server URL, in addition to the configured ones (repeatable).
    #[arg(long = "server", value_name = "URL")]
    pub servers: Vec<String>,
    /// A session file or `opencode export` JSON to judge as a source (repeatable).
    #[arg(long = "sessions", value_name = "FILE")]
    pub session_files: Vec<String>,
    /// opencode's own database to read (read-only), instead of the configured `opencode.db`.
    #[arg(long = "opencode-db", value_name = "PATH")]
    pub opencode_db: Option<PathBuf>,
    /// Judge the built-in demo sessions (alerts to a log channel, no model asked), in a fresh
    /// store in a temporary directory, or in `--db` (then `agentwatch serve --db` shows it).
    #[arg(long)]
    pub demo: bool,
    /// The SQLite database (default `$XDG_STATE_HOME/agentwatch/agentwatch.db`).
    #[arg(long)]
    pub db: Option<PathBuf>,
    /// Override a configuration key (`--set watchdog.detector.top_min=10`; repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// The tick's time, unix seconds (for tests and replays; default the clock).
    #[arg(long)]
    pub now: Option<i64>,
    /// Read every session's whole history, ignoring the stored cursors (for comparisons).
    #[arg(long)]
    pub full_read: bool,
    /// Follow the servers' event streams and judge each change as it happens (until
    /// SIGTERM/SIGINT); a server without the stream is polled.
    #[arg(long, conflicts_with_all = ["once", "now", "full_read", "demo", "session_files"])]
    pub follow: bool,
}

#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// Decide everything, do nothing, in every job; no tick is stored.
    #[arg(long)]
    pub dry_run: bool,
    /// Configuration file (default `$XDG_CONFIG_HOME/agentwatch/config.toml`).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// The SQLite database (default `$XDG_STATE_HOME/agentwatch/agentwatch.db`).
    #[arg(long)]
    pub db: Option<PathBuf>,
    /// Override a configuration key for every job (`--set run.jobs=["watch"]`; repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
}

#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// Address and port to listen on (default `[serve] listen`, else 127.0.0.1:8080). Anything
    /// but loopback needs the token named by `serve.token_env`.
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<String>,
    /// The SQLite database (default `$XDG_STATE_HOME/agentwatch/agentwatch.db`).
    #[arg(long)]
    pub db: Option<PathBuf>,
    /// Configuration file (default `$XDG_CONFIG_HOME/agentwatch/config.toml`); live edits go to
    /// `config.local.toml` beside it.
    #[arg(long)]
    pub config: Option<PathBuf>,
}

#[derive(Debug, clap::Args)]
pub struct ReplayArgs {
    /// loop-recovery | restart-guard | waiting-patrol | alerts
    pub policy: String,
    /// JSON-lines timeline; `-` or omitted reads standard input.
    pub file: Option<String>,
}

/// Global so a subcommand takes them before or after its own arguments: `alerts ack --db X
/// KEY`, `alerts ack KEY --db X` and `alerts --db X ack KEY` are the same command.
#[derive(Debug, Clone, clap::Args)]
pub struct Common {
    /// Configuration file.
    #[arg(long, global = true)]
    pub config: Option<PathBuf>,
    /// The SQLite database.
    #[arg(long, global = true)]
    pub db: Option<PathBuf>,
    /// Print JSON.
    #[arg(long, global = true)]
    pub json: bool,
}

#[derive(Debug, clap::Args)]
pub struct StatusArgs {
    #[command(flatten)]
    pub common: Common,
    /// The time to judge ages and staleness by, unix seconds (for tests; default the clock).
    #[arg(long)]
    pub now: Option<i64>,
}

#[derive(Debug, clap::Args)]
pub struct AlertsArgs {
    #[command(flatten)]
    pub common: Common,
    /// Include resolved alerts.
    #[arg(long)]
    pub all: bool,
    #[command(subcommand)]
    pub action: Option<AlertsAction>,
}

#[derive(Debug, clap::Subcommand)]
pub enum AlertsAction {
    /// Acknowledge an open alert (shown in `alerts`; its resolve ends it).
    Ack {
        /// The alert's dedup key, or a unique prefix of it or of its session id.
        key: String,
        /// Time of the ack, unix seconds (default the clock).
        #[arg(long)]
        now: Option<i64>,
    },
    /// Send an open alert's events to no channel for a while; its resolve ends it.
    Silence {
        /// The alert's dedup key, or a unique prefix of it or of its session id.
        key: String,
        /// How long: `90s`, `30m`, `2h`, `1d`.
        #[arg(long = "for", value_name = "DURATION")]
        duration: String,
        /// Time of the silence, unix seconds (default the clock).
        #[arg(long)]
        now: Option<i64>,
    },
}

#[derive(Debug, clap::Args)]
pub struct ChannelsArgs {
    #[command(flatten)]
    pub common: Common,
    #[command(subcommand)]
    pub action: Option<ChannelsAction>,
}

#[derive(Debug, clap::Subcommand)]
pub enum ChannelsAction {
    /// Change a channel's run-time settings (stored in the database, over the config file's).
    Set {
        name: String,
        #[arg(long)]
        enabled: Option<bool>,
        #[arg(long)]
        min_severity: Option<String>,
        /// Time of the change, unix seconds (default the clock).
        #[arg(long)]
        now: Option<i64>,
    },
    /// Drop a channel's run-time settings: the config file's values apply again.
    Reset { name: String },
}

#[derive(Debug, clap::Args)]
pub struct TestAlertArgs {
    #[command(flatten)]
    pub common: Common,
    /// info, warning or critical.
    #[arg(long, default_value = "warning")]
    pub severity: String,
    /// Only this channel (default every enabled channel the severity passes).
    #[arg(long)]
    pub channel: Option<String>,
    /// Show what would be sent without sending.
    #[arg(long)]
    pub dry_run: bool,
    /// Time of the test, unix seconds (default the clock).
    #[arg(long)]
    pub now: Option<i64>,
}

#[derive(Debug, clap::Args)]
pub struct ConfigArgs {
    /// Configuration file.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Override a key, as the watch commands take it (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// Print JSON instead of TOML.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, clap::Args)]
pub struct DoctorArgs {
    /// Configuration file (default `$XDG_CONFIG_HOME/agentwatch/config.toml`).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// The SQLite database (default `$XDG_STATE_HOME/agentwatch/agentwatch.db`).
    #[arg(long)]
    pub db: Option<PathBuf>,
    /// Override a configuration key (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, clap::Args)]
pub struct InitArgs {
    /// Where to write (default `$XDG_CONFIG_HOME/agentwatch/config.toml`); never over a file.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Print the starter config instead of writing it.
    #[arg(long)]
    pub print: bool,
}

impl From<DoctorArgs> for doctor::Options {
    fn from(a: DoctorArgs) -> Self {
        Self {
            config: a.config,
            db: a.db,
            set: a.set,
        }
    }
}

impl From<InitArgs> for doctor::InitOptions {
    fn from(a: InitArgs) -> Self {
        Self {
            doctor: doctor::Options {
                config: a.config,
                ..doctor::Options::default()
            },
            print: a.print,
        }
    }
}

macro_rules! same_fields {
    ($from:ty => $to:ty { $($field:ident),* }) => {
        impl From<$from> for $to {
            fn from(a: $from) -> Self {
                Self { $($field: a.$field),* }
            }
        }
    };
}

impl From<WatchArgs> for jobs::sessions::Options {
    fn from(a: WatchArgs) -> Self {
        Self {
            once: a.once,
            dry_run: a.dry_run,
            verbose: a.verbose,
            json: a.json,
            config: a.config,
            servers: a.servers,
            session_files: a.session_files,
            demo: a.demo,
            db: a.db,
            set: a.set,
            now: a.now,
            full_read: a.full_read,
            opencode_db: a.opencode_db,
            follow: a.follow,
            focus: None,
            said: None,
        }
    }
}
same_fields!(RecoverArgs => jobs::recover::Options { once, dry_run, config, now, json, db, set });
same_fields!(DeckArgs => jobs::deck::Options { once, dry_run, verbose, json, config, db, set, now });
impl From<RunArgs> for agentwatch_runtime::run::Options {
    fn from(a: RunArgs) -> Self {
        Self {
            dry_run: a.dry_run,
            config: a.config,
            db: a.db,
            set: a.set,
            only: None,
        }
    }
}
same_fields!(Common => operator::Common { config, db, json });
same_fields!(ServeArgs => serve::Options { listen, db, config });
same_fields!(ConfigArgs => operator::ConfigArgs { config, set, json });

impl From<StatusArgs> for operator::StatusArgs {
    fn from(a: StatusArgs) -> Self {
        Self {
            common: a.common.into(),
            now: a.now,
            colour: agentwatch_runtime::text::colour_stdout(),
        }
    }
}

impl From<AlertsArgs> for operator::AlertsArgs {
    fn from(a: AlertsArgs) -> Self {
        Self {
            common: a.common.into(),
            all: a.all,
            action: a.action.map(|action| match action {
                AlertsAction::Ack { key, now } => operator::AlertsAction::Ack { key, now },
                AlertsAction::Silence { key, duration, now } => {
                    operator::AlertsAction::Silence { key, duration, now }
                }
            }),
        }
    }
}

impl From<ChannelsArgs> for operator::ChannelsArgs {
    fn from(a: ChannelsArgs) -> Self {
        Self {
            common: a.common.into(),
            action: a.action.map(|action| match action {
                ChannelsAction::Set {
                    name,
                    enabled,
                    min_severity,
                    now,
                } => operator::ChannelsAction::Set {
                    name,
                    enabled,
                    min_severity,
                    now,
                },
                ChannelsAction::Reset { name } => operator::ChannelsAction::Reset { name },
            }),
        }
    }
}

impl From<TestAlertArgs> for operator::TestAlertArgs {
    fn from(a: TestAlertArgs) -> Self {
        Self {
            common: a.common.into(),
            severity: a.severity,
            channel: a.channel,
            dry_run: a.dry_run,
            now: a.now,
        }
    }
}

/// `agentwatch hook AGENT`: what an agent runs before each tool call.
#[derive(Debug, clap::Args)]
pub struct HookArgs {
    /// The agent whose pre-tool event is on standard input: claude, codex, gemini or opencode.
    pub agent: agentwatch_hooks::Agent,
    /// Configuration file (default `$XDG_CONFIG_HOME/agentwatch/config.toml`).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// The SQLite database, beside which the hook keeps its states (`hooks/`).
    #[arg(long)]
    pub db: Option<PathBuf>,
    /// The time, unix seconds (default: the clock).
    #[arg(long, hide = true)]
    pub now: Option<i64>,
}

impl From<HookArgs> for agentwatch_runtime::hook::HookOptions {
    fn from(args: HookArgs) -> Self {
        Self {
            config: args.config,
            db: args.db,
            now: args.now,
        }
    }
}
