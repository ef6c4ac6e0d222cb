//! `agentwatch import-export FILE|DIR... [--out FILE]`: `opencode export` JSON files (one session
//! each, e.g. `opencode export ses_… > s.json`) and Claude Code transcripts (a `.jsonl` file, or
//! a directory of them: a project directory, `projects/` or a Claude configuration directory)
//! into one session file (`agentwatch-sessions/1`), on standard output or written atomically to
//! `--out`, each file's sessions written out as soon as that file is read (the document is never
//! built whole in memory).
//!
//! Children may be exported separately and imported together with their parent: the session file
//! keeps `parent_id`, so the detector judges them as one tree (a Claude Code subagent is the child
//! of the session that spawned it). Session files given as input are passed through. Claude Code
//! transcripts hold whole prompts and file contents, so their sessions are scrubbed as
//! `export-fixture` scrubs (every string the detector does not read hashed; paths and commands
//! kept); opencode exports are not (use `export-fixture` for fixtures you share). `agentwatch
//! detect` also reads export JSON and transcripts directly.

use crate::CliResult;
use agentwatch_runtime::Error;
use agentwatch_runtime::input::import_exports;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct ImportExportArgs {
    /// `opencode export` JSON files or Claude Code transcripts (files or directories); `-` reads
    /// standard input.
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<String>,
    /// Write the session file here (atomically) instead of standard output.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
}

pub fn run(args: ImportExportArgs) -> CliResult {
    if args.files.iter().filter(|f| *f == "-").count() > 1 {
        return Err(Error::usage("standard input (`-`) can be read only once"));
    }
    let written = import_exports(&args.files, args.out.as_deref())?;
    if let Some(path) = &args.out {
        eprintln!("agentwatch: wrote {}: {written} sessions", path.display());
    }
    Ok(ExitCode::SUCCESS)
}
