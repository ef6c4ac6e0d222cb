//! # agentwatch-agentdeck: agent-deck sessions as the watchdog sees them
//!
//! The I/O half of `agentwatch deck`; the decisions are `recovery-policy`'s.
//!
//! | module | what it does |
//! |---|---|
//! | [`cli`] | runs the agent-deck CLI: `list --all --json`, `[-p P] session show ID --json`, `session restart ID --json`, `session send ID MSG --no-wait`; reads `null`, plain-text and `NOT_FOUND` answers |
//! | [`tmux`] | `tmux [-S PATH \| -L NAME] capture-pane -p -t =SESSION:` and the SHA-256 of the pane |
//! | [`hooks`] | a watch (inotify, through `notify`) on the hook status directory: wakes the deck daemon when a hook writes a status file |
//! | [`pollers`] | Telegram pollers (`bun … telegram …`) and the state dir each owns, from `/proc`, else (macOS) through `sysinfo`; a conductor's expected state dir from its env file |
//!
//! Every program runs as an argv, never through a shell, with a timeout; stdin is `/dev/null`.
//! Values taken from agent-deck's own output (session ids, profiles) are checked before they go
//! into an argv: one starting with `-` would be read by agent-deck as an option
//! ([`cli::check_argument`]).
#![forbid(unsafe_code)]

pub mod cli;
pub mod hooks;
pub mod pollers;
mod process;
pub mod tmux;

pub use cli::{AgentDeck, DeckError, Listing, SessionInfo, Shown};
pub use process::{Output, head};
pub use tmux::{Socket, Tmux, TmuxError, pane_hash, pane_tail};
