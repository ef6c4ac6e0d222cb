//! `agentwatch recover --once` end to end: the built binary, run once per timer tick with `--now`,
//! against real parts: a stand-in `systemctl` that records its argv and can fail, a loopback
//! OpenAI-compatible router, a real SQLite store and the loop report written by the test.
//! No test sleeps: time is `--now` (the router-hang case waits for a 1 s client timeout).

use agentwatch_store::{EventKind, RunLock, Store};
use agentwatch_testkit::{HttpServer, Reply, StandIns, TempDir, stand_in};
use recovery_policy::notice::parse_notice;
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};

/// The first probe's time in every timeline (the reference's test fixture).
const T0: i64 = 1_790_000_000;

/// The spec's environment variables; cleared so the host's never leak into a test.
const SPEC_VARS: &[&str] = &[
    "FLY_LOOP_REPORT",
    "FLY_RECOVERY_NOTICE",
    "FLY_LOOP_ROUTER_URL",
    "FLY_LOOP_MODEL",
    "FLY_LOOP_ROUTER_KEY",
    "WD_LOOP_INTERVAL",
    "AGENTWATCH_DB",
    "AGENTWATCH_CONFIG",
];

/// `samples/fly_recovery_notice_restart_done.json` of the reference (the real helper's restart
/// notice in phase `done`, probes at T0 and T0+300, announced at T0+305).
const SAMPLE_DONE: &str = r#"{"v": 1, "id": "1790000305-restart", "action": "restart", "fromRung": 12, "fromLabel": "MT. MOON", "reason": "unrewarded", "loop": ["GO WARP"], "stuckSeconds": 905, "announcedAt": 1790000305, "executeAt": 1790000365, "phase": "done", "updatedAt": 1790000371}"#;

/// A temporary installation: config, report, notice, store, env file and a stand-in systemctl.
struct Rig {
    dir: TempDir,
    stand_ins: StandIns,
    config: PathBuf,
    report: PathBuf,
    notice: PathBuf,
    db: PathBuf,
    env_file: PathBuf,
    /// Extra environment for every run.
    env: Vec<(String, String)>,
}

/// One run of the binary.
#[derive(Debug)]
struct Ran {
    code: i32,
    stdout: String,
    stderr: String,
}

impl Ran {
    /// The run's one decision line (asserts there is exactly one).
    fn line(&self) -> &str {
        let lines: Vec<&str> = self
            .stderr
            .lines()
            .filter(|l| l.starts_with("recover=") && l.contains(" decision="))
            .collect();
        assert_eq!(
            lines.len(),
            1,
            "one decision line per run:\n{}",
            self.stderr
        );
        lines[0]
    }

    fn field(&self, key: &str) -> String {
        field(self.line(), key).unwrap_or_else(|| panic!("no {key}= in {}", self.line()))
    }

    fn decision(&self) -> String {
        self.field("decision")
    }

    fn steps(&self) -> String {
        self.field("steps")
    }

    fn json(&self) -> Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| panic!("{e}: {}", self.stdout))
    }
}

/// The value of `key=` in a `key=value` line; a `"..."` value is unescaped.
fn field(line: &str, key: &str) -> Option<String> {
    let start = line
        .find(&format!(" {key}="))
        .map(|i| i + key.len() + 2)
        .or_else(|| {
            line.starts_with(&format!("{key}="))
                .then_some(key.len() + 1)
        })?;
    let rest = &line[start..];
    let Some(quoted) = rest.strip_prefix('"') else {
        return Some(rest.split(' ').next().unwrap_or("").to_owned());
    };
    let mut out = String::new();
    let mut chars = quoted.chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => return Some(out),
            '\\' => match chars.next()? {
                'n' => out.push('\n'),
                other => out.push(other),
            },
            c => out.push(c),
        }
    }
    None
}

fn toml_str(text: &str) -> String {
    toml::Value::String(text.to_owned()).to_string()
}

impl Rig {
    /// A rig whose `systemctl` is a stand-in exiting with `exit_code`; `extra` is appended to the
    /// `[recover]` section.
    fn new(name: &str, exit_code: i32, extra: &str) -> Self {
        let dir = TempDir::new(&format!("aw-recover-{name}"));
        let stand_ins = StandIns::new(&dir.path.join("bin"));
        let systemctl = stand_in(&stand_ins, "systemctl", "", exit_code);
        let rig = Self {
            config: dir.path.join("config.toml"),
            report: dir.path.join("wd/loop.json"),
            notice: dir.path.join("wd/recovery-notice.json"),
            db: dir.path.join("state/agentwatch.db"),
            env_file: dir.path.join("etc/loop-recovery.env"),
            stand_ins,
            env: Vec::new(),
            dir,
        };
        std::fs::create_dir_all(rig.report.parent().unwrap()).unwrap();
        rig.write_config(&format!(
            "systemctl = [{}]\n{extra}",
            toml_str(&systemctl.display().to_string())
        ));
        rig
    }

