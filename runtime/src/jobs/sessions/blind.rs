//! A blind watchdog is an alert: a source the opencode job is told to read that failed
//! `watchdog.blind_after_ticks` ticks in a row (`blind:{source}`), and another job whose last
//! tick is older than [`crate::liveness::STALE_INTERVALS`] of its intervals (`blind:job:{name}`),
//! are raised as alarms through the same lifecycle, gates and rate limits as the loop alerts
//! ([`alert_state::process_alarms`]). Each resolves (`recovered`) once the source answers or the
//! job ticks again.
//!
//! Only sources that *failed* count: a default source that is simply not there (no registry
//! file, nothing on the default port) is skipped, not blind. The failure streak of each source is
//! kept in the store under [`SOURCES_STATE_KEY`], written with the tick.

use crate::config::{Config, JobName};
use crate::error::Error;
use crate::liveness::StaleJob;
use crate::notify::SendReport;
use agentwatch_store::Store;
use alert_state::{Alarm, AlarmTick, AlertConfig, AlertState, Severity, TickOutcome};
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::collections::BTreeMap;

/// The store key of the sources' failure streaks.
pub const SOURCES_STATE_KEY: &str = "opencode.sources";

/// The dedup-key prefix of every blindness alert.
pub const BLIND_KEY_PREFIX: &str = "blind:";

/// The dedup-key prefix of a stale job's alert (`blind:job:deck`).
const JOB_KEY_PREFIX: &str = "blind:job:";

/// Each failing source's streak, by source name (`http://127.0.0.1:4096`, `opencode.db`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceHealth {
    #[serde(default)]
    pub failing: BTreeMap<String, Failing>,
    /// The sessions each source that answered gave at the last tick (those active within the
    /// stale age and their ancestors), for `status`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub sessions: BTreeMap<String, usize>,
    /// Since when the LLM of the second opinion has not answered (its outage is logged once).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub llm_down_since: Option<i64>,
}

/// A source that failed its last `ticks` ticks, the first of them at `since`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Failing {
    pub since: i64,
    pub ticks: u32,
    /// Why the last read failed (already free of secrets: the source's own error text).
    pub why: String,
}

impl SourceHealth {
    /// This tick's failures: a source that failed extends its streak (or starts one); any
    /// other (it answered, or is no longer read) ends it.
    pub fn observe(&mut self, failed: &[(String, String)], now: i64) {
        let mut next = BTreeMap::new();
        for (source, why) in failed {
            let streak = match self.failing.remove(source) {
                Some(old) => Failing {
                    since: old.since,
                    ticks: old.ticks.saturating_add(1),
                    why: why.clone(),
                },
                None => Failing {
                    since: now,
                    ticks: 1,
                    why: why.clone(),
                },
            };
            next.insert(source.clone(), streak);
        }
        self.failing = next;
    }

    /// The sources failing at least `threshold` ticks in a row; none when `threshold` is 0.
    pub fn blind(&self, threshold: u32) -> impl Iterator<Item = (&String, &Failing)> {
        self.failing
            .iter()
            .filter(move |(_, f)| threshold > 0 && f.ticks >= threshold)
    }
}

/// The store key of the channels' delivery streaks.
pub const CHANNELS_STATE_KEY: &str = "channels.health";

/// Each failing channel's streak of failed deliveries in a row, by channel name.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChannelHealth {
    #[serde(default)]
    pub failing: BTreeMap<String, Failing>,
}

impl ChannelHealth {
    /// A tick's sends: each failed one extends its channel's streak (`ticks` counts failed
    /// deliveries), a send that went through ends it.
    pub fn observe(&mut self, sends: &[(String, SendReport)], now: i64) {
        for (_, report) in sends {
            let name = &report.channel;
            match report.result.as_str() {
                "failed" => {
                    let why = report.message.clone().unwrap_or_default();
                    let streak = self.failing.entry(name.clone()).or_insert(Failing {
                        since: now,
                        ticks: 0,
                        why: why.clone(),
                    });
                    streak.ticks = streak.ticks.saturating_add(1);
                    streak.why = why;
                }
                "sent" | "warning" => {
                    self.failing.remove(name);
                }
                _ => {}
            }
        }
    }
}

