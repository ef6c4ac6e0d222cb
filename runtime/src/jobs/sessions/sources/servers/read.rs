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

use crate::jobs::sessions::repeats::push_call;
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
    /// Sessions the server's deadline left unread (not asked, or cut off): they keep their
    /// stored rows and cursors for the next tick, and the answer is not complete.
    pub deadline_skipped: usize,
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
    /// Requests to the server in flight at once.
    parallel: usize,
}

/// How one tick reads a server.
#[derive(Debug, Clone, Copy)]
pub struct ReadOptions<'a> {
    /// Ignore the stored cursors (`--full-read`).
    pub full_read: bool,
    /// Only sessions active since this (unix ms) and their ancestors are read.
    pub stale_cutoff_ms: Option<i64>,
    /// What the event streams said changed.
    pub focus: Option<&'a Focus>,
    /// Requests in flight at once (`opencode.max_parallel`, at least 1).
    pub parallel: usize,
}

/// Read one server, reusing and advancing what the store (if any) holds for it. With a
/// `stale_cutoff_ms`, only sessions updated since (or whose stored newest call is since) and
/// their ancestors are read; the others are listed in [`ServerRead::stale`]. A [`Focus`] that
/// covers the server narrows the reads to the sessions it names. Changed sessions are read
/// `parallel` at a time; a session the server's deadline ([`OpencodeServer::with_deadline`])
/// left unread keeps its stored row ([`ServerRead::deadline_skipped`]).
pub fn read_server(
    server: &OpencodeServer,
    store: Option<&Store>,
    config: &DetectConfig,
    options: ReadOptions<'_>,
) -> Result<ServerRead, SourceError> {
    let focus = options
        .focus
        .filter(|f| f.servers.contains(server.shown_url()));
    let infos = server.list_sessions()?;
    let mut reading = Reading {
        server,
        store,
        config,
        focus,
        cache: cached_rows(store, server.shown_url(), config, options.full_read),
        newest: HashMap::new(),
        parallel: options.parallel.max(1),
    };
    let mut read = ServerRead::default();
    let infos = match options.stale_cutoff_ms {
        Some(cutoff) => reading.keep_active(infos, cutoff, &mut read.stale),
        None => infos,
    };
    reading.confirm_unchanged(&infos);
    // Each listed session's place in the answer, in the listing's order.
    let mut slots: Vec<Option<Tracked>> = Vec::with_capacity(infos.len());
    let mut changed = Vec::new();
    for info in &infos {
        match reading.plan_session(info, &mut read) {
            Plan::Known(tracked) => slots.push(tracked.map(|t| *t)),
            Plan::Read(session) => {
                changed.push((slots.len(), *session));
                slots.push(None);
            }
        }
    }
    reading.read_changed(changed, &mut slots, &mut read);
    read.sessions = slots.into_iter().flatten().collect();
    Ok(read)
}

/// What a listed session needs: nothing more (its stored row stands, or it cannot be told this
/// tick), or a read after its cursor.
enum Plan {
    Known(Option<Box<Tracked>>),
    Read(Box<Changed>),
}

