//! Shell words for the `precise` profile: what a bash command works on (its target) and whether
//! it writes files (a landing).
//!
//! This is a lexer, not a shell: words with their quotes, the separators `;` `&&` `||` `|` `|&`
//! `&` and newlines, redirections (`>`, `>>`, `2>`, `&>`, `>&2`, `<`, `<<EOF`, `<<<`), and heredoc
//! bodies skipped. It works on `char` boundaries only, so no input can make it panic, and it
//! allocates nothing: every word is a slice of the command.

use crate::bash::{is_assignment, unquoted_stop};
use std::borrow::Cow;

/// One token of a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Tok<'a> {
    /// A word as written (quotes included).
    Word(&'a str),
    /// Output redirection of `fd` (`None`: stdout and stderr, `&>`); the next word is the file.
    RedirectOut(Option<u32>),
    /// Input redirection or here-string (`<`, `<<<`); the next word is its operand.
    RedirectIn,
    /// A heredoc (`<<EOF`, `<<-'EOF'`); the next word is the delimiter.
    Heredoc { strip_tabs: bool },
    /// A descriptor duplication (`2>&1`, `>&2`): no operand.
    Dup,
    /// `;`, `&&`, `||`, `|`, `|&`, `&` or a newline: the end of a simple command.
    Separator,
}

/// Tokens of a command. Newlines separate commands; a heredoc's body (the lines after the line
/// that opened it, up to its delimiter) is skipped.
#[derive(Debug, Clone)]
pub(crate) struct Lexer<'a> {
    text: &'a str,
    pos: usize,
    /// Heredocs opened on the current line, in order: (delimiter, strip leading tabs).
    pending: [Option<(&'a str, bool)>; 4],
    expect_delimiter: Option<bool>,
}

impl<'a> Lexer<'a> {
    pub(crate) fn new(text: &'a str) -> Self {
        Self {
            text,
            pos: 0,
            pending: [None; 4],
            expect_delimiter: None,
        }
    }

    /// Skip the bodies of the heredocs opened on the line that just ended.
    fn skip_heredoc_bodies(&mut self) {
        for slot in 0..self.pending.len() {
            let Some((delimiter, strip_tabs)) = self.pending[slot].take() else {
                continue;
            };
            while self.pos < self.text.len() {
                let rest = &self.text[self.pos..];
                let (line, next) = match rest.find('\n') {
                    Some(i) => (&rest[..i], self.pos + i + 1),
                    None => (rest, self.text.len()),
                };
                self.pos = next;
                let line = line.trim_end_matches('\r');
                let line = if strip_tabs {
                    line.trim_start_matches('\t')
                } else {
                    line
                };
                if line == delimiter {
                    break;
                }
            }
        }
    }
}

/// The delimiter of a heredoc word, quotes removed (`'EOF'` -> `EOF`).
fn heredoc_delimiter(word: &str) -> &str {
    let w = word.trim_matches(|c| c == '\'' || c == '"');
    w.strip_prefix('\\').unwrap_or(w)
}

impl<'a> Iterator for Lexer<'a> {
    type Item = Tok<'a>;

    fn next(&mut self) -> Option<Tok<'a>> {
        loop {
            let rest = &self.text[self.pos..];
            let blank = rest
                .bytes()
                .take_while(|b| matches!(b, b' ' | b'\t' | b'\r'))
                .count();
            self.pos += blank;
            let rest = &rest[blank..];
            let first = rest.chars().next()?;
            // A line continuation is whitespace.
            if rest.starts_with("\\\n") {
                self.pos += 2;
                continue;
            }
            if first == '\n' {
                self.pos += 1;
                self.skip_heredoc_bodies();
                return Some(Tok::Separator);
            }
            if first == '#' {
                // A comment runs to the end of the line (words never start with `#` here).
                self.pos += rest.find('\n').unwrap_or(rest.len());
                continue;
            }
            let tok = self.operator(rest).unwrap_or_else(|| {
                let len = word_len(rest);
                self.pos += len;
                Tok::Word(&rest[..len])
            });
            match (tok, self.expect_delimiter.take()) {
                (Tok::Word(w), Some(strip_tabs)) => {
                    if let Some(slot) = self.pending.iter_mut().find(|s| s.is_none()) {
                        *slot = Some((heredoc_delimiter(w), strip_tabs));
                    }
                }
                (Tok::Heredoc { strip_tabs }, _) => self.expect_delimiter = Some(strip_tabs),
                _ => {}
            }
            return Some(tok);
        }
    }
}

