//! Reading one opencode server incrementally, against what the store holds for it.
//!
//! - A session whose `time.updated` is what the store saw, under the same detector
//!   configuration, and whose newest message is its stored cursor (one request for one message:
//!   opencode does not bump `time.updated` for calls through `POST /session/:id/shell`), is not
//!   read: its stored verdict stands (unless a descendant landed).
//! - A changed session is read after its cursor; its calls are pushed into its stored detector.
//!   Only settled messages are consumed, so a step still running is read again next tick. A
//!   cursor the server no longer has means the history changed: start over.
//! - With a stale age, only sessions active since the cutoff and their ancestors are read; a few
//!   quiet ones are asked for their newest message each tick, so a `/shell` call is found.

use crate::jobs::sessions::tracked::{
    self, Focus, Tracked, active_with_ancestors, cached_rows, newest_call, stored_newest_call,
};
use agentwatch_opencode::http::{OpencodeServer, SourceError};
use agentwatch_opencode::lite::{LiteMessage, Spend};
use agentwatch_store::{SessionCacheRow, Store};
use detect_core::{DetectConfig, Session, SessionDetector};
use serde_json::Value;
use std::collections::{HashMap, HashSet};

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

/// Each session's newest message id, as far as asked this tick.
type Newest = HashMap<String, Result<Option<String>, SourceError>>;

/// What one tick's read of a server works with.
struct Reading<'a> {
    server: &'a OpencodeServer,
    store: Option<&'a Store>,
    config: &'a DetectConfig,
    focus: Option<&'a Focus>,
    cache: HashMap<String, SessionCacheRow>,
    newest: Newest,
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
    let mut reading = Reading {
        server,
        store,
        config,
        focus,
        cache: cached_rows(store, server.shown_url(), config, full_read),
        newest: HashMap::new(),
    };
    let mut read = ServerRead::default();
    let infos = match stale_cutoff_ms {
        Some(cutoff) => reading.keep_active(infos, cutoff, &mut read.stale),
        None => infos,
    };
    reading.confirm_unchanged(&infos);
    for info in &infos {
        reading.read_session(info, &mut read);
    }
    Ok(read)
}

/// A listed session's id, parent and `time.updated`.
fn listed(info: &Value) -> Option<(String, Option<String>, Option<i64>)> {
    let id = info.get("id")?.as_str()?.to_owned();
    let parent = info
        .get("parentID")
        .and_then(Value::as_str)
        .map(str::to_owned);
    let updated = info.pointer("/time/updated").and_then(Value::as_i64);
    Some((id, parent, updated))
}

