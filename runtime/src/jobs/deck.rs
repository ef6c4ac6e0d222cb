//! `agentwatch deck`: the agent-deck watchdog. Each tick lists the sessions, runs the restart guard
//! (a re-check just before every restart), the poller check and the waiting patrol, acts, and
//! escalates through the channels.
//!
//! ```text
//! list --all --json -> session show ID --json (each) -> pollers (/proc, else sysinfo) -> restart guard
//!     recheck: session show again (+ pane tail) -> restart: session restart ID --json -> result
//!     escalate: an alarm -> alert-state (deck:{session}, state deck.alerts): gates and rate
//!       limits of [[channels]] + Telegram (TELEGRAM_ESCALATION_CHAT_ID), escalations.log;
//!       resolved when the session is fine again
//! waiting children: tmux capture-pane -> SHA-256 -> waiting patrol -> session send ID MSG --no-wait
//! state: SQLite (deck.restart-guard, deck.waiting-patrol, deck.alerts, deck.seen)
//! audit: $AGENT_DECK_ROOT/watchdog/{restart,escalations,patrol,watchdog}.log
//! ```
//!
//! The audit files are the design's, one JSON object per line: `restart.log` (every restart and
//! every re-check that stood down, with why the session is critical and why it was restarted),
//! `escalations.log`, `patrol.log` (nudges) and `watchdog.log`, the runtime events: one line per
//! tick with `--verbose`, one per session state transition (its status changed between two ticks,
//! or it left the listing) and one per dedupe decision (a poller restart or a nudge held back by
//! its dedupe window: written when the hold begins, and at every tick with `--verbose`).
//!
//! The decisions are `recovery-policy`'s; this module only gathers observations and performs
//! actions. Every decision is one `key=value` line on standard error. `--dry-run` performs no side
//! effect at all: no agent-deck restart or send, no message, no log file, no store write (the
//! store is read if it exists, never created). Without `--once` it runs as a daemon: a tick every
//! `deck.interval_s`, earlier when a hook status file changes (told by an inotify watch on the
//! hook directory, or seen by an mtime poll every `deck.hook_poll_s` where no watch can be set up).

use crate::clock::{host_name, iso8601, now_or_clock};
use crate::config::{self, Config, DeckSection, Env};
use crate::drive::{Perform, drive};
use crate::error::{Error, code};
use crate::journal::{Line, Priority};
use crate::notify::{SendReport, alert_rows, apply_stored_settings, decision_line, deliver_report};
use crate::stored::{
    elapsed_ms, job_event, load_or_clean, open_existing_read_only, parse_policy, record_events,
    save_policy, store_path, take_lock,
};
use crate::text::{escape_control, quote};
use crate::wake::{SystemClock, Wake};
use agentwatch_agentdeck::cli::{
    AgentDeck, DEFAULT_BIN, Listing, SessionInfo, Shown, find_on_path,
};
use agentwatch_agentdeck::hooks::{HookWatch, Woken};
use agentwatch_agentdeck::pollers;
use agentwatch_agentdeck::tmux::{Socket, Tmux, pane_hash, pane_tail};
use agentwatch_channels::{ChannelKind, TelegramChannel};
use agentwatch_store::{AlertRow, EventKind, JobEvent, Store};
use alert_state::{
    Alarm, AlarmTick, AlertConfig, AlertEvent, AlertState, ChannelConfig,
    Decision as AlertDecision, Dispatch, EventState, Severity as AlertSeverity, process_alarms,
};
use recovery_policy::restart_guard::{
    AuthHold, GuardAction, GuardDecision, GuardDecisionName, GuardEvent, RestartGuardConfig,
    RestartGuardState, RestartReply, RestartResult, SessionObservation, SessionStatus,
    Severity as EscalationKind,
};
use recovery_policy::waiting_patrol::{
    PatrolAction, PatrolDecision, PatrolEvent, PatrolObservation, WaitingPatrolConfig,
    WaitingPatrolState,
};
use recovery_policy::{Decision, DecisionName, Policy, PolicyState};
use serde::Serialize;
use serde_json::{Value, json};
use std::convert::Infallible;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

mod act;
mod alerts;
mod observe;

/// Store key of the restart guard's state.
pub const GUARD_STATE_KEY: &str = "deck.restart-guard";
/// Store key of the waiting patrol's state.
pub const PATROL_STATE_KEY: &str = "deck.waiting-patrol";
/// Store key of the deck alerts' state (alert-state's lifecycle and router).
pub const ALERT_STATE_KEY: &str = "deck.alerts";
/// Store key of what the last tick saw (statuses, decisions), for `watchdog.log`'s transitions.
pub const SEEN_STATE_KEY: &str = "deck.seen";
/// Decisions that hold an action back for a dedupe window (`watchdog.log`).
const DEDUPE: &[&str] = &["poller-dedup", "nudge-deduped"];
/// The dedup key of a session's deck alert is this and the session id.
pub const DECK_KEY_PREFIX: &str = "deck:";
/// The name under which Telegram's escalation chat is a channel.
const TELEGRAM: &str = "telegram-escalation";
/// Lines of the pane's tail passed as the session's last output (rate-limit detection).
const TAIL_LINES: usize = 20;

