//! What a session's recent calls say about its progress (`precise`), fed the same way by the
//! batch and the incremental detector so the two cannot drift apart:
//!
//! - [`Staleness`]: which recent calls *echo* an earlier one (issue 15's "no progress": the
//!   same call with the same result), and the figures of the `repeat` signal built on them;
//! - [`PollRun`]: the polls the session has made since its last other call, for `stall`;
//! - [`Progress::settle`]: the landings only a session's history shows (rules
//!   `repeated_writes` and `output_landings`).
//!
//! Calls, results and viewed files are kept as 64-bit hashes of their text ([`Key`],
//! [`crate::hash`]), so that looking back costs no allocation and no string comparison; a
//! snapshot keeps the hashes.

use crate::config::{DetectConfig, Rule};
use crate::hash::{hash, mix};
use crate::matcher::Facts;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeSet, VecDeque};
use std::num::NonZeroU64;

/// How far back a call looks for the call it echoes.
pub const ECHO_HISTORY: usize = 16;
/// `repeat` also looks at the session's last this-many calls, landings included.
pub const STALE_WINDOW: usize = 8;
/// `repeat` fires when at least this many of the last [`STALE_WINDOW`] calls echo.
pub const STALE_MIN: u32 = 6;
/// `repeat` also fires when at least [`STALE_LONG_MIN`] of the session's last this-many calls
/// echo: a loop diluted by new calls (a noisy loop) still echoes most of the time.
pub const STALE_LONG_WINDOW: usize = 14;
/// See [`STALE_LONG_WINDOW`].
pub const STALE_LONG_MIN: u32 = 9;
/// `repeat` also fires when the session has made at least this many calls since it last landed
/// and at least half of them echo.
pub const STALE_SPAN_MIN_CALLS: u32 = 10;
/// `repeat` also fires when the session's last this-many calls are one call that failed each
/// time (status `error` or a non-zero exit), whatever the errors said: the count at which Gemini
/// CLI and Cline stop one call made again and again. Fewer are the peers' "not stuck" (issue
/// 48): four runs of one cell whose syntax error moves from line to line (OpenHands' own
/// negatives), three refused diffs before the agent reads the file (Roo Code lets three pass).
pub const FAILING_MIN: u32 = 5;
/// `repeat` also fires when one call and result occurs at least this many times among the
/// session's last [`ECHO_HISTORY`] calls, [`RECUR_RECENT_MIN`] of them among its last
/// [`RECUR_RECENT_WINDOW`].
pub const RECUR_MIN: u32 = 5;
/// See [`RECUR_MIN`].
pub const RECUR_RECENT_WINDOW: usize = 12;
/// See [`RECUR_MIN`].
pub const RECUR_RECENT_MIN: u32 = 4;
/// `repeat` also fires when at least [`CIRCLE_MIN`] of the session's last this-many calls were a
/// call before them again with the same result, repeats of at most [`CIRCLE_CALLS`] different
/// calls: a loop around a few calls diluted by new ones (a third of them new) that the echo
/// windows see too late.
pub const CIRCLE_WINDOW: usize = 11;
/// See [`CIRCLE_WINDOW`].
pub const CIRCLE_MIN: u32 = 6;
/// See [`CIRCLE_WINDOW`].
pub const CIRCLE_CALLS: usize = 4;
/// How many bash writes of unknown exit wait for a view to confirm them.
const UNCONFIRMED_MAX: usize = 8;
/// How many different polls one stall may alternate between (a job's log and its status).
const POLLS_IN_A_RUN: usize = 4;

/// A call (its identity) and what it saw (its result), hashed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Key {
    /// The identity.
    pub(crate) call: u64,
    /// The identity and the result.
    pub(crate) seen: u64,
    /// The result is the hash of an output that is not empty (else a status and exit, or an
    /// empty output).
    pub(crate) hashed: bool,
}

impl Key {
    pub(crate) fn of(identity: &str, result: &str) -> Self {
        let call = hash(identity);
        let seen = mix(call, result);
        Self {
            call,
            seen,
            // An empty output (`git add`, `mkdir`) says nothing of what a landing changed: it
            // is forgiven by a landing as a status is.
            hashed: result.starts_with('#') && result != EMPTY_OUTPUT,
        }
    }

