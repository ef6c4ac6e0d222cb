//! Incremental reading of one append-only JSON Lines file by byte offset.
//!
//! [`read_new`] hands out the complete lines written since a [`FileCursor`], at most a budget of
//! bytes per call. A partial last line waits for its newline (the offset only moves past the
//! last newline). A file that shrank below the offset, was replaced (another device or inode),
//! or whose bytes just before the offset changed (truncated in place, then grown again) is read
//! again from the start, and the answer says so (`restarted`): the caller then resets what it
//! built from that file. A line longer than the budget is dropped whole and counted, so one
//! giant line can never stall the file or take unbounded memory.

use serde::{Deserialize, Serialize};
use std::fs::File;
use std::io;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::Path;

/// Bytes kept from just before the offset, compared on every read to tell a file rewritten in
/// place from one that only grew.
const CHECK_BYTES: u64 = 32;

/// Where reading one file stands. Serializable, so a restart reads only what is new.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileCursor {
    /// Offset just past the last complete line handed out (or past the bytes of an over-long
    /// line dropped so far).
    pub offset: u64,
    /// Device and inode of the file read: another pair means the file was replaced.
    pub dev: u64,
    pub inode: u64,
    /// The file's size when it was last read.
    pub size: u64,
    /// Up to 32 bytes just before `offset` (the end of the last line read).
    #[serde(default)]
    pub check: Vec<u8>,
    /// Inside a line longer than the budget: its bytes are dropped up to its newline.
    #[serde(default)]
    pub skipping: bool,
}

impl FileCursor {
    /// A cursor that has read nothing yet.
    pub fn is_new(&self) -> bool {
        *self == Self::default()
    }

    /// Whether `meta` (the file's metadata now) shows nothing new since this cursor: the same
    /// file at the size last read. The cheap check of an idle tick: one `stat`, no `open`.
    pub fn is_current(&self, meta: &std::fs::Metadata) -> bool {
        !self.is_new()
            && meta.dev() == self.dev
            && meta.ino() == self.inode
            && meta.len() == self.size
    }
}

/// What one [`read_new`] call found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NewText {
    /// Complete lines, each ending with `\n` (see [`NewText::lines`]).
    pub text: Vec<u8>,
    /// The cursor after these lines: store it, pass it to the next call.
    pub cursor: FileCursor,
    /// The file was read again from its start (it shrank, was replaced, or was rewritten in
    /// place): whatever the caller built from earlier lines of this file must be reset.
    pub restarted: bool,
    /// Lines longer than the budget that were dropped (whose end was reached in this call).
    pub skipped_lines: u64,
    /// The budget ran out before the end of the file: call again for the rest.
    pub more: bool,
}

impl NewText {
    /// The complete lines, without their `\n` (and without a `\r` before it).
    pub fn lines(&self) -> impl Iterator<Item = &[u8]> {
        let text = self.text.strip_suffix(b"\n").unwrap_or(&self.text);
        text.split(|b| *b == b'\n')
            .filter(|_| !self.text.is_empty())
            .map(|line| line.strip_suffix(b"\r").unwrap_or(line))
    }
}

/// Read the complete lines written to `path` since `cursor`, at most `max_bytes` of the file
/// in this call (at least 1). A line longer than `max_bytes` is dropped and counted in
/// [`NewText::skipped_lines`]; pick a budget above the longest line worth reading.
pub fn read_new(path: &Path, cursor: &FileCursor, max_bytes: usize) -> io::Result<NewText> {
    let file = File::open(path)?;
    let meta = file.metadata()?;
    let len = meta.len();
    let mut cursor = cursor.clone();
    let mut restarted = false;
    if !cursor.is_new() {
        let replaced = cursor.dev != meta.dev() || cursor.inode != meta.ino();
        if replaced || len < cursor.offset || !check_holds(&file, &cursor)? {
            cursor = FileCursor::default();
            restarted = true;
        }
    }
    cursor.dev = meta.dev();
    cursor.inode = meta.ino();
    let budget = max_bytes.max(1);
    let want = usize::try_from(len.saturating_sub(cursor.offset))
        .unwrap_or(usize::MAX)
        .min(budget);
    let buf = read_at_most(&file, cursor.offset, want)?;
    let mut new = NewText {
        restarted,
        more: buf.len() == budget,
        ..NewText::default()
    };
    let mut rest: &[u8] = &buf;
    if cursor.skipping {
        match rest.iter().position(|b| *b == b'\n') {
            Some(end) => {
                cursor.offset += end as u64 + 1;
                cursor.skipping = false;
                new.skipped_lines += 1;
                rest = &rest[end + 1..];
            }
            None => {
                cursor.offset += rest.len() as u64;
                rest = &[];
            }
        }
    }
    if let Some(last) = rest.iter().rposition(|b| *b == b'\n') {
        new.text = rest[..=last].to_vec();
        cursor.offset += last as u64 + 1;
    } else if rest.len() >= budget {
        // A line that alone fills the budget: drop it up to its newline, over later calls.
        cursor.offset += rest.len() as u64;
        cursor.skipping = true;
    }
    cursor.size = len;
    cursor.check = bytes_before(&file, cursor.offset)?;
    new.cursor = cursor;
    Ok(new)
}

/// Whether the bytes before the cursor's offset are still the ones it saw.
fn check_holds(file: &File, cursor: &FileCursor) -> io::Result<bool> {
    Ok(cursor.offset == 0 || bytes_before(file, cursor.offset)? == cursor.check)
}

/// Up to [`CHECK_BYTES`] bytes ending at `offset`.
fn bytes_before(file: &File, offset: u64) -> io::Result<Vec<u8>> {
    let start = offset.saturating_sub(CHECK_BYTES);
    read_at_most(file, start, (offset - start) as usize)
}

