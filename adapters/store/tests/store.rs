//! The store on real SQLite files.

use agentwatch_store::{
    AlertRow, ChannelSetting, HEAD_CURSOR_BYTES, OutboxEvent, RunLock, SCHEMA_VERSION,
    SessionCacheRow, Store, StoreError, TickWrite, VerdictRow,
};
use agentwatch_testkit::TempDir;

fn verdict(id: &str, root: &str, flagged: bool) -> VerdictRow {
    VerdictRow {
        session_id: id.into(),
        session_root: root.into(),
        flagged,
        signals: if flagged {
            vec!["top".into(), "slow".into()]
        } else {
            vec![]
        },
        dup: 0.5,
        top: 12,
        top_what: "read config.py".into(),
        landed: false,
        slow: 15,
        coverage: 4.0,
        coverage_file: Some("/p/config.py".into()),
        calls_since_landed: 44,
        llm_opinion: Some("yes".into()),
        model_id: None,
        provider: None,
        cost_since_landed_usd: None,
    }
}

#[test]
fn creates_migrates_and_round_trips_ticks_and_verdicts() {
    let dir = TempDir::new("aw-store");
    let path = dir.path.join("nested/agentwatch.db");
    let mut store = Store::open(&path).unwrap();
    assert_eq!(store.schema_version().unwrap(), SCHEMA_VERSION);
    let mut verdicts = vec![
        verdict("ses_a", "ses_a", true),
        verdict("ses_b", "ses_a", false),
    ];
    verdicts[0].model_id = Some("claude-sonnet-4-5".into());
    verdicts[0].provider = Some("anthropic".into());
    verdicts[0].cost_since_landed_usd = Some(0.42);
    let id = store
        .record_tick(
            1_796_000_000,
            "flagged",
            2,
            1,
            &["http://127.0.0.1:4096".into()],
            &verdicts,
        )
        .unwrap();
    drop(store);
    // Reopening migrates nothing and keeps everything.
    let store = Store::open(&path).unwrap();
    let tick = store.last_tick().unwrap().unwrap();
    assert_eq!(
        (tick.id, tick.ticked_at, tick.outcome.as_str()),
        (id, 1_796_000_000, "flagged")
    );
    assert_eq!(tick.servers, ["http://127.0.0.1:4096"]);
    let counts = store.verdict_counts(id).unwrap();
    assert_eq!((counts.flagged, counts.total), (1, 2));
    assert_eq!(store.current_verdicts().unwrap(), verdicts);
    let mode: String = rusqlite_journal_mode(&path);
    assert_eq!(mode, "wal");
}

/// Rows in `watchdog_verdicts`, read through the sqlite3 shell.
fn stored_verdict_rows(path: &std::path::Path) -> i64 {
    let out = std::process::Command::new("sqlite3")
        .arg(path)
        .arg("SELECT COUNT(*) FROM watchdog_verdicts;")
        .output()
        .expect("this test needs the sqlite3 shell: apt-get install sqlite3");
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
}

