//! The real Claude Code CLI (npm `@anthropic-ai/claude-code@2.1.328`), run offline against a
//! scripted model server on 127.0.0.1, for end-to-end tests. `.ci/install-agents.sh` installs
//! it; tests find it through `AGENTWATCH_CLAUDE_BIN`.
//!
//! - [`Script`]: what the model does, turn by turn, per conversation. A conversation is found
//!   by a marker in the text of its first user message (the `-p` prompt, or a subagent's
//!   `prompt`); its turn is the number of assistant messages in the request. So the answer to
//!   a request depends only on the request: a retried request gets the same answer, and a
//!   subagent's requests (interleaved with its parent's) play their own script.
//! - [`ModelServer`]: speaks the Messages API as Claude Code calls it (`POST
//!   /v1/messages?beta=true`, streamed): `message_start`, then per block
//!   `content_block_start` / `content_block_delta` (`input_json_delta` for a `tool_use`, in two
//!   pieces; `text_delta` for text) / `content_block_stop`, `message_delta` with `stop_reason`
//!   `tool_use` or `end_turn`, `message_stop`. A request of no scripted conversation, or past
//!   its script, is answered with a short text that ends the turn.
//! - [`ClaudeRun`]: `claude -p PROMPT` in a directory with a `CLAUDE_CONFIG_DIR`, an isolated
//!   `HOME` and `TMPDIR`, and nothing else from the environment but `PATH`; run to its end
//!   ([`ClaudeRun::run`]) or started in the background ([`ClaudeRun::spawn`], for watching
//!   its transcript grow).
//!
//! ```no_run
//! use agentwatch_testkit::claude::{ClaudeRun, ModelServer, Script, Turn, require_binary};
//! use serde_json::json;
//!
//! let root = agentwatch_testkit::TempDir::new("claude");
//! let script = Script::new().conversation(
//!     "LOOP",
//!     (0..20).map(|_| Turn::tool("Read", json!({"file_path": "notes.txt"}))).collect(),
//! );
//! let server = ModelServer::start(script);
//! let run = ClaudeRun::new(require_binary(), &server, &root.path, "LOOP: read the notes");
//! std::fs::write(run.dir.join("notes.txt"), "hello\n").unwrap();
//! let done = run.run(std::time::Duration::from_secs(120)).expect("claude ran");
//! assert!(done.status.success(), "{}", done.stderr);
//! // The transcript: run.config_dir/projects/<slug>/<session>.jsonl
//! ```

use crate::{HttpServer, Reply, Request};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The version `.ci/install-agents.sh` installs.
pub const CLAUDE_VERSION: &str = "2.1.328";

/// The claude binary: `AGENTWATCH_CLAUDE_BIN`, else where `.ci/install-agents.sh` puts it
/// (`AGENTWATCH_AGENTS_DIR`, default `~/.cache/agentwatch-agents`).
pub fn find_binary() -> Option<PathBuf> {
    if let Some(bin) = std::env::var_os("AGENTWATCH_CLAUDE_BIN") {
        return Some(PathBuf::from(bin)).filter(|p| p.is_file());
    }
    let dir = std::env::var_os("AGENTWATCH_AGENTS_DIR")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME").map(|h| Path::new(&h).join(".cache/agentwatch-agents"))
        })?;
    Some(dir.join("node_modules/.bin/claude")).filter(|p| p.is_file())
}

/// For a test marked `#[ignore = "needs claude (npm @anthropic-ai/claude-code)"]` (CI runs
/// them with `--include-ignored`): the binary, or a failure saying how to install it.
pub fn require_binary() -> PathBuf {
    find_binary().unwrap_or_else(|| {
        panic!("this test needs Claude Code, but it is not installed: run .ci/install-agents.sh")
    })
}

/// One model turn.
#[derive(Debug, Clone, PartialEq)]
pub enum Turn {
    /// Tool calls (`name`, `input`), in one response: `stop_reason: tool_use`.
    Tools(Vec<(String, Value)>),
    /// A text answer that ends the turn: `stop_reason: end_turn`.
    Text(String),
}

impl Turn {
    /// A turn of one tool call.
    pub fn tool(name: &str, input: Value) -> Self {
        Turn::Tools(vec![(name.to_owned(), input)])
    }

    /// A turn of several tool calls in one response (Claude Code writes one line per block).
    pub fn tools(calls: &[(&str, Value)]) -> Self {
        Turn::Tools(
            calls
                .iter()
                .map(|(name, input)| ((*name).to_owned(), input.clone()))
                .collect(),
        )
    }

    pub fn text(text: &str) -> Self {
        Turn::Text(text.to_owned())
    }
}

/// The turns of one conversation, found by `marker` in its first user message.
#[derive(Debug, Clone, PartialEq)]
pub struct Conversation {
    pub marker: String,
    pub turns: Vec<Turn>,
}

