//! `agentwatch status` over a store filled by real ticks of the three jobs: one table of every
//! job's last tick with its age, the open alerts, the restarts, the channels; exit 69 naming the
//! job whose last tick is older than three of its intervals. Time is `--now`, never the clock.

use agentwatch_testkit::TempDir;
use serde_json::Value;
use std::path::Path;
use std::process::Output;

const T0: i64 = 1_796_000_000;

fn agentwatch(home: &Path, args: &[&str]) -> Output {
    agentwatch_testkit::isolated_command(env!("CARGO_BIN_EXE_agentwatch"), home)
        .args(args)
        .env("AGENT_DECK_BIN", "/nonexistent/agent-deck")
        .output()
        .unwrap()
}

/// A store holding one opencode demo tick at T0, a recover check at T0+10 (no loop report) and
/// a deck tick at T0+20 (agent-deck missing: the tick is recorded and exits 69).
fn filled_store(home: &Path) -> String {
    let db = home.join("aw.db").display().to_string();
    let report = home.join("loop.json").display().to_string();
    for (args, at, code) in [
        (vec!["watch", "--once", "--demo"], T0, 0),
        (
            vec![
                "recover",
                "--once",
                "--set",
                &format!("recover.report={report:?}"),
                "--set",
                "recover.unit=\"agent.service\"",
            ],
            T0 + 10,
            0,
        ),
        (vec!["deck", "--once"], T0 + 20, 69),
    ] {
        let at = at.to_string();
        let mut full = args.clone();
        full.extend(["--db", &db, "--now", &at]);
        let out = agentwatch(home, &full);
        assert_eq!(out.status.code(), Some(code), "{full:?}: {out:?}");
    }
    db
}

fn status(home: &Path, db: &str, now: i64, json: bool) -> (Option<i32>, String) {
    let now = now.to_string();
    let mut args = vec!["status", "--db", db, "--now", &now];
    if json {
        args.push("--json");
    }
    let out = agentwatch(home, &args);
    let text = String::from_utf8(out.stdout).unwrap().replace(db, "[DB]");
    (out.status.code(), text)
}

#[test]
fn status_shows_every_job_with_its_age() {
    let tmp = TempDir::new("aw-status");
    let db = filled_store(&tmp.path);
    let (code, text) = status(&tmp.path, &db, T0 + 40, false);
    assert_eq!(code, Some(0), "{text}");
    insta::assert_snapshot!("status_three_jobs", text);
}

#[test]
fn a_job_silent_for_three_intervals_is_stale_and_named() {
    let tmp = TempDir::new("aw-status-stale");
    let db = filled_store(&tmp.path);
    // deck ticks every 15 s: 80 s after its tick it is stale; opencode (5 min) and recover
    // (60 s... its tick was 90 s ago, within 180 s) are not.
    let (code, text) = status(&tmp.path, &db, T0 + 100, false);
    assert_eq!(code, Some(69), "{text}");
    assert!(text.starts_with("warning: the deck job is stale"), "{text}");
    assert!(!text.contains("opencode job is stale"), "{text}");

    let (code, text) = status(&tmp.path, &db, T0 + 100, true);
    assert_eq!(code, Some(69));
    let json: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(json["stale"], serde_json::json!(["deck"]), "{json}");
    assert_eq!(json["jobs"].as_array().unwrap().len(), 3);
    assert_eq!(json["jobs"][0]["age_s"], 100);
    // The demo's three looping trees (opencode's, Claude Code's and Codex's).
    assert_eq!(json["open_alerts"], 3);
    let alerts = json["alerts"].as_array().unwrap();
    assert!(
        alerts
            .iter()
            .any(|a| a["dedup_key"] == "opencode-loop:ses_demo_build"),
        "{json}"
    );

    // 71 days later every job that is switched on is stale; recover, with no `recover.unit`
    // in this configuration, is disabled.
    let (code, text) = status(&tmp.path, &db, T0 + 71 * 86_400, false);
    assert_eq!(code, Some(69));
    assert_eq!(text.matches("is stale").count(), 2, "{text}");
    assert!(text.contains("71 days ago"), "{text}");
    assert!(
        text.contains("disabled (recover.unit is not set)"),
        "{text}"
    );
}

#[test]
fn a_switched_off_job_is_disabled_never_stale() {
    let tmp = TempDir::new("aw-status-disabled");
    let db = filled_store(&tmp.path);
    let config = tmp.path.join("off.toml");
    std::fs::write(
        &config,
        "[watchdog]\nenabled = false\n[recover]\nunit = \"agent.service\"\n",
    )
    .unwrap();
    let config = config.display().to_string();
    let now = (T0 + 71 * 86_400).to_string();
    let run = |json: bool| {
        let mut args = vec!["status", "--db", &db, "--config", &config, "--now", &now];
        if json {
            args.push("--json");
        }
        let out = agentwatch(&tmp.path, &args);
        (out.status.code(), String::from_utf8(out.stdout).unwrap())
    };
    let (code, text) = run(false);
    // deck and recover are stale (exit 69); opencode, switched off, is neither stale nor named.
    assert_eq!(code, Some(69), "{text}");
    assert!(!text.contains("opencode job is stale"), "{text}");
    let row = text.lines().find(|l| l.starts_with("watch")).unwrap();
    assert!(
        row.contains("disabled (watchdog.enabled = false)") && !row.contains("STALE"),
        "{row}"
    );
    let (_, text) = run(true);
    let json: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        json["stale"],
        serde_json::json!(["deck", "recover"]),
        "{json}"
    );
    assert_eq!(json["jobs"][0]["disabled"], true);
    assert_eq!(
        json["jobs"][0]["disabled_because"],
        "watchdog.enabled = false"
    );
    assert_eq!(json["jobs"][1]["disabled"], false);
}

#[test]
fn a_store_that_never_ticked_is_not_stale() {
    let tmp = TempDir::new("aw-status-empty");
    let db = tmp.path.join("none.db").display().to_string();
    let (code, text) = status(&tmp.path, &db, T0, false);
    assert_eq!(code, Some(0), "{text}");
    assert_eq!(text.matches("never").count(), 3, "{text}");
}
