//! A session file cut into its sessions' texts by serde's reader ([`stream_session_texts`]), and
//! what the cut hands over: each session's text ([`SessionText`], [`SharedText`]), the document's
//! shape ([`Streamed`]) and the sessions that count ([`counted_sessions`]). The faster cut of
//! [`crate::scan`] hands over the same, through these types; a caller parses each text as it
//! comes ([`crate::parse_session_text`], [`crate::detect_session_text`]).

use crate::model::{ParseError, SESSION_FILE_FORMAT};
use serde_json::value::RawValue;
use serde_json::{Map, Value};
use std::collections::HashSet;
use std::sync::Arc;

/// One element of a session file's `sessions` list, as it was read.
#[derive(Debug)]
pub struct SessionText {
    /// Its place among every element read from the document (a repeated `sessions` key goes on).
    pub serial: usize,
    /// Its place in its list, which names it in errors.
    pub index: usize,
    /// Where its text begins in the input, when the scan cut it out
    /// ([`crate::scan_session_texts`]): a caller may read it again alone there (its length is the
    /// text's).
    pub offset: Option<u64>,
    /// Its JSON text (nothing built; checked by serde's reader, not by the scan, see
    /// [`crate::scan_session_texts`]).
    pub text: SharedText,
}

/// A session's JSON text, a range of a block of the file shared by every session cut from it
/// ([`crate::scan_session_texts`]: no copy per session), read as a `str`.
#[derive(Clone)]
pub struct SharedText {
    block: Arc<String>,
    start: usize,
    end: usize,
}

impl SharedText {
    /// The text of `block` at `range`; `None` when that is not a text of it.
    pub(crate) fn new(block: Arc<String>, range: std::ops::Range<usize>) -> Option<Self> {
        block.get(range.clone())?;
        Some(Self {
            block,
            start: range.start,
            end: range.end,
        })
    }
}

impl std::ops::Deref for SharedText {
    type Target = str;
    fn deref(&self) -> &str {
        // Always a text of the block ([`SharedText::new`]).
        self.block.get(self.start..self.end).unwrap_or_default()
    }
}

impl From<Box<str>> for SharedText {
    fn from(text: Box<str>) -> Self {
        let end = text.len();
        Self {
            block: Arc::new(text.into_string()),
            start: 0,
            end,
        }
    }
}

impl PartialEq for SharedText {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl std::fmt::Debug for SharedText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(&**self, f)
    }
}

/// What [`stream_session_texts`] found besides the sessions it handed over.
#[derive(Debug, Clone, PartialEq)]
pub struct Streamed {
    /// The top-level keys asked for in `keep`, when present (the last of a repeated key).
    pub kept: Map<String, Value>,
    /// The sessions that count are those whose serial is at least this: a repeated `sessions`
    /// key replaces the earlier list, as in any JSON object.
    pub first_serial: usize,
    /// Whether the document has the shape of a session file (an object, the format, a list of
    /// sessions), with the first error a reader of the whole document meets. The
    /// sessions themselves are checked by [`counted_sessions`].
    pub outcome: Result<(), ParseError>,
}

/// Whether the document's `format` is this version's.
pub(crate) fn check_format(format: Option<&Value>) -> Result<(), ParseError> {
    match format {
        Some(Value::String(f)) if f == SESSION_FILE_FORMAT => Ok(()),
        Some(Value::String(f)) => Err(ParseError::Format(f.clone())),
        Some(other) => Err(ParseError::Format(other.to_string())),
        None => Err(ParseError::Format("(missing)".to_owned())),
    }
}

/// Read a session file from `de` one session at a time, handing each element of the `sessions` list
/// to `on_text` as JSON text as soon as it is read, so that a caller may parse it anywhere
/// ([`crate::parse_session_text`], [`crate::detect_session_text`]); only one session's text is held
/// at a time. The whole document is read (a syntax error anywhere is [`ParseError::Json`], as with
/// [`crate::SessionFile::from_json`]); the document's shape is reported in [`Streamed::outcome`].
/// Top-level keys named in `keep` are kept as JSON (e.g. to recognise another format); other keys
/// are skipped without being built.
pub fn stream_session_texts<'de, R: serde_json::de::Read<'de>>(
    de: &mut serde_json::Deserializer<R>,
    keep: &[&str],
    on_text: &mut dyn FnMut(SessionText),
) -> Result<Streamed, ParseError> {
    let json = |e: serde_json::Error| ParseError::Json {
        line: e.line(),
        column: e.column(),
        message: e.to_string(),
    };
    let mut state = StreamState {
        keep,
        on_text,
        serial: 0,
        kept: Map::new(),
        format: None,
        list: None,
        object: false,
    };
    serde::de::DeserializeSeed::deserialize(RootSeed(&mut state), &mut *de).map_err(json)?;
    de.end().map_err(json)?;
    let first_serial = match &state.list {
        Some(ListState::List { first_serial }) => *first_serial,
        _ => state.serial,
    };
    let outcome = if !state.object {
        Err(ParseError::NotAnObject)
    } else {
        check_format(state.format.as_ref()).and_then(|()| match state.list.take() {
            Some(ListState::List { .. }) => Ok(()),
            Some(ListState::NotAList) | None => Err(ParseError::NoSessions),
        })
    };
    Ok(Streamed {
        kept: state.kept,
        first_serial,
        outcome,
    })
}

