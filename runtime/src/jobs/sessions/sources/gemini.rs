//! Gemini CLI's chat recordings: `$GEMINI_CLI_HOME/.gemini` or `~/.gemini`, every
//! `tmp/<project>/chats/session-*.jsonl`, a subagent's `chats/<parent session id>/<id>.jsonl`
//! and the older whole-file `session-*.json` ([`agentwatch_transcripts::GeminiReader`]). On
//! whenever the directory exists.
//!
//! - A `.jsonl` is tailed by byte offset; a `.json` (rewritten whole, replaced by rename) is
//!   read whole when it changes. Gemini edits its history (a message re-appended with the same
//!   id, `$set` checkpoints, `$rewindTo`): when the history already judged changed, the
//!   reader says so and the session's detector starts again from the whole history.
//! - A session's id is its first line's `sessionId` (the file name holds 8 characters of it); a
//!   subagent's is its file's name, its parent the directory it is in.
//! - Gemini's own "Potential loop detected" is kept with the session and said in its alert.
//! - Stale, unchanged and grown files are handled as Claude Code's ([`super::claude`]).

use super::transcript::{
    Found, Reading, Unchanged, base_info, marker, read_each, read_source, read_whole, read_within,
    restore_file, tail,
};
use super::{Answer, ReadContext, Source, SourceRead, WakeOn};
use crate::config::{Config, Env};
use crate::jobs::sessions::agent::Agent;
use crate::jobs::sessions::tracked::Tracked;
use agentwatch_store::SessionCacheRow;
use agentwatch_transcripts::{
    Discovery, FileCursor, GeminiReader, Transcript, discover_gemini, peek_gemini,
};
use detect_core::Call;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Instant;

/// The Gemini CLI sessions of one `.gemini` directory.
#[derive(Debug)]
pub struct GeminiSource {
    dir: PathBuf,
    name: String,
}

impl GeminiSource {
    /// The directory `[gemini]` names (`$GEMINI_CLI_HOME/.gemini`, else `~/.gemini`).
    pub fn directory(config: &Config, env: Env<'_>) -> PathBuf {
        config
            .gemini
            .directory_under("GEMINI_CLI_HOME", ".gemini", "~/.gemini", env)
    }

    /// The source, when `[gemini]` is enabled and its directory exists.
    pub fn configured(config: &Config, env: Env<'_>) -> Option<Box<dyn Source>> {
        let dir = Self::directory(config, env);
        (config.gemini.enabled && dir.is_dir()).then(|| Box::new(Self::at(dir)) as Box<dyn Source>)
    }

    /// The sessions under `dir`.
    pub fn at(dir: PathBuf) -> Self {
        Self {
            name: dir.display().to_string(),
            dir,
        }
    }

    /// The source under another name than its directory's (the demo's, which lives in a
    /// temporary directory).
    pub fn named(mut self, name: &str) -> Self {
        self.name = name.to_owned();
        self
    }
}

/// What a session's cache row keeps as its cursor: where the tail stands and the reader's
/// state (the history as Gemini would load it, the calls handed to the detector).
#[derive(Debug, Serialize, Deserialize)]
struct FileState {
    file: FileCursor,
    reader: GeminiReader,
}

impl Source for GeminiSource {
    fn name(&self) -> &str {
        &self.name
    }

    fn agent(&self) -> Agent {
        Agent::Gemini
    }

    fn wake_on(&self) -> WakeOn {
        WakeOn::Directory(self.dir.clone())
    }

    fn read(&self, ctx: &ReadContext<'_>) -> Answer {
        read_source(
            &self.name,
            &self.dir,
            ctx,
            discover_gemini,
            |discovery, until| self.read_discovery(discovery, until, ctx),
        )
    }
}

