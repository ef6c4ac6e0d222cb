//! The chat client against loopback servers speaking OpenAI chat completions and Ollama's
//! `/api/chat`, and against servers that fail, hang, or answer garbage.

use agentwatch_llm::{
    ChatEndpoint, Dialect, LlmError, ask_loop_opinion, complete, loop_opinion_prompt,
};
use agentwatch_testkit::{HttpServer, Reply, Request};
use alert_state::LlmOpinion;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

const KEY: &str = "sk-test-SECRETKEY0123456789";
/// The timeout of requests that should succeed or fail fast: roomy for a loaded CI machine.
const ROOMY: Duration = Duration::from_secs(5);
/// The timeout where a hanging server is under test.
const SHORT: Duration = Duration::from_millis(300);

fn endpoint(base_url: String, dialect: Dialect, api_key: Option<&str>) -> ChatEndpoint {
    ChatEndpoint {
        base_url,
        dialect,
        model: "qwen2.5-coder:14b".into(),
        api_key: api_key.map(str::to_owned),
        timeout: ROOMY,
    }
}

/// An OpenAI chat completion as the API returns it.
fn openai_completion(content: &str) -> Value {
    json!({
        "id": "chatcmpl-123",
        "object": "chat.completion",
        "created": 1_730_000_000,
        "model": "qwen2.5-coder:14b",
        "system_fingerprint": "fp_ollama",
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": content},
            "finish_reason": "stop",
        }],
        "usage": {"prompt_tokens": 120, "completion_tokens": 1, "total_tokens": 121},
    })
}

/// An Ollama `/api/chat` answer with `"stream": false`.
fn ollama_chat(content: &str) -> Value {
    json!({
        "model": "qwen2.5-coder:14b",
        "created_at": "2025-06-01T12:00:00.000000Z",
        "message": {"role": "assistant", "content": content},
        "done_reason": "stop",
        "done": true,
        "total_duration": 512_000_000,
        "load_duration": 2_000_000,
        "prompt_eval_count": 120,
        "prompt_eval_duration": 100_000_000,
        "eval_count": 2,
        "eval_duration": 10_000_000,
    })
}

/// A server for `dialect` that replies `content` on its route and 404s elsewhere, like the real
/// servers (OpenAI dialect served under `/v1`, as Ollama and llama.cpp do).
fn chat_server(dialect: Dialect, content: &'static str) -> HttpServer {
    HttpServer::start(move |request: &Request| match (dialect, request.path()) {
        (Dialect::OpenAi, "/v1/chat/completions") => Reply::json(200, &openai_completion(content)),
        (Dialect::Ollama, "/api/chat") => Reply::json(200, &ollama_chat(content)),
        _ => Reply::text(404, "404 page not found"),
    })
}

fn base(server: &HttpServer, dialect: Dialect) -> String {
    match dialect {
        Dialect::OpenAi => format!("{}/v1", server.url()),
        Dialect::Ollama => server.url(),
    }
}

/// A port with nothing listening on it.
fn closed_port_url() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    format!("http://127.0.0.1:{port}")
}

fn assert_no_key(error: &LlmError) {
    for text in [error.to_string(), format!("{error:?}")] {
        assert!(!text.contains("SECRETKEY"), "the key leaked: {text}");
    }
}

#[test]
fn openai_request_is_a_chat_completion_with_temperature_0_and_the_bearer_key() {
    let server = chat_server(Dialect::OpenAi, "yes");
    let endpoint = endpoint(format!("{}/v1/", server.url()), Dialect::OpenAi, Some(KEY));
    let reply = complete(&endpoint, "be brief", "is it looping?").unwrap();
    assert_eq!(reply, "yes");

    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    let request = &requests[0];
    assert_eq!(request.method, "POST");
    assert_eq!(request.target, "/v1/chat/completions");
    assert_eq!(request.headers["content-type"], "application/json");
    assert_eq!(request.headers["authorization"], format!("Bearer {KEY}"));
    assert_eq!(
        request.body_json(),
        json!({
            "model": "qwen2.5-coder:14b",
            "messages": [
                {"role": "system", "content": "be brief"},
                {"role": "user", "content": "is it looping?"},
            ],
            "temperature": 0,
        })
    );
}

