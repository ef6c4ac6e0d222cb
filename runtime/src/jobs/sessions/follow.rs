//! `agentwatch watch --follow`: the servers' event streams, judged as they happen.
//!
//! ```text
//! one thread per server: GET /global/event -> events -> channel   (dropped: reconnect with
//!                                                                    backoff 1 s, 2 s, … max)
//! loop {
//!   a tick (the one of `--once`) when something changed and `follow.min_interval_s` passed
//!   since the last one: the sessions the events named are read after their cursors, and only
//!   trees with a session read fresh are judged for the alert lifecycle
//!   wait for the next event
//! }
//! ```
//!
//! * **Events**: a tool part that reached `completed` or `error`, a message that settled, a
//!   session created mark the session changed; `message.removed` marks it to be read from the
//!   start; `session.deleted` makes the next tick list the server (its root resolves as gone).
//!   The calls reach the detectors through the cursor read of the session the event names: the
//!   one path that counts each call once, whatever the stream dropped or repeated.
//! * **Resync**: the first tick, and the first after a stream (re)opens, reads its server as a
//!   tick does (every changed session after its cursor), so nothing said while the stream was
//!   down is missed. A frame that could not be read also asks for one.
//! * **Polls**: every `run.watch_interval_s` a tick reads every source, the streamed servers
//!   through their focus and the others (a server that answers `/global/event` with 404 or 405,
//!   `opencode.db`) as `--once` does, so nothing without a stream goes unread and the job's last
//!   tick is never older than its interval.
//! * **Pace**: ticks are at least `follow.min_interval_s` apart on the job's clock, so a burst of
//!   events is one judgement: escalation still counts judgements, not events. A tick that asks
//!   to be called again (`TickReport::next_wakeup`: an event held by a channel's rate limit) is
//!   run then even without an event.

use super::sources::{self, WakeOn};
use super::tracked::Focus;
use super::{Options, TickReport};
use crate::config::{self, Config, Env};
use crate::error::Error;
use crate::journal::Line;
use crate::wake::Clock;
use agentwatch_opencode::http::{OpencodeServer, SourceError};
use agentwatch_opencode::sse::Event;
use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{RecvTimeoutError, Sender, channel};
use std::time::Duration;

/// Milliseconds between two ticks at least, while no loop is alerted: a change is judged as it
/// comes, so the tick that flags a loop never waits for the pace.
pub const QUICK_MS: i64 = 200;

/// When the next tick may run. Changes are judged as they come ([`QUICK_MS`] apart at least);
/// after a tick that found a loop alerted (a trigger, or a tree flagged again), the next ones
/// are at least `min_interval` apart, so the loop's further calls coalesce into one judgement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pacer {
    min_interval_ms: i64,
    last_ms: Option<i64>,
    /// The last tick found a loop alerted.
    hold: bool,
}

impl Pacer {
    #[must_use]
    pub fn new(min_interval_s: u64) -> Self {
        Self {
            min_interval_ms: i64::try_from(min_interval_s)
                .unwrap_or(i64::MAX)
                .saturating_mul(1000),
            last_ms: None,
            hold: false,
        }
    }

    /// When the next tick may run (unix ms), `None`: now.
    #[must_use]
    pub fn next_ms(&self) -> Option<i64> {
        let gap = if self.hold {
            self.min_interval_ms
        } else {
            QUICK_MS.min(self.min_interval_ms)
        };
        self.last_ms.map(|last| last.saturating_add(gap))
    }

    /// Whether a tick may run at `now_ms` (unix milliseconds).
    #[must_use]
    pub fn due(&self, now_ms: i64) -> bool {
        self.next_ms().is_none_or(|at| now_ms >= at)
    }

    /// A tick ran at `now_ms`; `alerted`: it found a loop alerted.
    pub fn ran(&mut self, now_ms: i64, alerted: bool) {
        self.last_ms = Some(now_ms);
        self.hold = alerted;
    }
}

