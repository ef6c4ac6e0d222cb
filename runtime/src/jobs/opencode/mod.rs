//! `agentwatch opencode --once`: one tick of the opencode loop watchdog.
//!
//! read sessions (servers, registry, opencode.db, session files) -> judge trees (detect-core)
//! -> ask the LLM where the plan allows -> alert lifecycle and routing (alert-state)
//! -> deliver (channels) -> store tick, verdicts, alerts and state (SQLite).
//!
//! A tick exits 0 however many alerts fired; sources that fail are reported and skipped.
//! Every transition is one `key=value` line on standard error.

pub mod blind;
pub mod deliver;
pub mod follow;
pub mod loop_report;
pub mod notice;
pub mod tracked;

use crate::clock::{host_name, now_or_clock};
use crate::config::{self, Config, Env};
use crate::error::Error;
use crate::fleet::{self, ALERTMANAGER_STATE_KEY, ALERTMANAGER_TYPE, HeldAlerts, SyncReport};
use crate::input::read_sessions;
use crate::journal::Line;
use crate::notify::{
    SendReport, alert_rows, apply_stored_settings, decision_line, delivery_line, send,
};
use crate::stored::{
    elapsed_ms, job_event, load_or_clean, open_existing_read_only, record_events, store_path,
    take_lock,
};
use crate::text::escape_control;
use agentwatch_opencode::http::{OpencodeServer, ServerSpec, SourceError, Timeouts};
use agentwatch_opencode::lite::Spend;
use agentwatch_store::{EventKind, JobEvent, SessionCacheRow, Store, TickWrite, VerdictRow};
use alert_state::{
    AlertEvent, AlertState, Decision, DecisionKind, LlmOpinion, RootObservation, Tick, process_tick,
};
use detect_core::{DetectConfig, Judgement, Session, TreeVerdict};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::Duration;
use tracked::Tracked;

/// The store key of the alert state.
pub const ALERT_STATE_KEY: &str = "alerts";

#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Run one tick and exit (a timer repeats it); without it (or `--follow`), keep running
    /// ([`Options::daemon`]).
    pub once: bool,
    /// Decide everything, send nothing, write nothing.
    pub dry_run: bool,
    /// Print every session's verdict.
    pub verbose: bool,
    /// Print one JSON object describing the tick.
    pub json: bool,
    /// Configuration file (default `$XDG_CONFIG_HOME/agentwatch/config.toml`).
    pub config: Option<PathBuf>,
    /// An opencode server URL, in addition to the configured ones (repeatable).
    pub servers: Vec<String>,
    /// A session file or `opencode export` JSON to judge as a source (repeatable).
    pub session_files: Vec<String>,
    /// Judge the built-in demo sessions (alerts to a log channel, no model asked), in a fresh
    /// store in a temporary directory, or in `--db` (then `agentwatch serve --db` shows it).
    pub demo: bool,
    /// The SQLite database (default `$XDG_STATE_HOME/agentwatch/agentwatch.db`).
    pub db: Option<PathBuf>,
    /// Override a configuration key (`--set watchdog.detector.top_min=10`; repeatable).
    pub set: Vec<String>,
    /// The tick's time, unix seconds (for tests and replays; default the clock).
    pub now: Option<i64>,
    /// Read every session's whole history, ignoring the stored cursors (for comparisons).
    pub full_read: bool,
    /// opencode's database for this run (`--opencode-db`), as `--set opencode.db=PATH`.
    pub opencode_db: Option<PathBuf>,
    /// Follow the servers' event streams ([`follow::follow`]) instead of one tick.
    pub follow: bool,
    /// Set by the follower: what the streams said changed; only trees with a session read
    /// fresh are judged for the alert lifecycle.
    pub focus: Option<tracked::Focus>,
}

impl Options {
    /// Without `--once` or `--follow`, `agentwatch opencode` keeps running: the opencode job of
    /// `agentwatch run` alone, on the configured sources (`None` for one tick or the follower).
    pub fn daemon(&self) -> Result<Option<crate::run_options::Options>, Error> {
        if self.once || self.follow {
            return Ok(None);
        }
        let one_tick = [
            ("--now", self.now.is_some()),
            ("--demo", self.demo),
            ("--sessions", !self.session_files.is_empty()),
            ("--full-read", self.full_read),
            ("--server", !self.servers.is_empty()),
            ("--json", self.json),
            ("--verbose", self.verbose),
        ];
        crate::run_options::Options::job_alone(
            config::JobName::Opencode,
            &one_tick,
            self.config.clone(),
            self.db.clone(),
            self.overrides(),
            self.dry_run,
        )
        .map(Some)
    }

    /// The `--set` overrides, `--opencode-db PATH` last as `opencode.db=PATH` (a JSON string is a
    /// TOML basic string).
    pub fn overrides(&self) -> Vec<String> {
        let mut set = self.set.clone();
        if let Some(db) = &self.opencode_db {
            set.push(format!(
                "opencode.db={}",
                Value::String(db.display().to_string())
            ));
        }
        set
    }
}

/// Sessions gathered from every source, and what went wrong.
#[derive(Debug, Default)]
pub struct Collected {
    pub sessions: Vec<Tracked>,
    /// Sources read incrementally, servers and opencode.db (their cache rows are stored after
    /// the tick).
    pub cached_sources: Vec<String>,
    /// Sources that answered.
    pub answered: Vec<String>,
    /// Sources that failed, with why.
    pub failed: Vec<(String, String)>,
    /// Sources that were not there: a default server that does not answer, a registry or
    /// database file that does not exist. Unlike `failed`, they leave the picture complete.
    pub skipped: Vec<(String, String)>,
    /// What each source read gave, in order: `registry 2 servers`, `http://… 3 sessions`.
    pub read: Vec<String>,
    /// Sessions some source could not read (their roots must not look "gone").
    pub unreadable: usize,
    /// Sources that gave a complete answer: listed, and every listed session read. Only such an
    /// answer from the source that saw a tree may resolve its alert as gone.
    pub complete: HashSet<String>,
    /// Sessions a live source left out as not active within `watchdog.stale_after_s`.
    pub stale: HashSet<String>,
    /// Per server, the stale sessions whose cache rows stay: a few are asked for their newest
    /// message each tick (`tracked::stale_rechecks`), which needs their stored cursor.
    pub stale_rows: HashMap<String, Vec<String>>,
    /// Sources judged as recorded (session files, the demo): the stale rule does not apply.
    pub recorded: HashSet<String>,
    /// The servers that answered, by shown URL (an abort goes to the session's own server).
    pub servers: BTreeMap<String, OpencodeServer>,
}

/// `1 server`, `2 servers`.
fn count(n: usize, what: &str) -> String {
    format!("{n} {what}{}", if n == 1 { "" } else { "s" })
}

impl Collected {
    /// Add sessions; one seen already (from an earlier source) is judged once.
    fn add(&mut self, sessions: Vec<Tracked>) {
        let seen: HashSet<String> = self.sessions.iter().map(|s| s.info.id.clone()).collect();
        self.sessions
            .extend(sessions.into_iter().filter(|s| !seen.contains(&s.info.id)));
    }

