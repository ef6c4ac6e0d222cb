//! A session's calls pushed into detectors straight from its text (`detect`, the backtest, issue
//! 19): [`detect_session_text`] and [`watch_session_text`] read each call borrowed, by hand
//! ([`crate::hand`]) or else through serde ([`crate::sink`]), and push it as it is read;
//! [`SessionCalls`] keeps them for a caller that pushes them itself. A session those reads do not
//! take is read the usual way ([`crate::model`]), for its answer or its exact error.

use crate::config::DetectConfig;
use crate::detector::SessionDetector;
use crate::hand::{Untouched, watch};
use crate::json::{Json, MapOnly};
use crate::matcher::CallRef;
use crate::meta::{MetaFacts, ReadMetadata};
use crate::model::{
    CallStatus, CallText, CallTime, ParseError, Session, SessionDoc, check_call, read_session,
};
use crate::sink::{CallWatcher, NewDetector, serde_watch};
use std::borrow::Cow;
use std::collections::BTreeMap;
// Named in the docs only.
#[cfg(doc)]
use crate::model::{Call, parse_judged_session_text, parse_session_text};
#[cfg(doc)]
use serde_json::Value;

/// A session's calls read typed and borrowed from its text in the matcher's form (`CallText`:
/// no [`Call`], no [`Value`]), kept for a caller that pushes them into detectors itself, some
/// more than once: the backtest walks every prefix and may start a detector over (issue 19).
#[derive(Debug)]
pub struct SessionCalls<'a> {
    calls: Vec<ReadCall<'a>>,
}

/// One call of [`SessionCalls`], checked as the format wants it.
#[derive(Debug)]
struct ReadCall<'a> {
    tool: Cow<'a, str>,
    input: Json<'a>,
    status: CallStatus,
    meta: MetaFacts<'a>,
    output_hash: Option<&'a str>,
    time: Option<CallTime>,
}

impl<'a> SessionCalls<'a> {
    /// The session of `text` without its calls, and its calls; `None` for a session this read does
    /// not take (any error, an input that is not an object, an output hash with escapes): read it
    /// the usual way ([`parse_judged_session_text`]) for its answer or its exact error.
    pub fn read(text: &'a str) -> Option<(Session, Self)> {
        let MapOnly(mut doc) =
            serde_json::from_str::<MapOnly<SessionDoc<CallText<'a>>>>(text).ok()?;
        let session = doc.stub().ok()?;
        let calls = doc
            .calls
            .into_iter()
            .enumerate()
            .map(|(i, MapOnly(call))| {
                if !matches!(call.input, Json::Object(_)) {
                    return None;
                }
                check_call(i, &call.tool, call.input.get("command")).ok()?;
                Some(ReadCall {
                    status: CallStatus::from_text(&call.status),
                    time: call.time.map(|MapOnly(t)| t.time()),
                    tool: call.tool,
                    input: call.input,
                    meta: call.metadata,
                    output_hash: call.output_hash,
                })
            })
            .collect::<Option<Vec<_>>>()?;
        Some((session, Self { calls }))
    }

    /// How many calls (counted or not) the session has.
    pub fn len(&self) -> usize {
        self.calls.len()
    }

    /// Whether the session has no calls.
    pub fn is_empty(&self) -> bool {
        self.calls.is_empty()
    }

    /// When call `i`'s effect happened (its end, else its start), as [`Call::end_ms`].
    pub fn end_ms(&self, i: usize) -> Option<i64> {
        self.calls[i].time.and_then(CallTime::effect_ms)
    }

    /// Push the calls of `range` into `detector`, in order, as [`SessionDetector::push`] would
    /// push them as [`Call`]s (calls that do not count are skipped).
    pub fn push(&self, range: std::ops::Range<usize>, detector: &mut SessionDetector) {
        for call in &self.calls[range] {
            let counted = CallRef::new(
                &call.tool,
                &call.input,
                &call.status,
                || call.meta.clone(),
                call.output_hash,
                call.time,
            );
            if let Some(call) = counted {
                detector.push_ref(&call);
            }
        }
    }
}