#[test]
fn ollama_request_is_a_non_streaming_api_chat() {
    let server = chat_server(Dialect::Ollama, "no");
    let endpoint = endpoint(server.url(), Dialect::Ollama, None);
    assert_eq!(complete(&endpoint, "sys", "usr").unwrap(), "no");

    let request = &server.requests()[0];
    assert_eq!(request.method, "POST");
    assert_eq!(request.target, "/api/chat");
    assert_eq!(request.headers["content-type"], "application/json");
    assert_eq!(
        request.body_json(),
        json!({
            "model": "qwen2.5-coder:14b",
            "messages": [
                {"role": "system", "content": "sys"},
                {"role": "user", "content": "usr"},
            ],
            "stream": false,
            "options": {"temperature": 0},
        })
    );
}

#[test]
fn the_bearer_header_is_sent_exactly_when_a_key_is_set() {
    for dialect in [Dialect::OpenAi, Dialect::Ollama] {
        let server = chat_server(dialect, "yes");
        for (key, expected) in [
            (None, None),
            (Some(""), None),
            (Some("   "), None),
            (Some(KEY), Some(format!("Bearer {KEY}"))),
        ] {
            complete(&endpoint(base(&server, dialect), dialect, key), "s", "u").unwrap();
            let requests = server.requests();
            let last = requests.last().unwrap();
            assert_eq!(
                last.headers.get("authorization"),
                expected.as_ref(),
                "{dialect:?} {key:?}"
            );
        }
    }
}

