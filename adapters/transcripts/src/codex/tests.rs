use super::*;
use serde_json::json;

/// An envelope line `{timestamp, type, payload}` at second `s`.
fn line(s: u32, kind: &str, payload: Value) -> String {
    json!({"timestamp": format!("2026-12-06T02:00:{s:02}.000Z"), "type": kind, "payload": payload})
        .to_string()
}

fn meta(id: &str, extra: Value) -> String {
    let mut payload = json!({"id": id, "session_id": id, "cwd": "/work/p", "cli_version": "0.169.0",
        "originator": "codex_exec", "source": "exec", "model_provider": "scripted",
        "history_mode": "paginated", "base_instructions": {"text": "long"},
        "git": {"branch": "main", "commit_hash": "abc", "repository_url": "https://example.invalid/r"}});
    for (k, v) in extra.as_object().unwrap() {
        payload[k] = v.clone();
    }
    line(0, "session_meta", payload)
}

fn call(s: u32, id: &str, name: &str, arguments: &str) -> String {
    line(
        s,
        "response_item",
        json!({"type": "function_call", "name": name, "arguments": arguments, "call_id": id}),
    )
}

fn output(s: u32, id: &str, text: &str) -> String {
    line(
        s,
        "response_item",
        json!({"type": "function_call_output", "call_id": id, "output": text}),
    )
}

fn read(lines: &[String]) -> CodexReader {
    let mut reader = CodexReader::new(Some(ID.to_owned()));
    for l in lines {
        reader.push_line(l.as_bytes());
    }
    reader
}

const ID: &str = "01a24915-0aec-7243-9c78-3e5787bc986f";

fn exec_out(code: i32, body: &str) -> String {
    format!(
        "Chunk ID: 1a2b3c\nWall time: 0.0012 seconds\nProcess exited with code {code}\nOriginal token count: 3\nOutput:\n{body}"
    )
}

/// A paginated rollout as `codex exec` writes it: a failing test, a patch, a passing test.
fn paginated_lines() -> Vec<String> {
    vec![
        meta(ID, json!({})),
        line(
            0,
            "turn_context",
            json!({"cwd": "/work/p", "model": "gpt-5.5", "approval_policy": "never"}),
        ),
        line(
            0,
            "response_item",
            json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "<environment_context>\n  <cwd>/work/p</cwd>\n</environment_context>"}]}),
        ),
        line(
            0,
            "response_item",
            json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "AW: fix   the\nbuild"}]}),
        ),
        call(
            1,
            "c1",
            "exec_command",
            r#"{"cmd":"cargo test","yield_time_ms":1000}"#,
        ),
        line(
            2,
            "event_msg",
            json!({"type": "item_completed", "item": {"type": "CommandExecution", "id": "c1", "exit_code": 101, "status": "failed"}}),
        ),
        output(2, "c1", &exec_out(101, "error[E0308]")),
        line(
            3,
            "response_item",
            json!({"type": "custom_tool_call", "call_id": "c2", "name": "apply_patch", "input": "*** Begin Patch\n*** Update File: src/lib.rs\n@@\n-a\n+b\n*** End Patch\n"}),
        ),
        line(
            3,
            "event_msg",
            json!({"type": "item_completed", "item": {"type": "FileChange", "id": "c2", "status": "completed",
            "changes": {"/work/p/src/lib.rs": {"type": "update", "unified_diff": "@@ -1 +1 @@\n-a\n+b\n", "move_path": null}}}}),
        ),
        line(
            3,
            "response_item",
            json!({"type": "custom_tool_call_output", "call_id": "c2", "output": "Exit code: 0\nWall time: 0 seconds\nOutput:\nSuccess. Updated the following files:\nM src/lib.rs\n"}),
        ),
        call(4, "c3", "exec_command", r#"{"cmd":"cargo test"}"#),
        line(
            5,
            "event_msg",
            json!({"type": "item_completed", "item": {"type": "CommandExecution", "id": "c3", "exit_code": 0}}),
        ),
        output(5, "c3", &exec_out(0, "ok")),
        line(
            6,
            "event_msg",
            json!({"type": "token_count", "info": {"total_token_usage": {}}}),
        ),
        line(6, "token_usage_record", json!({"usage": {}})),
        line(6, "world_state", json!({"full": true, "state": {}})),
    ]
}

