//! agentwatch's pre-tool hook inside the real agents (issue 47): the real Claude Code, Codex
//! and Gemini CLIs from npm, driven offline by a scripted model, with `agentwatch hook AGENT`
//! installed in their own settings.
//!
//! - A loop of 45 identical failing calls: at most 15 of them really run (the command counts
//!   its own runs in a file), the model's next request carries agentwatch's reason, and the
//!   agent's own record of a refused call is in its transcript.
//! - A healthy session (reads, edits, tests, commits): no refusal, and no `agentwatch:` text in
//!   anything the model is sent.
//! - The binary gone after install: the agent runs every call as if nothing were installed.

use agentwatch_testkit::TempDir;
use agentwatch_testkit::claude::{ClaudeRun, ModelServer, Script, Turn, require_binary};
use agentwatch_testkit::codex::{CodexRun, ResponsesServer, require_binary as codex_binary};
use agentwatch_testkit::gemini::{GeminiRun, GeminiServer, require_binary as gemini_binary};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Calls of the looping script.
const LOOP_CALLS: usize = 45;
/// Of them, at most this many may really run.
const AT_MOST_RUN: usize = 15;

/// A check that counts its runs (one line each in `runs.log`) and fails the same way each time.
const CHECK: &str = "#!/bin/sh\necho run >> runs.log\necho 'check failed: no value' >&2\nexit 1\n";

/// The agentwatch binary under test.
fn agentwatch() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_agentwatch"))
}

/// `agentwatch hooks install AGENT` as a user runs it, in an agent's isolated environment
/// (`env`: `HOME` and the agent's own variables), the hook naming `binary`.
fn install(agent: &str, env: &[(&str, &Path)], binary: &Path) {
    let mut command = std::process::Command::new(agentwatch());
    command
        .args(["hooks", "install", agent, "--binary"])
        .arg(binary)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default());
    for (name, value) in env {
        command.env(name, value);
    }
    let out = command.output().unwrap();
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn install_claude(run: &ClaudeRun, binary: &Path) {
    install(
        "claude",
        &[("HOME", &run.home), ("CLAUDE_CONFIG_DIR", &run.config_dir)],
        binary,
    );
}

/// How many times the check really ran.
fn runs(dir: &Path) -> usize {
    std::fs::read_to_string(dir.join("runs.log"))
        .map(|t| t.lines().count())
        .unwrap_or(0)
}

/// Every model request's text, as one string per request.
fn requests_text(requests: &[Value]) -> Vec<String> {
    requests.iter().map(Value::to_string).collect()
}

/// A Claude Code run of `script` in a fresh project holding the check.
fn claude_run(root: &TempDir, server: &ModelServer, prompt: &str) -> ClaudeRun {
    let run = ClaudeRun::new(require_binary(), server, &root.path, prompt);
    std::fs::write(run.dir.join("check.sh"), CHECK).unwrap();
    run
}

fn looping_script(marker: &str) -> Script {
    let turns = (0..LOOP_CALLS)
        .map(|_| {
            Turn::tool(
                "Bash",
                json!({"command": "sh check.sh", "description": "Run the check"}),
            )
        })
        .collect();
    Script::new().conversation(marker, turns)
}

#[test]
#[ignore = "needs claude (npm @anthropic-ai/claude-code)"]
fn claude_a_looping_call_is_refused_and_the_model_is_told_why() {
    let root = TempDir::new("aw-hook-claude-loop");
    let server = ModelServer::start(looping_script("AW-HOOK-LOOP"));
    let run = claude_run(&root, &server, "AW-HOOK-LOOP: make the check pass");
    install_claude(&run, &agentwatch());
    let done = run.run(Duration::from_secs(300)).expect("claude ran");
    assert!(done.status.success(), "{}\n{}", done.stderr, done.stdout);
    let ran = runs(&run.dir);
    let log = hook_journal(&run.home);
    eprintln!("{ran} of {LOOP_CALLS} calls ran; the hook's journal:\n{log}");
    assert!(
        (3..=AT_MOST_RUN).contains(&ran),
        "{ran} of {LOOP_CALLS} calls ran"
    );
    let requests = requests_text(&server.conversation_requests("AW-HOOK-LOOP"));
    let told = requests
        .iter()
        .position(|r| r.contains("agentwatch: "))
        .expect("a request carries agentwatch's reason");
    assert!(told < AT_MOST_RUN, "told at request {told}");
    let transcript = run
        .transcripts()
        .into_iter()
        .map(|p| std::fs::read_to_string(p).unwrap())
        .collect::<String>();
    assert!(
        transcript.contains("PreToolUse:Bash hook error: agentwatch: "),
        "the agent's own record of a refused call"
    );
}