/// Whether what was parsed of the texts [`crate::scan_session_texts`] handed over stands: no text
/// was found not to be JSON (else the document must be read again through [`stream_session_texts`],
/// for the error a reader of the whole document gives).
pub fn scanned_cleanly<T>(parsed: &[(usize, Result<T, ParseError>)]) -> bool {
    !parsed
        .iter()
        .any(|(_, result)| matches!(result, Err(ParseError::Json { .. })))
}

/// The sessions that count, in order, from what was parsed of each element of a streamed
/// document (`(serial, result)`, in any order): the first error a reader of the whole
/// document meets (the document's shape, then a session that does not parse or an id seen twice,
/// in list order), or every session of the last `sessions` list.
pub fn counted_sessions<T>(
    streamed: &Streamed,
    mut parsed: Vec<(usize, Result<T, ParseError>)>,
    id: impl Fn(&T) -> &str,
) -> Result<Vec<T>, ParseError> {
    streamed.outcome.clone()?;
    parsed.retain(|(serial, _)| *serial >= streamed.first_serial);
    parsed.sort_unstable_by_key(|(serial, _)| *serial);
    let mut seen = HashSet::new();
    let mut sessions = Vec::with_capacity(parsed.len());
    for (_, result) in parsed {
        let session = result?;
        if !seen.insert(id(&session).to_owned()) {
            return Err(ParseError::DuplicateSession(id(&session).to_owned()));
        }
        sessions.push(session);
    }
    Ok(sessions)
}

struct StreamState<'k, 'f> {
    keep: &'k [&'k str],
    on_text: &'f mut dyn FnMut(SessionText),
    serial: usize,
    kept: Map<String, Value>,
    format: Option<Value>,
    list: Option<ListState>,
    object: bool,
}

pub(crate) enum ListState {
    List { first_serial: usize },
    NotAList,
}

impl std::fmt::Debug for StreamState<'_, '_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamState")
            .field("serial", &self.serial)
            .finish_non_exhaustive()
    }
}

/// Skip whatever value comes (a document or `sessions` of the wrong type), reading it through.
macro_rules! skip_scalars {
    ($out:ty, $value:expr) => {
        fn visit_bool<E: serde::de::Error>(self, _: bool) -> Result<$out, E> {
            Ok($value)
        }
        fn visit_i64<E: serde::de::Error>(self, _: i64) -> Result<$out, E> {
            Ok($value)
        }
        fn visit_u64<E: serde::de::Error>(self, _: u64) -> Result<$out, E> {
            Ok($value)
        }
        fn visit_f64<E: serde::de::Error>(self, _: f64) -> Result<$out, E> {
            Ok($value)
        }
        fn visit_str<E: serde::de::Error>(self, _: &str) -> Result<$out, E> {
            Ok($value)
        }
        fn visit_unit<E: serde::de::Error>(self) -> Result<$out, E> {
            Ok($value)
        }
    };
}

struct RootSeed<'s, 'k, 'f>(&'s mut StreamState<'k, 'f>);

impl<'de> serde::de::DeserializeSeed<'de> for RootSeed<'_, '_, '_> {
    type Value = ();
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for RootSeed<'_, '_, '_> {
    type Value = ();
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a session file")
    }
    skip_scalars!((), ());
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
        Ok(())
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let state = self.0;
        state.object = true;
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "format" => state.format = Some(map.next_value()?),
                "sessions" => {
                    let first_serial = state.serial;
                    state.list = Some(map.next_value_seed(ListSeed(state, first_serial))?);
                }
                k if state.keep.contains(&k) => {
                    let value: Value = map.next_value()?;
                    state.kept.insert(key, value);
                }
                _ => {
                    map.next_value::<serde::de::IgnoredAny>()?;
                }
            }
        }
        Ok(())
    }
}

struct ListSeed<'s, 'k, 'f>(&'s mut StreamState<'k, 'f>, usize);

impl<'de> serde::de::DeserializeSeed<'de> for ListSeed<'_, '_, '_> {
    type Value = ListState;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<ListState, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for ListSeed<'_, '_, '_> {
    type Value = ListState;
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a list of sessions")
    }
    skip_scalars!(ListState, ListState::NotAList);
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<ListState, A::Error> {
        while map
            .next_entry::<serde::de::IgnoredAny, serde::de::IgnoredAny>()?
            .is_some()
        {}
        Ok(ListState::NotAList)
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<ListState, A::Error> {
        let (state, first_serial) = (self.0, self.1);
        let mut index = 0;
        while let Some(text) = seq.next_element::<Box<RawValue>>()? {
            (state.on_text)(SessionText {
                serial: state.serial,
                index,
                offset: None,
                text: Box::<str>::from(text).into(),
            });
            state.serial += 1;
            index += 1;
        }
        Ok(ListState::List { first_serial })
    }
}
