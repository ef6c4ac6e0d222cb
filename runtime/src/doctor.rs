//! `agentwatch doctor`: is the watchdog able to see and to speak? Every source (reachable,
//! auth, sessions seen), every channel (program present, URL answers, token present — never
//! shown), the store (path, schema version, last tick per job) and the configuration files read,
//! in order, and each agent's pre-tool hook (`agentwatch hooks status`). And `agentwatch init`: a commented starter config from what doctor found.
//!
//! Exit codes (sysexits): 0 all is well; otherwise the code of the first problem, in the order
//! listed: 69 (unavailable) a source or channel that does not answer, or a channel's program
//! that is not installed, or an installed hook whose binary is gone; 78 (config) a token
//! variable that is not set, no source at all, or an installed hook that will not run (Codex
//! does not trust it, the agent turns hooks off); 74 (I/O) a store that cannot be read. A hook
//! not installed is fine. A configuration that does not load exits 78 before any
//! check. Warnings (a default source that is not there, no store yet) do not change the code.

use crate::clock::iso8601;
use crate::config::{self, Config, Env, Loaded};
use crate::error::{Error, code};
use crate::jobs::sessions::{Collected, Options as TickOptions, ServerUrl, server_urls};
use crate::stored::store_path;
use agentwatch_opencode::http::{OpencodeServer, ServerSpec, SourceError, Timeouts};
use agentwatch_store::{EventKind, Store};
use serde::Serialize;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Configuration file (default `$XDG_CONFIG_HOME/agentwatch/config.toml`).
    pub config: Option<PathBuf>,
    /// The SQLite database.
    pub db: Option<PathBuf>,
    /// Override a configuration key (repeatable).
    pub set: Vec<String>,
}

/// How one check came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Ok,
    /// Worth knowing, not a problem (a default source that is not there).
    Warn,
    /// A problem: the exit code says which kind.
    Fail,
}

impl Status {
    fn as_str(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::Warn => "warn",
            Self::Fail => "FAIL",
        }
    }
}

/// One line of the report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Check {
    /// `config`, `source`, `channel`, `store` or `hook`.
    pub area: &'static str,
    pub name: String,
    pub status: Status,
    /// What was found, in words; never a secret.
    pub detail: String,
    /// The exit code this problem means (a failed check only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<u8>,
}

fn check(area: &'static str, name: impl Into<String>, status: Status, detail: String) -> Check {
    Check {
        area,
        name: name.into(),
        status,
        detail,
        code: None,
    }
}

fn fail(area: &'static str, name: impl Into<String>, exit: u8, detail: String) -> Check {
    Check {
        code: Some(exit),
        ..check(area, name, Status::Fail, detail)
    }
}

/// What doctor found.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    pub checks: Vec<Check>,
    /// What `init` writes from (the effective configuration; not serialized).
    #[serde(skip)]
    pub config: Config,
    /// The configuration file `init` writes by default.
    #[serde(skip)]
    pub config_path: Option<PathBuf>,
}

impl Report {
    /// 0, or the code of the first failed check.
    pub fn exit_code(&self) -> u8 {
        self.checks
            .iter()
            .find_map(|c| c.code.filter(|_| c.status == Status::Fail))
            .unwrap_or(code::OK)
    }

    /// The first problem, in words.
    pub fn first_problem(&self) -> Option<String> {
        self.checks
            .iter()
            .find(|c| c.status == Status::Fail)
            .map(|c| format!("{} {}: {}", c.area, c.name, c.detail))
    }

    /// An aligned table: area, name, status, detail; then the verdict line.
    pub fn render(&self) -> String {
        let width = |f: &dyn Fn(&Check) -> usize| self.checks.iter().map(f).max().unwrap_or(0);
        let (wa, wn) = (width(&|c| c.area.len()), width(&|c| c.name.chars().count()));
        let mut out = String::new();
        for c in &self.checks {
            out.push_str(&format!(
                "{:<wa$}  {:<wn$}  {:<4}  {}\n",
                c.area,
                crate::text::escape_control(&c.name),
                c.status.as_str(),
                crate::text::escape_control(&c.detail)
            ));
        }
        match self.first_problem() {
            Some(p) => out.push_str(&format!("\nproblem (exit {}): {p}\n", self.exit_code())),
            None => out.push_str("\nall is well\n"),
        }
        out
    }

