//! The agent-deck CLI: `list --all --json`, `session show ID --json`, `session restart ID --json`
//! and `session send ID MSG --no-wait`, each run as an argv with a timeout.
//!
//! Answers are read as agent-deck really prints them (agent-deck.md section 12): `list --all`
//! prints `null` when profiles exist but hold no sessions and the plain text `No profiles found.`
//! when there are none; `session show` exits 2 with `{"success":false,"code":"NOT_FOUND"}` for an
//! unknown id; any of them may print plain text where JSON was asked for.

use crate::process::{self, Output, RunError, head};
use recovery_policy::restart_guard::{RestartReply, clip};
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Where agent-deck's installer puts it; used when `agent-deck` is not on `PATH`.
pub const DEFAULT_BIN: &str = "/usr/local/bin/agent-deck";

/// How many characters of an answer an error keeps.
const QUOTED: usize = 300;

/// Why agent-deck gave no usable answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DeckError {
    /// The binary does not exist.
    #[error("{program}: not found ({message}); set AGENT_DECK_BIN or deck.bin")]
    NotFound { program: String, message: String },
    /// The binary exists but could not be started.
    #[error("{program}: could not start: {message}")]
    Spawn { program: String, message: String },
    /// No answer in time; the process was killed.
    #[error("{command}: no answer within {timeout:?}; killed")]
    Timeout { command: String, timeout: Duration },
    /// A non-zero exit (or `"success": false`).
    #[error("{command}: {status}: {message}")]
    Failed {
        command: String,
        status: String,
        message: String,
    },
    /// An answer that is not what the command prints.
    #[error("{command}: unreadable answer: {message}")]
    Unreadable { command: String, message: String },
    /// An argument agent-deck would read as an option (or cannot take at all); nothing was run.
    #[error("refusing to pass {what} {value:?} to agent-deck: {why}")]
    UnsafeArgument {
        what: &'static str,
        value: String,
        why: &'static str,
    },
}

/// Checks one argument taken from agent-deck's own output or the configuration before it goes
/// into an argv. An argv cannot be split or expanded, but agent-deck parses its own options: a
/// session id `--all` would turn `session restart ID` into `session restart --all`.
pub fn check_argument(what: &'static str, value: &str) -> Result<(), DeckError> {
    let why = if value.trim().is_empty() {
        Some("it is empty")
    } else if value.starts_with('-') {
        Some("it starts with '-', so agent-deck would read it as an option")
    } else if value.contains('\0') {
        Some("it contains a NUL byte")
    } else {
        None
    };
    match why {
        Some(why) => Err(DeckError::UnsafeArgument {
            what,
            value: value.to_owned(),
            why,
        }),
        None => Ok(()),
    }
}

/// An agent-deck `auth_hold` (HEAD): the session exited on an auth failure; restarts are held.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AuthHoldInfo {
    pub reason: String,
}

/// One session as `list --all --json` or `session show --json` describes it. Fields the emitter
/// leaves out are `None` / empty.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SessionInfo {
    pub id: String,
    pub title: String,
    /// `group`, else `group_path`.
    pub group: Option<String>,
    pub profile: Option<String>,
    /// Empty strings read as `None`.
    pub parent_session_id: Option<String>,
    /// `running`, `waiting`, `idle`, `error`, `stopped`, `queued` or `unknown` (absent from
    /// `list --all`).
    pub status: Option<String>,
    pub substate: Option<String>,
    /// `is_conductor` / `IsConductor` (agent-deck's JSON leaves it out today).
    pub is_conductor: bool,
    pub channels: Vec<String>,
    /// The tmux session name.
    pub tmux_session: Option<String>,
    /// The session's own tmux socket, when the JSON names one (`tmux_socket`,
    /// `tmux_socket_name`, `TmuxSocketName`): a path (`-S`) or a name (`-L`).
    pub tmux_socket: Option<String>,
    /// Present while agent-deck holds the session for an auth failure.
    pub auth_hold: Option<AuthHoldInfo>,
    /// `env_file` (read by agent-deck's own watchdog; not emitted by the CLI today).
    pub env_file: Option<String>,
}

