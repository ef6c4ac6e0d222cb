//! # agentwatch-testkit: real parts for tests
//!
//! - [`HttpServer`]: an HTTP/1.1 server on 127.0.0.1 that answers with a handler and records every
//!   request (method, path, headers, body), keeping connections alive between plain answers as
//!   opencode's server does. Replies can also hang, close, or send garbage, to test
//!   clients against servers that misbehave.
//! - [`stand_in`]: an executable on a private PATH directory that records its exact argv (one JSON
//!   list per line) and exits like the real program, for what cannot run here (notify-send without
//!   a desktop, systemctl without systemd as PID 1).
//! - [`opencode`]: finds and starts a real opencode server offline for end-to-end tests.
//! - [`alertmanager`]: starts a real Prometheus Alertmanager on free loopback ports (alone or
//!   clustered), waits for it by polling its API, and reads its alerts.
//! - [`agentdeck`]: a scripted `agent-deck` stand-in (answers per subcommand and id, records every
//!   argv) and a tmux server on a private socket.
//! - [`script`]: what a scripted model does (tool calls turn by turn, per conversation found
//!   by a marker in its prompt) and the loopback server that plays it; [`cli`]: running an
//!   agent CLI to its end.
//! - [`claude`]: the real Claude Code CLI run offline: a scripted Messages API server on
//!   127.0.0.1, and `claude -p` in a directory with its own `CLAUDE_CONFIG_DIR`.
//! - [`codex`]: the real Codex CLI run offline: a scripted Responses API server, and
//!   `codex exec` with its own `CODEX_HOME` and a model provider pointed at it.
//! - [`gemini`]: the real Gemini CLI run offline: a scripted `streamGenerateContent` server,
//!   and `gemini -p` with its own `GEMINI_CLI_HOME`.
//!
//! Used only as a dev-dependency.
#![forbid(unsafe_code)]

pub mod agentdeck;
pub mod alertmanager;
pub mod claude;
pub mod cli;
pub mod codex;
pub mod gemini;
pub mod opencode;
pub mod script;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// A request the server received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub method: String,
    /// Path and query, as sent.
    pub target: String,
    /// Header names lower-cased.
    pub headers: BTreeMap<String, String>,
    pub body: Vec<u8>,
}

impl Request {
    /// The path without the query.
    pub fn path(&self) -> &str {
        self.target.split('?').next().unwrap_or("")
    }

    /// A query parameter's raw value.
    pub fn query(&self, key: &str) -> Option<&str> {
        let query = self.target.split_once('?')?.1;
        query
            .split('&')
            .filter_map(|pair| pair.split_once('='))
            .find(|(k, _)| *k == key)
            .map(|(_, v)| v)
    }

    pub fn body_json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or(serde_json::Value::Null)
    }
}

/// How the server answers one request.
#[derive(Debug, Clone)]
pub enum Reply {
    /// A status, extra headers and a body.
    Http {
        status: u16,
        headers: Vec<(String, String)>,
        body: Vec<u8>,
    },
    /// Bytes that are not HTTP at all.
    Raw(Vec<u8>),
    /// Keep the connection open and never answer (until the server is dropped).
    Hang,
    /// A status and a body of `declared` bytes (`x`s), written in 64 KiB chunks until the
    /// client stops reading: a hostile server's huge body. [`HttpServer::bytes_sent`] counts
    /// what the client took.
    Endless { status: u16, declared: u64 },
    /// A 200 `text/event-stream` answer without a length: `body`, then the connection is closed,
    /// or with `hold` kept open and silent until the server is dropped (a stalled stream).
    Stream { body: Vec<u8>, hold: bool },
    /// A 200 `text/event-stream` answer written as the frames arrive on the channel, closed when
    /// its sender is dropped or the server stops (a live stream, e.g. opencode's
    /// `/global/event`). One connection reads the channel at a time.
    Feed(Arc<Mutex<std::sync::mpsc::Receiver<Vec<u8>>>>),
}

impl Reply {
    pub fn json(status: u16, value: &serde_json::Value) -> Self {
        Self::Http {
            status,
            headers: vec![("content-type".into(), "application/json".into())],
            body: value.to_string().into_bytes(),
        }
    }

