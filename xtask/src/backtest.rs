//! The backtest: labelled sessions replayed through the detector the way the live watchdog sees
//! them while they grow.
//!
//! **Prefixes.** A session of `n` calls is judged on its first `k` calls for `k = min_calls`,
//! `min_calls + step`, `min_calls + 2 step`, … (below `n`), and `k = n` (a session shorter than
//! `min_calls` is judged once, whole). It counts as flagged when any prefix flags; the first such
//! `k` is `first_flag_at_call`, and `signals` lists every signal that fired at any prefix.
//!
//! **Trees.** A session's verdict depends on its descendants' landings (decisions.md section 1).
//! A prefix is a moment in time: the *cut time* `T` is the time of the prefix's last call (its end,
//! else its start; a call without a time borrows the latest time before it in the prefix). Every
//! other session of the tree is cut at the same wall-clock time: only descendant landings that
//! ended at or before `T` are known. A prefix with no time at all knows every descendant landing
//! (without times, landings cannot be placed and detect-core ignores them anyway).
//!
//! Scoring is per session, on the session's own verdict (not its tree's): a looping child is
//! labelled `must_flag` on the child, and the parent above it is labelled on its own calls.

use detect_core::{
    DetectConfig, Forest, Label, Session, SessionDetector, SessionVerdict, Signal, judge_session,
    session_facts,
};
use serde::Serialize;
use serde_json::{Value, json};
use std::fmt::Write as _;

/// The default distance between evaluated prefixes, in calls.
pub const DEFAULT_STEP: usize = 5;

/// How to run a backtest.
#[derive(Debug, Clone)]
pub struct Options {
    pub config: DetectConfig,
    /// Calls between two evaluated prefixes (>= 1).
    pub step: usize,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            config: DetectConfig::default(),
            step: DEFAULT_STEP,
        }
    }
}

/// The largest figures seen over all evaluated prefixes: how close a session came to each
/// threshold.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Peak {
    pub dup: f64,
    pub top: u32,
    pub slow: u32,
    pub coverage: f64,
    /// `precise` only (0 under the design).
    pub cycle: u32,
    pub reread: f64,
}

impl Peak {
    /// Figures of prefixes whose span is too short to be judged do not count: they cannot fire.
    fn add(&mut self, verdict: &SessionVerdict, min_calls: usize) {
        let r = &verdict.reason;
        if r.calls_since_landed < min_calls {
            return;
        }
        self.dup = self.dup.max(r.dup);
        self.top = self.top.max(r.top);
        self.slow = self.slow.max(r.slow);
        self.coverage = self.coverage.max(r.coverage);
        self.cycle = self.cycle.max(r.cycle);
        self.reread = self.reread.max(r.reread);
    }
}

/// The outcome for one session.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionResult {
    pub id: String,
    pub label: Option<Label>,
    /// The root of the session's tree.
    pub root: String,
    pub calls: usize,
    pub flagged: bool,
    /// The first prefix (number of calls) that flagged.
    pub first_flag_at_call: Option<usize>,
    /// Every signal that fired at any prefix, in [`Signal::ALL`] order.
    pub signals: Vec<Signal>,
    /// The prefixes evaluated.
    pub prefixes: Vec<usize>,
    pub peak: Peak,
}

impl SessionResult {
    /// `Some(true)` when the label is met, `Some(false)` when missed, `None` when unlabelled.
    pub fn label_met(&self) -> Option<bool> {
        self.label.map(|l| (l == Label::MustFlag) == self.flagged)
    }
}

/// Labelled totals.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Count {
    pub total: usize,
    pub flagged: usize,
}

/// The confusion matrix and its ratios.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Summary {
    pub sessions: usize,
    pub flagged: usize,
    pub must_flag: Count,
    pub must_not_flag: Count,
    pub unlabelled: Count,
}

impl Summary {
    pub fn true_positives(&self) -> usize {
        self.must_flag.flagged
    }
    pub fn false_negatives(&self) -> usize {
        self.must_flag.total - self.must_flag.flagged
    }
    pub fn false_positives(&self) -> usize {
        self.must_not_flag.flagged
    }
    pub fn true_negatives(&self) -> usize {
        self.must_not_flag.total - self.must_not_flag.flagged
    }
    /// TP / (TP + FP); `None` when nothing labelled was flagged.
    pub fn precision(&self) -> Option<f64> {
        ratio(
            self.true_positives(),
            self.true_positives() + self.false_positives(),
        )
    }
    /// TP / (TP + FN); `None` when nothing is labelled `must_flag`.
    pub fn recall(&self) -> Option<f64> {
        ratio(self.true_positives(), self.must_flag.total)
    }
}

