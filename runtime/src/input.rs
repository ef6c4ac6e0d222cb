//! Reading sessions from disk: session files (`agentwatch-sessions/1`) and `opencode export` JSON.
//!
//! Files are read through a buffer one session at a time ([`detect_core::stream_sessions`]): no
//! JSON tree of a whole file is built, and [`judge_files`] drops each session's calls once they
//! are in its detector, judging sessions on every core (issue 19).

use crate::error::Error;
use detect_core::{
    DetectConfig, Judgement, ParseError, Session, SessionDetector, judge_detectors, stream_sessions,
};
use rayon::iter::{ParallelBridge, ParallelIterator};
use serde_json::Value;
use std::cell::RefCell;
use std::collections::HashMap;
use std::io::{BufReader, Read};
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

/// A file, or standard input for `-`.
fn open(path: &str) -> Result<(String, Box<dyn Read + Send>), Error> {
    if path == "-" {
        return Ok(("standard input".to_owned(), Box::new(std::io::stdin())));
    }
    let file = std::fs::File::open(path).map_err(|e| Error::read(path, e))?;
    Ok((path.to_owned(), Box::new(file)))
}

/// What one document turned out to be, once read through.
enum Document {
    /// A session file: the sessions handed over with a serial at least this one count.
    SessionFile { first_serial: usize },
    /// An `opencode export` of one session (the sessions handed over, if any, do not count).
    Export(Box<Session>),
}

/// Read one document from `de`, handing each session of a session file to `on_session` as it
/// is read, and telling at the end which of them count.
fn stream_document<'de, R: serde_json::de::Read<'de>>(
    origin: &str,
    de: &mut serde_json::Deserializer<R>,
    on_session: &mut dyn FnMut(usize, Session),
) -> Result<Document, Error> {
    let data_err = |msg: String| Error::data(format!("{origin}: {msg}"));
    let streamed = match stream_sessions(de, &["info", "messages"], on_session) {
        Ok(streamed) => streamed,
        Err(ParseError::Json { message, .. }) => {
            return Err(data_err(format!("not JSON: {message}")));
        }
        Err(other) => return Err(data_err(other.to_string())),
    };
    if streamed.kept.contains_key("info") && streamed.kept.contains_key("messages") {
        let session = agentwatch_opencode::session_from_export(&Value::Object(streamed.kept))
            .map_err(|e| data_err(format!("opencode export: {e}")))?;
        return Ok(Document::Export(Box::new(session)));
    }
    streamed.outcome.map_err(|e| data_err(e.to_string()))?;
    Ok(Document::SessionFile {
        first_serial: streamed.first_serial,
    })
}

