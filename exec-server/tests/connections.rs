//! Connections: the header, body and idle timeouts, the connection cap, the open-file limit, and JSON bodies on the
//! errors hyper answers itself.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::support::*;

/// A raw connection with a generous read timeout: a test that waits on a server that never closes fails, not hangs.
fn connect(addr: std::net::SocketAddr) -> TcpStream {
    let socket = TcpStream::connect(addr).unwrap();
    socket.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    socket
}

/// Everything the server sends until it closes the connection.
fn read_to_close(socket: &mut TcpStream) -> String {
    let mut bytes = Vec::new();
    match socket.read_to_end(&mut bytes) {
        Ok(_) => {}
        Err(err) if err.kind() == std::io::ErrorKind::ConnectionReset => {}
        Err(err) => panic!("the server did not close the connection: {err} (read so far: {bytes:?})"),
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

/// The status and `error` message of a whole raw reply.
fn error_reply(reply: &str) -> (u16, String) {
    let (head, body) = reply.split_once("\r\n\r\n").unwrap_or_else(|| panic!("no reply head in {reply:?}"));
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    assert!(head.to_ascii_lowercase().contains("content-type: application/json"), "{head}");
    let body: Value = serde_json::from_str(body).unwrap_or_else(|err| panic!("{err}: body {body:?}"));
    (status, body["error"].as_str().unwrap_or_else(|| panic!("no error in {body}")).to_owned())
}

/// A client that sends a request head a byte at a time, steadily, is cut off with 408 however steadily it sends.
#[tokio::test(flavor = "multi_thread")]
async fn a_trickled_request_head_gets_408_and_the_connection_closes() {
    let server = server().arg("--header-timeout", "0.5").start().await;
    let addr = server.addr;
    let reply = tokio::task::spawn_blocking(move || {
        let mut socket = connect(addr);
        let mut writer = socket.try_clone().unwrap();
        let dripper = std::thread::spawn(move || {
            for byte in b"GET /health HTTP/1.1\r\nHost: test\r\nX-Slow: ".iter().chain([b'a'; 200].iter()) {
                if writer.write_all(&[*byte]).is_err() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        });
        let reply = read_to_close(&mut socket);
        dripper.join().unwrap();
        reply
    })
    .await
    .unwrap();
    let (status, message) = error_reply(&reply);
    assert_eq!(status, 408, "{reply}");
    assert!(message.contains("--header-timeout"), "{message}");
    // A connection that sends nothing at all is closed the same way.
    let reply = tokio::task::spawn_blocking(move || read_to_close(&mut connect(addr))).await.unwrap();
    assert_eq!(error_reply(&reply).0, 408);
    let (_, metrics) = scrape(&server, None).await;
    assert_eq!(value(&metrics, "exec_server_http_requests_total{endpoint=\"connection\",status=\"408\"}"), 2.0);
    server.stop().await;
}

/// A body that stops halfway gets 408 too, and nothing runs.
#[tokio::test(flavor = "multi_thread")]
async fn a_stalled_request_body_gets_408_and_runs_nothing() {
    let server = server().arg("--header-timeout", "0.5").start().await;
    let canary = server.workspace.path().join("canary");
    let body = json!({"cmd": ["touch", canary.display().to_string()]}).to_string();
    let addr = server.addr;
    let reply = tokio::task::spawn_blocking(move || {
        let mut socket = connect(addr);
        let head = format!("POST /exec HTTP/1.1\r\nHost: test\r\nContent-Length: {}\r\n\r\n", body.len());
        socket.write_all(head.as_bytes()).unwrap();
        socket.write_all(&body.as_bytes()[..10]).unwrap();
        read_to_close(&mut socket)
    })
    .await
    .unwrap();
    let (status, message) = error_reply(&reply);
    assert_eq!(status, 408, "{reply}");
    assert!(message.contains("request body did not arrive"), "{message}");
    assert!(!canary.exists());
    server.stop().await;
}

/// Between requests a keep-alive connection is closed after the idle timeout; a connection whose request is in
/// flight is never idle, however quiet: a long blocking command, or a stream with nothing to send.
#[tokio::test(flavor = "multi_thread")]
async fn idle_connections_close_but_quiet_requests_in_flight_do_not() {
    let server = server().arg("--idle-timeout", "0.3").arg("--keepalive", "60").start().await;
    let addr = server.addr;
    let idle = tokio::task::spawn_blocking(move || {
        let mut socket = connect(addr);
        socket.write_all(b"GET /health HTTP/1.1\r\nHost: test\r\n\r\n").unwrap();
        read_to_close(&mut socket)
    });
    // Each is quiet for ten idle timeouts.
    let blocking = server.exec(json!({"cmd": ["sh", "-c", "sleep 3; echo done"]}));
    let streaming = server.stream(json!({"cmd": ["sh", "-c", "sleep 3; echo done"]}));
    let (reply, stream) = tokio::join!(blocking, streaming);
    assert_eq!((reply.exit_code, reply.output.as_str()), (0, "done\n"));
    assert_eq!(rebuild(&stream, true), b"done\n");
    assert_eq!(exit_frame(&stream).0, 0);
    assert!(idle.is_finished(), "the idle connection outlived the quiet requests");
    let idle_reply = idle.await.unwrap();
    assert!(idle_reply.starts_with("HTTP/1.1 200") && idle_reply.ends_with(r#"{"status":"ok"}"#), "{idle_reply}");
    server.stop().await;
}

/// At the cap a new connection pushes out the one unused for longest; when every connection has a request in
/// flight it gets 503 with a JSON message, and the running requests are untouched.
#[tokio::test(flavor = "multi_thread")]
async fn at_the_cap_idle_connections_give_way_and_busy_ones_are_kept() {
    let server = server().arg("--max-connections", "2").start().await;
    let marker = marker();
    // One process per command (`exec`), so counting them does not race with the shell.
    let script = format!("echo up; exec {}", sleeper(&marker));
    let addr = server.addr;
    let mut idle = connect(addr);
    // Accepted (the cap counts it) before the streams below connect: it has answered a request, and is idle since.
    idle.write_all(b"GET /health HTTP/1.1\r\nHost: test\r\n\r\n").unwrap();
    let mut health = Vec::new();
    while !health.ends_with(br#"{"status":"ok"}"#) {
        let mut byte = [0u8];
        assert_eq!(idle.read(&mut byte).unwrap(), 1, "closed before /health answered: {health:?}");
        health.push(byte[0]);
    }
    let mut first = raw_post(addr, "/exec/stream", &json!({"cmd": ["sh", "-c", &script]}).to_string());
    read_until(&mut first, "up");
    // The cap is reached: this connection pushes out the idle one.
    let mut second = raw_post(addr, "/exec/stream", &json!({"cmd": ["sh", "-c", &script]}).to_string());
    read_until(&mut second, "up");
    assert_eq!(read_to_close(&mut idle), "", "the idle connection was not closed");
    // Both connections have a request in flight: a third is refused, and says why.
    let refused = tokio::task::spawn_blocking(move || {
        let mut socket = connect(addr);
        socket.write_all(b"GET /health HTTP/1.1\r\nHost: test\r\n\r\n").unwrap();
        read_to_close(&mut socket)
    })
    .await
    .unwrap();
    let (status, message) = error_reply(&refused);
    assert_eq!(status, 503, "{refused}");
    assert!(refused.to_ascii_lowercase().contains("retry-after: 1"), "{refused}");
    assert!(message.contains("--max-connections"), "{message}");
    assert_eq!(processes_matching(&marker).len(), 2, "the running commands were touched");
    drop((first, second));
    assert_no_survivors(&marker, Duration::from_secs(5));
    // Room again.
    let deadline = Instant::now() + Duration::from_secs(10);
    while server.client().get(format!("{}/health", server.url)).send().await.map(|r| r.status()).ok()
        != Some(reqwest::StatusCode::OK)
    {
        assert!(Instant::now() < deadline, "no room after the streams ended");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (_, metrics) = scrape(&server, None).await;
    assert_eq!(value(&metrics, "exec_server_http_requests_total{endpoint=\"connection\",status=\"503\"}"), 1.0);
    server.stop().await;
}

/// Requests hyper refuses while parsing them get the same `{"error": …}` bodies as every other error.
#[tokio::test(flavor = "multi_thread")]
async fn requests_the_parser_refuses_get_json_errors() {
    let server = server().start().await;
    let addr = server.addr;
    let big_header = format!("GET /health HTTP/1.1\r\nHost: test\r\nX-Big: {}\r\n\r\n", "a".repeat(40 * 1024));
    let cases: Vec<(Vec<u8>, u16, &str)> = vec![
        (b"GARBAGE\r\n\r\n".to_vec(), 400, "malformed HTTP request"),
        (b"GET /health HTTP/1.1\r\nHost: test\r\nBad Header: x\r\n\r\n".to_vec(), 400, "malformed HTTP request"),
        (b"GET /health HTTP/9.9\r\nHost: test\r\n\r\n".to_vec(), 400, "malformed HTTP request"),
        (b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03".to_vec(), 400, "HTTP/1.1"),
        (big_header.into_bytes(), 431, "at most 32 KiB"),
    ];
    for (request, expected, text) in cases {
        let reply = tokio::task::spawn_blocking(move || {
            let mut socket = connect(addr);
            socket.write_all(&request).unwrap();
            read_to_close(&mut socket)
        })
        .await
        .unwrap();
        let (status, message) = error_reply(&reply);
        assert_eq!(status, expected, "{reply}");
        assert!(message.contains(text), "{message}");
    }
    // An HTTP/2 client with prior knowledge is told, the HTTP/2 way, to use HTTP/1.1: SETTINGS, then GOAWAY with
    // HTTP_1_1_REQUIRED (0xd) and the message as its debug data.
    let reply = tokio::task::spawn_blocking(move || {
        let mut socket = connect(addr);
        socket.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n").unwrap();
        let mut bytes = Vec::new();
        let _ = socket.read_to_end(&mut bytes);
        bytes
    })
    .await
    .unwrap();
    assert_eq!(&reply[..9], &[0, 0, 0, 4, 0, 0, 0, 0, 0], "no SETTINGS frame: {reply:?}");
    assert_eq!((reply[12], u32::from_be_bytes(reply[22..26].try_into().unwrap())), (7, 0xd), "{reply:?}");
    let debug: Value = serde_json::from_slice(&reply[26..]).unwrap();
    assert!(debug["error"].as_str().unwrap().contains("HTTP/1.1 only"));
    assert_eq!(server.client().get(format!("{}/health", server.url)).send().await.unwrap().status(), 200);
    server.stop().await;
}

/// The server started under `limits` (shell `ulimit` commands) with `args`: its process and port.
fn start_under_limits(limits: &str, args: &[&str], workspace: &std::path::Path) -> (std::process::Child, u16) {
    let script = format!(r#"{limits} && exec "$0" "$@""#);
    let mut child = std::process::Command::new("sh")
        .args(["-c", &script, env!("CARGO_BIN_EXE_exec-server"), "--host", "127.0.0.1", "--port", "0"])
        .args(args)
        .arg("--cwd")
        .arg(workspace)
        .env_remove("EXEC_SERVER_TOKEN")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut log = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    let port: u16 = loop {
        line.clear();
        assert!(log.read_line(&mut line).unwrap() > 0, "the server exited before listening");
        if let Some(addr) = line.split("addr=").nth(1) {
            break addr.split_whitespace().next().unwrap().rsplit(':').next().unwrap().parse().unwrap();
        }
    };
    std::thread::spawn(move || std::io::copy(&mut log, &mut std::io::sink()));
    (child, port)
}

/// The soft and hard open-file limits of process `pid`.
fn nofile_of(pid: u32) -> (String, String) {
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap();
    let line = limits.lines().find(|line| line.starts_with("Max open files")).unwrap();
    let mut fields = line.split_whitespace().skip(3);
    (fields.next().unwrap().to_owned(), fields.next().unwrap().to_owned())
}

/// Started with a low open-file limit, the server raises its soft limit (here to the hard one, which is below what
/// the default cap needs), and keeps a reserve for commands: with more idle connections than the limit allows,
/// commands still start, /health still answers, and the descriptors the commands need stay free.
#[test]
fn a_low_open_file_limit_leaves_room_for_commands() {
    let workspace = tempfile::tempdir().unwrap();
    let (mut child, port) =
        start_under_limits("ulimit -Sn 100 && ulimit -Hn 200", &["--max-concurrent", "4"], workspace.path());
    let (soft, _) = nofile_of(child.id());
    let addr: std::net::SocketAddr = ([127, 0, 0, 1], port).into();
    // 4 commands × 8 + 64 = 96 kept: 104 connections at most. Open more than the whole limit.
    let idle: Vec<TcpStream> =
        (0..250).map_while(|_| TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()).collect();
    std::thread::sleep(Duration::from_millis(300));
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let replies = runtime.block_on(async {
        let client = reqwest::Client::builder().no_proxy().build().unwrap();
        let url = format!("http://{addr}");
        let health = client.get(format!("{url}/health")).timeout(Duration::from_secs(10)).send().await;
        let commands = (0..4).map(|i| {
            let request = client.post(format!("{url}/exec")).timeout(Duration::from_secs(20));
            request.body(json!({"cmd": ["sh", "-c", format!("sleep 0.5; echo {i}")]}).to_string()).send()
        });
        let commands = futures_util::future::join_all(commands).await;
        let mut outputs = Vec::new();
        for reply in commands {
            let reply: protocol::ExecReply = serde_json::from_slice(&reply.unwrap().bytes().await.unwrap()).unwrap();
            outputs.push((reply.exit_code, reply.output, reply.error));
        }
        (health.map(|r| r.status().as_u16()).ok(), outputs)
    });
    let fds = std::fs::read_dir(format!("/proc/{}/fd", child.id())).unwrap().count();
    drop(idle);
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(soft, "200", "soft limit not raised");
    assert_eq!(replies.0, Some(200), "/health did not answer");
    for (i, (code, output, error)) in replies.1.into_iter().enumerate() {
        assert_eq!((code, output, error), (0, format!("{i}\n"), None));
    }
    // The promise: the descriptors of the 4 commands that may run stay free, whatever the connections take (the
    // process could not exceed its limit of 200 anyway).
    let reserve_for_commands = 4 * 8;
    assert!(fds + reserve_for_commands <= 200, "{fds} descriptors open: less than the commands' reserve left");
}

/// Commands inherit the server's open-file limit, so the server raises it only to what its connections and
/// commands need (here 16 + 4 × 8 + 64 = 112), not to the hard limit (before: the hard limit, 524288 or more under
/// some container runtimes, which makes tools that close every descriptor or use select() slow or fail).
#[tokio::test(flavor = "multi_thread")]
async fn commands_inherit_only_the_open_file_limit_the_server_needs() {
    let workspace = tempfile::tempdir().unwrap();
    let args = ["--max-concurrent", "4", "--max-connections", "16"];
    let (mut child, port) = start_under_limits("ulimit -Sn 100", &args, workspace.path());
    let (soft, hard) = nofile_of(child.id());
    let client = reqwest::Client::builder().no_proxy().build().unwrap();
    let reply = client
        .post(format!("http://127.0.0.1:{port}/exec"))
        .timeout(Duration::from_secs(20))
        .body(json!({"cmd": ["sh", "-c", "ulimit -Sn"]}).to_string())
        .send()
        .await
        .unwrap();
    let reply: protocol::ExecReply = serde_json::from_slice(&reply.bytes().await.unwrap()).unwrap();
    let _ = child.kill();
    let _ = child.wait();
    let expected = hard.parse::<u64>().map_or(112, |hard| hard.min(112)).max(100).to_string();
    assert_eq!(soft, expected, "the server's soft limit (hard limit {hard})");
    assert_eq!(reply.output.trim(), expected, "a command's soft limit (hard limit {hard})");
}

/// A server out of file descriptors says so: named runs that keep their pipes use up a low open-file limit, then
/// idle connections take what is left one by one; each request meanwhile either fails to spawn, with a start error
/// that names the descriptors, or, once its own connection took the last descriptor, cannot open its working
/// directory: 503 `out_of_file_descriptors`, never "working directory … cannot be opened", which sent users looking
/// at their cwd.
#[tokio::test(flavor = "multi_thread")]
async fn a_server_out_of_file_descriptors_says_so_not_that_the_cwd_cannot_be_opened() {
    let workspace = tempfile::tempdir().unwrap();
    let args = ["--max-concurrent", "64", "--max-runs", "64", "--reattach-window", "120"];
    let (mut child, port) = start_under_limits("ulimit -Sn 48 && ulimit -Hn 48", &args, workspace.path());
    let client = reqwest::Client::builder().no_proxy().pool_max_idle_per_host(0).build().unwrap();
    let url = format!("http://127.0.0.1:{port}");
    let mut outcomes = Vec::new();
    let mut idle = Vec::new();
    for i in 0..64 {
        let body =
            json!({"cmd": ["sh", "-c", "echo up; exec sleep 100"], "run_id": format!("fd-{i}"), "stdin_stream": true});
        let sent = client.post(format!("{url}/exec/stream")).timeout(Duration::from_secs(5)).body(body.to_string());
        // No descriptor left even for this connection: take one back.
        let Ok(response) = sent.send().await else {
            idle.pop();
            continue;
        };
        let status = response.status().as_u16();
        if status == 503 {
            let error: protocol::ErrorBody = serde_json::from_slice(&response.bytes().await.unwrap()).unwrap();
            outcomes.push((status, error.code, error.error));
            break;
        }
        assert_eq!(status, 200);
        // The first frame: the run started (it is kept once this connection goes), or it never did.
        let mut frames = crate::runs::Frames::new(response);
        if let Some(protocol::Frame::Error { data, .. }) = frames.next().await {
            outcomes.push((status, None, data));
            // Out of descriptors for a spawn: one more idle connection takes one of those left.
            idle.push(TcpStream::connect(("127.0.0.1", port)).unwrap());
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    for (_, _, message) in &outcomes {
        assert!(!message.contains("working directory"), "{message}");
        assert!(message.contains("out of file descriptors"), "{message}");
    }
    let last = outcomes.last().expect("64 runs fitted in 48 descriptors");
    assert_eq!((last.0, last.1), (503, Some(protocol::ErrorCode::OutOfFileDescriptors)), "{outcomes:?}");
}
