//! A real opencode server (npm `opencode-linux-x64@1.18.33`), run offline on 127.0.0.1 with an
//! isolated HOME, for end-to-end tests. `.ci/install-opencode.sh` installs it.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// The opencode binary: `AGENTWATCH_OPENCODE_BIN`, else where `.ci/install-opencode.sh` puts it.
pub fn find_binary() -> Option<PathBuf> {
    if let Some(bin) = std::env::var_os("AGENTWATCH_OPENCODE_BIN") {
        return Some(PathBuf::from(bin)).filter(|p| p.is_file());
    }
    let dir = std::env::var_os("AGENTWATCH_OPENCODE_DIR")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME").map(|h| Path::new(&h).join(".cache/agentwatch-opencode"))
        })?;
    Some(dir.join("node_modules/opencode-linux-x64/bin/opencode")).filter(|p| p.is_file())
}

/// An isolated opencode home: every XDG dir under one root, a project dir, no network features.
#[derive(Debug)]
pub struct OpencodeHome {
    pub bin: PathBuf,
    pub root: PathBuf,
    pub project: PathBuf,
}

impl OpencodeHome {
    pub fn new(bin: PathBuf, root: &Path) -> Self {
        let project = root.join("proj");
        std::fs::create_dir_all(&project).expect("project dir");
        Self {
            bin,
            root: root.to_path_buf(),
            project,
        }
    }

    /// A command for the binary with the isolated environment, run in the project dir.
    pub fn command(&self) -> Command {
        let home = self.root.join("home");
        let mut cmd = Command::new(&self.bin);
        cmd.current_dir(&self.project)
            .env("HOME", &home)
            .env("XDG_DATA_HOME", home.join(".local/share"))
            .env("XDG_CONFIG_HOME", home.join(".config"))
            .env("XDG_CACHE_HOME", home.join(".cache"))
            .env("XDG_STATE_HOME", home.join(".local/state"))
            .env_remove("OPENCODE_SERVER_PASSWORD");
        for var in [
            "OPENCODE_DISABLE_AUTOUPDATE",
            "OPENCODE_DISABLE_MODELS_FETCH",
            "OPENCODE_DISABLE_LSP_DOWNLOAD",
            "OPENCODE_DISABLE_SHARE",
            "OPENCODE_DISABLE_DEFAULT_PLUGINS",
            "OPENCODE_DISABLE_CLAUDE_CODE",
        ] {
            cmd.env(var, "1");
        }
        cmd
    }

    /// Where this home's `opencode.db` lives.
    pub fn db_path(&self) -> PathBuf {
        self.root.join("home/.local/share/opencode/opencode.db")
    }

    /// `opencode import FILE` (binds the session to the project dir).
    pub fn import(&self, file: &Path) -> Result<String, String> {
        let out = self
            .command()
            .arg("import")
            .arg(file)
            .output()
            .map_err(|e| format!("spawn opencode import: {e}"))?;
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        if out.status.success() {
            Ok(text)
        } else {
            Err(format!("opencode import {}: {text}", file.display()))
        }
    }

    /// Start `opencode serve` on a free loopback port and wait for its "listening" line
    /// (requests sent earlier can hang forever). Gives up after `limit`.
    pub fn serve(&self, password: Option<&str>, limit: Duration) -> Result<RunningServer, String> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| e.to_string())?
            .port();
        let mut cmd = self.command();
        cmd.args([
            "serve",
            "--port",
            &port.to_string(),
            "--hostname",
            "127.0.0.1",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .stdin(Stdio::null());
        if let Some(p) = password {
            cmd.env("OPENCODE_SERVER_PASSWORD", p);
        }
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("spawn opencode serve: {e}"))?;
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if line.contains("opencode server listening on") {
                    let _ = tx.send(());
                }
            }
        });
        match rx.recv_timeout(limit) {
            Ok(()) => Ok(RunningServer { child, port }),
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                Err(format!(
                    "opencode serve did not print its listening line within {limit:?}"
                ))
            }
        }
    }
}

/// A running `opencode serve`; killed when dropped.
#[derive(Debug)]
pub struct RunningServer {
    child: Child,
    pub port: u16,
}

impl RunningServer {
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

impl Drop for RunningServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
