//! The layers a configuration is read from (files, the overlay, the environment, `--set`), and
//! how a file's text is checked and shown without its secrets.

use super::*;

pub(super) fn xdg_dir(env: Env<'_>, var: &str, fallback: &str) -> Option<PathBuf> {
    env(var)
        .map(PathBuf::from)
        .or_else(|| env("HOME").map(|h| Path::new(&h).join(fallback)))
}

/// Expand a leading `~/` with `$HOME`.
pub fn expand_home(path: &str, env: Env<'_>) -> PathBuf {
    match (path.strip_prefix("~/"), env("HOME")) {
        (Some(rest), Some(home)) => Path::new(&home).join(rest),
        _ => PathBuf::from(path),
    }
}

/// A TOML error as it may be shown: where (the key, or the line and column) and what kind of
/// problem, never the text there or the value (a config file may hold a token or a
/// secret-bearing URL, and an error reaches terminals and journals).
pub(super) fn shown_toml_error(error: &toml::de::Error, text: Option<&str>) -> String {
    // Without the input, toml's own rendering is the message and the key path (`in `a.b``).
    let mut bare = error.clone();
    bare.set_input(None);
    let rendered = bare.to_string();
    let key = rendered
        .lines()
        .filter_map(|l| l.strip_prefix("in `").and_then(|k| k.strip_suffix('`')))
        .next_back();
    let position = match (error.span(), text) {
        (Some(span), Some(text)) => {
            let before = text.get(..span.start).unwrap_or(text);
            let line = before.matches('\n').count() + 1;
            let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
            Some(format!("line {line}, column {column}"))
        }
        _ => None,
    };
    let message = without_value(error.message());
    match (key, position) {
        (Some(key), _) => format!("{key}: {message}"),
        (None, Some(position)) => format!("{position}: {message}"),
        (None, None) => message,
    }
}

/// A serde/TOML message without the value it quotes: `invalid type: string "…", expected a
/// boolean` becomes `invalid type: string, expected a boolean`; the same for `invalid value` and
/// `unknown variant`. Other messages name keys or describe syntax, and are kept.
pub(super) fn without_value(message: &str) -> String {
    let expected = |rest: &str| {
        rest.rfind(", expected ")
            .map_or("", |at| &rest[at..])
            .to_owned()
    };
    for prefix in ["invalid type: ", "invalid value: "] {
        if let Some(rest) = message.strip_prefix(prefix) {
            let kind = rest.split([' ', ',']).next().unwrap_or("value");
            return format!("{prefix}{kind}{}", expected(rest));
        }
    }
    if let Some(rest) = message.strip_prefix("unknown variant ") {
        return format!("unknown variant{}", expected(rest));
    }
    message.lines().next().unwrap_or_default().to_owned()
}

/// Read and check one TOML file on its own.
/// Read and check a config file. Every way it cannot be read is a configuration error (78)
/// naming the file: missing, unreadable, or not text at all (binary garbage is not "bad data"
/// to the user, who wrote it as config).
pub(super) fn read_table(path: &Path) -> Result<Table, Error> {
    let text = std::fs::read(path)
        .map_err(|e| config_err(format!("config file {}: {e}", path.display())))
        .and_then(|bytes| {
            String::from_utf8(bytes).map_err(|e| {
                config_err(format!(
                    "config file {}: not UTF-8 text (invalid byte at offset {})",
                    path.display(),
                    e.utf8_error().valid_up_to()
                ))
            })
        })?;
    read_text(path, &text)
}

/// Check the text of `path` on its own.
pub(super) fn read_text(path: &Path, text: &str) -> Result<Table, Error> {
    let table: Table = toml::from_str(text).map_err(|e| {
        config_err(format!(
            "{}: {}",
            path.display(),
            shown_toml_error(&e, Some(text))
        ))
    })?;
    Config::deserialize(Value::Table(table.clone())).map_err(|e| {
        config_err(format!(
            "{}: {}",
            path.display(),
            shown_toml_error(&e, None)
        ))
    })?;
    warn_if_readable_secrets(path, text);
    Ok(table)
}

/// A config file readable by group or others that holds what looks like a secret (a URL with
/// a password, a token or key in its query, a Slack-style key path, a `token`/`secret`/
/// `password`/`api_key` value) gets a warning on stderr naming the file and the fix, never the
/// secret. Secrets belong in the environment or a 0640 env file.
pub(super) fn warn_if_readable_secrets(path: &Path, text: &str) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let Ok(meta) = std::fs::metadata(path) else {
            return;
        };
        let mode = meta.permissions().mode() & 0o777;
        if mode & 0o077 == 0 || !holds_secret(text) {
            return;
        }
        eprintln!(
            "{}agentwatch: warning: {} is readable by {} (mode {mode:04o}) and holds what looks like a secret (a token or a password in a URL): run chmod 600 on it, or move the secret to the environment",
            crate::journal::prefix(crate::journal::Priority::Warning),
            path.display(),
            if mode & 0o007 != 0 {
                "others"
            } else {
                "its group"
            }
        );
    }
    #[cfg(not(unix))]
    let _ = (path, text);
}

