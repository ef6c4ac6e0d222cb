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

use agentwatch_opencode::db::{DbError, OpencodeDb};
use agentwatch_opencode::http::{OpencodeServer, SourceError};
use agentwatch_opencode::lite::{LiteInfo, Spend};
use agentwatch_store::{SessionCacheRow, Store};
use detect_core::{
    DetectConfig, DetectorSnapshot, Forest, Judgement, Session, SessionDetector, SessionVerdict,
    canonical_json,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;
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
        for call in &session.calls {
            detector.push(call);
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
    fn stored(source: &str, row: SessionCacheRow) -> Option<Self> {
        let meta = serde_json::from_str::<VerdictMeta>(&row.verdict).ok()?;
        let info = serde_json::from_str::<Session>(&row.info).ok()?;
        Some(Self {
            source: source.to_owned(),
            info,
            spend: meta.spend.clone(),
            newest_call_ms: meta.newest_call_ms,
            fresh: false,
            state: State::Stored {
                row: Box::new(row),
                meta: Box::new(meta),
            },
        })
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
fn newest_call<'a>(
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

/// What reading one server incrementally found.
#[derive(Debug, Default)]
pub struct ServerRead {
    pub sessions: Vec<Tracked>,
    /// Sessions that could not be read (their stored state, if any, is kept and used).
    pub problems: Vec<SourceError>,
    /// Sessions read this tick, and messages consumed.
    pub sessions_read: usize,
    pub messages_read: usize,
    /// Sessions listed but not active within the stale age (not read, not reported).
    pub stale: Vec<String>,
}

/// Read one server, reusing and advancing what the store (if any) holds for it. With a
/// `stale_cutoff_ms`, only sessions updated since (or whose stored newest call is since) and
/// their ancestors are read; the others are listed in [`ServerRead::stale`]. A [`Focus`] that
/// covers the server narrows the reads to the sessions it names.
pub fn read_server(
    server: &OpencodeServer,
    store: Option<&Store>,
    config: &DetectConfig,
    full_read: bool,
    stale_cutoff_ms: Option<i64>,
    focus: Option<&Focus>,
) -> Result<ServerRead, SourceError> {
    let focus = focus.filter(|f| f.servers.contains(server.shown_url()));
    let infos = server.list_sessions()?;
    let fp = fingerprint(config);
    // Without the detector snapshots: an unchanged session needs none, a changed one reads its
    // own ([`stored_detector`]).
    let cached = match store {
        Some(store) if !full_read => store
            .session_cache_heads(server.shown_url())
            .unwrap_or_default(),
        _ => Vec::new(),
    };
    let mut cache: HashMap<String, SessionCacheRow> = cached
        .into_iter()
        .filter(|r| r.fingerprint == fp)
        .map(|r| (r.session_id.clone(), r))
        .collect();
    let mut read = ServerRead::default();
    // Newest-message answers already fetched this tick (see [`stale_rechecks`]).
    let mut rechecked = HashMap::new();
    let infos = match stale_cutoff_ms {
        None => infos,
        Some(cutoff) => {
            let stored_newest = |id: &str| {
                cache
                    .get(id)
                    .and_then(|r| serde_json::from_str::<VerdictMeta>(&r.verdict).ok())
                    .and_then(|m| m.newest_call_ms)
            };
            let mut items: Vec<(String, Option<String>, bool)> = infos
                .iter()
                .filter_map(|info| {
                    let id = info.get("id")?.as_str()?.to_owned();
                    let parent = info
                        .get("parentID")
                        .and_then(Value::as_str)
                        .map(str::to_owned);
                    let updated = info.pointer("/time/updated").and_then(Value::as_i64);
                    let active = updated.is_none_or(|u| u >= cutoff)
                        || stored_newest(&id).is_some_and(|n| n >= cutoff);
                    Some((id, parent, active))
                })
                .collect();
            // Neither the listing nor the store says these changed, yet calls through
            // `POST /session/:id/shell` leave `time.updated` as it was: a few of them are asked
            // for their newest message each tick, so such a call is found in a few ticks. It
            // is new if it is not the stored cursor, or if its id says it was made since the
            // cutoff (a session never read has no cursor).
            if focus.is_none() {
                let quiet: Vec<&str> = items
                    .iter()
                    .filter(|(_, _, active)| !active)
                    .map(|(id, _, _)| id.as_str())
                    .collect();
                let asked = newest_message_ids(server, &stale_rechecks(quiet, cutoff));
                for (id, _, active) in &mut items {
                    if let Some(Ok(newest)) = asked.get(id.as_str()) {
                        let moved = cache.get(id).is_some_and(|row| row.cursor != *newest);
                        let recent = newest.as_deref().is_some_and(|m| {
                            agentwatch_opencode::db::id_made_since(m, "msg", cutoff) == Some(true)
                        });
                        *active |= moved || recent;
                    }
                }
                rechecked = asked;
            }
            let keep: HashSet<String> = active_with_ancestors(
                items
                    .iter()
                    .map(|(id, parent, active)| (id.as_str(), parent.as_deref(), *active)),
            )
            .into_iter()
            .map(str::to_owned)
            .collect();
            let (kept, stale): (Vec<Value>, Vec<Value>) = infos.into_iter().partition(|info| {
                info.get("id")
                    .and_then(Value::as_str)
                    .is_none_or(|id| keep.contains(id))
            });
            read.stale = stale
                .iter()
                .filter_map(|i| i.get("id").and_then(Value::as_str).map(str::to_owned))
                .collect();
            kept
        }
    };
    // The sessions whose listing says unchanged are confirmed by their newest message, asked
    // for all at once (a few requests in flight) rather than one round trip after another.
    let unchanged_by_listing: Vec<&str> = infos
        .iter()
        .filter_map(|info| {
            let id = info.get("id")?.as_str()?;
            let updated = info.pointer("/time/updated").and_then(Value::as_i64)?;
            let row = cache.get(id)?;
            let focused_away =
                focus.is_some_and(|f| f.reset.contains(id) || !f.changed.contains(id));
            (row.updated_ms == Some(updated) && !focused_away && !rechecked.contains_key(id))
                .then_some(id)
        })
        .collect();
    let mut newest = newest_message_ids(server, &unchanged_by_listing);
    newest.extend(rechecked);
    for info in &infos {
        let Some(base) = agentwatch_opencode::session_from_messages(info, &[]).ok() else {
            continue;
        };
        let updated = info.pointer("/time/updated").and_then(Value::as_i64);
        let mut row = cache.remove(&base.id);
        if let Some(focus) = focus {
            if focus.reset.contains(&base.id) {
                row = None;
            } else if !focus.changed.contains(&base.id)
                && let Some(stored) = row
                    .take()
                    .and_then(|r| Tracked::stored(server.shown_url(), r))
            {
                read.sessions.push(stored);
                continue;
            }
        }
        let unchanged = row
            .as_ref()
            .filter(|row| updated.is_some() && row.updated_ms == updated)
            .map(|_| ());
        // `time.updated` alone does not say "nothing new" (opencode does not bump it for calls
        // through `POST /session/:id/shell`): the newest message must be the stored cursor too.
        let unchanged = match unchanged {
            Some(found) => match newest
                .remove(&base.id)
                .unwrap_or_else(|| server.newest_message_id(&base.id))
            {
                Ok(newest) if row.as_ref().is_some_and(|r| r.cursor == newest) => Some(found),
                Ok(_) => None,
                Err(e) => {
                    read.problems.push(e);
                    continue;
                }
            },
            None => None,
        };
        let row = match (unchanged, row) {
            (Some(()), Some(row)) => {
                // The row moves into the state: no copy of its snapshot per unchanged session.
                match Tracked::stored(server.shown_url(), row) {
                    Some(stored) => {
                        read.sessions.push(stored);
                        continue;
                    }
                    None => None,
                }
            }
            (_, row) => row,
        };
        let restored = row.as_ref().and_then(|r| {
            let snapshot = stored_detector(store, r)?;
            let info: Session = serde_json::from_str(&r.info).ok()?;
            let meta = serde_json::from_str::<VerdictMeta>(&r.verdict).ok();
            Some((
                SessionDetector::restore(snapshot, config)?,
                r.cursor.clone(),
                info,
                meta.as_ref().map(|m| m.spend.clone()).unwrap_or_default(),
                meta.and_then(|m| m.newest_call_ms),
            ))
        });
        let cursor = restored.as_ref().and_then(|(_, c, _, _, _)| c.clone());
        let (messages, found) = match server.messages_after(&base.id, cursor.as_deref()) {
            Ok(answer) => answer,
            Err(e) => {
                read.problems.push(e);
                continue;
            }
        };
        read.sessions_read += 1;
        let (mut detector, mut cursor, mut session, mut spend, mut newest) = match restored {
            Some(r) if found => r,
            _ => {
                let mut session = base.clone();
                if session.agent.is_none() {
                    session.agent = messages
                        .iter()
                        .find_map(|m| m.agent())
                        .or_else(|| messages.iter().find_map(|m| m.info.agent.as_deref()))
                        .map(str::to_owned);
                }
                (
                    SessionDetector::new(&session, config),
                    None,
                    session,
                    Spend::default(),
                    None,
                )
            }
        };
        // The listing may carry a newer title; keep the identity fields fresh.
        session.title = base.title.clone().or(session.title);
        session.parent_id = base.parent_id.clone();
        let mut complete = true;
        let mut fresh = !found;
        for message in &messages {
            if !message.is_settled() {
                complete = false;
                break;
            }
            let landing = detector.latest_own_landing();
            for call in message.calls() {
                detector.push(&call);
                newest = newest_call(std::iter::once(&call), newest);
            }
            spend.observe(message, detector.latest_own_landing() != landing);
            cursor = Some(message.info.id.clone());
            read.messages_read += 1;
            fresh = true;
        }
        read.sessions.push(Tracked {
            source: server.shown_url().to_owned(),
            info: session,
            spend,
            newest_call_ms: newest,
            fresh,
            state: State::Live {
                detector: Box::new(detector),
                cursor,
                updated_ms: if complete { updated } else { None },
            },
        });
    }
    Ok(read)
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

/// How many requests for newest messages [`newest_message_ids`] keeps in flight.
const CONFIRMING_REQUESTS: usize = 8;

/// Each session's newest message id ([`OpencodeServer::newest_message_id`]), asked on
/// [`CONFIRMING_REQUESTS`] threads sharing the server's connections. A session missing from
/// the answer (its thread died) is asked again by the caller.
fn newest_message_ids(
    server: &OpencodeServer,
    ids: &[&str],
) -> HashMap<String, Result<Option<String>, SourceError>> {
    if ids.is_empty() {
        return HashMap::new();
    }
    let per_thread = ids.len().div_ceil(CONFIRMING_REQUESTS);
    std::thread::scope(|scope| {
        let handles: Vec<_> = ids
            .chunks(per_thread)
            .map(|part| {
                scope.spawn(move || {
                    part.iter()
                        .map(|id| ((*id).to_owned(), server.newest_message_id(id)))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_default())
            .collect()
    })
}

/// How many quiet sessions (stale by their listing and by their stored newest call) are asked
/// for their newest message each tick: a bound on what finding calls opencode did not announce
/// costs, 32 requests at most.
const STALE_RECHECKS_PER_TICK: usize = 32;

/// Which of the `quiet` sessions to ask this tick: [`STALE_RECHECKS_PER_TICK`] of them, ordered
/// by a hash of the id and the tick's cutoff, so each tick asks a different share and every
/// session is asked in turn (no stored rotation needed; the cutoff moves with `now`).
fn stale_rechecks(mut quiet: Vec<&str>, cutoff_ms: i64) -> Vec<&str> {
    use std::hash::{Hash, Hasher};
    if quiet.len() > STALE_RECHECKS_PER_TICK {
        let order = |id: &str| {
            let mut h = std::collections::hash_map::DefaultHasher::new();
            (id, cutoff_ms).hash(&mut h);
            h.finish()
        };
        quiet.sort_by_cached_key(|id| order(id));
        quiet.truncate(STALE_RECHECKS_PER_TICK);
    }
    quiet
}

/// What reading an `opencode.db` found.
#[derive(Debug, Default)]
pub struct DbRead {
    pub sessions: Vec<Tracked>,
    /// Sessions looked at but not active within the stale age (not read, not reported): those
    /// the store knew, the open alerts' roots, and, on a database read whole, every other one.
    pub stale: Vec<String>,
    /// Sessions whose activity or change marker was looked up: what the read cost, in rows.
    pub examined: usize,
}

/// How far past the tick's clock a message's creation time may lie and still be found
/// ([`OpencodeDb::sessions_created_between`]): clocks of one machine, a day of slack.
const DB_FUTURE_SLACK_MS: i64 = 24 * 3600 * 1000;

/// Read an `opencode.db` incrementally. With a stale age, only the sessions that may be active
/// are looked at, not every session ever stored: those with a message or part created since the
/// cutoff (a range of the id indexes: [`OpencodeDb::sessions_created_between`]; calls through
/// `POST /session/:id/shell` add messages without bumping `time_updated`), those whose row's
/// `time_updated` is since the cutoff ([`OpencodeDb::sessions_updated_since`]), those the store
/// holds a row for (active at an earlier tick), and `watched` (the open alerts' roots); of
/// them the active ones and their ancestors are kept, the others listed in [`DbRead::stale`].
/// A database whose ids are not opencode's, or a read without a stale age, looks at every
/// session. Of the sessions kept, only those whose change marker
/// ([`OpencodeDb::change_marker`]) differs from the one the store holds are loaded; the others
/// keep their stored verdict. The marker is kept in the cache row's cursor.
#[allow(clippy::too_many_arguments)]
pub fn read_db(
    db: &OpencodeDb,
    source: &str,
    store: Option<&Store>,
    config: &DetectConfig,
    full_read: bool,
    stale_cutoff_ms: Option<i64>,
    now_ms: i64,
    watched: &HashSet<String>,
) -> Result<DbRead, DbError> {
    let fp = fingerprint(config);
    let mut cache: HashMap<String, SessionCacheRow> = match store {
        Some(store) if !full_read => store.session_cache_heads(source).unwrap_or_default(),
        _ => Vec::new(),
    }
    .into_iter()
    .filter(|r| r.fingerprint == fp)
    .map(|r| (r.session_id.clone(), r))
    .collect();
    db.snapshot(|db| {
        let mut read = DbRead::default();
        let created = match stale_cutoff_ms {
            Some(cutoff) => db
                .sessions_created_between(cutoff, now_ms.saturating_add(DB_FUTURE_SLACK_MS))?
                .map(|mut created| {
                    db.sessions_updated_since(cutoff).map(|updated| {
                        created.extend(updated);
                        (cutoff, created)
                    })
                })
                .transpose()?,
            None => None,
        };
        let (rows, keep) = match created {
            Some((cutoff, created)) => {
                let candidates: std::collections::BTreeSet<&str> = created
                    .iter()
                    .map(String::as_str)
                    .chain(cache.keys().map(String::as_str))
                    .chain(watched.iter().map(String::as_str))
                    .collect();
                let mut active = Vec::new();
                for id in candidates {
                    read.examined += 1;
                    match db.activity_of(id)? {
                        None => {}
                        Some(at) if at != 0 && at < cutoff => read.stale.push(id.to_owned()),
                        Some(_) => active.push(id.to_owned()),
                    }
                }
                // The active sessions and their ancestors, followed by id; a cycle ends the walk.
                let mut kept: HashSet<String> = HashSet::new();
                let mut rows = Vec::new();
                while let Some(id) = active.pop() {
                    if !kept.insert(id.clone()) {
                        continue;
                    }
                    if let Some(row) = db.session(&id)? {
                        active.extend(row.parent_id.clone());
                        rows.push(row);
                    }
                }
                rows.sort_by(|a, b| (a.time_created, &a.id).cmp(&(b.time_created, &b.id)));
                read.stale.retain(|id| !kept.contains(id));
                (rows, None)
            }
            None => {
                let rows = db.sessions()?;
                let keep: Option<HashSet<String>> = match stale_cutoff_ms {
                    None => None,
                    Some(cutoff) => {
                        let activity = db.session_activity()?;
                        read.examined += rows.len();
                        let items = rows.iter().map(|r| {
                            let active = activity.get(&r.id).is_none_or(|at| *at >= cutoff);
                            (r.id.as_str(), r.parent_id.as_deref(), active)
                        });
                        Some(
                            active_with_ancestors(items)
                                .into_iter()
                                .map(str::to_owned)
                                .collect(),
                        )
                    }
                };
                (rows, keep)
            }
        };
        for row in &rows {
            if keep.as_ref().is_some_and(|k| !k.contains(&row.id)) {
                read.stale.push(row.id.clone());
                continue;
            }
            read.examined += 1;
            let marker = db.change_marker(&row.id)?;
            if let Some(stored) = cache
                .remove(&row.id)
                .filter(|r| r.cursor.as_deref() == Some(marker.as_str()))
                .and_then(|r| Tracked::stored(source, r))
            {
                read.sessions.push(stored);
                continue;
            }
            let loaded = db.load(row)?;
            let mut tracked =
                Tracked::whole_with_infos(source, &loaded.session, &loaded.infos, config);
            if let State::Live { cursor, .. } = &mut tracked.state {
                *cursor = Some(marker);
            }
            read.sessions.push(tracked);
        }
        Ok(read)
    })
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
                cursor: row.cursor.clone(),
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
            metadata: Value::Null,
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

    /// An `opencode.db` of many sessions of which a few are active: the source looks at the
    /// active ones (rows examined, not timing), loads them once, and then loads nothing while
    /// they stay unchanged; a month-old session gaining a call through `POST
    /// /session/:id/shell` (a message added, `time_updated` left as it was) is seen.
    /// A tick asks at most [`STALE_RECHECKS_PER_TICK`] quiet sessions, a different share as
    /// the cutoff moves, so every one is asked within a few ticks.
    #[test]
    fn stale_rechecks_are_bounded_and_reach_every_session() {
        let ids: Vec<String> = (0..100).map(|i| format!("ses_{i:03}")).collect();
        let quiet: Vec<&str> = ids.iter().map(String::as_str).collect();
        assert_eq!(stale_rechecks(quiet[..5].to_vec(), 0), quiet[..5].to_vec());
        let mut asked = HashSet::new();
        for tick in 0..30 {
            let now = stale_rechecks(quiet.clone(), 1_800_000_000_000 + tick * 300_000);
            assert_eq!(now.len(), STALE_RECHECKS_PER_TICK);
            asked.extend(now);
        }
        assert_eq!(
            asked.len(),
            ids.len(),
            "every quiet session asked in 30 ticks"
        );
    }

    #[test]
    fn opencode_db_looks_at_active_sessions_only_and_sees_a_shell_call() {
        use agentwatch_opencode::db::testing::{create_db, insert_export};
        use agentwatch_testkit::opencode::{ExportBuilder, healthy_calls, looping_calls};
        const STALE: usize = 400;
        const ACTIVE: usize = 3;
        let dir = agentwatch_testkit::TempDir::new("aw-db-source");
        let oc = dir.path.join("opencode.db");
        create_db(&oc).unwrap();
        let now_s: i64 = 1_796_001_000;
        let now_ms = now_s * 1000;
        let month_ago = now_ms - 30 * 86_400_000;
        let old_id = |i: usize| format!("ses_old{i:05}AAAAAAAAAAAAAAAAAA");
        for i in 0..STALE {
            let start = month_ago + i64::try_from(i).unwrap() * 10_000;
            let export = ExportBuilder::new(&old_id(i), "old", None, start)
                .steps("build", &healthy_calls(2), 1000)
                .build();
            insert_export(&oc, &export, "/tmp/proj").unwrap();
        }
        for i in 0..ACTIVE {
            let start = now_ms - 600_000 + i64::try_from(i).unwrap() * 1000;
            let export = ExportBuilder::new(
                &format!("ses_new{i:05}AAAAAAAAAAAAAAAAAA"),
                "new",
                None,
                start,
            )
            .steps("build", &looping_calls(45), 1000)
            .build();
            insert_export(&oc, &export, "/tmp/proj").unwrap();
        }
        let mut store = Store::open(&dir.path.join("agentwatch.db")).unwrap();
        let config = DetectConfig::default();
        let source = oc.display().to_string();
        let cutoff = Some(now_ms - 3_600_000);
        let none = HashSet::new();
        let read = |store: &Store| {
            let db = OpencodeDb::open(&oc, std::time::Duration::from_secs(5)).unwrap();
            read_db(
                &db,
                &source,
                Some(store),
                &config,
                false,
                cutoff,
                now_ms,
                &none,
            )
            .unwrap()
        };
        let tick = |store: &mut Store, mut read: DbRead| {
            let (judged, mut rows) = judge(&mut read.sessions, &config, now_s, Some(store));
            let rows = rows.remove(&source).unwrap_or_default();
            let kept: HashSet<&str> = rows.kept.iter().map(String::as_str).collect();
            store
                .update_session_cache(&source, &rows.written, &kept)
                .unwrap();
            judged
        };

        // First tick: the active sessions are found through the id index and loaded.
        let first = read(&store);
        let loaded: Vec<&str> = first.sessions.iter().map(|s| s.info.id.as_str()).collect();
        assert_eq!(loaded.len(), ACTIVE, "{loaded:?}");
        assert!(loaded.iter().all(|id| id.starts_with("ses_new")));
        assert!(first.sessions.iter().all(Tracked::was_read));
        // Each active session's activity and change marker: nothing of the stale ones.
        assert_eq!(first.examined, 2 * ACTIVE, "{first:?}");
        tick(&mut store, first);

        // Idle: the same rows are looked at, nothing is loaded.
        let idle = read(&store);
        assert_eq!(idle.examined, 2 * ACTIVE);
        assert_eq!(idle.sessions.len(), ACTIVE);
        assert!(idle.sessions.iter().all(|s| !s.was_read()));
        tick(&mut store, idle);

        // A month-old session gets a looping run through `POST /session/:id/shell`: messages
        // added now, its `time_updated` unchanged.
        let shell = ExportBuilder::new(&old_id(7), "old", None, now_ms - 120_000)
            .steps("build", &looping_calls(45), 1000)
            .build();
        insert_export(&oc, &shell, "/tmp/proj").unwrap();
        {
            let conn = rusqlite::Connection::open(&oc).unwrap();
            conn.execute(
                "UPDATE session SET time_updated = ?1 WHERE id = ?2",
                rusqlite::params![month_ago, old_id(7)],
            )
            .unwrap();
        }
        let after = read(&store);
        let read_now: Vec<&str> = after
            .sessions
            .iter()
            .filter(|s| s.was_read())
            .map(|s| s.info.id.as_str())
            .collect();
        assert_eq!(read_now, vec![old_id(7).as_str()]);
        assert_eq!(after.sessions.len(), ACTIVE + 1);
        assert_eq!(after.examined, 2 * (ACTIVE + 1));
        let judged = tick(&mut store, after);
        assert!(
            judged
                .sessions
                .iter()
                .any(|v| v.id == old_id(7) && v.flagged),
            "the shell calls are judged: {:?}",
            judged.sessions
        );
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