fn ratio(a: usize, b: usize) -> Option<f64> {
    (b > 0).then(|| a as f64 / b as f64)
}

/// A whole backtest.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    pub sessions: Vec<SessionResult>,
    pub summary: Summary,
    pub step: usize,
    pub config: DetectConfig,
}

impl Report {
    /// Every `must_flag` session flagged and no `must_not_flag` one.
    pub fn passed(&self) -> bool {
        self.sessions.iter().all(|s| s.label_met() != Some(false))
    }
}

/// The prefix lengths evaluated for a session of `n` calls.
pub fn prefixes(n: usize, min_calls: usize, step: usize) -> Vec<usize> {
    let step = step.max(1);
    let mut out = Vec::new();
    let mut k = min_calls.max(1);
    while k < n {
        out.push(k);
        k += step;
    }
    out.push(n);
    out
}

/// Run the backtest on a set of sessions (children may be in the same set as their parents).
pub fn run(sessions: &[Session], options: &Options) -> Report {
    let config = &options.config;
    let forest = Forest::build(sessions);
    let mut children: Vec<Vec<usize>> = vec![Vec::new(); sessions.len()];
    for i in 0..sessions.len() {
        if let Some(p) = forest.parent(i) {
            children[p].push(i);
        }
    }
    // The end times of each session's own landed calls; only a session with a parent is anyone's
    // descendant, so only those are looked at (a root's calls are judged once, below).
    let landings: Vec<Vec<i64>> = sessions
        .iter()
        .enumerate()
        .map(|(i, s)| {
            if forest.parent(i).is_none() {
                return Vec::new();
            }
            session_facts(s, config)
                .into_iter()
                .filter(|f| f.landed)
                .filter_map(|f| f.end_ms)
                .collect()
        })
        .collect();

    let results: Vec<SessionResult> = sessions
        .iter()
        .enumerate()
        .map(|(i, session)| {
            let descendant_landings: Vec<i64> = descendants(i, &children)
                .into_iter()
                .flat_map(|d| landings[d].iter().copied())
                .collect();
            judge_prefixes(
                session,
                &descendant_landings,
                options,
                root_of(i, &forest, sessions),
            )
        })
        .collect();

    let mut summary = Summary {
        sessions: results.len(),
        ..Summary::default()
    };
    for r in &results {
        summary.flagged += usize::from(r.flagged);
        let count = match r.label {
            Some(Label::MustFlag) => &mut summary.must_flag,
            Some(Label::MustNotFlag) => &mut summary.must_not_flag,
            None => &mut summary.unlabelled,
        };
        count.total += 1;
        count.flagged += usize::from(r.flagged);
    }
    Report {
        sessions: results,
        summary,
        step: options.step.max(1),
        config: config.clone(),
    }
}

fn descendants(i: usize, children: &[Vec<usize>]) -> Vec<usize> {
    let mut out = Vec::new();
    let mut stack: Vec<usize> = children[i].clone();
    while let Some(n) = stack.pop() {
        out.push(n);
        stack.extend(children[n].iter().copied());
    }
    out
}

fn root_of(mut i: usize, forest: &Forest, sessions: &[Session]) -> String {
    // Forest breaks cycles, so this walk ends; the bound is a belt for the braces.
    for _ in 0..=sessions.len() {
        match forest.parent(i) {
            Some(p) => i = p,
            None => break,
        }
    }
    sessions[i].id.clone()
}

