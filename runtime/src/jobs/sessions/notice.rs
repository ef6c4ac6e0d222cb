//! The text a person reads in a notification: a title naming the session and its project, one
//! plain sentence of evidence derived from the verdict's signals, and the tree's page when
//! `watchdog.dashboard_base_url` is set. The full reason (every signal with its figures) stays in
//! the journal, in `details.reason` and in `--json`.

use super::agent::Agent;
use super::repeats::Repeated;
use alert_state::{AlertEvent, EventState};
use detect_core::{Reason, Session, SessionVerdict, Signal, TreeVerdict};
use serde_json::Value;
use std::collections::BTreeMap;

/// `Fix the money rounding in /home/me/proj`: the session's title (else its id) and directory.
pub fn headline(session: &Session) -> String {
    let title = session
        .title
        .as_deref()
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .unwrap_or(&session.id);
    match session
        .directory
        .as_deref()
        .filter(|d| !d.trim().is_empty())
    {
        Some(dir) => format!("{title} in {dir}"),
        None => title.to_owned(),
    }
}

/// What a notification says beside its session: the agent that runs it (named unless it is
/// opencode, the default) and the git branch it works on, when known.
#[derive(Debug, Clone, Copy, Default)]
pub struct Beside<'a> {
    pub agent: Agent,
    pub branch: Option<&'a str>,
    /// The agent's own verdict that the session loops (Gemini CLI's "Potential loop
    /// detected"), said after ours.
    pub agent_verdict: Option<&'a str>,
    /// What repeats in the tree's first flagged session, when its source counted it.
    pub repeated: Option<&'a Repeated>,
    /// `watchdog.stale_after_s`: how long without a call a stale resolve waited.
    pub stale_after_s: u64,
}

/// [`headline`] with what is [`Beside`] it: `Claude Code: Fix the money rounding in
/// /home/me/shop (main)`.
pub fn headline_beside(session: &Session, beside: Beside<'_>) -> String {
    let mut line = headline(session);
    if let Some(branch) = beside.branch.map(str::trim).filter(|b| !b.is_empty()) {
        line.push_str(&format!(" ({branch})"));
    }
    if beside.agent != Agent::Opencode {
        line = format!("{}: {line}", beside.agent.display_name());
    }
    line
}

/// `pytest -x` for `bash pytest -x`, `money.py` for `read money.py`: the verb and its object.
fn action(top_what: &str, times: u32) -> String {
    let (tool, what) = top_what.split_once(' ').unwrap_or((top_what, ""));
    let what = what.trim();
    match tool {
        "read" if !what.is_empty() => format!("read {what} {times} times"),
        "bash" if !what.is_empty() => format!("ran `{what}` {times} times"),
        "grep" | "glob" if !what.is_empty() => format!("searched for {what:?} {times} times"),
        _ => format!("called {top_what} {times} times"),
    }
}

/// [`evidence`], naming the call that repeats when the session repeats one (`repeated`, as its
/// source counted it): the whole command, how often and over how many calls, and what it
/// returned (`ran `python3 -c "import x"` 4 times in a row without an edit; it failed 4 times
/// with `ModuleNotFoundError: …``). A loop the window's signals tell better (one file read or
/// searched again and again, a file shown over) keeps [`evidence`]'s sentence.
pub fn evidence_of(verdict: &SessionVerdict, repeated: Option<&Repeated>) -> String {
    let r = &verdict.reason;
    let fired = |s: Signal| verdict.signals.contains(&s);
    let names_a_command = r.top_what.starts_with("bash ");
    let window_tells = (fired(Signal::Top) && !r.top_what.is_empty() && !names_a_command)
        || ((fired(Signal::Coverage) || fired(Signal::Reread)) && !fired(Signal::Top));
    match repeated.filter(|rep| rep.times >= 2 && !window_tells) {
        Some(rep) => repeated_sentence(rep, r.landed),
        None => evidence(verdict),
    }
}

