//! The journal: every line a job writes about what it decided and did, in one logfmt format.
//!
//! A line is `JOB=ISO-TIME key=value key=value…` on standard error. Each value goes through
//! [`crate::text::logfmt_value`] (bare when it is one plain token, else double-quoted with every
//! quote, backslash, control character, line separator and bidirectional override escaped), so an
//! id or a title from a file or a server can neither forge a line nor drive the terminal.
//!
//! Under systemd, when standard error is the journal's stream (`JOURNAL_STREAM` names its device
//! and inode), each line starts with its syslog priority (`<3>` error, `<4>` warning, `<6>` info),
//! which journald strips and keeps as the entry's priority: `journalctl -p warning` finds the
//! warnings, errors and critical alerts. On a terminal or a pipe the prefix is left out.
//!
//! Hand-written rather than through `tracing` + `tracing-subscriber`: the jobs write a few dozen
//! kinds of line from one process, nothing consumes spans, and a global subscriber would add
//! global state and a dependency tree for one formatter.

use crate::clock::iso8601;
use crate::text::logfmt_value;
use std::fmt::Display;
use std::io::Write;
use std::sync::OnceLock;

/// A line's syslog priority (RFC 5424 severity).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Priority {
    /// `<3>`: a job's error, a failed action or delivery, a critical alert.
    Err,
    /// `<4>`: a warning: something set aside, skipped or degraded; a warning alert.
    Warning,
    /// `<6>`: what a job decided and did.
    Info,
}

impl Priority {
    /// The syslog severity number.
    pub fn level(self) -> u8 {
        match self {
            Self::Err => 3,
            Self::Warning => 4,
            Self::Info => 6,
        }
    }
}

/// One journal line, built field by field and written once by [`Line::emit`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use]
pub struct Line {
    priority: Priority,
    text: String,
    /// Where the fields after `JOB=TIME` start.
    fields_at: usize,
}

impl Line {
    /// `JOB=ISO-TIME` at `priority`.
    pub fn new(priority: Priority, job: &str, now: i64) -> Self {
        let text = format!("{job}={}", iso8601(now));
        Self {
            priority,
            fields_at: text.len(),
            text,
        }
    }

    /// A line at info priority.
    pub fn info(job: &str, now: i64) -> Self {
        Self::new(Priority::Info, job, now)
    }

    /// A line at warning priority.
    pub fn warning(job: &str, now: i64) -> Self {
        Self::new(Priority::Warning, job, now)
    }

    /// A line at error priority.
    pub fn err(job: &str, now: i64) -> Self {
        Self::new(Priority::Err, job, now)
    }

    /// ` key=value`, the value escaped. Keys are this crate's own identifiers.
    pub fn field(mut self, key: &str, value: impl Display) -> Self {
        debug_assert!(
            !key.is_empty() && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'),
            "journal key {key:?}"
        );
        let value = value.to_string();
        self.text.push(' ');
        self.text.push_str(key);
        self.text.push('=');
        self.text.push_str(&logfmt_value(&value));
        self
    }

    /// ` key=value` when there is a value.
    pub fn field_opt(self, key: &str, value: Option<impl Display>) -> Self {
        match value {
            Some(value) => self.field(key, value),
            None => self,
        }
    }

    /// At least `priority` (an error stays an error).
    pub fn at_least(mut self, priority: Priority) -> Self {
        self.priority = self.priority.min(priority);
        self
    }

    /// Its priority.
    pub fn priority(&self) -> Priority {
        self.priority
    }

    /// The whole line, without the priority prefix.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The fields after `JOB=TIME`, without the leading space.
    pub fn fields(&self) -> &str {
        self.text[self.fields_at..].trim_start()
    }

    /// The line as written: `<N>` first when `with_priority`, and a newline.
    pub fn render(&self, with_priority: bool) -> String {
        if with_priority {
            format!("<{}>{}\n", self.priority.level(), self.text)
        } else {
            format!("{}\n", self.text)
        }
    }

    /// Writes the line to standard error in one write; the priority prefix only when standard
    /// error is the journal. A failed write is dropped: the journal is never a job's failure.
    pub fn emit(self) {
        let line = self.render(stderr_is_journal());
        let _ = std::io::stderr().lock().write_all(line.as_bytes());
    }
}

