//! Sessions tracked across ticks: each session's detector state and message cursor live in the
//! store, so a tick reads only messages newer than the last one and judges only what changed.
//!
//! - A session whose `time.updated` is what the store saw, under the same detector
//!   configuration, and whose newest message is its stored cursor (one request for one message:
//!   opencode does not bump `time.updated` for calls through `POST /session/:id/shell`), is not
//!   read: its stored verdict stands (unless a descendant landed).
//! - A changed session is read after its cursor; its calls are pushed into its stored
//!   [`SessionDetector`]. Only settled messages are consumed, so a step still running is read
//!   again next tick. A cursor the server no longer has means the history changed: start over.
//! - Descendant landings are passed up the tree every tick; they are idempotent.

use super::agent::Agent;
use super::refusals::SessionRefusals;
use super::repeats::{Repeats, push_call};
use agentwatch_opencode::lite::{LiteInfo, Spend};
use agentwatch_store::{SessionCacheRow, Store};
use detect_core::{
    DetectConfig, DetectorSnapshot, Forest, Judgement, Session, SessionDetector, SessionVerdict,
    canonical_json,
};
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet};

/// One session as a tick judges it.
#[derive(Debug)]
pub struct Tracked {
    /// Where it came from (a server URL, a file, the demo, a database).
    pub source: String,
    /// The session without its calls: id, parent, title, agent, directory.
    pub info: Session,
    /// Its model, provider and cost since it landed, from its assistant messages (servers only).
    pub spend: Spend,
    /// When its newest settled call happened (unix ms), if any call says: the stale rule's clock.
    pub newest_call_ms: Option<i64>,
    /// This read gave its detector something new: settled messages after its cursor, or its
    /// whole history (a follower judges only trees with a fresh session).
    pub fresh: bool,
    /// The git branch it works on, when its source says (transcripts).
    pub branch: Option<String>,
    /// The agent's own verdict that it loops, when it wrote one (Gemini CLI's "Potential loop
    /// detected"): shown in the alert beside ours.
    pub agent_verdict: Option<String>,
    /// What agentwatch's own hook refused in it, counted as its calls were read (kept in its
    /// stored row, as its verdict is).
    pub refusals: SessionRefusals,
    /// What repeats in it, for its alert's sentence (kept in its stored row too).
    pub repeats: Repeats,
    /// The agent whose source read it (set when its source's answer is taken).
    pub agent: Agent,
    state: State,
}

/// What a server's event stream said changed since the last read (`agentwatch opencode
/// --follow`). For a server in `servers`, only the sessions named here are asked for messages;
/// every other session with a stored row keeps it without a request (the stream would have
/// told). A server not in `servers` is read as a tick reads it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Focus {
    /// Servers (shown URLs) whose stream was open since their last complete read.
    pub servers: HashSet<String>,
    /// Sessions with new calls or messages: read after their cursor.
    pub changed: HashSet<String>,
    /// Sessions whose history changed (a message removed): read from the start.
    pub reset: HashSet<String>,
}

impl Focus {
    /// Nothing changed.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.changed.is_empty() && self.reset.is_empty()
    }
}

#[derive(Debug)]
enum State {
    /// Read this tick: the detector holds every settled call.
    Live {
        detector: Box<SessionDetector>,
        cursor: Option<String>,
        updated_ms: Option<i64>,
    },
    /// Unchanged since the stored row.
    Stored {
        row: Box<SessionCacheRow>,
        meta: Box<VerdictMeta>,
    },
}

/// What the cache row's `verdict` column holds.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct VerdictMeta {
    verdict: SessionVerdict,
    own_landing: Option<i64>,
    descendant_landing: Option<i64>,
    #[serde(default)]
    spend: Spend,
    #[serde(default)]
    newest_call_ms: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    branch: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    agent_verdict: Option<String>,
    #[serde(default, skip_serializing_if = "SessionRefusals::is_empty")]
    refusals: SessionRefusals,
    #[serde(default)]
    repeats: Repeats,
    /// The agent that wrote it (`claude`), for the sessions page.
    #[serde(default)]
    agent: Agent,
}

/// The fingerprint of a detector configuration: state built under another one is dropped.
pub fn fingerprint(config: &DetectConfig) -> String {
    serde_json::to_value(config)
        .map(|v| canonical_json(&v))
        .unwrap_or_default()
}

