//! Issue 37: `agentwatch man` installs a page per command and subcommand (those `--help` lists),
//! each with its options, the files and the exit codes of the runtime's one table; the main
//! page also has every configuration key.

use agentwatch_runtime::error::code::MEANINGS;
use agentwatch_testkit::TempDir;
use std::path::Path;
use std::process::Output;

fn agentwatch(home: &Path, args: &[&str]) -> Output {
    agentwatch_testkit::isolated_command(env!("CARGO_BIN_EXE_agentwatch"), home)
        .args(args)
        .output()
        .unwrap()
}

/// Every command path `--help` lists, recursively: `[]`, `["alerts"]`, `["alerts", "ack"]`, …
fn commands(home: &Path, path: Vec<String>, out: &mut Vec<Vec<String>>) {
    let mut args: Vec<&str> = path.iter().map(String::as_str).collect();
    args.push("--help");
    let help = String::from_utf8(agentwatch(home, &args).stdout).unwrap();
    out.push(path.clone());
    let Some(list) = help.split("Commands:\n").nth(1) else {
        return;
    };
    for line in list.lines().take_while(|l| l.starts_with("  ")) {
        let name = line.split_whitespace().next().unwrap_or("");
        // A line that continues the one above is indented further.
        if line.starts_with("   ") || name == "help" {
            continue;
        }
        let mut sub = path.clone();
        sub.push(name.to_owned());
        commands(home, sub, out);
    }
}

#[test]
fn a_page_for_every_subcommand_with_files_and_exit_codes() {
    let tmp = TempDir::new("aw-man");
    let dir = tmp.path.join("man1");
    let out = agentwatch(&tmp.path, &["man", "--dir", dir.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let mut all = Vec::new();
    commands(&tmp.path, Vec::new(), &mut all);
    assert!(all.len() > 20, "{all:?}");
    let written = std::fs::read_dir(&dir).unwrap().count();
    assert_eq!(written, all.len(), "one page per command: {all:?}");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains(&format!("wrote {written} pages to")),
        "{out:?}"
    );
    for path in &all {
        let name = std::iter::once("agentwatch")
            .chain(path.iter().map(String::as_str))
            .collect::<Vec<_>>()
            .join("-");
        let file = dir.join(format!("{name}.1"));
        let page =
            std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        assert!(page.contains(&format!(".TH {name} 1 ")), "{name}:\n{page}");
        // roff escapes the dashes of the name line.
        assert!(
            page.contains(&format!(".SH NAME\n{}", name.replace('-', "\\-"))),
            "{name}:\n{page}"
        );
        assert!(page.contains(".SH FILES"), "{name}");
        assert!(page.contains("agentwatch/config.toml"), "{name}");
        assert!(page.contains(".SH \"EXIT STATUS\""), "{name}");
        for (value, sysexits, _) in MEANINGS {
            assert!(
                page.contains(&format!("\\fB{value}\\fR ({sysexits})")),
                "{name} lacks exit code {value}"
            );
        }
    }
    let main = std::fs::read_to_string(dir.join("agentwatch.1")).unwrap();
    assert!(main.contains(".SH CONFIGURATION"), "{main}");
    for key in [
        "\\fBwatchdog.local_llm_enabled\\fR\ndefault true",
        "\\fBwatchdog.detector.top_min\\fR\ndefault 12 (from 1 to 10000)",
        "\\fBchannels[].rate_limit_s\\fR",
        "\\fBdeck.profile\\fR\nunset by default",
    ] {
        assert!(main.contains(key), "{key} not in:\n{main}");
    }
    assert!(MEANINGS.iter().any(|(v, _, _)| *v == 78));
    let ack = std::fs::read_to_string(dir.join("agentwatch-alerts-ack.1")).unwrap();
    assert!(ack.contains("\\fB\\-\\-db\\fR"), "{ack}");
}

#[test]
fn the_default_directory_is_the_users_man1_and_print_writes_nothing() {
    let tmp = TempDir::new("aw-man-home");
    let out = agentwatch(&tmp.path, &["man"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let dir = tmp.path.join(".local/share/man/man1");
    assert!(dir.join("agentwatch-alerts-silence.1").is_file());

    let other = TempDir::new("aw-man-print");
    let out = agentwatch(&other.path, &["man", "--print"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).starts_with(".ie"));
    assert!(!other.path.join(".local").exists());
}

/// Pages written where `man` does not look say how to make it look there (issue 49); the
/// default directory, or a root on `MANPATH`, says nothing more.
#[test]
fn a_directory_man_does_not_search_says_how_to_add_it() {
    let tmp = TempDir::new("aw-man-path");
    let dir = tmp.path.join("pages/man1");
    let said = |out: &Output| String::from_utf8_lossy(&out.stdout).into_owned();
    let out = agentwatch(&tmp.path, &["man", "--dir", dir.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let root = tmp.path.join("pages");
    assert!(
        said(&out).contains(&format!("export MANPATH=\"{}:$(manpath)\"", root.display())),
        "{}",
        said(&out)
    );
    let on_path = agentwatch_testkit::isolated_command(env!("CARGO_BIN_EXE_agentwatch"), &tmp.path)
        .env("MANPATH", format!("/usr/share/man:{}", root.display()))
        .args(["man", "--dir", dir.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!said(&on_path).contains("MANPATH"), "{}", said(&on_path));
    let default = agentwatch(&tmp.path, &["man"]);
    assert!(!said(&default).contains("MANPATH"), "{}", said(&default));
    let flat = agentwatch(
        &tmp.path,
        &["man", "--dir", tmp.path.join("flat").to_str().unwrap()],
    );
    assert!(said(&flat).contains("man -l "), "{}", said(&flat));
}

/// The pages as `man` renders them (preconv for the UTF-8 text, `-k`): groff reads every page
/// without a warning.
#[test]
#[ignore = "needs groff"]
fn groff_reads_every_page_without_a_warning() {
    let tmp = TempDir::new("aw-man-groff");
    let dir = tmp.path.join("man1");
    let out = agentwatch(&tmp.path, &["man", "--dir", dir.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let out = std::process::Command::new("groff")
            .args(["-k", "-man", "-Tutf8", "-ww", "-z"])
            .arg(&path)
            .output()
            .expect("groff runs");
        assert!(out.status.success(), "{}: {out:?}", path.display());
        assert_eq!(
            String::from_utf8_lossy(&out.stderr),
            "",
            "{}",
            path.display()
        );
    }
}
