//! `agentwatch hooks install|uninstall|status [AGENT|all] [--project DIR]`: agentwatch's
//! pre-tool hook in each agent's own settings (`agentwatch_hooks::install` does the work), what
//! it did and whether each hook will really run, for a person or as JSON; `doctor` lists the
//! same.
//!
//! Every agent asked is done even when one fails; the exit code is the first failure's (65 a
//! settings file that does not read, 74 an I/O error, 78 no HOME or someone else's file where
//! ours goes).

use crate::config::Env;
use crate::error::Error;
pub use agentwatch_hooks::Agent;
use agentwatch_hooks::install::{
    self, Action, ErrorKind, FileChange, InstallError, Locations, Outcome, Scope, Status,
};
use serde_json::{Value, json};
use std::path::PathBuf;

/// Which of the three commands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    Install,
    Uninstall,
    Status,
}

impl Command {
    fn as_str(self) -> &'static str {
        match self {
            Self::Install => "install",
            Self::Uninstall => "uninstall",
            Self::Status => "status",
        }
    }
}

#[derive(Debug, Clone)]
pub struct Options {
    pub command: Command,
    /// One agent, or every one (`all`, the default).
    pub agent: Option<Agent>,
    /// A project's settings instead of the user's.
    pub project: Option<PathBuf>,
    /// The binary the hook runs (default: this one, `std::env::current_exe`).
    pub binary: Option<PathBuf>,
}

/// What one agent came to.
#[derive(Debug)]
pub enum Entry {
    /// Installed or uninstalled: the files and the hook's status after.
    Done(Outcome),
    Status(Status),
    Failed {
        agent: Agent,
        error: Error,
    },
}

/// What a `hooks` command did, agent by agent.
#[derive(Debug)]
pub struct Report {
    pub command: Command,
    pub entries: Vec<Entry>,
}

/// Runs the command for each agent asked.
pub fn run(options: &Options, env: Env<'_>) -> Result<Report, Error> {
    let loc = Locations::from_env(env);
    let scope = options.project.clone().map_or(Scope::User, Scope::Project);
    let binary = match (options.command, &options.binary) {
        (Command::Install, Some(path)) => Some(absolute(path)),
        (Command::Install, None) => Some(std::env::current_exe().map_err(|e| {
            Error::io(format!(
                "cannot find this program's own path for the hook: {e}"
            ))
        })?),
        _ => None,
    };
    let agents = options.agent.map_or(Agent::ALL.to_vec(), |a| vec![a]);
    let entries = agents
        .into_iter()
        .map(|agent| {
            let done = match (options.command, &binary) {
                (Command::Install, Some(binary)) => {
                    install::install(agent, &scope, &loc, binary).map(Entry::Done)
                }
                (Command::Uninstall, _) => install::uninstall(agent, &scope, &loc).map(Entry::Done),
                _ => install::status(agent, &scope, &loc).map(Entry::Status),
            };
            done.unwrap_or_else(|e| Entry::Failed {
                agent,
                error: error(e),
            })
        })
        .collect();
    Ok(Report {
        command: options.command,
        entries,
    })
}

fn absolute(path: &std::path::Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}

/// The runtime's error (and so exit code) for an install error.
pub fn error(e: InstallError) -> Error {
    let text = e.to_string();
    match e.kind() {
        ErrorKind::Data => Error::data(text),
        ErrorKind::Io => Error::io(text),
        ErrorKind::Config => Error::config(text),
    }
}

/// Every agent's hook for the user, as `doctor` lists them (`Err`: where it would be cannot
/// be known, no HOME).
pub fn user_statuses(env: Env<'_>) -> Vec<(Agent, Result<Status, Error>)> {
    let loc = Locations::from_env(env);
    Agent::ALL
        .into_iter()
        .map(|agent| {
            (
                agent,
                install::status(agent, &Scope::User, &loc).map_err(error),
            )
        })
        .collect()
}

impl Report {
    /// 0, or the exit code of the first agent that failed.
    pub fn exit_code(&self) -> u8 {
        self.failures().next().map_or(0, |(_, e)| e.exit_code())
    }

    /// The agents that failed, with why.
    pub fn failures(&self) -> impl Iterator<Item = (Agent, &Error)> {
        self.entries.iter().filter_map(|e| match e {
            Entry::Failed { agent, error } => Some((*agent, error)),
            _ => None,
        })
    }

    /// A block per agent: what was done to which file, the hook it runs, whether it will run.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for entry in &self.entries {
            match entry {
                Entry::Done(outcome) => out.push_str(&render_outcome(self.command, outcome)),
                Entry::Status(status) => out.push_str(&render_status(status)),
                Entry::Failed { agent, error } => out.push_str(&format!(
                    "{}: failed: {}\n",
                    agent.display_name(),
                    esc(error)
                )),
            }
        }
        out
    }

    pub fn to_json(&self) -> Value {
        let agents: Vec<Value> = self
            .entries
            .iter()
            .map(|entry| match entry {
                Entry::Done(outcome) => json!(outcome),
                Entry::Status(status) => json!(status),
                Entry::Failed { agent, error } => json!({
                    "agent": agent,
                    "error": error.to_string(),
                    "exit_code": error.exit_code(),
                }),
            })
            .collect();
        json!({"command": self.command.as_str(), "exit_code": self.exit_code(), "agents": agents})
    }
}

