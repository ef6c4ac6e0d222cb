//! A JSON reader that keeps where every value is in the text, so an edit can change a few bytes
//! and leave the rest (comments, order, spacing) as it was.
//!
//! It reads JSON with the two extensions the agents' settings readers tolerate: comments (`//`
//! and `/* */`) and trailing commas. Whether a document used them is kept ([`Doc::extended`]):
//! Codex reads `hooks.json` as plain JSON and skips a file with either. Strings and numbers are
//! checked by serde_json, so what reads here is what a JSON reader reads. Nesting is bounded, so
//! no input overflows the stack.

use serde_json::Value;

/// How deep values may nest (a settings file is a few levels; this is far beyond any).
const MAX_DEPTH: usize = 256;

/// A value and where it is: `start..end` covers its text (quotes and brackets included).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Node {
    pub start: usize,
    pub end: usize,
    pub kind: Kind,
}

/// What a [`Node`] is. Scalars keep their value; containers their parts.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Kind {
    /// Members in the order written; `open_end` is just after `{`, `close` the `}`.
    Object {
        members: Vec<Member>,
        open_end: usize,
        close: usize,
    },
    /// Elements in order; `open_end` is just after `[`, `close` the `]`.
    Array {
        items: Vec<Node>,
        open_end: usize,
        close: usize,
    },
    Scalar(Value),
}

/// `"key": value`; the member's text runs from `key_start` to `value.end`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Member {
    pub key: String,
    pub key_start: usize,
    pub value: Node,
}

/// A whole document: its top-level value and whether it used comments or trailing commas.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Doc {
    pub root: Node,
    pub extended: bool,
}

/// Why a text does not read, and where (1-based line and column, in characters).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SyntaxError {
    pub line: usize,
    pub column: usize,
    pub message: String,
}

impl Node {
    /// The members of an object, or nothing.
    pub fn members(&self) -> &[Member] {
        match &self.kind {
            Kind::Object { members, .. } => members,
            _ => &[],
        }
    }

    /// The elements of an array, or nothing.
    pub fn items(&self) -> &[Node] {
        match &self.kind {
            Kind::Array { items, .. } => items,
            _ => &[],
        }
    }

    /// The value of an object's member `key` (the last one when a key repeats, as JSON
    /// readers take it).
    pub fn get(&self, key: &str) -> Option<&Node> {
        self.member(key).map(|m| &m.value)
    }

    /// An object's member `key` (the last one when a key repeats).
    pub fn member(&self, key: &str) -> Option<&Member> {
        self.members().iter().rev().find(|m| m.key == key)
    }

    pub fn is_object(&self) -> bool {
        matches!(self.kind, Kind::Object { .. })
    }

    pub fn is_array(&self) -> bool {
        matches!(self.kind, Kind::Array { .. })
    }

    /// A string scalar's text.
    pub fn as_str(&self) -> Option<&str> {
        match &self.kind {
            Kind::Scalar(Value::String(s)) => Some(s),
            _ => None,
        }
    }

    /// A boolean scalar.
    pub fn as_bool(&self) -> Option<bool> {
        match &self.kind {
            Kind::Scalar(Value::Bool(b)) => Some(*b),
            _ => None,
        }
    }

    /// The value as serde_json's (comments and positions dropped).
    pub fn to_value(&self) -> Value {
        match &self.kind {
            Kind::Scalar(v) => v.clone(),
            Kind::Array { items, .. } => Value::Array(items.iter().map(Node::to_value).collect()),
            Kind::Object { members, .. } => Value::Object(
                members
                    .iter()
                    .map(|m| (m.key.clone(), m.value.to_value()))
                    .collect(),
            ),
        }
    }
}

/// Reads a whole document: one value, with only whitespace and comments around it.
pub(crate) fn parse(text: &str) -> Result<Doc, SyntaxError> {
    let mut reader = Reader {
        text,
        bytes: text.as_bytes(),
        at: 0,
        extended: false,
    };
    // A byte-order mark is not part of the document.
    if text.starts_with('\u{feff}') {
        reader.at = '\u{feff}'.len_utf8();
    }
    reader.skip_blank()?;
    let root = reader.value(0)?;
    reader.skip_blank()?;
    if reader.at < reader.bytes.len() {
        return Err(reader.error_at(reader.at, "more text after the document's end"));
    }
    Ok(Doc {
        root,
        extended: reader.extended,
    })
}

