//! A real Prometheus Alertmanager (Debian's `prometheus-alertmanager`) on free loopback ports,
//! with a generated configuration and a temporary storage path, for end-to-end tests; and a small
//! HTTP client for its API.

use crate::TempDir;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The binary: `AGENTWATCH_ALERTMANAGER_BIN`, else `prometheus-alertmanager` (Debian) or
/// `alertmanager` on `PATH`.
pub fn find_binary() -> Option<PathBuf> {
    if let Some(bin) = std::env::var_os("AGENTWATCH_ALERTMANAGER_BIN") {
        return Some(PathBuf::from(bin)).filter(|p| p.is_file());
    }
    find_on_path(&["prometheus-alertmanager", "alertmanager"])
}

/// The first of `names` found on `PATH`.
pub fn find_on_path(names: &[&str]) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    names.iter().find_map(|name| {
        std::env::split_paths(&path)
            .map(|dir| dir.join(name))
            .find(|p| p.is_file())
    })
}

/// A free TCP port on 127.0.0.1 (bound, then released).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("bind 127.0.0.1:0")
        .port()
}

/// A minimal configuration: every alert to one webhook receiver (`send_resolved`), grouped per
/// alert (so each transition is its own notification), flushed within a second.
pub fn webhook_config(receiver_url: &str) -> String {
    format!(
        "route:\n  receiver: test\n  group_by: ['...']\n  group_wait: 0s\n  group_interval: 1s\n  \
         repeat_interval: 1h\nreceivers:\n  - name: test\n    webhook_configs:\n      - url: \
         '{receiver_url}'\n        send_resolved: true\n"
    )
}

/// A running Alertmanager; killed when dropped. Its storage survives [`Alertmanager::stop`] and
/// [`Alertmanager::start_again`] (same ports, same data).
#[derive(Debug)]
pub struct Alertmanager {
    child: Option<Child>,
    bin: PathBuf,
    args: Vec<String>,
    pub port: u16,
    /// The gossip port when clustered.
    pub cluster_port: Option<u16>,
    dir: TempDir,
}

impl Alertmanager {
    /// Starts one on free ports with `config` (YAML). `peer`: join that one's cluster (both
    /// then gossip on loopback); `None` and `clustered` false: no cluster at all.
    pub fn start(
        bin: &std::path::Path,
        config: &str,
        clustered: bool,
        peer: Option<&Alertmanager>,
    ) -> Result<Self, String> {
        let dir = TempDir::new("agentwatch-alertmanager");
        let config_path = dir.path.join("alertmanager.yml");
        std::fs::write(&config_path, config).map_err(|e| e.to_string())?;
        let port = free_port();
        let cluster_port = (clustered || peer.is_some()).then(free_port);
        let mut args = vec![
            format!("--config.file={}", config_path.display()),
            format!("--storage.path={}", dir.path.join("data").display()),
            format!("--web.listen-address=127.0.0.1:{port}"),
            "--log.level=warn".to_owned(),
        ];
        match cluster_port {
            None => args.push("--cluster.listen-address=".to_owned()),
            Some(c) => {
                args.push(format!("--cluster.listen-address=127.0.0.1:{c}"));
                args.push(format!("--cluster.advertise-address=127.0.0.1:{c}"));
                args.push("--cluster.gossip-interval=50ms".to_owned());
                args.push("--cluster.pushpull-interval=1s".to_owned());
                args.push("--cluster.settle-timeout=1s".to_owned());
            }
        }
        if let Some(peer_port) = peer.and_then(|p| p.cluster_port) {
            args.push(format!("--cluster.peer=127.0.0.1:{peer_port}"));
        }
        let mut am = Self {
            child: None,
            bin: bin.to_path_buf(),
            args,
            port,
            cluster_port,
            dir,
        };
        am.start_again()?;
        Ok(am)
    }

    /// (Re)starts the process with the same ports, configuration and storage.
    pub fn start_again(&mut self) -> Result<(), String> {
        self.stop();
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.path.join("alertmanager.log"))
            .map_err(|e| e.to_string())?;
        let child = Command::new(&self.bin)
            .args(&self.args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .map_err(|e| format!("spawn {}: {e}", self.bin.display()))?;
        self.child = Some(child);
        Ok(())
    }

