//! The labelled corpus (`fixtures/corpus.json`), generated deterministically.
//!
//! Every session is built from the real opencode 1.18.33 tool shapes (opencode.md section 3):
//! `read {filePath, offset?, limit?}`, `bash {command, description}` with `{output, exit,
//! truncated}`, `edit` with `{diff, filediff}`, `write`, `grep {pattern, path, include}`, `glob`,
//! `task` (child sessions titled `… (@agent subagent)`), `apply_patch` with `{diff, files}`,
//! `todowrite`, `webfetch`. Times are unix milliseconds with think time between calls; a `task`
//! call spans its child's calls. A seeded SplitMix64 draws the "background" calls (reads of other
//! files, searches, housekeeping commands), each used at most once per session so it never adds
//! to a repeated target: only the calls a scenario repeats on purpose can make a signal fire.
//!
//! Each session's `note` says why it has its label; `fixtures/README.md` lists the scenarios.

use detect_core::{Call, CallStatus, Label, Session, SessionFile};
use serde_json::{Map, Value, json};

/// The first session starts here (unix ms); each next one 4 hours later.
const BASE_MS: i64 = 1_796_100_000_000;
const SESSION_GAP_MS: i64 = 4 * 3600 * 1000;

/// SplitMix64: a tiny, well-known deterministic generator.
#[derive(Debug, Clone)]
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn between(&mut self, lo: i64, hi: i64) -> i64 {
        let span = (hi - lo + 1).max(1) as u64;
        lo + (self.next() % span) as i64
    }

    fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = (self.next() % (i as u64 + 1)) as usize;
            items.swap(i, j);
        }
    }
}

/// FNV-1a: a stable per-name number (file lengths do not depend on generation order).
fn fnv(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// A project the sessions work in, with pools of background calls.
#[derive(Debug)]
struct Project {
    dir: &'static str,
    /// (path relative to `dir`, length in lines); basenames are unique.
    files: Vec<(String, u64)>,
    /// (pattern, include)
    greps: Vec<(String, &'static str)>,
    globs: Vec<String>,
    /// (command, description); first two words unique.
    commands: Vec<(String, String)>,
}

const MODULES: [&str; 40] = [
    "cart",
    "orders",
    "payments",
    "invoice",
    "tax",
    "shipping",
    "catalog",
    "pricing",
    "discount",
    "inventory",
    "customer",
    "accounts",
    "auth",
    "tokens",
    "audit",
    "report",
    "exporter",
    "importer",
    "search",
    "reviews",
    "ratings",
    "wishlist",
    "coupons",
    "refunds",
    "currency",
    "locale",
    "emails",
    "sms",
    "webhooks",
    "queue",
    "worker",
    "cache",
    "throttle",
    "logging_setup",
    "metrics",
    "health",
    "admin",
    "api",
    "routes",
    "serializers",
];

fn camel(word: &str) -> String {
    word.split('_')
        .map(|w| {
            let mut c = w.chars();
            c.next()
                .map(|f| f.to_ascii_uppercase().to_string() + c.as_str())
                .unwrap_or_default()
        })
        .collect()
}

fn length_of(path: &str) -> u64 {
    60 + fnv(path) % 640
}

fn commands(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(c, d)| ((*c).to_owned(), (*d).to_owned()))
        .collect()
}

fn shop() -> Project {
    let mut files = Vec::new();
    let mut greps = Vec::new();
    for m in MODULES {
        for path in [format!("shop/{m}.py"), format!("tests/test_{m}.py")] {
            files.push((path.clone(), length_of(&path)));
        }
        greps.push((format!("def apply_{m}"), "*.py"));
        greps.push((format!("class {}Error", camel(m)), "*.py"));
    }
    Project {
        dir: "/home/dev/shop",
        files,
        greps,
        globs: [
            "shop/**/*.py",
            "tests/**/test_*.py",
            "**/*.toml",
            "**/conftest.py",
            "shop/migrations/*.py",
            "docs/**/*.md",
            "**/*.cfg",
            "scripts/*.sh",
            "**/*.json",
            "templates/**/*.html",
        ]
        .map(str::to_owned)
        .to_vec(),
        commands: commands(&[
            ("git status", "Show working tree status"),
            ("git diff --stat", "Show changed files"),
            ("git log --oneline -12", "Recent commits"),
            ("git show --stat HEAD", "Last commit"),
            ("git branch --show-current", "Current branch"),
            ("ls -la shop", "List the package"),
            ("wc -l shop/*.py", "Count lines"),
            ("cat pyproject.toml", "Show project config"),
            ("head -40 README.md", "Read the README"),
            ("python --version", "Python version"),
            ("pip show django", "Django version"),
            ("tree -L 2 shop", "Package layout"),
        ]),
    }
}

fn ledger() -> Project {
    let mut files = Vec::new();
    let mut greps = Vec::new();
    for m in MODULES {
        for path in [format!("src/{m}.rs"), format!("tests/it_{m}.rs")] {
            files.push((path.clone(), length_of(&path)));
        }
        greps.push((format!("fn {m}_"), "*.rs"));
        greps.push((format!("struct {}", camel(m)), "*.rs"));
    }
    Project {
        dir: "/home/dev/ledger",
        files,
        greps,
        globs: [
            "src/**/*.rs",
            "tests/**/*.rs",
            "**/Cargo.toml",
            "benches/*.rs",
            "migrations/*.sql",
            "docs/**/*.md",
            "examples/*.rs",
            ".github/workflows/*.yml",
            "**/*.snap",
            "crates/*/src/lib.rs",
        ]
        .map(str::to_owned)
        .to_vec(),
        commands: commands(&[
            ("git status", "Show working tree status"),
            ("git diff --stat", "Show changed files"),
            ("git log --oneline -12", "Recent commits"),
            ("git show --stat HEAD", "Last commit"),
            ("git branch --show-current", "Current branch"),
            ("ls -la src", "List sources"),
            ("wc -l src/*.rs", "Count lines"),
            ("cat Cargo.toml", "Show the manifest"),
            ("cargo tree -d", "Duplicate dependencies"),
            ("rustc --version", "Compiler version"),
            (
                "cargo metadata --format-version 1 --no-deps",
                "Workspace metadata",
            ),
            ("head -40 README.md", "Read the README"),
        ]),
    }
}

fn webapp() -> Project {
    let mut files = Vec::new();
    let mut greps = Vec::new();
    for m in MODULES {
        for path in [
            format!("src/components/{}.tsx", camel(m)),
            format!("src/lib/{m}.ts"),
        ] {
            files.push((path.clone(), length_of(&path)));
        }
        greps.push((format!("export function use{}", camel(m)), "*.ts"));
        greps.push((format!("<{}Panel", camel(m)), "*.tsx"));
    }
    Project {
        dir: "/home/dev/webapp",
        files,
        greps,
        globs: [
            "src/**/*.tsx",
            "src/**/*.test.ts",
            "**/package.json",
            "src/styles/*.css",
            "public/**/*.svg",
            "docs/**/*.md",
            "**/tsconfig*.json",
            "e2e/*.spec.ts",
            "src/i18n/*.json",
            ".storybook/*.ts",
        ]
        .map(str::to_owned)
        .to_vec(),
        commands: commands(&[
            ("git status", "Show working tree status"),
            ("git diff --stat", "Show changed files"),
            ("git log --oneline -12", "Recent commits"),
            ("git show --stat HEAD", "Last commit"),
            ("git branch --show-current", "Current branch"),
            ("ls -la src", "List sources"),
            ("wc -l src/lib/*.ts", "Count lines"),
            ("cat package.json", "Show the manifest"),
            ("node --version", "Node version"),
            ("npm ls react", "React version"),
            ("head -40 README.md", "Read the README"),
            ("npx tsc --noEmit", "Type-check"),
        ]),
    }
}

/// Positions of `count` calls spread evenly over the first `within` calls.
fn spread(count: usize, within: usize) -> Vec<usize> {
    (0..count).map(|j| j * within / count).collect()
}

/// A session being built: calls with times, background pools, child sessions.
struct Builder<'p> {
    session: Session,
    project: &'p Project,
    rng: Rng,
    now: i64,
    files: Vec<usize>,
    greps: Vec<usize>,
    globs: Vec<usize>,
    commands: Vec<usize>,
    /// Report file lengths in the reads' metadata (`total_lines`, as the adapter extracts it from
    /// opencode's "total N lines" note) instead of the session's `line_counts`.
    lengths_in_metadata: bool,
    children: Vec<Session>,
}

struct Meta<'a> {
    id: &'a str,
    title: &'a str,
    agent: Option<&'a str>,
    label: Label,
    note: &'a str,
}

impl<'p> Builder<'p> {
    fn new(project: &'p Project, meta: &Meta<'_>, start_ms: i64) -> Self {
        let mut rng = Rng(fnv(meta.id));
        let mut pool = |n: usize| {
            let mut v: Vec<usize> = (0..n).collect();
            rng.shuffle(&mut v);
            v
        };
        let files = pool(project.files.len());
        let greps = pool(project.greps.len());
        let globs = pool(project.globs.len());
        let commands = pool(project.commands.len());
        let mut session = Session::new(meta.id);
        session.title = Some(meta.title.to_owned());
        session.agent = meta.agent.map(str::to_owned);
        session.directory = Some(project.dir.to_owned());
        session.label = Some(meta.label);
        session.note = Some(meta.note.to_owned());
        Self {
            session,
            project,
            rng,
            now: start_ms,
            files,
            greps,
            globs,
            commands,
            lengths_in_metadata: false,
            children: Vec::new(),
        }
    }

