//! One JSON POST with ureq, timeouts, and errors scrubbed of secrets.

use crate::ChannelError;
use std::time::Duration;

/// Largest answer body read.
const MAX_BODY_BYTES: u64 = 1024 * 1024;
/// How much of an answer body an error keeps.
const BODY_HEAD_CHARS: usize = 200;

/// A POST to make: where, how the URL is shown, what must never be shown.
pub(crate) struct Post<'a> {
    pub url: &'a str,
    /// The URL as errors show it.
    pub shown_url: String,
    /// Strings scrubbed from every message kept in an error (empty ones are ignored).
    pub secrets: Vec<String>,
    pub timeout: Duration,
}

impl Post<'_> {
    /// Sends `body` as `application/json`; a 2xx answer's body (lossy UTF-8) on success.
    pub(crate) fn send_json(&self, body: &str) -> Result<String, ChannelError> {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_connect(Some(self.timeout))
            .timeout_global(Some(self.timeout))
            .http_status_as_error(false)
            .max_redirects(0)
            .build()
            .into();
        let mut response = agent
            .post(self.url)
            .header("content-type", "application/json")
            .send(body)
            .map_err(|e| self.transport_error(&e))?;
        let status = response.status().as_u16();
        let read = response
            .body_mut()
            .with_config()
            .limit(MAX_BODY_BYTES)
            .read_to_vec();
        if !(200..=299).contains(&status) {
            let text = read
                .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
                .unwrap_or_default();
            return Err(ChannelError::Status {
                url: self.shown_url.clone(),
                status,
                body: self.scrub(&head(&text, BODY_HEAD_CHARS)),
            });
        }
        let bytes = read.map_err(|e| self.transport_error(&e))?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }

    fn transport_error(&self, error: &ureq::Error) -> ChannelError {
        let url = self.shown_url.clone();
        let message = self.scrub(&error.to_string());
        let timed_out = match error {
            ureq::Error::Timeout(_) => true,
            ureq::Error::Io(io) => matches!(
                io.kind(),
                std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock
            ),
            _ => false,
        };
        if timed_out {
            ChannelError::Timeout {
                url,
                timeout: self.timeout,
                message,
            }
        } else {
            ChannelError::Unreachable { url, message }
        }
    }

    /// `text` with every secret replaced by `<redacted>`.
    pub(crate) fn scrub(&self, text: &str) -> String {
        scrub(text, &self.secrets)
    }
}

/// `text` with every secret replaced by `<redacted>` (blank ones are no secrets).
pub(crate) fn scrub(text: &str, secrets: &[String]) -> String {
    let mut text = text.to_owned();
    for secret in secrets.iter().filter(|s| !s.trim().is_empty()) {
        text = text.replace(secret.as_str(), "<redacted>");
    }
    text
}

/// The first `n` characters of `text`, with `…` when cut.
pub(crate) fn head(text: &str, n: usize) -> String {
    let mut chars = text.chars();
    let kept: String = chars.by_ref().take(n).collect();
    if chars.next().is_some() {
        format!("{kept}…")
    } else {
        kept
    }
}

/// The parts of a URL: shown form and the secret parts (user-info, query, fragment).
pub(crate) struct UrlParts {
    pub shown: String,
    pub secrets: Vec<String>,
}

/// Splits `url` into `scheme://host[:port]/path` (user-info dropped, a query shown as
/// `?<redacted>`, a fragment dropped) and its secret parts. Tolerates anything: a string that is
/// not a URL is shown as it is, minus what looks like a query.
pub(crate) fn url_parts(url: &str) -> UrlParts {
    let mut secrets = Vec::new();
    let (rest, fragment) = match url.split_once('#') {
        Some((rest, fragment)) => (rest, Some(fragment)),
        None => (url, None),
    };
    if let Some(fragment) = fragment {
        secrets.push(fragment.to_owned());
    }
    let (rest, query) = match rest.split_once('?') {
        Some((rest, query)) => (rest, Some(query)),
        None => (rest, None),
    };
    let (scheme, after_scheme) = match rest.split_once("://") {
        Some((scheme, after)) => (Some(scheme), after),
        None => (None, rest),
    };
    let (authority, path) = match after_scheme.find('/') {
        Some(at) => after_scheme.split_at(at),
        None => (after_scheme, ""),
    };
    let host = match authority.rsplit_once('@') {
        Some((userinfo, host)) => {
            secrets.push(userinfo.to_owned());
            // The password alone, too, in case a message shows it decoded or separately.
            if let Some((_, password)) = userinfo.split_once(':') {
                secrets.push(password.to_owned());
            }
            host
        }
        None => authority,
    };
    let mut shown = match scheme {
        Some(scheme) => format!("{scheme}://{host}{path}"),
        None => format!("{host}{path}"),
    };
    if let Some(query) = query {
        secrets.push(query.to_owned());
        if !query.is_empty() {
            shown.push_str("?<redacted>");
        }
    }
    UrlParts { shown, secrets }
}

/// How a URL is shown in errors and `Debug`.
pub(crate) fn shown_url(url: &str) -> String {
    url_parts(url).shown
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_lose_userinfo_query_and_fragment() {
        let parts = url_parts("https://user:pw@example.com:8443/hook/path?token=s3cret#frag");
        assert_eq!(parts.shown, "https://example.com:8443/hook/path?<redacted>");
        for secret in ["user:pw", "pw", "token=s3cret", "frag"] {
            assert!(parts.secrets.iter().any(|s| s == secret), "{secret}");
        }
        assert_eq!(shown_url("http://127.0.0.1:9/x"), "http://127.0.0.1:9/x");
        assert_eq!(shown_url("not a url"), "not a url");
        assert_eq!(shown_url(""), "");
        assert_eq!(shown_url("http://h@"), "http://");
    }

    #[test]
    fn scrub_replaces_every_secret_and_ignores_empty_ones() {
        let secrets = vec![String::new(), "abc".to_owned()];
        assert_eq!(scrub("xabcyabc", &secrets), "x<redacted>y<redacted>");
        assert_eq!(head("héllo", 2), "hé…");
        assert_eq!(head("hé", 2), "hé");
    }
}
