//! decisions.md section 1, rule by rule. Each test is named after the rule it pins.

use detect_core::{
    Call, CallStatus, DetectConfig, Rule, Rules, Session, Signal, judge_session, judge_sessions,
};
use serde_json::{Value, json};

const DIR: &str = "/home/user/proj";

fn bash(command: &str) -> Call {
    Call::completed("bash", json!({ "command": command }))
}

/// A call no other call matches, in identity or in target.
fn unique(i: usize) -> Call {
    bash(&format!("echo{i} step"))
}

fn read(path: &str, offset: u64, limit: u64) -> Call {
    Call::completed(
        "read",
        json!({"filePath": path, "offset": offset, "limit": limit}),
    )
}

fn edit(diff: &str) -> Call {
    Call::completed(
        "edit",
        json!({"filePath": format!("{DIR}/a.py"), "oldString": "a", "newString": "b"}),
    )
    .with_metadata(json!({ "diff": diff }))
}

fn session(id: &str, calls: Vec<Call>) -> Session {
    Session {
        directory: Some(DIR.to_owned()),
        calls,
        ..Session::new(id)
    }
}

/// `repeated` copies of `call` after enough unique calls to make `total`.
fn with_filler(total: usize, repeated: usize, call: &Call) -> Vec<Call> {
    let mut calls: Vec<Call> = (0..total - repeated).map(unique).collect();
    calls.extend(std::iter::repeat_n(call.clone(), repeated));
    calls
}

fn judge(calls: Vec<Call>) -> detect_core::SessionVerdict {
    judge_session(&session("ses_t", calls), None, &DetectConfig::design())
}

fn fired(calls: Vec<Call>) -> Vec<Signal> {
    judge(calls).signals
}

// ---- Input ----------------------------------------------------------------------------------

#[test]
fn only_completed_and_error_calls_count() {
    let looping = bash("pytest -x");
    let mut calls = with_filler(39, 20, &looping);
    calls.push(looping.clone().with_status(CallStatus::Pending));
    calls.push(looping.clone().with_status(CallStatus::Running));
    let v = judge(calls.clone());
    assert_eq!(v.reason.calls_since_landed, 39);
    assert!(!v.flagged);
    calls.push(looping.with_status(CallStatus::Error));
    assert!(judge(calls).flagged, "an error call counts");
}

// ---- Signals gate: min_calls ----------------------------------------------------------------

#[test]
fn min_calls_39_does_not_evaluate_40_does() {
    let looping = bash("pytest -x");
    assert_eq!(fired(with_filler(39, 30, &looping)), vec![]);
    assert_eq!(
        fired(with_filler(40, 30, &looping)),
        vec![Signal::Dup, Signal::Top, Signal::Slow]
    );
}

// ---- dup ------------------------------------------------------------------------------------

#[test]
fn dup_exactly_025_does_not_fire() {
    let v = judge(with_filler(40, 10, &bash("make check")));
    assert_eq!(v.reason.dup, 0.25);
    assert_eq!(v.signals, vec![]);
}

#[test]
fn dup_just_above_025_fires_alone() {
    let v = judge(with_filler(40, 11, &bash("make check")));
    assert_eq!(v.reason.dup, 11.0 / 40.0);
    assert_eq!(v.signals, vec![Signal::Dup]);
}

#[test]
fn dup_counts_only_the_window() {
    // 30 repeats, then 60 unique calls: the repeats left the window.
    let mut calls: Vec<Call> = std::iter::repeat_n(bash("make check"), 14).collect();
    calls.extend((0..60).map(unique));
    let v = judge(calls);
    assert_eq!(v.reason.window_calls, 60);
    assert_eq!(v.reason.dup, 1.0 / 60.0);
    assert_eq!(v.reason.slow, 14);
}

// ---- top ------------------------------------------------------------------------------------

fn reads_of_one_file(n: usize) -> Vec<Call> {
    // Different offsets: different identities, one target `read config.py`.
    (0..n as u64)
        .map(|i| read(&format!("{DIR}/src/config.py"), 1 + i * 10, 10))
        .collect()
}

#[test]
fn top_11_does_not_fire_12_does() {
    let mut calls: Vec<Call> = (0..29).map(unique).collect();
    calls.extend(reads_of_one_file(11));
    let v = judge(calls);
    assert_eq!(
        (v.reason.top, v.reason.top_what.as_str()),
        (11, "read config.py")
    );
    assert_eq!(v.signals, vec![]);

    let mut calls: Vec<Call> = (0..28).map(unique).collect();
    calls.extend(reads_of_one_file(12));
    assert_eq!(fired(calls), vec![Signal::Top]);
}

#[test]
fn top_for_read_only_agents_7_does_not_fire_8_does() {
    let ro = |n: usize| {
        let mut calls: Vec<Call> = (0..40 - n).map(unique).collect();
        calls.extend(reads_of_one_file(n));
        let s = Session {
            agent: Some("explore".to_owned()),
            ..session("ses_ro", calls)
        };
        judge_session(&s, None, &DetectConfig::design())
    };
    assert_eq!(ro(7).signals, vec![]);
    assert!(ro(7).reason.read_only);
    assert_eq!(ro(8).signals, vec![Signal::Top]);
}

#[test]
fn top_merges_reads_by_basename() {
    let mut calls: Vec<Call> = (0..28).map(unique).collect();
    calls.extend((0..12).map(|i| read(&format!("{DIR}/crate{i}/mod.rs"), 1, 2000)));
    let v = judge(calls);
    assert_eq!(
        (v.reason.top, v.reason.top_what.as_str()),
        (12, "read mod.rs")
    );
}

#[test]
fn top_merges_bash_by_first_two_words_after_normalising() {
    let mut calls: Vec<Call> = (0..28).map(unique).collect();
    calls.extend((0..12).map(|i| bash(&format!("cd {DIR} && RUST_LOG=1 cargo test case_{i}"))));
    let v = judge(calls);
    assert_eq!(
        (v.reason.top, v.reason.top_what.as_str()),
        (12, "bash cargo test")
    );
}

#[test]
fn top_merges_grep_by_first_60_characters_not_bytes() {
    let head: String = "é".repeat(60);
    let mut calls: Vec<Call> = (0..28).map(unique).collect();
    calls.extend((0..12).map(|i| {
        Call::completed(
            "grep",
            json!({"pattern": format!("{head}{i}"), "path": DIR}),
        )
    }));
    let v = judge(calls);
    assert_eq!(v.reason.top, 12);
    assert_eq!(v.reason.top_what, format!("grep {head}"));
}

#[test]
fn top_of_other_tools_is_their_identity() {
    let mut calls: Vec<Call> = (0..28).map(unique).collect();
    calls.extend(
        (0..12).map(|i| Call::completed("webfetch", json!({"url": format!("https://x/{i}")}))),
    );
    assert_eq!(judge(calls).reason.top, 1);
}

// ---- slow -----------------------------------------------------------------------------------

/// `early` copies of a call, 36 unique calls, then 11 copies inside the 60-call window: `dup`
/// and `top` stay quiet, only the whole-span count grows.
fn slow_case(early: usize) -> Vec<Call> {
    let looping = bash("git status");
    let mut calls: Vec<Call> = std::iter::repeat_n(looping.clone(), early).collect();
    calls.extend((0..49).map(unique));
    calls.extend(std::iter::repeat_n(looping, 11));
    calls
}

#[test]
fn slow_14_does_not_fire_15_does() {
    let v = judge(slow_case(3));
    assert_eq!((v.reason.slow, v.reason.top), (14, 11));
    assert_eq!(v.signals, vec![]);
    assert_eq!(fired(slow_case(4)), vec![Signal::Slow]);
}

// ---- coverage -------------------------------------------------------------------------------

fn coverage_case(reads: Vec<Call>) -> detect_core::SessionVerdict {
    let n = reads.len();
    let mut calls: Vec<Call> = (0..40 - n).map(unique).collect();
    calls.extend(reads);
    let mut s = session("ses_cov", calls);
    s.line_counts.insert(format!("{DIR}/src/big.py"), 100);
    judge_session(&s, None, &DetectConfig::design())
}

#[test]
fn coverage_399_does_not_fire_400_does() {
    let path = format!("{DIR}/src/big.py");
    let v = coverage_case(vec![
        read(&path, 1, 2000),
        read(&path, 1, 2000),
        read(&path, 1, 2000),
        read(&path, 2, 2000),
    ]);
    assert_eq!(v.reason.coverage, 3.99);
    assert_eq!(v.signals, vec![]);
    let v = coverage_case(vec![read(&path, 1, 2000); 4]);
    assert_eq!(v.reason.coverage, 4.0);
    assert_eq!(v.reason.coverage_file.as_deref(), Some(path.as_str()));
    assert_eq!(v.signals, vec![Signal::Coverage]);
}

#[test]
fn coverage_resolves_relative_paths_against_the_session_directory() {
    let v = coverage_case(vec![
        read("src/big.py", 1, 2000),
        read("./src/../src/big.py", 1, 2000),
        read(&format!("{DIR}/src/big.py"), 1, 2000),
        read("src/big.py", 1, 100),
    ]);
    assert_eq!(v.reason.coverage, 4.0);
}