    pub fn text(status: u16, body: &str) -> Self {
        Self::Http {
            status,
            headers: vec![("content-type".into(), "text/plain".into())],
            body: body.as_bytes().to_vec(),
        }
    }

    pub fn with_header(mut self, name: &str, value: &str) -> Self {
        if let Self::Http { headers, .. } = &mut self {
            headers.push((name.to_owned(), value.to_owned()));
        }
        self
    }
}

type Handler = dyn Fn(&Request) -> Reply + Send + Sync;

/// A loopback HTTP server. Stops when dropped.
pub struct HttpServer {
    port: u16,
    requests: Arc<Mutex<Vec<Request>>>,
    sent: Arc<std::sync::atomic::AtomicU64>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for HttpServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpServer")
            .field("port", &self.port)
            .finish()
    }
}

impl HttpServer {
    /// Start on an ephemeral port of 127.0.0.1.
    pub fn start(handler: impl Fn(&Request) -> Reply + Send + Sync + 'static) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
        let port = listener.local_addr().expect("local addr").port();
        listener.set_nonblocking(false).ok();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let sent = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let handler: Arc<Handler> = Arc::new(handler);
        let thread = {
            let requests = Arc::clone(&requests);
            let stop = Arc::clone(&stop);
            let sent = Arc::clone(&sent);
            std::thread::spawn(move || {
                for stream in listener.incoming() {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    let Ok(stream) = stream else { continue };
                    let requests = Arc::clone(&requests);
                    let handler = Arc::clone(&handler);
                    let stop = Arc::clone(&stop);
                    let sent = Arc::clone(&sent);
                    std::thread::spawn(move || {
                        serve(stream, &*handler, &requests, &stop, &sent);
                    });
                }
            })
        };
        Self {
            port,
            requests,
            sent,
            stop,
            thread: Some(thread),
        }
    }

