//! # agentwatch-llm: the LLM second opinion
//!
//! When the loop detector flags a session, agentwatch may ask a chat model whether the agent is
//! really stuck ("Alert lifecycle" of the design; `decisions.md` section 2). This crate makes that
//! one call and nothing else: [`complete`] sends a system and a user message to a chat endpoint,
//! [`loop_opinion_prompt`] builds the question, and [`ask_loop_opinion`] asks it and reads the
//! answer with [`alert_state::parse_llm_opinion`].
//!
//! Two wire dialects:
//!
//! | [`Dialect`] | request | answer read from |
//! |---|---|---|
//! | [`OpenAi`](Dialect::OpenAi) | `POST {base_url}/chat/completions` `{"model", "messages", "temperature": 0}` | `choices[0].message.content` (a string, or a list of text parts) |
//! | [`Ollama`](Dialect::Ollama) | `POST {base_url}/api/chat` `{"model", "messages", "stream": false, "options": {"temperature": 0}}` | `message.content` |
//!
//! Both send `Authorization: Bearer KEY` exactly when a non-blank key is set (Ollama itself needs
//! none; a proxy in front of it may).
//!
//! `base_url` is `http://127.0.0.1:11434/v1` or `https://api.openai.com/v1` for the OpenAI
//! dialect (Ollama, llama.cpp, vLLM and LM Studio all serve it) and `http://127.0.0.1:11434` for
//! Ollama's native API.
//!
//! ## The answer is strict
//!
//! The prompt asks for exactly `yes` or `no`. The reply goes through
//! [`parse_llm_opinion`]: trimmed, ASCII case-insensitive `yes` /
//! `no`; anything else (`Yes.`, `yes, it loops`, an empty reply) is no opinion, `Ok(None)`, not an
//! error. One allowance: a reasoning model's leading `<think>…</think>` block is dropped first, as
//! it is the model's scratch work, not its answer.
//!
//! ## Failures
//!
//! Every request has `timeout` as its connect and whole-request timeout. Unreachable servers,
//! timeouts, non-2xx answers and answers that are not the dialect's JSON are [`LlmError`]s naming
//! the request URL. The API key never appears in an error (server answers are scrubbed of it) nor
//! in `ChatEndpoint`'s `Debug`.
//!
//! ```no_run
//! use agentwatch_llm::{ChatEndpoint, Dialect, ask_loop_opinion};
//! use std::time::Duration;
//!
//! let endpoint = ChatEndpoint {
//!     base_url: "http://127.0.0.1:11434".into(),
//!     dialect: Dialect::Ollama,
//!     model: "qwen2.5-coder:14b".into(),
//!     api_key: None,
//!     timeout: Duration::from_secs(30),
//! };
//! match ask_loop_opinion(&endpoint, "build", "read src/lib.rs 14 times in the last 60 calls") {
//!     Ok(opinion) => println!("opinion: {opinion:?}"), // Some(Yes), Some(No) or None
//!     Err(e) => eprintln!("no opinion: {e}"),
//! }
//! ```
#![forbid(unsafe_code)]

use agentwatch_http::{Client, Redacted, Settings, Target, head, shown_url};
use alert_state::{LlmOpinion, parse_llm_opinion};
use serde_json::{Value, json};
use std::fmt;
use std::time::Duration;

/// Largest answer body read.
const MAX_BODY_BYTES: u64 = 4 * 1024 * 1024;
/// How much of the detector's summary goes into the prompt.
const SUMMARY_PROMPT_CHARS: usize = 4000;

/// Which chat API the endpoint speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// OpenAI chat completions (`/chat/completions`), also served by Ollama under `/v1`.
    OpenAi,
    /// Ollama's native `/api/chat`.
    Ollama,
}

/// A chat model to ask.
#[derive(Clone, PartialEq, Eq)]
pub struct ChatEndpoint {
    /// `http://127.0.0.1:11434/v1` (OpenAI dialect) or `http://127.0.0.1:11434` (Ollama); a
    /// trailing `/` is ignored.
    pub base_url: String,
    pub dialect: Dialect,
    pub model: String,
    /// Sent as `Authorization: Bearer KEY` when set and not blank. Never shown.
    pub api_key: Option<String>,
    /// Connect timeout and whole-request timeout.
    pub timeout: Duration,
}

impl fmt::Debug for ChatEndpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ChatEndpoint")
            .field("base_url", &shown_url(&self.base_url))
            .field("dialect", &self.dialect)
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| Redacted))
            .field("timeout", &self.timeout)
            .finish()
    }
}

/// Why no reply could be had. `url` is the request URL (user-info and query hidden); no variant
/// holds the API key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LlmError {
    /// No connection (refused, DNS, TLS, bad URL).
    #[error("{url}: unreachable: {message}")]
    Unreachable { url: String, message: String },
    /// No complete answer within the endpoint's timeout.
    #[error("{url}: no answer within {timeout:?} ({message})")]
    Timeout {
        url: String,
        timeout: Duration,
        message: String,
    },
    /// A non-2xx answer; `body` is its head.
    #[error("{url}: HTTP {status}: {body}")]
    Status {
        url: String,
        status: u16,
        body: String,
    },
    /// A 2xx answer that is not the dialect's JSON, or holds no reply text.
    #[error("{url}: answer is not the expected chat JSON: {message}")]
    Garbage { url: String, message: String },
}

agentwatch_http::impl_from_http_error!(LlmError);