    fn add_whole(&mut self, source: &str, sessions: Vec<Session>, config: &DetectConfig) {
        let tracked: Vec<Tracked> = sessions
            .iter()
            .map(|s| Tracked::whole(source, s, config))
            .collect();
        self.read
            .push(format!("{source} {}", count(tracked.len(), "session")));
        self.add(tracked);
        self.recorded.insert(source.to_owned());
        self.complete.insert(source.to_owned());
    }

    /// The tick's one line about its sources: what it read, what it skipped and why
    /// (`registry 2 servers, opencode.db 14 sessions; skipped http://127.0.0.1:4096 (connection
    /// refused)`).
    pub fn sources_line(&self) -> String {
        let read = if self.read.is_empty() {
            "none".to_owned()
        } else {
            self.read.join(", ")
        };
        let skipped: Vec<String> = self
            .failed
            .iter()
            .chain(&self.skipped)
            .map(|(source, why)| format!("{source} ({why})"))
            .collect();
        if skipped.is_empty() {
            read
        } else {
            format!("{read}; skipped {}", skipped.join(", "))
        }
    }
}

/// Server URLs from a registry file (the seed's `rc-servers.json`): a JSON list whose items are
/// URLs, objects with a `url`, or objects with a `port` (and optionally a `hostname` or `host`,
/// default 127.0.0.1); other items are left out.
pub fn registry_servers(path: &Path) -> Result<Vec<String>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let value: Value =
        serde_json::from_str(&text).map_err(|e| format!("{}: not JSON: {e}", path.display()))?;
    let list = value
        .as_array()
        .ok_or_else(|| format!("{}: expected a JSON list of servers", path.display()))?;
    Ok(list
        .iter()
        .filter_map(|item| match item {
            Value::String(url) => Some(url.clone()),
            Value::Object(o) => o
                .get("url")
                .and_then(Value::as_str)
                .map(str::to_owned)
                .or_else(|| {
                    let port = o.get("port").and_then(Value::as_u64)?;
                    let host = ["hostname", "host"]
                        .iter()
                        .find_map(|k| o.get(*k).and_then(Value::as_str))
                        .unwrap_or("127.0.0.1");
                    Some(format!("http://{host}:{port}"))
                }),
            _ => None,
        })
        .collect())
}

/// One server to read, and whether it is the default one (skipped quietly when not there).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerSource {
    pub url: String,
    pub optional: bool,
}

/// Whether the configured sources are read: flags that name sources (`--server`,
/// `--sessions`, `--demo`) replace the defaults of a configuration that names none.
fn configured_sources(config: &Config, args: &Options) -> bool {
    !config.defaulted.sources
        || (!args.demo && args.servers.is_empty() && args.session_files.is_empty())
}

/// The servers to read: configured, from the registry, and from flags, each once. Registry
/// entries that are not URLs, a registry that cannot be read, and a missing file go to
/// `collected` (failed, failed, skipped).
pub fn server_urls(
    config: &Config,
    args: &Options,
    env: Env<'_>,
    collected: &mut Collected,
) -> Vec<ServerSource> {
    let mut urls: Vec<ServerSource> = Vec::new();
    let configured = configured_sources(config, args);
    if configured && let Some(registry) = &config.opencode.registry {
        let path = config::expand_home(registry, env);
        if path.exists() {
            match registry_servers(&path) {
                Ok(found) => {
                    collected
                        .read
                        .push(format!("registry {}", count(found.len(), "server")));
                    for url in found {
                        match config::check_server_url(&url) {
                            Ok(()) => urls.push(ServerSource {
                                url,
                                optional: false,
                            }),
                            Err(e) => collected.failed.push(("registry".to_owned(), e)),
                        }
                    }
                }
                Err(e) => collected.failed.push(("registry".to_owned(), e)),
            }
        } else {
            collected
                .skipped
                .push(("registry".to_owned(), format!("no file {}", path.display())));
        }
    }
    if configured {
        urls.extend(config.opencode.servers.iter().map(|url| ServerSource {
            url: url.clone(),
            optional: config.defaulted.sources && url == config::DEFAULT_OPENCODE_SERVER,
        }));
    }
    urls.extend(args.servers.iter().map(|url| ServerSource {
        url: url.clone(),
        optional: false,
    }));
    let mut seen = HashSet::new();
    urls.retain(|u| seen.insert(u.url.trim_end_matches('/').to_owned()));
    urls
}

/// The short reason a default server is not there (`connection refused`).
fn absent_reason(e: &SourceError) -> Option<String> {
    match e {
        SourceError::Unreachable { message, .. } => {
            Some(if message.to_ascii_lowercase().contains("refused") {
                "connection refused".to_owned()
            } else {
                message.clone()
            })
        }
        SourceError::Timeout { .. } => Some("no answer".to_owned()),
        _ => None,
    }
}

/// How long a default server may take to accept a connection before it counts as not there.
const OPTIONAL_CONNECT_TIMEOUT: Duration = Duration::from_millis(500);

/// Read every source. Servers are read incrementally against what `store` holds (a dry run
/// without a database reads them whole).
pub fn collect(
    config: &Config,
    args: &Options,
    store: Option<&Store>,
    env: Env<'_>,
    now: i64,
) -> Collected {
    let detector = config.detector();
    let cutoff = config.watchdog.stale_cutoff_ms(now);
    let mut collected = Collected::default();
    let urls = server_urls(config, args, env, &mut collected);
    let timeouts = Timeouts {
        connect: crate::config::duration(config.opencode.connect_timeout_s),
        request: crate::config::duration(config.opencode.request_timeout_s),
    };
    for source in urls {
        let url = source.url;
        // Everything that leaves the process (journal, store, JSON) names the server redacted.
        let shown = agentwatch_http::shown_url(&url);
        let mut spec = ServerSpec::new(&url);
        spec.username = config.opencode.username.clone();
        spec.password = env(&config.opencode.password_env);
        let mut timeouts = timeouts;
        if source.optional {
            timeouts.connect = timeouts.connect.min(OPTIONAL_CONNECT_TIMEOUT);
        }
        let server = OpencodeServer::new(spec, timeouts);
        let read = tracked::read_server(
            &server,
            store,
            &detector,
            args.full_read,
            cutoff,
            args.focus.as_ref(),
        );
        match read {
            Ok(read) => {
                collected
                    .servers
                    .insert(server.shown_url().to_owned(), server.clone());
                collected
                    .stale_rows
                    .insert(server.shown_url().to_owned(), read.stale.clone());
                collected.stale.extend(read.stale);
                if read.problems.is_empty() {
                    collected.complete.insert(server.shown_url().to_owned());
                }
                collected.unreadable += read.problems.len();
                for p in read.problems {
                    collected.failed.push((shown.clone(), p.to_string()));
                }
                collected
                    .read
                    .push(format!("{shown} {}", count(read.sessions.len(), "session")));
                collected.add(read.sessions);
                collected.cached_sources.push(server.shown_url().to_owned());
                collected.answered.push(shown);
            }
            Err(e) => match absent_reason(&e).filter(|_| source.optional) {
                Some(why) => collected.skipped.push((shown, why)),
                None => collected.failed.push((shown, e.to_string())),
            },
        }
    }
    if let Some(db) = config
        .opencode
        .db
        .as_ref()
        .filter(|_| configured_sources(config, args))
    {
        let path = config::expand_home(db, env);
        if path.exists() {
            let source = path.display().to_string();
            let watched = open_alert_roots(store);
            let read = agentwatch_opencode::db::OpencodeDb::open(&path, Duration::from_secs(5))
                .and_then(|db| {
                    tracked::read_db(
                        &db,
                        &source,
                        store,
                        &detector,
                        args.full_read,
                        cutoff,
                        now.saturating_mul(1000),
                        &watched,
                    )
                });
            match read {
                Ok(read) => {
                    collected.stale.extend(read.stale);
                    collected.read.push(format!(
                        "opencode.db {}",
                        count(read.sessions.len(), "session")
                    ));
                    collected.add(read.sessions);
                    collected.cached_sources.push(source.clone());
                    collected.complete.insert(source.clone());
                    collected.answered.push(source);
                }
                Err(e) => collected.failed.push((source, e.to_string())),
            }
        } else {
            collected.skipped.push((
                "opencode.db".to_owned(),
                format!("no file {}", path.display()),
            ));
        }
    }
    let mut files = args.session_files.clone();
    if args.demo {
        files.clear();
        match crate::input::sessions_from_text("demo", crate::SAMPLE) {
            Ok(sessions) => {
                collected.add_whole("built-in demo", sessions, &detector);
                collected.answered.push("built-in demo".to_owned());
            }
            Err(e) => collected
                .failed
                .push(("built-in demo".to_owned(), e.to_string())),
        }
    }
    for file in files {
        match read_sessions(std::slice::from_ref(&file)) {
            Ok(sessions) => {
                collected.add_whole(&file, sessions, &detector);
                collected.answered.push(file);
            }
            Err(e) => collected.failed.push((file, e.to_string())),
        }
    }
    collected
}

