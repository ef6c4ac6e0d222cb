//! Webhook (JSON and PagerDuty) and Telegram channels against loopback servers that record what
//! they receive, and against servers that fail, hang, or are not there.

use agentwatch_channels::{
    ChannelError, ChannelKind, DEFAULT_HTTP_TIMEOUT, Outcome, TELEGRAM_API_BASE, TelegramChannel,
    WebhookChannel, WebhookMode, deliver,
};
use agentwatch_testkit::{HttpServer, Reply};
use alert_state::{AlertEvent, EventState, Severity};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

const ROUTING_KEY: &str = "R0UTINGKEYabcdef0123456789abcdef";
const TOKEN: &str = "123456789:AAFsecretTokenPart-xyz_0987";
/// The timeout of requests that should succeed or fail fast: roomy for a loaded CI machine.
const ROOMY: Duration = Duration::from_secs(5);
/// The timeout where a hanging server is under test.
const SHORT: Duration = Duration::from_millis(300);

fn event(state: EventState, severity: Severity) -> AlertEvent {
    AlertEvent {
        dedup_key: "opencode-loop:ses_a".into(),
        severity,
        state,
        title: "opencode loop: build".into(),
        summary: "top: read src/lib.rs x14 in the last 60 calls".into(),
        details: json!({"root": "ses_a", "agent": "build", "flagged_ticks": 3}),
        source: "agentwatch@devbox".into(),
    }
}

fn webhook(url: String, mode: WebhookMode) -> WebhookChannel {
    WebhookChannel {
        url,
        mode,
        routing_key: Some(ROUTING_KEY.into()),
        timeout: ROOMY,
    }
}

fn telegram(api_base: String) -> TelegramChannel {
    TelegramChannel {
        api_base,
        token: TOKEN.into(),
        chat_id: "-1001234567890".into(),
        timeout: ROOMY,
    }
}

/// A port with nothing listening on it.
fn closed_port_url() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    format!("http://127.0.0.1:{port}")
}

fn assert_no_secrets(error: &ChannelError) {
    for text in [error.to_string(), format!("{error:?}")] {
        for secret in [ROUTING_KEY, TOKEN, "AAFsecretTokenPart", "QUERYSECRET"] {
            assert!(!text.contains(secret), "{secret} leaked in {text}");
        }
    }
}

// ---- webhook, JSON mode ----

#[test]
fn json_webhook_posts_the_event_exactly_as_json() {
    let server = HttpServer::start(|_| Reply::json(200, &json!({"ok": true})));
    let channel =
        ChannelKind::Webhook(webhook(format!("{}/hook", server.url()), WebhookMode::Json));
    let outcome = deliver(&channel, &event(EventState::Escalate, Severity::Critical)).unwrap();
    assert_eq!(outcome, Outcome::Sent);

    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    let request = &requests[0];
    assert_eq!(request.method, "POST");
    assert_eq!(request.target, "/hook");
    assert_eq!(request.headers["content-type"], "application/json");
    let sent = event(EventState::Escalate, Severity::Critical);
    let id = sent.event_id();
    assert!(id.starts_with("evt_") && id.len() == 20, "{id}");
    assert_eq!(request.headers["idempotency-key"], id);
    let mut body = request.body_json();
    assert_eq!(body["event_id"], id.as_str());
    // A re-send of the same event carries the same identity.
    deliver(&channel, &sent).unwrap();
    assert_eq!(server.requests()[1].headers["idempotency-key"], id);
    body.as_object_mut().unwrap().remove("event_id");
    assert_eq!(
        body,
        json!({
            "dedup_key": "opencode-loop:ses_a",
            "severity": "critical",
            "state": "escalate",
            "title": "opencode loop: build",
            "summary": "top: read src/lib.rs x14 in the last 60 calls",
            "details": {"root": "ses_a", "agent": "build", "flagged_ticks": 3},
            "source": "agentwatch@devbox",
        })
    );
    // Without its identity, it reads back as the event.
    let back: AlertEvent = serde_json::from_value(body).unwrap();
    assert_eq!(back, event(EventState::Escalate, Severity::Critical));
}

