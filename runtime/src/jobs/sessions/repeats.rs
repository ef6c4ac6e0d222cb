//! What repeats in a session, for its alert: the call it made most often among its last calls,
//! as a person reads it ([`shown_call`]: the whole command, shortened in the middle only past
//! 120 characters, secrets redacted), how many times, over how many calls, how often it failed
//! and what its latest run returned (the output excerpt a reader built `with_excerpts` keeps
//! in `metadata.excerpt`). Counted as every source reads calls, and kept in the session's
//! stored row beside its verdict: the live sources keep detector snapshots, not calls, so
//! this is all the alert's sentence needs and no more (16 hashes and one call's text).
//!
//! A landing (the session's own edit, commit or write) ends what repeated: it starts over.

use super::refusals::SessionRefusals;
use crate::text::shown_call;
use detect_core::{Call, CallStatus, SessionDetector, call_identity, text_hash};
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// Calls looked back over for the call that repeats (the detector's history is as long).
pub const RECENT: usize = 16;

/// One call seen: its identity and result as hashes, and whether it failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
struct Seen(u64, u64, bool);

/// What repeats in one session, as read so far.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Repeats {
    /// The last calls counted since the last landing, oldest first.
    #[serde(default, skip_serializing_if = "VecDeque::is_empty")]
    recent: VecDeque<Seen>,
    /// The call that repeats most among them, once one ran twice.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    call: Option<Repeated>,
    /// Calls counted in the session, all told.
    #[serde(default)]
    pub calls: u64,
}

/// The call that repeats, for a sentence.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Repeated {
    #[serde(default)]
    id: u64,
    /// The call as a person reads it.
    pub shown: String,
    /// A shell command (it "ran"), not another tool's call.
    #[serde(default)]
    pub command: bool,
    /// Its runs since its first among the last calls.
    pub times: u32,
    /// The calls those runs are spread over (its first run's to the latest call).
    pub over: u32,
    /// Of its runs, those that failed (status `error` or a non-zero exit).
    #[serde(default)]
    pub failed: u32,
    /// Every run returned what the first did.
    #[serde(default)]
    pub same: bool,
    #[serde(default)]
    first_result: u64,
    /// What its latest run returned, when the source keeps output excerpts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub returned: Option<String>,
}

/// `call` into the session's detector, counting what the hook refused and what repeats: the
/// one way every source pushes a call.
pub fn push_call(
    detector: &mut SessionDetector,
    call: &Call,
    refusals: &mut SessionRefusals,
    repeats: &mut Repeats,
) {
    let landing = detector.latest_own_landing();
    detector.push(call);
    refusals.observe(call, || detector.flagged());
    repeats.observe(call, detector.latest_own_landing() != landing);
}

impl Repeats {
    /// The call that repeats, once one ran at least twice since the last landing.
    #[must_use]
    pub fn current(&self) -> Option<&Repeated> {
        self.call.as_ref().filter(|c| c.times >= 2)
    }

    /// Count `call`, read after every call before it; `landed`: it landed (the session's own
    /// landing), which ends what repeated.
    pub fn observe(&mut self, call: &Call, landed: bool) {
        if !call.status.is_counted() {
            return;
        }
        self.calls = self.calls.saturating_add(1);
        if landed {
            self.recent.clear();
            self.call = None;
            return;
        }
        let seen = Seen(id_of(call), result_of(call), failed(call));
        if self.recent.len() == RECENT {
            self.recent.pop_front();
        }
        self.recent.push_back(seen);
        let returned = excerpt(call);
        if let Some(current) = self.call.as_mut() {
            current.over = current.over.saturating_add(1);
            if current.id == seen.0 {
                current.times = current.times.saturating_add(1);
                current.failed = current.failed.saturating_add(u32::from(seen.2));
                current.same &= current.first_result == seen.1;
                current.returned = returned.or(current.returned.take());
                return;
            }
        }
        let count = |id: u64| self.recent.iter().filter(|s| s.0 == id).count();
        let held = self.call.as_ref().map_or(0, |c| count(c.id));
        if count(seen.0) >= 2 && count(seen.0) > held {
            self.call = Some(self.started(call, seen, returned));
        }
    }

    /// The record of `call`, which ran at least twice among the recent calls.
    fn started(&self, call: &Call, seen: Seen, returned: Option<String>) -> Repeated {
        let runs: Vec<(usize, &Seen)> = self
            .recent
            .iter()
            .enumerate()
            .filter(|(_, s)| s.0 == seen.0)
            .collect();
        let first = runs.first().map_or(0, |(at, _)| *at);
        let first_result = runs.first().map_or(seen.1, |(_, s)| s.1);
        Repeated {
            id: seen.0,
            shown: shown_call(call),
            command: call.tool == "bash",
            times: u32::try_from(runs.len()).unwrap_or(u32::MAX),
            over: u32::try_from(self.recent.len() - first).unwrap_or(u32::MAX),
            failed: u32::try_from(runs.iter().filter(|(_, s)| s.2).count()).unwrap_or(0),
            same: runs.iter().all(|(_, s)| s.1 == first_result),
            first_result,
            returned,
        }
    }
}

