//! Byte tests on the real rollouts Codex CLI 0.169.0 wrote in `tests/real_codex.rs` (kept,
//! scrubbed, under `fixtures/codex/0.169.0/`): found by discover, every call read (as
//! counted without the reader), the loop flagged within 15 calls of its start and the
//! healthy session not; the same bytes compressed (`.jsonl.zst`) or tailed in any pieces
//! read alike. Plus a hand-written rollout of the bare era.

mod common;

use agentwatch_transcripts::{
    CodexReader, FileCursor, TranscriptKind, discover_codex, peek_codex, read_codex_sessions,
    read_transcript,
};
use detect_core::{CallStatus, DetectConfig, Session};
use proptest::prelude::*;
use serde_json::json;
use std::io::Write;
use std::path::PathBuf;

fn scenario(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/codex/0.169.0")
        .join(name)
}

/// Every rollout of a scenario: discovered, read whole, every call read.
fn read_scenario(name: &str) -> Vec<(PathBuf, Session, CodexReader)> {
    let found = discover_codex(&scenario(name)).unwrap();
    assert!(found.problems.is_empty(), "{:?}", found.problems);
    assert!(!found.transcripts.is_empty(), "fixtures of {name}");
    found
        .transcripts
        .iter()
        .map(|t| {
            let bytes = std::fs::read(&t.path).unwrap();
            let mut sessions = read_codex_sessions(&bytes, &t.path.to_string_lossy()).unwrap();
            let session = sessions.remove(0);
            let calls = common::codex_calls(&bytes);
            assert_eq!(
                session.calls.len(),
                calls.len(),
                "{}: every call read",
                t.path.display()
            );
            assert!(session.calls.iter().all(|c| c.status.is_counted()));
            assert_eq!(Some(&session.id), t.session_id().as_ref());
            let mut reader = CodexReader::new(t.session_id());
            for line in bytes.split(|b| *b == b'\n') {
                reader.push_line(line);
            }
            (t.path.clone(), session, reader)
        })
        .collect()
}

#[test]
fn the_real_loop_reads_its_48_calls_and_is_flagged_within_15_calls_of_its_start() {
    let read = read_scenario("loop");
    let (_, session, reader) = &read[0];
    assert_eq!(session.calls.len(), 48);
    assert!(session.calls.iter().all(|c| c.tool == "bash"));
    let checks = &session.calls[28..];
    assert!(
        checks
            .iter()
            .all(|c| c.status == CallStatus::Error && c.metadata == json!({"exit": 1}))
    );
    assert!(
        checks
            .iter()
            .all(|c| c.output_hash == checks[0].output_hash)
    );
    assert_eq!(
        session.calls[26].input,
        json!({"arguments": "cmd=[REDACTED]"})
    );
    let meta = reader.meta();
    assert_eq!(meta.cwd.as_deref(), Some("/home/user/work/project"));
    assert_eq!(meta.title.as_deref(), Some("AW-LOOP: make the check pass"));
    assert_eq!(meta.history_mode.as_deref(), Some("paginated"));
    assert_eq!(
        (
            meta.counters.calls,
            meta.counters.completed,
            meta.counters.corrupt_lines
        ),
        (48, 48, 0)
    );
    let first = common::first_flag_at(session).unwrap();
    assert!((29..=28 + 15).contains(&first), "flagged at call {first}");
    assert_eq!(
        common::flagged(std::slice::from_ref(session), &DetectConfig::default()),
        vec![session.id.clone()]
    );
}

#[test]
fn the_real_healthy_session_lands_its_patches_and_is_not_flagged() {
    let read = read_scenario("healthy");
    let (_, session, _) = &read[0];
    assert_eq!(session.calls.len(), 46);
    let landed = session
        .calls
        .iter()
        .filter(|c| {
            c.tool == "apply_patch"
                && c.metadata["files"]
                    .as_array()
                    .is_some_and(|f| !f.is_empty())
        })
        .count();
    assert_eq!(landed, 13);
    assert_eq!(session.calls.iter().filter(|c| c.tool == "poll").count(), 2);
    assert!(common::flagged(std::slice::from_ref(session), &DetectConfig::default()).is_empty());
    assert_eq!(common::first_flag_at(session), None);
}

