//! # agentwatch-web: `agentwatch serve`
//!
//! The admin surfaces over the SQLite store: the pages (Loops panel, Watchdog card, tree page,
//! models, recovery, the recovery splash), the JSON API with the seed's paths, live edits of the
//! allowlisted config keys (through the caller's [`LiveConfig`]), the recovery notice file, and
//! `GET /metrics` in the Prometheus text format.
//!
//! The server is hyper's HTTP/1.1 on a current-thread tokio runtime with tower-http's body limit
//! and request timeout, a concurrency limit on the handlers, and size limits and timeouts on
//! every connection ([`Limits`], module `http`): a request costs bounded memory and time, and no
//! request ends the server. Handlers are blocking rusqlite reads on tokio's blocking pool; each
//! opens its own read-only connection (WAL lets it read while a job writes, and never holds a
//! lock a tick waits on); the writes are a channel setting and a blocked model (one upsert each)
//! and the caller's config edits.
//!
//! ## Safety
//! - Loopback by default. [`Server::bind`] refuses any other address unless a token is set, and
//!   beyond loopback every request (GET included) needs it: `Authorization: Bearer <token>`, or
//!   Basic with the token as password (what a browser asks for).
//! - On loopback with a token, every POST needs it.
//! - The `Host` must be an IP address, `localhost`, or a name in [`ServeOptions::allowed_hosts`]:
//!   a page on another site reaching us through DNS rebinding carries its own name.
//! - A POST whose `Origin` (or `Sec-Fetch-Site`) says it comes from another site is refused; a
//!   POST body must be JSON (`Content-Type: application/json`, which a cross-site form cannot
//!   send without a preflight, and no CORS header is ever sent). No page acts on load.
//! - Channel secrets never reach this crate: it gets names, types and gates ([`ChannelInfo`]),
//!   and the test alert goes through the caller's [`TestAlert`].
#![forbid(unsafe_code)]

mod access;
mod api;
mod http;
mod metrics;
mod pages;
mod route;

pub use http::Limits;

use detect_core::DetectConfig;
use serde::Serialize;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::thread::JoinHandle;

/// The address `serve` listens on by default.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8080";

/// Why the server did not start, or stopped.
#[derive(Debug, thiserror::Error)]
pub enum WebError {
    #[error(
        "refusing to listen on {0} without a token: set serve.token_env to a variable holding one, or listen on 127.0.0.1"
    )]
    NeedsToken(SocketAddr),
    #[error("cannot listen on {addr}: {message}")]
    Bind { addr: SocketAddr, message: String },
    #[error("the server on {addr} stopped: {message}")]
    Serve { addr: SocketAddr, message: String },
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

/// Sends a test alert through the configured channels; the caller owns the channels' secrets
/// (and scrubs them from the messages it returns).
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

/// A refused config edit: its status (400 for a bad key or value, 500 for a file that cannot be
/// read or written), the input it is about, and a message free of secrets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigRefusal {
    pub status: u16,
    pub field: &'static str,
    pub message: String,
}

/// Live edits of the configuration, owned by the caller: it knows the keys, their bounds and the
/// files. Every text it returns is free of secrets.
pub trait LiveConfig: Send + Sync {
    /// `GET /admin/api/config`: `{file, keys: [{key, kind, min, max, value, in_file}], detector}`.
    fn show(&self) -> Result<serde_json::Value, ConfigRefusal>;
    /// `POST /admin/api/config/{key}`: validate and write; the answer's JSON.
    fn set(&self, key: &str, value: &serde_json::Value)
    -> Result<serde_json::Value, ConfigRefusal>;
    /// The detector in force now (the configuration with its edits).
    fn detector(&self) -> DetectConfig;
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
    /// Live config edits; `None` refuses them.
    pub config: Option<Arc<dyn LiveConfig>>,
    /// The detector configuration at start (what the pages show without [`ServeOptions::config`]).
    pub detector: DetectConfig,
    /// Required on every request beyond loopback, on every POST on loopback, when set.
    pub token: Option<String>,
    /// Host names (besides IP addresses and `localhost`) requests may be addressed to.
    pub allowed_hosts: Vec<String>,
    pub channels: Vec<ChannelInfo>,
    pub test_alert: Option<Arc<dyn TestAlert>>,
    /// Base of the links alerts carry (`watchdog.dashboard_base_url`), shown on pages.
    pub dashboard_base_url: String,
    /// The recovery notice file of `agentwatch recover`: served at `/recovery-notice.json`, read
    /// by the recovery page and the splash.
    pub recover_notice: Option<PathBuf>,
    /// `recover.cooldown` in seconds.
    pub recover_cooldown_s: u32,
    /// What a request and a connection may cost.
    pub limits: Limits,
    pub clock: Clock,
}

impl std::fmt::Debug for ServeOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServeOptions")
            .field("listen", &self.listen)
            .field("db", &self.db)
            .field("config", &self.config.is_some())
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field("allowed_hosts", &self.allowed_hosts)
            .field("channels", &self.channels)
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

impl ServeOptions {
    /// Defaults: loopback `127.0.0.1:8080`, no token, no channels, the system clock.
    pub fn new(db: PathBuf) -> Self {
        Self {
            listen: DEFAULT_LISTEN.parse().expect("constant address"),
            db,
            config: None,
            detector: DetectConfig::default(),
            token: None,
            allowed_hosts: Vec::new(),
            channels: Vec::new(),
            test_alert: None,
            dashboard_base_url: "http://127.0.0.1:8080/admin".to_owned(),
            recover_notice: None,
            recover_cooldown_s: 3600,
            limits: Limits::default(),
            clock: Arc::new(system_clock),
        }
    }
}

