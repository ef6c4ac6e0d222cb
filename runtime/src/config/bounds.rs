//! The bounds of every numeric key, checked at load and shown in the README's table and `man`.

use super::*;

/// The longest timeout a key may set: one day.
pub const MAX_TIMEOUT_S: f64 = 86_400.0;

/// A validated timeout as a [`Duration`](std::time::Duration); total (an out-of-range value saturates, never panics).
pub fn duration(seconds: f64) -> std::time::Duration {
    std::time::Duration::try_from_secs_f64(seconds.clamp(0.0, MAX_TIMEOUT_S)).unwrap_or_default()
}

// ------------------------------------------------------------------------------------------------
// Bounds: one table of every number a file or a live edit may set

/// The range of one numeric key, and why its upper end is there: past it a tick could stall,
/// a signal could never fire, or memory would grow with the value. [`Config::validate`] checks
/// every row (a file, `--set`, the environment), and the live edits of `agentwatch serve` check
/// their key against the same row before they write; `docs/configuration.md`'s table is
/// [`bounds_table`].
#[derive(Debug, Clone, Copy)]
pub struct Bound {
    /// The dotted key; `channels[].x` is every channel's `x`.
    pub key: &'static str,
    pub min: f64,
    /// `min` itself is refused (a timeout of 0 s).
    pub min_exclusive: bool,
    pub max: f64,
    /// What the upper end keeps alive.
    pub why: &'static str,
    /// The values the key has in a configuration (none when unset).
    pub(super) values: fn(&Config) -> Vec<f64>,
}

impl Bound {
    /// Whether `value` lies within the range.
    pub fn admits(&self, value: f64) -> bool {
        let above_min = if self.min_exclusive {
            value > self.min
        } else {
            value >= self.min
        };
        value.is_finite() && above_min && value <= self.max
    }

    /// The range in words: `from 1 to 10000`, `> 0 and at most 600`.
    pub fn range(&self) -> String {
        if self.min_exclusive {
            format!("> {} and at most {}", self.min, self.max)
        } else {
            format!("from {} to {}", self.min, self.max)
        }
    }

    /// The error for a value outside the range, naming the key and the bound (not the value).
    pub fn refusal(&self, key: &str) -> String {
        format!("{key}: must be {} ({})", self.range(), self.why)
    }
}

/// The longest a detector count may be: the window and every count within it.
pub const MAX_DETECTOR_COUNT: f64 = 10_000.0;
/// The longest a network or process timeout may be: a tick waits for it.
pub const MAX_CALL_TIMEOUT_S: f64 = 600.0;
/// A day in seconds: the longest interval or hold.
pub(super) const DAY: f64 = 86_400.0;

/// One [`Bound`]: its key, its lowest value (exclusive or not), its highest, why, and the
/// values of it a configuration holds.
macro_rules! bound {
    ($key:literal, $min:expr, $excl:expr, $max:expr, $why:literal, |$c:ident| $values:expr) => {
        Bound {
            key: $key,
            min: $min,
            min_exclusive: $excl,
            max: $max,
            why: $why,
            values: |$c: &Config| $values,
        }
    };
}

