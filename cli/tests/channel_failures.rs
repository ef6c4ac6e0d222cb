//! A channel that cannot deliver is an alert to the others (issue 37): one that fails
//! `fail_after` (3) deliveries in a row raises `blind:channel:NAME`, and one of a type this
//! build does not know is skipped with an error, an alert and a `doctor` failure, while the
//! other channels keep working. The journal never says a failed send was delivered.

use agentwatch_testkit::opencode::{ExportBuilder, looping_calls};
use agentwatch_testkit::{HttpServer, Reply, Request, TempDir};
use serde_json::{Value, json};
use std::path::Path;
use std::process::Output;

const T0: i64 = 1_796_000_000;
const ROOT: &str = "ses_chanfail0000000000rootAAAA";

fn agentwatch(home: &Path, args: &[&str]) -> Output {
    agentwatch_testkit::isolated_command(env!("CARGO_BIN_EXE_agentwatch"), home)
        .args(args)
        .output()
        .unwrap()
}

/// A config with a receiving webhook `good` and `extra` channels, and a looping session file.
fn setup(tmp: &TempDir, good: &HttpServer, extra: &str) {
    let dir = tmp.path.join("config/agentwatch");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("config.toml"),
        format!(
            "[watchdog]\nlocal_llm_enabled = false\n\
             [[channels]]\nname = \"good\"\ntype = \"webhook\"\nurl = \"{}/events\"\n{extra}",
            good.url()
        ),
    )
    .unwrap();
    ExportBuilder::new(ROOT, "Task", None, T0 * 1000 - 300_000)
        .steps("build", &looping_calls(45), 1000)
        .write(&tmp.path.join("s.json"));
}

fn tick(tmp: &TempDir, at: i64) -> String {
    let db = tmp.path.join("aw.db").display().to_string();
    let sessions = tmp.path.join("s.json").display().to_string();
    let now = at.to_string();
    let args = [
        "watch",
        "--once",
        "--now",
        &now,
        "--db",
        &db,
        "--sessions",
        &sessions,
    ];
    let out = agentwatch(&tmp.path, &args);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(0), "{err}");
    err
}

/// `(dedup_key, state)` of every event a receiver got.
fn received(hook: &HttpServer) -> Vec<(String, String)> {
    hook.requests()
        .iter()
        .map(|r| {
            let body: Value = r.body_json();
            let field = |k: &str| body[k].as_str().unwrap_or("").to_owned();
            (field("dedup_key"), field("state"))
        })
        .collect()
}

#[test]
fn a_channel_that_keeps_failing_is_an_alert_to_the_others() {
    let tmp = TempDir::new("aw-channel-fails");
    let good = HttpServer::start(|_: &Request| Reply::json(200, &json!({"ok": true})));
    let bad = HttpServer::start(|_: &Request| Reply::json(500, &json!({"error": "down"})));
    let extra = format!(
        "[[channels]]\nname = \"bad\"\ntype = \"webhook\"\nurl = \"{}/events\"\n",
        bad.url()
    );
    setup(&tmp, &good, &extra);
    let mut journal = String::new();
    for n in 0..4 {
        journal.push_str(&tick(&tmp, T0 + 60 * n));
    }
    let loop_key = format!("opencode-loop:{ROOT}");
    let got = received(&good);
    assert_eq!(
        got,
        [
            (loop_key, "trigger".to_owned()),
            ("blind:channel:bad".to_owned(), "trigger".to_owned())
        ],
        "{journal}"
    );
    let alert = good.requests()[1].body_json();
    let summary = alert["summary"].as_str().unwrap_or("");
    assert!(
        summary.contains("The last 3 deliveries to channel bad failed"),
        "{summary}"
    );
    assert!(
        received(&bad)
            .iter()
            .all(|(key, _)| !key.starts_with("blind:")),
        "the failing channel gets no blindness alert: {:?}",
        received(&bad)
    );
    // `status` shows the channel failing, with its last error.
    let db = tmp.path.join("aw.db").display().to_string();
    let now = (T0 + 200).to_string();
    let status = agentwatch(&tmp.path, &["status", "--db", &db, "--now", &now]);
    let text = String::from_utf8_lossy(&status.stdout);
    let row = text
        .lines()
        .find(|l| l.starts_with("bad "))
        .unwrap_or_else(|| panic!("no row for bad:\n{text}"));
    assert!(
        row.contains("FAILING: 4 in a row since") && row.contains("500"),
        "{row}"
    );
    let good_row = text
        .lines()
        .find(|l| l.starts_with("good "))
        .unwrap_or_default();
    assert!(good_row.ends_with("ok"), "{good_row}");
    for line in journal.lines().filter(|l| l.contains("channel=bad")) {
        assert!(
            !line.contains("delivery=sent") && !line.contains("delivered to"),
            "a failed send is never said delivered: {line}"
        );
    }
}

/// A channel's mistake fails at load (issue 49): an unknown type (`webhok`) or a webhook URL
/// without its scheme is a configuration error (exit 78) naming the file and the key, never
/// echoing the value; nothing is delivered, and `doctor` says the same.
#[test]
fn a_channel_mistake_is_a_config_error_naming_the_file_and_the_key() {
    for (name, extra, key) in [
        (
            "type",
            "[[channels]]\nname = \"pigeon\"\ntype = \"webhok\"\n",
            "channels[1].type: must be one of",
        ),
        (
            "url",
            "[[channels]]\nname = \"slack\"\ntype = \"webhook\"\nurl = \"hooks.example/T0/SECRET\"\n",
            "channels[1].url: must start with http:// or https://",
        ),
    ] {
        let tmp = TempDir::new(&format!("aw-channel-{name}"));
        let good = HttpServer::start(|_: &Request| Reply::json(200, &json!({"ok": true})));
        setup(&tmp, &good, extra);
        let db = tmp.path.join("aw.db").display().to_string();
        let sessions = tmp.path.join("s.json").display().to_string();
        let now = T0.to_string();
        let args = [
            "watch",
            "--once",
            "--now",
            &now,
            "--db",
            &db,
            "--sessions",
            &sessions,
        ];
        let out = agentwatch(&tmp.path, &args);
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(78), "{err}");
        assert!(err.contains(&format!("config.toml: {key}")), "{err}");
        assert!(!err.contains("webhok") && !err.contains("SECRET"), "{err}");
        assert!(received(&good).is_empty());
        let doctor = agentwatch(&tmp.path, &["doctor"]);
        assert_eq!(doctor.status.code(), Some(78), "{doctor:?}");
    }
}
