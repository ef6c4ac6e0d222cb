//! The desktop channel through an argv-recording notify-send stand-in, and the log channel.

use agentwatch_channels::{
    ChannelError, ChannelKind, DEFAULT_DESKTOP_PROGRAM, DesktopChannel, LogChannel, Outcome,
    deliver,
};
use agentwatch_testkit::{StandIns, TempDir, stand_in};
use alert_state::{AlertEvent, EventState, Severity};
use serde_json::json;
use std::path::Path;

fn event(state: EventState, severity: Severity) -> AlertEvent {
    AlertEvent {
        dedup_key: "opencode-loop:ses_a".into(),
        severity,
        state,
        title: "opencode loop: build".into(),
        summary: "top: read src/lib.rs x14 in the last 60 calls".into(),
        details: json!({"root": "ses_a"}),
        source: "agentwatch@devbox".into(),
    }
}

fn desktop(program: &Path) -> ChannelKind {
    ChannelKind::Desktop(DesktopChannel {
        program: program.display().to_string(),
    })
}

// ---- desktop ----

#[test]
fn notify_send_gets_urgency_title_and_summary_as_argv() {
    let dir = TempDir::new("agentwatch-desktop-argv");
    let stand_ins = StandIns::new(&dir.path.join("bin"));
    let program = stand_in(&stand_ins, "notify-send", "", 0);
    let channel = desktop(&program);
    for (state, severity) in [
        (EventState::Escalate, Severity::Critical),
        (EventState::Trigger, Severity::Warning),
        (EventState::Resolve, Severity::Info),
        // agentwatch's hook refused calls: the alert's own urgency.
        (EventState::Blocked, Severity::Critical),
    ] {
        assert_eq!(
            deliver(&channel, &event(state, severity)),
            Ok(Outcome::Sent)
        );
    }
    let title = "opencode loop: build";
    let summary = "top: read src/lib.rs x14 in the last 60 calls";
    assert_eq!(
        stand_ins.calls("notify-send"),
        [
            ["-u", "critical", "--", title, summary],
            ["-u", "normal", "--", title, summary],
            ["-u", "low", "--", title, summary],
            ["-u", "critical", "--", title, summary],
        ]
    );
}

#[test]
fn shell_metacharacters_arrive_as_single_unchanged_argv_items() {
    let dir = TempDir::new("agentwatch-desktop-hostile");
    let stand_ins = StandIns::new(&dir.path.join("bin"));
    let program = stand_in(&stand_ins, "notify-send", "", 0);
    let canary = dir.path.join("pwned");
    let title = format!(
        "loop: \"quoted\" 'single'; echo hi && $(touch {c}) `touch {c}` | tee > {c}",
        c = canary.display()
    );
    let summary = "-u low\nsecond line\r\n\ttab $HOME * ? [a] \\ ; é 🚨 --help".to_owned();
    let mut hostile = event(EventState::Trigger, Severity::Warning);
    hostile.title = title.clone();
    hostile.summary = summary.clone();

    assert_eq!(deliver(&desktop(&program), &hostile), Ok(Outcome::Sent));
    assert_eq!(
        stand_ins.calls("notify-send"),
        [vec![
            "-u".to_owned(),
            "normal".to_owned(),
            "--".to_owned(),
            title,
            summary
        ]]
    );
    assert!(!canary.exists(), "a shell ran the title");
}

#[test]
fn a_missing_notify_send_is_a_warning_not_an_error() {
    let dir = TempDir::new("agentwatch-desktop-missing");
    let absent = dir.path.join("notify-send");
    for program in [
        absent.display().to_string(),
        "agentwatch-test-no-such-notify-send".to_owned(),
    ] {
        let outcome = deliver(
            &ChannelKind::Desktop(DesktopChannel {
                program: program.clone(),
            }),
            &event(EventState::Trigger, Severity::Critical),
        );
        match outcome {
            Ok(Outcome::Warning(why)) => {
                assert!(why.starts_with(&format!("{program} not found")), "{why}");
            }
            other => panic!("expected a warning, got {other:?}"),
        }
    }
}

