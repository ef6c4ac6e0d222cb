//! `agentwatch backtest` end to end: the design's backtest in the installed binary (no checkout,
//! no cargo), the same report as `cargo xtask backtest` (whose committed snapshot it is checked
//! against), its exit codes, standard input and bad input.

use std::process::{Command, Output};

fn agentwatch(args: &[&str], stdin: Option<&str>) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_agentwatch"));
    agentwatch_testkit::output_with_stdin(command.args(args), stdin)
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn workspace(path: &str) -> String {
    format!("{}/../{path}", env!("CARGO_MANIFEST_DIR"))
}

/// The body of an insta snapshot file (after its `---` header).
fn snapshot_body(path: &str) -> String {
    let snap = std::fs::read_to_string(workspace(path)).unwrap();
    let body = snap.splitn(3, "---\n").nth(2).unwrap();
    format!("{}\n", body.trim_end_matches('\n'))
}

#[test]
fn the_design_backtest_runs_from_the_installed_binary_as_xtask_prints_it() {
    let corpus = workspace("fixtures/corpus.json");
    let out = agentwatch(
        &["backtest", "--fixture", &corpus, "--profile", "design"],
        None,
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    // The design's step and summary line.
    assert!(stdout.starts_with("backtest: step=5 "), "{stdout}");
    assert!(
        stdout.ends_with("# backtest complete: 21/49 flagged\n"),
        "{stdout}"
    );
    // Byte for byte what `cargo xtask backtest` prints (its snapshots, committed), under the
    // design and under the default.
    assert_eq!(
        stdout,
        snapshot_body("xtask/tests/snapshots/corpus__corpus_backtest_table_design.snap")
    );
    let default = agentwatch(&["backtest", "--fixture", &corpus], None);
    assert_eq!(default.status.code(), Some(0), "{}", text(&default.stderr));
    assert_eq!(
        text(&default.stdout),
        snapshot_body("xtask/tests/snapshots/corpus__corpus_backtest_table.snap")
    );
    // Standard input reads the same.
    let piped = agentwatch(
        &["backtest", "--fixture", "-", "--profile", "design"],
        Some(&std::fs::read_to_string(&corpus).unwrap()),
    );
    assert_eq!(text(&piped.stdout), stdout);
}

#[test]
fn a_missed_label_exits_1_and_bad_input_exits_with_its_code() {
    let corpus = workspace("fixtures/corpus.json");
    // Thresholds lowered so far that healthy sessions flag: labels missed.
    let out = agentwatch(
        &["backtest", "--fixture", &corpus, "--set", "top_min=3"],
        None,
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("# backtest complete: "));
    let json = agentwatch(&["backtest", "--fixture", &corpus, "--json"], None);
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(v["sessions"].as_array().unwrap().len(), 49);
    for (args, code, named) in [
        (
            &["backtest", "--fixture", "/nonexistent/x.json"][..],
            66,
            "/nonexistent/x.json",
        ),
        (
            &["backtest", "--fixture", &corpus, "--step", "0"],
            64,
            "--step",
        ),
        (
            &["backtest", "--fixture", &corpus, "--set", "top_min=zero"],
            78,
            "top_min",
        ),
        (
            &["backtest", "--fixture", &corpus, "--sweep", "bogus=1..2"],
            64,
            "bogus",
        ),
        (&["backtest"], 64, "--fixture"),
    ] {
        let out = agentwatch(args, None);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{args:?}: {err}");
        assert!(err.contains(named), "{args:?}: {err}");
    }
    let garbage = agentwatch(&["backtest", "--fixture", "-"], Some("{not json"));
    assert_eq!(garbage.status.code(), Some(65), "{}", text(&garbage.stderr));
}
