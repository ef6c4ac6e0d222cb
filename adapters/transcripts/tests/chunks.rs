//! The tail and the reader together, on real files: a transcript written in arbitrary pieces
//! and read as it grows gives what reading it whole gives; a file truncated or replaced
//! under the reader is read again from the start.

use agentwatch_transcripts::{ClaudeReader, FileCursor, FileKind, read_new};
use proptest::prelude::*;
use std::io::Write;
use std::path::Path;

/// A real transcript (Claude Code 2.1.328, scrubbed) with a few hand-written quirks after it:
/// corrupt lines, an unknown record, a call answered later, one left without a result.
fn transcript() -> Vec<u8> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/claude/2.1.328/subagent/projects");
    let project = std::fs::read_dir(&dir)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let main = std::fs::read_dir(&project)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .unwrap();
    let mut bytes = std::fs::read(main).unwrap();
    bytes.extend_from_slice(concat!(
        "{\"type\":\"assistant\",\"message\":{\"id\":\"m9\",\"content\":[{\"type\":\"tool_use\",\"id\":\"t9\",\"name\":\"Bash\",\"input\":{\"command\":\"make\"}}]},\"timestamp\":\"2026-12-06T01:00:00Z\"}\n",
        "not json\n",
        "{\"type\":\"from-the-future\",\"x\":[1,2]}\n",
        "{\"type\":\"assistant\",\"message\":{\"id\":\"m10\",\"content\":[{\"type\":\"tool_use\",\"id\":\"t10\",\"name\":\"Read\",\"input\":{\"file_path\":\"a\"}}]}}\n",
        "{\"type\":\"user\",\"message\":{\"content\":[{\"type\":\"tool_result\",\"tool_use_id\":\"t9\",\"content\":\"Exit code 2\",\"is_error\":true}]},\"timestamp\":\"2026-12-06T01:00:03Z\"}\n",
        "\n",
    ).as_bytes());
    bytes
}

fn kind() -> FileKind {
    FileKind::Main {
        session_id: Some("s".into()),
    }
}

/// The reader fed every line at once.
fn whole(bytes: &[u8]) -> ClaudeReader {
    let mut reader = ClaudeReader::new(kind());
    for line in bytes.split(|b| *b == b'\n') {
        reader.push_line(line);
    }
    reader
}

/// Read what is new in `path` into `reader`, resetting it when the tail restarted.
fn catch_up(
    path: &Path,
    cursor: &mut FileCursor,
    reader: &mut ClaudeReader,
    budget: usize,
) -> bool {
    let mut restarted = false;
    loop {
        let new = read_new(path, cursor, budget).unwrap();
        if new.restarted {
            reader.reset();
            restarted = true;
        }
        reader.push_text(&new);
        *cursor = new.cursor;
        if !new.more {
            return restarted;
        }
    }
}

fn longest_line(bytes: &[u8]) -> usize {
    bytes
        .split(|b| *b == b'\n')
        .map(<[u8]>::len)
        .max()
        .unwrap_or(0)
        + 1
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(40))]

    /// Written in pieces cut anywhere (mid-line included), read after each piece with any
    /// budget that fits the longest line: the same calls and the same counters as whole.
    #[test]
    fn feeding_a_file_in_chunks_equals_feeding_it_whole(
        cuts in proptest::collection::vec(0.0f64..1.0, 0..30),
        extra_budget in 0usize..20_000,
        round_trip_at in proptest::option::of(0usize..30),
    ) {
        let bytes = transcript();
        let mut cuts: Vec<usize> = cuts.iter().map(|c| (c * bytes.len() as f64) as usize).collect();
        cuts.push(bytes.len());
        cuts.sort_unstable();
        let budget = longest_line(&bytes) + extra_budget;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        let mut file = std::fs::File::create(&path).unwrap();
        let mut reader = ClaudeReader::new(kind());
        let mut cursor = FileCursor::default();
        let mut calls = Vec::new();
        let mut written = 0;
        for (i, cut) in cuts.into_iter().enumerate() {
            file.write_all(&bytes[written..cut]).unwrap();
            written = cut;
            prop_assert!(!catch_up(&path, &mut cursor, &mut reader, budget));
            calls.extend(reader.take_calls());
            if round_trip_at == Some(i) {
                // A restart of agentwatch: the reader and cursor come back from the store.
                reader = serde_json::from_str(&serde_json::to_string(&reader).unwrap()).unwrap();
                cursor = serde_json::from_str(&serde_json::to_string(&cursor).unwrap()).unwrap();
            }
        }
        let mut expected = whole(&bytes);
        prop_assert_eq!(calls, expected.take_calls());
        prop_assert_eq!(reader.meta(), expected.meta());
        prop_assert_eq!(reader.pending_calls(), 1);
    }
}

