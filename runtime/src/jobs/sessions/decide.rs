//! The decide step of a tick: the forest's verdicts, what the alert lifecycle is told about each
//! root (flagged, not, stale, gone), and the lifecycle's transitions with their routes.
//! Everything here is a function of what the sources observed, the stored state and `now`; the
//! one read is the other jobs' liveness, for the blind alerts.

use super::blind;
use super::memory::Memory;
use super::notice;
use super::refusals::tree_refusals;
use super::sources::Collected;
use super::tracked::{self, CacheRows, Tracked};
use crate::config::Config;
use crate::error::Error;
use crate::journal::Line;
use agentwatch_store::Store;
use alert_state::{Alert, AlertConfig, AlertState, RootObservation, Tick, TickOutcome};
use detect_core::{Judgement, Session, TreeVerdict};
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

/// The verdicts of one tick.
#[derive(Debug)]
pub struct Judged {
    pub judgement: Judgement,
    /// Per cached source, the session cache rows the tick stores.
    pub cache_rows: HashMap<String, CacheRows>,
    /// Roots of trees not judged as looping now: no new call within `watchdog.stale_after_s`.
    pub stale_trees: BTreeSet<String>,
}

/// Judge the tracked sessions as trees (a session with nothing new keeps its stored verdict).
pub fn judge(
    collected: &mut Collected,
    config: &Config,
    now: i64,
    store: Option<&Store>,
    verbose: bool,
) -> Judged {
    let (judgement, cache_rows) =
        tracked::judge(&mut collected.sessions, &config.detector(), now, store);
    if verbose {
        // `judged`: sessions judged anew (read, or re-judged for a descendant's landing), whose
        // cache rows this tick writes; the others keep their stored verdict and row.
        let read_now = collected.sessions.iter().filter(|s| s.was_read()).count();
        let judged: usize = cache_rows.values().map(|r| r.written.len()).sum();
        Line::info("watchdog", now)
            .field("sessions", collected.sessions.len())
            .field("read", read_now)
            .field("from_store", collected.sessions.len() - read_now)
            .field("judged", judged)
            .emit();
    }
    let mut judgement = judgement;
    keys_by_agent(&mut judgement, collected);
    let stale_trees = stale_trees(&judgement, collected, config.watchdog.stale_cutoff_ms(now));
    Judged {
        judgement,
        cache_rows,
        stale_trees,
    }
}

/// Each tree's alert key names the agent of its root's source (`claude-loop:{root}`).
fn keys_by_agent(judgement: &mut Judgement, collected: &Collected) {
    let source_of: HashMap<&str, &str> = collected
        .sessions
        .iter()
        .map(|s| (s.info.id.as_str(), s.source.as_str()))
        .collect();
    for tree in &mut judgement.trees {
        if let Some(source) = source_of.get(tree.root.as_str()) {
            tree.dedup_key = collected.agent_of(source).loop_key(&tree.root);
        }
    }
}

/// The roots of trees whose newest call (over the sessions of live sources) is older than
/// `cutoff_ms`. A tree with a session of a recorded source (a file, the demo), or with no call
/// time at all, is never stale.
fn stale_trees(
    judgement: &Judgement,
    collected: &Collected,
    cutoff_ms: Option<i64>,
) -> BTreeSet<String> {
    let Some(cutoff) = cutoff_ms else {
        return BTreeSet::new();
    };
    let by_id: BTreeMap<&str, &Tracked> = collected
        .sessions
        .iter()
        .map(|s| (s.info.id.as_str(), s))
        .collect();
    judgement
        .trees
        .iter()
        .filter(|t| {
            let sessions: Vec<&Tracked> = t
                .sessions
                .iter()
                .filter_map(|id| by_id.get(id.as_str()).copied())
                .collect();
            let recorded = sessions
                .iter()
                .any(|s| collected.recorded.contains(&s.source));
            let newest = sessions.iter().filter_map(|s| s.newest_call_ms).max();
            !recorded && newest.is_some_and(|n| n < cutoff)
        })
        .map(|t| t.root.clone())
        .collect()
}

/// Every session's info by id.
pub fn sessions_by_id(collected: &Collected) -> BTreeMap<&str, &Session> {
    collected
        .sessions
        .iter()
        .map(|s| (s.info.id.as_str(), &s.info))
        .collect()
}

