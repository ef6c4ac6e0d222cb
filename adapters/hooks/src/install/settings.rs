//! Our entry in a settings file of the shape Claude Code, Codex and Gemini share:
//! `{"hooks": {EVENT: [{"matcher": M, "hooks": [HANDLER, …]}, …]}}`.
//!
//! Our entry is one matcher group holding one command handler whose command is agentwatch's
//! (`shell::our_binary`; for Gemini also the handler named `agentwatch`). `install` leaves a
//! file that already holds exactly it alone, replaces an entry of ours that differs (another
//! binary path, another timeout) where it stands, drops any other handler of ours, and else
//! adds the group after the last one. `uninstall` removes every handler of ours, then the event
//! list and the `hooks` object when it emptied them. Each change is a splice
//! (`edit`), so everything else in the file stays byte for byte.

use super::edit::{self, Frag, Layout, Splice};
use super::jsonc::{self, Doc, Node, SyntaxError};
use super::shell;
use crate::Agent;
use std::path::PathBuf;

/// How one agent's entry looks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Spec {
    pub agent: Agent,
    /// The pre-tool event: `PreToolUse` (Claude, Codex) or `BeforeTool` (Gemini).
    pub event: &'static str,
    /// A matcher for every tool: `*` (Claude, Codex) or the regex `.*` (Gemini).
    pub matcher: &'static str,
    /// In the agent's unit: seconds (Claude, Codex), milliseconds (Gemini).
    pub timeout: u64,
    /// Gemini's handlers have a name (`hooksConfig.disabled` lists names).
    pub name: Option<&'static str>,
}

/// The hook's timeout in seconds: a watchdog that hangs costs a tool call at most this.
pub const TIMEOUT_S: u64 = 10;

impl Spec {
    /// The entry an agent's settings get (Claude Code, Codex, Gemini).
    pub fn of(agent: Agent) -> Self {
        match agent {
            Agent::Gemini => Spec {
                agent,
                event: "BeforeTool",
                matcher: ".*",
                timeout: TIMEOUT_S * 1000,
                name: Some("agentwatch"),
            },
            _ => Spec {
                agent,
                event: "PreToolUse",
                matcher: "*",
                timeout: TIMEOUT_S,
                name: None,
            },
        }
    }
}

/// Why a settings text cannot take our entry: it does not read, or a part of it we must edit
/// is not what the agent expects there (`hooks` not an object, …).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Problem {
    pub line: usize,
    pub column: usize,
    pub message: String,
}

impl From<SyntaxError> for Problem {
    fn from(e: SyntaxError) -> Self {
        Self {
            line: e.line,
            column: e.column,
            message: e.message,
        }
    }
}

/// What uninstalling does to a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Removal {
    /// Nothing of ours in it.
    Unchanged,
    /// The text without our entry.
    Write(String),
    /// The file holds nothing but what `install` writes into a file that was not there.
    Delete,
}

/// One handler of ours found in a file.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Found {
    /// Its group's index in the event's list, and its own in the group's `hooks`.
    pub group: usize,
    pub handler: usize,
    /// The command as written (empty when a Gemini handler is ours by its name only).
    pub command: String,
    /// The binary the command names, when it reads as ours.
    pub binary: Option<PathBuf>,
    /// Whether every handler of its group is ours (the group is ours to remove).
    pub whole_group: bool,
    /// The handler as JSON (what Codex hashes).
    pub handler_value: serde_json::Value,
    /// The group's `matcher`, when it has one.
    pub matcher: Option<String>,
}

impl Spec {
    /// Our group, as JSON to write.
    pub fn group(&self, command: &str) -> Frag {
        let mut handler = Vec::new();
        if let Some(name) = self.name {
            handler.push(("name", Frag::Str(name.to_owned())));
        }
        handler.push(("type", Frag::Str("command".to_owned())));
        handler.push(("command", Frag::Str(command.to_owned())));
        handler.push(("timeout", Frag::Int(self.timeout)));
        Frag::Object(vec![
            ("matcher", Frag::Str(self.matcher.to_owned())),
            ("hooks", Frag::Array(vec![Frag::Object(handler)])),
        ])
    }

    /// The binary a handler names when it is ours (`Some(None)`: ours by name, no binary read).
    fn ours(&self, handler: &Node) -> Option<Option<PathBuf>> {
        let command = handler.get("command").and_then(Node::as_str);
        if let Some(binary) = command.and_then(|c| shell::our_binary(c, self.agent)) {
            return Some(Some(binary));
        }
        let named = self.name.is_some() && handler.get("name").and_then(Node::as_str) == self.name;
        named.then_some(None)
    }