fn judge_prefixes(
    session: &Session,
    descendant_landings: &[i64],
    options: &Options,
    root: String,
) -> SessionResult {
    let config = &options.config;
    let n = session.calls.len();
    let ks = prefixes(n, config.min_calls, options.step);
    // Each prefix is cut at the end of its last call; only descendant landings by then count.
    let cuts: Vec<Option<i64>> = ks
        .iter()
        .map(|&k| session.calls[..k].iter().rev().find_map(|c| c.end_ms()))
        .collect();
    let landing_by = |cut: Option<i64>| {
        descendant_landings
            .iter()
            .copied()
            .filter(|t| cut.is_none_or(|cut| *t <= cut))
            .max()
    };
    let mut flagged_at = None;
    let mut fired = [false; Signal::ALL.len()];
    let mut peak = Peak::default();
    let mut record = |k: usize, verdict: &SessionVerdict| {
        peak.add(verdict, config.min_calls);
        if verdict.flagged {
            flagged_at.get_or_insert(k);
            for s in &verdict.signals {
                fired[s.index()] = true;
            }
        }
    };
    if cuts.windows(2).all(|w| w[0] <= w[1]) {
        // Cuts only move forward: one incremental detector walks all prefixes (it equals the
        // batch judgement of each prefix; detect-core's proptest pins that).
        let mut detector = SessionDetector::new(session, config);
        let mut pushed = 0;
        for (&k, &cut) in ks.iter().zip(&cuts) {
            for call in &session.calls[pushed..k] {
                detector.push(call);
            }
            pushed = k;
            if let Some(t) = landing_by(cut) {
                detector.push_descendant_landing(t);
            }
            record(k, &detector.verdict());
        }
    } else {
        // Times out of order: judge each prefix on its own.
        let mut prefix = Session {
            calls: Vec::with_capacity(n),
            ..session.clone()
        };
        for (&k, &cut) in ks.iter().zip(&cuts) {
            prefix.calls.clear();
            prefix.calls.extend_from_slice(&session.calls[..k]);
            record(k, &judge_session(&prefix, landing_by(cut), config));
        }
    }
    SessionResult {
        id: session.id.clone(),
        label: session.label,
        root,
        calls: n,
        flagged: flagged_at.is_some(),
        first_flag_at_call: flagged_at,
        signals: Signal::ALL
            .into_iter()
            .filter(|s| fired[s.index()])
            .collect(),
        prefixes: ks,
        peak,
    }
}

fn label_text(label: Option<Label>) -> &'static str {
    label.map_or("-", Label::as_str)
}

fn signals_text(signals: &[Signal]) -> String {
    if signals.is_empty() {
        "-".to_owned()
    } else {
        signals
            .iter()
            .map(|s| s.as_str())
            .collect::<Vec<_>>()
            .join(",")
    }
}

fn ratio_text(r: Option<f64>) -> String {
    r.map_or_else(|| "n/a".to_owned(), |r| format!("{r:.3}"))
}

/// One session of the `--json` form.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JsonSession<'a> {
    pub id: &'a str,
    pub label: Option<&'static str>,
    pub flagged: bool,
    pub first_flag_at_call: Option<usize>,
    pub signals: Vec<&'static str>,
    pub root: &'a str,
}

/// A labelled count of the `--json` form.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JsonCount {
    pub total: usize,
    pub flagged: usize,
}

/// The summary of the `--json` form.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JsonSummary {
    pub sessions: usize,
    pub flagged: usize,
    pub must_flag: JsonCount,
    pub must_not_flag: JsonCount,
    /// `null` when nothing labelled was flagged.
    pub precision: Option<f64>,
    /// `null` when nothing is labelled `must_flag`.
    pub recall: Option<f64>,
}

/// The `--json` form (fixture-format.md, "Backtest"); fields serialise in the documented order.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JsonReport<'a> {
    pub sessions: Vec<JsonSession<'a>>,
    pub summary: JsonSummary,
}

/// The `--json` form of a report.
pub fn to_json(report: &Report) -> JsonReport<'_> {
    let s = &report.summary;
    let count = |c: Count| JsonCount {
        total: c.total,
        flagged: c.flagged,
    };
    JsonReport {
        sessions: report
            .sessions
            .iter()
            .map(|r| JsonSession {
                id: &r.id,
                label: r.label.map(Label::as_str),
                flagged: r.flagged,
                first_flag_at_call: r.first_flag_at_call,
                signals: r.signals.iter().map(|s| s.as_str()).collect(),
                root: &r.root,
            })
            .collect(),
        summary: JsonSummary {
            sessions: s.sessions,
            flagged: s.flagged,
            must_flag: count(s.must_flag),
            must_not_flag: count(s.must_not_flag),
            precision: s.precision(),
            recall: s.recall(),
        },
    }
}

