use super::*;
use serde_json::json;

const SID: &str = "a6a6ca44-5a26-4579-9c8b-edd6b6a0f981";

fn metadata_line() -> String {
    json!({"sessionId": SID, "projectHash": "82df", "startTime": "2026-12-06T02:02:11.502Z",
           "lastUpdated": "2026-12-06T02:02:11.502Z", "kind": "main"})
    .to_string()
}

fn user(id: &str, text: &str) -> Value {
    json!({"id": id, "timestamp": "2026-12-06T02:02:11.786Z", "type": "user", "content": [{"text": text}]})
}

/// A `gemini` message `id` with tool calls `(call id, name, args, status, output)`.
fn model(id: &str, calls: &[(&str, &str, Value, &str, &str)]) -> Value {
    let calls: Vec<Value> = calls
        .iter()
        .map(|(cid, name, args, status, out)| {
            let key = if *status == "error" { "error" } else { "output" };
            json!({"id": cid, "name": name, "args": args, "status": status,
                   "timestamp": "2026-12-06T02:02:12.094Z",
                   "result": [{"functionResponse": {"id": cid, "name": name, "response": {key: out}}}]})
        })
        .collect();
    let mut m = json!({"id": id, "timestamp": "2026-12-06T02:02:12.014Z", "type": "gemini",
                       "content": "", "model": "gemini-3.1-pro-preview"});
    if !calls.is_empty() {
        m["toolCalls"] = Value::Array(calls);
    }
    m
}

fn push(reader: &mut GeminiReader, value: &Value) {
    reader.push_line(value.to_string().as_bytes());
}

fn reader_with(lines: &[Value]) -> GeminiReader {
    let mut reader = GeminiReader::new(GeminiFile::default());
    reader.push_line(metadata_line().as_bytes());
    for l in lines {
        push(&mut reader, l);
    }
    reader
}

fn read_file(cid: &str) -> (&str, &'static str, Value, &'static str, &'static str) {
    (
        cid,
        "read_file",
        json!({"file_path": "notes.txt"}),
        "success",
        "line one\nline two\n",
    )
}

#[test]
fn a_message_re_appended_as_its_calls_finish_is_read_once_in_place() {
    let mut reader = reader_with(&[
        json!({"$set": {"messages": [user("ctx", "<session_context>\n- **Workspace Directories:**\n  - /work/p\n</session_context>")]}}),
        user("u1", "AW-TEST: do  things"),
        model("m1", &[]),
    ]);
    assert!(reader.take_calls().is_empty());
    push(
        &mut reader,
        &model(
            "m1",
            &[(
                "c1",
                "run_shell_command",
                json!({"command": "sh check.sh"}),
                "executing",
                "",
            )],
        ),
    );
    assert!(reader.take_calls().is_empty(), "an executing call waits");
    assert_eq!(reader.pending_calls(), 1);
    push(
        &mut reader,
        &model(
            "m1",
            &[(
                "c1",
                "run_shell_command",
                json!({"command": "sh check.sh"}),
                "success",
                "<untrusted_context>\nOutput: fail\nExit Code: 1\nProcess Group PGID: 16146\n</untrusted_context>",
            )],
        ),
    );
    push(&mut reader, &user("u2", "")); // the function responses' user message
    push(&mut reader, &model("m2", &[read_file("c2")]));
    let calls = reader.take_calls();
    assert!(!reader.rewound());
    let shape: Vec<(&str, &Value, &CallStatus)> = calls
        .iter()
        .map(|c| (c.tool.as_str(), &c.metadata, &c.status))
        .collect();
    assert_eq!(
        shape,
        [
            ("bash", &json!({"exit": 1}), &CallStatus::Completed),
            (
                "read",
                &json!({"total_lines": 2, "lines_read": 2}),
                &CallStatus::Completed
            ),
        ]
    );
    assert_eq!(calls[1].input, json!({"filePath": "notes.txt"}));
    let meta = reader.meta();
    assert_eq!(meta.session_id.as_deref(), Some(SID));
    assert_eq!(meta.title.as_deref(), Some("AW-TEST: do things"));
    assert_eq!(meta.cwd.as_deref(), Some("/work/p"));
    assert_eq!(meta.model.as_deref(), Some("gemini-3.1-pro-preview"));
    assert_eq!(meta.kind.as_deref(), Some("main"));
    assert_eq!((meta.messages, reader.generation()), (5, 0));
}

