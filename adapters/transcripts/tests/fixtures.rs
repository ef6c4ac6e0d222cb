//! Byte tests on the real transcripts Claude Code 2.1.328 wrote in `tests/real_claude.rs`
//! (kept, scrubbed, under `fixtures/claude/2.1.328/`): found by discover, every call read (as
//! counted without the reader), the loops flagged and the healthy session not.

mod common;

use agentwatch_transcripts::{
    ClaudeReader, TranscriptKind, discover_claude, read_claude_sessions, read_subagent_meta,
};
use detect_core::{CallStatus, DetectConfig, Session, judge_sessions};
use serde_json::json;
use std::path::PathBuf;

fn scenario(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/claude/2.1.328")
        .join(name)
}

/// Every transcript of a scenario: discovered, read whole, every tool_use read.
fn read_scenario(name: &str) -> Vec<(TranscriptKind, Session, ClaudeReader)> {
    let found = discover_claude(&scenario(name)).unwrap();
    assert!(found.problems.is_empty(), "{:?}", found.problems);
    assert!(!found.transcripts.is_empty(), "fixtures of {name}");
    found
        .transcripts
        .iter()
        .map(|t| {
            let bytes = std::fs::read(&t.path).unwrap();
            let sessions = read_claude_sessions(&bytes, &t.path.to_string_lossy()).unwrap();
            assert_eq!(sessions.len(), 1, "no inline sidechains in 2.1.328");
            let session = sessions.into_iter().next().unwrap();
            let uses = common::tool_uses(&bytes);
            assert_eq!(
                session.calls.len(),
                uses.len(),
                "{}: every tool_use read",
                t.path.display()
            );
            assert_eq!(Some(&session.id), t.session_id().as_ref());
            let mut reader = ClaudeReader::new(t.file_kind(None));
            for line in bytes.split(|b| *b == b'\n') {
                reader.push_line(line);
            }
            (t.kind.clone(), session, reader)
        })
        .collect()
}

fn tools(session: &Session) -> Vec<&str> {
    session.calls.iter().map(|c| c.tool.as_str()).collect()
}

fn flagged(sessions: &[Session]) -> Vec<String> {
    judge_sessions(sessions, &DetectConfig::default())
        .trees
        .into_iter()
        .filter(|t| t.flagged)
        .map(|t| t.root)
        .collect()
}

#[test]
fn the_real_loop_reads_its_45_calls_and_is_flagged() {
    let read = read_scenario("loop");
    let (_, session, reader) = &read[0];
    let mut expected = vec!["read"; 25];
    expected.extend(["bash"; 20]);
    assert_eq!(tools(session), expected);
    assert!(
        session.calls[..25]
            .iter()
            .all(|c| c.metadata == json!({"total_lines": 6, "lines_read": 6}))
    );
    assert!(
        session.calls[25..]
            .iter()
            .all(|c| c.status == CallStatus::Error && c.metadata == json!({"exit": 1}))
    );
    let meta = reader.meta();
    assert_eq!(meta.cwd.as_deref(), Some("/home/user/work/project"));
    assert_eq!(meta.git_branch.as_deref(), Some("main"));
    assert_eq!(meta.model.as_deref(), Some("claude-opus-5-5"));
    assert_eq!(meta.version.as_deref(), Some("2.1.328"));
    assert_eq!(meta.title.as_deref(), Some("AW-LOOP: make the check pass"));
    assert_eq!(
        (
            meta.counters.calls,
            meta.counters.completed,
            meta.counters.corrupt_lines
        ),
        (45, 45, 0)
    );
    assert_eq!(
        flagged(std::slice::from_ref(session)),
        vec![session.id.clone()]
    );
}

#[test]
fn the_real_healthy_session_lands_and_is_not_flagged() {
    let read = read_scenario("healthy");
    let (_, session, _) = &read[0];
    assert_eq!(session.calls.len(), 43);
    let landed_edits = session
        .calls
        .iter()
        .filter(|c| {
            c.tool == "edit" && c.metadata["filediff"] == json!({"additions": 1, "deletions": 1})
        })
        .count();
    assert_eq!(landed_edits, 12);
    let commits: Vec<_> = session
        .calls
        .iter()
        .filter(|c| {
            c.input["command"]
                .as_str()
                .is_some_and(|c| c.contains("git commit") || c.contains(" commit "))
        })
        .collect();
    assert_eq!(commits.len(), 4);
    assert!(commits.iter().all(|c| c.metadata == json!({"exit": 0})));
    // One response with two reads: two lines of one message, both read.
    assert_eq!(tools(session)[..2], ["read", "read"]);
    assert!(flagged(std::slice::from_ref(session)).is_empty());
}

#[test]
fn the_real_subagent_is_linked_to_its_parent_and_its_loop_flags_the_parent() {
    let read = read_scenario("subagent");
    let main = read
        .iter()
        .find(|(k, _, _)| matches!(k, TranscriptKind::ClaudeMain { .. }))
        .unwrap();
    let sub = read
        .iter()
        .find(|(k, _, _)| matches!(k, TranscriptKind::ClaudeSubagent { .. }))
        .unwrap();
    assert_eq!(tools(&main.1), ["read", "task"]);
    let spawn = &main.1.calls[1];
    let TranscriptKind::ClaudeSubagent {
        parent_session_id,
        agent_id,
    } = &sub.0
    else {
        unreachable!()
    };
    assert_eq!(parent_session_id, &main.1.id);
    assert_eq!(spawn.metadata["agentId"], json!(agent_id));
    assert_eq!(sub.1.parent_id.as_ref(), Some(&main.1.id));
    assert_eq!(sub.1.id, format!("{}:agent-{agent_id}", main.1.id));
    let found = discover_claude(&scenario("subagent")).unwrap();
    let meta_path = found
        .transcripts
        .iter()
        .find_map(|t| t.meta_path())
        .unwrap();
    let meta = read_subagent_meta(&meta_path).unwrap();
    assert_eq!(
        meta.tool_use_id.as_deref(),
        spawn.metadata["toolUseId"].as_str()
    );
    let main_meta = main.2.meta();
    assert_eq!(main_meta.spawns.len(), 1);
    assert_eq!(
        main_meta.spawns[0].agent_id.as_deref(),
        Some(agent_id.as_str())
    );
    assert_eq!(
        main_meta.spawns[0].agent_type.as_deref(),
        Some("general-purpose")
    );
    assert_eq!(tools(&sub.1)[..2], ["read", "edit"]);
    assert_eq!(sub.1.calls.len(), 47);
    assert!(
        sub.1.calls[1].metadata["diff"]
            .as_str()
            .is_some_and(|d| !d.is_empty())
    );
    let sub_meta = sub.2.meta();
    assert_eq!(sub_meta.parent_session_id.as_ref(), Some(&main.1.id));
    assert_eq!(sub_meta.agent_id.as_ref(), Some(agent_id));
    assert_eq!(
        sub_meta.title.as_deref(),
        Some("AW-SUBLOOP: read the notes until they make sense")
    );
    assert_eq!(
        flagged(&[main.1.clone(), sub.1.clone()]),
        vec![main.1.id.clone()]
    );
}