    pub fn to_json(&self) -> Value {
        json!({
            "ok": self.exit_code() == code::OK,
            "exit_code": self.exit_code(),
            "first_problem": self.first_problem(),
            "checks": self.checks,
        })
    }
}

/// Run every check.
pub fn run(args: &Options) -> Result<Report, Error> {
    let env: Env<'_> = &config::process_env;
    let loaded = config::load(args.config.as_deref(), &args.set, env)?;
    let mut checks = config_checks(&loaded, env);
    checks.extend(source_checks(&loaded.config, env));
    checks.extend(channel_checks(&loaded.config, env));
    checks.extend(store_checks(&loaded.config, args.db.as_deref(), env));
    checks.extend(hook_checks(env));
    Ok(Report {
        checks,
        config: loaded.config,
        config_path: args
            .config
            .clone()
            .or_else(|| config::default_config_path(env)),
    })
}

fn config_checks(loaded: &Loaded, env: Env<'_>) -> Vec<Check> {
    let mut checks: Vec<Check> = loaded
        .files
        .iter()
        .enumerate()
        .map(|(i, f)| {
            check(
                "config",
                format!("file {}", i + 1),
                Status::Ok,
                format!("read {}", f.display()),
            )
        })
        .collect();
    if checks.is_empty() {
        let path = config::default_config_path(env)
            .map_or_else(|| "(no HOME)".to_owned(), |p| p.display().to_string());
        checks.push(check(
            "config",
            "file",
            Status::Warn,
            format!("none at {path}: defaults (agentwatch init writes one)"),
        ));
    }
    let defaulted = loaded.config.defaulted;
    let what = match (defaulted.sources, defaulted.channels) {
        (true, true) => Some("sources and channels"),
        (true, false) => Some("sources"),
        (false, true) => Some("channels"),
        (false, false) => None,
    };
    if let Some(what) = what {
        checks.push(check(
            "config",
            "defaults",
            Status::Ok,
            format!("{what} not configured: the defaults apply"),
        ));
    }
    checks.extend(loaded.old_names.iter().map(|note| {
        check(
            "config",
            "old name",
            Status::Warn,
            format!("{note}: it still works; rename it when you next edit the file"),
        )
    }));
    checks
}

/// One opencode server's line: answers (how many sessions, with what credentials), needs a
/// password, is not running (quietly, the default one), or, found through `/proc`, is not
/// opencode after all.
fn server_check(config: &Config, server: &ServerUrl, env: Env<'_>) -> Check {
    let timeouts = Timeouts {
        connect: config::duration(config.opencode.connect_timeout_s).min(Duration::from_secs(2)),
        request: config::duration(config.opencode.request_timeout_s),
    };
    let password_var = &config.opencode.password_env;
    let password = env(password_var);
    let auth = if password.is_some() {
        format!("password from ${password_var}")
    } else {
        "no password".to_owned()
    };
    let shown = agentwatch_http::shown_url(&server.url);
    let mut spec = ServerSpec::new(&server.url);
    spec.username = config.opencode.username.clone();
    spec.password = password;
    let opencode = OpencodeServer::new(spec, timeouts);
    let how = server.found_in.map_or(String::new(), |pid| {
        format!("found listening in opencode process {pid} (/proc, GET /global/health); ")
    });
    if server.found_in.is_some()
        && let Err(e) = opencode.health()
    {
        return check(
            "source",
            shown,
            Status::Warn,
            format!("{how}not opencode: {e}"),
        );
    }
    match opencode.list_sessions() {
        Ok(list) => check(
            "source",
            shown,
            Status::Ok,
            format!("{how}answers, {auth}, {} session(s)", list.len()),
        ),
        Err(SourceError::Unauthorized { .. }) => fail(
            "source",
            shown,
            code::CONFIG,
            format!("401 unauthorized ({auth}): set ${password_var} to the server's password"),
        ),
        Err(e) if server.optional => check(
            "source",
            shown,
            Status::Warn,
            format!("not running (the default server; read when it answers): {e}"),
        ),
        Err(e) => fail("source", shown, code::UNAVAILABLE, e.to_string()),
    }
}

