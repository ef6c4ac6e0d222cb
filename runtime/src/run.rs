//! `agentwatch run`: every listed job (`[run] jobs`) in one long-running process, each at its own
//! cadence, until SIGTERM or SIGINT.
//!
//! ```text
//! config, store, signals -> sd_notify READY=1 -> loop {
//!     wait (woken early by a signal) until the next due job or watchdog ping
//!     tick that job as its oneshot would (its run lock held for the tick only)
//!     one journal line (a tick the job could not start also a tick event), schedule it again
//! } -> STOPPING=1, exit 0
//! ```
//!
//! * **Cadence**: opencode every `run.watch_interval_s`, deck every `deck.interval_s`, recover
//!   every `run.recover_interval_s`, counted from the start of the job's last tick; a job may ask
//!   to be called sooner ([`TickOutcome::next_wakeup`]: its cores' `next_wakeup`, a cooldown's
//!   end for recover, the end of a restart-guard hold or a patrol's nudge time for deck, a
//!   rate-limited channel holding an outbox event free again for opencode). A tick that overruns its interval makes
//!   the job due as soon as it ends; jobs due together run in the order opencode, deck, recover.
//! * **Follow**: with `follow.enabled`, or when an agent is enabled (`[claude]`, `[codex]`,
//!   `[gemini]`: its transcript directory is watched from the moment it appears, so an agent
//!   installed after `run` started is followed live), the sessions job leaves the schedule: its
//!   follower ([`crate::jobs::sessions::follow`]) runs on a thread of its own and ticks as events
//!   come (a server's stream with `follow.enabled`, a transcript written), each tick reported as
//!   a scheduled one is (`next=event`); it stops with the loop, and the stop line's `ticks`
//!   counts its ticks with the loop's.
//! * **Stopping**: a signal wakes the wait at once. A tick that is running is finished (each job
//!   stores its state at the end of its tick, and recover saves its decision before its
//!   countdown), then the process says `STOPPING=1` and exits 0. A second signal exits at once
//!   (130 for SIGINT, 143 for SIGTERM): every store write is one SQLite transaction, so nothing is
//!   half-written.
//! * **Locks**: each tick takes and releases its job's run lock, so a oneshot (`agentwatch
//!   opencode --once`) can run between two ticks; a tick that finds the lock held is logged as
//!   `result=locked` and retried at the next cadence.
//! * **Store**: each job records its own tick event (`agentwatch_events`); a tick that could not
//!   run (`locked`, `error`) is recorded here, so `/metrics` sees it too.
//! * **serve**: with `[serve] enabled = true` the web server runs on its own threads beside the
//!   jobs ([`crate::serve::start_in_background`]) and stops with them.
//! * **Errors**: a tick that fails (a bad config edited in meanwhile, a store error) is logged and
//!   retried; only a bad configuration at start stops the process (78).
//! * **Journal**: one `run=ISO job=NAME result=R exit=N took_ms=T next=ISO` line per tick, after the
//!   job's own lines; a `state=start` and a `state=stop` line.
//! * **systemd**: `READY=1` once started, `WATCHDOG=1` every half `WATCHDOG_USEC`, `STOPPING=1`
//!   (`deploy/agentwatch.service`, `Type=notify`).
//!
//! The loop ([`drive_jobs`]) takes its [`Clock`], its [`Jobs`] and its [`Observer`] as inputs, so
//! tests run it on a simulated clock without sleeping.

use crate::clock::{iso8601, now_or_clock};
use crate::config::{self, Config, Env, JobName};
use crate::error::{Error, code};
use crate::jobs;
use crate::journal::{Line, Priority};
pub use crate::run_options::Options;
use crate::stored::{job_event, record_events, store_path};
pub use crate::wake::{Clock, SignalScope, SystemClock, Wake};
use agentwatch_store::{EventKind, LockError, Store};
use agentwatch_systemd::Notifier;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

/// The longest interval the loop schedules (one day); longer values are clamped.
const MAX_INTERVAL_S: i64 = 86_400;

