//! A whole transcript of any agent read into its sessions ([`read_whole`]): the one way a file
//! is read to its end, whatever it was given as (`agentwatch detect FILE`, a directory,
//! standard input, `import-export`, `export-fixture`, `doctor`), through the same readers the
//! live sources tail ([`ClaudeReader`], [`CodexReader`], [`GeminiReader`]), so each entry
//! gives the same sessions and calls. Which agent wrote it is [`crate::identify`]'s answer;
//! what its place says of it is a [`Placement`].

use crate::claude::{ClaudeReader, FileKind};
use crate::codex::CodexReader;
use crate::common::Counters;
use crate::gemini::{GeminiFile, GeminiReader};
use crate::sniff::TranscriptAgent;
use detect_core::Session;
use std::io::{self, BufRead, Read};

/// What the place a transcript was read from says of it, for its agent's reader: a Claude
/// Code file's kind (a session's, or a subagent's and whose), a Codex rollout's thread id, a
/// Gemini session's ids and project directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Placement {
    Claude(FileKind),
    Codex { thread_id: Option<String> },
    Gemini(GeminiFile),
}

impl Placement {
    /// What a name says of `agent`'s file (a path or a file name: see
    /// [`FileKind::from_file_name`], [`crate::codex_thread_id`], [`GeminiFile::from_path`]);
    /// without one (standard input), what its first lines (`head`) say: a Claude Code
    /// subagent's transcript is told by its first conversation line ([`claude_kind_of_lines`]).
    pub fn of(agent: TranscriptAgent, name: Option<&str>, head: &[u8]) -> Self {
        match (agent, name) {
            (TranscriptAgent::Claude, Some(name)) => Self::Claude(FileKind::from_file_name(name)),
            (TranscriptAgent::Claude, None) => Self::Claude(claude_kind_of_lines(head)),
            (TranscriptAgent::Codex, name) => Self::Codex {
                thread_id: name.and_then(crate::codex_thread_id),
            },
            (TranscriptAgent::Gemini, name) => {
                Self::Gemini(name.map(GeminiFile::from_path).unwrap_or_default())
            }
        }
    }

    pub fn agent(&self) -> TranscriptAgent {
        match self {
            Self::Claude(_) => TranscriptAgent::Claude,
            Self::Codex { .. } => TranscriptAgent::Codex,
            Self::Gemini(_) => TranscriptAgent::Gemini,
        }
    }
}

/// The kind of a Claude Code transcript known only by its lines: a subagent's when its first
/// conversation line (`user` or `assistant`) is a sidechain's with an `agentId` (a subagent's
/// own file begins with its prompt; a session's file with inline sidechains begins with the
/// session's own lines), else a session's. Its ids come from the lines.
pub fn claude_kind_of_lines(head: &[u8]) -> FileKind {
    #[derive(serde::Deserialize, Default)]
    #[serde(default)]
    struct Probe<'a> {
        #[serde(rename = "type", borrow)]
        kind: crate::lenient::Text<'a>,
        #[serde(rename = "isSidechain")]
        is_sidechain: crate::lenient::Flag,
        #[serde(rename = "agentId", borrow)]
        agent_id: crate::lenient::Text<'a>,
    }
    let first = crate::common::file_lines(head)
        .filter(|l| crate::common::may_be_object(l))
        .filter_map(|l| {
            serde_json::from_slice::<crate::lenient::Obj<Probe<'_>>>(l)
                .ok()?
                .0
        })
        .find(|p| matches!(p.kind.as_str(), Some("user" | "assistant")));
    match first {
        Some(p) if p.is_sidechain.0 == Some(true) && p.agent_id.non_empty().is_some() => {
            FileKind::Subagent {
                agent_id: None,
                parent_session_id: None,
                agent_type: None,
            }
        }
        _ => FileKind::Main { session_id: None },
    }
}

