//! Keeping secrets out of errors and `Debug`: URL redaction, scrubbing, the `Redacted` stand-in.

use std::fmt;

/// Shown in place of a secret in a `Debug` output: `<redacted>`.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Redacted;

impl fmt::Debug for Redacted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

/// The parts of a URL: the form errors show and the secret parts (user-info, query, fragment).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UrlParts {
    pub shown: String,
    pub secrets: Vec<String>,
}

/// Splits `url` into `scheme://host[:port]/path` (user-info dropped, a query shown as
/// `?<redacted>`, a fragment dropped) and its secret parts. Tolerates anything: a string that is
/// not a URL is shown as it is, minus what looks like a query.
#[must_use]
pub fn url_parts(url: &str) -> UrlParts {
    let mut secrets = Vec::new();
    let rest = match url.split_once('#') {
        Some((rest, fragment)) => {
            secrets.push(fragment.to_owned());
            rest
        }
        None => url,
    };
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

/// How a URL is shown in errors and `Debug` (see [`url_parts`]).
#[must_use]
pub fn shown_url(url: &str) -> String {
    url_parts(url).shown
}

/// `text` with every secret replaced by `<redacted>` (blank ones are no secrets).
#[must_use]
pub fn scrub(text: &str, secrets: &[String]) -> String {
    let mut text = text.to_owned();
    for secret in secrets.iter().filter(|s| !s.trim().is_empty()) {
        text = text.replace(secret.as_str(), "<redacted>");
    }
    text
}

/// The first `n` characters of `text`, with `…` when cut.
#[must_use]
pub fn head(text: &str, n: usize) -> String {
    let mut chars = text.chars();
    let kept: String = chars.by_ref().take(n).collect();
    if chars.next().is_some() {
        format!("{kept}…")
    } else {
        kept
    }
}

/// A request URL, the form errors show of it, and the secrets scrubbed from every text kept in
/// an error. The shown form is itself scrubbed (a key pasted into a URL's path is hidden there
/// too). `Debug` shows only the shown form.
#[derive(Clone, PartialEq, Eq)]
pub struct Target {
    url: String,
    shown: String,
    secrets: Vec<String>,
}

impl Target {
    /// `url`, shown as [`url_parts`] shows it, its user-info, query and fragment secret.
    pub fn new(url: impl Into<String>) -> Self {
        let url = url.into();
        let UrlParts { shown, secrets } = url_parts(&url);
        let mut target = Self {
            url,
            shown,
            secrets,
        };
        target.shown = target.scrub(&target.shown);
        target
    }

    /// Adds a secret (and its trimmed form); blank ones are ignored.
    #[must_use]
    pub fn with_secret(mut self, secret: &str) -> Self {
        self.secrets.push(secret.to_owned());
        self.secrets.push(secret.trim().to_owned());
        self.shown = self.scrub(&self.shown);
        self
    }

    /// This target with `suffix` (a path and query that hold no secret) appended to both the URL
    /// and its shown form.
    #[must_use]
    pub fn join(&self, suffix: &str) -> Self {
        self.join_hidden(suffix, suffix)
    }

    /// This target with `suffix` appended to the URL and `shown_suffix` to its shown form (for a
    /// secret in the path: `/bot{token}/…` shown as `/bot<redacted>/…`). Add the secret with
    /// [`Target::with_secret`] too, so that errors quoting the URL are scrubbed of it.
    #[must_use]
    pub fn join_hidden(&self, suffix: &str, shown_suffix: &str) -> Self {
        let mut target = Self {
            url: format!("{}{suffix}", self.url),
            shown: format!("{}{shown_suffix}", self.shown),
            secrets: self.secrets.clone(),
        };
        target.shown = target.scrub(&target.shown);
        target
    }

    /// The URL to request.
    #[must_use]
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The URL as errors show it.
    #[must_use]
    pub fn shown(&self) -> &str {
        &self.shown
    }

    /// `text` with every secret of this target replaced by `<redacted>`.
    #[must_use]
    pub fn scrub(&self, text: &str) -> String {
        scrub(text, &self.secrets)
    }
}

impl fmt::Debug for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Target")
            .field("url", &self.shown)
            .field("secrets", &Redacted)
            .finish()
    }
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
        assert_eq!(
            shown_url("https://u:p@api.example.com/v1/chat/completions?key=k#f"),
            "https://api.example.com/v1/chat/completions?<redacted>"
        );
        assert_eq!(shown_url("http://127.0.0.1:9/x"), "http://127.0.0.1:9/x");
        assert_eq!(shown_url("not a url"), "not a url");
        assert_eq!(shown_url("nonsense"), "nonsense");
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

    #[test]
    fn targets_hide_their_secrets_in_the_shown_url_and_debug() {
        let target = Target::new("https://u:pw@h.example/hooks/KEY1?x=1").with_secret(" KEY1 ");
        assert_eq!(target.url(), "https://u:pw@h.example/hooks/KEY1?x=1");
        assert_eq!(
            target.shown(),
            "https://h.example/hooks/<redacted>?<redacted>"
        );
        assert_eq!(
            target.scrub("u:pw,x=1,KEY1,pw"),
            "<redacted>,<redacted>,<redacted>,<redacted>"
        );
        let debug = format!("{target:?}");
        assert!(!debug.contains("KEY1") && !debug.contains("pw"), "{debug}");
        assert_eq!(format!("{:?}", Some(Redacted)), "Some(<redacted>)");
    }

    #[test]
    fn joined_targets_keep_the_secrets_and_may_hide_the_suffix() {
        let base = Target::new("http://127.0.0.1:4096").with_secret("pw");
        let joined = base.join("/session?limit=5");
        assert_eq!(joined.url(), "http://127.0.0.1:4096/session?limit=5");
        assert_eq!(joined.shown(), "http://127.0.0.1:4096/session?limit=5");
        assert_eq!(joined.scrub("pw"), "<redacted>");
        let bot = Target::new("https://api.example")
            .join_hidden("/bot1:T/sendMessage", "/bot<redacted>/sendMessage")
            .with_secret("1:T");
        assert_eq!(bot.url(), "https://api.example/bot1:T/sendMessage");
        assert_eq!(bot.shown(), "https://api.example/bot<redacted>/sendMessage");
    }
}
