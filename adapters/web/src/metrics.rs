//! `GET /metrics`: the OpenMetrics text format, computed from the store on every scrape, so
//! `serve` can run as its own process beside the jobs. The names are stable (Prometheus rules in
//! `deploy/` use them); `docs/metrics.md` lists them.

use crate::Reply;
use crate::api::App;
use agentwatch_store::{EventKind, Store, StoreError};
use prometheus_client::encoding::prometheus_text;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use std::sync::atomic::AtomicU64;

type Labels = Vec<(String, String)>;

/// Tick duration buckets, seconds.
pub const TICK_BUCKETS: &[f64] = &[0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0];
/// The most recent tick durations a scrape reads.
pub const DURATIONS_READ: usize = 100_000;

/// The severities open alerts are counted by (every one is exported, zero included).
const SEVERITIES: &[&str] = &["info", "warning", "critical"];

fn tick_histogram() -> Histogram {
    Histogram::new(TICK_BUCKETS.iter().copied())
}

fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

fn to_u64(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

/// The metrics, before they are registered.
struct Metrics {
    ticks: Family<Labels, Counter>,
    last_tick: Family<Labels, Gauge<f64, AtomicU64>>,
    sessions_seen: Gauge<i64>,
    trees_flagged: Gauge<i64>,
    verdicts: Family<Labels, Gauge<i64>>,
    open_alerts: Family<Labels, Gauge<i64>>,
    deliveries: Family<Labels, Counter>,
    restarts: Family<Labels, Counter>,
    durations: Family<Labels, Histogram, fn() -> Histogram>,
}

impl Metrics {
    fn new() -> Self {
        let metrics = Self {
            ticks: Family::default(),
            last_tick: Family::default(),
            sessions_seen: Gauge::default(),
            trees_flagged: Gauge::default(),
            verdicts: Family::default(),
            open_alerts: Family::default(),
            deliveries: Family::default(),
            restarts: Family::default(),
            durations: Family::new_with_constructor(tick_histogram),
        };
        for severity in SEVERITIES {
            let _ = metrics
                .open_alerts
                .get_or_create(&labels(&[("severity", severity)]));
        }
        metrics
    }

    /// The watch job's ticks (its own table), its latest tick and the open alerts.
    fn read_opencode(&self, store: &Store) -> Result<(), StoreError> {
        for (outcome, count) in store.tick_outcomes()? {
            self.ticks
                .get_or_create(&labels(&[("job", "watch"), ("outcome", &outcome)]))
                .inc_by(to_u64(count));
        }
        if let Some(tick) = store.last_tick()? {
            self.last_tick
                .get_or_create(&labels(&[("job", "watch")]))
                .set(tick.ticked_at as f64);
            self.sessions_seen.set(tick.sessions_seen);
            self.trees_flagged.set(store.flagged_trees(tick.id)?);
            let counts = store.verdict_counts(tick.id)?;
            self.verdicts
                .get_or_create(&labels(&[("flagged", "true")]))
                .set(counts.flagged);
            self.verdicts
                .get_or_create(&labels(&[("flagged", "false")]))
                .set(counts.total - counts.flagged);
        }
        for alert in store.alerts(false)? {
            self.open_alerts
                .get_or_create(&labels(&[("severity", &alert.severity)]))
                .inc();
        }
        Ok(())
    }

    /// Every job's events: ticks, deliveries, restarts and tick durations.
    fn read_events(&self, store: &Store) -> Result<(), StoreError> {
        for e in store.event_counts(EventKind::Tick)? {
            // The watch job's ticks are counted from its own table (`opencode`: its old name,
            // in the events of a store it wrote before the rename).
            if e.job != "watch" && e.job != "opencode" {
                self.ticks
                    .get_or_create(&labels(&[("job", &e.job), ("outcome", &e.result)]))
                    .inc_by(to_u64(e.count));
            }
            let gauge = self.last_tick.get_or_create(&labels(&[("job", &e.job)]));
            if (e.last_at as f64) > gauge.get() {
                gauge.set(e.last_at as f64);
            }
        }
        for e in store.event_counts(EventKind::Delivery)? {
            self.deliveries
                .get_or_create(&labels(&[
                    ("job", &e.job),
                    ("channel", &e.name),
                    ("result", &e.result),
                ]))
                .inc_by(to_u64(e.count));
        }
        for e in store.event_counts(EventKind::Restart)? {
            self.restarts
                .get_or_create(&labels(&[("job", &e.job), ("result", &e.result)]))
                .inc_by(to_u64(e.count));
        }
        for (job, ms) in store.tick_durations(DURATIONS_READ)? {
            self.durations
                .get_or_create(&labels(&[("job", &job)]))
                .observe(ms as f64 / 1000.0);
        }
        Ok(())
    }

    fn register(self, registry: &mut Registry) {
        let m = self;
        registry.register("agentwatch_ticks", "Ticks run, by job and outcome", m.ticks);
        registry.register(
            "agentwatch_last_tick_timestamp_seconds",
            "Unix time of each job's latest tick",
            m.last_tick,
        );
        registry.register(
            "agentwatch_sessions_seen",
            "opencode sessions enumerated by the latest tick",
            m.sessions_seen,
        );
        registry.register(
            "agentwatch_trees_flagged",
            "Session trees with a flagged verdict at the latest tick",
            m.trees_flagged,
        );
        registry.register(
            "agentwatch_last_tick_verdicts",
            "Verdicts of the latest opencode tick, flagged or not",
            m.verdicts,
        );
        registry.register(
            "agentwatch_open_alerts",
            "Unresolved alerts by severity",
            m.open_alerts,
        );
        registry.register(
            "agentwatch_deliveries",
            "Alert deliveries by job, channel and result",
            m.deliveries,
        );
        registry.register(
            "agentwatch_restarts",
            "Restarts by job and result",
            m.restarts,
        );
        registry.register(
            "agentwatch_tick_duration_seconds",
            "How long ticks took, by job",
            m.durations,
        );
    }
}

/// The registry filled from the store.
fn collect(store: Option<&Store>) -> Result<Registry, StoreError> {
    let metrics = Metrics::new();
    if let Some(store) = store {
        metrics.read_opencode(store)?;
        metrics.read_events(store)?;
    }
    let mut registry = Registry::default();
    metrics.register(&mut registry);
    Ok(registry)
}

/// The metrics of the store as OpenMetrics text, or (`classic`) in the Prometheus text format
/// 0.0.4: counters declared under their sample name (`…_total`), no `# UNIT`, no `# EOF`. Label
/// values are escaped by the encoder (`\\`, `\"`, `\n`), so a channel of any name keeps the
/// scrape valid. No store yet: zeros and no samples.
pub fn text(store: Option<&Store>, classic: bool) -> Result<String, StoreError> {
    let registry = collect(store)?;
    let mut out = String::new();
    // Writing into a String cannot fail.
    let _ = if classic {
        prometheus_text::encode(&mut out, &registry)
    } else {
        encode(&mut out, &registry)
    };
    Ok(out)
}

/// OpenMetrics when the scraper asks for it (Prometheus does), else the classic text format.
pub fn render(app: &App, accept: Option<&str>) -> Result<Reply, Reply> {
    let store = app.read_store()?;
    let openmetrics = accept.is_some_and(|a| a.contains("application/openmetrics-text"));
    let body = text(store.as_ref(), !openmetrics)
        .map_err(|e| Reply::error(500, None, format!("store: {e}")))?;
    let content_type = if openmetrics {
        "application/openmetrics-text; version=1.0.0; charset=utf-8"
    } else {
        "text/plain; version=0.0.4; charset=utf-8"
    };
    Ok(Reply::text(200, content_type, body))
}