#[test]
fn any_2xx_is_sent_and_a_redirect_is_not_followed() {
    let server = HttpServer::start(|request| match request.path() {
        "/accepted" => Reply::text(204, ""),
        _ => Reply::text(307, "moved").with_header("location", "/accepted"),
    });
    let sent = deliver(
        &ChannelKind::Webhook(webhook(
            format!("{}/accepted", server.url()),
            WebhookMode::Json,
        )),
        &event(EventState::Trigger, Severity::Warning),
    );
    assert_eq!(sent, Ok(Outcome::Sent));
    let moved = deliver(
        &ChannelKind::Webhook(webhook(format!("{}/old", server.url()), WebhookMode::Json)),
        &event(EventState::Trigger, Severity::Warning),
    )
    .unwrap_err();
    assert!(
        matches!(moved, ChannelError::Status { status: 307, .. }),
        "{moved:?}"
    );
    assert_eq!(server.requests().len(), 2);
}

// ---- webhook, PagerDuty mode ----

fn pagerduty_server() -> HttpServer {
    HttpServer::start(|request| {
        Reply::json(
            202,
            &json!({
                "status": "success",
                "message": "Event processed",
                "dedup_key": request.body_json()["dedup_key"],
            }),
        )
    })
}

#[test]
fn pagerduty_trigger_and_escalate_are_trigger_events_with_a_payload() {
    let server = pagerduty_server();
    let channel = ChannelKind::Webhook(webhook(
        format!("{}/v2/enqueue", server.url()),
        WebhookMode::PagerDuty,
    ));
    deliver(&channel, &event(EventState::Trigger, Severity::Warning)).unwrap();
    deliver(&channel, &event(EventState::Escalate, Severity::Critical)).unwrap();

    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[0].target, "/v2/enqueue");
    assert_eq!(requests[0].headers["content-type"], "application/json");
    let expected = |severity: &str| {
        json!({
            "routing_key": ROUTING_KEY,
            "event_action": "trigger",
            "dedup_key": "opencode-loop:ses_a",
            "payload": {
                "summary": "opencode loop: build: top: read src/lib.rs x14 in the last 60 calls",
                "source": "agentwatch@devbox",
                "severity": severity,
                "custom_details": {"root": "ses_a", "agent": "build", "flagged_ticks": 3},
            },
        })
    };
    assert_eq!(requests[0].body_json(), expected("warning"));
    assert_eq!(requests[1].body_json(), expected("critical"));
}

#[test]
fn pagerduty_resolve_is_a_resolve_event_without_a_payload() {
    let server = pagerduty_server();
    let channel = ChannelKind::Webhook(webhook(server.url(), WebhookMode::PagerDuty));
    deliver(&channel, &event(EventState::Resolve, Severity::Info)).unwrap();
    assert_eq!(
        server.requests()[0].body_json(),
        json!({
            "routing_key": ROUTING_KEY,
            "event_action": "resolve",
            "dedup_key": "opencode-loop:ses_a",
        })
    );
}

#[test]
fn pagerduty_summary_is_cut_to_1024_characters_and_odd_details_are_wrapped() {
    let server = pagerduty_server();
    let channel = ChannelKind::Webhook(webhook(server.url(), WebhookMode::PagerDuty));
    let mut long = event(EventState::Trigger, Severity::Warning);
    long.summary = "é".repeat(3000);
    long.details = json!("just a string");
    deliver(&channel, &long).unwrap();
    let mut empty = event(EventState::Trigger, Severity::Warning);
    empty.details = Value::Null;
    deliver(&channel, &empty).unwrap();

    let requests = server.requests();
    let payload = &requests[0].body_json()["payload"];
    assert_eq!(payload["summary"].as_str().unwrap().chars().count(), 1024);
    assert_eq!(
        payload["custom_details"],
        json!({"details": "just a string"})
    );
    assert!(
        requests[1].body_json()["payload"]
            .get("custom_details")
            .is_none()
    );
}