#[test]
fn the_real_subagent_is_linked_to_its_parent_and_its_loop_flags_the_parent() {
    let read = read_scenario("subagent");
    let sub = read.iter().find(|(_, s, _)| s.parent_id.is_some()).unwrap();
    let main = read.iter().find(|(_, s, _)| s.parent_id.is_none()).unwrap();
    assert_eq!(sub.1.parent_id.as_ref(), Some(&main.1.id));
    assert_eq!(
        peek_codex(&sub.0).unwrap().parent_thread_id.as_ref(),
        Some(&main.1.id)
    );
    assert_eq!(main.1.calls[1].metadata["agentId"], json!(sub.1.id));
    assert!(sub.2.meta().agent_nickname.is_some());
    assert_eq!(sub.1.calls.len(), 45);
    assert_eq!(
        common::flagged(&[main.1.clone(), sub.1.clone()], &DetectConfig::default()),
        vec![main.1.id.clone()]
    );
}

/// The loop's rollout.
fn loop_rollout() -> (PathBuf, Vec<u8>) {
    let found = discover_codex(&scenario("loop")).unwrap();
    let path = found.transcripts[0].path.clone();
    let bytes = std::fs::read(&path).unwrap();
    (path, bytes)
}

#[test]
fn a_compressed_archived_rollout_reads_as_the_plain_one() {
    let (path, bytes) = loop_rollout();
    let home = tempfile::tempdir().unwrap();
    let name = path.file_name().unwrap().to_string_lossy().into_owned();
    let archived = home
        .path()
        .join("archived_sessions")
        .join(format!("{name}.zst"));
    std::fs::create_dir_all(archived.parent().unwrap()).unwrap();
    let file = std::fs::File::create(&archived).unwrap();
    let mut encoder = zstd::stream::write::Encoder::new(file, 3).unwrap();
    encoder.write_all(&bytes).unwrap();
    encoder.finish().unwrap();
    let found = discover_codex(home.path()).unwrap();
    let t = &found.transcripts[0];
    assert_eq!(
        t.kind,
        TranscriptKind::CodexRollout {
            thread_id: codex_id(&name),
            archived: true,
            compressed: true
        }
    );
    assert!(t.read_whole());
    let whole = read_transcript(&t.path, 64 << 20).unwrap();
    assert_eq!(whole, bytes);
    let from_zst = read_codex_sessions(&whole, &t.path.to_string_lossy()).unwrap();
    let plain = read_codex_sessions(&bytes, &path.to_string_lossy()).unwrap();
    assert_eq!(from_zst, plain);
    assert_eq!(peek_codex(&t.path).unwrap().thread_id, codex_id(&name));
}

fn codex_id(name: &str) -> Option<String> {
    agentwatch_transcripts::codex_thread_id(name)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// Written in pieces cut anywhere, read after each piece with any budget that fits the
    /// longest line, the reader saved and restored once: the same calls as whole.
    #[test]
    fn a_rollout_tailed_in_chunks_reads_as_whole(
        cuts in proptest::collection::vec(0.0f64..1.0, 0..25),
        extra_budget in 0usize..20_000,
        round_trip_at in proptest::option::of(0usize..25),
    ) {
        let (path, bytes) = loop_rollout();
        let thread = codex_id(&path.to_string_lossy());
        let mut cuts: Vec<usize> = cuts.iter().map(|c| (c * bytes.len() as f64) as usize).collect();
        cuts.push(bytes.len());
        cuts.sort_unstable();
        let budget = bytes.split(|b| *b == b'\n').map(<[u8]>::len).max().unwrap_or(0) + 1 + extra_budget;
        let dir = tempfile::tempdir().unwrap();
        let tailed = dir.path().join("t.jsonl");
        let mut file = std::fs::File::create(&tailed).unwrap();
        let mut reader = CodexReader::new(thread.clone());
        let mut cursor = FileCursor::default();
        let mut calls = Vec::new();
        let mut written = 0;
        for (i, cut) in cuts.into_iter().enumerate() {
            file.write_all(&bytes[written..cut]).unwrap();
            written = cut;
            prop_assert!(!common::catch_up(&tailed, &mut cursor, &mut reader, budget));
            calls.extend(reader.take_calls());
            if round_trip_at == Some(i) {
                reader = serde_json::from_str(&serde_json::to_string(&reader).unwrap()).unwrap();
            }
        }
        let whole = read_codex_sessions(&bytes, &path.to_string_lossy()).unwrap();
        prop_assert_eq!(&calls, &whole[0].calls);
    }
}

