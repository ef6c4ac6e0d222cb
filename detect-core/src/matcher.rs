//! The call matcher: identity, target, landed, and the lines a read returned.
//!
//! Everything the signals need from one call is computed once, into [`CallFacts`], by
//! [`CallFacts::of`]. The detector never looks at a call's JSON again.

use crate::bash::{normalize_bash, normalize_bash_into};
use crate::config::{DetectConfig, Rule};
use crate::json::{CowStr, Json, write_json_string, write_object};
use crate::meta::MetaFacts;
use crate::model::{Call, CallStatus, CallTime};
use crate::shell;
use rustc_hash::FxHashMap;
use serde::Deserialize;
use serde::de::{MapAccess, Visitor};
use serde_json::Value;
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::num::NonZeroU64;

/// How many characters of a grep / glob pattern make its target.
pub const PATTERN_TARGET_CHARS: usize = shell::PATTERN_CHARS;
/// opencode's default `limit` of a read.
pub const DEFAULT_READ_LIMIT: u64 = 2000;

/// Canonical JSON: object keys sorted recursively, no whitespace, integers printed as integers
/// (so `1.0` and `1` match). Independent of serde_json's map order features.
pub fn canonical_json(value: &Value) -> String {
    let mut out = String::new();
    Json::of(value).write_canonical(&mut out);
    out
}

/// Bash input keys the model writes freely; they do not change what the call does.
const BASH_NOISE_KEYS: &[&str] = &["description", "timeout"];

/// Call identity: `tool` + canonical JSON of the input, with the bash command normalised and the
/// bash noise keys removed.
pub fn call_identity(tool: &str, input: &Value) -> String {
    let mut out = String::with_capacity(96);
    write_identity(tool, &Json::of(input), None, &mut out);
    out
}

/// Write [`call_identity`] into `out`, reusing a bash command normalised already (the matcher
/// needs it twice).
fn write_identity(tool: &str, input: &Json<'_>, normalized: Option<&str>, out: &mut String) {
    out.push_str(tool);
    out.push(' ');
    match (tool, input) {
        ("bash", Json::Object(entries)) => {
            let keep = |key: &str| !BASH_NOISE_KEYS.contains(&key);
            write_object(
                entries,
                out,
                &keep,
                &mut |key, value, out| match (key, value) {
                    ("command", Json::Str(command)) => match normalized {
                        Some(n) => write_json_string(n, out),
                        None => write_json_string(&normalize_bash(command), out),
                    },
                    (_, value) => value.write_canonical(out),
                },
            );
        }
        _ => input.write_canonical(out),
    }
}

/// The last path component (after `/` or `\`).
pub fn basename(path: &str) -> &str {
    let trimmed = path.trim_end_matches(['/', '\\']);
    trimmed.rsplit(['/', '\\']).next().unwrap_or(trimmed)
}

/// Resolve `path` against `directory` lexically (no file system access): relative paths are
/// joined, `.` and `..` components folded.
pub fn resolve_path(directory: Option<&str>, path: &str) -> String {
    let mut out = String::with_capacity(path.len() + directory.map_or(0, str::len) + 1);
    resolve_path_into(directory, path, &mut out);
    out
}

/// [`resolve_path`] written into `out` (cleared first), with no allocation of its own.
pub(crate) fn resolve_path_into(directory: Option<&str>, path: &str, out: &mut String) {
    out.clear();
    if is_clean_absolute(path) {
        // What the walk would write, copied at once (most paths agents pass are so).
        out.push_str(path);
    } else if let Some(directory) = directory.filter(|d| is_clean_absolute(d))
        && is_clean_relative(path)
    {
        // `src/a.py` in a clean directory: joined as the walk would join them.
        out.push_str(directory);
        out.push('/');
        out.push_str(path);
    } else {
        walk_path_into(directory, path, out);
    }
}

/// [`resolve_path_into`] component by component.
fn walk_path_into(directory: Option<&str>, path: &str, out: &mut String) {
    let directory = directory.filter(|dir| !path.starts_with('/') && !dir.is_empty());
    let absolute = directory.unwrap_or(path).starts_with('/');
    let root = usize::from(absolute);
    if absolute {
        out.push('/');
    }
    // `out` is the root, then the components kept so far joined by `/`.
    let mut count = 0usize;
    for part in directory
        .into_iter()
        .flat_map(|d| d.split('/'))
        .chain(path.split('/'))
    {
        match part {
            "" | "." => {}
            ".." => {
                let last_start = out.rfind('/').map_or(0, |i| i + 1).max(root);
                if count > 0 && &out[last_start..] != ".." {
                    out.truncate(if count > 1 { last_start - 1 } else { root });
                    count -= 1;
                } else if !absolute {
                    if count > 0 {
                        out.push('/');
                    }
                    out.push_str("..");
                    count += 1;
                }
            }
            other => {
                if count > 0 {
                    out.push('/');
                }
                out.push_str(other);
                count += 1;
            }
        }
    }
}

