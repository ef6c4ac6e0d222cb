//! The real Claude Code CLI (2.1.328) driven offline by a scripted model: it runs real tools in
//! a real git repository and writes its real transcripts, which the reader must read whole.
//! Every tool call is counted independently of the reader (a `serde_json::Value` walk) and
//! must match the script.
//!
//! `AGENTWATCH_UPDATE_FIXTURES=1` also writes the transcripts, scrubbed, under
//! `fixtures/claude/2.1.328/` (the byte tests of `tests/fixtures.rs` read them).

mod common;

use agentwatch_testkit::TempDir;
use agentwatch_testkit::claude::{ClaudeRun, ModelServer, Script, Turn, require_binary};
use agentwatch_transcripts::{
    ClaudeReader, Transcript, TranscriptKind, discover_claude, read_claude_sessions,
    read_subagent_meta,
};
use detect_core::{CallStatus, DetectConfig, Session, judge_sessions};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// A finished run of the CLI.
struct Played {
    _root: TempDir,
    root: PathBuf,
    run: ClaudeRun,
    server: ModelServer,
}

/// Run claude on `script` with `prompt` in a fresh git repository holding `files`.
fn play(script: Script, prompt: &str, files: &[(&str, &str)]) -> Played {
    let root = TempDir::new("aw-claude");
    let server = ModelServer::start(script);
    let run = ClaudeRun::new(require_binary(), &server, &root.path, prompt);
    for (name, text) in files {
        std::fs::write(run.dir.join(name), text).unwrap();
    }
    git(&run.dir, &["init", "-q", "-b", "main"]);
    git(&run.dir, &["add", "-A"]);
    git(&run.dir, &["commit", "-qm", "start"]);
    let done = run.run(Duration::from_secs(240)).expect("claude ran");
    assert!(
        done.status.success(),
        "claude failed: {}\n{}",
        done.stderr,
        done.stdout
    );
    Played {
        root: root.path.clone(),
        _root: root,
        run,
        server,
    }
}

fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .args([
            "-c",
            "user.name=Test",
            "-c",
            "user.email=test@example.invalid",
        ])
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "Test")
        .env("GIT_AUTHOR_EMAIL", "test@example.invalid")
        .env("GIT_COMMITTER_NAME", "Test")
        .env("GIT_COMMITTER_EMAIL", "test@example.invalid")
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The transcripts discover finds, each with its bytes and its sessions as read whole.
fn transcripts(played: &Played) -> Vec<(Transcript, Vec<u8>, Vec<Session>)> {
    let found = discover_claude(&played.run.config_dir).unwrap();
    assert!(found.problems.is_empty(), "{:?}", found.problems);
    // Discover finds every transcript the CLI wrote (the testkit lists them by walking).
    let listed: Vec<PathBuf> = found.transcripts.iter().map(|t| t.path.clone()).collect();
    let walked: Vec<PathBuf> = played
        .run
        .transcripts()
        .into_iter()
        .filter(|p| !p.to_string_lossy().contains("agent-acompact-"))
        .collect();
    assert_eq!(listed, walked);
    found
        .transcripts
        .into_iter()
        .map(|t| {
            let bytes = std::fs::read(&t.path).unwrap();
            let name = t.path.to_string_lossy().into_owned();
            let sessions = read_claude_sessions(&bytes, &name).unwrap();
            (t, bytes, sessions)
        })
        .collect()
}

/// Every tool call of the transcript is read, in order, and answered as the script says.
fn assert_reads_every_call(bytes: &[u8], session: &Session, script: &Script, marker: &str) {
    let uses = common::tool_uses(bytes);
    let expected: Vec<String> = script
        .tool_calls(marker)
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    let names: Vec<String> = uses.iter().map(|(_, name)| name.clone()).collect();
    assert_eq!(names, expected, "the transcript holds the script's calls");
    assert_eq!(session.calls.len(), uses.len(), "every tool_use is read");
    let answered = common::answered_ids(bytes);
    assert!(uses.iter().all(|(id, _)| answered.contains(id)));
    assert!(session.calls.iter().all(|c| c.status.is_counted()));
    assert!(session.calls.iter().all(|c| c.output_hash.is_some()));
    let timed =
        |c: &detect_core::Call| c.time.is_some_and(|t| t.start.is_some() && t.end.is_some());
    assert!(session.calls.iter().all(timed));
    // The reader fed by the tail in small reads agrees with the whole-file read.
    let tailed = tail_in_pieces(bytes, session);
    assert_eq!(tailed, session.calls);
}

