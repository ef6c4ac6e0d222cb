//! Byte tests on the real sessions Gemini CLI 0.61.0 wrote in `tests/real_gemini.rs` (kept,
//! scrubbed, under `fixtures/gemini/0.61.0/`): found by discover, every call read (as
//! counted without the reader), the loop flagged within 15 calls of its start, the healthy
//! session not, Gemini's own verdict kept; tailed in any pieces with history edits
//! appended, the calls handed out follow the reader's contract. Plus hand-written files of
//! the older whole-file `.json` and of `$rewindTo` / `$set.messages`.

mod common;

use agentwatch_transcripts::{
    FileCursor, GeminiFile, GeminiReader, Transcript, TranscriptKind, discover_gemini,
    read_gemini_sessions,
};
use detect_core::{CallStatus, DetectConfig, Profile, Session};
use proptest::prelude::*;
use serde_json::json;
use std::io::Write;
use std::path::PathBuf;

fn scenario(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/gemini/0.61.0")
        .join(name)
}

/// Every session of a scenario: discovered, read whole, every call read.
fn read_scenario(name: &str) -> Vec<(Transcript, Session, GeminiReader)> {
    let found = discover_gemini(&scenario(name)).unwrap();
    assert!(found.problems.is_empty(), "{:?}", found.problems);
    assert!(!found.transcripts.is_empty(), "fixtures of {name}");
    found
        .transcripts
        .into_iter()
        .map(|t| {
            let bytes = std::fs::read(&t.path).unwrap();
            let mut sessions = read_gemini_sessions(&bytes, &t.path.to_string_lossy()).unwrap();
            let session = sessions.remove(0);
            let calls = common::gemini_calls(&bytes);
            assert_eq!(
                session.calls.len(),
                calls.len(),
                "{}: every call read",
                t.path.display()
            );
            let mut reader = GeminiReader::new(t.gemini_file());
            for line in bytes.split(|b| *b == b'\n') {
                reader.push_line(line);
            }
            assert_eq!(reader.take_calls(), session.calls);
            (t, session, reader)
        })
        .collect()
}

#[test]
fn the_real_loop_reads_its_48_calls_and_is_flagged_within_15_calls_of_its_start() {
    let read = read_scenario("loop");
    let (_, session, reader) = &read[0];
    assert_eq!(session.calls.len(), 48);
    let checks = &session.calls[28..];
    assert!(
        checks
            .iter()
            .all(|c| c.status == CallStatus::Completed && c.metadata == json!({"exit": 1}))
    );
    assert!(
        checks
            .iter()
            .all(|c| c.output_hash == checks[0].output_hash)
    );
    let meta = reader.meta();
    assert_eq!(meta.cwd.as_deref(), Some("/home/user/work/project"));
    assert_eq!(meta.title.as_deref(), Some("AW-LOOP: make the check pass"));
    assert_eq!(
        session.directory.as_deref(),
        Some("/home/user/work/project")
    );
    let first = common::first_flag_at(session).unwrap();
    assert!((29..=28 + 15).contains(&first), "flagged at call {first}");
    assert_eq!(
        common::flagged(std::slice::from_ref(session), &DetectConfig::default()),
        vec![session.id.clone()]
    );
}

#[test]
fn the_real_healthy_session_lands_its_edits_and_is_not_flagged() {
    let read = read_scenario("healthy");
    let (_, session, reader) = &read[0];
    assert_eq!(session.calls.len(), 43);
    let landed = session
        .calls
        .iter()
        .filter(|c| c.tool == "edit" && c.metadata["diff"].is_string())
        .count();
    assert_eq!(landed, 12);
    assert_eq!(reader.meta().agent_loop_verdict, None);
    assert!(common::flagged(std::slice::from_ref(session), &DetectConfig::default()).is_empty());
    assert_eq!(common::first_flag_at(session), None);
}

#[test]
fn geminis_own_verdict_is_read_from_the_real_session() {
    let read = read_scenario("verdict");
    let (_, session, reader) = &read[0];
    let verdict = reader.meta().agent_loop_verdict.as_ref().unwrap();
    assert!(
        verdict
            .text
            .starts_with("Potential loop detected. Details: Repeated tool call: read_file")
    );
    assert_eq!(verdict.calls_before, session.calls.len());
    assert_eq!(
        reader.generation(),
        0,
        "the checkpoint that drops it keeps the calls"
    );
}

