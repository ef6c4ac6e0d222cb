//! Codex's hook trust, recorded the way Codex records it.
//!
//! Codex runs a non-managed command hook only when the user's `config.toml` holds
//! `[hooks.state."<hooks.json path>:pre_tool_use:<group>:<handler>"] trusted_hash = "sha256:…"`
//! equal to the hook's current hash; an untrusted hook is skipped without a word. The hash is
//! `command_hook_hash` of openai/codex `codex-rs/hooks/src/engine/discovery.rs` over
//! `version_for_toml` (`codex-rs/config/src/fingerprint.rs`): the hook's identity (event, the
//! group's matcher, the one handler normalised: `type`, `command`, `timeout` defaulted to 600,
//! `async`, `statusMessage`), absent fields dropped, as JSON with every object's keys sorted and
//! no spaces, SHA-256 in hex. `tests/codex_trust.rs` checks it against the real `codex
//! app-server`'s `hooks/list`. Trust is read from the user's layer only, so a project's hooks are
//! trusted in `$CODEX_HOME/config.toml` too, by their own path.

use super::jsonc;
use super::settings::{Found, Problem};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use toml_edit::{DocumentMut, Item, Table};

/// The event's label in trust keys and hashes.
const EVENT_LABEL: &str = "pre_tool_use";
/// Codex's timeout when a handler names none (seconds).
const DEFAULT_TIMEOUT: u64 = 600;

/// The key of a handler's state: its `hooks.json` path (as Codex sees it) and its place.
pub(crate) fn trust_key(hooks_json: &str, group: usize, handler: usize) -> String {
    format!("{hooks_json}:{EVENT_LABEL}:{group}:{handler}")
}

/// The hash Codex computes for a `PreToolUse` handler (`sha256:` and 64 hex digits).
pub(crate) fn hook_hash(found: &Found) -> String {
    let handler = &found.handler_value;
    let timeout = handler
        .get("timeout")
        .and_then(Value::as_u64)
        .unwrap_or(DEFAULT_TIMEOUT)
        .max(1);
    let mut normalized = json!({
        "type": "command",
        "command": handler.get("command").and_then(Value::as_str).unwrap_or_default(),
        "timeout": timeout,
        "async": handler.get("async").and_then(Value::as_bool).unwrap_or(false),
    });
    if let Some(status) = handler.get("statusMessage").and_then(Value::as_str) {
        normalized["statusMessage"] = json!(status);
    }
    let mut identity = json!({"event_name": EVENT_LABEL, "hooks": [normalized]});
    if let Some(matcher) = &found.matcher {
        identity["matcher"] = json!(matcher);
    }
    let digest = Sha256::digest(canonical(&identity).as_bytes());
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

/// Compact JSON with every object's keys in order, whatever map serde_json was built with.
fn canonical(value: &Value) -> String {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            let members: Vec<String> = keys
                .into_iter()
                .map(|k| format!("{}:{}", Value::String(k.clone()), canonical(&map[k])))
                .collect();
            format!("{{{}}}", members.join(","))
        }
        Value::Array(items) => {
            let items: Vec<String> = items.iter().map(canonical).collect();
            format!("[{}]", items.join(","))
        }
        other => other.to_string(),
    }
}

/// What the user's `config.toml` says about one hook and about hooks at all.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct TrustState {
    pub trusted_hash: Option<String>,
    /// `enabled = false` on the hook's state turns it off.
    pub enabled: Option<bool>,
    /// `[features] hooks = false` turns every hook off.
    pub features_hooks: Option<bool>,
}

/// Reads `config.toml` (absent: nothing said).
pub(crate) fn read_config(text: Option<&str>) -> Result<DocumentMut, Problem> {
    text.unwrap_or_default()
        .parse::<DocumentMut>()
        .map_err(|e| toml_problem(text.unwrap_or_default(), &e))
}

fn toml_problem(text: &str, e: &toml_edit::TomlError) -> Problem {
    let at = e.span().map_or(0, |s| s.start);
    let (line, column) = jsonc::line_column(text, at);
    let message = e.message().trim().to_owned();
    Problem {
        line,
        column,
        message,
    }
}

