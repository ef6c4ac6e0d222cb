//! `agentwatch serve` as a process: the demo's store shown over HTTP, edits made through the
//! API used by the next `agentwatch opencode --once`, and the refusal to listen beyond loopback
//! without a token.

use agentwatch_testkit::TempDir;
use serde_json::{Value, json};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

const T0: i64 = 1_797_000_000;

/// The binary with an isolated environment rooted at `home`, plus `vars`.
fn command(home: &Path, vars: &[(&str, &str)], args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_agentwatch"));
    cmd.args(args)
        .env_clear()
        .env("HOME", home)
        .env("XDG_CONFIG_HOME", home.join("config"))
        .env("XDG_STATE_HOME", home.join("state"))
        .env("PATH", std::env::var("PATH").unwrap_or_default());
    for (k, v) in vars {
        cmd.env(k, v);
    }
    cmd
}

fn run(home: &Path, args: &[&str]) -> Output {
    let out = command(home, &[], args).output().unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// A running `agentwatch serve`, killed when dropped.
struct Serving {
    child: Child,
    url: String,
}

impl Drop for Serving {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Start `agentwatch serve ARGS` and wait for the line that says where it listens.
fn serve(home: &Path, vars: &[(&str, &str)], args: &[&str]) -> Serving {
    let mut child = command(home, vars, &[&["serve"], args].concat())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line
        .trim()
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
        .to_owned();
    Serving { child, url }
}

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into()
}

fn get(url: &str) -> (u16, String) {
    let mut r = agent().get(url).call().unwrap();
    (r.status().as_u16(), r.body_mut().read_to_string().unwrap())
}

fn get_json(url: &str) -> Value {
    let (status, body) = get(url);
    assert_eq!(status, 200, "{url}: {body}");
    serde_json::from_str(&body).unwrap()
}

fn post(url: &str, headers: &[(&str, &str)], body: &str) -> (u16, Value) {
    let mut req = agent().post(url).header("Content-Type", "application/json");
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let mut r = req.send(body).unwrap();
    let text = r.body_mut().read_to_string().unwrap();
    (
        r.status().as_u16(),
        serde_json::from_str(&text).unwrap_or(Value::Null),
    )
}

fn sample() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/sample.json")
}

#[test]
fn serve_shows_the_demo_looping_tree() {
    let dir = TempDir::new("aw-serve-demo");
    let db = dir.path.join("demo.db");
    let db_arg = db.to_str().unwrap();
    run(
        &dir.path,
        &[
            "watch",
            "--once",
            "--demo",
            "--db",
            db_arg,
            "--now",
            &T0.to_string(),
        ],
    );
    assert!(db.is_file(), "--demo --db keeps its store");
    let server = serve(&dir.path, &[], &["--db", db_arg, "--listen", "127.0.0.1:0"]);
    let loops = get_json(&format!("{}/api/watchdog/loops", server.url));
    let loops = loops["loops"].as_array().unwrap();
    // The demo's looping trees: opencode's, Claude Code's and Codex's.
    assert_eq!(loops.len(), 3, "{loops:?}");
    let opencode = loops
        .iter()
        .find(|l| l["session_root"] == "ses_demo_build")
        .expect("the opencode demo's loop");
    assert_eq!(opencode["dedup_key"], "opencode-loop:ses_demo_build");
    assert_eq!(opencode["tree_url"], "/trees/ses_demo_build");
    let status = get_json(&format!("{}/api/watchdog/status", server.url));
    assert_eq!(status["open_alerts"], 3);
    assert_eq!(status["last_tick"]["ticked_at"], T0);
    let (code, page) = get(&format!("{}/", server.url));
    assert_eq!(code, 200);
    assert!(page.contains("<html"), "{page}");
}

