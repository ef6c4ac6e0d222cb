//! # agentwatch-process: a program as an argv, with a time limit
//!
//! The one way agentwatch's adapters run a program (`systemctl restart`, the agent-deck CLI,
//! `tmux capture-pane`, `notify-send`): [`run`].
//!
//! - **argv, never a shell**: the program and each argument reach `execve` as they are; nothing
//!   is parsed, expanded or split.
//! - standard input is `/dev/null`; standard output and standard error are read on their own
//!   threads (so a chatty program never blocks on a full pipe), at most [`KEEP_BYTES`] of each
//!   kept.
//! - at the deadline the program is killed and reaped, and the answer is [`RunError::Timeout`].
//! - a program that exited while something it started still holds a pipe open is not waited
//!   for: it is judged by its exit status with the output it wrote so far.
//! - "text file busy" (a program just written while another thread forks) is retried.
//!
//! Each adapter maps [`RunError`] into its own error type and reads [`Finished`] its own way.
#![forbid(unsafe_code)]

use std::ffi::OsStr;
use std::io::Read;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Most bytes kept of each output stream; the rest is read and dropped.
pub const KEEP_BYTES: usize = 4 * 1024 * 1024;
/// Spawn attempts after "text file busy", [`BUSY_PAUSE`] apart.
const BUSY_RETRIES: u32 = 50;
const BUSY_PAUSE: Duration = Duration::from_millis(10);

/// What a program that ran to its end left.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finished {
    pub status: ExitStatus,
    /// Standard output (lossy UTF-8), at most [`KEEP_BYTES`].
    pub stdout: String,
    /// Standard error (lossy UTF-8), at most [`KEEP_BYTES`].
    pub stderr: String,
}

/// Why a program gave no [`Finished`]. The messages are the operating system's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RunError {
    /// The program does not exist.
    #[error("not found: {0}")]
    NotFound(String),
    /// It could not be started (not executable, no permission, …).
    #[error("could not run: {0}")]
    Spawn(String),
    /// It started, but waiting for its exit failed.
    #[error("could not wait for it: {0}")]
    Wait(String),
    /// It did not finish within this time limit; it was killed and reaped.
    #[error("did not finish within {0:?}; killed")]
    Timeout(Duration),
}

/// Runs `program args…` (no shell) with stdin on `/dev/null`, without the environment variables
/// `unset_env`, capturing stdout and stderr; kills and reaps it after `timeout`.
pub fn run(
    program: impl AsRef<OsStr>,
    args: &[impl AsRef<OsStr>],
    unset_env: &[&str],
    timeout: Duration,
) -> Result<Finished, RunError> {
    let mut command = Command::new(program);
    command
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for name in unset_env {
        command.env_remove(name);
    }
    let mut child = spawn(&mut command)?;
    let (buffers, finished) = read_outputs(&mut child);
    wait_for_pipes(&mut child, &finished, buffers.len(), timeout)?;
    let status = child.wait().map_err(|e| RunError::Wait(e.to_string()))?;
    let [stdout, stderr] = buffers.map(|b| {
        b.lock()
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default()
    });
    Ok(Finished {
        status,
        stdout,
        stderr,
    })
}

/// Starts `command`, retrying while its program is a "text file busy".
fn spawn(command: &mut Command) -> Result<Child, RunError> {
    let mut spawned = command.spawn();
    for _ in 0..BUSY_RETRIES {
        match &spawned {
            Err(e) if e.kind() == std::io::ErrorKind::ExecutableFileBusy => {
                std::thread::sleep(BUSY_PAUSE);
                spawned = command.spawn();
            }
            _ => break,
        }
    }
    match spawned {
        Ok(child) => Ok(child),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Err(RunError::NotFound(e.to_string()))
        }
        Err(e) => Err(RunError::Spawn(e.to_string())),
    }
}

/// The kept heads of stdout and stderr, in that order.
type Kept = [Arc<Mutex<Vec<u8>>>; 2];

/// Reads `child`'s stdout and stderr on a thread each; the receiver gets one message per
/// stream at its end of file (or none, once every thread is gone).
fn read_outputs(child: &mut Child) -> (Kept, mpsc::Receiver<()>) {
    let (done, finished) = mpsc::channel::<()>();
    let streams: [Option<Box<dyn Read + Send>>; 2] = [
        child
            .stdout
            .take()
            .map(|s| Box::new(s) as Box<dyn Read + Send>),
        child
            .stderr
            .take()
            .map(|s| Box::new(s) as Box<dyn Read + Send>),
    ];
    let buffers = streams.map(|stream| {
        let buffer = Arc::new(Mutex::new(Vec::new()));
        let kept = Arc::clone(&buffer);
        let done = done.clone();
        std::thread::spawn(move || {
            if let Some(stream) = stream {
                keep_head(stream, &kept);
            }
            let _ = done.send(());
        });
        buffer
    });
    (buffers, finished)
}