#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Run one tick and exit (a timer or cron repeats it); without it, run as a daemon.
    pub once: bool,
    /// Decide everything, do nothing: no restart, no nudge, no message, no file or store write.
    pub dry_run: bool,
    /// Log every decision (also the quiet ones) and every session seen.
    pub verbose: bool,
    /// Print one JSON object per tick.
    pub json: bool,
    /// Configuration file (default `$XDG_CONFIG_HOME/agentwatch/config.toml`).
    pub config: Option<PathBuf>,
    /// The SQLite database (default `$XDG_STATE_HOME/agentwatch/agentwatch.db`).
    pub db: Option<PathBuf>,
    /// Override a configuration key (`--set deck.interval_s=30`; repeatable).
    pub set: Vec<String>,
    /// The tick's time, unix seconds (with `--once`; for tests and replays).
    pub now: Option<i64>,
}

// ------------------------------------------------------------------------------------------------
// The run

/// What a tick saw of one session.
#[derive(Debug, Clone)]
struct Watched {
    /// `session show` merged over the listing.
    info: SessionInfo,
    /// The `-p` for its commands.
    profile: Option<String>,
    /// `found`, or why the status is unknown.
    shown: String,
    pane_hash: Option<String>,
    pollers: Option<u32>,
}

impl Watched {
    /// What the waiting patrol sees of a watched session: its parent, status and pane.
    fn patrol_observation(&self) -> PatrolObservation {
        PatrolObservation {
            id: self.info.id.clone(),
            parent_session_id: self.info.parent_session_id.clone(),
            status: SessionStatus::parse(self.info.status.as_deref()),
            pane_hash: self.pane_hash.clone(),
        }
    }
}

enum Telegram {
    Off,
    NoToken { why: String },
    Ready(TelegramChannel),
}

struct Runtime<'a> {
    config: &'a Config,
    env: Env<'a>,
    deck: AgentDeck,
    tmux: Tmux,
    root: PathBuf,
    home: Option<PathBuf>,
    profile: Option<String>,
    default_socket: Socket,
    agent_deck_config: PathBuf,
    guard: RestartGuardConfig,
    patrol: WaitingPatrolConfig,
    dry_run: bool,
    verbose: bool,
    telegram: Telegram,
}

/// The guard's and the patrol's state, the deck alerts, and what the last tick saw.
#[derive(Debug, Default)]
struct States {
    guard: RestartGuardState,
    patrol: WaitingPatrolState,
    alerts: AlertState,
    seen: Seen,
}

/// What the last tick saw, so the next one can tell what changed (`watchdog.log`).
#[derive(Debug, Default, Serialize, serde::Deserialize)]
#[serde(default)]
struct Seen {
    /// Each listed session's status.
    statuses: std::collections::BTreeMap<String, String>,
    /// `policy:session` to the decision of the last tick that decided about it.
    decisions: std::collections::BTreeMap<String, String>,
}

/// What one tick saw and did.
#[derive(Debug, Default)]
pub struct TickReport {
    now: i64,
    dry_run: bool,
    listing: String,
    list_failed: bool,
    sessions: Vec<Value>,
    decisions: Vec<Value>,
    actions: Vec<Value>,
    escalations: Vec<Value>,
    /// Deck alerts resolved this tick (their resolve events' deliveries).
    resolved: Vec<Value>,
    problems: Vec<String>,
    /// The restart guard's escalations of this tick, before the alert lifecycle.
    raised: Vec<Alarm>,
    /// The deck alerts as this tick left them, for `agentwatch alerts`.
    alert_rows: Vec<AlertRow>,
    /// When the restart guard, the waiting patrol or the deck alerts next have something to do
    /// by time alone (the earliest of their `next_wakeup`s).
    next_wakeup: Option<i64>,
}

impl TickReport {
    /// When the job next has something to do by time alone, if it does.
    pub fn next_wakeup(&self) -> Option<i64> {
        self.next_wakeup
    }

    /// The tick, its restarts and its escalations' deliveries, as history for `/metrics` and the
    /// recovery page (`agentwatch_events`).
    pub fn events(&self, duration_ms: Option<i64>) -> Vec<JobEvent> {
        let outcome = if self.list_failed {
            "list_failed"
        } else {
            "ok"
        };
        let mut events = vec![job_event(
            self.now,
            "deck",
            EventKind::Tick,
            "",
            outcome,
            duration_ms,
        )];
        let text = |v: &Value, k: &str| v[k].as_str().unwrap_or_default().to_owned();
        for a in &self.actions {
            if a["kind"] == "restart" && a["performed"] == true {
                let result = match a["result"].as_str() {
                    Some("restarted") => "succeeded",
                    Some(other) => other,
                    None => "unknown",
                };
                let session = text(a, "session");
                events.push(job_event(
                    self.now,
                    "deck",
                    EventKind::Restart,
                    &session,
                    result,
                    None,
                ));
            }
        }
        for e in self.escalations.iter().chain(&self.resolved) {
            for d in e["deliveries"].as_array().into_iter().flatten() {
                let result = text(d, "result");
                if result != "skipped" && result != "dry_run" {
                    events.push(job_event(
                        self.now,
                        "deck",
                        EventKind::Delivery,
                        &text(d, "channel"),
                        &result,
                        None,
                    ));
                }
            }
        }
        events
    }
}

/// Decisions that repeat every tick while nothing changes; logged only with `--verbose`.
const QUIET: &[&str] = &[
    "auth-held",
    "backing-off",
    "quiet-after-restart",
    "restart-limit",
    "poller-dedup",
    "deferred",
    "unchanged",
    "nudge-deduped",
    "pane-unreadable",
];