    fn write_config(&self, recover_extra: &str) {
        // The unit the tests restart, unless the test names its own.
        let unit = if recover_extra
            .lines()
            .any(|l| l.trim_start().starts_with("unit "))
        {
            String::new()
        } else {
            "unit = \"flysim.service\"\n".to_owned()
        };
        let recover_extra = format!("{unit}{recover_extra}");
        let text = format!(
            "[store]\npath = {}\n\n[recover]\nreport = {}\nnotice = {}\nenv_file = {}\n{recover_extra}\n",
            toml_str(&self.db.display().to_string()),
            toml_str(&self.report.display().to_string()),
            toml_str(&self.notice.display().to_string()),
            toml_str(&self.env_file.display().to_string()),
        );
        std::fs::write(&self.config, text).unwrap();
    }

    fn write_env_file(&self, text: &str, mode: u32) {
        std::fs::create_dir_all(self.env_file.parent().unwrap()).unwrap();
        std::fs::write(&self.env_file, text).unwrap();
        std::fs::set_permissions(&self.env_file, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    /// The watchdog's report of a probe at `at` (the reference's test fixture).
    fn write_report(&self, at: i64, suspected: i64) {
        let report = json!({
            "suspected": suspected, "action": "none", "reason": "unrewarded",
            "sequence": ["GO WARP"], "milestone": {"rank": 12, "label": "MT. MOON"},
            "map": 61, "at": at,
            "window": {"decisions": 74, "outcomes": {"done": 74}},
            "places": {"uniqueLocations": 214, "delta": 0},
        });
        std::fs::write(&self.report, report.to_string()).unwrap();
    }

    fn run(&self, now: i64, extra: &[&str]) -> Ran {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_agentwatch"));
        cmd.args(["recover", "--once", "--config"])
            .arg(&self.config)
            .args(["--now", &now.to_string()])
            .args(extra);
        for var in SPEC_VARS {
            cmd.env_remove(var);
        }
        cmd.env("HOME", &self.dir.path)
            .env("XDG_CONFIG_HOME", self.dir.path.join("xdg-config"))
            .env("XDG_STATE_HOME", self.dir.path.join("xdg-state"))
            .env("PATH", self.stand_ins.path_env());
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        let out = cmd.output().expect("run agentwatch");
        Ran {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// A timer tick at `now` that finds a suspected report of the probe at `at`.
    fn probe(&self, at: i64, now: i64) -> Ran {
        self.write_report(at, 1);
        self.run(now, &[])
    }

    fn calls(&self) -> Vec<Vec<String>> {
        self.stand_ins.calls("systemctl")
    }

    fn notice_json(&self) -> Value {
        serde_json::from_str(&std::fs::read_to_string(&self.notice).unwrap()).unwrap()
    }

    /// The stored policy state (the envelope's `state`), read from the real SQLite file.
    fn state(&self) -> Value {
        let text = self.state_text().expect("a stored state");
        let envelope: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(envelope["policy"], "loop-recovery");
        envelope["state"].clone()
    }

    /// The restarts recorded for the pages and metrics: (at, unit, result), newest first.
    fn restarts(&self) -> Vec<(i64, String, String)> {
        Store::open_read_only(&self.db)
            .unwrap()
            .recent_events(EventKind::Restart, Some("recover"), 10)
            .unwrap()
            .into_iter()
            .map(|e| (e.at, e.name, e.result))
            .collect()
    }

    /// How many checks were recorded.
    fn checks(&self) -> usize {
        Store::open_read_only(&self.db)
            .unwrap()
            .recent_events(EventKind::Tick, Some("recover"), 100)
            .unwrap()
            .len()
    }

    fn state_text(&self) -> Option<String> {
        Store::open_read_only(&self.db)
            .unwrap()
            .load_state("loop-recovery")
            .unwrap()
    }
}

/// Serves chat completions from a queue of replies; records requests.
fn router(replies: Vec<Reply>) -> HttpServer {
    let queue = Arc::new(Mutex::new(replies));
    HttpServer::start(move |_| {
        let mut queue = queue.lock().unwrap();
        if queue.is_empty() {
            Reply::text(500, "no more replies")
        } else {
            queue.remove(0)
        }
    })
}

fn says(content: &str) -> Reply {
    Reply::json(
        200,
        &json!({"choices": [{"index": 0, "message": {"role": "assistant", "content": content}}]}),
    )
}

// ------------------------------------------------------------------------------------------------

#[test]
fn two_probes_then_a_restart_then_a_one_hour_cooldown() {
    let rig = Rig::new("cooldown", 0, "");

    let ran = rig.probe(T0, T0 + 5);
    assert_eq!(
        (ran.code, ran.decision()),
        (0, "waiting-second-probe".into())
    );
    // The 1-minute timer reads the same probe again: it is not a second probe.
    let ran = rig.run(T0 + 65, &[]);
    assert_eq!(ran.decision(), "waiting-next-probe");
    // A newer probe too close to the first does not confirm (and does not replace the first).
    let ran = rig.probe(T0 + 120, T0 + 125);
    assert_eq!(ran.decision(), "waiting-probe-gap");
    assert!(rig.calls().is_empty());
    assert!(
        !rig.notice.exists(),
        "nothing announced before a confirmation"
    );

    let ran = rig.probe(T0 + 300, T0 + 305);
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    assert_eq!(ran.decision(), "restart-succeeded");
    assert_eq!(ran.steps(), "restart,restart-succeeded");
    assert_eq!(ran.field("unit"), "flysim.service");
    let reason = ran.field("reason");
    assert!(
        reason.contains("loop confirmed by two probes 300 s apart"),
        "{reason}"
    );
    assert!(reason.contains("recovery cooldown for 3600 s"), "{reason}");
    assert_eq!(rig.calls(), [["restart", "flysim.service"]]);
    assert_eq!(rig.notice_json()["phase"], "done");
    // The cooldown starts when the restart finished (the simulated countdown ends at T0+365).
    assert_eq!(rig.state()["cooldown_from"], T0 + 365);
    assert_eq!(rig.state()["in_flight"], Value::Null);
    assert_eq!(
        rig.restarts(),
        [(
            T0 + 365,
            "flysim.service".to_owned(),
            "succeeded".to_owned()
        )]
    );
    assert_eq!(rig.checks(), 4, "every check is recorded");

    for (at, now) in [(T0 + 600, T0 + 605), (T0 + 900, T0 + 905)] {
        let ran = rig.probe(at, now);
        assert_eq!(ran.decision(), "cooldown", "{}", ran.stderr);
    }
    rig.write_report(T0 + 1200, 0);
    assert_eq!(rig.run(T0 + 1205, &[]).decision(), "report-clear");
    let ran = rig.probe(T0 + 3900, T0 + 3905);
    assert_eq!(ran.decision(), "cooldown");
    assert!(ran.field("reason").contains("60 s left"), "{}", ran.line());
    assert_eq!(rig.calls().len(), 1, "nothing acts during the cooldown");

    // After the hour, a new confirmation needs two new probes.
    assert_eq!(
        rig.probe(T0 + 4200, T0 + 4205).decision(),
        "waiting-second-probe"
    );
    assert_eq!(
        rig.probe(T0 + 4500, T0 + 4505).decision(),
        "restart-succeeded"
    );
    assert_eq!(rig.calls().len(), 2);
}

/// The opencode job on the same config writes the loop report (`recover.opencode_report`).
fn opencode_tick(rig: &Rig, sessions: &Path, now: i64) -> Ran {
    let out = Command::new(env!("CARGO_BIN_EXE_agentwatch"))
        .args(["watch", "--once", "--config"])
        .arg(&rig.config)
        .arg("--sessions")
        .arg(sessions)
        .args(["--now", &now.to_string()])
        .env("HOME", &rig.dir.path)
        .env("XDG_CONFIG_HOME", rig.dir.path.join("xdg-config"))
        .env("XDG_STATE_HOME", rig.dir.path.join("xdg-state"))
        .env("PATH", rig.stand_ins.path_env())
        .output()
        .expect("run agentwatch");
    Ran {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

#[test]
fn an_opencode_loop_written_as_the_report_drives_a_confirmed_restart() {
    let demo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/sample.json");
    let rig = Rig::new(
        "from-opencode",
        0,
        "opencode_report = true\nopencode_directory = \"/home/user/shop\"\n",
    );
    let tick = opencode_tick(&rig, &demo, T0);
    assert_eq!(tick.code, 0, "{}", tick.stderr);
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(&rig.report).unwrap()).unwrap();
    assert_eq!(report["suspected"], 1, "{report}");
    assert_eq!(report["at"], T0);
    assert_eq!(report["action"], "none");
    assert_eq!(report["trees"][0]["root"], "ses_demo_build", "{report}");
    let reason = report["reason"].as_str().unwrap();
    assert!(reason.starts_with("opencode loop: "), "{reason}");
    assert!(reason.contains("money.py"), "{reason}");

    // One report is one probe: nothing restarts on it.
    let ran = rig.run(T0 + 5, &[]);
    assert_eq!(ran.decision(), "waiting-second-probe", "{}", ran.stderr);
    // The next tick far enough apart confirms it.
    let tick = opencode_tick(&rig, &demo, T0 + 300);
    assert_eq!(tick.code, 0, "{}", tick.stderr);
    let ran = rig.run(T0 + 305, &[]);
    assert_eq!(ran.decision(), "restart-succeeded", "{}", ran.stderr);
    assert_eq!(rig.calls(), [["restart", "flysim.service"]]);

    // A tree of another project does not count: the report is clear.
    rig.write_config(&format!(
        "systemctl = [{}]\nopencode_report = true\nopencode_directory = \"/srv/other\"\n",
        toml_str(&rig.dir.path.join("bin/systemctl").display().to_string())
    ));
    let tick = opencode_tick(&rig, &demo, T0 + 600);
    assert_eq!(tick.code, 0, "{}", tick.stderr);
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(&rig.report).unwrap()).unwrap();
    assert_eq!(report["suspected"], 0, "{report}");
    assert_eq!(report["reason"], Value::Null);
}

#[test]
fn without_a_unit_recover_says_it_is_not_set_up() {
    let rig = Rig::new("no-unit", 0, "");
    std::fs::write(
        &rig.config,
        format!(
            "[store]\npath = {}\n",
            toml_str(&rig.db.display().to_string())
        ),
    )
    .unwrap();
    let ran = rig.run(T0, &[]);
    assert_eq!(ran.code, 78, "{}", ran.stderr);
    assert!(
        ran.stderr.contains("recover.unit: not set"),
        "{}",
        ran.stderr
    );
    assert!(rig.calls().is_empty());
}

#[test]
fn a_router_veto_holds_the_restart_until_the_next_probe_confirms() {
    let server = router(vec![
        says("{\"stuck\": false}"),
        says("```json\n{\"stuck\": true}\n```"),
    ]);
    let rig = Rig::new("veto", 0, "");
    rig.write_env_file(
        &format!(
            "# router\nFLY_LOOP_ROUTER_URL={}/v1\nFLY_LOOP_MODEL=free-model\nFLY_LOOP_ROUTER_KEY=sekret-key-123\n",
            server.url()
        ),
        0o640,
    );

    assert_eq!(rig.probe(T0, T0 + 5).decision(), "waiting-second-probe");
    let ran = rig.probe(T0 + 300, T0 + 305);
    assert_eq!(ran.steps(), "ask-router,router-vetoed", "{}", ran.stderr);
    assert!(ran.field("reason").contains("router says not stuck"));
    assert!(rig.calls().is_empty());
    assert!(!rig.notice.exists(), "a vetoed recovery is never announced");
    // The next timer tick sees the same probe: the router is not asked twice about it.
    assert_eq!(rig.run(T0 + 365, &[]).decision(), "waiting-next-probe");
    assert_eq!(server.requests().len(), 1);

    let ran = rig.probe(T0 + 600, T0 + 605);
    assert_eq!(ran.steps(), "ask-router,restart,restart-succeeded");
    assert_eq!(rig.calls(), [["restart", "flysim.service"]]);

    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    for request in &requests {
        assert_eq!(request.method, "POST");
        assert_eq!(request.path(), "/v1/chat/completions");
        assert_eq!(
            request.headers.get("authorization").map(String::as_str),
            Some("Bearer sekret-key-123")
        );
        let body = request.body_json();
        assert_eq!(body["model"], "free-model");
        assert_eq!(body["temperature"], 0);
        assert_eq!(body["messages"][0]["role"], "system");
        assert!(
            body["messages"][0]["content"]
                .as_str()
                .unwrap()
                .contains("{\"stuck\":true|false}")
        );
        // The router sees the report's brief, never the fields that drive the decision.
        let brief: Value =
            serde_json::from_str(body["messages"][1]["content"].as_str().unwrap()).unwrap();
        let keys: BTreeSet<&str> = brief
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(
            keys,
            BTreeSet::from(["map", "milestone", "places", "reason", "sequence", "window"])
        );
    }
    let all_output: String = [&ran.stderr, &ran.stdout].into_iter().cloned().collect();
    assert!(!all_output.contains("sekret"), "the key is never logged");
}

#[test]
fn a_veto_limit_acts_without_asking_once_reached() {
    let server = router(vec![says("{\"stuck\": false}")]);
    let rig = Rig::new("veto-limit", 0, "veto_limit = 1\n");
    rig.write_env_file(
        &format!(
            "FLY_LOOP_ROUTER_URL={}/v1\nFLY_LOOP_MODEL=free-model\n",
            server.url()
        ),
        0o600,
    );
    rig.probe(T0, T0 + 5);
    assert_eq!(rig.probe(T0 + 300, T0 + 305).decision(), "router-vetoed");
    let ran = rig.probe(T0 + 600, T0 + 605);
    assert_eq!(ran.steps(), "restart,restart-succeeded");
    assert!(ran.field("reason").contains("veto limit reached (1 veto)"));
    assert_eq!(server.requests().len(), 1);
    assert!(
        !server.requests()[0].headers.contains_key("authorization"),
        "no key, no header"
    );
}

#[test]
fn garbage_or_a_hanging_router_blocks_until_a_later_probe() {
    let server = router(vec![
        says("yes, it looks stuck to me"),
        Reply::text(200, "<html>not json</html>"),
        Reply::Hang,
        says("{\"stuck\": true}"),
    ]);
    let rig = Rig::new("garbage", 0, "router_timeout_s = 1\n");
    rig.write_env_file(
        &format!(
            "FLY_LOOP_ROUTER_URL={}/v1\nFLY_LOOP_MODEL=free-model\n",
            server.url()
        ),
        0o640,
    );
    rig.probe(T0, T0 + 5);
    let expected = [
        (300, "router reply malformed"),
        (600, "router reply malformed"),
        (900, "router unreachable"),
    ];
    for (offset, why) in expected {
        let ran = rig.probe(T0 + offset, T0 + offset + 5);
        assert_eq!(ran.steps(), "ask-router,router-blocked", "{}", ran.stderr);
        assert!(ran.field("reason").contains(why), "{}", ran.line());
        assert!(rig.calls().is_empty());
        assert!(!rig.notice.exists());
    }
    let ran = rig.probe(T0 + 1200, T0 + 1205);
    assert_eq!(ran.steps(), "ask-router,restart,restart-succeeded");
    assert_eq!(rig.calls().len(), 1);
}

#[test]
fn an_unreachable_or_half_configured_router_blocks_recovery() {
    // Port 1 on loopback: connection refused.
    let rig = Rig::new(
        "unreachable",
        0,
        "router_url = \"http://127.0.0.1:1/v1\"\nmodel = \"m\"\n",
    );
    rig.probe(T0, T0 + 5);
    let ran = rig.probe(T0 + 300, T0 + 305);
    assert_eq!(ran.steps(), "ask-router,router-blocked");
    assert!(
        ran.field("reason").contains("unreachable"),
        "{}",
        ran.line()
    );

    // Only the URL, from the spec's environment variable: blocked, and the line says what is missing.
    let mut rig = Rig::new("half", 0, "");
    rig.env.push((
        "FLY_LOOP_ROUTER_URL".to_owned(),
        "http://127.0.0.1:1/v1".to_owned(),
    ));
    rig.probe(T0, T0 + 5);
    let ran = rig.probe(T0 + 300, T0 + 305);
    assert_eq!(ran.decision(), "router-misconfigured");
    assert!(
        ran.field("reason").contains("model is missing"),
        "{}",
        ran.line()
    );
    assert!(rig.calls().is_empty());
}

#[test]
fn a_failed_restart_starts_no_cooldown() {
    let rig = Rig::new("failed", 1, "");
    rig.probe(T0, T0 + 5);
    let ran = rig.probe(T0 + 300, T0 + 305);
    assert_eq!(
        ran.code, 69,
        "a failed restart fails the unit: {}",
        ran.stderr
    );
    assert_eq!(ran.steps(), "restart,restart-failed");
    assert!(
        ran.field("reason").contains("exited with status 1"),
        "{}",
        ran.line()
    );
    assert_eq!(rig.notice_json()["phase"], "failed");
    assert_eq!(rig.state()["cooldown_from"], Value::Null);

    // No cooldown: two new probes within the hour retry.
    assert_eq!(
        rig.probe(T0 + 600, T0 + 605).decision(),
        "waiting-second-probe"
    );
    let ran = rig.probe(T0 + 900, T0 + 905);
    assert_eq!(ran.decision(), "restart-failed");
    assert_eq!(rig.calls().len(), 2);
    let results: Vec<String> = rig.restarts().into_iter().map(|(_, _, r)| r).collect();
    assert_eq!(results, ["failed", "failed"]);
}

#[test]
fn dry_run_runs_the_timeline_and_changes_nothing() {
    let rig = Rig::new("dry", 0, "");
    let listing = |dir: &Path| -> BTreeSet<String> {
        walk(dir)
            .into_iter()
            .filter(|p| !p.starts_with("bin/"))
            .collect()
    };
    for (at, now) in [(T0, T0 + 5), (T0 + 300, T0 + 305), (T0 + 600, T0 + 605)] {
        rig.write_report(at, 1);
        let ran = rig.run(now, &["--dry-run"]);
        assert_eq!(ran.code, 0, "{}", ran.stderr);
        assert_eq!(ran.field("dry_run"), "true");
        // Nothing was stored, so every probe is the first of its streak.
        assert_eq!(ran.decision(), "waiting-second-probe");
    }
    assert_eq!(
        listing(&rig.dir.path),
        BTreeSet::from(["config.toml".to_owned(), "wd/loop.json".to_owned()]),
        "no database, lock, notice or temp file"
    );
    assert!(rig.calls().is_empty());

    // With a stored first probe, a dry run reaches the restart and still does nothing.
    assert_eq!(rig.probe(T0, T0 + 5).decision(), "waiting-second-probe");
    let before = rig.state_text();
    rig.write_report(T0 + 300, 1);
    let ran = rig.run(T0 + 305, &["--dry-run", "--json"]);
    assert_eq!(ran.decision(), "restart");
    assert_eq!(ran.field("dry_run"), "true");
    assert!(
        ran.field("reason")
            .contains("dry run: no notice, no restart")
    );
    let out = ran.json();
    assert_eq!(out["decisions"][0]["action"]["dry_run"], true);
    assert_eq!(out["notices"], json!([]));
    assert_eq!(out["restart"], Value::Null);
    assert_eq!(out["state_saved"], false);
    assert!(rig.calls().is_empty(), "no argv recorded");
    assert!(!rig.notice.exists(), "no notice");
    assert_eq!(rig.state_text(), before, "state unchanged");

    // The real run at the same time does what the dry run said.
    assert_eq!(rig.run(T0 + 305, &[]).decision(), "restart-succeeded");
    assert_eq!(rig.calls().len(), 1);
}

/// Files under `dir`, relative, `/`-separated.
fn walk(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                out.push(
                    path.strip_prefix(dir)
                        .unwrap()
                        .to_string_lossy()
                        .into_owned(),
                );
            }
        }
    }
    out
}

#[test]
fn an_env_file_wider_than_0640_is_refused_with_a_clear_message() {
    let server = router(vec![says("{\"stuck\": true}")]);
    let rig = Rig::new("envfile", 0, "");
    rig.write_env_file(
        &format!(
            "FLY_LOOP_ROUTER_URL={}/v1\nFLY_LOOP_MODEL=m\nFLY_LOOP_ROUTER_KEY=sekret-key-123\n",
            server.url()
        ),
        0o644,
    );
    rig.write_report(T0, 1);
    let ran = rig.run(T0 + 5, &[]);
    assert_eq!(ran.code, 78, "{}", ran.stderr);
    let shown = rig.env_file.display().to_string();
    for needle in [
        shown.as_str(),
        "mode 0644 is wider than 0640",
        "refused",
        "chmod 0640",
    ] {
        assert!(ran.stderr.contains(needle), "{needle:?} in {}", ran.stderr);
    }
    assert!(!ran.stderr.contains("sekret"));
    assert!(
        !rig.db.exists(),
        "refused before anything is read or written"
    );
    assert!(server.requests().is_empty() && rig.calls().is_empty());

    std::fs::set_permissions(&rig.env_file, std::fs::Permissions::from_mode(0o640)).unwrap();
    let ran = rig.run(T0 + 5, &[]);
    assert_eq!(
        (ran.code, ran.decision()),
        (0, "waiting-second-probe".into())
    );
}

#[test]
fn the_notice_follows_schema_v1_through_its_phases() {
    let rig = Rig::new("notice", 0, "");
    // A systemctl that records its argv and the notice file as it is while the restart runs.
    let seen = rig.dir.path.join("notice-at-restart.json");
    let elsewhere = rig.dir.path.join("stage/recovery-notice.json");
    let report_elsewhere = rig.dir.path.join("wd2/loop.json");
    let script = rig.dir.path.join("bin/capturing-systemctl");
    std::fs::write(
        &script,
        format!(
            "#!/usr/bin/env python3\nimport json, shutil, sys\nopen({log:?}, 'a').write(json.dumps(sys.argv[1:]) + '\\n')\nshutil.copyfile({notice:?}, {seen:?})\n",
            log = rig.stand_ins.dir.join("systemctl.argv").display().to_string(),
            notice = elsewhere.display().to_string(),
            seen = seen.display().to_string(),
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    rig.write_config(&format!(
        "systemctl = [{}]\n",
        toml_str(&script.display().to_string())
    ));
    // The spec's variables override the configured paths, for writer and reader alike.
    std::fs::create_dir_all(elsewhere.parent().unwrap()).unwrap();
    std::fs::create_dir_all(report_elsewhere.parent().unwrap()).unwrap();
    let mut rig = rig;
    rig.env.push((
        "FLY_RECOVERY_NOTICE".into(),
        elsewhere.display().to_string(),
    ));
    rig.env.push((
        "FLY_LOOP_REPORT".into(),
        report_elsewhere.display().to_string(),
    ));
    let probe = |at: i64, now: i64| {
        let fixture: Value = serde_json::from_str(
            r#"{"suspected": 1, "action": "none", "reason": "unrewarded", "sequence": ["GO WARP"], "milestone": {"rank": 12, "label": "MT. MOON"}, "map": 61}"#,
        )
        .unwrap();
        let mut report = fixture;
        report["at"] = json!(at);
        std::fs::write(&report_elsewhere, report.to_string()).unwrap();
        rig.run(now, &["--json"])
    };
    assert_eq!(probe(T0, T0 + 5).decision(), "waiting-second-probe");
    let ran = probe(T0 + 300, T0 + 305);
    assert_eq!(ran.decision(), "restart-succeeded", "{}", ran.stderr);
    assert!(
        !rig.notice.exists(),
        "FLY_RECOVERY_NOTICE wins over the config"
    );

    // What the real helper wrote for the same timeline, except that its restart took 6 s.
    let mut expected: Value = serde_json::from_str(SAMPLE_DONE).unwrap();
    expected["updatedAt"] = json!(T0 + 365);
    let text = std::fs::read_to_string(&elsewhere).unwrap();
    assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), expected);
    assert!(parse_notice(&text).is_ok());
    let mode = std::fs::metadata(&elsewhere).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o644);
    assert_eq!(
        walk(elsewhere.parent().unwrap()),
        ["recovery-notice.json"],
        "no temp file left"
    );

