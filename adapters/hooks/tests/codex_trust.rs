//! The trust `agentwatch hooks install codex` records is the trust Codex itself checks: the
//! real `codex app-server` (`hooks/list`) says our hook is trusted and its `currentHash` is the
//! hash we wrote, for the user's `hooks.json` and a trusted project's; and a user's hook that
//! moves up when ours is removed keeps its trust.

use agentwatch_hooks::Agent;
use agentwatch_hooks::install::{self, Locations, Scope};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// `codex app-server` on stdio (JSON lines), initialised.
struct AppServer {
    child: Child,
    stdin: ChildStdin,
    lines: mpsc::Receiver<String>,
    next_id: u64,
}

impl AppServer {
    fn start(codex_home: &Path, home: &Path, cwd: &Path) -> Self {
        let mut child = Command::new(agentwatch_testkit::codex::require_binary())
            .arg("app-server")
            .current_dir(cwd)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", home)
            .env("CODEX_HOME", codex_home)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start codex app-server");
        let stdout = child.stdout.take().unwrap();
        let (send, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if send.send(line).is_err() {
                    break;
                }
            }
        });
        let stdin = child.stdin.take().unwrap();
        let mut server = Self {
            child,
            stdin,
            lines,
            next_id: 1,
        };
        server.request(
            "initialize",
            json!({"clientInfo": {"name": "agentwatch-test", "version": "0"}}),
        );
        server.send(&json!({"method": "initialized", "params": {}}));
        server
    }

    fn send(&mut self, message: &Value) {
        writeln!(self.stdin, "{message}").unwrap();
        self.stdin.flush().unwrap();
    }

    /// A request's `result` (its notifications skipped).
    fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"id": id, "method": method, "params": params}));
        loop {
            let line = self
                .lines
                .recv_timeout(Duration::from_secs(60))
                .unwrap_or_else(|e| panic!("no answer to {method}: {e}"));
            let Ok(message) = serde_json::from_str::<Value>(&line) else {
                continue;
            };
            if message["id"] == json!(id) {
                assert!(message.get("error").is_none(), "{method}: {message}");
                return message["result"].clone();
            }
        }
    }

    /// Every hook `hooks/list` shows for `cwd`, by key.
    fn hooks(&mut self, cwd: &Path) -> Vec<Value> {
        let result = self.request("hooks/list", json!({"cwds": [cwd]}));
        result["data"][0]["hooks"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }
}

impl Drop for AppServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

struct World {
    _tmp: agentwatch_testkit::TempDir,
    home: PathBuf,
    codex_home: PathBuf,
    project: PathBuf,
    binary: PathBuf,
}

impl World {
    fn new() -> Self {
        let tmp = agentwatch_testkit::TempDir::new("aw-codex-trust");
        let root = std::fs::canonicalize(&tmp.path).unwrap();
        let (home, codex_home, project) =
            (root.join("home"), root.join("codex"), root.join("work"));
        for dir in [&home, &codex_home, &project] {
            std::fs::create_dir_all(dir).unwrap();
        }
        // No outside hosts (agents.md §7); the project trusted as Codex records it.
        std::fs::write(
            codex_home.join("config.toml"),
            format!(
                "web_search = \"disabled\"\n\n[features]\nplugins = false\n\n[projects.\"{}\"]\ntrust_level = \"trusted\"\n",
                project.display()
            ),
        )
        .unwrap();
        Self {
            binary: root.join("bin/agentwatch"),
            _tmp: tmp,
            home,
            codex_home,
            project,
        }
    }

    fn loc(&self) -> Locations {
        Locations {
            home: Some(self.home.clone()),
            codex_home: Some(self.codex_home.clone()),
            ..Locations::default()
        }
    }

    fn config(&self) -> String {
        std::fs::read_to_string(self.codex_home.join("config.toml")).unwrap()
    }
}

