//! `agentwatch serve`: the admin pages, JSON API and metrics of `agentwatch-web`, set up from the
//! configuration: the store, the listen address and token (`[serve]`), the channels (names and
//! gates only: their secrets stay here), the test alert, and `config.local.toml` for live edits.
//!
//! [`bind`] is the command (bind, then the caller prints the address and serves);
//! [`start_in_background`] is what a long-running process (`agentwatch run`) calls when
//! `[serve] enabled = true`: the server runs on its own threads until the handle is dropped.

use crate::clock::now_or_clock;
use crate::config::{self, Config, Env, Loaded};
use crate::error::Error;
use crate::live_config::{ConfigFile, SharedEnv};
use crate::notify::apply_stored_settings;
use crate::operator::send_test_alert;
use crate::stored::{open_existing_read_only, store_path};
use agentwatch_web::{ChannelInfo, Delivery, ServeOptions, Server, Stopper, TestAlert, WebError};
use alert_state::Severity;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError, mpsc};
use std::time::Duration;

/// The options of `agentwatch serve`.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// `ADDR:PORT` (default `[serve] listen`, else `127.0.0.1:8080`).
    pub listen: Option<String>,
    /// The SQLite database (default `[store] path`, else `$XDG_STATE_HOME/agentwatch/agentwatch.db`).
    pub db: Option<PathBuf>,
    /// Configuration file (default `$XDG_CONFIG_HOME/agentwatch/config.toml`); its directory's
    /// `config.local.toml` takes the live edits.
    pub config: Option<PathBuf>,
}

/// The main configuration file a loaded configuration came from, if any (never the overlay).
fn main_file(loaded: &Loaded) -> Option<&Path> {
    loaded
        .files
        .first()
        .map(PathBuf::as_path)
        .filter(|p| p.file_name().is_some_and(|n| n != "config.local.toml"))
}

/// The web server's options from the configuration. `listen` overrides `[serve] listen`; `env`
/// is where the token and the channels' secrets are read.
pub fn serve_options(
    loaded: &Loaded,
    db: PathBuf,
    listen: Option<&str>,
    env: &SharedEnv,
) -> Result<ServeOptions, Error> {
    let config = &loaded.config;
    let listen_text = listen.unwrap_or(&config.serve.listen);
    let listen: SocketAddr = listen_text.parse().map_err(|_| {
        Error::usage(format!(
            "--listen {listen_text:?}: expected an address and port such as {}",
            config::DEFAULT_SERVE_LISTEN
        ))
    })?;
    let token = env(&config.serve.token_env).filter(|t| !t.trim().is_empty());
    if !listen.ip().is_loopback() && token.is_none() {
        return Err(Error::config(format!(
            "refusing to listen on {listen} without a token: the variable {} (serve.token_env) is not set; set it (every request then needs it), or listen on 127.0.0.1",
            config.serve.token_env
        )));
    }
    let mut options = ServeOptions::new(db.clone());
    options.listen = listen;
    options.detector = config.detector();
    options.config = ConfigFile::new(main_file(loaded), config.clone(), Arc::clone(env))
        .map(|c| Arc::new(c.with_sets(loaded.sets.clone())) as Arc<dyn agentwatch_web::LiveConfig>);
    options.token = token;
    options.allowed_hosts = config.serve.allowed_hosts.clone();
    options.channels = config
        .channels
        .iter()
        .map(|c| ChannelInfo {
            name: c.name.clone(),
            channel_type: c.channel_type.clone(),
            enabled: c.enabled,
            min_severity: c.min_severity.clone(),
            rate_limit_s: c.rate_limit_s,
        })
        .collect();
    if !config.channels.is_empty() {
        options.test_alert = Some(Arc::new(ConfiguredTestAlert {
            config: main_file(loaded).map(Path::to_path_buf),
            fallback: config.clone(),
            db,
            env: Arc::clone(env),
        }));
    }
    options.dashboard_base_url = config.watchdog.dashboard_base_url.clone();
    let notice = config::expand_home(&config.recover.notice, &**env);
    options.recover_notice = (!config.recover.notice.is_empty()).then_some(notice);
    options.recover_cooldown_s = config.recover.cooldown;
    Ok(options)
}