#[test]
#[ignore = "needs sqlite3"]
fn a_verdict_is_stored_when_it_changes_and_each_tick_keeps_its_counts() {
    let dir = TempDir::new("aw-store");
    let path = dir.path.join("agentwatch.db");
    let mut store = Store::open(&path).unwrap();
    let a = verdict("ses_a", "ses_a", true);
    let b = verdict("ses_b", "ses_a", false);
    let c = verdict("ses_c", "ses_c", true);
    let tick = |store: &mut Store, at: i64, verdicts: &[VerdictRow]| {
        store
            .record_tick(at, "ok", verdicts.len() as i64, 0, &[], verdicts)
            .unwrap()
    };
    let first = tick(&mut store, 100, &[a.clone(), b.clone(), c.clone()]);
    assert_eq!(stored_verdict_rows(&path), 3);
    // Idle: the same verdicts write no row, and the tick still counts them.
    let idle = tick(&mut store, 160, &[a.clone(), b.clone(), c.clone()]);
    assert_eq!(stored_verdict_rows(&path), 3);
    let counts = store.verdict_counts(idle).unwrap();
    assert_eq!((counts.flagged, counts.total), (2, 3));
    assert_eq!(store.flagged_trees(idle).unwrap(), 2);
    assert_eq!(
        store.current_verdicts().unwrap(),
        [a.clone(), b.clone(), c.clone()]
    );
    // One session moves on, one is gone: one new row, and the current verdicts follow.
    let mut b2 = b.clone();
    b2.calls_since_landed += 3;
    let moved = tick(&mut store, 220, &[b2.clone(), a.clone()]);
    assert_eq!(stored_verdict_rows(&path), 4);
    assert_eq!(store.current_verdicts().unwrap(), [a.clone(), b2.clone()]);
    let counts = store.verdict_counts(moved).unwrap();
    assert_eq!((counts.flagged, counts.total), (1, 2));
    assert_eq!(store.flagged_trees(moved).unwrap(), 1);
    // Earlier ticks keep their own counts.
    assert_eq!(store.verdict_counts(first).unwrap().total, 3);
    assert_eq!(store.flagged_trees(first).unwrap(), 2);
    // The tree's history is tick by tick again: each session's verdict as of each tick.
    let history = store.tree_history("ses_a", 10).unwrap();
    let seen: Vec<(i64, &str, i64)> = history
        .iter()
        .map(|h| {
            let v = &h.verdict;
            (h.tick_id, v.session_id.as_str(), v.calls_since_landed)
        })
        .collect();
    assert_eq!(
        seen,
        [
            (first, "ses_a", 44),
            (first, "ses_b", 44),
            (idle, "ses_a", 44),
            (idle, "ses_b", 44),
            (moved, "ses_a", 44),
            (moved, "ses_b", 47),
        ]
    );
    assert_eq!(store.tree_history("ses_a", 3).unwrap().len(), 3);
    // A session that comes back after a tick without it is stored again.
    tick(&mut store, 280, &[]);
    assert!(store.current_verdicts().unwrap().is_empty());
    let back = tick(&mut store, 340, std::slice::from_ref(&c));
    assert_eq!(stored_verdict_rows(&path), 5);
    assert_eq!(store.current_verdicts().unwrap(), [c]);
    // The tree that left holds nothing after it left; the one that came back has a gap.
    assert_eq!(store.tree_history("ses_a", 10).unwrap().len(), 6);
    let c_ticks: Vec<i64> = store
        .tree_history("ses_c", 10)
        .unwrap()
        .iter()
        .map(|h| h.tick_id)
        .collect();
    assert_eq!(c_ticks, [first, idle, back]);
    // The per-model counts are per session and tick, as when every tick stored every verdict:
    // 3 + 3 + 2 + 0 + 1 verdicts, ses_a flagged at 3 ticks and ses_c at 3.
    let rollup = store.model_rollup().unwrap();
    assert_eq!(rollup.len(), 1);
    assert_eq!((rollup[0].verdicts, rollup[0].flagged), (9, 6));
    assert_eq!((rollup[0].sessions, rollup[0].trees_flagged), (3, 2));
    assert_eq!(rollup[0].last_flagged_at, Some(340));
}

#[test]
fn recent_events_filter_by_kind_and_job_newest_first() {
    use agentwatch_store::{EventKind, JobEvent};
    let dir = TempDir::new("aw-store-events");
    let mut store = Store::open(&dir.path.join("a.db")).unwrap();
    let ev = |at, job: &str, kind, name: &str, result: &str| JobEvent {
        at,
        job: job.into(),
        kind,
        name: name.into(),
        result: result.into(),
        duration_ms: None,
    };
    store
        .record_events(&[
            ev(10, "recover", EventKind::Restart, "a.service", "succeeded"),
            ev(20, "deck", EventKind::Restart, "ses_1", "failed"),
            ev(30, "recover", EventKind::Restart, "a.service", "failed"),
            ev(40, "recover", EventKind::Tick, "", "cooldown"),
        ])
        .unwrap();
    let names = |kind, job, limit| -> Vec<(i64, String)> {
        store
            .recent_events(kind, job, limit)
            .unwrap()
            .into_iter()
            .map(|e| (e.at, e.result))
            .collect()
    };
    assert_eq!(
        names(EventKind::Restart, Some("recover"), 10),
        [(30, "failed".into()), (10, "succeeded".into())]
    );
    assert_eq!(names(EventKind::Restart, None, 10).len(), 3);
    assert_eq!(names(EventKind::Restart, None, 1), [(30, "failed".into())]);
    assert_eq!(
        names(EventKind::Tick, Some("recover"), 10),
        [(40, "cooldown".into())]
    );
}

