//! `agentwatch export-fixture`: labelled sessions from opencode's own database, or from Claude
//! Code transcripts (files or directories, read as `agentwatch detect` reads them:
//! [`crate::input::claude::claude_fixture`]), with their descendants, as a scrubbed session file
//! for the backtest (`cargo xtask backtest --fixture FILE`).
//!
//! - The database is opened read-only with a busy timeout and read in one snapshot
//!   ([`agentwatch_opencode::db`]).
//! - The labels file is a JSON object from session id to `"must_flag"`, `"must_not_flag"`, `null`
//!   (export unlabelled) or `{"label": …, "note": "why"}`. Every id must exist; children are
//!   followed through `session.parent_id` and exported unlabelled unless labelled too.
//! - Claude Code's reads state the file's length in their results: [`Request::commit`] and
//!   [`Request::repo`] are for the database only.
//! - Files read whose length the read's output did not state get it from disk (the path as
//!   recorded, or under `repo`), or with `commit` from `git show REV:PATH` (PATH relative to the
//!   session's worktree root; run in `repo`, else in that root): the worktree may be gone or
//!   moved on since the session ran.
//! - The output is written to a temporary file in the same directory, synced, then renamed over
//!   `out`: a failed export never leaves a partial file, and never replaces a good one.

use crate::error::Error;
use crate::input::claude::claude_fixture;
use crate::progress::Progress;
use agentwatch_opencode::db::{
    Export, FileRef, OpencodeDb, count_lines, export_fixture, parse_labels,
};
use detect_core::{DetectConfig, SessionFile};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// Where the sessions come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Input {
    /// opencode's database (opened read-only).
    OpencodeDb(PathBuf),
    /// Claude Code transcripts: `.jsonl` files or directories.
    Claude(Vec<String>),
}

/// One export: what to read, which sessions, where to write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub input: Input,
    /// JSON object: session id -> "must_flag" | "must_not_flag" | null | {"label", "note"}.
    pub labels: PathBuf,
    /// The session file to write (atomically).
    pub out: PathBuf,
    /// Take file lengths from this git revision instead of the disk (database only).
    pub commit: Option<String>,
    /// The work tree the sessions' files live in now (database only).
    pub repo: Option<PathBuf>,
    /// How long to wait for a database another process holds.
    pub busy_timeout: Duration,
}

/// What an export wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exported {
    pub out: PathBuf,
    pub sessions: usize,
    pub labelled: usize,
    pub calls: usize,
    /// Files read whose length is unknown (the coverage signal skips them).
    pub unknown_lengths: Vec<String>,
    /// The lengths were asked of a git revision ([`Request::commit`]).
    pub from_commit: bool,
}

impl Exported {
    /// Sessions exported because an ancestor was asked for, not labelled themselves.
    pub fn descendants(&self) -> usize {
        self.sessions - self.labelled
    }

    /// `wrote FILE: N sessions (L labelled, D descendants), C calls` and a newline.
    pub fn summary(&self) -> String {
        format!(
            "wrote {}: {} sessions ({} labelled, {} descendants), {} calls\n",
            self.out.display(),
            self.sessions,
            self.labelled,
            self.descendants(),
            self.calls,
        )
    }

    /// What a person should know of the files whose length is unknown (at most ten named), or
    /// `None` when every length is known.
    pub fn unknown_lengths_note(&self) -> Option<String> {
        if self.unknown_lengths.is_empty() {
            return None;
        }
        let shown: Vec<&str> = self
            .unknown_lengths
            .iter()
            .take(10)
            .map(String::as_str)
            .collect();
        let more = self.unknown_lengths.len().saturating_sub(shown.len());
        Some(format!(
            "the length of {} file(s) read is unknown, the coverage signal skips them{}: {}{}",
            self.unknown_lengths.len(),
            if self.from_commit {
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
        ))
    }
}

/// Read the labels, export the labelled sessions and their descendants, write the session file.
pub fn run(request: &Request) -> Result<Exported, Error> {
    let labels_text = std::fs::read_to_string(&request.labels)
        .map_err(|e| Error::read(format_args!("labels {}", request.labels.display()), e))?;
    let labels = parse_labels(&labels_text)
        .map_err(|e| Error::data(format!("labels {}: {e}", request.labels.display())))?;
    let config = DetectConfig::default();
    let (file, unknown_lengths) = match &request.input {
        Input::Claude(paths) => (claude_fixture(paths, &labels, &config)?, Vec::new()),
        Input::OpencodeDb(db_path) => {
            let db = OpencodeDb::open(db_path, request.busy_timeout).map_err(Error::from)?;
            let mut source = LineSource::new(request.commit.clone(), request.repo.clone());
            let mut bar = Progress::items("export-fixture");
            let mut lines = |f: &FileRef| source.lines(f);
            let export = export_fixture(&db, &labels, &mut lines, &config, &mut |d, t| {
                bar.update(d, t)
            });
            let Export {
                file,
                unknown_lengths,
            } = export.map_err(Error::from)?;
            bar.finish();
            (file, unknown_lengths)
        }
    };
    write_fixture(&request.out, &file)?;
    Ok(Exported {
        out: request.out.clone(),
        sessions: file.sessions.len(),
        labelled: file.sessions.iter().filter(|s| s.label.is_some()).count(),
        calls: file.sessions.iter().map(|s| s.calls.len()).sum(),
        unknown_lengths,
        from_commit: request.commit.is_some(),
    })
}

/// Write the session file atomically (mode 0644) with the workspace's one atomic writer
/// ([`agentwatch_systemd::write_atomic`]): a temporary file in the same directory, synced,
/// renamed over `out`. On any failure the temporary file is removed and `out` is left as it was.
fn write_fixture(out: &Path, file: &SessionFile) -> Result<(), Error> {
    let mut text = file.to_json_pretty();
    text.push('\n');
    agentwatch_systemd::write_atomic(out, text.as_bytes(), 0o644)
        .map_err(|e| Error::io(format!("writing {e}")))
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

#[cfg(test)]
mod tests {
    use super::*;

    fn exported(unknown: usize, from_commit: bool) -> Exported {
        Exported {
            out: PathBuf::from("out.json"),
            sessions: 3,
            labelled: 1,
            calls: 40,
            unknown_lengths: (0..unknown).map(|i| format!("f{i}.rs")).collect(),
            from_commit,
        }
    }

    #[test]
    fn the_summary_counts_descendants_as_the_unlabelled_sessions() {
        assert_eq!(
            exported(0, false).summary(),
            "wrote out.json: 3 sessions (1 labelled, 2 descendants), 40 calls\n"
        );
        assert_eq!(exported(0, false).unknown_lengths_note(), None);
    }

    #[test]
    fn the_note_names_ten_files_and_says_where_lengths_were_asked() {
        let note = exported(12, true).unknown_lengths_note().unwrap();
        assert!(note.starts_with("the length of 12 file(s) read is unknown"));
        assert!(note.contains(" (not in that revision): f0.rs, "));
        assert!(note.ends_with("f9.rs and 2 more"), "{note}");
        let note = exported(1, false).unknown_lengths_note().unwrap();
        assert!(note.ends_with("(not on disk; try --repo DIR or --commit REV): f0.rs"));
    }
}