fn kind_of<T: Serialize>(value: &T) -> String {
    serde_json::to_value(value)
        .ok()
        .and_then(|v| match v {
            Value::String(s) => Some(s),
            Value::Object(o) => o.get("kind").and_then(Value::as_str).map(str::to_owned),
            _ => None,
        })
        .unwrap_or_default()
}

fn safe_file_name(id: &str) -> bool {
    !id.is_empty() && id != "." && id != ".." && !id.contains(['/', '\0'])
}

impl<'a> Runtime<'a> {
    fn new(config: &'a Config, env: Env<'a>, dry_run: bool, verbose: bool) -> Self {
        let deck_cfg = &config.deck;
        let home = env("HOME").map(PathBuf::from);
        let expand = |p: &str| config::expand_home(p, env);
        let root = expand(&deck_cfg.root);
        let bin = deck_cfg
            .bin
            .as_deref()
            .map(expand)
            .or_else(|| find_on_path("agent-deck", env("PATH").as_deref()))
            .unwrap_or_else(|| PathBuf::from(DEFAULT_BIN));
        let mut deck = AgentDeck::new(bin);
        deck.timeout = crate::config::duration(deck_cfg.command_timeout_s);
        deck.restart_timeout = crate::config::duration(deck_cfg.restart_timeout_s);
        let tmux = Tmux {
            program: expand(&deck_cfg.tmux_bin),
            timeout: crate::config::duration(deck_cfg.command_timeout_s),
        };
        let mut guard = deck_cfg.restart_guard.clone();
        let mut patrol = deck_cfg.waiting_patrol.clone();
        guard.dry_run = dry_run;
        patrol.dry_run = dry_run;
        let telegram = match deck_cfg
            .telegram_chat_id
            .as_deref()
            .filter(|c| !c.trim().is_empty())
        {
            None => Telegram::Off,
            Some(chat_id) => {
                let token = env(&deck_cfg.telegram_token_env).or_else(|| {
                    std::fs::read_to_string(expand(&deck_cfg.telegram_token_file))
                        .ok()
                        .and_then(|text| token_from_env_file(&text))
                });
                match token {
                    Some(token) => Telegram::Ready(TelegramChannel {
                        api_base: deck_cfg.telegram_api_base.clone(),
                        token,
                        chat_id: chat_id.trim().to_owned(),
                        timeout: crate::config::duration(deck_cfg.telegram_timeout_s),
                    }),
                    None => Telegram::NoToken {
                        why: format!(
                            "TELEGRAM_ESCALATION_CHAT_ID is set but no bot token: {} is unset and {} has no TELEGRAM_BOT_TOKEN=",
                            deck_cfg.telegram_token_env, deck_cfg.telegram_token_file
                        ),
                    },
                }
            }
        };
        Self {
            config,
            env,
            deck,
            tmux,
            agent_deck_config: deck_cfg
                .agent_deck_config
                .as_deref()
                .map(expand)
                .unwrap_or_else(|| root.join("config.toml")),
            root,
            home,
            profile: deck_cfg.profile.clone().filter(|p| !p.trim().is_empty()),
            default_socket: deck_cfg
                .tmux_socket
                .as_deref()
                .map(Socket::parse)
                .unwrap_or_default(),
            guard,
            patrol,
            dry_run,
            verbose,
            telegram,
        }
    }

    /// One tick: observe the sessions, let the guard and the patrol decide and act on them,
    /// then alert and log.
    fn tick(&self, states: &mut States, now: i64) -> TickReport {
        let mut report = TickReport {
            now,
            dry_run: self.dry_run,
            ..TickReport::default()
        };
        let Some(listing) = self.listing(&mut report) else {
            let event = PatrolEvent::ListingUnavailable;
            self.drive(&mut states.patrol, &self.patrol, &event, &[], &mut report);
            self.log_tick(&mut report);
            return report;
        };
        let watched = self.observe(&listing, &mut report);
        self.decide_and_act(states, &watched, &mut report);
        self.alert(states, &watched, &mut report);
        self.log_changes(&mut states.seen, &watched, &mut report);
        self.log_tick(&mut report);
        report.next_wakeup = self.next_wakeup(states, now);
        report
    }

    /// The restart guard, then the waiting patrol, on what the tick saw; each performs what it
    /// decides.
    fn decide_and_act(&self, states: &mut States, watched: &[Watched], report: &mut TickReport) {
        let observations = watched.iter().map(|w| self.guard_observation(w)).collect();
        let event = GuardEvent::Tick(observations);
        self.drive(&mut states.guard, &self.guard, &event, watched, report);
        let patrol = watched.iter().map(Watched::patrol_observation).collect();
        let event = PatrolEvent::Tick(patrol);
        self.drive(&mut states.patrol, &self.patrol, &event, watched, report);
    }

    /// `watchdog.log`, with `--verbose`: one line per tick.
    fn log_tick(&self, report: &mut TickReport) {
        if !self.verbose {
            return;
        }
        let count = |kind: &str| report.actions.iter().filter(|a| a["kind"] == kind).count();
        let record = json!({
            "ts": report.now,
            "at": iso8601(report.now),
            "event": "tick",
            "listing": report.listing,
            "sessions": report.sessions.len(),
            "decisions": report.decisions.len(),
            "restarts": count("restart"),
            "nudges": count("nudge"),
            "escalations": report.escalations.len(),
            "problems": report.problems.len(),
        });
        self.audit(report, "watchdog.log", &record);
    }