/// Read `bytes` through a file grown a few kilobytes at a time, tailed with a small budget.
fn tail_in_pieces(bytes: &[u8], session: &Session) -> Vec<detect_core::Call> {
    use agentwatch_transcripts::{FileCursor, FileKind, read_new};
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.jsonl");
    let mut file = std::fs::File::create(&path).unwrap();
    let kind = match &session.parent_id {
        None => FileKind::Main {
            session_id: Some(session.id.clone()),
        },
        Some(parent) => FileKind::Subagent {
            agent_id: session.id.rsplit(":agent-").next().map(str::to_owned),
            parent_session_id: Some(parent.clone()),
            agent_type: None,
        },
    };
    let mut reader = ClaudeReader::new(kind);
    let mut cursor = FileCursor::default();
    let mut calls = Vec::new();
    for piece in bytes.chunks(4093) {
        file.write_all(piece).unwrap();
        loop {
            let new = read_new(&path, &cursor, 1 << 20).unwrap();
            assert!(!new.restarted);
            reader.push_text(&new);
            calls.extend(reader.take_calls());
            cursor = new.cursor;
            if !new.more {
                break;
            }
        }
    }
    calls
}

fn flagged(sessions: &[Session]) -> Vec<String> {
    judge_sessions(sessions, &DetectConfig::default())
        .trees
        .iter()
        .filter(|t| t.flagged)
        .map(|t| t.root.clone())
        .collect()
}

fn session_of(
    found: &[(Transcript, Vec<u8>, Vec<Session>)],
    main: bool,
) -> &(Transcript, Vec<u8>, Vec<Session>) {
    found
        .iter()
        .find(|(t, _, _)| matches!(t.kind, TranscriptKind::ClaudeMain { .. }) == main)
        .expect("the transcript")
}

const NOTES: &str = "line one\nline two\nline three\nline four\nline five\n";

#[test]
#[ignore = "needs claude (npm @anthropic-ai/claude-code)"]
fn a_scripted_loop_is_read_call_by_call_and_flagged() {
    let mut turns: Vec<Turn> = (0..25)
        .map(|_| Turn::tool("Read", json!({"file_path": "notes.txt"})))
        .collect();
    turns.extend((0..20).map(|_| {
        Turn::tool(
            "Bash",
            json!({"command": "sh check.sh", "description": "Run the check"}),
        )
    }));
    let script = Script::new().conversation("AW-LOOP", turns);
    let played = play(
        script.clone(),
        "AW-LOOP: make the check pass",
        &[
            ("notes.txt", NOTES),
            ("check.sh", "echo 'check failed: no value' >&2\nexit 1\n"),
        ],
    );
    let found = transcripts(&played);
    assert_eq!(found.len(), 1, "one session, no subagent");
    let (transcript, bytes, sessions) = &found[0];
    let session = &sessions[0];
    assert_eq!(Some(session.id.clone()), transcript.session_id());
    assert_eq!(
        session.directory.as_deref(),
        Some(played.run.dir.to_str().unwrap())
    );
    assert_eq!(
        session.title.as_deref(),
        Some("AW-LOOP: make the check pass")
    );
    assert_reads_every_call(bytes, session, &script, "AW-LOOP");
    let (reads, bashes) = session.calls.split_at(25);
    assert!(
        reads
            .iter()
            .all(|c| c.tool == "read" && c.input == json!({"filePath": "notes.txt"}))
    );
    assert_eq!(
        reads[0].metadata["total_lines"], 6,
        "the first read knows the file's length"
    );
    for bash in bashes {
        assert_eq!(
            (bash.tool.as_str(), &bash.status),
            ("bash", &CallStatus::Error)
        );
        assert_eq!(bash.metadata, json!({"exit": 1}));
    }
    assert_eq!(flagged(sessions), vec![session.id.clone()]);
    save_fixture(&played, "loop");
}

