//! Delivery from the outbox: after a tick's transaction stored its events, each pending row is
//! sent and marked per channel; a failure stays pending and is sent again by the next tick with
//! the same dedup key (at least once; receivers deduplicate on the key).
//!
//! The alert state records a delivery (the channel's rate-limit window, the resolve's receivers)
//! only when the send succeeded, in the same transaction that marks the row delivered.

use super::ALERT_STATE_KEY;
use crate::config::{Config, Env};
use crate::error::Error;
use crate::fleet::ALERTMANAGER_TYPE;
use crate::journal::Line;
use crate::notify::{SendReport, send};
use agentwatch_store::{OutboxEvent, Store};
use alert_state::{AlertEvent, AlertState, Decision};
use std::collections::HashSet;

/// Pending rows one tick sends at most (oldest first); the rest wait for the next tick.
pub const MAX_SENDS_PER_TICK: usize = 100;

/// The outbox rows of a tick's decisions: one per delivered route (but Alertmanager's).
pub fn outbox_events(decisions: &[Decision]) -> Result<Vec<OutboxEvent>, Error> {
    let mut events = Vec::new();
    for dispatch in decisions.iter().filter_map(|d| d.dispatch.as_ref()) {
        let payload = serde_json::to_string(&dispatch.event)
            .map_err(|e| Error::software(format!("outbox payload: {e}")))?;
        // Alertmanager channels post what they hold every tick (`crate::fleet`) instead.
        for route in dispatch
            .routes
            .iter()
            .filter(|r| r.delivery.is_delivered() && r.channel_type != ALERTMANAGER_TYPE)
        {
            events.push(OutboxEvent {
                dedup_key: dispatch.event.dedup_key.clone(),
                kind: dispatch.event.state.as_str().to_owned(),
                channel: route.channel.clone(),
                payload: payload.clone(),
            });
        }
    }
    Ok(events)
}

/// Dedup keys resolved this tick (their undelivered older events are superseded).
pub fn resolved_keys(decisions: &[Decision]) -> Vec<String> {
    decisions
        .iter()
        .filter_map(|d| d.dispatch.as_ref())
        .filter(|d| d.event.state == alert_state::EventState::Resolve)
        .map(|d| d.event.dedup_key.clone())
        .collect()
}

/// Send every pending outbox row (this tick's and any left by an earlier tick that failed or
/// was killed), oldest first. A channel that fails is not tried again in this tick. Returns the
/// reports, by dedup key.
pub fn deliver_pending(
    config: &Config,
    store: &mut Store,
    state: &mut AlertState,
    now: i64,
    env: Env<'_>,
) -> Result<Vec<(String, SendReport)>, Error> {
    let rows = store
        .pending_deliveries(MAX_SENDS_PER_TICK)
        .map_err(Error::from)?;
    let mut reports = Vec::new();
    let mut failed_channels: HashSet<String> = HashSet::new();
    for row in rows {
        let key = &row.event.dedup_key;
        let channel = &row.event.channel;
        let (retry, queued_at) = if row.created_at < now || row.attempts > 0 {
            (Some(row.attempts + 1), Some(row.created_at))
        } else {
            (None, None)
        };
        let event: AlertEvent = match serde_json::from_str(&row.event.payload) {
            Ok(event) => event,
            Err(e) => {
                store.drop_pending(row.id).map_err(Error::from)?;
                Line::warning("watchdog", now)
                    .field("dedup", key)
                    .field("channel", channel)
                    .field("delivery", "dropped")
                    .field("reason", format!("the stored event does not load: {e}"))
                    .emit();
                continue;
            }
        };
        if !config.channels.iter().any(|c| &c.name == channel) {
            store.drop_pending(row.id).map_err(Error::from)?;
            Line::warning("watchdog", now)
                .field("dedup", key)
                .field("channel", channel)
                .field("delivery", "dropped")
                .field("reason", "the channel is no longer configured")
                .emit();
            continue;
        }
        if failed_channels.contains(channel) {
            continue;
        }
        let report = send(config, channel, &event, false, now, env);
        if report.result == "failed" {
            let message = report.message.clone().unwrap_or_default();
            store
                .mark_failed(row.id, now, &message)
                .map_err(Error::from)?;
            failed_channels.insert(channel.clone());
        } else {
            state.record_sent(&event, channel, now);
            let json = serde_json::to_string(state).map_err(|e| Error::software(e.to_string()))?;
            store
                .mark_delivered_saving(row.id, now, &[(ALERT_STATE_KEY.to_owned(), json)])
                .map_err(Error::from)?;
        }
        super::delivery_line(now, &report.result)
            .field("dedup", key)
            .field("state", event.state.as_str())
            .field("channel", channel)
            .field("delivery", &report.result)
            .field_opt("retry", retry)
            .field_opt("queued_at", queued_at)
            .field_opt("message", report.message.as_ref())
            .emit();
        reports.push((key.clone(), report));
    }
    Ok(reports)
}