/// Whether `path` is absolute and already as [`resolve_path_into`] writes it: no empty, `.` or
/// `..` component, no `/` at the end (a component that begins with a dot is not looked at
/// further: such a path takes the walk).
fn is_clean_absolute(path: &str) -> bool {
    let bytes = path.as_bytes();
    bytes.len() > 1
        && bytes[0] == b'/'
        && bytes[bytes.len() - 1] != b'/'
        && !bytes
            .windows(2)
            .any(|w| w[0] == b'/' && (w[1] == b'/' || w[1] == b'.'))
}

/// Whether `path` is relative and the walk would keep each of its components as it is: not
/// empty, no empty component, none that begins with a dot, no `/` at the end.
fn is_clean_relative(path: &str) -> bool {
    let bytes = path.as_bytes();
    !bytes.is_empty()
        && bytes[0] != b'/'
        && bytes[0] != b'.'
        && bytes[bytes.len() - 1] != b'/'
        && !bytes
            .windows(2)
            .any(|w| w[0] == b'/' && (w[1] == b'/' || w[1] == b'.'))
}

/// What a read call contributes to the coverage signal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadFacts {
    /// Full path of the file read.
    pub path: String,
    /// Lines returned, capped at the file's length.
    pub lines: u64,
    /// The file's length in lines.
    pub file_lines: u64,
}

/// Lines of one file a call showed (`precise`: the `reread` signal).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ViewRange {
    /// The file, resolved against the session directory.
    pub path: String,
    /// First and last line shown (1-based, inclusive).
    pub first: u64,
    pub last: u64,
}

/// Everything the detector needs from one counted call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallFacts {
    pub identity: String,
    /// The `top` key: `tool` and what the call is about (basename, first words, pattern).
    pub target: String,
    pub landed: bool,
    /// The landing is a bash command that writes files, or a write tool's (`precise` only). The
    /// detector demotes a repeat of an earlier one (the same `sed -i` or the same content written
    /// to the same file again changes nothing); [`CallFacts::of`] sees one call alone and cannot.
    pub write: bool,
    /// Set for reads of a file whose length is known.
    pub read: Option<ReadFacts>,
    /// A poll: `sleep`, then a look at something (`precise`: counts towards `slow` only).
    pub wait: bool,
    /// The lines of one file the call showed, when known (`precise`).
    pub view: Option<ViewRange>,
    /// What the call saw (`precise`, rule `repeat`): `#` and its output hash where it has one,
    /// otherwise its status and `metadata.exit`. Empty when the rule is off.
    pub result: String,
    /// The call failed: status `error`, or a non-zero `metadata.exit` (`precise`, rule `repeat`;
    /// `false` when the rule is off).
    pub failed: bool,
    /// A bash write whose exit is unknown: the file it writes (`precise`, rule
    /// `output_landings`). It lands when a view of that file then shows new content.
    pub unconfirmed_write: Option<String>,
    /// The file the call shows (a viewer or a reader tool), resolved (`precise`, rule
    /// `output_landings`).
    pub shows_file: Option<String>,
    /// The call, not landing, is a write or edit tool's call that landed earlier in the session,
    /// sent again (an edit whose old text is gone since it was made): no progress, an echo even
    /// when its result is new (`precise`, rule `repeated_writes`; the detector decides, as for
    /// `write`). Not for bash: the same command writing a file (`make > build.log`) is run again
    /// after real changes and sees new results.
    pub resent: bool,
    /// A write or edit tool's call, landed or not: the calls [`CallFacts::resent`] looks at.
    pub tool_change: bool,
    /// The call landed by a commit its output names (`metadata.committed`, the commit's hash,
    /// hashed): the detector demotes it when that commit landed already in the session
    /// (`precise`, rule `repeated_writes`; [`CallFacts::of`] sees one call alone).
    pub commit: Option<NonZeroU64>,
    pub start_ms: Option<i64>,
    pub end_ms: Option<i64>,
}

