//! The development set (`fixtures/dev/sessions.json`), built deterministically by
//! `cargo xtask import-trajectories`:
//!
//! 1. **Real runs**: the public trajectories converted by [`crate::trajectories`] (committed as
//!    `fixtures/dev/real.json`, so the set rebuilds without them).
//! 2. **Generated healthy runs** of agents that work through bash: orient (`ls`, `git status`),
//!    locate (`grep -rn`, `rg`, `find`), read (`sed -n`, `nl -ba | sed -n`, `cat`, `head`),
//!    reproduce (`cat > repro.py <<EOF`, `python repro.py`, `python -c`), fix and test
//!    (`sed -i`, python heredocs, `git apply` / `apply_patch` heredocs, `pytest` / `cargo test` /
//!    `npx jest`), verify (`git diff`). Four tasks (bugfix, feature, investigation without
//!    edits, refactor across many files) and the traps other detectors fall into: polling a
//!    background job, paging through a long log, bursts of `python -c` probes, reruns.
//! 3. **Positives** spliced into healthy runs (generated and real): at a random call the agent
//!    gets stuck for 40-120 calls, made of what it was doing just before:
//!    - `repeat`: one of its last 10 calls, again and again;
//!    - `cycle`: its last 2 or 3 calls, repeated as a block;
//!    - `reread`: the file it read most, reread in varying ranges and tools, around its last
//!      test run (or failing command), with a few greps of the file;
//!    - `noisy`: 3-5 of its last 12 calls in random order, with 10-35% filler calls that
//!      are each new (no exact period).
//!
//!    A replayed call has the outcome a replay has: an edit applied once finds nothing to
//!    replace (error, empty diff), `git commit` / `git apply` / `patch` fail, a `write` that
//!    created a file fails; views, tests and `sed -i` run as before. Half the loops end the
//!    session; in the other half the run goes on as it was.
//!
//! The kind of each session is the second part of its id (`dev-KIND-SOURCE-…`) and the first
//! word of its note. The method is fixed here, before measuring; `fixtures/README.md` says what
//! changed after the first measurement.

use crate::corpus;
use crate::trajectories::Converted;
use detect_core::{Call, CallStatus, CallTime, Label, Session, SessionFile};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// How many healthy runs are generated.
pub const HEALTHY_RUNS: usize = 150;
/// Positives per kind spliced into generated runs.
pub const SPLICES_PER_KIND_GENERATED: usize = 30;
/// Positives per kind spliced into each healthy real run.
pub const SPLICES_PER_KIND_REAL: usize = 2;
/// The length of a spliced loop, in calls (inclusive).
pub const LOOP_CALLS: (usize, usize) = (40, 120);

const BASE_MS: i64 = 1_797_000_000_000;
const SESSION_GAP_MS: i64 = 6 * 3600 * 1000;

/// What a development session is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    Healthy,
    Repeat,
    Cycle,
    Reread,
    Noisy,
    Unlabelled,
}

impl Kind {
    pub const LOOPS: [Kind; 4] = [Kind::Repeat, Kind::Cycle, Kind::Reread, Kind::Noisy];

    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Healthy => "healthy",
            Kind::Repeat => "repeat",
            Kind::Cycle => "cycle",
            Kind::Reread => "reread",
            Kind::Noisy => "noisy",
            Kind::Unlabelled => "unlabelled",
        }
    }

    /// The kind of a session from its id (`dev-KIND-…`).
    pub fn of_id(id: &str) -> Option<Kind> {
        let kind = id.strip_prefix("dev-")?.split('-').next()?;
        [
            Kind::Healthy,
            Kind::Repeat,
            Kind::Cycle,
            Kind::Reread,
            Kind::Noisy,
            Kind::Unlabelled,
        ]
        .into_iter()
        .find(|k| k.as_str() == kind)
    }

    /// `real` or `generated`, from the id (`dev-KIND-real-…` / `dev-KIND-gen-…`).
    pub fn source_of_id(id: &str) -> &'static str {
        if id.split('-').nth(2) == Some("real") {
            "real"
        } else {
            "generated"
        }
    }
}

/// The committed dev set.
pub fn default_dev_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/dev/sessions.json")
}

/// The committed conversion of the public trajectories.
pub fn default_real_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/dev/real.json")
}

/// Where the public trajectories are looked for by default (beside the workspace).
pub fn default_trajectories_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/data/trajectories")
}

// ---------------------------------------------------------------------------------------------
// Randomness.

/// SplitMix64: deterministic, no crate.
#[derive(Debug, Clone)]
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Self {
        Self(seed)
    }

    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `lo..=hi`.
    fn range(&mut self, lo: usize, hi: usize) -> usize {
        if hi <= lo {
            return lo;
        }
        lo + (self.next() % (hi - lo + 1) as u64) as usize
    }

    fn ms(&mut self, lo: i64, hi: i64) -> i64 {
        lo + (self.next() % ((hi - lo).max(0) as u64 + 1)) as i64
    }

    /// True with probability `p`.
    fn chance(&mut self, p: f64) -> bool {
        ((self.next() >> 11) as f64 / (1u64 << 53) as f64) < p
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.range(0, items.len() - 1)]
    }

    /// An index drawn by weight.
    fn weighted(&mut self, weights: &[u32]) -> usize {
        let total: u32 = weights.iter().sum();
        let mut x = (self.next() % u64::from(total.max(1))) as u32;
        for (i, w) in weights.iter().enumerate() {
            if x < *w {
                return i;
            }
            x -= w;
        }
        weights.len() - 1
    }

    fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = self.range(0, i);
            items.swap(i, j);
        }
    }
}

fn fnv(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

// ---------------------------------------------------------------------------------------------
// Repositories.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lang {
    Python,
    Rust,
    Js,
}

#[derive(Debug, Clone)]
struct File {
    path: String,
    lines: u64,
    /// Function names defined in it, with their line.
    symbols: Vec<(String, u64)>,
}

#[derive(Debug, Clone)]
struct Repo {
    dir: String,
    lang: Lang,
    package: String,
    sources: Vec<File>,
    tests: Vec<File>,
    docs: Vec<(String, u64)>,
    logs: Vec<(String, u64)>,
}

