//! The journal: every line a job writes about what it decided and did, as a `tracing` event,
//! and [`Journal`], the subscriber that writes those events as logfmt lines.
//!
//! A job builds a [`Line`] (`JOB`, its `now`, then `key=value` fields) and [`Line::emit`]s it as
//! one event to the current `tracing` dispatcher: target `agentwatch`, level `ERROR`, `WARN` or
//! `INFO` (the line's [`Priority`]), fields `journal` (the job's name), `now` (the job's own clock
//! reading, seconds since the epoch: the formatter reads no clock) and then the line's fields in
//! order, each recorded as text. A program embedding this crate routes them into its own
//! subscriber (a filter, JSON, OpenTelemetry); one that installs none gets nothing written, as
//! with any library that logs through `tracing`. The `agentwatch` binary installs [`Journal`]
//! ([`install`]) at startup.
//!
//! [`Journal`] writes each event as `JOB=ISO-TIME key=value key=value…` in one write to standard
//! error. Each value goes through [`crate::text::logfmt_value`] (bare when it is one plain token,
//! else double-quoted with every quote, backslash, control character, line separator and
//! bidirectional override escaped), so an id or a title from a file or a server can neither forge
//! a line nor drive the terminal.
//!
//! Under systemd, when standard error is the journal's stream (`JOURNAL_STREAM` names its device
//! and inode), each line starts with its syslog priority (`<3>` error, `<4>` warning, `<6>` info),
//! which journald strips and keeps as the entry's priority: `journalctl -p warning` finds the
//! warnings, errors and critical alerts. On a terminal or a pipe the prefix is left out.
//!
//! Why a builder and not `tracing`'s macros: a macro fixes its fields at its call site, while a
//! line's fields depend on what happened (a retry only when there was one; helpers such as
//! [`crate::notify::decision_line`] return a line that callers extend). So the journal declares
//! its keys once ([`KEYS`], the journal's vocabulary, which an embedder can rely on) in three
//! call sites, one per level, and each event carries the fields its line holds, in its order.

use crate::clock::iso8601;
use crate::text::logfmt_value;
use std::fmt::{self, Display};
use std::io::Write;
use std::sync::{Mutex, OnceLock, PoisonError};
use tracing_core::callsite::{Callsite, DefaultCallsite, Identifier};
use tracing_core::field::{Field, FieldSet, Value, Visit};
use tracing_core::metadata::{Kind, LevelFilter};
use tracing_core::{Dispatch, Event, Level, Metadata, Subscriber, dispatcher, span};

/// The target of every journal event.
pub const TARGET: &str = "agentwatch";

/// Every field name of a journal event: `journal` (the job), `now`, then [`KEYS`].
const NAMES: &[&str] = &[
    "journal",
    "now",
    "action",
    "agent",
    "alertmanager",
    "api_key",
    "bin",
    "blocked",
    "call",
    "channel",
    "child",
    "critical",
    "daemon",
    "db",
    "deadline_skipped",
    "decision",
    "dedup",
    "deliveries",
    "delivery",
    "detail",
    "directories",
    "down_for",
    "dry_run",
    "enabled",
    "ending",
    "error",
    "events",
    "exit",
    "fallback",
    "fired",
    "flagged",
    "flagged_ticks",
    "follow",
    "from_store",
    "grouped",
    "hooks",
    "interval_s",
    "job",
    "jobs",
    "judged",
    "kept_as",
    "link",
    "listening",
    "llm",
    "llm_opinion",
    "loop_report",
    "message",
    "min_severity",
    "missing_roots",
    "next",
    "notice",
    "ok",
    "open",
    "outcome",
    "owners",
    "pane",
    "phase",
    "policy",
    "poller",
    "problem",
    "profile",
    "queued_at",
    "read",
    "reason",
    "reconnects",
    "report",
    "result",
    "retry",
    "root",
    "section",
    "server",
    "servers",
    "session",
    "sessions",
    "severity",
    "shown",
    "signal",
    "skipped",
    "source",
    "sources",
    "state",
    "state_dir",
    "status",
    "steps",
    "still_flagged",
    "store",
    "stream",
    "summary",
    "suspected",
    "tick",
    "ticks",
    "title",
    "took_ms",
    "trees",
    "unit",
    "unperformed",
    "wake",
    "warning",
    "watch",
    "watchdog_s",
];

/// The keys a line's fields may have, the journal's vocabulary (a test keeps it in step with
/// the fields this crate's lines are given).
pub const KEYS: &[&str] = NAMES.split_at(2).1;

/// How many fields a journal event's call site declares.
const N: usize = NAMES.len();

