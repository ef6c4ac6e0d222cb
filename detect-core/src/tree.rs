//! Session trees: every session judged on its own calls, a tree flagged when any of its sessions
//! is, descendants' landings passed up to their ancestors.

use crate::config::DetectConfig;
use crate::detector::judge_session;
use crate::matcher::{CallContext, CallFacts};
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

    /// For each session, the time of the latest landed call among its transitive descendants.
    pub fn latest_descendant_landings(
        &self,
        sessions: &[Session],
        config: &DetectConfig,
    ) -> Vec<Option<i64>> {
        let own: Vec<Option<i64>> = sessions
            .iter()
            .map(|s| {
                let ctx = CallContext {
                    directory: s.directory.as_deref(),
                    line_counts: &s.line_counts,
                };
                s.calls
                    .iter()
                    .filter_map(|c| CallFacts::of(c, ctx, config))
                    .filter(|f| f.landed)
                    .filter_map(|f| f.end_ms)
                    .max()
            })
            .collect();
        let mut below = vec![None; sessions.len()];
        for &root in &self.roots {
            // Post-order: children before parents.
            for &n in self.tree(root).iter().rev() {
                if let Some(p) = self.parent[n] {
                    below[p] = below[p].max(below[n]).max(own[n]);
                }
            }
        }
        below
    }
}

/// Judge every session and every tree.
pub fn judge_sessions(sessions: &[Session], config: &DetectConfig) -> Judgement {
    let forest = Forest::build(sessions);
    let landings = forest.latest_descendant_landings(sessions, config);
    let verdicts: Vec<SessionVerdict> = sessions
        .iter()
        .zip(&landings)
        .map(|(s, landing)| judge_session(s, *landing, config))
        .collect();
    let trees = forest
        .roots()
        .iter()
        .map(|&root| {
            let members = forest.tree(root);
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
                notes: forest.notes.get(&root).cloned().unwrap_or_default(),
            }
        })
        .collect();
    Judgement {
        sessions: verdicts,
        trees,
    }
}
