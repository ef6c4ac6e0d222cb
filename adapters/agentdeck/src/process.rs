//! agent-deck's and tmux's answers: a program run by [`agentwatch_process::run`], read as text.

use std::path::Path;
use std::time::Duration;

pub(crate) use agentwatch_process::RunError;

/// What a finished program left.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Output {
    /// The exit code; `None` when a signal ended it.
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl Output {
    /// The exit code as text (`exit 2`, `killed by a signal`).
    pub fn status(&self) -> String {
        self.code
            .map_or_else(|| "killed by a signal".to_owned(), |c| format!("exit {c}"))
    }
}

/// Runs `program args…` with stdin on /dev/null and `TMUX` unset (agent-deck and tmux would
/// otherwise act on the tmux server the watchdog happens to run in); kills it after `timeout`.
pub(crate) fn run(program: &Path, args: &[String], timeout: Duration) -> Result<Output, RunError> {
    let done = agentwatch_process::run(program, args, &["TMUX"], timeout)?;
    Ok(Output {
        code: done.status.code(),
        stdout: done.stdout,
        stderr: done.stderr,
    })
}

/// The first `max` characters of `text`, trimmed.
pub fn head(text: &str, max: usize) -> String {
    let text = text.trim();
    let mut out: String = text.chars().take(max).collect();
    if text.chars().nth(max).is_some() {
        out.push('…');
    }
    out
}
