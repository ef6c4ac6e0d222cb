//! What a scripted model does, whichever API it speaks ([`crate::claude`], [`crate::codex`],
//! [`crate::gemini`]): tool calls turn by turn, per conversation, and the loopback server
//! that plays them.
//!
//! A conversation is found by a marker in the text of its prompt (the agent's `-p` prompt, or
//! a subagent's task); its turn is the number of model answers with tool calls in the
//! request. So the answer to a request depends only on the request: a retried request gets
//! the same answer, and a subagent's requests (interleaved with its parent's) play their
//! own script.

use crate::{HttpServer, Reply, Request};
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;

/// One model turn.
#[derive(Debug, Clone, PartialEq)]
pub enum Turn {
    /// Tool calls (`name`, `input`), in one response.
    Tools(Vec<(String, Value)>),
    /// A text answer that ends the turn.
    Text(String),
}

impl Turn {
    /// A turn of one tool call.
    pub fn tool(name: &str, input: Value) -> Self {
        Turn::Tools(vec![(name.to_owned(), input)])
    }

    /// A turn of several tool calls in one response.
    pub fn tools(calls: &[(&str, Value)]) -> Self {
        Turn::Tools(
            calls
                .iter()
                .map(|(name, input)| ((*name).to_owned(), input.clone()))
                .collect(),
        )
    }

    pub fn text(text: &str) -> Self {
        Turn::Text(text.to_owned())
    }
}

/// The turns of one conversation, found by `marker` in its prompt.
#[derive(Debug, Clone, PartialEq)]
pub struct Conversation {
    pub marker: String,
    pub turns: Vec<Turn>,
}

/// What the scripted model does.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Script {
    pub conversations: Vec<Conversation>,
    /// Wait this long before answering each request (a slow model: a run that lasts long
    /// enough to be watched while it writes).
    pub pace: Duration,
}

impl Script {
    pub fn new() -> Self {
        Self::default()
    }

    /// Add a conversation; after its turns it answers with text and ends.
    pub fn conversation(mut self, marker: &str, turns: Vec<Turn>) -> Self {
        self.conversations.push(Conversation {
            marker: marker.to_owned(),
            turns,
        });
        self
    }

    pub fn paced(mut self, pace: Duration) -> Self {
        self.pace = pace;
        self
    }

    /// The tool calls this script makes, per conversation marker, in order: what a transcript
    /// of a completed run must hold.
    pub fn tool_calls(&self, marker: &str) -> Vec<(String, Value)> {
        self.conversations
            .iter()
            .filter(|c| c.marker == marker)
            .flat_map(|c| &c.turns)
            .flat_map(|turn| match turn {
                Turn::Tools(calls) => calls.clone(),
                Turn::Text(_) => Vec::new(),
            })
            .collect()
    }

    /// The conversation whose marker is in `text` (the first one listed).
    pub fn conversation_in(&self, text: &str) -> Option<usize> {
        self.conversations
            .iter()
            .position(|c| text.contains(&c.marker))
    }

    /// The turn `(conversation, turn)` asks for, or the text answer that ends a conversation
    /// past its script (or a request of no conversation).
    pub fn turn(&self, place: Option<(usize, usize)>) -> Turn {
        place
            .and_then(|(c, t)| self.conversations[c].turns.get(t))
            .cloned()
            .unwrap_or_else(|| Turn::text("Done."))
    }
}

/// A `200 text/event-stream` answer with `body` (whole: the scripted model streams a turn
/// at once).
pub(crate) fn event_stream(body: String) -> Reply {
    Reply::Http {
        status: 200,
        headers: vec![
            ("content-type".into(), "text/event-stream".into()),
            ("cache-control".into(), "no-cache".into()),
        ],
        body: body.into_bytes(),
    }
}

/// Where a request stands in the script: `(conversation, turn)`.
pub type Place = fn(&Script, &Value) -> Option<(usize, usize)>;

/// A scripted model server on 127.0.0.1: plays its [`Script`] through a handler that speaks
/// one agent's API. Stops when dropped.
#[derive(Debug)]
pub struct ScriptServer {
    http: HttpServer,
    script: Arc<Script>,
    place: Place,
}

impl ScriptServer {
    /// Serve `script`: each request waits the script's pace, then `answer` speaks.
    pub(crate) fn start(
        script: Script,
        place: Place,
        answer: impl Fn(&Script, &Request) -> Reply + Send + Sync + 'static,
    ) -> Self {
        let script = Arc::new(script);
        let plays = Arc::clone(&script);
        let http = HttpServer::start(move |request| {
            if !plays.pace.is_zero() {
                std::thread::sleep(plays.pace);
            }
            answer(&plays, request)
        });
        Self {
            http,
            script,
            place,
        }
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        self.http.url()
    }

    pub fn script(&self) -> &Script {
        &self.script
    }

    /// Every request received so far.
    pub fn requests(&self) -> Vec<Request> {
        self.http.requests()
    }

    /// The model requests of the conversation `marker`, in the order received.
    pub fn conversation_requests(&self, marker: &str) -> Vec<Value> {
        let index = self
            .script
            .conversations
            .iter()
            .position(|c| c.marker == marker);
        self.requests()
            .iter()
            .map(Request::body_json)
            .filter(|body| {
                index.is_some() && (self.place)(&self.script, body).map(|p| p.0) == index
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_script_lists_its_calls_and_answers_past_its_end() {
        let script = Script::new()
            .conversation(
                "MAIN",
                vec![
                    Turn::tools(&[("a", json!({})), ("b", json!({}))]),
                    Turn::text("x"),
                ],
            )
            .conversation("SUB", vec![Turn::tool("c", json!({"k": 1}))]);
        assert_eq!(script.tool_calls("MAIN").len(), 2);
        assert_eq!(script.conversation_in("go SUB: now"), Some(1));
        assert_eq!(script.conversation_in("nothing"), None);
        assert_eq!(script.turn(Some((1, 0))), Turn::tool("c", json!({"k": 1})));
        assert_eq!(script.turn(Some((1, 1))), Turn::text("Done."));
        assert_eq!(script.turn(None), Turn::text("Done."));
    }
}
