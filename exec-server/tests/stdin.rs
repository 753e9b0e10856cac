//! Streamed stdin (docs/exec-server.md, "Streamed stdin"): `stdin_stream` opens a named run's stdin for
//! `POST /runs/{id}/stdin`, which takes chunks in order by offset (repeats ignored, gaps refused), holds a sender back
//! while the command has not read, closes on EOF, and reports what the command consumed.

use std::io::{Read, Write};
use std::time::Duration;

use protocol::{ErrorBody, ErrorCode, Frame, StdinReply};
use serde_json::json;

use crate::runs::Frames;
use crate::support::*;

impl TestServer {
    /// `POST /runs/{id}/stdin?offset=…[&eof=true]`: the status and the body (a reply or an error).
    pub(crate) async fn send_stdin(
        &self,
        id: &str,
        offset: u64,
        bytes: Vec<u8>,
        eof: bool,
    ) -> Result<StdinReply, (u16, ErrorBody)> {
        let eof = if eof { "&eof=true" } else { "" };
        let response = self.post(&format!("/runs/{id}/stdin?offset={offset}{eof}"), bytes).send().await.unwrap();
        let status = response.status().as_u16();
        let body = response.bytes().await.unwrap();
        match status {
            200 => Ok(serde_json::from_slice(&body).unwrap()),
            _ => Err((status, serde_json::from_slice(&body).unwrap())),
        }
    }

    /// Starts a named run with streamed stdin and returns its frames, checking the server said stdin is open.
    pub(crate) async fn with_stdin(&self, id: &str, cmd: serde_json::Value) -> Frames {
        let body = json!({"cmd": cmd, "run_id": id, "stdin_stream": true});
        let response = self.post("/exec/stream", body.to_string()).send().await.unwrap();
        assert_eq!(response.headers().get(protocol::STDIN_STREAM_HEADER).map(|v| v.as_bytes()), Some(&b"1"[..]));
        Frames::new(response)
    }
}

/// The stdin count in a named run's exit frame.
fn consumed(frames: &[Frame]) -> Option<u64> {
    match frames.last() {
        Some(Frame::Exit { stdin_consumed, .. }) => *stdin_consumed,
        other => panic!("last frame is not exit: {other:?}"),
    }
}

/// Many chunks through `cat`, with a repeat, an overlap and a gap on the way: the output is the input exactly, once.
#[tokio::test(flavor = "multi_thread")]
async fn chunks_arrive_in_order_once_and_a_gap_is_refused() {
    let server = server().start().await;
    let mut frames = server.with_stdin("stdin-order", json!(["cat"])).await;
    let reader = tokio::spawn(async move { frames.rest().await });
    let input = random_bytes(40 * 37_000, 7);
    let mut received = 0u64;
    for (index, piece) in input.chunks(37_000).enumerate() {
        // Each chunk at its own place in the input: after the overlap below, the next one overlaps too.
        let at = index as u64 * 37_000;
        let reply = server.send_stdin("stdin-order", at, piece.to_vec(), false).await.unwrap();
        assert_eq!(reply, StdinReply { received: received.max(at + piece.len() as u64), closed: false });
        received = reply.received;
        match index {
            // The same chunk again (a reply lost on the way): ignored.
            3 => assert_eq!(server.send_stdin("stdin-order", at, piece.to_vec(), false).await, Ok(reply)),
            // A chunk that overlaps what was taken: taken from `received` on.
            5 => {
                let from = usize::try_from(at).unwrap() + 1000;
                let overlap = input[from..usize::try_from(received).unwrap() + 100].to_vec();
                let more = server.send_stdin("stdin-order", from as u64, overlap, false).await.unwrap();
                assert_eq!(more.received, received + 100);
                received = more.received;
            }
            // A chunk beyond what was taken: 409 with where to resend from.
            9 => {
                let gap = server.send_stdin("stdin-order", received + 1, vec![b'x'], false).await.unwrap_err();
                let (status, error) = gap;
                assert_eq!((status, error.code, error.received), (409, Some(ErrorCode::StdinGap), Some(received)));
                assert!(error.error.contains(&format!("resend from offset {received}")), "{}", error.error);
            }
            _ => {}
        }
    }
    let offset = received;
    let end = server.send_stdin("stdin-order", offset, Vec::new(), true).await.unwrap();
    assert_eq!(end, StdinReply { received: input.len() as u64, closed: true });
    let frames = reader.await.unwrap();
    assert_eq!(rebuild(&frames, true), input, "every byte once, in order");
    assert_eq!(exit_frame(&frames).0, 0, "cat saw the EOF");
    assert_eq!(consumed(&frames), Some(input.len() as u64));
    // Past the EOF: a repeat is answered, new bytes are refused.
    assert_eq!(server.send_stdin("stdin-order", 0, input[..10].to_vec(), true).await, Ok(end));
    let (status, error) = server.send_stdin("stdin-order", offset, b"more".to_vec(), false).await.unwrap_err();
    assert_eq!((status, error.code), (409, Some(ErrorCode::StdinClosed)));
    server.stop().await;
}

