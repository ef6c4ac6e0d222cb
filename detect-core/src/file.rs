//! The session file (`agentwatch-sessions/1`) whole: [`SessionFile`], read one session at a
//! time, cut out by the scan ([`scan_session_texts`]) or, for a document it leaves, by serde
//! ([`stream_session_texts`]), each session read by [`parse_session_text`]. Above both cutters.

use crate::document::{counted_sessions, scanned_cleanly, stream_session_texts};
use crate::model::{ParseError, SESSION_FILE_FORMAT, Session, parse_session_text};
use crate::scan::{Scanned, scan_session_texts};
use serde::Serialize;

/// A session file: `{"format": "agentwatch-sessions/1", "sessions": [...]}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SessionFile {
    pub format: String,
    pub sessions: Vec<Session>,
}

impl SessionFile {
    pub fn new(sessions: Vec<Session>) -> Self {
        Self {
            format: SESSION_FILE_FORMAT.to_owned(),
            sessions,
        }
    }

    /// Parse a session file. Unknown keys are ignored; a missing or mistyped key is an error
    /// naming the session and the place in it (`calls[3].input`).
    ///
    /// The document is read one session at a time ([`scan_session_texts`], else
    /// [`stream_session_texts`]): no JSON tree of the whole file is built.
    pub fn from_json(text: &str) -> Result<Self, ParseError> {
        let mut parsed = Vec::new();
        let scanned = scan_session_texts(text.as_bytes(), &[], &mut |t| {
            parsed.push((t.serial, parse_session_text(t.index, &t.text)));
        });
        let streamed = match scanned {
            Ok(Scanned::Read(streamed)) if scanned_cleanly(&parsed) => streamed,
            // Reading a slice cannot fail; the unusual document is read again by serde.
            _ => {
                parsed.clear();
                let mut de = serde_json::Deserializer::from_str(text);
                stream_session_texts(&mut de, &[], &mut |t| {
                    parsed.push((t.serial, parse_session_text(t.index, &t.text)));
                })?
            }
        };
        Ok(Self::new(counted_sessions(&streamed, parsed, |s| {
            s.id.as_str()
        })?))
    }