    /// The key of a result written as `identity \x1f result` (snapshots before the hashes).
    fn of_text(text: &str) -> Self {
        let (identity, result) = text.rsplit_once('\u{1f}').unwrap_or((text, ""));
        Self::of(identity, result)
    }
}

/// The result of a call whose output, without its noise, is empty (`#` and the hash of "").
const EMPTY_OUTPUT: &str = "#cbf29ce484222325";

/// One call as [`Staleness`] remembers it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "EchoForm")]
pub(crate) struct Echo {
    /// The call and its result; `None` for a poll (which echoes nothing) and for a result
    /// without an output hash once a landing forgot it.
    #[serde(rename = "k", skip_serializing_if = "Option::is_none")]
    seen: Option<u64>,
    /// The call alone.
    #[serde(rename = "i")]
    call: u64,
    #[serde(rename = "h", skip_serializing_if = "std::ops::Not::not")]
    hashed: bool,
    /// The lines of one file it showed (the file's [`hash`]), until the session lands.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    view: Option<(u64, u64, u64)>,
    /// The call failed ([`crate::CallFacts::failed`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    failed: bool,
    /// A poll.
    #[serde(default, rename = "p", skip_serializing_if = "std::ops::Not::not")]
    poll: bool,
    /// A success known only by its status ([`crate::CallFacts::blind`]) that echoes, if at all,
    /// by that status alone (not a region of a file shown again, not a change re-sent): its echo
    /// supports a loop other calls show, as a poll's does, and makes none.
    #[serde(default, rename = "b", skip_serializing_if = "std::ops::Not::not")]
    blind: bool,
    /// It was one of the calls before it again, with the same result (not a view alone).
    #[serde(default, rename = "r", skip_serializing_if = "std::ops::Not::not")]
    repeated: bool,
    /// It succeeded and the session landed after it: a check that passes the same way after
    /// a change landed confirms the change (edit, test `ok`, edit, test `ok` is work), so
    /// `recur` and `circle` count it no longer. It still echoes, as the same failure after a
    /// landing still counts everywhere (the change did not help).
    #[serde(default, rename = "a", skip_serializing_if = "std::ops::Not::not")]
    confirmed: bool,
}

/// An [`Echo`] as snapshots hold it: hashed (`k`, `i`, `h`), or as text (`key`, before the
/// hashes).
#[derive(Deserialize)]
struct EchoForm {
    #[serde(default)]
    k: Option<u64>,
    #[serde(default)]
    i: Option<u64>,
    #[serde(default)]
    h: bool,
    #[serde(default)]
    key: Option<String>,
    #[serde(default)]
    view: Option<(PathForm, u64, u64)>,
    #[serde(default)]
    failed: bool,
    #[serde(default)]
    p: bool,
    #[serde(default)]
    b: bool,
    #[serde(default)]
    r: bool,
    #[serde(default)]
    a: bool,
}

/// A viewed file as snapshots hold it: its hash, or its path (before the hashes).
#[derive(Deserialize)]
#[serde(untagged)]
enum PathForm {
    Hash(u64),
    Text(String),
}

impl From<EchoForm> for Echo {
    fn from(form: EchoForm) -> Self {
        let old = form.key.as_deref().map(Key::of_text);
        Self {
            seen: form.k.or(old.map(|k| k.seen)),
            call: form.i.or(old.map(|k| k.call)).unwrap_or(0),
            hashed: form.h || old.is_some_and(|k| k.hashed),
            view: form.view.map(|(path, a, b)| {
                let path = match path {
                    PathForm::Hash(h) => h,
                    PathForm::Text(text) => hash(&text),
                };
                (path, a, b)
            }),
            failed: form.failed,
            poll: form.p,
            blind: form.b,
            repeated: form.r,
            confirmed: form.a,
        }
    }
}

