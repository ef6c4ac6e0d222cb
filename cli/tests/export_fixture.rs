//! `agentwatch export-fixture` and `agentwatch import-export`, run as the real binary.
//!
//! The database is built with opencode 1.18.33's exact schema and `opencode import`-shaped rows;
//! one round trip also runs through a database a real opencode wrote (`opencode import` of the
//! sample exports), `#[ignore = "needs opencode"]` and run by CI with `--include-ignored`.

use agentwatch_opencode::db::testing::{
    create_db, create_db_with_schema, insert_export, lock_exclusively,
};
use agentwatch_testkit::TempDir;
use agentwatch_testkit::opencode::{OpencodeHome, require_binary};
use detect_core::{Label, SessionFile};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

const PARENT: &str = "ses_dd623f63fffee71lHFE8l6hlvY";
const CHILD: &str = "ses_dd6230bdfffe5bR215DEWc1ZCj";
const SAMPLES: [&str; 2] = ["export_fixture_parent.json", "export_fixture_child.json"];

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(format!(
        "{}/../fixtures/opencode/{name}",
        env!("CARGO_MANIFEST_DIR")
    ))
}

fn export_json(name: &str) -> Value {
    serde_json::from_str(&std::fs::read_to_string(fixture(name)).unwrap()).unwrap()
}

/// The sample database with opencode 1.18.33's exact schema and `opencode import`-shaped rows,
/// built once per test run and only read by the tests.
fn sample_db() -> PathBuf {
    static DB: OnceLock<PathBuf> = OnceLock::new();
    DB.get_or_init(|| {
        let root = Path::new(env!("CARGO_TARGET_TMPDIR")).join("aw-export-fixture-db");
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(&root).unwrap();
        let path = root.join("opencode.db");
        create_db(&path).unwrap();
        let dir = root.join("proj").display().to_string();
        for name in SAMPLES {
            insert_export(&path, &export_json(name), &dir).unwrap();
        }
        path
    })
    .clone()
}

/// The same samples imported by a real opencode (`opencode import`) into its own database.
fn opencode_db(tmp: &TempDir) -> PathBuf {
    let home = OpencodeHome::new(require_binary(), &tmp.path.join("opencode-home"));
    for name in SAMPLES {
        home.import(&fixture(name)).unwrap();
    }
    home.db_path()
}

fn agentwatch(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_agentwatch"))
        .args(args)
        .output()
        .expect("run agentwatch")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {}", text(&out.stderr));
}

/// A work tree whose src/lib.rs has 3 lines in the commit and 5 on disk.
fn work_tree(tmp: &TempDir) -> PathBuf {
    let repo = tmp.path.join("repo");
    std::fs::create_dir_all(repo.join("src")).unwrap();
    git(&repo, &["init", "-q"]);
    std::fs::write(
        repo.join("src/lib.rs"),
        "fn add(a: i32, b: i32) -> i32 {\n    a - b\n}\n",
    )
    .unwrap();
    git(&repo, &["add", "src/lib.rs"]);
    git(&repo, &["commit", "-q", "-m", "three lines"]);
    std::fs::write(
        repo.join("src/lib.rs"),
        "// a\n// b\nfn add(a: i32, b: i32) -> i32 {\n    a - b\n}\n",
    )
    .unwrap();
    repo
}

fn write_labels(tmp: &TempDir, labels: &Value) -> PathBuf {
    let path = tmp.path.join("labels.json");
    std::fs::write(&path, labels.to_string()).unwrap();
    path
}

