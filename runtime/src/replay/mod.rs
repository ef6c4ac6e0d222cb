//! `agentwatch replay POLICY [FILE|-]`: drive one policy from a JSON-lines timeline of observations
//! and print one JSON line per decision (schemas and examples: `docs/replay.md`).
//!
//! Each input line is one JSON object: `{"now": UNIX_SECONDS, "<event>": payload}` with exactly one
//! event key, or, before the first event, `{"config": {...}}`. Blank lines are skipped. Each output
//! line is `{"now": N, "decision": NAME, "reason": TEXT[, "session": ID], "action": {...}|null}`.
//! The `alerts` policy is [`alerts::run`] (alert-state work), with its own line schema.
//!
//! Exit codes: 64 unknown policy, 65 a bad line (the message names its number), 66 unreadable
//! FILE, 74 an I/O error on standard output.

pub mod alerts;

use crate::drive::{DecisionOf, Perform, drive};
use crate::error::Error;
use recovery_policy::Policy as Core;
use recovery_policy::loop_recovery::{LoopEvent, LoopRecoveryConfig, LoopRecoveryState};
use recovery_policy::restart_guard::{
    GuardEvent, RestartGuardConfig, RestartGuardState, RestartResult,
};
use recovery_policy::waiting_patrol::{PatrolEvent, WaitingPatrolConfig, WaitingPatrolState};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::io::{self, BufRead, Write};

const POLICIES: &str = "loop-recovery, restart-guard, waiting-patrol or alerts";

/// The policies `replay` drives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    LoopRecovery,
    RestartGuard,
    WaitingPatrol,
    Alerts,
}

impl Policy {
    /// `loop-recovery`, `restart-guard`, `waiting-patrol` or `alerts`; else a usage error (64).
    pub fn parse(name: &str) -> Result<Self, Error> {
        match name {
            "loop-recovery" => Ok(Self::LoopRecovery),
            "restart-guard" => Ok(Self::RestartGuard),
            "waiting-patrol" => Ok(Self::WaitingPatrol),
            "alerts" => Ok(Self::Alerts),
            other => Err(Error::usage(format!(
                "replay: unknown policy `{other}` (expected {POLICIES})\nusage: agentwatch replay POLICY [FILE|-]"
            ))),
        }
    }
}

/// The timeline to read: the file at `path`, or standard input for none or `-`.
///
/// # Errors
///
/// [`Error`] with exit code 66 naming the file when it cannot be opened.
pub fn open_input(path: Option<&str>) -> Result<Box<dyn BufRead>, Error> {
    match path {
        None | Some("-") => Ok(Box::new(io::stdin().lock())),
        Some(path) => {
            let file = std::fs::File::open(path)
                .map_err(|err| Error::no_input(format!("replay: cannot open {path}: {err}")))?;
            Ok(Box::new(io::BufReader::new(file)))
        }
    }
}

/// Replays the timeline `input` through `policy`, one JSON line per decision to `out`. Whatever
/// was decided before an error is still written.
pub fn run(policy: Policy, input: &mut dyn BufRead, out: &mut dyn Write) -> Result<(), Error> {
    let result = match policy {
        Policy::LoopRecovery => replay_loop_recovery(input, out),
        Policy::RestartGuard => replay_restart_guard(input, out),
        Policy::WaitingPatrol => replay_waiting_patrol(input, out),
        Policy::Alerts => alerts::run(input, out),
    };
    let flushed = out.flush().map_err(output_error);
    result?;
    flushed
}

// ------------------------------------------------------------------------------------------------
// Timeline reading

/// One event line: its number (1-based), `now`, the event key and its payload.
struct EventLine {
    number: usize,
    now: i64,
    key: String,
    payload: Value,
}

/// A line of the timeline.
enum TimelineLine {
    /// `{"config": {...}}`, only before the first event.
    Config(Value, usize),
    Event(EventLine),
}

