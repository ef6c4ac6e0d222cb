//! Detector thresholds and tool lists, with the design's defaults and validation that names the key.
//!
//! Two profiles: `design` (the default: decisions.md section 1, exactly) and `precise` (the design
//! plus the rules of [`Rule`], measured on the development set; `docs/detection.md`); and `auto`,
//! which judges each session with one of them ([`Profile::judging`]).

use serde::{Deserialize, Serialize};

/// A detection profile: which rules apply on top of the thresholds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Profile {
    /// The design's behaviour, unchanged (decisions.md section 1).
    #[default]
    Design,
    /// The design plus every [`Rule`]: fewer false alarms on bash-driven sessions, and the
    /// `cycle` and `reread` signals.
    Precise,
    /// Each session judged by the profile that fits how it works ([`Profile::judging`]):
    /// `precise` while it works through bash alone, `design` once it uses an edit or write tool
    /// (or when it makes no bash call).
    Auto,
}

impl Profile {
    /// The profiles that judge a session themselves (`auto` picks one of them per session).
    pub const ALL: [Profile; 2] = [Profile::Design, Profile::Precise];

    pub fn as_str(self) -> &'static str {
        match self {
            Profile::Design => "design",
            Profile::Precise => "precise",
            Profile::Auto => "auto",
        }
    }

    /// The rules this profile applies (`auto`: every rule may apply, as the session's profile
    /// decides; no detector judges under `auto` itself).
    pub fn rules(self) -> Rules {
        match self {
            Profile::Design => Rules::NONE,
            Profile::Precise | Profile::Auto => Rules::ALL,
        }
    }

    /// The profile that judges a session whose counted calls so far used bash (`bash`) and an
    /// edit or write tool (`edits`): under `auto`, `precise` for a session that works through bash
    /// alone, `design` otherwise; any other profile judges every session itself.
    pub fn judging(self, bash: bool, edits: bool) -> Profile {
        match self {
            Profile::Auto if bash && !edits => Profile::Precise,
            Profile::Auto => Profile::Design,
            other => other,
        }
    }
}

impl std::fmt::Display for Profile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Profile {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim() {
            "design" => Ok(Profile::Design),
            "precise" => Ok(Profile::Precise),
            "auto" => Ok(Profile::Auto),
            other => Err(format!(
                "unknown profile `{other}` (known: design, precise, auto)"
            )),
        }
    }
}

/// One change the `precise` profile makes to the design (each measured on its own in
/// `docs/detection.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Rule {
    /// bash targets name the files and paths the command works on (`sed -n 1,80p a.py` and
    /// `sed -n 1,80p b.py` differ), file viewers share one target per file, searches are keyed
    /// by their pattern, and set-up commands (`source`, `sleep`, `set`) are skipped.
    PathTargets,
    /// A bash command that writes files (`sed -i`, `> file`, `tee`, heredocs, `patch`,
    /// `git apply`, `apply_patch`, `mv`/`cp`, a python script that writes) and exits 0 lands.
    BashWrites,
    /// A bash write identical to an earlier landed bash write of the session is no landing (the
    /// same `sed -i` again changes nothing).
    RepeatedWrites,
    /// A poll (`sleep N && tail -n 5 job.log`) is waiting, not looping: it counts towards `slow`
    /// only, never towards `dup`, `top` or `cycle`.
    Waits,
    /// A view of known lines (`sed -n 40,90p F`, `head -n 50 F`, a `read` with offset and limit)
    /// gets a target of its own (paging is no loop), and the `reread` signal measures how often
    /// the lines of one file were shown in the window.
    Rereads,
    /// The `cycle` signal: one block of 1-6 calls repeated in a row.
    Cycle,
    /// The `repeat` signal: the same call with the same result (output hash, else status and
    /// exit), alone or as a block of 2-3 calls, repeated in a row. Strong evidence: it fires
    /// before `min_calls`.
    Repeat,
}

impl Rule {
    pub const ALL: [Rule; 7] = [
        Rule::PathTargets,
        Rule::BashWrites,
        Rule::RepeatedWrites,
        Rule::Waits,
        Rule::Rereads,
        Rule::Cycle,
        Rule::Repeat,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Rule::PathTargets => "path_targets",
            Rule::BashWrites => "bash_writes",
            Rule::RepeatedWrites => "repeated_writes",
            Rule::Waits => "waits",
            Rule::Rereads => "rereads",
            Rule::Cycle => "cycle",
            Rule::Repeat => "repeat",
        }
    }

    fn bit(self) -> u8 {
        1 << (self as u8)
    }
}

