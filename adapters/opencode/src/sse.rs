//! opencode's event stream (`GET /global/event`, server-sent events), parsed.
//!
//! Two pure layers, testable without a network:
//!
//! - [`FrameParser`]: bytes as they arrive to SSE frames (the WHATWG rules: lines end with LF,
//!   CRLF or CR, `data:` lines join with a newline, `:` starts a comment, a blank line ends a
//!   frame). A frame larger than its limit is reported as [`Frame::Oversize`], never kept.
//! - [`parse_event`]: one frame's data to the [`Event`] the watchdog acts on. `/global/event`
//!   wraps each event as `{"directory", "project", "payload": {<event>}}`; `/event` sends the
//!   event bare; both are read. Tool outputs are hashed in place, never copied
//!   ([`crate::lite`]).
//!
//! opencode 1.18.33 sends `server.connected` first, `server.heartbeat` every 10 s, and mirrors
//! most events as `{"type": "sync", "syncEvent": …}` (read as [`Event::Other`]).

use crate::lite::{LiteInfo, LitePart, LiteState};
use detect_core::Call;
use serde::Deserialize;

/// The largest frame kept by default: a tool part carries its whole output.
pub const MAX_FRAME_BYTES: usize = 64 * 1024 * 1024;

/// One SSE frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    /// A frame with data: its `event:` field, if any, and its data lines joined by newlines.
    Data { event: Option<String>, data: String },
    /// A frame whose lines or data passed the limit: dropped; `bytes` is how much was seen.
    Oversize { bytes: usize },
}

/// Bytes to frames, incrementally: feed what arrives, take the frames it completed.
#[derive(Debug)]
pub struct FrameParser {
    limit: usize,
    line: Vec<u8>,
    data: Vec<u8>,
    has_data: bool,
    event: Option<String>,
    /// Bytes of the frame being read, once past the limit (the frame is being skipped).
    over: Option<usize>,
    /// The previous byte was a CR (a LF right after it ends nothing more).
    after_cr: bool,
    /// Bytes of the current line, kept or not (a line of a skipped frame is not blank).
    line_len: usize,
}

impl Default for FrameParser {
    fn default() -> Self {
        Self::new(MAX_FRAME_BYTES)
    }
}

impl FrameParser {
    /// A parser keeping frames of at most `limit` bytes (lines and data).
    #[must_use]
    pub fn new(limit: usize) -> Self {
        Self {
            limit: limit.max(1),
            line: Vec::new(),
            data: Vec::new(),
            has_data: false,
            event: None,
            over: None,
            after_cr: false,
            line_len: 0,
        }
    }

    /// Take `bytes` and append the frames they complete to `out`.
    pub fn feed(&mut self, bytes: &[u8], out: &mut Vec<Frame>) {
        for &byte in bytes {
            let after_cr = std::mem::replace(&mut self.after_cr, byte == b'\r');
            if byte != b'\n' && byte != b'\r' {
                self.line_len += 1;
            }
            match byte {
                b'\n' if after_cr => {}
                b'\n' | b'\r' => {
                    self.end_line(out);
                    self.line_len = 0;
                }
                _ => match &mut self.over {
                    Some(seen) => *seen += 1,
                    None if self.line.len() + self.data.len() >= self.limit => {
                        self.over = Some(self.line.len() + self.data.len() + 1);
                        self.line.clear();
                        self.data.clear();
                    }
                    None => self.line.push(byte),
                },
            }
        }
    }

