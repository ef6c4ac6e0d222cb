//! # agentwatch-store: the SQLite store
//!
//! One database file (WAL) holds what a oneshot run must remember for the next one:
//! - `watchdog_ticks`: one row per tick (`ticked_at`, `sessions_seen`, `outcome` ok / flagged /
//!   no_source, alerts fired);
//! - `watchdog_verdicts`: each session's verdict with the reason's figures, stored at the tick
//!   it changed (an unchanged verdict is not written again), and `watchdog_current_verdicts`,
//!   which points each session of the last tick at its newest row; each tick row keeps its own
//!   verdict counts;
//! - `watchdog_alerts`: the alert lifecycle, one row per dedup key;
//! - `watchdog_channel_settings`: per-channel overrides (enabled, min severity) set at run time;
//! - `agentwatch_state`: the policies' serialised state, by key, and the models a person
//!   blocked from the models page ([`Store::blocked_models`], `models.blocked`);
//! - `agentwatch_events`: what each job did (ticks with their duration, deliveries, restarts),
//!   for the metrics of `agentwatch serve`.
//! - `watchdog_outbox`: events a tick decided, one row per channel, written in the tick's
//!   transaction ([`Store::commit_tick`]) and marked delivered after each send, so a crash
//!   anywhere gives at-least-once delivery (receivers deduplicate on the dedup key).
//!
//! - `opencode_session_cache`: each followed session's detector snapshot, cursor and verdict,
//!   listed for the sessions page by [`Store::sessions`].
//!
//! The schema is versioned with `PRAGMA user_version` and migrated in place on open. A second
//! run is kept out by [`RunLock`], an exclusive lock on a file beside the database.
//! A file that is not a database is reported, never overwritten.
#![forbid(unsafe_code)]

use rusqlite::{Connection, OpenFlags, OptionalExtension, params};
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::path::{Path, PathBuf};

mod models;
mod outbox;
mod sessions;
pub use models::{BLOCKED_MODELS_KEY, BlockError, BlockedModel, MAX_BLOCKED};
pub use outbox::{OutboxEvent, OutboxRow, TickWrite};
pub use sessions::{MAX_SESSIONS, SessionListing};

/// Why the store cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("{path}: {message}")]
    Open { path: String, message: String },
    #[error("{path}: not an agentwatch database or corrupt ({message}); it was left as it is")]
    Corrupt { path: String, message: String },
    #[error("{path}: schema version {found} is newer than this agentwatch understands ({known})")]
    TooNew {
        path: String,
        found: i64,
        known: i64,
    },
    #[error("database: {0}")]
    Sql(#[from] rusqlite::Error),
}

/// Why the run lock was not taken.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    #[error("another agentwatch run holds {0}")]
    Held(String),
    #[error("{path}: {message}")]
    Io { path: String, message: String },
}

/// An exclusive lock held for the whole run; released when dropped (or when the process dies).
#[derive(Debug)]
pub struct RunLock {
    _file: File,
    pub path: PathBuf,
}

impl RunLock {
    /// Take the lock at `path` without waiting.
    pub fn acquire(path: &Path) -> Result<Self, LockError> {
        let io = |e: std::io::Error| LockError::Io {
            path: path.display().to_string(),
            message: e.to_string(),
        };
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(io)?;
        }
        let file = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)
            .map_err(io)?;
        match file.try_lock() {
            Ok(()) => Ok(Self {
                _file: file,
                path: path.to_path_buf(),
            }),
            Err(std::fs::TryLockError::WouldBlock) => {
                Err(LockError::Held(path.display().to_string()))
            }
            Err(std::fs::TryLockError::Error(e)) => Err(io(e)),
        }
    }
}