    fn abs(&self, rel: &str) -> String {
        if rel == "." {
            self.project.dir.to_owned()
        } else if rel.starts_with('/') {
            rel.to_owned()
        } else {
            format!("{}/{rel}", self.project.dir)
        }
    }

    /// Think, then run for a while: the next call's (start, end).
    fn slot(&mut self, min_ms: i64, max_ms: i64) -> (i64, i64) {
        self.now += self.rng.between(1_500, 9_000);
        let start = self.now;
        self.now += self.rng.between(min_ms, max_ms);
        (start, self.now)
    }

    fn push(
        &mut self,
        tool: &str,
        input: Value,
        status: CallStatus,
        metadata: Value,
        time: (i64, i64),
    ) {
        self.session.calls.push(
            Call::completed(tool, input)
                .with_status(status)
                .with_metadata(metadata)
                .with_time(time.0, time.1),
        );
    }

    fn read(&mut self, rel: &str, lines: u64, offset: Option<u64>, limit: Option<u64>) {
        let path = self.abs(rel);
        let mut input = Map::new();
        input.insert("filePath".into(), json!(path));
        if let Some(o) = offset {
            input.insert("offset".into(), json!(o));
        }
        if let Some(l) = limit {
            input.insert("limit".into(), json!(l));
        }
        let start_line = offset.unwrap_or(1);
        let shown = limit
            .unwrap_or(2000)
            .min((lines + 1).saturating_sub(start_line));
        let mut meta = json!({
            "preview": format!("{}: line {start_line} ff.", rel.rsplit('/').next().unwrap_or(rel)),
            "truncated": start_line + shown <= lines,
            "loaded": [],
        });
        if self.lengths_in_metadata {
            meta["total_lines"] = json!(lines);
        } else {
            self.session.line_counts.insert(path, lines);
        }
        let t = self.slot(20, 250);
        self.push("read", Value::Object(input), CallStatus::Completed, meta, t);
    }

    fn bash_timed(
        &mut self,
        command: &str,
        description: &str,
        exit: Option<i64>,
        output: &str,
        run: (i64, i64),
    ) {
        let t = self.slot(run.0, run.1);
        self.push(
            "bash",
            json!({"command": command, "description": description}),
            CallStatus::Completed,
            json!({"output": output, "exit": exit, "truncated": false}),
            t,
        );
    }

    fn bash(&mut self, command: &str, description: &str, exit: i64, output: &str) {
        self.bash_timed(command, description, Some(exit), output, (200, 4_000));
    }

    fn edit(&mut self, rel: &str, old: &str, new: &str) {
        let path = self.abs(rel);
        let patch = format!(
            "Index: {path}\n===================================================================\n--- {path}\n+++ {path}\n@@ -1,1 +1,1 @@\n-{old}\n+{new}\n"
        );
        let t = self.slot(80, 400);
        self.push(
            "edit",
            json!({"filePath": path, "oldString": old, "newString": new}),
            CallStatus::Completed,
            json!({
                "diagnostics": {},
                "diff": patch,
                "filediff": {"file": path, "patch": patch, "additions": 1, "deletions": 1},
            }),
            t,
        );
    }

    /// An edit opencode refused (`oldString` not found): status `error`, nothing changed.
    fn edit_failed(&mut self, rel: &str, old: &str, new: &str) {
        let path = self.abs(rel);
        let t = self.slot(30, 120);
        self.push(
            "edit",
            json!({"filePath": path, "oldString": old, "newString": new}),
            CallStatus::Error,
            Value::Null,
            t,
        );
    }

    fn write(&mut self, rel: &str, content: &str, exists: bool) {
        let path = self.abs(rel);
        let t = self.slot(60, 300);
        self.push(
            "write",
            json!({"filePath": path, "content": content}),
            CallStatus::Completed,
            json!({"diagnostics": {}, "filepath": path, "exists": exists}),
            t,
        );
    }

    fn grep(&mut self, pattern: &str, dir: &str, include: Option<&str>, matches: u64) {
        let mut input = json!({"pattern": pattern, "path": self.abs(dir)});
        if let Some(inc) = include {
            input["include"] = json!(inc);
        }
        let t = self.slot(60, 700);
        self.push(
            "grep",
            input,
            CallStatus::Completed,
            json!({"matches": matches, "truncated": false}),
            t,
        );
    }

    fn glob(&mut self, pattern: &str, dir: &str, count: u64) {
        let input = json!({"pattern": pattern, "path": self.abs(dir)});
        let t = self.slot(40, 400);
        self.push(
            "glob",
            input,
            CallStatus::Completed,
            json!({"count": count, "truncated": false}),
            t,
        );
    }

    /// gpt-5 style: one patch over several files, `(path, additions, deletions)`.
    fn apply_patch(&mut self, changes: &[(&str, u64, u64)]) {
        let mut text = String::from("*** Begin Patch\n");
        let mut diff = String::new();
        let mut files = Vec::new();
        for (rel, add, del) in changes {
            let path = self.abs(rel);
            text.push_str(&format!(
                "*** Update File: {rel}\n@@\n-old line\n+new line\n"
            ));
            let patch = format!(
                "Index: {path}\n--- {path}\n+++ {path}\n@@ -1 +1 @@\n-old line\n+new line\n"
            );
            diff.push_str(&patch);
            files.push(json!({
                "filePath": path, "relativePath": rel, "type": "update",
                "patch": patch, "additions": add, "deletions": del,
            }));
        }
        text.push_str("*** End Patch");
        let t = self.slot(100, 500);
        self.push(
            "apply_patch",
            json!({"patchText": text}),
            CallStatus::Completed,
            json!({"diff": diff, "files": files, "diagnostics": {}}),
            t,
        );
    }

    fn todowrite(&mut self, todos: &[(&str, &str)]) {
        let list: Vec<Value> = todos
            .iter()
            .map(|(content, status)| json!({"content": content, "status": status, "priority": "high"}))
            .collect();
        let t = self.slot(20, 80);
        self.push(
            "todowrite",
            json!({"todos": list}),
            CallStatus::Completed,
            json!({"todos": list}),
            t,
        );
    }

    fn webfetch(&mut self, url: &str) {
        let t = self.slot(400, 2_500);
        self.push(
            "webfetch",
            json!({"url": url, "format": "markdown"}),
            CallStatus::Completed,
            json!({}),
            t,
        );
    }

    /// A `task` call whose child session is built by `body`, inside the call's time span.
    fn task(
        &mut self,
        description: &str,
        subagent: &str,
        child: &Meta<'_>,
        body: impl FnOnce(&mut Builder<'p>),
    ) {
        let (start, _) = self.slot(0, 0);
        let mut b = Builder::new(self.project, child, start + 400);
        b.session.parent_id = Some(self.session.id.clone());
        body(&mut b);
        self.now = b.now + 600;
        let child_id = b.session.id.clone();
        let mut sessions = b.finish();
        self.children.append(&mut sessions);
        self.push(
            "task",
            json!({
                "description": description,
                "prompt": format!("{description}. Report what you find."),
                "subagent_type": subagent,
            }),
            CallStatus::Completed,
            json!({
                "parentSessionId": self.session.id,
                "sessionId": child_id,
                "model": {"modelID": "claude-sonnet-4-5", "providerID": "anthropic"},
            }),
            (start, self.now),
        );
    }

    /// One background call nobody repeats: a read of another file, a search, a housekeeping
    /// command.
    fn filler(&mut self) {
        let roll = self.rng.between(0, 99);
        let order: [u8; 4] = match roll {
            0..=54 => [0, 1, 2, 3],
            55..=79 => [1, 0, 2, 3],
            80..=87 => [2, 0, 1, 3],
            _ => [3, 0, 1, 2],
        };
        for kind in order {
            match kind {
                0 => {
                    if let Some(i) = self.files.pop() {
                        let (rel, lines) = self.project.files[i].clone();
                        self.read(&rel, lines, None, None);
                        return;
                    }
                }
                1 => {
                    if let Some(i) = self.greps.pop() {
                        let (pattern, include) = self.project.greps[i].clone();
                        let n = fnv(&pattern) % 9;
                        self.grep(&pattern, ".", Some(include), n);
                        return;
                    }
                }
                2 => {
                    if let Some(i) = self.globs.pop() {
                        let pattern = self.project.globs[i].clone();
                        let n = 1 + fnv(&pattern) % 40;
                        self.glob(&pattern, ".", n);
                        return;
                    }
                }
                _ => {
                    if let Some(i) = self.commands.pop() {
                        let (command, description) = self.project.commands[i].clone();
                        self.bash(&command, &description, 0, "ok");
                        return;
                    }
                }
            }
        }
        panic!(
            "corpus generator: background pools exhausted in {}",
            self.session.id
        );
    }

    fn fill(&mut self, n: usize) {
        for _ in 0..n {
            self.filler();
        }
    }

    /// The session, then its descendants.
    fn finish(self) -> Vec<Session> {
        let mut out = vec![self.session];
        out.extend(self.children);
        out
    }
}

const FAIL: &str = "FAILED tests/test_checkout.py::test_total_with_tax - assert Decimal('10.71') == Decimal('10.70')\n1 failed, 23 passed";
const CARGO_FAIL: &str =
    "test balance::tests::rounding ... FAILED\ntest result: FAILED. 41 passed; 1 failed";
const CARGO_OK: &str = "test result: ok. 42 passed; 0 failed";
const PY_OK: &str = "24 passed in 1.92s";

fn meta<'a>(
    id: &'a str,
    title: &'a str,
    agent: Option<&'a str>,
    label: Label,
    note: &'a str,
) -> Meta<'a> {
    Meta {
        id,
        title,
        agent,
        label,
        note,
    }
}

