//! Minimal edits of a JSON text read by [`super::jsonc`]: add a member or an element after the
//! last one (or into an empty container), remove one, each as one splice that leaves every
//! other byte alone. Adding and then removing the same piece gives back the text it was added
//! to: that is what makes `install` then `uninstall` leave a settings file as it was.

use super::jsonc::{Kind, Node};
use serde_json::Value;

/// A JSON value to write, with its members in the order given.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Frag {
    Object(Vec<(&'static str, Frag)>),
    Array(Vec<Frag>),
    Str(String),
    Int(u64),
}

/// How to lay out a written value: spread over lines (the line's indentation and one level's
/// step), or on one line (a file written on one line).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Layout {
    Lines { indent: String, unit: String },
    Inline,
}

impl Frag {
    /// The value's text, its first line at the cursor (no indentation before it).
    pub fn render(&self, layout: &Layout) -> String {
        let mut out = String::new();
        self.write(layout, 0, &mut out);
        out
    }

    fn write(&self, layout: &Layout, depth: usize, out: &mut String) {
        match self {
            Frag::Str(s) => out.push_str(&Value::String(s.clone()).to_string()),
            Frag::Int(n) => out.push_str(&n.to_string()),
            Frag::Array(items) => {
                let parts: Vec<String> = items
                    .iter()
                    .map(|item| {
                        let mut s = String::new();
                        item.write(layout, depth + 1, &mut s);
                        s
                    })
                    .collect();
                out.push_str(&enclose('[', ']', &parts, layout, depth));
            }
            Frag::Object(members) => {
                let parts: Vec<String> = members
                    .iter()
                    .map(|(key, value)| {
                        let mut s = Value::String((*key).to_owned()).to_string();
                        s.push_str(": ");
                        value.write(layout, depth + 1, &mut s);
                        s
                    })
                    .collect();
                out.push_str(&enclose('{', '}', &parts, layout, depth));
            }
        }
    }
}

fn enclose(open: char, close: char, parts: &[String], layout: &Layout, depth: usize) -> String {
    match layout {
        Layout::Inline => format!("{open}{}{close}", parts.join(", ")),
        Layout::Lines { indent, unit } => {
            let inner = format!("\n{indent}{}", unit.repeat(depth + 1));
            let outer = format!("\n{indent}{}", unit.repeat(depth));
            format!(
                "{open}{inner}{}{outer}{close}",
                parts.join(&format!(",{inner}"))
            )
        }
    }
}

/// One replacement of `start..end` by `with`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Splice {
    pub start: usize,
    pub end: usize,
    pub with: String,
}

impl Splice {
    pub fn apply(&self, text: &str) -> String {
        let mut out = String::with_capacity(text.len() + self.with.len());
        out.push_str(&text[..self.start]);
        out.push_str(&self.with);
        out.push_str(&text[self.end..]);
        out
    }
}

/// The whitespace at the start of the line holding `at`.
fn line_indent(text: &str, at: usize) -> &str {
    let line_start = text[..at].rfind('\n').map_or(0, |i| i + 1);
    let rest = &text[line_start..];
    let width = rest.len() - rest.trim_start_matches([' ', '\t']).len();
    &rest[..width]
}

/// One level of indentation in this file: how far the top-level object's first member sits in
/// from the object's own line; two spaces when that says nothing.
pub(crate) fn indent_unit(text: &str, root: &Node) -> String {
    let Some(first) = root.members().first() else {
        return "  ".to_owned();
    };
    let base = line_indent(text, root.start);
    let own = line_indent(text, first.key_start);
    let on_own_line = !text[..first.key_start]
        .trim_end_matches([' ', '\t'])
        .ends_with(['{', ',']);
    match own.strip_prefix(base) {
        Some(step) if !step.is_empty() && on_own_line => step.to_owned(),
        _ => "  ".to_owned(),
    }
}

/// The starts and ends of a container's parts (members from their key).
fn spans(container: &Node) -> Vec<(usize, usize)> {
    match &container.kind {
        Kind::Object { members, .. } => {
            members.iter().map(|m| (m.key_start, m.value.end)).collect()
        }
        Kind::Array { items, .. } => items.iter().map(|n| (n.start, n.end)).collect(),
        Kind::Scalar(_) => Vec::new(),
    }
}