/// What the scripted model does.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Script {
    pub conversations: Vec<Conversation>,
    /// Wait this long before answering each request (a slow model: a run that lasts long
    /// enough to be watched while it writes).
    pub pace: Duration,
}

impl Script {
    pub fn new() -> Self {
        Self::default()
    }

    /// Add a conversation; after its turns it answers with text and ends.
    pub fn conversation(mut self, marker: &str, turns: Vec<Turn>) -> Self {
        self.conversations.push(Conversation {
            marker: marker.to_owned(),
            turns,
        });
        self
    }

    pub fn paced(mut self, pace: Duration) -> Self {
        self.pace = pace;
        self
    }

    /// The tool calls this script makes, per conversation marker, in order: what a transcript
    /// of a completed run must hold.
    pub fn tool_calls(&self, marker: &str) -> Vec<(String, Value)> {
        self.conversations
            .iter()
            .filter(|c| c.marker == marker)
            .flat_map(|c| &c.turns)
            .flat_map(|turn| match turn {
                Turn::Tools(calls) => calls.clone(),
                Turn::Text(_) => Vec::new(),
            })
            .collect()
    }

    /// The conversation a request belongs to (its index) and the turn it asks for.
    pub fn place(&self, request: &Value) -> Option<(usize, usize)> {
        let messages = request.get("messages")?.as_array()?;
        let first_user = messages
            .iter()
            .find(|m| m.get("role").and_then(Value::as_str) == Some("user"))?;
        let text = message_text(first_user);
        let conversation = self
            .conversations
            .iter()
            .position(|c| text.contains(&c.marker))?;
        let turn = messages
            .iter()
            .filter(|m| m.get("role").and_then(Value::as_str) == Some("assistant"))
            .count();
        Some((conversation, turn))
    }

    /// The streamed answer (server-sent events) to a Messages API request.
    pub fn answer(&self, request: &Value) -> String {
        let model = request
            .get("model")
            .and_then(Value::as_str)
            .unwrap_or("claude-scripted");
        let place = self.place(request);
        let turn = place.and_then(|(c, t)| self.conversations[c].turns.get(t));
        let (c, t) = place.unwrap_or((usize::MAX, 0));
        let done = Turn::text("Done.");
        stream_turn(model, &format!("c{c}t{t}"), turn.unwrap_or(&done))
    }
}

/// All the text of a message: its string content, or its text blocks.
fn message_text(message: &Value) -> String {
    match message.get("content") {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Array(blocks)) => blocks
            .iter()
            .filter_map(|b| b.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// One turn as Messages API server-sent events; ids are `msg_aw_{tag}` and
/// `toolu_aw_{tag}b{index}`.
pub fn stream_turn(model: &str, tag: &str, turn: &Turn) -> String {
    let mut out = String::new();
    let mut event = |name: &str, data: Value| {
        out.push_str(&format!("event: {name}\ndata: {data}\n\n"));
    };
    event(
        "message_start",
        json!({"type": "message_start", "message": {
            "id": format!("msg_aw_{tag}"), "type": "message", "role": "assistant", "model": model,
            "content": [], "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": 10, "output_tokens": 1}}}),
    );
    let stop = match turn {
        Turn::Tools(calls) => {
            for (index, (name, input)) in calls.iter().enumerate() {
                event(
                    "content_block_start",
                    json!({"type": "content_block_start", "index": index, "content_block": {
                        "type": "tool_use", "id": format!("toolu_aw_{tag}b{index}"),
                        "name": name, "input": {}}}),
                );
                // The input in two pieces, as a model streams it.
                let text = input.to_string();
                let cut = (0..=text.len() / 2)
                    .rev()
                    .find(|i| text.is_char_boundary(*i))
                    .unwrap_or(0);
                for piece in [&text[..cut], &text[cut..]] {
                    event(
                        "content_block_delta",
                        json!({"type": "content_block_delta", "index": index,
                               "delta": {"type": "input_json_delta", "partial_json": piece}}),
                    );
                }
                event(
                    "content_block_stop",
                    json!({"type": "content_block_stop", "index": index}),
                );
            }
            "tool_use"
        }
        Turn::Text(text) => {
            event(
                "content_block_start",
                json!({"type": "content_block_start", "index": 0,
                       "content_block": {"type": "text", "text": ""}}),
            );
            event(
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 0,
                       "delta": {"type": "text_delta", "text": text}}),
            );
            event(
                "content_block_stop",
                json!({"type": "content_block_stop", "index": 0}),
            );
            "end_turn"
        }
    };
    event(
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null},
               "usage": {"output_tokens": 12}}),
    );
    event("message_stop", json!({"type": "message_stop"}));
    out
}

/// A scripted Messages API server on 127.0.0.1. Stops when dropped.
#[derive(Debug)]
pub struct ModelServer {
    http: HttpServer,
    script: Arc<Script>,
}

