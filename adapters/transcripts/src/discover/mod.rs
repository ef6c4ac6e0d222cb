//! Where the transcripts are, under each agent's directory (the caller resolves the
//! environment and passes the path):
//!
//! - Claude Code ([`discover_claude`], `$CLAUDE_CONFIG_DIR` or `~/.claude`, `agents.md` §1.1):
//!   `projects/<project>/<session>.jsonl`; a subagent's
//!   `projects/<project>/<session>/subagents/agent-<id>.jsonl` with `agent-<id>.meta.json`
//!   beside it naming the spawning call (`toolUseId`); the older flat
//!   `projects/<project>/agent-<id>.jsonl`, its parent session named only in its lines;
//!   `agent-acompact-*.jsonl` (compaction workers) skipped. The project directory's name (a
//!   slug of the working directory) is never decoded: the records' `cwd` is the truth.
//! - Codex CLI ([`discover_codex`], `$CODEX_HOME` or `~/.codex`, §2.1):
//!   `sessions/YYYY/MM/DD/rollout-<time>-<thread uuid>.jsonl` (and the flat `sessions/` of the
//!   oldest builds), `archived_sessions/rollout-*.jsonl`, either also as `.jsonl.zst`. The
//!   thread id is the file name's; a subagent's parent is only in its first line
//!   ([`peek_codex`]).
//! - Gemini CLI ([`discover_gemini`], `$GEMINI_CLI_HOME` or `~`, then `.gemini/`, §3.1):
//!   `tmp/<project>/chats/session-<time>-<8 hex>.jsonl` (0.39 on), the older whole-file
//!   `session-*.json`, a subagent's `tmp/<project>/chats/<parent session id>/<id>.jsonl`. The
//!   project's directory comes from `tmp/<project>/.project_root` (or `projects.json`); a main
//!   session's full id is only in its first line ([`peek_gemini`]).
//!
//! Each transcript comes with its size and modification time, so a caller can skip files not
//! written within its `stale_after_s` without opening them.

mod claude;
mod codex;
mod gemini;

pub use claude::{
    SubagentMeta, discover_claude, discover_claude_project, parse_subagent_meta, read_subagent_meta,
};
pub use codex::{codex_thread_id, discover_codex, peek_codex};
pub use gemini::{GeminiHead, discover_gemini, gemini_file_at, peek_gemini};

use crate::claude::{FileKind, subagent_session_id};
use crate::gemini::GeminiFile;
use crate::sniff::TranscriptAgent;
use crate::whole::Placement;
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

/// One transcript file found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transcript {
    pub path: PathBuf,
    pub kind: TranscriptKind,
    pub size: u64,
    /// Last modification, unix milliseconds.
    pub mtime_ms: i64,
}

/// What a transcript file is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TranscriptKind {
    /// `projects/<project>/<session>.jsonl`.
    ClaudeMain { session_id: String },
    /// `projects/<project>/<session>/subagents/agent-<id>.jsonl`.
    ClaudeSubagent {
        parent_session_id: String,
        agent_id: String,
    },
    /// `projects/<project>/agent-<id>.jsonl`: the parent session is in its lines.
    ClaudeFlatAgent { agent_id: String },
    /// A Codex rollout: `thread_id` from its name (`None` for a name without one); a
    /// `compressed` one (`.jsonl.zst`) is read whole ([`read_transcript`]), never tailed.
    CodexRollout {
        thread_id: Option<String>,
        archived: bool,
        compressed: bool,
    },
    /// A Gemini CLI session (`chats/session-*.jsonl`, or the older whole-file `.json`, which
    /// is rewritten on every update: read it whole when it changes). Its full session id is
    /// in its first line ([`peek_gemini`]).
    GeminiSession {
        project: String,
        project_root: Option<String>,
        whole_file: bool,
    },
    /// A Gemini CLI subagent: `chats/<parent session id>/<session id>.jsonl`.
    GeminiSubagent {
        project: String,
        project_root: Option<String>,
        parent_session_id: String,
        session_id: String,
    },
}

impl Transcript {
    /// The detector's id of the transcript's session, when the path tells it (a Claude flat
    /// agent's parent is only in its lines: see [`crate::ClaudeReader::meta`]; a Gemini
    /// session's full id only in its first line).
    pub fn session_id(&self) -> Option<String> {
        match &self.kind {
            TranscriptKind::ClaudeMain { session_id } => Some(session_id.clone()),
            TranscriptKind::ClaudeSubagent {
                parent_session_id,
                agent_id,
            } => Some(subagent_session_id(parent_session_id, agent_id)),
            TranscriptKind::CodexRollout { thread_id, .. } => thread_id.clone(),
            TranscriptKind::GeminiSubagent { session_id, .. } => Some(session_id.clone()),
            TranscriptKind::ClaudeFlatAgent { .. } | TranscriptKind::GeminiSession { .. } => None,
        }
    }

