//! Operator commands, the design's admin surfaces on the command line:
//! `status`, `alerts`, `channels`, `test-alert` and `config`. Each has `--json`.

use crate::clock::{host_name, iso8601, now_or_clock};
use crate::config::{self, ChannelSection, Config, Env, parse_severity};
use crate::error::{Error, code};
use crate::jobs::sessions::blind::{ChannelHealth, load_channel_health};
use crate::liveness::{JobTick, STALE_INTERVALS, job_ticks};
use crate::notify::{
    ALERT_NOTES_KEY, AlertNote, SendReport, alert_notes, apply_stored_settings, send,
};
use crate::stored::{
    open_existing_read_only as open_read_only, parse_policy, store_path, take_lock,
};
use crate::text::{ago, ahead, duration, escape_control, table, warn_colour};
use agentwatch_store::{AlertRow, ChannelSetting, EventKind, Store};
use alert_state::{AlertEvent, EventState, Severity};
use recovery_policy::loop_recovery::LoopRecoveryState;
use serde_json::json;
use std::path::PathBuf;

/// Options every operator command shares.
#[derive(Debug, Clone, Default)]
pub struct Common {
    /// Configuration file.
    pub config: Option<PathBuf>,
    /// The SQLite database.
    pub db: Option<PathBuf>,
    /// Print JSON.
    pub json: bool,
}

fn load(common: &Common, env: Env<'_>) -> Result<(Config, PathBuf), Error> {
    let loaded = config::load(common.config.as_deref(), &[], env)?;
    let db = store_path(&loaded.config, common.db.as_deref(), env)?;
    Ok((loaded.config, db))
}

/// What an operator command shows (the text or the JSON, as asked) and its exit code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shown {
    pub text: String,
    pub exit_code: u8,
}

impl Shown {
    fn text(text: String) -> Self {
        Self {
            text,
            exit_code: code::OK,
        }
    }

    fn json(value: &serde_json::Value) -> Self {
        Self::text(format!(
            "{}\n",
            serde_json::to_string_pretty(value).unwrap_or_default()
        ))
    }
}

#[derive(Debug, Clone, Default)]
pub struct StatusArgs {
    pub common: Common,
    /// The time to judge ages by, unix seconds (default the clock).
    pub now: Option<i64>,
    /// Colour the warnings (a terminal without `NO_COLOR`; see [`crate::text::colour_stdout`]).
    pub colour: bool,
}

/// How many restarts `status` lists.
const RESTARTS_SHOWN: usize = 5;

/// One opencode source as `status` shows it: up at the last tick, or failing since when.
struct SourceState {
    /// Sessions it gave at the last tick (not known for a state stored before they were).
    sessions: Option<usize>,
    name: String,
    down: Option<crate::jobs::sessions::blind::Failing>,
}