#[test]
fn coverage_a_read_is_capped_at_file_length() {
    let path = format!("{DIR}/src/big.py");
    let huge = read(&path, 1, 2000).with_metadata(json!({"lines_read": 5000}));
    let v = coverage_case(vec![huge; 3]);
    assert_eq!(v.reason.coverage, 3.0);
}

#[test]
fn coverage_lines_returned_follow_offset_and_limit() {
    let path = format!("{DIR}/src/big.py");
    // limit 30 -> 30 lines; offset 91 -> 10 lines; offset past the end -> 0 lines.
    let v = coverage_case(vec![
        read(&path, 1, 30),
        read(&path, 91, 2000),
        read(&path, 500, 10),
    ]);
    assert_eq!(v.reason.coverage, 0.4);
}

#[test]
fn coverage_prefers_the_reads_own_total_lines() {
    let path = format!("{DIR}/src/big.py");
    // The read says the file has 50 lines (it shrank): each full read is 1.0x.
    let short = read(&path, 1, 2000).with_metadata(json!({"total_lines": 50}));
    let v = coverage_case(vec![short; 4]);
    assert_eq!(v.reason.coverage, 4.0);
    assert_eq!(v.signals, vec![Signal::Coverage]);
}

#[test]
fn coverage_skips_files_of_unknown_length() {
    let v = coverage_case(vec![read(&format!("{DIR}/src/unknown.py"), 1, 2000); 8]);
    assert_eq!(v.reason.coverage, 0.0);
    assert_eq!(v.reason.coverage_file, None);
}

// ---- landed ---------------------------------------------------------------------------------

fn looping_then(last: Call) -> detect_core::SessionVerdict {
    let mut calls = with_filler(60, 40, &bash("pytest -x"));
    calls.push(last);
    judge(calls)
}

/// Each row: (rule, the last call, whether it lands).
#[test]
fn landed_calls_table() {
    let a_py = format!("{DIR}/a.py");
    let rows: Vec<(&str, Call, bool)> = vec![
        (
            "edit with a diff lands",
            edit("@@ -1 +1 @@\n-a\n+b\n"),
            true,
        ),
        ("edit with an empty diff does not land", edit(""), false),
        (
            "edit with a whitespace diff does not land",
            edit("  \n"),
            false,
        ),
        (
            "edit with filediff additions lands",
            Call::completed("edit", json!({"filePath": a_py}))
                .with_metadata(json!({"filediff": {"file": a_py, "additions": 1, "deletions": 0}})),
            true,
        ),
        (
            "edit with an empty filediff does not land",
            Call::completed("edit", json!({"filePath": a_py}))
                .with_metadata(json!({"filediff": {"additions": 0, "deletions": 0}})),
            false,
        ),
        (
            "apply_patch with a diff lands",
            Call::completed("apply_patch", json!({"patchText": "*** Begin Patch"}))
                .with_metadata(json!({"diff": "@@ -1 +1 @@\n-a\n+b\n"})),
            true,
        ),
        (
            "write completed lands",
            Call::completed("write", json!({"filePath": a_py, "content": "x"})),
            true,
        ),
        (
            "write with an error does not land",
            Call::completed("write", json!({"filePath": a_py, "content": "x"}))
                .with_status(CallStatus::Error),
            false,
        ),
        (
            "git commit with exit 0 lands",
            bash("cd /p && git commit -m fix").with_metadata(json!({"exit": 0})),
            true,
        ),
        (
            "git commit with exit 1 does not land",
            bash("git commit -m fix").with_metadata(json!({"exit": 1})),
            false,
        ),
        (
            "git commit with exit null does not land",
            bash("git commit -m fix").with_metadata(json!({"exit": Value::Null})),
            false,
        ),
        (
            "git commit with no exit does not land",
            bash("git commit -m fix"),
            false,
        ),
        (
            "git status with exit 0 does not land",
            bash("git status").with_metadata(json!({"exit": 0})),
            false,
        ),
        (
            "a pending edit does not land",
            edit("@@ x").with_status(CallStatus::Pending),
            false,
        ),
    ];
    for (rule, call, lands) in rows {
        let v = looping_then(call);
        assert_eq!(v.reason.landed, lands, "{rule}");
        assert_eq!(!v.flagged, lands, "{rule}: a landing clears every signal");
    }
}

#[test]
fn landing_resets_the_span_to_the_calls_after_it() {
    let mut calls = with_filler(60, 40, &bash("pytest -x"));
    calls.push(edit("@@ -1 +1 @@"));
    calls.extend(std::iter::repeat_n(bash("pytest -x"), 39));
    let v = judge(calls.clone());
    assert_eq!((v.reason.calls_since_landed, v.flagged), (39, false));
    calls.push(bash("pytest -x"));
    let v = judge(calls);
    assert_eq!(v.reason.calls_since_landed, 40);
    assert_eq!(v.reason.slow, 40);
    assert!(v.flagged && v.reason.landed);
}

// ---- trees ----------------------------------------------------------------------------------

fn timed(call: Call, t: i64) -> Call {
    call.with_time(t, t + 500)
}

#[test]
fn a_descendants_landing_resets_its_ancestors_span() {
    // Parent loops 30 calls (t = 0..30 s), the grandchild edits at t = 31 s, parent loops 20 more.
    let mut parent_calls: Vec<Call> = (0..30)
        .map(|i| timed(bash("pytest -x"), i * 1000))
        .collect();
    parent_calls.extend((0..30).map(|i| timed(bash("pytest -x"), 40_000 + i * 1000)));
    let parent = session("ses_p", parent_calls);
    let child = Session {
        parent_id: Some("ses_p".to_owned()),
        ..session("ses_c", vec![timed(unique(1), 30_000)])
    };
    let grandchild = Session {
        parent_id: Some("ses_c".to_owned()),
        ..session("ses_g", vec![timed(edit("@@ -1 +1 @@"), 31_000)])
    };
    let j = judge_sessions(
        &[parent.clone(), child.clone(), grandchild],
        &DetectConfig::design(),
    );
    assert_eq!(j.sessions[0].reason.calls_since_landed, 30);
    assert!(j.sessions[0].reason.landed);
    assert!(!j.trees[0].flagged);
    assert_eq!(j.trees[0].sessions, ["ses_p", "ses_c", "ses_g"]);
    // Without the grandchild, the parent is judged on all 60 calls and flags.
    let j = judge_sessions(&[parent, child], &DetectConfig::design());
    assert!(j.trees[0].flagged);
}

#[test]
fn a_parents_landing_does_not_protect_a_looping_child() {
    let parent = session("ses_p", vec![timed(edit("@@ -1 +1 @@"), 100_000)]);
    let child = Session {
        parent_id: Some("ses_p".to_owned()),
        title: Some("Investigate test (@general subagent)".to_owned()),
        ..session(
            "ses_c",
            (0..40)
                .map(|i| timed(bash("pytest -x"), 200_000 + i))
                .collect(),
        )
    };
    let j = judge_sessions(&[parent, child], &DetectConfig::design());
    let tree = &j.trees[0];
    assert_eq!(
        (tree.root.as_str(), tree.dedup_key.as_str()),
        ("ses_p", "opencode-loop:ses_p")
    );
    assert!(tree.flagged);
    assert_eq!(tree.flagged_sessions.len(), 1);
    assert_eq!(tree.flagged_sessions[0].id, "ses_c");
    assert!(!j.sessions[0].flagged);
}

#[test]
fn every_root_is_its_own_tree_and_missing_parents_make_roots() {
    let orphan = Session {
        parent_id: Some("ses_gone".to_owned()),
        ..session("ses_o", vec![unique(1)])
    };
    let j = judge_sessions(&[session("ses_a", vec![]), orphan], &DetectConfig::design());
    let roots: Vec<&str> = j.trees.iter().map(|t| t.root.as_str()).collect();
    assert_eq!(roots, ["ses_a", "ses_o"]);
}

#[test]
fn a_parent_cycle_is_broken_at_its_smallest_id() {
    let a = Session {
        parent_id: Some("ses_b".into()),
        ..session("ses_a", vec![])
    };
    let b = Session {
        parent_id: Some("ses_c".into()),
        ..session("ses_b", vec![])
    };
    let c = Session {
        parent_id: Some("ses_a".into()),
        ..session("ses_c", vec![])
    };
    let j = judge_sessions(&[b, c, a], &DetectConfig::design());
    assert_eq!(j.trees.len(), 1);
    assert_eq!(j.trees[0].root, "ses_a");
    assert_eq!(j.trees[0].sessions, ["ses_a", "ses_c", "ses_b"]);
    assert_eq!(j.trees[0].notes.len(), 1, "{:?}", j.trees[0].notes);
}

// ---- read-only agents -----------------------------------------------------------------------

#[test]
fn read_only_agent_rules() {
    let config = DetectConfig::design();
    let ro = |agent: Option<&str>, title: Option<&str>| {
        let s = Session {
            agent: agent.map(str::to_owned),
            title: title.map(str::to_owned),
            ..Session::new("s")
        };
        detect_core::is_read_only(&s, &config)
    };
    assert!(ro(Some("Explore"), None), "agent name, case-insensitive");
    assert!(
        ro(None, Some("Find uses (@librarian subagent)")),
        "title suffix"
    );
    assert!(
        ro(Some("build"), Some("x (@oracle subagent)")),
        "either name"
    );
    assert!(
        !ro(Some("build"), Some("explore the code")),
        "an agent name wins over title words"
    );
    assert!(
        ro(None, Some("Oracle: why does it fail")),
        "no agent: a title word"
    );
    assert!(
        !ro(None, Some("exploration notes")),
        "a word, not a substring"
    );
    assert!(!ro(None, None));
}

