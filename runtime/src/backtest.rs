//! The backtest of the opencode design (`--fixture`, a prefix every `step` calls, the summary
//! line `# backtest complete: N/M flagged`): labelled sessions of a file replayed through the
//! detector the way the watchdog sees them grow. One piece of code for the installed binary's
//! `agentwatch backtest` and the checkout's `cargo xtask backtest`: both call [`run`], which
//! reads the file and returns the rendered report (the scoring and the rendering are
//! `detect-eval`'s); each caller prints it and maps the outcome to its own exit codes.

use crate::config::detector_from_flags;
use crate::error::Error;
use crate::input::{
    map_placed_session_texts, map_session_stubs, map_session_texts, read_judged_sessions,
    read_text_at,
};
use detect_core::{Session, SessionCalls, parse_judged_session_text};
use detect_eval::backtest::{self, Options};

/// The design's step (5 calls between judged prefixes) and the summary's latency budget.
pub use detect_eval::backtest::{DEFAULT_STEP, DEFAULT_WITHIN};

/// One backtest as asked for on a command line.
#[derive(Debug, Clone)]
pub struct Request {
    /// The session file (`-`: standard input).
    pub fixture: String,
    /// One JSON object instead of the table.
    pub json: bool,
    /// Calls between evaluated prefixes (after the first, at `min_calls`); at least 1.
    pub step: usize,
    /// The latency budget of the summary (calls after a session's `loop_start`).
    pub within: usize,
    /// Detection profile (`precise`, the default, or `design`).
    pub profile: Option<String>,
    /// `--set KEY=VALUE` of detector keys.
    pub set: Vec<String>,
    /// `KEY=FROM..TO[:STEP]`: precision and recall per value of one threshold instead.
    pub sweep: Option<String>,
}

impl Request {
    /// The design's backtest of `fixture`: step 5, the default profile and thresholds.
    pub fn new(fixture: impl Into<String>) -> Self {
        Self {
            fixture: fixture.into(),
            json: false,
            step: DEFAULT_STEP,
            within: DEFAULT_WITHIN,
            profile: None,
            set: Vec::new(),
            sweep: None,
        }
    }
}

/// What a backtest came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// The report as it is printed (the table, JSON, or the sweep).
    pub text: String,
    /// Every `must_flag` session flagged and no `must_not_flag` one (a sweep always passes).
    pub passed: bool,
}

/// Runs the backtest `request` asks for.
///
/// # Errors
/// A bad flag (usage), a file that cannot be read or does not parse (its own error).
pub fn run(request: &Request) -> Result<Outcome, Error> {
    if request.step == 0 {
        return Err(Error::usage("--step must be at least 1"));
    }
    // The one `--set` dialect of every agentwatch command.
    let config = detector_from_flags(request.profile.as_deref(), &request.set)?;
    let paths = [request.fixture.clone()];
    let options = Options {
        config,
        step: request.step,
        within: request.within,
    };
    if let Some(spec) = &request.sweep {
        let (key, values) = backtest::parse_sweep(spec).map_err(Error::usage)?;
        // Several configurations over the same sessions: read once, kept (of each call only
        // what the detector reads), parsed on every core.
        let sessions = read_judged_sessions(&paths)?;
        let rows = backtest::sweep(&sessions, &options, &key, &values)
            .map_err(|e| Error::usage(format!("--sweep {spec}: {e}")))?;
        let text = if request.json {
            format!("{:#}\n", backtest::sweep_to_json(&key, &rows))
        } else {
            backtest::render_sweep(&key, &rows)
        };
        return Ok(Outcome { text, passed: true });
    }
    let report = streamed(&paths, &options)?;
    let text = if request.json {
        backtest::to_json_text(&report)
    } else {
        backtest::render_table(&report)
    };
    Ok(Outcome {
        text,
        passed: report.passed(),
    })
}

/// [`backtest::run`] on the sessions of `paths` without holding them: each session's prefixes
/// judged on the core that parsed it, keeping only its result (issue 19: memory does not grow
/// with the file). A file is read once (`one_pass_backtest`); several files in two passes
/// (`two_pass_backtest`). Standard input cannot be read twice: it is read once and kept (of
/// each call only what the detector reads).
pub fn streamed(paths: &[String], options: &Options) -> Result<backtest::Report, Error> {
    if paths.iter().any(|p| p == "-") {
        return Ok(backtest::run(&read_judged_sessions(paths)?, options));
    }
    match paths {
        [path] => match one_pass_backtest(path, options)? {
            Some(report) => Ok(report),
            None => two_pass_backtest(paths, options),
        },
        _ => two_pass_backtest(paths, options),
    }
}

