//! The real Codex CLI (npm `@openai/codex@0.169.0`), run offline against a scripted model
//! server on 127.0.0.1, for end-to-end tests. `.ci/install-agents.sh` installs it; tests find
//! it through `AGENTWATCH_CODEX_BIN`.
//!
//! - [`ResponsesServer`]: speaks the Responses API as Codex calls it (`POST /v1/responses`,
//!   streamed): `response.created`, one `response.output_item.done` per call, then
//!   `response.completed`. A turn's call is a `custom_tool_call` with the input text when the
//!   request declares the tool freeform (`apply_patch`) and the script's input is a string;
//!   otherwise a `function_call` whose `arguments` are the input as JSON, or the script's
//!   string as it is (arguments that are not JSON). A name `namespace/tool` calls a
//!   namespaced tool (`multi_agent_v1/spawn_agent`). The string `"$SESSION"` anywhere in an
//!   input becomes the number of the latest `Process running with session ID N` the request
//!   holds (to poll it with `write_stdin`), `"$AGENT"` the latest `agent_id` a `spawn_agent`
//!   answered (to wait for it with `wait_agent`). Call ids are `call_aw_c{conversation}t{turn}b{i}`,
//!   which is how a request's turn is counted.
//! - [`CodexRun`]: `codex exec` in a directory with its own `CODEX_HOME` whose `config.toml`
//!   points a model provider at the server (agents.md §7), run to its end or in the
//!   background.
//!
//! ```no_run
//! use agentwatch_testkit::codex::{CodexRun, ResponsesServer, require_binary};
//! use agentwatch_testkit::script::{Script, Turn};
//! use serde_json::json;
//!
//! let root = agentwatch_testkit::TempDir::new("codex");
//! let script = Script::new().conversation(
//!     "LOOP",
//!     (0..20).map(|_| Turn::tool("exec_command", json!({"cmd": "cat notes.txt"}))).collect(),
//! );
//! let server = ResponsesServer::start(script);
//! let run = CodexRun::new(require_binary(), &server, &root.path, "LOOP: read the notes");
//! std::fs::write(run.dir.join("notes.txt"), "hello\n").unwrap();
//! let done = run.run(std::time::Duration::from_secs(120)).expect("codex ran");
//! assert!(done.status.success(), "{}", done.stderr);
//! // The rollout: run.rollouts(), under CODEX_HOME/sessions/YYYY/MM/DD/.
//! ```

use crate::Reply;
use crate::cli::{AgentDone, files_under, find_agent, require_agent, run_logged, spawn_logged};
use crate::script::{Script, ScriptServer, Turn, event_stream};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::Duration;

/// The version `.ci/install-agents.sh` installs.
pub const CODEX_VERSION: &str = "0.169.0";
/// The model `config.toml` names: one Codex knows, so it offers its freeform `apply_patch`.
pub const CODEX_MODEL: &str = "gpt-5.5";
/// The variable holding the (dummy) key of the scripted provider.
const KEY_VAR: &str = "AW_SCRIPTED_API_KEY";

/// The codex binary: `AGENTWATCH_CODEX_BIN`, else where `.ci/install-agents.sh` puts it.
pub fn find_binary() -> Option<PathBuf> {
    find_agent("AGENTWATCH_CODEX_BIN", "codex")
}

/// For a test marked `#[ignore = "needs codex (npm @openai/codex)"]`: the binary, or a
/// failure saying how to install it.
pub fn require_binary() -> PathBuf {
    require_agent("AGENTWATCH_CODEX_BIN", "codex", "the Codex CLI")
}

/// Where a Responses API request stands: the conversation whose marker is in one of its
/// user messages, and the turns already answered (the distinct turns of this server's call
/// ids in its input).
pub fn place(script: &Script, request: &Value) -> Option<(usize, usize)> {
    let input = request.get("input")?.as_array()?;
    let conversation = input
        .iter()
        .filter(|item| item.get("role").and_then(Value::as_str) == Some("user"))
        .flat_map(|item| {
            item.get("content")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
        })
        .filter_map(|part| part.get("text").and_then(Value::as_str))
        .find_map(|text| script.conversation_in(text))?;
    let prefix = format!("call_aw_c{conversation}t");
    let turn = input
        .iter()
        .filter_map(|item| item.get("call_id")?.as_str()?.strip_prefix(prefix.as_str()))
        .filter_map(|rest| rest.split('b').next()?.parse::<usize>().ok())
        .max()
        .map_or(0, |t| t + 1);
    Some((conversation, turn))
}