// ---- config overrides -----------------------------------------------------------------------

#[test]
fn thresholds_are_configurable() {
    let mut config = DetectConfig::design();
    config.set("top_min", "10").unwrap();
    let mut calls: Vec<Call> = (0..30).map(unique).collect();
    calls.extend(reads_of_one_file(10));
    let v = judge_session(&session("s", calls), None, &config);
    assert_eq!(v.signals, vec![Signal::Top]);
}

// ---- the precise profile (docs/detection.md) --------------------------------------------------

fn precise() -> DetectConfig {
    DetectConfig::with_profile(detect_core::Profile::Precise)
}

/// `precise` without `repeat`, for tests of the other rules on calls that repeat.
fn precise_without_repeat() -> DetectConfig {
    DetectConfig {
        ablate: Rules::NONE.with(Rule::Repeat),
        ..precise()
    }
}

fn judge_with(config: &DetectConfig, calls: Vec<Call>) -> detect_core::SessionVerdict {
    judge_session(&session("ses_p", calls), None, config)
}

fn bash_exit(command: &str, exit: i64) -> Call {
    bash(command).with_metadata(json!({ "exit": exit }))
}

#[test]
fn precise_bash_targets_name_the_files() {
    // Twelve different files viewed with `sed -n`: one target for the design, twelve for precise.
    let mut calls: Vec<Call> = (0..30).map(unique).collect();
    calls.extend((0..12).map(|i| bash(&format!("sed -n 1,80p src/m{i}.py"))));
    let design = judge(calls.clone());
    assert_eq!(design.signals, vec![Signal::Top]);
    assert_eq!(design.reason.top_what, "bash sed -n");
    let v = judge_with(&precise(), calls);
    assert!(!v.flagged, "{}", v.summary());
    assert_eq!(v.reason.top, 1);
    // One file shown whole twelve times, by any viewer, is one target.
    let mut calls: Vec<Call> = (0..30).map(unique).collect();
    for i in [0, 0, 1, 2, 1, 0, 2, 2, 1, 0, 1, 2] {
        calls.push(
            bash(["cat src/a.py", "nl -ba src/a.py", "less src/a.py"][i])
                .with_output(["a = 1", "1 a = 1", "a = 1 (END)"][i]),
        );
    }
    let v = judge_with(&precise(), calls.clone());
    assert_eq!(v.signals, vec![Signal::Top, Signal::Repeat]);
    assert_eq!(v.reason.top_what, "bash view src/a.py");
    // Without `repeat` (the same views with the same results), `top` alone.
    let v = judge_with(&precise_without_repeat(), calls);
    assert_eq!(v.signals, vec![Signal::Top]);
}

#[test]
fn precise_paging_is_no_loop_but_rereading_is() {
    // Twenty pages of one log: every view shows new lines.
    let mut calls: Vec<Call> = (0..30).map(unique).collect();
    calls.extend((0..20).map(|p| {
        bash(&format!(
            "sed -n '{},{}p' logs/app.log",
            p * 100 + 1,
            p * 100 + 100
        ))
    }));
    let v = judge_with(&precise(), calls.clone());
    assert!(!v.flagged, "{}", v.summary());
    assert_eq!(v.reason.reread, 1.0);
    // The design counts one target `bash sed -n` 20 times.
    assert_eq!(judge(calls).signals, vec![Signal::Top]);
    // The same 60 lines shown six times, by three tools: reread 6.0 >= reread_min.
    let mut calls: Vec<Call> = (0..34).map(unique).collect();
    for i in 0..6 {
        calls.push(
            bash(match i % 3 {
                0 => "sed -n '41,100p' src/a.py",
                1 => "nl -ba src/a.py | sed -n 41,100p",
                _ => "sed -n 41,100p src/a.py",
            })
            .with_output(if i % 3 == 1 {
                "41 def f():"
            } else {
                "def f():"
            }),
        );
    }
    // The same three views twice in a row, with the same results, are also a `repeat`.
    let v = judge_with(&precise(), calls.clone());
    assert_eq!(
        v.signals,
        vec![Signal::Reread, Signal::Repeat],
        "{}",
        v.summary()
    );
    let v = judge_with(&precise_without_repeat(), calls);
    assert_eq!(v.signals, vec![Signal::Reread], "{}", v.summary());
    assert_eq!(v.reason.reread, 6.0);
    assert_eq!(
        v.reason.reread_file.as_deref(),
        Some("/home/user/proj/src/a.py")
    );
}

#[test]
fn precise_polls_count_towards_slow_only() {
    let poll = bash("sleep 30 && tail -n 5 /tmp/suite.log");
    // 14 polls in a row among 46 calls: neither dup, top nor cycle fires.
    let mut calls = with_filler(46, 14, &poll);
    let v = judge_with(&precise(), calls.clone());
    assert!(!v.flagged, "{}", v.summary());
    assert_eq!((v.reason.top, v.reason.cycle, v.reason.slow), (1, 0, 14));
    assert_eq!(judge(calls.clone()).signals, vec![Signal::Dup, Signal::Top]);
    // The fifteenth poll since the last landing is too many.
    calls.push(poll);
    assert_eq!(judge_with(&precise(), calls).signals, vec![Signal::Slow]);
    // Sleeping before real work is no poll.
    let rerun = bash("sleep 5 && pytest -x");
    assert!(judge_with(&precise(), with_filler(46, 14, &rerun)).flagged);
}

#[test]
fn precise_python_probes_keep_one_target() {
    // `python -c` probes share a target under both profiles (the corpus' ses_top_alone).
    let mut calls: Vec<Call> = (0..30).map(unique).collect();
    calls.extend((0..12).map(|i| bash(&format!("python -c \"print({i} + 1)\""))));
    for config in [DetectConfig::design(), precise()] {
        let v = judge_with(&config, calls.clone());
        assert_eq!(v.reason.top_what, "bash python -c");
        assert_eq!(v.signals, vec![Signal::Top]);
    }
}

#[test]
fn precise_bash_writes_land_when_they_exit_zero() {
    let looping = bash("pytest -x tests/test_a.py");
    let mut calls = with_filler(45, 20, &looping);
    assert!(judge_with(&precise(), calls.clone()).flagged);
    for (write, lands) in [
        ("sed -i 's/a/b/' src/a.py", true),
        ("cat > src/a.py <<'EOF'\nx = 1\nEOF", true),
        ("git apply fix.diff", true),
        ("echo x | tee src/a.py", true),
        ("cp /tmp/a.py src/a.py", true),
        ("sed -n 1,20p src/a.py", false),
        ("pytest > /tmp/out.txt", false),
    ] {
        calls.push(bash_exit(write, 0));
        let v = judge_with(&precise(), calls.clone());
        assert_eq!(v.reason.landed, lands, "{write}");
        assert_eq!(!v.flagged, lands, "{write}");
        // The design never counts a bash write.
        assert!(!judge(calls.clone()).reason.landed, "{write}");
        calls.pop();
        // A write that failed, or whose exit is unknown, is no landing.
        calls.push(bash_exit(write, 1));
        assert!(!judge_with(&precise(), calls.clone()).reason.landed);
        calls.pop();
        calls.push(bash(write));
        assert!(!judge_with(&precise(), calls.clone()).reason.landed);
        calls.pop();
    }
}

#[test]
fn precise_a_repeated_write_is_no_landing() {
    let write = bash_exit("sed -i 's/total/subtotal/' src/a.py", 0);
    let test = bash("pytest -x tests/test_a.py");
    let mut calls: Vec<Call> = vec![write.clone()];
    for _ in 0..25 {
        calls.push(test.clone());
        calls.push(write.clone());
    }
    let v = judge_with(&precise(), calls.clone());
    assert!(v.flagged, "{}", v.summary());
    assert_eq!(
        v.reason.calls_since_landed, 50,
        "only the first write landed"
    );
    // Another write lands.
    calls.push(bash_exit("sed -i 's/a/b/' src/a.py", 0));
    assert_eq!(judge_with(&precise(), calls).reason.calls_since_landed, 0);
}

/// An edit tool's call: `old` replaced by `new` in `a.py`; `changed` as its metadata reports.
fn edit_of(old: &str, new: &str, changed: bool) -> Call {
    let call = Call::completed(
        "edit",
        json!({"filePath": format!("{DIR}/a.py"), "oldString": old, "newString": new}),
    );
    if changed {
        call.with_metadata(json!({ "diff": format!("-{old}\n+{new}") }))
    } else {
        call.with_status(CallStatus::Error)
            .with_output("oldString not found")
    }
}

