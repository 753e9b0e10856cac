//! A server that stops answering, one restarted under a run, one that refuses stdin for ever, and what the client
//! says then: each ending one line naming the sidecar and what the client last knew. The real server runs in a
//! process of its own ([`ServerProcess`]) so that it can be stopped (SIGSTOP), killed and started again.

use std::process::Stdio;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use nix::sys::signal::Signal;
use tokio::io::AsyncBufReadExt;

use crate::raw_server::{raw_server, Piece, Reply};
use crate::server_process::ServerProcess;
use crate::support::*;

/// The client for runtime "python" against `url`, working in `workspace`.
fn client_for(url: &str, workspace: &std::path::Path) -> BinaryRun {
    client_run().env("BUILD_SIDECARS", format!(r#"{{"python":{{"internal_url":"{url}"}}}}"#)).current_dir(workspace)
}

/// Kills what a killed server left running of a command carrying `marker` (its commands outlive a SIGKILL).
fn kill_left_behind(marker: &str) {
    for pid in processes_matching(marker) {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), Signal::SIGKILL);
    }
    assert_no_survivors(marker, std::time::Duration::from_secs(10));
}

/// A stream whose server stops answering (SIGSTOP) ends after the silence bound and as long again of reconnecting,
/// each reconnect bounded, in both streaming modes: exit 1, one line naming the sidecar, the run and the output that
/// arrived. (Before: the reconnect had no bound and the client waited for ever.)
#[tokio::test(flavor = "multi_thread")]
async fn a_stopped_server_ends_a_stream_with_one_line_of_what_was_known() {
    let workspace = tempfile::tempdir().unwrap();
    for mode in ["negotiated", "stream"] {
        let server = ServerProcess::start(workspace.path(), 0, &[]);
        let marker = marker();
        let mut client = client_for(&server.url(), workspace.path())
            .env("SIDECAR_SILENCE", "2")
            .env("MARK", &marker)
            .env("SIDECAR_ENV_PASSTHROUGH", "MARK")
            .args(["python", "sh", "-c", "echo started; sleep \"$MARK\""]);
        if mode == "stream" {
            client = client.env("SIDECAR_STREAM", "1");
        }
        let mut child = client.spawn();
        let mut stdout = child.stdout.take().unwrap();
        read_until(&mut stdout, b"started\n").await;
        server.signal(Signal::SIGSTOP);
        let output = tokio::time::timeout(HANG, child.wait_with_output()).await.expect("the client ended").unwrap();
        let stderr = stderr(&output);
        assert_eq!(output.status.code(), Some(1), "{mode}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{mode}: one line: {stderr}");
        let url = server.url();
        assert!(
            stderr.starts_with(&format!("sidecar-exec: sidecar at {url} sent nothing for 2 s, not even a keep-alive")),
            "{mode}: {stderr}"
        );
        assert!(stderr.contains("did not answer a reconnect within 2 s"), "{mode}: {stderr}");
        assert!(stderr.contains("gives up on run ") && stderr.contains("up to stdout byte 8 and stderr byte 0"));
        server.signal(Signal::SIGCONT);
        server.kill();
        kill_left_behind(&marker);
    }
}

