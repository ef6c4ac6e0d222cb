//! The real Claude Code, Codex and Gemini CLIs driven offline by a scripted model, with a
//! pre-tool hook that refuses some shell calls (`hooks.md`): the calls refused with
//! agentwatch's reason (it begins `agentwatch:`) read as `blocked`, one refused by another
//! hook reads as it always did, the call let through as completed. The records are the ones
//! the CLIs write, not hand-written shapes.

mod common;

use agentwatch_testkit::TempDir;
use agentwatch_testkit::script::{Script, Turn};
use agentwatch_transcripts::{read_claude_sessions, read_codex_sessions, read_gemini_sessions};
use detect_core::{CallStatus, Session};
use serde_json::{Value, json};
use std::path::Path;
use std::time::Duration;

/// The reason agentwatch's hook gives, and another hook's.
const OURS: &str = "agentwatch: you ran this exact call twice with the same failure";
const THEIRS: &str = "policy: other.sh is not allowed here";

/// A hook that refuses `check.sh` with [`OURS`] and `other.sh` with [`THEIRS`], answering
/// with `deny(reason)`, written to `root/hook.sh`; its command line.
fn hook(root: &Path, deny: impl Fn(&str) -> Value) -> String {
    let path = root.join("hook.sh");
    let script = format!(
        "#!/bin/sh\ninput=$(cat)\ncase \"$input\" in\n  *check.sh*) printf '%s' '{}' ;;\n  *other.sh*) printf '%s' '{}' ;;\nesac\nexit 0\n",
        deny(OURS),
        deny(THEIRS)
    );
    std::fs::write(&path, script).unwrap();
    format!("sh {}", path.display())
}

/// The shell calls of the script, each with the command as the agent's tool takes it.
fn turns(shell: impl Fn(&str) -> Turn) -> Vec<Turn> {
    ["sh check.sh", "sh check.sh", "sh other.sh", "echo done"]
        .into_iter()
        .map(shell)
        .collect()
}

const FILES: &[(&str, &str)] = &[
    ("check.sh", "echo 'check failed' >&2\nexit 1\n"),
    ("other.sh", "echo other\n"),
];

fn statuses(session: &Session) -> Vec<CallStatus> {
    session.calls.iter().map(|c| c.status.clone()).collect()
}

/// The JSON deny Claude Code and Codex take from a `PreToolUse` hook.
fn pre_tool_use_deny(reason: &str) -> Value {
    json!({"hookSpecificOutput": {"hookEventName": "PreToolUse",
           "permissionDecision": "deny", "permissionDecisionReason": reason}})
}

#[test]
#[ignore = "needs claude (npm @anthropic-ai/claude-code)"]
fn claude_codes_refusals_by_agentwatch_read_as_blocked() {
    use agentwatch_testkit::claude::{ClaudeRun, ModelServer, require_binary};
    let root = TempDir::new("aw-claude-refusal");
    let script = Script::new().conversation(
        "AW-HOOK",
        turns(|cmd| Turn::tool("Bash", json!({"command": cmd, "description": "Run it"}))),
    );
    let server = ModelServer::start(script);
    let run = ClaudeRun::new(
        require_binary(),
        &server,
        &root.path,
        "AW-HOOK: run the checks",
    );
    common::init_repo(&run.dir, FILES);
    let command = hook(&root.path, pre_tool_use_deny);
    let settings = json!({"hooks": {"PreToolUse": [{"matcher": "Bash",
        "hooks": [{"type": "command", "command": command, "timeout": 30}]}]}});
    std::fs::create_dir_all(run.dir.join(".claude")).unwrap();
    std::fs::write(run.dir.join(".claude/settings.json"), settings.to_string()).unwrap();
    let done = run.run(Duration::from_secs(240)).expect("claude ran");
    assert!(done.status.success(), "{}\n{}", done.stderr, done.stdout);
    let file = run.transcripts().into_iter().next().expect("a transcript");
    let bytes = std::fs::read(&file).unwrap();
    let sessions = read_claude_sessions(&bytes, &file.to_string_lossy()).unwrap();
    assert_eq!(
        statuses(&sessions[0]),
        [
            CallStatus::Blocked,
            CallStatus::Blocked,
            CallStatus::Error,
            CallStatus::Completed
        ],
        "{}",
        String::from_utf8_lossy(&bytes)
    );
}

