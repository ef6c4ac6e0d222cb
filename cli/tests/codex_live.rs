//! `agentwatch run` watching real Codex CLI threads live: the real CLI (npm `@openai/codex`)
//! driven offline by a scripted Responses API server writes its real rollouts under
//! `~/.codex` while `agentwatch run` runs with no source configured (only a webhook channel).
//! A loop is alerted while the thread still runs, keyed on its thread id and naming the agent,
//! the title and the working directory; a healthy thread is not. The tests wait for what the
//! processes write, never for time.

mod common;

use agentwatch_testkit::codex::{CodexRun, ResponsesServer, require_binary};
use agentwatch_testkit::script::{Script, Turn};
use common::{PATIENCE, World, assert_names};
use serde_json::json;
use std::time::Duration;

/// A `codex exec` run whose `CODEX_HOME` is this home's `~/.codex`, its project seeded with
/// `files`.
fn codex(
    world: &World,
    server: &ResponsesServer,
    prompt: &str,
    files: &[(&str, &str)],
) -> CodexRun {
    let mut run = CodexRun::new(require_binary(), server, &world.tmp.path, prompt);
    run.codex_home = world.home().join(".codex");
    for (name, text) in files {
        std::fs::write(run.dir.join(name), text).unwrap();
    }
    run
}

fn exec(cmd: &str) -> Turn {
    Turn::tool("exec_command", json!({ "cmd": cmd }))
}

/// The thread id of the run's one rollout.
fn thread_id(run: &CodexRun) -> String {
    let rollouts = run.rollouts();
    assert_eq!(rollouts.len(), 1, "one thread: {rollouts:?}");
    thread_of(&rollouts[0])
}

/// A rollout's thread id: `rollout-<time>-<thread id>.jsonl`, its name's last 36 characters.
fn thread_of(rollout: &std::path::Path) -> String {
    let name = rollout.file_name().unwrap().to_string_lossy().into_owned();
    let stem = name.strip_suffix(".jsonl").expect("a plain rollout");
    stem[stem.len() - 36..].to_owned()
}

#[test]
#[ignore = "needs codex (npm @openai/codex)"]
fn a_looping_thread_is_alerted_while_it_runs() {
    let mut world = World::new("codex-loop", ".codex");
    world.start();
    // 60 runs of one failing check, one model turn every 200 ms: the thread runs for a while.
    let turns = (0..60).map(|_| exec("sh check.sh")).collect();
    let server = ResponsesServer::start(
        Script::new()
            .conversation("AW-LIVE-LOOP", turns)
            .paced(Duration::from_millis(200)),
    );
    let run = codex(
        &world,
        &server,
        "AW-LIVE-LOOP: make the check pass",
        &[("check.sh", "echo 'check failed' >&2\nexit 1\n")],
    );
    let mut child = run.spawn().unwrap();
    let trigger = world.trigger_while_running(&mut child);
    let key = format!("codex-loop:{}", thread_id(&run));
    assert_names(
        &trigger,
        &key,
        "Codex CLI",
        "AW-LIVE-LOOP: make the check pass",
        &run.dir,
    );
}

#[test]
#[ignore = "needs codex (npm @openai/codex)"]
fn a_healthy_thread_is_read_and_not_alerted() {
    let mut world = World::new("codex-healthy", ".codex");
    world.start();
    let mut turns = vec![exec("cat test.sh")];
    for i in 0..10 {
        turns.push(exec("cat counter.txt"));
        turns.push(Turn::tool(
            "apply_patch",
            json!(format!(
                "*** Begin Patch\n*** Update File: counter.txt\n@@\n-count = {i}\n+count = {}\n*** End Patch\n",
                i + 1
            )),
        ));
        turns.push(exec("sh test.sh"));
    }
    let server = ResponsesServer::start(Script::new().conversation("AW-LIVE-OK", turns));
    let run = codex(
        &world,
        &server,
        "AW-LIVE-OK: count to ten, testing as you go",
        &[
            ("counter.txt", "count = 0\n"),
            (
                "test.sh",
                "grep -q '^count = [0-9]*$' counter.txt && echo ok\n",
            ),
        ],
    );
    let done = run.run(PATIENCE).unwrap();
    assert!(done.status.success(), "{}", done.stderr);
    let id = thread_id(&run);
    world.assert_quiet(&run.rollouts()[0], &id);
}

#[test]
#[ignore = "needs codex (npm @openai/codex)"]
fn a_subagents_loop_is_alerted_on_its_parent_thread() {
    let mut world = World::new("codex-subagent", ".codex");
    world.start();
    let parent = vec![
        exec("cat notes.txt"),
        Turn::tool(
            "multi_agent_v1/spawn_agent",
            json!({"message": "AW-LIVE-SUB: read the notes until they make sense"}),
        ),
        Turn::tool(
            "multi_agent_v1/wait_agent",
            json!({"targets": ["$AGENT"], "timeout_ms": 120000}),
        ),
    ];
    let sub = (0..45).map(|_| exec("cat notes.txt")).collect();
    let server = ResponsesServer::start(
        Script::new()
            .conversation("AW-LIVE-PARENT", parent)
            .conversation("AW-LIVE-SUB", sub),
    );
    let run = codex(
        &world,
        &server,
        "AW-LIVE-PARENT: understand the notes",
        &[("notes.txt", "line one\nline two\n")],
    );
    let done = run.run(PATIENCE).unwrap();
    assert!(done.status.success(), "{}", done.stderr);
    // The parent's rollout is the one whose first line names no parent thread.
    let parent_file = run
        .rollouts()
        .into_iter()
        .find(|f| {
            let head = std::fs::read_to_string(f).unwrap();
            !head
                .lines()
                .next()
                .unwrap_or_default()
                .contains("parent_thread_id")
        })
        .expect("the parent's rollout");
    let key = format!("codex-loop:{}", thread_of(&parent_file));
    world.until("a trigger keyed on the parent thread", || {
        world
            .events()
            .iter()
            .any(|e| e["state"] == "trigger" && e["dedup_key"] == key)
    });
    assert!(
        world.events().iter().all(|e| e["dedup_key"] == key),
        "one tree, one key: {:?}",
        world.events()
    );
}
