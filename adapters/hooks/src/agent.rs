//! The agents a hook serves, by the name `agentwatch hook` and `agentwatch hooks` take.

use std::fmt;
use std::str::FromStr;

/// An agent whose pre-tool hook agentwatch answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Agent {
    /// Claude Code: `PreToolUse` command hooks in `settings.json`.
    Claude,
    /// Codex CLI: `PreToolUse` command hooks in `hooks.json` (trusted by hash).
    Codex,
    /// Gemini CLI: `BeforeTool` command hooks in `settings.json` (timeouts in milliseconds).
    Gemini,
    /// opencode: a plugin's `tool.execute.before`, which asks `agentwatch hook opencode`.
    Opencode,
}

impl Agent {
    /// Every agent, in the order `all` means.
    pub const ALL: [Agent; 4] = [Agent::Claude, Agent::Codex, Agent::Gemini, Agent::Opencode];

    /// The name on the command line (`agentwatch hook claude`).
    pub fn as_str(self) -> &'static str {
        match self {
            Agent::Claude => "claude",
            Agent::Codex => "codex",
            Agent::Gemini => "gemini",
            Agent::Opencode => "opencode",
        }
    }

    /// The agent's name for a person.
    pub fn display_name(self) -> &'static str {
        match self {
            Agent::Claude => "Claude Code",
            Agent::Codex => "Codex CLI",
            Agent::Gemini => "Gemini CLI",
            Agent::Opencode => "opencode",
        }
    }
}

/// By its name on the command line (`"claude"`).
impl serde::Serialize for Agent {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl fmt::Display for Agent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An agent name that is none of [`Agent::ALL`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown agent `{0}` (claude, codex, gemini or opencode)")]
pub struct UnknownAgent(pub String);

impl FromStr for Agent {
    type Err = UnknownAgent;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        Agent::ALL
            .into_iter()
            .find(|agent| agent.as_str() == name)
            .ok_or_else(|| UnknownAgent(name.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_agent_reads_back_from_its_name() {
        for agent in Agent::ALL {
            assert_eq!(agent.as_str().parse::<Agent>(), Ok(agent));
        }
        assert_eq!(
            "claude-code".parse::<Agent>(),
            Err(UnknownAgent("claude-code".into()))
        );
    }
}
