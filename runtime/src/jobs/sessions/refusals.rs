//! What agentwatch's own pre-tool hook refused in a session (issue 47), counted as its calls
//! are read, whatever the source: a call the agent's record shows refused by our hook reads as
//! [`CallStatus::Blocked`], its message (when the reader has it) in `metadata.refusal`. The
//! detector does not count such a call (it never ran); the sessions job keeps the count here,
//! stored with the session's verdict, and each tree's refusals reach the alert lifecycle
//! ([`tree_refusals`], `alert_state::RootObservation::refusals`).
//!
//! The refusals belong to the loop they refused: once a call runs and the session is no longer
//! flagged, they are forgotten (a later loop starts from none).

use crate::text::shown_call;
use alert_state::Refusals;
use detect_core::{Call, CallStatus};
use serde::{Deserialize, Serialize};

/// How the hook's message starts when it stops the session (`stop` mode), as the ladder writes
/// it (`recovery_policy::hook_ladder`).
pub const STOPPED_PREFIX: &str = "agentwatch: the session is stopped";

/// The hook's refusals in one session, as read so far.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionRefusals {
    /// Calls refused.
    #[serde(default)]
    pub blocked: u32,
    /// The last refused call, as a person reads it ([`shown_call`]).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub call: String,
    /// Refusals of `call` in a row, counting back from the last.
    #[serde(default)]
    pub of_call: u32,
    /// When the last refusal came (unix ms), when its call says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at_ms: Option<i64>,
    /// A refusal stopped the session (its message starts with [`STOPPED_PREFIX`]).
    #[serde(default)]
    pub stopped: bool,
    /// A call ran after the last refusal: the agent moved on from it.
    #[serde(default)]
    pub ran_since: bool,
}

impl SessionRefusals {
    /// Nothing refused.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.blocked == 0
    }

    /// Whether the session's latest call is one the hook refused (no call ran since).
    #[must_use]
    pub fn stands(&self) -> bool {
        self.blocked > 0 && !self.ran_since
    }

    /// Count `call`, read after every call before it. `flagged` says whether the session is
    /// flagged once a call that ran is in its detector (asked only then, and only while there
    /// are refusals to forget).
    pub fn observe(&mut self, call: &Call, flagged: impl FnOnce() -> bool) {
        match &call.status {
            CallStatus::Blocked => self.refused(call),
            status if status.is_counted() && self.blocked > 0 => {
                if flagged() {
                    self.ran_since = true;
                } else {
                    *self = Self::default();
                }
            }
            _ => {}
        }
    }

    fn refused(&mut self, call: &Call) {
        let shown = shown_call(call);
        self.of_call = if shown == self.call {
            self.of_call.saturating_add(1)
        } else {
            1
        };
        self.call = shown;
        self.blocked = self.blocked.saturating_add(1);
        self.at_ms = call.end_ms().or(self.at_ms);
        self.ran_since = false;
        let message = call
            .metadata
            .get("refusal")
            .and_then(serde_json::Value::as_str);
        if message.is_some_and(|m| m.trim_start().starts_with(STOPPED_PREFIX)) {
            self.stopped = true;
        }
    }
}

/// A tree's refusals from its sessions': their sum, the last refused call (the latest in time;
/// among calls with no time, the last session's), stopped when a session was stopped; and
/// whether a session's latest call is a refused one.
#[must_use]
pub fn tree_refusals<'a>(
    sessions: impl IntoIterator<Item = &'a SessionRefusals>,
) -> (Refusals, bool) {
    let mut out = Refusals::default();
    let mut stands = false;
    let mut last: Option<&SessionRefusals> = None;
    for session in sessions.into_iter().filter(|s| !s.is_empty()) {
        out.blocked = out.blocked.saturating_add(session.blocked);
        out.stopped |= session.stopped;
        stands |= session.stands();
        if last.is_none_or(|l| session.at_ms >= l.at_ms) {
            last = Some(session);
        }
    }
    if let Some(last) = last {
        out.call.clone_from(&last.call);
        out.of_call = last.of_call;
    }
    (out, stands)
}

#[cfg(test)]
mod tests {
    use super::*;
    use detect_core::CallTime;
    use recovery_policy::hook_ladder::{
        ActMode, AgentCan, HookAction, LadderConfig, LadderState, PendingEvent,
    };
    use serde_json::json;

    fn call(command: &str, status: CallStatus, refusal: Option<&str>, at: i64) -> Call {
        Call {
            tool: "bash".to_owned(),
            input: json!({"command": command}),
            status,
            metadata: refusal.map_or(serde_json::Value::Null, |r| json!({"refusal": r})),
            time: Some(CallTime {
                start: Some(at),
                end: Some(at + 10),
            }),
            output_hash: None,
        }
    }

    const REFUSED: &str = "agentwatch: this call was not run: `pytest` ran 4 times …";
    const STOPPED: &str = "agentwatch: the session is stopped: `pytest` was refused 3 times …";