/// The streamed answer (server-sent events) to a Responses API request.
pub fn answer(script: &Script, request: &Value) -> String {
    let place = place(script, request);
    let (c, t) = place.unwrap_or((usize::MAX, 0));
    let freeform: Vec<&str> = request
        .get("tools")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|tool| tool.get("type").and_then(Value::as_str) == Some("custom"))
        .filter_map(|tool| tool.get("name").and_then(Value::as_str))
        .collect();
    let found = Found {
        session: running_session(request),
        agent: spawned_agent(request),
    };
    stream_turn(&format!("c{c}t{t}"), &script.turn(place), &freeform, &found)
}

/// What a request's outputs name, for the placeholders of a script's inputs.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Found {
    /// `$SESSION`: the latest `Process running with session ID N`.
    pub session: Option<u64>,
    /// `$AGENT`: the latest `agent_id` a `spawn_agent` answered.
    pub agent: Option<String>,
}

/// The latest `agent_id` among a request's outputs.
fn spawned_agent(request: &Value) -> Option<String> {
    let input = request.get("input")?.as_array()?;
    input
        .iter()
        .rev()
        .filter_map(|item| item.get("output")?.as_str())
        .filter_map(|out| serde_json::from_str::<Value>(out).ok())
        .filter_map(|out| Some(out.get("agent_id")?.as_str()?.to_owned()))
        .next()
}

/// The number of the latest `Process running with session ID N` among a request's outputs.
fn running_session(request: &Value) -> Option<u64> {
    let input = request.get("input")?.as_array()?;
    input
        .iter()
        .rev()
        .filter_map(|item| item.get("output")?.as_str())
        .filter_map(|out| {
            let at = out.rfind("Process running with session ID ")?;
            let rest = &out[at + "Process running with session ID ".len()..];
            rest.split(|c: char| !c.is_ascii_digit())
                .next()?
                .parse()
                .ok()
        })
        .next()
}

/// One turn as Responses API events; `freeform` names the request's freeform tools.
pub fn stream_turn(tag: &str, turn: &Turn, freeform: &[&str], found: &Found) -> String {
    let mut events =
        vec![json!({"type": "response.created", "response": {"id": format!("resp_aw_{tag}")}})];
    match turn {
        Turn::Tools(calls) => {
            for (index, (name, input)) in calls.iter().enumerate() {
                let item = output_item(&format!("{tag}b{index}"), name, input, freeform, found);
                events.push(json!({"type": "response.output_item.done", "output_index": index, "item": item}));
            }
        }
        Turn::Text(text) => events.push(
            json!({"type": "response.output_item.done", "output_index": 0,
            "item": {"type": "message", "role": "assistant", "id": format!("msg_aw_{tag}"),
                     "content": [{"type": "output_text", "text": text}]}}),
        ),
    }
    events.push(
        json!({"type": "response.completed", "response": {"id": format!("resp_aw_{tag}"),
        "usage": {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0},
                  "output_tokens": 5, "output_tokens_details": {"reasoning_tokens": 0},
                  "total_tokens": 15}}}),
    );
    events
        .iter()
        .map(|e| {
            format!(
                "event: {}\ndata: {e}\n\n",
                e["type"].as_str().unwrap_or("message")
            )
        })
        .collect()
}

/// One scripted call as the output item Codex expects.
fn output_item(tag: &str, name: &str, input: &Value, freeform: &[&str], found: &Found) -> Value {
    let (namespace, name) = match name.split_once('/') {
        Some((ns, name)) => (Some(ns), name),
        None => (None, name),
    };
    let call_id = format!("call_aw_{tag}");
    if let (Value::String(text), true) = (input, freeform.contains(&name)) {
        return json!({"type": "custom_tool_call", "id": format!("ctc_aw_{tag}"), "call_id": call_id,
                      "name": name, "input": text});
    }
    let arguments = match input {
        Value::String(raw) => raw.clone(),
        other => filled(other.clone(), found).to_string(),
    };
    let mut item = json!({"type": "function_call", "id": format!("fc_aw_{tag}"), "call_id": call_id,
                          "name": name, "arguments": arguments});
    if let Some(ns) = namespace {
        item["namespace"] = ns.into();
    }
    item
}

/// `value` with every `"$SESSION"` and `"$AGENT"` replaced by what the request named.
fn filled(value: Value, found: &Found) -> Value {
    match value {
        Value::String(s) if s == "$SESSION" => found.session.map_or(Value::Null, Value::from),
        Value::String(s) if s == "$AGENT" => found.agent.clone().map_or(Value::Null, Value::from),
        Value::Array(items) => Value::Array(items.into_iter().map(|v| filled(v, found)).collect()),
        Value::Object(map) => Value::Object(
            map.into_iter()
                .map(|(k, v)| (k, filled(v, found)))
                .collect(),
        ),
        other => other,
    }
}

/// A scripted Responses API server on 127.0.0.1 ([`ScriptServer`]'s `url`, `requests`,
/// `conversation_requests`). Stops when dropped.
#[derive(Debug)]
pub struct ResponsesServer(ScriptServer);

