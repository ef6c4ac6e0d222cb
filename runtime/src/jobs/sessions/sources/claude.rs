//! Claude Code's transcripts: `$CLAUDE_CONFIG_DIR` or `~/.claude`, every
//! `projects/*/<session>.jsonl` with its subagents' files, each tailed by byte offset
//! ([`agentwatch_transcripts`]). On whenever the directory exists.
//!
//! - Every transcript is one session (a subagent's file a child of its parent's session; inline
//!   `isSidechain` lines of the oldest layout are child sessions of the file's own).
//! - Only transcripts written within `watchdog.stale_after_s`, and their ancestors, are read;
//!   the others are listed as stale (an open alert on one resolves as stale). A file that is
//!   gone is a session gone.
//! - A file unchanged since the stored row (its size and modification time) keeps its stored
//!   verdict: an idle tick is a directory listing and a `stat` per file. A changed one is read
//!   from its stored cursor into its stored reader and detector; one that shrank or was
//!   replaced is read again from the start.

use super::transcript::{
    Found, Pass, Reading, Unchanged, base_info, identify_all, marker, read_listed, read_source,
    read_within, restore_file, stored, tail,
};
use super::{Answer, ReadContext, Source, SourceRead, WakeOn};
use crate::config::{Config, Env};
use crate::jobs::sessions::agent::Agent;
use crate::jobs::sessions::tracked::{self, Tracked, cached_rows};
use agentwatch_store::SessionCacheRow;
use agentwatch_transcripts::{
    ClaudeReader, Discovery, FileCursor, Transcript, TranscriptKind, discover_claude, read_new,
    read_subagent_meta, subagent_session_id,
};
use detect_core::Session;
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// The Claude Code transcripts of one configuration directory.
#[derive(Debug)]
pub struct ClaudeSource {
    dir: PathBuf,
    name: String,
}

impl ClaudeSource {
    /// The directory `[claude]` names (`$CLAUDE_CONFIG_DIR`, else `~/.claude`).
    pub fn directory(config: &Config, env: Env<'_>) -> PathBuf {
        config
            .claude
            .directory("CLAUDE_CONFIG_DIR", "~/.claude", env)
    }

    /// The source, when `[claude]` is enabled and its directory exists.
    pub fn configured(config: &Config, env: Env<'_>) -> Option<Box<dyn Source>> {
        let dir = Self::directory(config, env);
        (config.claude.enabled && dir.is_dir()).then(|| Box::new(Self::at(dir)) as Box<dyn Source>)
    }

    /// The transcripts under `dir`.
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

/// What a transcript's cache row keeps as its cursor: where the tail stands and the reader's
/// state (calls waiting for their result, the session's title and directory so far).
#[derive(Debug, Serialize, Deserialize)]
struct FileState {
    file: FileCursor,
    reader: ClaudeReader,
}

impl Source for ClaudeSource {
    fn name(&self) -> &str {
        &self.name
    }

    fn agent(&self) -> Agent {
        Agent::Claude
    }

    fn wake_on(&self) -> WakeOn {
        WakeOn::Directory(self.dir.clone())
    }

