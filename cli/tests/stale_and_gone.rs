//! Issue 14: alerts end for the right reason. A tree with no new call for
//! `watchdog.stale_after_s` is not judged as looping now and its open alert resolves as
//! `resolve_stale`; "gone" belongs to the source that saw the tree; a manual run
//! (`--sessions`, `--demo`) never touches the production store.

use agentwatch_opencode::db::testing::{create_db, insert_export};
use agentwatch_testkit::TempDir;
use agentwatch_testkit::opencode::ExportBuilder;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

const NOW: i64 = 1_800_000_000;
const DAY: i64 = 86_400;

/// Run the binary with an isolated environment rooted at `home`; the exit code must be 0.
fn agentwatch(home: &Path, args: &[&str]) -> (Value, String) {
    let out = agentwatch_testkit::isolated_command(env!("CARGO_BIN_EXE_agentwatch"), home)
        .args(args)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(0), "{args:?}: {stderr}");
    let json = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (json, stderr)
}

/// A config with a log channel (its path returned) and no model.
fn write_config(home: &Path, extra: &str) -> PathBuf {
    let dir = home.join("config/agentwatch");
    std::fs::create_dir_all(&dir).unwrap();
    let log = home.join("alerts.jsonl");
    std::fs::write(
        dir.join("config.toml"),
        format!(
            "[watchdog]\nlocal_llm_enabled = false\n{extra}\n[[channels]]\nname = \"log\"\ntype = \"log\"\npath = \"{}\"\n",
            log.display()
        ),
    )
    .unwrap();
    log
}

/// A session that rereads one file and reruns one failing test, starting at `start_s`.
fn looping(id: &str, start_s: i64) -> ExportBuilder {
    let mut calls = Vec::new();
    for i in 0..45 {
        calls.push(if i % 3 == 0 {
            (
                "bash",
                json!({"command": "cd /tmp/proj && pytest -x tests/test_money.py", "description": "run"}),
                json!({"output": "FAILED", "exit": 1, "truncated": false}),
                "FAILED",
            )
        } else {
            (
                "read",
                json!({"filePath": "/tmp/proj/src/money.py", "offset": 1 + (i % 5) * 40, "limit": 40}),
                json!({"preview": "x", "truncated": false, "loaded": []}),
                "<content>",
            )
        });
    }
    ExportBuilder::new(id, "Fix the money rounding", None, start_s * 1000)
        .steps("explore", &calls, 1000)
}

fn tick(home: &Path, store: &Path, oc: &Path, now: i64, sets: &[&str]) -> (Value, String) {
    let oc_set = format!("opencode.db={:?}", oc.display().to_string());
    let mut args = vec!["--set", oc_set.as_str()];
    for set in sets {
        args.extend(["--set", set]);
    }
    tick_reading(home, store, now, &args)
}

/// One `opencode --once --json` tick on `store` at `now`, reading what `source_args` say.
fn tick_reading(home: &Path, store: &Path, now: i64, source_args: &[&str]) -> (Value, String) {
    let now = now.to_string();
    let mut args = vec![
        "watch",
        "--once",
        "--json",
        "--db",
        store.to_str().unwrap(),
        "--now",
        &now,
    ];
    args.extend(source_args);
    agentwatch(home, &args)
}

