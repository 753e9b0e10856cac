//! `prompt-server` with canned answers: schema validation, conversation history and clear-context, replay
//! matching, the audit trail, requests written carelessly, and the end of the run.

use serde_json::json;

use crate::support::*;

#[tokio::test(flavor = "multi_thread")]
async fn an_answer_that_fails_the_schema_is_an_error_result() {
    let ipc = TestIpc::new();
    let replay = ipc.jsonl(
        "answers.jsonl",
        &[json!({"parsed": {"tags": "not-an-array"}}), json!({"content": "Sure! Here are the tags: sea"})],
    );
    let _server = ipc.server(&["--replay", replay.to_str().unwrap()]);

    let output = ipc.cmd(["prompt", "--schema", TAGS, "first"]).run().await;
    assert_eq!(output.status.code(), Some(1));
    assert!(stderr(&output).contains("does not match the schema: /tags"), "{}", stderr(&output));
    let result = read_json(&ipc.prompt_files("result-")[0]);
    assert_eq!(result["status"], "error");
    assert!(result["error"].as_str().unwrap().contains("/tags"), "{result}");
    assert!(result.get("parsed").is_none());

    let output = ipc.cmd(["prompt", "--schema", TAGS, "second"]).run().await;
    assert_eq!(output.status.code(), Some(1));
    assert!(stderr(&output).contains("the answer is not valid JSON"), "{}", stderr(&output));
}

#[tokio::test(flavor = "multi_thread")]
async fn every_schema_shape_in_use_is_validated() {
    // Requests written by other orchestrators: the Python guide's json.dumps(schema), and a plain schema object.
    let ipc = TestIpc::new();
    let replay = ipc.jsonl("answers.jsonl", &[json!({"parsed": {"tags": 1}}), json!({"parsed": {"tags": ["a"]}})]);
    let _server = ipc.server(&["--replay", replay.to_str().unwrap()]);
    let requests = [
        ("a", json!({"requestId": "a", "prompt": "p", "schema": TAGS})),
        (
            "b",
            json!({"requestId": "b", "prompt": "p", "schema": serde_json::from_str::<serde_json::Value>(TAGS).unwrap()}),
        ),
    ];
    for (id, request) in requests {
        std::fs::write(ipc.request(id), request.to_string()).unwrap();
        let result = ipc.result(id);
        wait_until("the result", || result.exists());
    }
    assert_eq!(read_json(&ipc.result("a"))["status"], "error");
    let ok = read_json(&ipc.result("b"));
    assert_eq!((ok["status"].as_str(), &ok["parsed"]), (Some("success"), &json!({"tags": ["a"]})));
}

