//! The sessions the watch follows, for the sessions page (`GET /sessions.html`,
//! `/api/watchdog/sessions`): one row per session of the session cache
//! (`opencode_session_cache`), every agent's, with what its info and its verdict say.
//!
//! The cache row's `info` is a call-less `detect_core::Session` (`title`, `directory`,
//! `parent_id`) and its `verdict` the sessions job's record of it (the runtime's `VerdictMeta`:
//! `agent`, `verdict.flagged`, `verdict.signals`, `newest_call_ms`, `repeats.calls`), read here
//! with SQLite's JSON functions so a listing never builds a detector snapshot or a cursor. A
//! row whose JSON does not read is left out; a field a row lacks (written by an older version)
//! is `None`.

use crate::{Store, StoreError};
use serde::{Deserialize, Serialize};

/// The most sessions one listing gives.
pub const MAX_SESSIONS: usize = 2_000;

/// One session the watch follows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionListing {
    /// Where it is read from (a server URL, an agent's directory).
    pub source: String,
    pub session_id: String,
    /// The session that spawned it (a subagent's).
    pub parent_id: Option<String>,
    /// The agent that wrote it (`opencode`, `claude`, `codex`, `gemini`).
    pub agent: Option<String>,
    pub title: Option<String>,
    /// Its working directory.
    pub directory: Option<String>,
    /// Tool calls read.
    pub calls: Option<i64>,
    pub flagged: bool,
    /// The signals that fired.
    pub signals: Vec<String>,
    /// Its newest call (unix ms), when a call says.
    pub last_activity_ms: Option<i64>,
    /// When a tick last read it (unix seconds).
    pub seen_at: i64,
}

impl Store {
    /// The sessions the watch follows, newest activity first, at most `limit` (and
    /// [`MAX_SESSIONS`]).
    pub fn sessions(&self, limit: usize) -> Result<Vec<SessionListing>, StoreError> {
        let limit = i64::try_from(limit.min(MAX_SESSIONS)).unwrap_or(0);
        let mut stmt = self.conn.prepare(
            "SELECT source, session_id, json_extract(info, '$.parent_id'),
                    json_extract(verdict, '$.agent'), json_extract(info, '$.title'),
                    json_extract(info, '$.directory'), json_extract(verdict, '$.repeats.calls'),
                    json_extract(verdict, '$.verdict.flagged'),
                    json_extract(verdict, '$.verdict.signals'),
                    json_extract(verdict, '$.newest_call_ms'), seen_at
             FROM opencode_session_cache
             WHERE json_valid(info) AND json_valid(verdict)
             ORDER BY COALESCE(json_extract(verdict, '$.newest_call_ms'), seen_at * 1000) DESC,
                      session_id
             LIMIT ?1",
        )?;
        let rows = stmt.query_map([limit], |r| {
            let signals: Option<String> = r.get(8)?;
            Ok(SessionListing {
                source: r.get(0)?,
                session_id: r.get(1)?,
                parent_id: text(r.get_ref(2)?),
                agent: text(r.get_ref(3)?),
                title: text(r.get_ref(4)?),
                directory: text(r.get_ref(5)?),
                calls: r.get_ref(6)?.as_i64().ok(),
                flagged: r.get_ref(7)?.as_i64().is_ok_and(|f| f != 0),
                signals: signals
                    .and_then(|s| serde_json::from_str(&s).ok())
                    .unwrap_or_default(),
                last_activity_ms: r.get_ref(9)?.as_i64().ok(),
                seen_at: r.get(10)?,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }
}

/// A JSON field that is text, else `None`.
fn text(value: rusqlite::types::ValueRef<'_>) -> Option<String> {
    value.as_str().ok().map(str::to_owned)
}