/// The alert lifecycle's tick, before any LLM opinion: each root observed (flagged or not), the
/// roots gone and the roots stale.
pub fn observe(
    judged: &Judged,
    collected: &Collected,
    state: &AlertState,
    focused: bool,
    now: i64,
) -> Tick {
    let (gone, missing_stale) = missing_roots(judged, collected, state, now);
    let stale: Vec<String> = judged
        .stale_trees
        .iter()
        .cloned()
        .chain(missing_stale)
        .collect();
    let by_id = sessions_by_id(collected);
    let tracked: BTreeMap<&str, &Tracked> = collected
        .sessions
        .iter()
        .map(|s| (s.info.id.as_str(), s))
        .collect();
    // A follower judges only trees its events changed (each judgement counts towards
    // escalation, an event does not).
    let fresh: HashSet<&str> = collected
        .sessions
        .iter()
        .filter(|s| s.fresh)
        .map(|s| s.info.id.as_str())
        .collect();
    let observed =
        |t: &TreeVerdict| !focused || t.sessions.iter().any(|s| fresh.contains(s.as_str()));
    let roots = judged
        .judgement
        .trees
        .iter()
        .filter(|t| !judged.stale_trees.contains(&t.root) && observed(t))
        .map(|t| {
            let source = tracked
                .get(t.root.as_str())
                .map_or("", |s| s.source.as_str());
            let family = collected.agent_of(source).family();
            let (refusals, stands) = tree_refusals(
                t.sessions
                    .iter()
                    .filter_map(|id| tracked.get(id.as_str()))
                    .map(|s| &s.refusals),
            );
            // `details.agent` is the agent (`claude`); opencode's keeps its own agent's name.
            let mut observation = root_observation(t, &by_id);
            if family != super::agent::Agent::Opencode.family() {
                family.clone_into(&mut observation.agent);
            }
            observation
                .from_source(source)
                .of_family(family)
                .titled(work_title(collected, &by_id, &t.root))
                .with_refusals(refusals, stands)
        })
        .collect();
    Tick {
        now,
        roots,
        gone,
        stale,
    }
}

/// What the lifecycle is told about one tree.
fn root_observation(tree: &TreeVerdict, by_id: &BTreeMap<&str, &Session>) -> RootObservation {
    let agent = tree_agent(tree, by_id);
    if !tree.flagged {
        return RootObservation::not_flagged(&tree.root, agent);
    }
    let mut obs = RootObservation::flagged(&tree.root, agent, tree_summary(tree));
    obs.details = json!({"flagged_sessions": tree.flagged_sessions, "sessions": tree.sessions});
    obs
}

/// The open loop alerts whose root no source listed: `(gone, stale)`. A root a source left out
/// as stale is stale. "Gone" belongs to a source: an alert whose root is missing resolves as gone
/// only on a complete answer from the source that saw its tree (an alert stored before sources
/// were recorded: only when every source answered completely); the others stay open.
fn missing_roots(
    judged: &Judged,
    collected: &Collected,
    state: &AlertState,
    now: i64,
) -> (Vec<String>, Vec<String>) {
    let all_complete = collected.failed.is_empty() && collected.unreadable == 0;
    let present: HashSet<&str> = judged
        .judgement
        .trees
        .iter()
        .map(|t| t.root.as_str())
        .collect();
    let (stale, missing): (Vec<&Alert>, Vec<&Alert>) = state
        .open_alerts
        .values()
        .filter(|a| alert_state::is_loop_key(&a.dedup_key))
        .filter(|a| !present.contains(a.root.as_str()))
        .partition(|a| collected.stale.contains(&a.root));
    let (gone, kept): (Vec<&Alert>, Vec<&Alert>) = missing.into_iter().partition(|a| {
        if a.source.is_empty() {
            all_complete
        } else {
            collected.complete.contains(&a.source)
        }
    });
    if !kept.is_empty() {
        Line::warning("watchdog", now)
            .field("missing_roots", kept.len())
            .field("action", "keep_open")
            .field(
                "reason",
                "missing is gone only on a complete answer from the source that saw the tree",
            )
            .emit();
    }
    let roots = |alerts: Vec<&Alert>| alerts.into_iter().map(|a| a.root.clone()).collect();
    (roots(gone), roots(stale))
}