#[test]
fn the_real_subagent_is_found_under_its_parent() {
    let read = read_scenario("subagent");
    let main = read
        .iter()
        .find(|(t, _, _)| matches!(t.kind, TranscriptKind::GeminiSession { .. }))
        .unwrap();
    let sub = read
        .iter()
        .find(|(t, _, _)| matches!(t.kind, TranscriptKind::GeminiSubagent { .. }))
        .unwrap();
    assert_eq!(sub.1.parent_id.as_ref(), Some(&main.1.id));
    assert_eq!(main.1.calls[1].metadata["agentId"], json!(sub.1.id));
    assert_eq!(sub.1.calls.len(), 19);
    let precise = DetectConfig::with_profile(Profile::Precise);
    assert_eq!(
        common::flagged(&[main.1.clone(), sub.1.clone()], &precise),
        vec![main.1.id.clone()]
    );
}

/// The real loop's session with hand-written history edits after it: a rewind to its 40th
/// message, more calls, a checkpoint that keeps only the first messages, a corrupt line.
fn edited_session() -> Vec<u8> {
    let found = discover_gemini(&scenario("loop")).unwrap();
    let mut bytes = std::fs::read(&found.transcripts[0].path).unwrap();
    let text = String::from_utf8_lossy(&bytes).into_owned();
    let ids: Vec<String> = text
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|v| v["id"].as_str().map(str::to_owned))
        .collect();
    let first_ids: Vec<serde_json::Value> = text
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["id"].is_string())
        .take(12)
        .collect();
    let mut extra = format!("{}\n", json!({"$rewindTo": ids[40]}));
    extra.push_str(&format!("{}\n", json!({"id": "hand-1", "timestamp": "2026-12-06T03:00:00Z", "type": "gemini", "content": "",
        "toolCalls": [{"id": "hc1", "name": "glob", "args": {"pattern": "*.md"}, "status": "success",
                       "result": [{"functionResponse": {"id": "hc1", "name": "glob", "response": {"output": "none"}}}]}]})));
    extra.push_str("not json\n");
    extra.push_str(&format!("{}\n", json!({"$set": {"messages": first_ids}})));
    bytes.extend_from_slice(extra.as_bytes());
    bytes
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// Written in pieces cut anywhere, taken after each piece, the reader saved and restored
    /// once: the calls a detector holds by the contract are the final history's.
    #[test]
    fn a_session_tailed_in_chunks_follows_its_edits(
        cuts in proptest::collection::vec(0.0f64..1.0, 0..25),
        extra_budget in 0usize..20_000,
        round_trip_at in proptest::option::of(0usize..25),
    ) {
        let bytes = edited_session();
        let mut cuts: Vec<usize> = cuts.iter().map(|c| (c * bytes.len() as f64) as usize).collect();
        cuts.push(bytes.len());
        cuts.sort_unstable();
        let budget = bytes.split(|b| *b == b'\n').map(<[u8]>::len).max().unwrap_or(0) + 1 + extra_budget;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("session.jsonl");
        let mut file = std::fs::File::create(&path).unwrap();
        let mut reader = GeminiReader::new(GeminiFile::default());
        let mut cursor = FileCursor::default();
        let mut seen = Vec::new();
        let mut written = 0;
        for (i, cut) in cuts.into_iter().enumerate() {
            file.write_all(&bytes[written..cut]).unwrap();
            written = cut;
            common::catch_up(&path, &mut cursor, &mut reader, budget);
            common::Tailed::take_into(&mut reader, &mut seen);
            if round_trip_at == Some(i) {
                reader = serde_json::from_str(&serde_json::to_string(&reader).unwrap()).unwrap();
            }
        }
        let whole = read_gemini_sessions(&bytes, "session.jsonl").unwrap();
        prop_assert_eq!(&seen, &whole[0].calls);
        prop_assert!(whole[0].calls.len() < 20, "the checkpoint keeps the first messages");
    }
}

#[test]
fn a_session_rewritten_under_the_tail_hands_its_history_again() {
    let bytes = edited_session();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("session.jsonl");
    let half = bytes[..bytes.len() / 2]
        .iter()
        .rposition(|b| *b == b'\n')
        .unwrap()
        + 1;
    std::fs::write(&path, &bytes[..half]).unwrap();
    let mut reader = GeminiReader::new(GeminiFile::default());
    let mut cursor = FileCursor::default();
    let mut seen = Vec::new();
    common::catch_up(&path, &mut cursor, &mut reader, 1 << 20);
    common::Tailed::take_into(&mut reader, &mut seen);
    assert!(!seen.is_empty());
    // Gemini's recovery path: the file rewritten whole and renamed over (a new inode).
    let tmp = dir.path().join("session.tmp");
    std::fs::write(&tmp, &bytes).unwrap();
    std::fs::rename(&tmp, &path).unwrap();
    common::catch_up(&path, &mut cursor, &mut reader, 1 << 20);
    common::Tailed::take_into(&mut reader, &mut seen);
    assert!(reader.rewound(), "a restarted file hands the whole history");
    assert_eq!(
        seen,
        read_gemini_sessions(&bytes, "s.jsonl").unwrap()[0].calls
    );
}

