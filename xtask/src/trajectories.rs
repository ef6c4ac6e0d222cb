//! `cargo xtask import-trajectories`, first half: public agent trajectories converted to the
//! session format (`agentwatch-sessions/1`), deterministically.
//!
//! Formats (see `shared/data/trajectories/README.md`):
//! - OpenHands resolver output (`openhands_resolver_output.jsonl`): one run per line, `history`
//!   alternating action dicts (`action`, `command` / `code`) and observation dicts (`content`,
//!   `exit_code`); no times.
//! - OpenHands multi-swe-bench output (`openhands_multiswebench_output.jsonl`): `history` events
//!   with `id`, `timestamp`, `source`, `action` / `observation`, `args`, `extras`, `cause`.
//! - SWE-agent `.traj`: `{trajectory: [{action, observation}]}`; no times, no exit codes.
//!
//! Mapping to opencode's tool shapes, so the detector reads them as it reads opencode:
//! shell commands -> `bash {command}` with `metadata.exit` when the run recorded it; file views ->
//! `read {filePath, offset?, limit?}` with `metadata.total_lines` when the output says
//! "N lines total"; edits -> `edit` with a non-empty `metadata.diff` when the edit was applied
//! (an edit the tool rejected is `error` with an empty diff); `create` -> `write`; anything else
//! (think, finish, search commands) keeps its own tool name. Runs without times get one call
//! every 10 s from a fixed start.

use detect_core::{Call, CallStatus, Label, Session};
use serde_json::{Map, Value, json};
use std::path::Path;

/// Where runs without times start (unix ms), one call every [`STEP_MS`].
const UNTIMED_START_MS: i64 = 1_735_000_000_000;
const STEP_MS: i64 = 10_000;

/// The files the converter reads, in this order.
pub const SOURCES: [&str; 3] = [
    "openhands_resolver_output.jsonl",
    "openhands_multiswebench_output.jsonl",
    "sweagent_gpt4_pydicom-1458.traj",
];

/// A converted run, with what the dev set needs to know about it.
#[derive(Debug, Clone)]
pub struct Converted {
    pub session: Session,
    /// Whether the run may be a base for spliced loops (a healthy run).
    pub healthy: bool,
}

/// Convert every known trajectory file in `dir`. A missing file is an error naming it.
pub fn convert_dir(dir: &Path) -> Result<Vec<Converted>, String> {
    let read = |name: &str| {
        let path = dir.join(name);
        std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))
    };
    let mut out = Vec::new();
    out.extend(openhands_resolver(&read(SOURCES[0])?)?);
    out.extend(openhands_events(&read(SOURCES[1])?)?);
    out.push(sweagent(&read(SOURCES[2])?)?);
    Ok(out)
}

fn parse_lines(text: &str, what: &str) -> Result<Vec<Value>, String> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .enumerate()
        .map(|(i, l)| serde_json::from_str(l).map_err(|e| format!("{what} line {}: {e}", i + 1)))
        .collect()
}

fn field<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or("")
}

/// "[File: /p/a.css (42 lines total)]" or "(79 lines total after edit)" -> 42 / 79.
fn lines_total(output: &str) -> Option<u64> {
    let at = output.find(" lines total")?;
    let head = &output[..at];
    let digits: String = head
        .chars()
        .rev()
        .take_while(char::is_ascii_digit)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    digits.parse().ok()
}

fn new_session(
    id: &str,
    title: &str,
    directory: &str,
    label: Option<Label>,
    note: &str,
) -> Session {
    let mut s = Session::new(id);
    s.title = Some(title.to_owned());
    s.agent = Some("build".to_owned());
    s.directory = Some(directory.to_owned());
    s.label = label;
    s.note = Some(note.to_owned());
    s
}

fn untimed(calls: &mut [Call]) {
    for (i, call) in calls.iter_mut().enumerate() {
        let start = UNTIMED_START_MS + STEP_MS * i as i64;
        call.time = Some(detect_core::CallTime {
            start: Some(start),
            end: Some(start + STEP_MS / 2),
        });
    }
}

fn bash(command: &str, exit: Option<i64>) -> Call {
    let mut call = Call::completed("bash", json!({ "command": command }));
    if let Some(exit) = exit {
        call.metadata = json!({ "exit": exit });
    }
    call
}

