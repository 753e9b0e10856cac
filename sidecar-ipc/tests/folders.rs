//! How the folders are waited on and read, by agent-files' rules: without inotify (polled instead), and a run result
//! that its writer finishes after `done`.

use std::io::Write;

use serde_json::json;

use crate::support::*;

/// Where inotify cannot be had (a node whose inotify instances are used up), both halves say so once and look at
/// the folders every second instead: the prompt is answered, and `done` still ends the prompt server.
#[tokio::test(flavor = "multi_thread")]
async fn without_inotify_prompts_are_answered_and_the_run_ends() {
    let ipc = TestIpc::new();
    let replay = ipc.jsonl("answers.jsonl", &[json!({"content": "polled"})]);
    let server = ipc.wrapped_server(&without_inotify(BIN), &["--replay", replay.to_str().unwrap()]);
    let output = ipc.wrapped(&without_inotify(BIN)).args(["prompt", "--timeout", "30", "hello"]).run().await;
    assert_eq!((output.status.code(), stdout(&output)), (Some(0), "polled\n".to_owned()), "{}", stderr(&output));
    let fallback = "looking at the folders every 1s instead";
    assert!(
        stderr(&output).contains("cannot set up inotify") && stderr(&output).contains(fallback),
        "{}",
        stderr(&output)
    );
    let output = ipc.cmd(["finish", "--result", "{\"ok\": true}"]).run().await;
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let served = server.finished().await;
    assert_eq!((served.status.code(), stdout(&served)), (Some(0), "{\"ok\":true}\n".to_owned()), "{}", stderr(&served));
    assert_eq!(stderr(&served).matches(fallback).count(), 1, "said once: {}", stderr(&served));
}

/// A run result written in place and finished after `done` appeared: the prompt server reads it again as it
/// changes, and prints it once complete (before, it polled every 50 ms).
#[tokio::test(flavor = "multi_thread")]
async fn a_run_result_finished_after_done_is_waited_for() {
    let ipc = TestIpc::new();
    let replay = ipc.jsonl("answers.jsonl", &[]);
    let audit = ipc.root().join("audit.jsonl");
    let server = ipc.server(&["--replay", replay.to_str().unwrap(), "--audit", audit.to_str().unwrap()]);
    wait_until("the start", || std::fs::read_to_string(&audit).is_ok_and(|log| log.contains("\"start\"")));
    let full = json!({"processed": 3}).to_string();
    let mut file = std::fs::File::create(ipc.run_result()).unwrap();
    file.write_all(&full.as_bytes()[..full.len() / 2]).unwrap();
    std::fs::write(ipc.done(), "").unwrap();
    // Half of it for a while, then the rest: as a slow in-place writer leaves it.
    std::thread::sleep(std::time::Duration::from_millis(500));
    file.write_all(&full.as_bytes()[full.len() / 2..]).unwrap();
    let served = server.finished().await;
    assert_eq!((served.status.code(), stdout(&served)), (Some(0), format!("{full}\n")), "{}", stderr(&served));
}
