//! opencode's HTTP API (1.18.33), read with ureq.
//!
//! Every request has a connect timeout and a whole-request timeout (a server that accepts the
//! connection and never answers must not stall a tick: opencode itself hangs on requests that
//! arrive just before it is ready). Basic auth is sent when a password is configured.
//! Failures come back as [`SourceError`]s naming the server; the caller skips and reports them.

use crate::convert::session_from_messages;
use crate::listing::read_listing;
pub use crate::listing::{MAX_LISTED_SESSIONS, MAX_TITLE_BYTES, SessionInfo, SessionTime};
use crate::lite::{LiteMessage, read_messages};
use crate::problem::parse_problem;
use crate::sse::{Event, Frame, FrameParser, parse_event};
use agentwatch_http::{
    Client, Failure, HttpError, Redacted, Settings, Target, basic_auth, percent_encode,
};
use detect_core::Session;
use serde_json::Value;
use std::collections::VecDeque;
use std::io::Read;
use std::time::{Duration, Instant};

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
    /// A session whose messages need more pages than [`Limits::max_pages`] (a server that
    /// always answers with a new `x-next-cursor`); what was read of it is dropped.
    #[error("{url}: more than {pages} pages of messages (the limit); session not read")]
    TooManyPages { url: String, pages: usize },
    /// An answer body longer than [`Limits::max_body_bytes`]: read no further, nothing of it
    /// used.
    #[error("{url}: answer larger than {limit} bytes (the limit); not read")]
    TooLarge { url: String, limit: u64 },
    /// Not asked: the deadline set with [`OpencodeServer::with_deadline`] passed first.
    #[error("{url}: skipped: the tick deadline passed")]
    Skipped { url: String },
}

impl SourceError {
    /// Whether this is a request the deadline left out (a tick reports these as skipped).
    #[must_use]
    pub fn is_skipped(&self) -> bool {
        matches!(self, Self::Skipped { .. })
    }
}

/// How much one server may make a tick read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest answer body read (a page of messages with big tool outputs can be large).
    pub max_body_bytes: u64,
    /// Most pages of messages read for one session in one call.
    pub max_pages: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_body_bytes: MAX_BODY_BYTES,
            max_pages: MAX_PAGES,
        }
    }
}

