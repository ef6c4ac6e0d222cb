//! `agentwatch run` as a process: started on real sources (a loopback opencode server, the
//! agent-deck stand-in, a loop report path, a real SQLite store), left to tick, stopped with a
//! signal. The test waits for what the process writes (store rows, datagrams), never for time.

use agentwatch_store::{EventCount, EventKind, RunLock, Store};
use agentwatch_testkit::agentdeck::{AgentDeckStandIn, DeckScript};
use agentwatch_testkit::{HttpServer, Reply, Request, TempDir};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader};
use std::os::unix::net::UnixDatagram;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a test waits for the process before it fails (a hung process, not a slow machine).
const PATIENCE: Duration = Duration::from_secs(60);

fn fixture(name: &str) -> Value {
    let path = format!("{}/../fixtures/opencode/{name}", env!("CARGO_MANIFEST_DIR"));
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// Serves the two sample sessions as opencode does (one page each).
fn opencode_like(request: &Request) -> Reply {
    let parent = fixture("export_fixture_parent.json");
    let child = fixture("export_fixture_child.json");
    match request.path() {
        "/experimental/session" => Reply::json(200, &json!([child["info"], parent["info"]])),
        path => match path
            .strip_prefix("/session/")
            .and_then(|p| p.strip_suffix("/message"))
        {
            Some(id) if parent["info"]["id"] == id => Reply::json(200, &parent["messages"]),
            Some(id) if child["info"]["id"] == id => Reply::json(200, &child["messages"]),
            _ => Reply::json(404, &json!({"name": "NotFoundError"})),
        },
    }
}

/// One isolated world: HOME, config, store, the agent-deck stand-in.
struct World {
    tmp: TempDir,
    deck: AgentDeckStandIn,
    config: PathBuf,
}

impl World {
    fn new(name: &str, config: &str) -> Self {
        let tmp = TempDir::new(&format!("aw-run-{name}"));
        let deck = AgentDeckStandIn::install(&tmp.path.join("bin"));
        let dir = tmp.path.join("config/agentwatch");
        std::fs::create_dir_all(&dir).unwrap();
        let config_path = dir.join("config.toml");
        let text = format!(
            // The opencode stand-in serves recorded sessions from long ago, on the real clock:
            // judge them however old (no stale limit).
            "[watchdog]\nlocal_llm_enabled = false\nstale_after_s = 0\n\n[deck]\nroot = {root:?}\n\n[recover]\nunit = \"agent.service\"\nreport = {report:?}\nnotice = {notice:?}\nenv_file = \"\"\n\n[claude]\nenabled = false\n\n[codex]\nenabled = false\n\n[gemini]\nenabled = false\n\n{config}",
            root = tmp.path.join("agent-deck-root").display().to_string(),
            report = tmp.path.join("wd/loop.json").display().to_string(),
            notice = tmp.path.join("wd/notice.json").display().to_string(),
        );
        std::fs::write(&config_path, text).unwrap();
        Self {
            tmp,
            deck,
            config: config_path,
        }
    }

    fn db(&self) -> PathBuf {
        self.tmp.path.join("state/agentwatch/agentwatch.db")
    }

    fn command(&self, args: &[&str]) -> Command {
        let path = format!(
            "{}:{}",
            self.deck.dir().display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_agentwatch"));
        cmd.args(args)
            .arg("--config")
            .arg(&self.config)
            .current_dir(&self.tmp.path)
            .env_clear()
            .env("HOME", self.tmp.path.join("home"))
            .env("XDG_CONFIG_HOME", self.tmp.path.join("config"))
            .env("XDG_STATE_HOME", self.tmp.path.join("state"))
            .env("XDG_DATA_HOME", self.tmp.path.join("data"))
            .env("PATH", path)
            .stdin(Stdio::null());
        cmd
    }

    fn start(&self, env: &[(&str, &str)]) -> Daemon {
        self.start_command(&["run"], env)
    }

    fn start_command(&self, args: &[&str], env: &[(&str, &str)]) -> Daemon {
        let mut cmd = self.command(args);
        cmd.envs(env.iter().copied())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().unwrap();
        let lines = Arc::new(Mutex::new(Vec::new()));
        let stderr = child.stderr.take().unwrap();
        let sink = Arc::clone(&lines);
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                sink.lock().unwrap().push(line);
            }
        });
        Daemon { child, lines }
    }

    /// The tick events stored so far.
    fn ticks(&self) -> Vec<EventCount> {
        if !self.db().is_file() {
            return Vec::new();
        }
        Store::open_read_only(&self.db())
            .and_then(|s| s.event_counts(EventKind::Tick))
            .unwrap_or_default()
    }

    fn tick_of(&self, job: &str) -> Option<EventCount> {
        self.ticks().into_iter().find(|e| e.job == job)
    }
}

