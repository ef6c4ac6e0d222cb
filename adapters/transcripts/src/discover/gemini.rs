//! Gemini CLI's sessions under `$GEMINI_CLI_HOME/.gemini` (or `~/.gemini`).

use super::{Discovery, TranscriptKind, entries, is_dir, push_file, read_head};
use crate::gemini::{GeminiFile, record::parse_line};
use std::collections::HashMap;
use std::io;
use std::path::Path;

/// Bytes of a session read at most for its first line (the metadata is short).
const HEAD_BYTES: u64 = 64 * 1024;
/// Bytes of `.project_root` and `projects.json` read at most.
const SMALL_FILE_BYTES: u64 = 1 << 20;

/// List the sessions under a Gemini directory (`~/.gemini`: the caller passes
/// `$GEMINI_CLI_HOME/.gemini` when that is set): every `tmp/<project>/chats/session-*.jsonl`
/// and older `session-*.json`, and the subagents' `chats/<parent>/<id>.jsonl`. A missing
/// directory has none; an unreadable one is a [`Discovery::problems`] entry.
pub fn discover_gemini(gemini_dir: &Path) -> io::Result<Discovery> {
    let mut found = Discovery::default();
    let roots = project_roots(gemini_dir);
    for project in entries(&gemini_dir.join("tmp"), &mut found).unwrap_or_default() {
        if !is_dir(&project) {
            continue;
        }
        let name = project.file_name().to_string_lossy().into_owned();
        let root = project_root_of(&project.path()).or_else(|| roots.get(&name).cloned());
        list_chats(&project.path().join("chats"), &name, root, &mut found);
    }
    Ok(found.sorted())
}

/// The sessions of a Gemini project directory given by hand (`tmp/<project>`, holding
/// `chats/`), or of its `chats/` itself, or of every project of a `tmp/` directory; whether
/// `dir` was one of these.
pub(super) fn discover_gemini_in(dir: &Path, found: &mut Discovery) -> bool {
    let name = |p: &Path| p.file_name().map(|n| n.to_string_lossy().into_owned());
    let project_of = |project: &Path, found: &mut Discovery| {
        let root = project_root_of(project);
        let project_name = name(project).unwrap_or_default();
        list_chats(&project.join("chats"), &project_name, root, found);
    };
    if dir.join("chats").is_dir() {
        project_of(dir, found);
        return true;
    }
    if name(dir).as_deref() == Some("chats")
        && let Some(project) = dir.parent()
    {
        project_of(project, found);
        return true;
    }
    let projects: Vec<_> = entries(dir, found)
        .unwrap_or_default()
        .into_iter()
        .filter(|e| is_dir(e) && e.path().join("chats").is_dir())
        .collect();
    for project in &projects {
        project_of(&project.path(), found);
    }
    !projects.is_empty()
}

/// A project's directory as `tmp/<project>/.project_root` names it.
fn project_root_of(project: &Path) -> Option<String> {
    read_small(&project.join(".project_root"))
        .map(|r| r.trim().to_owned())
        .filter(|r| !r.is_empty())
}

/// What the path of a Gemini session given by hand says of it ([`GeminiFile::from_path`]),
/// with its project's directory when it lies under `tmp/<project>/chats/`.
pub fn gemini_file_at(path: &Path) -> GeminiFile {
    let mut file = GeminiFile::from_path(&path.to_string_lossy());
    let chats = path
        .ancestors()
        .skip(1)
        .take(2)
        .find(|dir| dir.file_name().is_some_and(|n| n == "chats"));
    file.project_root = chats.and_then(Path::parent).and_then(project_root_of);
    file
}

fn list_chats(chats: &Path, project: &str, root: Option<String>, found: &mut Discovery) {
    for entry in entries(chats, found).unwrap_or_default() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if is_dir(&entry) {
            list_subagents(&entry.path(), project, &name, root.clone(), found);
            continue;
        }
        if !name.starts_with("session-") {
            continue;
        }
        let whole_file = match (name.ends_with(".jsonl"), name.ends_with(".json")) {
            (true, _) => false,
            (_, true) => true,
            _ => continue,
        };
        let kind = TranscriptKind::GeminiSession {
            project: project.to_owned(),
            project_root: root.clone(),
            whole_file,
        };
        push_file(entry.path(), kind, found);
    }
}

fn list_subagents(
    dir: &Path,
    project: &str,
    parent: &str,
    root: Option<String>,
    found: &mut Discovery,
) {
    for entry in entries(dir, found).unwrap_or_default() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(id) = name.strip_suffix(".jsonl").filter(|id| !id.is_empty()) else {
            continue;
        };
        let kind = TranscriptKind::GeminiSubagent {
            project: project.to_owned(),
            project_root: root.clone(),
            parent_session_id: parent.to_owned(),
            session_id: id.to_owned(),
        };
        push_file(entry.path(), kind, found);
    }
}

/// `projects.json` (`{"projects": {"/path/to/root": "slug"}}`) read backwards: slug to root.
fn project_roots(gemini_dir: &Path) -> HashMap<String, String> {
    let Some(text) = read_small(&gemini_dir.join("projects.json")) else {
        return HashMap::new();
    };
    let Ok(doc) = serde_json::from_str::<serde_json::Value>(&text) else {
        return HashMap::new();
    };
    doc.get("projects")
        .and_then(serde_json::Value::as_object)
        .into_iter()
        .flatten()
        .filter_map(|(root, slug)| Some((slug.as_str()?.to_owned(), root.clone())))
        .collect()
}

