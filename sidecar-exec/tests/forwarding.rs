//! Forwarding: exit codes, exact bytes, env, cwd, stdin, tokens, status, and every configuration error.

use std::process::Stdio;

use crate::support::*;

#[tokio::test(flavor = "multi_thread")]
async fn exit_codes_in_both_modes() {
    let server = server().await;
    for stream in [false, true] {
        let cases: [(&[&str], i32); 6] = [
            (&["true"], 0),
            (&["sh", "-c", "exit 3"], 3),
            (&["sh", "-c", "kill -9 $$"], 137),
            (&["sh", "-c", "kill -INT $$"], 130),
            (&["no-such-program-xyz"], 127),
            (&["sleep", "5"], 124),
        ];
        for (cmd, code) in cases {
            let output =
                server.client().stream(stream).env("SIDECAR_TIMEOUT", "1").args(["python"]).args(cmd).run().await;
            // A command killed by a signal: the client dies of the same signal (signal_death), as the caller of a
            // native command sees it; `$?` is 128+N either way.
            let got = std::os::unix::process::ExitStatusExt::signal(&output.status)
                .map_or(output.status.code(), |signal| Some(128 + signal));
            assert_eq!(got, Some(code), "{cmd:?} stream={stream}: {}", stderr(&output));
            if code == 137 || code == 130 {
                assert_eq!(output.status.code(), None, "{cmd:?}: died of the signal, not exit {code}");
            }
            match code {
                // The shell's code and words (start_error), without the client's prefix.
                127 => assert_eq!(stderr(&output), "no-such-program-xyz: command not found\n"),
                124 => {
                    let message = stderr(&output);
                    assert!(
                        message.contains("timed out after 1s") && message.contains("SIDECAR_TIMEOUT="),
                        "{message}"
                    );
                }
                _ => assert_eq!(stderr(&output), ""),
            }
        }
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn sidecar_idle_timeout_stops_a_silent_command_but_not_a_talkative_one() {
    let server = server().await;
    for stream in [false, true] {
        let marker = marker();
        let silent = format!("echo started; {}", sleeper(&marker));
        let output = server
            .client()
            .stream(stream)
            .env("SIDECAR_IDLE_TIMEOUT", "1")
            .args(["python", "sh", "-c", &silent])
            .run()
            .await;
        assert_eq!((output.status.code(), stdout(&output)), (Some(124), "started\n".to_owned()), "stream={stream}");
        assert!(stderr(&output).contains("idle_timeout"), "{}", stderr(&output));
        let said = stderr(&output);
        assert!(said.contains("caps it): set SIDECAR_TIMEOUT=SECONDS to give it longer"), "{said}");
        assert!(!said.contains("  "), "a run of spaces in the deadline's line: {said}");
        assert_no_survivors(&marker, std::time::Duration::from_secs(10));
        // Output every 0.2 s for 2 s keeps a 3 s idle timeout (a margin for a loaded machine) from firing.
        let talkative = "for i in 1 2 3 4 5 6 7 8 9 10; do echo $i; sleep 0.2; done";
        let output = server
            .client()
            .stream(stream)
            .env("SIDECAR_IDLE_TIMEOUT", "3")
            .args(["python", "sh", "-c", talkative])
            .run()
            .await;
        assert_eq!(output.status.code(), Some(0), "stream={stream}: {}", stderr(&output));
    }
    let output = server.client().env("SIDECAR_IDLE_TIMEOUT", "soon").args(["python", "true"]).run().await;
    assert_eq!(output.status.code(), Some(1));
    assert!(stderr(&output).contains("SIDECAR_IDLE_TIMEOUT must be a whole number of seconds"));
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn output_is_byte_exact_in_both_modes() {
    let server = server().await;
    let blob = random_bytes(400_000, 11);
    std::fs::write(server.workspace.path().join("blob"), &blob).unwrap();
    let cases: [(&[&str], &[u8], &[u8]); 3] = [
        (&["sh", "-c", "cat blob; cat blob >&2"], &blob, &blob),
        (&["printf", "a\\r\\nb\\r\\n\\nno final newline"], b"a\r\nb\r\n\nno final newline", b""),
        (
            &["sh", "-c", "printf 'progress 10%%\\rprogress 99%%\\r'; printf 'warn' >&2"],
            b"progress 10%\rprogress 99%\r",
            b"warn",
        ),
    ];
    for stream in [false, true] {
        for (cmd, stdout, stderr_bytes) in cases {
            let output = server.client().stream(stream).args(["python"]).args(cmd).run().await;
            assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
            assert!(
                output.stdout == stdout,
                "stdout of {cmd:?} differs (stream={stream}): {} bytes",
                output.stdout.len()
            );
            assert!(output.stderr == stderr_bytes, "stderr of {cmd:?} differs (stream={stream})");
        }
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn only_listed_variables_are_forwarded() {
    let server = server().await;
    let output = server
        .client()
        .env("SIDECAR_ENV_PASSTHROUGH", "NPM_TOKEN, EMPTY,UNSET")
        .env("NPM_TOKEN", "npm-secret")
        .env("EMPTY", "")
        .env("ANTHROPIC_API_KEY", "must-not-cross")
        .args([
            "python",
            "sh",
            "-c",
            "echo \"[$NPM_TOKEN][${EMPTY-unset}][${UNSET-unset}][${ANTHROPIC_API_KEY-unset}]\"",
        ])
        .run()
        .await;
    assert_eq!(String::from_utf8_lossy(&output.stdout), "[npm-secret][][unset][unset]\n");
    // The same list rule as ssh-exec's SSH_ENV_PASSTHROUGH: commas or spaces.
    let output = server
        .client()
        .env("SIDECAR_ENV_PASSTHROUGH", "NPM_TOKEN EMPTY")
        .env("NPM_TOKEN", "npm-secret")
        .env("EMPTY", "")
        .args(["python", "sh", "-c", "echo \"[$NPM_TOKEN][${EMPTY-unset}]\""])
        .run()
        .await;
    assert_eq!(String::from_utf8_lossy(&output.stdout), "[npm-secret][]\n");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn cwd_follows_the_current_directory_or_sidecar_cwd() {
    let server = server().await;
    let root = server.workspace.path().canonicalize().unwrap();
    std::fs::create_dir_all(root.join("pkg/src")).unwrap();
    let output = server.client().current_dir(&root.join("pkg")).args(["python", "pwd"]).run().await;
    assert_eq!(String::from_utf8_lossy(&output.stdout).trim(), root.join("pkg").display().to_string());
    let output = server.client().env("SIDECAR_CWD", "pkg/src").args(["python", "pwd"]).run().await;
    assert_eq!(String::from_utf8_lossy(&output.stdout).trim(), root.join("pkg/src").display().to_string());
    // A directory outside the shared workspace is refused by the server, and the client says so.
    let output = server.client().env("SIDECAR_CWD", "/").args(["python", "pwd"]).run().await;
    assert_eq!(output.status.code(), Some(1));
    assert!(stderr(&output).contains("outside the workspace root"), "{}", stderr(&output));
    server.stop().await;
}

/// SIDECAR_STREAM=0 is the contract's original blocking client: stdin inline (a file always, a pipe with SIDECAR_STDIN=1).
#[tokio::test(flavor = "multi_thread")]
async fn blocking_mode_keeps_the_old_stdin_policy() {
    let server = server().await;
    let cat = |path: &std::path::Path| {
        server.client().stream(false).stdin(std::fs::File::open(path).unwrap().into()).args(["python", "cat"]).run()
    };
    let input = server.workspace.path().join("input.txt");
    std::fs::write(&input, "from a file\n").unwrap();
    let output = cat(&input).await;
    assert_eq!(String::from_utf8_lossy(&output.stdout), "from a file\n");

    // A pipe that never closes: the default must not wait on it.
    let mut child = server.client().stream(false).stdin(Stdio::piped()).args(["python", "cat"]).spawn();
    let _open_stdin = child.stdin.take();
    let output =
        tokio::time::timeout(std::time::Duration::from_secs(20), child.wait_with_output()).await.unwrap().unwrap();
    assert_eq!((output.status.code(), output.stdout.len()), (Some(0), 0));

    // With SIDECAR_STDIN=1 a pipe is read to its end and forwarded, binary included.
    let bytes = random_bytes(10_000, 5);
    let mut child =
        server.client().stream(false).env("SIDECAR_STDIN", "1").stdin(Stdio::piped()).args(["python", "cat"]).spawn();
    let mut pipe = child.stdin.take().unwrap();
    tokio::io::AsyncWriteExt::write_all(&mut pipe, &bytes).await.unwrap();
    drop(pipe);
    let output = child.wait_with_output().await.unwrap();
    assert!(output.stdout == bytes);

    // Too large for one request: a clear error, nothing run.
    let big = server.workspace.path().join("big");
    std::fs::write(&big, vec![b'x'; 2 * 1024 * 1024]).unwrap();
    let output = cat(&big).await;
    assert_eq!(output.status.code(), Some(1));
    assert!(stderr(&output).contains("stdin is larger than"), "{}", stderr(&output));
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn tokens_from_every_source() {
    let server = server_with(&[], Some("tok")).await;
    let output = server.client().args(["python", "true"]).run().await;
    assert_eq!(output.status.code(), Some(1));
    let message = stderr(&output);
    assert!(message.starts_with("sidecar-exec: sidecar at http://") && message.contains("401"), "{message}");
    assert!(message.contains("SIDECAR_TOKEN"), "{message}");

    assert_eq!(server.client().env("SIDECAR_TOKEN", "tok").args(["python", "true"]).run().await.status.code(), Some(0));
    let file = server.workspace.path().join("token");
    std::fs::write(&file, "tok\n").unwrap();
    let output = server.client().env("SIDECAR_TOKEN_FILE", file.to_str().unwrap()).args(["python", "true"]).run().await;
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    // A per-runtime token wins over SIDECAR_TOKEN.
    let sidecars = format!(r#"{{"python":{{"internal_url":"{}","token":"tok"}}}}"#, server.url);
    let output = server
        .client()
        .env("BUILD_SIDECARS", &sidecars)
        .env("SIDECAR_TOKEN", "wrong")
        .args(["python", "true"])
        .run()
        .await;
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn configuration_and_transport_errors_exit_1_with_one_clear_line() {
    let server = server().await;
    let url = server.url.clone();
    let cases: Vec<(BinaryRun, &str)> = vec![
        (client_run().args(["python", "true"]), "sidecar-exec: BUILD_SIDECARS is not set"),
        (
            client_run().env("BUILD_SIDECARS", "{oops").args(["python", "true"]),
            "sidecar-exec: BUILD_SIDECARS is not valid",
        ),
        (
            server.client().args(["ruby", "true"]),
            "sidecar-exec: no sidecar available for runtime 'ruby' (available: python)",
        ),
        (
            server.client().env("SIDECAR_TIMEOUT", "ten").args(["python", "true"]),
            "sidecar-exec: SIDECAR_TIMEOUT must be a whole number",
        ),
        (
            client_run()
                .env("BUILD_SIDECARS", r#"{"python":{"internal_url":"http://127.0.0.1:9"}}"#)
                .args(["python", "true"]),
            "sidecar-exec: failed to connect to sidecar at http://127.0.0.1:9",
        ),
        (
            client_run().env("BUILD_SIDECARS", r#"{"python":{}}"#).args(["python", "true"]),
            "sidecar-exec: BUILD_SIDECARS entry 'python' has no internal_url",
        ),
        (client_run().args(["python"]), "sidecar-exec: missing command after the runtime"),
        (client_run().args(["--bogus"]), "sidecar-exec: unknown option --bogus"),
    ];
    for (client, expected) in cases {
        let output = client.run().await;
        assert_eq!(output.status.code(), Some(1), "{expected}");
        let message = stderr(&output);
        assert!(message.starts_with(expected), "expected {expected:?}, got {message:?}");
    }
    let _ = url;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn flags_after_the_runtime_belong_to_the_command() {
    let server = server().await;
    let output =
        server.client().args(["python", "sh", "-c", "echo \"$@\"", "sh", "--status", "-v", "--help"]).run().await;
    assert_eq!(String::from_utf8_lossy(&output.stdout), "--status -v --help\n");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn status_lists_every_sidecar() {
    let server = server_with(&["--runtime", "python"], None).await;
    let sidecars =
        format!(r#"{{"python":{{"internal_url":"{}"}},"node":{{"internal_url":"http://127.0.0.1:9"}}}}"#, server.url);
    let output = client_run().env("BUILD_SIDECARS", &sidecars).args(["--status"]).run().await;
    let text = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(1), "one sidecar is down: {text}");
    let python = text.lines().find(|l| l.starts_with("python")).unwrap();
    assert!(python.contains(&server.url) && python.contains("healthy runtime=python version="), "{python}");
    let node = text.lines().find(|l| l.starts_with("node")).unwrap();
    assert!(node.contains("unreachable") && node.contains("127.0.0.1:9"), "{node}");

    let only_python = format!(r#"{{"python":{{"internal_url":"{}"}}}}"#, server.url);
    let output = client_run().env("BUILD_SIDECARS", &only_python).args(["--status"]).run().await;
    assert_eq!(output.status.code(), Some(0));
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn help_names_every_variable() {
    let output = client_run().args(["--help"]).run().await;
    let help = String::from_utf8_lossy(&output.stdout);
    for name in [
        "BUILD_SIDECARS",
        "SIDECAR_TIMEOUT",
        "SIDECAR_CWD",
        "SIDECAR_STREAM",
        "SIDECAR_ENV_PASSTHROUGH",
        "SIDECAR_TOKEN",
        "SIDECAR_TOKEN_FILE",
        "SIDECAR_STDIN",
        "SIDECAR_IDLE_TIMEOUT",
        "SIDECAR_RESUME",
        "SIDECAR_VERBOSE",
        "--status",
        "--runs",
        "--attach",
        "--install-wrappers",
    ] {
        assert!(help.contains(name), "--help does not mention {name}");
    }
    let version = client_run().args(["--version"]).run().await;
    assert_eq!(String::from_utf8_lossy(&version.stdout), format!("sidecar-exec {}\n", env!("CARGO_PKG_VERSION")));
}

/// A token file that is not a small regular file (`/dev/zero`, a FIFO without a writer, a folder, a 1 GB file) ends
/// the client at once with one line naming the file and why, before anything is sent.
#[tokio::test(flavor = "multi_thread")]
async fn token_files_that_are_not_small_regular_files_are_refused_at_once() {
    let server = server_with(&[], Some("tok")).await;
    let fifo = server.workspace.path().join("fifo");
    assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let huge = server.workspace.path().join("huge");
    std::fs::File::create(&huge).unwrap().set_len(1 << 30).unwrap();
    let marker = server.workspace.path().join("ran");
    let cases = [
        (std::path::PathBuf::from("/dev/zero"), "is a character device, not a regular file"),
        (fifo, "is a FIFO (named pipe), not a regular file"),
        (server.workspace.path().to_path_buf(), "is a directory, not a regular file"),
        (huge, "is larger than 65536 bytes"),
    ];
    for (path, why) in cases {
        let output =
            server.client().env("SIDECAR_TOKEN_FILE", &path).args(["python", "touch"]).args([&marker]).run().await;
        assert_eq!(output.status.code(), Some(1));
        let message = stderr(&output);
        assert!(message.starts_with("sidecar-exec: ") && message.lines().count() == 1, "{message}");
        assert!(message.contains(&format!("{} (SIDECAR_TOKEN_FILE) {why}", path.display())), "{message}");
        assert!(!marker.exists(), "the command ran with a refused token file");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn tokens_are_trimmed_like_the_server_trims_and_unsendable_ones_are_named() {
    let server = server_with(&[], Some("tok")).await;
    let file = server.workspace.path().join("token-crlf");
    std::fs::write(&file, "tok\r\n").unwrap();
    let inline = format!(r#"{{"python":{{"internal_url":"{}","token":"tok\n"}}}}"#, server.url);
    let trimmed = [
        server.client().env("SIDECAR_TOKEN", "tok\n"),
        server.client().env("SIDECAR_TOKEN", " tok\r\n"),
        server.client().env("SIDECAR_TOKEN_FILE", file.to_str().unwrap()),
        server.client().env("BUILD_SIDECARS", &inline),
    ];
    for client in trimmed {
        let output = client.args(["python", "true"]).run().await;
        assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    }

    let bad_file = server.workspace.path().join("token-bad");
    std::fs::write(&bad_file, "to\x01k\n").unwrap();
    let bad_inline = format!(r#"{{"python":{{"internal_url":"{}","token":"to\nk"}}}}"#, server.url);
    let refused = [
        (server.client().env("SIDECAR_TOKEN", "to\nk"), "SIDECAR_TOKEN".to_owned()),
        (
            server.client().env("SIDECAR_TOKEN_FILE", bad_file.to_str().unwrap()),
            format!("{} (SIDECAR_TOKEN_FILE)", bad_file.display()),
        ),
        (server.client().env("BUILD_SIDECARS", &bad_inline), "BUILD_SIDECARS entry 'python'".to_owned()),
    ];
    for (client, source) in refused {
        let output = client.args(["python", "true"]).run().await;
        assert_eq!(output.status.code(), Some(1));
        let message = stderr(&output);
        assert!(message.starts_with("sidecar-exec: ") && message.lines().count() == 1, "{message}");
        assert!(message.contains(&source) && message.contains("HTTP header"), "{source}: {message}");
        assert!(!message.contains("builder error"), "{message}");
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn stdin_that_json_would_inflate_still_fits_and_the_limit_is_exact() {
    let server = server().await;
    let dir = server.workspace.path();
    // Each of these is well under the old 700 KiB promise, yet escaped as JSON text it was over the 1 MiB body.
    let newlines = vec![b'\n'; 586 * 1024];
    let control = vec![1u8; 200 * 1000];
    // Under the new limit (3/4 of the body: 768 KiB, less the rest of the request) but over the old 700 KiB.
    let near_limit = random_bytes(760 * 1024, 3);
    for (name, bytes) in [("newlines", &newlines), ("control", &control), ("near-limit", &near_limit)] {
        let path = dir.join(name);
        std::fs::write(&path, bytes).unwrap();
        let output = server
            .client()
            .stream(false)
            .stdin(std::fs::File::open(&path).unwrap().into())
            .args(["python", "cat"])
            .run()
            .await;
        assert_eq!(output.status.code(), Some(0), "{name}: {}", stderr(&output));
        assert!(output.stdout == *bytes, "{name}: stdout differs");
    }
    // At the limit: refused by the client with the limit stated, before the server has to say 413.
    let path = dir.join("over");
    std::fs::write(&path, vec![b'x'; 768 * 1024]).unwrap();
    let output = server
        .client()
        .stream(false)
        .stdin(std::fs::File::open(&path).unwrap().into())
        .args(["python", "cat"])
        .run()
        .await;
    assert_eq!(output.status.code(), Some(1));
    let message = stderr(&output);
    assert!(message.contains("768 KiB") && !message.contains("413"), "{message}");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn piped_stdin_that_is_not_forwarded_gets_a_hint() {
    use std::io::Write as _;
    let server = server().await;
    let (read, write) = nix::unistd::pipe().unwrap();
    let mut write = std::fs::File::from(write);
    write.write_all(b"x\n").unwrap();
    drop(write);
    let output = server.client().stream(false).stdin(read.into()).args(["python", "cat"]).run().await;
    assert_eq!(output.status.code(), Some(0), "the default stays: stdin is not forwarded");
    assert!(output.stdout.is_empty());
    let message = stderr(&output);
    assert!(message.starts_with("sidecar-exec: ") && message.lines().count() == 1, "{message:?}");
    assert!(message.contains("SIDECAR_STDIN=1"), "{message}");

    // An empty pipe, still open: no hint, no wait; and none when the pipe is forwarded.
    let (read, write) = nix::unistd::pipe().unwrap();
    let output = server.client().stream(false).stdin(read.into()).args(["python", "true"]).run().await;
    drop(write);
    assert_eq!((output.status.code(), stderr(&output)), (Some(0), String::new()));
    let (read, write) = nix::unistd::pipe().unwrap();
    std::fs::File::from(write).write_all(b"y\n").unwrap();
    let output =
        server.client().stream(false).env("SIDECAR_STDIN", "1").stdin(read.into()).args(["python", "cat"]).run().await;
    assert_eq!((output.stdout.as_slice(), stderr(&output)), (&b"y\n"[..], String::new()));
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_cwd_outside_the_workspace_gets_the_client_side_fixes() {
    let server = server().await;
    let output = server.client().env("SIDECAR_CWD", "/").args(["python", "pwd"]).run().await;
    assert_eq!(output.status.code(), Some(1));
    let message = stderr(&output);
    assert!(message.contains("SIDECAR_CWD=/") && message.contains("unset SIDECAR_CWD"), "{message}");
    let outside = tempfile::tempdir().unwrap();
    let output = server.client().current_dir(outside.path()).args(["python", "pwd"]).run().await;
    assert_eq!(output.status.code(), Some(1));
    let message = stderr(&output);
    assert!(message.contains("cd into the workspace") && message.contains("SIDECAR_CWD"), "{message}");
    assert_eq!(message.lines().count(), 1, "{message}");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_refused_token_is_explained_once_and_fails_status() {
    let server = server_with(&[], Some("tok")).await;
    for (client, said) in [
        (server.client(), "no token was sent"),
        (server.client().env("SIDECAR_TOKEN", "wrong"), "the token from SIDECAR_TOKEN was refused"),
    ] {
        let output = client.args(["python", "true"]).run().await;
        assert_eq!(output.status.code(), Some(1));
        let message = stderr(&output);
        assert!(message.contains(said), "{message}");
        assert_eq!(message.matches("SIDECAR_TOKEN_FILE").count(), 1, "the hint is repeated: {message}");
    }
    let sidecars = format!(r#"{{"python":{{"internal_url":"{}"}}}}"#, server.url);
    for token in [None, Some("wrong")] {
        let mut client = client_run().env("BUILD_SIDECARS", &sidecars);
        if let Some(token) = token {
            client = client.env("SIDECAR_TOKEN", token);
        }
        let output = client.args(["--status"]).run().await;
        let text = String::from_utf8_lossy(&output.stdout);
        assert_eq!(output.status.code(), Some(1), "a sidecar that refuses the token is not usable: {text}");
        assert!(text.contains("401"), "{text}");
    }
    let output =
        client_run().env("BUILD_SIDECARS", &sidecars).env("SIDECAR_TOKEN", "tok").args(["--status"]).run().await;
    assert_eq!(output.status.code(), Some(0), "{}", String::from_utf8_lossy(&output.stdout));
    server.stop().await;
}

/// TRACEPARENT reaches the command through the traceparent header (the command's env is not forwarded by default),
/// in both modes.
#[tokio::test(flavor = "multi_thread")]
async fn trace_context_from_the_environment_reaches_the_command() {
    let server = server().await;
    let traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    for stream in [false, true] {
        let output = server
            .client()
            .stream(stream)
            .env("TRACEPARENT", traceparent)
            .env("SIDECAR_REQUEST_ID", "agent-step-7")
            .args(["python", "sh", "-c", "printf %s \"$TRACEPARENT\""])
            .run()
            .await;
        assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
        assert_eq!(String::from_utf8_lossy(&output.stdout), traceparent, "stream={stream}");
    }
    server.stop().await;
}

/// `"internal_url": "unix:///path"`: calls (both modes), --status and a generated wrapper all go over the server's
/// UNIX socket; the client knows no TCP address at all.
#[tokio::test(flavor = "multi_thread")]
async fn a_sidecar_on_a_unix_socket_end_to_end() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("exec.sock");
    let server = server_with(&["--listen", &format!("unix:{}", socket.display())], None).await;
    let sidecars = format!(r#"{{"python":{{"internal_url":"unix://{}"}}}}"#, socket.display());
    let call = || client_run().env("BUILD_SIDECARS", &sidecars).current_dir(server.workspace.path());
    for stream in [false, true] {
        let output = call().stream(stream).args(["python", "sh", "-c", "echo over the socket; exit 3"]).run().await;
        assert_eq!(output.status.code(), Some(3), "stream={stream}: {}", stderr(&output));
        assert_eq!(String::from_utf8_lossy(&output.stdout), "over the socket\n");
    }
    let status = call().args(["--status"]).run().await;
    assert_eq!(status.status.code(), Some(0), "{}", String::from_utf8_lossy(&status.stdout));
    assert!(String::from_utf8_lossy(&status.stdout).contains("unix://"));

    let wrappers = server.workspace.path().join(".wrappers");
    let empty = tempfile::tempdir().unwrap();
    let installed = call().env("PATH", empty.path().to_str().unwrap()).args(["--install-wrappers"]).args([&wrappers]);
    assert_eq!(installed.run().await.status.code(), Some(0));
    let args = ["-c", "print('wrapped over the socket')"];
    let output = run_wrapper(&wrappers, "python3", args, empty.path(), &sidecars, server.workspace.path()).await;
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(String::from_utf8_lossy(&output.stdout), "wrapped over the socket\n");
    server.stop().await;
    assert!(!socket.exists(), "the socket is removed when the server stops");
}