/// A set of [`Rule`]s.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Rules(u8);

impl Rules {
    pub const NONE: Rules = Rules(0);
    pub const ALL: Rules = Rules(0b111_1111);

    pub fn contains(self, rule: Rule) -> bool {
        self.0 & rule.bit() != 0
    }

    pub fn with(self, rule: Rule) -> Rules {
        Rules(self.0 | rule.bit())
    }

    pub fn without(self, rule: Rule) -> Rules {
        Rules(self.0 & !rule.bit())
    }
}

/// Thresholds of the four signals and the tool lists the detector reads.
///
/// Keys are named as in the design (`watchdog.detector.*`); [`DetectConfig::set`] accepts either
/// the short key (`top_min`) or the full one (`watchdog.detector.top_min`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DetectConfig {
    /// `design` (the default), `precise` or `auto`.
    pub profile: Profile,
    /// `dup` fires when the most repeated call is more than this fraction of the window (strict).
    pub dup_min: f64,
    /// `top` fires when one target is called at least this often in the window.
    pub top_min: u32,
    /// `top` threshold for read-only agents.
    pub top_min_ro: u32,
    /// `slow` fires when one call is repeated at least this often since the last landing.
    pub cum_min: u32,
    /// `coverage` fires when one file is read at least this many times its length in the window.
    pub cover_min: f64,
    /// The window: the last this-many calls of the evaluation span.
    pub window: usize,
    /// No signal fires before the span holds this many calls.
    pub min_calls: usize,
    /// Agent names (case-insensitive) that make a session read-only.
    #[serde(deserialize_with = "names", alias = "read_only_agent_keywords")]
    pub read_only_agents: Vec<String>,
    /// Tools that read one file (`filePath`): target by basename, counted for coverage.
    #[serde(deserialize_with = "names")]
    pub reader_tools: Vec<String>,
    /// Tools whose target is their pattern (first 60 characters).
    #[serde(deserialize_with = "names")]
    pub search_tools: Vec<String>,
    /// Tools that land when their metadata carries a non-empty diff.
    #[serde(deserialize_with = "names")]
    pub edit_tools: Vec<String>,
    /// Tools that land when they complete.
    #[serde(deserialize_with = "names")]
    pub write_tools: Vec<String>,
    /// `cycle` (precise): fires when one block of 1-6 calls, repeated at least 3 times in a row,
    /// covers at least this many calls of the span.
    pub cycle_min: u32,
    /// `reread` (precise): fires when the lines of one file shown in the window, counted with
    /// repeats, are at least this many times the distinct lines shown.
    pub reread_min: f64,
    /// `repeat` (precise): fires, whatever `min_calls`, when the same call and result (or one
    /// block of 2-3 of them, repeated at least twice) runs this many calls in a row.
    pub repeat_min: u32,
    /// Rules of the profile switched off, to measure each one (`cargo xtask detection-report`).
    /// Not a configuration key.
    #[serde(skip)]
    pub ablate: Rules,
}

/// A list of names: a list (`["plan", "explore"]`, as in a config file) or one comma-separated
/// string (`plan,explore`, as `--set read_only_agents=plan,explore` has always accepted).
fn names<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Names {
        List(Vec<String>),
        Commas(String),
    }
    Ok(match Names::deserialize(deserializer)? {
        Names::List(list) => list,
        Names::Commas(text) => split_names(&text),
    })
}

/// `a, b,,c` -> `["a", "b", "c"]`.
fn split_names(text: &str) -> Vec<String> {
    text.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

impl Default for DetectConfig {
    fn default() -> Self {
        let names = |list: &[&str]| list.iter().map(|s| (*s).to_owned()).collect();
        Self {
            profile: Profile::Design,
            dup_min: 0.25,
            top_min: 12,
            top_min_ro: 8,
            cum_min: 15,
            cover_min: 4.0,
            window: 60,
            min_calls: 40,
            read_only_agents: names(&["explore", "librarian", "oracle"]),
            reader_tools: names(&["read"]),
            search_tools: names(&["grep", "glob"]),
            edit_tools: names(&["edit", "multiedit", "patch", "apply_patch"]),
            write_tools: names(&["write"]),
            cycle_min: 12,
            reread_min: 6.0,
            repeat_min: 5,
            ablate: Rules::NONE,
        }
    }
}

/// A configuration value that cannot be used, naming the key.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ConfigError {
    #[error("unknown detector key `{key}` (known: {known})")]
    UnknownKey { key: String, known: String },
    #[error("detector key `{key}`: cannot parse `{value}` as {expected}")]
    Parse {
        key: String,
        value: String,
        expected: &'static str,
    },
    #[error("detector key `{key}` = {value}: {rule}")]
    OutOfRange {
        key: &'static str,
        value: String,
        rule: &'static str,
    },
}

