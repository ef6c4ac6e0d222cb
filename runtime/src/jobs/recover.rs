//! `agentwatch recover --once`: the confirmed-loop restart of a service, one check per run (a
//! systemd timer repeats it; without `--once` the command keeps running, see [`Options::daemon`]). The spec is `loop-recovery.md`; the rules live in
//! [`recovery_policy::loop_recovery`], this module only performs what the policy decides:
//!
//! ```text
//! loop report file -> policy -> [ask the router -> policy] -> [notice countdown, wait until
//!   executeAt, notice acting, systemctl restart UNIT, notice done|failed -> policy] -> store
//! ```
//!
//! * **State** is the policy's, kept in the SQLite store under `loop-recovery` between runs. A
//!   corrupt or foreign state is set aside (`loop-recovery.corrupt.NOW`) and the run starts clean
//!   with a warning. The state is saved *before* the countdown, so a run killed mid-recovery leaves
//!   a decided restart without an outcome, which the policy counts as done (cooldown): a crash
//!   never turns into a restart storm.
//! * **Countdown**: waited in-process. The run that decides a restart writes the `countdown`
//!   notice, sleeps until `executeAt` (announce + `countdown` s), writes `acting`, restarts, writes
//!   `done` or `failed` and feeds the outcome back, all in one run. This is the order the policy and
//!   the spec's splash expect, and needs no "pending restart" carried between runs. A stopped unit
//!   (`systemctl stop agentwatch-recover.service`: SIGTERM, or SIGINT) cancels a countdown before
//!   anything restarts: the notice becomes `cancelled` (atomically; the splash hides it at once),
//!   the policy hears `restart-cancelled` and records no cooldown, and the run exits 0. Only a
//!   kill that leaves no chance (SIGKILL) leaves the restart to be counted as done.
//!   With `--now` the clock is fixed and the wait is simulated: the run moves its clock to
//!   `executeAt` without sleeping, so `acting`, `done` and the outcome carry `executeAt`.
//! * **Router**: asked only when the policy says so, with the report's brief; `--dry-run` asks it
//!   too (a read), so a dry run reaches the decision a real run would.
//! * **`--dry-run`** performs no side effect: no notice, no restart, no state written, no database
//!   or lock file created (an existing store is opened read-only).
//! * **Log**: exactly one `key=value` decision line per run on standard error
//!   (`recover=ISO decision=NAME steps=A,B unit=U dry_run=BOOL reason="R1 | R2"`, logfmt through
//!   [`crate::journal`]), plus
//!   `recover=ISO warning=...` lines when the state was set aside or a notice could not be written.
//!   `--json` prints the run as one JSON object on standard output.
//!
//! Exit codes: 0 whatever was decided, 69 the restart failed, 74 the store or
//! the state could not be written, 75 another run holds the lock, 78 bad configuration (including
//! an env file wider than 0640).

use crate::clock::now_or_clock;
use crate::config::{self, Config, Env, RecoverSection};
use crate::drive::{Perform, drive};
use crate::error::{Error, code};
use crate::journal::{Line, Priority};
use crate::stored::{
    elapsed_ms, job_event, load_or_clean, open_existing_read_only, parse_policy, record_events,
    save_policy, store_path, take_lock,
};
use crate::wake::{Clock as _, SignalScope, SystemClock, Wake};
use agentwatch_llm::{ChatEndpoint, Dialect, LlmError, complete};
use agentwatch_store::{EventKind, JobEvent, Store};
use agentwatch_systemd::{NOTICE_MODE, Systemctl, read_env_file, write_atomic};
use recovery_policy::loop_recovery::{
    ActionOutcome, LoopAction, LoopDecision, LoopDecisionName, LoopEvent, LoopRecoveryConfig,
    LoopRecoveryState, LoopReport, ROUTER_SYSTEM_PROMPT, RouterVerdict, parse_loop_report,
    router_brief,
};
use recovery_policy::notice::{Phase, RecoveryNotice};
use recovery_policy::{DecisionName, Policy};
use serde_json::{Value, json};
use std::io::Read;
use std::path::{Path, PathBuf};

/// The store key of the policy's state.
pub const STATE_KEY: &str = "loop-recovery";

