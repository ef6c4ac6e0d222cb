//! What an agent's newest transcripts say of the versions that wrote them ([`survey`]), for
//! `agentwatch doctor`: the agent versions read, and the record types the readers do not know
//! (a new version's records show there before they are missed). Bounded: the `newest` most
//! recently written transcripts, each read whole through [`crate::read_whole`] (the reader of
//! every other entry) up to `max_bytes`.

use crate::discover::Transcript;
use crate::whole::{decompressed, read_whole};
use std::collections::BTreeMap;
use std::io::{BufReader, Read};

/// What the transcripts read said.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Survey {
    /// Transcripts read.
    pub read: usize,
    /// How many of them each version wrote (its latest line's, for Claude Code).
    pub versions: BTreeMap<String, usize>,
    /// Read, but no record named its version (Gemini writes none; Codex's bare era neither).
    pub unversioned: usize,
    /// Records of types the readers do not know, by type, over every transcript read.
    pub unknown_types: BTreeMap<String, u64>,
    /// Transcripts that could not be read, with why.
    pub failed: Vec<String>,
}

/// The `newest` most recently written of `transcripts`, each read whole (at most `max_bytes`
/// of it: a longer one is read as far as that).
pub fn survey(transcripts: &[Transcript], newest: usize, max_bytes: u64) -> Survey {
    let mut recent: Vec<&Transcript> = transcripts.iter().collect();
    recent.sort_by(|a, b| {
        b.mtime_ms
            .cmp(&a.mtime_ms)
            .then_with(|| a.path.cmp(&b.path))
    });
    let mut found = Survey::default();
    for transcript in recent.into_iter().take(newest) {
        let read = std::fs::File::open(&transcript.path)
            .and_then(|file| decompressed(BufReader::new(file.take(max_bytes))))
            .and_then(|reader| read_whole(transcript.placement(None), reader, max_bytes));
        match read {
            Ok(whole) => {
                found.read += 1;
                match whole.version {
                    Some(version) => *found.versions.entry(version).or_default() += 1,
                    None => found.unversioned += 1,
                }
                for (kind, n) in whole.counters.unknown_types {
                    *found.unknown_types.entry(kind).or_default() += n;
                }
            }
            Err(e) => found
                .failed
                .push(format!("{}: {e}", transcript.path.display())),
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::discover::discover_claude;
    use crate::discover::tests::touch;

    #[test]
    fn the_newest_transcripts_name_their_versions_and_unknown_types() {
        let dir = tempfile::tempdir().unwrap();
        let line = |version: &str, kind: &str| {
            format!(
                "{{\"type\":\"{kind}\",\"sessionId\":\"s\",\"version\":\"{version}\",\"uuid\":\"u\"}}\n"
            )
        };
        let old = dir.path().join("projects/-p/old.jsonl");
        touch(&old, &line("1.0.51", "user"));
        let past = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
        std::fs::File::options()
            .append(true)
            .open(&old)
            .unwrap()
            .set_modified(past)
            .unwrap();
        for (name, version) in [("a", "2.1.39"), ("b", "2.1.39"), ("c", "2.1.400")] {
            let text = line(version, "user") + &line(version, "a-new-record") + "not json\n";
            touch(&dir.path().join(format!("projects/-p/{name}.jsonl")), &text);
        }
        let found = discover_claude(dir.path()).unwrap();
        let survey = survey(&found.transcripts, 3, 1 << 20);
        assert_eq!(survey.read, 3);
        let versions: Vec<(&str, usize)> = survey
            .versions
            .iter()
            .map(|(v, n)| (v.as_str(), *n))
            .collect();
        assert_eq!(
            versions,
            [("2.1.39", 2), ("2.1.400", 1)],
            "the oldest is not read"
        );
        assert_eq!(survey.unknown_types["a-new-record"], 3);
        assert!(survey.failed.is_empty());
        let all = super::survey(&found.transcripts, 10, 1 << 20);
        assert_eq!(all.versions["1.0.51"], 1);
    }
}