/// The schema, one migration per version. Never edit a released step; append a new one.
const MIGRATIONS: &[&str] = &[
    // 1: the four tables of the design, plus policy state.
    "CREATE TABLE watchdog_ticks (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        ticked_at INTEGER NOT NULL,
        sessions_seen INTEGER NOT NULL,
        outcome TEXT NOT NULL CHECK (outcome IN ('ok', 'flagged', 'no_source')),
        alerts_fired INTEGER NOT NULL DEFAULT 0,
        servers TEXT NOT NULL DEFAULT '[]'
    );
    CREATE INDEX idx_ticks_ticked_at ON watchdog_ticks(ticked_at);
    CREATE TABLE watchdog_verdicts (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        tick_id INTEGER NOT NULL REFERENCES watchdog_ticks(id) ON DELETE CASCADE,
        session_id TEXT NOT NULL,
        session_root TEXT NOT NULL,
        flagged INTEGER NOT NULL,
        signals TEXT NOT NULL,
        dup REAL NOT NULL,
        top INTEGER NOT NULL,
        top_what TEXT NOT NULL,
        landed INTEGER NOT NULL,
        slow INTEGER NOT NULL,
        coverage REAL NOT NULL,
        coverage_file TEXT,
        calls_since_landed INTEGER NOT NULL,
        cost_since_landed_usd REAL,
        llm_opinion TEXT,
        model_id TEXT,
        provider TEXT,
        created_at INTEGER NOT NULL
    );
    CREATE INDEX idx_verdicts_model_id ON watchdog_verdicts(model_id);
    CREATE INDEX idx_verdicts_created_at ON watchdog_verdicts(created_at);
    CREATE INDEX idx_verdicts_flagged ON watchdog_verdicts(flagged);
    CREATE INDEX idx_verdicts_session_root ON watchdog_verdicts(session_root);
    CREATE INDEX idx_verdicts_tick ON watchdog_verdicts(tick_id);
    CREATE TABLE watchdog_alerts (
        dedup_key TEXT PRIMARY KEY,
        session_root TEXT NOT NULL,
        state TEXT NOT NULL CHECK (state IN ('open', 'resolved')),
        severity TEXT NOT NULL,
        title TEXT NOT NULL,
        summary TEXT NOT NULL DEFAULT '',
        flagged_ticks INTEGER NOT NULL,
        opened_at INTEGER NOT NULL,
        last_fired_at INTEGER,
        resolved_at INTEGER
    );
    CREATE INDEX idx_alerts_resolved_at ON watchdog_alerts(resolved_at);
    CREATE TABLE watchdog_channel_settings (
        name TEXT PRIMARY KEY,
        enabled INTEGER NOT NULL,
        min_severity TEXT NOT NULL,
        updated_at INTEGER NOT NULL
    );
    CREATE TABLE agentwatch_state (
        key TEXT PRIMARY KEY,
        value TEXT NOT NULL,
        updated_at INTEGER NOT NULL
    );",
    // 2: per-session detector state and message cursor, so a tick reads only what is new.
    "CREATE TABLE opencode_session_cache (
        source TEXT NOT NULL,
        session_id TEXT NOT NULL,
        fingerprint TEXT NOT NULL,
        updated_ms INTEGER,
        cursor TEXT,
        info TEXT NOT NULL,
        detector TEXT NOT NULL,
        verdict TEXT NOT NULL,
        seen_at INTEGER NOT NULL,
        PRIMARY KEY (source, session_id)
    );",
    // 3: what each job did, for metrics: ticks (with their duration), deliveries, restarts.
    "CREATE TABLE agentwatch_events (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        at INTEGER NOT NULL,
        job TEXT NOT NULL,
        kind TEXT NOT NULL CHECK (kind IN ('tick', 'delivery', 'restart')),
        name TEXT NOT NULL DEFAULT '',
        result TEXT NOT NULL,
        duration_ms INTEGER
    );
    CREATE INDEX idx_events_kind_job ON agentwatch_events(kind, job);",
    // 4: the outbox: events a tick decided, one row per channel, written in the tick's
    // transaction and marked delivered after the send (at-least-once delivery).
    "CREATE TABLE watchdog_outbox (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        dedup_key TEXT NOT NULL,
        kind TEXT NOT NULL,
        channel TEXT NOT NULL,
        payload TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        attempts INTEGER NOT NULL DEFAULT 0,
        last_attempt_at INTEGER,
        last_error TEXT,
        delivered_at INTEGER
    );
    CREATE INDEX idx_outbox_pending ON watchdog_outbox(delivered_at, id);",
    // 5: an opencode session stopped (`opencode.on_loop = "abort"`) is an event too; SQLite
    // changes a CHECK only by building the table again.
    "CREATE TABLE agentwatch_events_5 (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        at INTEGER NOT NULL,
        job TEXT NOT NULL,
        kind TEXT NOT NULL CHECK (kind IN ('tick', 'delivery', 'restart', 'abort')),
        name TEXT NOT NULL DEFAULT '',
        result TEXT NOT NULL,
        duration_ms INTEGER
    );
    INSERT INTO agentwatch_events_5 (id, at, job, kind, name, result, duration_ms)
        SELECT id, at, job, kind, name, result, duration_ms FROM agentwatch_events;
    DROP TABLE agentwatch_events;
    ALTER TABLE agentwatch_events_5 RENAME TO agentwatch_events;
    CREATE INDEX idx_events_kind_job ON agentwatch_events(kind, job);",
    // 6: a session's verdict is stored when it changes, not at every tick (an idle tick over
    // thousands of sessions wrote thousands of identical rows, and the file grew without end):
    // each tick keeps its own counts, `watchdog_current_verdicts` points each session of the
    // last tick at its newest verdict row, and a row's `current_until` is the last tick it held
    // when its session left the ticks' listing (NULL while it holds or until a newer row).
    "ALTER TABLE watchdog_ticks ADD COLUMN verdicts_total INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE watchdog_ticks ADD COLUMN verdicts_flagged INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE watchdog_ticks ADD COLUMN trees_flagged INTEGER NOT NULL DEFAULT 0;
    UPDATE watchdog_ticks SET
        verdicts_total = (SELECT COUNT(*) FROM watchdog_verdicts v
                          WHERE v.tick_id = watchdog_ticks.id),
        verdicts_flagged = (SELECT COALESCE(SUM(flagged), 0) FROM watchdog_verdicts v
                            WHERE v.tick_id = watchdog_ticks.id),
        trees_flagged = (SELECT COUNT(DISTINCT session_root) FROM watchdog_verdicts v
                         WHERE v.tick_id = watchdog_ticks.id AND v.flagged);
    ALTER TABLE watchdog_verdicts ADD COLUMN current_until INTEGER;
    UPDATE watchdog_verdicts SET current_until = tick_id;
    CREATE TABLE watchdog_current_verdicts (
        session_id TEXT PRIMARY KEY,
        verdict_id INTEGER NOT NULL REFERENCES watchdog_verdicts(id) ON DELETE CASCADE
    );
    INSERT OR REPLACE INTO watchdog_current_verdicts (session_id, verdict_id)
        SELECT session_id, MAX(id) FROM watchdog_verdicts
        WHERE tick_id = (SELECT MAX(id) FROM watchdog_ticks) GROUP BY session_id;
    UPDATE watchdog_verdicts SET current_until = NULL
        WHERE id IN (SELECT verdict_id FROM watchdog_current_verdicts);",
    // 7: when a send of an outbox row started and its outcome is not recorded yet (a kill or a
    // full disk between the send and its record): the channel may hold the event, so the
    // alert's resolve goes to it.
    "ALTER TABLE watchdog_outbox ADD COLUMN sending_at INTEGER;",
    // 8: the lifecycle's reason in its own column, so an alert's summary stays the loop's.
    "ALTER TABLE watchdog_alerts ADD COLUMN reason TEXT NOT NULL DEFAULT '';",
    // 9: what agentwatch's own pre-tool hook refused in the alert's tree (JSON; '' for none).
    "ALTER TABLE watchdog_alerts ADD COLUMN refusals TEXT NOT NULL DEFAULT '';",
];

/// The schema version that added `watchdog_alerts.reason` (migration 8).
const REASON_VERSION: i64 = 8;

/// The schema version that added `watchdog_alerts.refusals` (migration 9).
const REFUSALS_VERSION: i64 = 9;

/// The schema version this build writes.
pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// One tick, as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TickRow {
    pub id: i64,
    pub ticked_at: i64,
    pub sessions_seen: i64,
    pub outcome: String,
    pub alerts_fired: i64,
    pub servers: Vec<String>,
}

/// One session's verdict at a tick.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VerdictRow {
    pub session_id: String,
    pub session_root: String,
    pub flagged: bool,
    pub signals: Vec<String>,
    pub dup: f64,
    pub top: i64,
    pub top_what: String,
    pub landed: bool,
    pub slow: i64,
    pub coverage: f64,
    pub coverage_file: Option<String>,
    pub calls_since_landed: i64,
    pub llm_opinion: Option<String>,
    pub model_id: Option<String>,
    pub provider: Option<String>,
    /// What the session's assistant messages cost since it last landed (US dollars).
    #[serde(default)]
    pub cost_since_landed_usd: Option<f64>,
}

/// One verdict of a tree's history, with the tick it was judged at.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TreeVerdict {
    pub tick_id: i64,
    pub ticked_at: i64,
    pub verdict: VerdictRow,
}

/// Verdicts of one model and provider (`None`: not recorded).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelRollup {
    pub model_id: Option<String>,
    pub provider: Option<String>,
    pub verdicts: i64,
    pub flagged: i64,
    pub sessions: i64,
    /// Distinct trees with at least one flagged verdict (the stalls).
    pub trees_flagged: i64,
    pub cost_usd: Option<f64>,
    pub last_flagged_at: Option<i64>,
}

