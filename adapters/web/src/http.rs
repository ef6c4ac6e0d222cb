//! The HTTP stack: hyper's HTTP/1.1 server on a current-thread tokio runtime, every request and
//! connection bounded in memory and time ([`Limits`]).
//!
//! ```text
//! accept (at most max_connections open; the rest wait in the kernel's backlog)
//!  -> connection: hyper http1 (request line + headers <= max_head_bytes, <= max_headers,
//!     read within header_timeout, also the keep-alive idle time), writes that make no
//!     progress for write_stall drop it, closed after connection_lifetime
//!  -> RequestBodyLimit (tower-http: a Content-Length or a body over max_body_bytes is a 413)
//!  -> Timeout (tower-http: reading the body and the handler within request_timeout, else 408)
//!  -> read the body (before any handler slot: a slow body holds only its own connection)
//!  -> ConcurrencyLimit (tower: at most `handlers` requests in the handlers at once)
//!  -> the handler on the blocking pool (rusqlite), its reply counted against
//!     response_budget_bytes until the last byte of it is written or dropped
//! ```
//!
//! A panic in a handler is a 500 for that request; nothing a request does ends the server.
//!
//! Every answer is JSON with the security headers of every other answer, the limits' own
//! included ([`limit_reply`]): the 413 and 408 the tower layers answer by themselves are
//! replaced on their way out (`uniform`), and the 400, 414 and 431 hyper writes by itself when a
//! head does not parse or is too large are replaced on the socket, where they are the only
//! answers without our headers ([`StallGuard`] swallows them and writes ours, then the
//! connection closes as hyper closes it).

use crate::api::App;
use crate::{Incoming, Reply};
use bytes::Bytes;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming as Body;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};
use tower::ServiceBuilder;
use tower_http::body::Limited;
use tower_http::limit::RequestBodyLimitLayer;
use tower_http::timeout::TimeoutLayer;

/// The error of a response body as hyper takes it.
type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// What one request and one connection may cost. The defaults keep the whole server under about
/// 64 MB whatever arrives: response bytes are bounded by `response_budget_bytes`, handlers by
/// `handlers`, and each open connection holds at most a head buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Connections served at once; more wait in the kernel's listen backlog.
    pub max_connections: usize,
    /// The request line and headers together (hyper's read buffer; at least 8,192).
    pub max_head_bytes: usize,
    /// Header lines in one request.
    pub max_headers: usize,
    /// A request body (every POST body is a small JSON object).
    pub max_body_bytes: usize,
    /// The request line and headers must arrive within this; also how long an idle keep-alive
    /// connection is kept.
    pub header_timeout: Duration,
    /// Reading the body, waiting for a handler and the handler itself.
    pub request_timeout: Duration,
    /// A write that makes no progress for this long drops the connection (a client that does
    /// not read its answer).
    pub write_stall: Duration,
    /// A connection is closed (after its current request) this long after it opened.
    pub connection_lifetime: Duration,
    /// Requests in the handlers at once (each a short blocking SQLite read).
    pub handlers: usize,
    /// Answer bytes held at once, written or waiting to be; a request waits for room within its
    /// `request_timeout`, else it is a 408.
    pub response_budget_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_connections: 512,
            max_head_bytes: 16 * 1024,
            max_headers: 64,
            max_body_bytes: 64 * 1024,
            header_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(10),
            write_stall: Duration::from_secs(10),
            connection_lifetime: Duration::from_secs(120),
            handlers: 4,
            response_budget_bytes: 16 * 1024 * 1024,
        }
    }
}

/// How long a connection past its lifetime may take to finish its current answer.
const CLOSING_GRACE: Duration = Duration::from_secs(5);
/// The wait after a failed `accept` (out of file descriptors): the connections open finish first.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);
/// The unit of the response budget.
const BUDGET_UNIT: usize = 1024;

/// Serve on `listener` until `stop` turns true. Runs on the caller's thread (its own runtime).
pub(crate) fn serve(
    listener: std::net::TcpListener,
    app: Arc<App>,
    stop: watch::Receiver<bool>,
) -> io::Result<()> {
    let limits = app.options.limits;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .max_blocking_threads(limits.handlers.max(1))
        .thread_name("agentwatch-web")
        .build()?;
    let result = runtime.block_on(accept_loop(listener, app, stop));
    // Connections still open are dropped; a handler still running finishes on its own.
    runtime.shutdown_timeout(Duration::from_millis(200));
    result
}

