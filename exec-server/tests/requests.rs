//! What a request body may hold and how each refusal is answered: the bound on `env` (a body of 80 000 variables is
//! refused without holding the server), `tty` and resize bodies as JSON objects of whole numbers with a printable
//! terminal type, `Accept` q-values, and every body-read failure of `/stdin`, `/signal` and `/resize` as the JSON
//! error with its code.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use protocol::{ErrorBody, ErrorCode};
use serde_json::json;

use crate::runs::Frames;
use crate::support::*;

/// The attack's body: `{"cmd":["true"],"env":{"V00000":"",…}}` with 80 000 empty variables, 937 KiB.
pub fn eighty_thousand_variables() -> String {
    let mut body = String::from(r#"{"cmd":["true"],"env":{"#);
    for i in 0..80_000 {
        if i > 0 {
            body.push(',');
        }
        body.push_str(&format!(r#""V{i:05}":"""#));
    }
    body.push_str("}}");
    body
}

/// The status and error body of a reply that must be the API's JSON error.
async fn error_of(response: reqwest::Response) -> (u16, ErrorBody) {
    let status = response.status().as_u16();
    assert_eq!(response.headers()["content-type"], "application/json", "status {status}");
    (status, serde_json::from_slice(&response.bytes().await.unwrap()).unwrap())
}

/// Two (and eight) of the attack's requests at once: each refused with `too_many_env_vars`, and `/health` answered
/// while they are being read (the merge was quadratic on a worker thread: 267 s of a debug build for two).
#[tokio::test(flavor = "multi_thread")]
async fn a_request_with_80_000_variables_is_refused_by_its_code_while_health_answers() {
    let server = server().start().await;
    let body = eighty_thousand_variables();
    assert!(body.len() > 900 * 1024 && body.len() < protocol::MAX_BODY_BYTES, "{} bytes", body.len());
    let attacks: Vec<_> = (0..8)
        .map(|_| {
            let request = server.post("/exec", body.clone());
            tokio::spawn(async move { error_of(request.send().await.unwrap()).await })
        })
        .collect();
    let health = server.client().get(format!("{}/health", server.url)).send().await.unwrap();
    assert_eq!(health.status(), 200);
    for attack in attacks {
        let (status, error) = attack.await.unwrap();
        assert_eq!((status, error.code), (400, Some(ErrorCode::TooManyEnvVars)), "{}", error.error);
        assert!(error.error.contains("80000 variables, more than the 4096"), "{}", error.error);
    }
    // The bound itself is allowed, its variables laid over the server's.
    let env: serde_json::Map<String, serde_json::Value> =
        (0..protocol::MAX_ENV_VARS).map(|i| (format!("V{i}"), json!(i.to_string()))).collect();
    let reply = server.exec(json!({"cmd": ["sh", "-c", "echo $V4095"], "env": env})).await;
    assert_eq!((reply.exit_code, reply.output.as_str()), (0, "4095\n"));
    server.stop().await;
}

/// `tty.term` is a terminal type: a newline, an escape or 100 KB are refused (the message does not repeat them).
#[tokio::test(flavor = "multi_thread")]
async fn a_terminal_type_with_control_characters_or_100_kb_is_refused() {
    let server = server().start().await;
    for (i, term) in
        ["xterm\nEVIL=1".to_owned(), "x\u{1b}]0;title\u{7}".to_owned(), "x".repeat(100_000)].into_iter().enumerate()
    {
        let body =
            json!({"cmd": ["true"], "run_id": format!("term-{i}"), "tty": {"rows": 24, "cols": 80, "term": term}});
        let (status, error) = error_of(server.post("/exec/stream", body.to_string()).send().await.unwrap()).await;
        assert_eq!(status, 400, "{}", error.error);
        assert!(error.error.starts_with("tty.term must be a terminal type like xterm-256color"), "{}", error.error);
        assert!(error.error.len() < 200, "the message repeats the value: {} bytes", error.error.len());
    }
    server.stop().await;
}

/// `tty` and the bodies of `/resize` and `/signal` are JSON objects: the same fields as an array are refused. Sizes
/// are integers as JSON Schema counts them: `1020.0` is 1020.
#[tokio::test(flavor = "multi_thread")]
async fn tty_resize_and_signal_bodies_must_be_objects_and_sizes_may_be_written_1020_0() {
    let server = server().start().await;
    let body = json!({"cmd": ["true"], "run_id": "tty-array", "tty": [24, 80]});
    let (status, error) = error_of(server.post("/exec/stream", body.to_string()).send().await.unwrap()).await;
    assert_eq!(status, 400);
    assert!(error.error.contains("expected a JSON object like"), "{}", error.error);
    let mut frames = server.with_stdin("plain-run", json!(["cat"])).await;
    for (path, array) in [("resize", "[30, 100]"), ("signal", r#"["TERM"]"#)] {
        let (status, error) =
            error_of(server.post(&format!("/runs/plain-run/{path}"), array).send().await.unwrap()).await;
        assert_eq!(status, 400, "{path}");
        assert!(error.error.contains("it must be a JSON object like"), "{path}: {}", error.error);
    }
    // A size written with a fraction of zero is read (and the run, which has no terminal, says so).
    let resize = server.post("/runs/plain-run/resize", r#"{"rows": 1020.0, "cols": 80}"#).send().await.unwrap();
    let (status, error) = error_of(resize).await;
    assert_eq!((status, error.code), (409, Some(ErrorCode::NotATerminal)), "{}", error.error);
    let tty = json!({"cmd": ["stty", "size"], "run_id": "tty-float", "tty": {"rows": 30.0, "cols": 100.0}});
    let response = server.post("/exec/stream", tty.to_string()).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let frames_of_tty = Frames::new(response).rest().await;
    assert_eq!(rebuild(&frames_of_tty, true), b"30 100\r\n");
    server.send_stdin("plain-run", 0, Vec::new(), true).await.unwrap();
    frames.rest().await;
    server.stop().await;
}

/// `Accept` q-values as HTTP has them: a wildcard gives JSON its q, so `text/event-stream;q=0.5, application/*`
/// prefers JSON; `text/event-stream;q=0` is not acceptable even beside `*/*`.
#[tokio::test(flavor = "multi_thread")]
async fn accept_q_values_count_for_wildcards_too() {
    let server = server().start().await;
    let cases = [
        ("text/event-stream;q=0.5, application/*", "application/json"),
        ("text/event-stream;q=0, */*", "application/json"),
        ("text/event-stream;q=0.5, */*;q=0.4", "text/event-stream"),
        (protocol::STREAM_ACCEPT, "text/event-stream"),
    ];
    for (accept, expected) in cases {
        let response = server.post("/exec", json!({"cmd": ["true"]}).to_string()).header("accept", accept);
        let response = response.send().await.unwrap();
        assert_eq!(response.status(), 200);
        assert_eq!(response.headers()["content-type"], expected, "Accept: {accept}");
        response.bytes().await.unwrap();
    }
    server.stop().await;
}

/// The head of a raw request to `path` with `headers`, then `body` as is; the whole reply.
fn raw(addr: std::net::SocketAddr, path: &str, headers: &str, body: &[u8]) -> String {
    let mut socket = TcpStream::connect(addr).unwrap();
    socket.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(socket, "POST {path} HTTP/1.1\r\nHost: test\r\n{headers}\r\n").unwrap();
    socket.write_all(body).unwrap();
    let mut reply = Vec::new();
    let _ = socket.read_to_end(&mut reply);
    String::from_utf8_lossy(&reply).into_owned()
}

/// The status and error body of a raw reply, which must be the API's JSON error.
fn raw_error(reply: &str) -> (u16, ErrorBody) {
    let status = reply.split(' ').nth(1).unwrap().parse().unwrap();
    let (head, body) = reply.split_once("\r\n\r\n").unwrap();
    assert!(head.to_ascii_lowercase().contains("content-type: application/json"), "{reply}");
    // A chunked reply's body is one chunk: its size line, the JSON, and the last chunk.
    let json = body.lines().find(|line| line.starts_with('{')).unwrap_or(body);
    (status, serde_json::from_str(json).unwrap_or_else(|err| panic!("{err}: {reply}")))
}

/// `/stdin`, `/signal` and `/resize` answer a body over 1 MiB, a body that does not arrive within
/// `--header-timeout`, and broken chunked framing as every endpoint does: the JSON error, with its code, and 408
/// for the slow one.
#[tokio::test(flavor = "multi_thread")]
async fn body_failures_of_stdin_signal_and_resize_are_json_errors_with_codes() {
    let server = server().arg("--header-timeout", "1").start().await;
    let mut frames = server.with_stdin("bodies", json!(["cat"])).await;
    let addr = server.addr;
    for path in ["/runs/bodies/stdin?offset=0", "/runs/bodies/signal", "/runs/bodies/resize"] {
        let target = path.to_owned();
        let replies = tokio::task::spawn_blocking(move || {
            let path = target;
            let large = format!("Content-Length: {}\r\nConnection: close\r\n", protocol::MAX_BODY_BYTES + 1);
            let too_large = raw(addr, &path, &large, &vec![b'x'; protocol::MAX_BODY_BYTES + 1]);
            let slow = raw(addr, &path, "Content-Length: 100\r\nConnection: close\r\n", b"{");
            let broken =
                raw(addr, &path, "Transfer-Encoding: chunked\r\nConnection: close\r\n", b"zz\r\n{}\r\n0\r\n\r\n");
            [too_large, slow, broken]
        })
        .await
        .unwrap();
        let expected =
            [(413, ErrorCode::BodyTooLarge), (408, ErrorCode::BodyTimeout), (400, ErrorCode::BodyUnreadable)];
        for (reply, (status, code)) in replies.iter().zip(expected) {
            let (got, error) = raw_error(reply);
            assert_eq!((got, error.code), (status, Some(code)), "{path}: {}", error.error);
        }
    }
    server.send_stdin("bodies", 0, Vec::new(), true).await.unwrap();
    frames.rest().await;
    server.stop().await;
}