// ------------------------------------------------------------------------------------------------
// The schedule

/// When each job is next due.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schedule {
    /// `(job, interval_s, due)`, in tie order.
    entries: Vec<(JobName, i64, i64)>,
}

impl Schedule {
    /// Every job due at `start`, in the order given; intervals clamped to [1 s, 1 day].
    pub fn new(jobs: &[(JobName, u64)], start: i64) -> Self {
        let entries = jobs
            .iter()
            .map(|&(job, every)| {
                let every = i64::try_from(every).unwrap_or(MAX_INTERVAL_S);
                (job, every.clamp(1, MAX_INTERVAL_S), start)
            })
            .collect();
        Self { entries }
    }

    /// The job due first (the earlier-listed one on a tie), and when.
    pub fn next(&self) -> Option<(JobName, i64)> {
        self.entries
            .iter()
            .min_by_key(|(_, _, due)| *due)
            .map(|&(job, _, due)| (job, due))
    }

    /// `job` ticked from `started` to `finished`: due again one interval after it started, or
    /// at the wakeup it asked for if sooner, and never before it finished.
    pub fn done(&mut self, job: JobName, started: i64, finished: i64, wakeup: Option<i64>) {
        if let Some(entry) = self.entries.iter_mut().find(|(j, _, _)| *j == job) {
            let by_interval = started.saturating_add(entry.1);
            let due = wakeup.map_or(by_interval, |w| w.min(by_interval));
            entry.2 = due.max(finished);
        }
    }

    /// The jobs, in tie order.
    pub fn jobs(&self) -> impl Iterator<Item = (JobName, i64)> + '_ {
        self.entries.iter().map(|&(job, every, _)| (job, every))
    }
}

// ------------------------------------------------------------------------------------------------
// Ticks

/// What one tick of a job came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TickOutcome {
    /// The job's outcome (`ok`, `flagged`, `no_source`, a recover decision, ...), or
    /// `locked`, `disabled`, `error`.
    pub result: String,
    /// The exit code the oneshot would have had.
    pub exit_code: u8,
    /// When the job wants its next tick, if sooner than its interval.
    pub next_wakeup: Option<i64>,
    /// Why it failed, for the journal.
    pub error: Option<String>,
}

impl TickOutcome {
    fn new(result: &str, exit_code: u8) -> Self {
        Self {
            result: result.to_owned(),
            exit_code,
            next_wakeup: None,
            error: None,
        }
    }

    fn failed(err: &Error) -> Self {
        let result = match err {
            Error::Lock {
                source: LockError::Held(_),
                ..
            } => "locked",
            _ => "error",
        };
        Self {
            error: Some(err.to_string()),
            ..Self::new(result, err.exit_code())
        }
    }
}

/// Runs one tick of a job.
pub trait Jobs {
    fn tick(&mut self, job: JobName, now: i64) -> TickOutcome;
}

/// One finished tick, as the loop reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TickRecord {
    pub job: JobName,
    pub started: i64,
    pub took: Duration,
    pub outcome: TickOutcome,
    /// When the job is next due; `None` for the follower, which ticks on its events.
    pub next: Option<i64>,
}

/// What the loop tells the world: each tick, and that it is alive.
pub trait Observer {
    fn tick(&mut self, record: &TickRecord);
    /// Time for a watchdog ping.
    fn alive(&mut self, now: i64);
}

