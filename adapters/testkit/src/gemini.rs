//! The real Gemini CLI (npm `@google/gemini-cli@0.61.0`), run offline against a scripted
//! model server on 127.0.0.1, for end-to-end tests. `.ci/install-agents.sh` installs it;
//! tests find it through `AGENTWATCH_GEMINI_BIN`.
//!
//! - [`GeminiServer`]: speaks the Gemini API as the CLI calls it:
//!   `POST /v1beta/models/{model}:streamGenerateContent?alt=sse` (one server-sent event with
//!   the turn's `functionCall` parts, or its text), and the `:generateContent` side call (a
//!   routing classifier) answered from the JSON schema it asks for (`:countTokens` too). A
//!   request's conversation is the one whose marker is in one of its user texts; its turn is
//!   the number of model contents with function calls.
//! - [`GeminiRun`]: `gemini -p PROMPT --yolo -o stream-json` with its own `GEMINI_CLI_HOME`
//!   (and `HOME`), a `settings.json` selecting API-key auth with folder trust, updates and
//!   telemetry off (agents.md §7); Gemini's own loop detection on unless
//!   [`GeminiRun::loop_detection`] is false.
//!
//! ```no_run
//! use agentwatch_testkit::gemini::{GeminiRun, GeminiServer, require_binary};
//! use agentwatch_testkit::script::{Script, Turn};
//! use serde_json::json;
//!
//! let root = agentwatch_testkit::TempDir::new("gemini");
//! let script = Script::new().conversation(
//!     "LOOP",
//!     (0..20).map(|_| Turn::tool("read_file", json!({"file_path": "notes.txt"}))).collect(),
//! );
//! let server = GeminiServer::start(script);
//! let mut run = GeminiRun::new(require_binary(), &server, &root.path, "LOOP: read the notes");
//! run.loop_detection = false; // let the loop run past Gemini's own detector
//! std::fs::write(run.dir.join("notes.txt"), "hello\n").unwrap();
//! let done = run.run(std::time::Duration::from_secs(120)).expect("gemini ran");
//! assert!(done.status.success(), "{}", done.stderr);
//! // The session: run.sessions(), under GEMINI_CLI_HOME/.gemini/tmp/<project>/chats/.
//! ```

use crate::Reply;
use crate::cli::{AgentDone, files_under, find_agent, require_agent, run_logged, spawn_logged};
use crate::script::{Script, ScriptServer, Turn, event_stream};
use serde_json::{Map, Value, json};
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::Duration;

/// The version `.ci/install-agents.sh` installs.
pub const GEMINI_VERSION: &str = "0.61.0";

/// The gemini binary: `AGENTWATCH_GEMINI_BIN`, else where `.ci/install-agents.sh` puts it.
pub fn find_binary() -> Option<PathBuf> {
    find_agent("AGENTWATCH_GEMINI_BIN", "gemini")
}

/// For a test marked `#[ignore = "needs gemini (npm @google/gemini-cli)"]`: the binary, or a
/// failure saying how to install it.
pub fn require_binary() -> PathBuf {
    require_agent("AGENTWATCH_GEMINI_BIN", "gemini", "the Gemini CLI")
}