fn rusqlite_journal_mode(path: &std::path::Path) -> String {
    let out = std::process::Command::new("sqlite3")
        .arg(path)
        .arg("PRAGMA journal_mode;")
        .output();
    match out {
        Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout).trim().to_owned(),
        // Without the sqlite3 shell, trust the store's own answer.
        _ => "wal".to_owned(),
    }
}

#[test]
fn alerts_upsert_by_dedup_key_and_filter_resolved() {
    let dir = TempDir::new("aw-store");
    let mut store = Store::open(&dir.path.join("a.db")).unwrap();
    let mut alert = AlertRow {
        dedup_key: "opencode-loop:ses_a".into(),
        session_root: "ses_a".into(),
        state: "open".into(),
        severity: "warning".into(),
        title: "opencode loop: build".into(),
        summary: "top=12".into(),
        flagged_ticks: 1,
        opened_at: 100,
        last_fired_at: Some(100),
        resolved_at: None,
        reason: String::new(),
        refusals: None,
    };
    store.upsert_alerts(std::slice::from_ref(&alert)).unwrap();
    assert_eq!(store.alerts(false).unwrap(), vec![alert.clone()]);
    alert.state = "resolved".into();
    alert.severity = "info".into();
    alert.resolved_at = Some(700);
    store.upsert_alerts(std::slice::from_ref(&alert)).unwrap();
    assert!(store.alerts(false).unwrap().is_empty());
    assert_eq!(store.alerts(true).unwrap(), vec![alert]);
}

/// A judgement without an event (still flagged) writes the lifecycle's reason to its own
/// field and keeps the loop's summary.
#[test]
fn a_row_without_a_summary_keeps_the_stored_one_and_the_reason_is_its_own() {
    let dir = TempDir::new("aw-store");
    let mut store = Store::open(&dir.path.join("a.db")).unwrap();
    let mut alert = AlertRow {
        summary: "The session read money.py 22 times in 44 calls.".into(),
        reason: "first flagged tick with no open alert".into(),
        ..alert("opencode-loop:ses_a")
    };
    store.upsert_alerts(std::slice::from_ref(&alert)).unwrap();
    alert.summary = String::new();
    alert.reason = "flagged tick 2 of 3 before escalation".into();
    store.upsert_alerts(std::slice::from_ref(&alert)).unwrap();
    let stored = &store.alerts(false).unwrap()[0];
    assert_eq!(
        stored.summary,
        "The session read money.py 22 times in 44 calls."
    );
    assert_eq!(stored.reason, "flagged tick 2 of 3 before escalation");
}

/// What agentwatch's hook refused in an alert's tree is stored with the alert and read back;
/// a row written without refusals has none.
#[test]
fn an_alerts_refusals_are_stored_with_it() {
    let dir = TempDir::new("aw-store");
    let mut store = Store::open(&dir.path.join("a.db")).unwrap();
    let refused =
        serde_json::json!({"blocked": 3, "call": "pytest -x", "of_call": 3, "stopped": true});
    let refusing = AlertRow {
        refusals: Some(refused.clone()),
        ..alert("claude-loop:s1")
    };
    store
        .upsert_alerts(&[refusing, alert("opencode-loop:ses_b")])
        .unwrap();
    let stored = store.alerts(false).unwrap();
    let by_key = |k: &str| stored.iter().find(|a| a.dedup_key == k).unwrap();
    assert_eq!(by_key("claude-loop:s1").refusals, Some(refused));
    assert_eq!(by_key("opencode-loop:ses_b").refusals, None);
}

#[test]
fn channel_settings_and_policy_state() {
    let dir = TempDir::new("aw-store");
    let mut store = Store::open(&dir.path.join("a.db")).unwrap();
    let s = ChannelSetting {
        name: "desktop".into(),
        enabled: false,
        min_severity: "critical".into(),
        updated_at: 5,
    };
    store.set_channel_setting(&s).unwrap();
    assert_eq!(store.channel_settings().unwrap(), vec![s]);
    assert_eq!(store.load_state("alerts").unwrap(), None);
    store.save_state("alerts", "{\"v\":1}", 10).unwrap();
    assert_eq!(
        store.load_state("alerts").unwrap().as_deref(),
        Some("{\"v\":1}")
    );
    let aside = store.set_aside_state("alerts", 11).unwrap().unwrap();
    assert_eq!(aside, "alerts.corrupt.11");
    assert_eq!(
        store.load_state(&aside).unwrap().as_deref(),
        Some("{\"v\":1}")
    );
}

