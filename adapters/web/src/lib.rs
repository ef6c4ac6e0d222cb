//! # agentwatch-web: `agentwatch serve`
//!
//! The admin surfaces over the SQLite store: the pages (Loops panel, Watchdog card, tree page,
//! models, recovery), the JSON API with the seed's paths, live edits of the nine allowlisted
//! config keys, and `GET /metrics` in the Prometheus text format.
//!
//! The server is [`tiny_http`] with a few worker threads: blocking, no async runtime, which fits
//! rusqlite's blocking calls. Every request opens its own read-only connection (WAL lets it read
//! while a job writes, and never holds a lock a tick waits on); the only writes are a channel
//! setting (one upsert) and the config overlay (temp file + rename).
//!
//! ## Safety
//! - Loopback by default. [`Server::bind`] refuses any other address unless a token is set.
//! - Every POST needs `Authorization: Bearer <token>` when a token is set; a POST whose `Origin`
//!   (or `Sec-Fetch-Site`) says it comes from another site is refused; a POST body must be JSON
//!   (`Content-Type: application/json`, which a cross-site form cannot send without a preflight,
//!   and no CORS header is ever sent).
//! - Without a token, a request whose `Host` is not a loopback name is refused (DNS rebinding).
//! - Channel secrets never reach this crate: it gets names, types and gates ([`ChannelInfo`]),
//!   and the test alert goes through the caller's [`TestAlert`].
#![forbid(unsafe_code)]

mod api;
mod config_edit;
mod metrics;
mod pages;

pub use config_edit::{CONFIG_KEYS, ConfigEditError};

use detect_core::DetectConfig;
use serde::Serialize;
use std::io::Read;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;

/// The address `serve` listens on by default.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8080";
/// The largest POST body read.
pub const MAX_BODY: usize = 64 * 1024;

/// Why the server did not start.
#[derive(Debug, thiserror::Error)]
pub enum WebError {
    #[error(
        "refusing to listen on {0} without a token: set serve.token_env to a variable holding one, or listen on 127.0.0.1"
    )]
    NeedsToken(SocketAddr),
    #[error("cannot listen on {addr}: {message}")]
    Bind { addr: SocketAddr, message: String },
}

/// One configured channel as the browser may see it: no URL, no key, no token.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ChannelInfo {
    pub name: String,
    #[serde(rename = "type")]
    pub channel_type: String,
    /// From the configuration (a stored setting overrides it).
    pub enabled: bool,
    pub min_severity: String,
    pub rate_limit_s: u64,
}

/// What happened to one test delivery.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Delivery {
    pub channel: String,
    /// `sent`, `warning` or `failed`.
    pub result: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// Sends a test alert through the configured channels; the caller owns the channels' secrets.
pub trait TestAlert: Send + Sync {
    /// Deliver a test event of `severity` to `channel` (or to every enabled channel whose gate
    /// the severity passes), with the stored channel settings applied. `Err`: no such channel.
    fn send(
        &self,
        severity: alert_state::Severity,
        channel: Option<&str>,
        now: i64,
    ) -> Result<Vec<Delivery>, String>;
}

/// The link an alert carries: `watchdog.dashboard_base_url` (the pages are served under `/` and
/// under `/admin`) followed by the tree page of `root`, `/trees/{root}`.
pub fn tree_link(dashboard_base_url: &str, root: &str) -> String {
    format!(
        "{}{}",
        dashboard_base_url.trim_end_matches('/'),
        api::tree_path(root)
    )
}

/// The clock: unix seconds.
pub type Clock = Arc<dyn Fn() -> i64 + Send + Sync>;

/// The system clock.
pub fn system_clock() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

/// Everything `serve` needs.
#[derive(Clone)]
pub struct ServeOptions {
    pub listen: SocketAddr,
    /// The store (it may not exist yet: pages then say no tick ran).
    pub db: PathBuf,
    /// `config.local.toml`, where config edits go; `None` refuses edits (no config file).
    pub config_local: Option<PathBuf>,
    /// The detector configuration in force at start (edits in `config_local` apply over it).
    pub detector: DetectConfig,
    /// Required on every POST when set; required to listen beyond loopback.
    pub token: Option<String>,
    pub channels: Vec<ChannelInfo>,
    pub test_alert: Option<Arc<dyn TestAlert>>,
    /// Base of the links alerts carry (`watchdog.dashboard_base_url`), shown on pages.
    pub dashboard_base_url: String,
    /// The recovery notice file of `agentwatch recover`, read by the recovery page.
    pub recover_notice: Option<PathBuf>,
    /// `recover.cooldown` in seconds.
    pub recover_cooldown_s: u32,
    /// Worker threads (each serves one request at a time).
    pub threads: usize,
    pub clock: Clock,
}

