//! Durable runs from the client's side: the real client and the real exec-server with a real cut between
//! them (testkit's [`CutProxy`]), the reattach window, explicit cancellation, `--runs` and `--attach`.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use crate::support::*;

/// The client pointed at `url` (the proxy), working in the server's workspace.
fn via(url: &str, server: &TestServer) -> BinaryRun {
    client_run()
        .env("BUILD_SIDECARS", format!(r#"{{"python":{{"internal_url":"{url}"}}}}"#))
        .current_dir(server.workspace.path())
}

async fn proxy_to(server: &TestServer) -> CutProxy {
    let upstream: SocketAddr = server.url.trim_start_matches("http://").parse().unwrap();
    CutProxy::start(upstream).await.unwrap()
}

/// The seed of the random cuts: RESUME_SEED to repeat a run, else the clock. Printed either way.
fn seed() -> u64 {
    let seed = std::env::var("RESUME_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos().into()
    });
    println!("random cuts: seed {seed} (RESUME_SEED={seed} repeats it)");
    seed
}

/// `lines` numbered 100-byte lines to stdout and as many to stderr, interleaved, after counting the run in
/// `runs.count` (the side effect that proves it ran once); exit 3.
fn numbered(lines: u32) -> String {
    format!(
        "echo run >> runs.count; awk 'BEGIN {{ pad = sprintf(\"%82s\", \"\"); gsub(/ /, \"x\", pad); \
         for (i = 1; i <= {lines}; i++) {{ printf \"stdout %09d %s\\n\", i, pad; \
         printf \"stderr %09d %s\\n\", i, pad > \"/dev/stderr\" }} }}'; exit 3"
    )
}

/// Where two outputs first differ (a 10 MB assert_eq! message helps nobody).
fn first_difference(a: &[u8], b: &[u8]) -> Option<usize> {
    a.iter().zip(b).position(|(x, y)| x != y).or_else(|| (a.len() != b.len()).then(|| a.len().min(b.len())))
}

fn count_runs(server: &TestServer) -> usize {
    std::fs::read_to_string(server.workspace.path().join("runs.count")).unwrap_or_default().lines().count()
}

/// 20 MB of numbered lines (10 MB on each stream), the connection cut 50 times at seeded random points: the
/// output is byte-identical to a direct run, the exit code is the command's, and the command ran once.
async fn fifty_cuts(stream: bool) {
    const LINES: u32 = 100_000;
    let server = server_with(&["--reattach-window", "30"], None).await;
    let proxy = proxy_to(&server).await;
    let script = numbered(LINES);
    let scratch = tempfile::tempdir().unwrap();
    let direct = std::process::Command::new("sh").args(["-c", &script]).current_dir(scratch.path()).output().unwrap();
    assert_eq!((direct.status.code(), direct.stdout.len(), direct.stderr.len()), (Some(3), 10_000_000, 10_000_000));

    proxy.cut_randomly(seed(), 8 * 1024, 300 * 1024, 50);
    let started = Instant::now();
    let child = via(&proxy.url(), &server).stream(stream).args(["python", "sh", "-c", &script]).spawn();
    let output = tokio::time::timeout(Duration::from_secs(300), child.wait_with_output()).await.unwrap().unwrap();
    let elapsed = started.elapsed();
    let message = String::from_utf8_lossy(&output.stderr[output.stderr.len().saturating_sub(500)..]).into_owned();
    assert_eq!(output.status.code(), Some(3), "stream={stream}: {message}");
    assert_eq!(first_difference(&output.stdout, &direct.stdout), None, "stdout, stream={stream}");
    assert_eq!(first_difference(&output.stderr, &direct.stderr), None, "stderr, stream={stream}");
    assert_eq!(count_runs(&server), 1, "the command ran exactly once");
    assert_eq!(proxy.cuts(), 50, "every asked-for cut happened");
    println!(
        // Connections: the first, one per resume, and the DELETE that forgets the run (over 1 MiB of output).
        "50-cut test, {} mode: cuts {}, connections {}, output {} + {} bytes, {} bytes through the proxy, {:.1} s",
        if stream { "streaming" } else { "blocking" },
        proxy.cuts(),
        proxy.connections(),
        output.stdout.len(),
        output.stderr.len(),
        proxy.down_bytes(),
        elapsed.as_secs_f64()
    );
    drop(proxy);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn fifty_cuts_while_streaming_change_nothing() {
    fifty_cuts(true).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn fifty_cuts_in_blocking_mode_change_nothing() {
    fifty_cuts(false).await;
}

/// A command that prints `a`, waits for the file `go` in the workspace, prints `b` and exits 5: the test decides
/// when the connection is cut (after `a` arrived) and when the command goes on.
const GATED: &str = "echo run >> runs.count; echo a; while [ ! -e go ]; do sleep 0.05; done; echo b; exit 5";

#[tokio::test(flavor = "multi_thread")]
async fn a_cut_is_resumed_quietly_or_with_one_verbose_line_and_not_without_a_name() {
    let server = server().await;
    let proxy = proxy_to(&server).await;
    for (verbose, resume) in [(false, true), (true, true), (false, false)] {
        let _ = std::fs::remove_file(server.workspace.path().join("go"));
        let mut child = via(&proxy.url(), &server)
            .stream(true)
            .env("SIDECAR_VERBOSE", if verbose { "1" } else { "0" })
            .env("SIDECAR_RESUME", if resume { "1" } else { "0" })
            .args(["python", "sh", "-c", GATED])
            .spawn();
        let mut stdout = child.stdout.take().unwrap();
        let mut got = read_until(&mut stdout, b"a\n").await;
        assert_eq!(proxy.cut_all(), 1);
        std::fs::write(server.workspace.path().join("go"), "").unwrap();
        tokio::io::AsyncReadExt::read_to_end(&mut stdout, &mut got).await.unwrap();
        let output = tokio::time::timeout(HANG, child.wait_with_output()).await.unwrap().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        if resume {
            assert_eq!((output.status.code(), got.as_slice()), (Some(5), &b"a\nb\n"[..]), "{stderr}");
            let expected = if verbose { "sidecar-exec: connection lost, resumed at stdout 2, stderr 0\n" } else { "" };
            assert_eq!(without_explain(&stderr), expected);
        } else {
            // Today's behaviour: the connection's end is the command's end.
            assert_eq!((output.status.code(), got.as_slice()), (Some(1), &b"a\n"[..]));
            assert!(stderr.starts_with("sidecar-exec: stream"), "{stderr}");
        }
    }
    drop(proxy);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_request_lost_on_the_way_is_sent_again_and_runs_once() {
    let server = server().await;
    let proxy = proxy_to(&server).await;
    for stream in [true, false] {
        let before = (proxy.connections(), count_runs(&server));
        proxy.lose_requests(1);
        let output = via(&proxy.url(), &server)
            .stream(stream)
            .env("SIDECAR_VERBOSE", "1")
            .args(["python", "sh", "-c", "echo run >> runs.count; echo done"])
            .run()
            .await;
        assert_eq!((output.status.code(), stdout(&output)), (Some(0), "done\n".to_owned()), "{}", stderr(&output));
        assert_eq!(without_explain(&stderr(&output)), "sidecar-exec: connection lost, resumed at stdout 0, stderr 0\n");
        assert_eq!(count_runs(&server) - before.1, 1, "stream={stream}");
        // The lost POST's, and one that carried the reattach (404: no such run) and then the POST again.
        assert_eq!(proxy.connections() - before.0, 2, "stream={stream}");
    }
    drop(proxy);
    server.stop().await;
}

/// The first line of `--runs`: the newest run (the marker travels in the environment, not in the argv it shows).
async fn newest_run(server: &TestServer) -> String {
    let runs = server.client().args(["--runs"]).run().await;
    assert_eq!(runs.status.code(), Some(0), "{}", stderr(&runs));
    stdout(&runs).lines().next().unwrap_or_default().to_owned()
}

/// The newest run's line once it no longer shows `running`: its processes can be gone a moment before the server
/// has recorded its end (the stop policy settles the group first), so the state is waited for, never assumed.
async fn newest_ended_run(server: &TestServer) -> String {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let line = newest_run(server).await;
        if line.split_whitespace().nth(2) != Some("running") {
            return line;
        }
        assert!(tokio::time::Instant::now() < deadline, "still running after 20 s: {line}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_client_that_is_gone_for_longer_than_the_window_leaves_nothing_behind() {
    let server = server_with(&["--reattach-window", "2"], None).await;
    for stream in [true, false] {
        let marker = marker();
        let mut child = server.sleepers(stream, &marker);
        wait_for_process(&marker);
        // SIGKILL: the client cannot cancel anything; only the window can end the command.
        child.start_kill().unwrap();
        child.wait().await.unwrap();
        assert_no_survivors(&marker, Duration::from_secs(30));
        let line = newest_ended_run(&server).await;
        assert!(line.contains("cancelled") && line.contains("no client reattached"), "{line}");
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn ctrl_c_or_a_closed_stdout_ends_a_named_run_at_once_not_after_the_window() {
    // A window far longer than the waits below: only an explicit cancel can end the command in time.
    let server = server_with(&["--reattach-window", "600"], None).await;
    for (signal, code, stream) in
        // Blocking mode keeps the cancel policy (the streaming modes deliver signals as sent: streamed.rs).
        [(Signal::SIGINT, 130, false), (Signal::SIGTERM, 143, false), (Signal::SIGHUP, 129, false)]
    {
        let marker = marker();
        let child = server.sleepers(stream, &marker);
        wait_for_process(&marker);
        kill(Pid::from_raw(child.id().unwrap() as i32), signal).unwrap();
        let output = tokio::time::timeout(HANG, child.wait_with_output()).await.unwrap().unwrap();
        assert_eq!(output.status.code(), Some(code), "{signal}: {}", stderr(&output));
        assert_no_survivors(&marker, Duration::from_secs(10));
        let line = newest_run(&server).await;
        assert!(line.contains("cancelled by DELETE"), "{signal}: {line}");
    }
    for stream in [true, false] {
        let marker = marker();
        let output = server.piped_to_head(stream, &marker).await;
        assert_eq!((stdout_text(&output.stdout), stdout_text(&output.stderr)), ("line\n".into(), String::new()));
        assert_no_survivors(&marker, Duration::from_secs(10));
    }
    server.stop().await;
}

fn stdout_text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[tokio::test(flavor = "multi_thread")]
async fn runs_lists_them_and_attach_follows_one_to_its_end() {
    let server = server().await;
    let marker = marker();
    let script = format!("{GATED} # {marker}");
    let mut first = server.client().stream(true).args(["python", "sh", "-c", &script]).spawn();
    let mut first_out = first.stdout.take().unwrap();
    read_until(&mut first_out, b"a\n").await;

    let runs = server.client().args(["--runs"]).run().await;
    assert_eq!(runs.status.code(), Some(0), "{}", stderr(&runs));
    let listed = stdout(&runs);
    let line = listed.lines().find(|line| line.contains(&marker)).unwrap_or_else(|| panic!("{listed}")).to_owned();
    let fields: Vec<&str> = line.split_whitespace().collect();
    assert_eq!((fields[0], fields[2]), ("python", "running"), "{line}");
    let id = fields[1].to_owned();
    assert!(id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit()), "{line}");

    let mut attached = server.client().args(["--attach", "python", &id]).spawn();
    let mut attached_out = attached.stdout.take().unwrap();
    let mut got = read_until(&mut attached_out, b"a\n").await;
    std::fs::write(server.workspace.path().join("go"), "").unwrap();
    tokio::io::AsyncReadExt::read_to_end(&mut attached_out, &mut got).await.unwrap();
    let status = tokio::time::timeout(HANG, attached.wait()).await.unwrap().unwrap();
    assert_eq!((status.code(), got.as_slice()), (Some(5), &b"a\nb\n"[..]));
    let mut rest = Vec::new();
    tokio::io::AsyncReadExt::read_to_end(&mut first_out, &mut rest).await.unwrap();
    assert_eq!((first.wait().await.unwrap().code(), rest.as_slice()), (Some(5), &b"b\n"[..]));
    assert_eq!(count_runs(&server), 1);

    // Ended and kept: the whole output again, and its code.
    let again = server.client().args(["--attach", "python", &id]).run().await;
    assert_eq!((again.status.code(), stdout(&again)), (Some(5), "a\nb\n".to_owned()), "{}", stderr(&again));
    let unknown = server.client().args(["--attach", "python", "no-such-run"]).run().await;
    assert_eq!(unknown.status.code(), Some(1));
    assert!(stderr(&unknown).contains("is not known"), "{}", stderr(&unknown));
    server.stop().await;
}

/// Blocking mode writes a reply's stdout as it arrives. A reply lost after part of it was written
/// resumes the run's stream after what was written, counted as stream offsets, so nothing is doubled or missing:
/// here the reply's stdout was cut at the server's cap (head, marker, tail) and the connection is lost inside the
/// tail, after the marker. What was written must stop at the head (the command's own first bytes); the rest comes
/// from the run's stream, and the output is byte-identical to a direct run.
#[tokio::test(flavor = "multi_thread")]
async fn a_blocking_reply_lost_after_its_head_was_written_resumes_without_doubling() {
    let server = server_with(&["--max-output", "65536"], None).await;
    let proxy = proxy_to(&server).await;
    let script = "echo run >> runs.count; awk 'BEGIN { for (i = 1; i <= 50000; i++) printf \"line %09d\\n\", i }'; \
                  exit 3";
    let scratch = tempfile::tempdir().unwrap();
    let direct = std::process::Command::new("sh").args(["-c", script]).current_dir(scratch.path()).output().unwrap();
    assert_eq!(direct.stdout.len(), 750_000);
    // The reply: about 32 KiB of escaped head, the marker, about 32 KiB of tail. The cut falls in the tail.
    proxy.cut_randomly(seed(), 48 * 1024, 48 * 1024, 1);
    let output =
        via(&proxy.url(), &server).stream(false).env("SIDECAR_VERBOSE", "1").args(["python", "sh", "-c", script]).run();
    let output = tokio::time::timeout(HANG, output).await.unwrap();
    let message = without_explain(&stderr(&output));
    assert_eq!(output.status.code(), Some(3), "{message}");
    assert_eq!(first_difference(&output.stdout, &direct.stdout), None, "{message}");
    assert_eq!((proxy.cuts(), count_runs(&server)), (1, 1));
    // Resumed after the head it had written, not from 0 and not from the cut.
    let resumed_at: u64 = message
        .strip_prefix("sidecar-exec: connection lost, resumed at stdout ")
        .and_then(|rest| rest.split(',').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("one resume line: {message:?}"));
    assert!((20_000..40_000).contains(&resumed_at), "resumed at stdout {resumed_at}");
    drop(proxy);
    server.stop().await;
}

/// A run with more than 1 MiB of output, read to its end, is forgotten on the server as the client exits (its log
/// would otherwise hold the sidecar's state folder for --retain); a small one stays kept and listed.
#[tokio::test(flavor = "multi_thread")]
async fn a_large_run_read_to_its_end_is_forgotten_a_small_one_is_kept() {
    let server = server().await;
    for stream in [true, false] {
        let (big, small) = (marker(), marker());
        let script = format!("head -c 2000000 /dev/zero | tr '\\0' x # {big}");
        let output = server.client().stream(stream).args(["python", "sh", "-c", &script]).run().await;
        assert_eq!((output.status.code(), output.stdout.len()), (Some(0), 2_000_000), "{}", stderr(&output));
        let output = server.client().stream(stream).args(["python", "sh", "-c", &format!("echo hi # {small}")]).run();
        assert_eq!(output.await.status.code(), Some(0));
        let runs = server.client().args(["--runs"]).run().await;
        let listed = stdout(&runs);
        assert!(!listed.contains(&big), "stream={stream}: the large run is still kept:\n{listed}");
        assert!(listed.contains(&small), "stream={stream}: the small run is not listed:\n{listed}");
    }
    server.stop().await;
}

/// A run that exited 0 while its client was away, and whose tombstone then went too (more runs forgotten for room
/// than the server keeps tombstones of: 8 × `--max-runs`): the reconnecting client gets a plain 404 from the same
/// server. It says the run may have been stopped or may have ended and is no longer kept, with the output that
/// arrived, and never "run it again" (before: "… lost for longer than its reattach window …; run it again").
#[tokio::test(flavor = "multi_thread")]
async fn past_the_tombstones_a_run_that_exited_0_is_not_advised_as_a_rerun() {
    let server = server_with(&["--max-runs", "1"], None).await;
    let proxy = proxy_to(&server).await;
    // The command ends once the test says so (a file appears): while the client cannot reach the server.
    let script = "echo ran >> ran.count; echo started; while [ ! -e go ]; do sleep 0.05; done; echo done";
    let mut child = via(&proxy.url(), &server).args(["python", "sh", "-c", script]).spawn();
    let mut stdout = child.stdout.take().unwrap();
    read_until(&mut stdout, b"started\n").await;
    proxy.lose_requests(u64::MAX);
    assert!(proxy.cut_all() > 0, "the run's stream was live");
    std::fs::write(server.workspace.path().join("go"), "").unwrap();
    let ended = async {
        while !newest_run(&server).await.contains(" exited ") {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    tokio::time::timeout(HANG, ended).await.expect("the run ended");
    // Nine more runs, each forgetting the one before for room: the tenth tombstone pushes out the first, ours.
    for _ in 0..9 {
        let output = server.client().args(["python", "true"]).run().await;
        assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    }
    proxy.lose_requests(0);
    let output = tokio::time::timeout(HANG, child.wait_with_output()).await.expect("the client ended").unwrap();
    let line = stderr(&output);
    assert_eq!(output.status.code(), Some(1), "{line}");
    assert!(
        line.contains("no longer knows run ") && line.contains("the command ended and the sidecar no longer keeps")
    );
    assert!(line.contains("up to stdout byte 8 and stderr byte 0 arrived"), "{line}");
    assert!(!line.contains("run it again"), "{line}");
    let ran = std::fs::read_to_string(server.workspace.path().join("ran.count")).unwrap();
    assert_eq!(ran, "ran\n", "the command ran once");
    server.stop().await;
}
