//! Text from files and servers on its way to a terminal or the journal: control characters
//! (a newline that would forge a `tick done` line, an escape sequence that would drive the
//! terminal, C1 controls) are written as escapes, so one value stays one visible field.

use std::borrow::Cow;

/// `text` with every control character escaped (`\n`, `\u{1b}`, `\u{9b}`); unchanged (and not
/// copied) when it holds none.
pub fn escape_control(text: &str) -> Cow<'_, str> {
    if !text.chars().any(char::is_control) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// A journal value in single quotes: quotes, backslashes and control characters are escaped so
/// one event stays one line.
pub fn quote(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('\'');
    for c in text.chars() {
        match c {
            '\'' => out.push_str("\\'"),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => out.extend(c.escape_default()),
            c => out.push(c),
        }
    }
    out.push('\'');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_escaped_and_plain_text_is_kept() {
        let rows = [
            ("ses_abc", "ses_abc"),
            ("a\nb", "a\\nb"),
            ("x\u{1b}[2Jy", "x\\u{1b}[2Jy"),
            ("csi\u{9b}31m", "csi\\u{9b}31m"),
            ("tab\there", "tab\\there"),
            ("ümlaut", "ümlaut"),
        ];
        for (input, want) in rows {
            assert_eq!(escape_control(input), want, "{input:?}");
        }
        assert!(matches!(escape_control("plain"), Cow::Borrowed(_)));
    }

    #[test]
    fn quoted_values_stay_on_one_line() {
        assert_eq!(quote("opencode loop: explore"), "'opencode loop: explore'");
        assert_eq!(quote("it's"), r"'it\'s'");
        assert_eq!(quote("a\nb\\c"), r"'a\nb\\c'");
    }
}