    /// `watchdog.log`: each session whose status changed since the last tick (or that left
    /// the listing), and each dedupe decision that begins (every one with `--verbose`). `seen`
    /// becomes what this tick saw.
    fn log_changes(&self, seen: &mut Seen, watched: &[Watched], report: &mut TickReport) {
        let now = report.now;
        let title = |id: &str| {
            watched
                .iter()
                .find(|w| w.info.id == id)
                .map_or("", |w| w.info.title.as_str())
                .to_owned()
        };
        let statuses: std::collections::BTreeMap<String, String> = watched
            .iter()
            .map(|w| {
                let status = SessionStatus::parse(w.info.status.as_deref());
                (w.info.id.clone(), status.as_str().to_owned())
            })
            .collect();
        let mut records = Vec::new();
        for (id, before) in &seen.statuses {
            let after = statuses.get(id).map_or("gone", String::as_str);
            if before != after {
                records.push(json!({
                    "ts": now, "at": iso8601(now), "event": "transition", "session": id,
                    "title": title(id), "from": before, "to": after,
                }));
            }
        }
        let mut decisions = std::collections::BTreeMap::new();
        for d in &report.decisions {
            let (Some(policy), Some(name), Some(session)) = (
                d["policy"].as_str(),
                d["decision"].as_str(),
                d["session"].as_str(),
            ) else {
                continue;
            };
            let key = format!("{policy}:{session}");
            let begins = seen.decisions.get(&key).map(String::as_str) != Some(name);
            if DEDUPE.contains(&name) && (begins || self.verbose) {
                records.push(json!({
                    "ts": now, "at": iso8601(now), "event": "dedupe", "policy": policy,
                    "decision": name, "session": session, "title": title(session),
                    "reason": d["reason"],
                }));
            }
            decisions.insert(key, name.to_owned());
        }
        for record in &records {
            self.audit(report, "watchdog.log", record);
        }
        *seen = Seen {
            statuses,
            decisions,
        };
    }

    /// The earliest `next_wakeup` of the guard, the patrol and the deck alerts.
    fn next_wakeup(&self, states: &States, now: i64) -> Option<i64> {
        [
            states.guard.next_wakeup(&self.guard, now),
            states.patrol.next_wakeup(&self.patrol, now),
            states.alerts.next_wakeup(&self.alert_config(), now),
        ]
        .into_iter()
        .flatten()
        .min()
    }
}

/// A listed session whose status could not be read.
/// What a tick does with the policies' decisions: each is a journal line (and a report entry);
/// a re-check re-reads the session, a restart runs `session restart`, an escalation raises a deck
/// alarm, a nudge runs `session send`.
struct Caller<'a> {
    rt: &'a Runtime<'a>,
    watched: &'a [Watched],
    report: &'a mut TickReport,
    /// The audit record of the restart whose result is being fed back.
    restarted: Option<Value>,
    /// The reason of the guard's decision to restart (the session's status, since when, why it
    /// is critical, the limits), for `restart.log`.
    why: Option<String>,
}

impl Perform<RestartGuardState> for Caller<'_> {
    type Error = Infallible;

    fn decided(
        &mut self,
        now: i64,
        decision: &GuardDecision,
        answering: Option<&GuardAction>,
    ) -> Result<(), Infallible> {
        let rt = self.rt;
        match answering {
            Some(GuardAction::Recheck { session, .. })
                if matches!(
                    decision.name,
                    GuardDecisionName::Recovered
                        | GuardDecisionName::Stopped
                        | GuardDecisionName::StatusUnreadable
                ) =>
            {
                let record = rt.restart_record(
                    session,
                    self.watched,
                    now,
                    json!({
                        "action": "skipped",
                        "decision": decision.name_str(),
                        "reason": decision.reason,
                    }),
                );
                rt.audit(self.report, "restart.log", &record);
            }
            Some(GuardAction::Restart { .. }) => {
                if let Some(mut record) = self.restarted.take() {
                    record["decision"] = json!(decision.name_str());
                    rt.audit(self.report, "restart.log", &record);
                }
            }
            _ => {}
        }
        if let Some(GuardAction::Restart { .. }) = &decision.action {
            self.why = Some(decision.reason.clone());
        }
        rt.log_decision(self.report, "restart-guard", decision);
        Ok(())
    }

    fn perform(
        &mut self,
        _: &RestartGuardState,
        action: &GuardAction,
        now: i64,
    ) -> Result<Option<(i64, GuardEvent)>, Infallible> {
        let rt = self.rt;
        Ok(match action {
            GuardAction::Escalate {
                session,
                severity,
                message,
                ..
            } => {
                rt.raise(self.report, session, *severity, message, self.watched);
                None
            }
            GuardAction::Recheck { session, .. } => {
                let fresh = rt.recheck(session, self.watched, self.report);
                Some((now, GuardEvent::Recheck(fresh)))
            }
            GuardAction::Restart {
                session,
                trigger,
                dry_run,
            } => rt
                .restart(
                    self.report,
                    self.watched,
                    session,
                    kind_of(trigger),
                    *dry_run,
                )
                .map(|(result, mut record)| {
                    record["why"] = json!(self.why.take());
                    self.restarted = Some(record);
                    (now, GuardEvent::RestartResult(result))
                }),
        })
    }
}

impl Perform<WaitingPatrolState> for Caller<'_> {
    type Error = Infallible;

    fn decided(
        &mut self,
        _: i64,
        decision: &PatrolDecision,
        _: Option<&PatrolAction>,
    ) -> Result<(), Infallible> {
        self.rt
            .log_decision(self.report, "waiting-patrol", decision);
        Ok(())
    }

    fn perform(
        &mut self,
        _: &WaitingPatrolState,
        action: &PatrolAction,
        _: i64,
    ) -> Result<Option<(i64, PatrolEvent)>, Infallible> {
        let PatrolAction::Nudge {
            session,
            message,
            dry_run,
            ..
        } = action;
        self.rt
            .nudge(self.report, self.watched, session, message, *dry_run);
        Ok(None)
    }
}