fn text_of(object: &Map<String, Value>, keys: &[&str]) -> Option<String> {
    keys.iter()
        .filter_map(|k| object.get(*k).and_then(Value::as_str))
        .map(str::trim)
        .find(|s| !s.is_empty())
        .map(str::to_owned)
}

impl SessionInfo {
    /// Reads one session object; `None` without a non-empty string `id`.
    pub fn from_value(value: &Value) -> Option<Self> {
        let object = value.as_object()?;
        let id = object.get("id")?.as_str()?.to_owned();
        if id.is_empty() {
            return None;
        }
        let truthy = |key: &str| match object.get(key) {
            Some(Value::Bool(b)) => *b,
            Some(Value::Number(n)) => n.as_i64().is_some_and(|n| n != 0),
            Some(Value::String(s)) => s.eq_ignore_ascii_case("true"),
            _ => false,
        };
        let auth_hold = match object.get("auth_hold") {
            Some(Value::Object(hold)) if !hold.is_empty() => Some(AuthHoldInfo {
                reason: text_of(hold, &["reason"]).unwrap_or_default(),
            }),
            _ => None,
        };
        Some(Self {
            id,
            title: text_of(object, &["title"]).unwrap_or_default(),
            group: text_of(object, &["group", "group_path"]),
            profile: text_of(object, &["profile"]),
            parent_session_id: text_of(object, &["parent_session_id"]),
            status: text_of(object, &["status"]),
            substate: text_of(object, &["substate"]),
            is_conductor: truthy("is_conductor") || truthy("IsConductor"),
            channels: object
                .get("channels")
                .and_then(Value::as_array)
                .map(|list| {
                    list.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_owned)
                        .collect()
                })
                .unwrap_or_default(),
            tmux_session: text_of(object, &["tmux_session"]),
            tmux_socket: text_of(
                object,
                &["tmux_socket", "tmux_socket_name", "TmuxSocketName"],
            ),
            auth_hold,
            env_file: text_of(object, &["env_file"]),
        })
    }

    /// `title (id)`, or the id alone.
    pub fn label(&self) -> String {
        if self.title.is_empty() {
            self.id.clone()
        } else {
            format!("{} ({})", self.title, self.id)
        }
    }
}

/// What `list --all --json` answered.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Listing {
    pub sessions: Vec<SessionInfo>,
    /// Entries without a usable `id`, skipped.
    pub skipped_entries: usize,
    /// Why the list is empty when agent-deck said so in words or with `null`.
    pub note: Option<String>,
}

/// Reads the answer of `agent-deck list --all --json`.
pub fn parse_list(output: &Output) -> Result<Listing, DeckError> {
    const COMMAND: &str = "list --all --json";
    let text = output.stdout.trim();
    if output.code != Some(0) {
        return Err(DeckError::Failed {
            command: COMMAND.to_owned(),
            status: output.status(),
            message: answer_head(output),
        });
    }
    if text.starts_with("No profiles found") || text.starts_with("No sessions found") {
        return Ok(Listing {
            note: Some(head(text, QUOTED)),
            ..Listing::default()
        });
    }
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Null) => Ok(Listing {
            note: Some("null (no sessions in any profile)".to_owned()),
            ..Listing::default()
        }),
        Ok(Value::Array(items)) => {
            let sessions: Vec<SessionInfo> =
                items.iter().filter_map(SessionInfo::from_value).collect();
            Ok(Listing {
                skipped_entries: items.len() - sessions.len(),
                sessions,
                note: None,
            })
        }
        Ok(other) => Err(DeckError::Unreadable {
            command: COMMAND.to_owned(),
            message: format!("expected a JSON list, got {}", head(&other.to_string(), 80)),
        }),
        Err(_) if text.is_empty() => Err(DeckError::Unreadable {
            command: COMMAND.to_owned(),
            message: "empty answer".to_owned(),
        }),
        Err(e) => Err(DeckError::Unreadable {
            command: COMMAND.to_owned(),
            message: format!("not JSON ({e}): {}", head(text, QUOTED)),
        }),
    }
}

/// What `session show ID --json` answered.
#[derive(Debug, Clone, PartialEq)]
pub enum Shown {
    Found(Box<SessionInfo>),
    /// Exit 2 / `NOT_FOUND`: agent-deck does not know the id (any more).
    NotFound(String),
    /// `null`, an empty answer or plain text where JSON was asked for: nothing to read.
    Empty(String),
}