struct Daemon {
    child: Child,
    lines: Arc<Mutex<Vec<String>>>,
}

impl Daemon {
    fn stderr(&self) -> String {
        self.lines.lock().unwrap().join("\n")
    }

    fn signal(&self, name: &str) {
        let status = Command::new("kill")
            .arg(format!("-{name}"))
            .arg(self.child.id().to_string())
            .status()
            .unwrap();
        assert!(status.success(), "kill -{name}");
    }

    /// Waits for the process to exit.
    fn wait(&mut self) -> ExitStatus {
        let deadline = Instant::now() + PATIENCE;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                // Let the reader thread drain the pipe.
                let _ = self.child.stderr.take();
                std::thread::sleep(Duration::from_millis(50));
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "still running:\n{}",
                self.stderr()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Polls `what` until it holds; fails with the process's journal after [`PATIENCE`].
fn until(daemon: &Daemon, what: &str, mut holds: impl FnMut() -> bool) {
    let deadline = Instant::now() + PATIENCE;
    while !holds() {
        assert!(
            Instant::now() < deadline,
            "never saw {what}:\n{}",
            daemon.stderr()
        );
        std::thread::sleep(Duration::from_millis(25));
    }
}

#[test]
fn run_ticks_every_job_on_real_sources_and_stops_on_sigterm() {
    let opencode = HttpServer::start(opencode_like);
    let world = World::new(
        "all",
        &format!(
            "[opencode]\nservers = [{:?}]\n\n[run]\nwatch_interval_s = 3600\nrecover_interval_s = 3600\n\n[serve]\nenabled = true\nlisten = \"127.0.0.1:0\"\n",
            opencode.url()
        ),
    );
    world.deck.script(&DeckScript::new().list(&json!([
        {"id": "0c1d2e3f-1713772000", "title": "fix-login-bug", "group": "travel", "tool": "claude"}
    ])));
    // Another recover run holds its lock: that tick is skipped, the others go on.
    std::fs::create_dir_all(world.db().parent().unwrap()).unwrap();
    let held = RunLock::acquire(&world.db().with_file_name(".agentwatch.db.recover.lock")).unwrap();
    // The deck ticks every second; opencode and recover once an hour.
    std::fs::write(
        world.config.with_file_name("config.local.toml"),
        "[deck]\ninterval_s = 1\n",
    )
    .unwrap();

    let mut daemon = world.start(&[]);
    until(&daemon, "a tick of each job", || {
        world.tick_of("watch").is_some()
            && world.tick_of("recover").is_some()
            && world.tick_of("deck").is_some_and(|e| e.count >= 2)
    });
    drop(held);
    assert_eq!(world.tick_of("recover").unwrap().result, "locked");
    let opencode_result = world.tick_of("watch").unwrap().result;
    assert!(
        ["ok", "flagged"].contains(&opencode_result.as_str()),
        "{opencode_result}"
    );
    assert_eq!(world.tick_of("deck").unwrap().result, "ok");

    // `[serve] enabled`: the web server runs beside the jobs, on the same store.
    let listening = daemon
        .stderr()
        .lines()
        .find_map(|l| l.split(" listening=http://").nth(1).map(str::to_owned))
        .unwrap_or_else(|| panic!("no serve line:\n{}", daemon.stderr()));
    let addr = listening.split_whitespace().next().unwrap().to_owned();
    let metrics = http_get(&addr, "/metrics");
    assert!(metrics.starts_with("HTTP/1.1 200"), "{metrics}");
    assert!(metrics.contains("deck"), "{metrics}");

    // Between its ticks `run` holds no lock: a oneshot of the same job runs meanwhile.
    let oneshot = world.command(&["watch", "--once"]).output().unwrap();
    assert_eq!(
        oneshot.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&oneshot.stderr)
    );

    daemon.signal("TERM");
    let status = daemon.wait();
    let journal = daemon.stderr();
    assert_eq!(status.code(), Some(0), "{journal}");

    // The store has every job's ticks, and opencode's own tick rows (the run's and the oneshot's).
    let store = Store::open_read_only(&world.db()).unwrap();
    let rows: i64 = store.tick_outcomes().unwrap().iter().map(|(_, n)| n).sum();
    assert_eq!(rows, 2, "{journal}");
    assert!(store.last_tick().unwrap().unwrap().sessions_seen >= 2);
    let deck_calls = world.deck.calls();
    assert!(
        deck_calls
            .iter()
            .any(|c| c.first().map(String::as_str) == Some("list"))
    );

    // The journal: a start line, one line per tick after the job's own, a stop line.
    let run_lines: Vec<&str> = journal.lines().filter(|l| l.starts_with("run=")).collect();
    assert!(run_lines[0].contains(" state=start jobs=watch:3600s,deck:1s,recover:3600s "));
    assert!(
        run_lines.last().unwrap().contains(" state=stop ticks="),
        "{journal}"
    );
    for job in ["watch", "deck", "recover"] {
        assert!(
            run_lines
                .iter()
                .any(|l| l.contains(&format!(" job={job} result="))),
            "{job}: {journal}"
        );
    }
    assert!(
        run_lines
            .iter()
            .any(|l| l.contains(" job=recover result=locked exit=75 ")),
        "{journal}"
    );
    for line in journal.lines() {
        assert!(
            ["run=", "watchdog=", "deck=", "recover=", "serve=", "alert=",]
                .iter()
                .any(|p| line.starts_with(p)),
            "a stray journal line: {line:?}"
        );
    }
}

/// A plain HTTP/1.1 GET; the whole answer.
fn http_get(addr: &str, path: &str) -> String {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(PATIENCE)).unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    answer
}

