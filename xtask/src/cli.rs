//! `cargo xtask …`: argument parsing, files and exit codes around [`detect_eval`] (the
//! backtest and the report) and [`agentwatch_fixtures_gen`] (the generators).
//!
//! Exit codes: 0 success; 1 the backtest missed a label (or `gen-corpus --check` found the
//! committed corpus stale); 2 unreadable input or bad arguments.

use agentwatch_fixtures_gen::{big, corpus, devset, peers, trajectories};
use agentwatch_fuzz::{Budget, Finding, FindingKind, TARGETS, Target, find_target};
use agentwatch_runtime::backtest::Request;
use clap::{Parser, Subcommand};
use detect_core::SessionFile;
use detect_eval::backtest;
use detect_eval::report;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Exit code: the labels were met / the task succeeded.
pub const EXIT_OK: u8 = 0;
/// Exit code: a label was missed, or the committed corpus is stale.
pub const EXIT_FAILED: u8 = 1;
/// Exit code: unreadable input or bad arguments.
pub const EXIT_USAGE: u8 = 2;

#[derive(Debug, Parser)]
#[command(
    name = "cargo xtask",
    bin_name = "cargo xtask",
    about = "agentwatch workspace tasks"
)]
struct Cli {
    #[command(subcommand)]
    command: Task,
}

#[derive(Debug, Subcommand)]
enum Task {
    /// Replay labelled sessions through the detector, prefix by prefix, and score the labels.
    Backtest(BacktestArgs),
    /// Regenerate fixtures/corpus.json from the deterministic generator.
    GenCorpus(GenCorpusArgs),
    /// Write a large deterministic session file (by default 2 000 sessions of 500 calls, about
    /// 200 MB) for measuring `agentwatch detect` and the backtest; never commit it.
    GenBig(GenBigArgs),
    /// Write gen-big's sessions as a Claude Code directory of transcripts (`projects/…`), for
    /// measuring the Claude source: `[claude] dir = "OUT"` (never committed).
    GenClaude(GenClaudeArgs),
    /// Convert the public trajectories (fixtures/dev/real.json) and build the development set
    /// (fixtures/dev/sessions.json) and the latency set (fixtures/dev/latency.json).
    ImportTrajectories(ImportArgs),
    /// Print the figures of both profiles on the corpus and the development set (the tables of
    /// docs/detection.md).
    DetectionReport(ReportArgs),
    /// Fuzz the input parsers (bash normaliser, session files, exports, message pages, replay
    /// timelines, configuration) for a time each; exit 1 and save the inputs on any finding.
    Fuzz(FuzzArgs),
}

#[derive(Debug, clap::Args)]
struct FuzzArgs {
    /// Seconds per target.
    #[arg(long, value_name = "N", default_value_t = 10)]
    seconds: u64,
    /// Only this target (repeatable): bash, session-file, export, messages, replay, config.
    #[arg(long = "target", value_name = "NAME")]
    targets: Vec<String>,
    /// Seed of the input generator [default: the current unix time, printed so a run can be
    /// repeated].
    #[arg(long, value_name = "N")]
    seed: Option<u64>,
    /// Where findings are saved [default: target/fuzz-findings in the workspace].
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Run the one target named by --target on FILE and say what happens (to reproduce a finding).
    #[arg(long, value_name = "FILE")]
    replay: Option<PathBuf>,
}

#[derive(Debug, clap::Args)]
struct ImportArgs {
    /// The directory of the public trajectories [default: fixtures/trajectories, the committed
    /// copies]. Without it (and without the default directory), the set is rebuilt from the
    /// committed fixtures/dev/real.json.
    #[arg(long, value_name = "DIR")]
    from: Option<PathBuf>,
    /// Do not write: exit 1 when a committed file differs from what the converter makes.
    #[arg(long)]
    check: bool,
}

#[derive(Debug, clap::Args)]
struct ReportArgs {
    /// Do not print: exit 1 unless FILE (e.g. docs/detection.md) holds the report between its
    /// `<!-- detection-report -->` markers.
    #[arg(long, value_name = "FILE")]
    check: Option<PathBuf>,
}