/// Gemini CLI's settings as its test run writes them, then agentwatch's hook installed.
fn install_gemini(run: &GeminiRun, binary: &Path) {
    run.write_settings().unwrap();
    install(
        "gemini",
        &[("HOME", &run.home), ("GEMINI_CLI_HOME", &run.home)],
        binary,
    );
}

#[test]
#[ignore = "needs gemini (npm @google/gemini-cli)"]
fn gemini_a_looping_call_is_refused_and_the_model_is_told_why() {
    let root = TempDir::new("aw-hook-gemini-loop");
    let turns = (0..LOOP_CALLS)
        .map(|_| Turn::tool("run_shell_command", json!({"command": "sh check.sh"})))
        .collect();
    let server = GeminiServer::start(Script::new().conversation("AW-HOOK-GLOOP", turns));
    let mut run = GeminiRun::new(
        gemini_binary(),
        &server,
        &root.path,
        "AW-HOOK-GLOOP: make the check pass",
    );
    // Gemini's own loop check off, so agentwatch's ladder is what acts.
    run.loop_detection = false;
    std::fs::write(run.dir.join("check.sh"), CHECK).unwrap();
    install_gemini(&run, &agentwatch());
    let done = run.run(Duration::from_secs(300)).expect("gemini ran");
    assert!(done.status.success(), "{}\n{}", done.stderr, done.stdout);
    let ran = runs(&run.dir);
    let log = hook_journal(&run.home);
    eprintln!("{ran} of {LOOP_CALLS} calls ran; the hook's journal:\n{log}");
    assert!((3..=AT_MOST_RUN).contains(&ran), "{ran} calls ran");
    let requests = requests_text(&server.conversation_requests("AW-HOOK-GLOOP"));
    assert!(
        requests.iter().any(|r| r.contains("agentwatch: ")),
        "a request carries agentwatch's reason"
    );
    let sessions: String = run
        .sessions()
        .into_iter()
        .map(|p| std::fs::read_to_string(p).unwrap())
        .collect();
    assert!(
        sessions.contains("Tool execution blocked: agentwatch: "),
        "the agent's own record of a refused call"
    );
}

/// The hook's journal under an agent's isolated `HOME`.
fn hook_journal(home: &Path) -> String {
    std::fs::read_to_string(home.join(".local/state/agentwatch/hooks/hook.log")).unwrap_or_default()
}

/// Cycles of the healthy script: read, edit, test, commit.
const CYCLES: usize = 8;

/// A git repository in `dir` holding `calc.py` (one `vI = 0` line per cycle) and a test that
/// passes.
fn healthy_repo(dir: &Path) {
    let calc: String = (0..CYCLES).map(|i| format!("v{i} = 0\n")).collect();
    std::fs::write(dir.join("calc.py"), calc).unwrap();
    std::fs::write(
        dir.join("test.sh"),
        "#!/bin/sh\npython3 -c 'import calc' && echo ok\n",
    )
    .unwrap();
    for args in [
        &["init", "-q"][..],
        &["-c", "user.name=t", "-c", "user.email=t@e", "add", "."],
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@e",
            "commit",
            "-qm",
            "start",
        ],
    ] {
        let status = std::process::Command::new("git")
            .args(args)
            .current_dir(dir)
            .status()
            .unwrap();
        assert!(status.success(), "git {args:?}");
    }
}

/// The healthy work in `agent`'s tools: each cycle reads the file, changes one line, runs the
/// test (it passes) and commits.
fn healthy_turns(
    read: &dyn Fn() -> Turn,
    edit: &dyn Fn(usize) -> Turn,
    shell: &dyn Fn(&str) -> Turn,
) -> Vec<Turn> {
    (0..CYCLES)
        .flat_map(|i| {
            [
                read(),
                edit(i),
                shell("sh test.sh"),
                shell(&format!(
                    "git -c user.name=t -c user.email=t@e commit -qam 'step {i}'"
                )),
            ]
        })
        .collect()
}

/// No refusal, no warning, and no `agentwatch:` text in anything the model was sent.
fn assert_untouched(journal: &str, requests: &[String]) {
    assert!(
        journal.lines().any(|l| l.contains("decision=")),
        "the hook ran: {journal}"
    );
    for line in journal.lines() {
        assert!(
            line.contains("decision=not-flagged")
                || line.contains("decision=other-call")
                || line.contains("decision=changes"),
            "{line}"
        );
    }
    for request in requests {
        assert!(!request.contains("agentwatch:"), "{request}");
    }
}