/// What a job did, kept for metrics (`agentwatch_events`, migration 3).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobEvent {
    pub at: i64,
    /// `opencode`, `recover`, `deck`, `serve`, ...
    pub job: String,
    pub kind: EventKind,
    /// The channel of a delivery, the unit or session of a restart; empty for a tick.
    pub name: String,
    /// A tick's outcome, a delivery's result (`sent`, `warning`, `failed`), a restart's
    /// (`succeeded`, `failed`).
    pub result: String,
    pub duration_ms: Option<i64>,
}

/// The kinds of [`JobEvent`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EventKind {
    Tick,
    Delivery,
    Restart,
    /// `POST /session/:id/abort` sent to an opencode server (`opencode.on_loop = "abort"`).
    Abort,
}

impl EventKind {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Tick => "tick",
            Self::Delivery => "delivery",
            Self::Restart => "restart",
            Self::Abort => "abort",
        }
    }
}

/// How many events of one kind share a job, name and result, and the latest `at`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventCount {
    pub job: String,
    pub name: String,
    pub result: String,
    pub count: i64,
    pub last_at: i64,
}

/// One stored policy state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StateEntry {
    pub key: String,
    pub value: String,
    pub updated_at: i64,
}

/// One alert, as stored (the latest alert of its dedup key).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AlertRow {
    pub dedup_key: String,
    pub session_root: String,
    /// `open` or `resolved`.
    pub state: String,
    pub severity: String,
    pub title: String,
    /// The loop's sentence, from the alert's latest event; a row written without an event (a
    /// judgement with no transition) keeps the one stored.
    pub summary: String,
    pub flagged_ticks: i64,
    pub opened_at: i64,
    pub last_fired_at: Option<i64>,
    pub resolved_at: Option<i64>,
    /// Why the lifecycle did what it did at the latest judgement (its own field: the summary
    /// stays the loop's).
    #[serde(default)]
    pub reason: String,
    /// What agentwatch's own pre-tool hook refused in the alert's tree (alert-state's
    /// `Refusals`: `blocked`, `call`, `of_call`, `stopped`); `None` when it refused nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refusals: Option<serde_json::Value>,
}

/// A channel's run-time settings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChannelSetting {
    pub name: String,
    pub enabled: bool,
    pub min_severity: String,
    pub updated_at: i64,
}

/// Counts of the verdicts of one tick.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct VerdictCounts {
    pub flagged: i64,
    pub total: i64,
}

/// The longest cursor [`Store::session_cache_heads`] reads with a row (an opencode server's or
/// opencode.db's cursor is a few dozen bytes).
pub const HEAD_CURSOR_BYTES: usize = 1024;

/// One session's cached detector state (see migration 2).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionCacheRow {
    /// Where the session came from (a server URL).
    pub source: String,
    pub session_id: String,
    /// The detector configuration the state was built under; another one invalidates it.
    pub fingerprint: String,
    /// The session's `time.updated` when it was last read completely; `None` forces a read.
    pub updated_ms: Option<i64>,
    /// The id of the last message whose calls are in the detector.
    pub cursor: Option<String>,
    /// The session's info (JSON of a call-less detect-core `Session`).
    pub info: String,
    /// The detector snapshot (JSON).
    pub detector: String,
    /// The last verdict (JSON).
    pub verdict: String,
    /// When the row was written: the tick that last read the session (an unchanged session's
    /// row is not rewritten, see [`Store::update_session_cache`]).
    pub seen_at: i64,
}

/// What [`Store::update_session_cache`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheUpdate {
    /// Rows inserted or replaced (sessions read this tick).
    pub written: usize,
    /// Rows dropped (sessions no longer listed or left out as stale).
    pub dropped: usize,
}

/// The agentwatch database.
#[derive(Debug)]
pub struct Store {
    conn: Connection,
    path: String,
}

impl Store {
    /// Open (creating the file and its directory when missing) and migrate to [`SCHEMA_VERSION`].
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        let shown = path.display().to_string();
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| StoreError::Open {
                path: shown.clone(),
                message: e.to_string(),
            })?;
        }
        let conn = Connection::open(path).map_err(|e| StoreError::Open {
            path: shown.clone(),
            message: e.to_string(),
        })?;
        let mut store = Self { conn, path: shown };
        store.configure()?;
        store.migrate()?;
        Ok(store)
    }

    /// Open an existing database read-only (operator commands): no migration, no writes.
    pub fn open_read_only(path: &Path) -> Result<Self, StoreError> {
        let shown = path.display().to_string();
        let conn =
            Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY).map_err(|e| {
                StoreError::Open {
                    path: shown.clone(),
                    message: e.to_string(),
                }
            })?;
        let store = Self { conn, path: shown };
        let version = store.version()?;
        if version > SCHEMA_VERSION {
            return Err(StoreError::TooNew {
                path: store.path.clone(),
                found: version,
                known: SCHEMA_VERSION,
            });
        }
        Ok(store)
    }

    /// The error of the first statements that read the file: `Corrupt` only when SQLite says
    /// the file is not a database or is damaged. A full disk or a failed read (the WAL index
    /// that cannot be created) is an I/O error of a good file, never reported as corrupt.
    fn corrupt(&self, e: &rusqlite::Error) -> StoreError {
        use rusqlite::ErrorCode::{DatabaseCorrupt, NotADatabase};
        let path = self.path.clone();
        let message = e.to_string();
        match e.sqlite_error_code() {
            Some(NotADatabase | DatabaseCorrupt) => StoreError::Corrupt { path, message },
            _ => StoreError::Open { path, message },
        }
    }

    fn version(&self) -> Result<i64, StoreError> {
        self.conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .map_err(|e| self.corrupt(&e))
    }

    fn configure(&self) -> Result<(), StoreError> {
        // The first statement that reads the file tells a corrupt file from a database.
        self.version()?;
        self.conn
            .pragma_update(None, "journal_mode", "WAL")
            .map_err(|e| self.corrupt(&e))?;
        self.conn.pragma_update(None, "synchronous", "NORMAL")?;
        self.conn.pragma_update(None, "foreign_keys", "ON")?;
        self.conn.busy_timeout(std::time::Duration::from_secs(5))?;
        Ok(())
    }

    fn migrate(&mut self) -> Result<(), StoreError> {
        let version = self.version()?;
        if version > SCHEMA_VERSION {
            return Err(StoreError::TooNew {
                path: self.path.clone(),
                found: version,
                known: SCHEMA_VERSION,
            });
        }
        for (i, step) in MIGRATIONS.iter().enumerate().skip(version as usize) {
            // Immediate, and the version read again inside: another process opening the same
            // file at the same moment may have run this step already.
            let tx = self
                .conn
                .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
            let current: i64 = tx.query_row("PRAGMA user_version", [], |r| r.get(0))?;
            if current > i as i64 {
                continue;
            }
            tx.execute_batch(step)?;
            tx.pragma_update(None, "user_version", (i + 1) as i64)?;
            tx.commit()?;
        }
        Ok(())
    }

    /// The schema version of the open file.
    pub fn schema_version(&self) -> Result<i64, StoreError> {
        self.version()
    }

    /// SQLite's own check of the file (`PRAGMA integrity_check`): `ok`, or what it found.
    pub fn integrity_check(&self) -> Result<String, StoreError> {
        let lines: Vec<String> = self
            .conn
            .prepare("PRAGMA integrity_check")?
            .query_map([], |row| row.get::<_, String>(0))?
            .collect::<Result<_, _>>()?;
        Ok(lines.join("; "))
    }

    /// Record a tick and its verdicts in one transaction; returns the tick id.
    pub fn record_tick(
        &mut self,
        ticked_at: i64,
        outcome: &str,
        sessions_seen: i64,
        alerts_fired: i64,
        servers: &[String],
        verdicts: &[VerdictRow],
    ) -> Result<i64, StoreError> {
        let tx = self.conn.transaction()?;
        let tick_id = insert_tick(
            &tx,
            ticked_at,
            outcome,
            sessions_seen,
            alerts_fired,
            servers,
            verdicts,
        )?;
        tx.commit()?;
        Ok(tick_id)
    }
}

