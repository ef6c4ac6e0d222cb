//! The development set (`fixtures/dev/`): reproducible from its generator, and the targets of
//! the `precise` profile (docs/detection.md) hold on it and on the corpus.

use agentwatch_fixtures_gen::devset::{self, Kind};
use agentwatch_fixtures_gen::peers;
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
        (devset::default_tools_path(), devset::generate_tools()),
        (
            devset::default_tools_latency_path(),
            devset::generate_tools_latency(),
        ),
        (peers::default_peers_path(), peers::generate()),
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

/// Issue 35's targets for the default profile: on bash-agent and tool-agent runs, at least 99%
/// of loops caught within 15 calls of their start, median at most 6, at most 1% of healthy
/// runs flagged; no peer's loop caught more than 3 calls after the peer, no peer's healthy run
/// flagged. On the corpus every label holds under both profiles, each on its own labels (every
/// prefix judged).
#[test]
fn the_default_meets_its_targets() {
    let config = report::profile_config(Profile::Precise);
    let latency = |sessions: &[Session]| {
        backtest::run(
            sessions,
            &Options {
                config: config.clone(),
                step: 1,
                within: backtest::DEFAULT_WITHIN,
            },
        )
        .latency
        .expect("a set of loops")
    };
    for (dev_path, latency_path) in [
        (devset::default_dev_path(), devset::default_latency_path()),
        (
            devset::default_tools_path(),
            devset::default_tools_latency_path(),
        ),
    ] {
        let dev = load(dev_path.clone());
        let t = DevTotals::of(&report::judge_dev_set(&dev, &config));
        assert!(t.healthy_flagged * 100 <= t.healthy, "{t:?}");
        assert!(t.flagged_before_loop * 100 <= t.loops, "{t:?}");
        for set in [dev, load(latency_path)] {
            let l = latency(&set);
            assert!(
                l.caught_within * 100 >= 99 * l.sessions,
                "{dev_path:?} {l:?}"
            );
            assert!(l.p50.is_some_and(|p| p <= 6), "{l:?}");
        }
    }

    let peers = report::judge_peers(&load(peers::default_peers_path()), &config);
    assert!(peers.len() >= 15);
    for p in &peers {
        assert!(p.ok(), "{p:?}");
    }

    let corpus = load(default_corpus_path());
    for profile in Profile::ALL {
        let report = backtest::run(
            &corpus,
            &Options {
                config: report::profile_config(profile),
                step: 1,
                ..Options::default()
            },
        );
        for s in &report.sessions {
            assert_ne!(
                s.label_met(),
                Some(false),
                "{profile} {}\n{}",
                s.id,
                backtest::render_table(&report)
            );
        }
    }
}

#[test]
fn the_backtest_takes_a_profile() {
    let (code, out, err) = xtask(&["backtest", "--profile", "precise"]);
    // The default is `precise`: the same table without the flag.
    assert_eq!(xtask(&["backtest"]).1, out);
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
/// runs the development sets some forty times: several seconds under the test profile).
#[test]
fn the_detection_doc_is_up_to_date() {
    let doc = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/detection.md");
    let (code, out, err) = xtask(&["detection-report", "--check", doc.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");
}
