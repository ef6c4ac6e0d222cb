//! The follower (`agentwatch opencode --follow`, and `agentwatch run` with `follow.enabled`),
//! called in-process through the runtime against a loopback server that speaks opencode
//! 1.18.33's listing and message routes and a live `/global/event`:
//!
//! * `completed_event_to_delivered_alert`: a new looping session is served, its last call's
//!   `message.part.updated` (completed) frame is written to the stream, and the time until a
//!   loopback webhook receives the alert is measured: the stream read, the focused tick (listing,
//!   the session's messages, judging, the alert lifecycle, the store) and the delivery.
//! * `10000_events`: 10,000 settled tool-call frames written at once, until the tick after the
//!   last one is done; the process's CPU time and resident memory around one such run are printed
//!   as figures.
//!
//! The follower's pace (`follow.min_interval_s`) runs on a clock that jumps ahead at each look,
//! so the figures are the work, not the pause between two judgements.

use agentwatch_benches::{Jumping, cpu_seconds, rss_kib};
use agentwatch_runtime::jobs::sessions::{self, follow};
use agentwatch_testkit::opencode::{ExportBuilder, serve_live};
use agentwatch_testkit::{HttpServer, Reply, Request, TempDir};
use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, Criterion, criterion_group, criterion_main};
use serde_json::{Value, json};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long the bench waits for something the follower should do before it gives up.
const PATIENCE: Duration = Duration::from_secs(60);
const EVENTS: usize = 10_000;

/// The ticks the follower reports: (reason, events taken so far).
type Ticks = Receiver<(&'static str, u64)>;
/// The follower's thread.
type Running = JoinHandle<Result<follow::FollowReport, agentwatch_runtime::Error>>;

/// A session whose `calls` identical failing commands make a loop, served as opencode does.
fn looping_session(id: &str, calls: usize) -> Value {
    let call = (
        "bash",
        json!({"command": "ls /nonexistent-agentwatch-dir", "description": "list"}),
        json!({"output": "ls: cannot access '/nonexistent-agentwatch-dir'", "exit": 2}),
        "ls: cannot access '/nonexistent-agentwatch-dir'",
    );
    let calls = vec![call; calls];
    let start_ms = 1_796_000_000_000;
    ExportBuilder::new(id, "bench", None, start_ms)
        .steps("build", &calls, 1000)
        .build()
}

/// The stream frame of a session's last tool part reaching `completed`.
fn completed_frame(export: &Value) -> Vec<u8> {
    let last = export["messages"].as_array().and_then(|m| m.last());
    let part = last.map_or(Value::Null, |m| m["parts"][0].clone());
    let event = json!({"directory": "/tmp/proj", "project": "global", "payload": {
        "id": "evt_bench", "type": "message.part.updated",
        "properties": {"sessionID": export["info"]["id"], "part": part, "time": 1}}});
    format!("data: {event}\n\n").into_bytes()
}

/// `n` settled bash calls of `session`, as one write.
fn many_frames(session: &str, n: usize) -> Vec<u8> {
    let mut out = Vec::new();
    for i in 0..n {
        let event = json!({"directory": "/p", "project": "global", "payload": {
            "id": format!("evt_{i}"), "type": "message.part.updated", "properties": {
                "sessionID": session, "time": 3, "part": {
                    "type": "tool", "id": format!("prt_{i}"), "messageID": format!("msg_{i}"),
                    "sessionID": session, "tool": "bash", "callID": format!("c{i}"),
                    "state": {"status": "completed", "time": {"start": 1, "end": 2},
                              "input": {"command": format!("ls /x{}", i % 7)}, "title": "",
                              "metadata": {"output": "x".repeat(200)}, "output": "x".repeat(200)}}}}});
        out.extend_from_slice(format!("data: {event}\n\n").as_bytes());
    }
    out
}

/// This process's CPU time (user + system, seconds) and resident memory now and at its peak
/// (KiB), from `/proc/self`.
fn usage() -> Option<(f64, u64, u64)> {
    let (rss, peak) = rss_kib()?;
    Some((cpu_seconds()?, rss, peak))
}

/// Waits for the follower's tick (reason, events taken so far) that `done` accepts; its events.
fn wait_tick(ticks: &Ticks, done: impl Fn(&str, u64) -> bool) -> u64 {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let (reason, events) = ticks.recv_timeout(left).expect("the follower ticks");
        if done(reason, events) {
            return events;
        }
    }
}

