//! The detector: the evaluation span, the window and the signals.
//!
//! Under the `precise` profile (the default) the rules of [`crate::Rule`] apply: more landings
//! (bash writes unless one repeats an earlier one, commits and writes the outputs confirm), other
//! bash targets, polls that never loop by themselves, and four more signals (`cycle`, `reread`,
//! `repeat`, `stall`). What the session's history decides is in [`crate::progress`].
//!
//! Two forms that always agree (a proptest pins it, under both profiles):
//! - [`judge_session`]: judge a whole history at once (batch);
//! - [`SessionDetector`]: push calls one at a time and read the verdict at any point (incremental),
//!   O(1) amortised per push; reading a verdict costs O(window).

use crate::config::{DetectConfig, Profile, Rule};
use crate::json::Json;
use crate::matcher::{
    CallContext, CallFacts, CallRef, Context, Facts, LineCounts, LineCountsText, Scratch, facts,
};
use crate::model::{Call, Session};
use crate::names::Names;
use crate::progress::{
    CIRCLE_MIN, Echo, FAILING_MIN, Key, PollRun, Progress, RECUR_MIN, STALE_LONG_MIN,
    STALE_LONG_WINDOW, STALE_MIN, STALE_SPAN_MIN_CALLS, STALE_WINDOW, Staleness,
};
use crate::verdict::{PendingCall, Reason, SessionVerdict, Signal};
use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::collections::{BTreeMap, VecDeque};
use std::num::NonZeroU64;
use std::sync::Arc;

/// The longest block the `cycle` signal looks for.
pub const CYCLE_MAX_PERIOD: usize = 6;
/// How many times in a row a block must repeat for `cycle`.
pub const CYCLE_MIN_REPEATS: usize = 3;
/// The longest block of calls and results the `repeat` signal looks for.
pub const REPEAT_MAX_PERIOD: usize = 3;
/// How many times in a row a block of 1-3 calls and results must occur for `repeat` to count
/// it; the stretch must also reach `repeat_min` calls (5: one call 5 times, A B A B A, or
/// A B C A B C).
pub const REPEAT_MIN_REPEATS: usize = 2;

/// Whether a session belongs to a read-only agent: its agent name (the `agent` field, or the
/// title suffix `(@NAME subagent)`) is one of `read_only_agents`, case-insensitive; with no agent
/// name at all, its title contains one of them as a word.
pub fn is_read_only(session: &Session, config: &DetectConfig) -> bool {
    let listed = |name: &str| {
        config
            .read_only_agents
            .iter()
            .any(|a| a.eq_ignore_ascii_case(name.trim()))
    };
    let title = session.title.as_deref().unwrap_or("");
    let names: Vec<&str> = session
        .agent
        .as_deref()
        .into_iter()
        .chain(subagent_name(title))
        .collect();
    if !names.is_empty() {
        return names.into_iter().any(listed);
    }
    title
        .split(|c: char| !c.is_alphanumeric() && c != '_' && c != '-')
        .any(|word| !word.is_empty() && listed(word))
}

/// The `NAME` of a child session title ending in `(@NAME subagent)`.
pub fn subagent_name(title: &str) -> Option<&str> {
    let inner = title.trim_end().strip_suffix(" subagent)")?;
    let at = inner.rfind("(@")?;
    Some(&inner[at + 2..]).filter(|name| !name.is_empty())
}

/// The figures of a span and its window, shared by both forms so they cannot drift apart.
fn verdict_from_figures(id: &str, reason: Reason, config: &DetectConfig) -> SessionVerdict {
    let mut signals = Vec::new();
    fired(&reason, config, |signal| signals.push(signal));
    SessionVerdict {
        id: id.to_owned(),
        flagged: !signals.is_empty(),
        signals,
        reason,
    }
}

/// Each signal the figures fire, in the verdict's order (nothing allocated: `flagged` asks at
/// every call).
fn fired(reason: &Reason, config: &DetectConfig, mut signal: impl FnMut(Signal)) {
    // `SessionDetector::flagged` relies on two things here: only `repeat`, `stall` and the
    // figures they read are looked at before `min_calls` (it computes no other figure then),
    // and every signal only grows with its figures but `stale_span_calls` (it reads their
    // upper bounds first, `stale_span_calls` exact).
    // Strong evidence: the same calls seeing the same results speak before `min_calls`.
    let repeat = config.applies(Rule::Repeat)
        && (reason.repeat >= config.repeat_min
            || reason.stale >= STALE_MIN
            || reason.stale_long >= STALE_LONG_MIN
            || reason.failing >= FAILING_MIN
            || reason.recur >= RECUR_MIN
            || reason.circle >= CIRCLE_MIN
            || (reason.stale_span_calls >= STALE_SPAN_MIN_CALLS
                && u64::from(reason.stale_span) * 2 >= u64::from(reason.stale_span_calls)));
    // Waiting on a job that shows nothing new, for long or for many polls.
    let stall = config.applies(Rule::Stalls)
        && reason.stall_polls >= 2
        && (reason.stall_s >= config.poll_max_s || reason.stall_polls >= config.poll_max_calls);
    if reason.calls_since_landed >= config.min_calls {
        let top_min = if reason.read_only {
            config.top_min_ro
        } else {
            config.top_min
        };
        if reason.dup > config.dup_min {
            signal(Signal::Dup);
        }
        if reason.top >= top_min {
            signal(Signal::Top);
        }
        if reason.slow >= config.cum_min {
            signal(Signal::Slow);
        }
        if reason.coverage >= config.cover_min {
            signal(Signal::Coverage);
        }
        if config.applies(Rule::Cycle) && reason.cycle >= config.cycle_min {
            signal(Signal::Cycle);
        }
        if config.applies(Rule::Rereads) && reason.reread >= config.reread_min {
            signal(Signal::Reread);
        }
    }
    if repeat {
        signal(Signal::Repeat);
    }
    if stall {
        signal(Signal::Stall);
    }
}

/// How [`history_figures`] computes the figures that look back over the history.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Figures {
    /// As they are.
    Exact,
    /// Upper bounds of `stale`, `stale_long`, `recur` and `circle`, without looking back
    /// ([`Staleness::bounds`]): when the verdict on them is not flagged, the verdict on the
    /// figures is not either, since every signal only grows with its figures.
    Bounds,
}