/// Reads the answer of `agent-deck session show ID --json`.
pub fn parse_show(output: &Output) -> Result<Shown, DeckError> {
    const COMMAND: &str = "session show --json";
    let text = output.stdout.trim();
    if let Ok(Value::Object(object)) = serde_json::from_str::<Value>(text) {
        let failed = object.get("success").and_then(Value::as_bool) == Some(false)
            || object.contains_key("error") && !object.contains_key("id");
        if failed {
            let message = text_of(&object, &["error"]).unwrap_or_else(|| head(text, QUOTED));
            if output.code == Some(2) || text_of(&object, &["code"]).as_deref() == Some("NOT_FOUND")
            {
                return Ok(Shown::NotFound(message));
            }
            return Err(DeckError::Failed {
                command: COMMAND.to_owned(),
                status: output.status(),
                message,
            });
        }
        if output.code != Some(0) {
            return Err(DeckError::Failed {
                command: COMMAND.to_owned(),
                status: output.status(),
                message: answer_head(output),
            });
        }
        return SessionInfo::from_value(&Value::Object(object))
            .map(|info| Shown::Found(Box::new(info)))
            .ok_or_else(|| DeckError::Unreadable {
                command: COMMAND.to_owned(),
                message: format!("a session object without an id: {}", head(text, QUOTED)),
            });
    }
    match output.code {
        Some(0) => {}
        Some(2) => return Ok(Shown::NotFound(answer_head(output))),
        _ => {
            return Err(DeckError::Failed {
                command: COMMAND.to_owned(),
                status: output.status(),
                message: answer_head(output),
            });
        }
    }
    Ok(Shown::Empty(if text.is_empty() {
        "empty answer".to_owned()
    } else if text == "null" {
        "null".to_owned()
    } else {
        format!("plain text: {}", head(text, QUOTED))
    }))
}

/// What `session send` answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sent {
    /// The answer's head (`✓ Sent message to …`, or its JSON).
    pub answer: String,
}

/// The standard output, else standard error, shortened.
fn answer_head(output: &Output) -> String {
    let text = if output.stdout.trim().is_empty() {
        &output.stderr
    } else {
        &output.stdout
    };
    let text = head(text, QUOTED);
    if text.is_empty() {
        "(no output)".to_owned()
    } else {
        text
    }
}

/// The agent-deck binary and its timeouts.
#[derive(Debug, Clone)]
pub struct AgentDeck {
    pub bin: PathBuf,
    /// For list, show and send.
    pub timeout: Duration,
    /// For restart (it waits for the tool to come up).
    pub restart_timeout: Duration,
}

/// `name` on the `PATH` given (`PATH`'s value), if it is a file there.
pub fn find_on_path(name: &str, path_var: Option<&str>) -> Option<PathBuf> {
    path_var?
        .split(':')
        .filter(|dir| !dir.is_empty())
        .map(|dir| Path::new(dir).join(name))
        .find(|candidate| candidate.is_file())
}

impl AgentDeck {
    /// `bin` with the default timeouts (30 s, restart 90 s).
    pub fn new(bin: impl Into<PathBuf>) -> Self {
        Self {
            bin: bin.into(),
            timeout: Duration::from_secs(30),
            restart_timeout: Duration::from_secs(90),
        }
    }

    /// The argv after the binary: `[-p PROFILE] args…`.
    pub fn argv(profile: Option<&str>, args: &[&str]) -> Vec<String> {
        let mut argv = Vec::with_capacity(args.len() + 2);
        if let Some(profile) = profile.filter(|p| !p.is_empty()) {
            argv.push("-p".to_owned());
            argv.push(profile.to_owned());
        }
        argv.extend(args.iter().map(|a| (*a).to_owned()));
        argv
    }

    fn run(
        &self,
        profile: Option<&str>,
        args: &[&str],
        timeout: Duration,
    ) -> Result<Output, DeckError> {
        if let Some(profile) = profile.filter(|p| !p.is_empty()) {
            check_argument("profile", profile)?;
        }
        let argv = Self::argv(profile, args);
        let program = self.bin.display().to_string();
        process::run(&self.bin, &argv, timeout).map_err(|e| match e {
            RunError::NotFound(message) => DeckError::NotFound { program, message },
            RunError::Spawn(message) => DeckError::Spawn { program, message },
            RunError::Wait(message) => DeckError::Spawn {
                program,
                message: format!("could not wait for it: {message}"),
            },
            RunError::Timeout(timeout) => DeckError::Timeout {
                command: args.iter().take(2).copied().collect::<Vec<_>>().join(" "),
                timeout,
            },
        })
    }

