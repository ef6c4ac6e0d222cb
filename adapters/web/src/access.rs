//! Who may ask what: the `Host` check (DNS rebinding), the token, and the POST checks (CSRF).
//!
//! | listening on | token set | GET | POST |
//! |---|---|---|---|
//! | loopback | no | anyone on the machine | same origin, JSON |
//! | loopback | yes | anyone on the machine | the token, same origin, JSON |
//! | beyond loopback | (required) | the token | the token, same origin, JSON |
//!
//! The `Host` check applies to every request. Listening on loopback, a `Host` is `127.0.0.1`,
//! `[::1]` or `localhost` (with a port or without), or a configured name:
//! DNS rebinding needs a name the attacker controls in the URL, which the browser then sends as
//! the `Host`, and the "0.0.0.0 day" reaches local services through `http://0.0.0.0:PORT`, a
//! page's request whose `Host` is `0.0.0.0`. Listening beyond loopback, the machine's own
//! addresses are its origin too: any address but an unspecified one (`0.0.0.0`, `[::]`).

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
    if host_allowed(host, options.listen, &options.allowed_hosts) {
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

/// Whether a server listening on `listen` answers `host` (with a port or without): a loopback
/// name (`127.0.0.1`, `[::1]`, `localhost`), one of `allowed`, or (listening beyond loopback)
/// an address of the machine, never an unspecified one. The port is not the browser attacks'
/// (a page's request carries the URL's own port), so it is not checked.
fn host_allowed(host: &str, listen: std::net::SocketAddr, allowed: &[String]) -> bool {
    let host = host.trim();
    let name = host_name(host).trim_end_matches('.');
    if allowed.iter().any(|a| a.eq_ignore_ascii_case(name)) {
        return true;
    }
    let address = name.parse::<std::net::IpAddr>().ok();
    let loopback_name = name.eq_ignore_ascii_case("localhost")
        || address.is_some_and(|a| {
            a == std::net::IpAddr::from([127, 0, 0, 1]) || a == std::net::Ipv6Addr::LOCALHOST
        });
    let own_address = !listen.ip().is_loopback() && address.is_some_and(|a| !a.is_unspecified());
    loopback_name || own_address
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

    /// Table: (Host, allowed listening on 127.0.0.1:8080, allowed listening on 0.0.0.0:8080).
    #[test]
    fn hosts_are_loopback_names_named_or_the_machines_addresses() {
        let allowed = vec!["watch.lan".to_owned()];
        let loopback: std::net::SocketAddr = "127.0.0.1:8080".parse().unwrap();
        let everywhere: std::net::SocketAddr = "0.0.0.0:8080".parse().unwrap();
        for (host, on_loopback, beyond) in [
            ("127.0.0.1:8080", true, true),
            ("127.0.0.1", true, true),
            ("localhost:8080", true, true),
            ("LOCALHOST", true, true),
            ("[::1]:8080", true, true),
            ("[::1]", true, true),
            // The "0.0.0.0 day": a public page's request to http://0.0.0.0:PORT.
            ("0.0.0.0:8080", false, false),
            ("0.0.0.0", false, false),
            ("[::]:8080", false, false),
            ("127.0.0.1:9999", true, true),
            ("127.1.2.3:8080", false, true),
            ("10.0.0.1:8080", false, true),
            ("[fe80::1]:8080", false, true),
            ("watch.lan:8080", true, true),
            ("WATCH.LAN.", true, true),
            ("evil.example:8080", false, false),
            ("localhost.evil.example", false, false),
            ("127.0.0.1.evil.example", false, false),
            ("", false, false),
        ] {
            assert_eq!(
                host_allowed(host, loopback, &allowed),
                on_loopback,
                "{host} on loopback"
            );
            assert_eq!(
                host_allowed(host, everywhere, &allowed),
                beyond,
                "{host} beyond"
            );
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