/// The session context a call is judged in.
#[derive(Debug, Clone, Copy)]
pub struct CallContext<'a> {
    pub directory: Option<&'a str>,
    pub line_counts: &'a BTreeMap<String, u64>,
}

/// The session context as the matcher reads it: a [`CallContext`], or the same with the line
/// counts read borrowed from a session file's text ([`LineCountsText`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Context<'a> {
    pub directory: Option<&'a str>,
    pub line_counts: LineCounts<'a>,
}

impl<'a> From<CallContext<'a>> for Context<'a> {
    fn from(ctx: CallContext<'a>) -> Self {
        Self {
            directory: ctx.directory,
            line_counts: LineCounts::Map(ctx.line_counts),
        }
    }
}

/// A session's `line_counts`, in whichever form they were read.
#[derive(Debug, Clone, Copy)]
pub(crate) enum LineCounts<'a> {
    Map(&'a BTreeMap<String, u64>),
    Text(&'a LineCountsText<'a>),
}

impl LineCounts<'_> {
    /// The length of the file at `path`, if known.
    fn get(self, path: &str) -> Option<u64> {
        match self {
            LineCounts::Map(map) => map.get(path).copied(),
            LineCounts::Text(text) => text.0.get(path).copied(),
        }
    }
}

/// A session's `line_counts` read borrowed from its text (`detect`, issue 19: no owned path and
/// no tree per session, one hash per lookup). It reads what `BTreeMap<String, u64>` reads, and a
/// repeated path's last count counts, as there.
#[derive(Debug, Default)]
pub(crate) struct LineCountsText<'a>(pub(crate) FxHashMap<Cow<'a, str>, u64>);

impl<'de> Deserialize<'de> for LineCountsText<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Counts;
        impl<'de> Visitor<'de> for Counts {
            type Value = LineCountsText<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a map")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut counts = FxHashMap::default();
                counts.reserve(map.size_hint().unwrap_or(0));
                while let Some(path) = map.next_key_seed(CowStr)? {
                    counts.insert(path, map.next_value::<u64>()?);
                }
                Ok(LineCountsText(counts))
            }
        }
        d.deserialize_map(Counts)
    }
}

/// A counted call as the matcher reads it, borrowed: from a [`Call`], or straight from a
/// session file's text (no `Value` map, no owned strings).
#[derive(Debug, Clone)]
pub(crate) struct CallRef<'a> {
    pub tool: &'a str,
    pub input: &'a Json<'a>,
    /// `error` (else `completed`).
    pub error: bool,
    pub meta: MetaFacts<'a>,
    pub output_hash: Option<&'a str>,
    pub start_ms: Option<i64>,
    pub end_ms: Option<i64>,
}

impl<'a> CallRef<'a> {
    /// `call` with its input read as `input` ([`Json::of`] of it), or `None` when the call does
    /// not count (pending, running, unknown).
    pub(crate) fn of(call: &'a Call, input: &'a Json<'a>) -> Option<Self> {
        Self::new(
            &call.tool,
            input,
            &call.status,
            || MetaFacts::of(&call.metadata),
            call.output_hash.as_deref(),
            call.time,
        )
    }

    /// A call read from its parts (`meta` read only when the call counts), or `None` when it
    /// does not count.
    pub(crate) fn new(
        tool: &'a str,
        input: &'a Json<'a>,
        status: &CallStatus,
        meta: impl FnOnce() -> MetaFacts<'a>,
        output_hash: Option<&'a str>,
        time: Option<CallTime>,
    ) -> Option<Self> {
        status.is_counted().then(|| CallRef {
            tool,
            input,
            error: *status == CallStatus::Error,
            meta: meta(),
            output_hash,
            start_ms: time.and_then(|t| t.start),
            end_ms: time.and_then(CallTime::effect_ms),
        })
    }
}

/// The buffers the facts of one call are written into, reused from call to call.
#[derive(Debug, Clone, Default)]
pub(crate) struct Scratch {
    command: String,
    identity: String,
    target: String,
    read_path: String,
    view_path: String,
    result: String,
    written_path: String,
}