async fn accept_loop(
    listener: std::net::TcpListener,
    app: Arc<App>,
    mut stop: watch::Receiver<bool>,
) -> io::Result<()> {
    listener.set_nonblocking(true)?;
    let listener = TcpListener::from_std(listener)?;
    let limits = app.options.limits;
    let connections = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let shared = Shared {
        app,
        handlers: Arc::new(Semaphore::new(limits.handlers.max(1))),
        budget: Arc::new(Semaphore::new(budget_units(limits.response_budget_bytes))),
    };
    loop {
        let permit = tokio::select! {
            _ = stop.wait_for(|s| *s) => return Ok(()),
            p = Arc::clone(&connections).acquire_owned() => p,
        };
        let Ok(permit) = permit else { return Ok(()) };
        let accepted = tokio::select! {
            _ = stop.wait_for(|s| *s) => return Ok(()),
            a = listener.accept() => a,
        };
        match accepted {
            Ok((stream, _)) => {
                let shared = shared.clone();
                tokio::spawn(async move {
                    connection(stream, shared, limits).await;
                    drop(permit);
                });
            }
            // Out of descriptors or a connection reset before it was taken: not the server's end.
            Err(_) => tokio::time::sleep(ACCEPT_BACKOFF).await,
        }
    }
}

fn budget_units(bytes: usize) -> usize {
    (bytes / BUDGET_UNIT).clamp(1, Semaphore::MAX_PERMITS)
}

/// What every connection's requests share.
#[derive(Clone)]
struct Shared {
    app: Arc<App>,
    handlers: Arc<Semaphore>,
    budget: Arc<Semaphore>,
}

async fn connection(stream: TcpStream, shared: Shared, limits: Limits) {
    let _ = stream.set_nodelay(true);
    let io = TokioIo::new(StallGuard::new(stream, limits));
    let service = ServiceBuilder::new()
        .map_response(move |response| uniform(response, &limits))
        .layer(RequestBodyLimitLayer::new(limits.max_body_bytes))
        .layer(TimeoutLayer::with_status_code(
            StatusCode::REQUEST_TIMEOUT,
            limits.request_timeout,
        ))
        .service_fn(move |request: Request<Limited<Body>>| {
            let shared = shared.clone();
            async move { Ok::<_, std::convert::Infallible>(answer(request, shared).await) }
        });
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .max_buf_size(limits.max_head_bytes.max(8192))
        .max_headers(limits.max_headers)
        .keep_alive(true);
    let conn = builder.serve_connection(io, TowerToHyperService::new(service));
    let mut conn = std::pin::pin!(conn);
    if tokio::time::timeout(limits.connection_lifetime, conn.as_mut())
        .await
        .is_err()
    {
        conn.as_mut().graceful_shutdown();
        let _ = tokio::time::timeout(CLOSING_GRACE, conn).await;
    }
}

/// One request: its body read, then a handler slot, the handler, and room for its answer.
async fn answer(request: Request<Limited<Body>>, shared: Shared) -> Response<Full<Bytes>> {
    let (parts, body) = request.into_parts();
    let body = match body.collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => {
            let max = shared.app.options.limits.max_body_bytes;
            return respond(
                Reply::error(413, None, format!("body over {max} bytes")),
                None,
            );
        }
        Err(_) => {
            return respond(
                Reply::error(400, None, "the request body could not be read"),
                None,
            );
        }
    };
    let incoming = Incoming::from_parts(&parts, body.to_vec());
    let Ok(slot) = Arc::clone(&shared.handlers).acquire_owned().await else {
        return respond(Reply::error(503, None, "the server is stopping"), None);
    };
    let app = Arc::clone(&shared.app);
    let handled = tokio::task::spawn_blocking(move || crate::route::handle(&app, &incoming)).await;
    drop(slot);
    let reply = handled.unwrap_or_else(|_| Reply::error(500, None, "the request failed"));
    // An answer larger than the whole budget waits for all of it.
    let total = budget_units(shared.app.options.limits.response_budget_bytes);
    let want = reply.body.len().div_ceil(BUDGET_UNIT).clamp(1, total);
    let want = u32::try_from(want).unwrap_or(u32::MAX);
    match Arc::clone(&shared.budget).acquire_many_owned(want).await {
        Ok(room) => respond(reply, Some(room)),
        Err(_) => respond(Reply::error(503, None, "the server is stopping"), None),
    }
}

