//! The HTTP client against loopback servers that speak opencode's protocol, and ones that don't.

use agentwatch_opencode::http::{Limits, OpencodeServer, ServerSpec, SourceError, Timeouts};
use agentwatch_testkit::{HttpServer, Reply, Request};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

fn fixture(name: &str) -> Value {
    let path = format!(
        "{}/../../fixtures/opencode/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn quick() -> Timeouts {
    Timeouts {
        connect: Duration::from_millis(500),
        request: Duration::from_millis(700),
    }
}

/// Serves the two sample sessions like opencode 1.18.33: newest `limit` messages, oldest first,
/// with `X-Next-Cursor` pointing at older ones.
fn opencode_like(request: &Request) -> Reply {
    let parent = fixture("export_fixture_parent.json");
    let child = fixture("export_fixture_child.json");
    let infos = json!([child["info"], parent["info"]]);
    match request.path() {
        "/experimental/session" => Reply::json(200, &infos),
        path => {
            let Some(id) = path
                .strip_prefix("/session/")
                .and_then(|p| p.strip_suffix("/message"))
            else {
                return Reply::json(404, &json!({"name": "NotFoundError"}));
            };
            let export = if parent["info"]["id"] == id {
                parent
            } else {
                child
            };
            let all = export["messages"].as_array().unwrap().clone();
            let limit: usize = request
                .query("limit")
                .and_then(|l| l.parse().ok())
                .unwrap_or(0);
            let end: usize = request
                .query("before")
                .and_then(|c| c.parse().ok())
                .unwrap_or(all.len());
            let start = if limit == 0 {
                0
            } else {
                end.saturating_sub(limit)
            };
            let reply = Reply::json(200, &Value::Array(all[start..end].to_vec()));
            if start > 0 {
                reply.with_header("X-Next-Cursor", &start.to_string())
            } else {
                reply
            }
        }
    }
}

#[test]
fn reads_every_session_and_follows_the_message_cursor() {
    let server = HttpServer::start(opencode_like);
    let client = OpencodeServer::new(ServerSpec::new(server.url()), quick()).with_page_size(2);
    let (sessions, problems) = client.fetch_sessions().unwrap();
    assert!(problems.is_empty(), "{problems:?}");
    assert_eq!(sessions.len(), 2);
    let parent = sessions.iter().find(|s| s.parent_id.is_none()).unwrap();
    let tools: Vec<&str> = parent.calls.iter().map(|c| c.tool.as_str()).collect();
    assert_eq!(
        tools,
        [
            "read", "grep", "glob", "edit", "write", "bash", "bash", "bash", "bash", "task"
        ]
    );
    // 5 messages in pages of 2: three requests, the later ones with a `before` cursor.
    let pages: Vec<Request> = server
        .requests()
        .into_iter()
        .filter(|r| r.path() == format!("/session/{}/message", parent.id))
        .collect();
    assert_eq!(pages.len(), 3);
    assert_eq!(pages[1].query("before"), Some("3"));
}

#[test]
fn sends_basic_auth_when_a_password_is_set_and_reports_401() {
    let server = HttpServer::start(|r: &Request| {
        if r.headers.get("authorization").map(String::as_str) == Some("Basic b3BlbmNvZGU6czNjcmV0")
        {
            Reply::json(200, &json!({"healthy": true, "version": "1.18.33"}))
        } else {
            Reply::json(401, &json!({}))
                .with_header("www-authenticate", "Basic realm=\"Secure Area\"")
        }
    });
    let anonymous = OpencodeServer::new(ServerSpec::new(server.url()), quick());
    assert!(matches!(
        anonymous.health(),
        Err(SourceError::Unauthorized { .. })
    ));
    let mut spec = ServerSpec::new(server.url());
    spec.password = Some("s3cret".to_owned());
    let authed = OpencodeServer::new(spec, quick());
    assert_eq!(authed.health().unwrap()["healthy"], true);
}

#[test]
fn misbehaving_servers_give_errors_naming_the_server() {
    let cases: Vec<(&str, Reply)> = vec![
        ("500", Reply::text(500, "boom")),
        ("garbage", Reply::text(200, "<html>not json")),
        ("not a list", Reply::json(200, &json!({"sessions": []}))),
        (
            "raw bytes",
            Reply::Raw(b"\x00\x01 not http at all\r\n\r\n".to_vec()),
        ),
        ("hang", Reply::Hang),
    ];
    for (what, reply) in cases {
        let server = HttpServer::start(move |_| reply.clone());
        let client = OpencodeServer::new(ServerSpec::new(server.url()), quick());
        let err = client.list_sessions().unwrap_err();
        assert!(err.to_string().contains(&server.url()), "{what}: {err}");
        let expected = match what {
            "500" => matches!(err, SourceError::Status { status: 500, .. }),
            "garbage" | "not a list" => matches!(err, SourceError::Garbage { .. }),
            "hang" => matches!(err, SourceError::Timeout { .. }),
            _ => matches!(
                err,
                SourceError::Unreachable { .. } | SourceError::Garbage { .. }
            ),
        };
        assert!(expected, "{what}: {err:?}");
    }
}

#[test]
fn a_closed_port_is_unreachable() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let client = OpencodeServer::new(ServerSpec::new(format!("http://127.0.0.1:{port}")), quick());
    assert!(matches!(
        client.health(),
        Err(SourceError::Unreachable { .. })
    ));
}

