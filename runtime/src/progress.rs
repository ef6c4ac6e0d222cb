//! A progress bar on standard error for the commands that read big files or work through many
//! sessions (`detect`, `import-export`, `export-fixture`, `cargo xtask backtest`), drawn only when standard error is a
//! terminal: a pipe, a file or the journal get nothing, so output that scripts read is unchanged.
//!
//! The bar appears only once the work has taken [`DELAY`] (a quick command never flickers),
//! redraws at most every [`REDRAW`] and clears its line when done, so the command's own output
//! starts on a clean line.

use std::io::{IsTerminal, Read, Write};
use std::time::{Duration, Instant};

/// How long work runs before its bar appears.
pub const DELAY: Duration = Duration::from_millis(500);

/// The shortest time between two redraws.
pub const REDRAW: Duration = Duration::from_millis(100);

/// Bar width in cells.
const WIDTH: usize = 30;

/// How far one piece of work has come: `done` of `total` units (bytes, sessions).
#[derive(Debug)]
pub struct Progress {
    label: String,
    unit: Unit,
    total: u64,
    done: u64,
    /// Standard error is a terminal (and `TERM` is not `dumb`): the bar is drawn once there is
    /// something to count.
    terminal: bool,
    started: Instant,
    /// When the bar was last drawn.
    drawn_at: Option<Instant>,
}

/// What the bar counts, for its figures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// Bytes, shown in MB.
    Bytes,
    /// Whole items (sessions), shown as counts.
    Items,
}

impl Progress {
    /// A bar for `total` units of `label`, drawn only when standard error is a terminal (and
    /// `TERM` is not `dumb`).
    #[must_use]
    pub fn new(label: impl Into<String>, unit: Unit, total: u64) -> Self {
        let terminal =
            std::io::stderr().is_terminal() && std::env::var_os("TERM").is_none_or(|t| t != "dumb");
        Self {
            label: label.into(),
            unit,
            total,
            done: 0,
            terminal,
            started: Instant::now(),
            drawn_at: None,
        }
    }

    /// A bar whose total is known only once the work starts ([`Progress::update`]).
    #[must_use]
    pub fn items(label: impl Into<String>) -> Self {
        Self::new(label, Unit::Items, 0)
    }

    /// `done` of `total` (a total learnt late, as [`Progress::items`] starts without one).
    pub fn update(&mut self, done: usize, total: usize) {
        let (done, total) = (done as u64, total as u64);
        self.total = total;
        self.add(done.saturating_sub(self.done));
    }

    /// `n` more units done.
    pub fn add(&mut self, n: u64) {
        self.done = self.done.saturating_add(n).min(self.total);
        if !self.terminal || self.total == 0 {
            return;
        }
        let now = Instant::now();
        let due = match self.drawn_at {
            None => now.duration_since(self.started) >= DELAY,
            Some(at) => now.duration_since(at) >= REDRAW,
        };
        if !due {
            return;
        }
        self.drawn_at = Some(now);
        let mut err = std::io::stderr().lock();
        // A failed draw is not worth failing the command for.
        let _ = write!(
            err,
            "\r\x1b[2K{}",
            line(&self.label, self.unit, self.done, self.total)
        );
        let _ = err.flush();
    }

    /// Clear the bar's line (also done on drop).
    pub fn finish(&mut self) {
        if self.drawn_at.take().is_some() {
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\r\x1b[2K");
            let _ = err.flush();
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.finish();
    }
}

/// One bar line: `label [#########.........]  45%  102/227 MB`.
#[must_use]
pub fn line(label: &str, unit: Unit, done: u64, total: u64) -> String {
    let total = total.max(1);
    let done = done.min(total);
    let filled = usize::try_from(done.saturating_mul(WIDTH as u64) / total).unwrap_or(WIDTH);
    let percent = done.saturating_mul(100) / total;
    let figures = match unit {
        Unit::Bytes => format!("{}/{} MB", done >> 20, total.div_ceil(1 << 20)),
        Unit::Items => format!("{done}/{total}"),
    };
    format!(
        "{label} [{}{}] {percent:>3}%  {figures}",
        "#".repeat(filled),
        ".".repeat(WIDTH - filled)
    )
}

/// A reader that moves a byte [`Progress`] as it is read.
#[derive(Debug)]
pub struct Reading<R> {
    inner: R,
    progress: Progress,
}

impl<R> Reading<R> {
    /// `inner`, `total` bytes long, shown as `label`.
    pub fn new(inner: R, label: impl Into<String>, total: u64) -> Self {
        Self {
            inner,
            progress: Progress::new(label, Unit::Bytes, total),
        }
    }
}

impl<R: Read> Read for Reading<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        if n == 0 {
            self.progress.finish();
        } else {
            self.progress.add(n as u64);
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_shows_the_bar_the_share_and_the_figures() {
        for (unit, done, total, want) in [
            (
                Unit::Items,
                0,
                10,
                "backtest [..............................]   0%  0/10",
            ),
            (
                Unit::Items,
                5,
                10,
                "backtest [###############...............]  50%  5/10",
            ),
            (
                Unit::Items,
                12,
                10,
                "backtest [##############################] 100%  10/10",
            ),
            (
                Unit::Bytes,
                100 << 20,
                227 << 20,
                "backtest [#############.................]  44%  100/227 MB",
            ),
            // Nothing to count: no division by zero, a full bar.
            (
                Unit::Items,
                0,
                0,
                "backtest [..............................]   0%  0/1",
            ),
        ] {
            assert_eq!(line("backtest", unit, done, total), want, "{done}/{total}");
        }
    }

    #[test]
    fn a_total_learnt_late_counts_from_zero() {
        let mut progress = Progress::items("export-fixture");
        progress.update(1, 3);
        progress.update(3, 3);
        assert_eq!((progress.done, progress.total), (3, 3));
    }

    #[test]
    fn a_reader_passes_every_byte_through_unchanged() {
        let text = b"{\"format\": \"agentwatch-sessions/1\"}".repeat(1000);
        let mut reading = Reading::new(&text[..], "file.json", text.len() as u64);
        let mut out = Vec::new();
        reading.read_to_end(&mut out).unwrap();
        assert_eq!(out, text);
        assert_eq!(reading.progress.done, text.len() as u64);
    }
}