fn source_checks(config: &Config, env: Env<'_>) -> Vec<Check> {
    let mut checks = Vec::new();
    let mut found = Collected::default();
    let servers = server_urls(config, &TickOptions::default(), env, &mut found);
    for line in &found.read {
        checks.push(check("source", "registry", Status::Ok, line.clone()));
    }
    for (source, why) in &found.failed {
        checks.push(fail(
            "source",
            source.clone(),
            code::UNAVAILABLE,
            why.clone(),
        ));
    }
    for (source, why) in &found.skipped {
        checks.push(check("source", source.clone(), Status::Warn, why.clone()));
    }
    let mut answering = 0;
    for server in servers {
        let check = server_check(config, &server, env);
        answering += usize::from(check.status == Status::Ok);
        checks.push(check);
    }
    if let Some(db) = &config.opencode.db {
        let path = config::expand_home(db, env);
        if path.exists() {
            let opened = agentwatch_opencode::db::OpencodeDb::open(&path, Duration::from_secs(2))
                .map_err(|e| e.to_string())
                .and_then(|db| db.sessions().map_err(|e| e.to_string()));
            match opened {
                Ok(rows) => {
                    answering += 1;
                    checks.push(check(
                        "source",
                        "opencode.db",
                        Status::Ok,
                        format!("{}: {} session(s), read-only", path.display(), rows.len()),
                    ));
                }
                Err(e) => checks.push(fail(
                    "source",
                    "opencode.db",
                    code::UNAVAILABLE,
                    format!("{}: {e}", path.display()),
                )),
            }
        }
    }
    let (agents, watched) = agent_checks(config, env);
    checks.extend(agents);
    answering += watched;
    if answering == 0 && !checks.iter().any(|c| c.status == Status::Fail) {
        checks.push(fail(
            "source",
            "any",
            code::CONFIG,
            "no source answers: the watchdog sees nothing (start opencode with --port, list it \
             in [opencode] servers or the registry, or point [opencode] db at its database)"
                .to_owned(),
        ));
    }
    checks
}

/// How an agent's transcripts are listed (`discover_claude`, …).
type Discover = fn(&std::path::Path) -> std::io::Result<agentwatch_transcripts::Discovery>;

/// One line per agent whose transcripts are read from disk (Claude Code, Codex CLI, Gemini
/// CLI): where, how many sessions, how many written within `watchdog.stale_after_s` (those a
/// tick reads). Returns the lines and how many directories are there to read.
fn agent_checks(config: &Config, env: Env<'_>) -> (Vec<Check>, usize) {
    use crate::jobs::sessions::sources::{
        claude::ClaudeSource, codex::CodexSource, gemini::GeminiSource,
    };
    use agentwatch_transcripts::{discover_claude, discover_codex, discover_gemini};
    let agents: [(&str, bool, std::path::PathBuf, &str, Discover); 3] = [
        (
            "claude",
            config.claude.enabled,
            ClaudeSource::directory(config, env),
            "$CLAUDE_CONFIG_DIR",
            discover_claude,
        ),
        (
            "codex",
            config.codex.enabled,
            CodexSource::directory(config, env),
            "$CODEX_HOME",
            discover_codex,
        ),
        (
            "gemini",
            config.gemini.enabled,
            GeminiSource::directory(config, env),
            "$GEMINI_CLI_HOME",
            discover_gemini,
        ),
    ];
    let mut checks = Vec::new();
    let mut watched = 0;
    for (section, enabled, dir, variable, discover) in agents {
        let (line, found) = agent_check(config, section, enabled, &dir, variable, discover);
        checks.push(line);
        if let Some(found) = found {
            watched += 1;
            checks.push(versions_check(section, &found));
        }
    }
    (checks, watched)
}

/// Transcripts of each agent [`versions_check`] reads: the most recently written.
const SURVEYED: usize = 5;
/// Bytes of each of them read at most.
const SURVEYED_BYTES: u64 = 32 << 20;

