//! `agentwatch hooks install|uninstall|status`: our hook in each agent's own settings.
//!
//! The hook is `BINARY hook AGENT` (the binary's absolute path, shell-quoted when needed), run
//! before every tool call with a 10 s timeout, so a stuck watchdog never holds the agent long:
//!
//! - Claude Code: `settings.json` `hooks.PreToolUse`, matcher `*`, `timeout: 10` (seconds).
//! - Codex CLI: `hooks.json` the same, and its trust in the user's `config.toml` (`codex.rs`).
//! - Gemini CLI: `settings.json` `hooks.BeforeTool`, matcher `.*`, handler named `agentwatch`,
//!   `timeout: 10000` (milliseconds).
//! - opencode: a plugin file (`opencode.rs`).
//!
//! Settings are edited in place (`settings.rs`, `edit.rs`): other hooks, keys, comments and
//! layout stay; install is idempotent; install then uninstall gives back the same bytes (a
//! file we created is removed again). A file that does not read is an error naming the file
//! and the place, and is never overwritten. Each changed file's previous bytes are kept in
//! `FILE.agentwatch-backup`; writes are atomic and keep the file's mode (`file.rs`).

mod codex;
mod edit;
mod error;
mod file;
mod jsonc;
mod opencode;
mod settings;
mod shell;
mod status;
mod target;
#[cfg(test)]
mod tests;

pub use error::{ErrorKind, InstallError};
pub use file::{Action, BACKUP_SUFFIX, FileChange};
pub use status::Status;
pub use target::{Locations, PLUGIN_FILE, Scope, Target, target};

use crate::Agent;
use settings::{Problem, Removal, Spec};
use std::path::Path;

pub use settings::TIMEOUT_S;

/// What installing or removing one agent's hook did.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Outcome {
    pub agent: Agent,
    /// Every file looked at, in order, and what was done to it.
    pub changes: Vec<FileChange>,
    /// Whether the hook will run now, and why not (after an install; for an uninstall, that
    /// it is gone).
    pub status: Status,
}

/// The command our entry runs: `BINARY hook AGENT`.
pub fn hook_command(binary: &Path, agent: Agent) -> String {
    shell::hook_command(binary, agent)
}

/// Installs `agent`'s hook running `binary` (an absolute path) in `scope`.
pub fn install(
    agent: Agent,
    scope: &Scope,
    loc: &Locations,
    binary: &Path,
) -> Result<Outcome, InstallError> {
    let target = target(agent, scope, loc)?;
    let changes = match agent {
        Agent::Opencode => vec![install_plugin(&target, binary)?],
        Agent::Codex => change_codex(&target, Some(&hook_command(binary, agent)))?,
        Agent::Claude | Agent::Gemini => {
            vec![install_settings(&target, &hook_command(binary, agent))?]
        }
    };
    Ok(Outcome {
        agent,
        changes,
        status: status::status_of(&target, loc),
    })
}

/// Removes `agent`'s hook from `scope` (nothing to do is not an error).
pub fn uninstall(agent: Agent, scope: &Scope, loc: &Locations) -> Result<Outcome, InstallError> {
    let target = target(agent, scope, loc)?;
    let changes = match agent {
        Agent::Opencode => vec![uninstall_plugin(&target)?],
        Agent::Codex => change_codex(&target, None)?,
        Agent::Claude | Agent::Gemini => vec![uninstall_settings(&target)?],
    };
    Ok(Outcome {
        agent,
        changes,
        status: status::status_of(&target, loc),
    })
}

/// Whether `agent`'s hook in `scope` is there and will run. Never fails: what cannot be read
/// is said in the status.
pub fn status(agent: Agent, scope: &Scope, loc: &Locations) -> Result<Status, InstallError> {
    Ok(status::status_of(&target(agent, scope, loc)?, loc))
}

fn syntax(path: &Path, problem: Problem) -> InstallError {
    InstallError::Syntax {
        path: path.to_path_buf(),
        line: problem.line,
        column: problem.column,
        message: problem.message,
    }
}

fn install_settings(target: &Target, command: &str) -> Result<FileChange, InstallError> {
    let current = file::read(&target.file)?;
    let spec = Spec::of(target.agent);
    let new = spec
        .install(current.text.as_deref(), command)
        .map_err(|p| syntax(&target.file, p))?;
    file::apply(&current, new.as_deref().or(current.text.as_deref()))
}

fn uninstall_settings(target: &Target) -> Result<FileChange, InstallError> {
    let current = file::read(&target.file)?;
    let new = removed_text(&Spec::of(target.agent), &current)?;
    file::apply(&current, new.as_deref())
}