/// `<N>` for `priority` when standard error is the journal, else nothing: for a message written
/// without a [`Line`] (the binary's fatal error).
pub fn prefix(priority: Priority) -> &'static str {
    if !stderr_is_journal() {
        return "";
    }
    match priority {
        Priority::Err => "<3>",
        Priority::Warning => "<4>",
        Priority::Info => "<6>",
    }
}

/// Whether standard error is the journal's stream: systemd sets `JOURNAL_STREAM=DEV:INODE` to
/// the stream it connected, and a process whose stderr was redirected since must not prefix.
fn stderr_is_journal() -> bool {
    static IS: OnceLock<bool> = OnceLock::new();
    *IS.get_or_init(|| {
        let stream = std::env::var("JOURNAL_STREAM").ok();
        let stderr = std::fs::metadata("/proc/self/fd/2").ok();
        match (stream, stderr) {
            (Some(stream), Some(meta)) => names_stream(&stream, &meta),
            _ => false,
        }
    })
}

/// Whether `JOURNAL_STREAM`'s `DEV:INODE` is the file `meta` describes.
fn names_stream(stream: &str, meta: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    stream.split_once(':').is_some_and(|(dev, ino)| {
        dev.parse::<u64>() == Ok(meta.dev()) && ino.parse::<u64>() == Ok(meta.ino())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: i64 = 1_796_000_000;

    #[test]
    fn fields_are_logfmt_and_escaped() {
        let line = Line::info("watchdog", T)
            .field("dedup", "opencode-loop:ses_1")
            .field("title", "opencode loop: explore")
            .field("flagged_ticks", 3)
            .field_opt("message", None::<&str>)
            .field_opt("retry", Some(2));
        assert_eq!(
            line.text(),
            "watchdog=2026-11-30T00:53:20+00:00 dedup=opencode-loop:ses_1 \
             title=\"opencode loop: explore\" flagged_ticks=3 retry=2"
        );
        assert_eq!(
            line.fields(),
            "dedup=opencode-loop:ses_1 title=\"opencode loop: explore\" flagged_ticks=3 retry=2"
        );
    }

    #[test]
    fn a_hostile_value_cannot_forge_a_line_or_a_field() {
        let hostile = "x\ntick done: 0 alert(s) fired\r\u{1b}[2J\u{9b}31m\u{7f}\u{2028}\" forged=1";
        let line = Line::warning("deck", T)
            .field("title", hostile)
            .field("ok", 1);
        let written = line.render(true);
        assert_eq!(written.matches('\n').count(), 1, "{written:?}");
        // The quote inside the value is escaped: ` forged=1` stays inside `title`.
        assert_eq!(
            written,
            "<4>deck=2026-11-30T00:53:20+00:00 \
             title=\"x\\ntick done: 0 alert(s) fired\\r\\u{1b}[2J\\u{9b}31m\\u{7f}\\u{2028}\\\" forged=1\" \
             ok=1\n"
        );
        assert!(
            !written.trim_end().chars().any(|c| c.is_control()),
            "{written:?}"
        );
    }

    #[test]
    fn priority_prefixes_follow_syslog() {
        let rows = [
            (Line::err("recover", T), "<3>recover="),
            (Line::warning("recover", T), "<4>recover="),
            (Line::info("recover", T), "<6>recover="),
            (Line::info("run", T).at_least(Priority::Warning), "<4>run="),
            (Line::err("run", T).at_least(Priority::Warning), "<3>run="),
        ];
        for (line, prefix) in rows {
            assert!(line.render(true).starts_with(prefix), "{line:?}");
            assert!(line.render(false).starts_with(&prefix[3..]), "{line:?}");
        }
    }

    #[test]
    fn journal_stream_must_name_this_stderr() {
        use std::os::unix::fs::MetadataExt;
        let meta = std::fs::metadata("/proc/self/exe").unwrap();
        let mine = format!("{}:{}", meta.dev(), meta.ino());
        assert!(names_stream(&mine, &meta));
        for other in [
            "",
            "1",
            "x:y",
            &format!("{}:{}", meta.dev(), meta.ino() + 1),
        ] {
            assert!(!names_stream(other, &meta), "{other:?}");
        }
    }
}
