//! The command line's own contract: usage errors exit 64 (clap's included), help and version
//! exit 0, and a configuration value out of range is a named error (78), never a panic.

use std::process::{Command, Output};

fn agentwatch(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_agentwatch"))
        .args(args)
        .env("XDG_CONFIG_HOME", "/nonexistent-agentwatch-test")
        .env("XDG_STATE_HOME", "/nonexistent-agentwatch-test")
        .output()
        .expect("agentwatch runs")
}

#[test]
fn usage_errors_exit_64() {
    for args in [
        &["watch", "--bogus"][..],
        &["no-such-command"],
        &["deck", "--now", "soon"],
        &[],
    ] {
        let out = agentwatch(args);
        assert_eq!(out.status.code(), Some(64), "{args:?}: {out:?}");
        assert!(!out.stderr.is_empty(), "{args:?}: says why");
    }
}

#[test]
fn help_and_version_exit_0() {
    for args in [&["--help"][..], &["--version"], &["watch", "--help"]] {
        let out = agentwatch(args);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {out:?}");
        assert!(!out.stdout.is_empty(), "{args:?}");
    }
}

/// Each row: a `--set` whose value no timeout can take, and the key the error must name.
#[test]
fn huge_timeouts_are_config_errors_naming_the_key() {
    for (set, key) in [
        (
            "opencode.request_timeout_s=1e300",
            "opencode.request_timeout_s",
        ),
        ("watchdog.llm.timeout_s=1e300", "watchdog.llm.timeout_s"),
        (
            "recover.restart_timeout_s=1e300",
            "recover.restart_timeout_s",
        ),
        ("deck.restart_timeout_s=1e300", "deck.restart_timeout_s"),
        (
            "opencode.connect_timeout_s=nan",
            "opencode.connect_timeout_s",
        ),
    ] {
        let out = agentwatch(&["config", "--set", set]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(78), "{set}: {stderr}");
        assert!(stderr.contains(key), "{set}: {stderr}");
        assert!(!stderr.contains("panicked"), "{set}: {stderr}");
    }
}