fn unread(listed: &SessionInfo) -> SessionInfo {
    SessionInfo {
        status: None,
        ..listed.clone()
    }
}

/// `TELEGRAM_BOT_TOKEN=` from agent-deck's Telegram `.env`.
fn token_from_env_file(text: &str) -> Option<String> {
    agentwatch_systemd::env_value(text, "TELEGRAM_BOT_TOKEN")
}

/// What changes when agent-deck writes a hook status file: the directory's mtime (a rename into
/// it) and the newest `*.json` mtime and their count. Temp files (`.x.json.tmp-…`) are skipped.
pub fn hooks_fingerprint(dir: &Path) -> Option<(SystemTime, SystemTime, usize)> {
    let dir_mtime = std::fs::metadata(dir).and_then(|m| m.modified()).ok()?;
    let mut newest = SystemTime::UNIX_EPOCH;
    let mut count = 0;
    for entry in std::fs::read_dir(dir).ok()?.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with('.') || !name.ends_with(".json") {
            continue;
        }
        if let Ok(modified) = entry.metadata().and_then(|m| m.modified()) {
            newest = newest.max(modified);
            count += 1;
        }
    }
    Some((dir_mtime, newest, count))
}

// ------------------------------------------------------------------------------------------------
// State

/// Loads one policy's state; a corrupt or foreign one is set aside (not in a dry run), the policy
/// starts clean, and a warning says so.
fn load_policy<S: PolicyState>(
    store: Option<&mut Store>,
    key: &str,
    now: i64,
    dry_run: bool,
) -> Result<S, Error> {
    let (state, aside) = load_or_clean(store, key, now, dry_run, parse_policy::<S>)?;
    if let Some(aside) = aside {
        aside.line("deck", key, now).emit();
    }
    Ok(state)
}

/// Loads a JSON state (the deck alerts, what the last tick saw); a corrupt one is set aside,
/// with a warning.
fn load_json<T: serde::de::DeserializeOwned + Default>(
    store: Option<&mut Store>,
    key: &str,
    now: i64,
    dry_run: bool,
) -> Result<T, Error> {
    let (state, aside) = load_or_clean(store, key, now, dry_run, |text| {
        serde_json::from_str(text).map_err(|e| e.to_string())
    })?;
    if let Some(aside) = aside {
        aside.line("deck", key, now).emit();
    }
    Ok(state)
}

// ------------------------------------------------------------------------------------------------
// Output

impl TickReport {
    /// The tick as one JSON object.
    pub fn to_json(&self) -> Value {
        json!({
            "now": self.now,
            "at": iso8601(self.now),
            "dry_run": self.dry_run,
            "listing": self.listing,
            "sessions": self.sessions,
            "decisions": self.decisions,
            "actions": self.actions,
            "escalations": self.escalations,
            "resolved": self.resolved,
            "problems": self.problems,
        })
    }

    fn eventful(&self) -> bool {
        !(self.actions.is_empty() && self.escalations.is_empty() && self.problems.is_empty())
    }

    /// The human form: actions, escalations, a closing count.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for action in &self.actions {
            let text = |k: &str| action.get(k).and_then(Value::as_str).unwrap_or("");
            let detail = [text("reason"), text("detail")].concat();
            out.push_str(&format!(
                "{} {}: {}{}\n",
                text("kind"),
                quote(text("session")),
                text("result"),
                if detail.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", escape_control(&detail))
                }
            ));
        }
        for e in &self.escalations {
            let text = |k: &str| e.get(k).and_then(Value::as_str).unwrap_or("");
            out.push_str(&format!(
                "escalation {} {}: {}\n",
                text("severity"),
                quote(text("sid")),
                escape_control(text("message"))
            ));
        }
        for e in &self.resolved {
            let text = |k: &str| e.get(k).and_then(Value::as_str).unwrap_or("");
            out.push_str(&format!(
                "resolved {} {}: {}\n",
                text("severity"),
                quote(text("sid")),
                escape_control(text("message"))
            ));
        }
        let count = |kind: &str| {
            self.actions
                .iter()
                .filter(|a| a.get("kind").and_then(Value::as_str) == Some(kind))
                .count()
        };
        out.push_str(&format!(
            "# deck{}: {} session(s), {} restart(s), {} nudge(s), {} escalation(s), {} problem(s)\n",
            if self.dry_run { " (dry run)" } else { "" },
            self.sessions.len(),
            count("restart"),
            count("nudge"),
            self.escalations.len(),
            self.problems.len()
        ));
        out
    }
}

// ------------------------------------------------------------------------------------------------
// Entry point

