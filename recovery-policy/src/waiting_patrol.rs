//! Waiting patrol: a child session that sits in `waiting` with an unchanged pane gets one gentle
//! `report status?` nudge, so a question nobody is looking at gets answered.
//!
//! # Rules (decisions.md section 3; defaults in brackets)
//!
//! * Only child sessions (a non-empty `parent_session_id`) in status `waiting` are watched.
//! * The caller hashes the captured pane (SHA-256, any stable hex string works) and passes
//!   `pane_hash`. The hash first seen starts the timer; a different hash resets it.
//! * When the pane has been unchanged for **more than** `threshold` \[600 s\], the session is nudged
//!   (action [`PatrolAction::Nudge`], `report status?`, no-wait). After a nudge, no other nudge for
//!   `nudge_dedup` \[3600 s\] (one at exactly 3600 s is allowed). The nudge counts when it is
//!   decided, whether or not the send succeeds, so a broken session is not hammered.
//! * A pane change resets the timer but keeps the time of the last nudge.
//! * A status change (not `waiting` any more), a session gone from the listing, or a session that
//!   is no longer a child forgets the session entirely.
//! * An unreadable pane (`pane_hash` absent) neither nudges nor resets: the tracker is kept.
//! * A failed listing must be passed as `None` ([`PatrolEvent::ListingUnavailable`]), never as an
//!   empty list: it keeps every tracker (agent-deck's own patrol wiped them all).
//!
//! # Decisions
//!
//! | name | when |
//! |---|---|
//! | `watching` | a waiting child seen for the first time; timer started |
//! | `pane-changed` | its pane hash changed; timer reset |
//! | `unchanged` | pane unchanged, not longer than `threshold` yet |
//! | `nudge` | unchanged for more than `threshold`, no nudge in the last `nudge_dedup`; action: nudge |
//! | `nudge-deduped` | would nudge, but the last nudge was less than `nudge_dedup` ago |
//! | `pane-unreadable` | no pane hash this time; tracker kept, no nudge |
//! | `forgotten` | the status changed, the session is gone or no longer a child |
//! | `listing-unavailable` | the caller could not list sessions; trackers kept |

use crate::restart_guard::SessionStatus;
use crate::{Decision, Policy, PolicyState, UnixSeconds, decision_names, elapsed};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// The nudge text.
pub const NUDGE_MESSAGE: &str = "report status?";

/// Tunables of the waiting patrol; defaults follow the design.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WaitingPatrolConfig {
    /// Nudge when the pane has been unchanged for more than this (seconds).
    pub threshold: u32,
    /// Least time between two nudges of one session (seconds).
    pub nudge_dedup: u32,
    /// The text sent.
    pub message: String,
    /// Mark actions as a dry run; decisions are unchanged.
    pub dry_run: bool,
}

impl Default for WaitingPatrolConfig {
    fn default() -> Self {
        Self {
            threshold: 600,
            nudge_dedup: 3600,
            message: NUDGE_MESSAGE.to_owned(),
            dry_run: false,
        }
    }
}

/// What the caller knows about one session.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
pub struct PatrolObservation {
    pub id: String,
    #[serde(default)]
    pub parent_session_id: Option<String>,
    #[serde(default)]
    pub status: SessionStatus,
    /// Hash of the captured pane; `None` when the pane could not be captured.
    #[serde(default)]
    pub pane_hash: Option<String>,
}

impl PatrolObservation {
    fn is_child(&self) -> bool {
        self.parent_session_id
            .as_deref()
            .is_some_and(|p| !p.trim().is_empty())
    }
}

/// What the caller saw. Deserialises from its timeline form (`agentwatch replay`,
/// `docs/replay.md`): `{"sessions": [...]}`, or `{"sessions": null}` when listing failed.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(from = "PatrolEventLine")]
pub enum PatrolEvent {
    /// The session listing (all sessions, children or not).
    Tick(Vec<PatrolObservation>),
    /// Listing the sessions failed.
    ListingUnavailable,
}

/// The timeline form of a [`PatrolEvent`].
#[derive(Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
enum PatrolEventLine {
    /// `null`: the listing failed.
    Sessions(Option<Vec<PatrolObservation>>),
}