impl<'a> Lexer<'a> {
    /// An operator at the start of `rest` (consumed), or `None` for a word.
    fn operator(&mut self, rest: &'a str) -> Option<Tok<'a>> {
        let bytes = rest.as_bytes();
        let at = |i: usize| bytes.get(i).copied().unwrap_or(0);
        let (len, tok) = match at(0) {
            b';' => (1, Tok::Separator),
            b'&' if at(1) == b'&' => (2, Tok::Separator),
            b'&' if at(1) == b'>' => (if at(2) == b'>' { 3 } else { 2 }, Tok::RedirectOut(None)),
            b'&' => (1, Tok::Separator),
            b'|' if at(1) == b'|' || at(1) == b'&' => (2, Tok::Separator),
            b'|' => (1, Tok::Separator),
            b'<' if at(1) == b'<' && at(2) == b'<' => (3, Tok::RedirectIn),
            b'<' if at(1) == b'<' && at(2) == b'-' => (3, Tok::Heredoc { strip_tabs: true }),
            b'<' if at(1) == b'<' => (2, Tok::Heredoc { strip_tabs: false }),
            b'<' => (1, Tok::RedirectIn),
            b'0'..=b'9' | b'>' => {
                let digits = bytes.iter().take_while(|b| b.is_ascii_digit()).count();
                if at(digits) != b'>' {
                    return None;
                }
                let fd = if digits == 0 {
                    Some(1)
                } else {
                    rest[..digits].parse().ok()
                };
                let mut len = digits + 1;
                if at(len) == b'>' || at(len) == b'|' {
                    len += 1;
                }
                if at(len) == b'&' {
                    // `>&2`, `2>&1`, `>&-`: a duplication, no file.
                    len += 1;
                    len += bytes[len..]
                        .iter()
                        .take_while(|b| b.is_ascii_digit() || **b == b'-')
                        .count();
                    (len, Tok::Dup)
                } else {
                    (len, Tok::RedirectOut(fd))
                }
            }
            _ => return None,
        };
        self.pos += len;
        Some(tok)
    }
}

/// The length in bytes of the word at the start of `text`: up to unquoted whitespace or an
/// operator character. Quotes and backslash escapes are respected; an unclosed quote runs to the
/// end of the text.
fn word_len(text: &str) -> usize {
    let ends = |b: u8| {
        matches!(
            b,
            b' ' | b'\t' | b'\r' | b'\n' | b';' | b'&' | b'|' | b'<' | b'>'
        )
    };
    unquoted_stop(text, ends).map_or(text.len(), |i| i.max(1))
}

/// A word with its quotes and escapes removed.
pub(crate) fn unquote(word: &str) -> Cow<'_, str> {
    if memchr::memchr3(b'\'', b'"', b'\\', word.as_bytes()).is_none() {
        return Cow::Borrowed(word);
    }
    let mut out = String::with_capacity(word.len());
    let mut chars = word.chars();
    let mut quote: Option<char> = None;
    while let Some(ch) = chars.next() {
        match (quote, ch) {
            (None, '\'' | '"') => quote = Some(ch),
            (Some(q), c) if c == q => quote = None,
            (None | Some('"'), '\\') => {
                if let Some(next) = chars.next() {
                    out.push(next);
                }
            }
            (_, c) => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// The words of one simple command: redirections, their files, heredoc delimiters and leading
/// `NAME=value` assignments left out.
#[derive(Debug, Clone)]
pub(crate) struct Simple<'a> {
    tokens: Lexer<'a>,
    done: bool,
    started: bool,
}

impl<'a> Iterator for Simple<'a> {
    type Item = &'a str;

    fn next(&mut self) -> Option<&'a str> {
        if self.done {
            return None;
        }
        loop {
            match self.tokens.next() {
                None | Some(Tok::Separator) => {
                    self.done = true;
                    return None;
                }
                Some(Tok::Word(w)) => {
                    if !self.started && is_assignment(w) {
                        continue;
                    }
                    self.started = true;
                    return Some(w);
                }
                Some(Tok::RedirectOut(_) | Tok::RedirectIn | Tok::Heredoc { .. }) => {
                    // Its operand is no argument of the command.
                    if let Some(Tok::Separator) | None = self.tokens.next() {
                        self.done = true;
                        return None;
                    }
                }
                Some(Tok::Dup) => {}
            }
        }
    }
}

/// The simple commands of a command line, in order.
pub(crate) fn simple_commands(text: &str) -> impl Iterator<Item = Simple<'_>> {
    let mut lexer = Lexer::new(text);
    // The outer lexer moves past a command when the next one is asked for, not before: a
    // caller that stops at the first command does not lex it twice.
    let mut inside = false;
    std::iter::from_fn(move || {
        if std::mem::take(&mut inside) {
            for tok in lexer.by_ref() {
                if tok == Tok::Separator {
                    break;
                }
            }
        }
        // Skip empty commands (`;;`, leading separators).
        loop {
            let start = lexer.clone();
            match lexer.next()? {
                Tok::Separator => continue,
                _ => {
                    inside = true;
                    return Some(Simple {
                        tokens: start,
                        done: false,
                        started: false,
                    });
                }
            }
        }
    })
}

/// Commands that only prepare the shell: skipped when a real command follows.
const SETUP: &[&str] = &[
    "source", ".", "set", "sleep", "export", "true", "clear", "cd", "pushd", "popd", "echo",
    "printf", "ulimit", "shopt", "unset", "trap", "conda", "nvm", "hash",
];

/// Wrappers that run the next word as the command: skip them (with their options, the duration
/// of `timeout`, the value of `nice -n`), and return the command word.
fn skip_wrappers<'a>(words: &mut std::iter::Peekable<Simple<'a>>) -> Option<&'a str> {
    loop {
        let word = words.next()?;
        let name = program_name(word);
        if !matches!(
            name,
            "sudo" | "time" | "nohup" | "command" | "exec" | "stdbuf" | "nice" | "timeout" | "env"
        ) {
            return Some(word);
        }
        let takes_value = name == "timeout" || name == "nice";
        let mut value_taken = false;
        while let Some(next) = words.peek() {
            if next.starts_with('-') || is_assignment(next) {
                let _ = words.next();
            } else if takes_value
                && !value_taken
                && next.chars().next().is_some_and(|c| c.is_ascii_digit())
            {
                value_taken = true;
                let _ = words.next();
            } else {
                break;
            }
        }
    }
}

