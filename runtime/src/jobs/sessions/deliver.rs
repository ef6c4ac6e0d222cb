//! Delivery from the outbox: after a tick's transaction stored its events, each pending row is
//! sent and marked per channel; a failure stays pending and is sent again by the next tick with
//! the same dedup key (at least once; receivers deduplicate on the key).
//!
//! The alert state records a delivery (the channel's rate-limit window, the resolve's receivers)
//! only when the send succeeded, in the same transaction that marks the row delivered. A send
//! is recorded as started before it goes out (nothing goes out when that write fails): a send
//! whose outcome was never recorded (a kill, a full disk) leaves its channel in doubt, and the
//! next tick counts it among the alert's receivers ([`super::memory`]), so the resolve reaches
//! a channel that may hold the trigger.
//!
//! A rate limit delays, it never drops: an event the router held for a busy channel waits in
//! the outbox and goes out once the channel is free. Channels a person reads (desktop,
//! Telegram, Slack- and ntfy-style webhooks) get every event a tick sends them as ONE grouped
//! notification ("20 sessions looping: …", naming each). Receivers that deduplicate per key
//! (webhook `json` and `pagerduty`, the log channel's JSON lines, Alertmanager) get one event
//! per dedup key, never grouped.

use super::ALERT_STATE_KEY;
use crate::config::ChannelSection;
use crate::config::{Config, Env};
use crate::error::Error;
use crate::fleet::ALERTMANAGER_TYPE;
use crate::journal::Line;
use crate::notify::AlertNote;
use crate::notify::{SendReport, send};
use agentwatch_store::{OutboxEvent, OutboxRow, Store};
use alert_state::{
    AlertConfig, AlertEvent, AlertState, Decision, Delivery, EventState, GroupBy, Severity,
    Suppression,
};
use serde_json::{Value, json};
use std::collections::BTreeMap;

/// Pending rows one tick sends at most (oldest first); the rest wait for the next tick.
pub const MAX_SENDS_PER_TICK: usize = 100;