/// The channels' streaks as stored (none when unreadable: a streak is a hint, not a record).
pub fn load_channel_health(store: &Store) -> ChannelHealth {
    store
        .load_state(CHANNELS_STATE_KEY)
        .ok()
        .flatten()
        .and_then(|text| serde_json::from_str(&text).ok())
        .unwrap_or_default()
}

/// Store the streaks after a tick's sends.
///
/// # Errors
///
/// The store cannot be written.
pub fn record_sends(
    store: &mut Store,
    sends: &[(String, SendReport)],
    now: i64,
) -> Result<(), Error> {
    if sends.is_empty() {
        return Ok(());
    }
    let mut health = load_channel_health(store);
    let before = health.clone();
    health.observe(sends, now);
    if health == before {
        return Ok(());
    }
    let text = serde_json::to_string(&health).map_err(|e| Error::software(e.to_string()))?;
    store
        .save_state(CHANNELS_STATE_KEY, &text, now)
        .map_err(Error::from)
}

/// The alert's dedup key for a channel that cannot deliver (`blind:channel:NAME`).
pub fn channel_key(name: &str) -> String {
    format!("{BLIND_KEY_PREFIX}channel:{name}")
}

/// Alarms for the channels that cannot deliver: a channel whose last `fail_after` deliveries
/// all failed (its error is the channel's own text, already free of secrets). A type this
/// build does not know never gets here: the configuration does not load.
fn channel_alarms(config: &Config, health: &ChannelHealth, now: i64) -> Vec<Alarm> {
    let alarm = |name: &str, summary: String, details| Alarm {
        dedup_key: channel_key(name),
        subject: name.to_owned(),
        kind: "channel-down".to_owned(),
        severity: Severity::Warning,
        title: format!("agentwatch cannot deliver to channel {name}"),
        summary,
        details,
    };
    let mut alarms: Vec<Alarm> = Vec::new();
    for section in &config.channels {
        let Some(f) = health.failing.get(&section.name) else {
            continue;
        };
        if section.fail_after == 0 || f.ticks < section.fail_after {
            continue;
        }
        let summary = format!(
            "The last {} deliveries to channel {} failed (for {}): {}. Alerts sent there are \
             not arriving; the other channels still get them.",
            f.ticks,
            section.name,
            crate::text::duration(now.saturating_sub(f.since)),
            f.why
        );
        let details = json!({"channel": section.name, "failed": f.ticks, "failing_since": f.since, "error": f.why});
        alarms.push(alarm(&section.name, summary, details));
    }
    alarms
}

/// The alert's dedup key for a source.
pub fn source_key(source: &str) -> String {
    format!("{BLIND_KEY_PREFIX}{source}")
}

/// This tick's blindness alarms against the open alerts in `state`: raised for every source
/// failing `threshold` ticks in a row and every stale job; cleared for every open blindness
/// alert whose subject is fine again.
pub fn alarm_tick(
    state: &AlertState,
    health: &SourceHealth,
    threshold: u32,
    stale_jobs: &[StaleJob],
    channels: &[Alarm],
    now: i64,
) -> AlarmTick {
    let mut raised: Vec<Alarm> = health
        .blind(threshold)
        .map(|(source, f)| Alarm {
            dedup_key: source_key(source),
            subject: source.clone(),
            kind: "source-down".to_owned(),
            severity: Severity::Warning,
            title: format!("agentwatch cannot read {source}"),
            summary: source_down_summary(source, f.ticks, f.since, &f.why, now),
            details: json!({"source": source, "failing_since": f.since, "ticks": f.ticks, "error": f.why}),
        })
        .collect();
    raised.extend(stale_jobs.iter().map(|job| Alarm {
        dedup_key: format!("{JOB_KEY_PREFIX}{}", job.job),
        subject: job.job.to_owned(),
        kind: "job-stale".to_owned(),
        severity: Severity::Warning,
        title: format!("the agentwatch {} job is not running", job.job),
        summary: job_stale_summary(job.job, job.last_at, job.interval_s, now),
        details: json!({"job": job.job, "last_tick_at": job.last_at, "interval_s": job.interval_s}),
    }));
    raised.extend(channels.iter().cloned());
    let cleared = state
        .open_alerts
        .values()
        .filter(|a| a.dedup_key.starts_with(BLIND_KEY_PREFIX))
        .filter(|a| !raised.iter().any(|r| r.dedup_key == a.dedup_key))
        .map(|a| a.dedup_key.clone())
        .collect();
    AlarmTick {
        now,
        raised,
        cleared,
    }
}

