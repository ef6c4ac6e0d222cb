//! The act step of a tick: the loop report, the journal of each decision and route, one store
//! transaction (tick, verdicts, alerts, state, outbox, session cache), delivery from the outbox,
//! aborts, and the Alertmanager channels' posts. A dry run decides the same and performs nothing.

use super::decide::{Judged, sessions_by_id};
use super::deliver;
use super::loop_report;
use super::memory::{ALERT_STATE_KEY, Memory, load_alert_state, load_held_alerts};
use super::report::{TickReport, fired};
use super::sources::Collected;
use super::{Options, blind};
use crate::config::{Config, Env};
use crate::error::Error;
use crate::fleet::{self, ALERTMANAGER_STATE_KEY, ALERTMANAGER_TYPE, HeldAlerts, SyncReport};
use crate::journal::Line;
use crate::notify::{SendReport, alert_rows, decision_line, delivery_line, send};
use crate::stored::{job_event, record_events};
use agentwatch_opencode::lite::Spend;
use agentwatch_store::{EventKind, SessionCacheRow, Store, TickWrite, VerdictRow};
use alert_state::{
    AlertConfig, AlertEvent, AlertState, Decision, DecisionKind, Opinions, TickOutcome,
};
use detect_core::{Judgement, Session};
use std::collections::{BTreeMap, BTreeSet, HashSet};

/// Each send of the tick: `(dedup key, report)`.
type Sends = Vec<(String, SendReport)>;
/// Events for Alertmanager channels: `(channel, event)`.
type Routed = Vec<(String, AlertEvent)>;

/// What the decide step handed over.
#[derive(Debug)]
pub struct Decided {
    pub judged: Judged,
    pub outcome: TickOutcome,
    pub opinions: Opinions,
    pub memory: Memory,
    pub alert_config: AlertConfig,
}

/// Perform what the tick decided and report it.
pub fn act(
    config: &Config,
    store: Option<&mut Store>,
    collected: &Collected,
    decided: Decided,
    now: i64,
    args: &Options,
    env: Env<'_>,
) -> Result<TickReport, Error> {
    let Decided {
        judged,
        outcome,
        opinions,
        mut memory,
        alert_config,
    } = decided;
    if config.recover.opencode_report {
        let by_id = sessions_by_id(collected);
        write_loop_report(
            config,
            &judged.judgement,
            &by_id,
            &judged.stale_trees,
            now,
            args,
            env,
        );
    }
    let (mut sends, routed) = journal_routes(config, &outcome.decisions, now, args, env);
    let any_flagged = judged
        .judgement
        .trees
        .iter()
        .any(|t| t.flagged && !judged.stale_trees.contains(&t.root));
    let tick_outcome = if any_flagged { "flagged" } else { "ok" };
    let open_flagged = open_flagged(&judged, &outcome.state);
    let performed = perform(
        config,
        store.filter(|_| !args.dry_run),
        collected,
        &judged,
        &outcome,
        &opinions,
        &mut memory,
        &routed,
        &alert_config,
        tick_outcome,
        now,
        env,
    )?;
    if let Some(delivered) = performed.sends {
        sends = delivered;
    }
    let Performed {
        syncs,
        next_wakeup,
        aborts,
        ..
    } = performed;
    sends.extend(routed_reports(routed, &syncs, now));
    Ok(TickReport {
        now,
        outcome: tick_outcome,
        sources: collected.answered.clone(),
        failed: collected.failed.clone(),
        deadline_skipped: collected.deadline_skipped,
        stale: judged.stale_trees.into_iter().collect(),
        skipped: collected.skipped.clone(),
        judgement: judged.judgement,
        decisions: outcome.decisions,
        sends,
        alertmanager: syncs,
        next_wakeup,
        aborts,
        open_flagged,
    })
}

/// Open loop alerts whose tree is flagged now and not stale: the tick's `still_flagged`.
fn open_flagged(judged: &Judged, state: &AlertState) -> usize {
    let flagged: HashSet<&str> = judged
        .judgement
        .trees
        .iter()
        .filter(|t| t.flagged && !judged.stale_trees.contains(&t.root))
        .map(|t| t.root.as_str())
        .collect();
    state
        .open_alerts
        .values()
        .filter(|a| alert_state::is_loop_key(&a.dedup_key) && flagged.contains(a.root.as_str()))
        .count()
}

