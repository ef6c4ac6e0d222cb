//! opencode's own SQLite database (`opencode.db`), read-only: the sessions active within the
//! stale age and the roots of open alerts, each unchanged one kept from its stored verdict.

use super::{Answer, ReadContext, Source, SourceRead, count};
use crate::config::{self, Config, Env};
use crate::jobs::sessions::tracked::{Tracked, active_with_ancestors, cached_rows};
use agentwatch_opencode::db::{DbError, OpencodeDb};
use agentwatch_store::Store;
use detect_core::DetectConfig;
use std::collections::HashSet;
use std::path::PathBuf;
use std::time::Duration;

/// The configured `opencode.db`.
#[derive(Debug)]
pub struct DbSource {
    path: PathBuf,
    name: String,
}

impl DbSource {
    /// `opencode.db` as configured, if it is.
    pub fn configured(config: &Config, env: Env<'_>) -> Option<Box<dyn Source>> {
        let path = config::expand_home(config.opencode.db.as_ref()?, env);
        Some(Box::new(Self {
            name: path.display().to_string(),
            path,
        }))
    }
}

impl Source for DbSource {
    fn name(&self) -> &str {
        &self.name
    }

    fn read(&self, ctx: &ReadContext<'_>) -> Answer {
        if !self.path.exists() {
            return Answer::Absent(
                "opencode.db".to_owned(),
                format!("no file {}", self.path.display()),
            );
        }
        let read = OpencodeDb::open(&self.path, Duration::from_secs(5)).and_then(|db| {
            read_db(
                &db,
                &self.name,
                ctx.store,
                ctx.detector,
                ctx.full_read,
                ctx.cutoff_ms,
                ctx.now.saturating_mul(1000),
                ctx.watched,
            )
        });
        match read {
            Ok(read) => Answer::Read(SourceRead {
                line: format!("opencode.db {}", count(read.sessions.len(), "session")),
                sessions: read.sessions,
                stale: read.stale,
                cached: true,
                ..SourceRead::default()
            }),
            Err(e) => Answer::Failed(self.name.clone(), e.to_string()),
        }
    }
}

/// What reading an `opencode.db` found.
#[derive(Debug, Default)]
pub struct DbRead {
    pub sessions: Vec<Tracked>,
    /// Sessions looked at but not active within the stale age (not read, not reported): those
    /// the store knew, the open alerts' roots, and, on a database read whole, every other one.
    pub stale: Vec<String>,
    /// Sessions whose activity or change marker was looked up: what the read cost, in rows.
    pub examined: usize,
}

/// How far past the tick's clock a message's creation time may lie and still be found
/// ([`OpencodeDb::sessions_created_between`]): clocks of one machine, a day of slack.
const DB_FUTURE_SLACK_MS: i64 = 24 * 3600 * 1000;

