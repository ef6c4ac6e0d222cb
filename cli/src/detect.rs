//! `agentwatch detect [FILE|DIR...] [--json] [--profile precise|design] [--set key=value ...]`:
//! judge sessions on their whole history. Without FILE it judges the built-in sample
//! (`fixtures/sample.json`). A FILE is a session file, `opencode export` JSON or a Claude Code
//! transcript (told apart by its first lines); a DIR is read for its Claude Code transcripts.

use crate::CliResult;
use agentwatch_runtime::Error;
use agentwatch_runtime::config::detector_from_flags;
use agentwatch_runtime::input::{Detection, Format, SessionRead, detect_files, detect_text};
use agentwatch_runtime::jobs::sessions::agent::Agent;
use agentwatch_runtime::text::escape_control;
use detect_core::{SessionVerdict, TreeVerdict};
use serde::Serialize;
use std::collections::HashMap;
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
    key_trees_by_agent(&mut detection);
    // Written as it is serialised, through a buffer: no copy of the whole output in memory.
    let stdout = std::io::stdout().lock();
    let mut out = std::io::BufWriter::with_capacity(1 << 16, stdout);
    let written = if args.json {
        serde_json::to_writer_pretty(&mut out, &Report::of(&detection))
            .map_err(std::io::Error::from)
            .and_then(|()| out.write_all(b"\n"))
    } else {
        out.write_all(render_table(&detection).as_bytes())
    };
    written
        .and_then(|()| out.flush())
        .map_err(|e| Error::stdout("detect", &e))?;
    Ok(ExitCode::SUCCESS)
}

/// The agent that wrote the sessions of a document of `format`: session files and exports are
/// opencode's.
fn agent_of(format: Format) -> Agent {
    match format {
        Format::ClaudeTranscript => Agent::Claude,
        Format::CodexRollout => Agent::Codex,
        Format::GeminiSession => Agent::Gemini,
        Format::SessionFile | Format::OpencodeExport => Agent::Opencode,
    }
}

/// Each tree's alert key names the agent of its root, as the watch keys it
/// (`claude-loop:{root}` for a Claude Code tree, `opencode-loop:{root}` for opencode's).
fn key_trees_by_agent(detection: &mut Detection) {
    let format_of: HashMap<&str, Format> = detection
        .judgement
        .sessions
        .iter()
        .zip(&detection.sessions)
        .map(|(verdict, read)| (verdict.id.as_str(), read.format))
        .collect();
    let keys: Vec<Option<String>> = detection
        .judgement
        .trees
        .iter()
        .map(|t| {
            let format = format_of.get(t.root.as_str())?;
            Some(agent_of(*format).loop_key(&t.root))
        })
        .collect();
    for (tree, key) in detection.judgement.trees.iter_mut().zip(keys) {
        if let Some(key) = key {
            tree.dedup_key = key;
        }
    }
}

/// `--json`: `{"sessions": [...], "trees": [...]}`, each session's verdict with what was read.
#[derive(Serialize)]
struct Report<'a> {
    sessions: Vec<SessionReport<'a>>,
    trees: &'a [TreeVerdict],
}

#[derive(Serialize)]
struct SessionReport<'a> {
    #[serde(flatten)]
    verdict: &'a SessionVerdict,
    /// `opencode`, `claude`, …: the family of its alert keys.
    agent: &'static str,
    calls: usize,
    first_flag_at_call: Option<usize>,
}

impl<'a> Report<'a> {
    fn of(detection: &'a Detection) -> Self {
        let sessions = detection
            .judgement
            .sessions
            .iter()
            .zip(&detection.sessions)
            .map(|(verdict, read)| SessionReport {
                verdict,
                agent: agent_of(read.format).family(),
                calls: read.calls,
                first_flag_at_call: read.first_flag_at_call,
            })
            .collect();
        Self {
            sessions,
            trees: &detection.judgement.trees,
        }
    }
}

/// The human form: one line per session, one per tree, a closing count.
pub fn render_table(detection: &Detection) -> String {
    let judgement = &detection.judgement;
    let mut out = String::new();
    for (v, read) in judgement.sessions.iter().zip(&detection.sessions) {
        let mark = if v.flagged { "FLAGGED" } else { "ok" };
        out.push_str(&format!(
            "session {} {mark} {} {}\n",
            escape_control(&v.id),
            read_summary(read),
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

/// `agent=claude calls=45 first_flag_at_call=6` (the last only when a prefix flagged).
fn read_summary(read: &SessionRead) -> String {
    let mut text = format!(
        "agent={} calls={}",
        agent_of(read.format).family(),
        read.calls
    );
    if let Some(k) = read.first_flag_at_call {
        text.push_str(&format!(" first_flag_at_call={k}"));
    }
    text
}