/// The env-file and environment variables of the router (spec names).
const ROUTER_URL_VAR: &str = "FLY_LOOP_ROUTER_URL";
const ROUTER_MODEL_VAR: &str = "FLY_LOOP_MODEL";
const ROUTER_KEY_VAR: &str = "FLY_LOOP_ROUTER_KEY";

/// Largest loop report read.
const MAX_REPORT_BYTES: u64 = 4 * 1024 * 1024;

#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Run one check and exit (the systemd timer repeats it); without it, keep running
    /// ([`Options::daemon`]).
    pub once: bool,
    /// Decide everything, do nothing: no notice, no restart, no state written.
    pub dry_run: bool,
    /// Configuration file (default `$XDG_CONFIG_HOME/agentwatch/config.toml`).
    pub config: Option<PathBuf>,
    /// The run's time, unix seconds (for tests and replays; default the clock). Fixes the clock
    /// for the whole run: the countdown is then simulated, not slept.
    pub now: Option<i64>,
    /// Print the run (decisions, notices written, restart) as one JSON object.
    pub json: bool,
    /// The SQLite database (default `$XDG_STATE_HOME/agentwatch/agentwatch.db`).
    pub db: Option<PathBuf>,
    /// Override a configuration key (`--set recover.unit=my-agent.service`; repeatable).
    pub set: Vec<String>,
}

impl Options {
    /// Without `--once`, `agentwatch recover` keeps running: the recover job of `agentwatch run`
    /// alone, one check every `run.recover_interval_s` (`None` with `--once`).
    pub fn daemon(&self) -> Result<Option<crate::run_options::Options>, Error> {
        if self.once {
            return Ok(None);
        }
        let one_tick = [("--now", self.now.is_some()), ("--json", self.json)];
        crate::run_options::Options::job_alone(
            config::JobName::Recover,
            &one_tick,
            self.config.clone(),
            self.db.clone(),
            self.set.clone(),
            self.dry_run,
        )
        .map(Some)
    }
}

/// The run's clock: the system clock, or `--now` fixed, where waiting only moves the time.
#[derive(Debug)]
enum Clock {
    /// The system clock; a wait is cut short by SIGTERM or SIGINT (handled from the first wait
    /// to the end of the run).
    System(Option<SignalScope>),
    Fixed(i64),
}

impl Clock {
    fn now(&self) -> i64 {
        match self {
            Self::System(_) => now_or_clock(None),
            Self::Fixed(t) => *t,
        }
    }

    /// Waits until `at`; [`Wake::Stop`] when a signal asked the run to stop first.
    fn wait_until(&mut self, at: i64, run: &mut Run) -> Wake {
        match self {
            Self::Fixed(t) => {
                *t = (*t).max(at);
                Wake::Due
            }
            Self::System(Some(scope)) => scope.clock().wait_until(at),
            Self::System(scope) => match SignalScope::new() {
                Ok(new) => scope.insert(new).clock().wait_until(at),
                Err(e) => {
                    run.warn(
                        Line::warning("recover", now_or_clock(None))
                            .field("warning", "signals")
                            .field("problem", e)
                            .field("action", "wait_uninterruptible"),
                    );
                    // A clock nobody can wake: it only waits.
                    SystemClock::new(std::sync::mpsc::channel().1).wait_until(at)
                }
            },
        }
    }
}

/// What became of a decided restart.
enum Performed {
    /// It ran; the outcome to feed back.
    Ran(ActionOutcome),
    /// A signal stopped the run during the countdown: nothing was restarted.
    Cancelled(String),
}

/// What the run needs, resolved from the config, the env file and the environment.
struct Settings {
    section: RecoverSection,
    policy: LoopRecoveryConfig,
    /// The router's bearer key; never printed.
    api_key: Option<String>,
    report: PathBuf,
    /// `None`: `recover.notice` is empty, no notice is written.
    notice: Option<PathBuf>,
}

/// `Debug` without the router key: a secret never reaches `Debug` output.
impl std::fmt::Debug for Settings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Settings")
            .field("section", &self.section)
            .field("policy", &self.policy)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("report", &self.report)
            .field("notice", &self.notice)
            .finish()
    }
}