    /// `agent-deck list --all --json`: every profile's sessions (without their status).
    pub fn list_all(&self) -> Result<Listing, DeckError> {
        let output = self.run(None, &["list", "--all", "--json"], self.timeout)?;
        parse_list(&output)
    }

    /// `agent-deck [-p P] session show ID --json`.
    pub fn show(&self, id: &str, profile: Option<&str>) -> Result<Shown, DeckError> {
        check_argument("session id", id)?;
        let output = self.run(profile, &["session", "show", id, "--json"], self.timeout)?;
        parse_show(&output)
    }

    /// `agent-deck [-p P] session restart ID --json`, read with [`restart_reply`]
    /// (`"skipped": true` is a refusal). A timeout is a failure: the restart may or may not have
    /// happened, and the next tick looks.
    pub fn restart(&self, id: &str, profile: Option<&str>) -> Result<RestartReply, DeckError> {
        check_argument("session id", id)?;
        match self.run(
            profile,
            &["session", "restart", id, "--json"],
            self.restart_timeout,
        ) {
            Ok(output) => {
                let text = if output.stdout.trim().is_empty() {
                    &output.stderr
                } else {
                    &output.stdout
                };
                Ok(restart_reply(output.code.unwrap_or(-1), text))
            }
            Err(DeckError::Timeout { command, timeout }) => Ok(RestartReply::Failed {
                error: format!("{command}: no answer within {timeout:?}; killed"),
            }),
            Err(e) => Err(e),
        }
    }

    /// `agent-deck [-p P] session send ID MESSAGE --no-wait`.
    pub fn send(&self, id: &str, profile: Option<&str>, message: &str) -> Result<Sent, DeckError> {
        check_argument("session id", id)?;
        check_argument("message", message)?;
        let output = self.run(
            profile,
            &["session", "send", id, message, "--no-wait"],
            self.timeout,
        )?;
        if output.code == Some(0) {
            return Ok(Sent {
                answer: answer_head(&output),
            });
        }
        let message = serde_json::from_str::<Value>(output.stdout.trim())
            .ok()
            .and_then(|v| v.get("error").and_then(Value::as_str).map(str::to_owned))
            .unwrap_or_else(|| answer_head(&output));
        Err(DeckError::Failed {
            command: "session send".to_owned(),
            status: output.status(),
            message,
        })
    }
}