/// `ran `CMD` 4 times in a row without an edit; it failed 4 times with `ERROR``.
fn repeated_sentence(rep: &Repeated, landed: bool) -> String {
    let verb = if rep.command { "ran" } else { "repeated" };
    let how_often = if rep.over <= rep.times {
        format!("{} times in a row", rep.times)
    } else {
        format!("{} times in its last {} calls", rep.times, rep.over)
    };
    let edit = if landed {
        "since its last edit"
    } else {
        "without an edit"
    };
    let said = |text: &str| format!("`{text}`");
    let returned = rep.returned.as_deref().filter(|e| !e.trim().is_empty());
    let outcome = match (rep.failed, returned) {
        (f, Some(e)) if f == rep.times => format!("; it failed {f} times with {}", said(e)),
        (f, None) if f == rep.times => format!("; it failed {f} times"),
        (0, Some(e)) if rep.same && rep.command => {
            format!("; it returned the same each time: {}", said(e))
        }
        (0, _) if rep.same => "; it returned the same each time".to_owned(),
        (0, Some(e)) if rep.command => format!("; it last returned {}", said(e)),
        (0, _) => String::new(),
        (f, Some(e)) => format!(
            "; it failed {f} of {} times, last with {}",
            rep.times,
            said(e)
        ),
        (f, None) => format!("; it failed {f} of {} times", rep.times),
    };
    format!("{verb} `{}` {how_often} {edit}{outcome}", rep.shown)
}

/// One plain sentence of evidence for a flagged session, from the strongest signal it fired:
/// `read money.py 22 times in 44 calls without an edit`.
pub fn evidence(verdict: &SessionVerdict) -> String {
    let r: &Reason = &verdict.reason;
    let window = if r.window_calls >= r.calls_since_landed {
        format!("{} calls", r.window_calls)
    } else {
        format!("its last {} calls", r.window_calls)
    };
    let edit = if r.landed {
        "since its last edit"
    } else {
        "without an edit"
    };
    let fired = |s: Signal| verdict.signals.contains(&s);
    let file = |f: &Option<String>| {
        f.as_deref()
            .map(|p| p.rsplit('/').next().unwrap_or(p).to_owned())
            .unwrap_or_else(|| "one file".to_owned())
    };
    if fired(Signal::Top) && !r.top_what.is_empty() {
        format!("{} in {window} {edit}", action(&r.top_what, r.top))
    } else if fired(Signal::Slow) {
        format!(
            "made the same call {} times in {} calls {edit}",
            r.slow, r.calls_since_landed
        )
    } else if fired(Signal::Dup) {
        format!(
            "repeated one call in {:.0}% of {window} {edit}",
            r.dup * 100.0
        )
    } else if fired(Signal::Coverage) {
        format!(
            "read {} {:.1} times over in {window} {edit}",
            file(&r.coverage_file),
            r.coverage
        )
    } else if fired(Signal::Reread) {
        format!(
            "was shown the same lines of {} {:.1} times over in {window} {edit}",
            file(&r.reread_file),
            r.reread
        )
    } else if fired(Signal::Cycle) {
        format!("repeated one block of calls for {} calls {edit}", r.cycle)
    } else if fired(Signal::Repeat) && r.repeat > 0 {
        format!(
            "repeated the same call with the same result {} times in a row {edit}",
            r.repeat
        )
    } else {
        format!("kept going for {} calls {edit}", r.calls_since_landed)
    }
}