impl ResponsesServer {
    pub fn start(script: Script) -> Self {
        Self(ScriptServer::start(script, place, |script, request| {
            if request.method != "POST" || request.path() != "/v1/responses" {
                return Reply::json(
                    404,
                    &json!({"error": {"type": "not_found", "message": format!(
                        "the scripted model serves POST /v1/responses, not {} {}",
                        request.method, request.path())}}),
                );
            }
            event_stream(answer(script, &request.body_json()))
        }))
    }
}

impl std::ops::Deref for ResponsesServer {
    type Target = ScriptServer;
    fn deref(&self) -> &ScriptServer {
        &self.0
    }
}

/// `codex exec PROMPT` offline against a [`ResponsesServer`] (agents.md §7).
#[derive(Debug, Clone)]
pub struct CodexRun {
    pub bin: PathBuf,
    /// `http://127.0.0.1:PORT` (the provider's `base_url` is this plus `/v1`).
    pub base_url: String,
    pub prompt: String,
    /// The working directory (the project): `ROOT/project`.
    pub dir: PathBuf,
    /// `CODEX_HOME`: `ROOT/codex`; rollouts go to its `sessions/`.
    pub codex_home: PathBuf,
    /// `HOME`: `ROOT/home`.
    pub home: PathBuf,
    /// The model `config.toml` names ([`CODEX_MODEL`]).
    pub model: String,
    /// More TOML appended to `config.toml` (top-level keys go before any table: use tables).
    pub config_extra: String,
    /// More environment variables.
    pub env: Vec<(String, String)>,
}

impl CodexRun {
    /// A run under `root` (directories created): see the fields for the layout.
    pub fn new(bin: PathBuf, server: &ScriptServer, root: &Path, prompt: &str) -> Self {
        let run = Self {
            bin,
            base_url: server.url(),
            prompt: prompt.to_owned(),
            dir: root.join("project"),
            codex_home: root.join("codex"),
            home: root.join("home"),
            model: CODEX_MODEL.to_owned(),
            config_extra: String::new(),
            env: Vec::new(),
        };
        for dir in [&run.dir, &run.codex_home, &run.home] {
            std::fs::create_dir_all(dir).expect("create a directory for codex");
        }
        run
    }

    /// `CODEX_HOME/config.toml`: the scripted provider (Responses API, a dummy key from the
    /// environment), no web search, no plugins (their start-up would reach outside hosts).
    pub fn config_toml(&self) -> String {
        format!(
            "model = \"{model}\"\nmodel_provider = \"scripted\"\nweb_search = \"disabled\"\n\n\
             [model_providers.scripted]\nname = \"Scripted\"\nbase_url = \"{url}/v1\"\n\
             wire_api = \"responses\"\nenv_key = \"{KEY_VAR}\"\n\n[features]\nplugins = false\n\n{extra}",
            model = self.model,
            url = self.base_url,
            extra = self.config_extra,
        )
    }

    /// The command: `codex exec` with the flags agents.md §7 gives, in [`CodexRun::dir`],
    /// with nothing from the environment but `PATH`.
    pub fn command(&self) -> Command {
        let mut command = Command::new(&self.bin);
        command
            .args([
                "exec",
                "--skip-git-repo-check",
                "--dangerously-bypass-approvals-and-sandbox",
            ])
            .args(["--json", &self.prompt])
            .current_dir(&self.dir)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", &self.home)
            .env("CODEX_HOME", &self.codex_home)
            .env(KEY_VAR, "dummy");
        for (name, value) in &self.env {
            command.env(name, value);
        }
        command
    }

    /// Write `config.toml` ([`CodexRun::config_toml`]) now: a test that changes it as a user
    /// would (`agentwatch hooks install codex` records the hook's trust there) writes it
    /// first; a run writes it only when it is not there.
    pub fn write_config(&self) -> std::io::Result<()> {
        std::fs::write(self.codex_home.join("config.toml"), self.config_toml())
    }

    fn ensure_config(&self) -> std::io::Result<()> {
        if self.codex_home.join("config.toml").exists() {
            return Ok(());
        }
        self.write_config()
    }

    fn root(&self) -> &Path {
        self.dir.parent().unwrap_or(&self.dir)
    }

    /// Start it in the background (config written first), its output to `ROOT/codex.out`
    /// and `ROOT/codex.err`.
    pub fn spawn(&self) -> std::io::Result<Child> {
        self.ensure_config()?;
        spawn_logged(self.command(), self.root(), "codex")
    }

    /// Run it to its end, killed after `timeout` (an error then). `stdout` is `--json`'s
    /// event stream.
    pub fn run(&self, timeout: Duration) -> Result<AgentDone, String> {
        self.ensure_config()
            .map_err(|e| format!("write {}: {e}", self.codex_home.display()))?;
        run_logged(self.command(), self.root(), "codex", timeout)
    }

