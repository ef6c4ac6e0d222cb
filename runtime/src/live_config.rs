//! Live edits of `agentwatch serve`: the allowlisted keys, each checked against its row of
//! [`config::BOUNDS`] and then with the whole configuration as it would load, written into
//! `config.local.toml` with its comments and order kept (`toml_edit`), atomically and 0600.
//!
//! The overlay is beside `--config FILE`, else in the user's configuration directory
//! ([`config::overlay_path`]), created on the first edit; every job reads it at its next tick.
//! Every message is free of the configuration's secrets ([`config::scrub_secrets`]).

use crate::config::{self, Config};
use agentwatch_web::{ConfigRefusal, LiveConfig};
use detect_core::DetectConfig;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// How an editable key's value is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Bool,
    Count,
    Number,
}

impl Kind {
    fn as_str(self) -> &'static str {
        match self {
            Self::Bool => "bool",
            Self::Count => "count",
            Self::Number => "number",
        }
    }
}

/// The keys a live edit may set, and no other.
pub const EDITABLE: &[(&str, Kind)] = &[
    ("watchdog.enabled", Kind::Bool),
    ("watchdog.local_llm_enabled", Kind::Bool),
    ("watchdog.detector.window", Kind::Count),
    ("watchdog.detector.dup_min", Kind::Number),
    ("watchdog.detector.top_min", Kind::Count),
    ("watchdog.detector.top_min_ro", Kind::Count),
    ("watchdog.detector.cum_min", Kind::Count),
    ("watchdog.detector.cover_min", Kind::Number),
    ("watchdog.detector.min_calls", Kind::Count),
];

/// The environment a long-running server reads secrets from.
pub type SharedEnv = Arc<dyn Fn(&str) -> Option<String> + Send + Sync>;

/// The configuration files a server edits.
pub struct ConfigFile {
    /// `--config FILE`, if given.
    explicit: Option<PathBuf>,
    /// `config.local.toml`.
    overlay: PathBuf,
    /// The configuration at start: what is shown when the files cannot be read now.
    start: Config,
    /// The `--set` flags the jobs beside this server run with (`agentwatch run --set …`): they
    /// decide over the files, so the values shown are the files' with them applied.
    sets: Vec<String>,
    env: SharedEnv,
}

impl std::fmt::Debug for ConfigFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the configuration or the environment: they may lead to secrets.
        write!(
            f,
            "ConfigFile {{ explicit: {:?}, overlay: {:?}, .. }}",
            self.explicit, self.overlay
        )
    }
}

/// A refusal about the value (400).
fn bad_value(message: String) -> ConfigRefusal {
    ConfigRefusal {
        status: 400,
        field: "value",
        message,
    }
}

impl ConfigFile {
    /// Edits of the overlay of `explicit` (or of the default configuration); `None` when there
    /// is nowhere to write (no `--config` and no configuration directory).
    pub fn new(explicit: Option<&Path>, start: Config, env: SharedEnv) -> Option<Self> {
        let overlay = config::overlay_path(explicit, &*env)?;
        Some(Self {
            explicit: explicit.map(Path::to_path_buf),
            overlay,
            start,
            sets: Vec::new(),
            env,
        })
    }

    /// The same, for jobs that run with `sets` (`--set KEY=VALUE`) over the files.
    #[must_use]
    pub fn with_sets(mut self, sets: Vec<String>) -> Self {
        self.sets = sets;
        self
    }

    /// Where edits are written.
    pub fn overlay(&self) -> &Path {
        &self.overlay
    }

    /// The configuration as it loads now, `--set` flags applied (the start's when the files
    /// cannot be read).
    fn current(&self) -> Config {
        config::load(self.explicit.as_deref(), &self.sets, &*self.env)
            .map(|l| l.config)
            .unwrap_or_else(|_| self.start.clone())
    }

    /// The configuration the files alone give (no `--set`), when they read.
    fn files_alone(&self) -> Option<Config> {
        config::load(self.explicit.as_deref(), &[], &*self.env)
            .ok()
            .map(|l| l.config)
    }

    fn scrub(&self, text: &str) -> String {
        config::scrub_secrets(&self.current(), &*self.env, text)
    }