#[test]
fn precise_an_edit_sent_again_after_it_landed_echoes() {
    let (ab, ba) = (edit_of("a", "b", true), edit_of("b", "a", true));
    let resent = edit_of("a", "b", false);
    let test = bash_exit("pytest -x tests/test_a.py", 1);
    // (calls, calls since the last landing, echoes among them)
    let table: Vec<(&str, Vec<Call>, u32, u32)> = vec![
        (
            "a new edit lands",
            vec![ab.clone(), test.clone(), ba.clone()],
            0,
            0,
        ),
        (
            "the same edit made again, undone in between, lands again: it changed the file",
            vec![ab.clone(), ba.clone(), ab.clone()],
            0,
            0,
        ),
        (
            "an edit sent again after it landed fails: an echo, though its error is new",
            vec![ab.clone(), test.clone(), resent.clone()],
            2,
            1,
        ),
        (
            "sent again and again",
            vec![ab.clone(), resent.clone(), test.clone(), resent.clone()],
            3,
            2,
        ),
    ];
    for (what, calls, since, echoes) in table {
        let v = judge_with(&precise(), calls.clone());
        assert_eq!(
            (v.reason.stale_span_calls, v.reason.stale_span),
            (since, echoes),
            "{what}: {}",
            v.summary()
        );
        // The design knows none of it: every changed edit lands.
        let design = judge_with(&DetectConfig::design(), calls);
        assert!(!design.flagged, "{what}");
    }
    // An edit sent again and again between runs of the same failing test flags, early.
    let mut calls = vec![ab.clone()];
    for _ in 0..3 {
        calls.extend([test.clone(), resent.clone()]);
    }
    let v = judge_with(&precise(), calls);
    assert!(v.flagged, "{}", v.summary());
    assert_eq!(v.reason.calls_since_landed, 6);
}

#[test]
fn precise_cycle_needs_three_repeats_and_cycle_min_calls() {
    // (`repeat` would also fire on these calls with their same results: switched off here.)
    // A block of four different calls repeated in a row: dup stays at 0.25 (not > 0.25).
    let block: Vec<Call> = (0..4).map(|i| bash(&format!("tool{i} check"))).collect();
    let run = |filler: usize, repeats: usize| {
        let mut calls: Vec<Call> = (0..filler).map(unique).collect();
        for _ in 0..repeats {
            calls.extend(block.iter().cloned());
        }
        calls
    };
    // 3 repeats = 12 calls = cycle_min: fires.
    let v = judge_with(&precise_without_repeat(), run(30, 3));
    assert_eq!(v.reason.cycle, 12);
    assert_eq!(v.signals, vec![Signal::Cycle]);
    // The design computes no cycle and does not fire.
    let d = judge(run(30, 3));
    assert_eq!((d.reason.cycle, d.flagged), (0, false));
    // 2 repeats of 6 calls: 12 calls, but fewer than 3 repeats.
    let six: Vec<Call> = (0..6).map(|i| bash(&format!("six{i} run"))).collect();
    let mut calls: Vec<Call> = (0..30).map(unique).collect();
    calls.extend(six.iter().cloned());
    calls.extend(six.iter().cloned());
    let v = judge_with(&precise_without_repeat(), calls);
    assert_eq!((v.reason.cycle, v.flagged), (0, false));
    // Blocks longer than six are no cycle.
    let seven: Vec<Call> = (0..7).map(|i| bash(&format!("seven{i} run"))).collect();
    let mut calls: Vec<Call> = (0..20).map(unique).collect();
    for _ in 0..3 {
        calls.extend(seven.iter().cloned());
    }
    assert_eq!(judge_with(&precise_without_repeat(), calls).reason.cycle, 0);
    // Under min_calls nothing fires.
    let v = judge_with(&precise_without_repeat(), run(20, 3));
    assert_eq!((v.reason.cycle, v.flagged), (12, false));
}

/// `repeat` (precise): the same call with the same result, alone or as a block of 2-3 repeated
/// twice, fires before `min_calls` once it covers 5 calls; so do 6 of the last 8 calls (or 9 of
/// the last 14) echoing one of the 16 calls before them (the same call with the same output
/// hash, across a landing). A landing at the end unflags.
#[test]
fn precise_repeat_speaks_early_on_the_same_call_and_result() {
    let pytest = |exit| bash_exit("pytest tests/t.py -x", exit);
    let times = |block: &[Call], n: usize| -> Vec<Call> {
        (0..n).flat_map(|_| block.iter().cloned()).collect()
    };
    // Rows: calls after 3 unique ones, `repeat` figure, fires. A run of one call passes (a
    // failed call five times in a row is also `failing`'s, below).
    let rows: Vec<(&str, Vec<Call>, u32, bool)> = vec![
        ("4 in a row", vec![pytest(0); 4], 4, false),
        ("5 in a row", vec![pytest(0); 5], 5, true),
        (
            "another exit breaks the run",
            vec![pytest(0), pytest(0), pytest(2), pytest(0), pytest(0)],
            2,
            false,
        ),
        ("A B x2", times(&[bash("cat a.py"), pytest(1)], 2), 4, false),
        (
            "A B A B A",
            vec![
                bash("cat a.py"),
                pytest(1),
                bash("cat a.py"),
                pytest(1),
                bash("cat a.py"),
            ],
            5,
            true,
        ),
        ("A B x3", times(&[bash("cat a.py"), pytest(1)], 3), 6, true),
        (
            "A B C x2",
            times(&[bash("cat a.py"), pytest(1), bash("ls")], 2),
            6,
            true,
        ),
        (
            "A B C D x2: a block of four is no repeat",
            times(
                &[bash("cat a.py"), pytest(1), bash("ls"), bash("git diff")],
                2,
            ),
            0,
            false,
        ),
    ];
    for (name, tail, repeat, fires) in rows {
        let mut calls: Vec<Call> = (0..3).map(unique).collect();
        calls.extend(tail);
        let v = judge_with(&precise(), calls.clone());
        assert_eq!(v.reason.repeat, repeat, "{name}: {}", v.summary());
        assert_eq!(
            v.signals.contains(&Signal::Repeat),
            fires,
            "{name}: {}",
            v.summary()
        );
        assert!(v.reason.calls_since_landed < 40, "{name}");
        if fires {
            assert!(v.summary().contains(&format!("repeat={repeat}")), "{name}");
        }
        // The design is unchanged.
        let d = judge(calls);
        assert_eq!(
            (d.flagged, d.reason.repeat, d.reason.stale),
            (false, 0, 0),
            "{name}"
        );
    }
    // The same call with other outputs is progress; with the same output hash it is not.
    let hashed = |out: &str| pytest(0).with_output(out);
    let calls: Vec<Call> = (0..5).map(|i| hashed(&format!("run {i}"))).collect();
    assert!(!judge_with(&precise(), calls).flagged);
    let hashed = |out: &str| pytest(1).with_output(out);
    let calls: Vec<Call> = (0..5).map(|_| hashed("1 failed")).collect();
    assert_eq!(judge_with(&precise(), calls).signals, vec![Signal::Repeat]);

    // A loop over calls seen before a landing, in shuffled order, that see the same outputs: the
    // landing changed nothing they see and forgives nothing.
    let seen = [
        bash("cat a.py").with_output("a"),
        pytest(1).with_output("1 failed"),
        bash("git status").with_output("clean"),
        bash("ls src").with_output("a.py"),
    ];
    let shuffled = |seen: &[Call]| -> Vec<Call> {
        let mut calls: Vec<Call> = (0..3).map(unique).collect();
        calls.extend(seen.iter().cloned());
        calls.push(bash_exit("sed -i 's/a/b/' a.py", 0).with_output(""));
        for i in [2, 0, 3, 1, 1, 3, 0] {
            calls.push(seen[i].clone());
        }
        calls
    };
    // Without output hashes, the same exit status says nothing across a landing: only the
    // calls made again since it echo, and a success whose output was not recorded (it says
    // that the call ran, not what it saw) counts only as often as the failure beside it.
    let unhashed: Vec<Call> = seen
        .iter()
        .map(|c| Call {
            output_hash: None,
            ..c.clone()
        })
        .collect();
    let v = judge_with(&precise(), shuffled(&unhashed));
    assert_eq!((v.reason.stale, v.flagged), (2, false), "{}", v.summary());
    let mut calls = shuffled(&seen);
    let v = judge_with(&precise(), calls.clone());
    assert_eq!((v.reason.stale, v.flagged), (7, true), "{}", v.summary());
    assert_eq!(v.signals, vec![Signal::Repeat]);
    // The same `sed -i` again is no landing and repeats too.
    calls.push(bash_exit("sed -i 's/a/b/' a.py", 0).with_output(""));
    let v = judge_with(&precise(), calls.clone());
    assert_eq!((v.reason.stale, v.flagged), (8, true), "{}", v.summary());
    // A new write at the end unflags.
    calls.push(bash_exit("sed -i 's/b/c/' a.py", 0));
    let v = judge_with(&precise(), calls.clone());
    assert!(!v.flagged, "{}", v.summary());
    // Ablated, `repeat` is not computed.
    let v = judge_with(&precise_without_repeat(), calls);
    assert_eq!((v.reason.repeat, v.reason.stale), (0, 0));
}

