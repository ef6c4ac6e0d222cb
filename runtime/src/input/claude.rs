//! Claude Code's transcripts as input (`agentwatch detect`, `import-export`, `export-fixture`):
//! one `.jsonl` file, or every transcript under a directory (a Claude configuration directory,
//! its `projects/`, or one project directory), each read whole into sessions by
//! [`ClaudeReader`]. A subagent is a child of the session that spawned it
//! (`{session}:agent-{id}`, with its type from its `.meta.json`), as the live source links it;
//! inline `isSidechain` lines are child sessions of their file's.

use super::{Batch, Format};
use crate::error::Error;
use crate::progress::Progress;
use agentwatch_opencode::db::{DbError, Labels, scrub::scrub_session};
use agentwatch_transcripts::{
    ClaudeReader, Counters, Discovery, FileKind, Transcript, TranscriptKind, discover_claude,
    discover_claude_project, read_subagent_meta,
};
use detect_core::{DetectConfig, Session, SessionFile, judge_session};
use rayon::iter::{IntoParallelRefIterator, ParallelIterator};
use std::collections::{HashMap, HashSet};
use std::io::{self, BufRead, BufReader, Read};
use std::path::Path;

/// Non-blank lines of a document's head the sniff looks at, at most (as
/// [`agentwatch_transcripts::sniff`] does), and about how many bytes.
const HEAD_LINES: usize = 64;
const HEAD_BYTES: usize = 8 << 20;

/// The first lines of a document, enough for [`agentwatch_transcripts::sniff`] to tell a
/// transcript: up to the first line that is a JSON object (the one it decides on), at most
/// [`HEAD_LINES`] non-blank lines and about [`HEAD_BYTES`] (a session file on one line is not
/// read whole here).
pub(super) fn read_head(reader: &mut impl BufRead) -> io::Result<Vec<u8>> {
    let mut head = Vec::new();
    let mut lines = 0;
    while lines < HEAD_LINES && head.len() < HEAD_BYTES {
        let start = head.len();
        let room = u64::try_from(HEAD_BYTES - head.len()).unwrap_or(u64::MAX);
        if reader.by_ref().take(room).read_until(b'\n', &mut head)? == 0 {
            break;
        }
        let line = head[start..].trim_ascii();
        if line.is_empty() {
            continue;
        }
        lines += 1;
        if agentwatch_transcripts::may_be_object(line)
            && serde_json::from_slice::<serde::de::IgnoredAny>(line).is_ok()
        {
            break;
        }
    }
    Ok(head)
}

/// One transcript read from `reader`, its sessions turned by `export`. `name` (a path or a file
/// name) tells a subagent's file from a session's ([`kind_of_file`]); without one (standard
/// input) the lines name the session.
pub(super) fn read_transcript<T>(
    name: Option<&str>,
    origin: &str,
    reader: impl BufRead,
    export: &(dyn Fn(Session) -> T + Sync),
) -> Result<Batch<T>, Error> {
    let kind = name.map_or(FileKind::Main { session_id: None }, |name| {
        kind_of_file(Path::new(name))
    });
    let (sessions, notes) = read_sessions(kind, origin, reader)?;
    Ok(Batch {
        format: Format::ClaudeTranscript,
        items: sessions.into_iter().map(export).collect(),
        notes,
    })
}

/// The kind of a transcript given by name: a subagent's (`agent-<id>.jsonl`), with its type
/// from the `agent-<id>.meta.json` beside it when there is one, or a session's.
fn kind_of_file(path: &Path) -> FileKind {
    match FileKind::from_file_name(&path.to_string_lossy()) {
        FileKind::Subagent {
            agent_id: Some(agent),
            parent_session_id,
            ..
        } => {
            let meta = path.with_file_name(format!("agent-{agent}.meta.json"));
            FileKind::Subagent {
                agent_type: read_subagent_meta(&meta).ok().and_then(|m| m.agent_type),
                agent_id: Some(agent),
                parent_session_id,
            }
        }
        kind => kind,
    }
}