impl std::fmt::Debug for ServeOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServeOptions")
            .field("listen", &self.listen)
            .field("db", &self.db)
            .field("config_local", &self.config_local)
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field("channels", &self.channels)
            .field("threads", &self.threads)
            .finish_non_exhaustive()
    }
}

impl ServeOptions {
    /// Defaults: loopback `127.0.0.1:8080`, no token, no channels, the system clock.
    pub fn new(db: PathBuf) -> Self {
        Self {
            listen: DEFAULT_LISTEN.parse().expect("constant address"),
            db,
            config_local: None,
            detector: DetectConfig::default(),
            token: None,
            channels: Vec::new(),
            test_alert: None,
            dashboard_base_url: "http://127.0.0.1:8080/admin".to_owned(),
            recover_notice: None,
            recover_cooldown_s: 3600,
            threads: 4,
            clock: Arc::new(system_clock),
        }
    }
}

/// A bound server; [`Server::run`] serves until [`Server::stop`] (or [`Server::spawn`]).
pub struct Server {
    http: Arc<tiny_http::Server>,
    app: Arc<api::App>,
    addr: SocketAddr,
    stopping: Arc<AtomicBool>,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server").field("addr", &self.addr).finish()
    }
}

impl Server {
    /// Bind the listening socket (loopback, or any address with a token).
    pub fn bind(options: ServeOptions) -> Result<Self, WebError> {
        let addr = options.listen;
        if !addr.ip().is_loopback() && options.token.as_deref().is_none_or(str::is_empty) {
            return Err(WebError::NeedsToken(addr));
        }
        let http = tiny_http::Server::http(addr).map_err(|e| WebError::Bind {
            addr,
            message: e.to_string(),
        })?;
        let addr = http.server_addr().to_ip().unwrap_or(addr);
        Ok(Self {
            http: Arc::new(http),
            app: Arc::new(api::App::new(options)),
            addr,
            stopping: Arc::new(AtomicBool::new(false)),
        })
    }

    /// The address actually bound (port 0 picks one).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Serve on the worker threads until stopped; returns when every worker has ended.
    pub fn run(&self) {
        let threads = self.app.options.threads.max(1);
        let workers: Vec<JoinHandle<()>> = (0..threads)
            .map(|_| {
                let http = Arc::clone(&self.http);
                let app = Arc::clone(&self.app);
                let stopping = Arc::clone(&self.stopping);
                std::thread::spawn(move || worker(&http, &app, &stopping))
            })
            .collect();
        for w in workers {
            let _ = w.join();
        }
    }

    /// Run on a background thread; the handle stops it.
    pub fn spawn(self) -> Running {
        let http = Arc::clone(&self.http);
        let stopping = Arc::clone(&self.stopping);
        let threads = self.app.options.threads.max(1);
        let addr = self.addr;
        let thread = std::thread::spawn(move || self.run());
        Running {
            addr,
            http,
            stopping,
            threads,
            thread: Some(thread),
        }
    }

    /// Ask the workers to end after their current request.
    pub fn stop(&self) {
        stop(&self.http, &self.stopping, self.app.options.threads.max(1));
    }
}

fn stop(http: &tiny_http::Server, stopping: &AtomicBool, threads: usize) {
    stopping.store(true, Ordering::SeqCst);
    for _ in 0..threads {
        http.unblock();
    }
}

/// A server running on a background thread; dropping it stops it.
pub struct Running {
    addr: SocketAddr,
    http: Arc<tiny_http::Server>,
    stopping: Arc<AtomicBool>,
    threads: usize,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for Running {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Running").field("addr", &self.addr).finish()
    }
}

