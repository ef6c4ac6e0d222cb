//! Invariants of the matcher and the detector, under proptest.

use detect_core::{
    Call, CallStatus, DetectConfig, Profile, Session, SessionDetector, Signal, call_identity,
    judge_session, normalize_bash,
};
use proptest::prelude::*;
use serde_json::{Value, json};

/// Shell-flavoured text: quotes, escapes, comments, separators, prefixes and newlines.
fn shellish() -> impl Strategy<Value = String> {
    let pieces = prop::sample::select(vec![
        "cd ",
        "/p",
        " && ",
        "; ",
        ";",
        "#",
        " # c",
        "'",
        "\"",
        "\\",
        "\n",
        "\r\n",
        "\\\n",
        "A=1 ",
        "export ",
        "env ",
        "pushd ",
        "x",
        "ls",
        " ",
        "\t",
        "git commit",
        "é",
        "<<",
        "EOF",
        ">",
        "2>&1",
        "|",
        "sed -i ",
        "sleep 1 && tail ",
        "nl -ba a.py | sed -n 1,5p",
        "&&",
        "$#",
        "=",
    ]);
    prop::collection::vec(pieces, 0..24).prop_map(|v| v.concat())
}

proptest! {
    #[test]
    fn normaliser_never_panics_and_is_idempotent(s in shellish()) {
        let once = normalize_bash(&s);
        prop_assert_eq!(normalize_bash(&once), once);
    }

    #[test]
    fn normaliser_is_idempotent_on_any_text(s in any::<String>()) {
        let once = normalize_bash(&s);
        prop_assert_eq!(normalize_bash(&once), once);
    }

    /// The precise matcher (targets, writes, polls, viewed lines) never panics on any command.
    #[test]
    fn precise_matcher_never_panics(s in shellish(), t in any::<String>(), exit in 0i64..2) {
        let config = DetectConfig::with_profile(Profile::Precise);
        let mut session = base_session();
        for command in [s.clone(), t, format!("sed -n 1,2p {s}"), format!("cat > {s} <<'E'\n{s}\nE")] {
            session.calls.push(
                Call::completed("bash", json!({ "command": command })).with_metadata(json!({ "exit": exit })),
            );
        }
        let _ = judge_session(&session, None, &config);
    }

    #[test]
    fn identity_ignores_key_order(
        entries in prop::collection::btree_map("[a-z]{1,6}", any::<i32>(), 1..8),
        nested in prop::collection::btree_map("[a-z]{1,4}", "[a-z ]{0,6}", 0..4),
    ) {
        // Write the same object as text in two key orders and parse both.
        let write = |reverse: bool| {
            let mut parts: Vec<String> = entries.iter().map(|(k, v)| format!("\"{k}\":{v}")).collect();
            let mut inner: Vec<String> = nested.iter().map(|(k, v)| format!("\"{k}\":\"{v}\"")).collect();
            if reverse { parts.reverse(); inner.reverse(); }
            parts.push(format!("\"zz_nested\":{{{}}}", inner.join(",")));
            if reverse { parts.rotate_right(1); }
            serde_json::from_str::<Value>(&format!("{{{}}}", parts.join(","))).unwrap()
        };
        prop_assert_eq!(call_identity("read", &write(false)), call_identity("read", &write(true)));
    }
}

