//! Issue 39: a kill -9 soak. Hundreds of `agentwatch opencode --once` ticks over an opencode.db
//! whose sessions start and stop looping over time (each loop ends with a landed edit, and
//! starts again later), against a real SQLite store and a loopback webhook receiver that
//! records every body and its `Idempotency-Key`. A seeded share of the ticks is killed with
//! SIGKILL at a random point of the tick (before, inside or after its transaction and sends).
//!
//! After every tick, killed or not: the store passes SQLite's integrity check, the alerts table
//! and the alert state hold the same open alerts, and no closed alert leaves a channel holding
//! (or maybe holding) its trigger without a resolve queued. At the end (clean ticks with every
//! loop fixed): nothing pending, every alert closed; no event lost (every event the outbox
//! recorded reached the receiver, every alert the receiver heard of was resolved to it); no
//! two distinct events for one transition (one `event_id` per key, state and `opened_at`; no
//! more alerts per session than it had loops); a re-send carries the same id as its header.
//!
//! The seed is printed (`SOAK_SEED=N` repeats a run); nothing waits for time to pass (ticks
//! take `--now`); the receiver's short delay only widens the window between store and send.
//! Run: `cargo test -p agentwatch --test kill_soak -- --nocapture`.

mod common;

use agentwatch_opencode::db::testing::{create_db, insert_export};
use agentwatch_store::Store;
use agentwatch_testkit::opencode::{ExportBuilder, looping_calls};
use agentwatch_testkit::{HttpServer, Reply, Request, TempDir};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const T0: i64 = 1_796_300_000;
const TICKS: usize = 200;
/// One tick in this many is killed.
const KILL_ONE_IN: u64 = 2;
/// Sessions, each looping for `LOOP_TICKS[i]` ticks, then fixed for as many.
const LOOP_TICKS: [usize; 4] = [1, 2, 7, 13];

/// Loops a session id has before the session is a new one (the old one gone from the
/// listing): a history stays short enough to build every tick.
const LOOPS_PER_SESSION: usize = 12;

/// The root id of session `i` in its `generation`.
fn root(i: usize, generation: usize) -> String {
    format!("ses_killsoak{generation:08}{i}rootAAAA")
}

/// Session `i` at tick `t`: its root id, and whether a loop starts at `t`.
fn episode_of(i: usize, t: usize) -> (String, bool) {
    let period = LOOP_TICKS[i];
    let episode = t / (2 * period);
    (
        root(i, episode / LOOPS_PER_SESSION),
        t.is_multiple_of(2 * period),
    )
}

/// SplitMix64: repeatable from the seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

fn landed_edit() -> (&'static str, Value, Value, &'static str) {
    (
        "edit",
        json!({"filePath": "/tmp/proj/src/money.py", "oldString": "round(", "newString": "quantize("}),
        json!({"diff": "@@ -1 +1 @@\n-round(\n+quantize(\n"}),
        "Edit applied successfully.",
    )
}

/// Session `i` at tick `t`: every loop before ends with a landed edit; a loop in progress
/// grows by three calls a tick. Returns the export and whether it loops now.
fn session_at(i: usize, t: usize, all_fixed: bool) -> (Value, bool) {
    let period = LOOP_TICKS[i];
    let episode = t / (2 * period);
    let looping = !all_fixed && t % (2 * period) < period;
    let mut builder = ExportBuilder::new(
        &episode_of(i, t).0,
        &format!("Fix the money rounding {i}"),
        None,
        T0 * 1000 - 600_000,
    );
    for _ in 0..episode % LOOPS_PER_SESSION {
        builder =
            builder
                .steps("build", &looping_calls(45), 1000)
                .steps("build", &[landed_edit()], 1000);
    }
    let in_phase = t % (2 * period);
    builder = builder.steps("build", &looping_calls(45 + 3 * in_phase.min(period)), 1000);
    if !looping {
        builder = builder.steps("build", &[landed_edit()], 1000);
    }
    (builder.build(), looping)
}

/// The opencode.db of tick `t`, written beside and renamed into place.
fn write_sessions(path: &Path, t: usize, all_fixed: bool) {
    let fresh = path.with_extension("next");
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", fresh.display()));
    }
    create_db(&fresh).unwrap();
    for i in 0..LOOP_TICKS.len() {
        insert_export(&fresh, &session_at(i, t, all_fixed).0, "/tmp/proj").unwrap();
    }
    for suffix in ["-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
    std::fs::rename(&fresh, path).unwrap();
}

