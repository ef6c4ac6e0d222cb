//! Issue 37: `alerts ack KEY` and `alerts silence KEY --for D` take a unique prefix of an open
//! alert's key (or of its session id), and the shared flags before or after the key. An
//! ambiguous prefix is a usage error (64) listing the matches; no match says so.

use agentwatch_store::{AlertRow, Store};
use agentwatch_testkit::TempDir;
use std::path::Path;
use std::process::Output;

const T0: i64 = 1_796_000_000;

fn agentwatch(home: &Path, args: &[&str]) -> Output {
    agentwatch_testkit::isolated_command(env!("CARGO_BIN_EXE_agentwatch"), home)
        .args(args)
        .output()
        .unwrap()
}

fn alert(key: &str, resolved_at: Option<i64>) -> AlertRow {
    AlertRow {
        dedup_key: key.to_owned(),
        session_root: key.split_once(':').map_or(key, |(_, s)| s).to_owned(),
        state: if resolved_at.is_some() {
            "resolved"
        } else {
            "open"
        }
        .to_owned(),
        severity: "warning".to_owned(),
        title: format!("loop {key}"),
        summary: String::new(),
        flagged_ticks: 1,
        opened_at: T0,
        last_fired_at: Some(T0),
        resolved_at,
        reason: String::new(),
        refusals: None,
    }
}

/// A store with three open alerts (two share `opencode-loop:ses_ab`) and a resolved one.
fn store(dir: &Path) -> String {
    let db = dir.join("aw.db");
    let mut store = Store::open(&db).unwrap();
    store
        .upsert_alerts(&[
            alert("opencode-loop:ses_abc123", None),
            alert("opencode-loop:ses_abd456", None),
            alert("claude-loop:9f1e", None),
            alert("opencode-loop:ses_old", Some(T0 + 5)),
        ])
        .unwrap();
    db.display().to_string()
}

#[test]
fn keys_by_unique_prefix_with_flags_before_or_after() {
    let at = (T0 + 10).to_string();
    // Each row: the arguments (DB stands for the store), the exit code, what the output says.
    let rows: &[(&[&str], i32, &str)] = &[
        (
            &[
                "alerts",
                "ack",
                "opencode-loop:ses_abc",
                "--db",
                "DB",
                "--now",
                &at,
            ],
            0,
            "acknowledged opencode-loop:ses_abc123\n",
        ),
        (
            &["alerts", "ack", "--db", "DB", "ses_abd", "--now", &at],
            0,
            "acknowledged opencode-loop:ses_abd456\n",
        ),
        (
            &["alerts", "--db", "DB", "ack", "claude"],
            0,
            "acknowledged claude-loop:9f1e\n",
        ),
        (
            &["alerts", "ack", "opencode-loop:ses_abc123", "--db", "DB"],
            0,
            "acknowledged opencode-loop:ses_abc123\n",
        ),
        (
            &[
                "alerts", "silence", "--for", "1d", "ses_abc1", "--db", "DB", "--now", &at,
            ],
            0,
            "silenced opencode-loop:ses_abc123 until 2026-12-01T00:53:30+00:00 (in 24 h;",
        ),
        (
            &[
                "alerts", "silence", "ses_abd", "--db", "DB", "--for", "30m", "--now", &at,
            ],
            0,
            "silenced opencode-loop:ses_abd456 until 2026-11-30T01:23:30+00:00 (in 30 min;",
        ),
        (
            &["alerts", "ack", "ses_ab", "--db", "DB"],
            64,
            "\"ses_ab\" names 2 open alerts; give more of the key:\n  opencode-loop:ses_abc123\n  opencode-loop:ses_abd456\n",
        ),
        (
            &[
                "alerts",
                "silence",
                "opencode-loop:",
                "--for",
                "1h",
                "--db",
                "DB",
            ],
            64,
            "names 2 open alerts",
        ),
        (
            &["alerts", "ack", "nope", "--db", "DB"],
            64,
            "no open alert \"nope\" (`agentwatch alerts` lists them)",
        ),
        (
            &["alerts", "ack", "ses_old", "--db", "DB"],
            64,
            "opencode-loop:ses_old is resolved (2026-11-30T00:53:25+00:00)",
        ),
        (
            &["alerts", "ack", "", "--db", "DB"],
            64,
            "the alert key is empty",
        ),
    ];
    for (args, code, says) in rows {
        let tmp = TempDir::new("aw-keys");
        let db = store(&tmp.path);
        let args: Vec<&str> = args
            .iter()
            .map(|a| if *a == "DB" { db.as_str() } else { a })
            .collect();
        let out = agentwatch(&tmp.path, &args);
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(out.status.code(), Some(*code), "{args:?}: {text}");
        assert!(text.contains(says), "{args:?}: {text}");
    }
}