/// The state of `key` in a read `config.toml`.
pub(crate) fn trust_state(doc: &DocumentMut, key: &str) -> TrustState {
    let state = doc
        .get("hooks")
        .and_then(|h| h.get("state"))
        .and_then(|s| s.get(key));
    TrustState {
        trusted_hash: state
            .and_then(|s| s.get("trusted_hash"))
            .and_then(Item::as_str)
            .map(str::to_owned),
        enabled: state.and_then(|s| s.get("enabled")).and_then(Item::as_bool),
        features_hooks: doc
            .get("features")
            .and_then(|f| f.get("hooks"))
            .and_then(Item::as_bool),
    }
}

/// Whether `config.toml` trusts the project at `dir` (`[projects."DIR"] trust_level`).
pub(crate) fn project_trusted(doc: &DocumentMut, dir: &str) -> bool {
    doc.get("projects")
        .and_then(|p| p.get(dir))
        .and_then(|p| p.get("trust_level"))
        .and_then(Item::as_str)
        == Some("trusted")
}

/// One change of the trust table: drop `remove`, move states from one key to another (a
/// handler whose place changed), then trust `set` (key and hash).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct TrustEdit {
    pub remove: Vec<String>,
    pub moves: Vec<(String, String)>,
    pub set: Option<(String, String)>,
}

impl TrustEdit {
    pub fn is_empty(&self) -> bool {
        self.remove.is_empty() && self.moves.is_empty() && self.set.is_none()
    }
}

/// `config.toml` after `edit`; `None` when nothing changed. The `hooks` and `hooks.state`
/// tables are created implicit (no header of their own) and go again when emptied.
pub(crate) fn edit_config(text: Option<&str>, edit: &TrustEdit) -> Result<Option<String>, Problem> {
    let original = text.unwrap_or_default();
    let mut doc = read_config(text)?;
    let state = state_table(&mut doc, original)?;
    let mut moved = Vec::new();
    for key in &edit.remove {
        state.remove(key);
    }
    for (from, to) in &edit.moves {
        if let Some(item) = state.remove(from) {
            moved.push((to.clone(), item));
        }
    }
    for (to, item) in moved {
        state.insert(&to, item);
    }
    if let Some((key, hash)) = &edit.set {
        let entry = state
            .entry(key)
            .or_insert_with(|| Item::Table(Table::new()));
        let Some(table) = entry.as_table_like_mut() else {
            return Err(shape(format!("`hooks.state.\"{key}\"` is not a table")));
        };
        if table.get("trusted_hash").and_then(Item::as_str) != Some(hash.as_str()) {
            table.insert("trusted_hash", toml_edit::value(hash.as_str()));
        }
    }
    prune(&mut doc);
    let new = doc.to_string();
    Ok((new != original).then_some(new))
}

fn shape(message: String) -> Problem {
    Problem {
        line: 1,
        column: 1,
        message,
    }
}

/// `hooks.state`, created (implicit) when missing; an error when it is not a plain table.
fn state_table<'d>(doc: &'d mut DocumentMut, text: &str) -> Result<&'d mut Table, Problem> {
    let implicit = || {
        let mut t = Table::new();
        t.set_implicit(true);
        Item::Table(t)
    };
    let not_table = |what: &str| {
        let at = text.find(what).unwrap_or(0);
        let (line, column) = jsonc::line_column(text, at);
        Problem {
            line,
            column,
            message: format!("`{what}` is not a table agentwatch can add its trust to"),
        }
    };
    let hooks = doc
        .as_table_mut()
        .entry("hooks")
        .or_insert_with(implicit)
        .as_table_mut()
        .ok_or_else(|| not_table("hooks"))?;
    hooks
        .entry("state")
        .or_insert_with(implicit)
        .as_table_mut()
        .ok_or_else(|| not_table("hooks.state"))
}

