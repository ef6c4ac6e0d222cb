//! opencode's own SQLite database (`opencode.db`), read-only: the sessions active within the
//! stale age and the roots of open alerts, each unchanged one kept from its stored verdict.

use super::{Answer, ReadContext, Source, SourceRead, count};
use crate::config::{self, Config, Env};
use crate::jobs::sessions::tracked;
use agentwatch_opencode::db::OpencodeDb;
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
            tracked::read_db(
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