/// exec-server is killed under a run and started again on the same port: the client, reconnecting, finds its run
/// unknown under another boot id (`x-boot-id`, also in `/info`), and says the sidecar restarted and the command died
/// with the previous server, with how much of its output arrived; never that a reattach window passed, never "run it
/// again".
#[tokio::test(flavor = "multi_thread")]
async fn a_server_restarted_under_a_run_is_named_so() {
    let workspace = tempfile::tempdir().unwrap();
    let server = ServerProcess::start(workspace.path(), 0, &[]);
    let port = server.port;
    let boot = boot_id(&server.url()).await;
    let marker = marker();
    // The marker in a forwarded variable, so that only the command carries it, not the client's own argv.
    let mut child = client_for(&server.url(), workspace.path())
        .env("MARK", &marker)
        .env("SIDECAR_ENV_PASSTHROUGH", "MARK")
        .args(["python", "sh", "-c", "echo started; sleep \"$MARK\""])
        .spawn();
    let mut stdout = child.stdout.take().unwrap();
    read_until(&mut stdout, b"started\n").await;
    server.kill();
    kill_left_behind(&marker);
    let server = ServerProcess::start(workspace.path(), port, &[]);
    let restarted = boot_id(&server.url()).await;
    assert_ne!(boot, restarted, "a new start has a new boot id");
    let output = tokio::time::timeout(HANG, child.wait_with_output()).await.expect("the client ended").unwrap();
    let stderr = stderr(&output);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with(&format!("sidecar-exec: the sidecar at {} answers as another server start", server.url())),
        "{stderr}"
    );
    assert!(stderr.contains("the command died with the previous server"), "{stderr}");
    assert!(stderr.contains("up to stdout byte 8 and stderr byte 0 arrived"), "{stderr}");
    assert!(!stderr.contains("reattach window") && !stderr.contains("run it again"), "{stderr}");
    server.kill();
}

/// The boot id `/info` gives, checked against the reply's `x-boot-id`.
async fn boot_id(url: &str) -> String {
    let response = reqwest::get(format!("{url}/info")).await.unwrap();
    let header = response.headers().get(protocol::BOOT_ID_HEADER).unwrap().to_str().unwrap().to_owned();
    let info: protocol::Info = serde_json::from_slice(&response.bytes().await.unwrap()).unwrap();
    assert_eq!(info.boot_id.as_deref(), Some(header.as_str()), "/info and the header agree");
    assert_eq!(header.len(), 32);
    let health = reqwest::get(format!("{url}/health")).await.unwrap();
    assert!(!health.headers().contains_key(protocol::BOOT_ID_HEADER), "/health, the tokenless probe, does not say");
    header
}

/// A refused request (the token is wrong) with stdin a pipe holding data: the refusal's line only, not the false
/// "does not take streamed stdin" (the server never answered for the run, so it said nothing of stdin).
#[tokio::test(flavor = "multi_thread")]
async fn a_refused_request_does_not_blame_streamed_stdin() {
    let server = server_with(&[], Some("right")).await;
    let mut shell = server.client().env("SIDECAR_TOKEN", "wrong").other("sh");
    shell.args(["-c", &format!("echo data | {BIN} python cat")]).stdout(Stdio::piped()).stderr(Stdio::piped());
    let output = tokio::time::timeout(HANG, shell.output()).await.unwrap().unwrap();
    let stderr = stderr(&output);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("401 Unauthorized"), "{stderr}");
    assert!(!stderr.contains("does not take streamed stdin"), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    server.stop().await;
}

