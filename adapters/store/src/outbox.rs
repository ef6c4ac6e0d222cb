//! The outbox: events are written in the tick's transaction and delivered after.
//!
//! A tick commits what it decided (tick row, verdicts, alerts, policy state) and the events to
//! send, one [`OutboxEvent`] per channel, in one transaction ([`Store::commit_tick`]). Delivery
//! happens after the commit: each row is sent, then marked delivered
//! ([`Store::mark_delivered`]) or failed ([`Store::mark_failed`]). A kill or a full disk at any
//! point leaves either nothing decided (the next tick decides again) or rows not marked
//! delivered (sent again: at least once, with the same dedup key receivers deduplicate on).
//!
//! A send is recorded as started ([`Store::mark_sending`]) before it goes out, so a row whose
//! send started and whose outcome was never recorded is known ([`Store::in_doubt`]): its
//! channel may hold the event, and the alert's resolve goes there too.

use crate::{AlertRow, VerdictRow};
use crate::{Store, StoreError, insert_tick, save_state, upsert_alerts};
use rusqlite::params;
use serde::{Deserialize, Serialize};

/// One event to deliver to one channel.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutboxEvent {
    /// The alert's dedup key (`opencode-loop:{root}`), which receivers deduplicate on.
    pub dedup_key: String,
    /// `trigger`, `escalate` or `resolve`.
    pub kind: String,
    pub channel: String,
    /// What the channel needs to send it (JSON).
    pub payload: String,
}

/// An outbox row, as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutboxRow {
    pub id: i64,
    pub event: OutboxEvent,
    pub created_at: i64,
    /// Failed sends so far.
    pub attempts: i64,
    pub last_attempt_at: Option<i64>,
    /// The last failure, as the channel reported it (already redacted by the channel).
    pub last_error: Option<String>,
    pub delivered_at: Option<i64>,
}

/// Everything one tick writes, committed together by [`Store::commit_tick`].
#[derive(Debug, Clone, Copy, Default)]
pub struct TickWrite<'a> {
    pub ticked_at: i64,
    /// `ok`, `flagged` or `no_source`.
    pub outcome: &'a str,
    pub sessions_seen: i64,
    pub alerts_fired: i64,
    pub servers: &'a [String],
    pub verdicts: &'a [VerdictRow],
    pub alerts: &'a [AlertRow],
    /// Policy states to save, `(key, JSON)`.
    pub states: &'a [(String, String)],
    /// Events to deliver after the commit. A new event for a dedup key and channel supersedes
    /// an undelivered older trigger or escalate of the same key and channel (only the newest
    /// state matters), never a resolve (it ends an earlier alert of the key).
    pub outbox: &'a [OutboxEvent],
    /// Dedup keys whose alert resolved this tick: their undelivered older triggers and
    /// escalates are dropped on every channel (a trigger that never arrived needs no resolve
    /// either); an earlier alert's resolve stays.
    pub supersede: &'a [String],
}

/// The schema version that added `sending_at` (migration 7).
const SENDING_AT_VERSION: i64 = 7;

const ROW_COLUMNS: &str = "id, dedup_key, kind, channel, payload, created_at, attempts,
    last_attempt_at, last_error, delivered_at";

fn row(r: &rusqlite::Row<'_>) -> rusqlite::Result<OutboxRow> {
    Ok(OutboxRow {
        id: r.get(0)?,
        event: OutboxEvent {
            dedup_key: r.get(1)?,
            kind: r.get(2)?,
            channel: r.get(3)?,
            payload: r.get(4)?,
        },
        created_at: r.get(5)?,
        attempts: r.get(6)?,
        last_attempt_at: r.get(7)?,
        last_error: r.get(8)?,
        delivered_at: r.get(9)?,
    })
}