/// Writes a tick and its verdicts with `tx`; returns the tick id.
///
/// Only a verdict that differs from the session's current one is written as a row; the tick
/// row keeps the counts of all of them, and `watchdog_current_verdicts` ends up naming exactly
/// the sessions of `verdicts` (a session listed twice keeps its last verdict).
fn insert_tick(
    tx: &Connection,
    ticked_at: i64,
    outcome: &str,
    sessions_seen: i64,
    alerts_fired: i64,
    servers: &[String],
    verdicts: &[VerdictRow],
) -> Result<i64, StoreError> {
    let count = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
    let flagged_roots: HashSet<&str> = verdicts
        .iter()
        .filter(|v| v.flagged)
        .map(|v| v.session_root.as_str())
        .collect();
    tx.execute(
        "INSERT INTO watchdog_ticks (ticked_at, sessions_seen, outcome, alerts_fired, servers,
           verdicts_total, verdicts_flagged, trees_flagged)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        params![
            ticked_at,
            sessions_seen,
            outcome,
            alerts_fired,
            serde_json::to_string(servers).unwrap_or_default(),
            count(verdicts.len()),
            count(verdicts.iter().filter(|v| v.flagged).count()),
            count(flagged_roots.len()),
        ],
    )?;
    let tick_id = tx.last_insert_rowid();
    let mut current: HashMap<String, VerdictRow> = current_verdicts(tx)?
        .into_iter()
        .map(|v| (v.session_id.clone(), v))
        .collect();
    let listed = insert_changed_verdicts(tx, tick_id, ticked_at, verdicts, &mut current)?;
    let gone = current.keys().filter(|id| !listed.contains(id.as_str()));
    close_unlisted(tx, tick_id, gone)?;
    Ok(tick_id)
}

/// Writes each verdict that differs from its session's `current` one and points the session at
/// it (updating `current`); returns the sessions `verdicts` lists.
fn insert_changed_verdicts<'v>(
    tx: &Connection,
    tick_id: i64,
    ticked_at: i64,
    verdicts: &'v [VerdictRow],
    current: &mut HashMap<String, VerdictRow>,
) -> Result<HashSet<&'v str>, StoreError> {
    let mut insert = tx.prepare_cached(
        "INSERT INTO watchdog_verdicts (tick_id, session_id, session_root, flagged, signals,
           dup, top, top_what, landed, slow, coverage, coverage_file, calls_since_landed,
           llm_opinion, model_id, provider, cost_since_landed_usd, created_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17,
                 ?18)",
    )?;
    let mut point = tx.prepare_cached(
        "INSERT INTO watchdog_current_verdicts (session_id, verdict_id) VALUES (?1, ?2)
         ON CONFLICT(session_id) DO UPDATE SET verdict_id = excluded.verdict_id",
    )?;
    let mut listed: HashSet<&str> = HashSet::with_capacity(verdicts.len());
    for v in verdicts {
        listed.insert(&v.session_id);
        if current.get(&v.session_id) == Some(v) {
            continue;
        }
        insert.execute(params![
            tick_id,
            v.session_id,
            v.session_root,
            v.flagged,
            v.signals.join(","),
            v.dup,
            v.top,
            v.top_what,
            v.landed,
            v.slow,
            v.coverage,
            v.coverage_file,
            v.calls_since_landed,
            v.llm_opinion,
            v.model_id,
            v.provider,
            v.cost_since_landed_usd,
            ticked_at
        ])?;
        point.execute(params![v.session_id, tx.last_insert_rowid()])?;
        current.insert(v.session_id.clone(), v.clone());
    }
    Ok(listed)
}

/// A session no longer listed: its verdict held until the tick before `tick_id`, and it has
/// no current verdict any more.
fn close_unlisted<'a>(
    tx: &Connection,
    tick_id: i64,
    gone: impl Iterator<Item = &'a String>,
) -> Result<(), StoreError> {
    let mut held = tx.prepare_cached(
        "UPDATE watchdog_verdicts SET current_until =
             (SELECT MAX(id) FROM watchdog_ticks WHERE id < ?2)
         WHERE id = (SELECT verdict_id FROM watchdog_current_verdicts WHERE session_id = ?1)",
    )?;
    let mut unlist =
        tx.prepare_cached("DELETE FROM watchdog_current_verdicts WHERE session_id = ?1")?;
    for gone in gone {
        held.execute(params![gone, tick_id])?;
        unlist.execute([gone])?;
    }
    Ok(())
}

/// Each session's current verdict (the last tick's), in the order of their roots and ids.
fn current_verdicts(conn: &Connection) -> Result<Vec<VerdictRow>, StoreError> {
    let mut stmt = conn.prepare_cached(
        "SELECT v.session_id, v.session_root, v.flagged, v.signals, v.dup, v.top, v.top_what,
                v.landed, v.slow, v.coverage, v.coverage_file, v.calls_since_landed,
                v.llm_opinion, v.model_id, v.provider, v.cost_since_landed_usd
         FROM watchdog_current_verdicts c JOIN watchdog_verdicts v ON v.id = c.verdict_id
         ORDER BY v.session_root, v.session_id",
    )?;
    let rows = stmt.query_map([], verdict_from_row)?;
    Ok(rows.collect::<Result<_, _>>()?)
}