#[test]
fn a_checkpoint_that_keeps_the_history_is_no_rewrite_and_a_loop_verdict_is_kept() {
    let first = [
        user("u1", "AW-LOOP"),
        model("m1", &[read_file("c1")]),
        model("m2", &[read_file("c2")]),
    ];
    let mut reader = reader_with(&first);
    assert_eq!(reader.take_calls().len(), 2);
    push(
        &mut reader,
        &json!({"id": "v1", "timestamp": "2026-12-06T02:02:33.264Z", "type": "user",
        "content": [{"text": "System: Potential loop detected. Details: Repeated tool call: read_file with arguments {\"file_path\":\"notes.txt\"}. Please take a step back."}]}),
    );
    // The checkpoint: every message but the verdict.
    push(
        &mut reader,
        &json!({"$set": {"messages": first, "lastUpdated": "x"}}),
    );
    assert!(reader.take_calls().is_empty());
    assert!(!reader.rewound());
    let verdict = reader.meta().agent_loop_verdict.clone().unwrap();
    assert!(
        verdict
            .text
            .starts_with("Potential loop detected. Details: Repeated tool call: read_file"),
        "{verdict:?}"
    );
    assert_eq!(
        (verdict.calls_before, verdict.at_ms),
        (2, unix_ms("2026-12-06T02:02:33.264Z"))
    );
    assert_eq!(reader.meta().title.as_deref(), Some("AW-LOOP"));
}

#[test]
fn a_rewind_or_a_changed_checkpoint_hands_the_whole_history_again() {
    let mut reader = reader_with(&[
        user("u1", "go"),
        model("m1", &[read_file("c1")]),
        user("u2", "more"),
        model("m2", &[read_file("c2")]),
    ]);
    assert_eq!(reader.take_calls().len(), 2);
    push(&mut reader, &json!({"$rewindTo": "u2"}));
    push(
        &mut reader,
        &model(
            "m3",
            &[(
                "c3",
                "glob",
                json!({"pattern": "*.rs"}),
                "success",
                "Found 1 file",
            )],
        ),
    );
    let calls = reader.take_calls();
    assert!(reader.rewound());
    assert_eq!(reader.generation(), 1);
    let tools: Vec<&str> = calls.iter().map(|c| c.tool.as_str()).collect();
    assert_eq!(tools, ["read", "glob"], "the whole history: c2 is gone");
    // Growing again after the rewrite is a plain extension.
    push(&mut reader, &model("m4", &[read_file("c4")]));
    assert_eq!(reader.take_calls().len(), 1);
    assert!(!reader.rewound());
    // A checkpoint whose call answered otherwise is a rewrite.
    push(
        &mut reader,
        &json!({"$set": {"messages": [user("u1", "go"),
        model("m1", &[("c1", "read_file", json!({"file_path": "notes.txt"}), "error", "denied")])]}}),
    );
    let calls = reader.take_calls();
    assert!(reader.rewound());
    assert_eq!((calls.len(), &calls[0].status), (1, &CallStatus::Error));
    assert_eq!(reader.generation(), 2);
    // So is one whose call only moved in time (landings are matched by time).
    let mut moved = model(
        "m1",
        &[(
            "c1",
            "read_file",
            json!({"file_path": "notes.txt"}),
            "error",
            "denied",
        )],
    );
    moved["toolCalls"][0]["timestamp"] = json!("2026-12-06T02:09:00.000Z");
    push(
        &mut reader,
        &json!({"$set": {"messages": [user("u1", "go"), moved]}}),
    );
    let calls = reader.take_calls();
    assert!(reader.rewound());
    assert_eq!(
        calls[0].time.unwrap().end,
        unix_ms("2026-12-06T02:09:00.000Z")
    );
    // A rewind to an unknown message changes nothing.
    push(&mut reader, &json!({"$rewindTo": "nope"}));
    assert!(reader.take_calls().is_empty() && !reader.rewound());
    assert_eq!(reader.generation(), 3);
}

#[test]
fn a_reset_hands_the_whole_history_as_a_rewrite() {
    let lines = [user("u1", "go"), model("m1", &[read_file("c1")])];
    let mut reader = reader_with(&lines);
    assert_eq!(reader.take_calls().len(), 1);
    reader.reset();
    reader.push_line(metadata_line().as_bytes());
    for l in &lines {
        push(&mut reader, l);
    }
    assert_eq!(reader.take_calls().len(), 1);
    assert!(reader.rewound());
    let mut fresh = GeminiReader::new(GeminiFile::default());
    fresh.reset();
    assert!(fresh.take_calls().is_empty() && !fresh.rewound());
}

