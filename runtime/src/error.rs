//! The runtime's error type and its one mapping to sysexits-style exit codes.

use agentwatch_opencode::db::DbError;
use agentwatch_store::{LockError, StoreError};
use agentwatch_systemd::EnvFileError;

/// Exit codes from sysexits(3), the convention systemd units and shell scripts understand.
pub mod code {
    pub const OK: u8 = 0;
    pub const USAGE: u8 = 64;
    pub const DATAERR: u8 = 65;
    pub const NOINPUT: u8 = 66;
    pub const UNAVAILABLE: u8 = 69;
    pub const SOFTWARE: u8 = 70;
    pub const IOERR: u8 = 74;
    pub const TEMPFAIL: u8 = 75;
    pub const CONFIG: u8 = 78;

    /// Every code with its sysexits name and what agentwatch means by it: the one table (the
    /// man pages' EXIT STATUS is generated from it).
    pub const MEANINGS: &[(u8, &str, &str)] = &[
        (
            OK,
            "EX_OK",
            "Success (also when the reader of standard output closed the pipe).",
        ),
        (
            USAGE,
            "EX_USAGE",
            "Bad arguments: an unknown flag, a bad duration, an alert key that names no open alert or several.",
        ),
        (
            DATAERR,
            "EX_DATAERR",
            "Bad input data: a session file that does not read, a store that is not agentwatch's.",
        ),
        (NOINPUT, "EX_NOINPUT", "A file that does not exist."),
        (
            UNAVAILABLE,
            "EX_UNAVAILABLE",
            "A service or program did not do its part: a send failed, a job is stale (status), doctor found a problem.",
        ),
        (
            SOFTWARE,
            "EX_SOFTWARE",
            "A bug: something that cannot happen did.",
        ),
        (
            IOERR,
            "EX_IOERR",
            "An I/O error: the store, a file, standard output.",
        ),
        (
            TEMPFAIL,
            "EX_TEMPFAIL",
            "Another run holds the job's lock, or opencode's database is locked: try again.",
        ),
        (
            CONFIG,
            "EX_CONFIG",
            "Bad configuration: an unknown key, a value outside its range, a missing secret.",
        ),
    ];
}

