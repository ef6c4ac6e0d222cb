//! `agentwatch watch` (issue 52): the sessions job under a name that is no agent's, its demo of
//! every agent, and the old names that keep working for the designs' users.

use agentwatch_testkit::TempDir;
use std::process::{Command, Output};

fn agentwatch(args: &[&str], home: &std::path::Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_agentwatch"))
        .args(args)
        .env_clear()
        .env("HOME", home)
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("TMPDIR", home)
        .output()
        .expect("agentwatch runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The README's first command: a flagged tree for Claude Code (its subagent), Codex and
/// opencode, and a healthy Gemini CLI session, each under its own agent's key.
#[test]
fn the_demo_shows_every_agent() {
    let home = TempDir::new("aw-watch-demo");
    let out = agentwatch(&["watch", "--once", "--demo"], &home.path);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{stdout}{stderr}");
    insta::assert_snapshot!("watch_demo", stdout);
    assert!(
        stderr.contains("claude 2 sessions, codex 1 session, gemini 1 session, built-in demo"),
        "{stderr}"
    );
    assert!(!stderr.contains("old name"), "{stderr}");
    // The demo's files are gone with its tick.
    let left: Vec<_> = std::fs::read_dir(&home.path)
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.file_name())
        .filter(|n| n.to_string_lossy().starts_with("agentwatch-"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

/// `agentwatch opencode` still runs the same tick, and says it is the old name.
#[test]
fn the_old_command_works_and_says_so() {
    let home = TempDir::new("aw-watch-old");
    let old = agentwatch(&["opencode", "--once", "--demo"], &home.path);
    let new = agentwatch(&["watch", "--once", "--demo"], &home.path);
    assert!(old.status.success());
    assert_eq!(text(&old.stdout), text(&new.stdout));
    assert!(
        text(&old.stderr)
            .contains("message=\"`agentwatch opencode` is the old name of `agentwatch watch`"),
        "{}",
        text(&old.stderr)
    );
    let help = text(&agentwatch(&["--help"], &home.path).stdout);
    assert!(help.contains("\n  watch "), "{help}");
    assert!(!help.contains("\n  opencode "), "{help}");
}

/// A config written for the old names loads as the new ones, with a note naming each new key,
/// and `doctor` lists what is still to rename.
#[test]
fn old_config_names_read_as_the_new_ones() {
    let home = TempDir::new("aw-watch-keys");
    let file = home.path.join("config.toml");
    std::fs::write(
        &file,
        "[run]\njobs = [\"opencode\", \"recover\"]\nopencode_interval_s = 60\n",
    )
    .unwrap();
    let shown = agentwatch(&["config", "--config", file.to_str().unwrap()], &home.path);
    let (stdout, stderr) = (text(&shown.stdout), text(&shown.stderr));
    assert!(shown.status.success(), "{stdout}{stderr}");
    let jobs = stdout
        .split("jobs = [")
        .nth(1)
        .and_then(|rest| rest.split(']').next())
        .unwrap_or_default();
    assert!(
        jobs.contains("\"watch\"") && jobs.contains("\"recover\""),
        "{stdout}"
    );
    assert!(!jobs.contains("opencode"), "{stdout}");
    assert!(stdout.contains("watch_interval_s = 60"), "{stdout}");
    assert!(!stdout.contains("opencode_interval_s"), "{stdout}");
    assert!(
        stderr.contains("message=\"run.opencode_interval_s: now run.watch_interval_s"),
        "{stderr}"
    );
    assert!(
        stderr.contains(r#"run.jobs \"opencode\": now \"watch\""#),
        "{stderr}"
    );
    let doctor = agentwatch(&["doctor", "--config", file.to_str().unwrap()], &home.path);
    let report = text(&doctor.stdout);
    assert_eq!(report.matches("old name").count(), 2, "{report}");

    std::fs::write(&file, "[run]\njobs = [\"watch\"]\nwatch_interval_s = 60\n").unwrap();
    let renamed = agentwatch(&["config", "--config", file.to_str().unwrap()], &home.path);
    assert!(
        !text(&renamed.stderr).contains("note:"),
        "{}",
        text(&renamed.stderr)
    );
}