/// The sources the last opencode tick read (up) and those failing tick after tick (down, from
/// their stored streaks), by name.
fn source_states(
    store: Option<&Store>,
    tick: Option<&agentwatch_store::TickRow>,
) -> Vec<SourceState> {
    use crate::jobs::sessions::blind::{SOURCES_STATE_KEY, SourceHealth};
    let health: SourceHealth = store
        .and_then(|s| s.load_state(SOURCES_STATE_KEY).ok().flatten())
        .and_then(|text| serde_json::from_str(&text).ok())
        .unwrap_or_default();
    let mut out: Vec<SourceState> = tick
        .map(|t| t.servers.as_slice())
        .unwrap_or_default()
        .iter()
        .filter(|name| !health.failing.contains_key(*name))
        .map(|name| SourceState {
            sessions: health.sessions.get(name).copied(),
            name: name.clone(),
            down: None,
        })
        .collect();
    out.extend(health.failing.into_iter().map(|(name, f)| SourceState {
        sessions: None,
        name,
        down: Some(f),
    }));
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// Seconds of the recover job's cooldown left (its stored loop-recovery state), if any.
fn cooldown_left(store: Option<&Store>, config: &Config, now: i64) -> Option<i64> {
    let text = store?.load_state(crate::jobs::recover::STATE_KEY).ok()??;
    let state = parse_policy::<LoopRecoveryState>(&text).ok()?;
    let left = i64::from(config.recover.cooldown) - now.saturating_sub(state.cooldown_from?);
    (left > 0).then_some(left)
}

/// What `status` shows, read from the store at `now`.
struct StatusView {
    db: PathBuf,
    now: i64,
    tick: Option<agentwatch_store::TickRow>,
    counts: Option<agentwatch_store::VerdictCounts>,
    open: Vec<AlertRow>,
    restarts: Vec<agentwatch_store::JobEvent>,
    jobs: Vec<JobTick>,
    channel_health: ChannelHealth,
    sources: Vec<SourceState>,
    cooldown: Option<i64>,
}

impl StatusView {
    /// Read everything `status` shows (the store's settings applied to `config`).
    fn read(
        store: Option<&Store>,
        db: PathBuf,
        config: &mut Config,
        now: i64,
    ) -> Result<Self, Error> {
        let (mut tick, mut counts, mut open, mut restarts) = (None, None, Vec::new(), Vec::new());
        if let Some(s) = store {
            tick = s.last_tick().map_err(Error::from)?;
            if let Some(t) = &tick {
                counts = Some(s.verdict_counts(t.id).map_err(Error::from)?);
            }
            apply_stored_settings(config, s);
            restarts = s
                .recent_events(EventKind::Restart, None, RESTARTS_SHOWN)
                .map_err(Error::from)?;
            open = s.alerts(false).map_err(Error::from)?;
        }
        Ok(Self {
            jobs: job_ticks(store, config, now)?,
            channel_health: store.map(load_channel_health).unwrap_or_default(),
            sources: source_states(store, tick.as_ref()),
            cooldown: cooldown_left(store, config, now),
            db,
            now,
            tick,
            counts,
            open,
            restarts,
        })
    }

    fn stale(&self) -> Vec<&JobTick> {
        self.jobs.iter().filter(|j| j.stale).collect()
    }
}

/// Every job's last tick and age, open alerts (opencode's and the deck's `deck:` escalations),
/// the last restarts, the recover cooldown left, the channels. Exit 69 naming the job when a job
/// that has ticked before last ticked more than [`STALE_INTERVALS`] of its intervals ago.
pub fn status(args: &StatusArgs) -> Result<Shown, Error> {
    let env: Env<'_> = &config::process_env;
    let (mut config, db) = load(&args.common, env)?;
    let now = now_or_clock(args.now);
    let store = open_read_only(&db)?;
    let view = StatusView::read(store.as_ref(), db, &mut config, now)?;
    let exit_code = if view.stale().is_empty() {
        code::OK
    } else {
        code::UNAVAILABLE
    };
    if args.common.json {
        let mut shown = Shown::json(&status_json(&config, &view));
        shown.exit_code = exit_code;
        return Ok(shown);
    }
    let notes = store.as_ref().map(alert_notes).unwrap_or_default();
    let mut out = String::new();
    status_jobs_text(&view, args.colour, &mut out);
    status_sources_text(&view, &mut out);
    status_alerts_text(&view, &notes, &mut out);
    status_restarts_text(&view, &mut out);
    out.push('\n');
    if config.channels.is_empty() {
        out.push_str("channels: none configured\n");
    } else {
        out.push_str(&table(
            &[
                "CHANNEL",
                "TYPE",
                "ENABLED",
                "MIN SEVERITY",
                "RATE LIMIT",
                "STATE",
            ],
            &channel_rows(&config, &view.channel_health),
        ));
    }
    Ok(Shown {
        text: out,
        exit_code,
    })
}

/// `status --json`.
fn status_json(config: &Config, v: &StatusView) -> serde_json::Value {
    let now = v.now;
    let channels: Vec<serde_json::Value> = config
        .channels
        .iter()
        .map(|c| {
            let failing = v.channel_health.failing.get(&c.name);
            json!({"name": c.name, "type": c.channel_type, "enabled": c.enabled, "min_severity": c.min_severity, "rate_limit_s": c.rate_limit_s, "failing": failing.map(|f| json!({"failed": f.ticks, "since": f.since, "error": f.why}))})
        })
        .collect();
    let jobs: Vec<serde_json::Value> = v
        .jobs
        .iter()
        .map(|j| json!({"job": j.job, "last_tick_at": j.last_at, "age_s": j.last_at.map(|at| now - at), "outcome": j.outcome, "interval_s": j.interval_s, "stale": j.stale, "disabled": j.disabled.is_some(), "disabled_because": j.disabled}))
        .collect();
    let sources: Vec<serde_json::Value> = v
        .sources
        .iter()
        .map(|src| json!({"source": src.name, "state": if src.down.is_some() { "down" } else { "up" }, "sessions": src.sessions, "failing_since": src.down.as_ref().map(|f| f.since), "failed_ticks": src.down.as_ref().map(|f| f.ticks), "problem": src.down.as_ref().map(|f| &f.why)}))
        .collect();
    json!({
        "db": v.db.display().to_string(),
        "now": now,
        "last_tick": v.tick,
        "verdicts": v.counts,
        "jobs": jobs,
        "stale": v.stale().iter().map(|j| j.job).collect::<Vec<_>>(),
        "sources": sources,
        "open_alerts": v.open.len(),
        "alerts": v.open,
        "restarts": v.restarts,
        "recover_cooldown_left_s": v.cooldown,
        "channels": channels,
    })
}

/// `status`: the stale jobs' warnings, the database, the jobs' table and the last tick's
/// verdicts.
fn status_jobs_text(v: &StatusView, colour: bool, out: &mut String) {
    let now = v.now;
    for j in v.stale() {
        let line = format!(
            "warning: the {} job is stale: its last tick was {} (more than {} intervals of {})\n",
            j.job,
            j.last_at.map_or_else(String::new, |at| ago(now - at)),
            STALE_INTERVALS,
            duration(j.interval_s)
        );
        out.push_str(&warn_colour(&line, colour));
    }
    out.push_str(&format!("database: {}\n\n", v.db.display()));
    let rows: Vec<Vec<String>> = v
        .jobs
        .iter()
        .map(|j| {
            vec![
                j.job.to_owned(),
                j.last_at
                    .map_or_else(|| "never".to_owned(), |at| ago(now - at)),
                j.last_at.map_or_else(String::new, iso8601),
                j.outcome.clone().unwrap_or_default(),
                format!("every {}", duration(j.interval_s)),
                match (j.stale, j.disabled) {
                    (true, _) => "STALE".to_owned(),
                    (false, Some(why)) => format!("disabled ({why})"),
                    (false, None) => String::new(),
                },
            ]
        })
        .collect();
    out.push_str(&table(
        &["JOB", "LAST TICK", "AT", "OUTCOME", "INTERVAL", ""],
        &rows,
    ));
    if let (Some(t), Some(c)) = (&v.tick, &v.counts) {
        out.push_str(&format!(
            "\nwatch: {} sessions seen, {}/{} verdicts flagged at the last tick\n",
            t.sessions_seen, c.flagged, c.total
        ));
    }
}

/// `status`: each source, up with its active sessions or down since when and why.
fn status_sources_text(v: &StatusView, out: &mut String) {
    if v.sources.is_empty() {
        return;
    }
    let rows: Vec<Vec<String>> = v
        .sources
        .iter()
        .map(|src| match &src.down {
            None => vec![
                src.name.clone(),
                "up".to_owned(),
                src.sessions
                    .map(|n| format!("{n} active session{}", if n == 1 { "" } else { "s" }))
                    .unwrap_or_default(),
            ],
            Some(f) => vec![
                src.name.clone(),
                "DOWN".to_owned(),
                format!(
                    "failing since {} ({} ticks): {}",
                    ago(v.now - f.since),
                    f.ticks,
                    f.why
                ),
            ],
        })
        .collect();
    out.push('\n');
    out.push_str(&table(&["SOURCE", "STATE", ""], &rows));
}

/// `status`: the open alerts and their notes.
fn status_alerts_text(
    v: &StatusView,
    notes: &std::collections::BTreeMap<String, AlertNote>,
    out: &mut String,
) {
    out.push_str(&format!("\nopen alerts: {}\n", v.open.len()));
    if v.open.is_empty() {
        return;
    }
    let rows: Vec<Vec<String>> = v
        .open
        .iter()
        .map(|a| {
            vec![
                a.severity.clone(),
                a.dedup_key.clone(),
                ago(v.now - a.opened_at),
                a.title.clone(),
            ]
        })
        .collect();
    out.push_str(&table(&["SEVERITY", "KEY", "OPENED", "TITLE"], &rows));
    out.push_str(&note_lines(notes, v.now));
    for (a, refused) in v
        .open
        .iter()
        .filter_map(|a| refusal_sentence(a).map(|r| (a, r)))
    {
        out.push_str(&format!(
            "  {}: {}\n",
            escape_control(&a.dedup_key),
            escape_control(&refused)
        ));
    }
}

/// What agentwatch's own hook refused in an alert's tree (``agentwatch blocked 3 calls of
/// `pytest -x`; the session stopped``); `None` when it refused nothing.
fn refusal_sentence(alert: &AlertRow) -> Option<String> {
    alert_state::Refusals::sentence_of(alert.refusals.as_ref())
}

/// `status`: the last restarts and the recover cooldown left.
fn status_restarts_text(v: &StatusView, out: &mut String) {
    out.push_str(&format!(
        "\nrestarts: {}\n",
        if v.restarts.is_empty() {
            "none recorded"
        } else {
            "the last ones"
        }
    ));
    if !v.restarts.is_empty() {
        let rows: Vec<Vec<String>> = v
            .restarts
            .iter()
            .map(|e| {
                vec![
                    e.job.clone(),
                    e.name.clone(),
                    e.result.clone(),
                    ago(v.now - e.at),
                ]
            })
            .collect();
        out.push_str(&table(&["JOB", "WHAT", "RESULT", "WHEN"], &rows));
    }
    if let Some(left) = v.cooldown {
        out.push_str(&format!("recover cooldown: {} left\n", duration(left)));
    }
}

/// The `status` table's channel rows: each configured channel with whether it delivers (its
/// streak of failed deliveries and last error, the channel's own text, free of secrets).
fn channel_rows(config: &Config, health: &ChannelHealth) -> Vec<Vec<String>> {
    config
        .channels
        .iter()
        .map(|c| {
            let state = match health.failing.get(&c.name) {
                Some(f) => format!(
                    "FAILING: {} in a row since {}: {}",
                    f.ticks,
                    iso8601(f.since),
                    escape_control(&f.why)
                ),
                None => "ok".to_owned(),
            };
            vec![
                c.name.clone(),
                c.channel_type.to_string(),
                if c.enabled { "on" } else { "off" }.to_owned(),
                c.min_severity.to_string(),
                format!("{} s", c.rate_limit_s),
                state,
            ]
        })
        .collect()
}

/// One line per open alert an operator acknowledged or silenced, its times as a person reads
/// them: `  KEY: acknowledged 3 min ago; silenced until 2026-11-30T02:53:30+00:00 (in 2 h)`.
fn note_lines(notes: &std::collections::BTreeMap<String, AlertNote>, now: i64) -> String {
    let mut out = String::new();
    for (key, note) in notes {
        let mut said = Vec::new();
        if let Some(at) = note.acked_at {
            said.push(format!("acknowledged {}", ago(now - at)));
        }
        match note.silenced_until {
            Some(until) if until > now => said.push(format!(
                "silenced until {} ({})",
                iso8601(until),
                ahead(until - now)
            )),
            Some(until) => said.push(format!("silence ended {}", ago(now - until))),
            None => {}
        }
        if !said.is_empty() {
            out.push_str(&format!("  {}: {}\n", escape_control(key), said.join("; ")));
        }
    }
    out
}

#[derive(Debug, Clone, Default)]
pub struct AlertsArgs {
    pub common: Common,
    /// Include resolved alerts.
    pub all: bool,
    /// Acknowledge or silence one open alert instead of listing.
    pub action: Option<AlertsAction>,
}

#[derive(Debug, Clone)]
pub enum AlertsAction {
    /// Acknowledge an open alert (shown in `alerts`; ended by its resolve).
    Ack { key: String, now: Option<i64> },
    /// Send an open alert's events to no channel for a while (`2h`, `30m`, `1d`, `90s`).
    Silence {
        key: String,
        duration: String,
        now: Option<i64>,
    },
}

/// Seconds of a silence: a whole number with `s`, `m`, `h` or `d` (`2h`); more than zero.
pub fn parse_for(text: &str) -> Result<i64, Error> {
    let bad = || {
        Error::usage(format!(
            "--for {text:?}: expected a duration like 90s, 30m, 2h, 1d"
        ))
    };
    let split = text.find(|c: char| !c.is_ascii_digit()).ok_or_else(bad)?;
    let (number, unit) = text.split_at(split);
    let number: i64 = number.parse().map_err(|_| bad())?;
    let unit = match unit {
        "s" => 1,
        "m" | "min" => 60,
        "h" => 3_600,
        "d" => 86_400,
        _ => return Err(bad()),
    };
    number.checked_mul(unit).filter(|s| *s > 0).ok_or_else(bad)
}

/// Whether `given` names the alert `key`: a prefix of the key (`opencode-loop:ses_ab`) or of
/// its session part after the first `:` (`ses_ab`), as a person copies it from `alerts`.
fn names(key: &str, given: &str) -> bool {
    key.starts_with(given)
        || key
            .split_once(':')
            .is_some_and(|(_, session)| session.starts_with(given))
}

/// The open alert `given` names among `alerts` (open and resolved): its exact key, else the one
/// open alert it is a prefix of. Several: a usage error listing them; none open: a usage error
/// that says whether it names a resolved alert.
fn find_open_alert(alerts: &[AlertRow], given: &str) -> Result<AlertRow, Error> {
    let shown = escape_control(given);
    if given.is_empty() {
        return Err(Error::usage("the alert key is empty"));
    }
    let (open, resolved): (Vec<&AlertRow>, Vec<&AlertRow>) =
        alerts.iter().partition(|a| a.resolved_at.is_none());
    if let Some(exact) = open.iter().find(|a| a.dedup_key == given) {
        return Ok((*exact).clone());
    }
    let matches: Vec<&&AlertRow> = open.iter().filter(|a| names(&a.dedup_key, given)).collect();
    match matches.as_slice() {
        [one] => Ok((**one).clone()),
        [] => match resolved.iter().find(|a| names(&a.dedup_key, given)) {
            Some(gone) => Err(Error::usage(format!(
                "{} is resolved ({}): only an open alert takes an ack or a silence",
                escape_control(&gone.dedup_key),
                gone.resolved_at.map(iso8601).unwrap_or_default()
            ))),
            None => Err(Error::usage(format!(
                "no open alert {shown:?} (`agentwatch alerts` lists them)"
            ))),
        },
        many => {
            let keys: Vec<String> = many
                .iter()
                .map(|a| format!("  {}", escape_control(&a.dedup_key)))
                .collect();
            Err(Error::usage(format!(
                "{shown:?} names {} open alerts; give more of the key:\n{}",
                many.len(),
                keys.join("\n")
            )))
        }
    }
}

/// Store an ack or silence of the open alert `key` (a unique prefix of it, see
/// [`find_open_alert`]).
fn note_alert(db: &std::path::Path, action: &AlertsAction) -> Result<Shown, Error> {
    let (key, now) = match action {
        AlertsAction::Ack { key, now } | AlertsAction::Silence { key, now, .. } => {
            (key, now_or_clock(*now))
        }
    };
    let _lock = take_lock(db, "alerts")?;
    let mut store = Store::open(db).map_err(Error::from)?;
    let alert = find_open_alert(&store.alerts(true).map_err(Error::from)?, key)?;
    let key = &alert.dedup_key;
    let mut notes = alert_notes(&store);
    let note = notes.entry(key.clone()).or_insert_with(|| AlertNote {
        opened_at: alert.opened_at,
        ..AlertNote::default()
    });
    let said = match action {
        AlertsAction::Ack { .. } => {
            note.acked_at = Some(now);
            format!("acknowledged {}\n", escape_control(key))
        }
        AlertsAction::Silence { duration, .. } => {
            let until = now.saturating_add(parse_for(duration)?);
            note.silenced_until = Some(until);
            format!(
                "silenced {} until {} ({}; its events go to no channel; a resolve ends it)\n",
                escape_control(key),
                iso8601(until),
                ahead(until - now)
            )
        }
    };
    let text = serde_json::to_string(&notes).map_err(|e| Error::software(e.to_string()))?;
    store
        .save_state(ALERT_NOTES_KEY, &text, now)
        .map_err(Error::from)?;
    Ok(Shown::text(said))
}

/// Open alerts (or all with `--all`), newest first, with their acks and silences; or store an
/// ack or silence.
pub fn alerts(args: &AlertsArgs) -> Result<Shown, Error> {
    let mut out = String::new();
    let env: Env<'_> = &config::process_env;
    let (_, db) = load(&args.common, env)?;
    if let Some(action) = &args.action {
        return note_alert(&db, action);
    }
    let (rows, notes) = match open_read_only(&db)? {
        Some(s) => (s.alerts(args.all).map_err(Error::from)?, alert_notes(&s)),
        None => (Vec::new(), Default::default()),
    };
    if args.common.json {
        return Ok(Shown::json(&json!({ "alerts": rows, "notes": notes })));
    }
    if rows.is_empty() {
        out.push_str(&format!(
            "no {}alerts\n",
            if args.all { "" } else { "open " }
        ));
    }
    for a in &rows {
        out.push_str(&format!(
            "{} {} {} opened={} flagged_ticks={} {}{}\n",
            a.severity,
            escape_control(&a.dedup_key),
            a.state,
            iso8601(a.opened_at),
            a.flagged_ticks,
            escape_control(&a.title),
            a.resolved_at
                .map(|t| format!(" resolved={}", iso8601(t)))
                .unwrap_or_default()
        ));
        if let Some(refused) = refusal_sentence(a) {
            out.push_str(&format!("  {}\n", escape_control(&refused)));
        }
        if let Some(note) = notes.get(&a.dedup_key) {
            if let Some(at) = note.acked_at {
                out.push_str(&format!("  acknowledged {}\n", iso8601(at)));
            }
            if let Some(until) = note.silenced_until {
                out.push_str(&format!("  silenced until {}\n", iso8601(until)));
            }
        }
    }
    Ok(Shown::text(out))
}

#[derive(Debug, Clone, Default)]
pub struct ChannelsArgs {
    pub common: Common,
    pub action: Option<ChannelsAction>,
}

#[derive(Debug, Clone)]
pub enum ChannelsAction {
    /// Change a channel's run-time settings (stored in the database, over the config file's).
    Set {
        name: String,
        enabled: Option<bool>,
        min_severity: Option<String>,
        /// Time of the change, unix seconds (default the clock).
        now: Option<i64>,
    },
    /// Drop a channel's run-time settings: the config file's values apply again.
    Reset { name: String },
}

/// List channels, or change one. A run-time setting (`channels set`) is marked in the listing
/// (`set at runtime`, `runtime` in `--json`) until `channels reset NAME`.
pub fn channels(args: &ChannelsArgs) -> Result<Shown, Error> {
    let env: Env<'_> = &config::process_env;
    let (mut config, db) = load(&args.common, env)?;
    match &args.action {
        Some(ChannelsAction::Reset { name }) => {
            configured_channel(&config, name)?;
            reset_channel(&db, name)?;
        }
        Some(ChannelsAction::Set {
            name,
            enabled,
            min_severity,
            now,
        }) => {
            let section = configured_channel(&config, name)?;
            if let Some(s) = min_severity {
                parse_severity(s).map_err(|e| Error::usage(format!("--min-severity: {e}")))?;
            }
            let change = (*enabled, min_severity.clone(), now_or_clock(*now));
            set_channel(&db, section, change)?;
        }
        None => {}
    }
    let store = open_read_only(&db)?;
    if let Some(store) = &store {
        apply_stored_settings(&mut config, store);
    }
    // Channels whose settings come from the store (`channels set`), not the config file.
    let runtime: Vec<String> = store
        .and_then(|s| s.channel_settings().ok())
        .unwrap_or_default()
        .into_iter()
        .map(|s| s.name)
        .collect();
    if args.common.json {
        let mut channels = json!(config.shown().channels);
        if let Some(list) = channels.as_array_mut() {
            for c in list {
                let set = c["name"]
                    .as_str()
                    .is_some_and(|n| runtime.iter().any(|r| r == n));
                c["runtime"] = json!(set);
            }
        }
        return Ok(Shown::json(&json!({ "channels": channels })));
    }
    Ok(Shown::text(channel_lines(&config, &runtime)))
}

/// The configured channel named `name`, or a usage error listing the configured ones.
fn configured_channel<'a>(config: &'a Config, name: &str) -> Result<&'a ChannelSection, Error> {
    config
        .channels
        .iter()
        .find(|c| c.name == name)
        .ok_or_else(|| {
            let known: Vec<&str> = config.channels.iter().map(|c| c.name.as_str()).collect();
            Error::usage(format!(
                "no channel named {name:?} (configured: {})",
                known.join(", ")
            ))
        })
}