#[test]
#[ignore = "needs claude (npm @anthropic-ai/claude-code)"]
fn claude_a_healthy_session_never_meets_the_hook() {
    let root = TempDir::new("aw-hook-claude-healthy");
    let turns = healthy_turns(
        &|| Turn::tool("Read", json!({"file_path": "calc.py"})),
        &|i| {
            Turn::tool(
                "Edit",
                json!({"file_path": "calc.py", "old_string": format!("v{i} = 0"), "new_string": format!("v{i} = 1")}),
            )
        },
        &|command| Turn::tool("Bash", json!({"command": command, "description": "run"})),
    );
    let server = ModelServer::start(Script::new().conversation("AW-HOOK-OK", turns));
    let run = claude_run(&root, &server, "AW-HOOK-OK: set every value to one");
    healthy_repo(&run.dir);
    install_claude(&run, &agentwatch());
    let done = run.run(Duration::from_secs(300)).expect("claude ran");
    assert!(done.status.success(), "{}\n{}", done.stderr, done.stdout);
    let calc = std::fs::read_to_string(run.dir.join("calc.py")).unwrap();
    assert_eq!(
        calc.matches("= 1").count(),
        CYCLES,
        "every edit ran: {calc}"
    );
    assert_untouched(
        &hook_journal(&run.home),
        &requests_text(&server.conversation_requests("AW-HOOK-OK")),
    );
}

#[test]
#[ignore = "needs gemini (npm @google/gemini-cli)"]
fn gemini_a_healthy_session_never_meets_the_hook() {
    let root = TempDir::new("aw-hook-gemini-healthy");
    let turns = healthy_turns(
        &|| Turn::tool("read_file", json!({"file_path": "calc.py"})),
        &|i| {
            Turn::tool(
                "replace",
                json!({"file_path": "calc.py", "old_string": format!("v{i} = 0"), "new_string": format!("v{i} = 1"), "instruction": "set it"}),
            )
        },
        &|command| Turn::tool("run_shell_command", json!({"command": command})),
    );
    let server = GeminiServer::start(Script::new().conversation("AW-HOOK-GOK", turns));
    let run = GeminiRun::new(
        gemini_binary(),
        &server,
        &root.path,
        "AW-HOOK-GOK: set every value to one",
    );
    healthy_repo(&run.dir);
    install_gemini(&run, &agentwatch());
    let done = run.run(Duration::from_secs(300)).expect("gemini ran");
    assert!(done.status.success(), "{}\n{}", done.stderr, done.stdout);
    let calc = std::fs::read_to_string(run.dir.join("calc.py")).unwrap();
    assert_eq!(
        calc.matches("= 1").count(),
        CYCLES,
        "every edit ran: {calc}"
    );
    assert_untouched(
        &hook_journal(&run.home),
        &requests_text(&server.conversation_requests("AW-HOOK-GOK")),
    );
}

#[test]
#[ignore = "needs claude (npm @anthropic-ai/claude-code)"]
fn claude_with_the_binary_gone_every_call_runs() {
    let root = TempDir::new("aw-hook-claude-gone");
    let server = ModelServer::start(looping_script("AW-HOOK-GONE"));
    let run = claude_run(&root, &server, "AW-HOOK-GONE: make the check pass");
    let copy = root.path.join("bin/agentwatch");
    std::fs::create_dir_all(copy.parent().unwrap()).unwrap();
    std::fs::copy(agentwatch(), &copy).unwrap();
    install_claude(&run, &copy);
    std::fs::remove_file(&copy).unwrap();
    let done = run.run(Duration::from_secs(300)).expect("claude ran");
    assert!(done.status.success(), "{}\n{}", done.stderr, done.stdout);
    assert_eq!(runs(&run.dir), LOOP_CALLS, "every call ran");
}

/// The hook's decisions end warn, block, block, block, stop: nothing after the stop.
fn assert_stopped_after_three_refusals(journal: &str) {
    let decisions: Vec<&str> = journal
        .lines()
        .filter_map(|l| l.split(" decision=").nth(1)?.split(' ').next())
        .collect();
    let tail = &decisions[decisions.len().saturating_sub(5)..];
    assert_eq!(
        tail,
        ["warn", "block", "block", "block", "stop"],
        "{journal}"
    );
    assert!(
        decisions[..decisions.len() - 5]
            .iter()
            .all(|d| *d == "not-flagged"),
        "{journal}"
    );
}