/// Reads `agent-deck session restart`'s exit code and standard output. JSON (`--json`) is
/// preferred; the plain text forms `✓ Restarted ...` / `✓ Skipped restart of ...` are understood
/// too. `"skipped": true` is a refusal (someone else's guard fired), never a success or failure.
pub fn restart_reply(exit_code: i32, stdout: &str) -> RestartReply {
    if let Ok(Value::Object(reply)) = serde_json::from_str::<Value>(stdout.trim()) {
        let text = |key: &str| reply.get(key).and_then(Value::as_str).map(str::to_owned);
        if reply.get("skipped").and_then(Value::as_bool) == Some(true) {
            return RestartReply::Refused {
                reason: text("reason").unwrap_or_else(|| "no reason given".into()),
            };
        }
        if exit_code == 0 && reply.get("success").and_then(Value::as_bool) == Some(true) {
            return RestartReply::Restarted {
                warning: text("warning"),
            };
        }
        let error = text("error").unwrap_or_else(|| format!("exit code {exit_code}"));
        return RestartReply::Failed { error };
    }
    if exit_code != 0 {
        let text = clip(stdout);
        return RestartReply::Failed {
            error: if text.is_empty() {
                format!("exit code {exit_code}")
            } else {
                text
            },
        };
    }
    if stdout.contains("Skipped restart") {
        RestartReply::Refused {
            reason: clip(stdout),
        }
    } else if stdout.contains("Restarted") {
        RestartReply::Restarted { warning: None }
    } else {
        RestartReply::Failed {
            error: format!("unrecognised reply: {}", clip(stdout)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn out(code: i32, stdout: &str) -> Output {
        Output {
            code: Some(code),
            stdout: stdout.to_owned(),
            stderr: String::new(),
        }
    }

    #[test]
    fn list_reads_sessions_null_and_plain_text() {
        let listed = parse_list(&out(
            0,
            r#"[{"id":"a-1","title":"conductor-x","group_path":"conductor","profile":"p"},{"title":"no id"},{"id":"b-2","parent_session_id":"","channels":["plugin:telegram@x"]}]"#,
        ))
        .unwrap();
        assert_eq!(listed.sessions.len(), 2);
        assert_eq!(listed.skipped_entries, 1);
        assert_eq!(listed.sessions[0].group.as_deref(), Some("conductor"));
        assert_eq!(listed.sessions[1].parent_session_id, None);
        assert_eq!(listed.sessions[1].channels, ["plugin:telegram@x"]);
        for empty in [
            "null",
            "No profiles found.",
            "No sessions found in profile 'x'.\n",
        ] {
            let listed = parse_list(&out(0, empty)).unwrap();
            assert!(
                listed.sessions.is_empty() && listed.note.is_some(),
                "{empty}"
            );
        }
        assert!(matches!(
            parse_list(&out(1, "Error: boom")),
            Err(DeckError::Failed { message, .. }) if message == "Error: boom"
        ));
        assert!(matches!(
            parse_list(&out(0, "{}")),
            Err(DeckError::Unreadable { .. })
        ));
        assert!(matches!(
            parse_list(&out(0, "")),
            Err(DeckError::Unreadable { .. })
        ));
    }

    #[test]
    fn show_reads_found_not_found_null_and_plain_text() {
        let found = parse_show(&out(
            0,
            r#"{"id":"c","title":"t","status":"error","auth_hold":{"reason":"auth_death"},"tmux_session":"agentdeck_t_1","parent_session_id":"p"}"#,
        ))
        .unwrap();
        let Shown::Found(info) = found else {
            panic!("{found:?}")
        };
        assert_eq!(info.status.as_deref(), Some("error"));
        assert_eq!(info.auth_hold.unwrap().reason, "auth_death");
        assert_eq!(info.parent_session_id.as_deref(), Some("p"));
        let empty_hold =
            parse_show(&out(0, r#"{"id":"c","auth_hold":{},"status":"idle"}"#)).unwrap();
        assert!(matches!(empty_hold, Shown::Found(info) if info.auth_hold.is_none()));
        assert!(matches!(
            parse_show(&out(
                2,
                r#"{"success":false,"error":"session 'nope' not found","code":"NOT_FOUND"}"#
            ))
            .unwrap(),
            Shown::NotFound(m) if m.contains("not found")
        ));
        assert_eq!(
            parse_show(&out(0, "null")).unwrap(),
            Shown::Empty("null".into())
        );
        assert!(matches!(
            parse_show(&out(0, "No sessions found in profile 'default'.")).unwrap(),
            Shown::Empty(m) if m.starts_with("plain text")
        ));
        assert_eq!(
            parse_show(&out(0, "  ")).unwrap(),
            Shown::Empty("empty answer".into())
        );
        assert!(matches!(
            parse_show(&out(1, "Error: storage locked")),
            Err(DeckError::Failed { .. })
        ));
    }

    #[test]
    fn arguments_that_look_like_options_are_refused() {
        for bad in ["", "  ", "--all", "-p", "a\0b"] {
            assert!(check_argument("session id", bad).is_err(), "{bad:?}");
        }
        for good in [
            "3f9a1c2e-1713770000",
            "x'; rm -rf / #",
            "a b\nc",
            "report status?",
        ] {
            assert!(check_argument("session id", good).is_ok(), "{good:?}");
        }
    }

    #[test]
    fn argv_puts_the_profile_first() {
        assert_eq!(
            AgentDeck::argv(Some("work"), &["session", "show", "x", "--json"]),
            ["-p", "work", "session", "show", "x", "--json"]
        );
        assert_eq!(AgentDeck::argv(Some(""), &["list"]), ["list"]);
        assert_eq!(AgentDeck::argv(None, &["list"]), ["list"]);
    }
}