fn edit(path: &str, input: Map<String, Value>, applied: bool, diff: &str) -> Call {
    let mut input = input;
    input.insert("filePath".into(), json!(path));
    let call = Call::completed("edit", Value::Object(input));
    if applied {
        call.with_metadata(json!({ "diff": diff }))
    } else {
        call.with_status(CallStatus::Error)
            .with_metadata(json!({ "diff": "" }))
    }
}

fn read_call(path: &str, offset: Option<u64>, limit: Option<u64>, output: &str) -> Call {
    let mut input = Map::new();
    input.insert("filePath".into(), json!(path));
    if let Some(o) = offset {
        input.insert("offset".into(), json!(o));
    }
    if let Some(l) = limit {
        input.insert("limit".into(), json!(l));
    }
    let call = Call::completed("read", Value::Object(input));
    match lines_total(output) {
        Some(n) => call.with_metadata(json!({ "total_lines": n })),
        None => call,
    }
}

/// The first quoted argument of an agentskills call: `open_file('/p/a.css')` -> `/p/a.css`.
fn first_string_arg(code: &str) -> Option<&str> {
    let open = code.find('(')?;
    let rest = code[open + 1..].trim_start();
    let quote = rest.chars().next().filter(|c| *c == '\'' || *c == '"')?;
    let body = &rest[1..];
    body.find(quote).map(|end| &body[..end])
}

fn openhands_resolver(text: &str) -> Result<Vec<Converted>, String> {
    let runs = parse_lines(text, SOURCES[0])?;
    let mut out = Vec::new();
    for (n, run) in runs.iter().enumerate() {
        let history = run
            .get("history")
            .and_then(Value::as_array)
            .ok_or_else(|| format!("{} line {}: no history", SOURCES[0], n + 1))?;
        let mut calls = Vec::new();
        let mut i = 0;
        while i < history.len() {
            let action = &history[i];
            let kind = field(action, "action");
            // The observation answering an action follows it.
            let obs = history
                .get(i + 1)
                .filter(|o| o.get("observation").is_some());
            i += if obs.is_some() { 2 } else { 1 };
            let output = obs.map_or("", |o| field(o, "content"));
            match kind {
                "run" => calls.push(bash(
                    field(action, "command"),
                    obs.and_then(|o| o.get("exit_code")).and_then(Value::as_i64),
                )),
                "run_ipython" => {
                    let code = field(action, "code");
                    let path = first_string_arg(code).unwrap_or("");
                    if code.starts_with("open_file(") {
                        calls.push(read_call(path, None, None, output));
                    } else if [
                        "edit_file_by_replace(",
                        "insert_content_at_line(",
                        "append_file(",
                        "create_file(",
                    ]
                    .iter()
                    .any(|f| code.starts_with(f))
                    {
                        let applied = output.contains("lines total after edit")
                            || output.starts_with("[File created");
                        let mut input = Map::new();
                        input.insert("code".into(), json!(code));
                        calls.push(edit(
                            path,
                            input,
                            applied,
                            "(applied: see the run's git_patch)",
                        ));
                    } else {
                        calls.push(Call::completed("ipython", json!({ "code": code })));
                    }
                }
                "finish" => calls.push(Call::completed("finish", json!({}))),
                _ => {} // `message`: the user's prompt, no tool call.
            }
        }
        untimed(&mut calls);
        let issue = run.get("issue").cloned().unwrap_or(Value::Null);
        let number = issue
            .get("number")
            .and_then(Value::as_u64)
            .unwrap_or(n as u64);
        let title = field(&issue, "title");
        let success = run.get("success").and_then(Value::as_bool).unwrap_or(false);
        let id = format!("dev-healthy-real-oh-resolver-{number}");
        let note = format!(
            "healthy (real): OpenHands resolver run {} of {}, issue #{number}, {} calls, success={success}; converted from {}",
            n + 1,
            runs.len(),
            calls.len(),
            SOURCES[0]
        );
        let mut session = new_session(&id, title, "/workspace", Some(Label::MustNotFlag), &note);
        session.calls = calls;
        out.push(Converted {
            session,
            healthy: true,
        });
    }
    Ok(out)
}