impl Tracked {
    /// A session known in full (files, the demo, opencode.db): judged from all its calls.
    pub fn whole(source: &str, session: &Session, config: &DetectConfig) -> Self {
        let mut detector = SessionDetector::new(session, config);
        let mut refusals = SessionRefusals::default();
        let mut repeats = Repeats::default();
        for call in &session.calls {
            push_call(&mut detector, call, &mut refusals, &mut repeats);
        }
        Self {
            source: source.to_owned(),
            info: Session {
                calls: Vec::new(),
                ..session.clone()
            },
            spend: Spend::default(),
            newest_call_ms: newest_call(session.calls.iter(), None),
            fresh: true,
            branch: None,
            agent_verdict: None,
            refusals,
            repeats,
            agent: Agent::default(),
            state: State::Live {
                detector: Box::new(detector),
                cursor: None,
                updated_ms: None,
            },
        }
    }

    /// [`Tracked::whole`] with the spend its messages' infos say (opencode.db).
    pub fn whole_with_infos(
        source: &str,
        session: &Session,
        infos: &[LiteInfo],
        config: &DetectConfig,
    ) -> Self {
        let mut tracked = Self::whole(source, session, config);
        tracked.spend = Spend::of_messages(infos, tracked.own_landing());
        tracked
    }

    /// A session whose stored row still stands (its source says nothing changed), if the row
    /// parses.
    pub(crate) fn stored(source: &str, row: SessionCacheRow) -> Option<Self> {
        let meta = serde_json::from_str::<VerdictMeta>(&row.verdict).ok()?;
        let info = serde_json::from_str::<Session>(&row.info).ok()?;
        Some(Self {
            source: source.to_owned(),
            info,
            spend: meta.spend.clone(),
            newest_call_ms: meta.newest_call_ms,
            fresh: false,
            branch: meta.branch.clone(),
            agent_verdict: meta.agent_verdict.clone(),
            refusals: meta.refusals.clone(),
            repeats: meta.repeats.clone(),
            agent: meta.agent,
            state: State::Stored {
                row: Box::new(row),
                meta: Box::new(meta),
            },
        })
    }

    /// A session read this tick: its detector holds every settled call up to `cursor`;
    /// `updated_ms` is the source's change marker when the read was complete.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn live(
        source: &str,
        info: Session,
        spend: Spend,
        newest_call_ms: Option<i64>,
        fresh: bool,
        detector: SessionDetector,
        cursor: Option<String>,
        updated_ms: Option<i64>,
    ) -> Self {
        Self {
            source: source.to_owned(),
            info,
            spend,
            newest_call_ms,
            fresh,
            branch: None,
            agent_verdict: None,
            refusals: SessionRefusals::default(),
            repeats: Repeats::default(),
            agent: Agent::default(),
            state: State::Live {
                detector: Box::new(detector),
                cursor,
                updated_ms,
            },
        }
    }

    /// Set the cursor a read session's row is stored with.
    pub(crate) fn set_cursor(&mut self, to: String) {
        if let State::Live { cursor, .. } = &mut self.state {
            *cursor = Some(to);
        }
    }

    /// Whether the session was read this tick (not taken from the store).
    pub fn was_read(&self) -> bool {
        matches!(self.state, State::Live { .. })
    }

    fn own_landing(&self) -> Option<i64> {
        match &self.state {
            State::Live { detector, .. } => detector.latest_own_landing(),
            State::Stored { meta, .. } => meta.own_landing,
        }
    }
}

/// The latest of `known` and the calls' times (end, else start; unix ms).
pub(crate) fn newest_call<'a>(
    calls: impl Iterator<Item = &'a detect_core::Call>,
    known: Option<i64>,
) -> Option<i64> {
    calls
        .filter_map(detect_core::Call::end_ms)
        .fold(known, |a, t| a.max(Some(t)))
}

/// The sessions a live source reports: those active since the cutoff, and their ancestors (so a
/// tree keeps its root while a subagent works). Each item is `(id, parent, active)`; the answer
/// holds the ids to keep. Ancestors are followed through the items only; a cycle ends the walk.
pub fn active_with_ancestors<'a>(
    items: impl IntoIterator<Item = (&'a str, Option<&'a str>, bool)>,
) -> HashSet<&'a str> {
    let items: Vec<(&str, Option<&str>, bool)> = items.into_iter().collect();
    let parent_of: HashMap<&str, Option<&str>> =
        items.iter().map(|(id, parent, _)| (*id, *parent)).collect();
    let mut keep = HashSet::new();
    for (id, _, active) in &items {
        if !active {
            continue;
        }
        let mut at = Some(*id);
        while let Some(current) = at {
            if !keep.insert(current) {
                break;
            }
            at = parent_of.get(current).copied().flatten();
        }
    }
    keep
}

