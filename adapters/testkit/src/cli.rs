//! Running a real agent CLI to its end: where `.ci/install-agents.sh` puts it, its output to
//! files beside its run, killed at a deadline.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// An agent binary: `$env_var`, else `node_modules/.bin/NAME` where `.ci/install-agents.sh`
/// puts it (`AGENTWATCH_AGENTS_DIR`, default `~/.cache/agentwatch-agents`).
pub fn find_agent(env_var: &str, name: &str) -> Option<PathBuf> {
    if let Some(bin) = std::env::var_os(env_var) {
        return Some(PathBuf::from(bin)).filter(|p| p.is_file());
    }
    let dir = std::env::var_os("AGENTWATCH_AGENTS_DIR")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME").map(|h| Path::new(&h).join(".cache/agentwatch-agents"))
        })?;
    Some(dir.join("node_modules/.bin").join(name)).filter(|p| p.is_file())
}

/// For a test marked `#[ignore = "needs …"]` (CI runs them with `--include-ignored`): the
/// binary, or a failure saying how to install it.
pub fn require_agent(env_var: &str, name: &str, what: &str) -> PathBuf {
    find_agent(env_var, name).unwrap_or_else(|| {
        panic!(
            "this test needs {what}, but it is not installed: run .ci/install-agents.sh \
             (or set {env_var})"
        )
    })
}

/// A finished run of an agent.
#[derive(Debug)]
pub struct AgentDone {
    pub status: ExitStatus,
    /// The agent's stdout (its JSON event stream in the runners' modes).
    pub stdout: String,
    pub stderr: String,
}

/// Start `command` with stdin closed, its output to `DIR/NAME.out` and `DIR/NAME.err`.
pub(crate) fn spawn_logged(mut command: Command, dir: &Path, name: &str) -> std::io::Result<Child> {
    command
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(dir.join(format!("{name}.out")))?)
        .stderr(std::fs::File::create(dir.join(format!("{name}.err")))?)
        .spawn()
}

/// Run `command` to its end ([`spawn_logged`]), killed after `timeout` (an error then).
pub(crate) fn run_logged(
    command: Command,
    dir: &Path,
    name: &str,
    timeout: Duration,
) -> Result<AgentDone, String> {
    let program = command.get_program().to_string_lossy().into_owned();
    let mut child =
        spawn_logged(command, dir, name).map_err(|e| format!("spawn {program}: {e}"))?;
    let deadline = Instant::now() + timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() >= deadline => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("{name} did not finish within {timeout:?}; killed"));
            }
            Ok(None) => std::thread::park_timeout(Duration::from_millis(50)),
            Err(e) => return Err(format!("wait for {name}: {e}")),
        }
    };
    let read =
        |ext: &str| std::fs::read_to_string(dir.join(format!("{name}.{ext}"))).unwrap_or_default();
    Ok(AgentDone {
        status,
        stdout: read("out"),
        stderr: read("err"),
    })
}

/// Files under `dir` (recursively) whose name ends with one of `suffixes`, sorted.
pub(crate) fn files_under(dir: &Path, suffixes: &[&str]) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else if suffixes.iter().any(|s| path.to_string_lossy().ends_with(s)) {
                found.push(path);
            }
        }
    }
    found.sort();
    found
}