const NOUNS: &[&str] = &[
    "parser", "lexer", "config", "cache", "session", "router", "schema", "client", "server",
    "worker", "queue", "store", "index", "query", "render", "export", "import", "auth", "token",
    "user", "order", "invoice", "report", "metrics", "logger", "plugin", "loader", "resolver",
    "encoder", "decoder", "stream", "buffer", "pool", "retry", "policy", "quota", "billing",
    "ledger", "calendar", "search", "filter", "mapper", "builder", "registry", "manifest",
];
const VERBS: &[&str] = &[
    "parse",
    "load",
    "save",
    "build",
    "resolve",
    "apply",
    "merge",
    "split",
    "render",
    "encode",
    "decode",
    "validate",
    "normalize",
    "compute",
    "fetch",
    "flush",
    "retry",
    "match",
    "format",
    "convert",
    "register",
    "lookup",
    "update",
    "reset",
    "emit",
    "collect",
    "scan",
    "read",
];
const PROJECTS: &[(&str, Lang)] = &[
    ("tabulate-ng", Lang::Python),
    ("httpkit", Lang::Python),
    ("dataflow", Lang::Python),
    ("pydantic-lite", Lang::Python),
    ("scheduler", Lang::Python),
    ("geodesy", Lang::Python),
    ("ledgerd", Lang::Rust),
    ("tomlfmt", Lang::Rust),
    ("webui", Lang::Js),
    ("cli-kit", Lang::Js),
];

fn repos() -> Vec<Repo> {
    PROJECTS
        .iter()
        .map(|(name, lang)| {
            let mut rng = Rng::new(fnv(name));
            let package = name.replace('-', "_");
            let mut nouns: Vec<&str> = NOUNS.to_vec();
            rng.shuffle(&mut nouns);
            let modules = &nouns[..rng.range(14, 26)];
            let mut sources = Vec::new();
            let mut tests = Vec::new();
            for (i, m) in modules.iter().enumerate() {
                let (src, test) = match lang {
                    Lang::Python => (
                        if i % 5 == 4 {
                            format!("{package}/utils/{m}.py")
                        } else {
                            format!("{package}/{m}.py")
                        },
                        format!("tests/test_{m}.py"),
                    ),
                    Lang::Rust => (format!("src/{m}.rs"), format!("tests/{m}.rs")),
                    Lang::Js => (format!("src/{m}.ts"), format!("src/__tests__/{m}.test.ts")),
                };
                let lines = 80 + rng.range(0, 900) as u64;
                let n = rng.range(3, 9);
                let symbols = (0..n)
                    .map(|k| {
                        let verb = rng.pick(VERBS);
                        let name = match lang {
                            Lang::Js => format!("{verb}{}", camel(m)),
                            _ => format!("{verb}_{m}"),
                        };
                        (
                            if k == 0 { name } else { format!("{name}_{k}") },
                            1 + (lines * k as u64) / n as u64 + rng.range(0, 10) as u64,
                        )
                    })
                    .collect();
                sources.push(File {
                    path: src,
                    lines,
                    symbols,
                });
                let tlines = 40 + rng.range(0, 400) as u64;
                let tsymbols = (0..rng.range(3, 12))
                    .map(|k| (format!("test_{}_{k}", rng.pick(VERBS)), 5 + 20 * k as u64))
                    .collect();
                tests.push(File {
                    path: test,
                    lines: tlines,
                    symbols: tsymbols,
                });
            }
            let manifest = match lang {
                Lang::Python => "pyproject.toml",
                Lang::Rust => "Cargo.toml",
                Lang::Js => "package.json",
            };
            Repo {
                dir: format!("/home/dev/{name}"),
                lang: *lang,
                package,
                sources,
                tests,
                docs: vec![
                    ("README.md".into(), 60 + rng.range(0, 200) as u64),
                    (manifest.into(), 20 + rng.range(0, 60) as u64),
                    ("CHANGELOG.md".into(), 100 + rng.range(0, 600) as u64),
                    ("docs/usage.md".into(), 50 + rng.range(0, 300) as u64),
                ],
                logs: vec![
                    ("logs/app.log".into(), 800 + rng.range(0, 3200) as u64),
                    (
                        "build/test-output.txt".into(),
                        600 + rng.range(0, 2400) as u64,
                    ),
                ],
            }
        })
        .collect()
}

fn camel(word: &str) -> String {
    let mut c = word.chars();
    c.next()
        .map(|f| f.to_ascii_uppercase().to_string() + c.as_str())
        .unwrap_or_default()
}

fn stem(path: &str) -> &str {
    let base = path.rsplit('/').next().unwrap_or(path);
    base.split('.').next().unwrap_or(base)
}

// ---------------------------------------------------------------------------------------------
// A bash-driven agent at work.

/// How one agent writes its commands.
#[derive(Debug, Clone)]
struct Style {
    /// Weights of `sed -n`, `nl -ba | sed -n`, `cat`, `head` / `tail`.
    viewers: [u32; 4],
    /// Weights of `sed -i`, python heredoc, `cat >` heredoc, `git apply` heredoc, `apply_patch`.
    editors: [u32; 5],
    /// Prefix commands with `cd DIR && `.
    cd: bool,
    /// Send a `description` with each command (opencode, Claude Code) or not (Codex, SWE-agent).
    describe: bool,
    /// Pipe test output through `tail`.
    tail_tests: bool,
    /// Quote `sed -n` scripts.
    quote: bool,
}

impl Style {
    fn draw(rng: &mut Rng) -> Self {
        let mut viewers = [1, 1, 1, 1];
        viewers[rng.range(0, 3)] += 6;
        let mut editors = [1, 1, 1, 1, 1];
        editors[rng.range(0, 4)] += 5;
        Self {
            viewers,
            editors,
            cd: rng.chance(0.3),
            describe: rng.chance(0.5),
            tail_tests: rng.chance(0.3),
            quote: rng.chance(0.6),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Task {
    Bugfix,
    Feature,
    Investigate,
    Refactor,
}

impl Task {
    fn as_str(self) -> &'static str {
        match self {
            Task::Bugfix => "bugfix",
            Task::Feature => "feature",
            Task::Investigate => "investigation (no edits)",
            Task::Refactor => "refactor across files",
        }
    }
}

struct Agent<'r> {
    repo: &'r Repo,
    style: Style,
    rng: Rng,
    now: i64,
    calls: Vec<Call>,
    /// Counter that makes generated content unique.
    serial: usize,
    /// Traps this run contains, for its note.
    traps: Vec<String>,
}

impl<'r> Agent<'r> {
    fn new(repo: &'r Repo, seed: u64, start_ms: i64) -> Self {
        let mut rng = Rng::new(seed);
        let style = Style::draw(&mut rng);
        Self {
            repo,
            style,
            rng,
            now: start_ms,
            calls: Vec::new(),
            serial: 0,
            traps: Vec::new(),
        }
    }

    fn next_serial(&mut self) -> usize {
        self.serial += 1;
        self.serial
    }

