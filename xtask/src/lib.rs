//! # xtask: workspace tasks
//!
//! Only dispatch: arguments, files and exit codes ([`cli`]) around the evaluation library
//! `detect-eval` (`fixtures/eval/`) and the fixture generators `agentwatch-fixtures-gen`
//! (`fixtures/gen/`).
//!
//! - `cargo xtask backtest [--fixture FILE] [--json] [--step N] [--set KEY=VALUE …]
//!   [--sweep KEY=FROM..TO[:STEP]]`: replay labelled sessions through the detector the way the
//!   live watchdog sees them grow, and score the labels ([`detect_eval::backtest`]).
//! - `cargo xtask gen-corpus [--out FILE] [--check]`: regenerate the labelled corpus
//!   `fixtures/corpus.json` from its deterministic generator
//!   ([`agentwatch_fixtures_gen::corpus`]).
//! - `cargo xtask import-trajectories [--from DIR] [--check]`: convert the public trajectories
//!   ([`agentwatch_fixtures_gen::trajectories`]) and build the development set `fixtures/dev/`
//!   ([`agentwatch_fixtures_gen::devset`]).
//! - `cargo xtask detection-report [--check FILE]`: the figures of both profiles on the corpus
//!   and the development set, as `docs/detection.md` shows them ([`detect_eval::report`]).
#![forbid(unsafe_code)]

pub mod cli;