/// `stale` and `stale_long` (precise, rule `repeat`): what echoes and what does not. Each row: 3
/// unique calls, then the calls of the row; the figures are how many of the last 8 and of the
/// last 14 calls echo one of the 16 calls before them, and 6 of 8 or 9 of 14 fire before
/// `min_calls`.
#[test]
fn precise_stale_counts_echoes_of_recent_calls() {
    let test = |out: &str| bash_exit("pytest tests/t.py -x", 1).with_output(out);
    let view = |a: u64, b: u64| bash_exit(&format!("sed -n '{a},{b}p' src/a.py"), 0);
    let land = |i: u32| bash_exit(&format!("sed -i 's/x{i}/y/' src/a.py"), 0);
    let poll = |out: &str| bash_exit("sleep 30 && tail -n 5 /tmp/job.log", 0).with_output(out);
    let grep = || bash_exit("grep -n 'def total' src/a.py", 0);
    let grepped = || grep().with_output("12: def total(items):");
    let rows: Vec<(&str, Vec<Call>, u32, u32)> = vec![
        (
            "one file reread in overlapping ranges, a failing test between",
            vec![
                view(10, 60),
                test("1 failed"),
                view(20, 80),
                view(5, 50),
                test("1 failed"),
                view(30, 90),
                view(12, 70),
                test("1 failed"),
                view(40, 60),
            ],
            7,
            7,
        ),
        (
            "paging with new offsets shows new lines",
            (0..8).map(|p| view(p * 40 + 1, p * 40 + 40)).collect(),
            0,
            0,
        ),
        (
            "pages that overlap the one before by a quarter show mostly new lines",
            (0..8).map(|p| view(p * 30 + 1, p * 30 + 40)).collect(),
            0,
            0,
        ),
        (
            "a view inside an earlier one shows nothing new",
            vec![view(1, 100), view(20, 60), view(101, 200), view(150, 170)],
            2,
            2,
        ),
        (
            "the same test after each real edit: it sees a new output each time",
            (0..4)
                .flat_map(|i| vec![land(i), test(&format!("{i} failed"))])
                .collect(),
            0,
            0,
        ),
        (
            "a poll echoes nothing",
            (0..8).map(|_| poll("12% done")).collect(),
            0,
            0,
        ),
        (
            "a landing between two views: the view and the test see new outputs",
            vec![
                view(10, 60).with_output("before"),
                test("1 failed"),
                land(0),
                view(10, 60).with_output("after"),
                test("2 failed"),
            ],
            0,
            0,
        ),
        (
            "right after a landing, the calls made before it see new outputs: they echo from \
             their second occurrence on (a grep without output hash too: its exit status says \
             nothing across the landing, and its echo counts beside the others')",
            vec![
                view(10, 60).with_output("before"),
                test("1 failed"),
                grep(),
                land(0),
                test("2 failed"),
                view(10, 60).with_output("after"),
                grep(),
                test("2 failed"),
                grep(),
                view(10, 60).with_output("after"),
                test("2 failed"),
            ],
            4,
            4,
        ),
        (
            "a noisy loop: three calls again and again, one new call in every three or four",
            vec![
                view(10, 60),
                test("1 failed"),
                grepped(),
                unique(10),
                test("1 failed"),
                view(10, 60),
                unique(11),
                grepped(),
                view(10, 60),
                test("1 failed"),
                unique(12),
                grepped(),
                test("1 failed"),
                view(10, 60),
                unique(13),
                grepped(),
                test("1 failed"),
                view(10, 60),
            ],
            6,
            11,
        ),
    ];
    for (name, tail, stale, stale_long) in rows {
        let mut calls: Vec<Call> = (0..3).map(unique).collect();
        calls.extend(tail);
        let v = judge_with(&precise(), calls.clone());
        assert_eq!(
            (v.reason.stale, v.reason.stale_long),
            (stale, stale_long),
            "{name}: {}",
            v.summary()
        );
        let span_stale =
            v.reason.stale_span_calls >= 10 && v.reason.stale_span * 2 >= v.reason.stale_span_calls;
        assert_eq!(
            v.signals.contains(&Signal::Repeat),
            stale >= 6 || stale_long >= 9 || span_stale,
            "{name}: {}",
            v.summary()
        );
        assert!(v.reason.calls_since_landed < 40, "{name}");
        if stale_long > 0 {
            assert!(
                v.summary().contains(&format!("stale_long={stale_long}")),
                "{name}"
            );
        }
    }
}

/// `stale_span` (precise, rule `repeat`): of the session's calls since it last landed, how many
/// echo; at least 10 such calls of which at least half echo fire before `min_calls`. Each row: 3
/// unique calls and a landing, then the calls of the row; the figures are the echoes and the
/// calls since that landing. A loop that shuffles three calls among new ones right after a change
/// echoes too seldom for 6 of 8 or 9 of 14, and still repeats half of what it does.
#[test]
fn precise_stale_span_counts_echoes_since_the_last_landing() {
    let a = || bash_exit("pytest tests/t.py -x", 1).with_output("1 failed");
    let b = || bash_exit("head -n 40 src/user.py", 0).with_output("user");
    let c = || bash_exit("python -c 'import m; print(m.f())'", 1).with_output("Traceback");
    let land = |i: u32| bash_exit(&format!("sed -i 's/x{i}/y/' src/a.py"), 0);
    let noisy = || {
        vec![
            a(),
            b(),
            a(),
            unique(10),
            b(),
            c(),
            a(),
            unique(11),
            c(),
            b(),
        ]
    };
    let rows: Vec<(&str, Vec<Call>, u32, u32, bool)> = vec![
        (
            "three calls shuffled with new ones: 5 of the 10 calls since the landing echo",
            noisy(),
            5,
            10,
            true,
        ),
        (
            "the same, one call shorter: 9 calls are too few",
            noisy().into_iter().take(9).collect(),
            4,
            9,
            false,
        ),
        (
            "the same with one more new call: 5 of 11 is less than half",
            noisy()
                .into_iter()
                .take(6)
                .chain([unique(12)])
                .chain(noisy().into_iter().skip(6))
                .collect(),
            5,
            11,
            false,
        ),
        (
            "a landing at the end unflags",
            noisy().into_iter().chain([land(1)]).collect(),
            0,
            0,
            false,
        ),
        (
            "the same test after each real edit echoes nothing",
            (0..6)
                .flat_map(|i| {
                    vec![
                        land(i + 1),
                        bash_exit("pytest tests/t.py -x", 1).with_output(&format!("{i} failed")),
                    ]
                })
                .collect(),
            0,
            1,
            false,
        ),
    ];
    for (name, tail, echoes, calls_since, flagged) in rows {
        let mut calls: Vec<Call> = (0..3).map(unique).collect();
        calls.push(land(0));
        calls.extend(tail);
        let v = judge_with(&precise(), calls.clone());
        assert_eq!(
            (v.reason.stale_span, v.reason.stale_span_calls),
            (echoes, calls_since),
            "{name}: {}",
            v.summary()
        );
        assert!(
            v.reason.stale < 6 && v.reason.stale_long < 9 && v.reason.repeat < 5,
            "{name}: {}",
            v.summary()
        );
        assert_eq!(v.flagged, flagged, "{name}: {}", v.summary());
        if flagged {
            assert_eq!(v.signals, vec![Signal::Repeat], "{name}");
            assert!(
                v.summary()
                    .contains(&format!("stale_span={echoes}/{calls_since}")),
                "{name}: {}",
                v.summary()
            );
        }
        // The design computes none of it.
        let v = judge_with(&DetectConfig::design(), calls);
        assert_eq!((v.reason.stale_span, v.reason.stale_span_calls), (0, 0));
    }
}

