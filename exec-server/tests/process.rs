//! Processes: exit codes, timeouts of whole trees, background descendants, disconnects, shutdown.

use std::time::{Duration, Instant};

use protocol::Frame;
use serde_json::json;

use crate::support::*;

#[tokio::test(flavor = "multi_thread")]
async fn exit_codes_on_both_endpoints() {
    let server = server().start().await;
    let cases = [
        (json!({"cmd": ["true"]}), 0, None),
        (json!({"cmd": ["sh", "-c", "exit 3"]}), 3, None),
        (json!({"cmd": ["sh", "-c", "kill -9 $$"]}), 137, Some(9)),
        (json!({"cmd": ["sh", "-c", "kill -TERM $$"]}), 143, Some(15)),
        (json!({"cmd": ["no-such-program-xyz"]}), -1, None),
    ];
    for (request, code, signal) in cases {
        let reply = server.exec(request.clone()).await;
        assert_eq!((reply.exit_code, reply.signal), (code, signal), "{request}");
        let frames = server.stream(request.clone()).await;
        let (stream_code, timed_out, stream_signal) = exit_frame(&frames);
        assert_eq!((stream_code, stream_signal, timed_out), (code, signal, false), "{request}");
    }
    let reply = server.exec(json!({"cmd": ["no-such-program-xyz"]})).await;
    assert_eq!(
        reply.error.unwrap(),
        "failed to start command: no-such-program-xyz: not found (is it installed and on PATH?)"
    );
    server.stop().await;
}

/// A group whose leader and grandchild both ignore SIGTERM: the timeout still ends it, within the grace period.
#[tokio::test(flavor = "multi_thread")]
async fn timeout_kills_a_term_ignoring_tree() {
    let server = server().start().await;
    for stream in [false, true] {
        let marker = marker();
        let script = format!("trap '' TERM; (trap '' TERM; {sleeper}) & {sleeper}", sleeper = sleeper(&marker));
        let request = json!({"cmd": ["sh", "-c", script], "timeout": 1});
        let started = Instant::now();
        if stream {
            let frames = server.stream(request).await;
            assert!(frames
                .iter()
                .any(|f| matches!(f, Frame::Error { data, .. } if data == "command timed out after 1s")));
            let (code, timed_out, _) = exit_frame(&frames);
            assert_eq!((code, timed_out), (124, true));
        } else {
            let reply = server.exec(request).await;
            assert_eq!((reply.exit_code, reply.timed_out), (124, true));
            assert_eq!(reply.error.as_deref(), Some("command timed out after 1s"));
            assert_eq!(reply.signal, Some(9), "SIGTERM was ignored, so SIGKILL ended it");
        }
        let took = started.elapsed();
        assert!(took >= Duration::from_secs(1), "{took:?}");
        // The group is gone by the time the reply arrives.
        assert!(processes_matching(&marker).is_empty(), "survivors after timeout");
    }
    server.stop().await;
}

/// A background grandchild that keeps stdout open must neither hold the result nor change it.
#[tokio::test(flavor = "multi_thread")]
async fn background_grandchild_holding_stdout_does_not_hang_the_result() {
    let server = server().start().await;
    for stream in [false, true] {
        let marker = marker();
        let script = format!("{} & echo done; exit 7", sleeper(&marker));
        let request = json!({"cmd": ["sh", "-c", script]});
        let started = Instant::now();
        let (code, output) = if stream {
            let frames = server.stream(request).await;
            (exit_frame(&frames).0, rebuild(&frames, true))
        } else {
            let reply = server.exec(request).await;
            (reply.exit_code, reply.output.into_bytes())
        };
        assert_eq!((code, output.as_slice()), (7, &b"done\n"[..]));
        // The grandchild sleeps for its marker's ~1000 s: a result that waited for it would not come for that long.
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "result waited on the grandchild: {:?}",
            started.elapsed()
        );
        assert_no_survivors(&marker, Duration::from_secs(5));
    }
    server.stop().await;
}