/// The `--json` text: one pretty JSON object and a newline.
pub fn to_json_text(report: &Report) -> String {
    let mut text = serde_json::to_string_pretty(&to_json(report)).unwrap_or_default();
    text.push('\n');
    text
}

/// The human form: the settings, one row per session, the confusion matrix, and the closing
/// line `# backtest complete: N/M flagged`.
pub fn render_table(report: &Report) -> String {
    let c = &report.config;
    let mut out = String::new();
    // The precise profile's name and keys; the design's header stays as it was.
    let precise = if c.profile == detect_core::Profile::Design {
        String::new()
    } else {
        format!(
            " profile={} cycle_min={} reread_min={}",
            c.profile, c.cycle_min, c.reread_min
        )
    };
    let _ = writeln!(
        out,
        "backtest: step={} min_calls={} window={} dup_min={} top_min={} top_min_ro={} cum_min={} cover_min={}{precise}",
        report.step,
        c.min_calls,
        c.window,
        c.dup_min,
        c.top_min,
        c.top_min_ro,
        c.cum_min,
        c.cover_min
    );
    let id_width = report
        .sessions
        .iter()
        .map(|r| r.id.chars().count())
        .max()
        .unwrap_or(0)
        .max("session".len());
    let design = c.profile == detect_core::Profile::Design;
    // Wide enough for every signal list (the design's four fit in 21).
    let sig_width = report
        .sessions
        .iter()
        .map(|r| signals_text(&r.signals).len())
        .max()
        .unwrap_or(0)
        .max(21);
    let _ = writeln!(
        out,
        "{:<id_width$}  {:<13}  {:>5}  {:<7}  {:>5}  {:<sig_width$}  {:<6}  peak (dup top slow coverage{})",
        "session",
        "label",
        "calls",
        "flagged",
        "first",
        "signals",
        "result",
        if design { "" } else { " cycle reread" }
    );
    for r in &report.sessions {
        let result = match r.label_met() {
            None => "-",
            Some(true) => "ok",
            Some(false) if r.flagged => "FALSE+",
            Some(false) => "MISSED",
        };
        let _ = writeln!(
            out,
            "{:<id_width$}  {:<13}  {:>5}  {:<7}  {:>5}  {:<sig_width$}  {:<6}  {:.3} {} {} {:.2}",
            r.id,
            label_text(r.label),
            r.calls,
            if r.flagged { "yes" } else { "no" },
            r.first_flag_at_call
                .map_or_else(|| "-".to_owned(), |k| k.to_string()),
            signals_text(&r.signals),
            result,
            r.peak.dup,
            r.peak.top,
            r.peak.slow,
            r.peak.coverage,
        );
        if !design {
            out.pop();
            let _ = writeln!(out, " {} {:.2}", r.peak.cycle, r.peak.reread);
        }
    }
    let s = &report.summary;
    out.push('\n');
    out.push_str("confusion matrix       flagged  not flagged\n");
    for (name, count) in [
        ("must_flag", s.must_flag),
        ("must_not_flag", s.must_not_flag),
        ("unlabelled", s.unlabelled),
    ] {
        let _ = writeln!(
            out,
            "  {name:<18} {:>9}  {:>11}",
            count.flagged,
            count.total - count.flagged
        );
    }
    let _ = writeln!(
        out,
        "TP={} FP={} FN={} TN={}  precision={}  recall={}",
        s.true_positives(),
        s.false_positives(),
        s.false_negatives(),
        s.true_negatives(),
        ratio_text(s.precision()),
        ratio_text(s.recall()),
    );
    let _ = writeln!(
        out,
        "# backtest complete: {}/{} flagged",
        s.flagged, s.sessions
    );
    out
}

/// One threshold value of a sweep and how the labelled sessions fared.
#[derive(Debug, Clone, PartialEq)]
pub struct SweepRow {
    pub value: String,
    pub summary: Summary,
}

