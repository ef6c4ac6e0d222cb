//! The hooks `install` writes really run in the real agents, offline against the scripted
//! model (agents.md §7): the binary is a stand-in `agentwatch` that records each event on its
//! stdin and refuses the second call in the agent's own protocol; the refusal must reach the
//! model. For opencode this is the plugin's contract with `agentwatch hook opencode`.

use agentwatch_hooks::Agent;
use agentwatch_hooks::install::{self, Locations, Scope};
use agentwatch_testkit::script::{Script, Turn};
use agentwatch_testkit::{TempDir, claude, codex, gemini, opencode};
use serde_json::{Value, json};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

const REASON: &str = "AGENTWATCH-TEST: this call was refused";
const MARKER: &str = "HOOKTEST";
const PATIENCE: Duration = Duration::from_secs(180);

/// A stand-in `agentwatch` in `dir/bin`: for `hook AGENT` it appends its stdin (one line) to
/// `dir/events.jsonl` and answers the second event with `deny`. Returns its path.
fn stand_in_for(dir: &Path, agent: Agent, deny: &Value) -> PathBuf {
    let bin = dir.join("bin/agentwatch");
    std::fs::create_dir_all(bin.parent().unwrap()).unwrap();
    let log = dir.join("events.jsonl");
    let script = format!(
        "#!/bin/sh\n[ \"$1 $2\" = \"hook {agent}\" ] || exit 64\n\
         tr -d '\\n' >> '{log}'\necho >> '{log}'\n\
         [ \"$(wc -l < '{log}')\" -eq 2 ] && printf '%s' '{deny}'\nexit 0\n",
        log = log.display(),
    );
    std::fs::write(&bin, script).unwrap();
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    bin
}