/// What the act step did past the journal: deliveries (`None` under `--dry-run` or without a
/// store: the journal's routes stand for them), Alertmanager syncs, when to wake, aborts.
struct Performed {
    sends: Option<Sends>,
    syncs: Vec<SyncReport>,
    next_wakeup: Option<i64>,
    aborts: Vec<(String, String)>,
}

/// Store the tick, then deliver, abort and sync from what was stored; without a store (or under
/// `--dry-run`) abort and sync as a dry run would, and store nothing.
#[allow(clippy::too_many_arguments)]
fn perform(
    config: &Config,
    store: Option<&mut Store>,
    collected: &Collected,
    judged: &Judged,
    outcome: &TickOutcome,
    opinions: &Opinions,
    memory: &mut Memory,
    routed: &Routed,
    alert_config: &AlertConfig,
    tick_outcome: &'static str,
    now: i64,
    env: Env<'_>,
) -> Result<Performed, Error> {
    let Some(store) = store else {
        let aborts = abort_loops(
            config,
            None,
            collected,
            &judged.judgement,
            &outcome.decisions,
            now,
        );
        let syncs = if memory.alertmanager {
            sync_alertmanager(config, &mut memory.held, routed, &outcome.state, now, true)
        } else {
            Vec::new()
        };
        return Ok(Performed {
            sends: None,
            syncs,
            next_wakeup: None,
            aborts,
        });
    };
    if memory.alertmanager {
        // Stored with the alert state in the tick's transaction (`commit`): one truth.
        let open_keys = outcome
            .state
            .open_alerts
            .keys()
            .map(String::as_str)
            .collect();
        fleet::fold(config, &mut memory.held, routed, &open_keys, now);
    }
    commit(
        store,
        collected,
        judged,
        outcome,
        opinions,
        memory,
        tick_outcome,
        now,
    )?;
    let mut state = outcome.state.clone();
    let sends = deliver::deliver_pending(config, store, &mut state, now, env)?;
    let next_wakeup = deliver::next_wakeup(store, &state, alert_config, now)?;
    let aborts = abort_loops(
        config,
        Some(store),
        collected,
        &judged.judgement,
        &outcome.decisions,
        now,
    );
    let syncs = if memory.alertmanager {
        sync_fleet(config, store, &mut memory.held, routed, &mut state, now)?
    } else {
        Vec::new()
    };
    Ok(Performed {
        sends: Some(sends),
        syncs,
        next_wakeup,
        aborts,
    })
}

/// One journal line per decision (a quiet tick is one line: an alert flagged again without a
/// transition is counted in the closing line, and written on its own only with `--verbose`)
/// and per route that is not delivered now. A dry run reports what it would send; a real tick
/// sends from the outbox after its transaction. Returns the dry run's sends and the events for
/// Alertmanager channels, which are posted with the open alerts they hold (`fleet`), not
/// through the outbox.
fn journal_routes(
    config: &Config,
    decisions: &[Decision],
    now: i64,
    args: &Options,
    env: Env<'_>,
) -> (Sends, Routed) {
    let mut sends = Vec::new();
    let mut routed = Vec::new();
    for decision in decisions {
        if args.verbose || decision.kind != DecisionKind::StillFlagged {
            decision_line("watchdog", now, decision).emit();
        }
        let Some(dispatch) = &decision.dispatch else {
            continue;
        };
        for route in &dispatch.routes {
            let delivered = route.delivery.is_delivered();
            if delivered && route.channel_type == ALERTMANAGER_TYPE {
                routed.push((route.channel.clone(), dispatch.event.clone()));
            } else if delivered && args.dry_run {
                let report = send(config, &route.channel, &dispatch.event, true, now, env);
                delivery_line("watchdog", now, &report.result)
                    .field("dedup", &decision.dedup_key)
                    .field("channel", &route.channel)
                    .field("delivery", &report.result)
                    .emit();
                sends.push((decision.dedup_key.clone(), report));
            } else if !delivered {
                // A rate-limited event is queued in the outbox: it goes out grouped with this
                // tick's others when the channel is free at delivery, else it is held there.
                let queued =
                    deliver::is_queued(route.delivery) && route.channel_type != ALERTMANAGER_TYPE;
                Line::info("watchdog", now)
                    .field("dedup", &decision.dedup_key)
                    .field("channel", &route.channel)
                    .field("delivery", if queued { "queued" } else { "suppressed" })
                    .field("reason", &route.reason)
                    .emit();
            }
        }
    }
    (sends, routed)
}

