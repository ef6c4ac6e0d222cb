//! The fast read of a session file (issue 19): a small JSON-aware byte scanner over large blocks
//! of a reader cuts each element of the `sessions` list out, for whoever parses it.
//!
//! The scanner only knows where values begin and end (strings, escapes, nesting depth) and the
//! punctuation of the top-level object and of the `sessions` list; every value it cuts out is
//! checked by serde_json where it is parsed (a session by the worker that parses it, any other
//! top-level value here). Whatever it does not read as a session file of the usual shape (a
//! syntax error anywhere, a key written with escapes, a document that is not an object, bytes
//! that are not UTF-8) it reports as [`Scanned::Unusual`]: the caller then reads the document
//! again through serde's reader ([`crate::stream_session_texts`]), which says exactly what a
//! reader of the whole document says.
//!
//! The sessions are not copied out of what was read: each block of the file (2 MiB) is checked
//! as UTF-8 once and shared by the sessions cut from it ([`SharedText`]); only a session cut
//! across the end of a block is copied, into the next block. Held at a time: the block being
//! read, and the blocks of sessions not yet parsed.

use crate::document::{ListState, SessionText, SharedText, Streamed, check_format};
use crate::json::string_stop;
use serde_json::{Map, Value};
use std::io::Read;
use std::sync::Arc;

/// How much is read from the reader at a time.
const CHUNK: u64 = 2 << 20;

/// What [`scan_session_texts`] made of a document.
#[derive(Debug)]
pub enum Scanned {
    /// A document of the usual shape, read through: the sessions were handed over, and this is
    /// what [`crate::stream_session_texts`] would have said of it.
    Read(Streamed),
    /// Something the scan does not read: the document must be read again through
    /// [`crate::stream_session_texts`] (whatever was handed over does not count).
    Unusual,
}

/// Not read by the scan (see [`Scanned::Unusual`]).
#[derive(Debug)]
struct Unusual;

/// Why a scan stopped: the reader failed, or the document is unusual.
enum Stop {
    Io(std::io::Error),
    Unusual,
}

impl From<std::io::Error> for Stop {
    fn from(e: std::io::Error) -> Self {
        Stop::Io(e)
    }
}

impl From<Unusual> for Stop {
    fn from(_: Unusual) -> Self {
        Stop::Unusual
    }
}

/// Read a session file from `reader` in large blocks, handing each element of its `sessions`
/// list to `on_text` as soon as the block it ends in is read, as [`crate::stream_session_texts`]
/// does (the same serials and indices, the same [`Streamed`]) but without serde's byte-at-a-time
/// reader.
///
/// The elements handed over are not checked here: whoever parses them must, and a caller must
/// read the document again through [`crate::stream_session_texts`] when the scan says
/// [`Scanned::Unusual`] *or* when any element turns out not to be JSON
/// ([`crate::ParseError::Json`], see [`crate::scanned_cleanly`]). A failing read is the reader's
/// error.
pub fn scan_session_texts(
    reader: impl Read,
    keep: &[&str],
    on_text: &mut dyn FnMut(SessionText),
) -> std::io::Result<Scanned> {
    scan_in_chunks(reader, keep, on_text, CHUNK)
}

/// [`scan_session_texts`] reading `chunk` bytes at a time (small in tests, to cut sessions
/// across blocks).
fn scan_in_chunks(
    reader: impl Read,
    keep: &[&str],
    on_text: &mut dyn FnMut(SessionText),
    chunk: u64,
) -> std::io::Result<Scanned> {
    let mut scanner = Scanner {
        reader,
        chunk,
        buf: Vec::with_capacity(usize::try_from(chunk).unwrap_or(0)),
        pos: 0,
        dropped: 0,
        eof: false,
        cut: Vec::new(),
        on_text,
    };
    match scanner.document(keep) {
        Ok(streamed) => Ok(Scanned::Read(streamed)),
        Err(Stop::Unusual) => Ok(Scanned::Unusual),
        Err(Stop::Io(e)) => Err(e),
    }
}

/// A session cut out of the block being read, not handed over yet: serial, index, and where
/// its text is in the block.
type Cut = (usize, usize, usize, usize);

struct Scanner<'f, R> {
    reader: R,
    /// How much is read at a time ([`CHUNK`]).
    chunk: u64,
    /// The block being read (bytes not yet dropped); `pos` is the next to look at.
    buf: Vec<u8>,
    pos: usize,
    /// How many bytes of the input came before `buf` (where a session's text is in the file).
    dropped: u64,
    eof: bool,
    /// The sessions cut out of `buf`, handed over when it is shared ([`Scanner::hand_over`]).
    cut: Vec<Cut>,
    on_text: &'f mut dyn FnMut(SessionText),
}

