//! The OpenAI-compatible backend against a fake chat-completions server on 127.0.0.1:0: the request it sends (model,
//! messages with their history, the schema as structured output, the key), how answers map to results, and how HTTP
//! errors become error results.

use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use axum::{Json, Router};
use serde_json::{json, Value};

use crate::support::*;

/// What the fake server saw, and what it answers next (in order; the last one repeats).
#[derive(Default)]
struct Fake {
    requests: Vec<(Option<String>, Value)>,
    replies: Vec<(u16, Value)>,
}

type Shared = Arc<Mutex<Fake>>;

async fn completions(
    State(fake): State<Shared>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> (StatusCode, Json<Value>) {
    let mut fake = fake.lock().unwrap();
    let auth = headers.get("authorization").map(|v| v.to_str().unwrap().to_owned());
    fake.requests.push((auth, body));
    let (status, reply) = if fake.replies.len() > 1 { fake.replies.remove(0) } else { fake.replies[0].clone() };
    (StatusCode::from_u16(status).unwrap(), Json(reply))
}

/// Starts the fake server; returns its API root (`http://127.0.0.1:PORT/v1`).
async fn fake_server(replies: Vec<(u16, Value)>) -> (String, Shared) {
    let fake: Shared = Arc::new(Mutex::new(Fake { requests: Vec::new(), replies }));
    let app = Router::new().route("/v1/chat/completions", post(completions)).with_state(fake.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, fake)
}

fn answer(content: &str, input: u64, output: u64) -> (u16, Value) {
    (
        200,
        json!({"id": "x", "object": "chat.completion", "model": "m",
                 "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}],
                 "usage": {"prompt_tokens": input, "completion_tokens": output, "total_tokens": input + output}}),
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn the_request_carries_the_schema_and_the_answer_maps_to_the_result() {
    let (url, fake) = fake_server(vec![answer("{\"tags\": [\"sea\"]}", 12, 5)]).await;
    let ipc = TestIpc::new();
    let _server = ipc
        .cmd(["prompt-server", "--openai-url", &url, "--model", "local-model", "--api-key-env", "MY_KEY"])
        .env("MY_KEY", "secret-key")
        .spawn();
    let output = ipc.cmd(["prompt", "--schema", TAGS, "tags for beach.jpg?"]).run().await;
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(stdout(&output), "{\"tags\":[\"sea\"]}\n");

    let (auth, body) = fake.lock().unwrap().requests[0].clone();
    assert_eq!(auth.as_deref(), Some("Bearer secret-key"));
    assert_eq!(body["model"], "local-model");
    assert_eq!(body["messages"], json!([{"role": "user", "content": "tags for beach.jpg?"}]));
    let format = &body["response_format"];
    assert_eq!(format["type"], "json_schema");
    assert_eq!(format["json_schema"]["schema"], serde_json::from_str::<Value>(TAGS).unwrap());
    assert_eq!(format["json_schema"]["strict"], false);
    assert_eq!(format["json_schema"]["name"], "response");

    let result = read_json(&ipc.prompt_files("result-")[0]);
    assert_eq!(result["status"], "success");
    assert_eq!(result["content"], "{\"tags\": [\"sea\"]}");
    assert_eq!(result["parsed"], json!({"tags": ["sea"]}));
    assert_eq!(result["metrics"], json!({"inputTokens": 12, "outputTokens": 5}));
}

#[tokio::test(flavor = "multi_thread")]
async fn history_is_sent_and_clear_context_empties_it() {
    let (url, fake) = fake_server(vec![answer("A1", 1, 1), answer("A2", 1, 1), answer("A3", 1, 1)]).await;
    let ipc = TestIpc::new();
    let _server =
        ipc.cmd(["prompt-server", "--openai-url", &format!("{url}/"), "--model", "m", "--system", "be brief"]).spawn();
    for step in ["Q1", "Q2", "clear", "Q3"] {
        let output = match step {
            "clear" => ipc.cmd(["clear-context"]).run().await,
            prompt => ipc.cmd(["prompt", prompt]).run().await,
        };
        assert_eq!(output.status.code(), Some(0), "{step}: {}", stderr(&output));
    }
    let requests = fake.lock().unwrap().requests.clone();
    let messages = |i: usize| requests[i].1["messages"].clone();
    let system = json!({"role": "system", "content": "be brief"});
    assert_eq!(requests[0].0, None, "no key, no Authorization");
    assert_eq!(messages(0), json!([system, {"role": "user", "content": "Q1"}]));
    assert_eq!(
        messages(1),
        json!([system, {"role": "user", "content": "Q1"}, {"role": "assistant", "content": "A1"},
               {"role": "user", "content": "Q2"}])
    );
    assert_eq!(messages(2), json!([system, {"role": "user", "content": "Q3"}]));
    assert!(requests[0].1.get("response_format").is_none());
}

#[tokio::test(flavor = "multi_thread")]
async fn http_errors_become_error_results() {
    let (url, fake) = fake_server(vec![
        (500, json!({"error": {"message": "model crashed", "type": "server_error"}})),
        (200, json!({"choices": []})),
        answer("fine", 1, 1),
    ])
    .await;
    let ipc = TestIpc::new();
    let _server = ipc.cmd(["prompt-server", "--openai-url", &url, "--model", "m"]).spawn();
    let output = ipc.cmd(["prompt", "first"]).run().await;
    assert_eq!(output.status.code(), Some(1));
    assert!(stderr(&output).contains("answered HTTP 500: model crashed"), "{}", stderr(&output));
    let output = ipc.cmd(["prompt", "second"]).run().await;
    assert_eq!(output.status.code(), Some(1));
    assert!(stderr(&output).contains("has no choices"), "{}", stderr(&output));
    // A failed call leaves no half turn in the history: the next call is sent alone.
    let output = ipc.cmd(["prompt", "third"]).run().await;
    assert_eq!((output.status.code(), stdout(&output).as_str()), (Some(0), "fine\n"));
    assert_eq!(fake.lock().unwrap().requests[2].1["messages"], json!([{"role": "user", "content": "third"}]));
    let results: Vec<Value> = ipc.prompt_files("result-").iter().map(|path| read_json(path)).collect();
    assert_eq!(results.iter().filter(|r| r["status"] == "error").count(), 2);

    // Nobody listening at all.
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}/v1", listener.local_addr().unwrap())
    };
    let ipc = TestIpc::new();
    let _server = ipc.cmd(["prompt-server", "--openai-url", &closed, "--model", "m"]).spawn();
    let output = ipc.cmd(["prompt", "anyone?"]).run().await;
    assert_eq!(output.status.code(), Some(1));
    assert!(stderr(&output).contains("cannot reach http://127.0.0.1:"), "{}", stderr(&output));
}