    // While systemctl ran, the file said `acting`.
    let during: Value = serde_json::from_str(&std::fs::read_to_string(&seen).unwrap()).unwrap();
    let mut acting = expected.clone();
    acting["phase"] = json!("acting");
    assert_eq!(during, acting);

    // Every write, in order: countdown -> acting -> done, one id, `updatedAt` refreshed.
    let notices = ran.json()["notices"].as_array().unwrap().clone();
    let phases: Vec<&str> = notices
        .iter()
        .map(|n| n["phase"].as_str().unwrap())
        .collect();
    assert_eq!(phases, ["countdown", "acting", "done"]);
    let keys: BTreeSet<&str> = expected
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    let updated: Vec<i64> = notices
        .iter()
        .map(|n| n["updatedAt"].as_i64().unwrap())
        .collect();
    assert_eq!(updated, [T0 + 305, T0 + 365, T0 + 365]);
    for notice in &notices {
        let notice_keys: BTreeSet<&str> = notice
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(notice_keys, keys, "no toRung/toLabel for a restart");
        assert_eq!(notice["v"], 1);
        assert_eq!(notice["id"], "1790000305-restart");
        assert_eq!(notice["announcedAt"], T0 + 305);
        assert_eq!(notice["executeAt"], T0 + 365, "countdown = 60 s");
        assert!(parse_notice(&notice.to_string()).is_ok());
    }
}