/// Where the first `"` or `\\` of `bytes` is, eight bytes at a time: most strings of a session
/// file are a few words long, where a vector search costs more to start than it saves (issue 19:
/// the scan's strings were a seventh of `detect`'s instructions).
fn quote_or_backslash(bytes: &[u8]) -> Option<usize> {
    string_stop(bytes, false)
}

pub(crate) fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\n' | b'\t' | b'\r')
}

impl<R: Read> Scanner<'_, R> {
    /// Read the next chunk, dropping the bytes before `*start` (which becomes 0); false at the
    /// end of the input. The sessions cut so far are handed over first, with the block they
    /// are in; the bytes from `*start` on begin the next block.
    fn refill(&mut self, start: &mut usize) -> Result<bool, Stop> {
        if self.eof {
            return Ok(false);
        }
        if !self.cut.is_empty() {
            self.hand_over(*start)?;
        } else if *start > 0 {
            self.buf.drain(..*start);
        }
        self.dropped += *start as u64;
        self.pos -= *start;
        *start = 0;
        let chunk = self.chunk;
        let read = (&mut self.reader).take(chunk).read_to_end(&mut self.buf)?;
        if read == 0 {
            self.eof = true;
        }
        Ok(read > 0)
    }

    /// Hand over the sessions cut so far, sharing the block up to `end` (checked as UTF-8 once
    /// for all of them); the bytes from `end` on are copied into a new block, and positions
    /// are not moved (the caller does).
    fn hand_over(&mut self, end: usize) -> Result<(), Stop> {
        let room = usize::try_from(self.chunk).unwrap_or(0);
        let mut next = Vec::with_capacity(self.buf.len() - end + room);
        next.extend_from_slice(&self.buf[end..]);
        let mut block = std::mem::replace(&mut self.buf, next);
        block.truncate(end);
        let block = Arc::new(String::from_utf8(block).map_err(|_| Unusual)?);
        for (serial, index, start, end) in self.cut.drain(..) {
            let text = SharedText::new(Arc::clone(&block), start..end).ok_or(Unusual)?;
            (self.on_text)(SessionText {
                serial,
                index,
                offset: Some(self.dropped + start as u64),
                text,
            });
        }
        Ok(())
    }

    /// The next byte, without taking it; `None` at the end of the input.
    fn peek(&mut self) -> Result<Option<u8>, Stop> {
        if self.pos == self.buf.len() {
            let mut start = self.pos;
            if !self.refill(&mut start)? {
                return Ok(None);
            }
        }
        Ok(Some(self.buf[self.pos]))
    }

    /// Skip whitespace; the next byte after it, not taken.
    fn space(&mut self) -> Result<Option<u8>, Stop> {
        loop {
            match self.peek()? {
                Some(b) if is_space(b) => self.pos += 1,
                other => return Ok(other),
            }
        }
    }

    /// Take `want` after whitespace.
    fn expect(&mut self, want: u8) -> Result<(), Stop> {
        if self.space()? == Some(want) {
            self.pos += 1;
            Ok(())
        } else {
            Err(Stop::Unusual)
        }
    }

    fn document(&mut self, keep: &[&str]) -> Result<Streamed, Stop> {
        let mut serial = 0;
        let mut kept = Map::new();
        let mut format = None;
        let mut list = None;
        self.expect(b'{')?;
        if self.space()? == Some(b'}') {
            self.pos += 1;
        } else {
            loop {
                let key = self.key()?;
                self.expect(b':')?;
                self.space()?;
                match key.as_str() {
                    "sessions" if self.peek()? == Some(b'[') => {
                        let first_serial = serial;
                        self.sessions(&mut serial)?;
                        list = Some(ListState::List { first_serial });
                    }
                    "sessions" => {
                        self.value_as::<serde::de::IgnoredAny>()?;
                        list = Some(ListState::NotAList);
                    }
                    "format" => format = Some(self.value_as::<Value>()?),
                    k if keep.contains(&k) => {
                        let value = self.value_as::<Value>()?;
                        kept.insert(key, value);
                    }
                    _ => {
                        self.value_as::<serde::de::IgnoredAny>()?;
                    }
                }
                match self.space()? {
                    Some(b',') => self.pos += 1,
                    Some(b'}') => {
                        self.pos += 1;
                        break;
                    }
                    _ => return Err(Stop::Unusual),
                }
            }
        }
        if self.space()?.is_some() {
            return Err(Stop::Unusual);
        }
        let first_serial = match &list {
            Some(ListState::List { first_serial }) => *first_serial,
            _ => serial,
        };
        let outcome = match (check_format(format.as_ref()), list) {
            (Err(e), _) => Err(e),
            (Ok(()), Some(ListState::List { .. })) => Ok(()),
            (Ok(()), Some(ListState::NotAList) | None) => Err(crate::ParseError::NoSessions),
        };
        Ok(Streamed {
            kept,
            first_serial,
            outcome,
        })
    }

    /// A key after whitespace: a string without escapes (a key with escapes is unusual).
    fn key(&mut self) -> Result<String, Stop> {
        self.expect(b'"')?;
        let mut start = self.pos;
        loop {
            let rest = &self.buf[self.pos..];
            if let Some(at) = quote_or_backslash(rest) {
                if rest[at] == b'\\' {
                    return Err(Stop::Unusual);
                }
                let key = std::str::from_utf8(&self.buf[start..self.pos + at])
                    .map_err(|_| Unusual)?
                    .to_owned();
                // Control characters are refused by JSON: serde says how.
                if key.bytes().any(|b| b < 0x20) {
                    return Err(Stop::Unusual);
                }
                self.pos += at + 1;
                return Ok(key);
            }
            self.pos = self.buf.len();
            if !self.refill(&mut start)? {
                return Err(Stop::Unusual);
            }
        }
    }

    /// The elements of the `sessions` list (the next byte is its `[`), each cut out and handed
    /// over with its block; all of them by the end of the list.
    fn sessions(&mut self, serial: &mut usize) -> Result<(), Stop> {
        self.pos += 1;
        if self.space()? == Some(b']') {
            self.pos += 1;
            return Ok(());
        }
        let mut index = 0;
        loop {
            self.space()?;
            let (start, end) = self.value()?;
            self.cut.push((*serial, index, start, end));
            *serial += 1;
            index += 1;
            match self.space()? {
                Some(b',') => self.pos += 1,
                Some(b']') => {
                    self.pos += 1;
                    let end = self.pos;
                    self.hand_over(end)?;
                    self.dropped += end as u64;
                    self.pos = 0;
                    return Ok(());
                }
                _ => return Err(Stop::Unusual),
            }
        }
    }

    /// The value that starts here, read as `T` by serde_json (which checks it).
    fn value_as<T: serde::de::DeserializeOwned>(&mut self) -> Result<T, Stop> {
        let (start, end) = self.value()?;
        let text = &self.buf[start..end];
        // Not UTF-8: serde's reader says how (its checks differ between readers).
        std::str::from_utf8(text).map_err(|_| Unusual)?;
        serde_json::from_slice(text).map_err(|_| Stop::Unusual)
    }

    /// Cut out the value that starts here (an object, a list, a string, or the bytes of a
    /// scalar up to the next delimiter), unchecked: where it is in the block.
    fn value(&mut self) -> Result<(usize, usize), Stop> {
        let mut start = self.pos;
        let end = match self.peek()? {
            Some(b'{' | b'[') => self.nested(&mut start)?,
            Some(b'"') => {
                self.pos += 1;
                self.string_end(&mut start)?
            }
            Some(b) if b == b'-' || b.is_ascii_alphanumeric() => self.scalar_end(&mut start)?,
            _ => return Err(Stop::Unusual),
        };
        Ok((start, end))
    }

    /// The end of the string whose opening quote was taken.
    fn string_end(&mut self, start: &mut usize) -> Result<usize, Stop> {
        loop {
            let rest = &self.buf[self.pos..];
            match quote_or_backslash(rest) {
                Some(at) if rest[at] == b'"' => {
                    self.pos += at + 1;
                    return Ok(self.pos);
                }
                Some(at) => {
                    // An escape: skip the byte after the backslash.
                    self.pos += at + 1;
                    if self.pos == self.buf.len() && !self.refill(start)? {
                        return Err(Stop::Unusual);
                    }
                    self.pos += 1;
                }
                None => {
                    self.pos = self.buf.len();
                    if !self.refill(start)? {
                        return Err(Stop::Unusual);
                    }
                }
            }
        }
    }

    /// The end of the scalar that starts here: at the next delimiter or the end of the input.
    fn scalar_end(&mut self, start: &mut usize) -> Result<usize, Stop> {
        loop {
            let rest = &self.buf[self.pos..];
            if let Some(at) = rest
                .iter()
                .position(|&b| is_space(b) || matches!(b, b',' | b']' | b'}'))
            {
                self.pos += at;
                return Ok(self.pos);
            }
            self.pos = self.buf.len();
            if !self.refill(start)? {
                return Ok(self.pos);
            }
        }
    }

    /// The end of the object or list that starts here, by depth, skipping strings.
    fn nested(&mut self, start: &mut usize) -> Result<usize, Stop> {
        let mut depth = 0usize;
        loop {
            // A local index over the block (the scanner's own is stored only when it leaves):
            // this loop reads every byte of every session.
            let buf = &self.buf;
            let mut i = self.pos;
            let mut cut_string = false;
            while i < buf.len() {
                let b = buf[i];
                i += 1;
                match b {
                    b'"' => match string_tail(&buf[i..]) {
                        Some(len) => i += len,
                        None => {
                            cut_string = true;
                            break;
                        }
                    },
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            self.pos = i;
                            return Ok(i);
                        }
                    }
                    _ => {}
                }
            }
            self.pos = i;
            if cut_string {
                // A string that goes on past the block: read on to its end.
                self.string_end(start)?;
            } else if !self.refill(start)? {
                return Err(Stop::Unusual);
            }
        }
    }
}

