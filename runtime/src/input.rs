//! Reading sessions from disk: session files (`agentwatch-sessions/1`), `opencode export` JSON
//! and the agents' transcripts (Claude Code, Codex CLI, Gemini CLI: a file, standard input or
//! every transcript under a directory, `transcripts`), told apart by their first lines
//! ([`agentwatch_transcripts::identify`]).
//!
//! Files are read in large chunks one session at a time ([`detect_core::scan_session_texts`]):
//! no JSON tree of a whole file is built. One thread cuts out each session's text; the others
//! parse it, typed and borrowed, where it is used (in parallel, on every core), and [`detect_files`]
//! pushes each call into its session's detector as it is parsed and drops it (issue 19).

pub mod claude;
mod transcripts;

use crate::error::Error;
use detect_core::{
    DetectConfig, Judgement, ParseError, SESSION_FILE_FORMAT, Scanned, Session, SessionDetector,
    SessionText, Streamed, counted_sessions, judge_detectors, parse_judged_session_text,
    parse_session_text, scan_session_texts, scanned_cleanly, stream_session_texts,
    watch_session_text,
};
use rayon::iter::{ParallelBridge, ParallelIterator};
use serde_json::Value;
use std::cell::RefCell;
use std::collections::HashMap;
use std::io::{BufReader, Read, Write};
use std::path::Path;
use std::rc::Rc;

/// Read a file, or standard input for `-`.
pub fn read_text(path: &str) -> Result<String, Error> {
    if path == "-" {
        let mut text = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut text)
            .map_err(|e| Error::read("standard input", e))?;
        return Ok(text);
    }
    std::fs::read_to_string(path).map_err(|e| Error::read(path, e))
}

/// Where a document is read from: a file (opened again when it must be read twice), standard
/// input (read once), or text in memory.
#[derive(Clone, Copy)]
enum Source<'a> {
    Path(&'a str),
    Stdin,
    Text(&'a str, &'a [u8]),
}

impl<'a> Source<'a> {
    fn of(path: &'a str) -> Self {
        if path == "-" {
            Source::Stdin
        } else {
            Source::Path(path)
        }
    }

    /// The name a transcript read from it goes by (its session id, or a
    /// subagent's, is in it: [`agentwatch_transcripts::FileKind::from_file_name`]); `None` when
    /// only its lines name the session.
    fn transcript_name(&self) -> Option<&'a str> {
        match self {
            Source::Path(path) => Some(path),
            Source::Stdin | Source::Text(..) => None,
        }
    }

    /// How errors name it.
    fn origin(&self) -> &'a str {
        match self {
            Source::Path(path) => path,
            Source::Stdin => "standard input",
            Source::Text(origin, _) => origin,
        }
    }

    fn open(&self) -> Result<Box<dyn Read + Send + 'a>, Error> {
        match *self {
            Source::Path(path) => {
                let file = std::fs::File::open(path).map_err(|e| Error::read(path, e))?;
                let size = file.metadata().map_or(0, |m| m.len());
                Ok(Box::new(crate::progress::Reading::new(file, path, size)))
            }
            Source::Stdin => Ok(Box::new(std::io::stdin())),
            Source::Text(_, bytes) => Ok(Box::new(bytes)),
        }
    }
}

/// What a document was read as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// A session file (`agentwatch-sessions/1`).
    SessionFile,
    /// The JSON of `opencode export <session-id>`.
    OpencodeExport,
    /// Claude Code's JSON Lines transcripts: one file, or every transcript under a directory.
    ClaudeTranscript,
    /// A Codex CLI rollout (`rollout-*.jsonl`, `.jsonl.zst`).
    CodexRollout,
    /// A Gemini CLI session (`session-*.jsonl`, the older `session-*.json`).
    GeminiSession,
}

/// What one document (or, for a directory, one transcript in it) gave: its format, what each
/// of its sessions turned into, in order, and what a person should know about it (lines
/// skipped, calls without a result).
#[derive(Debug)]
pub struct Batch<T> {
    pub format: Format,
    pub items: Vec<T>,
    pub notes: Vec<String>,
}

impl<T> Batch<T> {
    fn of(format: Format, items: Vec<T>) -> Self {
        Self {
            format,
            items,
            notes: Vec::new(),
        }
    }
}

/// What one document turned out to be, once read through.
enum Document {
    /// A session file: which of the sessions handed over count, and whether its shape is right.
    SessionFile(Streamed),
    /// An `opencode export` of one session (the sessions handed over, if any, do not count).
    Export(Box<Session>),
}

/// The top-level keys an `opencode export` is recognised by.
const EXPORT_KEYS: [&str; 2] = ["info", "messages"];

/// What a read document is, from what the reader said of it.
fn document(origin: &str, streamed: Result<Streamed, ParseError>) -> Result<Document, Error> {
    let data_err = |msg: String| Error::data(format!("{origin}: {msg}"));
    let streamed = match streamed {
        Ok(streamed) => streamed,
        Err(ParseError::Json { message, .. }) => {
            return Err(data_err(format!("not JSON: {message}")));
        }
        Err(other) => return Err(data_err(other.to_string())),
    };
    if EXPORT_KEYS.iter().all(|k| streamed.kept.contains_key(*k)) {
        let session = agentwatch_opencode::session_from_export(&Value::Object(streamed.kept))
            .map_err(|e| data_err(format!("opencode export: {e}")))?;
        return Ok(Document::Export(Box::new(session)));
    }
    Ok(Document::SessionFile(streamed))
}

