//! `agentwatch detect`, `import-export` and `export-fixture` on Claude Code transcripts: the real
//! ones Claude Code 2.1.328 wrote (`fixtures/claude/2.1.328/`, as a file, a project directory,
//! `projects/` and a configuration directory), hand-written ones for the older layouts (flat
//! `agent-<id>.jsonl` subagents, inline `isSidechain` lines), and damaged ones (truncated, a torn
//! last line). And one file of each other agent that writes its sessions to disk: the real
//! Codex CLI 0.169.0 rollouts (`fixtures/codex/`, also compressed) and Gemini CLI 0.61.0
//! sessions (`fixtures/gemini/`).

use serde_json::{Value, json};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/claude/2.1.328");
const PROJECT: &str = "projects/-home-user-work-project";
const LOOP_ID: &str = "4bf0aef6-5b3c-45a8-b267-50e79a4948fe";
const HEALTHY_ID: &str = "bd56d4c1-00ee-4fe9-bdeb-c5e8d234ab3c";
const MAIN_ID: &str = "2e4f2b19-19ea-4857-8d93-6a73a095ecf4";
const SUBAGENT_ID: &str = "a3f9675c40e0f8931";

/// A scenario's configuration directory (`loop`, `healthy`, `subagent`).
fn scenario(name: &str) -> PathBuf {
    Path::new(FIXTURES).join(name)
}

fn loop_file() -> PathBuf {
    scenario("loop")
        .join(PROJECT)
        .join(format!("{LOOP_ID}.jsonl"))
}

fn healthy_file() -> PathBuf {
    scenario("healthy")
        .join(PROJECT)
        .join(format!("{HEALTHY_ID}.jsonl"))
}

fn agentwatch(args: &[&str], stdin: Option<&[u8]>) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_agentwatch"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    if let Some(bytes) = stdin {
        child.stdin.take().unwrap().write_all(bytes).unwrap();
    }
    drop(child.stdin.take());
    child.wait_with_output().unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// `agentwatch detect --json ARGS…`, which must succeed.
fn detect(args: &[&str]) -> Value {
    let mut all = vec!["detect", "--json"];
    all.extend_from_slice(args);
    let out = agentwatch(&all, None);
    assert!(out.status.success(), "{args:?}: {}", stderr(&out));
    assert!(!stderr(&out).contains("panicked"), "{}", stderr(&out));
    serde_json::from_slice(&out.stdout).unwrap()
}

fn path(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// The entry of `list` (`sessions` or `trees`) in a `detect --json` answer whose `key` is `value`.
fn entry<'a>(v: &'a Value, list: &str, key: &str, value: &str) -> &'a Value {
    v[list]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s[key] == value)
        .unwrap_or_else(|| panic!("no {list} entry with {key} {value} in {v:#}"))
}

/// The ids of the sessions of a `detect --json` answer or a session file, in order.
fn ids(v: &Value) -> Vec<&str> {
    v["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap())
        .collect()
}

/// The session of `id`.
fn session<'a>(v: &'a Value, id: &str) -> &'a Value {
    entry(v, "sessions", "id", id)
}

/// The tree rooted at `root`.
fn tree<'a>(v: &'a Value, root: &str) -> &'a Value {
    entry(v, "trees", "root", root)
}

/// How many `tool_use` blocks the lines of a transcript hold, counted without the reader.
fn tool_uses_in(text: &str) -> usize {
    text.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|l| l["type"] == "assistant")
        .map(|l| {
            l["message"]["content"]
                .as_array()
                .map_or(0, |c| c.iter().filter(|b| b["type"] == "tool_use").count())
        })
        .sum()
}

fn tool_uses(file: &Path) -> usize {
    tool_uses_in(&std::fs::read_to_string(file).unwrap())
}

/// A temporary directory, removed when dropped.
struct Temp(PathBuf);