/// The test alert through the configured channels, with the configuration read again (a channel
/// added since start is known) and the stored channel settings applied.
struct ConfiguredTestAlert {
    config: Option<PathBuf>,
    /// The configuration at start, used when the file cannot be read now.
    fallback: Config,
    db: PathBuf,
    env: SharedEnv,
}

impl TestAlert for ConfiguredTestAlert {
    fn send(
        &self,
        severity: Severity,
        channel: Option<&str>,
        now: i64,
    ) -> Result<Vec<Delivery>, String> {
        let env: Env<'_> = &*self.env;
        let mut config = match &self.config {
            Some(file) => config::load(Some(file), &[], env)
                .map(|l| l.config)
                .unwrap_or_else(|_| self.fallback.clone()),
            None => self.fallback.clone(),
        };
        if let Ok(Some(store)) = open_existing_read_only(&self.db) {
            apply_stored_settings(&mut config, &store);
        }
        // Each report's message is already free of the configuration's secrets (`notify::send`).
        let (_, reports) = send_test_alert(&config, severity, channel, now, false, env)
            .map_err(|e| config::scrub_secrets(&config, env, &e.to_string()))?;
        Ok(reports
            .into_iter()
            .map(|r| Delivery {
                channel: r.channel,
                result: r.result,
                message: r.message,
            })
            .collect())
    }
}

fn web_error(e: WebError) -> Error {
    match e {
        WebError::NeedsToken(_) => Error::config(e.to_string()),
        WebError::Bind { .. } | WebError::Serve { .. } => Error::unavailable(e.to_string()),
    }
}

/// Load the configuration and bind the server (`agentwatch serve`); the caller runs it.
pub fn bind(args: &Options) -> Result<(Server, PathBuf), Error> {
    let env: SharedEnv = Arc::new(config::process_env);
    let loaded = config::load(args.config.as_deref(), &[], &*env)?;
    let db = store_path(&loaded.config, args.db.as_deref(), &*env)?;
    let options = serve_options(&loaded, db.clone(), args.listen.as_deref(), &env)?;
    let server = Server::bind(options).map_err(web_error)?;
    Ok((server, db))
}

/// Serve in the background when `[serve] enabled = true` (`None` otherwise), for a process that
/// runs the jobs (`agentwatch run`). The server reads the store the jobs write (WAL: it never
/// blocks a tick) and stops when the returned handle is dropped.
///
/// A configuration that cannot serve (beyond loopback without a token) is an error here, as at
/// the start of `run`; anything after that never reaches the jobs: a server that cannot bind or
/// that ends on its own is reported (a journal error, a `restart` event of the job `serve` with
/// `failed` or `restarted`) and started again, its wait doubling from one second to a minute.
pub fn start_in_background(loaded: &Loaded, db: &Path) -> Result<Option<Supervised>, Error> {
    if !loaded.config.serve.enabled {
        return Ok(None);
    }
    let env: SharedEnv = Arc::new(config::process_env);
    let options = serve_options(loaded, db.to_path_buf(), None, &env)?;
    let db = db.to_path_buf();
    let supervised = Supervised::start(
        move || Server::bind(options.clone()),
        move |event: &ServeEvent| record_serve_event(&db, event),
        Duration::from_secs(1),
    )?;
    Ok(Some(supervised))
}

/// The longest wait before the server is started again.
const MAX_RESTART_WAIT: Duration = Duration::from_secs(60);

/// What happened to the web server beside the jobs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServeEvent {
    /// It listens on `addr`, after `restarts` earlier starts.
    Listening { addr: SocketAddr, restarts: u32 },
    /// It could not start or it ended on its own; it is started again after `retry_in`.
    Failed { error: String, retry_in: Duration },
}

/// Journal line and history event of a [`ServeEvent`].
fn record_serve_event(db: &Path, event: &ServeEvent) {
    let now = now_or_clock(None);
    let result = match event {
        ServeEvent::Listening { addr, restarts } => {
            crate::journal::Line::info("serve", now)
                .field("listening", format!("http://{addr}"))
                .field("action", if *restarts == 0 { "start" } else { "restart" })
                .emit();
            if *restarts == 0 {
                return;
            }
            "restarted"
        }
        ServeEvent::Failed { error, retry_in } => {
            crate::journal::Line::err("serve", now)
                .field("result", "failed")
                .field("error", error)
                .field("action", "restart")
                .field("retry", format!("{}s", retry_in.as_secs()))
                .emit();
            "failed"
        }
    };
    // History for `/metrics` and `status`, in a store the jobs made (serving never creates one).
    if !db.is_file() {
        return;
    }
    if let Ok(mut store) = agentwatch_store::Store::open(db) {
        let event = crate::stored::job_event(
            now,
            "serve",
            agentwatch_store::EventKind::Restart,
            "web",
            result,
            None,
        );
        crate::stored::record_events(&mut store, &[event]);
    }
}

