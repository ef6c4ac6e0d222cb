//! End to end: `agentwatch replay alerts FILE` on the built binary.
//!
//! Ignored until `cli/src/replay.rs` dispatches the `alerts` policy to `replay_alerts::run` (its
//! `replay_alerts` function still returns "not implemented yet"); remove the `ignore` attributes
//! then. Until that, `replay_alerts.rs` tests `run` directly.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

/// The input and output `jsonl` blocks of the `## alerts` worked example in docs/replay.md.
fn documented_example() -> (String, String) {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/replay.md");
    let doc = std::fs::read_to_string(path).expect("docs/replay.md exists");
    let section = doc
        .split("\n## ")
        .find(|s| s.starts_with("alerts"))
        .expect("docs/replay.md has an `## alerts` section");
    let blocks: Vec<&str> = section
        .split("```jsonl\n")
        .skip(1)
        .filter_map(|rest| rest.split("```").next())
        .collect();
    assert_eq!(blocks.len(), 2, "an input and an output jsonl block");
    (blocks[0].to_owned(), blocks[1].to_owned())
}

fn timeline_file(name: &str, contents: &str) -> PathBuf {
    let path = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    std::fs::write(&path, contents).expect("write the timeline");
    path
}

fn agentwatch(args: &[&str], stdin: &str) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_agentwatch"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run agentwatch");
    child
        .stdin
        .take()
        .expect("stdin is piped")
        .write_all(stdin.as_bytes())
        .expect("write stdin");
    child.wait_with_output().expect("agentwatch finishes")
}

#[test]
fn the_documented_example_replays_from_a_file_exactly() {
    let (input, expected) = documented_example();
    let path = timeline_file("replay_alerts_example.jsonl", &input);
    let output = agentwatch(
        &["replay", "alerts", path.to_str().expect("UTF-8 path")],
        "",
    );
    assert!(
        output.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&output.stdout), expected);
}

#[test]
fn the_documented_example_replays_from_stdin_exactly() {
    let (input, expected) = documented_example();
    let output = agentwatch(&["replay", "alerts", "-"], &input);
    assert!(
        output.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&output.stdout), expected);
}

#[test]
fn a_bad_line_exits_65_naming_it_after_printing_the_earlier_ticks() {
    let input = concat!(
        r#"{"now":100,"roots":[{"root":"ses_a","flagged":true,"agent":"build"}]}"#,
        "\n",
        r#"{"now":400,"roots":[{"root":"ses_a","flagged":"yes"}]}"#,
        "\n",
    );
    let path = timeline_file("replay_alerts_bad.jsonl", input);
    let output = agentwatch(
        &["replay", "alerts", path.to_str().expect("UTF-8 path")],
        "",
    );
    assert_eq!(output.status.code(), Some(65));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("line 2"), "stderr: {stderr}");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(stdout.lines().count(), 1, "the trigger of line 1: {stdout}");
    assert!(stdout.contains(r#""decision":"trigger""#), "{stdout}");
}