/// "2025-04-30T16:32:54.707474" (UTC) -> unix ms.
fn iso_ms(ts: &str) -> Option<i64> {
    let (date, time) = ts.split_once('T')?;
    let mut d = date.split('-').map(|p| p.parse::<i64>().ok());
    let (y, m, day) = (d.next()??, d.next()??, d.next()??);
    let time = time.trim_end_matches('Z');
    let (hms, frac) = time.split_once('.').unwrap_or((time, "0"));
    let mut t = hms.split(':').map(|p| p.parse::<i64>().ok());
    let (hh, mm, ss) = (t.next()??, t.next()??, t.next()??);
    let millis: i64 = format!("{frac:0<3}")[..3].parse().ok()?;
    // Days from the civil date (Howard Hinnant's algorithm).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(((days * 24 + hh) * 60 + mm) * 60_000 + ss * 1000 + millis)
}

fn openhands_events(text: &str) -> Result<Vec<Converted>, String> {
    let runs = parse_lines(text, SOURCES[1])?;
    let mut out = Vec::new();
    for (n, run) in runs.iter().enumerate() {
        let history = run
            .get("history")
            .and_then(Value::as_array)
            .ok_or_else(|| format!("{} line {}: no history", SOURCES[1], n + 1))?;
        let observation_of = |id: u64| {
            history.iter().find(|e| {
                e.get("observation").is_some() && e.get("cause").and_then(Value::as_u64) == Some(id)
            })
        };
        let mut calls = Vec::new();
        for event in history {
            let start = event
                .get("timestamp")
                .and_then(Value::as_str)
                .and_then(iso_ms);
            let (action, obs) = match (event.get("action"), event.get("observation")) {
                (Some(a), _) if field(event, "source") == "agent" => (
                    a.as_str().unwrap_or(""),
                    event
                        .get("id")
                        .and_then(Value::as_u64)
                        .and_then(observation_of),
                ),
                // A tool call the runtime refused before running it.
                (None, Some(o)) if o == "error" && event.get("cause").is_none() => {
                    let call = Call::completed("str_replace_editor", json!({}))
                        .with_status(CallStatus::Error);
                    calls.push((call, start, start));
                    continue;
                }
                _ => continue,
            };
            let args = event.get("args").cloned().unwrap_or(Value::Null);
            let output = obs.map_or("", |o| field(o, "content"));
            let end = obs
                .and_then(|o| o.get("timestamp"))
                .and_then(Value::as_str)
                .and_then(iso_ms);
            let call = match action {
                "run" => bash(
                    field(&args, "command"),
                    obs.and_then(|o| o.pointer("/extras/metadata/exit_code"))
                        .and_then(Value::as_i64),
                ),
                "read" => {
                    let range = args.get("view_range").and_then(Value::as_array);
                    let bound = |i: usize| range.and_then(|r| r.get(i)).and_then(Value::as_i64);
                    let (offset, limit) = match (bound(0), bound(1)) {
                        (Some(a), Some(b)) if b >= a && a >= 1 => {
                            (Some(a as u64), Some((b - a + 1) as u64))
                        }
                        (Some(a), _) if a >= 1 => (Some(a as u64), None),
                        _ => (None, None),
                    };
                    read_call(field(&args, "path"), offset, limit, output)
                }
                "edit" => {
                    let diff = obs.map_or("", |o| {
                        o.pointer("/extras/diff")
                            .and_then(Value::as_str)
                            .unwrap_or("")
                    });
                    let mut input = Map::new();
                    for key in ["command", "old_str", "new_str", "file_text", "insert_line"] {
                        if let Some(v) = args.get(key).filter(|v| !v.is_null()) {
                            input.insert(key.into(), v.clone());
                        }
                    }
                    let applied = !diff.trim().is_empty() && !output.starts_with("ERROR");
                    edit(field(&args, "path"), input, applied, diff)
                }
                "think" => Call::completed("think", json!({ "thought": field(&args, "thought") })),
                "finish" => Call::completed("finish", json!({})),
                _ => continue, // `system`, `recall`, `message`: no tool call.
            };
            calls.push((call, start, end.or(start)));
        }
        let calls: Vec<Call> = calls
            .into_iter()
            .map(|(call, start, end)| match (start, end) {
                (Some(s), Some(e)) => call.with_time(s, e.max(s)),
                _ => call,
            })
            .collect();
        let instance = field(run, "instance_id");
        let short = instance.rsplit("__").next().unwrap_or(instance);
        // A run that ran out of its iterations (ponyc-4588: many edits of one file, builds that
        // keep failing, no exact loop) is no healthy run, nor a clear loop: it is reported
        // unlabelled and is no base for splices.
        let exhausted = field(run, "error").contains("maximum iteration");
        let (label, healthy, kind) = if exhausted {
            (None, false, "unlabelled")
        } else {
            (Some(Label::MustNotFlag), true, "healthy")
        };
        let id = format!("dev-{kind}-real-oh-{short}");
        let note = format!(
            "{kind} (real): OpenHands multi-swe-bench run {instance}, {} calls{}; converted from {}",
            calls.len(),
            if exhausted {
                ": ran out of its iterations after many edits of one file (no exact loop); unlabelled"
            } else {
                ""
            },
            SOURCES[1]
        );
        // The repository the run worked in: the working directory of its first command.
        let directory = history
            .iter()
            .find_map(|e| {
                e.pointer("/extras/metadata/working_dir")
                    .and_then(Value::as_str)
            })
            .unwrap_or("/workspace")
            .to_owned();
        let mut session = new_session(&id, instance, &directory, label, &note);
        session.calls = calls;
        out.push(Converted { session, healthy });
    }
    Ok(out)
}

