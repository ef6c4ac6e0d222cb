//! Where a session's calls go as they are read, one at a time, with no list of calls built: into
//! a detector made from the session read up to its calls ([`NewDetector`]), then to a watcher
//! ([`CallWatcher`]), through [`CallSink`]. Serde's borrowed read of a session feeds it
//! ([`serde_watch`]); so does the hand reader of [`crate::hand`], which must answer as serde's
//! read does, and [`crate::watch`] chooses between the two.

use crate::detector::SessionDetector;
use crate::json::{CowStr, Json, MapOnly};
use crate::matcher::{CallRef, LineCountsText};
use crate::model::{
    CallStatus, CallText, CallTime, Session, SessionDoc, check_call, is_session_key,
};
use serde::Deserialize;

/// How [`crate::watch_session_text`] makes a session's detector, from the session read up to its
/// calls (its line counts may be taken: they are read borrowed for the calls' sake).
pub type NewDetector<'n> = dyn Fn(&mut Session) -> SessionDetector + 'n;

/// What [`crate::watch_session_text`]'s watcher is told after each call of a session: the session
/// (without calls), how many of its calls are read (counted or not), the call's effect time (its
/// end, else its start, as [`crate::Call::end_ms`]), and the detector it was pushed into. It
/// answers whether to read on.
pub type CallWatcher<'w> =
    dyn FnMut(&Session, usize, Option<i64>, &mut SessionDetector) -> bool + 'w;

/// [`crate::watch_session_text`] through serde's reader, for a session the hand reader leaves
/// alone.
pub(crate) fn serde_watch(
    text: &str,
    new_detector: &NewDetector<'_>,
    after_call: &mut CallWatcher<'_>,
) -> Option<(Session, SessionDetector)> {
    let mut de = serde_json::Deserializer::from_str(text);
    let visitor = DetectVisitor {
        new_detector,
        after_call,
    };
    let detected = serde::de::Deserializer::deserialize_map(&mut de, visitor).ok()?;
    de.end().ok()?;
    Some(detected)
}

/// Serde's borrowed read of a session ([`serde_watch`]): the keys of [`SessionDoc`] (each at most
/// once), the calls pushed as they come; any key of the session after `calls` fails it (a detector
/// is made from the session before its first call).
struct DetectVisitor<'c, 'w, 'h> {
    new_detector: &'c NewDetector<'c>,
    after_call: &'w mut CallWatcher<'h>,
}

/// Where the calls of [`crate::watch_session_text`] go, one at a time as they are read: into a
/// detector made already, with the session's line counts as they were read, then to the watcher.
pub(crate) struct CallSink<'d, 'l, 'h> {
    pub(crate) session: &'d Session,
    pub(crate) detector: &'d mut SessionDetector,
    pub(crate) line_counts: &'d LineCountsText<'l>,
    pub(crate) after_call: &'d mut CallWatcher<'h>,
    /// How many calls were taken.
    pub(crate) read: usize,
}

impl CallSink<'_, '_, '_> {
    /// Take the next call: checked as the format wants it ([`check_call`], an input that is an
    /// object), pushed when it counts, and shown to the watcher; false when the call is refused
    /// or the watcher says stop. Its metadata and time are taken out of `call`; the rest is
    /// left to the caller, which may keep the input's storage for the next call.
    pub(crate) fn take(&mut self, call: &mut CallText<'_>) -> bool {
        if !matches!(call.input, Json::Object(_))
            || check_call(self.read, &call.tool, call.input.get("command")).is_err()
        {
            return false;
        }
        self.read += 1;
        let status = CallStatus::from_text(&call.status);
        let time = call.time.take().map(|MapOnly(t)| t.time());
        let meta = std::mem::take(&mut call.metadata);
        let counted = CallRef::new(
            &call.tool,
            &call.input,
            &status,
            || meta,
            call.output_hash,
            time,
        );
        if let Some(call) = counted {
            self.detector.push_ref_with(&call, self.line_counts);
        }
        let effect_ms = time.and_then(CallTime::effect_ms);
        (self.after_call)(self.session, self.read, effect_ms, self.detector)
    }
}