#[test]
fn opinions_are_read_with_the_strict_parser() {
    let cases: [(&'static str, Option<LlmOpinion>); 11] = [
        ("yes", Some(LlmOpinion::Yes)),
        ("no", Some(LlmOpinion::No)),
        (" Yes\n", Some(LlmOpinion::Yes)),
        ("NO", Some(LlmOpinion::No)),
        // The strict parser: punctuation or explanation is no opinion.
        ("Yes.", None),
        ("yes, it is looping", None),
        ("I think so", None),
        ("", None),
        // A reasoning model's leading think block is dropped, nothing else.
        (
            "<think>It read lib.rs 14 times.</think>\nyes",
            Some(LlmOpinion::Yes),
        ),
        ("<think>no progress</think> no", Some(LlmOpinion::No)),
        ("yes <think>x</think>", None),
    ];
    for dialect in [Dialect::OpenAi, Dialect::Ollama] {
        for (content, expected) in cases {
            let server = chat_server(dialect, content);
            let opinion = ask_loop_opinion(
                &endpoint(base(&server, dialect), dialect, None),
                "build",
                "x14",
            )
            .unwrap();
            assert_eq!(opinion, expected, "{dialect:?} {content:?}");
        }
    }
}

#[test]
fn the_opinion_request_carries_the_prompt() {
    let server = chat_server(Dialect::Ollama, "yes");
    let summary = "top: read src/lib.rs x14 in the last 60 calls";
    ask_loop_opinion(
        &endpoint(server.url(), Dialect::Ollama, None),
        "build",
        summary,
    )
    .unwrap();
    let (system, user) = loop_opinion_prompt("build", summary);
    assert!(system.contains("yes") && system.contains("no"), "{system}");
    assert!(user.contains("build") && user.contains(summary), "{user}");
    assert_eq!(
        server.requests()[0].body_json()["messages"],
        json!([
            {"role": "system", "content": system},
            {"role": "user", "content": user},
        ])
    );
}

#[test]
fn openai_content_given_as_text_parts_is_joined() {
    let server = HttpServer::start(|_| {
        Reply::json(
            200,
            &json!({"choices": [{"message": {"role": "assistant", "content": [
                {"type": "text", "text": "ye"}, {"type": "text", "text": "s"}
            ]}}]}),
        )
    });
    let opinion =
        ask_loop_opinion(&endpoint(server.url(), Dialect::OpenAi, None), "build", "x").unwrap();
    assert_eq!(opinion, Some(LlmOpinion::Yes));
}

#[test]
fn malformed_or_contentless_json_is_an_error_naming_the_endpoint() {
    let answers: [(&'static str, Reply); 5] = [
        ("not json", Reply::text(200, "{\"choices\": [")),
        ("html", Reply::text(200, "<html>proxy login</html>")),
        ("no choices", Reply::json(200, &json!({"choices": []}))),
        (
            "null content",
            Reply::json(200, &json!({"choices": [{"message": {"content": null}}]})),
        ),
        (
            "error on 200",
            Reply::json(200, &json!({"error": "model 'qwen' not found"})),
        ),
    ];
    for (what, answer) in answers {
        for dialect in [Dialect::OpenAi, Dialect::Ollama] {
            let answer = answer.clone();
            let server = HttpServer::start(move |_| answer.clone());
            let endpoint = endpoint(server.url(), dialect, Some(KEY));
            let error = ask_loop_opinion(&endpoint, "build", "x").unwrap_err();
            assert!(
                matches!(&error, LlmError::Garbage { url, .. } if url.starts_with(&server.url())),
                "{what} {dialect:?}: {error:?}"
            );
            assert_no_key(&error);
        }
    }
    // The server's own error message is kept.
    let server =
        HttpServer::start(|_| Reply::json(200, &json!({"error": "model 'qwen' not found"})));
    let error = complete(&endpoint(server.url(), Dialect::Ollama, None), "s", "u").unwrap_err();
    assert!(
        error.to_string().contains("model 'qwen' not found"),
        "{error}"
    );
}

#[test]
fn a_500_is_a_status_error_naming_the_url_and_hiding_the_key() {
    // An OpenAI-style 401 that quotes the key back, and an Ollama-style 500.
    let server = HttpServer::start(|request| match request.path() {
        "/v1/chat/completions" => Reply::json(
            401,
            &json!({"error": {"message": format!("Incorrect API key provided: {KEY}"), "type": "invalid_request_error"}}),
        ),
        _ => Reply::json(
            500,
            &json!({"error": "llama runner process has terminated"}),
        ),
    });
    let openai = endpoint(format!("{}/v1", server.url()), Dialect::OpenAi, Some(KEY));
    let error = complete(&openai, "s", "u").unwrap_err();
    let url = format!("{}/v1/chat/completions", server.url());
    match &error {
        LlmError::Status {
            url: u,
            status,
            body,
        } => {
            assert_eq!(u, &url);
            assert_eq!(*status, 401);
            assert!(
                body.contains("Incorrect API key provided: <redacted>"),
                "{body}"
            );
        }
        other => panic!("expected a status error, got {other:?}"),
    }
    assert!(error.to_string().contains(&url));
    assert_no_key(&error);

    let ollama = endpoint(server.url(), Dialect::Ollama, Some(KEY));
    let error = ask_loop_opinion(&ollama, "build", "x").unwrap_err();
    assert!(
        matches!(&error, LlmError::Status { status: 500, url, body } if *url == format!("{}/api/chat", server.url()) && body.contains("llama runner")),
        "{error:?}"
    );
}

#[test]
fn a_hanging_server_is_a_timeout_error_within_the_timeout() {
    for dialect in [Dialect::OpenAi, Dialect::Ollama] {
        let server = HttpServer::start(|_| Reply::Hang);
        let mut endpoint = endpoint(server.url(), dialect, Some(KEY));
        endpoint.timeout = SHORT;
        let started = Instant::now();
        let error = ask_loop_opinion(&endpoint, "build", "x").unwrap_err();
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
        assert!(
            matches!(&error, LlmError::Timeout { url, timeout, .. }
                if url.starts_with(&server.url()) && *timeout == SHORT),
            "{error:?}"
        );
        assert_no_key(&error);
    }
}

#[test]
fn a_closed_port_or_a_bad_url_is_an_unreachable_error() {
    let base_url = closed_port_url();
    let error = complete(
        &endpoint(base_url.clone(), Dialect::Ollama, Some(KEY)),
        "s",
        "u",
    )
    .unwrap_err();
    assert!(
        matches!(&error, LlmError::Unreachable { url, .. } if *url == format!("{base_url}/api/chat")),
        "{error:?}"
    );
    assert_no_key(&error);

    let error = complete(
        &endpoint(format!("not a url {KEY}"), Dialect::OpenAi, Some(KEY)),
        "s",
        "u",
    )
    .unwrap_err();
    assert_no_key(&error);
}

#[test]
fn the_endpoint_debug_hides_the_key_and_url_credentials() {
    let endpoint = endpoint(
        "https://user:SECRETKEYpw@api.example.com/v1?api-key=SECRETKEYq".into(),
        Dialect::OpenAi,
        Some(KEY),
    );
    let debug = format!("{endpoint:?}");
    assert!(!debug.contains("SECRETKEY"), "{debug}");
    assert!(debug.contains("api_key: Some(<redacted>)"), "{debug}");
    assert!(
        debug.contains("https://api.example.com/v1?<redacted>"),
        "{debug}"
    );
}