fn read_small(path: &Path) -> Option<String> {
    let bytes = read_head(path, SMALL_FILE_BYTES).ok()?;
    String::from_utf8(bytes).ok()
}

/// What a Gemini session's first line says of it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GeminiHead {
    pub session_id: Option<String>,
    /// `main` or `subagent`.
    pub kind: Option<String>,
    pub start_time: Option<String>,
}

/// A Gemini session's metadata line (its full session id: the file name holds only its
/// first 8 characters), read up to its first newline only, so a caller can ask of every file
/// each tick. A file's head never changes, so a caller can keep the answer for the file. An
/// older whole-file `.json` (pretty-printed: its first line is `{`) gives the `sessionId`
/// written near its start.
pub fn peek_gemini(path: &Path) -> io::Result<GeminiHead> {
    let mut head = Vec::new();
    let file = std::fs::File::open(path)?;
    io::BufRead::read_until(
        &mut io::BufReader::new(io::Read::take(file, HEAD_BYTES)),
        b'\n',
        &mut head,
    )?;
    let record = parse_line(head.trim_ascii());
    let mut found = record.map_or_else(GeminiHead::default, |r| GeminiHead {
        session_id: r.session_id.non_empty(),
        kind: r.kind.non_empty(),
        start_time: r.start_time.non_empty(),
    });
    if found.session_id.is_none() && path.extension().is_some_and(|e| e == "json") {
        found.session_id = document_session_id(&read_head(path, HEAD_BYTES)?);
    }
    Ok(found)
}

/// The value of the first `"sessionId"` key of a JSON document's head.
fn document_session_id(head: &[u8]) -> Option<String> {
    const KEY: &[u8] = b"\"sessionId\"";
    let at = head.windows(KEY.len()).position(|w| w == KEY)? + KEY.len();
    let rest = head[at..].trim_ascii_start().strip_prefix(b":")?;
    let mut values = serde_json::Deserializer::from_slice(rest).into_iter::<String>();
    values.next()?.ok().filter(|id| !id.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::discover::tests::touch;

    #[test]
    fn every_layout_is_found_with_its_project_root() {
        let dir = tempfile::tempdir().unwrap();
        let g = dir.path();
        let parent = "5475a6ad-a357-4c89-bcbc-add24189d9cb";
        let child = "de4578fa-e7d5-42d6-9ce3-991177c09ff7";
        touch(
            &g.join("projects.json"),
            r#"{"projects":{"/work/other":"other"}}"#,
        );
        touch(&g.join("tmp/project/.project_root"), "/work/project\n");
        touch(
            &g.join("tmp/project/chats/session-2026-12-06T02-09-5475a6ad.jsonl"),
            &format!(
                "{{\"sessionId\":\"{parent}\",\"projectHash\":\"h\",\"startTime\":\"t\",\"kind\":\"main\"}}\n"
            ),
        );
        touch(
            &g.join(format!("tmp/project/chats/{parent}/{child}.jsonl")),
            "{}\n",
        );
        touch(
            &g.join("tmp/other/chats/session-2025-09-01T10-00-abcd1234.json"),
            "{}",
        );
        touch(&g.join("tmp/other/chats/session-x.jsonl.unreadable-17"), "");
        touch(&g.join("tmp/other/logs.json"), "[]");
        touch(&g.join("tmp/background-processes/background-1.log"), "x");
        let found = discover_gemini(g).unwrap();
        assert!(found.problems.is_empty(), "{:?}", found.problems);
        let kinds: Vec<&TranscriptKind> = found.transcripts.iter().map(|t| &t.kind).collect();
        assert_eq!(
            kinds,
            [
                &TranscriptKind::GeminiSession {
                    project: "other".into(),
                    project_root: Some("/work/other".into()),
                    whole_file: true,
                },
                &TranscriptKind::GeminiSubagent {
                    project: "project".into(),
                    project_root: Some("/work/project".into()),
                    parent_session_id: parent.into(),
                    session_id: child.into(),
                },
                &TranscriptKind::GeminiSession {
                    project: "project".into(),
                    project_root: Some("/work/project".into()),
                    whole_file: false,
                },
            ]
        );
        assert!(found.transcripts[0].read_whole());
        let sub = &found.transcripts[1];
        assert_eq!(sub.session_id().as_deref(), Some(child));
        assert_eq!(sub.parent_session_id(), Some(parent));
        assert_eq!(sub.project_root(), Some("/work/project"));
        assert_eq!(
            sub.gemini_file(),
            crate::GeminiFile {
                session_id: Some(child.into()),
                parent_session_id: Some(parent.into()),
                project_root: Some("/work/project".into()),
            }
        );
        let main = &found.transcripts[2];
        assert_eq!(main.session_id(), None);
        assert_eq!(main.gemini_file().session_id, None);
        let pretty = g.join("tmp/other/chats/session-2025-09-01T10-00-abcd1234.json");
        touch(
            &pretty,
            "{\n  \"sessionId\" : \"abcd1234-0000\",\n  \"messages\": []\n}",
        );
        assert_eq!(
            peek_gemini(&pretty).unwrap().session_id.as_deref(),
            Some("abcd1234-0000"),
            "a whole-file session names itself near its start"
        );
        let head = peek_gemini(&main.path).unwrap();
        assert_eq!(head.session_id.as_deref(), Some(parent));
        assert_eq!(head.kind.as_deref(), Some("main"));
        assert!(
            discover_gemini(&g.join("nope"))
                .unwrap()
                .transcripts
                .is_empty()
        );
    }
}