/// [`DetectVisitor`]'s reader of `calls`.
struct CallsSeed<'s, 'd, 'l, 'h>(&'s mut CallSink<'d, 'l, 'h>);

/// Why [`serde_watch`] does not read a session (never shown: the usual read says why).
const NOT_READ: &str = "not read by detect's borrowed read";

impl<'de> serde::de::Visitor<'de> for DetectVisitor<'_, '_, '_> {
    type Value = (Session, SessionDetector);

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a session")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        use serde::de::Error as _;
        fn once<'de, T: Deserialize<'de>, A: serde::de::MapAccess<'de>>(
            slot: &mut Option<T>,
            map: &mut A,
        ) -> Result<(), A::Error> {
            if slot.is_some() {
                return Err(A::Error::custom(NOT_READ));
            }
            *slot = Some(map.next_value()?);
            Ok(())
        }
        let mut doc = SessionDoc::<CallText<'de>>::empty();
        let mut id = None;
        // `Option` fields: a key seen, its value (`null` is none).
        let (mut parent_id, mut title, mut agent, mut directory) = (None, None, None, None);
        let (mut label, mut labels, mut note, mut line_counts, mut loop_start) =
            (None, None, None, None, None);
        let mut detected = None;
        while let Some(key) = map.next_key_seed(CowStr)? {
            if detected.is_some() && key != "calls" && is_session_key(&key) {
                return Err(A::Error::custom(NOT_READ));
            }
            match &*key {
                "id" => once(&mut id, &mut map)?,
                "parent_id" => once(&mut parent_id, &mut map)?,
                "title" => once(&mut title, &mut map)?,
                "agent" => once(&mut agent, &mut map)?,
                "directory" => once(&mut directory, &mut map)?,
                "label" => once(&mut label, &mut map)?,
                "labels" => once(&mut labels, &mut map)?,
                "note" => once(&mut note, &mut map)?,
                "line_counts" => once(&mut line_counts, &mut map)?,
                "loop_start" => once(&mut loop_start, &mut map)?,
                "calls" => {
                    if detected.is_some() {
                        return Err(A::Error::custom(NOT_READ));
                    }
                    doc.id = id.take().ok_or_else(|| A::Error::custom(NOT_READ))?;
                    doc.parent_id = parent_id.take().flatten();
                    doc.title = title.take().flatten();
                    doc.agent = agent.take().flatten();
                    doc.directory = directory.take().flatten();
                    doc.label = label.take().flatten();
                    doc.labels = labels.take().flatten();
                    doc.note = note.take().flatten();
                    doc.loop_start = loop_start.take().flatten();
                    let mut session = doc.stub().map_err(|_| A::Error::custom(NOT_READ))?;
                    let mut detector = (self.new_detector)(&mut session);
                    let line_counts: Option<LineCountsText<'de>> = line_counts.take().flatten();
                    map.next_value_seed(CallsSeed(&mut CallSink {
                        session: &session,
                        detector: &mut detector,
                        line_counts: &line_counts.unwrap_or_default(),
                        after_call: &mut *self.after_call,
                        read: 0,
                    }))?;
                    detected = Some((session, detector));
                }
                _ => {
                    map.next_value::<serde::de::IgnoredAny>()?;
                }
            }
        }
        detected.ok_or_else(|| A::Error::custom(NOT_READ))
    }
}

