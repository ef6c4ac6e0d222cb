//! sd_notify(3) without libsystemd: one datagram per message to the socket systemd names in
//! `NOTIFY_SOCKET` (a path, or `@name` in the abstract namespace). `WATCHDOG_USEC` (with
//! `WATCHDOG_PID`, when set, naming this process) says how often systemd wants `WATCHDOG=1`.
//!
//! A service that is not started by systemd has neither variable, and every call is a no-op.

use std::os::unix::net::UnixDatagram;
use std::time::Duration;

/// Why a message could not be sent.
#[derive(Debug, thiserror::Error)]
pub enum NotifyError {
    /// `NOTIFY_SOCKET` is neither an absolute path nor `@name`.
    #[error("NOTIFY_SOCKET={0:?}: not an absolute path or @abstract name")]
    BadAddress(String),
    /// `WATCHDOG_USEC` is not a positive whole number.
    #[error("WATCHDOG_USEC={0:?}: not a positive number of microseconds")]
    BadWatchdog(String),
    /// The socket refused the message.
    #[error("sd_notify to {socket}: {source}")]
    Send {
        socket: String,
        #[source]
        source: std::io::Error,
    },
}

/// Where notifications go, and how often the watchdog wants a ping.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Notifier {
    /// `NOTIFY_SOCKET`, when systemd set it.
    socket: Option<String>,
    /// `WATCHDOG_USEC`, when systemd set it for this process.
    watchdog: Option<Duration>,
}

impl Notifier {
    /// What the environment asks for. `pid`: this process (a `WATCHDOG_PID` naming another
    /// process means the watchdog is not ours).
    pub fn from_env(env: &dyn Fn(&str) -> Option<String>, pid: u32) -> Result<Self, NotifyError> {
        let socket = env("NOTIFY_SOCKET").filter(|s| !s.is_empty());
        if let Some(s) = &socket
            && !(s.starts_with('/') || (s.starts_with('@') && s.len() > 1))
        {
            return Err(NotifyError::BadAddress(s.clone()));
        }
        let ours = env("WATCHDOG_PID")
            .map(|p| p.trim().parse::<u32>().ok() == Some(pid))
            .unwrap_or(true);
        let watchdog = match env("WATCHDOG_USEC").filter(|_| ours) {
            None => None,
            Some(text) => match text.trim().parse::<u64>() {
                Ok(usec) if usec > 0 => Some(Duration::from_micros(usec)),
                _ => return Err(NotifyError::BadWatchdog(text)),
            },
        };
        Ok(Self { socket, watchdog })
    }

    /// Whether systemd listens at all.
    pub fn enabled(&self) -> bool {
        self.socket.is_some()
    }

    /// How often to send `WATCHDOG=1`: half the watchdog's timeout, as sd_watchdog_enabled(3)
    /// recommends; `None` when there is no watchdog (or nobody to tell).
    pub fn watchdog_interval(&self) -> Option<Duration> {
        self.watchdog.filter(|_| self.enabled()).map(|d| d / 2)
    }

    /// Send `state` (newline-separated `KEY=value` assignments). A no-op without a socket.
    pub fn notify(&self, state: &str) -> Result<(), NotifyError> {
        let Some(socket) = &self.socket else {
            return Ok(());
        };
        let err = |source| NotifyError::Send {
            socket: socket.clone(),
            source,
        };
        let sock = UnixDatagram::unbound().map_err(err)?;
        match socket.strip_prefix('@') {
            Some(name) => send_abstract(&sock, name, state.as_bytes()),
            None => sock.send_to(state.as_bytes(), socket).map(drop),
        }
        .map_err(err)
    }

    /// `READY=1` with a status line.
    pub fn ready(&self, status: &str) -> Result<(), NotifyError> {
        self.notify(&format!("READY=1\nSTATUS={}", one_line(status)))
    }

    /// `WATCHDOG=1`.
    pub fn watchdog(&self) -> Result<(), NotifyError> {
        self.notify("WATCHDOG=1")
    }

    /// `STOPPING=1` with a status line.
    pub fn stopping(&self, status: &str) -> Result<(), NotifyError> {
        self.notify(&format!("STOPPING=1\nSTATUS={}", one_line(status)))
    }