/// A bound server; [`Server::run`] serves until [`Server::stop`] (or [`Server::spawn`]).
pub struct Server {
    listener: std::net::TcpListener,
    app: Arc<api::App>,
    addr: SocketAddr,
    stop: tokio::sync::watch::Sender<bool>,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server").field("addr", &self.addr).finish()
    }
}

impl Server {
    /// Bind the listening socket (loopback, or any address with a token).
    pub fn bind(mut options: ServeOptions) -> Result<Self, WebError> {
        let addr = options.listen;
        if !addr.ip().is_loopback() && options.token.as_deref().is_none_or(str::is_empty) {
            return Err(WebError::NeedsToken(addr));
        }
        let listener = std::net::TcpListener::bind(addr).map_err(|e| WebError::Bind {
            addr,
            message: e.to_string(),
        })?;
        let addr = listener.local_addr().unwrap_or(addr);
        // The address bound (port 0 picks one): the port a `Host` may name.
        options.listen = addr;
        let (stop, _) = tokio::sync::watch::channel(false);
        Ok(Self {
            listener,
            app: Arc::new(api::App::new(options)),
            addr,
            stop,
        })
    }

    /// The address actually bound (port 0 picks one).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Serve until [`Server::stop`]. `Err`: the server could not run (no runtime, the listener
    /// unusable); a request never ends it.
    pub fn run(&self) -> Result<(), WebError> {
        let failed = |e: std::io::Error| WebError::Serve {
            addr: self.addr,
            message: e.to_string(),
        };
        let listener = self.listener.try_clone().map_err(failed)?;
        http::serve(listener, Arc::clone(&self.app), self.stop.subscribe()).map_err(failed)
    }

    /// Run on a background thread; the handle stops it.
    pub fn spawn(self) -> Running {
        let addr = self.addr;
        let stop = self.stop.clone();
        let thread = std::thread::Builder::new()
            .name("agentwatch-web".to_owned())
            .spawn(move || self.run());
        Running {
            addr,
            stop,
            thread: Some(thread),
        }
    }

    /// Ask the server to stop: it takes no new connection and drops the open ones.
    pub fn stop(&self) {
        self.stop.send_replace(true);
    }

    /// A handle that stops this server from another thread.
    pub fn stopper(&self) -> Stopper {
        Stopper(self.stop.clone())
    }
}

/// Stops a [`Server`] from another thread ([`Server::stopper`]).
#[derive(Debug, Clone)]
pub struct Stopper(tokio::sync::watch::Sender<bool>);

impl Stopper {
    /// Ask the server to stop: [`Server::run`] returns.
    pub fn stop(&self) {
        self.0.send_replace(true);
    }
}

/// The server's thread, and what it ended with.
type ServerThread = std::io::Result<JoinHandle<Result<(), WebError>>>;

/// A server running on a background thread; dropping it stops it.
pub struct Running {
    addr: SocketAddr,
    stop: tokio::sync::watch::Sender<bool>,
    thread: Option<ServerThread>,
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

    /// Whether the server ended on its own (it failed, or its thread panicked).
    pub fn has_ended(&self) -> bool {
        match &self.thread {
            Some(Ok(t)) => t.is_finished(),
            _ => true,
        }
    }

    /// Stop it and say how it ended: `Ok` when it was running until now, else what ended it.
    pub fn finish(mut self) -> Result<(), WebError> {
        self.end()
    }

    fn end(&mut self) -> Result<(), WebError> {
        self.stop.send_replace(true);
        let addr = self.addr;
        let failed = |message: String| WebError::Serve { addr, message };
        match self.thread.take() {
            None => Ok(()),
            Some(Err(e)) => Err(failed(format!("cannot start its thread: {e}"))),
            Some(Ok(t)) => t
                .join()
                .unwrap_or_else(|_| Err(failed("its thread panicked".to_owned()))),
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.end();
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
    /// From hyper's request head; a header value that is not text is kept as lossy UTF-8.
    pub(crate) fn from_parts(parts: &hyper::http::request::Parts, body: Vec<u8>) -> Self {
        Self {
            method: parts.method.as_str().to_ascii_uppercase(),
            path: parts.uri.path().to_owned(),
            query: parts.uri.query().unwrap_or("").to_owned(),
            headers: parts
                .headers
                .iter()
                .map(|(n, v)| {
                    (
                        n.as_str().to_owned(),
                        String::from_utf8_lossy(v.as_bytes()).into_owned(),
                    )
                })
                .collect(),
            body,
        }
    }

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

/// The page's policy: scripts and styles from the server only, no frames, no forms elsewhere.
const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'none'; frame-ancestors 'none'; base-uri 'none'";

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

    /// This reply with one more header.
    #[must_use]
    pub fn with_header(mut self, name: &'static str, value: impl Into<String>) -> Self {
        self.headers.push((name, value.into()));
        self
    }

    /// Every header the reply is sent with: its type, the fixed security headers, its own.
    pub(crate) fn all_headers(&self) -> Vec<(&'static str, String)> {
        let fixed = [
            ("content-type", self.content_type.to_owned()),
            ("cache-control", "no-store".to_owned()),
            ("x-content-type-options", "nosniff".to_owned()),
            ("x-frame-options", "DENY".to_owned()),
            ("referrer-policy", "no-referrer".to_owned()),
            (
                "content-security-policy",
                CONTENT_SECURITY_POLICY.to_owned(),
            ),
        ];
        fixed.into_iter().chain(self.headers.clone()).collect()
    }
}
