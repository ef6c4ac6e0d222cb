//! `agentwatch`: the command-line front end of the agentwatch workspace.
//!
//! Each subcommand is a thin shell around a pure core crate: it reads input, calls the core with an
//! explicit `now`, and prints what the core decided. Errors are reported with context and a
//! sysexits-style exit code (see [`exit`]).
#![forbid(unsafe_code)]

mod clock;
mod config;
mod deck;
mod detect;
mod exit;
mod export_fixture;
mod import_export;
mod input;
mod notify;
mod opencode;
mod operator;
mod recover;
mod replay;
mod replay_alerts;
mod stored;
mod tracked;

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
    /// One tick of the opencode loop watchdog: read sessions, judge trees, alert, store.
    Opencode(opencode::OpencodeArgs),
    /// Last tick, sessions seen, flagged/total verdicts, open alerts, channels.
    Status(operator::StatusArgs),
    /// Open alerts (all with --all).
    Alerts(operator::AlertsArgs),
    /// List notification channels, or `set` one's run-time settings.
    Channels(operator::ChannelsArgs),
    /// Send a test alert through the channels.
    TestAlert(operator::TestAlertArgs),
    /// Print the effective configuration.
    Config(operator::ConfigArgs),
    /// Export labelled sessions from opencode's database as a scrubbed fixture (session file).
    ExportFixture(export_fixture::ExportFixtureArgs),
    /// Turn `opencode export` JSON files into one session file.
    ImportExport(import_export::ImportExportArgs),
    /// Restart a service once its watchdog's loop report is confirmed (one check; a timer repeats it).
    Recover(recover::RecoverArgs),
    /// Watch agent-deck sessions: restart crashed critical ones, nudge stuck children, escalate.
    Deck(deck::DeckArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Detect(args) => detect::run(args),
        Command::Replay(args) => replay::run_cli(args),
        Command::Opencode(args) => opencode::run(args),
        Command::Status(args) => operator::status(args),
        Command::Alerts(args) => operator::alerts(args),
        Command::Channels(args) => operator::channels(args),
        Command::TestAlert(args) => operator::test_alert(args),
        Command::Config(args) => operator::show_config(args),
        Command::ExportFixture(args) => export_fixture::run(args),
        Command::ImportExport(args) => import_export::run(args),
        Command::Recover(args) => recover::run(args),
        Command::Deck(args) => deck::run(args),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("agentwatch: error: {err}");
            err.exit_code()
        }
    }
}
