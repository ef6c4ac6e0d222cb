//! One JSON line per event, to a file (append) or stderr.

use crate::{ChannelError, LogChannel, Outcome};
use alert_state::AlertEvent;
use std::io::Write;

/// JSON with every control character escaped: serde_json escapes those below U+0020, but
/// not DEL or the C1 controls (U+0080..U+009F, such as the CSI U+009B), which a terminal
/// showing the journal would obey. They can only occur inside strings, where `\uXXXX` is valid.
fn escape_controls(json: &str) -> String {
    let mut out = String::with_capacity(json.len());
    for c in json.chars() {
        if c.is_control() {
            out.push_str(&format!("\\u{:04x}", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    out
}

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
    let json = serde_json::to_string(event)
        .map_err(|e| fail(format!("the event cannot be written as JSON: {e}")))?;
    let mut line = escape_controls(&json);
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

#[cfg(test)]
mod tests {
    use super::escape_controls;

    #[test]
    fn c1_controls_and_del_are_escaped_and_the_json_still_reads_the_same() {
        let json =
            serde_json::to_string(&serde_json::json!({"t": "a\u{9b}31m\u{7f}\u{1b}b"})).unwrap();
        let line = escape_controls(&json);
        assert!(!line.chars().any(char::is_control), "{line:?}");
        let back: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(back["t"], "a\u{9b}31m\u{7f}\u{1b}b");
    }
}