/// A program's name: its word without quotes and directories (`./venv/bin/python` -> `python`).
fn program_name(word: &str) -> &str {
    let w = word.trim_matches(|c| c == '\'' || c == '"');
    // A short word, searched from its end byte by byte (`rsplit` costs a searcher's set-up); the
    // byte after a `/` starts a character.
    w.bytes()
        .rposition(|b| b == b'/')
        .map_or(w, |i| &w[i + 1..])
}

/// Programs that show a file: one target per file, whatever the lines shown.
const VIEWERS: &[&str] = &["cat", "head", "tail", "nl", "less", "more", "bat", "sed"];
/// Programs that search: keyed by their pattern, like the `grep` tool.
const SEARCHERS: &[&str] = &["grep", "egrep", "fgrep", "rg", "ag", "ack"];
/// Whether `option`, written as a word of its own, takes the next word as its value.
fn takes_value(program: &str, option: &str) -> bool {
    let list: &[&str] = match program {
        "sed" => &["-e", "-f", "-l", "--expression", "--file"],
        "head" | "tail" => &["-n", "-c", "--lines", "--bytes"],
        "nl" => &["-b", "-d", "-f", "-h", "-i", "-l", "-n", "-s", "-v", "-w"],
        "bat" => &["-r", "-l", "--line-range", "--language"],
        _ => &[
            "-A",
            "-B",
            "-C",
            "-m",
            "-e",
            "-f",
            "-g",
            "-t",
            "-T",
            "--include",
            "--exclude",
            "--exclude-dir",
            "--glob",
            "--type",
            "--max-count",
            "--context",
            "--regexp",
        ],
    };
    list.contains(&option)
}

/// Whether a word (quotes removed) names a file or a path: no spaces or shell syntax, not an
/// option, and it has a `/` or ends in an extension (`a.py`, `Cargo.toml`, `tests/a.py::t`).
pub(crate) fn is_path_like(word: &str) -> bool {
    if word.is_empty() || word.starts_with('-') || word == "." || word == ".." {
        return false;
    }
    if !word.chars().all(|c| {
        c.is_alphanumeric()
            || matches!(
                c,
                '_' | '.' | '/' | '-' | '~' | '*' | '?' | '@' | '+' | ':' | ',' | '=' | '[' | ']'
            )
    }) {
        return false;
    }
    if word.contains('/') {
        return true;
    }
    let stem = word.split("::").next().unwrap_or(word);
    match stem.rsplit_once('.') {
        Some((name, ext)) => {
            !name.is_empty()
                && !ext.is_empty()
                && ext.len() <= 8
                && ext.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
                && ext.chars().all(|c| c.is_ascii_alphanumeric())
        }
        None => false,
    }
}

/// How many path operands a target names at most.
const MAX_TARGET_PATHS: usize = 4;
/// How many characters of a search pattern make its target, for a search tool (`grep`, `glob`)
/// as for a search command.
pub(crate) const PATTERN_CHARS: usize = 60;

/// What the `precise` profile learns from a bash command besides its target.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Shape {
    /// `sleep N`, then a look at something (`tail` of a log, `ps`, `ls`, `curl`): a poll.
    pub(crate) wait: bool,
    /// The one file a viewer shows (as written), with the lines it shows when the command says
    /// (`sed -n 40,90p F`, `nl -ba F | sed -n 40,90p`, `head -n 50 F`).
    pub(crate) view: Option<(String, Option<(u64, u64)>)>,
}

/// What a poll looks at after its `sleep`.
const POLL_LOOKS: &[&str] = &[
    "tail",
    "cat",
    "head",
    "grep",
    "rg",
    "ls",
    "ps",
    "pgrep",
    "jobs",
    "wc",
    "curl",
    "stat",
    "du",
    "test",
    "[",
    "squeue",
    "nvidia-smi",
];

/// `A,Bp` or `Ap` (a sed print script) -> the lines.
fn sed_lines(script: &str) -> Option<(u64, u64)> {
    let body = script.strip_suffix('p')?;
    let (a, b) = body.split_once(',').unwrap_or((body, body));
    let (a, b) = (a.parse::<u64>().ok()?, b.parse::<u64>().ok()?);
    (a >= 1 && b >= a).then_some((a, b))
}

/// The lines `head` shows: `-n N`, `-nN`, `-N`, `--lines=N`, or 10.
fn head_lines<'a>(mut args: impl Iterator<Item = &'a str>) -> Option<(u64, u64)> {
    let mut n = 10;
    while let Some(w) = args.next() {
        let w = unquote(w);
        let value = if w == "-n" || w == "--lines" {
            args.next().map(|v| unquote(v).into_owned())
        } else if let Some(v) = w.strip_prefix("--lines=") {
            Some(v.to_owned())
        } else if let Some(v) = w.strip_prefix("-n") {
            Some(v.to_owned())
        } else {
            w.strip_prefix('-').map(str::to_owned)
        };
        if let Some(v) = value {
            n = v.parse().ok()?;
        }
    }
    (n >= 1).then_some((1, n))
}

