//! What the transcript sources (Claude Code, Codex CLI, Gemini CLI) share: a file's change
//! marker, which files a tick reads, one session's detector as it is read, and the tail loop.

use super::{Answer, ReadContext, SourceRead, count};
use crate::jobs::sessions::refusals::SessionRefusals;
use crate::jobs::sessions::repeats::{Repeats, push_call};
use crate::jobs::sessions::tracked::{
    self, Restored, Tracked, active_with_ancestors, cached_rows, newest_call,
};
use agentwatch_opencode::lite::Spend;
use agentwatch_store::SessionCacheRow;
use agentwatch_transcripts::{
    Discovery, FileCursor, NewText, Transcript, read_new, read_transcript,
};
use detect_core::{Call, DetectConfig, Session, SessionDetector};
use std::collections::{HashMap, HashSet};
use std::io;
use std::path::Path;
use std::time::Instant;

/// Bytes of a transcript read per call of the tail (a line longer than this is dropped and
/// counted: tool results this large are not worth judging).
pub(crate) const CHUNK_BYTES: usize = 8 << 20;

/// Bytes of a transcript read whole at most (a `.jsonl.zst` rollout, a Gemini `.json`).
pub(crate) const WHOLE_BYTES: u64 = 256 << 20;

/// A file's change marker, kept as the row's `updated_ms`: its size and modification time.
pub(crate) fn marker(transcript: &Transcript) -> i64 {
    let size = i64::try_from(transcript.size).unwrap_or(i64::MAX);
    transcript
        .mtime_ms
        .wrapping_mul(1_000_003)
        .wrapping_add(size)
}

/// A stored row's session and its file state (the tail's place and the reader, the row's
/// cursor, read from the store when the heads left it out), to read the file on from; `None`
/// (no row, or one that does not restore): read it from its start.
pub(crate) fn restore_file<S: serde::de::DeserializeOwned>(
    row: &SessionCacheRow,
    ctx: &ReadContext<'_>,
) -> Option<(S, Restored)> {
    let restored = tracked::restore(ctx.store, row, ctx.detector)?;
    let state = serde_json::from_str(restored.cursor.as_deref()?).ok()?;
    Some((state, restored))
}

/// The sessions to read, from `(id, parent, file)`: written since the stale cutoff, and
/// their ancestors.
pub(crate) fn active<'a>(
    found: impl Iterator<Item = (&'a str, Option<&'a str>, &'a Transcript)>,
    ctx: &ReadContext<'_>,
) -> HashSet<&'a str> {
    active_with_ancestors(found.map(|(id, parent, transcript)| {
        let active = ctx
            .cutoff_ms
            .is_none_or(|cutoff| transcript.mtime_ms >= cutoff);
        (id, parent, active)
    }))
}

/// A transcript file and the session it is.
#[derive(Debug)]
pub(crate) struct Found {
    pub transcript: Transcript,
    pub id: String,
    pub parent: Option<String>,
    /// Its stored row, taken while identifying the file.
    pub row: Option<SessionCacheRow>,
}

/// What [`read_listed`] asks of a source for one file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Pass {
    /// Read it from its stored row on.
    Read,
    /// Not read this tick (the source's deadline passed, or the file's read did not answer by
    /// it): its stored rows stand as they are.
    Keep,
}

/// Sessions whose stored rows stand as they are ([`Pass::Keep`]).
pub(crate) fn stored(
    source: &str,
    rows: impl IntoIterator<Item = SessionCacheRow>,
) -> Vec<Tracked> {
    rows.into_iter()
        .filter_map(|row| Tracked::stored(source, row))
        .collect()
}

/// A transcript source's answer: `dir` listed by `list` ([`list_within`]), the listing read
/// by `read` within the source's deadline from now (the `until` it is given).
pub(crate) fn read_source(
    name: &str,
    dir: &Path,
    ctx: &ReadContext<'_>,
    list: fn(&Path) -> io::Result<Discovery>,
    read: impl FnOnce(Discovery, Instant) -> SourceRead,
) -> Answer {
    let until = Instant::now() + ctx.deadline;
    match list_within(dir, ctx, list) {
        Ok(discovery) => Answer::Read(read(discovery, until)),
        Err(e) => Answer::Failed(name.to_owned(), e),
    }
}

