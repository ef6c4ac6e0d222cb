//! Codex CLI's rollouts: `$CODEX_HOME` or `~/.codex`, every
//! `sessions/YYYY/MM/DD/rollout-*.jsonl` and `archived_sessions/rollout-*.jsonl`, each tailed
//! by byte offset ([`agentwatch_transcripts::CodexReader`]); a `.jsonl.zst` rollout is read
//! whole when it changes. On whenever the directory exists.
//!
//! - Every rollout is one thread, its session id the thread id; a subagent's thread names its
//!   parent in its `session_meta`, so its loop rolls up to the root thread.
//! - Only rollouts written within `watchdog.stale_after_s`, and their ancestors, are read; the
//!   others are listed as stale. A file unchanged since its stored row (size and modification
//!   time) keeps its stored verdict; a changed one is read from its stored cursor into its
//!   stored reader and detector.

use super::transcript::{
    Found, Reading, base_info, marker, read_each, read_source, read_whole, read_within,
    restore_file, stored_parent, tail,
};
use super::{Answer, ReadContext, Source, SourceRead, WakeOn};
use crate::config::{Config, Env};
use crate::jobs::sessions::agent::Agent;
use crate::jobs::sessions::tracked::Tracked;
use agentwatch_store::SessionCacheRow;
use agentwatch_transcripts::{
    CodexMeta, CodexReader, Discovery, FileCursor, Transcript, discover_codex, peek_codex,
};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Instant;

/// The Codex CLI rollouts of one Codex home.
#[derive(Debug)]
pub struct CodexSource {
    dir: PathBuf,
    name: String,
}

impl CodexSource {
    /// The directory `[codex]` names (`$CODEX_HOME`, else `~/.codex`).
    pub fn directory(config: &Config, env: Env<'_>) -> PathBuf {
        config.codex.directory("CODEX_HOME", "~/.codex", env)
    }

    /// The source, when `[codex]` is enabled and its directory exists.
    pub fn configured(config: &Config, env: Env<'_>) -> Option<Box<dyn Source>> {
        let dir = Self::directory(config, env);
        (config.codex.enabled && dir.is_dir()).then(|| Box::new(Self::at(dir)) as Box<dyn Source>)
    }

    /// The rollouts under `dir`.
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

/// What a rollout's cache row keeps as its cursor: where the tail stands and the reader's
/// state (calls waiting for their output, the thread's title and directory so far).
#[derive(Debug, Serialize, Deserialize)]
struct FileState {
    file: FileCursor,
    reader: CodexReader,
}

impl Source for CodexSource {
    fn name(&self) -> &str {
        &self.name
    }

    fn agent(&self) -> Agent {
        Agent::Codex
    }

    fn wake_on(&self) -> WakeOn {
        WakeOn::Directory(self.dir.clone())
    }

    fn read(&self, ctx: &ReadContext<'_>) -> Answer {
        read_source(
            &self.name,
            &self.dir,
            ctx,
            discover_codex,
            |discovery, until| self.read_discovery(discovery, until, ctx),
        )
    }
}

impl CodexSource {
    /// The rollouts listed, read by `until` ([`read_listed`]).
    fn read_discovery(
        &self,
        discovery: Discovery,
        until: Instant,
        ctx: &ReadContext<'_>,
    ) -> SourceRead {
        read_each(
            "codex",
            &self.name,
            discovery,
            until,
            ctx,
            |t, rows| identify(t, rows, until, ctx),
            |file| self.read_file(file, until, ctx),
        )
    }
}

/// A rollout's thread id (its file name's, else its first lines') and parent (its stored
/// row's, else its first lines' for a file written since the cutoff), its first lines read by
/// `until`; `None` when its lines do not say yet.
fn identify(
    transcript: Transcript,
    rows: &mut HashMap<String, SessionCacheRow>,
    until: Instant,
    ctx: &ReadContext<'_>,
) -> std::io::Result<Option<Found>> {
    let recent = ctx
        .cutoff_ms
        .is_none_or(|cutoff| transcript.mtime_ms >= cutoff);
    let peek = || read_within(&transcript.path, until, peek_codex);
    let mut peeked: Option<CodexMeta> = None;
    let id = match transcript.session_id() {
        Some(id) => id,
        None => match peeked.insert(peek()?).thread_id.clone() {
            Some(id) => id,
            None => return Ok(None),
        },
    };
    let row = rows.remove(&id);
    let parent = match (&row, peeked) {
        (Some(row), _) => stored_parent(Some(row)),
        (None, Some(meta)) => meta.parent_thread_id,
        (None, None) if recent => peek()?.parent_thread_id,
        (None, None) => None,
    };
    Ok(Some(Found {
        transcript,
        id,
        parent,
        row,
    }))
}

impl CodexSource {
    /// One rollout's thread: kept from the store when the file is unchanged, else read from
    /// the stored cursor (or from the start; a compressed one whole).
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
            .filter(|_| !file.transcript.read_whole())
            .and_then(|r| restore_file::<FileState>(r, ctx));
        let fresh = || FileState {
            file: FileCursor::default(),
            // Each call's output excerpt: the alert says what the repeated call returned.
            reader: CodexReader::new(Some(file.id.clone())).with_excerpts(),
        };
        let (mut state, mut thread) = match restored {
            Some((state, restored)) => (state, Reading::from_restored(restored, ctx)),
            None => (
                fresh(),
                Reading::new(base_info(&file.id, file.parent.as_deref()), ctx),
            ),
        };
        if file.transcript.read_whole() {
            // zstd has no tail: the whole rollout, finished (Codex compresses closed threads).
            let bytes = read_whole(&file.transcript.path, until)?;
            for line in bytes.split(|b| *b == b'\n') {
                state.reader.push_line(line);
            }
            state.reader.finish();
            thread.describe(|info| state.reader.describe(info));
            thread.push(&state.reader.take_calls());
            return Ok(self.live(thread, &state.reader, None, marker));
        }
        let FileState {
            file: cursor,
            reader,
        } = &mut state;
        tail(&file.transcript.path, cursor, until, |new| {
            if new.restarted {
                reader.reset();
                thread = Reading::new(base_info(&file.id, file.parent.as_deref()), ctx);
            }
            reader.push_text(new);
            thread.describe(|info| reader.describe(info));
            thread.push(&reader.take_calls());
        })?;
        let cursor = serde_json::to_string(&state).ok();
        Ok(self.live(thread, &state.reader, cursor, marker))
    }