fn sweagent(text: &str) -> Result<Converted, String> {
    let doc: Value = serde_json::from_str(text).map_err(|e| format!("{}: {e}", SOURCES[2]))?;
    let steps = doc
        .get("trajectory")
        .and_then(Value::as_array)
        .ok_or_else(|| format!("{}: no trajectory", SOURCES[2]))?;
    let root = "/pydicom__pydicom";
    let abs = |p: &str| {
        if p.starts_with('/') {
            p.to_owned()
        } else {
            format!("{root}/{p}")
        }
    };
    let mut open_file = String::new();
    let mut calls = Vec::new();
    for step in steps {
        let action = field(step, "action").trim_end();
        let output = field(step, "observation");
        let (head, body) = action.split_once('\n').unwrap_or((action, ""));
        let mut words = head.split_whitespace();
        let command = words.next().unwrap_or("");
        let call = match command {
            "open" => {
                let path = abs(words.next().unwrap_or(""));
                let line = words.next().and_then(|l| l.parse::<u64>().ok());
                open_file.clone_from(&path);
                read_call(&path, line, Some(100), output)
            }
            "create" => {
                let path = abs(words.next().unwrap_or(""));
                open_file.clone_from(&path);
                Call::completed("write", json!({ "filePath": path }))
            }
            "edit" => {
                let rejected = output.contains("introduced new syntax error");
                let mut input = Map::new();
                input.insert("range".into(), json!(words.next().unwrap_or("")));
                input.insert("text".into(), json!(body));
                edit(
                    &open_file,
                    input,
                    !rejected,
                    "(applied: see the run's submission)",
                )
            }
            "find_file" | "search_dir" | "search_file" | "goto" | "scroll_up" | "scroll_down"
            | "submit" => Call::completed(command, json!({ "args": head[command.len()..].trim() })),
            _ => bash(action, None),
        };
        calls.push(call);
    }
    untimed(&mut calls);
    let mut session = new_session(
        "dev-healthy-real-swe-pydicom-1458",
        "pydicom__pydicom-1458",
        root,
        Some(Label::MustNotFlag),
        &format!(
            "healthy (real): SWE-agent gpt4 run on pydicom-1458, {} calls: the same `edit 287:295` rejected three times in a row, then it lands and the run passes; converted from {}",
            calls.len(),
            SOURCES[2]
        ),
    );
    session.calls = calls;
    Ok(Converted {
        session,
        healthy: true,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iso_times() {
        assert_eq!(iso_ms("1970-01-01T00:00:01.5"), Some(1500));
        assert_eq!(
            iso_ms("2025-04-30T16:32:54.707474"),
            Some(1_746_030_774_707)
        );
        assert_eq!(iso_ms("nonsense"), None);
    }

    #[test]
    fn line_totals() {
        assert_eq!(lines_total("[File: /p/a.css (42 lines total)]"), Some(42));
        assert_eq!(lines_total("(79 lines total after edit)]"), Some(79));
        assert_eq!(lines_total("no"), None);
    }

    #[test]
    fn agentskills_arguments() {
        assert_eq!(first_string_arg("open_file('/p/a.css')"), Some("/p/a.css"));
        assert_eq!(
            first_string_arg("edit_file_by_replace(\n'/p/x.tsx',\nto_replace=1)"),
            Some("/p/x.tsx")
        );
        assert_eq!(first_string_arg("print(1)"), None);
    }
}