fn render_outcome(command: Command, outcome: &Outcome) -> String {
    let status = &outcome.status;
    let changed = outcome
        .changes
        .iter()
        .any(|c| c.action != Action::Unchanged);
    let word = match (command, changed) {
        (Command::Install, true) => "installed",
        (Command::Install, false) => "already installed",
        (_, true) => "removed",
        (_, false) => "not installed",
    };
    let mut out = format!("{}: {word}\n", outcome.agent.display_name());
    for change in &outcome.changes {
        out.push_str(&format!("  {}\n", change_line(change)));
    }
    if command == Command::Install {
        out.push_str(&status_lines(status));
    }
    out
}

fn change_line(change: &FileChange) -> String {
    let action = match change.action {
        Action::Created => "created",
        Action::Updated => "updated",
        Action::Removed => "removed",
        Action::Unchanged => "unchanged",
    };
    let backup = change.backup.as_ref().map_or(String::new(), |b| {
        format!(" (backup: {})", esc(b.display()))
    });
    format!("{}: {action}{backup}", esc(change.path.display()))
}

fn render_status(status: &Status) -> String {
    let mut out = format!(
        "{}: {}\n",
        status.agent.display_name(),
        if status.installed {
            "installed"
        } else {
            "not installed"
        }
    );
    out.push_str(&format!("  file: {}\n", esc(status.file.display())));
    out.push_str(&status_lines(status));
    out
}

/// A path or text from outside, on one line.
fn esc(text: impl std::fmt::Display) -> String {
    crate::text::escape_control(&text.to_string()).into_owned()
}

/// The hook's command, the binary's presence, Codex's trust, whether it will run, the notes.
fn status_lines(status: &Status) -> String {
    let mut out = String::new();
    if let Some(command) = &status.command {
        let present = if status.binary_exists {
            ""
        } else {
            " (binary missing)"
        };
        out.push_str(&format!("  runs: {}{present}\n", esc(command)));
    }
    if let (Some(trusted), Some(file)) = (status.trusted, &status.trust_file) {
        let word = if trusted { "trusted" } else { "not trusted" };
        out.push_str(&format!(
            "  codex trust: {word} ({})\n",
            esc(file.display())
        ));
    }
    out.push_str(&format!("  will run: {}\n", esc(status.will_run_text())));
    for note in &status.notes {
        out.push_str(&format!("  note: {}\n", esc(note)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env_of(vars: &[(&str, String)]) -> impl Fn(&str) -> Option<String> + use<> {
        let vars: Vec<(String, String)> = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.clone()))
            .collect();
        move |key: &str| vars.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone())
    }

    /// Paths in the output as a reader of the snapshot sees them.
    fn shown(text: &str, root: &std::path::Path) -> String {
        text.replace(&root.display().to_string(), "$TMP")
    }

    #[test]
    fn install_status_uninstall_read_for_a_person() {
        let tmp = agentwatch_testkit::TempDir::new("aw-hooks-setup");
        let root = std::fs::canonicalize(&tmp.path).unwrap();
        let binary = root.join("bin/agentwatch");
        std::fs::create_dir_all(binary.parent().unwrap()).unwrap();
        std::fs::write(&binary, "#!/bin/sh\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&binary, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::create_dir_all(root.join("home/.claude")).unwrap();
        std::fs::write(
            root.join("home/.claude/settings.json"),
            "{\"model\": \"opus\"}\n",
        )
        .unwrap();
        let env = env_of(&[("HOME", root.join("home").display().to_string())]);
        let options = |command| Options {
            command,
            agent: None,
            project: None,
            binary: Some(binary.clone()),
        };
        let mut texts = Vec::new();
        for command in [
            Command::Install,
            Command::Status,
            Command::Uninstall,
            Command::Status,
        ] {
            let report = run(&options(command), &env).unwrap();
            assert_eq!(report.exit_code(), 0);
            texts.push(format!("$ hooks {}\n{}", command.as_str(), report.render()));
        }
        insta::assert_snapshot!(shown(&texts.join("\n"), &root));
    }

    #[test]
    fn a_failing_agent_does_not_stop_the_others() {
        let tmp = agentwatch_testkit::TempDir::new("aw-hooks-setup");
        let home = tmp.path.join("home");
        std::fs::create_dir_all(home.join(".gemini")).unwrap();
        std::fs::write(home.join(".gemini/settings.json"), "{\"a\": }").unwrap();
        let env = env_of(&[("HOME", home.display().to_string())]);
        let options = Options {
            command: Command::Install,
            agent: None,
            project: None,
            binary: Some(PathBuf::from("/usr/bin/agentwatch")),
        };
        let report = run(&options, &env).unwrap();
        assert_eq!(report.exit_code(), 65);
        let failed: Vec<Agent> = report.failures().map(|(a, _)| a).collect();
        assert_eq!(failed, [Agent::Gemini]);
        assert_eq!(report.entries.len(), 4);
        let json = report.to_json();
        assert_eq!(json["agents"][2]["exit_code"], 65);
        assert!(
            json["agents"][2]["error"]
                .as_str()
                .unwrap()
                .contains("settings.json:1:7:"),
            "{json}"
        );
        // Without HOME nothing can be found: a configuration error.
        let report = run(&options, &env_of(&[])).unwrap();
        assert_eq!(report.exit_code(), 78);
    }
}
