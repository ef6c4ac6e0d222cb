//! Issue 37: times a person reads are ISO 8601 or relative, never unix seconds. An acked and
//! silenced alert as `alerts silence`, `alerts` and `status` show it (insta snapshots); `--json`
//! keeps the numbers.

use agentwatch_testkit::TempDir;
use std::path::Path;

const T0: i64 = 1_796_000_000;

fn agentwatch(home: &Path, args: &[&str]) -> String {
    let out = agentwatch_testkit::isolated_command(env!("CARGO_BIN_EXE_agentwatch"), home)
        .args(args)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// No run of ten digits (a unix time of these years) anywhere in `text`.
fn no_unix_seconds(text: &str) {
    let digits: Vec<&str> = text
        .split(|c: char| !c.is_ascii_digit())
        .filter(|run| run.len() >= 10)
        .collect();
    assert!(digits.is_empty(), "unix seconds {digits:?} in:\n{text}");
}

#[test]
fn acks_and_silences_read_as_times() {
    let tmp = TempDir::new("aw-times");
    let db = tmp.path.join("aw.db").display().to_string();
    let at = |t: i64| t.to_string();
    agentwatch(
        &tmp.path,
        &["watch", "--once", "--demo", "--db", &db, "--now", &at(T0)],
    );
    agentwatch(
        &tmp.path,
        &[
            "alerts",
            "ack",
            "ses_demo_build",
            "--db",
            &db,
            "--now",
            &at(T0 + 60),
        ],
    );
    let silenced = agentwatch(
        &tmp.path,
        &[
            "alerts",
            "silence",
            "ses_demo_build",
            "--for",
            "4m",
            "--db",
            &db,
            "--now",
            &at(T0 + 60),
        ],
    );
    let listed = agentwatch(&tmp.path, &["alerts", "--db", &db]);
    let status = agentwatch(&tmp.path, &["status", "--db", &db, "--now", &at(T0 + 120)])
        .replace(&db, "[DB]");
    for text in [&silenced, &listed, &status] {
        no_unix_seconds(text);
    }
    insta::assert_snapshot!("times_silence", silenced);
    insta::assert_snapshot!("times_alerts", listed);
    insta::assert_snapshot!("times_status", status);

    // `--json` keeps the numbers.
    let json: serde_json::Value =
        serde_json::from_str(&agentwatch(&tmp.path, &["alerts", "--db", &db, "--json"])).unwrap();
    let note = &json["notes"]["opencode-loop:ses_demo_build"];
    assert_eq!(note["acked_at"], T0 + 60, "{json}");
    assert_eq!(note["silenced_until"], T0 + 300, "{json}");
}
