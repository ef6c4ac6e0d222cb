//! Detector thresholds and tool lists, with the design's defaults and validation that names the key.
//!
//! Two profiles: `precise` (the default for every agent: the design plus the rules of [`Rule`],
//! measured in `docs/detection.md`) and `design` (decisions.md section 1, exactly, for those who
//! choose it). `auto`, a profile of earlier versions, is read as `precise`.

use serde::{Deserialize, Serialize};

/// A detection profile: which rules apply on top of the thresholds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Profile {
    /// The design's behaviour, unchanged (decisions.md section 1): opt-in.
    Design,
    /// The default, for every agent: the design plus every [`Rule`] (the same call and result
    /// speaks early, bash work is read as work, outputs and polls are read for progress).
    /// `auto`, a profile of earlier versions, is read as this one.
    #[default]
    #[serde(alias = "auto")]
    Precise,
}

impl Profile {
    /// Every profile, the design first.
    pub const ALL: [Profile; 2] = [Profile::Design, Profile::Precise];

    pub fn as_str(self) -> &'static str {
        match self {
            Profile::Design => "design",
            Profile::Precise => "precise",
        }
    }

    /// The rules this profile applies.
    pub fn rules(self) -> Rules {
        match self {
            Profile::Design => Rules::NONE,
            Profile::Precise => Rules::ALL,
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
            // `auto` (earlier versions) is `precise` now that it judges every agent.
            "precise" | "auto" => Ok(Profile::Precise),
            other => Err(format!(
                "unknown profile `{other}` (known: precise, design)"
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
    /// A landing is new work: a bash write identical to an earlier landed bash write of the
    /// session is no landing (the same `sed -i` again changes nothing), nor is a commit the
    /// session landed already, nor an edit or write whose metadata says it wrote the file as it
    /// was.
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
    /// exit), alone or as a block of 2-3 calls, repeated in a row; the same call failing five
    /// times in a row. Strong evidence: it fires before `min_calls` (a success known only by
    /// its status supports it and makes none).
    Repeat,
    /// Progress read from outputs: a bash command whose output shows a commit it made
    /// (`[main abc1234] …`, recorded by the adapter as `metadata.committed`) lands, whatever its
    /// exit; a bash write with no exit status lands when a view of its file then shows what no
    /// recent call showed.
    OutputLandings,
    /// The `stall` signal: the same poll seeing the same result, and nothing else, for
    /// `poll_max_s` seconds or `poll_max_calls` polls.
    Stalls,
}

impl Rule {
    pub const ALL: [Rule; 9] = [
        Rule::PathTargets,
        Rule::BashWrites,
        Rule::RepeatedWrites,
        Rule::Waits,
        Rule::Rereads,
        Rule::Cycle,
        Rule::Repeat,
        Rule::OutputLandings,
        Rule::Stalls,
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
            Rule::OutputLandings => "output_landings",
            Rule::Stalls => "stalls",
        }
    }

    fn bit(self) -> u16 {
        1 << (self as u16)
    }
}

/// A set of [`Rule`]s.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Rules(u16);

impl Rules {
    pub const NONE: Rules = Rules(0);
    pub const ALL: Rules = Rules(0b1_1111_1111);

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
    /// `precise` (the default) or `design` (`auto` is read as `precise`).
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
    /// Tools whose calls are polls (`precise`): waiting on a job, as `sleep 30 && tail log` is.
    /// A poll is never a loop by itself; it counts towards `slow` (by call and result) and
    /// towards a `stall`. Adapters map their agents' polls (a background shell's output, an
    /// empty write to a running process) onto the tool `poll`.
    #[serde(deserialize_with = "names")]
    pub poll_tools: Vec<String>,
    /// `stall` (precise): fires when the session has made nothing but the same poll seeing the
    /// same result for at least this many seconds (its calls' times).
    pub poll_max_s: u64,
    /// `stall` (precise): fires when the session has made nothing but the same poll seeing the
    /// same result this many times in a row.
    pub poll_max_calls: u32,
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
            profile: Profile::Precise,
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
            poll_tools: names(&["poll"]),
            poll_max_s: 1800,
            poll_max_calls: 20,
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
    "poll_tools",
    "poll_max_s",
    "poll_max_calls",
    "cycle_min",
    "reread_min",
    "repeat_min",
];

impl DetectConfig {
    /// The default thresholds and lists under the `design` profile (the seed's exact rules).
    pub fn design() -> Self {
        Self::with_profile(Profile::Design)
    }

    /// The default thresholds and lists under `profile`.
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
            (
                "poll_max_s",
                usize::try_from(self.poll_max_s).unwrap_or(usize::MAX),
            ),
            ("poll_max_calls", self.poll_max_calls as usize),
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
                self.profile = value.parse().map_err(|_| parse_err("precise or design"))?;
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
            "poll_tools" => self.poll_tools = list(),
            "poll_max_s" => {
                self.poll_max_s = value
                    .parse::<u64>()
                    .map_err(|_| parse_err("a whole number"))?;
            }
            "poll_max_calls" => self.poll_max_calls = count()?,
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
    pub(crate) fn is_poll(&self, tool: &str) -> bool {
        self.poll_tools.iter().any(|t| t == tool)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_the_designs_thresholds_under_precise() {
        let c = DetectConfig::default();
        assert_eq!(
            (c.dup_min, c.top_min, c.top_min_ro, c.cum_min),
            (0.25, 12, 8, 15)
        );
        assert_eq!((c.cover_min, c.window, c.min_calls), (4.0, 60, 40));
        assert_eq!(c.read_only_agents, ["explore", "librarian", "oracle"]);
        assert_eq!(c.poll_tools, ["poll"]);
        assert_eq!((c.poll_max_s, c.poll_max_calls), (1800, 20));
        assert_eq!(c.profile, Profile::Precise);
        assert_eq!(c.rules(), Rules::ALL);
        assert_eq!(c.validate(), Ok(()));
        let design = DetectConfig::design();
        assert_eq!(design.rules(), Rules::NONE);
        assert_eq!(design, DetectConfig::with_profile(Profile::Design));
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
        // `auto` of earlier versions is `precise`, in a flag and in a file.
        c.set("profile", "auto").unwrap();
        assert_eq!(c.profile, Profile::Precise);
        let parsed: DetectConfig = serde_json::from_str(r#"{"profile": "auto"}"#).unwrap();
        assert_eq!(parsed, DetectConfig::default());
        let parsed: DetectConfig = serde_json::from_str(r#"{"profile": "design"}"#).unwrap();
        assert_eq!(parsed, DetectConfig::design());
        assert!(serde_json::from_str::<DetectConfig>(r#"{"profile": "fast"}"#).is_err());
        assert_eq!(
            serde_json::to_string(&Profile::Precise).unwrap(),
            r#""precise""#
        );
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
            ("poll_max_s", "0", "poll_max_s"),
            ("poll_max_s", "-1", "poll_max_s"),
            ("poll_max_calls", "0", "poll_max_calls"),
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
        c.set("watchdog.detector.poll_tools", "poll, BashOutput")
            .unwrap();
        c.set("poll_max_s", "600").unwrap();
        assert_eq!((c.top_min, c.window, c.poll_max_s), (10, 30, 600));
        assert_eq!(c.read_only_agents, ["Scout", "explore"]);
        assert_eq!(c.poll_tools, ["poll", "BashOutput"]);
    }
}
