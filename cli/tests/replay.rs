//! End to end: `agentwatch replay` on the built binary, for the recovery policies.
//!
//! Each worked example of docs/replay.md is a pair of files under docs/replay-examples/
//! (`POLICY.jsonl` in, `POLICY.out.jsonl` out). These tests run the binary on each input and
//! require exactly the documented output, and require the doc to quote both files verbatim.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

const POLICIES: [&str; 3] = ["loop-recovery", "restart-guard", "waiting-patrol"];

fn docs() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs")
}

fn example(policy: &str, suffix: &str) -> (PathBuf, String) {
    let path = docs()
        .join("replay-examples")
        .join(format!("{policy}{suffix}"));
    let text =
        std::fs::read_to_string(&path).unwrap_or_else(|err| panic!("{}: {err}", path.display()));
    (path, text)
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

fn text(bytes: &[u8]) -> String {
    String::from_utf8(bytes.to_vec()).expect("UTF-8 output")
}

#[test]
fn each_worked_example_prints_exactly_the_documented_output() {
    for policy in POLICIES {
        let (input, _) = example(policy, ".jsonl");
        let (_, expected) = example(policy, ".out.jsonl");
        let output = agentwatch(&["replay", policy, input.to_str().expect("UTF-8 path")], "");
        assert_eq!(text(&output.stderr), "", "{policy}: no error");
        assert_eq!(output.status.code(), Some(0), "{policy}");
        assert_eq!(
            text(&output.stdout),
            expected,
            "{policy}: output differs from {policy}.out.jsonl"
        );
    }
}

#[test]
fn standard_input_is_read_with_dash_or_no_file() {
    for policy in POLICIES {
        let (_, input) = example(policy, ".jsonl");
        let (_, expected) = example(policy, ".out.jsonl");
        for args in [vec!["replay", policy, "-"], vec!["replay", policy]] {
            let output = agentwatch(&args, &input);
            assert_eq!(
                (output.status.code(), text(&output.stdout)),
                (Some(0), expected.clone()),
                "{args:?}"
            );
        }
    }
}

#[test]
fn the_doc_quotes_each_example_verbatim_in_its_section() {
    let doc = std::fs::read_to_string(docs().join("replay.md")).expect("docs/replay.md exists");
    for policy in POLICIES {
        let section = doc
            .split("\n## ")
            .find(|s| s.starts_with(&format!("{policy}\n")))
            .unwrap_or_else(|| panic!("docs/replay.md has a `## {policy}` section"));
        let blocks: Vec<&str> = section
            .split("```jsonl\n")
            .skip(1)
            .filter_map(|rest| rest.split("```").next())
            .collect();
        let (_, input) = example(policy, ".jsonl");
        let (_, output) = example(policy, ".out.jsonl");
        assert_eq!(
            blocks,
            vec![input.as_str(), output.as_str()],
            "{policy}: the section's input and output blocks"
        );
    }
    let alerts = doc.find("\n## alerts").unwrap_or(doc.len());
    for policy in POLICIES {
        let position = doc.find(&format!("\n## {policy}\n")).expect("section");
        assert!(position < alerts, "`## {policy}` stays above `## alerts`");
    }
}

#[test]
fn dry_run_reaches_the_same_decisions() {
    for policy in ["restart-guard", "waiting-patrol"] {
        let (_, input) = example(policy, ".jsonl");
        let (_, expected) = example(policy, ".out.jsonl");
        let output = agentwatch(
            &["replay", policy],
            &format!("{{\"config\":{{\"dry_run\":true}}}}\n{input}"),
        );
        assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
        let dry = text(&output.stdout);
        assert!(
            expected.contains("\"dry_run\":false"),
            "{policy}: the example has an action"
        );
        // Every action is marked, escalations included (which say `dry_run` only when true).
        let marked: String = expected
            .replace("\"dry_run\":false", "\"dry_run\":true")
            .lines()
            .map(|line| match line.strip_suffix("}}") {
                Some(head) if line.contains("\"kind\":\"escalate\"") => {
                    format!("{head},\"dry_run\":true}}}}\n")
                }
                _ => format!("{line}\n"),
            })
            .collect();
        assert_eq!(dry, marked, "{policy}");
    }
}

#[test]
fn an_unknown_policy_is_a_usage_error() {
    let output = agentwatch(&["replay", "restart-everything"], "");
    assert_eq!(output.status.code(), Some(64));
    let stderr = text(&output.stderr);
    assert!(
        stderr.contains("unknown policy `restart-everything`"),
        "{stderr}"
    );
    assert!(
        stderr.contains("loop-recovery, restart-guard, waiting-patrol or alerts"),
        "{stderr}"
    );
}

#[test]
fn a_missing_file_cannot_be_opened() {
    let output = agentwatch(
        &["replay", "loop-recovery", "/nonexistent/timeline.jsonl"],
        "",
    );
    assert_eq!(output.status.code(), Some(66));
}

#[test]
fn a_bad_line_names_its_number_after_printing_the_earlier_decisions() {
    let good = "{\"now\":1000,\"report\":{\"suspected\":1,\"at\":995,\"action\":\"none\"}}\n";
    let cases = [
        (
            "loop-recovery",
            format!("{good}\n{{\"now\":1001,"),
            "line 3: invalid JSON",
        ),
        (
            "loop-recovery",
            format!("{good}{{\"now\":999,\"report_unreadable\":\"x\"}}"),
            "line 2: now 999 is earlier than the previous line's 1000",
        ),
        (
            "loop-recovery",
            format!("{good}{{\"now\":1001,\"rport\":{{}}}}"),
            "line 2: unknown event `rport`",
        ),
        (
            "loop-recovery",
            format!("{good}{{\"now\":1001,\"outcome\":{{\"ok\":\"yes\"}}}}"),
            "line 2: `outcome`: invalid type",
        ),
        (
            "loop-recovery",
            format!("{good}{{\"config\":{{}}}}"),
            "line 2: `config` may appear once, before the first event",
        ),
        (
            "loop-recovery",
            "{\"config\":{\"cooldown\":-1}}".to_owned(),
            "line 1: invalid config",
        ),
        (
            "loop-recovery",
            "{\"report_unreadable\":\"x\"}".to_owned(),
            "line 1: missing `now`",
        ),
        (
            "restart-guard",
            "{\"now\":1,\"sessions\":[{\"title\":\"no id\"}]}".to_owned(),
            "line 1: `sessions`: missing field `id`",
        ),
        (
            "waiting-patrol",
            "{\"now\":1.5,\"sessions\":[]}".to_owned(),
            "line 1: `now` must be an integer",
        ),
    ];
    for (policy, input, message) in cases {
        let output = agentwatch(&["replay", policy], &input);
        let stderr = text(&output.stderr);
        assert_eq!(output.status.code(), Some(65), "{input:?}: {stderr}");
        assert!(
            stderr.contains(message),
            "{input:?}: expected {message:?} in {stderr:?}"
        );
        if input.starts_with(good) {
            assert_eq!(
                text(&output.stdout).lines().count(),
                1,
                "the decision of line 1 is printed"
            );
        }
    }
}
