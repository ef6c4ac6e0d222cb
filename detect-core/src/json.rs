//! A JSON value as the matcher reads it: borrowed from a session file's text (strings without
//! escapes are not copied) or from a [`Value`], objects as a list of entries (no map is built).
//!
//! It answers what [`Value`] answers (a key's value, the last of a repeated key; numbers as
//! `u64` / `i64` / `f64`) and writes the same canonical JSON, so a call reads the same whichever
//! form it came in (issue 19: one call's input used to be a `BTreeMap` of owned strings).

use serde::Deserialize;
use serde_json::{Number, Value};
use std::borrow::Cow;
use std::fmt::Write as _;

/// A JSON value, borrowed where it can be.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Json<'a> {
    Null,
    Bool(bool),
    Number(Number),
    Str(Cow<'a, str>),
    List(Vec<Json<'a>>),
    /// Entries in document order; a repeated key is kept as written (lookups take the last).
    Object(Vec<(Cow<'a, str>, Json<'a>)>),
}

impl<'a> Json<'a> {
    /// `value`, borrowed.
    pub(crate) fn of(value: &'a Value) -> Self {
        match value {
            Value::Null => Json::Null,
            Value::Bool(b) => Json::Bool(*b),
            Value::Number(n) => Json::Number(n.clone()),
            Value::String(s) => Json::Str(Cow::Borrowed(s)),
            Value::Array(items) => Json::List(items.iter().map(Json::of).collect()),
            Value::Object(map) => Json::Object(
                map.iter()
                    .map(|(k, v)| (Cow::Borrowed(k.as_str()), Json::of(v)))
                    .collect(),
            ),
        }
    }

    /// The value as a [`Value`] (what a parsed call keeps).
    #[cfg(test)]
    pub(crate) fn into_value(self) -> Value {
        match self {
            Json::Null => Value::Null,
            Json::Bool(b) => Value::Bool(b),
            Json::Number(n) => Value::Number(n),
            Json::Str(s) => Value::String(s.into_owned()),
            Json::List(items) => Value::Array(items.into_iter().map(Json::into_value).collect()),
            Json::Object(entries) => Value::Object(
                entries
                    .into_iter()
                    .map(|(k, v)| (k.into_owned(), v.into_value()))
                    .collect(),
            ),
        }
    }

    /// An object's value for `key` (the last, when the key is repeated), as [`Value::get`].
    pub(crate) fn get(&self, key: &str) -> Option<&Json<'a>> {
        match self {
            Json::Object(entries) => entries.iter().rev().find(|(k, _)| k == key).map(|e| &e.1),
            _ => None,
        }
    }

    /// What kind of value this is, for a message (`a number`).
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            Json::Null => "null",
            Json::Bool(_) => "a boolean",
            Json::Number(_) => "a number",
            Json::Str(_) => "a string",
            Json::List(_) => "a list",
            Json::Object(_) => "an object",
        }
    }

    pub(crate) fn as_str(&self) -> Option<&str> {
        match self {
            Json::Str(s) => Some(s),
            _ => None,
        }
    }

    pub(crate) fn as_u64(&self) -> Option<u64> {
        match self {
            Json::Number(n) => n.as_u64(),
            _ => None,
        }
    }

    pub(crate) fn as_f64(&self) -> Option<f64> {
        match self {
            Json::Number(n) => n.as_f64(),
            _ => None,
        }
    }

    /// Write the canonical JSON of the value ([`crate::canonical_json`]).
    pub(crate) fn write_canonical(&self, out: &mut String) {
        match self {
            Json::Null => out.push_str("null"),
            Json::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            Json::Number(n) => write_number(n, out),
            Json::Str(s) => write_json_string(s, out),
            Json::List(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    item.write_canonical(out);
                }
                out.push(']');
            }
            Json::Object(entries) => {
                write_object(entries, out, &|_| true, &mut |_, value, out| {
                    value.write_canonical(out);
                });
            }
        }
    }
}

/// An object's entries as canonical JSON: keys sorted, each once (its last value), only the keys
/// `keep` keeps, each value written by `value`.
pub(crate) fn write_object<'j, 'a>(
    entries: &'j [(Cow<'a, str>, Json<'a>)],
    out: &mut String,
    keep: &dyn Fn(&str) -> bool,
    value: &mut dyn FnMut(&str, &'j Json<'a>, &mut String),
) {
    // Indices sorted by key, stable (so the last of a repeated key is the last of its run); on
    // the stack for the usual few keys.
    let mut small = [0u16; 16];
    let mut large = Vec::new();
    let order: &mut [u16] = if entries.len() <= small.len() {
        &mut small[..entries.len()]
    } else {
        large.extend(0..u16::try_from(entries.len()).unwrap_or(u16::MAX));
        &mut large
    };
    for (i, slot) in order.iter_mut().enumerate() {
        *slot = u16::try_from(i).unwrap_or(u16::MAX);
    }
    let key = |i: u16| entries[usize::from(i)].0.as_ref();
    order.sort_by(|a, b| key(*a).cmp(key(*b)));
    out.push('{');
    let mut first = true;
    for (n, &i) in order.iter().enumerate() {
        if order.get(n + 1).is_some_and(|&next| key(next) == key(i)) || !keep(key(i)) {
            continue;
        }
        if !first {
            out.push(',');
        }
        first = false;
        let (k, v) = &entries[usize::from(i)];
        write_json_string(k, out);
        out.push(':');
        value(k, v, out);
    }
    out.push('}');
}

