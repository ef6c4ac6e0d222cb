//! `agentwatch completions SHELL` and `agentwatch man` print what a packager installs.

use std::process::Command;

const SUBCOMMANDS: &[&str] = &[
    "watch",
    "status",
    "alerts",
    "recover",
    "deck",
    "run",
    "doctor",
    "init",
    "hooks",
    "completions",
    "man",
];

fn stdout_of(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_agentwatch"))
        .args(args)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{args:?}: {out:?}");
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn completion_scripts_name_every_subcommand() {
    for shell in ["bash", "zsh", "fish"] {
        let script = stdout_of(&["completions", shell]);
        for sub in SUBCOMMANDS {
            assert!(script.contains(sub), "{shell} script lacks {sub}");
        }
    }
    assert!(stdout_of(&["completions", "bash"]).contains("complete -F"));
}

#[test]
fn an_unknown_shell_is_a_usage_error() {
    let out = Command::new(env!("CARGO_BIN_EXE_agentwatch"))
        .args(["completions", "cmd.exe"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(64));
}

#[test]
fn the_man_page_is_roff_naming_the_subcommands() {
    let page = stdout_of(&["man", "--print"]);
    assert!(page.starts_with(".ie") || page.contains("\n.TH "), "{page}");
    assert!(page.contains(".TH agentwatch 1"), "{page}");
    for sub in SUBCOMMANDS {
        assert!(page.contains(sub), "man page lacks {sub}");
    }
}