/// A hand-written session of the older whole-file layout (0.4 to 0.38): one pretty-printed
/// object rewritten on every update, replaced by rename.
fn legacy_json(with_second_turn: bool) -> String {
    let mut messages = vec![
        json!({"id": "u1", "timestamp": "2025-09-01T10:00:00.000Z", "type": "user", "content": "make the tests pass"}),
        json!({"id": "g1", "timestamp": "2025-09-01T10:00:05.000Z", "type": "gemini", "content": "", "model": "gemini-2.5-pro",
            "toolCalls": [{"id": "run_shell_command-1", "name": "run_shell_command", "args": {"command": "npm test"},
                "status": "success", "timestamp": "2025-09-01T10:00:09.000Z",
                "result": [{"functionResponse": {"id": "run_shell_command-1", "name": "run_shell_command",
                    "response": {"output": "Command: npm test\nDirectory: (root)\nStdout: 1 failing\nStderr: (empty)\nError: (none)\nExit Code: 1\nSignal: (none)\nBackground PIDs: (none)\nProcess Group PGID: 4242"}}}],
                "resultDisplay": "1 failing"}]}),
    ];
    if with_second_turn {
        messages.push(json!({"id": "g2", "timestamp": "2025-09-01T10:01:00.000Z", "type": "gemini", "content": "",
            "toolCalls": [{"id": "replace-2", "name": "replace", "args": {"file_path": "/w/app/src/a.js", "old_string": "1", "new_string": "2"},
                "status": "success", "timestamp": "2025-09-01T10:01:02.000Z",
                "result": [{"functionResponse": {"id": "replace-2", "name": "replace", "response": {"output": "Successfully modified file"}}}],
                "resultDisplay": {"fileDiff": "@@ -1 +1 @@\n-1\n+2\n", "fileName": "a.js", "originalContent": "1", "newContent": "2"}}]}));
    }
    serde_json::to_string_pretty(&json!({"sessionId": "0f6e7e33-aaaa-4bbb-8ccc-123456789abc",
        "projectHash": "5d41402abc4b2a76b9719d911017c592", "startTime": "2025-09-01T10:00:00.000Z",
        "lastUpdated": "2025-09-01T10:01:02.000Z", "messages": messages}))
    .unwrap()
}

#[test]
fn a_hand_written_whole_file_session_is_found_and_read_whole_when_it_changes() {
    let dir = tempfile::tempdir().unwrap();
    let chats = dir
        .path()
        .join("tmp/5d41402abc4b2a76b9719d911017c592/chats");
    std::fs::create_dir_all(&chats).unwrap();
    std::fs::write(
        dir.path().join("projects.json"),
        r#"{"projects":{"/w/app":"5d41402abc4b2a76b9719d911017c592"}}"#,
    )
    .unwrap();
    let path = chats.join("session-2025-09-01T10-00-0f6e7e33.json");
    std::fs::write(&path, legacy_json(false)).unwrap();
    let found = discover_gemini(dir.path()).unwrap();
    let t = &found.transcripts[0];
    assert!(t.read_whole());
    assert_eq!(t.project_root(), Some("/w/app"));
    let mut reader = GeminiReader::new(t.gemini_file());
    reader.push_document(&std::fs::read(&path).unwrap());
    let mut seen = Vec::new();
    common::Tailed::take_into(&mut reader, &mut seen);
    assert_eq!(
        seen.len(),
        common::gemini_calls(legacy_json(false).as_bytes()).len()
    );
    assert_eq!(
        (seen[0].tool.as_str(), &seen[0].metadata),
        ("bash", &json!({"exit": 1}))
    );
    // Rewritten and renamed over: read whole again, only the new call is new.
    let tmp = chats.join("session.tmp");
    std::fs::write(&tmp, legacy_json(true)).unwrap();
    std::fs::rename(&tmp, &path).unwrap();
    reader.push_document(&std::fs::read(&path).unwrap());
    common::Tailed::take_into(&mut reader, &mut seen);
    assert!(!reader.rewound());
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[1].metadata["diff"], "@@ -1 +1 @@\n-1\n+2\n");
    let meta = reader.meta();
    assert_eq!(
        meta.session_id.as_deref(),
        Some("0f6e7e33-aaaa-4bbb-8ccc-123456789abc")
    );
    assert_eq!(meta.cwd.as_deref(), Some("/w/app"));
    assert_eq!(meta.title.as_deref(), Some("make the tests pass"));
    let sessions =
        read_gemini_sessions(legacy_json(true).as_bytes(), &path.to_string_lossy()).unwrap();
    assert_eq!(sessions[0].calls, seen);
}