/// [`read_listed`] for a source whose every file is one session: each identified by
/// `identify` ([`identify_all`]), read by `read_file`, or kept as its stored row.
pub(crate) fn read_each(
    agent: &str,
    name: &str,
    discovery: Discovery,
    until: Instant,
    ctx: &ReadContext<'_>,
    identify: impl FnMut(Transcript, &mut HashMap<String, SessionCacheRow>) -> io::Result<Option<Found>>,
    mut read_file: impl FnMut(&Found) -> io::Result<Tracked>,
) -> SourceRead {
    let rows = cached_rows(ctx.store, name, ctx.detector, ctx.full_read);
    let listing = identify_all(discovery, rows, identify);
    read_listed(agent, listing, until, ctx, |file, pass| match pass {
        Pass::Read => read_file(file).map(|session| vec![session]),
        Pass::Keep => Ok(stored(name, file.row.clone())),
    })
}

/// A source's listing, each file known as the session it is ([`identify_all`]).
#[derive(Debug)]
pub(crate) struct Listing {
    pub found: Vec<Found>,
    pub problems: Vec<String>,
    /// Stored rows no file found claims: sessions gone, or in files not identified.
    pub unclaimed: HashMap<String, SessionCacheRow>,
    /// Files not identified because their first lines did not answer within the deadline.
    late: usize,
}

/// The files of `discovery`, each identified by `identify` (its session and parent, its
/// stored row taken from the rows given; `Ok(None)`: its lines do not say yet, it is left out
/// until they do). A file whose first lines do not answer within the source's deadline
/// ([`read_within`]) is a problem naming it and counts as skipped by the deadline.
pub(crate) fn identify_all(
    discovery: Discovery,
    mut rows: HashMap<String, SessionCacheRow>,
    mut identify: impl FnMut(
        Transcript,
        &mut HashMap<String, SessionCacheRow>,
    ) -> io::Result<Option<Found>>,
) -> Listing {
    let mut listing = Listing {
        found: Vec::with_capacity(discovery.transcripts.len()),
        problems: discovery.problems,
        unclaimed: HashMap::new(),
        late: 0,
    };
    for transcript in discovery.transcripts {
        let path = transcript.path.clone();
        match identify(transcript, &mut rows) {
            Ok(found) => listing.found.extend(found),
            Err(e) if is_late(&e) => {
                listing.late += 1;
                listing.problems.push(format!("{}: {e}", path.display()));
            }
            // As when its lines do not say yet: the file is known once they can be read.
            Err(_) => {}
        }
    }
    listing.unclaimed = rows;
    listing
}

/// The stored rows' ids by what a file's name holds of them and the file's change marker when
/// it was read: a file unchanged since is the session its row is, without its first lines
/// read again (only they hold a Gemini session's full id, a Claude flat agent's parent), so an
/// idle tick reads no file.
#[derive(Debug)]
pub(crate) struct Unchanged(HashMap<(String, i64), String>);

impl Unchanged {
    /// `rows` by `named`: what a file's name holds of a row's id (`None`: nothing).
    pub(crate) fn of(
        rows: &HashMap<String, SessionCacheRow>,
        named: impl Fn(&str) -> Option<&str>,
    ) -> Self {
        let by_name = rows
            .iter()
            .filter_map(|(id, row)| Some(((named(id)?.to_owned(), row.updated_ms?), id.clone())));
        Self(by_name.collect())
    }

    /// The id of the session `transcript` was read as, when its name holds `named` of it and
    /// it did not change since.
    pub(crate) fn id(&self, named: &str, transcript: &Transcript) -> Option<String> {
        self.0.get(&(named.to_owned(), marker(transcript))).cloned()
    }
}

