//! `agentwatch import-export FILE... [--out FILE]`: `opencode export` JSON files (one session
//! each, e.g. `opencode export ses_… > s.json`) into one session file (`agentwatch-sessions/1`),
//! on standard output or written atomically to `--out`, each file's sessions written out as soon
//! as that file is read (the document is never built whole in memory).
//!
//! Children may be exported separately and imported together with their parent: the session file
//! keeps `parent_id`, so the detector judges them as one tree. Session files given as input are
//! passed through. Nothing is scrubbed (use `export-fixture` for fixtures you share); `agentwatch
//! detect` also reads export JSON directly.

use crate::CliResult;
use agentwatch_runtime::Error;
use agentwatch_runtime::input::read_sessions_each;
use detect_core::{SESSION_FILE_FORMAT, Session};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct ImportExportArgs {
    /// `opencode export` JSON files; `-` reads standard input.
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<String>,
    /// Write the session file here (atomically) instead of standard output.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
}

pub fn run(args: ImportExportArgs) -> CliResult {
    if args.files.iter().filter(|f| *f == "-").count() > 1 {
        return Err(Error::usage("standard input (`-`) can be read only once"));
    }
    match &args.out {
        Some(path) => {
            let io = |e: std::io::Error| Error::io(format!("writing {}: {e}", path.display()));
            let written = write_streamed(path, |out| convert(&args.files, out, &io))?;
            eprintln!("agentwatch: wrote {}: {written} sessions", path.display());
        }
        None => {
            let stdout = std::io::BufWriter::new(std::io::stdout().lock());
            let failed = |e: std::io::Error| Error::stdout("import-export", &e);
            convert(&args.files, stdout, &failed)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Read the files one at a time and write each one's sessions to `out` as one session file as
/// soon as that file is read; returns how many sessions were written.
fn convert(
    files: &[String],
    out: impl Write,
    failed: &dyn Fn(std::io::Error) -> Error,
) -> Result<usize, Error> {
    let mut writer = SessionFileWriter::new(out).map_err(failed)?;
    read_sessions_each(files, |sessions| {
        for s in &sessions {
            if s.calls.iter().all(|c| !c.status.is_counted()) {
                eprintln!(
                    "agentwatch: note: session {} has no tool calls; it is kept but there is nothing to judge",
                    s.id
                );
            }
            writer.push(s).map_err(failed)?;
        }
        Ok(())
    })?;
    writer.finish().map_err(failed)
}

/// A session file (`agentwatch-sessions/1`) written one session at a time: byte for byte what
/// [`SessionFile::to_json_pretty`] writes for the whole list, and a closing newline.
struct SessionFileWriter<W: Write> {
    out: W,
    written: usize,
}

impl<W: Write> SessionFileWriter<W> {
    fn new(mut out: W) -> std::io::Result<Self> {
        let format = serde_json::to_string(SESSION_FILE_FORMAT)?;
        write!(out, "{{\n  \"format\": {format},\n  \"sessions\": [")?;
        Ok(Self { out, written: 0 })
    }

    fn push(&mut self, session: &Session) -> std::io::Result<()> {
        let text = serde_json::to_string_pretty(session)?;
        self.out.write_all(if self.written == 0 {
            b"\n    "
        } else {
            b",\n    "
        })?;
        // JSON escapes the newlines inside strings, so each newline of the text is between
        // tokens: the lines below the first go one list deeper.
        self.out
            .write_all(text.replace('\n', "\n    ").as_bytes())?;
        self.written += 1;
        Ok(())
    }

    /// Close the list and the document; how many sessions it holds.
    fn finish(mut self) -> std::io::Result<usize> {
        let end: &[u8] = if self.written == 0 {
            b"]\n}\n"
        } else {
            b"\n  ]\n}\n"
        };
        self.out.write_all(end)?;
        self.out.flush()?;
        Ok(self.written)
    }
}

/// Write `path` through a temporary file in its directory (mode 0644), synced and renamed over
/// it once `fill` succeeded, so a reader sees the old file or the whole new one; on failure the
/// temporary file is removed and `path` is untouched. `agentwatch_systemd::write_atomic` for a
/// document written as it is produced.
fn write_streamed<T>(
    path: &Path,
    fill: impl FnOnce(&mut dyn Write) -> Result<T, Error>,
) -> Result<T, Error> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let io = |e: std::io::Error| Error::io(format!("writing {}: {e}", path.display()));
    let name = path
        .file_name()
        .ok_or_else(|| Error::usage(format!("--out {}: names no file", path.display())))?;
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let temp = dir.join(format!(
        ".{}.{}.tmp",
        name.to_string_lossy(),
        std::process::id()
    ));
    let result = (|| {
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o644)
            .open(&temp)
            .map_err(io)?;
        file.set_permissions(std::fs::Permissions::from_mode(0o644))
            .map_err(io)?;
        let mut out = std::io::BufWriter::new(file);
        let value = fill(&mut out)?;
        let file = out.into_inner().map_err(|e| io(e.into_error()))?;
        file.sync_all().map_err(io)?;
        std::fs::rename(&temp, path).map_err(io)?;
        // The rename survives a crash once the directory is synced.
        let _ = std::fs::File::open(dir).and_then(|d| d.sync_all());
        Ok(value)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    result
}
