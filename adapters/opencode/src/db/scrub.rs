//! Scrubbing exported sessions: keep what the detector reads, hash everything else.
//!
//! Rules (fixture-format.md, "Scrubbed exports"):
//! - In a call's `input` and `metadata`, a string directly under one of [`KEPT_KEYS`] (`filePath`,
//!   `path`, `command`, `pattern`, `include`; also inside a list under such a key) is kept.
//! - Every other string becomes the first 12 hex digits of its SHA-1 ([`hash12`]). Equal strings
//!   get equal hashes, so call identities compare exactly as before.
//! - A blank string (empty or whitespace only) is kept as it is: a hash would turn an empty
//!   `metadata.diff` into a non-empty one, and an edit that changed nothing into a landing.
//! - Numbers, booleans, nulls and object keys are kept: the detector reads `metadata.exit`,
//!   `total_lines`, `lines_read`, and the `additions` / `deletions` of `filediff` and `files`.
//! - The tool name, status and times of a call are kept, and so are a session's id, parent,
//!   agent, directory, label, note and line counts. The title is hashed, except for what makes a
//!   session read-only: a `(@NAME subagent)` suffix, and, for a session without an agent name,
//!   the read-only keywords it contains as words.

use detect_core::{Call, DetectConfig, Session, subagent_name};
use serde_json::Value;

/// Keys whose string values the detector reads; they survive scrubbing.
pub const KEPT_KEYS: &[&str] = &["filePath", "path", "command", "pattern", "include"];

/// The first 12 hex digits of the SHA-1 of `text`.
pub fn hash12(text: &str) -> String {
    let mut hex = sha1_smol::Sha1::from(text).digest().to_string();
    hex.truncate(12);
    hex
}

/// Scrub a JSON value found under `key` (`None` at the top).
pub fn scrub_value(value: &Value, key: Option<&str>) -> Value {
    let kept = key.is_some_and(|k| KEPT_KEYS.contains(&k));
    match value {
        Value::String(s) if kept || s.trim().is_empty() => Value::String(s.clone()),
        Value::String(s) => Value::String(hash12(s)),
        Value::Array(items) => Value::Array(items.iter().map(|v| scrub_value(v, key)).collect()),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), scrub_value(v, Some(k))))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// A call with its input and metadata scrubbed.
pub fn scrub_call(call: &Call) -> Call {
    Call {
        tool: call.tool.clone(),
        input: scrub_value(&call.input, None),
        status: call.status.clone(),
        metadata: scrub_value(&call.metadata, None),
        time: call.time,
        output_hash: call.output_hash.clone(),
    }
}

/// A title hashed, keeping what makes its session read-only.
pub fn scrub_title(title: &str, agent: Option<&str>, config: &DetectConfig) -> String {
    if title.trim().is_empty() {
        return title.to_owned();
    }
    let hash = hash12(title);
    if let Some(name) = subagent_name(title) {
        return format!("{hash} (@{name} subagent)");
    }
    if agent.is_some() {
        return hash;
    }
    let keywords: Vec<&str> = title
        .split(|c: char| !c.is_alphanumeric() && c != '_' && c != '-')
        .filter(|word| {
            !word.is_empty()
                && config
                    .read_only_agents
                    .iter()
                    .any(|a| a.eq_ignore_ascii_case(word))
        })
        .collect();
    if keywords.is_empty() {
        hash
    } else {
        format!("{hash} {}", keywords.join(" "))
    }
}