#[test]
fn a_truncated_transcript_is_read_again_from_its_start() {
    let bytes = transcript();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.jsonl");
    std::fs::write(&path, &bytes).unwrap();
    let mut reader = ClaudeReader::new(kind());
    let mut cursor = FileCursor::default();
    assert!(!catch_up(&path, &mut cursor, &mut reader, 1 << 20));
    // Claude Code truncates in place to drop lines (2.1.69), then appends.
    let keep = bytes.len() / 2;
    let keep = bytes[..keep].iter().rposition(|b| *b == b'\n').unwrap() + 1;
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(keep as u64)
        .unwrap();
    assert!(
        catch_up(&path, &mut cursor, &mut reader, 1 << 20),
        "a shrink restarts"
    );
    let mut expected = whole(&bytes[..keep]);
    assert_eq!(reader.take_calls(), expected.take_calls());
    assert_eq!(reader.meta(), expected.meta());
}

#[test]
fn a_replaced_transcript_is_read_again_from_its_start() {
    let bytes = transcript();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.jsonl");
    std::fs::write(&path, &bytes[..bytes.len() / 3]).unwrap();
    let mut reader = ClaudeReader::new(kind());
    let mut cursor = FileCursor::default();
    catch_up(&path, &mut cursor, &mut reader, 1 << 20);
    let _ = reader.take_calls();
    // Written again elsewhere and renamed over it (a new inode), longer than before.
    let tmp = dir.path().join("t.new");
    std::fs::write(&tmp, &bytes).unwrap();
    std::fs::rename(&tmp, &path).unwrap();
    assert!(
        catch_up(&path, &mut cursor, &mut reader, 1 << 20),
        "a new inode restarts"
    );
    let mut expected = whole(&bytes);
    assert_eq!(reader.take_calls(), expected.take_calls());
    assert_eq!(reader.meta(), expected.meta());
}

#[test]
fn a_torn_last_line_is_read_once_its_newline_arrives() {
    let bytes = transcript();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.jsonl");
    // Cut inside the last tool_result line: its call waits.
    let last = bytes[..bytes.len() - 2]
        .iter()
        .rposition(|b| *b == b'\n')
        .unwrap()
        + 1;
    let torn = last + 30;
    std::fs::write(&path, &bytes[..torn]).unwrap();
    let mut reader = ClaudeReader::new(kind());
    let mut cursor = FileCursor::default();
    catch_up(&path, &mut cursor, &mut reader, 1 << 20);
    assert_eq!(reader.pending_calls(), 2);
    assert_eq!(
        reader.meta().counters.corrupt_lines,
        1,
        "only `not json`: the torn line waits"
    );
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap();
    file.write_all(&bytes[torn..]).unwrap();
    catch_up(&path, &mut cursor, &mut reader, 1 << 20);
    assert_eq!(reader.pending_calls(), 1);
    let mut expected = whole(&bytes);
    assert_eq!(reader.meta(), expected.meta());
    assert_eq!(reader.take_calls(), expected.take_calls());
}
