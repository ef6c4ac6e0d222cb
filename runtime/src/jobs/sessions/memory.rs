//! What the job remembers between ticks, in the store: the alert state, what the Alertmanager
//! channels hold, and the sources' health. A corrupt record is set aside (`KEY.corrupt.NOW`) and
//! replaced by a clean one, with a warning; nothing is lost.

use super::blind::{self, SourceHealth};
use crate::config::Config;
use crate::error::Error;
use crate::fleet::{self, ALERTMANAGER_STATE_KEY, HeldAlerts};
use crate::stored::load_or_clean;
use agentwatch_store::Store;
use alert_state::AlertState;
use serde::de::DeserializeOwned;

/// The store key of the alert state.
pub const ALERT_STATE_KEY: &str = "alerts";

/// The state a tick starts from.
#[derive(Debug)]
pub struct Memory {
    pub alerts: AlertState,
    /// Loaded only when an Alertmanager channel is configured (`alertmanager`).
    pub held: HeldAlerts,
    pub alertmanager: bool,
    pub health: SourceHealth,
}

impl Memory {
    /// Load everything a tick needs.
    pub fn load(
        config: &Config,
        mut store: Option<&mut Store>,
        now: i64,
        dry_run: bool,
    ) -> Result<Self, Error> {
        let mut alerts = load_alert_state(store.as_deref_mut(), now, dry_run)?;
        if let Some(store) = store.as_deref() {
            count_in_doubt(store, &mut alerts)?;
        }
        let alertmanager = fleet::configured(config);
        let held = if alertmanager {
            load_held_alerts(store.as_deref_mut(), now, dry_run)?
        } else {
            HeldAlerts::default()
        };
        let health = load_record(store, blind::SOURCES_STATE_KEY, now, dry_run)?;
        Ok(Self {
            alerts,
            held,
            alertmanager,
            health,
        })
    }
}

/// A channel whose send of an open alert's event started and was never recorded (the process
/// died or the disk filled between the send and its record) may hold the event: it counts
/// among the alert's receivers, so the resolve goes to it too. Without this, the resolve was
/// routed only to recorded receivers while it superseded the unrecorded send's row, and a
/// channel holding the trigger never heard the end.
fn count_in_doubt(store: &Store, alerts: &mut AlertState) -> Result<(), Error> {
    for (key, channel) in store.in_doubt().map_err(Error::from)? {
        if alerts.open_alerts.contains_key(&key) {
            alerts
                .router
                .delivered
                .entry(key)
                .or_default()
                .insert(channel);
        }
    }
    Ok(())
}

/// One stored record, set aside and replaced by a clean one when it does not read.
pub(super) fn load_record<T: Default + DeserializeOwned>(
    store: Option<&mut Store>,
    key: &str,
    now: i64,
    dry_run: bool,
) -> Result<T, Error> {
    let (value, aside) = load_or_clean(store, key, now, dry_run, |text| {
        serde_json::from_str(text).map_err(|e| e.to_string())
    })?;
    if let Some(aside) = aside {
        aside.line("watchdog", key, now).emit();
    }
    Ok(value)
}

/// Load the alert state.
pub fn load_alert_state(
    store: Option<&mut Store>,
    now: i64,
    dry_run: bool,
) -> Result<AlertState, Error> {
    load_record(store, ALERT_STATE_KEY, now, dry_run)
}

/// Load what the Alertmanager channels hold.
pub fn load_held_alerts(
    store: Option<&mut Store>,
    now: i64,
    dry_run: bool,
) -> Result<HeldAlerts, Error> {
    load_record(store, ALERTMANAGER_STATE_KEY, now, dry_run)
}

/// The stored alert state, read-only (`None` without a store or when it does not read).
pub fn stored_alert_state(store: Option<&Store>) -> Option<AlertState> {
    store
        .and_then(|s| s.load_state(ALERT_STATE_KEY).ok().flatten())
        .and_then(|text| serde_json::from_str::<AlertState>(&text).ok())
}
