//! The client against loopback servers that answer, fail, redirect, hang, or are not there.

use agentwatch_http::{Client, Failure, HttpError, Settings, Target};
use agentwatch_testkit::{HttpServer, Reply};
use std::time::{Duration, Instant};

const SECRET: &str = "S3CRETkey0123";

fn target(server: &HttpServer, path: &str) -> Target {
    Target::new(format!("{}{path}?key={SECRET}", server.url())).with_secret(SECRET)
}

fn quick() -> Client {
    Client::new(Settings::new(Duration::from_secs(5)))
}

fn assert_hidden(error: &HttpError) {
    for text in [error.to_string(), format!("{error:?}")] {
        assert!(!text.contains(SECRET), "{text}");
    }
}

#[test]
fn a_post_sends_json_and_the_headers_and_reads_a_2xx_answer() {
    let server = HttpServer::start(|_| Reply::text(201, "made").with_header("x-next", "c2"));
    let answer = quick()
        .post_json(
            &target(&server, "/p"),
            &[("authorization", "Bearer k")],
            "{}",
        )
        .unwrap();
    assert_eq!((answer.status, answer.body.as_str()), (201, "made"));
    assert_eq!(answer.header("x-next"), Some("c2"));
    let request = &server.requests()[0];
    assert_eq!(request.method, "POST");
    assert_eq!(request.target, format!("/p?key={SECRET}"));
    assert_eq!(request.headers["content-type"], "application/json");
    assert_eq!(request.headers["authorization"], "Bearer k");
    assert_eq!(request.body, b"{}");
}

#[test]
fn non_2xx_answers_and_redirects_are_status_errors_with_a_scrubbed_body_head() {
    let server = HttpServer::start(|r| match r.path() {
        "/moved" => Reply::text(307, "").with_header("location", "/p"),
        _ => Reply::text(500, &format!("  bad key {SECRET} {}", "x".repeat(300))),
    });
    let error = quick().get(&target(&server, "/p"), &[]).unwrap_err();
    let shown = format!("{}/p?<redacted>", server.url());
    match &error.failure {
        Failure::Status { status: 500, body } => {
            assert!(body.starts_with("bad key <redacted> xxx"), "{body}");
            assert_eq!(body.chars().count(), 201);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(error.url, shown);
    assert!(
        error
            .to_string()
            .starts_with(&format!("{shown}: HTTP 500: "))
    );
    assert_hidden(&error);
    let moved = quick().get(&target(&server, "/moved"), &[]).unwrap_err();
    assert!(
        matches!(moved.failure, Failure::Status { status: 307, .. }),
        "{moved:?}"
    );
    assert_eq!(server.requests().len(), 2);
}

#[test]
fn a_hanging_server_times_out_and_a_closed_port_is_unreachable() {
    let server = HttpServer::start(|_| Reply::Hang);
    let short = Duration::from_millis(300);
    let started = Instant::now();
    let error = Client::new(Settings::new(short))
        .get(&target(&server, "/h"), &[])
        .unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(
        matches!(error.failure, Failure::Timeout { timeout, .. } if timeout == short),
        "{error:?}"
    );
    assert_hidden(&error);

    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let closed = Target::new(format!("http://127.0.0.1:{port}/x?key={SECRET}"));
    let error = quick().post_json(&closed, &[], "{}").unwrap_err();
    assert!(
        matches!(error.failure, Failure::Unreachable { .. }),
        "{error:?}"
    );
    assert_hidden(&error);
}

#[test]
fn a_body_over_the_limit_is_an_error() {
    let server = HttpServer::start(|_| Reply::text(200, &"y".repeat(2048)));
    let small = Client::new(Settings {
        max_body_bytes: 1024,
        ..Settings::new(Duration::from_secs(5))
    });
    let error = small.get(&target(&server, "/big"), &[]).unwrap_err();
    assert!(
        matches!(error.failure, Failure::Unreachable { .. }),
        "{error:?}"
    );
    assert_eq!(
        quick()
            .get(&target(&server, "/big"), &[])
            .unwrap()
            .body
            .len(),
        2048
    );
}

#[test]
fn a_huge_error_body_is_read_only_as_far_as_its_head() {
    // 200 MB of error page behind a client whose body limit would allow all of it.
    let server = HttpServer::start(|_| Reply::Endless {
        status: 500,
        declared: 200 * 1024 * 1024,
    });
    let client = Client::new(Settings {
        max_body_bytes: 512 * 1024 * 1024,
        ..Settings::new(Duration::from_secs(30))
    });
    let error = client.get(&target(&server, "/big"), &[]).unwrap_err();
    match &error.failure {
        Failure::Status { status: 500, body } => assert!(body.starts_with("xxxx"), "{body}"),
        other => panic!("{other:?}"),
    }
    drop(client);
    let sent = server.bytes_sent();
    // What was read plus what the socket buffers held when the client hung up.
    assert!(sent < 32 * 1024 * 1024, "{sent} bytes were sent");
}

#[test]
fn credentials_a_server_echoes_in_an_error_body_are_redacted() {
    let server = HttpServer::start(|r| {
        let echoed = r.headers.get("authorization").cloned().unwrap_or_default();
        Reply::text(
            400,
            &format!("bad request; you sent Authorization: {echoed} from http://me:pw2@x/"),
        )
    });
    let error = quick()
        .get(
            &target(&server, "/p"),
            &[("authorization", "Basic b3BlbmNvZGU6czNjcmV0")],
        )
        .unwrap_err();
    let shown = error.to_string();
    assert!(!shown.contains("b3BlbmNvZGU6czNjcmV0"), "{shown}");
    assert!(!shown.contains("pw2"), "{shown}");
    assert!(shown.contains("Authorization: Basic <redacted>"), "{shown}");
}
