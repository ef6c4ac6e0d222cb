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
use crate::notify::apply_stored_settings;
use crate::operator::send_test_alert;
use crate::stored::{open_existing_read_only, store_path};
use agentwatch_web::{ChannelInfo, Delivery, Running, ServeOptions, Server, TestAlert, WebError};
use alert_state::Severity;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

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

/// The overlay live edits go to: `config.local.toml` beside the main file (none without one).
pub fn config_local(loaded: &Loaded) -> Option<PathBuf> {
    loaded
        .files
        .first()
        .map(|main| main.with_file_name("config.local.toml"))
}

/// The web server's options from the configuration. `listen` overrides `[serve] listen`.
pub fn serve_options(
    loaded: &Loaded,
    db: PathBuf,
    listen: Option<&str>,
    env: Env<'_>,
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
            "refusing to listen on {listen} without a token: the variable {} (serve.token_env) is not set; set it (every POST then needs it), or listen on 127.0.0.1",
            config.serve.token_env
        )));
    }
    let mut options = ServeOptions::new(db.clone());
    options.listen = listen;
    options.config_local = config_local(loaded);
    options.detector = config.detector();
    options.token = token;
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
            config: loaded.files.first().cloned(),
            fallback: config.clone(),
            db,
        }));
    }
    options.dashboard_base_url = config.watchdog.dashboard_base_url.clone();
    options.recover_notice = Some(config::expand_home(&config.recover.notice, env));
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
}

impl TestAlert for ConfiguredTestAlert {
    fn send(
        &self,
        severity: Severity,
        channel: Option<&str>,
        now: i64,
    ) -> Result<Vec<Delivery>, String> {
        let env: Env<'_> = &config::process_env;
        let mut config = config::load(self.config.as_deref(), &[], env)
            .map(|l| l.config)
            .unwrap_or_else(|_| self.fallback.clone());
        if let Ok(Some(store)) = open_existing_read_only(&self.db) {
            apply_stored_settings(&mut config, &store);
        }
        let (_, reports) = send_test_alert(&config, severity, channel, now, false, env)
            .map_err(|e| e.to_string())?;
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
        WebError::Bind { .. } => Error::unavailable(e.to_string()),
    }
}

/// Load the configuration and bind the server (`agentwatch serve`); the caller runs it.
pub fn bind(args: &Options) -> Result<(Server, PathBuf), Error> {
    let env: Env<'_> = &config::process_env;
    let loaded = config::load(args.config.as_deref(), &[], env)?;
    let db = store_path(&loaded.config, args.db.as_deref(), env)?;
    let options = serve_options(&loaded, db.clone(), args.listen.as_deref(), env)?;
    let server = Server::bind(options).map_err(web_error)?;
    Ok((server, db))
}

/// Serve in the background when `[serve] enabled = true` (`None` otherwise), for a process that
/// runs the jobs (`agentwatch run`). The server reads the store the jobs write (WAL: it never
/// blocks a tick) and stops when the returned handle is dropped.
pub fn start_in_background(loaded: &Loaded, db: &Path) -> Result<Option<Running>, Error> {
    if !loaded.config.serve.enabled {
        return Ok(None);
    }
    let env: Env<'_> = &config::process_env;
    let options = serve_options(loaded, db.to_path_buf(), None, env)?;
    let server = Server::bind(options).map_err(web_error)?;
    let running = server.spawn();
    crate::journal::Line::info("serve", now_or_clock(None))
        .field("listening", format!("http://{}", running.local_addr()))
        .field("action", "start")
        .emit();
    Ok(Some(running))
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
            let env = move |k: &str| {
                (k == "AGENTWATCH_SERVE_TOKEN")
                    .then(|| token.map(str::to_owned))
                    .flatten()
            };
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
        let none = |_: &str| None;
        let l = loaded(&["serve.listen=\"127.0.0.1:9999\""]);
        let o = serve_options(&l, PathBuf::from("x.db"), None, &none).unwrap();
        assert_eq!(o.listen.to_string(), "127.0.0.1:9999");
        let o = serve_options(&l, PathBuf::from("x.db"), Some("127.0.0.1:7"), &none).unwrap();
        assert_eq!(o.listen.to_string(), "127.0.0.1:7");
        let e = serve_options(&l, PathBuf::from("x.db"), Some("localhost"), &none).unwrap_err();
        assert_eq!(e.exit_code(), crate::error::code::USAGE);
        let e = config::load(None, &["serve.listen=nowhere".to_owned()], &none).unwrap_err();
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

    #[test]
    fn disabled_serve_starts_nothing() {
        assert!(
            start_in_background(&loaded(&[]), Path::new("x.db"))
                .unwrap()
                .is_none()
        );
    }
}
