//! The matcher and the detector.

use agentwatch_benches::{corpus, session};
use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use detect_core::{
    DetectConfig, Profile, SessionDetector, call_identity, judge_session, judge_sessions,
    normalize_bash,
};
use serde_json::json;
use std::hint::black_box;

fn normalise(c: &mut Criterion) {
    let short = "cd /home/u/proj && pytest -x";
    let long = format!(
        "cd /home/u/proj && RUST_LOG=debug FOO='a b' cargo test -p crate -- {} # comment",
        "--arg ".repeat(40)
    );
    let many = (0..50)
        .map(|i| format!("echo line {i} # note {i}"))
        .collect::<Vec<_>>()
        .join("\n");
    let mut g = c.benchmark_group("normalize_bash");
    for (name, cmd) in [
        ("short", short.to_owned()),
        ("long", long),
        ("many_lines", many),
    ] {
        g.throughput(Throughput::Bytes(cmd.len() as u64));
        g.bench_function(name, |b| b.iter(|| normalize_bash(black_box(&cmd))));
    }
    g.finish();
}

fn identity(c: &mut Criterion) {
    let read = json!({"filePath": "/home/u/proj/src/lib.rs", "offset": 101, "limit": 200});
    let bash = json!({"command": "cd /home/u/proj && cargo test -p x", "description": "Run", "timeout": 120000});
    let mut g = c.benchmark_group("call_identity");
    g.bench_function("read", |b| {
        b.iter(|| call_identity("read", black_box(&read)))
    });
    g.bench_function("bash", |b| {
        b.iter(|| call_identity("bash", black_box(&bash)))
    });
    g.finish();
}

fn detector(c: &mut Criterion) {
    let config = DetectConfig::default();
    let mut g = c.benchmark_group("judge_session");
    for n in [100usize, 1_000, 10_000] {
        let s = session("ses_bench", n, 7);
        g.throughput(Throughput::Elements(n as u64));
        g.bench_function(format!("{n}_calls"), |b| {
            b.iter(|| judge_session(black_box(&s), None, &config))
        });
    }
    g.finish();

    let s = session("ses_bench", 10_000, 11);
    let mut g = c.benchmark_group("incremental");
    g.throughput(Throughput::Elements(s.calls.len() as u64));
    // Per profile: the default and the design, whose figure the default's is measured against.
    for profile in Profile::ALL {
        let config = DetectConfig::with_profile(profile);
        g.bench_function(format!("push_10000_calls/{profile}"), |b| {
            b.iter_batched(
                || SessionDetector::new(&s, &config),
                |mut d| {
                    for call in &s.calls {
                        d.push(call);
                    }
                    d
                },
                BatchSize::LargeInput,
            )
        });
    }
    g.finish();
    let mut g = c.benchmark_group("incremental_with_verdicts");
    g.throughput(Throughput::Elements(1000));
    g.bench_function("push_then_verdict_per_call_1000", |b| {
        b.iter_batched(
            || SessionDetector::new(&s, &config),
            |mut d| {
                for call in &s.calls[..1000] {
                    d.push(call);
                    black_box(d.verdict());
                }
                d
            },
            BatchSize::LargeInput,
        )
    });
    g.finish();

    let sessions = corpus(1_000, 3);
    let calls = agentwatch_benches::calls_in(&sessions);
    let mut g = c.benchmark_group("judge_sessions");
    g.throughput(Throughput::Elements(calls as u64));
    g.bench_function("corpus_1000_sessions", |b| {
        b.iter(|| judge_sessions(black_box(&sessions), &config))
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20).measurement_time(std::time::Duration::from_secs(2)).warm_up_time(std::time::Duration::from_millis(500));
    targets = normalise, identity, detector
}
criterion_main!(benches);