/// Waits until `pipes` streams reached their end (or the program exited leaving one open);
/// kills and reaps it at the deadline.
fn wait_for_pipes(
    child: &mut Child,
    finished: &mpsc::Receiver<()>,
    pipes: usize,
    timeout: Duration,
) -> Result<(), RunError> {
    // Both pipes reach end of file when the program exits: the clock-free way to wait for it.
    let deadline = Instant::now() + timeout;
    let mut closed = 0;
    while closed < pipes {
        let left = deadline.saturating_duration_since(Instant::now());
        match finished.recv_timeout(left) {
            Ok(()) => closed += 1,
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
            Err(mpsc::RecvTimeoutError::Timeout) => match child.try_wait() {
                // It exited, but something it started holds a pipe open: take what it wrote.
                Ok(Some(_)) => break,
                _ => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(RunError::Timeout(timeout));
                }
            },
        }
    }
    Ok(())
}

/// Reads `stream` to its end, keeping its first [`KEEP_BYTES`] in `kept`.
fn keep_head(mut stream: impl Read, kept: &Mutex<Vec<u8>>) {
    let mut chunk = [0u8; 8192];
    loop {
        match stream.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if let Ok(mut kept) = kept.lock() {
                    let room = KEEP_BYTES.saturating_sub(kept.len());
                    kept.extend_from_slice(&chunk[..n.min(room)]);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentwatch_testkit::TempDir;
    use std::path::PathBuf;

    fn script(dir: &TempDir, name: &str, body: &str) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let path = dir.path.join(name);
        std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    }

    const NONE: &[&str] = &[];

    #[test]
    fn output_and_status_are_kept() {
        let dir = TempDir::new("aw-process-output");
        let program = script(&dir, "p", "echo \"out $1\"\necho \"err $2\" >&2\nexit 3");
        let done = run(&program, &["a b", "c"], &[], Duration::from_secs(10)).unwrap();
        assert_eq!(done.status.code(), Some(3));
        assert_eq!(done.stdout, "out a b\n");
        assert_eq!(done.stderr, "err c\n");
    }

    #[test]
    fn arguments_are_never_shell_code() {
        let dir = TempDir::new("aw-process-argv");
        let marker = dir.path.join("pwned");
        let program = script(&dir, "p", "printf '%s' \"$1\"");
        let hostile = format!("x; touch {}\n'\"$(touch {0})` `", marker.display());
        let done = run(&program, &[&hostile], &[], Duration::from_secs(10)).unwrap();
        assert_eq!(done.stdout, hostile);
        assert!(!marker.exists(), "an argument ran as shell code");
    }

    #[test]
    fn stdin_is_empty_and_unset_env_is_removed() {
        let dir = TempDir::new("aw-process-env");
        let program = script(&dir, "p", "cat\necho \"[${HOME+set}]\"");
        let done = run(&program, NONE, &["HOME"], Duration::from_secs(10)).unwrap();
        assert_eq!(done.stdout, "[]\n");
        let done = run(&program, NONE, &[], Duration::from_secs(10)).unwrap();
        assert_eq!(done.stdout, "[set]\n");
    }

    #[test]
    fn a_program_that_never_exits_is_killed_at_the_timeout() {
        let dir = TempDir::new("aw-process-hang");
        // `exec` so that killing the child kills the waiting process itself.
        let program = script(&dir, "p", "exec sleep 30");
        let started = Instant::now();
        let error = run(&program, NONE, &[], Duration::from_millis(200)).unwrap_err();
        assert!(started.elapsed() < Duration::from_secs(5));
        assert_eq!(error, RunError::Timeout(Duration::from_millis(200)));
    }

    #[test]
    fn a_program_that_leaves_a_child_holding_a_pipe_is_judged_by_its_status() {
        let dir = TempDir::new("aw-process-daemon");
        // The background sleep keeps stdout and stderr open after the script exits 0.
        let program = script(&dir, "p", "echo early\nsleep 5 &\nexit 0");
        let started = Instant::now();
        let done = run(&program, NONE, &[], Duration::from_secs(1)).unwrap();
        assert!(started.elapsed() < Duration::from_secs(4));
        assert!(done.status.success());
        assert_eq!(done.stdout, "early\n");
    }

    #[test]
    fn missing_and_unrunnable_programs_are_told_apart() {
        let error = run(
            "/nonexistent/agentwatch-no-such-program",
            NONE,
            &[],
            Duration::from_secs(10),
        )
        .unwrap_err();
        assert!(matches!(error, RunError::NotFound(_)), "{error:?}");

        let dir = TempDir::new("aw-process-noexec");
        let program = dir.path.join("p");
        std::fs::write(&program, "not a program").unwrap();
        let error = run(&program, NONE, &[], Duration::from_secs(10)).unwrap_err();
        assert!(matches!(error, RunError::Spawn(_)), "{error:?}");
    }

    #[test]
    fn a_program_just_written_runs_despite_text_file_busy() {
        // Write-then-run while other threads fork: the window in which exec sees ETXTBSY.
        let dir = TempDir::new("aw-process-busy");
        std::thread::scope(|scope| {
            for t in 0..4 {
                let dir = &dir;
                scope.spawn(move || {
                    for i in 0..10 {
                        let program = script(dir, &format!("p{t}-{i}"), "exit 0");
                        let done = run(&program, NONE, &[], Duration::from_secs(10)).unwrap();
                        assert!(done.status.success());
                    }
                });
            }
        });
    }
}