#[test]
#[ignore = "needs claude (npm @anthropic-ai/claude-code)"]
fn a_scripted_healthy_session_lands_its_edits_and_is_not_flagged() {
    let mut turns = vec![Turn::tools(&[
        ("Read", json!({"file_path": "README.md"})),
        ("Read", json!({"file_path": "test.sh"})),
    ])];
    for i in 0..12 {
        turns.push(Turn::tool("Read", json!({"file_path": "counter.txt"})));
        turns.push(Turn::tool(
            "Edit",
            json!({"file_path": "counter.txt", "old_string": format!("count = {i}"), "new_string": format!("count = {}", i + 1)}),
        ));
        turns.push(Turn::tool(
            "Bash",
            json!({"command": "sh test.sh", "description": "Run the tests"}),
        ));
        if i % 3 == 0 {
            turns.push(Turn::tool(
                "Bash",
                json!({"command": format!("git add -A && git -c user.name=T -c user.email=t@example.invalid commit -qm 'count {}'", i + 1), "description": "Commit"}),
            ));
        }
    }
    turns.push(Turn::tool(
        "Write",
        json!({"file_path": "NOTES.md", "content": "counted to 12\n"}),
    ));
    let script = Script::new().conversation("AW-HEALTHY", turns);
    let played = play(
        script.clone(),
        "AW-HEALTHY: count to twelve, testing and committing as you go",
        &[
            ("README.md", "# counter\n"),
            ("counter.txt", "count = 0\n"),
            (
                "test.sh",
                "grep -q '^count = [0-9]*$' counter.txt && echo ok\n",
            ),
        ],
    );
    assert_eq!(
        std::fs::read_to_string(played.run.dir.join("counter.txt")).unwrap(),
        "count = 12\n",
        "the edits were real"
    );
    let found = transcripts(&played);
    assert_eq!(found.len(), 1);
    let (_, bytes, sessions) = &found[0];
    let session = &sessions[0];
    assert_reads_every_call(bytes, session, &script, "AW-HEALTHY");
    let edits: Vec<_> = session.calls.iter().filter(|c| c.tool == "edit").collect();
    assert_eq!(edits.len(), 12);
    for edit in &edits {
        assert!(
            edit.metadata["diff"]
                .as_str()
                .is_some_and(|d| !d.trim().is_empty()),
            "{edit:?}"
        );
        assert_eq!(
            edit.metadata["filediff"],
            json!({"additions": 1, "deletions": 1})
        );
    }
    let bashes: Vec<_> = session.calls.iter().filter(|c| c.tool == "bash").collect();
    assert_eq!(bashes.len(), 16);
    assert!(
        bashes.iter().all(|c| c.metadata == json!({"exit": 0})),
        "tests pass, commits land"
    );
    let write = session.calls.last().unwrap();
    assert_eq!(
        (write.tool.as_str(), &write.metadata["type"]),
        ("write", &json!("create"))
    );
    assert!(
        flagged(sessions).is_empty(),
        "a healthy session is not flagged"
    );
    save_fixture(&played, "healthy");
}

