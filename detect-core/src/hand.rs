//! `detect`'s hand reader of one session's text (issue 19): the shapes a session file's calls
//! take, read byte by byte into what serde's borrowed read gives ([`CallText`], [`Json`],
//! [`MetaFacts`]) without serde's machinery, which was a third of the backtest's instructions.
//!
//! It answers what serde's borrowed read ([`crate::watch_session_text`]) answers, or it does not
//! answer. It is at least as strict as serde_json everywhere (strings with control characters,
//! lone surrogates or unknown escapes, numbers out of range, deep nesting are not its to read),
//! so whatever it reads, serde reads the same way; whatever it does not read it hands over:
//! - a value it does not build itself (a number other than a small unsigned integer, a label,
//!   a loop start, a metadata value written as text) is read by serde_json from its own text;
//! - a call of another shape (a field missing, repeated or of another type, a string it does
//!   not unescape) is read by serde_json from the call's text;
//! - a session whose keys it does not read, before any call is taken, is [`Untouched`]: the
//!   caller reads it with serde from the start; after a call is taken, it is not read (`None`),
//!   as serde's read does not read it, and the caller reads it the usual way.

use crate::detector::SessionDetector;
use crate::json::string_stop;
use crate::json::{Json, MapOnly};
use crate::matcher::LineCountsText;
use crate::meta::{MetaFacts, commit_hash, committed, is_unified_diff, lines_changed};
use crate::model::{CallText, Label, Session, SessionDoc, TimeDoc, UnixMs, is_session_key};
use crate::output::COMMITTED_KEY;
use crate::scan::{is_space, string_tail};
use crate::sink::{CallSink, CallWatcher, NewDetector};
use rustc_hash::FxHashMap;
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::borrow::Cow;
use std::collections::BTreeMap;

/// The hand reader left the session as it found it (no call was taken): read it with serde.
#[derive(Debug)]
pub(crate) struct Untouched;

/// How deep the hand reader follows nested values (serde_json's limit is 128 from the session).
const MAX_DEPTH: u32 = 64;

/// The longest number written without an exponent that the hand reader takes: every such
/// number is finite as a float, as serde_json wants a number it parses.
const MAX_NUMBER: usize = 300;

/// [`crate::watch_session_text`] by hand: the session without its calls and the detector of all
/// of them, `None` when the session is not read this way after a call was taken (or when
/// `after_call` says stop), [`Untouched`] when nothing was taken.
pub(crate) fn watch(
    text: &str,
    new_detector: &NewDetector<'_>,
    after_call: &mut CallWatcher<'_>,
) -> Result<Option<(Session, SessionDetector)>, Untouched> {
    let mut cursor = Cursor {
        text,
        at: 0,
        spare: Vec::new(),
    };
    let (mut session, line_counts) = cursor.head().ok_or(Untouched)?;
    let mut detector = new_detector(&mut session);
    if cursor.space() != Some(b'[') {
        return Err(Untouched);
    }
    let read = {
        let mut sink = CallSink {
            session: &session,
            detector: &mut detector,
            line_counts: &line_counts,
            after_call,
            read: 0,
        };
        cursor.calls(&mut sink).and_then(|()| cursor.tail())
    };
    Ok(read.map(|()| (session, detector)))
}

/// A JSON number as the hand reader found it: a plain unsigned integer it read, or the text of
/// any other number (checked against JSON's grammar) for serde to read.
enum Number<'a> {
    Plain(u64),
    Other(&'a str),
}

/// Where the hand reader is in a session's text. Each method reads one thing where the cursor
/// is (after any whitespace) and moves past it, or answers `None` (the cursor is then anywhere).
struct Cursor<'a> {
    text: &'a str,
    at: usize,
    /// The entries of the last call's input, emptied: the next call's input is read into them
    /// (an allocation and a free per call were 2% of `detect`).
    spare: Vec<(Cow<'a, str>, Json<'a>)>,
}

