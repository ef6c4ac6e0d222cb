//! opencode's own SQLite database (`opencode.db`, opencode 1.2 and later), read-only, and the
//! fixture exporter built on it.
//!
//! opencode keeps sessions in three tables (see `fixtures/opencode/db_schema.sql`):
//! `session` (one row per session, `parent_id` links subagent sessions to their parent),
//! `message` (`data` = the message JSON minus `id` / `sessionID`) and `part` (`data` = the part
//! JSON minus `id` / `sessionID` / `messageID`). Messages are read in `(time_created, id)` order as
//! opencode's API returns them; parts in id order within their message (part ids ascend in creation
//! order; `part.time_created` is the import time for imported sessions, so it is not used).
//! The rows are put back into the `{info, parts}` shape and converted with
//! [`session_from_messages`], exactly as the HTTP API and export files are.
//!
//! The database is opened with `SQLITE_OPEN_READ_ONLY` and a busy timeout, and every read of an
//! export happens in one read transaction, so a running opencode is never disturbed and the
//! export is one consistent snapshot.
//!
//! [`export_fixture`] turns labelled sessions and their descendants into a scrubbed session file
//! ([`scrub`]); [`testing`] builds databases without (or with) a real opencode, for tests.

pub mod scrub;
pub mod testing;

use crate::convert::session_from_messages;
use detect_core::{DetectConfig, Label, Session, SessionFile, judge_sessions, resolve_path};
use rusqlite::{Connection, ErrorCode, OpenFlags};
use serde_json::{Map, Value};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::Path;
use std::time::Duration;

/// opencode's default busy timeout, which the exporter uses too.
pub const DEFAULT_BUSY_TIMEOUT: Duration = Duration::from_millis(5000);

/// The tables and columns the reader needs. A database without them is of another schema
/// version (opencode before 1.2 kept JSON files; a future one may move things).
pub const REQUIRED_COLUMNS: &[(&str, &[&str])] = &[
    (
        "session",
        &[
            "id",
            "parent_id",
            "title",
            "directory",
            "agent",
            "time_created",
            "time_updated",
        ],
    ),
    (
        "message",
        &["id", "session_id", "time_created", "time_updated", "data"],
    ),
    (
        "part",
        &["id", "message_id", "session_id", "time_updated", "data"],
    ),
];

/// Why the database could not be read or a fixture could not be exported.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DbError {
    #[error("{path}: no such database file")]
    Missing { path: String },
    #[error(
        "{path}: the database is locked by another process (gave up after {waited_ms} ms); \
         retry when opencode is idle, or raise the busy timeout"
    )]
    Locked { path: String, waited_ms: u128 },
    #[error("{path}: not an SQLite database")]
    NotADatabase { path: String },
    #[error(
        "{path}: not an opencode database of a supported schema version ({detail}); \
         agentwatch reads opencode 1.2+ databases (tables session, message, part)"
    )]
    Schema { path: String, detail: String },
    #[error("{path}: {message}")]
    Sqlite { path: String, message: String },
    #[error("{path}: session {session}: {message}")]
    BadRow {
        path: String,
        session: String,
        message: String,
    },
    #[error("{path}: no such session{}: {}", if .ids.len() == 1 { "" } else { "s" }, .ids.join(", "))]
    UnknownSessions { path: String, ids: Vec<String> },
    #[error(
        "session {id} has no tool calls, so there is nothing to judge: remove it from the labels"
    )]
    NoCalls { id: String },
    #[error("internal error: scrubbing changed the verdict of session {id} ({detail})")]
    ScrubChangedVerdict { id: String, detail: String },
}

/// A session row: what the `session` table says about a session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionRow {
    pub id: String,
    pub parent_id: Option<String>,
    pub title: String,
    pub directory: String,
    pub agent: Option<String>,
    pub time_created: i64,
}

/// A session read from the database, with the directories its paths may be relative to.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadedSession {
    pub session: Session,
    /// The session directory and the assistant messages' `path.root` / `path.cwd`, deduplicated,
    /// in that order: where the session's files live relative to (for `git show REV:path`).
    pub roots: Vec<String>,
    /// Its messages' infos, in order (model, provider, cost, times), for [`crate::lite::Spend`].
    pub infos: Vec<crate::lite::LiteInfo>,
}

/// An `opencode.db` opened read-only.
#[derive(Debug)]
pub struct OpencodeDb {
    conn: Connection,
    path: String,
    busy_timeout: Duration,
}