    /// Every handler of ours in a read document, in file order.
    pub fn find(&self, doc: &Doc) -> Vec<Found> {
        let Some(groups) = doc.root.get("hooks").and_then(|h| h.get(self.event)) else {
            return Vec::new();
        };
        let mut found = Vec::new();
        for (g, group) in groups.items().iter().enumerate() {
            let handlers = group.get("hooks").map_or(&[][..], Node::items);
            let ours: Vec<(usize, Option<PathBuf>)> = handlers
                .iter()
                .enumerate()
                .filter_map(|(h, handler)| Some((h, self.ours(handler)?)))
                .collect();
            let whole_group = ours.len() == handlers.len();
            for (h, binary) in ours {
                let handler = &handlers[h];
                found.push(Found {
                    group: g,
                    handler: h,
                    command: handler
                        .get("command")
                        .and_then(Node::as_str)
                        .unwrap_or_default()
                        .to_owned(),
                    binary,
                    whole_group,
                    handler_value: handler.to_value(),
                    matcher: group
                        .get("matcher")
                        .and_then(Node::as_str)
                        .map(str::to_owned),
                });
            }
        }
        found
    }

    /// Every handler of the event's list, in order: its group, its place in the group, and
    /// whether it is ours.
    pub fn handlers(&self, doc: &Doc) -> Vec<(usize, usize, bool)> {
        let Some(groups) = doc.root.get("hooks").and_then(|h| h.get(self.event)) else {
            return Vec::new();
        };
        let mut all = Vec::new();
        for (g, group) in groups.items().iter().enumerate() {
            let handlers = group.get("hooks").map_or(&[][..], Node::items);
            for (h, handler) in handlers.iter().enumerate() {
                all.push((g, h, self.ours(handler).is_some()));
            }
        }
        all
    }

    /// The text with our entry for `command` in it, or `None` when it already is exactly so.
    /// An absent or blank file gets a new document.
    pub fn install(&self, text: Option<&str>, command: &str) -> Result<Option<String>, Problem> {
        let text = match text {
            Some(t) if !t.trim().is_empty() => t.to_owned(),
            _ => return self.install_into("{\n}\n", command).map(Some),
        };
        let new = self.install_into(&text, command)?;
        Ok((new != text).then_some(new))
    }

    fn install_into(&self, text: &str, command: &str) -> Result<String, Problem> {
        let mut text = text.to_owned();
        let doc = read(&text)?;
        self.check_shape(&text, &doc)?;
        let want = frag_value(&self.group(command));
        let found = self.find(&doc);
        let exact =
            |f: &Found| f.whole_group && group_node(&doc, self.event, f.group).to_value() == want;
        if found.len() == 1 && exact(&found[0]) {
            return Ok(text);
        }
        let keep = found.iter().find(|f| f.whole_group).map(|f| f.group);
        if let Some(g) = keep {
            let node = group_node(&doc, self.event, g).clone();
            let unit = edit::indent_unit(&text, &doc.root);
            text = replace(&text, &node, &unit, &self.group(command)).apply(&text);
        }
        // Every other handler of ours goes (the kept group, now the wanted one, stays).
        while let Some(splice) = self.next_removal(&text, keep)? {
            text = splice.apply(&text);
        }
        if keep.is_none() {
            text = self.append_group(&text, command)?.apply(&text);
        }
        Ok(text)
    }

    /// The splice removing the first handler of ours other than group `keep`.
    fn next_removal(&self, text: &str, keep: Option<usize>) -> Result<Option<Splice>, Problem> {
        let doc = read(text)?;
        let Some(f) = self.find(&doc).into_iter().find(|f| Some(f.group) != keep) else {
            return Ok(None);
        };
        let groups = event_node(&doc, self.event);
        Ok(Some(if f.whole_group {
            edit::remove(text, groups, f.group)
        } else {
            let handlers = groups.items()[f.group].get("hooks").unwrap_or(groups);
            edit::remove(text, handlers, f.handler)
        }))
    }