/// Reads the timeline and hands each non-blank line to `on_line`. Errors name the line.
fn read_timeline(
    input: &mut dyn BufRead,
    event_keys: &[&str],
    mut on_line: impl FnMut(TimelineLine) -> Result<(), Error>,
) -> Result<(), Error> {
    let mut buffer = Vec::new();
    let mut number = 0usize;
    let mut last_now: Option<i64> = None;
    let mut config_seen = false;
    loop {
        buffer.clear();
        let read = input
            .read_until(b'\n', &mut buffer)
            .map_err(|err| Error::io(format!("replay: cannot read input: {err}")))?;
        if read == 0 {
            return Ok(());
        }
        number += 1;
        let bad = |msg: String| Error::data(format!("replay: line {number}: {msg}"));
        let text = std::str::from_utf8(&buffer).map_err(|_| bad("not valid UTF-8".into()))?;
        if text.trim().is_empty() {
            continue;
        }
        let value: Value =
            serde_json::from_str(text).map_err(|err| bad(format!("invalid JSON: {err}")))?;
        let Value::Object(mut object) = value else {
            return Err(bad("expected a JSON object".into()));
        };
        if let Some(config) = object.remove("config") {
            if last_now.is_some() || config_seen {
                return Err(bad(
                    "`config` may appear once, before the first event".into()
                ));
            }
            if let Some(extra) = object.keys().next() {
                return Err(bad(format!("unexpected key `{extra}` on the config line")));
            }
            config_seen = true;
            on_line(TimelineLine::Config(config, number))?;
            continue;
        }
        let now = match object.remove("now") {
            Some(now) => now
                .as_i64()
                .ok_or_else(|| bad("`now` must be an integer (unix seconds)".into()))?,
            None => return Err(bad("missing `now`".into())),
        };
        if let Some(previous) = last_now
            && now < previous
        {
            return Err(bad(format!(
                "now {now} is earlier than the previous line's {previous}"
            )));
        }
        last_now = Some(now);
        let expected = || format!("expected exactly one of {}", event_keys.join(", "));
        let mut entries = object.into_iter();
        let (key, payload) = entries
            .next()
            .ok_or_else(|| bad(format!("no event: {}", expected())))?;
        if let Some((other, _)) = entries.next() {
            return Err(bad(format!("both `{key}` and `{other}`: {}", expected())));
        }
        if !event_keys.contains(&key.as_str()) {
            return Err(bad(format!("unknown event `{key}`: {}", expected())));
        }
        on_line(TimelineLine::Event(EventLine {
            number,
            now,
            key,
            payload,
        }))?;
    }
}

impl EventLine {
    fn error(&self, msg: impl std::fmt::Display) -> Error {
        Error::data(format!(
            "replay: line {}: `{}`: {msg}",
            self.number, self.key
        ))
    }

    fn parse<T: DeserializeOwned>(&self) -> Result<T, Error> {
        serde_json::from_value(self.payload.clone()).map_err(|err| self.error(err))
    }

    /// The line as the policy's event: `{key: payload}`, read by the event's own `Deserialize`.
    fn event<T: DeserializeOwned>(&self) -> Result<T, Error> {
        let mut object = serde_json::Map::new();
        object.insert(self.key.clone(), self.payload.clone());
        serde_json::from_value(Value::Object(object)).map_err(|err| self.error(err))
    }
}

fn config_from<T: DeserializeOwned>(value: Value, number: usize) -> Result<T, Error> {
    serde_json::from_value(value)
        .map_err(|err| Error::data(format!("replay: line {number}: invalid config: {err}")))
}

fn output_error(err: io::Error) -> Error {
    Error::stdout("replay", &err)
}

#[derive(Serialize)]
struct OutputLine<'a, D> {
    now: i64,
    #[serde(flatten)]
    decision: &'a D,
}

/// Prints each decision as one line and performs nothing: in a timeline, the caller's actions
/// happen between lines and their outcomes are later lines.
struct Printer<'a>(&'a mut dyn Write);

