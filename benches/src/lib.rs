//! # agentwatch-benches: generated workloads for the criterion benchmarks
//!
//! Deterministic session generators (no randomness crate: a small xorshift) shaped like opencode
//! work: reads with offsets, bash test runs, greps, edits that land, and loops.
#![forbid(unsafe_code)]

use detect_core::{Call, Session};
use serde_json::json;

/// A tiny deterministic generator (xorshift64*).
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed.max(1))
    }
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }
}

/// One call of a realistic mix.
pub fn realistic_call(rng: &mut Rng, i: usize) -> Call {
    let t = 1_796_000_000_000 + i as i64 * 2000;
    let file = rng.below(40);
    let call = match rng.below(10) {
        0..=3 => Call::completed(
            "read",
            json!({"filePath": format!("/home/u/proj/src/mod{file}/file{file}.rs"), "offset": 1 + rng.below(5) * 100, "limit": 200}),
        ),
        4..=5 => Call::completed(
            "bash",
            json!({"command": format!("cd /home/u/proj && RUST_LOG=info cargo test -p crate{} -- --nocapture # run", rng.below(8)), "description": "Run tests"}),
        )
        .with_metadata(json!({"exit": 101, "truncated": false})),
        6 => Call::completed("grep", json!({"pattern": format!("fn handler_{}", rng.below(30)), "path": "/home/u/proj", "include": "*.rs"})),
        7 => Call::completed("glob", json!({"pattern": "**/*.rs", "path": "/home/u/proj"})),
        8 => Call::completed(
            "edit",
            json!({"filePath": format!("/home/u/proj/src/mod{file}/file{file}.rs"), "oldString": "a", "newString": "b"}),
        )
        .with_metadata(json!({"diff": if rng.below(3) == 0 { "@@ -1 +1 @@\n-a\n+b\n" } else { "" }})),
        _ => Call::completed("bash", json!({"command": "git status --short"})).with_metadata(json!({"exit": 0})),
    };
    call.with_time(t, t + 500)
}

/// A session of `n` calls of the realistic mix.
pub fn session(id: &str, n: usize, seed: u64) -> Session {
    let mut rng = Rng::new(seed);
    let mut s = Session::new(id);
    s.directory = Some("/home/u/proj".to_owned());
    for i in 0..40 {
        s.line_counts.insert(
            format!("/home/u/proj/src/mod{i}/file{i}.rs"),
            300 + i as u64 * 10,
        );
    }
    s.calls = (0..n).map(|i| realistic_call(&mut rng, i)).collect();
    s
}

/// A corpus of `n` sessions of 40 to 200 calls.
pub fn corpus(n: usize, seed: u64) -> Vec<Session> {
    let mut rng = Rng::new(seed);
    (0..n)
        .map(|i| {
            let len = 40 + rng.below(160) as usize;
            session(&format!("ses_{i:06}"), len, rng.next_u64())
        })
        .collect()
}

/// Total calls of a corpus.
pub fn calls_in(sessions: &[Session]) -> usize {
    sessions.iter().map(|s| s.calls.len()).sum()
}