#[test]
fn a_paginated_rollout_reads_as_codex_exec_writes_it() {
    let mut reader = read(&paginated_lines());
    let calls = reader.take_calls();
    let tools: Vec<&str> = calls.iter().map(|c| c.tool.as_str()).collect();
    assert_eq!(tools, ["bash", "apply_patch", "bash"]);
    assert_eq!(calls[0].input, json!({"command": "cargo test"}));
    assert_eq!(
        (&calls[0].status, &calls[0].metadata),
        (&CallStatus::Error, &json!({"exit": 101}))
    );
    assert_eq!(
        calls[0].time.unwrap().start,
        unix_ms("2026-12-06T02:00:01.000Z")
    );
    assert_eq!(
        calls[0].time.unwrap().end,
        unix_ms("2026-12-06T02:00:02.000Z")
    );
    assert_eq!(
        calls[1].input["patchText"]
            .as_str()
            .unwrap()
            .lines()
            .count(),
        6
    );
    assert_eq!(calls[1].status, CallStatus::Completed);
    assert_eq!(
        calls[1].metadata["files"],
        json!([{"filePath": "/work/p/src/lib.rs", "type": "update", "additions": 1, "deletions": 1}])
    );
    assert!(calls[1].metadata["diff"].as_str().unwrap().contains("+b"));
    assert_eq!(
        (&calls[2].status, &calls[2].metadata),
        (&CallStatus::Completed, &json!({"exit": 0}))
    );
    let meta = reader.meta();
    assert_eq!(meta.thread_id.as_deref(), Some(ID));
    assert_eq!(meta.title.as_deref(), Some("AW: fix the build"));
    assert_eq!(meta.cwd.as_deref(), Some("/work/p"));
    assert_eq!(meta.model.as_deref(), Some("gpt-5.5"));
    assert_eq!(meta.git_branch.as_deref(), Some("main"));
    assert_eq!(meta.source.as_deref(), Some("exec"));
    assert_eq!(meta.history_mode.as_deref(), Some("paginated"));
    assert_eq!(
        (
            meta.counters.calls,
            meta.counters.completed,
            meta.counters.lines
        ),
        (3, 3, 16)
    );
    assert_eq!(reader.pending_calls(), 0);
}