    /// A refusal about the file (500), naming it.
    fn file_error(&self, what: &str) -> ConfigRefusal {
        ConfigRefusal {
            status: 500,
            field: "file",
            message: self.scrub(&format!("{}: {what}", self.overlay.display())),
        }
    }

    /// The overlay's text ("" when it does not exist yet).
    fn read(&self) -> Result<String, ConfigRefusal> {
        match std::fs::read_to_string(&self.overlay) {
            Ok(text) => Ok(text),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(String::new()),
            Err(e) => Err(self.file_error(&format!("cannot be read: {e}"))),
        }
    }

    /// The overlay as a document that keeps its comments and order.
    fn document(&self, text: &str) -> Result<toml_edit::DocumentMut, ConfigRefusal> {
        text.parse::<toml_edit::DocumentMut>().map_err(|e| {
            // Where, never what: the line may hold a secret.
            let at = e.span().map_or(String::new(), |span| {
                let before = text.get(..span.start).unwrap_or(text);
                format!(" at line {}", before.matches('\n').count() + 1)
            });
            self.file_error(&format!("is not valid TOML{at}; fix it by hand first"))
        })
    }

    fn write(&self, text: &str) -> Result<(), ConfigRefusal> {
        if let Some(dir) = self.overlay.parent() {
            std::fs::create_dir_all(dir)
                .map_err(|e| self.file_error(&format!("cannot create its directory: {e}")))?;
        }
        // 0600: an overlay may hold a channel's token.
        agentwatch_systemd::write_atomic(&self.overlay, text.as_bytes(), 0o600)
            .map_err(|e| self.file_error(&format!("cannot be written: {}: {}", e.step, e.source)))
    }
}

/// `value` as the TOML value of `key`, within its bound.
fn to_toml(key: &str, kind: Kind, value: &Value) -> Result<toml_edit::Value, ConfigRefusal> {
    let bound = config::bound_of(key);
    let within = |n: f64| bound.is_none_or(|b| b.admits(n));
    let refused =
        || bad_value(bound.map_or_else(|| format!("{key}: must be a number"), |b| b.refusal(key)));
    match kind {
        Kind::Bool => value
            .as_bool()
            .map(toml_edit::Value::from)
            .ok_or_else(|| bad_value(format!("{key}: must be true or false"))),
        Kind::Count => {
            let n = value
                .as_u64()
                .filter(|_| value.is_u64())
                .ok_or_else(|| match bound {
                    Some(b) => bad_value(format!("{key}: must be a whole number {}", b.range())),
                    None => bad_value(format!("{key}: must be a whole number")),
                })?;
            let n = i64::try_from(n).ok().filter(|n| within(*n as f64));
            n.map(toml_edit::Value::from).ok_or_else(refused)
        }
        Kind::Number => {
            let n = value.as_f64().ok_or_else(refused)?;
            if within(n) {
                Ok(toml_edit::Value::from(n))
            } else {
                Err(refused())
            }
        }
    }
}

/// Set `dotted` in `doc`, creating tables on the way and keeping the comments around an old
/// value.
fn set_in(
    doc: &mut toml_edit::DocumentMut,
    dotted: &str,
    mut value: toml_edit::Value,
) -> Result<(), String> {
    let mut parts: Vec<&str> = dotted.split('.').collect();
    let last = parts.pop().unwrap_or_default();
    let mut here: &mut dyn toml_edit::TableLike = doc.as_table_mut();
    for part in parts {
        if here.get(part).is_none() {
            let mut table = toml_edit::Table::new();
            table.set_implicit(true);
            here.insert(part, toml_edit::Item::Table(table));
        }
        here = here
            .get_mut(part)
            .and_then(toml_edit::Item::as_table_like_mut)
            .ok_or_else(|| format!("`{part}` in the overlay is not a table"))?;
    }
    // In place: the key and the comment lines above it stay, the value keeps its own comment.
    if let Some(old) = here.get_mut(last).and_then(toml_edit::Item::as_value_mut) {
        *value.decor_mut() = old.decor().clone();
        *old = value;
    } else {
        here.insert(last, toml_edit::Item::Value(value));
    }
    Ok(())
}