/// Runs the deck watchdog: one tick with `--once`, else a tick every `deck.interval_s` (sooner on
/// a hook change) until the process ends. `on_tick` gets each report worth showing (every one
/// with `--once`, `--verbose` or `--json`; else the eventful ones). Returns the exit code of a
/// `--once` tick: 69 when agent-deck could not list its sessions.
pub fn run(args: &Options, on_tick: &mut dyn FnMut(&TickReport)) -> Result<u8, Error> {
    let env: Env<'_> = &config::process_env;
    if args.now.is_some() && !args.once {
        return Err(Error::usage(
            "deck: --now needs --once (the daemon reads the clock)",
        ));
    }
    let loaded = config::load(args.config.as_deref(), &args.set, env)?;
    let mut config = loaded.config;
    let dry_run =
        args.dry_run || config.deck.restart_guard.dry_run || config.deck.waiting_patrol.dry_run;
    let db_path = store_path(&config, args.db.as_deref(), env)?;
    let _lock = if dry_run {
        None
    } else {
        Some(take_lock(&db_path, "deck")?)
    };
    let mut store = if dry_run {
        open_existing_read_only(&db_path)?
    } else {
        Some(Store::open(&db_path).map_err(Error::from)?)
    };
    if let Some(store) = &store {
        apply_stored_settings(&mut config, store);
    }
    let rt = Runtime::new(&config, env, dry_run, args.verbose);
    let start = now_or_clock(args.now);
    let mut states = States {
        guard: load_policy(store.as_mut(), GUARD_STATE_KEY, start, dry_run)?,
        patrol: load_policy(store.as_mut(), PATROL_STATE_KEY, start, dry_run)?,
        alerts: load_json(store.as_mut(), ALERT_STATE_KEY, start, dry_run)?,
        seen: load_json(store.as_mut(), SEEN_STATE_KEY, start, dry_run)?,
    };
    if args.once {
        let started = Instant::now();
        let report = rt.tick(&mut states, start);
        let saved = save_tick(
            store.as_mut().filter(|_| !dry_run),
            &states,
            &report,
            started,
        );
        on_tick(&report);
        saved?;
        return Ok(if report.list_failed {
            code::UNAVAILABLE
        } else {
            code::OK
        });
    }
    Line::info("deck", start)
        .field("daemon", "start")
        .field("interval_s", config.deck.interval_s)
        .field("bin", rt.deck.bin.display())
        .field("root", rt.root.display())
        .field("dry_run", dry_run)
        .emit();
    let mut clock = SystemClock::with_signals()?;
    let store = store.as_mut().filter(|_| !dry_run);
    let ticks = daemon(
        &rt,
        &config.deck,
        (&mut states, store),
        &mut clock,
        args,
        on_tick,
    );
    Line::info("deck", now_or_clock(None))
        .field("daemon", "stop")
        .field("ticks", ticks)
        .field("reason", "signal")
        .emit();
    Ok(code::OK)
}

/// Store what a tick left: the policies' states, the alert state, the sessions seen, the
/// alert rows and the tick's events (`None`: a dry run, nothing is written).
fn save_tick(
    store: Option<&mut Store>,
    states: &States,
    report: &TickReport,
    started: Instant,
) -> Result<(), Error> {
    let Some(store) = store else {
        return Ok(());
    };
    save_policy(store, GUARD_STATE_KEY, &states.guard, report.now)?;
    save_policy(store, PATROL_STATE_KEY, &states.patrol, report.now)?;
    let alerts =
        serde_json::to_string(&states.alerts).map_err(|e| Error::software(e.to_string()))?;
    store
        .save_state(ALERT_STATE_KEY, &alerts, report.now)
        .map_err(Error::from)?;
    let seen = serde_json::to_string(&states.seen).map_err(|e| Error::software(e.to_string()))?;
    store
        .save_state(SEEN_STATE_KEY, &seen, report.now)
        .map_err(Error::from)?;
    store
        .upsert_alerts(&report.alert_rows)
        .map_err(Error::from)?;
    record_events(store, &report.events(elapsed_ms(started)));
    Ok(())
}

/// The daemon: a tick every `deck.interval_s`, sooner on a hook change or a wakeup the tick
/// asked for, until SIGTERM or SIGINT (`clock`): a tick that is running is finished and
/// stored, then the daemon returns how many ticks it ran (a second signal ends the process at
/// once, as `run`'s does). A tick that cannot be stored is logged and the next one goes on.
fn daemon(
    rt: &Runtime<'_>,
    deck_cfg: &DeckSection,
    (states, mut store): (&mut States, Option<&mut Store>),
    clock: &mut SystemClock,
    args: &Options,
    on_tick: &mut dyn FnMut(&TickReport),
) -> u64 {
    let mut watch: Option<HookWatch> = None;
    let mut ticks: u64 = 0;
    loop {
        ticks += 1;
        let hooks = rt.hooks_dir();
        let now = now_or_clock(None);
        watch = watch_hooks(watch, hooks.as_deref(), now);
        // This tick reads every change so far.
        if let Some(w) = &watch
            && w.drain() == Woken::Lost
        {
            watch = None;
        }
        let before = hooks.as_deref().and_then(hooks_fingerprint);
        let started = Instant::now();
        let report = rt.tick(states, now);
        if let Err(e) = save_tick(store.as_deref_mut(), states, &report, started) {
            Line::err("deck", now).field("problem", e).emit();
        }
        if args.verbose || args.json || report.eventful() {
            on_tick(&report);
        }
        let woke = wait_for_next(
            deck_cfg,
            started,
            now,
            report.next_wakeup,
            hooks.as_deref(),
            before,
            (&mut watch, clock),
        );
        if woke == STOPPED {
            return ticks;
        }
        if args.verbose {
            Line::info("deck", now_or_clock(None))
                .field("wake", woke)
                .emit();
        }
    }
}

/// What [`wait_for_next`] says when a stop was asked for.
const STOPPED: &str = "stop";

/// The longest the daemon waits on the hook watch without looking for a stop request.
const STOP_SLICE: Duration = Duration::from_millis(200);

