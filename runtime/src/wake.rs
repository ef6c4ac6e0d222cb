//! The clock of the long-running loops (`agentwatch run`, the follower, a `recover` countdown):
//! what time it is, and a wait that a signal cuts short.

use crate::clock::now_or_clock;
use crate::error::Error;
use crate::journal::Line;
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Why a wait ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wake {
    /// The time waited for came.
    Due,
    /// Stop was asked for (a signal); the loop ends.
    Stop,
}

/// The loop's clock: what time it is, and a wait that a stop request cuts short.
pub trait Clock {
    /// Unix seconds.
    fn now(&self) -> i64;
    /// Unix milliseconds, for what is paced finer than a second (the follower's ticks); a clock
    /// that knows only seconds gives its seconds.
    fn now_ms(&self) -> i64 {
        self.now().saturating_mul(1000)
    }
    /// Wait until `at` (unix seconds) or a stop request, whichever comes first. A stop asked for
    /// earlier (during a tick) is returned at once.
    fn wait_until(&mut self, at: i64) -> Wake;
}

/// The system clock, woken early by whatever is sent on its channel (the signal thread).
#[derive(Debug)]
pub struct SystemClock {
    stop: Receiver<i32>,
}

impl SystemClock {
    /// A clock woken by anything sent on `stop`.
    pub fn new(stop: Receiver<i32>) -> Self {
        Self { stop }
    }

    /// Wait `span`, or less when a stop is asked for (now or earlier): [`Wake::Stop`] then.
    pub fn sleep(&mut self, span: Duration) -> Wake {
        match self.stop.recv_timeout(span) {
            Ok(_) => Wake::Stop,
            Err(RecvTimeoutError::Timeout) => Wake::Due,
            Err(RecvTimeoutError::Disconnected) => {
                std::thread::sleep(span);
                Wake::Due
            }
        }
    }

    /// A clock woken by SIGTERM or SIGINT. A second signal ends the process at once
    /// (128 + the signal's number).
    pub fn with_signals() -> Result<Self, Error> {
        use signal_hook::consts::{SIGINT, SIGTERM};
        let (tx, rx) = channel();
        let mut signals = signal_hook::iterator::Signals::new([SIGTERM, SIGINT])
            .map_err(|e| Error::io(format!("run: cannot handle signals: {e}")))?;
        std::thread::Builder::new()
            .name("agentwatch-signals".to_owned())
            .spawn(move || forward_signals(signals.forever(), &tx))
            .map_err(|e| Error::io(format!("run: cannot start the signal thread: {e}")))?;
        Ok(Self::new(rx))
    }
}

/// A system clock that SIGTERM and SIGINT wake for as long as the scope lives (a `recover`
/// countdown). Dropped, its thread ends and its handlers are removed; a process that outlives it
/// then ignores those signals (signal-hook cannot restore the default), so it is for the end of a
/// oneshot run or inside `agentwatch run`, whose own handlers stay.
#[derive(Debug)]
pub struct SignalScope {
    clock: SystemClock,
    handle: signal_hook::iterator::Handle,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl SignalScope {
    /// Handles SIGTERM and SIGINT from now on.
    pub fn new() -> Result<Self, Error> {
        use signal_hook::consts::{SIGINT, SIGTERM};
        let (tx, rx) = channel();
        let mut signals = signal_hook::iterator::Signals::new([SIGTERM, SIGINT])
            .map_err(|e| Error::io(format!("cannot handle signals: {e}")))?;
        let handle = signals.handle();
        let thread = std::thread::Builder::new()
            .name("agentwatch-signals".to_owned())
            .spawn(move || {
                for signal in signals.forever() {
                    let _ = tx.send(signal);
                }
            })
            .map_err(|e| Error::io(format!("cannot start the signal thread: {e}")))?;
        Ok(Self {
            clock: SystemClock::new(rx),
            handle,
            thread: Some(thread),
        })
    }

    /// The clock the signals wake.
    pub fn clock(&mut self) -> &mut SystemClock {
        &mut self.clock
    }
}

impl Drop for SignalScope {
    fn drop(&mut self) {
        self.handle.close();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The first signal asks the loop to stop; a second one exits at once.
fn forward_signals(signals: impl Iterator<Item = i32>, stop: &Sender<i32>) {
    let mut asked = false;
    for signal in signals {
        if asked {
            Line::warning("run", now_or_clock(None))
                .field("state", "abort")
                .field("signal", signal)
                .field("reason", "second signal")
                .emit();
            std::process::exit(128 + signal);
        }
        asked = true;
        let _ = stop.send(signal);
    }
}

impl Clock for SystemClock {
    fn now(&self) -> i64 {
        now_or_clock(None)
    }

    fn now_ms(&self) -> i64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
    }

    fn wait_until(&mut self, at: i64) -> Wake {
        let target = UNIX_EPOCH + Duration::from_secs(u64::try_from(at).unwrap_or(0));
        loop {
            let left = target
                .duration_since(SystemTime::now())
                .unwrap_or(Duration::ZERO);
            match self.stop.recv_timeout(left) {
                Ok(_) => return Wake::Stop,
                Err(RecvTimeoutError::Timeout) if SystemTime::now() >= target => return Wake::Due,
                // Woken a little early (the clock was set back or the timer slack): wait again.
                Err(RecvTimeoutError::Timeout) => {}
                // Nobody can ask to stop any more: only time is left to wait for.
                Err(RecvTimeoutError::Disconnected) => {
                    std::thread::sleep(left);
                    return Wake::Due;
                }
            }
        }
    }
}