/// `failing` (precise, rule `repeat`): the session's last calls are one call that failed each
/// time, in a row, whatever the errors said; 5 of them fire before `min_calls` (the count at
/// which Gemini CLI and Cline stop one call made again and again; a few failures of one call,
/// its error changing, are the peers' "not stuck": OpenHands' random-lines negatives, Roo Code's
/// three identical calls). Each row follows 30 unique calls.
#[test]
fn precise_failing_fires_on_the_same_call_failing_five_times_in_a_row() {
    let test =
        |exit: i64, output: &str| bash_exit("pytest tests/t.py -x", exit).with_output(output);
    let failed = || test(1, "1 failed");
    let moved = |line: u32| test(1, &format!("tests/t.py:{line}: AssertionError"));
    let rejected = || {
        Call::completed(
            "edit",
            json!({"filePath": format!("{DIR}/a.py"), "oldString": "x", "newString": "y"}),
        )
        .with_status(CallStatus::Error)
        .with_metadata(json!({"diff": ""}))
        .with_output("oldString not found")
    };
    let poll = || bash("sleep 30 && tail -n 5 /tmp/suite.log");
    let lines = |n: u32| (1..=n).map(|i| moved(10 * i)).collect::<Vec<_>>();
    let rows: Vec<(&str, Vec<Call>, u32, bool)> = vec![
        (
            "the same call failing five times, its error new each time",
            lines(5),
            5,
            true,
        ),
        (
            "four times is not enough: a few failures whose error changes (the environment \
             answering) pass",
            lines(4),
            4,
            false,
        ),
        (
            "the same failure four times",
            vec![failed(), failed(), failed(), failed()],
            4,
            false,
        ),
        (
            "four passing runs",
            vec![test(0, "ok"), test(0, "ok"), test(0, "ok"), test(0, "ok")],
            0,
            false,
        ),
        (
            "another call failing, then this one four times",
            [vec![bash_exit("ruff check .", 1)], lines(4)].concat(),
            4,
            false,
        ),
        (
            "failing four times, then passing",
            [lines(4), vec![test(0, "ok")]].concat(),
            0,
            false,
        ),
        (
            "a poll breaks the row",
            [vec![moved(1), poll()], lines(4)].concat(),
            4,
            false,
        ),
        (
            "another call breaks it",
            [vec![moved(1), unique(99)], lines(4)].concat(),
            4,
            false,
        ),
        (
            "a rejected edit sent three times, then the file read: the agent moves on",
            vec![
                rejected(),
                rejected(),
                rejected(),
                read(&format!("{DIR}/a.py"), 1, 40).with_output("x = 1"),
            ],
            0,
            false,
        ),
    ];
    for (name, tail, failing, flagged) in rows {
        let mut calls: Vec<Call> = (0..30).map(unique).collect();
        calls.extend(tail);
        let v = judge_with(&precise(), calls.clone());
        assert_eq!(v.reason.failing, failing, "{name}: {}", v.summary());
        assert!(
            v.reason.stale < 6
                && v.reason.stale_long < 9
                && v.reason.repeat < 5
                && v.reason.recur < 5,
            "{name}: {}",
            v.summary()
        );
        assert_eq!(v.flagged, flagged, "{name}: {}", v.summary());
        if flagged {
            assert_eq!(v.signals, vec![Signal::Repeat], "{name}");
            assert!(
                v.summary().contains(&format!("failing={failing}")),
                "{name}"
            );
        }
        // A landing at the end unflags.
        let mut landed = calls.clone();
        landed.push(bash_exit("sed -i 's/x/y/' src/a.py", 0));
        assert_eq!(judge_with(&precise(), landed).reason.failing, 0, "{name}");
        // The design computes none of it.
        assert_eq!(judge_with(&DetectConfig::design(), calls).reason.failing, 0);
    }
    // The same failure a fifth time is both: the same call and result five times in a row.
    let mut calls: Vec<Call> = (0..30).map(unique).collect();
    calls.extend(std::iter::repeat_n(rejected(), 5));
    let v = judge_with(&precise(), calls);
    assert_eq!(
        (v.reason.failing, v.reason.repeat),
        (5, 5),
        "{}",
        v.summary()
    );
    // A landing between two failures starts the row over: what failed after it is a new failure.
    let mut calls: Vec<Call> = (0..30).map(unique).collect();
    calls.extend(lines(3));
    calls.push(bash_exit("sed -i 's/x/y/' tests/t.py", 0).with_output(""));
    calls.extend(lines(3));
    let v = judge_with(&precise(), calls);
    assert_eq!(v.reason.failing, 3, "{}", v.summary());
    assert!(!v.flagged, "{}", v.summary());
}

/// `recur` (precise, rule `repeat`): one call and result the agent keeps coming back to between
/// new calls; 5 times among the session's last 16 calls, 4 of them among its last 12, fire
/// before `min_calls`. Each row follows 30 unique calls; `a` marks the call, `.` a new one.
#[test]
fn precise_recur_fires_on_one_call_and_result_coming_back() {
    let a = || bash_exit("nl -ba src/user.py | sed -n 1,400p", 0).with_output("user");
    let mut fresh = 100;
    let mut calls_of = |pattern: &str| -> Vec<Call> {
        pattern
            .chars()
            .map(|c| {
                fresh += 1;
                if c == 'a' { a() } else { unique(fresh) }
            })
            .collect()
    };
    let rows: Vec<(&str, Vec<Call>, u32, bool)> = vec![
        ("5 times in 12 calls", calls_of("a.a..a..a..a"), 5, true),
        (
            "5 times in 16 calls, 4 of them in the last 12",
            calls_of("a...a...a...a..a"),
            5,
            true,
        ),
        (
            "4 times in the last 16 calls: a fifth before them is forgotten",
            calls_of("a............a.a.a.a"),
            4,
            false,
        ),
        (
            "every fourth call: 3 of the last 12",
            calls_of("a...a...a...a...a"),
            0,
            false,
        ),
    ];
    for (name, tail, recur, flagged) in rows {
        let mut calls: Vec<Call> = (0..30).map(unique).collect();
        calls.extend(tail);
        let v = judge_with(&precise(), calls.clone());
        assert_eq!(v.reason.recur, recur, "{name}: {}", v.summary());
        assert!(
            v.reason.stale < 6 && v.reason.stale_long < 9 && v.reason.repeat < 5,
            "{name}: {}",
            v.summary()
        );
        assert_eq!(v.flagged, flagged, "{name}: {}", v.summary());
        if flagged {
            assert_eq!(v.signals, vec![Signal::Repeat], "{name}");
            assert!(v.summary().contains(&format!("recur={recur}")), "{name}");
        }
        let mut landed = calls.clone();
        landed.push(bash_exit("sed -i 's/x/y/' src/a.py", 0));
        assert_eq!(judge_with(&precise(), landed).reason.recur, 0, "{name}");
        assert_eq!(judge_with(&DetectConfig::design(), calls).reason.recur, 0);
    }
    // A new output each time is progress: no recur.
    let mut calls: Vec<Call> = (0..30).map(unique).collect();
    calls.extend((0..6).map(|i| bash_exit("pytest tests/t.py -x", 1).with_output(&format!("{i}"))));
    assert_eq!(judge_with(&precise(), calls).reason.recur, 0);
}

/// A check that passes the same way after each landed change confirms it (a real Claude Code
/// run: edit, `sh test.sh` printing `ok`, commit, over and over): no prefix is flagged. The same
/// failure after each landed change is the loop the landings did not fix, and is.
#[test]
fn precise_a_passing_check_after_each_landing_confirms_it() {
    let check = |exit: i64, out: &str| bash_exit("sh test.sh", exit).with_output(out);
    let edit_n = |n: usize| {
        Call::completed(
            "edit",
            json!({"filePath": format!("{DIR}/c.txt"), "oldString": format!("{n}"), "newString": format!("{}", n + 1)}),
        )
        .with_metadata(json!({ "diff": format!("-{n}\n+{}", n + 1) }))
    };
    let run = |exit: i64, out: &str| -> Vec<Call> {
        let mut calls = Vec::new();
        for n in 0..14 {
            calls.push(read(&format!("{DIR}/c.txt"), 1, 2).with_output(&format!("count = {n}")));
            calls.push(edit_n(n));
            calls.push(check(exit, out));
        }
        calls
    };
    let first_flag = |calls: &[Call]| {
        (1..=calls.len()).find(|&k| judge_with(&precise(), calls[..k].to_vec()).flagged)
    };
    assert_eq!(first_flag(&run(0, "ok")), None);
    let failing = run(1, "FAIL: count is wrong");
    let at = first_flag(&failing).expect("the same failure after each change is a loop");
    assert!(at <= 15, "flagged at call {at}");
}

/// Found by `cargo xtask fuzz` (session-file, export): figures the model or a file controls
/// (read offsets and limits, file lengths, diff counts) at the end of u64 overflowed in the
/// reread ranges, the read coverage and the edit check. Every profile judges them without
/// panicking, and an edit with an absurd diff count still lands.
#[test]
fn figures_at_the_end_of_u64_saturate() {
    let max = u64::MAX;
    let mut calls = Vec::new();
    for _ in 0..50 {
        calls.push(read("/repo/a.py", max, max));
        calls.push(read("/repo/a.py", max - 1, 2));
        calls.push(read("/repo/a.py", 1, max));
    }
    let huge_edit = Call::completed("edit", json!({"filePath": "/repo/a.py"}))
        .with_metadata(json!({"filediff": {"additions": max, "deletions": max}}));
    let mut session = Session::new("ses_max");
    session.directory = Some("/repo".into());
    session.line_counts.insert("/repo/a.py".into(), max);
    session.calls = calls;
    for profile in ["design", "precise"] {
        let mut config = DetectConfig::design();
        config.set("profile", profile).unwrap();
        let verdict = judge_session(&session, None, &config);
        assert!(verdict.reason.calls_since_landed > 0, "{profile}");
        let mut landed = session.clone();
        landed.calls.push(huge_edit.clone());
        let verdict = judge_session(&landed, None, &config);
        assert!(!verdict.flagged, "{profile}: a landing at the end unflags");
    }
}

/// The default judges every agent alike: a session that works through bash and one that works
/// through the edit and read tools speak as early. Each row: the calls, and whether the default
/// flags them (the design waits for `min_calls` on each).
#[test]
fn the_default_judges_bash_and_tool_sessions_alike() {
    let pytest = || bash_exit("pytest tests/t.py -x", 1).with_output("1 failed");
    let rows: Vec<(&str, Vec<Call>, bool)> = vec![
        (
            "bash alone, the same failing test 5 times",
            (0..5).map(|_| pytest()).collect(),
            true,
        ),
        (
            "the same failing test 5 times after an edit through the edit tool",
            std::iter::once(edit("-a\n+b"))
                .chain((0..5).map(|_| pytest()))
                .collect(),
            true,
        ),
        (
            "the same read 5 times, no bash call",
            (0..5)
                .map(|_| read(&format!("{DIR}/a.py"), 1, 50))
                .collect(),
            true,
        ),
        (
            "five different reads",
            (0..5)
                .map(|i| read(&format!("{DIR}/a{i}.py"), 1, 50))
                .collect(),
            false,
        ),
    ];
    for (name, calls, flagged) in rows {
        let v = judge_with(&DetectConfig::default(), calls.clone());
        assert_eq!(v.flagged, flagged, "{name}: {}", v.summary());
        assert!(
            !judge_with(&DetectConfig::design(), calls).flagged,
            "{name}"
        );
    }
}

