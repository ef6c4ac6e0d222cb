//! Whether each job is alive: its last tick (from `agentwatch_events`), and which jobs are stale
//! (older than [`STALE_INTERVALS`] of their intervals; a job switched off in the config is
//! disabled, never stale). `status` shows it; the sessions job raises
//! a stale job as a `blind:` alert.

use crate::config::{Config, JobName};
use crate::error::Error;
use agentwatch_store::{EventKind, Store};

/// How many of its intervals a job's last tick may age before `status` calls it stale.
pub const STALE_INTERVALS: i64 = 3;

/// One job's last tick as `status` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobTick {
    pub job: &'static str,
    pub interval_s: i64,
    pub last_at: Option<i64>,
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
        let mut last = match store {
            Some(s) => s
                .recent_events(EventKind::Tick, Some(job.as_str()), 1)
                .map_err(Error::from)?
                .into_iter()
                .next()
                .map(|e| (e.at, e.result)),
            None => None,
        };
        if let (None, JobName::Opencode, Some(s)) = (&last, job, store) {
            last = s
                .last_tick()
                .map_err(Error::from)?
                .map(|t| (t.ticked_at, t.outcome));
        }
        let disabled = job.disabled_because(config);
        let stale = disabled.is_none()
            && last.as_ref().is_some_and(|(at, _)| {
                now.saturating_sub(*at) > interval_s.saturating_mul(STALE_INTERVALS)
            });
        out.push(JobTick {
            job: job.as_str(),
            interval_s,
            last_at: last.as_ref().map(|(at, _)| *at),
            outcome: last.map(|(_, o)| o),
            stale,
            disabled,
        });
    }
    Ok(out)
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
                last_at: j.last_at?,
                interval_s: j.interval_s,
            })
        })
        .collect())
}
