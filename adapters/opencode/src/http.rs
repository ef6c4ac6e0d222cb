//! opencode's HTTP API (1.18.33), read with ureq.
//!
//! Every request has a connect timeout and a whole-request timeout (a server that accepts the
//! connection and never answers must not stall a tick: opencode itself hangs on requests that
//! arrive just before it is ready). Basic auth is sent when a password is configured.
//! Failures come back as [`SourceError`]s naming the server; the caller skips and reports them.

use crate::convert::session_from_messages;
use crate::lite::{LiteMessage, parse_messages};
use agentwatch_http::{
    Client, Failure, HttpError, Redacted, Settings, Target, basic_auth, percent_encode,
};
use detect_core::Session;
use serde_json::Value;
use std::time::Duration;

/// Where an opencode server is and how to authenticate.
#[derive(Clone, PartialEq, Eq)]
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
/// Redirects followed (ureq's default).
const MAX_REDIRECTS: u32 = 10;
/// Messages asked for per page of `/session/:id/message`.
pub const MESSAGE_PAGE: usize = 500;

impl std::fmt::Debug for ServerSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerSpec")
            .field("url", &agentwatch_http::shown_url(&self.url))
            .field("username", &self.username)
            .field("password", &self.password.as_ref().map(|_| Redacted))
            .finish()
    }
}

/// A client for one opencode server.
#[derive(Clone)]
pub struct OpencodeServer {
    spec: ServerSpec,
    client: Client,
    /// The server URL, shown redacted, with the password as a secret.
    base: Target,
    authorization: Option<String>,
    page_size: usize,
}

impl std::fmt::Debug for OpencodeServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpencodeServer")
            .field("spec", &self.spec)
            .field(
                "authorization",
                &self.authorization.as_ref().map(|_| Redacted),
            )
            .field("page_size", &self.page_size)
            .finish_non_exhaustive()
    }
}

/// One page of a JSON answer and the cursor to the page before it.
struct Page<T> {
    body: T,
    next_cursor: Option<String>,
}

impl OpencodeServer {
    pub fn new(spec: ServerSpec, timeouts: Timeouts) -> Self {
        let client = Client::new(Settings {
            connect: timeouts.connect,
            request: timeouts.request,
            max_body_bytes: MAX_BODY_BYTES,
            max_redirects: MAX_REDIRECTS,
        });
        let mut base = Target::new(spec.url.as_str());
        let mut authorization = None;
        if let Some(password) = &spec.password {
            base = base.with_secret(password);
            authorization = Some(basic_auth(&spec.username, password));
        }
        Self {
            spec,
            client,
            base,
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
        let target = self.base.join(path_and_query);
        let authorization = self.authorization.as_deref().map(|a| ("Authorization", a));
        let answer = self
            .client
            .get(&target, authorization.as_slice())
            .map_err(|e| self.source_error(e))?;
        let next_cursor = answer
            .header("x-next-cursor")
            .filter(|v| !v.is_empty())
            .map(str::to_owned);
        let body = parse(&answer.body).map_err(|e| SourceError::Garbage {
            url: target.shown().to_owned(),
            message: target.scrub(&e.to_string()),
        })?;
        Ok(Page { body, next_cursor })
    }

    /// Transport failures and 401 name the server; other statuses the request URL.
    fn source_error(&self, error: HttpError) -> SourceError {
        let server = self.base.shown().to_owned();
        match error.failure {
            Failure::Unreachable { message } => SourceError::Unreachable {
                url: server,
                message,
            },
            Failure::Timeout { message, .. } => SourceError::Timeout {
                url: server,
                message,
            },
            Failure::Status { status: 401, .. } => SourceError::Unauthorized { url: server },
            Failure::Status { status, body } => SourceError::Status {
                url: error.url,
                status,
                body,
            },
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
            url: self.base.join(path).shown().to_owned(),
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
        let id = percent_encode(session_id, b"");
        let mut pages: Vec<Vec<T>> = Vec::new();
        let mut cursor: Option<String> = None;
        let mut found = false;
        loop {
            let path = match &cursor {
                None => format!("/session/{id}/message?limit={}", self.page_size),
                Some(c) => format!(
                    "/session/{id}/message?limit={}&before={}",
                    self.page_size,
                    percent_encode(c, b"")
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
                    url: format!("{}/session/{id}/message", self.base.shown()),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_never_shows_the_password() {
        let mut spec = ServerSpec::new("http://127.0.0.1:4096");
        spec.password = Some("s3cret-pw".to_owned());
        let server = OpencodeServer::new(spec.clone(), Timeouts::default());
        for shown in [format!("{spec:?}"), format!("{server:?}")] {
            assert!(!shown.contains("s3cret-pw"), "{shown}");
            assert!(!shown.contains("czNjcmV0"), "{shown}");
        }
    }
}
