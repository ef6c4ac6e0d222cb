//! Parsing an opencode `/session/:id/message` answer of 2 000 messages with large tool outputs:
//! the lean parser the watch loop uses, against parsing the whole JSON and converting it.

use agentwatch_benches::message_list_json;
use agentwatch_opencode::lite::parse_messages;
use agentwatch_opencode::session_from_messages;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use serde_json::{Value, json};
use std::hint::black_box;

fn parse(c: &mut Criterion) {
    let text = message_list_json(2_000, 16 * 1024);
    let info = json!({"id": "ses_bench", "title": "bench", "directory": "/home/u/proj"});
    let mut g = c.benchmark_group("parse_messages_2000");
    g.throughput(Throughput::Bytes(text.len() as u64));
    g.sample_size(10);
    g.bench_function("lean", |b| {
        b.iter(|| {
            let messages = parse_messages(black_box(&text)).unwrap();
            messages.iter().flat_map(|m| m.calls()).count()
        })
    });
    g.bench_function("full_value_then_convert", |b| {
        b.iter(|| {
            let value: Value = serde_json::from_str(black_box(&text)).unwrap();
            let list = value.as_array().unwrap();
            session_from_messages(&info, list).unwrap().calls.len()
        })
    });
    g.finish();
}

criterion_group!(benches, parse);
criterion_main!(benches);
