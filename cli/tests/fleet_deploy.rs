//! The fleet files under `deploy/` against the real tools: the Prometheus rules and their unit
//! tests through `promtool`, the Alertmanager configuration through `amtool` and through
//! Alertmanager itself (routes and the inhibition rule, with agentwatch posting a loop), and
//! `docs/fleet.md` showing the files as they are.

use agentwatch_testkit::TempDir;
use agentwatch_testkit::alertmanager::{
    Alertmanager, find_binary, find_on_path, request, wait_for,
};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn deploy(path: &str) -> PathBuf {
    workspace().join("deploy").join(path)
}

/// Runs `tool args…` in `dir`; panics with its output unless it exits 0.
fn run_ok(tool: &str, dir: &Path, args: &[&str]) -> String {
    let bin =
        find_on_path(&[tool]).unwrap_or_else(|| panic!("{tool} not found: eval \"$(.ci/deps)\""));
    let out = Command::new(bin)
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{tool} {args:?}: {text}");
    text
}

#[test]
#[ignore = "needs promtool"]
fn the_rules_pass_promtool_check_and_their_unit_tests() {
    let dir = deploy("prometheus");
    let checked = run_ok(
        "promtool",
        &dir,
        &["check", "rules", "agentwatch.rules.yml"],
    );
    assert!(checked.contains("SUCCESS: 4 rules found"), "{checked}");
    run_ok(
        "promtool",
        &dir,
        &["test", "rules", "agentwatch.rules.test.yml"],
    );
    run_ok(
        "promtool",
        &dir,
        &["check", "config", "--syntax-only", "prometheus.yml"],
    );
}

#[test]
#[ignore = "needs amtool"]
fn the_alertmanager_config_passes_amtool() {
    let text = run_ok(
        "amtool",
        &deploy("alertmanager"),
        &["check-config", "alertmanager.yml"],
    );
    assert!(text.contains("1 inhibit rules"), "{text}");
}

#[test]
fn docs_fleet_shows_the_shipped_files_as_they_are() {
    let doc = std::fs::read_to_string(workspace().join("docs/fleet.md")).unwrap();
    for file in ["alertmanager/alertmanager.yml", "prometheus/prometheus.yml"] {
        let text = std::fs::read_to_string(deploy(file)).unwrap();
        assert!(
            doc.contains(&text),
            "docs/fleet.md does not show deploy/{file} as it is"
        );
    }
}

/// Posts alerts to Alertmanager's API as Prometheus does.
fn post_alerts(am: &Alertmanager, alerts: &Value) {
    let (status, body) = request(
        "POST",
        &format!("{}/api/v2/alerts", am.url()),
        Some(&alerts.to_string()),
    )
    .unwrap();
    assert_eq!(status, 200, "{body}");
}

#[test]
#[ignore = "needs prometheus-alertmanager"]
fn the_shipped_config_routes_loops_and_a_dead_watchdog_inhibits_them() {
    let bin = find_binary().expect("prometheus-alertmanager not found: eval \"$(.ci/deps)\"");
    let config = std::fs::read_to_string(deploy("alertmanager/alertmanager.yml")).unwrap();
    let mut am = Alertmanager::start(&bin, &config, false, None).unwrap();
    am.wait_ready(Duration::from_secs(30)).unwrap();

    // The looping tree's alert from agentwatch on host devbox.
    let home = TempDir::new("agentwatch-fleet-deploy");
    let cfg = home.path.join("config.toml");
    std::fs::write(
        &cfg,
        format!(
            "[watchdog]\nlocal_llm_enabled = false\n\n[[channels]]\nname = \"am\"\n\
             type = \"alertmanager\"\nurls = [\"{}\"]\nhost = \"devbox\"\n",
            am.url()
        ),
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_agentwatch"))
        .args(["watch", "--once", "--demo", "--config"])
        .arg(&cfg)
        .arg("--db")
        .arg(home.path.join("agentwatch.db"))
        .env("HOME", &home.path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let loop_alert = || -> Option<Value> {
        am.alerts()
            .ok()?
            .as_array()?
            .iter()
            .find(|a| a["labels"]["alertname"] == "AgentwatchSessionLoop")
            .cloned()
    };
    let alert = wait_for(Duration::from_secs(30), loop_alert, || am.log()).unwrap();
    assert_eq!(
        alert["receivers"],
        json!([{"name": "team-chat"}]),
        "{alert:#}"
    );
    assert_eq!(alert["status"]["state"], "active");

    // Prometheus says devbox's opencode watchdog stopped ticking: the loop alert is inhibited.
    let now = agentwatch_runtime::clock::now_or_clock(None);
    post_alerts(
        &am,
        &json!([{
            "labels": {"alertname": "AgentwatchWatchdogDown", "host": "devbox", "job": "watch",
                       "severity": "critical", "instance": "devbox:8080"},
            "annotations": {"summary": "agentwatch opencode on devbox stopped ticking"},
            "startsAt": agentwatch_runtime::clock::iso8601(now),
        }]),
    );
    let inhibited = wait_for(
        Duration::from_secs(30),
        || loop_alert().filter(|a| a["status"]["state"] == "suppressed"),
        || format!("{:#}", loop_alert().unwrap_or_default()),
    )
    .unwrap();
    assert_eq!(
        inhibited["status"]["inhibitedBy"].as_array().unwrap().len(),
        1
    );
    let down = am
        .alerts()
        .unwrap()
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["labels"]["alertname"] == "AgentwatchWatchdogDown")
        .cloned()
        .unwrap();
    assert_eq!(down["receivers"], json!([{"name": "oncall-pager"}]));
    assert_eq!(down["status"]["state"], "active");
}
