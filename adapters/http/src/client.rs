//! Requests with ureq 3: timeouts, a body limit, and failures as one error type.

use crate::redact::{Target, head};
use std::time::{Duration, Instant};
use ureq::http::HeaderMap;

/// What ureq answers a request with.
type Response = ureq::http::Response<ureq::Body>;

/// Largest answer body read unless [`Settings::max_body_bytes`] says otherwise.
pub const DEFAULT_MAX_BODY_BYTES: u64 = 1024 * 1024;
/// How much of a non-2xx answer's body an [`HttpError`] keeps.
const BODY_HEAD_CHARS: usize = 200;
/// How much of a non-2xx answer's body is read at all: a hostile or broken server's 200 MB
/// error page costs this much, never its size (the connection is dropped after it).
pub const ERROR_BODY_READ_BYTES: u64 = 16 * 1024;

/// Idle connections a [`Client`] keeps for reuse (HTTP/1.1 keep-alive), per host and in all:
/// enough for the requests a tick keeps in flight to one server at once (ureq keeps 3 per host
/// by default, so the others would connect anew for every request).
pub const IDLE_CONNECTIONS: usize = 16;

/// How a [`Client`] talks to servers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settings {
    /// Connect timeout.
    pub connect: Duration,
    /// The whole request: connecting, sending, and reading the answer's headers and body.
    pub request: Duration,
    /// Largest answer body read; a larger one is a failure.
    pub max_body_bytes: u64,
    /// Redirects followed. With 0 a redirect is an answer like any other (a non-2xx status).
    pub max_redirects: u32,
}

impl Settings {
    /// `timeout` both to connect and for the whole request, a 1 MiB body limit, no redirects.
    #[must_use]
    pub const fn new(timeout: Duration) -> Self {
        Self {
            connect: timeout,
            request: timeout,
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            max_redirects: 0,
        }
    }
}

/// Why a request got no 2xx answer. `Display` reads `{url}: {failure}`; `url` is the target's
/// shown URL and every message is scrubbed of the target's secrets.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{url}: {failure}")]
pub struct HttpError {
    pub url: String,
    pub failure: Failure,
}

/// What went wrong with a request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Failure {
    /// No connection (refused, DNS, TLS, bad URL), or an answer that is not HTTP.
    #[error("unreachable: {message}")]
    Unreachable { message: String },
    /// No complete answer within [`Settings::request`] (or no connection within
    /// [`Settings::connect`]); `timeout` is the former.
    #[error("no answer within {timeout:?} ({message})")]
    Timeout { timeout: Duration, message: String },
    /// A non-2xx answer; `body` is the head of its (trimmed) body.
    #[error("HTTP {status}: {body}")]
    Status { status: u16, body: String },
}

/// A 2xx answer.
#[derive(Debug, Clone)]
pub struct Answer {
    pub status: u16,
    pub headers: HeaderMap,
    /// The body, lossy UTF-8.
    pub body: String,
}

impl Answer {
    /// The value of header `name` when it is there and text.
    #[must_use]
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

/// A 2xx answer's body, read as it arrives ([`Client::get_body`]): at most
/// [`Settings::max_body_bytes`], within the request's timeout. A read past the limit, or one
/// the transport failed, fails, and [`Body::failure`] then says why.
pub struct Body {
    headers: HeaderMap,
    reader: ureq::BodyReader<'static>,
    target: Target,
    timeout: Duration,
    limit: u64,
    read: u64,
    failure: Option<HttpError>,
}

impl std::fmt::Debug for Body {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Body")
            .field("url", &self.target.shown())
            .field("read", &self.read)
            .finish_non_exhaustive()
    }
}

/// What a [`Body`] returns once it failed (a reader that stopped for a reason of its own).
const BODY_FAILED: &str = "the answer's body could not be read";

impl Body {
    /// The value of header `name` when it is there and text.
    #[must_use]
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// Why the body could not be read to its end, if it could not: the transport failed (timed
    /// out, cut off), or it grew past the limit ([`Body::over_limit`]).
    #[must_use]
    pub fn failure(&self) -> Option<&HttpError> {
        self.failure.as_ref()
    }

    /// Whether the body was longer than the limit (only what fits was read).
    #[must_use]
    pub fn over_limit(&self) -> bool {
        self.read > self.limit
    }

    /// The limit the body is read to.
    #[must_use]
    pub fn limit(&self) -> u64 {
        self.limit
    }
}

