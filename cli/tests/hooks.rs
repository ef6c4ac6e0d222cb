//! `agentwatch hooks install|status|uninstall` as a user runs them (issue 47): every agent's
//! hook into a project beside what is there, then out again leaving every byte as it was; and
//! `doctor` listing the user's hooks.

use agentwatch_testkit::TempDir;
use serde_json::Value;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

struct World {
    _tmp: TempDir,
    root: PathBuf,
}

impl World {
    fn new() -> Self {
        let tmp = TempDir::new("aw-hooks");
        let root = std::fs::canonicalize(&tmp.path).unwrap();
        for dir in ["home", "claude", "codex", "gemini", "config", "project"] {
            std::fs::create_dir_all(root.join(dir)).unwrap();
        }
        Self { _tmp: tmp, root }
    }

    /// The binary with every agent's directory moved under the temporary root.
    fn agentwatch(&self, args: &[&str]) -> Output {
        let r = &self.root;
        Command::new(env!("CARGO_BIN_EXE_agentwatch"))
            .args(args)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", r.join("home"))
            .env("CLAUDE_CONFIG_DIR", r.join("claude"))
            .env("CODEX_HOME", r.join("codex"))
            .env("GEMINI_CLI_HOME", r.join("gemini"))
            .env("XDG_CONFIG_HOME", r.join("config"))
            .env("XDG_STATE_HOME", r.join("state"))
            .output()
            .unwrap()
    }

    fn ok(&self, args: &[&str]) -> String {
        let out = self.agentwatch(args);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {out:?}");
        String::from_utf8(out.stdout).unwrap()
    }

    fn shown(&self, text: &str) -> String {
        text.replace(&self.root.display().to_string(), "$TMP")
            .replace(env!("CARGO_BIN_EXE_agentwatch"), "$AGENTWATCH")
    }

    fn project(&self) -> PathBuf {
        self.root.join("project")
    }
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// Every file under `dir` with its bytes, sorted by path.
fn files(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut all = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(d) = dirs.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else {
                all.push((path.clone(), std::fs::read(&path).unwrap()));
            }
        }
    }
    all.sort();
    all
}

#[test]
fn install_all_into_a_project_then_status_then_uninstall() {
    let w = World::new();
    let project = w.project();
    let project_arg = project.to_str().unwrap();
    // What the user had: their own settings and hooks, and Codex trusting the project.
    write(
        &project.join(".claude/settings.json"),
        "{\n  // the project's\n  \"permissions\": {\"allow\": [\"Bash(ls)\"]},\n  \"hooks\": {\"PostToolUse\": [{\"matcher\": \"Edit\", \"hooks\": [{\"type\": \"command\", \"command\": \"fmt\"}]}]}\n}\n",
    );
    write(
        &project.join(".gemini/settings.json"),
        "{\n    \"hooks\": {\n        \"BeforeTool\": []\n    }\n}\n",
    );
    write(
        &w.root.join("codex/config.toml"),
        &format!("model = \"o3\"\n\n[projects.\"{project_arg}\"]\ntrust_level = \"trusted\"\n"),
    );
    let before = (files(&project), files(&w.root.join("codex")));

    let installed = w.ok(&["hooks", "install", "all", "--project", project_arg]);
    let again = w.ok(&["hooks", "install", "all", "--project", project_arg]);
    assert!(
        !again.contains("created") && !again.contains("updated"),
        "{again}"
    );
    let status = w.ok(&["hooks", "status", "--project", project_arg]);
    let json: Value = serde_json::from_str(&w.ok(&[
        "hooks",
        "status",
        "all",
        "--project",
        project_arg,
        "--json",
    ]))
    .unwrap();
    for agent in json["agents"].as_array().unwrap() {
        assert_eq!(agent["installed"], true, "{agent}");
        assert_eq!(agent["will_run"], true, "{agent}");
        assert_eq!(agent["binary"], env!("CARGO_BIN_EXE_agentwatch"), "{agent}");
    }
    assert_eq!(json["agents"][1]["trusted"], true);
    let claude = std::fs::read_to_string(project.join(".claude/settings.json")).unwrap();
    assert!(
        claude.contains("// the project's") && claude.contains("\"fmt\""),
        "{claude}"
    );

    let removed = w.ok(&["hooks", "uninstall", "all", "--project", project_arg]);
    let after = (files(&project), files(&w.root.join("codex")));
    let backups = |fs: &[(PathBuf, Vec<u8>)]| -> Vec<(PathBuf, Vec<u8>)> {
        fs.iter()
            .filter(|(p, _)| !p.to_string_lossy().ends_with(".agentwatch-backup"))
            .cloned()
            .collect()
    };
    assert_eq!(
        backups(&after.0),
        before.0,
        "the project's files are as they were"
    );
    assert_eq!(backups(&after.1), before.1, "Codex's config is as it was");
    assert!(
        files(&w.root.join("claude")).is_empty(),
        "the user's settings were not touched"
    );
    insta::assert_snapshot!(w.shown(&format!(
        "$ hooks install all --project $TMP/project\n{installed}\n$ hooks status\n{status}\n$ hooks uninstall all\n{removed}"
    )));
}

#[test]
fn a_settings_file_that_does_not_read_exits_65_and_is_left_alone() {
    let w = World::new();
    let settings = w.root.join("gemini/.gemini/settings.json");
    write(&settings, "{\"model\": {\"name\": \"x\",}\n");
    let out = w.agentwatch(&["hooks", "install", "gemini"]);
    assert_eq!(out.status.code(), Some(65), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!("{}:2:1:", settings.display())),
        "{stderr}"
    );
    assert_eq!(
        std::fs::read_to_string(&settings).unwrap(),
        "{\"model\": {\"name\": \"x\",}\n"
    );
    let out = w.agentwatch(&["hooks", "install", "nobody"]);
    assert_eq!(out.status.code(), Some(64), "{out:?}");
}

#[test]
fn doctor_lists_the_hooks_and_fails_on_one_that_cannot_run() {
    let w = World::new();
    let binary = w.root.join("bin/agentwatch");
    write(&binary, "#!/bin/sh\n");
    std::fs::set_permissions(&binary, std::fs::Permissions::from_mode(0o755)).unwrap();
    w.ok(&[
        "hooks",
        "install",
        "claude",
        "--binary",
        binary.to_str().unwrap(),
    ]);
    let doctor = |w: &World| -> Value {
        let out = w.agentwatch(&["doctor", "--json"]);
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let hook = |report: &Value, name: &str| -> Value {
        report["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["area"] == "hook" && c["name"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("no {name} hook line: {report:#}"))
    };
    let report = doctor(&w);
    assert_eq!(hook(&report, "Claude Code")["status"], "ok", "{report:#}");
    assert!(
        hook(&report, "Codex CLI")["detail"]
            .as_str()
            .unwrap()
            .contains("not installed")
    );
    std::fs::remove_file(&binary).unwrap();
    let report = doctor(&w);
    let claude = hook(&report, "Claude Code");
    assert_eq!(claude["status"], "fail", "{report:#}");
    assert_eq!(claude["code"], 69);
    assert!(
        claude["detail"]
            .as_str()
            .unwrap()
            .contains("is not an executable file")
    );
}
