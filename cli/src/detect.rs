//! `agentwatch detect [FILE...] [--json] [--profile precise|design] [--set key=value ...]`:
//! judge sessions on their whole history. Without FILE it judges the built-in sample
//! (`fixtures/sample.json`).

use crate::CliResult;
use agentwatch_runtime::Error;
use agentwatch_runtime::config::detector_from_flags;
use agentwatch_runtime::input::{judge_files, judge_text};
use agentwatch_runtime::text::escape_control;
use detect_core::Judgement;
use std::io::Write;
use std::process::ExitCode;

use agentwatch_runtime::SAMPLE;

#[derive(Debug, clap::Args)]
pub struct DetectArgs {
    /// Session files (`agentwatch-sessions/1`) or `opencode export` JSON; `-` reads standard
    /// input. Without FILE, the built-in sample is judged.
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
    let judgement = if args.files.is_empty() {
        judge_text("built-in sample", SAMPLE, &config)?
    } else {
        judge_files(&args.files, &config)?
    };
    // Written as it is serialised, through a buffer: no copy of the whole output in memory.
    let stdout = std::io::stdout().lock();
    let mut out = std::io::BufWriter::with_capacity(1 << 16, stdout);
    let written = if args.json {
        serde_json::to_writer_pretty(&mut out, &judgement)
            .map_err(std::io::Error::from)
            .and_then(|()| out.write_all(b"\n"))
    } else {
        out.write_all(render_table(&judgement).as_bytes())
    };
    written
        .and_then(|()| out.flush())
        .map_err(|e| Error::stdout("detect", &e))?;
    Ok(ExitCode::SUCCESS)
}

/// The human form: one line per session, one per tree, a closing count.
pub fn render_table(judgement: &Judgement) -> String {
    let mut out = String::new();
    for v in &judgement.sessions {
        let mark = if v.flagged { "FLAGGED" } else { "ok" };
        out.push_str(&format!(
            "session {} {mark} {}\n",
            escape_control(&v.id),
            escape_control(&v.summary())
        ));
    }
    for t in &judgement.trees {
        let flagged: Vec<&str> = t.flagged_sessions.iter().map(|s| s.id.as_str()).collect();
        let state = if t.flagged {
            format!("FLAGGED by {}", escape_control(&flagged.join(", ")))
        } else {
            "ok".to_owned()
        };
        out.push_str(&format!(
            "tree {} dedup_key={} sessions={} {state}\n",
            escape_control(&t.root),
            escape_control(&t.dedup_key),
            t.sessions.len()
        ));
        for note in &t.notes {
            out.push_str(&format!("  note: {}\n", escape_control(note)));
        }
    }
    let flagged = judgement.trees.iter().filter(|t| t.flagged).count();
    out.push_str(&format!(
        "# {flagged}/{} trees flagged\n",
        judgement.trees.len()
    ));
    out
}