#[test]
fn the_same_command_seeing_the_same_output_hashes_the_same() {
    let lines = [
        call(1, "c1", "exec_command", r#"{"cmd":"sh check.sh"}"#),
        output(
            1,
            "c1",
            "Chunk ID: aaaaaa\nWall time: 0.0100 seconds\nProcess exited with code 1\nOutput:\nfail\n",
        ),
        call(
            2,
            "c2",
            "exec_command",
            r#"{"cmd":"sh check.sh","yield_time_ms":2000}"#,
        ),
        output(
            2,
            "c2",
            "Chunk ID: bbbbbb\nWall time: 0.0300 seconds\nProcess exited with code 1\nOutput:\nfail\n",
        ),
    ];
    let calls = read(&lines).take_calls();
    assert_eq!(calls[0].input, calls[1].input);
    assert_eq!(calls[0].output_hash, calls[1].output_hash);
}

#[test]
fn a_running_process_and_its_polls() {
    let lines = [
        call(
            1,
            "c1",
            "exec_command",
            r#"{"cmd":"npm run dev","yield_time_ms":500}"#,
        ),
        output(
            1,
            "c1",
            "Chunk ID: e8\nWall time: 0.5 seconds\nProcess running with session ID 83418\nOriginal token count: 0\nOutput:\n",
        ),
        call(
            2,
            "c2",
            "write_stdin",
            r#"{"session_id":83418,"chars":"","yield_time_ms":5000}"#,
        ),
        output(
            2,
            "c2",
            "Chunk ID: e9\nWall time: 5.0 seconds\nProcess running with session ID 83418\nOutput:\nready\n",
        ),
        call(
            3,
            "c3",
            "write_stdin",
            r#"{"session_id":83418,"chars":"q\n"}"#,
        ),
        output(
            3,
            "c3",
            "Chunk ID: f0\nWall time: 0.1 seconds\nProcess exited with code 0\nOutput:\nbye\n",
        ),
        // The process's own record comes after the output that said it was running.
        line(
            4,
            "event_msg",
            json!({"type": "item_completed", "item": {"type": "CommandExecution", "id": "c1", "exit_code": 0}}),
        ),
    ];
    let calls = read(&lines).take_calls();
    let shape: Vec<(&str, &Value, &CallStatus)> = calls
        .iter()
        .map(|c| (c.tool.as_str(), &c.metadata, &c.status))
        .collect();
    assert_eq!(
        shape,
        [
            ("bash", &Value::Null, &CallStatus::Completed),
            ("poll", &Value::Null, &CallStatus::Completed),
            ("write_stdin", &Value::Null, &CallStatus::Completed),
        ]
    );
    assert_eq!(calls[1].input, json!({"session_id": 83418}));
    assert_eq!(calls[2].input, json!({"session_id": 83418, "chars": "q\n"}));
}

#[test]
fn arguments_that_are_not_json_are_an_opaque_identity_never_an_error() {
    let lines = [
        call(1, "c1", "exec_command", "cmd=[REDACTED 41 chars]"),
        output(
            1,
            "c1",
            "failed to parse function arguments: expected value at line 1 column 1",
        ),
        call(2, "c2", "exec_command", "cmd=[REDACTED 41 chars]"),
        output(
            2,
            "c2",
            "failed to parse function arguments: expected value at line 1 column 1",
        ),
        call(3, "c3", "exec_command", r#"{"cmd": "ls", "trunc"#),
        output(3, "c3", "[output redacted]"),
        line(
            4,
            "response_item",
            json!({"type": "function_call", "name": "exec_command", "arguments": {"cmd": ["bash", "-lc", "ls"]}, "call_id": "c4"}),
        ),
        output(4, "c4", "ok"),
    ];
    let mut reader = read(&lines);
    let calls = reader.take_calls();
    assert_eq!(calls.len(), 4);
    assert_eq!(
        calls[0].input,
        json!({"arguments": "cmd=[REDACTED 41 chars]"})
    );
    assert_eq!(calls[0].input, calls[1].input);
    assert_eq!(calls[0].tool, "bash");
    assert_eq!(
        calls[2].input,
        json!({"arguments": r#"{"cmd": "ls", "trunc"#})
    );
    assert_eq!(calls[3].input, json!({"command": "ls"}));
    assert_eq!(reader.meta().counters.corrupt_lines, 0);
}

/// A legacy-history rollout: patches with their `patch_apply_end`, a shell command with its
/// `exec_command_end`, a patch known only by its output.
fn legacy_lines() -> Vec<String> {
    vec![
        meta(ID, json!({"history_mode": "legacy"})),
        line(
            0,
            "event_msg",
            json!({"type": "user_message", "message": "make it pass", "images": []}),
        ),
        line(
            1,
            "response_item",
            json!({"type": "custom_tool_call", "status": "completed", "call_id": "p1", "name": "apply_patch", "input": "*** Begin Patch\n*** Add File: new.txt\n+x\n*** End Patch"}),
        ),
        line(
            1,
            "event_msg",
            json!({"type": "patch_apply_end", "call_id": "p1", "success": true, "stdout": "Success.", "stderr": "",
            "changes": {"/p/new.txt": {"add": {"content": "x\ny\n"}}, "/p/old.txt": {"delete": {"content": "z\n"}}}}),
        ),
        line(
            1,
            "response_item",
            json!({"type": "custom_tool_call_output", "call_id": "p1", "output": "{\"output\":\"Success. Updated the following files:\\nA new.txt\\n\",\"metadata\":{\"exit_code\":0}}"}),
        ),
        line(
            2,
            "response_item",
            json!({"type": "custom_tool_call", "call_id": "p2", "name": "apply_patch", "input": "*** Begin Patch\n*** Update File: gone.txt\n@@\n-a\n+b\n*** End Patch"}),
        ),
        line(
            2,
            "event_msg",
            json!({"type": "patch_apply_end", "call_id": "p2", "success": false, "changes": {}}),
        ),
        line(
            2,
            "response_item",
            json!({"type": "custom_tool_call_output", "call_id": "p2", "output": "apply_patch verification failed: Failed to read gone.txt"}),
        ),
        call(
            3,
            "e1",
            "shell",
            r#"{"command":["bash","-lc","make test"],"workdir":"/p"}"#,
        ),
        line(
            3,
            "event_msg",
            json!({"type": "exec_command_end", "call_id": "e1", "exit_code": 2, "aggregated_output": "boom"}),
        ),
        output(
            3,
            "e1",
            "{\"output\":\"boom\",\"metadata\":{\"exit_code\":2,\"duration_seconds\":0.2}}",
        ),
        // No event, but the output reports the patch applied: its files come from the patch.
        call(
            4,
            "p3",
            "apply_patch",
            r#"{"input":"*** Begin Patch\n*** Update File: a.rs\n@@\n-x\n+y\n+z\n*** End Patch"}"#,
        ),
        output(
            4,
            "p3",
            "Exit code: 0\nOutput:\nSuccess. Updated the following files:\nM a.rs\n",
        ),
    ]
}

#[test]
fn legacy_history_lands_patches_by_their_event_and_exits_by_theirs() {
    let mut reader = read(&legacy_lines());
    let calls = reader.take_calls();
    assert_eq!(reader.meta().title.as_deref(), Some("make it pass"));
    assert_eq!(calls[0].status, CallStatus::Completed);
    assert_eq!(
        calls[0].metadata["files"],
        json!([{"filePath": "/p/new.txt", "type": "add", "additions": 2, "deletions": 0},
               {"filePath": "/p/old.txt", "type": "delete", "additions": 0, "deletions": 1}])
    );
    assert_eq!(
        (&calls[1].status, &calls[1].metadata),
        (&CallStatus::Error, &Value::Null)
    );
    assert_eq!(
        calls[2].input,
        json!({"command": "make test", "workdir": "/p"})
    );
    assert_eq!(
        (&calls[2].status, &calls[2].metadata),
        (&CallStatus::Error, &json!({"exit": 2}))
    );
    assert_eq!(
        calls[3].input["patchText"]
            .as_str()
            .map(|p| p.starts_with("*** Begin")),
        Some(true)
    );
    assert_eq!(
        calls[3].metadata["files"],
        json!([{"filePath": "a.rs", "type": "update", "additions": 2, "deletions": 1}])
    );
}

#[test]
fn the_bare_era_reads_without_envelopes_or_timestamps() {
    let lines = [
        r#"{"id":"44444444-4444-4444-8444-444444444444","timestamp":"2025-08-01T10:00:00.000Z","instructions":null,"git":{"branch":"dev","commit_hash":"c0"}}"#.to_owned(),
        r#"{"record_type":"state"}"#.to_owned(),
        r#"{"type":"message","role":"user","content":[{"type":"input_text","text":"<environment_context>\n  <cwd>/home/u/app</cwd>\n</environment_context>"}]}"#.to_owned(),
        r#"{"type":"message","role":"user","content":[{"type":"input_text","text":"list the files"}]}"#.to_owned(),
        r#"{"type":"local_shell_call","id":"ls1","call_id":"call_1","status":"completed","action":{"type":"exec","command":["bash","-lc","ls -la"],"working_directory":"/home/u/app"}}"#.to_owned(),
        r#"{"type":"function_call_output","call_id":"call_1","output":"{\"output\":\"a\\nb\\n\",\"metadata\":{\"exit_code\":0,\"duration_seconds\":0.1}}"}"#.to_owned(),
        r#"{"type":"function_call","name":"shell","arguments":"{\"command\":[\"rg\",\"fn main\"]}","call_id":"call_2"}"#.to_owned(),
        r#"{"type":"function_call_output","call_id":"call_2","output":"{\"output\":\"\",\"metadata\":{\"exit_code\":1}}"}"#.to_owned(),
        r#"{"record_type":"state"}"#.to_owned(),
    ];
    let mut reader = CodexReader::new(codex_thread_id_of(
        "rollout-44444444-4444-4444-8444-444444444444.jsonl",
    ));
    for l in &lines {
        reader.push_line(l.as_bytes());
    }
    let calls = reader.take_calls();
    assert_eq!(calls.len(), 2);
    assert_eq!(
        calls[0].input,
        json!({"command": "ls -la", "workdir": "/home/u/app"})
    );
    assert_eq!(
        (calls[0].tool.as_str(), &calls[0].metadata),
        ("bash", &json!({"exit": 0}))
    );
    assert_eq!(calls[0].time, None);
    assert_eq!(calls[1].input, json!({"command": "rg 'fn main'"}));
    assert_eq!(
        (&calls[1].status, &calls[1].metadata),
        (&CallStatus::Error, &json!({"exit": 1}))
    );
    let meta = reader.meta();
    assert_eq!(
        meta.thread_id.as_deref(),
        Some("44444444-4444-4444-8444-444444444444")
    );
    assert_eq!(meta.cwd.as_deref(), Some("/home/u/app"));
    assert_eq!(meta.git_branch.as_deref(), Some("dev"));
    assert_eq!(meta.title.as_deref(), Some("list the files"));
    assert!(sniff(lines.join("\n").as_bytes()));
}

fn codex_thread_id_of(name: &str) -> Option<String> {
    crate::discover::codex_thread_id(name)
}

#[test]
fn a_subagent_names_its_parent_and_a_fork_replay_does_not_change_the_thread() {
    let child = "01a24916-1320-7b70-a57b-5e3017125817";
    let lines = [
        meta(
            child,
            json!({"session_id": ID, "parent_thread_id": ID,
            "source": {"subagent": {"thread_spawn": {"parent_thread_id": ID, "depth": 1, "agent_nickname": "Euler", "agent_role": "explorer"}}}}),
        ),
        // The parent's meta replayed into the child's file.
        meta(ID, json!({"cwd": "/elsewhere", "source": "exec"})),
        line(
            1,
            "response_item",
            json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "AW-CHILD: read the notes"}]}),
        ),
    ];
    let mut reader = CodexReader::new(Some(child.to_owned()));
    for l in &lines {
        reader.push_line(l.as_bytes());
    }
    let meta = reader.meta();
    assert_eq!(meta.thread_id.as_deref(), Some(child));
    assert_eq!(meta.parent_thread_id.as_deref(), Some(ID));
    assert_eq!(meta.source.as_deref(), Some("subagent"));
    assert_eq!(
        (meta.agent_nickname.as_deref(), meta.agent_role.as_deref()),
        (Some("Euler"), Some("explorer"))
    );
    assert_eq!(meta.cwd.as_deref(), Some("/work/p"));
    let session = reader.take_session();
    assert_eq!(
        (session.id.as_str(), session.parent_id.as_deref()),
        (child, Some(ID))
    );
    assert_eq!(session.agent.as_deref(), Some("explorer"));
    assert_eq!(session.title.as_deref(), Some("AW-CHILD: read the notes"));
    // Without a name, the first session_meta is the file's.
    let mut unnamed = CodexReader::new(None);
    for l in &lines {
        unnamed.push_line(l.as_bytes());
    }
    assert_eq!(unnamed.meta().thread_id.as_deref(), Some(child));
}