/// Every numeric key of the configuration with its range.
pub const BOUNDS: &[Bound] = &[
    bound!(
        "watchdog.detector.window",
        1.0,
        false,
        MAX_DETECTOR_COUNT,
        "the window is kept and scanned for every session each tick",
        |c| vec![c.watchdog.detector.window as f64]
    ),
    bound!(
        "watchdog.detector.min_calls",
        1.0,
        false,
        MAX_DETECTOR_COUNT,
        "no signal fires before a span holds this many calls",
        |c| vec![c.watchdog.detector.min_calls as f64]
    ),
    bound!(
        "watchdog.detector.top_min",
        1.0,
        false,
        MAX_DETECTOR_COUNT,
        "`top` counts within the window: at most `window`",
        |c| vec![f64::from(c.watchdog.detector.top_min)]
    ),
    bound!(
        "watchdog.detector.top_min_ro",
        1.0,
        false,
        MAX_DETECTOR_COUNT,
        "`top` counts within the window: at most `window`",
        |c| vec![f64::from(c.watchdog.detector.top_min_ro)]
    ),
    bound!(
        "watchdog.detector.cum_min",
        1.0,
        false,
        MAX_DETECTOR_COUNT,
        "`slow` must be reachable by a session",
        |c| vec![f64::from(c.watchdog.detector.cum_min)]
    ),
    bound!(
        "watchdog.detector.cycle_min",
        1.0,
        false,
        MAX_DETECTOR_COUNT,
        "`cycle` must be reachable by a session",
        |c| vec![f64::from(c.watchdog.detector.cycle_min)]
    ),
    bound!(
        "watchdog.detector.repeat_min",
        1.0,
        false,
        MAX_DETECTOR_COUNT,
        "`repeat` must be reachable by a session",
        |c| vec![f64::from(c.watchdog.detector.repeat_min)]
    ),
    bound!(
        "watchdog.detector.dup_min",
        0.0,
        true,
        1.0,
        "a share of the window",
        |c| vec![c.watchdog.detector.dup_min]
    ),
    bound!(
        "watchdog.detector.cover_min",
        0.0,
        true,
        1_000.0,
        "`coverage` must be reachable within a window",
        |c| vec![c.watchdog.detector.cover_min]
    ),
    bound!(
        "watchdog.detector.reread_min",
        0.0,
        true,
        1_000.0,
        "`reread` must be reachable within a window",
        |c| vec![c.watchdog.detector.reread_min]
    ),
    bound!(
        "watchdog.escalate_after_ticks",
        1.0,
        false,
        1_000.0,
        "an alert escalates within days, not never",
        |c| vec![f64::from(c.watchdog.escalate_after_ticks)]
    ),
    bound!(
        "watchdog.escalate_min_gap_s",
        0.0,
        false,
        86_400.0,
        "0: every judgement counts; else at most a day between counted ones",
        |c| vec![c.watchdog.escalate_min_gap_s as f64]
    ),
    bound!(
        "watchdog.max_llm_opinions_per_tick",
        0.0,
        false,
        100.0,
        "each opinion is a call the tick waits for",
        |c| vec![f64::from(c.watchdog.max_llm_opinions_per_tick)]
    ),
    bound!(
        "watchdog.blind_after_ticks",
        0.0,
        false,
        1_000.0,
        "0: never; a failing source is reported within days",
        |c| vec![f64::from(c.watchdog.blind_after_ticks)]
    ),
    bound!(
        "watchdog.stale_after_s",
        0.0,
        false,
        MAX_STALE_AFTER_S as f64,
        "0: no limit; else 30 days",
        |c| vec![c.watchdog.stale_after_s as f64]
    ),
    bound!(
        "watchdog.repeat_interval_s",
        0.0,
        false,
        MAX_STALE_AFTER_S as f64,
        "0: never; else a reminder within 30 days",
        |c| vec![c.watchdog.repeat_interval_s as f64]
    ),
    bound!(
        "watchdog.llm.timeout_s",
        0.0,
        true,
        MAX_CALL_TIMEOUT_S,
        "the tick waits for it",
        |c| vec![c.watchdog.llm.timeout_s]
    ),
    bound!(
        "opencode.connect_timeout_s",
        0.0,
        true,
        MAX_CALL_TIMEOUT_S,
        "the tick waits for it",
        |c| vec![c.opencode.connect_timeout_s]
    ),
    bound!(
        "opencode.request_timeout_s",
        0.0,
        true,
        MAX_CALL_TIMEOUT_S,
        "the tick waits for it",
        |c| vec![c.opencode.request_timeout_s]
    ),
    bound!(
        "opencode.source_deadline_s",
        0.0,
        true,
        2.0 * MAX_CALL_TIMEOUT_S,
        "the tick waits for each source this long at most",
        |c| c.opencode.source_deadline_s.into_iter().collect()
    ),
    bound!(
        "opencode.max_parallel",
        1.0,
        false,
        64.0,
        "each read in flight is a thread and a connection",
        |c| vec![f64::from(c.opencode.max_parallel)]
    ),
    bound!(
        "act.max_blocks",
        1.0,
        false,
        1_000.0,
        "a session is stopped after at most this many refusals",
        |c| vec![f64::from(c.act.max_blocks)]
    ),
    bound!(
        "act.min_repeats",
        2.0,
        false,
        16.0,
        "the detector remembers a session's last 16 calls",
        |c| vec![f64::from(c.act.min_repeats)]
    ),
    bound!(
        "follow.min_interval_s",
        1.0,
        false,
        3_600.0,
        "the alert lifecycle runs at least hourly",
        |c| vec![c.follow.min_interval_s as f64]
    ),
    bound!(
        "follow.heartbeat_s",
        1.0,
        false,
        3_600.0,
        "a silent stream is reopened within an hour",
        |c| vec![c.follow.heartbeat_s as f64]
    ),
    bound!(
        "follow.max_backoff_s",
        1.0,
        false,
        3_600.0,
        "a dropped stream is retried within an hour",
        |c| vec![c.follow.max_backoff_s as f64]
    ),
    bound!(
        "run.watch_interval_s",
        1.0,
        false,
        DAY,
        "a tick at least daily",
        |c| vec![c.run.watch_interval_s as f64]
    ),
    bound!(
        "run.recover_interval_s",
        1.0,
        false,
        DAY,
        "a check at least daily",
        |c| vec![c.run.recover_interval_s as f64]
    ),
    bound!(
        "recover.restart_timeout_s",
        0.0,
        true,
        3_600.0,
        "the check waits for the restart",
        |c| vec![c.recover.restart_timeout_s]
    ),
    bound!(
        "recover.router_timeout_s",
        0.0,
        true,
        MAX_CALL_TIMEOUT_S,
        "the check waits for it",
        |c| vec![c.recover.router_timeout_s]
    ),
    bound!(
        "recover.countdown",
        0.0,
        false,
        3_600.0,
        "the restart comes within an hour of its notice",
        |c| vec![f64::from(c.recover.countdown)]
    ),
    bound!(
        "recover.cooldown",
        0.0,
        false,
        7.0 * DAY,
        "recovery acts again within a week",
        |c| vec![f64::from(c.recover.cooldown)]
    ),
    bound!(
        "recover.min_probe_gap",
        0.0,
        false,
        DAY,
        "two probes can confirm within a day",
        |c| vec![f64::from(c.recover.min_probe_gap)]
    ),
    bound!(
        "recover.max_report_age",
        1.0,
        false,
        DAY,
        "a report older than a day is not fresh",
        |c| vec![f64::from(c.recover.max_report_age)]
    ),
    bound!(
        "recover.report_window",
        0.0,
        false,
        DAY,
        "a duration shown on the notice",
        |c| vec![f64::from(c.recover.report_window)]
    ),
    bound!(
        "recover.veto_limit",
        0.0,
        false,
        100.0,
        "vetoes delay, never deny",
        |c| c.recover.veto_limit.map(f64::from).into_iter().collect()
    ),
    bound!(
        "deck.interval_s",
        1.0,
        false,
        DAY,
        "a tick at least daily",
        |c| vec![c.deck.interval_s as f64]
    ),
    bound!(
        "deck.min_tick_gap_s",
        0.0,
        false,
        3_600.0,
        "hook changes are looked at within an hour",
        |c| vec![c.deck.min_tick_gap_s as f64]
    ),
    bound!(
        "deck.hook_poll_s",
        1.0,
        false,
        3_600.0,
        "hook files are polled at least hourly",
        |c| vec![c.deck.hook_poll_s as f64]
    ),
    bound!(
        "deck.command_timeout_s",
        0.0,
        true,
        MAX_CALL_TIMEOUT_S,
        "the tick waits for it",
        |c| vec![c.deck.command_timeout_s]
    ),
    bound!(
        "deck.restart_timeout_s",
        0.0,
        true,
        3_600.0,
        "the tick waits for the restart",
        |c| vec![c.deck.restart_timeout_s]
    ),
    bound!(
        "deck.telegram_timeout_s",
        0.0,
        true,
        MAX_CALL_TIMEOUT_S,
        "the tick waits for it",
        |c| vec![c.deck.telegram_timeout_s]
    ),
    bound!(
        "deck.restart_guard.per_session_limit",
        1.0,
        false,
        100.0,
        "restarts in one window",
        |c| vec![f64::from(c.deck.restart_guard.per_session_limit)]
    ),
    bound!(
        "deck.restart_guard.window",
        1.0,
        false,
        DAY,
        "the limit's window",
        |c| vec![f64::from(c.deck.restart_guard.window)]
    ),
    bound!(
        "deck.restart_guard.global_spacing",
        0.0,
        false,
        DAY,
        "a restart can come within a day",
        |c| vec![f64::from(c.deck.restart_guard.global_spacing)]
    ),
    bound!(
        "deck.restart_guard.quiet_after_restart",
        0.0,
        false,
        DAY,
        "a session is watched again within a day",
        |c| vec![f64::from(c.deck.restart_guard.quiet_after_restart)]
    ),
    bound!(
        "deck.restart_guard.rate_limit_backoff",
        0.0,
        false,
        DAY,
        "a rate-limited session is looked at within a day",
        |c| vec![f64::from(c.deck.restart_guard.rate_limit_backoff)]
    ),
    bound!(
        "deck.restart_guard.poller_dedup",
        0.0,
        false,
        7.0 * DAY,
        "a poller is restarted again within a week",
        |c| vec![f64::from(c.deck.restart_guard.poller_dedup)]
    ),
    bound!(
        "deck.restart_guard.failures_before_escalation",
        0.0,
        false,
        100.0,
        "failed restarts escalate",
        |c| vec![f64::from(c.deck.restart_guard.failures_before_escalation)]
    ),
    bound!(
        "deck.waiting_patrol.threshold",
        1.0,
        false,
        DAY,
        "a waiting pane is nudged within a day",
        |c| vec![f64::from(c.deck.waiting_patrol.threshold)]
    ),
    bound!(
        "deck.waiting_patrol.nudge_dedup",
        0.0,
        false,
        7.0 * DAY,
        "a pane is nudged again within a week",
        |c| vec![f64::from(c.deck.waiting_patrol.nudge_dedup)]
    ),
    bound!(
        "channels[].rate_limit_s",
        0.0,
        false,
        DAY,
        "a channel hears of a new alert within a day",
        |c| c.channels.iter().map(|ch| ch.rate_limit_s as f64).collect()
    ),
    bound!(
        "channels[].timeout_s",
        0.0,
        true,
        MAX_CALL_TIMEOUT_S,
        "the tick waits for the delivery",
        |c| c.channels.iter().map(|ch| ch.timeout_s).collect()
    ),
    bound!(
        "channels[].ends_after_s",
        1.0,
        false,
        DAY,
        "Alertmanager resolves an alert no tick re-asserts",
        |c| c
            .channels
            .iter()
            .filter_map(|ch| ch.ends_after_s)
            .map(|s| s as f64)
            .collect()
    ),
];