/// A transcript's sessions, every line read (a torn or corrupt line is skipped and counted,
/// a call with no result kept unjudged: [`ClaudeReader`]), and what a person should know.
fn read_sessions(
    kind: FileKind,
    origin: &str,
    mut reader: impl BufRead,
) -> Result<(Vec<Session>, Vec<String>), Error> {
    let mut claude = ClaudeReader::new(kind);
    let mut line = Vec::new();
    loop {
        line.clear();
        let n = reader
            .read_until(b'\n', &mut line)
            .map_err(|e| Error::read(origin, e))?;
        if n == 0 {
            break;
        }
        let text = line.strip_suffix(b"\n").unwrap_or(&line);
        claude.push_line(text.strip_suffix(b"\r").unwrap_or(text));
    }
    claude.finish();
    let notes = note(origin, &claude.meta().counters).into_iter().collect();
    Ok((claude.take_sessions(), notes))
}

/// What was skipped or left unjudged in a transcript, if anything.
fn note(origin: &str, counters: &Counters) -> Option<String> {
    let parts: Vec<String> = [
        (counters.corrupt_lines, "lines not JSON, skipped"),
        (
            counters.dropped_lines,
            "lines of inline sidechains past the limit, skipped",
        ),
        (
            counters.unmatched_results,
            "results of no call read, skipped",
        ),
        (counters.orphans, "calls without a result, not judged"),
    ]
    .into_iter()
    .filter(|(n, _)| *n > 0)
    .map(|(n, what)| format!("{what}: {n}"))
    .collect();
    (!parts.is_empty()).then(|| format!("{origin}: {}", parts.join("; ")))
}

/// Every transcript under `dir` ([`transcripts_under`]), read a few at a time on every core,
/// each one's sessions handed to `sink` (in the order of [`transcripts_under`]) as soon as its
/// turn comes: only a few transcripts' calls are held at a time.
pub(super) fn read_directory<T: Send>(
    dir: &Path,
    export: &(dyn Fn(Session) -> T + Sync),
    sink: &mut dyn FnMut(Batch<T>) -> Result<(), Error>,
) -> Result<(), Error> {
    let transcripts = transcripts_under(dir)?;
    let mut bar = Progress::items(dir.display().to_string());
    let at_once = rayon::current_num_threads().max(1) * 2;
    let mut done = 0;
    for chunk in transcripts.chunks(at_once) {
        let read: Vec<Result<Batch<T>, Error>> =
            chunk.par_iter().map(|t| read_found(t, export)).collect();
        for batch in read {
            sink(batch?)?;
        }
        done += chunk.len();
        bar.update(done, transcripts.len());
    }
    bar.finish();
    Ok(())
}

/// A transcript found under a directory, read as its place says (a subagent's session id and
/// parent from its path, its type from its `.meta.json`).
fn read_found<T>(
    transcript: &Transcript,
    export: &(dyn Fn(Session) -> T + Sync),
) -> Result<Batch<T>, Error> {
    let origin = transcript.path.display().to_string();
    let agent_type = transcript
        .meta_path()
        .and_then(|path| read_subagent_meta(&path).ok())
        .and_then(|meta| meta.agent_type);
    let file = std::fs::File::open(&transcript.path).map_err(|e| Error::read(&origin, e))?;
    let reader = BufReader::with_capacity(1 << 16, file);
    let (sessions, notes) = read_sessions(transcript.file_kind(agent_type), &origin, reader)?;
    Ok(Batch {
        format: Format::ClaudeTranscript,
        items: sessions.into_iter().map(export).collect(),
        notes,
    })
}

/// The transcripts under `dir`: a Claude configuration directory (one with `projects/`),
/// `projects/` itself (each directory in it a project) or one project directory. Sessions'
/// transcripts first, then subagents', each in path order. Anything that could not be read
/// is an error naming it (a directory's verdicts are never given on part of it), and so is a
/// directory without any transcript.
fn transcripts_under(dir: &Path) -> Result<Vec<Transcript>, Error> {
    let mut found = if dir.join("projects").is_dir() {
        discover_claude(dir).map_err(|e| Error::read(dir.display(), e))?
    } else {
        match discover_claude_project(dir) {
            own if own.transcripts.is_empty() && own.problems.is_empty() => projects_in(dir)?,
            own => own,
        }
    };
    let shown = dir.display();
    if !found.problems.is_empty() {
        return Err(Error::io(format!(
            "{shown}: cannot read {}",
            found.problems.join("; ")
        )));
    }
    if found.transcripts.is_empty() {
        return Err(Error::no_input(format!(
            "{shown}: no Claude Code transcripts (give a transcript file, a project directory \
             of <session>.jsonl files, projects/ or a Claude configuration directory)"
        )));
    }
    found
        .transcripts
        .sort_by_key(|t| !matches!(t.kind, TranscriptKind::ClaudeMain { .. }));
    Ok(found.transcripts)
}