#[test]
fn pagerduty_without_a_routing_key_is_a_config_error_and_sends_nothing() {
    let server = pagerduty_server();
    for key in [None, Some("  ".to_owned())] {
        let mut channel = webhook(server.url(), WebhookMode::PagerDuty);
        channel.routing_key = key;
        let error = deliver(
            &ChannelKind::Webhook(channel),
            &event(EventState::Trigger, Severity::Warning),
        )
        .unwrap_err();
        assert!(matches!(error, ChannelError::Config(_)), "{error:?}");
        assert!(error.to_string().contains("routing_key"), "{error}");
    }
    assert!(server.requests().is_empty());
}

// ---- webhook failures ----

#[test]
fn a_500_is_an_error_naming_the_url_with_the_body_head_and_no_secret() {
    // The server echoes the routing key, as a careless endpoint might.
    let server =
        HttpServer::start(|_| Reply::text(500, &format!("internal error for key {ROUTING_KEY}")));
    let url = format!("{}/v2/enqueue", server.url());
    for mode in [WebhookMode::Json, WebhookMode::PagerDuty] {
        let error = deliver(
            &ChannelKind::Webhook(webhook(url.clone(), mode)),
            &event(EventState::Trigger, Severity::Critical),
        )
        .unwrap_err();
        match &error {
            ChannelError::Status {
                url: shown,
                status,
                body,
            } => {
                assert_eq!(shown, &url);
                assert_eq!(*status, 500);
                assert_eq!(body, "internal error for key <redacted>");
            }
            other => panic!("expected a status error, got {other:?}"),
        }
        assert!(error.to_string().contains(&url), "{error}");
        assert_no_secrets(&error);
    }
}

#[test]
fn a_hanging_server_is_a_timeout_error_within_the_timeout() {
    let server = HttpServer::start(|_| Reply::Hang);
    let url = format!("{}/hook", server.url());
    let mut channel = webhook(url.clone(), WebhookMode::PagerDuty);
    channel.timeout = SHORT;
    let started = Instant::now();
    let error = deliver(
        &ChannelKind::Webhook(channel),
        &event(EventState::Trigger, Severity::Critical),
    )
    .unwrap_err();
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert!(
        matches!(&error, ChannelError::Timeout { url: u, timeout, .. } if *u == url && *timeout == SHORT),
        "{error:?}"
    );
    assert!(error.to_string().contains(&url));
    assert_no_secrets(&error);
}

#[test]
fn a_closed_port_is_an_unreachable_error_naming_the_url() {
    let url = format!("{}/hook", closed_port_url());
    let error = deliver(
        &ChannelKind::Webhook(webhook(url.clone(), WebhookMode::PagerDuty)),
        &event(EventState::Trigger, Severity::Critical),
    )
    .unwrap_err();
    assert!(
        matches!(&error, ChannelError::Unreachable { url: u, .. } if *u == url),
        "{error:?}"
    );
    assert_no_secrets(&error);
}

#[test]
fn url_credentials_and_query_are_hidden_in_errors_and_debug() {
    let server = HttpServer::start(|_| Reply::text(403, "forbidden"));
    let url = format!(
        "http://hookuser:QUERYSECRET@127.0.0.1:{}/hook?token=QUERYSECRET",
        server.port()
    );
    let channel = webhook(url, WebhookMode::Json);
    let debug = format!("{channel:?}");
    assert!(
        !debug.contains("QUERYSECRET") && !debug.contains(ROUTING_KEY),
        "{debug}"
    );
    assert!(debug.contains("<redacted>"), "{debug}");
    let error = deliver(
        &ChannelKind::Webhook(channel),
        &event(EventState::Trigger, Severity::Critical),
    )
    .unwrap_err();
    let shown = format!("http://127.0.0.1:{}/hook?<redacted>", server.port());
    assert!(
        matches!(&error, ChannelError::Status { url, status: 403, .. } if *url == shown),
        "{error:?}"
    );
    assert_no_secrets(&error);
}

