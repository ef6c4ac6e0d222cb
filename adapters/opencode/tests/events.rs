//! The event stream over loopback HTTP: recorded frames read as events, Basic auth sent, a
//! stream that ends or goes silent past the heartbeat limit is an error to reconnect on.

use agentwatch_opencode::http::{OpencodeServer, ServerSpec, SourceError, Timeouts};
use agentwatch_opencode::sse::Event;
use agentwatch_testkit::{HttpServer, Reply};
use std::time::Duration;

const RECORDED: &str = include_str!("../../../fixtures/opencode/sse_global_event_1.18.33.txt");

fn server(url: &str, password: Option<&str>) -> OpencodeServer {
    let mut spec = ServerSpec::new(url);
    spec.password = password.map(str::to_owned);
    OpencodeServer::new(spec, Timeouts::default())
}

#[test]
fn a_recorded_stream_reads_as_events_then_ends() {
    let http = HttpServer::start(|_| Reply::Stream {
        body: RECORDED.as_bytes().to_vec(),
        hold: false,
    });
    let oc = server(&http.url(), Some("s3cret"));
    let mut stream = oc.events(Duration::from_secs(30)).unwrap();
    let mut events = Vec::new();
    let end = loop {
        match stream.next_event(|why| panic!("skipped {why}")) {
            Ok(event) => events.push(event),
            Err(e) => break e,
        }
    };
    assert_eq!(events[0], Event::Connected);
    assert_eq!(
        events
            .iter()
            .filter(|e| matches!(e, Event::ToolSettled { .. }))
            .count(),
        1
    );
    assert!(matches!(end, SourceError::Unreachable { .. }), "{end}");
    let requests = http.requests();
    assert_eq!(requests[0].path(), "/global/event");
    let auth = requests[0].headers.get("authorization").unwrap();
    assert!(auth.starts_with("Basic "), "{auth}");
}

#[test]
fn a_silent_stream_times_out_at_the_heartbeat_limit() {
    let http = HttpServer::start(|_| Reply::Stream {
        body: b"data: {\"payload\":{\"type\":\"server.connected\",\"properties\":{}}}\n\n".to_vec(),
        hold: true,
    });
    let oc = server(&http.url(), None);
    let mut stream = oc.events(Duration::from_millis(300)).unwrap();
    assert_eq!(stream.next_event(|_| {}).unwrap(), Event::Connected);
    let e = stream.next_event(|_| {}).unwrap_err();
    assert!(matches!(e, SourceError::Timeout { .. }), "{e}");
}

#[test]
fn a_server_without_the_stream_is_a_status_error() {
    let http = HttpServer::start(|_| Reply::text(404, "no such route"));
    let e = server(&http.url(), None)
        .events(Duration::from_secs(5))
        .unwrap_err();
    assert!(matches!(e, SourceError::Status { status: 404, .. }), "{e}");
}

#[test]
fn abort_posts_to_the_session() {
    let http = HttpServer::start(|_| Reply::json(200, &serde_json::json!(true)));
    server(&http.url(), None).abort("ses_a/b").unwrap();
    let requests = http.requests();
    assert_eq!(requests[0].method, "POST");
    assert_eq!(requests[0].path(), "/session/ses_a%2Fb/abort");
}
