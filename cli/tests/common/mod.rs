//! What the live tests share: `agentwatch run` started as a user starts it (nothing
//! configured but a webhook channel) in a home holding an agent's directory, and the webhook
//! that receives its alerts. The tests wait for what the processes write, never for time.

#![allow(dead_code)] // each test binary uses part of it

use agentwatch_testkit::{HttpServer, Reply, TempDir};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a test waits before it fails (a hung process, not a slow machine).
pub const PATIENCE: Duration = Duration::from_secs(180);

pub const NOTES: &str = "line one\nline two\nline three\nline four\nline five\n";

/// A home with an agent's directory, a webhook receiver, and `agentwatch run` watching.
pub struct World {
    pub tmp: TempDir,
    pub hook: HttpServer,
    run: Option<Child>,
    pub journal: Arc<Mutex<Vec<String>>>,
}

impl World {
    /// A world whose home has the agent's directory `agent_dir` (`.claude`, `.codex`,
    /// `.gemini`): the one directory the follower watches.
    pub fn new(name: &str, agent_dir: &str) -> Self {
        let tmp = TempDir::new(&format!("aw-live-{name}"));
        let hook = HttpServer::start(|_| Reply::json(200, &json!({"ok": true})));
        std::fs::create_dir_all(tmp.path.join("home").join(agent_dir)).unwrap();
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

    pub fn home(&self) -> PathBuf {
        self.tmp.path.join("home")
    }

    /// `agentwatch run`, as a user starts it: nothing but HOME and PATH.
    pub fn start(&mut self) {
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
        self.until("the follower watching the agent's directory", || {
            self.journal()
                .lines()
                .any(|l| l.contains("follow=start") && l.contains("directories=1"))
        });
    }

    pub fn journal(&self) -> String {
        self.journal.lock().unwrap().join("\n")
    }

    pub fn until(&self, what: &str, mut holds: impl FnMut() -> bool) {
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
    pub fn events(&self) -> Vec<Value> {
        self.hook.requests().iter().map(|r| r.body_json()).collect()
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

impl World {
    /// Wait for the first trigger on the webhook while `agent` (a running agent CLI) still
    /// runs, then for the agent to end well; the trigger.
    pub fn trigger_while_running(&self, agent: &mut Child) -> Value {
        self.until("a trigger on the webhook", || {
            self.events().iter().any(|e| e["state"] == "trigger")
        });
        let still_running = agent.try_wait().unwrap().is_none();
        let done = agent.wait().unwrap();
        assert!(done.success(), "the agent exits 0");
        assert!(
            still_running,
            "the alert came while the loop was still running:\n{}",
            self.journal()
        );
        self.events()
            .into_iter()
            .find(|e| e["state"] == "trigger")
            .unwrap()
    }

    /// Wait for a tick that judged the session of `file` (one session) after its last line,
    /// and find no alert sent about it.
    pub fn assert_quiet(&self, file: &Path, id: &str) {
        self.settled_tick(file, 1);
        assert!(
            self.events().is_empty(),
            "no alert on a healthy session {id}: {:?}",
            self.events()
        );
    }

    /// Wait for a tick that started after the file's last line was written and judged the
    /// sessions: a blank line (read as nothing by every reader) wakes one.
    pub fn settled_tick(&self, file: &Path, sessions: usize) {
        let seen = self.journal.lock().unwrap().len();
        let mut f = std::fs::OpenOptions::new().append(true).open(file).unwrap();
        std::io::Write::write_all(&mut f, b"\n").unwrap();
        let want = format!("sessions={sessions}");
        self.until("a tick after the session ended", || {
            self.journal.lock().unwrap()[seen..]
                .iter()
                .any(|l| l.contains("tick=done") && l.contains(&want))
        });
    }
}

/// A trigger keyed `key` whose title names the agent, the session's title and its working
/// directory.
pub fn assert_names(trigger: &Value, key: &str, agent: &str, title: &str, dir: &Path) {
    assert_eq!(trigger["dedup_key"], key);
    let shown = trigger["title"].as_str().unwrap();
    assert!(
        shown.contains(agent) && shown.contains(title),
        "the notification names the agent and the session: {shown}"
    );
    assert!(
        shown.contains(dir.to_str().unwrap()),
        "and its working directory: {shown}"
    );
}

/// A home (`dir/home`, for `agentwatch_testkit::isolated_command`) whose configuration asks no
/// model and sends to one webhook channel, `hook`, at `hook`'s `/events`, timing out after 2 s.
/// `watchdog` and `channel` are more lines for those sections. Returns the home.
pub fn webhook_home(dir: &Path, hook: &HttpServer, watchdog: &str, channel: &str) -> PathBuf {
    let home = dir.join("home");
    let config = home.join("config/agentwatch");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(
        config.join("config.toml"),
        format!(
            "[watchdog]\nlocal_llm_enabled = false\n{watchdog}\n[[channels]]\nname = \"hook\"\ntype = \"webhook\"\nurl = \"{}/events\"\ntimeout_s = 2\n{channel}",
            hook.url()
        ),
    )
    .unwrap();
    home
}
