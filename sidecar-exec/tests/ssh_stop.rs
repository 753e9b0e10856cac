//! Stopping ssh-exec: the remote command's whole process group ends with it, and the shared connection under load.

use std::time::Duration;

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use crate::sshd::*;

/// A marker in two halves: the remote sleepers join them, so only they carry the whole marker in their argv (the
/// script ssh-exec sends, visible in ssh's and the host shell's argv, holds the halves).
fn split_marker() -> (String, String, String) {
    let marker = testkit::marker();
    let (a, b) = marker.split_at(4);
    (marker.clone(), a.to_owned(), b.to_owned())
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs sshd (Debian's openssh-server); CI runs it"]
async fn signals_end_the_whole_remote_group_even_when_it_ignores_term() {
    let sshd = sshd!();
    let cases = [(Signal::SIGINT, 130, false), (Signal::SIGHUP, 129, false), (Signal::SIGTERM, 143, true)];
    for (signal, code, ignore_term) in cases {
        let (marker, a, b) = split_marker();
        let trap = if ignore_term { "trap '' TERM; " } else { "" };
        let script = format!("{trap}(sleep \"$1$2\" &); sleep \"$1$2\"");
        let child = sshd.client().args(["sh", "-c", &script, "sh", &a, &b]).spawn();
        testkit::wait_for_process(&marker);
        kill(Pid::from_raw(child.id().unwrap() as i32), signal).unwrap();
        let output = tokio::time::timeout(Duration::from_secs(30), child.wait_with_output()).await.unwrap().unwrap();
        assert_eq!(output.status.code(), Some(code), "{signal}: {}", stderr(&output));
        assert_eq!(stderr(&output), "", "{signal}");
        // On return the group is gone: the stop session waited for it (KILL after the grace for TERM-ignorers).
        testkit::assert_no_survivors(&marker, Duration::from_secs(1));
    }
}

/// SSH_STOP_GRACE is the time a stopped command has between SIGTERM and SIGKILL: a TERM handler that takes 3 s
/// (more than the default 2 s) finishes with a longer grace, and ssh-exec returns only after it has.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs sshd (Debian's openssh-server); CI runs it"]
async fn ssh_stop_grace_gives_a_term_handler_its_time() {
    let sshd = sshd!();
    let (marker, a, b) = split_marker();
    let script = "trap 'sleep 3; echo done > cleaned; exit 0' TERM; sleep \"$1$2\" & wait";
    let child = sshd.client().env("SSH_STOP_GRACE", "30").args(["sh", "-c", script, "sh", &a, &b]).spawn();
    testkit::wait_for_process(&marker);
    kill(Pid::from_raw(child.id().unwrap() as i32), Signal::SIGINT).unwrap();
    let output = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output()).await.unwrap().unwrap();
    assert_eq!((output.status.code(), stderr(&output).as_str()), (Some(130), ""));
    let cleaned = std::fs::read_to_string(sshd.host_cwd.path().join("cleaned")).unwrap_or_default();
    assert_eq!(cleaned, "done\n", "the TERM handler was cut short");
    testkit::assert_no_survivors(&marker, Duration::from_secs(1));
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs sshd (Debian's openssh-server); CI runs it"]
async fn a_closed_stdout_ends_the_remote_command_quietly() {
    let sshd = sshd!();
    let (marker, a, b) = split_marker();
    let script = format!("{SSH_BIN} sh -c '(sleep \"$1$2\" &); yes line' sh {a} {b} | head -1");
    let mut shell = sshd.client().other("sh");
    shell.arg("-c").arg(&script);
    let output = tokio::time::timeout(Duration::from_secs(30), shell.output()).await.unwrap().unwrap();
    assert_eq!((stdout(&output).as_str(), stderr(&output).as_str()), ("line\n", ""));
    testkit::assert_no_survivors(&marker, Duration::from_secs(5));
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs sshd (Debian's openssh-server); CI runs it"]
async fn background_processes_end_with_the_command() {
    let sshd = sshd!();
    // One that lets go of the output: the host's shell ends the group as the command ends. One that holds the
    // output open and ignores TERM: after the drain, a stop session ends it (KILL after the grace).
    let cases = ["sleep \"$1$2\" >/dev/null 2>&1 & echo started", "(trap '' TERM; sleep \"$1$2\") & echo started"];
    for script in cases {
        let (marker, a, b) = split_marker();
        let output = sshd.client().args(["sh", "-c", script, "sh", &a, &b]).run().await;
        assert_eq!((output.status.code(), stdout(&output).as_str()), (Some(0), "started\n"), "{}", stderr(&output));
        testkit::assert_no_survivors(&marker, Duration::from_secs(5));
    }
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs sshd (Debian's openssh-server); CI runs it"]
async fn sixteen_parallel_calls_share_one_master_within_the_session_limit() {
    let sshd = sshd!();
    let host = sshd.host_cwd.path();
    // Each call counts the calls running beside it (files present) while it runs.
    let script = "touch running.$$; ls running.* | wc -l >> counts; sleep 0.3; rm running.$$; echo \"call $1\"";
    let calls = (0..16)
        .map(|i| sshd.client().env("SSH_MAX_SESSIONS", "4").args(["sh", "-c", script, "sh", &i.to_string()]).run());
    let outputs = futures_util::future::join_all(calls).await;
    for (i, output) in outputs.iter().enumerate() {
        assert_eq!(output.status.code(), Some(0), "call {i}: {}", stderr(output));
        assert_eq!(stdout(output), format!("call {i}\n"));
    }
    let counts: Vec<u32> =
        std::fs::read_to_string(host.join("counts")).unwrap().lines().map(|l| l.trim().parse().unwrap()).collect();
    assert_eq!(counts.len(), 16);
    assert!(counts.iter().all(|&n| (1..=4).contains(&n)), "more than 4 at once: {counts:?}");
    let masters = sshd.masters().len();
    assert_eq!(masters, 1, "one shared master");
    assert_eq!(sshd.connections().len(), 1, "one connection to sshd");
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs sshd (Debian's openssh-server); CI runs it"]
async fn a_connection_lost_mid_command_is_a_transport_failure() {
    let sshd = sshd!();
    let (marker, a, b) = split_marker();
    let child = sshd.client().args(["sh", "-c", "sleep \"$1$2\"", "sh", &a, &b]).spawn();
    testkit::wait_for_process(&marker);
    for connection in sshd.connections() {
        kill(Pid::from_raw(connection), Signal::SIGKILL).unwrap();
    }
    let output = tokio::time::timeout(Duration::from_secs(30), child.wait_with_output()).await.unwrap().unwrap();
    assert_eq!(output.status.code(), Some(255), "{}", stderr(&output));
    assert!(stderr(&output).contains("lost while the command ran"), "{}", stderr(&output));
    // The connection's sshd is gone; the sleeper it started is this test's to clean up.
    for pid in testkit::processes_matching(&marker) {
        let _ = kill(Pid::from_raw(pid as i32), Signal::SIGKILL);
    }
}