/// Drops `hooks.state` and then `hooks` when they are implicit and empty.
fn prune(doc: &mut DocumentMut) {
    let Some(hooks) = doc.get_mut("hooks").and_then(Item::as_table_mut) else {
        return;
    };
    if hooks
        .get("state")
        .and_then(Item::as_table)
        .is_some_and(|s| s.is_empty() && s.is_implicit())
    {
        hooks.remove("state");
    }
    if hooks.is_empty() && hooks.is_implicit() {
        doc.remove("hooks");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(handler: Value, matcher: Option<&str>) -> Found {
        Found {
            group: 0,
            handler: 0,
            command: String::new(),
            binary: None,
            whole_group: true,
            handler_value: handler,
            matcher: matcher.map(str::to_owned),
        }
    }

    #[test]
    fn the_hash_is_codexs() {
        // What codex 0.169.0's `hooks/list` answered as `currentHash` for this hooks.json.
        let ours = found(
            json!({"type": "command", "command": "/usr/bin/agentwatch hook codex", "timeout": 10}),
            Some("*"),
        );
        assert_eq!(
            hook_hash(&ours),
            "sha256:890218bec45308799c12c1d326e8db9e9cfb384b96c7a7dc43852972d4a12d90"
        );
        // The default timeout and an explicit 600 are the same hook.
        let a = found(json!({"type": "command", "command": "x"}), None);
        let b = found(
            json!({"type": "command", "command": "x", "timeout": 600}),
            None,
        );
        assert_eq!(hook_hash(&a), hook_hash(&b));
        let c = found(
            json!({"type": "command", "command": "x", "async": true}),
            None,
        );
        assert_ne!(hook_hash(&a), hook_hash(&c));
    }

    #[test]
    fn trust_added_then_removed_leaves_the_file_as_it_was() {
        let key = trust_key("/h/.codex/hooks.json", 0, 0);
        let set = TrustEdit {
            set: Some((key.clone(), "sha256:ab".to_owned())),
            ..TrustEdit::default()
        };
        let unset = TrustEdit {
            remove: vec![key.clone()],
            ..TrustEdit::default()
        };
        for text in [
            None,
            Some("model = \"o3\" # mine\n\n[features]\nhooks = true\n"),
            Some(
                "[hooks.state.\"/other/hooks.json:pre_tool_use:0:0\"]\ntrusted_hash = \"sha256:00\"\n",
            ),
            Some("[hooks]\n\n[[hooks.PreToolUse]]\nmatcher = \"x\"\n"),
            Some("# only a comment\n"),
        ] {
            let added = edit_config(text, &set).unwrap().expect("a change");
            let doc = read_config(Some(&added)).unwrap();
            assert_eq!(
                trust_state(&doc, &key).trusted_hash.as_deref(),
                Some("sha256:ab")
            );
            assert_eq!(edit_config(Some(&added), &set).unwrap(), None, "idempotent");
            let removed = edit_config(Some(&added), &unset)
                .unwrap()
                .expect("a change");
            assert_eq!(removed, text.unwrap_or_default(), "{added}");
        }
    }

    #[test]
    fn a_moved_handler_keeps_its_trust() {
        let text = "[hooks.state.\"/h:pre_tool_use:2:0\"]\ntrusted_hash = \"sha256:b\"\n";
        let edit = TrustEdit {
            moves: vec![("/h:pre_tool_use:2:0".into(), "/h:pre_tool_use:1:0".into())],
            ..TrustEdit::default()
        };
        let new = edit_config(Some(text), &edit).unwrap().unwrap();
        let doc = read_config(Some(&new)).unwrap();
        assert_eq!(
            trust_state(&doc, "/h:pre_tool_use:1:0")
                .trusted_hash
                .as_deref(),
            Some("sha256:b")
        );
        assert_eq!(trust_state(&doc, "/h:pre_tool_use:2:0").trusted_hash, None);
    }

    #[test]
    fn a_config_that_does_not_read_is_an_error_with_its_place() {
        let e = edit_config(Some("a = 1\nb = [\n"), &TrustEdit::default()).unwrap_err();
        assert_eq!((e.line, e.message.contains("unclosed")), (2, true), "{e:?}");
        let e = edit_config(
            Some("hooks = 3\n"),
            &TrustEdit {
                set: Some(("k".into(), "h".into())),
                ..TrustEdit::default()
            },
        )
        .unwrap_err();
        assert!(e.message.contains("`hooks` is not a table"), "{e:?}");
    }
}
