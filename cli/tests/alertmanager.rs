//! The `alertmanager` channel against the real engine: Debian's `prometheus-alertmanager`,
//! started on free loopback ports with a generated configuration and a temporary storage path,
//! driven by `agentwatch opencode --once --now` ticks on the built-in sample (a looping tree).
//!
//! Tick times are the clock's (read once per tick and passed as `--now`): Alertmanager judges
//! `endsAt` against its own clock, so a resolve stamped in the future would not show resolved.
//! Nothing sleeps for time to pass; waits poll Alertmanager's API with a deadline.
//!
//! `cargo test -p agentwatch --test alertmanager -- --include-ignored --nocapture` prints
//! Alertmanager's answers (`GET /api/v2/alerts`) at each step.

use agentwatch_runtime::clock::iso8601;
use agentwatch_testkit::alertmanager::{Alertmanager, find_binary, wait_for, webhook_config};
use agentwatch_testkit::{HttpServer, Reply, TempDir};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

const ROOT: &str = "ses_demo_build";
const KEY: &str = "opencode-loop:ses_demo_build";
/// Startup, gossip and notification waits: roomy for a loaded CI machine.
const LIMIT: Duration = Duration::from_secs(30);

fn binary() -> PathBuf {
    find_binary().expect("prometheus-alertmanager not found: eval \"$(.ci/deps)\"")
}

fn clock() -> i64 {
    agentwatch_runtime::clock::now_or_clock(None)
}

/// A home with the sample (the looping tree) and its fixed version (the explorer stopped after
/// five calls, before its loop: the default profile flags it from its tenth), a config with one Alertmanager channel to `urls`, and a database path.
struct Host {
    dir: TempDir,
}

impl Host {
    fn new(urls: &[String]) -> Self {
        let dir = TempDir::new("agentwatch-am-host");
        let sample: Value = serde_json::from_str(agentwatch_runtime::SAMPLE).unwrap();
        std::fs::write(dir.path.join("looping.json"), sample.to_string()).unwrap();
        let mut fixed = sample.clone();
        for session in fixed["sessions"].as_array_mut().unwrap() {
            if session["id"] == "ses_demo_explore" {
                session["calls"].as_array_mut().unwrap().truncate(5);
            }
        }
        std::fs::write(dir.path.join("fixed.json"), fixed.to_string()).unwrap();
        std::fs::write(dir.path.join("refused.json"), refused(&sample).to_string()).unwrap();
        let urls: Vec<String> = urls.iter().map(|u| format!("{u:?}")).collect();
        std::fs::write(
            dir.path.join("config.toml"),
            format!(
                // Ticks come seconds apart on the real clock: every judgement counts.
                "[watchdog]\nlocal_llm_enabled = false\nescalate_after_ticks = 3\n\
                 escalate_min_gap_s = 0\n\
                 dashboard_base_url = \"http://devbox.example:8080/admin\"\n\n\
                 [[channels]]\nname = \"am\"\ntype = \"alertmanager\"\nurls = [{}]\n\
                 host = \"devbox\"\nrate_limit_s = 0\ntimeout_s = 2\n",
                urls.join(", ")
            ),
        )
        .unwrap();
        Self { dir }
    }