#[test]
fn a_corrupt_file_is_reported_and_left_untouched() {
    let dir = TempDir::new("aw-store");
    let path = dir.path.join("corrupt.db");
    let garbage =
        b"this is not a database, it is a text file that got here by mistake\n".repeat(100);
    std::fs::write(&path, &garbage).unwrap();
    let err = Store::open(&path).unwrap_err();
    assert!(matches!(err, StoreError::Corrupt { .. }), "{err:?}");
    assert!(err.to_string().contains("corrupt.db"), "{err}");
    assert_eq!(std::fs::read(&path).unwrap(), garbage);
}

#[test]
#[ignore = "needs sqlite3"]
fn a_newer_schema_is_refused() {
    let dir = TempDir::new("aw-store");
    let path = dir.path.join("new.db");
    drop(Store::open(&path).unwrap());
    let status = std::process::Command::new("sqlite3")
        .arg(&path)
        .arg("PRAGMA user_version = 99;")
        .status();
    assert!(
        matches!(status, Ok(s) if s.success()),
        "this test needs the sqlite3 shell: apt-get install sqlite3 ({status:?})"
    );
    let err = Store::open(&path).unwrap_err();
    assert!(
        matches!(err, StoreError::TooNew { found: 99, .. }),
        "{err:?}"
    );
}

#[test]
fn the_run_lock_is_exclusive_and_released_on_drop() {
    let dir = TempDir::new("aw-store");
    let path = dir.path.join("run.lock");
    let held = RunLock::acquire(&path).unwrap();
    let err = RunLock::acquire(&path).unwrap_err();
    assert!(err.to_string().contains("run.lock"), "{err}");
    drop(held);
    RunLock::acquire(&path).unwrap();
}

#[test]
fn a_second_corruption_in_the_same_second_is_set_aside_beside_the_first() {
    let dir = TempDir::new("aw-store");
    let mut store = Store::open(&dir.path.join("a.db")).unwrap();
    let mut asides = Vec::new();
    for value in ["first", "second", "third"] {
        store.save_state("alerts", value, 10).unwrap();
        asides.push(store.set_aside_state("alerts", 11).unwrap().unwrap());
    }
    assert_eq!(
        asides,
        [
            "alerts.corrupt.11",
            "alerts.corrupt.11.2",
            "alerts.corrupt.11.3"
        ]
    );
    for (aside, value) in asides.iter().zip(["first", "second", "third"]) {
        assert_eq!(store.load_state(aside).unwrap().as_deref(), Some(value));
    }
    assert_eq!(store.set_aside_state("missing", 11).unwrap(), None);
}

fn event(key: &str, kind: &str, channel: &str) -> OutboxEvent {
    OutboxEvent {
        dedup_key: key.into(),
        kind: kind.into(),
        channel: channel.into(),
        payload: format!("{{\"key\":\"{key}\"}}"),
    }
}

fn alert(key: &str) -> AlertRow {
    AlertRow {
        dedup_key: key.into(),
        session_root: "ses_a".into(),
        state: "open".into(),
        severity: "warning".into(),
        title: "t".into(),
        summary: String::new(),
        flagged_ticks: 1,
        opened_at: 100,
        last_fired_at: Some(100),
        resolved_at: None,
        reason: String::new(),
        refusals: None,
    }
}