/// Rewrite a tree's event for a person: title `Looping: {root headline}` (`Still looping`,
/// `No longer looping`, `Blocked` when agentwatch's hook refused calls), summary one sentence
/// naming who does what, and what the hook refused (first for a `blocked` event). The core's
/// summary moves to `details.reason`. A tree not in this tick (a resolve because it is gone)
/// keeps its title.
pub fn rewrite(
    event: &mut AlertEvent,
    tree: Option<&TreeVerdict>,
    sessions: &BTreeMap<&str, &Session>,
    beside: Beside<'_>,
) {
    let prefix = match event.state {
        EventState::Trigger => "Looping",
        EventState::Escalate => "Still looping",
        EventState::Resolve => "No longer looping",
        EventState::Blocked => "Blocked",
    };
    let reason = std::mem::take(&mut event.summary);
    let root = tree.and_then(|t| sessions.get(t.root.as_str()));
    event.title = match root {
        Some(root) => format!("{prefix}: {}", headline_beside(root, beside)),
        None => format!("{prefix}: {}", event.title),
    };
    let looping = tree.and_then(|t| tree_evidence(t, sessions, beside.repeated));
    let refused = event.refusals().map(|r| r.sentence());
    event.summary = match (event.state, tree, looping, refused) {
        (EventState::Resolve, ..) => resolved(event, tree.is_some(), beside.stale_after_s),
        (EventState::Blocked, _, Some(looping), Some(refused)) => {
            format!("{refused}. {looping}.")
        }
        (EventState::Blocked, _, None, Some(refused)) => format!("{refused}."),
        (_, _, Some(looping), Some(refused)) => format!("{looping}; {refused}."),
        (_, _, Some(looping), None) => format!("{looping}."),
        // No session flagged: the hook's refusal of the latest call holds the alert.
        (_, _, None, Some(refused)) => format!("{refused}; no call has run since."),
        (_, _, None, None) => reason.clone(),
    };
    if let Some(own) = beside
        .agent_verdict
        .filter(|_| event.state != EventState::Resolve)
    {
        event.summary = format!(
            "{} {}'s own loop detector agrees: {own}",
            event.summary,
            beside.agent.display_name()
        );
    }
    if !event.details.is_object() {
        let old = std::mem::take(&mut event.details);
        event.details = serde_json::json!({});
        if !old.is_null() {
            event.details["details"] = old;
        }
    }
    event.details["reason"] = Value::String(reason);
}

/// Why a tree's alert closed, for a person: its resolve's `details.resolved_because` (a tree
/// not in this tick is gone), and what it had become when it was critical (its escalate may
/// not have reached every channel before this).
fn resolved(event: &AlertEvent, in_tick: bool, stale_after_s: u64) -> String {
    let because = event
        .details
        .get("resolved_because")
        .and_then(Value::as_str);
    let stopped = event.refusals().is_some_and(|r| r.stopped);
    let why = match because {
        Some("gone") => "The session is gone from every source".to_owned(),
        Some("stale") if stopped => {
            "agentwatch stopped the session and it made no call since".to_owned()
        }
        Some("stale") if stale_after_s > 0 => format!(
            "The session had no activity for {} (watchdog.stale_after_s)",
            age(stale_after_s)
        ),
        Some("stale") => "The session made no new call for a while".to_owned(),
        _ if in_tick => "The session made progress (it landed a change)".to_owned(),
        _ => "The session is gone from every source".to_owned(),
    };
    let was_critical =
        event.details.get("was_severity").and_then(Value::as_str) == Some("critical");
    if was_critical {
        format!("{why}; the alert, critical, is closed.")
    } else {
        format!("{why}; the alert is closed.")
    }
}

/// `1 h`, `90 min`, `30 s`: an age as a person says it.
fn age(seconds: u64) -> String {
    let seconds = i64::try_from(seconds).unwrap_or(i64::MAX);
    if seconds >= 3_600 && seconds % 3_600 == 0 {
        format!("{} h", seconds / 3_600)
    } else {
        crate::text::duration(seconds)
    }
}

