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
