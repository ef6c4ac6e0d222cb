//! Where sessions come from: every source behind one trait, [`Source`].
//!
//! A source reads what changed since its stored cursors into [`Tracked`] sessions (new calls
//! pushed into each session's stored detector; an unchanged session keeps its stored verdict),
//! says whether its answer was complete (only a complete answer can make a root "gone"), which
//! sessions it left out as stale, and whether it was there at all. [`collect`] reads every
//! configured source into one [`Collected`]: the observe step of a tick.
//!
//! - [`servers`]: opencode servers over HTTP (configured, from the registry, `--server`).
//! - [`opencode_db`]: opencode's own SQLite database, read-only.
//! - [`files`]: session files and exports (`--sessions`), and the built-in demo.
//! - [`claude`]: Claude Code's transcripts, on whenever its directory exists.
//! - [`codex`]: Codex CLI's rollouts, on whenever its directory exists.
//! - [`gemini`]: Gemini CLI's chat recordings, on whenever its directory exists.

pub mod claude;
pub mod codex;
pub mod demo;
pub mod files;
pub mod gemini;
pub mod opencode_db;
pub mod servers;
mod transcript;

use super::Options;
use super::agent::Agent;
use super::tracked::{Focus, Tracked};
use crate::config::{Config, Env};
use agentwatch_store::Store;
use detect_core::DetectConfig;
use std::collections::{HashMap, HashSet};

pub use servers::{ServerSource, ServerUrl, registry_servers, server_urls};

/// The sources that wake the job: the streams of the servers the tick would read, and every
/// enabled agent's transcript directory, there yet or not ([`agent_directories`]), named as
/// its source is.
pub fn wakers(config: &Config, args: &Options, env: Env<'_>) -> Vec<(String, WakeOn)> {
    let mut ignored = Collected::default();
    let mut wakers: Vec<(String, WakeOn)> = sources(config, args, env, &mut ignored)
        .iter()
        .map(|s| (s.name().to_owned(), s.wake_on()))
        .filter(|(_, wake)| !matches!(wake, WakeOn::Poll | WakeOn::Directory(_)))
        .collect();
    wakers.extend(
        agent_directories(config, args, env)
            .into_iter()
            .map(|dir| (dir.display().to_string(), WakeOn::Directory(dir))),
    );
    wakers
}

/// The transcript directory of every agent that is enabled (`[claude]`, `[codex]`, `[gemini]`)
/// where the configured sources are read, whether it exists yet or not: an agent installed
/// after the watch started is followed from the moment its directory appears.
pub fn agent_directories(config: &Config, args: &Options, env: Env<'_>) -> Vec<std::path::PathBuf> {
    if !configured_sources(config, args) {
        return Vec::new();
    }
    [
        (
            config.claude.enabled,
            claude::ClaudeSource::directory(config, env),
        ),
        (
            config.codex.enabled,
            codex::CodexSource::directory(config, env),
        ),
        (
            config.gemini.enabled,
            gemini::GeminiSource::directory(config, env),
        ),
    ]
    .into_iter()
    .filter_map(|(enabled, dir)| enabled.then_some(dir))
    .collect()
}

/// What every source needs to read incrementally.
#[derive(Debug)]
pub struct ReadContext<'a> {
    /// The store with each session's cursor, detector snapshot and verdict (`None`: a dry run
    /// without a database reads everything whole).
    pub store: Option<&'a Store>,
    pub detector: &'a DetectConfig,
    /// Ignore the stored cursors (`--full-read`).
    pub full_read: bool,
    /// Sessions with no activity since this (unix ms) are stale: left out, not read.
    pub cutoff_ms: Option<i64>,
    /// The tick's time, unix seconds.
    pub now: i64,
    /// What the event streams said changed (`--follow`).
    pub focus: Option<&'a Focus>,
    /// How long one source's read may take (`opencode.source_deadline_s`): a server's requests
    /// are cut at it, a transcript source reads no further file past it and leaves a file read
    /// that does not answer by then waiting on a thread of its own. What it leaves unread
    /// keeps its stored row and makes the answer incomplete.
    pub deadline: std::time::Duration,
    /// Roots of the open alerts: a source that reads only active sessions still looks these up,
    /// so an open alert's root gone quiet resolves as stale, not gone.
    pub watched: &'a HashSet<String>,
}

/// What one source answered this tick.
#[derive(Debug, Default)]
pub struct SourceRead {
    pub sessions: Vec<Tracked>,
    /// The source's part of the tick's `sources=` line: `http://127.0.0.1:4096 3 sessions`.
    pub line: String,
    /// Sessions it could not read, with why (their stored state, if any, is kept and used). An
    /// answer with problems is not complete.
    pub problems: Vec<String>,
    /// Sessions it left out as not active within `watchdog.stale_after_s`.
    pub stale: Vec<String>,
    /// Stale sessions whose cache rows stay (a few are rechecked each tick from their cursor).
    pub keep_rows: Vec<String>,
    /// Its sessions live in the store's session cache (written after the tick).
    pub cached: bool,
    /// Judged as recorded (files, the demo): the stale rule does not apply to its sessions.
    pub recorded: bool,
    /// Sessions (or files) its deadline left unread this tick: they keep their stored rows and
    /// are read next tick; an answer with any is not complete (it also has a problem saying so).
    pub deadline_skipped: usize,
}

