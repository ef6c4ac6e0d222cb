//! `cargo xtask detection-report`: the figures of both detection profiles on the shipped corpus
//! (`fixtures/corpus.json`) and the development set (`fixtures/dev/sessions.json`), as the
//! Markdown tables `docs/detection.md` embeds between `<!-- detection-report -->` and
//! `<!-- /detection-report -->`. `--check FILE` compares instead of printing; a test runs it.
//!
//! How sessions are judged:
//! - **Corpus**: the backtest ([`crate::backtest`]) at every call (`--step 1`), per session on
//!   its own verdict, trees included.
//! - **Development set**: each session's calls pushed one by one into a [`SessionDetector`],
//!   the verdict read after each (the same as the backtest at `--step 1`; the set has no
//!   trees). A healthy run is *flagged* when any prefix flags. A loop is *caught* when a prefix
//!   that ends inside the loop or after it flags; a flag before the loop starts (on the healthy
//!   run it was spliced into) is counted apart, as *flagged before the loop*. *Calls to flag*
//!   is the number of loop calls made before the first flag inside or after the loop.

use crate::backtest::{self, Options};
use crate::devset::Kind;
use detect_core::{DetectConfig, Label, Profile, Rule, Rules, Session, SessionDetector};
use std::fmt::Write as _;

/// The start marker of the embedded report.
pub const BEGIN: &str = "<!-- detection-report -->";
/// The end marker of the embedded report.
pub const END: &str = "<!-- /detection-report -->";

/// Where a spliced loop starts: the note's "after call N" (0-based index of the first loop call).
pub fn loop_start(session: &Session) -> Option<usize> {
    let note = session.note.as_deref()?;
    let at = note.find("after call ")? + "after call ".len();
    let digits: String = note[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

/// How one development session fared under one config.
#[derive(Debug, Clone, PartialEq)]
pub struct DevOutcome {
    pub kind: Option<Kind>,
    pub real: bool,
    pub label: Option<Label>,
    /// Any prefix flagged.
    pub flagged: bool,
    /// A prefix ending before the loop's first call flagged (loops only).
    pub flagged_before_loop: bool,
    /// Loop calls made before the first flag inside or after the loop (loops only).
    pub calls_to_flag: Option<usize>,
}

/// Judge one development session at every prefix.
pub fn judge_dev(session: &Session, config: &DetectConfig) -> DevOutcome {
    let start = loop_start(session);
    let mut detector = SessionDetector::new(session, config);
    let mut flagged = false;
    let mut before = false;
    let mut calls_to_flag = None;
    for (i, call) in session.calls.iter().enumerate() {
        detector.push(call);
        let k = i + 1;
        if k < config.min_calls {
            continue;
        }
        if detector.verdict().flagged {
            flagged = true;
            match start {
                Some(at) if k <= at => before = true,
                Some(at) => {
                    calls_to_flag = Some(k - at);
                    break;
                }
                None => break,
            }
        }
    }
    DevOutcome {
        kind: Kind::of_id(&session.id),
        real: Kind::source_of_id(&session.id) == "real",
        label: session.label,
        flagged,
        flagged_before_loop: before,
        calls_to_flag,
    }
}

/// The outcomes of a whole set.
pub fn judge_dev_set(sessions: &[Session], config: &DetectConfig) -> Vec<DevOutcome> {
    sessions.iter().map(|s| judge_dev(s, config)).collect()
}

/// Totals over development outcomes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DevTotals {
    pub healthy: usize,
    pub healthy_flagged: usize,
    pub loops: usize,
    pub caught: usize,
    pub flagged_before_loop: usize,
}

impl DevTotals {
    pub fn of<'a>(outcomes: impl IntoIterator<Item = &'a DevOutcome>) -> Self {
        let mut t = Self::default();
        for o in outcomes {
            match o.label {
                Some(Label::MustNotFlag) => {
                    t.healthy += 1;
                    t.healthy_flagged += usize::from(o.flagged);
                }
                Some(Label::MustFlag) => {
                    t.loops += 1;
                    t.caught += usize::from(o.calls_to_flag.is_some());
                    t.flagged_before_loop += usize::from(o.flagged_before_loop);
                }
                None => {}
            }
        }
        t
    }

    /// Caught loops over all alarms: an alarm on a healthy run, or on the healthy start of a
    /// spliced run before its loop, is a false one.
    pub fn precision(&self) -> Option<f64> {
        let alarms = self.caught + self.healthy_flagged + self.flagged_before_loop;
        (alarms > 0).then(|| self.caught as f64 / alarms as f64)
    }

    pub fn recall(&self) -> Option<f64> {
        (self.loops > 0).then(|| self.caught as f64 / self.loops as f64)
    }
}

fn pct(n: usize, d: usize) -> String {
    if d == 0 {
        "-".to_owned()
    } else {
        format!("{n}/{d} ({:.1}%)", 100.0 * n as f64 / d as f64)
    }
}