/// The figures the history gives (`repeat`'s and `stall`'s), zero where the rule is off; a
/// landing as the last call always unflags `repeat`, until the calls after it repeat again.
fn history_figures(
    progress: &Progress,
    last_landed: bool,
    config: &DetectConfig,
    reason: &mut Reason,
    how: Figures,
) {
    if config.applies(Rule::Repeat) {
        let staleness = &progress.staleness;
        (reason.stale_span_calls, reason.stale_span) = staleness.since_landed;
        if !last_landed {
            if how == Figures::Bounds {
                [reason.stale, reason.stale_long, reason.recur, reason.circle] = staleness.bounds();
            } else {
                reason.stale = staleness.count(STALE_WINDOW);
                reason.stale_long = staleness.count(STALE_LONG_WINDOW);
                reason.recur = staleness.recur();
                reason.circle = staleness.circle();
            }
            reason.failing = staleness.failing();
        }
    }
    if config.applies(Rule::Stalls) {
        (reason.stall_s, reason.stall_polls) = progress.polls.figures();
    }
}

/// The largest count, ties broken by the smallest key, so both forms pick the same `top_what`.
fn max_by_count<'a, K: Ord + ?Sized + 'a>(
    counts: impl Iterator<Item = (&'a K, u32)>,
) -> Option<(&'a K, u32)> {
    counts.fold(None, |best, (key, n)| match best {
        Some((bk, bn)) if bn > n || (bn == n && bk <= key) => Some((bk, bn)),
        _ => Some((key, n)),
    })
}

/// The largest ratio, ties broken by the smallest key.
fn max_by_ratio<'a, K: Ord + ?Sized + 'a>(
    ratios: impl Iterator<Item = (&'a K, f64)>,
) -> Option<(&'a K, f64)> {
    ratios.fold(None, |best, (key, r)| match best {
        Some((bk, br)) if br > r || (br == r && bk <= key) => Some((bk, br)),
        _ => Some((key, r)),
    })
}

/// The facts of a session's counted calls, in order, their landings settled as the detector
/// settles them: a bash write identical to an earlier landed one is no landing, a bash write of
/// unknown exit lands at the view that confirms it (`precise`).
pub fn session_facts(session: &Session, config: &DetectConfig) -> Vec<CallFacts> {
    indexed_session_facts(session, config)
        .into_iter()
        .map(|(_, f)| f)
        .collect()
}

/// [`session_facts`], each with the index of its call in `session.calls`.
fn indexed_session_facts(session: &Session, config: &DetectConfig) -> Vec<(usize, CallFacts)> {
    let ctx = CallContext {
        directory: session.directory.as_deref(),
        line_counts: &session.line_counts,
    };
    let mut progress = Progress::default();
    let mut out = Vec::with_capacity(session.calls.len());
    for (i, call) in session.calls.iter().enumerate() {
        let Some(mut owned) = CallFacts::of(call, ctx, config) else {
            continue;
        };
        let mut facts = owned.as_facts();
        let key = progress.settle(&mut facts, config);
        progress.record(&facts, &key);
        // Copied out first: `facts` borrows `owned`.
        let settled = (facts.landed, facts.resent);
        (owned.landed, owned.resent) = settled;
        out.push((i, owned));
    }
    out
}

/// Which calls of `session` make no progress as `repeat` counts them (they *echo*, see
/// `Staleness`): one flag per call of `session.calls`, `false` for a call not counted. For
/// tools that build or measure sessions (the latency set's loops are as long as the issue asks
/// in these calls), so they count what the detector counts.
pub fn no_progress_calls(session: &Session, config: &DetectConfig) -> Vec<bool> {
    let mut flags = vec![false; session.calls.len()];
    let mut staleness = Progress::default();
    for (i, f) in indexed_session_facts(session, config) {
        let facts = f.as_facts();
        staleness.record(&facts, &Key::of(facts.identity, facts.result));
        flags[i] = staleness.staleness.last_made_no_progress();
    }
    flags
}

/// `cycle` (periods 1-6) and `repeat` (periods 1-3): the longest stretch of `ids` made of one
/// block of 1-`max_period` calls repeated in a row at least `min_repeats` times (calls covered),
/// or 0. `None` matches nothing; a stretch counts only where `counts(i, p)`, for the block of
/// `p` calls ending at `i`.
fn longest_cycle<T: PartialEq>(
    ids: &[Option<T>],
    max_period: usize,
    min_repeats: usize,
    counts: impl Fn(usize, usize) -> bool,
) -> u32 {
    let mut best = 0;
    for p in 1..=max_period {
        let mut run = 0usize;
        for i in p..ids.len() {
            if ids[i].is_some() && ids[i] == ids[i - p] {
                run += 1;
                if run >= (min_repeats - 1) * p && counts(i, p) {
                    best = best.max(run + p);
                }
            } else {
                run = 0;
            }
        }
    }
    u32::try_from(best).unwrap_or(u32::MAX)
}

/// The time of a session's latest own landed call, from its facts.
pub fn latest_own_landing(facts: &[CallFacts]) -> Option<i64> {
    facts
        .iter()
        .filter(|f| f.landed)
        .filter_map(|f| f.end_ms)
        .max()
}

/// What `slow` counts a call under: its identity; a poll's with its result, so that a job
/// polled while its output grows repeats nothing.
fn slow_key<'a>(identity: &'a str, result: &str, wait: bool) -> Cow<'a, str> {
    if wait {
        Cow::Owned(format!("{identity}\u{1f}{result}"))
    } else {
        Cow::Borrowed(identity)
    }
}

/// Judge one session on its own calls (batch form).
///
/// `latest_descendant_landing` is the time (unix ms) of the most recent landed call among the
/// session's transitive descendants, if any: own calls that started at or before it leave the span.
pub fn judge_session(
    session: &Session,
    latest_descendant_landing: Option<i64>,
    config: &DetectConfig,
) -> SessionVerdict {
    judge_facts(
        session,
        &session_facts(session, config),
        latest_descendant_landing,
        config,
    )
}

