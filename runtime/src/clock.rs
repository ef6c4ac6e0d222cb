//! The one place the CLI reads the clock, and the journal's time format.

/// `--now` when given, else the system clock (unix seconds).
pub fn now_or_clock(now: Option<i64>) -> i64 {
    now.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
            .unwrap_or(0)
    })
}

/// `2026-01-15T14:30:01+00:00` for a unix time (UTC); the channels' formatter (Alertmanager's
/// `startsAt` uses it too).
pub use agentwatch_channels::iso8601;

/// The host name for `agentwatch@<host>` (from /etc/hostname; `localhost` when unknown).
pub fn host_name() -> String {
    std::fs::read_to_string("/etc/hostname")
        .ok()
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".to_owned())
}
