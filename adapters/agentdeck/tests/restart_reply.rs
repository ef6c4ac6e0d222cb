//! agent-deck's `session restart` replies, as the adapter reads them: the recorded samples of
//! agent-deck's own output (`samples/agent_deck_session_restart_head.json`) and its plain-text
//! forms.

use agentwatch_agentdeck::cli::restart_reply;
use recovery_policy::restart_guard::RestartReply;

fn sample_reply(key: &str, exit_code: i32) -> RestartReply {
    let path = format!(
        "{}/tests/samples/agent_deck_session_restart_head.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let all: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).expect("sample")).expect("JSON");
    restart_reply(exit_code, &all[key].to_string())
}

#[test]
fn restart_replies_from_agent_deck_samples() {
    assert_eq!(
        sample_reply("restarted", 0),
        RestartReply::Restarted { warning: None }
    );
    assert!(matches!(
        sample_reply("restarted_with_codex_warning", 0),
        RestartReply::Restarted { warning: Some(_) }
    ));
    assert!(
        matches!(sample_reply("skipped_freshness_issue30", 0), RestartReply::Refused { reason } if reason.contains("freshness window"))
    );
    assert!(matches!(
        sample_reply("refusal_from_test", 0),
        RestartReply::Refused { .. }
    ));
    assert!(
        matches!(sample_reply("failed_exit_1", 1), RestartReply::Failed { error } if error.starts_with("failed to restart session"))
    );
    assert!(
        matches!(sample_reply("restarted", 1), RestartReply::Failed { .. }),
        "a non-zero exit is never a success"
    );
    let plain = [
        (0, "✓ Restarted session: conductor-travel", "restarted"),
        (
            0,
            "✓ Skipped restart of conductor-travel: session is running",
            "refused",
        ),
        (1, "Error: boom", "failed"),
        (0, "", "failed"),
    ];
    for (exit_code, stdout, expected) in plain {
        let got = match restart_reply(exit_code, stdout) {
            RestartReply::Restarted { .. } => "restarted",
            RestartReply::Refused { .. } => "refused",
            RestartReply::Failed { .. } => "failed",
        };
        assert_eq!(got, expected, "{stdout:?}");
    }
}