/// A source's answer.
#[derive(Debug)]
pub enum Answer {
    /// It answered.
    Read(SourceRead),
    /// It is not there (a default server that does not answer, a file or directory that does not
    /// exist): skipped, and the picture stays complete. `(shown name, why)`.
    Absent(String, String),
    /// It failed: `(shown name, why)`.
    Failed(String, String),
}

/// What wakes the job for a source between its polls (`--follow`, and inside `agentwatch run`).
#[derive(Debug, Clone)]
pub enum WakeOn {
    /// Nothing: it is read at the job's cadence.
    Poll,
    /// An opencode server's event stream.
    Stream(Box<agentwatch_opencode::http::OpencodeServer>),
    /// A directory whose files the agent writes.
    Directory(std::path::PathBuf),
}

/// One place sessions come from.
pub trait Source: std::fmt::Debug + Send + Sync {
    /// How it is named in the journal, the store and on alerts (`http://127.0.0.1:4096`, a path).
    fn name(&self) -> &str;
    /// The agent whose sessions it reads.
    fn agent(&self) -> Agent {
        Agent::Opencode
    }
    /// Read what changed since the stored cursors.
    fn read(&self, ctx: &ReadContext<'_>) -> Answer;
    /// What wakes the job for it between polls.
    fn wake_on(&self) -> WakeOn {
        WakeOn::Poll
    }
    /// Whether it can stop one of its sessions (`opencode.on_loop = "abort"`).
    fn can_abort(&self) -> bool {
        false
    }
    /// Stop one of its sessions.
    fn abort(&self, _session: &str) -> Result<(), String> {
        Err(format!("{} cannot stop a session", self.name()))
    }
}

/// Sessions gathered from every source, and what went wrong.
#[derive(Debug, Default)]
pub struct Collected {
    pub sessions: Vec<Tracked>,
    /// Sources read incrementally (their cache rows are stored after the tick).
    pub cached_sources: Vec<String>,
    /// Sources that answered.
    pub answered: Vec<String>,
    /// Sources that failed, with why.
    pub failed: Vec<(String, String)>,
    /// Sources that were not there (see [`Answer::Absent`]): unlike `failed`, they leave the
    /// picture complete.
    pub skipped: Vec<(String, String)>,
    /// What each source read gave, in order: `registry 2 servers`, `http://… 3 sessions`.
    pub read: Vec<String>,
    /// Sessions some source could not read (their roots must not look "gone").
    pub unreadable: usize,
    /// Sources that gave a complete answer: only such an answer from the source that saw a tree
    /// may resolve its alert as gone.
    pub complete: HashSet<String>,
    /// Sessions a live source left out as not active within `watchdog.stale_after_s`.
    pub stale: HashSet<String>,
    /// Per source, the stale sessions whose cache rows stay.
    pub stale_rows: HashMap<String, Vec<String>>,
    /// Sources judged as recorded (session files, the demo): the stale rule does not apply.
    pub recorded: HashSet<String>,
    /// Sessions (or files) the sources' deadlines left unread this tick, all sources together.
    pub deadline_skipped: usize,
    /// The sessions each source that answered gave, by source name.
    pub session_counts: std::collections::BTreeMap<String, usize>,
    /// The sources that answered, by name (an abort goes to the session's own source).
    pub sources: Vec<Box<dyn Source>>,
}

/// `1 server`, `2 servers`.
pub fn count(n: usize, what: &str) -> String {
    format!("{n} {what}{}", if n == 1 { "" } else { "s" })
}

impl Collected {
    /// Add sessions; one seen already (from an earlier source) is judged once.
    fn add(&mut self, sessions: Vec<Tracked>) {
        let seen: HashSet<String> = self.sessions.iter().map(|s| s.info.id.clone()).collect();
        self.sessions
            .extend(sessions.into_iter().filter(|s| !seen.contains(&s.info.id)));
    }

