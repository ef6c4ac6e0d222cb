//! `agentwatch replay POLICY [FILE|-]` (owned by the recovery-policy work; see docs/replay.md).

use crate::exit::{CliError, CliResult, code};

#[derive(Debug, clap::Args)]
pub struct ReplayArgs {
    /// loop-recovery | restart-guard | waiting-patrol | alerts
    pub policy: String,
    /// JSON-lines timeline; `-` or omitted reads standard input.
    pub file: Option<String>,
}

pub fn run_cli(args: ReplayArgs) -> CliResult {
    let _ = &args;
    let _ = crate::replay_alerts::PLACEHOLDER;
    Err(CliError::new(code::USAGE, format!("replay: policy `{}` is not implemented yet", args.policy)))
}