/// The lines a filter after a pipe shows (`| sed -n 40,90p`, `| head -n 50`), if it names no
/// file of its own.
fn piped_lines(simple: Simple<'_>) -> Option<(u64, u64)> {
    let mut words = simple;
    let program = program_name(words.next()?);
    let args: Vec<&str> = words.collect();
    if args.iter().any(|w| is_path_like(&unquote(w))) && program != "sed" {
        return None;
    }
    match program {
        "sed" => {
            let script = args.iter().find(|w| !w.starts_with('-'))?;
            sed_lines(&unquote(script))
        }
        "head" => head_lines(args.into_iter()),
        _ => None,
    }
}

/// The `precise` target of a normalised bash command (without the `bash ` prefix), written into
/// `out`, and the command's [`Shape`]. The target is made from the first command that is not
/// set-up:
/// - a file viewer (`cat`, `head`, `tail`, `nl`, `less`, `sed` without `-i`): `view FILES`, or
///   with `ranged` and known lines, `view FILE lines A-B`;
/// - a search (`grep`, `rg`, `ag`, `ack`, `git grep`): `PROGRAM PATTERN` (60 characters);
/// - anything else: its first two words, then its other path operands.
pub(crate) fn precise_target(command: &str, out: &mut String, ranged: bool) -> Shape {
    let mut shape = Shape::default();
    let mut commands = simple_commands(command).peekable();
    let (Some(simple), slept) = first_real_command(&mut commands) else {
        return shape;
    };
    let mut words = simple.peekable();
    let Some(program_word) = skip_wrappers(&mut words) else {
        return shape;
    };
    let program = program_name(program_word);
    // A poll: a sleep, then a look; or a sleep alone (waiting between polls of a job).
    shape.wait = (slept && POLL_LOOKS.contains(&program))
        || (program == "sleep"
            && words.clone().next().is_some_and(starts_with_digit)
            && words.clone().nth(1).is_none());
    if program == "git"
        && let Some(sub) = words.clone().find(|w| !w.starts_with('-'))
        && sub == "grep"
    {
        let mut after = words.clone();
        for w in after.by_ref() {
            if w == "grep" {
                break;
            }
        }
        search_target("git grep", after, out);
        return shape;
    }
    if SEARCHERS.contains(&program) {
        search_target(program, words, out);
        return shape;
    }
    if VIEWERS.contains(&program)
        && view_target(program, &words, &mut commands, out, ranged, &mut shape)
    {
        return shape;
    }
    // The first two words as written, then the other path operands.
    out.push_str(program_word);
    if let Some(second) = words.next() {
        out.push(' ');
        out.push_str(second);
    }
    let mut paths = 0;
    for w in words {
        let word = unquote(w);
        if is_path_like(&word) && paths < MAX_TARGET_PATHS {
            out.push(' ');
            out.push_str(&word);
            paths += 1;
        }
    }
    shape
}

/// Whether a word starts with a digit (`sleep 5`, not `sleep $T`).
fn starts_with_digit(word: &str) -> bool {
    word.starts_with(|c: char| c.is_ascii_digit())
}

/// The first command that is not set-up (or the last command, whatever it is), and whether a
/// `sleep N` came before it.
fn first_real_command<'a>(
    commands: &mut std::iter::Peekable<impl Iterator<Item = Simple<'a>>>,
) -> (Option<Simple<'a>>, bool) {
    let mut slept = false;
    while let Some(simple) = commands.next() {
        let mut words = simple.clone();
        let first = words.next().map(program_name);
        let setup = first.is_some_and(|w| SETUP.contains(&w));
        if !setup || commands.peek().is_none() {
            return (Some(simple), slept);
        }
        if first == Some("sleep") && words.next().is_some_and(starts_with_digit) {
            slept = true;
        }
    }
    (None, slept)
}

/// A file viewer's words, read in one pass: its script (sed's), its file operands (at most one
/// more than a target names), and whether it edits in place.
struct ViewerWords<'a> {
    script: Option<&'a str>,
    operands: [&'a str; MAX_TARGET_PATHS + 1],
    files: std::ops::Range<usize>,
    in_place: bool,
}

fn viewer_words<'a>(program: &str, words: impl Iterator<Item = &'a str>) -> ViewerWords<'a> {
    let mut value_of: Option<&str> = None;
    let mut e_script: Option<&str> = None;
    let mut has_script_option = false;
    let mut in_place = false;
    let mut operands: [&str; MAX_TARGET_PATHS + 1] = [""; MAX_TARGET_PATHS + 1];
    let mut n = 0;
    for w in words {
        if let Some(option) = value_of.take() {
            if option == "-e" || option == "--expression" {
                e_script.get_or_insert(w);
            }
            continue;
        }
        if w.starts_with('-') {
            if program == "sed" {
                in_place |= is_in_place_flag(w);
                has_script_option |= matches!(w, "-e" | "-f" | "--expression" | "--file");
            }
            if takes_value(program, w) {
                value_of = Some(w);
            }
            continue;
        }
        if n < operands.len() {
            operands[n] = w;
            n += 1;
        }
    }
    // sed's first operand is its script, unless `-e` / `-f` gave one.
    let (script, files) = if program == "sed" && !has_script_option {
        (operands[..n].first().copied(), n.min(1)..n)
    } else {
        (e_script, 0..n)
    };
    ViewerWords {
        script,
        operands,
        files,
        in_place,
    }
}

