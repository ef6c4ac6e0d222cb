//! `agentwatch man`: one man page per command and subcommand (`agentwatch.1`,
//! `agentwatch-alerts-ack.1`, …), rendered by `clap_mangen` from the same definitions the parser
//! uses, each with the exit codes (`agentwatch_runtime::error::code::MEANINGS`, the one table)
//! and the files; the main page also lists every configuration key with its default and range
//! (`config::default_keys`, `operator::OPTIONAL_KEYS`). Written to a directory
//! (default `$XDG_DATA_HOME/man/man1`, else `~/.local/share/man/man1`), or the main page printed.

use crate::{CliResult, write_stdout};
use agentwatch_runtime::Error;
use agentwatch_runtime::config::{self, KeyDefault};
use agentwatch_runtime::error::code;
use agentwatch_runtime::operator::OPTIONAL_KEYS;
use clap_mangen::roff::{Roff, bold, roman};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct ManArgs {
    /// Where to write the pages (default `$XDG_DATA_HOME/man/man1`, else
    /// `~/.local/share/man/man1`, which `man` searches).
    #[arg(long, value_name = "DIR", conflicts_with = "print")]
    pub dir: Option<PathBuf>,
    /// Print the main page (roff) to standard output instead of writing the pages.
    #[arg(long)]
    pub print: bool,
}

/// Write every page to `--dir` (or print the main one) and say what was written.
pub fn run(args: &ManArgs, cmd: clap::Command) -> CliResult {
    let pages = pages(cmd)?;
    if args.print {
        let main = pages.first().map(|(_, text)| text.as_str()).unwrap_or("");
        write_stdout("man", main)?;
        return Ok(ExitCode::SUCCESS);
    }
    let dir = match &args.dir {
        Some(dir) => dir.clone(),
        None => default_dir()?,
    };
    std::fs::create_dir_all(&dir)
        .map_err(|e| Error::io(format!("man: cannot create {}: {e}", dir.display())))?;
    for (name, text) in &pages {
        let path = dir.join(name);
        std::fs::write(&path, text)
            .map_err(|e| Error::io(format!("man: cannot write {}: {e}", path.display())))?;
    }
    let mut said = format!(
        "wrote {} pages to {} (`man agentwatch`)\n",
        pages.len(),
        dir.display()
    );
    if let Some(hint) = manpath_hint(&dir) {
        said.push_str(&hint);
    }
    write_stdout("man", &said)?;
    Ok(ExitCode::SUCCESS)
}

/// How to make `man agentwatch` find pages written to `dir` when `man` does not look there:
/// `man` reads pages from the `man1` directory of each root on `MANPATH` (unset: the roots it
/// derives from `PATH`, among them the user's `~/.local/share/man`, the default `--dir`'s).
/// `None` when it finds them.
fn manpath_hint(dir: &Path) -> Option<String> {
    let var = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
    let shown = dir.display();
    if dir.file_name().and_then(|n| n.to_str()) != Some("man1") {
        return Some(format!(
            "`man` reads pages from a man1 directory: give --dir ROOT/man1, or read one with \
             `man -l {shown}/agentwatch.1`\n"
        ));
    }
    let root = dir.parent()?;
    let same = |other: &Path| {
        other == root || std::fs::canonicalize(other).ok() == std::fs::canonicalize(root).ok()
    };
    let found = match var("MANPATH") {
        Some(manpath) => std::env::split_paths(&manpath).any(|p| same(&p)),
        None => default_dir()
            .ok()
            .and_then(|d| d.parent().map(Path::to_path_buf))
            .is_some_and(|d| same(&d)),
    };
    (!found).then(|| {
        format!(
            "`man agentwatch` will not find them: {} is not on MANPATH; add it with \
             `export MANPATH=\"{}:$(manpath)\"` (in your shell's profile), or read a page \
             with `man -l {shown}/agentwatch.1`\n",
            root.display(),
            root.display()
        )
    })
}

