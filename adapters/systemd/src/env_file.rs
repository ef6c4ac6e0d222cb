//! `KEY=value` files that may hold a secret, read as data.

use std::collections::BTreeMap;
use std::path::Path;

/// The widest mode an env file may have: owner read/write, group read (`0640 root:GROUP`).
pub const ENV_FILE_MAX_MODE: u32 = 0o640;

/// The variables of an env file, by name.
pub type EnvFile = BTreeMap<String, String>;

/// Why an env file was not used. No variant holds a value from the file: it may be a secret.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EnvFileError {
    #[error(
        "{path}: mode {mode:04o} is wider than {max:04o}; the file may hold a key, so it is refused. \
         Fix: chmod 0640 {path} (owner root, group of the account that runs agentwatch)",
        max = ENV_FILE_MAX_MODE
    )]
    TooOpen { path: String, mode: u32 },
    #[error("{path}: not a regular file")]
    NotAFile { path: String },
    #[error("{path}: {message}")]
    Io { path: String, message: String },
    #[error("{path}: line {line}: {why}")]
    Syntax {
        path: String,
        line: usize,
        why: &'static str,
    },
}

/// Reads `path`: `Ok(None)` when it does not exist, the variables when it is a regular file no
/// wider than 0640, an error otherwise. The mode is that of the file a symlink points to.
pub fn read_env_file(path: &Path) -> Result<Option<EnvFile>, EnvFileError> {
    let shown = path.display().to_string();
    let io = |e: std::io::Error| EnvFileError::Io {
        path: shown.clone(),
        message: e.to_string(),
    };
    let meta = match std::fs::metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io(e)),
    };
    if !meta.is_file() {
        return Err(EnvFileError::NotAFile { path: shown });
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = meta.permissions().mode() & 0o7777;
        if mode & !ENV_FILE_MAX_MODE != 0 {
            return Err(EnvFileError::TooOpen { path: shown, mode });
        }
    }
    let text = std::fs::read_to_string(path).map_err(io)?;
    parse_env_text(&text)
        .map(Some)
        .map_err(|(line, why)| EnvFileError::Syntax {
            path: shown,
            line,
            why,
        })
}

/// Parses `KEY=value` lines: blank lines and `#` comments skipped, an optional leading `export `,
/// the value trimmed and one pair of surrounding `"` or `'` removed. Nothing is expanded or
/// unescaped. A bad line gives its number (from 1) and why, never its content. A name given twice
/// keeps its last value, as systemd's `EnvironmentFile=` does.
pub fn parse_env_text(text: &str) -> Result<EnvFile, (usize, &'static str)> {
    let mut vars = EnvFile::new();
    for (i, raw) in text.lines().enumerate() {
        if let Some((key, value)) = parse_line(raw).map_err(|why| (i + 1, why))? {
            vars.insert(key.to_owned(), value.to_owned());
        }
    }
    Ok(vars)
}

/// The value of `key` in an env file's text, read leniently (agent-deck's `.env` files, which
/// agentwatch reads but does not own): the same line syntax as [`parse_env_text`], lines it cannot
/// parse skipped, the last assignment kept, the value trimmed; `None` when absent or empty.
#[must_use]
pub fn env_value(text: &str, key: &str) -> Option<String> {
    text.lines()
        .rev()
        .filter_map(|line| parse_line(line).ok().flatten())
        .find(|(k, _)| *k == key)
        .map(|(_, value)| value.trim().to_owned())
        .filter(|value| !value.is_empty())
}

