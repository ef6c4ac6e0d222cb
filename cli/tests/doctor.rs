//! `agentwatch doctor` and `agentwatch init` on a fresh HOME (issue 13).

use agentwatch_testkit::{HttpServer, Reply, Request, TempDir};
use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output};

/// The binary on a fresh HOME; PATH is an empty directory (no notify-send anywhere).
fn agentwatch(home: &Path, args: &[&str]) -> Output {
    let bin = home.join("empty-bin");
    std::fs::create_dir_all(&bin).unwrap();
    Command::new(env!("CARGO_BIN_EXE_agentwatch"))
        .args(args)
        .env_clear()
        .env("HOME", home)
        .env("XDG_CONFIG_HOME", home.join(".config"))
        .env("XDG_STATE_HOME", home.join(".local/state"))
        .env("XDG_DATA_HOME", home.join(".local/share"))
        .env("PATH", &bin)
        .output()
        .unwrap()
}

/// A loopback port nothing listens on.
fn refused_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

#[test]
fn doctor_names_a_broken_webhook_and_a_missing_notify_send() {
    let tmp = TempDir::new("aw-doctor");
    let home = &tmp.path;
    let port = refused_port();
    // An opencode stand-in with no sessions: the sources are fine.
    let opencode = HttpServer::start(|_: &Request| Reply::json(200, &serde_json::json!([])));
    let dir = home.join(".config/agentwatch");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("config.toml"),
        format!(
            "[opencode]\nservers = [\"{}\"]\n\
             [[channels]]\nname = \"desktop\"\ntype = \"desktop\"\n\
             [[channels]]\nname = \"hook\"\ntype = \"webhook\"\nurl = \"http://127.0.0.1:{port}/events?token=s3cret\"\n",
            opencode.url()
        ),
    )
    .unwrap();
    let out = agentwatch(home, &["doctor"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(69), "{text}");
    let line = |name: &str| {
        text.lines()
            .find(|l| l.starts_with("channel") && l.contains(name))
            .unwrap_or_else(|| panic!("no {name} line in:\n{text}"))
            .to_owned()
    };
    assert!(line("desktop").contains("FAIL"), "{text}");
    assert!(line("desktop").contains("notify-send not found"), "{text}");
    assert!(line("hook").contains("FAIL"), "{text}");
    assert!(line("hook").contains("does not answer"), "{text}");
    assert!(line("hook").to_lowercase().contains("refused"), "{text}");
    assert!(
        !text.contains("s3cret"),
        "a token in a URL is never shown:\n{text}"
    );
    assert!(text.contains("problem (exit 69)"), "{text}");
    let source = text
        .lines()
        .find(|l| l.contains(&opencode.url()))
        .unwrap_or_else(|| panic!("no source line in:\n{text}"));
    assert!(
        source.contains("ok") && source.contains("0 session(s)"),
        "{text}"
    );

    let out = agentwatch(home, &["doctor", "--json"]);
    assert_eq!(out.status.code(), Some(69));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["ok"], false);
    let failed: Vec<&str> = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["status"] == "fail" && c["area"] == "channel")
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(failed, ["desktop (desktop)", "hook (webhook)"]);
    assert!(!String::from_utf8_lossy(&out.stdout).contains("s3cret"));
}

#[test]
fn init_writes_a_starter_config_that_loads_and_never_replaces_one() {
    let tmp = TempDir::new("aw-init");
    let home = &tmp.path;
    let out = agentwatch(home, &["init"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let path = home.join(".config/agentwatch/config.toml");
    let written = std::fs::read_to_string(&path).unwrap();
    assert!(
        written.starts_with("# agentwatch configuration"),
        "{written}"
    );
    // Nothing answers on the loopback model port here, so init turns the second opinion off.
    assert!(written.contains("local_llm_enabled = false"), "{written}");
    assert!(
        written.contains("# notify-send was not on PATH"),
        "{written}"
    );
    // The file loads as the effective config.
    let out = agentwatch(home, &["config", "--json"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // A second init leaves the file alone and says why.
    std::fs::write(&path, "# mine\n").unwrap();
    let out = agentwatch(home, &["init"]);
    assert_eq!(out.status.code(), Some(64));
    assert!(String::from_utf8_lossy(&out.stderr).contains("never replaces"));
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "# mine\n");
}

/// Copy the fixture directory `from` (an agent's own directory) to `to`.
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// Doctor names the agent versions its newest transcripts were written by, and the record
/// types it does not know (a warning, never a failure) (issue 48).
#[test]
fn doctor_names_the_agent_versions_read_and_the_record_types_not_known() {
    let tmp = TempDir::new("aw-doctor-versions");
    let home = &tmp.path;
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures");
    copy_tree(
        &fixtures.join("claude/2.1.x/interactive"),
        &home.join(".claude"),
    );
    copy_tree(&fixtures.join("codex/legacy"), &home.join(".codex"));
    copy_tree(&fixtures.join("gemini/0.4x-json"), &home.join(".gemini"));
    std::fs::write(
        home.join(".claude/projects/-home-user-work-app/next.jsonl"),
        "{\"type\":\"brand-new-record\",\"sessionId\":\"next\",\"version\":\"2.2.0\"}\n\
         {\"type\":\"brand-new-record\",\"sessionId\":\"next\",\"version\":\"2.2.0\"}\n",
    )
    .unwrap();
    let out = agentwatch(home, &["doctor", "--json"]);
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let check = |name: &str| {
        report["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == name)
            .unwrap_or_else(|| panic!("no {name} in {report:#}"))
            .clone()
    };
    let claude = check("Claude Code versions");
    assert_eq!(claude["status"], "warn", "{claude}");
    let detail = claude["detail"].as_str().unwrap();
    assert!(
        detail.contains("the 4 newest transcript(s) read"),
        "{detail}"
    );
    assert!(detail.contains("version 2.1.39 (3), 2.2.0 (1)"), "{detail}");
    assert!(
        detail.contains("not known, skipped: brand-new-record (2)"),
        "{detail}"
    );
    let codex = check("Codex CLI versions");
    assert_eq!(codex["status"], "ok", "{codex}");
    assert!(
        codex["detail"]
            .as_str()
            .unwrap()
            .contains("version 0.104.0 (1); every record type known"),
        "{codex}"
    );
    let gemini = check("Gemini CLI versions");
    assert!(
        gemini["detail"]
            .as_str()
            .unwrap()
            .contains("version not named (1)"),
        "{gemini}"
    );
    assert!(
        report["checks"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["status"] != "fail" || c["area"] != "source"),
        "{report:#}"
    );
}