/// Which of a session's last calls made no progress. A call *echoes* when it is one of the
/// [`ECHO_HISTORY`] calls before it again with the same result (the same output hash where there
/// is one, otherwise the same identity with the same exit status), or when at least half of the
/// lines of a file it shows were shown by one of them since the session last landed. A landing
/// forgives no echo by output hash, since the hash says whether the landing changed what the call
/// sees; it forgives an echo by exit status alone, which cannot say. A poll echoes nothing.
#[derive(Debug, Clone, Default)]
pub(crate) struct Staleness {
    pub(crate) history: VecDeque<Echo>,
    /// Whether each of the last [`STALE_LONG_WINDOW`] calls echoed.
    pub(crate) recent: VecDeque<bool>,
    /// The calls since the session last landed, and how many of them echoed.
    pub(crate) since_landed: (u32, u32),
    /// Bit `i` is set when the call `i` calls before the last (0: the last) echoed: `recent`
    /// as bits, so that [`Staleness::count`] looks back without a walk (it runs at every call).
    echoes: u32,
    /// Bit `i` is set when the call `i` calls before the last is a poll ([`Echo::poll`]), as
    /// `history` holds it.
    polls: u32,
    /// Bit `i` is set when that call is a success whose echo rests on its status alone
    /// ([`Echo::blind`]).
    blinds: u32,
    /// Bit `i` is set when that call may have been a repeat ([`Echo::repeated`]); set for the
    /// calls of a restored history, which may predate the flag.
    repeats: u32,
    /// Bit `i` is set when that call is a repeat as `history` holds it ([`Echo::repeated`]):
    /// `recur` and `circle` look back only when there is one.
    repeated: u32,
}

/// How many of the last `n` calls (`n` < 32) have their bit set in `bits`.
fn among_last(bits: u32, n: usize) -> u32 {
    (bits & low_bits(n)).count_ones()
}

/// Flags of calls, oldest first, as bits: bit `i` for the call `i` calls before the last.
fn last_bits(flags: impl DoubleEndedIterator<Item = bool>) -> u32 {
    flags
        .rev()
        .take(32)
        .enumerate()
        .fold(0, |bits, (i, set)| bits | u32::from(set) << i)
}

/// The bits of the last `n` calls (`n` < 32).
fn low_bits(n: usize) -> u32 {
    (1u32 << n) - 1
}

impl Staleness {
    /// A history restored from a snapshot: its bounds start at their largest.
    pub(crate) fn restored(
        history: VecDeque<Echo>,
        recent: VecDeque<bool>,
        since_landed: (u32, u32),
    ) -> Self {
        Self {
            echoes: last_bits(recent.iter().copied()),
            polls: last_bits(history.iter().map(|e| e.poll)),
            blinds: last_bits(history.iter().map(|e| e.blind)),
            repeated: last_bits(history.iter().map(|e| e.repeated)),
            history,
            recent,
            since_landed,
            repeats: u32::MAX,
        }
    }

    /// Upper bounds of `repeat`'s figures `stale`, `stale_long`, `recur` and `circle` (in that
    /// order), from the bits kept at each call rather than a look back, for a caller that only
    /// needs to know whether they can reach a threshold. `count` counts echoes among the last
    /// calls (a poll's at most once); `circle` repeats among them; `recur` is 0 unless
    /// [`RECUR_RECENT_MIN`] occurrences of one call and result are among the last
    /// [`RECUR_RECENT_WINDOW`] calls, and every occurrence of one in the history but its first
    /// was a repeat (the first was in the history when it came).
    pub(crate) fn bounds(&self) -> [u32; 4] {
        let recur = if among_last(self.repeats, RECUR_RECENT_WINDOW) + 1 < RECUR_RECENT_MIN {
            0
        } else {
            among_last(self.repeats, ECHO_HISTORY) + 1
        };
        [
            among_last(self.echoes, STALE_WINDOW),
            among_last(self.echoes, STALE_LONG_WINDOW),
            recur,
            among_last(self.repeats, CIRCLE_WINDOW),
        ]
    }

    /// How this call (its identity hash) fared among the calls remembered: how many of them
    /// it was, how many of those repeated an earlier one's result, how many failed, and how
    /// many calls back it last ran (1: the last call).
    pub(crate) fn occurrences(&self, call: u64) -> (u32, u32, u32, Option<u32>) {
        let (mut same, mut echoed, mut failed, mut last_ago) = (0u32, 0u32, 0u32, None);
        for (ago, echo) in self.history.iter().rev().enumerate() {
            if echo.call != call || echo.poll {
                continue;
            }
            same += 1;
            echoed += u32::from(echo.repeated);
            failed += u32::from(echo.failed);
            last_ago = last_ago.or(u32::try_from(ago + 1).ok());
        }
        (same, echoed, failed, last_ago)
    }