/// What a stored row gives a session read after its cursor.
#[derive(Debug)]
pub(crate) struct Restored {
    pub detector: SessionDetector,
    pub cursor: Option<String>,
    pub info: Session,
    pub spend: Spend,
    pub newest_call_ms: Option<i64>,
    /// What the hook refused in it up to the cursor.
    pub refusals: SessionRefusals,
    /// What repeats in it up to the cursor.
    pub repeats: Repeats,
}

/// A stored row's session, to continue from its cursor (`None`: the row does not read, or its
/// snapshot is gone: start over).
pub(crate) fn restore(
    store: Option<&Store>,
    row: &SessionCacheRow,
    config: &DetectConfig,
) -> Option<Restored> {
    let snapshot = stored_detector(store, row)?;
    let info: Session = serde_json::from_str(&row.info).ok()?;
    let meta = serde_json::from_str::<VerdictMeta>(&row.verdict).ok();
    Some(Restored {
        detector: SessionDetector::restore(snapshot, config)?,
        cursor: stored_cursor(store, row),
        info,
        spend: meta.as_ref().map(|m| m.spend.clone()).unwrap_or_default(),
        refusals: meta
            .as_ref()
            .map(|m| m.refusals.clone())
            .unwrap_or_default(),
        repeats: meta.as_ref().map(|m| m.repeats.clone()).unwrap_or_default(),
        newest_call_ms: meta.and_then(|m| m.newest_call_ms),
    })
}

/// A cache row's cursor: the row's own, or read from the store when the row was read without
/// it (a long one, [`Store::session_cache_heads`]).
fn stored_cursor(store: Option<&Store>, row: &SessionCacheRow) -> Option<String> {
    match row.cursor.as_deref() {
        Some("") => store?
            .session_cursor(&row.source, &row.session_id)
            .ok()
            .flatten(),
        _ => row.cursor.clone(),
    }
}

/// When a stored row's newest call happened, as its verdict says.
pub(crate) fn stored_newest_call(row: &SessionCacheRow) -> Option<i64> {
    serde_json::from_str::<VerdictMeta>(&row.verdict)
        .ok()
        .and_then(|m| m.newest_call_ms)
}

/// A source's stored rows built under this detector configuration, by session id, without
/// their detector snapshots (an unchanged session needs none; a changed one reads its own,
/// [`restore`]). None for a full read.
pub(crate) fn cached_rows(
    store: Option<&Store>,
    source: &str,
    config: &DetectConfig,
    full_read: bool,
) -> HashMap<String, SessionCacheRow> {
    let rows = match store {
        Some(store) if !full_read => store.session_cache_heads(source).unwrap_or_default(),
        _ => Vec::new(),
    };
    let fp = fingerprint(config);
    rows.into_iter()
        .filter(|r| r.fingerprint == fp)
        .map(|r| (r.session_id.clone(), r))
        .collect()
}

/// A cache row's detector snapshot: the row's own, or read from the store when the row was
/// read without it ([`Store::session_cache_heads`]).
fn stored_detector(store: Option<&Store>, row: &SessionCacheRow) -> Option<DetectorSnapshot> {
    if row.detector.is_empty() {
        let text = store?
            .session_detector(&row.source, &row.session_id)
            .ok()??;
        serde_json::from_str(&text).ok()
    } else {
        serde_json::from_str(&row.detector).ok()
    }
}

/// What a tick stores of one source's session cache: the rows of sessions judged anew (read
/// this tick, or re-judged for a descendant's landing) and the ids of sessions whose stored row
/// still stands (not rewritten: an idle tick writes no row).
#[derive(Debug, Default)]
pub struct CacheRows {
    pub written: Vec<SessionCacheRow>,
    pub kept: Vec<String>,
}

