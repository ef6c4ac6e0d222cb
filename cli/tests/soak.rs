//! Kill -9 soak: many `agentwatch opencode --once` ticks against a real SQLite store and a slow
//! loopback webhook receiver, each killed with SIGKILL at a pseudo-random point (before, during
//! or after its store transaction and its sends), then clean ticks. What must hold afterwards:
//! the store passes SQLite's integrity check and opens without anything set aside, nothing is
//! left pending, the receiver got the alert (a trigger or escalation) and its resolve, and every
//! event it got — duplicates included — carries the alert's one dedup key.
//!
//! The kill points come from a seeded generator, so a failing run can be repeated; the delays
//! only place the fault, nothing waits for time to pass (ticks take `--now`).

mod common;

use agentwatch_store::Store;
use agentwatch_testkit::opencode::{ExportBuilder, healthy_calls, looping_calls};
use agentwatch_testkit::{HttpServer, Reply, Request, TempDir};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

const T0: i64 = 1_796_100_000;
const ROOT: &str = "ses_soak000000000000001rootAA";
const KILLED_TICKS: usize = 60;

fn session(dir: &Path, looping: bool, name: &str) -> PathBuf {
    let calls = if looping {
        looping_calls(45)
    } else {
        healthy_calls(45)
    };
    ExportBuilder::new(ROOT, "Fix the money rounding", None, T0 * 1000 - 300_000)
        .steps("build", &calls, 1000)
        .write(&dir.join(name))
}

fn command(home: &Path, db: &Path, sessions: &Path, now: i64) -> Command {
    let mut cmd = agentwatch_testkit::isolated_command(env!("CARGO_BIN_EXE_agentwatch"), home);
    cmd.args(["watch", "--once", "--now", &now.to_string(), "--db"])
        .arg(db)
        .arg("--sessions")
        .arg(sessions)
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    cmd
}

/// SplitMix64: kill delays between 0 and 120% of `tick`, repeatable from the seed.
fn delays(seed: u64, n: usize, tick: Duration) -> Vec<Duration> {
    let mut state = seed;
    (0..n)
        .map(|_| {
            state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            tick.mul_f64(((z ^ (z >> 31)) % 1200) as f64 / 1000.0)
        })
        .collect()
}

#[test]
fn ticks_killed_at_random_points_lose_no_alert_and_keep_one_dedup_key() {
    // A slow receiver (each answer after 15 ms) widens the window between store and send.
    let hook = HttpServer::start(|_: &Request| {
        std::thread::sleep(Duration::from_millis(15));
        Reply::json(200, &json!({"ok": true}))
    });
    let tmp = TempDir::new("aw-soak");
    let home = common::webhook_home(&tmp.path, &hook, "", "rate_limit_s = 0");
    let looping = session(&tmp.path, true, "looping.json");
    let fixed = session(&tmp.path, false, "fixed.json");
    let db = tmp.path.join("aw.db");

    // How long a whole tick takes here (on a scratch store), so the kills land inside ticks on
    // a fast machine and a slow one alike.
    let started = std::time::Instant::now();
    let probe = command(&home, &tmp.path.join("probe.db"), &looping, T0)
        .output()
        .unwrap();
    assert_eq!(probe.status.code(), Some(0));
    let tick = started.elapsed();
    let hook_probe = hook.requests().len();

    let mut killed = 0;
    for (i, delay) in delays(20261202, KILLED_TICKS, tick).into_iter().enumerate() {
        // The first half loops (trigger, escalation), the second half is fixed (resolve).
        let sessions = if i < KILLED_TICKS / 2 {
            &looping
        } else {
            &fixed
        };
        let now = T0 + 60 * i as i64;
        let mut child = command(&home, &db, sessions, now).spawn().unwrap();
        std::thread::sleep(delay);
        if child.try_wait().unwrap().is_none() {
            child.kill().unwrap();
            killed += 1;
        }
        let status = child.wait().unwrap();
        // A tick that ran to its end succeeded; one that found the lock of a killed one's
        // leftover would say so (75), which must not happen: locks die with their process.
        if let Some(code) = status.code() {
            assert!(code == 0, "tick {i} exited {code}");
        }
    }
    assert!(killed > 0, "no tick was killed (a tick takes {tick:?})");

    // Two clean ticks: whatever a killed tick left pending goes out now.
    for k in 0..2 {
        let out = command(&home, &db, &fixed, T0 + 60 * (KILLED_TICKS + k) as i64)
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    let store = Store::open_read_only(&db).unwrap();
    assert_eq!(store.integrity_check().unwrap(), "ok");
    assert!(
        store.pending_deliveries(100).unwrap().is_empty(),
        "nothing stays pending"
    );
    let states = store.states().unwrap();
    assert!(
        states.iter().all(|s| !s.key.contains(".corrupt.")),
        "no state was set aside: {:?}",
        states.iter().map(|s| &s.key).collect::<Vec<_>>()
    );
    let alerts = store.alerts(true).unwrap();
    assert!(
        alerts.iter().all(|a| a.resolved_at.is_some()),
        "the fixed tree's alert is resolved: {alerts:?}"
    );
    drop(store);

    let key = format!("opencode-loop:{ROOT}");
    let events: Vec<Value> = hook.requests()[hook_probe..]
        .iter()
        .map(Request::body_json)
        .collect();
    assert!(
        events.iter().all(|e| e["dedup_key"] == key.as_str()),
        "every event, duplicates included, carries the one key: {events:?}"
    );
    let states: Vec<&str> = events.iter().filter_map(|e| e["state"].as_str()).collect();
    let alerted = states
        .iter()
        .position(|s| *s == "trigger" || *s == "escalate");
    let resolved = states.iter().rposition(|s| *s == "resolve");
    assert!(
        matches!((alerted, resolved), (Some(a), Some(r)) if a < r),
        "the receiver got the alert, then its resolve: {states:?}"
    );
    assert_eq!(
        states.last(),
        Some(&"resolve"),
        "nothing after the resolve: {states:?}"
    );
    eprintln!(
        "{killed} of {KILLED_TICKS} ticks killed (a tick takes {tick:?}); the receiver got {} events: {states:?}",
        states.len()
    );
}