fn ratio(r: Option<f64>) -> String {
    r.map_or_else(|| "n/a".to_owned(), |r| format!("{r:.3}"))
}

fn median(mut v: Vec<usize>) -> String {
    if v.is_empty() {
        return "-".to_owned();
    }
    v.sort_unstable();
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2].to_string()
    } else {
        let m = (v[n / 2 - 1] + v[n / 2]) as f64 / 2.0;
        format!("{m}")
    }
}

/// The config of a profile with the design's thresholds.
pub fn profile_config(profile: Profile) -> DetectConfig {
    DetectConfig::with_profile(profile)
}

/// The corpus backtest (every prefix) under `config`.
fn corpus_report(corpus: &[Session], config: &DetectConfig) -> backtest::Report {
    backtest::run(
        corpus,
        &Options {
            config: config.clone(),
            step: 1,
        },
    )
}

/// The whole report, as Markdown (deterministic: the same input gives the same text).
pub fn render(corpus: &[Session], dev: &[Session]) -> String {
    let mut out = String::new();
    let design = profile_config(Profile::Design);
    let precise = profile_config(Profile::Precise);
    let profiles = [("design", &design), ("precise", &precise)];
    let corpus_runs: Vec<backtest::Report> = profiles
        .iter()
        .map(|(_, c)| corpus_report(corpus, c))
        .collect();
    let dev_runs: Vec<Vec<DevOutcome>> = profiles
        .iter()
        .map(|(_, c)| judge_dev_set(dev, c))
        .collect();

    let _ = writeln!(
        out,
        "Produced by `cargo xtask detection-report` from `fixtures/corpus.json` ({} sessions) and `fixtures/dev/sessions.json` ({} sessions), every prefix judged. Thresholds: the design's defaults (`min_calls` {}, `window` {}, `dup_min` {}, `top_min` {}, `top_min_ro` {}, `cum_min` {}, `cover_min` {}); `precise` adds `cycle_min` {} and `reread_min` {}.",
        corpus.len(),
        dev.len(),
        design.min_calls,
        design.window,
        design.dup_min,
        design.top_min,
        design.top_min_ro,
        design.cum_min,
        design.cover_min,
        precise.cycle_min,
        precise.reread_min,
    );
    out.push('\n');

    // ---- headline -------------------------------------------------------------------------
    out.push_str("### Both sets\n\n");
    out.push_str("| set | profile | healthy flagged | loops caught | flagged before the loop | precision | recall |\n");
    out.push_str("|---|---|---|---|---|---|---|\n");
    for (i, (name, _)) in profiles.iter().enumerate() {
        let s = &corpus_runs[i].summary;
        let _ = writeln!(
            out,
            "| corpus | {name} | {} | {} | - | {} | {} |",
            pct(s.false_positives(), s.must_not_flag.total),
            pct(s.true_positives(), s.must_flag.total),
            ratio(s.precision()),
            ratio(s.recall()),
        );
    }
    for (i, (name, _)) in profiles.iter().enumerate() {
        let t = DevTotals::of(&dev_runs[i]);
        let _ = writeln!(
            out,
            "| development | {name} | {} | {} | {} | {} | {} |",
            pct(t.healthy_flagged, t.healthy),
            pct(t.caught, t.loops),
            pct(t.flagged_before_loop, t.loops),
            ratio(t.precision()),
            ratio(t.recall()),
        );
    }
    out.push('\n');

    // ---- corpus: what precise changes -----------------------------------------------------
    let lost: Vec<&str> = corpus_runs[0]
        .sessions
        .iter()
        .zip(&corpus_runs[1].sessions)
        .filter(|(d, p)| d.label_met() == Some(true) && p.label_met() == Some(false))
        .map(|(d, _)| d.id.as_str())
        .collect();
    let changed: Vec<String> = corpus_runs[0]
        .sessions
        .iter()
        .zip(&corpus_runs[1].sessions)
        .filter(|(d, p)| d.signals != p.signals)
        .map(|(d, p)| {
            format!(
                "`{}` {} -> {}",
                d.id,
                signals_text(&d.signals),
                signals_text(&p.signals)
            )
        })
        .collect();
    let _ = writeln!(
        out,
        "Corpus sessions the design gets right and `precise` gets wrong: {}. Sessions whose signals differ: {}.\n",
        if lost.is_empty() {
            "none".to_owned()
        } else {
            lost.join(", ")
        },
        if changed.is_empty() {
            "none".to_owned()
        } else {
            changed.join("; ")
        }
    );

    // ---- development set by kind ------------------------------------------------------------
    out.push_str("### Development set by kind\n\n");
    out.push_str("| kind | source | sessions | design: flagged | design: before the loop | design: calls to flag | precise: flagged | precise: before the loop | precise: calls to flag |\n");
    out.push_str("|---|---|---|---|---|---|---|---|---|\n");
    let kinds = [
        Kind::Healthy,
        Kind::Repeat,
        Kind::Cycle,
        Kind::Reread,
        Kind::Noisy,
    ];
    for kind in kinds {
        for real in [false, true] {
            let pick = |run: &'_ [DevOutcome]| -> Vec<DevOutcome> {
                run.iter()
                    .filter(|o| o.kind == Some(kind) && o.real == real)
                    .cloned()
                    .collect()
            };
            let rows: Vec<Vec<DevOutcome>> = dev_runs.iter().map(|r| pick(r)).collect();
            let n = rows[0].len();
            if n == 0 {
                continue;
            }
            let mut line = format!(
                "| {} | {} | {n} |",
                kind.as_str(),
                if real { "real" } else { "generated" }
            );
            for r in &rows {
                if kind == Kind::Healthy {
                    let flagged = r.iter().filter(|o| o.flagged).count();
                    let _ = write!(line, " {} | - | - |", pct(flagged, n));
                } else {
                    let caught = r.iter().filter(|o| o.calls_to_flag.is_some()).count();
                    let before = r.iter().filter(|o| o.flagged_before_loop).count();
                    let calls = median(r.iter().filter_map(|o| o.calls_to_flag).collect());
                    let _ = write!(line, " {} | {} | {calls} |", pct(caught, n), pct(before, n));
                }
            }
            out.push_str(&line);
            out.push('\n');
        }
    }
    let unlabelled = dev_runs[0].iter().filter(|o| o.label.is_none()).count();
    let _ = writeln!(
        out,
        "\nFor healthy runs, *flagged* is a false alarm; for loops, it is *caught* (a flag inside or after the loop), *before the loop* counts loops whose healthy start was flagged already, and *calls to flag* is the median number of loop calls before the first flag. {unlabelled} unlabelled run (ponyc-4588) is judged but not scored.\n"
    );

    // ---- each rule measured -----------------------------------------------------------------
    out.push_str("### Each rule of `precise`, measured\n\n");
    out.push_str("`precise` with one rule switched off (`DetectConfig::ablate`), and the design with only that rule switched on.\n\n");
    out.push_str("| rule | precise without it: healthy flagged | loops caught | corpus misses | design with it alone: healthy flagged | loops caught | corpus misses |\n");
    out.push_str("|---|---|---|---|---|---|---|\n");
    for rule in Rule::ALL {
        let mut without = precise.clone();
        without.ablate = Rules::NONE.with(rule);
        let mut alone = precise.clone();
        alone.ablate = Rules::ALL.without(rule);
        let mut line = format!("| `{}` |", rule.as_str());
        for config in [&without, &alone] {
            let t = DevTotals::of(&judge_dev_set(dev, config));
            let c = corpus_report(corpus, config).summary;
            let _ = write!(
                line,
                " {} | {} | {} |",
                pct(t.healthy_flagged, t.healthy),
                pct(t.caught, t.loops),
                c.false_positives() + c.false_negatives()
            );
        }
        out.push_str(&line);
        out.push('\n');
    }
    out.push('\n');

    // ---- thresholds of precise --------------------------------------------------------------
    out.push_str("### `precise` thresholds swept on the development set\n\n");
    out.push_str("| key | value | healthy flagged | loops caught | corpus misses |\n");
    out.push_str("|---|---|---|---|---|\n");
    for (key, values) in [
        ("reread_min", &["3", "4", "5", "6", "7", "8", "10"][..]),
        ("cycle_min", &["6", "9", "12", "18", "24"][..]),
    ] {
        for value in values {
            let mut config = precise.clone();
            if config.set(key, value).is_err() {
                continue;
            }
            let t = DevTotals::of(&judge_dev_set(dev, &config));
            let c = corpus_report(corpus, &config).summary;
            let _ = writeln!(
                out,
                "| `{key}` | {value} | {} | {} | {} |",
                pct(t.healthy_flagged, t.healthy),
                pct(t.caught, t.loops),
                c.false_positives() + c.false_negatives()
            );
        }
    }
    out
}

fn signals_text(signals: &[detect_core::Signal]) -> String {
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

/// The report embedded in a document between [`BEGIN`] and [`END`] (each on its own line), if
/// both markers are there.
pub fn embedded(doc: &str) -> Option<&str> {
    let start = doc.find(BEGIN)? + BEGIN.len();
    let rest = &doc[start..];
    let end = rest.find(END)?;
    Some(rest[..end].trim_start_matches('\n'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loop_starts_from_notes() {
        let mut s = Session::new("dev-cycle-gen-001");
        s.note = Some("cycle (generated): spliced into x after call 57: a block".into());
        assert_eq!(loop_start(&s), Some(57));
        s.note = Some("healthy".into());
        assert_eq!(loop_start(&s), None);
    }

    #[test]
    fn embedded_between_markers() {
        let doc = format!("intro\n{BEGIN}\n| a |\n{END}\nrest");
        assert_eq!(embedded(&doc), Some("| a |\n"));
        assert_eq!(embedded("no markers"), None);
    }
}
