//! The recovery notice (schema v1) and the splash visibility rule.
//!
//! The notice is one JSON file the stream page polls so viewers are not left watching an
//! unexplained freeze. Its JSON matches the spec exactly (`camelCase` keys, `toRung`/`toLabel` only
//! for a reset):
//!
//! ```json
//! {"v":1,"id":"1790629095-reset","phase":"countdown","action":"reset","fromRung":12,
//!  "fromLabel":"MT. MOON","toRung":11,"toLabel":"PEWTER CITY","reason":"unrewarded",
//!  "loop":["GO OBJECTIVE","GO WARP"],"stuckSeconds":1800,"announcedAt":1790629095,
//!  "executeAt":1790629155,"updatedAt":1790629160}
//! ```
//!
//! Phases run `countdown` (`executeAt = announcedAt + countdown`) -> `acting` -> `done` | `failed`;
//! every write refreshes `updatedAt` ([`RecoveryNotice::advance`]). Writing the file atomically is
//! the adapter's job; this module only builds and reads the value.

use crate::{UnixSeconds, elapsed};
use serde::{Deserialize, Serialize};

/// The only schema version this crate reads and writes.
pub const NOTICE_VERSION: u32 = 1;

/// Where a recovery is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    /// Announced; the action runs at `executeAt`.
    Countdown,
    /// The service is being stopped, restarted or reset.
    Acting,
    /// The action succeeded.
    Done,
    /// The action failed.
    Failed,
    /// Called off during the countdown: nothing was done; the splash hides at once.
    Cancelled,
}

/// What the recovery does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NoticeAction {
    Restart,
    Reset,
}

impl NoticeAction {
    fn as_str(self) -> &'static str {
        match self {
            Self::Restart => "restart",
            Self::Reset => "reset",
        }
    }
}

/// The recovery notice, schema v1.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RecoveryNotice {
    /// Schema version, always 1.
    pub v: u32,
    /// Unique per recovery: `{announcedAt}-{action}`.
    pub id: String,
    pub phase: Phase,
    pub action: NoticeAction,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_rung: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_label: Option<String>,
    /// Only for `action: "reset"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to_rung: Option<i64>,
    /// Only for `action: "reset"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to_label: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The repeating block of the loop (at most four names).
    #[serde(rename = "loop", default)]
    pub loop_names: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stuck_seconds: Option<i64>,
    pub announced_at: UnixSeconds,
    pub execute_at: UnixSeconds,
    pub updated_at: UnixSeconds,
}

/// What a recovery is about, before it is announced.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NoticeDraft {
    pub from_rung: Option<i64>,
    pub from_label: Option<String>,
    pub reason: Option<String>,
    pub loop_names: Vec<String>,
    pub stuck_seconds: Option<i64>,
}

/// Why a notice text was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NoticeError {
    #[error("recovery notice is not valid JSON of schema v1: {detail}")]
    Malformed { detail: String },
    #[error("recovery notice has schema version {found}; only version 1 is supported")]
    UnsupportedVersion { found: u32 },
    #[error("recovery notice has an empty id")]
    EmptyId,
}

/// The most loop names a notice carries.
pub const MAX_LOOP_NAMES: usize = 4;

impl RecoveryNotice {
    /// Announces a restart: phase `countdown`, `executeAt = announced_at + countdown`.
    pub fn announce_restart(draft: NoticeDraft, announced_at: UnixSeconds, countdown: u32) -> Self {
        let mut loop_names = draft.loop_names;
        loop_names.truncate(MAX_LOOP_NAMES);
        let action = NoticeAction::Restart;
        Self {
            v: NOTICE_VERSION,
            id: format!("{announced_at}-{}", action.as_str()),
            phase: Phase::Countdown,
            action,
            from_rung: draft.from_rung,
            from_label: draft.from_label,
            to_rung: None,
            to_label: None,
            reason: draft.reason,
            loop_names,
            stuck_seconds: draft.stuck_seconds,
            announced_at,
            execute_at: announced_at.saturating_add(i64::from(countdown)),
            updated_at: announced_at,
        }
    }