#[test]
fn no_progress_calls_are_the_calls_repeat_counts_as_echoes() {
    // One flag per call of the session: the same call and output as one just before it, or the
    // same `sed -i` again (no landing), echoes; a first call, a new output, a landing and a call
    // that does not count do not.
    let hashed = |c: &str, out: &str| bash(c).with_output(out);
    let calls = vec![
        unique(0),
        hashed("cat a.py", "a"),
        hashed("cat a.py", "a"),
        hashed("sed -i 's/a/b/' a.py", "").with_metadata(json!({"exit": 0})),
        hashed("cat a.py", "b"),
        hashed("cat a.py", "b"),
        hashed("sed -i 's/a/b/' a.py", "").with_metadata(json!({"exit": 0})),
        hashed("pytest -x", "1 failed").with_status(CallStatus::Running),
        hashed("cat a.py", "b"),
    ];
    let flags = detect_core::no_progress_calls(&session("ses_np", calls.clone()), &precise());
    assert_eq!(
        flags,
        [false, false, true, false, false, true, true, false, true]
    );
    // What `repeat` counts over the last 8 counted calls is the same.
    let echoed = flags.iter().filter(|f| **f).count();
    let v = judge_with(&precise(), calls);
    assert_eq!(
        usize::try_from(v.reason.stale).unwrap(),
        echoed,
        "{}",
        v.summary()
    );
}

/// Every prefix of `calls` judged under the default: the first call (1-based) flagged, if any.
fn first_flag(calls: &[Call]) -> Option<usize> {
    (1..=calls.len()).find(|&k| judge_with(&precise(), calls[..k].to_vec()).flagged)
}

/// Progress read from outputs (`output_landings`): a `git commit` whose output shows the commit
/// lands whatever its exit; a bash write with no exit lands at the view of its file that shows
/// new content, and not at a view that shows what was seen before.
#[test]
fn precise_outputs_show_landings() {
    let commit = |exit: Value| {
        bash("git commit -qam 'fix' && pytest -q")
            .with_metadata(json!({ "exit": exit }))
            .with_output("[main 4e1f0a2] fix\n 1 file changed, 1 insertion(+)\n1 failed")
    };
    // Rows: the last call, whether it lands (a landing at the end unflags the loop before it).
    let rows: Vec<(&str, Call, bool)> = vec![
        (
            "a commit whose output shows it, exit 1 (the tests after it failed)",
            commit(json!(1)),
            true,
        ),
        ("the same, no exit", commit(Value::Null), true),
        (
            "a commit that failed: no commit line in the output",
            bash("git commit -qam fix")
                .with_metadata(json!({"exit": 1}))
                .with_output("nothing to commit, working tree clean"),
            false,
        ),
        (
            "a commit line printed by something that is not git",
            bash("cat notes.txt").with_output("[main 4e1f0a2] fix"),
            false,
        ),
    ];
    let looping: Vec<Call> = (0..8)
        .map(|_| bash_exit("pytest -q", 1).with_output("1 failed"))
        .collect();
    for (name, last, lands) in rows {
        let mut calls = looping.clone();
        calls.push(last.clone());
        let v = judge_with(&precise(), calls.clone());
        assert_eq!(!v.flagged, lands, "{name}: {}", v.summary());
        assert_eq!(v.reason.calls_since_landed == 0, lands, "{name}");
        // The design reads no output: only `exit: 0` lands a commit.
        assert!(judge(calls).reason.calls_since_landed > 0, "{name}");
    }

    // A write through bash with no exit status (an opencode `/shell` call records none).
    let write = |n: u32| bash(&format!("cat > calc.py <<'EOF'\nVALUE = {n}\nEOF"));
    let view = |content: &str| bash("cat calc.py").with_output(content);
    let test = || bash("python -m pytest -q").with_output("1 failed");
    let stuck: Vec<Call> = vec![test(), view("VALUE = 1"), test(), view("VALUE = 1"), test()];
    // Rows: the calls after the loop, and the call (index into them) that lands.
    let rows: Vec<(&str, Vec<Call>, Option<usize>)> = vec![
        (
            "the write, then its file shows new content",
            vec![write(2), view("VALUE = 2")],
            Some(1),
        ),
        (
            "the write, then its file shows what it showed before",
            vec![write(1), view("VALUE = 1")],
            None,
        ),
        (
            "the write, then another file",
            vec![write(2), bash("cat other.py").with_output("x")],
            None,
        ),
        (
            "no write: the same file with new content is no landing",
            vec![view("VALUE = 2")],
            None,
        ),
        (
            "the write failed (an exit status): no landing, whatever the view",
            vec![
                write(2).with_metadata(json!({"exit": 1})),
                view("VALUE = 2"),
            ],
            None,
        ),
        (
            "a read of the file confirms it too",
            vec![
                write(2),
                Call::completed("read", json!({"filePath": format!("{DIR}/calc.py")}))
                    .with_output("1: VALUE = 2"),
            ],
            Some(1),
        ),
    ];
    for (name, after, landing) in rows {
        let mut calls = stuck.clone();
        calls.extend(after.iter().cloned());
        let facts = detect_core::session_facts(&session("ses_o", calls.clone()), &precise());
        let landed: Vec<usize> = facts
            .iter()
            .enumerate()
            .filter(|(_, f)| f.landed)
            .map(|(i, _)| i - stuck.len())
            .collect();
        assert_eq!(landed, landing.into_iter().collect::<Vec<_>>(), "{name}");
    }
}

/// `git commit --amend` that made the commit `hash`.
fn amend_commit(hash: &str) -> Call {
    bash("git commit --amend --no-edit")
        .with_metadata(json!({"exit": 0}))
        .with_output(&format!(
            "[main {hash}] fix\n 1 file changed, 1 insertion(+)"
        ))
}

