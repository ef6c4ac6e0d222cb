//! The options of the long-running process (`agentwatch run`, or one job alone without
//! `--once`), below the jobs so a job command can ask for its daemon.

use crate::config::JobName;
use crate::error::Error;
use std::path::PathBuf;

#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Configuration file (default `$XDG_CONFIG_HOME/agentwatch/config.toml`).
    pub config: Option<PathBuf>,
    /// The SQLite database (default `$XDG_STATE_HOME/agentwatch/agentwatch.db`).
    pub db: Option<PathBuf>,
    /// Override a configuration key (repeatable), for every job.
    pub set: Vec<String>,
    /// Every job decides and performs nothing, and nothing is stored.
    pub dry_run: bool,
    /// One job alone, whatever `run.jobs` says, and no web server: what `agentwatch opencode`
    /// and `agentwatch recover` are without `--once`.
    pub only: Option<JobName>,
}

impl Options {
    /// A job command without `--once` (`agentwatch opencode`, `agentwatch recover`): the same
    /// daemon as `agentwatch run`, with that job alone. `one_tick_flags` are the command's flags
    /// that describe a single tick, with whether each was given: any of them is a usage error
    /// here, naming the flag, rather than silently ignored.
    pub fn job_alone(
        job: JobName,
        one_tick_flags: &[(&str, bool)],
        config: Option<PathBuf>,
        db: Option<PathBuf>,
        set: Vec<String>,
        dry_run: bool,
    ) -> Result<Self, Error> {
        if let Some((flag, _)) = one_tick_flags.iter().find(|(_, given)| *given) {
            return Err(Error::usage(format!(
                "{flag} needs --once: without it, `agentwatch {job}` keeps running (as \
                 `agentwatch run` does, with this job alone)",
                job = job.as_str()
            )));
        }
        Ok(Self {
            config,
            db,
            set,
            dry_run,
            only: Some(job),
        })
    }
}