/// `$XDG_DATA_HOME/man/man1`, else `$HOME/.local/share/man/man1`.
fn default_dir() -> Result<PathBuf, Error> {
    let var = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
    var("XDG_DATA_HOME")
        .map(PathBuf::from)
        .or_else(|| var("HOME").map(|h| Path::new(&h).join(".local/share")))
        .map(|d| d.join("man/man1"))
        .ok_or_else(|| Error::usage("man: neither XDG_DATA_HOME nor HOME is set; give --dir DIR"))
}

/// Every page as (file name, roff), the main page first, then each subcommand's, depth first.
pub fn pages(cmd: clap::Command) -> Result<Vec<(String, String)>, Error> {
    let mut cmd = cmd.disable_help_subcommand(true);
    cmd.build();
    let mut out = Vec::new();
    collect(&cmd, true, &mut out)?;
    Ok(out)
}

fn collect(cmd: &clap::Command, main: bool, out: &mut Vec<(String, String)>) -> Result<(), Error> {
    let man = clap_mangen::Man::new(cmd.clone())
        .manual("agentwatch")
        .source(format!("agentwatch {}", env!("CARGO_PKG_VERSION")));
    let mut page = Vec::new();
    man.render(&mut page)
        .map_err(|e| Error::software(format!("man: {e}")))?;
    let mut roff = Roff::new();
    if main {
        configuration(&mut roff);
    }
    files(&mut roff);
    exit_status(&mut roff);
    if !main {
        roff.control("SH", ["SEE ALSO"])
            .text([bold("agentwatch"), roman("(1)")]);
    }
    let mut text = String::from_utf8_lossy(&page).into_owned();
    text.push_str(&roff.to_roff());
    out.push((man.get_filename(), text));
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        collect(sub, false, out)?;
    }
    Ok(())
}

/// EXIT STATUS: the runtime's one table of codes.
fn exit_status(roff: &mut Roff) {
    roff.control("SH", ["EXIT STATUS"]);
    for (value, name, meaning) in code::MEANINGS {
        roff.control("TP", [])
            .text([bold(value.to_string()), roman(format!(" ({name})"))])
            .text([roman(*meaning)]);
    }
}

/// FILES: where the configuration, its live edits and the store live.
fn files(roff: &mut Roff) {
    roff.control("SH", ["FILES"]);
    for (path, what) in [
        (
            "$XDG_CONFIG_HOME/agentwatch/config.toml",
            "The configuration (`--config FILE`, or `AGENTWATCH_CONFIG`); `agentwatch init` writes a starter one, `agentwatch config` prints what is in force.",
        ),
        (
            "$XDG_CONFIG_HOME/agentwatch/config.local.toml",
            "Live edits from the dashboard (`agentwatch serve`), beside the configuration file; read over it.",
        ),
        (
            "$XDG_STATE_HOME/agentwatch/agentwatch.db",
            "The SQLite store (`--db FILE`, or `[store] path`): ticks, verdicts, alerts, acks and silences, channel settings, job state.",
        ),
    ] {
        roff.control("TP", [])
            .text([bold(path)])
            .text([roman(what)]);
    }
}

/// CONFIGURATION: every key of a default configuration with its value and range, the optional
/// keys that are unset by default, and each channel's keys.
fn configuration(roff: &mut Roff) {
    roff.control("SH", ["CONFIGURATION"]).text([roman(
        "One TOML file (see FILES). Each key below with its default; a number outside its range is refused (exit 78). `agentwatch config` prints the configuration in force.",
    )]);
    for KeyDefault { key, value, range } in config::default_keys() {
        let range = range.map(|r| format!(" ({r})")).unwrap_or_default();
        roff.control("TP", [])
            .text([bold(key)])
            .text([roman(format!("default {value}{range}"))]);
    }
    for (section, key, example, unset) in OPTIONAL_KEYS {
        roff.control("TP", [])
            .text([bold(format!("{section}.{key}"))])
            .text([roman(format!("unset by default ({unset}); e.g. {example}"))]);
    }
}
