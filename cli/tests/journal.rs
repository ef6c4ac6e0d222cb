//! The journal as journald sees it: one logfmt line per event, each with its syslog priority
//! (`<3>` error or critical alert, `<4>` warning, `<6>` info) when standard error is the stream
//! `JOURNAL_STREAM` names, none on a pipe; a quiet tick is one line; a hostile id or title can
//! neither forge a line nor reach the terminal.

use agentwatch_testkit::TempDir;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::{Command, Stdio};

const T0: i64 = 1_796_000_000;
/// The alert source, fixed so the snapshot does not name the host.
const SOURCE: &str = "watchdog.source=\"agentwatch@test\"";
const JOBS: &[&str] = &["watchdog=", "alert=", "deck=", "recover=", "run=", "serve="];

fn agentwatch(home: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_agentwatch"));
    cmd.env_clear()
        .env("HOME", home)
        .env("XDG_CONFIG_HOME", home.join("config"))
        .env("XDG_STATE_HOME", home.join("state"))
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .stdin(Stdio::null())
        .stdout(Stdio::null());
    cmd
}

/// Runs `args` with standard error connected to a file that `JOURNAL_STREAM` names, as systemd
/// connects a service to the journal; the exit code and what was written.
fn under_journal(home: &Path, name: &str, args: &[&str]) -> (Option<i32>, String) {
    let path = home.join(name);
    let file = std::fs::File::create(&path).unwrap();
    let meta = file.metadata().unwrap();
    let status = agentwatch(home)
        .env("JOURNAL_STREAM", format!("{}:{}", meta.dev(), meta.ino()))
        .args(args)
        .stderr(Stdio::from(file))
        .status()
        .unwrap();
    (status.code(), std::fs::read_to_string(&path).unwrap())
}

/// A logfmt line's `key=value` fields, values unquoted (escapes kept as written); `None` when it
/// does not parse (an unterminated quote, a field without `=`).
fn logfmt(line: &str) -> Option<Vec<(String, String)>> {
    let mut fields = Vec::new();
    let mut rest = line;
    while !rest.is_empty() {
        let (key, after) = rest.split_once('=')?;
        if key.is_empty() || key.contains([' ', '"']) {
            return None;
        }
        let (value, after) = if let Some(quoted) = after.strip_prefix('"') {
            let mut end = None;
            let mut escaped = false;
            for (i, c) in quoted.char_indices() {
                match c {
                    _ if escaped => escaped = false,
                    '\\' => escaped = true,
                    '"' => {
                        end = Some(i);
                        break;
                    }
                    _ => {}
                }
            }
            let end = end?;
            (&quoted[..end], &quoted[end + 1..])
        } else {
            after.split_at(after.find(' ').unwrap_or(after.len()))
        };
        fields.push((key.to_owned(), value.to_owned()));
        rest = after.strip_prefix(' ').unwrap_or(after);
    }
    Some(fields)
}

/// Every line has a priority prefix and a job's `JOB=TIME` first field, and no control
/// character; returns the lines without their prefixes.
fn journal_lines(text: &str) -> Vec<(u8, &str)> {
    assert!(
        !text.chars().any(|c| c.is_control() && c != '\n'),
        "a control character reached the journal: {text:?}"
    );
    text.lines()
        .map(|line| {
            let (level, rest) = line
                .strip_prefix('<')
                .and_then(|l| l.split_once('>'))
                .unwrap_or_else(|| panic!("no priority prefix: {line:?} in {text}"));
            let level: u8 = level.parse().unwrap();
            assert!([3, 4, 6].contains(&level), "{line:?}");
            assert!(
                JOBS.iter().any(|j| rest.starts_with(j)),
                "not a journal line: {line:?} in {text}"
            );
            let fields = logfmt(rest).unwrap_or_else(|| panic!("not logfmt: {line:?}"));
            let time = &fields[0].1;
            assert!(
                time.len() == 25 && time.starts_with("20") && time.ends_with("+00:00"),
                "a line that does not start with JOB=TIME: {line:?}"
            );
            (level, rest)
        })
        .collect()
}