/// Runs `schedule`'s jobs until the clock says stop. `ping_every_s`: seconds between
/// [`Observer::alive`] calls (the systemd watchdog), `None` for none. Returns the ticks run.
pub fn drive_jobs(
    schedule: &mut Schedule,
    clock: &mut dyn Clock,
    jobs: &mut dyn Jobs,
    observer: &mut dyn Observer,
    ping_every_s: Option<i64>,
) -> u64 {
    let ping_every = ping_every_s.map(|s| s.max(1));
    let mut next_ping = ping_every.map(|every| clock.now().saturating_add(every));
    let mut ticks = 0;
    loop {
        let next = schedule.next();
        // Nothing scheduled (the follower does opencode's ticks): wait for the stop.
        let far = clock.now().saturating_add(MAX_INTERVAL_S);
        let at = [next.map(|(_, due)| due), next_ping]
            .into_iter()
            .flatten()
            .min()
            .unwrap_or(far);
        if clock.wait_until(at) == Wake::Stop {
            break;
        }
        let now = clock.now();
        if let (Some(ping), Some(every)) = (next_ping, ping_every)
            && now >= ping
        {
            observer.alive(now);
            next_ping = Some(now.saturating_add(every));
        }
        let Some((job, _)) = next.filter(|&(_, due)| now >= due) else {
            continue;
        };
        let started = Instant::now();
        let outcome = jobs.tick(job, now);
        let finished = clock.now();
        schedule.done(job, now, finished, outcome.next_wakeup);
        let next = schedule
            .entries
            .iter()
            .find(|(j, _, _)| *j == job)
            .map(|e| e.2);
        observer.tick(&TickRecord {
            job,
            started: now,
            took: started.elapsed(),
            outcome,
            next,
        });
        ticks += 1;
    }
    ticks
}

/// The real jobs, each run as its oneshot would be.
#[derive(Debug)]
struct JobRunner<'a> {
    options: &'a Options,
    /// What the opencode job's last tick said it skipped (said again only when it changes).
    said: jobs::sessions::SaidSkipped,
}

impl Jobs for JobRunner<'_> {
    fn tick(&mut self, job: JobName, now: i64) -> TickOutcome {
        let o = self.options;
        // The switch is read at every tick: a job turned off (or on) in the config or its
        // overlay is off (or on) from its next tick, without a restart.
        match config::load(o.config.as_deref(), &o.set, &config::process_env) {
            Ok(loaded) if job.disabled_because(&loaded.config).is_some() => {
                return TickOutcome::new("disabled", code::OK);
            }
            Ok(_) => {}
            Err(err) => return TickOutcome::failed(&err),
        }
        let result = match job {
            JobName::Watch => {
                let result = jobs::sessions::run(&jobs::sessions::Options {
                    now: Some(now),
                    said: Some(self.said.clone()),
                    ..opencode_options(o)
                });
                Ok(opencode_outcome(result.as_ref().map(Option::as_ref)))
            }
            JobName::Deck => {
                let mut wakeup = None;
                jobs::deck::run(
                    &jobs::deck::Options {
                        once: true,
                        dry_run: o.dry_run,
                        config: o.config.clone(),
                        db: o.db.clone(),
                        set: o.set.clone(),
                        now: Some(now),
                        ..Default::default()
                    },
                    &mut |report| wakeup = report.next_wakeup(),
                )
                .map(|exit| TickOutcome {
                    next_wakeup: wakeup,
                    ..match exit {
                        code::OK => TickOutcome::new("ok", exit),
                        _ => TickOutcome::new("list_failed", exit),
                    }
                })
            }
            // No `now`: a fixed clock would simulate the countdown instead of waiting it out.
            JobName::Recover => jobs::recover::run(&jobs::recover::Options {
                once: true,
                dry_run: o.dry_run,
                config: o.config.clone(),
                db: o.db.clone(),
                set: o.set.clone(),
                ..Default::default()
            })
            .map(|outcome| {
                let decision = outcome.json["decision"].as_str().unwrap_or("none");
                TickOutcome {
                    next_wakeup: outcome.next_wakeup,
                    ..TickOutcome::new(decision, outcome.exit_code)
                }
            }),
        };
        result.unwrap_or_else(|err| TickOutcome::failed(&err))
    }
}

/// The opencode job's options inside `run` (its tick and its follower).
fn opencode_options(o: &Options) -> jobs::sessions::Options {
    jobs::sessions::Options {
        once: true,
        dry_run: o.dry_run,
        config: o.config.clone(),
        db: o.db.clone(),
        set: o.set.clone(),
        ..Default::default()
    }
}