    /// One bash call: think, run for `run` ms, exit with `exit`.
    fn bash(&mut self, command: &str, description: &str, exit: i64, run: (i64, i64)) {
        self.now += self.rng.ms(2_000, 18_000);
        let start = self.now;
        self.now += self.rng.ms(run.0, run.1);
        let command = if self.style.cd && self.rng.chance(0.7) {
            format!("cd {} && {command}", self.repo.dir)
        } else {
            command.to_owned()
        };
        let input = if self.style.describe {
            json!({"command": command, "description": description})
        } else {
            json!({ "command": command })
        };
        self.calls.push(
            Call::completed("bash", input)
                .with_metadata(json!({ "exit": exit }))
                .with_time(start, self.now),
        );
    }

    fn file(&mut self) -> File {
        self.rng.pick(&self.repo.sources).clone()
    }

    fn test_of(&self, file: &File) -> File {
        let s = stem(&file.path);
        self.repo
            .tests
            .iter()
            .find(|t| stem(&t.path).contains(s))
            .unwrap_or(&self.repo.tests[0])
            .clone()
    }

    // ---- views ------------------------------------------------------------------------------

    /// View lines `a..=b` of a file in the agent's style.
    fn view(&mut self, path: &str, lines: u64, a: u64, b: u64) {
        let a = a.clamp(1, lines.max(1));
        let b = b.min(lines).max(a);
        let q = |s: String, quote: bool| if quote { format!("'{s}'") } else { s };
        let quote = self.style.quote;
        let viewer = self.rng.weighted(&self.style.viewers);
        let command = match viewer {
            1 => format!("nl -ba {path} | sed -n {}", q(format!("{a},{b}p"), quote)),
            2 if lines <= 400 => format!("cat {path}"),
            3 if a == 1 => format!("head -n {b} {path}"),
            3 if b >= lines => format!("tail -n {} {path}", lines - a + 1),
            _ => format!("sed -n {} {path}", q(format!("{a},{b}p"), quote)),
        };
        self.bash(&command, &format!("Show {path}"), 0, (30, 400));
    }

    /// View the region around line `at`.
    fn view_around(&mut self, file: &File, at: u64) {
        let before = self.rng.range(10, 60) as u64;
        let after = self.rng.range(20, 90) as u64;
        let a = at.saturating_sub(before).max(1);
        self.view(&file.path, file.lines, a, at + after);
    }

    fn view_file(&mut self, file: &File) {
        if self.rng.chance(0.35) || file.symbols.is_empty() {
            let len = self.rng.range(60, 200) as u64;
            self.view(&file.path, file.lines, 1, len);
        } else {
            let at = self.rng.pick(&file.symbols).1;
            self.view_around(file, at);
        }
    }

    // ---- searches ---------------------------------------------------------------------------

    fn search(&mut self, symbol: &str) {
        let repo = self.repo;
        let ext = match repo.lang {
            Lang::Python => "py",
            Lang::Rust => "rs",
            Lang::Js => "ts",
        };
        let src = match repo.lang {
            Lang::Python => format!("{}/", repo.package),
            _ => "src/".to_owned(),
        };
        let command = match self.rng.range(0, 6) {
            0 => format!("grep -rn \"{symbol}\" {src}"),
            1 => format!("grep -rn \"{symbol}\" --include=*.{ext} ."),
            2 => format!("rg -n \"{symbol}\""),
            3 => format!("git grep -n {symbol}"),
            4 => format!("grep -rn \"def {symbol}\\|{symbol}(\" {src} tests/"),
            5 => format!("rg -n \"{symbol}\" -g '*.{ext}' | head -40"),
            _ => format!("grep -rln {symbol} ."),
        };
        let exit = if self.rng.chance(0.12) { 1 } else { 0 };
        self.bash(&command, &format!("Search for {symbol}"), exit, (80, 1_500));
    }

    fn find_files(&mut self) {
        let word = *self.rng.pick(NOUNS);
        let command = match self.repo.lang {
            Lang::Python => format!("find . -name \"*{word}*\" -not -path \"./.git/*\""),
            Lang::Rust => format!("find src tests -name \"*{word}*\""),
            Lang::Js => format!("find src -name \"*{word}*\" | grep -v node_modules"),
        };
        self.bash(&command, "Find files", 0, (50, 900));
    }

    // ---- commands of the project ------------------------------------------------------------

    fn test_command(&mut self, test: &File, focused: bool) -> String {
        let name = if focused && !test.symbols.is_empty() {
            Some(self.rng.pick(&test.symbols).0.clone())
        } else {
            None
        };
        let tail = if self.style.tail_tests {
            " 2>&1 | tail -30"
        } else {
            ""
        };
        let base = match (self.repo.lang, name) {
            (Lang::Python, Some(n)) => format!("pytest {}::{n} -x -q", test.path),
            (Lang::Python, None) => format!("pytest {} -x -q", test.path),
            (Lang::Rust, Some(n)) => format!("cargo test --test {} {n}", stem(&test.path)),
            (Lang::Rust, None) => format!("cargo test --test {}", stem(&test.path)),
            (Lang::Js, Some(n)) => format!("npx jest {} -t {n}", test.path),
            (Lang::Js, None) => format!("npx jest {}", test.path),
        };
        format!("{base}{tail}")
    }

    fn run_test(&mut self, command: &str, pass: bool) {
        self.bash(
            command,
            "Run the tests",
            if pass { 0 } else { 1 },
            (1_500, 45_000),
        );
    }

    fn full_suite(&mut self, pass: bool) {
        let command = match self.repo.lang {
            Lang::Python => *self.rng.pick(&[
                "pytest -q",
                "python -m pytest -x -q",
                "pytest -q -p no:cacheprovider",
            ]),
            Lang::Rust => {
                *self
                    .rng
                    .pick(&["cargo test", "cargo test --all-targets", "cargo test -q"])
            }
            Lang::Js => *self
                .rng
                .pick(&["npm test", "npx jest", "npm test -- --silent"]),
        };
        self.bash(
            command,
            "Run the whole suite",
            if pass { 0 } else { 1 },
            (10_000, 120_000),
        );
    }