/// The loop report's path: `recover.report`, or `loop-report.json` beside the store `db`.
///
/// # Errors
///
/// Only when the store has no place either (no HOME, no XDG_STATE_HOME).
pub fn report_path(config: &Config, db: Option<&Path>, env: Env<'_>) -> Result<PathBuf, Error> {
    let report = config.recover.report.trim();
    if !report.is_empty() {
        return Ok(config::expand_home(report, env));
    }
    let db = store_path(config, db, env)?;
    Ok(db.with_file_name("loop-report.json"))
}

fn settings(
    config: &Config,
    db: Option<&Path>,
    dry_run: bool,
    env: Env<'_>,
) -> Result<Settings, Error> {
    if config.recover.unit.is_empty() {
        return Err(Error::config(
            "recover.unit: not set; name the systemd unit a confirmed loop restarts \
             ([recover] unit = \"my-agent.service\")",
        ));
    }
    let mut section = config.recover.clone();
    let mut api_key = env(ROUTER_KEY_VAR);
    if !section.env_file.trim().is_empty() {
        let path = config::expand_home(section.env_file.trim(), env);
        if let Some(vars) = read_env_file(&path)? {
            let from_file = |var: &str| {
                vars.get(var)
                    .map(|v| v.trim().to_owned())
                    .filter(|v| !v.is_empty())
            };
            // The process environment (already in the config) wins over the file.
            if env(ROUTER_URL_VAR).is_none() && from_file(ROUTER_URL_VAR).is_some() {
                section.router_url = from_file(ROUTER_URL_VAR);
            }
            if env(ROUTER_MODEL_VAR).is_none() && from_file(ROUTER_MODEL_VAR).is_some() {
                section.model = from_file(ROUTER_MODEL_VAR);
            }
            if api_key.is_none() {
                api_key = from_file(ROUTER_KEY_VAR);
            }
        }
    }
    let policy = LoopRecoveryConfig {
        max_report_age: section.max_report_age,
        min_probe_gap: section.min_probe_gap,
        cooldown: section.cooldown,
        countdown: section.countdown,
        report_window: section.report_window,
        router_url: section.router_url.clone(),
        model: section.model.clone(),
        veto_limit: section.veto_limit,
        dry_run,
    };
    Ok(Settings {
        report: report_path(config, db, env)?,
        notice: (!section.notice.trim().is_empty())
            .then(|| config::expand_home(section.notice.trim(), env)),
        section,
        policy,
        api_key: api_key.filter(|k| !k.trim().is_empty()),
    })
}

/// The restart that was performed.
#[derive(Debug)]
struct RestartRecord {
    argv: Vec<String>,
    ok: bool,
    detail: String,
}

/// Everything one run decided and did.
#[derive(Debug, Default)]
struct Run {
    decisions: Vec<(i64, LoopDecision)>,
    notices: Vec<RecoveryNotice>,
    restart: Option<RestartRecord>,
    warnings: Vec<String>,
}

impl Run {
    /// A warning on the journal, also kept for `--json`.
    fn warn(&mut self, line: Line) {
        self.warnings.push(line.fields());
        line.emit();
    }

    fn last_name(&self) -> Option<LoopDecisionName> {
        self.decisions.last().map(|(_, d)| d.name)
    }

    /// The check (its last decision) and the restart it performed, as history for `/metrics`
    /// and the recovery page (`agentwatch_events`).
    fn events(&self, started: i64, unit: &str, duration_ms: Option<i64>) -> Vec<JobEvent> {
        let outcome = self.last_name().map_or("none", DecisionName::as_str);
        let mut events = vec![job_event(
            started,
            "recover",
            EventKind::Tick,
            "",
            outcome,
            duration_ms,
        )];
        if let Some(r) = &self.restart {
            let at = self.decisions.last().map_or(started, |(at, _)| *at);
            let result = if r.ok { "succeeded" } else { "failed" };
            events.push(job_event(
                at,
                "recover",
                EventKind::Restart,
                unit,
                result,
                None,
            ));
        }
        events
    }
}

