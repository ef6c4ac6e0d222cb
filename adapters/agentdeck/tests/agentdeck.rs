//! The adapter against real parts: a real tmux server on private sockets, the scripted
//! agent-deck stand-in, real processes in /proc.

use agentwatch_agentdeck::cli::{AgentDeck, DeckError, Shown};
use agentwatch_agentdeck::pollers;
use agentwatch_agentdeck::tmux::{Socket, Tmux, TmuxError, pane_hash};
use agentwatch_testkit::TempDir;
use agentwatch_testkit::agentdeck::{
    AgentDeckStandIn, Answer, DeckScript, TmuxServer, require_tmux,
};
use recovery_policy::restart_guard::RestartReply;
use serde_json::json;
use std::process::Command;
use std::time::Duration;

#[test]
#[ignore = "needs tmux"]
fn capture_pane_on_a_private_socket_and_hash_it() {
    require_tmux();
    let tmp = TempDir::new("aw-ad-tmux");
    let server = TmuxServer::new(&tmp.path);
    server.new_session(
        "agentdeck_child_1a2b",
        "printf 'Proceed with the migration? (y/n)\\n'; exec sleep 600",
    );
    // A session whose name the first one's is a prefix of: an exact target never picks it.
    server.new_session(
        "agentdeck_child_1a2b3c",
        "printf 'other pane\\n'; exec sleep 600",
    );
    let shown = server.wait_for("agentdeck_child_1a2b", "Proceed with the migration?");
    server.wait_for("agentdeck_child_1a2b3c", "other pane");

    let tmux = Tmux::default();
    let socket = Socket::Path(server.socket.clone());
    let text = tmux.capture_pane(&socket, "agentdeck_child_1a2b").unwrap();
    assert_eq!(text, shown);
    assert_eq!(pane_hash(&text), pane_hash(&shown));
    assert_eq!(pane_hash(&text).len(), 64);
    // Same pane, same hash; the other session's pane differs.
    let again = tmux.capture_pane(&socket, "agentdeck_child_1a2b").unwrap();
    assert_eq!(pane_hash(&again), pane_hash(&text));
    let other = tmux
        .capture_pane(&socket, "agentdeck_child_1a2b3c")
        .unwrap();
    assert_ne!(pane_hash(&other), pane_hash(&text));
    // The hash is SHA-256 of exactly what tmux printed (python's hashlib agrees).
    let python = Command::new("python3")
        .args([
            "-c",
            "import hashlib,sys; print(hashlib.sha256(sys.argv[1].encode()).hexdigest())",
            &text,
        ])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&python.stdout).trim(),
        pane_hash(&text)
    );

    // A pane that changes hashes differently.
    server.respawn(
        "agentdeck_child_1a2b",
        "printf 'done, waiting\\n'; exec sleep 600",
    );
    server.wait_for("agentdeck_child_1a2b", "done, waiting");
    let changed = tmux.capture_pane(&socket, "agentdeck_child_1a2b").unwrap();
    assert_ne!(pane_hash(&changed), pane_hash(&text));

    // A prefix of a session name is not a session; a wrong socket has no server.
    assert!(matches!(
        tmux.capture_pane(&socket, "agentdeck_child"),
        Err(TmuxError::Failed { .. })
    ));
    let nowhere = Socket::Path(tmp.path.join("no-server.sock"));
    assert!(matches!(
        tmux.capture_pane(&nowhere, "agentdeck_child_1a2b"),
        Err(TmuxError::Failed { .. })
    ));
    // No tmux binary at all.
    let missing = Tmux {
        program: tmp.path.join("no-tmux-here"),
        timeout: Duration::from_secs(5),
    };
    assert!(matches!(
        missing.capture_pane(&socket, "agentdeck_child_1a2b"),
        Err(TmuxError::NotFound { .. })
    ));
}

