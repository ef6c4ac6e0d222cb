//! # agentwatch-transcripts: the sessions agents write to disk
//!
//! Coding agents write every tool call and its result to JSON Lines transcripts as they
//! happen; agentwatch watches them with no cooperation from the agent
//! (`shared/reference/agents.md`). This crate reads them into detect-core's call model, so
//! detect-core knows no agent by name.
//!
//! - [`tail`]: incremental reading of one append-only JSON Lines file by byte offset, with
//!   device, inode, size and content checks (a file truncated, replaced or rewritten in place
//!   is read again from the start), bounded per call. The only module here that reads files,
//!   with [`discover`].
//! - [`claude`]: Claude Code. [`claude::ClaudeReader`] reads a transcript line by line into
//!   completed calls (pure: bytes in, calls out; serializable to continue after a restart);
//!   [`claude::read_claude_sessions`] reads a whole file; [`claude::sniff`] recognises one.
//! - [`discover`]: where the transcripts are (`projects/*/<session>.jsonl`, the subagents'
//!   files beside them) with their size and modification time.
//!
//! Codex CLI and Gemini CLI readers go beside [`claude`], sharing [`tail`] and [`discover`].
#![forbid(unsafe_code)]

pub mod claude;
pub mod discover;
mod lenient;
pub mod tail;
pub mod watch;

pub use claude::{
    ClaudeReader, Counters, FileKind, SidechainCalls, Spawn, TitleSource, TranscriptMeta,
    read_claude_sessions, sniff, subagent_session_id,
};
pub use discover::{
    Discovery, SubagentMeta, Transcript, TranscriptKind, discover_claude, discover_claude_project,
    parse_subagent_meta, read_subagent_meta,
};
pub use tail::{FileCursor, NewText, read_new};
pub use watch::{DirWatch, WatchError};

/// Why a transcript could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The bytes are not a Claude Code transcript.
    #[error("{file}: not a Claude Code transcript: {reason}")]
    NotClaude { file: String, reason: String },
}