impl OpencodeDb {
    /// Open a database read-only with a busy timeout and check its schema.
    pub fn open(path: &Path, busy_timeout: Duration) -> Result<Self, DbError> {
        let shown = path.display().to_string();
        if !path.is_file() {
            return Err(DbError::Missing { path: shown });
        }
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(path, flags)
            .map_err(|e| Self::map(&shown, busy_timeout, e))?;
        conn.busy_timeout(busy_timeout)
            .map_err(|e| Self::map(&shown, busy_timeout, e))?;
        let db = Self {
            conn,
            path: shown,
            busy_timeout,
        };
        db.check_schema()?;
        Ok(db)
    }

    /// The path the database was opened from, as shown in messages.
    pub fn path(&self) -> &str {
        &self.path
    }

    fn map(path: &str, busy_timeout: Duration, err: rusqlite::Error) -> DbError {
        let path = path.to_owned();
        if let rusqlite::Error::SqliteFailure(e, _) = &err {
            match e.code {
                ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked => {
                    return DbError::Locked {
                        path,
                        waited_ms: busy_timeout.as_millis(),
                    };
                }
                ErrorCode::NotADatabase => return DbError::NotADatabase { path },
                _ => {}
            }
        }
        DbError::Sqlite {
            path,
            message: err.to_string(),
        }
    }

    fn err(&self, e: rusqlite::Error) -> DbError {
        Self::map(&self.path, self.busy_timeout, e)
    }

    fn check_schema(&self) -> Result<(), DbError> {
        let mut missing = Vec::new();
        for (table, columns) in REQUIRED_COLUMNS {
            let mut stmt = self
                .conn
                .prepare("SELECT name FROM pragma_table_info(?1)")
                .map_err(|e| self.err(e))?;
            let have: HashSet<String> = stmt
                .query_map([table], |row| row.get::<_, String>(0))
                .map_err(|e| self.err(e))?
                .collect::<Result<_, _>>()
                .map_err(|e| self.err(e))?;
            if have.is_empty() {
                missing.push(format!("no table `{table}`"));
                continue;
            }
            for column in *columns {
                if !have.contains(*column) {
                    missing.push(format!("table `{table}` has no column `{column}`"));
                }
            }
        }
        if missing.is_empty() {
            Ok(())
        } else {
            Err(DbError::Schema {
                path: self.path.clone(),
                detail: missing.join("; "),
            })
        }
    }

    /// Run `f` inside one read transaction: every query sees the same snapshot.
    pub fn snapshot<T>(&self, f: impl FnOnce(&Self) -> Result<T, DbError>) -> Result<T, DbError> {
        self.conn.execute_batch("BEGIN").map_err(|e| self.err(e))?;
        let result = f(self);
        // Ending a read transaction cannot lose anything; a failure here is not worth reporting
        // over the result.
        let _ = self.conn.execute_batch("COMMIT");
        result
    }

    /// Every session row, oldest first.
    pub fn sessions(&self) -> Result<Vec<SessionRow>, DbError> {
        self.session_rows("SELECT id, parent_id, title, directory, agent, time_created FROM session ORDER BY time_created, id", [])
    }

    /// Each session's latest activity (unix ms): the later of its `time_updated` and its newest
    /// message's `time_created` (opencode does not bump `time_updated` for every message, e.g.
    /// calls through `POST /session/:id/shell`). A session with neither has no entry.
    pub fn session_activity(&self) -> Result<HashMap<String, i64>, DbError> {
        let mut stmt = self
            .conn
            .prepare(
                "SELECT s.id, MAX(COALESCE(s.time_updated, 0), \
                 COALESCE((SELECT MAX(m.time_created) FROM message m WHERE m.session_id = s.id), 0)) \
                 FROM session s",
            )
            .map_err(|e| self.err(e))?;
        stmt.query_map([], |row| {
            Ok((row.get::<_, String>(0)?, row.get::<_, i64>(1)?))
        })
        .map_err(|e| self.err(e))?
        .filter(|item| !matches!(item, Ok((_, 0))))
        .collect::<Result<_, _>>()
        .map_err(|e| self.err(e))
    }