/// Drops undelivered rows of `keys` (any channel) but resolves; returns how many.
///
/// A resolve is never superseded: it ends an earlier alert of the key (a key loops, is fixed
/// and loops again), which a receiver holding that alert's trigger must hear, whatever comes
/// after.
fn supersede(conn: &rusqlite::Connection, keys: &[String]) -> Result<usize, StoreError> {
    let mut stmt = conn.prepare(
        "DELETE FROM watchdog_outbox
         WHERE delivered_at IS NULL AND dedup_key = ?1 AND kind != 'resolve'",
    )?;
    let mut dropped = 0;
    for key in keys {
        dropped += stmt.execute([key])?;
    }
    Ok(dropped)
}

fn enqueue(
    conn: &rusqlite::Connection,
    events: &[OutboxEvent],
    now: i64,
) -> Result<(), StoreError> {
    // An older trigger or escalate of the key is replaced (the newest state of the alert is
    // what matters); an older resolve stays (see `supersede`).
    let mut older = conn.prepare(
        "DELETE FROM watchdog_outbox
         WHERE delivered_at IS NULL AND dedup_key = ?1 AND channel = ?2 AND kind != 'resolve'",
    )?;
    let mut stmt = conn.prepare(
        "INSERT INTO watchdog_outbox (dedup_key, kind, channel, payload, created_at)
         VALUES (?1, ?2, ?3, ?4, ?5)",
    )?;
    for e in events {
        older.execute(params![e.dedup_key, e.channel])?;
        stmt.execute(params![e.dedup_key, e.kind, e.channel, e.payload, now])?;
    }
    Ok(())
}

impl Store {
    /// Write a whole tick in one transaction: the tick and its verdicts, the alerts, the
    /// policy states and the events to deliver. Either all of it is stored or none. Returns
    /// the tick id.
    pub fn commit_tick(&mut self, tick: &TickWrite<'_>) -> Result<i64, StoreError> {
        let tx = self.conn.transaction()?;
        let tick_id = insert_tick(
            &tx,
            tick.ticked_at,
            tick.outcome,
            tick.sessions_seen,
            tick.alerts_fired,
            tick.servers,
            tick.verdicts,
        )?;
        upsert_alerts(&tx, tick.alerts)?;
        for (key, value) in tick.states {
            save_state(&tx, key, value, tick.ticked_at)?;
        }
        supersede(&tx, tick.supersede)?;
        enqueue(&tx, tick.outbox, tick.ticked_at)?;
        tx.commit()?;
        Ok(tick_id)
    }

    /// Mark a row delivered and save policy states (`(key, JSON)`) in one transaction: the
    /// state that records the delivery (a rate-limit window, a resolve's receivers) is never
    /// out of step with the row.
    pub fn mark_delivered_saving(
        &mut self,
        id: i64,
        now: i64,
        states: &[(String, String)],
    ) -> Result<(), StoreError> {
        let tx = self.conn.transaction()?;
        tx.execute(
            "UPDATE watchdog_outbox SET delivered_at = COALESCE(delivered_at, ?2),
               last_attempt_at = ?2 WHERE id = ?1",
            params![id, now],
        )?;
        for (key, value) in states {
            save_state(&tx, key, value, now)?;
        }
        tx.commit()?;
        Ok(())
    }

    /// Drop an undelivered row that can never be sent (its channel is no longer configured,
    /// its payload does not load). Returns whether a row was dropped.
    pub fn drop_pending(&mut self, id: i64) -> Result<bool, StoreError> {
        Ok(self.conn.execute(
            "DELETE FROM watchdog_outbox WHERE id = ?1 AND delivered_at IS NULL",
            [id],
        )? == 1)
    }

    /// Add events to the outbox on their own (one transaction).
    pub fn enqueue(&mut self, events: &[OutboxEvent], now: i64) -> Result<(), StoreError> {
        let tx = self.conn.transaction()?;
        enqueue(&tx, events, now)?;
        tx.commit()?;
        Ok(())
    }

