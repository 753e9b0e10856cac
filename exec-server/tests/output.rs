//! Output: exact bytes on both endpoints, CR and missing newlines, caps, stdin, and what old clients print.

use std::io::{BufRead, Read};

use protocol::Frame;
use serde_json::json;

use crate::support::*;

#[tokio::test(flavor = "multi_thread")]
async fn random_binary_output_is_byte_exact_on_both_endpoints() {
    let server = server().start().await;
    let bytes = random_bytes(700_000, 7);
    std::fs::write(server.workspace.path().join("blob"), &bytes).unwrap();
    let request = json!({"cmd": ["sh", "-c", "cat blob; cat blob >&2"]});

    let reply = server.exec(request.clone()).await;
    assert!(reply.output_b64.is_some() && reply.stderr_b64.is_some());
    assert!(reply.stdout_bytes().unwrap() == bytes, "stdout differs");
    assert!(reply.stderr_bytes().unwrap() == bytes, "stderr differs");

    let frames = server.stream(request).await;
    assert!(rebuild(&frames, true) == bytes, "streamed stdout differs");
    assert!(rebuild(&frames, false) == bytes, "streamed stderr differs");
    server.stop().await;
}

/// A client that says it reads base64 (`b64_only`) gets the same bytes without the lossy twin: empty `data` and
/// `output`/`stderr` where the bytes are not UTF-8, text unchanged where they are.
#[tokio::test(flavor = "multi_thread")]
async fn b64_only_leaves_out_the_lossy_twin_and_keeps_every_byte() {
    let server = server().start().await;
    let bytes = random_bytes(300_000, 11);
    std::fs::write(server.workspace.path().join("blob"), &bytes).unwrap();
    let request = json!({"cmd": ["sh", "-c", "cat blob; echo text >&2"], "b64_only": true});

    let reply = server.exec(request.clone()).await;
    assert!(reply.output.is_empty() && reply.output_b64.is_some(), "stdout still has its lossy twin");
    assert!(reply.stdout_bytes().unwrap() == bytes, "stdout differs");
    assert_eq!((reply.stderr.as_str(), reply.stderr_b64.as_deref()), ("text\n", None));

    let frames = server.stream(request).await;
    assert!(rebuild(&frames, true) == bytes, "streamed stdout differs");
    assert_eq!(rebuild(&frames, false), b"text\n");
    for frame in &frames {
        if let Frame::Stdout(chunk) | Frame::Stderr(chunk) = frame {
            assert!(chunk.b64.is_none() || chunk.data.is_empty(), "a b64 frame with its lossy twin");
        }
    }
    assert!(frames.iter().any(|f| matches!(f, Frame::Stdout(c) if c.b64.is_some())));
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn crlf_and_a_missing_final_newline_are_kept() {
    let server = server().start().await;
    let request = json!({"cmd": ["printf", "one\\r\\ntwo\\r\\n\\nthree"]});
    let reply = server.exec(request.clone()).await;
    assert_eq!(reply.output, "one\r\ntwo\r\n\nthree");
    assert!(reply.output_b64.is_none());
    let frames = server.stream(request).await;
    assert_eq!(rebuild(&frames, true), b"one\r\ntwo\r\n\nthree");
    server.stop().await;
}

/// The marker a cut reply carries where its middle was, and the head and tail around it.
fn split_at_cut(kept: &[u8]) -> (&[u8], u64, &[u8]) {
    let open = "\n[\u{2026} ".as_bytes();
    let start = kept.windows(open.len()).position(|w| w == open).expect("no cut marker");
    let rest = &kept[start + open.len()..];
    let close = " bytes dropped \u{2026}]\n".as_bytes();
    let end = rest.windows(close.len()).position(|w| w == close).expect("no end of the cut marker");
    let count = std::str::from_utf8(&rest[..end]).unwrap().parse().unwrap();
    (&kept[..start], count, &rest[end + close.len()..])
}

/// Beyond --max-output a reply keeps the first and the last part (build errors are at the end), half the budget
/// each, with the cut marked in place and flagged.
#[tokio::test(flavor = "multi_thread")]
async fn output_beyond_the_cap_keeps_head_and_tail_and_marks_the_cut() {
    let server = server().arg("--max-output", "1000").start().await;
    let reply = server.exec(json!({"cmd": ["sh", "-c", "seq 1 100000; echo small >&2"]})).await;
    assert_eq!(reply.exit_code, 0, "the command was not blocked by the cap");
    let all: Vec<u8> = (1..=100_000).flat_map(|i: u32| format!("{i}\n").into_bytes()).collect();
    let kept = reply.stdout_bytes().unwrap();
    let (head, dropped, tail) = split_at_cut(&kept);
    assert!(all.starts_with(head) && all.ends_with(tail), "head and tail are exact");
    assert!(tail.ends_with(b"99999\n100000\n"), "the end of the output is there");
    assert_eq!(head.len() as u64 + dropped + tail.len() as u64, all.len() as u64, "the marker counts the middle");
    let cost = protocol::reply_text::encoded_len(&kept);
    assert!(cost <= 1000 && cost > 950, "{cost} encoded bytes for a budget of 1000");
    let head_cost = protocol::reply_text::encoded_len(head);
    assert!((480..=500).contains(&head_cost), "the head takes half the budget: {head_cost}");
    assert!(reply.output_truncated);
    assert_eq!((reply.stderr.as_str(), reply.stderr_truncated), ("small\n", false));
    server.stop().await;
}

/// The cap counts what the output costs in the reply, not raw bytes: a control byte is six (`\u0001`), an invalid
/// byte three (U+FFFD) plus its base64. Head and tail are exact bytes of the output, flagged as cut.
#[tokio::test(flavor = "multi_thread")]
async fn the_cap_counts_encoded_bytes_of_head_and_tail() {
    let server = server().arg("--max-output", "6000").start().await;
    let script = "head -c 100000 /dev/zero | tr '\\0' '\\001'; head -c 100000 /dev/zero | tr '\\0' '\\377' >&2";
    let response = server.post("/exec", json!({"cmd": ["sh", "-c", script]}).to_string()).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let body = response.bytes().await.unwrap();
    assert!(body.len() <= 2 * 6000 + 300, "a reply of {} bytes for a cap of 6000 per stream", body.len());
    let reply: protocol::ExecReply = serde_json::from_slice(&body).unwrap();
    assert_eq!(reply.exit_code, 0);
    for (kept, truncated, byte) in [
        (reply.stdout_bytes().unwrap(), reply.output_truncated, 1u8),
        (reply.stderr_bytes().unwrap(), reply.stderr_truncated, 0xff),
    ] {
        assert!(truncated);
        let cost = protocol::reply_text::encoded_len(&kept);
        assert!(cost <= 6000 && cost > 5800, "{cost} encoded bytes for a budget of 6000");
        let (head, dropped, tail) = split_at_cut(&kept);
        assert!(head.iter().chain(tail).all(|b| *b == byte) && !head.is_empty() && !tail.is_empty());
        assert_eq!(head.len() as u64 + dropped + tail.len() as u64, 100_000);
    }
    // 1000 × 6 bytes of `\u0001` and the marker: valid UTF-8, so no base64.
    assert!(reply.output_b64.is_none());
    // Under the cap nothing changes: all of it, exactly, not flagged.
    let reply = server.exec(json!({"cmd": ["sh", "-c", "printf 'a\\001\\377'"]})).await;
    assert!(*reply.stdout_bytes().unwrap() == *b"a\x01\xff" && !reply.output_truncated);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn stdin_bytes_reach_the_command() {
    let server = server().start().await;
    let reply = server.exec(json!({"cmd": ["cat"], "stdin": "line one\nline two"})).await;
    assert_eq!(reply.output, "line one\nline two");
    let binary = random_bytes(5000, 3);
    let reply = server.exec(json!({"cmd": ["cat"], "stdin_b64": protocol::text::to_base64(&binary)})).await;
    assert!(reply.stdout_bytes().unwrap() == binary);
    // Without stdin the command reads /dev/null and does not hang.
    let reply = server.exec(json!({"cmd": ["cat"], "timeout": 5})).await;
    assert_eq!((reply.exit_code, reply.output.as_str()), (0, ""));
    server.stop().await;
}

/// The contract's client prints each frame's `data` and a newline; for line output that is exact.
#[tokio::test(flavor = "multi_thread")]
async fn a_raw_sse_client_that_prints_data_lines_reproduces_line_output() {
    let server = server().start().await;
    let text = "first line\n  indented\n\nafter a blank line\nwith ünïcode ✓\nlast\n";
    std::fs::write(server.workspace.path().join("lines.txt"), text).unwrap();
    let mut connection = raw_post(server.addr, "/exec/stream", &json!({"cmd": ["cat", "lines.txt"]}).to_string());
    let mut head = String::new();
    loop {
        let mut line = String::new();
        connection.read_line(&mut line).unwrap();
        if line == "\r\n" {
            break;
        }
        head.push_str(&line);
    }
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(head.to_ascii_lowercase().contains("content-type: text/event-stream"), "{head}");
    let mut body = String::new();
    connection.read_to_string(&mut body).unwrap();
    let mut printed = String::new();
    let mut exit = None;
    for line in body.lines().filter_map(|line| line.split_once("data: ").map(|(_, data)| data)) {
        let frame: serde_json::Value = serde_json::from_str(line).unwrap();
        match frame["type"].as_str().unwrap() {
            "stdout" => {
                printed.push_str(frame["data"].as_str().unwrap());
                printed.push('\n');
            }
            "exit" => exit = frame["data"].as_i64(),
            other => panic!("unexpected frame {other}"),
        }
    }
    assert_eq!(printed, text);
    assert_eq!(exit, Some(0));
    server.stop().await;
}

/// A prompt without a newline is sent once it has waited a moment, not held until the command ends: the command
/// ends only once the test has read the prompt.
#[tokio::test(flavor = "multi_thread")]
async fn a_partial_line_is_sent_before_the_command_ends() {
    let server = server().start().await;
    let script = "printf 'Password: '; until [ -e go ]; do sleep 0.01; done; echo";
    let mut connection = raw_post(server.addr, "/exec/stream", &json!({"cmd": ["sh", "-c", script]}).to_string());
    read_until(&mut connection, r#"{"type":"stdout","data":"Password: ","nl":false}"#);
    std::fs::write(server.workspace.path().join("go"), "").unwrap();
    let frames = parse_sse(&read_all(&mut connection));
    assert!(matches!(&frames[..], [Frame::Stdout(c), Frame::Exit { data: 0, .. }] if c.data.is_empty() && c.nl));
    server.stop().await;
}

/// A quiet stream carries keep-alive comments, so clients and proxies do not time out a long silent build: the
/// command stays quiet until the test has read one.
#[tokio::test(flavor = "multi_thread")]
async fn a_quiet_stream_gets_keep_alive_comments() {
    let server = server().arg("--keepalive", "0.2").start().await;
    let script = "until [ -e go ]; do sleep 0.01; done";
    let mut connection = raw_post(server.addr, "/exec/stream", &json!({"cmd": ["sh", "-c", script]}).to_string());
    read_until(&mut connection, ": keep-alive");
    std::fs::write(server.workspace.path().join("go"), "").unwrap();
    let rest = read_all(&mut connection);
    assert!(rest.contains(r#""type":"exit","data":0"#), "{rest}");
    server.stop().await;
}