/// Sends one system and one user message; the model's reply text, as it is.
///
/// # Errors
/// [`LlmError`] when the endpoint is unreachable, times out, answers non-2xx, or answers with
/// something that is not the dialect's JSON with a reply text in it.
pub fn complete(endpoint: &ChatEndpoint, system: &str, user: &str) -> Result<String, LlmError> {
    let base = endpoint.base_url.trim_end_matches('/');
    let messages = json!([
        { "role": "system", "content": system },
        { "role": "user", "content": user },
    ]);
    let (url, body) = match endpoint.dialect {
        Dialect::OpenAi => (
            format!("{base}/chat/completions"),
            json!({ "model": endpoint.model, "messages": messages, "temperature": 0 }),
        ),
        Dialect::Ollama => (
            format!("{base}/api/chat"),
            json!({
                "model": endpoint.model,
                "messages": messages,
                "stream": false,
                "options": { "temperature": 0 },
            }),
        ),
    };
    let mut target = Target::new(url);
    if let Some(key) = &endpoint.api_key {
        target = target.with_secret(key);
    }
    let bearer = endpoint
        .api_key
        .as_deref()
        .map(str::trim)
        .filter(|key| !key.is_empty())
        .map(|key| format!("Bearer {key}"));
    let garbage = |message: &str| LlmError::Garbage {
        url: target.shown().to_owned(),
        message: target.scrub(message),
    };
    let answer = Client::new(Settings {
        max_body_bytes: MAX_BODY_BYTES,
        ..Settings::new(endpoint.timeout)
    })
    .post_json(
        &target,
        bearer.as_deref().map(|b| ("authorization", b)).as_slice(),
        &body.to_string(),
    )?
    .body;
    let value: Value = serde_json::from_str(&answer).map_err(|e| garbage(&e.to_string()))?;
    let content = match endpoint.dialect {
        Dialect::OpenAi => value
            .pointer("/choices/0/message/content")
            .and_then(content_text),
        Dialect::Ollama => value.pointer("/message/content").and_then(content_text),
    };
    content.ok_or_else(|| {
        let found = value
            .pointer("/error/message")
            .or_else(|| value.get("error"))
            .map_or_else(
                || "no reply text in it".to_owned(),
                |e| {
                    format!(
                        "error: {}",
                        head(
                            &e.as_str().map_or_else(|| e.to_string(), str::to_owned),
                            200
                        )
                    )
                },
            );
        garbage(&found)
    })
}

/// A message content: a string, or (some OpenAI-compatible servers) a list of `{type: "text",
/// text}` parts, joined.
fn content_text(content: &Value) -> Option<String> {
    match content {
        Value::String(text) => Some(text.clone()),
        Value::Array(parts) => {
            let texts: Vec<&str> = parts
                .iter()
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect();
            (!texts.is_empty()).then(|| texts.concat())
        }
        _ => None,
    }
}

/// The system and user messages asking whether an agent is stuck in a loop, answered by exactly
/// `yes` or `no`. `summary` is the detector's reason (cut to 4000 characters).
#[must_use]
pub fn loop_opinion_prompt(agent: &str, summary: &str) -> (String, String) {
    let agent = agent.trim();
    let agent = if agent.is_empty() {
        "unknown agent"
    } else {
        agent
    };
    let system = "You check alerts from a watchdog that monitors AI coding agents. An agent is \
                  stuck in a loop when it keeps repeating the same tool calls (reading the same \
                  files, running the same commands) without making progress. Answer with exactly \
                  one word, in lowercase: yes if the evidence shows the agent is stuck in a loop, \
                  no if it does not. No punctuation, no explanation."
        .to_owned();
    let user = format!(
        "Agent: {agent}\nWhat the loop detector saw:\n{}\n\nIs this agent stuck in a loop? \
         Answer yes or no.",
        head(summary.trim(), SUMMARY_PROMPT_CHARS)
    );
    (system, user)
}

/// Asks whether `agent` is stuck in a loop; the strict answer.
///
/// `Ok(None)` when the model answered something other than `yes` / `no` (after dropping a
/// leading `<think>…</think>` block).
///
/// # Errors
/// As [`complete`].
pub fn ask_loop_opinion(
    endpoint: &ChatEndpoint,
    agent: &str,
    summary: &str,
) -> Result<Option<LlmOpinion>, LlmError> {
    let (system, user) = loop_opinion_prompt(agent, summary);
    let reply = complete(endpoint, &system, &user)?;
    Ok(parse_llm_opinion(without_think_block(&reply)))
}

/// The reply without a leading `<think>…</think>` block (reasoning models' scratch work).
fn without_think_block(reply: &str) -> &str {
    let trimmed = reply.trim_start();
    match trimmed
        .strip_prefix("<think>")
        .and_then(|rest| rest.split_once("</think>"))
    {
        Some((_, answer)) => answer,
        None => reply,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_leading_think_block_is_dropped_and_nothing_else() {
        assert_eq!(without_think_block("<think>hmm</think>\nyes"), "\nyes");
        assert_eq!(without_think_block("  <think>a\nb</think>no "), "no ");
        assert_eq!(
            without_think_block("<think>unclosed yes"),
            "<think>unclosed yes"
        );
        assert_eq!(
            without_think_block("yes <think>x</think>"),
            "yes <think>x</think>"
        );
    }

    #[test]
    fn the_prompt_names_the_agent_and_asks_for_yes_or_no() {
        let (system, user) = loop_opinion_prompt("  ", &"x".repeat(5000));
        assert!(system.contains("exactly one word"));
        assert!(user.starts_with("Agent: unknown agent\n"));
        assert!(user.ends_with("Answer yes or no."));
        assert!(user.len() < 4200);
    }
}