#[tokio::test(flavor = "multi_thread")]
async fn clear_context_resets_the_history() {
    for (use_context, expected) in [(None, [0, 2, 0, 2]), (Some("false"), [0, 0, 0, 0])] {
        let ipc = TestIpc::new();
        let replay = ipc.jsonl("answers.jsonl", &vec![json!({"content": "ok"}); 4]);
        let audit = ipc.root().join("audit.jsonl");
        let mut server =
            ipc.cmd(["prompt-server", "--replay", replay.to_str().unwrap(), "--audit", audit.to_str().unwrap()]);
        if let Some(value) = use_context {
            server = server.env("USE_CONTEXT", value);
        }
        let _server = server.spawn();
        for step in ["a", "b", "clear", "c", "d"] {
            let output = match step {
                "clear" => ipc.cmd(["clear-context", "--reason", "next item"]).run().await,
                prompt => ipc.cmd(["prompt", prompt]).run().await,
            };
            assert_eq!(output.status.code(), Some(0), "{step}: {}", stderr(&output));
        }
        let history: Vec<u64> = events(&audit, "request").iter().map(|e| e["history"].as_u64().unwrap()).collect();
        assert_eq!(history, expected, "USE_CONTEXT={use_context:?}");
        let clears = events(&audit, "clear");
        assert_eq!(clears.len(), 1);
        assert_eq!(clears[0]["reason"], "next item");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn replay_matches_by_substring_then_in_order() {
    let ipc = TestIpc::new();
    let replay = ipc.jsonl(
        "answers.jsonl",
        &[json!({"content": "first"}), json!({"match": "cat", "content": "meow"}), json!({"content": "second"})],
    );
    let _server = ipc.server(&["--replay", replay.to_str().unwrap()]);
    for (prompt, answer) in [("a dog", "first\n"), ("a cat", "meow\n"), ("a cow", "second\n")] {
        let output = ipc.cmd(["prompt", prompt]).run().await;
        assert_eq!((output.status.code(), stdout(&output).as_str()), (Some(0), answer), "{}", stderr(&output));
    }
    let output = ipc.cmd(["prompt", "one too many"]).run().await;
    assert_eq!(output.status.code(), Some(1));
    assert!(stderr(&output).contains("no answer left"), "{}", stderr(&output));
}

#[tokio::test(flavor = "multi_thread")]
async fn the_audit_trail_replays_the_same_run() {
    let first = TestIpc::new();
    let replay = first.jsonl(
        "answers.jsonl",
        &[
            json!({"parsed": {"tags": ["x"]}, "metrics": {"inputTokens": 9, "outputTokens": 3}}),
            json!({"error": "rate limited"}),
            json!({"content": "free text"}),
        ],
    );
    let audit = first.root().join("audit.jsonl");
    let server = first.server(&["--replay", replay.to_str().unwrap(), "--audit", audit.to_str().unwrap()]);
    let mut answers = Vec::new();
    for args in [vec!["prompt", "--schema", TAGS, "one"], vec!["prompt", "two"], vec!["prompt", "three"]] {
        let output = first.cmd(&args).run().await;
        answers.push((output.status.code(), stdout(&output)));
    }
    assert_eq!(first.cmd(["finish"]).run().await.status.code(), Some(0));
    assert_eq!(stdout(&server.finished().await), "{}\n");
    assert_eq!(events(&audit, "request").len(), 3);
    assert_eq!(events(&audit, "result")[0]["metrics"], json!({"inputTokens": 9, "outputTokens": 3}));
    assert_eq!(events(&audit, "done")[0]["runResult"], json!({}));

    let second = TestIpc::new();
    let _server = second.server(&["--replay", audit.to_str().unwrap()]);
    for (args, expected) in
        [vec!["prompt", "--schema", TAGS, "one"], vec!["prompt", "two"], vec!["prompt", "three"]].iter().zip(&answers)
    {
        let output = second.cmd(args).run().await;
        assert_eq!(&(output.status.code(), stdout(&output)), expected, "{args:?}");
    }
    assert_eq!(answers[0], (Some(0), "{\"tags\":[\"x\"]}\n".to_owned()));
    assert_eq!(answers[1].0, Some(1));
}

#[tokio::test(flavor = "multi_thread")]
async fn careless_requests_are_answered_once_complete_or_refused() {
    let ipc = TestIpc::new();
    let replay = ipc.jsonl("answers.jsonl", &[json!({"content": "answered"})]);
    let _server = ipc.server(&["--replay", replay.to_str().unwrap()]);
    // Written in place: empty first, complete a moment later.
    let path = ipc.request("slow");
    std::fs::write(&path, "").unwrap();
    std::thread::sleep(std::time::Duration::from_millis(400));
    std::fs::write(&path, json!({"requestId": "slow", "prompt": "hello"}).to_string()).unwrap();
    let result = ipc.result("slow");
    wait_until("the answer", || result.exists());
    assert_eq!(read_json(&result)["content"], "answered");
    // Never valid: an error result, so that whoever wrote it does not wait for a timeout.
    std::fs::write(ipc.request("bad"), "{oops").unwrap();
    let result = ipc.result("bad");
    wait_until("the error result", || result.exists());
    let result = read_json(&result);
    assert_eq!(result["status"], "error");
    assert!(result["error"].as_str().unwrap().contains("request-bad.json is unusable"), "{result}");
}

#[tokio::test(flavor = "multi_thread")]
async fn done_without_a_run_result_exits_1() {
    let ipc = TestIpc::new();
    let replay = ipc.jsonl("answers.jsonl", &[]);
    let server = ipc.server(&["--replay", replay.to_str().unwrap()]);
    std::fs::write(ipc.done(), "").unwrap();
    let output = server.finished().await;
    assert_eq!(output.status.code(), Some(1));
    assert!(stderr(&output).contains("there is no run result"), "{}", stderr(&output));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_bad_replay_file_is_refused_at_start() {
    let ipc = TestIpc::new();
    let replay = ipc.jsonl("answers.jsonl", &[json!({"content": "ok"}), json!({"match": "x"})]);
    let output = ipc.cmd(["prompt-server", "--replay", replay.to_str().unwrap()]).run().await;
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("line 2: an answer needs"), "{}", stderr(&output));
}