/// Judge tracked sessions as trees. Returns the judgement and, per source, the cache rows to
/// store ([`CacheRows`]: every tracked session of a cached source is written or kept).
///
/// A stored session re-judged for a descendant's landing needs its detector snapshot: from its
/// row, else from `store` (rows read without snapshots).
pub fn judge(
    tracked: &mut [Tracked],
    config: &DetectConfig,
    now: i64,
    store: Option<&Store>,
) -> (Judgement, HashMap<String, CacheRows>) {
    let infos: Vec<Session> = tracked.iter().map(|t| t.info.clone()).collect();
    let forest = Forest::build(&infos);
    let own: Vec<Option<i64>> = tracked.iter().map(Tracked::own_landing).collect();
    let below = forest.latest_descendant_landings(&own);
    let fp = fingerprint(config);
    let mut verdicts = Vec::with_capacity(tracked.len());
    let mut rows: HashMap<String, CacheRows> = HashMap::new();
    for (t, landing) in tracked.iter_mut().zip(&below) {
        // A stored session whose descendants landed since must be judged again.
        if let State::Stored { row, meta } = &t.state
            && *landing > meta.descendant_landing
            && let Some(detector) =
                stored_detector(store, row).and_then(|s| SessionDetector::restore(s, config))
        {
            t.state = State::Live {
                detector: Box::new(detector),
                cursor: stored_cursor(store, row),
                updated_ms: row.updated_ms,
            };
        }
        let entry = rows.entry(t.source.clone()).or_default();
        match &mut t.state {
            State::Live {
                detector,
                cursor,
                updated_ms,
            } => {
                if let Some(at) = landing {
                    detector.push_descendant_landing(*at);
                }
                let verdict = detector.verdict();
                let meta = VerdictMeta {
                    verdict: verdict.clone(),
                    own_landing: detector.latest_own_landing(),
                    descendant_landing: detector.latest_descendant_landing(),
                    spend: t.spend.clone(),
                    newest_call_ms: t.newest_call_ms,
                    branch: t.branch.clone(),
                    agent_verdict: t.agent_verdict.clone(),
                    refusals: t.refusals.clone(),
                    repeats: t.repeats.clone(),
                    agent: t.agent,
                };
                verdicts.push(verdict);
                entry.written.push(SessionCacheRow {
                    source: t.source.clone(),
                    session_id: t.info.id.clone(),
                    fingerprint: fp.clone(),
                    updated_ms: *updated_ms,
                    cursor: cursor.clone(),
                    info: serde_json::to_string(&t.info).unwrap_or_default(),
                    detector: serde_json::to_string(&detector.snapshot()).unwrap_or_default(),
                    verdict: serde_json::to_string(&meta).unwrap_or_default(),
                    seen_at: now,
                });
            }
            State::Stored { meta, .. } => {
                verdicts.push(meta.verdict.clone());
                entry.kept.push(t.info.id.clone());
            }
        }
    }
    let trees = forest.tree_verdicts(&infos, &verdicts);
    (
        Judgement {
            sessions: verdicts,
            trees,
        },
        rows,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use detect_core::{Call, CallStatus, CallTime, judge_sessions};
    use proptest::prelude::*;

    /// One drawn call: (tool, target, failed).
    type CallDraw = (u8, u8, bool);

    fn call(index: usize, (tool, target, failed): CallDraw) -> Call {
        let path = format!("/repo/src/f{target}.rs");
        let (tool, input) = match tool % 4 {
            0 => ("read", serde_json::json!({"filePath": path})),
            1 => (
                "grep",
                serde_json::json!({"pattern": format!("fn f{target}")}),
            ),
            2 => (
                "edit",
                serde_json::json!({"filePath": path, "oldString": "a", "newString": "b"}),
            ),
            _ => ("bash", serde_json::json!({"command": "cargo test"})),
        };
        let start = 1_796_000_000_000 + i64::try_from(index).unwrap_or(0) * 1_000;
        Call {
            tool: tool.to_owned(),
            input,
            status: if failed {
                CallStatus::Error
            } else {
                CallStatus::Completed
            },
            metadata: serde_json::Value::Null,
            time: Some(CallTime {
                start: Some(start),
                end: Some(start + 500),
            }),
            output_hash: None,
        }
    }

    /// A tree of up to six sessions (each one's parent drawn among the earlier ones), each with
    /// up to 60 calls that arrive over four ticks in random chunks.
    fn forest() -> impl Strategy<Value = Vec<(Option<usize>, Vec<CallDraw>, Vec<u8>)>> {
        prop::collection::vec(
            (
                any::<Option<prop::sample::Index>>(),
                prop::collection::vec((0u8..4, 0u8..3, prop::bool::weighted(0.1)), 0..60),
                prop::collection::vec(any::<u8>(), 4),
            ),
            1..6,
        )
        .prop_map(|drawn| {
            drawn
                .into_iter()
                .enumerate()
                .map(|(i, (parent, calls, mut cuts))| {
                    cuts.sort_unstable();
                    (parent.filter(|_| i > 0).map(|p| p.index(i)), calls, cuts)
                })
                .collect()
        })
    }

    /// `value` written as JSON and read back, as the session cache stores it.
    fn as_stored(value: &Judgement) -> Judgement {
        serde_json::from_str(&serde_json::to_string(value).unwrap()).unwrap()
    }

    /// What agentwatch's hook refused in a session is kept in its row: a session whose row
    /// stands has it, and one read on from its row starts from it.
    #[test]
    fn refusals_are_kept_in_the_row() {
        let config = DetectConfig::default();
        let mut calls: Vec<Call> = (0..30).map(|i| call(i, (3, 0, true))).collect();
        for i in 30..32 {
            let mut refused = call(i, (3, 0, true));
            refused.status = CallStatus::Blocked;
            refused.metadata = serde_json::json!({"refusal": "agentwatch: this call was not run"});
            calls.push(refused);
        }
        let session = Session {
            calls,
            ..Session::new("ses_r")
        };
        let mut tracked = vec![Tracked::whole("test", &session, &config)];
        assert_eq!(
            (tracked[0].refusals.blocked, tracked[0].refusals.stands()),
            (2, true)
        );
        let (judged, mut rows) = judge(&mut tracked, &config, 1_796_000_000, None);
        assert!(judged.sessions[0].flagged, "{:?}", judged.sessions[0]);
        let row = rows.remove("test").unwrap().written.remove(0);
        let stored = Tracked::stored("test", row.clone()).unwrap();
        assert_eq!(stored.refusals, tracked[0].refusals);
        let restored = restore(None, &row, &config).unwrap();
        assert_eq!(restored.refusals.blocked, 2);
        assert_eq!(restored.refusals.call, "cargo test");
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]

        /// The incremental forest (a session with no new calls kept from its stored row, its
        /// verdict re-judged from its stored detector when a descendant lands) equals batch
        /// judging of everything seen so far, at every tick.
        #[test]
        fn incremental_forest_equals_batch_judging(drawn in forest()) {
            let config = DetectConfig::default();
            let sessions: Vec<Session> = drawn
                .iter()
                .enumerate()
                .map(|(i, (parent, calls, _))| Session {
                    id: format!("ses_{i}"),
                    parent_id: parent.map(|p| format!("ses_{p}")),
                    title: None,
                    agent: None,
                    directory: None,
                    label: None,
                    labels: Default::default(),
                    note: None,
                    line_counts: Default::default(),
                    loop_start: None,
                    calls: calls.iter().enumerate().map(|(k, c)| call(k, *c)).collect(),
                })
                .collect();
            let mut seen: Vec<Option<usize>> = vec![None; sessions.len()];
            let mut rows: HashMap<String, SessionCacheRow> = HashMap::new();
            for tick in 0..4 {
                let now = 1_796_000_000 + tick * 60;
                let index = usize::try_from(tick).unwrap();
                let prefix: Vec<Session> = sessions
                    .iter()
                    .zip(&drawn)
                    .map(|(s, (_, _, cuts))| {
                        let visible = if index == 3 {
                            s.calls.len()
                        } else {
                            s.calls.len() * usize::from(cuts[index]) / 255
                        };
                        Session { calls: s.calls[..visible].to_vec(), ..s.clone() }
                    })
                    .collect();
                let mut tracked: Vec<Tracked> = prefix
                    .iter()
                    .zip(seen.iter_mut())
                    .map(|(s, seen)| {
                        let unchanged = *seen == Some(s.calls.len());
                        *seen = Some(s.calls.len());
                        match rows.get(&s.id).cloned().filter(|_| unchanged) {
                            Some(row) => Tracked::stored("test", row).expect("a stored row loads"),
                            None => Tracked::whole("test", s, &config),
                        }
                    })
                    .collect();
                let (judged, mut new_rows) = judge(&mut tracked, &config, now, None);
                let batch = judge_sessions(&prefix, &config);
                // Compared as the store keeps them: serde_json (without `float_roundtrip`)
                // may read a stored ratio back one ulp off (0.4545454545454546 for
                // 0.45454545454545453), so a verdict kept from its row is equal as stored.
                prop_assert_eq!(as_stored(&judged), as_stored(&batch), "tick {}", tick);
                // As the store applies them: written rows replace, kept rows stay untouched.
                let update = new_rows.remove("test").unwrap_or_default();
                rows.retain(|id, _| update.kept.contains(id));
                rows.extend(update.written.into_iter().map(|row| (row.session_id.clone(), row)));
            }
        }
    }
}