/// What, the calls, which of them land under `precise`, under the design.
type LandingRow = (&'static str, Vec<Call>, Vec<usize>, Vec<usize>);

/// Issue 48's landings, after eight failing test runs.
fn landing_rows() -> Vec<LandingRow> {
    let a_py = format!("{DIR}/a.py");
    let commit = amend_commit;
    let write = |meta: Value| {
        Call::completed("write", json!({"filePath": a_py, "content": "x = 1\n"}))
            .with_metadata(meta)
            .with_output("The file has been updated.")
    };
    let edit_meta = |meta: Value| {
        Call::completed(
            "edit",
            json!({"filePath": a_py, "oldString": "x = 1", "newString": "x = 2"}),
        )
        .with_metadata(meta)
        .with_output("Edit applied successfully.")
    };
    let zero = json!({"additions": 0, "deletions": 0});
    vec![
        (
            "a commit, the same commit named again, a new commit",
            vec![commit("4e1f0a2"), commit("4e1f0a2"), commit("9b7c3d1")],
            vec![0, 2],
            vec![0, 1, 2],
        ),
        (
            "a commit recorded without its hash lands each time",
            vec![
                commit("4e1f0a2").with_metadata(json!({"exit": 0, "committed": true})),
                commit("4e1f0a2").with_metadata(json!({"exit": 0, "committed": true})),
            ],
            vec![0, 1],
            vec![0, 1],
        ),
        (
            "a write that reports an update with no line changed (what the file holds)",
            vec![write(
                json!({"type": "update", "diff": "(update)", "filediff": zero}),
            )],
            vec![],
            vec![0],
        ),
        (
            "a write that creates a file, no lines counted",
            vec![write(
                json!({"type": "create", "diff": "(create)", "filediff": zero}),
            )],
            vec![0],
            vec![0],
        ),
        (
            "a write that updates lines",
            vec![write(json!({"type": "update", "diff": "@@ -1 +1 @@",
                       "filediff": {"additions": 1, "deletions": 1}}))],
            vec![0],
            vec![0],
        ),
        (
            "an edit whose unified diff has no hunk and no line changed",
            vec![edit_meta(
                json!({"diff": format!("Index: {a_py}\n===\n--- {a_py}\n+++ {a_py}\n"),
                       "filediff": zero}),
            )],
            vec![],
            vec![0],
        ),
        (
            "an edit whose result only says it updated the file: the zero counts say nothing",
            vec![edit_meta(
                json!({"diff": "(the result reports the file updated)", "filediff": zero}),
            )],
            vec![0],
            vec![0],
        ),
    ]
}

/// Issue 48, "a landing is new work" (precise, rule `repeated_writes`): a commit whose output
/// names a commit the session landed already, and an edit or write whose metadata says it wrote
/// the file as it was, are no landing. Rows: the calls after a loop of failing tests, and the
/// calls among them (indices) that land under `precise` and under the design.
#[test]
fn precise_a_landing_is_new_work() {
    let looping: Vec<Call> = (0..8)
        .map(|_| bash_exit("pytest -q", 1).with_output("1 failed"))
        .collect();
    for (name, after, precise_lands, design_lands) in landing_rows() {
        let mut calls = looping.clone();
        calls.extend(after);
        let landed = |config: &DetectConfig| -> Vec<usize> {
            detect_core::session_facts(&session("ses_n", calls.clone()), config)
                .iter()
                .enumerate()
                .filter(|(_, f)| f.landed)
                .map(|(i, _)| i - looping.len())
                .collect()
        };
        assert_eq!(landed(&precise()), precise_lands, "{name}");
        assert_eq!(landed(&DetectConfig::design()), design_lands, "{name}");
        // The incremental detector settles them alike.
        let config = precise();
        let mut detector = detect_core::SessionDetector::new(&session("ses_p", vec![]), &config);
        for call in &calls {
            detector.push(call);
        }
        assert_eq!(
            detector.verdict(),
            judge_with(&precise(), calls.clone()),
            "{name}"
        );
    }
    // The same commit amended again and again: the first lands, the rest repeat it.
    let calls: Vec<Call> = (0..6).map(|_| amend_commit("4e1f0a2")).collect();
    let v = judge_with(&precise(), calls.clone());
    assert_eq!(v.signals, vec![Signal::Repeat], "{}", v.summary());
    assert_eq!(v.reason.calls_since_landed, 5);
    assert!(!judge(calls).flagged);
}

/// Issue 48: a success known only by its status (no output recorded) says that the call ran,
/// not what it saw. Its echo counts only as often as other calls echo (as a poll's does), and a
/// block of 2-3 such calls repeated is no `repeat` (Gemini CLI's test of different calls in
/// turn, which judges calls alone); one such call five times in a row still is (Gemini CLI's
/// and Cline's own rule), and a block with a failure in it still repeats the failure.
#[test]
fn precise_a_success_known_only_by_its_status_is_no_evidence() {
    let blind =
        |pattern: &str| Call::completed("search_file_content", json!({ "pattern": pattern }));
    let times = |block: &[Call], n: usize| -> Vec<Call> {
        (0..n).flat_map(|_| block.iter().cloned()).collect()
    };
    let three = [
        blind("TODO"),
        blind("FIXME"),
        Call::completed("list_directory", json!({"path": "src"})),
    ];
    let rows: Vec<(&str, Vec<Call>, u32, u32, bool)> = vec![
        (
            "three different calls in turn, three times",
            times(&three, 3),
            0,
            0,
            false,
        ),
        (
            "two in turn, four times",
            times(&three[..2], 4),
            0,
            0,
            false,
        ),
        (
            "one call five times in a row",
            times(&three[..1], 5),
            5,
            0,
            true,
        ),
        (
            "a search and a failing test in turn, three times",
            times(&[blind("TODO"), bash_exit("pytest -q", 1)], 3),
            6,
            4,
            true,
        ),
        (
            "the same three calls with their outputs, three times",
            times(
                &[
                    blind("TODO").with_output("a.py:3: # TODO"),
                    blind("FIXME").with_output(""),
                    three[2].clone().with_output("a.py"),
                ],
                3,
            ),
            9,
            6,
            true,
        ),
    ];
    for (name, tail, repeat, stale, flagged) in rows {
        let mut calls: Vec<Call> = (0..3).map(unique).collect();
        calls.extend(tail);
        let v = judge_with(&precise(), calls);
        assert_eq!(
            (v.reason.repeat, v.reason.stale, v.flagged),
            (repeat, stale, flagged),
            "{name}: {}",
            v.summary()
        );
    }
}

/// Issue 35: a write/test/commit cycle of 45 calls (opencode `/shell` calls, no exit status),
/// where `git add calc.py` prints nothing and shows up 15 times, is progress: each commit lands,
/// and an empty output says nothing a landing could have changed.
#[test]
fn precise_a_write_test_commit_cycle_is_not_flagged() {
    let mut calls = Vec::new();
    for n in 0..15 {
        calls.push(bash(&format!(
            "cat > calc.py <<'EOF'\ndef add(a, b):\n    return a + b + {n}\nEOF"
        )));
        calls.push(bash("git add calc.py").with_output(""));
        calls.push(
            bash(&format!("git commit -m 'step {n}'")).with_output(&format!(
                "[main {:07x}] step {n}\n 1 file changed",
                0x4e1_f0a2 + n
            )),
        );
    }
    assert_eq!(calls.len(), 45);
    assert_eq!(first_flag(&calls), None);
    // The same cycle without its commits is a loop around the same `git add`.
    let uncommitted: Vec<Call> = calls
        .iter()
        .filter(|c| {
            !c.input["command"]
                .as_str()
                .unwrap()
                .starts_with("git commit")
        })
        .cloned()
        .collect();
    assert!(first_flag(&uncommitted).is_some());
}

/// Tool polls (`poll_tools`, default `["poll"]`) are polls as `sleep N && tail LOG` is: never a
/// loop by themselves; `slow` counts a poll by call and result. A stall: nothing but the same
/// poll seeing the same result for `poll_max_s` seconds or `poll_max_calls` polls.
#[test]
fn precise_polls_wait_and_stall() {
    let poll = |out: &str, t: i64| {
        Call::completed("poll", json!({"shell_id": "bash_3"}))
            .with_output(out)
            .with_time(t, t + 1_000)
    };
    let sleep = |t: i64| bash("sleep 60").with_output("").with_time(t, t + 60_000);
    // A job whose output grows, polled 60 times a minute apart: never flagged.
    let growing: Vec<Call> = (0..60)
        .map(|i| poll(&format!("test {i}/200 ok"), i * 60_000))
        .collect();
    assert_eq!(first_flag(&growing), None);
    // The same job silent: 19 polls in 19 minutes are waiting; the 20th is a stall.
    let silent: Vec<Call> = (0..25)
        .map(|i| poll("(no new output)", i * 60_000))
        .collect();
    assert_eq!(first_flag(&silent), Some(20));
    let v = judge_with(&precise(), silent[..20].to_vec());
    assert_eq!(v.signals, vec![Signal::Stall]);
    assert_eq!((v.reason.stall_polls, v.reason.stall_s), (20, 19 * 60));
    assert!(
        v.summary().contains("stall_s=1140 stall_polls=20 (stalled"),
        "{}",
        v.summary()
    );
    // Polls 5 minutes apart, with a sleep between: 30 minutes without news is a stall.
    let mut slow = Vec::new();
    for i in 0..12 {
        slow.push(sleep(i * 300_000));
        slow.push(poll("(no new output)", i * 300_000 + 240_000));
    }
    let at = first_flag(&slow).expect("a stall");
    let v = judge_with(&precise(), slow[..at].to_vec());
    assert_eq!(v.signals, vec![Signal::Stall], "{}", v.summary());
    assert!(
        v.reason.stall_s >= 1800 && v.reason.stall_polls < 20,
        "{}",
        v.summary()
    );
    // Another call between the polls ends the run; so does new output.
    let mut broken = silent.clone();
    broken.insert(
        12,
        bash("git status")
            .with_output("clean")
            .with_time(12 * 60_000 - 500, 12 * 60_000 - 100),
    );
    assert_eq!(first_flag(&broken), None);
    let mut moved = silent.clone();
    moved[12] = poll("test 1/200 ok", 12 * 60_000);
    assert_eq!(first_flag(&moved), None);
    // Configurable, and the tool list too: a tool not listed is an ordinary call (the same
    // call and result 5 times: `repeat`).
    let mut config = precise();
    config.set("poll_max_calls", "10").unwrap();
    assert!(judge_with(&config, silent[..10].to_vec()).flagged);
    config.set("poll_tools", "BashOutput").unwrap();
    let v = judge_with(&config, silent[..5].to_vec());
    assert_eq!(v.signals, vec![Signal::Repeat]);
    // The design has no polls and no stall: 25 identical calls are under `min_calls`.
    assert!(!judge(silent).flagged);
}

/// `circle` (precise, rule `repeat`): 6 of the session's last 11 calls repeat, with the same
/// result, one of at most 4 calls: a loop around a few calls with a third of new calls between.
/// Polls that saw what they saw count as repeats as many times as other calls repeat. Each row
/// follows 30 unique calls; letters are calls with one result each, `.` a new call, `w` a poll
/// of a job that shows nothing new.
#[test]
fn precise_circle_fires_on_a_few_calls_coming_back_between_new_ones() {
    let mut fresh = 500;
    let mut calls_of = |pattern: &str| -> Vec<Call> {
        pattern
            .chars()
            .map(|c| {
                fresh += 1;
                match c {
                    '.' => unique(fresh),
                    'w' => Call::completed("poll", json!({"shell_id": "bash_2"}))
                        .with_output("(no new output)"),
                    c => bash(&format!("cat {c}.py")).with_output(&format!("{c} content")),
                }
            })
            .collect()
    };
    // Rows: the pattern, the `circle` figure at its end, whether the session is flagged.
    let rows = [
        ("abc.abc.abc", 6, true),
        ("abc.abc.a..", 4, false),
        // Five different calls coming back: no circle (an investigation going round its files).
        ("abcde.abcde.", 0, false),
        ("awbwawbw.ab", 7, true),
        // Polls alone: waiting, whatever they see.
        ("wwwwwwwwwww", 0, false),
        ("w.w.w.w.w.w", 0, false),
    ];
    for (pattern, circle, flagged) in rows {
        let mut calls: Vec<Call> = (0..30).map(unique).collect();
        calls.extend(calls_of(pattern));
        let v = judge_with(&precise(), calls);
        assert_eq!(v.reason.circle, circle, "{pattern}: {}", v.summary());
        assert_eq!(v.flagged, flagged, "{pattern}: {}", v.summary());
    }
}