fn open_close(container: &Node) -> (usize, usize) {
    match &container.kind {
        Kind::Object {
            open_end, close, ..
        }
        | Kind::Array {
            open_end, close, ..
        } => (*open_end, *close),
        Kind::Scalar(_) => (container.start, container.start),
    }
}

/// Whether a piece of text between parts holds a comment.
fn has_comment(between: &str) -> bool {
    between.contains("//") || between.contains("/*")
}

/// Adds a part at the end of `container`: `part(layout)` is the text of the member (`"key":
/// value`) or element. After the last part it goes on a line of its own when that part is on
/// one (same indentation), else on the same line; into an empty container, on its own line
/// one level in when the file is spread over lines.
pub(crate) fn append(
    text: &str,
    container: &Node,
    unit: &str,
    part: impl Fn(&Layout) -> String,
) -> Splice {
    let parts = spans(container);
    let (open_end, close) = open_close(container);
    if let Some(&(last_start, last_end)) = parts.last() {
        let before = &text[..last_start];
        let mut gap = &before[before.trim_end_matches([' ', '\t', '\n', '\r']).len()..];
        // On one line, the space after the first part's `{` says nothing: `, ` unless two
        // parts show another way.
        if gap.is_empty() && parts.len() == 1 {
            gap = " ";
        }
        let layout = if gap.contains('\n') {
            Layout::Lines {
                indent: line_indent(text, last_start).to_owned(),
                unit: unit.to_owned(),
            }
        } else {
            Layout::Inline
        };
        let with = format!(",{gap}{}", crlf(text, &part(&layout)));
        return Splice {
            start: last_end,
            end: last_end,
            with,
        };
    }
    let inner = &text[open_end..close];
    let spread = text.trim().contains('\n');
    if !spread {
        return Splice {
            start: open_end,
            end: open_end,
            with: part(&Layout::Inline),
        };
    }
    let outer = line_indent(text, container.start).to_owned();
    let indent = format!("{outer}{unit}");
    let layout = Layout::Lines {
        indent: indent.clone(),
        unit: unit.to_owned(),
    };
    let body = crlf(text, &format!("\n{indent}{}", part(&layout)));
    if inner.trim().is_empty() {
        Splice {
            start: open_end,
            end: close,
            with: format!("{body}{}", crlf(text, &format!("\n{outer}"))),
        }
    } else {
        // Only comments inside: ours goes first, the comments stay after it.
        Splice {
            start: open_end,
            end: open_end,
            with: body,
        }
    }
}

/// Text written into a file whose lines end with CRLF ends its lines so too.
pub(crate) fn crlf(file: &str, written: &str) -> String {
    if file.contains("\r\n") {
        written.replace('\n', "\r\n")
    } else {
        written.to_owned()
    }
}

/// Removes part `index` of `container` with the comma that joined it to the part before (or,
/// for the first part, after), keeping any comment in between. The last part leaves an empty
/// container (`{}`, `[]`) when nothing but whitespace is left inside.
pub(crate) fn remove(text: &str, container: &Node, index: usize) -> Splice {
    let parts = spans(container);
    let (open_end, close) = open_close(container);
    let (start, end) = parts[index];
    if parts.len() == 1 {
        let left = format!("{}{}", &text[open_end..start], &text[end..close]);
        return if left.trim().is_empty() {
            Splice {
                start: open_end,
                end: close,
                with: String::new(),
            }
        } else {
            Splice {
                start,
                end,
                with: String::new(),
            }
        };
    }
    // The gap holding the comma: before this part, or after it for the first one.
    let (gap_start, gap_end) = if index > 0 {
        (parts[index - 1].1, start)
    } else {
        (end, parts[1].0)
    };
    let gap = &text[gap_start..gap_end];
    let kept = if has_comment(gap) {
        without_comma(gap)
    } else {
        String::new()
    };
    if index > 0 {
        Splice {
            start: gap_start,
            end,
            with: kept,
        }
    } else {
        Splice {
            start,
            end: gap_end,
            with: kept,
        }
    }
}