    /// Body bytes of [`Reply::Endless`] answers written so far (the client read them, or the
    /// kernel buffers hold them: at most a few MiB more than the client read).
    pub fn bytes_sent(&self) -> u64 {
        self.sent.load(Ordering::SeqCst)
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// `http://127.0.0.1:PORT`
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Every request received so far.
    pub fn requests(&self) -> Vec<Request> {
        self.requests.lock().map(|r| r.clone()).unwrap_or_default()
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The head of an event-stream answer (no length: it ends when the connection closes).
const EVENT_STREAM_HEAD: &str = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\nconnection: close\r\n\r\n";

fn serve(
    stream: TcpStream,
    handler: &Handler,
    log: &Mutex<Vec<Request>>,
    stop: &AtomicBool,
    sent: &std::sync::atomic::AtomicU64,
) {
    let mut reader = BufReader::new(match stream.try_clone() {
        Ok(s) => s,
        Err(_) => return,
    });
    let mut stream = stream;
    let _ = stream.set_nodelay(true);
    // HTTP/1.1 keep-alive, as opencode's server does: an `Http` reply keeps the connection for
    // the client's next request (unless it asked `Connection: close`); every other reply closes
    // it. An idle connection is closed when the server stops.
    while wait_for_request(&mut reader, stop) {
        let Some(request) = read_request(&mut reader) else {
            return;
        };
        if let Ok(mut l) = log.lock() {
            l.push(request.clone());
        }
        let close = request
            .headers
            .get("connection")
            .is_some_and(|v| v.eq_ignore_ascii_case("close"));
        if !answer(&mut stream, handler(&request), close, stop, sent) {
            return;
        }
    }
}

/// Wait until the next request's first bytes arrive (true), or the client closed the
/// connection or the server stopped (false).
fn wait_for_request(reader: &mut BufReader<TcpStream>, stop: &AtomicBool) -> bool {
    let _ = reader
        .get_ref()
        .set_read_timeout(Some(std::time::Duration::from_millis(50)));
    let ready = loop {
        if stop.load(Ordering::SeqCst) {
            break false;
        }
        match reader.fill_buf() {
            // A request that arrives once the server is stopping is not answered: the
            // connection closes as a stopped server's would.
            Ok(buf) => break !buf.is_empty() && !stop.load(Ordering::SeqCst),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock
                        | std::io::ErrorKind::TimedOut
                        | std::io::ErrorKind::Interrupted
                ) => {}
            Err(_) => break false,
        }
    };
    let _ = reader.get_ref().set_read_timeout(None);
    ready
}

/// Write `reply`; true when the connection stays open for another request.
fn answer(
    stream: &mut TcpStream,
    reply: Reply,
    close: bool,
    stop: &AtomicBool,
    sent: &std::sync::atomic::AtomicU64,
) -> bool {
    match reply {
        // Hold the connection until the server stops; the client's timeout is under test.
        Reply::Hang => hold_until_stopped(stop),
        Reply::Raw(bytes) => {
            let _ = stream.write_all(&bytes);
        }
        Reply::Stream { body, hold } => {
            let _ = stream.write_all(EVENT_STREAM_HEAD.as_bytes());
            let _ = stream.write_all(&body);
            let _ = stream.flush();
            if hold {
                hold_until_stopped(stop);
            }
        }
        Reply::Feed(frames) => write_feed(stream, &frames, stop),
        Reply::Endless { status, declared } => write_endless(stream, status, declared, stop, sent),
        Reply::Http {
            status,
            headers,
            body,
        } => return write_http(stream, status, &headers, &body, close),
    }
    false
}

/// Park until the server stops.
fn hold_until_stopped(stop: &AtomicBool) {
    while !stop.load(Ordering::SeqCst) {
        std::thread::park_timeout(std::time::Duration::from_millis(50));
    }
}

/// [`Reply::Feed`]: the event stream's head, then each frame as it arrives until its sender is
/// dropped, the client goes or the server stops.
fn write_feed(
    stream: &mut TcpStream,
    frames: &Mutex<std::sync::mpsc::Receiver<Vec<u8>>>,
    stop: &AtomicBool,
) {
    if stream.write_all(EVENT_STREAM_HEAD.as_bytes()).is_err() {
        return;
    }
    let Ok(frames) = frames.lock() else {
        return;
    };
    while !stop.load(Ordering::SeqCst) {
        match frames.recv_timeout(std::time::Duration::from_millis(50)) {
            Ok(bytes) => {
                if stream
                    .write_all(&bytes)
                    .and_then(|()| stream.flush())
                    .is_err()
                {
                    break;
                }
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
}

/// [`Reply::Endless`]: a head declaring `declared` bytes, then `x`s in 64 KiB chunks while the
/// client reads them (counted in `sent`).
fn write_endless(
    stream: &mut TcpStream,
    status: u16,
    declared: u64,
    stop: &AtomicBool,
    sent: &std::sync::atomic::AtomicU64,
) {
    let head = format!(
        "HTTP/1.1 {status} {}\r\ncontent-type: text/plain\r\ncontent-length: {declared}\r\nconnection: close\r\n\r\n",
        reason(status)
    );
    if stream.write_all(head.as_bytes()).is_err() {
        return;
    }
    let chunk = vec![b'x'; 64 * 1024];
    let mut left = declared;
    while left > 0 && !stop.load(Ordering::SeqCst) {
        let n = usize::try_from(left.min(chunk.len() as u64)).unwrap_or(chunk.len());
        if stream.write_all(&chunk[..n]).is_err() {
            break;
        }
        sent.fetch_add(n as u64, Ordering::SeqCst);
        left -= n as u64;
    }
}

/// [`Reply::Http`]; true when it was written and the connection stays open (not `close`).
fn write_http(
    stream: &mut TcpStream,
    status: u16,
    headers: &[(String, String)],
    body: &[u8],
    close: bool,
) -> bool {
    let mut head = format!("HTTP/1.1 {status} {}\r\n", reason(status));
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str(&format!(
        "content-length: {}\r\nconnection: {}\r\n\r\n",
        body.len(),
        if close { "close" } else { "keep-alive" }
    ));
    // One write: a head and a body written apart would wait on the client's delayed
    // acknowledgement (Nagle) on a connection kept alive.
    let mut bytes = head.into_bytes();
    bytes.extend_from_slice(body);
    let written = stream.write_all(&bytes).and_then(|()| stream.flush());
    written.is_ok() && !close
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        204 => "No Content",
        400 => "Bad Request",
        401 => "Unauthorized",
        404 => "Not Found",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        _ => "Status",
    }
}

fn read_request(reader: &mut BufReader<TcpStream>) -> Option<Request> {
    let mut line = String::new();
    if reader.read_line(&mut line).ok()? == 0 {
        return None;
    }
    let mut parts = line.split_whitespace();
    let method = parts.next()?.to_owned();
    let target = parts.next()?.to_owned();
    let mut headers = BTreeMap::new();
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h).ok()? == 0 {
            return None;
        }
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_owned());
        }
    }
    let length: usize = headers
        .get("content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    Some(Request {
        method,
        target,
        headers,
        body,
    })
}