/// The `trusted_hash` our install wrote for `key`.
fn written_hash(config: &str, key: &str) -> String {
    let doc: toml::Table = toml::from_str(config).unwrap();
    doc["hooks"]["state"][key]["trusted_hash"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[test]
#[ignore = "needs codex (npm @openai/codex)"]
fn codex_trusts_the_hooks_we_install() {
    let w = World::new();
    for scope in [Scope::User, Scope::Project(w.project.clone())] {
        install::install(Agent::Codex, &scope, &w.loc(), &w.binary).unwrap();
    }
    let config = w.config();
    let mut server = AppServer::start(&w.codex_home, &w.home, &w.project);
    let hooks = server.hooks(&w.project);
    let command = format!("{} hook codex", w.binary.display());
    let ours: Vec<&Value> = hooks
        .iter()
        .filter(|h| h["command"] == json!(command))
        .collect();
    let sources: Vec<PathBuf> = ours
        .iter()
        .map(|h| PathBuf::from(h["sourcePath"].as_str().unwrap()))
        .collect();
    assert_eq!(
        sources,
        [
            w.codex_home.join("hooks.json"),
            w.project.join(".codex/hooks.json")
        ],
        "both hooks are seen: {hooks:#?}"
    );
    for hook in ours {
        let key = hook["key"].as_str().unwrap();
        assert_eq!(hook["trustStatus"], "trusted", "{hook:#}\n{config}");
        assert_eq!(
            hook["currentHash"].as_str().unwrap(),
            written_hash(&config, key)
        );
        assert_eq!(hook["timeoutSec"], 10);
        assert_eq!(hook["enabled"], true);
    }
    drop(server);
    for scope in [Scope::User, Scope::Project(w.project.clone())] {
        let status = install::status(Agent::Codex, &scope, &w.loc()).unwrap();
        assert_eq!(status.trusted, Some(true), "{status:?}");
        install::uninstall(Agent::Codex, &scope, &w.loc()).unwrap();
    }
    let mut server = AppServer::start(&w.codex_home, &w.home, &w.project);
    assert_eq!(server.hooks(&w.project), Vec::<Value>::new());
    assert!(!w.config().contains("hooks.state"), "{}", w.config());
}

#[test]
#[ignore = "needs codex (npm @openai/codex)"]
fn a_users_hook_keeps_its_trust_when_ours_goes() {
    let w = World::new();
    let hooks_json = w.codex_home.join("hooks.json");
    let group = |command: &str| json!({"matcher": "Bash", "hooks": [{"type": "command", "command": command}]});
    std::fs::write(
        &hooks_json,
        json!({"hooks": {"PreToolUse": [group("echo a")]}}).to_string(),
    )
    .unwrap();
    install::install(Agent::Codex, &Scope::User, &w.loc(), &w.binary).unwrap();
    // The user adds a hook after ours and trusts theirs in Codex, as `/hooks` does.
    let mut value: Value =
        serde_json::from_str(&std::fs::read_to_string(&hooks_json).unwrap()).unwrap();
    value["hooks"]["PreToolUse"]
        .as_array_mut()
        .unwrap()
        .push(group("echo b"));
    std::fs::write(&hooks_json, serde_json::to_string_pretty(&value).unwrap()).unwrap();
    let mut server = AppServer::start(&w.codex_home, &w.home, &w.project);
    for hook in server.hooks(&w.project) {
        if hook["trustStatus"] != "trusted" {
            let path = format!(
                "hooks.state.\"{}\".trusted_hash",
                hook["key"].as_str().unwrap()
            );
            server.request(
                "config/batchWrite",
                json!({"edits": [{"keyPath": path, "value": hook["currentHash"], "mergeStrategy": "upsert"}],
                       "reloadUserConfig": true}),
            );
        }
    }
    drop(server);
    install::uninstall(Agent::Codex, &Scope::User, &w.loc()).unwrap();
    let mut server = AppServer::start(&w.codex_home, &w.home, &w.project);
    let hooks = server.hooks(&w.project);
    let shown: Vec<(&str, &str)> = hooks
        .iter()
        .map(|h| {
            (
                h["command"].as_str().unwrap(),
                h["trustStatus"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        shown,
        [("echo a", "trusted"), ("echo b", "trusted")],
        "{}",
        w.config()
    );
}