/// The outbox rows of a tick's decisions: one per delivered route and one per route held by
/// the channel's rate limit (sent when the channel is free), but Alertmanager's.
pub fn outbox_events(decisions: &[Decision]) -> Result<Vec<OutboxEvent>, Error> {
    let mut events = Vec::new();
    for dispatch in decisions.iter().filter_map(|d| d.dispatch.as_ref()) {
        let payload = serde_json::to_string(&dispatch.event)
            .map_err(|e| Error::software(format!("outbox payload: {e}")))?;
        // Alertmanager channels post what they hold every tick (`crate::fleet`) instead.
        for route in dispatch
            .routes
            .iter()
            .filter(|r| is_queued(r.delivery) && r.channel_type != ALERTMANAGER_TYPE)
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

/// Whether a route's event goes to the outbox: delivered now, or held by the rate limit.
pub fn is_queued(delivery: Delivery) -> bool {
    matches!(
        delivery,
        Delivery::Delivered | Delivery::Suppressed(Suppression::RateLimited)
    )
}

/// Whether a channel takes a tick's events as one grouped notification (`group_by =
/// "channel"`: a person reads it) rather than one event per dedup key (`"key"`: a receiver
/// deduplicates on the key).
pub fn groups(section: &ChannelSection) -> bool {
    section.group_by() == GroupBy::Channel
}

/// The longest summary a grouped notification gets; alerts past it are counted, not named.
pub const MAX_GROUP_SUMMARY: usize = 3000;

/// One notification for several events: the title counts them ("20 sessions looping", "2
/// resolved"), the summary names each (its title and root), within [`MAX_GROUP_SUMMARY`]
/// characters, the most severe first; `details.dedup_keys` lists every key.
pub fn group_event(events: &[AlertEvent], dashboard_base_url: &str) -> AlertEvent {
    let mut sorted: Vec<&AlertEvent> = events.iter().collect();
    sorted.sort_by(|a, b| {
        (
            a.state == EventState::Resolve,
            std::cmp::Reverse(a.severity),
            &a.dedup_key,
        )
            .cmp(&(
                b.state == EventState::Resolve,
                std::cmp::Reverse(b.severity),
                &b.dedup_key,
            ))
    });
    let alarms = sorted
        .iter()
        .filter(|e| e.state != EventState::Resolve)
        .count();
    let resolved = sorted.len() - alarms;
    let loops = sorted
        .iter()
        .all(|e| alert_state::is_loop_key(&e.dedup_key));
    let title = group_title(alarms, resolved, loops);
    let summary = group_summary(&sorted);
    let severity = sorted
        .iter()
        .map(|e| e.severity)
        .max()
        .unwrap_or(Severity::Info);
    let state = if alarms > 0 {
        EventState::Trigger
    } else {
        EventState::Resolve
    };
    let keys: Vec<&str> = sorted.iter().map(|e| e.dedup_key.as_str()).collect();
    let ids: Vec<String> = sorted.iter().map(|e| e.event_id()).collect();
    let mut details = json!({"grouped": sorted.len(), "dedup_keys": keys, "event_ids": ids});
    if !dashboard_base_url.trim().is_empty() {
        details["link"] = Value::String(dashboard_base_url.to_owned());
    }
    AlertEvent {
        dedup_key: format!("agentwatch-group:{}", keys.join(",")),
        severity,
        state,
        title,
        summary,
        details,
        source: sorted.first().map(|e| e.source.clone()).unwrap_or_default(),
    }
}

/// A grouped notification's title: `20 sessions looping`, `2 resolved`, or counting alerts when
/// blindness alerts are among them (`loops` false).
fn group_title(alarms: usize, resolved: usize, loops: bool) -> String {
    let sessions = |n: usize| format!("{n} session{}", if n == 1 { "" } else { "s" });
    match (alarms, resolved) {
        // Blindness alerts among them: the title counts alerts, not sessions.
        (a, r) if !loops => {
            let alerts = format!("{a} alert{}", if a == 1 { "" } else { "s" });
            match (a, r) {
                (0, r) => format!("{r} resolved"),
                (_, 0) => alerts,
                (_, r) => format!("{alerts}, {r} resolved"),
            }
        }
        (0, r) => format!("{} no longer looping", sessions(r)),
        (a, 0) => format!("{} looping", sessions(a)),
        (a, r) => format!("{} looping, {r} resolved", sessions(a)),
    }
}

/// A grouped notification's summary: one line per event (its title and root, marked critical or
/// resolved), within [`MAX_GROUP_SUMMARY`] characters.
fn group_summary(sorted: &[&AlertEvent]) -> String {
    let mut summary = String::new();
    for (named, event) in sorted.iter().enumerate() {
        let root = alert_state::loop_root(&event.dedup_key).unwrap_or(&event.dedup_key);
        let mark = match event.state {
            EventState::Resolve => "resolved: ",
            _ if event.severity == Severity::Critical => "critical: ",
            _ => "",
        };
        let line = format!("{mark}{} ({root})\n", event.title);
        let more = sorted.len() - named;
        // Room for this line and, if others would not fit after it, the closing count.
        let tail = if more > 1 { 24 } else { 0 };
        if summary.len() + line.len() + tail > MAX_GROUP_SUMMARY {
            summary.push_str(&format!("… and {more} more\n"));
            break;
        }
        summary.push_str(&line);
    }
    summary.trim_end().to_owned()
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

/// Send every pending outbox row (this tick's and any left by an earlier tick that failed, was
/// killed, or was held by a rate limit), oldest first, channel by channel. A channel's
/// triggers and escalates wait while its rate limit runs (resolves never wait); a channel that
/// groups gets all its ready rows as one notification (the newest event per key). A channel
/// that fails is not tried again in this tick. Returns the reports, by dedup key.
pub fn deliver_pending(
    config: &Config,
    store: &mut Store,
    state: &mut AlertState,
    now: i64,
    env: Env<'_>,
) -> Result<Vec<(String, SendReport)>, Error> {
    let channels = config.alert_config("").channels;
    let batches = pending_batches(config, store, now)?;
    let notes = crate::notify::alert_notes(store);
    let mut reports = Vec::new();
    for (channel, batch) in batches {
        let batch = at_send_time(config, store, state, &notes, (&channel, batch), now)?;
        let (Some(section), Some(gates)) = (
            config.channels.iter().find(|c| c.name == channel),
            channels.iter().find(|c| c.name == channel),
        ) else {
            continue;
        };
        let (ready, held): (Vec<_>, Vec<_>) = batch.into_iter().partition(|(_, e)| {
            e.state == EventState::Resolve
                || state.router.is_free(gates, &e.dedup_key, e.severity, now)
        });
        for (row, event) in &held {
            Line::info("watchdog", now)
                .field("dedup", &row.event.dedup_key)
                .field("state", event.state.as_str())
                .field("channel", &channel)
                .field("delivery", "held")
                .field("queued_at", alert_state::iso8601(row.created_at))
                .field(
                    "reason",
                    format!(
                        "rate limit {} s: sent when the channel is free",
                        gates.rate_limit_s
                    ),
                )
                .emit();
        }
        if ready.len() > 1 && groups(section) {
            reports.extend(send_group(config, store, state, &channel, ready, now, env)?);
            continue;
        }
        for (row, event) in ready {
            store.mark_sending(&[row.id], now).map_err(Error::from)?;
            let report = send(config, &channel, &event, false, now, env);
            let failed = report.result == "failed";
            let sent = &[(&row, &event)];
            record(store, state, (&channel, gates.group_by), sent, &report, now)?;
            reports.push((row.event.dedup_key.clone(), report));
            if failed {
                break;
            }
        }
    }
    super::blind::record_sends(store, &reports, now)?;
    Ok(reports)
}

/// What a row's event says when it is sent, not when it was queued: an alert silenced since is
/// dropped (`delivery=silenced`); an acknowledged alert's escalate or reminder is dropped from
/// a channel that already had the alert (`delivery=acked`: someone is on it); an escalate to a
/// channel that never had the alert is its first word there, so it goes as a trigger; a
/// blindness summary states its ages as of now.
fn at_send_time(
    config: &Config,
    store: &mut Store,
    state: &AlertState,
    notes: &BTreeMap<String, AlertNote>,
    (channel, batch): (&str, Vec<(OutboxRow, AlertEvent)>),
    now: i64,
) -> Result<Vec<(OutboxRow, AlertEvent)>, Error> {
    let mut kept = Vec::with_capacity(batch.len());
    for (row, mut event) in batch {
        let key = &event.dedup_key;
        let had_it = state
            .router
            .delivered
            .get(key)
            .is_some_and(|c| c.contains(channel));
        let silenced = config.silences.get(key).filter(|until| **until > now);
        let acked = notes.get(key).and_then(|n| n.acked_at).filter(|_| had_it);
        let dropped = match (event.state, silenced, acked) {
            (EventState::Resolve, _, _) => None,
            (_, Some(until), _) => Some((
                "silenced",
                format!("{key} is silenced until {}", alert_state::iso8601(*until)),
            )),
            (_, None, Some(at)) => Some((
                "acked",
                format!(
                    "{key} was acknowledged at {} and `{channel}` has it",
                    alert_state::iso8601(at)
                ),
            )),
            _ => None,
        };
        if let Some((delivery, reason)) = dropped {
            store.drop_pending(row.id).map_err(Error::from)?;
            Line::info("watchdog", now)
                .field("dedup", key)
                .field("state", event.state.as_str())
                .field("channel", channel)
                .field("delivery", delivery)
                .field("queued_at", alert_state::iso8601(row.created_at))
                .field("reason", reason)
                .emit();
            continue;
        }
        if event.state == EventState::Escalate && !had_it {
            event.state = EventState::Trigger;
        }
        if let Some(summary) = super::blind::summary_at(&event, now) {
            event.summary = summary;
        }
        kept.push((row, event));
    }
    Ok(kept)
}

/// The pending outbox rows (oldest first, at most [`MAX_SENDS_PER_TICK`]) by channel, each
/// with its event. A row whose event does not load, or whose channel is no longer configured,
/// is dropped with a warning.
fn pending_batches(config: &Config, store: &mut Store, now: i64) -> Result<Batches, Error> {
    let rows = store
        .pending_deliveries(MAX_SENDS_PER_TICK)
        .map_err(Error::from)?;
    let mut batches: Batches = Vec::new();
    for row in rows {
        let key = &row.event.dedup_key;
        let channel = &row.event.channel;
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
        match batches.iter_mut().find(|(c, _)| c == channel) {
            Some((_, batch)) => batch.push((row, event)),
            None => batches.push((channel.clone(), vec![(row, event)])),
        }
    }
    Ok(batches)
}

/// Outbox rows by channel, in the order the channels first appear.
type Batches = Vec<(String, Vec<(OutboxRow, AlertEvent)>)>;

/// When the tick should come again for the outbox: the first rate-limited channel's free time
/// ([`AlertState::next_wakeup`]) while any event waits there; `None` when nothing waits.
pub fn next_wakeup(
    store: &Store,
    state: &AlertState,
    config: &AlertConfig,
    now: i64,
) -> Result<Option<i64>, Error> {
    let waiting = store.pending_deliveries(1).map_err(Error::from)?;
    Ok(if waiting.is_empty() {
        None
    } else {
        state.next_wakeup(config, now)
    })
}

/// Send a channel's ready rows as one notification: the newest event of each key, grouped.
fn send_group(
    config: &Config,
    store: &mut Store,
    state: &mut AlertState,
    channel: &str,
    ready: Vec<(OutboxRow, AlertEvent)>,
    now: i64,
    env: Env<'_>,
) -> Result<Vec<(String, SendReport)>, Error> {
    // Rows are oldest first: a later row of a key replaces an earlier one in the group.
    let mut newest: Vec<&AlertEvent> = Vec::new();
    for (_, event) in &ready {
        match newest.iter_mut().find(|e| e.dedup_key == event.dedup_key) {
            Some(slot) => *slot = event,
            None => newest.push(event),
        }
    }
    let events: Vec<AlertEvent> = newest.into_iter().cloned().collect();
    let group = group_event(&events, &config.watchdog.dashboard_base_url);
    let ids: Vec<i64> = ready.iter().map(|(row, _)| row.id).collect();
    store.mark_sending(&ids, now).map_err(Error::from)?;
    let report = send(config, channel, &group, false, now, env);
    let pairs: Vec<(&OutboxRow, &AlertEvent)> = ready.iter().map(|(r, e)| (r, e)).collect();
    // Only a `group_by = "channel"` channel groups.
    record(
        store,
        state,
        (channel, GroupBy::Channel),
        &pairs,
        &report,
        now,
    )?;
    Ok(ready
        .iter()
        .map(|(row, _)| (row.event.dedup_key.clone(), report.clone()))
        .collect())
}

/// Mark rows sent in one notification: delivered (recording each event in the alert state, so
/// the rate-limit window starts and the resolves have their receivers) or failed; one journal
/// line per row.
fn record(
    store: &mut Store,
    state: &mut AlertState,
    (channel, group_by): (&str, GroupBy),
    rows: &[(&OutboxRow, &AlertEvent)],
    report: &SendReport,
    now: i64,
) -> Result<(), Error> {
    let grouped = (rows.len() > 1).then_some(rows.len());
    for (row, event) in rows {
        if report.result == "failed" {
            let message = report.message.clone().unwrap_or_default();
            let marked = if report.in_doubt {
                store.mark_unanswered(row.id, now, &message)
            } else {
                store.mark_failed(row.id, now, &message)
            };
            marked.map_err(Error::from)?;
        } else {
            state.record_sent(event, channel, group_by, now);
            let json = serde_json::to_string(state).map_err(|e| Error::software(e.to_string()))?;
            store
                .mark_delivered_saving(row.id, now, &[(ALERT_STATE_KEY.to_owned(), json)])
                .map_err(Error::from)?;
        }
        let (retry, queued_at) = if row.created_at < now || row.attempts > 0 {
            (
                Some(row.attempts + 1),
                Some(alert_state::iso8601(row.created_at)),
            )
        } else {
            (None, None)
        };
        crate::notify::delivery_line("watchdog", now, &report.result)
            .field("dedup", &row.event.dedup_key)
            .field("state", event.state.as_str())
            .field("channel", channel)
            .field("delivery", &report.result)
            .field_opt("grouped", grouped)
            .field_opt("retry", retry)
            .field_opt("queued_at", queued_at)
            .field_opt("message", report.message.as_ref())
            .emit();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(key: &str, state: EventState) -> AlertEvent {
        AlertEvent {
            dedup_key: key.to_owned(),
            severity: Severity::Warning,
            state,
            title: format!("title of {key}"),
            summary: String::new(),
            details: json!({}),
            source: "agentwatch@test".to_owned(),
        }
    }

    #[test]
    fn a_group_title_counts_sessions_or_alerts() {
        let rows = [
            (
                vec![("opencode-loop:a", EventState::Trigger)],
                "1 session looping",
            ),
            (
                vec![
                    ("opencode-loop:a", EventState::Trigger),
                    ("opencode-loop:b", EventState::Resolve),
                ],
                "1 session looping, 1 resolved",
            ),
            (
                vec![
                    ("opencode-loop:a", EventState::Trigger),
                    ("blind:http://127.0.0.1:4096", EventState::Trigger),
                ],
                "2 alerts",
            ),
            (
                vec![
                    ("blind:opencode.db", EventState::Resolve),
                    ("blind:job:deck", EventState::Trigger),
                ],
                "1 alert, 1 resolved",
            ),
            (vec![("blind:job:deck", EventState::Resolve)], "1 resolved"),
        ];
        for (events, title) in rows {
            let events: Vec<AlertEvent> = events.iter().map(|(k, s)| event(k, *s)).collect();
            assert_eq!(group_event(&events, "").title, title);
        }
    }
}