/// A changed session to read after its cursor, with its stored row (kept when it is not read).
struct Changed {
    base: Session,
    updated: Option<i64>,
    row: Option<SessionCacheRow>,
    restored: Option<tracked::Restored>,
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
        let asked = newest_message_ids(self.server, &stale_rechecks(quiet, cutoff), self.parallel);
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
        let confirmed = newest_message_ids(self.server, &unchanged, self.parallel);
        self.newest.extend(confirmed);
    }

    /// One listed session: kept from its stored row when nothing changed, else the session to
    /// read after its cursor.
    fn plan_session(&mut self, info: &Value, read: &mut ServerRead) -> Plan {
        let Ok(base) = agentwatch_opencode::session_from_messages(info, &[]) else {
            return Plan::Known(None);
        };
        let updated = info.pointer("/time/updated").and_then(Value::as_i64);
        let row = self.cache.remove(&base.id);
        match self.stored_or_row(&base.id, updated, row) {
            Kept::Stored(stored) => Plan::Known(Some(stored)),
            Kept::Read(row) => {
                let restored = row
                    .as_ref()
                    .and_then(|r| tracked::restore(self.store, r, self.config));
                Plan::Read(Box::new(Changed {
                    base,
                    updated,
                    row,
                    restored,
                }))
            }
            Kept::Unread(e, row) => Plan::Known(self.unread(e, row, read).map(Box::new)),
        }
    }

    /// Read the changed sessions after their cursors, [`Reading::parallel`] at a time, each
    /// consumed into its detector as its answer comes (so at most that many sessions' messages
    /// are held at once) and put in its slot.
    fn read_changed(
        &self,
        changed: Vec<(usize, Changed)>,
        slots: &mut [Option<Tracked>],
        read: &mut ServerRead,
    ) {
        let asks: Vec<(String, Option<String>)> = changed
            .iter()
            .map(|(_, c)| {
                let cursor = c.restored.as_ref().and_then(|r| r.cursor.clone());
                (c.base.id.clone(), cursor)
            })
            .collect();
        let mut changed: Vec<Option<(usize, Changed)>> = changed.into_iter().map(Some).collect();
        // The workers share the server only (the store stays on this thread).
        let server = self.server;
        each_in_parallel(
            &asks,
            self.parallel,
            |(id, cursor)| cut(server, server.messages_after(id, cursor.as_deref())),
            |i, answer| {
                if let Some((slot, session)) = changed[i].take() {
                    slots[slot] = self.take_answer(session, answer, read);
                }
            },
        );
    }

    /// A changed session with its answer: read on into its detector, or left as stored.
    fn take_answer(
        &self,
        session: Changed,
        answer: MessagesAfter,
        read: &mut ServerRead,
    ) -> Option<Tracked> {
        let Changed {
            base,
            updated,
            row,
            restored,
        } = session;
        match answer {
            Ok((messages, found)) => {
                read.sessions_read += 1;
                let start = restored.filter(|_| found);
                let (tracked, consumed) = self.consume(base, updated, start, found, &messages);
                read.messages_read += consumed;
                Some(tracked)
            }
            Err(e) => self.unread(e, row, read),
        }
    }

    /// A session that could not be read this tick: its stored row (verdict, cursor) stands, so
    /// it is neither gone nor fixed and is read from its cursor next tick. One the deadline
    /// left out is counted; any other problem is listed.
    fn unread(
        &self,
        e: SourceError,
        row: Option<SessionCacheRow>,
        read: &mut ServerRead,
    ) -> Option<Tracked> {
        if e.is_skipped() {
            read.deadline_skipped += 1;
        } else {
            read.problems.push(e);
        }
        row.and_then(|r| Tracked::stored(self.server.shown_url(), r))
    }

    /// Whether a session's stored row still stands: its focus says nothing changed, or its
    /// `time.updated` and newest message are what the row holds. Otherwise the row (if any) to
    /// continue from, or why it could not be told (the row kept).
    fn stored_or_row(
        &mut self,
        id: &str,
        updated: Option<i64>,
        mut row: Option<SessionCacheRow>,
    ) -> Kept {
        let source = self.server.shown_url();
        if let Some(focus) = self.focus {
            if focus.reset.contains(id) {
                return Kept::Read(None);
            }
            if !focus.changed.contains(id)
                && let Some(stored) = row.take().and_then(|r| Tracked::stored(source, r))
            {
                return Kept::Stored(Box::new(stored));
            }
        }
        let listed_same = row
            .as_ref()
            .is_some_and(|row| updated.is_some() && row.updated_ms == updated);
        if !listed_same {
            return Kept::Read(row);
        }
        // `time.updated` alone does not say "nothing new" (opencode does not bump it for calls
        // through `POST /session/:id/shell`): the newest message must be the stored cursor too.
        let newest = match self
            .newest
            .remove(id)
            .unwrap_or_else(|| cut(self.server, self.server.newest_message_id(id)))
        {
            Ok(newest) => newest,
            Err(e) => return Kept::Unread(e, row),
        };
        match row {
            Some(row) if row.cursor == newest => match Tracked::stored(source, row) {
                // The row moves into the state: no copy of its snapshot per unchanged session.
                Some(stored) => Kept::Stored(Box::new(stored)),
                None => Kept::Read(None),
            },
            row => Kept::Read(row),
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
            mut refusals,
            mut repeats,
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
                push_call(&mut detector, &call, &mut refusals, &mut repeats);
                newest = newest_call(std::iter::once(&call), newest);
            }
            spend.observe(message, detector.latest_own_landing() != landing);
            cursor = Some(message.info.id.clone());
            consumed += 1;
            fresh = true;
        }
        let updated = if complete { updated } else { None };
        let source = self.server.shown_url();
        let mut tracked = Tracked::live(
            source, session, spend, newest, fresh, detector, cursor, updated,
        );
        tracked.refusals = refusals;
        tracked.repeats = repeats;
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
            refusals: Default::default(),
            repeats: Default::default(),
        }
    }
}