/// The row of `key` (`channels[0].timeout_s` is the row of `channels[].timeout_s`).
pub fn bound_of(key: &str) -> Option<&'static Bound> {
    let general = match (key.find('['), key.find(']')) {
        (Some(open), Some(close)) if open < close => {
            format!("{}[]{}", &key[..open], &key[close + 1..])
        }
        _ => key.to_owned(),
    };
    BOUNDS.iter().find(|b| b.key == general)
}

/// Check every row of [`BOUNDS`], and that `top` can fire within the window.
pub(super) fn check_bounds(config: &Config) -> Result<(), Error> {
    for bound in BOUNDS {
        for (i, value) in (bound.values)(config).into_iter().enumerate() {
            if !bound.admits(value) {
                let key = bound.key.replace("[]", &format!("[{i}]"));
                return Err(config_err(bound.refusal(&key)));
            }
        }
    }
    let d = &config.watchdog.detector;
    for (key, value) in [("top_min", d.top_min), ("top_min_ro", d.top_min_ro)] {
        if value as usize > d.window {
            return Err(config_err(format!(
                "watchdog.detector.{key}: must be at most window ({}): `top` counts within the window, so it could never fire",
                d.window
            )));
        }
    }
    Ok(())
}

/// The README's table of [`BOUNDS`]: key, range, why.
pub fn bounds_table() -> String {
    let mut out = String::from("| key | range | why the upper end |\n|---|---|---|\n");
    for b in BOUNDS {
        out.push_str(&format!("| `{}` | {} | {} |\n", b.key, b.range(), b.why));
    }
    out
}