/// What a whole transcript gave.
#[derive(Debug, Clone, PartialEq)]
pub struct WholeTranscript {
    pub agent: TranscriptAgent,
    /// Its sessions with every call: the file's own first, then (Claude Code) its inline
    /// sidechains. Calls left without a result are kept with status `running`.
    pub sessions: Vec<Session>,
    /// What its reader counted (lines skipped, calls without a result, …).
    pub counters: Counters,
    /// The agent's version that wrote it, when its records say (Claude Code's `version` of
    /// its latest line, Codex's `cli_version`; Gemini writes none).
    pub version: Option<String>,
}

/// Read a whole transcript placed at `placement` from `reader`, line by line (a Gemini
/// session whole, at most `max_bytes`: its older `.json` is one document). A last line
/// without its newline is read when it is whole; a torn or corrupt line is skipped and
/// counted. Only a failing read is an error; a file of metadata records only is a session
/// without calls.
pub fn read_whole(
    placement: Placement,
    reader: impl BufRead,
    max_bytes: u64,
) -> io::Result<WholeTranscript> {
    match placement {
        Placement::Claude(kind) => {
            let mut claude = ClaudeReader::new(kind);
            each_line(reader, |line| claude.push_line(line))?;
            claude.finish();
            let meta = claude.meta().clone();
            Ok(WholeTranscript {
                agent: TranscriptAgent::Claude,
                sessions: claude.take_sessions(),
                counters: meta.counters,
                version: meta.version,
            })
        }
        Placement::Codex { thread_id } => {
            let mut codex = CodexReader::new(thread_id);
            each_line(reader, |line| codex.push_line(line))?;
            codex.finish();
            let meta = codex.meta().clone();
            Ok(WholeTranscript {
                agent: TranscriptAgent::Codex,
                sessions: vec![codex.take_session()],
                counters: meta.counters,
                version: meta.cli_version,
            })
        }
        Placement::Gemini(file) => {
            let bytes = read_capped(reader, max_bytes)?;
            let mut gemini = GeminiReader::new(file);
            gemini.push_whole(&bytes);
            gemini.finish();
            let session = gemini.take_session();
            Ok(WholeTranscript {
                agent: TranscriptAgent::Gemini,
                sessions: vec![session],
                counters: gemini.meta().counters.clone(),
                version: None,
            })
        }
    }
}

/// The first bytes of a zstd frame (a Codex rollout compressed when cold, `.jsonl.zst`).
const ZSTD_MAGIC: [u8; 4] = [0x28, 0xB5, 0x2F, 0xFD];

/// `reader`, decompressed when it is zstd (told by its first bytes, so a compressed rollout
/// reads alike from a file, a directory or standard input).
pub fn decompressed<'a>(
    mut reader: impl BufRead + Send + 'a,
) -> io::Result<Box<dyn BufRead + Send + 'a>> {
    let head = reader.fill_buf()?;
    if head.starts_with(&ZSTD_MAGIC) {
        let decoder = zstd::stream::read::Decoder::with_buffer(reader)?;
        return Ok(Box::new(io::BufReader::with_capacity(1 << 16, decoder)));
    }
    Ok(Box::new(reader))
}

/// Each line of `reader`, without its `\n` (and a `\r` before it).
fn each_line(mut reader: impl BufRead, mut push: impl FnMut(&[u8])) -> io::Result<()> {
    let mut line = Vec::new();
    loop {
        line.clear();
        if reader.read_until(b'\n', &mut line)? == 0 {
            return Ok(());
        }
        let text = line.strip_suffix(b"\n").unwrap_or(&line);
        push(text.strip_suffix(b"\r").unwrap_or(text));
    }
}