/// What the stream threads tell the loop.
#[derive(Debug)]
enum Note {
    Opened(String),
    Event(String, Event),
    /// A frame nothing could be read from: the server must be read again.
    Skipped(String, String),
    Dropped(String, String),
    NoStream(String, String),
    /// A watched directory's files changed (or its watch failed: read it anyway).
    Files(String, Result<(), String>),
}

/// What the loop must do at its next tick, from the notes so far.
#[derive(Debug, Default)]
pub struct Pending {
    /// Servers to read as a tick does (their stream just opened, or missed something).
    pub resync: HashSet<String>,
    /// What the open streams said changed.
    pub focus: Focus,
    /// Sources whose watched directory changed since the last tick.
    pub files: HashSet<String>,
    /// Events taken, and of those the ones that changed something.
    pub events: u64,
    pub changes: u64,
}

impl Pending {
    /// Take one event of `server`'s stream.
    pub fn event(&mut self, server: &str, event: &Event) {
        self.events += 1;
        let changed = match event {
            Event::ToolSettled { session_id, .. }
            | Event::MessageSettled { session_id, .. }
            | Event::SessionCreated { session_id, .. }
            | Event::SessionDeleted { session_id } => {
                self.focus.changed.insert(session_id.clone());
                true
            }
            Event::MessageRemoved { session_id, .. } => {
                self.focus.reset.insert(session_id.clone());
                true
            }
            Event::Connected | Event::Heartbeat | Event::Other { .. } => false,
        };
        if changed {
            self.changes += 1;
            self.focus.servers.insert(server.to_owned());
        }
    }

    /// Whether a tick has something to do.
    #[must_use]
    pub fn wants_tick(&self) -> bool {
        !self.resync.is_empty() || !self.focus.is_empty() || !self.files.is_empty()
    }

    /// The focus of the next tick over the servers whose streams are open: those to resync are
    /// read whole. Clears what it hands out.
    pub fn take(&mut self, streaming: &HashSet<String>) -> Focus {
        let mut focus = std::mem::take(&mut self.focus);
        focus.servers = streaming
            .iter()
            .filter(|s| !self.resync.contains(*s))
            .cloned()
            .collect();
        self.resync.clear();
        self.files.clear();
        focus
    }
}

/// What a follower did, for its caller.
#[derive(Debug, Default)]
pub struct FollowReport {
    pub ticks: u64,
    pub events: u64,
    pub reconnects: u64,
}

/// One tick of the follower, as its caller sees it.
#[derive(Debug)]
pub struct FollowTick<'a> {
    /// When it started (the job's clock).
    pub started: i64,
    pub took: Duration,
    /// `start`, `resync`, `poll`, `wakeup` or `events`.
    pub reason: &'static str,
    /// Events taken from the streams so far (all of them: heartbeats too).
    pub events: u64,
    /// The tick's report (`None`: the watchdog is disabled), or why it failed (the store, the
    /// lock held by another run).
    pub result: Result<Option<&'a TickReport>, &'a Error>,
}

