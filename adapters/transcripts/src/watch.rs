//! A directory of transcripts, watched: the kernel tells (inotify on Linux, through the `notify`
//! crate) when an agent writes a line, so a watcher reads it within moments instead of at its
//! next poll. Only what can hold a session counts as a change: a `*.jsonl`, `*.json` or
//! `*.jsonl.zst` file created, written, renamed or removed (a new project or subagent directory
//! too, since its files follow); reads and attribute changes do not.
//!
//! The directory need not exist yet: an agent installed after the watcher started creates it
//! (`~/.claude` at its first session). Until it does, its nearest existing ancestor is watched
//! (that directory alone, not what is below it), one level deeper each time the next directory
//! on the way appears; once the directory is there it is watched whole, and the caller is told
//! (its first files may be written already). The same after the directory is deleted: its
//! ancestor is watched again until it comes back.
//!
//! ```text
//! notify's thread --events--> the watch's own thread: re-arms the watch (it owns the watcher,
//!                             which cannot be changed from notify's thread), then calls
//!                             on_change
//! ```

use notify::event::{CreateKind, ModifyKind};
use notify::{Event, EventKind, RecommendedWatcher, RecursiveMode, Watcher};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, Sender, channel};

/// Why a directory cannot be watched (the caller polls it instead).
#[derive(Debug, thiserror::Error)]
#[error("cannot watch {dir}: {source}")]
pub struct WatchError {
    pub dir: PathBuf,
    #[source]
    pub source: notify::Error,
}

/// A recursive watch on one directory, or on its nearest ancestor until it exists; it ends
/// when dropped.
#[derive(Debug)]
pub struct DirWatch {
    dir: PathBuf,
    control: Sender<Msg>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// What the watch's thread takes: notify's events, and the request to stop.
#[derive(Debug)]
enum Msg {
    Event(notify::Result<Event>),
    Stop,
}

/// Where the watch stands.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Armed {
    /// The directory itself, recursively.
    Target,
    /// Its nearest existing ancestor, alone.
    Ancestor(PathBuf),
}

impl DirWatch {
    /// Watch `dir` and everything below it, from the moment it exists; `on_change` is called
    /// (on the watch's thread) for every change that may be a transcript's, once when the
    /// directory appears, and with `Err` when the watch fails (the kernel's queue overflowed, a
    /// watch could not be added): the caller then reads everything.
    ///
    /// # Errors
    /// Neither the directory nor any ancestor can be watched (the system's limit of watches).
    pub fn new(
        dir: &Path,
        on_change: impl Fn(Result<(), String>) + Send + 'static,
    ) -> Result<Self, WatchError> {
        let fail = |source| WatchError {
            dir: dir.to_path_buf(),
            source,
        };
        let (control, events) = channel();
        let to_thread = control.clone();
        let mut watcher = notify::recommended_watcher(move |event| {
            let _ = to_thread.send(Msg::Event(event));
        })
        .map_err(fail)?;
        let armed = arm(&mut watcher, dir, None).map_err(fail)?;
        let target = dir.to_path_buf();
        let thread = std::thread::Builder::new()
            .name("agentwatch-watch".to_owned())
            .spawn(move || {
                Follow {
                    watcher,
                    dir: target,
                    armed,
                }
                .run(&events, &on_change);
            })
            .map_err(|e| fail(notify::Error::io(e)))?;
        Ok(Self {
            dir: dir.to_path_buf(),
            control,
            thread: Some(thread),
        })
    }

