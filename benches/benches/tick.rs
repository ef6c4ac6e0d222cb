//! A full `agentwatch opencode --once` tick, called in-process through the runtime
//! (`agentwatch_runtime::jobs::sessions::run`, what the binary and `agentwatch run` call), over
//! 200 sessions served from 127.0.0.1: the first tick (empty store), an idle tick after it
//! (nothing new: the incremental path), and the same idle tick forced to re-read every history
//! (`--full-read`), so the ratio of the two shows what the stored cursors save. Then idle ticks
//! over 2 000 known sessions (issue 19: they should stay under 100 ms): every session looping
//! (2 000 open alerts carried through their lifecycle each tick: the worst case, not a usual
//! day), every session healthy (its last call landed: no alert), and 20 sessions looping among
//! 1 980 stale ones (a usual day: what the stale sessions cost). Each scale run first prints
//! the process's CPU time per idle tick (the loopback server's threads included). Last, the
//! ticks of `--follow` (and of `run` with `follow.enabled`) over 2 000 active sessions, which
//! know from the event stream what changed: its poll tick when the stream said nothing, and its
//! tick after events named one session.

use agentwatch_benches::{report_cpu, rss_kib};
use agentwatch_runtime::jobs::sessions;
use agentwatch_runtime::jobs::sessions::tracked::Focus;
use agentwatch_testkit::TempDir;
use agentwatch_testkit::opencode::{ExportBuilder, serve_exports};
use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use serde_json::json;
use std::path::Path;

const SESSIONS: usize = 200;
/// The known sessions of the tick at scale.
const MANY_SESSIONS: usize = 2000;
const CALLS: usize = 100;

/// `sessions` sessions of [`CALLS`] calls: test runs failing again and again between reads
/// (every session is flagged as looping).
fn exports(sessions: usize) -> Vec<serde_json::Value> {
    exports_ending(sessions, false)
}

/// [`exports`], each session ending in a landed edit when `landed` (none is flagged).
fn exports_ending(sessions: usize, landed: bool) -> Vec<serde_json::Value> {
    exports_active(sessions, landed, sessions)
}

/// [`exports_ending`] of which only the last `active` sessions are active within
/// `watchdog.stale_after_s` of the tick; the others ran a month earlier.
fn exports_active(sessions: usize, landed: bool, active: usize) -> Vec<serde_json::Value> {
    (0..sessions)
        .map(|s| {
            let mut calls: Vec<(&str, serde_json::Value, serde_json::Value, &str)> = (0..CALLS)
                .map(|i| {
                    if i % 4 == 0 {
                        ("bash", json!({"command": format!("cd /p && cargo test t{}", i % 7)}), json!({"output": "x".repeat(4000), "exit": 101}), "failed")
                    } else {
                        ("read", json!({"filePath": format!("/p/src/f{}.rs", (i * 7 + s) % 50), "offset": 1, "limit": 200}), json!({"preview": "x".repeat(500)}), "content")
                    }
                })
                .collect();
            if landed {
                calls.push((
                    "edit",
                    json!({"filePath": "/p/src/f1.rs", "oldString": "a", "newString": "b"}),
                    json!({"diff": "@@ -1 +1 @@\n-a\n+b\n"}),
                    "Edit applied successfully.",
                ));
            }
            let month = if s + active < sessions { 30 * 86_400_000 } else { 0 };
            ExportBuilder::new(&format!("ses_bench{s:05}AAAAAAAAAAAAAA"), "bench", None, 1_796_000_000_000 + s as i64 * 1000 - month)
                .steps("build", &calls, 1000)
                .build()
        })
        .collect()
}

/// One `agentwatch opencode --once` tick through the runtime, in this process: config, SQLite
/// open, lock, HTTP to the loopback server, judging, alert lifecycle, store writes.
fn tick(home: &Path, config: &Path, full_read: bool) {
    focused_tick(home, config, full_read, None);
}

/// [`tick`] as the follower runs it, knowing from the event stream what changed (`focus`).
fn focused_tick(
    home: &Path,
    config: &Path,
    full_read: bool,
    focus: Option<Focus>,
) -> sessions::TickReport {
    let report = sessions::run(&sessions::Options {
        once: true,
        config: Some(config.to_owned()),
        db: Some(home.join("agentwatch.db")),
        now: Some(1_796_001_000),
        full_read,
        focus,
        ..sessions::Options::default()
    })
    .expect("tick runs");
    report.expect("the watchdog is enabled")
}

