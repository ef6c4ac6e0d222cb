//! What the live tests share: `agentwatch run` started as a user starts it (nothing
//! configured but a webhook channel) in a home holding an agent's directory (or none yet: the
//! agent is installed after `run` started), the webhook that receives its alerts (when each
//! arrived), the dashboard `run` serves, and what a first-week user checks on an alert. The
//! tests wait for what the processes write, never for time.

#![allow(dead_code)] // each test binary uses part of it

use agentwatch_testkit::{HttpServer, Reply, TempDir};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a test waits before it fails (a hung process, not a slow machine).
pub const PATIENCE: Duration = Duration::from_secs(180);

pub const NOTES: &str = "line one\nline two\nline three\nline four\nline five\n";

/// A home with an agent's directory, a webhook receiver, and `agentwatch run` watching.
pub struct World {
    pub tmp: TempDir,
    pub hook: HttpServer,
    /// When each request reached the webhook, in order.
    arrivals: Arc<Mutex<Vec<Instant>>>,
    run: Option<Child>,
    pub journal: Arc<Mutex<Vec<String>>>,
    /// Where `run` serves the dashboard (`[serve] listen`), when it does.
    pub serve: Option<String>,
}

impl World {
    /// A world whose home has the agent's directory `agent_dir` (`.claude`, `.codex`,
    /// `.gemini`).
    pub fn new(name: &str, agent_dir: &str) -> Self {
        let world = Self::empty(name, "");
        std::fs::create_dir_all(world.home().join(agent_dir)).unwrap();
        world
    }