/// The fast read of a document ([`scan_session_texts`]): `None` when it must be read again
/// through serde's reader ([`stream_reader`]).
fn scan_reader(
    origin: &str,
    reader: impl Read,
    on_text: &mut dyn FnMut(SessionText),
) -> Result<Option<Document>, Error> {
    match scan_session_texts(reader, &EXPORT_KEYS, on_text) {
        Ok(Scanned::Read(streamed)) => document(origin, Ok(streamed)).map(Some),
        Ok(Scanned::Unusual) => Ok(None),
        Err(io) => Err(Error::read(origin, io)),
    }
}

/// A document read through serde's reader, through a large buffer: what the scan does not read,
/// and standard input (which cannot be read twice). A failing read is an I/O error naming the
/// origin (as when the whole file was read first), not a JSON error.
fn stream_reader(
    origin: &str,
    reader: impl Read,
    on_text: &mut dyn FnMut(SessionText),
) -> Result<Document, Error> {
    let error = Rc::new(RefCell::new(None));
    let watched = Watched {
        inner: reader,
        error: Rc::clone(&error),
    };
    // The parser reads byte by byte: a `BufReader` it owns serves those from its buffer.
    let buffered = BufReader::with_capacity(1 << 20, watched);
    let mut de = serde_json::Deserializer::from_reader(buffered);
    let document = document(origin, stream_session_texts(&mut de, &EXPORT_KEYS, on_text));
    match (document, error.take()) {
        (Err(_), Some(io)) => Err(Error::read(origin, io)),
        (document, _) => document,
    }
}

/// A reader that remembers its first error.
struct Watched<R> {
    inner: R,
    error: Rc<RefCell<Option<std::io::Error>>>,
}

impl<R: Read> Read for Watched<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.inner.read(buf).inspect_err(|e| {
            let mut error = self.error.borrow_mut();
            if e.kind() != std::io::ErrorKind::Interrupted && error.is_none() {
                *error = Some(std::io::Error::new(e.kind(), e.to_string()));
            }
        })
    }
}

/// A session's text (its place in its list, the text, where the text begins in its file when the
/// scan cut it out) into a `T`, on any core.
pub type PlacedParse<'a, T> = dyn Fn(usize, &str, Option<u64>) -> Result<T, ParseError> + Sync + 'a;

/// How [`read_document`] turns each session into what its caller keeps.
struct Reading<'a, T> {
    /// A session's text (its place in its list, the text, where the text is in the file when
    /// the scan cut it out) into a `T`, on any core.
    parse: &'a PlacedParse<'a, T>,
    /// A session read whole (of an `opencode export`, or of an agent's transcript) into a
    /// `T`, on any core.
    export: &'a (dyn Fn(Session) -> T + Sync),
    /// The id of the session a `T` holds.
    id: fn(&T) -> &str,
}

/// Read what a path names: a directory's transcripts, one at a time, each handed to `sink` as
/// it is read (`transcripts::read_directory`), or one document ([`read_document`]).
fn read_path<T: Send>(
    source: Source<'_>,
    how: &Reading<'_, T>,
    sink: &mut dyn FnMut(Batch<T>) -> Result<(), Error>,
) -> Result<(), Error> {
    match source {
        Source::Path(path) if Path::new(path).is_dir() => {
            transcripts::read_directory(Path::new(path), how.export, sink)
        }
        _ => sink(read_document(source, how)?),
    }
}

/// Read one document. Its first lines tell an agent's transcript
/// ([`agentwatch_transcripts::identify`]; a zstd file decompressed first), read through that
/// agent's reader (`transcripts::read_placed`), from a JSON document: the scan ([`scan_reader`]) reads that in large chunks and cuts out each
/// session's text, and the other cores `parse` each as it comes (a small queue keeps the reader a
/// few sessions ahead, never a file); a document the scan does not read, or one whose sessions
/// turn out not to be JSON, is read again through serde's reader ([`stream_reader`]) for the
/// exact error. The sessions that count, in order, or the first error, as when read one by one.
fn read_document<T: Send>(source: Source<'_>, how: &Reading<'_, T>) -> Result<Batch<T>, Error> {
    let origin = source.origin();
    let opened = BufReader::with_capacity(1 << 16, source.open()?);
    let mut opened =
        agentwatch_transcripts::decompressed(opened).map_err(|e| Error::read(origin, e))?;
    let head = transcripts::read_head(&mut opened).map_err(|e| Error::read(origin, e))?;
    let whole = std::io::Cursor::new(head).chain(opened);
    let head = whole.get_ref().0.get_ref();
    if let Some(agent) = agentwatch_transcripts::transcript_agent(head) {
        let placement = transcripts::placement_of(agent, source.transcript_name(), head);
        return transcripts::read_placed(placement, origin, whole, how.export);
    }
    // Standard input cannot be opened again: what the sniff read goes first.
    let stdin: Option<Box<dyn Read + Send + '_>> = match source {
        Source::Stdin => Some(Box::new(whole)),
        _ => None,
    };
    read_json_document(source, stdin, how)
}