#[test]
fn unit_names_reach_systemctl_as_one_argument() {
    let hostile = "flysim.service; touch MARK\n'\"$(touch MARK)` x";
    for (name, user, via_sudo) in [
        ("plain", false, false),
        ("user", true, false),
        ("sudo", false, true),
    ] {
        let rig = Rig::new(&format!("inject-{name}"), 0, "");
        let marker = rig.dir.path.join("MARK");
        let unit = hostile.replace("MARK", &marker.display().to_string());
        let command = if via_sudo {
            // The default command shape, with a stand-in `sudo` first on PATH.
            stand_in(&rig.stand_ins, "sudo", "", 0);
            "[\"sudo\", \"-n\", \"systemctl\"]".to_owned()
        } else {
            format!(
                "[{}]",
                toml_str(&rig.stand_ins.dir.join("systemctl").display().to_string())
            )
        };
        rig.write_config(&format!(
            "systemctl = {command}\nuser = {user}\nunit = {}\n",
            toml_str(&unit)
        ));
        rig.probe(T0, T0 + 5);
        let ran = rig.probe(T0 + 300, T0 + 305);
        assert_eq!(
            ran.decision(),
            "restart-succeeded",
            "{name}: {}",
            ran.stderr
        );
        assert_eq!(ran.field("unit"), unit, "the line shows the unit escaped");
        let mut expected: Vec<String> = Vec::new();
        let calls = if via_sudo {
            expected.extend(["-n".to_owned(), "systemctl".to_owned()]);
            rig.stand_ins.calls("sudo")
        } else {
            rig.calls()
        };
        if user {
            expected.push("--user".to_owned());
        }
        expected.extend(["restart".to_owned(), unit.clone()]);
        assert_eq!(calls, [expected], "{name}");
        assert!(!marker.exists(), "{name}: the unit name ran as shell code");
    }

    // A name that would read as an option is a configuration error.
    let rig = Rig::new("inject-option", 0, "unit = \"--host=evil\"\n");
    let ran = rig.probe(T0, T0 + 5);
    assert_eq!(ran.code, 78, "{}", ran.stderr);
    assert!(ran.stderr.contains("recover.unit"), "{}", ran.stderr);
}