    /// Pretty JSON in the on-disk form.
    pub fn to_json_pretty(&self) -> String {
        // Serialising plain data (strings, numbers, maps with string keys) cannot fail.
        serde_json::to_string_pretty(self).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Label;
    use serde_json::json;

    #[test]
    fn loop_start_and_output_hash_are_optional_and_round_trip() {
        let file = json!({"format": SESSION_FILE_FORMAT, "sessions": [
            {"id": "a", "loop_start": 1, "calls": [
                {"tool": "bash", "input": {"command": "ls"}, "status": "completed",
                 "output_hash": "00000000000000ff"},
                {"tool": "bash", "input": {"command": "ls"}, "status": "completed"}]},
            {"id": "b", "calls": []}]});
        let parsed = SessionFile::from_json(&file.to_string()).unwrap();
        assert_eq!(parsed.sessions[0].loop_start, Some(1));
        assert_eq!(
            parsed.sessions[0].calls[0].output_hash.as_deref(),
            Some("00000000000000ff")
        );
        assert_eq!(parsed.sessions[0].calls[1].output_hash, None);
        assert_eq!(parsed.sessions[1].loop_start, None);
        let again = SessionFile::from_json(&parsed.to_json_pretty()).unwrap();
        assert_eq!(again, parsed);
        assert!(!parsed.to_json_pretty().contains("\"loop_start\": null"));
    }

    /// A number beyond u64 in a call's input is read as the float nearest to it, so writing
    /// the file back and reading it again gives the same session (a fuzzer found serde_json's
    /// default, faster parser one ulp off: the workspace enables `float_roundtrip`).
    #[test]
    fn a_huge_number_survives_a_round_trip() {
        let text = format!(
            r#"{{"format":"{SESSION_FILE_FORMAT}","sessions":[{{"id":"a","calls":[{{"tool":"read","input":{{"filePath":"/a","offset":118446744073709551616}},"status":"completed"}}]}}]}}"#
        );
        let once = SessionFile::from_json(&text).unwrap();
        let twice = SessionFile::from_json(&once.to_json_pretty()).unwrap();
        assert_eq!(twice, once);
    }

    #[test]
    fn bad_loop_start_or_output_hash_is_named() {
        let bad_start = json!({"format": SESSION_FILE_FORMAT, "sessions": [
            {"id": "a", "loop_start": -1, "calls": []}]});
        let e = SessionFile::from_json(&bad_start.to_string())
            .unwrap_err()
            .to_string();
        assert!(e.contains("(a)") && e.contains("loop_start"), "{e}");
        let bad_hash = json!({"format": SESSION_FILE_FORMAT, "sessions": [
            {"id": "a", "calls": [{"tool": "ls", "input": {}, "status": "completed",
                                   "output_hash": 7}]}]});
        let e = SessionFile::from_json(&bad_hash.to_string())
            .unwrap_err()
            .to_string();
        assert!(e.contains("(a) at calls[0].output_hash"), "{e}");
    }

    #[test]
    fn labels_per_profile_replace_the_label_under_their_profile() {
        let file = json!({"format": SESSION_FILE_FORMAT, "sessions": [
            {"id": "a", "label": "must_not_flag", "labels": {"precise": "must_flag"}, "calls": []},
            {"id": "b", "label": "must_flag", "calls": []}]});
        let parsed = SessionFile::from_json(&file.to_string()).unwrap();
        let (a, b) = (&parsed.sessions[0], &parsed.sessions[1]);
        use crate::config::Profile::{Design, Precise};
        assert_eq!(a.label_for(Design), Some(Label::MustNotFlag));
        assert_eq!(a.label_for(Precise), Some(Label::MustFlag));
        assert_eq!(b.label_for(Precise), Some(Label::MustFlag));
        let again = SessionFile::from_json(&parsed.to_json_pretty()).unwrap();
        assert_eq!(again, parsed);
        assert!(!parsed.to_json_pretty().contains("\"labels\": {}"));
        for (labels, named) in [
            (
                json!({"fast": "must_flag"}),
                "at labels: \"fast\" is not a profile name",
            ),
            (
                json!({"precise": "maybe"}),
                "at labels.precise: invalid value: string \"maybe\"",
            ),
            (
                json!(["precise"]),
                "at labels: invalid type: a list, expected an object",
            ),
        ] {
            let bad = json!({"format": SESSION_FILE_FORMAT, "sessions": [
                {"id": "a", "labels": labels, "calls": []}]});
            let e = SessionFile::from_json(&bad.to_string())
                .unwrap_err()
                .to_string();
            assert!(e.contains("(a)") && e.contains(named), "{e}");
        }
    }

    /// The streamed reader says what a reader of the whole document would: the same sessions, or
    /// the same first error, whatever the key order (sessions before format, a repeated key).
    #[test]
    fn streamed_parse_reads_as_the_whole_document() {
        let call = r#"{"tool":"bash","input":{"command":"ls"},"status":"completed"}"#;
        let ok = |ids: &[&str]| Ok(ids.iter().map(|id| (*id).to_owned()).collect::<Vec<_>>());
        let err = |message: &str| Err(message.to_owned());
        let docs = [
            (
                format!(
                    r#"{{"format":"{SESSION_FILE_FORMAT}","sessions":[{{"id":"a","calls":[{call}]}}]}}"#
                ),
                ok(&["a"]),
            ),
            (
                format!(
                    r#"{{"sessions":[{{"id":"a","calls":[{call}]}}],"format":"{SESSION_FILE_FORMAT}"}}"#
                ),
                ok(&["a"]),
            ),
            // The document's shape is reported before its sessions.
            (
                r#"{"sessions":[{"id":"a","calls":[7]}],"format":"x/2"}"#.to_owned(),
                err(r#"unsupported format x/2; expected "agentwatch-sessions/1""#),
            ),
            // A repeated key replaces the earlier list, as in any JSON object.
            (
                format!(
                    r#"{{"format":"{SESSION_FILE_FORMAT}","sessions":[{{"id":"a","calls":[]}}],"sessions":[{{"id":"b","calls":[]}},{{"id":"c","calls":[]}}]}}"#
                ),
                ok(&["b", "c"]),
            ),
            (
                format!(
                    r#"{{"format":"{SESSION_FILE_FORMAT}","sessions":[{{"id":"a","calls":[]}},{{"id":"a","calls":[]}}]}}"#
                ),
                err("session id a appears twice"),
            ),
            // The first error in list order.
            (
                format!(
                    r#"{{"format":"{SESSION_FILE_FORMAT}","sessions":[{{"id":"a"}},{{"id":"a","calls":[]}}]}}"#
                ),
                err("session #0 (a): missing field `calls`"),
            ),
            (
                format!(r#"{{"format":"{SESSION_FILE_FORMAT}","sessions":{{"id":"a"}}}}"#),
                err("`sessions` must be a list"),
            ),
            (
                format!(
                    r#"{{"format":"{SESSION_FILE_FORMAT}","sessions":null,"other":[1,{{"x":[]}}]}}"#
                ),
                err("`sessions` must be a list"),
            ),
            (
                r#"{"format":7,"sessions":[]}"#.to_owned(),
                err(r#"unsupported format 7; expected "agentwatch-sessions/1""#),
            ),
            (
                r#"[{"format":"agentwatch-sessions/1"}]"#.to_owned(),
                err("a session file is a JSON object with `format` and `sessions`"),
            ),
            (
                r#""text""#.to_owned(),
                err("a session file is a JSON object with `format` and `sessions`"),
            ),
            (
                r#"{"sessions":[]}"#.to_owned(),
                err(r#"unsupported format (missing); expected "agentwatch-sessions/1""#),
            ),
        ];
        for (doc, read) in &docs {
            let got = SessionFile::from_json(doc)
                .map(|f| f.sessions.into_iter().map(|s| s.id).collect::<Vec<_>>())
                .map_err(|e| e.to_string());
            assert_eq!(got, read.clone(), "{doc}");
        }
        // Syntax errors anywhere win, as when the whole tree was parsed first.
        for doc in [
            r#"{"format":"x/2","sessions":[{"id":"a"}] trailing"#,
            r#"{"sessions":[{"id":"a","calls":[7]}],"format":"#,
            r#"{"format":"agentwatch-sessions/1","sessions":[]} x"#,
        ] {
            let e = SessionFile::from_json(doc).unwrap_err();
            assert!(matches!(e, ParseError::Json { .. }), "{doc}: {e}");
        }
    }
}