#[test]
fn a_spawn_records_its_child() {
    let child = "01a24916-1320-7b70-a57b-5e3017125817";
    let lines = [
        line(
            1,
            "response_item",
            json!({"type": "function_call", "name": "spawn_agent", "namespace": "multi_agent_v1",
            "arguments": "{\"message\":\"AW-CHILD: read\"}", "call_id": "s1"}),
        ),
        output(
            1,
            "s1",
            &format!("{{\"agent_id\":\"{child}\",\"nickname\":\"Euler\"}}"),
        ),
        line(
            2,
            "response_item",
            json!({"type": "function_call", "name": "wait_agent", "namespace": "multi_agent_v1",
            "arguments": format!("{{\"targets\":[\"{child}\"],\"timeout_ms\":30000}}"), "call_id": "w1"}),
        ),
        output(2, "w1", "{\"status\":\"running\"}"),
        line(
            3,
            "response_item",
            json!({"type": "function_call", "name": "get_file", "namespace": "mcp__github", "arguments": "{}", "call_id": "m1"}),
        ),
        output(3, "m1", "x"),
    ];
    let mut reader = read(&lines);
    let calls = reader.take_calls();
    assert_eq!(calls[0].tool, "task");
    assert_eq!(
        calls[0].metadata,
        json!({"toolUseId": "s1", "agentId": child, "nickname": "Euler"})
    );
    assert_eq!(
        (calls[1].tool.as_str(), &calls[1].input),
        ("poll", &json!({"targets": [child]}))
    );
    assert_eq!(calls[2].tool, "mcp__github__get_file");
    assert_eq!(
        reader.meta().spawns,
        [CodexSpawn {
            call_id: "s1".into(),
            thread_id: Some(child.into()),
            nickname: Some("Euler".into())
        }]
    );
}