/// A hand-written rollout of the bare era (before September 2025): no envelope, no
/// timestamps, `record_type` markers, the working directory only in the environment
/// context, `shell` with an argv and outputs as JSON strings.
const BARE: &str = r#"{"id":"44444444-4444-4444-8444-444444444444","timestamp":"2025-08-01T10:00:00.000Z","instructions":null,"git":{"commit_hash":"c0ffee","branch":"dev","repository_url":"https://example.invalid/app.git"}}
{"record_type":"state"}
{"type":"message","role":"user","content":[{"type":"input_text","text":"<user_instructions>\n\nbe careful\n\n</user_instructions>"}]}
{"type":"message","role":"user","content":[{"type":"input_text","text":"<environment_context>\n  <cwd>/home/u/app</cwd>\n  <approval_policy>on-request</approval_policy>\n</environment_context>"}]}
{"type":"message","role":"user","content":[{"type":"input_text","text":"why does the test fail?"}]}
{"record_type":"state"}
{"type":"reasoning","id":"rs_1","summary":[],"content":null,"encrypted_content":"gAAAA"}
{"type":"function_call","id":"fc_1","name":"shell","arguments":"{\"command\":[\"bash\",\"-lc\",\"pytest -x\"],\"workdir\":\"/home/u/app\",\"timeout_ms\":120000}","call_id":"call_1"}
{"type":"function_call_output","call_id":"call_1","output":"{\"output\":\"E   assert 1 == 2\\n\",\"metadata\":{\"exit_code\":1,\"duration_seconds\":0.8}}"}
{"type":"function_call","id":"fc_2","name":"shell","arguments":"{\"command\":[\"bash\",\"-lc\",\"pytest -x\"],\"workdir\":\"/home/u/app\",\"timeout_ms\":120000}","call_id":"call_2"}
{"type":"function_call_output","call_id":"call_2","output":"{\"output\":\"E   assert 1 == 2\\n\",\"metadata\":{\"exit_code\":1,\"duration_seconds\":0.7}}"}
{"type":"local_shell_call","id":"lsh_1","call_id":"call_3","status":"completed","action":{"type":"exec","command":["cat","tests/test_a.py"],"timeout_ms":10000,"working_directory":"/home/u/app"}}
{"type":"function_call_output","call_id":"call_3","output":"{\"output\":\"def test_a():\\n    assert 1 == 2\\n\",\"metadata\":{\"exit_code\":0,\"duration_seconds\":0.1}}"}
{"type":"function_call","id":"fc_4","name":"apply_patch","arguments":"{\"input\":\"*** Begin Patch\\n*** Update File: tests/test_a.py\\n@@\\n-    assert 1 == 2\\n+    assert 1 == 1\\n*** End Patch\"}","call_id":"call_4"}
{"type":"function_call_output","call_id":"call_4","output":"{\"output\":\"Success. Updated the following files:\\nM tests/test_a.py\\n\",\"metadata\":{\"exit_code\":0,\"duration_seconds\":0.0}}"}
{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Fixed."}]}
"#;

#[test]
fn a_hand_written_bare_era_rollout_reads_every_call() {
    let name = "/h/sessions/rollout-44444444-4444-4444-8444-444444444444.jsonl";
    let sessions = read_codex_sessions(BARE.as_bytes(), name).unwrap();
    let session = &sessions[0];
    assert_eq!(
        session.calls.len(),
        common::codex_calls(BARE.as_bytes()).len()
    );
    assert_eq!(session.id, "44444444-4444-4444-8444-444444444444");
    assert_eq!(session.directory.as_deref(), Some("/home/u/app"));
    assert_eq!(session.title.as_deref(), Some("why does the test fail?"));
    let shape: Vec<(&str, &serde_json::Value)> = session
        .calls
        .iter()
        .map(|c| (c.tool.as_str(), &c.metadata))
        .collect();
    assert_eq!(
        shape[..3],
        [
            ("bash", &json!({"exit": 1})),
            ("bash", &json!({"exit": 1})),
            ("bash", &json!({"exit": 0})),
        ]
    );
    assert_eq!(
        session.calls[0].input,
        json!({"command": "pytest -x", "workdir": "/home/u/app"})
    );
    assert_eq!(
        session.calls[0].output_hash, session.calls[1].output_hash,
        "durations are not hashed"
    );
    assert_eq!(
        session.calls[2].input,
        json!({"command": "cat tests/test_a.py", "workdir": "/home/u/app"})
    );
    assert_eq!(session.calls[3].tool, "apply_patch");
    assert_eq!(
        session.calls[3].metadata["files"],
        json!([{"filePath": "tests/test_a.py", "type": "update", "additions": 1, "deletions": 1}])
    );
}