use Label::{MustFlag, MustNotFlag};

/// Each scenario builds its sessions (a tree's sessions together) from a start time.
type Scenario = fn(i64) -> Vec<Session>;

/// Every scenario, in corpus order.
const SCENARIOS: &[Scenario] = &[
    // Each signal firing alone.
    dup_alone,
    top_alone,
    slow_alone,
    coverage_alone,
    coverage_exactly_four,
    explore_top_eight,
    // Near misses, just under a threshold.
    dup_exactly_a_quarter,
    top_eleven,
    slow_fourteen,
    coverage_three_point_nine,
    explore_top_seven,
    build_top_eight,
    under_min_calls,
    // Read-only by title alone.
    librarian_by_title,
    // Trees.
    tree_looping_child,
    tree_protected_parent,
    tree_three_levels,
    tree_parent_loops_after_child_landed,
    tree_oracle_child,
    // Rescued, or not.
    rescued_by_edit,
    rescued_by_commit,
    rescued_by_apply_patch,
    rescued_by_write,
    rescued_too_late,
    failed_commits,
    failed_edits,
    hung_commit_hook,
    // Classic loops.
    config_loop,
    doom_loop_parallel_reads,
    bash_spellings_loop,
    description_noise_loop,
    grep_churn,
    loop_after_real_work,
    todo_churn,
    // Traps other detectors fall into.
    poll_release_build,
    paging_big_log,
    paging_with_fixes,
    batch_mod_rs,
    batch_init_py_apply_patch,
    tests_between_edits,
    tdd_cycles,
    steady_review,
    long_productive,
];

/// The whole corpus.
pub fn generate() -> SessionFile {
    let sessions = SCENARIOS
        .iter()
        .enumerate()
        .flat_map(|(i, scenario)| scenario(BASE_MS + SESSION_GAP_MS * i as i64))
        .collect();
    SessionFile::new(sessions)
}

/// The corpus as written to disk: pretty JSON with each call on one line, so that a diff of the
/// corpus shows which calls changed and the file stays small.
pub fn to_json(file: &SessionFile) -> String {
    let compact = |v: &Value| serde_json::to_string(v).unwrap_or_default();
    let mut out = String::from("{\n");
    out.push_str(&format!(
        "  \"format\": {},\n",
        compact(&json!(file.format))
    ));
    out.push_str("  \"sessions\": [\n");
    for (i, session) in file.sessions.iter().enumerate() {
        out.push_str("    {\n");
        let mut fields = vec![
            ("id", json!(session.id)),
            ("parent_id", json!(session.parent_id)),
        ];
        let optional = [
            ("title", &session.title),
            ("agent", &session.agent),
            ("directory", &session.directory),
        ];
        for (key, value) in optional {
            if let Some(v) = value {
                fields.push((key, json!(v)));
            }
        }
        if let Some(label) = session.label {
            fields.push(("label", json!(label.as_str())));
        }
        if let Some(note) = &session.note {
            fields.push(("note", json!(note)));
        }
        for (key, value) in &fields {
            out.push_str(&format!("      \"{key}\": {},\n", compact(value)));
        }
        if !session.line_counts.is_empty() {
            out.push_str("      \"line_counts\": {\n");
            let n = session.line_counts.len();
            for (j, (path, lines)) in session.line_counts.iter().enumerate() {
                let comma = if j + 1 < n { "," } else { "" };
                out.push_str(&format!(
                    "        {}: {lines}{comma}\n",
                    compact(&json!(path))
                ));
            }
            out.push_str("      },\n");
        }
        let calls: Vec<String> = session
            .calls
            .iter()
            .map(|c| serde_json::to_string(c).unwrap_or_default())
            .collect();
        out.push_str("      \"calls\": [\n");
        for (j, call) in calls.iter().enumerate() {
            let comma = if j + 1 < calls.len() { "," } else { "" };
            out.push_str(&format!("        {call}{comma}\n"));
        }
        out.push_str("      ]\n");
        let comma = if i + 1 < file.sessions.len() { "," } else { "" };
        out.push_str(&format!("    }}{comma}\n"));
    }
    out.push_str("  ]\n}\n");
    out
}

/// Whether `text` holds the same corpus as `file` (as JSON values: key order and whitespace do
/// not matter, so serde_json features cannot make a fresh corpus look stale).
pub fn same_corpus(text: &str, file: &SessionFile) -> bool {
    let Ok(on_disk) = serde_json::from_str::<Value>(text) else {
        return false;
    };
    serde_json::to_value(file).is_ok_and(|v| v == on_disk)
}

// ---------------------------------------------------------------------------------------------
// Each signal firing alone.

fn dup_alone(t: i64) -> Vec<Session> {
    let p = ledger();
    let mut b = Builder::new(
        &p,
        &meta(
            "ses_dup_alone",
            "Why does the release build fail on CI?",
            Some("build"),
            MustFlag,
            "dup alone: reruns the identical `cargo build 2>&1 | tail -40` 11 times in its first 40 calls without editing anything (11/40 = 0.275 > 0.25); that target stays at 11 < 12 and the repeat count at 11 < 15, and no file is reread",
        ),
        t,
    );
    let at = spread(11, 40);
    for i in 0..42 {
        if at.contains(&i) {
            b.bash_timed(
                "cargo build 2>&1 | tail -40",
                "Build and show the errors",
                Some(101),
                "error[E0308]: mismatched types\n  --> src/balance.rs:88:17",
                (8_000, 30_000),
            );
        } else {
            b.filler();
        }
    }
    b.finish()
}

fn top_alone(t: i64) -> Vec<Session> {
    let p = shop();
    let mut b = Builder::new(
        &p,
        &meta(
            "ses_top_alone",
            "Figure out how quotes round in EUR",
            Some("build"),
            MustFlag,
            "top alone: 13 different `python -c` probes of the pricing code and no edit; every call is new (dup and slow stay at 1) but one target, `bash python -c`, reaches 13 >= 12",
        ),
        t,
    );
    let at = spread(13, 40);
    let mut probe = 0;
    for i in 0..45 {
        if at.contains(&i) {
            probe += 1;
            let cmd = format!(
                "python -c \"from shop.quotes import quote; print(quote({}.{:02}, 'EUR'))\"",
                9 + probe,
                probe * 7 % 100
            );
            b.bash(&cmd, "Try a quote", 0, "Decimal('10.70')");
        } else {
            b.filler();
        }
    }
    b.finish()
}

fn slow_alone(t: i64) -> Vec<Session> {
    let p = shop();
    let mut b = Builder::new(
        &p,
        &meta(
            "ses_slow_alone",
            "Fix the checkout tax test",
            Some("build"),
            MustFlag,
            "slow alone: reruns the identical failing `pytest tests/test_checkout.py -x -q` every 6th call, 15 times over 92 calls, never editing; the window never holds more than 10 of them (top 10 < 12, dup <= 0.17) but the span does: 15 >= 15 at call 90",
        ),
        t,
    );
    for i in 0..92 {
        if i % 6 == 5 {
            b.bash_timed(
                "pytest tests/test_checkout.py -x -q",
                "Run the checkout tests",
                Some(1),
                FAIL,
                (3_000, 9_000),
            );
        } else {
            b.filler();
        }
    }
    b.finish()
}

fn coverage_alone(t: i64) -> Vec<Session> {
    let p = shop();
    let mut b = Builder::new(
        &p,
        &meta(
            "ses_coverage_alone",
            "Understand the discount rules engine",
            Some("build"),
            MustFlag,
            "coverage alone: rereads shop/checkout/rules.py (320 lines) in full twice and in six overlapping 150-line chunks within 40 calls, 1540 lines = 4.8x the file, never editing; only 8 calls target the file (top 8) and the full read repeats only twice",
        ),
        t,
    );
    let at = spread(8, 40);
    let mut reads = [
        (None, None),
        (Some(1), Some(150)),
        (Some(101), Some(150)),
        (Some(151), Some(150)),
        (None, None),
        (Some(61), Some(150)),
        (Some(121), Some(150)),
        (Some(171), Some(150)),
    ]
    .into_iter();
    for i in 0..44 {
        if at.contains(&i)
            && let Some((offset, limit)) = reads.next()
        {
            b.read("shop/checkout/rules.py", 320, offset, limit);
        } else {
            b.filler();
        }
    }
    b.finish()
}