/// [`stream_document`] on a reader, through a large buffer; a failing read is an I/O error
/// naming the origin (as when the whole file was read first), not a JSON error.
fn stream_reader(
    origin: &str,
    reader: impl Read,
    on_session: &mut dyn FnMut(usize, Session),
) -> Result<Document, Error> {
    let error = Rc::new(RefCell::new(None));
    let watched = Watched {
        inner: reader,
        error: Rc::clone(&error),
    };
    // The parser reads byte by byte: a `BufReader` it owns serves those from its buffer.
    let buffered = BufReader::with_capacity(1 << 20, watched);
    let mut de = serde_json::Deserializer::from_reader(buffered);
    let document = stream_document(origin, &mut de, on_session);
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

/// The sessions of one document: a session file, or an `opencode export` of one session.
pub fn sessions_from_text(origin: &str, text: &str) -> Result<Vec<Session>, Error> {
    let mut de = serde_json::Deserializer::from_str(text);
    collect_sessions(|on| stream_document(origin, &mut de, on))
}

fn collect_sessions(
    read: impl FnOnce(&mut dyn FnMut(usize, Session)) -> Result<Document, Error>,
) -> Result<Vec<Session>, Error> {
    let mut sessions = Vec::new();
    match read(&mut |serial, session| sessions.push((serial, session)))? {
        Document::Export(session) => Ok(vec![*session]),
        Document::SessionFile { first_serial } => Ok(sessions
            .into_iter()
            .filter(|(serial, _)| *serial >= first_serial)
            .map(|(_, session)| session)
            .collect()),
    }
}

/// Read the sessions of several files, in order; an id seen twice is an error naming both files.
pub fn read_sessions(paths: &[String]) -> Result<Vec<Session>, Error> {
    let mut sessions: Vec<Session> = Vec::new();
    let mut origin_of = HashMap::new();
    for path in paths {
        let (origin, reader) = open(path)?;
        let file = collect_sessions(|on| stream_reader(&origin, reader, on))?;
        for session in file {
            check_unique(&mut origin_of, &session.id, path)?;
            sessions.push(session);
        }
    }
    Ok(sessions)
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

/// One session's calls pushed into its detector; the session keeps its id, parent and context
/// but no calls.
fn detected(mut session: Session, config: &DetectConfig) -> (Session, SessionDetector) {
    let mut detector = SessionDetector::new(&session, config);
    for call in &session.calls {
        detector.push(call);
    }
    session.calls = Vec::new();
    (session, detector)
}

/// Judge the sessions of several files (as [`read_sessions`] reads them) without holding their
/// calls: one thread reads, the others push each session's calls into its detector as it comes
/// (in parallel, on every core); the verdicts are [`detect_core::judge_sessions`]'s, in the
/// same order.
pub fn judge_files(paths: &[String], config: &DetectConfig) -> Result<Judgement, Error> {
    let mut stubs: Vec<Session> = Vec::new();
    let mut detectors: Vec<SessionDetector> = Vec::new();
    let mut origin_of = HashMap::new();
    for path in paths {
        let (origin, reader) = open(path)?;
        for (session, detector) in detect_document(&origin, reader, config)? {
            check_unique(&mut origin_of, &session.id, path)?;
            stubs.push(session);
            detectors.push(detector);
        }
    }
    Ok(judge_detectors(&stubs, detectors))
}

/// Judge the built-in sample (or any text) the same way.
pub fn judge_text(origin: &str, text: &str, config: &DetectConfig) -> Result<Judgement, Error> {
    let (stubs, detectors): (Vec<Session>, Vec<SessionDetector>) =
        detect_document(origin, text.as_bytes(), config)?
            .into_iter()
            .unzip();
    Ok(judge_detectors(&stubs, detectors))
}

fn detect_document(
    origin: &str,
    reader: impl Read + Send,
    config: &DetectConfig,
) -> Result<Vec<(Session, SessionDetector)>, Error> {
    std::thread::scope(|scope| {
        // A small queue: the reader stays a few sessions ahead of the detectors, never a file.
        let (tx, rx) = std::sync::mpsc::sync_channel::<(usize, Session)>(32);
        let reader = scope.spawn(move || {
            stream_reader(origin, reader, &mut |serial, session| {
                // The receiver lives until the reader is joined; a send cannot fail before.
                let _ = tx.send((serial, session));
            })
        });
        let mut judged: Vec<(usize, (Session, SessionDetector))> = rx
            .into_iter()
            .par_bridge()
            .map(|(serial, session)| (serial, detected(session, config)))
            .collect();
        let document = reader
            .join()
            .map_err(|_| Error::software(format!("{origin}: the reader panicked")))??;
        judged.sort_unstable_by_key(|(serial, _)| *serial);
        Ok(match document {
            Document::Export(session) => vec![detected(*session, config)],
            Document::SessionFile { first_serial } => judged
                .into_iter()
                .filter(|(serial, _)| *serial >= first_serial)
                .map(|(_, judged)| judged)
                .collect(),
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use detect_core::{Profile, SessionFile, judge_sessions};
    use std::path::Path;

    /// The streamed, parallel judgement equals the batch one on every committed fixture, under
    /// both profiles: the same verdicts in the same order.
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
            for profile in [Profile::Design, Profile::Precise] {
                let config = DetectConfig::with_profile(profile);
                let batch = judge_sessions(&sessions, &config);
                let paths = [path.to_string_lossy().into_owned()];
                assert_eq!(judge_files(&paths, &config).unwrap(), batch, "{name}");
                assert_eq!(judge_text(name, &text, &config).unwrap(), batch, "{name}");
            }
        }
    }

    #[test]
    fn errors_name_the_file_and_keep_their_kind() {
        let config = DetectConfig::default();
        let missing = judge_files(&["/nonexistent/x.json".to_owned()], &config).unwrap_err();
        assert!(matches!(missing, Error::Read { .. }), "{missing}");
        let dir = std::env::temp_dir();
        let not_a_file = judge_files(&[dir.to_string_lossy().into_owned()], &config).unwrap_err();
        assert!(matches!(not_a_file, Error::Read { .. }), "{not_a_file}");
        let bad = judge_text("t", r#"{"format":"x/2","sessions":[]}"#, &config).unwrap_err();
        assert!(
            bad.to_string().contains("t: ") && bad.to_string().contains("x/2"),
            "{bad}"
        );
        let not_json = judge_text("t", "{oops", &config).unwrap_err();
        assert!(not_json.to_string().contains("not JSON"), "{not_json}");
    }
}
