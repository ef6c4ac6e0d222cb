//! `systemctl [--user] restart UNIT` as an argv, with a time limit.

use agentwatch_process::RunError;
use std::time::{Duration, Instant};

/// How much of the program's standard error an error keeps.
const STDERR_HEAD_CHARS: usize = 300;

/// How to run `systemctl`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Systemctl {
    /// The program and its leading arguments: `["systemctl"]`, `["sudo", "-n", "systemctl"]`.
    pub command: Vec<String>,
    /// Add `--user` (the calling user's service manager).
    pub user: bool,
    /// The whole call is killed after this long and counts as a failure.
    pub timeout: Duration,
}

/// A restart that succeeded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Restarted {
    /// The argv that ran.
    pub argv: Vec<String>,
    pub elapsed: Duration,
}

/// Why a restart did not succeed. Every variant names the command that was (or would have been)
/// run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SystemctlError {
    #[error("the systemctl command is empty")]
    EmptyCommand,
    #[error("unit name {unit:?} refused: {why}")]
    BadUnit { unit: String, why: &'static str },
    #[error("{program}: could not run: {message}")]
    Spawn { program: String, message: String },
    #[error("`{shown}` exited with {status}{stderr}")]
    Failed {
        shown: String,
        status: String,
        stderr: String,
    },
    #[error("`{shown}` did not finish within {timeout:?}; killed")]
    TimedOut { shown: String, timeout: Duration },
    #[error("`{shown}`: waiting for it failed: {message}")]
    Wait { shown: String, message: String },
}

/// A unit name `systemctl restart` may be given: not empty and not starting with `-` (which
/// would read as an option). Anything else passes: it is one argv element, and systemctl itself
/// rejects names that are not units.
pub fn check_unit_name(unit: &str) -> Result<(), SystemctlError> {
    let why = if unit.is_empty() {
        "it is empty"
    } else if unit.starts_with('-') {
        "it starts with '-' and would read as an option"
    } else {
        return Ok(());
    };
    Err(SystemctlError::BadUnit {
        unit: unit.to_owned(),
        why,
    })
}

impl Systemctl {
    /// The argv of `restart UNIT`: the command, `--user` when set, `restart`, the unit.
    pub fn restart_argv(&self, unit: &str) -> Result<Vec<String>, SystemctlError> {
        if self.command.first().is_none_or(|p| p.is_empty()) {
            return Err(SystemctlError::EmptyCommand);
        }
        check_unit_name(unit)?;
        let mut argv = self.command.clone();
        if self.user {
            argv.push("--user".to_owned());
        }
        argv.push("restart".to_owned());
        argv.push(unit.to_owned());
        Ok(argv)
    }

    /// Restarts `unit`: success is exit status 0 within the time limit.
    pub fn restart(&self, unit: &str) -> Result<Restarted, SystemctlError> {
        let argv = self.restart_argv(unit)?;
        let started = Instant::now();
        run(&argv, self.timeout)?;
        Ok(Restarted {
            argv,
            elapsed: started.elapsed(),
        })
    }
}