impl Reading<'_> {
    /// The listed sessions active since `cutoff` and their ancestors; the others go to `stale`.
    fn keep_active(
        &mut self,
        infos: Vec<Value>,
        cutoff: i64,
        stale: &mut Vec<String>,
    ) -> Vec<Value> {
        let mut items: Vec<(String, Option<String>, bool)> = infos
            .iter()
            .filter_map(listed)
            .map(|(id, parent, updated)| {
                let active = updated.is_none_or(|u| u >= cutoff)
                    || self
                        .cache
                        .get(&id)
                        .and_then(stored_newest_call)
                        .is_some_and(|n| n >= cutoff);
                (id, parent, active)
            })
            .collect();
        if self.focus.is_none() {
            self.recheck_quiet(&mut items, cutoff);
        }
        let keep: HashSet<String> = active_with_ancestors(
            items
                .iter()
                .map(|(id, parent, active)| (id.as_str(), parent.as_deref(), *active)),
        )
        .into_iter()
        .map(str::to_owned)
        .collect();
        let (kept, left): (Vec<Value>, Vec<Value>) = infos.into_iter().partition(|info| {
            info.get("id")
                .and_then(Value::as_str)
                .is_none_or(|id| keep.contains(id))
        });
        stale.extend(
            left.iter()
                .filter_map(|i| i.get("id").and_then(Value::as_str).map(str::to_owned)),
        );
        kept
    }

    /// Neither the listing nor the store says these changed, yet calls through
    /// `POST /session/:id/shell` leave `time.updated` as it was: a few of them are asked for
    /// their newest message each tick, so such a call is found in a few ticks. It is new if it
    /// is not the stored cursor, or if its id says it was made since the cutoff (a session never
    /// read has no cursor).
    fn recheck_quiet(&mut self, items: &mut [(String, Option<String>, bool)], cutoff: i64) {
        let quiet: Vec<&str> = items
            .iter()
            .filter(|(_, _, active)| !active)
            .map(|(id, _, _)| id.as_str())
            .collect();
        let asked = newest_message_ids(self.server, &stale_rechecks(quiet, cutoff));
        for (id, _, active) in items.iter_mut() {
            if let Some(Ok(newest)) = asked.get(id.as_str()) {
                let moved = self.cache.get(id).is_some_and(|row| row.cursor != *newest);
                let recent = newest.as_deref().is_some_and(|m| {
                    agentwatch_opencode::db::id_made_since(m, "msg", cutoff) == Some(true)
                });
                *active |= moved || recent;
            }
        }
        self.newest = asked;
    }

    /// The sessions whose listing says unchanged are confirmed by their newest message, asked
    /// for all at once (a few requests in flight) rather than one round trip after another.
    fn confirm_unchanged(&mut self, infos: &[Value]) {
        let unchanged: Vec<&str> = infos
            .iter()
            .filter_map(|info| {
                let id = info.get("id")?.as_str()?;
                let updated = info.pointer("/time/updated").and_then(Value::as_i64)?;
                let row = self.cache.get(id)?;
                let focused_away = self
                    .focus
                    .is_some_and(|f| f.reset.contains(id) || !f.changed.contains(id));
                (row.updated_ms == Some(updated) && !focused_away && !self.newest.contains_key(id))
                    .then_some(id)
            })
            .collect();
        let confirmed = newest_message_ids(self.server, &unchanged);
        self.newest.extend(confirmed);
    }

    /// One listed session: kept from its stored row when nothing changed, else read after its
    /// cursor into its detector.
    fn read_session(&mut self, info: &Value, read: &mut ServerRead) {
        let Some(base) = agentwatch_opencode::session_from_messages(info, &[]).ok() else {
            return;
        };
        let updated = info.pointer("/time/updated").and_then(Value::as_i64);
        let row = self.cache.remove(&base.id);
        let row = match self.stored_or_row(&base.id, updated, row) {
            Ok(Kept::Stored(stored)) => return read.sessions.push(*stored),
            Ok(Kept::Read(row)) => row,
            Err(e) => return read.problems.push(e),
        };
        let restored = row
            .as_ref()
            .and_then(|r| tracked::restore(self.store, r, self.config));
        let cursor = restored.as_ref().and_then(|r| r.cursor.clone());
        match self.server.messages_after(&base.id, cursor.as_deref()) {
            Ok((messages, found)) => {
                read.sessions_read += 1;
                let start = restored.filter(|_| found);
                let tracked = self.consume(base, updated, start, found, &messages);
                read.messages_read += tracked.1;
                read.sessions.push(tracked.0);
            }
            Err(e) => read.problems.push(e),
        }
    }

    /// Whether a session's stored row still stands: its focus says nothing changed, or its
    /// `time.updated` and newest message are what the row holds. Otherwise the row (if any) to
    /// continue from.
    fn stored_or_row(
        &mut self,
        id: &str,
        updated: Option<i64>,
        mut row: Option<SessionCacheRow>,
    ) -> Result<Kept, SourceError> {
        let source = self.server.shown_url();
        if let Some(focus) = self.focus {
            if focus.reset.contains(id) {
                return Ok(Kept::Read(None));
            }
            if !focus.changed.contains(id)
                && let Some(stored) = row.take().and_then(|r| Tracked::stored(source, r))
            {
                return Ok(Kept::Stored(Box::new(stored)));
            }
        }
        let listed_same = row
            .as_ref()
            .is_some_and(|row| updated.is_some() && row.updated_ms == updated);
        if !listed_same {
            return Ok(Kept::Read(row));
        }
        // `time.updated` alone does not say "nothing new" (opencode does not bump it for calls
        // through `POST /session/:id/shell`): the newest message must be the stored cursor too.
        let newest = self
            .newest
            .remove(id)
            .unwrap_or_else(|| self.server.newest_message_id(id))?;
        match row {
            Some(row) if row.cursor == newest => match Tracked::stored(source, row) {
                // The row moves into the state: no copy of its snapshot per unchanged session.
                Some(stored) => Ok(Kept::Stored(Box::new(stored))),
                None => Ok(Kept::Read(None)),
            },
            row => Ok(Kept::Read(row)),
        }
    }

    /// Push a session's settled messages after its cursor into its detector (the stored one,
    /// or a new one when the history starts over: `found` is false when the server no longer
    /// has the cursor). Returns the session and how many messages it consumed.
    fn consume(
        &self,
        base: Session,
        updated: Option<i64>,
        start: Option<tracked::Restored>,
        found: bool,
        messages: &[LiteMessage],
    ) -> (Tracked, usize) {
        let tracked::Restored {
            mut detector,
            mut cursor,
            info: mut session,
            mut spend,
            newest_call_ms: mut newest,
        } = start.unwrap_or_else(|| self.new_session(&base, messages));
        // The listing may carry a newer title; keep the identity fields fresh.
        session.title = base.title.clone().or(session.title);
        session.parent_id = base.parent_id.clone();
        let mut complete = true;
        let mut fresh = !found;
        let mut consumed = 0;
        for message in messages {
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
            consumed += 1;
            fresh = true;
        }
        let updated = if complete { updated } else { None };
        let source = self.server.shown_url();
        let tracked = Tracked::live(
            source, session, spend, newest, fresh, detector, cursor, updated,
        );
        (tracked, consumed)
    }

    /// A session read from its start: its agent from its messages when the listing has none.
    fn new_session(&self, base: &Session, messages: &[LiteMessage]) -> tracked::Restored {
        let mut session = base.clone();
        if session.agent.is_none() {
            session.agent = messages
                .iter()
                .find_map(|m| m.agent())
                .or_else(|| messages.iter().find_map(|m| m.info.agent.as_deref()))
                .map(str::to_owned);
        }
        tracked::Restored {
            detector: SessionDetector::new(&session, self.config),
            cursor: None,
            info: session,
            spend: Spend::default(),
            newest_call_ms: None,
        }
    }
}

/// A session's stored row stands, or it is read (continuing from the row, if any).
enum Kept {
    Stored(Box<Tracked>),
    Read(Option<SessionCacheRow>),
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
