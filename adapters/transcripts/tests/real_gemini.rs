//! The real Gemini CLI (0.61.0) driven offline by a scripted model: `gemini -p --yolo` runs
//! real tools in a real git repository and writes its real session files (messages
//! re-appended as their calls finish, `$set` checkpoints), which the reader must read whole
//! and tailed. Every call is counted independently of the reader (a `serde_json::Value`
//! walk) and must match the script.
//!
//! `AGENTWATCH_UPDATE_FIXTURES=1` also writes the sessions, scrubbed, under
//! `fixtures/gemini/0.61.0/` (the byte tests of `tests/fixtures_gemini.rs` read them).

mod common;

use agentwatch_testkit::TempDir;
use agentwatch_testkit::cli::AgentDone;
use agentwatch_testkit::gemini::{GeminiRun, GeminiServer, require_binary};
use agentwatch_testkit::script::{Script, Turn};
use agentwatch_transcripts::{
    GeminiReader, Transcript, TranscriptKind, discover_gemini, peek_gemini, read_gemini_sessions,
};
use detect_core::{CallStatus, DetectConfig, Profile, Session};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A finished run of the CLI.
struct Played {
    _root: TempDir,
    root: PathBuf,
    run: GeminiRun,
    server: GeminiServer,
    done: AgentDone,
}

