//! opencode's HTTP API (1.18.33), read with ureq.
//!
//! Every request has a connect timeout and a whole-request timeout (a server that accepts the
//! connection and never answers must not stall a tick: opencode itself hangs on requests that
//! arrive just before it is ready). Basic auth is sent when a password is configured.
//! Failures come back as [`SourceError`]s naming the server; the caller skips and reports them.

use crate::convert::session_from_messages;
use crate::lite::{LiteMessage, parse_messages};
use detect_core::Session;
use serde_json::Value;
use std::time::Duration;

/// Where an opencode server is and how to authenticate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerSpec {
    /// Base URL, e.g. `http://127.0.0.1:4096`.
    pub url: String,
    /// Basic-auth user (opencode's default is `opencode`).
    pub username: String,
    /// Basic-auth password (`OPENCODE_SERVER_PASSWORD` of the server); never logged.
    pub password: Option<String>,
}

impl ServerSpec {
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into().trim_end_matches('/').to_owned(),
            username: "opencode".to_owned(),
            password: None,
        }
    }
}

/// Request timeouts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    pub connect: Duration,
    /// The whole request, headers and body.
    pub request: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Self {
            connect: Duration::from_secs(2),
            request: Duration::from_secs(10),
        }
    }
}

/// Why a server, or one of its sessions, could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SourceError {
    #[error("{url}: unreachable: {message}")]
    Unreachable { url: String, message: String },
    #[error("{url}: no answer within the timeout ({message})")]
    Timeout { url: String, message: String },
    #[error("{url}: 401 unauthorized (set the server password)")]
    Unauthorized { url: String },
    #[error("{url}: HTTP {status}: {body}")]
    Status {
        url: String,
        status: u16,
        body: String,
    },
    #[error("{url}: answer is not the expected JSON: {message}")]
    Garbage { url: String, message: String },
}

/// Largest response body read (a session's messages with big tool outputs can be large).
const MAX_BODY_BYTES: u64 = 512 * 1024 * 1024;
/// Messages asked for per page of `/session/:id/message`.
pub const MESSAGE_PAGE: usize = 500;

/// A client for one opencode server.
#[derive(Debug, Clone)]
pub struct OpencodeServer {
    spec: ServerSpec,
    agent: ureq::Agent,
    authorization: Option<String>,
    page_size: usize,
}

/// One page of a JSON answer and the cursor to the page before it.
struct Page<T> {
    body: T,
    next_cursor: Option<String>,
}

impl OpencodeServer {
    pub fn new(spec: ServerSpec, timeouts: Timeouts) -> Self {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_connect(Some(timeouts.connect))
            .timeout_global(Some(timeouts.request))
            .http_status_as_error(false)
            .build()
            .into();
        let authorization = spec.password.as_ref().map(|password| {
            format!(
                "Basic {}",
                base64(format!("{}:{password}", spec.username).as_bytes())
            )
        });
        Self {
            spec,
            agent,
            authorization,
            page_size: MESSAGE_PAGE,
        }
    }

    /// Ask for `n` messages per page (at least 1).
    pub fn with_page_size(mut self, n: usize) -> Self {
        self.page_size = n.max(1);
        self
    }

    pub fn url(&self) -> &str {
        &self.spec.url
    }

    fn get(&self, path_and_query: &str) -> Result<Page<Value>, SourceError> {
        self.get_parsed(path_and_query, |text| serde_json::from_str(text))
    }

    /// GET a JSON answer and parse it with `parse`.
    fn get_parsed<T>(
        &self,
        path_and_query: &str,
        parse: impl Fn(&str) -> Result<T, serde_json::Error>,
    ) -> Result<Page<T>, SourceError> {
        let url = format!("{}{path_and_query}", self.spec.url);
        let mut request = self.agent.get(&url);
        if let Some(auth) = &self.authorization {
            request = request.header("Authorization", auth);
        }
        let mut response = request.call().map_err(|e| self.transport_error(&e))?;
        let status = response.status().as_u16();
        let next_cursor = response
            .headers()
            .get("x-next-cursor")
            .and_then(|v| v.to_str().ok())
            .filter(|v| !v.is_empty())
            .map(str::to_owned);
        let text = response
            .body_mut()
            .with_config()
            .limit(MAX_BODY_BYTES)
            .read_to_string()
            .map_err(|e| self.transport_error(&e))?;
        match status {
            200..=299 => {}
            401 => {
                return Err(SourceError::Unauthorized {
                    url: self.spec.url.clone(),
                });
            }
            _ => {
                return Err(SourceError::Status {
                    url: url.clone(),
                    status,
                    body: text.chars().take(200).collect(),
                });
            }
        }
        let body = parse(&text).map_err(|e| SourceError::Garbage {
            url,
            message: e.to_string(),
        })?;
        Ok(Page { body, next_cursor })
    }

    fn transport_error(&self, error: &ureq::Error) -> SourceError {
        let url = self.spec.url.clone();
        let message = error.to_string();
        match error {
            ureq::Error::Timeout(_) => SourceError::Timeout { url, message },
            ureq::Error::Io(io) if io.kind() == std::io::ErrorKind::TimedOut => {
                SourceError::Timeout { url, message }
            }
            _ => SourceError::Unreachable { url, message },
        }
    }

