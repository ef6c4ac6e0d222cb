//! The committed corpus: reproducible, every label met at every prefix, near misses really near.

use agentwatch_fixtures_gen::corpus;
use detect_core::{Label, Session, SessionFile, Signal};
use detect_eval::backtest::{self, Options, Report, SessionResult};
use std::collections::BTreeMap;
use xtask::cli::{self, default_corpus_path};

fn committed_text() -> String {
    std::fs::read_to_string(default_corpus_path()).expect("fixtures/corpus.json")
}

fn committed() -> Vec<Session> {
    SessionFile::from_json(&committed_text())
        .expect("the corpus parses")
        .sessions
}

fn run_with(options: &Options) -> Report {
    backtest::run(&committed(), options)
}

/// The backtest's options under the design (the corpus pins its thresholds).
fn design() -> Options {
    Options {
        config: detect_core::DetectConfig::design(),
        ..Options::default()
    }
}

fn by_id(report: &Report) -> BTreeMap<&str, &SessionResult> {
    report.sessions.iter().map(|r| (r.id.as_str(), r)).collect()
}

/// `cargo xtask ARGS…` in process: (exit code, stdout, stderr).
fn xtask(args: &[&str]) -> (u8, String, String) {
    let mut out = Vec::new();
    let mut err = Vec::new();
    let argv = std::iter::once("xtask").chain(args.iter().copied());
    let code = cli::run(argv, &mut out, &mut err);
    (
        code,
        String::from_utf8(out).unwrap(),
        String::from_utf8(err).unwrap(),
    )
}

#[test]
fn the_committed_corpus_is_what_the_generator_makes() {
    assert!(
        corpus::same_corpus(&committed_text(), &corpus::generate()),
        "fixtures/corpus.json is stale: run `cargo xtask gen-corpus`"
    );
    let (code, out, _) = xtask(&["gen-corpus", "--check"]);
    assert_eq!(code, 0, "{out}");
}

/// Under the default profile and under the design, each judged on its own labels.
#[test]
fn backtest_meets_every_label_under_the_default_config_and_the_design() {
    for (profile, snapshot) in [
        ("precise", "corpus_backtest_table"),
        ("design", "corpus_backtest_table_design"),
    ] {
        let args: &[&str] = if profile == "precise" {
            &["backtest"]
        } else {
            &["backtest", "--profile", "design"]
        };
        let (code, out, err) = xtask(args);
        assert_eq!(code, 0, "{out}{err}");
        let sessions = committed();
        let flagged = sessions
            .iter()
            .filter(|s| s.label_for(profile.parse().unwrap()) == Some(Label::MustFlag))
            .count();
        assert!(
            out.ends_with(&format!(
                "# backtest complete: {flagged}/{} flagged\n",
                sessions.len()
            )),
            "{out}"
        );
        insta::assert_snapshot!(snapshot, out);
    }
}

#[test]
fn labels_hold_at_every_single_prefix() {
    // The live watchdog does not tick every 5 calls: no must_not_flag session may flag at any
    // call count, and every must_flag one flags no later than with step 5.
    for options in [Options::default(), design()] {
        let every = run_with(&Options {
            step: 1,
            ..options.clone()
        });
        assert!(every.passed(), "{}", backtest::render_table(&every));
        let five = run_with(&options);
        let five = by_id(&five);
        for r in &every.sessions {
            if let Some(k) = five[r.id.as_str()].first_flag_at_call {
                assert!(r.first_flag_at_call.is_some_and(|e| e <= k), "{}", r.id);
            }
        }
    }
}

#[test]
fn each_signal_fires_alone_somewhere() {
    let report = run_with(&design());
    let ids = by_id(&report);
    for (id, signal) in [
        ("ses_dup_alone", Signal::Dup),
        ("ses_top_alone", Signal::Top),
        ("ses_slow_alone", Signal::Slow),
        ("ses_coverage_alone", Signal::Coverage),
        ("ses_coverage_exactly_four", Signal::Coverage),
        ("ses_explore_top_eight", Signal::Top),
    ] {
        assert_eq!(ids[id].signals, [signal], "{id}");
    }
}

#[test]
fn near_misses_are_just_under_their_thresholds() {
    let report = run_with(&Options {
        step: 1,
        ..design()
    });
    let ids = by_id(&report);
    let peak = |id: &str| ids[id].peak;
    assert_eq!(peak("ses_dup_exactly_a_quarter").dup, 0.25);
    assert_eq!(peak("ses_top_eleven").top, 11);
    assert_eq!(peak("ses_slow_fourteen").slow, 14);
    assert!((peak("ses_coverage_three_point_nine").coverage - 3.9).abs() < 1e-9);
    assert_eq!(peak("ses_explore_top_seven").top, 7);
    assert_eq!(peak("ses_build_top_eight").top, 8);
    assert_eq!(peak("ses_paging_big_log").top, 11);
    assert_eq!(peak("ses_poll_release_build").top, 10);
    assert_eq!(peak("ses_poll_release_build").slow, 13);
    assert_eq!(peak("ses_coverage_exactly_four").coverage, 4.0);
    assert_eq!(ids["ses_under_min_calls"].calls, 39);
}