/// One line: `None` for a blank line or a comment, else the name and the unquoted value.
fn parse_line(raw: &str) -> Result<Option<(&str, &str)>, &'static str> {
    let line = raw.trim();
    if line.is_empty() || line.starts_with('#') {
        return Ok(None);
    }
    let line = line.strip_prefix("export ").unwrap_or(line);
    let Some((key, value)) = line.split_once('=') else {
        return Err("expected KEY=value");
    };
    let key = key.trim();
    let valid_key = key
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !valid_key {
        return Err("the name must be letters, digits and '_'");
    }
    let value = value.trim();
    let value = ['"', '\'']
        .iter()
        .find_map(|q| {
            value
                .strip_prefix(*q)
                .and_then(|v| v.strip_suffix(*q))
                .filter(|_| value.len() >= 2)
        })
        .unwrap_or(value);
    Ok(Some((key, value)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentwatch_testkit::TempDir;
    use std::os::unix::fs::PermissionsExt;

    fn write(dir: &Path, text: &str, mode: u32) -> std::path::PathBuf {
        let path = dir.join("loop-recovery.env");
        std::fs::write(&path, text).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        path
    }

    #[test]
    fn parses_data_never_expands() {
        let text = "# router\nFLY_LOOP_ROUTER_URL=http://127.0.0.1:4000/v1\n\nexport FLY_LOOP_MODEL = \"free model\"\nFLY_LOOP_ROUTER_KEY='$(id) a=b'\n";
        let vars = parse_env_text(text).unwrap();
        assert_eq!(vars["FLY_LOOP_ROUTER_URL"], "http://127.0.0.1:4000/v1");
        assert_eq!(vars["FLY_LOOP_MODEL"], "free model");
        assert_eq!(vars["FLY_LOOP_ROUTER_KEY"], "$(id) a=b");
        assert_eq!(parse_env_text("A=\"").unwrap()["A"], "\"");
        assert_eq!(
            parse_env_text("ok=1\nsecret-value\n"),
            Err((2, "expected KEY=value"))
        );
        assert!(parse_env_text("1A=x").is_err());
    }

    #[test]
    fn one_value_is_looked_up_leniently() {
        for (text, want) in [
            ("TELEGRAM_STATE_DIR=/s/a\n", Some("/s/a")),
            ("# x\nexport TELEGRAM_STATE_DIR=\"/s/b\"\n", Some("/s/b")),
            ("not a line\nTELEGRAM_STATE_DIR='~/s/c'", Some("~/s/c")),
            (
                "TELEGRAM_STATE_DIR=/old\nTELEGRAM_STATE_DIR=/new\n",
                Some("/new"),
            ),
            ("OTHER=1\nTELEGRAM_STATE_DIR=\n", None),
            ("TELEGRAM_STATE_DIR=\" \"\n", None),
            ("", None),
        ] {
            assert_eq!(
                env_value(text, "TELEGRAM_STATE_DIR").as_deref(),
                want,
                "{text:?}"
            );
        }
    }

    #[test]
    fn modes_up_to_0640_are_read_wider_ones_refused() {
        let dir = TempDir::new("aw-envfile");
        for mode in [0o600, 0o640, 0o400] {
            let path = write(&dir.path, "K=v\n", mode);
            assert_eq!(read_env_file(&path).unwrap().unwrap()["K"], "v", "{mode:o}");
        }
        for mode in [0o644, 0o660, 0o604, 0o700, 0o666] {
            let path = write(&dir.path, "K=secret\n", mode);
            let err = read_env_file(&path).unwrap_err();
            let text = err.to_string();
            assert!(matches!(err, EnvFileError::TooOpen { .. }), "{mode:o}");
            assert!(text.contains(&format!("{mode:04o}")), "{text}");
            assert!(text.contains("wider than 0640"), "{text}");
            assert!(text.contains("chmod 0640"), "{text}");
            assert!(!text.contains("secret"), "{text}");
        }
        assert_eq!(read_env_file(&dir.path.join("absent.env")), Ok(None));
        let err = read_env_file(&dir.path).unwrap_err();
        assert!(matches!(err, EnvFileError::NotAFile { .. }));
        let path = write(&dir.path, "K=v\nsecret\n", 0o600);
        let err = read_env_file(&path).unwrap_err().to_string();
        assert!(err.contains("line 2") && !err.contains("secret"), "{err}");
    }
}