impl std::io::Read for Body {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.failure.is_some() {
            return Err(std::io::Error::other(BODY_FAILED));
        }
        // One byte past the limit is asked for, so a body of exactly the limit reads whole.
        let left = (self.limit + 1).saturating_sub(self.read);
        let want = buf.len().min(usize::try_from(left).unwrap_or(usize::MAX));
        let n = match self.reader.read(&mut buf[..want]) {
            Ok(n) => n,
            Err(e) => {
                // ureq's own errors (a timeout) come wrapped in an io::Error: unwrapped here.
                let error = ureq::Error::from(e);
                self.failure = Some(transport_error(&self.target, self.timeout, &error));
                return Err(std::io::Error::other(BODY_FAILED));
            }
        };
        self.read += n as u64;
        if self.over_limit() {
            self.failure = Some(HttpError {
                url: self.target.shown().to_owned(),
                failure: Failure::Unreachable {
                    message: format!("answer larger than {} bytes (the limit)", self.limit),
                },
            });
            return Err(std::io::Error::other(BODY_FAILED));
        }
        Ok(n)
    }
}

/// A body read as it arrives ([`Client::stream`]). A read that waits longer than the stream's
/// per-read limit fails with [`std::io::ErrorKind::TimedOut`] (or `WouldBlock`).
pub struct Stream {
    reader: ureq::BodyReader<'static>,
}

impl std::fmt::Debug for Stream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stream").finish_non_exhaustive()
    }
}

impl std::io::Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.reader.read(buf)
    }
}

/// A ureq agent built from [`Settings`]: non-2xx answers are answers, not transport errors.
/// Cheap to clone; clones share connections.
#[derive(Debug, Clone)]
pub struct Client {
    agent: ureq::Agent,
    settings: Settings,
    /// No request runs past this instant (see [`Client::until`]).
    deadline: Option<Instant>,
}

impl Client {
    #[must_use]
    pub fn new(settings: Settings) -> Self {
        let agent = ureq::Agent::config_builder()
            .timeout_connect(Some(settings.connect))
            .timeout_global(Some(settings.request))
            .http_status_as_error(false)
            .max_redirects(settings.max_redirects)
            .max_idle_connections(IDLE_CONNECTIONS)
            .max_idle_connections_per_host(IDLE_CONNECTIONS)
            .build()
            .into();
        Self {
            agent,
            settings,
            deadline: None,
        }
    }

    /// This client (sharing connections) with every request's whole-request timeout cut to
    /// what is left until `deadline`; a request asked for after it fails at once as a
    /// [`Failure::Timeout`] without being sent. A job's overall deadline uses this.
    #[must_use]
    pub fn until(&self, deadline: Instant) -> Self {
        Self {
            deadline: Some(deadline),
            ..self.clone()
        }
    }

    /// The whole-request timeout of a request sent now, or the error when the deadline passed.
    fn timeout(&self, target: &Target) -> Result<Duration, HttpError> {
        let Some(deadline) = self.deadline else {
            return Ok(self.settings.request);
        };
        match deadline.checked_duration_since(Instant::now()) {
            Some(left) if !left.is_zero() => Ok(left.min(self.settings.request)),
            _ => Err(HttpError {
                url: target.shown().to_owned(),
                failure: Failure::Timeout {
                    timeout: Duration::ZERO,
                    message: "not sent: the deadline passed".to_owned(),
                },
            }),
        }
    }

    /// POSTs `body` as `application/json` with the extra `headers`.
    ///
    /// # Errors
    /// An [`HttpError`] when the server is unreachable, does not answer in time, or answers
    /// non-2xx.
    pub fn post_json(
        &self,
        target: &Target,
        headers: &[(&str, &str)],
        body: &str,
    ) -> Result<Answer, HttpError> {
        let timeout = self.timeout(target)?;
        let mut request = self
            .agent
            .post(target.url())
            .header("content-type", "application/json");
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let request = request.config().timeout_global(Some(timeout)).build();
        self.answer(target, timeout, request.send(body))
    }

    /// GETs `target` with the extra `headers`.
    ///
    /// # Errors
    /// As [`Client::post_json`].
    pub fn get(&self, target: &Target, headers: &[(&str, &str)]) -> Result<Answer, HttpError> {
        let (timeout, sent) = self.send_get(target, headers)?;
        self.answer(target, timeout, sent)
    }

    /// Sends a GET of `target` with the extra `headers` and its whole-request timeout: the
    /// timeout and what came back.
    fn send_get(
        &self,
        target: &Target,
        headers: &[(&str, &str)],
    ) -> Result<(Duration, Result<Response, ureq::Error>), HttpError> {
        let timeout = self.timeout(target)?;
        let mut request = self.agent.get(target.url());
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let request = request.config().timeout_global(Some(timeout)).build();
        Ok((timeout, request.call()))
    }