    /// Whether a call of `key` would echo one of the calls remembered, by its result alone.
    fn seen(&self, key: &Key) -> bool {
        self.history.iter().any(|e| e.seen == Some(key.seen))
    }

    /// Account for the next counted call (`facts.landed` as finally judged).
    fn push(&mut self, facts: &Facts<'_>, key: &Key) {
        // A poll is remembered only by an output hash: a job that shows nothing new is seen so,
        // a status alone cannot say.
        let seen = (!facts.wait || key.hashed).then_some(key.seen);
        let view = if facts.wait {
            None
        } else {
            facts.view.map(|(path, a, b)| (hash(path), a, b))
        };
        let repeated = seen.is_some() && self.seen(key);
        let by_result = repeated || facts.resent;
        let status_alone = facts.blind() && !facts.resent;
        // A region shown again is looked for when nothing else echoed, or to tell a status's
        // echo from a view's.
        let shown_again = (!by_result || status_alone)
            && view.is_some_and(|(path, a, b)| {
                self.history.iter().any(|e| {
                    e.view
                        .is_some_and(|(p, x, y)| p == path && shows_half_again(a, b, x, y))
                })
            });
        let echoed = by_result || shown_again;
        // Its echo rests on a status alone: evidence only beside other calls'.
        let blind = status_alone && !shown_again;
        if facts.landed {
            // A landing may have changed any file: what was shown before it is no evidence, and
            // neither is a result without an output hash.
            for e in &mut self.history {
                e.view = None;
                if !e.hashed {
                    e.seen = None;
                }
                e.confirmed |= !e.failed;
            }
        }
        if self.history.len() == ECHO_HISTORY {
            self.history.pop_front();
        }
        self.history.push_back(Echo {
            seen,
            call: key.call,
            hashed: key.hashed,
            view,
            failed: facts.failed,
            poll: facts.wait,
            blind,
            repeated,
            confirmed: false,
        });
        if self.recent.len() == STALE_LONG_WINDOW {
            self.recent.pop_front();
        }
        self.recent.push_back(echoed);
        self.echoes = self.echoes << 1 | u32::from(echoed);
        self.polls = self.polls << 1 | u32::from(facts.wait);
        self.blinds = self.blinds << 1 | u32::from(blind);
        self.repeats = self.repeats << 1 | u32::from(repeated);
        self.repeated = self.repeated << 1 | u32::from(repeated);
        self.since_landed = if facts.landed {
            (0, 0)
        } else {
            // A poll is a call the agent made; its echo is waiting, not half of a loop. A
            // success known by its status alone says too little to make half of one.
            let (calls, echoes) = self.since_landed;
            (
                calls.saturating_add(1),
                echoes.saturating_add(u32::from(echoed && !facts.wait && !blind)),
            )
        };
    }

    /// How many of the last `window` calls echoed, polls that saw what they saw and successes
    /// known only by their status each counted only as many times as other calls echo (waiting
    /// on a silent job alone is `stall`'s; calls known to have run, not what they saw, are no
    /// loop by themselves).
    pub(crate) fn count(&self, window: usize) -> u32 {
        // The last calls that both `recent` and `history` hold, as bits (the two are pushed
        // together; a restored pair may differ in length).
        let calls = window.min(self.recent.len()).min(self.history.len());
        let echoed = self.echoes & low_bits(calls);
        let waits = (echoed & self.polls).count_ones();
        let blind = (echoed & !self.polls & self.blinds).count_ones();
        let others = (echoed & !self.polls & !self.blinds).count_ones();
        others + waits.min(others) + blind.min(others)
    }

    /// Whether the last call echoed and is no poll, nor a success known only by its status: a
    /// call that makes no progress as a loop's length counts them ([`crate::no_progress_calls`]).
    pub(crate) fn last_made_no_progress(&self) -> bool {
        self.recent.back() == Some(&true)
            && self.history.back().is_some_and(|e| !e.poll && !e.blind)
    }

