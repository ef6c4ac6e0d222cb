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

use alert_state::{LlmOpinion, parse_llm_opinion};
use serde_json::{Value, json};
use std::fmt;
use std::time::Duration;

/// Largest answer body read.
const MAX_BODY_BYTES: u64 = 4 * 1024 * 1024;
/// How much of an answer an error keeps.
const BODY_HEAD_CHARS: usize = 200;
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

/// Shown in place of a secret.
struct Redacted;

impl fmt::Debug for Redacted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
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
    let call = Call::new(endpoint, &url);
    let answer = call.post(&body.to_string())?;
    let value: Value = serde_json::from_str(&answer).map_err(|e| call.garbage(&e.to_string()))?;
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
        call.garbage(&found)
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

/// One POST to a chat endpoint.
struct Call<'a> {
    endpoint: &'a ChatEndpoint,
    url: &'a str,
    shown_url: String,
    secrets: Vec<String>,
}

impl<'a> Call<'a> {
    fn new(endpoint: &'a ChatEndpoint, url: &'a str) -> Self {
        let parts = url_parts(url);
        let mut secrets = parts.secrets;
        if let Some(key) = &endpoint.api_key {
            secrets.push(key.clone());
            secrets.push(key.trim().to_owned());
        }
        let mut call = Self {
            endpoint,
            url,
            shown_url: String::new(),
            secrets,
        };
        // A key pasted into the URL itself is hidden there too.
        call.shown_url = call.scrub(&parts.shown);
        call
    }

    fn post(&self, body: &str) -> Result<String, LlmError> {
        let timeout = self.endpoint.timeout;
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_connect(Some(timeout))
            .timeout_global(Some(timeout))
            .http_status_as_error(false)
            .max_redirects(0)
            .build()
            .into();
        let mut request = agent
            .post(self.url)
            .header("content-type", "application/json");
        if let Some(key) = self.endpoint.api_key.as_deref().map(str::trim)
            && !key.is_empty()
        {
            request = request.header("authorization", format!("Bearer {key}"));
        }
        let mut response = request.send(body).map_err(|e| self.transport_error(&e))?;
        let status = response.status().as_u16();
        let read = response
            .body_mut()
            .with_config()
            .limit(MAX_BODY_BYTES)
            .read_to_vec();
        if !(200..=299).contains(&status) {
            let text = read
                .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
                .unwrap_or_default();
            return Err(LlmError::Status {
                url: self.shown_url.clone(),
                status,
                body: self.scrub(&head(text.trim(), BODY_HEAD_CHARS)),
            });
        }
        let bytes = read.map_err(|e| self.transport_error(&e))?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }

    fn transport_error(&self, error: &ureq::Error) -> LlmError {
        let url = self.shown_url.clone();
        let message = self.scrub(&error.to_string());
        let timed_out = match error {
            ureq::Error::Timeout(_) => true,
            ureq::Error::Io(io) => matches!(
                io.kind(),
                std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock
            ),
            _ => false,
        };
        if timed_out {
            LlmError::Timeout {
                url,
                timeout: self.endpoint.timeout,
                message,
            }
        } else {
            LlmError::Unreachable { url, message }
        }
    }

    fn garbage(&self, message: &str) -> LlmError {
        LlmError::Garbage {
            url: self.shown_url.clone(),
            message: self.scrub(message),
        }
    }

    fn scrub(&self, text: &str) -> String {
        let mut text = text.to_owned();
        for secret in self.secrets.iter().filter(|s| !s.trim().is_empty()) {
            text = text.replace(secret.as_str(), "<redacted>");
        }
        text
    }
}

/// The first `n` characters of `text`, with `…` when cut.
fn head(text: &str, n: usize) -> String {
    let mut chars = text.chars();
    let kept: String = chars.by_ref().take(n).collect();
    if chars.next().is_some() {
        format!("{kept}…")
    } else {
        kept
    }
}

/// A URL's shown form (`scheme://host/path`, user-info dropped, query as `?<redacted>`,
/// fragment dropped) and its secret parts.
struct UrlParts {
    shown: String,
    secrets: Vec<String>,
}

fn url_parts(url: &str) -> UrlParts {
    let mut secrets = Vec::new();
    let rest = match url.split_once('#') {
        Some((rest, fragment)) => {
            secrets.push(fragment.to_owned());
            rest
        }
        None => url,
    };
    let (rest, query) = match rest.split_once('?') {
        Some((rest, query)) => (rest, Some(query)),
        None => (rest, None),
    };
    let (scheme, after_scheme) = match rest.split_once("://") {
        Some((scheme, after)) => (Some(scheme), after),
        None => (None, rest),
    };
    let (authority, path) = match after_scheme.find('/') {
        Some(at) => after_scheme.split_at(at),
        None => (after_scheme, ""),
    };
    let host = match authority.rsplit_once('@') {
        Some((userinfo, host)) => {
            secrets.push(userinfo.to_owned());
            if let Some((_, password)) = userinfo.split_once(':') {
                secrets.push(password.to_owned());
            }
            host
        }
        None => authority,
    };
    let mut shown = match scheme {
        Some(scheme) => format!("{scheme}://{host}{path}"),
        None => format!("{host}{path}"),
    };
    if let Some(query) = query {
        secrets.push(query.to_owned());
        if !query.is_empty() {
            shown.push_str("?<redacted>");
        }
    }
    UrlParts { shown, secrets }
}

fn shown_url(url: &str) -> String {
    url_parts(url).shown
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
    fn urls_lose_userinfo_and_query() {
        assert_eq!(
            shown_url("https://u:p@api.example.com/v1/chat/completions?key=k#f"),
            "https://api.example.com/v1/chat/completions?<redacted>"
        );
        assert_eq!(shown_url("nonsense"), "nonsense");
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