/// Receives datagrams until one starts with `prefix`.
fn expect_datagram(sock: &UnixDatagram, prefix: &str, daemon: &Daemon) -> String {
    let deadline = Instant::now() + PATIENCE;
    let mut buf = [0u8; 1024];
    loop {
        assert!(
            Instant::now() < deadline,
            "no {prefix:?} datagram:\n{}",
            daemon.stderr()
        );
        if let Ok(n) = sock.recv(&mut buf) {
            let text = String::from_utf8_lossy(&buf[..n]).into_owned();
            if text.starts_with(prefix) {
                return text;
            }
        }
    }
}

#[test]
fn run_tells_systemd_ready_watchdog_and_stopping_and_stops_on_sigint() {
    let world = World::new(
        "notify",
        "[run]\njobs = [\"recover\"]\nrecover_interval_s = 3600\n",
    );
    let socket_path = world.tmp.path.join("notify.sock");
    let sock = UnixDatagram::bind(&socket_path).unwrap();
    sock.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let socket = socket_path.display().to_string();
    // A 2 s watchdog: a ping every second.
    let mut daemon = world.start(&[("NOTIFY_SOCKET", &socket), ("WATCHDOG_USEC", "2000000")]);
    let ready = expect_datagram(&sock, "READY=1", &daemon);
    assert_eq!(ready, "READY=1\nSTATUS=running recover:3600s");
    expect_datagram(&sock, "STATUS=last tick: recover ", &daemon);
    expect_datagram(&sock, "WATCHDOG=1", &daemon);
    daemon.signal("INT");
    let stopping = expect_datagram(&sock, "STOPPING=1", &daemon);
    assert_eq!(stopping, "STOPPING=1\nSTATUS=stopping");
    let status = daemon.wait();
    assert_eq!(status.code(), Some(0), "{}", daemon.stderr());
    assert!(
        daemon.stderr().contains(" watchdog_s=1"),
        "{}",
        daemon.stderr()
    );
    let ticks = world.ticks();
    assert_eq!(ticks.len(), 1, "{ticks:?}");
    assert_eq!(ticks[0].job, "recover");
}

#[test]
fn a_bad_cadence_is_a_config_error_before_anything_starts() {
    let world = World::new("bad", "");
    for (set, named) in [
        ("run.watch_interval_s=0", "run.watch_interval_s"),
        ("run.recover_interval_s=999999999", "run.recover_interval_s"),
        ("run.jobs=[\"deck\",\"deck\"]", "run.jobs"),
        // Named by its key; the value is never echoed (issue 14).
        ("run.jobs=[\"pigeon\"]", "run.jobs: unknown variant"),
    ] {
        let out = world.command(&["run", "--set", set]).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(78), "{set}: {stderr}");
        assert!(stderr.contains(named), "{set}: {stderr}");
    }
    assert!(!world.db().exists(), "nothing was started");
}

