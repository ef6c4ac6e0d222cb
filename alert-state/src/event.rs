//! The outgoing event: severity, the PagerDuty-Events-v2-shaped [`AlertEvent`], and the naming
//! rules for dedup keys and titles.

use crate::refusal::Refusals;
use serde::{Deserialize, Serialize};
use std::fmt;

/// How loud an alert is. Ordered: `Info < Warning < Critical`, which is what channel
/// `min_severity` gates compare against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// A resolved alert.
    Info,
    /// A loop the watchdog is not yet sure about (first ticks, no LLM confirmation).
    Warning,
    /// A confirmed or persistent loop.
    Critical,
}

impl Severity {
    /// The lowercase wire name (`info`, `warning`, `critical`).
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Info => "info",
            Self::Warning => "warning",
            Self::Critical => "critical",
        }
    }
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Which transition of the alert an event announces (the PagerDuty-style `state` field).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EventState {
    /// A new alert opened.
    Trigger,
    /// An open alert became critical.
    Escalate,
    /// An open alert is over.
    Resolve,
    /// agentwatch's own hook refused calls of the alert's tree (its first refusal, or it
    /// stopped the session): the alert's severity, its refusals in `details.blocked`.
    Blocked,
}

impl EventState {
    /// The lowercase wire name (`trigger`, `escalate`, `resolve`, `blocked`).
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Trigger => "trigger",
            Self::Escalate => "escalate",
            Self::Resolve => "resolve",
            Self::Blocked => "blocked",
        }
    }
}

impl fmt::Display for EventState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One notification, in the shape of a `PagerDuty` Events v2 event.
///
/// The crate builds it; the caller's channel implementations deliver it (for a desktop channel:
/// `notify-send -u {urgency} {title} {summary}`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AlertEvent {
    /// `opencode-loop:{root_session_id}`, see [`dedup_key_for_root`].
    pub dedup_key: String,
    /// The alert's severity after this transition (`info` for a resolve).
    pub severity: Severity,
    /// `trigger`, `escalate`, `resolve` or `blocked`.
    pub state: EventState,
    /// `opencode loop: {agent}`, see [`title_for_agent`].
    pub title: String,
    /// One sentence for the operator.
    pub summary: String,
    /// Machine-readable context: root, agent, counters, timestamps, LLM opinion, verdict, and
    /// the hook's refusals (`blocked`, [`Refusals`]) once the tree has any.
    pub details: serde_json::Value,
    /// Who sent it, from [`AlertConfig::source`](crate::AlertConfig::source).
    pub source: String,
}

impl AlertEvent {
    /// The page that shows this alert (`details.link`: `watchdog.dashboard_base_url` + the tree
    /// page, set by the caller), which channels show beside the summary.
    #[must_use]
    pub fn link(&self) -> Option<&str> {
        self.details
            .get("link")
            .and_then(serde_json::Value::as_str)
            .filter(|l| !l.trim().is_empty())
    }

    /// The event's identity: the same for every send of this one transition (a re-send after a
    /// crash between the send and its record carries it again), different for any other. Made
    /// of the dedup key, the state and the alert's `details.opened_at` (a grouped notification:
    /// its members' identities, `details.event_ids`; a `blocked` event: also the refusals it
    /// reports, as an alert has two, the first refusal and the stop), hashed: `evt_` and 16 hex
    /// digits. Sent as `event_id` in a JSON webhook's body and as every webhook's
    /// `Idempotency-Key` header, so a receiver can drop a repeat.
    #[must_use]
    pub fn event_id(&self) -> String {
        let part = |name: &str| self.details.get(name).map(ToString::to_string);
        let mut basis = format!(
            "{}\n{}\n{}\n{}",
            self.dedup_key,
            self.state,
            part("opened_at").unwrap_or_default(),
            part("event_ids").unwrap_or_default()
        );
        if self.state == EventState::Blocked {
            basis.push('\n');
            basis.push_str(&part("blocked").unwrap_or_default());
        }
        format!("evt_{}", detect_core::text_hash(&basis))
    }

    /// The hook's refusals in the event's tree (`details.blocked`), when it has any.
    #[must_use]
    pub fn refusals(&self) -> Option<Refusals> {
        let value = self.details.get("blocked")?;
        serde_json::from_value::<Refusals>(value.clone())
            .ok()
            .filter(|r| !r.is_empty())
    }

    /// Set `details.link` (a non-object `details` is kept under `details.details`).
    pub fn set_link(&mut self, link: String) {
        if !self.details.is_object() {
            let old = std::mem::take(&mut self.details);
            self.details = serde_json::json!({});
            if !old.is_null() {
                self.details["details"] = old;
            }
        }
        self.details["link"] = serde_json::Value::String(link);
    }
}