impl Store {
    /// The most recent tick.
    pub fn last_tick(&self) -> Result<Option<TickRow>, StoreError> {
        Ok(self
            .conn
            .query_row(
                "SELECT id, ticked_at, sessions_seen, outcome, alerts_fired, servers
                 FROM watchdog_ticks ORDER BY id DESC LIMIT 1",
                [],
                |r| {
                    let servers: String = r.get(5)?;
                    Ok(TickRow {
                        id: r.get(0)?,
                        ticked_at: r.get(1)?,
                        sessions_seen: r.get(2)?,
                        outcome: r.get(3)?,
                        alerts_fired: r.get(4)?,
                        servers: serde_json::from_str(&servers).unwrap_or_default(),
                    })
                },
            )
            .optional()?)
    }

    /// Flagged and total verdicts of one tick (kept on the tick's row).
    pub fn verdict_counts(&self, tick_id: i64) -> Result<VerdictCounts, StoreError> {
        Ok(self
            .conn
            .query_row(
                "SELECT verdicts_flagged, verdicts_total FROM watchdog_ticks WHERE id = ?1",
                [tick_id],
                |r| {
                    Ok(VerdictCounts {
                        flagged: r.get(0)?,
                        total: r.get(1)?,
                    })
                },
            )
            .optional()?
            .unwrap_or(VerdictCounts {
                flagged: 0,
                total: 0,
            }))
    }

    /// The verdicts of the last tick: each session's current verdict, in the order of their
    /// roots and ids. A verdict is stored when it changes, so a row may be older than the tick.
    pub fn current_verdicts(&self) -> Result<Vec<VerdictRow>, StoreError> {
        current_verdicts(&self.conn)
    }

    /// One tree's verdicts tick by tick, oldest first: at each tick from the tree's first
    /// stored verdict on, every session's verdict as of that tick (a verdict is stored when it
    /// changes and holds until its session's next one, or until the session left the listing).
    /// The latest `limit` of these (tick, session) rows.
    pub fn tree_history(&self, root: &str, limit: usize) -> Result<Vec<TreeVerdict>, StoreError> {
        let last_tick: Option<i64> =
            self.conn
                .query_row("SELECT MAX(id) FROM watchdog_ticks", [], |r| r.get(0))?;
        let Some(last_tick) = last_tick else {
            return Ok(Vec::new());
        };
        let mut stmt = self.conn.prepare(
            "SELECT v.session_id, v.session_root, v.flagged, v.signals, v.dup, v.top, v.top_what,
                    v.landed, v.slow, v.coverage, v.coverage_file, v.calls_since_landed,
                    v.llm_opinion, v.model_id, v.provider, v.cost_since_landed_usd, v.tick_id,
                    v.current_until, c.verdict_id IS NOT NULL
             FROM watchdog_verdicts v
             LEFT JOIN watchdog_current_verdicts c ON c.verdict_id = v.id
             WHERE v.session_root = ?1 ORDER BY v.tick_id, v.id",
        )?;
        // Each stored verdict with the ticks it held: from its own to the third field.
        let mut held: Vec<(VerdictRow, i64, i64)> = Vec::new();
        let rows = stmt.query_map([root], |r| {
            let until: Option<i64> = r.get(17)?;
            let current: bool = r.get(18)?;
            Ok((verdict_from_row(r)?, r.get::<_, i64>(16)?, until, current))
        })?;
        for row in rows {
            let (verdict, from, until, current) = row?;
            // A newer row of the same session ends the one before it.
            if let Some(before) = held
                .iter_mut()
                .rev()
                .find(|(v, _, _)| v.session_id == verdict.session_id)
                .filter(|(_, _, until)| *until >= from)
            {
                before.2 = from - 1;
            }
            let until = match (current, until) {
                (true, _) => last_tick,
                (false, Some(until)) => until,
                (false, None) => i64::MAX,
            };
            held.push((verdict, from, until));
        }
        let Some(first) = held.iter().map(|h| h.1).min() else {
            return Ok(Vec::new());
        };
        let end = held
            .iter()
            .map(|h| h.2)
            .max()
            .unwrap_or(first)
            .min(last_tick);
        let mut ticks = self.conn.prepare(
            "SELECT id, ticked_at FROM watchdog_ticks WHERE id BETWEEN ?1 AND ?2 ORDER BY id",
        )?;
        let ticks: Vec<(i64, i64)> = ticks
            .query_map([first, end], |r| Ok((r.get(0)?, r.get(1)?)))?
            .collect::<Result<_, _>>()?;
        // One sweep over the ticks: `held` is in order of `from`, and a session holds one
        // verdict at a time, so `active` stays as small as the tree.
        let mut out: Vec<TreeVerdict> = Vec::new();
        let (mut next, mut active) = (0, Vec::<usize>::new());
        for (tick_id, ticked_at) in ticks {
            while held.get(next).is_some_and(|h| h.1 <= tick_id) {
                active.push(next);
                next += 1;
            }
            active.retain(|&i| held[i].2 >= tick_id);
            for &i in &active {
                out.push(TreeVerdict {
                    verdict: held[i].0.clone(),
                    tick_id,
                    ticked_at,
                });
            }
        }
        let cut = out.len().saturating_sub(limit);
        out.drain(..cut);
        Ok(out)
    }

