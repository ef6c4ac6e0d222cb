//! `agentwatch deck --once` end to end, timelines driven with `--now` across oneshot runs of the
//! built binary: a scripted `agent-deck` stand-in that records every argv, a real tmux server on a
//! private socket for the panes, a loopback Telegram Bot API, real processes for the pollers, and
//! a real SQLite store between runs.

use agentwatch_testkit::agentdeck::{
    AgentDeckStandIn, Answer, DeckScript, TmuxServer, require_tmux,
};
use agentwatch_testkit::{HttpServer, Reply, TempDir};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

const T0: i64 = 1_790_000_000;
const COND: &str = "3f9a1c2e-1713770000";
const WORKER: &str = "0c1d2e3f-1713772000";
const CHILD: &str = "b7e04d11-1713771234";
const TOKEN: &str = "123456:test-token";
const CHAT: &str = "-1001234567890";

/// One isolated world: HOME, agent-deck root, config, store, the stand-in.
struct World {
    tmp: TempDir,
    deck: AgentDeckStandIn,
    vars: Vec<(String, String)>,
    /// Put the stand-in's directory on PATH.
    on_path: bool,
}

struct Run {
    out: Output,
}

impl Run {
    fn code(&self) -> Option<i32> {
        self.out.status.code()
    }
    fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.out.stdout).into_owned()
    }
    fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.out.stderr).into_owned()
    }
    fn json(&self) -> Value {
        serde_json::from_slice(&self.out.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}\n{}", self.stdout(), self.stderr()))
    }
}

impl World {
    fn new(name: &str) -> Self {
        let tmp = TempDir::new(&format!("aw-deck-{name}"));
        let deck = AgentDeckStandIn::install(&tmp.path.join("bin"));
        let root = tmp.path.join("agent-deck-root");
        Self {
            vars: vec![("AGENT_DECK_ROOT".into(), root.display().to_string())],
            tmp,
            deck,
            on_path: true,
        }
    }

    fn root(&self) -> PathBuf {
        self.tmp.path.join("agent-deck-root")
    }

    fn var(&mut self, key: &str, value: &str) -> &mut Self {
        self.vars.retain(|(k, _)| k != key);
        self.vars.push((key.into(), value.into()));
        self
    }

    fn config(&self, text: &str) -> PathBuf {
        let dir = self.tmp.path.join("config/agentwatch");
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("config.toml");
        std::fs::write(&path, text).unwrap();
        path
    }

    fn db(&self) -> PathBuf {
        self.tmp.path.join("state/agentwatch/agentwatch.db")
    }

    fn run(&self, args: &[&str]) -> Run {
        Run {
            out: self.command(args).output().unwrap(),
        }
    }

    /// `agentwatch deck ARGS` in this world.
    fn command(&self, args: &[&str]) -> Command {
        let path = std::env::var("PATH").unwrap_or_default();
        let path = if self.on_path {
            format!("{}:{path}", self.deck.dir().display())
        } else {
            path
        };
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_agentwatch"));
        cmd.arg("deck")
            .args(args)
            .current_dir(&self.tmp.path)
            .env_clear()
            .env("HOME", self.tmp.path.join("home"))
            .env("XDG_CONFIG_HOME", self.tmp.path.join("config"))
            .env("XDG_STATE_HOME", self.tmp.path.join("state"))
            .env("XDG_DATA_HOME", self.tmp.path.join("data"))
            .env("PATH", path)
            .stdin(Stdio::null());
        for (k, v) in &self.vars {
            cmd.env(k, v);
        }
        cmd
    }

    /// `deck --once --json --now NOW [extra]`, which must exit 0.
    fn once(&self, now: i64, extra: &[&str]) -> Value {
        let now = now.to_string();
        let mut args = vec!["--once", "--json", "--now", &now];
        args.extend_from_slice(extra);
        let run = self.run(&args);
        assert_eq!(run.code(), Some(0), "{}\n{}", run.stdout(), run.stderr());
        // The job's lines, and the default `journal` log channel's alert lines.
        for line in run.stderr().lines() {
            assert!(
                line.starts_with("deck=") || line.starts_with("alert="),
                "a stray log line: {line:?}"
            );
        }
        run.json()
    }

