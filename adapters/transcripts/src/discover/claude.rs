//! Claude Code's transcripts under its config directory.

use super::{Discovery, TranscriptKind, push_file};
use serde::Deserialize;
use std::io;
use std::path::Path;

/// Bytes of a `.meta.json` read at most.
const META_MAX_BYTES: u64 = 64 * 1024;

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
    Ok(found.sorted())
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
    use crate::discover::TranscriptKind;
    use crate::discover::tests::touch;

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
