//! Persisting a policy's state between oneshot runs.
//!
//! The saved form is an envelope `{"policy": NAME, "v": VERSION, "state": {...}}`, so a file written
//! for another policy or by a newer release is recognised and set aside instead of misread.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

/// A policy state that can be saved and loaded.
pub trait PolicyState: Serialize + DeserializeOwned + Default {
    /// The policy's name in the envelope, e.g. `loop-recovery`.
    const POLICY: &'static str;
    /// The version of the state's shape.
    const VERSION: u32;
}

/// Why a saved state was not used. The caller logs it; the policy starts clean.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StateError {
    #[error("no saved state; starting clean")]
    Empty,
    #[error("saved state is corrupt ({detail}); starting clean")]
    Corrupt { detail: String },
    #[error("saved state belongs to policy `{found}`, not `{expected}`; starting clean")]
    WrongPolicy {
        found: String,
        expected: &'static str,
    },
    #[error(
        "saved state has version {found}, this release reads version {supported}; starting clean"
    )]
    UnsupportedVersion { found: u64, supported: u32 },
    #[error("state could not be serialised: {detail}")]
    Serialize { detail: String },
}

/// The result of [`load_state`]: always a usable state, plus a warning when it had to start clean.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadedState<S> {
    pub state: S,
    pub warning: Option<StateError>,
}

#[derive(Serialize)]
struct EnvelopeOut<'a, S> {
    policy: &'static str,
    v: u32,
    state: &'a S,
}

#[derive(Deserialize)]
struct EnvelopeIn {
    policy: String,
    v: u64,
    state: serde_json::Value,
}

/// Serialises `state` into its envelope (one line of JSON).
pub fn save_state<S: PolicyState>(state: &S) -> Result<String, StateError> {
    serde_json::to_string(&EnvelopeOut {
        policy: S::POLICY,
        v: S::VERSION,
        state,
    })
    .map_err(|err| StateError::Serialize {
        detail: err.to_string(),
    })
}

/// Reads a state saved by [`save_state`]. Empty, corrupt, foreign or future state gives the default
/// (clean) state and a warning saying why; this function never fails.
pub fn load_state<S: PolicyState>(text: &str) -> LoadedState<S> {
    match try_load::<S>(text) {
        Ok(state) => LoadedState {
            state,
            warning: None,
        },
        Err(warning) => LoadedState {
            state: S::default(),
            warning: Some(warning),
        },
    }
}

fn try_load<S: PolicyState>(text: &str) -> Result<S, StateError> {
    if text.trim().is_empty() {
        return Err(StateError::Empty);
    }
    let envelope: EnvelopeIn = serde_json::from_str(text).map_err(|err| StateError::Corrupt {
        detail: err.to_string(),
    })?;
    if envelope.policy != S::POLICY {
        return Err(StateError::WrongPolicy {
            found: envelope.policy,
            expected: S::POLICY,
        });
    }
    if envelope.v != u64::from(S::VERSION) {
        return Err(StateError::UnsupportedVersion {
            found: envelope.v,
            supported: S::VERSION,
        });
    }
    serde_json::from_value(envelope.state).map_err(|err| StateError::Corrupt {
        detail: err.to_string(),
    })
}