/// A transcript source's answer: the files written since the stale cutoff (and their
/// ancestors) read by `read_one`, the others listed as stale, every failure a problem, and
/// its part of the tick's `sources=` line (`{agent} 3 sessions`). Once the source's deadline
/// (`until`, [`ReadContext::deadline`] from the start of its read) passed, no further file is
/// read: each keeps its stored rows ([`Pass::Keep`]) and is counted in
/// [`SourceRead::deadline_skipped`]. A file whose read does not answer by then (a stuck file
/// system: `read_one` reads through [`read_within`]) is kept the same way, with a problem
/// naming it. An answer the deadline cut also keeps the rows no file claimed (a file not
/// identified in time is not known).
pub(crate) fn read_listed(
    agent: &str,
    listing: Listing,
    until: Instant,
    ctx: &ReadContext<'_>,
    mut read_one: impl FnMut(&Found, Pass) -> io::Result<Vec<Tracked>>,
) -> SourceRead {
    let keep = active(
        listing
            .found
            .iter()
            .map(|f| (f.id.as_str(), f.parent.as_deref(), &f.transcript)),
        ctx,
    );
    let mut read = SourceRead {
        cached: true,
        problems: listing.problems,
        deadline_skipped: listing.late,
        ..SourceRead::default()
    };
    for file in &listing.found {
        if !keep.contains(file.id.as_str()) {
            read.stale.push(file.id.clone());
            continue;
        }
        let pass = if Instant::now() < until {
            Pass::Read
        } else {
            read.deadline_skipped += 1;
            Pass::Keep
        };
        let path = file.transcript.path.display();
        let answer = match read_one(file, pass) {
            Err(e) if is_late(&e) => {
                read.deadline_skipped += 1;
                read.problems.push(format!("{path}: {e}"));
                read_one(file, Pass::Keep)
            }
            answer => answer,
        };
        match answer {
            Ok(sessions) => read.sessions.extend(sessions),
            Err(e) => read.problems.push(format!("{path}: {e}")),
        }
    }
    if read.deadline_skipped > 0 {
        read.problems.push(format!(
            "{agent}: {} not read within the source deadline ({:?}): kept for the next tick",
            count(read.deadline_skipped, "file"),
            ctx.deadline
        ));
        read.keep_rows = listing.unclaimed.into_keys().collect();
    }
    read.line = format!("{agent} {}", count(read.sessions.len(), "session"));
    read
}

/// A file's read that did not answer within the source's deadline ([`read_within`]).
#[derive(Debug, thiserror::Error)]
#[error("did not answer within the source deadline: kept for the next tick")]
struct Late;

/// Whether `e` is a read cut by the source's deadline ([`Late`]).
fn is_late(e: &io::Error) -> bool {
    e.get_ref().is_some_and(|e| e.is::<Late>())
}

/// `read` of the file (or directory) at `path` (a chunk of a tail, a whole file, its first
/// lines, a listing), owned in and out, run by [`within`]: an answer that does not come before
/// `until` (a stuck file system) is a [`Late`] error, and the caller keeps what it stored of
/// the file.
pub(crate) fn read_within<T: Send + 'static>(
    path: &Path,
    until: Instant,
    read: impl FnOnce(&Path) -> io::Result<T> + Send + 'static,
) -> io::Result<T> {
    let owned = path.to_path_buf();
    within(path, until, move || read(&owned))
        .unwrap_or_else(|| Err(io::Error::new(io::ErrorKind::TimedOut, Late)))
}

/// A whole transcript ([`read_transcript`], at most [`WHOLE_BYTES`]), read by `until`.
pub(crate) fn read_whole(path: &Path, until: Instant) -> io::Result<Vec<u8>> {
    read_within(path, until, |path| read_transcript(path, WHOLE_BYTES))
}

/// Paths whose probe has not returned yet (a stuck file system): not probed again until it
/// does, so a stuck file costs one waiting thread, not one per tick.
static STUCK: std::sync::Mutex<Vec<std::path::PathBuf>> = std::sync::Mutex::new(Vec::new());

/// The least time a listing is given, whatever is left of the deadline: a local listing of
/// thousands of files takes milliseconds, and the files after it are what the deadline cuts.
const LISTING_FLOOR: std::time::Duration = std::time::Duration::from_secs(1);

/// A source's listing of `dir` (`discover_claude`, …), bounded by the source's deadline (at
/// least [`LISTING_FLOOR`]): a listing that does not return in time (a stuck file system) is
/// an error saying so.
pub(crate) fn list_within<T: Send + 'static>(
    dir: &Path,
    ctx: &ReadContext<'_>,
    list: fn(&Path) -> io::Result<T>,
) -> Result<T, String> {
    let deadline = ctx.deadline.max(LISTING_FLOOR);
    read_within(dir, Instant::now() + deadline, list).map_err(|e| {
        if is_late(&e) {
            format!(
                "{}: the listing did not return within the source deadline ({deadline:?})",
                dir.display()
            )
        } else {
            e.to_string()
        }
    })
}

