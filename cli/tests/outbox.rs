//! Delivery through the outbox, end to end: `agentwatch opencode --once` against session files,
//! a real SQLite store and a loopback webhook receiver that fails when told to.
//!
//! Events are stored in the tick's transaction and sent after; a failed send stays pending and
//! goes out next tick with the same dedup key; only a send that succeeded starts a rate-limit
//! window or earns the alert's resolve.

mod common;

use agentwatch_store::Store;
use agentwatch_testkit::opencode::{ExportBuilder, healthy_calls, looping_calls};
use agentwatch_testkit::{HttpServer, Reply, Request, TempDir};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::Arc;
use std::sync::atomic::{AtomicU16, Ordering};

const T0: i64 = 1_796_000_000;
const ROOT: &str = "ses_outbox00000000001rootAAA";

fn agentwatch(home: &Path, args: &[&str]) -> Output {
    agentwatch_testkit::isolated_command(env!("CARGO_BIN_EXE_agentwatch"), home)
        .args(args)
        .output()
        .unwrap()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A session that rereads one file and reruns one failing test (`looping`), or one that reads
/// fifty different files (not looping), under the same id, its calls ending just before `T0`.
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

/// A webhook receiver answering with the status in `status` (changeable between ticks).
fn receiver() -> (HttpServer, Arc<AtomicU16>) {
    let status = Arc::new(AtomicU16::new(500));
    let answer = Arc::clone(&status);
    let server = HttpServer::start(move |_: &Request| {
        Reply::json(answer.load(Ordering::SeqCst), &json!({"ok": true}))
    });
    (server, status)
}

struct World {
    _tmp: TempDir,
    home: PathBuf,
    db: PathBuf,
    looping: PathBuf,
    fixed: PathBuf,
}

fn world(hook: &HttpServer) -> World {
    let tmp = TempDir::new("aw-outbox");
    let home = common::webhook_home(&tmp.path, hook, "", "");
    let looping = session(&tmp.path, true, "looping.json");
    let fixed = session(&tmp.path, false, "fixed.json");
    World {
        db: tmp.path.join("aw.db"),
        _tmp: tmp,
        home,
        looping,
        fixed,
    }
}

impl World {
    fn tick(&self, at: i64, sessions: &Path) -> Output {
        let out = agentwatch(
            &self.home,
            &[
                "watch",
                "--once",
                "--now",
                &at.to_string(),
                "--db",
                self.db.to_str().unwrap(),
                "--sessions",
                sessions.to_str().unwrap(),
            ],
        );
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        out
    }
}

/// `out`'s journal has `text`.
fn assert_said(out: &Output, text: &str) {
    assert!(stderr(out).contains(text), "{}", stderr(out));
}

fn bodies(server: &HttpServer) -> Vec<Value> {
    server.requests().iter().map(Request::body_json).collect()
}

#[test]
fn a_failed_send_stays_pending_and_goes_out_next_tick_with_the_same_key() {
    let (hook, status) = receiver();
    let world = world(&hook);

    let first = world.tick(T0, &world.looping);
    assert_said(&first, "channel=hook delivery=failed");
    let store = Store::open_read_only(&world.db).unwrap();
    let pending = store.pending_deliveries(10).unwrap();
    assert_eq!(pending.len(), 1, "{pending:?}");
    assert_eq!(pending[0].event.dedup_key, format!("opencode-loop:{ROOT}"));
    assert_eq!(pending[0].attempts, 1);
    drop(store);

    // The receiver is back 60 s later: the trigger goes out again, same key, and is marked.
    status.store(200, Ordering::SeqCst);
    let second = world.tick(T0 + 60, &world.looping);
    assert_said(&second, "delivery=sent retry=2");
    let sent = bodies(&hook);
    assert_eq!(sent.len(), 2, "{sent:?}");
    assert_eq!(sent[0], sent[1], "the retry is the same event");
    assert_eq!(sent[1]["dedup_key"], format!("opencode-loop:{ROOT}"));
    assert_eq!(sent[1]["state"], "trigger");
    let store = Store::open_read_only(&world.db).unwrap();
    assert!(store.pending_deliveries(10).unwrap().is_empty());
    drop(store);

    // Now that it arrived, the fix is announced to it.
    world.tick(T0 + 120, &world.fixed);
    let sent = bodies(&hook);
    assert_eq!(sent.len(), 3, "{sent:?}");
    assert_eq!(sent[2]["state"], "resolve");
    assert_eq!(sent[2]["dedup_key"], format!("opencode-loop:{ROOT}"));
}

#[test]
fn a_channel_that_never_got_the_trigger_gets_no_resolve() {
    let (hook, status) = receiver();
    let world = world(&hook);
    world.tick(T0, &world.looping);
    assert_eq!(bodies(&hook).len(), 1);

    // Fixed before the receiver recovered: the undelivered trigger is dropped, no resolve sent.
    status.store(200, Ordering::SeqCst);
    let out = world.tick(T0 + 60, &world.fixed);
    assert_said(&out, "state=resolve_fixed");
    assert_eq!(bodies(&hook).len(), 1, "{:?}", bodies(&hook));
    let store = Store::open_read_only(&world.db).unwrap();
    assert!(store.pending_deliveries(10).unwrap().is_empty());
}

/// A webhook that takes the trigger but answers after the channel's timeout: the send counts as
/// failed and is retried, but the receiver may hold the alert, so it hears the resolve. Before,
/// a timeout counted as a refusal and the fix was never announced to it.
#[test]
fn a_channel_that_did_not_answer_in_time_gets_the_resolve() {
    let (release, held) = std::sync::mpsc::channel::<()>();
    let held = std::sync::Mutex::new(Some(held));
    let hook = HttpServer::start(move |request: &Request| {
        // The first request waits until the test lets it go: past the 2 s timeout.
        if request.body_json()["state"] == "trigger"
            && let Some(held) = held.lock().unwrap().take()
        {
            let _ = held.recv();
        }
        Reply::json(200, &json!({"ok": true}))
    });
    let world = world(&hook);

    let first = world.tick(T0, &world.looping);
    assert_said(&first, "channel=hook delivery=failed");
    release.send(()).unwrap();

    // Fixed before any retry: the trigger is dropped, the resolve goes to the webhook.
    let out = world.tick(T0 + 60, &world.fixed);
    assert_said(&out, "state=resolve_fixed");
    let sent = bodies(&hook);
    let states: Vec<&str> = sent.iter().map(|b| b["state"].as_str().unwrap()).collect();
    assert_eq!(states, ["trigger", "resolve"], "{sent:?}");
    assert_eq!(sent[1]["dedup_key"], format!("opencode-loop:{ROOT}"));
    let store = Store::open_read_only(&world.db).unwrap();
    assert!(store.pending_deliveries(10).unwrap().is_empty());
    assert!(store.in_doubt().unwrap().is_empty());
}