/// What one run decided and did: its exit code (0, or 69 when the restart failed) and the run as
/// one JSON object (`--json`).
#[derive(Debug)]
pub struct Outcome {
    pub exit_code: u8,
    pub json: Value,
    /// When the policy next has something to decide by time alone (a cooldown's end, the moment
    /// a second probe can confirm); `agentwatch run` checks again then if sooner than its
    /// interval.
    pub next_wakeup: Option<i64>,
}

/// One check: read the report, decide, act, store.
pub fn run(args: &Options) -> Result<Outcome, Error> {
    if !args.once {
        return Err(Error::usage(
            "recover: one check is --once; without it, run the daemon (Options::daemon)",
        ));
    }
    let env: Env<'_> = &config::process_env;
    let loaded = config::load(args.config.as_deref(), &args.set, env)?;
    let settings = settings(&loaded.config, args.db.as_deref(), args.dry_run, env)?;
    let mut clock = match args.now {
        Some(t) => Clock::Fixed(t),
        None => Clock::System(None),
    };
    let started = clock.now();
    let timer = std::time::Instant::now();
    let db_path = store_path(&loaded.config, args.db.as_deref(), env)?;

    // A dry run neither takes the lock nor creates the database: it reads what is there.
    let (_lock, mut store) = if args.dry_run {
        (None, open_existing_read_only(&db_path)?)
    } else {
        let lock = take_lock(&db_path, "recover")?;
        (
            Some(lock),
            Some(Store::open(&db_path).map_err(Error::from)?),
        )
    };

    let mut run = Run::default();
    let mut state = load_policy_state(store.as_mut(), started, args.dry_run, &mut run)?;
    let event = read_report(&settings.report);
    let report = match &event {
        LoopEvent::Report(report) => Some(report.clone()),
        _ => None,
    };
    let now = clock.now();
    let mut performer = Performer {
        settings: &settings,
        report: report.as_ref(),
        store: store.as_mut(),
        clock: &mut clock,
        run: &mut run,
    };
    let driven = drive(&mut state, &settings.policy, &event, now, &mut performer)?;
    if let Some(line) = driven.warning("recover", clock.now()) {
        run.warn(line);
    }

    log_decision(&run, started, &settings, args.dry_run);
    let mut state_saved = false;
    if let Some(store) = store.as_mut().filter(|_| !args.dry_run) {
        persist(store, &state, clock.now())?;
        state_saved = true;
        record_events(
            store,
            &run.events(started, &settings.section.unit, elapsed_ms(timer)),
        );
    }
    let failed = run.last_name() == Some(LoopDecisionName::RestartFailed);
    let exit = if failed { code::UNAVAILABLE } else { 0 };
    Ok(Outcome {
        exit_code: exit,
        json: run_json(&run, started, &settings, args.dry_run, state_saved, exit),
        next_wakeup: state.next_wakeup(&settings.policy, clock.now()),
    })
}

/// Performs what the policy decides: asks the router, runs the countdown and the restart.
struct Performer<'a> {
    settings: &'a Settings,
    /// The report read, for the router's brief.
    report: Option<&'a LoopReport>,
    store: Option<&'a mut Store>,
    clock: &'a mut Clock,
    run: &'a mut Run,
}

impl Perform<LoopRecoveryState> for Performer<'_> {
    type Error = Error;

    fn decided(
        &mut self,
        now: i64,
        decision: &LoopDecision,
        _: Option<&LoopAction>,
    ) -> Result<(), Error> {
        self.run.decisions.push((now, decision.clone()));
        Ok(())
    }

    fn perform(
        &mut self,
        state: &LoopRecoveryState,
        action: &LoopAction,
        _: i64,
    ) -> Result<Option<(i64, LoopEvent)>, Error> {
        let event = match action {
            LoopAction::AskRouter { .. } => {
                let verdict = match self.report {
                    Some(report) => ask_router(self.settings, report),
                    None => RouterVerdict::Unreachable("no report to show the router".to_owned()),
                };
                LoopEvent::RouterVerdict(verdict)
            }
            LoopAction::Restart { dry_run: true, .. } => return Ok(None),
            LoopAction::Restart {
                execute_at, notice, ..
            } => {
                // Persist first: if this run dies during the countdown or the restart, the next
                // one sees a restart without an outcome and holds (cooldown) instead of acting again.
                if let Some(store) = self.store.as_deref_mut() {
                    persist(store, state, self.clock.now())
                        .map_err(|e| Error::StateNotSaved(Box::new(e)))?;
                }
                match perform_restart(self.settings, notice, *execute_at, self.clock, self.run) {
                    Performed::Ran(outcome) => LoopEvent::Outcome(outcome),
                    Performed::Cancelled(why) => LoopEvent::Cancelled(why),
                }
            }
        };
        Ok(Some((self.clock.now(), event)))
    }
}

