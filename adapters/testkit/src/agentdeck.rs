//! Real parts for the agent-deck tests: a scripted `agent-deck` stand-in that answers each
//! subcommand from a JSON script and records every argv, and a private tmux server.
//!
//! The stand-in (python3) strips a leading `-p PROFILE`, then answers:
//! - `list …` with the script's `list` answer (default `null`);
//! - `session show ID …`, `session restart ID …`, `session send ID …` with the answer scripted
//!   for that exact ID (defaults: show → exit 2 `NOT_FOUND`; restart and send → success).
//!
//! An answer may be a list: the Nth call for that command and ID gets the Nth answer, the last
//! one repeating. The script is re-read on every call, so a test rewrites it between runs
//! ([`AgentDeckStandIn::script`] also resets the call counters).

use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// One scripted answer: what the stand-in prints and its exit code.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    pub stdout: String,
    pub stderr: String,
    pub exit: i32,
}

impl Answer {
    /// A JSON value printed, exit 0.
    pub fn json(value: &Value) -> Self {
        Self::text(&value.to_string(), 0)
    }

    /// Raw text printed, with an exit code.
    pub fn text(stdout: &str, exit: i32) -> Self {
        Self {
            stdout: stdout.to_owned(),
            stderr: String::new(),
            exit,
        }
    }

    fn to_value(&self) -> Value {
        json!({"stdout": self.stdout, "stderr": self.stderr, "exit": self.exit})
    }
}

/// The answers of one run of agent-deck, by subcommand and session id.
#[derive(Debug, Clone, Default)]
pub struct DeckScript {
    list: Option<Vec<Answer>>,
    by_id: Vec<(&'static str, String, Vec<Answer>)>,
}

impl DeckScript {
    pub fn new() -> Self {
        Self::default()
    }

    /// `list --all --json` prints these sessions.
    pub fn list(self, sessions: &Value) -> Self {
        self.list_answer(Answer::json(sessions))
    }

    /// `list --all --json` answers this.
    pub fn list_answer(mut self, answer: Answer) -> Self {
        self.list = Some(vec![answer]);
        self
    }

    /// `session show ID --json` prints this object.
    pub fn show(self, id: &str, detail: &Value) -> Self {
        self.answers("show", id, vec![Answer::json(detail)])
    }

    /// `session show ID --json`: one answer per call, the last repeating.
    pub fn show_seq(self, id: &str, details: &[Value]) -> Self {
        self.answers("show", id, details.iter().map(Answer::json).collect())
    }

    /// `session restart ID --json` prints this reply with this exit code.
    pub fn restart(self, id: &str, reply: &Value, exit: i32) -> Self {
        let mut answer = Answer::json(reply);
        answer.exit = exit;
        self.answers("restart", id, vec![answer])
    }

    /// `session send ID …` prints this reply with this exit code.
    pub fn send(self, id: &str, reply: &Value, exit: i32) -> Self {
        let mut answer = Answer::json(reply);
        answer.exit = exit;
        self.answers("send", id, vec![answer])
    }

    /// Any answers for `session COMMAND ID`.
    pub fn answers(mut self, command: &'static str, id: &str, answers: Vec<Answer>) -> Self {
        self.by_id.retain(|(c, i, _)| !(*c == command && i == id));
        self.by_id.push((command, id.to_owned(), answers));
        self
    }

    fn to_value(&self) -> Value {
        let mut script = json!({"show": {}, "restart": {}, "send": {}});
        if let Some(list) = &self.list {
            script["list"] = Value::Array(list.iter().map(Answer::to_value).collect());
        }
        for (command, id, answers) in &self.by_id {
            script[*command][id.as_str()] =
                Value::Array(answers.iter().map(Answer::to_value).collect());
        }
        script
    }
}

const SCRIPT: &str = r#"#!/usr/bin/env python3
import json, os, sys
here = os.path.dirname(os.path.realpath(__file__))
args = sys.argv[1:]
with open(os.path.join(here, 'agent-deck.argv'), 'a') as f:
    f.write(json.dumps(args) + '\n')
with open(os.path.join(here, 'agent-deck.script.json')) as f:
    script = json.load(f)
counts_path = os.path.join(here, 'agent-deck.counts.json')
try:
    with open(counts_path) as f:
        counts = json.load(f)
except (OSError, ValueError):
    counts = {}
rest = args[2:] if len(args) >= 2 and args[0] in ('-p', '--profile') else args

def answer(key, answers, default):
    if not answers:
        answers = [default]
    n = counts.get(key, 0)
    counts[key] = n + 1
    with open(counts_path, 'w') as f:
        json.dump(counts, f)
    a = answers[min(n, len(answers) - 1)]
    sys.stdout.write(a.get('stdout', ''))
    sys.stderr.write(a.get('stderr', ''))
    sys.exit(a.get('exit', 0))

if rest[:1] == ['list']:
    answer('list', script.get('list'), {'stdout': 'null', 'exit': 0})
if len(rest) >= 3 and rest[0] == 'session' and rest[1] in ('show', 'restart', 'send'):
    command, sid = rest[1], rest[2]
    defaults = {
        'show': {'stdout': json.dumps({'success': False, 'error': "session '%s' not found" % sid, 'code': 'NOT_FOUND'}), 'exit': 2},
        'restart': {'stdout': json.dumps({'success': True, 'id': sid, 'title': sid}), 'exit': 0},
        'send': {'stdout': json.dumps({'success': True, 'session_id': sid, 'delivery': 'submitted', 'submitted': True}), 'exit': 0},
    }
    answer(command + ':' + sid, script.get(command, {}).get(sid), defaults[command])
sys.stderr.write('Error: unknown command\n')
sys.exit(1)
"#;

/// A scripted `agent-deck` executable in a directory of its own.
#[derive(Debug)]
pub struct AgentDeckStandIn {
    /// The executable (named `agent-deck`).
    pub bin: PathBuf,
    dir: PathBuf,
}

impl AgentDeckStandIn {
    /// Installs `DIR/agent-deck` answering an empty script.
    pub fn install(dir: &Path) -> Self {
        std::fs::create_dir_all(dir).expect("stand-in dir");
        let bin = dir.join("agent-deck");
        std::fs::write(&bin, SCRIPT).expect("write agent-deck stand-in");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        }
        let stand_in = Self {
            bin,
            dir: dir.to_path_buf(),
        };
        stand_in.script(&DeckScript::new());
        stand_in
    }