    fn probe(&mut self, file: &File) {
        let sym = if file.symbols.is_empty() {
            "main".to_owned()
        } else {
            self.rng.pick(&file.symbols).0.clone()
        };
        let n = self.next_serial();
        let module = file.path.trim_end_matches(".py").replace('/', ".");
        let command = match self.repo.lang {
            Lang::Python => match self.rng.range(0, 2) {
                0 => format!("python -c \"from {module} import {sym}; print({sym}({n}))\""),
                1 => {
                    format!("python -c \"import {module} as m; print(m.{sym}('{n}'), m.__file__)\"")
                }
                _ => format!("python3 -c \"from {module} import *; print({sym}(*range({n})))\""),
            },
            Lang::Rust => format!("cargo run -q --example probe -- {sym} {n}"),
            Lang::Js => format!(
                "node -e \"const m = require('./{}'); console.log(m.{sym}({n}))\"",
                file.path.trim_end_matches(".ts")
            ),
        };
        let exit = if self.rng.chance(0.3) { 1 } else { 0 };
        self.bash(&command, "Try it", exit, (300, 3_000));
    }

    fn housekeeping(&mut self) {
        let command = *self.rng.pick(&[
            "git status",
            "git diff",
            "git diff --stat",
            "git log --oneline -10",
            "ls",
            "ls -la",
            "git stash list",
            "git branch --show-current",
        ]);
        self.bash(command, "Look around", 0, (30, 600));
    }

    // ---- edits (bash writes) ----------------------------------------------------------------

    /// Change `file` around line `at`; `fail` makes the edit command fail.
    fn edit(&mut self, file: &File, at: u64, fail: bool) {
        let n = self.next_serial();
        let sym = if file.symbols.is_empty() {
            format!("value_{n}")
        } else {
            self.rng.pick(&file.symbols).0.clone()
        };
        let old = format!("{sym}(value)");
        let new = format!(
            "{sym}(value, strict={})",
            if n.is_multiple_of(2) { "True" } else { "False" }
        );
        let path = &file.path;
        let editor = self.rng.weighted(&self.style.editors);
        let command = match editor {
            0 => {
                if self.rng.chance(0.5) {
                    format!("sed -i 's/{old}/{new}/' {path}")
                } else {
                    format!(
                        "sed -i '{at}s/return {sym}_{n}/return {sym}_{}/' {path}",
                        n + 1
                    )
                }
            }
            1 => format!(
                "python - <<'EOF'\nfrom pathlib import Path\np = Path('{path}')\ns = p.read_text()\ns = s.replace('{old}', '{new}', 1)\np.write_text(s)\nprint('patched', {n})\nEOF"
            ),
            2 => format!(
                "cat > {path} <<'EOF'\n\"\"\"{sym}: rewritten ({n}).\"\"\"\n\ndef {sym}(value, strict=False):\n    if strict and value is None:\n        raise ValueError('{sym}: value is required')\n    return value\nEOF"
            ),
            3 => format!(
                "git apply <<'EOF'\n--- a/{path}\n+++ b/{path}\n@@ -{at},3 +{at},3 @@\n def {sym}(value):\n-    return {old}\n+    return {new}\n     # {n}\nEOF"
            ),
            _ => format!(
                "apply_patch <<'EOF'\n*** Begin Patch\n*** Update File: {path}\n@@ def {sym}\n-    return {old}\n+    return {new}  # {n}\n*** End Patch\nEOF"
            ),
        };
        self.bash(
            &command,
            &format!("Edit {path}"),
            if fail { 1 } else { 0 },
            (50, 800),
        );
    }

    fn new_file(&mut self, path: &str) {
        let n = self.next_serial();
        let command = format!(
            "cat > {path} <<'EOF'\n# generated {n}\nimport pytest\n\n\ndef test_case_{n}():\n    assert True\nEOF"
        );
        self.bash(&command, &format!("Create {path}"), 0, (40, 300));
    }

    // ---- phases -----------------------------------------------------------------------------

    fn orient(&mut self) {
        let repo = self.repo;
        let mut pool: Vec<String> = vec![
            "ls".into(),
            "ls -la".into(),
            "git status".into(),
            "git log --oneline -10".into(),
            format!("cat {}", repo.docs[1].0),
            "head -60 README.md".into(),
            "tree -L 2 -I node_modules".into(),
            match repo.lang {
                Lang::Python => format!("ls {}", repo.package),
                _ => "ls src".into(),
            },
            match repo.lang {
                Lang::Python => "find . -name \"*.py\" | grep -v test | head -50".into(),
                Lang::Rust => "find src -name \"*.rs\" | head -50".into(),
                Lang::Js => "find src -name \"*.ts\" | head -50".into(),
            },
        ];
        self.rng.shuffle(&mut pool);
        let k = self.rng.range(2, 6);
        for command in pool.into_iter().take(k) {
            self.bash(&command, "Orient", 0, (30, 800));
        }
    }

    /// Find and read the code the task is about.
    fn locate(&mut self, primary: &[File], secondary: &[File]) {
        for f in primary {
            if !f.symbols.is_empty() {
                let s = self.rng.pick(&f.symbols).0.clone();
                self.search(&s);
            }
        }
        for _ in 0..self.rng.range(0, 3) {
            if self.rng.chance(0.3) {
                self.find_files();
            } else {
                let f = self.file();
                let s = f.symbols.first().map_or("main".to_owned(), |s| s.0.clone());
                self.search(&s);
            }
        }
        for f in primary {
            for _ in 0..self.rng.range(2, 4) {
                self.view_file(f);
            }
        }
        for f in secondary {
            for _ in 0..self.rng.range(1, 2) {
                self.view_file(f);
            }
        }
        let test = self.test_of(&primary[0]);
        for _ in 0..self.rng.range(1, 2) {
            self.view_file(&test);
        }
    }

    /// Look a little further between fix attempts.
    fn investigate(&mut self, primary: &[File], calls: usize) {
        for _ in 0..calls {
            match self.rng.range(0, 9) {
                0..=3 => {
                    let f = self.rng.pick(primary).clone();
                    self.view_file(&f);
                }
                4 => {
                    let f = self.file();
                    self.view_file(&f);
                }
                5 | 6 => {
                    let f = self.rng.pick(primary).clone();
                    let s = f.symbols.first().map_or("main".to_owned(), |s| s.0.clone());
                    self.search(&s);
                }
                7 if self.repo.lang != Lang::Rust => {
                    let f = self.rng.pick(primary).clone();
                    self.probe(&f);
                }
                _ => self.housekeeping(),
            }
        }
    }

    /// A background job polled until it finishes (the "polling a long job" trap).
    fn poll_job(&mut self, primary: &[File]) {
        let n = self.next_serial();
        let log = format!("/tmp/suite-{n}.log");
        let suite = match self.repo.lang {
            Lang::Python => "pytest -q",
            Lang::Rust => "cargo test --release",
            Lang::Js => "npm run test:e2e",
        };
        self.bash(
            &format!("nohup {suite} > {log} 2>&1 &"),
            "Start the slow suite in the background",
            0,
            (50, 300),
        );
        let polls = self.rng.range(2, 12);
        let nap = *self.rng.pick(&[20, 30, 45, 60]);
        let lines = *self.rng.pick(&[5, 10, 20]);
        for _ in 0..polls {
            let between = self.rng.range(0, 3);
            self.investigate(primary, between);
            self.bash(
                &format!("sleep {nap} && tail -n {lines} {log}"),
                "Check on the suite",
                0,
                (nap * 1000, nap * 1000 + 800),
            );
        }
        self.traps
            .push(format!("polls a background job {polls} times"));
    }

