//! Issue 47, "It knows its own work": calls agentwatch's own pre-tool hook refused reach the
//! watch. `agentwatch opencode --once` over a session file (`agentwatch-sessions/1`) whose
//! looping session's calls come to be refused (`"status": "blocked"`, the hook's message in
//! `metadata.refusal`), a real SQLite store and a loopback webhook: the loop's trigger, then a
//! `blocked` event for the first refusal and one for the stop, `status` and `alerts` saying
//! what the hook did; the session moving on resolves the alert.

mod common;

use agentwatch_testkit::{HttpServer, Reply, Request, TempDir};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Output;

const T0: i64 = 1_796_000_000;
const ROOT: &str = "ses_blocked0000000000000001";
const KEY: &str = "opencode-loop:ses_blocked0000000000000001";
const TEST: &str = "pytest tests/test_x.py";

fn agentwatch(home: &Path, args: &[&str]) -> Output {
    agentwatch_testkit::isolated_command(env!("CARGO_BIN_EXE_agentwatch"), home)
        .args(args)
        .output()
        .unwrap()
}

fn text(out: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The `i`th call of the session, at `T0 - 600 s + 4 s * i`.
fn call(i: usize, tool: &str, input: Value, status: &str, metadata: Value) -> Value {
    let start = (T0 - 600) * 1000 + i64::try_from(i).unwrap() * 4000;
    json!({"tool": tool, "input": input, "status": status, "metadata": metadata,
           "time": {"start": start, "end": start + 1500}})
}

/// The session as it grows: 30 calls rerunning one failing test between rereads of one file
/// (a loop), then the calls the hook refused (`refused`, the last one the stop when
/// `stopped`), then, when it `moved_on`, a call that ran again and an edit that landed.
fn session(refused: usize, stopped: bool, moved_on: bool) -> Value {
    let mut calls: Vec<Value> = (0..30)
        .map(|i| {
            if i % 2 == 0 {
                let out = json!({"output": "1 failed", "exit": 1, "truncated": false});
                call(i, "bash", json!({"command": TEST}), "completed", out)
            } else {
                let read = json!({"filePath": "/w/src/x.py", "offset": 1, "limit": 80});
                call(i, "read", read, "completed", json!({"preview": "..."}))
            }
        })
        .collect();
    for k in 0..refused {
        let refusal = if stopped && k + 1 == refused {
            format!(
                "agentwatch: the session is stopped: `{TEST}` was refused {} times and asked \
                 for again; it failed each time. Say what blocks you.",
                refused - 1
            )
        } else {
            format!(
                "agentwatch: this call was not run: `{TEST}` ran 15 times in your last 16 calls, and it failed each time."
            )
        };
        let i = calls.len();
        calls.push(call(
            i,
            "bash",
            json!({"command": TEST}),
            "blocked",
            json!({"refusal": refusal}),
        ));
    }
    if moved_on {
        let i = calls.len();
        let read = json!({"filePath": "/w/tests/test_x.py", "offset": 1, "limit": 80});
        calls.push(call(
            i,
            "read",
            read,
            "completed",
            json!({"preview": "..."}),
        ));
        let edit =
            json!({"filePath": "/w/src/x.py", "oldString": "round(", "newString": "quantize("});
        let diff = json!({"diff": "@@ -1 +1 @@\n-round(\n+quantize(\n",
                          "filediff": {"file": "/w/src/x.py", "additions": 1, "deletions": 1}});
        calls.push(call(i + 1, "edit", edit, "completed", diff));
    }
    json!({"format": "agentwatch-sessions/1", "sessions": [{
        "id": ROOT, "parent_id": null, "title": "Make the tests pass", "agent": "build",
        "directory": "/w", "calls": calls}]})
}

struct World {
    _tmp: TempDir,
    hook: HttpServer,
    home: PathBuf,
    db: PathBuf,
    file: PathBuf,
}

impl World {
    fn new() -> Self {
        let tmp = TempDir::new("aw-blocked");
        let hook = HttpServer::start(|_: &Request| Reply::json(200, &json!({"ok": true})));
        let home = common::webhook_home(&tmp.path, &hook, "", "");
        Self {
            db: tmp.path.join("aw.db"),
            file: tmp.path.join("sessions.json"),
            _tmp: tmp,
            hook,
            home,
        }
    }

    /// One tick at `T0 + at` over the session as `session` is; its journal.
    fn tick(&self, at: i64, session: &Value) -> String {
        std::fs::write(&self.file, session.to_string()).unwrap();
        let now = (T0 + at).to_string();
        let db = self.db.to_str().unwrap();
        let file = self.file.to_str().unwrap();
        let out = agentwatch(
            &self.home,
            &[
                "watch",
                "--once",
                "--now",
                &now,
                "--db",
                db,
                "--sessions",
                file,
            ],
        );
        let (_, journal) = text(&out);
        assert_eq!(out.status.code(), Some(0), "{journal}");
        journal
    }

    /// The events the webhook received, in order.
    fn events(&self) -> Vec<Value> {
        self.hook
            .requests()
            .iter()
            .map(Request::body_json)
            .collect()
    }

    /// `agentwatch ARGS --db DB`: its standard output.
    fn show(&self, args: &[&str]) -> String {
        let mut all = args.to_vec();
        all.extend(["--db", self.db.to_str().unwrap()]);
        let out = agentwatch(&self.home, &all);
        let (stdout, stderr) = text(&out);
        assert!(
            out.status.code().is_some_and(|c| c == 0 || c == 69),
            "{stderr}"
        );
        stdout
    }
}

impl World {
    /// `status`, `alerts` and `alerts --json` say what the hook refused (`sentence`).
    fn assert_shown(&self, sentence: &str) {
        let status = self.show(&["status", "--now", &(T0 + 1260).to_string()]);
        assert!(
            status.contains(&format!("  {KEY}: {sentence}\n")),
            "{status}"
        );
        let alerts = self.show(&["alerts"]);
        assert!(alerts.contains(&format!("\n  {sentence}\n")), "{alerts}");
        let listed: Value = serde_json::from_str(&self.show(&["alerts", "--json"])).unwrap();
        assert_eq!(
            listed["alerts"][0]["refusals"],
            json!({"blocked": 4, "call": TEST, "of_call": 4, "stopped": true})
        );
    }
}

/// What an event says: (state, severity, summary).
fn said(event: &Value) -> (&str, &str, &str) {
    (
        event["state"].as_str().unwrap(),
        event["severity"].as_str().unwrap(),
        event["summary"].as_str().unwrap(),
    )
}

#[test]
fn the_hooks_refusals_reach_the_channels_status_and_alerts() {
    let world = World::new();
    world.tick(0, &session(0, false, false));
    let events = world.events();
    assert_eq!(events.len(), 1, "{events:#?}");
    assert_eq!(
        (events[0]["state"].as_str(), events[0]["dedup_key"].as_str()),
        (Some("trigger"), Some(KEY))
    );

    // The hook refused the looping test twice: the first refusal is told.
    let journal = world.tick(300, &session(2, false, false));
    assert!(
        journal.contains("state=blocked")
            && journal.contains("blocked=\"agentwatch blocked 2 calls"),
        "{journal}"
    );
    let events = world.events();
    assert_eq!(events.len(), 2, "{events:#?}");
    assert_eq!(events[1]["dedup_key"], KEY);
    // The hook's refusals first, then what the detector saw.
    let (state, severity, summary) = said(&events[1]);
    assert_eq!((state, severity), ("blocked", "warning"));
    assert!(
        summary.starts_with("agentwatch blocked 2 calls of `pytest tests/test_x.py`. The session "),
        "{summary}"
    );
    assert!(
        events[1]["title"]
            .as_str()
            .unwrap()
            .starts_with("Blocked: Make the tests pass")
    );
    assert_eq!(events[1]["details"]["blocked"]["blocked"], 2);

    // The third flagged tick escalates: the escalation says the count.
    world.tick(600, &session(2, false, false));
    let events = world.events();
    assert_eq!(events.len(), 3, "{events:#?}");
    let (state, severity, summary) = said(&events[2]);
    assert_eq!((state, severity), ("escalate", "critical"));
    assert!(
        summary.ends_with("; agentwatch blocked 2 calls of `pytest tests/test_x.py`."),
        "{summary}"
    );

    // Refused again: counted, not told. Then the stop: told, at the alert's severity.
    world.tick(900, &session(3, false, false));
    assert_eq!(world.events().len(), 3, "a third refusal is not news");
    world.tick(1200, &session(4, true, false));
    let events = world.events();
    assert_eq!(events.len(), 4, "{events:#?}");
    let (state, severity, summary) = said(&events[3]);
    assert_eq!((state, severity), ("blocked", "critical"));
    let sentence = "agentwatch blocked 4 calls of `pytest tests/test_x.py`; the session stopped";
    assert!(summary.starts_with(sentence), "{summary}");
    assert_ne!(events[1]["event_id"], events[3]["event_id"]);

    world.assert_shown(sentence);

    // The session moves on (a call runs, an edit lands): the alert resolves, saying what the
    // hook did.
    world.tick(1500, &session(4, true, true));
    let events = world.events();
    assert_eq!(events.len(), 5, "{events:#?}");
    assert_eq!(events[4]["state"], "resolve");
    assert_eq!(events[4]["details"]["blocked"]["stopped"], true);
    assert!(world.show(&["alerts"]).contains("no open alerts"));
    let all = world.show(&["alerts", "--all"]);
    assert!(
        all.contains(" resolved ") && all.contains(sentence),
        "{all}"
    );
}

/// A refusal the watch has no alert for yet (it judged the loop and the refusals in one tick)
/// opens the alert with a trigger that says what the hook refused: no `blocked` event after it.
#[test]
fn a_refusal_with_no_alert_yet_opens_one_that_says_so() {
    let world = World::new();
    world.tick(0, &session(2, false, false));
    world.tick(300, &session(2, false, false));
    let events = world.events();
    assert_eq!(events.len(), 1, "{events:#?}");
    let (state, _, summary) = said(&events[0]);
    assert_eq!(state, "trigger");
    assert!(
        summary.ends_with("; agentwatch blocked 2 calls of `pytest tests/test_x.py`."),
        "{summary}"
    );
}
