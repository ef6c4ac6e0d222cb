//! `agentwatch`: the command-line front end of the agentwatch workspace.
//!
//! Each subcommand is a thin shell around a pure core crate: it reads input, calls the core with an
//! explicit `now`, and prints what the core decided. Errors are reported with context and a
//! sysexits-style exit code (see [`exit`]).
#![forbid(unsafe_code)]

mod detect;
mod exit;
mod input;
mod replay;
mod replay_alerts;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

#[derive(Debug, Parser)]
#[command(
    name = "agentwatch",
    version,
    about = "A watchdog for AI coding-agent sessions"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Judge the sessions of a session file (built-in sample when FILE is omitted).
    Detect(detect::DetectArgs),
    /// Drive one policy from a JSON-lines timeline and print one JSON line per decision.
    Replay(replay::ReplayArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Detect(args) => detect::run(args),
        Command::Replay(args) => replay::run_cli(args),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("agentwatch: error: {err}");
            err.exit_code()
        }
    }
}
