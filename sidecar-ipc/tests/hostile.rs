//! Files in the IPC folders that nobody should write, as a careless or hostile peer might: a FIFO or a symlink to
//! one, a symlink to /dev/zero, a 10 GiB sparse file. Before, the prompt server blocked for good on the FIFO (no
//! prompt answered, `done` and SIGTERM ignored), read /dev/zero and the sparse file until memory ran out, and
//! `prompt` hung on a result that was a FIFO. Now each such file is refused once, unread, and nothing waits on it.

use serde_json::json;

use crate::support::*;

/// Peak resident memory a server that refused every hostile file may have reached: it never read more than its
/// limit of any of them.
const SMALL_RSS: u64 = 64 * 1024 * 1024;

#[tokio::test(flavor = "multi_thread")]
async fn hostile_requests_get_one_error_result_and_block_nothing() {
    let ipc = TestIpc::new();
    let replay = ipc.jsonl("answers.jsonl", &[json!({"content": "answered"})]);
    let pipe = ipc.root().join("pipe");
    mkfifo(&pipe);
    mkfifo(&ipc.request("fifo"));
    std::os::unix::fs::symlink(&pipe, ipc.request("linked")).unwrap();
    std::os::unix::fs::symlink("/dev/zero", ipc.request("zero")).unwrap();
    std::fs::File::create(ipc.request("sparse")).unwrap().set_len(10 << 30).unwrap();
    mkfifo(&ipc.clear("fifo"));
    let server = ipc.capped_server(&["--replay", replay.to_str().unwrap()]);

    let output = ipc.cmd(["prompt", "--timeout", "20", "hello"]).run().await;
    assert_eq!((output.status.code(), stdout(&output)), (Some(0), "answered\n".to_owned()), "{}", stderr(&output));
    for (id, why) in [
        ("fifo", "is a FIFO"),
        ("linked", "is a symbolic link"),
        ("zero", "is a symbolic link"),
        ("sparse", "is larger than"),
    ] {
        let result = ipc.result(id);
        wait_until("the error result", || result.exists());
        let result = read_json(&result);
        assert_eq!(result["status"], "error", "{result}");
        assert!(result["error"].as_str().unwrap().contains(why), "{id}: {result}");
    }
    let peak = peak_rss(server.pid());
    assert!(peak < SMALL_RSS, "peak RSS {} MiB", peak >> 20);

    let output = ipc.cmd(["finish", "--result", "{}"]).run().await;
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let served = server.finished().await;
    assert_eq!(served.status.code(), Some(0), "{}", stderr(&served));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_fifo_request_does_not_stop_sigterm() {
    let ipc = TestIpc::new();
    let replay = ipc.jsonl("answers.jsonl", &[]);
    let pipe = ipc.root().join("pipe");
    mkfifo(&pipe);
    std::os::unix::fs::symlink(&pipe, ipc.request("linked")).unwrap();
    let audit = ipc.root().join("audit.jsonl");
    let server = ipc.server(&["--replay", replay.to_str().unwrap(), "--audit", audit.to_str().unwrap()]);
    // Logged once the signal handlers are in place, just before the folders are first read.
    wait_until("the start", || std::fs::read_to_string(&audit).is_ok_and(|log| log.contains("\"start\"")));
    server.terminate();
    let served = server.finished().await;
    assert_eq!(served.status.code(), Some(0), "{}", stderr(&served));
}

/// The orchestrator's side: a result that is a FIFO is an error at once, not a wait for a writer that never comes.
#[tokio::test(flavor = "multi_thread")]
async fn a_result_that_is_a_fifo_is_an_error_not_a_hang() {
    let ipc = TestIpc::new();
    let agent = fake_agent(&ipc, 1, |agent_ipc, id, _| mkfifo(&agent_ipc.result(id)));
    let output = ipc.cmd(["prompt", "--timeout", "30", "hello"]).run().await;
    agent.join().unwrap();
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(stderr(&output).contains("is a FIFO"), "{}", stderr(&output));
}

/// A request whose own `requestId` is too long for `result-{requestId}.json` (more than 255 bytes): before, the
/// result could not be written and nobody was answered. Now it is answered under the request file's id.
#[tokio::test(flavor = "multi_thread")]
async fn a_request_id_too_long_for_a_result_name_is_answered_under_the_file_name() {
    let ipc = TestIpc::new();
    let replay = ipc.jsonl("answers.jsonl", &[json!({"content": "answered"})]);
    let _server = ipc.server(&["--replay", replay.to_str().unwrap()]);
    let request = json!({"requestId": "i".repeat(244), "prompt": "hello"});
    std::fs::write(ipc.request("short"), request.to_string()).unwrap();
    let result = ipc.result("short");
    wait_until("the result", || result.exists());
    assert_eq!(read_json(&result)["content"], "answered");
}