    /// Kills the process (its data stays).
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// `http://127.0.0.1:PORT`
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// What it wrote to stderr so far (for failure messages).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path.join("alertmanager.log")).unwrap_or_default()
    }

    /// Polls `GET /-/ready` until it answers 200, or gives up at `limit` (the process exiting
    /// is an error at once).
    pub fn wait_ready(&mut self, limit: Duration) -> Result<(), String> {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(child) = self.child.as_mut()
                && let Ok(Some(status)) = child.try_wait()
            {
                return Err(format!("alertmanager exited ({status}): {}", self.log()));
            }
            if matches!(get(&format!("{}/-/ready", self.url())), Ok((200, _))) {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(format!(
                    "alertmanager not ready within {limit:?}: {}",
                    self.log()
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// `GET /api/v2/alerts` (active, silenced and inhibited; Alertmanager leaves resolved alerts
    /// out).
    pub fn alerts(&self) -> Result<serde_json::Value, String> {
        get_json(&format!("{}/api/v2/alerts", self.url()))
    }

    /// `POST /api/v2/silences` for alerts whose labels equal `matchers`, from `starts_at` to
    /// `ends_at` (RFC 3339); returns the silence id.
    pub fn silence(
        &self,
        matchers: &[(&str, &str)],
        starts_at: &str,
        ends_at: &str,
        comment: &str,
    ) -> Result<String, String> {
        let body = serde_json::json!({
            "matchers": matchers
                .iter()
                .map(|(n, v)| serde_json::json!({"name": n, "value": v, "isRegex": false, "isEqual": true}))
                .collect::<Vec<_>>(),
            "startsAt": starts_at,
            "endsAt": ends_at,
            "createdBy": "agentwatch tests",
            "comment": comment,
        });
        let (status, text) = request(
            "POST",
            &format!("{}/api/v2/silences", self.url()),
            Some(&body.to_string()),
        )?;
        if status != 200 {
            return Err(format!("POST /api/v2/silences: HTTP {status}: {text}"));
        }
        let value: serde_json::Value = serde_json::from_str(&text).map_err(|e| e.to_string())?;
        value["silenceID"]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| format!("no silenceID in {text}"))
    }
}

impl Alertmanager {
    /// `DELETE /api/v2/silence/{id}`: the silence expires now.
    pub fn expire_silence(&self, id: &str) -> Result<(), String> {
        match request(
            "DELETE",
            &format!("{}/api/v2/silence/{id}", self.url()),
            None,
        )? {
            (200, _) => Ok(()),
            (status, text) => Err(format!("DELETE silence {id}: HTTP {status}: {text}")),
        }
    }
}

impl Drop for Alertmanager {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Polls `probe` every 50 ms until it returns `Some`, or gives up at `limit` with the last
/// value seen described by `describe`.
pub fn wait_for<T>(
    limit: Duration,
    mut probe: impl FnMut() -> Option<T>,
    describe: impl Fn() -> String,
) -> Result<T, String> {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(value) = probe() {
            return Ok(value);
        }
        if Instant::now() >= deadline {
            return Err(format!("not within {limit:?}: {}", describe()));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `GET url`, the body parsed as JSON (any status but 200 is an error).
pub fn get_json(url: &str) -> Result<serde_json::Value, String> {
    let (status, body) = get(url)?;
    if status != 200 {
        return Err(format!("GET {url}: HTTP {status}: {body}"));
    }
    serde_json::from_str(&body).map_err(|e| format!("GET {url}: {e}: {body}"))
}

/// `GET url` over HTTP/1.0: status and body.
pub fn get(url: &str) -> Result<(u16, String), String> {
    request("GET", url, None)
}

/// One HTTP/1.0 request to an `http://127.0.0.1:PORT/…` URL (JSON body when given), read to the
/// end: status and body. Two-second timeouts.
pub fn request(method: &str, url: &str, body: Option<&str>) -> Result<(u16, String), String> {
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| format!("{url}: not http://"))?;
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let path = if path.is_empty() { "/" } else { path };
    let timeout = Duration::from_secs(2);
    let addr = authority
        .parse::<std::net::SocketAddr>()
        .map_err(|e| format!("{authority}: {e}"))?;
    let mut stream =
        TcpStream::connect_timeout(&addr, timeout).map_err(|e| format!("{url}: {e}"))?;
    stream.set_read_timeout(Some(timeout)).ok();
    stream.set_write_timeout(Some(timeout)).ok();
    let body = body.unwrap_or("");
    let head = format!(
        "{method} {path} HTTP/1.0\r\nHost: {authority}\r\nAccept: application/json\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    stream
        .write_all(head.as_bytes())
        .and_then(|()| stream.write_all(body.as_bytes()))
        .map_err(|e| format!("{url}: {e}"))?;
    let mut answer = Vec::new();
    stream
        .read_to_end(&mut answer)
        .map_err(|e| format!("{url}: {e}"))?;
    let text = String::from_utf8_lossy(&answer);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("{url}: not HTTP: {head}"))?;
    Ok((status, body.to_owned()))
}