/// The call's identity (the detector's), hashed.
fn id_of(call: &Call) -> u64 {
    hash(&call_identity(&call.tool, &call.input))
}

/// What it returned, hashed: the output's hash when the source has one, else its status and
/// exit.
fn result_of(call: &Call) -> u64 {
    match &call.output_hash {
        Some(output) => hash(output),
        None => hash(&format!("{:?} {}", call.status, call.metadata["exit"])),
    }
}

/// Whether it failed: status `error`, or a non-zero exit.
fn failed(call: &Call) -> bool {
    call.status == CallStatus::Error || call.metadata["exit"].as_i64().is_some_and(|exit| exit != 0)
}

/// The excerpt of its output the reader kept, if any.
fn excerpt(call: &Call) -> Option<String> {
    call.metadata
        .get(agentwatch_transcripts::EXCERPT_KEY)
        .and_then(serde_json::Value::as_str)
        .map(|e| crate::text::escape_control(e).replace('`', "'"))
}

fn hash(text: &str) -> u64 {
    u64::from_str_radix(&text_hash(text), 16).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn bash(command: &str, exit: i64, output: &str) -> Call {
        Call::completed("bash", json!({"command": command}))
            .with_metadata(json!({"exit": exit, "excerpt": output}))
            .with_output(output)
    }

    fn seen(calls: &[Call]) -> Repeats {
        let mut repeats = Repeats::default();
        for call in calls {
            repeats.observe(call, false);
        }
        repeats
    }

    /// A repeated call's figures: `(shown, times, over, failed, same)`.
    type Figures<'a> = (&'a str, u32, u32, u32, bool);

    /// Table: the calls read, and what repeats as a sentence's figures
    /// `(shown, times, over, failed, same, returned)`.
    #[test]
    fn the_call_that_repeats_with_its_figures() {
        let failing = || {
            bash(
                "python3 -c \"import nosuchmodule\"",
                1,
                "ModuleNotFoundError: No module named 'nosuchmodule'",
            )
        };
        let ls = || bash("ls", 0, "a b");
        let rows: Vec<(&str, Vec<Call>, Option<Figures<'_>>)> = vec![
            ("one call", vec![failing()], None),
            (
                "a failing command four times",
                vec![ls(), failing(), failing(), failing(), failing()],
                Some(("python3 -c \"import nosuchmodule\"", 4, 4, 4, true)),
            ),
            (
                "with other calls between",
                vec![failing(), ls(), failing(), bash("pwd", 0, "/"), failing()],
                Some(("python3 -c \"import nosuchmodule\"", 3, 5, 3, true)),
            ),
            (
                "the one that repeats most wins",
                vec![ls(), ls(), failing(), failing(), failing(), ls()],
                Some(("python3 -c \"import nosuchmodule\"", 3, 4, 3, true)),
            ),
        ];
        for (name, calls, want) in rows {
            let repeats = seen(&calls);
            let got = repeats
                .current()
                .map(|r| (r.shown.as_str(), r.times, r.over, r.failed, r.same));
            assert_eq!(got, want, "{name}");
            assert_eq!(repeats.calls, calls.len() as u64, "{name}");
        }
        let four = seen(&[failing(), failing(), failing(), failing()]);
        assert_eq!(
            four.current().unwrap().returned.as_deref(),
            Some("ModuleNotFoundError: No module named 'nosuchmodule'")
        );
    }

    /// A landing ends what repeated; a call the hook refused is not counted; the record
    /// round-trips through the stored row.
    #[test]
    fn a_landing_starts_over_and_the_record_is_kept() {
        let call = || bash("make", 2, "make: *** [all] Error 2");
        let mut repeats = seen(&[call(), call(), call()]);
        assert_eq!(repeats.current().unwrap().times, 3);
        let refused = call().with_status(CallStatus::Blocked);
        repeats.observe(&refused, false);
        assert_eq!(repeats.current().unwrap().times, 3);
        let stored: Repeats =
            serde_json::from_str(&serde_json::to_string(&repeats).unwrap()).unwrap();
        assert_eq!(stored, repeats);
        repeats.observe(&Call::completed("write", json!({"filePath": "/a"})), true);
        assert_eq!(repeats.current(), None);
        repeats.observe(&call(), false);
        assert_eq!(repeats.current(), None, "one run since the landing");
    }
}