/// `channels reset NAME`: drop its run-time settings.
fn reset_channel(db: &std::path::Path, name: &str) -> Result<(), Error> {
    let _lock = take_lock(db, "channels")?;
    let mut store = Store::open(db).map_err(Error::from)?;
    let dropped = store.reset_channel_setting(name).map_err(Error::from)?;
    crate::journal::Line::info("channels", now_or_clock(None))
        .field("channel", name)
        .field("action", if dropped { "reset" } else { "nothing_to_reset" })
        .emit();
    Ok(())
}

/// `channels set NAME`: store `(enabled, min_severity, at)` over the channel's current
/// settings (what is not given stays as it was).
fn set_channel(
    db: &std::path::Path,
    section: &ChannelSection,
    (enabled, min_severity, at): (Option<bool>, Option<String>, i64),
) -> Result<(), Error> {
    let _lock = take_lock(db, "channels")?;
    let mut store = Store::open(db).map_err(Error::from)?;
    let current = store
        .channel_settings()
        .map_err(Error::from)?
        .into_iter()
        .find(|s| s.name == section.name);
    let setting = ChannelSetting {
        name: section.name.clone(),
        enabled: enabled
            .or(current.as_ref().map(|c| c.enabled))
            .unwrap_or(section.enabled),
        min_severity: min_severity
            .or(current.map(|c| c.min_severity))
            .unwrap_or_else(|| section.min_severity.clone()),
        updated_at: at,
    };
    store.set_channel_setting(&setting).map_err(Error::from)?;
    crate::journal::Line::info("channels", setting.updated_at)
        .field("channel", &setting.name)
        .field("enabled", setting.enabled)
        .field("min_severity", &setting.min_severity)
        .field("action", "saved")
        .emit();
    Ok(())
}