/// Waits until the follower has asked `server` for its event stream.
fn wait_for_stream(server: &HttpServer) {
    let deadline = Instant::now() + PATIENCE;
    while !server
        .requests()
        .iter()
        .any(|r| r.path() == "/global/event")
    {
        assert!(Instant::now() < deadline, "the follower opens the stream");
        // A connection the follower makes on its own thread: nothing to wait on but the log.
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Writes `blob` (`EVENTS` frames) to the stream and waits for the tick after its last event;
/// `taken`: the events taken before.
fn take_events(frames: &Sender<Vec<u8>>, ticks: &Ticks, blob: &[u8], taken: u64) -> u64 {
    while ticks.try_recv().is_ok() {}
    frames.send(blob.to_vec()).unwrap();
    let target = taken + EVENTS as u64;
    wait_tick(ticks, |_, events| events >= target)
}

fn follower(c: &mut Criterion) {
    let cost_session = "ses_benchcost0000000000000001";
    let exports = Arc::new(Mutex::new(vec![looping_session(cost_session, 3)]));
    let (frames, frames_rx) = channel::<Vec<u8>>();
    let server = serve_live(Arc::clone(&exports), Some(Arc::new(Mutex::new(frames_rx))));
    let (webhook, alerts) = alert_hook();
    let tmp = TempDir::new("aw-bench-follow");
    let stop = Arc::new(AtomicBool::new(false));
    let (running, ticks) = start_follower(&tmp, &server, &webhook, &stop);
    // The first tick, and the stream open (a stream that opens before the first tick has no
    // `resync` tick after it: that tick reads everything).
    wait_tick(&ticks, |reason, _| reason == "start");
    wait_for_stream(&server);

    let mut g = c.benchmark_group("follow");
    g.sample_size(20);
    bench_latency(&mut g, &exports, &frames, &alerts);
    let blob = many_frames(cost_session, EVENTS);
    let mut taken = print_cost(&frames, &ticks, &blob, cost_session);
    g.sample_size(10);
    g.bench_function("10000_events", |b| {
        b.iter_custom(|iters| {
            let started = Instant::now();
            for _ in 0..iters {
                taken = take_events(&frames, &ticks, &blob, taken);
            }
            started.elapsed()
        })
    });
    g.finish();
    stop.store(true, Ordering::SeqCst);
    drop(frames);
    running.join().unwrap().expect("the follower ran");
}

/// A loopback webhook that passes on each alert's dedup key with the time it arrived.
fn alert_hook() -> (HttpServer, Receiver<(Instant, String)>) {
    let (hook_tx, alerts) = channel::<(Instant, String)>();
    let hook_tx = Mutex::new(hook_tx);
    let webhook = HttpServer::start(move |r: &Request| {
        let key = r.body_json()["dedup_key"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        if let Ok(tx) = hook_tx.lock() {
            let _ = tx.send((Instant::now(), key));
        }
        Reply::json(200, &json!({"ok": true}))
    });
    (webhook, alerts)
}

/// The follower on its own thread, watching `server` and alerting `webhook`, with a config and
/// a store in `tmp`, until `stop`.
fn start_follower(
    tmp: &TempDir,
    server: &HttpServer,
    webhook: &HttpServer,
    stop: &Arc<AtomicBool>,
) -> (Running, Ticks) {
    let config = tmp.path.join("config.toml");
    std::fs::write(
        &config,
        format!(
            "[watchdog]\nlocal_llm_enabled = false\nstale_after_s = 0\n\
             [opencode]\nservers = [\"{}\"]\n[run]\nwatch_interval_s = 86400\n\
             [[channels]]\nname = \"hook\"\ntype = \"webhook\"\nurl = \"{}/events\"\nrate_limit_s = 0\n",
            server.url(),
            webhook.url()
        ),
    )
    .unwrap();
    let options = sessions::Options {
        config: Some(config),
        db: Some(tmp.path.join("agentwatch.db")),
        // `opencode --follow`: the streams, whatever the config says.
        follow: true,
        ..sessions::Options::default()
    };
    let (tick_tx, ticks) = channel();
    let stop = Arc::clone(stop);
    let running = std::thread::spawn(move || {
        let clock = Jumping::from(1_796_000_000);
        follow::follow(&options, &clock, &stop, |t| {
            let _ = tick_tx.send((t.reason, t.events));
        })
    });
    (running, ticks)
}

/// `completed_event_to_delivered_alert`: each iteration serves a new looping session, writes its
/// last call's completed frame and waits for its alert at the webhook.
fn bench_latency(
    g: &mut BenchmarkGroup<'_, WallTime>,
    exports: &Mutex<Vec<Value>>,
    frames: &Sender<Vec<u8>>,
    alerts: &Receiver<(Instant, String)>,
) {
    let mut n = 0;
    g.bench_function("completed_event_to_delivered_alert", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                n += 1;
                let id = format!("ses_benchlat{n:017}");
                let export = looping_session(&id, 40);
                let frame = completed_frame(&export);
                exports.lock().unwrap().push(export);
                let key = format!("opencode-loop:{id}");
                let sent = Instant::now();
                frames.send(frame).unwrap();
                let deadline = sent + PATIENCE;
                loop {
                    let left = deadline.saturating_duration_since(Instant::now());
                    let (at, got) = alerts.recv_timeout(left).expect("the alert is delivered");
                    if got == key {
                        total += at - sent;
                        break;
                    }
                }
            }
            total
        })
    });
}

/// One run of `blob` (`EVENTS` frames) measured for the process's CPU time and memory, printed;
/// the events taken after it.
fn print_cost(frames: &Sender<Vec<u8>>, ticks: &Ticks, blob: &[u8], cost_session: &str) -> u64 {
    // The events taken so far (the latency bench's): one more frame, and its tick says.
    while ticks.try_recv().is_ok() {}
    frames
        .send(completed_frame(&looping_session(cost_session, 3)))
        .unwrap();
    let taken = wait_tick(ticks, |_, _| true);
    let before = usage();
    let started = Instant::now();
    let taken = take_events(frames, ticks, blob, taken);
    let took = started.elapsed();
    if let (Some((cpu0, _, _)), Some((cpu1, rss, peak))) = (before, usage()) {
        println!(
            "follower, {EVENTS} settled tool-call events: {took:?} wall, {:.3} s CPU of the \
             process (follower, server and bench), resident {rss} KiB (peak {peak} KiB)",
            cpu1 - cpu0
        );
    }
    taken
}

criterion_group!(benches, follower);
criterion_main!(benches);
