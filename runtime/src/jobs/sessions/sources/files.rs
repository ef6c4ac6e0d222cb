//! Recorded sessions: session files and exports given with `--sessions`, and the built-in demo.
//! Judged whole, as recorded: the stale rule does not apply to them.

use super::{Answer, ReadContext, Source, SourceRead, count};
use crate::input::{read_sessions, sessions_from_text};
use crate::jobs::sessions::Options;
use crate::jobs::sessions::tracked::Tracked;
use detect_core::Session;

/// The recorded sources the flags name: the demo alone with `--demo`, else each `--sessions`
/// file.
pub fn configured(args: &Options) -> Vec<Box<dyn Source>> {
    if args.demo {
        return vec![Box::new(Recorded::Demo)];
    }
    args.session_files
        .iter()
        .map(|file| Box::new(Recorded::File(file.clone())) as Box<dyn Source>)
        .collect()
}

/// A session file, or the built-in demo.
#[derive(Debug)]
pub enum Recorded {
    File(String),
    Demo,
}

impl Source for Recorded {
    fn name(&self) -> &str {
        match self {
            Self::File(path) => path,
            Self::Demo => "built-in demo",
        }
    }

    fn read(&self, ctx: &ReadContext<'_>) -> Answer {
        let sessions = match self {
            Self::File(path) => read_sessions(std::slice::from_ref(path)),
            Self::Demo => sessions_from_text("demo", crate::SAMPLE),
        };
        match sessions {
            Ok(sessions) => Answer::Read(whole(self.name(), &sessions, ctx)),
            Err(e) => Answer::Failed(self.name().to_owned(), e.to_string()),
        }
    }
}

/// Sessions known in full, judged from all their calls.
fn whole(name: &str, sessions: &[Session], ctx: &ReadContext<'_>) -> SourceRead {
    let tracked: Vec<Tracked> = sessions
        .iter()
        .map(|s| Tracked::whole(name, s, ctx.detector))
        .collect();
    SourceRead {
        line: format!("{name} {}", count(tracked.len(), "session")),
        sessions: tracked,
        recorded: true,
        ..SourceRead::default()
    }
}