    /// The ids of sessions with a message or a part created between `from_ms` and `to_ms`
    /// (unix ms), found through the ids themselves: opencode's message and part ids are
    /// ascending ids (`msg_` / `prt_`, then 12 hex digits of `(ms * 0x1000 + n) mod 2^48`, then
    /// random characters), so the window is one or two ranges of the primary-key indexes of
    /// `message` and `part`, and the query costs the rows created in it, not the database. The
    /// creation time wraps every 2^36 ms (about 795 days): a row made a multiple of that before
    /// the window is found too, which costs a look, never a miss. `None` when the newest message
    /// id is not of that shape (a database written by something else): read every session then.
    pub fn sessions_created_between(
        &self,
        from_ms: i64,
        to_ms: i64,
    ) -> Result<Option<HashSet<String>>, DbError> {
        let newest: Option<String> = self
            .conn
            .query_row(
                "SELECT id FROM message ORDER BY rowid DESC LIMIT 1",
                [],
                |r| r.get(0),
            )
            .map(Some)
            .or_else(|e| match e {
                rusqlite::Error::QueryReturnedNoRows => Ok(None),
                e => Err(self.err(e)),
            })?;
        if newest.is_some_and(|id| id_time_key(&id, "msg").is_none()) {
            return Ok(None);
        }
        let (lo, hi) = (time_key(from_ms), time_key(to_ms));
        let ranges = if lo <= hi {
            vec![(lo, hi)]
        } else {
            vec![(lo, ID_TIME_MASK), (0, hi)]
        };
        let mut found = HashSet::new();
        for (table, prefix) in [("message", "msg"), ("part", "prt")] {
            let mut stmt = self
                .conn
                .prepare_cached(&format!(
                    "SELECT DISTINCT session_id FROM {table} WHERE id >= ?1 AND id < ?2"
                ))
                .map_err(|e| self.err(e))?;
            for (from, to) in &ranges {
                let start = format!("{prefix}_{from:012x}");
                // Past the last hex digit of the range: `g` sorts after every hex digit.
                let end = if *to >= ID_TIME_MASK {
                    format!("{prefix}_g")
                } else {
                    format!("{prefix}_{:012x}", to + 1)
                };
                let ids = stmt
                    .query_map([start, end], |r| r.get::<_, String>(0))
                    .map_err(|e| self.err(e))?;
                for id in ids {
                    found.insert(id.map_err(|e| self.err(e))?);
                }
            }
        }
        Ok(Some(found))
    }

    /// The ids of sessions whose row's `time_updated` is at or after `ms` (a rename, a revert, a
    /// step that ends: opencode bumps it for most changes). One pass over the `session` table's
    /// rows, reading no JSON and probing no other table.
    pub fn sessions_updated_since(&self, ms: i64) -> Result<HashSet<String>, DbError> {
        let mut stmt = self
            .conn
            .prepare_cached("SELECT id FROM session WHERE time_updated >= ?1")
            .map_err(|e| self.err(e))?;
        stmt.query_map([ms], |r| r.get::<_, String>(0))
            .map_err(|e| self.err(e))?
            .collect::<Result<_, _>>()
            .map_err(|e| self.err(e))
    }

