//! Tool outputs: what an adapter keeps of them ([`output_hash`], [`output_shows_commit`]).
//!
//! The detector never sees an output, only its hash ([`crate::Call::output_hash`]), and a call
//! that sees the same output as before made no progress. Outputs carry things that change on
//! every run without meaning a change: process and session ids, UUIDs and long hex ids, times,
//! dates and durations, temporary paths, colour codes, spinners and progress bars. Hashed raw,
//! `still running (session 7f3a, pid 4121)` never equals the next poll's
//! `still running (session 9b2c, pid 4188)`; [`normalize_output`] drops that noise first, so
//! both read `still running (session <id>, pid <id>)`.
//!
//! What stays: everything else, line numbers and counts included (`line 10` and `line 20` of a
//! traceback differ, `41 passed` and `42 passed` differ). The rules are a pure function of the
//! text, line by line, and never panic (`output::tests` is a table of real outputs).

use std::fmt::Write as _;

/// 64-bit FNV-1a of `text`'s bytes as 16 lowercase hex digits: the hash of a text as it is,
/// for a caller that hashes something that is not a tool's output (the generated sets' model of
/// what a call sees). Stable across versions and platforms.
pub fn text_hash(text: &str) -> String {
    let mut hash = Fnv::default();
    hash.push_str(text);
    hash.hex()
}

/// The hash of a tool output kept in [`crate::Call::output_hash`]: [`text_hash`] of the output
/// without its noise ([`normalize_output`]), computed in one pass without a copy. Every adapter
/// hashes outputs with this function, so that calls compare across sources.
///
/// Hashes stored before noise was dropped (session files exported earlier, detector snapshots)
/// still compare among themselves; a stored hash and a new one of the same output differ once,
/// which reads as one new output.
pub fn output_hash(output: &str) -> String {
    let mut hash = Fnv::default();
    normalize_into(output, &mut hash);
    hash.hex()
}

/// `output` without what changes from run to run without meaning a change (see the module):
/// colour codes and what a carriage return overwrote are removed; spinner and progress lines
/// (braille spinners, block and bar progress, cargo's `Compiling …` status lines) are dropped;
/// UUIDs become `<uuid>`, long hex ids (7+ digits, as git's short hashes) `<hex>`, `0x`
/// addresses `<addr>`, numbers of 10+ digits (epoch times) `<n>`, dates `<date>`, clock times
/// `<time>`, durations (`0.53s`, `12 ms`, `1m3s`, go's `(cached)`) `<dur>`, the id after
/// `pid`, `session`, `process`, `job`, `thread`, `task` or `request` `<id>`, temporary paths
/// (`/tmp/…`, `/var/folders/…`, `tmpa1b2c3`) `<tmp>`; line ends are trimmed and trailing
/// empty lines dropped.
pub fn normalize_output(output: &str) -> String {
    let mut out = String::with_capacity(output.len());
    normalize_into(output, &mut out);
    out
}

/// Whether a bash output shows a commit that was made ([`output_commit`]).
pub fn output_shows_commit(output: &str) -> bool {
    output_commit(output).is_some()
}

/// The commit a bash output shows was made, as its hash: the first line as `git commit` (also
/// `cherry-pick`, `merge`, `revert`, `rebase`) prints for each commit, `[BRANCH HASH] subject`,
/// `[BRANCH (root-commit) HASH] subject` or `[detached HEAD HASH] subject`, the hash 7-40 hex
/// digits. An adapter records it as `metadata.committed` ([`COMMITTED_KEY`]): a commit whose
/// hash landed already in the session is no new work.
pub fn output_commit(output: &str) -> Option<&str> {
    output.lines().find_map(|line| {
        let inner = line.trim_start().strip_prefix('[')?;
        let (head, subject) = inner.split_once(']')?;
        let mut words = head.split(' ').filter(|w| !w.is_empty());
        let hash = words.next_back()?;
        (words.next().is_some()
            && subject.starts_with(' ')
            && (7..=40).contains(&hash.len())
            && hash.bytes().all(|b| b.is_ascii_hexdigit()))
        .then_some(hash)
    })
}