struct Soak {
    _tmp: TempDir,
    home: PathBuf,
    db: PathBuf,
    oc: PathBuf,
    hook: HttpServer,
}

impl Soak {
    fn new() -> Self {
        // Each answer after 10 ms: the window between the store and the send is a real one.
        let hook = HttpServer::start(|_: &Request| {
            std::thread::sleep(Duration::from_millis(10));
            Reply::json(200, &json!({"ok": true}))
        });
        let tmp = TempDir::new("aw-kill-soak");
        let home = common::webhook_home(&tmp.path, &hook, "stale_after_s = 0", "rate_limit_s = 0");
        Self {
            db: tmp.path.join("aw.db"),
            oc: tmp.path.join("opencode.db"),
            _tmp: tmp,
            home,
            hook,
        }
    }

    fn command(&self, db: &Path, now: i64) -> Command {
        let mut cmd =
            agentwatch_testkit::isolated_command(env!("CARGO_BIN_EXE_agentwatch"), &self.home);
        cmd.args(["watch", "--once", "--now", &now.to_string(), "--db"])
            .arg(db)
            .arg("--set")
            .arg(format!("opencode.db={:?}", self.oc.display().to_string()))
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        cmd
    }
}

/// After any tick: the store is whole, the alerts table and the alert state hold the same open
/// alerts (with the same `opened_at`), and a closed alert whose trigger or escalate a channel
/// took (or may have taken: a send started and never recorded) has its resolve queued after it.
fn check_store(db: &Path, what: &str) {
    let store = Store::open_read_only(db).unwrap();
    assert_eq!(store.integrity_check().unwrap(), "ok", "{what}");
    let state: Value = store
        .load_state("alerts")
        .unwrap()
        .map(|s| serde_json::from_str(&s).unwrap())
        .unwrap_or(Value::Null);
    let in_state: BTreeMap<String, i64> = state["open_alerts"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, a)| (k.clone(), a["opened_at"].as_i64().unwrap_or(-1)))
        .collect();
    let in_table: BTreeMap<String, i64> = store
        .alerts(false)
        .unwrap()
        .into_iter()
        .map(|a| (a.dedup_key, a.opened_at))
        .collect();
    assert_eq!(
        in_state, in_table,
        "{what}: the state and the table disagree"
    );
    let doubt: BTreeSet<(String, String)> = store.in_doubt().unwrap().into_iter().collect();
    let mut last: BTreeMap<&str, &agentwatch_store::OutboxRow> = BTreeMap::new();
    let outbox = store.outbox().unwrap();
    for row in &outbox {
        last.insert(&row.event.dedup_key, row);
    }
    for (key, row) in last {
        let held = row.delivered_at.is_some()
            || doubt.contains(&(key.to_owned(), row.event.channel.clone()));
        let rows: Vec<_> = outbox
            .iter()
            .filter(|r| r.event.dedup_key == key)
            .map(|r| {
                (
                    r.id,
                    &r.event.kind,
                    r.created_at,
                    r.delivered_at,
                    r.attempts,
                )
            })
            .collect();
        assert!(
            in_state.contains_key(key) || row.event.kind == "resolve" || !held,
            "{what}: {key} closed while {} holds its {} and no resolve is queued: {rows:?}",
            row.event.channel,
            row.event.kind
        );
    }
}

/// One received event: its triple, its id, and whether the header carried the same id.
struct Received {
    key: String,
    state: String,
    opened_at: i64,
    id: String,
}

fn received(hook: &HttpServer) -> Vec<Received> {
    hook.requests()
        .iter()
        .map(|r| {
            let body = r.body_json();
            let id = body["event_id"].as_str().unwrap_or_default().to_owned();
            assert_eq!(
                r.headers.get("idempotency-key"),
                Some(&id),
                "the header is the body's id: {body}"
            );
            Received {
                key: body["dedup_key"].as_str().unwrap_or_default().to_owned(),
                state: body["state"].as_str().unwrap_or_default().to_owned(),
                opened_at: body["details"]["opened_at"].as_i64().unwrap_or(-1),
                id,
            }
        })
        .collect()
}

