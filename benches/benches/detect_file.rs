//! Judging a session file the way `agentwatch detect` does (issue 19): the file of `cargo xtask
//! gen-big`'s shape at 1/20 of its size (100 sessions of 500 calls, about 10 MB), read one
//! session at a time into the detectors on every core, against the earlier path (the whole file
//! parsed into a JSON tree, converted into sessions, then `judge_sessions`).

use agentwatch_fixtures_gen::big::{BigShape, write_big};
use agentwatch_runtime::input::judge_text;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use detect_core::{DetectConfig, SessionFile, judge_sessions};
use std::hint::black_box;

fn detect_file(c: &mut Criterion) {
    let shape = BigShape {
        sessions: 100,
        ..BigShape::default()
    };
    let mut bytes = Vec::new();
    let stats = write_big(&mut bytes, &shape).expect("writing to memory");
    let text = String::from_utf8(bytes).expect("the generator writes UTF-8");
    let config = DetectConfig::default();
    let mut g = c.benchmark_group("detect_file_100x500");
    g.throughput(Throughput::Elements(stats.calls as u64));
    g.sample_size(10);
    g.bench_function("streamed_parallel", |b| {
        b.iter(|| judge_text("bench", black_box(&text), &config).unwrap())
    });
    g.bench_function("whole_file_then_judge", |b| {
        b.iter(|| {
            let file = SessionFile::from_json(black_box(&text)).unwrap();
            judge_sessions(&file.sessions, &config)
        })
    });
    g.finish();
}

criterion_group!(benches, detect_file);
criterion_main!(benches);