/// [`judge_session`] on facts computed already (by [`session_facts`] under the same `config`).
pub fn judge_facts(
    session: &Session,
    facts: &[CallFacts],
    latest_descendant_landing: Option<i64>,
    config: &DetectConfig,
) -> SessionVerdict {
    let own_cut = facts.iter().rposition(|f| f.landed).map_or(0, |i| i + 1);
    let span = &facts[own_cut.max(descendant_cut(facts, latest_descendant_landing))..];
    let window = &span[span.len().saturating_sub(config.window)..];
    let mut tally = WindowTally::of(window);
    let dup_count = tally.identities.values().copied().max().unwrap_or(0);
    let top = max_by_count(tally.targets.iter().map(|(k, n)| (*k, *n)));
    let coverage = max_by_ratio(
        tally
            .files
            .iter()
            .map(|(path, (lines, len))| (*path, ratio(*lines, *len))),
    );
    let reread = if config.applies(Rule::Rereads) {
        most_reread(&mut tally.views)
    } else {
        None
    };
    let mut reason = Reason {
        dup: share(dup_count, window.len()),
        top: top.map_or(0, |(_, n)| n),
        top_what: top.map_or_else(String::new, |(k, _)| k.to_owned()),
        slow: slowest(span),
        coverage: coverage.map_or(0.0, |(_, r)| r),
        coverage_file: coverage.map(|(path, _)| path.to_owned()),
        landed: own_cut > 0 || latest_descendant_landing.is_some(),
        calls_since_landed: span.len(),
        window_calls: window.len(),
        read_only: is_read_only(session, config),
        cycle: span_cycle(span, config),
        reread: reread.map_or(0.0, |(_, r)| r),
        reread_file: reread.map(|(path, _)| path.to_owned()),
        repeat: span_repeat(span, config),
        ..Reason::default()
    };
    if config.applies(Rule::Repeat) || config.applies(Rule::Stalls) {
        exact_history_figures(facts, config, &mut reason);
    }
    verdict_from_figures(&session.id, reason, config)
}

/// Where the span starts after the latest descendant landing (`latest_descendant_landing`):
/// just past the last own call that started at or before it, or 0.
fn descendant_cut(facts: &[CallFacts], latest_descendant_landing: Option<i64>) -> usize {
    latest_descendant_landing.map_or(0, |t| {
        facts
            .iter()
            .rposition(|f| f.start_ms.is_some_and(|s| s <= t))
            .map_or(0, |i| i + 1)
    })
}

/// What the batch form counts over the window, borrowing the calls' facts.
struct WindowTally<'a> {
    /// identity -> calls (polls count towards `slow` only, so not here)
    identities: FxHashMap<&'a str, u32>,
    /// target -> calls (polls left out as above)
    targets: FxHashMap<&'a str, u32>,
    /// path -> (lines read, the file length of its latest read)
    files: BTreeMap<&'a str, (u64, u64)>,
    /// every view: (path, first line, last line)
    views: Vec<(&'a str, u64, u64)>,
}

impl<'a> WindowTally<'a> {
    fn of(window: &'a [CallFacts]) -> Self {
        let mut tally = WindowTally {
            identities: FxHashMap::default(),
            targets: FxHashMap::default(),
            files: BTreeMap::new(),
            views: Vec::new(),
        };
        for f in window {
            if let Some(v) = &f.view {
                tally.views.push((&v.path, v.first, v.last));
            }
            // A poll counts towards `slow` only.
            if !f.wait {
                *tally.identities.entry(&f.identity).or_default() += 1;
                *tally.targets.entry(&f.target).or_default() += 1;
            }
            if let Some(read) = &f.read {
                let entry = tally.files.entry(&read.path).or_default();
                entry.0 += read.lines;
                entry.1 = read.file_lines;
            }
        }
        tally
    }
}

/// `slow`: the most calls in the span under one [`slow_key`].
fn slowest(span: &[CallFacts]) -> u32 {
    let mut identity_in_span: FxHashMap<Cow<'_, str>, u32> = FxHashMap::default();
    for f in span {
        *identity_in_span
            .entry(slow_key(&f.identity, &f.result, f.wait))
            .or_default() += 1;
    }
    identity_in_span.values().copied().max().unwrap_or(0)
}

/// `cycle` over the span, when it applies (else 0).
fn span_cycle(span: &[CallFacts], config: &DetectConfig) -> u32 {
    if !config.applies(Rule::Cycle) {
        return 0;
    }
    // A poll matches nothing: waiting breaks a cycle.
    let ids: Vec<Option<&str>> = span
        .iter()
        .map(|f| (!f.wait).then_some(f.identity.as_str()))
        .collect();
    longest_cycle(&ids, CYCLE_MAX_PERIOD, CYCLE_MIN_REPEATS, |_, _| true)
}

/// `repeat` over the span, when it applies (else 0).
fn span_repeat(span: &[CallFacts], config: &DetectConfig) -> u32 {
    if !config.applies(Rule::Repeat) {
        return 0;
    }
    // The same call seeing the same result; a poll matches nothing. A block of 2-3 calls counts
    // when one of them is known by more than its success (`CallFacts::blind`).
    let ids: Vec<Option<(&str, &str)>> = span
        .iter()
        .map(|f| (!f.wait).then_some((f.identity.as_str(), f.result.as_str())))
        .collect();
    longest_cycle(&ids, REPEAT_MAX_PERIOD, REPEAT_MIN_REPEATS, |i, p| {
        p == 1 || span[i + 1 - p..=i].iter().any(|f| !f.blind())
    })
}

/// The figures the whole history decides (`repeat`'s and the stalls'), exactly.
fn exact_history_figures(facts: &[CallFacts], config: &DetectConfig, reason: &mut Reason) {
    let mut progress = Progress::default();
    for f in facts {
        let f = f.as_facts();
        progress.record(&f, &Key::of(f.identity, f.result));
    }
    let last_landed = facts.last().is_some_and(|f| f.landed);
    history_figures(&progress, last_landed, config, reason, Figures::Exact);
}