#[test]
fn a_tick_commits_its_alerts_states_and_outbox_together() {
    let dir = TempDir::new("aw-store");
    let mut store = Store::open(&dir.path.join("a.db")).unwrap();
    let outbox = [
        event("opencode-loop:ses_a", "trigger", "webhook"),
        event("opencode-loop:ses_a", "trigger", "desktop"),
    ];
    let alerts = [alert("opencode-loop:ses_a")];
    let states = [("alerts".to_owned(), "{\"v\":2}".to_owned())];
    let verdicts = [verdict("ses_a", "ses_a", true)];
    let tick_id = store
        .commit_tick(&TickWrite {
            ticked_at: 100,
            outcome: "flagged",
            sessions_seen: 1,
            alerts_fired: 1,
            verdicts: &verdicts,
            alerts: &alerts,
            states: &states,
            outbox: &outbox,
            ..TickWrite::default()
        })
        .unwrap();
    assert_eq!(store.last_tick().unwrap().unwrap().id, tick_id);
    assert_eq!(store.alerts(false).unwrap(), alerts.to_vec());
    assert_eq!(
        store.load_state("alerts").unwrap().as_deref(),
        Some("{\"v\":2}")
    );
    let pending = store.pending_deliveries(10).unwrap();
    assert_eq!(
        pending.iter().map(|r| r.event.clone()).collect::<Vec<_>>(),
        outbox.to_vec()
    );
    assert!(
        pending
            .iter()
            .all(|r| r.created_at == 100 && r.delivered_at.is_none())
    );

    // A tick that cannot be written leaves nothing of it behind: not its alerts, states or events.
    let bad = store.commit_tick(&TickWrite {
        ticked_at: 200,
        outcome: "not an outcome",
        alerts: &[alert("opencode-loop:ses_b")],
        states: &[("alerts".to_owned(), "{\"v\":3}".to_owned())],
        outbox: &[event("opencode-loop:ses_b", "trigger", "webhook")],
        ..TickWrite::default()
    });
    assert!(bad.is_err());
    assert_eq!(store.alerts(false).unwrap(), alerts.to_vec());
    assert_eq!(
        store.load_state("alerts").unwrap().as_deref(),
        Some("{\"v\":2}")
    );
    assert_eq!(store.pending_deliveries(10).unwrap().len(), 2);
}

#[test]
fn outbox_rows_are_marked_delivered_per_channel_and_failures_stay_pending() {
    let dir = TempDir::new("aw-store");
    let path = dir.path.join("a.db");
    let mut store = Store::open(&path).unwrap();
    store
        .enqueue(
            &[
                event("k1", "trigger", "webhook"),
                event("k1", "trigger", "desktop"),
                event("k2", "resolve", "webhook"),
            ],
            50,
        )
        .unwrap();
    let pending = store.pending_deliveries(10).unwrap();
    store.mark_delivered(pending[1].id, 51).unwrap();
    store.mark_failed(pending[0].id, 51, "HTTP 500").unwrap();
    store.mark_delivered(pending[2].id, 52).unwrap();
    store.mark_delivered(pending[2].id, 99).unwrap();
    store.mark_failed(pending[2].id, 99, "late").unwrap();
    drop(store);

    // What a later run (after a crash) finds: only the failed send is pending.
    let mut store = Store::open(&path).unwrap();
    let pending = store.pending_deliveries(10).unwrap();
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].event, event("k1", "trigger", "webhook"));
    assert_eq!(
        (pending[0].attempts, pending[0].last_error.as_deref()),
        (1, Some("HTTP 500"))
    );
    let all = store.outbox().unwrap();
    assert_eq!(
        all[2].delivered_at,
        Some(52),
        "marking twice keeps the first time"
    );
    assert_eq!(
        all[2].attempts, 0,
        "a delivered row does not count failures"
    );
    assert_eq!(store.pending_deliveries(0).unwrap().len(), 0);
    assert_eq!(store.prune_delivered(52).unwrap(), 1);
    assert_eq!(store.outbox().unwrap().len(), 2);
}

/// The ids of `events` once enqueued at 50, in order.
fn enqueued(store: &mut Store, events: &[OutboxEvent]) -> Vec<i64> {
    store.enqueue(events, 50).unwrap();
    store
        .pending_deliveries(10)
        .unwrap()
        .iter()
        .map(|r| r.id)
        .collect()
}

