//! `notify-send -u URGENCY -- TITLE SUMMARY[\nLINK]`, as an argv, with a timeout.

use crate::{ChannelError, DesktopChannel, Outcome};
use agentwatch_http::head;
use agentwatch_process::RunError;
use alert_state::{AlertEvent, Severity};
use std::time::Duration;

/// How much of the program's stderr an error keeps.
const STDERR_HEAD_CHARS: usize = 300;

/// notify-send's urgency for a severity.
fn urgency(severity: Severity) -> &'static str {
    match severity {
        Severity::Critical => "critical",
        Severity::Warning => "normal",
        Severity::Info => "low",
    }
}

/// An argv item: unchanged, except NUL (which no argv can hold) becomes U+FFFD.
fn arg(text: &str) -> String {
    text.replace('\0', "\u{FFFD}")
}

/// The arguments after the program name. `--` ends the options, so a title or summary that
/// starts with `-` is shown, not parsed as an option. notify-send needs a non-empty title.
pub(crate) fn args(event: &AlertEvent) -> Vec<String> {
    let title = if event.title.trim().is_empty() {
        "agentwatch alert"
    } else {
        event.title.as_str()
    };
    vec![
        "-u".to_owned(),
        urgency(event.severity).to_owned(),
        "--".to_owned(),
        arg(title),
        arg(&body(event)),
    ]
}

/// The summary, and the link to the alert's page on a line of its own.
fn body(event: &AlertEvent) -> String {
    match event.link() {
        Some(link) => format!("{}\n{link}", event.summary),
        None => event.summary.clone(),
    }
}

pub(crate) fn deliver(
    channel: &DesktopChannel,
    event: &AlertEvent,
    timeout: Duration,
) -> Result<Outcome, ChannelError> {
    run(&channel.program, &args(event), timeout)
}

/// Runs `program args…` with [`agentwatch_process::run`], keeping the head of stderr for an
/// error.
fn run(program: &str, args: &[String], timeout: Duration) -> Result<Outcome, ChannelError> {
    let done = match agentwatch_process::run(program, args, &[], timeout) {
        Ok(done) => done,
        Err(RunError::NotFound(e)) => {
            return Ok(Outcome::Warning(format!(
                "{program} not found ({e}): desktop notification skipped (install libnotify's \
                 notify-send, or set the channel's program)"
            )));
        }
        Err(RunError::Spawn(message)) => {
            return Err(ChannelError::Spawn {
                program: program.to_owned(),
                message,
            });
        }
        Err(RunError::Wait(e)) => {
            return Err(ChannelError::Spawn {
                program: program.to_owned(),
                message: format!("could not wait for it: {e}"),
            });
        }
        Err(RunError::Timeout(timeout)) => {
            return Err(ChannelError::CommandTimeout {
                program: program.to_owned(),
                timeout,
            });
        }
    };
    if done.status.success() {
        Ok(Outcome::Sent)
    } else {
        let stderr = done.stderr.trim();
        Err(ChannelError::Exited {
            program: program.to_owned(),
            status: done.status.to_string(),
            stderr: if stderr.is_empty() {
                "(no stderr)".to_owned()
            } else {
                head(stderr, STDERR_HEAD_CHARS)
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentwatch_testkit::TempDir;

    fn script(dir: &TempDir, name: &str, body: &str) -> String {
        let path = dir.path.join(name);
        std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        path.display().to_string()
    }

    #[test]
    fn a_program_that_never_exits_is_killed_at_the_timeout() {
        let dir = TempDir::new("agentwatch-desktop-hang");
        // `exec` so that killing the child kills the waiting process itself.
        let program = script(&dir, "notify-send", "exec sleep 30");
        let started = std::time::Instant::now();
        let error = run(&program, &[], Duration::from_millis(200)).unwrap_err();
        assert!(started.elapsed() < Duration::from_secs(5));
        assert!(
            matches!(&error, ChannelError::CommandTimeout { program: p, .. } if *p == program),
            "{error:?}"
        );
    }

    #[test]
    fn a_program_that_leaves_a_child_holding_stderr_is_judged_by_its_status() {
        let dir = TempDir::new("agentwatch-desktop-daemon");
        // The background sleep keeps stderr open after the script exits 0.
        let program = script(&dir, "notify-send", "sleep 5 &\nexit 0");
        let outcome = run(&program, &[], Duration::from_secs(1)).unwrap();
        assert_eq!(outcome, Outcome::Sent);
    }

    #[test]
    fn nul_bytes_become_replacement_characters_and_blank_titles_a_default() {
        assert_eq!(arg("a\0b"), "a\u{FFFD}b");
        let event = AlertEvent {
            dedup_key: "k".into(),
            severity: Severity::Info,
            state: alert_state::EventState::Resolve,
            title: " ".into(),
            summary: "s\0".into(),
            details: serde_json::Value::Null,
            source: "x".into(),
        };
        assert_eq!(
            args(&event),
            ["-u", "low", "--", "agentwatch alert", "s\u{FFFD}"]
        );
    }
}
