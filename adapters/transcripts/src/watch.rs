//! A directory of transcripts, watched: the kernel tells (inotify on Linux, through the `notify`
//! crate) when an agent writes a line, so a watcher reads it within moments instead of at its
//! next poll. Only what can hold a session counts as a change: a `*.jsonl`, `*.json` or
//! `*.jsonl.zst` file created, written, renamed or removed (a new project or subagent directory
//! too, since its files follow); reads and attribute changes do not.

use notify::{Event, EventKind, RecommendedWatcher, RecursiveMode, Watcher};
use std::path::{Path, PathBuf};

/// Why a directory cannot be watched (the caller polls it instead).
#[derive(Debug, thiserror::Error)]
#[error("cannot watch {dir}: {source}")]
pub struct WatchError {
    pub dir: PathBuf,
    #[source]
    pub source: notify::Error,
}

/// A recursive watch on one directory; it ends when dropped.
#[derive(Debug)]
pub struct DirWatch {
    dir: PathBuf,
    _watcher: RecommendedWatcher,
}

impl DirWatch {
    /// Watch `dir` and everything below it; `on_change` is called (on the watch's thread) for
    /// every change that may be a transcript's, and with `Err` when the watch fails (the
    /// kernel's queue overflowed, the directory went away): the caller then reads everything.
    ///
    /// # Errors
    /// The directory is missing, or the system's limit of watches is reached.
    pub fn new(
        dir: &Path,
        on_change: impl Fn(Result<(), String>) + Send + 'static,
    ) -> Result<Self, WatchError> {
        let fail = |source| WatchError {
            dir: dir.to_path_buf(),
            source,
        };
        let mut watcher =
            notify::recommended_watcher(move |event: notify::Result<Event>| match event {
                Ok(event) if is_transcript_change(&event) => on_change(Ok(())),
                Ok(_) => {}
                Err(e) => on_change(Err(e.to_string())),
            })
            .map_err(fail)?;
        watcher.watch(dir, RecursiveMode::Recursive).map_err(fail)?;
        Ok(Self {
            dir: dir.to_path_buf(),
            _watcher: watcher,
        })
    }

    /// The directory watched.
    #[must_use]
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

/// Whether a file event may change a session: a transcript written, created, renamed or
/// removed, or a directory created (its files come next).
fn is_transcript_change(event: &Event) -> bool {
    let kind_counts = matches!(
        event.kind,
        EventKind::Create(_) | EventKind::Modify(_) | EventKind::Remove(_) | EventKind::Any
    ) && !matches!(
        event.kind,
        EventKind::Modify(notify::event::ModifyKind::Metadata(_))
    );
    let dir_created = matches!(
        event.kind,
        EventKind::Create(notify::event::CreateKind::Folder)
    );
    kind_counts && (dir_created || event.paths.iter().any(|p| is_transcript(p)))
}

/// `*.jsonl`, `*.json` (Gemini's older whole files, a subagent's meta) or `*.jsonl.zst`.
fn is_transcript(path: &Path) -> bool {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    !name.starts_with('.')
        && (name.ends_with(".jsonl") || name.ends_with(".json") || name.ends_with(".jsonl.zst"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc::channel;
    use std::time::Duration;

    #[test]
    fn a_line_appended_below_the_directory_wakes_the_watcher() {
        let dir = tempfile::tempdir().unwrap();
        let project = dir.path().join("projects/-p");
        std::fs::create_dir_all(&project).unwrap();
        let file = project.join("s.jsonl");
        std::fs::write(&file, "{}\n").unwrap();
        let (tx, rx) = channel();
        let _watch = DirWatch::new(dir.path(), move |change| {
            let _ = tx.send(change);
        })
        .unwrap();
        std::fs::write(project.join("notes.txt"), "not a transcript").unwrap();
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&file)
            .unwrap();
        f.write_all(b"{\"type\":\"user\"}\n").unwrap();
        // The kernel reports the write; the wait is a bound, not a pace.
        let woken = rx.recv_timeout(Duration::from_secs(10));
        assert!(matches!(woken, Ok(Ok(()))), "{woken:?}");
    }

    #[test]
    fn only_transcripts_count() {
        for (name, counts) in [
            ("a.jsonl", true),
            ("agent-1.meta.json", true),
            ("rollout-1.jsonl.zst", true),
            ("notes.txt", false),
            (".a.jsonl.tmp", false),
        ] {
            assert_eq!(is_transcript(Path::new(name)), counts, "{name}");
        }
    }
}
