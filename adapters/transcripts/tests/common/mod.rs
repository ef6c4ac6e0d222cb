//! Helpers shared by the integration tests: counting a transcript's tool calls without the
//! reader, and scrubbing real transcripts into fixtures.
#![allow(dead_code)]

use serde_json::Value;

/// The `tool_use` blocks of a transcript's assistant lines, `(id, name)` in file order, each id
/// once: counted with a plain `serde_json::Value` walk, independently of the reader.
pub fn tool_uses(bytes: &[u8]) -> Vec<(String, String)> {
    let mut seen = std::collections::HashSet::new();
    let mut uses = Vec::new();
    for line in bytes.split(|b| *b == b'\n') {
        let Ok(value) = serde_json::from_slice::<Value>(line) else {
            continue;
        };
        if value["type"] != "assistant" {
            continue;
        }
        for block in value["message"]["content"].as_array().into_iter().flatten() {
            if block["type"] == "tool_use" {
                let id = block["id"].as_str().unwrap_or_default().to_owned();
                if seen.insert(id.clone()) {
                    uses.push((id, block["name"].as_str().unwrap_or_default().to_owned()));
                }
            }
        }
    }
    uses
}

/// The tool_use ids answered by a tool_result in the transcript.
pub fn answered_ids(bytes: &[u8]) -> std::collections::HashSet<String> {
    let mut ids = std::collections::HashSet::new();
    for line in bytes.split(|b| *b == b'\n') {
        let Ok(value) = serde_json::from_slice::<Value>(line) else {
            continue;
        };
        if value["type"] != "user" {
            continue;
        }
        for block in value["message"]["content"].as_array().into_iter().flatten() {
            if block["type"] == "tool_result" {
                ids.insert(block["tool_use_id"].as_str().unwrap_or_default().to_owned());
            }
        }
    }
    ids
}

/// A real transcript made fit to commit: every occurrence of each `(from, to)` replaced
/// (machine paths), and in records that are not conversation (`attachment`, `api-request*`,
/// …) every string longer than 160 characters replaced by its length (system prompts, tool
/// lists, skill texts: large, and not ours to copy; their keys come out sorted).
/// Conversation lines (`user`, `assistant`) are kept byte for byte.
pub fn scrub(bytes: &[u8], replacements: &[(String, String)]) -> Vec<u8> {
    let mut text = String::from_utf8_lossy(bytes).into_owned();
    for (from, to) in replacements {
        text = text.replace(from.as_str(), to);
    }
    let mut out = Vec::new();
    for line in text.lines() {
        let Ok(mut value) = serde_json::from_str::<Value>(line) else {
            out.extend_from_slice(line.as_bytes());
            out.push(b'\n');
            continue;
        };
        if matches!(value["type"].as_str(), Some("user" | "assistant")) {
            // As written, in Claude Code's key order.
            out.extend_from_slice(line.as_bytes());
        } else {
            shorten_strings(&mut value);
            out.extend_from_slice(value.to_string().as_bytes());
        }
        out.push(b'\n');
    }
    out
}

fn shorten_strings(value: &mut Value) {
    match value {
        Value::String(s) if s.chars().count() > 160 => {
            *s = format!("(scrubbed: {} characters)", s.chars().count());
        }
        Value::Array(items) => items.iter_mut().for_each(shorten_strings),
        Value::Object(map) => map.values_mut().for_each(shorten_strings),
        _ => {}
    }
}
