//! Telegram poller liveness: which `bun … telegram …` processes run, and which state dir each
//! owns (`TELEGRAM_STATE_DIR` in its environment): read from `/proc` where there is one (Linux),
//! else through the `sysinfo` crate's process listing (macOS, where agent-deck runs, and the
//! BSDs), the same facts by the system's own API ([`scan_system`]).
//!
//! A conductor's expected state dir comes from its env file: agent-deck's `config.toml`
//! `[conductors.<name>.claude] env_file` (the name is the title without `conductor-`), or an
//! `env_file` field of the session JSON. The file holds `[export ]TELEGRAM_STATE_DIR=…`.

use agentwatch_systemd::env_value;
use std::path::{Path, PathBuf};

/// The channel prefix of the Telegram plugin.
pub const TELEGRAM_CHANNEL_PREFIX: &str = "plugin:telegram@";

/// One Telegram poller process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Poller {
    pub pid: u32,
    /// `TELEGRAM_STATE_DIR` of its environment; `None` when unreadable (another user's process).
    pub state_dir: Option<String>,
}

/// A command line of a Telegram poller: `bun` and, after it, `telegram` (agent-deck's
/// `pgrep -af 'bun.*telegram'`).
pub fn is_telegram_poller(cmdline: &str) -> bool {
    let lower = cmdline.to_ascii_lowercase();
    lower
        .find("bun")
        .is_some_and(|at| lower[at + 3..].contains("telegram"))
}

/// Every Telegram poller of this machine: [`scan`] of `/proc` where it is mounted, else
/// [`scan_portable`].
pub fn scan_system() -> Vec<Poller> {
    let proc_root = Path::new("/proc");
    if proc_root.join("self").is_dir() {
        scan(proc_root)
    } else {
        scan_portable()
    }
}

/// Every Telegram poller, through `sysinfo`'s process listing (`sysctl` on macOS and the BSDs,
/// `/proc` on Linux): each process's command line and environment. A process whose
/// environment cannot be read (another user's) has no state dir, as with `/proc`.
pub fn scan_portable() -> Vec<Poller> {
    use sysinfo::{ProcessRefreshKind, ProcessesToUpdate, System, UpdateKind};
    let mut system = System::new();
    system.refresh_processes_specifics(
        ProcessesToUpdate::All,
        true,
        ProcessRefreshKind::nothing()
            .with_cmd(UpdateKind::Always)
            .with_environ(UpdateKind::Always),
    );
    let mut found: Vec<Poller> = system
        .processes()
        .iter()
        .filter_map(|(pid, process)| {
            let cmdline = process
                .cmd()
                .iter()
                .map(|arg| arg.to_string_lossy())
                .collect::<Vec<_>>()
                .join(" ");
            if !is_telegram_poller(&cmdline) {
                return None;
            }
            let state_dir = process.environ().iter().find_map(|var| {
                var.to_string_lossy()
                    .strip_prefix("TELEGRAM_STATE_DIR=")
                    .map(str::to_owned)
            });
            Some(Poller {
                pid: pid.as_u32(),
                state_dir,
            })
        })
        .collect();
    found.sort_by_key(|p| p.pid);
    found
}

/// Every Telegram poller under `proc_root` (normally `/proc`).
pub fn scan(proc_root: &Path) -> Vec<Poller> {
    let Ok(entries) = std::fs::read_dir(proc_root) else {
        return Vec::new();
    };
    let mut found: Vec<Poller> = entries
        .flatten()
        .filter_map(|entry| {
            let pid: u32 = entry.file_name().to_str()?.parse().ok()?;
            let cmdline = std::fs::read(entry.path().join("cmdline")).ok()?;
            let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            if !is_telegram_poller(&cmdline) {
                return None;
            }
            let state_dir = std::fs::read(entry.path().join("environ"))
                .ok()
                .and_then(|environ| {
                    environ
                        .split(|b| *b == 0)
                        .find_map(|var| var.strip_prefix(b"TELEGRAM_STATE_DIR="))
                        .map(|dir| String::from_utf8_lossy(dir).into_owned())
                });
            Some(Poller { pid, state_dir })
        })
        .collect();
    found.sort_by_key(|p| p.pid);
    found
}

fn normalise(dir: &str) -> &str {
    let trimmed = dir.trim().trim_end_matches('/');
    if trimmed.is_empty() {
        dir.trim()
    } else {
        trimmed
    }
}

/// How many pollers own `state_dir` (trailing slashes ignored).
pub fn owning(pollers: &[Poller], state_dir: &str) -> usize {
    let want = normalise(state_dir);
    pollers
        .iter()
        .filter(|p| p.state_dir.as_deref().map(normalise) == Some(want))
        .count()
}

