//! The detector: the evaluation span, the window and the four signals.
//!
//! Under the `precise` profile the rules of [`crate::Rule`] apply: more landings (bash writes,
//! unless one repeats an earlier one), other bash targets, polls that count towards `slow` only,
//! and two more signals (`cycle`, `reread`).
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
use crate::verdict::{Reason, SessionVerdict, Signal};
use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
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
/// `repeat` also looks at the session's last this-many calls, landings included.
pub const STALE_WINDOW: usize = 8;
/// `repeat` fires when at least this many of the last [`STALE_WINDOW`] calls echo one of the
/// [`ECHO_HISTORY`] calls before them ([`Staleness`]).
pub const STALE_MIN: u32 = 6;
/// `repeat` also fires when at least [`STALE_LONG_MIN`] of the session's last this-many calls
/// echo: a loop diluted by new calls (a noisy loop) still echoes most of the time.
pub const STALE_LONG_WINDOW: usize = 14;
/// See [`STALE_LONG_WINDOW`].
pub const STALE_LONG_MIN: u32 = 9;
/// How far back a call looks for the call it echoes.
pub const ECHO_HISTORY: usize = 16;
/// `repeat` also fires when the session has made at least this many calls since it last landed
/// and at least half of them echo ([`Staleness`]): a loop that starts right after a change,
/// however it shuffles its calls among new ones, repeats more than half of what it does.
pub const STALE_SPAN_MIN_CALLS: u32 = 10;
/// `repeat` also fires when the session's last this-many calls are one failed call (status
/// `error` or a non-zero exit) with the same result each time: a call that failed, sent again
/// twice unchanged and failing the same way (OpenHands' stuck detector: the same action and the
/// same error three times).
pub const FAILING_MIN: u32 = 3;
/// `repeat` also fires when one call and result occurs at least this many times among the
/// session's last [`ECHO_HISTORY`] calls, [`RECUR_RECENT_MIN`] of them among its last
/// [`RECUR_RECENT_WINDOW`]: a call the agent keeps coming back to, seeing the same result,
/// however many new calls it makes between.
pub const RECUR_MIN: u32 = 5;
/// See [`RECUR_MIN`].
pub const RECUR_RECENT_WINDOW: usize = 12;
/// See [`RECUR_MIN`].
pub const RECUR_RECENT_MIN: u32 = 4;

/// One call as [`Staleness`] remembers it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Echo {
    /// The call and its result ([`seen_key`]); `None` for a poll, which echoes nothing.
    key: Option<String>,
    /// The lines of one file it showed, until the session lands.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    view: Option<(String, u64, u64)>,
    /// The call failed ([`CallFacts::failed`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    failed: bool,
}

/// Which of a session's last calls made no progress, for `repeat`'s figures `stale` and
/// `stale_long`, fed the same way by both forms so they cannot drift apart. A call *echoes* when
/// it is one of the [`ECHO_HISTORY`] calls before it again with the same result (issue 15's "no
/// progress": the same output hash where there is one, otherwise the same identity with the same
/// exit status), or when at least half of the lines of a file it shows were shown by one of them
/// since the session last landed (a reread of the same region: nothing can have changed those
/// lines). A landing forgives no echo by output hash, since the hash says whether the landing
/// changed what the call sees; it forgives an echo by exit status alone, which cannot say. A
/// poll echoes nothing (waiting is no loop; `slow` counts it). A call whose output changed (a
/// poll of a running job, a test rerun after a real edit, a page at a new offset, `git status`
/// after a commit) echoes nothing either: the first call of a loop that sees a new output counts
/// from its second occurrence on.
#[derive(Debug, Clone, Default)]
struct Staleness {
    history: VecDeque<Echo>,
    /// Whether each of the last [`STALE_LONG_WINDOW`] calls echoed.
    recent: VecDeque<bool>,
    /// The calls since the session last landed, and how many of them echoed.
    since_landed: (u32, u32),
}

