//! Installing into real files in a temporary home: backups, modes, symlinks, read-only files,
//! files that do not read, the Codex trust file, opencode's plugin, and what `status` says.

use agentwatch_hooks::Agent;
use agentwatch_hooks::install::{self, Action, ErrorKind, InstallError, Locations, Scope, Status};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

struct Home {
    _dir: tempfile::TempDir,
    root: PathBuf,
    binary: PathBuf,
}

impl Home {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let binary = root.join("bin/agentwatch");
        std::fs::create_dir_all(binary.parent().unwrap()).unwrap();
        std::fs::write(&binary, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&binary, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::create_dir_all(root.join("home")).unwrap();
        Self {
            _dir: dir,
            root,
            binary,
        }
    }

    fn loc(&self) -> Locations {
        Locations {
            home: Some(self.root.join("home")),
            ..Locations::default()
        }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.root.join("home").join(rel)
    }

    fn install(&self, agent: Agent) -> Result<install::Outcome, InstallError> {
        install::install(agent, &Scope::User, &self.loc(), &self.binary)
    }

    fn uninstall(&self, agent: Agent) -> Result<install::Outcome, InstallError> {
        install::uninstall(agent, &Scope::User, &self.loc())
    }

    fn status(&self, agent: Agent) -> Status {
        install::status(agent, &Scope::User, &self.loc()).unwrap()
    }
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap()
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o7777
}

#[test]
fn a_missing_file_is_created_and_removed_again() {
    let home = Home::new();
    for agent in Agent::ALL {
        let out = home.install(agent).unwrap();
        assert_eq!(out.changes[0].action, Action::Created, "{agent}");
        assert!(
            out.status.installed && out.status.will_run,
            "{agent}: {:?}",
            out.status
        );
        let again = home.install(agent).unwrap();
        assert!(
            again.changes.iter().all(|c| c.action == Action::Unchanged),
            "{agent}: {:?}",
            again.changes
        );
        let out = home.uninstall(agent).unwrap();
        assert!(
            out.changes.iter().all(|c| c.action == Action::Removed),
            "{agent}: {:?}",
            out.changes
        );
        assert!(!out.status.installed);
    }
    let left: Vec<_> = walk(&home.path(""));
    assert!(left.is_empty(), "nothing left behind: {left:?}");
}

/// Every file under a directory (directories themselves not listed).
fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files.extend(walk(&path));
        } else {
            files.push(path);
        }
    }
    files
}

#[test]
fn a_file_keeps_its_bytes_mode_and_a_backup() {
    let home = Home::new();
    let path = home.path(".claude/settings.json");
    let original = "{\n  // mine\n  \"model\": \"opus\"\n}\n";
    write(&path, original);
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
    let out = home.install(Agent::Claude).unwrap();
    assert_eq!(out.changes[0].action, Action::Updated);
    let backup = out.changes[0].backup.clone().unwrap();
    assert_eq!(backup, home.path(".claude/settings.json.agentwatch-backup"));
    assert_eq!(read(&backup), original);
    assert_eq!(mode(&path), 0o640, "the mode is kept");
    assert!(read(&path).contains("// mine"));
    home.uninstall(Agent::Claude).unwrap();
    assert_eq!(read(&path), original);
    assert_eq!(mode(&path), 0o640);
}

#[test]
fn what_uninstall_cannot_tell_apart_the_backup_gives_back() {
    // An empty hooks object and an empty file read as nothing of ours; only the backup says
    // they were there.
    for original in [
        "{\n  \"hooks\": {}\n}\n",
        "",
        "{}\n",
        "{\n  \"hooks\": {\"PreToolUse\": []}\n}",
    ] {
        let home = Home::new();
        let path = home.path(".gemini/settings.json");
        write(&path, original);
        home.install(Agent::Gemini).unwrap();
        assert_ne!(read(&path), original);
        home.uninstall(Agent::Gemini).unwrap();
        assert_eq!(read(&path), original, "{original:?}");
    }
}

#[test]
fn a_symlinked_file_is_changed_where_it_points() {
    let home = Home::new();
    let real = home.root.join("dotfiles/claude.json");
    write(&real, "{\"a\": 1}\n");
    let link = home.path(".claude/settings.json");
    std::fs::create_dir_all(link.parent().unwrap()).unwrap();
    std::os::unix::fs::symlink(&real, &link).unwrap();
    home.install(Agent::Claude).unwrap();
    assert!(
        std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert!(read(&real).contains("hook claude"));
    home.uninstall(Agent::Claude).unwrap();
    assert_eq!(read(&real), "{\"a\": 1}\n");
}

#[test]
fn files_that_cannot_take_the_entry_are_left_alone() {
    let cases: &[(&str, &[u8], ErrorKind, &str)] = &[
        (
            "does not read",
            b"{\n  \"a\": 1,\n}\n}",
            ErrorKind::Data,
            ":4:1: more text",
        ),
        (
            "hooks of another type",
            b"{\"hooks\": true}",
            ErrorKind::Data,
            ":1:11: `hooks` is not an object",
        ),
        (
            "not text",
            b"{\"a\": \"\xff\"}",
            ErrorKind::Data,
            "not UTF-8",
        ),
    ];
    for (what, bytes, kind, message) in cases {
        let home = Home::new();
        let path = home.path(".claude/settings.json");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, bytes).unwrap();
        let e = home.install(Agent::Claude).unwrap_err();
        assert_eq!(e.kind(), *kind, "{what}: {e}");
        let shown = e.to_string();
        assert!(
            shown.contains(&path.display().to_string()) && shown.contains(message),
            "{what}: {shown}"
        );
        assert_eq!(std::fs::read(&path).unwrap(), *bytes, "{what}: untouched");
        assert!(
            !home
                .path(".claude/settings.json.agentwatch-backup")
                .exists()
        );
        assert!(!home.status(Agent::Claude).will_run);
    }
}

