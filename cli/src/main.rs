//! `agentwatch`: the command-line front end of the agentwatch workspace.
//!
//! It parses arguments and prints results; the jobs live in `agentwatch-runtime`. Errors are
//! reported with context and a sysexits-style exit code (`agentwatch_runtime::error::code`);
//! a usage error clap finds exits 64 like every other usage error.
#![forbid(unsafe_code)]

mod args;
mod backtest;
mod detect;
mod export_fixture;
mod hooks;
mod import_export;
mod man;

use agentwatch_runtime::error::code;
use agentwatch_runtime::journal::Priority;
use agentwatch_runtime::{Error, jobs, operator, replay};
use args::{
    AlertsArgs, ChannelsArgs, ConfigArgs, DeckArgs, DoctorArgs, HookArgs, InitArgs, RecoverArgs,
    ReplayArgs, RunArgs, ServeArgs, StatusArgs, TestAlertArgs, WatchArgs,
};
use clap::{CommandFactory, Parser, Subcommand};
use std::io::{BufWriter, Write};
use std::process::ExitCode;

/// What a command returns: its exit code, or the error to report.
pub type CliResult = Result<ExitCode, Error>;

#[derive(Debug, Parser)]
#[command(
    name = "agentwatch",
    version = env!("AGENTWATCH_LONG_VERSION"),
    about = "A watchdog for AI coding-agent sessions"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Judge the sessions of session files, exports or Claude Code transcripts (built-in sample
    /// when FILE is omitted).
    Detect(detect::DetectArgs),
    /// Replay a labelled session file through the detector as the watchdog sees it grow (a
    /// prefix every --step calls) and score the labels: `# backtest complete: N/M flagged`.
    Backtest(backtest::BacktestArgs),
    /// Drive one policy from a JSON-lines timeline and print one JSON line per decision.
    Replay(ReplayArgs),
    /// Watch every agent's sessions (opencode, Claude Code, Codex, Gemini CLI): one tick with
    /// --once (read sessions, judge trees, alert, store), live with --follow, the bundled demo
    /// with --demo.
    Watch(WatchArgs),
    /// The old name of `watch` (it works the same, and says so).
    #[command(hide = true)]
    Opencode(WatchArgs),
    /// Last tick, sessions seen, flagged/total verdicts, open alerts, channels.
    Status(StatusArgs),
    /// Open alerts (all with --all).
    Alerts(AlertsArgs),
    /// List notification channels, or `set` one's run-time settings.
    Channels(ChannelsArgs),
    /// Send a test alert through the channels.
    TestAlert(TestAlertArgs),
    /// Print the effective configuration.
    Config(ConfigArgs),
    /// Export labelled sessions from opencode's database or Claude Code transcripts as a scrubbed
    /// fixture (session file).
    ExportFixture(export_fixture::ExportFixtureArgs),
    /// Turn `opencode export` JSON files and Claude Code transcripts into one session file.
    ImportExport(import_export::ImportExportArgs),
    /// Restart a service once its watchdog's loop report is confirmed (one check; a timer repeats it).
    Recover(RecoverArgs),
    /// Watch agent-deck sessions: restart crashed critical ones, nudge stuck children, escalate.
    Deck(DeckArgs),
    /// Serve the admin pages, the JSON API and /metrics over the store (until killed).
    Serve(ServeArgs),
    /// Run every job of `[run] jobs` in one process, each at its cadence, until SIGTERM/SIGINT.
    Run(RunArgs),
    /// Check every source, channel, the store and the config files; exit non-zero on a problem.
    Doctor(DoctorArgs),
    /// Write a commented starter config from what `doctor` finds (never over an existing file).
    Init(InitArgs),
    /// Answer an agent's pre-tool event on standard input (what `hooks install` sets up): let
    /// the call run, warn, refuse the looping call or stop the session. Always exits 0.
    Hook(HookArgs),
    /// Install, remove or check agentwatch's pre-tool hook in Claude Code, Codex, Gemini CLI
    /// and opencode.
    Hooks(hooks::HooksArgs),
    /// Print a shell completion script (`agentwatch completions bash > …/agentwatch`).
    Completions {
        /// bash, zsh, fish, elvish or powershell.
        shell: clap_complete::Shell,
    },
    /// Install a man page per command and subcommand, with the configuration keys, files and
    /// exit codes (`man agentwatch`, `man agentwatch-alerts-ack`).
    Man(man::ManArgs),
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { code::USAGE } else { 0 });
        }
    };
    // The hook's journal is a file of its own: the agent owns its standard streams.
    if let Command::Hook(args) = cli.command {
        return hook(args);
    }
    agentwatch_runtime::journal::install();
    let result = match cli.command {
        Command::Detect(args) => detect::run(args),
        Command::Backtest(args) => backtest::run(args),
        Command::Replay(args) => run_replay(&args),
        Command::Watch(args) => watch(args),
        Command::Opencode(args) => {
            agentwatch_runtime::journal::Line::warning(
                "watchdog",
                agentwatch_runtime::clock::now_or_clock(args.now),
            )
                .field(
                    "message",
                    "`agentwatch opencode` is the old name of `agentwatch watch`, which watches every agent's sessions; it works the same",
                )
                .emit();
            watch(args)
        }
        Command::Status(args) => shown(operator::status(&args.into())),
        Command::Alerts(args) => shown(operator::alerts(&args.into())),
        Command::Channels(args) => shown(operator::channels(&args.into())),
        Command::TestAlert(args) => shown(operator::test_alert(&args.into())),
        Command::Config(args) => shown(operator::show_config(&args.into())),
        Command::ExportFixture(args) => export_fixture::run(args),
        Command::ImportExport(args) => import_export::run(args),
        Command::Recover(args) => recover(args),
        Command::Deck(args) => deck(args),
        Command::Serve(args) => serve(args),
        Command::Run(args) => agentwatch_runtime::run::run(&args.into()).map(ExitCode::from),
        Command::Doctor(args) => doctor(args),
        Command::Init(args) => init(args),
        Command::Hook(args) => Ok(hook(args)),
        Command::Hooks(args) => hooks::run(args),
        Command::Completions { shell } => completions(shell),
        Command::Man(args) => man::run(&args, Cli::command()),
    };
    match result {
        Ok(code) => code,
        // The reader closed the pipe (`| head -c1`): it wanted no more; stop quietly.
        Err(Error::StdoutClosed) => ExitCode::SUCCESS,
        Err(err) => {
            let prefix = agentwatch_runtime::journal::prefix(Priority::Err);
            eprintln!("{prefix}agentwatch: error: {err}");
            ExitCode::from(err.exit_code())
        }
    }
}

