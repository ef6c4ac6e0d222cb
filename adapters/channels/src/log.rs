//! One JSON line per event, to a file (append) or stderr.

use crate::{ChannelError, LogChannel, Outcome};
use alert_state::AlertEvent;
use std::io::Write;

pub(crate) fn deliver(channel: &LogChannel, event: &AlertEvent) -> Result<Outcome, ChannelError> {
    let target = channel
        .path
        .as_ref()
        .map_or_else(|| "stderr".to_owned(), |p| p.display().to_string());
    let fail = |message: String| ChannelError::Log {
        target: target.clone(),
        message,
    };
    // serde_json escapes newlines inside strings: the event is one line.
    let mut line = serde_json::to_string(event)
        .map_err(|e| fail(format!("the event cannot be written as JSON: {e}")))?;
    line.push('\n');
    match &channel.path {
        None => {
            let mut stderr = std::io::stderr().lock();
            stderr
                .write_all(line.as_bytes())
                .and_then(|()| stderr.flush())
                .map_err(|e| fail(e.to_string()))?;
        }
        Some(path) => {
            // One write of the whole line to a file opened for appending, so lines from
            // concurrent writers do not interleave.
            let mut file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .map_err(|e| fail(e.to_string()))?;
            file.write_all(line.as_bytes())
                .map_err(|e| fail(e.to_string()))?;
        }
    }
    Ok(Outcome::Sent)
}