#[test]
fn odd_lines_are_counted_never_fatal() {
    let lines = [
        "not json".to_owned(),
        "[1,2]".to_owned(),
        r#"{"type":"response_item","payload":{"type":"function_call","name":7,"arguments":[1],"call_id":null}}"#.to_owned(),
        output(1, "nobody", "x"),
        call(2, "c1", "exec_command", r#"{"cmd":"ls"}"#),
        call(2, "c1", "exec_command", r#"{"cmd":"ls"}"#),
        r#"{"type":"event_msg","payload":{"type":"item_completed","item":{"type":"FileChange","id":"x","changes":[1]}}}"#.to_owned(),
        r#"{"type":"compacted","payload":{"message":"summary"}}"#.to_owned(),
        String::new(),
    ];
    let mut reader = read(&lines);
    let c = &reader.meta().counters;
    assert_eq!((c.lines, c.corrupt_lines, c.unmatched_results), (8, 2, 1));
    assert_eq!(
        c.calls, 2,
        "a call written twice is read once; one without an id is kept"
    );
    reader.finish();
    let calls = reader.take_calls();
    assert_eq!(calls.len(), 2);
    assert!(calls.iter().all(|c| c.status == CallStatus::Running));
    assert_eq!(reader.meta().counters.orphans, 2);
}

#[test]
fn a_reader_restored_mid_file_continues_exactly() {
    let lines = [
        meta(ID, json!({})),
        call(1, "c1", "exec_command", r#"{"cmd":"ls"}"#),
        line(
            1,
            "event_msg",
            json!({"type": "item_completed", "item": {"type": "CommandExecution", "id": "c1", "exit_code": 3}}),
        ),
        output(1, "c1", "no exit in the text"),
        call(2, "c2", "exec_command", r#"{"cmd":"ls"}"#),
        output(2, "c2", &exec_out(0, "")),
    ];
    let whole = read(&lines);
    for cut in 0..=lines.len() {
        let mut reader = read(&lines[..cut]);
        let saved = serde_json::to_string(&reader).unwrap();
        reader = serde_json::from_str(&saved).unwrap();
        for l in &lines[cut..] {
            reader.push_line(l.as_bytes());
        }
        assert_eq!(reader, whole, "restored at line {cut}");
    }
    assert_eq!(read(&lines).take_calls()[0].metadata, json!({"exit": 3}));
}

#[test]
fn sniff_tells_a_rollout_from_other_transcripts() {
    for (bytes, want) in [
        (meta(ID, json!({})), true),
        (
            r#"{"id":"x","timestamp":"t","instructions":"i"}"#.to_owned(),
            true,
        ),
        (
            "{\"record_type\":\"state\"}\n{\"type\":\"function_call\",\"name\":\"shell\"}"
                .to_owned(),
            true,
        ),
        (
            r#"{"type":"user","sessionId":"s","uuid":"u","message":{}}"#.to_owned(),
            false,
        ),
        (
            r#"{"sessionId":"s","projectHash":"h","startTime":"t","kind":"main"}"#.to_owned(),
            false,
        ),
        (
            r#"{"format":"agentwatch-sessions/1","sessions":[]}"#.to_owned(),
            false,
        ),
        (String::new(), false),
    ] {
        assert_eq!(sniff(bytes.as_bytes()), want, "{bytes}");
    }
    let err = read_codex_sessions(b"{\"sessionId\":\"s\"}", "x.jsonl").unwrap_err();
    assert!(err.to_string().contains("not a Codex CLI rollout"), "{err}");
}

#[test]
fn a_whole_rollout_reads_into_its_thread() {
    let text = [
        meta(ID, json!({})),
        call(1, "c1", "exec_command", r#"{"cmd":"ls"}"#),
        output(1, "c1", &exec_out(0, "a")),
        call(2, "c2", "exec_command", r#"{"cmd":"sleep 9"}"#),
    ]
    .join("\n");
    let name = format!("/h/sessions/2026/12/06/rollout-2026-12-06T02-00-45-{ID}.jsonl");
    let sessions = read_codex_sessions(text.as_bytes(), &name).unwrap();
    assert_eq!(sessions.len(), 1);
    assert_eq!(sessions[0].id, ID);
    assert_eq!(sessions[0].directory.as_deref(), Some("/work/p"));
    let statuses: Vec<_> = sessions[0].calls.iter().map(|c| c.status.clone()).collect();
    assert_eq!(statuses, [CallStatus::Completed, CallStatus::Running]);
}

/// A call refused by a `PreToolUse` hook, as Codex 0.169.0 writes it (`hooks.md`, "Transcript
/// records"): the call, then `Command blocked by PreToolUse hook: <reason>. Command: <cmd>`
/// and no `CommandExecution` item. Only agentwatch's own (its reason begins `agentwatch:`) is
/// `blocked`; another hook's refusal stays as it reads today.
#[test]
fn agentwatchs_own_refusals_are_blocked_and_no_other() {
    let reason = "agentwatch: you have run this exact Bash call 6 times, ask the user.";
    let blocked = |reason: &str| {
        format!(
            "Command blocked by PreToolUse hook: {reason}. Command: python3 -c \"import nosuchmodule\""
        )
    };
    let exec = |s| {
        call(
            s,
            "c1",
            "exec_command",
            r#"{"cmd":"python3 -c \"import nosuchmodule\""}"#,
        )
    };
    let patch = |s| {
        line(
            s,
            "response_item",
            json!({"type": "custom_tool_call", "call_id": "c1", "name": "apply_patch", "input": "*** Begin Patch\n*** Add File: a\n+x\n*** End Patch"}),
        )
    };
    let patch_out = |s, text: &str| {
        line(
            s,
            "response_item",
            json!({"type": "custom_tool_call_output", "call_id": "c1", "output": text}),
        )
    };
    let ran = line(
        2,
        "event_msg",
        json!({"type": "item_completed", "item": {"type": "CommandExecution", "id": "c1", "exit_code": 0, "status": "completed"}}),
    );
    for (what, lines, want) in [
        (
            "exec_command refused",
            vec![exec(1), output(2, "c1", &blocked(reason))],
            CallStatus::Blocked,
        ),
        (
            "apply_patch refused",
            vec![patch(1), patch_out(2, &blocked(reason))],
            CallStatus::Blocked,
        ),
        (
            "another hook's refusal",
            vec![
                exec(1),
                output(2, "c1", &blocked("AGENTWATCH-LOOP: 6 times")),
            ],
            CallStatus::Completed,
        ),
        (
            "a command that ran and printed the words",
            vec![exec(1), ran, output(2, "c1", &blocked(reason))],
            CallStatus::Completed,
        ),
    ] {
        let calls = read(&lines).take_calls();
        assert_eq!(calls.len(), 1, "{what}");
        assert_eq!(calls[0].status, want, "{what}");
        if want == CallStatus::Blocked {
            // No exit, no landing: only agentwatch's reason.
            let metadata = calls[0].metadata.as_object().unwrap();
            assert_eq!(metadata.len(), 1, "{what}: no exit, no landing");
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