/// Memory over many ticks on the same store: it must stay flat (figures, not assertions).
fn report_memory(config: &Path) {
    let home = TempDir::new("aw-bench-mem");
    let mut figures = Vec::new();
    for n in 1..=50 {
        tick(&home.path, config, false);
        if [1, 2, 10, 50].contains(&n) {
            figures.push(format!(
                "tick {n}: {}",
                rss_kib().map_or("n/a".to_owned(), |(rss, peak)| format!(
                    "{rss} KiB (peak {peak} KiB)"
                ))
            ));
        }
    }
    println!(
        "resident memory after ticks (200 sessions, same store, in-process): {}",
        figures.join(", ")
    );
}

/// A config reading one loopback server, written into `dir`.
fn config_for(dir: &Path, url: &str) -> std::path::PathBuf {
    let config = dir.join("config.toml");
    std::fs::write(
        &config,
        format!("[watchdog]\nlocal_llm_enabled = false\n[opencode]\nservers = [\"{url}\"]\n"),
    )
    .unwrap();
    config
}

fn ticks(c: &mut Criterion) {
    let server = serve_exports(exports(SESSIONS));
    let tmp = TempDir::new("aw-bench-tick");
    let config = config_for(&tmp.path, &server.url());
    report_memory(&config);
    let mut g = c.benchmark_group("tick_200_sessions");
    g.sample_size(10);
    g.bench_function("first_tick_empty_store", |b| {
        b.iter_batched(
            || TempDir::new("aw-bench-first"),
            |home| tick(&home.path, &config, false),
            BatchSize::PerIteration,
        )
    });
    let warm = TempDir::new("aw-bench-warm");
    tick(&warm.path, &config, false);
    g.bench_function("idle_tick_incremental", |b| {
        b.iter(|| tick(&warm.path, &config, false))
    });
    g.bench_function("idle_tick_full_reread", |b| {
        b.iter(|| tick(&warm.path, &config, true))
    });
    g.finish();
}

/// Idle ticks over 2 000 known sessions, all looping, all healthy, and 20 looping with the
/// other 1 980 stale (a month old: listed, not read): the first tick (not measured) stores
/// every cursor.
fn ticks_at_scale(c: &mut Criterion) {
    let mut g = c.benchmark_group("tick_2000_sessions");
    g.sample_size(10);
    for (name, landed, active) in [
        ("idle_tick_incremental", false, MANY_SESSIONS),
        ("idle_tick_incremental_healthy", true, MANY_SESSIONS),
        ("idle_tick_20_active_1980_stale", false, 20),
    ] {
        let server = serve_exports(exports_active(MANY_SESSIONS, landed, active));
        let tmp = TempDir::new("aw-bench-scale");
        let config = config_for(&tmp.path, &server.url());
        tick(&tmp.path, &config, false);
        report_cpu(name, &tmp.path, || tick(&tmp.path, &config, false));
        g.bench_function(name, |b| b.iter(|| tick(&tmp.path, &config, false)));
    }
    g.finish();
}

/// The follower's ticks over 2 000 active, looping sessions whose stream stayed open since
/// their last complete read: its poll (every `run.watch_interval_s`, the stream said
/// nothing: listed, nothing read or judged) and its tick after events named one session (that
/// session read after its cursor, its tree judged).
fn followed_ticks_at_scale(c: &mut Criterion) {
    let mut g = c.benchmark_group("tick_2000_sessions_followed");
    g.sample_size(10);
    let server = serve_exports(exports(MANY_SESSIONS));
    let tmp = TempDir::new("aw-bench-follow");
    let config = config_for(&tmp.path, &server.url());
    tick(&tmp.path, &config, false);
    let focus = |changed: &[&str]| Focus {
        servers: [server.url()].into_iter().collect(),
        changed: changed.iter().map(|s| (*s).to_owned()).collect(),
        reset: Default::default(),
    };
    let named = format!("ses_bench{:05}AAAAAAAAAAAAAA", MANY_SESSIONS - 1);
    for (name, changed) in [
        ("poll_tick_nothing_changed", vec![]),
        ("events_tick_one_session_changed", vec![named.as_str()]),
    ] {
        let run = || focused_tick(&tmp.path, &config, false, Some(focus(&changed)));
        println!(
            "{name}: {} alert decisions (a tree judged for the lifecycle: one)",
            run().decisions.len()
        );
        report_cpu(name, &tmp.path, || {
            run();
        });
        g.bench_function(name, |b| b.iter(&run));
    }
    g.finish();
}

criterion_group!(benches, ticks, ticks_at_scale, followed_ticks_at_scale);
criterion_main!(benches);