    /// A world whose home has no agent's directory yet (an agent installed after `run`
    /// started makes it), where `run` also serves the dashboard on a port of its own; `config`
    /// is more configuration.
    pub fn served(name: &str, config: &str) -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let listen = format!("127.0.0.1:{port}");
        let mut world = Self::empty(
            name,
            &format!("[serve]\nenabled = true\nlisten = \"{listen}\"\n{config}"),
        );
        world.serve = Some(listen);
        world
    }

    /// A world whose home has no agent's directory yet; `config` is more configuration
    /// (sections before the webhook channel).
    pub fn empty(name: &str, config: &str) -> Self {
        let tmp = TempDir::new(&format!("aw-live-{name}"));
        let arrivals = Arc::new(Mutex::new(Vec::new()));
        let seen = Arc::clone(&arrivals);
        let hook = HttpServer::start(move |_| {
            seen.lock().unwrap().push(Instant::now());
            Reply::json(200, &json!({"ok": true}))
        });
        std::fs::create_dir_all(tmp.path.join("home")).unwrap();
        let path = tmp.path.join("home/.config/agentwatch/config.toml");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(
            &path,
            format!(
                "{config}[[channels]]\nname = \"hook\"\ntype = \"webhook\"\nurl = {:?}\n",
                hook.url()
            ),
        )
        .unwrap();
        Self {
            tmp,
            hook,
            arrivals,
            run: None,
            journal: Arc::new(Mutex::new(Vec::new())),
            serve: None,
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
        // The follower watches every agent's directory, there or not, once it says so.
        self.until("the follower watching the agents' directories", || {
            self.journal()
                .lines()
                .any(|l| l.contains("follow=start") && l.contains("directories=3"))
        });
        if let Some(listen) = &self.serve {
            self.until("the dashboard listening", || {
                self.journal()
                    .contains(&format!("listening=http://{listen}"))
            });
        }
    }

    /// SIGTERM, as systemd stops it: its exit code, once its stop line is written.
    pub fn stop(&mut self) -> Option<i32> {
        let mut child = self.run.take()?;
        Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status()
            .unwrap();
        let status = child.wait().unwrap();
        self.until("the stop line", || self.journal().contains(" state=stop "));
        status.code()
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

    /// When the first trigger reached the webhook.
    pub fn trigger_arrival(&self) -> Option<Instant> {
        let at = self.events().iter().position(|e| e["state"] == "trigger")?;
        self.arrivals.lock().unwrap().get(at).copied()
    }

    /// `GET path` from the dashboard `run` serves: status and body.
    pub fn get(&self, path_or_url: &str) -> (u16, String) {
        let url = if path_or_url.starts_with("http") {
            path_or_url.to_owned()
        } else {
            format!("http://{}{path_or_url}", self.serve.as_deref().unwrap())
        };
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .build()
            .into();
        let mut response = agent.get(&url).call().expect("an HTTP answer");
        let status = response.status().as_u16();
        (
            status,
            response.body_mut().read_to_string().unwrap_or_default(),
        )
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

/// A transcript's growth, for a measurement: each size it had and when (a thread looks every
/// 5 ms, from the moment `find` names the file until [`Growth::stop`]).
pub struct Growth {
    samples: Arc<Mutex<Vec<(Instant, u64)>>>,
    file: Arc<Mutex<Option<PathBuf>>>,
    stop: Arc<AtomicBool>,
}

impl Growth {
    pub fn watch(find: impl Fn() -> Option<PathBuf> + Send + 'static) -> Self {
        let samples = Arc::new(Mutex::new(Vec::new()));
        let file = Arc::new(Mutex::new(None));
        let stop = Arc::new(AtomicBool::new(false));
        let (out, named, stopped) = (Arc::clone(&samples), Arc::clone(&file), Arc::clone(&stop));
        std::thread::spawn(move || {
            let mut last = 0;
            while !stopped.load(Ordering::SeqCst) {
                if let Some(path) = find() {
                    let size = std::fs::metadata(&path).map_or(0, |m| m.len());
                    if size != last {
                        out.lock().unwrap().push((Instant::now(), size));
                        last = size;
                    }
                    *named.lock().unwrap() = Some(path);
                }
                // A sampling period, not a wait for something to happen.
                std::thread::sleep(Duration::from_millis(5));
            }
        });
        Self {
            samples,
            file,
            stop,
        }
    }

    pub fn stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
    }

    /// When the transcript first held the line that makes `agentwatch detect` flag it (its
    /// growth's first size whose prefix is flagged, found by bisection), and the file.
    pub fn flagged_at(&self, scratch: &Path) -> Option<(Instant, PathBuf)> {
        let file = self.file.lock().unwrap().clone()?;
        let text = std::fs::read(&file).ok()?;
        let samples = self.samples.lock().unwrap().clone();
        let flagged = |size: u64| {
            let cut = usize::try_from(size).unwrap_or(usize::MAX).min(text.len());
            let prefix = scratch.join(file.file_name().unwrap());
            std::fs::write(&prefix, &text[..cut]).unwrap();
            let out = Command::new(env!("CARGO_BIN_EXE_agentwatch"))
                .args(["detect", "--json"])
                .arg(&prefix)
                .output()
                .unwrap();
            let report: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
            report["trees"]
                .as_array()
                .is_some_and(|t| t.iter().any(|t| t["flagged"] == true))
        };
        let (mut low, mut high) = (0, samples.len());
        while low < high {
            let mid = (low + high) / 2;
            if flagged(samples[mid].1) {
                high = mid;
            } else {
                low = mid + 1;
            }
        }
        samples.get(low).map(|(at, _)| (*at, file))
    }
}

/// Say how long after the transcript's flagging line the alert came (a figure for the
/// report, never asserted).
pub fn report_latency(world: &World, growth: &Growth, agent: &str) {
    growth.stop();
    let scratch = world.tmp.path.join("latency");
    std::fs::create_dir_all(&scratch).unwrap();
    match (growth.flagged_at(&scratch), world.trigger_arrival()) {
        (Some((flagged, _)), Some(alert)) if alert >= flagged => eprintln!(
            "latency {agent}: the alert reached the webhook {} ms after the flagging line",
            (alert - flagged).as_millis()
        ),
        (Some((flagged, _)), Some(alert)) => eprintln!(
            "latency {agent}: the alert came {} ms before the sampled flagging line",
            (flagged - alert).as_millis()
        ),
        _ => eprintln!("latency {agent}: not measured"),
    }
}

/// What a first-week user meets on a loop's trigger (issue 49), for `agent`'s (`claude`)
/// session `id` repeating `command`, which fails with `error`:
/// - the key is the agent's, and `details.agent` names the agent;
/// - the summary names the whole command, how often, and what it returned;
/// - the notification's link (to where `run` serves) lands on the tree's page, which has the
///   alert, as the tree API does;
/// - the sessions page lists the session.
pub fn assert_first_week(
    world: &World,
    trigger: &Value,
    agent: &str,
    id: &str,
    command: &str,
    error: &str,
) {
    let key = format!("{agent}-loop:{id}");
    assert_eq!(trigger["dedup_key"], key.as_str(), "{trigger}");
    assert_eq!(trigger["details"]["agent"], agent, "{trigger}");
    let summary = trigger["summary"].as_str().unwrap();
    assert!(
        summary.contains(&format!("`{command}` ")) && summary.contains(error),
        "the summary says what repeats and what it returned: {summary}"
    );
    let link = trigger["details"]["link"].as_str().unwrap();
    let listen = world.serve.as_deref().unwrap();
    assert_eq!(link, format!("http://{listen}/admin/trees/{id}"));
    let (status, page) = world.get(link);
    assert_eq!(status, 200, "{page}");
    assert!(
        page.contains(&key) && !page.contains("No alert for this tree"),
        "the link finds the alert: {page}"
    );
    let (_, tree) = world.get(&format!("/api/watchdog/trees/{id}"));
    let tree: Value = serde_json::from_str(&tree).unwrap();
    assert_eq!(tree["alert"]["dedup_key"], key.as_str(), "{tree}");
    let (status, sessions) = world.get(&format!("/sessions.html?agent={agent}"));
    assert_eq!(status, 200);
    assert!(
        sessions.contains(id) && sessions.contains("looping: "),
        "the sessions page lists it: {sessions}"
    );
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