/// The transcripts of every project directory in `dir` (a `projects/` directory).
fn projects_in(dir: &Path) -> Result<Discovery, Error> {
    let mut found = Discovery::default();
    for entry in std::fs::read_dir(dir).map_err(|e| Error::read(dir.display(), e))? {
        match entry {
            Ok(entry) if entry.file_type().is_ok_and(|t| t.is_dir()) => {
                let project = discover_claude_project(&entry.path());
                found.transcripts.extend(project.transcripts);
                found.problems.extend(project.problems);
            }
            Ok(_) => {}
            Err(e) => found.problems.push(format!("{}: {e}", dir.display())),
        }
    }
    found.transcripts.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(found)
}

/// Sessions of Claude Code transcripts as a fixture keeps them: every string the detector does
/// not read hashed, paths and commands kept, as `export-fixture` scrubs a database's sessions
/// ([`scrub_session`]); each one's own verdict under `config` is checked unchanged by it.
pub fn scrubbed(sessions: Vec<Session>, config: &DetectConfig) -> Result<Vec<Session>, Error> {
    sessions
        .into_iter()
        .map(|raw| {
            let clean = scrub_session(&raw, config);
            let before = judge_session(&raw, None, config);
            let after = judge_session(&clean, None, config);
            if before.flagged != after.flagged
                || before.signals != after.signals
                || before.reason.calls_since_landed != after.reason.calls_since_landed
            {
                return Err(Error::from(DbError::ScrubChangedVerdict {
                    id: raw.id,
                    detail: format!("raw: {}; scrubbed: {}", before.summary(), after.summary()),
                }));
            }
            Ok(clean)
        })
        .collect()
}

/// `agentwatch export-fixture --claude PATH…`: the labelled sessions of the transcripts at
/// `paths` (files or directories, read as `detect` reads them) with all their descendants
/// (subagents), in the order read, labelled and scrubbed ([`scrubbed`]). Every labelled id must
/// be there, and every labelled session must have a tool call to judge.
pub fn claude_fixture(
    paths: &[String],
    labels: &Labels,
    config: &DetectConfig,
) -> Result<SessionFile, Error> {
    let sessions = super::read_sessions(paths)?;
    let known: HashSet<&str> = sessions.iter().map(|s| s.id.as_str()).collect();
    let missing: Vec<String> = labels
        .keys()
        .filter(|id| !known.contains(id.as_str()))
        .cloned()
        .collect();
    if !missing.is_empty() {
        return Err(Error::from(DbError::UnknownSessions {
            path: paths.join(", "),
            ids: missing,
        }));
    }
    let parent_of: HashMap<&str, &str> = sessions
        .iter()
        .filter_map(|s| Some((s.id.as_str(), s.parent_id.as_deref()?)))
        .collect();
    // A session goes when it or an ancestor is labelled (a parent cycle ends the walk).
    let wanted = |id: &str| {
        let mut at = Some(id);
        (0..=sessions.len()).any(|_| match at {
            Some(id) if labels.contains_key(id) => true,
            Some(id) => {
                at = parent_of.get(id).copied();
                false
            }
            None => false,
        })
    };
    let keep: Vec<bool> = sessions.iter().map(|s| wanted(&s.id)).collect();
    let mut chosen = Vec::new();
    for (mut session, keep) in sessions.into_iter().zip(keep) {
        if !keep {
            continue;
        }
        if let Some(entry) = labels.get(&session.id) {
            if session.calls.iter().all(|c| !c.status.is_counted()) {
                return Err(Error::from(DbError::NoCalls { id: session.id }));
            }
            session.label = entry.label;
            session.note.clone_from(&entry.note);
        }
        chosen.push(session);
    }
    Ok(SessionFile::new(scrubbed(chosen, config)?))
}