/// Parse one session of a session file from its JSON text and push its calls into a new
/// detector as they are read, dropping them: the session comes back without calls and without
/// line counts, and the detector with its calls done ([`SessionDetector::calls_done`]: the line
/// counts are read borrowed for the calls' sake and not kept). Of each
/// call only what the matcher reads is built, borrowed from the text (`CallText`); a session
/// that does not read so is read again through [`parse_session_text`]'s reader. The same errors
/// as [`parse_session_text`]; the detector is the one that would have been fed its calls.
pub fn detect_session_text(
    index: usize,
    text: &str,
    config: &DetectConfig,
) -> Result<(Session, SessionDetector), ParseError> {
    let (session, mut detector) = match detect_borrowed(text, config) {
        Some(detected) => detected,
        None => detect_calls(index, text, config)?,
    };
    detector.calls_done();
    Ok((session, detector))
}

/// [`detect_session_text`] through [`parse_session_text`]'s reader: each call built as a
/// [`Call`] (with only the metadata the matcher reads) and pushed.
fn detect_calls(
    index: usize,
    text: &str,
    config: &DetectConfig,
) -> Result<(Session, SessionDetector), ParseError> {
    let mut detector = None;
    let mut session = read_session::<Option<ReadMetadata>>(index, text, |stub, call| {
        detector
            .get_or_insert_with(|| SessionDetector::new(stub, config))
            .push(&call);
    })?;
    let detector = detector.unwrap_or_else(|| SessionDetector::new(&session, config));
    session.line_counts = BTreeMap::new();
    Ok((session, detector))
}

/// `detect`'s read of a session (issue 19): each call typed and borrowed straight into the
/// matcher's form ([`CallText`] to [`CallRef`]), no [`Call`] and no [`Value`], and pushed into
/// the detector as it is read (no list of calls) when `calls` comes after the keys the session
/// is made of, as this tool writes it. `None` for a session it does not read (whatever the
/// reason): [`detect_session_text`] then reads it the usual way, for its answer or its exact
/// error.
fn detect_borrowed(text: &str, config: &DetectConfig) -> Option<(Session, SessionDetector)> {
    watch_session_text(
        text,
        &|session| SessionDetector::taking_line_counts(session, config),
        &mut |_, _, _, _| true,
    )
}

