//! The real Codex CLI (0.169.0) driven offline by a scripted model: `codex exec` runs real
//! commands and real patches in a real git repository and writes its real rollouts, which
//! the reader must read whole and tailed. Every call is counted independently of the reader
//! (a `serde_json::Value` walk) and must match the script.
//!
//! `AGENTWATCH_UPDATE_FIXTURES=1` also writes the rollouts, scrubbed, under
//! `fixtures/codex/0.169.0/` (the byte tests of `tests/fixtures_codex.rs` read them).

mod common;

use agentwatch_testkit::TempDir;
use agentwatch_testkit::cli::AgentDone;
use agentwatch_testkit::codex::{CodexRun, ResponsesServer, require_binary};
use agentwatch_testkit::script::{Script, Turn};
use agentwatch_transcripts::{
    CodexReader, Transcript, TranscriptKind, discover_codex, peek_codex, read_codex_sessions,
};
use detect_core::{CallStatus, DetectConfig, Session};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A finished run of the CLI.
struct Played {
    _root: TempDir,
    root: PathBuf,
    run: CodexRun,
    server: ResponsesServer,
    done: AgentDone,
}

/// Run codex on `script` with `prompt` in a fresh git repository holding `files`.
fn play(script: Script, prompt: &str, files: &[(&str, &str)]) -> Played {
    let root = TempDir::new("aw-codex");
    let server = ResponsesServer::start(script);
    let run = CodexRun::new(require_binary(), &server, &root.path, prompt);
    common::init_repo(&run.dir, files);
    let done = run.run(Duration::from_secs(300)).expect("codex ran");
    assert!(
        done.status.success(),
        "codex failed: {}\n{}",
        done.stderr,
        done.stdout
    );
    Played {
        root: root.path.clone(),
        _root: root,
        run,
        server,
        done,
    }
}

/// A rollout found, its bytes, its session read whole, and its reader's meta.
struct Rollout {
    transcript: Transcript,
    bytes: Vec<u8>,
    session: Session,
    reader: CodexReader,
}

/// The rollouts discover finds (every one the CLI wrote), each read whole.
fn rollouts(played: &Played) -> Vec<Rollout> {
    let found = discover_codex(&played.run.codex_home).unwrap();
    assert!(found.problems.is_empty(), "{:?}", found.problems);
    let listed: Vec<PathBuf> = found.transcripts.iter().map(|t| t.path.clone()).collect();
    assert_eq!(listed, played.run.rollouts());
    found
        .transcripts
        .into_iter()
        .map(|t| {
            let bytes = std::fs::read(&t.path).unwrap();
            let name = t.path.to_string_lossy().into_owned();
            let mut sessions = read_codex_sessions(&bytes, &name).unwrap();
            let session = sessions.remove(0);
            let mut reader = CodexReader::new(t.session_id());
            for line in bytes.split(|b| *b == b'\n') {
                reader.push_line(line);
            }
            Rollout {
                transcript: t,
                bytes,
                session,
                reader,
            }
        })
        .collect()
}

/// Codex's name for a scripted tool (`namespace/tool` calls `tool`).
fn codex_name(name: &str) -> &str {
    name.rsplit('/').next().unwrap_or(name)
}

/// Every call of the rollout is read, in order, answered, as the script says.
fn assert_reads_every_call(r: &Rollout, script: &Script, marker: &str) {
    let calls = common::codex_calls(&r.bytes);
    let names: Vec<&str> = calls.iter().map(|(_, n)| n.as_str()).collect();
    let scripted = script.tool_calls(marker);
    let expected: Vec<&str> = scripted.iter().map(|(n, _)| codex_name(n)).collect();
    assert_eq!(names, expected, "the rollout holds the script's calls");
    assert_eq!(r.session.calls.len(), calls.len(), "every call is read");
    let answered = common::codex_answered(&r.bytes);
    assert!(calls.iter().all(|(id, _)| answered.contains(id)));
    assert!(r.session.calls.iter().all(|c| c.status.is_counted()));
    assert!(r.session.calls.iter().all(|c| c.output_hash.is_some()));
    let timed =
        |c: &detect_core::Call| c.time.is_some_and(|t| t.start.is_some() && t.end.is_some());
    assert!(r.session.calls.iter().all(timed));
    let counters = &r.reader.meta().counters;
    assert_eq!((counters.corrupt_lines, counters.unmatched_results), (0, 0));
    let reader = CodexReader::new(r.transcript.session_id());
    let (tailed, _) = common::tail_in_pieces(&r.bytes, reader, 3079);
    assert_eq!(tailed, r.session.calls);
}