/// A number as canonical JSON: integers as integers (`1.0` is `1`).
pub(crate) fn write_number(n: &Number, out: &mut String) {
    let mut digits = itoa::Buffer::new();
    if let Some(i) = n.as_i64() {
        out.push_str(digits.format(i));
    } else if let Some(u) = n.as_u64() {
        out.push_str(digits.format(u));
    } else {
        let f = n.as_f64().unwrap_or(0.0);
        if f.fract() == 0.0 && f.abs() < 9.0e15 {
            out.push_str(digits.format(f as i64));
        } else {
            let _ = write!(out, "{f}");
        }
    }
}

/// Where the first `"` or `\\` of `bytes` is, eight bytes at a time, also stopping at a byte
/// below 0x20 when `controls` (JSON refuses them inside a string): where a string's text ends or
/// needs a closer look (by the scan, the hand read, and the canonical writer).
pub(crate) fn string_stop(bytes: &[u8], controls: bool) -> Option<usize> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    // The high bit of each byte of `word` below `n` (at most 0x80); a false one only above a
    // true one (a borrow runs upwards), so the lowest bit set is exact.
    let below = |word: u64, n: u8| word.wrapping_sub(ONES * u64::from(n)) & !word & HIGHS;
    let equal = |word: u64, b: u8| below(word ^ (ONES * u64::from(b)), 1);
    let stop = |b: u8| b == b'"' || b == b'\\' || (controls && b < 0x20);
    let mut words = bytes.chunks_exact(8);
    let mut at = 0;
    for word in &mut words {
        let mut le = [0; 8];
        le.copy_from_slice(word);
        let word = u64::from_le_bytes(le);
        let mut found = equal(word, b'"') | equal(word, b'\\');
        if controls {
            found |= below(word, 0x20);
        }
        if found != 0 {
            return Some(at + (found.trailing_zeros() / 8) as usize);
        }
        at += 8;
    }
    words
        .remainder()
        .iter()
        .position(|&b| stop(b))
        .map(|i| at + i)
}

pub(crate) fn write_json_string(s: &str, out: &mut String) {
    out.push('"');
    // Most strings need no escape: the search eight bytes at a time says so, and the string is
    // copied whole.
    if string_stop(s.as_bytes(), true).is_none() {
        out.push_str(s);
        out.push('"');
        return;
    }
    // Runs of bytes that need no escape are copied whole (every escaped character is one ASCII
    // byte, so each index below is a character boundary).
    let mut start = 0;
    for (i, &b) in s.as_bytes().iter().enumerate() {
        let escape = match b {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            b'\n' => "\\n",
            b'\r' => "\\r",
            b'\t' => "\\t",
            0..=0x1f => "",
            _ => continue,
        };
        out.push_str(&s[start..i]);
        if escape.is_empty() {
            let _ = write!(out, "\\u{b:04x}");
        } else {
            out.push_str(escape);
        }
        start = i + 1;
    }
    out.push_str(&s[start..]);
    out.push('"');
}

impl<'de: 'a, 'a> Deserialize<'de> for Json<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(JsonVisitor)
    }
}

struct JsonVisitor;

impl<'de> serde::de::Visitor<'de> for JsonVisitor {
    type Value = Json<'de>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("any valid JSON value")
    }
    fn visit_bool<E>(self, b: bool) -> Result<Json<'de>, E> {
        Ok(Json::Bool(b))
    }
    fn visit_i64<E>(self, n: i64) -> Result<Json<'de>, E> {
        Ok(Json::Number(n.into()))
    }
    fn visit_u64<E>(self, n: u64) -> Result<Json<'de>, E> {
        Ok(Json::Number(n.into()))
    }
    fn visit_f64<E>(self, f: f64) -> Result<Json<'de>, E> {
        // As serde_json's `Value`: a float it cannot hold (none comes from JSON text) is null.
        Ok(Number::from_f64(f).map_or(Json::Null, Json::Number))
    }
    fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Json<'de>, E> {
        Ok(Json::Str(Cow::Borrowed(s)))
    }
    fn visit_str<E>(self, s: &str) -> Result<Json<'de>, E> {
        Ok(Json::Str(Cow::Owned(s.to_owned())))
    }
    fn visit_string<E>(self, s: String) -> Result<Json<'de>, E> {
        Ok(Json::Str(Cow::Owned(s)))
    }
    fn visit_unit<E>(self) -> Result<Json<'de>, E> {
        Ok(Json::Null)
    }
    fn visit_none<E>(self) -> Result<Json<'de>, E> {
        Ok(Json::Null)
    }
    fn visit_some<D: serde::Deserializer<'de>>(self, d: D) -> Result<Json<'de>, D::Error> {
        Json::deserialize(d)
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Json<'de>, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(64));
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok(Json::List(items))
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Json<'de>, A::Error> {
        let mut entries = Vec::with_capacity(map.size_hint().unwrap_or(0).clamp(4, 64));
        while let Some(key) = map.next_key_seed(CowStr)? {
            entries.push((key, map.next_value()?));
        }
        Ok(Json::Object(entries))
    }
}

