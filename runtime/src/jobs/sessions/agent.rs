//! The agents whose sessions the job watches, as a person and an alert key name them. Only
//! the runtime knows agents by name: detect-core sees one call model, and each source maps its
//! agent's tools onto it.

use serde::{Deserialize, Serialize};

/// Which agent wrote a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Agent {
    /// opencode (servers, `opencode.db`, exports and session files).
    #[default]
    Opencode,
    /// Claude Code (its JSON Lines transcripts).
    Claude,
    /// OpenAI's Codex CLI (its rollouts).
    Codex,
    /// Google's Gemini CLI (its chat recordings).
    Gemini,
}

impl Agent {
    /// The family of its alert keys: `claude` makes `claude-loop:{root}`.
    pub fn family(self) -> &'static str {
        match self {
            Self::Opencode => "opencode",
            Self::Claude => "claude",
            Self::Codex => "codex",
            Self::Gemini => "gemini",
        }
    }

    /// Its name as a person reads it.
    pub fn display_name(self) -> &'static str {
        match self {
            Self::Opencode => "opencode",
            Self::Claude => "Claude Code",
            Self::Codex => "Codex CLI",
            Self::Gemini => "Gemini CLI",
        }
    }

    /// The dedup key of a loop of this agent's tree rooted at `root`.
    pub fn loop_key(self, root: &str) -> String {
        alert_state::loop_key(self.family(), root)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_name_the_agent_and_opencode_keeps_its_own() {
        assert_eq!(Agent::Opencode.loop_key("ses_a"), "opencode-loop:ses_a");
        assert_eq!(
            Agent::Opencode.loop_key("ses_a"),
            detect_core::dedup_key("ses_a")
        );
        assert_eq!(Agent::Claude.loop_key("4d56"), "claude-loop:4d56");
        assert_eq!(Agent::Codex.loop_key("019a"), "codex-loop:019a");
        assert_eq!(Agent::Gemini.loop_key("s1"), "gemini-loop:s1");
    }
}