fn coverage_exactly_four(t: i64) -> Vec<Session> {
    let p = ledger();
    let mut b = Builder::new(
        &p,
        &meta(
            "ses_coverage_exactly_four",
            "Check how postings are netted",
            Some("build"),
            MustFlag,
            "coverage at the boundary: reads src/posting.rs (250 lines) in full exactly 4 times in 40 calls and edits nothing; 4.0x >= cover_min 4.0 fires (the design's `>=`, no margin), nothing else comes close",
        ),
        t,
    );
    b.lengths_in_metadata = true;
    let at = spread(4, 40);
    for i in 0..44 {
        if at.contains(&i) {
            b.read("src/posting.rs", 250, None, None);
        } else {
            b.filler();
        }
    }
    b.finish()
}

fn eight_greps(b: &mut Builder<'_>, count: usize, total: usize) {
    let dirs = [
        "src",
        "src/tax",
        "tests",
        "benches",
        "src/report",
        "crates/core",
        "examples",
        "src/exporter",
    ];
    let includes = [
        "*.rs", "*.rs", "*.rs", "*.rs", "*.rs", "*.rs", "*.rs", "*.rs",
    ];
    let at = spread(count, 40);
    let mut next = 0;
    for i in 0..total {
        if at.contains(&i) {
            b.grep("round_half_even", dirs[next], Some(includes[next]), 3);
            next += 1;
        } else {
            b.filler();
        }
    }
}

fn explore_top_eight(t: i64) -> Vec<Session> {
    let p = ledger();
    let mut b = Builder::new(
        &p,
        &meta(
            "ses_explore_top_eight",
            "Map where rounding happens in the ledger",
            Some("explore"),
            MustFlag,
            "read-only agent at its threshold: an explore agent greps for `round_half_even` in 8 different directories within 40 calls; target `grep round_half_even` = 8 >= top_min_ro 8",
        ),
        t,
    );
    eight_greps(&mut b, 8, 42);
    b.finish()
}

// ---------------------------------------------------------------------------------------------
// Near misses.

fn dup_exactly_a_quarter(t: i64) -> Vec<Session> {
    let p = ledger();
    let mut b = Builder::new(
        &p,
        &meta(
            "ses_dup_exactly_a_quarter",
            "Why does the release build fail on CI? (short)",
            Some("build"),
            MustNotFlag,
            "near miss for dup: 10 identical `cargo build 2>&1 | tail -40` in exactly 40 calls is 10/40 = 0.25, and dup fires only above 0.25 (strict)",
        ),
        t,
    );
    let at = spread(10, 40);
    for i in 0..40 {
        if at.contains(&i) {
            b.bash_timed(
                "cargo build 2>&1 | tail -40",
                "Build and show the errors",
                Some(101),
                "error[E0308]: mismatched types",
                (8_000, 30_000),
            );
        } else {
            b.filler();
        }
    }
    b.finish()
}

fn top_eleven(t: i64) -> Vec<Session> {
    let p = shop();
    let mut b = Builder::new(
        &p,
        &meta(
            "ses_top_eleven",
            "Figure out how quotes round in GBP",
            Some("build"),
            MustNotFlag,
            "near miss for top: 11 different `python -c` probes among 50 calls; target `bash python -c` peaks at 11 < 12",
        ),
        t,
    );
    let at = spread(11, 40);
    let mut probe = 0;
    for i in 0..50 {
        if at.contains(&i) {
            probe += 1;
            let cmd = format!(
                "python -c \"from shop.quotes import quote; print(quote({}.{:02}, 'GBP'))\"",
                4 + probe,
                probe * 13 % 100
            );
            b.bash(&cmd, "Try a quote", 0, "Decimal('8.40')");
        } else {
            b.filler();
        }
    }
    b.finish()
}

fn slow_fourteen(t: i64) -> Vec<Session> {
    let p = shop();
    let mut b = Builder::new(
        &p,
        &meta(
            "ses_slow_fourteen",
            "Fix the checkout tax test (second try)",
            Some("build"),
            MustNotFlag,
            "near miss for slow: the identical failing pytest every 6th call, 14 times over 88 calls; 14 < cum_min 15, and the window never holds more than 10",
        ),
        t,
    );
    for i in 0..88 {
        if i % 6 == 5 && i < 84 {
            b.bash_timed(
                "pytest tests/test_checkout.py -x -q",
                "Run the checkout tests",
                Some(1),
                FAIL,
                (3_000, 9_000),
            );
        } else {
            b.filler();
        }
    }
    b.finish()
}

fn coverage_three_point_nine(t: i64) -> Vec<Session> {
    let p = shop();
    let mut b = Builder::new(
        &p,
        &meta(
            "ses_coverage_three_point_nine",
            "Review the settings loader",
            Some("build"),
            MustNotFlag,
            "near miss for coverage: shop/conf/settings.py (300 lines) read in full 3 times plus its first 270 lines once: 1170 lines = 3.9x < 4.0",
        ),
        t,
    );
    let at = spread(4, 40);
    let mut reads = [
        (None, None),
        (None, None),
        (Some(1), Some(270)),
        (None, None),
    ]
    .into_iter();
    for i in 0..45 {
        if at.contains(&i)
            && let Some((offset, limit)) = reads.next()
        {
            b.read("shop/conf/settings.py", 300, offset, limit);
        } else {
            b.filler();
        }
    }
    b.finish()
}

fn explore_top_seven(t: i64) -> Vec<Session> {
    let p = ledger();
    let mut b = Builder::new(
        &p,
        &meta(
            "ses_explore_top_seven",
            "Map where rounding happens in the importer",
            Some("explore"),
            MustNotFlag,
            "near miss for a read-only agent: an explore agent greps for `round_half_even` in 7 directories; 7 < top_min_ro 8",
        ),
        t,
    );
    eight_greps(&mut b, 7, 45);
    b.finish()
}

fn build_top_eight(t: i64) -> Vec<Session> {
    let p = ledger();
    let mut b = Builder::new(
        &p,
        &meta(
            "ses_build_top_eight",
            "Find the rounding helpers before refactoring",
            Some("build"),
            MustNotFlag,
            "the read-only threshold is for read-only agents only: the same 8 greps for `round_half_even` as ses_explore_top_eight, made by the build agent, stay under top_min 12",
        ),
        t,
    );
    eight_greps(&mut b, 8, 42);
    b.finish()
}

fn under_min_calls(t: i64) -> Vec<Session> {
    let p = shop();
    let mut b = Builder::new(
        &p,
        &meta(
            "ses_under_min_calls",
            "Quick look at the checkout bug",
            Some("build"),
            MustNotFlag,
            "known limit, pinned: a dense loop (the same read and the same failing pytest, alternating) that ends after 39 calls, one under min_calls 40, is never evaluated; labelled must_not_flag because the default config must not judge it",
        ),
        t,
    );
    for i in 0..39 {
        if i % 2 == 0 {
            b.read("shop/checkout/views.py", 180, None, None);
        } else {
            b.bash(
                "pytest tests/test_checkout.py -x -q",
                "Run the checkout tests",
                1,
                FAIL,
            );
        }
    }
    b.finish()
}

fn librarian_by_title(t: i64) -> Vec<Session> {
    let p = webapp();
    let mut b = Builder::new(
        &p,
        &meta(
            "ses_librarian_by_title",
            "librarian: collect the SDK retry and backoff docs",
            None,
            MustFlag,
            "read-only by title: no agent name is known, and the title has the word `librarian`; it fetches the same docs page 9 times in 40 calls (top 9 >= top_min_ro 8; dup 0.225 and slow 9 stay under)",
        ),
        t,
    );
    let at = spread(9, 40);
    for i in 0..42 {
        if at.contains(&i) {
            b.webfetch("https://docs.example.com/sdk/guides/retries");
        } else {
            b.filler();
        }
    }
    b.finish()
}

// ---------------------------------------------------------------------------------------------
// Trees.

fn tree_looping_child(t: i64) -> Vec<Session> {
    let p = webapp();
    let mut b = Builder::new(
        &p,
        &meta(
            "ses_tree_loop_parent",
            "Add a mini cart to the header",
            Some("build"),
            MustNotFlag,
            "parent of a looping explore child: its own calls land (edits, a commit) and never reach min_calls; the tree is flagged through the child, this session is not",
        ),
        t,
    );
    b.fill(5);
    b.edit(
        "src/components/Header.tsx",
        "<nav>",
        "<nav>\n  <MiniCart />",
    );
    b.fill(2);
    b.task(
        "Find all uses of useCart",
        "explore",
        &meta(
            "ses_tree_loop_child",
            "Find all uses of useCart (@explore subagent)",
            Some("explore"),
            MustFlag,
            "looping explore child under a landing parent: greps for `useCart(` in 9 different places within 40 calls (top 9 >= top_min_ro 8); the parent's landings never clear a child",
        ),
        |c| {
            let dirs = [
                "src", "src/components", "src/lib", "src/pages", "e2e", "src/hooks", "src/store",
                "src/components/cart", "src/pages/checkout",
            ];
            let at = spread(9, 40);
            let mut next = 0;
            for i in 0..46 {
                if at.contains(&i) {
                    c.grep("useCart(", dirs[next], Some("*.tsx"), 4);
                    next += 1;
                } else {
                    c.filler();
                }
            }
        },
    );
    b.fill(3);
    b.edit(
        "src/components/MiniCart.tsx",
        "return null",
        "return <CartBadge />",
    );
    b.bash(
        "npx vitest run src/components",
        "Run component tests",
        0,
        "Test Files  12 passed (12)",
    );
    b.bash(
        "git commit -am \"feat: mini cart in the header\"",
        "Commit",
        0,
        "[main 4c1e2aa] feat: mini cart in the header",
    );
    b.finish()
}

