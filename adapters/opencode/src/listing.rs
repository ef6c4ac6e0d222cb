//! A session listing (`GET /experimental/session`, `GET /session`) read as it streams: each
//! entry typed as it arrives (only the fields agentwatch uses are kept), one entry per session
//! id (a later entry of an id replaces the earlier: a hostile server's 870,000 copies of one
//! session cost one), and at most [`MAX_LISTED_SESSIONS`] sessions, past which the listing is
//! an error, never a shorter (and so "complete") list. What the listing costs is bounded by
//! its sessions, not by the answer's length or shape.

use crate::problem::TOO_MANY;
use serde::Deserialize;
use serde::de::{self, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};
use std::collections::HashMap;
use std::io::Read;

/// Most sessions one listing may name (a server's every session of every project: tens of
/// thousands are far beyond any real one).
pub const MAX_LISTED_SESSIONS: usize = 50_000;

/// Read a listing from `reader` as it arrives (buffer it: serde_json reads byte by byte): the
/// sessions in the order each id first appears, at most `max` of them.
///
/// # Errors
/// A listing that is not a JSON list of session objects with a string `id`, or that names
/// more than `max` sessions (`more than N sessions in one listing (the limit)`).
pub fn read_listing(reader: impl Read, max: usize) -> Result<Vec<SessionInfo>, serde_json::Error> {
    let mut deserializer = serde_json::Deserializer::from_reader(reader);
    let infos = de::Deserializer::deserialize_seq(&mut deserializer, Listing { max })?;
    deserializer.end()?;
    Ok(infos)
}

/// The visitor of a listing: one entry per id, at most `max`.
struct Listing {
    max: usize,
}

impl<'de> Visitor<'de> for Listing {
    type Value = Vec<SessionInfo>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a list of sessions")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut infos: Vec<SessionInfo> = Vec::new();
        let mut index: HashMap<String, usize> = HashMap::new();
        while let Some(info) = seq.next_element::<SessionInfo>()? {
            if let Some(&at) = index.get(&info.id) {
                infos[at] = info;
                continue;
            }
            if infos.len() >= self.max {
                return Err(de::Error::custom(format!(
                    "{TOO_MANY}{} sessions in one listing (the limit)",
                    self.max
                )));
            }
            index.insert(info.id.clone(), infos.len());
            infos.push(info);
        }
        Ok(infos)
    }
}

/// One entry of a session list, typed: the fields agentwatch reads. Unknown fields are skipped
/// without being built; a wrong-typed known field fails the whole list.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct SessionInfo {
    pub id: String,
    #[serde(default, rename = "parentID")]
    pub parent_id: Option<String>,
    /// Cut to [`MAX_TITLE_BYTES`].
    #[serde(default, deserialize_with = "bounded_text")]
    pub title: Option<String>,
    /// Cut to [`MAX_TITLE_BYTES`].
    #[serde(default, deserialize_with = "bounded_text")]
    pub directory: Option<String>,
    #[serde(default)]
    pub agent: Option<String>,
    #[serde(default)]
    pub time: Option<SessionTime>,
}

/// The longest title or directory kept of a listed session, in bytes: the rest is cut (a
/// session's title is shown in alerts and pages, not read whole by anything).
pub const MAX_TITLE_BYTES: usize = 4096;

/// An optional string cut to [`MAX_TITLE_BYTES`] (at a character boundary); anything but a
/// string or null is an error, as for a plain `Option<String>`.
fn bounded_text<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<String>, D::Error> {
    struct Bounded;
    impl<'de> serde::de::Visitor<'de> for Bounded {
        type Value = Option<String>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a string")
        }
        fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Self::Value, E> {
            let mut end = v.len().min(MAX_TITLE_BYTES);
            while !v.is_char_boundary(end) {
                end -= 1;
            }
            Ok(Some(v[..end].to_owned()))
        }
        fn visit_none<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_some<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
            d.deserialize_str(self)
        }
    }
    deserializer.deserialize_option(Bounded)
}

/// A session's `time` object (milliseconds since the epoch).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct SessionTime {
    #[serde(default)]
    pub created: Option<Number>,
    #[serde(default)]
    pub updated: Option<Number>,
}

impl SessionInfo {
    /// The info as the JSON object opencode sent, minus the fields not kept.
    #[must_use]
    pub fn into_json(self) -> Value {
        let mut object = Map::new();
        object.insert("id".into(), Value::String(self.id));
        for (key, value) in [
            ("parentID", self.parent_id),
            ("title", self.title),
            ("directory", self.directory),
            ("agent", self.agent),
        ] {
            if let Some(value) = value {
                object.insert(key.into(), Value::String(value));
            }
        }
        if let Some(time) = self.time {
            let mut t = Map::new();
            for (key, value) in [("created", time.created), ("updated", time.updated)] {
                if let Some(value) = value {
                    t.insert(key.into(), Value::Number(value));
                }
            }
            object.insert("time".into(), Value::Object(t));
        }
        Value::Object(object)
    }
}