/// The stored state, or a clean one. An unreadable state is set aside (not in a dry run) and
/// said so.
fn load_policy_state(
    store: Option<&mut Store>,
    now: i64,
    dry_run: bool,
    run: &mut Run,
) -> Result<LoopRecoveryState, Error> {
    let (state, aside) = load_or_clean(store, STATE_KEY, now, dry_run, parse_policy)?;
    if let Some(aside) = aside {
        run.warn(aside.line("recover", STATE_KEY, now));
    }
    Ok(state)
}

fn persist(store: &mut Store, state: &LoopRecoveryState, now: i64) -> Result<(), Error> {
    save_policy(store, STATE_KEY, state, now)
}

/// The loop report as the policy's event: a report, or why none could be read.
fn read_report(path: &Path) -> LoopEvent {
    let shown = path.display();
    let mut text = String::new();
    let read =
        std::fs::File::open(path).and_then(|f| f.take(MAX_REPORT_BYTES).read_to_string(&mut text));
    if let Err(e) = read {
        return LoopEvent::ReportUnreadable(format!("{shown}: {e}"));
    }
    match parse_loop_report(&text) {
        Ok(report) => LoopEvent::Report(report),
        Err(e) => LoopEvent::ReportUnreadable(format!("{shown}: {e}")),
    }
}

/// Asks the router whether the loop of `report` is stuck. The request is the policy's
/// `router_request_body` (system prompt, the report's brief, temperature 0) sent by
/// `agentwatch_llm::complete`: `POST {router_url}/chat/completions`, bearer key when set.
fn ask_router(settings: &Settings, report: &LoopReport) -> RouterVerdict {
    let router = match settings.policy.router() {
        Ok(Some(router)) => router,
        Ok(None) => return RouterVerdict::Unreachable("no router configured".to_owned()),
        Err(e) => return RouterVerdict::Unreachable(e.to_string()),
    };
    let endpoint = ChatEndpoint {
        base_url: router.url,
        dialect: Dialect::OpenAi,
        model: router.model,
        api_key: settings.api_key.clone(),
        timeout: crate::config::duration(settings.section.router_timeout_s),
    };
    match complete(
        &endpoint,
        ROUTER_SYSTEM_PROMPT,
        &router_brief(report).to_string(),
    ) {
        Ok(content) => RouterVerdict::from_content(&content),
        Err(e @ LlmError::Garbage { .. }) => RouterVerdict::Malformed(e.to_string()),
        Err(e) => RouterVerdict::Unreachable(e.to_string()),
    }
}

/// Countdown, wait, acting, restart, done|failed; or, when a signal stops the run during the
/// countdown, the notice `cancelled` (which the splash hides at once) and nothing restarted.
fn perform_restart(
    settings: &Settings,
    countdown: &RecoveryNotice,
    execute_at: i64,
    clock: &mut Clock,
    run: &mut Run,
) -> Performed {
    write_notice(settings, countdown, clock.now(), run);
    if clock.wait_until(execute_at, run) == Wake::Stop {
        let cancelled = countdown.advance(Phase::Cancelled, clock.now());
        write_notice(settings, &cancelled, clock.now(), run);
        return Performed::Cancelled("stopped by a signal during the countdown".to_owned());
    }
    let acting = countdown.advance(Phase::Acting, clock.now());
    write_notice(settings, &acting, clock.now(), run);
    let systemctl = Systemctl {
        command: settings.section.systemctl.clone(),
        user: settings.section.user,
        timeout: crate::config::duration(settings.section.restart_timeout_s),
    };
    let argv = systemctl
        .restart_argv(&settings.section.unit)
        .unwrap_or_default();
    let (ok, detail) = match systemctl.restart(&settings.section.unit) {
        Ok(done) => (
            true,
            format!("finished in {:.1} s", done.elapsed.as_secs_f64()),
        ),
        Err(e) => (false, e.to_string()),
    };
    let phase = if ok { Phase::Done } else { Phase::Failed };
    let finished = acting.advance(phase, clock.now());
    write_notice(settings, &finished, clock.now(), run);
    run.restart = Some(RestartRecord {
        argv,
        ok,
        detail: detail.clone(),
    });
    Performed::Ran(ActionOutcome {
        ok,
        detail: Some(detail),
    })
}