#[test]
fn falls_back_to_the_project_listing_without_the_experimental_route() {
    let server = HttpServer::start(|r: &Request| match r.path() {
        "/session" => Reply::json(
            200,
            &json!([{"id": "ses_a", "title": "t", "directory": "/p"}]),
        ),
        "/session/ses_a/message" => Reply::json(200, &json!([])),
        _ => Reply::json(404, &json!({"name": "NotFoundError"})),
    });
    let client = OpencodeServer::new(ServerSpec::new(server.url()), quick());
    let (sessions, _) = client.fetch_sessions().unwrap();
    assert_eq!(sessions[0].id, "ses_a");
}

#[test]
fn a_session_whose_messages_fail_is_reported_and_skipped() {
    let server = HttpServer::start(|r: &Request| match r.path() {
        "/experimental/session" => Reply::json(200, &json!([{"id": "ses_ok"}, {"id": "ses_bad"}])),
        "/session/ses_ok/message" => Reply::json(200, &json!([])),
        _ => Reply::text(500, "db locked"),
    });
    let client = OpencodeServer::new(ServerSpec::new(server.url()), quick());
    let (sessions, problems) = client.fetch_sessions().unwrap();
    assert_eq!(sessions.len(), 1);
    assert_eq!(problems.len(), 1);
    assert!(problems[0].to_string().contains("ses_bad"));
}

#[test]
fn a_session_list_of_wrong_typed_entries_is_an_error_not_a_complete_answer() {
    for list in [
        json!([{"id": 5}, 7, "x", null]),
        json!([{"id": "ses_ok"}, 7]),
        json!([{"id": "ses_ok"}, {"title": "no id"}]),
        json!([{"id": "ses_ok", "title": 5}]),
        json!([{"id": "ses_ok", "time": {"updated": "soon"}}]),
    ] {
        let body = list.clone();
        let server = HttpServer::start(move |_| Reply::json(200, &body));
        let client = OpencodeServer::new(ServerSpec::new(server.url()), quick());
        let err = client.list_sessions().unwrap_err();
        assert!(
            matches!(err, SourceError::Garbage { .. }),
            "{list}: {err:?}"
        );
        // The message says where and what was expected, never quoting the answer.
        let shown = err.to_string();
        assert!(shown.contains("line 1 column"), "{shown}");
        assert!(
            !shown.contains("soon") && !shown.contains("no id"),
            "{shown}"
        );
    }
}

#[test]
fn a_session_list_keeps_the_fields_agentwatch_reads() {
    let server = HttpServer::start(|_| {
        Reply::json(
            200,
            &json!([{"id": "ses_a", "parentID": "ses_p", "title": "t", "directory": "/d",
                     "projectID": "p", "share": {"url": "u"}, "time": {"created": 1, "updated": 2}},
                    {"id": "ses_b", "title": null}]),
        )
    });
    let client = OpencodeServer::new(ServerSpec::new(server.url()), quick());
    assert_eq!(
        client.list_sessions().unwrap(),
        vec![
            json!({"id": "ses_a", "parentID": "ses_p", "title": "t", "directory": "/d",
                   "time": {"created": 1, "updated": 2}}),
            json!({"id": "ses_b"}),
        ]
    );
}

#[test]
fn a_server_that_always_has_another_page_ends_with_a_clear_error() {
    let server = HttpServer::start(|r: &Request| match r.path() {
        "/experimental/session" => Reply::json(200, &json!([{"id": "ses_a"}])),
        _ => {
            // A fresh cursor on every page, forever.
            let next = r
                .query("before")
                .and_then(|c| c.parse::<u64>().ok())
                .unwrap_or(0)
                + 1;
            Reply::json(
                200,
                &json!([{"info": {"id": format!("msg_{next}"), "role": "user"}, "parts": []}]),
            )
            .with_header("X-Next-Cursor", &next.to_string())
        }
    });
    let limits = Limits {
        max_pages: 7,
        ..Limits::default()
    };
    let client = OpencodeServer::with_limits(ServerSpec::new(server.url()), quick(), limits);
    let (sessions, problems) = client.fetch_sessions().unwrap();
    assert!(sessions.is_empty());
    assert!(
        matches!(&problems[..], [SourceError::TooManyPages { pages: 7, url }] if url.ends_with("/session/ses_a/message")),
        "{problems:?}"
    );
    assert_eq!(server.requests().len(), 1 + 7);
    let err = client
        .messages_after("ses_a", Some("msg_never"))
        .unwrap_err();
    assert!(err.to_string().contains("more than 7 pages"), "{err}");
}

/// A server answering every request with 200 MB of `x`s (`status`), and a client patient
/// enough to read them all.
fn endless(status: u16) -> (HttpServer, OpencodeServer) {
    let server = HttpServer::start(move |_| Reply::Endless {
        status,
        declared: 200 * 1024 * 1024,
    });
    let timeouts = Timeouts {
        connect: Duration::from_secs(2),
        request: Duration::from_secs(30),
    };
    let client = OpencodeServer::new(ServerSpec::new(server.url()), timeouts);
    (server, client)
}

