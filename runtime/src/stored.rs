//! What every job shares about the store: where it is, its per-job run locks, how its errors
//! map to exit codes, and how a stored state that cannot be read is set aside (never lost) while
//! the job starts clean.

use crate::config::{self, Config, Env};
use crate::error::Error;
use crate::journal::Line;
use agentwatch_store::{EventKind, JobEvent, RunLock, Store};
use recovery_policy::{PolicyState, StateError, load_state, save_state};
use std::path::{Path, PathBuf};

/// Where the store lives: `--db`, else `[store] path`, else `$XDG_STATE_HOME/agentwatch/agentwatch.db`.
/// With none of them and no `HOME` either, a configuration error (exit 78): a database is never
/// created in whatever directory the run happens to start in.
pub fn store_path(config: &Config, flag: Option<&Path>, env: Env<'_>) -> Result<PathBuf, Error> {
    flag.map(Path::to_path_buf)
        .or_else(|| {
            config
                .store
                .path
                .as_deref()
                .map(|p| config::expand_home(p, env))
        })
        .or_else(|| config::default_db_path(env))
        .ok_or_else(|| {
            Error::config(
                "no place for the database: neither XDG_STATE_HOME nor HOME is set; \
                 pass --db PATH or set [store] path",
            )
        })
}

/// The store opened read-only when the file exists (`None` when it does not): what a dry run or a
/// report reads, never creating or migrating anything.
pub fn open_existing_read_only(db: &Path) -> Result<Option<Store>, Error> {
    if !db.is_file() {
        return Ok(None);
    }
    Store::open_read_only(db).map(Some).map_err(Error::from)
}

/// The run lock of one job (`opencode`, `recover`, `deck`, ...) beside the database: two runs
/// of the same job never overlap; different jobs share the database (SQLite WAL) freely.
pub fn lock_path(db: &Path, job: &str) -> PathBuf {
    let name = db
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "agentwatch.db".to_owned());
    db.with_file_name(format!(".{name}.{job}.lock"))
}

/// Take a job's run lock, or exit 75 saying who holds it.
pub fn take_lock(db: &Path, job: &str) -> Result<RunLock, Error> {
    RunLock::acquire(&lock_path(db, job)).map_err(|source| Error::Lock {
        job: job.to_owned(),
        source,
    })
}

/// A stored state that could not be read, and where it was kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetAside {
    pub problem: String,
    /// The key it was kept under (or a note that a dry run left it in place).
    pub kept_as: String,
}

impl SetAside {
    /// The journal line (a warning) of job `job` about state `key`.
    pub fn line(&self, job: &str, key: &str, now: i64) -> Line {
        Line::warning(job, now)
            .field("warning", "state")
            .field("state", key)
            .field("problem", &self.problem)
            .field("action", "start_clean")
            .field("kept_as", &self.kept_as)
    }
}

/// Load the state stored under `key` with `parse`. Nothing stored: the default. Unreadable: it
/// is kept under `KEY.corrupt.NOW` (left in place by a dry run) and the default comes back with
/// what happened, for the caller's journal line.
pub fn load_or_clean<T: Default>(
    store: Option<&mut Store>,
    key: &str,
    now: i64,
    dry_run: bool,
    parse: impl FnOnce(&str) -> Result<T, String>,
) -> Result<(T, Option<SetAside>), Error> {
    let Some(store) = store else {
        return Ok((T::default(), None));
    };
    let Some(text) = store.load_state(key).map_err(Error::from)? else {
        return Ok((T::default(), None));
    };
    match parse(&text) {
        Ok(state) => Ok((state, None)),
        Err(problem) => {
            let kept_as = if dry_run {
                "(dry run: left in place)".to_owned()
            } else {
                store
                    .set_aside_state(key, now)
                    .map_err(Error::from)?
                    .unwrap_or_default()
            };
            Ok((T::default(), Some(SetAside { problem, kept_as })))
        }
    }
}

/// Parse a recovery policy's stored envelope; a corrupt, foreign or future one is an error.
pub fn parse_policy<S: PolicyState>(text: &str) -> Result<S, String> {
    let loaded = load_state::<S>(text);
    match loaded.warning {
        None | Some(StateError::Empty) => Ok(loaded.state),
        Some(problem) => Err(problem.to_string()),
    }
}

/// Save a recovery policy's state under `key` (its versioned envelope).
pub fn save_policy<S: PolicyState>(
    store: &mut Store,
    key: &str,
    state: &S,
    now: i64,
) -> Result<(), Error> {
    let text = save_state(state).map_err(|e| Error::software(e.to_string()))?;
    store
        .save_state(key, &text, now)
        .map_err(|e| Error::io(format!("saving {key} state: {e}")))
}

/// One [`JobEvent`].
pub fn job_event(
    at: i64,
    job: &str,
    kind: EventKind,
    name: &str,
    result: &str,
    duration_ms: Option<i64>,
) -> JobEvent {
    JobEvent {
        at,
        job: job.to_owned(),
        kind,
        name: name.to_owned(),
        result: result.to_owned(),
        duration_ms,
    }
}

/// Milliseconds since `started`, for a tick's duration.
pub fn elapsed_ms(started: std::time::Instant) -> Option<i64> {
    i64::try_from(started.elapsed().as_millis()).ok()
}

/// Record what a job did (ticks, deliveries, restarts) for `/metrics` and the pages. These rows
/// are history, not state: a failure is a warning on the journal, never the job's failure.
pub fn record_events(store: &mut Store, events: &[JobEvent]) {
    if events.is_empty() {
        return;
    }
    if let Err(e) = store.record_events(events) {
        let (job, now) = events.first().map_or(("", 0), |e| (e.job.as_str(), e.at));
        Line::warning(job, now)
            .field("warning", "events")
            .field("problem", e)
            .field("action", "skip")
            .emit();
    }
}