    /// Each row: the calls read (command, status, refusal, flagged after it ran) and what the
    /// session's refusals are then: (blocked, call, of_call, stopped, stands).
    #[test]
    fn a_sessions_refusals_as_its_calls_are_read() {
        use CallStatus::{Blocked, Completed, Error};
        type Row = (
            &'static str,
            Vec<(&'static str, CallStatus, Option<&'static str>, bool)>,
            (u32, &'static str, u32, bool, bool),
        );
        let rows: Vec<Row> = vec![
            (
                "nothing refused",
                vec![("pytest", Error, None, true)],
                (0, "", 0, false, false),
            ),
            (
                "refused twice, still asking",
                vec![
                    ("pytest", Error, None, true),
                    ("pytest", Blocked, Some(REFUSED), true),
                    ("pytest", Blocked, None, true),
                ],
                (2, "pytest", 2, false, true),
            ),
            (
                "stopped",
                vec![
                    ("pytest", Blocked, Some(REFUSED), true),
                    ("pytest", Blocked, Some(STOPPED), true),
                ],
                (2, "pytest", 2, true, true),
            ),
            (
                "another call refused last",
                vec![
                    ("pytest", Blocked, None, true),
                    ("make", Blocked, None, true),
                ],
                (2, "make", 1, false, true),
            ),
            (
                "a call ran, the loop goes on",
                vec![
                    ("pytest", Blocked, Some(REFUSED), true),
                    ("cat log", Completed, None, true),
                ],
                (1, "pytest", 1, false, false),
            ),
            (
                "the session moved on: forgotten",
                vec![
                    ("pytest", Blocked, Some(STOPPED), true),
                    ("git diff", Completed, None, false),
                ],
                (0, "", 0, false, false),
            ),
        ];
        for (name, calls, (blocked, shown, of_call, stopped, stands)) in rows {
            let mut refusals = SessionRefusals::default();
            for (i, (command, status, refusal, flagged)) in calls.into_iter().enumerate() {
                let at = 1_796_000_000_000 + i64::try_from(i).unwrap() * 1_000;
                refusals.observe(&call(command, status, refusal, at), || flagged);
            }
            let got = (
                refusals.blocked,
                refusals.call.as_str(),
                refusals.of_call,
                refusals.stopped,
                refusals.stands(),
            );
            assert_eq!(got, (blocked, shown, of_call, stopped, stands), "{name}");
        }
    }

    /// A tree sums its sessions' refusals, names the latest refused call, is stopped when one
    /// session was, and stands when one session's latest call was refused.
    #[test]
    fn a_trees_refusals_from_its_sessions() {
        let root = SessionRefusals {
            blocked: 2,
            call: "pytest".to_owned(),
            of_call: 2,
            at_ms: Some(2_000),
            stopped: false,
            ran_since: true,
        };
        let sub = SessionRefusals {
            blocked: 3,
            call: "grep TODO".to_owned(),
            of_call: 3,
            at_ms: Some(5_000),
            stopped: true,
            ran_since: false,
        };
        let none = SessionRefusals::default();
        let (tree, stands) = tree_refusals([&root, &none, &sub]);
        assert_eq!(
            tree,
            Refusals {
                blocked: 5,
                call: "grep TODO".to_owned(),
                of_call: 3,
                stopped: true,
            }
        );
        assert!(stands);
        let (tree, stands) = tree_refusals([&root]);
        assert_eq!(
            (tree.blocked, tree.call.as_str(), stands),
            (2, "pytest", false)
        );
        assert_eq!(tree_refusals([&none]), (Refusals::default(), false));
    }

    /// The ladder's stop message is what [`STOPPED_PREFIX`] recognises, and its refusals are
    /// not.
    #[test]
    fn the_stop_prefix_is_the_ladders() {
        let config = LadderConfig {
            mode: ActMode::Stop,
            ..LadderConfig::default()
        };
        let mut state = LadderState::default();
        let mut messages = Vec::new();
        for n in 3..12 {
            let event = PendingEvent {
                pending: detect_core::PendingCall {
                    flagged: true,
                    changes: false,
                    same_calls: n,
                    echoed: n - 1,
                    failed: n,
                    last_ago: Some(1),
                },
                call_key: "bash pytest".into(),
                shown: "pytest".into(),
                returned: None,
                can: AgentCan {
                    add_context: true,
                    stop: true,
                },
            };
            if let Some(action) = state.decide(&config, &event).action {
                messages.push(action);
            }
        }
        let stop = messages
            .iter()
            .find(|a| matches!(a, HookAction::Stop(_)))
            .expect("the ladder stops the session");
        assert!(
            stop.message().starts_with(STOPPED_PREFIX),
            "{}",
            stop.message()
        );
        for refusal in messages
            .iter()
            .filter(|a| matches!(a, HookAction::Refuse(_)))
        {
            assert!(!refusal.message().starts_with(STOPPED_PREFIX));
        }
    }
}
