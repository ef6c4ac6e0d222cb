//! Times as a person reads them in reasons and events: ISO 8601, never a raw unix number.

/// `2026-01-15T14:30:01+00:00` (RFC 3339, UTC) for a unix time; `@UNIX` for a time beyond the
/// years -9999..=9999, which no clock gives but a hostile input may.
#[must_use]
pub fn iso8601(unix: i64) -> String {
    match jiff::Timestamp::from_second(unix) {
        Ok(time) => time.strftime("%Y-%m-%dT%H:%M:%S+00:00").to_string(),
        Err(_) => format!("@{unix}"),
    }
}

#[cfg(test)]
mod tests {
    use super::iso8601;

    #[test]
    fn iso_dates() {
        assert_eq!(iso8601(0), "1970-01-01T00:00:00+00:00");
        assert_eq!(iso8601(1_768_487_401), "2026-01-15T14:30:01+00:00");
        assert_eq!(iso8601(951_782_400), "2000-02-29T00:00:00+00:00");
        assert_eq!(iso8601(-1), "1969-12-31T23:59:59+00:00");
        assert_eq!(iso8601(i64::MAX), format!("@{}", i64::MAX));
        assert_eq!(iso8601(i64::MIN), format!("@{}", i64::MIN));
    }
}