#[test]
#[ignore = "needs claude (npm @anthropic-ai/claude-code)"]
fn a_subagent_loop_is_found_and_linked_to_its_parent() {
    let parent_turns = vec![
        Turn::tool("Read", json!({"file_path": "notes.txt"})),
        Turn::tool(
            "Agent",
            json!({"description": "Study the notes", "prompt": "AW-SUBLOOP: read the notes until they make sense", "subagent_type": "general-purpose"}),
        ),
    ];
    // The subagent reads, lands an edit, then rereads the same file over and over.
    let mut sub_turns = vec![
        Turn::tool("Read", json!({"file_path": "notes.txt"})),
        Turn::tool(
            "Edit",
            json!({"file_path": "notes.txt", "old_string": "line one", "new_string": "line 1"}),
        ),
    ];
    sub_turns.extend((0..45).map(|_| Turn::tool("Read", json!({"file_path": "notes.txt"}))));
    let script = Script::new()
        .conversation("AW-PARENT", parent_turns)
        .conversation("AW-SUBLOOP", sub_turns);
    let played = play(
        script.clone(),
        "AW-PARENT: understand the notes",
        &[("notes.txt", NOTES)],
    );
    let found = transcripts(&played);
    assert_eq!(found.len(), 2, "the session and its subagent");
    let (main, main_bytes, main_sessions) = session_of(&found, true);
    let (sub, sub_bytes, sub_sessions) = session_of(&found, false);
    let main_id = main.session_id().unwrap();
    let TranscriptKind::ClaudeSubagent {
        parent_session_id,
        agent_id,
    } = &sub.kind
    else {
        panic!("the current subagent layout: {:?}", sub.kind);
    };
    assert_eq!(parent_session_id, &main_id);
    assert_reads_every_call(main_bytes, &main_sessions[0], &script, "AW-PARENT");
    assert_reads_every_call(sub_bytes, &sub_sessions[0], &script, "AW-SUBLOOP");
    // The link: the spawning call's id in the parent is the subagent's meta toolUseId.
    let spawn = &main_sessions[0].calls[1];
    assert_eq!(spawn.tool, "task");
    assert_eq!(spawn.metadata["agentId"], json!(agent_id));
    let meta = read_subagent_meta(&sub.meta_path().unwrap()).unwrap();
    assert_eq!(
        meta.tool_use_id.as_deref(),
        spawn.metadata["toolUseId"].as_str()
    );
    assert_eq!(meta.agent_type.as_deref(), Some("general-purpose"));
    let sub_session = &sub_sessions[0];
    // Subagent transcripts carry no toolUseResult: the edit lands by its result text.
    let edit = &sub_session.calls[1];
    assert_eq!(edit.tool, "edit");
    assert!(
        edit.metadata["diff"]
            .as_str()
            .is_some_and(|d| !d.is_empty()),
        "{edit:?}"
    );
    assert!(
        std::fs::read_to_string(played.run.dir.join("notes.txt"))
            .unwrap()
            .starts_with("line 1\n")
    );
    assert_eq!(sub_session.id, format!("{main_id}:agent-{agent_id}"));
    assert_eq!(sub_session.parent_id.as_deref(), Some(main_id.as_str()));
    // The subagent's loop flags the tree of its parent.
    let all = [main_sessions[0].clone(), sub_session.clone()];
    assert_eq!(flagged(&all), vec![main_id.clone()]);
    let judgement = judge_sessions(&all, &DetectConfig::default());
    let tree = &judgement.trees[0];
    assert!(tree.flagged_sessions.iter().any(|s| s.id == sub_session.id));
    assert_eq!(played.server.conversation_requests("AW-SUBLOOP").len(), 48);
    save_fixture(&played, "subagent");
}

/// With `AGENTWATCH_UPDATE_FIXTURES=1`: the run's `projects/` under
/// `fixtures/claude/2.1.328/SCENARIO/`, machine paths replaced by `/home/user/work`.
fn save_fixture(played: &Played, scenario: &str) {
    if std::env::var_os("AGENTWATCH_UPDATE_FIXTURES").is_none() {
        return;
    }
    let root = played.root.to_string_lossy().into_owned();
    let replacements = [
        (root.clone(), "/home/user/work".to_owned()),
        (slug(&root), slug("/home/user/work")),
    ];
    let out = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/claude/2.1.328")
        .join(scenario);
    let _ = std::fs::remove_dir_all(&out);
    let projects = played.run.config_dir.join("projects");
    let mut paths = played.run.transcripts();
    paths.extend(paths.clone().iter().filter_map(|p| {
        let meta = p.with_extension("meta.json");
        meta.is_file().then_some(meta)
    }));
    for path in paths {
        let relative = path
            .strip_prefix(&projects)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let target = out
            .join("projects")
            .join(relative.replace(&slug(&root), &slug("/home/user/work")));
        std::fs::create_dir_all(target.parent().unwrap()).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        let scrubbed = if path.extension().is_some_and(|e| e == "jsonl") {
            common::scrub(&bytes, &replacements)
        } else {
            let mut text = String::from_utf8_lossy(&bytes).into_owned();
            for (from, to) in &replacements {
                text = text.replace(from.as_str(), to);
            }
            text.into_bytes()
        };
        std::fs::write(target, scrubbed).unwrap();
    }
}

/// Claude Code's project directory name for a path: every non-alphanumeric character a `-`.
fn slug(path: &str) -> String {
    path.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect()
}