#[test]
fn protected_ancestors_would_flag_without_their_descendants() {
    let sessions = committed();
    for (id, protector) in [
        ("ses_tree_protected_parent", "ses_tree_protected_child"),
        ("ses_tree3_root", "ses_tree3_fixer"),
    ] {
        let with = backtest::run(&sessions, &design());
        assert!(!by_id(&with)[id].flagged, "{id}");
        let without: Vec<Session> = sessions
            .iter()
            .filter(|s| s.id != protector)
            .cloned()
            .collect();
        let report = backtest::run(&without, &design());
        assert!(by_id(&report)[id].flagged, "{id} without {protector}");
    }
    // A looping child flags on its own calls; its landing parent does not, and shares its root.
    let report = backtest::run(&sessions, &Options::default());
    let ids = by_id(&report);
    assert!(ids["ses_tree_loop_child"].flagged);
    assert!(!ids["ses_tree_loop_parent"].flagged);
    assert_eq!(ids["ses_tree_loop_child"].root, "ses_tree_loop_parent");
    assert_eq!(ids["ses_tree3_fixer"].root, "ses_tree3_root");
}

#[test]
fn json_output_has_the_documented_shape() {
    let (code, out, _) = xtask(&["backtest", "--json"]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let first = &v["sessions"][0];
    let keys: Vec<&str> = first
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    let mut expected = [
        "id",
        "label",
        "flagged",
        "first_flag_at_call",
        "signals",
        "root",
    ];
    let mut sorted = keys.clone();
    sorted.sort_unstable();
    expected.sort_unstable();
    assert_eq!(sorted, expected);
    assert!(out.starts_with("{\n  \"sessions\": [\n    {\n      \"id\": \"ses_dup_alone\","));
    let summary = &v["summary"];
    assert_eq!(summary["precision"], 1.0);
    assert_eq!(summary["recall"], 1.0);
    assert_eq!(
        summary["must_flag"]["total"].as_u64().unwrap()
            + summary["must_not_flag"]["total"].as_u64().unwrap(),
        summary["sessions"].as_u64().unwrap()
    );
}

#[test]
fn exit_codes() {
    // A stricter threshold makes false alarms: exit 1.
    let (code, out, _) = xtask(&["backtest", "--set", "top_min=6"]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("FALSE+"));
    // Unreadable input and bad arguments: exit 2 with a message.
    let (code, _, err) = xtask(&["backtest", "--fixture", "/nonexistent/corpus.json"]);
    assert_eq!(code, 2);
    assert!(err.contains("/nonexistent/corpus.json"), "{err}");
    let tmp = std::env::temp_dir().join(format!("xtask-bad-{}.json", std::process::id()));
    std::fs::write(
        &tmp,
        "{\"format\": \"agentwatch-sessions/1\", \"sessions\": [{\"id\": \"x\"}]}",
    )
    .unwrap();
    let (code, _, err) = xtask(&["backtest", "--fixture", tmp.to_str().unwrap()]);
    let _ = std::fs::remove_file(&tmp);
    assert_eq!(code, 2);
    assert!(
        err.contains("session #0 (x): missing field `calls`"),
        "{err}"
    );
    for args in [
        &["backtest", "--set", "top_min=zero"][..],
        &["backtest", "--set", "nonsense"],
        &["backtest", "--step", "0"],
        &["backtest", "--sweep", "top_min=9..6"],
        &["backtest", "--sweep", "bogus=1..2"],
        &["backtest", "--no-such-flag"],
    ] {
        let (code, _, err) = xtask(args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(!err.is_empty());
    }
}

#[test]
fn sweep_prints_precision_and_recall_per_value() {
    let (code, out, err) = xtask(&["backtest", "--sweep", "top_min=6..16"]);
    assert_eq!(code, 0, "{err}");
    let rows: Vec<&str> = out.lines().collect();
    assert_eq!(rows.len(), 1 + 11 + 1, "{out}");
    assert!(rows[0].contains("precision") && rows[0].contains("recall"));
    // At the default (12) the corpus is separated perfectly.
    let twelve = rows
        .iter()
        .find(|r| r.trim_start().starts_with("12 "))
        .unwrap();
    assert!(twelve.ends_with("1.000   1.000"), "{twelve}");
    let (code, out, _) = xtask(&["backtest", "--json", "--sweep", "cover_min=3.5..4.5:0.5"]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let values: Vec<&str> = v["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["value"].as_str().unwrap())
        .collect();
    assert_eq!(values, ["3.5", "4.0", "4.5"]);
}

/// The backtest of a file, whichever way it is read, is the in-memory backtest of its sessions
/// (issue 19): one file read once (the sessions whose descendants landed read again alone where
/// the scan found them), and a file the scan does not read (a key written with an escape: read
/// through serde's reader, no places, so in two passes).
#[test]
fn the_file_backtest_is_the_in_memory_backtest_however_the_file_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let escaped = dir.path().join("escaped.json");
    let text = committed_text();
    assert!(text.contains(r#""format""#));
    std::fs::write(
        &escaped,
        text.replacen(r#""format""#, r#""form\u0061t""#, 1),
    )
    .unwrap();
    let corpus = default_corpus_path();
    for profile in ["design", "precise"] {
        let options = Options {
            config: detect_core::DetectConfig::with_profile(profile.parse().unwrap()),
            ..Options::default()
        };
        let want = backtest::to_json_text(&run_with(&options));
        // The trees' parents are judged with their descendants' landings: the check can tell.
        assert!(want.contains("ses_tree_protected_parent"));
        for file in [&corpus, &escaped] {
            let file = file.to_str().unwrap();
            let args = [
                "backtest",
                "--json",
                "--profile",
                profile,
                "--fixture",
                file,
            ];
            let (_, out, err) = xtask(&args);
            assert_eq!(out, want, "{profile} {file}: {err}");
        }
    }
}
