//! What one tick saw and did: the journal's closing line, the human form, JSON, and the tick's
//! history events for `/metrics`.

use super::sources::Collected;
use crate::fleet::SyncReport;
use crate::journal::Line;
use crate::notify::SendReport;
use crate::stored::job_event;
use crate::text::escape_control;
use agentwatch_store::{EventKind, JobEvent};
use alert_state::{Decision, DecisionKind};
use detect_core::Judgement;
use serde_json::{Value, json};

/// Decisions that fired an event (trigger, escalate, resolve).
pub(super) fn fired(decisions: &[Decision]) -> usize {
    decisions.iter().filter(|d| d.dispatch.is_some()).count()
}

/// What one tick saw and did.
#[derive(Debug)]
pub struct TickReport {
    pub now: i64,
    pub outcome: &'static str,
    pub sources: Vec<String>,
    pub failed: Vec<(String, String)>,
    /// Sessions (or files) the sources' deadlines left unread: kept for the next tick.
    pub deadline_skipped: usize,
    /// Roots of trees not judged as looping now: no new call within `watchdog.stale_after_s`.
    pub stale: Vec<String>,
    /// Sources that were not there (see [`Collected::skipped`]).
    pub skipped: Vec<(String, String)>,
    pub judgement: Judgement,
    pub decisions: Vec<Decision>,
    pub sends: Vec<(String, SendReport)>,
    /// Each Alertmanager channel's post: new, re-asserted and ended alerts together.
    pub alertmanager: Vec<SyncReport>,
    /// When a channel holding back an outbox event is free again (the alert state's
    /// `next_wakeup`, while anything is pending).
    pub next_wakeup: Option<i64>,
    /// Sessions stopped (`opencode.on_loop = "abort"`): session, `sent`, `failed` or `dry_run`.
    pub aborts: Vec<(String, String)>,
    /// Open loop alerts whose tree is flagged now (judged this tick or kept from the store).
    pub open_flagged: usize,
}

impl TickReport {
    pub(super) fn empty(now: i64, collected: &Collected) -> Self {
        Self {
            now,
            outcome: "no_source",
            sources: collected.answered.clone(),
            failed: collected.failed.clone(),
            deadline_skipped: collected.deadline_skipped,
            stale: Vec::new(),
            skipped: collected.skipped.clone(),
            judgement: Judgement {
                sessions: vec![],
                trees: vec![],
            },
            decisions: vec![],
            sends: vec![],
            alertmanager: vec![],
            next_wakeup: None,
            aborts: vec![],
            open_flagged: 0,
        }
    }

    /// Whether the tick found a loop alerted: it opened an alert, or a tree with an open alert
    /// was judged flagged again (the follower then lets the loop's next calls coalesce).
    pub fn found_loop_alerted(&self) -> bool {
        self.decisions.iter().any(|d| {
            alert_state::is_loop_key(&d.dedup_key)
                && matches!(
                    d.kind,
                    DecisionKind::Trigger
                        | DecisionKind::Escalate
                        | DecisionKind::StillFlagged
                        | DecisionKind::Repeat
                        | DecisionKind::Blocked
                )
        })
    }

    /// The tick and its deliveries, as history for `/metrics` (`agentwatch_events`).
    pub fn events(&self, duration_ms: Option<i64>) -> Vec<JobEvent> {
        let tick = job_event(
            self.now,
            "watch",
            EventKind::Tick,
            "",
            self.outcome,
            duration_ms,
        );
        // An Alertmanager channel's delivery is its one post of the tick (new, re-asserted and
        // ended alerts together), so a channel that is down counts failed every tick.
        let posted = |channel: &str| self.alertmanager.iter().any(|a| a.channel == channel);
        let deliveries = self
            .sends
            .iter()
            .map(|(_, s)| (&s.channel, &s.result))
            .filter(|(channel, _)| !posted(channel))
            .chain(self.alertmanager.iter().map(|a| (&a.channel, &a.result)))
            .map(|(channel, result)| {
                job_event(
                    self.now,
                    "watch",
                    EventKind::Delivery,
                    channel,
                    result,
                    None,
                )
            });
        std::iter::once(tick).chain(deliveries).collect()
    }

    /// Events fired (trigger, escalate, resolve).
    pub fn fired(&self) -> usize {
        fired(&self.decisions)
    }