    fn end_line(&mut self, out: &mut Vec<Frame>) {
        if self.line_len == 0 {
            if let Some(bytes) = self.over.take() {
                out.push(Frame::Oversize { bytes });
            } else if self.has_data {
                if self.data.last() == Some(&b'\n') {
                    self.data.pop();
                }
                out.push(Frame::Data {
                    event: self.event.take(),
                    data: String::from_utf8_lossy(&self.data).into_owned(),
                });
            }
            self.data.clear();
            self.has_data = false;
            self.event = None;
            return;
        }
        if self.over.is_some() {
            self.line.clear();
            return;
        }
        let line = std::mem::take(&mut self.line);
        if line.first() == Some(&b':') {
            return;
        }
        let (field, value) = match line.iter().position(|b| *b == b':') {
            Some(at) => {
                let value = &line[at + 1..];
                (&line[..at], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (&line[..], &[][..]),
        };
        match field {
            b"data" => {
                self.data.extend_from_slice(value);
                self.data.push(b'\n');
                self.has_data = true;
            }
            b"event" => self.event = Some(String::from_utf8_lossy(value).into_owned()),
            // `id` and `retry` say nothing the watchdog uses: it resynchronises by reading.
            _ => {}
        }
    }
}

/// What the watchdog reads of one opencode event.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// The stream is open (the first event).
    Connected,
    /// The server is alive (every 10 s in 1.18.33).
    Heartbeat,
    /// A tool part reached `completed` or `error`: its call, as the message reader builds it.
    ToolSettled {
        session_id: String,
        message_id: String,
        part_id: String,
        call: Box<Call>,
    },
    /// A message finished: an assistant step completed or failed (a user message is settled
    /// when it arrives).
    MessageSettled {
        session_id: String,
        message_id: String,
    },
    SessionCreated {
        session_id: String,
        parent_id: Option<String>,
    },
    SessionDeleted {
        session_id: String,
    },
    MessageRemoved {
        session_id: String,
        message_id: String,
    },
    /// Any other event (status, deltas, a part still running, the `sync` mirrors): its type
    /// and session, if it names one.
    Other {
        kind: String,
        session_id: Option<String>,
    },
}

impl Event {
    /// The session the event is about, if any.
    #[must_use]
    pub fn session_id(&self) -> Option<&str> {
        match self {
            Self::ToolSettled { session_id, .. }
            | Self::MessageSettled { session_id, .. }
            | Self::SessionCreated { session_id, .. }
            | Self::SessionDeleted { session_id }
            | Self::MessageRemoved { session_id, .. } => Some(session_id),
            Self::Other { session_id, .. } => session_id.as_deref(),
            Self::Connected | Self::Heartbeat => None,
        }
    }
}

/// Why a frame is not an event.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EventError {
    /// Not JSON, or JSON of another shape (described without quoting the frame).
    #[error("event is not the expected JSON: {0}")]
    Json(String),
    /// An event of a known type without a field it must have.
    #[error("{kind} event without {field}")]
    Missing { kind: String, field: &'static str },
}

#[derive(Deserialize)]
struct Raw {
    #[serde(default, rename = "type")]
    kind: Option<String>,
    #[serde(default)]
    properties: Option<Properties>,
    #[serde(default)]
    payload: Option<Box<Raw>>,
}

#[derive(Deserialize)]
struct Properties {
    #[serde(default, rename = "sessionID")]
    session_id: Option<String>,
    #[serde(default, rename = "messageID")]
    message_id: Option<String>,
    #[serde(default)]
    part: Option<EventPart>,
    #[serde(default)]
    info: Option<Info>,
}

#[derive(Deserialize)]
struct EventPart {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    id: Option<String>,
    #[serde(default, rename = "messageID")]
    message_id: Option<String>,
    #[serde(default, rename = "sessionID")]
    session_id: Option<String>,
    #[serde(default)]
    tool: Option<String>,
    #[serde(default)]
    state: Option<LiteState>,
}

/// A message's info (`message.updated`) or a session's (`session.*`): the fields of both.
#[derive(Deserialize)]
struct Info {
    #[serde(default)]
    id: Option<String>,
    #[serde(default, rename = "sessionID")]
    session_id: Option<String>,
    #[serde(default, rename = "parentID")]
    parent_id: Option<String>,
    #[serde(default)]
    role: Option<String>,
    #[serde(default)]
    time: Option<crate::lite::LiteMessageTime>,
    #[serde(default)]
    error: Option<serde::de::IgnoredAny>,
}

/// One frame's data as an event.
///
/// # Errors
/// [`EventError`] when the data is not an event's JSON or a known event lacks what it needs.
pub fn parse_event(data: &str) -> Result<Event, EventError> {
    let raw: Raw = serde_json::from_str(data)
        .map_err(|e| EventError::Json(crate::problem::parse_problem(&e)))?;
    let raw = match raw.payload {
        Some(payload) if raw.kind.is_none() => *payload,
        _ => raw,
    };
    let kind = raw
        .kind
        .ok_or_else(|| EventError::Json("no event type".to_owned()))?;
    let props = raw.properties.as_ref();
    let missing = |field: &'static str| missing(&kind, field);
    Ok(match kind.as_str() {
        "server.connected" => Event::Connected,
        "server.heartbeat" => Event::Heartbeat,
        "message.part.updated" => part_updated(&kind, props)?,
        "message.updated" => message_updated(&kind, props)?,
        "session.created" | "session.deleted" => {
            let info = props.and_then(|p| p.info.as_ref());
            let session_id = info
                .and_then(|i| i.id.clone())
                .or_else(|| props.and_then(|p| p.session_id.clone()))
                .ok_or_else(|| missing("sessionID"))?;
            if kind == "session.created" {
                Event::SessionCreated {
                    session_id,
                    parent_id: info.and_then(|i| i.parent_id.clone()),
                }
            } else {
                Event::SessionDeleted { session_id }
            }
        }
        "message.removed" => {
            let p = props.ok_or_else(|| missing("properties"))?;
            Event::MessageRemoved {
                session_id: p.session_id.clone().ok_or_else(|| missing("sessionID"))?,
                message_id: p.message_id.clone().ok_or_else(|| missing("messageID"))?,
            }
        }
        _ => other(&kind, props),
    })
}

/// A known event of `kind` without `field`.
fn missing(kind: &str, field: &'static str) -> EventError {
    EventError::Missing {
        kind: kind.to_owned(),
        field,
    }
}

/// An event the follower only notes (by its session, when it names one).
fn other(kind: &str, props: Option<&Properties>) -> Event {
    let session_id = props.and_then(|p| {
        p.session_id.clone().or_else(|| {
            p.info
                .as_ref()
                .and_then(|i| i.session_id.clone().or_else(|| i.id.clone()))
        })
    });
    Event::Other {
        kind: kind.to_owned(),
        session_id,
    }
}

/// `message.part.updated`: a tool part that settled (completed or error) is a call; any other
/// part is only noted.
fn part_updated(kind: &str, props: Option<&Properties>) -> Result<Event, EventError> {
    let missing = |field: &'static str| missing(kind, field);
    let part = props
        .and_then(|p| p.part.as_ref())
        .ok_or_else(|| missing("part"))?;
    let settled = part
        .state
        .as_ref()
        .is_some_and(|s| s.status == "completed" || s.status == "error");
    if part.kind != "tool" || !settled {
        return Ok(other(kind, props));
    }
    let session_id = part
        .session_id
        .clone()
        .or_else(|| props.and_then(|p| p.session_id.clone()))
        .ok_or_else(|| missing("sessionID"))?;
    let message_id = part
        .message_id
        .clone()
        .ok_or_else(|| missing("messageID"))?;
    let part_id = part.id.clone().ok_or_else(|| missing("part id"))?;
    let lite = LitePart {
        tool: part.tool.clone(),
        state: part.state.clone().map(Box::new),
    };
    let call = lite.call().ok_or_else(|| missing("tool"))?;
    Ok(Event::ToolSettled {
        session_id,
        message_id,
        part_id,
        call: Box::new(call),
    })
}

/// `message.updated`: a message that settled (completed or failed); one still running is only
/// noted.
fn message_updated(kind: &str, props: Option<&Properties>) -> Result<Event, EventError> {
    let missing = |field: &'static str| missing(kind, field);
    let info = props
        .and_then(|p| p.info.as_ref())
        .ok_or_else(|| missing("info"))?;
    let session_id = info
        .session_id
        .clone()
        .or_else(|| props.and_then(|p| p.session_id.clone()))
        .ok_or_else(|| missing("sessionID"))?;
    let message_id = info.id.clone().ok_or_else(|| missing("info.id"))?;
    let lite = crate::lite::LiteMessage {
        info: LiteInfo {
            id: message_id.clone(),
            role: info.role.clone(),
            agent: None,
            mode: None,
            time: info.time,
            error: info.error,
            model_id: None,
            provider_id: None,
            cost: None,
        },
        parts: Vec::new(),
    };
    Ok(if lite.is_settled() {
        Event::MessageSettled {
            session_id,
            message_id,
        }
    } else {
        Event::Other {
            kind: kind.to_owned(),
            session_id: Some(session_id),
        }
    })
}

/// The data of every frame in `text` as events, in order (frames that are not events are left
/// out): a recorded stream read at once.
#[must_use]
pub fn parse_stream(text: &str) -> Vec<Result<Event, EventError>> {
    let mut parser = FrameParser::default();
    let mut frames = Vec::new();
    parser.feed(text.as_bytes(), &mut frames);
    frames
        .into_iter()
        .filter_map(|f| match f {
            Frame::Data { data, .. } => Some(parse_event(&data)),
            Frame::Oversize { .. } => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use detect_core::CallStatus;

    fn frames(chunks: &[&[u8]], limit: usize) -> Vec<Frame> {
        let mut parser = FrameParser::new(limit);
        let mut out = Vec::new();
        for chunk in chunks {
            parser.feed(chunk, &mut out);
        }
        out
    }

    fn data(text: &str) -> Frame {
        Frame::Data {
            event: None,
            data: text.to_owned(),
        }
    }

    #[test]
    fn frames_follow_the_sse_rules() {
        // Each row: the stream, the frames it holds.
        let rows: Vec<(&[u8], Vec<Frame>)> = vec![
            (b"data: a\n\n", vec![data("a")]),
            (b"data:a\r\n\r\n", vec![data("a")]),
            (b"data: a\r\rdata: b\n\n", vec![data("a"), data("b")]),
            (b"data: a\ndata: b\n\n", vec![data("a\nb")]),
            (
                b": comment\n\ndata:  two spaces\n\n",
                vec![data(" two spaces")],
            ),
            (
                b"event: x\ndata: y\nid: 7\nretry: 10\n\n",
                vec![Frame::Data {
                    event: Some("x".into()),
                    data: "y".into(),
                }],
            ),
            (b"event: lonely\n\n", vec![]),
            (b"data\n\n", vec![data("")]),
            (b"data: cut short", vec![]),
            (b"\n\n\ndata: a\n\n", vec![data("a")]),
        ];
        for (stream, want) in rows {
            assert_eq!(
                frames(&[stream], 1024),
                want,
                "{:?}",
                String::from_utf8_lossy(stream)
            );
        }
    }

    #[test]
    fn any_split_of_the_bytes_gives_the_same_frames() {
        let stream = b"data: {\"a\":1}\r\n\r\n: hi\ndata: x\r\ndata: y\n\ndata: z\r\r";
        let whole = frames(&[stream], 1024);
        assert_eq!(whole.len(), 3);
        for cut in 0..stream.len() {
            let (a, b) = stream.split_at(cut);
            assert_eq!(frames(&[a, b], 1024), whole, "cut at {cut}");
        }
        let bytes: Vec<&[u8]> = stream.chunks(1).collect();
        assert_eq!(frames(&bytes, 1024), whole);
    }

    #[test]
    fn an_oversize_frame_is_reported_and_the_next_one_read() {
        let big = format!("data: {}\n\ndata: small\n\n", "x".repeat(100));
        let got = frames(&[big.as_bytes()], 50);
        assert!(
            matches!(got[0], Frame::Oversize { bytes } if bytes >= 100),
            "{got:?}"
        );
        assert_eq!(got[1], data("small"));
        // Many lines that together pass the limit.
        let many = format!("{}\ndata: ok\n\n", "data: 0123456789\n".repeat(10));
        let got = frames(&[many.as_bytes()], 50);
        assert!(matches!(got[0], Frame::Oversize { .. }), "{got:?}");
        assert_eq!(got[1], data("ok"));
    }

    const SAMPLE: &str = include_str!("../../../fixtures/opencode/sse_global_event_1.18.33.txt");

    #[test]
    fn the_recorded_global_stream_reads_as_events() {
        let events: Vec<Event> = parse_stream(SAMPLE)
            .into_iter()
            .map(|e| e.expect("every recorded frame is an event"))
            .collect();
        assert_eq!(events[0], Event::Connected);
        assert!(events.contains(&Event::Heartbeat));
        let session = "ses_dcb19e6fcffe8pz7lWze0GKE6a";
        assert!(events.contains(&Event::SessionCreated {
            session_id: session.into(),
            parent_id: None
        }));
        let settled: Vec<&Event> = events
            .iter()
            .filter(|e| matches!(e, Event::ToolSettled { .. }))
            .collect();
        // The running updates and the `sync` mirrors are not settled calls.
        assert_eq!(settled.len(), 1, "{events:#?}");
        let Event::ToolSettled {
            session_id, call, ..
        } = settled[0]
        else {
            unreachable!()
        };
        assert_eq!(session_id, session);
        assert_eq!(call.tool, "bash");
        assert_eq!(call.input, serde_json::json!({"command": "false"}));
        assert_eq!(call.status, CallStatus::Completed);
        assert!(call.output_hash.is_some());
        assert!(events.contains(&Event::MessageRemoved {
            session_id: session.into(),
            message_id: "msg_234e6227e001dJRZYJ12UxPQ0H".into()
        }));
        assert!(events.contains(&Event::SessionDeleted {
            session_id: session.into()
        }));
        assert!(
            events
                .iter()
                .any(|e| matches!(e, Event::MessageSettled { .. }))
        );
    }

    #[test]
    fn the_bare_instance_stream_reads_too() {
        let text = include_str!("../../../fixtures/opencode/sse_event_1.18.33.txt");
        let events: Vec<Event> = parse_stream(text).into_iter().map(Result::unwrap).collect();
        let settled = events
            .iter()
            .filter(|e| matches!(e, Event::ToolSettled { .. }))
            .count();
        assert_eq!(settled, 1);
        assert_eq!(events[0], Event::Connected);
    }

    #[test]
    fn bad_frames_are_errors_that_quote_nothing() {
        let rows = [
            "not json",
            "{\"type\": 5}",
            "{}",
            "{\"type\": \"message.part.updated\", \"properties\": {}}",
            "{\"type\": \"message.removed\", \"properties\": {\"sessionID\": \"s\"}}",
            "{\"payload\": {\"type\": \"session.deleted\", \"properties\": {}}}",
            "{\"type\": \"message.part.updated\", \"properties\": {\"part\": {\"type\": \"tool\", \"id\": \"p\", \"messageID\": \"m\", \"state\": {\"status\": \"completed\"}}}}",
        ];
        for row in rows {
            let e = parse_event(row).expect_err(row);
            assert!(!e.to_string().contains("not json"), "{e}");
        }
        // A tool part of an unknown status, or still running, is no call yet.
        let running = r#"{"type":"message.part.updated","properties":{"part":{"type":"tool","id":"p","messageID":"m","sessionID":"s","tool":"bash","state":{"status":"running","input":{}}}}}"#;
        assert!(matches!(parse_event(running), Ok(Event::Other { .. })));
    }
}