/// A session's stored row stands, or it is read (continuing from the row, if any), or it could
/// not be told this tick (the row, if any, kept).
enum Kept {
    Stored(Box<Tracked>),
    Read(Option<SessionCacheRow>),
    Unread(SourceError, Option<SessionCacheRow>),
}

/// A request the server's deadline cut short (it timed out once the deadline passed) counts as
/// one the deadline left out, told right after it ended.
fn cut<T>(server: &OpencodeServer, answer: Result<T, SourceError>) -> Result<T, SourceError> {
    match answer {
        Err(SourceError::Timeout { url, .. }) if server.late() => Err(SourceError::Skipped { url }),
        answer => answer,
    }
}

/// What [`OpencodeServer::messages_after`] answers.
type MessagesAfter = Result<(Vec<LiteMessage>, bool), SourceError>;

/// `work` on every item, on at most `workers` threads sharing the server's connections; `take`
/// gets each answer (with the item's index) on the calling thread as it comes. A worker hands
/// over one answer at a time, so at most `workers` answers wait. An item whose worker died
/// gets no answer.
fn each_in_parallel<T: Sync, R: Send>(
    items: &[T],
    workers: usize,
    work: impl Fn(&T) -> R + Sync,
    mut take: impl FnMut(usize, R),
) {
    if items.is_empty() {
        return;
    }
    let next = std::sync::atomic::AtomicUsize::new(0);
    let (next, work) = (&next, &work);
    std::thread::scope(|scope| {
        let (tx, rx) = std::sync::mpsc::sync_channel(0);
        for _ in 0..workers.clamp(1, items.len()) {
            let tx = tx.clone();
            scope.spawn(move || {
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some(item) = items.get(i) else { break };
                    if tx.send((i, work(item))).is_err() {
                        break;
                    }
                }
            });
        }
        drop(tx);
        for (i, answer) in rx {
            take(i, answer);
        }
    });
}

/// Each session's newest message id ([`OpencodeServer::newest_message_id`]), asked `parallel`
/// at a time. A session missing from the answer is asked again by the caller.
fn newest_message_ids(
    server: &OpencodeServer,
    ids: &[&str],
    parallel: usize,
) -> HashMap<String, Result<Option<String>, SourceError>> {
    let mut asked = HashMap::new();
    each_in_parallel(
        ids,
        parallel,
        |id| cut(server, server.newest_message_id(id)),
        |i, answer| {
            asked.insert(ids[i].to_owned(), answer);
        },
    );
    asked
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
