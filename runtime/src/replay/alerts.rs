//! The `alerts` policy of `agentwatch replay` (owned by the alert-state work).
//!
//! Drives [`alert_state::process_tick`] from a JSON-lines timeline, one tick per line, and prints
//! one JSON line per decision. Between lines the alert state goes through its JSON form, exactly
//! as it does between two oneshot runs of the watchdog. The schema and a worked example are the
//! `## alerts` section of `docs/replay.md`.

use crate::error::Error;
use alert_state::{
    AlertConfig, AlertState, ChannelConfig, DecisionKind, Dispatch, Refusals, RootObservation,
    Tick, parse_llm_opinion, process_tick,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::io::{BufRead, ErrorKind, Write};

/// The events' `source` when the timeline sets none.
pub const REPLAY_SOURCE: &str = "agentwatch@replay";

/// One input line: a tick, optionally changing the channels or the settings first.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TickLine {
    now: i64,
    #[serde(default)]
    roots: Vec<RootLine>,
    #[serde(default)]
    gone: Vec<String>,
    /// Replaces the channel list from this tick on.
    #[serde(default)]
    channels: Option<Vec<ChannelConfig>>,
    /// Overrides individual settings from this tick on.
    #[serde(default)]
    config: Option<SettingsLine>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RootLine {
    root: String,
    flagged: bool,
    #[serde(default)]
    agent: String,
    /// The LLM's raw reply (parsed strictly: `yes` / `no`, anything else is no opinion) or null.
    #[serde(default)]
    opinion: Option<String>,
    #[serde(default)]
    summary: String,
    #[serde(default)]
    details: Value,
    /// What agentwatch's hook refused in the tree so far (`{"blocked": 3, "call": "…",
    /// "of_call": 3, "stopped": true}`).
    #[serde(default)]
    refusals: Refusals,
    /// The tree's latest call is one the hook refused.
    #[serde(default)]
    refusal_stands: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SettingsLine {
    escalate_after_ticks: Option<u32>,
    max_llm_opinions_per_tick: Option<u32>,
    local_llm_enabled: Option<bool>,
    source: Option<String>,
}

/// One output line.
#[derive(Debug, Serialize)]
struct DecisionLine<'a> {
    now: i64,
    decision: DecisionKind,
    dedup_key: &'a str,
    reason: &'a str,
    /// The event and one route per channel (delivered or suppressed), or null.
    action: Option<&'a Dispatch>,
}

/// Replays an alerts timeline from `input`, writing one JSON line per decision to `out`.
///
/// A line that is not a valid tick (bad JSON, an unknown field, a contradictory tick, an invalid
/// channel list) stops the replay with exit code 65 and names the line; output already written
/// stays. Blank lines are skipped.
pub fn run(input: &mut dyn BufRead, out: &mut dyn Write) -> Result<(), Error> {
    let mut config = AlertConfig {
        source: REPLAY_SOURCE.to_owned(),
        ..AlertConfig::default()
    };
    let mut stored_state = to_json(&AlertState::default())?;
    let mut text = String::new();
    let mut number: u64 = 0;
    loop {
        text.clear();
        number += 1;
        let read = input
            .read_line(&mut text)
            .map_err(|e| read_error(number, &e))?;
        if read == 0 {
            break;
        }
        if text.trim().is_empty() {
            continue;
        }
        let line: TickLine = serde_json::from_str(&text).map_err(|e| json_error(number, &e))?;
        let tick = apply_line(&mut config, line);
        let state: AlertState = serde_json::from_str(&stored_state).map_err(|e| {
            Error::software(format!(
                "replay alerts: line {number}: stored state does not load back: {e}"
            ))
        })?;
        let outcome = process_tick(&state, &config, &tick)
            .map_err(|e| Error::data(format!("replay alerts: line {number}: {e}")))?;
        for decision in &outcome.decisions {
            let line = DecisionLine {
                now: tick.now,
                decision: decision.kind,
                dedup_key: &decision.dedup_key,
                reason: &decision.reason,
                action: decision.dispatch.as_ref(),
            };
            writeln!(out, "{}", to_json(&line)?).map_err(|e| write_error(&e))?;
        }
        stored_state = to_json(&outcome.state_if_all_sent())?;
    }
    out.flush().map_err(|e| write_error(&e))
}

/// Applies a line's channels and settings to the running config and returns its tick.
fn apply_line(config: &mut AlertConfig, line: TickLine) -> Tick {
    if let Some(channels) = line.channels {
        config.channels = channels;
    }
    if let Some(settings) = line.config {
        if let Some(value) = settings.escalate_after_ticks {
            config.escalate_after_ticks = value;
        }
        if let Some(value) = settings.max_llm_opinions_per_tick {
            config.max_llm_opinions_per_tick = value;
        }
        if let Some(value) = settings.local_llm_enabled {
            config.local_llm_enabled = value;
        }
        if let Some(value) = settings.source {
            config.source = value;
        }
    }
    let roots = line
        .roots
        .into_iter()
        .map(|root| RootObservation {
            root: root.root,
            flagged: root.flagged,
            agent: root.agent,
            opinion: root.opinion.as_deref().and_then(parse_llm_opinion),
            summary: root.summary,
            details: root.details,
            source: String::new(),
            family: String::new(),
            title: String::new(),
            refusals: root.refusals,
            refusal_stands: root.refusal_stands,
        })
        .collect();
    Tick {
        now: line.now,
        roots,
        gone: line.gone,
        stale: Vec::new(),
    }
}

fn to_json(value: &impl Serialize) -> Result<String, Error> {
    serde_json::to_string(value)
        .map_err(|e| Error::software(format!("replay alerts: cannot serialise: {e}")))
}

/// A JSON error for one input line; serde's own position is always "line 1" of that line, so
/// only its column is kept.
fn json_error(number: u64, error: &serde_json::Error) -> Error {
    let message = error.to_string();
    let position = format!(" at line {} column {}", error.line(), error.column());
    let message = message.strip_suffix(&position).unwrap_or(&message);
    Error::data(format!(
        "replay alerts: line {number}, column {}: invalid tick: {message}",
        error.column()
    ))
}

fn read_error(number: u64, error: &std::io::Error) -> Error {
    if error.kind() == ErrorKind::InvalidData {
        Error::data(format!("replay alerts: line {number}: not valid UTF-8"))
    } else {
        Error::io(format!("replay alerts: cannot read line {number}: {error}"))
    }
}

fn write_error(error: &std::io::Error) -> Error {
    Error::stdout("replay alerts", error)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::code;

    fn replay(input: &str) -> Result<Vec<Value>, Error> {
        let mut out = Vec::new();
        run(&mut input.as_bytes(), &mut out)?;
        let text = String::from_utf8(out).expect("output is UTF-8");
        Ok(text
            .lines()
            .map(|line| serde_json::from_str(line).expect("each output line is JSON"))
            .collect())
    }

    fn replay_err(input: &[u8]) -> Error {
        let mut out = Vec::new();
        run(&mut &input[..], &mut out).expect_err("replay fails")
    }

    const CHANNEL: &str =
        r#"[{"name":"desktop","type":"desktop","enabled":true,"min_severity":"warning"}]"#;

    #[test]
    fn a_flagged_root_triggers_escalates_and_resolves() {
        let input = format!(
            "{{\"now\":100,\"channels\":{CHANNEL},\"roots\":[{{\"root\":\"ses_a\",\"flagged\":true,\"agent\":\"build\",\"opinion\":\"No\"}}]}}\n\
             \n\
             {{\"now\":400,\"roots\":[{{\"root\":\"ses_a\",\"flagged\":true,\"agent\":\"build\",\"opinion\":\"yes please\"}}]}}\n\
             {{\"now\":700,\"roots\":[{{\"root\":\"ses_a\",\"flagged\":true,\"agent\":\"build\"}}]}}\n\
             {{\"now\":800,\"gone\":[\"ses_a\"]}}\n"
        );
        let lines = replay(&input).expect("valid timeline");
        let kinds: Vec<&str> = lines
            .iter()
            .map(|l| l["decision"].as_str().unwrap_or_default())
            .collect();
        assert_eq!(
            kinds,
            ["trigger", "still_flagged", "escalate", "resolve_gone"]
        );
        assert_eq!(lines[0]["action"]["event"]["severity"], "warning");
        assert_eq!(lines[0]["action"]["event"]["source"], REPLAY_SOURCE);
        assert_eq!(
            lines[0]["action"]["routes"][0]["delivery"], "delivered",
            "{}",
            lines[0]
        );
        assert_eq!(lines[1]["action"], Value::Null);
        assert_eq!(lines[3]["now"], 800);
        assert_eq!(lines[3]["action"]["routes"][0]["delivery"], "delivered");
    }

    #[test]
    fn settings_persist_and_channels_are_replaced() {
        let input = format!(
            "{{\"now\":1,\"channels\":{CHANNEL},\"config\":{{\"local_llm_enabled\":false,\"source\":\"agentwatch@box\"}},\"roots\":[{{\"root\":\"a\",\"flagged\":true,\"opinion\":\"yes\"}}]}}\n\
             {{\"now\":2,\"channels\":[],\"roots\":[{{\"root\":\"b\",\"flagged\":true,\"opinion\":\"yes\"}}]}}\n"
        );
        let lines = replay(&input).expect("valid timeline");
        let kinds: Vec<&str> = lines
            .iter()
            .map(|l| l["decision"].as_str().unwrap_or_default())
            .collect();
        assert_eq!(
            kinds,
            ["opinion_ignored", "trigger", "opinion_ignored", "trigger"]
        );
        assert_eq!(lines[3]["action"]["event"]["severity"], "warning");
        assert_eq!(lines[3]["action"]["event"]["source"], "agentwatch@box");
        assert_eq!(lines[3]["action"]["routes"], serde_json::json!([]));
    }

    #[test]
    fn bad_lines_are_data_errors_naming_the_line() {
        let cases: [(&[u8], &str); 6] = [
            (b"{\"now\":1}\n{\"now\":", "replay alerts: line 2, column 7: invalid tick: EOF while parsing a value"),
            (b"\n\nnot json\n", "replay alerts: line 3, column 2: invalid tick: expected ident"),
            (b"{\"now\":1,\"rots\":[]}\n", "replay alerts: line 1, column 15: invalid tick: unknown field `rots`, expected one of `now`, `roots`, `gone`, `channels`, `config`"),
            (b"{\"now\":1,\"roots\":[{\"root\":\"a\",\"flagged\":true},{\"root\":\"a\",\"flagged\":false}]}\n", "replay alerts: line 1: roots[1]: root `a` is already listed at roots[0]"),
            (b"{\"now\":1,\"config\":{\"escalate_after_ticks\":0}}\n", "replay alerts: line 1: invalid alert config: escalate_after_ticks must be at least 1 (got 0)"),
            (b"{\"now\":1}\n\xff\xfe\n", "replay alerts: line 2: not valid UTF-8"),
        ];
        for (input, message) in cases {
            let error = replay_err(input);
            assert_eq!(error.exit_code(), code::DATAERR, "{message}");
            assert_eq!(error.to_string(), message);
        }
    }

    #[test]
    fn an_empty_timeline_prints_nothing() {
        assert_eq!(replay("").expect("empty is fine"), Vec::<Value>::new());
        assert_eq!(
            replay("\n  \n").expect("blank is fine"),
            Vec::<Value>::new()
        );
    }
}