/// `reread`: for each file viewed in the window, the lines shown (with repeats) over the
/// distinct lines shown; the largest, ties broken by the smallest path.
fn most_reread<K: Ord + Copy>(views: &mut [(K, u64, u64)]) -> Option<(K, f64)> {
    views.sort_unstable();
    let mut best: Option<(K, f64)> = None;
    let mut i = 0;
    while i < views.len() {
        let path = views[i].0;
        let (mut shown, mut distinct) = (0u64, 0u64);
        let mut covered_to = 0u64;
        while i < views.len() && views[i].0 == path {
            let (_, a, b) = views[i];
            // Saturating: ranges come from the model's offsets and can reach u64::MAX.
            shown = shown.saturating_add((b - a).saturating_add(1));
            if b > covered_to {
                distinct = distinct.saturating_add((b - a.max(covered_to + 1)).saturating_add(1));
                covered_to = b;
            }
            i += 1;
        }
        let r = ratio(shown, distinct);
        best = match best {
            Some((bk, br)) if br > r || (br == r && bk <= path) => Some((bk, br)),
            _ => Some((path, r)),
        };
    }
    best
}

/// [`most_reread`]'s ratio for views told apart by their interned ids, sorted on the stack
/// when they fit (the default window does): the unnamed verdict is read after every call.
fn reread_unnamed(views: impl Iterator<Item = (u32, u64, u64)> + Clone) -> Option<f64> {
    const ON_STACK: usize = 64;
    let mut buf = [(0u32, 0u64, 0u64); ON_STACK];
    let mut n = 0;
    for view in views.clone() {
        if n == ON_STACK {
            return most_reread(&mut views.collect::<Vec<_>>()).map(|(_, r)| r);
        }
        buf[n] = view;
        n += 1;
    }
    most_reread(&mut buf[..n]).map(|(_, r)| r)
}

fn share(count: u32, total: usize) -> f64 {
    if total == 0 {
        0.0
    } else {
        f64::from(count) / total as f64
    }
}

fn ratio(lines: u64, file_lines: u64) -> f64 {
    if file_lines == 0 {
        0.0
    } else {
        lines as f64 / file_lines as f64
    }
}

/// One call of the span, interned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
struct SpanCall {
    /// The call's identity; a poll's with its result (what `slow` counts it under).
    identity: u32,
    target: u32,
    /// (path, lines read, file length)
    read: Option<(u32, u64, u64)>,
    start_ms: Option<i64>,
    /// A poll (`precise`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    wait: bool,
    /// (path, first line, last line) shown (`precise`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    view: Option<(u32, u64, u64)>,
    /// What the call saw (`precise`, rule `repeat`), hashed with the call ([`Key::seen`]).
    #[serde(default, rename = "seen", skip_serializing_if = "Option::is_none")]
    seen: Option<u64>,
    /// What the call saw as a name, in snapshots before [`SpanCall::seen`] (read, never
    /// written).
    #[serde(default, skip_serializing)]
    result: Option<u32>,
    /// A success known only by its status ([`CallFacts::blind`]): a block of 2-3 calls made
    /// only of such calls repeats nothing.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    blind: bool,
}

/// Upper bounds of the window's figures, kept as calls are added so that
/// [`SessionDetector::flagged`] reads them without looking over the window: the largest each
/// count (and `coverage`'s ratio) has been since the span began, which no figure of the window
/// can exceed since a call leaving the window only lowers the counts of what it counted.
#[derive(Debug, Clone, Default)]
struct Peaks {
    /// The most calls of one identity in the window.
    dup: u32,
    /// The most calls of one target in the window.
    top: u32,
    /// The largest coverage ratio of a file read.
    coverage: f64,
    /// Views in the window, by file.
    views: FxHashMap<u32, u32>,
    /// The most views of one file in the window.
    reread_views: u32,
    /// A view began at line 0 (where `most_reread` counts one distinct line fewer).
    view_at_zero: bool,
}

impl Peaks {
    /// An upper bound of `reread`: a file shown by `n` views, each of them within the lines
    /// shown, is shown at most `n` times over; at most `2n` when line 0 is among them (see
    /// `most_reread`). A hair more, for the rounding of the division.
    fn reread(&self) -> f64 {
        let times = if self.view_at_zero { 2.0 } else { 1.0 };
        f64::from(self.reread_views) * times * (1.0 + 1e-9)
    }
}

/// Per-file reads inside the window.
#[derive(Debug, Clone, Copy, Default)]
struct FileInWindow {
    lines: u64,
    reads: u32,
    file_lines: u64,
}

/// The incremental detector for one session: push calls as they complete, read the verdict at
/// any point. It always equals [`judge_session`] on the calls pushed so far.
#[derive(Debug, Clone)]
pub struct SessionDetector {
    id: String,
    config: DetectConfig,
    read_only: bool,
    directory: Option<String>,
    line_counts: Arc<BTreeMap<String, u64>>,
    names: Names,
    span: Vec<SpanCall>,
    window_start: usize,
    identity_in_span: FxHashMap<u32, u32>,
    slow: u32,
    identity_in_window: FxHashMap<u32, u32>,
    target_in_window: FxHashMap<u32, u32>,
    files_in_window: FxHashMap<u32, FileInWindow>,
    /// Bounds of the window's figures ([`Peaks`]).
    peaks: Peaks,
    landed: bool,
    latest_descendant_landing: Option<i64>,
    latest_own_landing: Option<i64>,
    /// The end times of the landed calls pushed, in order, when asked for
    /// ([`SessionDetector::recording_own_landings`]); not part of a snapshot.
    own_landings: Option<Vec<i64>>,
    /// `cycle`: for each period p (1..=6), how many calls at the end of the span equal the call
    /// p before them; and the longest qualifying stretch of the span.
    runs: [u32; CYCLE_MAX_PERIOD],
    cycle: u32,
    /// `repeat`: the same for calls and results, periods 1..=3.
    repeat_runs: [u32; REPEAT_MAX_PERIOD],
    repeat: u32,
    /// What the session's history says (`precise`).
    progress: Progress,
    /// Whether the last call pushed landed (a landing at the end always unflags).
    last_landed: bool,
    /// Where each call's facts are written (no allocation per call).
    scratch: Scratch,
    /// A poll's identity and result, written for `slow`.
    poll_key: String,
}