/// `TELEGRAM_STATE_DIR` from an env file's text (agentwatch-systemd's [`env_value`]: `export`,
/// quotes and comments as in an `EnvironmentFile=`), `~/` expanded with `home`.
pub fn state_dir_from_env_file(text: &str, home: Option<&Path>) -> Option<String> {
    let value = env_value(text, "TELEGRAM_STATE_DIR")?;
    Some(expand_home(&value, home).display().to_string())
}

/// `~/x` under `home`; anything else as it is.
pub fn expand_home(path: &str, home: Option<&Path>) -> PathBuf {
    match (path.strip_prefix("~/"), home) {
        (Some(rest), Some(home)) => home.join(rest),
        _ => PathBuf::from(path),
    }
}

/// The conductor's env file named by agent-deck's `config.toml`:
/// `[conductors.<name>.claude] env_file`, else `[conductors.<name>] env_file`.
pub fn conductor_env_file(config_toml: &str, conductor: &str) -> Option<String> {
    let table: toml::Table = toml::from_str(config_toml).ok()?;
    let entry = table.get("conductors")?.get(conductor)?;
    entry
        .get("claude")
        .and_then(|c| c.get("env_file"))
        .or_else(|| entry.get("env_file"))
        .and_then(toml::Value::as_str)
        .map(str::to_owned)
}

/// The conductor name of a session title: `conductor-travel` is `travel`.
pub fn conductor_name(title: &str) -> &str {
    title.strip_prefix("conductor-").unwrap_or(title)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn poller_command_lines() {
        assert!(is_telegram_poller(
            "bun run --cwd /home/u/.claude/plugins/cache/x/telegram/0.0.1 --silent start"
        ));
        assert!(!is_telegram_poller("telegram-desktop"));
        assert!(!is_telegram_poller("telegram bun"));
        assert!(!is_telegram_poller("bun run dev"));
    }

    #[test]
    fn env_files_and_config() {
        let home = Path::new("/home/u");
        for (text, want) in [
            ("TELEGRAM_STATE_DIR=/s/a\n", Some("/s/a")),
            ("# x\nexport TELEGRAM_STATE_DIR=\"/s/b\"\n", Some("/s/b")),
            ("TELEGRAM_STATE_DIR='~/s/c'", Some("/home/u/s/c")),
            ("OTHER=1\nTELEGRAM_STATE_DIR=\n", None),
            ("", None),
        ] {
            assert_eq!(
                state_dir_from_env_file(text, Some(home)).as_deref(),
                want,
                "{text:?}"
            );
        }
        let config = "[conductors.travel.claude]\nenv_file = \"~/.agent-deck/travel.env\"\n[conductors.ops]\nenv_file = \"/e/ops.env\"\n";
        assert_eq!(
            conductor_env_file(config, "travel").as_deref(),
            Some("~/.agent-deck/travel.env")
        );
        assert_eq!(
            conductor_env_file(config, "ops").as_deref(),
            Some("/e/ops.env")
        );
        assert_eq!(conductor_env_file(config, "nope"), None);
        assert_eq!(conductor_env_file("not toml [", "travel"), None);
        assert_eq!(conductor_name("conductor-travel"), "travel");
    }

    /// A real process with `bun … telegram` in its command line and a state dir in its
    /// environment, found by the portable listing (the one macOS uses) as `/proc` finds it.
    #[test]
    fn the_portable_listing_finds_a_poller_and_its_state_dir() {
        use std::io::BufRead;
        let dir = format!("/tmp/aw-portable-poller-{}", std::process::id());
        let mut child = std::process::Command::new("sh")
            // Waits for its standard input to close: no process outlives the test.
            .args(["-c", "echo ready; read line", "bun", "run", "telegram"])
            .env("TELEGRAM_STATE_DIR", &dir)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // Once it printed, the shell runs with its final command line.
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let pid = child.id();
        let portable = scan_portable();
        let from_proc = scan(Path::new("/proc"));
        drop(child.stdin.take());
        let _ = child.wait();
        let mine = |found: &[Poller]| found.iter().find(|p| p.pid == pid).cloned();
        let want = Poller {
            pid,
            state_dir: Some(dir.clone()),
        };
        assert_eq!(mine(&portable), Some(want.clone()), "{portable:?}");
        assert_eq!(mine(&from_proc), Some(want));
        assert_eq!(owning(&portable, &dir), 1);
    }

    #[test]
    fn owners_are_counted_by_state_dir() {
        let pollers = [
            Poller {
                pid: 1,
                state_dir: Some("/s/a/".into()),
            },
            Poller {
                pid: 2,
                state_dir: Some("/s/a".into()),
            },
            Poller {
                pid: 3,
                state_dir: None,
            },
        ];
        assert_eq!(owning(&pollers, "/s/a"), 2);
        assert_eq!(owning(&pollers, "/s/b"), 0);
    }
}
