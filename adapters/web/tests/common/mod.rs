//! What the serve tests share: a store filled by real ticks of the built `agentwatch` binary, a
//! server on 127.0.0.1, and a plain HTTP client.
#![allow(dead_code)]

pub mod cdp;

use agentwatch_channels::{ChannelKind, LogChannel, Outcome, deliver};
use agentwatch_testkit::TempDir;
use agentwatch_web::{
    ChannelInfo, ConfigRefusal, Delivery, LiveConfig, Running, ServeOptions, Server, TestAlert,
};
use alert_state::{AlertEvent, EventState, Severity};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};

/// The first tick's time.
pub const T0: i64 = 1_790_000_000;

/// The `agentwatch` binary beside this test's executable (`cargo test --workspace` builds it;
/// alone: `cargo build -p agentwatch`).
pub fn agentwatch_bin() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable");
    let bin = exe
        .parent()
        .and_then(Path::parent)
        .map(|d| d.join("agentwatch"))
        .expect("target directory");
    assert!(
        bin.is_file(),
        "{} is missing: build it first (cargo build -p agentwatch)",
        bin.display()
    );
    bin
}

pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// One tick of the opencode job over the demo sessions file at `now`.
pub fn tick(dir: &Path, now: i64, extra: &[&str]) -> String {
    let out = Command::new(agentwatch_bin())
        .args(["watch", "--once", "--sessions"])
        .arg(repo_root().join("fixtures/sample.json"))
        .arg("--db")
        .arg(dir.join("agentwatch.db"))
        .arg("--config")
        .arg(dir.join("config.toml"))
        .args(["--now", &now.to_string()])
        .args(extra)
        .output()
        .expect("agentwatch runs");
    assert!(
        out.status.success(),
        "tick failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A config with a log channel (writing `alerts.jsonl`) and a disabled desktop channel, and
/// three ticks five minutes apart: the demo's looping tree is open and critical.
pub fn filled(dir: &TempDir) {
    std::fs::write(
        dir.path.join("config.toml"),
        format!(
            "[watchdog]\nlocal_llm_enabled = false\n\n[[channels]]\nname = \"log\"\ntype = \"log\"\npath = \"{}\"\nmin_severity = \"warning\"\n\n[[channels]]\nname = \"desk\"\ntype = \"desktop\"\nenabled = false\nprogram = \"/nonexistent/notify-send\"\n",
            dir.path.join("alerts.jsonl").display()
        ),
    )
    .unwrap();
    for i in 0..3 {
        tick(&dir.path, T0 + i * 300, &[]);
    }
}

/// The test alert through a real log channel writing `test-alerts.jsonl`.
#[derive(Debug)]
pub struct LogTestAlert {
    pub path: PathBuf,
}

impl TestAlert for LogTestAlert {
    fn send(
        &self,
        severity: Severity,
        channel: Option<&str>,
        now: i64,
    ) -> Result<Vec<Delivery>, String> {
        if let Some(name) = channel
            && name != "log"
        {
            return Err(format!("no channel named {name:?}"));
        }
        let event = AlertEvent {
            dedup_key: "agentwatch-test".to_owned(),
            severity,
            state: EventState::Trigger,
            title: "agentwatch test alert".to_owned(),
            summary: format!("test alert at {now}"),
            details: serde_json::json!({"test": true}),
            source: "agentwatch@test".to_owned(),
        };
        let kind = ChannelKind::Log(LogChannel {
            path: Some(self.path.clone()),
        });
        let (result, message) = match deliver(&kind, &event) {
            Ok(Outcome::Sent) => ("sent", None),
            Ok(Outcome::Warning(w)) => ("warning", Some(w)),
            Err(e) => ("failed", Some(e.to_string())),
        };
        Ok(vec![Delivery {
            channel: "log".to_owned(),
            result: result.to_owned(),
            message,
        }])
    }
}

/// Live config edits kept in memory: the keys and ranges a page shows, and what it saved
/// (the runtime's `ConfigFile` is tested with the files themselves).
#[derive(Debug, Default)]
pub struct MemoryConfig {
    pub saved: Mutex<Vec<(String, serde_json::Value)>>,
}

impl LiveConfig for MemoryConfig {
    fn show(&self) -> Result<serde_json::Value, ConfigRefusal> {
        let saved = self.saved.lock().unwrap();
        let value = |key: &str, default: serde_json::Value| {
            saved
                .iter()
                .rev()
                .find(|(k, _)| k == key)
                .map_or(default, |(_, v)| v.clone())
        };
        Ok(serde_json::json!({
            "file": "/home/u/.config/agentwatch/config.local.toml",
            "exists": !saved.is_empty(),
            "keys": [
                {"key": "watchdog.enabled", "kind": "bool", "min": null, "max": null,
                 "in_file": null, "value": value("watchdog.enabled", true.into())},
                {"key": "watchdog.detector.top_min", "kind": "count", "min": 1.0,
                 "min_exclusive": false, "max": 10000.0, "in_file": null,
                 "value": value("watchdog.detector.top_min", 12.into())},
            ],
            "detector": {"top_min": 12},
        }))
    }

    fn set(
        &self,
        key: &str,
        value: &serde_json::Value,
    ) -> Result<serde_json::Value, ConfigRefusal> {
        if value.as_u64().is_some_and(|n| n > 10_000) {
            return Err(ConfigRefusal {
                status: 400,
                field: "value",
                message: format!("{key}: must be from 1 to 10000"),
            });
        }
        self.saved
            .lock()
            .unwrap()
            .push((key.to_owned(), value.clone()));
        Ok(serde_json::json!({
            "key": key, "value": value,
            "file": "/home/u/.config/agentwatch/config.local.toml", "effective": "next tick",
        }))
    }

    fn detector(&self) -> detect_core::DetectConfig {
        detect_core::DetectConfig::default()
    }
}

/// Server options over `dir` as `filled` configured it.
pub fn options(dir: &TempDir) -> ServeOptions {
    let mut o = ServeOptions::new(dir.path.join("agentwatch.db"));
    o.listen = "127.0.0.1:0".parse().unwrap();
    o.channels = vec![
        ChannelInfo {
            name: "log".into(),
            channel_type: "log".into(),
            enabled: true,
            min_severity: "warning".into(),
            rate_limit_s: 300,
        },
        ChannelInfo {
            name: "desk".into(),
            channel_type: "desktop".into(),
            enabled: false,
            min_severity: "warning".into(),
            rate_limit_s: 300,
        },
    ];
    o.test_alert = Some(Arc::new(LogTestAlert {
        path: dir.path.join("test-alerts.jsonl"),
    }));
    o.config = Some(Arc::new(MemoryConfig::default()));
    o.clock = Arc::new(|| T0 + 900);
    o
}

pub fn start(options: ServeOptions) -> Running {
    Server::bind(options).expect("bind 127.0.0.1:0").spawn()
}

/// A response: status, content type, body.
#[derive(Debug)]
pub struct Got {
    pub status: u16,
    pub content_type: String,
    pub body: String,
}

impl Got {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.body))
    }
}

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into()
}

fn got(response: Result<ureq::http::Response<ureq::Body>, ureq::Error>) -> Got {
    let mut response = response.expect("HTTP exchange");
    let content_type = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    Got {
        status: response.status().as_u16(),
        content_type,
        body: response.body_mut().read_to_string().unwrap_or_default(),
    }
}

pub fn get(url: &str) -> Got {
    got(agent().get(url).call())
}

pub fn get_with(url: &str, headers: &[(&str, &str)]) -> Got {
    let mut req = agent().get(url);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    got(req.call())
}

/// POST `body` with `headers` (add `Content-Type` yourself).
pub fn post(url: &str, headers: &[(&str, &str)], body: &str) -> Got {
    let mut req = agent().post(url);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    got(req.send(body))
}

pub const JSON: (&str, &str) = ("Content-Type", "application/json");