/// [`CallFacts`] borrowed from a [`Scratch`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct Facts<'s> {
    pub identity: &'s str,
    pub target: &'s str,
    pub landed: bool,
    pub write: bool,
    /// (path, lines, file length): see [`ReadFacts`].
    pub read: Option<(&'s str, u64, u64)>,
    pub wait: bool,
    /// (path, first, last): see [`ViewRange`].
    pub view: Option<(&'s str, u64, u64)>,
    pub result: &'s str,
    /// See [`CallFacts::failed`].
    pub failed: bool,
    /// See [`CallFacts::unconfirmed_write`].
    pub unconfirmed_write: Option<&'s str>,
    /// See [`CallFacts::shows_file`].
    pub shows_file: Option<&'s str>,
    /// See [`CallFacts::resent`].
    pub resent: bool,
    /// See [`CallFacts::tool_change`].
    pub tool_change: bool,
    /// See [`CallFacts::commit`].
    pub commit: Option<NonZeroU64>,
    pub start_ms: Option<i64>,
    pub end_ms: Option<i64>,
}

impl Facts<'_> {
    /// A success known only by its status: no output was recorded, so the result says that the
    /// call ran, not what it saw (see [`CallFacts::blind`]).
    pub(crate) fn blind(&self) -> bool {
        is_blind(self.result, self.failed)
    }

    fn to_owned(self) -> CallFacts {
        CallFacts {
            identity: self.identity.to_owned(),
            target: self.target.to_owned(),
            landed: self.landed,
            write: self.write,
            read: self.read.map(|(path, lines, file_lines)| ReadFacts {
                path: path.to_owned(),
                lines,
                file_lines,
            }),
            wait: self.wait,
            view: self.view.map(|(path, first, last)| ViewRange {
                path: path.to_owned(),
                first,
                last,
            }),
            result: self.result.to_owned(),
            failed: self.failed,
            unconfirmed_write: self.unconfirmed_write.map(str::to_owned),
            shows_file: self.shows_file.map(str::to_owned),
            resent: self.resent,
            tool_change: self.tool_change,
            commit: self.commit,
            start_ms: self.start_ms,
            end_ms: self.end_ms,
        }
    }
}

/// What a call saw, for `repeat`: its output hash where it has one, otherwise its status and
/// exit code. Two calls with the same identity and result made no progress between them.
/// Empty when `repeat` does not apply.
#[inline]
fn call_result(call: &CallRef<'_>, config: &DetectConfig, out: &mut String) {
    out.clear();
    if !config.applies(Rule::Repeat) {
        return;
    }
    if let Some(hash) = call.output_hash {
        out.push('#');
        out.push_str(hash);
        return;
    }
    out.push_str(if call.error { "error" } else { "completed" });
    if let Some(exit) = &call.meta.exit {
        let _ = write!(out, " {exit}");
    }
}

/// See [`CallFacts::blind`].
fn is_blind(result: &str, failed: bool) -> bool {
    !failed && !result.starts_with('#')
}

impl CallFacts {
    /// A success known only by its status (`precise`, rule `repeat`): no output hash was
    /// recorded, so its result says that the call ran, not what it saw. Two such calls of one
    /// identity are no evidence of seeing the same thing: they echo nothing, and only a run of
    /// the same call in a row (Gemini CLI's and Cline's five identical calls) counts them, not a
    /// block of two or three calls in turn (a peer that judges calls alone calls that work).
    pub fn blind(&self) -> bool {
        is_blind(&self.result, self.failed)
    }

    /// The facts, borrowed.
    pub(crate) fn as_facts(&self) -> Facts<'_> {
        Facts {
            identity: &self.identity,
            target: &self.target,
            landed: self.landed,
            write: self.write,
            read: self
                .read
                .as_ref()
                .map(|r| (r.path.as_str(), r.lines, r.file_lines)),
            wait: self.wait,
            view: self
                .view
                .as_ref()
                .map(|v| (v.path.as_str(), v.first, v.last)),
            result: &self.result,
            failed: self.failed,
            unconfirmed_write: self.unconfirmed_write.as_deref(),
            shows_file: self.shows_file.as_deref(),
            resent: self.resent,
            tool_change: self.tool_change,
            commit: self.commit,
            start_ms: self.start_ms,
            end_ms: self.end_ms,
        }
    }

    /// The facts of a call, or `None` when the call does not count (pending, running, unknown).
    pub fn of(call: &Call, ctx: CallContext<'_>, config: &DetectConfig) -> Option<Self> {
        let input = Json::of(&call.input);
        let call = CallRef::of(call, &input)?;
        Some(facts(&call, ctx.into(), config, &mut Scratch::default()).to_owned())
    }
}