fn tree_protected_parent(t: i64) -> Vec<Session> {
    let p = shop();
    let mut b = Builder::new(
        &p,
        &meta(
            "ses_tree_protected_parent",
            "Make the settings loader honour env overrides",
            Some("build"),
            MustNotFlag,
            "protected by its child's landing: rereads shop/conf/settings.py and reruns its test 7 times on each side of a task whose general child edits the loader; the child's landing (call 35's span) resets the parent's span, leaving 34 calls < min_calls (judged without the child, the 69 calls would flag)",
        ),
        t,
    );
    for i in 0..34 {
        match i % 5 {
            0 => b.read("shop/conf/settings.py", 300, None, None),
            2 => b.bash(
                "pytest tests/test_settings.py -q",
                "Run settings tests",
                1,
                "1 failed, 9 passed",
            ),
            _ => b.filler(),
        }
    }
    b.task(
        "Fix env override precedence in the settings loader",
        "general",
        &meta(
            "ses_tree_protected_child",
            "Fix env override precedence in the settings loader (@general subagent)",
            Some("general"),
            MustNotFlag,
            "the child that lands: reads, two edits and a passing test",
        ),
        |c| {
            c.read("shop/conf/settings.py", 300, None, None);
            c.grep("os.environ", "shop/conf", Some("*.py"), 3);
            c.edit(
                "shop/conf/settings.py",
                "values.update(env)",
                "env.update(values)",
            );
            c.edit("shop/conf/settings.py", "return env", "return values | env");
            c.bash(
                "pytest tests/test_settings.py -q",
                "Run settings tests",
                0,
                "10 passed in 0.41s",
            );
        },
    );
    for i in 0..34 {
        match i % 5 {
            0 => b.read("shop/conf/settings.py", 300, None, None),
            2 => b.bash(
                "pytest tests/test_settings.py -q",
                "Run settings tests",
                0,
                "10 passed in 0.40s",
            ),
            _ => b.filler(),
        }
    }
    b.finish()
}

fn tree_three_levels(t: i64) -> Vec<Session> {
    let p = ledger();
    let mut b = Builder::new(
        &p,
        &meta(
            "ses_tree3_root",
            "Stabilise the ledger-core test suite",
            Some("build"),
            MustNotFlag,
            "protected by a grandchild: reruns `cargo test -p ledger-core` 8 times on each side of a task; the explore child it starts hands the fix to a general grandchild that edits, and a transitive descendant's landing resets the root's span too (without it: 16 identical runs >= cum_min 15)",
        ),
        t,
    );
    for i in 0..32 {
        if i % 4 == 1 {
            b.bash_timed(
                "cargo test -p ledger-core",
                "Run core tests",
                Some(101),
                CARGO_FAIL,
                (6_000, 20_000),
            );
        } else {
            b.filler();
        }
    }
    b.task(
        "Find why the rounding test is flaky",
        "explore",
        &meta(
            "ses_tree3_explore",
            "Find why the rounding test is flaky (@explore subagent)",
            Some("explore"),
            MustNotFlag,
            "middle of the tree: an explore agent reads around for 18 calls, every one different, then delegates the fix",
        ),
        |c| {
            c.fill(18);
            c.task(
                "Fix the rounding mode in balance.rs",
                "general",
                &meta(
                    "ses_tree3_fixer",
                    "Fix the rounding mode in balance.rs (@general subagent)",
                    Some("general"),
                    MustNotFlag,
                    "the grandchild that lands: one edit, one check",
                ),
                |g| {
                    g.read("src/balance.rs", 410, None, None);
                    g.edit("src/balance.rs", "RoundingMode::HalfUp", "RoundingMode::HalfEven");
                    g.bash("cargo check -p ledger-core", "Check", 0, "Finished dev profile");
                },
            );
            c.fill(3);
        },
    );
    for i in 0..32 {
        if i % 4 == 1 {
            b.bash_timed(
                "cargo test -p ledger-core",
                "Run core tests",
                Some(0),
                CARGO_OK,
                (6_000, 20_000),
            );
        } else {
            b.filler();
        }
    }
    b.finish()
}

fn tree_parent_loops_after_child_landed(t: i64) -> Vec<Session> {
    let p = shop();
    let mut b = Builder::new(
        &p,
        &meta(
            "ses_tree_late_parent",
            "Get the checkout suite green",
            Some("build"),
            MustFlag,
            "a child's landing only clears the calls before it: after its child lands an edit, the parent alternates the same read of shop/checkout/views.py and the same failing pytest for 50 calls and is flagged once those reach min_calls",
        ),
        t,
    );
    b.fill(8);
    b.task(
        "Update the tax table",
        "general",
        &meta(
            "ses_tree_late_child",
            "Update the tax table (@general subagent)",
            Some("general"),
            MustNotFlag,
            "the child lands early (an edit of the tax table) and stops",
        ),
        |c| {
            c.read("shop/data/tax_rates.py", 90, None, None);
            c.edit(
                "shop/data/tax_rates.py",
                "'DE': Decimal('0.19')",
                "'DE': Decimal('0.19'),\n    'AT': Decimal('0.20')",
            );
            c.bash(
                "pytest tests/test_tax_rates.py -q",
                "Run tax tests",
                0,
                "6 passed",
            );
        },
    );
    for i in 0..50 {
        match i % 5 {
            0 | 2 => b.read("shop/checkout/views.py", 180, None, None),
            1 | 3 => b.bash(
                "pytest tests/test_checkout.py -x -q",
                "Run the checkout tests",
                1,
                FAIL,
            ),
            _ => b.filler(),
        }
    }
    b.finish()
}

fn tree_oracle_child(t: i64) -> Vec<Session> {
    let p = ledger();
    let mut b = Builder::new(
        &p,
        &meta(
            "ses_tree_oracle_parent",
            "Plan the schema migration for multi-currency",
            Some("build"),
            MustNotFlag,
            "parent of a looping oracle child: it asks for a review, then writes the plan and edits; its own span stays short",
        ),
        t,
    );
    b.fill(4);
    b.task(
        "Review the migration plan",
        "oracle",
        &meta(
            "ses_tree_oracle_child",
            "Review the migration plan (@oracle subagent)",
            None,
            MustFlag,
            "read-only by its title suffix alone (no agent name recorded): the oracle globs `**/migrations/*.sql` under 8 different roots within 40 calls; 8 >= top_min_ro 8",
        ),
        |c| {
            let roots = [".", "crates/core", "crates/api", "crates/cli", "tests", "db", "examples", "vendor"];
            let at = spread(8, 40);
            let mut next = 0;
            for i in 0..44 {
                if at.contains(&i) {
                    c.glob("**/migrations/*.sql", roots[next], 0);
                    next += 1;
                } else {
                    c.filler();
                }
            }
        },
    );
    b.write(
        "docs/multi-currency-migration.md",
        "# Multi-currency migration\n",
        false,
    );
    b.edit(
        "migrations/0007_currency.sql",
        "-- todo",
        "ALTER TABLE entries ADD COLUMN currency TEXT NOT NULL DEFAULT 'EUR';",
    );
    b.bash("cargo test -p ledger-core", "Run core tests", 0, CARGO_OK);
    b.finish()
}

// ---------------------------------------------------------------------------------------------
// Rescues.

/// The loop that rescues interrupt: the same read and the same failing test, with background.
fn checkout_loop(b: &mut Builder<'_>, calls: usize) {
    for i in 0..calls {
        match i % 3 {
            0 => b.read("shop/models/order.py", 240, None, None),
            1 => b.bash(
                "pytest tests/test_orders.py -x -q",
                "Run the order tests",
                1,
                "FAILED tests/test_orders.py::test_total - AssertionError\n1 failed, 17 passed",
            ),
            _ => b.filler(),
        }
    }
}

fn rescued_by_edit(t: i64) -> Vec<Session> {
    let p = shop();
    let mut b = Builder::new(
        &p,
        &meta(
            "ses_rescued_by_edit",
            "Fix the order total test",
            Some("build"),
            MustNotFlag,
            "rescued by an edit: 38 calls circling the same read and the same failing test, then an edit of shop/models/order.py lands at call 39, before any prefix is judged; the 30 calls after it are new work",
        ),
        t,
    );
    checkout_loop(&mut b, 38);
    b.edit(
        "shop/models/order.py",
        "return sum(lines)",
        "return sum(line.total for line in lines)",
    );
    b.bash(
        "pytest tests/test_orders.py -x -q",
        "Run the order tests",
        0,
        "18 passed",
    );
    b.fill(26);
    b.edit(
        "shop/models/order.py",
        "# TODO rounding",
        "# totals are rounded per line",
    );
    b.bash("pytest -q", "Run everything", 0, PY_OK);
    b.bash(
        "git commit -am \"fix: order total sums line totals\"",
        "Commit",
        0,
        "[main 9a1b2c3] fix: order total",
    );
    b.finish()
}

