//! The loop report for `agentwatch recover`, written by the opencode job (`recover.opencode_report
//! = true`): each tick's verdicts as the report the recovery policy reads (the seed watchdog's
//! `loop.json` fields: `suspected`, `at`, `atIso`, `action`, `reason`, `sequence`), so an opencode
//! loop drives the confirmed restart of `recover.unit` with no probe of the user's own. The
//! policy still asks for two separate suspected reports at least `recover.min_probe_gap` apart,
//! so one tick's verdict never restarts anything by itself.
//!
//! Only trees judged now count (not stale ones), and with `recover.opencode_directory` set only
//! those whose root session works under that directory. The file is written atomically.

use crate::clock::iso8601;
use crate::config::Config;
use detect_core::{Session, TreeVerdict};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Whether `directory` is `under` or inside it (path components, not string prefixes:
/// `/srv/app2` is not under `/srv/app`).
fn is_under(directory: &str, under: &str) -> bool {
    Path::new(directory).starts_with(Path::new(under))
}

/// The report of this tick: suspected when a counted tree is flagged.
pub fn report(
    config: &Config,
    trees: &[TreeVerdict],
    sessions: &BTreeMap<&str, &Session>,
    stale: &BTreeSet<String>,
    now: i64,
) -> Value {
    let under = config.recover.opencode_directory.trim();
    let counted = trees
        .iter()
        .filter(|t| !stale.contains(&t.root))
        .filter(|t| {
            under.is_empty()
                || sessions
                    .get(t.root.as_str())
                    .and_then(|s| s.directory.as_deref())
                    .is_some_and(|d| is_under(d, under))
        });
    let flagged: Vec<&TreeVerdict> = counted.filter(|t| t.flagged).collect();
    let first = flagged
        .iter()
        .find_map(|t| t.flagged_sessions.first().map(|v| (t, v)));
    let reason = first.map(|(t, v)| {
        let who = sessions
            .get(t.root.as_str())
            .map_or_else(|| t.root.clone(), |s| super::notice::headline(s));
        format!("opencode loop: {who}: {}", super::notice::evidence(v))
    });
    let sequence: Vec<&str> = first
        .map(|(_, v)| v.reason.top_what.as_str())
        .filter(|w| !w.is_empty())
        .into_iter()
        .collect();
    json!({
        "suspected": i64::from(!flagged.is_empty()),
        "at": now,
        "atIso": iso8601(now),
        "action": "none",
        "reason": reason,
        "sequence": sequence,
        "source": "agentwatch opencode",
        "trees": flagged.iter().map(|t| json!({
            "root": t.root,
            "flagged_sessions": t.flagged_sessions.iter().map(|v| v.id.as_str()).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn under_is_by_path_components() {
        for (dir, under, yes) in [
            ("/srv/app", "/srv/app", true),
            ("/srv/app/sub", "/srv/app", true),
            ("/srv/app/sub", "/srv/app/", true),
            ("/srv/app2", "/srv/app", false),
            ("/srv", "/srv/app", false),
        ] {
            assert_eq!(is_under(dir, under), yes, "{dir} under {under}");
        }
    }
}
