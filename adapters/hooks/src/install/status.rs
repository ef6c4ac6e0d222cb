//! Whether a hook is there and will really run: the file, the binary it names, and each
//! agent's own switches (Claude `disableAllHooks`; Codex trust, `[features] hooks`, a
//! project's trust; Gemini `hooksConfig`, folder trust; opencode none but `--pure`).

use super::codex::{self, TrustEdit};
use super::jsonc::{self, Doc, Node};
use super::settings::{Found, Spec};
use super::target::{Locations, Target};
use super::{file, opencode};
use crate::Agent;
use serde::Serialize;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// One agent's hook as it stands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Status {
    pub agent: Agent,
    /// The project directory, for a project's hook.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub project: Option<PathBuf>,
    /// The file our entry is (or would be) in.
    pub file: PathBuf,
    pub installed: bool,
    /// The command as written (the plugin's binary for opencode).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// The binary the hook runs, and whether it is an executable file.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub binary: Option<PathBuf>,
    pub binary_exists: bool,
    /// Codex: where trust is kept, and whether it trusts the hook as it is now.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trust_file: Option<PathBuf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trusted: Option<bool>,
    pub will_run: bool,
    /// Why it will not run (empty when it will).
    pub blockers: Vec<String>,
    /// What else is worth knowing.
    pub notes: Vec<String>,
}

impl Status {
    /// "yes", or "no (why)".
    pub fn will_run_text(&self) -> String {
        if self.will_run {
            return "yes".to_owned();
        }
        let mut why = Vec::new();
        if !self.installed {
            why.push("not installed".to_owned());
        }
        why.extend(self.blockers.iter().cloned());
        format!("no ({})", why.join("; "))
    }
}

pub(crate) fn status_of(target: &Target, loc: &Locations) -> Status {
    let mut s = Status {
        agent: target.agent,
        project: target.project.clone(),
        file: target.file.clone(),
        installed: false,
        command: None,
        binary: None,
        binary_exists: false,
        trust_file: target.trust_file.clone(),
        trusted: None,
        will_run: false,
        blockers: Vec::new(),
        notes: Vec::new(),
    };
    match target.agent {
        Agent::Opencode => plugin_status(target, &mut s),
        agent => {
            if let Some((doc, found)) = settings_status(target, &mut s) {
                match agent {
                    Agent::Claude => claude_switches(target, &doc, &mut s),
                    Agent::Codex => codex_switches(target, &doc, &found, &mut s),
                    _ => gemini_switches(target, loc, &doc, &mut s),
                }
            }
        }
    }
    if let Some(binary) = &s.binary {
        s.binary_exists = executable(binary);
        if !s.binary_exists {
            s.blockers
                .insert(0, format!("{} is not an executable file", binary.display()));
        }
    }
    s.will_run = s.installed && s.blockers.is_empty();
    s
}

