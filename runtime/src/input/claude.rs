//! Claude Code's sessions as fixtures (`agentwatch export-fixture --claude`, and the scrub
//! `import-export` applies to every agent's transcripts): read as `detect` reads them
//! (`input::transcripts`), labelled, with their subagents, scrubbed.

use crate::error::Error;
use agentwatch_opencode::db::{DbError, Labels, scrub::scrub_session};
use detect_core::{DetectConfig, Session, SessionFile, judge_session};
use std::collections::{HashMap, HashSet};

/// Sessions of Claude Code transcripts as a fixture keeps them: every string the detector does
/// not read hashed, paths and commands kept, as `export-fixture` scrubs a database's sessions
/// ([`scrub_session`]); each one's own verdict under `config` is checked unchanged by it.
pub fn scrubbed(sessions: Vec<Session>, config: &DetectConfig) -> Result<Vec<Session>, Error> {
    sessions
        .into_iter()
        .map(|raw| {
            let clean = scrub_session(&raw, config);
            let before = judge_session(&raw, None, config);
            let after = judge_session(&clean, None, config);
            if before.flagged != after.flagged
                || before.signals != after.signals
                || before.reason.calls_since_landed != after.reason.calls_since_landed
            {
                return Err(Error::from(DbError::ScrubChangedVerdict {
                    id: raw.id,
                    detail: format!("raw: {}; scrubbed: {}", before.summary(), after.summary()),
                }));
            }
            Ok(clean)
        })
        .collect()
}

/// `agentwatch export-fixture --claude PATH…`: the labelled sessions of the transcripts at
/// `paths` (files or directories, read as `detect` reads them) with all their descendants
/// (subagents), in the order read, labelled and scrubbed ([`scrubbed`]). Every labelled id must
/// be there, and every labelled session must have a tool call to judge.
pub fn claude_fixture(
    paths: &[String],
    labels: &Labels,
    config: &DetectConfig,
) -> Result<SessionFile, Error> {
    let sessions = super::read_sessions(paths)?;
    let known: HashSet<&str> = sessions.iter().map(|s| s.id.as_str()).collect();
    let missing: Vec<String> = labels
        .keys()
        .filter(|id| !known.contains(id.as_str()))
        .cloned()
        .collect();
    if !missing.is_empty() {
        return Err(Error::from(DbError::UnknownSessions {
            path: paths.join(", "),
            ids: missing,
        }));
    }
    let parent_of: HashMap<&str, &str> = sessions
        .iter()
        .filter_map(|s| Some((s.id.as_str(), s.parent_id.as_deref()?)))
        .collect();
    // A session goes when it or an ancestor is labelled (a parent cycle ends the walk).
    let wanted = |id: &str| {
        let mut at = Some(id);
        (0..=sessions.len()).any(|_| match at {
            Some(id) if labels.contains_key(id) => true,
            Some(id) => {
                at = parent_of.get(id).copied();
                false
            }
            None => false,
        })
    };
    let keep: Vec<bool> = sessions.iter().map(|s| wanted(&s.id)).collect();
    let mut chosen = Vec::new();
    for (mut session, keep) in sessions.into_iter().zip(keep) {
        if !keep {
            continue;
        }
        if let Some(entry) = labels.get(&session.id) {
            if session.calls.iter().all(|c| !c.status.is_counted()) {
                return Err(Error::from(DbError::NoCalls { id: session.id }));
            }
            session.label = entry.label;
            session.note.clone_from(&entry.note);
        }
        chosen.push(session);
    }
    Ok(SessionFile::new(scrubbed(chosen, config)?))
}

#[cfg(test)]
mod tests {
    use super::super::{Format, detect_files, read_sessions, sessions_from_text};
    use super::*;
    use agentwatch_transcripts::{TranscriptKind, discover_claude, read_claude_sessions};
    use detect_core::{Profile, judge_sessions};
    use std::path::Path;

    const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/claude/2.1.328");

