//! Running a program as an argv (never through a shell) with a timeout, keeping its output.

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Most bytes kept of each output stream.
const KEEP_BYTES: usize = 4 * 1024 * 1024;
/// "Text file busy" retries (a program just written while another thread forks).
const BUSY_RETRIES: u32 = 50;

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

/// Why a program gave no [`Output`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunError {
    NotFound(String),
    Spawn(String),
    Timeout(Duration),
}

/// Runs `program args…` with stdin on /dev/null; kills it after `timeout`.
pub fn run(program: &Path, args: &[String], timeout: Duration) -> Result<Output, RunError> {
    let mut command = Command::new(program);
    command
        .args(args)
        .env_remove("TMUX")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut spawned = command.spawn();
    for _ in 0..BUSY_RETRIES {
        match &spawned {
            Err(e) if e.kind() == std::io::ErrorKind::ExecutableFileBusy => {
                std::thread::sleep(Duration::from_millis(10));
                spawned = command.spawn();
            }
            _ => break,
        }
    }
    let mut child = match spawned {
        Ok(child) => child,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(RunError::NotFound(e.to_string()));
        }
        Err(e) => return Err(RunError::Spawn(e.to_string())),
    };
    let (done, finished) = mpsc::channel::<()>();
    let mut buffers = Vec::new();
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
    for stream in streams {
        let buffer = Arc::new(Mutex::new(Vec::new()));
        buffers.push(Arc::clone(&buffer));
        let done = done.clone();
        std::thread::spawn(move || {
            if let Some(mut stream) = stream {
                let mut chunk = [0u8; 8192];
                loop {
                    match stream.read(&mut chunk) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => {
                            if let Ok(mut kept) = buffer.lock() {
                                let room = KEEP_BYTES.saturating_sub(kept.len());
                                kept.extend_from_slice(&chunk[..n.min(room)]);
                            }
                        }
                    }
                }
            }
            let _ = done.send(());
        });
    }
    drop(done);
    // Both pipes reach end of file when the program exits: the clock-free way to wait for it.
    let deadline = Instant::now() + timeout;
    let mut closed = 0;
    while closed < 2 {
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
    let status = child
        .wait()
        .map_err(|e| RunError::Spawn(format!("could not wait for it: {e}")))?;
    let text = |i: usize| {
        buffers
            .get(i)
            .and_then(|b| {
                b.lock()
                    .ok()
                    .map(|b| String::from_utf8_lossy(&b).into_owned())
            })
            .unwrap_or_default()
    };
    Ok(Output {
        code: status.code(),
        stdout: text(0),
        stderr: text(1),
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