#[derive(Debug, clap::Args)]
struct BacktestArgs {
    /// Session file to replay [default: fixtures/corpus.json].
    #[arg(long, value_name = "FILE")]
    fixture: Option<PathBuf>,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    json: bool,
    /// Calls between evaluated prefixes (after the first, at min_calls).
    #[arg(long, value_name = "N", default_value_t = backtest::DEFAULT_STEP)]
    step: usize,
    /// The latency budget of the summary: sessions with a `loop_start` count as caught in time
    /// when flagged within K calls of it (use with --step 1 for exact latencies).
    #[arg(long, value_name = "K", default_value_t = backtest::DEFAULT_WITHIN)]
    within: usize,
    /// Detection profile: `precise` (the default) or `design` (docs/detection.md);
    /// `--set` applies on top of it.
    #[arg(long, value_name = "PROFILE")]
    profile: Option<String>,
    /// Override a detector key, e.g. `--set top_min=10` (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
    /// Sweep one threshold: `KEY=FROM..TO[:STEP]`; prints TP/FP/FN/TN, precision and recall per
    /// value instead of the table.
    #[arg(long, value_name = "KEY=FROM..TO[:STEP]")]
    sweep: Option<String>,
}

#[derive(Debug, clap::Args)]
struct GenClaudeArgs {
    #[command(flatten)]
    shape: GenBigArgs,
    /// Move every session's calls so that it ends now (active for a watcher that reads only
    /// recent sessions); by default gen-big's fixed times, weeks old.
    #[arg(long)]
    ending_now: bool,
}

#[derive(Debug, clap::Args)]
struct GenBigArgs {
    /// Where to write (atomically).
    #[arg(long, value_name = "FILE")]
    out: PathBuf,
    /// Number of sessions.
    #[arg(long, value_name = "N", default_value_t = big::BigShape::default().sessions)]
    sessions: usize,
    /// Calls per session.
    #[arg(long, value_name = "N", default_value_t = big::BigShape::default().calls_per_session)]
    calls: usize,
}

#[derive(Debug, clap::Args)]
struct GenCorpusArgs {
    /// Where to write [default: fixtures/corpus.json].
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    /// Do not write: exit 1 when the file differs from what the generator makes.
    #[arg(long)]
    check: bool,
}

pub use agentwatch_fixtures_gen::default_corpus_path;

/// Run `cargo xtask ARGS…` (the first item is the program name), writing to `out` and `err`.
pub fn run<I, T>(args: I, out: &mut dyn Write, err: &mut dyn Write) -> u8
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() { EXIT_USAGE } else { EXIT_OK };
            let text = e.render().to_string();
            let _ = if e.use_stderr() {
                err.write_all(text.as_bytes())
            } else {
                out.write_all(text.as_bytes())
            };
            return code;
        }
    };
    let result = match cli.command {
        Task::Backtest(args) => run_backtest(args, out),
        Task::GenCorpus(args) => run_gen_corpus(args, out),
        Task::GenBig(args) => run_gen_big(args, out),
        Task::GenClaude(args) => run_gen_claude(args, out),
        Task::ImportTrajectories(args) => run_import(args, out),
        Task::DetectionReport(args) => run_report(args, out),
        Task::Fuzz(args) => run_fuzz(args, out),
    };
    match result {
        Ok(code) => code,
        Err(message) => {
            let _ = writeln!(err, "xtask: error: {message}");
            EXIT_USAGE
        }
    }
}

fn run_backtest(args: BacktestArgs, out: &mut dyn Write) -> Result<u8, String> {
    // The installed binary's `agentwatch backtest` is the same code (agentwatch_runtime).
    let request = Request {
        fixture: args
            .fixture
            .unwrap_or_else(default_corpus_path)
            .to_string_lossy()
            .into_owned(),
        json: args.json,
        step: args.step,
        within: args.within,
        profile: args.profile,
        set: args.set,
        sweep: args.sweep,
    };
    let outcome = agentwatch_runtime::backtest::run(&request).map_err(|e| e.to_string())?;
    write_out(out, outcome.text)?;
    Ok(if outcome.passed { EXIT_OK } else { EXIT_FAILED })
}