fn verdicts(args: &[&str]) -> Value {
    let out = agentwatch(args);
    assert!(out.status.success(), "{}", text(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

const SENSITIVE: [&str; 8] = [
    "--set",
    "min_calls=3",
    "--set",
    "top_min=3",
    "--set",
    "cum_min=3",
    "--set",
    "window=10",
];

#[test]
fn round_trip_db_to_fixture_to_detect() {
    let tmp = TempDir::new("aw-cli-export");
    round_trip(&tmp, &sample_db());
}

#[test]
#[ignore = "needs opencode (.ci/install-opencode.sh)"]
fn round_trip_through_a_database_opencode_wrote() {
    let tmp = TempDir::new("aw-cli-export-opencode");
    let db = opencode_db(&tmp);
    round_trip(&tmp, &db);
}

fn round_trip(tmp: &TempDir, db: &Path) {
    let repo = work_tree(tmp);
    let labels = write_labels(
        tmp,
        &json!({PARENT: {"label": "must_flag", "note": "three identical failing test runs"}}),
    );
    let out_path = tmp.path.join("fixture.json");
    let out = agentwatch(&[
        "export-fixture",
        "--opencode-db",
        s(db),
        "--labels",
        s(&labels),
        "--out",
        s(&out_path),
        "--commit",
        "HEAD",
        "--repo",
        s(&repo),
    ]);
    assert!(
        out.status.success(),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    assert!(
        text(&out.stdout).contains("2 sessions (1 labelled, 1 descendants)"),
        "{}",
        text(&out.stdout)
    );

    let file = SessionFile::from_json(&std::fs::read_to_string(&out_path).unwrap()).unwrap();
    let ids: Vec<&str> = file.sessions.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(ids, [PARENT, CHILD]);
    assert_eq!(file.sessions[0].label, Some(Label::MustFlag));
    assert_eq!(file.sessions[1].parent_id.as_deref(), Some(PARENT));
    // The length came from the commit (3 lines), not the disk (5).
    assert_eq!(
        file.sessions[1].line_counts["/home/user/proj/src/lib.rs"],
        3
    );
    let raw = std::fs::read_to_string(&out_path).unwrap();
    assert!(!raw.contains("Find why tests fail") && !raw.contains("a + b"));

    // detect reads the fixture; its verdicts are those of the raw exports (plus coverage, which
    // only the fixture can compute: it knows the file's length).
    let from_fixture = verdicts(&[&["detect", s(&out_path), "--json"][..], &SENSITIVE].concat());
    let parent = fixture(SAMPLES[0]);
    let child = fixture(SAMPLES[1]);
    let from_exports =
        verdicts(&[&["detect", s(&parent), s(&child), "--json"][..], &SENSITIVE].concat());
    for i in 0..2 {
        let a = &from_fixture["sessions"][i];
        let b = &from_exports["sessions"][i];
        assert_eq!(a["flagged"], b["flagged"], "{i}");
        let without_coverage = |v: &Value| -> Vec<Value> {
            v["signals"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|s| *s != "coverage")
                .cloned()
                .collect()
        };
        assert_eq!(without_coverage(a), without_coverage(b), "{i}");
    }
    assert!(
        from_fixture["sessions"][1]["signals"]
            .as_array()
            .unwrap()
            .contains(&json!("coverage"))
    );
    assert_eq!(
        from_fixture["trees"][0]["dedup_key"],
        format!("opencode-loop:{PARENT}")
    );

    // From disk under --repo instead: the current 5 lines.
    let out = agentwatch(&[
        "export-fixture",
        "--opencode-db",
        s(db),
        "--labels",
        s(&labels),
        "--out",
        s(&out_path),
        "--repo",
        s(&repo),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let file = SessionFile::from_json(&std::fs::read_to_string(&out_path).unwrap()).unwrap();
    assert_eq!(
        file.sessions[1].line_counts["/home/user/proj/src/lib.rs"],
        5
    );
    // Without either, the recorded path does not exist here: a note says so.
    let out = agentwatch(&[
        "export-fixture",
        "--opencode-db",
        s(db),
        "--labels",
        s(&labels),
        "--out",
        s(&out_path),
    ]);
    assert!(out.status.success());
    assert!(
        text(&out.stderr).contains("the length of 1 file(s) read is unknown"),
        "{}",
        text(&out.stderr)
    );
}

/// Run a failing export over a good file: the message, the code, the good file untouched and no
/// temporary file left behind.
fn assert_fails_cleanly(tmp: &TempDir, args: &[&str], exit: i32, needles: &[&str]) {
    let out_path = tmp.path.join("good.json");
    std::fs::write(
        &out_path,
        "{\"format\": \"agentwatch-sessions/1\", \"sessions\": []}\n",
    )
    .unwrap();
    let mut all = args.to_vec();
    all.extend(["--out", s(&out_path)]);
    let out = agentwatch(&all);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(exit), "{args:?}: {err}");
    for needle in needles {
        assert!(err.contains(needle), "{args:?}: {needle:?} not in {err}");
    }
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(
        std::fs::read_to_string(&out_path).unwrap(),
        "{\"format\": \"agentwatch-sessions/1\", \"sessions\": []}\n"
    );
    let leftovers: Vec<String> = std::fs::read_dir(&tmp.path)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".tmp-"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[test]
fn bad_input_gives_clear_messages_and_never_a_partial_file() {
    let tmp = TempDir::new("aw-cli-export-bad");
    let db = sample_db();
    let good_labels = write_labels(&tmp, &json!({PARENT: "must_flag"}));

    // Labels naming unknown sessions: every one is named.
    let unknown = tmp.path.join("unknown.json");
    std::fs::write(
        &unknown,
        json!({"ses_nope": "must_flag", PARENT: "must_flag", "ses_gone": null}).to_string(),
    )
    .unwrap();
    assert_fails_cleanly(
        &tmp,
        &["export-fixture", "--db", s(&db), "--labels", s(&unknown)],
        65,
        &["no such sessions: ses_gone, ses_nope"],
    );
    // A labels file that is missing, or not a label map.
    assert_fails_cleanly(
        &tmp,
        &[
            "export-fixture",
            "--opencode-db",
            s(&db),
            "--labels",
            "/nonexistent/labels.json",
        ],
        66,
        &["labels /nonexistent/labels.json"],
    );
    let bad = tmp.path.join("bad-labels.json");
    std::fs::write(&bad, "{\"ses_a\": \"flag it\"}").unwrap();
    assert_fails_cleanly(
        &tmp,
        &[
            "export-fixture",
            "--opencode-db",
            s(&db),
            "--labels",
            s(&bad),
        ],
        65,
        &["label must be \"must_flag\", \"must_not_flag\" or null"],
    );
    // A missing database.
    assert_fails_cleanly(
        &tmp,
        &[
            "export-fixture",
            "--opencode-db",
            "/nonexistent/opencode.db",
            "--labels",
            s(&good_labels),
        ],
        66,
        &["/nonexistent/opencode.db: no such database file"],
    );
    // A database of another schema version.
    let old = tmp.path.join("old.db");
    create_db_with_schema(
        &old,
        "CREATE TABLE session (id TEXT PRIMARY KEY, data TEXT);",
    )
    .unwrap();
    assert_fails_cleanly(
        &tmp,
        &[
            "export-fixture",
            "--opencode-db",
            s(&old),
            "--labels",
            s(&good_labels),
        ],
        65,
        &[
            "not an opencode database of a supported schema version",
            "no table `part`",
        ],
    );
    // A file that is not a database at all.
    let junk = tmp.path.join("junk.db");
    std::fs::write(&junk, "x".repeat(200)).unwrap();
    assert_fails_cleanly(
        &tmp,
        &[
            "export-fixture",
            "--opencode-db",
            s(&junk),
            "--labels",
            s(&good_labels),
        ],
        65,
        &["not an SQLite database"],
    );
    // A labelled session with no tool calls.
    let quiet_db = tmp.path.join("quiet.db");
    create_db(&quiet_db).unwrap();
    insert_export(
        &quiet_db,
        &json!({
            "info": {"id": "ses_quiet", "slug": "q", "projectID": "global", "directory": "/p",
                     "title": "A question", "version": "1.18.33",
                     "time": {"created": 1796000000000i64, "updated": 1796000000000i64}},
            "messages": [{"info": {"id": "msg_1", "sessionID": "ses_quiet", "role": "user",
                                    "time": {"created": 1796000000000i64}},
                          "parts": [{"id": "prt_1", "sessionID": "ses_quiet", "messageID": "msg_1",
                                     "type": "text", "text": "hi"}]}]
        }),
        "/p",
    )
    .unwrap();
    let quiet_labels = tmp.path.join("quiet.json");
    std::fs::write(&quiet_labels, "{\"ses_quiet\": \"must_not_flag\"}").unwrap();
    assert_fails_cleanly(
        &tmp,
        &[
            "export-fixture",
            "--opencode-db",
            s(&quiet_db),
            "--labels",
            s(&quiet_labels),
        ],
        65,
        &["session ses_quiet has no tool calls"],
    );
}

#[test]
fn a_locked_database_is_reported_with_tempfail() {
    let tmp = TempDir::new("aw-cli-export-locked");
    let db = tmp.path.join("opencode.db");
    create_db(&db).unwrap();
    insert_export(&db, &export_json(SAMPLES[0]), "/home/user/proj").unwrap();
    let labels = write_labels(&tmp, &json!({PARENT: "must_flag"}));
    let lock = lock_exclusively(&db).unwrap();
    assert_fails_cleanly(
        &tmp,
        &[
            "export-fixture",
            "--opencode-db",
            s(&db),
            "--labels",
            s(&labels),
            "--busy-timeout-ms",
            "50",
        ],
        75,
        &["locked by another process (gave up after 50 ms)"],
    );
    drop(lock);
    let out_path = tmp.path.join("after.json");
    let out = agentwatch(&[
        "export-fixture",
        "--opencode-db",
        s(&db),
        "--labels",
        s(&labels),
        "--out",
        s(&out_path),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
}

#[test]
fn import_export_makes_one_session_file() {
    let tmp = TempDir::new("aw-cli-import");
    let parent = fixture(SAMPLES[0]);
    let child = fixture(SAMPLES[1]);
    let out = agentwatch(&["import-export", s(&parent), s(&child)]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let file = SessionFile::from_json(&text(&out.stdout)).unwrap();
    assert_eq!(file.sessions.len(), 2);
    assert_eq!(file.sessions[1].parent_id.as_deref(), Some(PARENT));
    assert_eq!(file.sessions[0].calls.len(), 10);
    // Written session by session, byte for byte the whole document pretty-printed at once.
    assert_eq!(text(&out.stdout), format!("{}\n", file.to_json_pretty()));
    let empty = tmp.path.join("empty.json");
    std::fs::write(&empty, SessionFile::new(Vec::new()).to_json_pretty()).unwrap();
    let out_empty = agentwatch(&["import-export", s(&empty)]);
    assert!(out_empty.status.success(), "{}", text(&out_empty.stderr));
    assert_eq!(
        text(&out_empty.stdout),
        format!("{}\n", SessionFile::new(Vec::new()).to_json_pretty())
    );

    // --out: written atomically; detect reads it like the exports themselves.
    let out_path = tmp.path.join("sessions.json");
    let out = agentwatch(&[
        "import-export",
        s(&parent),
        s(&child),
        "--out",
        s(&out_path),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(out.stdout.is_empty());
    assert_eq!(
        std::fs::read_to_string(&out_path).unwrap(),
        format!("{}\n", file.to_json_pretty())
    );
    let a = verdicts(&[&["detect", s(&out_path), "--json"][..], &SENSITIVE].concat());
    let b = verdicts(&[&["detect", s(&parent), s(&child), "--json"][..], &SENSITIVE].concat());
    assert_eq!(a, b);

    // Bad input: named, with sysexits codes, the good --out untouched.
    let junk = tmp.path.join("junk.json");
    std::fs::write(&junk, "{\"info\": {}, \"messages\": []}").unwrap();
    let before = std::fs::read_to_string(&out_path).unwrap();
    for (args, exit, needle) in [
        (
            vec!["import-export", "/nonexistent/x.json"],
            66,
            "/nonexistent/x.json",
        ),
        (
            vec!["import-export", s(&junk)],
            65,
            "junk.json: opencode export",
        ),
        (
            vec!["import-export", s(&parent), s(&parent)],
            65,
            "appears in both",
        ),
        (vec!["import-export", "-", "-"], 64, "standard input"),
    ] {
        let mut all = args.clone();
        all.extend(["--out", s(&out_path)]);
        let out = agentwatch(&all);
        assert_eq!(
            out.status.code(),
            Some(exit),
            "{args:?}: {}",
            text(&out.stderr)
        );
        assert!(
            text(&out.stderr).contains(needle),
            "{args:?}: {}",
            text(&out.stderr)
        );
    }
    assert_eq!(std::fs::read_to_string(&out_path).unwrap(), before);
}

#[test]
fn the_opencode_job_reads_a_database_named_with_opencode_db() {
    let tmp = TempDir::new("aw-opencode-db-flag");
    let db = sample_db();
    let store = tmp.path.join("aw.db");
    let out = agentwatch(&[
        "watch",
        "--once",
        "--opencode-db",
        s(&db),
        "--db",
        s(&store),
        "--set",
        "watchdog.stale_after_s=0",
        "--set",
        "watchdog.local_llm_enabled=false",
        "--now",
        "1796000000",
        "--verbose",
    ]);
    let err = text(&out.stderr);
    assert!(out.status.success(), "{err}");
    let line = err
        .lines()
        .find(|l| l.contains(" sources="))
        .unwrap_or_else(|| panic!("no sources line: {err}"));
    assert!(line.contains("opencode.db 2 sessions"), "{line}");
    // The sessions judged are the ones of the database named.
    assert!(text(&out.stdout).contains(PARENT), "{}", text(&out.stdout));
}
