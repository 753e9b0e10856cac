//! The HTTP surface: auth, request validation, limits, endpoints.

use serde_json::{json, Value};

use crate::support::*;

async fn error_of(response: reqwest::Response) -> String {
    assert_eq!(response.headers()["content-type"], "application/json");
    let body: Value = serde_json::from_slice(&response.bytes().await.unwrap()).unwrap();
    body["error"].as_str().unwrap().to_owned()
}

#[tokio::test(flavor = "multi_thread")]
async fn health_and_info_follow_the_contract() {
    let server = server().arg("--runtime", "python").start().await;
    let client = server.client();
    let health: Value = client.get(format!("{}/health", server.url)).send().await.unwrap().json_value().await;
    assert_eq!(health, json!({"status": "ok"}));
    let info: Value = client.get(format!("{}/info", server.url)).send().await.unwrap().json_value().await;
    assert_eq!(info["runtime"], "python");
    assert_eq!(info["cwd"], server.workspace.path().canonicalize().unwrap().display().to_string());
    assert_eq!(info["version"], env!("CARGO_PKG_VERSION"));
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn auth_matrix() {
    let server = server().token("s3cret-token").start().await;
    let client = server.client();
    let url = |path: &str| format!("{}{path}", server.url);
    let exec_body = json!({"cmd": ["true"]}).to_string();

    // /health never needs the token.
    assert_eq!(client.get(url("/health")).send().await.unwrap().status(), 200);

    for path in ["/info", "/exec", "/exec/stream", "/nope"] {
        let cases: [(Option<&str>, u16); 7] = [
            (None, 401),
            (Some("Bearer wrong"), 401),
            (Some("Basic s3cret-token"), 401),
            (Some("s3cret-token"), 401),
            (Some("Bearer s3cret-token"), if path == "/nope" { 404 } else { 200 }),
            (Some("bearer s3cret-token"), if path == "/nope" { 404 } else { 200 }),
            (Some("BEARER s3cret-token"), if path == "/nope" { 404 } else { 200 }),
        ];
        for (header, status) in cases {
            let mut request =
                if path == "/info" { client.get(url(path)) } else { client.post(url(path)).body(exec_body.clone()) };
            if let Some(header) = header {
                request = request.header("authorization", header);
            }
            let response = request.send().await.unwrap();
            assert_eq!(response.status().as_u16(), status, "{path} with {header:?}");
            if status == 401 {
                assert!(response.headers()["www-authenticate"].to_str().unwrap().starts_with("Bearer"));
                let message = error_of(response).await;
                assert!(message.contains("Bearer") || message.contains("token"), "{message}");
            } else {
                let _ = response.bytes().await;
            }
        }
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_requests_get_400_with_a_message_and_run_nothing() {
    let server = server().start().await;
    let canary = server.workspace.path().join("canary");
    let canary_cmd = format!("touch {}", canary.display());
    let cases: Vec<(String, &str)> = vec![
        ("{not json".into(), "invalid request body"),
        ("".into(), "invalid request body"),
        (json!([["sh", "-c", canary_cmd]]).to_string(), "must be a JSON object"),
        (json!({"cmd": "sh -c true"}).to_string(), "invalid type"),
        (json!({"cmd": []}).to_string(), "cmd is empty"),
        (json!({"cmd": [""]}).to_string(), "cmd[0] is empty"),
        (json!({"cmd": null}).to_string(), "invalid type"),
        (json!({"cwd": "x"}).to_string(), "missing field `cmd`"),
        (json!({"cmd": ["sh", "-c", canary_cmd], "timeout": "10"}).to_string(), "invalid type"),
        (json!({"cmd": ["sh", "-c", canary_cmd], "timeout": 1e30}).to_string(), "invalid type"),
        (json!({"cmd": ["sh", "-c", canary_cmd], "env": {"A=B": "1"}}).to_string(), "env name"),
        (json!({"cmd": ["sh", "-c", canary_cmd], "env": ["A"]}).to_string(), "invalid type"),
        (json!({"cmd": ["sh", "-c", canary_cmd, "a\u{0}b"]}).to_string(), "NUL"),
        (json!({"cmd": ["sh", "-c", canary_cmd], "stdin_b64": "***"}).to_string(), "base64"),
        (json!({"cmd": ["sh", "-c", canary_cmd], "cwd": ".."}).to_string(), "outside the workspace root"),
        (json!({"cmd": ["sh", "-c", canary_cmd], "cwd": "/etc"}).to_string(), "outside the workspace root"),
        (r#"{"cmd": ["sh", "-c", "\ud800"]}"#.into(), "invalid request body"),
    ];
    for path in ["/exec", "/exec/stream"] {
        for (body, expected) in &cases {
            let response = server.post(path, body.clone()).send().await.unwrap();
            assert_eq!(response.status(), 400, "{path} {body}");
            let message = error_of(response).await;
            assert!(message.contains(expected), "{path} {body}: {message}");
        }
    }
    // Invalid UTF-8 in the body itself.
    let response = server.post("/exec", b"{\"cmd\": [\"\xff\"]}".to_vec()).send().await.unwrap();
    assert_eq!(response.status(), 400);
    assert!(!canary.exists(), "a rejected request ran a command");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_root_error_names_the_root() {
    let server = server().start().await;
    let root = server.workspace.path().canonicalize().unwrap();
    std::os::unix::fs::symlink("/", root.join("escape")).unwrap();
    let response =
        server.post("/exec", json!({"cmd": ["true"], "cwd": "escape/tmp"}).to_string()).send().await.unwrap();
    assert_eq!(response.status(), 400);
    assert!(error_of(response).await.contains(&root.display().to_string()));
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn oversized_bodies_get_413() {
    let server = server().start().await;
    let big = json!({"cmd": ["true"], "stdin": "x".repeat(2 * 1024 * 1024)}).to_string();
    for path in ["/exec", "/exec/stream"] {
        let response = server.post(path, big.clone()).send().await.unwrap();
        assert_eq!(response.status(), 413, "{path}");
        assert!(error_of(response).await.contains("1 MiB"));
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn unknown_paths_and_methods_are_named() {
    let server = server().start().await;
    let client = server.client();
    let response = client.get(format!("{}/nope", server.url)).send().await.unwrap();
    assert_eq!(response.status(), 404);
    assert!(error_of(response).await.contains("POST /exec"));
    let response = client.get(format!("{}/exec", server.url)).send().await.unwrap();
    assert_eq!(response.status(), 405);
    assert!(error_of(response).await.contains("GET is not allowed on /exec"));
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn too_many_running_commands_get_503_with_retry_after() {
    let server = server().arg("--max-concurrent", "1").start().await;
    let marker = marker();
    let mut first = raw_post(
        server.addr,
        "/exec/stream",
        &json!({"cmd": ["sh", "-c", format!("echo up; {}", sleeper(&marker))]}).to_string(),
    );
    read_until(&mut first, "up");
    let response = server.post("/exec", json!({"cmd": ["true"]}).to_string()).send().await.unwrap();
    assert_eq!(response.status(), 503);
    assert_eq!(response.headers()["retry-after"], "1");
    assert!(error_of(response).await.contains("--max-concurrent"));
    drop(first);
    assert_no_survivors(&marker, std::time::Duration::from_secs(5));
    // The slot comes back once the cancelled command is gone.
    server.wait_for_a_free_slot().await;
    server.stop().await;
}

/// A reply still being sent holds its command's slot: a client that does not read its reply cannot make the server
/// hold replies beyond `--max-concurrent`. Reading it gives the slot back.
#[tokio::test(flavor = "multi_thread")]
async fn an_unread_reply_holds_its_slot_until_it_is_read() {
    let server = server().arg("--max-concurrent", "1").arg("--max-output", "67108864").start().await;
    // 32 MiB: far more than the socket buffers take, so the reply is still being sent while nobody reads it.
    let body = json!({"cmd": ["sh", "-c", "head -c 33554432 /dev/zero | tr '\\0' a"]}).to_string();
    let mut unread = raw_post(server.addr, "/exec", &body);
    read_until(&mut unread, "HTTP/1.1 200");
    let response = server.post("/exec", json!({"cmd": ["true"]}).to_string()).send().await.unwrap();
    assert_eq!(response.status(), 503, "the unread reply does not hold its slot");
    let info: Value = server.client().get(format!("{}/info", server.url)).send().await.unwrap().json_value().await;
    assert_eq!(info["running"], 1);
    let rest = tokio::task::spawn_blocking(move || read_all(&mut unread)).await.unwrap();
    assert!(rest.len() > 32 * 1024 * 1024 && rest.contains(r#""output_truncated":false"#));
    server.wait_for_a_free_slot().await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn env_and_cwd() {
    let server = server().start().await;
    std::fs::create_dir_all(server.workspace.path().join("sub/dir")).unwrap();
    let reply = server
        .exec(json!({"cmd": ["sh", "-c", "pwd; echo \"$GREETING\"; echo \"${HOME:+home-set}\""], "cwd": "sub/dir",
                     "env": {"GREETING": "hello world"}}))
        .await;
    let root = server.workspace.path().canonicalize().unwrap();
    assert_eq!(reply.output, format!("{}\nhello world\nhome-set\n", root.join("sub/dir").display()));
    // Absolute paths inside the root work too; a missing one is the contract's start failure.
    let reply = server.exec(json!({"cmd": ["pwd"], "cwd": root.join("sub").display().to_string()})).await;
    assert_eq!(reply.output.trim(), root.join("sub").display().to_string());
    let reply = server.exec(json!({"cmd": ["pwd"], "cwd": "missing"})).await;
    assert_eq!(reply.exit_code, -1);
    assert!(reply.error.unwrap().starts_with("failed to start command: working directory"));
    let frames = server.stream(json!({"cmd": ["pwd"], "cwd": "missing"})).await;
    assert!(matches!(&frames[0], protocol::Frame::Error { data, .. } if data.contains("does not exist")));
    assert_eq!(exit_frame(&frames).0, -1);
    server.stop().await;
}

trait JsonValue {
    async fn json_value(self) -> Value;
}

impl JsonValue for reqwest::Response {
    async fn json_value(self) -> Value {
        serde_json::from_slice(&self.bytes().await.unwrap()).unwrap()
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_openapi_document_is_served_as_kept_and_behind_the_token() {
    let server = server().token("s3cret-token").start().await;
    let client = server.client();
    let url = format!("{}/openapi.json", server.url);
    let response = client.get(&url).send().await.unwrap();
    assert_eq!(response.status(), 401);
    assert!(error_of(response).await.contains("Bearer"));
    let response = client.get(&url).bearer_auth("s3cret-token").send().await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "application/json");
    assert_eq!(response.text().await.unwrap(), include_str!("../openapi.json"));
    server.stop().await;
}

/// `POST /exec` with an `Accept` that prefers SSE is answered as `POST /exec/stream` is; one that does not (none,
/// `*/*`, JSON first) gets the contract's JSON reply.
#[tokio::test(flavor = "multi_thread")]
async fn exec_streams_when_accept_prefers_the_event_stream() {
    let server = server().start().await;
    let body = json!({"cmd": ["sh", "-c", "echo out; echo err >&2; printf tail; exit 3"]});
    let without_duration = |frames: Vec<protocol::Frame>| -> Vec<protocol::Frame> {
        frames
            .into_iter()
            .map(|frame| match frame {
                protocol::Frame::Exit { data, timed_out, signal, .. } => protocol::Frame::Exit {
                    data,
                    timed_out,
                    signal,
                    duration_ms: 0,
                    stdout_bytes: None,
                    stderr_bytes: None,
                    stopped_by: None,
                    stdin_consumed: None,
                },
                other => other,
            })
            .collect()
    };
    let streamed = server.post("/exec/stream", body.to_string()).send().await.unwrap();
    let streamed = parse_sse(&streamed.text().await.unwrap());
    let negotiated = server.post("/exec", body.to_string()).header("accept", protocol::STREAM_ACCEPT).send().await;
    let negotiated = negotiated.unwrap();
    assert_eq!(negotiated.status(), 200);
    assert_eq!(negotiated.headers()["content-type"], "text/event-stream");
    let negotiated = parse_sse(&negotiated.text().await.unwrap());
    let (mut out, mut err) = (rebuild(&negotiated, true), rebuild(&negotiated, false));
    assert_eq!((out.as_slice(), err.as_slice()), (&b"out\ntail"[..], &b"err\n"[..]));
    // The same frames of each stream (across the two pipes the order is the scheduler's), and the same end.
    let only = |frames: &[protocol::Frame], stdout: bool| -> Vec<protocol::Frame> {
        let kept = frames.iter().filter(|frame| match frame {
            protocol::Frame::Stdout(_) => stdout,
            protocol::Frame::Stderr(_) => !stdout,
            _ => true,
        });
        without_duration(kept.cloned().collect())
    };
    for stdout in [true, false] {
        assert_eq!(only(&negotiated, stdout), only(&streamed, stdout));
    }
    for accept in [None, Some("*/*"), Some("application/json, text/event-stream"), Some("text/*")] {
        let mut request = server.post("/exec", body.to_string());
        if let Some(accept) = accept {
            request = request.header("accept", accept);
        }
        let response = request.send().await.unwrap();
        assert_eq!(response.headers()["content-type"], "application/json", "{accept:?}");
        let reply: protocol::ExecReply = serde_json::from_slice(&response.bytes().await.unwrap()).unwrap();
        (out, err) = (reply.stdout_bytes().unwrap().to_vec(), reply.stderr_bytes().unwrap().to_vec());
        assert_eq!((reply.exit_code, out.as_slice(), err.as_slice()), (3, &b"out\ntail"[..], &b"err\n"[..]));
    }
    // A named run negotiates alike: its frames carry offsets, as on /exec/stream.
    let named = json!({"cmd": ["echo", "named"], "run_id": "negotiated-1"});
    let response = server.post("/exec", named.to_string()).header("accept", "text/event-stream").send().await.unwrap();
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let frames = parse_sse(&response.text().await.unwrap());
    assert!(matches!(&frames[0], protocol::Frame::Stdout(chunk) if chunk.offset == Some(0) && chunk.data == "named"));
    assert!(matches!(frames.last(), Some(protocol::Frame::Exit { data: 0, stdout_bytes: Some(6), .. })));
    server.stop().await;
}