impl Staleness {
    /// Account for the next counted call (`facts.landed` as the detector finally judged it).
    fn push(&mut self, facts: &Facts<'_>) {
        let key = (!facts.wait).then(|| seen_key(facts.identity, facts.result));
        let view = if facts.wait {
            None
        } else {
            facts.view.map(|(path, a, b)| (path.to_owned(), a, b))
        };
        let echoed = key
            .as_ref()
            .is_some_and(|key| self.history.iter().any(|e| e.key.as_ref() == Some(key)))
            || view.as_ref().is_some_and(|(path, a, b)| {
                self.history.iter().any(|e| {
                    e.view
                        .as_ref()
                        .is_some_and(|(p, x, y)| p == path && shows_half_again(*a, *b, *x, *y))
                })
            });
        if facts.landed {
            // A landing may have changed any file: what was shown before it is no evidence, and
            // neither is a result without an output hash.
            for e in &mut self.history {
                e.view = None;
                if e.key.as_deref().is_some_and(|k| !has_output_hash(k)) {
                    e.key = None;
                }
            }
        }
        if self.history.len() == ECHO_HISTORY {
            self.history.pop_front();
        }
        self.history.push_back(Echo {
            key,
            view,
            failed: facts.failed,
        });
        if self.recent.len() == STALE_LONG_WINDOW {
            self.recent.pop_front();
        }
        self.recent.push_back(echoed);
        self.since_landed = if facts.landed {
            (0, 0)
        } else {
            let (calls, echoes) = self.since_landed;
            (
                calls.saturating_add(1),
                echoes.saturating_add(u32::from(echoed)),
            )
        };
    }

    /// How many of the last `window` calls echoed.
    fn count(&self, window: usize) -> u32 {
        count_true(self.recent.iter().rev().take(window))
    }

    /// `repeat`'s figure `failing`: how many of the last calls are one failed call with the
    /// same result, in a row (a poll breaks the row; 0 when the last call did not fail).
    fn failing(&self) -> u32 {
        let Some(last) = self.history.back().filter(|e| e.failed && e.key.is_some()) else {
            return 0;
        };
        let run = self
            .history
            .iter()
            .rev()
            .take_while(|e| e.failed && e.key == last.key)
            .count();
        u32::try_from(run).unwrap_or(u32::MAX)
    }