/// A directory of stand-in executables, to put first on PATH.
#[derive(Debug)]
pub struct StandIns {
    pub dir: PathBuf,
}

impl StandIns {
    pub fn new(dir: &Path) -> Self {
        std::fs::create_dir_all(dir).expect("stand-in dir");
        Self {
            dir: dir.to_path_buf(),
        }
    }

    /// PATH with the stand-ins first.
    pub fn path_env(&self) -> String {
        format!(
            "{}:{}",
            self.dir.display(),
            std::env::var("PATH").unwrap_or_default()
        )
    }

    /// The argv lines recorded by stand-in `name` (each a JSON list of its arguments).
    pub fn calls(&self, name: &str) -> Vec<Vec<String>> {
        let log = self.dir.join(format!("{name}.argv"));
        std::fs::read_to_string(log)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }
}

/// Install a stand-in `name` that appends its argv (as a JSON list) to `DIR/NAME.argv`, prints
/// `stdout`, and exits with `exit_code`.
/// A command for the program `bin` (the `agentwatch` binary under test) in an environment
/// isolated under `home`: nothing inherited but `PATH`; `HOME`, `XDG_CONFIG_HOME` (`home/config`)
/// and `XDG_STATE_HOME` (`home/state`) set, so no real config or store is ever touched.
pub fn isolated_command(bin: &str, home: &Path) -> std::process::Command {
    let mut command = std::process::Command::new(bin);
    command
        .env_clear()
        .env("HOME", home)
        .env("XDG_CONFIG_HOME", home.join("config"))
        .env("XDG_STATE_HOME", home.join("state"))
        .env("PATH", std::env::var("PATH").unwrap_or_default());
    command
}

/// Runs `command` with `stdin` written to its standard input (closed at once when `None`), and
/// collects its output.
pub fn output_with_stdin(
    command: &mut std::process::Command,
    stdin: Option<&str>,
) -> std::process::Output {
    use std::io::Write;
    use std::process::Stdio;
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the command starts");
    let mut input = child.stdin.take().expect("stdin is piped");
    if let Some(text) = stdin {
        input.write_all(text.as_bytes()).expect("write stdin");
    }
    drop(input);
    child.wait_with_output().expect("the command finishes")
}

pub fn stand_in(stand_ins: &StandIns, name: &str, stdout: &str, exit_code: i32) -> PathBuf {
    let path = stand_ins.dir.join(name);
    let log = stand_ins.dir.join(format!("{name}.argv"));
    let out = stand_ins.dir.join(format!("{name}.stdout"));
    std::fs::write(&out, stdout).expect("write stand-in output");
    // python3 writes the argv as JSON exactly, whatever quotes or newlines it holds.
    let script = format!(
        "#!/usr/bin/env python3\nimport json, sys\nwith open({log:?}, 'a') as f:\n    f.write(json.dumps(sys.argv[1:]) + '\\n')\nsys.stdout.write(open({out:?}).read())\nsys.exit({exit_code})\n",
        log = log.display().to_string(),
        out = out.display().to_string(),
    );
    std::fs::write(&path, script).expect("write stand-in");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    path
}

/// A fresh temporary directory under the system temp dir, removed when dropped.
#[derive(Debug)]
pub struct TempDir {
    pub path: PathBuf,
    _dir: tempfile::TempDir,
}

impl TempDir {
    /// A new empty directory under the system's temporary directory, its name starting with
    /// `prefix`; removed with everything in it when dropped.
    pub fn new(prefix: &str) -> Self {
        let dir = tempfile::Builder::new()
            .prefix(&format!("{prefix}-"))
            .tempdir()
            .expect("temp dir");
        Self {
            path: dir.path().to_path_buf(),
            _dir: dir,
        }
    }
}