/// A viewer's target, `view FILES` (with `lines A-B` when `ranged` and one file's lines are
/// known), written into `out`; the one file it shows goes to `shape.view`. False, writing
/// nothing, when it names no file (or edits in place).
fn view_target<'a>(
    program: &str,
    words: &std::iter::Peekable<Simple<'a>>,
    commands: &mut impl Iterator<Item = Simple<'a>>,
    out: &mut String,
    ranged: bool,
    shape: &mut Shape,
) -> bool {
    let viewer = viewer_words(program, words.clone());
    let mut paths = 0;
    let mut single: Option<Cow<'_, str>> = None;
    if !viewer.in_place {
        for w in &viewer.operands[viewer.files.clone()] {
            let word = unquote(w);
            if is_path_like(&word) && paths < MAX_TARGET_PATHS {
                out.push_str(if paths == 0 { "view " } else { " " });
                out.push_str(&word);
                paths += 1;
                single = Some(word);
            }
        }
    }
    if paths == 0 {
        return false;
    }
    if paths == 1
        && let Some(file) = single
    {
        let lines = match program {
            "sed" => viewer.script.and_then(|s| sed_lines(&unquote(s))),
            "head" => head_lines(words.clone()),
            "nl" | "cat" => commands.next().and_then(piped_lines),
            _ => None,
        };
        if ranged && let Some((a, b)) = lines {
            push_line_range(out, a, b);
        }
        shape.view = Some((file.into_owned(), lines));
    }
    true
}

fn search_target<'a>(program: &str, mut args: impl Iterator<Item = &'a str>, out: &mut String) {
    out.push_str(program);
    let mut pattern: Option<&str> = None;
    while let Some(w) = args.next() {
        if w == "-e" || w == "--regexp" {
            pattern = args.next();
            break;
        }
        if let Some(p) = w.strip_prefix("--regexp=") {
            pattern = Some(p);
            break;
        }
        if w.starts_with('-') {
            if takes_value("grep", w) {
                let _ = args.next();
            }
            continue;
        }
        pattern = Some(w);
        break;
    }
    if let Some(p) = pattern {
        out.push(' ');
        out.push_str(first_chars(&unquote(p), PATTERN_CHARS));
    }
}

/// `-i`, `-i.bak`, `-Ei`, `--in-place`: sed's and perl's in-place flag.
fn is_in_place_flag(word: &str) -> bool {
    let w = unquote(word);
    if w.starts_with("--in-place") {
        return true;
    }
    match w.strip_prefix('-') {
        Some(flags) if !flags.starts_with('-') => {
            // Short flags up to the first non-letter (`-i.bak`).
            flags
                .chars()
                .take_while(char::is_ascii_alphabetic)
                .any(|c| c == 'i')
        }
        _ => false,
    }
}

/// Files under these directories are scratch, not sources: writing them is no landing.
fn is_scratch(path: &str) -> bool {
    path.starts_with("/dev/")
        || path.starts_with("/tmp/")
        || path.starts_with("/proc/")
        || path == "/dev/null"
}

/// The first `n` characters of `text` (all of it when it is shorter), as one slice: pushed
/// whole rather than a character at a time.
pub(crate) fn first_chars(text: &str, n: usize) -> &str {
    text.char_indices()
        .nth(n)
        .map_or(text, |(end, _)| &text[..end])
}

/// ` lines {first}-{last}` at the end of `target`: a view of known lines is its own target
/// (paging is no loop). Written digit by digit: it runs for most reads.
pub(crate) fn push_line_range(target: &mut String, first: u64, last: u64) {
    let mut digits = itoa::Buffer::new();
    target.push_str(" lines ");
    target.push_str(digits.format(first));
    target.push('-');
    target.push_str(digits.format(last));
}

/// Cheap test first: can this command write a file at all? (`sed` and `perl` only with a short
/// flag cluster holding an `i`, or `--in-place`.)
fn may_write(command: &str) -> bool {
    if redirects_into_a_file(command) {
        return true;
    }
    // One pass for every word looked for (nine `contains` were 1.3% of `detect`).
    // Two bytes at a time: the first letters of the words are common, their first two rarely.
    let bytes = command.as_bytes();
    let mut sed_or_perl = false;
    for (i, pair) in bytes.windows(2).enumerate() {
        let is = |word: &[u8]| bytes[i..].starts_with(word);
        match (pair[0], pair[1]) {
            (b't', b'e') if is(b"tee") => return true,
            (b'p', b'a') if is(b"patch") => return true,
            (b'a', b'p') if is(b"apply") => return true,
            (b'm', b'v') | (b'c', b'p') => return true,
            (b'w', b'r') if is(b"write") => return true,
            (b'g', b'i') if is(b"git am") => return true,
            (b's', b'e') if is(b"sed") => sed_or_perl = true,
            (b'p', b'e') if is(b"perl") => sed_or_perl = true,
            _ => {}
        }
    }
    sed_or_perl && edits_in_place(command)
}

