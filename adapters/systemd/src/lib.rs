//! # agentwatch-systemd: what a recovery does to the host
//!
//! Three small, separately testable pieces the `agentwatch recover` command needs:
//!
//! - [`Systemctl`]: `systemctl [--user] restart UNIT`, run as an **argv** (never through a shell),
//!   behind a configurable command prefix such as `["sudo", "-n", "systemctl"]`, with a time limit.
//!   A unit name holding quotes, spaces, `;` or a newline reaches the program as one argument and
//!   cannot inject anything; a name starting with `-` is refused so it cannot pose as an option.
//! - [`write_atomic`]: a file others read (the recovery notice) replaced in one step: a temporary
//!   file in the same directory, written, `fsync`ed, given its mode (0644 for the notice) and
//!   renamed over the target, then the directory is synced. A reader sees the old file or the new
//!   one, never a torn one.
//! - [`read_env_file`]: `KEY=value` lines (the router settings and its key), read as data, never
//!   sourced. A file whose mode is wider than 0640 is **refused**, and the error says so and how to
//!   fix it: the file may hold a bearer key.
//! - [`Notifier`]: sd_notify(3) for `agentwatch run` (`READY=1`, `WATCHDOG=1`, `STOPPING=1`) as
//!   one datagram to `NOTIFY_SOCKET`, no libsystemd; a no-op when systemd did not start us.
#![forbid(unsafe_code)]

mod atomic;
mod env_file;
mod notify;
mod systemctl;

pub use atomic::{
    AtomicWriteError, NOTICE_MODE, create_atomic, write_atomic, write_atomic_cache,
    write_atomic_with,
};
pub use env_file::{
    ENV_FILE_MAX_MODE, EnvFile, EnvFileError, env_value, parse_env_text, read_env_file,
};
pub use notify::{Notifier, NotifyError};
pub use systemctl::{Restarted, Systemctl, SystemctlError, check_unit_name};