/// The facts of a counted call ([`CallFacts::of`]), written into `scratch`.
pub(crate) fn facts<'s>(
    call: &CallRef<'_>,
    ctx: Context<'_>,
    config: &DetectConfig,
    scratch: &'s mut Scratch,
) -> Facts<'s> {
    let tool = call.tool;
    let str_input = |key: &str| call.input.get(key).and_then(Json::as_str);
    let command = (tool == "bash").then(|| str_input("command")).flatten();
    let normalized = identity_into(call, command, &mut scratch.command, &mut scratch.identity);
    // A reader's file, resolved once (its target, its read and its view name it).
    let read_path = config
        .is_reader(tool)
        .then(|| str_input("filePath"))
        .flatten();
    if let Some(path) = read_path {
        resolve_path_into(ctx.directory, path, &mut scratch.read_path);
    }
    let read_file = read_path.map(|path| (path, scratch.read_path.as_str()));
    let mut shape = write_target(
        call,
        config,
        read_file,
        normalized,
        &scratch.identity,
        &mut scratch.target,
    );
    let landing = landing_of(
        call,
        command,
        normalized,
        ctx,
        config,
        &mut scratch.written_path,
    );
    let read = read_path.and_then(|_| read_facts(call, ctx, &scratch.read_path));
    let resolved_read = read_path.map(|_| scratch.read_path.as_str());
    let (shows_file, view) = shown_lines(
        call,
        ctx,
        config,
        shape.view.take(),
        resolved_read,
        &mut scratch.view_path,
    );
    // A read of known lines is its own target, as a bash view is (paging is no loop).
    if read_path.is_some()
        && config.applies(Rule::PathTargets)
        && let Some((first, last)) = view
    {
        shell::push_line_range(&mut scratch.target, first, last);
    }
    let shown_path = if read_path.is_some() {
        scratch.read_path.as_str()
    } else {
        scratch.view_path.as_str()
    };
    call_result(call, config, &mut scratch.result);
    Facts {
        identity: &scratch.identity,
        target: &scratch.target,
        landed: landing.landed,
        write: landing.write,
        read: read.map(|(lines, file_lines)| (scratch.read_path.as_str(), lines, file_lines)),
        wait: (shape.wait || config.is_poll(tool)) && config.applies(Rule::Waits),
        view: view.map(|(first, last)| (shown_path, first, last)),
        result: &scratch.result,
        failed: failed(call, config),
        unconfirmed_write: landing
            .unconfirmed_write
            .then_some(scratch.written_path.as_str()),
        shows_file: shows_file.then_some(shown_path),
        resent: false,
        tool_change: landing.tool_change,
        commit: landing.commit,
        start_ms: call.start_ms,
        end_ms: call.end_ms,
    }
}

/// A call's identity written into `identity`; a bash `command`'s normal form, written into
/// `command_buf`, is returned for the matchers that read the command.
#[inline]
fn identity_into<'s>(
    call: &CallRef<'_>,
    command: Option<&str>,
    command_buf: &'s mut String,
    identity: &mut String,
) -> Option<&'s str> {
    let normalized = command.map(|c| {
        normalize_bash_into(c, command_buf);
        command_buf.as_str()
    });
    identity.clear();
    write_identity(call.tool, call.input, normalized, identity);
    normalized
}

/// Whether a call failed: status `error`, or a non-zero exit (`false` when `repeat` is off).
#[inline]
fn failed(call: &CallRef<'_>, config: &DetectConfig) -> bool {
    config.applies(Rule::Repeat)
        && (call.error || call.meta.exit_code().is_some_and(|code| code != 0))
}

/// Whether a call shows a file whose content a later view can compare (for `output_landings`),
/// and the lines of it shown when `reread` applies: a bash viewer's (`bash_view`, its file
/// resolved into `view_path`) or a reader's (`read_path`, resolved).
fn shown_lines(
    call: &CallRef<'_>,
    ctx: Context<'_>,
    config: &DetectConfig,
    bash_view: Option<(String, Option<(u64, u64)>)>,
    read_path: Option<&str>,
    view_path: &mut String,
) -> (bool, Option<(u64, u64)>) {
    let output_landings = config.applies(Rule::OutputLandings);
    let rereads = config.applies(Rule::Rereads);
    // The file a bash viewer shows, resolved when a rule needs it.
    if (output_landings || rereads)
        && let Some((file, _)) = &bash_view
    {
        resolve_path_into(ctx.directory, file, view_path);
    }
    let shows_file = output_landings && (read_path.is_some() || bash_view.is_some());
    let view = if !rereads {
        None
    } else if let Some((_, lines)) = bash_view {
        view_lines(call, lines, ctx, view_path)
    } else if let Some(path) = read_path {
        read_lines(call, ctx, path)
    } else {
        None
    };
    (shows_file, view)
}