/// A command that never reads its stdin: a sender is held once the run holds 1 MiB the command has not read, and
/// released, with nothing more taken, when the run ends.
#[tokio::test(flavor = "multi_thread")]
async fn a_sender_waits_for_a_command_that_never_reads_until_the_run_ends() {
    let server = server().start().await;
    let gate = server.workspace.path().join("gate");
    mkfifo(&gate);
    let mut frames = server.with_stdin("stdin-unread", json!(["cat", "gate"])).await;
    let full = vec![b'y'; protocol::MAX_BODY_BYTES];
    let first = server.send_stdin("stdin-unread", 0, full.clone(), false).await.unwrap();
    assert_eq!(first, StdinReply { received: full.len() as u64, closed: false }, "within the bound: taken");
    let held = {
        let (url, client) = (server.url.clone(), server.client());
        let at = first.received;
        tokio::spawn(async move {
            let response = client.post(format!("{url}/runs/stdin-unread/stdin?offset={at}")).body(full).send().await;
            serde_json::from_slice::<StdinReply>(&response.unwrap().bytes().await.unwrap()).unwrap()
        })
    };
    let waiting = || async { value(&scrape(&server, None).await.1, "exec_server_stdin_requests_waiting") };
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while waiting().await != 1.0 {
        assert!(std::time::Instant::now() < deadline, "the second 1 MiB was not held");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(!held.is_finished());
    tokio::task::spawn_blocking(move || std::fs::write(gate, "open\n")).await.unwrap().unwrap();
    let rest = frames.rest().await;
    assert_eq!(rebuild(&rest, true), b"open\n");
    assert_eq!(consumed(&rest), Some(0), "the command read none of it");
    assert_eq!(held.await.unwrap(), StdinReply { received: first.received, closed: true });
    assert_eq!(waiting().await, 0.0);
    server.stop().await;
}

/// A run holds one waiting request: a newer one held in its place answers the one before at once, 409
/// `stdin_superseded` with nothing taken, so held bodies never add up (200 connections each holding 1 MiB took the
/// server from 14 to 236 MB); the last one is answered when the run ends, as any held request.
#[tokio::test(flavor = "multi_thread")]
async fn a_newer_held_request_supersedes_the_held_one_so_held_bodies_never_add_up() {
    let server = server().start().await;
    let gate = server.workspace.path().join("gate");
    mkfifo(&gate);
    let mut frames = server.with_stdin("stdin-held", json!(["cat", "gate"])).await;
    let full = vec![b'y'; protocol::MAX_BODY_BYTES];
    let first = server.send_stdin("stdin-held", 0, full.clone(), false).await.unwrap();
    let waiting = || async { value(&scrape(&server, None).await.1, "exec_server_stdin_requests_waiting") };
    let hold = || {
        let (url, client, body) = (server.url.clone(), server.client(), full.clone());
        let at = first.received;
        tokio::spawn(async move {
            let response = client.post(format!("{url}/runs/stdin-held/stdin?offset={at}")).body(body).send().await;
            let response = response.unwrap();
            (response.status().as_u16(), response.bytes().await.unwrap())
        })
    };
    let mut held = hold();
    for _ in 0..3 {
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while waiting().await != 1.0 {
            assert!(std::time::Instant::now() < deadline, "the request was not held");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let newer = hold();
        let (status, body) = held.await.unwrap();
        let error: ErrorBody = serde_json::from_slice(&body).unwrap();
        assert_eq!((status, error.code), (409, Some(ErrorCode::StdinSuperseded)), "{}", error.error);
        assert!(waiting().await <= 1.0, "more than one request held");
        held = newer;
    }
    assert_eq!(server.send_stdin("stdin-held", 0, Vec::new(), false).await.unwrap().received, first.received);
    tokio::task::spawn_blocking(move || std::fs::write(gate, "open\n")).await.unwrap().unwrap();
    assert_eq!(exit_frame(&frames.rest().await).0, 0);
    let (status, body) = held.await.unwrap();
    assert_eq!(status, 200);
    let reply: StdinReply = serde_json::from_slice(&body).unwrap();
    assert_eq!(reply, StdinReply { received: first.received, closed: true }, "nothing of the held ones taken");
    server.stop().await;
}

/// A command that closes its stdin and goes on: a write gets EPIPE, stdin is closed (further bytes are discarded),
/// and the command runs on to its own end.
#[tokio::test(flavor = "multi_thread")]
async fn a_command_that_closes_its_stdin_closes_it_for_the_sender() {
    let server = server().start().await;
    let gate = server.workspace.path().join("gate");
    mkfifo(&gate);
    let mut frames = server
        .with_stdin("stdin-epipe", json!(["sh", "-c", "head -c 5; exec 0<&-; echo; echo closed; cat gate"]))
        .await;
    server.send_stdin("stdin-epipe", 0, b"12345".to_vec(), false).await.unwrap();
    frames.until_stdout("closed").await;
    let mut offset = 5;
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let reply = server.send_stdin("stdin-epipe", offset, vec![b'z'; 100_000], false).await.unwrap();
        if reply.closed {
            break;
        }
        offset = reply.received;
        assert!(std::time::Instant::now() < deadline, "stdin never closed: {reply:?}");
    }
    assert_eq!(server.run_info("stdin-epipe").await.1.unwrap().state, protocol::RunState::Running);
    tokio::task::spawn_blocking(move || std::fs::write(gate, "")).await.unwrap().unwrap();
    let rest = frames.rest().await;
    assert_eq!(exit_frame(&rest).0, 0);
    assert_eq!(consumed(&rest), Some(5), "head took 5 bytes, the rest was never read");
    server.stop().await;
}

/// 100 MiB through the endpoint into `sha256sum`, against the same bytes piped into it here.
#[tokio::test(flavor = "multi_thread")]
async fn a_hundred_mebibytes_arrive_exactly() {
    let server = server().start().await;
    let input = random_bytes(100 << 20, 42);
    let native = {
        let mut child = std::process::Command::new("sha256sum")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        let bytes = input.clone();
        let writer = std::thread::spawn(move || stdin.write_all(&bytes));
        let output = child.wait_with_output().unwrap();
        writer.join().unwrap().unwrap();
        output.stdout
    };
    let mut frames = server.with_stdin("stdin-100m", json!(["sha256sum"])).await;
    let mut offset = 0;
    for piece in input.chunks(256 * 1024) {
        offset = server.send_stdin("stdin-100m", offset, piece.to_vec(), false).await.unwrap().received;
    }
    server.send_stdin("stdin-100m", offset, Vec::new(), true).await.unwrap();
    let frames = frames.rest().await;
    assert_eq!(rebuild(&frames, true), native);
    assert_eq!(consumed(&frames), Some(100 << 20));
    server.stop().await;
}

/// A connection dropped in the middle of a chunk's body: nothing of it is taken, the run goes on, and the chunk
/// resent from `received` completes the input.
#[tokio::test(flavor = "multi_thread")]
async fn a_connection_dropped_between_chunks_loses_and_doubles_nothing() {
    let server = server().start().await;
    let mut frames = server.with_stdin("stdin-cut", json!(["cat"])).await;
    let reader = tokio::spawn(async move { frames.rest().await });
    let input = random_bytes(300_000, 9);
    let first = server.send_stdin("stdin-cut", 0, input[..100_000].to_vec(), false).await.unwrap();
    let addr = server.addr;
    let second = input[100_000..200_000].to_vec();
    tokio::task::spawn_blocking(move || {
        let mut socket = std::net::TcpStream::connect(addr).unwrap();
        write!(
            socket,
            "POST /runs/stdin-cut/stdin?offset=100000 HTTP/1.1\r\nHost: test\r\nContent-Length: {}\r\n\r\n",
            second.len()
        )
        .unwrap();
        socket.write_all(&second[..50_000]).unwrap();
        // Half the body, then the end of the connection's writing: the server answers (or closes) once it is done
        // with the request, which is what the test waits for.
        socket.shutdown(std::net::Shutdown::Write).unwrap();
        socket.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let mut answer = Vec::new();
        let _ = socket.read_to_end(&mut answer);
    })
    .await
    .unwrap();
    // The server's word on what it took: a query with no bytes.
    let now = server.send_stdin("stdin-cut", first.received, Vec::new(), false).await.unwrap();
    assert_eq!(now, first, "nothing of the cut body was taken");
    // A client that lost its stream too comes back with the same request: stdin is still open for it.
    drop(server.with_stdin("stdin-cut", json!(["cat"])).await);
    let mut offset = now.received;
    for piece in input[usize::try_from(offset).unwrap()..].chunks(100_000) {
        offset = server.send_stdin("stdin-cut", offset, piece.to_vec(), false).await.unwrap().received;
    }
    server.send_stdin("stdin-cut", offset, Vec::new(), true).await.unwrap();
    let frames = reader.await.unwrap();
    assert_eq!(rebuild(&frames, true), input);
    server.stop().await;
}

/// What the endpoint refuses, and why.
#[tokio::test(flavor = "multi_thread")]
async fn stdin_refusals_name_what_is_wrong() {
    let server = server().start().await;
    let response =
        server.post("/exec", json!({"cmd": ["cat"], "stdin_stream": true}).to_string()).send().await.unwrap();
    assert_eq!(response.status(), 400);
    let error: ErrorBody = serde_json::from_slice(&response.bytes().await.unwrap()).unwrap();
    assert_eq!(error.error, "stdin_stream needs a run_id: input is sent to /runs/{id}/stdin");
    let (status, error) = server.send_stdin("never-was", 0, b"x".to_vec(), false).await.unwrap_err();
    assert_eq!((status, error.code), (404, Some(ErrorCode::RunNotKnown)));
    let plain = server.post("/exec", json!({"cmd": ["true"], "run_id": "no-stdin"}).to_string()).send().await.unwrap();
    assert!(plain.headers().get(protocol::STDIN_STREAM_HEADER).is_none());
    let _ = plain.bytes().await;
    let (status, error) = server.send_stdin("no-stdin", 0, b"x".to_vec(), false).await.unwrap_err();
    assert_eq!((status, error.code), (409, Some(ErrorCode::StdinNotOpen)));
    let mut frames = server.with_stdin("stdin-bad", json!(["cat"])).await;
    for query in ["", "?offset=-1", "?offset=x", "?offset=0&eof=maybe"] {
        let response = server.post(&format!("/runs/stdin-bad/stdin{query}"), "x").send().await.unwrap();
        assert_eq!(response.status(), 400, "{query}");
        let error: ErrorBody = serde_json::from_slice(&response.bytes().await.unwrap()).unwrap();
        assert!(error.error.contains("offset") || error.error.contains("eof"), "{query}: {}", error.error);
    }
    server.send_stdin("stdin-bad", 0, Vec::new(), true).await.unwrap();
    assert_eq!(exit_frame(&frames.rest().await).0, 0);
    // The run has ended: whatever comes is discarded with `closed`.
    let closed = server.send_stdin("stdin-bad", 0, Vec::new(), false).await.unwrap();
    assert_eq!(closed, StdinReply { received: 0, closed: true });
    server.stop().await;
}