    /// `repeat`'s figure `circle`: how many of the last [`CIRCLE_WINDOW`] calls were one of the
    /// calls before them again with the same result (polls that saw the same and successes known
    /// only by their status counted as in [`Staleness::count`]), when they are repeats of at
    /// most [`CIRCLE_CALLS`] different calls (0 otherwise).
    pub(crate) fn circle(&self) -> u32 {
        if among_last(self.repeated, CIRCLE_WINDOW) == 0 {
            return 0;
        }
        let from = self.history.len().saturating_sub(CIRCLE_WINDOW);
        let mut distinct: [u64; CIRCLE_CALLS] = [0; CIRCLE_CALLS];
        let (mut kinds, mut others, mut waits, mut blind) = (0, 0u32, 0u32, 0u32);
        for e in self
            .history
            .iter()
            .skip(from)
            .filter(|e| e.repeated && !e.confirmed)
        {
            // A repeat by status alone that a landing forgave counts no longer.
            let Some(seen) = e.seen else { continue };
            if e.poll {
                waits += 1;
            } else if e.blind {
                blind += 1;
            } else {
                others += 1;
            }
            if !distinct[..kinds].contains(&seen) {
                if kinds == CIRCLE_CALLS {
                    return 0;
                }
                distinct[kinds] = seen;
                kinds += 1;
            }
        }
        // Polls that saw the same count as many times as other calls repeat, as in `count`.
        others + waits.min(others) + blind.min(others)
    }

    /// `repeat`'s figure `failing`: how many of the last calls are one call that failed each
    /// time, in a row, whatever it returned (a poll breaks the row; 0 when the last call did
    /// not fail).
    pub(crate) fn failing(&self) -> u32 {
        let counts = |e: &&Echo| e.failed && !e.poll && e.seen.is_some();
        let Some(last) = self.history.back().filter(counts) else {
            return 0;
        };
        let run = self
            .history
            .iter()
            .rev()
            .take_while(|e| counts(e) && e.call == last.call)
            .count();
        u32::try_from(run).unwrap_or(u32::MAX)
    }

    /// `repeat`'s figure `recur` (successes a landing confirmed not counted): the most times
    /// one call and result occurs among the last
    /// [`ECHO_HISTORY`] calls, of those that occur at least [`RECUR_RECENT_MIN`] times among the
    /// last [`RECUR_RECENT_WINDOW`] (0 when none does).
    pub(crate) fn recur(&self) -> u32 {
        let recent_from = self.history.len().saturating_sub(RECUR_RECENT_WINDOW);
        // Cheap bound first (this runs at every call): a call and result occurring
        // RECUR_RECENT_MIN times among the recent calls was a repeat at each occurrence but its
        // first (the first was still in the history then, and a result is never seen again
        // once forgotten), so fewer repeats than that among them leave nothing to count.
        if among_last(self.repeated, RECUR_RECENT_WINDOW) + 1 < RECUR_RECENT_MIN {
            return 0;
        }
        // A success a landing confirmed is no recurrence ([`Echo::confirmed`]).
        let counted = |e: &Echo| (!e.confirmed).then_some(e.seen).flatten();
        let mut best = 0;
        for (i, e) in self.history.iter().enumerate().skip(recent_from) {
            // A poll that sees the same again is waiting (`stall` counts it); a success known
            // only by its status coming back says that it ran again, not that nothing changed.
            let Some(seen) = counted(e).filter(|_| !e.poll && !e.blind) else {
                continue;
            };
            let recent = self.history.iter().skip(recent_from);
            // Count each call once, at its first occurrence in the recent calls.
            if recent
                .clone()
                .take(i - recent_from)
                .any(|o| counted(o) == Some(seen))
            {
                continue;
            }
            let in_recent = recent.filter(|o| counted(o) == Some(seen)).count();
            if u32::try_from(in_recent).unwrap_or(u32::MAX) >= RECUR_RECENT_MIN {
                let all = self
                    .history
                    .iter()
                    .filter(|o| counted(o) == Some(seen))
                    .count();
                best = best.max(u32::try_from(all).unwrap_or(u32::MAX));
            }
        }
        best
    }
}