/// What an agent's [`SURVEYED`] most recently written transcripts say (each read whole, at
/// most [`SURVEYED_BYTES`], by the reader every entry uses): the agent versions that wrote
/// them, and the record types the reader does not know, counted by name. Unknown types are
/// worth a warning (a version agentwatch may misread), never a failure.
fn versions_check(section: &str, found: &agentwatch_transcripts::Discovery) -> Check {
    let agent = crate::jobs::sessions::agent::Agent::from_family(section)
        .map_or(section, |a| a.display_name());
    let name = format!("{agent} versions");
    if found.transcripts.is_empty() {
        return check("source", name, Status::Ok, "no transcripts yet".to_owned());
    }
    let survey = agentwatch_transcripts::survey(&found.transcripts, SURVEYED, SURVEYED_BYTES);
    let mut versions: Vec<String> = survey
        .versions
        .iter()
        .map(|(version, n)| format!("{version} ({n})"))
        .collect();
    if survey.unversioned > 0 {
        versions.push(format!("not named ({})", survey.unversioned));
    }
    let mut detail = format!(
        "the {} newest transcript(s) read: version {}",
        survey.read,
        versions.join(", ")
    );
    let status = if survey.unknown_types.is_empty() {
        detail.push_str("; every record type known");
        Status::Ok
    } else {
        let unknown: Vec<String> = survey
            .unknown_types
            .iter()
            .map(|(kind, n)| format!("{kind} ({n})"))
            .collect();
        detail.push_str(&format!(
            "; record types not known, skipped: {}",
            unknown.join(", ")
        ));
        Status::Warn
    };
    if let Some(first) = survey.failed.first() {
        detail.push_str(&format!("; cannot read {first}"));
    }
    check("source", name, status, detail)
}

/// One agent's line of [`agent_checks`], and what was found when its directory is there to
/// read.
fn agent_check(
    config: &Config,
    section: &str,
    enabled: bool,
    dir: &std::path::Path,
    variable: &str,
    discover: Discover,
) -> (Check, Option<agentwatch_transcripts::Discovery>) {
    let name = crate::jobs::sessions::agent::Agent::from_family(section)
        .map_or(section, |a| a.display_name());
    if !enabled {
        let why = format!("off ([{section}] enabled = false)");
        return (check("source", name, Status::Ok, why), None);
    }
    if !dir.is_dir() {
        let why = format!(
            "no {}: read when it exists ({variable} or [{section}] dir to move it)",
            dir.display()
        );
        return (check("source", name, Status::Ok, why), None);
    }
    match discover(dir) {
        Ok(found) => {
            let now_ms = crate::clock::now_or_clock(None).saturating_mul(1000);
            let window = config.watchdog.stale_after_s;
            let active = found
                .transcripts
                .iter()
                .filter(|t| window == 0 || t.modified_within(now_ms, window))
                .count();
            let mut line = format!(
                "{}: {} transcript(s), {active} written within watchdog.stale_after_s, read-only",
                dir.display(),
                found.transcripts.len()
            );
            if let Some(problem) = found.problems.first() {
                line.push_str(&format!("; cannot read {problem}"));
            }
            (check("source", name, Status::Ok, line), Some(found))
        }
        Err(e) => (fail("source", name, code::UNAVAILABLE, e.to_string()), None),
    }
}

/// `host:port` of an `http(s)://` URL (the scheme's port when none is given).
fn host_port(url: &str) -> Option<(String, u16)> {
    let (scheme, rest) = url.split_once("://")?;
    let authority = rest.split(['/', '?', '#']).next()?;
    let authority = authority.rsplit('@').next()?;
    let default = if scheme.eq_ignore_ascii_case("https") {
        443
    } else {
        80
    };
    if let Some(v6) = authority.strip_prefix('[') {
        let (host, after) = v6.split_once(']')?;
        let port = after
            .strip_prefix(':')
            .map_or(Some(default), |p| p.parse().ok())?;
        return Some((host.to_owned(), port));
    }
    match authority.rsplit_once(':') {
        Some((host, port)) => Some((host.to_owned(), port.parse().ok()?)),
        None => Some((authority.to_owned(), default)),
    }
}