/// A settings file's text without our entry (`None`: the file goes). When the backup is the
/// file just before our entry went in (installing into it gives the file as it is now), the
/// backup comes back whole: an empty `hooks` or a blank file the user had is kept.
fn removed_text(spec: &Spec, current: &file::Current) -> Result<Option<String>, InstallError> {
    let Some(text) = &current.text else {
        return Ok(None);
    };
    let removal = spec.uninstall(text).map_err(|p| syntax(&current.path, p))?;
    if removal == Removal::Unchanged {
        return Ok(Some(text.clone()));
    }
    if let Some(backup) = file::read_backup(current)
        && let Ok(doc) = jsonc::parse(&backup).or_else(|e| {
            if backup.trim().is_empty() {
                jsonc::parse("{}")
            } else {
                Err(e)
            }
        })
        && spec.find(&doc).is_empty()
        && let Some(command) = jsonc::parse(text)
            .ok()
            .and_then(|d| spec.find(&d).first().map(|f| f.command.clone()))
        && spec
            .install(Some(&backup), &command)
            .ok()
            .flatten()
            .as_ref()
            == Some(text)
    {
        return Ok(Some(backup));
    }
    Ok(match removal {
        Removal::Write(new) => Some(new),
        Removal::Delete | Removal::Unchanged => None,
    })
}

fn install_plugin(target: &Target, binary: &Path) -> Result<FileChange, InstallError> {
    let current = file::read(&target.file)?;
    if current
        .text
        .as_deref()
        .is_some_and(|t| !opencode::is_ours(t))
    {
        return Err(InstallError::NotOurs {
            path: target.file.clone(),
        });
    }
    file::apply(&current, Some(&opencode::plugin_text(binary)))
}

fn uninstall_plugin(target: &Target) -> Result<FileChange, InstallError> {
    let current = file::read(&target.file)?;
    let ours = current.text.as_deref().is_some_and(opencode::is_ours);
    let new = if ours { None } else { current.text.as_deref() };
    file::apply(&current, new)
}

/// Codex: `hooks.json` with our entry for `command` (or without it, `None`), and its trust in
/// `config.toml` moved along: ours trusted at its place, the states of other hooks whose
/// place changed moved with them. Both files are read and checked before either is written.
fn change_codex(target: &Target, command: Option<&str>) -> Result<Vec<FileChange>, InstallError> {
    let spec = Spec::of(Agent::Codex);
    let hooks = file::read(&target.file)?;
    let new_hooks = match command {
        Some(command) => spec
            .install(hooks.text.as_deref(), command)
            .map_err(|p| syntax(&target.file, p))?
            .or(hooks.text.clone()),
        None => removed_text(&spec, &hooks)?,
    };
    let key_path = target.file.to_string_lossy().into_owned();
    let edit = status::trust_edit(
        &spec,
        &key_path,
        hooks.text.as_deref(),
        new_hooks.as_deref(),
    );
    let config = match &target.trust_file {
        Some(path) if !edit.is_empty() => Some(new_config(path, &edit)?),
        _ => None,
    };
    let mut changes = vec![file::apply(&hooks, new_hooks.as_deref())?];
    if let Some((config, new)) = config {
        changes.push(file::apply(&config, new.as_deref())?);
    }
    Ok(changes)
}

/// `config.toml` read, and its text after `edit` (`None`: no file). A file that held nothing
/// but what trusting our hook writes into a missing file goes again when that trust goes.
fn new_config(
    path: &Path,
    edit: &codex::TrustEdit,
) -> Result<(file::Current, Option<String>), InstallError> {
    let config = file::read(path)?;
    let text = config.text.as_deref();
    let new = codex::edit_config(text, edit)
        .map_err(|p| syntax(path, p))?
        .or(config.text.clone());
    let created_by_us = edit.remove.iter().any(|key| {
        let hash = codex::read_config(text)
            .ok()
            .and_then(|doc| codex::trust_state(&doc, key).trusted_hash);
        let only_ours = codex::TrustEdit {
            set: hash.map(|h| (key.clone(), h)),
            ..codex::TrustEdit::default()
        };
        text.is_some()
            && codex::edit_config(None, &only_ours)
                .ok()
                .flatten()
                .as_deref()
                == text
    });
    let gone = new.as_deref().is_some_and(|t| t.trim().is_empty())
        && (config.text.is_none() || created_by_us);
    Ok((config, if gone { None } else { new }))
}