/// Largest response body read by default (a page of messages with big tool outputs).
pub const MAX_BODY_BYTES: u64 = 256 * 1024 * 1024;
/// Most pages of messages read per session by default: 200 pages of [`MESSAGE_PAGE`] is
/// 100 000 messages.
pub const MAX_PAGES: usize = 200;
/// How much of an answer's body is buffered between the socket and the JSON parser.
const READ_BUFFER: usize = 64 * 1024;
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
    max_pages: usize,
    deadline: Option<Instant>,
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
            .field("max_pages", &self.max_pages)
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
        Self::with_limits(spec, timeouts, Limits::default())
    }

    /// A client reading at most `limits` (see [`Limits`]).
    pub fn with_limits(spec: ServerSpec, timeouts: Timeouts, limits: Limits) -> Self {
        let client = Client::new(Settings {
            connect: timeouts.connect,
            request: timeouts.request,
            max_body_bytes: limits.max_body_bytes,
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
            max_pages: limits.max_pages.max(1),
            deadline: None,
        }
    }

    /// No request of this client runs past `deadline` (a tick's `opencode.source_deadline_s`):
    /// each request's timeout is cut to what is left, and once it passed every request fails
    /// at once with [`SourceError::Skipped`], so the tick goes on and reports what it skipped.
    #[must_use]
    pub fn with_deadline(mut self, deadline: Instant) -> Self {
        self.client = self.client.until(deadline);
        self.deadline = Some(deadline);
        self
    }

    /// Whether the deadline set with [`OpencodeServer::with_deadline`] has passed (a request
    /// that timed out then was cut by it).
    #[must_use]
    pub fn late(&self) -> bool {
        self.deadline.is_some_and(|d| Instant::now() >= d)
    }

    /// Ask for `n` messages per page (at least 1).
    pub fn with_page_size(mut self, n: usize) -> Self {
        self.page_size = n.max(1);
        self
    }

    pub fn url(&self) -> &str {
        &self.spec.url
    }

    /// The server URL as it may be shown, logged or stored: a password in it (`user:pw@`), a
    /// secret parameter or path key redacted ([`agentwatch_http::shown_url`]).
    pub fn shown_url(&self) -> &str {
        self.base.shown()
    }

    fn get(&self, path_and_query: &str) -> Result<Page<Value>, SourceError> {
        self.get_parsed(path_and_query, |body| serde_json::from_reader(body))
    }

    /// GET a JSON answer and parse it with `parse` as it arrives: what the parser keeps is
    /// held, never the answer's text (a huge or broken body costs what was built of it, and a
    /// broken one is dropped at its first bad byte). A body over [`Limits::max_body_bytes`]
    /// is [`SourceError::TooLarge`].
    fn get_parsed<T>(
        &self,
        path_and_query: &str,
        parse: impl Fn(&mut dyn Read) -> Result<T, serde_json::Error>,
    ) -> Result<Page<T>, SourceError> {
        let target = self.base.join(path_and_query);
        if self.late() {
            return Err(SourceError::Skipped {
                url: target.shown().to_owned(),
            });
        }
        let authorization = self.authorization.as_deref().map(|a| ("Authorization", a));
        let mut body = self
            .client
            .get_body(&target, authorization.as_slice())
            .map_err(|e| self.source_error(e))?;
        let next_cursor = body
            .header("x-next-cursor")
            .filter(|v| !v.is_empty())
            .map(str::to_owned);
        // serde_json reads a reader byte by byte: a buffer in between.
        let parsed = parse(&mut std::io::BufReader::with_capacity(
            READ_BUFFER,
            &mut body,
        ));
        if body.over_limit() {
            return Err(SourceError::TooLarge {
                url: target.shown().to_owned(),
                limit: body.limit(),
            });
        }
        if let Some(failure) = body.failure() {
            return Err(self.source_error(failure.clone()));
        }
        let body = parsed.map_err(|e| SourceError::Garbage {
            url: target.shown().to_owned(),
            message: parse_problem(&e),
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
    ///
    /// The list is read typed as it streams ([`crate::listing`]): only the fields agentwatch
    /// uses are kept, one entry per session id, at most [`MAX_LISTED_SESSIONS`]; a list holding
    /// anything but session objects with a string `id`, or more sessions, is an error, never a
    /// shorter (and so "complete") list. Each info comes back as the JSON object of its kept
    /// fields.
    pub fn list_sessions(&self) -> Result<Vec<Value>, SourceError> {
        Ok(self
            .list_session_infos()?
            .into_iter()
            .map(SessionInfo::into_json)
            .collect())
    }

    /// As [`OpencodeServer::list_sessions`], typed.
    pub fn list_session_infos(&self) -> Result<Vec<SessionInfo>, SourceError> {
        let parse = |body: &mut dyn Read| read_listing(body, MAX_LISTED_SESSIONS);
        match self.get_parsed("/experimental/session", parse) {
            Ok(page) => Ok(page.body),
            Err(SourceError::Status { status: 404, .. }) => {
                Ok(self.get_parsed("/session", parse)?.body)
            }
            Err(e) => Err(e),
        }
    }

    /// All messages of a session in chronological order, following the `before` cursor.
    pub fn messages(&self, session_id: &str) -> Result<Vec<Value>, SourceError> {
        let parse = |body: &mut dyn Read| match serde_json::from_reader(body)? {
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
        self.paged_messages(
            session_id,
            |r: &mut dyn Read| read_messages(r),
            |m: &LiteMessage| cursor.is_some_and(|c| m.info.id == c),
        )
    }

    /// The id of a session's newest message (`None` when it has none): one request for one
    /// message, read leanly. A session whose newest message is the stored cursor has nothing
    /// new, whatever its `time.updated` says (opencode does not bump it for calls that arrive
    /// through `POST /session/:id/shell`).
    pub fn newest_message_id(&self, session_id: &str) -> Result<Option<String>, SourceError> {
        let id = percent_encode(session_id);
        let page = self.get_parsed(
            &format!("/session/{id}/message?limit=1"),
            |r: &mut dyn Read| read_messages(r),
        )?;
        Ok(page.body.last().map(|m| m.info.id.clone()))
    }

    /// Pages of `/session/:id/message`, newest first, until a page holds a message for which
    /// `known` is true (that message and the older ones are dropped). Chronological order.
    fn paged_messages<T>(
        &self,
        session_id: &str,
        parse: impl Fn(&mut dyn Read) -> Result<Vec<T>, serde_json::Error>,
        known: impl Fn(&T) -> bool,
    ) -> Result<(Vec<T>, bool), SourceError> {
        let id = percent_encode(session_id);
        let mut pages: Vec<Vec<T>> = Vec::new();
        let mut cursor: Option<String> = None;
        let mut found = false;
        loop {
            if pages.len() >= self.max_pages {
                return Err(SourceError::TooManyPages {
                    url: self
                        .base
                        .join(&format!("/session/{id}/message"))
                        .shown()
                        .to_owned(),
                    pages: self.max_pages,
                });
            }
            let path = match &cursor {
                None => format!("/session/{id}/message?limit={}", self.page_size),
                Some(c) => format!(
                    "/session/{id}/message?limit={}&before={}",
                    self.page_size,
                    percent_encode(c)
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

    /// Open the server's event stream (`GET /global/event`, Basic auth as for the reads): the
    /// stream fails as timed out when no event (opencode sends a heartbeat every 10 s) arrives
    /// within `heartbeat`.
    ///
    /// # Errors
    /// A [`SourceError`] when the server cannot be reached or answers non-2xx (a server without
    /// the route answers 404).
    pub fn events(&self, heartbeat: Duration) -> Result<EventStream, SourceError> {
        let target = self.base.join("/global/event");
        let authorization = self.authorization.as_deref().map(|a| ("Authorization", a));
        let mut headers = vec![("Accept", "text/event-stream")];
        headers.extend(authorization);
        let stream = self
            .client
            .stream(&target, &headers, heartbeat)
            .map_err(|e| self.source_error(e))?;
        Ok(EventStream {
            stream,
            parser: FrameParser::default(),
            frames: VecDeque::new(),
            buf: vec![0; 64 * 1024],
            base: self.base.clone(),
            heartbeat,
        })
    }

    /// `POST /session/:id/abort`: stop a running session (opencode answers `true`, also for a
    /// session that was idle).
    ///
    /// # Errors
    /// A [`SourceError`] when the server cannot be reached or answers non-2xx.
    pub fn abort(&self, session_id: &str) -> Result<(), SourceError> {
        let id = percent_encode(session_id);
        let target = self.base.join(&format!("/session/{id}/abort"));
        if self.late() {
            return Err(SourceError::Skipped {
                url: target.shown().to_owned(),
            });
        }
        let authorization = self.authorization.as_deref().map(|a| ("Authorization", a));
        self.client
            .post_json(&target, authorization.as_slice(), "{}")
            .map_err(|e| self.source_error(e))?;
        Ok(())
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

/// An open event stream ([`OpencodeServer::events`]), read item by item.
pub struct EventStream {
    stream: agentwatch_http::Stream,
    parser: FrameParser,
    frames: VecDeque<Frame>,
    buf: Vec<u8>,
    base: Target,
    heartbeat: Duration,
}

impl std::fmt::Debug for EventStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventStream")
            .field("server", &self.base.shown())
            .finish_non_exhaustive()
    }
}

/// One item of an event stream.
#[derive(Debug, Clone, PartialEq)]
pub enum StreamItem {
    Event(crate::sse::Event),
    /// A frame that is not an event, or too large to keep: nothing of it was used (a follower
    /// reads the server again to learn what it said).
    Skipped(String),
}

impl EventStream {
    /// The next item, waiting for it.
    ///
    /// # Errors
    /// [`SourceError::Timeout`] when nothing arrived within the heartbeat limit, else
    /// [`SourceError::Unreachable`] when the stream ended or broke. Either way the stream is
    /// done: open a new one.
    pub fn next_item(&mut self) -> Result<StreamItem, SourceError> {
        loop {
            if let Some(frame) = self.frames.pop_front() {
                return Ok(match frame {
                    Frame::Data { data, .. } => match parse_event(&data) {
                        Ok(event) => StreamItem::Event(event),
                        Err(e) => StreamItem::Skipped(e.to_string()),
                    },
                    Frame::Oversize { bytes } => {
                        StreamItem::Skipped(format!("a frame of more than {bytes} bytes"))
                    }
                });
            }
            let url = self.base.shown().to_owned();
            let n = match self.stream.read(&mut self.buf) {
                Ok(0) => {
                    return Err(SourceError::Unreachable {
                        url,
                        message: "the event stream ended".to_owned(),
                    });
                }
                Ok(n) => n,
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock
                    ) || e.to_string().contains("timeout") =>
                {
                    return Err(SourceError::Timeout {
                        url,
                        message: format!("no event within {:?}", self.heartbeat),
                    });
                }
                Err(e) => {
                    return Err(SourceError::Unreachable {
                        url,
                        message: self.base.scrub(&format!("event stream: {e}")),
                    });
                }
            };
            let mut frames = Vec::new();
            self.parser.feed(&self.buf[..n], &mut frames);
            self.frames.extend(frames);
        }
    }

    /// The next event, skipping what is not one (each skip is passed to `skipped`).
    ///
    /// # Errors
    /// As [`EventStream::next_item`].
    pub fn next_event(&mut self, mut skipped: impl FnMut(&str)) -> Result<Event, SourceError> {
        loop {
            match self.next_item()? {
                StreamItem::Event(event) => return Ok(event),
                StreamItem::Skipped(why) => skipped(&why),
            }
        }
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