    /// The session that spawned this one, when the path tells it (a Codex subagent's parent
    /// is in its first line: [`peek_codex`]).
    pub fn parent_session_id(&self) -> Option<&str> {
        match &self.kind {
            TranscriptKind::ClaudeSubagent {
                parent_session_id, ..
            }
            | TranscriptKind::GeminiSubagent {
                parent_session_id, ..
            } => Some(parent_session_id),
            _ => None,
        }
    }

    /// The Claude Code reader's kind for it ([`crate::ClaudeReader::new`]); `agent_type` from
    /// the subagent's [`SubagentMeta`] when the caller read it. (Another agent's file reads
    /// as a main session of the id its path gives.)
    pub fn file_kind(&self, agent_type: Option<String>) -> FileKind {
        match &self.kind {
            TranscriptKind::ClaudeSubagent {
                parent_session_id,
                agent_id,
            } => FileKind::Subagent {
                agent_id: Some(agent_id.clone()),
                parent_session_id: Some(parent_session_id.clone()),
                agent_type,
            },
            TranscriptKind::ClaudeFlatAgent { agent_id } => FileKind::Subagent {
                agent_id: Some(agent_id.clone()),
                parent_session_id: None,
                agent_type,
            },
            _ => FileKind::Main {
                session_id: self.session_id(),
            },
        }
    }

    /// The agent that wrote it.
    pub fn agent(&self) -> TranscriptAgent {
        match &self.kind {
            TranscriptKind::ClaudeMain { .. }
            | TranscriptKind::ClaudeSubagent { .. }
            | TranscriptKind::ClaudeFlatAgent { .. } => TranscriptAgent::Claude,
            TranscriptKind::CodexRollout { .. } => TranscriptAgent::Codex,
            TranscriptKind::GeminiSession { .. } | TranscriptKind::GeminiSubagent { .. } => {
                TranscriptAgent::Gemini
            }
        }
    }

    /// What its place says of it, for its agent's reader ([`crate::read_whole`], as the live
    /// sources make their readers); `agent_type`: a Claude subagent's, from its
    /// [`SubagentMeta`] when the caller read it.
    pub fn placement(&self, agent_type: Option<String>) -> Placement {
        match self.agent() {
            TranscriptAgent::Claude => Placement::Claude(self.file_kind(agent_type)),
            TranscriptAgent::Codex => Placement::Codex {
                thread_id: self.session_id(),
            },
            TranscriptAgent::Gemini => Placement::Gemini(self.gemini_file()),
        }
    }

    /// Whether it is a subagent's (listed after the sessions' own).
    pub fn is_subagent(&self) -> bool {
        matches!(
            self.kind,
            TranscriptKind::ClaudeSubagent { .. }
                | TranscriptKind::ClaudeFlatAgent { .. }
                | TranscriptKind::GeminiSubagent { .. }
        )
    }

    /// A Claude subagent's `agent-<id>.meta.json` (current layout only).
    pub fn meta_path(&self) -> Option<PathBuf> {
        match &self.kind {
            TranscriptKind::ClaudeSubagent { agent_id, .. } => Some(
                self.path
                    .with_file_name(format!("agent-{agent_id}.meta.json")),
            ),
            _ => None,
        }
    }

    /// What a Gemini transcript's path says, for [`crate::GeminiReader::new`]: a subagent's
    /// ids, the project's directory. (A main session's id is in its first line.)
    pub fn gemini_file(&self) -> GeminiFile {
        GeminiFile {
            session_id: self
                .session_id()
                .filter(|_| matches!(self.kind, TranscriptKind::GeminiSubagent { .. })),
            parent_session_id: self.parent_session_id().map(str::to_owned),
            project_root: self.project_root().map(str::to_owned),
        }
    }

    /// The project's directory a Gemini transcript belongs to (Gemini writes no `cwd`).
    pub fn project_root(&self) -> Option<&str> {
        match &self.kind {
            TranscriptKind::GeminiSession { project_root, .. }
            | TranscriptKind::GeminiSubagent { project_root, .. } => project_root.as_deref(),
            _ => None,
        }
    }