    fn read(&self, ctx: &ReadContext<'_>) -> Answer {
        read_source(
            &self.name,
            &self.dir,
            ctx,
            discover_claude,
            |discovery, until| self.read_discovery(discovery, until, ctx),
        )
    }
}

impl ClaudeSource {
    /// The transcripts listed, read by `until` ([`read_listed`]).
    fn read_discovery(
        &self,
        discovery: Discovery,
        until: Instant,
        ctx: &ReadContext<'_>,
    ) -> SourceRead {
        let rows = cached_rows(ctx.store, &self.name, ctx.detector, ctx.full_read);
        let mut unchanged = None;
        let mut listing = identify_all(discovery, rows, |t, rows| {
            let unchanged = unchanged.get_or_insert_with(|| Unchanged::of(rows, flat_agent_id));
            identify(t, rows, unchanged, until)
        });
        let sidechains = sidechain_rows(&mut listing.unclaimed, &listing.found);
        read_listed("claude", listing, until, ctx, |file, pass| {
            let sidechains = sidechains.get(&file.id).map_or(&[][..], Vec::as_slice);
            match pass {
                Pass::Read => self.read_file(file, sidechains, until, ctx),
                Pass::Keep => Ok(stored(
                    &self.name,
                    file.row.iter().chain(sidechains).cloned(),
                )),
            }
        })
    }
}

/// A transcript's session id, parent and stored row; a flat subagent file's id and parent
/// from its stored row when the file is unchanged, else from its first lines, read by `until`
/// (`None` when they do not say: the file is not read until they do).
fn identify(
    transcript: Transcript,
    rows: &mut HashMap<String, SessionCacheRow>,
    unchanged: &Unchanged,
    until: Instant,
) -> std::io::Result<Option<Found>> {
    let (id, parent) = if let TranscriptKind::ClaudeFlatAgent { agent_id } = &transcript.kind {
        let known = unchanged.id(agent_id, &transcript).and_then(|id| {
            let (parent, _) = id.rsplit_once(AGENT_SEPARATOR)?;
            Some(parent.to_owned())
        });
        let parent = match known {
            Some(parent) => parent,
            None => match peek_session_id(&transcript.path, until)? {
                Some(parent) => parent,
                None => return Ok(None),
            },
        };
        (subagent_session_id(&parent, agent_id), Some(parent))
    } else {
        let Some(id) = transcript.session_id() else {
            return Ok(None);
        };
        (id, transcript.parent_session_id().map(str::to_owned))
    };
    Ok(Some(Found {
        row: rows.remove(&id),
        id,
        parent,
        transcript,
    }))
}

/// What a subagent's session id holds before its agent id ([`subagent_session_id`]).
const AGENT_SEPARATOR: &str = ":agent-";

/// The agent id a subagent's session id holds (a flat agent file's name holds it too).
fn flat_agent_id(id: &str) -> Option<&str> {
    Some(id.rsplit_once(AGENT_SEPARATOR)?.1)
}

/// The `sessionId` of the first lines of a flat subagent file (its parent's), read by
/// `until`.
fn peek_session_id(path: &Path, until: Instant) -> std::io::Result<Option<String>> {
    let new = read_within(path, until, |path| {
        read_new(path, &FileCursor::default(), 256 << 10)
    })?;
    let mut reader = ClaudeReader::new(agentwatch_transcripts::FileKind::from_file_name(
        &path.display().to_string(),
    ));
    for line in new.lines() {
        reader.push_line(line);
        if let Some(parent) = &reader.meta().parent_session_id {
            return Ok(Some(parent.clone()));
        }
    }
    Ok(None)
}

/// The stored rows of the main transcripts' inline sidechains, by main session: ids
/// `{main}:…` that no file of their own claimed, taken out of `unclaimed`.
fn sidechain_rows(
    unclaimed: &mut HashMap<String, SessionCacheRow>,
    found: &[Found],
) -> HashMap<String, Vec<SessionCacheRow>> {
    let mains: HashSet<&str> = found.iter().map(|f| f.id.as_str()).collect();
    let owned: Vec<(String, String)> = unclaimed
        .keys()
        .filter_map(|id| {
            let main = id
                .match_indices(':')
                .map(|(at, _)| &id[..at])
                .find(|main| mains.contains(main))?;
            Some((main.to_owned(), id.clone()))
        })
        .collect();
    let mut out: HashMap<String, Vec<SessionCacheRow>> = HashMap::new();
    for (main, id) in owned {
        if let Some(row) = unclaimed.remove(&id) {
            out.entry(main).or_default().push(row);
        }
    }
    out
}

impl ClaudeSource {
    /// One transcript's sessions: kept from the store when the file is unchanged, else read
    /// from the stored cursor (or from the start).
    fn read_file(
        &self,
        file: &Found,
        sidechains: &[SessionCacheRow],
        until: Instant,
        ctx: &ReadContext<'_>,
    ) -> std::io::Result<Vec<Tracked>> {
        let marker = marker(&file.transcript);
        if let Some(row) = file.row.as_ref().filter(|r| r.updated_ms == Some(marker))
            && let Some(stored) = Tracked::stored(&self.name, row.clone())
        {
            let mut kept = vec![stored];
            kept.extend(
                sidechains
                    .iter()
                    .filter_map(|r| Tracked::stored(&self.name, r.clone())),
            );
            return Ok(kept);
        }
        let restored = file
            .row
            .as_ref()
            .and_then(|r| restore_file::<FileState>(r, ctx));
        let (mut state, mut main) = match restored {
            Some((state, restored)) => (state, Reading::from_restored(restored, ctx)),
            None => (
                self.new_state(file, until),
                Reading::new(base_info(&file.id, file.parent.as_deref()), ctx),
            ),
        };
        let mut children: HashMap<String, Reading> = HashMap::new();
        let FileState {
            file: cursor,
            reader,
        } = &mut state;
        tail(&file.transcript.path, cursor, until, |new| {
            if new.restarted {
                reader.reset();
                main = Reading::new(base_info(&file.id, file.parent.as_deref()), ctx);
                children.clear();
            }
            reader.push_text(new);
            main.describe(|info| reader.describe(info));
            main.push(&reader.take_calls());
            self.push_sidechains(reader, &mut children, sidechains, ctx);
        })?;
        let cursor = serde_json::to_string(&state).ok();
        let mut sessions = vec![self.live(main, &state.reader, cursor, marker)];
        let read_children: HashSet<String> = children.keys().cloned().collect();
        sessions.extend(
            children
                .into_values()
                .map(|child| self.live_child(child, marker)),
        );
        // Sidechains with nothing new keep their stored rows.
        sessions.extend(
            sidechains
                .iter()
                .filter(|r| !read_children.contains(&r.session_id))
                .filter_map(|r| Tracked::stored(&self.name, r.clone())),
        );
        Ok(sessions)
    }