/// A gap between two parts without its comma (the one outside comments).
fn without_comma(gap: &str) -> String {
    let bytes = gap.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b',' => return format!("{}{}", &gap[..i], &gap[i + 1..]),
            b'/' if bytes.get(i + 1) == Some(&b'/') => {
                i = gap[i..].find('\n').map_or(bytes.len(), |n| i + n);
            }
            b'/' if bytes.get(i + 1) == Some(&b'*') => {
                i = gap[i + 2..]
                    .find("*/")
                    .map_or(bytes.len(), |n| i + 2 + n + 2);
            }
            _ => i += 1,
        }
    }
    gap.to_owned()
}

#[cfg(test)]
mod tests {
    use super::super::jsonc::parse;
    use super::*;

    fn member(layout: &Layout) -> String {
        format!(
            "\"hooks\": {}",
            Frag::Object(vec![("a", Frag::Array(vec![Frag::Int(1)]))]).render(layout)
        )
    }

    fn appended(text: &str) -> String {
        let doc = parse(text).unwrap();
        let unit = indent_unit(text, &doc.root);
        append(text, &doc.root, &unit, member).apply(text)
    }

    #[test]
    fn append_follows_the_layout_around_it() {
        let cases = [
            (
                "{\n  \"x\": 1\n}\n",
                "{\n  \"x\": 1,\n  \"hooks\": {\n    \"a\": [\n      1\n    ]\n  }\n}\n",
            ),
            (
                "{\n\t\"x\": 1\n}",
                "{\n\t\"x\": 1,\n\t\"hooks\": {\n\t\t\"a\": [\n\t\t\t1\n\t\t]\n\t}\n}",
            ),
            ("{\"x\": 1}", "{\"x\": 1, \"hooks\": {\"a\": [1]}}"),
            ("{}", "{\"hooks\": {\"a\": [1]}}"),
            (
                "{\n}\n",
                "{\n  \"hooks\": {\n    \"a\": [\n      1\n    ]\n  }\n}\n",
            ),
            (
                "{\n  // only a comment\n}\n",
                "{\n  \"hooks\": {\n    \"a\": [\n      1\n    ]\n  }\n  // only a comment\n}\n",
            ),
        ];
        for (before, after) in cases {
            assert_eq!(appended(before), after, "{before:?}");
        }
        for before in ["{\r\n  \"x\": 1\r\n}\r\n", "{\r\n}\r\n"] {
            let after = appended(before);
            assert_eq!(
                after.matches('\n').count(),
                after.matches("\r\n").count(),
                "{after:?}"
            );
        }
    }

    #[test]
    fn remove_undoes_append() {
        for text in [
            "{\r\n  \"x\": 1\r\n}\r\n",
            "{\n  \"x\": 1\n}\n",
            "{\"x\": 1}",
            "{}",
            "{\n    \"x\": 1, // note\n    \"y\": [2]\n}",
            "{\n  \"x\": 1,\n}\n",
        ] {
            let grown = appended(text);
            let doc = parse(&grown).unwrap();
            let last = doc.root.members().len() - 1;
            assert_eq!(remove(&grown, &doc.root, last).apply(&grown), text);
        }
    }

    #[test]
    fn remove_keeps_comments_between_parts() {
        let cases = [
            ("[1, /* one */ 2]", 1, "[1 /* one */ ]"),
            ("[1, // one\n 2]", 0, "[ // one\n 2]"),
            ("[1, 2, 3]", 1, "[1, 3]"),
            ("[1, 2, 3]", 0, "[2, 3]"),
            ("[ /* a */ 1 ]", 0, "[ /* a */  ]"),
            ("[\n  1\n]", 0, "[]"),
        ];
        for (text, index, want) in cases {
            let doc = parse(text).unwrap();
            let got = remove(text, &doc.root, index).apply(text);
            assert_eq!(got, want, "{text} without #{index}");
            assert!(parse(&got).is_ok(), "{got}");
        }
    }
}