    /// The directory holding the stand-in (to put first on `PATH`).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Replaces the script and resets the call counters.
    pub fn script(&self, script: &DeckScript) {
        let tmp = self.dir.join(".agent-deck.script.json.tmp");
        std::fs::write(&tmp, script.to_value().to_string()).expect("write script");
        std::fs::rename(&tmp, self.dir.join("agent-deck.script.json")).expect("rename script");
        let _ = std::fs::remove_file(self.dir.join("agent-deck.counts.json"));
    }

    /// Every argv recorded so far (without the program name).
    pub fn calls(&self) -> Vec<Vec<String>> {
        std::fs::read_to_string(self.dir.join("agent-deck.argv"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// The recorded argvs of `session COMMAND …` (`restart`, `send`, `show`).
    pub fn session_calls(&self, command: &str) -> Vec<Vec<String>> {
        self.calls()
            .into_iter()
            .filter(|argv| {
                let rest = match argv.first().map(String::as_str) {
                    Some("-p" | "--profile") => &argv[2.min(argv.len())..],
                    _ => &argv[..],
                };
                rest.len() >= 2 && rest[0] == "session" && rest[1] == command
            })
            .collect()
    }

    /// Forgets the recorded argvs.
    pub fn clear_calls(&self) {
        let _ = std::fs::remove_file(self.dir.join("agent-deck.argv"));
    }
}

/// Whether `tmux -V` runs.
pub fn tmux_available() -> bool {
    Command::new("tmux")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// For a test marked `#[ignore = "needs tmux"]` (CI runs them with `--include-ignored`): fails,
/// saying how to install it, when tmux does not run. Never a silent pass.
pub fn require_tmux() {
    assert!(
        tmux_available(),
        "this test needs tmux, but `tmux -V` does not run: apt-get install tmux (or `eval \"$(.ci/deps)\"`)"
    );
}

/// A tmux server on a private socket (`-S DIR/tmux.sock`), killed when dropped.
#[derive(Debug)]
pub struct TmuxServer {
    pub socket: PathBuf,
}

impl TmuxServer {
    /// A server whose socket lives in `dir`; it starts with the first session.
    pub fn new(dir: &Path) -> Self {
        std::fs::create_dir_all(dir).expect("tmux dir");
        Self {
            socket: dir.join("tmux.sock"),
        }
    }

    fn tmux(&self, args: &[&str]) -> std::process::Output {
        Command::new("tmux")
            .arg("-S")
            .arg(&self.socket)
            .args(args)
            .env_remove("TMUX")
            .output()
            .expect("run tmux")
    }

    /// `new-session -d -s NAME -x 80 -y 24 COMMAND`.
    pub fn new_session(&self, name: &str, command: &str) {
        let out = self.tmux(&[
            "new-session",
            "-d",
            "-s",
            name,
            "-x",
            "80",
            "-y",
            "24",
            command,
        ]);
        assert!(
            out.status.success(),
            "tmux new-session: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Replaces the pane's program (`respawn-pane -k`), which changes what the pane shows.
    pub fn respawn(&self, name: &str, command: &str) {
        let target = format!("={name}:");
        let out = self.tmux(&["respawn-pane", "-k", "-t", &target, command]);
        assert!(
            out.status.success(),
            "tmux respawn-pane: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// The pane's visible text.
    pub fn capture(&self, name: &str) -> String {
        let target = format!("={name}:");
        String::from_utf8_lossy(&self.tmux(&["capture-pane", "-p", "-t", &target]).stdout)
            .into_owned()
    }

    /// Waits (bounded, 10 s) until the pane shows `text`: a started program prints a moment later.
    pub fn wait_for(&self, name: &str, text: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let pane = self.capture(name);
            if pane.contains(text) {
                return pane;
            }
            assert!(
                Instant::now() < deadline,
                "tmux pane {name} never showed {text:?}; it shows {pane:?}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for TmuxServer {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .arg("-S")
            .arg(&self.socket)
            .arg("kill-server")
            .env_remove("TMUX")
            .output();
    }
}
