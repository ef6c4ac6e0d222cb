//! What the matcher reads of a call's metadata (`exit`, `total_lines`, `lines_read`, whether a
//! file changed or was written as it was, `committed`), from a [`Value`] ([`MetaFacts::of`]) or straight from a session
//! file's text ([`MetaFacts`]'s reader, [`ReadMetadata`]). Below the session model, which reads
//! calls' metadata through it, and the matcher, which judges calls by it.

use crate::hash::hash;
use crate::json::{CowStr, MapOnly};
use crate::output::COMMITTED_KEY;
use serde::Deserialize;
use serde::de::{DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};
use std::borrow::Cow;
use std::num::NonZeroU64;

/// What the matcher reads of a call's metadata.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct MetaFacts<'a> {
    /// `exit` as written (the matcher's call result prints it), when present.
    pub exit: Option<Cow<'a, Value>>,
    pub total_lines: Option<u64>,
    pub lines_read: Option<u64>,
    /// A non-blank `diff`, or a `filediff` or one of `files` with added or deleted lines.
    pub changed: bool,
    /// The call wrote a file as it was: a `filediff` with no line added or deleted, beside a
    /// `type` of `update` (Claude Code's and Gemini CLI's write of what a file holds) or a
    /// `diff` that is a unified diff (opencode's, with no hunk). A count of zero beside anything
    /// else (a file created, a result that only says "updated") says nothing.
    pub unchanged: bool,
    /// `committed`: the adapter saw the output show a commit ([`crate::output_commit`]).
    pub committed: bool,
    /// The commit's hash when `committed` names it ([`hash`] of the text, never 0): a commit
    /// that landed already in the session is no new work.
    pub commit: Option<NonZeroU64>,
}

impl<'a> MetaFacts<'a> {
    pub(crate) fn of(meta: &'a Value) -> Self {
        let changed = |v: &Value| {
            let n = |k: &str| v.get(k).and_then(Value::as_u64).unwrap_or(0);
            lines_changed(n("additions"), n("deletions"))
        };
        let diff = meta.get("diff").and_then(Value::as_str);
        let has_diff = diff.is_some_and(|d| !d.trim().is_empty());
        let filediff = meta.get("filediff").filter(|v| v.is_object()).map(changed);
        let files = meta
            .get("files")
            .and_then(Value::as_array)
            .is_some_and(|files| files.iter().any(changed));
        let update = meta.get("type").and_then(Value::as_str) == Some("update");
        let committed_value = meta.get(COMMITTED_KEY);
        Self {
            exit: meta.get("exit").map(Cow::Borrowed),
            total_lines: meta.get("total_lines").and_then(Value::as_u64),
            lines_read: meta.get("lines_read").and_then(Value::as_u64),
            changed: has_diff || filediff == Some(true) || files,
            unchanged: filediff == Some(false) && (update || diff.is_some_and(is_unified_diff)),
            committed: committed_value.is_some_and(committed),
            commit: committed_value.and_then(commit_hash),
        }
    }

    pub(crate) fn exit_code(&self) -> Option<i64> {
        self.exit.as_deref().and_then(Value::as_i64)
    }
}

/// `committed`: `true`, or a non-blank string (a commit's hash, as adapters keep it).
pub(crate) fn committed(value: &Value) -> bool {
    match value {
        Value::Bool(b) => *b,
        Value::String(s) => !s.trim().is_empty(),
        _ => false,
    }
}

/// The commit `committed` names (its trimmed text, hashed), when it is a non-blank string.
pub(crate) fn commit_hash(value: &Value) -> Option<NonZeroU64> {
    let name = value.as_str()?.trim();
    (!name.is_empty()).then(|| NonZeroU64::new(hash(name)).unwrap_or(NonZeroU64::MIN))
}