/// One call site per level, each declaring every name in [`NAMES`].
macro_rules! journal_callsite {
    ($callsite:ident, $meta:ident, $level:expr) => {
        static $meta: Metadata<'static> = Metadata::new(
            "journal",
            TARGET,
            $level,
            Some(file!()),
            Some(line!()),
            Some(module_path!()),
            FieldSet::new(NAMES, Identifier(&$callsite)),
            Kind::EVENT,
        );
        static $callsite: DefaultCallsite = DefaultCallsite::new(&$meta);
    };
}
journal_callsite!(ERR_CALLSITE, ERR_META, Level::ERROR);
journal_callsite!(WARNING_CALLSITE, WARNING_META, Level::WARN);
journal_callsite!(INFO_CALLSITE, INFO_META, Level::INFO);

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

    /// The priority of an event at `level` (`ERROR`, `WARN`, anything else info).
    pub fn of(level: Level) -> Self {
        match level {
            Level::ERROR => Self::Err,
            Level::WARN => Self::Warning,
            _ => Self::Info,
        }
    }

    fn callsite(self) -> &'static DefaultCallsite {
        match self {
            Self::Err => &ERR_CALLSITE,
            Self::Warning => &WARNING_CALLSITE,
            Self::Info => &INFO_CALLSITE,
        }
    }
}

/// One journal line, built field by field and sent once, as a `tracing` event, by
/// [`Line::emit`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use]
pub struct Line {
    priority: Priority,
    job: String,
    now: i64,
    /// Each field's index in [`NAMES`] and its value as text, in order.
    fields: Vec<(usize, String)>,
}

impl Line {
    /// `JOB=ISO-TIME` at `priority`.
    pub fn new(priority: Priority, job: &str, now: i64) -> Self {
        Self {
            priority,
            job: job.to_owned(),
            now,
            fields: Vec::new(),
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

    /// ` key=value`; `key` is one of [`KEYS`] (another is a bug, caught by the tests).
    pub fn field(mut self, key: &str, value: impl Display) -> Self {
        match KEYS.iter().position(|k| *k == key) {
            Some(i) => self.fields.push((i + 2, value.to_string())),
            None => debug_assert!(false, "journal key {key:?} is not in journal::KEYS"),
        }
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

    /// The fields after `JOB=TIME` as the journal writes them, without a leading space.
    pub fn fields(&self) -> String {
        let mut out = String::new();
        for (i, value) in &self.fields {
            push_field(&mut out, NAMES[*i], value);
        }
        out.split_off(1.min(out.len()))
    }

    /// Sends the line to the current `tracing` dispatcher as one event (nothing when no
    /// subscriber wants it). The journal is never a job's failure: nothing here can fail.
    pub fn emit(self) {
        let callsite = self.priority.callsite();
        let meta = callsite.metadata();
        if *meta.level() > LevelFilter::current() {
            return;
        }
        let interest = callsite.interest();
        if interest.is_never()
            || (!interest.is_always() && !dispatcher::get_default(|d| d.enabled(meta)))
        {
            return;
        }
        let names: Vec<Field> = meta.fields().iter().collect();
        let job: &str = &self.job;
        let mut values: [(&Field, Option<&dyn Value>); N] =
            std::array::from_fn(|i| (&names[i], None));
        values[0].1 = Some(&job);
        values[1].1 = Some(&self.now);
        for (slot, (i, value)) in values[2..].iter_mut().zip(&self.fields) {
            *slot = (&names[*i], Some(value));
        }
        Event::dispatch(meta, &meta.fields().value_set(&values));
    }
}

/// ` key=value`, the value escaped: the one rendering of a journal field.
fn push_field(out: &mut String, key: &str, value: &str) {
    out.push(' ');
    out.push_str(key);
    out.push('=');
    out.push_str(&logfmt_value(value));
}

/// The `tracing` subscriber that writes journal events as logfmt lines (see the module doc):
/// what the `agentwatch` binary installs. It takes only events of [`TARGET`] and no spans.
pub struct Journal {
    out: Mutex<Box<dyn Write + Send>>,
    priorities: bool,
}

impl fmt::Debug for Journal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Journal")
            .field("priorities", &self.priorities)
            .finish_non_exhaustive()
    }
}

impl Journal {
    /// Writing to standard error, with priority prefixes when it is the journal's stream.
    pub fn stderr() -> Self {
        Self::new(std::io::stderr(), stderr_is_journal())
    }

    /// Writing each line to `out` in one write, with its `<N>` prefix when `priorities`.
    pub fn new(out: impl Write + Send + 'static, priorities: bool) -> Self {
        Self {
            out: Mutex::new(Box::new(out)),
            priorities,
        }
    }

    /// The line `event` is, or `None` when it is not a journal event (no `journal` or `now`).
    fn render(&self, event: &Event<'_>) -> Option<String> {
        let mut fields = Fields::default();
        event.record(&mut fields);
        let (Some(job), Some(now)) = (fields.journal, fields.now) else {
            return None;
        };
        let mut line = String::with_capacity(128);
        if self.priorities {
            let priority = Priority::of(*event.metadata().level());
            line.push_str(&format!("<{}>", priority.level()));
        }
        line.push_str(&job);
        line.push('=');
        line.push_str(&iso8601(now));
        for (key, value) in &fields.fields {
            push_field(&mut line, key, value);
        }
        line.push('\n');
        Some(line)
    }
}

impl Subscriber for Journal {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        metadata.is_event() && metadata.target() == TARGET
    }

    fn new_span(&self, _: &span::Attributes<'_>) -> span::Id {
        span::Id::from_u64(1)
    }