    /// Read a long log page by page (the "paging" trap).
    fn page_log(&mut self) {
        let (path, lines) = self.rng.pick(&self.repo.logs).clone();
        let page = *self.rng.pick(&[100u64, 150, 200, 250]);
        let total = lines.div_ceil(page) as usize;
        let pages = total.min(self.rng.range(3, 15));
        let quote = self.style.quote;
        for p in 0..pages as u64 {
            let (a, b) = (p * page + 1, (p + 1) * page);
            let range = if quote {
                format!("'{a},{b}p'")
            } else {
                format!("{a},{b}p")
            };
            self.bash(
                &format!("sed -n {range} {path}"),
                "Read the log",
                0,
                (30, 300),
            );
            if self.rng.chance(0.2) {
                let word = *self
                    .rng
                    .pick(&["ERROR", "Traceback", "FAILED", "panic", "timeout"]);
                self.bash(
                    &format!("grep -n {word} {path} | head -20"),
                    "Find errors",
                    0,
                    (30, 300),
                );
            }
        }
        self.traps
            .push(format!("pages through {path} in {pages} pages"));
    }

    fn probe_burst(&mut self, primary: &[File]) {
        if self.repo.lang == Lang::Rust {
            return;
        }
        let k = self.rng.range(3, 8);
        for _ in 0..k {
            let f = self.rng.pick(primary).clone();
            self.probe(&f);
            if self.rng.chance(0.3) {
                self.view_file(&f);
            }
        }
        self.traps.push(format!("a burst of {k} probes"));
    }

    fn maybe_traps(&mut self, primary: &[File]) {
        if self.rng.chance(0.2) {
            self.poll_job(primary);
        }
        if self.rng.chance(0.15) {
            self.page_log();
        }
        if self.rng.chance(0.3) {
            self.probe_burst(primary);
        }
    }

    /// Edit, check, test; `rounds` attempts, the last one passes.
    fn fix_rounds(&mut self, primary: &[File], rounds: usize, test_cmd: &str) {
        for round in 0..rounds {
            let last = round + 1 == rounds;
            for _ in 0..self.rng.range(1, 2) {
                let f = self.rng.pick(primary).clone();
                let at = f.symbols.first().map_or(10, |s| s.1);
                if self.rng.chance(0.08) {
                    // The edit command fails; the agent writes it another way.
                    self.edit(&f, at, true);
                }
                self.edit(&f, at, false);
                if self.rng.chance(0.5) {
                    self.view_around(&f, at);
                }
            }
            self.run_test(test_cmd, last);
            if self.rng.chance(0.1) {
                // Run it again (flaky? more output?).
                self.run_test(test_cmd, last);
            }
            if !last {
                let k = self.rng.range(1, 6);
                self.investigate(primary, k);
            }
        }
    }

    fn verify(&mut self, repro: Option<&str>) {
        let pass = !self.rng.chance(0.15);
        self.full_suite(pass);
        if !pass {
            let f = self.file();
            self.view_file(&f);
            let at = f.symbols.first().map_or(10, |s| s.1);
            self.edit(&f, at, false);
            self.full_suite(true);
        }
        if self.rng.chance(0.7) {
            let review = *self.rng.pick(&["git diff", "git diff --stat"]);
            self.bash(review, "Review", 0, (30, 500));
        }
        if self.rng.chance(0.4) {
            self.bash("git status", "Review", 0, (30, 300));
        }
        if let Some(repro) = repro
            && self.rng.chance(0.6)
        {
            self.bash(&format!("rm {repro}"), "Clean up", 0, (20, 100));
        }
    }

    fn reproduce(&mut self, primary: &File) -> Option<String> {
        if self.repo.lang != Lang::Python || !self.rng.chance(0.7) {
            return None;
        }
        let n = self.next_serial();
        let repro = format!("repro_{n}.py");
        let module = primary.path.trim_end_matches(".py").replace('/', ".");
        let sym = primary
            .symbols
            .first()
            .map_or("main".to_owned(), |s| s.0.clone());
        self.bash(
            &format!(
                "cat > {repro} <<'EOF'\nfrom {module} import {sym}\n\nprint({sym}(None))\nEOF"
            ),
            "Write a reproduction",
            0,
            (40, 200),
        );
        for _ in 0..self.rng.range(1, 2) {
            self.bash(&format!("python {repro}"), "Reproduce", 1, (300, 3_000));
        }
        Some(repro)
    }

    // ---- tasks ------------------------------------------------------------------------------

    fn pick_files(&mut self, lo: usize, hi: usize) -> Vec<File> {
        let mut idx: Vec<usize> = (0..self.repo.sources.len()).collect();
        self.rng.shuffle(&mut idx);
        let k = self.rng.range(lo, hi);
        idx.into_iter()
            .take(k)
            .map(|i| self.repo.sources[i].clone())
            .collect()
    }

    fn bugfix(&mut self) {
        let primary = self.pick_files(1, 2);
        let secondary = self.pick_files(0, 4);
        self.locate(&primary, &secondary);
        let repro = self.reproduce(&primary[0]);
        self.maybe_traps(&primary);
        let test = self.test_of(&primary[0]);
        let focused = self.rng.chance(0.5);
        let test_cmd = self.test_command(&test, focused);
        self.run_test(&test_cmd, false);
        let rounds = self.rng.range(1, 6);
        self.fix_rounds(&primary, rounds, &test_cmd);
        self.verify(repro.as_deref());
    }

    fn feature(&mut self) {
        let primary = self.pick_files(2, 4);
        let secondary = self.pick_files(1, 4);
        self.locate(&primary, &secondary);
        self.maybe_traps(&primary);
        let n = self.next_serial();
        let new = match self.repo.lang {
            Lang::Python => format!("tests/test_feature_{n}.py"),
            Lang::Rust => format!("tests/feature_{n}.rs"),
            Lang::Js => format!("src/__tests__/feature_{n}.test.ts"),
        };
        self.new_file(&new);
        let test_cmd = {
            let f = File {
                path: new.clone(),
                lines: 10,
                symbols: Vec::new(),
            };
            self.test_command(&f, false)
        };
        self.run_test(&test_cmd, false);
        let rounds = self.rng.range(2, 6);
        self.fix_rounds(&primary, rounds, &test_cmd);
        self.verify(None);
    }

