//! The reader on hand-written transcripts, one per documented layout and quirk.

use super::*;
use serde_json::json;

const SID: &str = "4d56a0c2-0000-4000-8000-000000000001";

/// A transcript being written: lines with the envelope Claude Code puts on each.
struct Transcript {
    lines: Vec<String>,
    sidechain: bool,
    agent: Option<&'static str>,
    clock: i64,
}

impl Transcript {
    fn new() -> Self {
        Self {
            lines: Vec::new(),
            sidechain: false,
            agent: None,
            clock: 0,
        }
    }

    /// Lines of a subagent (`isSidechain`, `agentId`), in its own file or inline.
    fn subagent(agent: Option<&'static str>) -> Self {
        Self {
            sidechain: true,
            agent,
            ..Self::new()
        }
    }

    fn envelope(
        &mut self,
        kind: &str,
        uuid: &str,
        parent: Option<&str>,
    ) -> serde_json::Map<String, Value> {
        self.clock += 1500;
        let ts = jiff::Timestamp::from_millisecond(1_796_516_888_000 + self.clock).unwrap();
        let mut line = json!({
            "parentUuid": parent, "isSidechain": self.sidechain, "type": kind, "uuid": uuid,
            "timestamp": ts.to_string(), "cwd": "/home/u/proj", "sessionId": SID,
            "version": "2.1.328", "gitBranch": "main", "userType": "external"
        });
        if let Some(agent) = self.agent {
            line["agentId"] = json!(agent);
        }
        let Value::Object(map) = line else {
            unreachable!()
        };
        map
    }

    fn push(&mut self, line: serde_json::Map<String, Value>) -> &mut Self {
        self.lines.push(Value::Object(line).to_string());
        self
    }

    fn prompt(&mut self, uuid: &str, parent: Option<&str>, text: &str) -> &mut Self {
        let mut line = self.envelope("user", uuid, parent);
        line.insert("message".into(), json!({"role": "user", "content": text}));
        self.push(line)
    }

    /// An assistant line with these `tool_use` blocks (`(id, name, input)`).
    fn calls(&mut self, uuid: &str, msg: &str, uses: &[(&str, &str, Value)]) -> &mut Self {
        let mut line = self.envelope("assistant", uuid, None);
        let content: Vec<Value> = uses
            .iter()
            .map(|(id, name, input)| json!({"type": "tool_use", "id": id, "name": name, "input": input}))
            .collect();
        line.insert(
            "message".into(),
            json!({"id": msg, "type": "message", "role": "assistant", "model": "claude-opus-5-5",
                   "content": content, "stop_reason": "tool_use"}),
        );
        self.push(line)
    }

    fn call(&mut self, uuid: &str, id: &str, name: &str, input: Value) -> &mut Self {
        self.calls(uuid, &format!("msg_{uuid}"), &[(id, name, input)])
    }

    /// A user line with one `tool_result` (`content` as given: a string or blocks) and the
    /// line's `toolUseResult` (none when `Value::Null`).
    fn result(
        &mut self,
        uuid: &str,
        id: &str,
        content: Value,
        is_error: bool,
        detail: Value,
    ) -> &mut Self {
        let mut line = self.envelope("user", uuid, None);
        let mut block = json!({"tool_use_id": id, "type": "tool_result", "content": content});
        if is_error {
            block["is_error"] = json!(true);
        }
        line.insert(
            "message".into(),
            json!({"role": "user", "content": [block]}),
        );
        if !detail.is_null() {
            line.insert("toolUseResult".into(), detail);
        }
        self.push(line)
    }

    fn raw(&mut self, line: &str) -> &mut Self {
        self.lines.push(line.to_owned());
        self
    }

    fn bytes(&self) -> Vec<u8> {
        let mut text = self.lines.join("\n");
        text.push('\n');
        text.into_bytes()
    }
}

