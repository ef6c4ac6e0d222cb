//! The sessions job (`agentwatch watch --once`, `--follow`, and inside `agentwatch run`):
//! every agent's sessions, judged for loops, alerted on once.
//!
//! ```text
//! observe  sources (opencode servers, opencode.db, session files, ...) -> the session forest
//! decide   verdicts per tree (detect-core) -> roots observed -> LLM where the plan allows
//!          -> alert lifecycle and routes (alert-state) -> blind sources and jobs
//! act      loop report -> store (tick, verdicts, alerts, state, outbox: one transaction)
//!          -> deliver the outbox (channels) -> abort -> Alertmanager
//! ```
//!
//! A tick exits 0 however many alerts fired; sources that fail are reported and skipped.
//! Every transition is one `key=value` line on standard error.
//!
//! - [`sources`]: every place sessions come from, behind one trait.
//! - [`tracked`]: the incremental session forest (cursors and detector snapshots in the store).
//! - [`tick`]: one tick as observe, decide, act ([`decide`], [`consult`], [`act`]).
//! - [`follow`]: the live loop (event streams), ticking as things change.
//! - [`deliver`]: the outbox; [`blind`]: sources and jobs that stopped answering;
//!   [`notice`]: an alert's text as a person reads it; [`loop_report`]: the report `recover`
//!   reads; [`refusals`]: what agentwatch's own hook refused in each session; [`repeats`]:
//!   what repeats in each, for its alert's sentence.

pub mod act;
pub mod agent;
pub mod blind;
pub mod consult;
pub mod decide;
pub mod deliver;
pub mod follow;
pub mod loop_report;
pub mod memory;
pub mod notice;
mod options;
pub mod refusals;
pub mod repeats;
mod report;
pub mod sources;
pub mod tick;
pub mod tracked;

pub use memory::ALERT_STATE_KEY;
pub use options::{Options, SaidSkipped};
pub use report::TickReport;
pub use sources::{Collected, ServerUrl, registry_servers, server_urls};

use crate::clock::now_or_clock;
use crate::config::{self, Config, Env};
use crate::error::Error;
use crate::journal::Line;
use crate::notify::apply_stored_settings;
use crate::stored::{elapsed_ms, open_existing_read_only, record_events, store_path, take_lock};
use agentwatch_store::{RunLock, Store};
use std::collections::HashSet;
use std::path::PathBuf;

/// One tick: observe, decide, act. The report says what it saw and did; `None` when the
/// watchdog is disabled.
pub fn run(args: &Options) -> Result<Option<TickReport>, Error> {
    let env: Env<'_> = &config::process_env;
    let started = std::time::Instant::now();
    for server in &args.servers {
        config::check_server_url(server).map_err(|e| Error::usage(format!("--server {e}")))?;
    }
    let mut config = config::load(args.config.as_deref(), &args.overrides(), env)?.config;
    let now = now_or_clock(args.now);
    if !config.watchdog.enabled {
        Line::info("watchdog", now)
            .field("state", "disabled")
            .field("reason", "watchdog.enabled = false")
            .emit();
        return Ok(None);
    }
    if args.demo {
        demo_config(&mut config);
    }
    let manual = ManualStore::new(args, &mut config, now);
    let _demo = if args.demo {
        Some(sources::demo::DemoFiles::write(&mut config).map_err(|e| {
            let dir = std::env::temp_dir();
            Error::io(format!(
                "writing the demo's transcripts under {}: {e}",
                dir.display()
            ))
        })?)
    } else {
        None
    };
    let db_path = match &manual {
        Some(manual) => manual.db_path(),
        None => store_path(&config, args.db.as_deref(), env)?,
    };
    let (_lock, mut store) = open_store(&db_path, args.dry_run)?;
    if let Some(store) = &store {
        apply_stored_settings(&mut config, store);
    }
    let mut collected = sources::collect(&config, args, store.as_ref(), env, now);
    sources_line(&collected, args.said.as_ref(), now).emit();
    let result = if collected.answered.is_empty() {
        tick::blind_tick(&config, store.as_mut(), &collected, now, args.dry_run, env)?
    } else {
        tick::tick(&config, store.as_mut(), &mut collected, now, args, env)?
    };
    if let Some(store) = store.as_mut().filter(|_| !args.dry_run) {
        record_events(store, &result.events(elapsed_ms(started)));
    }
    result.done_line(args.verbose).emit();
    drop(manual);
    Ok(Some(result))
}

