//! The sessions job's options: one tick (`--once`), the follower (`--follow`), or the daemon.

use super::tracked;
use crate::config;
use crate::error::Error;
use serde_json::Value;
use std::path::PathBuf;

#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Run one tick and exit (a timer repeats it); without it (or `--follow`), keep running
    /// ([`Options::daemon`]).
    pub once: bool,
    /// Decide everything, send nothing, write nothing.
    pub dry_run: bool,
    /// Print every session's verdict.
    pub verbose: bool,
    /// Print one JSON object describing the tick.
    pub json: bool,
    /// Configuration file (default `$XDG_CONFIG_HOME/agentwatch/config.toml`).
    pub config: Option<PathBuf>,
    /// An opencode server URL, in addition to the configured ones (repeatable).
    pub servers: Vec<String>,
    /// A session file or `opencode export` JSON to judge as a source (repeatable).
    pub session_files: Vec<String>,
    /// Judge the built-in demo sessions (alerts to a log channel, no model asked), in a fresh
    /// store in a temporary directory, or in `--db` (then `agentwatch serve --db` shows it).
    pub demo: bool,
    /// The SQLite database (default `$XDG_STATE_HOME/agentwatch/agentwatch.db`).
    pub db: Option<PathBuf>,
    /// Override a configuration key (`--set watchdog.detector.top_min=10`; repeatable).
    pub set: Vec<String>,
    /// The tick's time, unix seconds (for tests and replays; default the clock).
    pub now: Option<i64>,
    /// Read every session's whole history, ignoring the stored cursors (for comparisons).
    pub full_read: bool,
    /// opencode's database for this run (`--opencode-db`), as `--set opencode.db=PATH`.
    pub opencode_db: Option<PathBuf>,
    /// Follow the servers' event streams ([`follow::follow`](crate::jobs::sessions::follow::follow)) instead of one tick.
    pub follow: bool,
    /// Set by the follower: what the streams said changed; only trees with a session read
    /// fresh are judged for the alert lifecycle.
    pub focus: Option<tracked::Focus>,
    /// Set by a process that ticks again and again (the follower, `run`): what the last tick
    /// said it skipped and why, so a tick says it again only when it changed.
    pub said: Option<SaidSkipped>,
}

/// What a tick last said it skipped (`sources=… ; skipped …`), shared by the ticks of one
/// process: the same sources skipped for the same reasons are not said again every tick.
#[derive(Debug, Clone, Default)]
pub struct SaidSkipped(std::sync::Arc<std::sync::Mutex<Option<String>>>);

impl SaidSkipped {
    /// Whether `skipped` (this tick's, empty: nothing) is news, remembering it: not what the
    /// last tick said (before the first tick, nothing was skipped).
    pub fn is_news(&self, skipped: &str) -> bool {
        let mut said = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if said.as_deref().unwrap_or("") == skipped {
            return false;
        }
        *said = Some(skipped.to_owned());
        true
    }
}

impl Options {
    /// Without `--once`, `--follow` or `--demo` (one tick of its own), `agentwatch watch` keeps
    /// running: the watch job of `agentwatch run` alone, on the configured sources (`None` for
    /// one tick or the follower).
    pub fn daemon(&self) -> Result<Option<crate::run_options::Options>, Error> {
        if self.once || self.follow || self.demo {
            return Ok(None);
        }
        let one_tick = [
            ("--now", self.now.is_some()),
            ("--sessions", !self.session_files.is_empty()),
            ("--full-read", self.full_read),
            ("--server", !self.servers.is_empty()),
            ("--json", self.json),
            ("--verbose", self.verbose),
        ];
        crate::run_options::Options::job_alone(
            config::JobName::Watch,
            &one_tick,
            self.config.clone(),
            self.db.clone(),
            self.overrides(),
            self.dry_run,
        )
        .map(Some)
    }

    /// The `--set` overrides, `--opencode-db PATH` last as `opencode.db=PATH` (a JSON string is a
    /// TOML basic string).
    pub fn overrides(&self) -> Vec<String> {
        let mut set = self.set.clone();
        if let Some(db) = &self.opencode_db {
            set.push(format!(
                "opencode.db={}",
                Value::String(db.display().to_string())
            ));
        }
        set
    }
}
