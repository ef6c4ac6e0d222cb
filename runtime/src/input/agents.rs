//! Codex CLI rollouts and Gemini CLI sessions as input (`agentwatch detect`,
//! `import-export`): one file, told by its first lines ([`agentwatch_transcripts::codex::sniff`],
//! [`agentwatch_transcripts::gemini::sniff`]) or its name (a `.jsonl.zst` rollout, an older
//! pretty-printed `session-*.json`), read whole into its session as the live sources read it.

use super::{Batch, Format};
use crate::error::Error;
use agentwatch_transcripts::{codex, gemini, read_codex_sessions, read_gemini_sessions};
use detect_core::Session;
use std::io::Read;

/// Bytes of one rollout or session read at most (decompressed).
const MAX_BYTES: u64 = 1 << 30;

/// The agent whose file this is, from its name alone (files whose first lines cannot say: a
/// compressed rollout, a pretty-printed whole-file Gemini session).
pub(super) fn by_name(name: &str) -> Option<Format> {
    let base = name.rsplit('/').next().unwrap_or(name);
    if base.starts_with("rollout-") && base.ends_with(".jsonl.zst") {
        Some(Format::CodexRollout)
    } else if base.starts_with("session-") && base.ends_with(".json") {
        Some(Format::GeminiSession)
    } else {
        None
    }
}

/// The agent whose file this is, from its first lines.
pub(super) fn by_head(head: &[u8]) -> Option<Format> {
    if codex::sniff(head) {
        Some(Format::CodexRollout)
    } else if gemini::sniff(head) {
        Some(Format::GeminiSession)
    } else {
        None
    }
}

/// A whole file of `format` (`head` read already, `rest` after it; a path ending `.zst` is
/// decompressed), its session turned by `export`.
pub(super) fn read<T>(
    format: Format,
    name: Option<&str>,
    origin: &str,
    mut whole: impl Read,
    export: &(dyn Fn(Session) -> T + Sync),
) -> Result<Batch<T>, Error> {
    let mut bytes = Vec::new();
    whole
        .by_ref()
        .take(MAX_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| Error::read(origin, e))?;
    if name.is_some_and(|n| n.ends_with(".zst")) {
        bytes = zstd_decoded(&bytes, origin)?;
    }
    if bytes.len() as u64 > MAX_BYTES {
        return Err(Error::data(format!(
            "{origin}: larger than {MAX_BYTES} bytes"
        )));
    }
    let name = name.unwrap_or(origin);
    let sessions = match format {
        Format::CodexRollout => read_codex_sessions(&bytes, name),
        _ => read_gemini_sessions(&bytes, name),
    }
    .map_err(|e| Error::data(e.to_string()))?;
    Ok(Batch {
        format,
        items: sessions.into_iter().map(export).collect(),
        notes: Vec::new(),
    })
}

fn zstd_decoded(bytes: &[u8], origin: &str) -> Result<Vec<u8>, Error> {
    let mut out = Vec::new();
    zstd::stream::read::Decoder::new(bytes)
        .and_then(|d| d.take(MAX_BYTES + 1).read_to_end(&mut out))
        .map_err(|e| Error::read(origin, e))?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::super::read_sessions;
    use super::*;

    const CODEX: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/codex/0.169.0");
    const GEMINI: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/gemini/0.61.0");

    fn one(dir: &str, suffix: &str) -> String {
        let mut stack = vec![std::path::PathBuf::from(dir)];
        while let Some(at) = stack.pop() {
            for entry in std::fs::read_dir(&at).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    stack.push(path);
                } else if path.to_string_lossy().ends_with(suffix) {
                    return path.to_string_lossy().into_owned();
                }
            }
        }
        panic!("no {suffix} under {dir}");
    }

    #[test]
    fn rollouts_and_sessions_read_as_the_adapter_reads_them() {
        for (path, read) in [
            (
                one(&format!("{CODEX}/loop"), ".jsonl"),
                read_codex_sessions as fn(&[u8], &str) -> _,
            ),
            (
                one(&format!("{GEMINI}/loop"), ".jsonl"),
                read_gemini_sessions,
            ),
        ] {
            let bytes = std::fs::read(&path).unwrap();
            let adapter = read(&bytes, &path).unwrap();
            assert!(!adapter[0].calls.is_empty());
            assert_eq!(read_sessions(std::slice::from_ref(&path)).unwrap(), adapter);
        }
    }

    #[test]
    fn a_compressed_rollout_reads_as_the_plain_one() {
        let plain = one(&format!("{CODEX}/loop"), ".jsonl");
        let bytes = std::fs::read(&plain).unwrap();
        let dir = agentwatch_testkit::TempDir::new("aw-input-zst");
        let name = std::path::Path::new(&plain)
            .file_name()
            .unwrap()
            .to_string_lossy();
        let zst = dir.path.join(format!("{name}.zst"));
        std::fs::write(&zst, zstd::encode_all(&bytes[..], 3).unwrap()).unwrap();
        let zst = zst.to_string_lossy().into_owned();
        assert_eq!(
            read_sessions(std::slice::from_ref(&zst)).unwrap(),
            read_codex_sessions(&bytes, &plain).unwrap()
        );
    }
}
