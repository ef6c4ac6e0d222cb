//! Codex CLI's rollouts under `$CODEX_HOME`.

use super::{Discovery, TranscriptKind, entries, is_dir, push_file, read_head};
use crate::codex::{CodexMeta, CodexReader};
use std::io;
use std::path::Path;

/// How deep under `sessions/` rollouts are looked for (`YYYY/MM/DD/`).
const SESSIONS_DEPTH: usize = 3;
/// Bytes of a rollout read at most to find its first `session_meta` (its line carries the
/// base instructions: tens of kilobytes).
const HEAD_BYTES: u64 = 1 << 20;

/// The thread id a rollout's file name ends with: `rollout-2026-12-06T02-00-45-<uuid>.jsonl`
/// (or `.jsonl.zst`, or `rollout-<uuid>.jsonl`); `None` when the name does not end with a
/// uuid. Takes a path or a name.
pub fn codex_thread_id(file_name: &str) -> Option<String> {
    let name = file_name.rsplit('/').next().unwrap_or(file_name);
    let name = name.strip_suffix(".zst").unwrap_or(name);
    let stem = name.strip_suffix(".jsonl")?.strip_prefix("rollout-")?;
    let id = stem.get(stem.len().checked_sub(36)?..)?;
    is_uuid(id).then(|| id.to_ascii_lowercase())
}

fn is_uuid(id: &str) -> bool {
    id.len() == 36
        && id.bytes().enumerate().all(|(i, b)| match i {
            8 | 13 | 18 | 23 => b == b'-',
            _ => b.is_ascii_hexdigit(),
        })
}

/// List the rollouts under a Codex home: `sessions/` (to `YYYY/MM/DD/`) and
/// `archived_sessions/`. A missing home or directory has none; an unreadable one is a
/// [`Discovery::problems`] entry.
pub fn discover_codex(codex_home: &Path) -> io::Result<Discovery> {
    let mut found = Discovery::default();
    walk(
        &codex_home.join("sessions"),
        SESSIONS_DEPTH,
        false,
        &mut found,
    );
    walk(&codex_home.join("archived_sessions"), 0, true, &mut found);
    Ok(found.sorted())
}

/// The rollouts under a directory given by hand inside a Codex home (`sessions/`, a date
/// directory, `archived_sessions/`).
pub(super) fn discover_rollouts_in(dir: &Path, found: &mut Discovery) {
    let archived = dir.file_name().is_some_and(|n| n == "archived_sessions");
    walk(dir, SESSIONS_DEPTH, archived, found);
}

fn walk(dir: &Path, depth: usize, archived: bool, found: &mut Discovery) {
    for entry in entries(dir, found).unwrap_or_default() {
        let path = entry.path();
        if is_dir(&entry) {
            if depth > 0 {
                walk(&path, depth - 1, archived, found);
            }
            continue;
        }
        let name = entry.file_name().to_string_lossy().into_owned();
        let compressed = name.ends_with(".jsonl.zst");
        if !name.starts_with("rollout-") || !(name.ends_with(".jsonl") || compressed) {
            continue;
        }
        let kind = TranscriptKind::CodexRollout {
            thread_id: codex_thread_id(&name),
            archived,
            compressed,
        };
        push_file(path, kind, found);
    }
}

/// What a rollout's first lines say of its thread (the id, a subagent's parent, the
/// directory, the source): read from its first megabyte at most, decompressed when `.zst`.
/// A file's head never changes, so a caller can keep the answer for the file.
pub fn peek_codex(path: &Path) -> io::Result<CodexMeta> {
    let head = read_head(path, HEAD_BYTES)?;
    let mut reader = CodexReader::new(codex_thread_id(&path.to_string_lossy()));
    for line in head.split(|b| *b == b'\n') {
        reader.push_line(line);
        if reader.meta().source.is_some() || reader.meta().parent_thread_id.is_some() {
            break;
        }
    }
    Ok(reader.meta().clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::discover::tests::touch;

    const ID: &str = "01a24915-0aec-7243-9c78-3e5787bc986f";

    #[test]
    fn thread_ids_come_from_file_names() {
        for (name, want) in [
            (format!("rollout-2026-12-06T02-00-45-{ID}.jsonl"), Some(ID)),
            (
                format!("/x/rollout-2026-12-06T02-00-45-{ID}.jsonl.zst"),
                Some(ID),
            ),
            (format!("rollout-{}.jsonl", ID.to_uppercase()), Some(ID)),
            ("rollout-2026-12-06T02-00-45.jsonl".to_owned(), None),
            (format!("{ID}.jsonl"), None),
            (format!("rollout-{ID}.json"), None),
        ] {
            assert_eq!(codex_thread_id(&name).as_deref(), want, "{name}");
        }
    }

    #[test]
    fn every_layout_is_found_and_the_parent_is_peeked() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path();
        let child = "01a24916-1320-7b70-a57b-5e3017125817";
        touch(
            &home.join(format!(
                "sessions/2026/12/06/rollout-2026-12-06T02-00-45-{ID}.jsonl"
            )),
            &format!(
                "{{\"timestamp\":\"t\",\"type\":\"session_meta\",\"payload\":{{\"id\":\"{ID}\",\"source\":\"exec\",\"cwd\":\"/p\"}}}}\n"
            ),
        );
        touch(
            &home.join(format!(
                "sessions/2026/12/06/rollout-2026-12-06T02-01-53-{child}.jsonl"
            )),
            &format!(
                "{{\"timestamp\":\"t\",\"type\":\"session_meta\",\"payload\":{{\"id\":\"{child}\",\"source\":{{\"subagent\":{{\"thread_spawn\":{{\"parent_thread_id\":\"{ID}\",\"depth\":1}}}}}}}}}}\n"
            ),
        );
        touch(
            &home.join("sessions/rollout-44444444-4444-4444-8444-444444444444.jsonl"),
            "{}\n",
        );
        touch(
            &home.join("archived_sessions/rollout-55555555-5555-4555-8555-555555555555.jsonl.zst"),
            "",
        );
        touch(&home.join("sessions/2026/12/06/notes.txt"), "");
        touch(&home.join("history.jsonl"), "{}\n");
        let found = discover_codex(home).unwrap();
        assert!(found.problems.is_empty(), "{:?}", found.problems);
        let kinds: Vec<(Option<String>, bool, bool)> = found
            .transcripts
            .iter()
            .map(|t| match &t.kind {
                TranscriptKind::CodexRollout {
                    thread_id,
                    archived,
                    compressed,
                } => (thread_id.clone(), *archived, *compressed),
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(
            kinds,
            [
                (
                    Some("55555555-5555-4555-8555-555555555555".into()),
                    true,
                    true
                ),
                (Some(ID.into()), false, false),
                (Some(child.into()), false, false),
                (
                    Some("44444444-4444-4444-8444-444444444444".into()),
                    false,
                    false
                ),
            ]
        );
        assert!(found.transcripts[0].read_whole());
        assert_eq!(found.transcripts[2].session_id().as_deref(), Some(child));
        let head = peek_codex(&found.transcripts[2].path).unwrap();
        assert_eq!(head.thread_id.as_deref(), Some(child));
        assert_eq!(head.parent_thread_id.as_deref(), Some(ID));
        let main = peek_codex(&found.transcripts[1].path).unwrap();
        assert_eq!(
            (main.parent_thread_id, main.cwd.as_deref()),
            (None, Some("/p"))
        );
        assert!(
            discover_codex(&home.join("nope"))
                .unwrap()
                .transcripts
                .is_empty()
        );
    }
}