    /// Our group after the last of the event's list, creating the list and `hooks` as needed.
    fn append_group(&self, text: &str, command: &str) -> Result<Splice, Problem> {
        let doc = read(text)?;
        let unit = edit::indent_unit(text, &doc.root);
        let group = self.group(command);
        let Some(hooks) = doc.root.get("hooks") else {
            let whole = Frag::Object(vec![(self.event, Frag::Array(vec![group]))]);
            return Ok(edit::append(text, &doc.root, &unit, |l| {
                format!("\"hooks\": {}", whole.render(l))
            }));
        };
        let Some(groups) = hooks.get(self.event) else {
            let list = Frag::Array(vec![group]);
            return Ok(edit::append(text, hooks, &unit, |l| {
                format!("\"{}\": {}", self.event, list.render(l))
            }));
        };
        Ok(edit::append(text, groups, &unit, |l| group.render(l)))
    }

    /// The parts we edit must be what the agent expects there.
    fn check_shape(&self, text: &str, doc: &Doc) -> Result<(), Problem> {
        let wrong = |node: &Node, message: String| {
            let (line, column) = jsonc::line_column(text, node.start);
            Err(Problem {
                line,
                column,
                message,
            })
        };
        if !doc.root.is_object() {
            return wrong(&doc.root, "the settings are not a JSON object".to_owned());
        }
        let Some(hooks) = doc.root.get("hooks") else {
            return Ok(());
        };
        if !hooks.is_object() {
            return wrong(hooks, "`hooks` is not an object".to_owned());
        }
        let Some(groups) = hooks.get(self.event) else {
            return Ok(());
        };
        if !groups.is_array() {
            return wrong(groups, format!("`hooks.{}` is not a list", self.event));
        }
        Ok(())
    }

    /// The text without any handler of ours.
    pub fn uninstall(&self, text: &str) -> Result<Removal, Problem> {
        if text.trim().is_empty() {
            return Ok(Removal::Unchanged);
        }
        let doc = read(text)?;
        self.check_shape(text, &doc)?;
        let found = self.find(&doc);
        let Some(first) = found.first() else {
            return Ok(Removal::Unchanged);
        };
        if self.install_into("{\n}\n", &first.command).as_deref() == Ok(text) {
            return Ok(Removal::Delete);
        }
        let mut text = text.to_owned();
        while let Some(splice) = self.next_removal(&text, None)? {
            text = splice.apply(&text);
        }
        // The list and `hooks` go when ours was all they held.
        let doc = read(&text)?;
        if let Some(hooks) = doc.root.get("hooks")
            && let Some(at) = index_of(hooks, self.event)
            && hooks.members()[at].value.items().is_empty()
        {
            text = edit::remove(&text, hooks, at).apply(&text);
            let doc = read(&text)?;
            if let Some(at) = index_of(&doc.root, "hooks")
                && doc.root.members()[at].value.members().is_empty()
            {
                text = edit::remove(&text, &doc.root, at).apply(&text);
            }
        }
        Ok(Removal::Write(text))
    }
}

fn read(text: &str) -> Result<Doc, Problem> {
    Ok(jsonc::parse(text)?)
}

/// The index of an object's (last) member `key`.
fn index_of(object: &Node, key: &str) -> Option<usize> {
    object.members().iter().rposition(|m| m.key == key)
}

fn event_node<'d>(doc: &'d Doc, event: &str) -> &'d Node {
    doc.root
        .get("hooks")
        .and_then(|h| h.get(event))
        .unwrap_or(&doc.root)
}

fn group_node<'d>(doc: &'d Doc, event: &str, group: usize) -> &'d Node {
    let groups = event_node(doc, event);
    groups.items().get(group).unwrap_or(groups)
}

/// Replaces a node by a written value laid out as the node was (on its own line or not).
fn replace(text: &str, node: &Node, unit: &str, with: &Frag) -> Splice {
    let before = &text[..node.start];
    let gap = &before[before.trim_end_matches([' ', '\t', '\n', '\r']).len()..];
    let layout = if gap.contains('\n') {
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        Layout::Lines {
            indent: text[line_start..node.start].to_owned(),
            unit: unit.to_owned(),
        }
    } else {
        Layout::Inline
    };
    Splice {
        start: node.start,
        end: node.end,
        with: edit::crlf(text, &with.render(&layout)),
    }
}

/// A written value as JSON, to compare with what a file holds.
fn frag_value(frag: &Frag) -> serde_json::Value {
    use serde_json::Value;
    match frag {
        Frag::Object(members) => Value::Object(
            members
                .iter()
                .map(|(k, v)| ((*k).to_owned(), frag_value(v)))
                .collect(),
        ),
        Frag::Array(items) => Value::Array(items.iter().map(frag_value).collect()),
        Frag::Str(s) => Value::String(s.clone()),
        Frag::Int(n) => Value::from(*n),
    }
}