    /// The session rows of `ids` that exist (primary-key look-ups), in the order given.
    pub fn sessions_by_id<'a>(
        &self,
        ids: impl IntoIterator<Item = &'a str>,
    ) -> Result<Vec<SessionRow>, DbError> {
        let mut rows = Vec::new();
        for id in ids {
            rows.extend(self.session(id)?);
        }
        Ok(rows)
    }

    /// One session's latest activity (unix ms, 0 when nothing says), as
    /// [`OpencodeDb::session_activity`] gives it for every session, through the session's
    /// primary key and the message index; `None` when there is no such session.
    pub fn activity_of(&self, id: &str) -> Result<Option<i64>, DbError> {
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT MAX(COALESCE(s.time_updated, 0), \
                 COALESCE((SELECT MAX(m.time_created) FROM message m WHERE m.session_id = s.id), 0)) \
                 FROM session s WHERE s.id = ?1",
            )
            .map_err(|e| self.err(e))?;
        stmt.query_row([id], |r| r.get(0))
            .map(Some)
            .or_else(|e| match e {
                rusqlite::Error::QueryReturnedNoRows => Ok(None),
                e => Err(self.err(e)),
            })
    }

    /// What changes whenever anything of a session does: its row's `time_updated`, and its
    /// messages' and parts' counts and latest `time_updated` (a part going from running to
    /// completed, a message added through `POST /session/:id/shell`, a revert that deletes
    /// some). A session whose marker is what a tick stored need not be loaded again. Reads the
    /// indexed columns only, never the JSON.
    pub fn change_marker(&self, id: &str) -> Result<String, DbError> {
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT (SELECT time_updated FROM session WHERE id = ?1), \
                 (SELECT COUNT(*) FROM message WHERE session_id = ?1), \
                 (SELECT MAX(time_updated) FROM message WHERE session_id = ?1), \
                 (SELECT COUNT(*) FROM part WHERE session_id = ?1), \
                 (SELECT MAX(time_updated) FROM part WHERE session_id = ?1)",
            )
            .map_err(|e| self.err(e))?;
        stmt.query_row([id], |r| {
            let n = |i: usize| r.get::<_, Option<i64>>(i);
            Ok(format!(
                "{}:{}:{}:{}:{}",
                n(0)?.unwrap_or(0),
                n(1)?.unwrap_or(0),
                n(2)?.unwrap_or(0),
                n(3)?.unwrap_or(0),
                n(4)?.unwrap_or(0)
            ))
        })
        .map_err(|e| self.err(e))
    }

    /// One session row, if the session exists.
    pub fn session(&self, id: &str) -> Result<Option<SessionRow>, DbError> {
        Ok(self
            .session_rows(
                "SELECT id, parent_id, title, directory, agent, time_created FROM session WHERE id = ?1",
                [id],
            )?
            .pop())
    }

    /// The direct children of a session (its subagent sessions), oldest first.
    pub fn children(&self, id: &str) -> Result<Vec<SessionRow>, DbError> {
        self.session_rows(
            "SELECT id, parent_id, title, directory, agent, time_created FROM session \
             WHERE parent_id = ?1 ORDER BY time_created, id",
            [id],
        )
    }

    fn session_rows<P: rusqlite::Params>(
        &self,
        sql: &str,
        params: P,
    ) -> Result<Vec<SessionRow>, DbError> {
        let mut stmt = self.conn.prepare(sql).map_err(|e| self.err(e))?;
        stmt.query_map(params, |row| {
            Ok(SessionRow {
                id: row.get(0)?,
                parent_id: row.get(1)?,
                title: row.get::<_, Option<String>>(2)?.unwrap_or_default(),
                directory: row.get::<_, Option<String>>(3)?.unwrap_or_default(),
                agent: row.get(4)?,
                time_created: row.get::<_, Option<i64>>(5)?.unwrap_or(0),
            })
        })
        .map_err(|e| self.err(e))?
        .collect::<Result<_, _>>()
        .map_err(|e| self.err(e))
    }

    /// A session and every transitive descendant, parent before children (depth-first, children
    /// oldest first). A `parent_id` cycle is cut where it closes.
    pub fn tree(&self, id: &str) -> Result<Vec<SessionRow>, DbError> {
        let Some(root) = self.session(id)? else {
            return Err(DbError::UnknownSessions {
                path: self.path.clone(),
                ids: vec![id.to_owned()],
            });
        };
        let mut seen = HashSet::from([root.id.clone()]);
        let mut out = Vec::new();
        let mut stack = vec![root];
        while let Some(row) = stack.pop() {
            let children = self.children(&row.id)?;
            out.push(row);
            for child in children.into_iter().rev() {
                if seen.insert(child.id.clone()) {
                    stack.push(child);
                }
            }
        }
        Ok(out)
    }

    /// Load one session's calls: its messages and their parts, converted like the HTTP API's.
    pub fn load(&self, row: &SessionRow) -> Result<LoadedSession, DbError> {
        let mut messages = self.messages(row)?;
        self.attach_parts(row, &mut messages)?;
        let roots = message_roots(row, &messages);
        // A message info opencode wrote in another shape is skipped here (its calls still count).
        let infos = messages
            .iter()
            .filter_map(|(_, info, _)| serde_json::from_value(Value::Object(info.clone())).ok())
            .collect();
        let messages: Vec<Value> = messages
            .into_iter()
            .map(|(_, info, parts)| {
                let mut m = Map::new();
                m.insert("info".to_owned(), Value::Object(info));
                m.insert("parts".to_owned(), Value::Array(parts));
                Value::Object(m)
            })
            .collect();
        let mut info = Map::new();
        info.insert("id".to_owned(), Value::String(row.id.clone()));
        if let Some(parent) = &row.parent_id {
            info.insert("parentID".to_owned(), Value::String(parent.clone()));
        }
        info.insert("title".to_owned(), Value::String(row.title.clone()));
        info.insert("directory".to_owned(), Value::String(row.directory.clone()));
        if let Some(agent) = &row.agent {
            info.insert("agent".to_owned(), Value::String(agent.clone()));
        }
        let session = session_from_messages(&Value::Object(info), &messages)
            .map_err(|e| self.bad_row(row, e.to_string()))?;
        Ok(LoadedSession {
            session,
            roots,
            infos,
        })
    }

    fn bad_row(&self, row: &SessionRow, message: String) -> DbError {
        DbError::BadRow {
            path: self.path.clone(),
            session: row.id.clone(),
            message,
        }
    }

    /// A session's messages in order: (id, info as the HTTP API gives it, no parts yet).
    fn messages(&self, row: &SessionRow) -> Result<Vec<DbMessage>, DbError> {
        let mut stmt = self
            .conn
            .prepare("SELECT id, data FROM message WHERE session_id = ?1 ORDER BY time_created, id")
            .map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map([&row.id], |r| {
                Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))
            })
            .map_err(|e| self.err(e))?;
        let mut messages = Vec::new();
        for item in rows {
            let (id, data) = item.map_err(|e| self.err(e))?;
            let mut info = json_object(&data).map_err(|e| {
                self.bad_row(row, format!("message {id}: data is not a JSON object: {e}"))
            })?;
            info.insert("id".to_owned(), Value::String(id.clone()));
            info.insert("sessionID".to_owned(), Value::String(row.id.clone()));
            messages.push((id, info, Vec::new()));
        }
        Ok(messages)
    }

    /// Each part of the session to its message (a part of a message of another session, or of
    /// none, is not this session's).
    fn attach_parts(&self, row: &SessionRow, messages: &mut [DbMessage]) -> Result<(), DbError> {
        let index: BTreeMap<String, usize> = messages
            .iter()
            .enumerate()
            .map(|(at, (id, _, _))| (id.clone(), at))
            .collect();
        let mut stmt = self
            .conn
            .prepare("SELECT id, message_id, data FROM part WHERE session_id = ?1 ORDER BY message_id, id")
            .map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map([&row.id], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                ))
            })
            .map_err(|e| self.err(e))?;
        for item in rows {
            let (id, message_id, data) = item.map_err(|e| self.err(e))?;
            let Some(&at) = index.get(&message_id) else {
                continue;
            };
            let mut part = json_object(&data).map_err(|e| {
                self.bad_row(row, format!("part {id}: data is not a JSON object: {e}"))
            })?;
            part.insert("id".to_owned(), Value::String(id));
            part.insert("sessionID".to_owned(), Value::String(row.id.clone()));
            part.insert("messageID".to_owned(), Value::String(message_id));
            messages[at].2.push(Value::Object(part));
        }
        Ok(())
    }
}

