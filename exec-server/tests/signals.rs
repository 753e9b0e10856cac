//! Signals as sent (docs/exec-server.md, "Runs"): `POST /runs/{id}/signal` delivers INT, TERM, HUP, QUIT, USR1, USR2,
//! TSTP, STOP, CONT and WINCH to the run's group with no cancel policy, so the command ends by itself, with its own
//! exit code and all its output, exactly as the same command signalled natively.

use std::time::Duration;

use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use protocol::{RunInfo, RunState};
use serde_json::json;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};

use crate::support::*;

/// A python3 program that handles `signal` by printing its name and exiting 3 (`handled`), or leaves it to the
/// default action; it prints `ready` once the handler is in place.
fn program(signal: &str, handled: bool) -> Vec<String> {
    let handler = if handled {
        format!(
            "def on(n, f):\n    print('got', signal.Signals(n).name, flush=True)\n    sys.exit(3)\nsignal.signal(signal.{signal}, on)\n"
        )
    } else {
        String::new()
    };
    let script =
        format!("import signal, sys\n{handler}print('before', flush=True)\nprint('ready', flush=True)\nwhile True:\n    signal.pause()\n");
    // No core file from a default QUIT, whatever the test's limit.
    vec!["sh".into(), "-c".into(), "ulimit -c 0; exec python3 -c \"$0\"".into(), script]
}

/// The same program run here, in a group of its own, sent `signal` once it is ready: its stdout and exit code.
async fn native(argv: &[String], signal: Signal) -> (Vec<u8>, i32) {
    let mut command = tokio::process::Command::new(&argv[0]);
    command.args(&argv[1..]).process_group(0).stdout(std::process::Stdio::piped()).kill_on_drop(true);
    let mut child = command.spawn().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut out = Vec::new();
    while !out.ends_with(b"ready\n") {
        assert!(stdout.read_until(b'\n', &mut out).await.unwrap() > 0, "{}", String::from_utf8_lossy(&out));
    }
    killpg(Pid::from_raw(child.id().unwrap() as i32), signal).unwrap();
    stdout.read_to_end(&mut out).await.unwrap();
    let (code, _) = process_group::exit_code_of(child.wait().await.unwrap());
    (out, code)
}

impl TestServer {
    async fn signal_run(&self, id: &str, name: &str) -> RunInfo {
        let response = self.post(&format!("/runs/{id}/signal"), json!({"signal": name}).to_string()).send().await;
        let response = response.unwrap();
        assert_eq!(response.status(), 200, "{name}");
        serde_json::from_slice(&response.bytes().await.unwrap()).unwrap()
    }
}

/// Each signal with a handler that prints and exits 3, and INT and QUIT left to their default action: the forwarded
/// run prints and exits as the native one does, and is recorded as having ended by itself.
#[tokio::test(flavor = "multi_thread")]
async fn a_signal_reaches_the_command_as_sent_and_the_run_ends_by_itself() {
    let server = server().start().await;
    let cases = [
        ("SIGINT", Signal::SIGINT, true),
        ("SIGTERM", Signal::SIGTERM, true),
        ("SIGHUP", Signal::SIGHUP, true),
        ("SIGQUIT", Signal::SIGQUIT, true),
        ("SIGUSR1", Signal::SIGUSR1, true),
        ("SIGUSR2", Signal::SIGUSR2, true),
        ("SIGTSTP", Signal::SIGTSTP, true),
        ("SIGWINCH", Signal::SIGWINCH, true),
        ("SIGINT", Signal::SIGINT, false),
        ("SIGQUIT", Signal::SIGQUIT, false),
    ];
    for (index, (name, signal, handled)) in cases.into_iter().enumerate() {
        let argv = program(name, handled);
        let (native_out, native_code) = native(&argv, signal).await;
        let id = format!("sig-{index}");
        let mut frames = server.open_stream(json!({"cmd": argv, "run_id": id})).await;
        let mut seen = frames.until_stdout("ready").await;
        // The reply may already see the end: a default action is quick.
        server.signal_run(&id, name.trim_start_matches("SIG")).await;
        seen.extend(frames.rest().await);
        let (code, timed_out, _) = exit_frame(&seen);
        assert_eq!((rebuild(&seen, true), code), (native_out, native_code), "{name} handled: {handled}");
        assert!(!timed_out);
        assert_eq!(code, if handled { 3 } else { 128 + signal as i32 });
        let info = server.run_info(&id).await.1.unwrap();
        assert_eq!((info.state, info.stopped_by, info.error), (RunState::Exited, None, None), "{name}");
    }
    server.stop().await;
}

/// STOP stops the whole group and CONT continues it; the run's own end comes after, exit 0.
#[tokio::test(flavor = "multi_thread")]
async fn stop_and_cont_stop_and_continue_the_group() {
    let server = server().start().await;
    let gate = server.workspace.path().join("gate");
    mkfifo(&gate);
    let script =
        "import os\nprint(os.getpid(), flush=True)\nprint('ready', flush=True)\nopen('gate').read()\nprint('after')";
    let mut frames = server.open_stream(json!({"cmd": ["python3", "-c", script], "run_id": "stop-cont"})).await;
    let seen = frames.until_stdout("ready").await;
    let text = String::from_utf8(rebuild(&seen, true)).unwrap();
    let pid: i32 = text.lines().next().unwrap().parse().unwrap();
    let state = move || process_group::procfs::stat(pid).map(|stat| stat.state);
    server.signal_run("stop-cont", "STOP").await;
    tokio::task::spawn_blocking(move || wait_until("the group to stop", || state() == Some('T'))).await.unwrap();
    server.signal_run("stop-cont", "cont").await;
    tokio::task::spawn_blocking(move || wait_until("the group to go on", || state().is_some_and(|s| s != 'T')))
        .await
        .unwrap();
    tokio::task::spawn_blocking(move || std::fs::write(gate, "")).await.unwrap().unwrap();
    let rest = frames.rest().await;
    assert_eq!(rebuild(&rest, true), b"after\n");
    assert_eq!(exit_frame(&rest).0, 0);
    let info = tokio::time::timeout(Duration::from_secs(20), server.run_info("stop-cont")).await.unwrap().1.unwrap();
    assert_eq!(info.state, RunState::Exited);
    server.stop().await;
}