/// The argv as one line for messages (each element debug-quoted when it needs it).
fn shown(argv: &[String]) -> String {
    argv.iter()
        .map(|a| {
            if !a.is_empty()
                && a.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./@:=+,".contains(c))
            {
                a.clone()
            } else {
                format!("{a:?}")
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Runs `argv` (no shell) with [`agentwatch_process::run`]: success is exit status 0 within
/// `timeout`.
fn run(argv: &[String], timeout: Duration) -> Result<(), SystemctlError> {
    let Some((program, args)) = argv.split_first() else {
        return Err(SystemctlError::EmptyCommand);
    };
    let done = agentwatch_process::run(program, args, &[], timeout).map_err(|e| match e {
        RunError::NotFound(message) | RunError::Spawn(message) => SystemctlError::Spawn {
            program: program.clone(),
            message,
        },
        RunError::Wait(message) => SystemctlError::Wait {
            shown: shown(argv),
            message,
        },
        RunError::Timeout(timeout) => SystemctlError::TimedOut {
            shown: shown(argv),
            timeout,
        },
    })?;
    if done.status.success() {
        return Ok(());
    }
    let status = match done.status.code() {
        Some(code) => format!("status {code}"),
        None => "a signal".to_owned(),
    };
    let stderr = done.stderr.trim();
    let stderr = if stderr.is_empty() {
        String::new()
    } else {
        format!(
            ": {}",
            stderr.chars().take(STDERR_HEAD_CHARS).collect::<String>()
        )
    };
    Err(SystemctlError::Failed {
        shown: shown(argv),
        status,
        stderr,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentwatch_testkit::{StandIns, TempDir, stand_in};

    fn systemctl(command: &[&str], user: bool) -> Systemctl {
        Systemctl {
            command: command.iter().map(|s| (*s).to_owned()).collect(),
            user,
            timeout: Duration::from_secs(10),
        }
    }

    #[test]
    fn argv_shape() {
        let sudo = systemctl(&["sudo", "-n", "systemctl"], false);
        assert_eq!(
            sudo.restart_argv("flysim.service").unwrap(),
            ["sudo", "-n", "systemctl", "restart", "flysim.service"]
        );
        let user = systemctl(&["systemctl"], true);
        assert_eq!(
            user.restart_argv("a.service").unwrap(),
            ["systemctl", "--user", "restart", "a.service"]
        );
        assert_eq!(
            systemctl(&[], false).restart_argv("a"),
            Err(SystemctlError::EmptyCommand)
        );
        for bad in ["", "-H", "--host=evil"] {
            let err = user.restart_argv(bad).unwrap_err();
            assert!(matches!(err, SystemctlError::BadUnit { .. }), "{bad:?}");
        }
    }

    #[test]
    fn hostile_unit_names_stay_one_argument() {
        let dir = TempDir::new("aw-systemctl-argv");
        let stand_ins = StandIns::new(&dir.path.join("bin"));
        let program = stand_in(&stand_ins, "systemctl", "", 0);
        let marker = dir.path.join("pwned");
        let unit = format!("x.service; touch {}\n'\"$(touch {0})` `", marker.display());
        let ctl = Systemctl {
            command: vec![program.display().to_string()],
            user: true,
            timeout: Duration::from_secs(10),
        };
        let done = ctl.restart(&unit).unwrap();
        assert_eq!(done.argv.last(), Some(&unit));
        assert_eq!(stand_ins.calls("systemctl"), [["--user", "restart", &unit]]);
        assert!(!marker.exists(), "the unit name ran as shell code");
    }

    #[test]
    fn failure_timeout_and_missing_program() {
        let dir = TempDir::new("aw-systemctl-fail");
        let stand_ins = StandIns::new(&dir.path.join("bin"));
        let failing = stand_in(&stand_ins, "systemctl", "", 1);
        let ctl = Systemctl {
            command: vec![failing.display().to_string()],
            user: false,
            timeout: Duration::from_secs(10),
        };
        let err = ctl.restart("a.service").unwrap_err();
        assert!(
            matches!(&err, SystemctlError::Failed { status, .. } if status == "status 1"),
            "{err}"
        );

        let slow = dir.path.join("slow");
        std::fs::write(&slow, "#!/bin/sh\nexec sleep 30\n").unwrap();
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&slow, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let ctl = Systemctl {
            command: vec![slow.display().to_string()],
            user: false,
            timeout: Duration::from_millis(300),
        };
        let started = Instant::now();
        let err = ctl.restart("a.service").unwrap_err();
        assert!(matches!(err, SystemctlError::TimedOut { .. }), "{err}");
        assert!(started.elapsed() < Duration::from_secs(10));

        let ctl = systemctl(&["/nonexistent/agentwatch-no-such-systemctl"], false);
        let err = ctl.restart("a.service").unwrap_err();
        assert!(matches!(err, SystemctlError::Spawn { .. }), "{err}");
    }
}
