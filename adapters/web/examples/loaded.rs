//! A server over a store holding many verdicts, for measuring page load time and memory:
//! `cargo run --release -p agentwatch-web --example loaded -- DB VERDICTS [ADDR]`.
//! Fills `DB` (when it holds no tick) with `VERDICTS` verdicts (10 sessions in 5 trees per tick,
//! one tree looping), then serves it until killed.

use agentwatch_store::{AlertRow, Store, VerdictRow};
use agentwatch_web::{ServeOptions, Server};
use std::path::PathBuf;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let db = PathBuf::from(args.get(1).map_or("loaded.db", String::as_str));
    let verdicts: usize = args.get(2).and_then(|n| n.parse().ok()).unwrap_or(10_000);
    let listen = args.get(3).map_or("127.0.0.1:8080", String::as_str);
    let mut store = Store::open(&db).expect("store");
    if store.last_tick().expect("read").is_none() {
        let t0 = 1_790_000_000;
        let per_tick = 10;
        for tick in 0..verdicts.div_ceil(per_tick) {
            let now = t0 + 300 * tick as i64;
            let rows: Vec<VerdictRow> = (0..per_tick)
                .map(|s| {
                    let flagged = s < 2 && tick > 3;
                    VerdictRow {
                        session_id: format!("ses_{s}"),
                        session_root: format!("ses_{}", s / 2 * 2),
                        flagged,
                        signals: if flagged { vec!["top".into()] } else { vec![] },
                        dup: 0.1 + 0.01 * (tick % 20) as f64,
                        top: 4 + (tick % 12) as i64 + if flagged { 10 } else { 0 },
                        top_what: "read money.py".into(),
                        landed: !flagged,
                        slow: (tick % 9) as i64,
                        coverage: 1.5 + 0.1 * (tick % 30) as f64,
                        coverage_file: Some("/p/money.py".into()),
                        calls_since_landed: (tick % 50) as i64,
                        llm_opinion: None,
                        model_id: Some(["claude-sonnet-4", "gpt-5", "qwen3-coder"][s % 3].into()),
                        provider: Some(["anthropic", "openai", "ollama"][s % 3].into()),
                        cost_since_landed_usd: Some(0.01 * (tick % 50) as f64),
                    }
                })
                .collect();
            store
                .record_tick(now, "flagged", per_tick as i64, 0, &[], &rows)
                .expect("record");
        }
        store
            .upsert_alerts(&[AlertRow {
                dedup_key: "opencode-loop:ses_0".into(),
                session_root: "ses_0".into(),
                state: "open".into(),
                severity: "critical".into(),
                title: "opencode loop: build".into(),
                summary: String::new(),
                flagged_ticks: 3,
                opened_at: t0 + 1200,
                last_fired_at: Some(t0 + 1800),
                resolved_at: None,
                reason: String::new(),
                refusals: None,
            }])
            .expect("alert");
    }
    drop(store);
    let mut options = ServeOptions::new(db);
    options.listen = listen.parse().expect("ADDR");
    let server = Server::bind(options).expect("bind");
    println!("serving on http://{}", server.local_addr());
    if let Err(e) = server.run() {
        eprintln!("{e}");
        std::process::exit(1);
    }
}