impl<'a> Cursor<'a> {
    fn bytes(&self) -> &'a [u8] {
        self.text.as_bytes()
    }

    /// The next byte after whitespace, not taken.
    #[inline]
    fn space(&mut self) -> Option<u8> {
        let bytes = self.bytes();
        while let Some(&b) = bytes.get(self.at) {
            if !is_space(b) {
                return Some(b);
            }
            self.at += 1;
        }
        None
    }

    /// Take `want` after whitespace.
    #[inline]
    fn take(&mut self, want: u8) -> Option<()> {
        // Written without whitespace, the byte is right here.
        if self.bytes().get(self.at) == Some(&want) {
            self.at += 1;
            return Some(());
        }
        (self.space()? == want).then(|| self.at += 1)
    }

    /// The session's keys up to its `calls` (the cursor on their value): the session without
    /// calls, as [`SessionDoc::stub`] makes it, and its line counts.
    fn head(&mut self) -> Option<(Session, LineCountsText<'a>)> {
        let mut doc = SessionDoc::<()>::empty();
        let mut line_counts = None;
        let mut seen = 0u16;
        self.take(b'{')?;
        loop {
            let key = self.key()?;
            let bit = match &*key {
                "id" => {
                    doc.id = self.string()?.into_owned();
                    1
                }
                "parent_id" => read_into(&mut doc.parent_id, self.optional_string()?, 2),
                "title" => read_into(&mut doc.title, self.optional_string()?, 4),
                "agent" => read_into(&mut doc.agent, self.optional_string()?, 8),
                "directory" => read_into(&mut doc.directory, self.optional_string()?, 16),
                "note" => read_into(&mut doc.note, self.optional_string()?, 32),
                "label" => read_into(&mut doc.label, self.serde::<Option<Label>>()?, 64),
                "labels" => {
                    let labels = self.serde::<Option<BTreeMap<String, Label>>>()?;
                    read_into(&mut doc.labels, labels, 128)
                }
                "loop_start" => read_into(&mut doc.loop_start, self.serde::<Option<usize>>()?, 256),
                "line_counts" => read_into(&mut line_counts, self.line_counts()?, 512),
                // Made before its first call, a detector needs the keys above first.
                "calls" if seen & 1 != 0 => break,
                _ => {
                    self.skip(1)?;
                    0
                }
            };
            // Each key once (serde's read takes no key twice either).
            if seen & bit != 0 {
                return None;
            }
            seen |= bit;
            self.take(b',')?;
        }
        let session = doc.stub().ok()?;
        Some((session, line_counts.unwrap_or_default()))
    }

    /// The list of calls (the next byte is its `[`), each taken by `sink`.
    fn calls(&mut self, sink: &mut CallSink<'_, '_, '_>) -> Option<()> {
        self.list(|c| {
            c.space()?;
            let start = c.at;
            let call = match c.call() {
                Some(call) => call,
                None => {
                    // Not a shape read here: serde reads the call from its own text.
                    c.at = start;
                    c.at = c.object_end()?;
                    serde_json::from_str::<MapOnly<CallText<'a>>>(&c.text[start..c.at])
                        .ok()?
                        .0
                }
            };
            let mut call = call;
            let taken = sink.take(&mut call);
            if let Json::Object(mut entries) = call.input {
                entries.clear();
                c.spare = entries;
            }
            taken.then_some(())
        })
    }

    /// The rest of the session after its calls: keys that are not the session's, then nothing.
    fn tail(&mut self) -> Option<()> {
        loop {
            match self.space()? {
                b'}' => {
                    self.at += 1;
                    return (self.space().is_none()).then_some(());
                }
                b',' => {
                    self.at += 1;
                    let key = self.key()?;
                    if is_session_key(&key) {
                        return None;
                    }
                    self.skip(1)?;
                }
                _ => return None,
            }
        }
    }

    /// One call, as serde's read of [`CallText`] builds it; `None` for any other shape.
    fn call(&mut self) -> Option<CallText<'a>> {
        let (mut tool, mut input, mut status, mut metadata, mut time, mut output_hash) =
            (None, None, None, None, None, None);
        self.object(|c, key| match &*key {
            "tool" => once(&mut tool, c.string()?),
            "input" => once(&mut input, c.input(3)?),
            "status" => once(&mut status, c.string()?),
            "metadata" => once(&mut metadata, c.meta(3)?),
            "time" => once(&mut time, c.time()?),
            "output_hash" => once(&mut output_hash, c.output_hash()?),
            _ => c.skip(3),
        })?;
        Some(CallText {
            tool: tool?,
            input: input?,
            status: status?,
            metadata: metadata.unwrap_or_default(),
            time: time.flatten().map(MapOnly),
            output_hash: output_hash.flatten(),
        })
    }

    /// An object's entries: `entry` reads each value, the cursor on it, given its key.
    fn object(
        &mut self,
        mut entry: impl FnMut(&mut Self, Cow<'a, str>) -> Option<()>,
    ) -> Option<()> {
        self.items(b'{', b'}', |c| {
            let key = c.key()?;
            entry(c, key)
        })
    }

    /// A list's items: `item` reads each, the cursor on it.
    fn list(&mut self, item: impl FnMut(&mut Self) -> Option<()>) -> Option<()> {
        self.items(b'[', b']', item)
    }

    /// What is between `open` and `close`, each item read by `item` and followed by a comma
    /// but the last.
    fn items(
        &mut self,
        open: u8,
        close: u8,
        mut item: impl FnMut(&mut Self) -> Option<()>,
    ) -> Option<()> {
        self.take(open)?;
        if self.space()? == close {
            self.at += 1;
            return Some(());
        }
        loop {
            item(self)?;
            match self.space()? {
                b',' => self.at += 1,
                b if b == close => {
                    self.at += 1;
                    return Some(());
                }
                _ => return None,
            }
        }
    }

    /// A key and its colon.
    fn key(&mut self) -> Option<Cow<'a, str>> {
        let key = self.string()?;
        self.take(b':')?;
        Some(key)
    }

    /// A string, borrowed when it has no escapes.
    #[inline]
    fn string(&mut self) -> Option<Cow<'a, str>> {
        let (raw, escaped) = self.raw_string()?;
        if escaped {
            unescape(raw).map(Cow::Owned)
        } else {
            Some(Cow::Borrowed(raw))
        }
    }

    /// A string's text between its quotes, and whether it has escapes: only the escapes JSON
    /// knows, no control character and no `\u` escape of a surrogate (those are serde's to read).
    #[inline]
    fn raw_string(&mut self) -> Option<(&'a str, bool)> {
        self.take(b'"')?;
        let bytes = self.bytes();
        let start = self.at;
        let mut at = start;
        let mut escaped = false;
        loop {
            at += string_stop(bytes.get(at..)?, true)?;
            match bytes[at] {
                b'"' => {
                    self.at = at + 1;
                    return Some((self.text.get(start..at)?, escaped));
                }
                b'\\' => {
                    escaped = true;
                    at += match bytes.get(at + 1)? {
                        b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => 2,
                        b'u' => {
                            let unit = hex4(bytes.get(at + 2..at + 6)?)?;
                            if (0xD800..0xE000).contains(&unit) {
                                return None;
                            }
                            6
                        }
                        _ => return None,
                    };
                }
                _ => return None,
            }
        }
    }

    /// A string or `null`.
    fn optional_string(&mut self) -> Option<Option<String>> {
        if self.space()? == b'n' {
            return self.word("null").map(|()| None);
        }
        self.string().map(|s| Some(s.into_owned()))
    }

    /// `word` (`true`, `false`, `null`).
    fn word(&mut self, word: &str) -> Option<()> {
        let end = self.at + word.len();
        (self.bytes().get(self.at..end)? == word.as_bytes()).then(|| self.at = end)
    }

    /// A number, as JSON writes one; [`Number::Other`] only when serde_json reads it as a
    /// finite number (no exponent, not too long).
    fn number(&mut self) -> Option<Number<'a>> {
        self.space()?;
        let bytes = self.bytes();
        let start = self.at;
        let mut at = start;
        let negative = bytes.get(at) == Some(&b'-');
        if negative {
            at += 1;
        }
        let first = *bytes.get(at)?;
        if !first.is_ascii_digit() {
            return None;
        }
        at += 1;
        let mut value = u64::from(first - b'0');
        // A leading 0 is the whole integer part.
        if first != b'0' {
            // Eight digits at a time (a unix time in ms has thirteen), then one at a time.
            while let Some(eight) = bytes.get(at..at + 8).and_then(eight_digits) {
                value = value.wrapping_mul(100_000_000).wrapping_add(eight);
                at += 8;
            }
            while let Some(&d) = bytes.get(at).filter(|d| d.is_ascii_digit()) {
                value = value.wrapping_mul(10).wrapping_add(u64::from(d - b'0'));
                at += 1;
            }
        }
        // Up to 18 digits, a plain integer cannot overflow.
        let mut plain = !negative && at - start <= 18;
        if bytes.get(at) == Some(&b'.') {
            plain = false;
            at += 1;
            let digits = at;
            while bytes.get(at).is_some_and(u8::is_ascii_digit) {
                at += 1;
            }
            if at == digits {
                return None;
            }
        }
        if matches!(bytes.get(at), Some(b'e' | b'E')) || at - start > MAX_NUMBER {
            return None;
        }
        self.at = at;
        Some(if plain {
            Number::Plain(value)
        } else {
            Number::Other(&self.text[start..at])
        })
    }

    /// Where the object here ends, its strings and brackets followed but nothing checked: for a
    /// call serde reads from its text (and checks). `None` when it nests deeper than
    /// [`MAX_DEPTH`] (serde's limit counts from the session, not from the call) or is cut off.
    fn object_end(&self) -> Option<usize> {
        let bytes = self.bytes();
        if bytes.get(self.at) != Some(&b'{') {
            return None;
        }
        let (mut at, mut depth) = (self.at, 0);
        loop {
            match *bytes.get(at)? {
                b'"' => {
                    at += 1 + string_tail(bytes.get(at + 1..)?)?;
                    continue;
                }
                b'{' | b'[' if depth == MAX_DEPTH => return None,
                b'{' | b'[' => depth += 1,
                b'}' | b']' => depth -= 1,
                _ => {}
            }
            at += 1;
            if depth == 0 {
                return Some(at);
            }
        }
    }

    /// Any value, checked and passed over; `depth` is how deep it is.
    fn skip(&mut self, depth: u32) -> Option<()> {
        match self.space()? {
            b'{' | b'[' if depth >= MAX_DEPTH => None,
            b'{' => self.object(|c, _| c.skip(depth + 1)),
            b'[' => self.list(|c| c.skip(depth + 1)),
            b'"' => self.raw_string().map(drop),
            b't' => self.word("true"),
            b'f' => self.word("false"),
            b'n' => self.word("null"),
            _ => self.number().map(drop),
        }
    }

    /// The text of the value here, checked.
    fn value_text(&mut self, depth: u32) -> Option<&'a str> {
        self.space()?;
        let start = self.at;
        self.skip(depth)?;
        Some(&self.text[start..self.at])
    }

    /// The value here read by serde_json from its own text (rare shapes: serde says exactly
    /// what it reads there).
    fn serde<T: DeserializeOwned>(&mut self) -> Option<T> {
        serde_json::from_str(self.value_text(1)?).ok()
    }

    /// Any value as [`Json`] reads it.
    fn json(&mut self, depth: u32) -> Option<Json<'a>> {
        Some(match self.space()? {
            b'{' | b'[' if depth >= MAX_DEPTH => return None,
            b'{' => self.object_into(depth, Vec::with_capacity(4))?,
            b'[' => {
                let mut items = Vec::new();
                self.list(|c| {
                    items.push(c.json(depth + 1)?);
                    Some(())
                })?;
                Json::List(items)
            }
            b'"' => Json::Str(self.string()?),
            b't' => self.word("true").map(|()| Json::Bool(true))?,
            b'f' => self.word("false").map(|()| Json::Bool(false))?,
            b'n' => self.word("null").map(|()| Json::Null)?,
            _ => match self.number()? {
                Number::Plain(n) => Json::Number(n.into()),
                Number::Other(text) => serde_json::from_str(text).ok()?,
            },
        })
    }

    /// The object here (at `depth`), its entries read into `entries` (empty).
    fn object_into(
        &mut self,
        depth: u32,
        mut entries: Vec<(Cow<'a, str>, Json<'a>)>,
    ) -> Option<Json<'a>> {
        self.object(|c, key| {
            entries.push((key, c.json(depth + 1)?));
            Some(())
        })?;
        Some(Json::Object(entries))
    }

    /// A call's input: [`Cursor::json`], an object read into the spare entries.
    fn input(&mut self, depth: u32) -> Option<Json<'a>> {
        if self.space()? != b'{' || depth >= MAX_DEPTH {
            return self.json(depth);
        }
        let spare = std::mem::take(&mut self.spare);
        self.object_into(depth, spare)
    }

    /// Any value as a [`Value`].
    fn value(&mut self) -> Option<Value> {
        match self.space()? {
            b'n' => self.word("null").map(|()| Value::Null),
            b'0'..=b'9' => match self.number()? {
                Number::Plain(n) => Some(n.into()),
                Number::Other(text) => serde_json::from_str(text).ok(),
            },
            _ => self.serde(),
        }
    }

    /// A count: a value read whole, as a `u64` when it is one.
    fn count(&mut self) -> Option<Option<u64>> {
        self.value().map(|v| v.as_u64())
    }

    /// A call's metadata as [`MetaFacts`] reads it: an object's keys the matcher reads, any
    /// other value passed over.
    fn meta(&mut self, depth: u32) -> Option<MetaFacts<'a>> {
        if self.space()? != b'{' {
            return self.lenient(depth).map(|()| MetaFacts::default());
        }
        let mut facts = MetaFacts::default();
        let (mut diff, mut filediff, mut files) = (None, None, false);
        let mut update = false;
        self.object(|c, key| {
            match &*key {
                "exit" => facts.exit = Some(Cow::Owned(c.value()?)),
                "total_lines" => facts.total_lines = c.count()?,
                "lines_read" => facts.lines_read = c.count()?,
                "diff" => {
                    diff = match c.space()? {
                        b'"' => Some(c.string()?),
                        _ => c.lenient(depth + 1).map(|()| None)?,
                    }
                }
                "filediff" => filediff = c.changed_lines(depth + 1)?,
                "files" => files = c.any_changed(depth + 1)?,
                "type" => {
                    update = match c.space()? {
                        b'"' => c.string()? == "update",
                        _ => c.lenient(depth + 1).map(|()| false)?,
                    }
                }
                COMMITTED_KEY => {
                    let value = c.value()?;
                    (facts.committed, facts.commit) = (committed(&value), commit_hash(&value));
                }
                _ => c.skip(depth + 1)?,
            }
            Some(())
        })?;
        let diff = diff.as_deref();
        facts.changed =
            diff.is_some_and(|d| !d.trim().is_empty()) || filediff == Some(true) || files;
        // Whether the diff is a unified one is asked only when the counts say no line changed.
        facts.unchanged = filediff == Some(false) && (update || diff.is_some_and(is_unified_diff));
        Some(facts)
    }

    /// A value of a shape a metadata field is not read in, passed over as serde reads it
    /// whole: its strings unescaped (a string it does not unescape is not read here).
    fn lenient(&mut self, depth: u32) -> Option<()> {
        match self.space()? {
            b'"' => self.string().map(drop),
            _ => self.skip(depth),
        }
    }

    /// `filediff` or an element of `files`: when it is an object, whether it added or deleted
    /// lines.
    fn changed_lines(&mut self, depth: u32) -> Option<Option<bool>> {
        if self.space()? != b'{' {
            return self.lenient(depth).map(|()| None);
        }
        let (mut additions, mut deletions) = (0, 0);
        self.object(|c, key| {
            match &*key {
                "additions" => additions = c.count()?.unwrap_or(0),
                "deletions" => deletions = c.count()?.unwrap_or(0),
                _ => c.skip(depth + 1)?,
            }
            Some(())
        })?;
        Some(Some(lines_changed(additions, deletions)))
    }

    /// `files`: whether it is a list of which one element has added or deleted lines.
    fn any_changed(&mut self, depth: u32) -> Option<bool> {
        if self.space()? != b'[' {
            return self.lenient(depth).map(|()| false);
        }
        let mut any = false;
        self.list(|c| {
            any |= c.changed_lines(depth + 1)? == Some(true);
            Some(())
        })?;
        Some(any)
    }

    /// A call's `time`: `null`, or an object of a `start` and an `end` in unix ms.
    fn time(&mut self) -> Option<Option<TimeDoc>> {
        if self.space()? == b'n' {
            return self.word("null").map(|()| None);
        }
        let (mut start, mut end) = (None, None);
        self.object(|c, key| match &*key {
            "start" => once(&mut start, c.unix_ms()?),
            "end" => once(&mut end, c.unix_ms()?),
            _ => c.skip(4),
        })?;
        Some(Some(TimeDoc {
            start: start.flatten(),
            end: end.flatten(),
        }))
    }

    /// `null` or a number of unix ms.
    fn unix_ms(&mut self) -> Option<Option<UnixMs>> {
        match self.space()? {
            b'n' => self.word("null").map(|()| None),
            _ => match self.number()? {
                Number::Plain(n) => i64::try_from(n).ok().map(|ms| Some(UnixMs(ms))),
                Number::Other(text) => serde_json::from_str(text).ok().map(Some),
            },
        }
    }

    /// `null` or an output hash without escapes (serde borrows it, so it has none).
    fn output_hash(&mut self) -> Option<Option<&'a str>> {
        if self.space()? == b'n' {
            return self.word("null").map(|()| None);
        }
        match self.raw_string()? {
            (hash, false) => Some(Some(hash)),
            (_, true) => None,
        }
    }

    /// A session's `line_counts`: `null`, or an object of paths and counts.
    fn line_counts(&mut self) -> Option<Option<LineCountsText<'a>>> {
        if self.space()? == b'n' {
            return self.word("null").map(|()| None);
        }
        let mut counts = FxHashMap::default();
        self.object(|c, path| {
            let count = match c.number()? {
                Number::Plain(n) => n,
                Number::Other(text) => serde_json::from_str(text).ok()?,
            };
            counts.insert(path, count);
            Some(())
        })?;
        Some(Some(LineCountsText(counts)))
    }
}

