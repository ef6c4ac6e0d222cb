//! The merge of our entry into settings files, as tables, and install then uninstall giving
//! back every byte (a proptest over varied files).

use super::jsonc;
use super::settings::{Removal, Spec};
use crate::Agent;
use proptest::prelude::*;
use serde_json::{Value, json};

const CLAUDE: &str = "/usr/bin/agentwatch hook claude";
const OLD: &str = "/opt/old/agentwatch hook claude";

fn claude() -> Spec {
    Spec::of(Agent::Claude)
}

fn spec(agent: Agent) -> Spec {
    Spec::of(agent)
}

/// What installing into `before` gives (the text itself when unchanged).
fn installed(spec: &Spec, before: Option<&str>, command: &str) -> String {
    spec.install(before, command)
        .unwrap()
        .unwrap_or_else(|| before.unwrap().to_owned())
}

#[test]
fn install_merges_into_what_is_there() {
    let ours = r#"{"matcher": "*", "hooks": [{"type": "command", "command": "/usr/bin/agentwatch hook claude", "timeout": 10}]}"#;
    let cases: &[(&str, Option<&str>, &str)] = &[
        (
            "a missing file gets a new one",
            None,
            "{\n  \"hooks\": {\n    \"PreToolUse\": [\n      {\n        \"matcher\": \"*\",\n        \"hooks\": [\n          {\n            \"type\": \"command\",\n            \"command\": \"/usr/bin/agentwatch hook claude\",\n            \"timeout\": 10\n          }\n        ]\n      }\n    ]\n  }\n}\n",
        ),
        (
            "an empty file is a missing one",
            Some(" \n"),
            "{\n  \"hooks\": {\n    \"PreToolUse\": [\n      {\n        \"matcher\": \"*\",\n        \"hooks\": [\n          {\n            \"type\": \"command\",\n            \"command\": \"/usr/bin/agentwatch hook claude\",\n            \"timeout\": 10\n          }\n        ]\n      }\n    ]\n  }\n}\n",
        ),
        (
            "a one-line file stays on one line",
            Some("{\"model\": \"opus\"}"),
            &format!("{{\"model\": \"opus\", \"hooks\": {{\"PreToolUse\": [{ours}]}}}}"),
        ),
        (
            "other hooks stay, ours comes after them",
            Some(
                "{\"hooks\": {\"PreToolUse\": [{\"matcher\": \"Bash\", \"hooks\": [{\"type\": \"command\", \"command\": \"guard\"}]}]}}",
            ),
            &format!(
                "{{\"hooks\": {{\"PreToolUse\": [{{\"matcher\": \"Bash\", \"hooks\": [{{\"type\": \"command\", \"command\": \"guard\"}}]}}, {ours}]}}}}"
            ),
        ),
        (
            "another event's hooks stay",
            Some("{\"hooks\": {\"Stop\": []}}"),
            &format!("{{\"hooks\": {{\"Stop\": [], \"PreToolUse\": [{ours}]}}}}"),
        ),
        (
            "ours from another binary is replaced where it stands",
            Some(
                "{\"hooks\": {\"PreToolUse\": [{\"matcher\": \"*\", \"hooks\": [{\"type\": \"command\", \"command\": \"/opt/old/agentwatch hook claude\", \"timeout\": 30}]}, {\"matcher\": \"Bash\", \"hooks\": []}]}}",
            ),
            &format!(
                "{{\"hooks\": {{\"PreToolUse\": [{ours}, {{\"matcher\": \"Bash\", \"hooks\": []}}]}}}}"
            ),
        ),
        (
            "ours inside someone's group leaves it, and ours is added whole",
            Some(
                "{\"hooks\": {\"PreToolUse\": [{\"matcher\": \"*\", \"hooks\": [{\"type\": \"command\", \"command\": \"guard\"}, {\"type\": \"command\", \"command\": \"/opt/old/agentwatch hook claude\"}]}]}}",
            ),
            &format!(
                "{{\"hooks\": {{\"PreToolUse\": [{{\"matcher\": \"*\", \"hooks\": [{{\"type\": \"command\", \"command\": \"guard\"}}]}}, {ours}]}}}}"
            ),
        ),
        (
            "comments and layout stay",
            Some(
                "// my settings\n{\n    \"model\": \"opus\", // the big one\n    /* keep */\n    \"theme\": \"dark\"\n}\n",
            ),
            "// my settings\n{\n    \"model\": \"opus\", // the big one\n    /* keep */\n    \"theme\": \"dark\",\n    \"hooks\": {\n        \"PreToolUse\": [\n            {\n                \"matcher\": \"*\",\n                \"hooks\": [\n                    {\n                        \"type\": \"command\",\n                        \"command\": \"/usr/bin/agentwatch hook claude\",\n                        \"timeout\": 10\n                    }\n                ]\n            }\n        ]\n    }\n}\n",
        ),
    ];
    for (what, before, after) in cases {
        assert_eq!(installed(&claude(), *before, CLAUDE), *after, "{what}");
        assert_eq!(
            claude().install(Some(after), CLAUDE).unwrap(),
            None,
            "{what}: installing again changes nothing"
        );
    }
}

#[test]
fn gemini_gets_milliseconds_and_a_name() {
    let text = installed(
        &spec(Agent::Gemini),
        Some("{}"),
        "/b/agentwatch hook gemini",
    );
    let value: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        value,
        json!({"hooks": {"BeforeTool": [{"matcher": ".*", "hooks": [{"name": "agentwatch",
            "type": "command", "command": "/b/agentwatch hook gemini", "timeout": 10000}]}]}})
    );
}

