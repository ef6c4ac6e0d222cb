//! The agents' transcripts as input (`agentwatch detect`, `import-export`, `export-fixture`):
//! Claude Code's, Codex CLI's and Gemini CLI's, one file (or standard input) or every
//! transcript under a directory. Whatever the entry, a transcript is read whole by
//! [`agentwatch_transcripts::read_whole`], through the reader the live sources tail, so a
//! file, a directory and standard input give the same sessions and calls:
//!
//! - which agent wrote a document is the first of its first lines that says
//!   ([`agentwatch_transcripts::identify`]: any record type the agent writes may come first;
//!   [`read_head`] reads as far as that);
//! - what its place says of it (a subagent's ids, a Gemini project's directory) comes from its
//!   path ([`agentwatch_transcripts::placement_at`]), its place under a directory
//!   ([`agentwatch_transcripts::Transcript::placement`]), or, on standard input, its lines.
//!
//! A subagent is a child of the session that spawned it (`{session}:agent-{id}` for Claude
//! Code, with its type from its `.meta.json`), as the live source links it; inline
//! `isSidechain` lines are child sessions of their file's.

use super::{Batch, Format};
use crate::error::Error;
use crate::progress::Progress;
use agentwatch_transcripts::{
    Counters, Placement, Transcript, TranscriptAgent, decompressed, discover_under, identify_line,
    placement_at, read_subagent_meta, read_whole,
};
use detect_core::Session;
use rayon::iter::{IntoParallelRefIterator, ParallelIterator};
use std::io::{self, BufRead, BufReader, Read};
use std::path::Path;

/// Non-blank lines of a document's head the sniff looks at, at most (as
/// [`agentwatch_transcripts::identify`] does), and about how many bytes.
const HEAD_LINES: usize = agentwatch_transcripts::sniff::SNIFF_LINES;
const HEAD_BYTES: usize = 8 << 20;

/// Bytes of one Gemini session read at most (it is read whole: its older `.json` is one
/// document); the other agents' transcripts are read line by line.
const MAX_BYTES: u64 = 1 << 30;

/// The format of the sessions of `agent`'s transcripts.
pub(super) fn format_of(agent: TranscriptAgent) -> Format {
    match agent {
        TranscriptAgent::Claude => Format::ClaudeTranscript,
        TranscriptAgent::Codex => Format::CodexRollout,
        TranscriptAgent::Gemini => Format::GeminiSession,
    }
}

/// The first lines of a document, enough for [`agentwatch_transcripts::identify`] to tell
/// whose transcript it is: up to the first line that says which agent wrote it, at most
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
        if identify_line(line).is_some() {
            break;
        }
    }
    Ok(head)
}

/// Where a transcript of `agent` given as a document lies, for its reader: `path` (a file
/// given by name) tells its place ([`placement_at`]); without one (standard input) its first
/// lines (`head`) do.
pub(super) fn placement_of(agent: TranscriptAgent, path: Option<&str>, head: &[u8]) -> Placement {
    match path {
        Some(path) => placement_at(agent, Path::new(path)),
        None => Placement::of(agent, None, head),
    }
}

/// A transcript read whole through its agent's reader, its sessions turned by `export`.
pub(super) fn read_placed<T>(
    placement: Placement,
    origin: &str,
    whole: impl BufRead,
    export: &(dyn Fn(Session) -> T + Sync),
) -> Result<Batch<T>, Error> {
    let read = read_whole(placement, whole, MAX_BYTES).map_err(|e| Error::read(origin, e))?;
    let notes = note(origin, read.agent, &read.counters)
        .into_iter()
        .collect();
    Ok(Batch {
        format: format_of(read.agent),
        items: read.sessions.into_iter().map(export).collect(),
        notes,
    })
}

