//! # agentwatch-hooks: agentwatch inside the agent
//!
//! Every agent agentwatch watches runs a program of the user's before each tool call and lets
//! it refuse the call with a reason the model reads (`shared/reference/hooks.md`). This crate
//! is that program's adapter, one per agent, over one decision made in the runtime:
//!
//! - [`Agent`]: the four agents by name, as `agentwatch hook AGENT` spells them.
//! - [`event`]: the pre-tool event each agent writes on standard input, read into one
//!   [`PreToolEvent`].
//! - [`answer`]: the hook's answer (allow, warn, refuse, stop) in each agent's protocol, and
//!   what each agent lets a hook do ([`answer::can`]).
//! - [`install`]: our hook written into each agent's own settings and taken out again
//!   (`agentwatch hooks install|uninstall|status`), comments and layout kept, Codex's trust
//!   recorded as Codex records it, and whether each hook will really run.
#![forbid(unsafe_code)]

mod agent;
pub mod answer;
pub mod event;
pub mod install;

pub use agent::{Agent, UnknownAgent};
pub use event::{EventError, PreToolEvent, parse_event};