fn exec(cmd: &str) -> Turn {
    Turn::tool("exec_command", json!({ "cmd": cmd }))
}

/// 28 calls that each look at something new: no signal can fire on them.
fn preamble() -> Vec<Turn> {
    let mut turns: Vec<Turn> = (0..20)
        .map(|i| exec(&format!("cat src/f{i}.txt")))
        .collect();
    for cmd in [
        "ls",
        "git status --short",
        "wc -l notes.txt",
        "head -2 notes.txt",
        "pwd",
    ] {
        turns.push(exec(cmd));
    }
    turns.push(exec("grep -n line notes.txt"));
    // A redacted log's arguments: not JSON. Codex answers that it cannot parse them.
    turns.push(Turn::tool("exec_command", json!("cmd=[REDACTED]")));
    turns.push(exec("git log --oneline"));
    turns
}

fn preamble_files() -> Vec<(String, String)> {
    (0..20)
        .map(|i| (format!("src/f{i}.txt"), format!("file {i}\n")))
        .collect()
}

const NOTES: &str = "line one\nline two\n";

#[test]
#[ignore = "needs codex (npm @openai/codex)"]
fn a_scripted_loop_is_read_call_by_call_and_flagged_within_15_calls() {
    let mut turns = preamble();
    let loop_start = turns.len();
    turns.extend((0..20).map(|_| exec("sh check.sh")));
    let script = Script::new().conversation("AW-LOOP", turns);
    let mut files = preamble_files();
    files.push(("notes.txt".into(), NOTES.into()));
    files.push((
        "check.sh".into(),
        "echo 'check failed: no value' >&2\nexit 1\n".into(),
    ));
    let files: Vec<(&str, &str)> = files
        .iter()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    let played = play(script.clone(), "AW-LOOP: make the check pass", &files);
    let found = rollouts(&played);
    assert_eq!(found.len(), 1, "one thread, no subagent");
    let r = &found[0];
    assert_reads_every_call(r, &script, "AW-LOOP");
    let session = &r.session;
    assert_eq!(Some(session.id.clone()), r.transcript.session_id());
    assert_eq!(
        session.directory.as_deref(),
        Some(played.run.dir.to_str().unwrap())
    );
    assert_eq!(
        session.title.as_deref(),
        Some("AW-LOOP: make the check pass")
    );
    let meta = r.reader.meta();
    assert_eq!(meta.model.as_deref(), Some("gpt-5.5"));
    assert_eq!(meta.model_provider.as_deref(), Some("scripted"));
    assert_eq!(meta.cli_version.as_deref(), Some("0.169.0"));
    assert_eq!(meta.source.as_deref(), Some("exec"));
    let redacted = &session.calls[26];
    assert_eq!(
        (redacted.tool.as_str(), &redacted.input),
        ("bash", &json!({"arguments": "cmd=[REDACTED]"}))
    );
    for check in &session.calls[loop_start..] {
        assert_eq!(check.input, json!({"command": "sh check.sh"}));
        assert_eq!(
            (&check.status, &check.metadata),
            (&CallStatus::Error, &json!({"exit": 1}))
        );
        assert_eq!(
            check.output_hash, session.calls[loop_start].output_hash,
            "the same output"
        );
    }
    assert!(session.calls[..loop_start].iter().all(|c| c.tool == "bash"));
    let first = common::first_flag_at(session).expect("the loop is flagged");
    assert!(
        first > loop_start && first <= loop_start + 15,
        "flagged at call {first}, the loop starts after call {loop_start}"
    );
    assert_eq!(
        common::flagged(std::slice::from_ref(session), &DetectConfig::default()),
        vec![session.id.clone()]
    );
    save_fixture(&played, "loop");
}

