//! Every fixture transcript of every agent (the real ones the CLIs wrote and the hand-written
//! one per version family, `fixtures/README.md`) given to `agentwatch detect --json` as a file,
//! as part of its directory, and on standard input (a Codex rollout also compressed): the same
//! sessions with the same calls each way, and none refused (issue 48).

use serde_json::Value;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures");

/// `agentwatch detect --json ARG`, `stdin` on its standard input; it must succeed.
fn detect(arg: &Path, stdin: Option<&[u8]>) -> Value {
    let mut child = Command::new(env!("CARGO_BIN_EXE_agentwatch"))
        .args(["detect", "--json"])
        .arg(arg)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    if let Some(bytes) = stdin {
        input.write_all(bytes).unwrap();
    }
    drop(input);
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{}: {stderr}", arg.display());
    assert!(!stderr.contains("panicked"), "{stderr}");
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Each session's calls, by id.
fn calls_by_id(v: &Value) -> BTreeMap<String, u64> {
    v["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["id"].as_str().unwrap().to_owned(),
                s["calls"].as_u64().unwrap(),
            )
        })
        .collect()
}

/// The fixture directories laid out as an agent's own (`projects/`, `sessions/`, `tmp/`),
/// under `fixtures/<agent>/<family>/[<scenario>/]`.
fn scenarios() -> Vec<PathBuf> {
    let is_home = |dir: &Path| {
        ["projects", "sessions", "tmp"]
            .iter()
            .any(|d| dir.join(d).is_dir())
    };
    let mut found = Vec::new();
    for agent in ["claude", "codex", "gemini"] {
        for family in sorted_dirs(&Path::new(FIXTURES).join(agent)) {
            if is_home(&family) {
                found.push(family);
            } else {
                found.extend(sorted_dirs(&family).into_iter().filter(|d| is_home(d)));
            }
        }
    }
    found
}

fn sorted_dirs(dir: &Path) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    dirs
}

/// The transcripts under `dir`: `.jsonl` files, and the older Gemini `session-*.json`.
fn transcripts(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if path.is_dir() {
            out.extend(transcripts(&path));
        } else if name.ends_with(".jsonl")
            || (name.starts_with("session-") && name.ends_with(".json"))
        {
            out.push(path);
        }
    }
    out.sort();
    out
}

#[test]
fn every_fixture_transcript_reads_alike_as_a_file_a_directory_and_standard_input() {
    let scenarios = scenarios();
    assert!(scenarios.len() >= 16, "{scenarios:?}");
    let mut files = 0;
    for dir in scenarios {
        let whole = calls_by_id(&detect(&dir, None));
        let mut seen = BTreeMap::new();
        for file in transcripts(&dir) {
            files += 1;
            let by_file = calls_by_id(&detect(&file, None));
            assert!(!by_file.is_empty(), "{}", file.display());
            for (id, calls) in &by_file {
                assert_eq!(
                    whole.get(id),
                    Some(calls),
                    "{id} of {} in its directory",
                    file.display()
                );
            }
            let bytes = std::fs::read(&file).unwrap();
            let by_stdin = calls_by_id(&detect(Path::new("-"), Some(&bytes)));
            assert_eq!(by_stdin, by_file, "{} on standard input", file.display());
            if file.to_string_lossy().contains("/codex/") {
                let packed = zstd::encode_all(&bytes[..], 3).unwrap();
                let zst = calls_by_id(&detect(Path::new("-"), Some(&packed)));
                assert_eq!(zst, by_file, "{} compressed", file.display());
            }
            seen.extend(by_file);
        }
        assert_eq!(
            seen,
            whole,
            "{}: every session of the directory is a file's",
            dir.display()
        );
    }
    assert!(files >= 22, "{files} transcripts");
}

/// The hand-written fixture of each version family (`fixtures/README.md`): its sessions, their
/// calls (counted by hand) and verdicts, read from the family's directory.
#[test]
fn each_version_family_reads_its_calls_and_its_loops() {
    type Row = (&'static str, &'static str, u64, bool);
    let families: [(&str, &[Row]); 6] = [
        (
            "claude/1.0.x/inline",
            &[
                ("972aec82-bc97-5456-85fa-4a3b09d52ea7", "claude", 4, false),
                (
                    "972aec82-bc97-5456-85fa-4a3b09d52ea7:sidechain-0562027c-0129-538d-89b7-2b995c20e279",
                    "claude",
                    15,
                    true,
                ),
            ],
        ),
        (
            "claude/2.0.x/flat",
            &[
                ("4fe8fe2b-eacc-597f-9768-2689f0c752d7", "claude", 3, false),
                (
                    "4fe8fe2b-eacc-597f-9768-2689f0c752d7:agent-7c1e9a2b",
                    "claude",
                    17,
                    true,
                ),
            ],
        ),
        (
            "claude/2.1.x/interactive",
            &[
                ("27f23d58-4bde-5200-9ae9-eef5e989c4be", "claude", 18, true),
                ("2e5cfc7c-9afa-5fae-a22c-16581d62de83", "claude", 0, false),
                (
                    "27f23d58-4bde-5200-9ae9-eef5e989c4be:agent-a4d2c9e",
                    "claude",
                    4,
                    false,
                ),
            ],
        ),
        (
            "codex/bare",
            &[("12ad6c2a-4a99-5284-a54c-a9f261c829f6", "codex", 17, true)],
        ),
        (
            "codex/legacy",
            &[("45a0d6f8-937b-57f6-91ec-1b92c00cd237", "codex", 15, false)],
        ),
        (
            "gemini/0.4x-json",
            &[("418ce5f3-bc43-51e5-82ec-60152b42933a", "gemini", 16, true)],
        ),
    ];
    for (family, rows) in families {
        let v = detect(&Path::new(FIXTURES).join(family), None);
        let read: Vec<(&str, &str, u64, bool)> = v["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| {
                (
                    s["id"].as_str().unwrap(),
                    s["agent"].as_str().unwrap(),
                    s["calls"].as_u64().unwrap(),
                    s["flagged"].as_bool().unwrap(),
                )
            })
            .collect();
        assert_eq!(read, rows, "{family}");
    }
}
