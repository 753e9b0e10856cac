//! Interrupting the client: the remote command's whole group must end with it.

use std::time::Duration;

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use crate::support::*;

#[tokio::test(flavor = "multi_thread")]
async fn signals_to_the_client_cancel_the_remote_group() {
    let server = server().await;
    // Blocking mode (SIDECAR_STREAM=0) keeps the cancel policy; the streaming modes deliver signals as sent
    // (streamed.rs, and the differential suite against native).
    let cases = [(Signal::SIGINT, 130, false), (Signal::SIGTERM, 143, false), (Signal::SIGHUP, 129, false)];
    for (signal, code, stream) in cases {
        let marker = marker();
        // Only the remote sleepers carry the marker (the client must have started forwarding, signal handlers
        // installed, when they appear).
        let child = server.sleepers(stream, &marker);
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
        let output = server.piped_to_head(stream, &marker).await;
        assert_eq!(String::from_utf8_lossy(&output.stdout), "line\n");
        assert_eq!(String::from_utf8_lossy(&output.stderr), "", "stream={stream}");
        assert_no_survivors(&marker, Duration::from_secs(5));
    }
    server.stop().await;
}
