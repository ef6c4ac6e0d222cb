//! `agentwatch export-fixture --opencode-db PATH --labels FILE --out FILE [--commit REV] [--repo DIR]`
//! or `agentwatch export-fixture --claude PATH... --labels FILE --out FILE`: labelled sessions
//! from opencode's own database, or from Claude Code transcripts (files or directories, read as
//! `agentwatch detect` reads them: [`agentwatch_runtime::input::claude::claude_fixture`]), with
//! their descendants, as a scrubbed session file for the backtest (`cargo xtask backtest
//! --fixture FILE`).
//!
//! - The database is opened read-only with a busy timeout and read in one snapshot
//!   ([`agentwatch_opencode::db`]).
//! - The labels file is a JSON object from session id to `"must_flag"`, `"must_not_flag"`, `null`
//!   (export unlabelled) or `{"label": …, "note": "why"}`. Every id must exist; children are
//!   followed through `session.parent_id` and exported unlabelled unless labelled too.
//! - Claude Code's reads state the file's length in their results: `--commit` and `--repo` are
//!   for the database only.
//! - Files read whose length the read's output did not state get it from disk (the path as
//!   recorded, or under `--repo DIR`), or with `--commit REV` from `git show REV:PATH` (PATH
//!   relative to the session's worktree root; run in `--repo DIR`, else in that root): the
//!   worktree may be gone or moved on since the session ran.
//! - The output is written to a temporary file in the same directory, synced, then renamed over
//!   `--out`: a failed export never leaves a partial file, and never replaces a good one.

use crate::CliResult;
use agentwatch_opencode::db::{
    Export, FileRef, OpencodeDb, count_lines, export_fixture, parse_labels,
};
use agentwatch_runtime::Error;
use agentwatch_runtime::input::claude::claude_fixture;
use detect_core::{DetectConfig, SessionFile};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
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

pub fn run(args: ExportFixtureArgs) -> CliResult {
    let labels_text = std::fs::read_to_string(&args.labels)
        .map_err(|e| Error::read(format_args!("labels {}", args.labels.display()), e))?;
    let labels = parse_labels(&labels_text)
        .map_err(|e| Error::data(format!("labels {}: {e}", args.labels.display())))?;
    let Some(db_path) = &args.db else {
        let file = claude_fixture(&args.claude, &labels, &DetectConfig::default())?;
        return write_fixture(&args.out, &file);
    };
    let db = OpencodeDb::open(db_path, Duration::from_millis(args.busy_timeout_ms))
        .map_err(Error::from)?;
    let mut source = LineSource::new(args.commit.clone(), args.repo.clone());
    let mut bar = agentwatch_runtime::progress::Progress::items("export-fixture");
    let mut lines = |f: &FileRef| source.lines(f);
    let config = DetectConfig::default();
    let export = export_fixture(&db, &labels, &mut lines, &config, &mut |d, t| {
        bar.update(d, t)
    });
    let Export {
        file,
        unknown_lengths,
    } = export.map_err(Error::from)?;
    bar.finish();
    write_fixture(&args.out, &file)?;
    if !unknown_lengths.is_empty() {
        let shown: Vec<&str> = unknown_lengths
            .iter()
            .take(10)
            .map(String::as_str)
            .collect();
        let more = unknown_lengths.len().saturating_sub(shown.len());
        eprintln!(
            "agentwatch: note: the length of {} file(s) read is unknown, the coverage signal skips them{}: {}{}",
            unknown_lengths.len(),
            if args.commit.is_some() {
                " (not in that revision)"
            } else {
                " (not on disk; try --repo DIR or --commit REV)"
            },
            shown.join(", "),
            if more > 0 {
                format!(" and {more} more")
            } else {
                String::new()
            }
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// Write the session file atomically and say what it holds.
fn write_fixture(out: &Path, file: &SessionFile) -> CliResult {
    let mut text = file.to_json_pretty();
    text.push('\n');
    write_atomic(out, &text)?;
    let labelled = file.sessions.iter().filter(|s| s.label.is_some()).count();
    crate::write_stdout(
        "export-fixture",
        &format!(
            "wrote {}: {} sessions ({labelled} labelled, {} descendants), {} calls\n",
            out.display(),
            file.sessions.len(),
            file.sessions.len() - labelled,
            file.sessions.iter().map(|s| s.calls.len()).sum::<usize>(),
        ),
    )?;
    Ok(ExitCode::SUCCESS)
}

/// Where file lengths come from: the disk, or a git revision.
#[derive(Debug)]
struct LineSource {
    commit: Option<String>,
    repo: Option<PathBuf>,
    cache: HashMap<PathBuf, Option<u64>>,
}

impl LineSource {
    fn new(commit: Option<String>, repo: Option<PathBuf>) -> Self {
        Self {
            commit,
            repo,
            cache: HashMap::new(),
        }
    }

    fn lines(&mut self, file: &FileRef) -> Option<u64> {
        match &self.commit {
            Some(rev) => {
                let relative = file.relative.as_deref()?;
                let dir = self
                    .repo
                    .clone()
                    .or_else(|| file.root.as_deref().map(PathBuf::from))?;
                let key = dir.join(format!("{rev}:{relative}"));
                if let Some(hit) = self.cache.get(&key) {
                    return *hit;
                }
                let found = git_show_lines(&dir, rev, relative);
                self.cache.insert(key, found);
                found
            }
            None => {
                let path = match (&self.repo, &file.relative) {
                    (Some(repo), Some(relative)) => repo.join(relative),
                    _ => PathBuf::from(&file.path),
                };
                if let Some(hit) = self.cache.get(&path) {
                    return *hit;
                }
                let found = std::fs::read(&path).ok().map(|b| count_lines(&b));
                self.cache.insert(path, found);
                found
            }
        }
    }
}

/// `git -C DIR show REV:PATH`, counted; `None` when git fails (no such revision or path).
fn git_show_lines(dir: &Path, rev: &str, relative: &str) -> Option<u64> {
    let out = Command::new("git")
        .arg("--no-pager")
        .arg("-C")
        .arg(dir)
        .arg("show")
        .arg(format!("{rev}:{relative}"))
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()?;
    out.status.success().then(|| count_lines(&out.stdout))
}

/// Write `text` to `path` atomically (mode 0644) with the workspace's one atomic writer
/// ([`agentwatch_systemd::write_atomic`]): a temporary file in the same directory, synced, renamed
/// over `path`. On any failure the temporary file is removed and `path` is left as it was.
pub fn write_atomic(path: &Path, text: &str) -> Result<(), Error> {
    agentwatch_systemd::write_atomic(path, text.as_bytes(), 0o644)
        .map_err(|e| Error::io(format!("writing {e}")))
}
