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
/// `?<redacted>`, a fragment dropped, path keys shown as `<redacted>`) and its secret parts.
/// Tolerates anything: a string that is not a URL is shown as it is, minus what looks like a
/// query.
///
/// Path keys are the segments after a `services`, `webhooks` or `hooks` segment (Slack's
/// `/services/T…/B…/KEY`, Discord's `/webhooks/ID/TOKEN`), Telegram's `bot<id>:<token>`
/// segment (shown `bot<redacted>`), and any segment of 32 or more token characters holding
/// both letters and digits (an API key pasted into a path).
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
    let path = shown_path(path, &mut secrets);
    let mut shown = match scheme {
        Some(scheme) => format!("{scheme}://{host}{path}"),
        None => format!("{host}{path}"),
    };
    if let Some(query) = query {
        secrets.push(query.to_owned());
        // Each value alone too: a server that refuses a token may echo it without its name.
        secrets.extend(query_values(query));
        if !query.is_empty() {
            shown.push_str("?<redacted>");
        }
    }
    UrlParts { shown, secrets }
}

/// The values of a query's parameters (raw and percent-decoded) long enough to be credentials:
/// six characters or more, so `?v=1` does not hide every `1` of an error.
fn query_values(query: &str) -> Vec<String> {
    let mut values = Vec::new();
    for pair in query.split('&') {
        let value = pair.split_once('=').map_or(pair, |(_, v)| v);
        if value.len() < 6 {
            continue;
        }
        let decoded = crate::encode::percent_decode(value);
        if decoded != value && decoded.len() >= 6 {
            values.push(decoded);
        }
        values.push(value.to_owned());
    }
    values
}

/// `path` with its key segments (see [`url_parts`]) replaced by `<redacted>` and pushed to
/// `secrets`.
fn shown_path(path: &str, secrets: &mut Vec<String>) -> String {
    let mut keys_follow = false;
    let segments: Vec<String> = path
        .split('/')
        .map(|segment| {
            let lower = segment.to_ascii_lowercase();
            let shown = if keys_follow && !segment.is_empty() && segment != "<redacted>" {
                secrets.push(segment.to_owned());
                "<redacted>".to_owned()
            } else if let Some(token) = segment.strip_prefix("bot").filter(|t| {
                t.split_once(':')
                    .is_some_and(|(id, _)| !id.is_empty() && id.bytes().all(|b| b.is_ascii_digit()))
            }) {
                secrets.push(token.to_owned());
                "bot<redacted>".to_owned()
            } else if looks_like_key(segment) {
                secrets.push(segment.to_owned());
                "<redacted>".to_owned()
            } else {
                segment.to_owned()
            };
            keys_follow |= matches!(lower.as_str(), "services" | "webhooks" | "hooks");
            shown
        })
        .collect();
    segments.join("/")
}

/// 32 or more token characters with both letters and digits.
fn looks_like_key(segment: &str) -> bool {
    segment.len() >= 32
        && segment
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.~:+=".contains(&b))
        && segment.bytes().any(|b| b.is_ascii_digit())
        && segment.bytes().any(|b| b.is_ascii_alphabetic())
}

/// How a URL is shown in errors, logs, the store and JSON output (see [`url_parts`]): the one
/// redaction every URL that can leave the process goes through.
#[must_use]
pub fn shown_url(url: &str) -> String {
    url_parts(url).shown
}

/// Names of query / form / header parameters whose values are secrets.
const SECRET_KEYS: &[&str] = &[
    "access_token",
    "api_key",
    "apikey",
    "auth",
    "key",
    "pass",
    "password",
    "passwd",
    "secret",
    "token",
];

/// `text` (an error body, a message, a value) with what looks like a secret replaced by
/// `<redacted>`: every URL in it shown as [`shown_url`] shows it, the credentials after
/// `Basic` / `Bearer` (an `Authorization` header echoed back), and the values of `token=`,
/// `password=`, `key=` and the like. Known secrets are removed with [`scrub`]; this catches the
/// ones nobody told us about.
#[must_use]
pub fn redact_text(text: &str) -> String {
    redact_pairs(&redact_credentials(&redact_urls(text)))
}