/// The roots of the alerts the stored alert state holds open (none when there is no store or
/// its state does not read): a source that reads only active sessions still looks these up, so
/// an open alert's root gone quiet resolves as stale, not gone.
fn open_alert_roots(store: Option<&Store>) -> HashSet<String> {
    store
        .and_then(|s| s.load_state(ALERT_STATE_KEY).ok().flatten())
        .and_then(|text| serde_json::from_str::<AlertState>(&text).ok())
        .map(|state| state.open_alerts.into_values().map(|a| a.root).collect())
        .unwrap_or_default()
}

/// The agent a tree's alert is titled with: the first flagged session's, else the root's.
fn tree_agent(tree: &TreeVerdict, sessions: &BTreeMap<&str, &Session>) -> String {
    let agent_of = |id: &str| {
        sessions.get(id).and_then(|s| {
            s.agent.clone().or_else(|| {
                s.title
                    .as_deref()
                    .and_then(detect_core::subagent_name)
                    .map(str::to_owned)
            })
        })
    };
    tree.flagged_sessions
        .first()
        .and_then(|s| agent_of(&s.id))
        .or_else(|| agent_of(&tree.root))
        .unwrap_or_else(|| "unknown".to_owned())
}

fn tree_summary(tree: &TreeVerdict) -> String {
    tree.flagged_sessions
        .iter()
        .map(|v| format!("{}: {}", v.id, v.summary()))
        .collect::<Vec<_>>()
        .join("; ")
}

/// Load the alert state; a corrupt one is set aside and replaced by a clean state, with a warning.
fn load_alert_state(
    store: Option<&mut Store>,
    now: i64,
    dry_run: bool,
) -> Result<AlertState, Error> {
    let (state, aside) = load_or_clean(store, ALERT_STATE_KEY, now, dry_run, |text| {
        serde_json::from_str(text).map_err(|e| e.to_string())
    })?;
    if let Some(aside) = aside {
        aside.line("watchdog", ALERT_STATE_KEY, now).emit();
    }
    Ok(state)
}

/// Load what the Alertmanager channels hold; a corrupt record is set aside, with a warning.
fn load_held_alerts(
    store: Option<&mut Store>,
    now: i64,
    dry_run: bool,
) -> Result<HeldAlerts, Error> {
    let (held, aside) = load_or_clean(store, ALERTMANAGER_STATE_KEY, now, dry_run, |text| {
        serde_json::from_str(text).map_err(|e| e.to_string())
    })?;
    if let Some(aside) = aside {
        aside.line("watchdog", ALERTMANAGER_STATE_KEY, now).emit();
    }
    Ok(held)
}

/// A tick that saw no source still re-asserts the alerts the Alertmanager channels hold (not
/// seeing a loop is not seeing it end), so Alertmanager does not resolve them meanwhile.
fn reassert_only(
    config: &Config,
    mut store: Option<&mut Store>,
    now: i64,
    dry_run: bool,
) -> Result<Vec<SyncReport>, Error> {
    if !fleet::configured(config) {
        return Ok(Vec::new());
    }
    let state = load_alert_state(store.as_deref_mut(), now, dry_run)?;
    let mut held = load_held_alerts(store.as_deref_mut(), now, dry_run)?;
    let syncs = sync_alertmanager(config, &mut held, &[], &state, now, dry_run);
    if let Some(store) = store.filter(|_| !dry_run) {
        let held_json = serde_json::to_string(&held).map_err(|e| Error::software(e.to_string()))?;
        store
            .save_state(ALERTMANAGER_STATE_KEY, &held_json, now)
            .map_err(Error::from)?;
    }
    Ok(syncs)
}

/// Every Alertmanager channel's post of this tick, with the alerts open in `state`; journalled.
fn sync_alertmanager(
    config: &Config,
    held: &mut HeldAlerts,
    routed: &[(String, AlertEvent)],
    state: &AlertState,
    now: i64,
    dry_run: bool,
) -> Vec<SyncReport> {
    let open_keys: BTreeSet<&str> = state.open_alerts.keys().map(String::as_str).collect();
    let syncs = fleet::sync(config, held, routed, &open_keys, now, dry_run);
    journal_syncs(&syncs, now);
    syncs
}

/// One journal line per Alertmanager post.
fn journal_syncs(syncs: &[SyncReport], now: i64) {
    for sync in syncs {
        delivery_line("watchdog", now, &sync.result)
            .field("channel", &sync.channel)
            .field("alertmanager", &sync.result)
            .field("open", sync.open)
            .field("ending", sync.ending)
            .field_opt("message", sync.message.as_ref())
            .emit();
    }
}