#[test]
fn a_read_only_file_is_refused() {
    let home = Home::new();
    let path = home.path(".gemini/settings.json");
    write(&path, "{}\n");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o444)).unwrap();
    let e = home.install(Agent::Gemini).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Io);
    assert!(e.to_string().contains("read-only"), "{e}");
    assert_eq!(read(&path), "{}\n");
}

#[test]
fn codex_is_trusted_in_config_toml_and_forgotten_on_uninstall() {
    let home = Home::new();
    let config = home.path(".codex/config.toml");
    let original = "# my codex\nmodel = \"o3\"\n\n[projects.\"/src\"]\ntrust_level = \"trusted\"\n";
    write(&config, original);
    let out = home.install(Agent::Codex).unwrap();
    assert_eq!(out.changes.len(), 2, "{:?}", out.changes);
    assert_eq!(out.status.trusted, Some(true), "{:?}", out.status);
    assert!(out.status.will_run);
    let key = format!(
        "{}:pre_tool_use:0:0",
        home.path(".codex/hooks.json").display()
    );
    assert!(
        read(&config).contains(&format!("[hooks.state.\"{key}\"]")),
        "{}",
        read(&config)
    );
    assert!(read(&config).starts_with(original));
    home.uninstall(Agent::Codex).unwrap();
    assert_eq!(read(&config), original);
    assert!(!home.path(".codex/hooks.json").exists());
}

#[test]
fn codex_status_says_why_it_will_not_run() {
    let home = Home::new();
    home.install(Agent::Codex).unwrap();
    let config = home.path(".codex/config.toml");
    let trusted = read(&config);
    let cases = [
        ("[features]\nhooks = false\n", "`[features] hooks = false`"),
        ("", "Codex does not trust it"),
    ];
    for (extra, why) in cases {
        let text = if extra.is_empty() {
            String::new()
        } else {
            format!("{trusted}{extra}")
        };
        write(&config, &text);
        let status = home.status(Agent::Codex);
        assert!(!status.will_run, "{extra}");
        assert!(
            status.will_run_text().contains(why),
            "{}",
            status.will_run_text()
        );
    }
    // Another binary path un-trusts the old hash: installing again trusts the new one.
    write(&config, &trusted);
    let moved = home.root.join("bin2/agentwatch");
    write(&moved, "#!/bin/sh\n");
    std::fs::set_permissions(&moved, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = install::install(Agent::Codex, &Scope::User, &home.loc(), &moved).unwrap();
    assert!(out.status.will_run, "{:?}", out.status);
    assert!(!read(&config).contains(&home.binary.display().to_string()));
}

#[test]
fn status_names_a_missing_binary_and_the_agents_switches() {
    let home = Home::new();
    for agent in Agent::ALL {
        home.install(agent).unwrap();
    }
    std::fs::remove_file(&home.binary).unwrap();
    for agent in Agent::ALL {
        let status = home.status(agent);
        assert!(
            status.installed && !status.binary_exists && !status.will_run,
            "{agent}"
        );
        assert!(
            status.will_run_text().contains("is not an executable file"),
            "{agent}"
        );
    }
    let claude = home.path(".claude/settings.json");
    let text = read(&claude).replacen('{', "{\n  \"disableAllHooks\": true,", 1);
    write(&claude, &text);
    assert!(
        home.status(Agent::Claude)
            .will_run_text()
            .contains("disableAllHooks")
    );
    let gemini = home.path(".gemini/settings.json");
    let text = read(&gemini).replacen(
        '{',
        "{\"hooksConfig\": {\"disabled\": [\"agentwatch\"]},",
        1,
    );
    write(&gemini, &text);
    assert!(
        home.status(Agent::Gemini)
            .will_run_text()
            .contains("hooksConfig.disabled")
    );
}

#[test]
fn opencode_leaves_someone_elses_plugin_alone() {
    let home = Home::new();
    let path = home.path(".config/opencode/plugin/agentwatch.js");
    write(&path, "export const Mine = async () => ({});\n");
    let e = home.install(Agent::Opencode).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Config, "{e}");
    let out = home.uninstall(Agent::Opencode).unwrap();
    assert_eq!(out.changes[0].action, Action::Unchanged);
    assert!(path.exists());
}

#[test]
fn a_project_gets_its_own_files() {
    let home = Home::new();
    let project = home.root.join("work");
    std::fs::create_dir_all(&project).unwrap();
    let scope = Scope::Project(project.clone());
    let mut files = Vec::new();
    for agent in Agent::ALL {
        let out = install::install(agent, &scope, &home.loc(), &home.binary).unwrap();
        files.extend(out.changes.iter().map(|c| c.path.clone()));
    }
    let want: Vec<PathBuf> = [
        ".claude/settings.json",
        ".codex/hooks.json",
        ".gemini/settings.json",
        ".opencode/plugin/agentwatch.js",
    ]
    .iter()
    .map(|f| project.join(f))
    .collect();
    assert!(want.iter().all(|f| files.contains(f)), "{files:?}");
    assert!(
        files.contains(&home.path(".codex/config.toml")),
        "Codex trust is the user's"
    );
    let codex = install::status(Agent::Codex, &scope, &home.loc()).unwrap();
    assert_eq!(codex.trusted, Some(true));
    assert!(
        codex.will_run_text().contains("trusted project"),
        "an untrusted project's hooks do not run: {}",
        codex.will_run_text()
    );
    for agent in Agent::ALL {
        install::uninstall(agent, &scope, &home.loc()).unwrap();
    }
    assert!(walk(&project).is_empty());
    assert!(!home.path(".codex/config.toml").exists());
}