/// What a [`SessionDetector`] must remember between runs: its context and the span, with only
/// the names the span uses. Counts are rebuilt from the span on [`SessionDetector::restore`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DetectorSnapshot {
    pub id: String,
    pub read_only: bool,
    pub directory: Option<String>,
    pub line_counts: BTreeMap<String, u64>,
    names: Vec<String>,
    span: Vec<SpanCall>,
    pub landed: bool,
    pub latest_descendant_landing: Option<i64>,
    pub latest_own_landing: Option<i64>,
    /// The profile the snapshot was taken under (restoring under another is refused). A
    /// snapshot without one predates the profiles: it is the design's.
    #[serde(default = "design")]
    pub profile: Profile,
    /// The bash writes that landed (`precise`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    written: Vec<String>,
    /// The write and edit tool calls that landed, hashed (`precise`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    sent: Vec<u64>,
    /// The commits that landed, their names hashed (`precise`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    commits: Vec<NonZeroU64>,
    /// The session's last calls and results (`precise`, rule `repeat`).
    #[serde(default, skip_serializing_if = "VecDeque::is_empty")]
    history: VecDeque<Echo>,
    /// Set in snapshots of the `auto` profile of earlier versions, which are refused.
    #[serde(default, skip_serializing)]
    auto: Option<serde_json::Value>,
    /// Whether each of the session's last calls echoed an earlier one (`precise`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    recent: Vec<bool>,
    /// The calls since the session last landed and how many of them echoed (`precise`).
    #[serde(default, skip_serializing_if = "is_zero_pair")]
    since_landed: (u32, u32),
    /// Whether the last call landed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    last_landed: bool,
    /// The polls since the session's last other call (`precise`, `stall`).
    #[serde(default, skip_serializing_if = "is_no_run")]
    polls: PollRun,
    /// Bash writes of unknown exit waiting for a view (`precise`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    unconfirmed: Vec<(String, String)>,
}

fn design() -> Profile {
    Profile::Design
}

fn is_no_run(run: &PollRun) -> bool {
    *run == PollRun::default()
}

impl SessionDetector {
    /// A detector for `session`'s identity and context (its calls are not pushed).
    pub fn new(session: &Session, config: &DetectConfig) -> Self {
        Self::with_line_counts(session, Arc::new(session.line_counts.clone()), config)
    }

    /// [`SessionDetector::new`] taking `session`'s line counts (leaving them empty) rather than
    /// copying them: for a caller that keeps the session only for its id and parent (`detect`).
    pub fn taking_line_counts(session: &mut Session, config: &DetectConfig) -> Self {
        let line_counts = Arc::new(std::mem::take(&mut session.line_counts));
        Self::with_line_counts(session, line_counts, config)
    }

    fn with_line_counts(
        session: &Session,
        line_counts: Arc<BTreeMap<String, u64>>,
        config: &DetectConfig,
    ) -> Self {
        Self {
            id: session.id.clone(),
            config: config.clone(),
            read_only: is_read_only(session, config),
            directory: session.directory.clone(),
            line_counts,
            names: Names::default(),
            span: Vec::new(),
            window_start: 0,
            identity_in_span: FxHashMap::default(),
            slow: 0,
            identity_in_window: FxHashMap::default(),
            target_in_window: FxHashMap::default(),
            files_in_window: FxHashMap::default(),
            peaks: Peaks::default(),
            landed: false,
            latest_descendant_landing: None,
            latest_own_landing: None,
            own_landings: None,
            runs: [0; CYCLE_MAX_PERIOD],
            cycle: 0,
            repeat_runs: [0; REPEAT_MAX_PERIOD],
            repeat: 0,
            progress: Progress::default(),
            last_landed: false,
            scratch: Scratch::default(),
            poll_key: String::new(),
        }
    }

    /// The session's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The time of the latest landed call pushed (its end, else its start), if any.
    pub fn latest_own_landing(&self) -> Option<i64> {
        self.latest_own_landing
    }

    /// This detector, keeping the time of each landed call pushed from now on
    /// ([`SessionDetector::own_landings`]): for a caller that passes a session's landings to its
    /// ancestors (the backtest reads each session once, issue 19).
    pub fn recording_own_landings(mut self) -> Self {
        self.own_landings = Some(Vec::new());
        self
    }

    /// The times of the landed calls pushed since [`SessionDetector::recording_own_landings`]
    /// (each one's end, else its start), in the order pushed: once every call is pushed, the
    /// landings of [`session_facts`]. Empty when not recording.
    pub fn own_landings(&self) -> &[i64] {
        self.own_landings.as_deref().unwrap_or_default()
    }

    /// The latest descendant landing pushed, if any.
    pub fn latest_descendant_landing(&self) -> Option<i64> {
        self.latest_descendant_landing
    }

    /// A compact copy of what this detector must remember (see [`DetectorSnapshot`]).
    pub fn snapshot(&self) -> DetectorSnapshot {
        let mut names = Vec::new();
        let mut renumber: FxHashMap<u32, u32> = FxHashMap::default();
        let mut map = |old: u32, names: &mut Vec<String>| {
            *renumber.entry(old).or_insert_with(|| {
                names.push(self.names.get(old).to_owned());
                u32::try_from(names.len() - 1).unwrap_or(u32::MAX)
            })
        };
        let span = self
            .span
            .iter()
            .map(|c| SpanCall {
                identity: map(c.identity, &mut names),
                target: map(c.target, &mut names),
                read: c.read.map(|(p, l, f)| (map(p, &mut names), l, f)),
                start_ms: c.start_ms,
                wait: c.wait,
                view: c.view.map(|(p, a, b)| (map(p, &mut names), a, b)),
                seen: c.seen,
                result: None,
                blind: c.blind,
            })
            .collect();
        let progress = &self.progress;
        DetectorSnapshot {
            id: self.id.clone(),
            read_only: self.read_only,
            directory: self.directory.clone(),
            line_counts: BTreeMap::clone(&self.line_counts),
            names,
            span,
            landed: self.landed,
            latest_descendant_landing: self.latest_descendant_landing,
            latest_own_landing: self.latest_own_landing,
            profile: self.config.profile,
            written: progress.written.iter().cloned().collect(),
            sent: progress.sent.iter().copied().collect(),
            commits: progress.commits.iter().copied().collect(),
            history: progress.staleness.history.clone(),
            auto: None,
            recent: progress.staleness.recent.iter().copied().collect(),
            since_landed: progress.staleness.since_landed,
            last_landed: self.last_landed,
            polls: progress.polls.clone(),
            unconfirmed: progress.unconfirmed.clone(),
        }
    }

