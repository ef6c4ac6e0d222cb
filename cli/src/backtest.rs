//! `agentwatch backtest --fixture FILE [--step N] [--json] [--profile P] [--set k=v] [--sweep …]`:
//! the design's backtest in the installed binary, no checkout needed. The code is the runtime's
//! ([`agentwatch_runtime::backtest`]), which `cargo xtask backtest` calls too, so both print
//! the same report. Exit 0 when every label is met, 1 when one is missed, else the error's
//! code (64 usage, 65 a file that does not parse, 66 a missing file).

use crate::{CliResult, write_stdout};
use agentwatch_runtime::backtest::{self, Request};
use std::process::ExitCode;

/// Exit code when a `must_flag` session was not flagged or a `must_not_flag` one was.
pub const LABEL_MISSED: u8 = 1;

#[derive(Debug, clap::Args)]
pub struct BacktestArgs {
    /// The labelled session file (`agentwatch-sessions/1`, e.g. from `agentwatch export-fixture`);
    /// `-` reads standard input.
    #[arg(long, value_name = "FILE")]
    pub fixture: String,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Calls between evaluated prefixes (after the first, at min_calls).
    #[arg(long, value_name = "N", default_value_t = backtest::DEFAULT_STEP)]
    pub step: usize,
    /// The latency budget of the summary: sessions with a `loop_start` count as caught in time
    /// when flagged within K calls of it (use with --step 1 for exact latencies).
    #[arg(long, value_name = "K", default_value_t = backtest::DEFAULT_WITHIN)]
    pub within: usize,
    /// Detection profile: `precise` (the default) or `design`; `--set` applies on top.
    #[arg(long, value_name = "PROFILE")]
    pub profile: Option<String>,
    /// Override a detector key, e.g. `--set top_min=10` (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// Sweep one threshold: `KEY=FROM..TO[:STEP]`; prints TP/FP/FN/TN, precision and recall per
    /// value instead of the table.
    #[arg(long, value_name = "KEY=FROM..TO[:STEP]")]
    pub sweep: Option<String>,
}

pub fn run(args: BacktestArgs) -> CliResult {
    let outcome = backtest::run(&Request {
        fixture: args.fixture,
        json: args.json,
        step: args.step,
        within: args.within,
        profile: args.profile,
        set: args.set,
        sweep: args.sweep,
    })?;
    write_stdout("backtest", &outcome.text)?;
    Ok(ExitCode::from(if outcome.passed {
        0
    } else {
        LABEL_MISSED
    }))
}