/// The metadata key under which an adapter records that a bash call's output showed a commit
/// ([`output_commit`]): `"committed": "HASH"` (or `true` where the hash is not kept).
pub const COMMITTED_KEY: &str = "committed";

/// Where normalised text goes: a string, or straight into a hash.
trait Sink {
    fn push_str(&mut self, s: &str);
}

impl Sink for String {
    fn push_str(&mut self, s: &str) {
        String::push_str(self, s);
    }
}

/// 64-bit FNV-1a.
#[derive(Clone, Copy)]
struct Fnv(u64);

impl Default for Fnv {
    fn default() -> Self {
        Self(0xcbf2_9ce4_8422_2325)
    }
}

impl Fnv {
    fn hex(self) -> String {
        let mut s = String::with_capacity(16);
        let _ = write!(s, "{:016x}", self.0);
        s
    }
}

impl Sink for Fnv {
    fn push_str(&mut self, s: &str) {
        for byte in s.as_bytes() {
            self.0 ^= u64::from(*byte);
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
}

fn normalize_into(output: &str, sink: &mut impl Sink) {
    let mut line_buf = String::new();
    // Empty lines are held back until a non-empty one follows (trailing ones are dropped).
    let mut held_newlines = 0usize;
    let mut first = true;
    for raw in output.split('\n') {
        let line = visible(raw, &mut line_buf);
        if is_progress(line) {
            continue;
        }
        let line = line.trim_end();
        if line.is_empty() {
            held_newlines += 1;
            continue;
        }
        if !first {
            held_newlines += 1;
        }
        for _ in 0..held_newlines {
            sink.push_str("\n");
        }
        held_newlines = 0;
        first = false;
        scrub_line(line, sink);
    }
}

/// What a terminal shows of a line: the text after its last carriage return (a trailing one,
/// of CRLF, aside), colour and cursor codes removed. Borrowed when there is nothing to remove.
fn visible<'a>(raw: &'a str, buf: &'a mut String) -> &'a str {
    let raw = raw.strip_suffix('\r').unwrap_or(raw);
    let raw = match raw.rfind('\r') {
        Some(at) => &raw[at + 1..],
        None => raw,
    };
    if !raw.contains('\u{1b}') {
        return raw;
    }
    buf.clear();
    let mut chars = raw.char_indices().peekable();
    while let Some((_, c)) = chars.next() {
        if c != '\u{1b}' {
            buf.push(c);
            continue;
        }
        match chars.peek().map(|(_, c)| *c) {
            // CSI: parameters and intermediates, then one final byte in @..~.
            Some('[') => {
                chars.next();
                for (_, c) in chars.by_ref() {
                    if ('@'..='~').contains(&c) {
                        break;
                    }
                }
            }
            // OSC: up to BEL or ESC \.
            Some(']') => {
                chars.next();
                while let Some((_, c)) = chars.next() {
                    if c == '\u{7}' {
                        break;
                    }
                    if c == '\u{1b}' {
                        chars.next();
                        break;
                    }
                }
            }
            // A two-character escape (ESC 7, ESC c, ...).
            Some(_) => {
                chars.next();
            }
            None => {}
        }
    }
    buf.as_str()
}

/// Cargo's status verbs, right-aligned after leading spaces.
const CARGO_STATUS: &[&str] = &[
    "Compiling",
    "Checking",
    "Downloading",
    "Downloaded",
    "Updating",
    "Locking",
    "Blocking",
    "Fresh",
    "Documenting",
    "Packaging",
    "Verifying",
    "Archiving",
    "Installing",
    "Building",
];

/// A spinner or progress line: a braille spinner, block or line-drawing bar characters, a
/// bracketed bar (`[=====>    ]`, `[####....]`), or a cargo status line (`   Compiling x v1.0`).
fn is_progress(line: &str) -> bool {
    if line.starts_with(' ')
        && let Some(verb) = line.trim_start().split(' ').next()
        && CARGO_STATUS.contains(&verb)
    {
        return true;
    }
    if !line.is_ascii()
        && line
            .chars()
            .any(|c| matches!(c, '\u{2800}'..='\u{28ff}' | '\u{2580}'..='\u{259f}' | '\u{2501}'))
    {
        return true;
    }
    has_bar(line)
}

/// `[` then at least 5 characters of `= # > - . * ~ space`, two of them `=` or `#`, then `]`.
fn has_bar(line: &str) -> bool {
    let bytes = line.as_bytes();
    let mut i = 0;
    while let Some(open) = bytes[i..].iter().position(|b| *b == b'[') {
        let start = i + open + 1;
        let mut j = start;
        let mut fill = 0;
        while j < bytes.len()
            && matches!(
                bytes[j],
                b'=' | b'#' | b'>' | b'-' | b'.' | b'*' | b'~' | b' '
            )
        {
            fill += usize::from(matches!(bytes[j], b'=' | b'#'));
            j += 1;
        }
        if j < bytes.len() && bytes[j] == b']' && j - start >= 5 && fill >= 2 {
            return true;
        }
        i = start;
    }
    false
}

/// Words after which an id follows (case-insensitive; `_id` / `id` suffixes too).
const ID_WORDS: &[&str] = &[
    "pid",
    "ppid",
    "tid",
    "session",
    "sessionid",
    "session_id",
    "sess",
    "process",
    "job",
    "jobid",
    "job_id",
    "thread",
    "task",
    "taskid",
    "task_id",
    "request",
    "requestid",
    "request_id",
    "run_id",
    "runid",
    "trace_id",
    "traceid",
    "container",
    "shell_id",
    "bash_id",
];

/// Duration units, and whether they may follow a whole number after a space (single letters
/// only after a fraction).
const UNITS: &[(&str, bool)] = &[
    ("nanoseconds", true),
    ("microseconds", true),
    ("milliseconds", true),
    ("seconds", true),
    ("second", true),
    ("minutes", true),
    ("minute", true),
    ("hours", true),
    ("hour", true),
    ("secs", true),
    ("sec", true),
    ("mins", true),
    ("min", true),
    ("hrs", true),
    ("hr", true),
    ("ms", true),
    ("µs", true),
    ("us", true),
    ("ns", true),
    ("s", false),
    ("m", false),
    ("h", false),
];

const TEMP_ROOTS: &[&str] = &[
    "/tmp/",
    "/var/tmp/",
    "/var/folders/",
    "/private/var/folders/",
    "/private/tmp/",
    "/dev/shm/",
];

fn is_word_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// One visible line with its noise replaced, written to `sink`.
fn scrub_line(line: &str, sink: &mut impl Sink) {
    let bytes = line.as_bytes();
    let mut i = 0;
    // Text copied as it is runs from `plain` to `i`.
    let mut plain = 0;
    let mut prev: u8 = b' ';
    while i < bytes.len() {
        let b = bytes[i];
        let boundary = !is_word_byte(prev) && prev != b'.';
        let found = if boundary {
            match_token(line, i, prev)
        } else {
            None
        };
        match found {
            Some((len, replacement)) => {
                sink.push_str(&line[plain..i]);
                sink.push_str(replacement);
                i += len;
                plain = i;
                prev = bytes[i - 1];
            }
            None => {
                // Skip to the end of this word (or this one byte), keeping char boundaries.
                let mut j = i + 1;
                if is_word_byte(b) {
                    while j < bytes.len() && is_word_byte(bytes[j]) {
                        j += 1;
                    }
                }
                while j < bytes.len() && !line.is_char_boundary(j) {
                    j += 1;
                }
                // A keyword (`pid`, `session`) makes the id after it noise.
                if is_word_byte(b)
                    && let Some(len) = id_after_keyword(line, i, j)
                {
                    sink.push_str(&line[plain..len.0]);
                    sink.push_str("<id>");
                    i = len.1;
                    plain = i;
                    prev = bytes[i - 1];
                    continue;
                }
                prev = bytes[j - 1];
                i = j;
            }
        }
    }
    sink.push_str(&line[plain..]);
}

/// A noise token starting at `at` (a word boundary; `prev` is the byte before): its length in
/// bytes and its replacement.
fn match_token(line: &str, at: usize, prev: u8) -> Option<(usize, &'static str)> {
    let rest = &line[at..];
    let bytes = rest.as_bytes();
    let first = *bytes.first()?;
    if first == b'/' {
        let root = TEMP_ROOTS.iter().find(|r| rest.starts_with(**r))?;
        let len = rest[root.len()..]
            .find(|c: char| c.is_whitespace() || "'\"`)]},:;<>".contains(c))
            .map_or(rest.len(), |n| n + root.len());
        return Some((len, "<tmp>"));
    }
    if rest.starts_with("(cached)") {
        return Some((8, "<dur>"));
    }
    if !first.is_ascii_alphanumeric() {
        return None;
    }
    let word_len = bytes
        .iter()
        .take_while(|b| b.is_ascii_alphanumeric())
        .count();
    let word = &rest[..word_len];
    if let Some(len) = uuid_len(bytes) {
        return Some((len, "<uuid>"));
    }
    if first.is_ascii_digit() {
        if let Some(len) = date_len(bytes) {
            return Some((len, "<date>"));
        }
        if prev != b':'
            && let Some(len) = time_len(bytes)
        {
            return Some((len, "<time>"));
        }
        if let Some(len) = duration_len(rest) {
            return Some((len, "<dur>"));
        }
    }
    if let Some(hex) = word.strip_prefix("0x")
        && hex.len() >= 4
        && hex.bytes().all(|b| b.is_ascii_hexdigit())
    {
        return Some((word_len, "<addr>"));
    }
    if word_len >= 7 && is_hex_id(word) {
        return Some((word_len, "<hex>"));
    }
    if word_len >= 10 && word.bytes().all(|b| b.is_ascii_digit()) {
        return Some((word_len, "<n>"));
    }
    if word_len >= 8 && word.starts_with("tmp") && word[3..].bytes().any(|b| b.is_ascii_digit()) {
        return Some((word_len, "<tmp>"));
    }
    None
}

/// Hex digits only, with a digit and a letter (`abc1234`, `1a2b3c4d5e6f7a8b`), of one case.
fn is_hex_id(word: &str) -> bool {
    let (mut digit, mut lower, mut upper) = (false, false, false);
    for b in word.bytes() {
        match b {
            b'0'..=b'9' => digit = true,
            b'a'..=b'f' => lower = true,
            b'A'..=b'F' => upper = true,
            _ => return false,
        }
    }
    digit && (lower != upper)
}

/// 8-4-4-4-12 hex digits, not followed by a word character.
fn uuid_len(bytes: &[u8]) -> Option<usize> {
    const GROUPS: [usize; 5] = [8, 4, 4, 4, 12];
    let mut i = 0;
    for (g, n) in GROUPS.iter().enumerate() {
        if g > 0 {
            if bytes.get(i) != Some(&b'-') {
                return None;
            }
            i += 1;
        }
        let run = bytes[i.min(bytes.len())..]
            .iter()
            .take_while(|b| b.is_ascii_hexdigit())
            .count();
        if run != *n {
            return None;
        }
        i += n;
    }
    (!bytes.get(i).copied().is_some_and(is_word_byte)).then_some(i)
}

fn digits(bytes: &[u8], from: usize) -> usize {
    bytes[from.min(bytes.len())..]
        .iter()
        .take_while(|b| b.is_ascii_digit())
        .count()
}

/// `YYYY-MM-DD` (or `/`), with what follows of a timestamp: `T` / space / `_` and a clock time
/// (`:` or `_` separated, fractions), `Z` or an offset.
fn date_len(bytes: &[u8]) -> Option<usize> {
    if digits(bytes, 0) != 4 {
        return None;
    }
    let sep = *bytes.get(4)?;
    if !(sep == b'-' || sep == b'/') || digits(bytes, 5) != 2 || bytes.get(7) != Some(&sep) {
        return None;
    }
    if digits(bytes, 8) != 2 {
        return None;
    }
    let mut i = 10;
    if matches!(bytes.get(i), Some(b'T' | b' ' | b'_')) && digits(bytes, i + 1) == 2 {
        let mut j = i + 1;
        while j < bytes.len()
            && (bytes[j].is_ascii_digit() || matches!(bytes[j], b':' | b'_' | b'.' | b','))
        {
            j += 1;
        }
        if j - i >= 6 {
            i = j;
            if matches!(bytes.get(i), Some(b'Z')) {
                i += 1;
            } else if matches!(bytes.get(i), Some(b'+' | b'-'))
                && digits(bytes, i + 1) == 2
                && bytes.get(i + 3) == Some(&b':')
                && digits(bytes, i + 4) == 2
            {
                i += 6;
            }
        }
    }
    (!bytes.get(i).copied().is_some_and(is_word_byte)).then_some(i)
}

/// `H:MM:SS` or `HH:MM:SS`, with a fraction; not followed by `:` and a digit.
fn time_len(bytes: &[u8]) -> Option<usize> {
    let h = digits(bytes, 0);
    if !(1..=2).contains(&h) || bytes.get(h) != Some(&b':') || digits(bytes, h + 1) != 2 {
        return None;
    }
    let mut i = h + 3;
    if bytes.get(i) != Some(&b':') || digits(bytes, i + 1) != 2 {
        return None;
    }
    i += 3;
    if matches!(bytes.get(i), Some(b'.' | b',')) && digits(bytes, i + 1) > 0 {
        i += 1 + digits(bytes, i + 1);
    }
    if bytes.get(i) == Some(&b':') || bytes.get(i).copied().is_some_and(is_word_byte) {
        return None;
    }
    Some(i)
}

/// One or more `NUMBER UNIT` in a row (`0.53s`, `12 ms`, `1m3.5s`, `2 minutes`).
fn duration_len(rest: &str) -> Option<usize> {
    let bytes = rest.as_bytes();
    let mut i = 0;
    let mut any = false;
    loop {
        let int = digits(bytes, i);
        if int == 0 {
            break;
        }
        let mut j = i + int;
        let fraction = bytes.get(j) == Some(&b'.') && digits(bytes, j + 1) > 0;
        if fraction {
            j += 1 + digits(bytes, j + 1);
        }
        let spaced = bytes.get(j) == Some(&b' ');
        let k = j + usize::from(spaced);
        // `1.842 s` (jest) is a duration; `3 s` too rarely to tell from a letter.
        let Some(unit) = UNITS.iter().find(|(u, may_space)| {
            (!spaced || *may_space || fraction)
                && rest[k.min(rest.len())..].starts_with(u)
                && !rest[k + u.len()..]
                    .bytes()
                    .next()
                    .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        }) else {
            break;
        };
        i = k + unit.0.len();
        any = true;
    }
    (any && !bytes.get(i).copied().is_some_and(is_word_byte)).then_some(i)
}

/// When the word `line[start..end]` is one of [`ID_WORDS`] (or ends in `_id` / `Id`) and is
/// followed by up to three separators (space, `:`, `=`, `#`, quotes) and a token with a digit
/// in it: the span of that token.
fn id_after_keyword(line: &str, start: usize, end: usize) -> Option<(usize, usize)> {
    let word = &line[start..end];
    let known = ID_WORDS.iter().any(|w| w.eq_ignore_ascii_case(word))
        || (word.len() > 3 && (word.ends_with("_id") || word.ends_with("Id")));
    if !known {
        return None;
    }
    let bytes = line.as_bytes();
    let mut i = end;
    let mut seps = 0;
    while i < bytes.len()
        && matches!(bytes[i], b' ' | b':' | b'=' | b'#' | b'"' | b'\'')
        && seps < 3
    {
        i += 1;
        seps += 1;
    }
    if seps == 0 {
        return None;
    }
    let token_start = i;
    while i < bytes.len()
        && (bytes[i].is_ascii_alphanumeric() || matches!(bytes[i], b'_' | b'-' | b'.'))
    {
        i += 1;
    }
    // A trailing dot ends a sentence, not the id.
    while i > token_start && bytes[i - 1] == b'.' {
        i -= 1;
    }
    let token = &line[token_start..i];
    token
        .bytes()
        .any(|b| b.is_ascii_digit())
        .then_some((token_start, i))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each row: two outputs of the same command, and whether they are the same once their noise
    /// is dropped (`true`: the difference is noise; `false`: it means something).
    #[test]
    fn real_outputs_what_is_and_is_not_noise() {
        let rows: &[(&str, &str, &str, bool)] = &[
            (
                "pytest, the same failure, another duration",
                "F.\n=================================== FAILURES ===================================\n___ test_total ___\n\n    def test_total():\n>       assert total([1, 2]) == 4\nE       assert 3 == 4\n\ntests/test_cart.py:12: AssertionError\n=========================== short test summary info ============================\nFAILED tests/test_cart.py::test_total - assert 3 == 4\n========================= 1 failed, 1 passed in 0.53s ==========================\n",
                "F.\n=================================== FAILURES ===================================\n___ test_total ___\n\n    def test_total():\n>       assert total([1, 2]) == 4\nE       assert 3 == 4\n\ntests/test_cart.py:12: AssertionError\n=========================== short test summary info ============================\nFAILED tests/test_cart.py::test_total - assert 3 == 4\n========================= 1 failed, 1 passed in 0.61s ==========================\n",
                true,
            ),
            (
                "pytest, another failure",
                "FAILED tests/test_cart.py::test_total - assert 3 == 4\n1 failed, 1 passed in 0.53s\n",
                "FAILED tests/test_cart.py::test_total - assert 5 == 4\n1 failed, 1 passed in 0.53s\n",
                false,
            ),
            (
                "pytest, fixed: another count",
                "1 failed, 1 passed in 0.53s",
                "2 passed in 0.48s",
                false,
            ),
            (
                "pytest, tmp_path of each run",
                "E   FileNotFoundError: [Errno 2] No such file or directory: '/tmp/pytest-of-dev/pytest-41/test_load0/config.toml'\n1 failed in 0.12s",
                "E   FileNotFoundError: [Errno 2] No such file or directory: '/tmp/pytest-of-dev/pytest-42/test_load0/config.toml'\n1 failed in 0.10s",
                true,
            ),
            (
                "pytest, another line of the traceback",
                "  File \"/repo/src/cart.py\", line 10, in total\nTypeError: unsupported operand",
                "  File \"/repo/src/cart.py\", line 20, in total\nTypeError: unsupported operand",
                false,
            ),
            (
                "cargo test, a rebuild and another binary hash",
                "   Compiling ledger v0.1.0 (/work/ledger)\n    Finished `test` profile [unoptimized + debuginfo] target(s) in 2.31s\n     Running unittests src/lib.rs (target/debug/deps/ledger-1a2b3c4d5e6f7a8b)\n\nrunning 42 tests\ntest balance::tests::rounds ... FAILED\n\ntest result: FAILED. 41 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.02s\n",
                "    Finished `test` profile [unoptimized + debuginfo] target(s) in 0.09s\n     Running unittests src/lib.rs (target/debug/deps/ledger-9f8e7d6c5b4a3921)\n\nrunning 42 tests\ntest balance::tests::rounds ... FAILED\n\ntest result: FAILED. 41 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.03s\n",
                true,
            ),
            (
                "cargo test, one more test passes",
                "test result: FAILED. 41 passed; 1 failed; 0 ignored; finished in 0.02s",
                "test result: ok. 42 passed; 0 failed; 0 ignored; finished in 0.02s",
                false,
            ),
            (
                "cargo build, a progress bar",
                "    Building [=======>                 ] 112/413: serde, syn\n   Compiling serde v1.0.219\nerror[E0308]: mismatched types\n --> src/main.rs:4:5",
                "    Building [==================>      ] 301/413: tokio\nerror[E0308]: mismatched types\n --> src/main.rs:4:5",
                true,
            ),
            (
                "cargo build, the error moved",
                "error[E0308]: mismatched types\n --> src/main.rs:4:5",
                "error[E0308]: mismatched types\n --> src/main.rs:14:5",
                false,
            ),
            (
                "npm test, a spinner and a log file with a timestamp",
                "\u{1b}[2K\u{1b}[1G⠙ running tests\n\u{1b}[31mFAIL\u{1b}[39m src/cart.test.ts\n  ● total › adds\nTests:       1 failed, 3 passed, 4 total\nTime:        1.842 s\nnpm ERR! A complete log of this run can be found in: /root/.npm/_logs/2026-12-05T14_03_11_123Z-debug-0.log",
                "⠹ running tests\nFAIL src/cart.test.ts\n  ● total › adds\nTests:       1 failed, 3 passed, 4 total\nTime:        2.017 s\nnpm ERR! A complete log of this run can be found in: /root/.npm/_logs/2026-12-05T14_04_52_907Z-debug-0.log",
                true,
            ),
            (
                "npm install, another count",
                "added 120 packages, and audited 121 packages in 3s",
                "added 121 packages, and audited 122 packages in 4s",
                false,
            ),
            (
                "go test, run and cached",
                "--- FAIL: TestParse (0.00s)\n    parse_test.go:18: got 3, want 4\nFAIL\nFAIL\texample.com/calc\t0.012s\nok  \texample.com/calc/util\t0.004s",
                "--- FAIL: TestParse (0.00s)\n    parse_test.go:18: got 3, want 4\nFAIL\nFAIL\texample.com/calc\t0.009s\nok  \texample.com/calc/util\t(cached)",
                true,
            ),
            (
                "go test, another value",
                "    parse_test.go:18: got 3, want 4",
                "    parse_test.go:18: got 4, want 4",
                false,
            ),
            (
                "git log, other dates",
                "commit 3f2a9c1d8e7b6a5f4e3d2c1b0a9f8e7d6c5b4a39\nAuthor: Dev <dev@example.com>\nDate:   Fri Dec 5 14:03:11 2026 +0000\n\n    Fix rounding",
                "commit 3f2a9c1d8e7b6a5f4e3d2c1b0a9f8e7d6c5b4a39\nAuthor: Dev <dev@example.com>\nDate:   Fri Dec 5 14:09:47 2026 +0000\n\n    Fix rounding",
                true,
            ),
            (
                "git status, another file",
                "On branch main\nChanges not staged for commit:\n\tmodified:   src/cart.py\n",
                "On branch main\nChanges not staged for commit:\n\tmodified:   src/tax.py\n",
                false,
            ),
            (
                "git commit, two commits of one message",
                "[main 4e1f0a2] Fix rounding\n 1 file changed, 2 insertions(+), 1 deletion(-)",
                "[main 9b7c3d1] Fix rounding\n 1 file changed, 2 insertions(+), 1 deletion(-)",
                true,
            ),
            (
                "a polled background job, new ids, no new output",
                "Command still running (session 7f3a, pid 4121)\n(no new output)",
                "Command still running (session 9b2c, pid 4188)\n(no new output)",
                true,
            ),
            (
                "a polled background job, new output",
                "Command still running (session 7f3a, pid 4121)\ntest 12/40 ok",
                "Command still running (session 7f3a, pid 4121)\ntest 13/40 ok",
                false,
            ),
            (
                "a polled background job, done",
                "Process running (pid=4121), uptime 00:01:12",
                "Process exited with code 1 (pid=4121)",
                false,
            ),
            (
                "a python traceback, object addresses and a temp dir",
                "<Cart object at 0x7f3a2b1c9d40> in /var/folders/x1/abc/T/tmpa1b2c3d4/run.py\nid 8c6f2d3e-6a0b-4b7e-9a51-0c2d4e6f8a10",
                "<Cart object at 0x7f99aa01be00> in /var/folders/x1/abc/T/tmpz9y8x7w6/run.py\nid 1d2e3f40-5a6b-4c7d-8e9f-a0b1c2d3e4f5",
                true,
            ),
            (
                "epoch times and a clock",
                "started 1796100000 at 09:14:03.221\n",
                "started 1796100042 at 09:15:44.017\n",
                true,
            ),
            (
                "line ends and trailing blank lines",
                "ok   \r\nall good\n\n\n",
                "ok\nall good",
                true,
            ),
            (
                "a file's lines: numbers are kept",
                "     1\timport os\n     2\tTIMEOUT = 30\n",
                "     1\timport os\n     2\tTIMEOUT = 60\n",
                false,
            ),
            (
                "a carriage-return progress line, then the result",
                "downloading 10%\rdownloading 55%\rdone\n",
                "downloading 20%\rdone\n",
                true,
            ),
        ];
        for (what, a, b, same) in rows {
            let (na, nb) = (normalize_output(a), normalize_output(b));
            assert_eq!(na == nb, *same, "{what}:\n{na}\n---\n{nb}");
            assert_eq!(output_hash(a) == output_hash(b), *same, "{what}");
            // Hashing streams the same text `normalize_output` writes.
            assert_eq!(output_hash(a), text_hash(&na), "{what}");
        }
    }

    #[test]
    fn replacements_read_as_the_docs_say() {
        let rows = [
            (
                "Command still running (session sess-12, pid 1012)",
                "Command still running (session <id>, pid <id>)",
            ),
            ("Ran 3 tests in 0.002s", "Ran 3 tests in <dur>"),
            ("took 12 ms, then 1m3.5s", "took <dur>, then <dur>"),
            ("sessionId: \"a1\" done", "sessionId: \"<id>\" done"),
            (
                "[main (root-commit) abc1234] init",
                "[main (root-commit) <hex>] init",
            ),
            ("2026-12-05T14:03:11.120+01:00 started", "<date> started"),
            ("src/lib.rs:12:30:45", "src/lib.rs:12:30:45"),
            ("v1.0.53s", "v1.0.53s"),
            ("5 passed, 2 failed", "5 passed, 2 failed"),
            ("deadbeef cafe", "deadbeef cafe"),
            ("wrote /tmp/out.log: 3 lines", "wrote <tmp>: 3 lines"),
            ("\u{1b}]0;title\u{7}plain", "plain"),
            ("a\u{1b}[1;31mb\u{1b}[0mc", "abc"),
            ("\u{1b}", ""),
            ("", ""),
        ];
        for (input, want) in rows {
            assert_eq!(normalize_output(input), want, "{input:?}");
        }
    }

    #[test]
    fn commit_lines() {
        for (output, commit) in [
            (
                "[main 4e1f0a2] Fix rounding\n 1 file changed, 2 insertions(+)",
                true,
            ),
            ("[main (root-commit) 4e1f0a2] init\n 3 files changed", true),
            ("[detached HEAD 4e1f0a2d] wip", true),
            (
                "[feature/x-1 abcdef0123456789abcdef0123456789abcdef01] msg",
                true,
            ),
            (
                "On branch main\nnothing to commit, working tree clean",
                false,
            ),
            ("[main] Fix rounding", false),
            ("[ 45%] Building CXX object", false),
            ("error: pathspec 'x' did not match", false),
            ("[main 4e1f0a2]", false),
        ] {
            assert_eq!(output_shows_commit(output), commit, "{output:?}");
        }
        assert_eq!(
            output_commit("Running hooks\n[main 4e1f0a2] x\n[main 9b7c3d1] y"),
            Some("4e1f0a2")
        );
        assert_eq!(output_commit("[main] x"), None);
    }

    #[test]
    fn text_hash_is_fnv1a_64_in_hex() {
        assert_eq!(text_hash(""), "cbf29ce484222325");
        assert_eq!(text_hash("a"), "af63dc4c8601ec8c");
        assert_ne!(text_hash("ok\n"), text_hash("ok"));
        // Outputs without noise hash as their text does.
        assert_eq!(output_hash("a"), text_hash("a"));
        assert_eq!(output_hash("ok\n"), output_hash("ok"));
    }

    #[test]
    fn never_panics_and_is_idempotent_on_odd_text() {
        let odd = [
            "\u{1b}[",
            "\u{1b}]",
            "é\r\u{1b}[31",
            "0x",
            "2026-12-",
            "12:3",
            "1.s",
            "pid",
            "pid ",
            "session: ",
            "/tmp/",
            "[",
            "[=====",
            "tmp12345678é",
            "ä1234567",
            "12:34:56:78",
            "\r\r\n\n",
            "1m",
            "9999999999999999999999",
            "ID: 7",
        ];
        for text in odd {
            let once = normalize_output(text);
            assert_eq!(normalize_output(&once), once, "{text:?}");
        }
    }
}