/// A message as [`OpencodeDb::load`] builds it: its id, its info, its parts.
type DbMessage = (String, Map<String, Value>, Vec<Value>);

/// The directories a session worked in: its own, then each message's `path.root` and
/// `path.cwd`, once each, in order.
fn message_roots(row: &SessionRow, messages: &[DbMessage]) -> Vec<String> {
    let mut roots = vec![row.directory.clone()];
    for (_, info, _) in messages {
        if let Some(path) = info.get("path") {
            for key in ["root", "cwd"] {
                if let Some(dir) = path.get(key).and_then(Value::as_str)
                    && !dir.is_empty()
                    && !roots.iter().any(|r| r == dir)
                {
                    roots.push(dir.to_owned());
                }
            }
        }
    }
    roots.retain(|r| !r.is_empty());
    roots
}

/// The bits of an ascending id's time part (12 hex digits).
const ID_TIME_MASK: u64 = (1 << 48) - 1;

/// The time part an ascending id made at `ms` starts with (its counter is 0).
fn time_key(ms: i64) -> u64 {
    u64::try_from(ms).unwrap_or(0).wrapping_mul(0x1000) & ID_TIME_MASK
}

/// The time part of an ascending id `prefix_` + 12 hex digits + …, if it has that shape.
fn id_time_key(id: &str, prefix: &str) -> Option<u64> {
    let hex = id.strip_prefix(prefix)?.strip_prefix('_')?.get(..12)?;
    hex.bytes()
        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        .then(|| u64::from_str_radix(hex, 16).ok())
        .flatten()
}

/// Whether the ascending id `prefix_…` (opencode's message and part ids, whose first 12 hex
/// digits are their creation time) was made at or after `since_ms`, and less than half the time
/// part's range (about 400 days) later: the time part wraps, so "after" is a half circle.
/// `None` for an id not of that shape.
pub fn id_made_since(id: &str, prefix: &str, since_ms: i64) -> Option<bool> {
    let ahead = id_time_key(id, prefix)?.wrapping_sub(time_key(since_ms)) & ID_TIME_MASK;
    Some(ahead < 1 << 47)
}

