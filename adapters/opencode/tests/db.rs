//! Reading `opencode.db` read-only and exporting scrubbed fixtures from it.
//!
//! The database comes from a real opencode 1.18.33 (`opencode import` of the sample exports) when
//! the binary is installed (`AGENTWATCH_OPENCODE_BIN`, or `.ci/install-opencode.sh`); otherwise it
//! is built with the exact schema and `opencode import`-shaped rows
//! ([`agentwatch_opencode::db::testing`]). `AGENTWATCH_REQUIRE_OPENCODE=1` (CI) makes a missing
//! binary a failure.

use agentwatch_opencode::db::testing::{
    create_db, create_db_with_schema, insert_export, lock_exclusively,
};
use agentwatch_opencode::db::{
    DbError, Export, FileRef, Labels, OpencodeDb, export_fixture, parse_labels, scrub::hash12,
};
use agentwatch_opencode::session_from_export;
use agentwatch_testkit::TempDir;
use agentwatch_testkit::opencode::{OpencodeHome, find_binary};
use detect_core::{DetectConfig, Label, judge_sessions};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

const PARENT: &str = "ses_dd623f63fffee71lHFE8l6hlvY";
const CHILD: &str = "ses_dd6230bdfffe5bR215DEWc1ZCj";
const SHELL: &str = "ses_dd5ed8aceffeG43ZBeQowm8llQ";
const SAMPLES: [&str; 3] = [
    "export_fixture_parent.json",
    "export_fixture_child.json",
    "export_real_shell_session.json",
];

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(format!(
        "{}/../../fixtures/opencode/{name}",
        env!("CARGO_MANIFEST_DIR")
    ))
}

fn export_json(name: &str) -> Value {
    serde_json::from_str(&std::fs::read_to_string(fixture(name)).unwrap()).unwrap()
}

