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

/// Runs `command` (stdout piped), and for each `(text, signal)` waits until its stdout holds `text` and a process
/// carrying `marker` runs (the command's `sleep`: a signal sent before the shell has forked it would wait for it to
/// end, natively as on the host), then sends `signal` to it (`group`: to its process group, as a terminal sends Ctrl-C
/// to the foreground job); then reads to the end. The code as a shell reports it (128+N for a death by signal N) and
/// all of stdout.
async fn signalled(
    mut command: tokio::process::Command,
    group: bool,
    marker: &str,
    steps: &[(&str, Signal)],
) -> (i32, String) {
    use std::os::unix::process::ExitStatusExt;
    use tokio::io::AsyncReadExt;
    if group {
        command.process_group(0);
    }
    let mut child = command.stdout(std::process::Stdio::piped()).spawn().unwrap();
    let pid = child.id().unwrap() as i32;
    let mut out = child.stdout.take().unwrap();
    let mut text = Vec::new();
    let mut piece = [0u8; 4096];
    for (awaited, signal) in steps {
        while !String::from_utf8_lossy(&text).contains(awaited) {
            let read = tokio::time::timeout(Duration::from_secs(30), out.read(&mut piece)).await;
            let seen = String::from_utf8_lossy(&text);
            let n = read.unwrap_or_else(|_| panic!("no {awaited:?} in 30 s (group {group}): {seen:?}")).unwrap();
            assert!(n > 0, "ended before {awaited:?}: {seen:?}");
            text.extend_from_slice(&piece[..n]);
        }
        testkit::wait_for_process(marker);
        kill(Pid::from_raw(if group { -pid } else { pid }), *signal).unwrap();
    }
    let read = tokio::time::timeout(Duration::from_secs(30), out.read_to_end(&mut text)).await;
    assert!(read.is_ok(), "no end 30 s after the signals: {:?}", String::from_utf8_lossy(&text));
    let status = tokio::time::timeout(Duration::from_secs(30), child.wait()).await.unwrap().unwrap();
    (status.code().unwrap_or_else(|| 128 + status.signal().unwrap()), String::from_utf8_lossy(&text).into_owned())
}

/// Signals arrive as sent: SIGINT, SIGTERM and SIGHUP that ssh-exec gets reach the command on the host
/// as the same signal, its handlers run, what it prints then arrives, and ssh-exec exits with the command's own code;
/// a second Ctrl-C is delivered again. Each compared with the same script run natively, signalled as a terminal
/// signals its foreground job (ssh-exec is alone in its group there: ssh has its own).
#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs sshd (Debian's openssh-server); CI runs it"]
async fn signals_arrive_as_sent_and_the_command_ends_as_natively() {
    let sshd = sshd!();
    let cases: [(&str, &[(&str, Signal)]); 6] = [
        ("trap 'echo cleanup; exit 3' INT; echo ready; sleep \"$1$2\"; echo not-here", &[("ready", Signal::SIGINT)]),
        ("trap 'echo term; exit 4' TERM; echo ready; sleep \"$1$2\"", &[("ready", Signal::SIGTERM)]),
        ("trap 'echo hup; exit 6' HUP; echo ready; sleep \"$1$2\"", &[("ready", Signal::SIGHUP)]),
        ("echo ready; sleep \"$1$2\"", &[("ready", Signal::SIGINT)]),
        ("echo ready; sleep \"$1$2\"", &[("ready", Signal::SIGHUP)]),
        (
            "trap 'echo one; trap \"echo two; exit 5\" INT' INT; echo ready; sleep \"$1$2\"; sleep \"$1$2\"",
            &[("ready", Signal::SIGINT), ("one", Signal::SIGINT)],
        ),
    ];
    for (script, steps) in cases {
        let (marker, a, b) = split_marker();
        let mut native = tokio::process::Command::new("sh");
        native.args(["-c", script, "sh", &a, &b]).current_dir(sshd.host_cwd.path());
        let native = signalled(native, true, &marker, steps).await;
        let (marker, a, b) = split_marker();
        let mut forwarded = sshd.client().other(SSH_BIN);
        forwarded.args(["sh", "-c", script, "sh", &a, &b]);
        let forwarded = signalled(forwarded, false, &marker, steps).await;
        assert_eq!(forwarded, native, "{script}");
        testkit::assert_no_survivors(&marker, Duration::from_secs(5));
    }
}

/// A command that ignores the signal goes on, as natively, and still ends as it ends.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs sshd (Debian's openssh-server); CI runs it"]
async fn a_signal_the_command_ignores_changes_nothing() {
    let sshd = sshd!();
    let (marker, a, b) = split_marker();
    // The sleep that carries the marker ends when the command does (the host's shell ends its group).
    let script = "trap '' INT; sleep \"$1$2\" & echo ready; sleep 1; echo still-here; exit 7";
    let mut forwarded = sshd.client().other(SSH_BIN);
    forwarded.args(["sh", "-c", script, "sh", &a, &b]);
    let forwarded = signalled(forwarded, false, &marker, &[("ready", Signal::SIGINT)]).await;
    assert_eq!(forwarded, (7, "ready\nstill-here\n".to_owned()));
}

/// SSH_STOP_GRACE is the time a stopped command has between SIGTERM and SIGKILL (a closed stdout stops it): a TERM
/// handler that takes 3 s (more than the default 2 s) finishes with a longer grace, and ssh-exec returns only after
/// it has.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs sshd (Debian's openssh-server); CI runs it"]
async fn ssh_stop_grace_gives_a_term_handler_its_time() {
    let sshd = sshd!();
    let (marker, a, b) = split_marker();
    let remote =
        "trap 'sleep 3; echo done > cleaned; exit 0' TERM; sleep \"$1$2\" & while :; do echo line; sleep 0.01; done";
    let script = format!("{SSH_BIN} sh -c {} sh {a} {b} | head -1", protocol::shell::quote(remote));
    let mut shell = sshd.client().env("SSH_STOP_GRACE", "30").other("sh");
    shell.arg("-c").arg(&script);
    let output = tokio::time::timeout(Duration::from_secs(60), shell.output()).await.unwrap().unwrap();
    // (The command's own sh may say its background sleep was "Terminated": its words, not ours.)
    assert_eq!(stdout(&output), "line\n");
    assert!(!stderr(&output).contains("ssh-exec"), "{}", stderr(&output));
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