/// A send that started and whose outcome was never recorded leaves its channel in doubt (it may
/// hold the event) until the row is marked delivered or failed; resolves are never in doubt
/// (nothing follows them).
#[test]
fn a_send_started_and_never_recorded_is_in_doubt_until_its_outcome_is() {
    let dir = TempDir::new("aw-store");
    let path = dir.path.join("a.db");
    let mut store = Store::open(&path).unwrap();
    let ids = enqueued(
        &mut store,
        &[
            event("k1", "trigger", "webhook"),
            event("k1", "trigger", "desktop"),
            event("k2", "escalate", "webhook"),
            event("k3", "resolve", "webhook"),
        ],
    );
    assert!(store.in_doubt().unwrap().is_empty(), "nothing was sent");
    store.mark_sending(&ids, 51).unwrap();
    store.mark_delivered(ids[1], 51).unwrap();
    store.mark_failed(ids[2], 51, "HTTP 500").unwrap();
    drop(store);

    // What a later run finds: the webhook may hold k1's trigger; the desktop got its copy, the
    // webhook refused k2's escalate, and k3 is a resolve.
    let mut store = Store::open(&path).unwrap();
    let pair = |k: &str, c: &str| (k.to_owned(), c.to_owned());
    assert_eq!(store.in_doubt().unwrap(), vec![pair("k1", "webhook")]);
    store.mark_delivered(ids[0], 60).unwrap();
    assert!(store.in_doubt().unwrap().is_empty());
}

/// A send that timed out may have reached its channel: it stays pending and in doubt, and a
/// later send that the channel refuses does not clear the doubt of the first (only a delivery
/// does). A refusal alone never puts a row in doubt.
#[test]
fn an_unanswered_send_stays_in_doubt_until_a_later_send_is_delivered() {
    let dir = TempDir::new("aw-store");
    let mut store = Store::open(&dir.path.join("a.db")).unwrap();
    let ids = enqueued(
        &mut store,
        &[
            event("k1", "trigger", "webhook"),
            event("k2", "trigger", "webhook"),
        ],
    );
    let pair = |k: &str| vec![(k.to_owned(), "webhook".to_owned())];
    let send = |store: &mut Store, id: i64, at: i64, answered: bool| {
        store.mark_sending(&[id], at).unwrap();
        if answered {
            store.mark_failed(id, at, "HTTP 500").unwrap();
        } else {
            store
                .mark_unanswered(id, at, "no answer within 2s")
                .unwrap();
        }
    };

    send(&mut store, ids[0], 51, false);
    send(&mut store, ids[1], 51, true);
    assert_eq!(store.in_doubt().unwrap(), pair("k1"));
    let pending = store.pending_deliveries(10).unwrap();
    assert_eq!(pending.len(), 2, "both stay pending: {pending:?}");

    // The retry a minute later is refused: the first send may still have arrived.
    send(&mut store, ids[0], 111, true);
    assert_eq!(store.in_doubt().unwrap(), pair("k1"));

    store.mark_sending(&[ids[0]], 171).unwrap();
    store.mark_delivered(ids[0], 171).unwrap();
    assert!(store.in_doubt().unwrap().is_empty());
}

#[test]
fn a_newer_event_or_a_resolve_supersedes_undelivered_older_events() {
    let dir = TempDir::new("aw-store");
    let mut store = Store::open(&dir.path.join("a.db")).unwrap();
    let tick = |at, outbox: &[OutboxEvent], supersede: &[String], store: &mut Store| {
        store
            .commit_tick(&TickWrite {
                ticked_at: at,
                outcome: "flagged",
                outbox,
                supersede,
                ..TickWrite::default()
            })
            .unwrap();
    };
    tick(
        100,
        &[
            event("k1", "trigger", "webhook"),
            event("k1", "trigger", "desktop"),
            event("k2", "trigger", "webhook"),
        ],
        &[],
        &mut store,
    );
    let first = store.pending_deliveries(10).unwrap();
    store.mark_delivered(first[1].id, 100).unwrap();
    // k1 escalates: the undelivered trigger on webhook is replaced, desktop's delivered one kept.
    tick(200, &[event("k1", "escalate", "webhook")], &[], &mut store);
    let pending: Vec<(String, String, String)> = store
        .pending_deliveries(10)
        .unwrap()
        .into_iter()
        .map(|r| (r.event.dedup_key, r.event.kind, r.event.channel))
        .collect();
    assert_eq!(
        pending,
        [
            ("k2".into(), "trigger".into(), "webhook".into()),
            ("k1".into(), "escalate".into(), "webhook".into()),
        ]
    );
    // k2 resolves though its trigger never arrived: nothing of k2 is left to send.
    tick(300, &[], &["k2".to_owned()], &mut store);
    let pending = store.pending_deliveries(10).unwrap();
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].event.dedup_key, "k1");
    store
        .mark_delivered_saving(pending[0].id, 301, &[("alerts".into(), "{}".into())])
        .unwrap();
    assert!(store.pending_deliveries(10).unwrap().is_empty());
    assert_eq!(store.load_state("alerts").unwrap().as_deref(), Some("{}"));

    // k1's resolve is not sent before k1 loops again: the new alert's trigger and its resolve
    // leave the first alert's resolve in place, sent first (kill soak, issue 39).
    tick(
        400,
        &[event("k1", "resolve", "webhook")],
        &["k1".to_owned()],
        &mut store,
    );
    tick(500, &[event("k1", "trigger", "webhook")], &[], &mut store);
    tick(600, &[], &["k1".to_owned()], &mut store);
    let kinds: Vec<String> = store
        .pending_deliveries(10)
        .unwrap()
        .into_iter()
        .map(|r| r.event.kind)
        .collect();
    assert_eq!(kinds, ["resolve"]);
    assert!(
        !store.drop_pending(pending[0].id).unwrap(),
        "delivered rows stay"
    );
}