fn run_gen_corpus(args: GenCorpusArgs, out: &mut dyn Write) -> Result<u8, String> {
    let path = args.out.unwrap_or_else(default_corpus_path);
    let file = corpus::generate();
    if args.check {
        let text =
            std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        return Ok(if corpus::same_corpus(&text, &file) {
            let _ = writeln!(out, "{}: up to date", path.display());
            EXIT_OK
        } else {
            let _ = writeln!(
                out,
                "{}: differs from the generator; run `cargo xtask gen-corpus`",
                path.display()
            );
            EXIT_FAILED
        });
    }
    write_atomically(&path, &corpus::to_json(&file))?;
    let _ = writeln!(
        out,
        "wrote {} ({} sessions)",
        path.display(),
        file.sessions.len()
    );
    Ok(EXIT_OK)
}

fn run_gen_big(args: GenBigArgs, out: &mut dyn Write) -> Result<u8, String> {
    let shape = big::BigShape {
        sessions: args.sessions,
        calls_per_session: args.calls,
        ..big::BigShape::default()
    };
    let path = &args.out;
    let mut stats = None;
    agentwatch_systemd::write_atomic_with(path, 0o644, |file| {
        let mut writer = std::io::BufWriter::with_capacity(1 << 20, file);
        stats = Some(big::write_big(&mut writer, &shape)?);
        writer.flush()
    })
    .map_err(|e| e.to_string())?;
    let stats = stats.ok_or("the generator wrote nothing")?;
    let _ = writeln!(
        out,
        "wrote {} ({} sessions, {} calls, {} bytes)",
        path.display(),
        stats.sessions,
        stats.calls,
        stats.bytes
    );
    Ok(EXIT_OK)
}

fn run_gen_claude(args: GenClaudeArgs, out: &mut dyn Write) -> Result<u8, String> {
    let GenClaudeArgs {
        shape: args,
        ending_now,
    } = args;
    let shape = big::BigShape {
        sessions: args.sessions,
        calls_per_session: args.calls,
        ..big::BigShape::default()
    };
    let end_ms = ending_now.then(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64)
    });
    let stats = agentwatch_fixtures_gen::claude::write_claude_dir(&args.out, &shape, end_ms)
        .map_err(|e| format!("{}: {e}", args.out.display()))?;
    let _ = writeln!(
        out,
        "wrote {} ({} transcripts, {} calls, {} bytes)",
        args.out.display(),
        stats.files,
        stats.calls,
        stats.bytes
    );
    Ok(EXIT_OK)
}

/// Write `text` to `path` through the project's one atomic writer, making its directory.
fn write_atomically(path: &Path, text: &str) -> Result<(), String> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    agentwatch_systemd::write_atomic(path, text.as_bytes(), 0o644).map_err(|e| e.to_string())
}

fn run_import(args: ImportArgs, out: &mut dyn Write) -> Result<u8, String> {
    let real_path = devset::default_real_path();
    let dir = args
        .from
        .clone()
        .unwrap_or_else(devset::default_trajectories_dir);
    let converted = if dir.is_dir() {
        let Some(real) = convert_trajectories(&dir, &real_path, args.check, out)? else {
            return Ok(EXIT_FAILED);
        };
        real
    } else if args.from.is_some() {
        return Err(format!("{}: not a directory", dir.display()));
    } else {
        let _ = writeln!(
            out,
            "{}: not found; building from the committed {}",
            dir.display(),
            real_path.display()
        );
        let text = std::fs::read_to_string(&real_path)
            .map_err(|e| format!("{}: {e}", real_path.display()))?;
        let file =
            SessionFile::from_json(&text).map_err(|e| format!("{}: {e}", real_path.display()))?;
        devset::real_from_file(&file)
    };
    write_generated_sets(&converted, args.check, out)
}

/// The trajectories of `dir` converted and written to `real_path`, or with `check` compared
/// with it: `None` when the committed file differs (said on `out`).
fn convert_trajectories(
    dir: &Path,
    real_path: &Path,
    check: bool,
    out: &mut dyn Write,
) -> Result<Option<Vec<trajectories::Converted>>, String> {
    let real = trajectories::convert_dir(dir)?;
    let file = SessionFile::new(real.iter().map(|c| c.session.clone()).collect());
    if check {
        let committed = std::fs::read_to_string(real_path)
            .map_err(|e| format!("{}: {e}", real_path.display()))?;
        if !corpus::same_corpus(&committed, &file) {
            let _ = writeln!(
                out,
                "{}: differs from the conversion of {}; run `cargo xtask import-trajectories`",
                real_path.display(),
                dir.display()
            );
            return Ok(None);
        }
        let _ = writeln!(out, "{}: up to date", real_path.display());
    } else {
        write_atomically(real_path, &corpus::to_json(&file))?;
        let _ = writeln!(
            out,
            "wrote {} ({} runs converted from {})",
            real_path.display(),
            real.len(),
            dir.display()
        );
    }
    Ok(Some(real))
}

