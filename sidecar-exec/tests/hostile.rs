//! Against a broken or hostile server the client stays bounded and says what happened in one clean line: odd exit
//! codes, redirects, endless replies, giant stream lines, and error texts full of terminal escapes.

use std::sync::atomic::Ordering;

use crate::raw_server::{raw_server, Piece, Reply};
use crate::support::*;

/// Room for what the kernel's socket buffers hold beyond what the client read: the bounds below are checked as
/// "read at most the bound plus this", far below what an unbounded client reads (everything).
const SOCKET_SLACK: u64 = 64 * 1024 * 1024;

fn client(url: &str) -> Client {
    Client::new()
        .env("BUILD_SIDECARS", &format!(r#"{{"go":{{"internal_url":"{url}"}}}}"#))
        .env("SIDECAR_CWD", "/workspace")
}

/// stderr must be exactly one `sidecar-exec:` line (plus whatever the command itself printed before it).
fn one_client_line(output: &std::process::Output) -> String {
    let text = stderr(output);
    let lines: Vec<&str> = text.lines().filter(|line| line.starts_with("sidecar-exec:")).collect();
    assert_eq!(lines.len(), 1, "expected one sidecar-exec line, got {text:?}");
    lines[0].to_owned()
}

#[tokio::test(flavor = "multi_thread")]
async fn an_endless_stream_line_is_cut_at_the_bound() {
    let server = raw_server(|_| {
        Reply::until_close("text/event-stream", vec![Piece::Bytes(b"data: ".to_vec()), Piece::Endless(b'x')])
    })
    .await;
    let output = client(&server.url).stream(true).args(["go", "version"]).run().await;
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let line = one_client_line(&output);
    assert!(line.contains("line longer than 16 MiB"), "{line}");
    let written = server.written.load(Ordering::SeqCst);
    assert!(written < 16 * 1024 * 1024 + SOCKET_SLACK, "the client read {written} bytes");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_long_stream_line_is_read_in_one_pass() {
    let len: u64 = 15 * 1024 * 1024;
    let server = raw_server(move |_| {
        Reply::until_close(
            "text/event-stream",
            vec![
                Piece::Bytes(b"data: {\"type\":\"stdout\",\"nl\":false,\"data\":\"".to_vec()),
                Piece::Repeat { byte: b'x', count: len },
                Piece::Bytes(b"\"}\n\ndata: {\"type\":\"exit\",\"data\":0}\n\n".to_vec()),
            ],
        )
    })
    .await;
    let output = client(&server.url).stream(true).args(["go", "version"]).run().await;
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(output.stdout.len() as u64, len);
}