/// What an opencode tick came to, for the loop.
fn opencode_outcome(result: Result<Option<&jobs::sessions::TickReport>, &Error>) -> TickOutcome {
    match result {
        Ok(Some(report)) => TickOutcome {
            next_wakeup: report.next_wakeup,
            ..TickOutcome::new(report.outcome, code::OK)
        },
        Ok(None) => TickOutcome::new("disabled", code::OK),
        Err(err) => TickOutcome::failed(err),
    }
}

/// Whether a source of the sessions job has a directory to watch: an enabled agent's
/// transcripts, there yet or not (an agent installed after `run` started is followed live).
fn watches_directories(config: &config::Config, options: &Options, env: Env<'_>) -> bool {
    use jobs::sessions::sources::{WakeOn, wakers};
    wakers(config, &opencode_options(options), env)
        .iter()
        .any(|(_, wake)| matches!(wake, WakeOn::Directory(_)))
}

/// With `follow.enabled`, opencode's ticks come from its follower on a thread of their own
/// (the other jobs keep their schedule): each is reported as a scheduled tick is. It stops,
/// after the tick it is running, once `stop` is set; the thread returns the ticks it ran.
fn start_follower(
    options: &Options,
    observer: Arc<Mutex<Reporter>>,
    stop: Arc<AtomicBool>,
) -> Result<std::thread::JoinHandle<u64>, Error> {
    let args = opencode_options(options);
    std::thread::Builder::new()
        .name("agentwatch-follow".to_owned())
        .spawn(move || {
            let followed = jobs::sessions::follow::follow_on_system_clock(&args, &stop, |tick| {
                let record = TickRecord {
                    job: JobName::Watch,
                    started: tick.started,
                    took: tick.took,
                    outcome: opencode_outcome(tick.result),
                    next: None,
                };
                lock(&observer).tick(&record);
            });
            match followed {
                Ok(report) => report.ticks,
                Err(e) => {
                    Line::err("run", now_or_clock(None))
                        .field("job", JobName::Watch.as_str())
                        .field("result", "error")
                        .field("error", e.to_string())
                        .emit();
                    0
                }
            }
        })
        .map_err(|e| Error::io(format!("run: cannot start the follower: {e}")))
}

/// The reporter shared by the loop and the follower's thread.
struct Shared(Arc<Mutex<Reporter>>);

impl Observer for Shared {
    fn tick(&mut self, record: &TickRecord) {
        lock(&self.0).tick(record);
    }

    fn alive(&mut self, now: i64) {
        lock(&self.0).alive(now);
    }
}

/// The reporter, even when a thread panicked holding it (it holds no invariant a panic breaks).
fn lock(reporter: &Mutex<Reporter>) -> MutexGuard<'_, Reporter> {
    reporter.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The journal, the tick events of ticks that could not run, and systemd's watchdog.
#[derive(Debug)]
struct Reporter {
    store: Option<Store>,
    notifier: Notifier,
    /// Jobs whose last tick was `disabled`: a disabled job's line is written when it becomes
    /// disabled, not at every tick it stays so.
    disabled: std::collections::BTreeSet<JobName>,
}

impl Observer for Reporter {
    fn tick(&mut self, r: &TickRecord) {
        let took_ms = i64::try_from(r.took.as_millis()).unwrap_or(i64::MAX);
        let still_disabled = if r.outcome.result == "disabled" {
            !self.disabled.insert(r.job)
        } else {
            self.disabled.remove(&r.job);
            false
        };
        if !still_disabled {
            tick_line(r, took_ms).emit();
        }
        // A job that ran records its own tick; one that could not start cannot.
        if let Some(store) = self.store.as_mut().filter(|_| r.outcome.error.is_some()) {
            let event = job_event(
                r.started,
                r.job.as_str(),
                EventKind::Tick,
                "",
                &r.outcome.result,
                Some(took_ms),
            );
            record_events(store, &[event]);
        }
        let _ = self.notifier.status(&format!(
            "last tick: {} {} at {}",
            r.job.as_str(),
            r.outcome.result,
            iso8601(r.started)
        ));
    }

