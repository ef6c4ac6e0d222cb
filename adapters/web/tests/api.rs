//! The API over real HTTP on 127.0.0.1, against a store filled by real ticks of the binary.

mod common;

use agentwatch_store::Store;
use agentwatch_testkit::TempDir;
use agentwatch_web::{ServeOptions, Server, WebError};
use common::*;

fn store_snapshot(dir: &TempDir) -> (Vec<agentwatch_store::ChannelSetting>, usize, String) {
    let store = Store::open_read_only(&dir.path.join("agentwatch.db")).unwrap();
    let settings = store.channel_settings().unwrap();
    let alerts = store.alerts(true).unwrap().len();
    let overlay = std::fs::read_to_string(dir.path.join("config.local.toml")).unwrap_or_default();
    (settings, alerts, overlay)
}

#[test]
fn seed_endpoints_answer_from_the_store() {
    let dir = TempDir::new("aw-web-api");
    filled(&dir);
    let server = start(options(&dir));
    let url = server.url();

    let loops = get(&format!("{url}/api/watchdog/loops"));
    assert_eq!(loops.status, 200);
    assert!(loops.content_type.starts_with("application/json"));
    let loops = loops.json();
    let rows = loops["loops"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "{loops}");
    assert_eq!(rows[0]["dedup_key"], "opencode-loop:ses_demo_build");
    assert_eq!(rows[0]["severity"], "critical");
    assert_eq!(rows[0]["state"], "open");
    assert_eq!(rows[0]["opened_at"], T0);
    assert_eq!(rows[0]["tree_url"], "/trees/ses_demo_build");

    let status = get(&format!("{url}/api/watchdog/status")).json();
    assert_eq!(status["last_tick"]["ticked_at"], T0 + 600);
    assert_eq!(status["last_tick"]["outcome"], "flagged");
    assert_eq!(status["sessions_seen"], 3);
    assert_eq!(status["verdicts"]["total"], 3);
    assert_eq!(status["verdicts"]["flagged"], 1);
    assert_eq!(status["open_alerts"], 1);

    let channels = get(&format!("{url}/api/watchdog/channels")).json();
    let names: Vec<_> = channels["channels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["name"].as_str().unwrap(), c["enabled"].as_bool().unwrap()))
        .collect();
    assert_eq!(names, [("log", true), ("desk", false)]);
    assert!(
        !channels.to_string().contains("alerts.jsonl"),
        "a channel's target reached the browser: {channels}"
    );

    let tree = get(&format!("{url}/api/watchdog/trees/ses_demo_build")).json();
    let ticks = tree["ticks"].as_array().unwrap();
    assert_eq!(ticks.len(), 3);
    assert!(ticks.iter().all(|t| t["flagged"] == true));
    let explore = ticks[2]["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["verdict"]["session_id"] == "ses_demo_explore")
        .unwrap();
    // The default profile: the reads of money.py are ranges of their own, the tests run 11
    // times are the top target; the same calls and results fire `repeat`.
    assert_eq!(explore["verdict"]["top"], 11);
    assert_eq!(
        explore["verdict"]["signals"],
        serde_json::json!(["top", "coverage", "reread", "repeat"])
    );
    assert_eq!(tree["thresholds"]["top_min"], 12);
    assert_eq!(tree["alert"]["severity"], "critical");

    let quiet = get(&format!("{url}/api/watchdog/trees/ses_demo_review")).json();
    assert!(
        quiet["ticks"]
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t["flagged"] == false)
    );
    assert!(quiet["alert"].is_null());

    let models = get(&format!("{url}/api/watchdog/models")).json();
    let total: i64 = models["models"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["verdicts"].as_i64().unwrap())
        .sum();
    assert_eq!(total, 9);

    let deck = get(&format!("{url}/api/deck")).json();
    assert_eq!(deck["sessions"], serde_json::json!([]));
    let recover = get(&format!("{url}/api/recover")).json();
    assert_eq!(recover["phase"], "idle");

    let bad = get(&format!("{url}/api/watchdog/trees/x?limit=0"));
    assert_eq!(
        (bad.status, bad.json()["field"].as_str()),
        (400, Some("limit"))
    );
    assert_eq!(get(&format!("{url}/nope")).status, 404);
}

#[test]
fn channel_upsert_and_test_alert_go_through() {
    let dir = TempDir::new("aw-web-chan");
    filled(&dir);
    let server = start(options(&dir));
    let url = server.url();
    let origin = ("Origin", url.as_str());

    let r = post(
        &format!("{url}/api/watchdog/channels"),
        &[JSON, origin],
        r#"{"name":"log","enabled":false}"#,
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let r = post(
        &format!("{url}/api/watchdog/channels"),
        &[JSON],
        r#"{"name":"desk","min_severity":"critical"}"#,
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let (settings, _, _) = store_snapshot(&dir);
    let got: Vec<_> = settings
        .iter()
        .map(|s| {
            (
                s.name.as_str(),
                s.enabled,
                s.min_severity.as_str(),
                s.updated_at,
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            ("desk", false, "critical", T0 + 900),
            ("log", false, "warning", T0 + 900)
        ]
    );
    let channels = get(&format!("{url}/api/watchdog/channels")).json();
    assert_eq!(channels["channels"][0]["enabled"], false);

    // The next tick uses the stored settings: the escalation of a new alert reaches no channel.
    std::fs::remove_file(dir.path.join("alerts.jsonl")).ok();
    tick(&dir.path, T0 + 900, &[]);
    assert!(
        !dir.path.join("alerts.jsonl").exists(),
        "a disabled channel was delivered to"
    );

    let r = post(
        &format!("{url}/api/watchdog/test-alert"),
        &[JSON, origin],
        r#"{"severity":"critical","channel_name":"log"}"#,
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["sends"][0]["result"], "sent");
    let sent = std::fs::read_to_string(dir.path.join("test-alerts.jsonl")).unwrap();
    assert!(sent.contains("\"severity\":\"critical\""), "{sent}");
}

/// name, URL, headers, body, expected status, expected field.
type Refusal<'a> = (
    &'a str,
    &'a str,
    &'a [(&'a str, &'a str)],
    &'a str,
    u16,
    Option<&'a str>,
);

#[test]
fn refused_posts_leave_store_and_config_unchanged() {
    let dir = TempDir::new("aw-web-refuse");
    filled(&dir);
    let server = start(options(&dir));
    let url = server.url();
    let before = store_snapshot(&dir);
    let chan = format!("{url}/api/watchdog/channels");
    let good = r#"{"name":"log","enabled":false}"#;
    let cases: &[Refusal<'_>] = &[
        (
            "cross-origin",
            &chan,
            &[JSON, ("Origin", "http://evil.example")],
            good,
            403,
            None,
        ),
        (
            "cross-site fetch",
            &chan,
            &[JSON, ("Sec-Fetch-Site", "cross-site")],
            good,
            403,
            None,
        ),
        (
            "null origin",
            &chan,
            &[JSON, ("Origin", "null")],
            good,
            403,
            None,
        ),
        (
            "form post",
            &chan,
            &[("Content-Type", "application/x-www-form-urlencoded")],
            "name=log&enabled=false",
            415,
            None,
        ),
        (
            "malformed body",
            &chan,
            &[JSON],
            "{\"name\":",
            400,
            Some("body"),
        ),
        ("not an object", &chan, &[JSON], "[1]", 400, Some("body")),
        (
            "unknown field",
            &chan,
            &[JSON],
            r#"{"name":"log","url":"http://x"}"#,
            400,
            Some("url"),
        ),
        (
            "unknown channel",
            &chan,
            &[JSON],
            r#"{"name":"pager","enabled":true}"#,
            400,
            Some("name"),
        ),
        (
            "enabled not bool",
            &chan,
            &[JSON],
            r#"{"name":"log","enabled":"no"}"#,
            400,
            Some("enabled"),
        ),
        (
            "bad severity",
            &chan,
            &[JSON],
            r#"{"name":"log","min_severity":"loud"}"#,
            400,
            Some("min_severity"),
        ),
        (
            "nothing to set",
            &chan,
            &[JSON],
            r#"{"name":"log"}"#,
            400,
            Some("enabled"),
        ),
        (
            "test alert bad severity",
            &format!("{url}/api/watchdog/test-alert"),
            &[JSON],
            r#"{"severity":"loud"}"#,
            400,
            Some("severity"),
        ),
        (
            "test alert unknown channel",
            &format!("{url}/api/watchdog/test-alert"),
            &[JSON],
            r#"{"channel_name":"pager"}"#,
            400,
            Some("channel_name"),
        ),
    ];
    for (name, target, headers, body, status, field) in cases {
        let r = post(target, headers, body);
        assert_eq!(r.status, *status, "{name}: {}", r.body);
        assert_eq!(r.json()["field"].as_str(), *field, "{name}: {}", r.body);
        assert!(r.json()["error"].is_string(), "{name}");
        assert_eq!(
            store_snapshot(&dir),
            before,
            "{name}: the store or config changed"
        );
    }
    assert!(!dir.path.join("test-alerts.jsonl").exists());
    // A page on another site reaching us through DNS rebinding.
    let r = get_with(
        &format!("{url}/api/watchdog/loops"),
        &[("Host", "evil.example:8080")],
    );
    assert_eq!(r.status, 403);
    // No CORS header, ever.
    let r = get_with(
        &format!("{url}/api/watchdog/loops"),
        &[("Origin", "http://evil.example")],
    );
    assert!(!r.body.is_empty());
}

/// Issue 38: with a token set the Host check still applies (DNS rebinding read the loops and
/// the config from a foreign page), and no CORS header lets another origin read an answer.
#[test]
fn the_host_check_applies_with_a_token_too() {
    let dir = TempDir::new("aw-web-host");
    filled(&dir);
    let mut o = options(&dir);
    o.token = Some("s3cret-token".into());
    o.allowed_hosts = vec!["watch.lan".into()];
    let server = start(o);
    let url = server.url();
    for path in [
        "/api/watchdog/loops",
        "/admin/api/config",
        "/metrics",
        "/controls.html",
    ] {
        let r = get_with(&format!("{url}{path}"), &[("Host", "evil.example:8080")]);
        assert_eq!(r.status, 403, "{path}: {}", r.body);
        assert!(!r.body.contains("ses_demo"), "{path}");
    }
    for host in ["127.0.0.1:9", "localhost", "watch.lan:8080"] {
        let r = get_with(&format!("{url}/api/watchdog/loops"), &[("Host", host)]);
        assert_eq!(r.status, 200, "{host}");
    }
}

/// Issue 38: beyond loopback every request needs the token, GET included, as a bearer token or
/// as the password of Basic credentials (what a browser's prompt sends).
#[test]
fn beyond_loopback_every_request_needs_the_token() {
    let dir = TempDir::new("aw-web-beyond");
    filled(&dir);
    let mut o = options(&dir);
    o.listen = "0.0.0.0:0".parse().unwrap();
    o.token = Some("s3cret-token".into());
    let server = start(o);
    let url = format!("http://127.0.0.1:{}", server.local_addr().port());
    for path in [
        "/",
        "/api/watchdog/loops",
        "/metrics",
        "/trees/ses_demo_build",
        "/assets/app.js",
    ] {
        let r = get(&format!("{url}{path}"));
        assert_eq!(r.status, 401, "{path}");
        assert!(!r.body.contains("ses_demo"), "{path}");
        let r = get_with(&format!("{url}{path}"), &[("Authorization", "Bearer nope")]);
        assert_eq!(r.status, 401, "{path}");
        let r = get_with(
            &format!("{url}{path}"),
            &[("Authorization", "Bearer s3cret-token")],
        );
        assert_eq!(r.status, 200, "{path}");
    }
    // "anyone:s3cret-token"
    let r = get_with(
        &format!("{url}/api/watchdog/loops"),
        &[("Authorization", "Basic YW55b25lOnMzY3JldC10b2tlbg==")],
    );
    assert_eq!(r.status, 200);
    assert!(r.body.contains("ses_demo_build"));
}

/// Issue 38: a channel's name is a metric label; quotes, backslashes and newlines in it are
/// escaped, so the scrape stays valid.
#[test]
fn metric_labels_are_escaped() {
    let dir = TempDir::new("aw-web-labels");
    let db = dir.path.join("agentwatch.db");
    let mut store = Store::open(&db).unwrap();
    use agentwatch_store::{EventKind, JobEvent};
    store
        .record_events(&[JobEvent {
            at: T0,
            job: "watch".into(),
            kind: EventKind::Delivery,
            name: "ops \"east\" \\ log\nnext".into(),
            result: "failed".into(),
            duration_ms: None,
        }])
        .unwrap();
    drop(store);
    let server = start(ServeOptions {
        listen: "127.0.0.1:0".parse().unwrap(),
        ..ServeOptions::new(db)
    });
    for accept in ["text/plain", "application/openmetrics-text;version=1.0.0"] {
        let body = get_with(&format!("{}/metrics", server.url()), &[("Accept", accept)]).body;
        let line = body
            .lines()
            .find(|l| l.starts_with("agentwatch_deliveries_total{"))
            .unwrap_or_else(|| panic!("no delivery line in\n{body}"));
        assert_eq!(
            line,
            "agentwatch_deliveries_total{job=\"watch\",channel=\"ops \\\"east\\\" \\\\ log\\nnext\",result=\"failed\"} 1",
            "{accept}"
        );
    }
}

#[test]
fn token_is_required_on_every_post_when_set() {
    let dir = TempDir::new("aw-web-token");
    filled(&dir);
    let mut o = options(&dir);
    o.token = Some("s3cret-token".into());
    let server = start(o);
    let url = server.url();
    let before = store_snapshot(&dir);
    let body = r#"{"name":"log","enabled":false}"#;
    for (name, auth) in [
        ("no token", None),
        ("wrong token", Some("Bearer nope")),
        ("not bearer", Some("s3cret-token")),
    ] {
        let mut headers = vec![JSON];
        if let Some(a) = auth {
            headers.push(("Authorization", a));
        }
        let r = post(&format!("{url}/api/watchdog/channels"), &headers, body);
        assert_eq!(r.status, 401, "{name}");
        assert!(!r.body.contains("s3cret"), "{name}: the token was echoed");
        assert_eq!(store_snapshot(&dir), before, "{name}");
    }
    let r = post(
        &format!("{url}/api/watchdog/channels"),
        &[JSON, ("Authorization", "Bearer s3cret-token")],
        body,
    );
    assert_eq!(r.status, 200, "{}", r.body);
}

#[test]
fn metrics_count_what_the_store_holds() {
    let dir = TempDir::new("aw-web-metrics");
    filled(&dir);
    let server = start(options(&dir));
    let m = get_with(
        &format!("{}/metrics", server.url()),
        &[(
            "Accept",
            "application/openmetrics-text;version=1.0.0,text/plain;q=0.5",
        )],
    );
    assert_eq!(m.status, 200);
    assert!(m.content_type.starts_with("application/openmetrics-text"));
    let classic = get(&format!("{}/metrics", server.url()));
    assert!(
        classic
            .content_type
            .starts_with("text/plain; version=0.0.4")
    );
    assert!(
        classic
            .body
            .contains("# TYPE agentwatch_ticks_total counter\n")
    );
    assert!(!classic.body.contains("# EOF"));
    for line in [
        "agentwatch_ticks_total{job=\"watch\",outcome=\"flagged\"} 3",
        "agentwatch_last_tick_timestamp_seconds{job=\"watch\"} 1790000600.0",
        "agentwatch_sessions_seen 3",
        "agentwatch_trees_flagged 1",
        "agentwatch_open_alerts{severity=\"critical\"} 1",
        "agentwatch_open_alerts{severity=\"warning\"} 0",
        "agentwatch_last_tick_verdicts{flagged=\"true\"} 1",
        "# EOF",
    ] {
        assert!(
            m.body.lines().any(|l| l == line),
            "missing {line:?} in\n{}",
            m.body
        );
    }
}

#[test]
fn metrics_show_recorded_job_events() {
    let dir = TempDir::new("aw-web-events");
    let db = dir.path.join("agentwatch.db");
    let mut store = Store::open(&db).unwrap();
    use agentwatch_store::{EventKind, JobEvent};
    let ev = |at, job: &str, kind, name: &str, result: &str, ms| JobEvent {
        at,
        job: job.into(),
        kind,
        name: name.into(),
        result: result.into(),
        duration_ms: ms,
    };
    store
        .record_events(&[
            ev(T0, "recover", EventKind::Tick, "", "ok", Some(40)),
            ev(T0 + 60, "recover", EventKind::Tick, "", "ok", Some(3000)),
            ev(
                T0 + 60,
                "recover",
                EventKind::Restart,
                "fly.service",
                "succeeded",
                None,
            ),
            ev(T0 + 60, "watch", EventKind::Delivery, "log", "sent", None),
            ev(
                T0 + 60,
                "watch",
                EventKind::Delivery,
                "hook",
                "failed",
                None,
            ),
        ])
        .unwrap();
    drop(store);
    let server = start(ServeOptions {
        listen: "127.0.0.1:0".parse().unwrap(),
        ..ServeOptions::new(db)
    });
    let body = get(&format!("{}/metrics", server.url())).body;
    for line in [
        "agentwatch_ticks_total{job=\"recover\",outcome=\"ok\"} 2",
        "agentwatch_last_tick_timestamp_seconds{job=\"recover\"} 1790000060.0",
        "agentwatch_restarts_total{job=\"recover\",result=\"succeeded\"} 1",
        "agentwatch_deliveries_total{job=\"watch\",channel=\"hook\",result=\"failed\"} 1",
        "agentwatch_tick_duration_seconds_count{job=\"recover\"} 2",
        "agentwatch_tick_duration_seconds_bucket{job=\"recover\",le=\"0.05\"} 1",
    ] {
        assert!(
            body.lines().any(|l| l == line),
            "missing {line:?} in\n{body}"
        );
    }
    // The recover job's history: its restarts and checks, newest first.
    let recover = get(&format!("{}/api/recover", server.url())).json();
    assert_eq!(
        recover["restarts"],
        serde_json::json!([{"at": T0 + 60, "name": "fly.service", "result": "succeeded"}])
    );
    assert_eq!(recover["checks"][0]["duration_ms"], 3000);
    assert_eq!(recover["checks"].as_array().unwrap().len(), 2);
    let page = get(&format!("{}/recovery.html", server.url())).body;
    assert!(
        page.contains("<tr class=\"restart result-ok\">") && page.contains("fly.service"),
        "{page}"
    );
    let deck = get(&format!("{}/api/deck", server.url())).json();
    assert_eq!(deck["restarts"], serde_json::json!([]));
}

#[test]
fn no_store_yet_is_an_empty_answer_not_an_error() {
    let dir = TempDir::new("aw-web-empty");
    let server = start(ServeOptions {
        listen: "127.0.0.1:0".parse().unwrap(),
        ..ServeOptions::new(dir.path.join("none.db"))
    });
    let url = server.url();
    assert_eq!(
        get(&format!("{url}/api/watchdog/status")).json()["last_tick"],
        serde_json::Value::Null
    );
    assert_eq!(
        get(&format!("{url}/api/watchdog/loops")).json()["loops"],
        serde_json::json!([])
    );
    assert_eq!(get(&format!("{url}/metrics")).status, 200);
    assert!(
        !dir.path.join("none.db").exists(),
        "reading created the store"
    );
}

#[test]
fn beyond_loopback_needs_a_token() {
    let dir = TempDir::new("aw-web-bind");
    let mut o = ServeOptions::new(dir.path.join("a.db"));
    o.listen = "0.0.0.0:0".parse().unwrap();
    assert!(matches!(
        Server::bind(o.clone()),
        Err(WebError::NeedsToken(_))
    ));
    o.token = Some(String::new());
    assert!(matches!(Server::bind(o), Err(WebError::NeedsToken(_))));
}

#[test]
#[ignore = "needs promtool"]
fn promtool_accepts_the_metrics() {
    let dir = TempDir::new("aw-web-promtool");
    filled(&dir);
    Store::open(&dir.path.join("agentwatch.db"))
        .unwrap()
        .record_events(&[agentwatch_store::JobEvent {
            at: T0,
            job: "watch".into(),
            kind: agentwatch_store::EventKind::Delivery,
            name: "ops \"east\" \\ log".into(),
            result: "failed".into(),
            duration_ms: None,
        }])
        .unwrap();
    let server = start(options(&dir));
    let body = get(&format!("{}/metrics", server.url())).body;
    let mut child = std::process::Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("promtool runs");
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(body.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "promtool: {}{}\n{body}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Issue 40: the recovery notice at `/recovery-notice.json` as the file holds it, never cached;
/// 204 without one (or one too large to be a notice).
#[test]
fn the_recovery_notice_is_served_as_written() {
    let dir = TempDir::new("aw-web-notice");
    let notice = dir.path.join("recovery-notice.json");
    let mut o = options(&dir);
    o.recover_notice = Some(notice.clone());
    let server = start(o);
    let url = format!("{}/recovery-notice.json?cache=bust", server.url());
    let mut r = ureq::get(&url).call().unwrap();
    assert_eq!(r.status().as_u16(), 204);
    assert_eq!(r.headers()["cache-control"], "no-store");
    assert_eq!(r.body_mut().read_to_string().unwrap(), "");
    let text = r#"{"v":1,"id":"1790000000-restart","phase":"acting","action":"restart","loop":[],"announcedAt":1790000000,"executeAt":1790000060,"updatedAt":1790000070}"#;
    std::fs::write(&notice, text).unwrap();
    let mut r = ureq::get(&url).call().unwrap();
    assert_eq!(r.status().as_u16(), 200);
    assert_eq!(r.headers()["cache-control"], "no-store");
    assert!(
        r.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("application/json")
    );
    assert_eq!(r.body_mut().read_to_string().unwrap(), text);
    let splash = get(&format!("{}/api/recovery/splash", server.url())).json();
    assert_eq!(splash["phase"], "hidden", "{splash}");
    assert_eq!(
        splash["hidden_because"], "phase_over",
        "acting, 830 s after its write"
    );
    std::fs::write(&notice, "x".repeat(16_385)).unwrap();
    assert_eq!(ureq::get(&url).call().unwrap().status().as_u16(), 204);
}

/// Issue 40: blocks through the API, the router's list, refusals that change nothing.
#[test]
fn models_are_blocked_through_the_api() {
    let dir = TempDir::new("aw-web-block-api");
    filled(&dir);
    let server = start(options(&dir));
    let url = server.url();
    let block = format!("{url}/api/watchdog/models/block");
    for (body, field) in [
        (r#"{"provider":"openai"}"#, "model_id"),
        (r#"{"model_id":"  "}"#, "model_id"),
        (r#"{"model_id":"gpt-5","provider":7}"#, "provider"),
        (r#"{"model_id":"gpt-5","route":"x"}"#, "route"),
    ] {
        let r = post(&block, &[JSON], body);
        assert_eq!(
            (r.status, r.json()["field"].as_str()),
            (400, Some(field)),
            "{body}"
        );
    }
    assert_eq!(
        get(&format!("{url}/api/watchdog/models/blocked")).json()["blocked"],
        serde_json::json!([])
    );
    let r = post(
        &block,
        &[JSON],
        r#"{"model_id":"gpt-5","provider":"openai","reason":"stalls"}"#,
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["new"], true);
    let listed = get(&format!("{url}/api/watchdog/models/blocked")).json();
    assert_eq!(
        listed["blocked"],
        serde_json::json!([{"provider": "openai", "model_id": "gpt-5", "blocked_at": T0 + 900, "reason": "stalls"}])
    );
    let r = post(
        &format!("{url}/api/watchdog/models/unblock"),
        &[JSON],
        r#"{"model_id":"gpt-5","provider":"openai"}"#,
    );
    assert_eq!(r.json()["was_blocked"], true);
    // A page on another site cannot block.
    let r = post(
        &block,
        &[JSON, ("Origin", "http://evil.example")],
        r#"{"model_id":"x"}"#,
    );
    assert_eq!(r.status, 403);
    assert_eq!(
        get(&format!("{url}/api/watchdog/models/blocked")).json()["blocked"],
        serde_json::json!([])
    );
}

/// Issue 47: what agentwatch's own hook refused in a tree is on its alert in the API and on the
/// tree's page, whichever agent's key the alert has (`claude-loop:…`).
#[test]
fn a_trees_refusals_are_on_its_alert_and_its_page() {
    let dir = TempDir::new("aw-web-refusals");
    let mut store = Store::open(&dir.path.join("agentwatch.db")).unwrap();
    store
        .upsert_alerts(&[agentwatch_store::AlertRow {
            dedup_key: "claude-loop:s1".into(),
            session_root: "s1".into(),
            state: "open".into(),
            severity: "critical".into(),
            title: "Claude Code: Make the tests pass in /w".into(),
            summary: "agentwatch blocked 3 calls of `pytest -x`; the session stopped.".into(),
            flagged_ticks: 3,
            opened_at: T0,
            last_fired_at: Some(T0 + 600),
            resolved_at: None,
            reason: String::new(),
            refusals: Some(serde_json::json!(
                {"blocked": 3, "call": "pytest -x <a>", "of_call": 3, "stopped": true}
            )),
        }])
        .unwrap();
    drop(store);
    let server = start(options(&dir));
    let url = server.url();
    let sentence = "agentwatch blocked 3 calls of `pytest -x <a>`; the session stopped";

    let tree = get(&format!("{url}/api/watchdog/trees/s1")).json();
    assert_eq!(tree["dedup_key"], "claude-loop:s1");
    assert_eq!(tree["alert"]["blocked"], sentence);
    assert_eq!(tree["alert"]["refusals"]["blocked"], 3);
    let loops = get(&format!("{url}/api/watchdog/loops")).json();
    assert_eq!(loops["loops"][0]["blocked"], sentence, "{loops}");

    let page = get(&format!("{url}/trees/s1")).body;
    assert!(
        page.contains(
            "<p class=\"blocked\">agentwatch blocked 3 calls of <code>pytest -x &lt;a&gt;</code>; \
             the session stopped</p>"
        ),
        "{page}"
    );
}

/// A Claude Code session and its subagent, and a Gemini CLI session, in the session cache.
fn seed_sessions(dir: &TempDir) {
    let mut store = Store::open(&dir.path.join("agentwatch.db")).unwrap();
    let row = |source: &str, id: &str, info: serde_json::Value, verdict: serde_json::Value| {
        agentwatch_store::SessionCacheRow {
            source: source.into(),
            session_id: id.into(),
            fingerprint: "fp".into(),
            updated_ms: None,
            cursor: None,
            info: info.to_string(),
            detector: "{}".into(),
            verdict: verdict.to_string(),
            seen_at: T0,
        }
    };
    let claude = row(
        "/home/me/.claude",
        "c-1",
        serde_json::json!({"id": "c-1", "title": "Fix <the> tests", "directory": "/w/shop", "calls": []}),
        serde_json::json!({"verdict": {"flagged": true, "signals": ["repeat"]}, "agent": "claude",
            "newest_call_ms": (T0 + 5) * 1000, "repeats": {"calls": 4}}),
    );
    let sub = row(
        "/home/me/.claude",
        "c-1:agent-a",
        serde_json::json!({"id": "c-1:agent-a", "parent_id": "c-1", "title": "Study", "calls": []}),
        serde_json::json!({"verdict": {"flagged": false, "signals": []}, "agent": "claude",
            "newest_call_ms": T0 * 1000, "repeats": {"calls": 2}}),
    );
    let gemini = row(
        "/home/me/.gemini",
        "g-1",
        serde_json::json!({"id": "g-1", "title": "Make the check pass", "directory": "/w/app", "calls": []}),
        serde_json::json!({"verdict": {"flagged": false, "signals": []}, "agent": "gemini",
            "newest_call_ms": (T0 - 60) * 1000, "repeats": {"calls": 9}}),
    );
    let none = std::collections::HashSet::new();
    store
        .update_session_cache("/home/me/.claude", &[claude, sub], &none)
        .unwrap();
    store
        .update_session_cache("/home/me/.gemini", &[gemini], &none)
        .unwrap();
}

/// The sessions page and API list every agent's followed sessions (agent, title, directory,
/// calls, verdict, last activity) with their tree's page, filtered by agent, verdict and text
/// (issue 49); the tree page names the signal that fired and plots when (`repeat`).
#[test]
fn sessions_are_listed_and_filtered_and_the_tree_shows_what_fired() {
    let dir = TempDir::new("aw-web-sessions");
    filled(&dir);
    seed_sessions(&dir);
    let server = start(options(&dir));
    let url = server.url();
    let listed = |query: &str| -> Vec<(String, String)> {
        get(&format!("{url}/api/watchdog/sessions{query}")).json()["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| {
                (
                    s["session_id"].as_str().unwrap().to_owned(),
                    s["tree_url"].as_str().unwrap().to_owned(),
                )
            })
            .collect()
    };
    let pair = |id: &str, tree: &str| (id.to_owned(), tree.to_owned());
    assert_eq!(
        listed(""),
        [
            pair("c-1", "/trees/c-1"),
            pair("c-1:agent-a", "/trees/c-1"),
            pair("g-1", "/trees/g-1")
        ]
    );
    assert_eq!(listed("?agent=gemini"), [pair("g-1", "/trees/g-1")]);
    assert_eq!(listed("?flagged=1"), [pair("c-1", "/trees/c-1")]);
    assert_eq!(listed("?q=%2Fw%2Fapp"), [pair("g-1", "/trees/g-1")]);
    let all = get(&format!("{url}/api/watchdog/sessions")).json();
    let first = &all["sessions"][0];
    assert_eq!(
        (&first["agent"], &first["calls"], &first["directory"]),
        (
            &serde_json::json!("claude"),
            &serde_json::json!(4),
            &serde_json::json!("/w/shop")
        )
    );

    let page = get(&format!("{url}/admin/sessions.html?agent=claude&q=fix"));
    assert_eq!(page.status, 200);
    assert!(page.body.contains("Fix &lt;the&gt; tests"), "{}", page.body);
    assert!(page.body.contains("looping: repeat"), "{}", page.body);
    assert!(page.body.contains("href=\"trees/c-1\""), "{}", page.body);
    assert!(!page.body.contains("Make the check pass"), "{}", page.body);
    assert!(page.body.contains("<option selected>claude</option>"));

    let tree = get(&format!("{url}/trees/ses_demo_build"));
    assert!(
        tree.body.contains("data-signal=\"repeat\""),
        "{}",
        tree.body
    );
    assert!(
        tree.body
            .contains("Fired: <b class=\"fired\">coverage, repeat, reread, top</b>"),
        "{}",
        tree.body
    );
}