impl ModelServer {
    pub fn start(script: Script) -> Self {
        let script = Arc::new(script);
        let plays = Arc::clone(&script);
        let http = HttpServer::start(move |request| {
            if request.method != "POST" || request.path() != "/v1/messages" {
                return Reply::json(
                    404,
                    &json!({"type": "error", "error": {"type": "not_found_error",
                            "message": format!("the scripted model serves POST /v1/messages, not {} {}", request.method, request.path())}}),
                );
            }
            if !plays.pace.is_zero() {
                std::thread::sleep(plays.pace);
            }
            Reply::Http {
                status: 200,
                headers: vec![
                    ("content-type".into(), "text/event-stream".into()),
                    ("cache-control".into(), "no-cache".into()),
                ],
                body: plays.answer(&request.body_json()).into_bytes(),
            }
        });
        Self { http, script }
    }

    /// `http://127.0.0.1:PORT`, for `ANTHROPIC_BASE_URL`.
    pub fn url(&self) -> String {
        self.http.url()
    }

    pub fn script(&self) -> &Script {
        &self.script
    }

    /// Every request received so far.
    pub fn requests(&self) -> Vec<Request> {
        self.http.requests()
    }

    /// The Messages API requests of the conversation `marker`, in the order received.
    pub fn conversation_requests(&self, marker: &str) -> Vec<Value> {
        let index = self
            .script
            .conversations
            .iter()
            .position(|c| c.marker == marker);
        self.requests()
            .iter()
            .map(Request::body_json)
            .filter(|body| index.is_some() && self.script.place(body).map(|p| p.0) == index)
            .collect()
    }
}

/// `claude -p PROMPT` offline against a [`ModelServer`] (agents.md §7).
#[derive(Debug, Clone)]
pub struct ClaudeRun {
    pub bin: PathBuf,
    pub base_url: String,
    pub prompt: String,
    /// The working directory (the project): `ROOT/project`.
    pub dir: PathBuf,
    /// `CLAUDE_CONFIG_DIR`: `ROOT/claude`; transcripts go to its `projects/`.
    pub config_dir: PathBuf,
    /// `HOME` and `TMPDIR`: `ROOT/home`, `ROOT/tmp`.
    pub home: PathBuf,
    pub tmp: PathBuf,
    /// More environment variables.
    pub env: Vec<(String, String)>,
}

impl ClaudeRun {
    /// A run under `root` (directories created): see the fields for the layout.
    pub fn new(bin: PathBuf, server: &ModelServer, root: &Path, prompt: &str) -> Self {
        let run = Self {
            bin,
            base_url: server.url(),
            prompt: prompt.to_owned(),
            dir: root.join("project"),
            config_dir: root.join("claude"),
            home: root.join("home"),
            tmp: root.join("tmp"),
            env: Vec::new(),
        };
        for dir in [&run.dir, &run.config_dir, &run.home, &run.tmp] {
            std::fs::create_dir_all(dir).expect("create a directory for claude");
        }
        run
    }

    /// The command: the CLI with the flags and the only environment agents.md §7 gives
    /// (`IS_SANDBOX=1` lets the permission flags run as root), in [`ClaudeRun::dir`].
    pub fn command(&self) -> Command {
        let mut command = Command::new(&self.bin);
        command
            .args(["-p", &self.prompt])
            .args(["--permission-mode", "bypassPermissions"])
            .args(["--output-format", "stream-json", "--verbose"])
            .current_dir(&self.dir)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", &self.home)
            .env("TMPDIR", &self.tmp)
            .env("CLAUDE_CONFIG_DIR", &self.config_dir)
            .env("ANTHROPIC_BASE_URL", &self.base_url)
            .env("ANTHROPIC_API_KEY", "dummy")
            .env("IS_SANDBOX", "1");
        for var in [
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC",
            "DISABLE_AUTOUPDATER",
            "DISABLE_TELEMETRY",
            "DISABLE_ERROR_REPORTING",
        ] {
            command.env(var, "1");
        }
        for (name, value) in &self.env {
            command.env(name, value);
        }
        command
    }