impl From<PatrolEventLine> for PatrolEvent {
    fn from(line: PatrolEventLine) -> Self {
        match line {
            PatrolEventLine::Sessions(Some(sessions)) => Self::Tick(sessions),
            PatrolEventLine::Sessions(None) => Self::ListingUnavailable,
        }
    }
}

decision_names! {
    /// The machine names of the waiting patrol's decisions (see the module docs).
    pub enum PatrolDecisionName {
        Watching => "watching",
        PaneChanged => "pane-changed",
        Unchanged => "unchanged",
        Nudge => "nudge",
        NudgeDeduped => "nudge-deduped",
        PaneUnreadable => "pane-unreadable",
        Forgotten => "forgotten",
        ListingUnavailable => "listing-unavailable",
    }
}

/// What the caller must do.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum PatrolAction {
    /// `agent-deck [-p P] session send <session> "<message>" --no-wait`.
    Nudge {
        session: String,
        message: String,
        no_wait: bool,
        dry_run: bool,
    },
}

/// A decision of this policy.
pub type PatrolDecision = Decision<PatrolDecisionName, PatrolAction>;

/// One watched session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tracker {
    pub pane_hash: String,
    /// Since when the pane has had this hash.
    pub unchanged_since: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_nudge_at: Option<i64>,
}

/// What the patrol remembers between runs.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct WaitingPatrolState {
    pub trackers: BTreeMap<String, Tracker>,
}

impl PolicyState for WaitingPatrolState {
    const POLICY: &'static str = "waiting-patrol";
    const VERSION: u32 = 1;
}

use PatrolDecisionName as Name;

fn short(hash: &str) -> &str {
    hash.char_indices()
        .nth(12)
        .map_or(hash, |(cut, _)| &hash[..cut])
}

impl WaitingPatrolState {
    /// Applies one observation at `now` and returns its decisions, in a stable order.
    pub fn handle(
        &mut self,
        config: &WaitingPatrolConfig,
        event: &PatrolEvent,
        now: UnixSeconds,
    ) -> Vec<PatrolDecision> {
        for tracker in self.trackers.values_mut() {
            tracker.unchanged_since = tracker.unchanged_since.min(now);
            if let Some(t) = tracker.last_nudge_at.as_mut() {
                *t = (*t).min(now);
            }
        }
        match event {
            PatrolEvent::ListingUnavailable => vec![PatrolDecision::new(
                Name::ListingUnavailable,
                format!(
                    "session listing unavailable; {} tracker(s) kept",
                    self.trackers.len()
                ),
            )],
            PatrolEvent::Tick(sessions) => self.on_tick(config, sessions, now),
        }
    }

    fn on_tick(
        &mut self,
        config: &WaitingPatrolConfig,
        sessions: &[PatrolObservation],
        now: UnixSeconds,
    ) -> Vec<PatrolDecision> {
        let mut decisions = Vec::new();
        let mut seen = BTreeSet::new();
        for obs in sessions {
            if !seen.insert(obs.id.as_str()) {
                continue; // a duplicate id: the first listing wins
            }
            if let Some(decision) = self.observe(config, obs, now) {
                decisions.push(decision.about(&obs.id));
            }
        }
        let gone: Vec<String> = self
            .trackers
            .keys()
            .filter(|id| !seen.contains(id.as_str()))
            .cloned()
            .collect();
        for id in gone {
            self.trackers.remove(&id);
            decisions.push(
                PatrolDecision::new(Name::Forgotten, "session gone from the listing; forgotten")
                    .about(&id),
            );
        }
        decisions
    }

    /// One listed session: forget it, start watching it, or follow its tracker.
    fn observe(
        &mut self,
        config: &WaitingPatrolConfig,
        obs: &PatrolObservation,
        now: UnixSeconds,
    ) -> Option<PatrolDecision> {
        if !obs.is_child() || obs.status != SessionStatus::Waiting {
            return self.forget(obs);
        }
        let Some(hash) = obs.pane_hash.as_deref() else {
            return Some(self.pane_unreadable(obs));
        };
        let Some(tracker) = self.trackers.get_mut(&obs.id) else {
            return Some(self.start_watching(config, obs, hash, now));
        };
        Some(tracker.follow(config, obs, hash, now))
    }