/// One line: what the tick read, what it skipped and why. A process that ticks again and again
/// (`said`) says what it skipped only when that changed (`skipped=none` once nothing is).
fn sources_line(collected: &Collected, said: Option<&options::SaidSkipped>, now: i64) -> Line {
    let skipped = collected.skipped_line();
    let news = said.is_none_or(|said| said.is_news(&skipped));
    let line = if collected.failed.is_empty() || !news {
        Line::info("watchdog", now)
    } else {
        Line::warning("watchdog", now)
    };
    let line = match (news, skipped.is_empty(), said.is_some()) {
        (true, false, _) => line.field("sources", collected.sources_line()),
        (true, true, true) => line
            .field("sources", collected.read_line())
            .field("skipped", "none"),
        _ => line.field("sources", collected.read_line()),
    };
    if collected.deadline_skipped > 0 {
        line.field("deadline_skipped", collected.deadline_skipped)
    } else {
        line
    }
}

/// The demo logs its alerts (never the user's desktop) and asks no model.
fn demo_config(config: &mut Config) {
    if config.channels.is_empty() || config.defaulted.channels {
        config.channels = vec![config::ChannelSection {
            name: "log".to_owned(),
            channel_type: "log".to_owned(),
            ..Default::default()
        }];
    }
    config.watchdog.local_llm_enabled = false;
}

/// A manual run (`--demo` or `--sessions` without `--db`) never touches the production store: it
/// judges only what it was given (and `--server` URLs) in a fresh store in a temporary directory,
/// removed when this is dropped, so it can neither close nor re-page a production alert.
#[derive(Debug)]
struct ManualStore {
    dir: PathBuf,
}

impl ManualStore {
    /// `Some` for a manual run, whose configured sources are cleared.
    fn new(args: &Options, config: &mut Config, now: i64) -> Option<Self> {
        let manual = (args.demo || !args.session_files.is_empty()) && args.db.is_none();
        if !manual {
            return None;
        }
        let dir = std::env::temp_dir().join(format!("agentwatch-manual-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        config.opencode.servers.clear();
        config.opencode.registry = None;
        config.opencode.db = None;
        config.claude.enabled = false;
        Line::info("watchdog", now)
            .field("store", "temporary")
            .field(
                "reason",
                "--sessions or --demo without --db: a manual run uses its own store and only the sources it names",
            )
            .emit();
        Some(Self { dir })
    }

    fn db_path(&self) -> PathBuf {
        self.dir.join("agentwatch.db")
    }
}

impl Drop for ManualStore {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The store and its run lock. A dry run neither takes the lock nor creates or migrates the
/// database: it reads what is there.
fn open_store(
    db_path: &std::path::Path,
    dry_run: bool,
) -> Result<(Option<RunLock>, Option<Store>), Error> {
    if dry_run {
        return Ok((None, open_existing_read_only(db_path)?));
    }
    // The lock keeps the job's old name: a timer installed before the rename and one after
    // must never tick together.
    let lock = take_lock(db_path, "opencode")?;
    Ok((Some(lock), Some(Store::open(db_path).map_err(Error::from)?)))
}

/// The roots of the alerts the stored alert state holds open (none when there is no store or
/// its state does not read): a source that reads only active sessions still looks these up, so
/// an open alert's root gone quiet resolves as stale, not gone.
pub fn open_alert_roots(store: Option<&Store>) -> HashSet<String> {
    memory::stored_alert_state(store)
        .map(|state| state.open_alerts.into_values().map(|a| a.root).collect())
        .unwrap_or_default()
}