/// The web server on a thread of its own, started again whenever it ends on its own; dropping
/// the handle stops it.
pub struct Supervised {
    stopping: Arc<AtomicBool>,
    current: Arc<Mutex<Option<Stopper>>>,
    wake: mpsc::Sender<()>,
    started: Mutex<mpsc::Receiver<SocketAddr>>,
    first: SocketAddr,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl std::fmt::Debug for Supervised {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Supervised {{ first: {}, .. }}", self.first)
    }
}

impl Supervised {
    /// Bind once now (a bind error is reported and retried in the background, never returned)
    /// and supervise. `report` is told each start and failure; `first_wait` is the first wait
    /// before a restart.
    pub fn start(
        mut bind: impl FnMut() -> Result<Server, WebError> + Send + 'static,
        report: impl Fn(&ServeEvent) + Send + 'static,
        first_wait: Duration,
    ) -> Result<Self, Error> {
        let stopping = Arc::new(AtomicBool::new(false));
        let current: Arc<Mutex<Option<Stopper>>> = Arc::new(Mutex::new(None));
        let (wake, woken) = mpsc::channel();
        let (started_tx, started) = mpsc::channel();
        let first_server = bind();
        let first = first_server.as_ref().map_or_else(
            |_| SocketAddr::from(([127, 0, 0, 1], 0)),
            Server::local_addr,
        );
        let (stop_flag, slot) = (Arc::clone(&stopping), Arc::clone(&current));
        let thread = std::thread::Builder::new()
            .name("agentwatch-serve".to_owned())
            .spawn(move || {
                let mut next = Some(first_server);
                let mut wait = first_wait;
                let mut starts = 0;
                while !stop_flag.load(Ordering::SeqCst) {
                    let attempt = next.take().unwrap_or_else(&mut bind);
                    let error = match attempt {
                        Ok(server) => {
                            let ran = serve_until_it_ends(
                                server,
                                starts,
                                (&stop_flag, &slot),
                                &report,
                                &started_tx,
                            );
                            starts += 1;
                            if stop_flag.load(Ordering::SeqCst) {
                                break;
                            }
                            wait = first_wait;
                            ran
                        }
                        Err(e) => e.to_string(),
                    };
                    report(&ServeEvent::Failed {
                        error,
                        retry_in: wait,
                    });
                    // A stop request cuts the wait short.
                    let _ = woken.recv_timeout(wait);
                    wait = (wait * 2).min(MAX_RESTART_WAIT);
                }
            })
            .map_err(|e| Error::io(format!("serve: cannot start its thread: {e}")))?;
        Ok(Self {
            stopping,
            current,
            wake,
            started: Mutex::new(started),
            first,
            thread: Some(thread),
        })
    }

    /// The address of the first start (port 0 when the first bind failed).
    pub fn local_addr(&self) -> SocketAddr {
        self.first
    }

    /// The address of the next start, waiting for it at most `timeout`.
    pub fn next_start(&self, timeout: Duration) -> Option<SocketAddr> {
        self.started
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .recv_timeout(timeout)
            .ok()
    }

    /// Stop the server running now, as if it had ended on its own (tests of the restart).
    pub fn stop_current(&self) {
        if let Some(stopper) = self
            .current
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
        {
            stopper.stop();
        }
    }
}

/// Run `server` until it ends (stopped, failed or panicked): what ended it.
fn serve_until_it_ends(
    server: Server,
    restarts: u32,
    (stopping, slot): (&AtomicBool, &Mutex<Option<Stopper>>),
    report: &dyn Fn(&ServeEvent),
    started: &mpsc::Sender<SocketAddr>,
) -> String {
    *slot.lock().unwrap_or_else(PoisonError::into_inner) = Some(server.stopper());
    // A stop asked for before the stopper was in place.
    if stopping.load(Ordering::SeqCst) {
        server.stop();
    }
    let addr = server.local_addr();
    report(&ServeEvent::Listening { addr, restarts });
    let _ = started.send(addr);
    let ended = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| server.run()));
    *slot.lock().unwrap_or_else(PoisonError::into_inner) = None;
    match ended {
        Ok(Ok(())) => format!("the server on {addr} stopped"),
        Ok(Err(e)) => e.to_string(),
        Err(_) => format!("the server on {addr} panicked"),
    }
}

