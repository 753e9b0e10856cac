//! Against a broken or hostile server the client stays bounded and says what happened in one clean line: odd exit
//! codes, redirects, endless replies, giant stream lines, and error texts full of terminal escapes.

use std::sync::atomic::Ordering;

use crate::raw_server::{raw_server, Piece, Reply};
use crate::support::go_client as client;
use crate::support::*;

/// Room for what the kernel's socket buffers hold beyond what the client read: the bounds below are checked as
/// "read at most the bound plus this", far below what an unbounded client reads (everything).
const SOCKET_SLACK: u64 = 64 * 1024 * 1024;

/// stderr must be exactly one `sidecar-exec:` line (plus whatever the command itself printed before it).
fn one_client_line(output: &std::process::Output) -> String {
    let text = stderr(output);
    let lines: Vec<&str> = text.lines().filter(|line| line.starts_with("sidecar-exec:")).collect();
    assert_eq!(lines.len(), 1, "expected one sidecar-exec line, got {text:?}");
    lines[0].to_owned()
}

#[tokio::test(flavor = "multi_thread")]
async fn exit_codes_no_process_can_have_are_a_failure_not_success() {
    for code in [256, -2, 65536 + 3, i32::MIN] {
        let server = raw_server(move |request| {
            if request.contains("/exec/stream") {
                Reply::until_close(
                    "text/event-stream",
                    vec![Piece::Bytes(format!("data: {{\"type\":\"exit\",\"data\":{code}}}\n\n").into_bytes())],
                )
            } else {
                Reply::json(&format!(r#"{{"exit_code":{code},"output":"out\n","stderr":""}}"#))
            }
        })
        .await;
        for stream in [false, true] {
            let output = client(&server.url).stream(stream).args(["go", "version"]).run().await;
            assert_eq!(output.status.code(), Some(1), "exit_code {code}, stream={stream}: {}", stderr(&output));
            let line = one_client_line(&output);
            assert!(line.contains(&format!("exit code {code}")), "{line}");
            if !stream {
                assert_eq!(String::from_utf8_lossy(&output.stdout), "out\n", "the command's output still shows");
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn redirects_are_never_followed() {
    let elsewhere = raw_server(|_| Reply::json(r#"{"exit_code":0,"output":"","stderr":""}"#)).await;
    let location = format!("{}/exec", elsewhere.url);
    let redirecting = {
        let location = location.clone();
        raw_server(move |_| Reply::full("307 Temporary Redirect", &[("location", &location)], "")).await
    };
    for stream in [false, true] {
        let output = client(&redirecting.url)
            .stream(stream)
            .env("SIDECAR_ENV_PASSTHROUGH", "SECRET")
            .env("SECRET", "must-stay-here")
            .args(["go", "version"])
            .run()
            .await;
        assert_eq!(output.status.code(), Some(1), "stream={stream}");
        let line = one_client_line(&output);
        assert!(line.contains("307") && line.contains(&location) && line.contains("redirect"), "{line}");
    }
    let sidecars = format!(r#"{{"go":{{"internal_url":"{}"}}}}"#, redirecting.url);
    let status = client_run().env("BUILD_SIDECARS", &sidecars).args(["--status"]).run().await;
    assert_eq!(status.status.code(), Some(1), "a redirecting sidecar is not healthy");
    assert_eq!(elsewhere.requests.load(Ordering::SeqCst), 0, "the command and its env were re-sent elsewhere");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_endless_exec_reply_is_cut_at_the_bound() {
    let server = raw_server(|_| {
        Reply::until_close(
            "application/json",
            vec![Piece::Bytes(br#"{"exit_code":0,"output":""#.to_vec()), Piece::Endless(b'x')],
        )
    })
    .await;
    let output = client(&server.url).args(["go", "version"]).run().await;
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let line = one_client_line(&output);
    assert!(line.contains("larger than 256 MiB") && line.contains("SIDECAR_STREAM=1"), "{line}");
    let written = server.written.load(Ordering::SeqCst);
    assert!(written < 256 * 1024 * 1024 + SOCKET_SLACK, "the client read {written} bytes");

    // A Content-Length beyond the bound is refused before reading any of it.
    let server = raw_server(|_| {
        Reply::until_close("application/json", vec![Piece::Endless(b'x')]).with_header("content-length", "1073741824")
    })
    .await;
    let output = client(&server.url).args(["go", "version"]).run().await;
    assert_eq!(output.status.code(), Some(1));
    assert!(one_client_line(&output).contains("larger than 256 MiB"));
    let written = server.written.load(Ordering::SeqCst);
    assert!(written < SOCKET_SLACK, "the client read {written} bytes of a reply it knew was too large");
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

/// A line just under the bound, sent without a newline until its very end: a parser that rescans the whole line at
/// every piece (quadratic) takes tens of seconds; a linear one a fraction of one. Checked by outcome, under the
/// generous 60 s of every client run.
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

#[tokio::test(flavor = "multi_thread")]
async fn a_server_error_text_is_cut_and_escaped() {
    let body = format!("\x1b[2J\x1b]0;pwned\x07{}\r\nsecond line\u{9b}31m", "E".repeat(100_000));
    for (status, body) in [("500 Internal Server Error", body.clone()), ("400 Bad Request", body.replace('E', "é"))] {
        let body = body.clone();
        let server = raw_server(move |_| Reply::full(status, &[("content-type", "text/plain")], body.clone())).await;
        let output = client(&server.url).args(["go", "version"]).run().await;
        assert_eq!(output.status.code(), Some(1));
        let line = one_client_line(&output);
        assert!(!line.chars().any(|c| c.is_control()), "raw control characters reach the terminal: {line:?}");
        assert!(line.contains("\\x1b[2J") && line.contains('…'), "{line}");
        assert!(line.len() < 1500, "{} bytes", line.len());
    }
    // The same for an error that arrives inside a stream or a reply.
    let server = raw_server(|request| {
        if request.contains("/exec/stream") {
            Reply::until_close(
                "text/event-stream",
                vec![Piece::Bytes(
                    b"data: {\"type\":\"error\",\"data\":\"bad\\u001b[31m\\nthing\"}\n\ndata: {\"type\":\"exit\",\"data\":-1}\n\n"
                        .to_vec(),
                )],
            )
        } else {
            Reply::json(r#"{"exit_code":-1,"output":"","stderr":"","error":"bad\u001b[31m\nthing"}"#)
        }
    })
    .await;
    for stream in [false, true] {
        let output = client(&server.url).stream(stream).args(["go", "version"]).run().await;
        assert_eq!(output.status.code(), Some(255));
        let line = one_client_line(&output);
        assert!(line.contains("bad\\x1b[31m\\nthing"), "stream={stream}: {line:?}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn https_without_tls_says_how_to_get_it() {
    let output = client_run()
        .env("BUILD_SIDECARS", r#"{"go":{"internal_url":"https://builder-go:8443"}}"#)
        .args(["go", "version"])
        .run()
        .await;
    if cfg!(feature = "tls") {
        return;
    }
    assert_eq!(output.status.code(), Some(1));
    let line = one_client_line(&output);
    assert!(line.contains("without TLS") && line.contains("--features tls") && line.contains("http://"), "{line}");
}

/// A decode error quotes the server's text (serde's "unknown variant"), which goes through the same
/// escaping as any other server text: no raw escape byte reaches the terminal.
#[tokio::test(flavor = "multi_thread")]
async fn a_run_list_that_does_not_decode_is_named_with_its_text_escaped() {
    let server = raw_server(|_| Reply::json(r#"{"runs":[{"id":"r1","state":"exited\u001b[5m","argv":["x"]}]}"#)).await;
    let output = client(&server.url).args(["--runs"]).run().await;
    let printed = format!("{}{}", stdout(&output), stderr(&output));
    assert_eq!(output.status.code(), Some(1), "{printed}");
    assert!(printed.contains("unreadable run list") && printed.contains("\\x1b[5m"), "{printed}");
    assert!(!printed.contains('\u{1b}'), "a raw escape byte: {printed:?}");
}