#[test]
fn edits_writes_and_subagents_map_onto_the_detector_model() {
    let diff = json!({"fileDiff": "Index: notes.txt\n@@ -1,2 +1,2 @@\n-line one\n+line 1\n line two\n",
        "fileName": "notes.txt", "filePath": "/p/notes.txt", "originalContent": "line one\n", "newContent": "line 1\n",
        "diffStat": {"model_added_lines": 1, "model_removed_lines": 1, "user_added_lines": 0, "user_removed_lines": 0},
        "isNewFile": false});
    let mut edit = model(
        "m1",
        &[(
            "c1",
            "replace",
            json!({"file_path": "notes.txt", "instruction": "number it",
        "old_string": "line one", "new_string": "line 1"}),
            "success",
            "Successfully modified file",
        )],
    );
    edit["toolCalls"][0]["resultDisplay"] = diff;
    let mut spawn = model(
        "m2",
        &[(
            "c2",
            "invoke_agent",
            json!({"agent_name": "generalist", "prompt": "AW-CHILD"}),
            "success",
            "Subagent 'generalist' finished.",
        )],
    );
    spawn["toolCalls"][0]["agentId"] = json!("de4578fa");
    let failed_edit = model(
        "m3",
        &[(
            "c3",
            "replace",
            json!({"file_path": "x", "old_string": "a", "new_string": "b"}),
            "error",
            "params must have required property 'instruction'",
        )],
    );
    let mut reader = reader_with(&[edit, spawn, failed_edit]);
    let calls = reader.take_calls();
    assert_eq!(calls[0].tool, "edit");
    assert_eq!(
        calls[0].input,
        json!({"filePath": "notes.txt", "oldString": "line one", "newString": "line 1"})
    );
    assert_eq!(
        calls[0].metadata["filediff"],
        json!({"additions": 1, "deletions": 1})
    );
    assert_eq!(calls[1].tool, "task");
    assert_eq!(
        calls[1].metadata,
        json!({"toolUseId": "c2", "agentId": "de4578fa"})
    );
    assert_eq!(
        (&calls[2].status, &calls[2].metadata),
        (&CallStatus::Error, &Value::Null)
    );
    assert_eq!(
        reader.meta().spawns,
        [GeminiSpawn {
            call_id: "c2".into(),
            agent_id: "de4578fa".into(),
            agent_name: Some("generalist".into())
        }]
    );
}