/// 1-based line and column (in characters) of a byte offset.
pub(crate) fn line_column(text: &str, at: usize) -> (usize, usize) {
    let before = &text[..at.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    (line, before[line_start..].chars().count() + 1)
}

struct Reader<'a> {
    text: &'a str,
    bytes: &'a [u8],
    at: usize,
    extended: bool,
}

impl Reader<'_> {
    fn error_at(&self, at: usize, message: impl Into<String>) -> SyntaxError {
        let (line, column) = line_column(self.text, at);
        SyntaxError {
            line,
            column,
            message: message.into(),
        }
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.at).copied()
    }

    /// Skips whitespace and comments.
    fn skip_blank(&mut self) -> Result<(), SyntaxError> {
        loop {
            match self.peek() {
                Some(b' ' | b'\t' | b'\n' | b'\r') => self.at += 1,
                Some(b'/') => self.comment()?,
                _ => return Ok(()),
            }
        }
    }

    fn comment(&mut self) -> Result<(), SyntaxError> {
        let start = self.at;
        match self.bytes.get(self.at + 1) {
            Some(b'/') => {
                self.at = self.bytes[self.at..]
                    .iter()
                    .position(|&b| b == b'\n')
                    .map_or(self.bytes.len(), |i| self.at + i);
            }
            Some(b'*') => {
                let rest = &self.text[self.at + 2..];
                let close = rest
                    .find("*/")
                    .ok_or_else(|| self.error_at(start, "a comment that is never closed"))?;
                self.at += 2 + close + 2;
            }
            _ => return Err(self.error_at(start, "`/` where a value or a comment belongs")),
        }
        self.extended = true;
        Ok(())
    }

    fn value(&mut self, depth: usize) -> Result<Node, SyntaxError> {
        if depth > MAX_DEPTH {
            return Err(self.error_at(self.at, "values nested too deep"));
        }
        let start = self.at;
        match self.peek() {
            Some(b'{') => self.object(depth),
            Some(b'[') => self.array(depth),
            Some(b'"') => {
                let s = self.string()?;
                Ok(Node {
                    start,
                    end: self.at,
                    kind: Kind::Scalar(Value::String(s)),
                })
            }
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(b't' | b'f' | b'n') => self.literal(),
            Some(_) => Err(self.error_at(start, "a value was expected here")),
            None => Err(self.error_at(start, "the text ends where a value was expected")),
        }
    }

    fn string(&mut self) -> Result<String, SyntaxError> {
        let start = self.at;
        let mut i = self.at + 1;
        loop {
            match self.bytes.get(i) {
                Some(b'"') => break,
                Some(b'\\') => i += 2,
                Some(_) => i += 1,
                None => return Err(self.error_at(start, "a string that is never closed")),
            }
        }
        self.at = i + 1;
        serde_json::from_str::<String>(&self.text[start..self.at])
            .map_err(|e| self.error_at(start, format!("a string that does not read: {e}")))
    }

    fn number(&mut self) -> Result<Node, SyntaxError> {
        let start = self.at;
        while matches!(
            self.peek(),
            Some(b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9')
        ) {
            self.at += 1;
        }
        let text = &self.text[start..self.at];
        match serde_json::from_str::<Value>(text) {
            Ok(v @ Value::Number(_)) => Ok(Node {
                start,
                end: self.at,
                kind: Kind::Scalar(v),
            }),
            _ => Err(self.error_at(start, format!("`{text}` is not a number"))),
        }
    }

    fn literal(&mut self) -> Result<Node, SyntaxError> {
        let start = self.at;
        for (word, value) in [
            ("true", Value::Bool(true)),
            ("false", Value::Bool(false)),
            ("null", Value::Null),
        ] {
            if self.text[start..].starts_with(word) {
                self.at += word.len();
                return Ok(Node {
                    start,
                    end: self.at,
                    kind: Kind::Scalar(value),
                });
            }
        }
        Err(self.error_at(start, "a value was expected here"))
    }

    /// After an element or member: `,` (then maybe the close, a trailing comma) or the close.
    /// Returns true when the container is closed (the reader just after the close).
    fn separator(&mut self, close: u8, what: &str) -> Result<bool, SyntaxError> {
        self.skip_blank()?;
        match self.peek() {
            Some(b',') => {
                self.at += 1;
                self.skip_blank()?;
                if self.peek() == Some(close) {
                    self.extended = true;
                    self.at += 1;
                    return Ok(true);
                }
                Ok(false)
            }
            Some(c) if c == close => {
                self.at += 1;
                Ok(true)
            }
            _ => Err(self.error_at(
                self.at,
                format!("`,` or `{}` expected after {what}", close as char),
            )),
        }
    }

    fn object(&mut self, depth: usize) -> Result<Node, SyntaxError> {
        let start = self.at;
        self.at += 1;
        let open_end = self.at;
        let mut members = Vec::new();
        self.skip_blank()?;
        if self.peek() == Some(b'}') {
            self.at += 1;
            return Ok(object_node(start, self.at, members, open_end));
        }
        loop {
            if self.peek() != Some(b'"') {
                return Err(self.error_at(self.at, "a member's name (a string) was expected"));
            }
            let key_start = self.at;
            let key = self.string()?;
            self.skip_blank()?;
            if self.peek() != Some(b':') {
                return Err(self.error_at(self.at, "`:` expected after a member's name"));
            }
            self.at += 1;
            self.skip_blank()?;
            let value = self.value(depth + 1)?;
            members.push(Member {
                key,
                key_start,
                value,
            });
            if self.separator(b'}', "a member")? {
                return Ok(object_node(start, self.at, members, open_end));
            }
        }
    }

    fn array(&mut self, depth: usize) -> Result<Node, SyntaxError> {
        let start = self.at;
        self.at += 1;
        let open_end = self.at;
        let mut items = Vec::new();
        self.skip_blank()?;
        if self.peek() == Some(b']') {
            self.at += 1;
            return Ok(array_node(start, self.at, items, open_end));
        }
        loop {
            items.push(self.value(depth + 1)?);
            if self.separator(b']', "an element")? {
                return Ok(array_node(start, self.at, items, open_end));
            }
        }
    }
}

