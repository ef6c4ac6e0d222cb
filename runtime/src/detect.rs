//! What `agentwatch detect` shows of a [`Detection`]: each tree keyed by the agent of its root
//! ([`Detection::key_trees_by_agent`]), the human table ([`Detection::render_table`]) and the
//! `--json` report ([`Detection::report`]). It sits above [`crate::input`] (which reads and judges
//! and knows formats, not agents) and beside the jobs' [`Agent`], which names a tree's keys.

use crate::input::{Detection, Format, SessionRead};
use crate::jobs::sessions::agent::Agent;
use crate::text::escape_control;
use detect_core::{SessionVerdict, TreeVerdict};
use serde::Serialize;
use std::collections::HashMap;

/// The agent that wrote the sessions of a document of `format`: session files and exports are
/// opencode's.
fn agent_of(format: Format) -> Agent {
    match format {
        Format::ClaudeTranscript => Agent::Claude,
        Format::CodexRollout => Agent::Codex,
        Format::GeminiSession => Agent::Gemini,
        Format::SessionFile | Format::OpencodeExport => Agent::Opencode,
    }
}

/// `--json`: `{"sessions": [...], "trees": [...]}`, each session's verdict with what was read.
#[derive(Debug, Serialize)]
pub struct Report<'a> {
    sessions: Vec<SessionReport<'a>>,
    trees: &'a [TreeVerdict],
}

#[derive(Debug, Serialize)]
struct SessionReport<'a> {
    #[serde(flatten)]
    verdict: &'a SessionVerdict,
    /// `opencode`, `claude`, …: the family of its alert keys.
    agent: &'static str,
    calls: usize,
    first_flag_at_call: Option<usize>,
}

impl Detection {
    /// Each tree's alert key names the agent of its root, as the watch keys it
    /// (`claude-loop:{root}` for a Claude Code tree, `opencode-loop:{root}` for opencode's).
    pub fn key_trees_by_agent(&mut self) {
        let format_of: HashMap<&str, Format> = self
            .judgement
            .sessions
            .iter()
            .zip(&self.sessions)
            .map(|(verdict, read)| (verdict.id.as_str(), read.format))
            .collect();
        let keys: Vec<Option<String>> = self
            .judgement
            .trees
            .iter()
            .map(|t| {
                let format = format_of.get(t.root.as_str())?;
                Some(agent_of(*format).loop_key(&t.root))
            })
            .collect();
        for (tree, key) in self.judgement.trees.iter_mut().zip(keys) {
            if let Some(key) = key {
                tree.dedup_key = key;
            }
        }
    }

    /// The `--json` report, borrowed from the detection (serialised as it is written).
    pub fn report(&self) -> Report<'_> {
        let sessions = self
            .judgement
            .sessions
            .iter()
            .zip(&self.sessions)
            .map(|(verdict, read)| SessionReport {
                verdict,
                agent: agent_of(read.format).family(),
                calls: read.calls,
                first_flag_at_call: read.first_flag_at_call,
            })
            .collect();
        Report {
            sessions,
            trees: &self.judgement.trees,
        }
    }

    /// The human form: one line per session, one per tree, a closing count.
    pub fn render_table(&self) -> String {
        let judgement = &self.judgement;
        let mut out = String::new();
        for (v, read) in judgement.sessions.iter().zip(&self.sessions) {
            let mark = if v.flagged { "FLAGGED" } else { "ok" };
            out.push_str(&format!(
                "session {} {mark} {} {}\n",
                escape_control(&v.id),
                read_summary(read),
                escape_control(&v.summary())
            ));
        }
        for t in &judgement.trees {
            let flagged: Vec<&str> = t.flagged_sessions.iter().map(|s| s.id.as_str()).collect();
            let state = if t.flagged {
                format!("FLAGGED by {}", escape_control(&flagged.join(", ")))
            } else {
                "ok".to_owned()
            };
            out.push_str(&format!(
                "tree {} dedup_key={} sessions={} {state}\n",
                escape_control(&t.root),
                escape_control(&t.dedup_key),
                t.sessions.len()
            ));
            for note in &t.notes {
                out.push_str(&format!("  note: {}\n", escape_control(note)));
            }
        }
        let flagged = judgement.trees.iter().filter(|t| t.flagged).count();
        out.push_str(&format!(
            "# {flagged}/{} trees flagged\n",
            judgement.trees.len()
        ));
        out
    }
}

/// `agent=claude calls=45 first_flag_at_call=6` (the last only when a prefix flagged).
fn read_summary(read: &SessionRead) -> String {
    let mut text = format!(
        "agent={} calls={}",
        agent_of(read.format).family(),
        read.calls
    );
    if let Some(k) = read.first_flag_at_call {
        text.push_str(&format!(" first_flag_at_call={k}"));
    }
    text
}

#[cfg(test)]
mod tests {
    use crate::input::detect_text;
    use detect_core::DetectConfig;

    #[test]
    fn the_table_and_the_report_show_every_session_and_tree() {
        let mut detection =
            detect_text("built-in sample", crate::SAMPLE, &DetectConfig::default()).unwrap();
        detection.key_trees_by_agent();
        let table = detection.render_table();
        let sessions = detection.judgement.sessions.len();
        let trees = detection.judgement.trees.len();
        assert_eq!(table.matches("\nsession ").count() + 1, sessions);
        assert!(table.starts_with("session "));
        assert!(table.contains(" agent=opencode calls="));
        assert_eq!(table.matches("tree ").count(), trees);
        assert!(table.ends_with(&format!("/{trees} trees flagged\n")));
        let json = serde_json::to_value(detection.report()).unwrap();
        assert_eq!(json["sessions"].as_array().unwrap().len(), sessions);
        assert_eq!(json["sessions"][0]["agent"], "opencode");
        assert_eq!(json["trees"].as_array().unwrap().len(), trees);
        assert!(
            json["trees"][0]["dedup_key"]
                .as_str()
                .unwrap()
                .starts_with("opencode-loop:")
        );
    }
}