/// Fill `slot` from `value` and answer `bit` (the key's mark among those seen).
fn read_into<T>(slot: &mut Option<T>, value: Option<T>, bit: u16) -> u16 {
    *slot = value;
    bit
}

/// Fill an empty `slot`; `None` when a field comes twice (serde's derived read refuses it).
fn once<T>(slot: &mut Option<T>, value: T) -> Option<()> {
    slot.is_none().then(|| *slot = Some(value))
}

/// The value of eight ASCII digits, or `None` when one of the bytes is not a digit.
fn eight_digits(bytes: &[u8]) -> Option<u64> {
    const NIBBLES: u64 = 0xF0F0_F0F0_F0F0_F0F0;
    const ZEROS: u64 = 0x3030_3030_3030_3030;
    let mut le = [0; 8];
    le.copy_from_slice(bytes);
    // The first digit in the lowest byte.
    let word = u64::from_le_bytes(le);
    // Each byte is 0x30..=0x39: its high nibble is 3, and still 3 with 6 added.
    if word & NIBBLES != ZEROS || word.wrapping_add(0x0606_0606_0606_0606) & NIBBLES != ZEROS {
        return None;
    }
    // Pairs, then fours, then the eight (each step joins neighbours: the lower byte is the
    // more significant digit).
    let word = word - ZEROS;
    let word = (word & 0x000F_000F_000F_000F) * 10 + ((word >> 8) & 0x000F_000F_000F_000F);
    let word = (word & 0x0000_00FF_0000_00FF) * 100 + ((word >> 16) & 0x0000_00FF_0000_00FF);
    Some((word & 0x0000_FFFF) * 10_000 + ((word >> 32) & 0x0000_FFFF))
}