/// Whether TOML text holds what looks like a secret: a URL whose redacted form differs (a
/// password, a `?token=`/`key=` query, a Slack-style path key), or a secret-named key with a
/// string value.
pub(super) fn holds_secret(text: &str) -> bool {
    let Ok(table) = toml::from_str::<Table>(text) else {
        return false;
    };
    pub(super) fn walk(key: &str, value: &Value) -> bool {
        match value {
            Value::String(s) => {
                let lower = key.to_ascii_lowercase();
                let named = [
                    "token",
                    "secret",
                    "password",
                    "api_key",
                    "apikey",
                    "routing_key",
                ]
                .iter()
                .any(|n| lower == *n || lower.ends_with(&format!("_{n}")))
                    && !lower.ends_with("_env")
                    && !s.is_empty();
                let url = (s.starts_with("http://") || s.starts_with("https://"))
                    && agentwatch_http::shown_url(s) != *s;
                named || url
            }
            Value::Array(items) => items.iter().any(|v| walk(key, v)),
            Value::Table(t) => t.iter().any(|(k, v)| walk(k, v)),
            _ => false,
        }
    }
    table.iter().any(|(k, v)| walk(k, v))
}

/// Deep-merge `overlay` into `base`: tables merge key by key, anything else is replaced.
pub(super) fn merge(base: &mut Table, overlay: Table) {
    for (key, value) in overlay {
        match (base.get_mut(&key), value) {
            (Some(Value::Table(b)), Value::Table(o)) => merge(b, o),
            (_, v) => {
                base.insert(key, v);
            }
        }
    }
}

/// Set `a.b.c = value` in a table, creating tables on the way.
pub(crate) fn set_path(table: &mut Table, dotted: &str, value: Value) -> Result<(), Error> {
    let mut parts: Vec<&str> = dotted.split('.').collect();
    let Some(last) = parts.pop().filter(|k| !k.is_empty()) else {
        return Err(Error::usage(format!("--set {dotted}: empty key")));
    };
    let mut here = table;
    for part in parts {
        let entry = here
            .entry(part.to_owned())
            .or_insert_with(|| Value::Table(Table::new()));
        here = match entry {
            Value::Table(t) => t,
            _ => {
                return Err(config_err(format!(
                    "--set {dotted}: `{part}` is not a table"
                )));
            }
        };
    }
    here.insert(last.to_owned(), value);
    Ok(())
}

/// Removes `a.b.c` from a table, if it is there.
pub(super) fn remove_path(table: &mut Table, dotted: &str) {
    match dotted.split_once('.') {
        None => {
            table.remove(dotted);
        }
        Some((head, rest)) => {
            if let Some(Value::Table(inner)) = table.get_mut(head) {
                remove_path(inner, rest);
            }
        }
    }
}

/// A `--set` value: a TOML literal (`10`, `true`, `["a"]`, `"x"`), else a plain string.
pub(super) fn parse_value(text: &str) -> Value {
    toml::from_str::<Table>(&format!("v = {text}"))
        .ok()
        .and_then(|mut t| t.remove("v"))
        .unwrap_or_else(|| Value::String(text.to_owned()))
}

/// One `--set KEY=VALUE` flag, the one dialect of every command and of `cargo xtask`: a dotted
/// key (a detector short key such as `top_min` stands for `watchdog.detector.top_min`) and a TOML
/// literal value (`10`, `true`, `["a"]`, `"x"`), else the text as a plain string.
pub fn parse_set(item: &str) -> Result<(String, Value), Error> {
    let (key, value) = item
        .split_once('=')
        .ok_or_else(|| Error::usage(format!("--set {item}: expected KEY=VALUE")))?;
    let key = key.trim();
    // The spec's name for `read_only_agents` is a short key too.
    let key = if detect_core::DETECT_KEYS.contains(&key) || key == "read_only_agent_keywords" {
        format!("watchdog.detector.{key}")
    } else {
        key.to_owned()
    };
    Ok((key, parse_value(value.trim())))
}

/// Every secret the configuration leads to: the values of the variables it names for tokens,
/// keys and passwords (`*_env`, the router key), and the secret parts of its URLs (user-info,
/// query values, path keys). What [`scrub_secrets`] removes.
pub fn secret_values(config: &Config, env: Env<'_>) -> Vec<String> {
    let mut vars: Vec<&str> = vec![
        &config.opencode.password_env,
        &config.serve.token_env,
        &config.deck.telegram_token_env,
        "FLY_LOOP_ROUTER_KEY",
    ];
    vars.extend(config.watchdog.llm.api_key_env.as_deref());
    for ch in &config.channels {
        vars.extend(ch.token_env.as_deref());
        vars.extend(ch.routing_key_env.as_deref());
    }
    let mut secrets: Vec<String> = vars
        .into_iter()
        .filter_map(env)
        .flat_map(|v| [v.trim().to_owned(), v])
        .collect();
    let mut urls: Vec<&str> = config.opencode.servers.iter().map(String::as_str).collect();
    urls.push(&config.watchdog.llm.url);
    urls.push(&config.deck.telegram_api_base);
    urls.extend(config.recover.router_url.as_deref());
    for ch in &config.channels {
        urls.extend(ch.url.as_deref());
        urls.extend(ch.api_base.as_deref());
        urls.extend(ch.urls.iter().flatten().map(String::as_str));
    }
    for url in urls {
        secrets.extend(agentwatch_http::url_parts(url).secrets);
    }
    // Longest first, so a secret that contains another is removed whole.
    secrets.retain(|s| s.trim().len() >= 4);
    secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
    secrets.dedup();
    secrets
}

/// `text` (an error a channel, a server or a file gave) as it may be shown, stored or logged:
/// every secret of the configuration removed, then what looks like one
/// ([`agentwatch_http::redact_text`]).
pub fn scrub_secrets(config: &Config, env: Env<'_>, text: &str) -> String {
    agentwatch_http::redact_text(&agentwatch_http::scrub(text, &secret_values(config, env)))
}