    fn scenario(name: &str) -> String {
        format!("{FIXTURES}/{name}")
    }

    /// Every main transcript of the fixtures.
    fn main_files() -> Vec<std::path::PathBuf> {
        ["loop", "healthy", "subagent"]
            .into_iter()
            .flat_map(|name| {
                discover_claude(Path::new(&scenario(name)))
                    .unwrap()
                    .transcripts
            })
            .filter(|t| matches!(t.kind, TranscriptKind::ClaudeMain { .. }))
            .map(|t| t.path)
            .collect()
    }

    /// A file, or a directory, reads as the adapter reads each of its transcripts, and judges as
    /// the batch judgement of those sessions, under every profile.
    #[test]
    fn transcripts_read_as_the_adapter_reads_them_and_judge_as_the_batch() {
        for file in main_files() {
            let bytes = std::fs::read(&file).unwrap();
            let name = file.to_string_lossy().into_owned();
            let adapter = read_claude_sessions(&bytes, &name).unwrap();
            assert_eq!(read_sessions(std::slice::from_ref(&name)).unwrap(), adapter);
            let text = String::from_utf8(bytes).unwrap();
            let from_text = sessions_from_text("t", &text).unwrap();
            assert_eq!(from_text.len(), 1);
            assert_eq!(
                from_text[0].calls, adapter[0].calls,
                "standard input's read"
            );
        }
        for name in ["loop", "healthy", "subagent"] {
            let paths = [scenario(name)];
            let sessions = read_sessions(&paths).unwrap();
            assert!(!sessions.is_empty());
            for profile in Profile::ALL {
                let config = DetectConfig::with_profile(profile);
                let detection = detect_files(&paths, &config).unwrap();
                assert_eq!(
                    detection.judgement,
                    judge_sessions(&sessions, &config),
                    "{name}"
                );
                for (read, session) in detection.sessions.iter().zip(&sessions) {
                    assert_eq!(read.format, Format::ClaudeTranscript);
                    assert_eq!(read.calls, session.calls.len());
                }
            }
        }
    }

    /// `first_flag_at_call` is the shortest prefix of a session's own calls the batch judgement
    /// flags, on every fixture session and the sample, under every profile.
    #[test]
    fn the_first_flagged_call_is_the_first_flagged_prefix() {
        let sample = concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/sample.json");
        let paths = [
            scenario("loop"),
            scenario("healthy"),
            scenario("subagent"),
            sample.to_owned(),
        ];
        let sessions = read_sessions(&paths).unwrap();
        let mut flagged = 0;
        for profile in Profile::ALL {
            let config = DetectConfig::with_profile(profile);
            let detection = detect_files(&paths, &config).unwrap();
            for (read, session) in detection.sessions.iter().zip(&sessions) {
                let first = (1..=session.calls.len()).find(|&k| {
                    let mut prefix = session.clone();
                    prefix.calls.truncate(k);
                    judge_session(&prefix, None, &config).flagged
                });
                assert_eq!(read.first_flag_at_call, first, "{} {profile:?}", session.id);
                flagged += usize::from(first.is_some());
            }
        }
        assert!(
            flagged >= 6,
            "the loops flag under every profile: {flagged}"
        );
    }

    #[test]
    fn a_directory_without_transcripts_or_a_bad_label_is_an_error_naming_it() {
        let dir = std::env::temp_dir().join(format!("aw-claude-none-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("todos")).unwrap();
        let paths = [dir.to_string_lossy().into_owned()];
        let none = read_sessions(&paths).unwrap_err();
        assert!(matches!(none, Error::NoInput(_)), "{none}");
        assert!(none.to_string().contains(&paths[0]), "{none}");
        std::fs::remove_dir_all(&dir).unwrap();
        let labels: Labels = [("nope".to_owned(), Default::default())].into();
        let unknown =
            claude_fixture(&[scenario("loop")], &labels, &DetectConfig::default()).unwrap_err();
        assert!(unknown.to_string().contains("nope"), "{unknown}");
    }
}