impl<P: Core> Perform<P> for Printer<'_>
where
    P::Action: Serialize,
{
    type Error = Error;

    fn decided(
        &mut self,
        now: i64,
        decision: &DecisionOf<P>,
        _: Option<&P::Action>,
    ) -> Result<(), Error> {
        let line = serde_json::to_string(&OutputLine { now, decision })
            .map_err(|err| Error::software(format!("replay: cannot encode a decision: {err}")))?;
        writeln!(self.0, "{line}").map_err(output_error)
    }

    fn perform(&mut self, _: &P, _: &P::Action, _: i64) -> Result<Option<(i64, P::Event)>, Error> {
        Ok(None)
    }
}

/// Feeds one line's event to `policy` and prints its decisions.
fn feed<P: Core>(
    policy: &mut P,
    config: &P::Config,
    event: &P::Event,
    now: i64,
    out: &mut dyn Write,
) -> Result<(), Error>
where
    P::Action: Serialize,
{
    drive(policy, config, event, now, &mut Printer(out)).map(|_| ())
}

// ------------------------------------------------------------------------------------------------
// Policies

fn replay_loop_recovery(input: &mut dyn BufRead, out: &mut dyn Write) -> Result<(), Error> {
    const KEYS: &[&str] = &[
        "report",
        "report_unreadable",
        "router_reply",
        "router_unreachable",
        "outcome",
    ];
    let mut config = LoopRecoveryConfig::default();
    let mut state = LoopRecoveryState::default();
    read_timeline(input, KEYS, |line| {
        let line = match line {
            TimelineLine::Config(value, number) => {
                config = config_from::<LoopRecoveryConfig>(value, number)?;
                return Ok(());
            }
            TimelineLine::Event(line) => line,
        };
        let now = line.now;
        let event: LoopEvent = line.event()?;
        feed(&mut state, &config, &event, now, out)
    })
}

/// The `restart_result` payload: what `agent-deck session restart --json` printed.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct RestartResultLine {
    session: String,
    #[serde(default)]
    exit_code: i32,
    /// The reply: its JSON object, or the raw standard output as a string.
    reply: Value,
    #[serde(default)]
    last_output: Option<String>,
}

fn replay_restart_guard(input: &mut dyn BufRead, out: &mut dyn Write) -> Result<(), Error> {
    const KEYS: &[&str] = &["sessions", "recheck", "restart_result"];
    let mut config = RestartGuardConfig::default();
    let mut state = RestartGuardState::default();
    read_timeline(input, KEYS, |line| {
        let line = match line {
            TimelineLine::Config(value, number) => {
                config = config_from::<RestartGuardConfig>(value, number)?;
                return Ok(());
            }
            TimelineLine::Event(line) => line,
        };
        let now = line.now;
        let event = match line.key.as_str() {
            // agent-deck's own output: its adapter reads it, the core never does.
            "restart_result" => {
                let result = line.parse::<RestartResultLine>()?;
                let stdout = match result.reply {
                    Value::String(text) => text,
                    other => other.to_string(),
                };
                GuardEvent::RestartResult(RestartResult {
                    session: result.session,
                    reply: agentwatch_agentdeck::cli::restart_reply(result.exit_code, &stdout),
                    last_output: result.last_output,
                })
            }
            _ => line.event()?,
        };
        feed(&mut state, &config, &event, now, out)
    })
}

fn replay_waiting_patrol(input: &mut dyn BufRead, out: &mut dyn Write) -> Result<(), Error> {
    const KEYS: &[&str] = &["sessions"];
    let mut config = WaitingPatrolConfig::default();
    let mut state = WaitingPatrolState::default();
    read_timeline(input, KEYS, |line| {
        let line = match line {
            TimelineLine::Config(value, number) => {
                config = config_from::<WaitingPatrolConfig>(value, number)?;
                return Ok(());
            }
            TimelineLine::Event(line) => line,
        };
        let now = line.now;
        let event: PatrolEvent = line.event()?;
        feed(&mut state, &config, &event, now, out)
    })
}