/// The value of `dotted` in `doc`, as JSON (`null` when not set there).
fn get_in(doc: &toml_edit::DocumentMut, dotted: &str) -> Value {
    let mut item = doc.as_item();
    for part in dotted.split('.') {
        match item.get(part) {
            Some(next) => item = next,
            None => return Value::Null,
        }
    }
    match item.as_value() {
        Some(toml_edit::Value::Boolean(b)) => json!(*b.value()),
        Some(toml_edit::Value::Integer(i)) => json!(*i.value()),
        Some(toml_edit::Value::Float(f)) => json!(*f.value()),
        _ => Value::Null,
    }
}

/// The value of an editable key in force in `config`.
fn in_force(config: &Config, key: &str) -> Value {
    let d = &config.watchdog.detector;
    match key {
        "watchdog.enabled" => json!(config.watchdog.enabled),
        "watchdog.local_llm_enabled" => json!(config.watchdog.local_llm_enabled),
        "watchdog.detector.window" => json!(d.window),
        "watchdog.detector.dup_min" => json!(d.dup_min),
        "watchdog.detector.top_min" => json!(d.top_min),
        "watchdog.detector.top_min_ro" => json!(d.top_min_ro),
        "watchdog.detector.cum_min" => json!(d.cum_min),
        "watchdog.detector.cover_min" => json!(d.cover_min),
        "watchdog.detector.min_calls" => json!(d.min_calls),
        _ => Value::Null,
    }
}

/// What a person should know beside a key's value: a `--set` flag decides it (an edit is
/// written but does not apply while the jobs run with the flag), or another key turns it off.
fn note(config: &Config, key: &str, by_flag: bool) -> Option<&'static str> {
    if by_flag {
        return Some("set by a --set flag of the running jobs: it decides over the files");
    }
    (key == "watchdog.local_llm_enabled" && !config.local_compute.enabled)
        .then_some("no local model is asked while local_compute.enabled = false")
}

/// The thresholds the pages plot.
fn thresholds(d: &DetectConfig) -> Value {
    json!({
        "window": d.window, "dup_min": d.dup_min, "top_min": d.top_min,
        "top_min_ro": d.top_min_ro, "cum_min": d.cum_min, "cover_min": d.cover_min,
        "min_calls": d.min_calls,
    })
}

impl LiveConfig for ConfigFile {
    fn show(&self) -> Result<Value, ConfigRefusal> {
        let text = self.read()?;
        let doc = self.document(&text)?;
        let config = self.current();
        let files = self.files_alone();
        let keys: Vec<Value> = EDITABLE
            .iter()
            .map(|(key, kind)| {
                let bound = config::bound_of(key);
                let by_flag = files
                    .as_ref()
                    .is_some_and(|f| in_force(f, key) != in_force(&config, key));
                json!({
                    "note": note(&config, key, by_flag),
                    "key": key,
                    "kind": kind.as_str(),
                    "min": bound.map(|b| b.min),
                    "min_exclusive": bound.map(|b| b.min_exclusive),
                    "max": bound.map(|b| b.max),
                    "in_file": get_in(&doc, key),
                    "value": in_force(&config, key),
                })
            })
            .collect();
        Ok(json!({
            "file": self.overlay.display().to_string(),
            "exists": self.overlay.is_file(),
            "keys": keys,
            "detector": thresholds(&config.detector()),
        }))
    }

    fn set(&self, key: &str, value: &Value) -> Result<Value, ConfigRefusal> {
        let Some((key, kind)) = EDITABLE.iter().find(|(k, _)| *k == key) else {
            let known: Vec<&str> = EDITABLE.iter().map(|(k, _)| *k).collect();
            return Err(ConfigRefusal {
                status: 400,
                field: "key",
                message: format!(
                    "`{}` is not one of the editable keys ({})",
                    agentwatch_http::head(key, 80),
                    known.join(", ")
                ),
            });
        };
        let new = to_toml(key, *kind, value)?;
        let text = self.read()?;
        let mut doc = self.document(&text)?;
        set_in(&mut doc, key, new).map_err(|m| self.file_error(&m))?;
        let edited = doc.to_string();
        // The whole configuration as it would load: a bound across keys (`top_min` within the
        // window), the detector's own rules, another file's values.
        config::load_with_overlay(self.explicit.as_deref(), &edited, &*self.env)
            .map_err(|e| bad_value(self.scrub(&e.to_string())))?;
        self.write(&edited)?;
        Ok(json!({
            "key": key, "value": value, "file": self.overlay.display().to_string(),
            "effective": "next tick",
        }))
    }

