//! Atomic replacement of a file others read: the project's one writer of such files (the
//! recovery notice, the config overlay, fixtures, exports, `doctor`'s config).

use std::io::Write;
use std::path::{Path, PathBuf};

/// The recovery notice's mode: readable by the stream server's account.
pub const NOTICE_MODE: u32 = 0o644;

/// Why a file could not be replaced. The target is untouched in every case.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {step}: {source}")]
pub struct AtomicWriteError {
    pub path: String,
    pub step: &'static str,
    #[source]
    pub source: std::io::Error,
}

/// Replaces `path` with `contents` in one step: a temporary file in the same directory (never
/// another file system), written and `fsync`ed, given `mode` (exactly, whatever the umask), then
/// renamed over `path`; the directory is synced so the rename survives a crash. On failure the
/// temporary file is removed and `path` keeps its old content. The directory must exist.
pub fn write_atomic(path: &Path, contents: &[u8], mode: u32) -> Result<(), AtomicWriteError> {
    write_atomic_with(path, mode, |file| file.write_all(contents))
}

/// [`write_atomic`] for contents written as they are produced (a large export): `fill` writes
/// them to the temporary file (buffer it for many small writes); nothing replaces `path` unless
/// it succeeds.
pub fn write_atomic_with(
    path: &Path,
    mode: u32,
    fill: impl FnOnce(&mut std::fs::File) -> std::io::Result<()>,
) -> Result<(), AtomicWriteError> {
    write(path, mode, Place::Replace { durable: true }, fill)
}

/// [`write_atomic`] without the `fsync`s: a reader still sees the old file or the new one,
/// never a part, but a power loss may keep the old one. For a cache rebuilt from what it caches
/// when it is lost (the hook's per-session state, written before every tool call an agent
/// makes, where a sync costs more than the rest of the call).
pub fn write_atomic_cache(path: &Path, contents: &[u8], mode: u32) -> Result<(), AtomicWriteError> {
    write(path, mode, Place::Replace { durable: false }, |file| {
        file.write_all(contents)
    })
}

/// How the temporary file takes its place.
#[derive(Clone, Copy)]
enum Place {
    /// Renamed over the file; synced first (and the directory after) when `durable`.
    Replace { durable: bool },
    /// Linked into place, never over an existing file (always synced).
    Create,
}

/// Creates `path` with `contents` in one step, like [`write_atomic`], but never over an existing
/// file: it fails (`AlreadyExists`, step `link into place`) when `path` exists, leaving it
/// untouched.
pub fn create_atomic(path: &Path, contents: &[u8], mode: u32) -> Result<(), AtomicWriteError> {
    write(path, mode, Place::Create, |file| file.write_all(contents))
}

fn write(
    path: &Path,
    mode: u32,
    place: Place,
    fill: impl FnOnce(&mut std::fs::File) -> std::io::Result<()>,
) -> Result<(), AtomicWriteError> {
    let fail = |step: &'static str| {
        move |source: std::io::Error| AtomicWriteError {
            path: path.display().to_string(),
            step,
            source,
        }
    };
    let name = path.file_name().ok_or_else(|| {
        fail("no file name")(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "the path names no file",
        ))
    })?;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let prefix = format!(".{}.", name.to_string_lossy());
    let mut builder = tempfile::Builder::new();
    builder.prefix(&prefix).suffix(".tmp");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        builder.permissions(std::fs::Permissions::from_mode(mode));
    }
    // The temporary file is removed when `temp` is dropped on any failure below.
    let mut temp = builder
        .tempfile_in(&dir)
        .map_err(fail("create temporary file"))?;
    fill(temp.as_file_mut()).map_err(fail("write temporary file"))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        // The umask may have narrowed the mode given at creation.
        temp.as_file()
            .set_permissions(std::fs::Permissions::from_mode(mode))
            .map_err(fail("set mode"))?;
    }
    #[cfg(not(unix))]
    let _ = mode;
    let durable = !matches!(place, Place::Replace { durable: false });
    if durable {
        temp.as_file()
            .sync_all()
            .map_err(fail("fsync temporary file"))?;
    }
    if let Place::Replace { .. } = place {
        temp.persist(path)
            .map_err(|e| fail("rename into place")(e.error))?;
    } else {
        temp.persist_noclobber(path)
            .map_err(|e| fail("link into place")(e.error))?;
    }
    if !durable {
        return Ok(());
    }
    // Make the rename itself durable; a directory that cannot be opened for sync is not an error
    // of the write (the file is in place).
    if let Ok(d) = std::fs::File::open(&dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentwatch_testkit::TempDir;
    use std::os::unix::fs::PermissionsExt;

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().permissions().mode() & 0o7777
    }

    #[test]
    fn create_never_replaces_an_existing_file() {
        let dir = TempDir::new("aw-atomic-create");
        let target = dir.path.join("config.toml");
        create_atomic(&target, b"first\n", 0o644).unwrap();
        let e = create_atomic(&target, b"second\n", 0o644).unwrap_err();
        assert_eq!(e.source.kind(), std::io::ErrorKind::AlreadyExists);
        assert_eq!(std::fs::read(&target).unwrap(), b"first\n");
        assert_eq!(mode(&target), 0o644);
        let names: Vec<_> = std::fs::read_dir(&dir.path).unwrap().collect();
        assert_eq!(names.len(), 1, "no temporary file left");
    }

    #[test]
    fn replaces_with_exact_mode_and_leaves_no_temp_file() {
        let dir = TempDir::new("aw-atomic");
        let target = dir.path.join("recovery-notice.json");
        write_atomic(&target, b"{\"v\":1}\n", NOTICE_MODE).unwrap();
        assert_eq!(std::fs::read(&target).unwrap(), b"{\"v\":1}\n");
        assert_eq!(mode(&target), 0o644);

        // An existing file with another mode is replaced, and the mode is the one asked for.
        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o600)).unwrap();
        write_atomic(&target, b"second", NOTICE_MODE).unwrap();
        assert_eq!(std::fs::read(&target).unwrap(), b"second");
        assert_eq!(mode(&target), 0o644);

        let names: Vec<String> = std::fs::read_dir(&dir.path)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["recovery-notice.json"]);
    }

    #[test]
    fn a_missing_directory_is_an_error_naming_the_path() {
        let dir = TempDir::new("aw-atomic-missing");
        let target = dir.path.join("no/such/dir/notice.json");
        let err = write_atomic(&target, b"x", NOTICE_MODE).unwrap_err();
        assert!(err.to_string().contains("notice.json"), "{err}");
        assert!(err.to_string().contains("create temporary file"), "{err}");
    }

    #[test]
    fn a_failed_rename_keeps_the_old_file_and_removes_the_temp() {
        let dir = TempDir::new("aw-atomic-rename");
        // A directory in the target's place makes the rename fail after the temp file exists.
        let target = dir.path.join("notice.json");
        std::fs::create_dir(&target).unwrap();
        std::fs::write(target.join("keep"), b"x").unwrap();
        let err = write_atomic(&target, b"x", NOTICE_MODE).unwrap_err();
        assert_eq!(err.step, "rename into place");
        let names: Vec<String> = std::fs::read_dir(&dir.path)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["notice.json"]);
    }
}
