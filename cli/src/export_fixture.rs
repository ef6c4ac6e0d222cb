//! `agentwatch export-fixture --opencode-db PATH --labels FILE --out FILE [--commit REV] [--repo DIR]`
//! or `agentwatch export-fixture --claude PATH... --labels FILE --out FILE`: labelled sessions
//! from opencode's own database, or from Claude Code transcripts, with their descendants, as a
//! scrubbed session file for the backtest (`cargo xtask backtest --fixture FILE`). The export is
//! the runtime's ([`agentwatch_runtime::export_fixture`]); this prints what it wrote.

use crate::{CliResult, write_stdout};
use agentwatch_runtime::export_fixture::{self, Input, Request};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

#[derive(Debug, clap::Args)]
pub struct ExportFixtureArgs {
    /// opencode's database, e.g. ~/.local/share/opencode/opencode.db (opened read-only).
    /// `--db` is the old name (every other command's `--db` is agentwatch's own store).
    #[arg(
        long = "opencode-db",
        alias = "db",
        value_name = "PATH",
        required_unless_present = "claude",
        conflicts_with = "claude"
    )]
    pub db: Option<PathBuf>,
    /// Claude Code transcripts instead of a database: a `.jsonl` file or a directory (a project
    /// directory, `projects/` or a Claude configuration directory such as ~/.claude); repeatable.
    #[arg(long, value_name = "PATH")]
    pub claude: Vec<String>,
    /// JSON object: session id -> "must_flag" | "must_not_flag" | null | {"label", "note"}.
    #[arg(long, value_name = "FILE")]
    pub labels: PathBuf,
    /// The session file to write (atomically: temporary file, then rename).
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
    /// Take file lengths from this git revision (`git show REV:PATH`) instead of the disk.
    #[arg(long, value_name = "REV", conflicts_with = "claude")]
    pub commit: Option<String>,
    /// The work tree the sessions' files live in now [default: where the session recorded them].
    #[arg(long, value_name = "DIR", conflicts_with = "claude")]
    pub repo: Option<PathBuf>,
    /// How long to wait for a database another process holds, in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 5000)]
    pub busy_timeout_ms: u64,
}

impl From<ExportFixtureArgs> for Request {
    fn from(a: ExportFixtureArgs) -> Self {
        Self {
            input: match a.db {
                Some(db) => Input::OpencodeDb(db),
                None => Input::Claude(a.claude),
            },
            labels: a.labels,
            out: a.out,
            commit: a.commit,
            repo: a.repo,
            busy_timeout: Duration::from_millis(a.busy_timeout_ms),
        }
    }
}

pub fn run(args: ExportFixtureArgs) -> CliResult {
    let exported = export_fixture::run(&args.into())?;
    write_stdout("export-fixture", &exported.summary())?;
    if let Some(note) = exported.unknown_lengths_note() {
        eprintln!("agentwatch: note: {note}");
    }
    Ok(ExitCode::SUCCESS)
}