    fn record(&self, _: &span::Id, _: &span::Record<'_>) {}

    fn record_follows_from(&self, _: &span::Id, _: &span::Id) {}

    fn event(&self, event: &Event<'_>) {
        if let Some(line) = self.render(event) {
            let mut out = self.out.lock().unwrap_or_else(PoisonError::into_inner);
            // A failed write is dropped: the journal is never a job's failure.
            let _ = out.write_all(line.as_bytes());
            let _ = out.flush();
        }
    }

    fn enter(&self, _: &span::Id) {}

    fn exit(&self, _: &span::Id) {}
}

/// A journal event's fields, as the formatter reads them.
#[derive(Default)]
struct Fields {
    journal: Option<String>,
    now: Option<i64>,
    fields: Vec<(&'static str, String)>,
}

impl Visit for Fields {
    fn record_i64(&mut self, field: &Field, value: i64) {
        match field.name() {
            "now" => self.now = Some(value),
            name => self.fields.push((name, value.to_string())),
        }
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        match field.name() {
            "journal" => self.journal = Some(value.to_owned()),
            name => self.fields.push((name, value.to_owned())),
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.fields.push((field.name(), format!("{value:?}")));
    }
}

/// Installs [`Journal::stderr`] as the process's global `tracing` subscriber: what the binary
/// does at startup. False when one was already set (that one keeps the journal).
pub fn install() -> bool {
    dispatcher::set_global_default(Dispatch::new(Journal::stderr())).is_ok()
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

/// What the lines sent while `f` runs are, as [`Journal`] writes them with priority prefixes
/// (`priorities`) or without: for tests of the lines a function emits.
pub fn capture(priorities: bool, f: impl FnOnce()) -> String {
    #[derive(Clone, Default)]
    struct Buffer(std::sync::Arc<Mutex<Vec<u8>>>);
    impl Write for Buffer {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            let mut buffer = self.0.lock().unwrap_or_else(PoisonError::into_inner);
            buffer.extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let buffer = Buffer::default();
    let journal = Dispatch::new(Journal::new(buffer.clone(), priorities));
    dispatcher::with_default(&journal, f);
    let bytes = buffer.0.lock().unwrap_or_else(PoisonError::into_inner);
    String::from_utf8_lossy(&bytes).into_owned()
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
            line.fields(),
            "dedup=opencode-loop:ses_1 title=\"opencode loop: explore\" flagged_ticks=3 retry=2"
        );
        assert_eq!(
            capture(false, || line.emit()),
            "watchdog=2026-11-30T00:53:20+00:00 dedup=opencode-loop:ses_1 \
             title=\"opencode loop: explore\" flagged_ticks=3 retry=2\n"
        );
        assert_eq!(Line::info("run", T).fields(), "");
        assert_eq!(
            capture(false, || Line::info("run", T).emit()),
            "run=2026-11-30T00:53:20+00:00\n"
        );
    }

    #[test]
    fn a_hostile_value_cannot_forge_a_line_or_a_field() {
        let hostile = "x\ntick done: 0 alert(s) fired\r\u{1b}[2J\u{9b}31m\u{7f}\u{2028}\" forged=1";
        let written = capture(true, || {
            Line::warning("deck", T)
                .field("title", hostile)
                .field("ok", 1)
                .emit();
        });
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
            let with = capture(true, || line.clone().emit());
            let without = capture(false, || line.clone().emit());
            assert!(with.starts_with(prefix), "{with:?}");
            assert!(without.starts_with(&prefix[3..]), "{without:?}");
            assert_eq!(with[3..], without);
        }
    }

    #[test]
    fn the_time_is_the_lines_now_and_nothing_else_is_written() {
        // Two lines at the same `now` are written with the same time, whatever the clock says.
        let written = capture(false, || {
            Line::info("run", 0).emit();
            Line::info("run", 0).emit();
        });
        assert_eq!(
            written,
            "run=1970-01-01T00:00:00+00:00\nrun=1970-01-01T00:00:00+00:00\n"
        );
        // Without a subscriber a line goes nowhere (and nothing panics).
        Line::warning("run", 0).field("problem", "unseen").emit();
    }

    #[test]
    fn every_key_the_crate_writes_is_declared() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut stack = vec![root];
        let mut seen = 0;
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    stack.push(path);
                    continue;
                }
                if path.ends_with("journal.rs") {
                    continue;
                }
                let text = std::fs::read_to_string(&path).unwrap();
                for call in [".field(", ".field_opt("] {
                    for (at, _) in text.match_indices(call) {
                        let rest = text[at + call.len()..].trim_start();
                        let Some(rest) = rest.strip_prefix('"') else {
                            continue;
                        };
                        let key = &rest[..rest.find('"').unwrap()];
                        assert!(KEYS.contains(&key), "{}: {key:?}", path.display());
                        seen += 1;
                    }
                }
            }
        }
        assert!(seen > 100, "{seen}");
        let mut sorted = KEYS.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted, KEYS, "KEYS sorted, each once");
        assert!(!KEYS.contains(&"journal") && !KEYS.contains(&"now"));
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
