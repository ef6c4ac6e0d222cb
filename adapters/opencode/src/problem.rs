//! Errors of a server's JSON told without its text (a hostile answer must not reach a log):
//! shared by the HTTP answers and the event stream.

/// How our own bounds on an answer's entries begin their errors ("more than 50000 sessions in
/// one listing (the limit)"), told as they are.
pub(crate) const TOO_MANY: &str = "more than ";

/// What a server's JSON did wrong, without quoting it (a hostile answer's text must not reach
/// a log): the kind of problem and where.
pub(crate) fn parse_problem(error: &serde_json::Error) -> String {
    let kind = match error.classify() {
        serde_json::error::Category::Io => "unreadable",
        serde_json::error::Category::Syntax => "not JSON",
        serde_json::error::Category::Data => "JSON of the wrong shape",
        serde_json::error::Category::Eof => "cut short",
    };
    let what = if error.classify() == serde_json::error::Category::Data {
        let text = error.to_string();
        if text.starts_with(TOO_MANY) {
            // Our own bound (a listing's sessions, a page's messages): no text of the server's.
            format!(" ({})", text.split(" at line ").next().unwrap_or(""))
        } else if text.contains("expected") {
            // serde's "invalid type: string \"…\", expected …": keep the expectation only.
            let expected = text
                .split_once("expected ")
                .map_or("", |(_, e)| e)
                .split(" at line ")
                .next()
                .unwrap_or("");
            format!(" (expected {})", agentwatch_http::head(expected, 60))
        } else if let Some(field) = text.strip_prefix("missing field `") {
            format!(" (missing `{}`)", field.split('`').next().unwrap_or(""))
        } else {
            String::new()
        }
    } else {
        String::new()
    };
    format!(
        "{kind}{what} at line {} column {}",
        error.line(),
        error.column()
    )
}