/// Write `text` to standard output and flush it. A closed pipe is [`Error::StdoutClosed`] (the
/// command ends quietly, exit 0); any other failure (`> /dev/full`) exits 74 naming `what`.
pub fn write_stdout(what: &str, text: &str) -> Result<(), Error> {
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
        .map_err(|e| Error::stdout(what, &e))
}

fn shown(result: Result<operator::Shown, Error>) -> CliResult {
    let shown = result?;
    write_stdout("agentwatch", &shown.text)?;
    Ok(ExitCode::from(shown.exit_code))
}

/// `--json` everywhere: a command that runs once prints one pretty document; one that keeps
/// running (`deck` without `--once`, `watch --follow`) prints one compact object per line.
fn print_json(what: &str, value: &serde_json::Value, stream: bool) -> Result<(), Error> {
    // Pretty for one document, compact for a stream.
    let text = [serde_json::to_string_pretty, serde_json::to_string][usize::from(stream)](value)
        .map_err(|e| Error::software(e.to_string()))?;
    write_stdout(what, &format!("{text}\n"))
}

fn watch(args: WatchArgs) -> CliResult {
    let (json, verbose, follow) = (args.json, args.verbose, args.follow);
    let args: jobs::sessions::Options = args.into();
    if let Some(daemon) = args.daemon()? {
        return agentwatch_runtime::run::run(&daemon).map(ExitCode::from);
    }
    if follow {
        // Each tick that fired an event is printed as it happens.
        let mut failed = None;
        jobs::sessions::follow::follow_until_signal(&args, |report| {
            if report.fired() == 0 || failed.is_some() {
                return;
            }
            let written = if json {
                print_json("watch", &report.to_json(), true)
            } else {
                write_stdout("watch", &report.render(verbose))
            };
            failed = written.err();
        })?;
        return failed.map_or(Ok(ExitCode::SUCCESS), Err);
    }
    if let Some(report) = jobs::sessions::run(&args)? {
        if json {
            print_json("watch", &report.to_json(), false)?;
        } else {
            write_stdout("watch", &report.render(verbose))?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `agentwatch hook AGENT`: the answer on standard output, exit 0 whatever happened (an agent
/// reads another exit as a failed hook, and exit 2 would show our command line to the model).
fn hook(args: HookArgs) -> ExitCode {
    let agent = args.agent;
    let stdout = agentwatch_runtime::hook::run_process(agent, &mut std::io::stdin(), &args.into());
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(&stdout).and_then(|()| out.flush());
    ExitCode::SUCCESS
}

fn doctor(args: DoctorArgs) -> CliResult {
    let json = args.json;
    let report = agentwatch_runtime::doctor::run(&args.into())?;
    if json {
        print_json("doctor", &report.to_json(), false)?;
    } else {
        write_stdout("doctor", &report.render())?;
    }
    Ok(ExitCode::from(report.exit_code()))
}

fn init(args: InitArgs) -> CliResult {
    match agentwatch_runtime::doctor::init(&args.into())? {
        (Some(path), _) => write_stdout("init", &format!("wrote {}\n", path.display()))?,
        (None, text) => write_stdout("init", &text)?,
    }
    Ok(ExitCode::SUCCESS)
}

fn completions(shell: clap_complete::Shell) -> CliResult {
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "agentwatch", &mut script);
    write_stdout("completions", &String::from_utf8_lossy(&script))?;
    Ok(ExitCode::SUCCESS)
}

fn recover(args: RecoverArgs) -> CliResult {
    let (json, args) = (args.json, args.into());
    if let Some(daemon) = jobs::recover::Options::daemon(&args)? {
        return agentwatch_runtime::run::run(&daemon).map(ExitCode::from);
    }
    let outcome = jobs::recover::run(&args)?;
    if json {
        print_json("recover", &outcome.json, false)?;
    }
    Ok(ExitCode::from(outcome.exit_code))
}

fn deck(args: DeckArgs) -> CliResult {
    let (json, stream) = (args.json, !args.once);
    // The first write error ends the output; the job's own outcome is reported after it.
    let mut written: Result<(), Error> = Ok(());
    let code = jobs::deck::run(&args.into(), &mut |report| {
        if written.is_ok() {
            written = if json {
                print_json("deck", &report.to_json(), stream)
            } else {
                write_stdout("deck", &report.render())
            };
        }
    })?;
    written?;
    Ok(ExitCode::from(code))
}

fn serve(args: ServeArgs) -> CliResult {
    let (server, db) = agentwatch_runtime::serve::bind(&args.into())?;
    eprintln!("agentwatch serve: database {}", db.display());
    println!("listening on http://{}", server.local_addr());
    std::io::stdout()
        .flush()
        .map_err(|e| Error::io(format!("serve: cannot write output: {e}")))?;
    // It returns only when it cannot serve: an error, so `Restart=on-failure` starts it again.
    server
        .run()
        .map_err(|e| Error::unavailable(e.to_string()))?;
    Ok(ExitCode::SUCCESS)
}

fn run_replay(args: &ReplayArgs) -> CliResult {
    let policy = replay::Policy::parse(&args.policy)?;
    let mut input = replay::open_input(args.file.as_deref())?;
    let stdout = std::io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    replay::run(policy, &mut *input, &mut out)?;
    out.flush().map_err(|e| Error::stdout("replay", &e))?;
    Ok(ExitCode::SUCCESS)
}
