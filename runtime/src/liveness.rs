//! Whether each job is alive: its last tick (from `agentwatch_events`), and which jobs are stale
//! (older than [`STALE_INTERVALS`] of their intervals; a job switched off in the config is
//! disabled, never stale). `status` shows it; the sessions job raises
//! a stale job as a `blind:` alert.

use crate::config::{Config, JobName};
use crate::error::Error;
use agentwatch_store::{EventKind, JobEvent, Store};

/// How many of its intervals a job's last tick may age before `status` calls it stale.
pub const STALE_INTERVALS: i64 = 3;

/// One job's last tick as `status` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobTick {
    pub job: &'static str,
    pub interval_s: i64,
    pub last_at: Option<i64>,
    /// Its last tick that watched (not an error): what staleness is measured from.
    pub alive_at: Option<i64>,
    pub outcome: Option<String>,
    pub stale: bool,
    /// Why the job is switched off in the config (it is then never stale).
    pub disabled: Option<&'static str>,
}

/// Every job's last tick (from `agentwatch_events`; opencode's falls back to its ticks table),
/// stale when older than [`STALE_INTERVALS`] intervals.
pub fn job_ticks(store: Option<&Store>, config: &Config, now: i64) -> Result<Vec<JobTick>, Error> {
    let mut out = Vec::new();
    for job in JobName::ALL {
        let interval_s = i64::try_from(job.interval_s(config)).unwrap_or(i64::MAX);
        let ticks = match store {
            Some(s) => s
                .recent_events(EventKind::Tick, Some(job.as_str()), ALIVE_SEARCH)
                .map_err(Error::from)?,
            None => Vec::new(),
        };
        let mut last = ticks.first().map(|e| (e.at, e.result.clone()));
        if let (None, JobName::Watch, Some(s)) = (&last, job, store) {
            last = s
                .last_tick()
                .map_err(Error::from)?
                .map(|t| (t.ticked_at, t.outcome));
        }
        // Only a job configured to run can be "not running".
        let disabled = job
            .disabled_because(config)
            .or_else(|| (!config.run.jobs.contains(&job)).then_some("not in run.jobs"));
        let alive_at = last_alive_tick(&ticks).or(last
            .as_ref()
            .map(|(at, _)| *at)
            .filter(|_| job == JobName::Watch));
        let stale = disabled.is_none()
            && alive_at.is_some_and(|at| {
                now.saturating_sub(at) > interval_s.saturating_mul(STALE_INTERVALS)
            });
        out.push(JobTick {
            job: job.as_str(),
            interval_s,
            last_at: last.as_ref().map(|(at, _)| *at),
            alive_at,
            outcome: last.map(|(_, o)| o),
            stale,
            disabled,
        });
    }
    Ok(out)
}

/// How many of a job's latest ticks are searched for one that worked.
const ALIVE_SEARCH: usize = 200;

/// Whether a tick's result means the job watched: an error, a held lock or an agent-deck that
/// could not be listed did not (a failing `deck --once` must not end "not running").
fn watched(result: &str) -> bool {
    !matches!(result, "error" | "locked" | "list_failed")
}

/// When the job last ticked and watched, from its latest ticks (newest first); when they all
/// failed, the oldest of them (it has not watched since at least then); `None` when it never
/// ticked.
fn last_alive_tick(ticks: &[JobEvent]) -> Option<i64> {
    ticks
        .iter()
        .find(|t| watched(&t.result))
        .or(ticks.last())
        .map(|t| t.at)
}

/// A job whose last tick is older than [`STALE_INTERVALS`] of its intervals: a blind watchdog.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StaleJob {
    pub job: &'static str,
    pub last_at: i64,
    pub interval_s: i64,
}

/// The jobs other than `except` that have ticked before and are stale at `now` (what `status`
/// warns about; the opencode job raises each as an alert).
pub fn stale_jobs(
    store: &Store,
    config: &Config,
    now: i64,
    except: JobName,
) -> Result<Vec<StaleJob>, Error> {
    Ok(job_ticks(Some(store), config, now)?
        .into_iter()
        .filter(|j| j.stale && j.job != except.as_str())
        .filter_map(|j| {
            Some(StaleJob {
                job: j.job,
                last_at: j.alive_at?,
                interval_s: j.interval_s,
            })
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stored::job_event;

    /// "Not running" is said only of a job configured to run, and only a tick that watched
    /// keeps a job alive: a failing `deck --once` does not end it.
    #[test]
    fn only_a_configured_job_can_be_stale_and_only_a_watching_tick_keeps_it_alive() {
        let dir = agentwatch_testkit::TempDir::new("aw-liveness");
        let mut store = Store::open(&dir.path.join("aw.db")).expect("store");
        let t0 = 1_796_000_000;
        // The deck ticked once under `run` (at t0), then only failed (no agent-deck).
        let ticks = [
            (t0, "ok"),
            (t0 + 3_000, "error"),
            (t0 + 3_060, "list_failed"),
        ];
        let events: Vec<_> = ticks
            .iter()
            .map(|(at, result)| job_event(*at, "deck", EventKind::Tick, "", result, None))
            .collect();
        store.record_events(&events).expect("events");
        let now = t0 + 3_100;
        // (run.jobs, the deck is stale and raised)
        let cases = [
            (vec![JobName::Watch], None),
            (vec![JobName::Watch, JobName::Deck], Some(t0)),
        ];
        for (jobs, stale_since) in cases {
            let mut config = Config::default();
            config.run.jobs = jobs.clone();
            let stale = stale_jobs(&store, &config, now, JobName::Watch).expect("read");
            let deck = stale.iter().find(|j| j.job == "deck").map(|j| j.last_at);
            assert_eq!(deck, stale_since, "run.jobs = {jobs:?}");
        }
    }
}