/// Whether the lines `a..=b` of a view were at least half shown by an earlier view of `x..=y`.
fn shows_half_again(a: u64, b: u64, x: u64, y: u64) -> bool {
    let (from, to) = (a.max(x), b.min(y));
    if from > to {
        return false;
    }
    // Saturating: ranges come from the model's offsets and can reach u64::MAX.
    let shown = (to - from).saturating_add(1);
    let lines = b.saturating_sub(a).saturating_add(1);
    shown.saturating_mul(2) >= lines
}

/// The polls a session has made since its last other call, for `stall`: as long as every poll
/// sees what the same poll saw before in the run (a bare `sleep` between them included), the run
/// goes on; a poll that sees something new starts a new run, another call ends it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct PollRun {
    /// When the run's first poll saw its result (its end, else its start).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    from_ms: Option<i64>,
    /// When its latest poll ended (else started).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    to_ms: Option<i64>,
    /// Polls in the run.
    #[serde(default)]
    polls: u32,
    /// The polls of the run and what each saw: (call, call and result).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    seen: Vec<(u64, u64)>,
}

impl PollRun {
    fn push(&mut self, facts: &Facts<'_>, key: &Key) {
        if !facts.wait {
            if self.polls > 0 {
                *self = Self::default();
            }
            return;
        }
        let same_call = self.seen.iter().find(|(call, _)| *call == key.call);
        let fresh = match same_call {
            Some((_, seen)) => *seen != key.seen,
            None => self.seen.len() == POLLS_IN_A_RUN,
        };
        if fresh {
            *self = Self::default();
        }
        if !self.seen.iter().any(|(call, _)| *call == key.call) {
            self.seen.push((key.call, key.seen));
        }
        let at = facts.end_ms.or(facts.start_ms);
        if self.polls == 0 {
            self.from_ms = at;
        }
        self.to_ms = match (self.to_ms, at) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => b.or(a),
        };
        self.polls = self.polls.saturating_add(1);
    }

    /// `stall`'s figures: the seconds the run has lasted and its polls (0, 0 for a single poll,
    /// which repeats nothing).
    pub(crate) fn figures(&self) -> (u64, u32) {
        if self.polls < 2 {
            return (0, 0);
        }
        let ms = match (self.from_ms, self.to_ms) {
            (Some(a), Some(b)) => b.saturating_sub(a).max(0),
            _ => 0,
        };
        (u64::try_from(ms / 1000).unwrap_or(0), self.polls)
    }
}

/// Everything a session's history decides about its next call: [`Staleness`], the [`PollRun`],
/// and the landings only the history shows.
#[derive(Debug, Clone, Default)]
pub(crate) struct Progress {
    pub(crate) staleness: Staleness,
    pub(crate) polls: PollRun,
    /// Identities of the bash writes that landed (a repeat is no landing).
    pub(crate) written: BTreeSet<String>,
    /// The calls of write and edit tools that landed, as [`Key::call`] hashes: one sent again
    /// that does not land is no progress.
    pub(crate) sent: BTreeSet<u64>,
    /// The commits that landed, as hashes of their names ([`crate::CallFacts::commit`]): a
    /// commit named again is no new work.
    pub(crate) commits: BTreeSet<NonZeroU64>,
    /// Bash writes of unknown exit not yet confirmed: (file, identity), oldest first.
    pub(crate) unconfirmed: Vec<(String, String)>,
}