/// Write what a call works on into `target`: a reader's file (`read_file`: as named, resolved),
/// a bash command's target, a search's pattern, else the call itself (its `identity`). For bash,
/// the shape of the command (whether it waits, what it views).
fn write_target(
    call: &CallRef<'_>,
    config: &DetectConfig,
    read_file: Option<(&str, &str)>,
    normalized: Option<&str>,
    identity: &str,
    target: &mut String,
) -> shell::Shape {
    let tool = call.tool;
    target.clear();
    let mut shape = shell::Shape::default();
    if let Some((path, resolved)) = read_file {
        target.push_str(tool);
        target.push(' ');
        if config.applies(Rule::PathTargets) {
            // The file, not its basename: reads of two `mod.rs` are different work.
            target.push_str(resolved);
        } else {
            target.push_str(basename(path));
        }
    } else if let Some(command) = normalized {
        target.push_str("bash ");
        if config.applies(Rule::PathTargets) {
            shape = shell::precise_target(command, target, config.applies(Rule::Rereads));
        } else {
            // The first two words, written straight into the target.
            for (i, word) in command.split_whitespace().take(2).enumerate() {
                if i > 0 {
                    target.push(' ');
                }
                target.push_str(word);
            }
        }
    } else if config.is_search(tool)
        && let Some(pattern) = call.input.get("pattern").and_then(Json::as_str)
    {
        target.push_str(tool);
        target.push(' ');
        target.push_str(shell::first_chars(pattern, PATTERN_TARGET_CHARS));
    } else {
        target.push_str(identity);
    }
    shape
}

/// Whether a call landed, and how.
struct Landing {
    landed: bool,
    /// The landing wrote a file (the same content written again changes nothing).
    write: bool,
    /// A bash write of unknown exit, its file resolved into the `written_path` it was given.
    unconfirmed_write: bool,
    /// See [`CallFacts::tool_change`].
    tool_change: bool,
    /// See [`CallFacts::commit`].
    commit: Option<NonZeroU64>,
}

/// How a call landed: [`is_landed`], a commit its output shows, a bash write that exited 0, or
/// a bash write of no exit status that a later view must confirm (its file into
/// `written_path`).
fn landing_of(
    call: &CallRef<'_>,
    command: Option<&str>,
    normalized: Option<&str>,
    ctx: Context<'_>,
    config: &DetectConfig,
    written_path: &mut String,
) -> Landing {
    let tool = call.tool;
    let (mut landed, tool_change) = is_landed(call, normalized, config);
    let output_landings = config.applies(Rule::OutputLandings);
    // A commit the output shows was made, whatever the exit (`git commit && pytest` failing).
    if !landed
        && output_landings
        && call.meta.committed
        && normalized.is_some_and(|c| c.contains("git"))
    {
        landed = true;
    }
    // Landed by a commit: which one, so that a commit landed already is no new work.
    let commit = call
        .meta
        .commit
        .filter(|_| landed && !tool_change && config.applies(Rule::RepeatedWrites));
    // A write tool's landing is a write too: the same content written again changes nothing.
    let mut write = landed && config.is_write(tool) && config.applies(Rule::RepeatedWrites);
    let mut unconfirmed_write = false;
    if !landed
        && tool == "bash"
        && config.applies(Rule::BashWrites)
        && let Some(command) = command
    {
        let exit = call.meta.exit_code();
        if exit == Some(0) && shell::writes_files(command) {
            landed = true;
            write = true;
        } else if output_landings
            && !call.error
            && exit.is_none()
            && call.meta.exit.as_deref().is_none_or(Value::is_null)
            && let Some(file) = shell::written_file(command)
        {
            // No exit status (an opencode `/shell` call records none): the write lands once a
            // view of its file shows new content (the detector decides).
            resolve_path_into(ctx.directory, &file, written_path);
            unconfirmed_write = true;
        }
    }
    Landing {
        landed,
        write,
        unconfirmed_write,
        tool_change,
        commit: commit.filter(|_| !write),
    }
}

