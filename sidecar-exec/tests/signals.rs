//! Interrupting the client: the remote command's whole group must end with it.

use std::time::Duration;

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use crate::support::*;

#[tokio::test(flavor = "multi_thread")]
async fn signals_to_the_client_cancel_the_remote_group() {
    let server = server().await;
    let cases = [(Signal::SIGINT, 130, true), (Signal::SIGTERM, 143, false), (Signal::SIGHUP, 129, true)];
    for (signal, code, stream) in cases {
        let marker = marker();
        // The marker travels in a forwarded variable, so only the remote sleepers carry it, not the client's argv
        // (the client must have started forwarding, signal handlers installed, when the sleepers appear).
        let script = r#"trap '' TERM; (sleep "$MARK" &); sleep "$MARK""#;
        let child = server
            .client()
            .stream(stream)
            .env("MARK", &marker)
            .env("SIDECAR_ENV_PASSTHROUGH", "MARK")
            .args(["python", "sh", "-c", script])
            .spawn();
        wait_for_process(&marker);
        kill(Pid::from_raw(child.id().unwrap() as i32), signal).unwrap();
        let output = tokio::time::timeout(Duration::from_secs(10), child.wait_with_output()).await.unwrap().unwrap();
        assert_eq!(output.status.code(), Some(code), "{signal}");
        assert_no_survivors(&marker, Duration::from_secs(5));
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_closed_stdout_stops_the_client_quietly_and_cancels_the_command() {
    let server = server().await;
    for stream in [true, false] {
        let marker = marker();
        // `yes` writes forever; the remote group also holds a sleeper to prove the whole group goes.
        let script = format!("({} &); yes line", sleeper(&marker));
        let shell = format!("{BIN} python sh -c '{script}' | head -1");
        let output = tokio::process::Command::new("sh")
            .arg("-c")
            .arg(&shell)
            .env("BUILD_SIDECARS", format!(r#"{{"python":{{"internal_url":"{}"}}}}"#, server.url))
            .env("SIDECAR_STREAM", if stream { "1" } else { "0" })
            .env("SIDECAR_TIMEOUT", "3")
            .env("SIDECAR_CWD", server.workspace.path())
            .output();
        let output = tokio::time::timeout(Duration::from_secs(20), output).await.unwrap().unwrap();
        assert_eq!(String::from_utf8_lossy(&output.stdout), "line\n");
        assert_eq!(String::from_utf8_lossy(&output.stderr), "", "stream={stream}");
        assert_no_survivors(&marker, Duration::from_secs(5));
    }
    server.stop().await;
}