    /// The same notice in `phase`, written at `now` (`updatedAt` refreshed).
    pub fn advance(&self, phase: Phase, now: UnixSeconds) -> Self {
        Self {
            phase,
            updated_at: now,
            ..self.clone()
        }
    }

    /// The notice as the one-line JSON the file holds.
    pub fn to_json(&self) -> String {
        // A struct of strings, integers and vectors always serialises.
        serde_json::to_string(self).unwrap_or_default()
    }

    /// What the stream page shows at `now`. See [`Splash`].
    pub fn splash(&self, now: UnixSeconds) -> Splash {
        splash_visibility(self, now)
    }
}

/// Parses a notice file's text; rejects other schema versions.
pub fn parse_notice(text: &str) -> Result<RecoveryNotice, NoticeError> {
    let notice: RecoveryNotice =
        serde_json::from_str(text).map_err(|err| NoticeError::Malformed {
            detail: err.to_string(),
        })?;
    if notice.v != NOTICE_VERSION {
        return Err(NoticeError::UnsupportedVersion { found: notice.v });
    }
    if notice.id.is_empty() {
        return Err(NoticeError::EmptyId);
    }
    Ok(notice)
}

/// The splash limits of decisions.md, measured from `updatedAt` (all boundaries inclusive).
pub mod splash_limits {
    /// A notice older than this is ignored.
    pub const STALE_AFTER: i64 = 900;
    /// A notice dated further in the future than this (clock skew) is ignored.
    pub const FUTURE_SKEW: i64 = 120;
    /// `acting` shows at most this long (the helper may have died).
    pub const ACTING_FOR: i64 = 600;
    /// `done` shows this long.
    pub const DONE_FOR: i64 = 8;
    /// `failed` shows this long.
    pub const FAILED_FOR: i64 = 20;
}

/// Why the splash is hidden.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HiddenBecause {
    /// `updatedAt` is more than 900 s ago.
    Stale,
    /// `updatedAt` is more than 120 s in the future.
    FromTheFuture,
    /// The phase's display time (`acting` 600 s, `done` 8 s, `failed` 20 s) is over.
    PhaseOver,
}

/// What the stream page shows for a notice at a given time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Splash {
    Hidden(HiddenBecause),
    /// Counting down; `remaining` seconds to `executeAt`, never below 0.
    Countdown {
        remaining: i64,
    },
    Acting,
    Done,
    Failed,
}

/// The splash rule: a pure function of (notice, now). `cancelled` is hidden at once. Else
/// `age = now - updatedAt`; hidden when
/// `age > 900` or `age < -120`; `countdown` shows until then; `acting` while `age <= 600`; `done`
/// while `age <= 8`; `failed` while `age <= 20`.
pub fn splash_visibility(notice: &RecoveryNotice, now: UnixSeconds) -> Splash {
    use splash_limits::*;
    let age = elapsed(now, notice.updated_at);
    if age > STALE_AFTER {
        return Splash::Hidden(HiddenBecause::Stale);
    }
    if age < -FUTURE_SKEW {
        return Splash::Hidden(HiddenBecause::FromTheFuture);
    }
    let within = |limit: i64, shown: Splash| {
        if age <= limit {
            shown
        } else {
            Splash::Hidden(HiddenBecause::PhaseOver)
        }
    };
    match notice.phase {
        Phase::Countdown => Splash::Countdown {
            remaining: elapsed(notice.execute_at, now).max(0),
        },
        Phase::Acting => within(ACTING_FOR, Splash::Acting),
        Phase::Done => within(DONE_FOR, Splash::Done),
        Phase::Failed => within(FAILED_FOR, Splash::Failed),
        Phase::Cancelled => Splash::Hidden(HiddenBecause::PhaseOver),
    }
}
