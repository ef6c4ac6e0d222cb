//! `agentwatch hook claude` as the agent runs it (issue 47): a whole process per tool call,
//! its event on standard input, on a Claude Code session of 200 and of 2 000 calls that grows
//! by one call before each hook call (the transcript as Claude Code 2.1 writes it,
//! `agentwatch_fixtures_gen::claude`), against `/bin/true` fed the same event: the floor of
//! starting a process at all.
//!
//! The binary is the release build: `cargo build --release -p agentwatch` first (or set
//! `AGENTWATCH_BIN`). `cargo bench -p agentwatch-benches --bench hook`. After criterion's
//! figures it prints the median and p99 of 1 000 single calls per session length.

use agentwatch_benches::session;
use agentwatch_fixtures_gen::claude::claude_transcript;
use agentwatch_testkit::TempDir;
use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::json;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Calls appended during a bench at most before the session starts over.
const POOL: usize = 4000;

fn binary() -> PathBuf {
    std::env::var_os("AGENTWATCH_BIN").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/release/agentwatch"),
        PathBuf::from,
    )
}

/// A session whose transcript grows one call at a time, and the hook's place beside it.
struct Growing {
    _tmp: TempDir,
    transcript: PathBuf,
    db: PathBuf,
    config: PathBuf,
    /// The transcript's first line and its first `base` calls.
    head: Vec<u8>,
    /// The lines of each later call.
    calls: Vec<Vec<u8>>,
    next: usize,
    event: Vec<u8>,
}

impl Growing {
    fn new(base: usize) -> Self {
        let tmp = TempDir::new(&format!("aw-bench-hook-{base}"));
        let mut whole = Vec::new();
        let mut s = session("00000000-0000-4000-8000-000000000001", base + POOL, 7);
        s.title = Some("Fix the parser".into());
        claude_transcript(&s, &mut whole).unwrap();
        let lines: Vec<&[u8]> = whole.split_inclusive(|b| *b == b'\n').collect();
        let head: Vec<u8> = lines[..1 + 2 * base].concat();
        let calls = lines[1 + 2 * base..]
            .chunks(2)
            .map(<[&[u8]]>::concat)
            .collect();
        let transcript = tmp.path.join("session.jsonl");
        let config = tmp.path.join("config.toml");
        std::fs::write(&config, "").unwrap();
        let event = json!({"session_id": s.id, "transcript_path": transcript, "cwd": "/home/u/proj",
            "hook_event_name": "PreToolUse", "tool_name": "Bash",
            "tool_input": {"command": "git status --short", "description": "status"},
            "tool_use_id": "toolu_next"});
        let mut growing = Self {
            db: tmp.path.join("agentwatch.db"),
            _tmp: tmp,
            transcript,
            config,
            head,
            calls,
            next: 0,
            event: event.to_string().into_bytes(),
        };
        growing.start_over();
        growing
    }

    /// The session at its base length, the hook's state gone, and one hook call that reads it.
    fn start_over(&mut self) {
        std::fs::write(&self.transcript, &self.head).unwrap();
        let _ = std::fs::remove_dir_all(self.db.with_file_name("hooks"));
        self.next = 0;
        self.hook();
    }

    /// One more call in the transcript.
    fn grow(&mut self) {
        if self.next == self.calls.len() {
            self.start_over();
        }
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(&self.transcript)
            .unwrap();
        file.write_all(&self.calls[self.next]).unwrap();
        self.next += 1;
    }

    fn hook(&self) {
        let mut command = Command::new(binary());
        command
            .args(["hook", "claude", "--db"])
            .arg(&self.db)
            .arg("--config")
            .arg(&self.config);
        run(command, &self.event);
    }
}

/// Run `command` with `stdin` on its standard input, to its end.
fn run(mut command: Command, stdin: &[u8]) {
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("{e}: build it first: cargo build --release -p agentwatch"));
    // `/bin/true` reads nothing: a closed pipe is no failure.
    let _ = child.stdin.take().unwrap().write_all(stdin);
    assert!(child.wait().unwrap().success());
}

fn bench_hook(c: &mut Criterion) {
    let mut group = c.benchmark_group("hook_process");
    group
        .sample_size(30)
        .measurement_time(Duration::from_secs(8));
    let floor = Growing::new(0);
    group.bench_function("bin_true", |b| {
        b.iter(|| run(Command::new("/bin/true"), &floor.event))
    });
    for base in [200, 2000] {
        let mut growing = Growing::new(base);
        group.bench_function(format!("claude_{base}_calls"), |b| {
            b.iter_custom(|iters| {
                let mut spent = Duration::ZERO;
                for _ in 0..iters {
                    growing.grow();
                    let started = Instant::now();
                    growing.hook();
                    spent += started.elapsed();
                }
                spent
            })
        });
    }
    group.finish();
    for base in [200, 2000] {
        spread(base);
    }
}

/// The figures beside criterion's mean: the median and the 99th percentile of 1 000
/// single hook calls, each timed alone, as the agent meets them.
fn spread(base: usize) {
    let mut growing = Growing::new(base);
    let mut times: Vec<Duration> = (0..1000)
        .map(|_| {
            growing.grow();
            let started = Instant::now();
            growing.hook();
            started.elapsed()
        })
        .collect();
    times.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!(
        "hook_process/claude_{base}_calls: 1000 calls, median {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        ms(times[500]),
        ms(times[990]),
        ms(times[999])
    );
}

criterion_group!(benches, bench_hook);
criterion_main!(benches);
