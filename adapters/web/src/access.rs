//! Who may ask what: the `Host` check (DNS rebinding), the token, and the POST checks (CSRF).
//!
//! | listening on | token set | GET | POST |
//! |---|---|---|---|
//! | loopback | no | anyone on the machine | same origin, JSON |
//! | loopback | yes | anyone on the machine | the token, same origin, JSON |
//! | beyond loopback | (required) | the token | the token, same origin, JSON |
//!
//! The `Host` check applies to every request: an IP address, `localhost`, or a configured name.
//! DNS rebinding needs a name the attacker controls in the URL, which the browser then sends as
//! the `Host`; an address typed as such is the origin itself.

use crate::{Incoming, Reply, ServeOptions};
use base64::Engine;
use subtle::ConstantTimeEq;

/// Check `req` before any handler sees it.
pub(crate) fn check(options: &ServeOptions, req: &Incoming) -> Result<(), Reply> {
    check_host(options, req)?;
    let beyond_loopback = !options.listen.ip().is_loopback();
    if (beyond_loopback || req.method == "POST")
        && let Some(token) = options.token.as_deref()
        && !presents(req, token)
    {
        return Err(Reply::error(
            401,
            None,
            "this server needs its token: Authorization: Bearer <token> (or Basic with the token as password)",
        )
        .with_header(
            "www-authenticate",
            "Basic realm=\"agentwatch\", charset=\"UTF-8\"",
        ));
    }
    if req.method == "POST" {
        check_post(req)?;
    }
    Ok(())
}

fn check_host(options: &ServeOptions, req: &Incoming) -> Result<(), Reply> {
    let Some(host) = req.header("Host") else {
        // Every browser sends one; a client without one is no page on another site.
        return Ok(());
    };
    if host_allowed(host, &options.allowed_hosts) {
        Ok(())
    } else {
        Err(Reply::error(
            403,
            None,
            format!(
                "Host {host:?} is not this server's: use its address, localhost, or a name in serve.allowed_hosts"
            ),
        ))
    }
}

/// The name of a `Host` header, without its port (and without the brackets of an IPv6 address).
fn host_name(host: &str) -> &str {
    if let Some(rest) = host.strip_prefix('[') {
        return rest.split(']').next().unwrap_or("");
    }
    match host.rsplit_once(':') {
        Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) => name,
        _ => host,
    }
}

/// An IP address, `localhost`, or one of `allowed`.
fn host_allowed(host: &str, allowed: &[String]) -> bool {
    let name = host_name(host.trim()).trim_end_matches('.');
    name.parse::<std::net::IpAddr>().is_ok()
        || name.eq_ignore_ascii_case("localhost")
        || allowed.iter().any(|a| a.eq_ignore_ascii_case(name))
}

/// Whether `req` carries `token`: as a bearer token, or as the password of Basic credentials.
/// Compared in constant time.
fn presents(req: &Incoming, token: &str) -> bool {
    let Some(auth) = req.header("Authorization").map(str::trim) else {
        return false;
    };
    let given = match auth.split_once(' ') {
        Some((scheme, rest)) if scheme.eq_ignore_ascii_case("bearer") => rest.trim().to_owned(),
        Some((scheme, rest)) if scheme.eq_ignore_ascii_case("basic") => {
            let decoded = base64::engine::general_purpose::STANDARD
                .decode(rest.trim())
                .unwrap_or_default();
            let text = String::from_utf8_lossy(&decoded).into_owned();
            match text.split_once(':') {
                Some((_, password)) => password.to_owned(),
                None => return false,
            }
        }
        _ => return false,
    };
    bool::from(given.as_bytes().ct_eq(token.as_bytes()))
}

fn check_post(req: &Incoming) -> Result<(), Reply> {
    if let Some(origin) = req.header("Origin") {
        let own = req.header("Host").map(|h| format!("http://{h}"));
        if own
            .as_deref()
            .is_none_or(|o| !o.eq_ignore_ascii_case(origin))
        {
            return Err(Reply::error(
                403,
                None,
                format!("cross-origin request from {origin:?} refused"),
            ));
        }
    }
    if let Some(site) = req.header("Sec-Fetch-Site")
        && !matches!(site, "same-origin" | "none")
    {
        return Err(Reply::error(
            403,
            None,
            format!("cross-site request ({site}) refused"),
        ));
    }
    let json = req.header("Content-Type").is_some_and(|t| {
        t.trim()
            .to_ascii_lowercase()
            .starts_with("application/json")
    });
    if !json {
        return Err(Reply::error(
            415,
            None,
            "the body must be JSON (Content-Type: application/json)",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_are_addresses_localhost_or_named() {
        let allowed = vec!["watch.lan".to_owned()];
        for (host, ok) in [
            ("127.0.0.1:8080", true),
            ("localhost:8080", true),
            ("LOCALHOST", true),
            ("[::1]:8080", true),
            ("127.1.2.3:80", true),
            ("10.0.0.1:8080", true),
            ("[fe80::1]:8080", true),
            ("watch.lan:8080", true),
            ("WATCH.LAN.", true),
            ("evil.example:8080", false),
            ("localhost.evil.example", false),
            ("127.0.0.1.evil.example", false),
            ("", false),
        ] {
            assert_eq!(host_allowed(host, &allowed), ok, "{host}");
        }
    }

    fn request(method: &str, auth: Option<&str>) -> Incoming {
        let mut headers = vec![
            ("Host".to_owned(), "127.0.0.1:8080".to_owned()),
            ("Content-Type".to_owned(), "application/json".to_owned()),
        ];
        if let Some(a) = auth {
            headers.push(("Authorization".to_owned(), a.to_owned()));
        }
        Incoming {
            method: method.to_owned(),
            path: "/api/watchdog/status".to_owned(),
            query: String::new(),
            headers,
            body: Vec::new(),
        }
    }

    /// Each row: listening beyond loopback, method, Authorization, allowed.
    #[test]
    fn the_token_is_asked_for_as_the_table_says() {
        let basic = |user_pass: &str| {
            format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(user_pass)
            )
        };
        let rows: Vec<(bool, &str, Option<String>, bool)> = vec![
            (false, "GET", None, true),
            (false, "POST", None, false),
            (false, "POST", Some("Bearer s3cret".to_owned()), true),
            (true, "GET", None, false),
            (true, "GET", Some("Bearer nope".to_owned()), false),
            (true, "GET", Some("Bearer s3cret".to_owned()), true),
            (true, "GET", Some("bearer  s3cret ".to_owned()), true),
            (true, "GET", Some(basic("anyone:s3cret")), true),
            (true, "GET", Some(basic("s3cret")), false),
            (true, "GET", Some(basic("anyone:s3cre")), false),
            (true, "GET", Some("Basic !!!".to_owned()), false),
            (true, "GET", Some("s3cret".to_owned()), false),
            (true, "POST", Some("Bearer s3cret".to_owned()), true),
        ];
        for (beyond, method, auth, allowed) in rows {
            let mut options = ServeOptions::new("x.db".into());
            options.token = Some("s3cret".to_owned());
            if beyond {
                options.listen = "0.0.0.0:8080".parse().unwrap();
            }
            let got = check(&options, &request(method, auth.as_deref()));
            assert_eq!(got.is_ok(), allowed, "{beyond} {method} {auth:?}");
            if let Err(reply) = got {
                assert_eq!(reply.status, 401);
                assert!(
                    reply
                        .headers
                        .iter()
                        .any(|(n, v)| *n == "www-authenticate" && v.starts_with("Basic"))
                );
            }
        }
    }
}
