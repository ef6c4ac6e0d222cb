//! `agentwatch run` watching real Claude Code sessions live: the real CLI (npm
//! `@anthropic-ai/claude-code`) driven offline by a scripted model server writes its real
//! transcripts under `~/.claude` while `agentwatch run` runs with no source configured (only a
//! webhook channel). A loop is alerted while the session still runs; a healthy session is not;
//! a subagent's loop keys on its parent. The tests wait for what the processes write, never for
//! time.

use agentwatch_testkit::claude::{ClaudeRun, ModelServer, Script, Turn, require_binary};
use agentwatch_testkit::{HttpServer, Reply, TempDir};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a test waits before it fails (a hung process, not a slow machine).
const PATIENCE: Duration = Duration::from_secs(180);

const NOTES: &str = "line one\nline two\nline three\nline four\nline five\n";

/// A home with `~/.claude`, a webhook receiver, and `agentwatch run` watching.
struct World {
    tmp: TempDir,
    hook: HttpServer,
    run: Option<Child>,
    journal: Arc<Mutex<Vec<String>>>,
}

impl World {
    fn new(name: &str) -> Self {
        let tmp = TempDir::new(&format!("aw-claude-{name}"));
        let hook = HttpServer::start(|_| Reply::json(200, &json!({"ok": true})));
        std::fs::create_dir_all(tmp.path.join("home/.claude")).unwrap();
        let config = tmp.path.join("home/.config/agentwatch/config.toml");
        std::fs::create_dir_all(config.parent().unwrap()).unwrap();
        std::fs::write(
            &config,
            format!(
                "[[channels]]\nname = \"hook\"\ntype = \"webhook\"\nurl = {:?}\n",
                hook.url()
            ),
        )
        .unwrap();
        Self {
            tmp,
            hook,
            run: None,
            journal: Arc::new(Mutex::new(Vec::new())),
        }
    }

    fn home(&self) -> PathBuf {
        self.tmp.path.join("home")
    }