/// [`read_document`] for a JSON document (`stdin`: standard input, read once, as it stands).
fn read_json_document<'a, T: Send>(
    source: Source<'a>,
    stdin: Option<Box<dyn Read + Send + 'a>>,
    how: &Reading<'_, T>,
) -> Result<Batch<T>, Error> {
    let origin = source.origin();
    if stdin.is_none() {
        let reader = source.open()?;
        let (document, parsed) =
            parse_in_parallel(origin, how, |on_text| scan_reader(origin, reader, on_text))?;
        match (document, scanned_cleanly(&parsed)) {
            (Ok(Some(document)), true) => return counted(origin, how, document, parsed),
            // A failing read, or the export's own error in a document that is JSON throughout.
            (Err(e), clean) if clean || matches!(e, Error::Read { .. }) => return Err(e),
            _ => {}
        }
    }
    let reader = match stdin {
        Some(stdin) => stdin,
        None => source.open()?,
    };
    let (document, parsed) = parse_in_parallel(origin, how, |on_text| {
        stream_reader(origin, reader, on_text).map(Some)
    })?;
    let document = document?.ok_or_else(|| Error::software(format!("{origin}: not read")))?;
    counted(origin, how, document, parsed)
}

/// What a reader said of a document (`None`: read it again through serde's reader).
type ReadDocument = Result<Option<Document>, Error>;

/// Each text's serial and what it parsed into.
type Parsed<T> = Vec<(usize, Result<T, ParseError>)>;

/// What `read` hands over, parsed on every core while it reads (on its own thread): what it
/// said of the document, and each text's parse.
fn parse_in_parallel<T: Send>(
    origin: &str,
    how: &Reading<'_, T>,
    read: impl FnOnce(&mut dyn FnMut(SessionText)) -> ReadDocument + Send,
) -> Result<(ReadDocument, Parsed<T>), Error> {
    std::thread::scope(|scope| {
        let (tx, rx) = std::sync::mpsc::sync_channel::<SessionText>(32);
        let reader = scope.spawn(move || {
            read(&mut |text| {
                // The receiver lives until the reader is joined; a send cannot fail before.
                let _ = tx.send(text);
            })
        });
        let parse = how.parse;
        let parsed: Parsed<T> = rx
            .into_iter()
            .par_bridge()
            .map(|text| (text.serial, parse(text.index, &text.text, text.offset)))
            .collect();
        let document = reader
            .join()
            .map_err(|_| Error::software(format!("{origin}: the reader panicked")))?;
        Ok((document, parsed))
    })
}

/// The sessions of a document read through.
fn counted<T>(
    origin: &str,
    how: &Reading<'_, T>,
    document: Document,
    parsed: Parsed<T>,
) -> Result<Batch<T>, Error> {
    match document {
        Document::Export(session) => Ok(Batch::of(
            Format::OpencodeExport,
            vec![(how.export)(*session)],
        )),
        Document::SessionFile(streamed) => counted_sessions(&streamed, parsed, how.id)
            .map(|items| Batch::of(Format::SessionFile, items))
            .map_err(|e| Error::data(format!("{origin}: {e}"))),
    }
}

/// Sessions read whole, with their calls.
const WHOLE: Reading<'static, Session> = Reading {
    parse: &|index, text, _| parse_session_text(index, text),
    export: &std::convert::identity,
    id: |session| session.id.as_str(),
};

/// The sessions of one document: a session file, an `opencode export` of one session, or a
/// transcript of Claude Code, Codex CLI or Gemini CLI.
pub fn sessions_from_text(origin: &str, text: &str) -> Result<Vec<Session>, Error> {
    read_document(Source::Text(origin, text.as_bytes()), &WHOLE).map(|batch| batch.items)
}

/// Sessions whose calls keep only the metadata the matcher reads.
const JUDGED: Reading<'static, Session> = Reading {
    parse: &|index, text, _| parse_judged_session_text(index, text),
    ..WHOLE
};

/// Read the sessions of several files, in order; an id seen twice is an error naming both files.
pub fn read_sessions(paths: &[String]) -> Result<Vec<Session>, Error> {
    read_all(paths, &WHOLE)
}

/// [`read_sessions`] for a caller that only judges the sessions (the backtest): of each call's
/// metadata only what the matcher reads is kept ([`detect_core::parse_judged_session_text`]).
pub fn read_judged_sessions(paths: &[String]) -> Result<Vec<Session>, Error> {
    read_all(paths, &JUDGED)
}

/// [`read_judged_sessions`] turning each session into a `T` (`map`) on the core that parsed it
/// and dropping it, for a caller that keeps something smaller than the sessions (the streamed
/// backtest keeps no calls): only a few sessions are held at a time. The `T`s in order; `id`
/// gives the id of each one's session, and an id seen twice is an error, as for the sessions.
pub fn map_judged_sessions<T: Send>(
    paths: &[String],
    map: &(dyn Fn(Session) -> T + Sync),
    id: fn(&T) -> &str,
) -> Result<Vec<T>, Error> {
    let how = Reading {
        parse: &|index, text, _| parse_judged_session_text(index, text).map(map),
        export: map,
        id,
    };
    read_all(paths, &how)
}