/// Parse `key=a..b[:step]` into the key and its values (inclusive). Whole numbers stay whole;
/// decimals keep the most decimal places written in `a`, `b` or `step`.
pub fn parse_sweep(spec: &str) -> Result<(String, Vec<String>), String> {
    let usage = || format!("--sweep {spec}: expected KEY=FROM..TO[:STEP], e.g. top_min=6..16");
    let (key, range) = spec.split_once('=').ok_or_else(usage)?;
    let key = key.trim();
    if key.is_empty() {
        return Err(usage());
    }
    let (range, step) = match range.split_once(':') {
        Some((r, s)) => (r, Some(s.trim())),
        None => (range, None),
    };
    let (from, to) = range.split_once("..").ok_or_else(usage)?;
    let (from, to) = (from.trim(), to.trim());
    let decimals = |s: &str| s.split_once('.').map_or(0, |(_, d)| d.len());
    let places = decimals(from)
        .max(decimals(to))
        .max(step.map_or(0, decimals));
    let num = |s: &str| -> Result<f64, String> {
        s.parse::<f64>()
            .ok()
            .filter(|f| f.is_finite())
            .ok_or_else(|| format!("--sweep {spec}: `{s}` is not a number"))
    };
    let (a, b) = (num(from)?, num(to)?);
    let step = match step {
        Some(s) => num(s)?,
        None if places == 0 => 1.0,
        None => 10f64.powi(-(places as i32)),
    };
    if step <= 0.0 {
        return Err(format!("--sweep {spec}: the step must be > 0"));
    }
    if a > b {
        return Err(format!("--sweep {spec}: FROM must not be above TO"));
    }
    let count = ((b - a) / step + 1e-9).floor() as usize + 1;
    if count > 1000 {
        return Err(format!(
            "--sweep {spec}: {count} values; at most 1000 are swept"
        ));
    }
    let values = (0..count)
        .map(|i| format!("{:.places$}", a + step * i as f64))
        .collect();
    Ok((key.to_owned(), values))
}

/// Run the backtest once per value of `key` (set on top of `options.config`).
pub fn sweep(
    sessions: &[Session],
    options: &Options,
    key: &str,
    values: &[String],
) -> Result<Vec<SweepRow>, detect_core::ConfigError> {
    values
        .iter()
        .map(|value| {
            let mut o = options.clone();
            o.config.set(key, value)?;
            Ok(SweepRow {
                value: value.clone(),
                summary: run(sessions, &o).summary,
            })
        })
        .collect()
}

/// The human form of a sweep.
pub fn render_sweep(key: &str, rows: &[SweepRow]) -> String {
    let width = rows
        .iter()
        .map(|r| r.value.len())
        .max()
        .unwrap_or(0)
        .max(key.len());
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{key:>width$}  {:>4} {:>4} {:>4} {:>4}  {:>9}  {:>6}",
        "TP", "FP", "FN", "TN", "precision", "recall"
    );
    for r in rows {
        let s = &r.summary;
        let _ = writeln!(
            out,
            "{:>width$}  {:>4} {:>4} {:>4} {:>4}  {:>9}  {:>6}",
            r.value,
            s.true_positives(),
            s.false_positives(),
            s.false_negatives(),
            s.true_negatives(),
            ratio_text(s.precision()),
            ratio_text(s.recall()),
        );
    }
    let _ = writeln!(out, "# sweep complete: {} values of {key}", rows.len());
    out
}