fn rescued_by_commit(t: i64) -> Vec<Session> {
    let p = shop();
    let mut b = Builder::new(
        &p,
        &meta(
            "ses_rescued_by_commit",
            "Rename the legacy price fields",
            Some("build"),
            MustNotFlag,
            "rescued by a commit: edits made through `sed -i` are invisible to the detector, so 38 calls of sed, tests and reads look like circling; the `git add -A && git commit` (exit 0) at call 39 lands and clears the span",
        ),
        t,
    );
    for i in 0..38 {
        match i % 4 {
            0 => {
                let cmd =
                    format!("sed -i 's/price_cents_{i}/amount_cents_{i}/g' shop/models/order.py");
                b.bash(&cmd, "Rename a field", 0, "");
            }
            1 => b.bash(
                "pytest tests/test_orders.py -x -q",
                "Run the order tests",
                1,
                "1 failed, 17 passed",
            ),
            2 => b.read("shop/models/order.py", 240, None, None),
            _ => b.filler(),
        }
    }
    b.bash(
        "git add -A && git commit -m \"refactor: price_cents -> amount_cents\"",
        "Commit the rename",
        0,
        "[main 5d6e7f8] refactor: price_cents -> amount_cents",
    );
    b.fill(22);
    b.bash("pytest -q", "Run everything", 0, PY_OK);
    b.finish()
}

fn rescued_by_apply_patch(t: i64) -> Vec<Session> {
    let p = webapp();
    let mut b = Builder::new(
        &p,
        &meta(
            "ses_rescued_by_apply_patch",
            "Fix the cart store race (gpt-5)",
            Some("build"),
            MustNotFlag,
            "rescued by apply_patch (an OpenAI model has no edit tool): 38 calls of the same read and the same failing vitest, then a patch whose metadata lists changed files lands at call 39",
        ),
        t,
    );
    for i in 0..38 {
        match i % 3 {
            0 => b.read("src/store/cartStore.ts", 210, None, None),
            1 => b.bash(
                "npx vitest run src/store",
                "Run store tests",
                1,
                "FAIL src/store/cartStore.test.ts > adds twice",
            ),
            _ => b.filler(),
        }
    }
    b.apply_patch(&[
        ("src/store/cartStore.ts", 6, 2),
        ("src/store/cartStore.test.ts", 12, 0),
    ]);
    b.bash(
        "npx vitest run src/store",
        "Run store tests",
        0,
        "Test Files  3 passed (3)",
    );
    b.fill(20);
    b.apply_patch(&[("src/store/index.ts", 1, 1)]);
    b.finish()
}

fn rescued_by_write(t: i64) -> Vec<Session> {
    let p = ledger();
    let mut b = Builder::new(
        &p,
        &meta(
            "ses_rescued_by_write",
            "Add a rounding module",
            Some("build"),
            MustNotFlag,
            "rescued by a write: 38 calls of the same read and the same failing cargo test, then a completed write of a new file lands (real opencode records no diff for write; completing is enough)",
        ),
        t,
    );
    for i in 0..38 {
        match i % 3 {
            0 => b.read("src/balance.rs", 410, None, None),
            1 => b.bash(
                "cargo test -p ledger-core balance",
                "Run balance tests",
                101,
                CARGO_FAIL,
            ),
            _ => b.filler(),
        }
    }
    b.write(
        "src/rounding.rs",
        "pub fn round_half_even(x: i64) -> i64 { x }\n",
        false,
    );
    b.fill(18);
    b.bash("cargo test -p ledger-core", "Run core tests", 0, CARGO_OK);
    b.finish()
}

fn rescued_too_late(t: i64) -> Vec<Session> {
    let p = shop();
    let mut b = Builder::new(
        &p,
        &meta(
            "ses_rescued_too_late",
            "Fix the order total test (long way round)",
            Some("build"),
            MustFlag,
            "rescued too late: the same read and failing test for 50 calls before the edit that fixes it; the live watchdog sees the loop at call 40 (the alert resolves after the edit)",
        ),
        t,
    );
    checkout_loop(&mut b, 50);
    b.edit(
        "shop/models/order.py",
        "return sum(lines)",
        "return sum(line.total for line in lines)",
    );
    b.bash(
        "pytest tests/test_orders.py -x -q",
        "Run the order tests",
        0,
        "18 passed",
    );
    b.fill(15);
    b.finish()
}

fn failed_commits(t: i64) -> Vec<Session> {
    let p = ledger();
    let mut b = Builder::new(
        &p,
        &meta(
            "ses_failed_commits",
            "Commit the balance fix",
            Some("build"),
            MustFlag,
            "a failed commit is no landing: `git commit -am` exits 1 (nothing added) 13 times in 45 calls while the agent re-checks formatting; target `bash git commit` 13 >= 12 and dup 13/40 = 0.325 > 0.25",
        ),
        t,
    );
    let at = spread(13, 40);
    for i in 0..45 {
        if at.contains(&i) {
            b.bash(
                "git commit -am \"fix: balance rounding\"",
                "Commit the fix",
                1,
                "On branch main\nnothing added to commit but untracked files present",
            );
        } else {
            b.filler();
        }
    }
    b.finish()
}

fn failed_edits(t: i64) -> Vec<Session> {
    let p = shop();
    let mut b = Builder::new(
        &p,
        &meta(
            "ses_failed_edits",
            "Add a discount field to the order model",
            Some("build"),
            MustFlag,
            "failed edits are no landing: 22 rounds of reading shop/models/order.py and an edit opencode rejects (oldString not found, status error); every signal fires",
        ),
        t,
    );
    for i in 0..22 {
        b.read("shop/models/order.py", 240, None, None);
        b.edit_failed(
            "shop/models/order.py",
            &format!("    total = models.DecimalField(max_digits={})", 10 + i),
            "    total = models.DecimalField(max_digits=12)\n    discount = models.DecimalField(max_digits=12)",
        );
    }
    b.finish()
}

fn hung_commit_hook(t: i64) -> Vec<Session> {
    let p = ledger();
    let mut b = Builder::new(
        &p,
        &meta(
            "ses_hung_commit_hook",
            "Commit after the pre-commit hook",
            Some("build"),
            MustFlag,
            "a commit without exit code is no landing: the pre-commit hook hangs and bash kills `git commit` at its timeout (metadata.exit null) 5 times; between attempts the same `cargo test` runs 12 times (top 12, dup 0.3)",
        ),
        t,
    );
    let tests = spread(12, 40);
    for i in 0..46 {
        if tests.contains(&i) {
            b.bash("cargo test", "Run tests", 0, CARGO_OK);
        } else if i % 7 == 3 {
            b.bash_timed(
                "git commit -m \"chore: bump deps\"",
                "Commit",
                None,
                "Running pre-commit hooks...",
                (120_000, 120_000),
            );
        } else {
            b.filler();
        }
    }
    b.finish()
}

// ---------------------------------------------------------------------------------------------
// Classic loops.

fn config_loop(t: i64) -> Vec<Session> {
    let p = shop();
    let mut b = Builder::new(
        &p,
        &meta(
            "ses_config_loop",
            "Fix the flaky config test",
            Some("build"),
            MustFlag,
            "the classic: rereads shop/config.py and reruns one test 30 times each, never editing; every signal fires",
        ),
        t,
    );
    for _ in 0..30 {
        b.bash(
            "cd /home/dev/shop && pytest -x tests/test_config.py",
            "Run the config test",
            1,
            "FAILED tests/test_config.py::test_env_override",
        );
        b.read("shop/config.py", 212, Some(1), Some(2000));
    }
    b.finish()
}

fn doom_loop_parallel_reads(t: i64) -> Vec<Session> {
    let p = ledger();
    let mut b = Builder::new(
        &p,
        &meta(
            "ses_doom_loop_parallel",
            "Make the parser accept trailing commas",
            Some("build"),
            MustFlag,
            "opencode's own doom-loop shape, repeated across steps: each step reads src/parser.rs three times in parallel and runs the same failing test; opencode asks once per step, the loop goes on for 15 steps",
        ),
        t,
    );
    b.lengths_in_metadata = true;
    for _ in 0..15 {
        let (start, _) = b.slot(0, 0);
        for k in 0..3 {
            b.push(
                "read",
                json!({"filePath": "/home/dev/ledger/src/parser.rs"}),
                CallStatus::Completed,
                json!({"preview": "parser.rs", "truncated": false, "loaded": [], "total_lines": 530}),
                (start + k, start + 120 + 15 * k),
            );
        }
        b.bash(
            "cargo test -p ledger-core parser",
            "Run parser tests",
            101,
            CARGO_FAIL,
        );
    }
    b.finish()
}