#[test]
#[ignore = "needs codex (npm @openai/codex)"]
fn a_scripted_healthy_session_lands_its_patches_polls_and_is_not_flagged() {
    let mut turns = vec![Turn::tools(&[
        ("exec_command", json!({"cmd": "cat README.md"})),
        ("exec_command", json!({"cmd": "cat test.sh"})),
    ])];
    for i in 0..12 {
        turns.push(exec("cat counter.txt"));
        turns.push(Turn::tool(
            "apply_patch",
            json!(format!(
                "*** Begin Patch\n*** Update File: counter.txt\n@@\n-count = {i}\n+count = {}\n*** End Patch\n",
                i + 1
            )),
        ));
        turns.push(exec("sh test.sh"));
        if i % 3 == 0 {
            turns.push(exec(&format!(
                "git add -A && git -c user.name=T -c user.email=t@example.invalid commit -qm 'count {}'",
                i + 1
            )));
        }
    }
    // A build left running, then polled until it ends.
    turns.push(Turn::tool(
        "exec_command",
        json!({"cmd": "sleep 6; echo built", "yield_time_ms": 250}),
    ));
    turns.push(Turn::tool(
        "write_stdin",
        json!({"session_id": "$SESSION", "chars": "", "yield_time_ms": 5000}),
    ));
    turns.push(Turn::tool(
        "write_stdin",
        json!({"session_id": "$SESSION", "chars": "", "yield_time_ms": 5000}),
    ));
    turns.push(Turn::tool(
        "apply_patch",
        json!("*** Begin Patch\n*** Add File: NOTES.md\n+counted to 12\n*** End Patch\n"),
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
        "the patches were real"
    );
    let found = rollouts(&played);
    assert_eq!(found.len(), 1);
    let r = &found[0];
    assert_reads_every_call(r, &script, "AW-HEALTHY");
    let session = &r.session;
    let patches: Vec<_> = session
        .calls
        .iter()
        .filter(|c| c.tool == "apply_patch")
        .collect();
    assert_eq!(patches.len(), 13);
    for patch in &patches[..12] {
        assert_eq!(patch.status, CallStatus::Completed);
        assert_eq!(patch.metadata["files"][0]["additions"], 1, "{patch:?}");
        assert_eq!(patch.metadata["files"][0]["type"], "update");
    }
    assert_eq!(patches[12].metadata["files"][0]["type"], "add");
    let tests: Vec<_> = session
        .calls
        .iter()
        .filter(|c| {
            c.input["command"] == "sh test.sh"
                || c.input["command"]
                    .as_str()
                    .is_some_and(|c| c.contains("commit"))
        })
        .collect();
    assert_eq!(tests.len(), 16);
    assert!(
        tests.iter().all(|c| c.metadata == json!({"exit": 0})),
        "tests pass, commits land"
    );
    let polls: Vec<_> = session.calls.iter().filter(|c| c.tool == "poll").collect();
    assert_eq!(polls.len(), 2, "write_stdin with nothing to write polls");
    let running = session
        .calls
        .iter()
        .find(|c| c.input["command"] == "sleep 6; echo built")
        .unwrap();
    assert_eq!(
        running.metadata,
        Value::Null,
        "its exit was not known when it answered"
    );
    assert!(
        common::flagged(std::slice::from_ref(session), &DetectConfig::default()).is_empty(),
        "a healthy session is not flagged"
    );
    assert_eq!(common::first_flag_at(session), None);
    save_fixture(&played, "healthy");
}

#[test]
#[ignore = "needs codex (npm @openai/codex)"]
fn a_subagent_loop_is_found_and_linked_to_its_parent() {
    let parent_turns = vec![
        exec("cat notes.txt"),
        Turn::tool(
            "multi_agent_v1/spawn_agent",
            json!({"message": "AW-SUBLOOP: read the notes until they make sense"}),
        ),
        Turn::tool(
            "multi_agent_v1/wait_agent",
            json!({"targets": ["$AGENT"], "timeout_ms": 120000}),
        ),
    ];
    let mut sub_turns = vec![Turn::tool(
        "apply_patch",
        json!(
            "*** Begin Patch\n*** Update File: notes.txt\n@@\n-line one\n+line 1\n*** End Patch\n"
        ),
    )];
    sub_turns.extend((0..44).map(|_| exec("cat notes.txt")));
    let script = Script::new()
        .conversation("AW-PARENT", parent_turns)
        .conversation("AW-SUBLOOP", sub_turns);
    let played = play(
        script.clone(),
        "AW-PARENT: understand the notes",
        &[("notes.txt", NOTES)],
    );
    let found = rollouts(&played);
    assert_eq!(
        found.len(),
        2,
        "the thread and its subagent: {:?}",
        played.done.stdout
    );
    let (sub, main): (Vec<&Rollout>, Vec<&Rollout>) = found
        .iter()
        .partition(|r| r.reader.meta().parent_thread_id.is_some());
    let (main, sub) = (main[0], sub[0]);
    assert_reads_every_call(main, &script, "AW-PARENT");
    assert_reads_every_call(sub, &script, "AW-SUBLOOP");
    let main_id = main.session.id.clone();
    // The link: the child's first line names the parent; the spawn's output names the child.
    let head = peek_codex(&sub.transcript.path).unwrap();
    assert_eq!(head.parent_thread_id.as_deref(), Some(main_id.as_str()));
    assert_eq!(head.source.as_deref(), Some("subagent"));
    assert!(matches!(
        sub.transcript.kind,
        TranscriptKind::CodexRollout { .. }
    ));
    assert_eq!(sub.session.parent_id.as_deref(), Some(main_id.as_str()));
    let spawn = &main.session.calls[1];
    assert_eq!(spawn.tool, "task");
    assert_eq!(spawn.metadata["agentId"], json!(sub.session.id));
    assert_eq!(
        main.reader.meta().spawns[0].thread_id.as_ref(),
        Some(&sub.session.id)
    );
    assert_eq!(main.session.calls[2].tool, "poll", "wait_agent waits");
    assert_eq!(
        sub.session.title.as_deref(),
        Some("AW-SUBLOOP: read the notes until they make sense")
    );
    assert!(
        sub.session.calls[0].metadata["diff"]
            .as_str()
            .is_some_and(|d| !d.is_empty())
    );
    assert!(
        std::fs::read_to_string(played.run.dir.join("notes.txt"))
            .unwrap()
            .starts_with("line 1\n")
    );
    let all = [main.session.clone(), sub.session.clone()];
    assert_eq!(
        common::flagged(&all, &DetectConfig::default()),
        vec![main_id.clone()]
    );
    assert_eq!(played.server.conversation_requests("AW-SUBLOOP").len(), 46);
    save_fixture(&played, "subagent");
}

/// With `AGENTWATCH_UPDATE_FIXTURES=1`: the run's rollouts under
/// `fixtures/codex/0.169.0/SCENARIO/` as under `CODEX_HOME`, machine paths replaced by
/// `/home/user/work`, long instruction texts shortened.
fn save_fixture(played: &Played, scenario: &str) {
    if std::env::var_os("AGENTWATCH_UPDATE_FIXTURES").is_none() {
        return;
    }
    let root = played.root.to_string_lossy().into_owned();
    let replacements = [(root, "/home/user/work".to_owned())];
    let out = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/codex/0.169.0")
        .join(scenario);
    let _ = std::fs::remove_dir_all(&out);
    for path in played.run.rollouts() {
        let relative = path.strip_prefix(&played.run.codex_home).unwrap();
        let target = out.join(relative);
        std::fs::create_dir_all(target.parent().unwrap()).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        // Calls, outputs and events as written; instructions, tool lists and world state
        // (large, not ours to copy) shortened.
        let scrubbed = common::scrub_with(&bytes, &replacements, |v| {
            (v["type"] == "response_item" && v["payload"]["role"] != "developer")
                || v["type"] == "event_msg"
        });
        std::fs::write(target, scrubbed).unwrap();
    }
}
