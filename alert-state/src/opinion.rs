//! LLM second opinions: the strict reply parser and the per-tick plan of whom to ask.

use crate::config::AlertConfig;
use crate::event::{Severity, dedup_key_for_root};
use crate::state::AlertState;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

/// What the local LLM said about a flagged root. "No answer" is `Option::None`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LlmOpinion {
    /// The model confirms the loop.
    Yes,
    /// The model does not think it is a loop.
    No,
}

impl LlmOpinion {
    /// The lowercase wire name (`yes`, `no`).
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Yes => "yes",
            Self::No => "no",
        }
    }
}

impl fmt::Display for LlmOpinion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Parses the model's raw reply: `yes` or `no` after trimming whitespace, ASCII
/// case-insensitive. Anything else (`Yes.`, `yes, it loops`, empty, a timeout's empty body) is no
/// opinion.
#[must_use]
pub fn parse_llm_opinion(reply: &str) -> Option<LlmOpinion> {
    let reply = reply.trim();
    if reply.eq_ignore_ascii_case("yes") {
        Some(LlmOpinion::Yes)
    } else if reply.eq_ignore_ascii_case("no") {
        Some(LlmOpinion::No)
    } else {
        None
    }
}

/// Why a flagged root gets no LLM opinion this tick.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OpinionSkip {
    /// `local_llm_enabled` is false.
    LlmDisabled,
    /// The open alert is critical already; an answer changes nothing.
    AlreadyCritical,
    /// The alert becomes critical this tick by its flagged-tick count; an answer changes nothing.
    EscalatesAnyway,
    /// `max_llm_opinions_per_tick` roots with a higher priority are asked already.
    CapReached,
}

/// Whether to ask the LLM about one root.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OpinionVerdict {
    /// Ask; the answer is used.
    Ask,
    /// Do not ask; an answer supplied anyway is ignored (and reported).
    Skip(OpinionSkip),
}

/// The plan for one flagged root.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpinionDecision {
    /// The root session id.
    pub root: String,
    /// Its alert's dedup key.
    pub dedup_key: String,
    /// Ask or skip.
    pub verdict: OpinionVerdict,
    /// One sentence for the journal.
    pub reason: String,
}

/// Which flagged roots may get an LLM opinion this tick: one [`OpinionDecision`] per distinct
/// flagged root, the asked ones first in priority order, then the skipped ones by root.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct OpinionPlan {
    /// One entry per distinct flagged root.
    pub decisions: Vec<OpinionDecision>,
}

impl OpinionPlan {
    /// The roots to ask, in priority order.
    pub fn roots_to_ask(&self) -> impl Iterator<Item = &str> {
        self.decisions
            .iter()
            .filter(|d| d.verdict == OpinionVerdict::Ask)
            .map(|d| d.root.as_str())
    }

    /// The plan for `root`, if it was flagged.
    #[must_use]
    pub fn decision_for(&self, root: &str) -> Option<&OpinionDecision> {
        self.decisions.iter().find(|d| d.root == root)
    }

    /// Whether an opinion about `root` is asked for (and so used).
    #[must_use]
    pub fn should_ask(&self, root: &str) -> bool {
        self.decision_for(root)
            .is_some_and(|d| d.verdict == OpinionVerdict::Ask)
    }

    /// Ask the model, the only way to get [`Opinions`]: `ask` gets the planned roots in priority
    /// order (and may ask them in parallel) and returns what it heard, `None` for no opinion. It
    /// is not called when the plan asks nobody; answers about roots outside the plan are
    /// dropped. So a caller plans, then asks, then hands the answers to the tick, in that order.
    pub fn ask<F>(self, ask: F) -> Opinions
    where
        F: FnOnce(&[&str]) -> BTreeMap<String, Option<LlmOpinion>>,
    {
        let roots: Vec<&str> = self.roots_to_ask().collect();
        let heard = if roots.is_empty() {
            BTreeMap::new()
        } else {
            ask(&roots)
        };
        let answers = heard
            .into_iter()
            .filter(|(root, _)| self.should_ask(root))
            .filter_map(|(root, opinion)| opinion.map(|o| (root, o)))
            .collect();
        Opinions {
            plan: self,
            answers,
        }
    }
}

/// The LLM's answers to one tick's [`OpinionPlan`], made only by [`OpinionPlan::ask`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Opinions {
    plan: OpinionPlan,
    answers: BTreeMap<String, LlmOpinion>,
}

impl Opinions {
    /// The opinion heard about `root`, if it was asked and answered.
    #[must_use]
    pub fn get(&self, root: &str) -> Option<LlmOpinion> {
        self.answers.get(root).copied()
    }

    /// The plan the answers follow.
    #[must_use]
    pub fn plan(&self) -> &OpinionPlan {
        &self.plan
    }
}