fn bash_spellings_loop(t: i64) -> Vec<Session> {
    let p = ledger();
    let mut b = Builder::new(
        &p,
        &meta(
            "ses_bash_spellings_loop",
            "Debug the balance test",
            Some("build"),
            MustFlag,
            "one command in many spellings: `cd DIR &&`, `VAR=value`, `export VAR=...;`, a trailing comment, a line continuation and a `cd` line all normalise to `cargo test -p ledger-core balance`; 16 identical runs in 45 calls (slow 16, dup up to 0.375)",
        ),
        t,
    );
    let spellings = [
        "cargo test -p ledger-core balance",
        "cd /home/dev/ledger && cargo test -p ledger-core balance",
        "RUST_BACKTRACE=1 cargo test -p ledger-core balance",
        "cargo test -p ledger-core balance  # once more",
        "export RUST_LOG=debug; cargo test -p ledger-core balance",
        "cargo test \\\n  -p ledger-core balance",
        "cd /home/dev/ledger\ncargo test -p ledger-core balance",
        "# rerun with backtraces\nRUST_BACKTRACE=full cargo test -p ledger-core balance",
    ];
    let at = spread(16, 45);
    let mut next = 0;
    for i in 0..45 {
        if at.contains(&i) {
            b.bash(
                spellings[next % spellings.len()],
                "Run the balance test",
                101,
                CARGO_FAIL,
            );
            next += 1;
        } else {
            b.filler();
        }
    }
    b.finish()
}

fn description_noise_loop(t: i64) -> Vec<Session> {
    let p = shop();
    let mut b = Builder::new(
        &p,
        &meta(
            "ses_description_noise_loop",
            "Check the pending migrations",
            Some("build"),
            MustFlag,
            "bash description and timeout are noise: `python manage.py makemigrations --check` 14 times in 40 calls under different descriptions and timeouts is one call (dup 0.35, top 14)",
        ),
        t,
    );
    let descriptions = [
        "Check migrations",
        "Verify no migrations are pending",
        "Check again",
        "Migration check",
    ];
    let at = spread(14, 40);
    let mut next = 0;
    for i in 0..42 {
        if at.contains(&i) {
            let time = b.slot(2_000, 6_000);
            b.push(
                "bash",
                json!({
                    "command": "python manage.py makemigrations --check --dry-run",
                    "description": descriptions[next % descriptions.len()],
                    "timeout": 60_000 * (1 + next % 3),
                }),
                CallStatus::Completed,
                json!({"output": "Migrations for 'orders':\n  0019_auto.py", "exit": 1, "truncated": false}),
                time,
            );
            next += 1;
        } else {
            b.filler();
        }
    }
    b.finish()
}

fn grep_churn(t: i64) -> Vec<Session> {
    let p = webapp();
    let mut b = Builder::new(
        &p,
        &meta(
            "ses_grep_churn",
            "Find where the form submit is wired",
            Some("build"),
            MustFlag,
            "search churn: `handleSubmit` grepped 14 times in 40 calls with shifting paths and includes, 6 of them identical; target `grep handleSubmit` 14 >= 12",
        ),
        t,
    );
    let variants = [
        ("src", Some("*.tsx")),
        ("src", Some("*.ts")),
        ("src/components", None),
        ("src", Some("*.tsx")),
        ("src/pages", Some("*.tsx")),
        ("src", Some("*.{ts,tsx}")),
        ("src", Some("*.tsx")),
    ];
    let at = spread(14, 40);
    let mut next = 0;
    for i in 0..44 {
        if at.contains(&i) {
            let (dir, include) = variants[next % variants.len()];
            b.grep("handleSubmit", dir, include, 2);
            next += 1;
        } else {
            b.filler();
        }
    }
    b.finish()
}

fn loop_after_real_work(t: i64) -> Vec<Session> {
    let p = ledger();
    let mut b = Builder::new(
        &p,
        &meta(
            "ses_loop_after_real_work",
            "Port the exporter to the new API",
            Some("build"),
            MustFlag,
            "productive for 60 calls (an edit every 5th call), then stuck for 46: the same read of src/exporter/csv.rs and the same failing test alternate; the early edits clear nothing after them",
        ),
        t,
    );
    for i in 0..60 {
        if i % 5 == 4 {
            b.edit(
                "src/exporter/csv.rs",
                &format!("old_api_{i}()"),
                &format!("new_api_{i}()"),
            );
        } else if i % 5 == 2 {
            b.bash(
                "cargo check -p ledger-exporter",
                "Check",
                0,
                "Finished dev profile",
            );
        } else {
            b.filler();
        }
    }
    for i in 0..46 {
        match i % 4 {
            0 | 2 => b.read("src/exporter/csv.rs", 380, None, None),
            1 => b.bash(
                "cargo test -p ledger-exporter csv",
                "Run CSV tests",
                101,
                CARGO_FAIL,
            ),
            _ => b.filler(),
        }
    }
    b.finish()
}

fn todo_churn(t: i64) -> Vec<Session> {
    let p = webapp();
    let mut b = Builder::new(
        &p,
        &meta(
            "ses_todo_churn",
            "Plan the checkout redesign",
            Some("build"),
            MustFlag,
            "todo churn: rewrites the same todo list 13 times in 40 calls between unrelated reads and never changes anything (todowrite is its own target: top 13, dup 0.325)",
        ),
        t,
    );
    let todos = [
        ("Audit the checkout components", "in_progress"),
        ("Design the new summary panel", "pending"),
        ("Migrate the payment step", "pending"),
    ];
    let at = spread(13, 40);
    for i in 0..42 {
        if at.contains(&i) {
            b.todowrite(&todos);
        } else {
            b.filler();
        }
    }
    b.finish()
}

// ---------------------------------------------------------------------------------------------
// Traps other detectors fall into.

fn poll_release_build(t: i64) -> Vec<Session> {
    let p = ledger();
    let mut b = Builder::new(
        &p,
        &meta(
            "ses_poll_release_build",
            "Cut the 0.4.0 release",
            Some("build"),
            MustNotFlag,
            "polling a long job: starts a 15-minute release build and checks its log with the same `sleep 45 && tail -n 5` 13 times, one poll every 6 calls while it writes the changelog notes; a repeat counter would call this a loop, but the window never holds more than 10 polls (top 10, dup <= 0.17) and 13 < cum_min 15",
        ),
        t,
    );
    b.edit("Cargo.toml", "version = \"0.3.9\"", "version = \"0.4.0\"");
    b.bash(
        "nohup cargo build --release > /tmp/release.log 2>&1 &",
        "Start the release build",
        0,
        "",
    );
    for i in 0..78 {
        if i % 6 == 5 {
            b.bash_timed(
                "sleep 45 && tail -n 5 /tmp/release.log",
                "Check the build",
                Some(0),
                "   Compiling ledger-core v0.4.0",
                (45_000, 46_000),
            );
        } else {
            b.filler();
        }
    }
    b.bash(
        "ls -la target/release/ledger",
        "Check the binary",
        0,
        "-rwxr-xr-x 1 dev dev 9.1M ledger",
    );
    b.bash(
        "git commit -am \"release: 0.4.0\"",
        "Commit the release",
        0,
        "[main 0a4b0c0] release: 0.4.0",
    );
    b.finish()
}

fn paging_big_log(t: i64) -> Vec<Session> {
    let p = shop();
    let mut b = Builder::new(
        &p,
        &meta(
            "ses_paging_big_log",
            "Find why last night's import dropped orders",
            Some("build"),
            MustNotFlag,
            "paging through a file with new offsets: 11 consecutive 2000-line pages of a 21,400-line import log; each page is a new call and the file is read once (coverage 1.0); 11 pages stay under top_min 12",
        ),
        t,
    );
    let at = spread(11, 40);
    let mut page = 0;
    for i in 0..46 {
        if at.contains(&i) {
            b.read(
                "logs/import-2026-11-02.log",
                21_400,
                Some(1 + 2000 * page),
                Some(2000),
            );
            page += 1;
        } else {
            b.filler();
        }
    }
    b.finish()
}

fn paging_with_fixes(t: i64) -> Vec<Session> {
    let p = shop();
    let mut b = Builder::new(
        &p,
        &meta(
            "ses_paging_with_fixes",
            "Fix the lint errors in the legacy order service",
            Some("build"),
            MustNotFlag,
            "paging and fixing: 21 pages of 150 lines through shop/legacy/order_service.py (3,100 lines), each followed by an edit of that page; every edit lands, so 21 reads of one file never share a span",
        ),
        t,
    );
    b.bash(
        "ruff check shop/legacy/order_service.py --statistics",
        "Lint",
        1,
        "E501 41\nF841 12",
    );
    for page in 0..21u64 {
        b.read(
            "shop/legacy/order_service.py",
            3_100,
            Some(1 + 150 * page),
            Some(150),
        );
        b.edit(
            "shop/legacy/order_service.py",
            &format!("unused_{page} = compute()"),
            "compute()",
        );
        if page % 4 == 3 {
            b.bash(
                "ruff check shop/legacy/order_service.py --statistics",
                "Lint",
                1,
                "E501 20",
            );
        }
    }
    b.bash(
        "git commit -am \"lint: legacy order service\"",
        "Commit",
        0,
        "[main 77aa88b] lint",
    );
    b.finish()
}