    /// One tick at the clock's time on `sessions` (`looping` or `fixed`); the `--json` report.
    fn tick(&self, sessions: &str) -> Value {
        let path = |name: &str| self.dir.path.join(name);
        let out = agentwatch(
            &self.dir.path,
            &[
                "watch",
                "--once",
                "--json",
                "--config",
                path("config.toml").to_str().unwrap(),
                "--db",
                path("agentwatch.db").to_str().unwrap(),
                "--sessions",
                path(&format!("{sessions}.json")).to_str().unwrap(),
                "--now",
                &clock().to_string(),
            ],
        );
        assert_eq!(
            out.status.code(),
            Some(0),
            "the tick must succeed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    }
}

/// The sample whose looping explorer asked for its test again twice and agentwatch's hook
/// refused it (issue 47: `"status": "blocked"`, the hook's message in `metadata.refusal`).
fn refused(sample: &Value) -> Value {
    let mut refused = sample.clone();
    for session in refused["sessions"].as_array_mut().unwrap() {
        if session["id"] != "ses_demo_explore" {
            continue;
        }
        let calls = session["calls"].as_array_mut().unwrap();
        let mut last = calls
            .iter()
            .rev()
            .find(|c| c["tool"] == "bash")
            .unwrap()
            .clone();
        last["status"] = json!("blocked");
        last["metadata"] = json!({"refusal": "agentwatch: this call was not run: …"});
        calls.extend([last.clone(), last]);
    }
    refused
}

fn agentwatch(home: &Path, args: &[&str]) -> Output {
    agentwatch_testkit::isolated_command(env!("CARGO_BIN_EXE_agentwatch"), home)
        .args(args)
        .output()
        .unwrap()
}

fn start(receiver: &HttpServer) -> Alertmanager {
    let mut am = Alertmanager::start(
        &binary(),
        &webhook_config(&format!("{}/hook", receiver.url())),
        false,
        None,
    )
    .unwrap();
    am.wait_ready(LIMIT).unwrap();
    am
}

/// A receiver for Alertmanager's notifications.
fn receiver() -> HttpServer {
    HttpServer::start(|_| Reply::json(200, &json!({})))
}

/// Alertmanager's alerts of the sample's root, trimmed to what the tests look at.
fn our_alerts(am: &Alertmanager) -> Vec<Value> {
    am.alerts()
        .unwrap_or_default()
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|a| a["labels"]["dedup_key"] == KEY)
        .map(|a| {
            json!({
                "labels": a["labels"], "annotations": a["annotations"],
                "startsAt": a["startsAt"], "endsAt": a["endsAt"], "status": a["status"],
            })
        })
        .collect()
}

/// Waits until Alertmanager holds exactly one alert of the root, with `severity`.
fn wait_for_severity(am: &Alertmanager, severity: &str) -> Value {
    wait_for(
        LIMIT,
        || match our_alerts(am).as_slice() {
            [one] if one["labels"]["severity"] == severity => Some(one.clone()),
            _ => None,
        },
        || format!("{:#}", Value::Array(our_alerts(am))),
    )
    .unwrap()
}

fn sends(report: &Value) -> Vec<(String, String)> {
    report["sends"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["channel"].as_str().unwrap_or_default().to_owned(),
                s["result"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

fn show(step: &str, value: &Value) {
    eprintln!("--- GET /api/v2/alerts, {step}:\n{value:#}");
}

/// The trigger's alert in Alertmanager: every label and annotation.
fn trigger_as_the_design_says(alert: &Value) {
    let labels = &alert["labels"];
    for (name, value) in [
        ("alertname", "AgentwatchSessionLoop"),
        ("dedup_key", KEY),
        ("root", ROOT),
        ("severity", "warning"),
        ("host", "devbox"),
        ("job", "watch"),
    ] {
        assert_eq!(labels[name], value, "label {name}: {alert:#}");
    }
    let annotations = &alert["annotations"];
    // The notification text a person reads: the session's title and project, one sentence.
    assert_eq!(
        annotations["summary"],
        "Looping: Use Decimal for cart totals in /home/user/shop"
    );
    assert!(
        annotations["description"]
            .as_str()
            .unwrap()
            .starts_with("Its subagent explore "),
        "{alert:#}"
    );
    assert_eq!(
        annotations["dashboard"],
        "http://devbox.example:8080/admin/trees/ses_demo_build"
    );
    assert!(
        annotations["event_id"]
            .as_str()
            .is_some_and(|id| id.starts_with("evt_")),
        "{alert:#}"
    );
    assert_eq!(alert["status"]["state"], "active");
}

/// A silence created through Alertmanager's API silences the alert, and a re-assertion keeps
/// it silenced; then the silence is expired.
fn silence_holds_across_reassertions(am: &Alertmanager, host: &Host) {
    // A silence created through Alertmanager's API silences it.
    let now = clock();
    let silence = am
        .silence(
            &[("dedup_key", KEY)],
            &iso8601(now - 1),
            &iso8601(now + 3600),
            "looking into it",
        )
        .unwrap();
    let silenced = wait_for(
        LIMIT,
        || match our_alerts(am).as_slice() {
            [one] if one["status"]["state"] == "suppressed" => Some(one.clone()),
            _ => None,
        },
        || format!("{:#}", Value::Array(our_alerts(am))),
    )
    .unwrap();
    show("silenced", &silenced);
    assert_eq!(silenced["status"]["silencedBy"], json!([silence]));
    // Re-asserting a silenced alert keeps it silenced.
    host.tick("looping");
    assert_eq!(
        our_alerts(am)[0]["status"]["state"],
        "suppressed",
        "still silenced"
    );
    am.expire_silence(&silence).unwrap();
}

/// The notification of the critical alert's resolve Alertmanager sent its webhook receiver.
fn resolved_notification(hook: &HttpServer) -> Value {
    wait_for(
        LIMIT,
        || {
            hook.requests().iter().find_map(|r| {
                let body = r.body_json();
                let alert = body["alerts"]
                    .as_array()?
                    .iter()
                    .find(|a| a["status"] == "resolved" && a["labels"]["severity"] == "critical")?;
                Some(alert.clone())
            })
        },
        || format!("{} notification(s)", hook.requests().len()),
    )
    .unwrap()
}

#[test]
#[ignore = "needs prometheus-alertmanager"]
fn a_loop_triggers_escalates_is_silenced_and_resolves_in_alertmanager() {
    let hook = receiver();
    let am = start(&hook);
    let host = Host::new(&[am.url()]);

    // Trigger: the looping tree's alert, with every label and annotation.
    let report = host.tick("looping");
    assert_eq!(sends(&report), [("am".to_owned(), "sent".to_owned())]);
    let alert = wait_for_severity(&am, "warning");
    show("after the trigger", &alert);
    trigger_as_the_design_says(&alert);

    // A second flagged tick re-asserts (no new notification: nothing routed, nothing sent).
    let report = host.tick("looping");
    assert!(sends(&report).is_empty(), "{report:#}");
    assert_eq!(report["alertmanager"][0]["result"], "sent");
    assert_eq!(report["alertmanager"][0]["open"], 1);

    // Escalation on the third flagged tick: critical, and the warning alert ends.
    let report = host.tick("looping");
    assert_eq!(sends(&report), [("am".to_owned(), "sent".to_owned())]);
    let alert = wait_for_severity(&am, "critical");
    show("after the escalation", &alert);

    silence_holds_across_reassertions(&am, &host);

    // The fix resolves it: Alertmanager drops it from the active alerts and notifies the
    // resolve.
    let report = host.tick("fixed");
    assert_eq!(sends(&report), [("am".to_owned(), "sent".to_owned())]);
    wait_for(
        LIMIT,
        || our_alerts(&am).is_empty().then_some(()),
        || format!("{:#}", Value::Array(our_alerts(&am))),
    )
    .unwrap();
    show("after the fix", &Value::Array(our_alerts(&am)));
    let resolved = resolved_notification(&hook);
    eprintln!(
        "--- the resolved notification Alertmanager sent its webhook receiver:\n{resolved:#}"
    );
    assert_eq!(resolved["labels"]["dedup_key"], KEY);
}

/// Issue 47: a `blocked` event (agentwatch's hook refused the loop's calls) is the same
/// alert in Alertmanager, told more: the labels stay, the `blocked` annotation says it.
#[test]
#[ignore = "needs prometheus-alertmanager"]
fn the_hooks_refusals_are_an_annotation_of_the_same_alert() {
    let hook = receiver();
    let am = start(&hook);
    let host = Host::new(&[am.url()]);
    host.tick("looping");
    let before = wait_for_severity(&am, "warning");
    let report = host.tick("refused");
    assert_eq!(sends(&report), [("am".to_owned(), "sent".to_owned())]);
    assert_eq!(report["decisions"][0]["kind"], "blocked", "{report:#}");
    let after = wait_for(
        LIMIT,
        || match our_alerts(&am).as_slice() {
            [one] if one["annotations"]["blocked"].is_string() => Some(one.clone()),
            _ => None,
        },
        || format!("{:#}", Value::Array(our_alerts(&am))),
    )
    .unwrap();
    show("after the hook refused", &after);
    assert_eq!(after["labels"], before["labels"]);
    assert_eq!(after["startsAt"], before["startsAt"]);
    assert!(
        after["annotations"]["blocked"]
            .as_str()
            .unwrap()
            .starts_with("agentwatch blocked 2 calls of `"),
        "{after:#}"
    );
}

#[test]
#[ignore = "needs prometheus-alertmanager"]
fn two_clustered_alertmanagers_both_hold_the_alert() {
    let hook = receiver();
    let config = webhook_config(&format!("{}/hook", hook.url()));
    let mut first = Alertmanager::start(&binary(), &config, true, None).unwrap();
    first.wait_ready(LIMIT).unwrap();
    let mut second = Alertmanager::start(&binary(), &config, true, Some(&first)).unwrap();
    second.wait_ready(LIMIT).unwrap();
    // The two see each other.
    wait_for(
        LIMIT,
        || {
            let status = agentwatch_testkit::alertmanager::get_json(&format!(
                "{}/api/v2/status",
                first.url()
            ))
            .ok()?;
            (status["cluster"]["peers"].as_array()?.len() == 2).then_some(())
        },
        || first.log(),
    )
    .unwrap();

    let host = Host::new(&[first.url(), second.url()]);
    let report = host.tick("looping");
    assert_eq!(sends(&report), [("am".to_owned(), "sent".to_owned())]);
    for am in [&first, &second] {
        let alert = wait_for_severity(am, "warning");
        assert_eq!(alert["labels"]["alertname"], "AgentwatchSessionLoop");
    }
    // A silence made on one peer reaches the other through the cluster.
    let now = clock();
    let id = first
        .silence(
            &[("host", "devbox")],
            &iso8601(now - 1),
            &iso8601(now + 600),
            "maintenance",
        )
        .unwrap();
    wait_for(
        LIMIT,
        || (our_alerts(&second).first()?["status"]["silencedBy"] == json!([id])).then_some(()),
        || format!("{:#}", Value::Array(our_alerts(&second))),
    )
    .unwrap();
}

#[test]
#[ignore = "needs prometheus-alertmanager"]
fn alertmanager_down_fails_the_delivery_not_the_tick_and_catches_up() {
    let hook = receiver();
    let mut am = start(&hook);
    let host = Host::new(&[am.url()]);
    assert!(
        host.tick("fixed")["alertmanager"]
            .as_array()
            .unwrap()
            .is_empty()
    );

    // Down when the loop triggers: the tick succeeds, the delivery failed with the reason.
    am.stop();
    let report = host.tick("looping");
    let send = &report["sends"][0];
    assert_eq!(
        (send["channel"].as_str(), send["result"].as_str()),
        (Some("am"), Some("failed"))
    );
    let message = send["message"].as_str().unwrap();
    assert!(message.contains("/api/v2/alerts"), "{message}");
    assert_eq!(report["alertmanager"][0]["result"], "failed");

    // Back: the next tick (no new event) posts the open alert.
    am.start_again().unwrap();
    am.wait_ready(LIMIT).unwrap();
    assert_eq!(host.tick("looping")["alertmanager"][0]["result"], "sent");
    wait_for_severity(&am, "warning");

    // Down when it resolves: the resolve stays pending and arrives after.
    am.stop();
    let report = host.tick("fixed");
    assert_eq!(sends(&report), [("am".to_owned(), "failed".to_owned())]);
    assert_eq!(report["alertmanager"][0]["ending"], 1);
    am.start_again().unwrap();
    am.wait_ready(LIMIT).unwrap();
    let report = host.tick("fixed");
    assert_eq!(report["alertmanager"][0]["result"], "sent");
    assert_eq!(report["alertmanager"][0]["ending"], 1);
    // Alertmanager keeps no alerts across a restart, so the resolve shows in its own count of
    // alerts received (resolved alerts are not listed).
    let metrics = agentwatch_testkit::alertmanager::get(&format!("{}/metrics", am.url()))
        .unwrap()
        .1;
    assert!(
        metrics.lines().any(|l| l
            .starts_with("alertmanager_alerts_received_total{status=\"resolved\"")
            && !l.ends_with(" 0")),
        "{}",
        metrics
            .lines()
            .filter(|l| l.contains("alerts_received"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert!(our_alerts(&am).is_empty());
    // Nothing left to post: the next tick posts nothing.
    assert!(
        host.tick("fixed")["alertmanager"]
            .as_array()
            .unwrap()
            .is_empty()
    );
}

/// Issue 50: what Alertmanager must be told is stored with the alert transition, in the tick's
/// transaction, not after the post. A tick killed (SIGKILL) while its post of a new alert is
/// in flight leaves the alert for the next tick's post, carrying the event's id: at least once.
/// The receiver is a stand-in (the real Alertmanager answers before a kill could land); it
/// kills the tick when the first post arrives.
#[test]
fn a_tick_killed_during_its_post_leaves_the_alert_to_the_next_post() {
    use std::sync::{Arc, Mutex};
    // The tick's pid, and whether it was killed already.
    let victim: Arc<Mutex<(Option<u32>, bool)>> = Arc::default();
    let am = {
        let victim = Arc::clone(&victim);
        HttpServer::start(move |_| {
            // The first post waits for the pid (the spawn returns it after the tick started).
            while let (None, false) = *victim.lock().unwrap() {
                std::thread::yield_now();
            }
            let mut victim = victim.lock().unwrap();
            if let (Some(pid), false) = *victim {
                let _ = std::process::Command::new("kill")
                    .args(["-KILL", &pid.to_string()])
                    .status();
                *victim = (None, true);
            }
            Reply::json(200, &json!({}))
        })
    };
    let host = Host::new(&[am.url()]);
    let path = |name: &str| host.dir.path.join(name).to_str().unwrap().to_owned();
    let now = clock().to_string();
    let args = [
        "watch",
        "--once",
        "--config",
        &path("config.toml"),
        "--db",
        &path("agentwatch.db"),
        "--sessions",
        &path("looping.json"),
        "--now",
        &now,
    ];
    let child =
        agentwatch_testkit::isolated_command(env!("CARGO_BIN_EXE_agentwatch"), &host.dir.path)
            .args(args)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
    victim.lock().unwrap().0 = Some(child.id());
    let status = child.wait_with_output().unwrap().status;
    assert_eq!(
        status.code(),
        None,
        "the tick was killed during its post: {status:?}"
    );
    let killed_post = am.requests();
    assert_eq!(killed_post.len(), 1, "the killed tick's post arrived");
    let first = &killed_post[0].body_json()[0];

    // The next tick (no new event: the alert is open already) posts the alert again.
    let report = host.tick("looping");
    assert_eq!(report["alertmanager"][0]["result"], "sent", "{report}");
    let posts = am.requests();
    let again = &posts.last().unwrap().body_json()[0];
    assert_eq!(again["labels"]["dedup_key"], KEY, "{again}");
    assert_eq!(again["labels"], first["labels"]);
    let id = again["annotations"]["event_id"].as_str().unwrap_or("");
    assert!(!id.is_empty(), "{again}");
    assert_eq!(
        again["annotations"]["event_id"],
        first["annotations"]["event_id"]
    );
}
