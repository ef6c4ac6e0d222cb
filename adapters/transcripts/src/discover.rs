//! Where the transcripts are.
//!
//! Claude Code (`agents.md` §1.1), under its config directory (`$CLAUDE_CONFIG_DIR` or
//! `~/.claude`: the caller resolves the environment and passes the path):
//!
//! - `projects/<project>/<session>.jsonl`: a session;
//! - `projects/<project>/<session>/subagents/agent-<id>.jsonl`: a subagent of that session,
//!   with `agent-<id>.meta.json` beside it naming the spawning call (`toolUseId`);
//! - `projects/<project>/agent-<id>.jsonl`: a subagent in the older flat layout (≤ 2.0), its
//!   parent session named only in its lines;
//! - `agent-acompact-*.jsonl` (compaction workers) are skipped.
//!
//! The project directory's name (a slug of the working directory) is never decoded: the
//! records' `cwd` is the truth. Each transcript comes with its size and modification time,
//! so a caller can skip files not written within its `stale_after_s` without opening them.

use crate::claude::{FileKind, subagent_session_id};
use serde::Deserialize;
use std::io;
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

/// Bytes of a `.meta.json` read at most.
const META_MAX_BYTES: u64 = 64 * 1024;

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
}

impl Transcript {
    /// The detector's id of the transcript's session, when the path tells it (a flat agent's
    /// parent is only in its lines: see [`crate::ClaudeReader::meta`]).
    pub fn session_id(&self) -> Option<String> {
        match &self.kind {
            TranscriptKind::ClaudeMain { session_id } => Some(session_id.clone()),
            TranscriptKind::ClaudeSubagent {
                parent_session_id,
                agent_id,
            } => Some(subagent_session_id(parent_session_id, agent_id)),
            TranscriptKind::ClaudeFlatAgent { .. } => None,
        }
    }

    /// The session that spawned this one, when the path tells it.
    pub fn parent_session_id(&self) -> Option<&str> {
        match &self.kind {
            TranscriptKind::ClaudeSubagent {
                parent_session_id, ..
            } => Some(parent_session_id),
            _ => None,
        }
    }

    /// The kind to read it with ([`crate::ClaudeReader::new`]); `agent_type` from the
    /// subagent's [`SubagentMeta`] when the caller read it.
    pub fn file_kind(&self, agent_type: Option<String>) -> FileKind {
        match &self.kind {
            TranscriptKind::ClaudeMain { session_id } => FileKind::Main {
                session_id: Some(session_id.clone()),
            },
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
        }
    }