/// `[act] mode = "stop"` in the agent's home: the configuration the hook reads.
fn stop_mode(home: &Path) {
    let config = home.join(".config/agentwatch/config.toml");
    std::fs::create_dir_all(config.parent().unwrap()).unwrap();
    std::fs::write(config, "[act]\nmode = \"stop\"\nmax_blocks = 3\n").unwrap();
}

#[test]
#[ignore = "needs claude (npm @anthropic-ai/claude-code)"]
fn claude_stop_mode_ends_the_session_after_the_refusals() {
    let root = TempDir::new("aw-hook-claude-stop");
    let server = ModelServer::start(looping_script("AW-HOOK-STOP"));
    let run = claude_run(&root, &server, "AW-HOOK-STOP: make the check pass");
    install_claude(&run, &agentwatch());
    stop_mode(&run.home);
    let done = run.run(Duration::from_secs(300)).expect("claude ran");
    assert!(done.status.success(), "{}\n{}", done.stderr, done.stdout);
    let journal = hook_journal(&run.home);
    eprintln!(
        "{journal}\n{}",
        done.stdout.lines().last().unwrap_or_default()
    );
    assert_stopped_after_three_refusals(&journal);
    // Warned at the 4th call, or later when Claude Code (which writes its transcript
    // asynchronously) had not yet written the last results when the hook read it.
    assert!(
        (4..=AT_MOST_RUN).contains(&runs(&run.dir)),
        "{} ran",
        runs(&run.dir)
    );
    assert!(done.stdout.contains("hook_stopped"), "{}", done.stdout);
}

#[test]
#[ignore = "needs gemini (npm @google/gemini-cli)"]
fn gemini_stop_mode_ends_the_session_after_the_refusals() {
    let root = TempDir::new("aw-hook-gemini-stop");
    let turns = (0..LOOP_CALLS)
        .map(|_| Turn::tool("run_shell_command", json!({"command": "sh check.sh"})))
        .collect();
    let server = GeminiServer::start(Script::new().conversation("AW-HOOK-GSTOP", turns));
    let mut run = GeminiRun::new(
        gemini_binary(),
        &server,
        &root.path,
        "AW-HOOK-GSTOP: make the check pass",
    );
    run.loop_detection = false;
    std::fs::write(run.dir.join("check.sh"), CHECK).unwrap();
    install_gemini(&run, &agentwatch());
    stop_mode(&run.home);
    let done = run.run(Duration::from_secs(300)).expect("gemini ran");
    let journal = hook_journal(&run.home);
    eprintln!("{journal}\n{}\n{}", done.stdout, done.stderr);
    assert_stopped_after_three_refusals(&journal);
    // Gemini writes a call before the next is asked: the warning is the first refusal, so
    // only the calls before the flag ran.
    let ran = runs(&run.dir);
    assert!((3..=AT_MOST_RUN).contains(&ran), "{ran} ran");
    assert_eq!(
        journal.matches("decision=not-flagged").count(),
        ran,
        "{journal}"
    );
}