/// A word of `command` is `--in-place` or a short flag cluster holding an `i` (`-i`, `-pi`).
fn edits_in_place(command: &str) -> bool {
    command.split_whitespace().any(|w| {
        w.starts_with("--in-place")
            || w.strip_prefix('-').is_some_and(|f| {
                !f.starts_with('-')
                    && f.chars()
                        .take_while(char::is_ascii_alphabetic)
                        .any(|c| c == 'i')
            })
    })
}

/// Cheap test: a `>` that may redirect into a file, not a descriptor duplication (`2>&1`,
/// `>&2`) nor a scratch path (`> /dev/null`, `>/tmp/x`). Never `false` when the lexer would find
/// such a redirection (quotes are not looked at: a `>` inside them only costs the lexer's look).
fn redirects_into_a_file(command: &str) -> bool {
    let bytes = command.as_bytes();
    let mut from = 0;
    while let Some(at) = bytes[from..].iter().position(|b| *b == b'>') {
        let mut i = from + at + 1;
        if bytes.get(i) == Some(&b'>') {
            i += 1;
        }
        from = i;
        if bytes.get(i) == Some(&b'&') {
            continue;
        }
        let target = command[i..].trim_start_matches([' ', '\t']);
        if !["/dev/", "/tmp/", "/proc/"]
            .iter()
            .any(|scratch| target.starts_with(scratch))
        {
            return true;
        }
    }
    false
}

/// Whether a bash command writes files that are not scratch: `sed -i` / `perl -i`, output
/// redirection into a file (`>`, `>>`, `&>`; heredocs such as `cat > f <<EOF` included), `tee`,
/// `patch`, `git apply` / `git am`, `apply_patch`, `mv` / `cp` onto a path, and a python
/// command whose code writes (`.write(`, `write_text(`). Works on the raw command (heredoc bodies
/// are skipped, not read as commands).
pub(crate) fn writes_files(command: &str) -> bool {
    if !may_write(command) {
        return false;
    }
    let mut lexer = Lexer::new(command);
    let mut command_start = true;
    let mut program: Option<&str> = None;
    let mut args: Vec<&str> = Vec::new();
    let mut writes = false;
    let mut finish = |program: &mut Option<&str>, args: &mut Vec<&str>| {
        if let Some(p) = program.take()
            && program_writes(p, args, command)
        {
            writes = true;
        }
        args.clear();
    };
    while let Some(tok) = lexer.next() {
        match tok {
            Tok::Separator => {
                finish(&mut program, &mut args);
                command_start = true;
            }
            Tok::RedirectOut(fd) => {
                if let Some(Tok::Word(file)) = lexer.next()
                    && matches!(fd, None | Some(1))
                    && !is_scratch(&unquote(file))
                {
                    return true;
                }
            }
            Tok::RedirectIn | Tok::Heredoc { .. } => {
                let _ = lexer.next();
            }
            Tok::Dup => {}
            Tok::Word(w) => {
                if command_start {
                    if is_assignment(w) {
                        continue;
                    }
                    let name = program_name(w);
                    if matches!(
                        name,
                        "sudo" | "time" | "nohup" | "command" | "exec" | "xargs"
                    ) {
                        continue;
                    }
                    program = Some(name);
                    command_start = false;
                } else {
                    args.push(w);
                }
            }
        }
    }
    finish(&mut program, &mut args);
    writes
}

/// The file a bash write writes (the first that is not scratch), when the command names one:
/// the file of an output redirection (`> f`, `cat > f <<EOF`), of `tee`, the last operand of
/// `sed -i` / `perl -i`, `mv` and `cp`. `None` for writes whose file the command does not name
/// (`patch`, `git apply`, a python script).
pub(crate) fn written_file(command: &str) -> Option<String> {
    if !may_write(command) {
        return None;
    }
    let mut lexer = Lexer::new(command);
    let mut command_start = true;
    let mut program: Option<&str> = None;
    let mut args: Vec<&str> = Vec::new();
    let named = |program: Option<&str>, args: &[&str]| -> Option<String> {
        let operands: Vec<&str> = args
            .iter()
            .copied()
            .filter(|w| !w.starts_with('-'))
            .collect();
        let file = match program? {
            "sed" | "perl" if args.iter().copied().any(is_in_place_flag) => operands.last(),
            "tee" => operands.first(),
            "mv" | "cp" if operands.len() >= 2 => operands.last(),
            _ => None,
        }?;
        let file = unquote(file);
        (!is_scratch(&file)).then(|| file.into_owned())
    };
    while let Some(tok) = lexer.next() {
        match tok {
            Tok::Separator => {
                if let Some(file) = named(program.take(), &args) {
                    return Some(file);
                }
                args.clear();
                command_start = true;
            }
            Tok::RedirectOut(fd) => {
                if let Some(Tok::Word(file)) = lexer.next()
                    && matches!(fd, None | Some(1))
                {
                    let file = unquote(file);
                    if !is_scratch(&file) {
                        return Some(file.into_owned());
                    }
                }
            }
            Tok::RedirectIn | Tok::Heredoc { .. } => {
                let _ = lexer.next();
            }
            Tok::Dup => {}
            Tok::Word(w) => {
                if command_start {
                    if is_assignment(w) || matches!(program_name(w), "sudo" | "time" | "nohup") {
                        continue;
                    }
                    program = Some(program_name(w));
                    command_start = false;
                } else {
                    args.push(w);
                }
            }
        }
    }
    named(program, &args)
}