    /// The directory watched.
    #[must_use]
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

impl Drop for DirWatch {
    fn drop(&mut self) {
        let _ = self.control.send(Msg::Stop);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The watch's thread: the watcher, the directory and where the watch stands.
struct Follow {
    watcher: RecommendedWatcher,
    dir: PathBuf,
    armed: Armed,
}

impl Follow {
    fn run(mut self, events: &Receiver<Msg>, on_change: &dyn Fn(Result<(), String>)) {
        while let Ok(Msg::Event(event)) = events.recv() {
            match event {
                Ok(event) => self.take(&event, on_change),
                Err(e) => on_change(Err(e.to_string())),
            }
        }
    }

    /// One event: re-arm when the directory appeared or went, else pass a transcript's change.
    fn take(&mut self, event: &Event, on_change: &dyn Fn(Result<(), String>)) {
        if event.need_rescan() {
            return on_change(Err("the kernel dropped file events".to_owned()));
        }
        let moved = match &self.armed {
            // Any change in the ancestor may be the next directory on the way.
            Armed::Ancestor(at) => {
                self.dir.is_dir() || nearest_existing(&self.dir).as_deref() != Some(at.as_path())
            }
            Armed::Target => is_gone(event, &self.dir),
        };
        if moved {
            let was = std::mem::replace(&mut self.armed, Armed::Target);
            match arm(&mut self.watcher, &self.dir, Some(&was)) {
                Ok(armed) => self.armed = armed,
                Err(e) => {
                    self.armed = was;
                    return on_change(Err(format!("cannot watch {}: {e}", self.dir.display())));
                }
            }
            // It appeared (its first files may be there) or went (its sessions with it).
            if self.armed == Armed::Target || was == Armed::Target {
                on_change(Ok(()));
            }
            return;
        }
        if self.armed != Armed::Target {
            return;
        }
        if matches!(event.kind, EventKind::Create(CreateKind::Folder)) {
            // notify watches a new directory only after it handed out its event: watched here
            // first, so nothing written in it after the read this change asks for goes unseen.
            for path in &event.paths {
                let _ = self.watcher.watch(path, RecursiveMode::Recursive);
            }
        }
        if is_transcript_change(event) {
            on_change(Ok(()));
        }
    }
}

/// Watch `dir` recursively when it exists, else its nearest existing ancestor alone, leaving
/// what `was` watched; again until what was looked at stands still (a directory on the way may
/// appear meanwhile).
fn arm(
    watcher: &mut RecommendedWatcher,
    dir: &Path,
    was: Option<&Armed>,
) -> Result<Armed, notify::Error> {
    let mut was = was.cloned();
    // Bounded: a directory made and removed over and over gives up after a few turns, and the
    // next event tries again.
    for _ in 0..8 {
        match was.take() {
            Some(Armed::Target) => {
                let _ = watcher.unwatch(dir);
            }
            Some(Armed::Ancestor(at)) => {
                let _ = watcher.unwatch(&at);
            }
            None => {}
        }
        if dir.is_dir() && watcher.watch(dir, RecursiveMode::Recursive).is_ok() {
            return Ok(Armed::Target);
        }
        let Some(at) = nearest_existing(dir) else {
            return Err(notify::Error::path_not_found().add_path(dir.to_path_buf()));
        };
        watcher.watch(&at, RecursiveMode::NonRecursive)?;
        if !dir.is_dir() && nearest_existing(dir).as_deref() == Some(at.as_path()) {
            return Ok(Armed::Ancestor(at));
        }
        was = Some(Armed::Ancestor(at));
    }
    Err(notify::Error::generic(
        "the directory keeps appearing and going",
    ))
}

/// The nearest ancestor of `dir` that is a directory (`dir` itself excluded).
fn nearest_existing(dir: &Path) -> Option<PathBuf> {
    dir.ancestors()
        .skip(1)
        .find(|p| p.is_dir())
        .map(Path::to_path_buf)
}

/// Whether `event` says the watched directory itself went (removed, or renamed away).
fn is_gone(event: &Event, dir: &Path) -> bool {
    let about_dir = event.paths.iter().any(|p| p == dir);
    // Removed and made again before this is read: its watch went with it all the same.
    about_dir
        && matches!(
            event.kind,
            EventKind::Remove(_) | EventKind::Modify(ModifyKind::Name(_))
        )
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
    let dir_created = matches!(event.kind, EventKind::Create(CreateKind::Folder));
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
    use std::io::Write;
    use std::sync::mpsc::channel;
    use std::time::Duration;

    /// The kernel reports a write within moments; the wait is a bound, not a pace.
    const BOUND: Duration = Duration::from_secs(10);

    fn watch(dir: &Path) -> (DirWatch, Receiver<Result<(), String>>) {
        let (tx, rx) = channel();
        let watch = DirWatch::new(dir, move |change| {
            let _ = tx.send(change);
        })
        .unwrap();
        (watch, rx)
    }

    fn append(file: &Path, line: &str) {
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(file)
            .unwrap();
        f.write_all(line.as_bytes()).unwrap();
    }

    /// Take what the watch said until it says a change (skipping nothing else: every message
    /// is a change or a failure).
    fn woken(rx: &Receiver<Result<(), String>>) {
        let got = rx.recv_timeout(BOUND);
        assert!(matches!(got, Ok(Ok(()))), "{got:?}");
    }

    #[test]
    fn a_line_appended_below_the_directory_wakes_the_watcher() {
        let dir = tempfile::tempdir().unwrap();
        let project = dir.path().join("projects/-p");
        std::fs::create_dir_all(&project).unwrap();
        let file = project.join("s.jsonl");
        std::fs::write(&file, "{}\n").unwrap();
        let (_watch, rx) = watch(dir.path());
        std::fs::write(project.join("notes.txt"), "not a transcript").unwrap();
        append(&file, "{\"type\":\"user\"}\n");
        woken(&rx);
    }

    /// An agent installed after the watch started: its directory (two levels down from what
    /// exists) appears, then a project directory and a transcript in it; each wakes the
    /// watcher, the transcript's lines too.
    #[test]
    fn a_directory_made_after_the_watch_started_is_followed() {
        let home = tempfile::tempdir().unwrap();
        let agent = home.path().join("config/.claude");
        let (watch, rx) = watch(&agent);
        assert_eq!(watch.dir(), agent);
        // Something else in the home wakes nobody.
        std::fs::write(home.path().join("notes.jsonl"), "{}\n").unwrap();
        std::fs::create_dir_all(agent.join("projects/-p")).unwrap();
        woken(&rx);
        let file = agent.join("projects/-p/s.jsonl");
        append(&file, "{\"type\":\"user\"}\n");
        woken(&rx);
        while rx.try_recv().is_ok() {}
        append(&file, "{\"type\":\"assistant\"}\n");
        woken(&rx);
    }

    /// The directory deleted and made again: the watch follows it back.
    #[test]
    fn a_directory_deleted_and_made_again_is_followed() {
        let home = tempfile::tempdir().unwrap();
        let agent = home.path().join(".gemini");
        std::fs::create_dir_all(&agent).unwrap();
        let (_watch, rx) = watch(&agent);
        std::fs::remove_dir_all(&agent).unwrap();
        woken(&rx);
        std::fs::create_dir_all(agent.join("tmp/p/chats")).unwrap();
        woken(&rx);
        while rx.try_recv().is_ok() {}
        append(&agent.join("tmp/p/chats/session-1.jsonl"), "{}\n");
        woken(&rx);
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