/// Every key with its default and range, as `agentwatch man` lists them: the reference table of
/// `docs/configuration.md` (a test keeps it in step).
pub fn keys_table() -> String {
    let mut out = String::from("| key | default | range |\n|---|---|---|\n");
    for KeyDefault { key, value, range } in default_keys() {
        let value = value.replace('|', "\\|");
        let range = range.unwrap_or_default();
        out.push_str(&format!("| `{key}` | `{value}` | {range} |\n"));
    }
    out
}

/// A key of the default configuration, as `agentwatch man` lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyDefault {
    /// Dotted (`watchdog.detector.window`; a channel's keys under `channels[]`).
    pub key: String,
    /// The default as JSON text, which TOML reads the same for these values.
    pub value: String,
    /// The range [`BOUNDS`] allows, when it has a row for the key.
    pub range: Option<String>,
}

/// Every leaf key of [`Config::default()`] with its value and range, then a channel's keys
/// (`channels[].…`, from [`ChannelSection::default()`]). Lists of tables and unset (`null`)
/// keys are left out; `channels` (empty by default) is listed through the channel's keys.
pub fn default_keys() -> Vec<KeyDefault> {
    let mut keys = Vec::new();
    flatten_defaults(
        "",
        &serde_json::to_value(Config::default()).unwrap_or_default(),
        &mut keys,
    );
    let channel = serde_json::to_value(ChannelSection::default()).unwrap_or_default();
    flatten_defaults("channels[]", &channel, &mut keys);
    keys
}

/// The leaves of `value` (a table) under `prefix`, in the table's order.
pub(super) fn flatten_defaults(prefix: &str, value: &serde_json::Value, out: &mut Vec<KeyDefault>) {
    use serde_json::Value as Json;
    let Some(table) = value.as_object() else {
        return;
    };
    for (key, v) in table {
        if prefix.is_empty() && key == "channels" {
            continue;
        }
        let dotted = if prefix.is_empty() {
            key.clone()
        } else {
            format!("{prefix}.{key}")
        };
        match v {
            Json::Object(_) => flatten_defaults(&dotted, v, out),
            Json::Array(items) if items.iter().any(Json::is_object) => {}
            Json::Null => {}
            other => out.push(KeyDefault {
                range: bound_of(&dotted).map(Bound::range),
                key: dotted,
                value: other.to_string(),
            }),
        }
    }
}
