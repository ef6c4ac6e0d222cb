//! The `alerts` policy of `agentwatch replay` (owned by the alert-state work).
pub const PLACEHOLDER: () = ();