/// A session scrubbed for a fixture.
pub fn scrub_session(session: &Session, config: &DetectConfig) -> Session {
    Session {
        id: session.id.clone(),
        parent_id: session.parent_id.clone(),
        title: session
            .title
            .as_deref()
            .map(|t| scrub_title(t, session.agent.as_deref(), config)),
        agent: session.agent.clone(),
        directory: session.directory.clone(),
        label: session.label,
        labels: session.labels.clone(),
        note: session.note.clone(),
        line_counts: session.line_counts.clone(),
        loop_start: session.loop_start,
        calls: session.calls.iter().map(scrub_call).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use detect_core::is_read_only;
    use serde_json::json;

    #[test]
    fn sha1_prefix_matches_known_digests() {
        // sha1("abc") = a9993e364706816aba3e25717850c26c9cd0d89d
        assert_eq!(hash12("abc"), "a9993e364706");
        // sha1("") = da39a3ee5e6b4b0d3255bfef95601890afd80709
        assert_eq!(
            hash12("The quick brown fox jumps over the lazy dog"),
            "2fd4e1c67a2d"
        );
    }

    #[test]
    fn kept_keys_survive_and_other_strings_are_hashed() {
        let input = json!({
            "filePath": "/p/src/lib.rs", "offset": 10, "limit": 50,
            "command": "cargo test", "description": "Run tests",
            "pattern": "fn main", "path": "/p", "include": ["*.rs", "*.toml"],
            "oldString": "a - b", "newString": "",
            "nested": {"filePath": "/p/x", "other": "secret", "flag": true, "n": null}
        });
        let out = scrub_value(&input, None);
        assert_eq!(out["filePath"], "/p/src/lib.rs");
        assert_eq!(out["command"], "cargo test");
        assert_eq!(out["pattern"], "fn main");
        assert_eq!(out["path"], "/p");
        assert_eq!(out["include"], json!(["*.rs", "*.toml"]));
        assert_eq!(out["offset"], 10);
        assert_eq!(out["description"], hash12("Run tests"));
        assert_eq!(out["oldString"], hash12("a - b"));
        assert_eq!(out["newString"], "");
        assert_eq!(out["nested"]["filePath"], "/p/x");
        assert_eq!(out["nested"]["other"], hash12("secret"));
        assert_eq!(out["nested"]["flag"], true);
        assert_eq!(out["nested"]["n"], Value::Null);
    }

    #[test]
    fn metadata_the_detector_reads_keeps_its_meaning() {
        let meta = json!({
            "diff": "Index: /p/a\n-a\n+b\n", "exit": 0, "output": "ok", "total_lines": 212,
            "filediff": {"file": "/p/a", "additions": 1, "deletions": 0},
            "files": [{"filePath": "/p/b", "type": "update", "additions": 0, "deletions": 2}]
        });
        let out = scrub_value(&meta, None);
        assert_eq!(out["diff"].as_str().map(str::len), Some(12));
        assert_eq!(out["exit"], 0);
        assert_eq!(out["total_lines"], 212);
        assert_eq!(out["filediff"]["additions"], 1);
        assert_eq!(out["files"][0]["filePath"], "/p/b");
        assert_eq!(out["files"][0]["deletions"], 2);
        assert_eq!(out["output"], hash12("ok"));
        // An empty or blank diff stays blank: no landing appears.
        assert_eq!(scrub_value(&json!({"diff": ""}), None)["diff"], "");
        assert_eq!(scrub_value(&json!({"diff": " \n"}), None)["diff"], " \n");
    }

    #[test]
    fn titles_keep_what_makes_an_agent_read_only() {
        let config = DetectConfig::default();
        let t = scrub_title("Find the retry docs (@librarian subagent)", None, &config);
        assert_eq!(
            t,
            format!(
                "{} (@librarian subagent)",
                hash12("Find the retry docs (@librarian subagent)")
            )
        );
        assert_eq!(subagent_name(&t), Some("librarian"));
        assert_eq!(
            scrub_title("Explore the parser", None, &config),
            format!("{} Explore", hash12("Explore the parser"))
        );
        assert_eq!(
            scrub_title("Explore the parser", Some("build"), &config),
            hash12("Explore the parser")
        );
        assert_eq!(scrub_title("", None, &config), "");
        for (title, agent) in [
            ("Scan the code (@explore subagent)", None),
            ("oracle: review the plan", None),
            ("Fix the build", None),
            ("Look around", Some("explore")),
            ("explore things", Some("build")),
        ] {
            let mut s = Session::new("ses_x");
            s.title = Some(title.to_owned());
            s.agent = agent.map(str::to_owned);
            assert_eq!(
                is_read_only(&scrub_session(&s, &config), &config),
                is_read_only(&s, &config),
                "{title:?} {agent:?}"
            );
        }
    }
}