#[test]
fn a_job_command_without_once_keeps_running_that_job_alone() {
    let opencode = HttpServer::start(opencode_like);
    for job in ["watch", "recover"] {
        let world = World::new(
            job,
            &format!(
                "[opencode]\nservers = [{:?}]\n\n[run]\nwatch_interval_s = 3600\nrecover_interval_s = 3600\n",
                opencode.url()
            ),
        );
        let mut daemon = world.start_command(&[job], &[]);
        until(&daemon, &format!("{job}'s tick"), || {
            world.tick_of(job).is_some()
        });
        until(&daemon, "the run= line of the tick", || {
            daemon.stderr().contains(&format!("job={job} result="))
        });
        daemon.signal("TERM");
        let status = daemon.wait();
        assert_eq!(status.code(), Some(0), "{}", daemon.stderr());
        let journal = daemon.stderr();
        assert!(journal.contains(&format!("jobs={job}:3600s")), "{journal}");
        let jobs: Vec<String> = world.ticks().into_iter().map(|t| t.job).collect();
        assert_eq!(jobs, [job], "only {job} ticked:\n{journal}");
    }
}

#[test]
fn a_one_tick_flag_without_once_is_a_usage_error_naming_it() {
    let world = World::new("flags", "");
    for (args, flag) in [
        (&["watch", "--now", "1700000000"][..], "--now"),
        (&["watch", "--server", "http://127.0.0.1:9"], "--server"),
        (&["recover", "--json"], "--json"),
    ] {
        let out = world.command(args).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(64), "{args:?}: {stderr}");
        assert!(
            stderr.contains(&format!("{flag} needs --once")),
            "{args:?}: {stderr}"
        );
    }
    // recover without a unit has nothing to keep running: the config error of `recover --once`.
    let out = world
        .command(&["recover", "--set", "recover.unit=\"\""])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(78),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!world.db().exists(), "nothing was started");
}

/// Writes the overlay as an editor that renames into place would: a tick never reads half of it.
fn write_overlay(world: &World, text: &str) {
    let overlay = world.config.with_file_name("config.local.toml");
    let temp = world.config.with_file_name(".config.local.toml.tmp");
    std::fs::write(&temp, text).unwrap();
    std::fs::rename(&temp, overlay).unwrap();
}

#[test]
fn watchdog_enabled_is_read_at_every_tick_so_the_switch_works_both_ways_live() {
    let opencode = HttpServer::start(opencode_like);
    let world = World::new(
        "switch",
        &format!(
            "[opencode]\nservers = [{:?}]\n\n[run]\njobs = [\"watch\"]\nwatch_interval_s = 1\n",
            opencode.url()
        ),
    );
    // Off when `run` starts: the job is scheduled all the same, and its ticks do nothing.
    write_overlay(&world, "[watchdog]\nenabled = false\n");
    let mut daemon = world.start(&[]);
    let disabled = |d: &Daemon| d.stderr().matches(" job=watch result=disabled ").count();
    until(&daemon, "a disabled tick", || disabled(&daemon) == 1);
    assert!(
        daemon.stderr().contains(" state=start jobs=watch:1s "),
        "{}",
        daemon.stderr()
    );
    assert!(
        world.tick_of("watch").is_none(),
        "a disabled tick reads nothing"
    );
    // Switched on in the overlay (as the admin page does): the next tick runs, no restart.
    write_overlay(&world, "[watchdog]\nenabled = true\n");
    until(&daemon, "an opencode tick", || {
        world.tick_of("watch").is_some()
    });
    // And off again: ticks stop.
    write_overlay(&world, "[watchdog]\nenabled = false\n");
    until(&daemon, "disabled again", || disabled(&daemon) == 2);
    let ran = world.tick_of("watch").unwrap().count;
    daemon.signal("TERM");
    assert_eq!(daemon.wait().code(), Some(0), "{}", daemon.stderr());
    assert_eq!(
        world.tick_of("watch").unwrap().count,
        ran,
        "no tick once off"
    );
    // One journal line each time the job becomes disabled, not one per disabled tick.
    assert_eq!(disabled(&daemon), 2, "{}", daemon.stderr());
}