fn object_node(start: usize, end: usize, members: Vec<Member>, open_end: usize) -> Node {
    Node {
        start,
        end,
        kind: Kind::Object {
            members,
            open_end,
            close: end - 1,
        },
    }
}

fn array_node(start: usize, end: usize, items: Vec<Node>, open_end: usize) -> Node {
    Node {
        start,
        end,
        kind: Kind::Array {
            items,
            open_end,
            close: end - 1,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_what_serde_json_reads_with_positions() {
        let text = r#"{"a": [1, "x", true, null], "b": {"c": -2.5e3}}"#;
        let doc = parse(text).unwrap();
        assert_eq!(
            doc.root.to_value(),
            serde_json::from_str::<Value>(text).unwrap()
        );
        assert!(!doc.extended);
        let b = doc.root.member("b").unwrap();
        assert_eq!(&text[b.key_start..b.value.end], r#""b": {"c": -2.5e3}"#);
        let a = doc.root.get("a").unwrap();
        assert_eq!(&text[a.items()[1].start..a.items()[1].end], r#""x""#);
    }

    #[test]
    fn comments_and_trailing_commas_read_and_are_noted() {
        let text = "// top\n{ /* a */ \"a\": [1, 2,], // end\n \"b\": 1, }\n";
        let doc = parse(text).unwrap();
        assert_eq!(doc.root.to_value(), json!({"a": [1, 2], "b": 1}));
        assert!(doc.extended);
    }

    #[test]
    fn errors_name_the_line_and_column() {
        let cases = [
            ("{\n  \"a\": 1\n  \"b\": 2\n}", 3, 3, "`,` or `}` expected"),
            ("{\"a\": tru}", 1, 7, "a value was expected"),
            ("{\"a\": 1} x", 1, 10, "more text"),
            ("{\"a\": \"\\q\"}", 1, 7, "a string that does not read"),
            ("{\"a\": /* x", 1, 7, "never closed"),
            ("", 1, 1, "the text ends"),
            ("{\"a\": 01}", 1, 7, "is not a number"),
        ];
        for (text, line, column, message) in cases {
            let e = parse(text).unwrap_err();
            assert_eq!((e.line, e.column), (line, column), "{text}: {e:?}");
            assert!(e.message.contains(message), "{text}: {e:?}");
        }
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_crash() {
        let text = "[".repeat(100_000);
        assert!(parse(&text).unwrap_err().message.contains("too deep"));
    }

    #[test]
    fn a_repeated_key_reads_as_its_last() {
        let doc = parse(r#"{"a": 1, "a": 2}"#).unwrap();
        assert_eq!(doc.root.get("a").unwrap().to_value(), json!(2));
    }
}