/// Whether something accepts connections at the URL's host and port (nothing is sent).
/// A channel URL that must answer: ok with its redacted form, else unavailable with why.
fn url_check(name: &str, url: &str, disabled: &str) -> Check {
    match answers(url) {
        Ok(()) => check(
            "channel",
            name,
            Status::Ok,
            format!("{} answers{disabled}", agentwatch_http::shown_url(url)),
        ),
        Err(e) => fail(
            "channel",
            name,
            code::UNAVAILABLE,
            format!("does not answer: {e}"),
        ),
    }
}

fn answers(url: &str) -> Result<(), String> {
    use std::net::ToSocketAddrs;
    let shown = agentwatch_http::shown_url(url);
    let (host, port) = host_port(url).ok_or_else(|| format!("{shown}: not an http(s) URL"))?;
    let addrs: Vec<_> = (host.as_str(), port)
        .to_socket_addrs()
        .map_err(|e| format!("{shown}: {e}"))?
        .collect();
    let mut last = format!("{shown}: no address");
    for addr in addrs {
        match std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(2)) {
            Ok(_) => return Ok(()),
            Err(e) => last = format!("{shown}: {e}"),
        }
    }
    Err(last)
}

fn channel_checks(config: &Config, env: Env<'_>) -> Vec<Check> {
    let mut checks = Vec::new();
    if config.channels.is_empty() {
        checks.push(check(
            "channel",
            "none",
            Status::Warn,
            "no channel configured: alerts reach no one".to_owned(),
        ));
    }
    if config.defaulted.channels && !config.channels.iter().any(|c| c.channel_type == "desktop") {
        checks.push(check(
            "channel",
            "desktop",
            Status::Warn,
            format!(
                "{} not on PATH: no desktop notifications (install libnotify)",
                agentwatch_channels::DEFAULT_DESKTOP_PROGRAM
            ),
        ));
    }
    for ch in &config.channels {
        checks.extend(one_channel_checks(ch, env));
    }
    checks
}

/// The checks of one configured channel: its program, URLs or file, and the variables that
/// hold its secrets (set or not, never their values).
fn one_channel_checks(ch: &config::ChannelSection, env: Env<'_>) -> Vec<Check> {
    let name = format!("{} ({})", ch.name, ch.channel_type);
    let disabled = if ch.enabled { "" } else { ", disabled" };
    let mut checks = Vec::new();
    match ch.channel_type.as_str() {
        "desktop" => {
            let program = ch
                .program
                .as_deref()
                .unwrap_or(agentwatch_channels::DEFAULT_DESKTOP_PROGRAM);
            checks.push(match config::find_program(program, env) {
                Some(p) => check("channel", name, Status::Ok, format!("{}{disabled}", p.display())),
                None => fail(
                    "channel",
                    name,
                    code::UNAVAILABLE,
                    format!("{program} not found on PATH (install libnotify's notify-send, or set the channel's program)"),
                ),
            });
        }
        "webhook" => {
            let url = ch.url.as_deref().unwrap_or_default();
            checks.push(url_check(&name, url, disabled));
            if ch.mode.as_deref() == Some("pagerduty") {
                checks.extend(secret_check(
                    &name,
                    ch.routing_key_env.as_deref(),
                    "routing key",
                    env,
                ));
            }
        }
        "telegram" => {
            let base = ch
                .api_base
                .as_deref()
                .unwrap_or(agentwatch_channels::TELEGRAM_API_BASE);
            checks.extend(secret_check(
                &name,
                ch.token_env.as_deref(),
                "bot token",
                env,
            ));
            if let Err(e) = answers(base) {
                checks.push(fail(
                    "channel",
                    name,
                    code::UNAVAILABLE,
                    format!("does not answer: {e}"),
                ));
            }
        }
        "alertmanager" => {
            for url in ch.urls.as_deref().unwrap_or_default() {
                checks.push(url_check(&name, url, disabled));
            }
        }
        _ => {
            let target = ch.path.as_deref().map_or_else(
                || "standard error (the journal under systemd)".to_owned(),
                |p| config::expand_home(p, env).display().to_string(),
            );
            checks.push(check(
                "channel",
                name,
                Status::Ok,
                format!("{target}{disabled}"),
            ));
        }
    }
    checks
}

