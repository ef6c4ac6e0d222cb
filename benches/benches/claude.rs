//! The Claude Code source (issue 34), called in-process through the runtime on transcripts
//! written as Claude Code 2.1 writes them (`agentwatch_fixtures_gen::claude`, `gen-big`'s
//! sessions):
//!
//! * `idle_tick_2000_transcripts`: a tick of the sessions job over 2 000 known transcript files
//!   (500 calls each, all active) that did not change since the last tick: a directory listing
//!   and a `stat` per file, every verdict kept from the store.
//! * `first_read`: the first tick over a generated directory (every file read from its start,
//!   every call judged, every row stored); its MB/s and the process's peak memory are printed.
//!   The 1 GB figure of the README is the same read as a whole process (`agentwatch opencode
//!   --once` over `cargo xtask gen-claude`'s directory), measured with `/usr/bin/time`.
//! * `line_written_to_alert`: the follower (what `agentwatch run` runs) watching the directory:
//!   a looping session's transcript is written, and the time until a loopback webhook receives
//!   its alert is measured (the directory watch's wake, the read, judging, the lifecycle, the
//!   store and the delivery).

use agentwatch_benches::{Jumping, cpu_seconds, report_cpu, rss_kib};
use agentwatch_fixtures_gen::big::BigShape;
use agentwatch_fixtures_gen::claude::{claude_transcript, session_ending_at, write_claude_dir};
use agentwatch_runtime::jobs::sessions::{self, follow};
use agentwatch_testkit::{HttpServer, Reply, Request, TempDir};
use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Sender, channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// How long the bench waits for an alert before it gives up.
const PATIENCE: Duration = Duration::from_secs(60);

fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// A config reading only the Claude directory `claude` (no opencode server answers on the
/// default port here; the opencode.db path does not exist), with `channels` appended.
fn config_for(dir: &Path, claude: &Path, channels: &str) -> PathBuf {
    let config = dir.join("config.toml");
    std::fs::write(
        &config,
        format!(
            "[watchdog]\nlocal_llm_enabled = false\n[opencode]\ndb = {:?}\n[claude]\ndir = {:?}\n{channels}",
            dir.join("no-opencode.db"),
            claude
        ),
    )
    .unwrap();
    config
}

/// One `agentwatch opencode --once` tick through the runtime, in this process.
fn tick(home: &Path, config: &Path) -> sessions::TickReport {
    sessions::run(&sessions::Options {
        once: true,
        config: Some(config.to_owned()),
        db: Some(home.join("agentwatch.db")),
        now: Some(unix_now()),
        ..sessions::Options::default()
    })
    .expect("tick runs")
    .expect("the watchdog is enabled")
}

fn shape(sessions: usize, calls: usize) -> BigShape {
    BigShape {
        sessions,
        calls_per_session: calls,
        ..BigShape::default()
    }
}

/// The first read of a 2 000-transcript directory (printed: MB/s, peak memory), then idle
/// ticks over it.
fn idle_and_first(c: &mut Criterion) {
    let tmp = TempDir::new("aw-bench-claude");
    let claude = tmp.path.join("claude");
    let stats = write_claude_dir(&claude, &shape(2000, 500), Some(unix_now() * 1000)).unwrap();
    let config = config_for(&tmp.path, &claude, "");
    let (cpu0, started) = (cpu_seconds(), Instant::now());
    let report = tick(&tmp.path, &config);
    let took = started.elapsed();
    println!(
        "first read: {} transcripts, {} calls, {:.1} MB in {took:?} ({:.1} MB/s), {:.2} s CPU, \
         {} sessions judged; memory {}",
        stats.files,
        stats.calls,
        stats.bytes as f64 / 1e6,
        stats.bytes as f64 / 1e6 / took.as_secs_f64(),
        cpu_seconds().zip(cpu0).map_or(0.0, |(b, a)| b - a),
        report.judgement.sessions.len(),
        rss_kib().map_or("n/a".to_owned(), |(rss, peak)| format!(
            "{rss} KiB resident (peak {peak} KiB)"
        )),
    );
    report_cpu("idle_tick_2000_transcripts", &tmp.path, || {
        tick(&tmp.path, &config);
    });
    let mut g = c.benchmark_group("claude");
    g.sample_size(10);
    g.bench_function("idle_tick_2000_transcripts", |b| {
        b.iter(|| tick(&tmp.path, &config))
    });
    let small = TempDir::new("aw-bench-claude-small");
    let small_dir = small.path.join("claude");
    let small_stats =
        write_claude_dir(&small_dir, &shape(200, 500), Some(unix_now() * 1000)).unwrap();
    let small_config = config_for(&small.path, &small_dir, "");
    println!(
        "first_read: {} transcripts, {:.1} MB per iteration",
        small_stats.files,
        small_stats.bytes as f64 / 1e6
    );
    g.bench_function("first_read_200_transcripts", |b| {
        b.iter_batched(
            || TempDir::new("aw-bench-claude-store"),
            |home| tick(&home.path, &small_config),
            BatchSize::PerIteration,
        )
    });
    g.finish();
}

