//! The floor under `agentwatch detect` (issue 51): a bare SIMD JSON parse of the same bytes,
//! `simd-json` building its tape of the whole file, nothing judged. What `detect` adds above it
//! is its own reading and judging. The file is `AGENTWATCH_FLOOR_FILE`, else `/tmp/big.json`
//! (`cargo xtask gen-big --out /tmp/big.json`); without it the bench says so and measures
//! nothing.

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use std::hint::black_box;

fn floor(c: &mut Criterion) {
    let path = std::env::var("AGENTWATCH_FLOOR_FILE").unwrap_or_else(|_| "/tmp/big.json".into());
    let bytes = match std::fs::read(&path) {
        Ok(bytes) => bytes,
        Err(e) => {
            eprintln!(
                "floor: no file to parse at {path} ({e}); run `cargo xtask gen-big --out {path}`"
            );
            return;
        }
    };
    let mut g = c.benchmark_group("floor");
    g.sample_size(10);
    g.throughput(Throughput::Bytes(bytes.len() as u64));
    // The file read from the page cache, as `detect` reads it.
    g.bench_function("read", |b| {
        b.iter(|| std::fs::read(black_box(&path)).map(|b| b.len()))
    });
    // simd-json parses in place: each run gets a fresh copy, not timed.
    g.bench_function("simd_json_tape", |b| {
        b.iter_batched(
            || bytes.clone(),
            |mut copy| simd_json::to_tape(&mut copy).map(black_box).is_ok(),
            BatchSize::LargeInput,
        )
    });
    g.finish();
}

criterion_group!(benches, floor);
criterion_main!(benches);