/// `channels`: one line per configured channel, those set at run time marked.
fn channel_lines(config: &Config, runtime: &[String]) -> String {
    if config.channels.is_empty() {
        return "no channels configured\n".to_owned();
    }
    let mut out = String::new();
    for c in &config.channels {
        let mark = if runtime.contains(&c.name) {
            format!(
                " (set at runtime; `agentwatch channels reset {}` uses the file's)",
                c.name
            )
        } else {
            String::new()
        };
        out.push_str(&format!(
            "{} type={} enabled={} min_severity={} rate_limit_s={}{mark}\n",
            c.name, c.channel_type, c.enabled, c.min_severity, c.rate_limit_s
        ));
    }
    out
}

#[derive(Debug, Clone, Default)]
pub struct TestAlertArgs {
    pub common: Common,
    /// info, warning or critical.
    pub severity: String,
    /// Only this channel (default every enabled channel the severity passes).
    pub channel: Option<String>,
    /// Show what would be sent without sending.
    pub dry_run: bool,
    /// Time of the test, unix seconds (default the clock).
    pub now: Option<i64>,
}

/// Send a test event through the channels, bypassing the rate limit.
pub fn test_alert(args: &TestAlertArgs) -> Result<Shown, Error> {
    let mut out = String::new();
    let env: Env<'_> = &config::process_env;
    let (mut config, db) = load(&args.common, env)?;
    if let Some(store) = open_read_only(&db)? {
        apply_stored_settings(&mut config, &store);
    }
    let severity =
        parse_severity(&args.severity).map_err(|e| Error::usage(format!("--severity: {e}")))?;
    let now = now_or_clock(args.now);
    let (event, reports) = send_test_alert(
        &config,
        severity,
        args.channel.as_deref(),
        now,
        args.dry_run,
        env,
    )?;
    let failed = reports.iter().any(|r| r.result == "failed");
    let mut shown = if args.common.json {
        Shown::json(&json!({"event": event, "sends": reports}))
    } else {
        if reports.is_empty() {
            out.push_str(&format!(
                "no enabled channel takes severity {}\n",
                severity.as_str()
            ));
        }
        for r in &reports {
            out.push_str(&format!(
                "{}: {}{}\n",
                r.channel,
                r.result,
                r.message
                    .as_deref()
                    .map(|m| format!(" ({m})"))
                    .unwrap_or_default()
            ));
        }
        Shown::text(out)
    };
    if failed {
        shown.exit_code = code::UNAVAILABLE;
    }
    Ok(shown)
}