    fn investigation(&mut self) {
        let primary = self.pick_files(3, 7);
        let secondary = self.pick_files(2, 8);
        self.locate(&primary, &secondary);
        self.maybe_traps(&primary);
        let more = self.rng.range(10, 50);
        self.investigate(&primary, more);
        if self.rng.chance(0.6) {
            let test = self.test_of(&primary[0]);
            let cmd = self.test_command(&test, false);
            for _ in 0..self.rng.range(1, 3) {
                let pass = self.rng.chance(0.5);
                self.run_test(&cmd, pass);
                let k = self.rng.range(1, 4);
                self.investigate(&primary, k);
            }
        }
        if self.rng.chance(0.5) {
            self.bash("git log --oneline -20", "History", 0, (30, 300));
        }
    }

    fn refactor(&mut self) {
        let files = self.pick_files(6, 20);
        let old = files[0]
            .symbols
            .first()
            .map_or("old_name".to_owned(), |s| s.0.clone());
        let new = format!("{old}_v2");
        self.search(&old);
        self.maybe_traps(&files[..1]);
        let suite_every = self.rng.range(3, 6);
        for (i, f) in files.iter().enumerate() {
            if self.rng.chance(0.5) {
                self.view_file(f);
            }
            self.bash(
                &format!("sed -i 's/\\b{old}\\b/{new}/g' {}", f.path),
                &format!("Rename in {}", f.path),
                0,
                (30, 200),
            );
            if self.rng.chance(0.2) {
                self.bash(&format!("grep -n {new} {}", f.path), "Check", 0, (30, 200));
            }
            if (i + 1) % suite_every == 0 {
                self.full_suite(i + 1 == files.len());
            }
        }
        self.search(&old);
        self.verify(None);
    }
}

/// A generated healthy run.
fn healthy_run(index: usize, repos: &[Repo]) -> Session {
    let id = format!("dev-healthy-gen-{index:03}");
    let mut rng = Rng::new(fnv(&id));
    let repo = &repos[rng.range(0, repos.len() - 1)];
    // One to three tasks in a row (a user asks for more once the first is done).
    let tasks: Vec<Task> = (0..[1, 2, 3][rng.weighted(&[55, 30, 15])])
        .map(|_| {
            [
                Task::Bugfix,
                Task::Feature,
                Task::Investigate,
                Task::Refactor,
            ][rng.weighted(&[50, 20, 15, 15])]
        })
        .collect();
    let start = BASE_MS + SESSION_GAP_MS * index as i64;
    let mut agent = Agent::new(repo, rng.next(), start);
    agent.orient();
    for (i, task) in tasks.iter().enumerate() {
        if i > 0 {
            agent.housekeeping();
        }
        match task {
            Task::Bugfix => agent.bugfix(),
            Task::Feature => agent.feature(),
            Task::Investigate => agent.investigation(),
            Task::Refactor => agent.refactor(),
        }
    }
    let task = tasks
        .iter()
        .map(|t| t.as_str())
        .collect::<Vec<_>>()
        .join(", then a ");
    let traps = if agent.traps.is_empty() {
        String::new()
    } else {
        format!("; {}", agent.traps.join(", "))
    };
    let mut session = Session::new(id);
    session.title = Some(format!("{task} in {}", stem(&repo.dir)));
    session.agent = Some("build".to_owned());
    session.directory = Some(repo.dir.clone());
    session.label = Some(Label::MustNotFlag);
    session.note = Some(format!(
        "healthy (generated): a bash-driven {task} in {}, {} calls{traps}",
        repo.dir,
        agent.calls.len()
    ));
    session.calls = agent.calls;
    session
}

// ---------------------------------------------------------------------------------------------
// Splicing loops into healthy runs.

/// A call as the agent would get it when it makes it again: applied edits find nothing to do,
/// commits and patches fail, a created file exists already.
fn replay(call: &Call) -> Call {
    let mut c = call.clone();
    c.time = None;
    let command = c
        .input
        .get("command")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    match c.tool.as_str() {
        "edit" | "multiedit" | "patch" | "apply_patch" => {
            c.status = CallStatus::Error;
            c.metadata = json!({ "diff": "" });
        }
        "write" => c.status = CallStatus::Error,
        "bash"
            if command.contains("git commit")
                || command.contains("git apply")
                || command.contains("patch -p") =>
        {
            c.metadata = json!({ "exit": 1 });
        }
        _ => {}
    }
    c
}

/// Calls that end a run: never the substance of a loop.
fn terminal(call: &Call) -> bool {
    matches!(call.tool.as_str(), "finish" | "submit")
}

/// The path a call reads, if it reads one file: the `read` tool or a bash viewer.
fn viewed_path(call: &Call) -> Option<String> {
    if call.tool == "read" {
        return call
            .input
            .get("filePath")
            .and_then(Value::as_str)
            .map(str::to_owned);
    }
    let command = call.input.get("command")?.as_str()?;
    let command = command
        .split(" && ")
        .last()
        .unwrap_or(command)
        .split(" | ")
        .next()
        .unwrap_or(command);
    let mut words = command.split_whitespace();
    let program = words.next()?;
    if !["sed", "nl", "cat", "head", "tail"].contains(&program) || command.contains(" -i") {
        return None;
    }
    words
        .rfind(|w| {
            !w.starts_with('-')
                && (w.contains('/') || w.contains('.'))
                && !w.contains(',')
                && !w.starts_with('\'')
        })
        .map(str::to_owned)
}

fn is_test(call: &Call) -> bool {
    let command = call
        .input
        .get("command")
        .and_then(Value::as_str)
        .unwrap_or("");
    [
        "pytest",
        "cargo test",
        "jest",
        "npm test",
        "make",
        "python repro",
        "python reproduce",
    ]
    .iter()
    .any(|t| command.contains(t))
}

/// What a base run offers a loop: its calls and, for generated runs, its repository.
struct Base<'a> {
    session: &'a Session,
    repo: Option<&'a Repo>,
    source: &'static str,
    /// Short name for ids (`gen-017`, `oh-ponyc-4595`).
    short: String,
}

struct Splice {
    calls: Vec<Call>,
    note: String,
}