#[test]
fn edits_through_the_api_are_what_the_next_tick_uses() {
    let dir = TempDir::new("aw-serve-edits");
    let config = dir.path.join("config.toml");
    let alerts = dir.path.join("alerts.jsonl");
    std::fs::write(
        &config,
        format!(
            "[watchdog]\nlocal_llm_enabled = false\n\n[[channels]]\nname = \"log\"\ntype = \"log\"\npath = \"{}\"\n",
            alerts.display()
        ),
    )
    .unwrap();
    let db = dir.path.join("agentwatch.db");
    let common = [
        "--db",
        db.to_str().unwrap(),
        "--config",
        config.to_str().unwrap(),
    ];
    // Serving before the first tick: no store yet is an empty answer.
    let server = serve(
        &dir.path,
        &[],
        &[&common[..], &["--listen", "127.0.0.1:0"]].concat(),
    );
    let base = format!("watchdog.dashboard_base_url={}/admin", server.url);
    let tick = |now: i64| {
        let out = run(
            &dir.path,
            &[
                &["watch", "--once", "--sessions", sample().to_str().unwrap()][..],
                &common,
                &["--now", &now.to_string(), "--set", &base],
            ]
            .concat(),
        );
        (
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (_, err) = tick(T0);
    assert!(err.contains("channel=log delivery=sent"), "{err}");
    let (_, metrics) = get(&format!("{}/metrics", server.url));
    for line in [
        "agentwatch_deliveries_total{job=\"watch\",channel=\"log\",result=\"sent\"} 1",
        "agentwatch_tick_duration_seconds_count{job=\"watch\"} 1",
    ] {
        assert!(metrics.lines().any(|l| l == line), "{line} in\n{metrics}");
    }

    // The alert links to its tree's page, and the link opens it.
    let logged: Value = serde_json::from_str(
        std::fs::read_to_string(&alerts)
            .unwrap()
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    let link = logged["details"]["link"].as_str().unwrap();
    assert_eq!(link, format!("{}/admin/trees/ses_demo_build", server.url));
    let (code, page) = get(link);
    assert_eq!(code, 200);
    assert!(page.contains("ses_demo_build"), "{page}");

    let same_origin = [("Origin", server.url.as_str())];

    // A channel switched off through the API: the escalation two ticks later reaches nothing.
    let (code, body) = post(
        &format!("{}/api/watchdog/channels", server.url),
        &same_origin,
        r#"{"name":"log","enabled":false}"#,
    );
    assert_eq!(code, 200, "{body}");
    std::fs::remove_file(&alerts).unwrap();
    tick(T0 + 300);
    let (out, err) = tick(T0 + 600);
    assert!(
        out.contains("alert escalate opencode-loop:ses_demo_build"),
        "{out}"
    );
    assert!(!err.contains("channel=log delivery=sent"), "{err}");
    assert!(!alerts.exists(), "a channel switched off was delivered to");

    // Detector keys posted through the API: the next tick no longer flags the tree (under the
    // design's rules, which wait for these thresholds alone).
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(
        &config,
        format!("{text}\n[watchdog.detector]\nprofile = \"design\"\n"),
    )
    .unwrap();
    for (key, value) in [("top_min_ro", "30"), ("cover_min", "20")] {
        let (code, body) = post(
            &format!("{}/admin/api/config/watchdog.detector.{key}", server.url),
            &same_origin,
            &format!(r#"{{"value":{value}}}"#),
        );
        assert_eq!(code, 200, "{body}");
    }
    let (out, _) = tick(T0 + 900);
    assert!(out.contains("tree ses_demo_build sessions=2 ok"), "{out}");
    let status = get_json(&format!("{}/api/watchdog/status", server.url));
    assert_eq!(status["verdicts"]["flagged"], 0);
    assert_eq!(status["open_alerts"], 0);

    // The test alert goes through the configured channel (named, so even a disabled one).
    let (code, body) = post(
        &format!("{}/api/watchdog/test-alert", server.url),
        &same_origin,
        r#"{"severity":"critical","channel_name":"log"}"#,
    );
    assert_eq!(
        (code, &body["sends"][0]["result"]),
        (200, &json!("sent")),
        "{body}"
    );
    let logged = std::fs::read_to_string(&alerts).unwrap();
    assert!(
        logged.contains("\"dedup_key\":\"agentwatch-test\""),
        "{logged}"
    );
    let (code, body) = post(
        &format!("{}/api/watchdog/test-alert", server.url),
        &same_origin,
        r#"{"channel_name":"nope"}"#,
    );
    assert_eq!(
        (code, &body["field"]),
        (400, &json!("channel_name")),
        "{body}"
    );
}

#[test]
fn beyond_loopback_needs_the_token_and_then_every_request_does() {
    let dir = TempDir::new("aw-serve-token");
    let db = dir.path.join("agentwatch.db");
    let db_arg = db.to_str().unwrap();
    let out = command(
        &dir.path,
        &[],
        &["serve", "--db", db_arg, "--listen", "0.0.0.0:0"],
    )
    .output()
    .unwrap();
    assert_eq!(out.status.code(), Some(78));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("refusing to listen on 0.0.0.0:0 without a token")
            && err.contains("AGENTWATCH_SERVE_TOKEN"),
        "{err}"
    );
    assert!(out.stdout.is_empty());

    let token = "t0ken-for-the-test";
    let server = serve(
        &dir.path,
        &[("AGENTWATCH_SERVE_TOKEN", token)],
        &["--db", db_arg, "--listen", "0.0.0.0:0"],
    );
    let port = server.url.rsplit(':').next().unwrap();
    let url = format!("http://127.0.0.1:{port}/admin/api/config/watchdog.enabled");
    let (code, _) = post(&url, &[], r#"{"value":false}"#);
    assert_eq!(code, 401);
    let bearer = format!("Bearer {token}");
    // Beyond loopback every request needs the token, GET included (issue 38).
    let status = format!("http://127.0.0.1:{port}/api/watchdog/status");
    assert_eq!(get(&status).0, 401);
    let mut r = agent()
        .get(&status)
        .header("Authorization", &bearer)
        .call()
        .unwrap();
    assert_eq!(
        r.status().as_u16(),
        200,
        "{}",
        r.body_mut().read_to_string().unwrap()
    );
    // No config file: the edit goes to the user's configuration directory (issue 40), 0600, and
    // the next command reads it.
    let (code, body) = post(&url, &[("Authorization", &bearer)], r#"{"value":false}"#);
    let overlay = dir.path.join("config/agentwatch/config.local.toml");
    assert_eq!(code, 200, "{body}");
    assert_eq!(body["file"], overlay.display().to_string());
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&overlay).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    let out = run(&dir.path, &["config"]);
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(
        shown.contains("\nenabled = false\nlocal_llm_enabled"),
        "{shown}"
    );
}

/// A session that runs `ls` ten times (one cent each), writes a file (landing), then reads it
/// 45 times (two cents each): 0.90 USD since it landed.
fn spending_export() -> Value {
    use agentwatch_testkit::opencode::ExportBuilder;
    let start_ms = T0 * 1000;
    let ls = ("bash", json!({"command": "ls"}), json!({"exit": 0}), "a\nb");
    let write = (
        "write",
        json!({"filePath": "/tmp/proj/a.rs", "content": "fn main() {}\n"}),
        json!({}),
        "",
    );
    let read = (
        "read",
        json!({"filePath": "/tmp/proj/a.rs"}),
        json!({}),
        "1: fn main() {}\n(End of file - total 1 lines)",
    );
    ExportBuilder::new("ses_spend_root", "spending", None, start_ms)
        .step_cost(0.01)
        .steps("build", &vec![ls.clone(); 10], 1000)
        .steps("build", &[write], 1000)
        .step_cost(0.02)
        .steps("build", &vec![read.clone(); 45], 1000)
        .build()
}

/// A session read from a loopback opencode stand-in: its verdicts carry the assistant messages'
/// model and provider, and what they cost since the session's write landed; a second tick that
/// finds the session unchanged keeps them (they live in the session cache), and the models
/// page's API rolls them up.
#[test]
fn verdicts_carry_model_provider_and_cost_since_landed() {
    use agentwatch_testkit::opencode::serve_exports;
    let dir = TempDir::new("aw-serve-spend");
    let export = spending_export();
    let opencode = serve_exports(vec![export]);
    let db = dir.path.join("agentwatch.db");
    for now in [T0 + 600, T0 + 900] {
        run(
            &dir.path,
            &[
                "watch",
                "--once",
                "--server",
                &opencode.url(),
                "--db",
                db.to_str().unwrap(),
                "--now",
                &now.to_string(),
                "--set",
                "watchdog.local_llm_enabled=false",
            ],
        );
    }
    let store = agentwatch_store::Store::open_read_only(&db).unwrap();
    let _tick = store.last_tick().unwrap().unwrap();
    let v = &store.current_verdicts().unwrap()[0];
    assert_eq!(
        (v.model_id.as_deref(), v.provider.as_deref()),
        (Some("claude-sonnet-4-5"), Some("anthropic"))
    );
    let cost = v.cost_since_landed_usd.unwrap();
    assert!(
        (cost - 0.90).abs() < 1e-9,
        "45 reads after the write: {cost}"
    );
    assert_eq!(v.calls_since_landed, 45);

    let server = serve(
        &dir.path,
        &[],
        &["--db", db.to_str().unwrap(), "--listen", "127.0.0.1:0"],
    );
    let models = get_json(&format!("{}/api/watchdog/models", server.url));
    let m = &models["models"][0];
    assert_eq!(
        (m["model_id"].as_str(), m["provider"].as_str()),
        (Some("claude-sonnet-4-5"), Some("anthropic"))
    );
    assert_eq!(m["verdicts"], 2);
    let tree = get_json(&format!("{}/api/watchdog/trees/ses_spend_root", server.url));
    let last = &tree["ticks"][1]["sessions"][0];
    assert_eq!(last["verdict"]["model_id"], "claude-sonnet-4-5");
    assert!((last["verdict"]["cost_since_landed_usd"].as_f64().unwrap() - 0.90).abs() < 1e-9);
}

#[test]
fn the_shipped_unit_serves_on_loopback() {
    let unit = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../deploy/agentwatch-serve.service"
    ))
    .unwrap();
    let exec = unit
        .lines()
        .find_map(|l| l.strip_prefix("ExecStart="))
        .unwrap();
    assert_eq!(exec, "%h/.cargo/bin/agentwatch serve");
    assert!(unit.contains("RestartPreventExitStatus=64 78"));
}

/// The same session read from opencode's own database: the same model, provider and cost.
#[test]
fn opencode_db_sessions_carry_model_provider_and_cost_too() {
    use agentwatch_opencode::db::testing::{create_db, insert_export};
    let dir = TempDir::new("aw-serve-spend-db");
    let oc = dir.path.join("opencode.db");
    create_db(&oc).unwrap();
    insert_export(&oc, &spending_export(), "/tmp/proj").unwrap();
    let db = dir.path.join("agentwatch.db");
    run(
        &dir.path,
        &[
            "watch",
            "--once",
            "--db",
            db.to_str().unwrap(),
            "--now",
            &(T0 + 3600).to_string(),
            "--set",
            "watchdog.local_llm_enabled=false",
            "--set",
            &format!("opencode.db={:?}", oc.display().to_string()),
        ],
    );
    let store = agentwatch_store::Store::open_read_only(&db).unwrap();
    let _tick = store.last_tick().unwrap().unwrap();
    let v = &store.current_verdicts().unwrap()[0];
    assert_eq!(
        (
            v.model_id.as_deref(),
            v.provider.as_deref(),
            v.calls_since_landed
        ),
        (Some("claude-sonnet-4-5"), Some("anthropic"), 45)
    );
    let cost = v.cost_since_landed_usd.unwrap();
    assert!(
        (cost - 0.90).abs() < 1e-9,
        "45 reads after the write: {cost}"
    );
}