/// Send a test event of `severity` to `channel`, or to every enabled channel whose gate the
/// severity passes (the rate limit does not apply). `config` has the stored settings applied.
/// An unknown `channel` is a usage error.
pub fn send_test_alert(
    config: &Config,
    severity: Severity,
    channel: Option<&str>,
    now: i64,
    dry_run: bool,
    env: Env<'_>,
) -> Result<(AlertEvent, Vec<SendReport>), Error> {
    let alert_config = config.alert_config(&host_name());
    let event = AlertEvent {
        dedup_key: "agentwatch-test".to_owned(),
        severity,
        state: EventState::Trigger,
        title: "agentwatch test alert".to_owned(),
        summary: format!("test alert sent at {}", iso8601(now)),
        details: json!({"test": true}),
        source: alert_config.source,
    };
    let targets: Vec<&config::ChannelSection> = config
        .channels
        .iter()
        .filter(|c| match channel {
            Some(name) => c.name == name,
            None => c.enabled && parse_severity(&c.min_severity).is_ok_and(|m| severity >= m),
        })
        .collect();
    if let Some(name) = channel
        && targets.is_empty()
    {
        return Err(Error::usage(format!("no channel named {name:?}")));
    }
    let mut reports = Vec::new();
    for section in targets {
        let sent = send(config, &section.name, &event, dry_run, now, env);
        let took = matches!(sent.result.as_str(), "sent" | "dry_run");
        reports.push(sent);
        // The test alert resolves itself where an alert stays open until resolved (a webhook's
        // incident, Alertmanager); a person-read channel (desktop, chat, log) gets no second
        // message.
        if took && keeps_open_alerts(section) {
            let resolve = AlertEvent {
                state: EventState::Resolve,
                summary: format!("test alert resolved at {}", iso8601(now)),
                ..event.clone()
            };
            let mut report = send(config, &section.name, &resolve, dry_run, now, env);
            report.message = Some(match report.message.take() {
                Some(m) => format!("resolve: {m}"),
                None => "resolve".to_owned(),
            });
            reports.push(report);
        }
    }
    Ok((event, reports))
}