/// A webhook that sends each alert's key and arrival time to `tx`.
fn webhook(tx: Sender<(Instant, String)>) -> HttpServer {
    let tx = Mutex::new(tx);
    HttpServer::start(move |r: &Request| {
        let key = r.body_json()["dedup_key"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        if let Ok(tx) = tx.lock() {
            let _ = tx.send((Instant::now(), key));
        }
        Reply::json(200, &json!({"ok": true}))
    })
}

/// A looping session's whole transcript (gen-big's session 3: its last 60 calls a loop).
fn looping_transcript(id: &str) -> Vec<u8> {
    let mut session = session_ending_at(&shape(8, 120), 3, Some(unix_now() * 1000));
    session.id = id.to_owned();
    let mut bytes = Vec::new();
    claude_transcript(&session, &mut bytes).unwrap();
    bytes
}

fn line_to_alert(c: &mut Criterion) {
    let tmp = TempDir::new("aw-bench-claude-live");
    let claude = tmp.path.join("claude");
    let project = claude.join("projects/-home-u-proj3");
    std::fs::create_dir_all(&project).unwrap();
    let (hook_tx, alerts) = channel();
    let hook = webhook(hook_tx);
    let channels = format!(
        "[run]\nwatch_interval_s = 86400\n[[channels]]\nname = \"hook\"\ntype = \"webhook\"\n\
         url = \"{}/events\"\nrate_limit_s = 0\n",
        hook.url()
    );
    let options = sessions::Options {
        config: Some(config_for(&tmp.path, &claude, &channels)),
        db: Some(tmp.path.join("agentwatch.db")),
        ..sessions::Options::default()
    };
    let stop = Arc::new(AtomicBool::new(false));
    let (tick_tx, ticks) = channel::<&'static str>();
    let running = {
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || {
            let clock = Jumping::from(unix_now());
            follow::follow(&options, &clock, &stop, |t| {
                let _ = tick_tx.send(t.reason);
            })
        })
    };
    ticks.recv_timeout(PATIENCE).expect("the follower ticks");
    let mut g = c.benchmark_group("claude_live");
    g.sample_size(20);
    let mut n = 0;
    g.bench_function("line_written_to_alert", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                n += 1;
                let id = format!("00000000-0000-4000-9000-{n:012}");
                let bytes = looping_transcript(&id);
                let written = Instant::now();
                std::fs::write(project.join(format!("{id}.jsonl")), &bytes).unwrap();
                let key = format!("claude-loop:{id}");
                loop {
                    let left = (written + PATIENCE).saturating_duration_since(Instant::now());
                    let (at, got) = alerts.recv_timeout(left).expect("the alert is delivered");
                    if got == key {
                        total += at - written;
                        break;
                    }
                }
            }
            total
        })
    });
    g.finish();
    stop.store(true, Ordering::SeqCst);
    running.join().unwrap().expect("the follower ran");
}

criterion_group!(benches, idle_and_first, line_to_alert);
criterion_main!(benches);
