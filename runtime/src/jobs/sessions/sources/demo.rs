//! The built-in demo (`agentwatch watch --demo`): one session tree of each agent, bundled in
//! the binary and read by the same sources that read a user's own sessions, so a newcomer sees
//! their agent understood in one command, with no server: the opencode sample
//! (`fixtures/sample.json`: a landing parent with a looping explorer child and a healthy review),
//! a Claude Code session whose subagent rereads one file, a looping Codex session and a healthy
//! Gemini session (what the real CLIs wrote in the project's tests: `fixtures/README.md`).
//!
//! The transcripts are written under a temporary directory laid out as each agent lays out its
//! own, and that directory is removed when the tick is over.

use crate::config::Config;
use std::path::{Path, PathBuf};

/// A bundled file: where it goes under the demo directory, and its bytes.
type Bundled = (&'static str, &'static [u8]);

macro_rules! bundled {
    ($($place:literal => $fixture:literal),* $(,)?) => {
        &[$(($place, include_bytes!(concat!("../../../../../fixtures/", $fixture)))),*]
    };
}

/// The demo's transcripts, by agent.
const BUNDLE: &[Bundled] = bundled![
    "claude/projects/-home-user-work-project/2e4f2b19-19ea-4857-8d93-6a73a095ecf4.jsonl" =>
        "claude/2.1.328/subagent/projects/-home-user-work-project/2e4f2b19-19ea-4857-8d93-6a73a095ecf4.jsonl",
    "claude/projects/-home-user-work-project/2e4f2b19-19ea-4857-8d93-6a73a095ecf4/subagents/agent-a3f9675c40e0f8931.jsonl" =>
        "claude/2.1.328/subagent/projects/-home-user-work-project/2e4f2b19-19ea-4857-8d93-6a73a095ecf4/subagents/agent-a3f9675c40e0f8931.jsonl",
    "claude/projects/-home-user-work-project/2e4f2b19-19ea-4857-8d93-6a73a095ecf4/subagents/agent-a3f9675c40e0f8931.meta.json" =>
        "claude/2.1.328/subagent/projects/-home-user-work-project/2e4f2b19-19ea-4857-8d93-6a73a095ecf4/subagents/agent-a3f9675c40e0f8931.meta.json",
    "codex/sessions/2026/12/06/rollout-2026-12-06T02-37-12-01a24936-6831-7872-909d-00f87fd6ae98.jsonl" =>
        "codex/0.169.0/loop/sessions/2026/12/06/rollout-2026-12-06T02-37-12-01a24936-6831-7872-909d-00f87fd6ae98.jsonl",
    "gemini/tmp/project/.project_root" => "gemini/0.61.0/healthy/tmp/project/.project_root",
    "gemini/tmp/project/chats/session-2026-12-06T02-51-8c07095f.jsonl" =>
        "gemini/0.61.0/healthy/tmp/project/chats/session-2026-12-06T02-51-8c07095f.jsonl",
];

/// The demo's transcripts on disk while a tick reads them; removed when dropped.
#[derive(Debug)]
pub struct DemoFiles {
    dir: PathBuf,
}

impl DemoFiles {
    /// Write the bundle under a fresh temporary directory and point `[claude]`, `[codex]` and
    /// `[gemini]` at it (the demo's sources are the bundle and nothing else).
    pub fn write(config: &mut Config) -> std::io::Result<Self> {
        let dir = std::env::temp_dir().join(format!("agentwatch-demo-{}", std::process::id()));
        let files = Self { dir };
        let _ = std::fs::remove_dir_all(&files.dir);
        for (place, bytes) in BUNDLE {
            let path = files.dir.join(place);
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent)?;
            }
            std::fs::write(&path, bytes)?;
        }
        for (section, agent) in [
            (&mut config.claude, "claude"),
            (&mut config.codex, "codex"),
            (&mut config.gemini, "gemini"),
        ] {
            section.enabled = true;
            section.dir = Some(files.dir.join(agent).display().to_string());
        }
        // The bundled sessions were recorded a while ago: judged as they are, never left out
        // as stale.
        config.watchdog.stale_after_s = 0;
        Ok(files)
    }

    /// Where the bundle is.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

impl Drop for DemoFiles {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
