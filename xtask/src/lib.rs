//! # xtask: workspace tasks
//!
//! - `cargo xtask backtest [--fixture FILE] [--json] [--step N] [--set KEY=VALUE …]
//!   [--sweep KEY=FROM..TO[:STEP]]`: replay labelled sessions through the detector the way the
//!   live watchdog sees them grow, and score the labels ([`backtest`]).
//! - `cargo xtask gen-corpus [--out FILE] [--check]`: regenerate the labelled corpus
//!   `fixtures/corpus.json` from its deterministic generator ([`corpus`]).
//! - `cargo xtask import-trajectories [--from DIR] [--check]`: convert the public trajectories
//!   ([`trajectories`]) and build the development set `fixtures/dev/` ([`devset`]).
//! - `cargo xtask detection-report [--check FILE]`: the figures of both profiles on the corpus
//!   and the development set, as `docs/detection.md` shows them ([`report`]).
#![forbid(unsafe_code)]

pub mod backtest;
pub mod cli;
pub mod corpus;
pub mod devset;
pub mod report;
pub mod trajectories;
