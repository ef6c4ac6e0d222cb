//! `agentwatch run` watching real Gemini CLI sessions live: the real CLI (npm
//! `@google/gemini-cli`) driven offline by a scripted `streamGenerateContent` server writes its
//! real sessions under `~/.gemini` while `agentwatch run` runs with no source configured (only
//! a webhook channel). A loop is alerted while the session still runs, keyed on its session
//! id and naming the agent, the title and the working directory; a healthy session is not.
//! The tests wait for what the processes write, never for time.

mod common;

use agentwatch_testkit::gemini::{GeminiRun, GeminiServer, require_binary};
use agentwatch_testkit::script::{Script, Turn};
use common::{PATIENCE, World, assert_names};
use serde_json::{Value, json};
use std::time::Duration;

/// A `gemini -p` run whose home is this world's (its sessions under `~/.gemini`), its project
/// seeded with `files`. Gemini's own loop detector is off: it would stop a loop after a few
/// identical calls, before any watchdog needs to.
fn gemini(world: &World, server: &GeminiServer, prompt: &str, files: &[(&str, &str)]) -> GeminiRun {
    let mut run = GeminiRun::new(require_binary(), server, &world.tmp.path, prompt);
    run.loop_detection = false;
    assert_eq!(run.gemini_dir, world.home().join(".gemini"));
    for (name, text) in files {
        std::fs::write(run.dir.join(name), text).unwrap();
    }
    run
}

fn shell(command: &str) -> Turn {
    Turn::tool("run_shell_command", json!({ "command": command }))
}

/// The run's one session file and its full session id (its first line's).
fn session(run: &GeminiRun) -> (std::path::PathBuf, String) {
    let files = run.sessions();
    assert_eq!(files.len(), 1, "one session: {files:?}");
    let text = std::fs::read_to_string(&files[0]).unwrap();
    let first: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    let id = first["sessionId"].as_str().unwrap().to_owned();
    (files[0].clone(), id)
}

#[test]
#[ignore = "needs gemini (npm @google/gemini-cli)"]
fn a_looping_session_is_alerted_while_it_runs() {
    let mut world = World::new("gemini-loop", ".gemini");
    let server = GeminiServer::start(
        Script::new()
            .conversation(
                "AW-LIVE-LOOP",
                (0..60).map(|_| shell("sh check.sh")).collect(),
            )
            .paced(Duration::from_millis(200)),
    );
    let run = gemini(
        &world,
        &server,
        "AW-LIVE-LOOP: make the check pass",
        &[("check.sh", "echo 'check failed' >&2\nexit 1\n")],
    );
    world.start();
    let mut child = run.spawn().unwrap();
    let trigger = world.trigger_while_running(&mut child);
    let key = format!("gemini-loop:{}", session(&run).1);
    assert_names(
        &trigger,
        &key,
        "Gemini CLI",
        "AW-LIVE-LOOP: make the check pass",
        &run.dir,
    );
}

#[test]
#[ignore = "needs gemini (npm @google/gemini-cli)"]
fn a_healthy_session_is_read_and_not_alerted() {
    let mut world = World::new("gemini-healthy", ".gemini");
    let mut turns = vec![Turn::tool("read_file", json!({"file_path": "test.sh"}))];
    for i in 0..10 {
        turns.push(Turn::tool("read_file", json!({"file_path": "counter.txt"})));
        turns.push(Turn::tool(
            "replace",
            json!({"file_path": "counter.txt", "old_string": format!("count = {i}"), "new_string": format!("count = {}", i + 1), "instruction": "count one more"}),
        ));
        turns.push(shell("sh test.sh"));
    }
    let server = GeminiServer::start(Script::new().conversation("AW-LIVE-OK", turns));
    let run = gemini(
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
    world.start();
    let done = run.run(PATIENCE).unwrap();
    assert!(done.status.success(), "{}", done.stderr);
    let (file, id) = session(&run);
    world.assert_quiet(&file, &id);
}
