//! `agentwatch detect FILE [--json] [--set key=value]`.
use crate::exit::CliResult;

#[derive(Debug, clap::Args)]
pub struct DetectArgs {}

pub fn run(_args: DetectArgs) -> CliResult {
    Ok(std::process::ExitCode::SUCCESS)
}
