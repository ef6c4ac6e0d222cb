//! What the detector says of a call about to run (`SessionDetector::pending`), which a pre-tool
//! hook asks before it lets a call run: flagged or not, whether the call changes something, and
//! how this very call fared among the session's last calls.

use detect_core::{Call, CallStatus, DetectConfig, PendingCall, Session, SessionDetector};
use serde_json::json;

const DIR: &str = "/home/user/proj";

fn bash(command: &str) -> Call {
    Call::completed(
        "bash",
        json!({ "command": command, "description": "run it" }),
    )
}

fn failing(command: &str, output: &str) -> Call {
    bash(command)
        .with_metadata(json!({"exit": 1}))
        .with_output(output)
}

fn edit(old: &str, new: &str) -> Call {
    Call::completed(
        "edit",
        json!({"filePath": format!("{DIR}/a.py"), "oldString": old, "newString": new}),
    )
    .with_metadata(json!({"diff": format!("-{old}\n+{new}")}))
}

fn detector(calls: &[Call]) -> SessionDetector {
    let session = Session {
        directory: Some(DIR.to_owned()),
        ..Session::new("ses_p")
    };
    let mut detector = SessionDetector::new(&session, &DetectConfig::default());
    for call in calls {
        detector.push(call);
    }
    detector
}

/// Pending, as the agent announces it: no status of its own, no result.
fn pending(call: &Call) -> Call {
    let mut call = call.clone();
    call.status = CallStatus::Running;
    call.output_hash = None;
    call.metadata = serde_json::Value::Null;
    call
}

#[test]
fn a_failing_command_repeated_is_flagged_and_counted_as_the_same_call() {
    let probe = failing("python3 -c \"import nosuchmodule\"", "ModuleNotFoundError");
    let mut calls = vec![bash("ls"), bash("cat README.md")];
    calls.extend(std::iter::repeat_n(probe.clone(), 5));
    let seen = detector(&calls).pending(&pending(&probe));
    assert_eq!(
        seen,
        PendingCall {
            flagged: true,
            changes: false,
            same_calls: 5,
            echoed: 4,
            failed: 5,
            last_ago: Some(1),
        }
    );
    // The model-written description is noise: the same command is the same call.
    let described = Call::completed(
        "bash",
        json!({"command": "python3 -c \"import nosuchmodule\"", "description": "again"}),
    );
    assert_eq!(detector(&calls).pending(&described).same_calls, 5);
}

/// A row: (what, the history, the pending call, flagged, changes, same calls).
type Row = (&'static str, Vec<Call>, Call, bool, bool, u32);

/// Table: (what, the history, the pending call, flagged, changes, same calls).
#[test]
fn what_a_pending_call_is() {
    let probe = failing("pytest tests/test_x.py", "1 failed");
    let loop_of = |n| std::iter::repeat_n(probe.clone(), n).collect::<Vec<_>>();
    let rows: Vec<Row> = vec![
        ("a fresh session", vec![], probe.clone(), false, false, 0),
        (
            "twice, not a loop yet",
            loop_of(2),
            probe.clone(),
            false,
            false,
            2,
        ),
        (
            "another command in a loop",
            loop_of(5),
            bash("git status"),
            true,
            false,
            0,
        ),
        (
            "an edit in a loop changes something",
            loop_of(5),
            edit("a", "b"),
            true,
            true,
            0,
        ),
        (
            "an edit sent again after it landed changes nothing",
            [vec![edit("a", "b")], loop_of(5)].concat(),
            edit("a", "b"),
            true,
            false,
            1,
        ),
        (
            "a bash write not made before changes something",
            loop_of(5),
            bash("sed -i s/a/b/ src/x.py"),
            true,
            true,
            0,
        ),
    ];
    for (what, history, call, flagged, changes, same) in rows {
        let seen = detector(&history).pending(&pending(&call));
        assert_eq!(
            (seen.flagged, seen.changes, seen.same_calls),
            (flagged, changes, same),
            "{what}: {seen:?}"
        );
    }
}

#[test]
fn asking_pushes_nothing() {
    let probe = failing("make check", "error: 2");
    let mut detector = detector(&std::iter::repeat_n(probe.clone(), 3).collect::<Vec<_>>());
    let before = detector.verdict();
    for _ in 0..5 {
        detector.pending(&probe);
    }
    assert_eq!(detector.verdict(), before);
    detector.push(&probe);
    assert_eq!(detector.pending(&probe).same_calls, 4);
}