    /// A reader for a file read from its start, knowing what its path says (a subagent's
    /// type from its `.meta.json`, read by `until`: one that does not answer, like one that
    /// does not read, leaves the type unknown; the type only labels the session).
    fn new_state(&self, file: &Found, until: Instant) -> FileState {
        let agent_type = file
            .transcript
            .meta_path()
            .and_then(|path| read_within(&path, until, read_subagent_meta).ok())
            .and_then(|meta| meta.agent_type);
        FileState {
            file: FileCursor::default(),
            // Each call's output excerpt: the alert says what the repeated call returned.
            reader: ClaudeReader::new(file.transcript.file_kind(agent_type)).with_excerpts(),
        }
    }

    /// Push the calls of inline sidechains into their sessions (restored from their rows, or
    /// new).
    fn push_sidechains(
        &self,
        reader: &mut ClaudeReader,
        children: &mut HashMap<String, Reading>,
        rows: &[SessionCacheRow],
        ctx: &ReadContext<'_>,
    ) {
        for side in reader.take_sidechains() {
            let child = children.entry(side.session_id.clone()).or_insert_with(|| {
                let stored = rows
                    .iter()
                    .find(|r| r.session_id == side.session_id)
                    .and_then(|r| tracked::restore(ctx.store, r, ctx.detector));
                match stored {
                    Some(restored) => Reading::from_restored(restored, ctx),
                    None => {
                        let mut info = Session::new(&side.session_id);
                        info.parent_id = side.parent_session_id.clone();
                        info.title = side.title.clone();
                        info.agent = side.agent_type.clone();
                        info.directory = reader.meta().cwd.clone();
                        Reading::new(info, ctx)
                    }
                }
            });
            child.push(&side.calls);
        }
    }

    /// The file's own session as read this tick, with what its lines say of it.
    fn live(
        &self,
        mut main: Reading,
        reader: &ClaudeReader,
        cursor: Option<String>,
        marker: i64,
    ) -> Tracked {
        let meta = reader.meta();
        main.describe(|info| reader.describe(info));
        if let Some(model) = &meta.model {
            main.spend.model_id = Some(model.clone());
            main.spend.provider = Some("anthropic".to_owned());
        }
        let mut tracked = main.into_tracked(&self.name, cursor, marker);
        tracked.branch = meta.git_branch.clone().filter(|b| !b.is_empty());
        tracked
    }

    /// An inline sidechain's session as read this tick.
    fn live_child(&self, child: Reading, marker: i64) -> Tracked {
        child.into_tracked(&self.name, None, marker)
    }
}

#[cfg(test)]
mod tests {
    use super::super::SourceRead;
    use super::super::transcript::testing::{self, Bench, now_s};
    use super::*;
    use agentwatch_store::Store;
    use detect_core::Judgement;
    use proptest::prelude::*;

    const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/claude/2.1.328");

    /// A Claude configuration directory in a temporary folder, its store beside it.
    struct World {
        dir: agentwatch_testkit::TempDir,
        store: Store,
        source: ClaudeSource,
    }

    impl World {
        fn new() -> Self {
            let dir = agentwatch_testkit::TempDir::new("aw-claude-source");
            let store = Store::open(&dir.path.join("agentwatch.db")).unwrap();
            let source = ClaudeSource::at(dir.path.join("claude"));
            std::fs::create_dir_all(dir.path.join("claude/projects/-p")).unwrap();
            Self { dir, store, source }
        }

        fn file(&self, relative: &str) -> PathBuf {
            let path = self.dir.path.join("claude/projects/-p").join(relative);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            path
        }