/// A background process that closed its pipes is still part of the command's group, and is ended with it.
#[tokio::test(flavor = "multi_thread")]
async fn leftover_group_members_are_terminated() {
    let server = server().start().await;
    let marker = marker();
    let reply =
        server.exec(json!({"cmd": ["sh", "-c", format!("{} >/dev/null 2>&1 & exit 0", sleeper(&marker))]})).await;
    assert_eq!(reply.exit_code, 0);
    assert_no_survivors(&marker, Duration::from_secs(5));
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn client_disconnect_kills_the_group_on_both_endpoints() {
    let server = server().start().await;
    for path in ["/exec/stream", "/exec"] {
        let marker = marker();
        let script = format!("trap '' TERM; echo started; ({}) & wait", sleeper(&marker));
        let mut connection = raw_post(server.addr, path, &json!({"cmd": ["sh", "-c", script]}).to_string());
        if path == "/exec/stream" {
            read_until(&mut connection, "started");
        } else {
            wait_for_process(&marker);
        }
        drop(connection);
        // grace 0.5 s, then SIGKILL: well within a few seconds.
        assert_no_survivors(&marker, Duration::from_secs(5));
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn shutdown_cancels_running_commands_and_leaves_nothing() {
    let server = server().start().await;
    let markers: Vec<String> = (0..3).map(|_| marker()).collect();
    let mut connections = Vec::new();
    for marker in &markers {
        let script = format!("trap '' TERM; echo started; {}", sleeper(marker));
        let mut connection = raw_post(server.addr, "/exec/stream", &json!({"cmd": ["sh", "-c", script]}).to_string());
        read_until(&mut connection, "started");
        connections.push(connection);
    }
    let started = Instant::now();
    server.stop().await;
    // By design within grace (0.5 s) + 1 s; the bound leaves a loaded machine room, far from the sleepers' ~1000 s.
    assert!(started.elapsed() < Duration::from_secs(10), "shutdown took {:?}", started.elapsed());
    for marker in &markers {
        assert!(processes_matching(marker).is_empty());
    }
    // Each open stream got its ending before the connection closed.
    for mut connection in connections {
        let rest = read_all(&mut connection);
        assert!(rest.contains("cancelled") && rest.contains(r#""type":"exit""#), "{rest}");
    }
}

/// Descendants that leave the group with `setsid` are found by their job tag and ended with their command.
#[tokio::test(flavor = "multi_thread")]
async fn descendants_that_escape_the_group_are_ended_too() {
    let server = server().start().await;
    // Exited by itself, leaving a TERM-ignoring daemon in a new session.
    let daemon = marker();
    let script = format!("setsid sh -c \"trap '' TERM; {}\" > /dev/null 2>&1 & echo started", sleeper(&daemon));
    let reply = server.exec(json!({"cmd": ["sh", "-c", script]})).await;
    assert_eq!((reply.exit_code, reply.output.as_str()), (0, "started\n"));
    assert_no_survivors(&daemon, Duration::from_secs(5));

    // Timed out, with an escaped child still holding stdout.
    let marker = marker();
    let script = format!("setsid {} & {}", sleeper(&marker), sleeper(&marker));
    let reply = server.exec(json!({"cmd": ["sh", "-c", script], "timeout": 1})).await;
    assert_eq!(reply.exit_code, 124);
    assert_no_survivors(&marker, Duration::from_secs(5));
    server.stop().await;
}

/// Programs are found on the command's own PATH (from the request's env), relative entries against its cwd.
#[tokio::test(flavor = "multi_thread")]
async fn programs_are_looked_up_on_the_commands_own_path() {
    use std::os::unix::fs::PermissionsExt;
    let server = server().start().await;
    let tools = server.workspace.path().join("tools");
    std::fs::create_dir_all(&tools).unwrap();
    let script = tools.join("hello-tool");
    std::fs::write(&script, "#!/bin/sh\necho \"hello from $0 as $(basename \"$0\")\"\n").unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!("{}:/usr/bin:/bin", tools.display());
    let reply = server.exec(json!({"cmd": ["hello-tool"], "env": {"PATH": path}})).await;
    assert_eq!(reply.exit_code, 0, "{reply:?}");
    assert!(reply.output.ends_with("as hello-tool\n"), "{}", reply.output);
    let reply = server.exec(json!({"cmd": ["hello-tool"], "env": {"PATH": "tools:/bin"}})).await;
    assert_eq!(reply.exit_code, 0, "a relative PATH entry resolves against the cwd: {reply:?}");
    let reply = server.exec(json!({"cmd": ["hello-tool"]})).await;
    assert_eq!(reply.exit_code, -1);
    assert!(reply.error.unwrap().contains("hello-tool: not found"));
    server.stop().await;
}

/// `--max-timeout` caps what a request asks for.
#[tokio::test(flavor = "multi_thread")]
async fn the_timeout_cap_wins_over_the_request() {
    let server = server().arg("--max-timeout", "1").start().await;
    let reply = server.exec(json!({"cmd": ["sleep", "5"], "timeout": 100})).await;
    assert_eq!((reply.exit_code, reply.error.as_deref()), (124, Some("command timed out after 1s")));
    let info: serde_json::Value = serde_json::from_slice(
        &server.client().get(format!("{}/info", server.url)).send().await.unwrap().bytes().await.unwrap(),
    )
    .unwrap();
    assert_eq!(info["max_timeout"], 1);
    server.stop().await;
}

/// A checked working directory swapped for a symlink to outside the root, over and over while commands start: the
/// command runs in the directory that was checked, or is refused; never outside the root.
#[tokio::test(flavor = "multi_thread")]
async fn a_working_directory_swapped_for_a_symlink_is_never_entered_outside() {
    let server = server().start().await;
    let root = server.workspace.path().canonicalize().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let (dir, held) = (root.join("d"), root.join("held"));
    std::fs::create_dir(&dir).unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let swapper = {
        let (stop, outside) = (stop.clone(), outside.path().to_path_buf());
        std::thread::spawn(move || {
            let mut swaps = 0u32;
            // Each state lasts about as long as a check takes to reach the spawn, which makes the race likely.
            let hold = || {
                let until = Instant::now() + Duration::from_micros(200);
                while Instant::now() < until {
                    std::hint::spin_loop();
                }
            };
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                std::fs::rename(&dir, &held).unwrap();
                std::os::unix::fs::symlink(&outside, &dir).unwrap();
                hold();
                std::fs::remove_file(&dir).unwrap();
                std::fs::rename(&held, &dir).unwrap();
                hold();
                swaps += 1;
            }
            swaps
        })
    };
    let (mut inside, mut outside_runs, mut refused) = (0, Vec::new(), 0);
    for _ in 0..300 {
        let response =
            server.post("/exec", json!({"cmd": ["pwd", "-P"], "cwd": "d"}).to_string()).send().await.unwrap();
        if response.status() != 200 {
            refused += 1;
            continue;
        }
        let reply: protocol::ExecReply = serde_json::from_slice(&response.bytes().await.unwrap()).unwrap();
        match reply.exit_code {
            0 if reply.output.starts_with(&root.display().to_string()) => inside += 1,
            0 => outside_runs.push(reply.output),
            _ => refused += 1,
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let swaps = swapper.join().unwrap();
    assert!(outside_runs.is_empty(), "{} of 300 ran outside the root: {:?}", outside_runs.len(), &outside_runs[..1]);
    assert!(inside > 0, "no command ran at all ({refused} refused, {swaps} swaps)");
    eprintln!("cwd swap race: {inside} inside, {refused} refused, 0 outside, {swaps} swaps");
    server.stop().await;
}
