//! `agentwatch detect` end to end: the built binary on files, standard input and bad input.

use std::process::{Command, Output};

fn agentwatch(args: &[&str], stdin: Option<&str>) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_agentwatch"));
    agentwatch_testkit::output_with_stdin(command.args(args), stdin)
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The built-in sample under the default profile, and under the design.
#[test]
fn builtin_sample_table() {
    let out = agentwatch(&["detect"], None);
    assert!(out.status.success(), "{}", stderr(&out));
    insta::assert_snapshot!("detect_builtin_sample", stdout(&out));
    let out = agentwatch(&["detect", "--profile", "design"], None);
    assert!(out.status.success(), "{}", stderr(&out));
    insta::assert_snapshot!("detect_builtin_sample_design", stdout(&out));
}

#[test]
fn json_has_sessions_and_trees() {
    let out = agentwatch(&["detect", "--json", "--profile", "design"], None);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let explore = v["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == "ses_demo_explore")
        .unwrap();
    assert_eq!(explore["flagged"], true);
    assert_eq!(explore["signals"], serde_json::json!(["top", "coverage"]));
    for key in [
        "dup",
        "top",
        "top_what",
        "slow",
        "coverage",
        "coverage_file",
        "landed",
        "calls_since_landed",
    ] {
        assert!(explore["reason"].get(key).is_some(), "reason.{key}");
    }
    // What was read of each session, in every input format.
    assert_eq!(explore["agent"], "opencode");
    assert_eq!(explore["calls"], 44);
    let first = explore["first_flag_at_call"].as_u64().unwrap();
    assert!((1..=44).contains(&first), "{first}");
    for s in v["sessions"].as_array().unwrap() {
        assert!(s["calls"].as_u64().is_some(), "{s}");
        assert!(s.get("first_flag_at_call").is_some(), "{s}");
        assert_eq!(s["agent"], "opencode");
    }
    let tree = &v["trees"][0];
    assert_eq!(tree["root"], "ses_demo_build");
    assert_eq!(tree["dedup_key"], "opencode-loop:ses_demo_build");
    assert_eq!(tree["flagged"], true);
}

#[test]
fn set_overrides_a_threshold() {
    let out = agentwatch(
        &[
            "detect",
            "--json",
            "--profile",
            "design",
            "--set",
            "top_min_ro=30",
            "--set",
            "cover_min=20",
        ],
        None,
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["trees"][0]["flagged"], false);
}

#[test]
fn reads_opencode_export_json() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/opencode");
    let parent = format!("{dir}/export_fixture_parent.json");
    let child = format!("{dir}/export_fixture_child.json");
    let out = agentwatch(
        &[
            "detect",
            "--json",
            "--set",
            "min_calls=3",
            "--set",
            "top_min=4",
            "--set",
            "cum_min=4",
            "--set",
            "dup_min=1",
            &parent,
            &child,
        ],
        None,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        v["trees"].as_array().unwrap().len(),
        1,
        "child joins its parent's tree"
    );
    assert_eq!(
        v["trees"][0]["flagged_sessions"][0]["id"],
        "ses_dd6230bdfffe5bR215DEWc1ZCj"
    );
}