    /// Undelivered events, oldest first (at most `limit`).
    pub fn pending_deliveries(&self, limit: usize) -> Result<Vec<OutboxRow>, StoreError> {
        let mut stmt = self.conn.prepare(&format!(
            "SELECT {ROW_COLUMNS} FROM watchdog_outbox WHERE delivered_at IS NULL
             ORDER BY id LIMIT ?1"
        ))?;
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = stmt.query_map([limit], row)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Every outbox row, oldest first (status and tests).
    pub fn outbox(&self) -> Result<Vec<OutboxRow>, StoreError> {
        let mut stmt = self.conn.prepare(&format!(
            "SELECT {ROW_COLUMNS} FROM watchdog_outbox ORDER BY id"
        ))?;
        let rows = stmt.query_map([], row)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Mark a row delivered (its channel accepted it). Marking twice keeps the first time.
    pub fn mark_delivered(&mut self, id: i64, now: i64) -> Result<(), StoreError> {
        self.conn.execute(
            "UPDATE watchdog_outbox SET delivered_at = COALESCE(delivered_at, ?2),
               last_attempt_at = ?2 WHERE id = ?1",
            params![id, now],
        )?;
        Ok(())
    }

    /// Record a failed send of a row; it stays pending for the next delivery run. This send is
    /// no longer in doubt (the channel said it did not take it), but an earlier one that was
    /// never answered or recorded still is: the channel may hold that one.
    pub fn mark_failed(&mut self, id: i64, now: i64, error: &str) -> Result<(), StoreError> {
        self.record_failure(id, now, error, false)
    }

    /// Record a send whose outcome is unknown (it timed out after the request went out: the
    /// channel may have taken it): pending for the next delivery run like a failure, and in
    /// doubt ([`Store::in_doubt`]) until a later send of the row is recorded.
    pub fn mark_unanswered(&mut self, id: i64, now: i64, error: &str) -> Result<(), StoreError> {
        self.record_failure(id, now, error, true)
    }

    fn record_failure(
        &mut self,
        id: i64,
        now: i64,
        error: &str,
        in_doubt: bool,
    ) -> Result<(), StoreError> {
        self.conn.execute(
            "UPDATE watchdog_outbox SET attempts = attempts + 1, last_attempt_at = ?2,
               last_error = ?3,
               sending_at = CASE WHEN ?4 OR sending_at < ?2 THEN sending_at ELSE NULL END
             WHERE id = ?1 AND delivered_at IS NULL",
            params![id, now, error, in_doubt],
        )?;
        Ok(())
    }

    /// Record that the sends of these rows start now (one transaction), before they go out:
    /// until [`Store::mark_delivered`] or [`Store::mark_failed`] records the outcome, the
    /// channel may or may not hold the event ([`Store::in_doubt`]). A row already in doubt
    /// keeps the time of the send that put it there. When this fails, nothing may be sent.
    pub fn mark_sending(&mut self, ids: &[i64], now: i64) -> Result<(), StoreError> {
        let tx = self.conn.transaction()?;
        {
            let mut stmt = tx.prepare(
                "UPDATE watchdog_outbox SET sending_at = COALESCE(sending_at, ?2)
                 WHERE id = ?1 AND delivered_at IS NULL",
            )?;
            for id in ids {
                stmt.execute(params![id, now])?;
            }
        }
        tx.commit()?;
        Ok(())
    }

    /// `(dedup key, channel)` of every trigger or escalate whose send started and whose outcome
    /// was never recorded (the process died or the disk filled between the send and its
    /// record) or was no answer ([`Store::mark_unanswered`]): the channel may hold the event. Sorted, without repeats. A file not migrated
    /// yet (a dry run reads it as it is) has none.
    pub fn in_doubt(&self) -> Result<Vec<(String, String)>, StoreError> {
        if self.schema_version()? < SENDING_AT_VERSION {
            return Ok(Vec::new());
        }
        let mut stmt = self.conn.prepare(
            "SELECT DISTINCT dedup_key, channel FROM watchdog_outbox
             WHERE delivered_at IS NULL AND sending_at IS NOT NULL AND kind != 'resolve'
             ORDER BY dedup_key, channel",
        )?;
        let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Drop delivered rows delivered before `before`; returns how many.
    pub fn prune_delivered(&mut self, before: i64) -> Result<usize, StoreError> {
        Ok(self.conn.execute(
            "DELETE FROM watchdog_outbox WHERE delivered_at IS NOT NULL AND delivered_at < ?1",
            [before],
        )?)
    }
}