/// Build a loop of `len` calls of `kind` from the calls before `at`.
fn build_loop(kind: Kind, base: &Base<'_>, at: usize, len: usize, rng: &mut Rng) -> Splice {
    let before: Vec<&Call> = base.session.calls[..at]
        .iter()
        .filter(|c| !terminal(c))
        .collect();
    let recent = |n: usize| &before[before.len().saturating_sub(n)..];
    match kind {
        Kind::Repeat => {
            let call = *rng.pick(recent(10));
            Splice {
                calls: (0..len).map(|_| replay(call)).collect(),
                note: format!("the same `{}` call {len} times", describe(call)),
            }
        }
        Kind::Cycle => {
            let p = rng.range(2, 3).min(before.len());
            let block: Vec<Call> = recent(p).iter().map(|c| replay(c)).collect();
            let calls: Vec<Call> = block.iter().cycle().take(len).cloned().collect();
            Splice {
                note: format!(
                    "a block of {p} calls ({}) repeated {:.1} times",
                    block.iter().map(describe).collect::<Vec<_>>().join(" / "),
                    len as f64 / p as f64
                ),
                calls,
            }
        }
        Kind::Reread => reread_loop(base, &before, len, rng),
        Kind::Noisy => {
            let mut core: Vec<&Call> = Vec::new();
            for c in recent(12).iter().rev() {
                let id = detect_core::call_identity(&c.tool, &c.input);
                if !core
                    .iter()
                    .any(|k| detect_core::call_identity(&k.tool, &k.input) == id)
                {
                    core.push(c);
                }
            }
            rng.shuffle(&mut core);
            let k = rng.range(3, 5).min(core.len());
            core.truncate(k);
            let filler_share = rng.range(10, 35) as f64 / 100.0;
            let mut calls = Vec::with_capacity(len);
            let mut fillers = 0;
            for _ in 0..len {
                if rng.chance(filler_share) {
                    calls.push(filler(base, rng));
                    fillers += 1;
                } else {
                    calls.push(replay(core[rng.range(0, core.len() - 1)]));
                }
            }
            Splice {
                note: format!(
                    "{k} calls ({}) in random order with {fillers} new filler calls ({:.0}% drawn)",
                    core.iter()
                        .map(|c| describe(c))
                        .collect::<Vec<_>>()
                        .join(" / "),
                    filler_share * 100.0
                ),
                calls,
            }
        }
        Kind::Healthy | Kind::Unlabelled => Splice {
            calls: Vec::new(),
            note: String::new(),
        },
    }
}

/// A short description of a call for notes.
fn describe(call: &Call) -> String {
    let text = match call.tool.as_str() {
        "bash" => call
            .input
            .get("command")
            .and_then(Value::as_str)
            .unwrap_or("")
            .lines()
            .next()
            .unwrap_or("")
            .to_owned(),
        "read" => format!(
            "read {}",
            call.input
                .get("filePath")
                .and_then(Value::as_str)
                .unwrap_or("")
        ),
        other => other.to_owned(),
    };
    let short: String = text.chars().take(70).collect();
    if short.len() < text.len() {
        format!("{short}…")
    } else {
        short
    }
}

/// The file read most before the splice, reread in 2-3 regions with varying tools and ranges,
/// around the last test run (or failing command), with greps of the file.
fn reread_loop(base: &Base<'_>, before: &[&Call], len: usize, rng: &mut Rng) -> Splice {
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for c in before {
        if let Some(p) = viewed_path(c) {
            *counts.entry(p).or_default() += 1;
        }
    }
    let file = counts
        .iter()
        .max_by_key(|(p, n)| (**n, std::cmp::Reverse((*p).clone())))
        .map(|(p, _)| p.clone())
        .or_else(|| base.repo.map(|r| r.sources[0].path.clone()))
        .unwrap_or_else(|| "README.md".to_owned());
    let uses_read_tool = before.iter().any(|c| c.tool == "read")
        && !before
            .iter()
            .any(|c| viewed_path(c).is_some() && c.tool == "bash");
    let test = before
        .iter()
        .rev()
        .find(|c| is_test(c))
        .or_else(|| {
            before.iter().rev().find(|c| {
                c.tool == "bash" && c.metadata.get("exit").and_then(Value::as_i64) != Some(0)
            })
        })
        .or_else(|| before.iter().rev().find(|c| c.tool == "bash"))
        .map(|c| replay(c));
    let lines = base
        .repo
        .and_then(|r| r.sources.iter().find(|f| f.path == file).map(|f| f.lines))
        .unwrap_or(400);
    let regions: Vec<u64> = (0..rng.range(2, 3))
        .map(|_| 1 + rng.range(0, lines.saturating_sub(60) as usize) as u64)
        .collect();
    let words = ["def ", "return", "raise", "self.", "import", "if "];
    let mut calls = Vec::with_capacity(len);
    for _ in 0..len {
        let roll = rng.range(0, 99);
        if roll < 30
            && let Some(t) = &test
        {
            calls.push(t.clone());
        } else if roll < 42 {
            let w = rng.pick(&words);
            calls.push(
                Call::completed(
                    "bash",
                    json!({ "command": format!("grep -n \"{w}\" {file}") }),
                )
                .with_metadata(json!({"exit": 0})),
            );
        } else {
            let at = *rng.pick(&regions);
            let a = at.saturating_sub(rng.range(0, 30) as u64).max(1);
            let b = (at + rng.range(30, 90) as u64).min(lines);
            if uses_read_tool {
                calls.push(Call::completed(
                    "read",
                    json!({"filePath": file, "offset": a, "limit": b - a + 1}),
                ));
            } else {
                let command = match rng.range(0, 3) {
                    0 => format!("sed -n '{a},{b}p' {file}"),
                    1 => format!("nl -ba {file} | sed -n '{a},{b}p'"),
                    2 if lines <= 400 => format!("cat {file}"),
                    _ => format!("sed -n {a},{b}p {file}"),
                };
                calls.push(
                    Call::completed("bash", json!({ "command": command }))
                        .with_metadata(json!({"exit": 0})),
                );
            }
        }
    }
    Splice {
        calls,
        note: format!(
            "rereads {file} ({} regions) around `{}`",
            regions.len(),
            test.as_ref().map_or_else(|| "-".to_owned(), describe)
        ),
    }
}

/// A call the loop has not made before: a search for a new word, a listing, a view of another
/// file, a probe.
fn filler(base: &Base<'_>, rng: &mut Rng) -> Call {
    let n = rng.next() % 100_000;
    let word = rng.pick(NOUNS);
    let verb = rng.pick(VERBS);
    let command = match (base.repo, rng.range(0, 4)) {
        (Some(repo), 0) => {
            let f = rng.pick(&repo.sources);
            let a = 1 + (n % f.lines.max(1));
            format!("sed -n '{a},{}p' {}", a + 40, f.path)
        }
        (Some(repo), 1) if repo.lang == Lang::Python => {
            format!("python -c \"import {}; print({n})\"", repo.package)
        }
        (_, 2) => format!("ls -la {word}s/ 2>/dev/null || ls"),
        (_, 3) => format!("find . -name \"*{word}_{n}*\""),
        _ => format!("grep -rn \"{verb}_{word}_{n}\" ."),
    };
    Call::completed("bash", json!({ "command": command })).with_metadata(json!({"exit": 0}))
}