    fn alive(&mut self, now: i64) {
        if let Err(e) = self.notifier.watchdog() {
            Line::warning("run", now)
                .field("warning", "sd_notify")
                .field("problem", e)
                .emit();
        }
    }
}

/// The journal line of one tick: info, a warning when the job exited non-zero or was locked out,
/// an error when it failed.
pub fn tick_line(r: &TickRecord, took_ms: i64) -> Line {
    let priority = match (&r.outcome.error, r.outcome.exit_code) {
        (Some(_), code::TEMPFAIL) => Priority::Warning,
        (Some(_), _) => Priority::Err,
        (None, code::OK) => Priority::Info,
        (None, _) => Priority::Warning,
    };
    Line::new(priority, "run", r.started)
        .field("job", r.job.as_str())
        .field("result", &r.outcome.result)
        .field("exit", r.outcome.exit_code)
        .field("took_ms", took_ms)
        .field("next", r.next.map_or_else(|| "event".to_owned(), iso8601))
        .field_opt("error", r.outcome.error.as_ref())
}

/// Each listed job with its interval. A job disabled now (`watchdog.enabled = false`, no
/// `recover.unit`) is scheduled all the same: each tick asks again
/// ([`JobName::disabled_because`]), so switching it on takes effect at its next tick.
pub fn cadences(config: &Config) -> Vec<(JobName, u64)> {
    JobName::ALL
        .into_iter()
        .filter(|job| config.run.jobs.contains(job))
        .map(|job| (job, job.interval_s(config)))
        .collect()
}

/// A job command without `--once` whose job is switched off has nothing to keep running: a
/// configuration error saying why.
fn refuse_a_disabled_job(options: &Options, config: &Config) -> Result<(), Error> {
    let Some(job) = options
        .only
        .filter(|job| job.disabled_because(config).is_some())
    else {
        return Ok(());
    };
    Err(Error::config(match job {
        JobName::Recover => "recover.unit: not set; nothing to restart (see `agentwatch config`)",
        JobName::Watch => "watchdog.enabled is false: the opencode job has nothing to do",
        JobName::Deck => "the deck job is not enabled",
    }))
}

/// The service manager's notifier (none outside systemd); one that cannot be set up is
/// warned about and ignored, `run` works without it.
fn notifier_or_none(env: Env<'_>, now: i64) -> Notifier {
    Notifier::from_env(env, std::process::id()).unwrap_or_else(|e| {
        Line::warning("run", now)
            .field("warning", "sd_notify")
            .field("problem", e)
            .field("action", "ignore")
            .emit();
        Notifier::default()
    })
}

/// `run`'s first journal line: the jobs and their cadences, the store, the watchdog ping.
fn start_line(
    start: i64,
    listed: &[String],
    db: &std::path::Path,
    dry_run: bool,
    notifier: &Notifier,
) {
    Line::info("run", start)
        .field("state", "start")
        .field("jobs", listed.join(","))
        .field("db", db.display())
        .field("dry_run", dry_run)
        .field(
            "watchdog_s",
            notifier
                .watchdog_interval()
                .map_or("none".to_owned(), |d| d.as_secs().to_string()),
        )
        .emit();
}