    /// A session that is no longer a waiting child: its tracker dropped, if it had one.
    fn forget(&mut self, obs: &PatrolObservation) -> Option<PatrolDecision> {
        self.trackers.remove(&obs.id)?;
        let why = if obs.is_child() {
            format!("status is now {}", obs.status.as_str())
        } else {
            "no longer a child session".to_owned()
        };
        Some(PatrolDecision::new(
            Name::Forgotten,
            format!("{why}; forgotten"),
        ))
    }

    /// A waiting child whose pane could not be captured: its tracker, if any, kept as it is.
    fn pane_unreadable(&self, obs: &PatrolObservation) -> PatrolDecision {
        let kept = if self.trackers.contains_key(&obs.id) {
            "tracker kept"
        } else {
            "not tracked yet"
        };
        PatrolDecision::new(
            Name::PaneUnreadable,
            format!("pane could not be captured; {kept}, no nudge"),
        )
    }

    /// A waiting child seen for the first time: its pane's timer starts now.
    fn start_watching(
        &mut self,
        config: &WaitingPatrolConfig,
        obs: &PatrolObservation,
        hash: &str,
        now: UnixSeconds,
    ) -> PatrolDecision {
        self.trackers.insert(
            obs.id.clone(),
            Tracker {
                pane_hash: hash.to_owned(),
                unchanged_since: now,
                last_nudge_at: None,
            },
        );
        PatrolDecision::new(
            Name::Watching,
            format!(
                "child waiting with pane {}; nudge if unchanged for more than {} s",
                short(hash),
                config.threshold
            ),
        )
    }
}

impl Tracker {
    /// A watched child still waiting with pane `hash`: reset the timer when the pane changed,
    /// else nudge once it has been unchanged past the threshold and no nudge is recent.
    fn follow(
        &mut self,
        config: &WaitingPatrolConfig,
        obs: &PatrolObservation,
        hash: &str,
        now: UnixSeconds,
    ) -> PatrolDecision {
        if self.pane_hash != hash {
            self.pane_hash = hash.to_owned();
            self.unchanged_since = now;
            return PatrolDecision::new(
                Name::PaneChanged,
                format!("pane changed to {}; timer reset", short(hash)),
            );
        }
        let threshold = i64::from(config.threshold);
        let unchanged = elapsed(now, self.unchanged_since);
        if unchanged <= threshold {
            return PatrolDecision::new(
                Name::Unchanged,
                format!("pane unchanged for {unchanged} s; nudge after more than {threshold} s"),
            );
        }
        let dedup = i64::from(config.nudge_dedup);
        if let Some(last) = self.last_nudge_at
            && elapsed(now, last) < dedup
        {
            let ago = elapsed(now, last);
            return PatrolDecision::new(
                Name::NudgeDeduped,
                format!(
                    "pane unchanged for {unchanged} s; last nudge {ago} s ago, next in {} s",
                    dedup.saturating_sub(ago)
                ),
            );
        }
        self.last_nudge_at = Some(now);
        PatrolDecision::new(
            Name::Nudge,
            format!("waiting with an unchanged pane for {unchanged} s; nudging"),
        )
        .with_action(PatrolAction::Nudge {
            session: obs.id.clone(),
            message: config.message.clone(),
            no_wait: true,
            dry_run: config.dry_run,
        })
    }
}

impl Policy for WaitingPatrolState {
    type Config = WaitingPatrolConfig;
    type Event = PatrolEvent;
    type Name = PatrolDecisionName;
    type Action = PatrolAction;

    /// [`WaitingPatrolState::handle`].
    fn feed(
        &mut self,
        config: &WaitingPatrolConfig,
        event: &PatrolEvent,
        now: UnixSeconds,
    ) -> Vec<PatrolDecision> {
        self.handle(config, event, now)
    }

    /// The first moment a watched session would be nudged if its pane stays as it is: more than
    /// `threshold` after its pane last changed, and at least `nudge_dedup` after its last nudge.
    /// `None` when nothing is watched (or every nudge is overdue and waits for a readable pane).
    fn next_wakeup(&self, config: &WaitingPatrolConfig, now: UnixSeconds) -> Option<i64> {
        self.trackers
            .values()
            .map(|tracker| {
                let due = tracker
                    .unchanged_since
                    .saturating_add(i64::from(config.threshold))
                    .saturating_add(1);
                tracker.last_nudge_at.map_or(due, |last| {
                    due.max(last.saturating_add(i64::from(config.nudge_dedup)))
                })
            })
            .filter(|&at| at > now)
            .min()
    }
}
