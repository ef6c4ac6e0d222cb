//! `agentwatch-runtime`: the jobs that drive agentwatch's pure cores.
//!
//! The cores (detect-core, alert-state, recovery-policy) decide; the adapters (`adapters/*`) read
//! and act; this crate wires them into jobs: each job loads its state from the store, feeds the
//! core what it observed with `now`, performs the actions the core returns, feeds their outcomes
//! back and stores the new state.
//!
//! - [`drive`]: the one driver of the recovery policies (feed an event, perform the actions,
//!   feed the outcomes back), used by the recover and deck jobs, `replay` and the property tests.
//! - [`jobs::sessions`]: the opencode loop watchdog (sources, the incremental session forest, the
//!   alert lifecycle, delivery).
//! - [`jobs::recover`]: the confirmed-loop restart of a service.
//! - [`jobs::deck`]: the agent-deck watchdog (restart guard, waiting patrol, escalations).
//! - [`run`]: `agentwatch run`, every job in one long-running process at its own cadence.
//! - [`replay`]: the same cores driven from a recorded JSON-lines timeline.
//! - [`fleet`]: the Alertmanager channels' open alerts, re-asserted every tick.
//! - [`operator`]: `status`, `alerts`, `channels`, `test-alert`, `config`.
//! - [`serve`]: `agentwatch serve`, the admin pages and API of `agentwatch-web` set up from the
//!   configuration (also started in the background by a long-running process).
//! - [`hooks_setup`]: `agentwatch hooks install|uninstall|status`, agentwatch's pre-tool hook
//!   in each agent's own settings (the work is `agentwatch_hooks::install`).
//! - [`live_config`]: the live config edits of `serve` (bounds, comments kept, atomic writes).
//! - [`config`]: the typed, layered configuration; [`error`]: one error type, one exit-code map.
//! - [`backtest`]: the design's backtest of a labelled session file (`agentwatch backtest`, also
//!   `cargo xtask backtest`).
//! - [`export_fixture`]: labelled sessions from opencode's database or Claude Code transcripts
//!   as a scrubbed session file (`agentwatch export-fixture`).
//! - [`detect`]: what `agentwatch detect` shows of a [`input::Detection`] (its table, its JSON
//!   report, its trees keyed by agent).
//! - [`progress`]: the progress bar of long reads and runs (standard error, on a terminal only).
//!
//! Nothing here parses command lines or prints results: the `agentwatch` binary does that.
#![forbid(unsafe_code)]

pub mod backtest;
pub mod clock;
pub mod config;
pub mod detect;
pub mod doctor;
pub mod drive;
pub mod error;
pub mod export_fixture;
pub mod fleet;
pub mod hook;
pub mod hooks_setup;
pub mod input;
pub mod jobs;
pub mod journal;
pub mod live_config;
pub mod liveness;
pub mod notify;
pub mod operator;
pub mod progress;
pub mod replay;
pub mod run;
pub mod run_options;
pub mod serve;
pub mod stored;
pub mod text;
pub mod wake;

pub use error::{Error, Result};

/// The built-in sample (`fixtures/sample.json`): a landing parent with a looping explorer child,
/// and a busy healthy review. `agentwatch detect` judges it without a file; `--demo` watches it.
pub const SAMPLE: &str = include_str!("../../fixtures/sample.json");
