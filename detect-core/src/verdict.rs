//! Verdicts: what the detector says about a session and a tree, with every figure of the reason.

use serde::{Deserialize, Serialize};

/// A loop signal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Signal {
    /// One call is more than `dup_min` of the window.
    Dup,
    /// One target is called `top_min` times in the window.
    Top,
    /// One call is repeated `cum_min` times since the last landing.
    Slow,
    /// One file is read `cover_min` times its length in the window.
    Coverage,
    /// One block of 1-6 calls repeated in a row (at least 3 times) covers `cycle_min` calls of
    /// the span (`precise` only).
    Cycle,
    /// The lines of one file were shown `reread_min` times over in the window (`precise` only).
    Reread,
    /// The same call with the same result (alone, or a block of 2-3) ran `repeat_min` calls in
    /// a row since the last landing, or 6 of the session's last 8 calls (or 9 of its last 14)
    /// echo recent calls (the same call with the same result, or a view of lines at least half
    /// shown since the last landing); fires before `min_calls` (`precise` only).
    Repeat,
    /// The session has done nothing but the same poll seeing the same result for `poll_max_s`
    /// seconds or `poll_max_calls` polls: the job it waits on shows nothing new (`precise`
    /// only); fires before `min_calls`.
    Stall,
}

impl Signal {
    pub const ALL: [Signal; 8] = [
        Signal::Dup,
        Signal::Top,
        Signal::Slow,
        Signal::Coverage,
        Signal::Cycle,
        Signal::Reread,
        Signal::Repeat,
        Signal::Stall,
    ];

    /// The position of the signal in [`Signal::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Signal::Dup => "dup",
            Signal::Top => "top",
            Signal::Slow => "slow",
            Signal::Coverage => "coverage",
            Signal::Cycle => "cycle",
            Signal::Reread => "reread",
            Signal::Repeat => "repeat",
            Signal::Stall => "stall",
        }
    }
}

impl std::fmt::Display for Signal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The figures behind a verdict. They are computed whether or not a signal fires.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Reason {
    /// Largest share of one call identity in the window (0..=1).
    pub dup: f64,
    /// Largest count of one target in the window.
    pub top: u32,
    /// That target (`tool what`).
    pub top_what: String,
    /// Largest count of one call identity over the span.
    pub slow: u32,
    /// Largest reread ratio of one file in the window.
    pub coverage: f64,
    /// That file.
    pub coverage_file: Option<String>,
    /// Whether a landing (own or a descendant's) has reset the span.
    pub landed: bool,
    /// Calls in the span: the calls after the most recent landing.
    pub calls_since_landed: usize,
    /// Calls in the window (the last `window` calls of the span).
    pub window_calls: usize,
    /// Whether the read-only threshold applied to `top`.
    pub read_only: bool,
    /// The longest stretch of the span made of one block of 1-6 calls repeated in a row at least
    /// 3 times, in calls (`precise` only; 0 otherwise).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cycle: u32,
    /// The largest ratio, for one file viewed in the window, of the lines shown (with repeats)
    /// to the distinct lines shown (`precise` only).
    #[serde(default, skip_serializing_if = "is_zero_f64")]
    pub reread: f64,
    /// That file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reread_file: Option<String>,
    /// The longest stretch of the span, in calls, made of the same call with the same result
    /// (output hash, else status and exit), or of one block of 2-3 such calls repeated at least
    /// twice in a row (`precise` only; 0 otherwise).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub repeat: u32,
    /// How many of the session's last 8 calls echo one of the 16 calls before them (the same
    /// call with the same result, across landings when the result is an output hash; or a view
    /// of lines at least half shown since the last landing; a poll never; `precise` only; 0
    /// otherwise).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub stale: u32,
    /// The same over the session's last 14 calls (`precise` only; 0 otherwise).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub stale_long: u32,
    /// How many of the session's calls since it last landed echo (as for `stale`; `precise`
    /// only; 0 otherwise).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub stale_span: u32,
    /// The session's calls since it last landed, its own landings only (`precise` only; 0
    /// otherwise).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub stale_span_calls: u32,
    /// How many of the session's last calls are one call that failed each time (status `error`
    /// or a non-zero exit), in a row, whatever the errors said (`precise` only; 0 otherwise).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub failing: u32,
    /// The most times one call and result occurs among the session's last 16 calls, of those
    /// that occur at least 4 times among its last 12 (`precise` only; 0 otherwise).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub recur: u32,
    /// How many of the session's last 11 calls were one of the calls before them again with
    /// the same result (a poll that saw the same included), when they repeat at most 4
    /// different calls (`precise` only; 0 otherwise).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub circle: u32,
    /// For how many seconds the session's last calls have been the same poll seeing the same
    /// result, from the first poll's result to the last poll's end (`precise` only; 0 otherwise,
    /// and for a single poll).
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub stall_s: u64,
    /// How many polls that run holds (`precise` only; 0 otherwise, and for a single poll).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub stall_polls: u32,
}