/// The watch on the hook directory for this tick: `current` while it still watches `hooks`,
/// else a new one. Where none can be set up (no directory, the system's watch limit) the
/// daemon polls the files' mtimes every `deck.hook_poll_s`, with a warning once per directory.
fn watch_hooks(current: Option<HookWatch>, hooks: Option<&Path>, now: i64) -> Option<HookWatch> {
    let dir = hooks?;
    if let Some(watch) = current.filter(|w| w.dir() == dir) {
        return Some(watch);
    }
    match HookWatch::new(dir) {
        Ok(watch) => {
            Line::info("deck", now)
                .field("hooks", dir.display())
                .field("wake", "watch")
                .emit();
            Some(watch)
        }
        Err(e) => {
            Line::warning("deck", now)
                .field("hooks", dir.display())
                .field("wake", "poll")
                .field("problem", e)
                .emit();
            None
        }
    }
}

/// Sleeps until the next tick: `interval_s` after the last one started, or at the tick's
/// wakeup if sooner, or sooner still (but not before `min_tick_gap_s`) when the hook status
/// files changed: told by `watch` at once, else seen by polling their mtimes every
/// `hook_poll_s`. A watch that stops working is dropped (the caller sets up a new one). A stop
/// asked for (`clock`), before or during the wait, ends it at once with [`STOPPED`].
fn wait_for_next(
    deck: &DeckSection,
    started: Instant,
    now: i64,
    wakeup: Option<i64>,
    hooks: Option<&Path>,
    before: Option<(SystemTime, SystemTime, usize)>,
    (watch, clock): (&mut Option<HookWatch>, &mut SystemClock),
) -> &'static str {
    let until_wakeup =
        wakeup.map(|at| Duration::from_secs(u64::try_from(at.saturating_sub(now)).unwrap_or(0)));
    let interval = Duration::from_secs(deck.interval_s).min(until_wakeup.unwrap_or(Duration::MAX));
    let gap = Duration::from_secs(deck.min_tick_gap_s);
    let poll = Duration::from_secs(deck.hook_poll_s);
    loop {
        if clock.sleep(Duration::ZERO) == Wake::Stop {
            return STOPPED;
        }
        let elapsed = started.elapsed();
        if elapsed >= interval {
            return "interval";
        }
        if let Some(w) = watch.as_ref() {
            match w.wait((interval - elapsed).min(STOP_SLICE)) {
                Woken::Changed => {
                    // Not sooner than the gap after the last tick started.
                    let rest = gap.min(interval).saturating_sub(started.elapsed());
                    return match clock.sleep(rest) {
                        Wake::Stop => STOPPED,
                        Wake::Due => "hook-change",
                    };
                }
                Woken::Timeout => continue,
                Woken::Lost => {
                    Line::warning("deck", now_or_clock(None))
                        .field("wake", "poll")
                        .field("problem", "the hook directory watch stopped")
                        .emit();
                    *watch = None;
                    continue;
                }
            }
        }
        if clock.sleep(poll.min(interval - elapsed)) == Wake::Stop {
            return STOPPED;
        }
        if let Some(dir) = hooks
            && started.elapsed() >= gap
            && hooks_fingerprint(dir) != before
        {
            return "hook-change";
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_variables_set_their_keys() {
        let env = |k: &str| {
            Some(
                match k {
                    "AGENT_DECK_ROOT" => "/r",
                    "AGENT_DECK_BIN" => "/b/agent-deck",
                    "AGENT_DECK_PROFILE" => "work",
                    "TELEGRAM_ESCALATION_CHAT_ID" => "-100",
                    "POLLER_RESTART_DEDUP_S" => "120",
                    "WAITING_PATROL_THRESHOLD_S" => "30",
                    "WAITING_PATROL_NUDGE_DEDUP_S" => "100",
                    "MIN_GLOBAL_RESTART_INTERVAL_S" => "10",
                    _ => return None,
                }
                .to_owned(),
            )
        };
        let deck = config::load(None, &[], &env).unwrap().config.deck;
        assert_eq!(deck.root, "/r");
        assert_eq!(deck.bin.as_deref(), Some("/b/agent-deck"));
        assert_eq!(deck.profile.as_deref(), Some("work"));
        assert_eq!(deck.telegram_chat_id.as_deref(), Some("-100"));
        assert_eq!(deck.restart_guard.poller_dedup, 120);
        assert_eq!(deck.waiting_patrol.threshold, 30);
        assert_eq!(deck.waiting_patrol.nudge_dedup, 100);
        assert_eq!(deck.restart_guard.global_spacing, 10);
        // Flags still win over the environment.
        let set = ["deck.restart_guard.global_spacing=20".to_owned()];
        let deck = config::load(None, &set, &env).unwrap().config.deck;
        assert_eq!(deck.restart_guard.global_spacing, 20);
    }

    #[test]
    fn bad_env_numbers_and_values_are_named() {
        let env = |k: &str| (k == "WAITING_PATROL_THRESHOLD_S").then(|| "ten".to_owned());
        let err = config::load(None, &[], &env).unwrap_err();
        assert!(
            err.to_string().contains("WAITING_PATROL_THRESHOLD_S"),
            "{err}"
        );
        assert_eq!(err.exit_code(), code::CONFIG);
        let no_env = |_: &str| None;
        for (set, named) in [
            ("deck.interval_s=0", "interval_s"),
            ("deck.waiting_patrol.message=\"--all\"", "message"),
            ("deck.channels=[\"nope\"]", "nope"),
            ("deck.restart_guard.window=0", "window"),
            ("deck.nonsense=1", "nonsense"),
        ] {
            let err = config::load(None, &[set.to_owned()], &no_env).unwrap_err();
            assert!(err.to_string().contains(named), "{set}: {err}");
        }
    }

    #[test]
    fn defaults_follow_the_design() {
        let deck = DeckSection::default();
        assert_eq!(deck.root, "~/.agent-deck");
        assert_eq!(deck.restart_guard.poller_dedup, 3600);
        assert_eq!(deck.restart_guard.global_spacing, 60);
        assert_eq!(deck.waiting_patrol.threshold, 600);
        assert_eq!(deck.waiting_patrol.nudge_dedup, 3600);
        assert_eq!(deck.waiting_patrol.message, "report status?");
        // Unset, every profile is watched (the design's `default`: a deliberate difference).
        assert_eq!(deck.profile, None);
    }

    #[test]
    fn hook_files_change_the_fingerprint() {
        let dir = std::env::temp_dir().join(format!("aw-deck-hooks-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let at = |secs| SystemTime::UNIX_EPOCH + Duration::from_secs(secs);
        let file = dir.join("3f9a1c2e-1713770000.json");
        std::fs::write(&file, "{\"status\":\"running\"}").unwrap();
        let set = |p: &Path, t| {
            std::fs::File::options()
                .write(true)
                .open(p)
                .unwrap()
                .set_modified(t)
                .unwrap();
        };
        set(&file, at(1_000));
        let first = hooks_fingerprint(&dir).unwrap();
        assert_eq!(first.1, at(1_000));
        assert_eq!(hooks_fingerprint(&dir), Some(first), "nothing changed");
        // A temp file of the atomic write is not a status file.
        std::fs::write(dir.join(".3f9a1c2e-1713770000.json.tmp-1"), "x").unwrap();
        assert_eq!(hooks_fingerprint(&dir).unwrap().1, first.1);
        set(&file, at(2_000));
        let second = hooks_fingerprint(&dir).unwrap();
        assert_ne!(second, first, "a rewritten status file wakes the daemon");
        assert_eq!(second.1, at(2_000));
        assert_eq!(hooks_fingerprint(&dir.join("missing")), None);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A fresh real directory under the system's temp dir, for one test.
    fn hooks_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("aw-deck-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    /// The daemon's wait after a tick that started now, with a long interval (the test's bound:
    /// a wake that never comes fails it as `interval`) and no gap.
    fn wait_after_tick(dir: &Path, watch: &mut Option<HookWatch>) -> &'static str {
        let deck = DeckSection {
            interval_s: 30,
            min_tick_gap_s: 0,
            ..DeckSection::default()
        };
        let before = hooks_fingerprint(dir);
        // A hook writes a status file as agent-deck does: a dot temp file renamed into place.
        let hook = dir.to_path_buf();
        let writer = std::thread::spawn(move || {
            let temp = hook.join(".3f9a1c2e-1713770000.json.tmp-1");
            std::fs::write(&temp, "{\"status\":\"waiting\"}").unwrap();
            std::fs::rename(&temp, hook.join("3f9a1c2e-1713770000.json")).unwrap();
            Instant::now()
        });
        // A clock no signal reaches: only time and the hooks wake it.
        let mut clock = SystemClock::new(std::sync::mpsc::channel().1);
        let woke = wait_for_next(
            &deck,
            Instant::now(),
            0,
            None,
            Some(dir),
            before,
            (watch, &mut clock),
        );
        let written = writer.join().unwrap();
        eprintln!("woke ({woke}) {:?} after the write", written.elapsed());
        woke
    }

    #[test]
    fn a_hook_write_wakes_the_daemon_through_the_watch() {
        let dir = hooks_dir("watch");
        let mut watch = watch_hooks(None, Some(&dir), 0);
        assert!(watch.is_some(), "inotify watches a real directory");
        assert_eq!(wait_after_tick(&dir, &mut watch), "hook-change");
        assert!(watch.is_some(), "the watch goes on");
        // The same watch serves the next tick; another directory gets its own.
        let same = watch_hooks(watch, Some(&dir), 0).unwrap();
        assert_eq!(same.dir(), dir);
        let other = hooks_dir("watch-other");
        assert_eq!(
            watch_hooks(Some(same), Some(&other), 0).unwrap().dir(),
            other
        );
        let _ = std::fs::remove_dir_all(&dir);
        let _ = std::fs::remove_dir_all(&other);
    }

    #[test]
    fn without_a_watch_the_daemon_polls_the_mtimes() {
        let dir = hooks_dir("poll");
        // A directory that cannot be watched: no watch, the poll takes over.
        assert!(watch_hooks(None, Some(&dir.join("missing")), 0).is_none());
        assert!(watch_hooks(None, None, 0).is_none());
        assert_eq!(wait_after_tick(&dir, &mut None), "hook-change");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn token_file_lines() {
        assert_eq!(
            token_from_env_file("X=1\nTELEGRAM_BOT_TOKEN=\"123:abc\"\n").as_deref(),
            Some("123:abc")
        );
        assert_eq!(token_from_env_file("TELEGRAM_BOT_TOKEN=\n"), None);
    }

    #[test]
    fn flag_file_names_cannot_escape() {
        for bad in ["", ".", "..", "../x", "a/b", "a\0b"] {
            assert!(!safe_file_name(bad), "{bad:?}");
        }
        assert!(safe_file_name("3f9a1c2e-1713770000"));
    }
}