/// Who in a flagged tree does what, without the closing period: `The session read money.py
/// 22 times in 44 calls without an edit`; `None` when no session of it is flagged.
fn tree_evidence(
    tree: &TreeVerdict,
    sessions: &BTreeMap<&str, &Session>,
    repeated: Option<&Repeated>,
) -> Option<String> {
    let v = tree.flagged_sessions.first()?;
    let who = if v.id == tree.root {
        "The session".to_owned()
    } else {
        let sub = sessions.get(v.id.as_str());
        let name = sub
            .and_then(|s| s.agent.clone())
            .or_else(|| sub.and_then(|s| s.title.clone()))
            .unwrap_or_else(|| v.id.clone());
        format!("Its subagent {name}")
    };
    let also = match tree.flagged_sessions.len() - 1 {
        0 => String::new(),
        1 => " (1 more session of the tree is looping too)".to_owned(),
        n => format!(" ({n} more sessions of the tree are looping too)"),
    };
    Some(format!("{who} {}{also}", evidence_of(v, repeated)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use alert_state::Severity;

    fn session(id: &str, parent: Option<&str>, title: &str, agent: &str) -> Session {
        Session {
            id: id.to_owned(),
            parent_id: parent.map(str::to_owned),
            title: Some(title.to_owned()),
            agent: Some(agent.to_owned()),
            directory: Some("/home/me/shop".to_owned()),
            label: None,
            labels: BTreeMap::new(),
            note: None,
            line_counts: BTreeMap::new(),
            loop_start: None,
            calls: Vec::new(),
        }
    }

    fn verdict(id: &str, signals: &[Signal], reason: Reason) -> SessionVerdict {
        SessionVerdict {
            id: id.to_owned(),
            flagged: !signals.is_empty(),
            signals: signals.to_vec(),
            reason,
        }
    }

    fn reason(top_what: &str, top: u32, window: usize, span: usize, landed: bool) -> Reason {
        Reason {
            dup: 0.34,
            top,
            top_what: top_what.to_owned(),
            slow: 17,
            coverage: 4.6,
            coverage_file: Some("/home/me/shop/money.py".to_owned()),
            landed,
            calls_since_landed: span,
            window_calls: window,
            read_only: false,
            cycle: 12,
            reread: 5.5,
            reread_file: Some("/home/me/shop/money.py".to_owned()),
            repeat: 0,
            stale: 0,
            stale_long: 0,
            stale_span: 0,
            stale_span_calls: 0,
            failing: 0,
            recur: 0,
            ..Reason::default()
        }
    }

    fn event(state: EventState) -> AlertEvent {
        AlertEvent {
            dedup_key: "opencode-loop:ses_root".to_owned(),
            severity: Severity::Warning,
            state,
            title: "opencode loop: explore".to_owned(),
            summary: "ses_child: signals=top,slow dup=0.34 top=22".to_owned(),
            details: serde_json::json!({"link": "http://127.0.0.1:8080/admin/trees/ses_root"}),
            source: "agentwatch@host".to_owned(),
        }
    }

    /// Every signal's sentence, and the notification a tree's events make, as a person reads
    /// them (title, summary, link).
    #[test]
    fn notification_text() {
        let mut out = String::new();
        let cases: &[(&str, &[Signal], Reason)] = &[
            (
                "top read",
                &[Signal::Top, Signal::Slow],
                reason("read money.py", 22, 44, 44, false),
            ),
            (
                "top bash, landed",
                &[Signal::Top],
                reason("bash pytest -x", 15, 60, 130, true),
            ),
            (
                "top grep",
                &[Signal::Top],
                reason("grep TODO", 12, 60, 60, false),
            ),
            ("slow", &[Signal::Slow], reason("", 0, 60, 90, false)),
            ("dup", &[Signal::Dup], reason("", 0, 50, 50, false)),
            (
                "coverage",
                &[Signal::Coverage],
                reason("", 0, 60, 60, false),
            ),
            ("reread", &[Signal::Reread], reason("", 0, 60, 60, false)),
            ("cycle", &[Signal::Cycle], reason("", 0, 60, 60, false)),
        ];
        for (name, signals, r) in cases {
            let v = verdict("ses_root", signals, r.clone());
            out.push_str(&format!("{name}: {}\n", evidence(&v)));
        }
        let root = session("ses_root", None, "Fix the money rounding", "build");
        let child = session(
            "ses_child",
            Some("ses_root"),
            "Find rounding bugs",
            "explore",
        );
        let sessions: BTreeMap<&str, &Session> = [("ses_root", &root), ("ses_child", &child)]
            .into_iter()
            .collect();
        let tree = TreeVerdict {
            root: "ses_root".to_owned(),
            dedup_key: "opencode-loop:ses_root".to_owned(),
            flagged: true,
            sessions: vec!["ses_root".to_owned(), "ses_child".to_owned()],
            flagged_sessions: vec![verdict(
                "ses_child",
                &[Signal::Top, Signal::Slow],
                reason("read money.py", 22, 44, 44, false),
            )],
            notes: Vec::new(),
        };
        for (state, tree) in [
            (EventState::Trigger, Some(&tree)),
            (EventState::Escalate, Some(&tree)),
            (EventState::Resolve, Some(&tree)),
            (EventState::Resolve, None),
        ] {
            let mut e = event(state);
            rewrite(&mut e, tree, &sessions, Beside::default());
            out.push_str(&format!(
                "\n[{}]\ntitle: {}\nsummary: {}\nlink: {}\nreason: {}\n",
                state.as_str(),
                e.title,
                e.summary,
                e.link().unwrap_or("-"),
                e.details["reason"].as_str().unwrap_or("-")
            ));
        }
        insta::assert_snapshot!(out);
    }

    /// The notifications of an alert whose tree agentwatch's hook refused calls of, as a person
    /// reads them: the alarms say the count after the loop, a `blocked` event says it first,
    /// the stop included; a tree the detector does not flag keeps the core's sentence.
    #[test]
    fn refusals_in_notification_text() {
        let root = session("s1", None, "Make the tests pass", "");
        let sessions: BTreeMap<&str, &Session> = [("s1", &root)].into_iter().collect();
        let flagged = TreeVerdict {
            root: "s1".to_owned(),
            dedup_key: "claude-loop:s1".to_owned(),
            flagged: true,
            sessions: vec!["s1".to_owned()],
            flagged_sessions: vec![verdict(
                "s1",
                &[Signal::Top],
                reason("bash pytest tests/test_x.py", 6, 12, 12, false),
            )],
            notes: Vec::new(),
        };
        let not_flagged = TreeVerdict {
            flagged: false,
            flagged_sessions: Vec::new(),
            ..flagged.clone()
        };
        let refused = |blocked: u32, stopped: bool| {
            serde_json::json!({"blocked": blocked, "call": "pytest tests/test_x.py",
                "of_call": blocked, "stopped": stopped})
        };
        let beside = Beside {
            agent: Agent::Claude,
            branch: Some("main"),
            ..Beside::default()
        };
        let mut out = String::new();
        for (name, state, tree, blocked, core) in [
            (
                "trigger",
                EventState::Trigger,
                &flagged,
                refused(2, false),
                "core",
            ),
            (
                "first refusal",
                EventState::Blocked,
                &flagged,
                refused(1, false),
                "core",
            ),
            (
                "stop",
                EventState::Blocked,
                &flagged,
                refused(3, true),
                "core",
            ),
            (
                "escalate",
                EventState::Escalate,
                &flagged,
                refused(3, true),
                "core",
            ),
            (
                "resolve",
                EventState::Resolve,
                &flagged,
                refused(3, true),
                "core",
            ),
            (
                "resolve, stale",
                EventState::Resolve,
                &flagged,
                refused(3, true),
                "stale",
            ),
            (
                "hook only",
                EventState::Trigger,
                &not_flagged,
                refused(1, false),
                "root session s1 is looping; agentwatch blocked 1 call of `pytest tests/test_x.py`",
            ),
        ] {
            let mut e = event(state);
            e.summary = core.to_owned();
            e.details["blocked"] = blocked;
            if core == "stale" {
                e.details["resolved_because"] = "stale".into();
            }
            rewrite(&mut e, Some(tree), &sessions, beside);
            out.push_str(&format!(
                "[{name}]\ntitle: {}\nsummary: {}\n\n",
                e.title, e.summary
            ));
        }
        insta::assert_snapshot!(out);
    }

    #[test]
    fn geminis_own_verdict_is_said_after_ours_until_the_alert_closes() {
        let root = session("s1", None, "Make the check pass", "");
        let sessions: BTreeMap<&str, &Session> = [("s1", &root)].into_iter().collect();
        let tree = TreeVerdict {
            root: "s1".to_owned(),
            dedup_key: "gemini-loop:s1".to_owned(),
            flagged: true,
            sessions: vec!["s1".to_owned()],
            flagged_sessions: vec![verdict(
                "s1",
                &[Signal::Top],
                reason("bash sh check.sh", 12, 20, 20, false),
            )],
            notes: Vec::new(),
        };
        let beside = Beside {
            agent: Agent::Gemini,
            agent_verdict: Some("Potential loop detected. Details: repeated tool calls."),
            ..Beside::default()
        };
        let mut trigger = event(EventState::Trigger);
        rewrite(&mut trigger, Some(&tree), &sessions, beside);
        assert!(
            trigger
                .title
                .starts_with("Looping: Gemini CLI: Make the check pass")
        );
        assert!(
            trigger.summary.ends_with(
                "Gemini CLI's own loop detector agrees: Potential loop detected. Details: \
                 repeated tool calls."
            ),
            "{}",
            trigger.summary
        );
        let mut resolve = event(EventState::Resolve);
        rewrite(&mut resolve, Some(&tree), &sessions, beside);
        assert!(!resolve.summary.contains("own loop detector"));
    }
}