impl GeminiSource {
    /// The session files listed, read by `until` ([`read_listed`]).
    fn read_discovery(
        &self,
        discovery: Discovery,
        until: Instant,
        ctx: &ReadContext<'_>,
    ) -> SourceRead {
        let mut unchanged = None;
        read_each(
            "gemini",
            &self.name,
            discovery,
            until,
            ctx,
            |t, rows| {
                let unchanged =
                    unchanged.get_or_insert_with(|| Unchanged::of(rows, |id| id.get(..8)));
                identify(t, rows, unchanged, until)
            },
            |file| self.read_file(file, until, ctx),
        )
    }
}

/// A session file's id (a subagent's from its path, a session's from its stored row when the
/// file is unchanged, else from its first line, read by `until`), parent and stored row;
/// `None` until its first line says.
fn identify(
    transcript: Transcript,
    rows: &mut HashMap<String, SessionCacheRow>,
    unchanged: &Unchanged,
    until: Instant,
) -> std::io::Result<Option<Found>> {
    let known = || {
        let name = transcript.path.file_name()?.to_str()?;
        unchanged.id(short_id(name.split('.').next()?)?, &transcript)
    };
    let id = match transcript.session_id().or_else(known) {
        Some(id) => id,
        None => match read_within(&transcript.path, until, peek_gemini)?.session_id {
            Some(id) => id,
            None => return Ok(None),
        },
    };
    Ok(Some(Found {
        parent: transcript.parent_session_id().map(str::to_owned),
        row: rows.remove(&id),
        id,
        transcript,
    }))
}

/// What a main session file's name (`session-<time>-<8 hex>`, without its extension) holds of
/// its session's id: the id's first 8 characters.
fn short_id(name: &str) -> Option<&str> {
    let short = name.get(name.len().checked_sub(8)?..)?;
    short
        .bytes()
        .all(|b| b.is_ascii_hexdigit())
        .then_some(short)
}

impl GeminiSource {
    /// One session: kept from the store when the file is unchanged, else read from the stored
    /// cursor and reader (or from the start).
    fn read_file(
        &self,
        file: &Found,
        until: Instant,
        ctx: &ReadContext<'_>,
    ) -> std::io::Result<Tracked> {
        let marker = marker(&file.transcript);
        if let Some(row) = file.row.as_ref().filter(|r| r.updated_ms == Some(marker))
            && let Some(stored) = Tracked::stored(&self.name, row.clone())
        {
            return Ok(stored);
        }
        let restored = file
            .row
            .as_ref()
            .and_then(|r| restore_file::<FileState>(r, ctx));
        let (mut state, mut session) = match restored {
            Some((state, restored)) => (state, Reading::from_restored(restored, ctx)),
            None => (
                FileState {
                    file: FileCursor::default(),
                    // Each call's output excerpt: the alert says what the repeated call
                    // returned.
                    reader: GeminiReader::new(file.transcript.gemini_file()).with_excerpts(),
                },
                Reading::new(base_info(&file.id, file.parent.as_deref()), ctx),
            ),
        };
        let FileState {
            file: cursor,
            reader,
        } = &mut state;
        if file.transcript.read_whole() {
            // Rewritten whole on every update: the reader compares the new history with the
            // one it handed out.
            reader.push_document(&read_whole(&file.transcript.path, until)?);
            take(reader, &mut session);
        } else {
            tail(&file.transcript.path, cursor, until, |new| {
                if new.restarted {
                    reader.reset();
                }
                reader.push_text(new);
                take(reader, &mut session);
            })?;
        }
        let cursor = serde_json::to_string(&state).ok();
        Ok(self.live(session, &state.reader, cursor, marker))
    }

    /// The session as read this tick, with what its lines say of it.
    fn live(
        &self,
        mut session: Reading,
        reader: &GeminiReader,
        cursor: Option<String>,
        marker: i64,
    ) -> Tracked {
        let meta = reader.meta();
        session.describe(|info| reader.describe(info));
        if meta.model.is_some() {
            session.spend.model_id.clone_from(&meta.model);
            session.spend.provider = Some("google".to_owned());
        }
        let mut tracked = session.into_tracked(&self.name, cursor, marker);
        tracked.agent_verdict = meta.agent_loop_verdict.as_ref().map(|v| v.text.clone());
        tracked
    }
}