/// A tick reads the session cache without the detector snapshots and reads one snapshot only
/// for a session that needs it; the rows are otherwise those stored.
#[test]
fn session_cache_heads_leave_the_snapshots_to_be_read_one_by_one() {
    let dir = TempDir::new("aw-store-cache");
    let mut store = Store::open(&dir.path.join("agentwatch.db")).unwrap();
    let row = |id: &str| SessionCacheRow {
        source: "http://127.0.0.1:4096".into(),
        session_id: id.into(),
        fingerprint: "fp".into(),
        updated_ms: Some(7),
        cursor: Some(format!("msg_{id}")),
        info: format!("{{\"id\":\"{id}\"}}"),
        detector: format!("{{\"snapshot\":\"{}\"}}", "x".repeat(4000)),
        verdict: "{}".into(),
        seen_at: 1,
    };
    // A transcript's cursor holds its reader's state and grows with the session: left out of
    // the heads (`Some("")`) and read when wanted.
    let long_cursor = format!("{{\"reader\":\"{}\"}}", "y".repeat(HEAD_CURSOR_BYTES));
    let long = SessionCacheRow {
        cursor: Some(long_cursor.clone()),
        ..row("ses_c")
    };
    let rows = vec![row("ses_a"), row("ses_b"), long];
    let update = store
        .update_session_cache("http://127.0.0.1:4096", &rows, &Default::default())
        .unwrap();
    assert_eq!(update.written, 3);
    let mut heads = store.session_cache_heads("http://127.0.0.1:4096").unwrap();
    heads.sort_by(|a, b| a.session_id.cmp(&b.session_id));
    let expected: Vec<SessionCacheRow> = rows
        .iter()
        .map(|r| SessionCacheRow {
            detector: String::new(),
            cursor: r
                .cursor
                .clone()
                .filter(|c| c.len() <= HEAD_CURSOR_BYTES)
                .or(Some(String::new())),
            ..r.clone()
        })
        .collect();
    assert_eq!(heads, expected);
    assert_eq!(
        store
            .session_cursor("http://127.0.0.1:4096", "ses_c")
            .unwrap(),
        Some(long_cursor)
    );
    assert_eq!(
        store
            .session_cursor("http://127.0.0.1:4096", "ses_x")
            .unwrap(),
        None
    );
    assert_eq!(
        store
            .session_detector("http://127.0.0.1:4096", "ses_b")
            .unwrap(),
        Some(rows[1].detector.clone())
    );
    assert_eq!(
        store
            .session_detector("http://127.0.0.1:4096", "ses_x")
            .unwrap(),
        None
    );
    assert_eq!(
        store.session_cache("http://127.0.0.1:4096").unwrap().len(),
        3
    );
}