/// Every session's verdict as the store keeps it, with its root, spend and the LLM's opinion.
fn verdict_rows(
    judgement: &Judgement,
    collected: &Collected,
    opinions: &Opinions,
) -> Vec<VerdictRow> {
    let root_of: BTreeMap<&str, &str> = judgement
        .trees
        .iter()
        .flat_map(|t| {
            t.sessions
                .iter()
                .map(move |s| (s.as_str(), t.root.as_str()))
        })
        .collect();
    let spend_of: BTreeMap<&str, &Spend> = collected
        .sessions
        .iter()
        .map(|s| (s.info.id.as_str(), &s.spend))
        .collect();
    judgement
        .sessions
        .iter()
        .map(|v| {
            let root = root_of.get(v.id.as_str()).copied().unwrap_or(v.id.as_str());
            let spend = spend_of.get(v.id.as_str()).copied();
            VerdictRow {
                session_id: v.id.clone(),
                session_root: root.to_owned(),
                flagged: v.flagged,
                signals: v.signals.iter().map(|s| s.as_str().to_owned()).collect(),
                dup: v.reason.dup,
                top: i64::from(v.reason.top),
                top_what: v.reason.top_what.clone(),
                landed: v.reason.landed,
                slow: i64::from(v.reason.slow),
                coverage: v.reason.coverage,
                coverage_file: v.reason.coverage_file.clone(),
                calls_since_landed: i64::try_from(v.reason.calls_since_landed).unwrap_or(i64::MAX),
                llm_opinion: opinions.get(root).map(|o| o.as_str().to_owned()),
                model_id: spend.and_then(|s| s.model_id.clone()),
                provider: spend.and_then(|s| s.provider.clone()),
                cost_since_landed_usd: spend.and_then(|s| s.cost_since_landed_usd),
            }
        })
        .collect()
}

/// One transaction: the tick, its verdicts, the alerts, the alert state and the events to send
/// (delivery comes after, from the outbox: at least once); then each cached source's session
/// rows.
#[allow(clippy::too_many_arguments)]
fn commit(
    store: &mut Store,
    collected: &Collected,
    judged: &Judged,
    outcome: &TickOutcome,
    opinions: &Opinions,
    memory: &Memory,
    tick_outcome: &str,
    now: i64,
) -> Result<(), Error> {
    let state_json =
        serde_json::to_string(&outcome.state).map_err(|e| Error::software(e.to_string()))?;
    let mut states = vec![
        (ALERT_STATE_KEY.to_owned(), state_json),
        blind::state_row(&memory.health)?,
    ];
    if memory.alertmanager {
        let held =
            serde_json::to_string(&memory.held).map_err(|e| Error::software(e.to_string()))?;
        states.push((ALERTMANAGER_STATE_KEY.to_owned(), held));
    }
    store
        .commit_tick(&TickWrite {
            ticked_at: now,
            outcome: tick_outcome,
            sessions_seen: i64::try_from(collected.sessions.len()).unwrap_or(i64::MAX),
            alerts_fired: i64::try_from(fired(&outcome.decisions)).unwrap_or(i64::MAX),
            servers: &collected.answered,
            verdicts: &verdict_rows(&judged.judgement, collected, opinions),
            alerts: &alert_rows(&outcome.decisions),
            states: &states,
            outbox: &deliver::outbox_events(&outcome.decisions)?,
            supersede: &deliver::resolved_keys(&outcome.decisions),
        })
        .map_err(Error::from)?;
    for source in &collected.cached_sources {
        let (written, mut kept): (&[SessionCacheRow], HashSet<&str>) = judged
            .cache_rows
            .get(source)
            .map(|r| {
                (
                    r.written.as_slice(),
                    r.kept.iter().map(String::as_str).collect(),
                )
            })
            .unwrap_or_default();
        kept.extend(
            collected
                .stale_rows
                .get(source)
                .into_iter()
                .flatten()
                .map(String::as_str),
        );
        store
            .update_session_cache(source, written, &kept)
            .map_err(Error::from)?;
    }
    Ok(())
}