#[test]
#[ignore = "needs codex (npm @openai/codex)"]
fn codexs_refusals_by_agentwatch_read_as_blocked() {
    use agentwatch_testkit::codex::{CodexRun, ResponsesServer, require_binary};
    let root = TempDir::new("aw-codex-refusal");
    let script = Script::new().conversation(
        "AW-HOOK",
        turns(|cmd| Turn::tool("exec_command", json!({ "cmd": cmd }))),
    );
    let server = ResponsesServer::start(script);
    let run = CodexRun::new(
        require_binary(),
        &server,
        &root.path,
        "AW-HOOK: run the checks",
    );
    common::init_repo(&run.dir, FILES);
    let command = hook(&root.path, pre_tool_use_deny);
    let hooks = json!({"hooks": {"PreToolUse": [{"matcher": "*",
        "hooks": [{"type": "command", "command": command, "timeout": 30}]}]}});
    std::fs::write(run.codex_home.join("hooks.json"), hooks.to_string()).unwrap();
    std::fs::write(run.codex_home.join("config.toml"), run.config_toml()).unwrap();
    // An untrusted hook is skipped silently: trust it for this run (`hooks.md`).
    let out = run
        .command()
        .arg("--dangerously-bypass-hook-trust")
        .output()
        .expect("codex ran");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let file = run.rollouts().into_iter().next().expect("a rollout");
    let bytes = std::fs::read(&file).unwrap();
    let sessions = read_codex_sessions(&bytes, &file.to_string_lossy()).unwrap();
    let read = statuses(&sessions[0]);
    assert_eq!(
        read[..2],
        [CallStatus::Blocked, CallStatus::Blocked],
        "{read:?}"
    );
    assert_ne!(read[2], CallStatus::Blocked, "another hook's refusal");
    assert_eq!(read[3], CallStatus::Completed);
}

#[test]
#[ignore = "needs gemini (npm @google/gemini-cli)"]
fn geminis_refusals_by_agentwatch_read_as_blocked() {
    use agentwatch_testkit::gemini::{GeminiRun, GeminiServer, require_binary};
    let root = TempDir::new("aw-gemini-refusal");
    let script = Script::new().conversation(
        "AW-HOOK",
        turns(|cmd| Turn::tool("run_shell_command", json!({ "command": cmd }))),
    );
    let server = GeminiServer::start(script);
    let mut run = GeminiRun::new(
        require_binary(),
        &server,
        &root.path,
        "AW-HOOK: run the checks",
    );
    run.loop_detection = false;
    common::init_repo(&run.dir, FILES);
    let command = hook(
        &root.path,
        |reason| json!({"decision": "deny", "reason": reason}),
    );
    let settings = json!({"hooks": {"BeforeTool": [{"matcher": "run_shell_command",
        "hooks": [{"name": "aw-before-tool", "type": "command", "command": command, "timeout": 30000}]}]}});
    std::fs::create_dir_all(run.dir.join(".gemini")).unwrap();
    std::fs::write(run.dir.join(".gemini/settings.json"), settings.to_string()).unwrap();
    let done = run.run(Duration::from_secs(300)).expect("gemini ran");
    assert!(done.status.success(), "{}\n{}", done.stderr, done.stdout);
    let file = run.sessions().into_iter().next().expect("a session");
    let bytes = std::fs::read(&file).unwrap();
    let sessions = read_gemini_sessions(&bytes, &file.to_string_lossy()).unwrap();
    assert_eq!(
        statuses(&sessions[0]),
        [
            CallStatus::Blocked,
            CallStatus::Blocked,
            CallStatus::Error,
            CallStatus::Completed
        ],
        "{}",
        String::from_utf8_lossy(&bytes)
    );
}