#[cfg(test)]
mod tests {
    use super::super::{detect_files, read_sessions, sessions_from_text};
    use super::*;
    use agentwatch_transcripts::read_claude_sessions;
    use detect_core::{Profile, judge_sessions};

    const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/claude/2.1.328");

    fn scenario(name: &str) -> String {
        format!("{FIXTURES}/{name}")
    }

    /// Every main transcript of the fixtures.
    fn main_files() -> Vec<std::path::PathBuf> {
        ["loop", "healthy", "subagent"]
            .into_iter()
            .flat_map(|name| {
                discover_claude(Path::new(&scenario(name)))
                    .unwrap()
                    .transcripts
            })
            .filter(|t| matches!(t.kind, TranscriptKind::ClaudeMain { .. }))
            .map(|t| t.path)
            .collect()
    }

    /// A file, or a directory, reads as the adapter reads each of its transcripts, and judges as
    /// the batch judgement of those sessions, under every profile.
    #[test]
    fn transcripts_read_as_the_adapter_reads_them_and_judge_as_the_batch() {
        for file in main_files() {
            let bytes = std::fs::read(&file).unwrap();
            let name = file.to_string_lossy().into_owned();
            let adapter = read_claude_sessions(&bytes, &name).unwrap();
            assert_eq!(read_sessions(std::slice::from_ref(&name)).unwrap(), adapter);
            let text = String::from_utf8(bytes).unwrap();
            let from_text = sessions_from_text("t", &text).unwrap();
            assert_eq!(from_text.len(), 1);
            assert_eq!(
                from_text[0].calls, adapter[0].calls,
                "standard input's read"
            );
        }
        for name in ["loop", "healthy", "subagent"] {
            let paths = [scenario(name)];
            let sessions = read_sessions(&paths).unwrap();
            assert!(!sessions.is_empty());
            for profile in Profile::ALL {
                let config = DetectConfig::with_profile(profile);
                let detection = detect_files(&paths, &config).unwrap();
                assert_eq!(
                    detection.judgement,
                    judge_sessions(&sessions, &config),
                    "{name}"
                );
                for (read, session) in detection.sessions.iter().zip(&sessions) {
                    assert_eq!(read.format, Format::ClaudeTranscript);
                    assert_eq!(read.calls, session.calls.len());
                }
            }
        }
    }

    /// `first_flag_at_call` is the shortest prefix of a session's own calls the batch judgement
    /// flags, on every fixture session and the sample, under every profile.
    #[test]
    fn the_first_flagged_call_is_the_first_flagged_prefix() {
        let sample = concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/sample.json");
        let paths = [
            scenario("loop"),
            scenario("healthy"),
            scenario("subagent"),
            sample.to_owned(),
        ];
        let sessions = read_sessions(&paths).unwrap();
        let mut flagged = 0;
        for profile in Profile::ALL {
            let config = DetectConfig::with_profile(profile);
            let detection = detect_files(&paths, &config).unwrap();
            for (read, session) in detection.sessions.iter().zip(&sessions) {
                let first = (1..=session.calls.len()).find(|&k| {
                    let mut prefix = session.clone();
                    prefix.calls.truncate(k);
                    judge_session(&prefix, None, &config).flagged
                });
                assert_eq!(read.first_flag_at_call, first, "{} {profile:?}", session.id);
                flagged += usize::from(first.is_some());
            }
        }
        assert!(
            flagged >= 6,
            "the loops flag under every profile: {flagged}"
        );
    }

    #[test]
    fn a_directory_without_transcripts_or_a_bad_label_is_an_error_naming_it() {
        let dir = std::env::temp_dir().join(format!("aw-claude-none-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("todos")).unwrap();
        let paths = [dir.to_string_lossy().into_owned()];
        let none = read_sessions(&paths).unwrap_err();
        assert!(matches!(none, Error::NoInput(_)), "{none}");
        assert!(none.to_string().contains(&paths[0]), "{none}");
        std::fs::remove_dir_all(&dir).unwrap();
        let labels: Labels = [("nope".to_owned(), Default::default())].into();
        let unknown =
            claude_fixture(&[scenario("loop")], &labels, &DetectConfig::default()).unwrap_err();
        assert!(unknown.to_string().contains("nope"), "{unknown}");
    }
}
