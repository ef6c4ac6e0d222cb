//! Grouped notifications (issue 13): a tick's events to a channel a person reads go out as one
//! notification naming every alert; receivers that deduplicate per key get one event per key;
//! events held by a rate limit go out as one digest once the channel is free, never dropped.

use agentwatch_testkit::opencode::{ExportBuilder, looping_calls};
use agentwatch_testkit::{HttpServer, Reply, Request, StandIns, TempDir, stand_in};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::Output;

const T0: i64 = 1_796_000_000;

fn agentwatch(home: &Path, args: &[String]) -> Output {
    agentwatch_testkit::isolated_command(env!("CARGO_BIN_EXE_agentwatch"), home)
        .args(args)
        .output()
        .unwrap()
}

fn root(i: usize) -> String {
    format!("ses_group{i:02}000000000rootAAAA")
}

/// A looping session file per root.
fn sessions(dir: &Path, roots: &[usize]) -> Vec<PathBuf> {
    roots
        .iter()
        .map(|&i| {
            ExportBuilder::new(&root(i), &format!("Task {i}"), None, T0 * 1000 - 300_000)
                .steps("build", &looping_calls(45), 1000)
                .write(&dir.join(format!("s{i}.json")))
        })
        .collect()
}

struct World {
    tmp: TempDir,
    stand_ins: StandIns,
    hook: HttpServer,
}

impl World {
    fn new(name: &str) -> Self {
        Self::with_hook(name, |_: &Request| Reply::json(200, &json!({"ok": true})))
    }

    fn with_hook(name: &str, hook: impl Fn(&Request) -> Reply + Send + Sync + 'static) -> Self {
        let tmp = TempDir::new(name);
        let stand_ins = StandIns::new(&tmp.path.join("bin"));
        let notify = stand_in(&stand_ins, "notify-send", "", 0);
        let hook = HttpServer::start(hook);
        let dir = tmp.path.join("config/agentwatch");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("config.toml"),
            format!(
                "[watchdog]\nlocal_llm_enabled = false\n\
                 [[channels]]\nname = \"desktop\"\ntype = \"desktop\"\nprogram = \"{}\"\n\
                 [[channels]]\nname = \"hook\"\ntype = \"webhook\"\nurl = \"{}/events\"\n",
                notify.display(),
                hook.url()
            ),
        )
        .unwrap();
        Self {
            tmp,
            stand_ins,
            hook,
        }
    }

    fn tick(&self, at: i64, roots: &[usize]) -> String {
        let mut args: Vec<String> = ["watch", "--once", "--now"]
            .iter()
            .map(|s| (*s).to_owned())
            .collect();
        args.push(at.to_string());
        // A named store: a run on files without one uses a fresh store each time.
        args.push("--db".to_owned());
        args.push(self.tmp.path.join("aw.db").display().to_string());
        for file in sessions(&self.tmp.path, roots) {
            args.push("--sessions".to_owned());
            args.push(file.display().to_string());
        }
        let out = agentwatch(&self.tmp.path, &args);
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(0), "{err}");
        err
    }

    fn db(&self) -> String {
        self.tmp.path.join("aw.db").display().to_string()
    }

    fn desktop(&self) -> Vec<String> {
        self.stand_ins
            .calls("notify-send")
            .iter()
            .map(|argv| argv.join(" "))
            .collect()
    }
}

#[test]
fn twenty_looping_trees_make_one_desktop_notification_naming_all_and_one_event_per_key() {
    let world = World::new("aw-grouped-20");
    let all: Vec<usize> = (0..20).collect();
    let err = world.tick(T0, &all);
    let desktop = world.desktop();
    assert_eq!(desktop.len(), 1, "{desktop:?}\n{err}");
    assert!(desktop[0].contains("20 sessions looping"), "{}", desktop[0]);
    for i in &all {
        assert!(
            desktop[0].contains(&root(*i)),
            "{} not in {}",
            root(*i),
            desktop[0]
        );
    }
    assert!(
        err.contains("channel=desktop delivery=sent grouped=20"),
        "{err}"
    );
    // The JSON webhook's receiver deduplicates per key: one event each, never grouped.
    let mut keys: Vec<String> = world
        .hook
        .requests()
        .iter()
        .map(|r| r.body_json()["dedup_key"].as_str().unwrap_or("").to_owned())
        .collect();
    keys.sort();
    let expected: Vec<String> = all
        .iter()
        .map(|i| format!("opencode-loop:{}", root(*i)))
        .collect();
    assert_eq!(keys, expected);
}

#[test]
fn events_held_by_the_rate_limit_go_out_as_one_digest_when_the_channel_is_free() {
    let world = World::new("aw-grouped-digest");
    world.tick(T0, &[0]);
    assert_eq!(world.desktop().len(), 1);
    // Two new loops a minute later: the desktop is within its 300 s limit, so they wait.
    let err = world.tick(T0 + 60, &[0, 1, 2]);
    assert_eq!(world.desktop().len(), 1, "{err}");
    assert!(err.contains("channel=desktop delivery=held"), "{err}");
    // Once the channel is free, both go out in one notification.
    let err = world.tick(T0 + 300, &[0, 1, 2]);
    let desktop = world.desktop();
    assert_eq!(desktop.len(), 2, "{desktop:?}\n{err}");
    for i in [1, 2] {
        assert!(desktop[1].contains(&root(i)), "{}", desktop[1]);
    }
    // Nothing is left pending.
    let err = world.tick(T0 + 900, &[0, 1, 2]);
    assert!(!err.contains("delivery=held"), "{err}");
}