/// A database holding the three sample sessions, built once per test run (tests only read it):
/// made by the real opencode when it is installed.
fn sample_db() -> (PathBuf, &'static str) {
    static DB: OnceLock<(PathBuf, &'static str)> = OnceLock::new();
    DB.get_or_init(|| {
        let root = Path::new(env!("CARGO_TARGET_TMPDIR")).join("aw-opencode-db-tests");
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(&root).unwrap();
        match find_binary() {
            Some(bin) => {
                let home = OpencodeHome::new(bin, &root);
                for name in SAMPLES {
                    home.import(&fixture(name)).unwrap();
                }
                (home.db_path(), "real opencode import")
            }
            None => {
                assert!(
                    std::env::var("AGENTWATCH_REQUIRE_OPENCODE").is_err(),
                    "opencode is required but not installed: run .ci/install-opencode.sh"
                );
                let path = root.join("opencode.db");
                create_db(&path).unwrap();
                let dir = root.join("proj").display().to_string();
                for name in SAMPLES {
                    insert_export(&path, &export_json(name), &dir).unwrap();
                }
                (path, "schema-exact rows")
            }
        }
    })
    .clone()
}

fn open(path: &Path) -> OpencodeDb {
    OpencodeDb::open(path, Duration::from_secs(5)).unwrap()
}

/// `export_fixture` with no file lengths, the default config and no progress bar.
fn export_plain(db: &OpencodeDb, labels: &Labels) -> Result<Export, DbError> {
    export_fixture(
        db,
        labels,
        &mut no_lines,
        &DetectConfig::default(),
        &mut |_, _| {},
    )
}

fn no_lines(_: &FileRef) -> Option<u64> {
    None
}

#[test]
fn sessions_read_from_the_db_match_the_exports() {
    let (path, how) = sample_db();
    let db = open(&path);
    let tree = db.tree(PARENT).unwrap();
    let ids: Vec<&str> = tree.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(ids, [PARENT, CHILD], "{how}");
    for (row, name) in tree.iter().zip(SAMPLES) {
        let loaded = db.load(row).unwrap();
        let expected = session_from_export(&export_json(name)).unwrap();
        // `opencode import` binds the session to the directory it ran in; everything else stays.
        assert_eq!(loaded.session.calls, expected.calls, "{how}: {}", row.id);
        assert_eq!(loaded.session.parent_id, expected.parent_id);
        assert_eq!(loaded.session.title, expected.title);
        assert_eq!(loaded.session.agent, expected.agent);
        assert!(
            loaded.roots.contains(&"/home/user/proj".to_owned()),
            "{:?}",
            loaded.roots
        );
    }
    let all: Vec<String> = db.sessions().unwrap().into_iter().map(|r| r.id).collect();
    assert_eq!(all.len(), 3, "{all:?}");
    assert!(all.contains(&SHELL.to_owned()));
}

/// Each call keeps the hash of what its tool printed (`state.output`, else `metadata.output` as a
/// user-run shell part has it), never the text, read the same from the database opencode wrote as
/// from its export.
#[test]
fn output_hashes_come_from_the_tool_output_and_survive_the_database() {
    let (path, how) = sample_db();
    let db = open(&path);
    for name in SAMPLES {
        let raw = export_json(name);
        let expected = session_from_export(&raw).unwrap();
        let row = db
            .sessions()
            .unwrap()
            .into_iter()
            .find(|r| r.id == expected.id)
            .unwrap();
        assert_eq!(
            db.load(&row).unwrap().session.calls,
            expected.calls,
            "{how}: {name}"
        );
        let outputs: Vec<Option<&str>> = raw["messages"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|m| m["parts"].as_array().unwrap())
            .filter(|p| p["type"] == "tool" && p["state"]["status"] != "pending")
            .map(|p| {
                let state = &p["state"];
                state["output"]
                    .as_str()
                    .or_else(|| state["metadata"]["output"].as_str())
            })
            .collect();
        assert_eq!(outputs.len(), expected.calls.len(), "{name}");
        for (call, output) in expected.calls.iter().zip(outputs) {
            assert_eq!(
                call.output_hash,
                output.map(detect_core::output_hash),
                "{name}: {}",
                call.tool
            );
        }
    }
}

#[test]
fn export_follows_children_scrubs_and_keeps_verdicts() {
    let (path, how) = sample_db();
    let db = open(&path);
    let labels = parse_labels(&format!(
        r#"{{"{PARENT}": {{"label": "must_flag", "note": "three identical failing test runs"}}}}"#
    ))
    .unwrap();
    let mut asked = Vec::new();
    let mut lines = |f: &FileRef| {
        asked.push(f.clone());
        (f.relative.as_deref() == Some("src/lib.rs")).then_some(3)
    };
    let config = DetectConfig::default();
    let export = export_fixture(&db, &labels, &mut lines, &config, &mut |_, _| {}).unwrap();
    let sessions = &export.file.sessions;
    let ids: Vec<&str> = sessions.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(ids, [PARENT, CHILD], "{how}");
    assert_eq!(sessions[0].label, Some(Label::MustFlag));
    assert_eq!(
        sessions[0].note.as_deref(),
        Some("three identical failing test runs")
    );
    assert_eq!(sessions[1].label, None, "children are exported unlabelled");
    // The file's length was asked once per session, relative to the worktree root.
    assert!(asked.iter().all(|f| f.path == "/home/user/proj/src/lib.rs"));
    assert_eq!(asked[0].root.as_deref(), Some("/home/user/proj"));
    assert_eq!(sessions[0].line_counts["/home/user/proj/src/lib.rs"], 3);
    assert!(export.unknown_lengths.is_empty());

    // Scrubbed: kept keys verbatim, everything else hashed.
    let parent = &sessions[0];
    let edit = parent.calls.iter().find(|c| c.tool == "edit").unwrap();
    assert_eq!(edit.input["filePath"], "/home/user/proj/src/lib.rs");
    assert_eq!(edit.input["oldString"], hash12("    a - b"));
    assert_eq!(edit.metadata["filediff"]["additions"], 1);
    let bash = parent.calls.iter().find(|c| c.tool == "bash").unwrap();
    assert_eq!(bash.input["command"], "cargo test");
    assert_eq!(bash.metadata["exit"], 101);
    assert_eq!(
        parent.title,
        Some(hash12("Fixture parent: fix failing test"))
    );
    let child_title = sessions[1].title.as_deref().unwrap();
    assert!(
        child_title.ends_with(" (@general subagent)"),
        "{child_title}"
    );
    let text = export.file.to_json_pretty();
    for secret in [
        "a + b",
        "Find why tests fail",
        "running 1 test",
        "Investigate test\"",
    ] {
        assert!(!text.contains(secret), "{secret:?} survived scrubbing");
    }

    // The same verdicts as the raw exports, under a config sensitive enough to fire.
    let mut sensitive = DetectConfig::default();
    for (k, v) in [
        ("min_calls", "3"),
        ("top_min", "3"),
        ("cum_min", "3"),
        ("window", "10"),
    ] {
        sensitive.set(k, v).unwrap();
    }
    let mut raw = [
        session_from_export(&export_json(SAMPLES[0])).unwrap(),
        session_from_export(&export_json(SAMPLES[1])).unwrap(),
    ];
    for (r, s) in raw.iter_mut().zip(sessions) {
        r.line_counts = s.line_counts.clone();
        r.directory = s.directory.clone();
    }
    let a = judge_sessions(&raw, &sensitive);
    let b = judge_sessions(sessions, &sensitive);
    for (x, y) in a.sessions.iter().zip(&b.sessions) {
        assert_eq!((x.flagged, &x.signals), (y.flagged, &y.signals), "{}", x.id);
    }
    assert!(b.sessions.iter().any(|v| v.flagged));
}

#[test]
fn parents_come_before_children_whatever_the_label_order() {
    let (path, how) = sample_db();
    let db = open(&path);
    // The child's id sorts first; a labelled child inside a labelled tree is exported once.
    let labels = parse_labels(&format!(
        r#"{{"{CHILD}": "must_flag", "{PARENT}": "must_not_flag"}}"#
    ))
    .unwrap();
    let export = export_plain(&db, &labels).unwrap();
    let ids: Vec<&str> = export.file.sessions.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(ids, [PARENT, CHILD], "{how}");
    assert_eq!(export.file.sessions[1].label, Some(Label::MustFlag));
}

#[test]
fn unknown_labelled_sessions_are_all_named() {
    let (path, _) = sample_db();
    let db = open(&path);
    let labels =
        parse_labels(r#"{"ses_nope1": "must_flag", "ses_nope2": "must_not_flag"}"#).unwrap();
    let err = export_plain(&db, &labels).unwrap_err();
    assert!(matches!(err, DbError::UnknownSessions { .. }));
    let text = err.to_string();
    assert!(
        text.contains("no such sessions: ses_nope1, ses_nope2"),
        "{text}"
    );
}

#[test]
fn a_missing_file_is_named() {
    let tmp = TempDir::new("aw-db-missing");
    let err = OpencodeDb::open(&tmp.path.join("nope.db"), Duration::from_secs(1)).unwrap_err();
    assert!(matches!(err, DbError::Missing { .. }), "{err}");
    assert!(
        err.to_string().contains("nope.db: no such database file"),
        "{err}"
    );
    // Opening read-only never creates it.
    assert!(!tmp.path.join("nope.db").exists());
}

#[test]
fn a_file_that_is_not_sqlite_is_named() {
    let tmp = TempDir::new("aw-db-notdb");
    let path = tmp.path.join("opencode.db");
    std::fs::write(
        &path,
        "this is not a database, just text long enough to have a header ....",
    )
    .unwrap();
    let err = OpencodeDb::open(&path, Duration::from_secs(1)).unwrap_err();
    assert!(matches!(err, DbError::NotADatabase { .. }), "{err}");
    assert!(err.to_string().contains("not an SQLite database"), "{err}");
}

#[test]
fn other_schema_versions_are_refused_with_what_is_missing() {
    let tmp = TempDir::new("aw-db-schema");
    // An older layout: sessions only, messages as one JSON blob, no part table.
    let path = tmp.path.join("old.db");
    create_db_with_schema(
        &path,
        "CREATE TABLE session (id TEXT PRIMARY KEY, title TEXT, directory TEXT, time_created INTEGER);
         CREATE TABLE message (id TEXT PRIMARY KEY, session_id TEXT, data TEXT);",
    )
    .unwrap();
    let err = OpencodeDb::open(&path, Duration::from_secs(1)).unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, DbError::Schema { .. }), "{text}");
    for needle in [
        "not an opencode database of a supported schema version",
        "table `session` has no column `parent_id`",
        "table `message` has no column `time_created`",
        "no table `part`",
    ] {
        assert!(text.contains(needle), "{needle}: {text}");
    }
    // An empty SQLite file is no opencode database either.
    let empty = tmp.path.join("empty.db");
    create_db_with_schema(&empty, "").unwrap();
    let err = OpencodeDb::open(&empty, Duration::from_secs(1)).unwrap_err();
    assert!(err.to_string().contains("no table `session`"), "{err}");
}

