//! `agentwatch detect [FILE|DIR...] [--json] [--profile precise|design] [--set key=value ...]`:
//! judge sessions on their whole history. Without FILE it judges the built-in sample
//! (`fixtures/sample.json`). A FILE is a session file, `opencode export` JSON or a Claude Code
//! transcript (told apart by its first lines); a DIR is read for its Claude Code transcripts.
//! The reading, judging and rendering are the runtime's ([`agentwatch_runtime::input`],
//! [`agentwatch_runtime::detect`]); this writes the result.

use crate::CliResult;
use agentwatch_runtime::Error;
use agentwatch_runtime::config::detector_from_flags;
use agentwatch_runtime::input::{detect_files, detect_text};
use agentwatch_runtime::text::escape_control;
use std::io::Write;
use std::process::ExitCode;

use agentwatch_runtime::SAMPLE;

#[derive(Debug, clap::Args)]
pub struct DetectArgs {
    /// Session files (`agentwatch-sessions/1`), `opencode export` JSON, Claude Code
    /// transcripts (`.jsonl`), Codex CLI rollouts (`rollout-*.jsonl`, `.jsonl.zst`) or Gemini
    /// CLI sessions (`session-*.jsonl`, `.json`); a directory is read for its Claude Code
    /// transcripts (a project directory, `projects/` or a Claude configuration directory such as
    /// ~/.claude); `-` reads standard input. Without FILE, the built-in sample is judged.
    pub files: Vec<String>,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Detection profile: `precise` (the default) or `design` (docs/detection.md); `--set`
    /// applies on top of it.
    #[arg(long, value_name = "PROFILE")]
    pub profile: Option<String>,
    /// Override a detector key, e.g. `--set top_min=10` (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
}

pub fn run(args: DetectArgs) -> CliResult {
    let config = detector_from_flags(args.profile.as_deref(), &args.set)?;
    let mut detection = if args.files.is_empty() {
        detect_text("built-in sample", SAMPLE, &config)?
    } else {
        detect_files(&args.files, &config)?
    };
    for note in &detection.notes {
        eprintln!("agentwatch: note: {}", escape_control(note));
    }
    detection.key_trees_by_agent();
    // Written as it is serialised, through a buffer: no copy of the whole output in memory.
    let stdout = std::io::stdout().lock();
    let mut out = std::io::BufWriter::with_capacity(1 << 16, stdout);
    let written = if args.json {
        serde_json::to_writer_pretty(&mut out, &detection.report())
            .map_err(std::io::Error::from)
            .and_then(|()| out.write_all(b"\n"))
    } else {
        out.write_all(detection.render_table().as_bytes())
    };
    written
        .and_then(|()| out.flush())
        .map_err(|e| Error::stdout("detect", &e))?;
    Ok(ExitCode::SUCCESS)
}