#[test]
fn webhook_defaults() {
    let channel = WebhookChannel::new("http://127.0.0.1:9/x", WebhookMode::Json);
    assert_eq!(channel.timeout, DEFAULT_HTTP_TIMEOUT);
    assert_eq!(channel.routing_key, None);
}

// ---- Telegram ----

fn telegram_server() -> HttpServer {
    HttpServer::start(|request| {
        if request.path() == format!("/bot{TOKEN}/sendMessage") {
            Reply::json(
                200,
                &json!({"ok": true, "result": {"message_id": 42, "chat": {"id": -1001234567890_i64}}}),
            )
        } else {
            Reply::json(
                404,
                &json!({"ok": false, "error_code": 404, "description": "Not Found"}),
            )
        }
    })
}

#[test]
fn telegram_sends_chat_id_and_a_readable_text() {
    let server = telegram_server();
    let channel = ChannelKind::Telegram(telegram(format!("{}/", server.url())));
    let outcome = deliver(&channel, &event(EventState::Escalate, Severity::Critical)).unwrap();
    assert_eq!(outcome, Outcome::Sent);

    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].method, "POST");
    assert_eq!(requests[0].target, format!("/bot{TOKEN}/sendMessage"));
    assert_eq!(requests[0].headers["content-type"], "application/json");
    assert_eq!(
        requests[0].body_json(),
        json!({
            "chat_id": "-1001234567890",
            "text": "[CRITICAL] escalate: opencode loop: build\n\
                     top: read src/lib.rs x14 in the last 60 calls\n\n\
                     dedup key: opencode-loop:ses_a\n\
                     source: agentwatch@devbox",
        })
    );
}

#[test]
fn telegram_errors_never_show_the_token() {
    // A 401 whose body echoes the token.
    let server = HttpServer::start(|request| {
        Reply::json(
            401,
            &json!({"ok": false, "error_code": 401, "description": format!("Unauthorized {}", request.target)}),
        )
    });
    let error = deliver(
        &ChannelKind::Telegram(telegram(server.url())),
        &event(EventState::Trigger, Severity::Warning),
    )
    .unwrap_err();
    let shown = format!("{}/bot<redacted>/sendMessage", server.url());
    assert!(
        matches!(&error, ChannelError::Status { url, status: 401, .. } if *url == shown),
        "{error:?}"
    );
    assert!(error.to_string().contains(&shown));
    assert_no_secrets(&error);

    // Hang, closed port, and a base URL so broken that the HTTP library quotes it back.
    let hang = HttpServer::start(|_| Reply::Hang);
    let mut channel = telegram(hang.url());
    channel.timeout = SHORT;
    let started = Instant::now();
    let timeout = deliver(
        &ChannelKind::Telegram(channel),
        &event(EventState::Trigger, Severity::Warning),
    )
    .unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(
        matches!(timeout, ChannelError::Timeout { .. }),
        "{timeout:?}"
    );
    assert_no_secrets(&timeout);

    let closed = deliver(
        &ChannelKind::Telegram(telegram(closed_port_url())),
        &event(EventState::Trigger, Severity::Warning),
    )
    .unwrap_err();
    assert!(
        matches!(closed, ChannelError::Unreachable { .. }),
        "{closed:?}"
    );
    assert_no_secrets(&closed);

    let broken = deliver(
        &ChannelKind::Telegram(telegram("no scheme here".into())),
        &event(EventState::Trigger, Severity::Warning),
    )
    .unwrap_err();
    assert_no_secrets(&broken);
}

