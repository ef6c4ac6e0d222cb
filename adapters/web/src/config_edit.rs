//! Live edits of the nine allowlisted keys: validated, then written atomically into
//! `config.local.toml` (the machine-local overlay every job reads at its next tick).

use detect_core::DetectConfig;
use std::path::Path;
use toml::{Table, Value};

/// The keys `POST /admin/api/config/{key}` accepts, and no other.
pub const CONFIG_KEYS: &[&str] = &[
    "watchdog.enabled",
    "watchdog.local_llm_enabled",
    "watchdog.detector.window",
    "watchdog.detector.dup_min",
    "watchdog.detector.top_min",
    "watchdog.detector.top_min_ro",
    "watchdog.detector.cum_min",
    "watchdog.detector.cover_min",
    "watchdog.detector.min_calls",
];

/// Why an edit was refused (nothing was written).
#[derive(Debug, thiserror::Error)]
pub enum ConfigEditError {
    #[error("`{0}` is not one of the editable keys ({keys})", keys = CONFIG_KEYS.join(", "))]
    UnknownKey(String),
    #[error("{key}: {message}")]
    BadValue { key: String, message: String },
    #[error("{path}: {message}")]
    File { path: String, message: String },
}

/// The detector keys among [`CONFIG_KEYS`], by their short name.
fn detector_short(key: &str) -> Option<&str> {
    key.strip_prefix("watchdog.detector.")
}

/// The overlay as a table (an absent file is empty).
fn read_overlay(path: &Path) -> Result<Table, ConfigEditError> {
    let file = |message: String| ConfigEditError::File {
        path: path.display().to_string(),
        message,
    };
    match std::fs::read_to_string(path) {
        Ok(text) => toml::from_str(&text).map_err(|e| file(e.to_string().trim_end().to_owned())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Table::new()),
        Err(e) => Err(file(e.to_string())),
    }
}

fn get_path<'t>(table: &'t Table, dotted: &str) -> Option<&'t Value> {
    let mut parts = dotted.split('.').peekable();
    let mut here = table;
    while let Some(part) = parts.next() {
        let value = here.get(part)?;
        if parts.peek().is_none() {
            return Some(value);
        }
        here = value.as_table()?;
    }
    None
}

fn set_path(table: &mut Table, dotted: &str, value: Value) -> Result<(), String> {
    let mut parts: Vec<&str> = dotted.split('.').collect();
    let last = parts.pop().unwrap_or_default();
    let mut here = table;
    for part in parts {
        let entry = here
            .entry(part.to_owned())
            .or_insert_with(|| Value::Table(Table::new()));
        here = entry
            .as_table_mut()
            .ok_or_else(|| format!("`{part}` in the overlay is not a table"))?;
    }
    here.insert(last.to_owned(), value);
    Ok(())
}

/// The JSON value of an edit as the TOML value its key takes.
fn to_toml(key: &str, value: &serde_json::Value) -> Result<Value, ConfigEditError> {
    let bad = |message: &str| ConfigEditError::BadValue {
        key: key.to_owned(),
        message: message.to_owned(),
    };
    match key {
        "watchdog.enabled" | "watchdog.local_llm_enabled" => value
            .as_bool()
            .map(Value::Boolean)
            .ok_or_else(|| bad("must be true or false")),
        "watchdog.detector.dup_min" | "watchdog.detector.cover_min" => value
            .as_f64()
            .filter(|f| f.is_finite())
            .map(Value::Float)
            .ok_or_else(|| bad("must be a number")),
        _ => value
            .as_u64()
            .filter(|n| *n <= u64::from(u32::MAX))
            .and_then(|n| i64::try_from(n).ok())
            .map(Value::Integer)
            .ok_or_else(|| bad("must be a whole number")),
    }
}

/// Apply the detector keys of `overlay` over `base`, validating each.
fn detector_with(base: &DetectConfig, overlay: &Table) -> Result<DetectConfig, ConfigEditError> {
    let mut detector = base.clone();
    for key in CONFIG_KEYS {
        let (Some(short), Some(value)) = (detector_short(key), get_path(overlay, key)) else {
            continue;
        };
        let text = match value {
            Value::Integer(i) => i.to_string(),
            Value::Float(f) => f.to_string(),
            other => other.to_string(),
        };
        detector
            .set(short, &text)
            .map_err(|e| ConfigEditError::BadValue {
                key: (*key).to_owned(),
                message: e.to_string(),
            })?;
    }
    Ok(detector)
}

/// The detector in force: `base` with the overlay's edits (an unreadable overlay: `base`).
pub fn effective_detector(base: &DetectConfig, overlay: Option<&Path>) -> DetectConfig {
    overlay
        .and_then(|p| read_overlay(p).ok())
        .and_then(|t| detector_with(base, &t).ok())
        .unwrap_or_else(|| base.clone())
}