/// A small pool of calls so histories repeat, land and read files.
fn pool_call() -> impl Strategy<Value = Call> {
    prop_oneof![
        (0u8..4).prop_map(|i| Call::completed(
            "bash",
            json!({"command": format!("cd /p && pytest t{i}")})
        )),
        (0u8..3).prop_map(|i| Call::completed(
            "bash",
            json!({"command": format!("cargo build -p c{i}")})
        )),
        (0u64..4, 1u64..40).prop_map(|(o, l)| Call::completed(
            "read",
            json!({"filePath": "/p/src/lib.rs", "offset": o * 10 + 1, "limit": l})
        )),
        (0u8..3)
            .prop_map(|i| Call::completed("read", json!({"filePath": format!("/p/m{i}/mod.rs")}))),
        (0u8..2).prop_map(|i| Call::completed("grep", json!({"pattern": format!("fn main{i}")}))),
        Just(
            Call::completed("bash", json!({"command": "git status"}))
                .with_status(CallStatus::Pending)
        ),
        Just(
            Call::completed("edit", json!({"filePath": "/p/a"}))
                .with_metadata(json!({"diff": "@@"}))
        ),
        Just(
            Call::completed("edit", json!({"filePath": "/p/a"})).with_metadata(json!({"diff": ""}))
        ),
        Just(
            Call::completed("bash", json!({"command": "git commit -m x"}))
                .with_metadata(json!({"exit": 0}))
        ),
        // For the precise profile: views of files by range, bash writes (repeated ones are no
        // landing), searches and a heredoc.
        (0u8..3, 1u8..3).prop_map(|(f, k)| Call::completed(
            "bash",
            json!({"command": format!("sed -n {},{}p src/f{f}.py", k * 10, k * 10 + 40)})
        )),
        (0u8..2, 0i64..2).prop_map(|(f, exit)| Call::completed(
            "bash",
            json!({"command": format!("sed -i 's/a/b/' src/f{f}.py")})
        )
        .with_metadata(json!({"exit": exit}))),
        (0u8..2).prop_map(|f| Call::completed(
            "bash",
            json!({"command": format!("cat > src/n{f}.py <<'EOF'\nx = 1\nEOF")})
        )
        .with_metadata(json!({"exit": 0}))),
        (0u8..2).prop_map(|i| Call::completed(
            "bash",
            json!({"command": format!("grep -rn 'def f{i}' src/")})
        )),
        (0u8..2).prop_map(|i| Call::completed(
            "bash",
            json!({"command": format!("sleep 30 && tail -n {} /tmp/job.log", 5 + i)})
        )),
        (0u64..3, 1u64..4).prop_map(|(a, k)| Call::completed(
            "bash",
            json!({"command": format!("nl -ba src/f0.py | sed -n '{},{}p'", a * 20 + 1, a * 20 + k * 15)})
        )),
        Just(Call::completed("bash", json!({"command": "cat src/lib.rs"}))),
        // Progress read from outputs: polls (a poll tool, a bare sleep) seeing one of two
        // outputs, a bash write of unknown exit and views of its file with outputs, a commit
        // whose output showed it.
        (0u8..2).prop_map(|o| Call::completed("poll", json!({"shell_id": "bash_1"}))
            .with_output(&format!("line {o}"))),
        Just(Call::completed("bash", json!({"command": "sleep 20"}))),
        (0u8..2).prop_map(|f| Call::completed(
            "bash",
            json!({"command": format!("sed -i 's/a/b/' src/f{f}.py")})
        )),
        (0u8..2, 0u8..2).prop_map(|(f, o)| Call::completed(
            "bash",
            json!({"command": format!("cat src/f{f}.py")})
        )
        .with_output(&format!("content {o}"))),
        (0u8..2).prop_map(|o| Call::completed(
            "read",
            json!({"filePath": "/p/src/f0.py"})
        )
        .with_output(&format!("content {o}"))),
        Just(
            Call::completed("bash", json!({"command": "git commit -qam x && pytest"}))
                .with_metadata(json!({"exit": 1}))
                .with_output("[main 4e1f0a2] x\n 1 file changed")
        ),
        // Issue 48: a commit named again (one of two), a write of what its file holds, an edit
        // that changed no line, a failing test whose error moves from line to line.
        (0u8..2).prop_map(|c| Call::completed(
            "bash",
            json!({"command": "git commit --amend --no-edit"})
        )
        .with_metadata(json!({"exit": 0}))
        .with_output(&format!("[main 4e1f0a{c}] x"))),
        Just(
            Call::completed("write", json!({"filePath": "/p/a", "content": "x"})).with_metadata(
                json!({"type": "update", "diff": "(update)", "filediff": {"additions": 0, "deletions": 0}})
            )
        ),
        Just(
            Call::completed("edit", json!({"filePath": "/p/a"})).with_metadata(
                json!({"diff": "--- a\n+++ a\n", "filediff": {"additions": 0, "deletions": 0}})
            )
        ),
        (0u8..3).prop_map(|l| Call::completed("bash", json!({"command": "pytest -x"}))
            .with_metadata(json!({"exit": 1}))
            .with_output(&format!("t.py:{l}: AssertionError"))),
    ]
}

