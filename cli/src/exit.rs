//! Sysexits-style exit codes and the CLI's error type.

use std::process::ExitCode;

/// Exit codes from sysexits(3), the convention systemd units and shell scripts understand.
#[allow(dead_code)] // the whole table; each command uses what it needs
pub mod code {
    pub const USAGE: u8 = 64;
    pub const DATAERR: u8 = 65;
    pub const NOINPUT: u8 = 66;
    pub const UNAVAILABLE: u8 = 69;
    pub const SOFTWARE: u8 = 70;
    pub const IOERR: u8 = 74;
    pub const TEMPFAIL: u8 = 75;
    pub const CONFIG: u8 = 78;
}

/// An error the CLI reports: a message with its context and the exit code it maps to.
#[derive(Debug)]
pub struct CliError {
    pub message: String,
    pub code: u8,
}

impl CliError {
    pub fn new(code: u8, message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            code,
        }
    }

    pub fn exit_code(&self) -> ExitCode {
        ExitCode::from(self.code)
    }
}

impl std::fmt::Display for CliError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

pub type CliResult = Result<ExitCode, CliError>;