impl Temp {
    fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("aw-claude-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }

    fn write(&self, relative: &str, bytes: &[u8]) -> PathBuf {
        let file = self.0.join(relative);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(&file, bytes).unwrap();
        file
    }
}

impl Drop for Temp {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Within how many calls of its start a loop must be flagged (issue 34).
const WITHIN: u64 = 15;

#[test]
fn a_transcript_file_is_read_whole_and_its_loop_flagged_under_the_key_of_claude() {
    let file = loop_file();
    let v = detect(&[path(&file)]);
    assert_eq!(v["sessions"].as_array().unwrap().len(), 1);
    let s = session(&v, LOOP_ID);
    assert_eq!(s["agent"], "claude");
    assert_eq!(s["calls"], tool_uses(&file) as u64);
    assert_eq!(s["calls"], 45);
    assert_eq!(s["flagged"], true);
    let first = s["first_flag_at_call"]
        .as_u64()
        .expect("flagged call by call");
    // The loop is the session's first call on: the default profile, which judges before
    // `min_calls`, catches it within 15 calls.
    assert!(
        (1..=1 + WITHIN).contains(&first),
        "first flagged at call {first}"
    );
    let t = tree(&v, LOOP_ID);
    assert_eq!(t["dedup_key"], format!("claude-loop:{LOOP_ID}"));
    assert_eq!(t["flagged"], true);
}

#[test]
fn a_healthy_configuration_directory_is_not_flagged() {
    // Edit, `sh test.sh` printing `ok`, commit, over and over: the same passing check after
    // each landed edit confirms it, under the default as under the design, at every prefix.
    let dir = scenario("healthy");
    for args in [&[][..], &["--profile", "design"][..]] {
        let v = detect(&[args, &[path(&dir)]].concat());
        let s = session(&v, HEALTHY_ID);
        assert_eq!(s["agent"], "claude");
        assert_eq!(s["calls"], tool_uses(&healthy_file()) as u64);
        assert_eq!(s["flagged"], false, "{args:?}");
        assert_eq!(s["first_flag_at_call"], Value::Null, "{args:?}");
        assert_eq!(tree(&v, HEALTHY_ID)["flagged"], false);
    }
}

#[test]
fn a_project_directory_links_the_subagent_to_its_parent_and_keys_the_tree_on_the_parent() {
    let project = scenario("subagent").join(PROJECT);
    let sub_id = format!("{MAIN_ID}:agent-{SUBAGENT_ID}");
    let sub_file = project
        .join(MAIN_ID)
        .join("subagents")
        .join(format!("agent-{SUBAGENT_ID}.jsonl"));
    for dir in [
        project.clone(),
        scenario("subagent").join("projects"),
        scenario("subagent"),
    ] {
        let v = detect(&[path(&dir)]);
        let ids = ids(&v);
        assert_eq!(ids, [MAIN_ID, sub_id.as_str()], "{}", dir.display());
        assert_eq!(v["trees"].as_array().unwrap().len(), 1, "one tree");
        let t = tree(&v, MAIN_ID);
        assert_eq!(t["dedup_key"], format!("claude-loop:{MAIN_ID}"));
        assert_eq!(t["sessions"], json!([MAIN_ID, sub_id]));
        assert_eq!(
            t["flagged"], true,
            "the subagent's loop flags its parent's tree"
        );
        assert_eq!(t["flagged_sessions"][0]["id"], sub_id.as_str());
        let sub = session(&v, &sub_id);
        assert_eq!(sub["calls"], tool_uses(&sub_file) as u64);
        // The loop begins after the subagent's one edit (its second call).
        let first = sub["first_flag_at_call"].as_u64().expect("flagged");
        assert!(first <= 3 + WITHIN, "first flagged at call {first}");
        assert_eq!(session(&v, MAIN_ID)["calls"], 2);
    }
}

#[test]
fn mixed_inputs_keep_each_agent_and_its_keys() {
    let sample = concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/sample.json");
    let healthy = healthy_file();
    let v = detect(&[sample, path(&healthy)]);
    assert_eq!(session(&v, "ses_demo_build")["agent"], "opencode");
    assert_eq!(session(&v, HEALTHY_ID)["agent"], "claude");
    assert_eq!(
        tree(&v, "ses_demo_build")["dedup_key"],
        "opencode-loop:ses_demo_build"
    );
    assert_eq!(
        tree(&v, HEALTHY_ID)["dedup_key"],
        format!("claude-loop:{HEALTHY_ID}")
    );
    // Standard input takes a transcript too, its session named by its lines.
    let out = agentwatch(
        &["detect", "--json", "-"],
        Some(&std::fs::read(loop_file()).unwrap()),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(session(&v, LOOP_ID)["calls"], 45);
}

#[test]
fn the_table_names_the_agent_and_the_first_flagged_call() {
    let out = agentwatch(&["detect", path(&loop_file())], None);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8(out.stdout).unwrap();
    let line = text.lines().next().unwrap();
    assert!(
        line.starts_with(&format!(
            "session {LOOP_ID} FLAGGED agent=claude calls=45 first_flag_at_call="
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "dedup_key=claude-loop:{LOOP_ID} sessions=1 FLAGGED"
        )),
        "{text}"
    );
}

#[test]
fn a_truncated_transcript_and_a_torn_last_line_read_as_far_as_they_go() {
    let temp = Temp::new("torn");
    let whole = std::fs::read(loop_file()).unwrap();
    // Cut in the middle of a line: the lines before it are read, the torn one is skipped and
    // named, the call it would have answered is left unjudged.
    let cut = whole.len() / 2;
    assert_ne!(whole[cut - 1], b'\n');
    let torn = temp.write(&format!("{LOOP_ID}.jsonl"), &whole[..cut]);
    let out = agentwatch(&["detect", "--json", path(&torn)], None);
    assert!(out.status.success(), "{}", stderr(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let complete = whole[..cut].iter().rposition(|b| *b == b'\n').unwrap();
    let uses_before = tool_uses_in(&String::from_utf8_lossy(&whole[..=complete]));
    assert_eq!(session(&v, LOOP_ID)["calls"], uses_before as u64);
    assert!(
        stderr(&out).contains("lines not JSON, skipped: 1"),
        "{}",
        stderr(&out)
    );
    // A whole transcript with a torn line after it: every call read.
    let mut bytes = std::fs::read(healthy_file()).unwrap();
    bytes.extend_from_slice(br#"{"type":"assistant","message":{"content":[{"type":"tool_use""#);
    let torn = temp.write("t/healthy.jsonl", &bytes);
    let v = detect(&[path(&torn)]);
    assert_eq!(
        session(&v, "healthy")["calls"],
        tool_uses(&healthy_file()) as u64
    );
    assert_eq!(session(&v, "healthy")["flagged"], false);
    // Cut inside its first line, nothing tells a transcript: a clear error.
    let first = temp.write("first.jsonl", &whole[..40]);
    let out = agentwatch(&["detect", path(&first)], None);
    assert_eq!(out.status.code(), Some(65), "{}", stderr(&out));
    assert!(stderr(&out).contains("first.jsonl"), "{}", stderr(&out));
    // A directory without transcripts.
    let empty = temp.0.join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let out = agentwatch(&["detect", path(&empty)], None);
    assert_eq!(out.status.code(), Some(66), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("no transcripts of Claude Code, Codex CLI or Gemini CLI"),
        "{}",
        stderr(&out)
    );
}

/// Hand-written transcript lines with the envelope Claude Code puts on each.
struct Lines {
    session: &'static str,
    agent: Option<&'static str>,
    lines: Vec<String>,
    n: u32,
}

impl Lines {
    fn new(session: &'static str, agent: Option<&'static str>) -> Self {
        Self {
            session,
            agent,
            lines: Vec::new(),
            n: 0,
        }
    }

    fn line(&mut self, kind: &str, message: Value, extra: Value) -> &mut Self {
        self.n += 1;
        let mut line = json!({
            "parentUuid": null, "isSidechain": self.agent.is_some(), "type": kind,
            "uuid": format!("{}-{}-{}", self.session, self.agent.unwrap_or("main"), self.n),
            "timestamp": format!("2026-12-06T01:{:02}:{:02}.000Z", self.n / 60, self.n % 60),
            "cwd": "/home/u/proj", "sessionId": self.session, "version": "2.0.0",
            "gitBranch": "main", "userType": "external", "message": message,
        });
        if let Some(agent) = self.agent {
            line["agentId"] = json!(agent);
        }
        if let (Value::Object(line), Value::Object(extra)) = (&mut line, extra) {
            line.extend(extra);
        }
        self.lines.push(line.to_string());
        self
    }

    fn prompt(&mut self, text: &str) -> &mut Self {
        self.line("user", json!({"role": "user", "content": text}), json!({}))
    }

    /// A call and its result (`detail`: the line's `toolUseResult`).
    fn call(
        &mut self,
        name: &str,
        input: Value,
        result: &str,
        error: bool,
        detail: Value,
    ) -> &mut Self {
        let id = format!(
            "toolu_{}_{}_{}",
            self.session,
            self.agent.unwrap_or("main"),
            self.n
        );
        self.line(
            "assistant",
            json!({"id": format!("msg_{id}"), "type": "message", "role": "assistant",
                   "model": "claude-opus-5-5", "stop_reason": "tool_use",
                   "content": [{"type": "tool_use", "id": id, "name": name, "input": input}]}),
            json!({}),
        );
        self.line(
            "user",
            json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": id,
                   "content": result, "is_error": error}]}),
            json!({"toolUseResult": detail}),
        )
    }

    /// 45 runs of one failing check.
    fn failing_loop(&mut self) -> &mut Self {
        for _ in 0..45 {
            self.call(
                "Bash",
                json!({"command": "sh check.sh", "description": "Run the check"}),
                "Exit code 1\ncheck failed",
                true,
                json!("Error: Exit code 1\ncheck failed"),
            );
        }
        self
    }

    fn spawn(&mut self, agent: &str) -> &mut Self {
        self.call(
            "Task",
            json!({"description": "check", "prompt": "make the check pass", "subagent_type": "general-purpose"}),
            &format!("done\nagentId: {agent}"),
            false,
            json!({"status": "completed", "agentId": agent, "totalToolUseCount": 45}),
        )
    }

    fn text(&self) -> String {
        let mut text = self.lines.join("\n");
        text.push('\n');
        text
    }
}

#[test]
fn an_old_flat_subagent_file_joins_its_parents_tree() {
    let temp = Temp::new("flat");
    let mut main = Lines::new("s-flat", None);
    main.prompt("fix the check").spawn("old7");
    let mut sub = Lines::new("s-flat", Some("old7"));
    sub.prompt("make the check pass").failing_loop();
    temp.write("projects/-p/s-flat.jsonl", main.text().as_bytes());
    let flat = temp.write("projects/-p/agent-old7.jsonl", sub.text().as_bytes());
    temp.write("projects/-p/agent-acompact-1.jsonl", sub.text().as_bytes());
    for input in [temp.0.join("projects/-p"), temp.0.clone()] {
        let v = detect(&[path(&input)]);
        assert_eq!(v["sessions"].as_array().unwrap().len(), 2, "{v:#}");
        let child = session(&v, "s-flat:agent-old7");
        assert_eq!(child["calls"], tool_uses(&flat) as u64);
        assert_eq!(child["flagged"], true);
        let t = tree(&v, "s-flat");
        assert_eq!(t["dedup_key"], "claude-loop:s-flat");
        assert_eq!(t["sessions"], json!(["s-flat", "s-flat:agent-old7"]));
        assert_eq!(t["flagged"], true);
    }
    // The flat file alone takes its parent from its lines.
    let v = detect(&[path(&flat)]);
    assert_eq!(session(&v, "s-flat:agent-old7")["agent"], "claude");
    // And with its parent's file, the tree is the parent's again.
    let parent = temp.0.join("projects/-p/s-flat.jsonl");
    let v = detect(&[path(&parent), path(&flat)]);
    assert_eq!(tree(&v, "s-flat")["sessions"].as_array().unwrap().len(), 2);
}

#[test]
fn inline_sidechain_lines_are_child_sessions_of_their_file() {
    let temp = Temp::new("inline");
    let mut main = Lines::new("s-inline", None);
    main.prompt("fix the check");
    let mut side = Lines::new("s-inline", Some("b2"));
    side.prompt("make the check pass").failing_loop();
    main.lines.extend(side.lines.iter().cloned());
    main.spawn("b2");
    let file = temp.write("s-inline.jsonl", main.text().as_bytes());
    let v = detect(&[path(&file)]);
    let ids = ids(&v);
    assert_eq!(ids, ["s-inline", "s-inline:agent-b2"]);
    assert_eq!(session(&v, "s-inline")["calls"], 1);
    assert_eq!(session(&v, "s-inline:agent-b2")["calls"], 45);
    let t = tree(&v, "s-inline");
    assert_eq!(t["dedup_key"], "claude-loop:s-inline");
    assert_eq!(t["flagged"], true);
    assert_eq!(t["flagged_sessions"][0]["id"], "s-inline:agent-b2");
}

/// A session file written by the command, read back.
fn session_file(file: &Path) -> Value {
    let v: Value = serde_json::from_slice(&std::fs::read(file).unwrap()).unwrap();
    assert_eq!(v["format"], "agentwatch-sessions/1");
    v
}

#[test]
fn import_export_turns_transcripts_into_a_scrubbed_session_file_that_judges_the_same() {
    let temp = Temp::new("import");
    let out = temp.0.join("claude.json");
    let project = scenario("subagent").join(PROJECT);
    let run = agentwatch(
        &[
            "import-export",
            path(&loop_file()),
            path(&project),
            "--out",
            path(&out),
        ],
        None,
    );
    assert!(run.status.success(), "{}", stderr(&run));
    let file = session_file(&out);
    let sessions = file["sessions"].as_array().unwrap();
    assert_eq!(sessions.len(), 3);
    let looping = &sessions[0];
    assert_eq!(looping["id"], LOOP_ID);
    assert_eq!(looping["directory"], "/home/user/work/project");
    // What the detector reads is kept; every other string is hashed.
    assert_eq!(looping["calls"][0]["input"]["filePath"], "notes.txt");
    assert_eq!(looping["calls"][30]["input"]["command"], "sh check.sh");
    assert_ne!(
        looping["calls"][30]["input"]["description"],
        "Run the check"
    );
    let title = looping["title"].as_str().unwrap();
    assert!(!title.contains("AW-LOOP"), "{title}");
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(
        !text.contains("make the check pass"),
        "prompts are scrubbed"
    );
    assert_eq!(
        sessions[2]["parent_id"], MAIN_ID,
        "the subagent keeps its parent"
    );
    // The session file judges as the transcripts do.
    let from_file = detect(&[path(&out)]);
    let from_transcripts = detect(&[path(&loop_file()), path(&project)]);
    for (a, b) in from_file["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .zip(from_transcripts["sessions"].as_array().unwrap())
    {
        for key in ["id", "flagged", "signals", "calls", "first_flag_at_call"] {
            assert_eq!(a[key], b[key], "{key} of {}", a["id"]);
        }
    }
}

#[test]
fn export_fixture_takes_labelled_claude_sessions_with_their_subagents() {
    let temp = Temp::new("export");
    let labels = temp.write(
        "labels.json",
        json!({MAIN_ID: {"label": "must_flag", "note": "its subagent rereads"}, HEALTHY_ID: "must_not_flag"})
            .to_string()
            .as_bytes(),
    );
    let out = temp.0.join("fixture.json");
    let run = |extra: &[&str]| {
        let mut args = vec![
            "export-fixture",
            "--labels",
            path(&labels),
            "--out",
            path(&out),
        ];
        args.extend_from_slice(extra);
        agentwatch(&args, None)
    };
    let subagent = scenario("subagent");
    let healthy = scenario("healthy");
    let loops = scenario("loop");
    let done = run(&[
        "--claude",
        path(&subagent),
        "--claude",
        path(&healthy),
        "--claude",
        path(&loops),
    ]);
    assert!(done.status.success(), "{}", stderr(&done));
    assert!(
        String::from_utf8_lossy(&done.stdout).contains("3 sessions (2 labelled, 1 descendants)"),
        "{}",
        String::from_utf8_lossy(&done.stdout)
    );
    let file = session_file(&out);
    let ids = ids(&file);
    let sub_id = format!("{MAIN_ID}:agent-{SUBAGENT_ID}");
    assert_eq!(ids, [MAIN_ID, sub_id.as_str(), HEALTHY_ID]);
    assert_eq!(file["sessions"][0]["label"], "must_flag");
    assert_eq!(file["sessions"][0]["note"], "its subagent rereads");
    assert_eq!(file["sessions"][1].get("label"), None);
    assert_eq!(file["sessions"][2]["label"], "must_not_flag");
    // A label naming no session read, and a database with transcripts, are refused.
    let labels_text = json!({"nope": "must_flag"}).to_string();
    std::fs::write(&labels, labels_text).unwrap();
    let refused = run(&["--claude", path(&healthy)]);
    assert_eq!(refused.status.code(), Some(65), "{}", stderr(&refused));
    assert!(stderr(&refused).contains("nope"), "{}", stderr(&refused));
    let both = run(&["--claude", path(&healthy), "--opencode-db", "/x.db"]);
    assert_eq!(both.status.code(), Some(64), "{}", stderr(&both));
}

/// The one file under `dir` whose name ends with `suffix`.
fn file_under(dir: &Path, suffix: &str) -> PathBuf {
    let mut stack = vec![dir.to_path_buf()];
    while let Some(at) = stack.pop() {
        for entry in std::fs::read_dir(&at).unwrap() {
            let p = entry.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if p.to_string_lossy().ends_with(suffix) {
                return p;
            }
        }
    }
    panic!("no {suffix} under {}", dir.display());
}

/// Calls a Codex rollout's lines hold, counted without the reader: its `function_call`,
/// `custom_tool_call` and `local_shell_call` items.
fn codex_calls(file: &Path) -> usize {
    std::fs::read_to_string(file)
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|l| {
            let kind = l["payload"]["type"].as_str().unwrap_or_default();
            l["type"] == "response_item"
                && ["function_call", "custom_tool_call", "local_shell_call"].contains(&kind)
        })
        .count()
}

/// Calls a Gemini session's final history holds, counted without the reader: the
/// `toolCalls` of the latest line of each message id.
fn gemini_calls(file: &Path) -> usize {
    let mut latest: Vec<(String, usize)> = Vec::new();
    for line in std::fs::read_to_string(file).unwrap().lines() {
        let v: Value = serde_json::from_str(line).unwrap_or(Value::Null);
        let (Some(id), Some(calls)) = (v["id"].as_str(), v["toolCalls"].as_array()) else {
            continue;
        };
        match latest.iter_mut().find(|(seen, _)| seen == id) {
            Some(entry) => entry.1 = calls.len(),
            None => latest.push((id.to_owned(), calls.len())),
        }
    }
    latest.iter().map(|(_, n)| n).sum()
}

#[test]
fn codex_and_gemini_files_are_read_call_by_call_and_keyed_by_their_agent() {
    let codex = Path::new(FIXTURES).join("../../codex/0.169.0");
    let gemini = Path::new(FIXTURES).join("../../gemini/0.61.0");
    let dir = agentwatch_testkit::TempDir::new("aw-detect-agents");
    let rollout = file_under(&codex.join("loop"), ".jsonl");
    let zst = dir.path.join(format!(
        "{}.zst",
        rollout.file_name().unwrap().to_string_lossy()
    ));
    let bytes = std::fs::read(&rollout).unwrap();
    std::fs::write(&zst, zstd::encode_all(&bytes[..], 3).unwrap()).unwrap();
    for (agent, file, counted, looping) in [
        ("codex", rollout.clone(), codex_calls(&rollout), true),
        ("codex", zst, codex_calls(&rollout), true),
        (
            "codex",
            file_under(&codex.join("healthy"), ".jsonl"),
            0,
            false,
        ),
        (
            "gemini",
            file_under(&gemini.join("loop"), ".jsonl"),
            0,
            true,
        ),
        (
            "gemini",
            file_under(&gemini.join("healthy"), ".jsonl"),
            0,
            false,
        ),
    ] {
        let counted = if counted > 0 {
            counted
        } else if agent == "codex" {
            codex_calls(&file)
        } else {
            gemini_calls(&file)
        };
        let v = detect(&[path(&file)]);
        let s = &v["sessions"][0];
        assert_eq!(s["agent"], agent, "{}", file.display());
        assert_eq!(
            s["calls"],
            counted as u64,
            "every call read: {}",
            file.display()
        );
        assert_eq!(s["flagged"], looping, "{}", file.display());
        let key = format!("{agent}-loop:{}", s["id"].as_str().unwrap());
        assert_eq!(v["trees"][0]["dedup_key"], key);
        if looping {
            // The scripted loop is the session's last 20 calls.
            let start = counted as u64 - 20;
            let first = s["first_flag_at_call"].as_u64().unwrap();
            assert!(
                first <= start + WITHIN,
                "{}: loop from call {} flagged at call {first}",
                file.display(),
                start + 1
            );
        } else {
            assert_eq!(s["first_flag_at_call"], Value::Null);
        }
    }
}