    fn log(&self, name: &str) -> Vec<Value> {
        std::fs::read_to_string(self.root().join("watchdog").join(name))
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
}

/// The decision names of one policy in a tick, in order.
fn names(tick: &Value, policy: &str) -> Vec<String> {
    tick["decisions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["policy"] == policy)
        .map(|d| d["decision"].as_str().unwrap().to_owned())
        .collect()
}

fn decision<'a>(tick: &'a Value, name: &str) -> &'a Value {
    tick["decisions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["decision"] == name)
        .unwrap_or_else(|| panic!("no {name} decision in {tick:#}"))
}

fn conductor_listed(id: &str) -> Value {
    json!({"id": id, "title": "conductor-travel", "path": "/home/u/.agent-deck/conductor/travel",
           "group": "conductor", "tool": "claude", "profile": "personal",
           "created_at": "2026-04-22T10:13:20+08:00"})
}

fn conductor_shown(id: &str, status: &str) -> Value {
    json!({"id": id, "title": "conductor-travel", "profile": "personal", "status": status,
           "path": "/home/u/.agent-deck/conductor/travel", "group": "conductor",
           "parent_session_id": "", "parent_project_path": "", "tool": "claude",
           "created_at": "2026-04-22T10:13:20+08:00", "claude_session_id": "9c59c3cd",
           "can_restart": true})
}

fn worker_listed() -> Value {
    json!({"id": WORKER, "title": "fix-login-bug", "group": "travel", "tool": "claude",
           "profile": "personal"})
}

fn worker_shown(status: &str) -> Value {
    json!({"id": WORKER, "title": "fix-login-bug", "group": "travel", "tool": "claude",
           "profile": "personal", "status": status, "parent_session_id": ""})
}

fn telegram_server() -> HttpServer {
    HttpServer::start(|_| Reply::json(200, &json!({"ok": true, "result": {"message_id": 1}})))
}

/// A world whose escalations go to a loopback Telegram Bot API.
fn with_telegram(world: &mut World, server: &HttpServer) -> PathBuf {
    world
        .var("TELEGRAM_ESCALATION_CHAT_ID", CHAT)
        .var("TELEGRAM_BOT_TOKEN", TOKEN);
    world.config(&format!(
        "[deck]\ntelegram_api_base = \"{}\"\n",
        server.url()
    ))
}

fn crashing_conductor_script() -> DeckScript {
    DeckScript::new()
        .list(&json!([conductor_listed(COND), worker_listed()]))
        .show(COND, &conductor_shown(COND, "error"))
        .show(WORKER, &worker_shown("error"))
}

/// The crashing conductor's logs and stored history: three restarts, one escalation, five
/// ticks, one delivery to the chat.
fn three_restarts_and_one_escalation_are_logged_and_stored(world: &World) {
    let restart_log = world.log("restart.log");
    assert_eq!(restart_log.len(), 3);
    for (record, dt) in restart_log.iter().zip([0, 60, 120]) {
        assert_eq!(record["ts"], T0 + dt);
        assert_eq!(record["id"], COND);
        assert_eq!(record["result"], "restarted");
        assert_eq!(record["trigger"], "error");
    }
    let escalations = world.log("escalations.log");
    assert_eq!(escalations.len(), 1);
    assert_eq!(escalations[0]["severity"], "restart-limit");
    assert_eq!(escalations[0]["sid"], COND);
    assert_eq!(escalations[0]["telegram"], true);

    // The history the recovery page and /metrics show: five ticks, three restarts, one delivery.
    let store = agentwatch_store::Store::open_read_only(&world.db()).unwrap();
    let events = |kind| store.recent_events(kind, Some("deck"), 50).unwrap();
    use agentwatch_store::EventKind;
    assert_eq!(events(EventKind::Tick).len(), 5);
    let restarts: Vec<(i64, String, String)> = events(EventKind::Restart)
        .into_iter()
        .map(|e| (e.at, e.name, e.result))
        .collect();
    let restarted = |dt| (T0 + dt, COND.to_owned(), "succeeded".to_owned());
    assert_eq!(restarts, [restarted(120), restarted(60), restarted(0)]);
    let deliveries: Vec<(String, String)> = events(EventKind::Delivery)
        .into_iter()
        .map(|e| (e.name, e.result))
        .collect();
    // Newest first: the chat, and the default `journal` log channel (no [[channels]] configured).
    assert_eq!(
        deliveries,
        [
            ("telegram-escalation".into(), "sent".into()),
            ("journal".into(), "sent".into())
        ]
    );
}

#[test]
fn critical_session_erroring_four_times_in_300s_gets_three_restarts_and_one_escalation() {
    let server = telegram_server();
    let mut world = World::new("crash");
    let config = with_telegram(&mut world, &server);
    let config = config.display().to_string();
    world.deck.script(&crashing_conductor_script());

    let ticks: Vec<Value> = [0, 60, 120, 180, 240]
        .iter()
        .map(|dt| world.once(T0 + dt, &["--config", &config]))
        .collect();
    // Each of the first three runs re-checks the conductor, then restarts it.
    for tick in &ticks[..3] {
        let guard = names(tick, "restart-guard");
        assert!(
            guard.ends_with(&[
                "recheck".into(),
                "restart".into(),
                "restart-succeeded".into()
            ]),
            "{guard:?}"
        );
    }
    assert!(
        decision(&ticks[2], "restart")["reason"]
            .as_str()
            .unwrap()
            .contains("3 of 3 in 300 s")
    );
    // The fourth error within 300 s escalates instead; the fifth is already escalated.
    assert_eq!(
        names(&ticks[3], "restart-guard"),
        ["restart-limit-escalated"]
    );
    assert_eq!(names(&ticks[4], "restart-guard"), ["restart-limit"]);
    // The worker is not critical: said once, never touched.
    assert_eq!(
        ticks
            .iter()
            .flat_map(|t| names(t, "restart-guard"))
            .filter(|n| n == "not-critical")
            .count(),
        1
    );

    let restarts = world.deck.session_calls("restart");
    assert_eq!(restarts.len(), 3, "{restarts:?}");
    for argv in &restarts {
        assert_eq!(
            argv,
            &["-p", "personal", "session", "restart", COND, "--json"]
        );
    }
    assert!(
        world.deck.session_calls("send").is_empty(),
        "no continuity message"
    );

    let requests = server.requests();
    assert_eq!(requests.len(), 1, "one Telegram escalation");
    assert_eq!(requests[0].path(), format!("/bot{TOKEN}/sendMessage"));
    let body = requests[0].body_json();
    assert_eq!(body["chat_id"], CHAT);
    assert!(
        body["text"].as_str().unwrap().contains("keeps crashing"),
        "{body}"
    );

    three_restarts_and_one_escalation_are_logged_and_stored(&world);
}

#[test]
fn a_session_that_recovered_at_recheck_is_not_restarted() {
    let world = World::new("recheck");
    world.deck.script(
        &DeckScript::new()
            .list(&json!([conductor_listed(COND)]))
            .show_seq(
                COND,
                &[
                    conductor_shown(COND, "error"),
                    conductor_shown(COND, "running"),
                ],
            ),
    );
    let tick = world.once(T0, &[]);
    assert_eq!(names(&tick, "restart-guard"), ["recheck", "recovered"]);
    // Stopped by the user between the listing and the re-check: never restarted either.
    world.deck.script(
        &DeckScript::new()
            .list(&json!([conductor_listed(COND)]))
            .show_seq(
                COND,
                &[
                    conductor_shown(COND, "error"),
                    conductor_shown(COND, "stopped"),
                ],
            ),
    );
    let tick = world.once(T0 + 5, &[]);
    assert_eq!(names(&tick, "restart-guard"), ["recheck", "stopped"]);
    assert!(world.deck.session_calls("restart").is_empty());
    // Each re-check read the status again: two shows per run.
    assert_eq!(world.deck.session_calls("show").len(), 4);
    let skipped = world.log("restart.log");
    assert_eq!(skipped.len(), 2);
    assert_eq!(skipped[0]["action"], "skipped");
    assert_eq!(skipped[0]["decision"], "recovered");
    assert_eq!(skipped[1]["decision"], "stopped");

    // Still in error at the re-check: now it restarts.
    world.deck.script(
        &DeckScript::new()
            .list(&json!([conductor_listed(COND)]))
            .show(COND, &conductor_shown(COND, "error")),
    );
    let tick = world.once(T0 + 10, &[]);
    assert_eq!(
        names(&tick, "restart-guard"),
        ["recheck", "restart", "restart-succeeded"]
    );
    assert_eq!(world.deck.session_calls("restart").len(), 1);
}

#[test]
fn skipped_true_is_a_refusal_not_a_success_or_a_failure() {
    let server = telegram_server();
    let mut world = World::new("refusal");
    let config = with_telegram(&mut world, &server).display().to_string();
    let refusal = json!({"success": true, "skipped": true,
        "reason": "session is running and was started 12s ago (within 1m0s freshness window); use --force to restart anyway",
        "id": COND, "title": "conductor-travel"});
    world
        .deck
        .script(&crashing_conductor_script().restart(COND, &refusal, 0));
    let ticks: Vec<Value> = [0, 60, 120]
        .iter()
        .map(|dt| world.once(T0 + dt, &["--config", &config]))
        .collect();
    for tick in &ticks {
        assert!(
            names(tick, "restart-guard").ends_with(&["restart".into(), "restart-refused".into()]),
            "{tick:#}"
        );
        assert_eq!(tick["actions"][0]["result"], "refused");
    }
    // No fallback `session start`, no continuity message, no failure count, no escalation.
    for argv in world.deck.calls() {
        let rest = if argv[0] == "-p" {
            &argv[2..]
        } else {
            &argv[..]
        };
        assert!(
            rest[0] == "list" || (rest[1] == "show" || rest[1] == "restart"),
            "unexpected call {argv:?}"
        );
    }
    assert!(world.log("escalations.log").is_empty());
    assert!(server.requests().is_empty());
    let log = world.log("restart.log");
    assert_eq!(log.len(), 3);
    assert!(
        log.iter().all(|r| r["result"] == "refused"
            && r["reason"].as_str().unwrap().contains("freshness window"))
    );

    // The contrast: a restart that fails twice in a row escalates.
    let server = telegram_server();
    let mut world = World::new("failure");
    let config = with_telegram(&mut world, &server).display().to_string();
    world.deck.script(&crashing_conductor_script().restart(
        COND,
        &json!({"success": false, "error": "failed to restart session: tmux: boom", "code": "INVALID_OPERATION"}),
        1,
    ));
    let first = world.once(T0, &["--config", &config]);
    assert!(names(&first, "restart-guard").ends_with(&["restart-failed".into()]));
    let second = world.once(T0 + 60, &["--config", &config]);
    assert!(
        names(&second, "restart-guard").ends_with(&["restart-failed-escalated".into()]),
        "{second:#}"
    );
    assert_eq!(server.requests().len(), 1);
    assert_eq!(
        world.log("escalations.log")[0]["severity"],
        "restart-failed"
    );
}

#[test]
fn an_auth_held_session_is_escalated_once_and_never_restarted() {
    let server = telegram_server();
    let mut world = World::new("authhold");
    let config = with_telegram(&mut world, &server).display().to_string();
    let mut held = conductor_shown(COND, "error");
    held["substate"] = json!("auth-401");
    held["auth_hold"] = json!({"reason": "auth_death", "remedy": "run /login", "boot_attempts": 1});
    world.deck.script(
        &DeckScript::new()
            .list(&json!([conductor_listed(COND)]))
            .show(COND, &held),
    );
    let first = world.once(T0, &["--config", &config]);
    assert_eq!(names(&first, "restart-guard"), ["auth-hold-escalated"]);
    let second = world.once(T0 + 120, &["--config", &config]);
    assert_eq!(names(&second, "restart-guard"), ["auth-held"]);
    assert!(world.deck.session_calls("restart").is_empty());
    assert_eq!(server.requests().len(), 1);
    assert_eq!(world.log("escalations.log")[0]["severity"], "auth-hold");
}

/// The first tick's two escalations: the chat groups by channel (a person reads it), so its
/// rate limit lets only the first through; the journal's log channel groups by key and takes
/// both.
fn the_chat_takes_the_first_and_the_journal_both(first: &Value) {
    let escalations = first["escalations"].as_array().unwrap();
    let on = |e: &Value, channel: &str| -> Value {
        e["deliveries"]
            .as_array()
            .unwrap()
            .iter()
            .find(|d| d["channel"] == channel)
            .cloned()
            .unwrap_or_else(|| panic!("no delivery to {channel}: {e:#}"))
    };
    assert_eq!(on(&escalations[0], "telegram-escalation")["result"], "sent");
    assert_eq!(
        on(&escalations[1], "telegram-escalation")["result"],
        "skipped"
    );
    assert!(
        on(&escalations[1], "telegram-escalation")["message"]
            .as_str()
            .unwrap()
            .contains("rate"),
        "{first:#}"
    );
    assert_eq!(
        on(&escalations[1], "journal")["result"],
        "sent",
        "{first:#}"
    );
}

#[test]
fn a_deck_escalation_is_an_alert_that_resolves_when_the_session_recovers() {
    const OTHER: &str = "5d6e7f80-1713779999";
    let server = telegram_server();
    let mut world = World::new("alerts");
    let config = with_telegram(&mut world, &server).display().to_string();
    let held = |id: &str| {
        let mut shown = conductor_shown(id, "error");
        shown["auth_hold"] = json!({"reason": "auth_death"});
        shown
    };
    world.deck.script(
        &DeckScript::new()
            .list(&json!([conductor_listed(COND), conductor_listed(OTHER)]))
            .show(COND, &held(COND))
            .show(OTHER, &held(OTHER)),
    );
    // Two escalations in one tick: two alerts open, but the Telegram chat's rate limit lets
    // only the first through.
    let first = world.once(T0, &["--config", &config]);
    let escalations = first["escalations"].as_array().unwrap();
    assert_eq!(escalations.len(), 2, "{first:#}");
    assert_eq!(escalations[0]["dedup_key"], format!("deck:{COND}"));
    the_chat_takes_the_first_and_the_journal_both(&first);
    assert_eq!(server.requests().len(), 1);
    let alerts = || {
        agentwatch_store::Store::open_read_only(&world.db())
            .unwrap()
            .alerts(true)
            .unwrap()
            .into_iter()
            .map(|a| (a.dedup_key, a.state, a.severity))
            .collect::<Vec<_>>()
    };
    let open = |id: &str| {
        (
            format!("deck:{id}"),
            "open".to_owned(),
            "critical".to_owned(),
        )
    };
    let mut both = vec![open(COND), open(OTHER)];
    both.sort();
    let mut seen = alerts();
    seen.sort();
    assert_eq!(seen, both);

    // Still held a tick later: no new event.
    let again = world.once(T0 + 60, &["--config", &config]);
    assert!(
        again["escalations"].as_array().unwrap().is_empty(),
        "{again:#}"
    );

    // COND recovers: its alert resolves, and the resolve goes to the chat that saw the trigger.
    world.deck.script(
        &DeckScript::new()
            .list(&json!([conductor_listed(COND), conductor_listed(OTHER)]))
            .show(COND, &conductor_shown(COND, "running"))
            .show(OTHER, &held(OTHER)),
    );
    let recovered = world.once(T0 + 120, &["--config", &config]);
    let resolved = recovered["resolved"].as_array().unwrap();
    assert_eq!(resolved.len(), 1, "{recovered:#}");
    assert_eq!(resolved[0]["dedup_key"], format!("deck:{COND}"));
    assert_eq!(resolved[0]["deliveries"][0]["result"], "sent");
    assert_eq!(server.requests().len(), 2);
    let mut seen = alerts();
    seen.sort();
    assert_eq!(
        seen,
        [
            (
                format!("deck:{COND}"),
                "resolved".to_owned(),
                "info".to_owned()
            ),
            open(OTHER)
        ]
    );
}

fn child_listed() -> Value {
    json!({"id": CHILD, "parent_session_id": COND, "title": "fix-login-bug", "group": "travel",
           "tool": "claude", "profile": "personal"})
}

fn child_shown(status: &str, socket: Option<&Path>) -> Value {
    let mut shown = json!({"id": CHILD, "title": "fix-login-bug", "profile": "personal",
        "status": status, "group": "travel", "parent_session_id": COND, "tool": "claude",
        "tmux_session": "agentdeck_fix-login-bug_b7e04d11"});
    if let Some(socket) = socket {
        shown["tmux_socket"] = json!(socket.display().to_string());
    }
    shown
}

fn child_script(status: &str, socket: Option<&Path>) -> DeckScript {
    DeckScript::new()
        .list(&json!([conductor_listed(COND), child_listed()]))
        .show(COND, &conductor_shown(COND, "running"))
        .show(CHILD, &child_shown(status, socket))
}

const CHILD_PANE: &str = "agentdeck_fix-login-bug_b7e04d11";

fn frozen_child(tmux: &TmuxServer) {
    tmux.new_session(
        CHILD_PANE,
        "printf 'Should I also migrate the old sessions table? (y/n)\\n'; exec sleep 100000",
    );
    tmux.wait_for(CHILD_PANE, "(y/n)");
}

#[test]
#[ignore = "needs tmux"]
fn a_waiting_child_with_a_frozen_pane_gets_one_nudge_per_hour() {
    require_tmux();
    let world = World::new("patrol");
    let tmux = TmuxServer::new(&world.tmp.path.join("tmux"));
    frozen_child(&tmux);
    // The session's own socket, from agent-deck's JSON.
    world
        .deck
        .script(&child_script("waiting", Some(&tmux.socket)));

    let timeline = [
        (0, "watching"),
        (300, "unchanged"),
        (600, "unchanged"),
        (601, "nudge"),
        (1200, "nudge-deduped"),
        (601 + 3599, "nudge-deduped"),
        (601 + 3600, "nudge"),
    ];
    let mut hashes = Vec::new();
    for (dt, want) in timeline {
        let tick = world.once(T0 + dt, &[]);
        assert_eq!(names(&tick, "waiting-patrol"), [want], "at +{dt}");
        assert!(names(&tick, "restart-guard").is_empty());
        let child = tick["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["id"] == CHILD)
            .unwrap();
        hashes.push(child["pane_hash"].as_str().unwrap().to_owned());
    }
    assert!(
        hashes.windows(2).all(|w| w[0] == w[1]),
        "the pane is frozen"
    );
    assert_eq!(hashes[0].len(), 64);
    let sends = world.deck.session_calls("send");
    assert_eq!(sends.len(), 2);
    for argv in &sends {
        assert_eq!(
            argv,
            &[
                "-p",
                "personal",
                "session",
                "send",
                CHILD,
                "report status?",
                "--no-wait"
            ]
        );
    }
    let patrol_log = world.log("patrol.log");
    assert_eq!(patrol_log.len(), 2);
    assert_eq!(patrol_log[0]["ts"], T0 + 601);
    assert_eq!(patrol_log[1]["ts"], T0 + 4201);
    assert_eq!(patrol_log[0]["result"], "sent");

    // The child answers: the pane changes and the timer starts again; the hourly dedup holds.
    tmux.respawn(
        CHILD_PANE,
        "printf 'Status: waiting for review\\n'; exec sleep 100000",
    );
    tmux.wait_for(CHILD_PANE, "waiting for review");
    let changed = world.once(T0 + 4300, &[]);
    assert_eq!(names(&changed, "waiting-patrol"), ["pane-changed"]);
    let at_threshold = world.once(T0 + 4900, &[]);
    assert_eq!(names(&at_threshold, "waiting-patrol"), ["unchanged"]);
    let past = world.once(T0 + 4901, &[]);
    assert_eq!(names(&past, "waiting-patrol"), ["nudge-deduped"]);
    // It runs again: forgotten.
    world
        .deck
        .script(&child_script("running", Some(&tmux.socket)));
    let running = world.once(T0 + 5000, &[]);
    assert_eq!(names(&running, "waiting-patrol"), ["forgotten"]);
    assert_eq!(world.deck.session_calls("send").len(), 2);
}

#[test]
#[ignore = "needs tmux"]
fn patrol_thresholds_and_socket_come_from_the_environment_and_config() {
    require_tmux();
    let mut world = World::new("patrol-env");
    world
        .var("WAITING_PATROL_THRESHOLD_S", "30")
        .var("WAITING_PATROL_NUDGE_DEDUP_S", "100");
    let tmux = TmuxServer::new(&world.tmp.path.join("tmux"));
    frozen_child(&tmux);
    // No socket in the JSON: the configured one (`-S` path) is used.
    let set = format!("deck.tmux_socket=\"{}\"", tmux.socket.display());
    world.deck.script(&child_script("waiting", None));
    for (dt, want) in [
        (0, "watching"),
        (30, "unchanged"),
        (31, "nudge"),
        (130, "nudge-deduped"),
        (131, "nudge"),
    ] {
        let tick = world.once(T0 + dt, &["--set", &set]);
        assert_eq!(names(&tick, "waiting-patrol"), [want], "at +{dt}");
    }
    assert_eq!(world.deck.session_calls("send").len(), 2);
    // Without the socket the pane cannot be read: no nudge, the tracker is kept.
    let tick = world.once(T0 + 300, &[]);
    assert_eq!(names(&tick, "waiting-patrol"), ["pane-unreadable"]);
}

#[test]
fn dry_run_runs_the_same_timelines_and_changes_nothing() {
    let server = telegram_server();
    let mut world = World::new("dry");
    let config = with_telegram(&mut world, &server).display().to_string();
    world.deck.script(&crashing_conductor_script());

    // On a fresh world: every run decides the first restart, performs nothing, writes nothing.
    for dt in [0, 60, 120] {
        let tick = world.once(T0 + dt, &["--config", &config, "--dry-run"]);
        assert_eq!(tick["dry_run"], true);
        assert!(names(&tick, "restart-guard").ends_with(&["recheck".into(), "restart".into()]));
        let restart = decision(&tick, "restart");
        assert_eq!(restart["action"]["dry_run"], true);
        assert!(restart["reason"].as_str().unwrap().contains("1 of 3"));
        assert_eq!(tick["actions"][0]["performed"], false);
    }
    assert!(world.deck.session_calls("restart").is_empty());
    assert!(!world.root().join("watchdog").exists(), "no log written");
    assert!(!world.db().exists(), "no store created");
    assert!(!world.tmp.path.join("state").exists());

    // Real runs, with dry runs in between: the dry runs reach the real decisions and consume
    // nothing (no restart slot, no escalation, no message, no log line).
    world.once(T0, &["--config", &config]);
    world.once(T0 + 60, &["--config", &config]);
    let db_before = std::fs::read(world.db()).unwrap();
    let dry = world.once(T0 + 120, &["--config", &config, "--dry-run"]);
    assert!(
        decision(&dry, "restart")["reason"]
            .as_str()
            .unwrap()
            .contains("3 of 3")
    );
    let real = world.once(T0 + 120, &["--config", &config]);
    assert!(
        decision(&real, "restart")["reason"]
            .as_str()
            .unwrap()
            .contains("3 of 3")
    );
    let dry = world.once(T0 + 180, &["--config", &config, "--dry-run"]);
    assert_eq!(names(&dry, "restart-guard"), ["restart-limit-escalated"]);
    assert_eq!(dry["escalations"][0]["deliveries"][0]["result"], "dry_run");
    assert!(server.requests().is_empty(), "a dry run sends nothing");
    assert!(world.log("escalations.log").is_empty());
    let real = world.once(T0 + 180, &["--config", &config]);
    assert_eq!(names(&real, "restart-guard"), ["restart-limit-escalated"]);
    assert_eq!(server.requests().len(), 1);
    assert_eq!(world.deck.session_calls("restart").len(), 3);
    assert_eq!(world.log("restart.log").len(), 3);
    assert_ne!(
        std::fs::read(world.db()).unwrap(),
        db_before,
        "real runs save"
    );
}

/// The patrol part of `dry_run_runs_the_same_timelines_and_changes_nothing`.
#[test]
#[ignore = "needs tmux"]
fn dry_run_patrol_decides_the_nudge_and_sends_nothing() {
    require_tmux();
    let world = World::new("dry-patrol");
    let tmux = TmuxServer::new(&world.tmp.path.join("tmux"));
    frozen_child(&tmux);
    world
        .deck
        .script(&child_script("waiting", Some(&tmux.socket)));
    world.once(T0, &[]);
    let dry = world.once(T0 + 601, &["--dry-run"]);
    assert_eq!(names(&dry, "waiting-patrol"), ["nudge"]);
    assert_eq!(decision(&dry, "nudge")["action"]["dry_run"], true);
    assert!(world.deck.session_calls("send").is_empty());
    assert!(world.log("patrol.log").is_empty());
    let real = world.once(T0 + 601, &[]);
    assert_eq!(names(&real, "waiting-patrol"), ["nudge"]);
    assert_eq!(world.deck.session_calls("send").len(), 1);
}

#[test]
fn session_ids_and_titles_cannot_inject_anything() {
    let mut world = World::new("inject");
    let odd_id = "c0ffee00-1790000000'; touch PWNED; echo \"$(touch PWNED2)\" `touch PWNED3` x\ny";
    let odd_title = "conductor-a b;c'd\"e\n$(touch PWNED4)";
    let odd_profile = "my profile; touch PWNED5";
    world.var("AGENT_DECK_PROFILE", odd_profile);
    let shown = json!({"id": odd_id, "title": odd_title, "status": "error", "group": "conductor",
                       "parent_session_id": ""});
    let dashed = json!({"id": "--all", "title": "conductor-x", "group": "conductor"});
    world.deck.script(
        &DeckScript::new()
            .list(&json!([{"id": odd_id, "title": odd_title, "group": "conductor"}, dashed]))
            .show(odd_id, &shown)
            .show(
                "--all",
                &json!({"id": "--all", "status": "error", "group": "conductor"}),
            ),
    );
    let tick = world.once(T0, &[]);
    assert!(
        names(&tick, "restart-guard").ends_with(&["restart".into(), "restart-succeeded".into()])
    );
    // The id travelled as one argv element, byte for byte; the profile too.
    assert_eq!(
        world.deck.session_calls("restart"),
        [vec![
            "-p",
            odd_profile,
            "session",
            "restart",
            odd_id,
            "--json"
        ]]
    );
    // An id agent-deck would read as an option (`session restart --all`) never reaches it.
    for argv in world.deck.calls() {
        let rest = if argv[0] == "-p" {
            &argv[2..]
        } else {
            &argv[..]
        };
        if rest[0] != "list" {
            assert!(!argv.contains(&"--all".to_owned()), "{argv:?}");
        }
    }
    assert!(tick["problems"][0].as_str().unwrap().contains("--all"));
    for n in ["PWNED", "PWNED2", "PWNED3", "PWNED4", "PWNED5"] {
        assert!(!world.tmp.path.join(n).exists(), "{n}");
        assert!(!world.deck.dir().join(n).exists(), "{n}");
    }
    // The restart log holds the id intact (JSON-escaped), one record per line.
    let log = world.log("restart.log");
    assert_eq!(log.len(), 1);
    assert_eq!(log[0]["id"], odd_id);
    assert_eq!(log[0]["title"], odd_title);
}

#[test]
fn a_hostile_title_in_an_escalation_reaches_neither_the_terminal_nor_a_new_line() {
    let world = World::new("hostile-title");
    let title = "conductor-\u{1b}]0;owned\u{7}\nforged line\u{9b}31m";
    let mut held = conductor_shown(COND, "error");
    held["title"] = json!(title);
    held["auth_hold"] = json!({"reason": "auth_death\nforged reason"});
    let mut listed = conductor_listed(COND);
    listed["title"] = json!(title);
    world
        .deck
        .script(&DeckScript::new().list(&json!([listed])).show(COND, &held));
    let run = world.run(&["--once", "--now", &T0.to_string()]);
    assert_eq!(run.code(), Some(0), "{}", run.stderr());
    for (name, text) in [("stdout", run.stdout()), ("stderr", run.stderr())] {
        assert!(
            !text.chars().any(|c| c.is_control() && c != '\n'),
            "a control character reached {name}: {text:?}"
        );
        assert!(
            !text.lines().any(|l| l.starts_with("forged")),
            "a forged {name} line: {text}"
        );
    }
    assert!(
        run.stdout().contains("escalation auth-hold"),
        "{}",
        run.stdout()
    );
}

#[test]
fn spec_environment_variables_all_work() {
    let mut world = World::new("env");
    // AGENT_DECK_BIN: the stand-in is not on PATH.
    world.on_path = false;
    let bin = world.deck.bin.display().to_string();
    world
        .var("AGENT_DECK_BIN", &bin)
        .var("AGENT_DECK_PROFILE", "work")
        .var("MIN_GLOBAL_RESTART_INTERVAL_S", "10");
    // AGENT_DECK_ROOT: the opt-in flag file under it makes a plain worker restartable.
    let flags = world.root().join("watchdog/autorestart");
    std::fs::create_dir_all(&flags).unwrap();
    std::fs::write(flags.join("w-work-1"), "").unwrap();
    world.deck.script(
        &DeckScript::new()
            .list(&json!([
                {"id": "c-personal-1", "title": "conductor-home", "group": "conductor", "profile": "personal"},
                {"id": "c-work-1", "title": "conductor-office", "group": "conductor", "profile": "work"},
                {"id": "w-work-1", "title": "build-worker", "group": "builds"},
            ]))
            .show("c-personal-1", &json!({"id": "c-personal-1", "status": "error", "group": "conductor"}))
            .show("c-work-1", &json!({"id": "c-work-1", "title": "conductor-office", "status": "error", "group": "conductor", "profile": "work"}))
            .show("w-work-1", &json!({"id": "w-work-1", "title": "build-worker", "status": "error", "group": "builds"})),
    );
    let first = world.once(T0, &[]);
    let second = world.once(T0 + 10, &[]);
    let third = world.once(T0 + 20, &[]);
    // Only the work profile is watched; the session listed without a profile gets `-p work`.
    assert_eq!(first["sessions"].as_array().unwrap().len(), 2);
    for argv in world.deck.calls().iter().skip(1) {
        assert!(argv[0] == "list" || argv[..2] == ["-p", "work"], "{argv:?}");
    }
    // MIN_GLOBAL_RESTART_INTERVAL_S=10: the second restart 10 s after the first, not 60.
    let restarted = |t: &Value| t["actions"][0]["session"].as_str().map(str::to_owned);
    assert_eq!(restarted(&first).as_deref(), Some("c-work-1"));
    assert_eq!(restarted(&second).as_deref(), Some("w-work-1"));
    assert!(
        decision(&second, "restart")["reason"]
            .as_str()
            .unwrap()
            .contains("opt-in flag")
    );
    // And 20 s after the first, the conductor is still in its 60 s quiet period.
    assert!(third["actions"].as_array().unwrap().is_empty());
    assert_eq!(world.deck.session_calls("restart").len(), 2);
    assert_eq!(
        world.log("restart.log").len(),
        2,
        "logs under AGENT_DECK_ROOT"
    );

    // The same timeline with the default spacing defers the worker at +10.
    let mut world2 = World::new("env-default");
    world2.var("AGENT_DECK_PROFILE", "work");
    let flags = world2.root().join("watchdog/autorestart");
    std::fs::create_dir_all(&flags).unwrap();
    std::fs::write(flags.join("w-work-1"), "").unwrap();
    world2.deck.script(&DeckScript::new()
        .list(&json!([
            {"id": "c-work-1", "title": "conductor-office", "group": "conductor", "profile": "work"},
            {"id": "w-work-1", "title": "build-worker", "group": "builds"},
        ]))
        .show("c-work-1", &json!({"id": "c-work-1", "status": "error", "group": "conductor"}))
        .show("w-work-1", &json!({"id": "w-work-1", "status": "error", "group": "builds"})));
    world2.once(T0, &[]);
    let deferred = world2.once(T0 + 10, &[]);
    assert!(deferred["actions"].as_array().unwrap().is_empty());
    assert_eq!(
        names(&deferred, "restart-guard"),
        ["quiet-after-restart", "deferred"]
    );
}

/// The live conductor's poller: a real process with `bun … telegram` in its command line and
/// `TELEGRAM_STATE_DIR` in its environment, running once this returns.
fn live_poller(live_state: &Path) -> std::process::Child {
    let mut poller = Command::new("python3")
        .args([
            "-c",
            "import time; print('ready', flush=True); time.sleep(120)",
            "bun",
            "run",
            "telegram",
        ])
        .env("TELEGRAM_STATE_DIR", live_state)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until the poller runs: before its exec the command line is still the launcher's.
    let mut ready = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(poller.stdout.take().unwrap()),
        &mut ready,
    )
    .unwrap();
    assert_eq!(ready.trim(), "ready");
    poller
}

#[test]
fn a_deaf_conductor_is_restarted_once_per_poller_dedup() {
    let mut world = World::new("poller");
    world.var("POLLER_RESTART_DEDUP_S", "120");
    let root = world.root();
    std::fs::create_dir_all(&root).unwrap();
    let deaf_state = world.tmp.path.join("tg-deaf");
    let live_state = world.tmp.path.join("tg-live");
    std::fs::write(
        root.join("deaf.env"),
        format!("export TELEGRAM_STATE_DIR=\"{}\"\n", deaf_state.display()),
    )
    .unwrap();
    std::fs::write(
        root.join("live.env"),
        format!("TELEGRAM_STATE_DIR={}\n", live_state.display()),
    )
    .unwrap();
    std::fs::write(
        root.join("config.toml"),
        format!(
            "[conductors.deaf.claude]\nenv_file = \"{}\"\n[conductors.live.claude]\nenv_file = \"{}\"\n",
            root.join("deaf.env").display(),
            root.join("live.env").display()
        ),
    )
    .unwrap();
    let mut poller = live_poller(&live_state);
    let conductor = |id: &str, name: &str| {
        json!({"id": id, "title": format!("conductor-{name}"), "group": "conductor",
               "status": "waiting", "profile": "personal",
               "channels": ["plugin:telegram@claude-plugins-official"]})
    };
    world.deck.script(
        &DeckScript::new()
            .list(&json!([
                {"id": "c-deaf", "title": "conductor-deaf", "group": "conductor", "profile": "personal"},
                {"id": "c-live", "title": "conductor-live", "group": "conductor", "profile": "personal"},
            ]))
            .show("c-deaf", &conductor("c-deaf", "deaf"))
            .show("c-live", &conductor("c-live", "live")),
    );
    let ticks: Vec<Value> = [0, 61, 121]
        .iter()
        .map(|dt| world.once(T0 + dt, &[]))
        .collect();
    let _ = poller.kill();
    let _ = poller.wait();
    assert_eq!(ticks[0]["actions"][0]["trigger"], "poller-missing");
    assert_eq!(names(&ticks[1], "restart-guard"), ["poller-dedup"]);
    assert_eq!(ticks[2]["actions"][0]["session"], "c-deaf");
    let restarts = world.deck.session_calls("restart");
    assert_eq!(restarts.len(), 2);
    assert!(restarts.iter().all(|argv| argv[4] == "c-deaf"));
    let live = ticks[0]["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == "c-live")
        .unwrap();
    assert_eq!(live["pollers"], 1);
    // watchdog.log: the dedupe decision once, when it began (statuses never changed).
    let log = world.log("watchdog.log");
    assert_eq!(log.len(), 1, "{log:#?}");
    assert_eq!(log[0]["event"], "dedupe");
    assert_eq!(log[0]["decision"], "poller-dedup");
    assert_eq!(log[0]["session"], "c-deaf");
    assert_eq!(log[0]["ts"], T0 + 61);
}

#[test]
fn watchdog_log_has_transitions_and_verbose_ticks_and_restart_log_says_why_it_was_critical() {
    let world = World::new("watchdog-log");
    let script = |cond: &str, worker: Option<&str>| {
        let mut listed = vec![conductor_listed(COND)];
        let mut script = DeckScript::new().show(COND, &conductor_shown(COND, cond));
        if let Some(status) = worker {
            listed.push(worker_listed());
            script = script.show(WORKER, &worker_shown(status));
        }
        world.deck.script(&script.list(&json!(listed)));
    };
    script("running", Some("running"));
    world.once(T0, &[]);
    assert!(world.log("watchdog.log").is_empty(), "nothing changed yet");
    // The conductor crashes: one transition, and a restart that says why.
    script("error", Some("running"));
    world.once(T0 + 15, &[]);
    let log = world.log("watchdog.log");
    assert_eq!(log.len(), 1, "{log:#?}");
    assert_eq!(
        (
            &log[0]["event"],
            &log[0]["session"],
            &log[0]["from"],
            &log[0]["to"]
        ),
        (
            &json!("transition"),
            &json!(COND),
            &json!("running"),
            &json!("error")
        )
    );
    assert_eq!(log[0]["title"], "conductor-travel");
    let restarts = world.log("restart.log");
    assert_eq!(restarts.len(), 1);
    assert_eq!(restarts[0]["critical"], "conductor- title");
    let why = restarts[0]["why"].as_str().unwrap();
    assert!(
        why.contains("in error for") && why.contains("critical: conductor- title"),
        "{why}"
    );
    // Back up, the worker gone from the listing, and --verbose: a line for the tick too.
    script("running", None);
    world.once(T0 + 90, &["--verbose"]);
    let log = world.log("watchdog.log");
    let events: Vec<(&str, &str, &str)> = log[1..]
        .iter()
        .map(|r| {
            (
                r["event"].as_str().unwrap(),
                r["session"].as_str().unwrap_or(""),
                r["to"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(
        events,
        // Sessions in id order.
        [
            ("transition", WORKER, "gone"),
            ("transition", COND, "running"),
            ("tick", "", "")
        ]
    );
    assert_eq!(log[3]["sessions"], 1);
    assert_eq!(log[3]["ts"], T0 + 90);
    // A dry run writes none of it.
    world.once(T0 + 120, &["--dry-run", "--verbose"]);
    assert_eq!(world.log("watchdog.log").len(), 4);
}

#[test]
fn corrupt_state_is_set_aside_and_the_guard_starts_clean() {
    let world = World::new("corrupt");
    world.deck.script(&crashing_conductor_script());
    world.once(T0, &[]);
    // Quiet period: nothing at +30 with the state intact.
    let quiet = world.once(T0 + 30, &[]);
    assert!(quiet["actions"].as_array().unwrap().is_empty());
    let db = world.db().display().to_string();
    let sql = |statement: &str| {
        let out = Command::new("python3")
            .args([
                "-c",
                "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); r=c.execute(sys.argv[2]).fetchall(); c.commit(); print('\\n'.join(str(x[0]) for x in r))",
                &db,
                statement,
            ])
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    sql("UPDATE agentwatch_state SET value = '{not json' WHERE key = 'deck.restart-guard'");
    let run = world.run(&["--once", "--json", "--now", &(T0 + 31).to_string()]);
    assert_eq!(run.code(), Some(0), "{}", run.stderr());
    // One run, one pretty document (as every command's --json); the daemon streams JSON lines.
    assert!(run.stdout().starts_with("{\n  \""), "{}", run.stdout());
    assert!(
        run.stderr()
            .contains("warning=state state=deck.restart-guard"),
        "{}",
        run.stderr()
    );
    assert!(run.stderr().contains("start_clean"));
    // Clean state: no quiet period remembered, so it restarts.
    assert_eq!(run.json()["actions"][0]["result"], "restarted");
    let keys = sql("SELECT key FROM agentwatch_state ORDER BY key");
    assert!(
        keys.contains(&format!("deck.restart-guard.corrupt.{}", T0 + 31)),
        "{keys}"
    );
}

#[test]
fn empty_and_unreadable_answers_are_handled() {
    let world = World::new("empty");
    for answer in [
        "null",
        "No profiles found.\n",
        "No sessions found in profile 'default'.\n",
    ] {
        world
            .deck
            .script(&DeckScript::new().list_answer(Answer::text(answer, 0)));
        let tick = world.once(T0, &[]);
        assert!(tick["sessions"].as_array().unwrap().is_empty(), "{answer}");
        assert!(tick["problems"].as_array().unwrap().is_empty(), "{answer}");
    }
    // `session show` answering `null`, plain text, or not found: status unknown, nothing done.
    world.deck.script(
        &DeckScript::new()
            .list(&json!([
                conductor_listed("c-null"),
                conductor_listed("c-text"),
                conductor_listed("c-gone")
            ]))
            .answers("show", "c-null", vec![Answer::text("null", 0)])
            .answers(
                "show",
                "c-text",
                vec![Answer::text("Session details unavailable", 0)],
            ),
    );
    let tick = world.once(T0 + 1, &[]);
    let shown: Vec<&str> = tick["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["shown"].as_str().unwrap())
        .collect();
    assert_eq!(shown[0], "no answer: null");
    assert!(shown[1].starts_with("no answer: plain text"));
    assert!(shown[2].starts_with("not found"));
    assert!(tick["actions"].as_array().unwrap().is_empty());

    // A failing `list`: reported, exit 69, the patrol keeps its trackers.
    world
        .deck
        .script(&DeckScript::new().list_answer(Answer::text("Error: storage locked\n", 1)));
    let run = world.run(&["--once", "--json", "--now", &(T0 + 2).to_string()]);
    assert_eq!(run.code(), Some(69));
    let tick = run.json();
    assert!(
        tick["problems"][0]
            .as_str()
            .unwrap()
            .contains("storage locked")
    );
    assert_eq!(names(&tick, "waiting-patrol"), ["listing-unavailable"]);
    // No agent-deck at all.
    let mut world = World::new("missing");
    world.on_path = false;
    world.var("AGENT_DECK_BIN", "/nonexistent/agent-deck");
    let run = world.run(&["--once", "--now", &T0.to_string()]);
    assert_eq!(run.code(), Some(69));
    assert!(run.stderr().contains("not found"), "{}", run.stderr());
}

#[test]
fn a_second_run_exits_75_and_now_needs_once() {
    let world = World::new("lock");
    world.deck.script(&crashing_conductor_script());
    world.once(T0, &[]);
    let lock = world
        .tmp
        .path
        .join("state/agentwatch/.agentwatch.db.deck.lock");
    let mut holder = Command::new("python3")
        .args([
            "-c",
            "import fcntl,sys,time; f=open(sys.argv[1],'a'); fcntl.flock(f, fcntl.LOCK_EX); print('locked', flush=True); time.sleep(60)",
            lock.to_str().unwrap(),
        ])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(holder.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    assert_eq!(line.trim(), "locked");
    let run = world.run(&["--once", "--now", &(T0 + 60).to_string()]);
    // A dry run takes no lock: it writes nothing.
    let dry = world.run(&["--once", "--dry-run", "--now", &(T0 + 60).to_string()]);
    let _ = holder.kill();
    let _ = holder.wait();
    assert_eq!(run.code(), Some(75), "{}", run.stderr());
    assert!(run.stderr().contains("another agentwatch deck run holds"));
    assert_eq!(dry.code(), Some(0), "{}", dry.stderr());
    assert_eq!(world.deck.session_calls("restart").len(), 1);

    let run = world.run(&["--now", &T0.to_string()]);
    assert_eq!(run.code(), Some(64));
}

/// Issue 50: the daemon stops cleanly on SIGTERM or SIGINT between its ticks, as `run` does:
/// exit 0, the tick's states in the store, and a `daemon=stop` line saying why.
#[test]
fn the_daemon_stops_on_sigterm_or_sigint_with_its_state_written() {
    use agentwatch_runtime::jobs::deck::{ALERT_STATE_KEY, GUARD_STATE_KEY, SEEN_STATE_KEY};
    use std::io::BufRead;
    for signal in ["TERM", "INT"] {
        let world = World::new(&format!("signal-{signal}"));
        world.config("[deck]\ninterval_s = 3600\n");
        world.deck.script(&crashing_conductor_script());
        let mut child = world
            .command(&["--json"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // A tick's report is printed once the tick is stored; the daemon then waits an hour.
        let mut first = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut first)
            .unwrap();
        let tick: Value = serde_json::from_str(&first).unwrap_or_else(|e| panic!("{e}: {first}"));
        assert!(tick["sessions"].is_array(), "{tick}");
        let status = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(child.id().to_string())
            .status()
            .unwrap();
        assert!(status.success(), "kill -{signal}");
        let out = child.wait_with_output().unwrap();
        let journal = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "SIG{signal}: {journal}");
        assert!(
            journal.contains("daemon=stop") && journal.contains("reason=signal"),
            "SIG{signal}: {journal}"
        );
        let store = agentwatch_store::Store::open_read_only(&world.db()).unwrap();
        for key in [GUARD_STATE_KEY, ALERT_STATE_KEY, SEEN_STATE_KEY] {
            assert!(
                store.load_state(key).unwrap().is_some(),
                "SIG{signal}: no {key} state: {journal}"
            );
        }
    }
}