fn read_all(kind: FileKind, bytes: &[u8]) -> ClaudeReader {
    let mut reader = ClaudeReader::new(kind);
    for line in bytes.split(|b| *b == b'\n') {
        reader.push_line(line);
    }
    reader
}

fn main_kind() -> FileKind {
    FileKind::Main {
        session_id: Some(SID.to_owned()),
    }
}

fn tools(calls: &[Call]) -> Vec<&str> {
    calls.iter().map(|c| c.tool.as_str()).collect()
}

fn read_result(path: &str, total: u64) -> Value {
    json!({"type": "text", "file": {"filePath": path, "content": "…", "numLines": total, "startLine": 1, "totalLines": total}})
}

#[test]
fn a_session_file_reads_into_calls_and_meta() {
    let mut t = Transcript::new();
    t.raw(r#"{"type":"queue-operation","operation":"enqueue","timestamp":"2026-12-06T00:28:08.573Z","sessionId":"4d56a0c2-0000-4000-8000-000000000001","content":"fix the tests"}"#)
        .prompt("u1", None, "  fix   the\ntests  ")
        .call("a1", "toolu_1", "Read", json!({"file_path": "/home/u/proj/a.py"}))
        .result("r1", "toolu_1", json!("1\tx"), false, read_result("/home/u/proj/a.py", 40))
        .call("a2", "toolu_2", "Bash", json!({"command": "pytest -x", "description": "run"}))
        .result("r2", "toolu_2", json!("Exit code 1\nFAILED"), true, json!("Error: Exit code 1\nFAILED"))
        .call("a3", "toolu_3", "Grep", json!({"pattern": "def f", "path": "src"}))
        .result("r3", "toolu_3", json!("src/a.py"), false, json!({"mode": "files_with_matches", "numFiles": 1}));
    let mut reader = read_all(main_kind(), &t.bytes());
    let calls = reader.take_calls();
    assert_eq!(tools(&calls), ["read", "bash", "grep"]);
    assert_eq!(calls[0].input, json!({"filePath": "/home/u/proj/a.py"}));
    assert_eq!(
        calls[0].metadata,
        json!({"total_lines": 40, "lines_read": 40})
    );
    assert_eq!(calls[1].status, CallStatus::Error);
    assert_eq!(calls[1].metadata, json!({"exit": 1}));
    assert_eq!(calls[2].input, json!({"pattern": "def f", "path": "src"}));
    // The two lines' timestamps bracket each call.
    let time = calls[0].time.unwrap();
    assert_eq!(time.end.unwrap() - time.start.unwrap(), 1500);
    assert_eq!(calls[0].output_hash, Some(output_hash("1\tx")));
    let meta = reader.meta();
    assert_eq!(meta.session_id.as_deref(), Some(SID));
    assert_eq!(meta.parent_session_id, None);
    assert_eq!(meta.title.as_deref(), Some("fix the tests"));
    assert_eq!(meta.title_source, Some(TitleSource::Prompt));
    assert_eq!(meta.cwd.as_deref(), Some("/home/u/proj"));
    assert_eq!(meta.git_branch.as_deref(), Some("main"));
    assert_eq!(meta.model.as_deref(), Some("claude-opus-5-5"));
    assert_eq!(meta.version.as_deref(), Some("2.1.328"));
    assert_eq!(
        meta.counters,
        Counters {
            lines: 8,
            calls: 3,
            completed: 3,
            ..Counters::default()
        }
    );
    assert!(reader.take_calls().is_empty(), "a take empties the queue");
}

#[test]
fn a_subagent_file_of_the_current_layout_is_its_own_session_under_the_parent() {
    let mut t = Transcript::subagent(Some("a3ef12"));
    t.prompt("u1", None, "look for the bug")
        .call("a1", "toolu_s1", "Read", json!({"file_path": "a.txt"}))
        // Subagent transcripts omit toolUseResult on successful results.
        .result("r1", "toolu_s1", json!("1\tbye"), false, Value::Null);
    let kind = FileKind::Subagent {
        agent_id: Some("a3ef12".into()),
        parent_session_id: Some(SID.into()),
        agent_type: Some("Explore".into()),
    };
    let mut reader = read_all(kind, &t.bytes());
    let meta = reader.meta().clone();
    assert_eq!(meta.session_id, Some(format!("{SID}:agent-a3ef12")));
    assert_eq!(meta.parent_session_id.as_deref(), Some(SID));
    assert_eq!(meta.agent_id.as_deref(), Some("a3ef12"));
    assert_eq!(meta.title.as_deref(), Some("look for the bug"));
    let sessions = reader.take_sessions();
    assert_eq!(sessions.len(), 1, "a subagent's lines are all its own");
    assert_eq!(sessions[0].agent.as_deref(), Some("Explore"));
    assert_eq!(tools(&sessions[0].calls), ["read"]);
    assert_eq!(sessions[0].calls[0].metadata, Value::Null);
}

#[test]
fn an_old_flat_agent_file_takes_its_parent_from_its_lines() {
    let mut t = Transcript::subagent(Some("old7"));
    t.prompt("u1", None, "task")
        .call("a1", "toolu_f1", "Glob", json!({"pattern": "**/*.rs"}))
        .result(
            "r1",
            "toolu_f1",
            json!("src/lib.rs"),
            false,
            json!({"numFiles": 1, "filenames": ["src/lib.rs"]}),
        );
    let sessions = read_claude_sessions(&t.bytes(), "/x/projects/p/agent-old7.jsonl").unwrap();
    assert_eq!(sessions.len(), 1);
    assert_eq!(sessions[0].id, format!("{SID}:agent-old7"));
    assert_eq!(sessions[0].parent_id.as_deref(), Some(SID));
    assert_eq!(tools(&sessions[0].calls), ["glob"]);
}

#[test]
fn inline_sidechains_become_child_sessions_of_the_file() {
    let mut main = Transcript::new();
    main.prompt("m1", None, "do two things").call(
        "m2",
        "toolu_t1",
        "Task",
        json!({"description": "look", "prompt": "look around", "subagent_type": "Explore"}),
    );
    // A sidechain without agentId (the oldest layout): chained by parentUuid.
    let mut side = Transcript::subagent(None);
    side.clock = 10_000;
    side.prompt("s1", None, "look around")
        .call("s2", "toolu_s1", "Read", json!({"file_path": "a"}))
        .result("s3", "toolu_s1", json!("x"), false, Value::Null);
    let mut lines = main.lines.clone();
    for (i, line) in side.lines.iter().enumerate() {
        // Each sidechain line's parent is the one before it.
        let mut value: Value = serde_json::from_str(line).unwrap();
        if i > 0 {
            value["parentUuid"] = json!(format!("s{i}"));
        }
        lines.push(value.to_string());
    }
    // A second sidechain with agentId, interleaved.
    let mut tagged = Transcript::subagent(Some("b2"));
    tagged
        .prompt("x1", None, "other")
        .call("x2", "toolu_x1", "Bash", json!({"command": "ls"}))
        .result(
            "x3",
            "toolu_x1",
            json!("a"),
            false,
            json!({"stdout": "a", "stderr": "", "interrupted": false}),
        );
    lines.extend(tagged.lines.iter().cloned());
    main.lines = lines;
    main.result(
        "m3",
        "toolu_t1",
        json!("found it\nagentId: b2"),
        false,
        json!({"status": "completed", "agentId": "b2", "totalToolUseCount": 1}),
    );
    let sessions = read_claude_sessions(&main.bytes(), &format!("{SID}.jsonl")).unwrap();
    let summary: Vec<(String, Option<String>, Vec<&str>)> = sessions
        .iter()
        .map(|s| (s.id.clone(), s.parent_id.clone(), tools(&s.calls)))
        .collect();
    assert_eq!(
        summary,
        [
            (SID.to_owned(), None, vec!["task"]),
            (
                format!("{SID}:sidechain-s1"),
                Some(SID.to_owned()),
                vec!["read"]
            ),
            (
                format!("{SID}:agent-b2"),
                Some(SID.to_owned()),
                vec!["bash"]
            ),
        ]
    );
    assert_eq!(sessions[0].title.as_deref(), Some("do two things"));
    assert_eq!(sessions[1].title.as_deref(), Some("look around"));
    assert_eq!(sessions[2].agent.as_deref(), Some("Explore"));
    assert_eq!(
        sessions[0].calls[0].metadata,
        json!({"toolUseId": "toolu_t1", "agentId": "b2"})
    );
}

#[test]
fn corrupt_lines_and_unknown_records_are_skipped_and_counted() {
    let mut t = Transcript::new();
    t.prompt("u1", None, "go")
        .raw("{\"type\":\"assistant\",\"message\":{\"content\":[{\"type\":\"tool_use\"")
        .raw("not json at all")
        .raw("[1,2,3]")
        .raw("")
        .raw("   ")
        .raw(r#"{"type":"api-request","sessionId":"x","params":{"model":"m"}}"#)
        .raw(r#"{"type":"attachment","attachment":{"type":"date","date":"2026-12-06"},"uuid":"z"}"#)
        .raw(r#"{"type":"last-prompt","lastPrompt":"go","leafUuid":"z"}"#)
        .raw(r#"{"type":"tools-used","tools":["Read"]}"#)
        .raw(r#"{"type":"a-record-from-the-future","message":{"content":[{"type":"tool_use","id":"q","name":"Read","input":{}}]}}"#)
        .raw(r#"{"type":"progress","data":{"type":"agent_progress","message":{"type":"assistant","message":{"content":[{"type":"tool_use","id":"p1","name":"Read","input":{}}]}}}}"#)
        .call("a1", "toolu_1", "Read", json!({"file_path": "a"}))
        .raw("\u{0}\u{1}garbage\u{7f}")
        .result("r1", "toolu_1", json!("x"), false, Value::Null);
    let mut reader = read_all(main_kind(), &t.bytes());
    assert_eq!(tools(&reader.take_calls()), ["read"]);
    let counters = &reader.meta().counters;
    assert_eq!(counters.corrupt_lines, 4);
    assert_eq!(counters.lines, 13);
    assert_eq!((counters.calls, counters.completed), (1, 1));
    let unknown: Vec<(&str, u64)> = counters
        .unknown_types
        .iter()
        .map(|(k, n)| (k.as_str(), *n))
        .collect();
    assert_eq!(
        unknown,
        [("a-record-from-the-future", 1)],
        "named, not fatal"
    );
}

#[test]
fn unknown_record_types_are_named_up_to_a_bound() {
    let mut t = Transcript::new();
    for i in 0..40 {
        t.raw(&format!(r#"{{"type":"new-{i}","sessionId":"s"}}"#));
    }
    t.raw(r#"{"type":"new-0"}"#);
    let reader = read_all(main_kind(), &t.bytes());
    let unknown = &reader.meta().counters.unknown_types;
    assert_eq!(unknown.len(), crate::UNKNOWN_TYPES + 1);
    assert_eq!(unknown["new-0"], 2);
    assert_eq!(unknown["…"], 40 - crate::UNKNOWN_TYPES as u64);
}

#[test]
fn one_api_response_over_several_lines_pairs_each_call() {
    let mut t = Transcript::new();
    t.prompt("u1", None, "go")
        // One response, two lines (one block each), results in the other order.
        .calls("a1", "msg_1", &[("toolu_1", "Write", json!({"file_path": "b.txt", "content": "x\n"}))])
        .calls("a2", "msg_1", &[("toolu_2", "Read", json!({"file_path": "c.txt"}))])
        .result("r2", "toolu_2", json!("1\tc"), false, read_result("c.txt", 1))
        .result("r1", "toolu_1", json!("File created successfully at: b.txt"), false,
            json!({"type": "create", "filePath": "b.txt", "content": "x\n", "structuredPatch": [], "originalFile": null}))
        // One line with two blocks, answered by one line with two results.
        .calls("a3", "msg_2", &[("toolu_3", "Bash", json!({"command": "true"})), ("toolu_4", "Bash", json!({"command": "false"}))]);
    let mut both = t.envelope("user", "r3", None);
    both.insert(
        "message".into(),
        json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_3", "content": ""},
            {"type": "tool_result", "tool_use_id": "toolu_4", "content": "Exit code 1", "is_error": true}]}),
    );
    both.insert(
        "toolUseResult".into(),
        json!({"stdout": "", "interrupted": true}),
    );
    t.push(both);
    let mut reader = read_all(main_kind(), &t.bytes());
    let calls = reader.take_calls();
    assert_eq!(tools(&calls), ["read", "write", "bash", "bash"]);
    assert_eq!(
        calls[1].metadata,
        json!({"type": "create", "diff": "(create)", "filediff": {"additions": 0, "deletions": 0}})
    );
    // The shared toolUseResult (interrupted) is not applied to either of two results.
    assert_eq!(calls[2].metadata, json!({"exit": 0}));
    assert_eq!(calls[3].metadata, json!({"exit": 1}));
}

#[test]
fn string_and_block_content_hash_alike() {
    let mut t = Transcript::new();
    t.call("a1", "toolu_1", "Bash", json!({"command": "make"}))
        .result("r1", "toolu_1", json!("line one\nline two"), false, Value::Null)
        .call("a2", "toolu_2", "Bash", json!({"command": "make"}))
        .result("r2", "toolu_2", json!([{"type": "text", "text": "line one"}, {"type": "image", "source": {}}, {"type": "text", "text": "line two"}]), false, Value::Null);
    let calls = read_all(main_kind(), &t.bytes()).take_calls();
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0].output_hash, calls[1].output_hash);
}

#[test]
fn orphans_wait_then_finish_as_calls_without_a_result() {
    let mut t = Transcript::new();
    t.call("a1", "toolu_1", "Bash", json!({"command": "sleep 1000"}))
        .call("a2", "toolu_2", "Read", json!({"file_path": "a"}))
        .result("r2", "toolu_2", json!("x"), false, Value::Null)
        // A result for a call never seen.
        .result("r3", "toolu_404", json!("x"), false, Value::Null);
    let mut reader = read_all(main_kind(), &t.bytes());
    assert_eq!(tools(&reader.take_calls()), ["read"]);
    assert_eq!(reader.pending_calls(), 1, "the sleep is still running");
    assert_eq!(reader.meta().counters.unmatched_results, 1);
    reader.finish();
    let calls = reader.take_calls();
    assert_eq!(tools(&calls), ["bash"]);
    assert_eq!(calls[0].status, CallStatus::Running);
    assert!(calls[0].time.unwrap().end.is_none());
    assert_eq!(reader.meta().counters.orphans, 1);
}

#[test]
fn calls_never_answered_are_bounded() {
    let mut reader = ClaudeReader::new(main_kind());
    let mut t = Transcript::new();
    for i in 0..MAX_PENDING + 10 {
        t.call(
            &format!("a{i}"),
            &format!("toolu_{i}"),
            "Bash",
            json!({"command": "x"}),
        );
    }
    for line in t.lines.iter() {
        reader.push_line(line.as_bytes());
    }
    assert_eq!(reader.pending_calls(), MAX_PENDING);
    assert_eq!(reader.meta().counters.orphans, 10);
    // The oldest were dropped: its late result is unmatched, a recent one still pairs.
    let mut late = Transcript::new();
    late.result("r0", "toolu_0", json!("x"), false, Value::Null)
        .result(
            "r1",
            &format!("toolu_{}", MAX_PENDING + 9),
            json!("x"),
            false,
            Value::Null,
        );
    for line in late.lines.iter() {
        reader.push_line(line.as_bytes());
    }
    assert_eq!(reader.take_calls().len(), 1);
    assert_eq!(reader.meta().counters.unmatched_results, 1);
}

#[test]
fn a_call_written_twice_is_read_once() {
    let mut t = Transcript::new();
    t.call("a1", "toolu_1", "Read", json!({"file_path": "a"}))
        .call("a1", "toolu_1", "Read", json!({"file_path": "a"}))
        .result("r1", "toolu_1", json!("x"), false, Value::Null)
        .call("a1", "toolu_1", "Read", json!({"file_path": "a"}))
        .result("r1", "toolu_1", json!("x"), false, Value::Null);
    let mut reader = read_all(main_kind(), &t.bytes());
    assert_eq!(reader.take_calls().len(), 1);
    assert_eq!(reader.pending_calls(), 0);
    assert_eq!(reader.meta().counters.calls, 1);
}

#[test]
fn titles_come_from_records_before_the_first_prompt() {
    let long = "word ".repeat(60);
    for (lines, title, source) in [
        (vec![r#"{"type":"user","message":{"role":"user","content":"<command-name>/clear</command-name>"},"uuid":"1"}"#.to_owned(),
              r#"{"type":"user","isMeta":true,"message":{"role":"user","content":"Caveat: the messages below"},"uuid":"2"}"#.to_owned(),
              r#"{"type":"user","message":{"role":"user","content":[{"type":"text","text":"<system-reminder>x</system-reminder>"},{"type":"text","text":"real ask"}]},"uuid":"3"}"#.to_owned()],
         Some("real ask".to_owned()), Some(TitleSource::Prompt)),
        (vec![format!(r#"{{"type":"user","message":{{"role":"user","content":"{long}"}},"uuid":"1"}}"#)],
         Some(format!("{}…", long.trim_end().chars().take(TITLE_CHARS).collect::<String>())), Some(TitleSource::Prompt)),
        (vec![r#"{"type":"user","message":{"role":"user","content":"first"},"uuid":"1"}"#.to_owned(),
              r#"{"type":"summary","summary":"Fix the parser","leafUuid":"1"}"#.to_owned(),
              r#"{"type":"user","message":{"role":"user","content":"second"},"uuid":"2"}"#.to_owned()],
         Some("Fix the parser".to_owned()), Some(TitleSource::Summary)),
        (vec![r#"{"type":"custom-title","customTitle":"mine","sessionId":"s"}"#.to_owned(),
              r#"{"type":"ai-title","aiTitle":"theirs","sessionId":"s"}"#.to_owned(),
              r#"{"type":"summary","summary":"older","leafUuid":"1"}"#.to_owned()],
         Some("mine".to_owned()), Some(TitleSource::CustomTitle)),
        (vec![r#"{"type":"user","message":{"role":"user","content":"   "},"uuid":"1"}"#.to_owned()], None, None),
    ] {
        let mut reader = ClaudeReader::new(main_kind());
        for line in &lines {
            reader.push_line(line.as_bytes());
        }
        assert_eq!((reader.meta().title.clone(), reader.meta().title_source), (title, source), "{lines:?}");
    }
}

#[test]
fn the_reader_continues_exactly_after_a_serde_round_trip() {
    let mut t = Transcript::new();
    t.prompt("u1", None, "go")
        .call("a1", "toolu_1", "Read", json!({"file_path": "a"}))
        .call("a2", "toolu_2", "Bash", json!({"command": "sleep 5"}))
        .result("r1", "toolu_1", json!("x"), false, read_result("a", 3))
        .result("r2", "toolu_2", json!("ok"), false, json!({"stdout": "ok"}));
    let split = 3;
    let mut straight = ClaudeReader::new(main_kind());
    let mut resumed = ClaudeReader::new(main_kind());
    for line in &t.lines[..split] {
        straight.push_line(line.as_bytes());
        resumed.push_line(line.as_bytes());
    }
    let saved = serde_json::to_string(&resumed).unwrap();
    let mut resumed: ClaudeReader = serde_json::from_str(&saved).unwrap();
    for line in &t.lines[split..] {
        straight.push_line(line.as_bytes());
        resumed.push_line(line.as_bytes());
    }
    assert_eq!(straight, resumed);
    assert_eq!(resumed.take_calls().len(), 2);
}

#[test]
fn sniff_tells_a_claude_transcript_from_other_formats() {
    let mut t = Transcript::new();
    t.prompt("u1", None, "go");
    for (bytes, expected) in [
        (t.bytes(), true),
        (
            b"{\"type\":\"summary\",\"summary\":\"x\",\"leafUuid\":\"1\"}\n".to_vec(),
            true,
        ),
        (
            b"garbage\n{\"type\":\"queue-operation\",\"sessionId\":\"s\"}\n".to_vec(),
            true,
        ),
        (
            b"{\"timestamp\":\"t\",\"type\":\"session_meta\",\"payload\":{\"id\":\"x\"}}\n"
                .to_vec(),
            false,
        ),
        (
            b"{\"sessionId\":\"s\",\"projectHash\":\"h\",\"startTime\":\"t\"}\n".to_vec(),
            false,
        ),
        (
            b"{\n  \"format\": \"agentwatch-sessions/1\",\n  \"sessions\": []\n}\n".to_vec(),
            false,
        ),
        (b"".to_vec(), false),
    ] {
        assert_eq!(
            sniff(&bytes),
            expected,
            "{}",
            String::from_utf8_lossy(&bytes)
        );
    }
}

#[test]
fn a_whole_file_that_is_not_a_transcript_is_an_error_naming_why() {
    let err = read_claude_sessions(b"", "x.jsonl").unwrap_err();
    assert_eq!(
        err.to_string(),
        "x.jsonl: not a Claude Code transcript: it is empty"
    );
    let err = read_claude_sessions(b"{\"a\":1}\n", "y.jsonl").unwrap_err();
    assert!(
        err.to_string()
            .contains("none of its first 64 lines is a record of Claude Code"),
        "{err}"
    );
    let err = read_claude_sessions(b"{\"$rewindTo\":\"m1\"}\n", "w.jsonl").unwrap_err();
    assert!(
        err.to_string().ends_with("it is a Gemini CLI session"),
        "{err}"
    );
    let err = read_claude_sessions(b"<html>\n", "z.jsonl").unwrap_err();
    assert!(
        err.to_string().contains("none of its first 64 lines"),
        "{err}"
    );
}

#[test]
fn a_torn_last_line_of_a_whole_file_is_skipped_and_counted() {
    let mut t = Transcript::new();
    t.prompt("u1", None, "go")
        .call("a1", "toolu_1", "Read", json!({"file_path": "a"}))
        .result("r1", "toolu_1", json!("x"), false, Value::Null)
        .call("a2", "toolu_2", "Read", json!({"file_path": "b"}));
    let mut bytes = t.bytes();
    bytes.truncate(bytes.len() - 20);
    let sessions = read_claude_sessions(&bytes, "s.jsonl").unwrap();
    assert_eq!(tools(&sessions[0].calls), ["read"]);
    // Whole, the same last line without its newline is read.
    let mut whole = t.bytes();
    whole.pop();
    let sessions = read_claude_sessions(&whole, "s.jsonl").unwrap();
    assert_eq!(sessions[0].calls.len(), 2);
    assert_eq!(sessions[0].calls[1].status, CallStatus::Running);
}

#[test]
fn file_names_tell_the_kind() {
    assert_eq!(
        FileKind::from_file_name("/a/b/4d56.jsonl"),
        FileKind::Main {
            session_id: Some("4d56".into())
        }
    );
    assert_eq!(
        FileKind::from_file_name("agent-a1.jsonl"),
        FileKind::Subagent {
            agent_id: Some("a1".into()),
            parent_session_id: None,
            agent_type: None
        }
    );
}

/// `(what, tool, result content, is_error, toolUseResult, status read)`.
type RefusalRow = (&'static str, &'static str, Value, bool, Value, CallStatus);

fn refusal_rows() -> Vec<RefusalRow> {
    let reason = "agentwatch: you have run this exact Bash call 6 times with the same result";
    vec![
        (
            "a JSON deny",
            "Bash",
            json!(format!("PreToolUse:Bash hook error: {reason}")),
            true,
            json!(format!("Error: PreToolUse:Bash hook error: {reason}")),
            CallStatus::Blocked,
        ),
        (
            "an exit 2, the hook's command line shown",
            "Bash",
            json!(format!(
                "PreToolUse:Bash hook error: [/usr/bin/agentwatch hook claude]: {reason}"
            )),
            true,
            json!(format!(
                "Error: PreToolUse:Bash hook error: [/usr/bin/agentwatch hook claude]: {reason}"
            )),
            CallStatus::Blocked,
        ),
        (
            "text blocks, a Read",
            "Read",
            json!([{"type": "text", "text": format!("PreToolUse:Read hook error: {reason}")}]),
            true,
            Value::Null,
            CallStatus::Blocked,
        ),
        (
            "the toolUseResult alone says it",
            "Bash",
            json!("refused"),
            true,
            json!(format!("Error: PreToolUse:Bash hook error: {reason}")),
            CallStatus::Blocked,
        ),
        (
            "another hook's refusal",
            "Bash",
            json!("PreToolUse:Bash hook error: AGENTWATCH-LOOP: you have run this 6 times"),
            true,
            json!("Error: PreToolUse:Bash hook error: AGENTWATCH-LOOP: you have run this 6 times"),
            CallStatus::Error,
        ),
        (
            "a failing command that prints the words",
            "Bash",
            json!(format!("Exit code 1\nPreToolUse:Bash hook error: {reason}")),
            true,
            json!("Error: Exit code 1"),
            CallStatus::Error,
        ),
        (
            "not an error",
            "Bash",
            json!(format!("PreToolUse:Bash hook error: {reason}")),
            false,
            json!({"stdout": "", "stderr": "", "interrupted": false}),
            CallStatus::Completed,
        ),
    ]
}

/// A call refused by a `PreToolUse` hook, as Claude Code 2.1.328 writes it (`hooks.md`,
/// "Transcript records"): a Bash call, then its refusal. Only agentwatch's own (its reason
/// begins `agentwatch:`) is `blocked`; another hook's refusal stays an error.
#[test]
fn agentwatchs_own_refusals_are_blocked_and_no_other() {
    let deny = json!({"decision": "reject", "source": "hook", "reasonType": "hook", "reasonCode": "hook:PreToolUse"});
    for (what, tool, content, is_error, detail, want) in refusal_rows() {
        let mut t = Transcript::new();
        t.prompt("u1", None, "go")
            .call("a1", "toolu_1", tool, json!({"command": "python3 -c 1"}))
            .result("r1", "toolu_1", content, is_error, detail);
        let mut line: Value = serde_json::from_str(t.lines.last().unwrap()).unwrap();
        line["toolDenialKind"] = json!("permission-rule");
        line["permissionDecision"] = deny.clone();
        *t.lines.last_mut().unwrap() = line.to_string();
        let mut reader = read_all(main_kind(), &t.bytes());
        let calls = reader.take_calls();
        assert_eq!(calls.len(), 1, "{what}");
        assert_eq!(calls[0].status, want, "{what}");
        if want == CallStatus::Blocked {
            assert!(!calls[0].status.is_counted(), "{what}");
            // No exit: only agentwatch's reason, for the watch to tell a refusal from a stop.
            let metadata = calls[0].metadata.as_object().unwrap();
            assert_eq!(metadata.len(), 1, "{what}: no exit");
            assert!(
                metadata["refusal"]
                    .as_str()
                    .unwrap()
                    .starts_with("agentwatch:"),
                "{what}"
            );
        }
    }
}