/// Whether a `diff` is a unified diff (a line that begins a file header or a hunk header), as
/// a tool that computes one writes it, rather than a note standing for one. Asked only of an
/// edit whose counts say it changed no line.
pub(crate) fn is_unified_diff(diff: &str) -> bool {
    let bytes = diff.as_bytes();
    std::iter::once(0)
        .chain(memchr::memchr_iter(b'\n', bytes).map(|at| at + 1))
        .any(|at| {
            let line = &bytes[at..];
            [&b"@@"[..], b"--- ", b"+++ ", b"Index: "]
                .iter()
                .any(|head| line.starts_with(head))
        })
}

/// [`MetaFacts::of`] read straight from a call's metadata text (`detect`, issue 19): the same
/// answers for any JSON value (a repeated key's last value counts, as in a [`Value`]), and
/// nothing built but `exit` and the numbers: a diff is looked at where it lies, file contents
/// and outputs are skipped.
impl<'de> Deserialize<'de> for MetaFacts<'_> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Lenient(Meta).deserialize(d)
    }
}

/// What one metadata field is read for, from the one shape it is read in: any other JSON value
/// is read through and answers `Out::default()`, as [`Value::get`], `as_str` and `as_array`
/// answer `None` for a value of another shape.
trait Shape<'de>: Sized {
    type Out: Default;
    fn map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Out, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(Self::Out::default())
    }
    fn seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Out, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Self::Out::default())
    }
    fn str(self, _: &str) -> Self::Out {
        Self::Out::default()
    }
}

/// Any JSON value, read as its [`Shape`] reads it.
struct Lenient<S>(S);