fn program_writes(program: &str, args: &[&str], whole: &str) -> bool {
    let operands = || args.iter().filter(|w| !w.starts_with('-'));
    match program {
        "sed" | "perl" => args.iter().copied().any(is_in_place_flag),
        "tee" => operands().any(|w| !is_scratch(&unquote(w))),
        "patch" => !args.iter().any(|w| *w == "--dry-run" || *w == "-C"),
        "apply_patch" | "applypatch" => true,
        "git" => {
            let mut sub = operands();
            match sub.next().map(|w| unquote(w)) {
                Some(s) if s == "apply" => !args
                    .iter()
                    .any(|w| matches!(*w, "--check" | "--stat" | "--numstat" | "--summary")),
                Some(s) if s == "am" => true,
                _ => false,
            }
        }
        "mv" | "cp" => {
            let ops: Vec<&&str> = operands().collect();
            ops.len() >= 2 && ops.last().is_some_and(|last| !is_scratch(&unquote(last)))
        }
        p if p.starts_with("python") => {
            whole.contains(".write(")
                || whole.contains("write_text(")
                || whole.contains("write_bytes(")
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// `may_write`'s one pass finds what a `contains` for each word finds.
        #[test]
        fn may_write_looks_for_every_word(
            command in "([a-z -]|tee|patch|apply|mv|cp|write|git am|sed|perl| -i| --in-place){0,12}"
        ) {
            let word = |w: &str| command.contains(w);
            let by_contains = redirects_into_a_file(&command)
                || ["tee", "patch", "apply", "mv", "cp", "write", "git am"].into_iter().any(word)
                || ((word("sed") || word("perl")) && edits_in_place(&command));
            prop_assert_eq!(may_write(&command), by_contains);
        }
    }

    #[test]
    fn first_chars_counts_characters_not_bytes() {
        for (text, n, want) in [
            ("abc", 2, "ab"),
            ("é→x", 2, "é→"),
            ("ab", 5, "ab"),
            ("ab", 0, ""),
        ] {
            assert_eq!(first_chars(text, n), want, "{text:?} {n}");
        }
    }

    fn target(command: &str) -> String {
        let mut out = String::new();
        precise_target(command, &mut out, false);
        out
    }

    fn shape(command: &str) -> (String, Shape) {
        let mut out = String::new();
        let shape = precise_target(command, &mut out, true);
        (out, shape)
    }

    #[test]
    fn polls_and_ranged_views() {
        let view = |f: &str, l: Option<(u64, u64)>| Some((f.to_owned(), l));
        type Row<'a> = (&'a str, &'a str, bool, Option<(String, Option<(u64, u64)>)>);
        let rows: [Row<'_>; 10] = [
            (
                "sleep 30 && tail -n 5 /tmp/a.log",
                "view /tmp/a.log",
                true,
                view("/tmp/a.log", None),
            ),
            ("sleep 5; ps aux | grep pytest", "ps aux", true, None),
            ("sleep 5 && pytest -x", "pytest -x", false, None),
            (
                "sed -n '40,90p' src/a.py",
                "view src/a.py lines 40-90",
                false,
                view("src/a.py", Some((40, 90))),
            ),
            (
                "sed -n 7p a.py",
                "view a.py lines 7-7",
                false,
                view("a.py", Some((7, 7))),
            ),
            (
                "nl -ba src/a.py | sed -n '1,80p'",
                "view src/a.py lines 1-80",
                false,
                view("src/a.py", Some((1, 80))),
            ),
            (
                "cat -n a.py | head -n 30",
                "view a.py lines 1-30",
                false,
                view("a.py", Some((1, 30))),
            ),
            (
                "head -n 50 a.py",
                "view a.py lines 1-50",
                false,
                view("a.py", Some((1, 50))),
            ),
            ("cat a.py", "view a.py", false, view("a.py", None)),
            ("cat a.py b.py", "view a.py b.py", false, None),
        ];
        for (command, target, wait, v) in rows {
            let (t, s) = shape(command);
            assert_eq!(t, target, "{command}");
            assert_eq!(s.wait, wait, "{command}");
            assert_eq!(s.view, v, "{command}");
        }
    }

    #[test]
    fn targets_name_files_and_patterns() {
        let rows = [
            ("sed -n 1,80p a.py", "view a.py"),
            ("sed -n '1,80p' src/b.py", "view src/b.py"),
            ("nl -ba src/a.py | sed -n 40,90p", "view src/a.py"),
            ("cat src/a.py", "view src/a.py"),
            ("head -n 50 README.md", "view README.md"),
            (
                "sleep 45 && tail -n 5 /tmp/release.log",
                "view /tmp/release.log",
            ),
            ("python -c \"from shop import x; print(x)\"", "python -c"),
            ("python repro.py", "python repro.py"),
            ("pytest tests/test_a.py -x -q", "pytest tests/test_a.py"),
            (
                "pytest tests/test_a.py::test_b -x 2>&1 | tail -30",
                "pytest tests/test_a.py::test_b",
            ),
            ("grep -rn \"def total\" src/", "grep def total"),
            ("grep -n -A 3 total src/a.py", "grep total"),
            ("rg -n 'fn main' --type rust", "rg fn main"),
            ("git grep -n needle", "git grep needle"),
            ("git diff src/a.py", "git diff src/a.py"),
            ("git status", "git status"),
            ("cargo test -p core balance", "cargo test"),
            (
                "source .venv/bin/activate && pytest tests/t.py",
                "pytest tests/t.py",
            ),
            ("timeout 60 pytest -q", "pytest -q"),
            ("A=1 B=2 make all", "make all"),
            ("ls -la src/", "ls -la src/"),
            ("cargo build 2>&1 | tail -40", "cargo build"),
            ("echo done", "echo done"),
            ("sed -i 's/a/b/' x.py", "sed -i s/a/b/ x.py"),
            ("sleep 5 && pytest -x", "pytest -x"),
            ("cat > notes.md <<'EOF'\nhello\nEOF", "cat"),
            ("", ""),
        ];
        for (command, expected) in rows {
            assert_eq!(target(command), expected, "{command:?}");
        }
    }

    #[test]
    fn writes_are_recognised() {
        let writes = [
            "sed -i 's/a/b/' src/a.py",
            "sed -i.bak -e 's/a/b/' src/a.py",
            "sed -Ei 's/a/b/' src/a.py",
            "perl -pi -e 's/a/b/' a.py",
            "echo x > src/a.py",
            "printf 'x' >> notes.md",
            "cat > src/a.py <<'EOF'\nimport os\nEOF",
            "cat <<EOF > src/a.py\nx\nEOF",
            "echo x | tee src/a.py",
            "patch -p1 < fix.diff",
            "git apply <<'EOF'\n--- a/x\n+++ b/x\nEOF",
            "git am 0001.patch",
            "apply_patch <<'EOF'\n*** Begin Patch\nEOF",
            "mv /tmp/new.py src/a.py",
            "cp src/a.py src/b.py",
            "python - <<'EOF'\np='a.py'\ns=open(p).read()\nopen(p,'w').write(s)\nEOF",
            "python3 -c \"import pathlib; pathlib.Path('a').write_text('x')\"",
            "cd /repo && sed -i 's/x/y/' a.py && pytest",
        ];
        for command in writes {
            assert!(writes_files(command), "{command:?}");
        }
        let reads = [
            "sed -n 1,80p a.py",
            "pytest -x 2>&1 | tail -30",
            "pytest > /tmp/out.txt 2>&1",
            "make 2> build.err",
            "echo x > /dev/null",
            "grep -rn 'a > b' src/",
            "python - <<'EOF'\nif a > b:\n    print(1)\nEOF",
            "cat <<EOF\nx > y\nEOF",
            "git apply --check fix.diff",
            "patch --dry-run -p1 < fix.diff",
            "mv a.py",
            "cp src/a.py /tmp/a.py",
            "ls -la",
            "diff -u a b",
            "echo 'it'\"'\"'s' | tee /dev/stderr",
            "python -c 'print(1)' # write later",
        ];
        for command in reads {
            assert!(!writes_files(command), "{command:?}");
        }
    }

    /// The prefilter never hides a write the lexer finds.
    #[test]
    fn redirections_into_files_pass_the_prefilter() {
        for (command, may) in [
            ("cargo build 2>&1 | tail -20", false),
            ("make >/dev/null 2>&1", false),
            ("run > /tmp/out.log", false),
            ("echo x >&2", false),
            ("echo x > notes.md", true),
            ("echo x >> notes.md", true),
            ("cmd &> all.log", true),
            ("cmd 2> err.log", true),
            ("echo x >| f", true),
            ("cat > f <<'EOF'\nx\nEOF", true),
        ] {
            assert_eq!(redirects_into_a_file(command), may, "{command}");
            if !may {
                assert!(!writes_files(command), "{command}");
            }
        }
    }

    #[test]
    fn written_files_are_named() {
        for (command, file) in [
            ("sed -i 's/a/b/' src/a.py", Some("src/a.py")),
            (
                "cat > src/new.py <<'EOF'\nprint(1)\nEOF",
                Some("src/new.py"),
            ),
            ("echo x >> notes.md", Some("notes.md")),
            ("python gen.py | tee out/report.txt", Some("out/report.txt")),
            ("cp a.py 'b c.py'", Some("b c.py")),
            ("echo x > /tmp/scratch", None),
            ("git apply <<'EOF'\n--- a/x\nEOF", None),
            ("sed -n 1,5p a.py", None),
            ("ls", None),
        ] {
            assert_eq!(written_file(command).as_deref(), file, "{command}");
        }
    }

    #[test]
    fn path_like_words() {
        for yes in [
            "a.py",
            "src/",
            "./x",
            "tests/a.py::t",
            "Cargo.toml",
            "*.py",
            "~/x",
        ] {
            assert!(is_path_like(yes), "{yes}");
        }
        for no in [
            "1,80p", "-n", ".", "3.14", "v1", "print(1)", "a b", "", "install",
        ] {
            assert!(!is_path_like(no), "{no}");
        }
    }

    #[test]
    fn lexer_never_panics_on_odd_text() {
        for text in [
            "'",
            "\"",
            "\\",
            "<<",
            "<<'",
            "2>&",
            "&>",
            "é>é",
            "a\\\nb",
            "<<E\nx\nE\ny > z",
            "#",
            "\n\n",
        ] {
            let _ = writes_files(text);
            let _ = target(text);
            let _: Vec<_> = Lexer::new(text).collect();
        }
    }
}