/// [`map_judged_sessions`] for a caller that reads each session's text itself: `parse` turns a
/// session's text (and its place in its list) into a `T` on the core that parsed it, with the
/// errors of [`detect_core::parse_session_text`] (the backtest reads the calls borrowed,
/// [`detect_core::SessionCalls`]); `export` turns a session read whole (of an `opencode
/// export` or an agent's transcript).
pub fn map_session_texts<T: Send>(
    paths: &[String],
    parse: &(dyn Fn(usize, &str) -> Result<T, ParseError> + Sync),
    export: &(dyn Fn(Session) -> T + Sync),
    id: fn(&T) -> &str,
) -> Result<Vec<T>, Error> {
    let parse = |index, text: &str, _| parse(index, text);
    read_all(
        paths,
        &Reading {
            parse: &parse,
            export,
            id,
        },
    )
}

/// [`map_session_texts`] of one file, telling `parse` where in the file each session's text
/// begins when the scan cut it out (`None` when the file was read through serde's reader): a
/// caller may read that text again alone ([`read_text_at`]) instead of the file (the backtest
/// reads its file once, issue 19).
pub fn map_placed_session_texts<T: Send>(
    path: &str,
    parse: &PlacedParse<'_, T>,
    export: &(dyn Fn(Session) -> T + Sync),
    id: fn(&T) -> &str,
) -> Result<Vec<T>, Error> {
    read_all(&[path.to_owned()], &Reading { parse, export, id })
}

/// The `len` bytes of the file `path` at `offset`, as text: a session's text again, where
/// [`map_placed_session_texts`] placed it.
pub fn read_text_at(path: &str, offset: u64, len: usize) -> Result<String, Error> {
    use std::io::{Seek, SeekFrom};
    let mut file = std::fs::File::open(path).map_err(|e| Error::read(path, e))?;
    file.seek(SeekFrom::Start(offset))
        .map_err(|e| Error::read(path, e))?;
    let mut bytes = vec![0; len];
    file.read_exact(&mut bytes)
        .map_err(|e| Error::read(path, e))?;
    String::from_utf8(bytes).map_err(|_| {
        Error::data(format!(
            "{path}: not UTF-8 at byte {offset} (changed since read?)"
        ))
    })
}

/// [`map_judged_sessions`] for a caller that needs the calls of only some sessions (the
/// backtest's first pass: those of sessions with a parent). Each session's `id` and `parent_id`
/// are read first, everything else skipped unbuilt; `map` gets a session read whole only when
/// `whole` says so of that stub, otherwise the stub itself (id and parent, nothing else). The
/// same `T`s as [`map_judged_sessions`] for a `map` that reads no more of the stubs, and the
/// same errors: where this read fails, the files are read again whole for the exact error (a
/// stub is never checked, so a session that does not read may only fail the whole read).
pub fn map_session_stubs<T: Send>(
    paths: &[String],
    whole: &(dyn Fn(&Session) -> bool + Sync),
    map: &(dyn Fn(Session) -> T + Sync),
    id: fn(&T) -> &str,
) -> Result<Vec<T>, Error> {
    if paths.iter().any(|p| p == "-") {
        // Standard input cannot be read again for the exact error: read it whole.
        return map_judged_sessions(paths, map, id);
    }
    let how = Reading {
        parse: &|index, text, _| match session_stub(text) {
            Some(stub) if !whole(&stub) => Ok(map(stub)),
            _ => parse_judged_session_text(index, text).map(map),
        },
        export: map,
        id,
    };
    read_all(paths, &how).or_else(|_| map_judged_sessions(paths, map, id))
}

/// A session's id and parent, its other keys skipped without being built; `None` when they do
/// not read, the id is empty or the session is not an object: it is then read whole, for its
/// error.
fn session_stub(text: &str) -> Option<Session> {
    #[derive(serde::Deserialize)]
    struct Stub {
        id: String,
        parent_id: Option<String>,
    }
    if !text.trim_start().starts_with('{') {
        return None;
    }
    let (id, parent_id) = match leading_id_and_parent(text) {
        Some(leading) => leading,
        None => {
            let stub: Stub = serde_json::from_str(text).ok()?;
            (stub.id, stub.parent_id)
        }
    };
    (!id.is_empty()).then(|| Session {
        parent_id,
        ..Session::new(id)
    })
}