/// All of `reader`, at most `max_bytes`: a larger one is an error, never a silent cut.
fn read_capped(reader: impl Read, max_bytes: u64) -> io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    reader
        .take(max_bytes.saturating_add(1))
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max_bytes {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("larger than {max_bytes} bytes"),
        ));
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_claude_subagent_on_standard_input_is_told_by_its_first_conversation_line() {
        let sub =
            br#"{"type":"user","isSidechain":true,"agentId":"a1","sessionId":"p","uuid":"u"}"#;
        assert!(matches!(
            claude_kind_of_lines(sub),
            FileKind::Subagent { agent_id: None, .. }
        ));
        let main = b"{\"type\":\"file-history-snapshot\",\"messageId\":\"m\"}\n{\"type\":\"user\",\"isSidechain\":false,\"sessionId\":\"p\"}\n";
        assert_eq!(
            claude_kind_of_lines(main),
            FileKind::Main { session_id: None }
        );
        let inline = b"{\"type\":\"user\",\"isSidechain\":true,\"uuid\":\"u\"}\n";
        assert_eq!(
            claude_kind_of_lines(inline),
            FileKind::Main { session_id: None }
        );
    }

    /// A file of metadata records only (an agent opened and left) is told by them and read
    /// as a session without calls: never an error.
    #[test]
    fn a_file_of_metadata_records_only_is_a_session_without_calls() {
        for (what, text, id) in [
            (
                "claude: file-history-snapshots",
                "{\"type\":\"file-history-snapshot\",\"messageId\":\"m1\",\"snapshot\":{\"messageId\":\"m1\",\"trackedFileBackups\":{},\"timestamp\":\"2026-02-12T16:01:02.000Z\"},\"isSnapshotUpdate\":false}\n",
                "",
            ),
            (
                "claude: a summary, a queue operation",
                "{\"type\":\"summary\",\"summary\":\"s\",\"leafUuid\":\"l\"}\n{\"type\":\"queue-operation\",\"operation\":\"enqueue\",\"sessionId\":\"s1\",\"timestamp\":\"t\"}\n",
                "s1",
            ),
            (
                "codex: session_meta",
                "{\"timestamp\":\"t\",\"type\":\"session_meta\",\"payload\":{\"id\":\"th1\",\"cli_version\":\"0.169.0\"}}\n",
                "th1",
            ),
            (
                "codex: the bare-era first line",
                "{\"id\":\"th2\",\"timestamp\":\"2025-08-01T10:00:00.000Z\",\"instructions\":null}\n{\"record_type\":\"state\"}\n",
                "th2",
            ),
            (
                "gemini: the metadata line",
                "{\"sessionId\":\"g1\",\"projectHash\":\"h\",\"startTime\":\"t\",\"kind\":\"main\"}\n{\"$set\":{\"lastUpdated\":\"t\"}}\n",
                "g1",
            ),
        ] {
            let agent = crate::identify(text.as_bytes()).unwrap_or_else(|e| panic!("{what}: {e}"));
            let placement = Placement::of(agent, None, text.as_bytes());
            let whole = read_whole(placement, text.as_bytes(), 1 << 20).unwrap();
            assert_eq!(whole.sessions.len(), 1, "{what}");
            assert_eq!(whole.sessions[0].id, id, "{what}");
            assert!(whole.sessions[0].calls.is_empty(), "{what}");
            assert_eq!(whole.counters.corrupt_lines, 0, "{what}");
        }
    }

    #[test]
    fn zstd_is_told_by_its_first_bytes() {
        let text = b"{\"a\":1}\n{\"b\":2}\n".repeat(100);
        let packed = zstd::encode_all(&text[..], 3).unwrap();
        for bytes in [&packed[..], &text[..]] {
            let mut out = Vec::new();
            decompressed(bytes).unwrap().read_to_end(&mut out).unwrap();
            assert_eq!(out, text);
        }
        let mut out = Vec::new();
        decompressed(&b""[..])
            .unwrap()
            .read_to_end(&mut out)
            .unwrap();
        assert!(out.is_empty());
    }

    #[test]
    fn a_gemini_session_over_the_cap_is_an_error() {
        let line = br#"{"sessionId":"s","projectHash":"h","startTime":"t"}"#;
        let placement = Placement::Gemini(GeminiFile::default());
        let err = read_whole(placement.clone(), &line[..], 10).unwrap_err();
        assert!(err.to_string().contains("larger than 10 bytes"), "{err}");
        let whole = read_whole(placement, &line[..], 1 << 20).unwrap();
        assert_eq!(whole.sessions[0].id, "s");
        assert!(whole.sessions[0].calls.is_empty());
    }
}