/// Decides, before any LLM is called, which flagged roots get a second opinion this tick.
///
/// Called with the same `state` and `config` that the tick will use and the roots the detector
/// flagged. Only answers that can change the outcome are asked for: roots without an open alert
/// (the answer sets the trigger severity) and open warning alerts that do not escalate by tick
/// count this tick (a `yes` escalates early). Priority when more qualify than
/// `max_llm_opinions_per_tick`: new roots first (by root id), then open warning alerts, oldest
/// `opened_at` first (then by dedup key). [`process_tick`](crate::process_tick) recomputes this
/// plan and ignores any opinion outside it, so the cap holds even for a careless caller.
#[must_use]
pub fn plan_llm_opinions<'a>(
    state: &AlertState,
    config: &AlertConfig,
    flagged_roots: impl IntoIterator<Item = &'a str>,
) -> OpinionPlan {
    let roots: BTreeSet<&str> = flagged_roots.into_iter().collect();
    let mut candidates: Vec<Candidate<'_>> = Vec::new();
    let mut skipped: Vec<OpinionDecision> = Vec::new();
    for root in roots {
        match candidate(state, config, root) {
            Ok(c) => candidates.push(c),
            Err(skip) => skipped.push(skip),
        }
    }
    candidates.sort();
    let cap = usize::try_from(config.max_llm_opinions_per_tick).unwrap_or(usize::MAX);
    let mut decisions = Vec::with_capacity(candidates.len() + skipped.len());
    let mut over_cap = Vec::new();
    for (rank, (group, _, dedup_key, root)) in candidates.into_iter().enumerate() {
        let what = if group == 0 {
            "the answer sets the trigger severity"
        } else {
            "a yes escalates the open warning alert early"
        };
        let (verdict, reason) = if rank < cap {
            (
                OpinionVerdict::Ask,
                format!(
                    "ask the local LLM ({what}); opinion {} of at most {cap} this tick",
                    rank + 1
                ),
            )
        } else {
            (
                OpinionVerdict::Skip(OpinionSkip::CapReached),
                format!(
                    "no LLM opinion: the cap of {cap} opinions this tick (max_llm_opinions_per_tick) \
                     is reached"
                ),
            )
        };
        let decision = OpinionDecision {
            root: root.to_owned(),
            dedup_key,
            verdict,
            reason,
        };
        if rank < cap {
            decisions.push(decision);
        } else {
            over_cap.push(decision);
        }
    }
    over_cap.append(&mut skipped);
    over_cap.sort_by(|a, b| a.root.cmp(&b.root));
    decisions.append(&mut over_cap);
    OpinionPlan { decisions }
}

/// A root that may be asked: (group: 0 new, 1 open warning; `opened_at`; dedup key; root),
/// sorted in the order the cap keeps them.
type Candidate<'a> = (u8, i64, String, &'a str);

/// Whether an answer about `root` could change the outcome: a candidate, or the decision that
/// skips it and why.
fn candidate<'a>(
    state: &AlertState,
    config: &AlertConfig,
    root: &'a str,
) -> Result<Candidate<'a>, OpinionDecision> {
    let escalate_after = config.escalate_after_ticks;
    let dedup_key = state
        .open_alert_for_root(root)
        .map_or_else(|| dedup_key_for_root(root), |a| a.dedup_key.clone());
    let skip = |why: OpinionSkip, reason: String| OpinionDecision {
        root: root.to_owned(),
        dedup_key: dedup_key.clone(),
        verdict: OpinionVerdict::Skip(why),
        reason,
    };
    if !config.local_llm_enabled {
        return Err(skip(
            OpinionSkip::LlmDisabled,
            "no LLM opinion: local_llm_enabled is false".to_owned(),
        ));
    }
    match state.open_alerts.get(&dedup_key) {
        None if escalate_after <= 1 => Err(skip(
            OpinionSkip::EscalatesAnyway,
            format!(
                "no LLM opinion needed: a new alert opens as critical when \
                 escalate_after_ticks is {escalate_after}"
            ),
        )),
        None => Ok((0, 0, dedup_key, root)),
        Some(alert) if alert.severity >= Severity::Critical => Err(skip(
            OpinionSkip::AlreadyCritical,
            "no LLM opinion needed: the open alert is critical already".to_owned(),
        )),
        // With a minimum gap the plan cannot tell (it has no `now`) whether this tick's
        // judgement counts, so it asks; a `yes` escalates as it would anyway.
        Some(alert)
            if config.escalate_min_gap_s <= 0
                && alert.flagged_ticks.saturating_add(1) >= escalate_after =>
        {
            Err(skip(
                OpinionSkip::EscalatesAnyway,
                format!(
                    "no LLM opinion needed: flagged tick {} reaches escalate_after_ticks {} \
                     and escalates anyway",
                    alert.flagged_ticks.saturating_add(1),
                    escalate_after
                ),
            ))
        }
        Some(alert) => Ok((1, alert.opened_at, dedup_key, root)),
    }
}