    /// `agentwatch run`, as a user starts it: nothing but HOME and PATH.
    fn start(&mut self) {
        let mut child = Command::new(env!("CARGO_BIN_EXE_agentwatch"))
            .arg("run")
            .current_dir(&self.tmp.path)
            .env_clear()
            .env("HOME", self.home())
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = child.stderr.take().unwrap();
        let sink = Arc::clone(&self.journal);
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                sink.lock().unwrap().push(line);
            }
        });
        self.run = Some(child);
        // The follower watches once it says so.
        self.until("the follower watching ~/.claude", || {
            self.journal()
                .lines()
                .any(|l| l.contains("follow=start") && l.contains("directories=1"))
        });
    }

    fn journal(&self) -> String {
        self.journal.lock().unwrap().join("\n")
    }

    fn until(&self, what: &str, mut holds: impl FnMut() -> bool) {
        let deadline = Instant::now() + PATIENCE;
        while !holds() {
            assert!(
                Instant::now() < deadline,
                "never saw {what}:\n{}",
                self.journal()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The events the webhook received, in order.
    fn events(&self) -> Vec<Value> {
        self.hook.requests().iter().map(|r| r.body_json()).collect()
    }

    /// A Claude Code run in this home's `~/.claude`, its project seeded with `files`.
    fn claude(&self, server: &ModelServer, prompt: &str, files: &[(&str, &str)]) -> ClaudeRun {
        let mut run = ClaudeRun::new(require_binary(), server, &self.tmp.path.join("c"), prompt);
        run.config_dir = self.home().join(".claude");
        for (name, text) in files {
            std::fs::write(run.dir.join(name), text).unwrap();
        }
        run
    }
}

impl Drop for World {
    fn drop(&mut self) {
        if let Some(mut run) = self.run.take() {
            let _ = run.kill();
            let _ = run.wait();
        }
    }
}

/// The main transcript's session id (its file name).
fn main_session(config_dir: &Path) -> String {
    let run = config_dir.join("projects");
    for project in std::fs::read_dir(run).unwrap().flatten() {
        for file in std::fs::read_dir(project.path()).unwrap().flatten() {
            let name = file.file_name().to_string_lossy().into_owned();
            if let Some(id) = name.strip_suffix(".jsonl") {
                return id.to_owned();
            }
        }
    }
    panic!("no transcript under {}", config_dir.display());
}

#[test]
#[ignore = "needs claude (npm @anthropic-ai/claude-code)"]
fn a_looping_session_is_alerted_while_it_runs() {
    let mut world = World::new("loop");
    world.start();
    // 60 reads of one file, one model turn every 200 ms: the session runs for a while.
    let turns = (0..60)
        .map(|_| Turn::tool("Read", json!({"file_path": "notes.txt"})))
        .collect();
    let server = ModelServer::start(
        Script::new()
            .conversation("AW-LIVE-LOOP", turns)
            .paced(Duration::from_millis(200)),
    );
    let run = world.claude(
        &server,
        "AW-LIVE-LOOP: read the notes",
        &[("notes.txt", NOTES)],
    );
    let mut claude = run.spawn().unwrap();
    world.until("a trigger on the webhook", || {
        world.events().iter().any(|e| e["state"] == "trigger")
    });
    let still_running = claude.try_wait().unwrap().is_none();
    let done = claude.wait().unwrap();
    assert!(done.success(), "claude exits 0");
    assert!(
        still_running,
        "the alert came while the loop was still running:\n{}",
        world.journal()
    );
    let id = main_session(&run.config_dir);
    let trigger = world
        .events()
        .into_iter()
        .find(|e| e["state"] == "trigger")
        .unwrap();
    assert_eq!(trigger["dedup_key"], format!("claude-loop:{id}"));
    let title = trigger["title"].as_str().unwrap();
    assert!(
        title.contains("Claude Code") && title.contains("AW-LIVE-LOOP: read the notes"),
        "the notification names the agent and the session: {title}"
    );
    assert!(
        title.contains(run.dir.to_str().unwrap()),
        "and its working directory: {title}"
    );
}

#[test]
#[ignore = "needs claude (npm @anthropic-ai/claude-code)"]
fn a_healthy_session_is_read_and_not_alerted() {
    let mut world = World::new("healthy");
    world.start();
    let mut turns = vec![Turn::tool("Read", json!({"file_path": "test.sh"}))];
    for i in 0..10 {
        turns.push(Turn::tool("Read", json!({"file_path": "counter.txt"})));
        turns.push(Turn::tool(
            "Edit",
            json!({"file_path": "counter.txt", "old_string": format!("count = {i}"), "new_string": format!("count = {}", i + 1)}),
        ));
        turns.push(Turn::tool(
            "Bash",
            json!({"command": "sh test.sh", "description": "Run the tests"}),
        ));
    }
    let server = ModelServer::start(Script::new().conversation("AW-LIVE-OK", turns));
    let run = world.claude(
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
    let id = main_session(&run.config_dir);
    // A tick that started after its last line was written judges it whole: one more line of a
    // record type no reader knows (skipped, as Claude Code's own new types are) wakes one.
    let seen = world.journal.lock().unwrap().len();
    let transcript = run.transcripts().pop().unwrap();
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(&transcript)
        .unwrap();
    std::io::Write::write_all(&mut file, b"{\"type\":\"aw-test-marker\"}\n").unwrap();
    world.until("a tick after the session ended", || {
        world.journal.lock().unwrap()[seen..]
            .iter()
            .any(|l| l.contains("tick=done") && l.contains("sessions=1") && l.contains("flagged=0"))
    });
    assert!(
        world.events().is_empty(),
        "no alert on a healthy session {id}: {:?}",
        world.events()
    );
}

#[test]
#[ignore = "needs claude (npm @anthropic-ai/claude-code)"]
fn a_subagents_loop_is_alerted_on_its_parent() {
    let mut world = World::new("subagent");
    world.start();
    let parent = vec![Turn::tool(
        "Agent",
        json!({"description": "Study the notes", "prompt": "AW-LIVE-SUB: read the notes until they make sense", "subagent_type": "general-purpose"}),
    )];
    let sub = (0..45)
        .map(|_| Turn::tool("Read", json!({"file_path": "notes.txt"})))
        .collect();
    let server = ModelServer::start(
        Script::new()
            .conversation("AW-LIVE-PARENT", parent)
            .conversation("AW-LIVE-SUB", sub),
    );
    let run = world.claude(
        &server,
        "AW-LIVE-PARENT: understand the notes",
        &[("notes.txt", NOTES)],
    );
    let done = run.run(PATIENCE).unwrap();
    assert!(done.status.success(), "{}", done.stderr);
    let id = main_session(&run.config_dir);
    world.until("a trigger keyed on the parent", || {
        world
            .events()
            .iter()
            .any(|e| e["state"] == "trigger" && e["dedup_key"] == format!("claude-loop:{id}"))
    });
    assert!(
        world
            .events()
            .iter()
            .all(|e| e["dedup_key"] == format!("claude-loop:{id}")),
        "one tree, one key: {:?}",
        world.events()
    );
}