/// Whether the variable `var` that holds a channel's `what` (a token, a key) is set: never
/// its value. `None` when the channel names no variable.
fn secret_check(name: &str, var: Option<&str>, what: &str, env: Env<'_>) -> Option<Check> {
    let var = var?;
    Some(if env(var).is_some() {
        check(
            "channel",
            name,
            Status::Ok,
            format!("{what} in ${var}: set"),
        )
    } else {
        fail(
            "channel",
            name,
            code::CONFIG,
            format!("{what} variable ${var} is not set"),
        )
    })
}

/// Each agent's pre-tool hook for the user: not installed (fine), will run, or installed and
/// will not (a problem: the guard the user set up is not there).
fn hook_checks(env: Env<'_>) -> Vec<Check> {
    crate::hooks_setup::user_statuses(env)
        .into_iter()
        .map(|(agent, status)| {
            let name = agent.display_name();
            let status = match status {
                Ok(status) => status,
                Err(e) => return check("hook", name, Status::Warn, e.to_string()),
            };
            let file = status.file.display();
            if !status.installed {
                let detail = format!("not installed ({file}; agentwatch hooks install {agent})");
                return check("hook", name, Status::Ok, detail);
            }
            let runs = status
                .binary
                .as_ref()
                .map_or(String::new(), |b| format!(": runs {}", b.display()));
            if status.will_run {
                return check("hook", name, Status::Ok, format!("{file}{runs}"));
            }
            let exit = if status.binary_exists || status.binary.is_none() {
                code::CONFIG
            } else {
                code::UNAVAILABLE
            };
            let why = status.blockers.join("; ");
            fail(
                "hook",
                name,
                exit,
                format!("{file}{runs}; will not run: {why}"),
            )
        })
        .collect()
}

fn store_checks(config: &Config, flag: Option<&Path>, env: Env<'_>) -> Vec<Check> {
    let path = match store_path(config, flag, env) {
        Ok(p) => p,
        Err(e) => return vec![fail("store", "path", code::CONFIG, e.to_string())],
    };
    let shown = path.display().to_string();
    if !path.is_file() {
        return vec![check(
            "store",
            shown,
            Status::Warn,
            "not created yet (the first tick creates it)".to_owned(),
        )];
    }
    let store = match Store::open_read_only(&path) {
        Ok(s) => s,
        Err(e) => return vec![fail("store", shown, code::IOERR, e.to_string())],
    };
    let version = store.schema_version().map_or_else(
        |e| format!("schema unreadable: {e}"),
        |v| format!("schema version {v}"),
    );
    let mut last: BTreeMap<String, i64> = BTreeMap::new();
    for count in store.event_counts(EventKind::Tick).unwrap_or_default() {
        let at = last.entry(count.job).or_insert(i64::MIN);
        *at = (*at).max(count.last_at);
    }
    let ticks = if last.is_empty() {
        match store.last_tick() {
            Ok(Some(t)) => format!("last opencode tick {}", iso8601(t.ticked_at)),
            _ => "no tick yet".to_owned(),
        }
    } else {
        last.iter()
            .map(|(job, at)| format!("last {job} tick {}", iso8601(*at)))
            .collect::<Vec<_>>()
            .join(", ")
    };
    vec![check(
        "store",
        shown,
        Status::Ok,
        format!("{version}; {ticks}"),
    )]
}

/// `agentwatch init`'s options.
#[derive(Debug, Clone, Default)]
pub struct InitOptions {
    pub doctor: Options,
    /// Print the starter config instead of writing it.
    pub print: bool,
}