/// The `--json` form of a sweep.
pub fn sweep_to_json(key: &str, rows: &[SweepRow]) -> Value {
    json!({
        "key": key,
        "rows": rows.iter().map(|r| {
            let s = &r.summary;
            json!({
                "value": r.value,
                "tp": s.true_positives(), "fp": s.false_positives(),
                "fn": s.false_negatives(), "tn": s.true_negatives(),
                "precision": s.precision(), "recall": s.recall(),
            })
        }).collect::<Vec<_>>(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use detect_core::Call;
    use serde_json::json;

    fn bash(cmd: &str, t: i64) -> Call {
        Call::completed("bash", json!({ "command": cmd })).with_time(t, t + 100)
    }

    fn edit(t: i64) -> Call {
        Call::completed(
            "edit",
            json!({"filePath": "/p/a.rs", "oldString": "a", "newString": "b"}),
        )
        .with_metadata(json!({"diff": "-a\n+b\n"}))
        .with_time(t, t + 100)
    }

    fn labelled(id: &str, label: Label, calls: Vec<Call>) -> Session {
        let mut s = Session::new(id);
        s.label = Some(label);
        s.calls = calls;
        s
    }

    /// `n` different commands, one second apart from `t0`.
    fn varied(n: usize, t0: i64) -> Vec<Call> {
        (0..n)
            .map(|i| bash(&format!("echo step{i}"), t0 + 1000 * i as i64))
            .collect()
    }

    #[test]
    fn prefixes_start_at_min_calls_step_and_end_with_the_whole() {
        assert_eq!(prefixes(52, 40, 5), [40, 45, 50, 52]);
        assert_eq!(prefixes(50, 40, 5), [40, 45, 50]);
        assert_eq!(prefixes(40, 40, 5), [40]);
        assert_eq!(prefixes(12, 40, 5), [12]);
        assert_eq!(prefixes(0, 40, 5), [0]);
        assert_eq!(prefixes(43, 40, 1), [40, 41, 42, 43]);
        assert_eq!(prefixes(3, 1, 0), [1, 2, 3], "a zero step is taken as 1");
    }

    #[test]
    fn a_session_flags_when_any_prefix_flags() {
        // 40 identical calls then 30 after an edit: flagged at 40, clean at the end.
        let mut calls: Vec<Call> = (0..40).map(|i| bash("pytest -x", 1000 * i)).collect();
        calls.push(edit(50_000));
        calls.extend(varied(30, 60_000));
        let report = run(
            &[labelled("s", Label::MustFlag, calls)],
            &Options::default(),
        );
        let r = &report.sessions[0];
        assert!(r.flagged);
        assert_eq!(r.first_flag_at_call, Some(40));
        assert_eq!(r.signals, [Signal::Dup, Signal::Top, Signal::Slow]);
        assert_eq!(r.prefixes, [40, 45, 50, 55, 60, 65, 70, 71]);
        assert_eq!(r.peak.top, 40);
        assert!(report.passed());
    }

    #[test]
    fn confusion_matrix_and_exit_rule() {
        let looping: Vec<Call> = (0..45).map(|i| bash("make", 1000 * i)).collect();
        let sessions = vec![
            labelled("tp", Label::MustFlag, looping.clone()),
            labelled("fn", Label::MustFlag, varied(45, 0)),
            labelled("fp", Label::MustNotFlag, looping.clone()),
            labelled("tn", Label::MustNotFlag, varied(45, 0)),
            Session {
                calls: looping,
                ..Session::new("unlabelled")
            },
        ];
        let report = run(&sessions, &Options::default());
        let s = &report.summary;
        assert_eq!(
            (
                s.true_positives(),
                s.false_positives(),
                s.false_negatives(),
                s.true_negatives()
            ),
            (1, 1, 1, 1)
        );
        assert_eq!((s.sessions, s.flagged), (5, 3));
        assert_eq!(
            s.unlabelled,
            Count {
                total: 1,
                flagged: 1
            }
        );
        assert_eq!((s.precision(), s.recall()), (Some(0.5), Some(0.5)));
        assert!(!report.passed());
        let table = render_table(&report);
        assert!(
            table.ends_with("# backtest complete: 3/5 flagged\n"),
            "{table}"
        );
        assert!(
            table.contains("MISSED") && table.contains("FALSE+"),
            "{table}"
        );
        let v = serde_json::to_value(to_json(&report)).unwrap();
        assert_eq!(v["summary"]["must_flag"], json!({"total": 2, "flagged": 1}));
        assert_eq!(v["sessions"][4]["label"], Value::Null);
        assert_eq!(v["sessions"][0]["first_flag_at_call"], 40);
        assert_eq!(v["sessions"][1]["first_flag_at_call"], Value::Null);
    }

    #[test]
    fn ratios_without_denominators_are_none() {
        let report = run(
            &[labelled("tn", Label::MustNotFlag, varied(3, 0))],
            &Options::default(),
        );
        assert_eq!(report.summary.precision(), None);
        assert_eq!(report.summary.recall(), None);
        assert_eq!(
            serde_json::to_value(to_json(&report)).unwrap()["summary"]["precision"],
            Value::Null
        );
        assert!(render_table(&report).contains("precision=n/a"));
    }

    /// A parent looping on both sides of a task whose child lands in the middle.
    fn protected_tree() -> Vec<Session> {
        let mut parent = labelled("parent", Label::MustNotFlag, Vec::new());
        for i in 0..30 {
            parent.calls.push(bash("pytest -x", 1000 * i));
        }
        // The task call spans the child's work (30 s .. 40 s).
        parent.calls.push(
            Call::completed(
                "task",
                json!({"description": "fix it", "subagent_type": "general"}),
            )
            .with_time(30_000, 40_000),
        );
        for i in 0..30 {
            parent.calls.push(bash("pytest -x", 41_000 + 1000 * i));
        }
        let mut child = labelled("child", Label::MustNotFlag, vec![edit(35_000)]);
        child.parent_id = Some("parent".into());
        vec![parent, child]
    }

    #[test]
    fn a_descendant_landing_protects_its_ancestor_from_then_on() {
        let report = run(
            &protected_tree(),
            &Options {
                step: 1,
                ..Options::default()
            },
        );
        let parent = &report.sessions[0];
        assert!(!parent.flagged, "{parent:?}");
        assert_eq!(parent.root, "parent");
        assert_eq!(report.sessions[1].root, "parent");
        // Without the child, the same parent loops for 61 calls.
        let alone = run(&protected_tree()[..1], &Options::default());
        assert!(alone.sessions[0].flagged);
    }

    #[test]
    fn prefixes_only_know_landings_made_before_their_cut_time() {
        // The child lands at 500 s, long after the parent's 45 looping calls: the live watchdog
        // saw the loop before the landing, so the parent is flagged.
        let mut tree = protected_tree();
        tree[0].calls.truncate(30);
        tree[0]
            .calls
            .extend((30..45).map(|i| bash("pytest -x", 1000 * i)));
        tree[1].calls = vec![edit(500_000)];
        let report = run(&tree, &Options::default());
        assert!(report.sessions[0].flagged);
        assert_eq!(report.sessions[0].first_flag_at_call, Some(40));
        // judge_sessions on the whole set, which knows the landing, would not flag it.
        let whole = detect_core::judge_sessions(&tree, &DetectConfig::default());
        assert!(!whole.sessions[0].flagged);
    }

    #[test]
    fn sweep_specs() {
        assert_eq!(
            parse_sweep("top_min=6..9").unwrap(),
            (
                "top_min".to_owned(),
                vec!["6".into(), "7".into(), "8".into(), "9".into()]
            )
        );
        assert_eq!(parse_sweep("top_min=6..10:2").unwrap().1, ["6", "8", "10"]);
        assert_eq!(
            parse_sweep("dup_min=0.2..0.3:0.05").unwrap().1,
            ["0.20", "0.25", "0.30"]
        );
        assert_eq!(parse_sweep("cover_min=3.5..4").unwrap().1.len(), 6);
        for bad in [
            "top_min",
            "top_min=6",
            "=1..2",
            "top_min=a..b",
            "top_min=9..6",
            "x=1..2:0",
            "x=1..5000:1",
        ] {
            assert!(parse_sweep(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn sweep_reports_each_value() {
        let sessions: Vec<Session> = (0..4)
            .map(|n| {
                // n + 9 identical `make` calls among 45: flagged from top_min <= n + 9.
                let mut calls = varied(45 - (n + 9), 0);
                calls.extend((0..n + 9).map(|i| bash("make all", 100_000 + 1000 * i as i64)));
                let label = if n >= 2 {
                    Label::MustFlag
                } else {
                    Label::MustNotFlag
                };
                labelled(&format!("s{n}"), label, calls)
            })
            .collect();
        let mut options = Options::default();
        options.config.set("dup_min", "0.9").unwrap();
        options.config.set("cum_min", "100").unwrap();
        let (key, values) = parse_sweep("top_min=9..12").unwrap();
        let rows = sweep(&sessions, &options, &key, &values).unwrap();
        let tp_fp: Vec<(usize, usize)> = rows
            .iter()
            .map(|r| (r.summary.true_positives(), r.summary.false_positives()))
            .collect();
        assert_eq!(tp_fp, [(2, 2), (2, 1), (2, 0), (1, 0)]);
        let text = render_sweep(&key, &rows);
        assert!(
            text.contains("# sweep complete: 4 values of top_min"),
            "{text}"
        );
        assert!(sweep(&sessions, &options, "nope", &values).is_err());
        assert_eq!(sweep_to_json(&key, &rows)["rows"][2]["precision"], 1.0);
    }
}