    /// Start it in the background, its output to `ROOT/claude.out` and `ROOT/claude.err`.
    pub fn spawn(&self) -> std::io::Result<Child> {
        let root = self.dir.parent().unwrap_or(&self.dir);
        self.command()
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(root.join("claude.out"))?)
            .stderr(std::fs::File::create(root.join("claude.err"))?)
            .spawn()
    }

    /// Run it to its end, killed after `timeout` (an error then).
    pub fn run(&self, timeout: Duration) -> Result<ClaudeDone, String> {
        let root = self.dir.parent().unwrap_or(&self.dir).to_path_buf();
        let mut child = self
            .spawn()
            .map_err(|e| format!("spawn {}: {e}", self.bin.display()))?;
        let deadline = Instant::now() + timeout;
        let status = loop {
            match child.try_wait() {
                Ok(Some(status)) => break status,
                Ok(None) if Instant::now() >= deadline => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(format!("claude did not finish within {timeout:?}; killed"));
                }
                Ok(None) => std::thread::park_timeout(Duration::from_millis(50)),
                Err(e) => return Err(format!("wait for claude: {e}")),
            }
        };
        let read = |name: &str| std::fs::read_to_string(root.join(name)).unwrap_or_default();
        Ok(ClaudeDone {
            status,
            stdout: read("claude.out"),
            stderr: read("claude.err"),
        })
    }

    /// The transcripts written so far under `config_dir/projects/`, sorted.
    pub fn transcripts(&self) -> Vec<PathBuf> {
        let mut found = Vec::new();
        let mut dirs = vec![self.config_dir.join("projects")];
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
                let path = entry.path();
                if path.is_dir() {
                    dirs.push(path);
                } else if path.extension().is_some_and(|e| e == "jsonl") {
                    found.push(path);
                }
            }
        }
        found.sort();
        found
    }
}

/// A finished run.
#[derive(Debug)]
pub struct ClaudeDone {
    pub status: ExitStatus,
    /// `--output-format stream-json`: one JSON event per line.
    pub stdout: String,
    pub stderr: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(first_user: Value, assistants: usize) -> Value {
        let mut messages = vec![json!({"role": "user", "content": first_user})];
        for _ in 0..assistants {
            messages.push(json!({"role": "assistant", "content": []}));
            messages.push(json!({"role": "user", "content": [{"type": "tool_result"}]}));
        }
        json!({"model": "claude-x", "stream": true, "messages": messages})
    }

    #[test]
    fn a_request_is_placed_by_its_marker_and_its_assistant_messages() {
        let script = Script::new()
            .conversation("MAIN", vec![Turn::tool("Read", json!({"file_path": "a"}))])
            .conversation("SUB", vec![Turn::text("x"), Turn::text("y")]);
        let blocks = json!([{"type": "text", "text": "<system-reminder>ctx</system-reminder>"},
                            {"type": "text", "text": "SUB: look"}]);
        assert_eq!(script.place(&request(json!("MAIN go"), 0)), Some((0, 0)));
        assert_eq!(script.place(&request(blocks, 1)), Some((1, 1)));
        assert_eq!(script.place(&request(json!("other"), 0)), None);
        assert_eq!(script.tool_calls("MAIN").len(), 1);
    }

    #[test]
    fn a_tool_turn_streams_as_the_messages_api_does() {
        let body = stream_turn(
            "m",
            "c0t0",
            &Turn::tools(&[
                ("Read", json!({"file_path": "é"})),
                ("Bash", json!({"command": "ls"})),
            ]),
        );
        let events: Vec<Value> = body
            .split("\n\n")
            .filter_map(|frame| frame.lines().find_map(|l| l.strip_prefix("data: ")))
            .map(|data| serde_json::from_str(data).unwrap())
            .collect();
        let kinds: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
        assert_eq!(
            kinds,
            [
                "message_start",
                "content_block_start",
                "content_block_delta",
                "content_block_delta",
                "content_block_stop",
                "content_block_start",
                "content_block_delta",
                "content_block_delta",
                "content_block_stop",
                "message_delta",
                "message_stop"
            ]
        );
        let input: String = events[2..4]
            .iter()
            .map(|e| e["delta"]["partial_json"].as_str().unwrap())
            .collect();
        assert_eq!(
            serde_json::from_str::<Value>(&input).unwrap(),
            json!({"file_path": "é"})
        );
        assert_eq!(events[5]["content_block"]["id"], "toolu_aw_c0t0b1");
        assert_eq!(events[9]["delta"]["stop_reason"], "tool_use");
        let done = stream_turn("m", "x", &Turn::text("ok"));
        assert!(done.contains("\"end_turn\"") && done.contains("text_delta"));
    }

    #[test]
    fn the_server_answers_past_the_script_and_refuses_other_paths() {
        let server = ModelServer::start(Script::new().conversation("MAIN", vec![]));
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .build()
            .into();
        let mut reply = agent
            .post(format!("{}/v1/messages?beta=true", server.url()))
            .send(request(json!("MAIN"), 3).to_string())
            .unwrap();
        assert_eq!(reply.status(), 200);
        assert!(
            reply
                .body_mut()
                .read_to_string()
                .unwrap()
                .contains("end_turn")
        );
        let reply = agent
            .get(format!("{}/v1/models", server.url()))
            .call()
            .unwrap();
        assert_eq!(reply.status(), 404);
        assert_eq!(server.conversation_requests("MAIN").len(), 1);
    }
}
