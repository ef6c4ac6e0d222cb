//! The backtest over a generated corpus of 10 000 sessions (normalise + identity + detector on
//! every call, verdicts at every prefix step).

use agentwatch_benches::{calls_in, corpus};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use detect_eval::backtest::{Options, run};
use std::hint::black_box;

fn backtest(c: &mut Criterion) {
    let sessions = corpus(10_000, 5);
    let calls = calls_in(&sessions);
    let options = Options::default();
    let mut g = c.benchmark_group("backtest");
    g.throughput(Throughput::Elements(calls as u64));
    g.sample_size(10);
    g.bench_function("corpus_10000_sessions", |b| {
        b.iter(|| run(black_box(&sessions), &options))
    });
    g.finish();
}

criterion_group!(benches, backtest);
criterion_main!(benches);
