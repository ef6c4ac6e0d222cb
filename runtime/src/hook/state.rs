//! What the hook keeps of a session between two of its calls: where it stopped reading the
//! transcript, the reader's and the detector's state, the last calls' excerpts and the ladder.
//! One small JSON file per session (`hooks/AGENT/SESSION.json`), held under a lock while a
//! call is answered (an agent may ask for parallel calls at once) and replaced in one step.
//! A lost or unreadable state is no loss: the transcript is read again from its start.

use super::HookSetup;
use super::session::Reader;
use agentwatch_hooks::PreToolEvent;
use agentwatch_transcripts::FileCursor;
use detect_core::{DetectConfig, DetectorSnapshot, Session, SessionDetector};
use recovery_policy::hook_ladder::LadderState;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use std::fs::File;
use std::path::{Path, PathBuf};

/// The state's format; another is read as no state.
const VERSION: u32 = 1;
/// Calls whose excerpts are kept (the detector's history is as long).
const RECENT: usize = 16;

/// One session's state between two hook calls.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct HookState {
    #[serde(default)]
    version: u32,
    /// The transcript read, and how far.
    #[serde(default)]
    pub(super) transcript: Option<String>,
    #[serde(default)]
    pub(super) cursor: FileCursor,
    #[serde(default)]
    pub(super) reader: Option<Reader>,
    /// An opencode session's last message read (its server is `transcript`).
    #[serde(default)]
    pub(super) opencode_cursor: Option<String>,
    /// The detector, as of the last call read.
    #[serde(default)]
    snapshot: Option<DetectorSnapshot>,
    /// The last calls read: identity and output excerpt, oldest first.
    #[serde(default)]
    recent: VecDeque<(String, Option<String>)>,
    /// The ladder of this session.
    #[serde(default)]
    pub ladder: LadderState,
    /// Calls refused in this session, all told.
    #[serde(default)]
    pub refused: u32,
    #[serde(skip)]
    live: Option<SessionDetector>,
}

impl HookState {
    /// The session's detector: restored, or a new one for `session`.
    pub(super) fn detector(
        &mut self,
        config: &DetectConfig,
    ) -> Result<&mut SessionDetector, String> {
        if self.live.is_none() {
            let restored = self
                .snapshot
                .take()
                .and_then(|s| SessionDetector::restore(s, config));
            self.live = restored;
        }
        self.live
            .as_mut()
            .ok_or_else(|| "no detector: the session was not read".to_owned())
    }

    /// Whether the stored detector restores under `config` (else the transcript is read again
    /// from its start).
    pub(super) fn restores(&mut self, config: &DetectConfig) -> bool {
        self.detector(config).is_ok()
    }

    /// Start over: nothing read, a new detector for `session`; the ladder is kept.
    pub(super) fn restart(
        &mut self,
        transcript: Option<String>,
        session: &Session,
        config: &DetectConfig,
    ) {
        self.transcript = transcript;
        self.cursor = FileCursor::default();
        self.reader = None;
        self.opencode_cursor = None;
        self.snapshot = None;
        self.recent.clear();
        self.live = Some(SessionDetector::new(session, config));
    }

    /// A call read: remembered with its excerpt for the messages.
    pub(super) fn remember(&mut self, identity: String, excerpt: Option<String>) {
        if self.recent.len() == RECENT {
            self.recent.pop_front();
        }
        self.recent.push_back((identity, excerpt));
    }

    /// What the latest run of the call `identity` returned, when known.
    pub(super) fn returned(&self, identity: &str) -> Option<String> {
        self.recent
            .iter()
            .rev()
            .find(|(i, _)| i == identity)
            .and_then(|(_, excerpt)| excerpt.clone())
    }

    fn snapshot_json(&mut self) -> Result<Vec<u8>, String> {
        self.version = VERSION;
        self.snapshot = self.live.as_ref().map(SessionDetector::snapshot);
        serde_json::to_vec(self).map_err(|e| format!("state: {e}"))
    }
}

/// Where the state of `event`'s session is kept: `DIR/AGENT/ID.json`, the id made a safe file
/// name (a Claude subagent's calls are its own session: `ID.agent-AGENT_ID`).
pub fn state_path(dir: &Path, event: &PreToolEvent) -> PathBuf {
    let mut id = event.session_id.clone();
    if let Some(agent) = &event.agent_id {
        id.push_str(".agent-");
        id.push_str(agent);
    }
    let safe: String = id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '_'
            }
        })
        .take(160)
        .collect();
    dir.join(event.agent.as_str())
        .join(format!("{}.json", safe.trim_start_matches('.')))
}

/// A session's state, held under its lock until saved or dropped.
pub(super) struct Held {
    pub state: HookState,
    path: PathBuf,
    _lock: File,
}

impl Held {
    /// The state of `event`'s session, locked (waiting for a parallel call of the same
    /// session); an unreadable or older state reads as none.
    pub fn open(setup: &HookSetup, event: &PreToolEvent) -> Result<Self, String> {
        let path = state_path(&setup.state_dir, event);
        let dir = path.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let lock_path = path.with_extension("lock");
        let lock = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(|e| format!("{}: {e}", lock_path.display()))?;
        lock.lock()
            .map_err(|e| format!("{}: lock: {e}", lock_path.display()))?;
        let state = std::fs::read(&path)
            .ok()
            .and_then(|bytes| serde_json::from_slice::<HookState>(&bytes).ok())
            .filter(|s| s.version == VERSION)
            .unwrap_or_default();
        Ok(Self {
            state,
            path,
            _lock: lock,
        })
    }

    /// Write the state back (in one step; the lock is released when `self` drops).
    pub fn save(mut self) -> Result<(), String> {
        let bytes = self.state.snapshot_json()?;
        agentwatch_systemd::write_atomic_cache(&self.path, &bytes, 0o600).map_err(|e| e.to_string())
    }
}