/// Whether a channel holds an alert open until its resolve arrives (a webhook in JSON or
/// PagerDuty mode, Alertmanager), rather than showing each event to a person.
fn keeps_open_alerts(section: &config::ChannelSection) -> bool {
    match section.channel_type.as_str() {
        "alertmanager" => true,
        "webhook" => !crate::jobs::sessions::deliver::groups(section),
        _ => false,
    }
}

#[derive(Debug, Clone, Default)]
pub struct ConfigArgs {
    /// Configuration file.
    pub config: Option<PathBuf>,
    /// Override a key, as the watch commands take it (repeatable).
    pub set: Vec<String>,
    /// Print JSON instead of TOML.
    pub json: bool,
}

/// Print the effective configuration (and the files it came from).
pub fn show_config(args: &ConfigArgs) -> Result<Shown, Error> {
    let mut out = String::new();
    let env: Env<'_> = &config::process_env;
    let loaded = config::load(args.config.as_deref(), &args.set, env)?;
    let shown = loaded.config.shown();
    if args.json {
        return Ok(Shown::json(
            &json!({"files": loaded.files, "config": shown}),
        ));
    }
    if loaded.files.is_empty() {
        out.push_str("# no configuration file: defaults\n");
    }
    for f in &loaded.files {
        out.push_str(&format!("# from {}\n", f.display()));
    }
    out.push_str(&with_unset_keys(&shown.to_toml(), &shown));
    Ok(Shown::text(out))
}

