//! Building `opencode.db` files without opencode, for tests and bug reports.
//!
//! [`create_db`] makes an empty database with opencode 1.18.33's exact schema
//! (`fixtures/opencode/db_schema.sql`, dumped from a real database) and [`insert_export`] writes
//! an `opencode export` document into it the way `opencode import` does: the session upserted under
//! the `global` project with the given directory, messages and parts inserted with their JSON
//! minus the ids (`ON CONFLICT DO NOTHING`). Tests that find a real opencode binary use
//! `opencode import` instead; these helpers make the same rows when it is not installed.
//! [`lock_exclusively`] holds a database the way a writer that never lets go would.

use rusqlite::{Connection, params};
use serde_json::{Map, Value};
use std::path::Path;

/// opencode 1.18.33's schema, as `sqlite3 opencode.db .schema` prints it.
pub const SCHEMA_SQL: &str = include_str!("../../../../fixtures/opencode/db_schema.sql");

fn sql_err(e: rusqlite::Error) -> String {
    e.to_string()
}

/// Create a database with opencode's schema (WAL, like opencode) and its `global` project.
pub fn create_db(path: &Path) -> Result<(), String> {
    create_db_with_schema(path, SCHEMA_SQL)?;
    let conn = Connection::open(path).map_err(sql_err)?;
    conn.execute(
        "INSERT OR IGNORE INTO project (id, worktree, time_created, time_updated, sandboxes) \
         VALUES ('global', '/', 0, 0, '[]')",
        [],
    )
    .map_err(sql_err)?;
    Ok(())
}

/// Create a database from any schema (to test databases of other versions).
pub fn create_db_with_schema(path: &Path, schema_sql: &str) -> Result<(), String> {
    let conn = Connection::open(path).map_err(sql_err)?;
    conn.query_row("PRAGMA journal_mode=WAL", [], |_| Ok(()))
        .map_err(sql_err)?;
    conn.execute_batch(schema_sql).map_err(sql_err)
}

fn without(value: &Value, keys: &[&str]) -> Result<String, String> {
    let mut map: Map<String, Value> = value.as_object().cloned().ok_or("expected a JSON object")?;
    for key in keys {
        map.remove(*key);
    }
    serde_json::to_string(&Value::Object(map)).map_err(|e| e.to_string())
}

fn str_at<'a>(value: &'a Value, key: &str) -> Option<&'a str> {
    value.get(key).and_then(Value::as_str)
}

fn time_at(value: &Value, key: &str) -> i64 {
    value
        .get("time")
        .and_then(|t| t.get(key))
        .and_then(Value::as_i64)
        .unwrap_or(0)
}

/// Write an `opencode export` document (`{info, messages: [{info, parts}]}`) into a database made
/// by [`create_db`], as `opencode import` run in `directory` would. Returns the session id.
pub fn insert_export(path: &Path, export: &Value, directory: &str) -> Result<String, String> {
    let info = export.get("info").ok_or("export without `info`")?;
    let id = str_at(info, "id")
        .ok_or("export info without `id`")?
        .to_owned();
    let messages = export
        .get("messages")
        .and_then(Value::as_array)
        .ok_or("export without `messages`")?;
    let mut conn = Connection::open(path).map_err(sql_err)?;
    let tx = conn.transaction().map_err(sql_err)?;
    let created = time_at(info, "created");
    tx.execute(
        "INSERT INTO session (id, project_id, parent_id, slug, directory, path, title, version, \
         time_created, time_updated) VALUES (?1, 'global', ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9) \
         ON CONFLICT(id) DO UPDATE SET parent_id = excluded.parent_id, title = excluded.title, \
         directory = excluded.directory, time_updated = excluded.time_updated",
        params![
            id,
            str_at(info, "parentID"),
            str_at(info, "slug").unwrap_or(""),
            directory,
            directory.trim_start_matches('/'),
            str_at(info, "title").unwrap_or(""),
            str_at(info, "version").unwrap_or("1.18.33"),
            created,
            time_at(info, "updated").max(created),
        ],
    )
    .map_err(sql_err)?;
    for message in messages {
        let minfo = message.get("info").ok_or("message without `info`")?;
        let mid = str_at(minfo, "id").ok_or("message without `id`")?;
        let mcreated = time_at(minfo, "created");
        tx.execute(
            "INSERT INTO message (id, session_id, time_created, time_updated, data) \
             VALUES (?1, ?2, ?3, ?3, ?4) ON CONFLICT DO NOTHING",
            params![mid, id, mcreated, without(minfo, &["id", "sessionID"])?],
        )
        .map_err(sql_err)?;
        let parts = message
            .get("parts")
            .and_then(Value::as_array)
            .ok_or("message without `parts`")?;
        for part in parts {
            let pid = str_at(part, "id").ok_or("part without `id`")?;
            tx.execute(
                "INSERT INTO part (id, message_id, session_id, time_created, time_updated, data) \
                 VALUES (?1, ?2, ?3, ?4, ?4, ?5) ON CONFLICT DO NOTHING",
                params![
                    pid,
                    mid,
                    id,
                    mcreated,
                    without(part, &["id", "sessionID", "messageID"])?
                ],
            )
            .map_err(sql_err)?;
        }
    }
    tx.commit().map_err(sql_err)?;
    Ok(id)
}

/// A connection that holds a database exclusively until dropped: readers get "database is
/// locked" once their busy timeout runs out.
#[derive(Debug)]
pub struct ExclusiveLock {
    conn: Connection,
}

/// Take an exclusive lock on a database and keep it.
pub fn lock_exclusively(path: &Path) -> Result<ExclusiveLock, String> {
    let conn = Connection::open(path).map_err(sql_err)?;
    conn.query_row("PRAGMA locking_mode=EXCLUSIVE", [], |_| Ok(()))
        .map_err(sql_err)?;
    conn.execute_batch("BEGIN EXCLUSIVE").map_err(sql_err)?;
    // A write makes sure the exclusive lock is really held in every journal mode.
    conn.execute_batch("CREATE TABLE IF NOT EXISTS agentwatch_lock_probe (x)")
        .map_err(sql_err)?;
    Ok(ExclusiveLock { conn })
}

impl ExclusiveLock {
    /// Whether the lock is still held (the transaction is open).
    pub fn is_held(&self) -> bool {
        !self.conn.is_autocommit()
    }
}

/// The session ids in a database, for assertions (opened read-write; tests only).
pub fn session_ids(path: &Path) -> Result<Vec<String>, String> {
    let conn = Connection::open(path).map_err(sql_err)?;
    let mut stmt = conn
        .prepare("SELECT id FROM session ORDER BY time_created, id")
        .map_err(sql_err)?;
    let ids = stmt
        .query_map([], |r| r.get::<_, String>(0))
        .map_err(sql_err)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(sql_err)?;
    Ok(ids)
}