/// `agentwatch run`: runs until SIGTERM or SIGINT, then exits 0.
pub fn run(options: &Options) -> Result<u8, Error> {
    let env: Env<'_> = &config::process_env;
    let mut loaded = config::load(options.config.as_deref(), &options.set, env)?;
    let db = store_path(&loaded.config, options.db.as_deref(), env)?;
    if let Some(job) = options.only {
        loaded.config.run.jobs = vec![job];
        loaded.config.serve.enabled = false;
    }
    let mut cadences = cadences(&loaded.config);
    refuse_a_disabled_job(options, &loaded.config)?;
    // The follower does the sessions job's ticks (it leaves the schedule): with
    // `follow.enabled`, or when a source's directory can wake it (an agent's transcripts).
    let live = loaded.config.follow.enabled || watches_directories(&loaded.config, options, env);
    let follow = live && cadences.iter().any(|(j, _)| *j == JobName::Watch);
    let mut clock = SystemClock::with_signals()?;
    let notifier = notifier_or_none(env, clock.now());
    let store = if options.dry_run {
        None
    } else {
        Some(Store::open(&db).map_err(Error::from)?)
    };
    // Dropped when the jobs stop, which stops the server.
    let serve = crate::serve::start_in_background(&loaded, &db)?;
    let start = clock.now();
    let listed: Vec<String> = cadences
        .iter()
        .map(|&(job, every)| match job {
            JobName::Watch if follow => format!("{}:follow", job.as_str()),
            _ => format!("{}:{every}s", job.as_str()),
        })
        .collect();
    cadences.retain(|(job, _)| !follow || *job != JobName::Watch);
    start_line(start, &listed, &db, options.dry_run, &notifier);
    let ping_every = notifier
        .watchdog_interval()
        .map(|d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
    let reporter = Arc::new(Mutex::new(Reporter {
        store,
        notifier,
        disabled: std::collections::BTreeSet::new(),
    }));
    let mut shared = Shared(Arc::clone(&reporter));
    let _ = lock(&reporter)
        .notifier
        .ready(&format!("running {}", listed.join(", ")));
    let stop_follower = Arc::new(AtomicBool::new(false));
    let follower = if follow {
        Some(start_follower(
            options,
            Arc::clone(&reporter),
            Arc::clone(&stop_follower),
        )?)
    } else {
        None
    };
    let mut schedule = Schedule::new(&cadences, start);
    let mut runner = JobRunner {
        options,
        said: jobs::sessions::SaidSkipped::default(),
    };
    let ticks = drive_jobs(
        &mut schedule,
        &mut clock,
        &mut runner,
        &mut shared,
        ping_every,
    );
    let followed = stop_following(&stop_follower, follower, &reporter);
    drop(serve);
    Line::info("run", clock.now())
        .field("state", "stop")
        .field("ticks", ticks + followed)
        .field("reason", "signal")
        .emit();
    Ok(code::OK)
}

/// The follower finishes the tick it is running, as the loop did: the ticks it ran (they are
/// `run`'s too); the service manager is told `run` stops.
fn stop_following(
    stop: &AtomicBool,
    follower: Option<std::thread::JoinHandle<u64>>,
    reporter: &Mutex<Reporter>,
) -> u64 {
    stop.store(true, Ordering::SeqCst);
    let followed = follower.map_or(0, |f| f.join().unwrap_or(0));
    let _ = lock(reporter).notifier.stopping("stopping");
    followed
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::VecDeque;
    use std::sync::mpsc::channel;

    /// A clock that jumps to whatever is waited for, and stops at `stop_at`.
    struct Simulated {
        now: i64,
        stop_at: i64,
        stop_now: bool,
    }

    impl Clock for Simulated {
        fn now(&self) -> i64 {
            self.now
        }
        fn wait_until(&mut self, at: i64) -> Wake {
            if self.stop_now || at >= self.stop_at {
                return Wake::Stop;
            }
            self.now = self.now.max(at);
            Wake::Due
        }
    }

    #[derive(Default)]
    struct Seen {
        ticks: Vec<(JobName, i64, i64)>,
        pings: Vec<i64>,
    }

    impl Observer for Seen {
        fn tick(&mut self, r: &TickRecord) {
            self.ticks
                .push((r.job, r.started, r.next.unwrap_or_default()));
        }
        fn alive(&mut self, now: i64) {
            self.pings.push(now);
        }
    }

    /// Jobs that answer from a queue of outcomes and can take simulated time.
    struct Fake {
        took: i64,
        wakeups: VecDeque<Option<i64>>,
        /// Ask to stop during the n-th tick.
        stop_during: Option<usize>,
        calls: usize,
    }

    /// The clock and the jobs share the simulated time through this.
    struct World {
        clock: Simulated,
        jobs: Fake,
    }

    impl Clock for World {
        fn now(&self) -> i64 {
            self.clock.now()
        }
        fn wait_until(&mut self, at: i64) -> Wake {
            self.clock.wait_until(at)
        }
    }

    fn run_world(world: &mut World, schedule: &mut Schedule, ping: Option<i64>) -> Seen {
        struct JobsOf<'w>(&'w std::cell::RefCell<&'w mut World>);
        impl Jobs for JobsOf<'_> {
            fn tick(&mut self, _job: JobName, _now: i64) -> TickOutcome {
                let mut w = self.0.borrow_mut();
                w.jobs.calls += 1;
                if w.jobs.stop_during == Some(w.jobs.calls) {
                    w.clock.stop_now = true;
                }
                w.clock.now += w.jobs.took;
                let wakeup = w.jobs.wakeups.pop_front().flatten();
                TickOutcome {
                    next_wakeup: wakeup,
                    ..TickOutcome::new("ok", 0)
                }
            }
        }
        struct ClockOf<'w>(&'w std::cell::RefCell<&'w mut World>);
        impl Clock for ClockOf<'_> {
            fn now(&self) -> i64 {
                self.0.borrow().now()
            }
            fn wait_until(&mut self, at: i64) -> Wake {
                self.0.borrow_mut().wait_until(at)
            }
        }
        let cell = std::cell::RefCell::new(world);
        let mut seen = Seen::default();
        drive_jobs(
            schedule,
            &mut ClockOf(&cell),
            &mut JobsOf(&cell),
            &mut seen,
            ping,
        );
        seen
    }

    fn world(stop_at: i64, took: i64) -> World {
        World {
            clock: Simulated {
                now: 1000,
                stop_at,
                stop_now: false,
            },
            jobs: Fake {
                took,
                wakeups: VecDeque::new(),
                stop_during: None,
                calls: 0,
            },
        }
    }

    #[test]
    fn each_job_runs_at_its_own_cadence() {
        let mut w = world(1000 + 125, 0);
        let mut s = Schedule::new(
            &[
                (JobName::Watch, 60),
                (JobName::Deck, 15),
                (JobName::Recover, 60),
            ],
            1000,
        );
        let seen = run_world(&mut w, &mut s, None);
        let at = |job| -> Vec<i64> {
            seen.ticks
                .iter()
                .filter(|t| t.0 == job)
                .map(|t| t.1 - 1000)
                .collect()
        };
        assert_eq!(at(JobName::Watch), [0, 60, 120]);
        assert_eq!(at(JobName::Deck), [0, 15, 30, 45, 60, 75, 90, 105, 120]);
        assert_eq!(at(JobName::Recover), [0, 60, 120]);
        // Ties run in the listed order.
        let first: Vec<JobName> = seen.ticks.iter().take(3).map(|t| t.0).collect();
        assert_eq!(first, [JobName::Watch, JobName::Deck, JobName::Recover]);
    }

    #[test]
    fn a_slow_tick_delays_only_itself_and_a_wakeup_comes_sooner() {
        // Each tick takes 20 s of the clock: the 15 s job is due again as soon as it ends.
        let mut w = world(1000 + 50, 20);
        let mut s = Schedule::new(&[(JobName::Deck, 15)], 1000);
        let seen = run_world(&mut w, &mut s, None);
        let starts: Vec<i64> = seen.ticks.iter().map(|t| t.1 - 1000).collect();
        assert_eq!(starts, [0, 20, 40]);

        let mut w = world(1000 + 100, 0);
        w.jobs.wakeups = VecDeque::from([Some(1005), Some(5000), None]);
        let mut s = Schedule::new(&[(JobName::Recover, 60)], 1000);
        let seen = run_world(&mut w, &mut s, None);
        let starts: Vec<i64> = seen.ticks.iter().map(|t| t.1 - 1000).collect();
        assert_eq!(
            starts,
            [0, 5, 65],
            "a wakeup later than the interval is ignored"
        );
        assert_eq!(seen.ticks[0].2, 1005, "next= says when it is due");
    }

    #[test]
    fn a_stop_during_a_tick_lets_it_finish_and_runs_nothing_more() {
        let mut w = world(i64::MAX, 3);
        w.jobs.stop_during = Some(2);
        let mut s = Schedule::new(&[(JobName::Watch, 60), (JobName::Deck, 60)], 1000);
        let seen = run_world(&mut w, &mut s, None);
        assert_eq!(
            seen.ticks.len(),
            2,
            "the second tick is finished and reported"
        );
        assert_eq!(w.jobs.calls, 2);
    }

    #[test]
    fn the_watchdog_is_pinged_between_ticks() {
        let mut w = world(1000 + 100, 0);
        let mut s = Schedule::new(&[(JobName::Watch, 60)], 1000);
        let seen = run_world(&mut w, &mut s, Some(30));
        let pings: Vec<i64> = seen.pings.iter().map(|p| p - 1000).collect();
        assert_eq!(pings, [30, 60, 90]);
        assert_eq!(seen.ticks.len(), 2);
    }

    #[test]
    fn with_nothing_scheduled_the_loop_pings_until_the_stop() {
        // `follow.enabled` with opencode the only job: the follower ticks, the loop only waits.
        let mut w = world(1000 + 100, 0);
        let mut s = Schedule::new(&[], 1000);
        let seen = run_world(&mut w, &mut s, Some(30));
        let pings: Vec<i64> = seen.pings.iter().map(|p| p - 1000).collect();
        assert_eq!(pings, [30, 60, 90]);
        assert!(seen.ticks.is_empty());
        let mut s = Schedule::new(&[], 1000);
        assert!(run_world(&mut w, &mut s, None).pings.is_empty());
    }

    #[test]
    fn intervals_are_clamped() {
        let s = Schedule::new(&[(JobName::Deck, 0), (JobName::Recover, u64::MAX)], 0);
        let every: Vec<i64> = s.jobs().map(|(_, e)| e).collect();
        assert_eq!(every, [1, MAX_INTERVAL_S]);
    }

    #[test]
    fn the_system_clock_wakes_on_a_stop() {
        let (tx, rx) = channel();
        let mut clock = SystemClock::new(rx);
        tx.send(15).unwrap();
        let far = clock.now() + 3600;
        assert_eq!(clock.wait_until(far), Wake::Stop);
        let past = clock.now() - 1;
        assert_eq!(clock.wait_until(past), Wake::Due);
    }

    #[test]
    fn cadences_follow_the_config() {
        let mut c = Config::default();
        c.recover.unit = "agent.service".to_owned();
        assert_eq!(
            cadences(&c),
            [
                (JobName::Watch, 300),
                (JobName::Deck, 15),
                (JobName::Recover, 60)
            ]
        );
        // A job switched off stays scheduled: its ticks ask again (the switch works live).
        c.watchdog.enabled = false;
        c.run.jobs = vec![JobName::Recover, JobName::Watch];
        assert_eq!(
            cadences(&c),
            [(JobName::Watch, 300), (JobName::Recover, 60)]
        );
        assert_eq!(
            JobName::Watch.disabled_because(&c),
            Some("watchdog.enabled = false")
        );
        c.recover.unit.clear();
        assert_eq!(
            JobName::Recover.disabled_because(&c),
            Some("recover.unit is not set")
        );
        assert_eq!(JobName::Deck.disabled_because(&c), None);
    }

    #[test]
    fn a_tick_line_escapes_its_error() {
        let r = TickRecord {
            job: JobName::Deck,
            started: 0,
            took: Duration::from_millis(5),
            outcome: TickOutcome {
                error: Some("bad\nrun=forged".to_owned()),
                ..TickOutcome::new("error", 74)
            },
            next: Some(15),
        };
        let line = tick_line(&r, 5);
        assert_eq!(line.priority(), crate::journal::Priority::Err);
        assert_eq!(
            crate::journal::capture(false, || line.emit()),
            "run=1970-01-01T00:00:00+00:00 job=deck result=error exit=74 took_ms=5 next=1970-01-01T00:00:15+00:00 error=\"bad\\nrun=forged\"\n"
        );
    }
}
