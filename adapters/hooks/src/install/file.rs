//! Reading a settings file and writing it back: a symlink is followed (the file it names is
//! changed, the link stays), a read-only file is refused, the file as it was is kept beside it
//! (`FILE.agentwatch-backup`, before every change), writes are atomic and keep the file's mode.

use super::error::InstallError;
use serde::Serialize;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// The suffix of the copy kept before a change.
pub const BACKUP_SUFFIX: &str = ".agentwatch-backup";
/// The mode of a file we create.
const NEW_FILE_MODE: u32 = 0o644;

/// A file as read: where it really is, its text (`None`: absent) and mode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Current {
    /// The path asked for (what a person is shown).
    pub path: PathBuf,
    /// The file written: the path, or the file its symlink names.
    pub real: PathBuf,
    pub text: Option<String>,
    pub mode: Option<u32>,
}

/// What a command did to one file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    Created,
    Updated,
    Removed,
    Unchanged,
}

/// One file a command looked at, and what it did to it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FileChange {
    pub path: PathBuf,
    pub action: Action,
    /// The copy of the file as it was, when it was changed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backup: Option<PathBuf>,
}

/// `path` with the backup suffix.
pub(crate) fn backup_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(BACKUP_SUFFIX);
    PathBuf::from(name)
}

/// Reads a file (absent is not an error).
pub(crate) fn read(path: &Path) -> Result<Current, InstallError> {
    let io = |action, source| InstallError::Io {
        path: path.to_path_buf(),
        action,
        source,
    };
    let is_link = std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink());
    let real = if is_link {
        std::fs::canonicalize(path).map_err(|e| io("follow the symlink", e))?
    } else {
        path.to_path_buf()
    };
    let bytes = match std::fs::read(&real) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(Current {
                path: path.to_path_buf(),
                real,
                text: None,
                mode: None,
            });
        }
        Err(e) => return Err(io("read it", e)),
    };
    let mode = std::fs::metadata(&real)
        .map_err(|e| io("read its mode", e))?
        .permissions()
        .mode()
        & 0o7777;
    let text = String::from_utf8(bytes).map_err(|_| InstallError::NotText {
        path: path.to_path_buf(),
    })?;
    Ok(Current {
        path: path.to_path_buf(),
        real,
        text: Some(text),
        mode: Some(mode),
    })
}

/// Reads a backup beside a file, when there is one that reads as text.
pub(crate) fn read_backup(current: &Current) -> Option<String> {
    std::fs::read_to_string(backup_path(&current.real)).ok()
}

/// Makes the file hold `new` (`None`: removes it), after keeping a copy of what it held when
/// it is rewritten.
pub(crate) fn apply(current: &Current, new: Option<&str>) -> Result<FileChange, InstallError> {
    let unchanged = FileChange {
        path: current.path.clone(),
        action: Action::Unchanged,
        backup: None,
    };
    if current.text.as_deref() == new {
        return Ok(unchanged);
    }
    let io = |action, source| InstallError::Io {
        path: current.path.clone(),
        action,
        source,
    };
    if current.mode.is_some_and(|m| m & 0o222 == 0) {
        return Err(InstallError::ReadOnly {
            path: current.path.clone(),
        });
    }
    // A file removed held nothing but ours: no copy of it is kept.
    let mut backup = None;
    if let (Some(old), Some(mode), Some(_)) = (&current.text, current.mode, new) {
        let path = backup_path(&current.real);
        agentwatch_systemd::write_atomic(&path, old.as_bytes(), mode)?;
        backup = Some(path);
    }
    let action = match new {
        Some(text) => {
            if let Some(dir) = current.real.parent() {
                std::fs::create_dir_all(dir).map_err(|e| io("create its directory", e))?;
            }
            let mode = current.mode.unwrap_or(NEW_FILE_MODE);
            agentwatch_systemd::write_atomic(&current.real, text.as_bytes(), mode)?;
            if current.text.is_some() {
                Action::Updated
            } else {
                Action::Created
            }
        }
        None => {
            std::fs::remove_file(&current.real).map_err(|e| io("remove it", e))?;
            Action::Removed
        }
    };
    Ok(FileChange {
        action,
        backup,
        ..unchanged
    })
}