/// What was skipped or left unjudged in a transcript, if anything.
fn note(origin: &str, agent: TranscriptAgent, counters: &Counters) -> Option<String> {
    let dropped = match agent {
        TranscriptAgent::Claude => "lines of inline sidechains past the limit, skipped",
        TranscriptAgent::Codex => "lines past the reader's limits, skipped",
        TranscriptAgent::Gemini => "messages past the limit, skipped",
    };
    let parts: Vec<String> = [
        (counters.corrupt_lines, "lines not JSON, skipped"),
        (counters.dropped_lines, dropped),
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
/// parent from its path, a Claude subagent's type from its `.meta.json`; a compressed rollout
/// decompressed).
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
    let reader = decompressed(BufReader::with_capacity(1 << 16, file))
        .map_err(|e| Error::read(&origin, e))?;
    read_placed(transcript.placement(agent_type), &origin, reader, export)
}

/// The transcripts under `dir` ([`discover_under`]: an agent's directory, or a directory
/// inside one). Sessions' transcripts first, then subagents', each in path order. Anything
/// that could not be read is an error naming it (a directory's verdicts are never given on
/// part of it), and so is a directory without any transcript.
fn transcripts_under(dir: &Path) -> Result<Vec<Transcript>, Error> {
    let mut found = discover_under(dir);
    let shown = dir.display();
    if !found.problems.is_empty() {
        return Err(Error::io(format!(
            "{shown}: cannot read {}",
            found.problems.join("; ")
        )));
    }
    if found.transcripts.is_empty() {
        return Err(Error::no_input(format!(
            "{shown}: no transcripts of Claude Code, Codex CLI or Gemini CLI (give a transcript \
             file, or a directory: a Claude configuration directory, its projects/ or a project \
             directory; a Codex home or its sessions/; a Gemini directory, its tmp/ or a \
             project's chats/)"
        )));
    }
    found.transcripts.sort_by_key(Transcript::is_subagent);
    Ok(found.transcripts)
}

#[cfg(test)]
mod tests {
    use super::super::read_sessions;
    use agentwatch_transcripts::{read_codex_sessions, read_gemini_sessions};

    const CODEX: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/codex/0.169.0");
    const GEMINI: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/gemini/0.61.0");

    fn one(dir: &str, suffix: &str) -> String {
        let mut stack = vec![std::path::PathBuf::from(dir)];
        while let Some(at) = stack.pop() {
            for entry in std::fs::read_dir(&at).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    stack.push(path);
                } else if path.to_string_lossy().ends_with(suffix) {
                    return path.to_string_lossy().into_owned();
                }
            }
        }
        panic!("no {suffix} under {dir}");
    }

    #[test]
    fn rollouts_and_sessions_read_as_the_adapter_reads_them() {
        for (path, read) in [
            (
                one(&format!("{CODEX}/loop"), ".jsonl"),
                read_codex_sessions as fn(&[u8], &str) -> _,
            ),
            (
                one(&format!("{GEMINI}/loop"), ".jsonl"),
                read_gemini_sessions,
            ),
        ] {
            let bytes = std::fs::read(&path).unwrap();
            let mut adapter = read(&bytes, &path).unwrap();
            assert!(!adapter[0].calls.is_empty());
            let mut read = read_sessions(std::slice::from_ref(&path)).unwrap();
            // A path given by hand also names the project's directory (`.project_root`).
            for s in adapter.iter_mut().chain(&mut read) {
                s.directory = None;
            }
            assert_eq!(read, adapter);
        }
    }

    #[test]
    fn a_compressed_rollout_reads_as_the_plain_one() {
        let plain = one(&format!("{CODEX}/loop"), ".jsonl");
        let bytes = std::fs::read(&plain).unwrap();
        let dir = agentwatch_testkit::TempDir::new("aw-input-zst");
        let name = std::path::Path::new(&plain)
            .file_name()
            .unwrap()
            .to_string_lossy();
        let zst = dir.path.join(format!("{name}.zst"));
        std::fs::write(&zst, zstd::encode_all(&bytes[..], 3).unwrap()).unwrap();
        let zst = zst.to_string_lossy().into_owned();
        assert_eq!(
            read_sessions(std::slice::from_ref(&zst)).unwrap(),
            read_codex_sessions(&bytes, &plain).unwrap()
        );
    }
}