    /// Verdicts by model and provider, one per session and tick (a stored verdict counts for
    /// each tick it held): how many, how many flagged, how many sessions, how many trees ever
    /// flagged, the cost recorded since landing, and the last flagged time. Most flagged first.
    pub fn model_rollup(&self) -> Result<Vec<ModelRollup>, StoreError> {
        let mut stmt = self.conn.prepare(
            // A stored verdict counts once for each tick it held (see `tree_history`).
            "WITH spans AS (
                 SELECT v.*, CASE
                     WHEN c.verdict_id IS NOT NULL THEN (SELECT MAX(id) FROM watchdog_ticks)
                     WHEN v.current_until IS NOT NULL THEN v.current_until
                     ELSE LEAD(v.tick_id) OVER (PARTITION BY v.session_id ORDER BY v.id) - 1
                 END AS until_tick
                 FROM watchdog_verdicts v
                 LEFT JOIN watchdog_current_verdicts c ON c.verdict_id = v.id
             ), held AS (
                 SELECT *, MAX(COALESCE(until_tick, tick_id) - tick_id + 1, 1) AS ticks
                 FROM spans
             )
             SELECT model_id, provider, SUM(ticks),
                    COALESCE(SUM(CASE WHEN flagged THEN ticks END), 0),
                    COUNT(DISTINCT session_id),
                    COUNT(DISTINCT CASE WHEN flagged THEN session_root END),
                    SUM(cost_since_landed_usd * ticks),
                    MAX(CASE WHEN flagged THEN (SELECT ticked_at FROM watchdog_ticks
                                                 WHERE id = COALESCE(until_tick, tick_id)) END)
             FROM held GROUP BY model_id, provider
             ORDER BY 4 DESC, 3 DESC, model_id, provider",
        )?;
        let rows = stmt.query_map([], |r| {
            Ok(ModelRollup {
                model_id: r.get(0)?,
                provider: r.get(1)?,
                verdicts: r.get(2)?,
                flagged: r.get(3)?,
                sessions: r.get(4)?,
                trees_flagged: r.get(5)?,
                cost_usd: r.get(6)?,
                last_flagged_at: r.get(7)?,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// How many ticks ended with each outcome (`ok`, `flagged`, `no_source`).
    pub fn tick_outcomes(&self) -> Result<Vec<(String, i64)>, StoreError> {
        let mut stmt = self.conn.prepare(
            "SELECT outcome, COUNT(*) FROM watchdog_ticks GROUP BY outcome ORDER BY outcome",
        )?;
        let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Distinct trees with a flagged verdict at one tick (kept on the tick's row).
    pub fn flagged_trees(&self, tick_id: i64) -> Result<i64, StoreError> {
        Ok(self
            .conn
            .query_row(
                "SELECT trees_flagged FROM watchdog_ticks WHERE id = ?1",
                [tick_id],
                |r| r.get(0),
            )
            .optional()?
            .unwrap_or(0))
    }

    /// Record what jobs did (ticks, deliveries, restarts), in one transaction.
    pub fn record_events(&mut self, events: &[JobEvent]) -> Result<(), StoreError> {
        let tx = self.conn.transaction()?;
        {
            let mut stmt = tx.prepare(
                "INSERT INTO agentwatch_events (at, job, kind, name, result, duration_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            )?;
            for e in events {
                stmt.execute(params![
                    e.at,
                    e.job,
                    e.kind.as_str(),
                    e.name,
                    e.result,
                    e.duration_ms
                ])?;
            }
        }
        tx.commit()?;
        Ok(())
    }

    /// Events of `kind` counted by job, name and result (empty before migration 3).
    pub fn event_counts(&self, kind: EventKind) -> Result<Vec<EventCount>, StoreError> {
        if self.version()? < 3 {
            return Ok(Vec::new());
        }
        let mut stmt = self.conn.prepare(
            "SELECT job, name, result, COUNT(*), MAX(at) FROM agentwatch_events WHERE kind = ?1
             GROUP BY job, name, result ORDER BY job, name, result",
        )?;
        let rows = stmt.query_map([kind.as_str()], |r| {
            Ok(EventCount {
                job: r.get(0)?,
                name: r.get(1)?,
                result: r.get(2)?,
                count: r.get(3)?,
                last_at: r.get(4)?,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// The latest `limit` events of `kind` (of `job` when given), newest first (empty before
    /// migration 3).
    pub fn recent_events(
        &self,
        kind: EventKind,
        job: Option<&str>,
        limit: usize,
    ) -> Result<Vec<JobEvent>, StoreError> {
        if self.version()? < 3 {
            return Ok(Vec::new());
        }
        let mut stmt = self.conn.prepare(
            "SELECT at, job, name, result, duration_ms FROM agentwatch_events
             WHERE kind = ?1 AND (?2 IS NULL OR job = ?2) ORDER BY at DESC, id DESC LIMIT ?3",
        )?;
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = stmt.query_map(params![kind.as_str(), job, limit], |r| {
            Ok(JobEvent {
                at: r.get(0)?,
                job: r.get(1)?,
                kind,
                name: r.get(2)?,
                result: r.get(3)?,
                duration_ms: r.get(4)?,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// The recorded tick durations (job, milliseconds), at most the latest `limit`.
    pub fn tick_durations(&self, limit: usize) -> Result<Vec<(String, i64)>, StoreError> {
        if self.version()? < 3 {
            return Ok(Vec::new());
        }
        let mut stmt = self.conn.prepare(
            "SELECT job, duration_ms FROM agentwatch_events
             WHERE kind = 'tick' AND duration_ms IS NOT NULL ORDER BY id DESC LIMIT ?1",
        )?;
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = stmt.query_map([limit], |r| Ok((r.get(0)?, r.get(1)?)))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Every stored policy state (key, JSON text, when it was saved), by key.
    pub fn states(&self) -> Result<Vec<StateEntry>, StoreError> {
        let mut stmt = self
            .conn
            .prepare("SELECT key, value, updated_at FROM agentwatch_state ORDER BY key")?;
        let rows = stmt.query_map([], |r| {
            Ok(StateEntry {
                key: r.get(0)?,
                value: r.get(1)?,
                updated_at: r.get(2)?,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Insert or replace alert rows (the latest alert of each dedup key).
    pub fn upsert_alerts(&mut self, alerts: &[AlertRow]) -> Result<(), StoreError> {
        let tx = self.conn.transaction()?;
        upsert_alerts(&tx, alerts)?;
        tx.commit()?;
        Ok(())
    }
}

/// Writes alert rows with `tx`.
fn upsert_alerts(tx: &Connection, alerts: &[AlertRow]) -> Result<(), StoreError> {
    {
        {
            let mut stmt = tx.prepare(
                "INSERT INTO watchdog_alerts (dedup_key, session_root, state, severity, title,
                   summary, flagged_ticks, opened_at, last_fired_at, resolved_at, reason,
                   refusals)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)
                 ON CONFLICT(dedup_key) DO UPDATE SET session_root = excluded.session_root,
                   state = excluded.state, severity = excluded.severity, title = excluded.title,
                   summary = CASE WHEN excluded.summary = '' THEN watchdog_alerts.summary
                                  ELSE excluded.summary END,
                   flagged_ticks = excluded.flagged_ticks,
                   opened_at = excluded.opened_at, last_fired_at = excluded.last_fired_at,
                   resolved_at = excluded.resolved_at, reason = excluded.reason,
                   refusals = excluded.refusals",
            )?;
            for a in alerts {
                stmt.execute(params![
                    a.dedup_key,
                    a.session_root,
                    a.state,
                    a.severity,
                    a.title,
                    a.summary,
                    a.flagged_ticks,
                    a.opened_at,
                    a.last_fired_at,
                    a.resolved_at,
                    a.reason,
                    a.refusals
                        .as_ref()
                        .map_or_else(String::new, ToString::to_string)
                ])?;
            }
        }
        Ok(())
    }
}

impl Store {
    /// Alerts, newest first; only unresolved ones unless `include_resolved`.
    pub fn alerts(&self, include_resolved: bool) -> Result<Vec<AlertRow>, StoreError> {
        // A store opened read-only before migration 8 has no reason column: none is said.
        let version = self.schema_version()?;
        let reason = if version < REASON_VERSION {
            "''"
        } else {
            "reason"
        };
        // Nor, before migration 9, a refusals column.
        let refusals = if version < REFUSALS_VERSION {
            "''"
        } else {
            "refusals"
        };
        let filter = if include_resolved {
            ""
        } else {
            "WHERE resolved_at IS NULL"
        };
        let sql = format!(
            "SELECT dedup_key, session_root, state, severity, title, summary, flagged_ticks,
                    opened_at, last_fired_at, resolved_at, {reason}, {refusals}
             FROM watchdog_alerts {filter} ORDER BY opened_at DESC, dedup_key"
        );
        let mut stmt = self.conn.prepare(&sql)?;
        let rows = stmt.query_map([], |r| {
            Ok(AlertRow {
                dedup_key: r.get(0)?,
                session_root: r.get(1)?,
                state: r.get(2)?,
                severity: r.get(3)?,
                title: r.get(4)?,
                summary: r.get(5)?,
                flagged_ticks: r.get(6)?,
                opened_at: r.get(7)?,
                last_fired_at: r.get(8)?,
                resolved_at: r.get(9)?,
                reason: r.get(10)?,
                refusals: serde_json::from_str(&r.get::<_, String>(11)?).ok(),
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Run-time channel settings.
    pub fn channel_settings(&self) -> Result<Vec<ChannelSetting>, StoreError> {
        let mut stmt = self.conn.prepare(
            "SELECT name, enabled, min_severity, updated_at FROM watchdog_channel_settings ORDER BY name",
        )?;
        let rows = stmt.query_map([], |r| {
            Ok(ChannelSetting {
                name: r.get(0)?,
                enabled: r.get(1)?,
                min_severity: r.get(2)?,
                updated_at: r.get(3)?,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Insert or update one channel's settings.
    /// Drop a channel's run-time setting, so the config file's values apply again. Returns
    /// whether there was one.
    pub fn reset_channel_setting(&mut self, name: &str) -> Result<bool, StoreError> {
        let n = self.conn.execute(
            "DELETE FROM watchdog_channel_settings WHERE name = ?1",
            params![name],
        )?;
        Ok(n > 0)
    }

    pub fn set_channel_setting(&mut self, setting: &ChannelSetting) -> Result<(), StoreError> {
        self.conn.execute(
            "INSERT INTO watchdog_channel_settings (name, enabled, min_severity, updated_at)
             VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT(name) DO UPDATE SET enabled = excluded.enabled,
               min_severity = excluded.min_severity, updated_at = excluded.updated_at",
            params![
                setting.name,
                setting.enabled,
                setting.min_severity,
                setting.updated_at
            ],
        )?;
        Ok(())
    }

    /// A policy's stored state (its JSON text), if any.
    pub fn load_state(&self, key: &str) -> Result<Option<String>, StoreError> {
        Ok(self
            .conn
            .query_row(
                "SELECT value FROM agentwatch_state WHERE key = ?1",
                [key],
                |r| r.get(0),
            )
            .optional()?)
    }

    /// Store a policy's state.
    pub fn save_state(&mut self, key: &str, value: &str, now: i64) -> Result<(), StoreError> {
        save_state(&self.conn, key, value, now)
    }

    /// The cached sessions of one source.
    pub fn session_cache(&self, source: &str) -> Result<Vec<SessionCacheRow>, StoreError> {
        self.cache_rows(source, "detector", "cursor")
    }

    /// [`Store::session_cache`] without the detector snapshots (each row's `detector` is
    /// empty): what a tick reads to tell which sessions changed, so an unchanged session costs
    /// no snapshot read. [`Store::session_detector`] reads one when it is needed. A cursor
    /// longer than [`HEAD_CURSOR_BYTES`] (a transcript reader's state, which grows with the
    /// session) is left out too (`Some("")`), for [`Store::session_cursor`] to read when the
    /// session changed: an idle tick over thousands of transcripts reads kilobytes, not the
    /// readers' megabytes.
    pub fn session_cache_heads(&self, source: &str) -> Result<Vec<SessionCacheRow>, StoreError> {
        self.cache_rows(
            source,
            "''",
            &format!("CASE WHEN length(cursor) > {HEAD_CURSOR_BYTES} THEN '' ELSE cursor END"),
        )
    }

    /// One cached session's cursor, if the session has a row with one.
    pub fn session_cursor(
        &self,
        source: &str,
        session_id: &str,
    ) -> Result<Option<String>, StoreError> {
        self.cache_column("cursor", source, session_id)
    }

    /// One column of one cache row (`None`: no row, or a NULL there).
    fn cache_column(
        &self,
        column: &str,
        source: &str,
        session_id: &str,
    ) -> Result<Option<String>, StoreError> {
        Ok(self
            .conn
            .query_row(
                &format!(
                    "SELECT {column} FROM opencode_session_cache WHERE source = ?1 AND session_id = ?2"
                ),
                [source, session_id],
                |r| r.get::<_, Option<String>>(0),
            )
            .optional()?
            .flatten())
    }

    /// The cache rows of `source`, with `detector` and `cursor` read from the SQL expressions
    /// given.
    fn cache_rows(
        &self,
        source: &str,
        detector: &str,
        cursor: &str,
    ) -> Result<Vec<SessionCacheRow>, StoreError> {
        let mut stmt = self.conn.prepare(&format!(
            "SELECT source, session_id, fingerprint, updated_ms, {cursor}, info, {detector}, verdict, seen_at
             FROM opencode_session_cache WHERE source = ?1"
        ))?;
        let rows = stmt.query_map([source], |r| {
            Ok(SessionCacheRow {
                source: r.get(0)?,
                session_id: r.get(1)?,
                fingerprint: r.get(2)?,
                updated_ms: r.get(3)?,
                cursor: r.get(4)?,
                info: r.get(5)?,
                detector: r.get(6)?,
                verdict: r.get(7)?,
                seen_at: r.get(8)?,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// One cached session's detector snapshot (JSON), if the session has a row.
    pub fn session_detector(
        &self,
        source: &str,
        session_id: &str,
    ) -> Result<Option<String>, StoreError> {
        self.cache_column("detector", source, session_id)
    }

    /// Bring the cache of one source in line with a tick: the `written` rows (sessions read
    /// this tick) are inserted or replaced, the rows of sessions in neither `written` nor `kept`
    /// (no longer listed, left out as stale) are dropped, and every other row stays as it is:
    /// an unchanged session costs no write, so an idle tick writes nothing here. One
    /// transaction. Returns how many rows were written and dropped.
    pub fn update_session_cache(
        &mut self,
        source: &str,
        written: &[SessionCacheRow],
        kept: &std::collections::HashSet<&str>,
    ) -> Result<CacheUpdate, StoreError> {
        let tx = self.conn.transaction()?;
        let mut update = CacheUpdate::default();
        {
            let fresh: std::collections::HashSet<&str> =
                written.iter().map(|r| r.session_id.as_str()).collect();
            let stored: Vec<String> = {
                let mut stmt =
                    tx.prepare("SELECT session_id FROM opencode_session_cache WHERE source = ?1")?;
                stmt.query_map([source], |r| r.get(0))?
                    .collect::<Result<_, _>>()?
            };
            let mut drop = tx.prepare(
                "DELETE FROM opencode_session_cache WHERE source = ?1 AND session_id = ?2",
            )?;
            for id in stored
                .iter()
                .filter(|id| !kept.contains(id.as_str()) && !fresh.contains(id.as_str()))
            {
                update.dropped += drop.execute(params![source, id])?;
            }
            let mut stmt = tx.prepare(
                "INSERT OR REPLACE INTO opencode_session_cache (source, session_id, fingerprint,
                   updated_ms, cursor, info, detector, verdict, seen_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
            )?;
            for r in written {
                update.written += stmt.execute(params![
                    source,
                    r.session_id,
                    r.fingerprint,
                    r.updated_ms,
                    r.cursor,
                    r.info,
                    r.detector,
                    r.verdict,
                    r.seen_at
                ])?;
            }
        }
        tx.commit()?;
        Ok(update)
    }

    /// Keep a state value that could not be read under `KEY.corrupt.NOW`, so nothing is lost
    /// when the policy starts clean.
    ///
    /// A key already set aside at the same `now` is never overwritten: the second one is kept
    /// as `KEY.corrupt.NOW.2`, the third as `.3`, and so on.
    pub fn set_aside_state(&mut self, key: &str, now: i64) -> Result<Option<String>, StoreError> {
        let tx = self.conn.transaction()?;
        let value: Option<String> = tx
            .query_row(
                "SELECT value FROM agentwatch_state WHERE key = ?1",
                [key],
                |r| r.get(0),
            )
            .optional()?;
        let Some(value) = value else {
            return Ok(None);
        };
        let base = format!("{key}.corrupt.{now}");
        let mut aside = base.clone();
        let mut n = 1u64;
        loop {
            let inserted = tx.execute(
                "INSERT INTO agentwatch_state (key, value, updated_at) VALUES (?1, ?2, ?3)
                 ON CONFLICT(key) DO NOTHING",
                params![aside, value, now],
            )?;
            if inserted == 1 {
                break;
            }
            n += 1;
            aside = format!("{base}.{n}");
        }
        tx.commit()?;
        Ok(Some(aside))
    }
}

/// A `watchdog_verdicts` row from its first 15 columns, in [`VerdictRow`] order.
fn verdict_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<VerdictRow> {
    let signals: String = r.get(3)?;
    Ok(VerdictRow {
        session_id: r.get(0)?,
        session_root: r.get(1)?,
        flagged: r.get(2)?,
        signals: signals
            .split(',')
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect(),
        dup: r.get(4)?,
        top: r.get(5)?,
        top_what: r.get(6)?,
        landed: r.get(7)?,
        slow: r.get(8)?,
        coverage: r.get(9)?,
        coverage_file: r.get(10)?,
        calls_since_landed: r.get(11)?,
        llm_opinion: r.get(12)?,
        model_id: r.get(13)?,
        provider: r.get(14)?,
        cost_since_landed_usd: r.get(15)?,
    })
}

/// Writes a policy's state with `conn`.
fn save_state(conn: &Connection, key: &str, value: &str, now: i64) -> Result<(), StoreError> {
    conn.execute(
        "INSERT INTO agentwatch_state (key, value, updated_at) VALUES (?1, ?2, ?3)
         ON CONFLICT(key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
        params![key, value, now],
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn migration_6_keeps_each_ticks_counts_and_the_last_ticks_verdicts() {
        let dir = std::env::temp_dir().join(format!("aw-store-m6-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("v5.db");
        let _ = std::fs::remove_file(&path);
        {
            // A store at version 5 with two ticks of per-tick verdict rows, as before.
            let conn = Connection::open(&path).unwrap();
            for step in &MIGRATIONS[..5] {
                conn.execute_batch(step).unwrap();
            }
            conn.pragma_update(None, "user_version", 5).unwrap();
            conn.execute_batch(
                "INSERT INTO watchdog_ticks (id, ticked_at, sessions_seen, outcome)
                     VALUES (1, 100, 2, 'flagged'), (2, 160, 2, 'ok');
                 INSERT INTO watchdog_verdicts (tick_id, session_id, session_root, flagged,
                     signals, dup, top, top_what, landed, slow, coverage, calls_since_landed,
                     created_at)
                 VALUES (1, 'ses_a', 'ses_a', 1, 'top', 0, 12, 'x', 0, 0, 0, 40, 100),
                        (1, 'ses_b', 'ses_a', 1, 'top', 0, 12, 'x', 0, 0, 0, 40, 100),
                        (2, 'ses_a', 'ses_a', 0, '', 0, 1, 'x', 1, 0, 0, 0, 160),
                        (2, 'ses_c', 'ses_c', 0, '', 0, 1, 'x', 1, 0, 0, 0, 160);",
            )
            .unwrap();
        }
        let store = Store::open(&path).unwrap();
        assert_eq!(store.schema_version().unwrap(), SCHEMA_VERSION);
        let counts = |id| {
            let c = store.verdict_counts(id).unwrap();
            (c.flagged, c.total, store.flagged_trees(id).unwrap())
        };
        assert_eq!(counts(1), (2, 2, 1));
        assert_eq!(counts(2), (0, 2, 0));
        let current: Vec<(String, bool)> = store
            .current_verdicts()
            .unwrap()
            .into_iter()
            .map(|v| (v.session_id, v.flagged))
            .collect();
        assert_eq!(
            current,
            [("ses_a".to_owned(), false), ("ses_c".to_owned(), false)]
        );
        // The old rows, one per session and tick, read back tick by tick as they were.
        let history: Vec<(i64, String, bool)> = store
            .tree_history("ses_a", 10)
            .unwrap()
            .into_iter()
            .map(|h| (h.tick_id, h.verdict.session_id, h.verdict.flagged))
            .collect();
        assert_eq!(
            history,
            [
                (1, "ses_a".to_owned(), true),
                (1, "ses_b".to_owned(), true),
                (2, "ses_a".to_owned(), false)
            ]
        );
        drop(store);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
