//! `agentwatch opencode --follow` against a real opencode server driven without a model
//! (`POST /session/:id/shell` stores real bash tool parts): a repeated failing command is
//! alerted by the follower from its events, a varied session is not, a removed message no longer
//! counts, a server restarted mid-run is followed again with the counts of a full re-read,
//! `on_loop = "abort"` cuts the looping session's running call short once (as opencode's API
//! shows), and `agentwatch run` with `follow.enabled` alerts from the same events. A loopback
//! server without the event stream is polled.

use agentwatch_testkit::opencode::{OpencodeHome, RunningServer, request, require_binary};
use agentwatch_testkit::{HttpServer, Reply, Request, TempDir, isolated_command};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

fn new_session(url: &str) -> String {
    create_session(url, &json!({}))
}

/// `POST /session` with `body` (`{"parentID": …}` makes a child); the new session's id.
fn create_session(url: &str, body: &Value) -> String {
    request("POST", &format!("{url}/session"), Some(body.clone()))["id"]
        .as_str()
        .unwrap()
        .to_owned()
}

fn shell(url: &str, session: &str, command: &str) {
    request(
        "POST",
        &format!("{url}/session/{session}/shell"),
        Some(json!({"agent": "build", "command": command})),
    );
}

/// The follower process (`opencode --follow`, or `run` with `follow.enabled`); killed when
/// dropped. Its journal goes to a file.
struct Follower {
    child: Child,
    log: PathBuf,
}

impl Follower {
    fn start(home: &Path) -> Self {
        Self::start_with(home, &["watch", "--follow"])
    }