/// A source-down alert's summary at `now` (its age is said when the text is sent).
fn source_down_summary(source: &str, ticks: u32, since: i64, why: &str, now: i64) -> String {
    format!(
        "agentwatch has not been able to read {source} for {ticks} ticks ({}): {why}. Sessions \
         there are not watched until it answers.",
        crate::text::duration(now.saturating_sub(since)),
    )
}

/// A job-not-running alert's summary at `now` (its age is said when the text is sent).
fn job_stale_summary(job: &str, last_at: i64, interval_s: i64, now: i64) -> String {
    format!(
        "The {job} job last ticked {}, more than {} of its {interval_s} s intervals: it is not \
         watching. Check its timer or `agentwatch run` (journalctl -u agentwatch).",
        crate::text::ago(now.saturating_sub(last_at)),
        crate::liveness::STALE_INTERVALS,
    )
}

/// A blindness event's summary said again at `now`, from its details, so the ages it states
/// are those of the send, not of the tick that queued it; `None` for other events.
pub fn summary_at(event: &alert_state::AlertEvent, now: i64) -> Option<String> {
    let d = &event.details["alarm"];
    if let Some(job) = event.dedup_key.strip_prefix(JOB_KEY_PREFIX) {
        let last_at = d["last_tick_at"].as_i64()?;
        return Some(job_stale_summary(
            job,
            last_at,
            d["interval_s"].as_i64()?,
            now,
        ));
    }
    let source = d["source"].as_str()?;
    let ticks = u32::try_from(d["ticks"].as_u64()?).ok()?;
    let since = d["failing_since"].as_i64()?;
    Some(source_down_summary(
        source,
        ticks,
        since,
        d["error"].as_str()?,
        now,
    ))
}

/// This tick's blindness: the sources' streaks (loaded with the tick's [`super::memory::Memory`]) updated with what answered and what failed, and
/// the lifecycle's outcome for the blindness alarms (`None` when there is nothing to raise or
/// clear). The caller stores the streaks ([`SOURCES_STATE_KEY`]) with the tick and delivers the
/// decisions as it delivers the loop alerts'.
///
/// # Errors
///
/// The store cannot be read, or the alarms are inconsistent (a bug).
pub fn step(
    config: &Config,
    store: Option<&Store>,
    mut health: SourceHealth,
    state: &AlertState,
    alert_config: &AlertConfig,
    failed: &[(String, String)],
    now: i64,
) -> Result<(SourceHealth, Option<TickOutcome>), Error> {
    health.observe(failed, now);
    let stale_jobs = match store {
        Some(store) => crate::liveness::stale_jobs(store, config, now, JobName::Watch)?,
        None => Vec::new(),
    };
    let threshold = config.watchdog.blind_after_ticks;
    let channels = store.map(load_channel_health).unwrap_or_default();
    let channel_alarms = channel_alarms(config, &channels, now);
    let tick = alarm_tick(state, &health, threshold, &stale_jobs, &channel_alarms, now);
    if tick.raised.is_empty() && tick.cleared.is_empty() {
        return Ok((health, None));
    }
    // A failing channel is told nothing of blindness: it cannot take it, the others can.
    let mut others = alert_config.clone();
    others.channels.retain(|c| {
        !channel_alarms
            .iter()
            .any(|a| a.dedup_key == channel_key(&c.name))
    });
    let outcome = alert_state::process_alarms(state, &others, &tick)
        .map_err(|e| Error::software(format!("blindness alerts: {e}")))?;
    Ok((health, Some(outcome)))
}