/// Four hex digits.
fn hex4(digits: &[u8]) -> Option<u32> {
    digits
        .iter()
        .try_fold(0, |n, &d| char::from(d).to_digit(16).map(|v| n * 16 + v))
}

/// A string's text with its escapes (checked by [`Cursor::raw_string`]: no surrogates) replaced.
fn unescape(raw: &str) -> Option<String> {
    let bytes = raw.as_bytes();
    let mut out = String::with_capacity(raw.len());
    let (mut run, mut at) = (0, 0);
    while let Some(found) = bytes[at..].iter().position(|&b| b == b'\\') {
        let slash = at + found;
        out.push_str(&raw[run..slash]);
        let (ch, len) = match bytes.get(slash + 1)? {
            b'"' => ('"', 2),
            b'\\' => ('\\', 2),
            b'/' => ('/', 2),
            b'b' => ('\u{8}', 2),
            b'f' => ('\u{c}', 2),
            b'n' => ('\n', 2),
            b'r' => ('\r', 2),
            b't' => ('\t', 2),
            b'u' => (char::from_u32(hex4(bytes.get(slash + 2..slash + 6)?)?)?, 6),
            _ => return None,
        };
        out.push(ch);
        at = slash + len;
        run = at;
    }
    out.push_str(&raw[run..]);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{DetectConfig, Profile};
    use crate::document::SessionText;
    use crate::scan::scan_session_texts;
    use crate::sink::serde_watch;
    use proptest::prelude::*;

    /// What a read of `text` answers, with what its watcher saw (calls read, effect times).
    type Answer = (Option<(Session, String)>, Vec<(usize, Option<i64>)>);

    /// `text` read by hand and by serde under `profile`: the hand reader's answer (`Err`:
    /// untouched), and serde's.
    fn both(text: &str, profile: Profile) -> (Result<Answer, Untouched>, Answer) {
        let config = DetectConfig::with_profile(profile);
        let new = |s: &mut Session| SessionDetector::taking_line_counts(s, &config);
        // The detector as a caller sees it: its snapshot, verdict and own landings.
        let seen = |(s, d): (Session, SessionDetector)| {
            let d = d.recording_own_landings();
            let shown = format!(
                "{:?} {:?} {:?}",
                d.snapshot(),
                d.verdict(),
                d.own_landings()
            );
            (s, shown)
        };
        let mut by_hand = Vec::new();
        let hand = watch(text, &new, &mut |_, n, at, _| {
            by_hand.push((n, at));
            true
        })
        .map(|read| (read.map(seen), by_hand));
        let mut by_serde = Vec::new();
        let serde = serde_watch(text, &new, &mut |_, n, at, _| {
            by_serde.push((n, at));
            true
        })
        .map(seen);
        (hand, (serde, by_serde))
    }

    /// How the hand reader answers: it reads the session, it does not, or it leaves it.
    #[derive(Debug, Clone, Copy, PartialEq)]
    enum Hand {
        Reads,
        NotRead,
        Untouched,
    }

    /// Check that the hand reader answers `text` as serde does or not at all, and how.
    fn check(text: &str) -> Hand {
        let mut how = None;
        for profile in Profile::ALL {
            let (hand, serde) = both(text, profile);
            let now = match hand {
                Ok((Some(read), calls)) => {
                    assert_eq!(Some(read), serde.0, "{profile} {text}");
                    assert_eq!(calls, serde.1, "{profile} {text}");
                    Hand::Reads
                }
                Ok((None, _)) => Hand::NotRead,
                Err(Untouched) => Hand::Untouched,
            };
            assert_eq!(*how.get_or_insert(now), now, "{text}");
        }
        how.unwrap_or(Hand::Untouched)
    }

    #[test]
    fn the_borrowed_read_cases_read_by_hand_as_serde_does() {
        for (text, borrowed) in crate::sink::tests::borrowed_read_cases() {
            let how = check(&text);
            // What serde's borrowed read takes, the hand reader takes (through serde for a
            // call it does not read itself).
            if borrowed {
                assert_eq!(how, Hand::Reads, "{text}");
            }
        }
    }

    /// Calls of hostile or unusual shapes, each read as serde reads it, or not at all.
    #[test]
    fn unusual_calls_read_as_serde_does_or_not_at_all() {
        let session = |call: &str| {
            format!(
                r#"{{"id":"s","directory":"/p","line_counts":{{"/p/a.rs":120}},"calls":[{call},{call},{call}]}}"#
            )
        };
        let deep = |n: usize| format!("{}1{}", "[".repeat(n), "]".repeat(n));
        let cases: Vec<(String, Hand)> = vec![
            // Read by hand.
            (r#"{"tool":"read","input":{"filePath":"/p/a.rs"},"status":"completed"}"#.into(), Hand::Reads),
            (" { \"tool\" : \"bash\" ,\n\t\"input\" : { \"command\" : \"ls  -la\" , \"timeout\" : 120000 } , \"status\" : \"completed\" , \"time\" : { \"start\" : 1 , \"end\" : 2 } } ".into(), Hand::Reads),
            (r#"{"tool":"read","input":{"filePath":"/p/a.rs","offset":123456789012345678},"status":"completed","time":{"start":123456789012345678,"end":null,"x":[1,{"y":"z"}]}}"#.into(), Hand::Reads),
            // Numbers handed to serde: negative, fractions, 19 digits, beyond u64.
            (r#"{"tool":"read","input":{"filePath":"/p/a.rs","offset":-0,"limit":1.5},"status":"completed","time":{"start":-5,"end":2.75}}"#.into(), Hand::Reads),
            (r#"{"tool":"read","input":{"filePath":"/p/a.rs","offset":1234567890123456789,"limit":18446744073709551616},"status":"completed","metadata":{"total_lines":99999999999999999999,"lines_read":-1}}"#.into(), Hand::Reads),
            // Exponents and surrogates are serde's: the call is read from its own text.
            (r#"{"tool":"read","input":{"filePath":"/p/a.rs","limit":1e2},"status":"completed","time":{"start":1E3}}"#.into(), Hand::Reads),
            (r#"{"tool":"bash","input":{"command":"echo \ud83d\ude00"},"status":"completed","output":"\ud800 lone, ignored"}"#.into(), Hand::Reads),
            (r#"{"tool":"bash","input":{"command":"ls"},"status":"completed","output":"x","extra":1e999}"#.into(), Hand::Reads),
            // Escapes of every kind.
            (r#"{"t\u006fol":"b\u0061sh","input":{"command":"echo \"a\\b\/c\b\f\n\r\t\u00e9\u2603\"","k\u0000":"\u001f"},"status":"completed"}"#.into(), Hand::Reads),
            // Metadata of every shape.
            (r#"{"tool":"edit","input":{"filePath":"a.rs"},"status":"completed","metadata":{"diff":"\n\t ","filediff":{"additions":0,"deletions":"1"},"files":[null,{"additions":2}],"exit":"0"}}"#.into(), Hand::Reads),
            (r#"{"tool":"edit","input":{"filePath":"a.rs"},"status":"completed","metadata":"\u00e9"}"#.into(), Hand::Reads),
            (r#"{"tool":"edit","input":{"filePath":"a.rs"},"status":"completed","metadata":[1,"\ud800"]}"#.into(), Hand::Reads),
            (r#"{"tool":"edit","input":{"filePath":"a.rs"},"status":"completed","metadata":{"diff":{"a":"\ud800"},"exit":[-1.5e3]}}"#.into(), Hand::Reads),
            // A commit named in the metadata (the same one three times: one landing), and a
            // write or edit that wrote the file as it was (issue 48).
            (r#"{"tool":"bash","input":{"command":"git commit --amend --no-edit"},"status":"completed","metadata":{"exit":0,"committed":"4e1f\u0030a2"},"output_hash":"ab"}"#.into(), Hand::Reads),
            (r#"{"tool":"bash","input":{"command":"git commit -m x"},"status":"completed","metadata":{"committed":true,"committed":" "},"output_hash":"ab"}"#.into(), Hand::Reads),
            (r#"{"tool":"write","input":{"filePath":"a.rs","content":"x"},"status":"completed","metadata":{"type":"upd\u0061te","diff":"(update)","filediff":{"additions":0,"deletions":0}}}"#.into(), Hand::Reads),
            (r#"{"tool":"write","input":{"filePath":"a.rs","content":"x"},"status":"completed","metadata":{"type":["update"],"filediff":{}}}"#.into(), Hand::Reads),
            (r#"{"tool":"edit","input":{"filePath":"a.rs"},"status":"completed","metadata":{"diff":"Index: a.rs\n--- a.rs\n+++ a.rs\n","filediff":{"additions":0,"deletions":0},"type":null}}"#.into(), Hand::Reads),
            // Nesting: deep in an ignored field serde reads, too deep for the hand reader to
            // find the call's end (not read); deeper than serde's limit in the input (refused).
            (format!(r#"{{"tool":"bash","input":{{"command":"ls"}},"status":"completed","x":{}}}"#, deep(40)), Hand::Reads),
            (format!(r#"{{"tool":"bash","input":{{"command":"ls"}},"status":"completed","x":{}}}"#, deep(100)), Hand::NotRead),
            (format!(r#"{{"tool":"bash","input":{{"command":"ls","x":{}}},"status":"completed"}}"#, deep(130)), Hand::NotRead),
            // Refused by serde, so not read.
            (r#"{"tool":"bash","tool":"bash","input":{"command":"ls"},"status":"completed"}"#.into(), Hand::NotRead),
            (r#"{"tool":"bash","input":{"command":"ls"},"status":"completed","time":{"start":1,"start":2}}"#.into(), Hand::NotRead),
            (r#"{"tool":"bash","input":{"command":"ls",},"status":"completed"}"#.into(), Hand::NotRead),
            (r#"{"tool":"bash","input":{"command":"a\u0001b\ud800"},"status":"completed"}"#.into(), Hand::NotRead),
            ("{\"tool\":\"bash\",\"input\":{\"command\":\"a\tb\"},\"status\":\"completed\"}".into(), Hand::NotRead),
            (r#"{"tool":"bash","input":{"command":"ls"},"status":"completed","x":01}"#.into(), Hand::NotRead),
            (r#"{"tool":"bash","input":{"command":"ls"},"status":"completed","x":1.}"#.into(), Hand::NotRead),
            (r#"{"tool":"bash","input":{"command":"ls"},"status":"completed","x":"\q"}"#.into(), Hand::NotRead),
            (r#"{"tool":"bash","input":{"command":"ls"},"status":"completed","x":tru}"#.into(), Hand::NotRead),
            (r#"{"tool":"bash","input":{"command":"ls"},"status":"completed","time":{"start":9223372036854775808}}"#.into(), Hand::NotRead),
            (r#"{"tool":"read","input":{},"status":"completed","output_hash":"a\u0062"}"#.into(), Hand::NotRead),
            (r#"{"tool":"read","input":{},"status":"completed","time":[1]}"#.into(), Hand::NotRead),
            (r#"{"tool":"read","input":{},"status":"completed""#.into(), Hand::NotRead),
            (r#"["read",{},"completed"]"#.into(), Hand::NotRead),
        ];
        for (call, want) in cases {
            let text = session(&call);
            assert_eq!(check(&text), want, "{text}");
        }
    }

    /// The keys of a session: read by hand in the usual order, left to serde otherwise.
    #[test]
    fn session_keys_read_by_hand_or_left_to_serde() {
        let calls = r#"[{"tool":"read","input":{"filePath":"a.rs"},"status":"completed"}]"#;
        for (text, want) in [
            (
                format!(
                    r#"{{"id":"s","parent_id":null,"title":"t","agent":"a","directory":"/p","label":"must_flag","labels":{{"precise":"must_not_flag"}},"note":"n","loop_start":0,"line_counts":{{"/p/a.rs":3,"/p/a.rs":4}},"x":[1],"calls":{calls},"y":{{"id":1}}}}"#
                ),
                Hand::Reads,
            ),
            (
                format!(r#"{{"id":"s\u00e9","line_counts":null,"calls":{calls}}}"#),
                Hand::Reads,
            ),
            (
                format!(r#" {{ "id" : "s" , "calls" : {calls} }} "#),
                Hand::Reads,
            ),
            (
                format!(r#"{{"id":"s","calls":{calls},"title":"t"}}"#),
                Hand::NotRead,
            ),
            (
                format!(r#"{{"id":"s","calls":{calls},"calls":[]}}"#),
                Hand::NotRead,
            ),
            (format!(r#"{{"id":"s","calls":{calls}}},"#), Hand::NotRead),
            (format!(r#"{{"calls":{calls},"id":"s"}}"#), Hand::Untouched),
            (
                format!(r#"{{"id":"s","id":"s","calls":{calls}}}"#),
                Hand::Untouched,
            ),
            (format!(r#"{{"id":"","calls":{calls}}}"#), Hand::Untouched),
            (
                format!(r#"{{"id":"s","labels":{{"x":"must_flag"}},"calls":{calls}}}"#),
                Hand::Untouched,
            ),
            (
                format!(r#"{{"id":"s","label":"maybe","calls":{calls}}}"#),
                Hand::Untouched,
            ),
            (
                format!(r#"{{"id":"s","line_counts":{{"a":1.5}},"calls":{calls}}}"#),
                Hand::Untouched,
            ),
            (format!(r#"{{"id":7,"calls":{calls}}}"#), Hand::Untouched),
            (r#"{"id":"s","calls":null}"#.to_owned(), Hand::Untouched),
            (r#"{"id":"s"}"#.to_owned(), Hand::Untouched),
        ] {
            assert_eq!(check(&text), want, "{text}");
        }
    }

    /// Every session of the committed fixtures is read by hand, as serde reads it.
    #[test]
    fn the_fixtures_are_read_by_hand() {
        for file in [
            include_str!("../../fixtures/sample.json"),
            include_str!("../../fixtures/dev/real.json"),
            include_str!("../../fixtures/opencode/export_fixture_child.json"),
        ] {
            let mut texts = Vec::new();
            let _ = scan_session_texts(file.as_bytes(), &[], &mut |t: SessionText| {
                texts.push(t.text)
            });
            for text in texts {
                assert_eq!(
                    check(&text),
                    Hand::Reads,
                    "{}",
                    &text[..text.len().min(200)]
                );
            }
        }
    }

    #[test]
    fn eight_digits_read_as_digits_do() {
        let scalar = |b: &[u8]| {
            b.iter().try_fold(0u64, |n, &d| {
                d.is_ascii_digit().then(|| n * 10 + u64::from(d - b'0'))
            })
        };
        let mut texts: Vec<Vec<u8>> = [
            "00000000", "12345678", "99999999", "17960000", "00000001", "10000000",
        ]
        .iter()
        .map(|t| t.as_bytes().to_vec())
        .collect();
        // A byte that is not a digit at every place, just below and above the digits.
        for at in 0..8 {
            for b in [b'/', b':', b'.', b'e', b'-', b'"', 0x00, 0x3f, 0xb0, 0xff] {
                let mut text = b"12345678".to_vec();
                text[at] = b;
                texts.push(text);
            }
        }
        for text in &texts {
            assert_eq!(eight_digits(text), scalar(text), "{text:?}");
        }
    }

    proptest! {
        #[test]
        fn eight_digits_read_any_eight_bytes(bytes in proptest::collection::vec(any::<u8>(), 8)) {
            let scalar = bytes.iter().try_fold(0u64, |n, &d| d.is_ascii_digit().then(|| n * 10 + u64::from(d - b'0')));
            prop_assert_eq!(eight_digits(&bytes), scalar);
        }

        #[test]
        fn eight_digits_read_any_number(n in 0u64..100_000_000) {
            let text = format!("{n:08}");
            prop_assert_eq!(eight_digits(text.as_bytes()), Some(n));
        }

        /// Any edit of a session's text is read by hand as serde reads it, or not at all.
        #[test]
        fn edited_sessions_read_as_serde_does_or_not_at_all(
            edits in proptest::collection::vec((any::<prop::sample::Index>(), 0usize..4, any::<char>()), 1..4),
        ) {
            let mut text = String::from(concat!(
                r#"{"id":"s","directory":"/p","line_counts":{"/p/a.rs":12},"calls":["#,
                r#"{"tool":"bash","input":{"command":"cd /p && cargo test 2>&1 | tail -5","timeout":60},"status":"completed","metadata":{"exit":1,"diff":"x"},"time":{"start":1,"end":2},"output_hash":"ab"},"#,
                r#"{"tool":"read","input":{"filePath":"a.rs","offset":10,"limit":5},"status":"completed","metadata":{"total_lines":12},"time":{"start":3,"end":4}},"#,
                r#"{"tool":"edit","input":{"filePath":"/p/a.rs","oldString":"a\n","newString":"b\"\\"},"status":"error","metadata":{"filediff":{"additions":1,"deletions":0},"files":[{"additions":0}]}}"#,
                "]}"
            ));
            for (at, how, ch) in edits {
                let at = at.index(text.len() + 1);
                let at = (0..=at).rev().find(|&i| text.is_char_boundary(i)).unwrap_or(0);
                let end = text[at..].chars().next().map_or(at, |c| at + c.len_utf8());
                match how {
                    0 => text.insert(at, ch),
                    1 => text.replace_range(at..end, ""),
                    2 => text.replace_range(at..end, ch.encode_utf8(&mut [0; 4])),
                    _ => text.insert_str(at, ["\\", "\"", "{", "[", "]", "}", ",", "0", "-", "e"][usize::from(u8::try_from(u32::from(ch) % 10).unwrap_or(0))]),
                }
            }
            check(&text);
        }
    }
}