    /// `STATUS=...` (what `systemctl status` shows).
    pub fn status(&self, status: &str) -> Result<(), NotifyError> {
        self.notify(&format!("STATUS={}", one_line(status)))
    }
}

/// A status is one assignment: a newline in it would start another.
fn one_line(text: &str) -> String {
    text.replace(['\n', '\r'], " ")
}

#[cfg(target_os = "linux")]
fn send_abstract(sock: &UnixDatagram, name: &str, bytes: &[u8]) -> std::io::Result<()> {
    use std::os::linux::net::SocketAddrExt;
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes())?;
    sock.send_to_addr(bytes, &addr).map(drop)
}

#[cfg(not(target_os = "linux"))]
fn send_abstract(_: &UnixDatagram, name: &str, _: &[u8]) -> std::io::Result<()> {
    Err(std::io::Error::new(
        std::io::ErrorKind::Unsupported,
        format!("abstract socket @{name} needs Linux"),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env_of<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| {
            pairs
                .iter()
                .find(|(key, _)| *key == k)
                .map(|(_, v)| (*v).to_owned())
        }
    }

    /// An environment, and the watchdog interval it asks for (`None`: an error).
    type Row = (
        &'static [(&'static str, &'static str)],
        Option<Option<Duration>>,
    );

    #[test]
    fn what_the_environment_asks_for() {
        let rows: &[Row] = &[
            (&[], Some(None)),
            (&[("NOTIFY_SOCKET", "/run/x")], Some(None)),
            (
                &[("NOTIFY_SOCKET", "@sd"), ("WATCHDOG_USEC", "20000000")],
                Some(Some(Duration::from_secs(10))),
            ),
            (
                &[
                    ("NOTIFY_SOCKET", "/run/x"),
                    ("WATCHDOG_USEC", "20000000"),
                    ("WATCHDOG_PID", "7"),
                ],
                Some(Some(Duration::from_secs(10))),
            ),
            (
                &[
                    ("NOTIFY_SOCKET", "/run/x"),
                    ("WATCHDOG_USEC", "20000000"),
                    ("WATCHDOG_PID", "8"),
                ],
                Some(None),
            ),
            (&[("WATCHDOG_USEC", "20000000")], Some(None)),
            (&[("NOTIFY_SOCKET", "relative")], None),
            (&[("NOTIFY_SOCKET", "@")], None),
            (&[("NOTIFY_SOCKET", "/x"), ("WATCHDOG_USEC", "0")], None),
            (&[("NOTIFY_SOCKET", "/x"), ("WATCHDOG_USEC", "1e9")], None),
        ];
        for (pairs, want) in rows {
            let got = Notifier::from_env(&env_of(pairs), 7);
            match want {
                Some(interval) => {
                    assert_eq!(got.unwrap().watchdog_interval(), *interval, "{pairs:?}")
                }
                None => assert!(got.is_err(), "{pairs:?}"),
            }
        }
    }

    #[test]
    fn messages_reach_a_socket_path() {
        let dir = std::env::temp_dir().join(format!("aw-notify-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("notify.sock");
        let listener = UnixDatagram::bind(&path).unwrap();
        let text = path.display().to_string();
        let notifier = Notifier::from_env(
            &|k| (k == "NOTIFY_SOCKET").then(|| text.clone()),
            std::process::id(),
        )
        .unwrap();
        notifier.ready("ticking\nforged=1").unwrap();
        notifier.watchdog().unwrap();
        let mut buf = [0u8; 256];
        let n = listener.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"READY=1\nSTATUS=ticking forged=1");
        let n = listener.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"WATCHDOG=1");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn messages_reach_an_abstract_socket() {
        use std::os::linux::net::SocketAddrExt;
        let name = format!("aw-notify-test-{}", std::process::id());
        let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
        let listener = UnixDatagram::bind_addr(&addr).unwrap();
        let at = format!("@{name}");
        let notifier =
            Notifier::from_env(&|k| (k == "NOTIFY_SOCKET").then(|| at.clone()), 1).unwrap();
        notifier.stopping("bye").unwrap();
        let mut buf = [0u8; 64];
        let n = listener.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"STOPPING=1\nSTATUS=bye");
    }

    #[test]
    fn without_a_socket_nothing_is_sent() {
        let notifier = Notifier::default();
        assert!(!notifier.enabled());
        notifier.ready("x").unwrap();
        notifier.watchdog().unwrap();
    }
}