/// The answer the server's own limits give for `status`, as JSON with every answer's headers:
/// 400 (a head that does not parse), 408, 413, 414 and 431, saying which limit.
pub(crate) fn limit_reply(status: u16, limits: &Limits) -> Reply {
    let message = match status {
        400 => "the request is not HTTP/1.1 this server reads".to_owned(),
        408 => format!(
            "the request did not arrive within {} s",
            limits.request_timeout.as_secs()
        ),
        413 => format!("body over {} bytes", limits.max_body_bytes),
        414 => "the request target is too long".to_owned(),
        431 => format!(
            "request line and headers over {} bytes or {} header lines",
            limits.max_head_bytes, limits.max_headers
        ),
        _ => StatusCode::from_u16(status)
            .ok()
            .and_then(|s| s.canonical_reason())
            .unwrap_or("refused")
            .to_owned(),
    };
    Reply::error(status, None, message)
}

/// Whether a response carries the headers every answer of ours has (a layer's own does not).
fn ours<B>(response: &Response<B>) -> bool {
    response.headers().contains_key(MARK_HEADER)
}

/// The header that marks an answer as ours (one of [`Reply::all_headers`]' fixed ones).
const MARK_HEADER: &str = "x-content-type-options";

/// A response as it leaves: ours as it is, a tower layer's own (413, 408) replaced by
/// [`limit_reply`].
fn uniform<B>(response: Response<B>, limits: &Limits) -> Response<UnsyncBoxBody<Bytes, BoxError>>
where
    B: hyper::body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    if ours(&response) {
        return response.map(|body| body.map_err(Into::into).boxed_unsync());
    }
    let reply = limit_reply(response.status().as_u16(), limits);
    respond(reply, None).map(|body| body.map_err(|never| match never {}).boxed_unsync())
}