#[test]
fn a_subagent_file_takes_its_ids_from_its_path() {
    let file = GeminiFile::from_path("/g/tmp/project/chats/5475a6ad-a357/de4578fa-e7d5.jsonl");
    assert_eq!(file.session_id.as_deref(), Some("de4578fa-e7d5"));
    assert_eq!(file.parent_session_id.as_deref(), Some("5475a6ad-a357"));
    assert_eq!(
        GeminiFile::from_path("/g/tmp/p/chats/session-2026-12-06T02-09-5475a6ad.jsonl"),
        GeminiFile::default()
    );
    let text = [
        json!({"sessionId": "de4578fa-e7d5", "projectHash": "h", "startTime": "t", "kind": "subagent", "directories": ["/work/p"]}),
        user("u1", "AW-CHILD: read the notes"),
        model("m1", &[read_file("de4578fa-e7d5#0-0")]),
    ]
    .iter()
    .map(Value::to_string)
    .collect::<Vec<_>>()
    .join("\n");
    let sessions = read_gemini_sessions(
        text.as_bytes(),
        "/g/tmp/project/chats/5475a6ad-a357/de4578fa-e7d5.jsonl",
    )
    .unwrap();
    let s = &sessions[0];
    assert_eq!(
        (s.id.as_str(), s.parent_id.as_deref()),
        ("de4578fa-e7d5", Some("5475a6ad-a357"))
    );
    assert_eq!(s.directory.as_deref(), Some("/work/p"));
    assert_eq!(s.title.as_deref(), Some("AW-CHILD: read the notes"));
    assert_eq!(s.calls.len(), 1);
    // A subagent's summary is its answer: the title stays its task.
    let mut reader = GeminiReader::new(GeminiFile::from_path("/g/tmp/p/chats/p1/c1.jsonl"));
    push(&mut reader, &user("u1", "AW-CHILD: read"));
    push(
        &mut reader,
        &json!({"$set": {"summary": "{\n  \"response\": \"ok\"\n}"}}),
    );
    assert_eq!(reader.meta().title.as_deref(), Some("AW-CHILD: read"));
    assert_eq!(
        reader.meta().summary.as_deref(),
        Some(r#"{ "response": "ok" }"#)
    );
}

#[test]
fn the_older_whole_file_json_reads_whole_and_a_rewrite_is_compared() {
    let doc = |calls: &[Value]| {
        serde_json::to_string_pretty(
            &json!({"sessionId": SID, "projectHash": "h", "startTime": "2025-09-01T10:00:00Z",
            "lastUpdated": "2025-09-01T10:05:00Z", "messages": calls}),
        )
        .unwrap()
    };
    let v1 = doc(&[user("u1", "fix it"), model("m1", &[read_file("c1")])]);
    let v2 = doc(&[
        user("u1", "fix it"),
        model("m1", &[read_file("c1")]),
        model("m2", &[read_file("c2")]),
    ]);
    let mut reader = GeminiReader::new(GeminiFile::default());
    reader.push_document(v1.as_bytes());
    assert_eq!(reader.take_calls().len(), 1);
    reader.push_document(v2.as_bytes());
    assert_eq!(
        reader.take_calls().len(),
        1,
        "a file rewritten with one more call"
    );
    assert!(!reader.rewound());
    reader.push_document(v1.as_bytes());
    assert!(
        reader.take_calls().len() == 1 && reader.rewound(),
        "one call fewer: a rewrite"
    );
    reader.push_document(b"{ torn");
    assert_eq!(reader.meta().counters.corrupt_lines, 1);
    assert!(sniff(v2.as_bytes()));
    let sessions =
        read_gemini_sessions(v2.as_bytes(), "session-2025-09-01T10-00-a6a6ca44.json").unwrap();
    assert_eq!((sessions[0].id.as_str(), sessions[0].calls.len()), (SID, 2));
    assert_eq!(sessions[0].title.as_deref(), Some("fix it"));
}

#[test]
fn a_summary_names_the_session_and_odd_lines_are_counted() {
    let mut reader = reader_with(&[user("u1", "first prompt")]);
    for odd in [
        "not json",
        "[1]",
        r#"{"id":7,"type":"user"}"#,
        r#"{"$set":"x"}"#,
    ] {
        reader.push_line(odd.as_bytes());
    }
    push(
        &mut reader,
        &json!({"$set": {"summary": "Fix the   build"}}),
    );
    let meta = reader.meta();
    assert_eq!(meta.title.as_deref(), Some("Fix the build"));
    assert_eq!(meta.title_source, Some(GeminiTitleSource::Summary));
    assert_eq!(meta.counters.corrupt_lines, 2);
    reader.push_line(b"   ");
    assert_eq!(reader.meta().counters.lines, 7);
}

#[test]
fn a_call_still_running_at_the_end_of_a_whole_read_is_kept_as_running() {
    let mut reader = reader_with(&[model(
        "m1",
        &[
            read_file("c1"),
            (
                "c2",
                "run_shell_command",
                json!({"command": "sleep 99"}),
                "executing",
                "",
            ),
        ],
    )]);
    assert_eq!(reader.take_calls().len(), 1);
    reader.finish();
    let session = reader.take_session();
    let statuses: Vec<_> = session.calls.iter().map(|c| c.status.clone()).collect();
    assert_eq!(statuses, [CallStatus::Completed, CallStatus::Running]);
    assert_eq!(reader.meta().counters.orphans, 1);
}

#[test]
fn long_inputs_are_kept_as_their_hash() {
    let long = "x".repeat(10_000);
    let reader_calls = |content: &str| {
        let mut reader = reader_with(&[model(
            "m1",
            &[(
                "c1",
                "write_file",
                json!({"file_path": "a", "content": content}),
                "success",
                "ok",
            )],
        )]);
        reader.take_calls().remove(0)
    };
    let a = reader_calls(&long);
    assert!(
        a.input["content"]
            .as_str()
            .unwrap()
            .starts_with("(10000 bytes, fnv ")
    );
    assert_eq!(a.input, reader_calls(&long).input);
    assert_ne!(a.input, reader_calls(&format!("{long}y")).input);
}

#[test]
fn a_reader_restored_mid_file_continues_exactly() {
    let lines = [
        user("u1", "go"),
        model("m1", &[]),
        model("m1", &[read_file("c1")]),
        json!({"$set": {"lastUpdated": "x"}}),
        model("m2", &[read_file("c2")]),
        json!({"$rewindTo": "m2"}),
        model("m3", &[read_file("c3")]),
    ];
    let mut whole = reader_with(&lines);
    let whole_calls = whole.take_calls();
    for cut in 0..=lines.len() {
        let mut reader = reader_with(&lines[..cut]);
        let mut calls = reader.take_calls();
        let saved = serde_json::to_string(&reader).unwrap();
        reader = serde_json::from_str(&saved).unwrap();
        for l in &lines[cut..] {
            push(&mut reader, l);
        }
        let more = reader.take_calls();
        if reader.rewound() {
            calls = more;
        } else {
            calls.extend(more);
        }
        assert_eq!(calls, whole_calls, "cut at {cut}");
        assert_eq!(reader.meta(), whole.meta(), "cut at {cut}");
    }
}

#[test]
fn sniff_tells_a_gemini_session_from_other_transcripts() {
    for (bytes, want) in [
        (metadata_line(), true),
        (r#"{"$set":{"lastUpdated":"x"}}"#.to_owned(), true),
        (
            r#"{"type":"user","sessionId":"s","uuid":"u"}"#.to_owned(),
            false,
        ),
        (
            r#"{"timestamp":"t","type":"session_meta","payload":{"id":"x"}}"#.to_owned(),
            false,
        ),
        (r#"{"sessionId":"s","messages":[]}"#.to_owned(), true),
        (r#"{"messages":[]}"#.to_owned(), false),
        ("\n\n".to_owned(), false),
    ] {
        assert_eq!(sniff(bytes.as_bytes()), want, "{bytes}");
    }
    let err = read_gemini_sessions(b"{\"type\":\"user\"}", "x.jsonl").unwrap_err();
    assert!(
        err.to_string().contains("not a Gemini CLI session"),
        "{err}"
    );
}

/// A call refused by a `BeforeTool` hook, as Gemini 0.61.0 writes it (`hooks.md`,
/// "Transcript records"): `status: "error"`, `resultDisplay: "Tool execution blocked: <reason>"`
/// and the function response's `error`. Only agentwatch's own (its reason begins
/// `agentwatch:`) is `blocked`; another hook's refusal stays an error.
#[test]
fn agentwatchs_own_refusals_are_blocked_and_no_other() {
    let reason = "agentwatch: you have run this exact run_shell_command call 6 times";
    let entry = |status: &str, display: Option<String>, error: Option<String>| {
        let mut response = json!({});
        if let Some(error) = error {
            response["error"] = json!(error);
        }
        let mut call = json!({"id": "run_shell_command_1765040255511_0", "name": "run_shell_command",
            "args": {"command": "python3 -c \"import nosuchmodule\""}, "status": status,
            "timestamp": "2026-12-07T16:57:35.520Z",
            "result": [{"functionResponse": {"id": "run_shell_command_1765040255511_0",
                        "name": "run_shell_command", "response": response}}]});
        if let Some(display) = display {
            call["resultDisplay"] = json!(display);
        }
        let mut m = model("m1", &[]);
        m["toolCalls"] = json!([call]);
        m
    };
    let said = |prefix: &str, reason: &str| Some(format!("{prefix}{reason}"));
    let blocked = "Tool execution blocked: ";
    for (what, message, want) in [
        (
            "a deny, in both places",
            entry("error", said(blocked, reason), said(blocked, reason)),
            CallStatus::Blocked,
        ),
        (
            "in the response alone",
            entry("error", None, said(blocked, reason)),
            CallStatus::Blocked,
        ),
        (
            "in the display alone",
            entry("error", said(blocked, reason), None),
            CallStatus::Blocked,
        ),
        (
            "stopped by the hook",
            entry(
                "error",
                None,
                said("Agent execution stopped by hook: ", reason),
            ),
            CallStatus::Blocked,
        ),
        (
            "another hook's refusal",
            entry(
                "error",
                said(blocked, "AGENTWATCH-LOOP: 6 times"),
                said(blocked, "AGENTWATCH-LOOP: 6 times"),
            ),
            CallStatus::Error,
        ),
        (
            "a success that prints the words",
            entry("success", said(blocked, reason), None),
            CallStatus::Completed,
        ),
    ] {
        let mut reader = reader_with(&[user("u1", "go"), message]);
        let calls = reader.take_calls();
        assert_eq!(calls.len(), 1, "{what}");
        assert_eq!(calls[0].status, want, "{what}");
    }
}