#[test]
fn telegram_ok_false_or_non_json_on_200_is_rejected() {
    let server = HttpServer::start(|request| {
        if request.body_json()["chat_id"] == "@gone" {
            Reply::json(
                200,
                &json!({"ok": false, "description": "Bad Request: chat not found"}),
            )
        } else {
            Reply::text(200, "<html>captive portal</html>")
        }
    });
    let mut channel = telegram(server.url());
    channel.chat_id = "@gone".into();
    let error = deliver(
        &ChannelKind::Telegram(channel.clone()),
        &event(EventState::Trigger, Severity::Warning),
    )
    .unwrap_err();
    assert!(
        matches!(&error, ChannelError::Rejected { message, .. } if message.contains("chat not found")),
        "{error:?}"
    );
    channel.chat_id = "1".into();
    let error = deliver(
        &ChannelKind::Telegram(channel),
        &event(EventState::Trigger, Severity::Warning),
    )
    .unwrap_err();
    assert!(matches!(error, ChannelError::Rejected { .. }), "{error:?}");
    assert_no_secrets(&error);
}

#[test]
fn telegram_debug_hides_the_token_and_new_uses_the_real_api() {
    let channel = TelegramChannel::new(TOKEN, "42");
    assert_eq!(channel.api_base, TELEGRAM_API_BASE);
    assert_eq!(channel.timeout, DEFAULT_HTTP_TIMEOUT);
    for debug in [
        format!("{channel:?}"),
        format!("{:?}", ChannelKind::Telegram(channel.clone())),
    ] {
        assert!(!debug.contains("AAFsecretTokenPart"), "{debug}");
        assert!(debug.contains("token: <redacted>"), "{debug}");
    }
}

#[test]
fn telegram_without_a_token_is_a_config_error() {
    let server = telegram_server();
    let mut channel = telegram(server.url());
    channel.token = String::new();
    let error = deliver(
        &ChannelKind::Telegram(channel),
        &event(EventState::Trigger, Severity::Warning),
    )
    .unwrap_err();
    assert!(matches!(error, ChannelError::Config(_)), "{error:?}");
    assert!(server.requests().is_empty());
}

#[test]
fn the_alert_link_reaches_pagerduty_json_and_telegram() {
    let link = "http://127.0.0.1:8080/admin/trees/ses_a";
    let mut e = event(EventState::Trigger, Severity::Warning);
    e.set_link(link.into());

    let pd = pagerduty_server();
    let channel = ChannelKind::Webhook(webhook(
        format!("{}/v2/enqueue", pd.url()),
        WebhookMode::PagerDuty,
    ));
    deliver(&channel, &e).unwrap();
    let body = pd.requests()[0].body_json();
    assert_eq!(body["links"][0]["href"], link);
    assert_eq!(body["payload"]["custom_details"]["link"], link);

    let hook = HttpServer::start(|_| Reply::text(200, "ok"));
    let channel = ChannelKind::Webhook(webhook(hook.url(), WebhookMode::Json));
    deliver(&channel, &e).unwrap();
    assert_eq!(hook.requests()[0].body_json()["details"]["link"], link);

    let tg = telegram_server();
    let channel = ChannelKind::Telegram(telegram(tg.url()));
    deliver(&channel, &e).unwrap();
    let text = tg.requests()[0].body_json()["text"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        text.contains(&format!("in the last 60 calls\n{link}\n\ndedup key")),
        "{text}"
    );
}

// ---- webhook presets: Slack-compatible incoming webhooks and ntfy ----

/// A Slack-style incoming webhook: `200 ok` for a JSON object with a non-empty string `text`,
/// `400 invalid_payload` / `no_text` otherwise, as Slack answers.
fn slack_server() -> HttpServer {
    HttpServer::start(|request| {
        let Ok(body) = serde_json::from_slice::<Value>(&request.body) else {
            return Reply::text(400, "invalid_payload");
        };
        match body.get("text").and_then(Value::as_str) {
            Some(text) if !text.trim().is_empty() && request.method == "POST" => {
                Reply::text(200, "ok")
            }
            _ => Reply::text(400, "no_text"),
        }
    })
}