    /// The tick's closing journal line: what it saw and fired, and how many open alerts have
    /// their tree flagged now (`still_flagged`, with each alert flagged again on its own line
    /// only with `verbose`), so a quiet tick is one line.
    pub fn done_line(&self, verbose: bool) -> Line {
        let trees = &self.judgement.trees;
        let still = self.open_flagged;
        let line = Line::info("watchdog", self.now)
            .field("tick", "done")
            .field("outcome", self.outcome)
            .field("sessions", self.judgement.sessions.len())
            .field("trees", trees.len())
            .field("flagged", trees.iter().filter(|t| t.flagged).count())
            .field("fired", self.fired());
        if verbose {
            line
        } else {
            line.field("still_flagged", still)
        }
    }

    /// The human form: trees, alert events and their routes, a closing count.
    pub fn render(&self, verbose: bool) -> String {
        let mut out = String::new();
        if verbose {
            for v in &self.judgement.sessions {
                let mark = if v.flagged { "FLAGGED" } else { "ok" };
                out.push_str(&format!(
                    "session {} {mark} {}\n",
                    escape_control(&v.id),
                    escape_control(&v.summary())
                ));
            }
        }
        for t in &self.judgement.trees {
            let state = if self.stale.contains(&t.root) {
                "stale (no new call within watchdog.stale_after_s)".to_owned()
            } else if t.flagged {
                let ids: Vec<&str> = t.flagged_sessions.iter().map(|s| s.id.as_str()).collect();
                format!("FLAGGED by {}", escape_control(&ids.join(", ")))
            } else {
                "ok".to_owned()
            };
            out.push_str(&format!(
                "tree {} sessions={} {state}\n",
                escape_control(&t.root),
                t.sessions.len()
            ));
        }
        for d in &self.decisions {
            let Some(dispatch) = &d.dispatch else {
                continue;
            };
            let e = &dispatch.event;
            out.push_str(&format!(
                "alert {} {} severity={} title={:?}\n",
                e.state.as_str(),
                escape_control(&e.dedup_key),
                e.severity.as_str(),
                e.title
            ));
            for route in &dispatch.routes {
                let sent = self
                    .sends
                    .iter()
                    .find(|(key, s)| key == &e.dedup_key && s.channel == route.channel)
                    .map(|(_, s)| s.result.as_str());
                out.push_str(&format!(
                    "  -> {}: {}\n",
                    route.channel,
                    sent.unwrap_or(&route.reason)
                ));
            }
        }
        for sync in &self.alertmanager {
            out.push_str(&format!(
                "alertmanager {}: {} open={} ending={}{}\n",
                sync.channel,
                sync.result,
                sync.open,
                sync.ending,
                sync.message
                    .as_deref()
                    .map(|m| format!(": {m}"))
                    .unwrap_or_default()
            ));
        }
        out.push_str(&format!(
            "# {}: {} session(s), {}/{} tree(s) flagged, {} alert event(s)\n",
            self.outcome,
            self.judgement.sessions.len(),
            self.judgement
                .trees
                .iter()
                .filter(|t| t.flagged && !self.stale.contains(&t.root))
                .count(),
            self.judgement.trees.len(),
            self.fired()
        ));
        out
    }

    /// The tick as one JSON object.
    pub fn to_json(&self) -> Value {
        json!({
            "now": self.now,
            "outcome": self.outcome,
            "sources": self.sources,
            "failed": self.failed.iter().map(|(s, p)| json!({"source": s, "problem": p})).collect::<Vec<_>>(),
            "deadline_skipped": self.deadline_skipped,
            "skipped": self.skipped.iter().map(|(s, p)| json!({"source": s, "reason": p})).collect::<Vec<_>>(),
            "sessions": self.judgement.sessions,
            "trees": self.judgement.trees,
            "stale": self.stale,
            "decisions": self.decisions,
            "sends": self.sends.iter().map(|(k, s)| json!({"dedup_key": k, "channel": s.channel, "result": s.result, "message": s.message})).collect::<Vec<_>>(),
            "alertmanager": self.alertmanager,
            "aborts": self.aborts.iter().map(|(s, r)| json!({"session": s, "result": r})).collect::<Vec<_>>(),
        })
    }
}
