//! One tick of the sessions job, in three steps:
//!
//! 1. **observe**: the sources have been read into the forest ([`super::sources::collect`]);
//! 2. **decide**: verdicts per tree, what the lifecycle is told about each root, the LLM where
//!    the plan allows ([`super::consult`]), the lifecycle's transitions and routes, the blind
//!    alerts ([`super::decide`]);
//! 3. **act**: the loop report, the store, delivery, aborts, Alertmanager ([`super::act`]).

use super::act::{self, Decided};
use super::decide;
use super::memory::{ALERT_STATE_KEY, Memory};
use super::report::{TickReport, fired};
use super::sources::Collected;
use super::{Options, blind, consult, deliver};
use crate::clock::host_name;
use crate::config::{Config, Env};
use crate::error::Error;
use crate::journal::Line;
use crate::notify::{alert_rows, decision_line};
use agentwatch_store::{Store, TickWrite};

/// Decide and act on what the sources gave.
pub fn tick(
    config: &Config,
    mut store: Option<&mut Store>,
    collected: &mut Collected,
    now: i64,
    args: &Options,
    env: Env<'_>,
) -> Result<TickReport, Error> {
    let judged = decide::judge(collected, config, now, store.as_deref(), args.verbose);
    let alert_config = config.alert_config(&host_name());
    let mut memory = Memory::load(config, store.as_deref_mut(), now, args.dry_run)?;
    let focused = args.focus.is_some();
    let mut observed = decide::observe(&judged, collected, &memory.alerts, focused, now);
    let opinions = consult::opinions(config, &alert_config, &mut memory, &mut observed, env);
    let outcome = decide::lifecycle(
        config,
        &alert_config,
        &mut memory,
        &observed,
        &judged,
        collected,
        store.as_deref(),
    )?;
    let decided = Decided {
        judged,
        outcome,
        opinions,
        memory,
        alert_config,
    };
    act::act(config, store, collected, decided, now, args, env)
}

/// A tick at which no source answered: a source that keeps failing is an alert even then, and
/// events an earlier tick could not send still go out.
pub fn blind_tick(
    config: &Config,
    mut store: Option<&mut Store>,
    collected: &Collected,
    now: i64,
    dry_run: bool,
    env: Env<'_>,
) -> Result<TickReport, Error> {
    Line::warning("watchdog", now)
        .field("outcome", "no_source")
        .field("reason", "no source answered")
        .emit();
    let mut report = TickReport::empty(now, collected);
    let alert_config = config.alert_config(&host_name());
    let mut memory = Memory::load(config, store.as_deref_mut(), now, dry_run)?;
    memory.health.sessions.clear();
    let (health, blindness) = blind::step(
        config,
        store.as_deref(),
        memory.health,
        &memory.alerts,
        &alert_config,
        &collected.failed,
        now,
    )?;
    let (decisions, mut state) = match blindness {
        Some(outcome) => (outcome.decisions, outcome.state),
        None => (Vec::new(), memory.alerts),
    };
    for decision in &decisions {
        decision_line("watchdog", now, decision).emit();
    }
    if let Some(store) = store.as_deref_mut().filter(|_| !dry_run) {
        let state_json =
            serde_json::to_string(&state).map_err(|e| Error::software(e.to_string()))?;
        store
            .commit_tick(&TickWrite {
                ticked_at: now,
                outcome: "no_source",
                sessions_seen: 0,
                alerts_fired: i64::try_from(fired(&decisions)).unwrap_or(i64::MAX),
                servers: &[],
                verdicts: &[],
                alerts: &alert_rows(&decisions),
                states: &[
                    (ALERT_STATE_KEY.to_owned(), state_json),
                    blind::state_row(&health)?,
                ],
                outbox: &deliver::outbox_events(&decisions)?,
                supersede: &deliver::resolved_keys(&decisions),
            })
            .map_err(Error::from)?;
        report.sends = deliver::deliver_pending(config, store, &mut state, now, env)?;
        report.next_wakeup = deliver::next_wakeup(store, &state, &alert_config, now)?;
    }
    report.decisions = decisions;
    report.alertmanager = act::reassert_only(config, store, now, dry_run)?;
    Ok(report)
}