/// The keys [`DetectConfig::set`] accepts.
pub const DETECT_KEYS: &[&str] = &[
    "profile",
    "dup_min",
    "top_min",
    "top_min_ro",
    "cum_min",
    "cover_min",
    "window",
    "min_calls",
    "read_only_agents",
    "reader_tools",
    "search_tools",
    "edit_tools",
    "write_tools",
    "cycle_min",
    "reread_min",
    "repeat_min",
];

impl DetectConfig {
    /// The design's defaults under `profile`.
    pub fn with_profile(profile: Profile) -> Self {
        Self {
            profile,
            ..Self::default()
        }
    }

    /// This configuration under `profile` (the thresholds and lists unchanged).
    pub fn under(&self, profile: Profile) -> Self {
        Self {
            profile,
            ..self.clone()
        }
    }

    /// The rules in force: the profile's, minus [`DetectConfig::ablate`].
    #[inline]
    pub fn rules(&self) -> Rules {
        Rules(self.profile.rules().0 & !self.ablate.0)
    }

    /// Whether `rule` is in force.
    #[inline]
    pub fn applies(&self, rule: Rule) -> bool {
        self.rules().contains(rule)
    }

    /// Check every rule of decisions.md: `0 < dup_min <= 1`, `window >= 1`, `min_calls >= 1`,
    /// thresholds `>= 1`, `cover_min > 0`; and `reread_min > 0`. The first broken rule is
    /// returned, naming its key.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let out = |key, value: String, rule| Err(ConfigError::OutOfRange { key, value, rule });
        if !(self.dup_min > 0.0 && self.dup_min <= 1.0) {
            return out("dup_min", self.dup_min.to_string(), "must be > 0 and <= 1");
        }
        if !(self.reread_min > 0.0 && self.reread_min.is_finite()) {
            return out(
                "reread_min",
                self.reread_min.to_string(),
                "must be a finite number > 0",
            );
        }
        if !(self.cover_min > 0.0 && self.cover_min.is_finite()) {
            return out(
                "cover_min",
                self.cover_min.to_string(),
                "must be a finite number > 0",
            );
        }
        for (key, value) in [
            ("top_min", self.top_min as usize),
            ("top_min_ro", self.top_min_ro as usize),
            ("cum_min", self.cum_min as usize),
            ("cycle_min", self.cycle_min as usize),
            ("repeat_min", self.repeat_min as usize),
            ("window", self.window),
            ("min_calls", self.min_calls),
        ] {
            if value < 1 {
                return out(key, value.to_string(), "must be >= 1");
            }
        }
        Ok(())
    }

    /// Set one key from its text form (`--set key=value`), then validate the whole config.
    /// Lists are comma-separated. The `watchdog.detector.` / `watchdog.` prefixes are accepted.
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), ConfigError> {
        let short = key
            .strip_prefix("watchdog.detector.")
            .or_else(|| key.strip_prefix("watchdog."))
            .unwrap_or(key);
        let value = value.trim();
        let parse_err = |expected| ConfigError::Parse {
            key: key.to_owned(),
            value: value.to_owned(),
            expected,
        };
        let float = || value.parse::<f64>().map_err(|_| parse_err("a number"));
        let count = || {
            value
                .parse::<u32>()
                .map_err(|_| parse_err("a whole number"))
        };
        let size = || {
            value
                .parse::<usize>()
                .map_err(|_| parse_err("a whole number"))
        };
        let list = || split_names(value);
        match short {
            "profile" => {
                self.profile = value
                    .parse()
                    .map_err(|_| parse_err("design, precise or auto"))?;
            }
            "dup_min" => self.dup_min = float()?,
            "top_min" => self.top_min = count()?,
            "top_min_ro" => self.top_min_ro = count()?,
            "cum_min" => self.cum_min = count()?,
            "cover_min" => self.cover_min = float()?,
            "window" => self.window = size()?,
            "min_calls" => self.min_calls = size()?,
            "read_only_agents" | "read_only_agent_keywords" => self.read_only_agents = list(),
            "reader_tools" => self.reader_tools = list(),
            "search_tools" => self.search_tools = list(),
            "edit_tools" => self.edit_tools = list(),
            "write_tools" => self.write_tools = list(),
            "cycle_min" => self.cycle_min = count()?,
            "reread_min" => self.reread_min = float()?,
            "repeat_min" => self.repeat_min = count()?,
            _ => {
                return Err(ConfigError::UnknownKey {
                    key: key.to_owned(),
                    known: DETECT_KEYS.join(", "),
                });
            }
        }
        self.validate()
    }

    pub(crate) fn is_reader(&self, tool: &str) -> bool {
        self.reader_tools.iter().any(|t| t == tool)
    }
    pub(crate) fn is_search(&self, tool: &str) -> bool {
        self.search_tools.iter().any(|t| t == tool)
    }
    pub(crate) fn is_edit(&self, tool: &str) -> bool {
        self.edit_tools.iter().any(|t| t == tool)
    }
    pub(crate) fn is_write(&self, tool: &str) -> bool {
        self.write_tools.iter().any(|t| t == tool)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_the_designs() {
        let c = DetectConfig::default();
        assert_eq!(
            (c.dup_min, c.top_min, c.top_min_ro, c.cum_min),
            (0.25, 12, 8, 15)
        );
        assert_eq!((c.cover_min, c.window, c.min_calls), (4.0, 60, 40));
        assert_eq!(c.read_only_agents, ["explore", "librarian", "oracle"]);
        assert_eq!(c.profile, Profile::Design);
        assert_eq!(c.rules(), Rules::NONE);
        assert_eq!(c.validate(), Ok(()));
    }

    #[test]
    fn profiles_select_rules() {
        let mut c = DetectConfig::default();
        c.set("profile", "precise").unwrap();
        assert_eq!(c.profile, Profile::Precise);
        assert!(Rule::ALL.iter().all(|r| c.applies(*r)));
        c.ablate = Rules::NONE.with(Rule::Cycle);
        assert!(!c.applies(Rule::Cycle) && c.applies(Rule::Waits));
        c.set("watchdog.detector.profile", "design").unwrap();
        assert!(Rule::ALL.iter().all(|r| !c.applies(*r)));
        c.set("profile", "auto").unwrap();
        assert_eq!(c.profile, Profile::Auto);
        // Each session is judged by one of the two; auto itself judges none.
        assert_eq!(Profile::Auto.judging(true, false), Profile::Precise);
        assert_eq!(Profile::Auto.judging(true, true), Profile::Design);
        assert_eq!(Profile::Auto.judging(false, false), Profile::Design);
        assert_eq!(Profile::Precise.judging(true, true), Profile::Precise);
        assert_eq!(Profile::Design.judging(true, false), Profile::Design);
        let parsed: DetectConfig = serde_json::from_str(r#"{"profile": "precise"}"#).unwrap();
        assert_eq!(parsed, DetectConfig::with_profile(Profile::Precise));
        assert!(serde_json::from_str::<DetectConfig>(r#"{"profile": "fast"}"#).is_err());
    }

    /// Each row: key, bad value, the key the error must name.
    #[test]
    fn invalid_values_name_their_key() {
        let rows = [
            ("dup_min", "0", "dup_min"),
            ("dup_min", "1.5", "dup_min"),
            ("dup_min", "NaN", "dup_min"),
            ("cover_min", "0", "cover_min"),
            ("cover_min", "-1", "cover_min"),
            ("window", "0", "window"),
            ("min_calls", "0", "min_calls"),
            ("top_min", "0", "top_min"),
            ("top_min_ro", "0", "top_min_ro"),
            ("cum_min", "0", "cum_min"),
            ("cycle_min", "0", "cycle_min"),
            ("repeat_min", "0", "repeat_min"),
            ("reread_min", "0", "reread_min"),
            ("profile", "fast", "profile"),
            ("top_min", "twelve", "top_min"),
            ("window", "-3", "window"),
            ("watchdog.detector.window", "x", "watchdog.detector.window"),
            ("nonsense", "1", "nonsense"),
        ];
        for (key, value, named) in rows {
            let err = DetectConfig::default().set(key, value).unwrap_err();
            assert!(err.to_string().contains(named), "{key}={value}: {err}");
        }
    }

    #[test]
    fn set_accepts_short_and_full_keys_and_lists() {
        let mut c = DetectConfig::default();
        c.set("top_min", "10").unwrap();
        c.set("watchdog.detector.window", "30").unwrap();
        c.set("read_only_agents", "Scout, explore").unwrap();
        assert_eq!((c.top_min, c.window), (10, 30));
        assert_eq!(c.read_only_agents, ["Scout", "explore"]);
    }
}