/// An ntfy server's JSON publish: `POST /` with a string `topic` and `message`, an optional
/// string `title` and `click`, `priority` 1 to 5, `tags` a list of strings; it answers the
/// message as ntfy does, or 400 with ntfy's error shape.
fn ntfy_server() -> HttpServer {
    HttpServer::start(|request| {
        let bad = |why: &str| Reply::json(400, &json!({"code": 40001, "http": 400, "error": why}));
        if request.method != "POST" || request.path() != "/" {
            return bad("JSON publishing goes to the root URL");
        }
        let Ok(body) = serde_json::from_slice::<Value>(&request.body) else {
            return bad("invalid request: body must be JSON");
        };
        let string = |k: &str| body.get(k).is_none_or(Value::is_string);
        let ok = body["topic"].as_str().is_some_and(|t| !t.is_empty())
            && body["message"].is_string()
            && string("title")
            && string("click")
            && body["priority"]
                .as_i64()
                .is_some_and(|p| (1..=5).contains(&p))
            && body["tags"]
                .as_array()
                .is_some_and(|t| t.iter().all(Value::is_string));
        if ok {
            Reply::json(
                200,
                &json!({"id": "hwQ2YpKdmg", "time": 1_796_000_000, "event": "message",
                        "topic": body["topic"], "message": body["message"]}),
            )
        } else {
            bad(&format!("invalid message: {body}"))
        }
    })
}

#[test]
fn slack_webhooks_get_one_mrkdwn_text_with_the_link() {
    let server = slack_server();
    let url = format!("{}/services/T000/B000/XXXX", server.url());
    let channel = ChannelKind::Webhook(webhook(url, WebhookMode::Slack));
    let mut e = event(EventState::Escalate, Severity::Critical);
    e.title = "opencode loop: <build> & co".into();
    e.set_link("http://127.0.0.1:8080/admin/trees/ses_a".into());
    assert_eq!(deliver(&channel, &e), Ok(Outcome::Sent));

    let requests = server.requests();
    assert_eq!(requests[0].target, "/services/T000/B000/XXXX");
    let body = requests[0].body_json();
    assert_eq!(body.as_object().unwrap().len(), 1, "{body}");
    assert_eq!(
        body["text"],
        "*[CRITICAL] escalate* opencode loop: &lt;build&gt; &amp; co\n\
         top: read src/lib.rs x14 in the last 60 calls\n\
         dedup key: `opencode-loop:ses_a` · source: agentwatch@devbox\n\
         <http://127.0.0.1:8080/admin/trees/ses_a|open the tree>"
    );
}

#[test]
fn ntfy_gets_a_json_publish_to_the_root_with_priority_by_severity() {
    let server = ntfy_server();
    let channel = ChannelKind::Webhook(webhook(
        format!("{}/agentwatch-alerts", server.url()),
        WebhookMode::Ntfy,
    ));
    let mut linked = event(EventState::Trigger, Severity::Warning);
    linked.set_link("http://127.0.0.1:8080/admin/trees/ses_a".into());
    for (e, priority, tag) in [
        (
            event(EventState::Escalate, Severity::Critical),
            5,
            "rotating_light",
        ),
        (linked, 4, "warning"),
        (
            event(EventState::Resolve, Severity::Info),
            3,
            "white_check_mark",
        ),
    ] {
        assert_eq!(deliver(&channel, &e), Ok(Outcome::Sent), "{:?}", e.state);
        let request = server.requests().pop().unwrap();
        assert_eq!(request.path(), "/");
        let body = request.body_json();
        assert_eq!(body["topic"], "agentwatch-alerts");
        assert_eq!(body["priority"], priority);
        assert_eq!(body["tags"], json!([tag]));
        assert_eq!(
            body["title"],
            format!(
                "[{}] {} opencode loop: build",
                e.severity.as_str().to_uppercase(),
                e.state
            )
        );
        assert!(
            body["message"]
                .as_str()
                .unwrap()
                .contains("opencode-loop:ses_a")
        );
        assert_eq!(body.get("click").and_then(Value::as_str), e.link());
    }
}