    /// The thread as read this tick, with what its lines say of it.
    fn live(
        &self,
        mut thread: Reading,
        reader: &CodexReader,
        cursor: Option<String>,
        marker: i64,
    ) -> Tracked {
        let meta = reader.meta();
        thread.describe(|info| reader.describe(info));
        if meta.model.is_some() {
            thread.spend.model_id.clone_from(&meta.model);
            thread.spend.provider.clone_from(&meta.model_provider);
        }
        let mut tracked = thread.into_tracked(&self.name, cursor, marker);
        tracked.branch = meta.git_branch.clone().filter(|b| !b.is_empty());
        tracked
    }
}

#[cfg(test)]
mod tests {
    use super::super::transcript::testing::{Bench, files};
    use super::*;
    use detect_core::Judgement;
    use proptest::prelude::*;
    use std::path::Path;

    const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/codex/0.169.0");

    type World = Bench<CodexSource>;

    fn world(fixture: &str) -> World {
        Bench::of(&Path::new(FIXTURES).join(fixture), CodexSource::at)
    }

    /// What the fixture's rollouts judge to, read whole at once.
    fn whole(fixture: &str) -> Judgement {
        world(fixture).tick().1
    }

    #[test]
    fn the_real_loop_is_flagged_and_the_healthy_thread_is_not() {
        let mut looping = world("loop");
        let (read, judged) = looping.tick();
        assert_eq!(read.sessions.len(), 1);
        let thread = &read.sessions[0].info;
        assert!(
            thread.title.is_some(),
            "the first user message is the title"
        );
        assert!(thread.directory.is_some(), "session_meta names the cwd");
        assert!(judged.trees[0].flagged);
        let (idle, again) = looping.tick();
        assert!(!idle.sessions[0].was_read(), "an idle tick reads nothing");
        assert_eq!(again, judged);
        let (_, healthy) = world("healthy").tick();
        assert!(!healthy.trees[0].flagged, "{:?}", healthy.trees[0]);
    }

    #[test]
    fn a_subagent_thread_rolls_up_to_its_parent() {
        let (read, judged) = world("subagent").tick();
        assert_eq!(read.sessions.len(), 2);
        let child = read
            .sessions
            .iter()
            .find(|s| s.info.parent_id.is_some())
            .expect("the subagent names its parent");
        assert_eq!(judged.trees.len(), 1, "one tree: {:?}", judged.trees);
        assert_eq!(Some(&judged.trees[0].root), child.info.parent_id.as_ref());
        assert!(
            judged.trees[0].flagged,
            "the subagent's loop flags the tree"
        );
    }

    #[test]
    fn a_compressed_rollout_judges_as_the_plain_one_and_old_files_are_stale() {
        let mut world = world("loop");
        let plain = files(&world.home, ".jsonl").remove(0);
        let zst = world.home.join("archived_sessions").join(format!(
            "{}.zst",
            plain.file_name().unwrap().to_string_lossy()
        ));
        std::fs::create_dir_all(zst.parent().unwrap()).unwrap();
        let bytes = std::fs::read(&plain).unwrap();
        std::fs::write(&zst, zstd::encode_all(&bytes[..], 3).unwrap()).unwrap();
        std::fs::remove_file(&plain).unwrap();
        let (read, judged) = world.tick();
        assert_eq!(judged, whole("loop"));
        assert!(read.sessions[0].was_read());
        let two_hours_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(7200);
        let file = std::fs::File::options().append(true).open(&zst).unwrap();
        file.set_modified(two_hours_ago).unwrap();
        let (read, judged) = world.tick();
        assert_eq!(read.stale.len(), 1);
        assert!(judged.trees.is_empty());
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(16))]

        /// A rollout written in pieces (torn lines included), read at every tick, judges as
        /// the whole file read once.
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