    /// `GET /global/health`: `{"healthy": true, "version": "…"}`.
    pub fn health(&self) -> Result<Value, SourceError> {
        Ok(self.get("/global/health")?.body)
    }

    /// Session infos of every project (`GET /experimental/session`), falling back to the
    /// server's current project (`GET /session`) on servers without the experimental route.
    pub fn list_sessions(&self) -> Result<Vec<Value>, SourceError> {
        let page = match self.get("/experimental/session") {
            Ok(page) => page,
            Err(SourceError::Status { status: 404, .. }) => self.get("/session")?,
            Err(e) => return Err(e),
        };
        match page.body {
            Value::Array(list) => Ok(list.into_iter().filter(|s| s.get("id").is_some()).collect()),
            other => Err(self.garbage("/experimental/session", &other, "a list of sessions")),
        }
    }

    fn garbage(&self, path: &str, value: &Value, expected: &str) -> SourceError {
        let kind = match value {
            Value::Object(_) => "an object",
            Value::Array(_) => "a list",
            Value::String(_) => "a string",
            _ => "a scalar",
        };
        SourceError::Garbage {
            url: format!("{}{path}", self.spec.url),
            message: format!("expected {expected}, found {kind}"),
        }
    }

    /// All messages of a session in chronological order, following the `before` cursor.
    pub fn messages(&self, session_id: &str) -> Result<Vec<Value>, SourceError> {
        let parse = |text: &str| match serde_json::from_str(text)? {
            Value::Array(list) => Ok(list),
            _ => Err(serde::de::Error::custom("expected a list of messages")),
        };
        Ok(self.paged_messages(session_id, parse, |_| false)?.0)
    }

    /// The messages of a session after the one with id `cursor` (all of them without a cursor),
    /// read leanly (see [`crate::lite`]). The flag says whether the cursor was found; if not,
    /// the whole history came back.
    pub fn messages_after(
        &self,
        session_id: &str,
        cursor: Option<&str>,
    ) -> Result<(Vec<LiteMessage>, bool), SourceError> {
        self.paged_messages(session_id, parse_messages, |m: &LiteMessage| {
            cursor.is_some_and(|c| m.info.id == c)
        })
    }

    /// Pages of `/session/:id/message`, newest first, until a page holds a message for which
    /// `known` is true (that message and the older ones are dropped). Chronological order.
    fn paged_messages<T>(
        &self,
        session_id: &str,
        parse: impl Fn(&str) -> Result<Vec<T>, serde_json::Error>,
        known: impl Fn(&T) -> bool,
    ) -> Result<(Vec<T>, bool), SourceError> {
        let id = encode_component(session_id);
        let mut pages: Vec<Vec<T>> = Vec::new();
        let mut cursor: Option<String> = None;
        let mut found = false;
        loop {
            let path = match &cursor {
                None => format!("/session/{id}/message?limit={}", self.page_size),
                Some(c) => format!(
                    "/session/{id}/message?limit={}&before={}",
                    self.page_size,
                    encode_component(c)
                ),
            };
            let page = self.get_parsed(&path, &parse)?;
            let mut messages = page.body;
            if let Some(at) = messages.iter().rposition(&known) {
                messages.drain(..=at);
                pages.push(messages);
                found = true;
                break;
            }
            let done = messages.is_empty() || page.next_cursor.is_none();
            pages.push(messages);
            if done || cursor == page.next_cursor {
                break;
            }
            cursor = page.next_cursor;
        }
        Ok((pages.into_iter().rev().flatten().collect(), found))
    }

    /// Every session of the server with its calls. A session whose messages cannot be read is
    /// reported in the second list and left out; the listing failing fails the server.
    pub fn fetch_sessions(&self) -> Result<(Vec<Session>, Vec<SourceError>), SourceError> {
        let infos = self.list_sessions()?;
        let mut sessions = Vec::with_capacity(infos.len());
        let mut problems = Vec::new();
        for info in &infos {
            let id = info.get("id").and_then(Value::as_str).unwrap_or_default();
            let converted = self.messages(id).and_then(|messages| {
                session_from_messages(info, &messages).map_err(|e| SourceError::Garbage {
                    url: format!("{}/session/{id}/message", self.spec.url),
                    message: e.to_string(),
                })
            });
            match converted {
                Ok(session) => sessions.push(session),
                Err(e) => problems.push(e),
            }
        }
        Ok((sessions, problems))
    }
}

/// Percent-encode a path or query component (unreserved characters kept).
fn encode_component(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b'.' | b'~') {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// Standard base64 with padding (for the Basic auth header).
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_rfc4648_vectors() {
        for (plain, encoded) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("opencode:s3cret", "b3BlbmNvZGU6czNjcmV0"),
        ] {
            assert_eq!(base64(plain.as_bytes()), encoded);
        }
    }

    #[test]
    fn components_are_percent_encoded() {
        assert_eq!(encode_component("ses_ab-C.~"), "ses_ab-C.~");
        assert_eq!(encode_component("a b/c=="), "a%20b%2Fc%3D%3D");
    }
}