fn executable(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Reads the settings file and our entry in it.
fn settings_status(target: &Target, s: &mut Status) -> Option<(Doc, Found)> {
    let text = match file::read(&target.file) {
        Ok(current) => current.text?,
        Err(e) => {
            s.blockers.push(e.to_string());
            return None;
        }
    };
    let doc = match jsonc::parse(&text) {
        Ok(doc) => doc,
        Err(e) => {
            s.blockers.push(format!(
                "{}:{}:{}: {} (the agent cannot read it either)",
                target.file.display(),
                e.line,
                e.column,
                e.message
            ));
            return None;
        }
    };
    let found = Spec::of(target.agent).find(&doc);
    let first = found.first()?.clone();
    s.installed = true;
    s.command = Some(first.command.clone()).filter(|c| !c.is_empty());
    s.binary = first.binary.clone();
    if found.len() > 1 {
        s.notes.push(format!(
            "{} entries of agentwatch's: each call runs it {} times (`agentwatch hooks install` keeps one)",
            found.len(),
            found.len()
        ));
    }
    Some((doc, first))
}

/// The settings of another file (ignored when absent or unreadable).
fn other_settings(path: &Path) -> Option<(PathBuf, Doc)> {
    let text = std::fs::read_to_string(path).ok()?;
    Some((path.to_path_buf(), jsonc::parse(&text).ok()?))
}

/// This file, then the project's local settings and the user's (those can switch hooks off
/// for the project too).
fn every_settings(target: &Target, doc: &Doc, local: Option<&str>) -> Vec<(PathBuf, Doc)> {
    let mut all = vec![(target.file.clone(), doc.clone())];
    if let (Some(local), Some(dir)) = (local, target.file.parent()) {
        all.extend(other_settings(&dir.join(local)));
    }
    if let Some(user) = &target.user_file {
        all.extend(other_settings(user));
    }
    all
}

fn claude_switches(target: &Target, doc: &Doc, s: &mut Status) {
    for (path, doc) in every_settings(target, doc, Some("settings.local.json")) {
        if doc.root.get("disableAllHooks").and_then(Node::as_bool) == Some(true) {
            s.blockers
                .push(format!("`disableAllHooks` is true in {}", path.display()));
        }
    }
    if let Some(dir) = &target.project {
        s.notes.push(format!(
            "interactive Claude Code runs a project's hooks once {} is trusted (its first-run prompt)",
            dir.display()
        ));
    }
}

fn gemini_switches(target: &Target, loc: &Locations, doc: &Doc, s: &mut Status) {
    let all = every_settings(target, doc, None);
    for (path, doc) in &all {
        let config = doc.root.get("hooksConfig");
        if config
            .and_then(|c| c.get("enabled"))
            .and_then(Node::as_bool)
            == Some(false)
        {
            s.blockers.push(format!(
                "`hooksConfig.enabled` is false in {}",
                path.display()
            ));
        }
        let disabled = config.and_then(|c| c.get("disabled")).map(Node::items);
        if disabled.is_some_and(|names| names.iter().any(|n| n.as_str() == Some("agentwatch"))) {
            s.blockers.push(format!(
                "`hooksConfig.disabled` lists agentwatch in {}",
                path.display()
            ));
        }
    }
    let loop_check_off = all.iter().any(|(_, doc)| {
        doc.root
            .get("model")
            .and_then(|m| m.get("disableLoopDetection"))
            .and_then(Node::as_bool)
            == Some(true)
    });
    if !loop_check_off {
        s.notes.push(
            "Gemini's own loop check stays on (it stops 5 identical calls in a row); agentwatch acts on more kinds of loop, and earlier when it can"
                .to_owned(),
        );
    }
    if let Some(dir) = &target.project {
        gemini_folder_trust(&all, loc, dir, s);
    }
}

/// With folder trust on, Gemini reads a project's settings only in a trusted folder
/// (`trustedFolders.json`: `TRUST_FOLDER` a folder and below, `TRUST_PARENT` its parent and
/// below, `DO_NOT_TRUST`).
fn gemini_folder_trust(all: &[(PathBuf, Doc)], loc: &Locations, dir: &Path, s: &mut Status) {
    let on = all.iter().any(|(_, doc)| {
        let trust = doc.root.get("security").and_then(|x| x.get("folderTrust"));
        trust.and_then(|t| t.get("enabled")).and_then(Node::as_bool) == Some(true)
    });
    if !on {
        return;
    }
    let Ok(gemini) = loc.gemini_dir() else {
        return;
    };
    let folders = gemini.join("trustedFolders.json");
    let rules = std::fs::read_to_string(&folders)
        .ok()
        .and_then(|t| serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(&t).ok())
        .unwrap_or_default();
    let trusted = rules.iter().any(|(path, level)| {
        let path = Path::new(path);
        match level.as_str() {
            Some("TRUST_FOLDER") => dir.starts_with(path),
            Some("TRUST_PARENT") => path.parent().is_some_and(|p| dir.starts_with(p)),
            _ => false,
        }
    });
    if !trusted {
        s.blockers.push(format!(
            "folder trust is on and {} is not trusted in {}",
            dir.display(),
            folders.display()
        ));
    }
}

fn codex_switches(target: &Target, doc: &Doc, found: &Found, s: &mut Status) {
    if doc.extended {
        s.blockers.push(format!(
            "{} has comments or trailing commas: Codex reads it as plain JSON and skips it",
            target.file.display()
        ));
    }
    let Some(config_path) = &target.trust_file else {
        return;
    };
    let text = std::fs::read_to_string(config_path).ok();
    let config = match codex::read_config(text.as_deref()) {
        Ok(config) => config,
        Err(p) => {
            s.blockers.push(format!(
                "{}:{}:{}: {} (Codex cannot read it either)",
                config_path.display(),
                p.line,
                p.column,
                p.message
            ));
            return;
        }
    };
    let key = codex::trust_key(&target.file.to_string_lossy(), found.group, found.handler);
    let state = codex::trust_state(&config, &key);
    let hash = codex::hook_hash(found);
    s.trusted = Some(state.trusted_hash.as_deref() == Some(hash.as_str()));
    let shown = config_path.display();
    if state.features_hooks == Some(false) {
        s.blockers.push(format!(
            "`[features] hooks = false` in {shown} turns hooks off"
        ));
    }
    if state.enabled == Some(false) {
        s.blockers
            .push(format!("`enabled = false` for this hook in {shown}"));
    }
    match state.trusted_hash {
        _ if s.trusted == Some(true) => {}
        Some(_) => s.blockers.push(format!(
            "Codex trusted another version of this hook ({shown}): run `agentwatch hooks install codex` again"
        )),
        None => s.blockers.push(format!(
            "Codex does not trust it (no trusted_hash in {shown}): run `agentwatch hooks install codex` again"
        )),
    }
    if let Some(dir) = &target.project
        && !codex_project_trusted(&config, dir)
    {
        s.blockers.push(format!(
            "Codex reads a project's hooks only in a trusted project: add `[projects.\"{}\"]` with `trust_level = \"trusted\"` to {shown}, or trust it when codex asks",
            dir.display()
        ));
    }
}

/// Codex trusts a project by its directory or the root of the git repository it is in.
fn codex_project_trusted(config: &toml_edit::DocumentMut, dir: &Path) -> bool {
    let repo = dir.ancestors().find(|d| d.join(".git").exists());
    [Some(dir), repo]
        .into_iter()
        .flatten()
        .any(|d| codex::project_trusted(config, &d.to_string_lossy()))
}

fn plugin_status(target: &Target, s: &mut Status) {
    let text = match file::read(&target.file) {
        Ok(current) => current.text,
        Err(e) => {
            s.blockers.push(e.to_string());
            None
        }
    };
    let Some(text) = text else {
        return;
    };
    if !opencode::is_ours(&text) {
        s.notes.push(format!(
            "{} is not agentwatch's plugin",
            target.file.display()
        ));
        return;
    }
    s.installed = true;
    s.binary = opencode::plugin_binary(&text);
    s.command = s.binary.as_ref().map(|b| {
        format!(
            "{} hook opencode",
            super::shell::quote(&b.to_string_lossy())
        )
    });
    s.notes
        .push("opencode started with --pure (OPENCODE_PURE) loads no plugin".to_owned());
}

/// The trust changes a new `hooks.json` asks for: ours trusted at its new place (when it is
/// there), its old places forgotten, and the states of other hooks that moved moved along.
pub(crate) fn trust_edit(
    spec: &Spec,
    key_path: &str,
    before: Option<&str>,
    after: Option<&str>,
) -> TrustEdit {
    let read = |text: Option<&str>| text.and_then(|t| jsonc::parse(t).ok());
    let (before, after) = (read(before), read(after));
    let handlers = |doc: &Option<Doc>| doc.as_ref().map(|d| spec.handlers(d)).unwrap_or_default();
    let (old, new) = (handlers(&before), handlers(&after));
    let key = |(g, h, _): &(usize, usize, bool)| codex::trust_key(key_path, *g, *h);
    let set = after
        .as_ref()
        .and_then(|d| spec.find(d).into_iter().next())
        .map(|f| {
            let k = codex::trust_key(key_path, f.group, f.handler);
            (k, codex::hook_hash(&f))
        });
    let remove = old
        .iter()
        .filter(|x| x.2)
        .map(key)
        .filter(|k| set.as_ref().is_none_or(|(s, _)| s != k))
        .collect();
    let moves = old
        .iter()
        .filter(|x| !x.2)
        .zip(new.iter().filter(|x| !x.2))
        .map(|(a, b)| (key(a), key(b)))
        .filter(|(a, b)| a != b)
        .collect();
    TrustEdit { remove, moves, set }
}
