//! `agentwatch import-export FILE... [--out FILE]`: `opencode export` JSON files (one session
//! each, e.g. `opencode export ses_… > s.json`) into one session file (`agentwatch-sessions/1`),
//! on standard output or written atomically to `--out`.
//!
//! Children may be exported separately and imported together with their parent: the session file
//! keeps `parent_id`, so the detector judges them as one tree. Session files given as input are
//! passed through. Nothing is scrubbed (use `export-fixture` for fixtures you share); `agentwatch
//! detect` also reads export JSON directly.

use crate::CliResult;
use crate::export_fixture::write_atomic;
use agentwatch_runtime::Error;
use agentwatch_runtime::input::read_sessions;
use detect_core::SessionFile;
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
    let sessions = read_sessions(&args.files)?;
    for s in &sessions {
        if s.calls.iter().all(|c| !c.status.is_counted()) {
            eprintln!(
                "agentwatch: note: session {} has no tool calls; it is kept but there is nothing to judge",
                s.id
            );
        }
    }
    let file = SessionFile::new(sessions);
    let mut text = file.to_json_pretty();
    text.push('\n');
    match &args.out {
        Some(path) => {
            write_atomic(path, &text)?;
            eprintln!(
                "agentwatch: wrote {}: {} sessions",
                path.display(),
                file.sessions.len()
            );
        }
        None => crate::write_stdout("import-export", &text)?,
    }
    Ok(ExitCode::SUCCESS)
}