/// Up to `want` bytes from `offset` (fewer at the end of the file).
fn read_at_most(file: &File, offset: u64, want: usize) -> io::Result<Vec<u8>> {
    let mut buf = vec![0; want];
    let mut filled = 0;
    while filled < want {
        match file.read_at(&mut buf[filled..], offset + filled as u64) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    buf.truncate(filled);
    Ok(buf)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn append(path: &Path, bytes: &[u8]) {
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .unwrap();
        f.write_all(bytes).unwrap();
    }

    fn lines(new: &NewText) -> Vec<String> {
        new.lines()
            .map(|l| String::from_utf8_lossy(l).into_owned())
            .collect()
    }

    #[test]
    fn a_partial_last_line_waits_for_its_newline() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        append(&path, b"{\"a\":1}\n{\"b\":");
        let first = read_new(&path, &FileCursor::default(), 1 << 20).unwrap();
        assert_eq!(lines(&first), ["{\"a\":1}"]);
        assert_eq!(first.cursor.offset, 8);
        assert!(!first.restarted && !first.more);
        let idle = read_new(&path, &first.cursor, 1 << 20).unwrap();
        assert!(idle.text.is_empty());
        assert_eq!(idle.cursor.offset, 8);
        append(&path, b"2}\r\n");
        let second = read_new(&path, &idle.cursor, 1 << 20).unwrap();
        assert_eq!(lines(&second), ["{\"b\":2}"]);
        assert!(!second.restarted);
    }

    #[test]
    fn a_file_that_shrank_is_read_again_from_the_start() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        append(&path, b"one\ntwo\nthree\n");
        let first = read_new(&path, &FileCursor::default(), 1 << 20).unwrap();
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(4)
            .unwrap();
        let again = read_new(&path, &first.cursor, 1 << 20).unwrap();
        assert!(again.restarted);
        assert_eq!(lines(&again), ["one"]);
    }

    #[test]
    fn a_file_rewritten_in_place_past_the_offset_is_read_again() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        append(&path, b"first line\nsecond line\n");
        let first = read_new(&path, &FileCursor::default(), 1 << 20).unwrap();
        // Truncated to drop the last line, then longer lines appended: same inode, larger.
        let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        f.set_len(11).unwrap();
        append(&path, b"a replacement line\nand more\n");
        let again = read_new(&path, &first.cursor, 1 << 20).unwrap();
        assert!(again.restarted);
        assert_eq!(
            lines(&again),
            ["first line", "a replacement line", "and more"]
        );
    }

    #[test]
    fn a_replaced_file_is_read_again_from_the_start() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        append(&path, b"old\n");
        let first = read_new(&path, &FileCursor::default(), 1 << 20).unwrap();
        let tmp = dir.path().join("t.tmp");
        append(&tmp, b"new one\nnew two\n");
        std::fs::rename(&tmp, &path).unwrap();
        let again = read_new(&path, &first.cursor, 1 << 20).unwrap();
        assert!(again.restarted);
        assert_eq!(lines(&again), ["new one", "new two"]);
        assert_ne!(again.cursor.inode, first.cursor.inode);
    }

    #[test]
    fn the_budget_bounds_each_call_and_more_says_to_call_again() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        append(&path, b"aaaa\nbbbb\ncccc\n");
        let mut cursor = FileCursor::default();
        let mut got = Vec::new();
        let mut calls = 0;
        loop {
            let new = read_new(&path, &cursor, 7).unwrap();
            assert!(new.text.len() <= 7);
            got.extend(lines(&new));
            cursor = new.cursor;
            calls += 1;
            if !new.more {
                break;
            }
        }
        assert_eq!(got, ["aaaa", "bbbb", "cccc"]);
        assert!(calls >= 3);
    }

    #[test]
    fn a_line_longer_than_the_budget_is_dropped_and_counted() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        append(&path, b"ok\n");
        append(&path, &[b'x'; 50]);
        let mut cursor = FileCursor::default();
        let mut got = Vec::new();
        let mut skipped = 0;
        for _ in 0..20 {
            let new = read_new(&path, &cursor, 8).unwrap();
            got.extend(lines(&new));
            skipped += new.skipped_lines;
            cursor = new.cursor;
        }
        // Still inside the long line: nothing more, nothing counted yet.
        assert_eq!((got.clone(), skipped), (vec!["ok".to_owned()], 0));
        assert!(cursor.skipping);
        append(&path, b"xx\nafter\n");
        for _ in 0..20 {
            let new = read_new(&path, &cursor, 8).unwrap();
            got.extend(lines(&new));
            skipped += new.skipped_lines;
            cursor = new.cursor;
        }
        assert_eq!(got, ["ok", "after"]);
        assert_eq!(skipped, 1);
    }

    #[test]
    fn a_missing_file_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let err = read_new(&dir.path().join("gone"), &FileCursor::default(), 10).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
    }

    #[test]
    fn is_current_sees_growth_and_replacement() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        append(&path, b"a\n");
        let new = read_new(&path, &FileCursor::default(), 100).unwrap();
        assert!(new.cursor.is_current(&std::fs::metadata(&path).unwrap()));
        append(&path, b"b\n");
        assert!(!new.cursor.is_current(&std::fs::metadata(&path).unwrap()));
        assert!(!FileCursor::default().is_current(&std::fs::metadata(&path).unwrap()));
    }

    #[test]
    fn the_cursor_round_trips_through_json() {
        let cursor = FileCursor {
            offset: 12,
            dev: 3,
            inode: 99,
            size: 40,
            check: b"tail\n".to_vec(),
            skipping: false,
        };
        let json = serde_json::to_string(&cursor).unwrap();
        assert_eq!(serde_json::from_str::<FileCursor>(&json).unwrap(), cursor);
    }
}