/// A hand-written `.jsonl` with every history edit: a message re-appended as its call runs
/// and finishes, a `$rewindTo`, a `$set.messages` checkpoint, a `$set` of metadata.
const EDITED: &str = r#"{"sessionId":"5475a6ad-a357-4c89-bcbc-add24189d9cb","projectHash":"9a64","startTime":"2026-05-01T09:00:00.000Z","lastUpdated":"2026-05-01T09:00:00.000Z","kind":"main","directories":["/w/svc"]}
{"id":"u1","timestamp":"2026-05-01T09:00:01.000Z","type":"user","content":[{"text":"fix the flaky test"}]}
{"id":"m1","timestamp":"2026-05-01T09:00:02.000Z","type":"gemini","content":"","model":"gemini-3-pro"}
{"id":"m1","timestamp":"2026-05-01T09:00:02.000Z","type":"gemini","content":"","model":"gemini-3-pro","toolCalls":[{"id":"c1","name":"run_shell_command","args":{"command":"go test ./..."},"status":"executing","timestamp":"2026-05-01T09:00:03.000Z"}]}
{"id":"m1","timestamp":"2026-05-01T09:00:02.000Z","type":"gemini","content":"","model":"gemini-3-pro","toolCalls":[{"id":"c1","name":"run_shell_command","args":{"command":"go test ./..."},"status":"success","timestamp":"2026-05-01T09:00:09.000Z","result":[{"functionResponse":{"id":"c1","name":"run_shell_command","response":{"output":"Output: FAIL\nExit Code: 1"}}}]}]}
{"$set":{"lastUpdated":"2026-05-01T09:00:09.000Z"}}
{"id":"u2","timestamp":"2026-05-01T09:00:10.000Z","type":"user","content":[{"text":"try again"}]}
{"id":"m2","timestamp":"2026-05-01T09:00:11.000Z","type":"gemini","content":"","toolCalls":[{"id":"c2","name":"read_file","args":{"file_path":"flaky_test.go"},"status":"success","timestamp":"2026-05-01T09:00:12.000Z","result":[{"functionResponse":{"id":"c2","name":"read_file","response":{"output":"package x\n"}}}]}]}
{"$rewindTo":"u2"}
{"id":"m3","timestamp":"2026-05-01T09:01:00.000Z","type":"gemini","content":"","toolCalls":[{"id":"c3","name":"glob","args":{"pattern":"*_test.go"},"status":"success","timestamp":"2026-05-01T09:01:01.000Z","result":[{"functionResponse":{"id":"c3","name":"glob","response":{"output":"flaky_test.go"}}}]}]}
{"$set":{"messages":[{"id":"u1","timestamp":"2026-05-01T09:00:01.000Z","type":"user","content":[{"text":"fix the flaky test"}]},{"id":"m1","timestamp":"2026-05-01T09:00:02.000Z","type":"gemini","content":"","toolCalls":[{"id":"c1","name":"run_shell_command","args":{"command":"go test ./..."},"status":"success","timestamp":"2026-05-01T09:00:09.000Z","result":[{"functionResponse":{"id":"c1","name":"run_shell_command","response":{"output":"Output: FAIL\nExit Code: 1"}}}]}]},{"id":"m3","timestamp":"2026-05-01T09:01:00.000Z","type":"gemini","content":"","toolCalls":[{"id":"c3","name":"glob","args":{"pattern":"*_test.go"},"status":"success","timestamp":"2026-05-01T09:01:01.000Z","result":[{"functionResponse":{"id":"c3","name":"glob","response":{"output":"flaky_test.go"}}}]}]}]}}
{"$set":{"summary":"Fix a flaky Go test","lastUpdated":"2026-05-01T09:01:05.000Z"}}
"#;

#[test]
fn a_hand_written_session_with_every_history_edit_reads_its_final_history() {
    let mut reader = GeminiReader::new(GeminiFile::default());
    let mut seen = Vec::new();
    let mut rewrites = 0;
    for line in EDITED.lines() {
        reader.push_line(line.as_bytes());
        common::Tailed::take_into(&mut reader, &mut seen);
        rewrites += u64::from(reader.rewound());
    }
    let tools: Vec<&str> = seen.iter().map(|c| c.tool.as_str()).collect();
    assert_eq!(tools, ["bash", "glob"], "c2 was rewound away");
    assert_eq!(
        (rewrites, reader.generation()),
        (1, 1),
        "the rewind, not the checkpoint, rewrote"
    );
    assert_eq!(seen[0].metadata, json!({"exit": 1}));
    let meta = reader.meta();
    assert_eq!(meta.title.as_deref(), Some("Fix a flaky Go test"));
    assert_eq!(meta.cwd.as_deref(), Some("/w/svc"));
    let sessions =
        read_gemini_sessions(EDITED.as_bytes(), "session-2026-05-01T09-00-5475a6ad.jsonl").unwrap();
    assert_eq!(sessions[0].calls, seen);
}