/// Everything a job or command can fail with. Each variant maps to one exit code
/// ([`Error::exit_code`]); adapter errors keep their source.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Bad arguments (64).
    #[error("{0}")]
    Usage(String),
    /// Bad input data (65).
    #[error("{0}")]
    Data(String),
    /// A file that does not exist (66).
    #[error("{0}")]
    NoInput(String),
    /// A service or program that did not do its part (69).
    #[error("{0}")]
    Unavailable(String),
    /// A bug: something that cannot happen did (70).
    #[error("{0}")]
    Software(String),
    /// An I/O error (74).
    #[error("{0}")]
    Io(String),
    /// Another run holds a job's lock (75).
    #[error("{0}")]
    Locked(String),
    /// Bad configuration (78).
    #[error("{0}")]
    Config(String),
    /// Reading a file failed: 66 when it does not exist, 74 otherwise.
    #[error("{what}: {source}")]
    Read {
        what: String,
        #[source]
        source: std::io::Error,
    },
    /// The store: 65 for a file that is not (or not yet) ours, 74 otherwise.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A job's run lock: 75 when another run holds it, 74 otherwise.
    #[error("{}", lock_message(.job, .source))]
    Lock {
        job: String,
        #[source]
        source: LockError,
    },
    /// `recover.env_file`: 74 when it cannot be read, 78 otherwise.
    #[error("recover.env_file: {0}")]
    EnvFile(#[from] EnvFileError),
    /// opencode's database (export-fixture): 66 missing, 75 locked, 65 bad data, 74 SQLite.
    #[error(transparent)]
    OpencodeDb(#[from] DbError),
    /// Standard output was closed by its reader (`| head -c1`): the command stops quietly and
    /// exits 0, as a reader that wanted no more asked.
    #[error("standard output was closed")]
    StdoutClosed,
    /// A restart was decided but its state could not be saved first, so it was not performed.
    #[error("{0}; state not saved, so the restart was not performed")]
    StateNotSaved(Box<Error>),
}

fn lock_message(job: &str, source: &LockError) -> String {
    match source {
        LockError::Held(path) => format!("another agentwatch {job} run holds {path}; exiting"),
        other => other.to_string(),
    }
}

impl Error {
    /// The process exit code (sysexits) for this error.
    pub fn exit_code(&self) -> u8 {
        match self {
            Self::Usage(_) => code::USAGE,
            Self::Data(_) => code::DATAERR,
            Self::NoInput(_) => code::NOINPUT,
            Self::Unavailable(_) => code::UNAVAILABLE,
            Self::Software(_) => code::SOFTWARE,
            Self::Io(_) => code::IOERR,
            Self::Locked(_) => code::TEMPFAIL,
            Self::Config(_) => code::CONFIG,
            Self::Read { source, .. } if source.kind() == std::io::ErrorKind::NotFound => {
                code::NOINPUT
            }
            Self::Read { source, .. } if source.kind() == std::io::ErrorKind::InvalidData => {
                code::DATAERR
            }
            Self::StdoutClosed => code::OK,
            Self::Read { .. } => code::IOERR,
            Self::Store(StoreError::Corrupt { .. } | StoreError::TooNew { .. }) => code::DATAERR,
            Self::Store(_) => code::IOERR,
            Self::Lock {
                source: LockError::Held(_),
                ..
            } => code::TEMPFAIL,
            Self::Lock { .. } => code::IOERR,
            Self::EnvFile(EnvFileError::Io { .. }) => code::IOERR,
            Self::EnvFile(_) => code::CONFIG,
            Self::OpencodeDb(e) => match e {
                DbError::Missing { .. } => code::NOINPUT,
                DbError::Locked { .. } => code::TEMPFAIL,
                DbError::NotADatabase { .. }
                | DbError::Schema { .. }
                | DbError::BadRow { .. }
                | DbError::UnknownSessions { .. }
                | DbError::NoCalls { .. } => code::DATAERR,
                DbError::Sqlite { .. } => code::IOERR,
                DbError::ScrubChangedVerdict { .. } => code::SOFTWARE,
            },
            Self::StateNotSaved(inner) => inner.exit_code(),
        }
    }

    /// An error reading `what` (a path or a name).
    pub fn read(what: impl std::fmt::Display, source: std::io::Error) -> Self {
        Self::Read {
            what: what.to_string(),
            source,
        }
    }

    /// An error writing standard output: a closed pipe is [`Error::StdoutClosed`] (quiet, exit
    /// 0), anything else (a full disk, `> /dev/full`) an I/O error (74) naming `what`.
    pub fn stdout(what: &str, source: &std::io::Error) -> Self {
        if source.kind() == std::io::ErrorKind::BrokenPipe {
            Self::StdoutClosed
        } else {
            Self::Io(format!("{what}: cannot write to standard output: {source}"))
        }
    }

    pub fn usage(message: impl Into<String>) -> Self {
        Self::Usage(message.into())
    }

    pub fn data(message: impl Into<String>) -> Self {
        Self::Data(message.into())
    }

    pub fn no_input(message: impl Into<String>) -> Self {
        Self::NoInput(message.into())
    }

    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::Unavailable(message.into())
    }

    pub fn software(message: impl Into<String>) -> Self {
        Self::Software(message.into())
    }

    pub fn io(message: impl Into<String>) -> Self {
        Self::Io(message.into())
    }

    pub fn config(message: impl Into<String>) -> Self {
        Self::Config(message.into())
    }
}

/// A runtime result.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_variant_has_its_code() {
        let missing = std::io::Error::from(std::io::ErrorKind::NotFound);
        let denied = std::io::Error::from(std::io::ErrorKind::PermissionDenied);
        let rows: Vec<(Error, u8)> = vec![
            (Error::usage("u"), 64),
            (Error::data("d"), 65),
            (Error::no_input("n"), 66),
            (Error::unavailable("x"), 69),
            (Error::software("s"), 70),
            (Error::io("i"), 74),
            (Error::Locked("l".into()), 75),
            (Error::config("c"), 78),
            (Error::read("f", missing), 66),
            (Error::read("f", denied), 74),
            (
                Error::Lock {
                    job: "deck".into(),
                    source: LockError::Held("/x.lock".into()),
                },
                75,
            ),
            (Error::StateNotSaved(Box::new(Error::io("disk full"))), 74),
            (
                Error::read("f", std::io::Error::from(std::io::ErrorKind::InvalidData)),
                65,
            ),
            (
                Error::stdout("x", &std::io::Error::from(std::io::ErrorKind::BrokenPipe)),
                0,
            ),
            (
                Error::stdout("x", &std::io::Error::from(std::io::ErrorKind::StorageFull)),
                74,
            ),
        ];
        for (err, want) in rows {
            assert_eq!(err.exit_code(), want, "{err}");
        }
    }
}