    /// GETs `target` and hands back a 2xx answer's [`Body`] to read as it arrives (a parser
    /// reading from it holds what it builds, never the whole text), within the request's
    /// timeout and up to [`Settings::max_body_bytes`].
    ///
    /// # Errors
    /// As [`Client::get`], for everything up to the answer's headers.
    pub fn get_body(&self, target: &Target, headers: &[(&str, &str)]) -> Result<Body, HttpError> {
        let (timeout, sent) = self.send_get(target, headers)?;
        let response = self.success(target, timeout, sent)?;
        let headers = response.headers().clone();
        Ok(Body {
            headers,
            // Our own count enforces the limit (with a clear error); ureq's is off.
            reader: response
                .into_body()
                .into_with_config()
                .limit(u64::MAX)
                .reader(),
            target: target.clone(),
            timeout,
            limit: self.settings.max_body_bytes,
            read: 0,
            failure: None,
        })
    }

    /// GETs `target` and hands back its body as it arrives (server-sent events): no
    /// whole-request timeout, a connect timeout and [`Settings::request`] for the answer's
    /// headers, and at most `per_read` for each read of the body (a stream whose server sends
    /// nothing, not even its heartbeat, for that long fails the read as timed out). No body
    /// limit: the reader of the stream bounds what it keeps.
    ///
    /// # Errors
    /// As [`Client::get`] for the connection and the answer's status.
    pub fn stream(
        &self,
        target: &Target,
        headers: &[(&str, &str)],
        per_read: Duration,
    ) -> Result<Stream, HttpError> {
        let timeout = self.settings.request;
        let mut request = self.agent.get(target.url());
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let request = request
            .config()
            .timeout_global(None)
            .timeout_recv_response(Some(timeout))
            .timeout_per_read(Some(per_read))
            .build();
        let mut response = request
            .call()
            .map_err(|e| transport_error(target, timeout, &e))?;
        let status = response.status().as_u16();
        if !(200..=299).contains(&status) {
            return Err(self.status_error(target, status, &mut response));
        }
        Ok(Stream {
            reader: response.into_body().into_reader(),
        })
    }

    /// A non-2xx answer as an error: only the head of its body is kept, so only a little more
    /// than that is read; a body cut short or broken keeps what arrived.
    fn status_error(
        &self,
        target: &Target,
        status: u16,
        response: &mut ureq::http::Response<ureq::Body>,
    ) -> HttpError {
        let mut bytes = Vec::new();
        let _ = std::io::Read::read_to_end(
            &mut std::io::Read::take(
                response.body_mut().as_reader(),
                ERROR_BODY_READ_BYTES.min(self.settings.max_body_bytes),
            ),
            &mut bytes,
        );
        let text = String::from_utf8_lossy(&bytes);
        HttpError {
            url: target.shown().to_owned(),
            // Scrubbed before it is cut, so that no part of a secret is kept.
            failure: Failure::Status {
                status,
                body: head(&target.scrub(text.trim()), BODY_HEAD_CHARS),
            },
        }
    }

    /// A 2xx response, or why there is none (the transport failed, or a non-2xx status).
    fn success(
        &self,
        target: &Target,
        timeout: Duration,
        sent: Result<Response, ureq::Error>,
    ) -> Result<Response, HttpError> {
        let mut response = sent.map_err(|e| transport_error(target, timeout, &e))?;
        let status = response.status().as_u16();
        if !(200..=299).contains(&status) {
            return Err(self.status_error(target, status, &mut response));
        }
        Ok(response)
    }

    fn answer(
        &self,
        target: &Target,
        timeout: Duration,
        sent: Result<Response, ureq::Error>,
    ) -> Result<Answer, HttpError> {
        let mut response = self.success(target, timeout, sent)?;
        let status = response.status().as_u16();
        let bytes = response
            .body_mut()
            .with_config()
            .limit(self.settings.max_body_bytes)
            .read_to_vec()
            .map_err(|e| transport_error(target, timeout, &e))?;
        Ok(Answer {
            status,
            headers: response.headers().clone(),
            // Valid UTF-8 (every JSON answer) is taken as it is, without a copy.
            body: String::from_utf8(bytes)
                .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()),
        })
    }
}

/// A transport failure as an [`HttpError`]: timed out, or unreachable.
fn transport_error(target: &Target, timeout: Duration, error: &ureq::Error) -> HttpError {
    let message = target.scrub(&error.to_string());
    let timed_out = match error {
        ureq::Error::Timeout(_) => true,
        // A socket read timeout shows as `WouldBlock` on Unix.
        ureq::Error::Io(io) => matches!(
            io.kind(),
            std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock
        ),
        _ => false,
    };
    let failure = if timed_out {
        Failure::Timeout { timeout, message }
    } else {
        Failure::Unreachable { message }
    };
    HttpError {
        url: target.shown().to_owned(),
        failure,
    }
}