/// Hand the reader's new calls to the session, from the start again when the history it had
/// handed out changed (the reader's contract).
fn take(reader: &mut GeminiReader, session: &mut Reading) {
    let calls: Vec<Call> = reader.take_calls();
    if reader.rewound() {
        session.restart();
    }
    session.describe(|info| reader.describe(info));
    session.push(&calls);
}

#[cfg(test)]
mod tests {
    use super::super::transcript::testing::{self, Bench, files};
    use super::*;
    use detect_core::Judgement;
    use proptest::prelude::*;
    use std::path::Path;
    use std::time::Duration;

    const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/gemini/0.61.0");

    type World = Bench<GeminiSource>;

    fn world(fixture: &str) -> World {
        Bench::of(&Path::new(FIXTURES).join(fixture), GeminiSource::at)
    }

    fn whole(fixture: &str) -> Judgement {
        world(fixture).tick().1
    }

    #[test]
    fn the_real_loop_is_flagged_and_the_healthy_session_is_not() {
        let mut looping = world("loop");
        let (read, judged) = looping.tick();
        assert_eq!(read.sessions.len(), 1);
        let session = &read.sessions[0].info;
        assert!(
            session.id.len() > 8,
            "the full id from the first line: {}",
            session.id
        );
        assert!(session.title.is_some() && session.directory.is_some());
        assert!(judged.trees[0].flagged);
        let (idle, again) = looping.tick();
        assert!(!idle.sessions[0].was_read(), "an idle tick reads nothing");
        assert_eq!(again, judged);
        let (_, healthy) = world("healthy").tick();
        assert!(!healthy.trees[0].flagged, "{:?}", healthy.trees[0]);
    }

    #[test]
    fn geminis_own_verdict_is_kept_with_the_session() {
        let mut world = world("verdict");
        let (read, _) = world.tick();
        let own = read.sessions[0]
            .agent_verdict
            .as_deref()
            .unwrap_or_default();
        assert!(own.contains("Potential loop detected"), "{own:?}");
        let (idle, _) = world.tick();
        assert_eq!(
            idle.sessions[0].agent_verdict, read.sessions[0].agent_verdict,
            "the stored row keeps it"
        );
    }

    #[test]
    fn a_subagent_rolls_up_to_its_parent() {
        let (read, judged) = world("subagent").tick();
        assert_eq!(read.sessions.len(), 2);
        let child = read
            .sessions
            .iter()
            .find(|s| s.info.parent_id.is_some())
            .expect("the subagent's directory names its parent");
        assert_eq!(judged.trees.len(), 1, "one tree: {:?}", judged.trees);
        assert_eq!(Some(&judged.trees[0].root), child.info.parent_id.as_ref());
    }

    #[test]
    fn a_rewind_under_the_tail_judges_as_the_history_left() {
        let mut world = world("loop");
        let path = files(&world.home, ".jsonl").remove(0);
        assert!(world.tick().1.trees[0].flagged);
        // Gemini rewinds to its first gemini message: the history left has no loop.
        let text = std::fs::read_to_string(&path).unwrap();
        let first_model = text
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .find(|v| v["type"] == "gemini")
            .and_then(|v| v["id"].as_str().map(str::to_owned))
            .unwrap();
        let rewind = format!("{}\n", serde_json::json!({ "$rewindTo": first_model }));
        std::fs::write(&path, format!("{text}{rewind}")).unwrap();
        let (read, judged) = world.tick();
        assert!(read.sessions[0].was_read());
        assert!(!judged.trees[0].flagged, "{:?}", judged.trees[0]);
    }