fn batch_mod_rs(t: i64) -> Vec<Session> {
    let p = ledger();
    let mut b = Builder::new(
        &p,
        &meta(
            "ses_batch_mod_rs",
            "Re-export the prelude from every module",
            Some("build"),
            MustNotFlag,
            "batch edits across files of the same name: reads and edits 24 different `mod.rs` files; target `read mod.rs` would reach 24 for a detector that ignores landings, but each edit lands",
        ),
        t,
    );
    b.glob("src/**/mod.rs", ".", 24);
    for (i, m) in MODULES.iter().take(24).enumerate() {
        let rel = format!("src/{m}/mod.rs");
        b.read(&rel, 40 + (i as u64 * 7) % 90, None, None);
        b.edit(&rel, "mod tests;", "pub use crate::prelude::*;\nmod tests;");
        if i % 6 == 5 {
            b.bash("cargo check", "Check", 0, "Finished dev profile");
        }
    }
    b.bash("cargo test", "Run tests", 0, CARGO_OK);
    b.finish()
}

fn batch_init_py_apply_patch(t: i64) -> Vec<Session> {
    let p = shop();
    let mut b = Builder::new(
        &p,
        &meta(
            "ses_batch_init_py",
            "Add __all__ to every package (gpt-5)",
            Some("build"),
            MustNotFlag,
            "batch edits across `__init__.py` files with apply_patch (an OpenAI model): 24 different packages, each read then patched; target `read __init__.py` would reach 24 for a detector that ignores landings, but every patch lands",
        ),
        t,
    );
    b.glob("**/__init__.py", "shop", 24);
    for (i, m) in MODULES.iter().skip(10).take(24).enumerate() {
        let rel = format!("shop/{m}/__init__.py");
        b.read(&rel, 3 + i as u64 % 9, None, None);
        b.apply_patch(&[(rel.as_str(), 2, 0)]);
    }
    b.bash("pytest -q", "Run everything", 0, PY_OK);
    b.finish()
}

fn tests_between_edits(t: i64) -> Vec<Session> {
    let p = ledger();
    let mut b = Builder::new(
        &p,
        &meta(
            "ses_tests_between_edits",
            "Replace f64 money with Decimal",
            Some("build"),
            MustNotFlag,
            "repeated test runs between real edits: the identical `cargo test -p ledger-core` 25 times, each after an edit that lands, so no span ever holds more than a few calls",
        ),
        t,
    );
    for i in 0..25 {
        if i % 3 == 0 {
            b.filler();
        }
        b.edit(
            "src/money.rs",
            &format!("amount_{i}: f64"),
            &format!("amount_{i}: Decimal"),
        );
        b.bash_timed(
            "cargo test -p ledger-core",
            "Run core tests",
            Some(if i < 24 { 101 } else { 0 }),
            if i < 24 { CARGO_FAIL } else { CARGO_OK },
            (6_000, 20_000),
        );
    }
    b.bash(
        "git commit -am \"refactor: Decimal money\"",
        "Commit",
        0,
        "[main 3c4d5e6] refactor: Decimal money",
    );
    b.finish()
}

fn tdd_cycles(t: i64) -> Vec<Session> {
    let p = shop();
    let mut b = Builder::new(
        &p,
        &meta(
            "ses_tdd_cycles",
            "Implement gift cards test-first",
            Some("build"),
            MustNotFlag,
            "test-driven cycles: write a test, run it (red), edit the code, run it (green), 12 times over 64 calls; the same pytest runs 24 times, but every cycle lands twice",
        ),
        t,
    );
    b.write("tests/test_gift_cards.py", "import pytest\n", false);
    for i in 0..12 {
        b.edit(
            "tests/test_gift_cards.py",
            &format!("# case {i}"),
            &format!("def test_case_{i}(): ..."),
        );
        b.bash(
            "pytest tests/test_gift_cards.py -q",
            "Run gift card tests",
            1,
            "1 failed",
        );
        b.read("shop/gift_cards.py", 120, None, None);
        b.edit(
            "shop/gift_cards.py",
            &format!("# step {i}"),
            &format!("def step_{i}(): ..."),
        );
        b.bash(
            "pytest tests/test_gift_cards.py -q",
            "Run gift card tests",
            0,
            "passed",
        );
        if i % 4 == 3 {
            b.bash(
                &format!("git commit -am \"gift cards: cases up to {i}\""),
                "Commit",
                0,
                "[main] gift cards",
            );
        }
    }
    b.finish()
}

fn steady_review(t: i64) -> Vec<Session> {
    let p = webapp();
    let mut b = Builder::new(
        &p,
        &meta(
            "ses_steady_review",
            "Review the frontend for accessibility issues",
            Some("plan"),
            MustNotFlag,
            "steady spend, not a loop: 75 calls, every one a different file, search or command, and no landing at all; nothing repeats, so no signal fires however long it runs",
        ),
        t,
    );
    b.fill(75);
    b.finish()
}

fn long_productive(t: i64) -> Vec<Session> {
    let p = ledger();
    let mut b = Builder::new(
        &p,
        &meta(
            "ses_long_productive",
            "Implement multi-currency balances",
            Some("build"),
            MustNotFlag,
            "long and productive: 131 calls in rounds of a few reads, an edit and the same `cargo test -p ledger-core`, with a commit every 5 rounds; 28 identical test runs, none of them in a span longer than a round",
        ),
        t,
    );
    b.lengths_in_metadata = true;
    for round in 0..28 {
        let n = 2 + round % 2;
        b.fill(n);
        b.edit(
            "src/balance.rs",
            &format!("// round {round}"),
            &format!("fn currency_step_{round}() {{}}"),
        );
        b.bash_timed(
            "cargo test -p ledger-core",
            "Run core tests",
            Some(0),
            CARGO_OK,
            (6_000, 20_000),
        );
        if round % 5 == 4 {
            b.bash(
                &format!("git commit -am \"multi-currency: step {round}\""),
                "Commit",
                0,
                "[main] step",
            );
        }
    }
    b.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use detect_core::normalize_bash;
    use std::collections::HashSet;

    #[test]
    fn generation_is_deterministic() {
        assert_eq!(to_json(&generate()), to_json(&generate()));
    }

    #[test]
    fn corpus_has_enough_of_both_labels_and_notes() {
        let file = generate();
        assert!(file.sessions.len() >= 40, "{}", file.sessions.len());
        let flag = file
            .sessions
            .iter()
            .filter(|s| s.label == Some(MustFlag))
            .count();
        assert!(flag >= 15 && file.sessions.len() - flag >= 15);
        let mut ids = HashSet::new();
        for s in &file.sessions {
            assert!(ids.insert(&s.id), "duplicate id {}", s.id);
            assert!(s.note.as_deref().is_some_and(|n| n.len() > 20), "{}", s.id);
            assert!(s.label.is_some(), "{}", s.id);
        }
        // Round trip through the on-disk format.
        let text = to_json(&file);
        assert!(same_corpus(&text, &SessionFile::from_json(&text).unwrap()));
    }

    #[test]
    fn background_pools_never_repeat_a_target() {
        for p in [shop(), ledger(), webapp()] {
            let names: HashSet<&str> = p
                .files
                .iter()
                .map(|(f, _)| f.rsplit('/').next().unwrap_or(f))
                .collect();
            assert_eq!(names.len(), p.files.len(), "{}", p.dir);
            let greps: HashSet<&str> = p.greps.iter().map(|(g, _)| g.as_str()).collect();
            assert_eq!(greps.len(), p.greps.len());
            let heads: HashSet<String> = p
                .commands
                .iter()
                .map(|(c, _)| {
                    normalize_bash(c)
                        .split_whitespace()
                        .take(2)
                        .collect::<Vec<_>>()
                        .join(" ")
                })
                .collect();
            assert_eq!(heads.len(), p.commands.len(), "{}", p.dir);
        }
    }

    #[test]
    fn the_bash_spellings_really_are_one_command() {
        let file = generate();
        let s = file
            .sessions
            .iter()
            .find(|s| s.id == "ses_bash_spellings_loop")
            .unwrap();
        let normalised: HashSet<String> = s
            .calls
            .iter()
            .filter_map(|c| c.input["command"].as_str())
            .filter(|c| c.contains("ledger-core balance"))
            .map(normalize_bash)
            .collect();
        assert_eq!(
            normalised.into_iter().collect::<Vec<_>>(),
            ["cargo test -p ledger-core balance"]
        );
    }

    #[test]
    fn children_run_inside_their_task_call() {
        let file = generate();
        for child in file.sessions.iter().filter(|s| s.parent_id.is_some()) {
            let parent = file
                .sessions
                .iter()
                .find(|s| Some(&s.id) == child.parent_id.as_ref())
                .unwrap();
            let task = parent
                .calls
                .iter()
                .find(|c| c.tool == "task" && c.metadata["sessionId"] == child.id.as_str())
                .unwrap();
            let (start, end) = (task.start_ms().unwrap(), task.end_ms().unwrap());
            for c in &child.calls {
                assert!(
                    c.start_ms().unwrap() > start && c.end_ms().unwrap() < end,
                    "{}",
                    child.id
                );
            }
        }
        // Calls are in time order within a session.
        for s in &file.sessions {
            let starts: Vec<i64> = s.calls.iter().filter_map(|c| c.start_ms()).collect();
            assert!(starts.windows(2).all(|w| w[0] <= w[1]), "{}", s.id);
        }
    }
}