    /// Rebuild a detector from a snapshot taken under the same `config`. A snapshot whose span
    /// names something it does not hold, taken under another profile, or of the `auto` profile
    /// of earlier versions, is refused (`None`): the caller starts over.
    pub fn restore(snapshot: DetectorSnapshot, config: &DetectConfig) -> Option<Self> {
        if snapshot.profile != config.profile || snapshot.auto.is_some() {
            return None;
        }
        let known = snapshot.names.len();
        let valid = |i: u32| (i as usize) < known;
        if !snapshot.span.iter().all(|c| {
            valid(c.identity)
                && valid(c.target)
                && c.read.is_none_or(|(p, _, _)| valid(p))
                && c.view.is_none_or(|(p, _, _)| valid(p))
                && c.result.is_none_or(valid)
        }) {
            return None;
        }
        let mut names = Names::default();
        for name in &snapshot.names {
            names.push_anew(name);
        }
        let mut detector = Self {
            id: snapshot.id,
            read_only: snapshot.read_only,
            directory: snapshot.directory,
            line_counts: Arc::new(snapshot.line_counts),
            landed: snapshot.landed,
            latest_descendant_landing: snapshot.latest_descendant_landing,
            latest_own_landing: snapshot.latest_own_landing,
            progress: Progress {
                staleness: Staleness::restored(
                    snapshot.history,
                    snapshot.recent.into_iter().collect(),
                    snapshot.since_landed,
                ),
                polls: snapshot.polls,
                written: snapshot.written.into_iter().collect(),
                sent: snapshot.sent.into_iter().collect(),
                commits: snapshot.commits.into_iter().collect(),
                unconfirmed: snapshot.unconfirmed,
            },
            last_landed: snapshot.last_landed,
            ..Self::with_line_counts(&Session::new(""), Arc::default(), config)
        };
        for mut call in snapshot.span {
            // A result kept as a name (older snapshots) is hashed with its call, as pushed.
            if let Some(result) = call.result.take() {
                let identity = names.get(call.identity);
                call.seen = Some(Key::of(identity, names.get(result)).seen);
            }
            detector.span.push(call);
            detector.add(call);
        }
        detector.names = names;
        Some(detector)
    }

    /// The session's calls are all pushed: forget what only the matching of further calls
    /// reads (the line counts, the scratch buffers, spare room), for a caller that keeps many
    /// detectors to pass descendants' landings up their trees (`detect`, issue 19). Verdicts
    /// and landings pushed later are unchanged; a call pushed later is read without file
    /// lengths, and a snapshot holds no line counts.
    pub fn calls_done(&mut self) {
        self.line_counts = Arc::default();
        self.scratch = Scratch::default();
        self.poll_key = String::new();
        self.span.shrink_to_fit();
        self.names.shrink_to_fit();
    }

    /// Learn a file's length (as `line_counts` would give it) for reads pushed from now on.
    pub fn set_line_count(&mut self, path: impl Into<String>, lines: u64) {
        Arc::make_mut(&mut self.line_counts).insert(path.into(), lines);
    }

    /// Push the next call of the session. Calls that do not count are ignored.
    pub fn push(&mut self, call: &Call) {
        let input = Json::of(&call.input);
        if let Some(call) = CallRef::of(call, &input) {
            self.push_ref(&call);
        }
    }

    /// Push the next counted call, read borrowed.
    pub(crate) fn push_ref(&mut self, call: &CallRef<'_>) {
        self.push_in(call, None);
    }

    /// [`SessionDetector::push_ref`] with the session's line counts read from its text (this
    /// detector's own are not looked at).
    pub(crate) fn push_ref_with(&mut self, call: &CallRef<'_>, line_counts: &LineCountsText<'_>) {
        self.push_in(call, Some(line_counts));
    }

    fn push_in(&mut self, call: &CallRef<'_>, line_counts: Option<&LineCountsText<'_>>) {
        let mut scratch = std::mem::take(&mut self.scratch);
        let ctx = Context {
            directory: self.directory.as_deref(),
            line_counts: line_counts.map_or(LineCounts::Map(&self.line_counts), LineCounts::Text),
        };
        let mut facts = facts(call, ctx, &self.config, &mut scratch);
        self.push_facts(&mut facts);
        self.scratch = scratch;
    }

    fn push_facts(&mut self, facts: &mut Facts<'_>) {
        let key = if self.config.rules() == crate::config::Rules::NONE {
            None
        } else {
            let key = self.progress.settle(facts, &self.config);
            self.progress.record(facts, &key);
            Some(key)
        };
        self.last_landed = facts.landed;
        let before_descendant_landing = matches!(
            (facts.start_ms, self.latest_descendant_landing),
            (Some(s), Some(t)) if s <= t
        );
        if facts.landed || before_descendant_landing {
            if facts.landed {
                self.landed = true;
                self.latest_own_landing = self.latest_own_landing.max(facts.end_ms);
                if let (Some(landings), Some(at)) = (&mut self.own_landings, facts.end_ms) {
                    landings.push(at);
                }
            }
            self.clear_span();
            // Nothing refers to a name once the span is empty: a session holds only the names
            // of the calls since it last landed (issue 19: `detect` keeps every detector).
            self.names.clear();
            return;
        }
        let read = facts
            .read
            .map(|(path, lines, file_lines)| (self.names.intern(path), lines, file_lines));
        let view = facts
            .view
            .map(|(path, first, last)| (self.names.intern(path), first, last));
        let identity = if facts.wait {
            self.poll_key.clear();
            self.poll_key.push_str(facts.identity);
            self.poll_key.push('\u{1f}');
            self.poll_key.push_str(facts.result);
            self.names.intern(&self.poll_key)
        } else {
            match key {
                // Hashed once for the history and the names.
                Some(key) => self.names.intern_hashed(facts.identity, key.call),
                None => self.names.intern(facts.identity),
            }
        };
        let span_call = SpanCall {
            identity,
            target: self.names.intern(facts.target),
            read,
            start_ms: facts.start_ms,
            wait: facts.wait,
            view,
            seen: key
                .filter(|_| self.config.applies(Rule::Repeat))
                .map(|k| k.seen),
            result: None,
            blind: self.config.applies(Rule::Repeat) && facts.blind(),
        };
        self.span.push(span_call);
        self.add(span_call);
    }

