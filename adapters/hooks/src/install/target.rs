//! Where each agent keeps the settings our hook goes into, for the user or for one project.

use super::error::InstallError;
use crate::Agent;
use std::path::{Path, PathBuf};

/// The variables that say where the agents keep their settings (unset or empty: the default
/// under `HOME`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Locations {
    pub home: Option<PathBuf>,
    /// `CLAUDE_CONFIG_DIR`: Claude Code's directory instead of `~/.claude`.
    pub claude_config_dir: Option<PathBuf>,
    /// `CODEX_HOME`: Codex's directory instead of `~/.codex`.
    pub codex_home: Option<PathBuf>,
    /// `GEMINI_CLI_HOME`: the home Gemini CLI's `.gemini` is in instead of `HOME`.
    pub gemini_cli_home: Option<PathBuf>,
    /// `XDG_CONFIG_HOME`: opencode's config is its `opencode/` (default `~/.config`).
    pub xdg_config_home: Option<PathBuf>,
}

impl Locations {
    /// From the environment (`env("HOME")`, …).
    pub fn from_env(env: &dyn Fn(&str) -> Option<String>) -> Self {
        let var = |name: &str| env(name).filter(|v| !v.is_empty()).map(PathBuf::from);
        Self {
            home: var("HOME"),
            claude_config_dir: var("CLAUDE_CONFIG_DIR"),
            codex_home: var("CODEX_HOME"),
            gemini_cli_home: var("GEMINI_CLI_HOME"),
            xdg_config_home: var("XDG_CONFIG_HOME"),
        }
    }

    fn home(&self, what: &'static str, variable: &'static str) -> Result<PathBuf, InstallError> {
        self.home
            .clone()
            .map(|h| absolute(&h))
            .ok_or(InstallError::NoHome { what, variable })
    }

    /// Claude Code's user directory.
    pub(crate) fn claude_dir(&self) -> Result<PathBuf, InstallError> {
        match &self.claude_config_dir {
            Some(dir) => Ok(absolute(dir)),
            None => Ok(self
                .home("Claude Code's settings", "CLAUDE_CONFIG_DIR")?
                .join(".claude")),
        }
    }

    /// Codex's home as Codex names it: `CODEX_HOME` resolved (Codex canonicalises it),
    /// `~/.codex` as it is.
    pub(crate) fn codex_dir(&self) -> Result<PathBuf, InstallError> {
        match &self.codex_home {
            Some(dir) => Ok(std::fs::canonicalize(dir).unwrap_or_else(|_| absolute(dir))),
            None => Ok(self.home("Codex's settings", "CODEX_HOME")?.join(".codex")),
        }
    }

    /// Gemini CLI's user directory (`.gemini` in its home).
    pub(crate) fn gemini_dir(&self) -> Result<PathBuf, InstallError> {
        let home = match &self.gemini_cli_home {
            Some(dir) => absolute(dir),
            None => self.home("Gemini CLI's settings", "GEMINI_CLI_HOME")?,
        };
        Ok(home.join(".gemini"))
    }

    /// opencode's user config directory.
    pub(crate) fn opencode_dir(&self) -> Result<PathBuf, InstallError> {
        let config = match &self.xdg_config_home {
            Some(dir) => absolute(dir),
            None => self
                .home("opencode's config", "XDG_CONFIG_HOME")?
                .join(".config"),
        };
        Ok(config.join("opencode"))
    }
}

/// Whose settings: the user's, or one project's (its directory).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    User,
    Project(PathBuf),
}

/// The files one agent's hook lives in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub agent: Agent,
    /// The project's directory (resolved), for a project's hook.
    pub project: Option<PathBuf>,
    /// The file holding our entry: settings, `hooks.json`, or the plugin.
    pub file: PathBuf,
    /// Codex: the user's `config.toml`, where hook trust is kept (also a project's).
    pub trust_file: Option<PathBuf>,
    /// The user's settings file when `file` is a project's (what turns hooks off there too).
    pub user_file: Option<PathBuf>,
}

/// The name of our opencode plugin file.
pub const PLUGIN_FILE: &str = "agentwatch.js";

/// The files of `agent`'s hook in `scope`.
pub fn target(agent: Agent, scope: &Scope, loc: &Locations) -> Result<Target, InstallError> {
    let user_file = user_file(agent, loc)?;
    let Scope::Project(dir) = scope else {
        return Ok(Target {
            agent,
            project: None,
            file: user_file,
            trust_file: codex_config(agent, loc)?,
            user_file: None,
        });
    };
    let project = std::fs::canonicalize(dir).map_err(|source| InstallError::Io {
        path: dir.clone(),
        action: "find the project directory",
        source,
    })?;
    let file = match agent {
        Agent::Claude => project.join(".claude/settings.json"),
        Agent::Codex => project.join(".codex/hooks.json"),
        Agent::Gemini => project.join(".gemini/settings.json"),
        Agent::Opencode => project.join(".opencode/plugin").join(PLUGIN_FILE),
    };
    Ok(Target {
        agent,
        project: Some(project),
        file,
        trust_file: codex_config(agent, loc)?,
        user_file: Some(user_file),
    })
}

fn user_file(agent: Agent, loc: &Locations) -> Result<PathBuf, InstallError> {
    Ok(match agent {
        Agent::Claude => loc.claude_dir()?.join("settings.json"),
        Agent::Codex => loc.codex_dir()?.join("hooks.json"),
        Agent::Gemini => loc.gemini_dir()?.join("settings.json"),
        Agent::Opencode => loc.opencode_dir()?.join("plugin").join(PLUGIN_FILE),
    })
}

fn codex_config(agent: Agent, loc: &Locations) -> Result<Option<PathBuf>, InstallError> {
    Ok((agent == Agent::Codex)
        .then(|| loc.codex_dir())
        .transpose()?
        .map(|dir| dir.join("config.toml")))
}

/// A path made absolute against the working directory (as it is when that fails).
fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}