/// How long the rest of a string is, its closing quote included, when it ends in `bytes` (which
/// begin after its opening quote); `None` when it does not, or an escape is cut at the end.
pub(crate) fn string_tail(bytes: &[u8]) -> Option<usize> {
    let mut at = 0;
    loop {
        let found = at + quote_or_backslash(bytes.get(at..)?)?;
        if bytes[found] == b'"' {
            return Some(found + 1);
        }
        // An escape: the byte after the backslash is not looked at.
        at = found + 2;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the scan makes of `doc` read through a reader that returns `step` bytes at a time:
    /// the texts handed over, and the outcome (`None`: unusual).
    fn scan(doc: &str, step: usize) -> (Vec<(usize, usize, String)>, Option<Streamed>) {
        struct Trickle<'a>(&'a [u8], usize);
        impl Read for Trickle<'_> {
            fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
                let n = self.0.len().min(self.1).min(buf.len());
                buf[..n].copy_from_slice(&self.0[..n]);
                self.0 = &self.0[n..];
                Ok(n)
            }
        }
        let mut texts = Vec::new();
        // Read `step` bytes at a time: every session is cut across blocks.
        let chunk = u64::try_from(step).unwrap();
        let scanned = scan_in_chunks(
            Trickle(doc.as_bytes(), step),
            &["info"],
            &mut |t| {
                // Its offset finds its text in the document.
                let at = usize::try_from(t.offset.expect("the scan places each text")).unwrap();
                assert_eq!(&doc[at..at + t.text.len()], &*t.text, "at {at} by {step}");
                texts.push((t.serial, t.index, (*t.text).to_owned()));
            },
            chunk,
        )
        .unwrap();
        match scanned {
            Scanned::Read(streamed) => (texts, Some(streamed)),
            Scanned::Unusual => (texts, None),
        }
    }

    /// What serde's reader makes of `doc`: the texts, and the outcome (`None`: a syntax error).
    fn serde_read(doc: &str) -> (Vec<(usize, usize, String)>, Option<Streamed>) {
        let mut texts = Vec::new();
        let mut de = serde_json::Deserializer::from_str(doc);
        let streamed = crate::document::stream_session_texts(&mut de, &["info"], &mut |t| {
            texts.push((t.serial, t.index, (*t.text).to_owned()));
        });
        (texts, streamed.ok())
    }

    #[test]
    fn string_stops_find_the_first_stop() {
        let mut texts: Vec<Vec<u8>> = vec![Vec::new(), b"\"".to_vec(), b"\\".to_vec()];
        // Every place in words and tails, after bytes one below and one above the two (a borrow
        // or a carry near them), and after non-ASCII bytes.
        for len in 0..20 {
            for at in 0..=len {
                for fill in [b'a', b'!', b'#', b'[', b']', b' ', 0x80, 0xff, 0x21, 0x1f] {
                    for hit in [b'"', b'\\', 0x00, 0x1f, 0x0a] {
                        let mut text = vec![fill; len];
                        if at < len {
                            text[at] = hit;
                            if at + 1 < len {
                                text[at + 1] = b'"';
                            }
                        }
                        texts.push(text);
                    }
                }
            }
        }
        for text in &texts {
            let want = text.iter().position(|&b| b == b'"' || b == b'\\');
            assert_eq!(quote_or_backslash(text), want, "{text:?}");
            let want = text
                .iter()
                .position(|&b| b == b'"' || b == b'\\' || b < 0x20);
            assert_eq!(string_stop(text, true), want, "{text:?}");
        }
    }

    #[test]
    fn the_scan_cuts_each_session_as_serde_does() {
        let f = r#""format":"agentwatch-sessions/1""#;
        let docs = [
            format!(r#"{{{f},"sessions":[]}}"#),
            format!(r#"{{{f},"sessions":[ ]}}"#),
            format!(
                " \n\t{{ {f} ,\r\n \"sessions\" : [ {{\"id\":\"a\"}} , {{\"id\":\"b\"}} ] }}\n "
            ),
            // Strings holding quotes, backslashes and brackets.
            format!(
                r#"{{{f},"sessions":[{{"id":"a\"]}}[{{","calls":[{{"tool":"x\\","input":{{"c":"\\\"}}"}}}}]}},{{"id":"b"}}]}}"#
            ),
            // Nested lists and objects, scalars as elements (they fail where they are parsed).
            format!(r#"{{{f},"sessions":[[[1,[2]],{{"a":[{{}}]}}],7,-1.5e3,true,null,"s"]}}"#),
            // Keys around the list, kept, skipped, repeated.
            format!(
                r#"{{"x":{{"y":[1,"]"]}},"sessions":[{{"id":"a"}}],"info":{{"k":1}},{f},"sessions":[{{"id":"b"}}]}}"#
            ),
            format!(r#"{{{f},"sessions":{{"id":"a"}}}}"#),
            format!(r#"{{{f},"sessions":null}}"#),
            r#"{"sessions":[]}"#.to_owned(),
            r#"{"format":7,"sessions":[]}"#.to_owned(),
            r#"{}"#.to_owned(),
            format!(r#"{{{f},"sessions":["é\u00e9 ☃"]}}"#),
        ];
        for doc in &docs {
            let want = serde_read(doc);
            assert!(want.1.is_some(), "{doc}");
            for step in [1, 2, 3, 7, 1 << 20] {
                assert_eq!(scan(doc, step), want, "{doc} by {step}");
            }
        }
    }

    #[test]
    fn what_the_scan_does_not_read_is_unusual() {
        let f = r#""format":"agentwatch-sessions/1""#;
        for doc in [
            // Truncated anywhere.
            String::new(),
            "{".to_owned(),
            format!(r#"{{{f},"sessions":[{{"id":"a"}}"#),
            format!(r#"{{{f},"sessions":[{{"id":"a"#),
            format!(r#"{{{f},"sessions":[{{"id":"a\"#),
            format!(r#"{{{f},"sessions":[{{"id":"a"}}]"#),
            format!(r#"{{{f},"sess"#),
            // Garbage after the list or the document.
            format!(r#"{{{f},"sessions":[{{"id":"a"}}] x}}"#),
            format!(r#"{{{f},"sessions":[{{"id":"a"}}]}} x"#),
            format!(r#"{{{f},"sessions":[{{"id":"a"}}]}}}}"#),
            format!(r#"{{{f},"sessions":[{{"id":"a"}} {{"id":"b"}}]}}"#),
            format!(r#"{{{f},"sessions":[{{"id":"a"}},]}}"#),
            format!(r#"{{{f},"sessions":[,{{"id":"a"}}]}}"#),
            format!(r#"{{{f},,"sessions":[]}}"#),
            format!(r#"{{{f},"sessions":[]"x":1}}"#),
            format!(r#"{{{f} "sessions":[]}}"#),
            format!(r#"{{{f},"sessions" []}}"#),
            // A value that is not JSON outside the list.
            format!(r#"{{{f},"x":tru,"sessions":[]}}"#),
            format!(r#"{{{f},"x":[1 2],"sessions":[]}}"#),
            r#"{"format":"agentwatch-sessions/1" 7,"sessions":[]}"#.to_owned(),
            // Not an object, an escaped key: read by serde's reader.
            "[]".to_owned(),
            r#""text""#.to_owned(),
            format!(r#"{{{f},"sess\u0069ons":[]}}"#),
        ] {
            for step in [1, 5, 1 << 20] {
                assert!(scan(&doc, step).1.is_none(), "{doc} by {step}");
            }
        }
    }

    /// An element that is not JSON is cut out as it is: its parser finds out.
    #[test]
    fn an_element_is_cut_unchecked() {
        let doc = r#"{"format":"agentwatch-sessions/1","sessions":[{"id":"a",,}, tru ,{[}]]}"#;
        let (texts, outcome) = scan(doc, 4);
        assert!(outcome.is_some());
        let texts: Vec<_> = texts.into_iter().map(|t| t.2).collect();
        assert_eq!(texts, [r#"{"id":"a",,}"#, "tru", "{[}]"]);
    }
}
