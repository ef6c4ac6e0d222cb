//! Standard output and exit codes under hostile conditions: a full device, a reader that closes
//! the pipe, input that is not UTF-8, no home directory, and session ids or titles that try to
//! forge journal lines or reach the terminal.

use agentwatch_testkit::TempDir;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

const T0: i64 = 1_796_000_000;

fn agentwatch(home: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_agentwatch"));
    cmd.env_clear()
        .env("HOME", home)
        .env("XDG_CONFIG_HOME", home.join("config"))
        .env("XDG_STATE_HOME", home.join("state"))
        .env("PATH", std::env::var("PATH").unwrap_or_default());
    cmd
}

#[test]
fn a_full_device_on_stdout_exits_74_with_a_message() {
    let tmp = TempDir::new("aw-out-full");
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .expect("/dev/full exists on Linux");
    let out = agentwatch(&tmp.path)
        .args(["detect", "--json"])
        .stdout(full)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(74), "{stderr}");
    assert!(
        stderr.contains("cannot write to standard output"),
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn a_closed_pipe_ends_the_command_quietly_with_0() {
    let tmp = TempDir::new("aw-out-pipe");
    for args in [&["detect"][..], &["detect", "--json"][..]] {
        let mut child = agentwatch(&tmp.path)
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // The reader goes away before the first byte is read (`| head -c0`).
        drop(child.stdout.take());
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {stderr}");
        assert!(stderr.is_empty(), "{args:?}: {stderr}");
    }
}

#[test]
fn input_that_is_not_utf8_exits_65() {
    let tmp = TempDir::new("aw-out-utf8");
    let file = tmp.path.join("latin1.json");
    std::fs::write(&file, b"{\"sessions\": [\"caf\xe9\"]}").unwrap();
    let out = agentwatch(&tmp.path)
        .args(["detect", file.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(65),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let mut child = agentwatch(&tmp.path)
        .args(["detect", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"\xff\xfe not text")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(65),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn no_home_and_no_state_dir_is_a_clear_error_not_a_db_in_the_working_dir() {
    let tmp = TempDir::new("aw-out-nohome");
    let work = tmp.path.join("work");
    std::fs::create_dir_all(&work).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_agentwatch"))
        .args(["watch", "--once", "--now", &T0.to_string()])
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .current_dir(&work)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(78), "{stderr}");
    assert!(stderr.contains("XDG_STATE_HOME"), "{stderr}");
    assert!(stderr.contains("--db"), "{stderr}");
    let left: Vec<_> = std::fs::read_dir(&work).unwrap().collect();
    assert!(left.is_empty(), "nothing is created in the working dir");
}

#[test]
fn hostile_ids_and_titles_cannot_forge_lines_or_reach_the_terminal() {
    use agentwatch_testkit::opencode::{ExportBuilder, looping_calls};
    let tmp = TempDir::new("aw-out-hostile");
    let id = "ses_x\ntick done: 0 alert(s) fired\u{1b}[2J\u{9b}31m";
    let file = ExportBuilder::new(id, "title\n\u{1b}]0;owned\u{7}", None, T0 * 1000 - 300_000)
        .steps("build\nwatchdog=forged", &looping_calls(45), 1000)
        .write(&tmp.path.join("hostile.json"));
    let db = tmp.path.join("aw.db");
    for args in [
        vec!["detect", file.to_str().unwrap()],
        vec![
            "watch",
            "--once",
            "--verbose",
            "--now",
            "1796000000",
            "--db",
            db.to_str().unwrap(),
            "--sessions",
            file.to_str().unwrap(),
        ],
        // The alert the tick opened, as `alerts` lists it (id and title from the file).
        vec!["alerts", "--db", db.to_str().unwrap()],
    ] {
        let out = agentwatch(&tmp.path).args(&args).output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {stderr}");
        for (name, text) in [("stdout", &stdout), ("stderr", &stderr)] {
            assert!(
                !text.chars().any(|c| c.is_control() && c != '\n'),
                "{args:?}: a control character reached {name}: {text:?}"
            );
            for line in text.lines() {
                assert!(
                    !line.starts_with("tick done: 0")
                        && !line.starts_with("watchdog=forged")
                        && !line.starts_with("]0;"),
                    "{args:?}: forged {name} line {line:?} in {text:?}"
                );
            }
        }
        assert!(stdout.contains("ses_x\\ntick done"), "{args:?}: {stdout}");
    }
}