/// Writes the notice atomically (mode 0644). A notice that cannot be written is a warning: it is
/// for viewers, and the recovery goes on without it.
fn write_notice(settings: &Settings, notice: &RecoveryNotice, now: i64, run: &mut Run) {
    let text = format!("{}\n", notice.to_json());
    let written = match &settings.notice {
        Some(path) => write_atomic(path, text.as_bytes(), NOTICE_MODE),
        None => Ok(()),
    };
    if let Err(e) = written {
        run.warn(
            Line::warning("recover", now)
                .field("warning", "notice")
                .field("phase", phase_name(notice.phase))
                .field("problem", e)
                .field("action", "continue"),
        );
    }
    run.notices.push(notice.clone());
}

fn phase_name(phase: Phase) -> &'static str {
    match phase {
        Phase::Countdown => "countdown",
        Phase::Acting => "acting",
        Phase::Done => "done",
        Phase::Failed => "failed",
        Phase::Cancelled => "cancelled",
    }
}

/// The run's one decision line: the final decision, every step, and all reasons.
fn log_decision(run: &Run, started: i64, settings: &Settings, dry_run: bool) {
    let name = run.last_name().map_or("none", DecisionName::as_str);
    let steps: Vec<&str> = run.decisions.iter().map(|(_, d)| d.name_str()).collect();
    let mut reasons: Vec<String> = run
        .decisions
        .iter()
        .map(|(_, d)| d.reason.clone())
        .collect();
    if dry_run && run.last_name() == Some(LoopDecisionName::Restart) {
        reasons.push("dry run: no notice, no restart, no state written".to_owned());
    }
    // A failed restart is an error; a restart done or counting down a warning (a service
    // restarts); everything else is what a check decided.
    let priority = match run.last_name() {
        Some(LoopDecisionName::RestartFailed) => Priority::Err,
        Some(LoopDecisionName::Restart | LoopDecisionName::RestartSucceeded) if !dry_run => {
            Priority::Warning
        }
        Some(
            LoopDecisionName::ReportUnreadable
            | LoopDecisionName::RouterMisconfigured
            | LoopDecisionName::RouterBlocked
            | LoopDecisionName::UnexpectedRouterReply
            | LoopDecisionName::UnexpectedOutcome
            | LoopDecisionName::RestartCancelled,
        ) => Priority::Warning,
        _ => Priority::Info,
    };
    Line::new(priority, "recover", started)
        .field("decision", name)
        .field("steps", steps.join(","))
        .field("unit", &settings.section.unit)
        .field("dry_run", dry_run)
        .field("reason", reasons.join(" | "))
        .emit();
}

fn run_json(
    run: &Run,
    started: i64,
    settings: &Settings,
    dry_run: bool,
    state_saved: bool,
    exit: u8,
) -> Value {
    let decisions: Vec<Value> = run
        .decisions
        .iter()
        .map(|(now, d)| {
            let mut value = serde_json::to_value(d).unwrap_or(Value::Null);
            if let Value::Object(map) = &mut value {
                map.insert("now".to_owned(), json!(now));
            }
            value
        })
        .collect();
    json!({
        "now": started,
        "dry_run": dry_run,
        "unit": settings.section.unit,
        "report": settings.report.display().to_string(),
        "notice": settings.notice.as_ref().map(|n| n.display().to_string()),
        "decision": run.last_name().map(DecisionName::as_str),
        "decisions": decisions,
        "notices": run.notices,
        "restart": run.restart.as_ref().map(|r| json!({"argv": r.argv, "ok": r.ok, "detail": r.detail})),
        "warnings": run.warnings,
        "state_saved": state_saved,
        "exit_code": exit,
    })
}