    /// A subagent's `agent-<id>.meta.json` (current layout only).
    pub fn meta_path(&self) -> Option<PathBuf> {
        match &self.kind {
            TranscriptKind::ClaudeSubagent { agent_id, .. } => Some(
                self.path
                    .with_file_name(format!("agent-{agent_id}.meta.json")),
            ),
            _ => None,
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

/// List the Claude Code transcripts under `config_dir`. A missing directory (or one without
/// `projects/`) has none; an unreadable `projects/` is an error; an unreadable project or
/// file is a [`Discovery::problems`] entry.
pub fn discover_claude(config_dir: &Path) -> io::Result<Discovery> {
    let projects = config_dir.join("projects");
    let mut found = Discovery::default();
    let entries = match std::fs::read_dir(&projects) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(found),
        Err(e) => {
            return Err(io::Error::new(
                e.kind(),
                format!("{}: {e}", projects.display()),
            ));
        }
    };
    for entry in entries {
        match entry {
            Ok(entry) if entry.file_type().is_ok_and(|t| t.is_dir()) => {
                list_project(&entry.path(), &mut found);
            }
            Ok(_) => {}
            Err(e) => found.problems.push(format!("{}: {e}", projects.display())),
        }
    }
    found.transcripts.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(found)
}

/// [`discover_claude`] for one project directory (`projects/<project>/`): its sessions, their
/// subagents and its flat agents. An unreadable directory or file is a [`Discovery::problems`]
/// entry (`agentwatch detect` reads a project directory given by hand).
pub fn discover_claude_project(project: &Path) -> Discovery {
    let mut found = Discovery::default();
    list_project(project, &mut found);
    found.transcripts.sort_by(|a, b| a.path.cmp(&b.path));
    found
}

/// The sessions, flat agents and subagent directories of one project directory.
fn list_project(project: &Path, found: &mut Discovery) {
    let entries = match std::fs::read_dir(project) {
        Ok(entries) => entries,
        Err(e) => return found.problems.push(format!("{}: {e}", project.display())),
    };
    for entry in entries {
        let entry = match entry {
            Ok(entry) => entry,
            Err(e) => {
                found.problems.push(format!("{}: {e}", project.display()));
                continue;
            }
        };
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            let subagents = path.join("subagents");
            if subagents.is_dir() {
                list_subagents(&subagents, &name, found);
            }
            continue;
        }
        let kind = match name.strip_suffix(".jsonl") {
            Some(stem) => match agent_id(stem) {
                Some(Some(agent_id)) => TranscriptKind::ClaudeFlatAgent { agent_id },
                Some(None) => continue,
                None => TranscriptKind::ClaudeMain {
                    session_id: stem.to_owned(),
                },
            },
            None => continue,
        };
        push_file(path, kind, found);
    }
}

/// The subagents' transcripts of session `parent` (`<session>/subagents/`).
fn list_subagents(dir: &Path, parent: &str, found: &mut Discovery) {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) => return found.problems.push(format!("{}: {e}", dir.display())),
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(Some(agent_id)) = name.strip_suffix(".jsonl").and_then(agent_id) else {
            continue;
        };
        let kind = TranscriptKind::ClaudeSubagent {
            parent_session_id: parent.to_owned(),
            agent_id,
        };
        push_file(entry.path(), kind, found);
    }
}

/// For a file stem `agent-<id>`: `Some(Some(id))`, or `Some(None)` for a compaction worker
/// (`agent-acompact-…`, skipped); `None` for any other stem.
fn agent_id(stem: &str) -> Option<Option<String>> {
    let id = stem.strip_prefix("agent-")?;
    Some((!id.is_empty() && !id.starts_with("acompact-")).then(|| id.to_owned()))
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

/// A subagent's `agent-<id>.meta.json`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct SubagentMeta {
    /// The spawning `tool_use` id in the parent's transcript.
    pub tool_use_id: Option<String>,
    /// `general-purpose`, `Explore`, …
    pub agent_type: Option<String>,
    pub description: Option<String>,
}

/// Parse a `.meta.json`; an error names what is wrong.
pub fn parse_subagent_meta(bytes: &[u8]) -> Result<SubagentMeta, String> {
    #[derive(Deserialize, Default)]
    #[serde(default, rename_all = "camelCase")]
    struct Doc<'a> {
        #[serde(borrow)]
        tool_use_id: crate::lenient::Text<'a>,
        #[serde(borrow)]
        agent_type: crate::lenient::Text<'a>,
        #[serde(borrow)]
        description: crate::lenient::Text<'a>,
    }
    match serde_json::from_slice::<crate::lenient::Obj<Doc<'_>>>(bytes) {
        Ok(crate::lenient::Obj(Some(doc))) => Ok(SubagentMeta {
            tool_use_id: doc.tool_use_id.non_empty(),
            agent_type: doc.agent_type.non_empty(),
            description: doc.description.non_empty(),
        }),
        Ok(_) => Err("not a JSON object".to_owned()),
        Err(e) => Err(format!("not JSON: {e}")),
    }
}