/// `work`'s answer when it comes before `until`, run on a thread of its own that is left
/// behind when it does not (a stuck file system): `None`. While it waits, work on the same
/// `key` is not started again, so a stuck path costs one waiting thread, not one per tick. No
/// thread to spare: `work` runs in line.
fn within<T: Send + 'static>(
    key: &Path,
    until: Instant,
    work: impl FnOnce() -> T + Send + 'static,
) -> Option<T> {
    let left = until.checked_duration_since(Instant::now())?;
    let key = key.to_path_buf();
    let unstick = |key: &std::path::PathBuf| {
        STUCK
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .retain(|p| p != key);
    };
    {
        let mut stuck = STUCK
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if stuck.contains(&key) {
            return None;
        }
        stuck.push(key.clone());
    }
    let (tx, rx) = std::sync::mpsc::channel();
    let theirs = key.clone();
    // Shared, so that `work` can still run in line when no thread can be started.
    let work = std::sync::Arc::new(std::sync::Mutex::new(Some(work)));
    let handed = work.clone();
    let spawned = std::thread::Builder::new()
        .name("agentwatch-probe".to_owned())
        .spawn(move || {
            let work = handed.lock().ok().and_then(|mut w| w.take());
            let answer = work.map(|w| w());
            unstick(&theirs);
            let _ = tx.send(answer);
        });
    if spawned.is_err() {
        unstick(&key);
        let work = work.lock().ok().and_then(|mut w| w.take())?;
        return Some(work());
    }
    rx.recv_timeout(left).ok().flatten()
}

/// The parent a stored row names (what the file's lines said when it was last read).
pub(crate) fn stored_parent(row: Option<&SessionCacheRow>) -> Option<String> {
    serde_json::from_str::<Session>(&row?.info).ok()?.parent_id
}

/// What a transcript's path (and first lines) say of its session: its id and parent.
pub(crate) fn base_info(id: &str, parent: Option<&str>) -> Session {
    let mut info = Session::new(id);
    info.parent_id = parent.map(str::to_owned);
    info
}

/// Read a file from `cursor` to its end, a chunk at a time, `push` with every chunk (whose
/// `restarted` says the file was replaced or shrunk: read again from its start, so reset
/// what was built from it). Each chunk is read by `until` ([`read_within`]); what it was
/// pushed is to be dropped when one is not.
pub(crate) fn tail(
    path: &Path,
    cursor: &mut FileCursor,
    until: Instant,
    mut push: impl FnMut(&NewText),
) -> io::Result<()> {
    loop {
        let from = cursor.clone();
        let new = read_within(path, until, move |path| read_new(path, &from, CHUNK_BYTES))?;
        push(&new);
        *cursor = new.cursor.clone();
        if !new.more {
            return Ok(());
        }
    }
}

/// One session being read: its detector and what is known of it.
pub(crate) struct Reading {
    /// Made at the session's first call, from what is known of it by then ([`Self::info`]).
    detector: Option<SessionDetector>,
    config: DetectConfig,
    /// What is known of the session. A source says what its reader learnt of it
    /// ([`Reading::describe`]) before it pushes calls: the detector is made at the first call,
    /// from what the lines said of the session by then (its directory resolves the calls'
    /// relative paths, its agent or title may make it read-only), as a whole-file read makes
    /// it (`agentwatch detect`), so both judge alike.
    pub info: Session,
    pub spend: Spend,
    pub newest: Option<i64>,
    pub fresh: bool,
    pub refusals: SessionRefusals,
    pub repeats: Repeats,
}

impl Reading {
    pub(crate) fn from_restored(restored: Restored, ctx: &ReadContext<'_>) -> Self {
        // A detector stored before the session's first counted call (a tick that read only
        // its first lines) knows nothing of it: it is made again at that call, from what the
        // lines said by then, as if read in one piece.
        let took_calls = |d: &SessionDetector| {
            d.latest_own_landing().is_some()
                || d.latest_descendant_landing().is_some()
                || d.figures().reason.window_calls > 0
        };
        Self {
            detector: Some(restored.detector).filter(took_calls),
            config: ctx.detector.clone(),
            info: restored.info,
            spend: restored.spend,
            newest: restored.newest_call_ms,
            fresh: false,
            refusals: restored.refusals,
            repeats: restored.repeats,
        }
    }