/// A history: calls with increasing times, and descendant landings arriving between pushes.
#[derive(Debug, Clone)]
enum Step {
    Call(Call),
    DescendantLanding(i64),
}

/// A generated step: a call, a descendant landing, or "repeat the last `p` calls `r` times" (so
/// that blocks repeated in a row, the `cycle` signal's matter, are common).
#[derive(Debug, Clone)]
enum Gen {
    Step(Step),
    Again(usize, usize),
}

fn history() -> impl Strategy<Value = Vec<Step>> {
    let step = prop_oneof![
        12 => pool_call().prop_map(|c| Gen::Step(Step::Call(c))),
        1 => (0i64..90, 0i64..3).prop_map(|(i, k)| Gen::Step(Step::DescendantLanding(i * 1000 + k * 250))),
        2 => (1usize..=7, 1usize..5).prop_map(|(p, r)| Gen::Again(p, r)),
    ];
    prop::collection::vec(step, 0..70).prop_map(|gens| {
        let mut steps: Vec<Step> = Vec::new();
        for g in gens {
            match g {
                Gen::Step(s) => steps.push(s),
                Gen::Again(p, r) => {
                    let block: Vec<Step> = steps[steps.len().saturating_sub(p)..].to_vec();
                    for _ in 0..r {
                        steps.extend(block.iter().cloned());
                    }
                }
            }
        }
        steps.truncate(120);
        steps
            .into_iter()
            .enumerate()
            .map(|(i, s)| match s {
                Step::Call(c) => Step::Call(c.with_time(i as i64 * 1000, i as i64 * 1000 + 500)),
                other => other,
            })
            .collect()
    })
}

fn small_config() -> DetectConfig {
    DetectConfig {
        window: 12,
        min_calls: 8,
        top_min: 5,
        top_min_ro: 3,
        cum_min: 6,
        cover_min: 2.0,
        cycle_min: 6,
        reread_min: 2.0,
        poll_max_s: 4,
        poll_max_calls: 5,
        ..DetectConfig::default()
    }
}

/// Every profile.
const PROFILES: [Profile; 2] = Profile::ALL;

/// One of six configs: the design's defaults or small thresholds, under any profile.
fn any_config() -> impl Strategy<Value = DetectConfig> {
    (any::<bool>(), prop::sample::select(PROFILES.to_vec())).prop_map(|(small, profile)| {
        let base = if small {
            small_config()
        } else {
            DetectConfig::default()
        };
        DetectConfig { profile, ..base }
    })
}

