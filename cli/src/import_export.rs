//! `agentwatch import-export FILE... [--out FILE]`: `opencode export` JSON files (one session
//! each, e.g. `opencode export ses_… > s.json`) into one session file (`agentwatch-sessions/1`),
//! on standard output or written atomically to `--out`, each file's sessions written out as soon
//! as that file is read (the document is never built whole in memory).
//!
//! Children may be exported separately and imported together with their parent: the session file
//! keeps `parent_id`, so the detector judges them as one tree. Session files given as input are
//! passed through. Nothing is scrubbed (use `export-fixture` for fixtures you share); `agentwatch
//! detect` also reads export JSON directly.

use crate::CliResult;
use agentwatch_runtime::Error;
use agentwatch_runtime::input::import_exports;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct ImportExportArgs {
    /// `opencode export` JSON files; `-` reads standard input.
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