#[test]
fn an_ntfy_url_without_a_topic_is_a_config_error_and_a_slack_400_is_an_error() {
    let ntfy = ntfy_server();
    let channel = ChannelKind::Webhook(webhook(ntfy.url(), WebhookMode::Ntfy));
    let error = deliver(&channel, &event(EventState::Trigger, Severity::Warning)).unwrap_err();
    assert!(matches!(error, ChannelError::Config(_)), "{error:?}");
    assert!(ntfy.requests().is_empty());

    let slack = HttpServer::start(|_| Reply::text(400, "no_text"));
    let channel = ChannelKind::Webhook(webhook(slack.url(), WebhookMode::Slack));
    let error = deliver(&channel, &event(EventState::Trigger, Severity::Warning)).unwrap_err();
    assert!(
        matches!(&error, ChannelError::Status { status: 400, body, .. } if body == "no_text"),
        "{error:?}"
    );
}

// ---- agentwatch's own refusals (issue 47) ----

/// A `blocked` event: agentwatch's hook refused calls of the alert's tree and stopped it.
fn blocked() -> AlertEvent {
    AlertEvent {
        dedup_key: "claude-loop:s1".into(),
        severity: Severity::Warning,
        state: EventState::Blocked,
        title: "Blocked: Claude Code: Make the tests pass in /w".into(),
        summary: "agentwatch blocked 3 calls of `pytest -x`; the session stopped.".into(),
        details: json!({"root": "s1", "opened_at": 1_796_000_000,
            "blocked": {"blocked": 3, "call": "pytest -x", "of_call": 3, "stopped": true}}),
        source: "agentwatch@devbox".into(),
    }
}

/// Every HTTP channel takes a `blocked` event as it takes an alarm: PagerDuty as a `trigger`
/// of the same dedup key (its only way to update an incident), JSON as it is, the chat
/// channels naming the transition, ntfy with its own tag at the alert's priority.
#[test]
fn a_blocked_event_through_every_http_channel() {
    let pd = pagerduty_server();
    let pd_channel = ChannelKind::Webhook(webhook(pd.url(), WebhookMode::PagerDuty));
    assert_eq!(deliver(&pd_channel, &blocked()), Ok(Outcome::Sent));
    let body = pd.requests()[0].body_json();
    assert_eq!(
        (&body["event_action"], &body["dedup_key"]),
        (&json!("trigger"), &json!("claude-loop:s1"))
    );
    assert_eq!(body["payload"]["severity"], "warning");
    assert_eq!(
        body["payload"]["custom_details"]["blocked"]["stopped"],
        true
    );

    let hook = HttpServer::start(|_| Reply::json(200, &json!({"ok": true})));
    let json_channel = ChannelKind::Webhook(webhook(hook.url(), WebhookMode::Json));
    deliver(&json_channel, &blocked()).unwrap();
    let body = hook.requests()[0].body_json();
    assert_eq!(body["state"], "blocked");
    assert_eq!(body["event_id"], blocked().event_id().as_str());

    let tg = telegram_server();
    deliver(&ChannelKind::Telegram(telegram(tg.url())), &blocked()).unwrap();
    let text = tg.requests()[0].body_json()["text"].clone();
    assert!(
        text.as_str().unwrap().starts_with(
            "[WARNING] blocked: Blocked: Claude Code: Make the tests pass in /w\n\
             agentwatch blocked 3 calls of `pytest -x`; the session stopped."
        ),
        "{text}"
    );

    let slack = slack_server();
    let slack_channel = ChannelKind::Webhook(webhook(slack.url(), WebhookMode::Slack));
    deliver(&slack_channel, &blocked()).unwrap();
    let text = slack.requests()[0].body_json()["text"].clone();
    assert!(
        text.as_str()
            .unwrap()
            .starts_with("*[WARNING] blocked* Blocked:"),
        "{text}"
    );

    let ntfy = ntfy_server();
    let ntfy_channel =
        ChannelKind::Webhook(webhook(format!("{}/aw", ntfy.url()), WebhookMode::Ntfy));
    deliver(&ntfy_channel, &blocked()).unwrap();
    let body = ntfy.requests()[0].body_json();
    assert_eq!(
        (&body["priority"], &body["tags"]),
        (&json!(4), &json!(["no_entry"]))
    );
}