#[test]
#[ignore = "needs tmux"]
fn capture_pane_on_a_named_socket() {
    require_tmux();
    let name = format!("aw-ad-test-{}", std::process::id());
    let tmux = |args: &[&str]| {
        Command::new("tmux")
            .args(["-L", &name])
            .args(args)
            .env_remove("TMUX")
            .output()
            .unwrap()
    };
    struct Kill<'a>(&'a dyn Fn(&[&str]) -> std::process::Output);
    impl Drop for Kill<'_> {
        fn drop(&mut self) {
            (self.0)(&["kill-server"]);
        }
    }
    let _kill = Kill(&tmux);
    let out = tmux(&[
        "new-session",
        "-d",
        "-s",
        "agentdeck_named_9f",
        "-x",
        "80",
        "-y",
        "24",
        "printf 'named socket pane\\n'; exec sleep 600",
    ]);
    assert!(out.status.success(), "{out:?}");
    let socket = Socket::parse(&name);
    assert_eq!(socket, Socket::Name(name.clone()));
    let capture = Tmux::default();
    let mut text = String::new();
    for _ in 0..500 {
        text = capture.capture_pane(&socket, "agentdeck_named_9f").unwrap();
        if text.contains("named socket pane") {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(text.contains("named socket pane"), "{text:?}");
}

#[test]
fn cli_answers_and_argvs_through_the_stand_in() {
    let tmp = TempDir::new("aw-ad-cli");
    let stand_in = AgentDeckStandIn::install(&tmp.path.join("bin"));
    let odd = "x'; touch PWNED; echo \"$(id)\" \n next";
    stand_in.script(
        &DeckScript::new()
            .list(&json!([{"id": odd, "title": "t; rm -rf /", "profile": "work"}]))
            .show(odd, &json!({"id": odd, "status": "error", "title": "t"}))
            .restart(
                odd,
                &json!({"success": true, "skipped": true, "reason": "fresh", "id": odd}),
                0,
            )
            .send(
                odd,
                &json!({"success": false, "error": "session 't' is not running"}),
                1,
            ),
    );
    let deck = AgentDeck::new(&stand_in.bin);
    let listing = deck.list_all().unwrap();
    assert_eq!(listing.sessions[0].id, odd);
    let shown = deck.show(odd, Some("work")).unwrap();
    assert!(matches!(shown, Shown::Found(ref s) if s.status.as_deref() == Some("error")));
    assert_eq!(
        deck.restart(odd, Some("work")).unwrap(),
        RestartReply::Refused {
            reason: "fresh".into()
        }
    );
    let err = deck.send(odd, Some("work"), "report status?").unwrap_err();
    assert!(err.to_string().contains("is not running"), "{err}");
    assert_eq!(
        stand_in.calls(),
        vec![
            vec!["list", "--all", "--json"],
            vec!["-p", "work", "session", "show", odd, "--json"],
            vec!["-p", "work", "session", "restart", odd, "--json"],
            vec![
                "-p",
                "work",
                "session",
                "send",
                odd,
                "report status?",
                "--no-wait"
            ],
        ]
    );
    assert!(!tmp.path.join("bin/PWNED").exists() && !std::path::Path::new("PWNED").exists());

    // Unknown ids, `null` and plain text.
    assert!(matches!(
        deck.show("nope", None).unwrap(),
        Shown::NotFound(_)
    ));
    stand_in.script(
        &DeckScript::new()
            .list_answer(Answer::text("No profiles found.\n", 0))
            .answers("show", "n", vec![Answer::text("null\n", 0)]),
    );
    assert!(deck.list_all().unwrap().sessions.is_empty());
    assert_eq!(deck.show("n", None).unwrap(), Shown::Empty("null".into()));

    // An id agent-deck would read as an option never reaches it.
    stand_in.clear_calls();
    assert!(matches!(
        deck.restart("--all", None),
        Err(DeckError::UnsafeArgument { .. })
    ));
    assert!(matches!(
        deck.show("x", Some("-x")),
        Err(DeckError::UnsafeArgument { .. })
    ));
    assert!(stand_in.calls().is_empty());

    // A missing binary, and one that hangs.
    let missing = AgentDeck::new(tmp.path.join("no-agent-deck"));
    assert!(matches!(
        missing.list_all(),
        Err(DeckError::NotFound { .. })
    ));
    let hang = tmp.path.join("hang");
    std::fs::write(&hang, "#!/bin/sh\nexec sleep 30\n").unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&hang, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let mut slow = AgentDeck::new(&hang);
    slow.timeout = Duration::from_millis(300);
    slow.restart_timeout = Duration::from_millis(300);
    assert!(matches!(slow.list_all(), Err(DeckError::Timeout { .. })));
    assert!(matches!(
        slow.restart("a-1", None).unwrap(),
        RestartReply::Failed { error } if error.contains("no answer")
    ));
}

#[test]
fn pollers_are_found_in_proc_with_their_state_dir() {
    let tmp = TempDir::new("aw-ad-poller");
    let state_dir = tmp.path.join("telegram-state");
    // A stand-in poller: a real process whose command line reads `… bun … telegram …`.
    let mut child = Command::new("python3")
        .args([
            "-c",
            "import time; print('ready', flush=True); time.sleep(60)",
            "bun",
            "run",
            "telegram",
        ])
        .env("TELEGRAM_STATE_DIR", &state_dir)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Scan only once the poller runs: before its exec the command line is still the launcher's.
    let mut ready = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.take().unwrap()),
        &mut ready,
    )
    .unwrap();
    assert_eq!(ready.trim(), "ready");
    let found = pollers::scan(std::path::Path::new("/proc"));
    let _ = child.kill();
    let _ = child.wait();
    let mine: Vec<_> = found.iter().filter(|p| p.pid == child.id()).collect();
    assert_eq!(mine.len(), 1, "{found:?}");
    assert_eq!(
        mine[0].state_dir.as_deref(),
        Some(state_dir.to_str().unwrap())
    );
    assert_eq!(pollers::owning(&found, state_dir.to_str().unwrap()), 1);
    assert_eq!(
        pollers::owning(&found, tmp.path.join("other").to_str().unwrap()),
        0
    );
}