impl<'de> serde::de::DeserializeSeed<'de> for CallsSeed<'_, '_, '_, '_> {
    type Value = ();
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> serde::de::Visitor<'de> for CallsSeed<'_, '_, '_, '_> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a list of calls")
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        use serde::de::Error as _;
        while let Some(MapOnly(mut call)) = seq.next_element::<MapOnly<CallText<'de>>>()? {
            if !self.0.take(&mut call) {
                return Err(A::Error::custom(NOT_READ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
pub(crate) mod tests {
    /// Session texts of every shape `detect`'s borrowed read meets (escapes, unicode, numbers
    /// written as text, nulls, missing and unknown fields, repeated keys, metadata of every
    /// shape, what the format refuses), each with whether that read takes it.
    pub(crate) fn borrowed_read_cases() -> Vec<(String, bool)> {
        let session = |calls: &str| {
            format!(
                r#"{{"id":"s","directory":"/p","line_counts":{{"/p/a.rs":120,"/p/\u00e9.rs":40}},"calls":[{calls}]}}"#
            )
        };
        let times = |call: &str, n: usize| vec![call; n].join(",");
        let read = r#"{"tool":"read","input":{"filePath":"a.rs","offset":1,"limit":50},"status":"completed","output_hash":"00000000000000aa"}"#;
        let bash = r#"{"tool":"bash","input":{"command":"cd /p && cargo test","description":"x"},"status":"completed","metadata":{"exit":101}}"#;
        // Each text, and whether the borrowed read takes it (else the usual read answers).
        let mut cases: Vec<(String, bool)> = vec![
            (session(""), true),
            (session(&times(read, 12)), true),
            (session(&times(bash, 12)), true),
            (session(&[times(read, 6), times(bash, 6)].join(",")), true),
            // Escapes and unicode in keys and values, and `\u` escapes of plain letters.
            (
                session(&times(
                    r#"{"tool":"read","input":{"file\u0050ath":"\u00e9.rs","offset":"1"},"status":"completed"}"#,
                    9,
                )),
                true,
            ),
            (
                session(&times(
                    r#"{"tool":"bash","input":{"command":"echo \"a\tb\" \u2603 | grep 'x\\y'","k\n":"\u0000"},"status":"completed","metadata":{"e\u0078it":0}}"#,
                    9,
                )),
                true,
            ),
            (
                session(&times(
                    r#"{"t\u006fol":"b\u0061sh","input":{"command":"ls"},"status":"compl\u0065ted"}"#,
                    9,
                )),
                true,
            ),
            // Numbers of every kind, and numbers written as text.
            (
                session(&times(
                    r#"{"tool":"read","input":{"filePath":"a.rs","offset":2.0,"limit":1e2},"status":"completed","metadata":{"total_lines":"80","lines_read":5.0}}"#,
                    9,
                )),
                true,
            ),
            (
                session(&times(
                    r#"{"tool":"read","input":{"filePath":"a.rs","offset":18446744073709551616,"limit":-3},"status":"completed","metadata":{"total_lines":90,"lines_read":"5"}}"#,
                    9,
                )),
                true,
            ),
            (
                session(&times(
                    r#"{"tool":"bash","input":{"command":"git commit -m x"},"status":"completed","metadata":{"exit":"0"}}"#,
                    9,
                )),
                true,
            ),
            (
                session(&times(
                    r#"{"tool":"bash","input":{"command":"git commit -m x"},"status":"completed","metadata":{"exit":0.0}}"#,
                    9,
                )),
                true,
            ),
            // Nulls, missing and unknown fields, statuses that do not count.
            (
                session(&times(
                    r#"{"tool":"bash","input":{"command":"ls","x":null},"status":"completed","metadata":null,"time":null,"output_hash":null,"extra":[1,{"a":2}]}"#,
                    9,
                )),
                true,
            ),
            (
                session(&times(
                    r#"{"tool":"bash","input":{"command":null},"status":"completed","metadata":{"exit":null}}"#,
                    9,
                )),
                false,
            ),
            (
                session(&times(
                    r#"{"tool":"glob","input":{},"status":"running"}"#,
                    9,
                )),
                true,
            ),
            (
                session(&times(
                    r#"{"tool":"glob","input":{"pattern":"*"},"status":"odd","time":{"start":5}}"#,
                    9,
                )),
                true,
            ),
            (
                session(&times(
                    r#"{"tool":"grep","input":{"pattern":"a"},"status":"error","time":{"start":1.5,"end":9}}"#,
                    9,
                )),
                true,
            ),
            // Repeated keys: the last counts.
            (
                session(&times(
                    r#"{"tool":"bash","input":{"command":"ls","command":"pwd"},"status":"completed","metadata":{"exit":1,"exit":0,"diff":"x","diff":" "}}"#,
                    9,
                )),
                true,
            ),
            // Metadata of every shape the matcher reads.
            (
                session(&times(
                    r#"{"tool":"edit","input":{"filePath":"a.rs"},"status":"completed","metadata":{"diff":"\n \t"}}"#,
                    9,
                )),
                true,
            ),
            (
                session(&times(
                    r#"{"tool":"edit","input":{"filePath":"a.rs"},"status":"completed","metadata":{"diff":"-a\n+b","filediff":{"before":"x\n","after":"y"}}}"#,
                    3,
                )),
                true,
            ),
            (
                session(&times(
                    r#"{"tool":"edit","input":{"filePath":"a.rs"},"status":"completed","metadata":{"filediff":{"additions":0,"deletions":2,"additions":0}}}"#,
                    3,
                )),
                true,
            ),
            (
                session(&times(
                    r#"{"tool":"edit","input":{"filePath":"a.rs"},"status":"completed","metadata":{"files":[7,null,{"additions":-1},{"deletions":"2"},[{"additions":3}]]}}"#,
                    9,
                )),
                true,
            ),
            (
                session(&times(
                    r#"{"tool":"edit","input":{"filePath":"a.rs"},"status":"completed","metadata":{"files":[{"additions":1}],"filediff":[1]}}"#,
                    3,
                )),
                true,
            ),
            (
                session(&times(
                    r#"{"tool":"write","input":{"filePath":"a.rs"},"status":"completed","metadata":[{"diff":"x"}]}"#,
                    3,
                )),
                true,
            ),
            (
                session(&times(
                    r#"{"tool":"edit","input":{"filePath":"a.rs"},"status":"completed","metadata":"diff"}"#,
                    9,
                )),
                true,
            ),
            // What the borrowed read leaves to the usual one: an output hash with escapes, and
            // what the format refuses.
            (
                session(&times(
                    r#"{"tool":"read","input":{"filePath":"a.rs"},"status":"completed","output_hash":"\u0061"}"#,
                    9,
                )),
                false,
            ),
            (
                session(r#"{"tool":"bash","input":[],"status":"completed"}"#),
                false,
            ),
            (
                session(r#"{"tool":"bash","input":{"command":7},"status":"completed"}"#),
                false,
            ),
            (
                session(r#"{"tool":"","input":{},"status":"completed"}"#),
                false,
            ),
            (
                session(r#"{"tool":"bash","input":{},"status":"completed","time":[1]}"#),
                false,
            ),
            (
                session(r#"{"tool":"bash","input":{},"status":"completed""#),
                false,
            ),
            (r#"{"id":"","calls":[]}"#.to_owned(), false),
        ];
        cases.push((
            session(&times(bash, 3))
                .replace(r#""id":"s""#, r#""id":"s","title":"x (@explore subagent)""#),
            true,
        ));
        // The session's own keys: the calls are pushed as they are read when they come after
        // the keys the detector is made of; anything else is left to the usual read.
        let calls = times(bash, 12);
        for (text, borrowed) in [
            (
                format!(
                    r#"{{"x":[{{"calls":1}}],"d\u0069rectory":"/p","id":"s","parent_id":null,"title":null,"labels":{{"precise":"must_flag"}},"label":"must_not_flag","note":"n","loop_start":2,"calls":[{calls}],"y":{{"id":1}}}}"#
                ),
                true,
            ),
            (format!(r#"{{"calls":[{calls}],"id":"s"}}"#), false),
            (
                format!(r#"{{"id":"s","calls":[{calls}],"line_counts":{{"/p/a.rs":1}}}}"#),
                false,
            ),
            (
                format!(r#"{{"id":"s","calls":[{calls}],"note":null}}"#),
                false,
            ),
            (
                format!(r#"{{"id":"s","calls":[],"calls":[{calls}]}}"#),
                false,
            ),
            (format!(r#"{{"id":"s","id":"t","calls":[{calls}]}}"#), false),
            (format!(r#"{{"id":"s","calls":[{calls}]}} x"#), false),
            (r#"{"id":"s","calls":null}"#.to_owned(), false),
            (r#"{"id":"s"}"#.to_owned(), false),
            (
                r#"{"id":"s","labels":{"x":"must_flag"},"calls":[]}"#.to_owned(),
                false,
            ),
            (
                r#"["s",null,null,null,null,null,null,null,null,null,[]]"#.to_owned(),
                false,
            ),
        ] {
            cases.push((text, borrowed));
        }
        cases
    }
}