/// A session's `id` and `parent_id` when they are its first two keys (in either order; as every
/// writer of the format puts them), read without walking the rest of its text: the backtest's
/// first pass then reads nothing else of most sessions (issue 19). `None` when the text does not
/// begin so simply (another key first, a key with an escape, an id that is not a string): serde
/// reads the stub then. Nothing after the two keys is checked: a session that is not JSON may read
/// here, and the backtest's second pass, which reads every session whole, fails on it with the
/// error of the whole read.
fn leading_id_and_parent(text: &str) -> Option<(String, Option<String>)> {
    let bytes = text.as_bytes();
    let mut pos = 0;
    let skip_space = |pos: &mut usize| {
        while bytes.get(*pos).is_some_and(u8::is_ascii_whitespace) {
            *pos += 1;
        }
    };
    // The end (past the closing quote) of the string that opens at `at`, if it is one.
    let string_end = |at: usize| {
        if bytes.get(at) != Some(&b'"') {
            return None;
        }
        let mut i = at + 1;
        loop {
            match *bytes.get(i)? {
                b'"' => return Some(i + 1),
                b'\\' => i += 2,
                _ => i += 1,
            }
        }
    };
    let expect = |pos: &mut usize, want: u8| {
        skip_space(pos);
        (bytes.get(*pos) == Some(&want)).then(|| *pos += 1)
    };
    expect(&mut pos, b'{')?;
    let (mut id, mut parent) = (None, None);
    while id.is_none() || parent.is_none() {
        if id.is_some() || parent.is_some() {
            expect(&mut pos, b',')?;
        }
        skip_space(&mut pos);
        let key_end = string_end(pos)?;
        let key = &text[pos + 1..key_end - 1];
        pos = key_end;
        expect(&mut pos, b':')?;
        skip_space(&mut pos);
        let value = |end: usize| serde_json::from_str::<Option<String>>(&text[pos..end]).ok();
        match key {
            "id" if id.is_none() => {
                let end = string_end(pos)?;
                id = Some(value(end)??);
                pos = end;
            }
            "parent_id" if parent.is_none() => {
                let end = if text[pos..].starts_with("null") {
                    pos + 4
                } else {
                    string_end(pos)?
                };
                parent = Some(value(end)?);
                pos = end;
            }
            _ => return None,
        }
    }
    Some((id?, parent?))
}

fn read_all<T: Send>(paths: &[String], how: &Reading<'_, T>) -> Result<Vec<T>, Error> {
    let mut sessions: Vec<T> = Vec::new();
    read_each(paths, how, |mut read| {
        sessions.append(&mut read.items);
        Ok(())
    })?;
    Ok(sessions)
}

/// [`read_sessions`] one file at a time: `each` gets a file's sessions (ids unique across the
/// files so far; a directory's, one transcript at a time) as soon as that file is read, so a
/// caller can write them out and drop them before the next file is read (`agentwatch
/// import-export`).
pub fn read_sessions_each(
    paths: &[String],
    each: impl FnMut(Batch<Session>) -> Result<(), Error>,
) -> Result<(), Error> {
    read_each(paths, &WHOLE, each)
}

fn read_each<T: Send>(
    paths: &[String],
    how: &Reading<'_, T>,
    mut each: impl FnMut(Batch<T>) -> Result<(), Error>,
) -> Result<(), Error> {
    let mut origin_of = HashMap::new();
    for path in paths {
        read_path(Source::of(path), how, &mut |batch| {
            for session in &batch.items {
                check_unique(&mut origin_of, (how.id)(session), path)?;
            }
            each(batch)
        })?;
    }
    Ok(())
}

fn check_unique(
    origin_of: &mut HashMap<String, String>,
    id: &str,
    path: &str,
) -> Result<(), Error> {
    if let Some(first) = origin_of.insert(id.to_owned(), path.to_owned()) {
        return Err(Error::data(format!(
            "session {id} appears in both {first} and {path}"
        )));
    }
    Ok(())
}

/// What `agentwatch detect` found: the verdicts, and what was read of each session.
#[derive(Debug, Clone, PartialEq)]
pub struct Detection {
    pub judgement: Judgement,
    /// One per session of [`Judgement::sessions`], in the same order.
    pub sessions: Vec<SessionRead>,
    /// What a person should know about the input (lines skipped, calls without a result).
    pub notes: Vec<String>,
}

/// What was read of one session, besides its verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionRead {
    /// The format of the document it came from (which tells the agent that wrote it).
    pub format: Format,
    /// Tool calls read (those the detector counts and those it does not).
    pub calls: usize,
    /// The call (1-based, of [`SessionRead::calls`]) at which a watcher reading the session call
    /// by call would first have flagged it: the first prefix of its own calls whose verdict
    /// ([`SessionDetector`], which equals the batch judgement of every prefix) is flagged.
    /// Descendants' landings, which the final verdict takes into account, are not. `None`
    /// when no prefix is flagged.
    pub first_flag_at_call: Option<usize>,
}

/// A session judged as it was read: its stub (no calls), its detector, and the watch on it.
struct Detected {
    session: Session,
    detector: SessionDetector,
    watch: Watch,
}

/// Counts a session's calls as they are pushed, and notes the first that leaves it flagged.
#[derive(Debug, Default, Clone, Copy)]
struct Watch {
    calls: usize,
    first_flag_at_call: Option<usize>,
}

impl Watch {
    /// `calls` calls are read, the last one pushed into `detector`.
    fn at_call(&mut self, calls: usize, detector: &SessionDetector) {
        self.calls = calls;
        // `flagged` computes only the figures that can flag the verdict at this call.
        if self.first_flag_at_call.is_none() && detector.flagged() {
            self.first_flag_at_call = Some(calls);
        }
    }
}

/// Judge the sessions of several files (as [`read_sessions`] reads them) without holding their
/// calls: each session's calls are pushed into its detector as they are parsed, on every core,
/// and dropped; the verdicts are [`detect_core::judge_sessions`]'s, in the same order. A
/// directory is read for its agents' transcripts (`transcripts::read_directory`).
pub fn detect_files(paths: &[String], config: &DetectConfig) -> Result<Detection, Error> {
    let mut read = Vec::new();
    with_detecting(config, |how| {
        read_each(paths, how, |batch| {
            read.push(batch);
            Ok(())
        })
    })?;
    Ok(detection(read))
}

