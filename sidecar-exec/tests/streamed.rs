//! The default path: negotiated streaming, stdin streamed while the command runs, signals delivered as
//! sent, the shell's 127, and the refusals a hostile or busy server gets. The differential suite compares the same
//! behaviours against native runs; these pin the client's side of each one.

use std::io::Write as _;
use std::process::Stdio;
use std::time::Duration;

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use tokio::io::AsyncWriteExt;

use crate::raw_server::{raw_server, Reply};
use crate::support::*;

#[tokio::test(flavor = "multi_thread")]
async fn stdin_streams_both_ways_and_a_command_that_does_not_read_ends_the_client_at_once() {
    let server = server().await;
    // A slow writer: the command echoes each line back before the next one is written, so nothing is read whole.
    let mut child = server.client().stdin(Stdio::piped()).args(["python", "cat"]).spawn();
    let mut stdin = child.stdin.take().unwrap();
    let mut out = child.stdout.take().unwrap();
    let mut got = Vec::new();
    for line in ["one\n", "two\n", "three\n"] {
        stdin.write_all(line.as_bytes()).await.unwrap();
        stdin.flush().await.unwrap();
        got.extend(read_until(&mut out, line.as_bytes()).await);
    }
    drop(stdin);
    tokio::io::AsyncReadExt::read_to_end(&mut out, &mut got).await.unwrap();
    let output = tokio::time::timeout(HANG, child.wait_with_output()).await.unwrap().unwrap();
    assert_eq!((output.status.code(), got.as_slice()), (Some(0), &b"one\ntwo\nthree\n"[..]), "{}", stderr(&output));

    // A pipe that never closes, and a command that never reads it: the exit frame ends the client.
    let mut child = server.client().stdin(Stdio::piped()).args(["python", "sh", "-c", "echo done"]).spawn();
    let _open = child.stdin.take();
    let output = tokio::time::timeout(HANG, child.wait_with_output()).await.unwrap().unwrap();
    assert_eq!((output.status.code(), stdout(&output)), (Some(0), "done\n".to_owned()), "{}", stderr(&output));

    // SIDECAR_STDIN=0: nothing is forwarded, the command reads /dev/null.
    let (read, write) = nix::unistd::pipe().unwrap();
    std::fs::File::from(write).write_all(b"not for the command\n").unwrap();
    let output = server.client().env("SIDECAR_STDIN", "0").stdin(read.into()).args(["python", "cat"]).run().await;
    assert_eq!((output.status.code(), stdout(&output), stderr(&output)), (Some(0), String::new(), String::new()));
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_large_binary_stdin_arrives_exactly_and_a_file_is_left_where_the_command_stopped() {
    let server = server().await;
    let dir = server.workspace.path();
    // 5 MiB: far over the old 768 KiB inline limit, over the server's 1 MiB buffer and the read-ahead.
    let bytes = random_bytes(5 * 1024 * 1024 + 7, 11);
    std::fs::write(dir.join("big"), &bytes).unwrap();
    let output = server.client().stdin(std::fs::File::open(dir.join("big")).unwrap().into()).args(["python", "cat"]);
    let output = output.run().await;
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(output.stdout == bytes, "stdout differs from stdin ({} bytes)", output.stdout.len());

    // `read` in sh takes one line from a pipe, byte by byte: the file's offset is left after it, so the next
    // reader of the same descriptor goes on from there, as natively.
    std::fs::write(dir.join("list"), "one\ntwo\nthree\n").unwrap();
    let line = format!("{{ {BIN} python sh -c 'read l; echo \"got $l\"'; cat; }} < list");
    let output = tokio::process::Command::new("sh")
        .arg("-c")
        .arg(&line)
        .current_dir(dir)
        .env("BUILD_SIDECARS", format!(r#"{{"python":{{"internal_url":"{}"}}}}"#, server.url))
        .output();
    let output = tokio::time::timeout(HANG, output).await.unwrap().unwrap();
    assert_eq!(stdout(&output), "got one\ntwo\nthree\n", "{}", stderr(&output));
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn signals_are_delivered_as_sent_and_the_command_ends_with_its_own_code_and_output() {
    let server = server().await;
    // The count goes up before the line that the test waits for, so a second signal that comes while the first trap
    // still runs counts as the second.
    let script = r#"trap 'n=$((n+1)); echo "caught $((n-1))"; [ $n -ge 2 ] && exit 7' INT; n=0; echo ready; while :; do sleep 0.05; done"#;
    let mut child = server.client().args(["python", "sh", "-c", script]).spawn();
    let mut stdout = child.stdout.take().unwrap();
    let mut got = read_until(&mut stdout, b"ready\n").await;
    let pid = Pid::from_raw(child.id().unwrap() as i32);
    // Two Ctrl-C: the first is caught and printed, the second too, and the command exits 7 by itself.
    kill(pid, Signal::SIGINT).unwrap();
    got.extend(read_until(&mut stdout, b"caught 0\n").await);
    kill(pid, Signal::SIGINT).unwrap();
    tokio::io::AsyncReadExt::read_to_end(&mut stdout, &mut got).await.unwrap();
    let output = tokio::time::timeout(HANG, child.wait_with_output()).await.unwrap().unwrap();
    assert_eq!(
        (output.status.code(), String::from_utf8_lossy(&got).into_owned()),
        (Some(7), "ready\ncaught 0\ncaught 1\n".to_owned()),
        "{}",
        stderr(&output)
    );
    let runs = server.client().args(["--runs"]).run().await;
    let newest = stdout_of(&runs);
    assert!(newest.contains(" exited ") && newest.contains("exit=7"), "recorded as exited by itself: {newest}");
    server.stop().await;
}

fn stdout_of(output: &std::process::Output) -> String {
    stdout(output).lines().next().unwrap_or_default().to_owned()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_default_asks_for_a_stream_and_reproduces_a_json_reply_exactly() {
    let server = raw_server(|request| {
        assert!(request.starts_with("POST /exec "), "{request}");
        assert!(
            request.to_ascii_lowercase().contains("accept: text/event-stream, application/json;q=0.5"),
            "{request}"
        );
        Reply::json(r#"{"exit_code":3,"output":"out","stderr":"err"}"#)
    })
    .await;
    let output = go_client(&server.url).args(["go", "build"]).run().await;
    assert_eq!((output.status.code(), stdout(&output), stderr(&output)), (Some(3), "out".into(), "err".into()));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_busy_sidecar_is_retried_after_its_retry_after_with_one_line() {
    let calls = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let seen = calls.clone();
    let server = raw_server(move |_| match seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst) {
        0 => Reply::full(
            "503 Service Unavailable",
            &[("content-type", "application/json"), ("retry-after", "1")],
            r#"{"error":"256 named runs are running (the limit set by --max-runs)"}"#,
        ),
        _ => Reply::json(r#"{"exit_code":0,"output":"ok\n","stderr":""}"#),
    })
    .await;
    let output = go_client(&server.url).args(["go", "build"]).run().await;
    assert_eq!((output.status.code(), stdout(&output)), (Some(0), "ok\n".to_owned()), "{}", stderr(&output));
    let message = stderr(&output);
    assert!(message.lines().count() == 1 && message.contains("503") && message.contains("retrying"), "{message}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_that_never_showed_it_keeps_runs_gets_one_probe_then_its_first_error() {
    // It reads the request and answers with a reply cut short: the POST's connection breaks, the one probe
    // (GET /runs/{id}/stream) breaks the same way, and the client stops there.
    let server = raw_server(|_| Reply::cut("application/json", 100, r#"{"exit_code":0,"out"#)).await;
    let started = std::time::Instant::now();
    let output = go_client(&server.url).args(["go", "build"]).run().await;
    let message = stderr(&output);
    assert_eq!(output.status.code(), Some(1), "{message}");
    assert!(!message.contains("reattach window") && !message.contains("reconnecting"), "{message}");
    assert!(started.elapsed() < Duration::from_secs(30), "gave up only after {:?}", started.elapsed());
    let requests = server.requests.load(std::sync::atomic::Ordering::SeqCst);
    assert!(requests <= 2, "{requests} requests: one POST and at most one probe");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_dropped_frame_of_two_to_the_sixty_four_bytes_is_refused_as_a_gap() {
    let server = raw_server(|_| {
        let events = [
            r#"{"type":"stdout","data":"head","offset":0}"#,
            r#"{"type":"dropped","stream":"stdout","offset":5,"bytes":18446744073709551615}"#,
            r#"{"type":"exit","data":0,"stdout_bytes":5,"stderr_bytes":0}"#,
        ];
        let body: String = events.iter().map(|event| format!("data: {event}\n\n")).collect();
        Reply::full("200 OK", &[("content-type", "text/event-stream")], body)
    })
    .await;
    let output = go_client(&server.url).args(["go", "build"]).run().await;
    let message = stderr(&output);
    assert_eq!((output.status.code(), stdout(&output)), (Some(1), "head\n".to_owned()), "{message}");
    assert!(message.contains("dropped"), "{message}");
}

#[tokio::test(flavor = "multi_thread")]
async fn explain_names_what_is_sent_and_shows_only_the_defaults_values() {
    // Nothing listens there: --explain sends nothing.
    let output = go_client("http://127.0.0.1:9")
        .env("TERM", "xterm-test")
        .env("NPM_CONFIG_REGISTRY", "http://registry")
        .env("SECRET_TOKEN_X", "hunter2")
        .env("SIDECAR_ENV_PASSTHROUGH", "SECRET_TOKEN_X NPM_CONFIG_*")
        .args(["--explain", "go", "build", "./..."])
        .run()
        .await;
    let text = stdout(&output);
    assert_eq!((output.status.code(), stderr(&output)), (Some(0), String::new()), "{text}");
    assert!(text.contains("build runs on the go sidecar at http://127.0.0.1:9"), "{text}");
    assert!(text.contains("TERM=xterm-test"), "a default's value is shown: {text}");
    assert!(text.contains("SECRET_TOKEN_X (SIDECAR_ENV_PASSTHROUGH)"), "{text}");
    assert!(text.contains("NPM_CONFIG_REGISTRY (SIDECAR_ENV_PASSTHROUGH)"), "a pattern matches: {text}");
    assert!(
        !text.contains("hunter2") && !text.contains("http://registry"),
        "a passthrough value is never shown: {text}"
    );
}

/// `SIDECAR_ENV_DEFAULTS=0` turns the default allowlist off: a default (TERM) no longer crosses, a named one still
/// does.
#[tokio::test(flavor = "multi_thread")]
async fn env_defaults_off_sends_only_what_is_named() {
    let explain = |defaults: &'static str| {
        go_client("http://127.0.0.1:9")
            .env("TERM", "xterm-test")
            .env("NAMED_X", "1")
            .env("SIDECAR_ENV_PASSTHROUGH", "NAMED_X")
            .env("SIDECAR_ENV_DEFAULTS", defaults)
            .args(["--explain", "go", "build"])
            .run()
    };
    let on = stdout(&explain("1").await);
    assert!(on.contains("TERM=xterm-test") && on.contains("NAMED_X (SIDECAR_ENV_PASSTHROUGH)"), "{on}");
    let output = explain("0").await;
    let off = stdout(&output);
    assert_eq!((output.status.code(), stderr(&output)), (Some(0), String::new()), "{off}");
    assert!(!off.contains("TERM"), "a default is not sent with SIDECAR_ENV_DEFAULTS=0: {off}");
    assert!(off.contains("NAMED_X (SIDECAR_ENV_PASSTHROUGH)"), "{off}");
}