fn events(dir: &Path) -> Vec<Value> {
    std::fs::read_to_string(dir.join("events.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The same shell call three times, then the end.
fn three_calls(tool: &str, input: Value) -> Script {
    Script::new().conversation(MARKER, vec![Turn::tool(tool, input); 3])
}

/// Whether some request of the conversation showed the model our reason.
fn model_saw_reason(requests: &[Value]) -> bool {
    requests.iter().any(|r| r.to_string().contains(REASON))
}

fn claude_deny() -> Value {
    json!({"hookSpecificOutput": {"hookEventName": "PreToolUse",
        "permissionDecision": "deny", "permissionDecisionReason": REASON}})
}

#[test]
#[ignore = "needs claude (npm @anthropic-ai/claude-code)"]
fn claude_runs_the_installed_hook() {
    let tmp = TempDir::new("aw-hook-claude");
    let bin = stand_in_for(&tmp.path, Agent::Claude, &claude_deny());
    let server = claude::ModelServer::start(three_calls(
        "Bash",
        json!({"command": "echo hi", "description": "say hi"}),
    ));
    let run = claude::ClaudeRun::new(
        claude::require_binary(),
        &server,
        &tmp.path,
        &format!("{MARKER}: say hi"),
    );
    let loc = Locations {
        claude_config_dir: Some(run.config_dir.clone()),
        ..Locations::default()
    };
    let out = install::install(Agent::Claude, &Scope::User, &loc, &bin).unwrap();
    assert!(out.status.will_run, "{:?}", out.status);
    let done = run.run(PATIENCE).unwrap();
    assert!(done.status.success(), "{}", done.stderr);
    let seen = events(&tmp.path);
    assert_eq!(seen.len(), 3, "one event per call: {seen:?}");
    assert!(seen.iter().all(|e| e["hook_event_name"] == "PreToolUse"));
    assert!(model_saw_reason(&server.conversation_requests(MARKER)));
}

#[test]
#[ignore = "needs codex (npm @openai/codex)"]
fn codex_runs_the_installed_and_trusted_hook() {
    let tmp = TempDir::new("aw-hook-codex");
    let bin = stand_in_for(&tmp.path, Agent::Codex, &claude_deny());
    let server =
        codex::ResponsesServer::start(three_calls("exec_command", json!({"cmd": "echo hi"})));
    let mut run = codex::CodexRun::new(
        codex::require_binary(),
        &server,
        &tmp.path,
        &format!("{MARKER}: say hi"),
    );
    // The run writes its own config.toml: install into it, then keep what install added.
    let config = run.codex_home.join("config.toml");
    std::fs::write(&config, run.config_toml()).unwrap();
    let loc = Locations {
        codex_home: Some(run.codex_home.clone()),
        home: Some(run.home.clone()),
        ..Locations::default()
    };
    let out = install::install(Agent::Codex, &Scope::User, &loc, &bin).unwrap();
    assert!(out.status.will_run, "{:?}", out.status);
    let written = std::fs::read_to_string(&config).unwrap();
    run.config_extra = written.strip_prefix(&run.config_toml()).unwrap().to_owned();
    let done = run.run(PATIENCE).unwrap();
    assert!(done.status.success(), "{}", done.stderr);
    let seen = events(&tmp.path);
    assert_eq!(
        seen.len(),
        3,
        "Codex ran the hook without a bypass flag: {seen:?}"
    );
    assert!(model_saw_reason(&server.conversation_requests(MARKER)));
}

#[test]
#[ignore = "needs gemini (npm @google/gemini-cli)"]
fn gemini_runs_the_installed_project_hook() {
    let tmp = TempDir::new("aw-hook-gemini");
    let deny = json!({"decision": "deny", "reason": REASON});
    let bin = stand_in_for(&tmp.path, Agent::Gemini, &deny);
    let server = gemini::GeminiServer::start(three_calls(
        "run_shell_command",
        json!({"command": "echo hi"}),
    ));
    let run = gemini::GeminiRun::new(
        gemini::require_binary(),
        &server,
        &tmp.path,
        &format!("{MARKER}: say hi"),
    );
    // The run writes the user's settings: the hook goes into the project's.
    let loc = Locations {
        gemini_cli_home: Some(run.home.clone()),
        ..Locations::default()
    };
    let scope = Scope::Project(run.dir.clone());
    let out = install::install(Agent::Gemini, &scope, &loc, &bin).unwrap();
    assert!(out.status.installed, "{:?}", out.status);
    let done = run.run(PATIENCE).unwrap();
    assert!(done.status.success(), "{}", done.stderr);
    let seen = events(&tmp.path);
    assert_eq!(seen.len(), 3, "one event per call: {seen:?}");
    assert!(seen.iter().all(|e| e["hook_event_name"] == "BeforeTool"));
    assert!(model_saw_reason(&server.conversation_requests(MARKER)));
}

#[test]
#[ignore = "needs opencode"]
fn opencode_runs_the_installed_plugin() {
    let tmp = TempDir::new("aw-hook-opencode");
    let deny = json!({"decision": "deny", "reason": REASON});
    let bin = stand_in_for(&tmp.path, Agent::Opencode, &deny);
    // opencode speaks the Messages API to its `anthropic` provider pointed at the server.
    let server = claude::ModelServer::start(three_calls(
        "bash",
        json!({"command": "echo hi", "description": "say hi"}),
    ));
    let home = opencode::OpencodeHome::new(opencode::require_binary(), &tmp.path);
    let config = tmp.path.join("home/.config/opencode");
    scripted_opencode_config(&config, &server.url());
    let loc = Locations {
        xdg_config_home: Some(tmp.path.join("home/.config")),
        ..Locations::default()
    };
    let out = install::install(Agent::Opencode, &Scope::User, &loc, &bin).unwrap();
    assert!(out.status.will_run, "{:?}", out.status);
    let done = home
        .command()
        // opencode takes its directory from PWD.
        .env("PWD", &home.project)
        .args(["run", "--format", "json", &format!("{MARKER}: say hi")])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&done.stdout);
    assert!(
        done.status.success(),
        "{}",
        String::from_utf8_lossy(&done.stderr)
    );
    let seen = events(&tmp.path);
    assert_eq!(seen.len(), 3, "one event per call: {seen:?}\n{stdout}");
    let first = &seen[0];
    assert_eq!(first["hook_event_name"], "tool.execute.before");
    assert_eq!(first["tool"], "bash");
    assert_eq!(first["tool_input"]["command"], "echo hi");
    assert!(first["session_id"].as_str().unwrap().starts_with("ses_"));
    assert_eq!(first["cwd"], json!(home.project));
    // The refused call is an error tool part with our reason; the others ran.
    let parts: Vec<Value> = stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["type"] == "tool_use")
        .map(|e| e["part"]["state"].clone())
        .collect();
    let statuses: Vec<&str> = parts
        .iter()
        .map(|s| s["status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses, ["completed", "error", "completed"], "{stdout}");
    assert_eq!(parts[1]["error"], REASON);
    assert!(model_saw_reason(&server.conversation_requests(MARKER)));
}

/// opencode's config for the scripted model, and its plugin dependencies marked installed
/// (offline, opencode would wait for ever on `npm install @opencode-ai/plugin` before loading
/// any plugin; with network it installs it once).
fn scripted_opencode_config(dir: &Path, url: &str) {
    std::fs::create_dir_all(dir.join("node_modules")).unwrap();
    let deps = json!({"@opencode-ai/plugin": opencode_version()});
    std::fs::write(
        dir.join("package.json"),
        json!({"dependencies": deps}).to_string(),
    )
    .unwrap();
    std::fs::write(
        dir.join("package-lock.json"),
        json!({"packages": {"": {"dependencies": deps}}}).to_string(),
    )
    .unwrap();
    let config = json!({
        "$schema": "https://opencode.ai/config.json",
        "model": "anthropic/scripted",
        "provider": {"anthropic": {
            "options": {"baseURL": format!("{url}/v1"), "apiKey": "dummy"},
            "models": {"scripted": {"name": "scripted", "tool_call": true}}}},
        "permission": {"bash": "allow", "edit": "allow"},
    });
    std::fs::write(dir.join("opencode.json"), config.to_string()).unwrap();
}

fn opencode_version() -> &'static str {
    "1.18.33"
}