/// Detect the built-in sample (or any text) the same way.
pub fn detect_text(origin: &str, text: &str, config: &DetectConfig) -> Result<Detection, Error> {
    let source = Source::Text(origin, text.as_bytes());
    let batch = with_detecting(config, |how| read_document(source, how))?;
    Ok(detection(vec![batch]))
}

/// [`detect_files`]' verdicts alone.
pub fn judge_files(paths: &[String], config: &DetectConfig) -> Result<Judgement, Error> {
    detect_files(paths, config).map(|d| d.judgement)
}

/// [`detect_text`]'s verdicts alone.
pub fn judge_text(origin: &str, text: &str, config: &DetectConfig) -> Result<Judgement, Error> {
    detect_text(origin, text, config).map(|d| d.judgement)
}

/// The verdicts of every session read, trees included, with what was read of each.
fn detection(batches: Vec<Batch<Detected>>) -> Detection {
    let mut stubs = Vec::new();
    let mut detectors = Vec::new();
    let mut sessions = Vec::new();
    let mut notes = Vec::new();
    for batch in batches {
        notes.extend(batch.notes);
        for detected in batch.items {
            sessions.push(SessionRead {
                format: batch.format,
                calls: detected.watch.calls,
                first_flag_at_call: detected.watch.first_flag_at_call,
            });
            stubs.push(detected.session);
            detectors.push(detected.detector);
        }
    }
    Detection {
        judgement: judge_detectors(&stubs, detectors),
        sessions,
        notes,
    }
}