/// A server that answers every stdin chunk with 409 `stdin_gap` and `received: 0`, the very offset the chunk was sent
/// from, gets a few POSTs with a backoff between them, then one line and no more (before: 19 972 POSTs in 10 s, for
/// ever). The run goes on without more input and ends by its own exit frame.
#[tokio::test(flavor = "multi_thread")]
async fn a_server_that_always_refuses_stdin_as_a_gap_is_given_up_on() {
    let cases = [
        (
            "409 Conflict",
            r#"{"error":"gap","code":"stdin_gap","received":0}"#,
            "refused stdin at offset 0 as a gap 5 times",
            5,
        ),
        // A 200 that takes nothing, for ever: as broken as the gap, and given up on the same way.
        ("200 OK", r#"{"received":0,"closed":false}"#, "took no more stdin in 5 answers in a row", 5),
        // More taken than was sent (an overflow of the offset before): a protocol violation, at once.
        ("200 OK", r#"{"received":18446744073709551615,"closed":false}"#, "says it took 18446744073709551615 bytes", 1),
    ];
    for (status, body, said, expected_posts) in cases {
        let stdin_posts = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let go = Arc::new(tokio::sync::Notify::new());
        let (counted, end) = (stdin_posts.clone(), go.clone());
        let server = raw_server(move |request| {
            if request.starts_with("POST /exec/stream") {
                let events = b"data: {\"type\":\"stdout\",\"data\":\"started\",\"offset\":0}\n\n".to_vec();
                let exit = b"data: {\"type\":\"exit\",\"data\":0,\"stdout_bytes\":8,\"stderr_bytes\":0}\n\n".to_vec();
                Reply::until_close(
                    "text/event-stream",
                    vec![Piece::Bytes(events), Piece::Wait(end.clone()), Piece::Bytes(exit)],
                )
                .with_header("x-stdin-stream", "1")
            } else if request.starts_with("POST /runs/") && request.contains("/stdin?") {
                counted.fetch_add(1, Ordering::SeqCst);
                Reply::full(status, &[("content-type", "application/json")], body)
            } else {
                Reply::full("404 Not Found", &[], "")
            }
        })
        .await;
        let mut shell = go_client(&server.url).env("SIDECAR_STREAM", "1").other("sh");
        shell
            .args(["-c", &format!("echo input | {BIN} go cat")])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = shell.spawn().unwrap();
        let mut lines = tokio::io::BufReader::new(child.stderr.take().unwrap()).lines();
        let line = tokio::time::timeout(HANG, lines.next_line()).await.expect("the give-up line").unwrap().unwrap();
        let posts = stdin_posts.load(Ordering::SeqCst);
        go.notify_one();
        let output = tokio::time::timeout(HANG, child.wait_with_output()).await.unwrap().unwrap();
        assert!(line.starts_with(&format!("sidecar-exec: sidecar at {} {said}", server.url)), "{line}");
        assert!(line.contains("stdin stops here"), "{line}");
        assert_eq!(posts, expected_posts, "{said}: one POST per answer, then none");
        assert_eq!(stdin_posts.load(Ordering::SeqCst), expected_posts, "no POST after the give-up");
        assert_eq!((output.status.code(), stdout(&output)), (Some(0), "started\n".to_owned()), "{said}");
        assert_eq!(lines.next_line().await.unwrap(), None, "one line");
    }
}

/// A sidecar URL with a password and control characters in BUILD_SIDECARS: every message shows it without the
/// password and with the characters escaped (before: `user:secret@` and a raw ESC reached the terminal).
#[tokio::test(flavor = "multi_thread")]
async fn a_url_is_shown_without_its_password_and_control_characters() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let sidecars = format!(r#"{{"go":{{"internal_url":"http://user:secret@127.0.0.1:{port}/\u001b[31mx"}}}}"#);
    let output = go_client("unused").env("BUILD_SIDECARS", sidecars).args(["go", "version"]).run().await;
    let stderr = stderr(&output);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.starts_with(&format!("sidecar-exec: failed to connect to sidecar at http://…@127.0.0.1:{port}/")));
    assert!(stderr.contains("\\x1b[31mx") && !stderr.contains('\x1b'), "{stderr:?}");
    assert!(!stderr.contains("secret") && !stderr.contains("user"), "{stderr}");
}

/// A server that takes the request and never sends its reply head (or sends it a byte at a time), to a streaming
/// call (SIDECAR_STREAM=1): a stream's head is part of the stream, so the silence bound is all it gets, whatever
/// trickles; one line says the request was sent and nothing came back.
#[tokio::test(flavor = "multi_thread")]
async fn a_stream_whose_head_never_comes_ends_after_the_silence_bound() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((mut socket, _)) = listener.accept().await {
            // The request read, then a byte of a head now and then: never a whole head.
            held.push(tokio::spawn(async move {
                use tokio::io::AsyncWriteExt;
                crate::raw_server::read_request(&mut socket).await;
                for byte in b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n".iter().cycle() {
                    if socket.write_all(&[*byte]).await.is_err() {
                        return;
                    }
                    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
                }
            }));
        }
    });
    let output =
        go_client(&url).env("SIDECAR_STREAM", "1").env("SIDECAR_SILENCE", "1").args(["go", "version"]).run().await;
    let stderr = stderr(&output);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert_eq!(
        stderr,
        format!(
            "sidecar-exec: sidecar at {url} sent no reply head within 1 s: the request was sent and no reply came, so \
             whether the command started there is not known (if it did, it is cancelled)\n"
        )
    );
}