/// A `/session/:id/message` answer of `n` assistant steps, each with one tool part whose output
/// (and bash `metadata.output`) is `output_bytes` long: the shape opencode 1.18.33 serves.
pub fn message_list_json(n: usize, output_bytes: usize) -> String {
    let mut rng = Rng::new(42);
    let output: String =
        "x".repeat(output_bytes.saturating_sub(40)) + "\n(End of file - total 400 lines)";
    let messages: Vec<serde_json::Value> = (0..n)
        .map(|i| {
            let t = 1_796_000_000_000i64 + i as i64 * 1000;
            let call = realistic_call(&mut rng, i);
            json!({
                "info": {"id": format!("msg_{:012x}AAAAAAAAAAAAAA", t as u64 * 4096), "sessionID": "ses_bench",
                         "role": "assistant", "parentID": "msg_user", "modelID": "m", "providerID": "p",
                         "mode": "build", "agent": "build", "path": {"cwd": "/home/u/proj", "root": "/home/u/proj"},
                         "cost": 0.01, "tokens": {"input": 1000, "output": 200, "reasoning": 0, "cache": {"read": 0, "write": 0}},
                         "time": {"created": t, "completed": t + 900}, "finish": "tool-calls"},
                "parts": [
                    {"id": format!("prt_{i:012x}A"), "sessionID": "ses_bench", "messageID": "m", "type": "step-start"},
                    {"id": format!("prt_{i:012x}B"), "sessionID": "ses_bench", "messageID": "m", "type": "tool",
                     "callID": format!("toolu_{i}"), "tool": call.tool,
                     "state": {"status": "completed", "input": call.input, "output": output, "title": "t",
                               "metadata": {"output": output, "exit": 0, "truncated": false, "preview": output},
                               "time": {"start": t + 10, "end": t + 800}}},
                    {"id": format!("prt_{i:012x}C"), "sessionID": "ses_bench", "messageID": "m", "type": "step-finish",
                     "reason": "tool-calls", "cost": 0.01, "tokens": {"input": 1000, "output": 200, "reasoning": 0, "cache": {"read": 0, "write": 0}}}
                ]
            })
        })
        .collect();
    serde_json::Value::Array(messages).to_string()
}

/// This process's resident memory now and its peak (KiB), from `/proc/self/status`.
#[must_use]
pub fn rss_kib() -> Option<(u64, u64)> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
    };
    Some((field("VmRSS:")?, field("VmHWM:")?))
}

/// This process's CPU time so far (user + system, seconds; every thread), from
/// `/proc/self/stat` (USER_HZ is 100 on Linux, so 10 ms steps).
#[must_use]
pub fn cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // utime and stime are the 12th and 13th fields after the command name.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks = fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
    Some(ticks / 100.0)
}

/// The process's CPU time per call of `idle`, over 10 calls, and how much the store in `home`
/// (the database and its write-ahead log) grew meanwhile (figures, not assertions).
pub fn report_cpu(name: &str, home: &std::path::Path, idle: impl Fn()) {
    const CALLS: u32 = 10;
    let store_bytes = || {
        ["agentwatch.db", "agentwatch.db-wal"]
            .iter()
            .filter_map(|f| std::fs::metadata(home.join(f)).ok())
            .map(|m| m.len())
            .sum::<u64>()
    };
    let (before, bytes_before) = (cpu_seconds(), store_bytes());
    for _ in 0..CALLS {
        idle();
    }
    let grew_kib = store_bytes().saturating_sub(bytes_before) / 1024;
    match (before, cpu_seconds()) {
        (Some(before), Some(after)) => println!(
            "{name}: {:.0} ms of CPU per tick (mean of {CALLS}, a loopback server's threads included); \
             the store grew by {grew_kib} KiB over the {CALLS} ticks",
            (after - before) * 1000.0 / f64::from(CALLS)
        ),
        _ => println!("{name}: CPU time n/a; the store grew by {grew_kib} KiB over {CALLS} ticks"),
    }
}

/// A clock 10 s further on at each look, from the unix time it is made with: the follower's
/// pace (`follow.min_interval_s`) never holds a tick back, and a poll set a day apart never
/// comes, so the follow benches measure the follower's work, not its pauses.
#[derive(Debug)]
pub struct Jumping(std::sync::atomic::AtomicI64);

impl Jumping {
    pub fn from(unix: i64) -> Self {
        Self(std::sync::atomic::AtomicI64::new(unix))
    }
}

impl agentwatch_runtime::run::Clock for Jumping {
    fn now(&self) -> i64 {
        self.0.fetch_add(10, std::sync::atomic::Ordering::SeqCst)
    }
    fn wait_until(&mut self, _at: i64) -> agentwatch_runtime::run::Wake {
        agentwatch_runtime::run::Wake::Due
    }
}