/// The agent a tree's alert is titled with: the first flagged session's, else the root's.
fn tree_agent(tree: &TreeVerdict, sessions: &BTreeMap<&str, &Session>) -> String {
    let agent_of = |id: &str| {
        sessions.get(id).and_then(|s| {
            s.agent.clone().or_else(|| {
                s.title
                    .as_deref()
                    .and_then(detect_core::subagent_name)
                    .map(str::to_owned)
            })
        })
    };
    tree.flagged_sessions
        .first()
        .and_then(|s| agent_of(&s.id))
        .or_else(|| agent_of(&tree.root))
        .unwrap_or_else(|| "unknown".to_owned())
}

/// What the root session works on, as its alert's title (`Claude Code: Fix the money rounding
/// in /home/me/shop (main)`); empty when the session has no title (the core then names the
/// agent).
fn work_title(collected: &Collected, by_id: &BTreeMap<&str, &Session>, root: &str) -> String {
    by_id
        .get(root)
        .filter(|s| s.title.as_deref().is_some_and(|t| !t.trim().is_empty()))
        .map(|s| notice::headline_beside(s, beside(collected, None, root, 0)))
        .unwrap_or_default()
}

/// Why a tree is flagged, one clause per flagged session.
fn tree_summary(tree: &TreeVerdict) -> String {
    tree.flagged_sessions
        .iter()
        .map(|v| format!("{}: {}", v.id, v.summary()))
        .collect::<Vec<_>>()
        .join("; ")
}

/// The agent and branch of a root session, what repeats in the tree's first flagged session,
/// and the stale age, for its notification.
fn beside<'a>(
    collected: &'a Collected,
    tree: Option<&TreeVerdict>,
    root: &str,
    stale_after_s: u64,
) -> notice::Beside<'a> {
    let session = collected.sessions.iter().find(|s| s.info.id == root);
    let looping = tree
        .and_then(|t| t.flagged_sessions.first())
        .and_then(|v| collected.sessions.iter().find(|s| s.info.id == v.id));
    notice::Beside {
        agent: session.map_or(super::agent::Agent::Opencode, |s| {
            collected.agent_of(&s.source)
        }),
        branch: session.and_then(|s| s.branch.as_deref()),
        agent_verdict: session.and_then(|s| s.agent_verdict.as_deref()),
        repeated: looping.and_then(|s| s.repeats.current()),
        stale_after_s,
    }
}

/// The lifecycle's transitions for this tick's observations (opinions attached), each event
/// written for a person (`notice`) and linked to its tree's page when
/// `watchdog.dashboard_base_url` is set; then the blind alerts: a source failing tick after
/// tick, or another job that stopped ticking.
pub fn lifecycle(
    config: &Config,
    alert_config: &AlertConfig,
    memory: &mut Memory,
    tick: &Tick,
    judged: &Judged,
    collected: &Collected,
    store: Option<&Store>,
) -> Result<TickOutcome, Error> {
    let now = tick.now;
    let mut outcome = alert_state::process_tick(&memory.alerts, alert_config, tick)
        .map_err(|e| Error::software(format!("alert tick: {e}")))?;
    let by_id = sessions_by_id(collected);
    let base = &config.watchdog.dashboard_base_url;
    for decision in &mut outcome.decisions {
        if let Some(dispatch) = &mut decision.dispatch {
            let tree = judged
                .judgement
                .trees
                .iter()
                .find(|t| t.root == decision.root);
            notice::rewrite(
                &mut dispatch.event,
                tree,
                &by_id,
                beside(
                    collected,
                    tree,
                    &decision.root,
                    config.watchdog.stale_after_s,
                ),
            );
            if !base.trim().is_empty() {
                dispatch
                    .event
                    .set_link(agentwatch_web::tree_link(base, &decision.root));
            }
        }
    }
    let mut health = std::mem::take(&mut memory.health);
    health.sessions = collected.session_counts.clone();
    let (health, blindness) = blind::step(
        config,
        store,
        health,
        &outcome.state,
        alert_config,
        &collected.failed,
        now,
    )?;
    memory.health = health;
    if let Some(blindness) = blindness {
        outcome.decisions.extend(blindness.decisions);
        outcome.state = blindness.state;
    }
    Ok(outcome)
}