    /// An idle tick opens no file: an unchanged session is known by its stored row, so a file
    /// that would not answer (here a FIFO nobody writes to, in place of the file listed
    /// unchanged) costs nothing.
    #[test]
    fn an_unchanged_file_is_not_opened() {
        let mut bench = world("loop");
        bench.tick();
        let listed = discover_gemini(&bench.home).unwrap().transcripts;
        let stuck = files(&bench.home, ".jsonl").remove(0);
        testing::stick(&stuck);
        let long = Duration::from_secs(60);
        let (read, took, _) = bench
            .tick_listed(&listed, long, GeminiSource::read_discovery)
            .expect("the tick does not wait on the file");
        assert!(took < long / 2, "{took:?}");
        assert_eq!(read.deadline_skipped, 0, "{:?}", read.problems);
        assert_eq!(read.sessions.len(), 1);
        assert!(!read.sessions[0].was_read());
        assert!(!testing::unstick(&stuck), "no read waits on the file");
    }

    /// A session file whose first line (its full id) does not answer once it was listed (a
    /// stuck file system; here the file, listed grown, turns into a FIFO nobody writes to)
    /// costs the source its deadline, not the tick: the problem names it, and every stored
    /// row stands (its own, not known this tick, as an answer the deadline cut keeps the rows
    /// no file claimed; the other's, not read past the deadline). While it is stuck a tick
    /// does not wait on it again.
    #[test]
    fn a_file_whose_first_line_does_not_answer_keeps_every_row() {
        let mut bench = world("loop");
        let stuck = files(&bench.home, ".jsonl").remove(0);
        let text = std::fs::read_to_string(&stuck).unwrap();
        let other = stuck.with_file_name(
            stuck
                .file_name()
                .unwrap()
                .to_string_lossy()
                .replace("797a7c17", "0000aaaa"),
        );
        std::fs::write(&other, text.replace("797a7c17", "0000aaaa")).unwrap();
        let (first, _) = bench.tick();
        let ids: Vec<String> = first.sessions.iter().map(|s| s.info.id.clone()).collect();
        let before: Vec<_> = ids.iter().map(|id| bench.row(id)).collect();
        let last = text.lines().last().unwrap();
        for path in [&stuck, &other] {
            let grown = std::fs::read_to_string(path).unwrap() + last + "\n";
            std::fs::write(path, grown).unwrap();
        }
        let listed = discover_gemini(&bench.home).unwrap().transcripts;
        testing::stick(&stuck);
        let (read, bench) = bench.tick_stuck(&listed, &stuck, GeminiSource::read_discovery);
        assert_eq!(read.deadline_skipped, 2, "{:?}", read.problems);
        assert!(read.sessions.iter().all(|s| !s.was_read()));
        let after: Vec<_> = ids.iter().map(|id| bench.row(id)).collect();
        assert_eq!(after, before, "every stored row stands as it was");
        let (again, bench) = bench.tick_still_stuck(&listed, GeminiSource::read_discovery);
        assert_eq!(again.deadline_skipped, 1, "{:?}", again.problems);
        let read_again = again.sessions.iter().any(Tracked::was_read);
        assert!(read_again, "the other is read");
        let stuck_at = ids
            .iter()
            .position(|id| id.starts_with("797a7c17"))
            .unwrap();
        assert_eq!(
            bench.row(&ids[stuck_at]),
            before[stuck_at],
            "its row stands"
        );
        assert!(testing::unstick(&stuck), "the read left behind still waits");
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(16))]

        /// A session written in pieces (torn lines, re-appended messages), read at every
        /// tick, judges as the whole file read once.
        #[test]
        fn read_in_pieces_equals_read_whole(cuts in prop::collection::vec(0.0f64..1.0, 1..6)) {
            let mut world = world("loop");
            let path = files(&world.home, ".jsonl").remove(0);
            let bytes = std::fs::read(&path).unwrap();
            let mut cuts: Vec<usize> = cuts.iter().map(|c| (c * bytes.len() as f64) as usize).collect();
            cuts.sort_unstable();
            for cut in cuts {
                std::fs::write(&path, &bytes[..cut]).unwrap();
                world.tick();
            }
            std::fs::write(&path, &bytes).unwrap();
            let (_, judged) = world.tick();
            prop_assert_eq!(judged, whole("loop"));
        }
    }
}