#[test]
fn ticks_killed_at_random_points_lose_no_event_and_make_no_second_one() {
    let seed = std::env::var("SOAK_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20_261_206);
    eprintln!("kill soak: seed {seed} (SOAK_SEED={seed} repeats this run)");
    let mut rng = Rng(seed);
    let soak = Soak::new();

    // How long a tick takes here (on a scratch store), so kills land inside ticks on a fast
    // machine and a slow one alike.
    write_sessions(&soak.oc, 0, false);
    let started = Instant::now();
    let probe = soak
        .command(&soak.db.with_file_name("probe.db"), T0)
        .output()
        .unwrap();
    assert_eq!(probe.status.code(), Some(0));
    let tick = started.elapsed();
    let probe_requests = soak.hook.requests().len();

    let mut kills = 0;
    let mut alerts_cap: BTreeMap<String, usize> = BTreeMap::new();
    for t in 0..TICKS {
        write_sessions(&soak.oc, t, false);
        let now = T0 + 60 * t as i64;
        let mut child = soak.command(&soak.db, now).spawn().unwrap();
        let kill = rng.next().is_multiple_of(KILL_ONE_IN);
        if kill {
            std::thread::sleep(tick.mul_f64((rng.next() % 1200) as f64 / 1000.0));
            if child.try_wait().unwrap().is_none() {
                child.kill().unwrap();
                kills += 1;
            }
        }
        let out = child.wait_with_output().unwrap();
        if let Some(code) = out.status.code() {
            assert_eq!(
                code,
                0,
                "tick {t}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        if soak.db.exists() {
            let journal = String::from_utf8_lossy(&out.stderr);
            check_store(
                &soak.db,
                &format!("after tick {t} (killed: {kill}): {journal}"),
            );
        }
        // Each loop that starts may make one alert of its session's key, no more.
        for i in 0..LOOP_TICKS.len() {
            let (root, starts) = episode_of(i, t);
            *alerts_cap
                .entry(format!("opencode-loop:{root}"))
                .or_default() += usize::from(starts);
        }
    }

    // Every loop fixed, two clean ticks: whatever a killed tick left goes out now.
    write_sessions(&soak.oc, TICKS, true);
    for k in 0..2 {
        let out = soak
            .command(&soak.db, T0 + 60 * (TICKS + k) as i64)
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        check_store(&soak.db, "after the clean ticks");
    }
    let store = Store::open_read_only(&soak.db).unwrap();
    assert!(store.pending_deliveries(100).unwrap().is_empty());
    assert!(
        store.alerts(false).unwrap().is_empty(),
        "every alert closed"
    );
    let outbox = store.outbox().unwrap();
    drop(store);

    let got: Vec<Received> = received(&soak.hook).split_off(probe_requests);
    // One id per transition, one transition per id.
    let mut ids: BTreeMap<(String, String, i64), BTreeSet<String>> = BTreeMap::new();
    for r in &got {
        ids.entry((r.key.clone(), r.state.clone(), r.opened_at))
            .or_default()
            .insert(r.id.clone());
    }
    let distinct_ids: BTreeSet<&String> = got.iter().map(|r| &r.id).collect();
    let mut duplicates = ids.values().filter(|set| set.len() > 1).count();
    // No more alerts per session than it had loops; each one the receiver heard of ended.
    let mut alerts = 0;
    for (key, cap) in &alerts_cap {
        let opened: BTreeSet<i64> = got
            .iter()
            .filter(|r| &r.key == key)
            .map(|r| r.opened_at)
            .collect();
        duplicates += opened.len().saturating_sub(*cap);
        alerts += opened.len();
        for at in opened {
            assert!(
                ids.contains_key(&(key.clone(), "resolve".to_owned(), at)),
                "{key} opened at {at}: the receiver never got its resolve"
            );
        }
    }
    // Every event the outbox recorded reached the receiver.
    for row in &outbox {
        let payload: Value = serde_json::from_str(&row.event.payload).unwrap();
        let triple = (
            row.event.dedup_key.clone(),
            row.event.kind.clone(),
            payload["details"]["opened_at"].as_i64().unwrap_or(-1),
        );
        assert!(ids.contains_key(&triple), "lost: {triple:?}");
    }
    let resent = got.len() - distinct_ids.len();
    eprintln!(
        "kill soak (seed {seed}): {TICKS} ticks + 2 clean, {kills} killed with SIGKILL (a tick \
         takes {tick:?}); {} events received, {} distinct ({alerts} alerts over {} root \
         sessions), {resent} re-sends by id, {duplicates} distinct duplicates",
        got.len(),
        distinct_ids.len(),
        alerts_cap.len()
    );
    assert_eq!(duplicates, 0, "two distinct events for one transition");
    assert!(kills > TICKS / 5, "only {kills} kills landed inside a tick");
}