/// Run doctor, then write a commented starter config from what it found at `--config` (default
/// `$XDG_CONFIG_HOME/agentwatch/config.toml`), atomically and never over an existing file.
/// Returns where it was written (`None` when printed) and the text.
pub fn init(args: &InitOptions) -> Result<(Option<PathBuf>, String), Error> {
    let env: Env<'_> = &config::process_env;
    let report = run(&args.doctor)?;
    let llm_answers = answers(&report.config.watchdog.llm.url).is_ok();
    let text = starter_config(&report, llm_answers);
    if args.print {
        return Ok((None, text));
    }
    let path = args
        .doctor
        .config
        .clone()
        .or_else(|| config::default_config_path(env))
        .ok_or_else(|| {
            Error::config("no place for the config: neither XDG_CONFIG_HOME nor HOME is set")
        })?;
    if path.exists() {
        return Err(Error::usage(format!(
            "{} exists: init never replaces a config (edit it, or move it away first)",
            path.display()
        )));
    }
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| Error::read(dir.display(), e))?;
    }
    agentwatch_systemd::create_atomic(&path, text.as_bytes(), 0o644).map_err(|e| {
        if e.source.kind() == std::io::ErrorKind::AlreadyExists {
            Error::usage(format!(
                "{}: exists: init never replaces a config",
                path.display()
            ))
        } else {
            Error::io(e.to_string())
        }
    })?;
    Ok((Some(path), text))
}

/// A TOML string literal.
fn lit(text: &str) -> String {
    toml::Value::String(text.to_owned()).to_string()
}

/// The starter config: the sources doctor found answering or present, the channels it found
/// usable, every other choice as a comment naming its default.
pub fn starter_config(report: &Report, llm_answers: bool) -> String {
    let mut out = String::from(
        "# agentwatch configuration, written by `agentwatch init` from what `agentwatch doctor`\n\
         # found. `agentwatch config` prints every key with its effective value.\n\n",
    );
    push_opencode_section(&mut out, report);
    push_watchdog_section(&mut out, &report.config, llm_answers);
    push_channels(&mut out);
    out
}

/// `[opencode]`: the servers that answered, the registry and database when present.
fn push_opencode_section(out: &mut String, report: &Report) {
    let c = &report.config;
    let answering: Vec<String> = report
        .checks
        .iter()
        .filter(|k| k.area == "source" && k.status == Status::Ok && k.name.contains("://"))
        .map(|k| lit(&k.name))
        .collect();
    out.push_str(
        "[opencode]\n\
         # Naming any source here replaces the defaults (the registry, opencode.db and\n\
         # http://127.0.0.1:4096 when it answers).\n",
    );
    if answering.is_empty() {
        out.push_str("# servers = [\"http://127.0.0.1:4096\"]   # none answered when init ran\n");
    } else {
        out.push_str(&format!("servers = [{}]\n", answering.join(", ")));
    }
    for (key, value, what) in [
        (
            "registry",
            &c.opencode.registry,
            "a JSON list of server URLs",
        ),
        ("db", &c.opencode.db, "opencode's database, read-only"),
    ] {
        if let Some(v) = value {
            let present = Path::new(&config::expand_home(v, &config::process_env)).exists();
            let hash = if present { "" } else { "# " };
            let note = if present {
                ""
            } else {
                " (not there when init ran)"
            };
            out.push_str(&format!("{hash}{key} = {}   # {what}{note}\n", lit(v)));
        }
    }
    out.push_str(&format!(
        "# password_env = {}   # the variable holding the servers' password\n\n",
        lit(&c.opencode.password_env)
    ));
}

/// `[watchdog]`: the local LLM on when it answered.
fn push_watchdog_section(out: &mut String, c: &Config, llm_answers: bool) {
    out.push_str("[watchdog]\n");
    if llm_answers {
        out.push_str(&format!(
            "local_llm_enabled = true   # {} answered: it gives a second opinion\n",
            c.watchdog.llm.url
        ));
    } else {
        out.push_str(&format!(
            "local_llm_enabled = false   # nothing answered at {} when init ran\n",
            c.watchdog.llm.url
        ));
    }
    out.push_str(&format!(
        "# dashboard_base_url = {}   # links in alerts (agentwatch serve)\n\n",
        lit(&c.watchdog.dashboard_base_url)
    ));
}

