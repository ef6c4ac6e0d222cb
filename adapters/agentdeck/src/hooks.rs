//! agent-deck's hook status directory, watched: the kernel tells (inotify on Linux, through the
//! `notify` crate) when a hook writes a session's status file, so the deck daemon can tick within
//! moments of a change instead of at its next mtime poll.
//!
//! A hook writes `ID.json` through a temp file (`.ID.json.tmp-…`) renamed into place: the rename
//! (or any create, write or removal of a `*.json` whose name does not start with `.`) is a
//! change; temp files, reads and attribute changes are not.

use notify::{Event, EventKind, RecommendedWatcher, RecursiveMode, Watcher};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::Duration;

/// Why a directory cannot be watched (the caller polls it instead).
#[derive(Debug, thiserror::Error)]
#[error("cannot watch {dir}: {source}")]
pub struct WatchError {
    pub dir: PathBuf,
    #[source]
    pub source: notify::Error,
}

/// What a wait ended with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Woken {
    /// A status file changed.
    Changed,
    /// The time ran out with no change.
    Timeout,
    /// The watch stopped working (the directory went away, the kernel's queue overflowed, …):
    /// the caller goes back to polling.
    Lost,
}

/// A watch on one hook directory (not its subdirectories); it ends when dropped.
#[derive(Debug)]
pub struct HookWatch {
    dir: PathBuf,
    changes: Receiver<Result<(), String>>,
    _watcher: RecommendedWatcher,
}

impl HookWatch {
    /// Starts watching `dir`.
    ///
    /// # Errors
    /// A [`WatchError`] when the watch cannot be set up: the directory is missing, or the
    /// system's limit of watches is reached.
    pub fn new(dir: &Path) -> Result<Self, WatchError> {
        let (tx, changes) = channel();
        let fail = |source| WatchError {
            dir: dir.to_path_buf(),
            source,
        };
        let mut watcher =
            notify::recommended_watcher(move |event: notify::Result<Event>| match event {
                Ok(event) if is_status_change(&event) => {
                    let _ = tx.send(Ok(()));
                }
                Ok(_) => {}
                Err(e) => {
                    let _ = tx.send(Err(e.to_string()));
                }
            })
            .map_err(fail)?;
        watcher
            .watch(dir, RecursiveMode::NonRecursive)
            .map_err(fail)?;
        Ok(Self {
            dir: dir.to_path_buf(),
            changes,
            _watcher: watcher,
        })
    }

    /// The directory watched.
    #[must_use]
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Waits up to `timeout` for a change; the changes that came with it are taken too.
    pub fn wait(&self, timeout: Duration) -> Woken {
        let woken = match self.changes.recv_timeout(timeout) {
            Ok(Ok(())) => Woken::Changed,
            Ok(Err(_)) | Err(RecvTimeoutError::Disconnected) => Woken::Lost,
            Err(RecvTimeoutError::Timeout) => Woken::Timeout,
        };
        if woken == Woken::Changed && self.drain() == Woken::Lost {
            return Woken::Lost;
        }
        woken
    }

    /// Forgets the changes seen so far (a tick about to start reads them all); `Lost` when the
    /// watch failed meanwhile, else `Timeout`.
    pub fn drain(&self) -> Woken {
        let mut woken = Woken::Timeout;
        loop {
            match self.changes.try_recv() {
                Ok(Ok(())) => {}
                Ok(Err(_)) => woken = Woken::Lost,
                Err(std::sync::mpsc::TryRecvError::Empty) => return woken,
                Err(std::sync::mpsc::TryRecvError::Disconnected) => return Woken::Lost,
            }
        }
    }
}

/// A created, written, renamed or removed status file (`*.json`, not a dot file).
fn is_status_change(event: &Event) -> bool {
    let kind = matches!(
        event.kind,
        EventKind::Create(_) | EventKind::Modify(_) | EventKind::Remove(_) | EventKind::Any
    ) && !matches!(
        event.kind,
        EventKind::Modify(notify::event::ModifyKind::Metadata(_))
    );
    kind && event.paths.iter().any(|p| {
        p.file_name()
            .map(|n| n.to_string_lossy())
            .is_some_and(|n| !n.starts_with('.') && n.ends_with(".json"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentwatch_testkit::TempDir;

    /// Long enough for any loaded machine; a change normally arrives in milliseconds.
    const PATIENCE: Duration = Duration::from_secs(30);

    #[test]
    fn a_status_file_renamed_into_place_wakes_the_watch() {
        let tmp = TempDir::new("aw-hookwatch");
        let watch = HookWatch::new(&tmp.path).unwrap();
        assert_eq!(watch.dir(), tmp.path);
        // As a hook writes it: a dot temp file, then the rename.
        let temp = tmp.path.join(".ses1.json.tmp-1");
        std::fs::write(&temp, r#"{"status":"waiting"}"#).unwrap();
        std::fs::rename(&temp, tmp.path.join("ses1.json")).unwrap();
        assert_eq!(watch.wait(PATIENCE), Woken::Changed);
        // A file written in place, then removed.
        std::fs::write(tmp.path.join("ses2.json"), "{}").unwrap();
        assert_eq!(watch.wait(PATIENCE), Woken::Changed);
        std::fs::remove_file(tmp.path.join("ses2.json")).unwrap();
        assert_eq!(watch.wait(PATIENCE), Woken::Changed);
    }

    #[test]
    fn only_status_files_are_changes() {
        use notify::event::{AccessKind, CreateKind, MetadataKind, ModifyKind, RenameMode};
        let event = |kind, name: &str| Event::new(kind).add_path(PathBuf::from("/h").join(name));
        let create = EventKind::Create(CreateKind::File);
        let renamed = EventKind::Modify(ModifyKind::Name(RenameMode::To));
        assert!(is_status_change(&event(create, "ses1.json")));
        assert!(is_status_change(&event(renamed, "ses1.json")));
        assert!(!is_status_change(&event(create, ".ses1.json.tmp-1")));
        assert!(!is_status_change(&event(create, "notes.txt")));
        assert!(!is_status_change(&event(
            EventKind::Access(AccessKind::Any),
            "ses1.json"
        )));
        assert!(!is_status_change(&event(
            EventKind::Modify(ModifyKind::Metadata(MetadataKind::Any)),
            "ses1.json"
        )));
    }

    #[test]
    fn a_missing_directory_cannot_be_watched() {
        let tmp = TempDir::new("aw-hookwatch-missing");
        let err = HookWatch::new(&tmp.path.join("missing")).unwrap_err();
        assert!(err.to_string().contains("missing"), "{err}");
    }
}