    /// The rollouts written so far (`sessions/`, `archived_sessions/`), sorted.
    pub fn rollouts(&self) -> Vec<PathBuf> {
        let mut found = Vec::new();
        for dir in ["sessions", "archived_sessions"] {
            found.extend(files_under(
                &self.codex_home.join(dir),
                &[".jsonl", ".jsonl.zst"],
            ));
        }
        found.sort();
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(text: &str) -> Value {
        json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]})
    }

    #[test]
    fn a_request_is_placed_by_its_marker_and_its_answered_calls() {
        let script = Script::new()
            .conversation("MAIN", vec![])
            .conversation("SUB", vec![]);
        let request = |items: Vec<Value>| json!({"input": items});
        assert_eq!(
            place(
                &script,
                &request(vec![user("<environment_context/>"), user("MAIN: go")])
            ),
            Some((0, 0))
        );
        let answered = vec![
            user("SUB: look"),
            json!({"type": "function_call", "call_id": "call_aw_c1t0b0"}),
            json!({"type": "function_call", "call_id": "call_aw_c1t0b1"}),
            json!({"type": "function_call_output", "call_id": "call_aw_c1t0b0"}),
            json!({"type": "custom_tool_call", "call_id": "call_aw_c1t1b0"}),
        ];
        assert_eq!(place(&script, &request(answered)), Some((1, 2)));
        assert_eq!(place(&script, &request(vec![user("other")])), None);
    }

    #[test]
    fn calls_stream_as_function_or_freeform_items() {
        let turn = Turn::tools(&[
            ("exec_command", json!({"cmd": "ls"})),
            ("apply_patch", json!("*** Begin Patch\n*** End Patch")),
            ("exec_command", json!("not json")),
            (
                "write_stdin",
                json!({"session_id": "$SESSION", "chars": ""}),
            ),
            ("multi_agent_v1/spawn_agent", json!({"message": "SUB: x"})),
            ("multi_agent_v1/wait_agent", json!({"targets": ["$AGENT"]})),
        ]);
        let found = Found {
            session: Some(42),
            agent: Some("t2".into()),
        };
        let body = stream_turn("c0t3", &turn, &["apply_patch"], &found);
        let items: Vec<Value> = body
            .split("\n\n")
            .filter_map(|frame| frame.lines().find_map(|l| l.strip_prefix("data: ")))
            .map(|data| serde_json::from_str::<Value>(data).unwrap())
            .filter(|e| e["type"] == "response.output_item.done")
            .map(|e| e["item"].clone())
            .collect();
        assert_eq!(items[0]["arguments"], r#"{"cmd":"ls"}"#);
        assert_eq!(items[0]["call_id"], "call_aw_c0t3b0");
        assert_eq!(
            (&items[1]["type"], &items[1]["input"]),
            (
                &json!("custom_tool_call"),
                &json!("*** Begin Patch\n*** End Patch")
            )
        );
        assert_eq!(
            (&items[2]["type"], &items[2]["arguments"]),
            (&json!("function_call"), &json!("not json"))
        );
        let poll: Value = serde_json::from_str(items[3]["arguments"].as_str().unwrap()).unwrap();
        assert_eq!(poll, json!({"session_id": 42, "chars": ""}));
        assert_eq!(
            (&items[4]["namespace"], &items[4]["name"]),
            (&json!("multi_agent_v1"), &json!("spawn_agent"))
        );
        assert_eq!(items[5]["arguments"], r#"{"targets":["t2"]}"#);
        let request = json!({"input": [
            {"type": "function_call_output", "output": "Chunk ID: x\nProcess running with session ID 83418\nOutput:\n"},
            {"type": "function_call_output", "output": "{\"agent_id\":\"01a2\",\"nickname\":\"Euler\"}"}]});
        assert_eq!(running_session(&request), Some(83418));
        assert_eq!(spawned_agent(&request).as_deref(), Some("01a2"));
    }

    #[test]
    fn the_server_answers_past_the_script_and_refuses_other_paths() {
        let server = ResponsesServer::start(Script::new().conversation("MAIN", vec![]));
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .build()
            .into();
        let mut reply = agent
            .post(format!("{}/v1/responses", server.url()))
            .send(json!({"input": [user("MAIN")]}).to_string())
            .unwrap();
        assert_eq!(reply.status(), 200);
        let body = reply.body_mut().read_to_string().unwrap();
        assert!(body.contains("output_text") && body.contains("response.completed"));
        let reply = agent
            .get(format!("{}/v1/models", server.url()))
            .call()
            .unwrap();
        assert_eq!(reply.status(), 404);
        assert_eq!(server.conversation_requests("MAIN").len(), 1);
    }
}