/// `detect`'s borrowed read of a session ([`detect_session_text`]) for a caller that looks at the
/// detector after each call (the backtest judges its prefixes as they are read, issue 19): the
/// session without its calls and the detector of all of them (made by `new_detector`), with no
/// list of calls built. `None` for a session this read does not take, or when `after_call` says
/// stop: read it again the usual way ([`SessionCalls::read`], [`parse_session_text`]) for its
/// answer or its error.
pub fn watch_session_text(
    text: &str,
    new_detector: &NewDetector<'_>,
    after_call: &mut CallWatcher<'_>,
) -> Option<(Session, SessionDetector)> {
    match watch(text, new_detector, after_call) {
        Ok(read) => read,
        Err(Untouched) => serde_watch(text, new_detector, after_call),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Profile;
    use crate::model::{parse_judged_session_text, parse_session_text};
    use crate::sink::tests::borrowed_read_cases;

    /// Every shape a session can take reads, or fails naming the session and the place in it:
    /// lists where objects belong, `null`s, repeated keys, escaped keys, numbers of every kind,
    /// and metadata in every form the matcher reads. And `detect`'s read (only the metadata the
    /// matcher reads) feeds the detector the same, and fails the same.
    #[test]
    fn every_shape_reads_or_names_its_place() {
        let call = |body: &str| format!(r#"{{"id":"s","directory":"/p","calls":[{body}]}}"#);
        let bash = |meta: &str| {
            call(&format!(
                r#"{{"tool":"bash","input":{{"command":"git commit -m x"}},"status":"completed","metadata":{meta}}}"#
            ))
        };
        let edit = |meta: &str| {
            call(&format!(
                r#"{{"tool":"edit","input":{{"filePath":"a.rs"}},"status":"completed","metadata":{meta}}}"#
            ))
        };
        // Each shape, and the error it gives (`None`: it reads).
        let mut cases: Vec<(String, Option<&str>)> = vec![
            (r#"{"id":"s","calls":[]}"#.to_owned(), None),
            (r#"["s",null,null,null,null,null,null,null,null,[]]"#.to_owned(), Some("session #3: invalid type: a list, expected an object")),
            (r#"{"id":"","calls":[]}"#.to_owned(), Some("session #3 at id: must not be empty")),
            (r#"{"id":7,"calls":[]}"#.to_owned(), Some("session #3 at id: invalid type: integer `7`, expected a string")),
            (r#"{"id":"s","id":"t","calls":[]}"#.to_owned(), Some("session #3: duplicate field `id`")),
            (r#"{"id":"s","calls":[],"label":"must_flag","loop_start":0,"line_counts":{"/p/a.rs":9}}"#.to_owned(), None),
            (r#"{"id":"s","calls":[],"label":"maybe"}"#.to_owned(), Some("session #3 (s) at label: invalid value: string \"maybe\", expected must_flag or must_not_flag")),
            (r#"{"id":"s","calls":[],"labels":{"precise":"must_flag","design":"must_not_flag"}}"#.to_owned(), None),
            (r#"{"id":"s","calls":[],"labels":{"fast":"must_flag"}}"#.to_owned(), Some("session #3 (s) at labels: \"fast\" is not a profile name (design, precise)")),
            (r#"{"id":"s","calls":[],"labels":{"precise":null}}"#.to_owned(), Some("session #3 (s) at labels.precise: invalid type: null, expected must_flag or must_not_flag")),
            (r#"{"id":"s","calls":[],"labels":["precise"]}"#.to_owned(), Some("session #3 (s) at labels: invalid type: a list, expected an object")),
            (r#"{"id":"s","calls":[],"labels":null}"#.to_owned(), None),
            (r#"{"id":"s","calls":[],"label":null,"line_counts":null,"loop_start":null,"title":null}"#.to_owned(), None),
            (r#"{"id":"s","calls":[],"line_counts":{"a":1.5}}"#.to_owned(), Some("session #3 (s) at line_counts.a: invalid type: floating point `1.5`, expected u64")),
            (r#"{"id":"s","calls":[],"line_counts":{"a":1,"a":2}}"#.to_owned(), None),
            (r#"{"id":"s","calls":[],"loop_start":-1}"#.to_owned(), Some("session #3 (s) at loop_start: invalid value: integer `-1`, expected usize")),
            (r#"{"id":"s","calls":null}"#.to_owned(), Some("session #3 (s) at calls: invalid type: null, expected a list")),
            (r#"{"id":"s"}"#.to_owned(), Some("session #3 (s): missing field `calls`")),
            (call(r#"["bash",{"command":"ls"},"completed"]"#), Some("session #3 (s) at calls[0]: invalid type: a list, expected an object")),
            (call(r#"{"tool":"","input":{},"status":"completed"}"#), Some("session #3 (s) at calls[0].tool: must not be empty")),
            (call(r#"{"tool":"bash","input":null,"status":"completed"}"#), Some("session #3 (s) at calls[0].input: invalid type: null, expected an object")),
            (call(r#"{"tool":"bash","input":{"command":7},"status":"completed"}"#), Some("session #3 (s) at calls[0].input.command: a bash command must be a string, found a number")),
            (call(r#"{"tool":"bash","input":{"command":"ls"},"status":3}"#), Some("session #3 (s) at calls[0].status: invalid type: integer `3`, expected a string")),
            (call(r#"{"tool":"bash","input":{"command":"ls"},"status":"odd"}"#), None),
            (call(r#"{"tool":"bash","tool":"read","input":{"command":"ls"},"status":"completed"}"#), Some("session #3 (s) at calls[0]: duplicate field `tool`")),
            (call(r#"{"tool":"bash","input":{"command":"ls"},"status":"completed"}"#), None),
            (call(r#"{"tool":"bash","input":{"command":"ls"},"status":"completed","output_hash":7}"#), Some("session #3 (s) at calls[0].output_hash: invalid type: integer `7`, expected a string")),
            (call(r#"{"tool":"bash","input":{"command":"ls"},"status":"error","output_hash":null}"#), None),
            (call(r#"{"tool":"bash","input":{"command":"ls"},"status":"completed","time":[1,2]}"#), Some("session #3 (s) at calls[0].time: invalid type: a list, expected an object")),
            (call(r#"{"tool":"bash","input":{"command":"ls"},"status":"completed","time":{"start":1.5,"end":1e3}}"#), None),
            (call(r#"{"tool":"bash","input":{"command":"ls"},"status":"completed","time":{"start":"1"}}"#), Some("session #3 (s) at calls[0].time.start: invalid type: string \"1\", expected a number (unix ms)")),
            (call(r#"{"tool":"bash","input":{"command":"ls"},"status":"completed","time":null}"#), None),
            (call(r#"{"tool":"read","input":{"filePath":"a.rs","offset":2.0,"limit":10},"status":"completed","metadata":{"total_lines":null,"lines_read":5}}"#), None),
            (call(r#"{"tool":"read","input":{"filePath":"a.rs","offset":40},"status":"completed","metadata":{"total_lines":50,"preview":"x"}}"#), None),
            (call(r#"{"tool":"write","input":{"filePath":"a.rs"},"status":"completed","metadata":[1]}"#), None),
        ];
        for meta in [
            "null",
            r#""x""#,
            "[0]",
            "{}",
            r#"{"exit":0}"#,
            r#"{"exit":null}"#,
            r#"{"exit":{"code":0}}"#,
            r#"{"exit":1,"exit":0}"#,
            r#"{"exit":0,"output":"long"}"#,
        ] {
            cases.push((bash(meta), None));
        }
        for meta in [
            r#"{"diff":"  \n"}"#,
            r#"{"diff":"-a\n+b"}"#,
            r#"{"diff":5}"#,
            r#"{"filediff":[1,2]}"#,
            r#"{"filediff":null}"#,
            r#"{"filediff":{"additions":0,"deletions":0,"before":"x","after":"y"}}"#,
            r#"{"filediff":{"additions":3}}"#,
            r#"{"filediff":{"additions":-3,"deletions":null}}"#,
            r#"{"files":[{"additions":0},7,null,{"deletions":2}]}"#,
            r#"{"files":[{"additions":0}]}"#,
            r#"{"files":"x"}"#,
            r#"{"files":null,"diff":null}"#,
        ] {
            cases.push((edit(meta), None));
        }
        for (text, error) in &cases {
            let tree = parse_session_text(3, text);
            assert_eq!(
                tree.as_ref().err().map(ToString::to_string).as_deref(),
                *error,
                "{text}"
            );
            for profile in [Profile::Design, Profile::Precise] {
                let config = DetectConfig::with_profile(profile);
                let detected = detect_session_text(3, text, &config);
                match tree.clone() {
                    Ok(mut session) => {
                        let mut fed = SessionDetector::new(&session, &config);
                        session.calls.iter().for_each(|c| fed.push(c));
                        fed.calls_done();
                        session.calls.clear();
                        session.line_counts.clear();
                        let judged = parse_judged_session_text(3, text).unwrap();
                        let mut replayed = SessionDetector::new(&judged, &config);
                        judged.calls.iter().for_each(|c| replayed.push(c));
                        replayed.calls_done();
                        assert_eq!(replayed.snapshot(), fed.snapshot(), "{text}");
                        let (stub, detector) = detected.unwrap();
                        assert_eq!(stub, session, "{text}");
                        assert_eq!(detector.snapshot(), fed.snapshot(), "{text}");
                        assert_eq!(detector.verdict(), fed.verdict(), "{text}");
                        assert_eq!(
                            detector.latest_own_landing(),
                            fed.latest_own_landing(),
                            "{text}"
                        );
                    }
                    Err(e) => assert_eq!(detected.unwrap_err(), e, "{text}"),
                }
            }
        }
    }

    /// `detect`'s typed, borrowed read of a session judges as the usual read, whatever the text
    /// holds, and leaves to it what it does not read.
    #[test]
    fn the_borrowed_read_judges_as_the_usual_read() {
        for (text, borrowed) in &borrowed_read_cases() {
            for profile in Profile::ALL {
                let config = DetectConfig::with_profile(profile);
                // As `detect_session_text` hands both over: their calls done.
                let done = |(s, mut d): (Session, SessionDetector)| {
                    d.calls_done();
                    (s, d)
                };
                let usual = detect_calls(3, text, &config).map(done);
                let Some((stub, detector)) = detect_borrowed(text, &config).map(done) else {
                    assert!(!borrowed, "not read borrowed: {text}");
                    assert_eq!(
                        detect_session_text(3, text, &config).map(|(s, d)| (s, d.snapshot())),
                        usual.map(|(s, d)| (s, d.snapshot())),
                        "{text}"
                    );
                    continue;
                };
                assert!(borrowed, "read borrowed: {text}");
                let (usual_stub, usual) = usual.unwrap();
                assert_eq!(stub, usual_stub, "{text}");
                assert_eq!(detector.snapshot(), usual.snapshot(), "{profile} {text}");
                assert_eq!(detector.verdict(), usual.verdict(), "{profile} {text}");
                assert_eq!(
                    detector.latest_own_landing(),
                    usual.latest_own_landing(),
                    "{text}"
                );
            }
        }
    }
}
