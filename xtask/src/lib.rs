//! # xtask: workspace tasks
//!
//! - `cargo xtask backtest [--fixture FILE] [--json] [--step N] [--set KEY=VALUE …]
//!   [--sweep KEY=FROM..TO[:STEP]]`: replay labelled sessions through the detector the way the
//!   live watchdog sees them grow, and score the labels ([`backtest`]).
//! - `cargo xtask gen-corpus [--out FILE] [--check]`: regenerate the labelled corpus
//!   `fixtures/corpus.json` from its deterministic generator ([`corpus`]).
#![forbid(unsafe_code)]

pub mod backtest;
pub mod cli;
pub mod corpus;