#[test]
fn a_corrupt_state_is_set_aside_and_the_run_starts_clean() {
    let rig = Rig::new("corrupt", 0, "");
    std::fs::create_dir_all(rig.db.parent().unwrap()).unwrap();
    Store::open(&rig.db)
        .unwrap()
        .save_state("loop-recovery", "{not json", T0)
        .unwrap();

    // A dry run warns and leaves it in place.
    rig.write_report(T0, 1);
    let ran = rig.run(T0 + 5, &["--dry-run"]);
    assert!(
        ran.stderr.contains("dry run: left in place"),
        "{}",
        ran.stderr
    );
    assert_eq!(rig.state_text().as_deref(), Some("{not json"));

    let ran = rig.run(T0 + 5, &[]);
    assert_eq!(ran.decision(), "waiting-second-probe");
    let warning = ran
        .stderr
        .lines()
        .find(|l| l.contains("warning=state"))
        .unwrap_or_else(|| panic!("a warning: {}", ran.stderr));
    assert!(warning.contains("corrupt"), "{warning}");
    assert!(warning.contains("action=start_clean"), "{warning}");
    assert_eq!(
        field(warning, "kept_as").as_deref(),
        Some("loop-recovery.corrupt.1790000005")
    );
    let store = Store::open_read_only(&rig.db).unwrap();
    assert_eq!(
        store
            .load_state("loop-recovery.corrupt.1790000005")
            .unwrap()
            .as_deref(),
        Some("{not json")
    );
    assert_eq!(rig.state()["first_probe_at"], T0);
}

