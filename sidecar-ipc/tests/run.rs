//! `run`: however the orchestrator ends, a run result exists and `done` comes last; signals reach its whole group;
//! nothing of it survives; and the run config it sees is always a JSON object.

use std::time::Duration;

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use serde_json::json;
use tokio::io::{AsyncBufReadExt, BufReader};

use crate::support::*;

/// `sidecar-ipc run [args] -- sh -c script`, with the binary as `$IPC` for the orchestrator.
fn run(ipc: &TestIpc, args: &[&str], script: &str) -> BinaryRun {
    ipc.cmd(["run", "--grace", "0.5", "--drain", "5"]).args(args).args(["--", "sh", "-c", script]).env("IPC", BIN)
}

/// The same, with a marker in `$MARK`: the script says `sleep "$MARK"`, so only the sleepers carry the marker on
/// their command line, not `run` or the shell (a match then proves the orchestrator is running, handlers and all).
fn run_marked(ipc: &TestIpc, args: &[&str], script: &str, marker: &str) -> BinaryRun {
    run(ipc, args, script).env("MARK", marker)
}

#[tokio::test(flavor = "multi_thread")]
async fn exit_0_without_a_result_still_ends_the_run() {
    let ipc = TestIpc::new();
    // The prompt server reads the run result when done appears: it sees it, so it was written first.
    let replay = ipc.jsonl("answers.jsonl", &[]);
    let server = ipc.server(&["--replay", replay.to_str().unwrap()]);
    let output = run(&ipc, &[], "exit 0").run().await;
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let expected = json!({"error": "the orchestrator exited with status 0 without writing a run result",
                          "phase": "orchestrator", "exitCode": 0});
    assert_eq!(ipc.run_result_json(), expected);
    assert!(ipc.done().exists());
    let served = server.finished().await;
    assert_eq!(served.status.code(), Some(0), "{}", stderr(&served));
    assert_eq!(serde_json::from_str::<serde_json::Value>(&stdout(&served)).unwrap(), expected);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_orchestrators_own_result_is_kept_and_done_left_to_the_supervisor() {
    let ipc = TestIpc::new();
    let script = r#""$IPC" finish --result '{"processed": 3}' && test ! -e "$SIDECAR_IPC_ROOT/done" && exit 0; exit 9"#;
    let output = run(&ipc, &[], script).run().await;
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(ipc.run_result_json(), json!({"processed": 3}));
    assert!(ipc.done().exists());
    assert_eq!(stderr(&output), "");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_crash_an_invalid_result_and_a_kill_are_reported() {
    let ipc = TestIpc::new();
    let output = run(&ipc, &[], "echo partial >&2; exit 3").run().await;
    assert_eq!(output.status.code(), Some(3));
    assert_eq!(ipc.run_result_json()["exitCode"], 3);
    assert_eq!(ipc.run_result_json()["error"], "the orchestrator exited with status 3 without writing a run result");
    assert!(stderr(&output).contains("partial"), "the orchestrator's stderr passes through");

    let ipc = TestIpc::new();
    let output = run(&ipc, &[], r#"printf '{"half": ' > "$SIDECAR_IPC_ROOT/run-result.json"; exit 1"#).run().await;
    assert_eq!(output.status.code(), Some(1));
    let result = ipc.run_result_json();
    assert!(result["error"].as_str().unwrap().contains("its run result is not valid JSON"), "{result}");

    let ipc = TestIpc::new();
    let output = run(&ipc, &[], "kill -KILL $$").run().await;
    assert_eq!(output.status.code(), Some(137));
    let result = ipc.run_result_json();
    assert_eq!((result["exitCode"].as_i64(), result["signal"].as_str()), (Some(137), Some("SIGKILL")), "{result}");
    assert!(ipc.done().exists());
}

#[tokio::test(flavor = "multi_thread")]
async fn sigterm_and_sigint_are_passed_to_the_whole_group() {
    for (signal, code) in [(Signal::SIGTERM, 143), (Signal::SIGINT, 130)] {
        let ipc = TestIpc::new();
        let marker = marker();
        // A background member and a foreground one: both must go.
        let child = run_marked(&ipc, &[], r#"sleep "$MARK" & sleep "$MARK"; wait"#, &marker).spawn();
        wait_until("both sleepers", || processes_matching(&marker).len() >= 2);
        kill(Pid::from_raw(child.id().unwrap() as i32), signal).unwrap();
        let output = tokio::time::timeout(HANG, child.wait_with_output()).await.unwrap().unwrap();
        assert_eq!(output.status.code(), Some(code), "{signal}: {}", stderr(&output));
        assert_no_survivors(&marker, Duration::from_secs(5));
        let result = ipc.run_result_json();
        let error = result["error"].as_str().unwrap();
        assert!(error.starts_with(&format!("sidecar-ipc run received {signal} and passed it on")), "{result}");
        assert!(ipc.done().exists());
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn an_orchestrator_that_ignores_sigterm_is_killed_after_the_grace() {
    let ipc = TestIpc::new();
    let marker = marker();
    let child = run_marked(&ipc, &[], r#"trap '' TERM; sleep "$MARK""#, &marker).spawn();
    wait_for_process(&marker);
    kill(Pid::from_raw(child.id().unwrap() as i32), Signal::SIGTERM).unwrap();
    let output = tokio::time::timeout(HANG, child.wait_with_output()).await.unwrap().unwrap();
    assert_eq!(output.status.code(), Some(137), "{}", stderr(&output));
    assert_no_survivors(&marker, Duration::from_secs(5));
    assert_eq!(ipc.run_result_json()["signal"], "SIGKILL");
    assert!(ipc.done().exists());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_timeout_stops_the_group_and_exits_124() {
    let ipc = TestIpc::new();
    let marker = marker();
    let output = run_marked(&ipc, &["--timeout", "0.5"], r#"trap '' TERM; sleep "$MARK""#, &marker).run().await;
    assert_eq!(output.status.code(), Some(124), "{}", stderr(&output));
    assert_no_survivors(&marker, Duration::from_secs(5));
    let result = ipc.run_result_json();
    assert_eq!((result["exitCode"].as_i64(), result["timedOut"].as_bool()), (Some(124), Some(true)), "{result}");
    assert!(result["error"].as_str().unwrap().contains("timed out after 0.5s"), "{result}");
    assert!(ipc.done().exists());
}

#[tokio::test(flavor = "multi_thread")]
async fn what_the_orchestrator_leaves_behind_is_ended() {
    let ipc = TestIpc::new();
    let marker = marker();
    let script = r#"(sleep "$MARK" &); echo '{}' > "$SIDECAR_IPC_ROOT/run-result.json""#;
    let output = run_marked(&ipc, &[], script, &marker).run().await;
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    // Gone by the time run returned, not merely later.
    assert!(processes_matching(&marker).is_empty(), "left behind: {:?}", processes_matching(&marker));
    assert_eq!(ipc.run_result_json(), json!({}));
}

#[tokio::test(flavor = "multi_thread")]
async fn done_waits_for_a_prompt_still_in_flight() {
    let ipc = TestIpc::new();
    // The orchestrator asks in the background and exits once its request is written: it is still unanswered.
    let script = r#""$IPC" prompt --timeout 30 'late question' &
        until ls "$SIDECAR_IPC_ROOT"/prompts/request-* > /dev/null 2>&1; do sleep 0.01; done; exit 0"#;
    let mut child = run(&ipc, &[], script).spawn();
    let mut log = BufReader::new(child.stderr.take().unwrap()).lines();
    // The supervisor says when it waits for answers: from then on, done must not appear until the answer does.
    while let Some(line) = tokio::time::timeout(HANG, log.next_line()).await.unwrap().unwrap() {
        if line.contains("before ending the run, waiting up to 5s for prompts still unanswered") {
            break;
        }
    }
    assert!(!ipc.done().exists(), "done while a request was unanswered");
    let request = read_json(&ipc.prompt_files("request-")[0]);
    write_result(&ipc, request["requestId"].as_str().unwrap(), &json!({"status": "success", "content": "late"}));
    let status = tokio::time::timeout(HANG, child.wait()).await.unwrap().unwrap();
    assert_eq!(status.code(), Some(0));
    assert!(ipc.done().exists());

    // Bounded: nobody answers, and the run still ends after --drain.
    let ipc = TestIpc::new();
    let output = ipc
        .cmd(["run", "--grace", "0.5", "--drain", "0.5", "--", "sh", "-c", r#""$IPC" prompt --timeout 0.1 q; exit 0"#])
        .env("IPC", BIN)
        .run()
        .await;
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(stderr(&output).contains("prompts still unanswered after 0.5s"), "{}", stderr(&output));
    assert!(ipc.done().exists());
}

#[tokio::test(flavor = "multi_thread")]
async fn the_run_config_is_always_an_object() {
    for (value, seen) in [
        (None, "{}"),
        (Some(""), "{}"),
        (Some("null"), "{}"),
        (Some(r#"{"inputDir": "/data"}"#), r#"{"inputDir": "/data"}"#),
    ] {
        let ipc = TestIpc::new();
        let mut cmd = run(&ipc, &[], r#"printf '%s' "$SYMPOZIUM_RUN_CONFIG_JSON""#);
        if let Some(value) = value {
            cmd = cmd.env("SYMPOZIUM_RUN_CONFIG_JSON", value);
        }
        let output = cmd.run().await;
        assert_eq!((output.status.code(), stdout(&output).as_str()), (Some(0), seen), "{value:?}");
    }
    for bad in ["[1, 2]", "\"text\"", "{oops"] {
        let ipc = TestIpc::new();
        let output =
            run(&ipc, &[], "touch \"$SIDECAR_IPC_ROOT/started\"").env("SYMPOZIUM_RUN_CONFIG_JSON", bad).run().await;
        assert_eq!(output.status.code(), Some(1), "{bad}");
        assert!(!ipc.root().join("started").exists(), "started with {bad}");
        let result = ipc.run_result_json();
        assert!(result["error"].as_str().unwrap().contains("SYMPOZIUM_RUN_CONFIG_JSON"), "{result}");
        assert!(ipc.done().exists());
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_command_that_cannot_start_still_ends_the_run() {
    let ipc = TestIpc::new();
    let output = ipc.cmd(["run", "--", "/no/such/orchestrator"]).run().await;
    assert_eq!(output.status.code(), Some(127));
    let result = ipc.run_result_json();
    assert!(result["error"].as_str().unwrap().contains("cannot start the orchestrator"), "{result}");
    assert_eq!(result["exitCode"], 127);
    assert!(ipc.done().exists());
}

#[tokio::test(flavor = "multi_thread")]
async fn config_prints_values_for_shell_orchestrators() {
    let ipc = TestIpc::new();
    let config = r#"{"inputDir": "/data", "batch": 10}"#;
    let output = ipc.cmd(["config", "inputDir"]).env("SYMPOZIUM_RUN_CONFIG_JSON", config).run().await;
    assert_eq!(stdout(&output), "/data\n");
    let output = ipc.cmd(["config", "batch"]).env("SYMPOZIUM_RUN_CONFIG_JSON", config).run().await;
    assert_eq!(stdout(&output), "10\n");
    let output = ipc.cmd(["config", "missing", "--default", "x"]).env("SYMPOZIUM_RUN_CONFIG_JSON", config).run().await;
    assert_eq!(stdout(&output), "x\n");
    let output = ipc.cmd(["config", "missing"]).env("SYMPOZIUM_RUN_CONFIG_JSON", config).run().await;
    assert_eq!(output.status.code(), Some(1));
    assert!(stderr(&output).contains("no key \"missing\" (its keys: [batch, inputDir])"), "{}", stderr(&output));
    let output = ipc.cmd(["config"]).run().await;
    assert_eq!(stdout(&output), "{}\n");
}
