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
//! - [`codex`]: Codex CLI rollouts, both eras. [`codex::CodexReader`] has the same shape;
//!   [`codex::read_codex_sessions`], [`codex::sniff`].
//! - [`gemini`]: Gemini CLI sessions, whose history is edited as well as appended to (upserts
//!   by message id, `$set` checkpoints, `$rewindTo`, the older whole-file `.json`).
//!   [`gemini::GeminiReader`] has the same shape and says when the history it handed out
//!   changed ([`gemini::GeminiReader::rewound`]); [`gemini::read_gemini_sessions`],
//!   [`gemini::sniff`].
//! - [`discover`]: where each agent's transcripts are, with their size and modification
//!   time; a compressed Codex rollout read whole ([`discover::read_transcript`]); every
//!   agent's transcripts under a directory given by hand ([`discover::discover_under`]).
//! - [`mod@sniff`]: which agent wrote a file ([`identify`]: the first of its first lines that
//!   says; any record type an agent writes may come first).
//! - [`whole`]: a whole transcript of any agent read into its sessions through its reader
//!   ([`read_whole`]), the one whole-file read behind every entry but the live tail.
//! - [`mod@survey`]: the versions and unknown record types of an agent's newest transcripts.
#![forbid(unsafe_code)]

pub mod claude;
pub mod codex;
mod common;
pub mod discover;
pub mod gemini;
mod lenient;
pub mod sniff;
pub mod survey;
pub mod tail;
pub mod watch;
pub mod whole;

pub use claude::{
    ClaudeReader, FileKind, SidechainCalls, Spawn, TitleSource, TranscriptMeta,
    read_claude_sessions, sniff, subagent_session_id,
};
pub use codex::{CodexMeta, CodexReader, CodexSpawn, read_codex_sessions};
pub use common::{
    Counters, EXCERPT_CHARS, EXCERPT_KEY, MAX_PENDING, REFUSAL_KEY, TITLE_CHARS, UNKNOWN_TYPES,
    excerpt, may_be_object, shortened,
};
pub use discover::{
    Discovery, GeminiHead, SubagentMeta, Transcript, TranscriptKind, codex_thread_id,
    discover_claude, discover_claude_project, discover_codex, discover_gemini, discover_under,
    gemini_file_at, parse_subagent_meta, peek_codex, peek_gemini, placement_at, read_subagent_meta,
    read_transcript,
};
pub use gemini::{
    AgentVerdict, GeminiFile, GeminiMeta, GeminiReader, GeminiSpawn, GeminiTitleSource,
    read_gemini_sessions,
};
pub use sniff::{TranscriptAgent, identify, identify_line, transcript_agent};
pub use survey::{Survey, survey};
pub use tail::{FileCursor, NewText, read_new};
pub use watch::{DirWatch, WatchError};
pub use whole::{Placement, WholeTranscript, claude_kind_of_lines, decompressed, read_whole};

/// Why a transcript could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The bytes are not a Claude Code transcript.
    #[error("{file}: not a Claude Code transcript: {reason}")]
    NotClaude { file: String, reason: String },
    /// The bytes are not a Codex CLI rollout.
    #[error("{file}: not a Codex CLI rollout: {reason}")]
    NotCodex { file: String, reason: String },
    /// The bytes are not a Gemini CLI session.
    #[error("{file}: not a Gemini CLI session: {reason}")]
    NotGemini { file: String, reason: String },
}