fn base_session() -> Session {
    let mut s = Session::new("ses_prop");
    s.directory = Some("/p".to_owned());
    s.line_counts.insert("/p/src/lib.rs".to_owned(), 50);
    s.line_counts.insert("/p/m0/mod.rs".to_owned(), 30);
    s
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn incremental_equals_batch_at_every_step(steps in history(), config in any_config()) {
        let mut session = base_session();
        let mut detector = SessionDetector::new(&session, &config);
        let mut latest_landing: Option<i64> = None;
        for step in steps {
            match step {
                Step::Call(call) => {
                    detector.push(&call);
                    session.calls.push(call);
                }
                Step::DescendantLanding(t) => {
                    detector.push_descendant_landing(t);
                    latest_landing = latest_landing.max(Some(t));
                }
            }
            prop_assert_eq!(detector.verdict(), judge_session(&session, latest_landing, &config));
        }
    }

    /// The backtest's cheap read of a verdict: the verdict's figures and signals, without names.
    #[test]
    fn figures_are_the_verdict_without_its_names(steps in history(), config in any_config()) {
        let session = base_session();
        let mut detector = SessionDetector::new(&session, &config);
        for step in steps {
            match step {
                Step::Call(call) => detector.push(&call),
                Step::DescendantLanding(t) => detector.push_descendant_landing(t),
            }
            let mut verdict = detector.verdict();
            verdict.id = String::new();
            verdict.reason.top_what = String::new();
            verdict.reason.coverage_file = None;
            verdict.reason.reread_file = None;
            prop_assert_eq!(detector.flagged(), verdict.flagged);
            prop_assert_eq!(detector.figures(), verdict);
        }
    }

    #[test]
    fn a_landed_call_at_the_end_always_unflags(
        steps in history(),
        commit in any::<bool>(),
        profile in prop::sample::select(PROFILES.to_vec()),
    ) {
        let config = DetectConfig { profile, ..small_config() };
        let mut session = base_session();
        session.calls.extend(steps.into_iter().filter_map(|s| match s {
            Step::Call(c) => Some(c),
            Step::DescendantLanding(_) => None,
        }));
        session.calls.push(if commit {
            Call::completed("bash", json!({"command": "git commit -am wip"})).with_metadata(json!({"exit": 0}))
        } else {
            Call::completed("write", json!({"filePath": "/p/new.rs", "content": "x"}))
        });
        let v = judge_session(&session, None, &config);
        prop_assert!(!v.flagged);
        prop_assert!(v.reason.landed);
        prop_assert_eq!(v.reason.calls_since_landed, 0);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    /// A detector stored as JSON between runs and restored judges exactly as one that never
    /// stopped, and knows the session's latest own landing.
    #[test]
    fn snapshot_restore_continues_exactly(steps in history(), cut in 0usize..90, config in any_config()) {
        let session = base_session();
        let mut straight = SessionDetector::new(&session, &config);
        let mut resumed = SessionDetector::new(&session, &config);
        let mut own_landing: Option<i64> = None;
        let mut written = std::collections::HashSet::new();
        for (i, step) in steps.iter().enumerate() {
            if i == cut {
                let json = serde_json::to_string(&resumed.snapshot()).unwrap();
                resumed = SessionDetector::restore(serde_json::from_str(&json).unwrap(), &config).unwrap();
            }
            match step {
                Step::Call(call) => {
                    straight.push(call);
                    resumed.push(call);
                    let alone = detect_core::session_facts(&Session { calls: vec![call.clone()], ..base_session() }, &config);
                    // A bash write lands unless it repeats an earlier one (precise).
                    if let Some(f) = alone.first()
                        && f.landed
                        && (!f.write || written.insert(f.identity.clone()))
                    {
                        own_landing = own_landing.max(call.end_ms());
                    }
                }
                Step::DescendantLanding(t) => {
                    straight.push_descendant_landing(*t);
                    resumed.push_descendant_landing(*t);
                }
            }
            prop_assert_eq!(resumed.verdict(), straight.verdict());
            prop_assert_eq!(resumed.flagged(), straight.verdict().flagged);
        }
        prop_assert_eq!(resumed.latest_own_landing(), straight.latest_own_landing());
    }
}

#[test]
fn a_snapshot_is_not_restored_under_another_profile() {
    let session = base_session();
    let design = DetectConfig::design();
    let precise = DetectConfig::default();
    let snapshot = SessionDetector::new(&session, &design).snapshot();
    assert!(SessionDetector::restore(snapshot.clone(), &design).is_some());
    assert!(SessionDetector::restore(snapshot, &precise).is_none());
}

/// A `precise` snapshot taken before the `repeat` rule (no `history`, `recent`, `last_landed`, nor a
/// `result` per span call) still loads, and the detector goes on judging.
#[test]
fn a_snapshot_from_before_repeat_loads() {
    let session = base_session();
    let precise = DetectConfig::with_profile(Profile::Precise);
    let mut detector = SessionDetector::new(&session, &precise);
    let call =
        Call::completed("bash", json!({"command": "pytest -x"})).with_metadata(json!({"exit": 1}));
    for _ in 0..3 {
        detector.push(&call);
    }
    let mut old = serde_json::to_value(detector.snapshot()).unwrap();
    let obj = old.as_object_mut().unwrap();
    assert!(obj.remove("history").is_some() && obj.remove("recent").is_some());
    obj.remove("last_landed");
    for span_call in obj["span"].as_array_mut().unwrap() {
        assert!(span_call.as_object_mut().unwrap().remove("seen").is_some());
    }
    let mut restored =
        SessionDetector::restore(serde_json::from_value(old).unwrap(), &precise).unwrap();
    for _ in 0..5 {
        restored.push(&call);
    }
    assert!(restored.verdict().signals.contains(&Signal::Repeat));
}

/// A `precise` snapshot from before issue 48 (no `commits`, no `blind` span calls) loads and the
/// detector goes on judging: a commit it had landed is forgotten (it lands once more), the rest
/// is as before.
#[test]
fn a_snapshot_from_before_issue_48_loads() {
    let session = base_session();
    let precise = DetectConfig::default();
    let commit = Call::completed("bash", json!({"command": "git commit --amend --no-edit"}))
        .with_metadata(json!({"exit": 0}))
        .with_output("[main 4e1f0a2] x");
    let blind = Call::completed("search", json!({"pattern": "TODO"}));
    let mut detector = SessionDetector::new(&session, &precise);
    for call in [&commit, &blind, &blind] {
        detector.push(call);
    }
    let mut old = serde_json::to_value(detector.snapshot()).unwrap();
    let obj = old.as_object_mut().unwrap();
    assert!(obj.remove("commits").is_some());
    for span_call in obj["span"].as_array_mut().unwrap() {
        assert!(span_call.as_object_mut().unwrap().remove("blind").is_some());
    }
    let mut restored =
        SessionDetector::restore(serde_json::from_value(old).unwrap(), &precise).unwrap();
    assert_eq!(restored.verdict(), detector.verdict());
    restored.push(&commit);
    assert_eq!(restored.verdict().reason.calls_since_landed, 0);
    for _ in 0..5 {
        restored.push(&commit);
    }
    assert!(restored.verdict().signals.contains(&Signal::Repeat));
}

/// A `precise` snapshot from before calls and results were hashed (history keys and span
/// results as text) loads and judges as the detector it was taken from; an `auto` snapshot of
/// earlier versions and a snapshot without a profile (the design's) are refused under the
/// default.
#[test]
fn snapshots_of_earlier_versions() {
    let session = base_session();
    let precise = DetectConfig::default();
    let call = Call::completed("bash", json!({"command": "pytest -x"})).with_output("1 failed");
    let mut detector = SessionDetector::new(&session, &precise);
    for _ in 0..3 {
        detector.push(&call);
    }
    let mut old = serde_json::to_value(detector.snapshot()).unwrap();
    let obj = old.as_object_mut().unwrap();
    let identity = call_identity("bash", &call.input);
    let result = format!("#{}", call.output_hash.as_deref().unwrap());
    let names = obj["names"].as_array_mut().unwrap();
    names.push(json!(result));
    let result_name = names.len() - 1;
    for span_call in obj["span"].as_array_mut().unwrap() {
        let span_call = span_call.as_object_mut().unwrap();
        span_call.remove("seen");
        span_call.insert("result".into(), json!(result_name));
    }
    for echo in obj["history"].as_array_mut().unwrap() {
        let echo = echo.as_object_mut().unwrap();
        for k in ["k", "i", "h"] {
            echo.remove(k);
        }
        echo.insert("key".into(), json!(format!("{identity}\u{1f}{result}")));
    }
    let mut restored =
        SessionDetector::restore(serde_json::from_value(old.clone()).unwrap(), &precise).unwrap();
    assert_eq!(restored.verdict(), detector.verdict());
    for _ in 0..2 {
        restored.push(&call);
        detector.push(&call);
    }
    assert_eq!(restored.verdict(), detector.verdict());
    assert!(detector.verdict().signals.contains(&Signal::Repeat));
    let mut auto = old.clone();
    auto["profile"] = json!("auto");
    auto["auto"] = json!({"precise": {}, "tools": {"bash": true, "edits": false}});
    assert!(SessionDetector::restore(serde_json::from_value(auto).unwrap(), &precise).is_none());
    let mut unprofiled = old;
    unprofiled.as_object_mut().unwrap().remove("profile");
    let unprofiled: detect_core::DetectorSnapshot = serde_json::from_value(unprofiled).unwrap();
    assert_eq!(unprofiled.profile, Profile::Design);
    assert!(SessionDetector::restore(unprofiled, &precise).is_none());
}
