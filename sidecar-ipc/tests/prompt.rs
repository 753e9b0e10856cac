//! `prompt` and `clear-context`: round trips through the prompt server, and a fake agent for the cases the agent
//! must not be trusted with (half-written results, errors, no answer, the run ending first).

use std::io::Write;
use std::process::Stdio;
use std::time::Duration;

use serde_json::json;
use tokio::io::AsyncWriteExt as _;

use crate::support::*;

#[tokio::test(flavor = "multi_thread")]
async fn round_trip_through_both_halves() {
    let ipc = TestIpc::new();
    let replay = ipc.jsonl(
        "answers.jsonl",
        &[json!({"content": "hello there"}), json!({"parsed": {"tags": ["sea", "sunset"]}, "match": "beach"})],
    );
    let server = ipc.server(&["--replay", replay.to_str().unwrap()]);

    let output = ipc.cmd(["prompt", "say hi"]).run().await;
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(stdout(&output), "hello there\n");

    let output = ipc.cmd(["prompt", "--schema", TAGS, "tags for beach.jpg?"]).run().await;
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(stdout(&output), "{\"tags\":[\"sea\",\"sunset\"]}\n", "parsed, as one line of compact JSON");
    assert_eq!(stderr(&output), "");

    // The request carries the schema in the envelope the agent-runner turns into structured output.
    let requests = ipc.prompt_files("request-");
    assert_eq!(requests.len(), 2);
    let request = read_json(&requests[1]);
    assert_eq!(request["prompt"], "tags for beach.jpg?");
    assert_eq!(request["schema"]["type"], "json_schema");
    assert_eq!(request["schema"]["strict"], false);
    assert_eq!(request["schema"]["schema"], serde_json::from_str::<serde_json::Value>(TAGS).unwrap());
    let id = request["requestId"].as_str().unwrap();
    assert_eq!(requests[1], ipc.request(id));
    // No temporary file is left, and none was ever named like a request.
    assert!(ipc.prompt_files(".").is_empty(), "{:?}", ipc.prompt_files("."));
    assert!(ipc.prompt_files("request-").iter().all(|p| p.extension().unwrap() == "json"));

    let output = ipc.cmd(["finish", "--result", r#"{"processed": 2}"#]).run().await;
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let served = server.finished().await;
    assert_eq!(served.status.code(), Some(0), "{}", stderr(&served));
    assert_eq!(stdout(&served), "{\"processed\":2}\n");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_prompt_can_come_from_stdin() {
    let ipc = TestIpc::new();
    let replay = ipc.jsonl("answers.jsonl", &[json!({"match": "from stdin", "content": "read it"})]);
    let _server = ipc.server(&["--replay", replay.to_str().unwrap()]);
    let mut child = ipc.cmd(["prompt", "-"]).stdin(Stdio::piped()).spawn();
    child.stdin.take().unwrap().write_all(b"a prompt from stdin\n").await.unwrap();
    let output = tokio::time::timeout(HANG, child.wait_with_output()).await.unwrap().unwrap();
    assert_eq!((output.status.code(), stdout(&output).as_str()), (Some(0), "read it\n"), "{}", stderr(&output));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_result_that_appears_empty_then_complete_is_read_again() {
    let ipc = TestIpc::new();
    let agent = fake_agent(&ipc, 1, |agent_ipc, id, _| {
        let path = agent_ipc.result(id);
        let full = json!({"requestId": id, "status": "success", "content": "complete answer",
                          "metrics": {"inputTokens": 1, "outputTokens": 2}})
        .to_string();
        // As the agent-runner's in-place write can be seen: empty, then half, then all of it.
        let mut file = std::fs::File::create(&path).unwrap();
        std::thread::sleep(Duration::from_millis(300));
        file.write_all(&full.as_bytes()[..full.len() / 2]).unwrap();
        file.flush().unwrap();
        std::thread::sleep(Duration::from_millis(300));
        file.write_all(&full.as_bytes()[full.len() / 2..]).unwrap();
    });
    let output = ipc.cmd(["prompt", "question"]).run().await;
    agent.join().unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(stdout(&output), "complete answer\n");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_error_answer_exits_1_with_the_error() {
    let ipc = TestIpc::new();
    let agent = fake_agent(&ipc, 1, |agent_ipc, id, _| {
        write_result(agent_ipc, id, &json!({"requestId": id, "status": "error", "error": "model overloaded"}));
    });
    let output = ipc.cmd(["prompt", "question"]).run().await;
    agent.join().unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(stdout(&output), "");
    assert!(
        stderr(&output).contains("answered prompt") && stderr(&output).contains("model overloaded"),
        "{}",
        stderr(&output)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unreadable_result_exits_1() {
    let ipc = TestIpc::new();
    let agent = fake_agent(&ipc, 2, |agent_ipc, id, request| {
        let body =
            if request["prompt"] == "garbage" { "this is not json".to_owned() } else { json!({"x": 1}).to_string() };
        std::fs::write(agent_ipc.result(id), body).unwrap();
    });
    let output = ipc.cmd(["prompt", "garbage"]).run().await;
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).contains("unreadable") && stderr(&output).contains("not valid JSON"),
        "{}",
        stderr(&output)
    );
    // Valid JSON without the fields of a result.
    let output = ipc.cmd(["prompt", "wrong shape"]).run().await;
    agent.join().unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert!(stderr(&output).contains("missing field `status`"), "{}", stderr(&output));
}

#[tokio::test(flavor = "multi_thread")]
async fn no_result_in_time_exits_124() {
    let ipc = TestIpc::new();
    let output = ipc.cmd(["prompt", "--timeout", "0.3", "anyone there?"]).run().await;
    assert_eq!(output.status.code(), Some(124));
    assert!(
        stderr(&output).contains("no result for prompt") && stderr(&output).contains("after 0.3s"),
        "{}",
        stderr(&output)
    );
    assert_eq!(ipc.prompt_files("request-").len(), 1, "the request stays for the agent");
}

#[tokio::test(flavor = "multi_thread")]
async fn done_before_the_result_is_a_clear_error() {
    let ipc = TestIpc::new();
    let agent = fake_agent(&ipc, 1, |agent_ipc, _, _| std::fs::write(agent_ipc.done(), "").unwrap());
    let output = ipc.cmd(["prompt", "question"]).run().await;
    agent.join().unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).contains("the run ended") && stderr(&output).contains("before prompt"),
        "{}",
        stderr(&output)
    );

    // Once done, no request is written at all.
    let before = ipc.prompt_files("request-").len();
    let output = ipc.cmd(["prompt", "another"]).run().await;
    assert_eq!(output.status.code(), Some(1));
    assert!(stderr(&output).contains("already ended"), "{}", stderr(&output));
    assert_eq!(ipc.prompt_files("request-").len(), before);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_answer_that_breaks_the_schema_is_refused_here_too() {
    // The agent-runner only checks that an answer is JSON: the client checks the schema itself.
    let ipc = TestIpc::new();
    let agent = fake_agent(&ipc, 1, |agent_ipc, id, _| {
        write_result(
            agent_ipc,
            id,
            &json!({"requestId": id, "status": "success", "content": "{\"tags\":\"sea\"}",
                                       "parsed": {"tags": "sea"}}),
        );
    });
    let output = ipc.cmd(["prompt", "--schema", TAGS, "tags?"]).run().await;
    agent.join().unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert!(stderr(&output).contains("does not match the schema: /tags"), "{}", stderr(&output));
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_arguments_exit_2_before_anything_is_written() {
    let ipc = TestIpc::new();
    for (args, message) in [
        (vec!["prompt", "--schema", "{not json", "q"], "--schema: the inline value is not valid JSON"),
        (vec!["prompt", "--schema", r#"{"type": 5}"#, "q"], "not a valid JSON Schema"),
        (vec!["prompt", "--schema", "/no/such/schema.json", "q"], "cannot read the file"),
        (vec!["prompt", "   "], "the prompt is empty"),
    ] {
        let output = ipc.cmd(&args).run().await;
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        assert!(stderr(&output).contains(message), "{args:?}: {}", stderr(&output));
    }
    assert!(ipc.prompt_files("").is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn clear_context_writes_its_request_atomically() {
    let ipc = TestIpc::new();
    let output = ipc.cmd(["clear-context", "--reason", "after beach.jpg"]).run().await;
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let files = files_starting(&ipc.context(), "");
    assert_eq!(files.len(), 1, "{files:?}");
    let clear = read_json(&files[0]);
    assert_eq!(clear["reason"], "after beach.jpg");
    let id = clear["requestId"].as_str().unwrap();
    assert_eq!(files[0], ipc.clear(id));
}