#[test]
fn what_does_not_read_is_an_error_with_its_place() {
    let cases = [
        ("{\n  \"a\": 1,\n  \"b\" 2\n}", 3, 7, "`:` expected"),
        ("[1, 2]", 1, 1, "not a JSON object"),
        ("{\"hooks\": []}", 1, 11, "`hooks` is not an object"),
        (
            "{\"hooks\": {\n  \"PreToolUse\": {}}}",
            2,
            17,
            "`hooks.PreToolUse` is not a list",
        ),
    ];
    for (text, line, column, message) in cases {
        for result in [
            claude().install(Some(text), CLAUDE).map(|_| ()),
            claude().uninstall(text).map(|_| ()),
        ] {
            let e = result.unwrap_err();
            assert_eq!((e.line, e.column), (line, column), "{text}: {e:?}");
            assert!(e.message.contains(message), "{text}: {e:?}");
        }
    }
}

#[test]
fn uninstall_removes_only_ours() {
    let cases: &[(&str, &str, Removal)] = &[
        ("nothing of ours", "{\"a\": 1}", Removal::Unchanged),
        (
            "someone else's agentwatch-looking command for another agent",
            "{\"hooks\": {\"PreToolUse\": [{\"hooks\": [{\"type\": \"command\", \"command\": \"/b/agentwatch hook codex\"}]}]}}",
            Removal::Unchanged,
        ),
        (
            "ours and someone's in one group: only ours goes",
            "{\"hooks\": {\"PreToolUse\": [{\"hooks\": [{\"command\": \"guard\"}, {\"command\": \"/b/agentwatch hook claude\"}]}]}}",
            Removal::Write(
                "{\"hooks\": {\"PreToolUse\": [{\"hooks\": [{\"command\": \"guard\"}]}]}}".into(),
            ),
        ),
        (
            "two of ours both go, and the emptied hooks with them",
            "{\"x\": 1, \"hooks\": {\"PreToolUse\": [{\"hooks\": [{\"command\": \"/a/agentwatch hook claude\"}]}, {\"hooks\": [{\"command\": \"/b/agentwatch hook claude\"}]}]}}",
            Removal::Write("{\"x\": 1}".into()),
        ),
    ];
    for (what, text, want) in cases {
        assert_eq!(claude().uninstall(text).unwrap(), *want, "{what}");
    }
    let created = installed(&claude(), None, OLD);
    assert_eq!(
        claude().uninstall(&created).unwrap(),
        Removal::Delete,
        "a file install created goes"
    );
}

/// Settings as people write them: nested values, other hooks, laid out in one of several
/// ways, sometimes with a comment. No empty `hooks` or event list (uninstall removes those
/// when it empties them; the backup gives them back, see `tests/files.rs`).
fn settings() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        any::<bool>().prop_map(Value::from),
        any::<i32>().prop_map(Value::from),
        "[a-z /\\\\\"é]{0,8}".prop_map(Value::from),
    ];
    let value = leaf.prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..3).prop_map(Value::from),
            prop::collection::btree_map("[a-z]{1,6}", inner, 0..3)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    });
    let group = ("[A-Za-z*|]{1,6}", "[a-z ./]{1,12}").prop_map(|(matcher, command)| {
        json!({"matcher": matcher, "hooks": [{"type": "command", "command": command}]})
    });
    let hooks = prop::collection::btree_map(
        prop_oneof![Just("PreToolUse"), Just("PostToolUse"), Just("Stop")],
        prop::collection::vec(group, 1..3),
        0..3,
    );
    let layout = prop_oneof![
        Just(None),
        Just(Some("  ")),
        Just(Some("    ")),
        Just(Some("\t"))
    ];
    (
        prop::collection::btree_map("[a-z]{1,8}", value, 0..4),
        hooks,
        layout,
        any::<bool>(),
    )
        .prop_map(|(mut root, hooks, layout, comment)| {
            root.remove("hooks");
            if !hooks.is_empty() {
                let hooks: serde_json::Map<String, Value> = hooks
                    .into_iter()
                    .map(|(k, v)| (k.to_owned(), json!(v)))
                    .collect();
                root.insert("hooks".into(), Value::Object(hooks));
            }
            let root = Value::Object(root.into_iter().collect());
            let mut text = match layout {
                None => serde_json::to_string(&root).unwrap(),
                Some(unit) => pretty(&root, unit),
            };
            if comment {
                text = format!("// my settings\n{text}");
            }
            text
        })
}

fn pretty(value: &Value, unit: &str) -> String {
    let mut out = Vec::new();
    let formatter = serde_json::ser::PrettyFormatter::with_indent(unit.as_bytes());
    let mut ser = serde_json::Serializer::with_formatter(&mut out, formatter);
    serde::Serialize::serialize(value, &mut ser).unwrap();
    String::from_utf8(out).unwrap() + "\n"
}

proptest! {
    #[test]
    fn install_then_uninstall_gives_back_every_byte(text in settings(), gemini in any::<bool>()) {
        let (spec, command) = if gemini {
            (spec(Agent::Gemini), "/x y/agentwatch hook gemini")
        } else {
            (claude(), CLAUDE)
        };
        let with = installed(&spec, Some(&text), command);
        prop_assert_eq!(spec.install(Some(&with), command).unwrap(), None, "idempotent");
        let doc = jsonc::parse(&with).unwrap();
        prop_assert_eq!(spec.find(&doc).len(), 1);
        prop_assert_eq!(spec.uninstall(&with).unwrap(), Removal::Write(text.clone()));
        // Installed from another binary, then again from this one: still one entry, same
        // bytes as installing once from this one.
        let other = installed(&spec, Some(&text), &command.replace("/agentwatch", "/old/agentwatch"));
        prop_assert_eq!(installed(&spec, Some(&other), command), with);
    }
}