    /// `repeat`'s figure `recur`: the most times one call and result occurs among the last
    /// [`ECHO_HISTORY`] calls, of those that occur at least [`RECUR_RECENT_MIN`] times among the
    /// last [`RECUR_RECENT_WINDOW`] (0 when none does). A result without an output hash seen
    /// before a landing is forgotten by it, as for echoes.
    fn recur(&self) -> u32 {
        let recent_from = self.history.len().saturating_sub(RECUR_RECENT_WINDOW);
        let mut best = 0;
        for (i, e) in self.history.iter().enumerate().skip(recent_from) {
            let Some(key) = &e.key else { continue };
            // Count each call once, at its first occurrence in the recent calls.
            let same = |other: &Echo| other.key.as_ref() == Some(key);
            if self
                .history
                .iter()
                .skip(recent_from)
                .take(i - recent_from)
                .any(same)
            {
                continue;
            }
            let recent = self
                .history
                .iter()
                .skip(recent_from)
                .filter(|o| same(o))
                .count();
            if u32::try_from(recent).unwrap_or(u32::MAX) >= RECUR_RECENT_MIN {
                let all = self.history.iter().filter(|o| same(o)).count();
                best = best.max(u32::try_from(all).unwrap_or(u32::MAX));
            }
        }
        best
    }
}

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
    // Strong evidence: the same calls seeing the same results speak before `min_calls`.
    let repeat = config.applies(Rule::Repeat)
        && (reason.repeat >= config.repeat_min
            || reason.stale >= STALE_MIN
            || reason.stale_long >= STALE_LONG_MIN
            || reason.failing >= FAILING_MIN
            || reason.recur >= RECUR_MIN
            || (reason.stale_span_calls >= STALE_SPAN_MIN_CALLS
                && u64::from(reason.stale_span) * 2 >= u64::from(reason.stale_span_calls)));
    if reason.calls_since_landed >= config.min_calls {
        let top_min = if reason.read_only {
            config.top_min_ro
        } else {
            config.top_min
        };
        if reason.dup > config.dup_min {
            signals.push(Signal::Dup);
        }
        if reason.top >= top_min {
            signals.push(Signal::Top);
        }
        if reason.slow >= config.cum_min {
            signals.push(Signal::Slow);
        }
        if reason.coverage >= config.cover_min {
            signals.push(Signal::Coverage);
        }
        if config.applies(Rule::Cycle) && reason.cycle >= config.cycle_min {
            signals.push(Signal::Cycle);
        }
        if config.applies(Rule::Rereads) && reason.reread >= config.reread_min {
            signals.push(Signal::Reread);
        }
    }
    if repeat {
        signals.push(Signal::Repeat);
    }
    SessionVerdict {
        id: id.to_owned(),
        flagged: !signals.is_empty(),
        signals,
        reason,
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

/// What `auto` decides from ([`Profile::judging`]): whether a counted call so far used bash,
/// and whether one used an edit or write tool.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
struct Tools {
    bash: bool,
    edits: bool,
}

impl Tools {
    /// Account for a counted call of `tool`.
    fn push(&mut self, tool: &str, config: &DetectConfig) {
        self.bash |= tool == "bash";
        self.edits |= config.is_edit(tool) || config.is_write(tool);
    }

    fn of(calls: &[Call], config: &DetectConfig) -> Self {
        let mut tools = Self::default();
        for call in calls.iter().filter(|c| c.status.is_counted()) {
            tools.push(&call.tool, config);
        }
        tools
    }

    fn judging(self, profile: Profile) -> Profile {
        profile.judging(self.bash, self.edits)
    }
}

/// The profile that judges `session` under `config`: `config.profile`, except under `auto`,
/// where it is `precise` for a session that works through bash alone and `design` otherwise.
pub fn judging_profile(session: &Session, config: &DetectConfig) -> Profile {
    Tools::of(&session.calls, config).judging(config.profile)
}

/// `config` as it judges `session` (see [`judging_profile`]).
fn judging_config(session: &Session, config: &DetectConfig) -> Option<DetectConfig> {
    (config.profile == Profile::Auto).then(|| config.under(judging_profile(session, config)))
}

/// The facts of a session's counted calls, in order. Under `precise`, a bash write identical to
/// an earlier landed bash write of the session is no landing. Under `auto`, the facts of the
/// profile that judges the session.
pub fn session_facts(session: &Session, config: &DetectConfig) -> Vec<CallFacts> {
    indexed_session_facts(session, config)
        .into_iter()
        .map(|(_, f)| f)
        .collect()
}

/// [`session_facts`], each with the index of its call in `session.calls`.
fn indexed_session_facts(session: &Session, config: &DetectConfig) -> Vec<(usize, CallFacts)> {
    if let Some(config) = judging_config(session, config) {
        return indexed_session_facts(session, &config);
    }
    let ctx = CallContext {
        directory: session.directory.as_deref(),
        line_counts: &session.line_counts,
    };
    let mut facts: Vec<(usize, CallFacts)> = session
        .calls
        .iter()
        .enumerate()
        .filter_map(|(i, call)| CallFacts::of(call, ctx, config).map(|f| (i, f)))
        .collect();
    if config.applies(Rule::RepeatedWrites) {
        let mut written: BTreeSet<String> = BTreeSet::new();
        for (_, f) in facts.iter_mut().filter(|(_, f)| f.write) {
            if !written.insert(f.identity.clone()) {
                f.landed = false;
                f.write = false;
            }
        }
    }
    facts
}

/// Which calls of `session` make no progress as `repeat` counts them (they *echo*, see
/// [`Staleness`]): one flag per call of `session.calls`, `false` for a call not counted. For
/// tools that build or measure sessions (the latency set's loops are as long as the issue asks
/// in these calls), so they count what the detector counts.
pub fn no_progress_calls(session: &Session, config: &DetectConfig) -> Vec<bool> {
    let mut flags = vec![false; session.calls.len()];
    let mut staleness = Staleness::default();
    for (i, f) in indexed_session_facts(session, config) {
        staleness.push(&f.as_facts());
        flags[i] = staleness.recent.back() == Some(&true);
    }
    flags
}

/// `cycle` (periods 1-6) and `repeat` (periods 1-3): the longest stretch of `ids` made of one
/// block of 1-`max_period` calls repeated in a row at least `min_repeats` times (calls covered),
/// or 0. `None` matches nothing.
fn longest_cycle<T: PartialEq>(ids: &[Option<T>], max_period: usize, min_repeats: usize) -> u32 {
    let mut best = 0;
    for p in 1..=max_period {
        let mut run = 0usize;
        for i in p..ids.len() {
            if ids[i].is_some() && ids[i] == ids[i - p] {
                run += 1;
                if run >= (min_repeats - 1) * p {
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
    if let Some(judging) = judging_config(session, config) {
        let mut verdict = judge_facts(session, facts, latest_descendant_landing, &judging);
        verdict.reason.auto = Some(judging.profile);
        return verdict;
    }
    let own_cut = facts.iter().rposition(|f| f.landed).map_or(0, |i| i + 1);
    let descendant_cut = latest_descendant_landing.map_or(0, |t| {
        facts
            .iter()
            .rposition(|f| f.start_ms.is_some_and(|s| s <= t))
            .map_or(0, |i| i + 1)
    });
    let span = &facts[own_cut.max(descendant_cut)..];
    let window = &span[span.len().saturating_sub(config.window)..];

    let mut identity_in_window: FxHashMap<&str, u32> = FxHashMap::default();
    let mut target_in_window: FxHashMap<&str, u32> = FxHashMap::default();
    // path -> (lines read, the file length of its latest read)
    let mut files: BTreeMap<&str, (u64, u64)> = BTreeMap::new();
    let mut views: Vec<(&str, u64, u64)> = Vec::new();
    for f in window {
        if let Some(v) = &f.view {
            views.push((&v.path, v.first, v.last));
        }
        // A poll counts towards `slow` only.
        if !f.wait {
            *identity_in_window.entry(&f.identity).or_default() += 1;
            *target_in_window.entry(&f.target).or_default() += 1;
        }
        if let Some(read) = &f.read {
            let entry = files.entry(&read.path).or_default();
            entry.0 += read.lines;
            entry.1 = read.file_lines;
        }
    }
    let mut identity_in_span: FxHashMap<&str, u32> = FxHashMap::default();
    for f in span {
        *identity_in_span.entry(&f.identity).or_default() += 1;
    }
    let dup_count = identity_in_window.values().copied().max().unwrap_or(0);
    let top = max_by_count(target_in_window.iter().map(|(k, n)| (*k, *n)));
    let coverage = max_by_ratio(
        files
            .iter()
            .map(|(path, (lines, len))| (*path, ratio(*lines, *len))),
    );
    let cycle = if config.applies(Rule::Cycle) {
        // A poll matches nothing: waiting breaks a cycle.
        let ids: Vec<Option<&str>> = span
            .iter()
            .map(|f| (!f.wait).then_some(f.identity.as_str()))
            .collect();
        longest_cycle(&ids, CYCLE_MAX_PERIOD, CYCLE_MIN_REPEATS)
    } else {
        0
    };
    let repeat = if config.applies(Rule::Repeat) {
        // The same call seeing the same result; a poll matches nothing.
        let ids: Vec<Option<(&str, &str)>> = span
            .iter()
            .map(|f| (!f.wait).then_some((f.identity.as_str(), f.result.as_str())))
            .collect();
        longest_cycle(&ids, REPEAT_MAX_PERIOD, REPEAT_MIN_REPEATS)
    } else {
        0
    };
    let reread = if config.applies(Rule::Rereads) {
        most_reread(views)
    } else {
        None
    };
    let (stale, stale_long, (stale_span_calls, stale_span), failing, recur) =
        if config.applies(Rule::Repeat) {
            let mut staleness = Staleness::default();
            for f in facts {
                staleness.push(&f.as_facts());
            }
            if facts.last().is_some_and(|f| f.landed) {
                // A landing at the end always unflags, until the calls after it repeat again.
                (0, 0, (0, 0), 0, 0)
            } else {
                (
                    staleness.count(STALE_WINDOW),
                    staleness.count(STALE_LONG_WINDOW),
                    staleness.since_landed,
                    staleness.failing(),
                    staleness.recur(),
                )
            }
        } else {
            (0, 0, (0, 0), 0, 0)
        };
    let reason = Reason {
        dup: share(dup_count, window.len()),
        top: top.map_or(0, |(_, n)| n),
        top_what: top.map_or_else(String::new, |(k, _)| k.to_owned()),
        slow: identity_in_span.values().copied().max().unwrap_or(0),
        coverage: coverage.map_or(0.0, |(_, r)| r),
        coverage_file: coverage.map(|(path, _)| path.to_owned()),
        landed: own_cut > 0 || latest_descendant_landing.is_some(),
        calls_since_landed: span.len(),
        window_calls: window.len(),
        read_only: is_read_only(session, config),
        cycle,
        reread: reread.map_or(0.0, |(_, r)| r),
        reread_file: reread.map(|(path, _)| path.to_owned()),
        repeat,
        stale,
        stale_long,
        stale_span,
        stale_span_calls,
        failing,
        recur,
        auto: None,
    };
    verdict_from_figures(&session.id, reason, config)
}

/// `reread`: for each file viewed in the window, the lines shown (with repeats) over the
/// distinct lines shown; the largest, ties broken by the smallest path.
fn most_reread<K: Ord + Copy>(mut views: Vec<(K, u64, u64)>) -> Option<(K, f64)> {
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
    /// What the call saw (`precise`, rule `repeat`); `None` in snapshots older than the rule.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    result: Option<u32>,
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
    /// Shared by an `auto` detector's two profiles.
    line_counts: Arc<BTreeMap<String, u64>>,
    names: Names,
    span: Vec<SpanCall>,
    window_start: usize,
    identity_in_span: FxHashMap<u32, u32>,
    slow: u32,
    identity_in_window: FxHashMap<u32, u32>,
    target_in_window: FxHashMap<u32, u32>,
    files_in_window: FxHashMap<u32, FileInWindow>,
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
    /// `repeat`: which of the session's calls made no progress.
    staleness: Staleness,
    /// Whether the last call pushed landed (a landing at the end always unflags).
    last_landed: bool,
    /// Identities of the bash writes that landed (`precise`: a repeat is no landing).
    written: BTreeSet<String>,
    /// `auto`: the session judged under `precise` too (this detector runs under `design`).
    auto: Option<Box<Auto>>,
    /// Where each call's facts are written (no allocation per call).
    scratch: Scratch,
}

/// `auto`: the session's detector under `precise`, and what decides which of the two speaks.
#[derive(Debug, Clone)]
struct Auto {
    precise: SessionDetector,
    tools: Tools,
}

/// What an `auto` detector remembers besides its `design` detector's snapshot.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct AutoSnapshot {
    precise: DetectorSnapshot,
    tools: Tools,
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
    /// The profile the snapshot was taken under (restoring under another is refused).
    #[serde(default)]
    pub profile: Profile,
    /// The bash writes that landed (`precise`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    written: Vec<String>,
    /// The session's last calls and results (`precise`, rule `repeat`).
    #[serde(default, skip_serializing_if = "VecDeque::is_empty")]
    history: VecDeque<Echo>,
    /// `auto`: the session's detector under `precise` and what decides (the fields above are
    /// its detector under `design`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    auto: Option<Box<AutoSnapshot>>,
    /// Whether each of the session's last calls echoed an earlier one (`precise`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    recent: Vec<bool>,
    /// The calls since the session last landed and how many of them echoed (`precise`).
    #[serde(default, skip_serializing_if = "is_zero_pair")]
    since_landed: (u32, u32),
    /// Whether the last call landed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    last_landed: bool,
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
        if config.profile == Profile::Auto {
            let precise = Self::with_line_counts(
                session,
                Arc::clone(&line_counts),
                &config.under(Profile::Precise),
            );
            let mut detector =
                Self::with_line_counts(session, line_counts, &config.under(Profile::Design));
            detector.auto = Some(Box::new(Auto {
                precise,
                tools: Tools::default(),
            }));
            return detector;
        }
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
            landed: false,
            latest_descendant_landing: None,
            latest_own_landing: None,
            own_landings: None,
            runs: [0; CYCLE_MAX_PERIOD],
            cycle: 0,
            repeat_runs: [0; REPEAT_MAX_PERIOD],
            repeat: 0,
            staleness: Staleness::default(),
            last_landed: false,
            written: BTreeSet::new(),
            auto: None,
            scratch: Scratch::default(),
        }
    }

    /// The detector whose verdict is the session's: under `auto`, the one of the profile that
    /// judges the session so far; otherwise this one.
    fn judging(&self) -> (&Self, Option<Profile>) {
        match &self.auto {
            Some(auto) => match auto.tools.judging(Profile::Auto) {
                Profile::Precise => (&auto.precise, Some(Profile::Precise)),
                profile => (self, Some(profile)),
            },
            None => (self, None),
        }
    }

    /// The session's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The time of the latest landed call pushed (its end, else its start), if any.
    pub fn latest_own_landing(&self) -> Option<i64> {
        self.judging().0.latest_own_landing
    }

    /// This detector, keeping the time of each landed call pushed from now on
    /// ([`SessionDetector::own_landings`]): for a caller that passes a session's landings to its
    /// ancestors (the backtest reads each session once, issue 19).
    pub fn recording_own_landings(mut self) -> Self {
        self.own_landings = Some(Vec::new());
        if let Some(auto) = &mut self.auto {
            auto.precise.own_landings = Some(Vec::new());
        }
        self
    }

    /// The times of the landed calls pushed since [`SessionDetector::recording_own_landings`]
    /// (each one's end, else its start), in the order pushed, under the profile that judges the
    /// session so far: once every call is pushed, the landings of [`session_facts`]. Empty when
    /// not recording.
    pub fn own_landings(&self) -> &[i64] {
        self.judging().0.own_landings.as_deref().unwrap_or_default()
    }

    /// The latest descendant landing pushed, if any.
    pub fn latest_descendant_landing(&self) -> Option<i64> {
        self.judging().0.latest_descendant_landing
    }

    /// A compact copy of what this detector must remember (see [`DetectorSnapshot`]).
    pub fn snapshot(&self) -> DetectorSnapshot {
        let mut snapshot = self.own_snapshot();
        if let Some(auto) = &self.auto {
            snapshot.profile = Profile::Auto;
            snapshot.auto = Some(Box::new(AutoSnapshot {
                precise: auto.precise.snapshot(),
                tools: auto.tools,
            }));
        }
        snapshot
    }

    fn own_snapshot(&self) -> DetectorSnapshot {
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
                result: c.result.map(|r| map(r, &mut names)),
            })
            .collect();
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
            written: self.written.iter().cloned().collect(),
            history: self.staleness.history.clone(),
            recent: self.staleness.recent.iter().copied().collect(),
            since_landed: self.staleness.since_landed,
            last_landed: self.last_landed,
            auto: None,
        }
    }

    /// Rebuild a detector from a snapshot taken under the same `config`. A snapshot whose span
    /// names something it does not hold, or taken under another profile, is refused (`None`):
    /// the caller starts over.
    pub fn restore(mut snapshot: DetectorSnapshot, config: &DetectConfig) -> Option<Self> {
        if snapshot.profile != config.profile {
            return None;
        }
        if config.profile == Profile::Auto {
            let auto = snapshot.auto.take()?;
            snapshot.profile = Profile::Design;
            let mut detector = Self::restore(snapshot, &config.under(Profile::Design))?;
            detector.auto = Some(Box::new(Auto {
                precise: Self::restore(auto.precise, &config.under(Profile::Precise))?,
                tools: auto.tools,
            }));
            return Some(detector);
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
        let mut detector = Self {
            id: snapshot.id,
            config: config.clone(),
            read_only: snapshot.read_only,
            directory: snapshot.directory,
            line_counts: Arc::new(snapshot.line_counts),
            names: {
                let mut names = Names::default();
                for name in &snapshot.names {
                    names.push_anew(name);
                }
                names
            },
            span: Vec::with_capacity(snapshot.span.len()),
            window_start: 0,
            identity_in_span: FxHashMap::default(),
            slow: 0,
            identity_in_window: FxHashMap::default(),
            target_in_window: FxHashMap::default(),
            files_in_window: FxHashMap::default(),
            landed: snapshot.landed,
            latest_descendant_landing: snapshot.latest_descendant_landing,
            latest_own_landing: snapshot.latest_own_landing,
            own_landings: None,
            runs: [0; CYCLE_MAX_PERIOD],
            cycle: 0,
            repeat_runs: [0; REPEAT_MAX_PERIOD],
            repeat: 0,
            staleness: Staleness {
                history: snapshot.history,
                recent: snapshot.recent.into_iter().collect(),
                since_landed: snapshot.since_landed,
            },
            last_landed: snapshot.last_landed,
            written: snapshot.written.into_iter().collect(),
            auto: None,
            scratch: Scratch::default(),
        };
        for call in snapshot.span {
            detector.span.push(call);
            detector.add(call);
        }
        Some(detector)
    }

    /// The session's calls are all pushed: forget what only the matching of further calls
    /// reads (the line counts, the scratch buffers, spare room), for a caller that keeps many
    /// detectors to pass descendants' landings up their trees (`detect`, issue 19). Verdicts
    /// and landings pushed later are unchanged; a call pushed later is read without file
    /// lengths, and a snapshot holds no line counts.
    pub fn calls_done(&mut self) {
        if let Some(auto) = &mut self.auto {
            auto.precise.calls_done();
        }
        self.line_counts = Arc::default();
        self.scratch = Scratch::default();
        self.span.shrink_to_fit();
        self.names.shrink_to_fit();
    }

    /// Learn a file's length (as `line_counts` would give it) for reads pushed from now on.
    pub fn set_line_count(&mut self, path: impl Into<String>, lines: u64) {
        let path = path.into();
        if let Some(auto) = &mut self.auto {
            auto.precise.set_line_count(path.clone(), lines);
        }
        // Copied first when shared (an `auto` detector's two profiles share them).
        Arc::make_mut(&mut self.line_counts).insert(path, lines);
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
        if let Some(auto) = &mut self.auto {
            auto.tools.push(call.tool, &self.config);
            auto.precise.push_in(call, line_counts);
        }
        self.push_counted(call, line_counts);
    }

    /// [`SessionDetector::push_in`] for this detector alone (not its `auto` twin).
    fn push_counted(&mut self, call: &CallRef<'_>, line_counts: Option<&LineCountsText<'_>>) {
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
        if facts.write && self.config.applies(Rule::RepeatedWrites) {
            if self.written.contains(facts.identity) {
                facts.landed = false;
            } else {
                self.written.insert(facts.identity.to_owned());
            }
        }
        if self.config.applies(Rule::Repeat) {
            self.staleness.push(facts);
        }
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
        let result = self
            .config
            .applies(Rule::Repeat)
            .then(|| self.names.intern(facts.result));
        let span_call = SpanCall {
            identity: self.names.intern(facts.identity),
            target: self.names.intern(facts.target),
            read,
            start_ms: facts.start_ms,
            wait: facts.wait,
            view,
            result,
        };
        self.span.push(span_call);
        self.add(span_call);
    }

    /// A transitive descendant landed at `at_ms`: own calls that started at or before it leave
    /// the span, whenever the news arrives.
    pub fn push_descendant_landing(&mut self, at_ms: i64) {
        if let Some(auto) = &mut self.auto {
            auto.precise.push_descendant_landing(at_ms);
        }
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
            *self.identity_in_window.entry(call.identity).or_default() += 1;
            *self.target_in_window.entry(call.target).or_default() += 1;
        }
        if let Some((path, lines, file_lines)) = call.read {
            let file = self.files_in_window.entry(path).or_default();
            file.lines += lines;
            file.reads += 1;
            file.file_lines = file_lines;
        }
        if self.config.applies(Rule::Cycle) {
            let best = extend_runs(&mut self.runs, &self.span, CYCLE_MIN_REPEATS, |a, b| {
                a.identity == b.identity
            });
            self.cycle = self.cycle.max(best);
        }
        if self.config.applies(Rule::Repeat) {
            let best = extend_runs(
                &mut self.repeat_runs,
                &self.span,
                REPEAT_MIN_REPEATS,
                |a, b| a.identity == b.identity && a.result.is_some() && a.result == b.result,
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
        }
    }

    /// The verdict on the calls pushed so far (under `auto`, the verdict of the profile that
    /// judges the session, which its reason names).
    pub fn verdict(&self) -> SessionVerdict {
        match self.judging() {
            (_, None) => self.own_verdict(),
            (detector, Some(profile)) => {
                let mut verdict = detector.own_verdict();
                verdict.reason.auto = Some(profile);
                verdict
            }
        }
    }

    /// [`SessionDetector::verdict`] without its names: `id`, `top_what`, `coverage_file` and
    /// `reread_file` are left empty, every figure and signal is the verdict's. For a caller that
    /// reads a verdict at many points and shows no names (the backtest judges every prefix):
    /// nothing is copied and nothing allocated unless a signal fires.
    pub fn figures(&self) -> SessionVerdict {
        match self.judging() {
            (_, None) => self.own_judgement(false),
            (detector, Some(profile)) => {
                let mut verdict = detector.own_judgement(false);
                verdict.reason.auto = Some(profile);
                verdict
            }
        }
    }

    fn own_verdict(&self) -> SessionVerdict {
        self.own_judgement(true)
    }

    /// This detector's verdict, with its names when `named` (see [`SessionDetector::figures`]).
    fn own_judgement(&self, named: bool) -> SessionVerdict {
        let name = |id: u32| self.names.get(id);
        let views = || self.span[self.window_start..].iter().filter_map(|c| c.view);
        // Without names, files are told apart by their interned ids: the same figures.
        let (reread, reread_file) = match (self.config.applies(Rule::Rereads), named) {
            (false, _) => (None, None),
            (true, true) => {
                let best = most_reread(views().map(|(p, a, b)| (name(p), a, b)).collect());
                (best.map(|(_, r)| r), best.map(|(path, _)| path.to_owned()))
            }
            (true, false) => (most_reread(views().collect()).map(|(_, r)| r), None),
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
        let reason = Reason {
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
            stale: if self.last_landed {
                0
            } else {
                self.staleness.count(STALE_WINDOW)
            },
            stale_long: if self.last_landed {
                0
            } else {
                self.staleness.count(STALE_LONG_WINDOW)
            },
            stale_span: self.staleness.since_landed.1,
            stale_span_calls: self.staleness.since_landed.0,
            failing: if self.last_landed {
                0
            } else {
                self.staleness.failing()
            },
            recur: if self.last_landed {
                0
            } else {
                self.staleness.recur()
            },
            auto: None,
        };
        verdict_from_figures(if named { &self.id } else { "" }, reason, &self.config)
    }
}

/// The incremental form of [`longest_cycle`]: `runs[p - 1]` counts the calls at the end of
/// `span` equal (by `same`, polls matching nothing) to the call `p` before them; updated for the
/// call just appended. Returns the longest qualifying stretch ending at that call, or 0.
fn extend_runs(
    runs: &mut [u32],
    span: &[SpanCall],
    min_repeats: usize,
    same: impl Fn(&SpanCall, &SpanCall) -> bool,
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
            if *run as usize >= (min_repeats - 1) * p {
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

fn count_true<'a>(flags: impl Iterator<Item = &'a bool>) -> u32 {
    u32::try_from(flags.filter(|f| **f).count()).unwrap_or(u32::MAX)
}

/// Whether a [`seen_key`]'s result is an output hash (its result, which never holds the
/// separator, is `#` and the hash).
fn has_output_hash(key: &str) -> bool {
    key.rsplit_once('\u{1f}')
        .is_some_and(|(_, result)| result.starts_with('#'))
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

/// A call and its result, as the incremental detector remembers them for `repeat`.
fn seen_key(identity: &str, result: &str) -> String {
    let mut key = String::with_capacity(identity.len() + result.len() + 1);
    key.push_str(identity);
    key.push('\u{1f}');
    key.push_str(result);
    key
}

fn decrement(counts: &mut FxHashMap<u32, u32>, key: u32) {
    if let Some(n) = counts.get_mut(&key) {
        *n -= 1;
        if *n == 0 {
            counts.remove(&key);
        }
    }
}