    /// Whether the file is read whole when it changes (a compressed Codex rollout, a Gemini
    /// `.json`), rather than tailed by byte offset.
    pub fn read_whole(&self) -> bool {
        match &self.kind {
            TranscriptKind::CodexRollout { compressed, .. } => *compressed,
            TranscriptKind::GeminiSession { whole_file, .. } => *whole_file,
            _ => false,
        }
    }

    /// Whether it was written within `window_s` seconds before `now_ms` (unix ms).
    pub fn modified_within(&self, now_ms: i64, window_s: u64) -> bool {
        let window_ms = i64::try_from(window_s.saturating_mul(1000)).unwrap_or(i64::MAX);
        now_ms.saturating_sub(self.mtime_ms) <= window_ms
    }
}

/// The transcripts found, and what could not be looked at (named, never silently skipped).
#[derive(Debug, Default)]
pub struct Discovery {
    /// Sorted by path.
    pub transcripts: Vec<Transcript>,
    /// Directories or files that could not be read, with the reason.
    pub problems: Vec<String>,
}

impl Discovery {
    fn sorted(mut self) -> Self {
        self.transcripts.sort_by(|a, b| a.path.cmp(&b.path));
        self
    }
}

/// Every agent's transcripts under a directory given by hand (`agentwatch detect DIR`):
///
/// - an agent's own directory: a Claude configuration directory (with `projects/`), a Codex
///   home (with `sessions/` or `archived_sessions/`), a Gemini directory (with `tmp/`, or
///   `.gemini/tmp/` under a `GEMINI_CLI_HOME`), each listed as the live source lists it;
/// - else a directory inside one: rollouts under it to the depth of `sessions/YYYY/MM/DD/`,
///   a Gemini project (`tmp/<project>` or its `chats/`, or every project of `tmp/`), a Claude
///   project directory (its `.jsonl` files not already an other agent's), or, with none of
///   these, every Claude project directory in it (`projects/`).
///
/// Sorted by path; what could not be read is a problem, named.
pub fn discover_under(dir: &Path) -> Discovery {
    let mut found = Discovery::default();
    let merge = |listed: io::Result<Discovery>, found: &mut Discovery| match listed {
        Ok(listed) => {
            found.transcripts.extend(listed.transcripts);
            found.problems.extend(listed.problems);
        }
        Err(e) => found.problems.push(e.to_string()),
    };
    let mut homes = 0;
    if dir.join("projects").is_dir() {
        merge(discover_claude(dir), &mut found);
        homes += 1;
    }
    if dir.join("sessions").is_dir() || dir.join("archived_sessions").is_dir() {
        merge(discover_codex(dir), &mut found);
        homes += 1;
    }
    for gemini in [dir.to_path_buf(), dir.join(".gemini")] {
        if gemini.join("tmp").is_dir() {
            merge(discover_gemini(&gemini), &mut found);
            homes += 1;
        }
    }
    if homes == 0 {
        discover_inside(dir, &mut found);
    }
    found.sorted()
}

/// [`discover_under`] for a directory inside an agent's own.
fn discover_inside(dir: &Path, found: &mut Discovery) {
    codex::discover_rollouts_in(dir, found);
    gemini::discover_gemini_in(dir, found);
    let others: std::collections::HashSet<PathBuf> =
        found.transcripts.iter().map(|t| t.path.clone()).collect();
    let mut project = discover_claude_project(dir);
    project.transcripts.retain(|t| !others.contains(&t.path));
    let is_project = !project.transcripts.is_empty() || !project.problems.is_empty();
    found.transcripts.extend(project.transcripts);
    found.problems.extend(project.problems);
    if is_project || !others.is_empty() {
        return;
    }
    for entry in entries(dir, found).unwrap_or_default() {
        if is_dir(&entry) {
            let project = discover_claude_project(&entry.path());
            found.transcripts.extend(project.transcripts);
            found.problems.extend(project.problems);
        }
    }
}

/// What the path of a transcript of `agent` given by hand says of it: a Claude subagent's
/// ids from its name and its type from the `agent-<id>.meta.json` beside it, a Codex
/// rollout's thread id, a Gemini session's ids and project directory
/// ([`gemini_file_at`]).
pub fn placement_at(agent: TranscriptAgent, path: &Path) -> Placement {
    let name = path.to_string_lossy();
    match Placement::of(agent, Some(&name), &[]) {
        Placement::Claude(FileKind::Subagent {
            agent_id: Some(agent_id),
            parent_session_id,
            ..
        }) => {
            let meta = path.with_file_name(format!("agent-{agent_id}.meta.json"));
            Placement::Claude(FileKind::Subagent {
                agent_type: read_subagent_meta(&meta).ok().and_then(|m| m.agent_type),
                agent_id: Some(agent_id),
                parent_session_id,
            })
        }
        Placement::Gemini(_) => Placement::Gemini(gemini_file_at(path)),
        placement => placement,
    }
}

