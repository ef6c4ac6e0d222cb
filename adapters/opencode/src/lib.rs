//! # agentwatch-opencode: the opencode adapter
//!
//! Turns what opencode stores and serves into detect-core [`Session`](detect_core::Session)s:
//! [`convert`] maps the `{info, parts}` message JSON (HTTP API, `opencode export`) to calls.
//! The mapping is pure; the I/O that fetches the JSON lives beside it in this crate.
//! [`sse`] parses the event stream (`GET /global/event`) the follower reads.
#![forbid(unsafe_code)]

pub mod convert;
pub mod db;
pub mod discover;
pub mod http;
pub mod listing;
pub mod lite;
mod problem;
pub mod sse;

pub use convert::{ConvertError, call_from_part, session_from_export, session_from_messages};