impl Running {
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://ADDR`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        stop(&self.http, &self.stopping, self.threads);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn worker(http: &tiny_http::Server, app: &api::App, stopping: &AtomicBool) {
    while !stopping.load(Ordering::SeqCst) {
        let Ok(mut request) = http.recv() else {
            continue;
        };
        if stopping.load(Ordering::SeqCst) {
            let _ = request.respond(tiny_http::Response::empty(503));
            return;
        }
        let reply = serve_one(app, &mut request);
        let _ = request.respond(reply.into_response());
    }
}

/// A request as the handlers see it.
#[derive(Debug)]
pub(crate) struct Incoming {
    pub method: String,
    pub path: String,
    pub query: String,
    headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Incoming {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// A query parameter's raw value.
    pub fn query_param(&self, key: &str) -> Option<&str> {
        self.query
            .split('&')
            .filter_map(|kv| kv.split_once('=').or(Some((kv, ""))))
            .find(|(k, _)| *k == key)
            .map(|(_, v)| v)
    }
}

/// A response.
#[derive(Debug)]
pub(crate) struct Reply {
    pub status: u16,
    pub content_type: &'static str,
    pub body: Vec<u8>,
    pub headers: Vec<(&'static str, String)>,
}

impl Reply {
    pub fn json(status: u16, value: &impl Serialize) -> Self {
        Self {
            status,
            content_type: "application/json",
            body: serde_json::to_vec(value).unwrap_or_default(),
            headers: Vec::new(),
        }
    }

    /// `{"error": message, "field": field}` with `status`.
    pub fn error(status: u16, field: Option<&str>, message: impl Into<String>) -> Self {
        let mut value = serde_json::json!({ "error": message.into() });
        if let Some(f) = field {
            value["field"] = serde_json::Value::from(f);
        }
        Self::json(status, &value)
    }

    pub fn html(status: u16, body: String) -> Self {
        Self {
            status,
            content_type: "text/html; charset=utf-8",
            body: body.into_bytes(),
            headers: Vec::new(),
        }
    }

    pub fn text(status: u16, content_type: &'static str, body: impl Into<Vec<u8>>) -> Self {
        Self {
            status,
            content_type,
            body: body.into(),
            headers: Vec::new(),
        }
    }

    fn into_response(self) -> tiny_http::Response<std::io::Cursor<Vec<u8>>> {
        let mut response = tiny_http::Response::from_data(self.body).with_status_code(self.status);
        let fixed = [
            ("Content-Type", self.content_type.to_owned()),
            ("Cache-Control", "no-store".to_owned()),
            ("X-Content-Type-Options", "nosniff".to_owned()),
            ("X-Frame-Options", "DENY".to_owned()),
            ("Referrer-Policy", "no-referrer".to_owned()),
            (
                "Content-Security-Policy",
                "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'none'; frame-ancestors 'none'; base-uri 'none'"
                    .to_owned(),
            ),
        ];
        for (name, value) in fixed.into_iter().chain(self.headers) {
            if let Ok(h) = tiny_http::Header::from_bytes(name.as_bytes(), value.as_bytes()) {
                response.add_header(h);
            }
        }
        response
    }
}

fn serve_one(app: &api::App, request: &mut tiny_http::Request) -> Reply {
    let url = request.url().to_owned();
    let (path, query) = url.split_once('?').unwrap_or((url.as_str(), ""));
    let headers = request
        .headers()
        .iter()
        .map(|h| {
            (
                h.field.as_str().as_str().to_owned(),
                h.value.as_str().to_owned(),
            )
        })
        .collect();
    let mut incoming = Incoming {
        method: request.method().as_str().to_ascii_uppercase(),
        path: path.to_owned(),
        query: query.to_owned(),
        headers,
        body: Vec::new(),
    };
    if incoming.method == "POST" {
        let mut body = Vec::new();
        let limit = u64::try_from(MAX_BODY).unwrap_or(u64::MAX) + 1;
        if request
            .as_reader()
            .take(limit)
            .read_to_end(&mut body)
            .is_err()
        {
            return Reply::error(400, None, "the request body could not be read");
        }
        if body.len() > MAX_BODY {
            return Reply::error(413, None, format!("body over {MAX_BODY} bytes"));
        }
        incoming.body = body;
    }
    app.handle(&incoming)
}