fn push_file(path: PathBuf, kind: TranscriptKind, found: &mut Discovery) {
    match std::fs::metadata(&path) {
        Ok(meta) if meta.is_file() => {
            let mtime_ms = meta
                .modified()
                .ok()
                .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
                .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
            found.transcripts.push(Transcript {
                path,
                kind,
                size: meta.len(),
                mtime_ms,
            });
        }
        Ok(_) => {}
        Err(e) => found.problems.push(format!("{}: {e}", path.display())),
    }
}

/// The entries of `dir`; `None` (and no problem) when it does not exist, `None` and a problem
/// when it cannot be read.
fn entries(dir: &Path, found: &mut Discovery) -> Option<Vec<std::fs::DirEntry>> {
    match std::fs::read_dir(dir) {
        Ok(entries) => Some(
            entries
                .filter_map(|e| match e {
                    Ok(e) => Some(e),
                    Err(e) => {
                        found.problems.push(format!("{}: {e}", dir.display()));
                        None
                    }
                })
                .collect(),
        ),
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(e) => {
            found.problems.push(format!("{}: {e}", dir.display()));
            None
        }
    }
}

fn is_dir(entry: &std::fs::DirEntry) -> bool {
    entry.file_type().is_ok_and(|t| t.is_dir())
}

/// A whole transcript, decompressed when its name ends with `.zst` (a cold Codex rollout), at
/// most `max_bytes` (after decompression): a larger one is an error naming the file, never
/// a silent cut.
pub fn read_transcript(path: &Path, max_bytes: u64) -> io::Result<Vec<u8>> {
    let file = std::fs::File::open(path)?;
    let compressed = path.extension().is_some_and(|e| e == "zst");
    let mut bytes = Vec::new();
    let limit = max_bytes.saturating_add(1);
    let read = if compressed {
        let decoder = zstd::stream::read::Decoder::new(file)?;
        decoder.take(limit).read_to_end(&mut bytes)
    } else {
        file.take(limit).read_to_end(&mut bytes)
    };
    read.map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
    if bytes.len() as u64 > max_bytes {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{}: larger than {max_bytes} bytes", path.display()),
        ));
    }
    Ok(bytes)
}

/// The first complete lines of a transcript, at most `max_bytes` (decompressed when `.zst`).
fn read_head(path: &Path, max_bytes: u64) -> io::Result<Vec<u8>> {
    let file = std::fs::File::open(path)?;
    let mut bytes = Vec::new();
    if path.extension().is_some_and(|e| e == "zst") {
        zstd::stream::read::Decoder::new(file)?
            .take(max_bytes)
            .read_to_end(&mut bytes)?;
    } else {
        file.take(max_bytes).read_to_end(&mut bytes)?;
    }
    if bytes.len() as u64 == max_bytes {
        let end = bytes.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
        bytes.truncate(end);
    }
    Ok(bytes)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::io::Write;

    /// Write `text` to `path`, creating its directories.
    pub(crate) fn touch(path: &Path, text: &str) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    #[test]
    fn a_compressed_transcript_reads_whole_and_a_cap_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rollout-x.jsonl.zst");
        let text = b"{\"a\":1}\n{\"b\":2}\n".repeat(100);
        let mut encoder =
            zstd::stream::write::Encoder::new(std::fs::File::create(&path).unwrap(), 3).unwrap();
        encoder.write_all(&text).unwrap();
        encoder.finish().unwrap();
        assert_eq!(read_transcript(&path, 1 << 20).unwrap(), text);
        let err = read_transcript(&path, 100).unwrap_err();
        assert!(err.to_string().contains("larger than 100 bytes"), "{err}");
        assert_eq!(read_head(&path, 20).unwrap(), b"{\"a\":1}\n{\"b\":2}\n");
        let plain = dir.path().join("p.jsonl");
        std::fs::write(&plain, b"{}\n{\"half").unwrap();
        assert_eq!(read_transcript(&plain, 100).unwrap(), b"{}\n{\"half");
        std::fs::write(dir.path().join("bad.zst"), b"not zstd").unwrap();
        assert!(read_transcript(&dir.path().join("bad.zst"), 100).is_err());
    }
}