/// Splice a loop of `kind` into `base`.
fn splice(kind: Kind, base: &Base<'_>, serial: usize, index: i64) -> Session {
    let id = format!(
        "dev-{}-{}-{}",
        kind.as_str(),
        base.source_prefix(),
        serial_id(base, serial)
    );
    let mut rng = Rng::new(fnv(&id));
    let n = base.session.calls.len();
    let lo = 3.min(n.saturating_sub(1)).max(1);
    let at = rng.range(lo, n.saturating_sub(1).max(lo));
    let len = rng.range(LOOP_CALLS.0, LOOP_CALLS.1);
    let looped = build_loop(kind, base, at, len, &mut rng);
    let goes_on = rng.chance(0.5);
    let mut calls: Vec<Call> = base.session.calls[..at].to_vec();
    // Times: the loop runs after the last call before the splice; the rest of the run is
    // shifted after the loop. A run without times stays without.
    let mut clock = calls
        .iter()
        .rev()
        .find_map(Call::end_ms)
        .unwrap_or(BASE_MS + SESSION_GAP_MS * index);
    let timed = base.session.calls.iter().any(|c| c.time.is_some());
    for mut c in looped.calls {
        if timed {
            clock += rng.ms(2_000, 15_000);
            let start = clock;
            clock += rng.ms(50, 8_000);
            c.time = Some(CallTime {
                start: Some(start),
                end: Some(clock),
            });
        }
        calls.push(c);
    }
    let after = base.session.calls.len() - at;
    if goes_on {
        let shift = base.session.calls[at..]
            .iter()
            .find_map(Call::start_ms)
            .map_or(0, |s| clock + 5_000 - s);
        for c in &base.session.calls[at..] {
            let mut c = c.clone();
            if let Some(t) = c.time.as_mut() {
                t.start = t.start.map(|s| s + shift);
                t.end = t.end.map(|e| e + shift);
            }
            calls.push(c);
        }
    }
    let mut session = base.session.clone();
    session.id = id;
    session.label = Some(Label::MustFlag);
    session.note = Some(format!(
        "{} ({}): spliced into {} after call {at}: {}; {len} calls{}",
        kind.as_str(),
        base.source,
        base.session.id,
        looped.note,
        if goes_on {
            format!(", then the run goes on ({after} calls)")
        } else {
            ", and the session ends in the loop".to_owned()
        }
    ));
    session.calls = calls;
    session
}

impl Base<'_> {
    fn source_prefix(&self) -> &'static str {
        if self.source == "real" { "real" } else { "gen" }
    }
}

fn serial_id(base: &Base<'_>, serial: usize) -> String {
    if base.source == "real" {
        format!("{}-{serial}", base.short)
    } else {
        format!("{serial:03}")
    }
}

/// The whole dev set from the converted real runs.
pub fn generate(real: &[Converted]) -> SessionFile {
    let repos = repos();
    let healthy: Vec<Session> = (0..HEALTHY_RUNS).map(|i| healthy_run(i, &repos)).collect();
    let repo_of = |s: &Session| {
        repos
            .iter()
            .find(|r| s.directory.as_deref() == Some(r.dir.as_str()))
    };
    let mut sessions: Vec<Session> = real.iter().map(|c| c.session.clone()).collect();
    sessions.extend(healthy.iter().cloned());
    let mut index = sessions.len() as i64;
    for kind in Kind::LOOPS {
        // Generated bases: a fixed, evenly spread choice of healthy runs per kind.
        for k in 0..SPLICES_PER_KIND_GENERATED {
            let b =
                (k * HEALTHY_RUNS / SPLICES_PER_KIND_GENERATED + kind as usize * 7) % HEALTHY_RUNS;
            let base = Base {
                session: &healthy[b],
                repo: repo_of(&healthy[b]),
                source: "generated",
                short: String::new(),
            };
            sessions.push(splice(kind, &base, k, index));
            index += 1;
        }
        for r in real.iter().filter(|c| c.healthy) {
            let short = r
                .session
                .id
                .strip_prefix("dev-healthy-real-")
                .unwrap_or(&r.session.id)
                .to_owned();
            for j in 0..SPLICES_PER_KIND_REAL {
                let base = Base {
                    session: &r.session,
                    repo: None,
                    source: "real",
                    short: short.clone(),
                };
                sessions.push(splice(kind, &base, j, index));
                index += 1;
            }
        }
    }
    SessionFile::new(sessions)
}

/// The committed text of a session file (one call per line, as the corpus).
pub fn to_json(file: &SessionFile) -> String {
    corpus::to_json(file)
}

/// Converted runs read back from the committed `real.json` (a healthy run is one labelled
/// `must_not_flag`).
pub fn real_from_file(file: &SessionFile) -> Vec<Converted> {
    file.sessions
        .iter()
        .map(|s| Converted {
            session: s.clone(),
            healthy: s.label == Some(Label::MustNotFlag),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_from_ids() {
        assert_eq!(Kind::of_id("dev-noisy-gen-001"), Some(Kind::Noisy));
        assert_eq!(
            Kind::of_id("dev-healthy-real-oh-ponyc-4595"),
            Some(Kind::Healthy)
        );
        assert_eq!(Kind::of_id("ses_x"), None);
        assert_eq!(Kind::source_of_id("dev-healthy-real-oh-x"), "real");
        assert_eq!(Kind::source_of_id("dev-cycle-gen-003"), "generated");
    }

    #[test]
    fn viewed_paths() {
        let bash = |c: &str| Call::completed("bash", json!({ "command": c }));
        assert_eq!(
            viewed_path(&bash("sed -n '1,80p' src/a.py")).as_deref(),
            Some("src/a.py")
        );
        assert_eq!(
            viewed_path(&bash("nl -ba src/a.py | sed -n 1,8p")).as_deref(),
            Some("src/a.py")
        );
        assert_eq!(
            viewed_path(&bash("cd /p && cat x.md")).as_deref(),
            Some("x.md")
        );
        assert_eq!(viewed_path(&bash("sed -i 's/a/b/' a.py")), None);
        assert_eq!(viewed_path(&bash("pytest -q")), None);
    }
}