/// The streaks as the store keeps them.
///
/// # Errors
///
/// Never in practice (plain data); reported as an internal error.
pub fn state_row(health: &SourceHealth) -> Result<(String, String), Error> {
    let text = serde_json::to_string(health).map_err(|e| Error::software(e.to_string()))?;
    Ok((SOURCES_STATE_KEY.to_owned(), text))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failed(names: &[&str]) -> Vec<(String, String)> {
        names
            .iter()
            .map(|n| ((*n).to_owned(), "connection refused".to_owned()))
            .collect()
    }

    #[test]
    fn a_streak_grows_while_failing_and_ends_when_answering() {
        let mut h = SourceHealth::default();
        let a = "http://127.0.0.1:4881";
        for (tick, now) in [(1, 100), (2, 160), (3, 220)] {
            h.observe(&failed(&[a]), now);
            assert_eq!(h.failing[a].ticks, tick);
            assert_eq!(h.failing[a].since, 100);
        }
        assert_eq!(h.blind(3).count(), 1);
        assert_eq!(h.blind(4).count(), 0);
        assert_eq!(h.blind(0).count(), 0, "0 means never");
        h.observe(&[], 280);
        assert!(h.failing.is_empty());
        h.observe(&failed(&[a]), 340);
        assert_eq!(h.failing[a].ticks, 1, "a new streak starts over");
    }

    #[test]
    fn alarms_raise_at_the_threshold_and_clear_when_fine() {
        let a = "opencode.db";
        let mut h = SourceHealth::default();
        h.observe(&failed(&[a]), 100);
        let state = AlertState::default();
        assert!(alarm_tick(&state, &h, 2, &[], &[], 100).raised.is_empty());
        h.observe(&failed(&[a]), 160);
        let tick = alarm_tick(&state, &h, 2, &[], &[], 160);
        assert_eq!(tick.raised.len(), 1);
        assert_eq!(tick.raised[0].dedup_key, "blind:opencode.db");
        assert!(
            tick.raised[0]
                .summary
                .contains("for 2 ticks (60 s): connection refused"),
            "{}",
            tick.raised[0].summary
        );
        let config = alert_state::AlertConfig::default();
        let opened = alert_state::process_alarms(&state, &config, &tick).unwrap();
        assert!(opened.state.open_alerts.contains_key("blind:opencode.db"));

        h.observe(&[], 220);
        let tick = alarm_tick(&opened.state, &h, 2, &[], &[], 220);
        assert!(tick.raised.is_empty());
        assert_eq!(tick.cleared, vec!["blind:opencode.db".to_owned()]);
    }

    #[test]
    fn a_stale_job_is_an_alarm_naming_it() {
        let stale = StaleJob {
            job: "deck",
            last_at: 1_000,
            interval_s: 60,
        };
        let tick = alarm_tick(
            &AlertState::default(),
            &SourceHealth::default(),
            3,
            &[stale],
            &[],
            1_000 + 600,
        );
        assert_eq!(tick.raised[0].dedup_key, "blind:job:deck");
        assert!(
            tick.raised[0].summary.contains("last ticked 10 min ago"),
            "{}",
            tick.raised[0].summary
        );
    }

    /// An event queued at one tick and sent later states its ages as of the send.
    #[test]
    fn a_blindness_summary_is_said_again_at_send_time() {
        let stale = StaleJob {
            job: "deck",
            last_at: 1_000,
            interval_s: 60,
        };
        let mut failing = SourceHealth::default();
        failing.observe(&failed(&["opencode.db"]), 1_000);
        failing.observe(&failed(&["opencode.db"]), 1_060);
        let tick = alarm_tick(&AlertState::default(), &failing, 2, &[stale], &[], 1_060);
        let config = alert_state::AlertConfig::default();
        let opened =
            alert_state::process_alarms(&AlertState::default(), &config, &tick).expect("alarms");
        let events: Vec<_> = opened.events().cloned().collect();
        let said = |key: &str| {
            let event = events.iter().find(|e| e.dedup_key == key).expect(key);
            summary_at(event, 1_000 + 300).expect("a blindness event")
        };
        let source = said("blind:opencode.db");
        assert!(source.contains("for 2 ticks (5 min)"), "{source}");
        let job = said("blind:job:deck");
        assert!(job.contains("last ticked 5 min ago"), "{job}");
        let loop_event = alert_state::AlertEvent {
            dedup_key: "opencode-loop:ses_a".into(),
            ..events[0].clone()
        };
        assert_eq!(summary_at(&loop_event, 1_300), None);
    }
}
