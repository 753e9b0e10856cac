//! Against a server that speaks only the basic contract (one frame per line, no `nl`, no base64, a timeout as -1
//! with "timed out", plain-text errors), the client still behaves as the contract says.

use axum::routing::post;
use axum::Router;

use crate::support::*;

/// How often the stand-in was asked to run `quiet` (a command whose stream ends before any frame).
static QUIET_POSTS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// A stand-in for the contract's server: answers by the program name in `cmd[0]`.
async fn old_server() -> String {
    async fn exec(body: String) -> ([(&'static str, &'static str); 1], &'static str) {
        let reply = if body.contains("\"sleep\"") {
            r#"{"exit_code":-1,"output":"","stderr":"","error":"command timed out after 1s"}"#
        } else if body.contains("\"missing\"") {
            r#"{"exit_code":-1,"output":"","stderr":"","error":"failed to start command: exec: \"missing\": not found"}"#
        } else {
            r#"{"exit_code":2,"output":"one\ntwo\n","stderr":"warn\n"}"#
        };
        ([("content-type", "application/json")], reply)
    }
    async fn stream(body: String) -> ([(&'static str, &'static str); 1], &'static str) {
        let frames = if body.contains("\"sleep\"") {
            "data: {\"type\":\"error\",\"data\":\"command timed out after 1s\"}\n\ndata: {\"type\":\"exit\",\"data\":-1}\n\n"
        } else if body.contains("\"cut\"") {
            "data: {\"type\":\"stdout\",\"data\":\"partial\"}\n\n"
        } else if body.contains("\"quiet\"") {
            QUIET_POSTS.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            ""
        } else {
            "data: {\"type\":\"stdout\",\"data\":\"one\"}\n\ndata: {\"type\":\"stderr\",\"data\":\"warn\"}\n\n\
             data: {\"type\":\"stdout\",\"data\":\"two\"}\n\ndata: {\"type\":\"progress\",\"data\":50}\n\n\
             : a comment\n\ndata: {\"type\":\"exit\",\"data\":2}\n\n"
        };
        ([("content-type", "text/event-stream")], frames)
    }
    let app = Router::new().route("/exec", post(exec)).route("/exec/stream", post(stream));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    url
}

fn client(url: &str) -> BinaryRun {
    client_run()
        .env("BUILD_SIDECARS", format!(r#"{{"go":{{"internal_url":"{url}"}}}}"#))
        .env("SIDECAR_CWD", "/workspace")
}

#[tokio::test(flavor = "multi_thread")]
async fn the_basic_contract_still_works() {
    let url = old_server().await;
    for stream in [false, true] {
        let output = client(&url).stream(stream).args(["go", "build"]).run().await;
        assert_eq!(output.status.code(), Some(2));
        assert_eq!(String::from_utf8_lossy(&output.stdout), "one\ntwo\n", "stream={stream}");
        assert_eq!(String::from_utf8_lossy(&output.stderr), "warn\n", "stream={stream}");

        let output = client(&url).stream(stream).args(["go", "sleep"]).run().await;
        assert_eq!(output.status.code(), Some(124), "timeout, stream={stream}");
        assert!(stderr(&output).contains("timed out"));
    }
    let output = client(&url).args(["go", "missing"]).run().await;
    assert_eq!(output.status.code(), Some(255));
    assert!(stderr(&output).contains("failed to start command"));

    let output = client(&url).stream(true).args(["go", "cut"]).run().await;
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(String::from_utf8_lossy(&output.stdout), "partial\n");
    assert!(stderr(&output).starts_with("sidecar-exec: stream ended without an exit frame"), "{}", stderr(&output));

    // The client names the run, but this server ignores the name: a stream lost before any frame is not resumed
    // (the server has no runs endpoint) and the command is not sent again.
    let output = client(&url).stream(true).args(["go", "quiet"]).run().await;
    assert_eq!(output.status.code(), Some(1));
    assert!(stderr(&output).starts_with("sidecar-exec: stream ended without an exit frame"), "{}", stderr(&output));
    assert_eq!(QUIET_POSTS.load(std::sync::atomic::Ordering::SeqCst), 1);
}