    /// Take one source's answer.
    pub fn take(&mut self, source: Box<dyn Source>, answer: Answer) {
        let read = match answer {
            Answer::Read(read) => read,
            Answer::Absent(name, why) => return self.skipped.push((name, why)),
            Answer::Failed(name, why) => return self.failed.push((name, why)),
        };
        let name = source.name().to_owned();
        if read.problems.is_empty() {
            self.complete.insert(name.clone());
        }
        self.unreadable += read.problems.len();
        self.deadline_skipped += read.deadline_skipped;
        for problem in read.problems {
            self.failed.push((name.clone(), problem));
        }
        self.stale.extend(read.stale);
        if read.cached {
            self.stale_rows.insert(name.clone(), read.keep_rows);
            self.cached_sources.push(name.clone());
        }
        if read.recorded {
            self.recorded.insert(name.clone());
        }
        self.read.push(read.line);
        self.session_counts
            .insert(name.clone(), read.sessions.len());
        let agent = source.agent();
        let mut sessions = read.sessions;
        for session in &mut sessions {
            session.agent = agent;
        }
        self.add(sessions);
        self.answered.push(name);
        self.sources.push(source);
    }

    /// The agent of the sessions of the source named `name` (opencode when it did not answer).
    pub fn agent_of(&self, name: &str) -> Agent {
        self.source(name).map_or(Agent::Opencode, |s| s.agent())
    }

    /// The source named `name`, if it answered.
    pub fn source(&self, name: &str) -> Option<&dyn Source> {
        self.sources
            .iter()
            .find(|s| s.name() == name)
            .map(AsRef::as_ref)
    }

    /// The tick's one line about its sources: what it read, what it skipped and why
    /// (`registry 2 servers, opencode.db 14 sessions; skipped http://127.0.0.1:4096 (connection
    /// refused)`).
    pub fn sources_line(&self) -> String {
        match self.skipped_line() {
            skipped if skipped.is_empty() => self.read_line(),
            skipped => format!("{}; skipped {skipped}", self.read_line()),
        }
    }

    /// What the sources gave (`registry 2 servers, opencode.db 14 sessions`, `none`).
    pub fn read_line(&self) -> String {
        if self.read.is_empty() {
            "none".to_owned()
        } else {
            self.read.join(", ")
        }
    }

    /// What was skipped and why (`http://127.0.0.1:4096 (connection refused)`); empty when
    /// nothing was.
    pub fn skipped_line(&self) -> String {
        self.failed
            .iter()
            .chain(&self.skipped)
            .map(|(source, why)| format!("{source} ({why})"))
            .collect::<Vec<String>>()
            .join(", ")
    }
}

/// Whether the configured sources are read: flags that name sources (`--server`,
/// `--sessions`, `--demo`) replace the defaults of a configuration that names none.
pub fn configured_sources(config: &Config, args: &Options) -> bool {
    !config.defaulted.sources
        || (!args.demo && args.servers.is_empty() && args.session_files.is_empty())
}

/// Every source this tick reads, in order: servers (configured, from the registry, from
/// flags), opencode.db, session files or the demo. What the registry gave, or why it could not
/// be read, goes to `collected`.
pub fn sources(
    config: &Config,
    args: &Options,
    env: Env<'_>,
    collected: &mut Collected,
) -> Vec<Box<dyn Source>> {
    let mut out: Vec<Box<dyn Source>> = servers::server_urls(config, args, env, collected)
        .into_iter()
        .map(|url| Box::new(ServerSource::new(config, &url, env)) as Box<dyn Source>)
        .collect();
    if configured_sources(config, args) {
        out.extend(opencode_db::DbSource::configured(config, env));
        out.extend(claude::ClaudeSource::configured(config, env));
        out.extend(codex::CodexSource::configured(config, env));
        out.extend(gemini::GeminiSource::configured(config, env));
    } else if args.demo {
        // The demo's transcripts, where `demo::DemoFiles` pointed each agent's section, under
        // names that do not change with the temporary directory.
        out.push(Box::new(
            claude::ClaudeSource::at(claude::ClaudeSource::directory(config, env))
                .named("Claude Code demo"),
        ));
        out.push(Box::new(
            codex::CodexSource::at(codex::CodexSource::directory(config, env))
                .named("Codex CLI demo"),
        ));
        out.push(Box::new(
            gemini::GeminiSource::at(gemini::GeminiSource::directory(config, env))
                .named("Gemini CLI demo"),
        ));
    }
    out.extend(files::configured(args));
    out
}

/// Read every source (the observe step of a tick).
pub fn collect(
    config: &Config,
    args: &Options,
    store: Option<&Store>,
    env: Env<'_>,
    now: i64,
) -> Collected {
    let detector = config.detector();
    let watched = super::open_alert_roots(store);
    let ctx = ReadContext {
        store,
        detector: &detector,
        full_read: args.full_read,
        cutoff_ms: config.watchdog.stale_cutoff_ms(now),
        now,
        focus: args.focus.as_ref(),
        deadline: config.opencode.source_deadline(),
        watched: &watched,
    };
    let mut collected = Collected::default();
    // One source after another, each bounded by its own deadline (a hung one costs the tick
    // its deadline, never another source's time).
    for source in sources(config, args, env, &mut collected) {
        let answer = source.read(&ctx);
        collected.take(source, answer);
    }
    collected
}