impl<'de, S: Shape<'de>> DeserializeSeed<'de> for Lenient<S> {
    type Value = S::Out;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<S::Out, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de, S: Shape<'de>> Visitor<'de> for Lenient<S> {
    type Value = S::Out;
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, _: bool) -> Result<S::Out, E> {
        Ok(S::Out::default())
    }
    fn visit_i64<E>(self, _: i64) -> Result<S::Out, E> {
        Ok(S::Out::default())
    }
    fn visit_u64<E>(self, _: u64) -> Result<S::Out, E> {
        Ok(S::Out::default())
    }
    fn visit_f64<E>(self, _: f64) -> Result<S::Out, E> {
        Ok(S::Out::default())
    }
    fn visit_unit<E>(self) -> Result<S::Out, E> {
        Ok(S::Out::default())
    }
    fn visit_none<E>(self) -> Result<S::Out, E> {
        Ok(S::Out::default())
    }
    fn visit_some<D: serde::Deserializer<'de>>(self, d: D) -> Result<S::Out, D::Error> {
        d.deserialize_any(self)
    }
    fn visit_str<E>(self, s: &str) -> Result<S::Out, E> {
        Ok(self.0.str(s))
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<S::Out, A::Error> {
        self.0.map(map)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<S::Out, A::Error> {
        self.0.seq(seq)
    }
}

/// The metadata object.
struct Meta;

impl<'de> Shape<'de> for Meta {
    type Out = MetaFacts<'static>;
    fn map<A: MapAccess<'de>>(self, mut map: A) -> Result<MetaFacts<'static>, A::Error> {
        let mut facts = MetaFacts::default();
        let (mut diff, mut filediff, mut files) = (DiffText::default(), None, false);
        let mut update = false;
        // Whether the diff is a unified one is asked only when the counts say no line changed.

        while let Some(key) = map.next_key_seed(CowStr)? {
            match &*key {
                "exit" => facts.exit = Some(Cow::Owned(map.next_value()?)),
                "total_lines" => facts.total_lines = map.next_value::<Value>()?.as_u64(),
                "lines_read" => facts.lines_read = map.next_value::<Value>()?.as_u64(),
                "diff" => diff = map.next_value_seed(Lenient(Diff))?,
                "filediff" => filediff = map.next_value_seed(Lenient(ChangedLines))?,
                "files" => files = map.next_value_seed(Lenient(AnyChanged))?,
                "type" => update = map.next_value_seed(Lenient(Update))?,
                "committed" => {
                    let value = map.next_value::<Value>()?;
                    facts.committed = committed(&value);
                    facts.commit = commit_hash(&value);
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        facts.changed = diff.non_blank || filediff == Some(true) || files;
        facts.unchanged = filediff == Some(false) && (update || diff.unified);
        Ok(facts)
    }
}

/// `diff`: whether it is a string that is not blank, and a unified diff.
struct Diff;

/// What [`Diff`] reads.
#[derive(Default)]
struct DiffText {
    non_blank: bool,
    unified: bool,
}

impl Shape<'_> for Diff {
    type Out = DiffText;
    fn str(self, s: &str) -> DiffText {
        DiffText {
            non_blank: !s.trim().is_empty(),
            unified: is_unified_diff(s),
        }
    }
}

/// `type`: whether it is `update`.
struct Update;

impl Shape<'_> for Update {
    type Out = bool;
    fn str(self, s: &str) -> bool {
        s == "update"
    }
}

/// `filediff` or one of `files`: when it is an object, whether it added or deleted lines.
struct ChangedLines;

impl<'de> Shape<'de> for ChangedLines {
    type Out = Option<bool>;
    fn map<A: MapAccess<'de>>(self, mut map: A) -> Result<Option<bool>, A::Error> {
        let (mut additions, mut deletions) = (0, 0);
        while let Some(key) = map.next_key_seed(CowStr)? {
            let count = match &*key {
                "additions" => &mut additions,
                "deletions" => &mut deletions,
                _ => {
                    map.next_value::<IgnoredAny>()?;
                    continue;
                }
            };
            *count = map.next_value::<Value>()?.as_u64().unwrap_or(0);
        }
        Ok(Some(lines_changed(additions, deletions)))
    }
}

/// `files`: whether it is a list of which one element has added or deleted lines.
struct AnyChanged;

impl<'de> Shape<'de> for AnyChanged {
    type Out = bool;
    fn seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<bool, A::Error> {
        let mut any = false;
        while let Some(changed) = seq.next_element_seed(Lenient(ChangedLines))? {
            any |= changed == Some(true);
        }
        Ok(any)
    }
}

/// Whether a file's change added or deleted lines.
pub(crate) fn lines_changed(additions: u64, deletions: u64) -> bool {
    additions.saturating_add(deletions) > 0
}

/// A call's metadata as the matcher reads it, and nothing more: `exit`, `total_lines`,
/// `lines_read`, `diff`, `type`, `committed`, and the `additions` and `deletions` of `filediff`
/// and of each of `files` (not the files' contents). Read for `detect`, it answers every question [`CallFacts::of`]
/// asks of the metadata as the whole metadata does; a metadata it cannot read (not an object,
/// a repeated key) is read whole instead.
#[derive(Deserialize)]
pub(crate) struct ReadMetadata {
    /// Kept when `null`: the matcher's call result writes it.
    #[serde(default, deserialize_with = "present")]
    exit: Option<Value>,
    total_lines: Option<Value>,
    lines_read: Option<Value>,
    diff: Option<Value>,
    filediff: Option<MapOnly<Changed>>,
    files: Option<Vec<MapOnly<Changed>>>,
    committed: Option<Value>,
    #[serde(rename = "type")]
    kind: Option<Value>,
}

/// What the matcher reads of a changed file (whether it landed).
#[derive(Deserialize)]
struct Changed {
    additions: Option<Value>,
    deletions: Option<Value>,
}

fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

impl Changed {
    fn into_value(self) -> Value {
        let mut map = Map::new();
        for (key, value) in [("additions", self.additions), ("deletions", self.deletions)] {
            if let Some(value) = value {
                map.insert(key.to_owned(), value);
            }
        }
        Value::Object(map)
    }
}

impl ReadMetadata {
    pub(crate) fn into_value(self) -> Value {
        let mut map = Map::new();
        let scalars = [
            ("exit", self.exit),
            ("total_lines", self.total_lines),
            ("lines_read", self.lines_read),
            ("diff", self.diff),
            (COMMITTED_KEY, self.committed),
            ("type", self.kind),
        ];
        for (key, value) in scalars {
            if let Some(value) = value {
                map.insert(key.to_owned(), value);
            }
        }
        if let Some(MapOnly(filediff)) = self.filediff {
            map.insert("filediff".to_owned(), filediff.into_value());
        }
        if let Some(files) = self.files {
            let files = files.into_iter().map(|f| f.0.into_value()).collect();
            map.insert("files".to_owned(), Value::Array(files));
        }
        Value::Object(map)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The metadata read from its text answers as the metadata read whole, for every shape.
    #[test]
    fn metadata_read_from_text_answers_as_the_value() {
        for text in [
            "null",
            "7",
            r#""diff""#,
            r#"[1,{"exit":0}]"#,
            "{}",
            r#"{"exit":0,"output":"long\n\"text\""}"#,
            r#"{"exit":null}"#,
            r#"{"exit":"0"}"#,
            r#"{"exit":{"code":1}}"#,
            r#"{"exit":-1.5}"#,
            r#"{"exit":1,"exit":0}"#,
            r#"{"e\u0078it":2}"#,
            r#"{"total_lines":120,"lines_read":"5"}"#,
            r#"{"total_lines":-1,"lines_read":2.0}"#,
            r#"{"total_lines":18446744073709551615,"lines_read":18446744073709551616}"#,
            r#"{"total_lines":[1],"lines_read":{"n":1}}"#,
            r#"{"total_lines":3,"total_lines":null}"#,
            r#"{"diff":""}"#,
            r#"{"diff":" \n\t\u00a0"}"#,
            r#"{"diff":"\u0020x"}"#,
            r#"{"diff":["x"]}"#,
            r#"{"diff":"x","diff":" "}"#,
            r#"{"filediff":{"additions":0,"deletions":0,"before":"a\nb","after":"c"}}"#,
            r#"{"filediff":{"additions":1}}"#,
            r#"{"filediff":{"deletions":"1"}}"#,
            r#"{"filediff":{"additions":-1,"deletions":0.5}}"#,
            r#"{"filediff":{"additions":18446744073709551615,"deletions":1}}"#,
            r#"{"filediff":{"additions":1,"additions":0}}"#,
            r#"{"filediff":[{"additions":1}]}"#,
            r#"{"filediff":"x"}"#,
            r#"{"files":[]}"#,
            r#"{"files":[7,null,"x",[{"additions":1}],{"additions":0}]}"#,
            r#"{"files":[{"additions":0},{"deletions":2,"after":"x"}]}"#,
            r#"{"files":{"additions":1}}"#,
            r#"{"files":[{"additions":1}],"files":[]}"#,
            r#"{"diff":null,"filediff":null,"files":null,"exit":0,"truncated":false}"#,
            r#"{"committed":true}"#,
            r#"{"committed":"4e1f0a2","exit":1}"#,
            r#"{"committed":" "}"#,
            r#"{"committed":[true],"committed":false}"#,
            r#"{"committed":" 4e1f0a2 "}"#,
            r#"{"type":"update","diff":"(update)","filediff":{"additions":0,"deletions":0}}"#,
            r#"{"type":"create","diff":"(create)","filediff":{"additions":0,"deletions":0}}"#,
            r#"{"type":"update","filediff":{"additions":2,"deletions":0}}"#,
            r#"{"type":["update"],"filediff":{}}"#,
            r#"{"type":"update","type":"create","filediff":{}}"#,
            r#"{"diff":"Index: /a\n===\n--- /a\n+++ /a\n","filediff":{"additions":0,"deletions":0}}"#,
            r#"{"diff":"@@ -1,1 +1,1 @@","filediff":{"additions":1,"deletions":1}}"#,
            r#"{"diff":"@@ -1 +1 @@","filediff":"x"}"#,
            r#"{"diff":"(the result reports the file updated)","filediff":{"additions":0}}"#,
        ] {
            let value: Value = serde_json::from_str(text).unwrap();
            let read: MetaFacts<'_> = serde_json::from_str(text).unwrap();
            assert_eq!(read, MetaFacts::of(&value), "{text}");
        }
    }
}