/// Read a subagent's `.meta.json` (at most 64 KiB).
pub fn read_subagent_meta(path: &Path) -> io::Result<SubagentMeta> {
    use std::io::Read;
    let mut bytes = Vec::new();
    std::fs::File::open(path)?
        .take(META_MAX_BYTES)
        .read_to_end(&mut bytes)?;
    parse_subagent_meta(&bytes).map_err(|e| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{}: {e}", path.display()),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn touch(path: &Path, text: &str) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    #[test]
    fn every_documented_layout_is_found_and_compaction_workers_are_not() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("projects/-home-u-proj");
        touch(&p.join("s1.jsonl"), "{}\n");
        touch(&p.join("s1/subagents/agent-a1.jsonl"), "{}\n{}\n");
        touch(
            &p.join("s1/subagents/agent-a1.meta.json"),
            r#"{"agentType":"Explore","toolUseId":"toolu_9","description":"look"}"#,
        );
        touch(&p.join("s1/subagents/agent-acompact-x1.jsonl"), "{}\n");
        touch(&p.join("s1/tool-results/t.txt"), "out");
        touch(&p.join("agent-old7.jsonl"), "{}\n");
        touch(&p.join("agent-acompact-old.jsonl"), "{}\n");
        touch(&p.join("notes.txt"), "x");
        touch(&dir.path().join("projects/-other/s2.jsonl"), "");
        let found = discover_claude(dir.path()).unwrap();
        assert!(found.problems.is_empty(), "{:?}", found.problems);
        let kinds: Vec<(String, TranscriptKind)> = found
            .transcripts
            .iter()
            .map(|t| {
                let rel = t.path.strip_prefix(dir.path()).unwrap();
                (rel.display().to_string(), t.kind.clone())
            })
            .collect();
        assert_eq!(
            kinds,
            [
                (
                    "projects/-home-u-proj/agent-old7.jsonl".to_owned(),
                    TranscriptKind::ClaudeFlatAgent {
                        agent_id: "old7".into()
                    }
                ),
                (
                    "projects/-home-u-proj/s1/subagents/agent-a1.jsonl".to_owned(),
                    TranscriptKind::ClaudeSubagent {
                        parent_session_id: "s1".into(),
                        agent_id: "a1".into()
                    }
                ),
                (
                    "projects/-home-u-proj/s1.jsonl".to_owned(),
                    TranscriptKind::ClaudeMain {
                        session_id: "s1".into()
                    }
                ),
                (
                    "projects/-other/s2.jsonl".to_owned(),
                    TranscriptKind::ClaudeMain {
                        session_id: "s2".into()
                    }
                ),
            ]
        );
        let sub = &found.transcripts[1];
        assert_eq!(sub.size, 6);
        assert_eq!(sub.session_id().as_deref(), Some("s1:agent-a1"));
        assert_eq!(sub.parent_session_id(), Some("s1"));
        let meta = read_subagent_meta(&sub.meta_path().unwrap()).unwrap();
        assert_eq!(meta.tool_use_id.as_deref(), Some("toolu_9"));
        assert_eq!(meta.agent_type.as_deref(), Some("Explore"));
        assert_eq!(found.transcripts[0].session_id(), None);
        let project = discover_claude_project(&p);
        assert_eq!(
            project.transcripts,
            found.transcripts[..3],
            "a project directory alone lists what the config directory lists under it"
        );
        assert!(sub.mtime_ms > 0);
        assert!(sub.modified_within(sub.mtime_ms + 5_000, 5));
        assert!(!sub.modified_within(sub.mtime_ms + 5_001, 5));
    }

    #[test]
    fn a_missing_config_dir_has_no_transcripts() {
        let dir = tempfile::tempdir().unwrap();
        let found = discover_claude(&dir.path().join("nope")).unwrap();
        assert!(found.transcripts.is_empty() && found.problems.is_empty());
    }

    #[test]
    fn a_bad_meta_file_is_an_error_naming_it() {
        assert!(parse_subagent_meta(b"[1]").unwrap_err().contains("object"));
        assert!(
            parse_subagent_meta(b"{")
                .unwrap_err()
                .starts_with("not JSON")
        );
        assert_eq!(
            parse_subagent_meta(br#"{"toolUseId":5,"agentType":"x"}"#).unwrap(),
            SubagentMeta {
                agent_type: Some("x".into()),
                ..SubagentMeta::default()
            }
        );
    }
}