/// The client stopped reading after a few MiB at most (what the kernel's buffers hold).
fn assert_stopped_early(server: &HttpServer, client: OpencodeServer) {
    drop(client);
    assert!(
        server.bytes_sent() < 32 * 1024 * 1024,
        "{}",
        server.bytes_sent()
    );
}

#[test]
fn a_huge_error_body_is_not_read_whole() {
    let (server, client) = endless(500);
    let err = client.list_sessions().unwrap_err();
    assert!(
        matches!(err, SourceError::Status { status: 500, .. }),
        "{err:?}"
    );
    assert_stopped_early(&server, client);
}

/// An answer is parsed as it arrives: 200 MB of garbage is an error naming the server at its
/// first byte, not read whole into memory first (as when the body was read to a string before
/// parsing).
#[test]
fn a_huge_garbage_answer_is_not_read_whole() {
    let (server, client) = endless(200);
    let err = client.list_sessions().unwrap_err();
    assert!(matches!(err, SourceError::Garbage { .. }), "{err:?}");
    let shown = err.to_string();
    assert!(
        shown.contains(&server.url()) && shown.contains("not JSON"),
        "{shown}"
    );
    assert_stopped_early(&server, client);
}

/// A valid answer longer than the body limit is a clear error naming the URL and the limit,
/// read no further than the limit.
#[test]
fn an_answer_over_the_body_limit_is_a_clear_error() {
    let title = "x".repeat(2 * 1024 * 1024);
    let server =
        HttpServer::start(move |_| Reply::json(200, &json!([{"id": "ses_a", "title": title}])));
    let limits = Limits {
        max_body_bytes: 1024 * 1024,
        ..Limits::default()
    };
    let client = OpencodeServer::with_limits(ServerSpec::new(server.url()), quick(), limits);
    let err = client.list_sessions().unwrap_err();
    assert!(matches!(err, SourceError::TooLarge { .. }), "{err:?}");
    let shown = err.to_string();
    assert!(
        shown.contains(&format!("{}/experimental/session", server.url()))
            && shown.contains("larger than 1048576 bytes"),
        "{shown}"
    );
}

/// A listed session's title (and directory) is kept to its first 4 KiB, cut at a character.
#[test]
fn a_huge_title_is_cut() {
    let title = format!("{}é{}", "t".repeat(4095), "x".repeat(1 << 20));
    let server = HttpServer::start(move |_| {
        Reply::json(
            200,
            &json!([{"id": "ses_a", "title": title, "directory": "/d"}]),
        )
    });
    let client = OpencodeServer::new(ServerSpec::new(server.url()), quick());
    let infos = client.list_session_infos().unwrap();
    assert_eq!(infos[0].title.as_deref(), Some("t".repeat(4095).as_str()));
    assert_eq!(infos[0].directory.as_deref(), Some("/d"));
}

#[test]
fn a_password_echoed_in_an_error_body_never_shows() {
    let server = HttpServer::start(|r: &Request| {
        let echoed = r.headers.get("authorization").cloned().unwrap_or_default();
        Reply::text(500, &format!("upstream said: Authorization: {echoed}"))
    });
    let mut spec = ServerSpec::new(server.url().replace("http://", "http://opencode:s3cret@"));
    spec.password = Some("s3cret".to_owned());
    let client = OpencodeServer::new(spec, quick());
    let err = client.list_sessions().unwrap_err();
    for shown in [err.to_string(), format!("{err:?}")] {
        assert!(!shown.contains("b3BlbmNvZGU6czNjcmV0"), "{shown}");
        assert!(!shown.contains("s3cret"), "{shown}");
    }
}

#[test]
fn past_the_deadline_every_session_is_reported_skipped() {
    // Each message request hangs; the deadline cuts the first and skips the rest.
    let server = HttpServer::start(|r: &Request| match r.path() {
        "/experimental/session" => Reply::json(
            200,
            &json!([{"id": "ses_1"}, {"id": "ses_2"}, {"id": "ses_3"}]),
        ),
        _ => Reply::Hang,
    });
    let timeouts = Timeouts {
        connect: Duration::from_secs(2),
        request: Duration::from_secs(30),
    };
    let started = Instant::now();
    let client = OpencodeServer::new(ServerSpec::new(server.url()), timeouts)
        .with_deadline(started + Duration::from_millis(600));
    let (sessions, problems) = client.fetch_sessions().unwrap();
    assert!(sessions.is_empty());
    assert_eq!(problems.len(), 3, "{problems:?}");
    assert!(
        matches!(problems[0], SourceError::Timeout { .. }),
        "{problems:?}"
    );
    assert!(
        problems[1..].iter().all(SourceError::is_skipped),
        "{problems:?}"
    );
    assert!(problems[2].to_string().contains("/session/ses_3/message"));
    // Bounded by the deadline, not by three 30 s request timeouts.
    assert!(started.elapsed() < Duration::from_secs(20));
}