/// The nine keys' values in the overlay (`null`: not set there).
pub fn overlay_values(overlay: &Path) -> Result<serde_json::Value, ConfigEditError> {
    let table = read_overlay(overlay)?;
    let mut out = serde_json::Map::new();
    for key in CONFIG_KEYS {
        let value = get_path(&table, key)
            .and_then(|v| serde_json::to_value(v).ok())
            .unwrap_or(serde_json::Value::Null);
        out.insert((*key).to_owned(), value);
    }
    Ok(serde_json::Value::Object(out))
}

/// Validate `key = value` and write the overlay atomically (temp file, fsync, rename).
pub fn apply(
    overlay: &Path,
    base: &DetectConfig,
    key: &str,
    value: &serde_json::Value,
) -> Result<(), ConfigEditError> {
    if !CONFIG_KEYS.contains(&key) {
        return Err(ConfigEditError::UnknownKey(key.to_owned()));
    }
    let new = to_toml(key, value)?;
    let mut table = read_overlay(overlay)?;
    set_path(&mut table, key, new).map_err(|message| ConfigEditError::File {
        path: overlay.display().to_string(),
        message,
    })?;
    detector_with(base, &table)?;
    let text = toml::to_string_pretty(&table).map_err(|e| ConfigEditError::File {
        path: overlay.display().to_string(),
        message: e.to_string(),
    })?;
    // 0600: an overlay may hold a channel's token.
    agentwatch_systemd::write_atomic(overlay, text.as_bytes(), 0o600).map_err(|e| {
        ConfigEditError::File {
            path: overlay.display().to_string(),
            message: format!("{}: {}", e.step, e.source),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "agentwatch-web-config-{name}-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn each_key_takes_its_type_and_range() {
        let base = DetectConfig::default();
        let dir = temp_dir("table");
        let overlay = dir.join("config.local.toml");
        let cases: &[(&str, serde_json::Value, bool)] = &[
            ("watchdog.enabled", serde_json::json!(false), true),
            ("watchdog.enabled", serde_json::json!("false"), false),
            ("watchdog.local_llm_enabled", serde_json::json!(true), true),
            ("watchdog.detector.window", serde_json::json!(80), true),
            ("watchdog.detector.window", serde_json::json!(0), false),
            ("watchdog.detector.window", serde_json::json!(-3), false),
            ("watchdog.detector.window", serde_json::json!(1.5), false),
            ("watchdog.detector.dup_min", serde_json::json!(0.3), true),
            ("watchdog.detector.dup_min", serde_json::json!(1.5), false),
            ("watchdog.detector.top_min", serde_json::json!(14), true),
            ("watchdog.detector.top_min_ro", serde_json::json!(0), false),
            ("watchdog.detector.cum_min", serde_json::json!(20), true),
            ("watchdog.detector.cover_min", serde_json::json!(0), false),
            ("watchdog.detector.cover_min", serde_json::json!(5.5), true),
            ("watchdog.detector.min_calls", serde_json::json!(30), true),
            (
                "watchdog.detector.profile",
                serde_json::json!("precise"),
                false,
            ),
            ("watchdog.dashboard_base_url", serde_json::json!("x"), false),
        ];
        for (key, value, ok) in cases {
            let before = std::fs::read_to_string(&overlay).unwrap_or_default();
            let result = apply(&overlay, &base, key, value);
            assert_eq!(result.is_ok(), *ok, "{key} = {value}: {result:?}");
            if !ok {
                let after = std::fs::read_to_string(&overlay).unwrap_or_default();
                assert_eq!(before, after, "{key}: a refused edit changed the file");
                assert!(result.unwrap_err().to_string().contains(key));
            }
        }
        let values = overlay_values(&overlay).unwrap();
        assert_eq!(values["watchdog.detector.top_min"], 14);
        assert_eq!(values["watchdog.enabled"], false);
        let eff = effective_detector(&base, Some(&overlay));
        assert_eq!((eff.top_min, eff.window, eff.cover_min), (14, 80, 5.5));
    }

    #[test]
    fn other_overlay_keys_are_kept() {
        let dir = temp_dir("keep");
        let overlay = dir.join("config.local.toml");
        std::fs::write(
            &overlay,
            "[opencode]\nservers = [\"http://127.0.0.1:4096\"]\n",
        )
        .unwrap();
        apply(
            &overlay,
            &DetectConfig::default(),
            "watchdog.detector.top_min",
            &serde_json::json!(9),
        )
        .unwrap();
        let table: Table = toml::from_str(&std::fs::read_to_string(&overlay).unwrap()).unwrap();
        assert_eq!(
            table["opencode"]["servers"][0].as_str(),
            Some("http://127.0.0.1:4096")
        );
        assert_eq!(
            table["watchdog"]["detector"]["top_min"].as_integer(),
            Some(9)
        );
    }
}