    pub(crate) fn new(info: Session, ctx: &ReadContext<'_>) -> Self {
        Self {
            detector: None,
            config: ctx.detector.clone(),
            info,
            spend: Spend::default(),
            newest: None,
            fresh: true,
            refusals: SessionRefusals::default(),
            repeats: Repeats::default(),
        }
    }

    /// Start again from nothing (the history changed under the calls pushed so far),
    /// keeping what is known of the session.
    pub(crate) fn restart(&mut self) {
        self.detector = None;
        self.newest = None;
        self.fresh = true;
        self.refusals = SessionRefusals::default();
        self.repeats = Repeats::default();
    }

    /// Say what the reader learnt of the session (`describe` sets it on its info), before
    /// its calls are pushed.
    pub(crate) fn describe(&mut self, describe: impl FnOnce(&mut Session)) {
        describe(&mut self.info);
    }

    pub(crate) fn push(&mut self, calls: &[Call]) {
        if calls.is_empty() {
            return;
        }
        let detector = self
            .detector
            .get_or_insert_with(|| SessionDetector::new(&self.info, &self.config));
        for call in calls {
            push_call(detector, call, &mut self.refusals, &mut self.repeats);
        }
        self.newest = newest_call(calls.iter(), self.newest);
        self.fresh = true;
    }

    /// The session as read this tick, its row's cursor and change marker.
    pub(crate) fn into_tracked(self, source: &str, cursor: Option<String>, marker: i64) -> Tracked {
        let detector = self
            .detector
            .unwrap_or_else(|| SessionDetector::new(&self.info, &self.config));
        let mut tracked = Tracked::live(
            source,
            self.info,
            self.spend,
            self.newest,
            self.fresh,
            detector,
            cursor,
            Some(marker),
        );
        tracked.refusals = self.refusals;
        tracked.repeats = self.repeats;
        tracked
    }
}

#[cfg(test)]
pub(crate) mod testing {
    //! One tick of a transcript source against a real store, as the job runs it.

    use super::super::{Answer, ReadContext, Source, SourceRead};
    use crate::jobs::sessions::tracked::judge;
    use agentwatch_store::{SessionCacheRow, Store};
    use agentwatch_transcripts::{Discovery, Transcript};
    use detect_core::{DetectConfig, Judgement};
    use std::collections::HashSet;
    use std::path::Path;
    use std::time::{Duration, Instant};

    /// One tick's read and judgement, its cache rows stored as the job stores them (sessions
    /// written more than an hour before `now_s` are stale).
    pub(crate) fn tick(
        source: &dyn Source,
        store: &mut Store,
        now_s: i64,
    ) -> (SourceRead, Judgement) {
        tick_within(source, store, now_s, std::time::Duration::from_secs(60))
    }

    /// [`tick`] with the source's read bounded by `deadline`.
    pub(crate) fn tick_within(
        source: &dyn Source,
        store: &mut Store,
        now_s: i64,
        deadline: std::time::Duration,
    ) -> (SourceRead, Judgement) {
        tick_reading(source.name(), store, now_s, deadline, |ctx| {
            let Answer::Read(read) = source.read(ctx) else {
                panic!("the directory reads");
            };
            read
        })
    }