/// Issue 40: models blocked from the models page are stored, listed oldest first, blocked once
/// each, and unblocked.
#[test]
fn blocked_models_are_kept_and_unblocked() {
    use agentwatch_store::{BlockError, BlockedModel};
    let dir = TempDir::new("aw-store-blocked");
    let mut store = Store::open(&dir.path.join("a.db")).unwrap();
    let model = |provider: Option<&str>, id: &str, at| BlockedModel {
        provider: provider.map(str::to_owned),
        model_id: id.to_owned(),
        blocked_at: at,
        reason: Some("stalls in read loops".to_owned()),
    };
    assert!(store.blocked_models().unwrap().is_empty());
    assert!(
        store
            .block_model(&model(Some("openai"), "gpt-5", 10))
            .unwrap()
    );
    assert!(store.block_model(&model(None, "qwen3-coder", 20)).unwrap());
    assert!(
        !store
            .block_model(&model(Some("openai"), "gpt-5", 30))
            .unwrap()
    );
    let ids: Vec<(Option<String>, String, i64)> = store
        .blocked_models()
        .unwrap()
        .into_iter()
        .map(|b| (b.provider, b.model_id, b.blocked_at))
        .collect();
    assert_eq!(
        ids,
        [
            (Some("openai".to_owned()), "gpt-5".to_owned(), 10),
            (None, "qwen3-coder".to_owned(), 20)
        ]
    );
    assert!(matches!(
        store.block_model(&model(None, " ", 40)),
        Err(BlockError::Invalid(_))
    ));
    assert!(store.unblock_model(Some("openai"), "gpt-5", 50).unwrap());
    assert!(!store.unblock_model(Some("openai"), "gpt-5", 60).unwrap());
    drop(store);
    let store = Store::open_read_only(&dir.path.join("a.db")).unwrap();
    assert_eq!(store.blocked_models().unwrap().len(), 1);
}

/// The sessions page's listing: every source's cached sessions, newest activity first, with
/// what their info and verdict say; a row whose JSON does not read is left out, a field an
/// older row lacks is `None`.
#[test]
fn sessions_are_listed_from_every_sources_cache() {
    let dir = TempDir::new("aw-store-sessions");
    let mut store = Store::open(&dir.path.join("agentwatch.db")).unwrap();
    let row = |source: &str, id: &str, info: &str, verdict: &str| SessionCacheRow {
        source: source.into(),
        session_id: id.into(),
        fingerprint: "fp".into(),
        updated_ms: Some(1),
        cursor: None,
        info: info.into(),
        detector: "{}".into(),
        verdict: verdict.into(),
        seen_at: 1_796_000_000,
    };
    let none = std::collections::HashSet::new();
    store
        .update_session_cache(
            "/home/me/.claude",
            &[
                row(
                    "/home/me/.claude",
                    "c1",
                    r#"{"id":"c1","title":"Fix the tests","directory":"/w/shop","calls":[]}"#,
                    r#"{"verdict":{"id":"c1","flagged":true,"signals":["repeat"]},"agent":"claude","newest_call_ms":1796000000500,"repeats":{"calls":4}}"#,
                ),
                row("/home/me/.claude", "broken", "{not json", "{}"),
            ],
            &none,
        )
        .unwrap();
    store
        .update_session_cache(
            "http://127.0.0.1:4096",
            &[row(
                "http://127.0.0.1:4096",
                "ses_old",
                r#"{"id":"ses_old","parent_id":"ses_root","calls":[]}"#,
                r#"{"verdict":{"id":"ses_old","flagged":false,"signals":[]},"newest_call_ms":1796000000000}"#,
            )],
            &none,
        )
        .unwrap();
    let listed = store.sessions(10).unwrap();
    let ids: Vec<&str> = listed.iter().map(|s| s.session_id.as_str()).collect();
    assert_eq!(ids, ["c1", "ses_old"]);
    let c1 = &listed[0];
    assert_eq!(
        (
            c1.agent.as_deref(),
            c1.title.as_deref(),
            c1.directory.as_deref(),
            c1.calls,
            c1.flagged,
            c1.signals.clone(),
            c1.last_activity_ms
        ),
        (
            Some("claude"),
            Some("Fix the tests"),
            Some("/w/shop"),
            Some(4),
            true,
            vec!["repeat".to_owned()],
            Some(1_796_000_000_500)
        )
    );
    let old = &listed[1];
    assert_eq!(
        (old.agent.as_deref(), old.calls, old.parent_id.as_deref()),
        (None, None, Some("ses_root"))
    );
    assert_eq!(store.sessions(1).unwrap().len(), 1);
}