    /// A transitive descendant landed at `at_ms`: own calls that started at or before it leave
    /// the span, whenever the news arrives.
    pub fn push_descendant_landing(&mut self, at_ms: i64) {
        self.landed = true;
        if self.latest_descendant_landing.is_some_and(|t| t >= at_ms) {
            return;
        }
        self.latest_descendant_landing = Some(at_ms);
        if let Some(last_before) = self
            .span
            .iter()
            .rposition(|c| c.start_ms.is_some_and(|s| s <= at_ms))
        {
            let rest = self.span.split_off(last_before + 1);
            self.clear_span();
            for call in rest {
                self.span.push(call);
                self.add(call);
            }
        }
    }

    fn clear_span(&mut self) {
        self.span.clear();
        self.window_start = 0;
        self.identity_in_span.clear();
        self.slow = 0;
        self.identity_in_window.clear();
        self.target_in_window.clear();
        self.files_in_window.clear();
        self.peaks = Peaks::default();
        self.runs = [0; CYCLE_MAX_PERIOD];
        self.cycle = 0;
        self.repeat_runs = [0; REPEAT_MAX_PERIOD];
        self.repeat = 0;
    }

    /// Account for the call just appended to the span, sliding the window.
    fn add(&mut self, call: SpanCall) {
        let in_span = self.identity_in_span.entry(call.identity).or_default();
        *in_span += 1;
        self.slow = self.slow.max(*in_span);
        if !call.wait {
            let dup = self.identity_in_window.entry(call.identity).or_default();
            *dup += 1;
            self.peaks.dup = self.peaks.dup.max(*dup);
            let top = self.target_in_window.entry(call.target).or_default();
            *top += 1;
            self.peaks.top = self.peaks.top.max(*top);
        }
        if let Some((path, lines, file_lines)) = call.read {
            let file = self.files_in_window.entry(path).or_default();
            file.lines += lines;
            file.reads += 1;
            file.file_lines = file_lines;
            let coverage = ratio(file.lines, file.file_lines);
            if coverage > self.peaks.coverage {
                self.peaks.coverage = coverage;
            }
        }
        if let Some((path, first, _)) = call.view {
            let views = self.peaks.views.entry(path).or_default();
            *views += 1;
            self.peaks.reread_views = self.peaks.reread_views.max(*views);
            self.peaks.view_at_zero |= first == 0;
        }
        if self.config.applies(Rule::Cycle) {
            let best = extend_runs(
                &mut self.runs,
                &self.span,
                CYCLE_MIN_REPEATS,
                |a, b| a.identity == b.identity,
                |_| true,
            );
            self.cycle = self.cycle.max(best);
        }
        if self.config.applies(Rule::Repeat) {
            let best = extend_runs(
                &mut self.repeat_runs,
                &self.span,
                REPEAT_MIN_REPEATS,
                |a, b| a.identity == b.identity && a.seen.is_some() && a.seen == b.seen,
                |block| block.len() == 1 || block.iter().any(|c| !c.blind),
            );
            self.repeat = self.repeat.max(best);
        }
        while self.span.len() - self.window_start > self.config.window {
            let old = self.span[self.window_start];
            self.window_start += 1;
            if !old.wait {
                decrement(&mut self.identity_in_window, old.identity);
                decrement(&mut self.target_in_window, old.target);
            }
            if let Some((path, lines, _)) = old.read
                && let Some(file) = self.files_in_window.get_mut(&path)
            {
                file.lines -= lines;
                file.reads -= 1;
                if file.reads == 0 {
                    self.files_in_window.remove(&path);
                }
            }
            if let Some((path, _, _)) = old.view {
                decrement(&mut self.peaks.views, path);
            }
        }
    }

    /// What the detector says of `call` before it runs (its status and result are not looked
    /// at): whether the session is flagged, whether the call would change something, and how
    /// often this very call ran among the session's last calls ([`PendingCall`]). Nothing is
    /// pushed: the call is judged as the next one, not counted.
    pub fn pending(&self, call: &Call) -> PendingCall {
        let input = Json::of(&call.input);
        let completed = crate::model::CallStatus::Completed;
        let Some(call) = CallRef::new(&call.tool, &input, &completed, Default::default, None, None)
        else {
            return PendingCall::default();
        };
        let mut scratch = Scratch::default();
        let ctx = Context {
            directory: self.directory.as_deref(),
            line_counts: LineCounts::Map(&self.line_counts),
        };
        let facts = facts(&call, ctx, &self.config, &mut scratch);
        let key = Key::of(facts.identity, "");
        // Without its result a bash write's exit is unknown: it would write.
        let writes = facts.write || facts.unconfirmed_write.is_some();
        let changes = (facts.tool_change && !self.progress.sent.contains(&key.call))
            || (writes && !self.progress.written.contains(facts.identity));
        let (same_calls, echoed, failed, last_ago) = self.progress.staleness.occurrences(key.call);
        PendingCall {
            flagged: self.flagged(),
            changes,
            same_calls,
            echoed,
            failed,
            last_ago,
        }
    }

    /// The verdict on the calls pushed so far.
    pub fn verdict(&self) -> SessionVerdict {
        self.judgement(true)
    }

    /// [`SessionDetector::verdict`] without its names: `id`, `top_what`, `coverage_file` and
    /// `reread_file` are left empty, every figure and signal is the verdict's. For a caller that
    /// reads a verdict at many points and shows no names (the backtest judges every prefix):
    /// nothing is copied and nothing allocated unless a signal fires.
    pub fn figures(&self) -> SessionVerdict {
        self.judgement(false)
    }