/// The sets generated from the converted runs (and the ones generated from nothing), written,
/// or with `check` compared with the committed files: `EXIT_FAILED` when one differs.
fn write_generated_sets(
    converted: &[trajectories::Converted],
    check: bool,
    out: &mut dyn Write,
) -> Result<u8, String> {
    let sets = [
        (devset::default_dev_path(), devset::generate(converted)),
        (
            devset::default_latency_path(),
            devset::generate_latency(converted),
        ),
        (devset::default_tools_path(), devset::generate_tools()),
        (
            devset::default_tools_latency_path(),
            devset::generate_tools_latency(),
        ),
        (peers::default_peers_path(), peers::generate()),
    ];
    let mut code = EXIT_OK;
    for (path, file) in sets {
        if check {
            let committed =
                std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
            if corpus::same_corpus(&committed, &file) {
                let _ = writeln!(out, "{}: up to date", path.display());
            } else {
                let _ = writeln!(
                    out,
                    "{}: differs from the generator; run `cargo xtask import-trajectories`",
                    path.display()
                );
                code = EXIT_FAILED;
            }
            continue;
        }
        write_atomically(&path, &devset::to_json(&file))?;
        let _ = writeln!(
            out,
            "wrote {} ({} sessions)",
            path.display(),
            file.sessions.len()
        );
    }
    Ok(code)
}

/// The real Claude Code transcripts of `fixtures/claude/2.1.328`, read as `agentwatch detect`
/// reads them and labelled by their scenario: `loop` loops from its first call, `healthy` never
/// does, and `subagent`'s subagent loops after its one edit (its parent, a `Task` call, is left
/// unlabelled).
fn claude_transcripts() -> Result<Vec<detect_core::Session>, String> {
    use detect_core::Label;
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/claude/2.1.328");
    let mut all = Vec::new();
    for (scenario, label, loop_start) in [
        ("loop", Label::MustFlag, 0),
        ("healthy", Label::MustNotFlag, 0),
        ("subagent", Label::MustFlag, 2),
    ] {
        let dir = root.join(scenario).to_string_lossy().into_owned();
        let sessions = agentwatch_runtime::input::read_sessions(std::slice::from_ref(&dir))
            .map_err(|e| format!("{dir}: {e}"))?;
        for mut s in sessions {
            let parent = scenario == "subagent" && s.parent_id.is_none();
            if !parent {
                s.label = Some(label);
                s.loop_start = (label == Label::MustFlag).then_some(loop_start);
            }
            s.note = Some(format!("{scenario}: a real Claude Code 2.1.328 transcript"));
            all.push(s);
        }
    }
    Ok(all)
}

fn run_report(args: ReportArgs, out: &mut dyn Write) -> Result<u8, String> {
    let load = |path: PathBuf| -> Result<Vec<detect_core::Session>, String> {
        let text =
            std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        SessionFile::from_json(&text)
            .map(|f| f.sessions)
            .map_err(|e| format!("{}: {e}", path.display()))
    };
    let corpus = load(default_corpus_path())?;
    let dev = load(devset::default_dev_path())?;
    let latency = load(devset::default_latency_path())?;
    let tools = load(devset::default_tools_path())?;
    let tools_latency = load(devset::default_tools_latency_path())?;
    let peers = load(peers::default_peers_path())?;
    let claude = claude_transcripts()?;
    let text = report::render(&report::Sets {
        corpus: &corpus,
        dev: &dev,
        latency: &latency,
        tools: &tools,
        tools_latency: &tools_latency,
        peers: &peers,
        claude: &claude,
    });
    match args.check {
        None => {
            write_out(out, text)?;
            Ok(EXIT_OK)
        }
        Some(path) => {
            let doc =
                std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
            Ok(if report::embedded(&doc).is_some_and(|e| e == text) {
                let _ = writeln!(out, "{}: the figures are up to date", path.display());
                EXIT_OK
            } else {
                let _ = writeln!(
                    out,
                    "{}: the figures differ from `cargo xtask detection-report`",
                    path.display()
                );
                EXIT_FAILED
            })
        }
    }
}

