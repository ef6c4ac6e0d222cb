//! tmux pane capture and its SHA-256, for the waiting patrol.
//!
//! `tmux [-S PATH | -L NAME] capture-pane -p -t =SESSION:` prints the visible pane of the
//! session's current window. The target is an **exact** session match (`=`): a bare name is
//! matched by prefix, so `agentdeck_fix_1a2b` could capture `agentdeck_fix_1a2b3c`'s pane.

use crate::process::{self, RunError, head};
use sha2::{Digest, Sha256};
use std::path::PathBuf;
use std::time::Duration;

/// Which tmux server to ask.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Socket {
    /// The user's default server.
    #[default]
    Default,
    /// `-S PATH`: a socket path.
    Path(PathBuf),
    /// `-L NAME`: a named socket in tmux's socket directory (agent-deck's `[tmux].socket_name`).
    Name(String),
}

impl Socket {
    /// A path when `text` holds a `/`, else a socket name; blank is the default server.
    pub fn parse(text: &str) -> Self {
        let text = text.trim();
        if text.is_empty() {
            Self::Default
        } else if text.contains('/') {
            Self::Path(PathBuf::from(text))
        } else {
            Self::Name(text.to_owned())
        }
    }

    /// The options before the tmux command.
    pub fn args(&self) -> Vec<String> {
        match self {
            Self::Default => Vec::new(),
            Self::Path(path) => vec!["-S".to_owned(), path.display().to_string()],
            Self::Name(name) => vec!["-L".to_owned(), name.clone()],
        }
    }
}

/// Why a pane could not be captured.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TmuxError {
    #[error("{program}: not found ({message}); install tmux")]
    NotFound { program: String, message: String },
    #[error("{program}: could not start: {message}")]
    Spawn { program: String, message: String },
    #[error("tmux capture-pane: no answer within {0:?}; killed")]
    Timeout(Duration),
    /// No server, no such session, or another refusal; `message` is tmux's stderr.
    #[error("tmux capture-pane -t {target}: {status}: {message}")]
    Failed {
        target: String,
        status: String,
        message: String,
    },
    #[error("refusing to capture tmux session {0:?}: not a plain session name")]
    BadTarget(String),
}

/// The tmux binary.
#[derive(Debug, Clone)]
pub struct Tmux {
    pub program: PathBuf,
    pub timeout: Duration,
}

impl Default for Tmux {
    fn default() -> Self {
        Self {
            program: PathBuf::from("tmux"),
            timeout: Duration::from_secs(10),
        }
    }
}

/// The exact-match pane target of a tmux session name: `=NAME:`.
pub fn session_target(name: &str) -> Result<String, TmuxError> {
    // `:` and `.` separate window and pane in a target; agent-deck's names never hold them.
    if name.trim().is_empty() || name.contains([':', '.', '\0', '\n']) {
        return Err(TmuxError::BadTarget(name.to_owned()));
    }
    Ok(format!("={name}:"))
}

impl Tmux {
    /// The argv after the binary for capturing session `name`'s pane.
    pub fn capture_argv(socket: &Socket, name: &str) -> Result<Vec<String>, TmuxError> {
        let mut argv = socket.args();
        argv.extend(["capture-pane", "-p", "-t"].map(str::to_owned));
        argv.push(session_target(name)?);
        Ok(argv)
    }

    /// The visible text of session `name`'s current pane.
    pub fn capture_pane(&self, socket: &Socket, name: &str) -> Result<String, TmuxError> {
        let argv = Self::capture_argv(socket, name)?;
        let program = self.program.display().to_string();
        let output = process::run(&self.program, &argv, self.timeout).map_err(|e| match e {
            RunError::NotFound(message) => TmuxError::NotFound { program, message },
            RunError::Spawn(message) => TmuxError::Spawn { program, message },
            RunError::Wait(message) => TmuxError::Spawn {
                program,
                message: format!("could not wait for it: {message}"),
            },
            RunError::Timeout(t) => TmuxError::Timeout(t),
        })?;
        if output.code == Some(0) {
            Ok(output.stdout)
        } else {
            Err(TmuxError::Failed {
                target: argv.last().cloned().unwrap_or_default(),
                status: output.status(),
                message: head(&output.stderr, 200),
            })
        }
    }
}

/// SHA-256 of the captured text, lower-case hex.
pub fn pane_hash(text: &str) -> String {
    Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The last `lines` non-blank lines of a pane, for rate-limit detection (an error banner sits
/// at the bottom).
pub fn pane_tail(text: &str, lines: usize) -> String {
    let kept: Vec<&str> = text
        .lines()
        .map(str::trim_end)
        .filter(|l| !l.trim().is_empty())
        .collect();
    kept[kept.len().saturating_sub(lines)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha256_matches_the_standard_vectors() {
        assert_eq!(
            pane_hash(""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(
            pane_hash("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn sockets_and_targets() {
        assert_eq!(Socket::parse(""), Socket::Default);
        assert_eq!(Socket::parse("agentdeck"), Socket::Name("agentdeck".into()));
        assert_eq!(
            Socket::parse("/tmp/x/tmux.sock"),
            Socket::Path("/tmp/x/tmux.sock".into())
        );
        assert_eq!(
            Tmux::capture_argv(&Socket::Name("ad".into()), "agentdeck_x_1").unwrap(),
            ["-L", "ad", "capture-pane", "-p", "-t", "=agentdeck_x_1:"]
        );
        assert_eq!(
            Tmux::capture_argv(&Socket::Default, "s").unwrap(),
            ["capture-pane", "-p", "-t", "=s:"]
        );
        for bad in ["", "a:b", "a.b", "a\nb"] {
            assert!(session_target(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn tail_keeps_the_last_non_blank_lines() {
        assert_eq!(pane_tail("a\n\nb  \nc\n\n\n", 2), "b\nc");
        assert_eq!(pane_tail("", 5), "");
    }
}
