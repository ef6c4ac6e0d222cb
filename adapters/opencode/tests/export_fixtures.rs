//! The sample `opencode export` sessions, converted and judged: snapshots of the verdicts.

use agentwatch_opencode::session_from_export;
use detect_core::{DetectConfig, Session, judge_sessions};
use serde_json::Value;

fn load(name: &str) -> Session {
    let path = format!(
        "{}/../../fixtures/opencode/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let value: Value = serde_json::from_str(&text).unwrap();
    session_from_export(&value).unwrap()
}

fn samples() -> Vec<Session> {
    vec![
        load("export_fixture_parent.json"),
        load("export_fixture_child.json"),
    ]
}

#[test]
fn export_samples_convert_to_the_session_model() {
    let sessions = samples();
    let (parent, child) = (&sessions[0], &sessions[1]);
    assert_eq!(parent.calls.len(), 10);
    assert_eq!(parent.agent.as_deref(), Some("build"));
    assert_eq!(child.parent_id.as_deref(), Some(parent.id.as_str()));
    assert_eq!(child.calls.len(), 4);
    insta::assert_json_snapshot!("parent_session", parent);
}

#[test]
fn verdicts_on_export_samples_default_config() {
    insta::assert_json_snapshot!(
        "verdicts_default",
        judge_sessions(&samples(), &DetectConfig::default())
    );
}

#[test]
fn verdicts_on_export_samples_sensitive_config() {
    // Thresholds small enough for these short sessions: the child's four identical reads and the
    // parent's three identical failing `cargo test` runs show up.
    let mut config = DetectConfig::default();
    for (k, v) in [
        ("min_calls", "3"),
        ("top_min", "3"),
        ("cum_min", "3"),
        ("window", "10"),
    ] {
        config.set(k, v).unwrap();
    }
    insta::assert_json_snapshot!("verdicts_sensitive", judge_sessions(&samples(), &config));
}

/// The tick's typed message reader (`lite`) and the export reader (`call_from_part`) see the
/// same calls in every recorded sample, compared as the detector sees them: one meaning of an
/// opencode message, whichever way it arrives.
#[test]
fn both_message_readers_agree_on_every_sample() {
    for name in [
        "export_fixture_parent.json",
        "export_fixture_child.json",
        "export_real_shell_session.json",
    ] {
        let path = format!(
            "{}/../../fixtures/opencode/{name}",
            env!("CARGO_MANIFEST_DIR")
        );
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        let value: Value = serde_json::from_str(&text).unwrap();
        let messages = &value["messages"];
        let page = agentwatch_opencode::lite::parse_messages(&messages.to_string()).unwrap();
        let mut compared = 0;
        for (lite, whole) in page.iter().zip(messages.as_array().unwrap()) {
            let from_lite: Vec<_> = lite.calls().collect();
            let from_export: Vec<_> = whole["parts"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(agentwatch_opencode::call_from_part)
                .map(|mut call| {
                    call.metadata = agentwatch_opencode::lite::detector_metadata(&call.metadata);
                    call
                })
                .collect();
            assert_eq!(from_lite, from_export, "{name}");
            compared += from_lite.len();
        }
        assert!(compared > 0, "{name}: no calls compared");
    }
}
