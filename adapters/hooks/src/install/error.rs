//! Why installing or removing a hook failed. Each names the file (and the place in it), and
//! nothing is written when a file cannot be read as it must.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    /// A settings file that does not read (bad JSON or TOML, or a part of the wrong type where
    /// our entry goes); it is left as it is.
    #[error("{}:{line}:{column}: {message}; the file was not changed", path.display())]
    Syntax {
        path: PathBuf,
        line: usize,
        column: usize,
        message: String,
    },
    /// A settings file that is not UTF-8 text.
    #[error("{}: not UTF-8 text; the file was not changed", path.display())]
    NotText { path: PathBuf },
    /// Reading, creating a directory or removing a file failed.
    #[error("{}: cannot {action}: {source}", path.display())]
    Io {
        path: PathBuf,
        action: &'static str,
        #[source]
        source: std::io::Error,
    },
    /// A file with no write permission for anyone: someone meant it to stay as it is.
    #[error("{} is read-only; it was not changed (make it writable to install)", path.display())]
    ReadOnly { path: PathBuf },
    /// Writing a file (atomically) failed.
    #[error(transparent)]
    Write(#[from] agentwatch_systemd::AtomicWriteError),
    /// A file that is not ours stands where ours goes (opencode's plugin).
    #[error("{} exists and is not agentwatch's; move it away to install", path.display())]
    NotOurs { path: PathBuf },
    /// Where the agent keeps its settings cannot be known (no HOME).
    #[error("cannot find {what}: set HOME (or {variable})")]
    NoHome {
        what: &'static str,
        variable: &'static str,
    },
}

/// The kind of an [`InstallError`], for a caller mapping errors to exit codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The file's content (does not read, not text): sysexits' data error.
    Data,
    /// Reading or writing failed: an I/O error.
    Io,
    /// The setup is in the way (no HOME, someone else's file): a configuration error.
    Config,
}

impl InstallError {
    pub fn kind(&self) -> ErrorKind {
        match self {
            Self::Syntax { .. } | Self::NotText { .. } => ErrorKind::Data,
            Self::Io { .. } | Self::ReadOnly { .. } | Self::Write(_) => ErrorKind::Io,
            Self::NotOurs { .. } | Self::NoHome { .. } => ErrorKind::Config,
        }
    }
}