fn json_object(text: &str) -> Result<Map<String, Value>, String> {
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err("not an object".to_owned()),
        Err(e) => Err(e.to_string()),
    }
}

/// What to do with one session of the labels file.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LabelEntry {
    /// `None`: export the session unlabelled (reported by the backtest, not scored).
    pub label: Option<Label>,
    /// Why it has its label; copied into the session's `note`.
    pub note: Option<String>,
}

/// The labels file: session id to label, in id order.
pub type Labels = BTreeMap<String, LabelEntry>;

/// Parse a labels file: a JSON object from session id to `"must_flag"`, `"must_not_flag"`,
/// `null` (export unlabelled), or `{"label": ..., "note": "..."}`.
pub fn parse_labels(text: &str) -> Result<Labels, String> {
    let value: Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
    let Value::Object(map) = value else {
        return Err(
            "expected a JSON object from session id to label, e.g. {\"ses_…\": \"must_flag\"}"
                .to_owned(),
        );
    };
    if map.is_empty() {
        return Err("no sessions: the labels object is empty".to_owned());
    }
    let label_of = |id: &str, v: &Value| -> Result<Option<Label>, String> {
        match v {
            Value::Null => Ok(None),
            Value::String(s) if s == "must_flag" => Ok(Some(Label::MustFlag)),
            Value::String(s) if s == "must_not_flag" => Ok(Some(Label::MustNotFlag)),
            other => Err(format!(
                "{id}: label must be \"must_flag\", \"must_not_flag\" or null, found {other}"
            )),
        }
    };
    let mut labels = Labels::new();
    for (id, v) in &map {
        if id.trim().is_empty() {
            return Err("an empty session id".to_owned());
        }
        let entry = match v {
            Value::Object(obj) => {
                let note = match obj.get("note") {
                    None | Some(Value::Null) => None,
                    Some(Value::String(s)) => Some(s.clone()),
                    Some(other) => {
                        return Err(format!("{id}: note must be a string, found {other}"));
                    }
                };
                LabelEntry {
                    label: label_of(id, obj.get("label").unwrap_or(&Value::Null))?,
                    note,
                }
            }
            other => LabelEntry {
                label: label_of(id, other)?,
                note: None,
            },
        };
        labels.insert(id.clone(), entry);
    }
    Ok(labels)
}

/// A file whose length in lines the exporter asks about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileRef {
    /// The full path, resolved against the session directory (the key of `line_counts`).
    pub path: String,
    /// The root of [`LoadedSession::roots`] the path lies under (longest first), if any.
    pub root: Option<String>,
    /// The path relative to that root (for `git show REV:relative`).
    pub relative: Option<String>,
}

/// `path` relative to the longest of `roots` it lies under (component-wise).
pub fn relative_to_roots(path: &str, roots: &[String]) -> Option<(String, String)> {
    roots
        .iter()
        .filter_map(|root| {
            let root_trimmed = root.trim_end_matches('/');
            let rest = path.strip_prefix(root_trimmed)?.strip_prefix('/')?;
            (!rest.is_empty()).then(|| (root.clone(), rest.to_owned()))
        })
        .max_by_key(|(root, _)| root.len())
}

/// The result of an export: the scrubbed session file and what a person should know about it.
#[derive(Debug, Clone, PartialEq)]
pub struct Export {
    pub file: SessionFile,
    /// Files read whose length stayed unknown (the coverage signal skips them).
    pub unknown_lengths: Vec<String>,
}