/// `read` with `detect`'s way of reading: every call pushed into its session's detector as it
/// is read and dropped, the watch looking on. Every detector is kept until the trees are
/// judged: each forgets, once its calls are pushed, what only further calls would read
/// ([`SessionDetector::calls_done`]).
fn with_detecting<R>(config: &DetectConfig, read: impl FnOnce(&Reading<'_, Detected>) -> R) -> R {
    let parse = |index: usize, text: &str, _: Option<u64>| detect_session(index, text, config);
    let export = |session: Session| detect_whole(session, config);
    read(&Reading {
        parse: &parse,
        export: &export,
        id: |detected| detected.session.id.as_str(),
    })
}

/// A session of a session file judged as its calls are read borrowed from its text
/// ([`watch_session_text`]: no list of calls); one that read does not take is read the usual
/// way ([`parse_judged_session_text`]), for its answer or its exact error.
fn detect_session(index: usize, text: &str, config: &DetectConfig) -> Result<Detected, ParseError> {
    let mut watch = Watch::default();
    let watched = watch_session_text(
        text,
        &|session| SessionDetector::taking_line_counts(session, config),
        &mut |_, calls, _, detector| {
            watch.at_call(calls, detector);
            true
        },
    );
    match watched {
        Some((session, mut detector)) => {
            detector.calls_done();
            Ok(Detected {
                session,
                detector,
                watch,
            })
        }
        None => parse_judged_session_text(index, text).map(|session| detect_whole(session, config)),
    }
}

/// A session read whole judged call by call; it comes back without its calls.
fn detect_whole(mut session: Session, config: &DetectConfig) -> Detected {
    let mut detector = SessionDetector::taking_line_counts(&mut session, config);
    let mut watch = Watch::default();
    for (i, call) in session.calls.iter().enumerate() {
        detector.push(call);
        watch.at_call(i + 1, &detector);
    }
    detector.calls_done();
    session.calls = Vec::new();
    Detected {
        session,
        detector,
        watch,
    }
}

/// `agentwatch import-export`: the files' sessions as one session file, on standard output or
/// written atomically to `out`, each file's sessions written as soon as that file is read (the
/// document is never built whole in memory); returns how many sessions were written. Sessions
/// of the agents' transcripts are scrubbed as `export-fixture` scrubs ([`claude::scrubbed`]);
/// session files and `opencode export` JSON are passed through.
pub fn import_exports(files: &[String], out: Option<&Path>) -> Result<usize, Error> {
    match out {
        Some(path) => {
            let io = |e: std::io::Error| Error::io(format!("writing {}: {e}", path.display()));
            write_streamed(path, |out| convert(files, out, &io))
        }
        None => {
            let stdout = std::io::BufWriter::new(std::io::stdout().lock());
            let failed = |e: std::io::Error| Error::stdout("import-export", &e);
            convert(files, stdout, &failed)
        }
    }
}

/// Read the files one at a time and write each one's sessions to `out` as one session file as
/// soon as that file is read; returns how many sessions were written.
fn convert(
    files: &[String],
    out: impl Write,
    failed: &dyn Fn(std::io::Error) -> Error,
) -> Result<usize, Error> {
    let mut writer = SessionFileWriter::new(out).map_err(failed)?;
    let config = DetectConfig::default();
    read_sessions_each(files, |batch| {
        for note in &batch.notes {
            eprintln!("agentwatch: note: {note}");
        }
        let sessions = match batch.format {
            Format::ClaudeTranscript | Format::CodexRollout | Format::GeminiSession => {
                claude::scrubbed(batch.items, &config)?
            }
            Format::SessionFile | Format::OpencodeExport => batch.items,
        };
        for s in &sessions {
            if s.calls.iter().all(|c| !c.status.is_counted()) {
                eprintln!(
                    "agentwatch: note: session {} has no tool calls; it is kept but there is nothing to judge",
                    s.id
                );
            }
            writer.push(s).map_err(failed)?;
        }
        Ok(())
    })?;
    writer.finish().map_err(failed)
}

/// A session file (`agentwatch-sessions/1`) written one session at a time: byte for byte what
/// [`detect_core::SessionFile::to_json_pretty`] writes for the whole list, and a closing newline.
struct SessionFileWriter<W: Write> {
    out: W,
    written: usize,
}

impl<W: Write> SessionFileWriter<W> {
    fn new(mut out: W) -> std::io::Result<Self> {
        let format = serde_json::to_string(SESSION_FILE_FORMAT)?;
        write!(out, "{{\n  \"format\": {format},\n  \"sessions\": [")?;
        Ok(Self { out, written: 0 })
    }

    fn push(&mut self, session: &Session) -> std::io::Result<()> {
        let text = serde_json::to_string_pretty(session)?;
        self.out.write_all(if self.written == 0 {
            b"\n    "
        } else {
            b",\n    "
        })?;
        // JSON escapes the newlines inside strings, so each newline of the text is between
        // tokens: the lines below the first go one list deeper.
        self.out
            .write_all(text.replace('\n', "\n    ").as_bytes())?;
        self.written += 1;
        Ok(())
    }

    /// Close the list and the document; how many sessions it holds.
    fn finish(mut self) -> std::io::Result<usize> {
        let end: &[u8] = if self.written == 0 {
            b"]\n}\n"
        } else {
            b"\n  ]\n}\n"
        };
        self.out.write_all(end)?;
        self.out.flush()?;
        Ok(self.written)
    }
}

/// Write `path` with the project's one atomic writer (mode 0644) from what `fill` writes, so a
/// reader sees the old file or the whole new one; on failure `path` is untouched and the error
/// is `fill`'s own when it was `fill` that failed.
fn write_streamed<T>(
    path: &Path,
    fill: impl FnOnce(&mut dyn Write) -> Result<T, Error>,
) -> Result<T, Error> {
    let mut filled = None;
    let written = agentwatch_systemd::write_atomic_with(path, 0o644, |file| {
        let mut out = std::io::BufWriter::new(file);
        let result = fill(&mut out);
        let failed = result.is_err();
        filled = Some(result);
        if failed {
            return Err(std::io::Error::other("the export was not written whole"));
        }
        out.flush()
    });
    match (filled, written) {
        (Some(Err(e)), _) => Err(e),
        (_, Err(e)) => Err(Error::io(format!("writing {e}"))),
        (Some(Ok(value)), Ok(())) => Ok(value),
        (None, Ok(())) => Err(Error::io(format!(
            "writing {}: nothing written",
            path.display()
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use detect_core::{Profile, SessionFile, judge_sessions};
    use std::path::Path;

    /// The committed session files the readers are checked on (under `fixtures/`).
    const SESSION_FIXTURES: [&str; 4] = [
        "sample.json",
        "corpus.json",
        "dev/real.json",
        "dev/sessions.json",
    ];

    /// The streamed, parallel judgement equals the batch one on every committed fixture, under
    /// every profile: the same verdicts in the same order.
    #[test]
    fn judge_files_equals_judge_sessions_on_the_fixtures() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures");
        for name in [
            "sample.json",
            "corpus.json",
            "dev/real.json",
            "dev/sessions.json",
            "dev/latency.json",
        ] {
            let path = root.join(name);
            let text = std::fs::read_to_string(&path).unwrap();
            let sessions = SessionFile::from_json(&text).unwrap().sessions;
            assert_eq!(sessions_from_text(name, &text).unwrap(), sessions, "{name}");
            for profile in Profile::ALL {
                let config = DetectConfig::with_profile(profile);
                let batch = judge_sessions(&sessions, &config);
                let paths = [path.to_string_lossy().into_owned()];
                assert_eq!(judge_files(&paths, &config).unwrap(), batch, "{name}");
                assert_eq!(judge_text(name, &text, &config).unwrap(), batch, "{name}");
            }
        }
    }

    /// The stubs' read gives what the whole read gives to a `map` that reads no more of them,
    /// and the whole read's errors.
    #[test]
    fn session_stubs_read_as_the_whole_sessions() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures");
        let head = |s: Session| (s.id.clone(), s.parent_id.clone(), s.calls.len());
        fn id(t: &(String, Option<String>, usize)) -> &str {
            &t.0
        }
        for name in SESSION_FIXTURES {
            let paths = [root.join(name).to_string_lossy().into_owned()];
            let whole = map_judged_sessions(&paths, &head, id).unwrap();
            let stubs = map_session_stubs(&paths, &|s| s.parent_id.is_some(), &head, id).unwrap();
            assert_eq!(stubs.len(), whole.len(), "{name}");
            for (stub, whole) in stubs.iter().zip(&whole) {
                assert_eq!((&stub.0, &stub.1), (&whole.0, &whole.1), "{name}");
                let calls = if whole.1.is_some() { whole.2 } else { 0 };
                assert_eq!(stub.2, calls, "{name}");
            }
        }
        let dir = std::env::temp_dir().join(format!("agentwatch-stubs-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for (i, text) in [
            // A bad call before a session with no id: the first error is the bad call's.
            r#"{"format":"agentwatch-sessions/1","sessions":[{"id":"a","calls":[{"tool":1}]},{"calls":[]}]}"#,
            r#"{"format":"agentwatch-sessions/1","sessions":[{"id":"a","calls":[]},{"id":"a","calls":[]}]}"#,
            r#"{"format":"agentwatch-sessions/1","sessions":[["a",null]]}"#,
            r#"{"format":"agentwatch-sessions/1","sessions":[{"id":"","calls":[]}]}"#,
            r#"{"format":"agentwatch-sessions/1","sessions":[{"id":"a","calls":[]} oops"#,
        ]
        .into_iter()
        .enumerate()
        {
            let path = dir.join(format!("{i}.json"));
            std::fs::write(&path, text).unwrap();
            let paths = [path.to_string_lossy().into_owned()];
            let whole = map_judged_sessions(&paths, &head, id).unwrap_err();
            let stubs = map_session_stubs(&paths, &|_| false, &head, id).unwrap_err();
            assert_eq!(stubs.to_string(), whole.to_string(), "{text}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// The stub read from the leading keys is serde's, or none (serde reads it then); on
    /// sessions of every committed fixture and on texts that begin otherwise.
    #[test]
    fn leading_id_and_parent_read_as_serde_reads_them() {
        #[derive(serde::Deserialize)]
        struct Stub {
            id: String,
            parent_id: Option<String>,
        }
        let serde_stub = |text: &str| {
            serde_json::from_str::<Stub>(text)
                .ok()
                .map(|s| (s.id, s.parent_id))
        };
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures");
        let mut texts: Vec<String> = Vec::new();
        for name in SESSION_FIXTURES {
            // Each session's text as the reader cuts it out of the file.
            let paths = [root.join(name).to_string_lossy().into_owned()];
            let parse = |_: usize, text: &str| Ok(text.to_owned());
            texts.extend(
                map_session_texts(&paths, &parse, &|s: Session| s.id, |t| t.as_str()).unwrap(),
            );
        }
        let leading = texts
            .iter()
            .filter(|t| {
                let quick = leading_id_and_parent(t);
                assert!(quick.is_none() || quick == serde_stub(t), "{t}");
                quick.is_some()
            })
            .count();
        assert!(
            leading > 0,
            "no fixture session begins with its id and parent"
        );
        for (text, quick) in [
            (
                r#"{"id":"a","parent_id":null,"calls":[]}"#,
                Some(("a", None)),
            ),
            (
                r#" { "parent_id" : "p" , "id" : "a\"b" } "#,
                Some(("a\"b", Some("p"))),
            ),
            (
                r#"{"id":"\u00e9t\u00e9","parent_id":"x","calls":[{"id":"z"}]}"#,
                Some(("été", Some("x"))),
            ),
            // The rest is not read: its errors are the second pass's.
            (r#"{"id":"a","parent_id":null oops"#, Some(("a", None))),
            (r#"{"title":"t","id":"a","parent_id":null}"#, None),
            (r#"{"\u0069d":"a","parent_id":null}"#, None),
            (r#"{"id":"a","calls":[],"parent_id":null}"#, None),
            (r#"{"id":"a","id":"b","parent_id":null}"#, None),
            (r#"{"id":5,"parent_id":null}"#, None),
            (r#"{"id":null,"parent_id":null}"#, None),
            (r#"{"id":"a","parent_id":nul}"#, None),
            (r#"{"id":"a","parent_id":null"#, Some(("a", None))),
            (r#"{"id":"a"#, None),
            (r#"{"id""#, None),
            ("", None),
        ] {
            let want = quick.map(|(id, parent): (&str, Option<&str>)| {
                (id.to_owned(), parent.map(str::to_owned))
            });
            assert_eq!(leading_id_and_parent(text), want, "{text}");
        }
    }

    #[test]
    fn errors_name_the_file_and_keep_their_kind() {
        let config = DetectConfig::default();
        let missing = judge_files(&["/nonexistent/x.json".to_owned()], &config).unwrap_err();
        assert!(matches!(missing, Error::Read { .. }), "{missing}");
        let dir = std::env::temp_dir().join(format!("agentwatch-no-input-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let empty = judge_files(&[dir.to_string_lossy().into_owned()], &config).unwrap_err();
        assert!(matches!(empty, Error::NoInput(_)), "{empty}");
        std::fs::remove_dir_all(&dir).unwrap();
        let bad = judge_text("t", r#"{"format":"x/2","sessions":[]}"#, &config).unwrap_err();
        assert!(
            bad.to_string().contains("t: ") && bad.to_string().contains("x/2"),
            "{bad}"
        );
        let not_json = judge_text("t", "{oops", &config).unwrap_err();
        assert!(not_json.to_string().contains("not JSON"), "{not_json}");
    }
}