/// A string borrowed from the text when it has no escapes (serde's `Cow<str>` always copies).
pub(crate) struct CowStr;

impl<'de> serde::de::DeserializeSeed<'de> for CowStr {
    type Value = Cow<'de, str>;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Cow<'de, str>, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> serde::de::Visitor<'de> for CowStr {
    type Value = Cow<'de, str>;
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a string")
    }
    fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Cow<'de, str>, E> {
        Ok(Cow::Borrowed(s))
    }
    fn visit_str<E>(self, s: &str) -> Result<Cow<'de, str>, E> {
        Ok(Cow::Owned(s.to_owned()))
    }
    fn visit_string<E>(self, s: String) -> Result<Cow<'de, str>, E> {
        Ok(Cow::Owned(s))
    }
}

/// `T` read only from a JSON object: a derived struct also reads from a list, which the walk of a
/// session file refuses.
pub(crate) struct MapOnly<T>(pub T);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for MapOnly<T> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Object<T>(std::marker::PhantomData<T>);
        impl<'de, T: Deserialize<'de>> serde::de::Visitor<'de> for Object<T> {
            type Value = T;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
                T::deserialize(serde::de::value::MapAccessDeserializer::new(map))
            }
        }
        d.deserialize_map(Object(std::marker::PhantomData))
            .map(MapOnly)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Strings are escaped as they always were (the canonical form is stored in snapshots):
    /// checked against the character-at-a-time writer it replaced.
    #[test]
    fn strings_escape_as_before() {
        let before = |s: &str| {
            let mut out = String::from('"');
            for ch in s.chars() {
                match ch {
                    '"' => out.push_str("\\\""),
                    '\\' => out.push_str("\\\\"),
                    '\n' => out.push_str("\\n"),
                    '\r' => out.push_str("\\r"),
                    '\t' => out.push_str("\\t"),
                    c if (c as u32) < 0x20 => {
                        let _ = write!(out, "\\u{:04x}", c as u32);
                    }
                    c => out.push(c),
                }
            }
            out.push('"');
            out
        };
        let all: String = (0u8..0x80).map(char::from).collect();
        for s in [
            "",
            "plain",
            "a\"b\\c\n",
            "\u{1}\u{8}\u{c}\u{1f}x",
            "é☃\t",
            &all,
        ] {
            let mut out = String::new();
            write_json_string(s, &mut out);
            assert_eq!(out, before(s), "{s:?}");
        }
    }

    /// The borrowed read answers as the `Value` does, canonical form included, on repeated and
    /// escaped keys, numbers of every kind and nesting.
    #[test]
    fn borrowed_reads_as_the_value() {
        for text in [
            r#"{"b":1,"a":[1.0,2.5,-3,{"z":null,"y":true}],"c":"x\"y"}"#,
            r#"{"a":1,"a":2,"b":{"k":1,"k":{"m":"n"}}}"#,
            r#"{"a\u0062":"\u00e9","ab":"later"}"#,
            r#"{"n":18446744073709551615,"m":-9223372036854775808,"f":1e300,"g":12.0}"#,
            r#"[{"a":1},"s",null,false]"#,
            r#""text""#,
            r#"{}"#,
            r#"{"k\n":"a\"b\\c\n\r\t\u0001\u001f é ☃ \u007f","":""}"#,
        ] {
            let value: Value = serde_json::from_str(text).unwrap();
            let json: Json<'_> = serde_json::from_str(text).unwrap();
            let (mut a, mut b) = (String::new(), String::new());
            json.write_canonical(&mut a);
            Json::of(&value).write_canonical(&mut b);
            assert_eq!(a, crate::canonical_json(&value), "{text}");
            assert_eq!(b, a, "{text}");
            assert_eq!(json.clone().into_value(), value, "{text}");
            for key in ["a", "ab", "b", "n", "f", "missing"] {
                assert_eq!(
                    json.get(key).map(|j| j.clone().into_value()),
                    value.get(key).cloned(),
                    "{text} {key}"
                );
                let j = json.get(key);
                let v = value.get(key);
                assert_eq!(j.and_then(Json::as_u64), v.and_then(Value::as_u64));
                assert_eq!(j.and_then(Json::as_f64), v.and_then(Value::as_f64));
                assert_eq!(j.and_then(Json::as_str), v.and_then(Value::as_str));
            }
        }
        let many: Value = (0..40).map(|i| (format!("k{i:02}"), json!(i))).collect();
        let mut out = String::new();
        Json::of(&many).write_canonical(&mut out);
        assert_eq!(out, crate::canonical_json(&many));
    }
}