#[test]
fn a_tick_journal_has_priorities_and_a_quiet_tick_is_one_line() {
    let tmp = TempDir::new("aw-journal-demo");
    let db = tmp.path.join("aw.db");
    let db = db.to_str().unwrap();
    let first = T0.to_string();
    let (code, text) = under_journal(
        &tmp.path,
        "tick1",
        &[
            "watch", "--once", "--demo", "--db", db, "--now", &first, "--set", SOURCE,
        ],
    );
    assert_eq!(code, Some(0), "{text}");
    journal_lines(&text);
    insta::assert_snapshot!("demo_tick_journal", text);

    // The next tick sees the same loops: the open alerts are flagged again, nothing is sent, and
    // besides its one line about its sources the tick is one line that counts it (no line per
    // tree).
    let second = (T0 + 60).to_string();
    let (code, text) = under_journal(
        &tmp.path,
        "tick2",
        &[
            "watch", "--once", "--demo", "--db", db, "--now", &second, "--set", SOURCE,
        ],
    );
    assert_eq!(code, Some(0), "{text}");
    let lines = journal_lines(&text);
    assert_eq!(lines.len(), 2, "{text}");
    assert!(lines[0].1.contains(" sources="), "{text}");
    assert_eq!(lines[1].0, 6, "{text}");
    assert!(
        lines[1].1.contains(" tick=done ") && lines[1].1.contains(" still_flagged=3"),
        "{text}"
    );
}

#[test]
fn a_pipe_gets_no_priority_prefix() {
    let tmp = TempDir::new("aw-journal-pipe");
    let db = tmp.path.join("aw.db");
    let out = agentwatch(&tmp.path)
        .args(["watch", "--once", "--demo", "--now", &T0.to_string()])
        .arg("--db")
        .arg(&db)
        // A JOURNAL_STREAM inherited from a service whose stderr was redirected since.
        .env("JOURNAL_STREAM", "8:12345")
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(!text.is_empty());
    for line in text.lines() {
        assert!(
            JOBS.iter().any(|j| line.starts_with(j)),
            "a prefix or a stray line on a pipe: {line:?}"
        );
    }
}

#[test]
fn a_hostile_id_or_title_cannot_forge_a_journal_line() {
    use agentwatch_testkit::opencode::{ExportBuilder, looping_calls};
    let tmp = TempDir::new("aw-journal-hostile");
    let id = "ses_x\n<3>watchdog=forged\r\u{1b}[2J\u{9b}31m\u{7f}\u{2028}\" tick=done";
    let title = "title\n<6>alert=forged \u{1b}]0;owned\u{7}\"";
    let file = ExportBuilder::new(id, title, None, T0 * 1000 - 300_000)
        .steps("build\nwatchdog=forged", &looping_calls(45), 1000)
        .write(&tmp.path.join("hostile.json"));
    std::fs::create_dir_all(tmp.path.join("config/agentwatch")).unwrap();
    std::fs::write(
        tmp.path.join("config/agentwatch/config.toml"),
        "[watchdog]\nlocal_llm_enabled = false\n\n[[channels]]\nname = \"log\"\ntype = \"log\"\n",
    )
    .unwrap();
    let db = tmp.path.join("aw.db");
    let (code, text) = under_journal(
        &tmp.path,
        "journal",
        &[
            "watch",
            "--once",
            "--verbose",
            "--now",
            &T0.to_string(),
            "--db",
            db.to_str().unwrap(),
            "--sessions",
            file.to_str().unwrap(),
        ],
    );
    assert_eq!(code, Some(0), "{text}");
    let lines = journal_lines(&text);
    // The alert went through the log channel: a warning with the id escaped inside its field.
    let alert = lines
        .iter()
        .find(|(_, l)| l.starts_with("alert="))
        .unwrap_or_else(|| panic!("no alert line: {text}"));
    assert_eq!(alert.0, 4, "{text}");
    assert!(
        alert
            .1
            .contains(r#"dedup="opencode-loop:ses_x\n<3>watchdog=forged\r"#),
        "{}",
        alert.1
    );
    // Exactly one closing line: the id's ` tick=done` stayed inside its quotes.
    let closing = lines
        .iter()
        .filter(|(_, l)| {
            logfmt(l)
                .unwrap()
                .iter()
                .any(|(k, v)| k == "tick" && v == "done")
        })
        .count();
    assert_eq!(closing, 1, "{text}");
}