/// Whether a call landed (a real edit, a completed write, or a successful `git commit`), and
/// whether it is a write or edit tool's call. Under `repeated_writes` an edit or write whose
/// metadata says it wrote the file as it was ([`MetaFacts::unchanged`]) is no new work.
fn is_landed(
    call: &CallRef<'_>,
    normalized_command: Option<&str>,
    config: &DetectConfig,
) -> (bool, bool) {
    let tool = call.tool;
    let as_it_was = || call.meta.unchanged && config.applies(Rule::RepeatedWrites);
    if config.is_edit(tool) {
        return (call.meta.changed && !as_it_was(), true);
    }
    if config.is_write(tool) {
        return (!call.error && !as_it_was(), true);
    }
    if let Some(command) = normalized_command {
        return (
            command.contains("git commit") && call.meta.exit_code() == Some(0),
            false,
        );
    }
    (false, false)
}

/// The lines a bash viewer showed of the file at `path` (resolved): those its command names, or
/// the whole file when its length is known.
fn view_lines(
    call: &CallRef<'_>,
    lines: Option<(u64, u64)>,
    ctx: Context<'_>,
    path: &str,
) -> Option<(u64, u64)> {
    let (first, last) = match lines {
        Some(range) => range,
        None => (
            1,
            call.meta
                .total_lines
                .or_else(|| ctx.line_counts.get(path))?,
        ),
    };
    (last >= first).then_some((first, last))
}

/// The lines a reader tool's call showed of the file at `path` (resolved), when it says which:
/// with an `offset` or `limit` (a limit alone from line 1; no limit: the reader's default of
/// 2000 lines, to the end of a file of known length). A whole-file read is no view: it says
/// nothing of which lines the agent looks at (rereading a region of a file read whole is how
/// work goes on).
fn read_lines(call: &CallRef<'_>, ctx: Context<'_>, path: &str) -> Option<(u64, u64)> {
    let known_length = || call.meta.total_lines.or_else(|| ctx.line_counts.get(path));
    let number = |key: &str| call.input.get(key).and_then(Json::as_u64);
    let (offset, limit) = (number("offset"), number("limit"));
    if offset.is_none() && limit.is_none() {
        return None;
    }
    let first = offset.unwrap_or(1).max(1);
    let last = match limit {
        // Saturating: offset and limit come from the model and can be any u64.
        Some(l) => first.saturating_add(l.max(1) - 1),
        None => known_length()?.min(first.saturating_add(DEFAULT_READ_LIMIT - 1)),
    };
    let last = known_length().map_or(last, |n| last.min(n.max(first)));
    (last >= first).then_some((first, last))
}

/// Parse opencode's "total N lines" note from a read's output text.
pub fn total_lines_in_output(output: &str) -> Option<u64> {
    let at = output.rfind("total ")?;
    let rest = &output[at + "total ".len()..];
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    if digits.is_empty() || !rest[digits.len()..].starts_with(" line") {
        return None;
    }
    digits.parse().ok()
}

/// The largest file length (and lines per read) the coverage signal counts.
pub const MAX_FILE_LINES: u64 = 1 << 40;