#[test]
fn a_failing_notify_send_is_an_error_with_its_stderr_head() {
    let dir = TempDir::new("agentwatch-desktop-fails");
    let program = dir.path.join("notify-send");
    std::fs::write(
        &program,
        "#!/bin/sh\necho 'GDBus.Error:org.freedesktop.DBus.Error.ServiceUnknown: no notification daemon' >&2\nexit 3\n",
    )
    .unwrap();
    make_executable(&program);
    let error = deliver(
        &desktop(&program),
        &event(EventState::Trigger, Severity::Critical),
    )
    .unwrap_err();
    match &error {
        ChannelError::Exited {
            program: p,
            status,
            stderr,
        } => {
            assert_eq!(p, &program.display().to_string());
            assert!(status.contains('3'), "{status}");
            assert_eq!(
                stderr,
                "GDBus.Error:org.freedesktop.DBus.Error.ServiceUnknown: no notification daemon"
            );
        }
        other => panic!("expected an exit error, got {other:?}"),
    }

    // The argv-recording stand-in failing without stderr.
    let stand_ins = StandIns::new(&dir.path.join("bin"));
    let silent = stand_in(&stand_ins, "notify-send", "", 1);
    let error = deliver(
        &desktop(&silent),
        &event(EventState::Trigger, Severity::Critical),
    )
    .unwrap_err();
    assert!(
        matches!(&error, ChannelError::Exited { stderr, .. } if stderr == "(no stderr)"),
        "{error:?}"
    );
}

#[test]
fn a_program_that_is_not_executable_is_a_spawn_error() {
    let dir = TempDir::new("agentwatch-desktop-noexec");
    let program = dir.path.join("notify-send");
    std::fs::write(&program, "not a program").unwrap();
    let error = deliver(
        &desktop(&program),
        &event(EventState::Trigger, Severity::Critical),
    )
    .unwrap_err();
    assert!(matches!(error, ChannelError::Spawn { .. }), "{error:?}");
}

#[test]
fn the_default_program_is_notify_send() {
    assert_eq!(DesktopChannel::default().program, DEFAULT_DESKTOP_PROGRAM);
    assert_eq!(DEFAULT_DESKTOP_PROGRAM, "notify-send");
}

fn make_executable(path: &Path) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
}

// ---- log ----

#[test]
fn the_log_file_gets_one_json_line_per_event_appended() {
    let dir = TempDir::new("agentwatch-log");
    let path = dir.path.join("alerts.jsonl");
    std::fs::write(&path, "{\"earlier\":true}\n").unwrap();
    let channel = ChannelKind::Log(LogChannel {
        path: Some(path.clone()),
    });
    let mut multi_line = event(EventState::Trigger, Severity::Warning);
    multi_line.summary = "line one\nline two".into();
    let events = [
        multi_line,
        event(EventState::Blocked, Severity::Warning),
        event(EventState::Resolve, Severity::Info),
    ];
    for e in &events {
        assert_eq!(deliver(&channel, e), Ok(Outcome::Sent));
    }

    let text = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 4, "{text}");
    assert!(lines[2].contains("\"state\":\"blocked\""), "{text}");
    assert_eq!(lines[0], "{\"earlier\":true}");
    assert!(text.ends_with('\n'));
    for (line, e) in lines[1..].iter().zip(&events) {
        let back: AlertEvent = serde_json::from_str(line).unwrap();
        assert_eq!(&back, e);
    }
}

#[test]
fn a_log_file_that_cannot_be_opened_is_an_error_naming_it() {
    let dir = TempDir::new("agentwatch-log-missing");
    let path = dir.path.join("no-such-dir").join("alerts.jsonl");
    let error = deliver(
        &ChannelKind::Log(LogChannel {
            path: Some(path.clone()),
        }),
        &event(EventState::Trigger, Severity::Warning),
    )
    .unwrap_err();
    assert!(
        matches!(&error, ChannelError::Log { target, .. } if *target == path.display().to_string()),
        "{error:?}"
    );
}

#[test]
fn the_log_goes_to_stderr_without_a_path() {
    assert_eq!(
        deliver(
            &ChannelKind::Log(LogChannel { path: None }),
            &event(EventState::Trigger, Severity::Warning)
        ),
        Ok(Outcome::Sent)
    );
}

#[test]
fn the_alert_link_is_the_last_line_of_the_body() {
    let dir = TempDir::new("agentwatch-desktop-link");
    let stand_ins = StandIns::new(&dir.path.join("bin"));
    let program = stand_in(&stand_ins, "notify-send", "", 0);
    let mut e = event(EventState::Trigger, Severity::Warning);
    e.set_link("http://127.0.0.1:8080/admin/trees/ses_a".into());
    assert_eq!(deliver(&desktop(&program), &e), Ok(Outcome::Sent));
    assert_eq!(
        stand_ins.calls("notify-send"),
        [[
            "-u",
            "normal",
            "--",
            "opencode loop: build",
            "top: read src/lib.rs x14 in the last 60 calls\nhttp://127.0.0.1:8080/admin/trees/ses_a"
        ]]
    );
}