/// The channels: the journal, the desktop when notify-send is on PATH, a webhook commented out.
fn push_channels(out: &mut String) {
    out.push_str(
        "# Channels: naming any replaces the defaults (the journal, and the desktop when\n\
         # notify-send is on PATH).\n\
         [[channels]]\nname = \"journal\"\ntype = \"log\"   # one line per event in the journal (standard error)\n\n",
    );
    let desktop = config::find_program(
        agentwatch_channels::DEFAULT_DESKTOP_PROGRAM,
        &config::process_env,
    );
    let hash = if desktop.is_some() { "" } else { "# " };
    if desktop.is_none() {
        out.push_str("# notify-send was not on PATH when init ran (install libnotify):\n");
    }
    out.push_str(&format!(
        "{hash}[[channels]]\n{hash}name = \"desktop\"\n{hash}type = \"desktop\"\n{hash}rate_limit_s = 300   # a burst is one grouped notification\n\n"
    ));
    out.push_str(
        "# [[channels]]\n# name = \"chat\"\n# type = \"webhook\"\n\
         # url = \"https://ntfy.sh/YOUR-TOPIC\"\n# mode = \"ntfy\"   # or slack, json, pagerduty\n",
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[test]
    fn the_starter_config_loads_and_names_what_was_found() {
        let report = Report {
            checks: vec![check(
                "source",
                "http://127.0.0.1:4881",
                Status::Ok,
                String::new(),
            )],
            config: Config::default(),
            config_path: None,
        };
        let text = starter_config(&report, false);
        assert!(
            text.contains("servers = [\"http://127.0.0.1:4881\"]"),
            "{text}"
        );
        assert!(text.contains("local_llm_enabled = false"), "{text}");
        let table: toml::Table = toml::from_str(&text).unwrap();
        let config = Config::deserialize(toml::Value::Table(table)).unwrap();
        config.validate().unwrap();
        assert_eq!(config.channels[0].name, "journal");
    }

    #[test]
    fn each_transcript_agent_has_its_line_where_its_variable_or_home_puts_it() {
        let dir = agentwatch_testkit::TempDir::new("aw-doctor-agents");
        let home = dir.path.join("home");
        let rollout = home.join(
            ".codex/sessions/2026/12/06/rollout-2026-12-06T02-37-12-01a24936-6831-7872-909d-00f87fd6ae98.jsonl",
        );
        std::fs::create_dir_all(rollout.parent().unwrap()).unwrap();
        std::fs::write(&rollout, "{}\n").unwrap();
        let gemini_home = dir.path.join("g");
        std::fs::create_dir_all(gemini_home.join(".gemini/tmp")).unwrap();
        let (home_s, gemini_s) = (
            home.display().to_string(),
            gemini_home.display().to_string(),
        );
        let env = |name: &str| match name {
            "HOME" => Some(home_s.clone()),
            "GEMINI_CLI_HOME" => Some(gemini_s.clone()),
            _ => None,
        };
        let mut config = Config::default();
        config.claude.enabled = false;
        let (checks, watched) = agent_checks(&config, &env);
        let lines: Vec<String> = checks
            .iter()
            .map(|c| format!("{}: {}", c.name, c.detail))
            .collect();
        assert_eq!(lines.len(), 5, "{lines:#?}");
        assert_eq!(lines[0], "Claude Code: off ([claude] enabled = false)");
        assert!(
            lines[1].starts_with(&format!("Codex CLI: {}/.codex: 1 transcript(s)", home_s)),
            "{}",
            lines[1]
        );
        assert_eq!(
            lines[2],
            "Codex CLI versions: the 1 newest transcript(s) read: version not named (1); every \
             record type known"
        );
        assert!(
            lines[3].starts_with(&format!("Gemini CLI: {gemini_s}/.gemini: 0 transcript(s)")),
            "{}",
            lines[3]
        );
        assert_eq!(lines[4], "Gemini CLI versions: no transcripts yet");
        assert_eq!(watched, 2);
    }

    #[test]
    fn host_port_of_urls() {
        for (url, want) in [
            ("http://127.0.0.1:9/x", Some(("127.0.0.1", 9))),
            ("https://hooks.example/a?b", Some(("hooks.example", 443))),
            ("http://u:pw@h:81", Some(("h", 81))),
            ("http://[::1]:7/", Some(("::1", 7))),
            ("http://h:port", None),
            ("h:80", None),
        ] {
            let got = host_port(url);
            assert_eq!(got.as_ref().map(|(h, p)| (h.as_str(), *p)), want, "{url}");
        }
    }
}