fn is_url_end(c: char) -> bool {
    c.is_whitespace() || matches!(c, '"' | '\'' | '`' | ')' | ']' | '}' | ',' | '\\')
}

fn redact_urls(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("://") {
        // The scheme starts after the last character that cannot be in one (which may be
        // several bytes long: a multi-byte character right before `://` is not a scheme).
        let scheme_start = rest[..at]
            .char_indices()
            .rev()
            .find(|(_, c)| !(c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')))
            .map_or(0, |(i, c)| i + c.len_utf8());
        let after = &rest[at + 3..];
        let end = at + 3 + after.find(is_url_end).unwrap_or(after.len());
        out.push_str(&rest[..scheme_start]);
        if scheme_start == at {
            // No scheme: not a URL, keep the separator.
            out.push_str("://");
            rest = &rest[at + 3..];
            continue;
        }
        out.push_str(&shown_url(&rest[scheme_start..end]));
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

fn is_token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"+/=-._~".contains(&b)
}

fn redact_credentials(text: &str) -> String {
    let lower = text.to_ascii_lowercase();
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    let mut from = 0;
    while let Some((at, scheme)) = ["basic ", "bearer "]
        .iter()
        .filter_map(|s| lower[from..].find(s).map(|i| (from + i, s.len())))
        .min()
    {
        let start = at + scheme;
        let len = text.as_bytes()[start..]
            .iter()
            .take_while(|b| is_token_byte(**b))
            .count();
        let token = &text[start..start + len];
        let credential_like = len >= 8
            && token
                .bytes()
                .any(|b| b.is_ascii_digit() || b"+/=".contains(&b) || b.is_ascii_uppercase());
        if credential_like {
            out.push_str(&text[copied..start]);
            out.push_str("<redacted>");
            copied = start + len;
        }
        from = start + len;
    }
    out.push_str(&text[copied..]);
    out
}

fn redact_pairs(text: &str) -> String {
    let bytes = text.as_bytes();
    let lower = text.to_ascii_lowercase();
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    let mut i = 0;
    while i < bytes.len() {
        let at_word_start =
            i == 0 || !(bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_');
        let key = at_word_start
            .then(|| {
                SECRET_KEYS.iter().find(|k| {
                    lower.as_bytes()[i..].starts_with(k.as_bytes())
                        && bytes.get(i + k.len()) == Some(&b'=')
                })
            })
            .flatten();
        if let Some(key) = key {
            let start = i + key.len() + 1;
            let len = bytes[start..]
                .iter()
                .take_while(|b| !(b.is_ascii_whitespace() || b"&\"';,<".contains(b)))
                .count();
            out.push_str(&text[copied..start]);
            if len > 0 && &text[start..start + len] != "<redacted>" {
                out.push_str("<redacted>");
            } else {
                out.push_str(&text[start..start + len]);
            }
            copied = start + len;
            i = copied;
        } else {
            i += 1;
        }
    }
    out.push_str(&text[copied..]);
    out
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
        target.shown = scrub(&target.shown, &target.secrets);
        target
    }

    /// Adds a secret (and its trimmed form); blank ones are ignored.
    #[must_use]
    pub fn with_secret(mut self, secret: &str) -> Self {
        self.secrets.push(secret.to_owned());
        self.secrets.push(secret.trim().to_owned());
        self.shown = scrub(&self.shown, &self.secrets);
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
        target.shown = scrub(&target.shown, &target.secrets);
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

    /// `text` with every secret of this target replaced by `<redacted>`, then
    /// [`redact_text`]: what a server echoes back is scrubbed of credentials it was not told.
    #[must_use]
    pub fn scrub(&self, text: &str) -> String {
        redact_text(&scrub(text, &self.secrets))
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

    /// Issue 38: a webhook that refuses `?token=…` and echoes the token alone ("bad token X").
    #[test]
    fn a_query_value_echoed_alone_is_scrubbed() {
        let target = Target::new("http://127.0.0.1:9/hook?token=s3cr3t-T0KEN&v=1&who=ops%2Deast");
        let echoed = target.scrub("401: bad token s3cr3t-T0KEN for ops-east, v1");
        assert_eq!(echoed, "401: bad token <redacted> for <redacted>, v1");
        assert!(!target.shown().contains("s3cr3t"));
    }

    #[test]
    fn path_keys_are_redacted_in_shown_urls() {
        for (url, shown) in [
            (
                "https://hooks.slack.com/services/T0001/B0002/XXXXabcdXXXXabcd",
                "https://hooks.slack.com/services/<redacted>/<redacted>/<redacted>",
            ),
            (
                "https://discord.com/api/webhooks/123/tok-EN_x",
                "https://discord.com/api/webhooks/<redacted>/<redacted>",
            ),
            (
                "https://api.telegram.org/bot123:AAx-y/sendMessage",
                "https://api.telegram.org/bot<redacted>/sendMessage",
            ),
            (
                "https://h.example/v1/sk0123456789abcdef0123456789abcdef/x",
                "https://h.example/v1/<redacted>/x",
            ),
            (
                "http://127.0.0.1:4096/session/ses_3f1a2b4c5d6e7f8091a2b3c4d5/message",
                "http://127.0.0.1:4096/session/ses_3f1a2b4c5d6e7f8091a2b3c4d5/message",
            ),
            ("http://user:pw@h:1/a", "http://h:1/a"),
        ] {
            assert_eq!(shown_url(url), shown, "{url}");
            assert_eq!(shown_url(shown), shown, "shown form is stable: {shown}");
        }
    }

    #[test]
    fn redact_text_hides_credentials_urls_and_secret_parameters() {
        for (text, redacted) in [
            (
                "echo: Authorization: Basic b3BlbmNvZGU6czNjcmV0\r\n",
                "echo: Authorization: Basic <redacted>\r\n",
            ),
            (
                "authorization: bearer sk-ABCdef0123",
                "authorization: bearer <redacted>",
            ),
            ("use Basic authentication", "use Basic authentication"),
            (
                "failed http://u:pw@h.example/x?token=1 (and \"https://hooks.slack.com/services/T1/B2/K3\")",
                "failed http://h.example/x?<redacted> (and \"https://hooks.slack.com/services/<redacted>/<redacted>/<redacted>\")",
            ),
            (
                "token=abc&x=1 password=p;",
                "token=<redacted>&x=1 password=<redacted>;",
            ),
            ("monkey=3 key=", "monkey=3 key="),
            ("a://b ://c é=1 basic ", "a://b ://c é=1 basic "),
            // A multi-byte character right before `://` (a proptest finding: it panicked).
            ("𑙐:// token=a0aaaaaA0AAA", "𑙐:// token=<redacted>"),
        ] {
            assert_eq!(redact_text(text), redacted, "{text}");
            assert_eq!(redact_text(redacted), redacted, "idempotent: {redacted}");
        }
    }

    proptest::proptest! {
        #[test]
        fn redact_text_is_total_and_hides_planted_secrets(
            before in "\\PC{0,40}",
            after in "[ &\\n][\\PC]{0,20}",
            secret in "[A-Za-z0-9]{12,20}",
            form in 0usize..4,
        ) {
            let _ = redact_text(&before);
            let planted = match form {
                0 => format!("token={secret}"),
                1 => format!("Authorization: Basic {secret}0"),
                2 => format!("http://u:{secret}@h/x"),
                _ => format!("https://h/x?a={secret}"),
            };
            let text = format!("{before} {planted}{after}");
            let shown = redact_text(&text);
            proptest::prop_assert!(!shown.contains(&secret), "{shown}");
        }
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