/// Run gemini on `script` with `prompt` in a fresh git repository holding `files`, with its
/// own loop detection on or off.
fn play(script: Script, prompt: &str, files: &[(&str, &str)], loop_detection: bool) -> Played {
    let root = TempDir::new("aw-gemini");
    let server = GeminiServer::start(script);
    let mut run = GeminiRun::new(require_binary(), &server, &root.path, prompt);
    run.loop_detection = loop_detection;
    common::init_repo(&run.dir, files);
    let done = run.run(Duration::from_secs(300)).expect("gemini ran");
    assert!(
        done.status.success(),
        "gemini failed: {}\n{}",
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

/// A session file found, its bytes, its session read whole, and its reader.
struct Chat {
    transcript: Transcript,
    bytes: Vec<u8>,
    session: Session,
    reader: GeminiReader,
}

/// The session files discover finds (every one the CLI wrote), each read whole.
fn chats(played: &Played) -> Vec<Chat> {
    let found = discover_gemini(&played.run.gemini_dir).unwrap();
    assert!(found.problems.is_empty(), "{:?}", found.problems);
    let listed: Vec<PathBuf> = found.transcripts.iter().map(|t| t.path.clone()).collect();
    assert_eq!(listed, played.run.sessions());
    found
        .transcripts
        .into_iter()
        .map(|t| {
            let bytes = std::fs::read(&t.path).unwrap();
            let name = t.path.to_string_lossy().into_owned();
            let mut sessions = read_gemini_sessions(&bytes, &name).unwrap();
            let session = sessions.remove(0);
            let mut reader = GeminiReader::new(t.gemini_file());
            for line in bytes.split(|b| *b == b'\n') {
                reader.push_line(line);
            }
            Chat {
                transcript: t,
                bytes,
                session,
                reader,
            }
        })
        .collect()
}

/// Every call of the session is read, in order, as the script says, and the history was
/// never rewritten.
fn assert_reads_every_call(chat: &Chat, script: &Script, marker: &str) {
    let calls = common::gemini_calls(&chat.bytes);
    let names: Vec<&str> = calls.iter().map(|(_, n)| n.as_str()).collect();
    let scripted = script.tool_calls(marker);
    let expected: Vec<&str> = scripted.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        expected[..names.len()],
        "the session holds the script's calls"
    );
    assert_eq!(chat.session.calls.len(), calls.len(), "every call is read");
    assert!(chat.session.calls.iter().all(|c| c.status.is_counted()));
    assert!(chat.session.calls.iter().all(|c| c.output_hash.is_some()));
    let timed =
        |c: &detect_core::Call| c.time.is_some_and(|t| t.start.is_some() && t.end.is_some());
    assert!(chat.session.calls.iter().all(timed));
    assert_eq!(chat.reader.meta().counters.corrupt_lines, 0);
    let reader = GeminiReader::new(chat.transcript.gemini_file());
    let (tailed, reader) = common::tail_in_pieces(&chat.bytes, reader, 2053);
    assert_eq!(tailed, chat.session.calls);
    assert_eq!(
        reader.generation(),
        0,
        "Gemini's checkpoints kept the history handed out"
    );
}

fn shell(command: &str) -> Turn {
    Turn::tool("run_shell_command", json!({ "command": command }))
}

fn read(path: &str) -> Turn {
    Turn::tool("read_file", json!({ "file_path": path }))
}

/// 28 calls that each look at something new: no signal can fire on them.
fn preamble() -> Vec<Turn> {
    let mut turns: Vec<Turn> = (0..20).map(|i| read(&format!("src/f{i}.txt"))).collect();
    turns.push(Turn::tool("list_directory", json!({"dir_path": "."})));
    turns.push(Turn::tool("glob", json!({"pattern": "**/*.txt"})));
    turns.push(Turn::tool("grep_search", json!({"pattern": "line"})));
    turns.push(Turn::tool(
        "read_file",
        json!({"file_path": "notes.txt", "start_line": 1, "end_line": 1}),
    ));
    for cmd in ["git status --short", "pwd", "ls -la", "git log --oneline"] {
        turns.push(shell(cmd));
    }
    turns
}

fn files_with(extra: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut files: Vec<(String, String)> = (0..20)
        .map(|i| (format!("src/f{i}.txt"), format!("file {i}\n")))
        .collect();
    files.extend(
        extra
            .iter()
            .map(|(a, b)| ((*a).to_owned(), (*b).to_owned())),
    );
    files
}

const NOTES: &str = "line one\nline two\n";
const CHECK: &str = "echo 'check failed: no value' >&2\nexit 1\n";

#[test]
#[ignore = "needs gemini (npm @google/gemini-cli)"]
fn a_scripted_loop_is_read_call_by_call_and_flagged_within_15_calls() {
    let mut turns = preamble();
    let loop_start = turns.len();
    turns.extend((0..20).map(|_| shell("sh check.sh")));
    let script = Script::new().conversation("AW-LOOP", turns);
    let files = files_with(&[("notes.txt", NOTES), ("check.sh", CHECK)]);
    let files: Vec<(&str, &str)> = files
        .iter()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    // Gemini's own detector off: it would stop the run after a few identical calls.
    let played = play(
        script.clone(),
        "AW-LOOP: make the check pass",
        &files,
        false,
    );
    let found = chats(&played);
    assert_eq!(found.len(), 1, "one session, no subagent");
    let chat = &found[0];
    assert_reads_every_call(chat, &script, "AW-LOOP");
    let session = &chat.session;
    assert_eq!(session.calls.len(), 48);
    let head = peek_gemini(&chat.transcript.path).unwrap();
    assert_eq!(head.session_id.as_ref(), Some(&session.id));
    assert_eq!(
        session.directory.as_deref(),
        Some(played.run.dir.to_str().unwrap())
    );
    assert_eq!(
        session.title.as_deref(),
        Some("AW-LOOP: make the check pass")
    );
    assert!(chat.reader.meta().model.is_some());
    assert_eq!(chat.reader.meta().agent_loop_verdict, None);
    for check in &session.calls[loop_start..] {
        assert_eq!(check.input, json!({"command": "sh check.sh"}));
        // Gemini says `success`; the exit code is in the output only.
        assert_eq!(
            (&check.status, &check.metadata),
            (&CallStatus::Completed, &json!({"exit": 1}))
        );
        assert_eq!(
            check.output_hash, session.calls[loop_start].output_hash,
            "the same output"
        );
    }
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
#[ignore = "needs gemini (npm @google/gemini-cli)"]
fn geminis_own_loop_verdict_is_kept_though_its_checkpoint_drops_it() {
    let mut turns = vec![shell("sh check.sh")];
    turns.extend((0..12).map(|_| read("notes.txt")));
    let script = Script::new().conversation("AW-DETECT", turns);
    let played = play(
        script.clone(),
        "AW-DETECT: read the notes",
        &[("notes.txt", NOTES), ("check.sh", CHECK)],
        true,
    );
    assert!(
        played.done.stdout.contains("Loop detected"),
        "{}",
        played.done.stdout
    );
    let found = chats(&played);
    let chat = &found[0];
    assert_reads_every_call(chat, &script, "AW-DETECT");
    let reads = chat
        .session
        .calls
        .iter()
        .filter(|c| c.tool == "read")
        .count();
    assert!(
        (3..12).contains(&reads),
        "Gemini stopped the loop after {reads} reads"
    );
    let verdict = chat
        .reader
        .meta()
        .agent_loop_verdict
        .clone()
        .expect("the agent's verdict");
    assert!(
        verdict.text.starts_with("Potential loop detected"),
        "{verdict:?}"
    );
    assert!(verdict.text.contains("read_file"), "{verdict:?}");
    assert_eq!(verdict.calls_before, chat.session.calls.len());
    // Counted without the reader: the last checkpoint has no verdict message.
    let text = String::from_utf8_lossy(&chat.bytes);
    let last_checkpoint = text
        .lines()
        .rev()
        .find(|l| l.contains("\"$set\":{\"messages\""))
        .unwrap();
    assert!(!last_checkpoint.contains("Potential loop detected"));
    assert!(text.contains("Potential loop detected"));
    save_fixture(&played, "verdict");
}

#[test]
#[ignore = "needs gemini (npm @google/gemini-cli)"]
fn a_scripted_healthy_session_lands_its_edits_and_is_not_flagged() {
    let mut turns = vec![Turn::tools(&[
        ("read_file", json!({"file_path": "README.md"})),
        ("read_file", json!({"file_path": "test.sh"})),
    ])];
    for i in 0..12 {
        turns.push(read("counter.txt"));
        turns.push(Turn::tool(
            "replace",
            json!({"file_path": "counter.txt", "instruction": format!("count to {}", i + 1),
                   "old_string": format!("count = {i}"), "new_string": format!("count = {}", i + 1)}),
        ));
        turns.push(shell("sh test.sh"));
        if i % 3 == 0 {
            turns.push(shell(&format!(
                "git add -A && git -c user.name=T -c user.email=t@example.invalid commit -qm 'count {}'",
                i + 1
            )));
        }
    }
    turns.push(Turn::tool(
        "write_file",
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
        true,
    );
    assert_eq!(
        std::fs::read_to_string(played.run.dir.join("counter.txt")).unwrap(),
        "count = 12\n",
        "the edits were real"
    );
    let found = chats(&played);
    assert_eq!(found.len(), 1);
    let chat = &found[0];
    assert_reads_every_call(chat, &script, "AW-HEALTHY");
    let session = &chat.session;
    assert_eq!(session.calls.len(), script.tool_calls("AW-HEALTHY").len());
    let edits: Vec<_> = session.calls.iter().filter(|c| c.tool == "edit").collect();
    assert_eq!(edits.len(), 12);
    for edit in &edits {
        assert_eq!(
            edit.metadata["filediff"],
            json!({"additions": 1, "deletions": 1}),
            "{edit:?}"
        );
        assert!(edit.input.get("instruction").is_none());
    }
    let shells: Vec<_> = session.calls.iter().filter(|c| c.tool == "bash").collect();
    assert_eq!(shells.len(), 16);
    assert!(
        shells.iter().all(|c| c.metadata == json!({"exit": 0})),
        "tests pass, commits land"
    );
    let write = session.calls.last().unwrap();
    assert_eq!(
        (write.tool.as_str(), &write.metadata["type"]),
        ("write", &json!("create"))
    );
    assert_eq!(chat.reader.meta().agent_loop_verdict, None);
    assert!(common::flagged(std::slice::from_ref(session), &DetectConfig::default()).is_empty());
    assert_eq!(common::first_flag_at(session), None);
    save_fixture(&played, "healthy");
}

#[test]
#[ignore = "needs gemini (npm @google/gemini-cli)"]
fn a_subagent_is_found_under_its_parent_and_its_loop_rolls_up() {
    let parent_turns = vec![
        read("notes.txt"),
        Turn::tool(
            "invoke_agent",
            json!({"agent_name": "generalist", "prompt": "AW-SUBLOOP: read the notes until they make sense"}),
        ),
    ];
    let mut sub_turns = vec![Turn::tool(
        "replace",
        json!({"file_path": "notes.txt", "instruction": "number the first line",
               "old_string": "line one", "new_string": "line 1"}),
    )];
    // The generalist has 20 turns: an edit, 17 rereads, and its answer.
    sub_turns.extend((0..17).map(|_| read("notes.txt")));
    sub_turns.push(Turn::tool(
        "complete_task",
        json!({"result": {"response": "They make sense."}}),
    ));
    let script = Script::new()
        .conversation("AW-PARENT", parent_turns)
        .conversation("AW-SUBLOOP", sub_turns);
    let played = play(
        script.clone(),
        "AW-PARENT: understand the notes",
        &[("notes.txt", NOTES)],
        false,
    );
    let found = chats(&played);
    assert_eq!(found.len(), 2, "the session and its subagent");
    let main = found
        .iter()
        .find(|c| matches!(c.transcript.kind, TranscriptKind::GeminiSession { .. }))
        .unwrap();
    let sub = found
        .iter()
        .find(|c| matches!(c.transcript.kind, TranscriptKind::GeminiSubagent { .. }))
        .unwrap();
    assert_reads_every_call(main, &script, "AW-PARENT");
    assert_reads_every_call(sub, &script, "AW-SUBLOOP");
    assert_eq!(
        sub.transcript.parent_session_id(),
        Some(main.session.id.as_str())
    );
    assert_eq!(sub.session.parent_id.as_ref(), Some(&main.session.id));
    assert_eq!(sub.reader.meta().kind.as_deref(), Some("subagent"));
    let spawn = &main.session.calls[1];
    assert_eq!(spawn.tool, "task");
    assert_eq!(spawn.metadata["agentId"], json!(sub.session.id));
    assert_eq!(main.reader.meta().spawns[0].agent_id, sub.session.id);
    assert!(
        sub.session.calls[0].metadata["diff"]
            .as_str()
            .is_some_and(|d| !d.is_empty())
    );
    assert_eq!(
        sub.session.title.as_deref(),
        Some("AW-SUBLOOP: read the notes until they make sense")
    );
    // 19 calls: under the design's 40-call floor; the precise profile's repeat rule speaks,
    // for the parent's tree.
    let all = [main.session.clone(), sub.session.clone()];
    let precise = DetectConfig::with_profile(Profile::Precise);
    assert_eq!(
        common::flagged(&all, &precise),
        vec![main.session.id.clone()]
    );
    // Each call answered one request of the subagent's own conversation.
    assert!(played.server.conversation_requests("AW-SUBLOOP").len() >= sub.session.calls.len());
    save_fixture(&played, "subagent");
}

/// With `AGENTWATCH_UPDATE_FIXTURES=1`: the run's sessions under
/// `fixtures/gemini/0.61.0/SCENARIO/` as under `~/.gemini` (with `tmp/project/.project_root`),
/// machine paths replaced by `/home/user/work`, Gemini's tool descriptions shortened.
fn save_fixture(played: &Played, scenario: &str) {
    if std::env::var_os("AGENTWATCH_UPDATE_FIXTURES").is_none() {
        return;
    }
    let root = played.root.to_string_lossy().into_owned();
    let replacements = [(root, "/home/user/work".to_owned())];
    let out = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/gemini/0.61.0")
        .join(scenario);
    let _ = std::fs::remove_dir_all(&out);
    let mut paths = played.run.sessions();
    paths.extend(
        std::fs::read_dir(played.run.gemini_dir.join("tmp"))
            .unwrap()
            .flatten()
            .map(|e| e.path().join(".project_root"))
            .filter(|p| p.is_file()),
    );
    for path in paths {
        let relative = path.strip_prefix(&played.run.gemini_dir).unwrap();
        let target = out.join(relative);
        std::fs::create_dir_all(target.parent().unwrap()).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        let scrubbed = if path.extension().is_some_and(|e| e == "jsonl") {
            scrub_descriptions(&common::scrub_with(&bytes, &replacements, |_| true))
        } else {
            common::scrub_with(&bytes, &replacements, |_| true)
        };
        std::fs::write(target, scrubbed).unwrap();
    }
}

/// Gemini's own tool descriptions (`toolCalls[].description`, up to a page of Google's
/// text) replaced by their length; everything else kept byte for byte.
fn scrub_descriptions(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    for line in bytes.split_inclusive(|b| *b == b'\n') {
        let long = line.len() > 1000 && line.windows(14).any(|w| w == b"\"description\":");
        match serde_json::from_slice::<Value>(line) {
            Ok(mut value) if long => {
                shorten_descriptions(&mut value);
                out.extend_from_slice(value.to_string().as_bytes());
                out.push(b'\n');
            }
            _ => out.extend_from_slice(line),
        }
    }
    out
}

fn shorten_descriptions(value: &mut Value) {
    match value {
        Value::Object(map) => {
            for (key, v) in map.iter_mut() {
                match v {
                    Value::String(s) if key == "description" && s.chars().count() > 160 => {
                        *s = format!("(scrubbed: {} characters)", s.chars().count());
                    }
                    _ => shorten_descriptions(v),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(shorten_descriptions),
        _ => {}
    }
}