    fn detector(&self) -> DetectConfig {
        self.current().detector()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("aw-live-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn file(dir: &Path) -> ConfigFile {
        let main = dir.join("config.toml");
        if !main.exists() {
            std::fs::write(&main, "").unwrap();
        }
        let env: SharedEnv = Arc::new(|_: &str| None);
        ConfigFile::new(Some(&main), Config::default(), env).unwrap()
    }

    /// Each row: key, value, accepted (a refusal names the key, and the bound when it is one).
    #[test]
    fn each_key_takes_its_type_within_its_bound() {
        let dir = dir("table");
        let edits = file(&dir);
        let rows: &[(&str, Value, bool)] = &[
            ("watchdog.enabled", json!(false), true),
            ("watchdog.enabled", json!("false"), false),
            ("watchdog.local_llm_enabled", json!(true), true),
            ("watchdog.detector.window", json!(10_000), true),
            ("watchdog.detector.window", json!(10_001), false),
            ("watchdog.detector.window", json!(80), true),
            ("watchdog.detector.window", json!(4_294_967_295_u64), false),
            ("watchdog.detector.window", json!(0), false),
            ("watchdog.detector.window", json!(-3), false),
            ("watchdog.detector.window", json!(1.5), false),
            (
                "watchdog.detector.min_calls",
                json!(4_294_967_295_u64),
                false,
            ),
            ("watchdog.detector.min_calls", json!(30), true),
            ("watchdog.detector.top_min", json!(4_294_967_295_u64), false),
            ("watchdog.detector.top_min", json!(81), false),
            ("watchdog.detector.top_min", json!(14), true),
            ("watchdog.detector.dup_min", json!(0.3), true),
            ("watchdog.detector.dup_min", json!(1.5), false),
            ("watchdog.detector.top_min_ro", json!(0), false),
            ("watchdog.detector.cum_min", json!(20), true),
            ("watchdog.detector.cover_min", json!(0), false),
            ("watchdog.detector.cover_min", json!(5.5), true),
            ("watchdog.detector.profile", json!("precise"), false),
            ("watchdog.dashboard_base_url", json!("x"), false),
        ];
        for (key, value, ok) in rows {
            let before = std::fs::read_to_string(edits.overlay()).unwrap_or_default();
            let got = edits.set(key, value);
            assert_eq!(got.is_ok(), *ok, "{key} = {value}: {got:?}");
            if let Err(refusal) = got {
                assert_eq!(refusal.status, 400, "{key}");
                assert!(refusal.message.contains(key), "{key}: {}", refusal.message);
                let after = std::fs::read_to_string(edits.overlay()).unwrap_or_default();
                assert_eq!(before, after, "{key}: a refused edit changed the file");
            }
        }
        let refusal = edits
            .set("watchdog.detector.window", &json!(4_294_967_295_u64))
            .unwrap_err();
        assert!(refusal.message.contains("10000"), "{}", refusal.message);
        let shown = edits.show().unwrap();
        let window = shown["keys"]
            .as_array()
            .unwrap()
            .iter()
            .find(|k| k["key"] == "watchdog.detector.window")
            .unwrap();
        assert_eq!(
            (window["in_file"].clone(), window["max"].clone()),
            (json!(80), json!(10_000.0))
        );
        let d = edits.detector();
        assert_eq!((d.top_min, d.window, d.cover_min), (14, 80, 5.5));
    }

    /// Issue 37: the page showed `local_llm_enabled` on while the jobs ran with it off. Each
    /// row: the main file, the `--set` flags, the value shown, the note beside it.
    #[test]
    fn each_boolean_is_shown_as_the_jobs_run_with_it() {
        let off = Some("set by a --set flag of the running jobs: it decides over the files");
        let gated = Some("no local model is asked while local_compute.enabled = false");
        let rows: &[(&str, &[&str], bool, Option<&str>)] = &[
            ("", &[], true, None),
            ("[watchdog]\nlocal_llm_enabled = false\n", &[], false, None),
            ("[watchdog]\nlocal_llm_enabled = true\n", &[], true, None),
            ("", &["watchdog.local_llm_enabled=false"], false, off),
            (
                "[watchdog]\nlocal_llm_enabled = false\n",
                &["watchdog.local_llm_enabled=true"],
                true,
                off,
            ),
            (
                "[watchdog]\nlocal_llm_enabled = false\n",
                &["watchdog.local_llm_enabled=false"],
                false,
                None,
            ),
            ("[local_compute]\nenabled = false\n", &[], true, gated),
        ];
        for (i, (text, sets, shown, note)) in rows.iter().enumerate() {
            let dir = dir(&format!("bool{i}"));
            std::fs::write(dir.join("config.toml"), text).unwrap();
            let sets = sets.iter().map(|s| (*s).to_owned()).collect();
            let shown_now = file(&dir).with_sets(sets).show().unwrap();
            let key = shown_now["keys"]
                .as_array()
                .unwrap()
                .iter()
                .find(|k| k["key"] == "watchdog.local_llm_enabled")
                .unwrap()
                .clone();
            assert_eq!(key["value"], json!(shown), "row {i}: {key}");
            assert_eq!(key["note"], json!(note), "row {i}: {key}");
        }
    }

    #[test]
    fn comments_order_and_other_keys_are_kept() {
        let dir = dir("keep");
        let edits = file(&dir);
        let text = "# my machine\n[opencode]\nservers = [\"http://127.0.0.1:4096\"] # the TUI\n\n[watchdog.detector]\n# tuned on 2026-11-02\ntop_min = 9 # was 12\nwindow = 60\n";
        std::fs::write(edits.overlay(), text).unwrap();
        edits.set("watchdog.detector.top_min", &json!(11)).unwrap();
        edits.set("watchdog.enabled", &json!(false)).unwrap();
        let after = std::fs::read_to_string(edits.overlay()).unwrap();
        assert!(
            after.starts_with(
                "# my machine\n[opencode]\nservers = [\"http://127.0.0.1:4096\"] # the TUI\n"
            ),
            "{after}"
        );
        assert!(
            after.contains("# tuned on 2026-11-02\ntop_min = 11 # was 12\nwindow = 60\n"),
            "{after}"
        );
        assert!(after.contains("enabled = false"), "{after}");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(edits.overlay())
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
    }

    /// Issue 38: a syntax error on a line holding a secret is reported by its line, never
    /// echoed.
    #[test]
    fn a_broken_overlay_is_named_never_echoed() {
        let dir = dir("broken");
        let edits = file(&dir);
        std::fs::write(
            edits.overlay(),
            "[[channels]]\nname = \"hook\"\nurl = \"https://h/x?token=sk-live-SECRET123\n",
        )
        .unwrap();
        for got in [
            edits.show().map(|_| ()),
            edits.set("watchdog.enabled", &json!(true)).map(|_| ()),
        ] {
            let refusal = got.unwrap_err();
            assert_eq!(refusal.status, 500);
            assert!(refusal.message.contains("line 3"), "{}", refusal.message);
            assert!(
                !refusal.message.contains("SECRET123"),
                "{}",
                refusal.message
            );
        }
    }

    /// Issue 40: with no configuration file the first edit creates `config.local.toml` in the
    /// user's configuration directory, and a load reads it.
    #[test]
    fn with_no_config_file_the_edit_goes_to_the_config_directory() {
        let dir = dir("xdg");
        let xdg = dir.join("xdg");
        let xdg_text = xdg.display().to_string();
        let env: SharedEnv =
            Arc::new(move |k: &str| (k == "XDG_CONFIG_HOME").then(|| xdg_text.clone()));
        let edits = ConfigFile::new(None, Config::default(), Arc::clone(&env)).unwrap();
        assert_eq!(edits.overlay(), xdg.join("agentwatch/config.local.toml"));
        assert!(!xdg.exists());
        let answer = edits.set("watchdog.detector.top_min", &json!(9)).unwrap();
        assert_eq!(
            answer["file"],
            json!(
                xdg.join("agentwatch/config.local.toml")
                    .display()
                    .to_string()
            )
        );
        let loaded = config::load(None, &[], &*env).unwrap();
        assert_eq!(loaded.config.watchdog.detector.top_min, 9);
        assert_eq!(loaded.files, vec![xdg.join("agentwatch/config.local.toml")]);
    }
}
