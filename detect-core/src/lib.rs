//! # detect-core: the loop detector
//!
//! A pure library (no clock, file, network, process or environment access) that judges AI
//! coding-agent sessions for loops from their tool-call history, as specified in the opencode
//! loop-watchdog design and fixed in `decisions.md` section 1.
//!
//! Data flows one way:
//!
//! ```text
//! Session { calls } --matcher--> CallFacts { identity, target, landed, read }
//!                   --detector--> span (calls after the latest landing) -> window -> signals
//!                   --tree------> SessionVerdict per session, TreeVerdict per root
//! ```
//!
//! - [`normalize_bash`], [`call_identity`] and the target key decide which calls are "the same".
//! - A *landed* call (a real edit, a completed write, a successful `git commit`) resets the
//!   evaluation span; so does a descendant session's landing, matched by time.
//! - Four signals over the span's last `window` calls: `dup`, `top`, `slow`, `coverage`.
//! - Two profiles ([`Profile`]): `design` (the default, decisions.md exactly) and `precise`
//!   (path-aware bash targets, bash writes that land, polls that only count as slow, and the
//!   `cycle` and `reread` signals; each change is a [`Rule`], measured in `docs/detection.md`).
//! - [`judge_session`] judges a whole history; [`SessionDetector`] takes calls one at a time and
//!   always agrees with it. [`judge_sessions`] judges every session and tree of a set.
//!
//! ```
//! use detect_core::{Call, DetectConfig, Session, judge_sessions};
//! use serde_json::json;
//!
//! let mut session = Session::new("ses_a");
//! for _ in 0..40 {
//!     session.calls.push(Call::completed("bash", json!({"command": "cd /p && pytest -x"})));
//! }
//! let judgement = judge_sessions(&[session], &DetectConfig::default());
//! assert!(judgement.trees[0].flagged);
//! assert_eq!(judgement.trees[0].dedup_key, "opencode-loop:ses_a");
//! ```
#![forbid(unsafe_code)]

mod bash;
mod config;
mod detector;
mod hand;
mod json;
mod matcher;
mod model;
mod names;
mod output;
mod progress;
mod scan;
mod shell;
mod tree;
mod verdict;

pub use bash::normalize_bash;
pub use config::{ConfigError, DETECT_KEYS, DetectConfig, Profile, Rule, Rules};
pub use detector::{
    CYCLE_MAX_PERIOD, CYCLE_MIN_REPEATS, DetectorSnapshot, SessionDetector, is_read_only,
    judge_facts, judge_session, latest_own_landing, no_progress_calls, session_facts,
    subagent_name,
};
pub use matcher::{
    CallContext, CallFacts, DEFAULT_READ_LIMIT, PATTERN_TARGET_CHARS, ReadFacts, ViewRange,
    basename, call_identity, canonical_json, resolve_path, total_lines_in_output,
};
pub use model::{
    Call, CallStatus, CallTime, CallWatcher, Label, NewDetector, ParseError, SESSION_FILE_FORMAT,
    Session, SessionCalls, SessionFile, SessionText, SharedText, Streamed, counted_sessions,
    detect_session_text, parse_judged_session_text, parse_session_text, scanned_cleanly,
    stream_session_texts, watch_session_text,
};
pub use output::{COMMITTED_KEY, normalize_output, output_hash, output_shows_commit, text_hash};
pub use scan::{Scanned, scan_session_texts};
pub use tree::{Forest, Judgement, judge_detectors, judge_sessions};
pub use verdict::{DEDUP_KEY_PREFIX, Reason, SessionVerdict, Signal, TreeVerdict, dedup_key};