/// Read an `opencode.db` incrementally. With a stale age, only the sessions that may be active
/// are looked at, not every session ever stored: those with a message or part created since the
/// cutoff (a range of the id indexes: [`OpencodeDb::sessions_created_between`]; calls through
/// `POST /session/:id/shell` add messages without bumping `time_updated`), those whose row's
/// `time_updated` is since the cutoff ([`OpencodeDb::sessions_updated_since`]), those the store
/// holds a row for (active at an earlier tick), and `watched` (the open alerts' roots); of
/// them the active ones and their ancestors are kept, the others listed in [`DbRead::stale`].
/// A database whose ids are not opencode's, or a read without a stale age, looks at every
/// session. Of the sessions kept, only those whose change marker
/// ([`OpencodeDb::change_marker`]) differs from the one the store holds are loaded; the others
/// keep their stored verdict. The marker is kept in the cache row's cursor.
#[allow(clippy::too_many_arguments)]
pub fn read_db(
    db: &OpencodeDb,
    source: &str,
    store: Option<&Store>,
    config: &DetectConfig,
    full_read: bool,
    stale_cutoff_ms: Option<i64>,
    now_ms: i64,
    watched: &HashSet<String>,
) -> Result<DbRead, DbError> {
    let mut cache = cached_rows(store, source, config, full_read);
    db.snapshot(|db| {
        let mut read = DbRead::default();
        let created = match stale_cutoff_ms {
            Some(cutoff) => db
                .sessions_created_between(cutoff, now_ms.saturating_add(DB_FUTURE_SLACK_MS))?
                .map(|mut created| {
                    db.sessions_updated_since(cutoff).map(|updated| {
                        created.extend(updated);
                        (cutoff, created)
                    })
                })
                .transpose()?,
            None => None,
        };
        let (rows, keep) = match created {
            Some((cutoff, created)) => {
                let candidates: std::collections::BTreeSet<&str> = created
                    .iter()
                    .map(String::as_str)
                    .chain(cache.keys().map(String::as_str))
                    .chain(watched.iter().map(String::as_str))
                    .collect();
                let mut active = Vec::new();
                for id in candidates {
                    read.examined += 1;
                    match db.activity_of(id)? {
                        None => {}
                        Some(at) if at != 0 && at < cutoff => read.stale.push(id.to_owned()),
                        Some(_) => active.push(id.to_owned()),
                    }
                }
                // The active sessions and their ancestors, followed by id; a cycle ends the walk.
                let mut kept: HashSet<String> = HashSet::new();
                let mut rows = Vec::new();
                while let Some(id) = active.pop() {
                    if !kept.insert(id.clone()) {
                        continue;
                    }
                    if let Some(row) = db.session(&id)? {
                        active.extend(row.parent_id.clone());
                        rows.push(row);
                    }
                }
                rows.sort_by(|a, b| (a.time_created, &a.id).cmp(&(b.time_created, &b.id)));
                read.stale.retain(|id| !kept.contains(id));
                (rows, None)
            }
            None => {
                let rows = db.sessions()?;
                let keep: Option<HashSet<String>> = match stale_cutoff_ms {
                    None => None,
                    Some(cutoff) => {
                        let activity = db.session_activity()?;
                        read.examined += rows.len();
                        let items = rows.iter().map(|r| {
                            let active = activity.get(&r.id).is_none_or(|at| *at >= cutoff);
                            (r.id.as_str(), r.parent_id.as_deref(), active)
                        });
                        Some(
                            active_with_ancestors(items)
                                .into_iter()
                                .map(str::to_owned)
                                .collect(),
                        )
                    }
                };
                (rows, keep)
            }
        };
        for row in &rows {
            if keep.as_ref().is_some_and(|k| !k.contains(&row.id)) {
                read.stale.push(row.id.clone());
                continue;
            }
            read.examined += 1;
            let marker = db.change_marker(&row.id)?;
            if let Some(stored) = cache
                .remove(&row.id)
                .filter(|r| r.cursor.as_deref() == Some(marker.as_str()))
                .and_then(|r| Tracked::stored(source, r))
            {
                read.sessions.push(stored);
                continue;
            }
            let loaded = db.load(row)?;
            let mut tracked =
                Tracked::whole_with_infos(source, &loaded.session, &loaded.infos, config);
            tracked.set_cursor(marker);
            read.sessions.push(tracked);
        }
        Ok(read)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jobs::sessions::tracked::judge;

    #[test]
    fn opencode_db_looks_at_active_sessions_only_and_sees_a_shell_call() {
        use agentwatch_opencode::db::testing::{create_db, insert_export};
        use agentwatch_testkit::opencode::{ExportBuilder, healthy_calls, looping_calls};
        const STALE: usize = 400;
        const ACTIVE: usize = 3;
        let dir = agentwatch_testkit::TempDir::new("aw-db-source");
        let oc = dir.path.join("opencode.db");
        create_db(&oc).unwrap();
        let now_s: i64 = 1_796_001_000;
        let now_ms = now_s * 1000;
        let month_ago = now_ms - 30 * 86_400_000;
        let old_id = |i: usize| format!("ses_old{i:05}AAAAAAAAAAAAAAAAAA");
        for i in 0..STALE {
            let start = month_ago + i64::try_from(i).unwrap() * 10_000;
            let export = ExportBuilder::new(&old_id(i), "old", None, start)
                .steps("build", &healthy_calls(2), 1000)
                .build();
            insert_export(&oc, &export, "/tmp/proj").unwrap();
        }
        for i in 0..ACTIVE {
            let start = now_ms - 600_000 + i64::try_from(i).unwrap() * 1000;
            let export = ExportBuilder::new(
                &format!("ses_new{i:05}AAAAAAAAAAAAAAAAAA"),
                "new",
                None,
                start,
            )
            .steps("build", &looping_calls(45), 1000)
            .build();
            insert_export(&oc, &export, "/tmp/proj").unwrap();
        }
        let mut store = Store::open(&dir.path.join("agentwatch.db")).unwrap();
        let config = DetectConfig::default();
        let source = oc.display().to_string();
        let cutoff = Some(now_ms - 3_600_000);
        let none = HashSet::new();
        let read = |store: &Store| {
            let db = OpencodeDb::open(&oc, std::time::Duration::from_secs(5)).unwrap();
            read_db(
                &db,
                &source,
                Some(store),
                &config,
                false,
                cutoff,
                now_ms,
                &none,
            )
            .unwrap()
        };
        let tick = |store: &mut Store, mut read: DbRead| {
            let (judged, mut rows) = judge(&mut read.sessions, &config, now_s, Some(store));
            let rows = rows.remove(&source).unwrap_or_default();
            let kept: HashSet<&str> = rows.kept.iter().map(String::as_str).collect();
            store
                .update_session_cache(&source, &rows.written, &kept)
                .unwrap();
            judged
        };

        // First tick: the active sessions are found through the id index and loaded.
        let first = read(&store);
        let loaded: Vec<&str> = first.sessions.iter().map(|s| s.info.id.as_str()).collect();
        assert_eq!(loaded.len(), ACTIVE, "{loaded:?}");
        assert!(loaded.iter().all(|id| id.starts_with("ses_new")));
        assert!(first.sessions.iter().all(Tracked::was_read));
        // Each active session's activity and change marker: nothing of the stale ones.
        assert_eq!(first.examined, 2 * ACTIVE, "{first:?}");
        tick(&mut store, first);

        // Idle: the same rows are looked at, nothing is loaded.
        let idle = read(&store);
        assert_eq!(idle.examined, 2 * ACTIVE);
        assert_eq!(idle.sessions.len(), ACTIVE);
        assert!(idle.sessions.iter().all(|s| !s.was_read()));
        tick(&mut store, idle);

        // A month-old session gets a looping run through `POST /session/:id/shell`: messages
        // added now, its `time_updated` unchanged.
        let shell = ExportBuilder::new(&old_id(7), "old", None, now_ms - 120_000)
            .steps("build", &looping_calls(45), 1000)
            .build();
        insert_export(&oc, &shell, "/tmp/proj").unwrap();
        {
            let conn = rusqlite::Connection::open(&oc).unwrap();
            conn.execute(
                "UPDATE session SET time_updated = ?1 WHERE id = ?2",
                rusqlite::params![month_ago, old_id(7)],
            )
            .unwrap();
        }
        let after = read(&store);
        let read_now: Vec<&str> = after
            .sessions
            .iter()
            .filter(|s| s.was_read())
            .map(|s| s.info.id.as_str())
            .collect();
        assert_eq!(read_now, vec![old_id(7).as_str()]);
        assert_eq!(after.sessions.len(), ACTIVE + 1);
        assert_eq!(after.examined, 2 * (ACTIVE + 1));
        let judged = tick(&mut store, after);
        assert!(
            judged
                .sessions
                .iter()
                .any(|v| v.id == old_id(7) && v.flagged),
            "the shell calls are judged: {:?}",
            judged.sessions
        );
    }
}