/// Each row: what is wrong, the input, the exit code, what the message must name.
#[test]
fn bad_input_is_a_clear_error_never_a_panic() {
    let huge = "x".repeat(1_000_000);
    let huge_command = format!(
        r#"{{"format":"agentwatch-sessions/1","sessions":[{{"id":"s","calls":[{{"tool":"bash","input":{{"command":"{huge}"}},"status":"completed"}}]}}]}}"#
    );
    let rows: Vec<(&str, String, i32, &str)> = vec![
        ("not JSON", "{oops".into(), 65, "not JSON"),
        ("wrong format", r#"{"format":"x/2","sessions":[]}"#.into(), 65, "x/2"),
        ("call without a tool", r#"{"format":"agentwatch-sessions/1","sessions":[{"id":"s","calls":[{"input":{},"status":"completed"}]}]}"#.into(), 65, "session #0 (s) at calls[0]: missing field `tool`"),
        ("non-string command", r#"{"format":"agentwatch-sessions/1","sessions":[{"id":"s","calls":[{"tool":"bash","input":{"command":42},"status":"completed"}]}]}"#.into(), 65, "command"),
        ("non-object input", r#"{"format":"agentwatch-sessions/1","sessions":[{"id":"s","calls":[{"tool":"read","input":"x","status":"completed"}]}]}"#.into(), 65, r#"session #0 (s) at calls[0].input: invalid type: string "x", expected an object"#),
        ("session without calls key", r#"{"format":"agentwatch-sessions/1","sessions":[{"id":"s"}]}"#.into(), 65, "calls"),
        ("duplicate ids", r#"{"format":"agentwatch-sessions/1","sessions":[{"id":"s","calls":[]},{"id":"s","calls":[]}]}"#.into(), 65, "twice"),
        ("huge command", huge_command, 0, ""),
        ("parent cycle", r#"{"format":"agentwatch-sessions/1","sessions":[{"id":"a","parent_id":"b","calls":[]},{"id":"b","parent_id":"a","calls":[]}]}"#.into(), 0, ""),
    ];
    for (what, input, code, named) in rows {
        let out = agentwatch(&["detect", "-"], Some(&input));
        assert_eq!(out.status.code(), Some(code), "{what}: {}", stderr(&out));
        assert!(stderr(&out).contains(named), "{what}: {}", stderr(&out));
        assert!(!stderr(&out).contains("panicked"), "{what}");
    }
}

#[test]
fn exit_codes_for_missing_files_and_bad_settings() {
    assert_eq!(
        agentwatch(&["detect", "/nonexistent/file.json"], None)
            .status
            .code(),
        Some(66)
    );
    let out = agentwatch(&["detect", "--set", "window=0"], None);
    assert_eq!(out.status.code(), Some(78));
    assert!(stderr(&out).contains("window"));
    assert_eq!(
        agentwatch(&["detect", "--set", "novalue"], None)
            .status
            .code(),
        Some(64)
    );
}

/// 30 unrelated calls, then 12 different files viewed with `sed -n`: the design merges the views
/// into one target (`bash sed -n`, 12 >= top_min); the precise profile does not.
fn twelve_views() -> String {
    let mut calls: Vec<serde_json::Value> = (0..30)
        .map(|i| serde_json::json!({"tool": "bash", "input": {"command": format!("echo{i} step")}, "status": "completed"}))
        .collect();
    calls.extend((0..12).map(|i| serde_json::json!({"tool": "bash", "input": {"command": format!("sed -n 1,80p src/m{i}.py")}, "status": "completed"})));
    serde_json::json!({"format": "agentwatch-sessions/1", "sessions": [{"id": "ses_views", "calls": calls}]})
        .to_string()
}

#[test]
fn profiles_select_the_rules() {
    let input = twelve_views();
    let design = agentwatch(&["detect", "--profile", "design", "-"], Some(&input));
    assert!(
        stdout(&design).contains("FLAGGED agent=opencode calls=42 first_flag_at_call=")
            && stdout(&design).contains(" signals=top "),
        "{}",
        stdout(&design)
    );
    // `precise` is the default; `auto` of earlier versions is read as it.
    for args in [
        &["detect", "-"][..],
        &["detect", "--profile", "precise", "-"][..],
        &["detect", "--set", "profile=precise", "-"][..],
        &["detect", "--profile", "auto", "-"][..],
    ] {
        let out = agentwatch(args, Some(&input));
        assert!(out.status.success(), "{}", stderr(&out));
        assert!(
            stdout(&out).contains("session ses_views ok"),
            "{}",
            stdout(&out)
        );
    }
    let out = agentwatch(&["detect", "--profile", "fast"], None);
    assert_eq!(out.status.code(), Some(64));
    assert!(stderr(&out).contains("--profile fast"), "{}", stderr(&out));
}

#[test]
fn the_profile_reaches_config_and_the_watch_tick() {
    let home = std::env::temp_dir().join(format!("agentwatch-profile-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&home);
    std::fs::create_dir_all(&home).unwrap();
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_agentwatch"))
            .args(args)
            .env("HOME", &home)
            .env("XDG_CONFIG_HOME", home.join("config"))
            .env("XDG_STATE_HOME", home.join("state"))
            .output()
            .unwrap()
    };
    let out = run(&["config", "--set", "profile=precise"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("profile = \"precise\""),
        "{}",
        stdout(&out)
    );
    let out = run(&["config", "--set", "profile=fast"]);
    assert_eq!(out.status.code(), Some(78), "{}", stderr(&out));
    let out = run(&[
        "watch",
        "--once",
        "--demo",
        "--set",
        "profile=precise",
        "--verbose",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("signals=top,coverage,reread"),
        "{}",
        stdout(&out)
    );
    let _ = std::fs::remove_dir_all(&home);
}
