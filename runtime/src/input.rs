//! Reading sessions from disk: session files (`agentwatch-sessions/1`) and `opencode export` JSON.

use crate::error::Error;
use detect_core::{Session, SessionFile};
use serde_json::Value;

/// Read a file, or standard input for `-`.
pub fn read_text(path: &str) -> Result<String, Error> {
    if path == "-" {
        let mut text = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut text)
            .map_err(|e| Error::read("standard input", e))?;
        return Ok(text);
    }
    std::fs::read_to_string(path).map_err(|e| Error::read(path, e))
}

/// The sessions of one document: a session file, or an `opencode export` of one session.
pub fn sessions_from_text(origin: &str, text: &str) -> Result<Vec<Session>, Error> {
    let data_err = |msg: String| Error::data(format!("{origin}: {msg}"));
    let value: Value =
        serde_json::from_str(text).map_err(|e| data_err(format!("not JSON: {e}")))?;
    if value.get("info").is_some() && value.get("messages").is_some() {
        let session = agentwatch_opencode::session_from_export(&value)
            .map_err(|e| data_err(format!("opencode export: {e}")))?;
        return Ok(vec![session]);
    }
    SessionFile::from_value(&value)
        .map(|file| file.sessions)
        .map_err(|e| data_err(e.to_string()))
}

/// Read the sessions of several files, in order; an id seen twice is an error naming both files.
pub fn read_sessions(paths: &[String]) -> Result<Vec<Session>, Error> {
    let mut sessions: Vec<Session> = Vec::new();
    let mut origin_of = std::collections::HashMap::new();
    for path in paths {
        for session in sessions_from_text(path, &read_text(path)?)? {
            if let Some(first) = origin_of.insert(session.id.clone(), path.clone()) {
                return Err(Error::data(format!(
                    "session {} appears in both {first} and {path}",
                    session.id
                )));
            }
            sessions.push(session);
        }
    }
    Ok(sessions)
}