/// Where a `streamGenerateContent` request stands: the conversation whose marker is in one
/// of its user texts, and the model contents with function calls it holds.
pub fn place(script: &Script, request: &Value) -> Option<(usize, usize)> {
    let contents = request.get("contents")?.as_array()?;
    let parts = |content: &Value| -> Vec<Value> {
        content
            .get("parts")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    let role = |content: &Value| {
        content
            .get("role")
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    let conversation = contents
        .iter()
        .filter(|c| role(c).as_deref() == Some("user"))
        .flat_map(parts)
        .filter_map(|p| p.get("text").and_then(Value::as_str).map(str::to_owned))
        .find_map(|text| script.conversation_in(&text))?;
    let turn = contents
        .iter()
        .filter(|c| role(c).as_deref() == Some("model"))
        .filter(|c| parts(c).iter().any(|p| p.get("functionCall").is_some()))
        .count();
    Some((conversation, turn))
}

/// One turn as the single server-sent event of a `streamGenerateContent` answer.
pub fn stream_turn(tag: &str, turn: &Turn) -> String {
    let parts: Vec<Value> = match turn {
        Turn::Tools(calls) => calls
            .iter()
            .map(|(name, args)| json!({"functionCall": {"name": name, "args": args}}))
            .collect(),
        Turn::Text(text) => vec![json!({"text": text})],
    };
    let chunk = json!({
        "candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}],
        "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15},
        "modelVersion": "gemini-scripted",
        "responseId": format!("aw_{tag}"),
    });
    format!("data: {chunk}\r\n\r\n")
}

/// The answer to a `generateContent` side call: a JSON text that fits the schema the
/// request asks for (an enum's first value, `scripted` for a string, a number's minimum or
/// 1, but 0 for a `…confidence` number: the scripted model is never sure the session loops,
/// so Gemini's model-based loop check never stops a run by itself).
pub fn side_answer(request: &Value) -> Value {
    let config = request.get("generationConfig");
    let schema = config
        .and_then(|c| {
            c.get("responseJsonSchema")
                .or_else(|| c.get("responseSchema"))
        })
        .cloned()
        .unwrap_or(Value::Null);
    let text = match schema {
        Value::Null => "scripted".to_owned(),
        schema => fit("", &schema).to_string(),
    };
    json!({
        "candidates": [{"content": {"role": "model", "parts": [{"text": text}]}, "finishReason": "STOP", "index": 0}],
        "usageMetadata": {"promptTokenCount": 5, "candidatesTokenCount": 5, "totalTokenCount": 10},
        "modelVersion": "gemini-scripted",
    })
}

/// A value of the JSON schema `schema` (types in either case, as Gemini's schemas write
/// them); `name` is the property's.
fn fit(name: &str, schema: &Value) -> Value {
    if let Some(first) = schema
        .get("enum")
        .and_then(Value::as_array)
        .and_then(|e| e.first())
    {
        return first.clone();
    }
    let kind = schema
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("object")
        .to_ascii_lowercase();
    match kind.as_str() {
        "string" => json!("scripted"),
        "integer" | "number" if name.ends_with("confidence") => json!(0),
        "integer" | "number" => schema.get("minimum").cloned().unwrap_or(json!(1)),
        "boolean" => json!(false),
        "array" => json!([]),
        _ => {
            let mut object = Map::new();
            for (key, property) in schema
                .get("properties")
                .and_then(Value::as_object)
                .into_iter()
                .flatten()
            {
                object.insert(key.clone(), fit(key, property));
            }
            Value::Object(object)
        }
    }
}

/// A scripted Gemini API server on 127.0.0.1 ([`ScriptServer`]'s `url`, `requests`,
/// `conversation_requests`). Stops when dropped.
#[derive(Debug)]
pub struct GeminiServer(ScriptServer);

impl GeminiServer {
    pub fn start(script: Script) -> Self {
        Self(ScriptServer::start(script, place, |script, request| {
            let path = request.path();
            let body = request.body_json();
            if request.method == "POST" && path.ends_with(":streamGenerateContent") {
                let place = place(script, &body);
                let (c, t) = place.unwrap_or((usize::MAX, 0));
                return event_stream(stream_turn(&format!("c{c}t{t}"), &script.turn(place)));
            }
            if request.method == "POST" && path.ends_with(":generateContent") {
                return Reply::json(200, &side_answer(&body));
            }
            if request.method == "POST" && path.ends_with(":countTokens") {
                return Reply::json(200, &json!({"totalTokens": 10}));
            }
            Reply::json(
                404,
                &json!({"error": {"code": 404, "status": "NOT_FOUND", "message": format!(
                    "the scripted model serves POST …:streamGenerateContent, not {} {path}",
                    request.method)}}),
            )
        }))
    }
}

impl std::ops::Deref for GeminiServer {
    type Target = ScriptServer;
    fn deref(&self) -> &ScriptServer {
        &self.0
    }
}

/// `gemini -p PROMPT` offline against a [`GeminiServer`] (agents.md §7).
#[derive(Debug, Clone)]
pub struct GeminiRun {
    pub bin: PathBuf,
    /// `GOOGLE_GEMINI_BASE_URL`.
    pub base_url: String,
    pub prompt: String,
    /// The working directory (the project): `ROOT/project`.
    pub dir: PathBuf,
    /// `HOME` and `GEMINI_CLI_HOME`: `ROOT/home`.
    pub home: PathBuf,
    /// `ROOT/home/.gemini`: `settings.json`, and the sessions under `tmp/<project>/chats/`.
    pub gemini_dir: PathBuf,
    /// Gemini's own loop detection (`model.disableLoopDetection` when false); on by default,
    /// as in Gemini.
    pub loop_detection: bool,
    /// More environment variables.
    pub env: Vec<(String, String)>,
}

impl GeminiRun {
    /// A run under `root` (directories created): see the fields for the layout.
    pub fn new(bin: PathBuf, server: &ScriptServer, root: &Path, prompt: &str) -> Self {
        let home = root.join("home");
        let run = Self {
            bin,
            base_url: server.url(),
            prompt: prompt.to_owned(),
            dir: root.join("project"),
            gemini_dir: home.join(".gemini"),
            home,
            loop_detection: true,
            env: Vec::new(),
        };
        for dir in [&run.dir, &run.gemini_dir] {
            std::fs::create_dir_all(dir).expect("create a directory for gemini");
        }
        run
    }

    /// `settings.json`: API-key auth (without it: "Invalid auth method selected"), no folder
    /// trust prompt, no update check, no telemetry or usage statistics.
    pub fn settings(&self) -> Value {
        json!({
            "security": {"auth": {"selectedType": "gemini-api-key"}, "folderTrust": {"enabled": false}},
            "general": {"disableAutoUpdate": true, "disableUpdateNag": true},
            "privacy": {"usageStatisticsEnabled": false},
            "telemetry": {"enabled": false},
            "model": {"disableLoopDetection": !self.loop_detection},
        })
    }

    /// The command: `gemini -p … --yolo -o stream-json` with the variables agents.md §7
    /// gives, in [`GeminiRun::dir`], with nothing else from the environment but `PATH`.
    pub fn command(&self) -> Command {
        let mut command = Command::new(&self.bin);
        command
            .args(["-p", &self.prompt, "--yolo", "-o", "stream-json"])
            .current_dir(&self.dir)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", &self.home)
            .env("GEMINI_CLI_HOME", &self.home)
            .env("GEMINI_API_KEY", "dummy")
            .env("GOOGLE_GEMINI_BASE_URL", &self.base_url)
            .env("GEMINI_CLI_NO_RELAUNCH", "true");
        for (name, value) in &self.env {
            command.env(name, value);
        }
        command
    }

    /// Write `settings.json` ([`GeminiRun::settings`]) now: a test that changes it as a user
    /// would (`agentwatch hooks install gemini`) writes it first; a run writes it only when
    /// it is not there.
    pub fn write_settings(&self) -> std::io::Result<()> {
        std::fs::write(
            self.gemini_dir.join("settings.json"),
            self.settings().to_string(),
        )
    }

    fn ensure_settings(&self) -> std::io::Result<()> {
        if self.gemini_dir.join("settings.json").exists() {
            return Ok(());
        }
        self.write_settings()
    }

    fn root(&self) -> &Path {
        self.dir.parent().unwrap_or(&self.dir)
    }

    /// Start it in the background (settings written first, unless there), its output to
    /// `ROOT/gemini.out` and `ROOT/gemini.err`.
    pub fn spawn(&self) -> std::io::Result<Child> {
        self.ensure_settings()?;
        spawn_logged(self.command(), self.root(), "gemini")
    }

    /// Run it to its end, killed after `timeout` (an error then). `stdout` is
    /// `stream-json`'s events.
    pub fn run(&self, timeout: Duration) -> Result<AgentDone, String> {
        self.ensure_settings()
            .map_err(|e| format!("write {}: {e}", self.gemini_dir.display()))?;
        run_logged(self.command(), self.root(), "gemini", timeout)
    }

    /// The session files written so far (`tmp/*/chats/…`), sorted.
    pub fn sessions(&self) -> Vec<PathBuf> {
        files_under(&self.gemini_dir.join("tmp"), &[".jsonl", ".json"])
            .into_iter()
            .filter(|p| p.to_string_lossy().contains("/chats/"))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_is_placed_by_its_marker_and_its_model_calls() {
        let script = Script::new()
            .conversation("MAIN", vec![])
            .conversation("SUB", vec![]);
        let request = json!({"contents": [
            {"role": "user", "parts": [{"text": "<session_context>x</session_context>"}]},
            {"role": "user", "parts": [{"text": "SUB: look"}]},
            {"role": "model", "parts": [{"functionCall": {"name": "read_file", "args": {}}}]},
            {"role": "user", "parts": [{"functionResponse": {"name": "read_file", "response": {}}}]},
            {"role": "model", "parts": [{"text": "thinking"}]},
        ]});
        assert_eq!(place(&script, &request), Some((1, 1)));
        assert_eq!(place(&script, &json!({"contents": []})), None);
    }

    #[test]
    fn a_side_call_is_answered_from_its_schema() {
        let request = json!({"generationConfig": {"responseSchema": {"type": "OBJECT", "properties": {
            "complexity_reasoning": {"type": "STRING"}, "complexity_score": {"type": "INTEGER"},
            "route": {"type": "STRING", "enum": ["flash", "pro"]}, "ok": {"type": "BOOLEAN"}}}}});
        let answer = side_answer(&request);
        let text = answer["candidates"][0]["content"]["parts"][0]["text"]
            .as_str()
            .unwrap();
        assert_eq!(
            serde_json::from_str::<Value>(text).unwrap(),
            json!({"complexity_reasoning": "scripted", "complexity_score": 1, "route": "flash", "ok": false})
        );
        let loop_check = json!({"generationConfig": {"responseJsonSchema": {"type": "object", "properties": {
            "unproductive_state_analysis": {"type": "string"}, "unproductive_state_confidence": {"type": "number"}}}}});
        let answer = side_answer(&loop_check);
        let text = answer["candidates"][0]["content"]["parts"][0]["text"]
            .as_str()
            .unwrap();
        assert_eq!(
            serde_json::from_str::<Value>(text).unwrap()["unproductive_state_confidence"],
            0
        );
    }

    #[test]
    fn the_server_streams_calls_and_refuses_other_paths() {
        let script = Script::new().conversation(
            "MAIN",
            vec![Turn::tools(&[
                ("read_file", json!({"file_path": "a"})),
                ("glob", json!({"pattern": "*"})),
            ])],
        );
        let server = GeminiServer::start(script);
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .build()
            .into();
        let request = json!({"contents": [{"role": "user", "parts": [{"text": "MAIN: go"}]}]});
        let mut reply = agent
            .post(format!(
                "{}/v1beta/models/m:streamGenerateContent?alt=sse",
                server.url()
            ))
            .send(request.to_string())
            .unwrap();
        assert_eq!(reply.status(), 200);
        let body = reply.body_mut().read_to_string().unwrap();
        let event: Value =
            serde_json::from_str(body.trim().strip_prefix("data: ").unwrap()).unwrap();
        let parts = &event["candidates"][0]["content"]["parts"];
        assert_eq!(parts[1]["functionCall"]["name"], "glob");
        let reply = agent
            .get(format!("{}/v1beta/models", server.url()))
            .call()
            .unwrap();
        assert_eq!(reply.status(), 404);
        assert_eq!(server.conversation_requests("MAIN").len(), 1);
    }
}