/// One tick: collect, judge, alert, deliver, store. The report says what it saw and did; `None`
/// when the watchdog is disabled.
pub fn run(args: &Options) -> Result<Option<TickReport>, Error> {
    let env: Env<'_> = &config::process_env;
    let started = std::time::Instant::now();
    for server in &args.servers {
        config::check_server_url(server).map_err(|e| Error::usage(format!("--server {e}")))?;
    }
    let mut loaded = config::load(args.config.as_deref(), &args.overrides(), env)?;
    let now = now_or_clock(args.now);
    if !loaded.config.watchdog.enabled {
        Line::info("watchdog", now)
            .field("state", "disabled")
            .field("reason", "watchdog.enabled = false")
            .emit();
        return Ok(None);
    }
    // The demo logs its alerts and asks no model; with `--db` it writes there (for `serve`),
    // else to a fresh store in a temporary directory, removed after the tick.
    if args.demo {
        // Not the default desktop: the demo's alerts are not the user's.
        if loaded.config.channels.is_empty() || loaded.config.defaulted.channels {
            loaded.config.channels = vec![config::ChannelSection {
                name: "log".to_owned(),
                channel_type: "log".to_owned(),
                ..Default::default()
            }];
        }
        loaded.config.watchdog.local_llm_enabled = false;
    }
    // A manual run (`--demo` or `--sessions` without `--db`) never touches the production store:
    // it judges only what it was given (and `--server` URLs) in a fresh store in a temporary
    // directory, removed after the tick, so it can neither close nor re-page a production alert.
    let manual = (args.demo || !args.session_files.is_empty()) && args.db.is_none();
    let demo_dir;
    let db_path = if manual {
        demo_dir = std::env::temp_dir().join(format!("agentwatch-manual-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&demo_dir);
        loaded.config.opencode.servers.clear();
        loaded.config.opencode.registry = None;
        loaded.config.opencode.db = None;
        Line::info("watchdog", now)
            .field("store", "temporary")
            .field(
                "reason",
                "--sessions or --demo without --db: a manual run uses its own store and only the sources it names",
            )
            .emit();
        Some(demo_dir.join("agentwatch.db"))
    } else {
        demo_dir = PathBuf::new();
        None
    };
    let db_path = match db_path {
        Some(path) => path,
        None => store_path(&loaded.config, args.db.as_deref(), env)?,
    };
    // A dry run neither takes the lock nor creates or migrates the database: it reads what is there.
    let (_lock, mut store) = if args.dry_run {
        (None, open_existing_read_only(&db_path)?)
    } else {
        let lock = take_lock(&db_path, "opencode")?;
        (
            Some(lock),
            Some(Store::open(&db_path).map_err(Error::from)?),
        )
    };
    let mut config = loaded.config;
    if let Some(store) = &store {
        apply_stored_settings(&mut config, store);
    }

    let mut collected = collect(&config, args, store.as_ref(), env, now);
    // One line: what the tick read, what it skipped and why.
    let line = if collected.failed.is_empty() {
        Line::info("watchdog", now)
    } else {
        Line::warning("watchdog", now)
    };
    line.field("sources", collected.sources_line()).emit();
    let result = if collected.answered.is_empty() {
        Line::warning("watchdog", now)
            .field("outcome", "no_opencode")
            .field("reason", "no source answered")
            .emit();
        let mut report = TickReport::empty(now, &collected);
        // A source that keeps failing is an alert even when nothing answers now.
        let state = load_alert_state(store.as_mut(), now, args.dry_run)?;
        let health = blind::load(store.as_mut(), now, args.dry_run)?;
        let (health, blindness) = blind::step(
            &config,
            store.as_ref(),
            health,
            &state,
            &config.alert_config(&host_name()),
            &collected.failed,
            now,
        )?;
        let (decisions, mut state) = match blindness {
            Some(outcome) => (outcome.decisions, outcome.state),
            None => (Vec::new(), state),
        };
        for decision in &decisions {
            decision_line("watchdog", now, decision).emit();
        }
        if let Some(store) = store.as_mut().filter(|_| !args.dry_run) {
            let state_json =
                serde_json::to_string(&state).map_err(|e| Error::software(e.to_string()))?;
            store
                .commit_tick(&TickWrite {
                    ticked_at: now,
                    outcome: "no_opencode",
                    sessions_seen: 0,
                    alerts_fired: i64::try_from(fired(&decisions)).unwrap_or(i64::MAX),
                    servers: &[],
                    verdicts: &[],
                    alerts: &alert_rows(&decisions),
                    states: &[
                        (ALERT_STATE_KEY.to_owned(), state_json),
                        blind::state_row(&health)?,
                    ],
                    outbox: &deliver::outbox_events(&decisions)?,
                    supersede: &deliver::resolved_keys(&decisions),
                })
                .map_err(Error::from)?;
            // Events an earlier tick could not send go out even when no source answers now.
            report.sends = deliver::deliver_pending(&config, store, &mut state, now, env)?;
            report.next_wakeup =
                deliver::next_wakeup(store, &state, &config.alert_config(""), now)?;
        }
        report.decisions = decisions;
        report.alertmanager = reassert_only(&config, store.as_mut(), now, args.dry_run)?;
        report
    } else {
        tick(&config, store.as_mut(), &mut collected, now, args, env)?
    };
    if let Some(store) = store.as_mut().filter(|_| !args.dry_run) {
        record_events(store, &result.events(elapsed_ms(started)));
    }
    result.done_line(args.verbose).emit();
    if manual {
        let _ = std::fs::remove_dir_all(&demo_dir);
    }
    Ok(Some(result))
}

/// Decisions that fired an event (trigger, escalate, resolve).
fn fired(decisions: &[Decision]) -> usize {
    decisions.iter().filter(|d| d.dispatch.is_some()).count()
}

/// What one tick saw and did.
#[derive(Debug)]
pub struct TickReport {
    pub now: i64,
    pub outcome: &'static str,
    pub sources: Vec<String>,
    pub failed: Vec<(String, String)>,
    /// Roots of trees not judged as looping now: no new call within `watchdog.stale_after_s`.
    pub stale: Vec<String>,
    /// Sources that were not there (see [`Collected::skipped`]).
    pub skipped: Vec<(String, String)>,
    pub judgement: Judgement,
    pub decisions: Vec<Decision>,
    pub sends: Vec<(String, SendReport)>,
    /// Each Alertmanager channel's post: new, re-asserted and ended alerts together.
    pub alertmanager: Vec<SyncReport>,
    /// When a channel holding back an outbox event is free again (the alert state's
    /// `next_wakeup`, while anything is pending).
    pub next_wakeup: Option<i64>,
    /// Sessions stopped (`opencode.on_loop = "abort"`): session, `sent`, `failed` or `dry_run`.
    pub aborts: Vec<(String, String)>,
}

impl TickReport {
    fn empty(now: i64, collected: &Collected) -> Self {
        Self {
            now,
            outcome: "no_opencode",
            sources: collected.answered.clone(),
            failed: collected.failed.clone(),
            stale: Vec::new(),
            skipped: collected.skipped.clone(),
            judgement: Judgement {
                sessions: vec![],
                trees: vec![],
            },
            decisions: vec![],
            sends: vec![],
            alertmanager: vec![],
            next_wakeup: None,
            aborts: vec![],
        }
    }

    /// The tick and its deliveries, as history for `/metrics` (`agentwatch_events`).
    pub fn events(&self, duration_ms: Option<i64>) -> Vec<JobEvent> {
        let tick = job_event(
            self.now,
            "opencode",
            EventKind::Tick,
            "",
            self.outcome,
            duration_ms,
        );
        // An Alertmanager channel's delivery is its one post of the tick (new, re-asserted and
        // ended alerts together), so a channel that is down counts failed every tick.
        let posted = |channel: &str| self.alertmanager.iter().any(|a| a.channel == channel);
        let deliveries = self
            .sends
            .iter()
            .map(|(_, s)| (&s.channel, &s.result))
            .filter(|(channel, _)| !posted(channel))
            .chain(self.alertmanager.iter().map(|a| (&a.channel, &a.result)))
            .map(|(channel, result)| {
                job_event(
                    self.now,
                    "opencode",
                    EventKind::Delivery,
                    channel,
                    result,
                    None,
                )
            });
        std::iter::once(tick).chain(deliveries).collect()
    }

    /// Events fired (trigger, escalate, resolve).
    pub fn fired(&self) -> usize {
        fired(&self.decisions)
    }

    /// The tick's closing journal line: what it saw and fired, and how many open alerts were
    /// flagged again (each on its own line only with `verbose`), so a quiet tick is one line.
    pub fn done_line(&self, verbose: bool) -> Line {
        let trees = &self.judgement.trees;
        let still = self
            .decisions
            .iter()
            .filter(|d| d.kind == DecisionKind::StillFlagged)
            .count();
        let line = Line::info("watchdog", self.now)
            .field("tick", "done")
            .field("outcome", self.outcome)
            .field("sessions", self.judgement.sessions.len())
            .field("trees", trees.len())
            .field("flagged", trees.iter().filter(|t| t.flagged).count())
            .field("fired", self.fired());
        if verbose {
            line
        } else {
            line.field("still_flagged", still)
        }
    }

    /// The human form: trees, alert events and their routes, a closing count.
    pub fn render(&self, verbose: bool) -> String {
        let mut out = String::new();
        if verbose {
            for v in &self.judgement.sessions {
                let mark = if v.flagged { "FLAGGED" } else { "ok" };
                out.push_str(&format!(
                    "session {} {mark} {}\n",
                    escape_control(&v.id),
                    escape_control(&v.summary())
                ));
            }
        }
        for t in &self.judgement.trees {
            let state = if self.stale.contains(&t.root) {
                "stale (no new call within watchdog.stale_after_s)".to_owned()
            } else if t.flagged {
                let ids: Vec<&str> = t.flagged_sessions.iter().map(|s| s.id.as_str()).collect();
                format!("FLAGGED by {}", escape_control(&ids.join(", ")))
            } else {
                "ok".to_owned()
            };
            out.push_str(&format!(
                "tree {} sessions={} {state}\n",
                escape_control(&t.root),
                t.sessions.len()
            ));
        }
        for d in &self.decisions {
            let Some(dispatch) = &d.dispatch else {
                continue;
            };
            let e = &dispatch.event;
            out.push_str(&format!(
                "alert {} {} severity={} title={:?}\n",
                e.state.as_str(),
                escape_control(&e.dedup_key),
                e.severity.as_str(),
                e.title
            ));
            for route in &dispatch.routes {
                let sent = self
                    .sends
                    .iter()
                    .find(|(key, s)| key == &e.dedup_key && s.channel == route.channel)
                    .map(|(_, s)| s.result.as_str());
                out.push_str(&format!(
                    "  -> {}: {}\n",
                    route.channel,
                    sent.unwrap_or(&route.reason)
                ));
            }
        }
        for sync in &self.alertmanager {
            out.push_str(&format!(
                "alertmanager {}: {} open={} ending={}{}\n",
                sync.channel,
                sync.result,
                sync.open,
                sync.ending,
                sync.message
                    .as_deref()
                    .map(|m| format!(": {m}"))
                    .unwrap_or_default()
            ));
        }
        out.push_str(&format!(
            "# {}: {} session(s), {}/{} tree(s) flagged, {} alert event(s)\n",
            self.outcome,
            self.judgement.sessions.len(),
            self.judgement
                .trees
                .iter()
                .filter(|t| t.flagged && !self.stale.contains(&t.root))
                .count(),
            self.judgement.trees.len(),
            self.fired()
        ));
        out
    }

    /// The tick as one JSON object.
    pub fn to_json(&self) -> Value {
        json!({
            "now": self.now,
            "outcome": self.outcome,
            "sources": self.sources,
            "failed": self.failed.iter().map(|(s, p)| json!({"source": s, "problem": p})).collect::<Vec<_>>(),
            "skipped": self.skipped.iter().map(|(s, p)| json!({"source": s, "reason": p})).collect::<Vec<_>>(),
            "sessions": self.judgement.sessions,
            "trees": self.judgement.trees,
            "stale": self.stale,
            "decisions": self.decisions,
            "sends": self.sends.iter().map(|(k, s)| json!({"dedup_key": k, "channel": s.channel, "result": s.result, "message": s.message})).collect::<Vec<_>>(),
            "alertmanager": self.alertmanager,
            "aborts": self.aborts.iter().map(|(s, r)| json!({"session": s, "result": r})).collect::<Vec<_>>(),
        })
    }
}

fn tick(
    config: &Config,
    mut store: Option<&mut Store>,
    collected: &mut Collected,
    now: i64,
    args: &Options,
    env: Env<'_>,
) -> Result<TickReport, Error> {
    let detector = config.detector();
    let (judgement, cache_rows) =
        tracked::judge(&mut collected.sessions, &detector, now, store.as_deref());
    let read_now = collected.sessions.iter().filter(|s| s.was_read()).count();
    if args.verbose {
        // `judged`: sessions judged anew (read, or re-judged for a descendant's landing), whose
        // cache rows this tick writes; the others keep their stored verdict and row.
        let judged: usize = cache_rows.values().map(|r| r.written.len()).sum();
        Line::info("watchdog", now)
            .field("sessions", collected.sessions.len())
            .field("read", read_now)
            .field("from_store", collected.sessions.len() - read_now)
            .field("judged", judged)
            .emit();
    }
    let by_id: BTreeMap<&str, &Session> = collected
        .sessions
        .iter()
        .map(|s| (s.info.id.as_str(), &s.info))
        .collect();
    let alert_config = config.alert_config(&host_name());
    let state = load_alert_state(store.as_deref_mut(), now, args.dry_run)?;
    let alertmanager = fleet::configured(config);
    let mut held = if alertmanager {
        load_held_alerts(store.as_deref_mut(), now, args.dry_run)?
    } else {
        HeldAlerts::default()
    };

    // The stale rule: a tree of a live source whose newest call is older than the cutoff is not
    // judged as looping now; an open alert on it (or on a root a source left out as stale)
    // resolves as stale.
    let stale_trees = stale_trees(&judgement, collected, config.watchdog.stale_cutoff_ms(now));
    // "Gone" belongs to a source: an alert whose root is missing resolves as gone only on a
    // complete answer from the source that saw its tree (an alert stored before sources were
    // recorded: only when every source answered completely).
    let all_complete = collected.failed.is_empty() && collected.unreadable == 0;
    let present: HashSet<&str> = judgement.trees.iter().map(|t| t.root.as_str()).collect();
    let (stale_missing, missing): (Vec<&alert_state::Alert>, Vec<&alert_state::Alert>) = state
        .open_alerts
        .values()
        .filter(|a| a.dedup_key.starts_with(alert_state::DEDUP_KEY_PREFIX))
        .filter(|a| !present.contains(a.root.as_str()))
        .partition(|a| collected.stale.contains(&a.root));
    let stale: Vec<String> = stale_trees
        .iter()
        .cloned()
        .chain(stale_missing.iter().map(|a| a.root.clone()))
        .collect();
    let (gone, kept): (Vec<&alert_state::Alert>, Vec<&alert_state::Alert>) =
        missing.into_iter().partition(|a| {
            if a.source.is_empty() {
                all_complete
            } else {
                collected.complete.contains(&a.source)
            }
        });
    if !kept.is_empty() {
        Line::warning("watchdog", now)
            .field("missing_roots", kept.len())
            .field("action", "keep_open")
            .field(
                "reason",
                "missing is gone only on a complete answer from the source that saw the tree",
            )
            .emit();
    }
    let gone: Vec<String> = gone.into_iter().map(|a| a.root.clone()).collect();
    let source_of: BTreeMap<&str, &str> = collected
        .sessions
        .iter()
        .map(|s| (s.info.id.as_str(), s.source.as_str()))
        .collect();

    // A follower judges only trees its events changed (each judgement counts towards
    // escalation, an event does not).
    let fresh: HashSet<&str> = collected
        .sessions
        .iter()
        .filter(|s| s.fresh)
        .map(|s| s.info.id.as_str())
        .collect();
    let observed = |t: &TreeVerdict| {
        args.focus.is_none() || t.sessions.iter().any(|s| fresh.contains(s.as_str()))
    };
    let mut roots: Vec<RootObservation> = judgement
        .trees
        .iter()
        .filter(|t| !stale_trees.contains(&t.root) && observed(t))
        .map(|t| {
            let agent = tree_agent(t, &by_id);
            let source = source_of.get(t.root.as_str()).copied().unwrap_or_default();
            if t.flagged {
                let mut obs = RootObservation::flagged(&t.root, agent, tree_summary(t));
                obs.details =
                    json!({"flagged_sessions": t.flagged_sessions, "sessions": t.sessions});
                obs.from_source(source)
            } else {
                RootObservation::not_flagged(&t.root, agent).from_source(source)
            }
        })
        .collect();
    let plan = alert_state::plan_llm_opinions(
        &state,
        &alert_config,
        roots.iter().filter(|r| r.flagged).map(|r| r.root.as_str()),
    );
    let mut health = blind::load(store.as_deref_mut(), now, args.dry_run)?;
    let opinions = plan.ask(|planned| {
        ask_opinions(
            config,
            &roots,
            planned,
            now,
            env,
            &mut health.llm_down_since,
        )
    });
    opinions.attach(&mut roots);
    let mut outcome = process_tick(
        &state,
        &alert_config,
        &Tick {
            now,
            roots,
            gone,
            stale,
        },
    )
    .map_err(|e| Error::software(format!("alert tick: {e}")))?;
    // Every event reads as a person needs it (`notice`) and links to its tree's page when
    // `watchdog.dashboard_base_url` is set.
    for decision in &mut outcome.decisions {
        if let Some(dispatch) = &mut decision.dispatch {
            let tree = judgement.trees.iter().find(|t| t.root == decision.root);
            notice::rewrite(&mut dispatch.event, tree, &by_id);
            let base = &config.watchdog.dashboard_base_url;
            if !base.trim().is_empty() {
                dispatch
                    .event
                    .set_link(agentwatch_web::tree_link(base, &decision.root));
            }
        }
    }

    // The loop report for `agentwatch recover`, when it is to come from this job.
    if config.recover.opencode_report {
        write_loop_report(config, &judgement, &by_id, &stale_trees, now, args, env);
    }

    // A source failing tick after tick, or another job that stopped ticking, is an alert too.
    let (health, blindness) = blind::step(
        config,
        store.as_deref(),
        health,
        &outcome.state,
        &alert_config,
        &collected.failed,
        now,
    )?;
    if let Some(blindness) = blindness {
        outcome.decisions.extend(blindness.decisions);
        outcome.state = blindness.state;
    }

    let mut sends = Vec::new();
    // Events for Alertmanager channels: posted with the open alerts they hold after the store
    // writes (`fleet`), not through the outbox.
    let mut routed: Vec<(String, AlertEvent)> = Vec::new();
    for decision in &outcome.decisions {
        // A quiet tick is one line: an alert flagged again without a transition is counted in
        // the tick's closing line, and written on its own only with `--verbose`.
        if args.verbose || decision.kind != DecisionKind::StillFlagged {
            decision_line("watchdog", now, decision).emit();
        }
        let Some(dispatch) = &decision.dispatch else {
            continue;
        };
        for route in &dispatch.routes {
            if route.delivery.is_delivered() && route.channel_type == ALERTMANAGER_TYPE {
                routed.push((route.channel.clone(), dispatch.event.clone()));
            } else if route.delivery.is_delivered() {
                // A dry run reports what it would send; a real tick sends from the outbox after
                // its transaction (below).
                if args.dry_run {
                    let report = send(config, &route.channel, &dispatch.event, true, now, env);
                    delivery_line("watchdog", now, &report.result)
                        .field("dedup", &decision.dedup_key)
                        .field("channel", &route.channel)
                        .field("delivery", &report.result)
                        .emit();
                    sends.push((decision.dedup_key.clone(), report));
                }
            } else {
                // A rate-limited event is queued in the outbox: it goes out grouped with this
                // tick's others when the channel is free at delivery, else it is held there.
                let queued =
                    deliver::is_queued(route.delivery) && route.channel_type != ALERTMANAGER_TYPE;
                Line::info("watchdog", now)
                    .field("dedup", &decision.dedup_key)
                    .field("channel", &route.channel)
                    .field("delivery", if queued { "queued" } else { "suppressed" })
                    .field("reason", &route.reason)
                    .emit();
            }
        }
    }

    let mut syncs_done: Vec<SyncReport> = Vec::new();
    let mut next_wakeup = None;
    let mut aborts: Vec<(String, String)> = Vec::new();
    if args.dry_run {
        aborts = abort_loops(config, None, collected, &judgement, &outcome.decisions, now);
    }
    let fired = fired(&outcome.decisions);
    let any_flagged = judgement
        .trees
        .iter()
        .any(|t| t.flagged && !stale_trees.contains(&t.root));
    let tick_outcome = if any_flagged { "flagged" } else { "ok" };
    if let Some(store) = store.filter(|_| !args.dry_run) {
        let root_of: BTreeMap<&str, &str> = judgement
            .trees
            .iter()
            .flat_map(|t| {
                t.sessions
                    .iter()
                    .map(move |s| (s.as_str(), t.root.as_str()))
            })
            .collect();
        let spend_of: BTreeMap<&str, &Spend> = collected
            .sessions
            .iter()
            .map(|s| (s.info.id.as_str(), &s.spend))
            .collect();
        let verdict_rows: Vec<VerdictRow> = judgement
            .sessions
            .iter()
            .map(|v| {
                let root = root_of.get(v.id.as_str()).copied().unwrap_or(v.id.as_str());
                let spend = spend_of.get(v.id.as_str()).copied();
                VerdictRow {
                    session_id: v.id.clone(),
                    session_root: root.to_owned(),
                    flagged: v.flagged,
                    signals: v.signals.iter().map(|s| s.as_str().to_owned()).collect(),
                    dup: v.reason.dup,
                    top: i64::from(v.reason.top),
                    top_what: v.reason.top_what.clone(),
                    landed: v.reason.landed,
                    slow: i64::from(v.reason.slow),
                    coverage: v.reason.coverage,
                    coverage_file: v.reason.coverage_file.clone(),
                    calls_since_landed: i64::try_from(v.reason.calls_since_landed)
                        .unwrap_or(i64::MAX),
                    llm_opinion: opinions.get(root).map(|o| o.as_str().to_owned()),
                    model_id: spend.and_then(|s| s.model_id.clone()),
                    provider: spend.and_then(|s| s.provider.clone()),
                    cost_since_landed_usd: spend.and_then(|s| s.cost_since_landed_usd),
                }
            })
            .collect();
        let rows = alert_rows(&outcome.decisions);
        // One transaction: the tick, its verdicts, the alerts, the alert state and the events
        // to send. Delivery comes after, from the outbox (at least once).
        let state_json =
            serde_json::to_string(&outcome.state).map_err(|e| Error::software(e.to_string()))?;
        let outbox = deliver::outbox_events(&outcome.decisions)?;
        let supersede = deliver::resolved_keys(&outcome.decisions);
        store
            .commit_tick(&TickWrite {
                ticked_at: now,
                outcome: tick_outcome,
                sessions_seen: i64::try_from(collected.sessions.len()).unwrap_or(i64::MAX),
                alerts_fired: i64::try_from(fired).unwrap_or(i64::MAX),
                servers: &collected.answered,
                verdicts: &verdict_rows,
                alerts: &rows,
                states: &[
                    (ALERT_STATE_KEY.to_owned(), state_json),
                    blind::state_row(&health)?,
                ],
                outbox: &outbox,
                supersede: &supersede,
            })
            .map_err(Error::from)?;
        for source in &collected.cached_sources {
            let (written, mut kept): (&[SessionCacheRow], HashSet<&str>) = cache_rows
                .get(source)
                .map(|r| {
                    (
                        r.written.as_slice(),
                        r.kept.iter().map(String::as_str).collect(),
                    )
                })
                .unwrap_or_default();
            kept.extend(
                collected
                    .stale_rows
                    .get(source)
                    .into_iter()
                    .flatten()
                    .map(String::as_str),
            );
            store
                .update_session_cache(source, written, &kept)
                .map_err(Error::from)?;
        }
        let mut state = outcome.state.clone();
        sends = deliver::deliver_pending(config, store, &mut state, now, env)?;
        next_wakeup = deliver::next_wakeup(store, &state, &alert_config, now)?;
        aborts = abort_loops(
            config,
            Some(store),
            collected,
            &judgement,
            &outcome.decisions,
            now,
        );
        if alertmanager {
            let syncs = sync_alertmanager(config, &mut held, &routed, &state, now, false);
            // A delivery counts (rate-limit window, resolve receivers) once the post took it.
            for (channel, event) in &routed {
                if syncs
                    .iter()
                    .any(|s| &s.channel == channel && s.result == "sent")
                {
                    state.record_sent(event, channel, now);
                }
            }
            // Alertmanager holds every alert a successful post carried (a trigger that failed
            // and went out re-asserted included), so their resolves go to it.
            for sync in syncs.iter().filter(|s| s.result == "sent") {
                for key in held
                    .channels
                    .get(&sync.channel)
                    .into_iter()
                    .flat_map(|c| c.open.keys())
                    .filter(|k| state.open_alerts.contains_key(*k))
                {
                    state
                        .router
                        .delivered
                        .entry(key.clone())
                        .or_default()
                        .insert(sync.channel.clone());
                }
            }
            let state_json =
                serde_json::to_string(&state).map_err(|e| Error::software(e.to_string()))?;
            store
                .save_state(ALERT_STATE_KEY, &state_json, now)
                .map_err(Error::from)?;
            let held_json =
                serde_json::to_string(&held).map_err(|e| Error::software(e.to_string()))?;
            store
                .save_state(ALERTMANAGER_STATE_KEY, &held_json, now)
                .map_err(Error::from)?;
            syncs_done = syncs;
        }
    } else if alertmanager {
        syncs_done = sync_alertmanager(config, &mut held, &routed, &outcome.state, now, true);
    }
    for (channel, event) in routed {
        let report = syncs_done
            .iter()
            .find(|s| s.channel == channel)
            .map_or_else(
                || SendReport::new(&channel, "failed", Some("not posted".to_owned())),
                SyncReport::send_report,
            );
        delivery_line("watchdog", now, &report.result)
            .field("dedup", &event.dedup_key)
            .field("state", event.state.as_str())
            .field("channel", &channel)
            .field("delivery", &report.result)
            .field_opt("message", report.message.as_ref())
            .emit();
        sends.push((event.dedup_key, report));
    }
    Ok(TickReport {
        now,
        outcome: tick_outcome,
        sources: collected.answered.clone(),
        failed: collected.failed.clone(),
        stale: stale_trees.into_iter().collect(),
        skipped: collected.skipped.clone(),
        judgement,
        decisions: outcome.decisions,
        sends,
        alertmanager: syncs_done,
        next_wakeup,
        aborts,
    })
}

/// Write the loop report (`recover.opencode_report`) atomically; a dry run only says where. A
/// report that cannot be written is a warning: the recovery then sees a stale report and waits.
fn write_loop_report(
    config: &Config,
    judgement: &Judgement,
    by_id: &BTreeMap<&str, &Session>,
    stale: &BTreeSet<String>,
    now: i64,
    args: &Options,
    env: Env<'_>,
) {
    let report = loop_report::report(config, &judgement.trees, by_id, stale, now);
    let written =
        crate::jobs::recover::report_path(config, args.db.as_deref(), env).and_then(|path| {
            if !args.dry_run {
                let text = format!("{report}\n");
                agentwatch_systemd::write_atomic(&path, text.as_bytes(), 0o644)
                    .map_err(|e| Error::io(format!("{}: {e}", path.display())))?;
            }
            Ok(path)
        });
    match written {
        Ok(path) => Line::info("watchdog", now)
            .field("loop_report", path.display().to_string())
            .field("suspected", report["suspected"].as_i64().unwrap_or(0))
            .field("dry_run", args.dry_run)
            .emit(),
        Err(e) => Line::warning("watchdog", now)
            .field("loop_report", "not_written")
            .field("problem", e)
            .emit(),
    }
}

/// `opencode.on_loop = "abort"`: each alert that became critical this tick (a trigger opening
/// as critical, or its one escalation) stops its tree's flagged sessions on their own server
/// (`POST /session/:id/abort`), except a session whose last call landed. Each abort is a journal
/// line and an `abort` event in the store; without a store (a dry run) nothing is sent. Returns
/// `(session, result)`.
fn abort_loops(
    config: &Config,
    store: Option<&mut Store>,
    collected: &Collected,
    judgement: &Judgement,
    decisions: &[Decision],
    now: i64,
) -> Vec<(String, String)> {
    if !config.opencode.aborts() {
        return Vec::new();
    }
    let mut done = Vec::new();
    let mut events = Vec::new();
    for decision in decisions {
        // Only the transition to critical: a reminder (`repeat`) of a critical alert is not one.
        let became_critical = matches!(
            decision.kind,
            DecisionKind::Trigger | DecisionKind::Escalate
        ) && decision
            .dispatch
            .as_ref()
            .is_some_and(|d| d.event.severity == alert_state::Severity::Critical);
        let critical = became_critical;
        if !critical {
            continue;
        }
        let Some(tree) = judgement.trees.iter().find(|t| t.root == decision.root) else {
            continue;
        };
        for verdict in &tree.flagged_sessions {
            let line = Line::info("watchdog", now)
                .field("dedup", &decision.dedup_key)
                .field("session", &verdict.id)
                .field("action", "abort");
            if verdict.reason.landed && verdict.reason.calls_since_landed == 0 {
                line.field("result", "skipped")
                    .field("reason", "its last call landed")
                    .emit();
                continue;
            }
            let server = collected
                .sessions
                .iter()
                .find(|s| s.info.id == verdict.id)
                .and_then(|s| collected.servers.get(&s.source));
            let Some(server) = server else {
                line.field("result", "skipped")
                    .field("reason", "not a session of a server")
                    .emit();
                continue;
            };
            if store.is_none() {
                line.field("result", "dry_run").emit();
                done.push((verdict.id.clone(), "dry_run".to_owned()));
                continue;
            }
            let result = match server.abort(&verdict.id) {
                Ok(()) => {
                    line.field("result", "sent").emit();
                    "sent".to_owned()
                }
                Err(e) => {
                    Line::warning("watchdog", now)
                        .field("dedup", &decision.dedup_key)
                        .field("session", &verdict.id)
                        .field("action", "abort")
                        .field("result", "failed")
                        .field("problem", e.to_string())
                        .emit();
                    "failed".to_owned()
                }
            };
            events.push(job_event(
                now,
                "opencode",
                EventKind::Abort,
                &verdict.id,
                &result,
                None,
            ));
            done.push((verdict.id.clone(), result));
        }
    }
    if let Some(store) = store {
        record_events(store, &events);
    }
    done
}

/// The roots of trees whose newest call (over the sessions of live sources) is older than
/// `cutoff_ms`. A tree with a session of a recorded source (a file, the demo), or with no call
/// time at all, is never stale.
fn stale_trees(
    judgement: &Judgement,
    collected: &Collected,
    cutoff_ms: Option<i64>,
) -> BTreeSet<String> {
    let Some(cutoff) = cutoff_ms else {
        return BTreeSet::new();
    };
    let by_id: BTreeMap<&str, &Tracked> = collected
        .sessions
        .iter()
        .map(|s| (s.info.id.as_str(), s))
        .collect();
    judgement
        .trees
        .iter()
        .filter(|t| {
            let sessions: Vec<&Tracked> = t
                .sessions
                .iter()
                .filter_map(|id| by_id.get(id.as_str()).copied())
                .collect();
            let recorded = sessions
                .iter()
                .any(|s| collected.recorded.contains(&s.source));
            let newest = sessions.iter().filter_map(|s| s.newest_call_ms).max();
            !recorded && newest.is_some_and(|n| n < cutoff)
        })
        .map(|t| t.root.clone())
        .collect()
}

/// Ask the LLM about the planned roots, all at once (one thread each, so a hung model costs one
/// timeout per tick, not one per root); failures leave the opinion empty. An unreachable model is
/// logged once per outage: the first failure is a warning and starts `llm_down_since` (kept with
/// the sources' streaks), later ones are silent until it answers again, which is logged too.
fn ask_opinions(
    config: &Config,
    roots: &[RootObservation],
    planned: &[&str],
    now: i64,
    env: Env<'_>,
    llm_down_since: &mut Option<i64>,
) -> BTreeMap<String, Option<LlmOpinion>> {
    let mut opinions = BTreeMap::new();
    let llm = &config.watchdog.llm;
    let endpoint = agentwatch_llm::ChatEndpoint {
        base_url: llm.url.clone(),
        dialect: if llm.dialect == "openai" {
            agentwatch_llm::Dialect::OpenAi
        } else {
            agentwatch_llm::Dialect::Ollama
        },
        model: config.watchdog.model.clone(),
        api_key: llm.api_key_env.as_deref().and_then(env),
        timeout: crate::config::duration(llm.timeout_s),
    };
    let asked: Vec<(String, Result<Option<LlmOpinion>, agentwatch_llm::LlmError>)> =
        std::thread::scope(|scope| {
            let handles: Vec<_> = planned
                .iter()
                .filter_map(|root| roots.iter().find(|r| r.root == *root))
                .map(|obs| {
                    let endpoint = &endpoint;
                    let handle = scope.spawn(move || {
                        agentwatch_llm::ask_loop_opinion(endpoint, &obs.agent, &obs.summary)
                    });
                    (obs.root.clone(), handle)
                })
                .collect();
            handles
                .into_iter()
                .filter_map(|(root, h)| h.join().ok().map(|answer| (root, answer)))
                .collect()
        });
    let mut first_problem = None;
    let mut answered = false;
    for (root, answer) in asked {
        match answer {
            Ok(opinion) => {
                answered = true;
                opinions.insert(root.clone(), opinion);
                Line::info("watchdog", now)
                    .field("root", &root)
                    .field("llm_opinion", opinion.map_or("none", |o| o.as_str()))
                    .emit();
            }
            Err(e) => {
                first_problem.get_or_insert((root, e));
            }
        }
    }
    if answered {
        // The model answers: an outage is over, and a failure beside answers is that root's own.
        if let Some(since) = llm_down_since.take() {
            Line::info("watchdog", now)
                .field("llm", "answers_again")
                .field("down_for", crate::text::duration(now.saturating_sub(since)))
                .emit();
        }
        if let Some((root, e)) = first_problem {
            Line::warning("watchdog", now)
                .field("root", root)
                .field("llm_opinion", "none")
                .field("problem", e)
                .emit();
        }
    } else if let Some((root, e)) = first_problem
        && llm_down_since.is_none()
    {
        *llm_down_since = Some(now);
        Line::warning("watchdog", now)
            .field("root", root)
            .field("llm_opinion", "none")
            .field("problem", e)
            .field(
                "action",
                "no second opinion until it answers; logged once per outage",
            )
            .emit();
    }
    opinions
}