impl Drop for Supervised {
    fn drop(&mut self) {
        self.stopping.store(true, Ordering::SeqCst);
        self.stop_current();
        let _ = self.wake.send(());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loaded(sets: &[&str]) -> Loaded {
        let sets: Vec<String> = sets.iter().map(|s| (*s).to_owned()).collect();
        config::load(None, &sets, &|_| None).unwrap()
    }

    /// Each row: `--listen`, the token variable's value, whether serving is allowed.
    #[test]
    fn beyond_loopback_needs_the_token() {
        let rows = [
            (None, None, true),
            (Some("127.0.0.1:0"), None, true),
            (Some("[::1]:0"), None, true),
            (Some("0.0.0.0:8080"), None, false),
            (Some("192.0.2.1:8080"), Some(""), false),
            (Some("0.0.0.0:8080"), Some("s3cret"), true),
        ];
        for (listen, token, allowed) in rows {
            let env: SharedEnv = Arc::new(move |k: &str| {
                (k == "AGENTWATCH_SERVE_TOKEN")
                    .then(|| token.map(str::to_owned))
                    .flatten()
            });
            let got = serve_options(&loaded(&[]), PathBuf::from("x.db"), listen, &env);
            assert_eq!(got.is_ok(), allowed, "{listen:?} {token:?}");
            if let Err(e) = got {
                assert_eq!(e.exit_code(), crate::error::code::CONFIG);
                assert!(e.to_string().contains("AGENTWATCH_SERVE_TOKEN"), "{e}");
            }
        }
    }

    #[test]
    fn listen_comes_from_the_flag_then_the_config() {
        let none: SharedEnv = Arc::new(|_: &str| None);
        let l = loaded(&["serve.listen=\"127.0.0.1:9999\""]);
        let o = serve_options(&l, PathBuf::from("x.db"), None, &none).unwrap();
        assert_eq!(o.listen.to_string(), "127.0.0.1:9999");
        let o = serve_options(&l, PathBuf::from("x.db"), Some("127.0.0.1:7"), &none).unwrap();
        assert_eq!(o.listen.to_string(), "127.0.0.1:7");
        let e = serve_options(&l, PathBuf::from("x.db"), Some("localhost"), &none).unwrap_err();
        assert_eq!(e.exit_code(), crate::error::code::USAGE);
        let e = config::load(None, &["serve.listen=nowhere".to_owned()], &*none).unwrap_err();
        assert!(e.to_string().contains("serve.listen"), "{e}");
    }

    /// With `[serve] enabled = true` the server answers on its own threads until the handle is
    /// dropped; then the port is free again.
    #[test]
    fn enabled_serve_runs_in_the_background_until_dropped() {
        use std::io::{Read, Write};
        let get = |addr: SocketAddr| -> std::io::Result<String> {
            let mut conn = std::net::TcpStream::connect(addr)?;
            conn.write_all(
                b"GET /api/watchdog/status HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
            )?;
            let mut answer = String::new();
            conn.read_to_string(&mut answer)?;
            Ok(answer)
        };
        let dir = std::env::temp_dir().join(format!("aw-serve-bg-{}", std::process::id()));
        let l = loaded(&["serve.enabled=true", "serve.listen=\"127.0.0.1:0\""]);
        let running = start_in_background(&l, &dir.join("none.db"))
            .unwrap()
            .expect("enabled");
        let addr = running.local_addr();
        let answer = get(addr).unwrap();
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        assert!(answer.contains("\"last_tick\":null"), "{answer}");
        drop(running);
        assert!(get(addr).is_err(), "still answering after the drop");
        assert!(!dir.join("none.db").exists(), "serving created the store");
    }

    fn answers(addr: SocketAddr) -> bool {
        use std::io::{Read, Write};
        let Ok(mut conn) = std::net::TcpStream::connect(addr) else {
            return false;
        };
        let _ = conn.write_all(
            b"GET /api/watchdog/status HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
        );
        let mut answer = String::new();
        let _ = conn.read_to_string(&mut answer);
        answer.starts_with("HTTP/1.1 200")
    }

    /// Issue 38: a web server that ends on its own, or cannot bind, is reported and started
    /// again; the jobs beside it never see it.
    #[test]
    fn a_server_that_ends_is_reported_and_started_again() {
        let dir = std::env::temp_dir().join(format!("aw-serve-sup-{}", std::process::id()));
        let options = ServeOptions {
            listen: "127.0.0.1:0".parse().unwrap(),
            ..ServeOptions::new(dir.join("none.db"))
        };
        let events = Arc::new(Mutex::new(Vec::new()));
        let seen = Arc::clone(&events);
        let mut binds = 0;
        let supervised = Supervised::start(
            move || {
                binds += 1;
                if binds == 2 {
                    return Err(WebError::Bind {
                        addr: options.listen,
                        message: "address in use".to_owned(),
                    });
                }
                Server::bind(options.clone())
            },
            move |e: &ServeEvent| seen.lock().unwrap().push(e.clone()),
            Duration::from_millis(1),
        )
        .unwrap();
        let first = supervised.next_start(Duration::from_secs(30)).unwrap();
        assert!(answers(first));
        supervised.stop_current();
        let second = supervised.next_start(Duration::from_secs(30)).unwrap();
        assert!(answers(second));
        drop(supervised);
        assert!(!answers(second), "still answering after the drop");
        let events = events.lock().unwrap().clone();
        let kinds: Vec<String> = events
            .iter()
            .map(|e| match e {
                ServeEvent::Listening { restarts, .. } => format!("listening {restarts}"),
                ServeEvent::Failed { error, .. } => format!("failed: {error}"),
            })
            .collect();
        assert_eq!(kinds.len(), 4, "{kinds:?}");
        assert_eq!(kinds[0], "listening 0");
        assert!(kinds[1].contains("stopped"), "{kinds:?}");
        assert!(kinds[2].contains("address in use"), "{kinds:?}");
        assert_eq!(kinds[3], "listening 1");
    }

    /// Issue 38: a webhook that echoes the token it refused, and any other configured secret,
    /// does not get them into the test alert's answer (nor the journal or the outbox, which
    /// take the same report from `notify::send`).
    #[test]
    fn a_webhook_echoing_secrets_is_scrubbed() {
        let hook = agentwatch_testkit::HttpServer::start(|_| {
            agentwatch_testkit::Reply::text(
                401,
                "refused token T0KEN-in-the-query; the opencode password is PW-SECRET-123",
            )
        });
        let url = format!("{}/hook?token=T0KEN-in-the-query", hook.url());
        let l = loaded(&[
            "opencode.password_env=\"AW_TEST_PW\"",
            &format!("channels=[{{name=\"hook\", type=\"webhook\", url=\"{url}\"}}]"),
        ]);
        let env: SharedEnv =
            Arc::new(|k: &str| (k == "AW_TEST_PW").then(|| "PW-SECRET-123".to_owned()));
        let options = serve_options(&l, PathBuf::from("/nonexistent/x.db"), None, &env).unwrap();
        let sends = options
            .test_alert
            .expect("a channel")
            .send(Severity::Warning, Some("hook"), 1_790_000_000)
            .unwrap();
        assert_eq!(sends[0].result, "failed");
        let message = sends[0].message.clone().unwrap();
        assert!(message.contains("401"), "{message}");
        assert!(!message.contains("T0KEN"), "{message}");
        assert!(!message.contains("PW-SECRET"), "{message}");
    }

    /// A port taken at the start is no reason to stop `run`: the server is retried.
    #[test]
    fn a_taken_port_is_retried_not_fatal() {
        let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = taken.local_addr().unwrap();
        let l = loaded(&["serve.enabled=true", &format!("serve.listen=\"{addr}\"")]);
        let supervised = start_in_background(&l, Path::new("/nonexistent/x.db"))
            .unwrap()
            .expect("enabled");
        drop(taken);
        let again = supervised.next_start(Duration::from_secs(30)).unwrap();
        assert_eq!(again, addr);
        assert!(answers(addr));
    }

    #[test]
    fn disabled_serve_starts_nothing() {
        assert!(
            start_in_background(&loaded(&[]), Path::new("x.db"))
                .unwrap()
                .is_none()
        );
    }
}