    fn start_with(home: &Path, args: &[&str]) -> Self {
        let log = home.join("follow.log");
        let mut cmd = isolated_command(env!("CARGO_BIN_EXE_agentwatch"), home);
        cmd.args(args)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap());
        Self {
            child: cmd.spawn().unwrap(),
            log,
        }
    }

    fn journal(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Wait (up to a minute) until the journal holds `needle` `times` times.
    fn wait_for(&self, needle: &str, times: usize) {
        self.wait_for_within(needle, times, Duration::from_secs(60));
    }

    fn wait_for_within(&self, needle: &str, times: usize, patience: Duration) {
        let deadline = Instant::now() + patience;
        while self.journal().matches(needle).count() < times {
            assert!(
                Instant::now() < deadline,
                "no {times} x {needle:?} in:\n{}",
                self.journal()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Follower {
    /// SIGTERM, then its exit status (within a minute).
    fn terminate(&mut self) -> std::process::ExitStatus {
        let sent = std::process::Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(sent.success());
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "still running:\n{}",
                self.journal()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Follower {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

struct Setup {
    _tmp: TempDir,
    oc: OpencodeHome,
    server: Option<RunningServer>,
    url: String,
    home: PathBuf,
    webhook: HttpServer,
}

/// A HOME under `tmp` whose agentwatch configuration is `config`.
fn home_with_config(tmp: &TempDir, config: &str) -> PathBuf {
    let home = tmp.path.join("home");
    let dir = home.join("config/agentwatch");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("config.toml"), config).unwrap();
    home
}

fn setup(name: &str, extra: &str) -> Setup {
    let tmp = TempDir::new(name);
    let oc = OpencodeHome::new(require_binary(), &tmp.path.join("oc"));
    let server = oc.serve(None, Duration::from_secs(30)).unwrap();
    let url = server.url();
    let webhook = HttpServer::start(|_: &Request| Reply::json(200, &json!({"ok": true})));
    let home = home_with_config(
        &tmp,
        &format!(
            // The follower judges every few seconds here: every judgement counts towards
            // escalation, so a test sees it in seconds, not the 8 minutes a user would.
            "[watchdog]\nlocal_llm_enabled = false\nescalate_min_gap_s = 0\n\
             [opencode]\nservers = [\"{url}\"]\n{extra}\n\
             [[channels]]\nname = \"hook\"\ntype = \"webhook\"\nurl = \"{hook}/events\"\n",
            hook = webhook.url()
        ),
    );
    Setup {
        _tmp: tmp,
        oc,
        server: Some(server),
        url,
        home,
        webhook,
    }
}

/// The webhook's events: (state, dedup key).
fn received(webhook: &HttpServer) -> Vec<(String, String)> {
    webhook
        .requests()
        .iter()
        .map(Request::body_json)
        .map(|b| {
            (
                b["state"].as_str().unwrap_or_default().to_owned(),
                b["dedup_key"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

const FAILING: &str = "ls /nonexistent-agentwatch-dir";

#[test]
#[ignore = "needs opencode"]
fn a_repeated_failing_command_is_alerted_by_the_follower() {
    let s = setup("aw-follow-loop", "");
    let looping = new_session(&s.url);
    let healthy = new_session(&s.url);
    let follower = Follower::start(&s.home);
    follower.wait_for("tick=done", 1);
    let key = format!("opencode-loop:{looping}");
    let mut sent = 0;
    while !received(&s.webhook).iter().any(|(_, k)| k == &key) {
        assert!(
            sent < 60,
            "no alert after {sent} calls:\n{}",
            follower.journal()
        );
        let ticks = follower.journal().matches("tick=done").count();
        shell(
            &s.url,
            &healthy,
            &format!("echo step-{sent} > /dev/null && ls /"),
        );
        shell(&s.url, &looping, FAILING);
        sent += 1;
        // The follower judges the calls from their events (at its pace).
        follower.wait_for("tick=done", ticks + 1);
    }
    let journal = follower.journal();
    assert!(
        received(&s.webhook)
            .iter()
            .all(|(_, k)| !k.contains(&healthy)),
        "{:?}",
        received(&s.webhook)
    );
    // Every tick after the first came from events: no polling tick in between.
    let reasons = tick_reasons(&journal);
    assert_eq!(reasons[0], "start", "{journal}");
    // The stream opens after the first tick: one resync read, then events only.
    assert!(
        reasons[1..]
            .iter()
            .all(|r| *r == "events" || *r == "resync"),
        "{reasons:?}\n{journal}"
    );
    assert!(journal.contains("stream=open"), "{journal}");
    eprintln!(
        "flagged after {sent} failing calls; {} ticks",
        reasons.len()
    );
}

/// The follower's stored verdict of `session` in its latest tick: (calls since landed, dup, top).
fn stored_verdict(home: &Path, session: &str) -> Option<(i64, f64, i64)> {
    let db = home.join("state/agentwatch/agentwatch.db");
    let store = agentwatch_store::Store::open_read_only(&db).ok()?;
    let _tick = store.last_tick().ok()??;
    let verdicts = store.current_verdicts().ok()?;
    let v = verdicts.iter().find(|v| v.session_id == session)?;
    Some((v.calls_since_landed, v.dup, v.top))
}

/// Wait (up to a minute) until the follower's stored verdict of `session` counts `n` calls.
fn wait_for_calls(home: &Path, session: &str, n: i64, follower: &Follower) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while stored_verdict(home, session).is_none_or(|v| v.0 != n) {
        assert!(
            Instant::now() < deadline,
            "{:?}, not {n} calls:\n{}",
            stored_verdict(home, session),
            follower.journal()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
#[ignore = "needs opencode"]
fn a_removed_message_no_longer_counts() {
    let s = setup("aw-follow-removed", "");
    let session = new_session(&s.url);
    let follower = Follower::start(&s.home);
    follower.wait_for("stream=open", 1);
    follower.wait_for("tick=done", 1);
    for i in 0..4 {
        shell(&s.url, &session, &format!("echo kept-{i}"));
    }
    wait_for_calls(&s.home, &session, 4, &follower);
    // opencode's own route removes the assistant message of the second call
    // (`message.removed` on the stream): the session is read again from its start.
    let messages = request("GET", &format!("{}/session/{session}/message", s.url), None);
    let second = messages
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["info"]["role"] == "assistant")
        .nth(1)
        .unwrap()["info"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    request(
        "DELETE",
        &format!("{}/session/{session}/message/{second}", s.url),
        None,
    );
    wait_for_calls(&s.home, &session, 3, &follower);
    // And a call after it counts once.
    shell(&s.url, &session, "echo after-removal");
    wait_for_calls(&s.home, &session, 4, &follower);
}

#[test]
fn a_server_without_the_event_stream_is_polled() {
    // Speaks opencode's listing and message routes; /global/event and /event are 404.
    let looping = agentwatch_testkit::opencode::ExportBuilder::new(
        "ses_nostream",
        "no stream",
        None,
        1_700_000_000_000,
    )
    .steps(
        "build",
        &agentwatch_testkit::opencode::looping_calls(30),
        1000,
    );
    let server = agentwatch_testkit::opencode::serve_exports(vec![looping.build()]);
    let tmp = TempDir::new("aw-follow-nostream");
    let home = home_with_config(
        &tmp,
        &format!(
            "[watchdog]\nlocal_llm_enabled = false\nstale_after_s = 0\n[opencode]\nservers = [\"{}\"]\n\
             [follow]\nmin_interval_s = 1\n[run]\nwatch_interval_s = 1\n\
             [[channels]]\nname = \"log\"\ntype = \"log\"\n",
            server.url()
        ),
    );
    let follower = Follower::start(&home);
    follower.wait_for("stream=none fallback=poll", 1);
    follower.wait_for("follow=tick reason=poll", 2);
    // The start tick and two polls are done.
    follower.wait_for("tick=done", 3);
    let journal = follower.journal();
    let paths: Vec<String> = server
        .requests()
        .iter()
        .map(|r| r.path().to_owned())
        .collect();
    // Asked once; not opened again and again as a dropped stream would be.
    assert_eq!(
        paths.iter().filter(|p| *p == "/global/event").count(),
        1,
        "{paths:?}"
    );
    // Each tick (the first and the polls) listed the server.
    let listings = paths
        .iter()
        .filter(|p| *p == "/experimental/session")
        .count();
    assert!(listings >= 3, "{paths:?}\n{journal}");
    assert!(!journal.contains("stream=open"), "{journal}");
}

#[test]
#[ignore = "needs opencode"]
fn a_restarted_server_is_followed_again_and_counts_match_a_full_read() {
    let mut s = setup("aw-follow-restart", "");
    let port = s.server.as_ref().unwrap().port;
    let session = new_session(&s.url);
    let follower = Follower::start(&s.home);
    follower.wait_for("stream=open", 1);
    follower.wait_for("tick=done", 1);
    for i in 0..3 {
        shell(&s.url, &session, &format!("echo before-{i}"));
    }
    let wait_calls = |n: i64| wait_for_calls(&s.home, &session, n, &follower);
    wait_calls(3);
    // Killed mid-run and started again on its port, with its database.
    drop(s.server.take());
    follower.wait_for("stream=dropped", 1);
    let server = s.oc.serve_on(port, None, Duration::from_secs(30)).unwrap();
    // A call the stream cannot have told: made before the follower's stream is back.
    shell(&s.url, &session, "echo while-reconnecting");
    follower.wait_for("stream=open", 2);
    for i in 0..3 {
        shell(&s.url, &session, &format!("echo after-{i}"));
    }
    wait_calls(7);
    let followed = stored_verdict(&s.home, &session).unwrap();
    drop(follower);
    // A full re-read of the server judges the same.
    let out = isolated_command(env!("CARGO_BIN_EXE_agentwatch"), &s.home)
        .args(["watch", "--once", "--full-read", "--dry-run", "--json"])
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    let full = report["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["id"] == session.as_str())
        .unwrap()
        .clone();
    assert_eq!(
        followed.0,
        full["reason"]["calls_since_landed"].as_i64().unwrap()
    );
    assert_eq!(followed.1, full["reason"]["dup"].as_f64().unwrap());
    assert_eq!(followed.2, full["reason"]["top"].as_i64().unwrap());
    drop(server);
}

/// The looping command of the abort test: the same failing call, running for a second.
const SLOW_FAILING: &str = "sleep 1; ls /nonexistent-agentwatch-dir";

/// The call the looping session is in when the abort comes. Once the loop's alert opened, the
/// session's next call runs long, the way a parent waits in a subagent's `task`, and its child
/// starts working (too few calls to be judged a loop itself). The child's calls make the ticks
/// that escalate (two flagged judgements of the tree later) come while the long call runs,
/// whatever the ticks' phase against the calls. Twenty seconds is far more than those ticks
/// need: the abort cuts the call short, and without one the test fails on what was cut.
const LONG_FAILING: &str = "sleep 20; ls /nonexistent-agentwatch-dir";

/// What opencode writes in a bash call an abort cut short (1.18.33).
const ABORTED: &str = "User aborted the command";

/// Calls `session` with `command(n)` for n = 0, 1, … until `stop` (at most 120 calls); returns
/// how many were sent.
fn drive(
    url: &str,
    session: &str,
    stop: &Arc<AtomicBool>,
    command: impl Fn(usize) -> String + Send + 'static,
) -> std::thread::JoinHandle<usize> {
    let (url, session, stop) = (url.to_owned(), session.to_owned(), Arc::clone(stop));
    std::thread::spawn(move || {
        let mut sent = 0;
        while !stop.load(Ordering::SeqCst) && sent < 120 {
            shell(&url, &session, &command(sent));
            sent += 1;
        }
        sent
    })
}

#[test]
#[ignore = "needs opencode"]
fn on_loop_abort_stops_the_looping_session_once() {
    let s = setup("aw-follow-abort", "on_loop = \"abort\"");
    let looping = new_session(&s.url);
    let child = create_session(&s.url, &json!({"parentID": looping}));
    let follower = Follower::start(&s.home);
    follower.wait_for("tick=done", 1);
    // The agent's loop, one call after the other until the test stops it.
    let stop = Arc::new(AtomicBool::new(false));
    let journal = follower.log.clone();
    let long_sent = AtomicBool::new(false);
    let driver = drive(&s.url, &looping, &stop, move |_| {
        let opened = std::fs::read_to_string(&journal)
            .is_ok_and(|j| j.contains("state=trigger severity=warning"));
        if opened && !long_sent.swap(true, Ordering::SeqCst) {
            LONG_FAILING.to_owned()
        } else {
            SLOW_FAILING.to_owned()
        }
    });
    // Once the alert opened, the parent waits in its long call and its child works.
    follower.wait_for_within(
        "state=trigger severity=warning",
        1,
        Duration::from_secs(180),
    );
    let helper = drive(&s.url, &child, &stop, |n| format!("sleep 1; echo part {n}"));
    follower.wait_for_within("action=abort result=sent", 1, Duration::from_secs(180));
    // The loop goes on a little: the alert is critical already, no second abort.
    let ticks = follower.journal().matches("tick=done").count();
    follower.wait_for("tick=done", ticks + 2);
    stop.store(true, Ordering::SeqCst);
    let sent = driver.join().unwrap();
    helper.join().unwrap();
    let ticks = follower.journal().matches("tick=done").count();
    follower.wait_for("tick=done", ticks + 1);
    let journal = follower.journal();
    assert_eq!(journal.matches("action=abort").count(), 1, "{journal}");
    // The abort came with the escalation (its delivery may wait for the channel's rate limit).
    assert!(journal.contains("state=escalate"), "{journal}");
    let db = s.home.join("state/agentwatch/agentwatch.db");
    let store = agentwatch_store::Store::open_read_only(&db).unwrap();
    let aborts = store
        .event_counts(agentwatch_store::EventKind::Abort)
        .unwrap();
    assert_eq!(aborts.len(), 1, "{aborts:?}");
    assert_eq!(
        (
            aborts[0].name.as_str(),
            aborts[0].result.as_str(),
            aborts[0].count
        ),
        (looping.as_str(), "sent", 1)
    );
    // opencode's API: the call that was running when the abort came was cut short (its part
    // completed with opencode's abort note), once; the others ran to their end.
    let messages = request("GET", &format!("{}/session/{looping}/message", s.url), None);
    let calls: Vec<&Value> = messages
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|m| m["parts"].as_array().unwrap())
        .filter(|p| p["tool"] == "bash")
        .collect();
    assert_eq!(calls.len(), sent, "{messages}");
    let cut: Vec<&&Value> = calls
        .iter()
        .filter(|p| {
            p["state"]["output"]
                .as_str()
                .is_some_and(|o| o.contains(ABORTED))
        })
        .collect();
    assert_eq!(cut.len(), 1, "{messages}");
    assert_eq!(
        cut[0]["state"]["input"]["command"], LONG_FAILING,
        "{messages}"
    );
    // And the session is idle, waiting for a person.
    let status = request("GET", &format!("{}/session/status", s.url), None);
    assert!(
        status.get(&looping).is_none_or(|st| st["type"] == "idle"),
        "{status}"
    );
}

/// The follower's tick reasons, in order.
fn tick_reasons(journal: &str) -> Vec<&str> {
    journal
        .lines()
        .filter(|l| l.contains("follow=tick reason="))
        .filter_map(|l| l.split("reason=").nth(1))
        .map(|r| r.split_whitespace().next().unwrap_or(""))
        .collect()
}

#[test]
#[ignore = "needs opencode"]
fn run_follows_when_configured_and_stops_on_sigterm() {
    let s = setup(
        "aw-follow-run",
        "[follow]\nenabled = true\n[run]\njobs = [\"watch\"]\n",
    );
    let looping = new_session(&s.url);
    let mut run = Follower::start_with(&s.home, &["run"]);
    run.wait_for(" job=watch result=", 1);
    let key = format!("opencode-loop:{looping}");
    let mut sent = 0;
    while !received(&s.webhook).iter().any(|(_, k)| k == &key) {
        assert!(sent < 60, "no alert after {sent} calls:\n{}", run.journal());
        let ticks = run.journal().matches(" job=watch result=").count();
        shell(&s.url, &looping, FAILING);
        sent += 1;
        run.wait_for(" job=watch result=", ticks + 1);
    }
    let journal = run.journal();
    assert!(
        journal.contains(" state=start jobs=watch:follow "),
        "{journal}"
    );
    // The alert came from the follower's events, not from a scheduled tick.
    let reasons = tick_reasons(&journal);
    assert_eq!(reasons[0], "start", "{journal}");
    assert!(
        reasons[1..]
            .iter()
            .all(|r| ["events", "resync"].contains(r)),
        "{reasons:?}\n{journal}"
    );
    // One run line per follower tick, saying the next one comes with an event.
    let run_lines: Vec<&str> = journal
        .lines()
        .filter(|l| l.starts_with("run=") && l.contains(" job=watch "))
        .collect();
    assert!(
        run_lines
            .iter()
            .all(|l| l.contains(" exit=0 ") && l.ends_with(" next=event")),
        "{journal}"
    );
    // Between its ticks the follower holds no lock: another run can take it.
    let lock = s.home.join("state/agentwatch/.agentwatch.db.opencode.lock");
    let deadline = Instant::now() + Duration::from_secs(60);
    while agentwatch_store::RunLock::acquire(&lock).is_err() {
        assert!(
            Instant::now() < deadline,
            "the lock stays held:\n{}",
            run.journal()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let status = run.terminate();
    let journal = run.journal();
    assert_eq!(status.code(), Some(0), "{journal}");
    assert!(journal.contains(" follow=stop "), "{journal}");
    assert!(journal.contains(" state=stop "), "{journal}");
}