/// `group_by = "key"` (the json webhook's default): each loop has its own rate-limit window, so
/// a second loop's first alert goes out at once as a trigger, not 300 s later behind the first
/// loop's; the desktop (`group_by = "channel"`) still holds it for its digest.
#[test]
fn a_second_loop_a_minute_later_reaches_the_json_webhook_at_once_as_a_trigger() {
    let world = World::new("aw-grouped-by-key");
    world.tick(T0, &[0]);
    let err = world.tick(T0 + 60, &[0, 1]);
    let got: Vec<(String, String)> = world
        .hook
        .requests()
        .iter()
        .map(|r| {
            let body = r.body_json();
            let field = |k: &str| body[k].as_str().unwrap_or("").to_owned();
            (field("dedup_key"), field("state"))
        })
        .collect();
    let key = |i: usize| format!("opencode-loop:{}", root(i));
    assert_eq!(
        got,
        [
            (key(0), "trigger".to_owned()),
            (key(1), "trigger".to_owned())
        ],
        "{err}"
    );
    assert!(err.contains("channel=desktop delivery=held"), "{err}");
}

fn key(i: usize) -> String {
    format!("opencode-loop:{}", root(i))
}

/// Silences act when an event is sent, not when it was queued: loop 1's trigger waits for the
/// desktop's rate limit, the operator silences loop 1, and it never goes out.
#[test]
fn a_silence_set_while_an_event_waits_stops_it() {
    let world = World::new("aw-send-time-silence");
    world.tick(T0, &[0]);
    let err = world.tick(T0 + 60, &[0, 1]);
    assert!(err.contains("channel=desktop delivery=held"), "{err}");
    let silence: Vec<String> = ["alerts", "--db", &world.db(), "silence", &key(1)]
        .iter()
        .map(|s| (*s).to_owned())
        .chain(["--for", "1d", "--now"].map(str::to_owned))
        .chain([(T0 + 120).to_string()])
        .collect();
    let out = agentwatch(&world.tmp.path, &silence);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let err = world.tick(T0 + 300, &[0, 1]);
    assert_eq!(world.desktop().len(), 1, "{:?}\n{err}", world.desktop());
    assert!(
        err.contains("channel=desktop delivery=silenced"),
        "the drop is in the journal: {err}"
    );
    let err = world.tick(T0 + 900, &[0, 1]);
    assert!(!err.contains("delivery=held"), "nothing waits: {err}");
}

/// A trigger the webhook never got (it refused it) is superseded by the escalate; what
/// arrives is still the first word on that loop: a trigger, critical.
#[test]
fn an_escalate_that_replaced_an_unsent_trigger_arrives_as_the_trigger() {
    let refusing = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let flag = refusing.clone();
    let world = World::with_hook("aw-first-word", move |_: &Request| {
        if flag.load(std::sync::atomic::Ordering::SeqCst) {
            Reply::json(500, &json!({"error": "down"}))
        } else {
            Reply::json(200, &json!({"ok": true}))
        }
    });
    world.tick(T0, &[0]);
    world.tick(T0 + 240, &[0]);
    refusing.store(false, std::sync::atomic::Ordering::SeqCst);
    let err = world.tick(T0 + 480, &[0]);
    let delivered: Vec<(String, String)> = world
        .hook
        .requests()
        .iter()
        .skip(2)
        .map(|r| {
            let body = r.body_json();
            let field = |k: &str| body[k].as_str().unwrap_or("").to_owned();
            (field("state"), field("severity"))
        })
        .collect();
    assert_eq!(
        delivered,
        [("trigger".to_owned(), "critical".to_owned())],
        "{err}"
    );
}

/// An ack acts when an event is sent: the acknowledged alert's escalate is dropped from every
/// channel that already had the alert (someone is on it).
#[test]
fn an_acknowledged_alert_does_not_escalate_on_a_channel_that_has_it() {
    let world = World::new("aw-send-time-ack");
    world.tick(T0, &[0]);
    let ack: Vec<String> = ["alerts", "--db", &world.db(), "ack", &key(0), "--now"]
        .iter()
        .map(|s| (*s).to_owned())
        .chain([(T0 + 10).to_string()])
        .collect();
    let out = agentwatch(&world.tmp.path, &ack);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    world.tick(T0 + 240, &[0]);
    let err = world.tick(T0 + 480, &[0]);
    assert_eq!(world.desktop().len(), 1, "{:?}\n{err}", world.desktop());
    assert!(err.contains("channel=desktop delivery=acked"), "{err}");
    let states: Vec<String> = world
        .hook
        .requests()
        .iter()
        .map(|r| r.body_json()["state"].as_str().unwrap_or("").to_owned())
        .collect();
    assert_eq!(states, ["trigger"], "{err}");
}