/// `agentwatch hook opencode` as the plugin runs it: the event on standard input, the answer.
fn hook_opencode(home: &Path, event: &Value) -> String {
    let mut child = std::process::Command::new(agentwatch())
        .args(["hook", "opencode"])
        .env_clear()
        .env("HOME", home)
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write as _;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(event.to_string().as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    String::from_utf8(out.stdout).unwrap()
}

#[test]
#[ignore = "needs opencode (npm opencode-ai)"]
fn opencode_a_looping_call_is_refused_through_the_server_the_plugin_runs_in() {
    use agentwatch_testkit::opencode::{ExportBuilder, OpencodeHome, looping_calls};
    let tmp = TempDir::new("aw-hook-opencode");
    let oc = OpencodeHome::new(
        agentwatch_testkit::opencode::require_binary(),
        &tmp.path.join("oc"),
    );
    let id = "ses_0123456789abHOOKLOOPxxxx";
    let looping = ExportBuilder::new(id, "Fix the rounding", None, 1_796_000_000_000).steps(
        "build",
        &looping_calls(30),
        1000,
    );
    oc.import(&looping.write(&tmp.path.join("loop.json")))
        .unwrap();
    let server = oc.serve(None, Duration::from_secs(30)).unwrap();
    let home = tmp.path.join("home");
    std::fs::create_dir_all(&home).unwrap();
    let event = |command: &str| {
        json!({"hook_event_name": "tool.execute.before", "session_id": id, "call_id": "call_next",
               "tool": "bash", "tool_input": {"command": command, "description": "run"},
               "cwd": "/tmp/proj", "server_url": server.url()})
    };
    // Another command runs; the looping test is refused with the reason the plugin throws.
    assert_eq!(hook_opencode(&home, &event("git status")), "");
    let answer = hook_opencode(
        &home,
        &event("cd /tmp/proj && pytest -x tests/test_money.py"),
    );
    let answer: Value = serde_json::from_str(&answer).expect(&answer);
    assert_eq!(answer["decision"], "deny");
    let reason = answer["reason"].as_str().unwrap();
    assert!(reason.starts_with("agentwatch: "), "{reason}");
    assert!(reason.contains("pytest -x tests/test_money.py"), "{reason}");
}

/// Codex's provider configuration as its test run writes it, then agentwatch's hook installed
/// (and trusted, as Codex records trust).
fn install_codex(run: &CodexRun, binary: &Path) {
    run.write_config().unwrap();
    install(
        "codex",
        &[("HOME", &run.home), ("CODEX_HOME", &run.codex_home)],
        binary,
    );
}

fn codex_exec(cmd: &str) -> Turn {
    Turn::tool("exec_command", json!({ "cmd": cmd }))
}

#[test]
#[ignore = "needs codex (npm @openai/codex)"]
fn codex_a_looping_call_is_refused_and_the_model_is_told_why() {
    let root = TempDir::new("aw-hook-codex-loop");
    let turns = (0..LOOP_CALLS).map(|_| codex_exec("sh check.sh")).collect();
    let server = ResponsesServer::start(Script::new().conversation("AW-HOOK-XLOOP", turns));
    let run = CodexRun::new(
        codex_binary(),
        &server,
        &root.path,
        "AW-HOOK-XLOOP: make the check pass",
    );
    std::fs::write(run.dir.join("check.sh"), CHECK).unwrap();
    install_codex(&run, &agentwatch());
    let done = run.run(Duration::from_secs(300)).expect("codex ran");
    assert!(done.status.success(), "{}\n{}", done.stderr, done.stdout);
    let ran = runs(&run.dir);
    let log = hook_journal(&run.home);
    eprintln!("{ran} of {LOOP_CALLS} calls ran; the hook's journal:\n{log}");
    assert!((3..=AT_MOST_RUN).contains(&ran), "{ran} calls ran");
    let requests = requests_text(&server.conversation_requests("AW-HOOK-XLOOP"));
    assert!(
        requests.iter().any(|r| r.contains("agentwatch: ")),
        "a request carries agentwatch's reason"
    );
    let rollouts: String = run
        .rollouts()
        .into_iter()
        .map(|p| std::fs::read_to_string(p).unwrap())
        .collect();
    assert!(
        rollouts.contains("Command blocked by PreToolUse hook: agentwatch: "),
        "the agent's own record of a refused call"
    );
}

#[test]
#[ignore = "needs codex (npm @openai/codex)"]
fn codex_a_healthy_session_never_meets_the_hook() {
    let root = TempDir::new("aw-hook-codex-healthy");
    let turns = healthy_turns(
        &|| codex_exec("cat calc.py"),
        &|i| {
            Turn::tool(
                "apply_patch",
                json!(format!(
                    "*** Begin Patch\n*** Update File: calc.py\n@@\n-v{i} = 0\n+v{i} = 1\n*** End Patch\n"
                )),
            )
        },
        &codex_exec,
    );
    let server = ResponsesServer::start(Script::new().conversation("AW-HOOK-XOK", turns));
    let run = CodexRun::new(
        codex_binary(),
        &server,
        &root.path,
        "AW-HOOK-XOK: set every value to one",
    );
    healthy_repo(&run.dir);
    install_codex(&run, &agentwatch());
    let done = run.run(Duration::from_secs(300)).expect("codex ran");
    assert!(done.status.success(), "{}\n{}", done.stderr, done.stdout);
    let calc = std::fs::read_to_string(run.dir.join("calc.py")).unwrap();
    assert_eq!(
        calc.matches("= 1").count(),
        CYCLES,
        "every edit ran: {calc}"
    );
    assert_untouched(
        &hook_journal(&run.home),
        &requests_text(&server.conversation_requests("AW-HOOK-XOK")),
    );
}