fn decisions(report: &Value) -> Vec<(String, String)> {
    report["decisions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (
                d["kind"].as_str().unwrap().to_owned(),
                d["root"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

/// Pointed at an opencode.db holding a session that looped 60 days ago, a tick does not page
/// it, and an alert opened while it looped closes as stale (a resolve the channels get).
/// `stale_after_s = 0` asks for history: then it is judged (and flagged) again.
#[test]
fn a_session_that_looped_60_days_ago_is_not_paged_and_its_alert_closes_as_stale() {
    let tmp = TempDir::new("aw-stale");
    let log = write_config(&tmp.path, "");
    let oc = tmp.path.join("opencode.db");
    create_db(&oc).unwrap();
    let then = NOW - 60 * DAY;
    insert_export(&oc, &looping("ses_old_loop", then).build(), "/tmp/proj").unwrap();

    // A fresh store, now: not reported, not paged.
    let fresh = tmp.path.join("fresh.db");
    let (report, stderr) = tick(&tmp.path, &fresh, &oc, NOW, &[]);
    assert_eq!(
        decisions(&report),
        Vec::<(String, String)>::new(),
        "{stderr}"
    );
    assert_eq!(report["sessions"], json!([]), "{report}");
    assert!(!log.exists(), "nothing paged");

    // Back then it paged; now the open alert resolves as stale.
    let store = tmp.path.join("agentwatch.db");
    let (report, stderr) = tick(&tmp.path, &store, &oc, then + 120, &[]);
    assert_eq!(
        decisions(&report),
        [("trigger".to_owned(), "ses_old_loop".to_owned())],
        "{stderr}"
    );
    let (report, stderr) = tick(&tmp.path, &store, &oc, NOW, &[]);
    assert_eq!(
        decisions(&report),
        [("resolve_stale".to_owned(), "ses_old_loop".to_owned())],
        "{stderr}"
    );
    assert!(stderr.contains("state=resolve_stale"), "{stderr}");
    assert!(stderr.contains("stale_after_s"), "{stderr}");
    let logged = std::fs::read_to_string(&log).unwrap();
    let states: Vec<Value> = logged
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .collect();
    assert_eq!(states.len(), 2, "{logged}");
    assert_eq!(states[1]["state"], "resolve");
    assert_eq!(states[1]["details"]["resolved_because"], "stale");
    let (status, _) = agentwatch(
        &tmp.path,
        &[
            "status",
            "--json",
            "--db",
            store.to_str().unwrap(),
            "--now",
            &NOW.to_string(),
        ],
    );
    assert_eq!(status["open_alerts"], 0, "{status}");

    // History on request: judged as of now, the old loop is flagged again.
    let history = tmp.path.join("history.db");
    let (report, stderr) = tick(&tmp.path, &history, &oc, NOW, &["watchdog.stale_after_s=0"]);
    assert_eq!(
        decisions(&report),
        [("trigger".to_owned(), "ses_old_loop".to_owned())],
        "{stderr}"
    );
}

/// A session opencode lists as updated recently whose newest call is old is judged stale: its
/// tree is reported as such and not paged.
#[test]
fn a_recently_updated_session_whose_calls_are_old_is_stale() {
    let tmp = TempDir::new("aw-stale-calls");
    let log = write_config(&tmp.path, "");
    let oc = tmp.path.join("opencode.db");
    create_db(&oc).unwrap();
    let mut export = looping("ses_renamed", NOW - 2 * DAY).build();
    export["info"]["time"]["updated"] = json!(NOW * 1000);
    insert_export(&oc, &export, "/tmp/proj").unwrap();
    let store = tmp.path.join("agentwatch.db");
    let (report, stderr) = tick(&tmp.path, &store, &oc, NOW, &[]);
    assert_eq!(report["stale"], json!(["ses_renamed"]), "{report}");
    assert_eq!(
        decisions(&report),
        Vec::<(String, String)>::new(),
        "{stderr}"
    );
    assert!(!log.exists(), "nothing paged");
    // A shorter-lived session 30 minutes old is still judged.
    let (report, stderr) = tick(
        &tmp.path,
        &store,
        &oc,
        NOW - 2 * DAY + 1800,
        &["watchdog.stale_after_s=3600"],
    );
    assert_eq!(report["stale"], json!([]), "{report}");
    assert_eq!(
        decisions(&report),
        [("trigger".to_owned(), "ses_renamed".to_owned())],
        "{stderr}"
    );
}

fn healthy(id: &str, start_s: i64) -> ExportBuilder {
    let calls: Vec<_> = (0..20)
        .map(|i| {
            (
                "read",
                json!({"filePath": format!("/tmp/proj/migrations/{i:04}.py"), "offset": 1, "limit": 40}),
                json!({"preview": "x", "truncated": false, "loaded": []}),
                "<content>",
            )
        })
        .collect();
    ExportBuilder::new(id, "Review migrations", None, start_s * 1000).steps("build", &calls, 1000)
}

/// An alert opened from source A (an opencode.db) stays open through a manual `--sessions` run
/// on the default store and through a tick that reads only source B (another server); a
/// complete answer from A without the tree resolves it as gone.
#[test]
fn gone_belongs_to_the_source_that_saw_the_tree() {
    let tmp = TempDir::new("aw-gone-source");
    write_config(&tmp.path, "");
    let oc = tmp.path.join("opencode.db");
    create_db(&oc).unwrap();
    insert_export(&oc, &looping("ses_loop_a", NOW - 600).build(), "/tmp/proj").unwrap();
    let oc_set = format!("opencode.db={:?}", oc.display().to_string());
    let at = |t: i64| t.to_string();
    let open_alerts = || {
        let (status, _) = agentwatch(&tmp.path, &["status", "--json", "--now", &at(NOW)]);
        status["open_alerts"].clone()
    };

    // Source A, the default store: the alert opens.
    let (report, stderr) = agentwatch(
        &tmp.path,
        &[
            "watch",
            "--once",
            "--json",
            "--now",
            &at(NOW),
            "--set",
            &oc_set,
        ],
    );
    assert_eq!(
        decisions(&report),
        [("trigger".to_owned(), "ses_loop_a".to_owned())],
        "{stderr}"
    );
    assert_eq!(open_alerts(), 1);

    // A manual run on a file, with the default store: its own store, the alert stays open.
    let file = tmp.path.join("healthy.json");
    std::fs::write(&file, healthy("ses_other", NOW - 300).build().to_string()).unwrap();
    let (report, stderr) = agentwatch(
        &tmp.path,
        &[
            "watch",
            "--once",
            "--json",
            "--now",
            &at(NOW + 60),
            "--sessions",
            file.to_str().unwrap(),
        ],
    );
    assert_eq!(
        decisions(&report),
        Vec::<(String, String)>::new(),
        "{stderr}"
    );
    assert!(stderr.contains("store=temporary"), "{stderr}");
    assert_eq!(
        open_alerts(),
        1,
        "a manual run never closes a production alert"
    );

    // A tick that reads only source B (a server that does not list the tree): still open.
    let b =
        agentwatch_testkit::opencode::serve_exports(vec![healthy("ses_on_b", NOW - 300).build()]);
    let (report, stderr) = agentwatch(
        &tmp.path,
        &[
            "watch",
            "--once",
            "--json",
            "--now",
            &at(NOW + 120),
            "--server",
            &b.url(),
        ],
    );
    assert_eq!(
        decisions(&report),
        Vec::<(String, String)>::new(),
        "{stderr}"
    );
    assert!(stderr.contains("action=keep_open"), "{stderr}");
    assert_eq!(open_alerts(), 1, "source B cannot say A's tree is gone");

    // A complete answer from A without the tree (the same path, the session deleted): gone.
    let fresh = tmp.path.join("fresh-opencode.db");
    create_db(&fresh).unwrap();
    std::fs::rename(&fresh, &oc).unwrap();
    let _ = std::fs::remove_file(tmp.path.join("opencode.db-wal"));
    let _ = std::fs::remove_file(tmp.path.join("opencode.db-shm"));
    let (report, stderr) = agentwatch(
        &tmp.path,
        &[
            "watch",
            "--once",
            "--json",
            "--now",
            &at(NOW + 180),
            "--set",
            &oc_set,
            "--server",
            &b.url(),
        ],
    );
    assert_eq!(
        decisions(&report),
        [("resolve_gone".to_owned(), "ses_loop_a".to_owned())],
        "{stderr}"
    );
    assert_eq!(open_alerts(), 0);
}

/// opencode does not bump `time.updated` for calls through `POST /session/:id/shell`: a session
/// quiet for a day by its listing and by its stored newest call, or one never read because it was
/// already quiet when first listed, that gains such calls is still asked for its newest message
/// (a bounded few such sessions per tick), read, and judged.
#[test]
fn a_quiet_session_gaining_calls_its_listing_does_not_show_is_read() {
    let tmp = TempDir::new("aw-quiet-shell");
    write_config(&tmp.path, "");
    let then = NOW - DAY;
    let quiet = healthy("ses_quiet", then).build();
    let unseen = healthy("ses_unseen", then - DAY).build();
    let exports = std::sync::Arc::new(std::sync::Mutex::new(vec![quiet, unseen]));
    let server = agentwatch_testkit::opencode::serve_live(std::sync::Arc::clone(&exports), None);
    let store = tmp.path.join("agentwatch.db");
    let url = server.url();
    let run = |now: i64| tick_reading(&tmp.path, &store, now, &["--server", &url]);
    let (report, stderr) = run(then + 60);
    assert_eq!(
        decisions(&report),
        Vec::<(String, String)>::new(),
        "{stderr}"
    );
    // A day later it is quiet: asked for its newest message, unchanged, not read.
    let (report, stderr) = run(NOW - 600);
    assert_eq!(report["sessions"], json!([]), "{report}\n{stderr}");

    // Shell calls arrive; the listing's `time.updated` stays a day old.
    {
        let mut exports = exports.lock().unwrap();
        for (at, id) in [(0, "ses_quiet"), (1, "ses_unseen")] {
            let calls = looping(id, NOW - 300).build();
            let more = calls["messages"].as_array().unwrap().clone();
            exports[at]["messages"].as_array_mut().unwrap().extend(more);
        }
    }
    let (report, stderr) = run(NOW);
    assert_eq!(
        report["sessions"].as_array().map(Vec::len),
        Some(2),
        "{report}\n{stderr}"
    );
    let mut fired = decisions(&report);
    fired.sort();
    assert_eq!(
        fired,
        [
            ("trigger".to_owned(), "ses_quiet".to_owned()),
            ("trigger".to_owned(), "ses_unseen".to_owned())
        ],
        "{stderr}"
    );
}