/// Export the labelled sessions and all their descendants as a scrubbed session file.
///
/// - Every labelled id must exist; otherwise [`DbError::UnknownSessions`] lists all the missing.
/// - A labelled session without a single tool call is an error ([`DbError::NoCalls`]).
/// - Reads whose output did not say the file's length ("total N lines") get it from `lines`
///   (the caller looks on disk or in git); the answers go to the session's `line_counts`.
/// - Strings are scrubbed by [`scrub::scrub_session`]; the scrubbed sessions are judged against
///   the raw ones with `config` and must get the same verdicts.
///
/// Everything is read in one snapshot; nothing is written. `progress` is told `(done, total)`
/// sessions as each one's file lengths are filled in (the slow part, for a progress bar).
pub fn export_fixture(
    db: &OpencodeDb,
    labels: &Labels,
    lines: &mut dyn FnMut(&FileRef) -> Option<u64>,
    config: &DetectConfig,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<Export, DbError> {
    let loaded = db.snapshot(|db| load_labelled_trees(db, labels))?;
    let (sessions, unknown_lengths) = label_and_measure(loaded, labels, lines, config, progress)?;
    let scrubbed = scrub_keeping_verdicts(&sessions, config)?;
    Ok(Export {
        file: SessionFile::new(scrubbed),
        unknown_lengths: unknown_lengths.into_iter().collect(),
    })
}

/// Every labelled session's tree, parents before children, trees oldest first; a labelled
/// session inside another's tree is no root of its own.
fn load_labelled_trees(db: &OpencodeDb, labels: &Labels) -> Result<Vec<LoadedSession>, DbError> {
    let mut unknown = Vec::new();
    for id in labels.keys() {
        if db.session(id)?.is_none() {
            unknown.push(id.clone());
        }
    }
    if !unknown.is_empty() {
        return Err(DbError::UnknownSessions {
            path: db.path.clone(),
            ids: unknown,
        });
    }
    // Each labelled session's tree; a labelled session inside another's tree is no root.
    let mut trees = Vec::new();
    let mut inside = HashSet::new();
    for id in labels.keys() {
        let tree = db.tree(id)?;
        inside.extend(tree.iter().skip(1).map(|r| r.id.clone()));
        trees.push(tree);
    }
    trees.retain(|t| !inside.contains(&t[0].id));
    trees.sort_by(|a, b| (a[0].time_created, &a[0].id).cmp(&(b[0].time_created, &b[0].id)));
    // Parents before children, trees oldest first.
    let mut seen = HashSet::new();
    let mut loaded = Vec::new();
    for row in trees.into_iter().flatten() {
        if seen.insert(row.id.clone()) {
            loaded.push(db.load(&row)?);
        }
    }
    Ok(loaded)
}

/// Labels each labelled session (which must have a counted call) and fills in the file lengths
/// its reads did not report; returns the sessions and the files whose length stayed unknown.
fn label_and_measure(
    loaded: Vec<LoadedSession>,
    labels: &Labels,
    lines: &mut dyn FnMut(&FileRef) -> Option<u64>,
    config: &DetectConfig,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<(Vec<Session>, BTreeSet<String>), DbError> {
    let total = loaded.len();
    let mut sessions = Vec::with_capacity(total);
    let mut unknown_lengths = BTreeSet::new();
    for LoadedSession {
        mut session, roots, ..
    } in loaded
    {
        if let Some(entry) = labels.get(&session.id) {
            if session.calls.iter().all(|c| !c.status.is_counted()) {
                return Err(DbError::NoCalls { id: session.id });
            }
            session.label = entry.label;
            session.note = entry.note.clone();
        }
        fill_line_counts(&mut session, &roots, config, lines, &mut unknown_lengths);
        sessions.push(session);
        progress(sessions.len(), total);
    }
    Ok((sessions, unknown_lengths))
}

/// The sessions scrubbed, provided each gets the same verdict scrubbed as raw.
fn scrub_keeping_verdicts(
    sessions: &[Session],
    config: &DetectConfig,
) -> Result<Vec<Session>, DbError> {
    let scrubbed: Vec<Session> = sessions
        .iter()
        .map(|s| scrub::scrub_session(s, config))
        .collect();
    let raw_verdicts = judge_sessions(sessions, config);
    let scrubbed_verdicts = judge_sessions(&scrubbed, config);
    for (raw, clean) in raw_verdicts
        .sessions
        .iter()
        .zip(&scrubbed_verdicts.sessions)
    {
        if raw.flagged != clean.flagged
            || raw.signals != clean.signals
            || raw.reason.calls_since_landed != clean.reason.calls_since_landed
        {
            return Err(DbError::ScrubChangedVerdict {
                id: raw.id.clone(),
                detail: format!("raw: {}; scrubbed: {}", raw.summary(), clean.summary()),
            });
        }
    }
    Ok(scrubbed)
}

/// Ask `lines` for the length of every file the session reads whose read did not report it.
fn fill_line_counts(
    session: &mut Session,
    roots: &[String],
    config: &DetectConfig,
    lines: &mut dyn FnMut(&FileRef) -> Option<u64>,
    unknown: &mut BTreeSet<String>,
) {
    let mut asked = HashSet::new();
    for call in &session.calls {
        if !config.reader_tools.contains(&call.tool) {
            continue;
        }
        let has_total = call
            .metadata
            .get("total_lines")
            .and_then(Value::as_u64)
            .is_some();
        let Some(file_path) = call.input.get("filePath").and_then(Value::as_str) else {
            continue;
        };
        if has_total {
            continue;
        }
        let path = resolve_path(session.directory.as_deref(), file_path);
        if session.line_counts.contains_key(&path) || !asked.insert(path.clone()) {
            continue;
        }
        let (root, relative) = match relative_to_roots(&path, roots) {
            Some((root, rel)) => (Some(root), Some(rel)),
            None => (None, None),
        };
        let file = FileRef {
            path: path.clone(),
            root,
            relative,
        };
        match lines(&file) {
            Some(n) => {
                session.line_counts.insert(path, n);
            }
            None => {
                unknown.insert(path);
            }
        }
    }
}

/// Count lines the way a reader sees them: newline-terminated lines plus a last unterminated one.
pub fn count_lines(bytes: &[u8]) -> u64 {
    let newlines = bytes.iter().filter(|b| **b == b'\n').count() as u64;
    match bytes.last() {
        Some(b'\n') | None => newlines,
        Some(_) => newlines + 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An id's time part says whether it was made since a moment, across the part's wrap.
    #[test]
    fn an_id_says_whether_it_was_made_since() {
        let id = |ms: i64| format!("msg_{:012x}AbCdEfGhIjKlMn", time_key(ms) + 7);
        let at = 1_800_000_000_000;
        assert_eq!(id_made_since(&id(at), "msg", at - 1_000), Some(true));
        assert_eq!(id_made_since(&id(at), "msg", at), Some(true));
        assert_eq!(id_made_since(&id(at), "msg", at + 1_000), Some(false));
        assert_eq!(
            id_made_since(&id(at - 86_400_000), "msg", at - 3_600_000),
            Some(false)
        );
        // The time part wraps every 2^36 ms: an id made just after the wrap is still "since".
        let wrap = (1_i64 << 36) * 26;
        assert_eq!(id_made_since(&id(wrap + 5), "msg", wrap - 5), Some(true));
        assert_eq!(id_made_since("msg_zzz", "msg", at), None);
        assert_eq!(id_made_since(&id(at), "prt", at), None);
    }

    #[test]
    fn labels_accept_strings_null_and_objects() {
        let labels = parse_labels(
            r#"{"ses_b": "must_flag", "ses_a": {"label": "must_not_flag", "note": "lands"},
                "ses_c": null}"#,
        )
        .unwrap();
        let ids: Vec<&str> = labels.keys().map(String::as_str).collect();
        assert_eq!(ids, ["ses_a", "ses_b", "ses_c"]);
        assert_eq!(labels["ses_a"].label, Some(Label::MustNotFlag));
        assert_eq!(labels["ses_a"].note.as_deref(), Some("lands"));
        assert_eq!(labels["ses_b"].label, Some(Label::MustFlag));
        assert_eq!(labels["ses_c"].label, None);
    }

    #[test]
    fn bad_labels_say_what_is_wrong() {
        for (text, needle) in [
            ("[]", "JSON object"),
            ("{}", "empty"),
            ("{\"ses_a\": \"flag\"}", "ses_a: label must be"),
            (
                "{\"ses_a\": {\"label\": \"must_flag\", \"note\": 3}}",
                "note must be a string",
            ),
            ("not json", "not JSON"),
        ] {
            let err = parse_labels(text).unwrap_err();
            assert!(err.contains(needle), "{text}: {err}");
        }
    }

    #[test]
    fn relative_paths_use_the_longest_root() {
        let roots = vec!["/home/u".to_owned(), "/home/u/proj/".to_owned()];
        assert_eq!(
            relative_to_roots("/home/u/proj/src/lib.rs", &roots),
            Some(("/home/u/proj/".to_owned(), "src/lib.rs".to_owned()))
        );
        assert_eq!(relative_to_roots("/home/user/x", &roots), None);
        assert_eq!(relative_to_roots("/home/u", &roots), None);
    }

    #[test]
    fn lines_are_counted_like_a_reader_sees_them() {
        assert_eq!(count_lines(b""), 0);
        assert_eq!(count_lines(b"a"), 1);
        assert_eq!(count_lines(b"a\n"), 1);
        assert_eq!(count_lines(b"a\nb"), 2);
        assert_eq!(count_lines(b"a\n\nb\n"), 3);
    }
}