        /// One tick's read and judgement, its cache rows stored as the job stores them.
        fn tick(&mut self, now_s: i64) -> (SourceRead, Judgement) {
            testing::tick(&self.source, &mut self.store, now_s)
        }
    }

    fn fixture(name: &str) -> Vec<u8> {
        let dir = Path::new(FIXTURES)
            .join(name)
            .join("projects/-home-user-work-project");
        let file = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.extension().is_some_and(|e| e == "jsonl"))
            .unwrap();
        std::fs::read(file).unwrap()
    }

    /// What the whole file judges to, read at once.
    fn whole(bytes: &[u8]) -> Judgement {
        let mut world = World::new();
        std::fs::write(world.file("s.jsonl"), bytes).unwrap();
        world.tick(now_s()).1
    }

    #[test]
    fn an_unchanged_file_keeps_its_stored_verdict_and_a_grown_one_is_read_after_its_cursor() {
        let bytes = fixture("loop");
        let mut world = World::new();
        let path = world.file("s.jsonl");
        std::fs::write(&path, first_half(&bytes)).unwrap();
        let (first, _) = world.tick(now_s());
        assert!(first.sessions.iter().all(Tracked::was_read));
        let (idle, _) = world.tick(now_s());
        assert_eq!(idle.sessions.len(), 1);
        assert!(!idle.sessions[0].was_read(), "an idle tick reads nothing");
        std::fs::write(&path, &bytes).unwrap();
        let (grown, judged) = world.tick(now_s());
        assert!(grown.sessions[0].was_read() && grown.sessions[0].fresh);
        assert_eq!(judged, whole(&bytes));
        assert!(judged.trees[0].flagged, "the loop fixture loops");
        assert!(
            judged.trees[0].dedup_key.starts_with("opencode-loop:"),
            "keys are the job's"
        );
    }

    /// Past the source's deadline no further file is read: a grown, looping file keeps its
    /// stored row and verdict (not read, not gone, not fixed), the answer says so, and the next
    /// tick within its deadline reads it on from its cursor.
    #[test]
    fn past_the_deadline_files_keep_their_rows_for_the_next_tick() {
        let bytes = fixture("loop");
        let mut world = World::new();
        let path = world.file("s.jsonl");
        let other = world.file("t.jsonl");
        std::fs::write(&path, first_half(&bytes)).unwrap();
        std::fs::write(&other, fixture("healthy")).unwrap();
        let (first, before) = world.tick(now_s());
        assert_eq!(first.deadline_skipped, 0);
        std::fs::write(&path, &bytes).unwrap();
        let store = &mut world.store;
        let late = testing::tick_within(&world.source, store, now_s(), std::time::Duration::ZERO);
        let (late, judged) = late;
        assert_eq!(late.deadline_skipped, 2, "{:?}", late.problems);
        assert!(late.problems[0].contains("2 files not read within the source deadline"));
        assert_eq!(late.sessions.len(), 2, "both rows stand");
        assert!(late.sessions.iter().all(|s| !s.was_read()));
        assert_eq!(judged, before, "the stored verdicts, unchanged");
        let (on, judged) = world.tick(now_s());
        assert_eq!(on.deadline_skipped, 0);
        assert!(on.sessions.iter().any(|s| s.was_read() && s.fresh));
        assert_eq!(judged, whole_pair(&bytes, &fixture("healthy")));
    }

    /// What two files judge to, each read at once.
    fn whole_pair(s: &[u8], t: &[u8]) -> Judgement {
        let mut world = World::new();
        std::fs::write(world.file("s.jsonl"), s).unwrap();
        std::fs::write(world.file("t.jsonl"), t).unwrap();
        world.tick(now_s()).1
    }

    /// The first half of a fixture's lines.
    fn first_half(bytes: &[u8]) -> &[u8] {
        let half = bytes[..bytes.len() / 2]
            .iter()
            .rposition(|b| *b == b'\n')
            .unwrap();
        &bytes[..=half]
    }

