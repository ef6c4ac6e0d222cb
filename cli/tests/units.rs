//! The shipped systemd user units pass `systemd-analyze --user verify` (issue 13): no man page
//! that is not installed, no `network-online.target` (it does nothing for a user manager).

use agentwatch_testkit::TempDir;
use std::process::Command;

#[test]
#[ignore = "needs systemd-analyze"]
fn systemd_analyze_verify_accepts_every_unit() {
    let tmp = TempDir::new("aw-units");
    // The units run %h/.cargo/bin/agentwatch: verify checks that the program exists.
    let bin = tmp.path.join("home/.cargo/bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::copy(env!("CARGO_BIN_EXE_agentwatch"), bin.join("agentwatch")).unwrap();
    let runtime = tmp.path.join("run");
    std::fs::create_dir_all(&runtime).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&runtime, std::fs::Permissions::from_mode(0o700)).unwrap();
    let deploy = concat!(env!("CARGO_MANIFEST_DIR"), "/../deploy");
    let units: Vec<String> = std::fs::read_dir(deploy)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.extension()
                .is_some_and(|x| x == "service" || x == "timer")
        })
        .map(|p| p.display().to_string())
        .collect();
    assert!(units.len() >= 9, "{units:?}");
    let out = Command::new("systemd-analyze")
        .args(["--user", "verify"])
        .args(&units)
        .env("HOME", tmp.path.join("home"))
        .env("XDG_RUNTIME_DIR", &runtime)
        .output()
        .expect("systemd-analyze is installed (systemd)");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.trim().is_empty(), "verify complained:\n{stderr}");
    for unit in &units {
        let text = std::fs::read_to_string(unit).unwrap();
        assert!(!text.contains("network-online.target"), "{unit}");
        assert!(!text.contains("Documentation=man:"), "{unit}");
    }
}

/// The crontab for systems without systemd (`deploy/crontab`): each line is five time fields
/// and one `--once` tick of a job at its systemd timer's cadence, and the job exists.
#[test]
fn the_crontab_runs_each_job_once_at_its_timers_cadence() {
    let deploy = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy");
    let crontab = std::fs::read_to_string(deploy.join("crontab")).unwrap();
    let mut jobs = Vec::new();
    for line in crontab
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
    {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let (schedule, command) = fields.split_at(5);
        assert_eq!(
            command[..3],
            ["$HOME/.cargo/bin/agentwatch", command[1], "--once"],
            "{line}"
        );
        let job = command[1];
        let timer = if job == "deck" { "deck-once" } else { job };
        let timer = std::fs::read_to_string(deploy.join(format!("agentwatch-{timer}.timer")))
            .unwrap_or_else(|e| panic!("{job}: no timer ({e})"));
        let minutes = if timer.contains("OnUnitActiveSec=5min") {
            "*/5"
        } else {
            "*"
        };
        assert!(
            timer.contains("OnUnitActiveSec=1min") || timer.contains("OnUnitActiveSec=5min"),
            "{job}: {timer}"
        );
        assert_eq!(schedule, [minutes, "*", "*", "*", "*"], "{line}");
        let help = Command::new(env!("CARGO_BIN_EXE_agentwatch"))
            .args([job, "--help"])
            .output()
            .unwrap();
        assert!(help.status.success(), "`agentwatch {job}` does not exist");
        jobs.push(job);
    }
    assert_eq!(jobs, ["watch", "deck", "recover"]);
}