/// Optional keys `config` shows commented out when unset, so every key is on the page:
/// (section, key, an example value as TOML, what unset means).
pub const OPTIONAL_KEYS: &[(&str, &str, &str, &str)] = &[
    (
        "watchdog",
        "read_only_agents",
        r#"["explore", "review"]"#,
        "the detector's read-only agent keywords",
    ),
    (
        "watchdog",
        "source",
        r#""agentwatch@devbox""#,
        "agentwatch@HOST",
    ),
    (
        "watchdog",
        "model",
        r#""qwen2.5-coder-router:14b""#,
        "verification.model, else qwen2.5-coder-router:14b",
    ),
    (
        "verification",
        "model",
        r#""qwen2.5-coder-router:14b""#,
        "qwen2.5-coder-router:14b",
    ),
    (
        "watchdog.llm",
        "api_key_env",
        r#""LLM_API_KEY""#,
        "no key sent",
    ),
    (
        "opencode",
        "registry",
        r#""~/.local/share/opencode/rc-servers.json""#,
        "the seed's registry while no source is configured",
    ),
    (
        "opencode",
        "db",
        r#""~/.local/share/opencode/opencode.db""#,
        "opencode's database while no source is configured",
    ),
    (
        "store",
        "path",
        r#""~/.local/state/agentwatch/agentwatch.db""#,
        "$XDG_STATE_HOME/agentwatch/agentwatch.db",
    ),
    (
        "recover",
        "router_url",
        r#""http://127.0.0.1:11434/v1""#,
        "no router: a confirmed loop restarts",
    ),
    ("recover", "model", r#""qwen2.5-coder:14b""#, "no router"),
    (
        "recover",
        "veto_limit",
        "3",
        "router vetoes never overridden",
    ),
    (
        "deck",
        "bin",
        r#""/usr/local/bin/agent-deck""#,
        "agent-deck on PATH",
    ),
    ("deck", "profile", r#""work""#, "every profile"),
    (
        "deck",
        "hooks_dir",
        r#""~/.local/share/agent-deck/hooks""#,
        "$XDG_DATA_HOME/agent-deck/hooks",
    ),
    (
        "deck",
        "tmux_socket",
        r#""agent-deck""#,
        "the user's tmux server",
    ),
    (
        "deck",
        "agent_deck_config",
        r#""~/.agent-deck/config.toml""#,
        "ROOT/config.toml",
    ),
    (
        "deck",
        "telegram_chat_id",
        r#""-1001234567890""#,
        "no Telegram",
    ),
    (
        "deck",
        "channels",
        r#"["journal"]"#,
        "every configured channel",
    ),
];

/// The printed TOML with each unset [`OPTIONAL_KEYS`] key as a comment under its section header
/// (`# key = EXAMPLE   # unset: MEANING`). Comments only: the text loads back the same.
fn with_unset_keys(text: &str, shown: &Config) -> String {
    let value = serde_json::to_value(shown).unwrap_or_default();
    let is_set = |section: &str, key: &str| {
        let mut v = &value;
        for part in section.split('.') {
            v = &v[part];
        }
        !v[key].is_null()
    };
    let mut out = String::with_capacity(text.len() + 2048);
    for line in text.lines() {
        out.push_str(line);
        out.push('\n');
        let Some(section) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) else {
            continue;
        };
        for (_, key, example, meaning) in OPTIONAL_KEYS
            .iter()
            .filter(|(s, k, _, _)| *s == section && !is_set(s, k))
        {
            out.push_str(&format!("# {key} = {example}   # unset: {meaning}\n"));
        }
    }
    out
}

#[cfg(test)]
mod unset_keys_tests {
    use super::*;

    #[test]
    fn every_optional_key_is_shown_and_is_a_real_key() {
        let config = Config::default();
        let text = with_unset_keys(&config.to_toml(), &config);
        for (section, key, example, _) in OPTIONAL_KEYS {
            assert!(
                text.contains(&format!("# {key} = {example}")),
                "{section}.{key} not shown in:\n{text}"
            );
            // The example is a value the key takes.
            let set = format!("{section}.{key}={example}");
            let loaded = config::load(None, std::slice::from_ref(&set), &|_| None);
            assert!(loaded.is_ok(), "{set}: {:?}", loaded.err());
        }
        // Comments only: it loads back as the same configuration.
        let back: Config = toml::from_str(&text).unwrap();
        assert_eq!(back.to_toml(), config.to_toml());
    }
}
