//! `agentwatch hooks install|uninstall|status [AGENT|all] [--project DIR] [--json]`: the
//! arguments, one call into `agentwatch_runtime::hooks_setup`, the report printed.

use crate::{CliResult, print_json, write_stdout};
use agentwatch_runtime::hooks_setup::{self, Command, Options};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct HooksArgs {
    #[command(subcommand)]
    pub action: HooksAction,
}

#[derive(Debug, clap::Subcommand)]
pub enum HooksAction {
    /// Write agentwatch's pre-tool hook into the agents' own settings (merged into what is
    /// there, a backup beside each changed file; Codex's trust recorded as Codex records it).
    Install(HooksTarget),
    /// Take agentwatch's hook out again (the rest of each file stays as it was).
    Uninstall(HooksTarget),
    /// Whether each agent's hook is installed and will really run, and why not.
    Status(HooksTarget),
}

#[derive(Debug, clap::Args)]
pub struct HooksTarget {
    /// claude, codex, gemini, opencode, or all.
    #[arg(default_value = "all", value_parser = agent_name)]
    pub agent: Agents,
    /// A project's settings (DIR/.claude, DIR/.codex, DIR/.gemini, DIR/.opencode) instead of
    /// the user's.
    #[arg(long, value_name = "DIR")]
    pub project: Option<PathBuf>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
    /// The binary the hook runs (default: this one). For tests and packagers.
    #[arg(long, hide = true, value_name = "PATH")]
    pub binary: Option<PathBuf>,
}

/// One agent, or every one (`None`: `all`).
#[derive(Debug, Clone, Copy)]
pub struct Agents(pub Option<hooks_setup::Agent>);

/// An agent's name, or `all`.
fn agent_name(name: &str) -> Result<Agents, String> {
    if name == "all" {
        return Ok(Agents(None));
    }
    name.parse()
        .map(|a| Agents(Some(a)))
        .map_err(|e| format!("{e}, or all"))
}

pub fn run(args: HooksArgs) -> CliResult {
    let (command, target) = match args.action {
        HooksAction::Install(t) => (Command::Install, t),
        HooksAction::Uninstall(t) => (Command::Uninstall, t),
        HooksAction::Status(t) => (Command::Status, t),
    };
    let options = Options {
        command,
        agent: target.agent.0,
        project: target.project,
        binary: target.binary,
    };
    let env: agentwatch_runtime::config::Env<'_> = &agentwatch_runtime::config::process_env;
    let report = hooks_setup::run(&options, env)?;
    if target.json {
        print_json("hooks", &report.to_json(), false)?;
    } else {
        write_stdout("hooks", &report.render())?;
    }
    for (agent, error) in report.failures() {
        let prefix =
            agentwatch_runtime::journal::prefix(agentwatch_runtime::journal::Priority::Err);
        eprintln!("{prefix}agentwatch: error: {agent}: {error}");
    }
    Ok(ExitCode::from(report.exit_code()))
}