/// Judge every prefix of the session of `text` under `plan`: as its calls are read borrowed
/// from its text (no `Call`, no `Value`, no list of calls); a session that does not read so, or
/// whose detector must start over (times out of order), with its calls read borrowed and kept;
/// failing that, the usual way, for its answer or its exact error. The session comes back
/// without its calls, its result with its own landings.
fn judge_session_text(
    plan: &backtest::Plan,
    index: usize,
    text: &str,
    options: &Options,
) -> Result<(Session, backtest::Judged), detect_core::ParseError> {
    if let Some(judged) = plan.judge_text(text, options) {
        return Ok(judged);
    }
    match SessionCalls::read(text) {
        Some((session, calls)) => {
            let judged = plan.judge_calls(&session, &calls, options);
            Ok((session, judged))
        }
        None => parse_judged_session_text(index, text).map(|mut session| {
            let judged = plan.judge_calls(&session, session.calls.as_slice(), options);
            session.calls = Vec::new();
            (session, judged)
        }),
    }
}

/// One session of a one-pass backtest: its result as if it had no descendants, its parent, its
/// own landings (of a session with a parent), and where its text is in the file.
struct FirstJudged {
    result: backtest::SessionResult,
    parent_id: Option<String>,
    landings: Vec<i64>,
    place: Option<(u64, usize)>,
}

/// The backtest of one file read once: each session judged as if it had no descendants, its
/// own landings kept when it has a parent; then the few sessions whose descendants landed are
/// read again alone, where the scan found them, and judged with those landings. `None` when a
/// session to judge again was not placed (the file was read through serde's reader): read it
/// in two passes.
fn one_pass_backtest(path: &str, options: &Options) -> Result<Option<backtest::Report>, Error> {
    use rayon::iter::{IntoParallelRefMutIterator, ParallelIterator};
    let alone = backtest::Plan::default();
    let first = |session: Session, judged: backtest::Judged| FirstJudged {
        result: judged.result,
        parent_id: session.parent_id,
        landings: judged.own_landings,
        place: None,
    };
    let mut judged = map_placed_session_texts(
        path,
        &|index, text, offset| {
            let (session, judged) = judge_session_text(&alone, index, text, options)?;
            let mut judged = first(session, judged);
            judged.place = offset.map(|at| (at, text.len()));
            Ok(judged)
        },
        &|session| {
            let judged = alone.judge_calls(&session, session.calls.as_slice(), options);
            first(session, judged)
        },
        |judged| judged.result.id.as_str(),
    )?;
    let stubs: Vec<Session> = judged
        .iter()
        .map(|j| Session {
            parent_id: j.parent_id.clone(),
            ..Session::new(j.result.id.clone())
        })
        .collect();
    let landings = judged.iter_mut().map(|j| std::mem::take(&mut j.landings));
    let plan = backtest::Plan::new(&stubs, landings.collect());
    drop(stubs);
    let again = |j: &FirstJudged| !plan.below(&j.result.id).is_empty();
    if judged.iter().any(|j| again(j) && j.place.is_none()) {
        return Ok(None);
    }
    judged
        .par_iter_mut()
        .try_for_each(|j| -> Result<(), Error> {
            if let (true, Some((offset, len))) = (again(j), j.place) {
                let text = read_text_at(path, offset, len)?;
                let (_, judged) = judge_session_text(&plan, 0, &text, options)
                    .map_err(|e| Error::data(format!("{path}: {e}")))?;
                j.result = judged.result;
            } else {
                j.result.root = plan.root(&j.result.id);
            }
            Ok(())
        })?;
    let results = judged.into_iter().map(|j| j.result).collect();
    Ok(Some(backtest::report(results, options)))
}

/// The backtest of several files (or standard input) in two passes: the first keeps each
/// session's id, parent and own landings (reading the calls of sessions with a parent only),
/// the second judges each session with its descendants' landings.
fn two_pass_backtest(paths: &[String], options: &Options) -> Result<backtest::Report, Error> {
    let config = &options.config;
    let known = map_session_stubs(
        paths,
        &backtest::lands_for_others,
        &|session| {
            let landings = backtest::own_landings(&session, config);
            let mut stub = Session::new(session.id);
            stub.parent_id = session.parent_id;
            (stub, landings)
        },
        |(stub, _)| stub.id.as_str(),
    )?;
    let (stubs, landings): (Vec<Session>, Vec<Vec<i64>>) = known.into_iter().unzip();
    let plan = backtest::Plan::new(&stubs, landings);
    drop(stubs);
    let results = map_session_texts(
        paths,
        &|index, text| {
            judge_session_text(&plan, index, text, options).map(|(_, judged)| judged.result)
        },
        &|session| plan.judge(&session, options),
        |result| result.id.as_str(),
    )?;
    Ok(backtest::report(results, options))
}