    /// [`tick_within`] of the source named `name` whose answer is `read`'s.
    pub(crate) fn tick_reading(
        name: &str,
        store: &mut Store,
        now_s: i64,
        deadline: std::time::Duration,
        read: impl FnOnce(&ReadContext<'_>) -> SourceRead,
    ) -> (SourceRead, Judgement) {
        let config = DetectConfig::default();
        let watched = HashSet::new();
        let ctx = ReadContext {
            store: Some(&*store),
            detector: &config,
            full_read: false,
            cutoff_ms: Some((now_s - 3600) * 1000),
            now: now_s,
            focus: None,
            deadline,
            watched: &watched,
        };
        let mut read = read(&ctx);
        let (judged, mut rows) = judge(&mut read.sessions, &config, now_s, Some(&*store));
        let rows = rows.remove(name).unwrap_or_default();
        let kept: HashSet<&str> = rows
            .kept
            .iter()
            .chain(&read.keep_rows)
            .map(String::as_str)
            .collect();
        store
            .update_session_cache(name, &rows.written, &kept)
            .unwrap();
        (read, judged)
    }

    /// Copy a fixture's directory tree (an agent's home as the CLI left it) to `to`.
    pub(crate) fn copy_tree(from: &Path, to: &Path) {
        std::fs::create_dir_all(to).unwrap();
        for entry in std::fs::read_dir(from).unwrap() {
            let entry = entry.unwrap();
            let target = to.join(entry.file_name());
            if entry.file_type().unwrap().is_dir() {
                copy_tree(&entry.path(), &target);
            } else {
                std::fs::copy(entry.path(), target).unwrap();
            }
        }
    }

    /// The files under `dir` whose names end with `suffix`, sorted.
    pub(crate) fn files(dir: &Path, suffix: &str) -> Vec<std::path::PathBuf> {
        let mut out = Vec::new();
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                out.extend(files(&path, suffix));
            } else if path.to_string_lossy().ends_with(suffix) {
                out.push(path);
            }
        }
        out.sort();
        out
    }

    /// An agent's directory made of a fixture's files, the source reading it and its store.
    pub(crate) struct Bench<S> {
        _dir: agentwatch_testkit::TempDir,
        pub home: std::path::PathBuf,
        pub store: Store,
        pub source: S,
    }

    impl<S: Source + 'static> Bench<S> {
        /// An empty agent directory, read by `source`.
        pub(crate) fn new(source: fn(std::path::PathBuf) -> S) -> Self {
            let dir = agentwatch_testkit::TempDir::new("aw-transcript-source");
            let home = dir.path.join("agent");
            std::fs::create_dir_all(&home).unwrap();
            let store = Store::open(&dir.path.join("agentwatch.db")).unwrap();
            Self {
                source: source(home.clone()),
                _dir: dir,
                home,
                store,
            }
        }

        /// `fixture` (an agent's directory as its CLI left it) copied, read by `source`.
        pub(crate) fn of(fixture: &Path, source: fn(std::path::PathBuf) -> S) -> Self {
            let bench = Self::new(source);
            copy_tree(fixture, &bench.home);
            bench
        }

        pub(crate) fn tick(&mut self) -> (SourceRead, Judgement) {
            tick(&self.source, &mut self.store, now_s())
        }

        /// A tick over `listed` (a listing taken earlier) through `read` (the source's read
        /// of a listing), bounded by `deadline`, on a thread of its own and timed: `None` when
        /// it does not return within 10 s (it hangs).
        pub(crate) fn tick_listed(
            mut self,
            listed: &[Transcript],
            deadline: Duration,
            read: fn(&S, Discovery, Instant, &ReadContext<'_>) -> SourceRead,
        ) -> Option<(SourceRead, Duration, Self)> {
            let discovery = Discovery {
                transcripts: listed.to_vec(),
                problems: Vec::new(),
            };
            let (tx, rx) = std::sync::mpsc::channel();
            std::thread::spawn(move || {
                let started = Instant::now();
                let source = &self.source;
                let (answer, _) =
                    tick_reading(source.name(), &mut self.store, now_s(), deadline, |ctx| {
                        read(source, discovery, Instant::now() + ctx.deadline, ctx)
                    });
                let _ = tx.send((answer, started.elapsed(), self));
            });
            rx.recv_timeout(Duration::from_secs(10)).ok()
        }

        /// A tick over `listed` while its file `stuck` does not answer ([`stick`]), bounded
        /// by a short deadline: it returns at the deadline (not when the file answers), with a
        /// problem naming the file.
        pub(crate) fn tick_stuck(
            self,
            listed: &[Transcript],
            stuck: &Path,
            read: fn(&S, Discovery, Instant, &ReadContext<'_>) -> SourceRead,
        ) -> (SourceRead, Self) {
            let deadline = Duration::from_secs(2);
            let (answer, took, bench) = self
                .tick_listed(listed, deadline, read)
                .expect("the tick returns at its deadline, not when the file answers");
            assert!(took >= deadline && took < deadline * 3, "{took:?}");
            let named = format!(
                "{}: did not answer within the source deadline",
                stuck.display()
            );
            let problems = &answer.problems;
            assert!(
                problems.iter().any(|p| p.starts_with(&named)),
                "{problems:?}"
            );
            (answer, bench)
        }

        /// [`Self::tick_stuck`] again, bounded by a long deadline: it returns long before it
        /// (the file is not waited on again).
        pub(crate) fn tick_still_stuck(
            self,
            listed: &[Transcript],
            read: fn(&S, Discovery, Instant, &ReadContext<'_>) -> SourceRead,
        ) -> (SourceRead, Self) {
            let long = Duration::from_secs(60);
            let (answer, took, bench) = self.tick_listed(listed, long, read).unwrap();
            assert!(
                took < long / 2,
                "still stuck: not waited on again ({took:?})"
            );
            (answer, bench)
        }

        /// The stored row of session `id`.
        pub(crate) fn row(&self, id: &str) -> SessionCacheRow {
            let rows = self.store.session_cache(self.source.name()).unwrap();
            rows.into_iter().find(|r| r.session_id == id).unwrap()
        }
    }

    /// `path` (a file listed) turned into a FIFO nobody writes to: a read of it waits, as on a
    /// stuck file system.
    pub(crate) fn stick(path: &Path) {
        std::fs::remove_file(path).unwrap();
        let made = std::process::Command::new("mkfifo").arg(path).status();
        assert!(made.is_ok_and(|s| s.success()), "mkfifo");
    }

    /// Whether a read still waits on the FIFO at `path` (a writer that does not wait finds a
    /// reader there); the read goes on with the writer.
    pub(crate) fn unstick(path: &Path) -> bool {
        use std::os::unix::fs::OpenOptionsExt;
        let nonblocking = 0o4000;
        let writer = std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(nonblocking)
            .open(path);
        writer.is_ok()
    }

    /// The clock now, unix seconds.
    pub(crate) fn now_s() -> i64 {
        crate::clock::now_or_clock(None)
    }
}

#[cfg(test)]
mod tests {
    use super::{ReadContext, Reading, list_within};
    use crate::jobs::sessions::tracked::{Tracked, judge, restore};
    use detect_core::{Call, CallStatus, DetectConfig, Session};

    /// A transcript read on from its stored row counts the hook's refusals on from those the
    /// row kept (the reader hands only the calls after its cursor).
    #[test]
    fn refusals_are_counted_on_from_the_row() {
        let config = DetectConfig::default();
        let run = |status: CallStatus, refusal: &str| Call {
            status,
            metadata: serde_json::json!({"refusal": refusal}),
            ..Call::completed("bash", serde_json::json!({"command": "pytest -x"}))
        };
        let mut calls: Vec<Call> = (0..20).map(|_| run(CallStatus::Error, "")).collect();
        calls.extend((0..2).map(|_| run(CallStatus::Blocked, "agentwatch: this call was not run")));
        let session = Session {
            calls,
            ..Session::new("s1")
        };
        let mut tracked = vec![Tracked::whole("claude", &session, &config)];
        let (_, mut rows) = judge(&mut tracked, &config, 1_796_000_000, None);
        let row = rows.remove("claude").unwrap().written.remove(0);
        let watched = std::collections::HashSet::new();
        let ctx = ReadContext {
            store: None,
            detector: &config,
            full_read: false,
            cutoff_ms: None,
            now: 0,
            focus: None,
            deadline: std::time::Duration::from_secs(60),
            watched: &watched,
        };
        let mut reading = Reading::from_restored(restore(None, &row, &config).unwrap(), &ctx);
        reading.push(&[run(
            CallStatus::Blocked,
            "agentwatch: the session is stopped: …",
        )]);
        let on = reading.into_tracked("claude", None, 0).refusals;
        assert_eq!(
            (on.blocked, on.of_call, on.stopped, on.stands()),
            (3, 3, true, true)
        );
    }
    use std::collections::HashSet;
    use std::path::Path;
    use std::time::{Duration, Instant};

    /// A listing that does not return (a stuck file system; here the open of a FIFO nobody
    /// writes to) costs the source its deadline and is an error saying so; while it is stuck
    /// it is not waited on again. A listing that returns is the answer.
    #[test]
    fn a_listing_that_does_not_return_costs_the_deadline() {
        let dir = agentwatch_testkit::TempDir::new("aw-list-within");
        let made = std::process::Command::new("mkfifo")
            .arg(dir.path.join("fifo"))
            .status();
        assert!(made.is_ok_and(|s| s.success()), "mkfifo");
        std::fs::write(dir.path.join("file"), "x").unwrap();
        let config = detect_core::DetectConfig::default();
        let watched = HashSet::new();
        let ctx = |deadline| ReadContext {
            store: None,
            detector: &config,
            full_read: false,
            cutoff_ms: None,
            now: 0,
            focus: None,
            deadline,
            watched: &watched,
        };
        let stuck: fn(&Path) -> std::io::Result<Vec<u8>> = |d| std::fs::read(d.join("fifo"));
        let fine: fn(&Path) -> std::io::Result<Vec<u8>> = |d| std::fs::read(d.join("file"));
        let err = list_within(&dir.path, &ctx(Duration::from_millis(200)), stuck).unwrap_err();
        assert!(
            err.contains("did not return within the source deadline"),
            "{err}"
        );
        let again = Instant::now();
        assert!(list_within(&dir.path, &ctx(Duration::from_secs(60)), stuck).is_err());
        assert!(
            again.elapsed() < Duration::from_secs(30),
            "still stuck: not waited on"
        );
        let other = agentwatch_testkit::TempDir::new("aw-list-within-ok");
        std::fs::write(other.path.join("file"), "x").unwrap();
        assert_eq!(
            list_within(&other.path, &ctx(Duration::from_secs(5)), fine),
            Ok(b"x".to_vec())
        );
        // Let the waiting listing go: a writer opens the FIFO and closes it.
        drop(
            std::fs::OpenOptions::new()
                .write(true)
                .open(dir.path.join("fifo")),
        );
    }

    /// The fixture directories laid out as an agent's own, with that agent's name, under
    /// `fixtures/<agent>/<family>/[<scenario>/]`.
    fn fixture_homes() -> Vec<(&'static str, std::path::PathBuf)> {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures");
        let is_home = |d: &Path| {
            ["projects", "sessions", "tmp"]
                .iter()
                .any(|s| d.join(s).is_dir())
        };
        let dirs = |d: &Path| -> Vec<std::path::PathBuf> {
            let mut out: Vec<_> = std::fs::read_dir(d)
                .unwrap()
                .map(|e| e.unwrap().path())
                .filter(|p| p.is_dir())
                .collect();
            out.sort();
            out
        };
        let mut homes = Vec::new();
        for agent in ["claude", "codex", "gemini"] {
            for family in dirs(&root.join(agent)) {
                let scenarios = if is_home(&family) {
                    vec![family]
                } else {
                    dirs(&family).into_iter().filter(|d| is_home(d)).collect()
                };
                homes.extend(scenarios.into_iter().map(|d| (agent, d)));
            }
        }
        homes
    }

    /// The verdicts by session id, and each tree as its root, sessions and flag (the keys are
    /// the caller's).
    fn shape(j: &detect_core::Judgement) -> (Vec<detect_core::SessionVerdict>, Vec<String>) {
        let mut sessions = j.sessions.clone();
        sessions.sort_by(|a, b| a.id.cmp(&b.id));
        let mut trees: Vec<String> = j
            .trees
            .iter()
            .map(|t| format!("{} {:?} {}", t.root, t.sessions, t.flagged))
            .collect();
        trees.sort();
        (sessions, trees)
    }

    /// Every fixture transcript read by its live source (tailed, as `agentwatch run` reads
    /// it) judges as its directory read whole (`agentwatch detect DIR`, through
    /// `agentwatch_transcripts::read_whole`): one reader per agent whatever the entry, on the
    /// real transcripts and the hand-written one per version family (issue 48).
    #[test]
    fn live_sources_judge_every_fixture_as_the_whole_read() {
        use super::super::{claude::ClaudeSource, codex::CodexSource, gemini::GeminiSource};
        use super::testing::Bench;
        let homes = fixture_homes();
        assert!(homes.len() >= 16, "{homes:?}");
        for (agent, home) in homes {
            let live = match agent {
                "claude" => Bench::of(&home, ClaudeSource::at).tick().1,
                "codex" => Bench::of(&home, CodexSource::at).tick().1,
                _ => Bench::of(&home, GeminiSource::at).tick().1,
            };
            let paths = [home.to_string_lossy().into_owned()];
            let config = detect_core::DetectConfig::default();
            let whole = crate::input::judge_files(&paths, &config).unwrap();
            assert!(!whole.sessions.is_empty(), "{}", home.display());
            assert_eq!(shape(&live), shape(&whole), "{}", home.display());
        }
    }
}