/// Post every Alertmanager channel's alerts (`routed` were folded in before the tick's
/// transaction, [`fleet::fold`]) and record what the posts took: a delivery counts
/// (rate-limit window, resolve receivers) once the post took it, and Alertmanager holds every
/// alert a successful post carried (a trigger that failed and went out re-asserted included),
/// so their resolves go to it. The alert state and what the channels hold are stored.
fn sync_fleet(
    config: &Config,
    store: &mut Store,
    held: &mut HeldAlerts,
    routed: &[(String, AlertEvent)],
    state: &mut AlertState,
    now: i64,
) -> Result<Vec<SyncReport>, Error> {
    let syncs = sync_alertmanager(config, held, &[], state, now, false);
    let posted = |channel: &str| {
        syncs
            .iter()
            .any(|s| s.channel == channel && s.result == "sent")
    };
    for (channel, event) in routed.iter().filter(|(c, _)| posted(c)) {
        state.record_sent(event, channel, config.group_by_of(channel), now);
    }
    for sync in syncs.iter().filter(|s| s.result == "sent") {
        for key in held
            .channels
            .get(&sync.channel)
            .into_iter()
            .flat_map(|c| c.open.keys())
            .filter(|k| state.open_alerts.contains_key(*k))
        {
            state
                .router
                .delivered
                .entry(key.clone())
                .or_default()
                .insert(sync.channel.clone());
        }
    }
    let state_json = serde_json::to_string(&state).map_err(|e| Error::software(e.to_string()))?;
    store
        .save_state(ALERT_STATE_KEY, &state_json, now)
        .map_err(Error::from)?;
    let held_json = serde_json::to_string(&held).map_err(|e| Error::software(e.to_string()))?;
    store
        .save_state(ALERTMANAGER_STATE_KEY, &held_json, now)
        .map_err(Error::from)?;
    Ok(syncs)
}

/// Each Alertmanager-routed event's delivery, as its channel's post went; journalled.
fn routed_reports(routed: Routed, syncs: &[SyncReport], now: i64) -> Sends {
    routed
        .into_iter()
        .map(|(channel, event)| {
            let report = syncs.iter().find(|s| s.channel == channel).map_or_else(
                || SendReport::new(&channel, "failed", Some("not posted".to_owned())),
                SyncReport::send_report,
            );
            delivery_line("watchdog", now, &report.result)
                .field("dedup", &event.dedup_key)
                .field("state", event.state.as_str())
                .field("channel", &channel)
                .field("delivery", &report.result)
                .field_opt("message", report.message.as_ref())
                .emit();
            (event.dedup_key, report)
        })
        .collect()
}

/// Write the loop report (`recover.opencode_report`) atomically; a dry run only says where. A
/// report that cannot be written is a warning: the recovery then sees a stale report and waits.
fn write_loop_report(
    config: &Config,
    judgement: &Judgement,
    by_id: &BTreeMap<&str, &Session>,
    stale: &BTreeSet<String>,
    now: i64,
    args: &Options,
    env: Env<'_>,
) {
    let report = loop_report::report(config, &judgement.trees, by_id, stale, now);
    let written =
        crate::jobs::recover::report_path(config, args.db.as_deref(), env).and_then(|path| {
            if !args.dry_run {
                let text = format!("{report}\n");
                agentwatch_systemd::write_atomic(&path, text.as_bytes(), 0o644)
                    .map_err(|e| Error::io(format!("{}: {e}", path.display())))?;
            }
            Ok(path)
        });
    match written {
        Ok(path) => Line::info("watchdog", now)
            .field("loop_report", path.display().to_string())
            .field("suspected", report["suspected"].as_i64().unwrap_or(0))
            .field("dry_run", args.dry_run)
            .emit(),
        Err(e) => Line::warning("watchdog", now)
            .field("loop_report", "not_written")
            .field("problem", e)
            .emit(),
    }
}

