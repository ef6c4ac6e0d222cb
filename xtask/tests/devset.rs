//! The development set (`fixtures/dev/`): reproducible from its generator, and the targets of
//! the `precise` profile (docs/detection.md) hold on it and on the corpus.

use agentwatch_fixtures_gen::devset::{self, Kind};
use detect_core::{Profile, Session, SessionFile};
use detect_eval::backtest::{self, Options};
use detect_eval::report::{self, DevTotals};
use xtask::cli::{self, default_corpus_path};

fn load(path: std::path::PathBuf) -> Vec<Session> {
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    SessionFile::from_json(&text).unwrap().sessions
}

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
fn the_committed_dev_and_latency_sets_are_what_the_generator_makes() {
    // From the committed conversion of the public trajectories: needs nothing outside the repo.
    let real = SessionFile::from_json(
        &std::fs::read_to_string(devset::default_real_path()).expect("fixtures/dev/real.json"),
    )
    .unwrap();
    let converted = devset::real_from_file(&real);
    for (path, made) in [
        (devset::default_dev_path(), devset::generate(&converted)),
        (
            devset::default_latency_path(),
            devset::generate_latency(&converted),
        ),
    ] {
        let committed = std::fs::read_to_string(&path).expect("a committed set");
        assert!(
            agentwatch_fixtures_gen::corpus::same_corpus(&committed, &made),
            "{} is stale: run `cargo xtask import-trajectories`",
            path.display()
        );
    }
}

#[test]
fn the_committed_conversion_matches_the_public_trajectories() {
    let dir = devset::default_trajectories_dir();
    assert!(
        dir.join("README.md").is_file(),
        "{}: the committed trajectories are missing",
        dir.display()
    );
    let (code, out, err) = xtask(&["import-trajectories", "--check"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("real.json: up to date"), "{out}");
}

#[test]
fn the_dev_set_has_every_kind_from_both_sources() {
    let sessions = load(devset::default_dev_path());
    for kind in [
        Kind::Healthy,
        Kind::Repeat,
        Kind::Cycle,
        Kind::Reread,
        Kind::Noisy,
    ] {
        for source in ["real", "generated"] {
            let n = sessions
                .iter()
                .filter(|s| Kind::of_id(&s.id) == Some(kind) && Kind::source_of_id(&s.id) == source)
                .count();
            assert!(n >= 5, "{} {source}: {n}", kind.as_str());
        }
    }
    for s in &sessions {
        let kind = Kind::of_id(&s.id).expect("every id names its kind");
        assert!(
            s.note.as_deref().unwrap_or("").starts_with(kind.as_str()),
            "{}",
            s.id
        );
        if kind != Kind::Healthy && kind != Kind::Unlabelled {
            assert!(report::loop_start(s).is_some(), "{}", s.id);
        }
    }
}

/// The targets of issue 9: on the development set `precise` flags at most 1% of the healthy
/// runs and catches at least 99% of the loops; on the corpus it loses nothing the design gets
/// right (every prefix judged).
#[test]
fn precise_meets_its_targets() {
    let dev = load(devset::default_dev_path());
    let t = DevTotals::of(&report::judge_dev_set(
        &dev,
        &report::profile_config(Profile::Precise),
    ));
    assert!(t.healthy_flagged * 100 <= t.healthy, "{t:?}");
    assert!(t.caught * 100 >= 99 * t.loops, "{t:?}");
    // A loop's healthy start is a healthy run: the same 1% (`repeat` flags one, at a healthy
    // investigation that rereads files it read before).
    assert!(t.flagged_before_loop * 100 <= t.loops, "{t:?}");

    let corpus = load(default_corpus_path());
    let run = |profile| {
        backtest::run(
            &corpus,
            &Options {
                config: report::profile_config(profile),
                step: 1,
                ..Options::default()
            },
        )
    };
    let (design, precise) = (run(Profile::Design), run(Profile::Precise));
    // Every label holds under both profiles, each judged by its own label (the design's
    // `min_calls` pin is a loop `precise` must flag).
    for report in [&design, &precise] {
        for s in &report.sessions {
            assert_ne!(
                s.label_met(),
                Some(false),
                "{}\n{}",
                s.id,
                backtest::render_table(report)
            );
        }
    }
}

#[test]
fn the_backtest_takes_a_profile() {
    let (code, out, err) = xtask(&["backtest", "--profile", "precise"]);
    // Every corpus label holds under `precise`, its per-profile labels included.
    assert_eq!(code, 0, "{out}{err}");
    assert!(!out.contains("FALSE+") && !out.contains("MISSED"), "{out}");
    assert!(out.starts_with("backtest: step=5"), "{out}");
    assert!(
        out.lines().next().unwrap().contains("profile=precise"),
        "{out}"
    );
    let (code, _, err) = xtask(&["backtest", "--profile", "fast"]);
    assert_eq!(code, 2);
    assert!(err.contains("--profile fast"), "{err}");
    // `--set profile=…` does the same as `--profile`.
    let (_, by_set, _) = xtask(&["backtest", "--set", "profile=precise"]);
    assert_eq!(by_set, out);
}

/// The figures in docs/detection.md are what `cargo xtask detection-report` prints (the report
/// runs the development set some twenty times: a few seconds under the test profile).
#[test]
fn the_detection_doc_is_up_to_date() {
    let doc = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/detection.md");
    let (code, out, err) = xtask(&["detection-report", "--check", doc.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");
}
