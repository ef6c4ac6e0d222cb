//! # detect-core: the loop detector
//!
//! A pure library (no clock, file, network, process or environment access) that judges AI
//! coding-agent sessions for loops from their tool-call history, as specified in the opencode
//! loop-watchdog design and fixed in `decisions.md` section 1, with the rules of the default
//! profile measured in `docs/detection.md`.
//!
//! Data flows one way:
//!
//! ```text
//! Session { calls } --matcher--> CallFacts { identity, target, landed, read, view, wait, result }
//!                   --progress-> landings the history shows, echoes, polls
//!                   --detector--> span (calls after the latest landing) -> window -> signals
//!                   --tree------> SessionVerdict per session, TreeVerdict per root
//! ```
//!
//! ## The call model
//!
//! The detector knows no agent by name: each adapter maps its agent's tools onto these (a tool
//! not listed keeps its name and is judged by its identity alone):
//!
//! | tool | input | what the detector reads |
//! |---|---|---|
//! | `read` | `{filePath, offset?, limit?}` | a file's lines shown (coverage, rereads); `metadata.total_lines`, `metadata.lines_read` |
//! | `edit` (also `multiedit`, `patch`, `apply_patch`) | `{filePath, …}` | lands when `metadata.diff` is not blank or `metadata.filediff` (or one of `metadata.files`) has `additions` + `deletions` > 0 |
//! | `write` | `{filePath, content, …}` | lands when it completes (the same content to the same file again: no landing) |
//! | `bash` | `{command}` (`description`, `timeout` ignored) | the command normalised ([`normalize_bash`]); `metadata.exit` (`null` is unknown); `metadata.committed`: the hash of the commit its output shows ([`output_commit`]), or `true` |
//! | `grep`, `glob` | `{pattern, path, …}` | their pattern is their target |
//! | `task` | `{…}` | a subagent: its session is a child (`parent_id`), judged on its own calls |
//! | `poll` | `{…}` (the job polled) | a look at a running job: never a loop by itself, a `stall` when it shows nothing new too long |
//!
//! Every call may carry `output_hash`, the hash of what it returned without its noise
//! ([`output_hash`]; [`Call::with_output`] keeps it and a commit the output shows). Statuses
//! `completed` and `error` count; `pending` and `running` do not. The tool lists are config
//! ([`DetectConfig`]: `reader_tools`, `edit_tools`, `write_tools`, `search_tools`,
//! `poll_tools`).
//!
//! ## Profiles and signals
//!
//! - [`normalize_bash`], [`call_identity`] and the target key decide which calls are "the same".
//! - A *landed* call (a real edit, a completed write, a successful `git commit`; under the
//!   default profile also a bash write that exits 0, a commit its output shows, a bash write of
//!   unknown exit confirmed by a view) resets the evaluation span; so does a descendant
//!   session's landing, matched by time.
//! - Two profiles ([`Profile`]): `precise`, the default for every agent (the design plus the
//!   rules of [`Rule`]: path-aware bash targets, bash writes that land, polls that never loop by
//!   themselves, progress read from outputs, and the `cycle`, `reread`, `repeat` and `stall`
//!   signals, the last two before `min_calls`), and `design` (decisions.md exactly: `dup`,
//!   `top`, `slow`, `coverage` over the span's last `window` calls).
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
mod document;
mod file;
mod hand;
mod hash;
mod json;
mod matcher;
mod meta;
mod model;
mod names;
mod output;
mod progress;
mod scan;
mod shell;
mod sink;
mod tree;
mod verdict;
mod watch;

pub use bash::normalize_bash;
pub use config::{ConfigError, DETECT_KEYS, DetectConfig, Profile, Rule, Rules};
pub use detector::{
    CYCLE_MAX_PERIOD, CYCLE_MIN_REPEATS, DetectorSnapshot, SessionDetector, is_read_only,
    judge_facts, judge_session, latest_own_landing, no_progress_calls, session_facts,
    subagent_name,
};
pub use document::{
    SessionText, SharedText, Streamed, counted_sessions, scanned_cleanly, stream_session_texts,
};
pub use file::SessionFile;
pub use matcher::{
    CallContext, CallFacts, DEFAULT_READ_LIMIT, PATTERN_TARGET_CHARS, ReadFacts, ViewRange,
    basename, call_identity, canonical_json, resolve_path, total_lines_in_output,
};
pub use model::{
    Call, CallStatus, CallTime, HOOK_MARKER, Label, ParseError, SESSION_FILE_FORMAT, Session,
    parse_judged_session_text, parse_session_text,
};
pub use output::{
    COMMITTED_KEY, normalize_output, output_commit, output_hash, output_shows_commit, text_hash,
};
pub use scan::{Scanned, scan_session_texts};
pub use sink::{CallWatcher, NewDetector};
pub use tree::{Forest, Judgement, judge_detectors, judge_sessions};
pub use verdict::{
    DEDUP_KEY_PREFIX, PendingCall, Reason, SessionVerdict, Signal, TreeVerdict, dedup_key,
};
pub use watch::{SessionCalls, detect_session_text, watch_session_text};