/// `opencode.on_loop = "abort"`: each alert that became critical this tick (a trigger opening
/// as critical, or its one escalation) stops its tree's flagged sessions through their own
/// source (an opencode server: `POST /session/:id/abort`), except a session whose last call
/// landed. Each abort is a journal line and an `abort` event in the store; without a store (a
/// dry run) nothing is sent. Returns `(session, result)`.
fn abort_loops(
    config: &Config,
    store: Option<&mut Store>,
    collected: &Collected,
    judgement: &Judgement,
    decisions: &[Decision],
    now: i64,
) -> Vec<(String, String)> {
    if !config.opencode.aborts() {
        return Vec::new();
    }
    let dry_run = store.is_none();
    let mut done = Vec::new();
    for decision in decisions {
        // Only the transition to critical: a reminder (`repeat`) of a critical alert is not one.
        let became_critical = matches!(
            decision.kind,
            DecisionKind::Trigger | DecisionKind::Escalate
        ) && decision
            .dispatch
            .as_ref()
            .is_some_and(|d| d.event.severity == alert_state::Severity::Critical);
        let tree = judgement.trees.iter().find(|t| t.root == decision.root);
        let Some(tree) = tree.filter(|_| became_critical) else {
            continue;
        };
        for verdict in &tree.flagged_sessions {
            let result = abort_session(collected, &decision.dedup_key, verdict, dry_run, now);
            if let Some(result) = result {
                done.push((verdict.id.clone(), result));
            }
        }
    }
    if let Some(store) = store {
        let events: Vec<_> = done
            .iter()
            .map(|(session, result)| {
                job_event(now, "watch", EventKind::Abort, session, result, None)
            })
            .collect();
        record_events(store, &events);
    }
    done
}

/// Stop one flagged session, if it can be: `sent`, `failed` or `dry_run`; `None` when skipped.
fn abort_session(
    collected: &Collected,
    dedup_key: &str,
    verdict: &detect_core::SessionVerdict,
    dry_run: bool,
    now: i64,
) -> Option<String> {
    let line = Line::info("watchdog", now)
        .field("dedup", dedup_key)
        .field("session", &verdict.id)
        .field("action", "abort");
    if verdict.reason.landed && verdict.reason.calls_since_landed == 0 {
        line.field("result", "skipped")
            .field("reason", "its last call landed")
            .emit();
        return None;
    }
    let source = collected
        .sessions
        .iter()
        .find(|s| s.info.id == verdict.id)
        .and_then(|s| collected.source(&s.source))
        .filter(|s| s.can_abort());
    let Some(source) = source else {
        line.field("result", "skipped")
            .field("reason", "not a session of a server")
            .emit();
        return None;
    };
    if dry_run {
        line.field("result", "dry_run").emit();
        return Some("dry_run".to_owned());
    }
    match source.abort(&verdict.id) {
        Ok(()) => {
            line.field("result", "sent").emit();
            Some("sent".to_owned())
        }
        Err(e) => {
            Line::warning("watchdog", now)
                .field("dedup", dedup_key)
                .field("session", &verdict.id)
                .field("action", "abort")
                .field("result", "failed")
                .field("problem", e)
                .emit();
            Some("failed".to_owned())
        }
    }
}

/// A tick that saw no source still re-asserts the alerts the Alertmanager channels hold (not
/// seeing a loop is not seeing it end), so Alertmanager does not resolve them meanwhile.
pub(super) fn reassert_only(
    config: &Config,
    mut store: Option<&mut Store>,
    now: i64,
    dry_run: bool,
) -> Result<Vec<SyncReport>, Error> {
    if !fleet::configured(config) {
        return Ok(Vec::new());
    }
    let state = load_alert_state(store.as_deref_mut(), now, dry_run)?;
    let mut held = load_held_alerts(store.as_deref_mut(), now, dry_run)?;
    let syncs = sync_alertmanager(config, &mut held, &[], &state, now, dry_run);
    if let Some(store) = store.filter(|_| !dry_run) {
        let held_json = serde_json::to_string(&held).map_err(|e| Error::software(e.to_string()))?;
        store
            .save_state(ALERTMANAGER_STATE_KEY, &held_json, now)
            .map_err(Error::from)?;
    }
    Ok(syncs)
}

/// Every Alertmanager channel's post of this tick, with the alerts open in `state`; journalled.
fn sync_alertmanager(
    config: &Config,
    held: &mut HeldAlerts,
    routed: &[(String, AlertEvent)],
    state: &AlertState,
    now: i64,
    dry_run: bool,
) -> Vec<SyncReport> {
    let open_keys: BTreeSet<&str> = state.open_alerts.keys().map(String::as_str).collect();
    let syncs = fleet::sync(config, held, routed, &open_keys, now, dry_run);
    journal_syncs(&syncs, now);
    syncs
}

/// One journal line per Alertmanager post.
fn journal_syncs(syncs: &[SyncReport], now: i64) {
    for sync in syncs {
        delivery_line("watchdog", now, &sync.result)
            .field("channel", &sync.channel)
            .field("alertmanager", &sync.result)
            .field("open", sync.open)
            .field("ending", sync.ending)
            .field_opt("message", sync.message.as_ref())
            .emit();
    }
}