    /// Whether [`SessionDetector::verdict`] is flagged, for a caller that asks after every
    /// call (`detect`'s first flagged call). Before `min_calls` calls since the last landing
    /// only the signals that speak before it (`repeat`, `stall`) can fire, so the window's
    /// figures are not computed then: the same answer for less work.
    /// Every figure is bounded first (`Figures::Bounds`, `Peaks`); the history's are
    /// computed when the bounds flag the verdict, and the window's (which look over the window)
    /// only when the bounds of the window with the history's exact figures flag it still.
    pub fn flagged(&self) -> bool {
        let figures = |exact_window: bool, how| {
            let mut reason = if self.span.len() < self.config.min_calls {
                Reason {
                    calls_since_landed: self.span.len(),
                    repeat: self.repeat,
                    ..Reason::default()
                }
            } else if exact_window {
                self.window_figures(false)
            } else {
                self.window_bounds()
            };
            history_figures(
                &self.progress,
                self.last_landed,
                &self.config,
                &mut reason,
                how,
            );
            let mut flagged = false;
            fired(&reason, &self.config, |_| flagged = true);
            flagged
        };
        // Before `min_calls` the window's figures are not looked at: the second answer is final.
        figures(false, Figures::Bounds)
            && figures(false, Figures::Exact)
            && (self.span.len() < self.config.min_calls || figures(true, Figures::Exact))
    }

    /// [`SessionDetector::window_figures`] with the figures that look over the window replaced
    /// by their bounds (`Peaks`).
    fn window_bounds(&self) -> Reason {
        let window_calls = self.span.len() - self.window_start;
        Reason {
            dup: share(self.peaks.dup, window_calls),
            top: self.peaks.top,
            slow: self.slow,
            coverage: self.peaks.coverage,
            landed: self.landed,
            calls_since_landed: self.span.len(),
            window_calls,
            read_only: self.read_only,
            cycle: self.cycle,
            reread: if self.config.applies(Rule::Rereads) {
                self.peaks.reread()
            } else {
                0.0
            },
            repeat: self.repeat,
            ..Reason::default()
        }
    }

    /// The verdict, with its names when `named` (see [`SessionDetector::figures`]).
    fn judgement(&self, named: bool) -> SessionVerdict {
        let mut reason = self.window_figures(named);
        history_figures(
            &self.progress,
            self.last_landed,
            &self.config,
            &mut reason,
            Figures::Exact,
        );
        verdict_from_figures(if named { &self.id } else { "" }, reason, &self.config)
    }

    /// The figures of the span and its window, with their names when `named`; the history's
    /// are left at zero.
    fn window_figures(&self, named: bool) -> Reason {
        let name = |id: u32| self.names.get(id);
        let views = || self.span[self.window_start..].iter().filter_map(|c| c.view);
        // Without names, files are told apart by their interned ids: the same figures.
        let (reread, reread_file) = match (self.config.applies(Rule::Rereads), named) {
            (false, _) => (None, None),
            (true, true) => {
                let mut named: Vec<_> = views().map(|(p, a, b)| (name(p), a, b)).collect();
                let best = most_reread(&mut named);
                (best.map(|(_, r)| r), best.map(|(path, _)| path.to_owned()))
            }
            (true, false) => (reread_unnamed(views()), None),
        };
        let window_calls = self.span.len() - self.window_start;
        let dup_count = self.identity_in_window.values().copied().max().unwrap_or(0);
        let (top, top_what) = if named {
            let top = max_by_count(self.target_in_window.iter().map(|(k, n)| (name(*k), *n)));
            (
                top.map_or(0, |(_, n)| n),
                top.map_or_else(String::new, |(k, _)| k.to_owned()),
            )
        } else {
            let top = self.target_in_window.values().copied().max();
            (top.unwrap_or(0), String::new())
        };
        let ratios = || {
            self.files_in_window
                .iter()
                .map(|(path, f)| (path, ratio(f.lines, f.file_lines)))
        };
        let (coverage, coverage_file) = if named {
            let best = max_by_ratio(ratios().map(|(path, r)| (name(*path), r)));
            (best.map(|(_, r)| r), best.map(|(path, _)| path.to_owned()))
        } else {
            (max_by_ratio(ratios()).map(|(_, r)| r), None)
        };
        Reason {
            dup: share(dup_count, window_calls),
            top,
            top_what,
            slow: self.slow,
            coverage: coverage.unwrap_or(0.0),
            coverage_file,
            landed: self.landed,
            calls_since_landed: self.span.len(),
            window_calls,
            read_only: self.read_only,
            cycle: self.cycle,
            reread: reread.unwrap_or(0.0),
            reread_file,
            repeat: self.repeat,
            ..Reason::default()
        }
    }
}

/// The incremental form of [`longest_cycle`]: `runs[p - 1]` counts the calls at the end of
/// `span` equal (by `same`, polls matching nothing) to the call `p` before them; updated for the
/// call just appended. Returns the longest qualifying stretch ending at that call whose block
/// (its last `p` calls) `counts`, or 0.
fn extend_runs(
    runs: &mut [u32],
    span: &[SpanCall],
    min_repeats: usize,
    same: impl Fn(&SpanCall, &SpanCall) -> bool,
    counts: impl Fn(&[SpanCall]) -> bool,
) -> u32 {
    let Some((call, _)) = span.split_last() else {
        return 0;
    };
    let last = span.len() - 1;
    let mut best = 0;
    for (i, run) in runs.iter_mut().enumerate() {
        let p = i + 1;
        let earlier = (last >= p).then(|| &span[last - p]);
        if !call.wait && earlier.is_some_and(|e| !e.wait && same(e, call)) {
            *run += 1;
            if *run as usize >= (min_repeats - 1) * p && counts(&span[last + 1 - p..]) {
                best = best.max(*run + p as u32);
            }
        } else {
            *run = 0;
        }
    }
    best
}

fn is_zero_pair(pair: &(u32, u32)) -> bool {
    *pair == (0, 0)
}

fn decrement(counts: &mut FxHashMap<u32, u32>, key: u32) {
    if let Some(n) = counts.get_mut(&key) {
        *n -= 1;
        if *n == 0 {
            counts.remove(&key);
        }
    }
}