#[test]
fn a_missing_report_a_held_lock_and_a_one_tick_flag_without_once() {
    let rig = Rig::new("edges", 0, "");
    let ran = rig.run(T0, &[]);
    assert_eq!(ran.code, 0);
    assert_eq!(ran.decision(), "report-unreadable");
    assert!(ran.field("reason").contains("loop.json"), "{}", ran.line());

    let lock = RunLock::acquire(&rig.db.with_file_name(".agentwatch.db.recover.lock")).unwrap();
    let ran = rig.run(T0, &[]);
    assert_eq!(ran.code, 75, "{}", ran.stderr);
    assert!(ran.stderr.contains("another agentwatch recover run holds"));
    drop(lock);

    // Without --once recover keeps running; a flag of one check is then a usage error.
    let out = Command::new(env!("CARGO_BIN_EXE_agentwatch"))
        .args(["recover", "--now", "1800000000", "--config"])
        .arg(&rig.config)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(64));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--now needs --once"));
}

/// Polls `what` every 50 ms for at most 20 s.
fn eventually(what: impl Fn() -> bool) -> bool {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while std::time::Instant::now() < deadline {
        if what() {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    false
}

#[test]
fn sigterm_during_the_countdown_cancels_the_notice_and_records_no_cooldown() {
    // A real-time run (no --now): the countdown is really waited, and SIGTERM comes during it.
    let rig = Rig::new("sigterm", 0, "countdown = 600\n");
    let now = i64::try_from(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs(),
    )
    .unwrap();
    // The first probe five minutes ago (a run at that time), the second just now.
    assert_eq!(
        rig.probe(now - 300, now - 295).decision(),
        "waiting-second-probe"
    );
    rig.write_report(now - 2, 1);
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_agentwatch"));
    cmd.args(["recover", "--once", "--config"]).arg(&rig.config);
    for var in SPEC_VARS {
        cmd.env_remove(var);
    }
    let child = cmd
        .env("HOME", &rig.dir.path)
        .env("XDG_CONFIG_HOME", rig.dir.path.join("xdg-config"))
        .env("XDG_STATE_HOME", rig.dir.path.join("xdg-state"))
        .env("PATH", rig.stand_ins.path_env())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let counting = eventually(|| {
        std::fs::read_to_string(&rig.notice).is_ok_and(|t| t.contains("\"phase\":\"countdown\""))
    });
    let killed = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(counting, "no countdown notice: {stderr}");
    assert_eq!(out.status.code(), Some(0), "{stderr}");

    // The notice is cancelled (the splash hides it), nothing was restarted, no cooldown stored.
    let notice = rig.notice_json();
    assert_eq!(notice["phase"], "cancelled", "{notice}");
    assert!(parse_notice(&notice.to_string()).is_ok());
    assert!(rig.calls().is_empty(), "systemctl ran: {:?}", rig.calls());
    let ran = Ran {
        code: 0,
        stdout: String::new(),
        stderr,
    };
    assert_eq!(ran.steps(), "restart,restart-cancelled", "{}", ran.stderr);
    let state = rig.state();
    assert_eq!(state["cooldown_from"], Value::Null, "{state}");
    assert_eq!(state["in_flight"], Value::Null, "{state}");
    assert!(rig.restarts().is_empty());
}