fn is_zero_u64(n: &u64) -> bool {
    *n == 0
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

fn is_zero_f64(x: &f64) -> bool {
    *x == 0.0
}

/// The verdict on one session, judged on its own calls.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionVerdict {
    pub id: String,
    pub flagged: bool,
    pub signals: Vec<Signal>,
    pub reason: Reason,
}

impl SessionVerdict {
    /// One line a person reads in the journal.
    pub fn summary(&self) -> String {
        let r = &self.reason;
        let fired = if self.signals.is_empty() {
            "none".to_owned()
        } else {
            self.signals
                .iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join(",")
        };
        let mut line = format!(
            "signals={fired} dup={:.2} top={} top_what={:?} slow={} coverage={:.2} coverage_file={:?} landed={} calls_since_landed={}",
            r.dup,
            r.top,
            r.top_what,
            r.slow,
            r.coverage,
            r.coverage_file.as_deref().unwrap_or(""),
            r.landed,
            r.calls_since_landed
        );
        // The precise profile's figures (zero, and left out, under the design).
        if r.cycle > 0 {
            line.push_str(&format!(" cycle={}", r.cycle));
        }
        if r.repeat > 0 {
            line.push_str(&format!(" repeat={}", r.repeat));
        }
        if r.stale > 0 {
            line.push_str(&format!(" stale={}", r.stale));
        }
        if r.stale_long > 0 {
            line.push_str(&format!(" stale_long={}", r.stale_long));
        }
        if r.stale_span > 0 {
            line.push_str(&format!(
                " stale_span={}/{}",
                r.stale_span, r.stale_span_calls
            ));
        }
        if r.failing > 0 {
            line.push_str(&format!(" failing={}", r.failing));
        }
        if r.recur > 0 {
            line.push_str(&format!(" recur={}", r.recur));
        }
        if r.circle > 0 {
            line.push_str(&format!(" circle={}", r.circle));
        }
        if let Some(file) = &r.reread_file {
            line.push_str(&format!(" reread={:.2} reread_file={file:?}", r.reread));
        }
        if r.stall_polls > 0 {
            line.push_str(&format!(
                " stall_s={} stall_polls={}",
                r.stall_s, r.stall_polls
            ));
            if self.signals.contains(&Signal::Stall) {
                line.push_str(" (stalled: the same poll, nothing new)");
            }
        }
        line
    }
}

/// The verdict on a tree of sessions linked by `parent_id`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TreeVerdict {
    pub root: String,
    /// `opencode-loop:{root}`: the alert key of this tree.
    pub dedup_key: String,
    pub flagged: bool,
    /// Every session of the tree, root first, then depth-first in input order.
    pub sessions: Vec<String>,
    /// The flagged sessions and why.
    pub flagged_sessions: Vec<SessionVerdict>,
    /// Anything odd about the tree's shape (a broken parent cycle), for the journal.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// The prefix of every loop alert's key: the one place the literal lives.
pub const DEDUP_KEY_PREFIX: &str = "opencode-loop:";

/// The alert key of the tree rooted at `root`: `opencode-loop:{root}`.
pub fn dedup_key(root: &str) -> String {
    format!("{DEDUP_KEY_PREFIX}{root}")
}

/// What the detector says of a call about to run, before its result: whether the session is
/// flagged, and how this very call (its identity) fared among the session's last calls. A
/// pre-tool hook asks it before letting a call run ([`crate::SessionDetector::pending`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct PendingCall {
    /// The session is flagged on the calls it has made.
    pub flagged: bool,
    /// The call would change something (an edit or write tool's call not sent before, a bash
    /// write not made before): it breaks any loop, whatever it returns.
    pub changes: bool,
    /// How many of the session's last calls (the detector's history, at most 16) were this
    /// call; 0 under a profile that keeps no history.
    pub same_calls: u32,
    /// How many of those returned what an earlier one of them returned.
    pub echoed: u32,
    /// How many of those failed.
    pub failed: u32,
    /// How many calls back it last ran (1: the last call), when it is in the history.
    pub last_ago: Option<u32>,
}