fn run_fuzz(args: FuzzArgs, out: &mut dyn Write) -> Result<u8, String> {
    let targets = fuzz_targets(&args.targets)?;
    if let Some(file) = &args.replay {
        let [target] = targets.as_slice() else {
            return Err("--replay needs exactly one --target".to_owned());
        };
        return replay_finding(target, file, out);
    }
    let seed = args.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_secs())
    });
    let dir = args
        .out
        .unwrap_or_else(|| workspace_root().join("target/fuzz-findings"));
    write_out(out, format!("seed {seed}, {} s per target\n", args.seconds))?;
    write_out(
        out,
        format!(
            "{:<14} {:>12} {:>12} {:>9}\n",
            "target", "executions", "per second", "findings"
        ),
    )?;
    let mut found = 0;
    for target in targets {
        let budget = Budget::Time(std::time::Duration::from_secs(args.seconds));
        let report = agentwatch_fuzz::fuzz(target, budget, seed);
        let rate = report.executions as f64 / report.elapsed.as_secs_f64().max(1e-9);
        write_out(
            out,
            format!(
                "{:<14} {:>12} {:>12.0} {:>9}\n",
                target.name,
                report.executions,
                rate,
                report.findings.len()
            ),
        )?;
        for finding in &report.findings {
            found += 1;
            save_finding(target, finding, &dir, out)?;
        }
    }
    Ok(if found == 0 { EXIT_OK } else { EXIT_FAILED })
}

/// The fuzz targets named (every one when none is).
fn fuzz_targets(names: &[String]) -> Result<Vec<&'static Target>, String> {
    if names.is_empty() {
        return Ok(TARGETS.iter().collect());
    }
    names
        .iter()
        .map(|name| {
            find_target(name).ok_or_else(|| {
                let names: Vec<_> = TARGETS.iter().map(|t| t.name).collect();
                format!(
                    "unknown fuzz target `{name}` (expected one of {})",
                    names.join(", ")
                )
            })
        })
        .collect()
}

/// `--replay FILE`: whether `target`'s property holds on one saved input.
fn replay_finding(target: &Target, file: &Path, out: &mut dyn Write) -> Result<u8, String> {
    let input = std::fs::read(file).map_err(|e| format!("{}: {e}", file.display()))?;
    Ok(match agentwatch_fuzz::driver::check_one(target, &input) {
        None => {
            write_out(out, format!("{}: {} holds\n", file.display(), target.name))?;
            EXIT_OK
        }
        Some(kind) => {
            write_out(
                out,
                format!("{}: {}: {}\n", file.display(), target.name, describe(&kind)),
            )?;
            EXIT_FAILED
        }
    })
}

/// Save a finding's input under `dir` (named by its hash) and say how to replay it.
fn save_finding(
    target: &Target,
    finding: &Finding,
    dir: &Path,
    out: &mut dyn Write,
) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let path = dir.join(format!(
        "{}-{}.bin",
        target.name,
        detect_core::output_hash(&String::from_utf8_lossy(&finding.input))
    ));
    std::fs::write(&path, &finding.input).map_err(|e| format!("{}: {e}", path.display()))?;
    write_out(
        out,
        format!(
            "  {}\n  saved {} (cargo xtask fuzz --target {} --replay {})\n",
            describe(&finding.kind),
            path.display(),
            target.name,
            path.display()
        ),
    )
}

/// What a fuzz finding is, in words.
fn describe(kind: &FindingKind) -> String {
    match kind {
        FindingKind::Panic(message) => format!("panic: {message}"),
        FindingKind::Violation(why) => format!("property broken: {why}"),
        FindingKind::Slow(took) => format!("slow input: {:.1} s", took.as_secs_f64()),
    }
}

/// Write a command's output (an error names what failed).
fn write_out(out: &mut dyn Write, text: String) -> Result<(), String> {
    out.write_all(text.as_bytes())
        .map_err(|e| format!("writing the output: {e}"))
}

/// The workspace root (xtask lives one folder below it).
fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
}