/// Lines returned by a read: `metadata.lines_read` when known, else
/// `min(limit or 2000, L - offset + 1)`, always capped at the file length `L`. `L` is the read's
/// `metadata.total_lines`, else the session's `line_counts` at `path` (resolved); unknown `L`
/// gives `None`. The answer is `(lines, L)`.
fn read_facts(call: &CallRef<'_>, ctx: Context<'_>, path: &str) -> Option<(u64, u64)> {
    // Capped at 2^40 lines (no real file comes near): the window sums lines over its reads
    // and takes them away again as reads leave it, so each term must keep every sum in range.
    let file_lines = call
        .meta
        .total_lines
        .or_else(|| ctx.line_counts.get(path))?
        .min(MAX_FILE_LINES);
    let input_u64 = |key: &str| {
        call.input.get(key).and_then(|v| {
            v.as_u64().or_else(|| {
                v.as_f64()
                    .filter(|f| *f >= 0.0 && f.is_finite())
                    .map(|f| f as u64)
            })
        })
    };
    let lines = match call.meta.lines_read {
        Some(n) => n,
        None => {
            let offset = input_u64("offset").unwrap_or(1).max(1);
            let limit = input_u64("limit").unwrap_or(DEFAULT_READ_LIMIT);
            limit.min(file_lines.saturating_add(1).saturating_sub(offset))
        }
    };
    Some((lines.min(file_lines), file_lines))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The shortcuts of `resolve_path_into` write what the walk writes.
        #[test]
        fn resolving_writes_what_the_walk_writes(
            directory in proptest::option::of("[/a.]{0,8}"),
            path in "[/a.]{0,8}",
        ) {
            let (mut fast, mut walked) = (String::new(), String::new());
            resolve_path_into(directory.as_deref(), &path, &mut fast);
            walk_path_into(directory.as_deref(), &path, &mut walked);
            prop_assert_eq!(fast, walked);
        }
    }
    use serde_json::json;

    #[test]
    fn identity_sorts_keys_and_drops_bash_noise() {
        let a = call_identity(
            "bash",
            &json!({"command": "cd /p && ls", "description": "list"}),
        );
        let b = call_identity("bash", &json!({"timeout": 5, "command": "ls"}));
        assert_eq!(a, b);
        let c = call_identity("read", &json!({"filePath": "/a", "offset": 1}));
        let d = call_identity("read", &json!({"offset": 1.0, "filePath": "/a"}));
        assert_eq!(c, d);
        assert_ne!(
            c,
            call_identity("read", &json!({"filePath": "/a", "offset": 2}))
        );
        // `description` is noise for bash only.
        assert_ne!(
            call_identity("task", &json!({"description": "a"})),
            call_identity("task", &json!({"description": "b"}))
        );
    }

    #[test]
    fn basenames_and_paths() {
        assert_eq!(basename("/a/b/mod.rs"), "mod.rs");
        assert_eq!(basename("mod.rs"), "mod.rs");
        assert_eq!(basename("/a/b/"), "b");
        assert_eq!(
            resolve_path(Some("/home/u/p"), "src/../lib.rs"),
            "/home/u/p/lib.rs"
        );
        assert_eq!(resolve_path(Some("/home/u/p"), "/etc/./x"), "/etc/x");
        assert_eq!(resolve_path(None, "a/./b"), "a/b");
        // A path taken as it is reads as the walk writes it.
        for path in [
            "/a",
            "/home/u/p/src/lib.rs",
            "/a/b.c/d..e",
            "/x y/é/z~",
            "/a\\b",
            "/a./b",
        ] {
            assert!(is_clean_absolute(path), "{path}");
            let mut out = String::new();
            walk_path_into(Some("/elsewhere"), path, &mut out);
            assert_eq!(out, path);
            assert_eq!(resolve_path(Some("/elsewhere"), path), path);
        }
        for path in [
            "/", "//a", "/a/", "/a//b", "/a/./b", "/a/../b", "/.hidden", "a/b", "",
        ] {
            assert!(!is_clean_absolute(path), "{path}");
        }
    }

    /// Found by `cargo xtask fuzz` (session-file): a read whose offset plus limit passes u64::MAX
    /// panicked (debug) or wrapped into a bogus range (release).
    #[test]
    fn a_read_range_at_the_end_of_u64_saturates() {
        let config = DetectConfig::with_profile(crate::config::Profile::Precise);
        let counts = BTreeMap::new();
        let ctx = CallContext {
            directory: Some("/repo"),
            line_counts: &counts,
        };
        let read = |offset: u64, limit: u64| Call {
            tool: "read".to_owned(),
            input: json!({"filePath": "a.py", "offset": offset, "limit": limit}),
            status: CallStatus::Completed,
            metadata: Value::Null,
            time: None,
            output_hash: None,
        };
        for (offset, limit, first, last) in [
            (u64::MAX, u64::MAX, u64::MAX, u64::MAX),
            (u64::MAX - 1, 5, u64::MAX - 1, u64::MAX),
            (10, 5, 10, 14),
        ] {
            let facts = CallFacts::of(&read(offset, limit), ctx, &config).unwrap();
            let view = facts
                .view
                .expect("a read with offset and limit shows a range");
            assert_eq!((view.first, view.last), (first, last), "{offset} {limit}");
        }
    }

    #[test]
    fn total_lines_note() {
        assert_eq!(
            total_lines_in_output("...\n(End of file - total 212 lines)\n"),
            Some(212)
        );
        assert_eq!(total_lines_in_output("no note"), None);
        assert_eq!(total_lines_in_output("total x lines"), None);
    }
}
