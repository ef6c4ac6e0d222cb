//! A real opencode server (npm `opencode-linux-x64@1.18.33`), run offline on 127.0.0.1 with an
//! isolated HOME, for end-to-end tests. `.ci/install-opencode.sh` installs it.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// A JSON request to a real opencode server: `GET` or `DELETE` without a body, `POST` with one. A 60 s
/// timeout, so a hang fails the test instead of waiting forever; any failure panics.
pub fn request(method: &str, url: &str, body: Option<serde_json::Value>) -> serde_json::Value {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(Duration::from_secs(60)))
        .build()
        .into();
    let mut reply = match body {
        Some(body) => agent
            .post(url)
            .header("Content-Type", "application/json")
            .send(body.to_string())
            .unwrap(),
        None => match method {
            "GET" => agent.get(url).call().unwrap(),
            "DELETE" => agent.delete(url).call().unwrap(),
            other => panic!("request: {other} needs a body"),
        },
    };
    serde_json::from_str(&reply.body_mut().read_to_string().unwrap()).unwrap()
}

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

/// For a test marked `#[ignore = "needs opencode"]` (CI runs them with `--include-ignored`): the
/// binary, or a failure saying how to install it. Never a silent pass.
pub fn require_binary() -> PathBuf {
    find_binary().unwrap_or_else(|| {
        panic!("this test needs opencode, but it is not installed: run .ci/install-opencode.sh")
    })
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
        self.serve_on(port, password, limit)
    }

    /// [`OpencodeHome::serve`] on `port` (a server started again where a watcher expects it).
    pub fn serve_on(
        &self,
        port: u16,
        password: Option<&str>,
        limit: Duration,
    ) -> Result<RunningServer, String> {
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

/// One call for [`ExportBuilder::steps`]: tool, input, metadata, output.
pub type Call = (
    &'static str,
    serde_json::Value,
    serde_json::Value,
    &'static str,
);

/// `n` calls of a loop: rereading one file at a few offsets and rerunning one failing test.
pub fn looping_calls(n: usize) -> Vec<Call> {
    (0..n)
        .map(|i| {
            if i % 3 == 0 {
                (
                    "bash",
                    serde_json::json!({"command": "cd /tmp/proj && pytest -x tests/test_money.py", "description": "run"}),
                    serde_json::json!({"output": "FAILED", "exit": 1, "truncated": false}),
                    "FAILED",
                )
            } else {
                (
                    "read",
                    serde_json::json!({"filePath": "/tmp/proj/src/money.py", "offset": 1 + (i % 5) * 40, "limit": 40}),
                    serde_json::json!({"preview": "x", "truncated": false, "loaded": []}),
                    "<content>",
                )
            }
        })
        .collect()
}

/// `n` calls of healthy work: reading `n` different files.
pub fn healthy_calls(n: usize) -> Vec<Call> {
    (0..n)
        .map(|i| {
            (
                "read",
                serde_json::json!({"filePath": format!("/tmp/proj/m/{i:04}.py"), "offset": 1, "limit": 40}),
                serde_json::json!({"preview": "x", "truncated": false, "loaded": []}),
                "<content>",
            )
        })
        .collect()
}

/// Builds `opencode export` documents (`{info, messages: [{info, parts}]}`) that `opencode
/// import` accepts: ids in opencode's shape (`prefix_` + 12 hex digits of `ms * 0x1000 + n` +
/// 14 base62 characters), one assistant message per step, one tool part per call.
#[derive(Debug, Clone)]
pub struct ExportBuilder {
    info: serde_json::Value,
    messages: Vec<serde_json::Value>,
    clock_ms: i64,
    counter: u64,
    step_cost_usd: f64,
}

impl ExportBuilder {
    /// A session `id` (must start with `ses_`) titled `title`, starting at `start_ms`.
    pub fn new(id: &str, title: &str, parent: Option<&str>, start_ms: i64) -> Self {
        let mut info = serde_json::json!({
            "id": id, "slug": "agentwatch-test", "projectID": "global", "directory": "/tmp/proj",
            "path": "", "title": title, "version": "1.18.33", "cost": 0,
            "tokens": {"input": 0, "output": 0, "reasoning": 0, "cache": {"read": 0, "write": 0}},
            "time": {"created": start_ms, "updated": start_ms}
        });
        if let Some(p) = parent {
            info["parentID"] = serde_json::Value::String(p.to_owned());
        }
        Self {
            info,
            messages: Vec::new(),
            clock_ms: start_ms,
            counter: 0,
            step_cost_usd: 0.0,
        }
    }

    /// What each assistant step of the next [`steps`](Self::steps) costs (`cost`, US dollars).
    pub fn step_cost(mut self, usd: f64) -> Self {
        self.step_cost_usd = usd;
        self
    }

    /// A new id of opencode's shape for `prefix` at the builder's clock.
    fn next_id(&mut self, prefix: &str) -> String {
        self.counter += 1;
        let value = ((self.clock_ms as u64).wrapping_mul(0x1000) + self.counter) & 0xFFFF_FFFF_FFFF;
        const B62: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
        let mut tail = String::new();
        let mut n = value ^ 0x5DEECE66D;
        for _ in 0..14 {
            tail.push(B62[(n % 62) as usize] as char);
            n = n / 62 + 7919;
        }
        format!("{prefix}_{value:012x}{tail}")
    }

    /// A user message, then one assistant step per call (each call: tool, input, metadata,
    /// output). Each step takes `step_ms`.
    pub fn steps(
        mut self,
        agent: &str,
        calls: &[(&str, serde_json::Value, serde_json::Value, &str)],
        step_ms: i64,
    ) -> Self {
        let session = self.info["id"].as_str().unwrap_or_default().to_owned();
        let user_id = self.next_id("msg");
        let text_part = self.next_id("prt");
        self.messages.push(serde_json::json!({
            "info": {"id": user_id, "sessionID": session, "role": "user", "time": {"created": self.clock_ms},
                     "agent": agent, "model": {"providerID": "anthropic", "modelID": "claude-sonnet-4-5"}},
            "parts": [{"id": text_part, "sessionID": session, "messageID": user_id, "type": "text", "text": "go on"}]
        }));
        for (tool, input, metadata, output) in calls {
            self.clock_ms += step_ms;
            let start = self.clock_ms;
            let msg_id = self.next_id("msg");
            let part_id = self.next_id("prt");
            let call_id = self.next_id("call");
            self.messages.push(serde_json::json!({
                "info": {"id": msg_id, "sessionID": session, "role": "assistant", "parentID": user_id,
                         "time": {"created": start, "completed": start + step_ms / 2},
                         "modelID": "claude-sonnet-4-5", "providerID": "anthropic", "mode": agent, "agent": agent,
                         "path": {"cwd": "/tmp/proj", "root": "/tmp/proj"}, "cost": self.step_cost_usd,
                         "tokens": {"input": 0, "output": 0, "reasoning": 0, "cache": {"read": 0, "write": 0}},
                         "finish": "tool-calls"},
                "parts": [{"id": part_id, "sessionID": session, "messageID": msg_id, "type": "tool", "tool": tool,
                           "callID": call_id,
                           "state": {"status": "completed", "input": input, "output": output, "title": tool,
                                     "metadata": metadata, "time": {"start": start + 1, "end": start + step_ms / 4}}}]
            }));
        }
        self.info["time"]["updated"] = serde_json::Value::from(self.clock_ms);
        self
    }

    /// The export document.
    pub fn build(&self) -> serde_json::Value {
        serde_json::json!({"info": self.info, "messages": self.messages})
    }

    /// Write the export document to `path`.
    pub fn write(&self, path: &Path) -> PathBuf {
        std::fs::write(path, self.build().to_string()).expect("write export");
        path.to_path_buf()
    }

    /// The builder's clock (ms).
    pub fn clock_ms(&self) -> i64 {
        self.clock_ms
    }
}

/// A loopback server answering opencode 1.18.33's listing and message routes from memory
/// (`/experimental/session`, `/session/:id/message` with `limit` / `before` paging and
/// `X-Next-Cursor`), for benchmarks and tests that need more sessions than `opencode import`
/// can load in reasonable time. End-to-end tests use the real server. It has no event stream
/// (`/global/event` is 404, as on a server without the route).
pub fn serve_exports(exports: Vec<serde_json::Value>) -> crate::HttpServer {
    serve_live(std::sync::Arc::new(std::sync::Mutex::new(exports)), None)
}

/// Frames for a live `/global/event` (one SSE frame per message, e.g. `data: {…}\n\n`).
pub type Frames = std::sync::Arc<std::sync::Mutex<std::sync::mpsc::Receiver<Vec<u8>>>>;

/// [`serve_exports`] over exports the caller may change while it serves (each request reads
/// them as they are then), with `/global/event` fed from `events` when given.
pub fn serve_live(
    exports: std::sync::Arc<std::sync::Mutex<Vec<serde_json::Value>>>,
    events: Option<Frames>,
) -> crate::HttpServer {
    use crate::{Reply, Request};
    let not_found = || Reply::json(404, &serde_json::json!({"name": "NotFoundError"}));
    // Where each session is in `exports` (checked on use, rebuilt when the exports changed), so
    // a request costs what a real server's indexed lookup does, not a scan of every session.
    let index: std::sync::Mutex<std::collections::HashMap<String, usize>> = Default::default();
    crate::HttpServer::start(move |request: &Request| {
        let Ok(exports) = exports.lock() else {
            return Reply::json(500, &serde_json::json!({"name": "UnknownError"}));
        };
        match (request.path(), &events) {
            ("/global/event", Some(frames)) => return Reply::Feed(std::sync::Arc::clone(frames)),
            ("/experimental/session", _) => {
                let infos: Vec<&serde_json::Value> = exports.iter().map(|e| &e["info"]).collect();
                return json_reply(serde_json::to_vec(&infos));
            }
            _ => {}
        }
        let Some(id) = request
            .path()
            .strip_prefix("/session/")
            .and_then(|p| p.strip_suffix("/message"))
        else {
            return not_found();
        };
        let found = index.lock().ok().and_then(|mut index| {
            let at = |i: &usize| exports.get(*i).is_some_and(|e| e["info"]["id"] == id);
            if let Some(i) = index.get(id).filter(|i| at(i)) {
                return Some(*i);
            }
            *index = exports
                .iter()
                .enumerate()
                .filter_map(|(i, e)| Some((e["info"]["id"].as_str()?.to_owned(), i)))
                .collect();
            index.get(id).copied()
        });
        let Some(all) = found
            .and_then(|i| exports.get(i))
            .and_then(|e| e["messages"].as_array())
        else {
            return not_found();
        };
        let limit: usize = request
            .query("limit")
            .and_then(|l| l.parse().ok())
            .unwrap_or(0);
        let end: usize = request
            .query("before")
            .and_then(|c| c.parse().ok())
            .unwrap_or(all.len())
            .min(all.len());
        let start = if limit == 0 {
            0
        } else {
            end.saturating_sub(limit)
        };
        // Written from the stored messages, not a copy of them: a request costs the server what
        // writing its answer costs.
        let reply = json_reply(serde_json::to_vec(&all[start..end]));
        if start > 0 {
            reply.with_header("X-Next-Cursor", &start.to_string())
        } else {
            reply
        }
    })
}

/// A 200 JSON answer of `body` (a 500 when it could not be written).
fn json_reply(body: Result<Vec<u8>, serde_json::Error>) -> crate::Reply {
    match body {
        Ok(body) => crate::Reply::Http {
            status: 200,
            headers: vec![("content-type".into(), "application/json".into())],
            body,
        },
        Err(_) => crate::Reply::json(500, &serde_json::json!({"name": "UnknownError"})),
    }
}
