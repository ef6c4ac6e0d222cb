//! Encodings requests need: Basic-auth credentials, percent-encoded URL parts.

use base64::Engine as _;
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, percent_decode_str, utf8_percent_encode};

/// The `Authorization` header value for HTTP Basic auth: `Basic base64(user:password)`.
#[must_use]
pub fn basic_auth(username: &str, password: &str) -> String {
    format!(
        "Basic {}",
        base64(format!("{username}:{password}").as_bytes())
    )
}

/// The bytes a URL part keeps as they are: ASCII letters and digits, `-_.~` (RFC 3986's
/// unreserved characters) and `:` (legal in a path segment and a query, and part of a Telegram
/// bot token); every other byte is percent-encoded.
const ENCODED: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~')
    .remove(b':');

/// `text` as a URL path segment or query value: letters, digits and `-_.~:` as they are, every
/// other byte percent-encoded, so that it cannot change the URL's shape.
#[must_use]
pub fn percent_encode(text: &str) -> String {
    utf8_percent_encode(text, ENCODED).to_string()
}

/// Decode `%XX` escapes; a malformed escape is kept as it is, bytes that are not UTF-8 become
/// U+FFFD.
#[must_use]
pub fn percent_decode(text: &str) -> String {
    percent_decode_str(text).decode_utf8_lossy().into_owned()
}

/// Standard base64 with padding.
fn base64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_rfc4648_vectors() {
        for (plain, encoded) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("opencode:s3cret", "b3BlbmNvZGU6czNjcmV0"),
        ] {
            assert_eq!(base64(plain.as_bytes()), encoded);
        }
        assert_eq!(
            basic_auth("opencode", "s3cret"),
            "Basic b3BlbmNvZGU6czNjcmV0"
        );
    }

    #[test]
    fn unreserved_bytes_and_colons_stay_and_the_rest_is_percent_encoded() {
        assert_eq!(percent_encode("ses_ab-C.~"), "ses_ab-C.~");
        assert_eq!(percent_encode("a b/c=="), "a%20b%2Fc%3D%3D");
        assert_eq!(percent_encode("123456:AB-c_d"), "123456:AB-c_d");
        assert_eq!(percent_encode("a/b?c d#e&f"), "a%2Fb%3Fc%20d%23e%26f");
        assert_eq!(percent_encode("é"), "%C3%A9");
        for text in ["ses_1", "a b/c?d", "é%"] {
            assert_eq!(percent_decode(&percent_encode(text)), text);
        }
        assert_eq!(percent_decode("%zz%4"), "%zz%4");
    }
}