    /// A transcript whose read does not answer once it was listed (a stuck file system; here
    /// the file, listed grown, turns into a FIFO nobody writes to) costs the source its
    /// deadline, not the tick: the files before it are read, its stored row stands (not gone,
    /// not read from zero) with a problem naming it, and while it is stuck a tick does not
    /// wait on it again: the read left waiting is on a thread of its own.
    #[test]
    fn a_file_whose_read_does_not_answer_keeps_its_row_and_costs_the_deadline() {
        let (looping, healthy) = (fixture("loop"), fixture("healthy"));
        let mut bench = Bench::new(ClaudeSource::at);
        let project = bench.home.join("projects/-p");
        std::fs::create_dir_all(&project).unwrap();
        let (read_path, stuck) = (project.join("a.jsonl"), project.join("z.jsonl"));
        std::fs::write(&read_path, first_half(&healthy)).unwrap();
        std::fs::write(&stuck, first_half(&looping)).unwrap();
        bench.tick();
        let before = bench.row("z");
        std::fs::write(&read_path, &healthy).unwrap();
        std::fs::write(&stuck, &looping).unwrap();
        let listed = discover_claude(&bench.home).unwrap().transcripts;
        testing::stick(&stuck);
        let (read, bench) = bench.tick_stuck(&listed, &stuck, ClaudeSource::read_discovery);
        assert_eq!(read.deadline_skipped, 1, "{:?}", read.problems);
        let id = |s: &Tracked| (s.info.id.clone(), s.was_read());
        let ids: Vec<(String, bool)> = read.sessions.iter().map(id).collect();
        assert_eq!(ids, [("a".to_owned(), true), ("z".to_owned(), false)]);
        assert_eq!(bench.row("z"), before, "its stored row stands as it was");
        let (again, bench) = bench.tick_still_stuck(&listed, ClaudeSource::read_discovery);
        assert_eq!(again.deadline_skipped, 1, "{:?}", again.problems);
        assert_eq!(bench.row("z"), before);
        assert!(testing::unstick(&stuck), "the read left behind still waits");
    }

    #[test]
    fn a_truncated_file_is_read_again_from_its_start() {
        let loop_bytes = fixture("loop");
        let healthy = fixture("healthy");
        let mut world = World::new();
        let path = world.file("s.jsonl");
        std::fs::write(&path, &loop_bytes).unwrap();
        assert!(world.tick(now_s()).1.trees[0].flagged);
        // Rewritten shorter with other lines (the session id is the file's name).
        std::fs::write(&path, &healthy).unwrap();
        let (_, judged) = world.tick(now_s());
        assert_eq!(judged, whole(&healthy));
        assert!(!judged.trees[0].flagged);
    }

    #[test]
    fn old_files_are_stale_unless_a_child_works() {
        let mut world = World::new();
        let parent = world.file("p.jsonl");
        std::fs::write(&parent, fixture("healthy")).unwrap();
        let child = world.file("p/subagents/agent-a1.jsonl");
        std::fs::write(&child, fixture("loop")).unwrap();
        let old = world.file("old.jsonl");
        std::fs::write(&old, fixture("healthy")).unwrap();
        let two_hours_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(7200);
        for path in [&parent, &child, &old] {
            let file = std::fs::File::options().append(true).open(path).unwrap();
            file.set_modified(two_hours_ago).unwrap();
        }
        let (read, judged) = world.tick(now_s());
        assert_eq!(
            read.stale.len(),
            3,
            "nothing written within the hour: {:?}",
            read.stale
        );
        assert!(judged.trees.is_empty());
        // The subagent writes: it and its parent are read, the old session stays stale.
        let mut bytes = fixture("loop");
        bytes.extend_from_slice(b"\n");
        std::fs::write(&child, &bytes).unwrap();
        let (read, judged) = world.tick(now_s());
        let ids: HashSet<&str> = read.sessions.iter().map(|s| s.info.id.as_str()).collect();
        assert_eq!(ids, HashSet::from(["p", "p:agent-a1"]));
        assert_eq!(read.stale, vec!["old".to_owned()]);
        assert_eq!(
            judged.trees.len(),
            1,
            "one tree: the subagent rolls up to its parent"
        );
        assert_eq!(judged.trees[0].root, "p");
        assert!(judged.trees[0].flagged);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]

        /// A transcript written in pieces (torn lines included), read at every tick, judges as
        /// the whole file read once.
        #[test]
        fn read_in_pieces_equals_read_whole(cuts in prop::collection::vec(0.0f64..1.0, 1..6)) {
            let bytes = fixture("loop");
            let mut cuts: Vec<usize> = cuts.iter().map(|c| (c * bytes.len() as f64) as usize).collect();
            cuts.sort_unstable();
            let mut world = World::new();
            let path = world.file("s.jsonl");
            for cut in cuts {
                std::fs::write(&path, &bytes[..cut]).unwrap();
                world.tick(now_s());
            }
            std::fs::write(&path, &bytes).unwrap();
            let (_, judged) = world.tick(now_s());
            prop_assert_eq!(judged, whole(&bytes));
        }
    }
}
