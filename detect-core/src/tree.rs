//! Session trees: every session judged on its own calls, a tree flagged when any of its sessions
//! is, descendants' landings passed up to their ancestors.

use crate::config::DetectConfig;
use crate::detector::{SessionDetector, judge_facts, latest_own_landing, session_facts};
use crate::matcher::CallFacts;
use crate::model::Session;
use crate::verdict::{SessionVerdict, TreeVerdict, dedup_key};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// Verdicts on a set of sessions: one per session (input order) and one per tree.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Judgement {
    pub sessions: Vec<SessionVerdict>,
    pub trees: Vec<TreeVerdict>,
}

/// The shape of a forest of sessions: effective parents (cycles broken), children, roots.
#[derive(Debug, Clone)]
pub struct Forest {
    /// Index of each session's effective parent.
    parent: Vec<Option<usize>>,
    children: Vec<Vec<usize>>,
    roots: Vec<usize>,
    notes: HashMap<usize, Vec<String>>,
}

impl Forest {
    /// Link sessions by `parent_id`. A parent that is not in the set makes the session a root.
    /// A parent cycle is broken at its smallest id, which becomes a root (and a note says so).
    /// When an id appears twice, the later sessions are judged alone as roots.
    pub fn build(sessions: &[Session]) -> Self {
        let mut index: HashMap<&str, usize> = HashMap::new();
        for (i, s) in sessions.iter().enumerate() {
            index.entry(s.id.as_str()).or_insert(i);
        }
        let mut parent: Vec<Option<usize>> = sessions
            .iter()
            .enumerate()
            .map(|(i, s)| {
                if index.get(s.id.as_str()) != Some(&i) {
                    return None;
                }
                s.parent_id
                    .as_deref()
                    .and_then(|p| index.get(p).copied())
                    .filter(|&p| p != i)
            })
            .collect();
        let mut notes: HashMap<usize, Vec<String>> = HashMap::new();
        // Break cycles: walk up from each node; revisiting a node of the current walk is a cycle.
        let mut state = vec![0u8; sessions.len()]; // 0 new, 1 on the current walk, 2 done
        for start in 0..sessions.len() {
            let mut walk = Vec::new();
            let mut node = Some(start);
            while let Some(n) = node {
                match state[n] {
                    2 => break,
                    1 => {
                        let at = walk.iter().position(|&w| w == n).unwrap_or(0);
                        let cycle: &[usize] = &walk[at..];
                        let breaker = cycle
                            .iter()
                            .copied()
                            .min_by(|&a, &b| sessions[a].id.cmp(&sessions[b].id))
                            .unwrap_or(n);
                        parent[breaker] = None;
                        let ids: Vec<&str> = cycle
                            .iter()
                            .map(|&c: &usize| sessions[c].id.as_str())
                            .collect();
                        notes.entry(breaker).or_default().push(format!(
                            "parent cycle {} broken at {}",
                            ids.join(" -> "),
                            sessions[breaker].id
                        ));
                        break;
                    }
                    _ => {
                        state[n] = 1;
                        walk.push(n);
                        node = parent[n];
                    }
                }
            }
            for w in walk {
                state[w] = 2;
            }
        }
        let mut children = vec![Vec::new(); sessions.len()];
        let mut roots = Vec::new();
        for (i, p) in parent.iter().enumerate() {
            match p {
                Some(p) => children[*p].push(i),
                None => roots.push(i),
            }
        }
        Self {
            parent,
            children,
            roots,
            notes,
        }
    }

    /// Indices of the roots, in input order.
    pub fn roots(&self) -> &[usize] {
        &self.roots
    }

    /// The effective parent of session `i`.
    pub fn parent(&self, i: usize) -> Option<usize> {
        self.parent[i]
    }

    /// The tree rooted at `root`, root first, then depth-first in input order.
    pub fn tree(&self, root: usize) -> Vec<usize> {
        let mut out = Vec::new();
        let mut stack = vec![root];
        while let Some(n) = stack.pop() {
            out.push(n);
            stack.extend(self.children[n].iter().rev());
        }
        out
    }

    /// For each session, the time of the latest landed call among its transitive descendants,
    /// from each session's own latest landing (`own[i]`).
    pub fn latest_descendant_landings(&self, own: &[Option<i64>]) -> Vec<Option<i64>> {
        let mut below = vec![None; self.parent.len()];
        for &root in &self.roots {
            // Post-order: children before parents.
            for &n in self.tree(root).iter().rev() {
                if let Some(p) = self.parent[n] {
                    below[p] = below[p].max(below[n]).max(own.get(n).copied().flatten());
                }
            }
        }
        below
    }

    /// Tree verdicts from the session verdicts (`verdicts[i]` is session `i`'s).
    pub fn tree_verdicts(
        &self,
        sessions: &[Session],
        verdicts: &[SessionVerdict],
    ) -> Vec<TreeVerdict> {
        self.roots
            .iter()
            .map(|&root| {
                let members = self.tree(root);
                let flagged_sessions: Vec<SessionVerdict> = members
                    .iter()
                    .filter(|&&m| verdicts[m].flagged)
                    .map(|&m| verdicts[m].clone())
                    .collect();
                let root_id = &sessions[root].id;
                TreeVerdict {
                    root: root_id.clone(),
                    dedup_key: dedup_key(root_id),
                    flagged: !flagged_sessions.is_empty(),
                    sessions: members.iter().map(|&m| sessions[m].id.clone()).collect(),
                    flagged_sessions,
                    notes: self.notes.get(&root).cloned().unwrap_or_default(),
                }
            })
            .collect()
    }
}

/// Judge every session and every tree.
pub fn judge_sessions(sessions: &[Session], config: &DetectConfig) -> Judgement {
    let forest = Forest::build(sessions);
    let facts: Vec<Vec<CallFacts>> = sessions.iter().map(|s| session_facts(s, config)).collect();
    let own: Vec<Option<i64>> = facts.iter().map(|f| latest_own_landing(f)).collect();
    let landings = forest.latest_descendant_landings(&own);
    let verdicts: Vec<SessionVerdict> = sessions
        .iter()
        .zip(&facts)
        .zip(&landings)
        .map(|((s, f), landing)| judge_facts(s, f, *landing, config))
        .collect();
    let trees = forest.tree_verdicts(sessions, &verdicts);
    Judgement {
        sessions: verdicts,
        trees,
    }
}

/// [`judge_sessions`] on sessions whose calls went into their detectors already (one detector
/// per session, every call pushed, in the same order as `sessions`): only the sessions' ids and
/// parents are read here, so a caller can drop each session's calls once pushed and judge sessions
/// in parallel. Descendants' landings are pushed last, which the incremental detector takes at any
/// point; the verdicts equal [`judge_sessions`] on the whole sessions.
pub fn judge_detectors(sessions: &[Session], mut detectors: Vec<SessionDetector>) -> Judgement {
    let forest = Forest::build(sessions);
    let own: Vec<Option<i64>> = detectors
        .iter()
        .map(SessionDetector::latest_own_landing)
        .collect();
    let landings = forest.latest_descendant_landings(&own);
    let verdicts: Vec<SessionVerdict> = detectors
        .iter_mut()
        .zip(&landings)
        .map(|(detector, landing)| {
            if let Some(t) = landing {
                detector.push_descendant_landing(*t);
            }
            detector.verdict()
        })
        .collect();
    let trees = forest.tree_verdicts(sessions, &verdicts);
    Judgement {
        sessions: verdicts,
        trees,
    }
}