/// The raw bytes of a [`limit_reply`] on a connection that closes after it (hyper's own answers
/// replaced on the socket).
fn limit_answer_bytes(status: u16, limits: &Limits) -> Vec<u8> {
    let reply = limit_reply(status, limits);
    let reason = StatusCode::from_u16(status)
        .ok()
        .and_then(|s| s.canonical_reason())
        .unwrap_or("");
    let mut head = format!("HTTP/1.1 {status} {reason}\r\n");
    for (name, value) in reply.all_headers() {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str(&format!(
        "content-length: {}\r\nconnection: close\r\n\r\n",
        reply.body.len()
    ));
    [head.into_bytes(), reply.body].concat()
}

/// The status of an answer hyper wrote by itself, when `bytes` begin one: a status line and a
/// head without our [`MARK_HEADER`].
fn hypers_own(bytes: &[u8]) -> Option<u16> {
    let rest = bytes.strip_prefix(b"HTTP/1.1 ")?;
    let status = std::str::from_utf8(rest.get(..3)?).ok()?.parse().ok()?;
    let end = bytes.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = String::from_utf8_lossy(&bytes[..end]).to_ascii_lowercase();
    (!head.contains(MARK_HEADER)).then_some(status)
}

/// The answer's bytes, holding their share of the response budget until the last reference to
/// them (hyper's write buffer) is dropped.
struct Budgeted {
    body: Vec<u8>,
    _room: Option<OwnedSemaphorePermit>,
}

impl AsRef<[u8]> for Budgeted {
    fn as_ref(&self) -> &[u8] {
        &self.body
    }
}

fn respond(reply: Reply, room: Option<OwnedSemaphorePermit>) -> Response<Full<Bytes>> {
    let status = StatusCode::from_u16(reply.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let headers = reply.all_headers();
    let body = Bytes::from_owner(Budgeted {
        body: reply.body,
        _room: room,
    });
    let mut response = Response::new(Full::new(body));
    *response.status_mut() = status;
    for (name, value) in headers {
        if let (Ok(name), Ok(value)) = (
            hyper::header::HeaderName::from_bytes(name.as_bytes()),
            hyper::header::HeaderValue::from_str(&value),
        ) {
            response.headers_mut().append(name, value);
        }
    }
    response
}

/// A socket whose writes fail once they make no progress for `stall` (a client that stopped
/// reading), so an answer it never takes is not kept for ever; and where an answer hyper writes
/// by itself ([`hypers_own`]) is replaced by ours ([`limit_answer_bytes`]).
struct StallGuard {
    stream: TcpStream,
    limits: Limits,
    waiting: Option<Pin<Box<tokio::time::Sleep>>>,
    /// Our answer in place of hyper's own, and how much of it is written; once set, whatever
    /// hyper writes after is taken and dropped (it closes the connection after such an answer).
    replaced: Option<(Vec<u8>, usize)>,
}

impl StallGuard {
    fn new(stream: TcpStream, limits: Limits) -> Self {
        Self {
            stream,
            limits,
            waiting: None,
            replaced: None,
        }
    }

    /// Write what is left of our replacing answer: ready once all of it is written.
    fn drain(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while let Some((bytes, at)) = self.replaced.as_mut().filter(|(b, at)| *at < b.len()) {
            let rest = bytes[*at..].to_vec();
            match self.guard(cx, |s, cx| s.poll_write(cx, &rest)) {
                Poll::Ready(Ok(0)) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                Poll::Ready(Ok(n)) => {
                    if let Some((_, at)) = self.replaced.as_mut() {
                        *at += n;
                    }
                }
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            }
        }
        Poll::Ready(Ok(()))
    }

    /// A write of hyper's: `first` is its first bytes, `len` all of them. `None`: write them as
    /// they are; else what to tell hyper (taken whole, ours written in their place).
    fn take_over(
        &mut self,
        cx: &mut Context<'_>,
        first: &[u8],
        len: usize,
    ) -> Option<Poll<io::Result<usize>>> {
        if self.replaced.is_none() {
            let status = hypers_own(first)?;
            self.replaced = Some((limit_answer_bytes(status, &self.limits), 0));
        }
        Some(self.drain(cx).map_ok(|()| len))
    }

    /// `poll` of a write: progress clears the stall timer, a pending write starts it.
    fn guard<T>(
        &mut self,
        cx: &mut Context<'_>,
        poll: impl FnOnce(Pin<&mut TcpStream>, &mut Context<'_>) -> Poll<io::Result<T>>,
    ) -> Poll<io::Result<T>> {
        match poll(Pin::new(&mut self.stream), cx) {
            Poll::Ready(result) => {
                self.waiting = None;
                Poll::Ready(result)
            }
            Poll::Pending => {
                let stall = self.limits.write_stall;
                let timer = self
                    .waiting
                    .get_or_insert_with(|| Box::pin(tokio::time::sleep(stall)));
                if timer.as_mut().poll(cx).is_ready() {
                    self.waiting = None;
                    return Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        "the client took nothing for too long",
                    )));
                }
                Poll::Pending
            }
        }
    }
}

impl AsyncRead for StallGuard {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for StallGuard {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if let Some(taken) = this.take_over(cx, buf, buf.len()) {
            return taken;
        }
        this.guard(cx, |s, cx| s.poll_write(cx, buf))
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let first = bufs
            .iter()
            .find(|b| !b.is_empty())
            .map_or(&[][..], |b| &b[..]);
        let len = bufs.iter().map(|b| b.len()).sum();
        if let Some(taken) = this.take_over(cx, first, len) {
            return taken;
        }
        this.guard(cx, |s, cx| s.poll_write_vectored(cx, bufs))
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.drain(cx)?.is_pending() {
            return Poll::Pending;
        }
        this.guard(cx, AsyncWrite::poll_flush)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.drain(cx)?.is_pending() {
            return Poll::Pending;
        }
        this.guard(cx, AsyncWrite::poll_shutdown)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_counts_kibibytes_and_never_zero() {
        assert_eq!(budget_units(0), 1);
        assert_eq!(budget_units(1024), 1);
        assert_eq!(budget_units(16 * 1024 * 1024), 16 * 1024);
    }
}