/// The prefix of an opencode loop's dedup key (detect-core's, where the literal lives).
pub use detect_core::DEDUP_KEY_PREFIX;

/// What follows the agent's name in a loop's dedup key: `claude-loop:{root}`.
pub const LOOP_KEY_MARK: &str = "-loop:";

/// The dedup key of an opencode root session's alert: `opencode-loop:{root}`, the same key the
/// detector puts on its tree verdicts ([`detect_core::dedup_key`], which this delegates to).
#[must_use]
pub fn dedup_key_for_root(root: &str) -> String {
    detect_core::dedup_key(root)
}

/// The dedup key of a loop of `family`'s root session: `{family}-loop:{root}` (`claude`,
/// `codex`, `gemini`); an empty family is opencode's.
#[must_use]
pub fn loop_key(family: &str, root: &str) -> String {
    if family.is_empty() {
        dedup_key_for_root(root)
    } else {
        format!("{family}{LOOP_KEY_MARK}{root}")
    }
}

/// The root session of a loop's dedup key (any agent's: `{family}-loop:{root}`, the family
/// lowercase letters and digits); `None` for another alert's key (`blind:…`, `deck:…`).
#[must_use]
pub fn loop_root(key: &str) -> Option<&str> {
    let (family, root) = key.split_once(LOOP_KEY_MARK)?;
    let named = !family.is_empty()
        && family
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
    named.then_some(root)
}

/// Whether a dedup key is a loop's (any agent's), not a blind source's or a deck alarm's.
#[must_use]
pub fn is_loop_key(key: &str) -> bool {
    loop_root(key).is_some()
}

/// The alert title for an agent: `opencode loop: {agent}`; a blank agent name reads
/// `opencode loop: unknown agent`.
#[must_use]
pub fn title_for_agent(agent: &str) -> String {
    let agent = agent.trim();
    if agent.is_empty() {
        "opencode loop: unknown agent".to_owned()
    } else {
        format!("opencode loop: {agent}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_link_lives_in_details() {
        let mut e = AlertEvent {
            dedup_key: "k".into(),
            severity: Severity::Warning,
            state: EventState::Trigger,
            title: "t".into(),
            summary: "s".into(),
            details: serde_json::Value::from(3),
            source: "x".into(),
        };
        assert_eq!(e.link(), None);
        e.set_link("http://h/admin/trees/r".into());
        assert_eq!(e.link(), Some("http://h/admin/trees/r"));
        assert_eq!(e.details["details"], 3);
        e.details = serde_json::json!({"root": "r"});
        e.set_link("http://h/x".into());
        assert_eq!(
            (e.details["root"].as_str(), e.link()),
            (Some("r"), Some("http://h/x"))
        );
    }

    #[test]
    fn an_event_id_names_one_transition_of_one_alert() {
        let event = |key: &str, state, opened_at: i64, summary: &str| AlertEvent {
            dedup_key: key.into(),
            severity: Severity::Warning,
            state,
            title: "t".into(),
            summary: summary.into(),
            details: serde_json::json!({"opened_at": opened_at, "flagged_ticks": 2}),
            source: "x".into(),
        };
        // Real opening times: epoch seconds, which an output's noise rules would drop.
        let id = event("claude-loop:a", EventState::Trigger, 1_796_000_000, "s").event_id();
        // The text is built when it is sent (ages, counts): the identity does not change.
        assert_eq!(
            event(
                "claude-loop:a",
                EventState::Trigger,
                1_796_000_000,
                "later text"
            )
            .event_id(),
            id
        );
        for other in [
            event("claude-loop:b", EventState::Trigger, 1_796_000_000, "s"),
            event("claude-loop:a", EventState::Resolve, 1_796_000_000, "s"),
            event("claude-loop:a", EventState::Trigger, 1_796_000_060, "s"),
        ] {
            assert_ne!(other.event_id(), id, "{other:?}");
        }
    }

    #[test]
    fn loop_keys_of_every_agent() {
        for (key, root) in [
            ("opencode-loop:ses_a", Some("ses_a")),
            ("claude-loop:4d56-aa", Some("4d56-aa")),
            ("codex-loop:019a:b", Some("019a:b")),
            ("blind:source:http://127.0.0.1:4096", None),
            ("blind:job:deck", None),
            ("deck:worker-loop:x", None),
            ("-loop:x", None),
        ] {
            assert_eq!(loop_root(key), root, "{key}");
        }
        assert_eq!(loop_key("", "ses_a"), dedup_key_for_root("ses_a"));
        assert_eq!(loop_key("gemini", "s1"), "gemini-loop:s1");
    }

    #[test]
    fn prefix_matches_the_detector_key() {
        assert_eq!(
            dedup_key_for_root("ses_a"),
            format!("{DEDUP_KEY_PREFIX}ses_a")
        );
    }
}
