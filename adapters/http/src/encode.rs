//! Encodings requests need: Basic-auth credentials, percent-encoded URL parts.

/// The `Authorization` header value for HTTP Basic auth: `Basic base64(user:password)`.
#[must_use]
pub fn basic_auth(username: &str, password: &str) -> String {
    format!(
        "Basic {}",
        base64(format!("{username}:{password}").as_bytes())
    )
}

/// `text` as a URL path segment or query value: ASCII letters and digits, `-_.~` and the bytes
/// of `keep` as they are, every other byte percent-encoded, so that it cannot change the URL's
/// shape.
#[must_use]
pub fn percent_encode(text: &str, keep: &[u8]) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || b"-_.~".contains(&byte) || keep.contains(&byte) {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// Standard base64 with padding.
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
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
    fn unreserved_and_kept_bytes_stay_and_the_rest_is_percent_encoded() {
        assert_eq!(percent_encode("ses_ab-C.~", b""), "ses_ab-C.~");
        assert_eq!(percent_encode("a b/c==", b""), "a%20b%2Fc%3D%3D");
        assert_eq!(percent_encode("123456:AB-c_d", b":"), "123456:AB-c_d");
        assert_eq!(percent_encode("a/b?c d", b":"), "a%2Fb%3Fc%20d");
        assert_eq!(percent_encode("é", b""), "%C3%A9");
    }
}