#[test]
fn a_locked_database_is_reported_not_waited_on_forever() {
    let tmp = TempDir::new("aw-db-locked");
    let path = tmp.path.join("opencode.db");
    create_db(&path).unwrap();
    insert_export(&path, &export_json(SAMPLES[0]), "/home/user/proj").unwrap();
    let lock = lock_exclusively(&path).unwrap();
    assert!(lock.is_held());
    let err = OpencodeDb::open(&path, Duration::from_millis(20))
        .and_then(|db| {
            let labels = parse_labels(&format!(r#"{{"{PARENT}": "must_flag"}}"#)).unwrap();
            export_plain(&db, &labels).map(|_| ())
        })
        .unwrap_err();
    assert!(matches!(err, DbError::Locked { .. }), "{err}");
    assert!(
        err.to_string()
            .contains("locked by another process (gave up after 20 ms)"),
        "{err}"
    );
    drop(lock);
    // Once the writer lets go, the same database reads fine.
    assert_eq!(open(&path).tree(PARENT).unwrap().len(), 1);
}

#[test]
fn a_labelled_session_without_calls_is_an_error() {
    let tmp = TempDir::new("aw-db-nocalls");
    let path = tmp.path.join("opencode.db");
    create_db(&path).unwrap();
    let export = json!({
        "info": {"id": "ses_quiet", "slug": "quiet", "projectID": "global", "directory": "/p",
                 "title": "Just a question", "version": "1.18.33",
                 "time": {"created": 1796000000000i64, "updated": 1796000001000i64}},
        "messages": [{
            "info": {"id": "msg_q1", "sessionID": "ses_quiet", "role": "user",
                     "time": {"created": 1796000000500i64}, "agent": "build",
                     "model": {"providerID": "anthropic", "modelID": "claude-sonnet-4-5"}},
            "parts": [{"id": "prt_q1", "sessionID": "ses_quiet", "messageID": "msg_q1",
                       "type": "text", "text": "what does this do?"}]
        }]
    });
    insert_export(&path, &export, "/p").unwrap();
    let db = open(&path);
    let labels = parse_labels(r#"{"ses_quiet": "must_not_flag"}"#).unwrap();
    let err = export_plain(&db, &labels).unwrap_err();
    assert_eq!(
        err.to_string(),
        "session ses_quiet has no tool calls, so there is nothing to judge: remove it from the labels"
    );
}

#[test]
fn unknown_file_lengths_are_reported() {
    let (path, _) = sample_db();
    let db = open(&path);
    let labels = parse_labels(&format!(r#"{{"{CHILD}": "must_not_flag"}}"#)).unwrap();
    let export = export_plain(&db, &labels).unwrap();
    assert_eq!(export.unknown_lengths, ["/home/user/proj/src/lib.rs"]);
    assert!(export.file.sessions[0].line_counts.is_empty());
}
