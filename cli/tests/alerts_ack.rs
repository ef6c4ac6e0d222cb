//! `agentwatch alerts ack KEY` and `alerts silence KEY --for 2h`: stored, shown by `alerts`, and
//! a silenced alert's escalation goes to no channel.

use agentwatch_testkit::TempDir;
use std::path::Path;
use std::process::Output;

const T0: i64 = 1_796_000_000;
const KEY: &str = "opencode-loop:ses_demo_build";

fn agentwatch(home: &Path, args: &[&str]) -> Output {
    agentwatch_testkit::isolated_command(env!("CARGO_BIN_EXE_agentwatch"), home)
        .args(args)
        .output()
        .unwrap()
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn demo_tick(home: &Path, db: &str, at: i64) -> String {
    let out = agentwatch(
        home,
        &[
            "watch",
            "--once",
            "--demo",
            "--db",
            db,
            "--now",
            &at.to_string(),
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    text(&out)
}

#[test]
fn a_silenced_alert_escalates_to_no_channel_and_alerts_shows_the_ack() {
    let tmp = TempDir::new("aw-ack");
    let db = tmp.path.join("aw.db").display().to_string();
    demo_tick(&tmp.path, &db, T0);
    let at = (T0 + 10).to_string();
    for args in [
        vec!["alerts", "--db", &db, "ack", KEY, "--now", &at],
        vec![
            "alerts", "--db", &db, "silence", KEY, "--for", "2h", "--now", &at,
        ],
    ] {
        let out = agentwatch(&tmp.path, &args);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    }
    let listed = text(&agentwatch(&tmp.path, &["alerts", "--db", &db]));
    assert!(
        listed.contains("acknowledged 2026-11-30T00:53:30"),
        "{listed}"
    );
    assert!(
        listed.contains("silenced until 2026-11-30T02:53:30"),
        "{listed}"
    );

    // The third flagged tick escalates; the silence keeps it from the channel.
    demo_tick(&tmp.path, &db, T0 + 300);
    let third = demo_tick(&tmp.path, &db, T0 + 600);
    assert!(third.contains("state=escalate"), "{third}");
    assert!(
        third.contains(&format!(
            "delivery=suppressed reason=\"{KEY} is silenced until"
        )),
        "{third}"
    );
}

#[test]
fn acking_an_alert_that_is_not_open_or_a_bad_duration_is_a_usage_error() {
    let tmp = TempDir::new("aw-ack-bad");
    let db = tmp.path.join("aw.db").display().to_string();
    demo_tick(&tmp.path, &db, T0);
    for args in [
        vec!["alerts", "--db", &db, "ack", "opencode-loop:nope"],
        vec!["alerts", "--db", &db, "silence", KEY, "--for", "2x"],
        vec!["alerts", "--db", &db, "silence", KEY, "--for", "0h"],
    ] {
        assert_eq!(
            agentwatch(&tmp.path, &args).status.code(),
            Some(64),
            "{args:?}"
        );
    }
}