impl Progress {
    /// Decide the landings the history shows, on `facts` as the matcher read them: a bash
    /// write or a write tool's call identical to one that landed is no landing, nor is a commit
    /// the session landed already, and a write or edit tool's call identical to one that landed,
    /// not landing, is re-sent: an echo whatever it returned (`repeated_writes`); a bash write
    /// of unknown exit waits for a view of its file, and that view lands when it shows what no
    /// recent call showed (`output_landings`). Returns the call's key.
    pub(crate) fn settle(&mut self, facts: &mut Facts<'_>, config: &DetectConfig) -> Key {
        let key = Key::of(facts.identity, facts.result);
        let repeated_writes = config.applies(Rule::RepeatedWrites);
        // The matcher names a commit only under `repeated_writes`, for a call it landed.
        if let Some(commit) = facts.commit
            && facts.landed
            && !self.commits.insert(commit)
        {
            facts.landed = false;
        }
        if facts.write && repeated_writes {
            if self.written.contains(facts.identity) {
                facts.landed = false;
            } else {
                self.written.insert(facts.identity.to_owned());
            }
        }
        // Only tool calls: a bash write sent again is judged by its result, as any command
        // (`CallFacts::resent`).
        if facts.tool_change && repeated_writes {
            if facts.landed {
                // Remembered, not demoted: an edit that changed the file again was undone
                // between.
                self.sent.insert(key.call);
            } else {
                facts.resent = self.sent.contains(&key.call);
            }
        }
        if !config.applies(Rule::OutputLandings) {
            return key;
        }
        if let Some(file) = facts.unconfirmed_write
            && !(repeated_writes && self.written.contains(facts.identity))
        {
            self.unconfirmed.retain(|(f, _)| f != file);
            if self.unconfirmed.len() == UNCONFIRMED_MAX {
                self.unconfirmed.remove(0);
            }
            self.unconfirmed
                .push((file.to_owned(), facts.identity.to_owned()));
        }
        if !facts.landed
            && key.hashed
            && let Some(file) = facts.shows_file
            && let Some(at) = self.unconfirmed.iter().position(|(f, _)| f == file)
            && !self.staleness.seen(&key)
        {
            let (_, write) = self.unconfirmed.remove(at);
            if repeated_writes {
                self.written.insert(write);
            }
            facts.landed = true;
        }
        key
    }

    /// Account for the next counted call, its landing settled.
    pub(crate) fn record(&mut self, facts: &Facts<'_>, key: &Key) {
        self.staleness.push(facts, key);
        self.polls.push(facts, key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A call for [`Staleness::push`]: (identity, result, poll, failed, landed, view).
    type Pushed = (u8, u8, bool, bool, bool, Option<(u8, u64)>);

    fn pushed() -> impl Strategy<Value = Pushed> {
        (
            0u8..4,
            0u8..3,
            prop::bool::weighted(0.15),
            prop::bool::weighted(0.3),
            prop::bool::weighted(0.1),
            prop::option::weighted(0.3, (0u8..2, 1u64..4)),
        )
    }

    fn push(staleness: &mut Staleness, (call, result, wait, failed, landed, view): Pushed) {
        let identity = format!("bash c{call}");
        // Results 0 and 1 are output hashes, 2 a status.
        let result = match result {
            2 => "completed 1".to_owned(),
            r => format!("#000000000000000{r}"),
        };
        let path = view.map(|(file, _)| format!("f{file}"));
        let facts = Facts {
            identity: &identity,
            target: &identity,
            landed,
            write: false,
            read: None,
            wait,
            view: path
                .as_deref()
                .zip(view)
                .map(|(p, (_, at))| (p, at * 10, at * 10 + 15)),
            result: &result,
            failed,
            unconfirmed_write: None,
            shows_file: None,
            resent: false,
            tool_change: false,
            commit: None,
            start_ms: None,
            end_ms: None,
        };
        staleness.push(&facts, &Key::of(&identity, &result));
    }

    proptest! {
        /// `bounds` is never below the figures it bounds, for a history pushed call by call and
        /// for one restored from a snapshot part way.
        #[test]
        fn the_bounds_bound_the_figures(calls in prop::collection::vec(pushed(), 0..60), cut in 0usize..60) {
            let mut staleness = Staleness::default();
            for (i, call) in calls.into_iter().enumerate() {
                if i == cut {
                    staleness = Staleness::restored(
                        staleness.history.clone(),
                        staleness.recent.clone(),
                        staleness.since_landed,
                    );
                }
                push(&mut staleness, call);
                let [stale, stale_long, recur, circle] = staleness.bounds();
                prop_assert!(stale >= staleness.count(STALE_WINDOW));
                prop_assert!(stale_long >= staleness.count(STALE_LONG_WINDOW));
                prop_assert!(recur >= staleness.recur());
                prop_assert!(circle >= staleness.circle());
            }
        }
    }

    #[test]
    fn the_empty_output_is_the_hash_of_nothing() {
        assert_eq!(EMPTY_OUTPUT, format!("#{}", crate::output::text_hash("")));
        assert!(!Key::of("bash git add a.py", EMPTY_OUTPUT).hashed);
        assert!(Key::of("bash git add a.py", "#0000000000000001").hashed);
        assert!(!Key::of("bash git add a.py", "completed 0").hashed);
    }
}