/// Run the follower until `stop` is set. `on_tick` gets each tick (the CLI prints the reports
/// that fired, `agentwatch run` logs one line for each). Time for the pace comes from `clock`.
///
/// # Errors
/// A configuration that does not load, or a stream thread that cannot start. A tick that fails
/// is logged, handed to `on_tick` and tried again at the next change.
pub fn follow(
    args: &Options,
    clock: &dyn Clock,
    stop: &Arc<AtomicBool>,
    mut on_tick: impl FnMut(&FollowTick<'_>),
) -> Result<FollowReport, Error> {
    let env: Env<'_> = &config::process_env;
    let config = config::load(args.config.as_deref(), &args.overrides(), env)?.config;
    let (tx, rx) = channel();
    let streams = args.follow || config.follow.enabled;
    let wakers = start_wakers(&config, args, env, streams, stop, &tx)?;
    drop(tx);
    let mut follower = Follower::new(&config);
    Line::info("watchdog", clock.now())
        .field("follow", "start")
        .field("servers", wakers.threads.len())
        .field("directories", wakers.watches.len())
        .emit();
    while !stop.load(Ordering::SeqCst) {
        let (now, now_ms) = (clock.now(), clock.now_ms());
        if let Some(reason) = follower.due(now, now_ms) {
            follower.tick(args, reason, (now, now_ms), &mut on_tick);
            continue;
        }
        let wait = follower.wait(now, now_ms);
        match rx.recv_timeout(wait) {
            Ok(note) => follower.handle(note, clock),
            Err(RecvTimeoutError::Timeout) => {}
            // No stream left (or none to open): only the polls remain.
            Err(RecvTimeoutError::Disconnected) => std::thread::sleep(wait),
        }
        // Everything that arrived meanwhile belongs to the same tick.
        while let Ok(note) = rx.try_recv() {
            follower.handle(note, clock);
        }
    }
    stop.store(true, Ordering::SeqCst);
    // A stream thread waiting for its next frame ends at that frame or its heartbeat limit, on
    // its own: the follower does not wait for it (a signal stops `run` at once).
    for thread in wakers.threads.into_iter().filter(|t| t.is_finished()) {
        let _ = thread.join();
    }
    let report = follower.finish();
    Line::info("watchdog", clock.now())
        .field("follow", "stop")
        .field("ticks", report.ticks)
        .field("events", report.events)
        .field("reconnects", report.reconnects)
        .emit();
    Ok(report)
}

/// What keeps the follower's wakers running: a stream thread per server (when `streams`), a
/// watch per directory.
#[derive(Debug, Default)]
struct Wakers {
    threads: Vec<std::thread::JoinHandle<()>>,
    watches: Vec<agentwatch_transcripts::DirWatch>,
}

/// Start a stream thread per server the tick would read (when `streams`: `--follow` or
/// `follow.enabled`) and a watch on every agent's transcript directory, there yet or not (it is
/// followed from the moment it appears). A directory that cannot be watched is polled at the
/// job's cadence, with a warning.
fn start_wakers(
    config: &Config,
    args: &Options,
    env: Env<'_>,
    streams: bool,
    stop: &Arc<AtomicBool>,
    tx: &Sender<Note>,
) -> Result<Wakers, Error> {
    let heartbeat = Duration::from_secs(config.follow.heartbeat_s);
    let max_backoff = Duration::from_secs(config.follow.max_backoff_s);
    let mut wakers = Wakers::default();
    for (name, wake) in sources::wakers(config, args, env) {
        let tx = tx.clone();
        match wake {
            WakeOn::Stream(server) if streams => {
                let stop = Arc::clone(stop);
                let thread = std::thread::Builder::new()
                    .name("agentwatch-follow".to_owned())
                    .spawn(move || stream_server(&server, heartbeat, max_backoff, &stop, &tx))
                    .map_err(|e| Error::io(format!("follow: cannot start a stream thread: {e}")))?;
                wakers.threads.push(thread);
            }
            WakeOn::Directory(dir) => {
                let source = name.clone();
                let watch = agentwatch_transcripts::DirWatch::new(&dir, move |change| {
                    let _ = tx.send(Note::Files(source.clone(), change));
                });
                match watch {
                    Ok(watch) => wakers.watches.push(watch),
                    Err(e) => Line::warning("watchdog", crate::clock::now_or_clock(None))
                        .field("source", &name)
                        .field("watch", "none")
                        .field("fallback", "poll")
                        .field("problem", e.to_string())
                        .emit(),
                }
            }
            WakeOn::Stream(_) | WakeOn::Poll => {}
        }
    }
    Ok(wakers)
}

/// The follower's loop state: what the streams said, when it last ticked and polled.
#[derive(Debug)]
struct Follower {
    report: FollowReport,
    pacer: Pacer,
    pending: Pending,
    streaming: HashSet<String>,
    poll_every: i64,
    last_poll: Option<i64>,
    /// When the last tick asked to be called again (an outbox event held by a rate limit).
    wakeup: Option<i64>,
    /// The first tick reads everything.
    first: bool,
    /// What the last tick said it skipped.
    said: super::SaidSkipped,
}

impl Follower {
    fn new(config: &Config) -> Self {
        Self {
            report: FollowReport::default(),
            pacer: Pacer::new(config.follow.min_interval_s),
            pending: Pending::default(),
            streaming: HashSet::new(),
            poll_every: i64::try_from(config.run.watch_interval_s).unwrap_or(300),
            last_poll: None,
            wakeup: None,
            first: true,
            said: super::SaidSkipped::default(),
        }
    }

    /// Every source is read at least every `run.watch_interval_s` (a server without a
    /// stream, opencode.db), so the job's tick is never older than its interval.
    fn poll_due(&self, now: i64) -> bool {
        self.last_poll
            .is_none_or(|l| now >= l.saturating_add(self.poll_every))
    }

    /// Why a tick is due now, if one is (and the pace allows it).
    fn due(&self, now: i64, now_ms: i64) -> Option<&'static str> {
        let poll_due = self.poll_due(now);
        let wakeup_due = self.wakeup.is_some_and(|at| now >= at);
        let wanted = self.first || poll_due || wakeup_due || self.pending.wants_tick();
        if !wanted || !self.pacer.due(now_ms) {
            return None;
        }
        Some(if self.first {
            "start"
        } else if !self.pending.resync.is_empty() {
            "resync"
        } else if poll_due {
            "poll"
        } else if !self.pending.files.is_empty() && self.pending.focus.is_empty() {
            "files"
        } else if self.pending.wants_tick() {
            "events"
        } else {
            "wakeup"
        })
    }

    /// How long to wait for a note: a tick wanted (held back by the pace) looks again when the
    /// pace allows it, a wakeup within the second soon.
    fn wait(&self, now: i64, now_ms: i64) -> Duration {
        let millis = if self.pending.wants_tick() || self.poll_due(now) {
            self.pacer
                .next_ms()
                .map_or(0, |at| at.saturating_sub(now_ms))
                .clamp(10, 1000)
        } else if self.wakeup.is_some_and(|at| at <= now + 1) {
            100
        } else {
            1000
        };
        Duration::from_millis(u64::try_from(millis).unwrap_or(1000))
    }

    /// Run one tick. Streams keep their focus; the other sources, and every one at the first
    /// tick, are read whole.
    fn tick(
        &mut self,
        args: &Options,
        reason: &'static str,
        (now, now_ms): (i64, i64),
        on_tick: &mut impl FnMut(&FollowTick<'_>),
    ) {
        let mut focus = self.pending.take(&self.streaming);
        if self.first {
            focus.servers.clear();
        }
        if self.poll_due(now) {
            self.last_poll = Some(now);
        }
        self.first = false;
        let tick_args = Options {
            focus: Some(focus),
            follow: false,
            said: Some(self.said.clone()),
            ..args.clone()
        };
        Line::info("watchdog", now)
            .field("follow", "tick")
            .field("reason", reason)
            .emit();
        self.report.ticks += 1;
        let started = std::time::Instant::now();
        let result = super::run(&tick_args);
        let report = result.as_ref().ok().and_then(Option::as_ref);
        self.wakeup = report.and_then(|r| r.next_wakeup);
        self.pacer
            .ran(now_ms, report.is_some_and(TickReport::found_loop_alerted));
        if let Err(e) = &result {
            Line::warning("watchdog", now)
                .field("follow", "tick")
                .field("result", "error")
                .field("problem", e.to_string())
                .emit();
        }
        on_tick(&FollowTick {
            started: now,
            took: started.elapsed(),
            reason,
            events: self.pending.events,
            result: result.as_ref().map(Option::as_ref),
        });
    }

    fn finish(mut self) -> FollowReport {
        self.report.events = self.pending.events;
        self.report
    }

    fn handle(&mut self, note: Note, clock: &dyn Clock) {
        let (pending, streaming, report) =
            (&mut self.pending, &mut self.streaming, &mut self.report);
        let now = clock.now();
        match note {
            Note::Event(server, event) => pending.event(&server, &event),
            Note::Opened(server) => {
                Line::info("watchdog", now)
                    .field("server", &server)
                    .field("stream", "open")
                    .emit();
                pending.resync.insert(server.clone());
                streaming.insert(server);
            }
            Note::Skipped(server, why) => {
                Line::warning("watchdog", now)
                    .field("server", &server)
                    .field("stream", "skipped")
                    .field("reason", &why)
                    .emit();
                pending.resync.insert(server);
            }
            Note::Dropped(server, why) => {
                if streaming.remove(&server) {
                    report.reconnects += 1;
                }
                Line::warning("watchdog", now)
                    .field("server", &server)
                    .field("stream", "dropped")
                    .field("problem", &why)
                    .emit();
            }
            Note::NoStream(server, why) => {
                Line::warning("watchdog", now)
                    .field("server", &server)
                    .field("stream", "none")
                    .field("fallback", "poll")
                    .field("reason", &why)
                    .emit();
                streaming.remove(&server);
            }
            Note::Files(source, change) => {
                if let Err(why) = change {
                    Line::warning("watchdog", now)
                        .field("source", &source)
                        .field("watch", "lost_events")
                        .field("action", "read")
                        .field("problem", why)
                        .emit();
                }
                pending.files.insert(source);
            }
        }
    }
}

/// One server's stream, opened again after each drop (backoff from 1 s, doubling to
/// `max_backoff`) until `stop`; a server without the route is handed to polling.
fn stream_server(
    server: &OpencodeServer,
    heartbeat: Duration,
    max_backoff: Duration,
    stop: &AtomicBool,
    tx: &Sender<Note>,
) {
    let name = server.shown_url().to_owned();
    let mut backoff = Duration::from_secs(1);
    while !stop.load(Ordering::SeqCst) {
        match server.events(heartbeat) {
            Ok(mut stream) => {
                backoff = Duration::from_secs(1);
                if tx.send(Note::Opened(name.clone())).is_err() {
                    return;
                }
                loop {
                    if stop.load(Ordering::SeqCst) {
                        return;
                    }
                    let mut skipped = Vec::new();
                    let next = stream.next_event(|why| skipped.push(why.to_owned()));
                    for why in skipped {
                        let _ = tx.send(Note::Skipped(name.clone(), why));
                    }
                    match next {
                        Ok(event) => {
                            if tx.send(Note::Event(name.clone(), event)).is_err() {
                                return;
                            }
                        }
                        Err(e) => {
                            let _ = tx.send(Note::Dropped(name.clone(), e.to_string()));
                            break;
                        }
                    }
                }
            }
            Err(SourceError::Status {
                status: 404 | 405, ..
            }) => {
                let _ = tx.send(Note::NoStream(
                    name.clone(),
                    "the server has no /global/event".to_owned(),
                ));
                return;
            }
            Err(e) => {
                if tx.send(Note::Dropped(name.clone(), e.to_string())).is_err() {
                    return;
                }
            }
        }
        wait(backoff, stop);
        backoff = (backoff * 2).min(max_backoff.max(Duration::from_secs(1)));
    }
}

/// Wait `how_long`, or less once `stop` is set.
fn wait(how_long: Duration, stop: &AtomicBool) {
    let step = Duration::from_millis(100);
    let mut left = how_long;
    while !left.is_zero() && !stop.load(Ordering::SeqCst) {
        let nap = left.min(step);
        std::thread::sleep(nap);
        left = left.saturating_sub(nap);
    }
}

/// [`follow`] on the system clock until `stop` is set (`agentwatch run` sets it on a signal).
///
/// # Errors
/// As [`follow`].
pub fn follow_on_system_clock(
    args: &Options,
    stop: &Arc<AtomicBool>,
    on_tick: impl FnMut(&FollowTick<'_>),
) -> Result<FollowReport, Error> {
    // Nobody sends on the clock's channel: the loop waits on its events, not on the clock.
    let (_never, rx) = channel();
    let clock = crate::wake::SystemClock::new(rx);
    follow(args, &clock, stop, on_tick)
}

/// [`follow`] on the system clock until SIGTERM or SIGINT (`agentwatch watch --follow`);
/// `on_tick` gets the report of each tick that ran.
///
/// # Errors
/// As [`follow`], or when the signal handlers cannot be set.
pub fn follow_until_signal(
    args: &Options,
    mut on_tick: impl FnMut(&TickReport),
) -> Result<FollowReport, Error> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [SIGTERM, SIGINT] {
        signal_hook::flag::register(signal, Arc::clone(&stop))
            .map_err(|e| Error::io(format!("follow: cannot handle signals: {e}")))?;
    }
    follow_on_system_clock(args, &stop, |tick| {
        if let Ok(Some(report)) = tick.result {
            on_tick(report);
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A change is judged at once (at most [`QUICK_MS`] after the last tick); after a tick that
    /// found a loop alerted, the next ones wait `min_interval_s`.
    #[test]
    fn ticks_coalesce_after_an_alerted_loop_not_before() {
        let mut pacer = Pacer::new(2);
        assert!(pacer.due(100_000));
        pacer.ran(100_000, false);
        for (now, due) in [(100_000, false), (100_199, false), (100_200, true)] {
            assert_eq!(pacer.due(now), due, "{now}");
        }
        pacer.ran(100_300, true);
        for (now, due) in [(100_500, false), (102_299, false), (102_300, true)] {
            assert_eq!(pacer.due(now), due, "{now}");
        }
        pacer.ran(102_300, false);
        assert!(pacer.due(102_500));
        // A follow.min_interval_s of 0 never waits.
        let mut eager = Pacer::new(0);
        eager.ran(100_000, true);
        assert!(eager.due(100_000));
    }

    fn tool(session: &str) -> Event {
        Event::ToolSettled {
            session_id: session.into(),
            message_id: "m".into(),
            part_id: "p".into(),
            call: Box::new(detect_core::Call {
                tool: "bash".into(),
                input: serde_json::json!({"command": "false"}),
                status: detect_core::CallStatus::Completed,
                metadata: serde_json::Value::Null,
                time: None,
                output_hash: None,
            }),
        }
    }

    #[test]
    fn events_become_one_focus_per_tick() {
        let mut pending = Pending::default();
        for event in [
            tool("ses_a"),
            tool("ses_a"),
            Event::Heartbeat,
            Event::Other {
                kind: "session.status".into(),
                session_id: Some("ses_c".into()),
            },
            Event::MessageRemoved {
                session_id: "ses_b".into(),
                message_id: "m".into(),
            },
        ] {
            pending.event("http://s", &event);
        }
        assert_eq!((pending.events, pending.changes), (5, 3));
        assert!(pending.wants_tick());
        let streaming: HashSet<String> = ["http://s".to_owned(), "http://t".to_owned()].into();
        pending.resync.insert("http://t".to_owned());
        let focus = pending.take(&streaming);
        assert_eq!(focus.changed, ["ses_a".to_owned()].into());
        assert_eq!(focus.reset, ["ses_b".to_owned()].into());
        // A server to resync is read whole: it is not in the focus.
        assert_eq!(focus.servers, ["http://s".to_owned()].into());
        assert!(!pending.wants_tick());
    }
}
