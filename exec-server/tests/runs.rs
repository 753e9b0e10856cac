//! Named runs (docs/exec-server.md, "Runs"): they outlive their connection for the reattach window, are never started
//! twice, keep their output for replay from any offset, and are bounded in number, memory and disk.

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::time::Duration;

use protocol::{Frame, RunInfo, RunList, RunState, StoppedBy};
use serde_json::json;

use crate::support::*;

/// Frames read from a live SSE response as they come.
pub(crate) struct Frames {
    response: reqwest::Response,
    buffer: Vec<u8>,
}

impl Frames {
    pub(crate) fn new(response: reqwest::Response) -> Self {
        assert_eq!(response.status(), 200);
        Frames { response, buffer: Vec::new() }
    }

    /// The next frame, or `None` at the end of the body.
    pub(crate) async fn next(&mut self) -> Option<Frame> {
        loop {
            if let Some(end) = self.buffer.windows(2).position(|w| w == b"\n\n") {
                let event: Vec<u8> = self.buffer.drain(..end + 2).collect();
                if let Some(json) = event.strip_prefix(b"data: ") {
                    return Some(Frame::from_json(&json[..json.len() - 2]).unwrap().unwrap());
                }
                continue;
            }
            let chunk = self.response.chunk().await.unwrap()?;
            self.buffer.extend_from_slice(&chunk);
        }
    }

    /// Frames until (and with) the first whose stdout holds `text`.
    pub(crate) async fn until_stdout(&mut self, text: &str) -> Vec<Frame> {
        let mut frames = Vec::new();
        loop {
            let frame = self.next().await.unwrap_or_else(|| panic!("stream ended before {text:?}: {frames:?}"));
            let found = matches!(&frame, Frame::Stdout(chunk) if chunk.data.contains(text));
            frames.push(frame);
            if found {
                return frames;
            }
        }
    }

    pub(crate) async fn rest(&mut self) -> Vec<Frame> {
        let mut frames = Vec::new();
        while let Some(frame) = self.next().await {
            frames.push(frame);
        }
        frames
    }
}

impl TestServer {
    pub(crate) fn get(&self, path: &str) -> reqwest::RequestBuilder {
        let request = self.client().get(format!("{}{path}", self.url));
        match &self.token {
            Some(token) => request.bearer_auth(token),
            None => request,
        }
    }

    fn delete(&self, path: &str) -> reqwest::RequestBuilder {
        let request = self.client().delete(format!("{}{path}", self.url));
        match &self.token {
            Some(token) => request.bearer_auth(token),
            None => request,
        }
    }

    pub(crate) async fn open_stream(&self, request: serde_json::Value) -> Frames {
        Frames::new(self.post("/exec/stream", request.to_string()).send().await.unwrap())
    }

    pub(crate) async fn run_info(&self, id: &str) -> (u16, Option<RunInfo>) {
        let response = self.get(&format!("/runs/{id}")).send().await.unwrap();
        let status = response.status().as_u16();
        let body = response.bytes().await.unwrap();
        (status, (status == 200).then(|| serde_json::from_slice(&body).unwrap()))
    }

    /// Waits (on the server's own answers) until `id`'s info satisfies `done`; panics after 20 s.
    pub(crate) async fn wait_for_run(&self, id: &str, what: &str, done: impl Fn(&RunInfo) -> bool) -> RunInfo {
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        loop {
            if let (200, Some(info)) = self.run_info(id).await {
                if done(&info) {
                    return info;
                }
            }
            assert!(std::time::Instant::now() < deadline, "run {id} never got {what}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// A server whose named runs spill past `run_memory` bytes into a state folder of the test's own (returned with the
/// temporary folder holding it, which must outlive the server), with `more` flags.
async fn spilling_server(run_memory: &str, more: &[(&str, &str)]) -> (TestServer, tempfile::TempDir, PathBuf) {
    let state = tempfile::tempdir().unwrap();
    let state_dir = state.path().join("state");
    let mut builder = server().arg("--state-dir", &state_dir.display().to_string()).arg("--run-memory", run_memory);
    for (flag, value) in more {
        builder = builder.arg(flag, value);
    }
    (builder.start().await, state, state_dir)
}

/// The sizes of the spill files in `state_dir`, smallest first: they have no name there (the folder must be empty),
/// so they are found as the descriptors of this process (the in-process server's) that lead into it.
fn spill_files(state_dir: &std::path::Path) -> Vec<u64> {
    let names: Vec<_> = std::fs::read_dir(state_dir).map(|entries| entries.flatten().collect()).unwrap_or_default();
    assert!(names.is_empty(), "a spill file has a name: {:?}", names.iter().map(|e| e.file_name()).collect::<Vec<_>>());
    let mut sizes: Vec<u64> = std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .flatten()
        .filter(|fd| std::fs::read_link(fd.path()).is_ok_and(|target| target.starts_with(state_dir)))
        .filter_map(|fd| std::fs::metadata(fd.path()).ok().map(|meta| meta.len()))
        .collect();
    sizes.sort_unstable();
    sizes
}

/// The offset of a stdout/stderr frame (named runs always carry it).
fn offset_of(frame: &Frame) -> Option<u64> {
    match frame {
        Frame::Stdout(chunk) | Frame::Stderr(chunk) => Some(chunk.offset.expect("a named run's frame has an offset")),
        _ => None,
    }
}

fn exit_totals(frames: &[Frame]) -> (i32, Option<u64>, Option<u64>) {
    match frames.last() {
        Some(Frame::Exit { data, stdout_bytes, stderr_bytes, .. }) => (*data, *stdout_bytes, *stderr_bytes),
        other => panic!("last frame is not exit: {other:?}"),
    }
}

async fn json_of<T: serde::de::DeserializeOwned>(response: reqwest::Response) -> T {
    serde_json::from_slice(&response.bytes().await.unwrap()).unwrap()
}

fn lines_in(path: &std::path::Path) -> usize {
    std::fs::read_to_string(path).unwrap_or_default().lines().count()
}

/// No client comes back: the run is stopped by the policy once the window has passed, and nothing survives.
#[tokio::test(flavor = "multi_thread")]
async fn a_run_nobody_reattaches_to_is_stopped_after_the_window() {
    let server = server().arg("--reattach-window", "2").start().await;
    let marker = marker();
    let body = json!({"cmd": ["sh", "-c", format!("echo started; {}", sleeper(&marker))], "run_id": "window-1"});
    let mut frames = server.open_stream(body).await;
    frames.until_stdout("started").await;
    wait_for_process(&marker);
    drop(frames);
    // The connection is gone; the run is not: it waits for a client, unattached.
    let info = server.wait_for_run("window-1", "no client", |info| info.attached == 0).await;
    assert_eq!(info.state, RunState::Running);
    assert!(!processes_matching(&marker).is_empty(), "a named run must survive its connection");
    // Window (2 s) + grace (0.5 s) + a generous margin for a loaded machine.
    assert_no_survivors(&marker, Duration::from_secs(15));
    let info = server.wait_for_run("window-1", "its end", |info| info.state != RunState::Running).await;
    assert_eq!(info.state, RunState::Cancelled);
    assert_eq!(info.error.as_deref(), Some("no client reattached within 2 s; the command was stopped"));
    assert_eq!(info.stopped_by, Some(StoppedBy::ReattachWindow));
    // A replay ends with the cause in its exit frame, for a client to match.
    let replay = server.get("/runs/window-1/stream").send().await.unwrap().text().await.unwrap();
    assert!(replay.contains(r#""stopped_by":"reattach_window""#), "{replay}");
    server.stop().await;
}

/// A reattach within the window stops the clock: the command runs on to its own end.
#[tokio::test(flavor = "multi_thread")]
async fn reattaching_within_the_window_keeps_the_run() {
    let server = server().arg("--reattach-window", "2").start().await;
    let gate = server.workspace.path().join("gate");
    mkfifo(&gate);
    let body = json!({"cmd": ["sh", "-c", "echo started; cat gate; echo finished"], "run_id": "window-2"});
    let mut frames = server.open_stream(body).await;
    frames.until_stdout("started").await;
    drop(frames);
    server.wait_for_run("window-2", "no client", |info| info.attached == 0).await;
    // A sentinel left alone after window-2 was: once the window stops it, window-2's own window has passed too
    // (an event, not a sleep that a loaded machine could outrun).
    mkfifo(&server.workspace.path().join("never-opened"));
    let body = json!({"cmd": ["sh", "-c", "echo up; cat never-opened"], "run_id": "sentinel"});
    let mut sentinel = server.open_stream(body).await;
    sentinel.until_stdout("up").await;
    drop(sentinel);
    let mut again = Frames::new(server.get("/runs/window-2/stream?stdout=8").send().await.unwrap());
    server.wait_for_run("window-2", "a client", |info| info.attached == 1).await;
    let stopped = server.wait_for_run("sentinel", "its end", |info| info.state != RunState::Running).await;
    assert_eq!(stopped.stopped_by, Some(StoppedBy::ReattachWindow));
    assert_eq!(server.run_info("window-2").await.1.unwrap().state, RunState::Running);
    tokio::task::spawn_blocking(move || std::fs::write(gate, "go\n")).await.unwrap().unwrap();
    let rest = again.rest().await;
    assert_eq!(rebuild(&rest, true), b"go\nfinished\n");
    assert_eq!(offset_of(&rest[0]), Some(8));
    assert_eq!(exit_totals(&rest), (0, Some(20), Some(0)));
    server.stop().await;
}

/// Two requests with the same id while it runs: one command, and both clients get all of its output.
#[tokio::test(flavor = "multi_thread")]
async fn a_second_post_while_running_attaches_to_the_same_command() {
    let server = server().start().await;
    let gate = server.workspace.path().join("gate");
    mkfifo(&gate);
    let counter = server.workspace.path().join("counter");
    let body =
        json!({"cmd": ["sh", "-c", "echo ran >> counter; echo first; cat gate; echo second"], "run_id": "twice"});
    let mut one = server.open_stream(body.clone()).await;
    let mut seen_one = one.until_stdout("first").await;
    let mut two = server.open_stream(body.clone()).await;
    let mut seen_two = two.until_stdout("first").await;
    let blocking = server.post("/exec", body.to_string()).send();
    tokio::task::spawn_blocking(move || std::fs::write(gate, "go\n")).await.unwrap().unwrap();
    seen_one.extend(one.rest().await);
    seen_two.extend(two.rest().await);
    let reply: protocol::ExecReply = serde_json::from_slice(&blocking.await.unwrap().bytes().await.unwrap()).unwrap();
    let expected = b"first\ngo\nsecond\n";
    assert_eq!(rebuild(&seen_one, true), expected);
    assert_eq!(rebuild(&seen_two, true), expected);
    assert_eq!(reply.stdout_bytes().unwrap().as_ref(), expected);
    assert_eq!(exit_totals(&seen_one), (0, Some(16), Some(0)));
    assert_eq!(lines_in(&counter), 1, "the command ran once");
    server.stop().await;
}

/// After it ended (and while kept), the same request returns the stored result; another command under the id is
/// refused.
#[tokio::test(flavor = "multi_thread")]
async fn a_post_after_the_end_returns_the_stored_result() {
    let server = server().start().await;
    let counter = server.workspace.path().join("counter");
    let body = json!({"cmd": ["sh", "-c", "echo ran >> counter; echo out; echo err >&2; exit 3"], "run_id": "stored"});
    let first = server.exec(body.clone()).await;
    assert_eq!((first.exit_code, first.output.as_str(), first.stderr.as_str()), (3, "out\n", "err\n"));
    let again = server.exec(body.clone()).await;
    assert_eq!((again.exit_code, again.output.as_str(), again.stderr.as_str()), (3, "out\n", "err\n"));
    let frames = server.open_stream(body.clone()).await.rest().await;
    assert_eq!((rebuild(&frames, true), rebuild(&frames, false)), (b"out\n".to_vec(), b"err\n".to_vec()));
    assert_eq!(exit_totals(&frames), (3, Some(4), Some(4)));
    assert_eq!(lines_in(&counter), 1, "the command ran once");

    let other = json!({"cmd": ["sh", "-c", "echo other"], "run_id": "stored"});
    let response = server.post("/exec", other.to_string()).send().await.unwrap();
    assert_eq!(response.status(), 409);
    let error: protocol::ErrorBody = json_of(response).await;
    assert!(error.error.contains("run_id stored already names another command") && error.error.contains("new id"));
    assert_eq!(lines_in(&counter), 1);
    server.stop().await;
}

/// A kept id is never another command's, even when the request's cwd does not exist (it was answered "never
/// started" before, as if the id were free): 409, on both endpoints. The same command in a folder removed since it
/// ran is the same run: it gets the stored result, as any re-POST does.
#[tokio::test(flavor = "multi_thread")]
async fn a_kept_id_is_refused_for_another_command_even_in_a_missing_cwd() {
    let server = server().start().await;
    std::fs::create_dir(server.workspace.path().join("app")).unwrap();
    let body = json!({"cmd": ["sh", "-c", "echo kept; exit 5"], "cwd": "app", "run_id": "kept"});
    assert_eq!(server.exec(body.clone()).await.exit_code, 5);
    for path in ["/exec", "/exec/stream"] {
        for other in [
            json!({"cmd": ["sh", "-c", "echo other"], "cwd": "missing", "run_id": "kept"}),
            json!({"cmd": ["sh", "-c", "echo kept; exit 5"], "cwd": "missing", "run_id": "kept"}),
        ] {
            let response = server.post(path, other.to_string()).send().await.unwrap();
            assert_eq!(response.status(), 409, "{path} {other}");
            let error: protocol::ErrorBody = json_of(response).await;
            assert!(error.error.contains("run_id kept already names another command"), "{}", error.error);
        }
    }
    std::fs::remove_dir(server.workspace.path().join("app")).unwrap();
    let again = server.exec(body.clone()).await;
    assert_eq!((again.exit_code, again.output.as_str(), again.error.as_deref()), (5, "kept\n", None));
    let frames = server.open_stream(body).await.rest().await;
    assert_eq!(exit_totals(&frames), (5, Some(5), Some(0)));
    // An id nothing keeps: the start failure, as before, and nothing kept.
    let fresh = json!({"cmd": ["true"], "cwd": "missing", "run_id": "fresh"});
    assert_eq!(server.exec(fresh).await.exit_code, -1);
    assert!(server.run_info("fresh").await.1.is_none());
    server.stop().await;
}

/// --retain: an ended run is forgotten once it has been kept that long, its spill file with it; a 404 with the
/// code then says so. (That it is kept until then is `a_post_after_the_end_returns_the_stored_result`'s part.)
#[tokio::test(flavor = "multi_thread")]
async fn an_ended_run_is_forgotten_after_retain() {
    // --run-memory 0: every run spills, so that forgetting has a file to remove.
    let (server, _state, state_dir) = spilling_server("0", &[("--retain", "1")]).await;
    let reply = server.exec(json!({"cmd": ["sh", "-c", "head -c 300000 /dev/zero"], "run_id": "brief"})).await;
    assert_eq!(reply.exit_code, 0);
    let spilled = || std::fs::read_dir(&state_dir).unwrap().count();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while server.run_info("brief").await.0 == 200 {
        assert!(std::time::Instant::now() < deadline, "still kept 20 s after its end with --retain 1");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let error: protocol::ErrorBody = json_of(server.get("/runs/brief").send().await.unwrap()).await;
    assert_eq!(error.code, Some(protocol::ErrorCode::RunNotKnown));
    assert_eq!(spilled(), 0, "forgetting removes the spill file");
    server.stop().await;
}

/// A named run's reply keeps what an unnamed one keeps: its log is never smaller than --max-output, even when
/// --run-log-max says less (a raised --max-output once cut named replies at the log's cap).
#[tokio::test(flavor = "multi_thread")]
async fn a_named_reply_keeps_what_max_output_allows() {
    let server = server().arg("--max-output", "4000000").arg("--run-log-max", "1000000").start().await;
    let script = "head -c 3000000 /dev/zero | tr '\\0' a";
    for body in [json!({"cmd": ["sh", "-c", script]}), json!({"cmd": ["sh", "-c", script], "run_id": "big"})] {
        let reply = server.exec(body.clone()).await;
        assert_eq!((reply.output.len(), reply.output_truncated), (3_000_000, false), "{body}");
    }
    server.stop().await;
}

/// Signals reach the whole group: a command that ignores TERM survives it, KILL ends it.
#[tokio::test(flavor = "multi_thread")]
async fn the_signal_endpoint_reaches_the_group() {
    let server = server().start().await;
    let marker = marker();
    let script = format!("trap '' TERM; {} & echo ready; wait", sleeper(&marker));
    let mut frames = server.open_stream(json!({"cmd": ["sh", "-c", script], "run_id": "sig"})).await;
    frames.until_stdout("ready").await;
    wait_for_process(&marker);
    let signal = |name: &str| server.post("/runs/sig/signal", json!({"signal": name}).to_string()).send();
    let response = signal("SEGV").await.unwrap();
    assert_eq!(response.status(), 400);
    assert!(response.text().await.unwrap().contains("TERM, INT, HUP, QUIT, KILL, USR1, USR2, TSTP, STOP, CONT, WINCH"));
    let response = signal("SIGTERM").await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(json_of::<RunInfo>(response).await.state, RunState::Running);
    // TERM is ignored (the run goes on); KILL is not.
    let response = signal("KILL").await.unwrap();
    assert_eq!(response.status(), 200);
    let rest = frames.rest().await;
    assert_eq!(exit_frame(&rest), (137, false, Some(9)));
    assert_no_survivors(&marker, Duration::from_secs(10));
    assert_eq!(signal("TERM").await.unwrap().status(), 409, "an ended run has nothing to signal");
    server.stop().await;
}

/// The list shows every kept run newest first; DELETE cancels a running run by the policy, and forgets an ended
/// one.
#[tokio::test(flavor = "multi_thread")]
async fn runs_are_listed_and_deleted() {
    let server = server().start().await;
    let marker = marker();
    server.exec(json!({"cmd": ["echo", "one"], "run_id": "old"})).await;
    let mut frames = server
        .open_stream(json!({"cmd": ["sh", "-c", format!("echo up; {}", sleeper(&marker))], "run_id": "new"}))
        .await;
    frames.until_stdout("up").await;
    let list: RunList = json_of(server.get("/runs").send().await.unwrap()).await;
    let ids: Vec<&str> = list.runs.iter().map(|run| run.id.as_str()).collect();
    assert_eq!(ids, ["new", "old"]);
    assert_eq!(list.runs[0].state, RunState::Running);
    assert_eq!((list.runs[1].state, list.runs[1].exit_code, list.runs[1].stdout_bytes), (RunState::Exited, Some(0), 4));

    let response = server.delete("/runs/new").send().await.unwrap();
    assert_eq!(response.status(), 200);
    let info: RunInfo = json_of(response).await;
    assert_eq!(info.state, RunState::Cancelled);
    assert_eq!(info.error.as_deref(), Some("cancelled by DELETE /runs/new"));
    assert_eq!(info.stopped_by, Some(StoppedBy::Delete));
    assert_no_survivors(&marker, Duration::from_secs(10));
    let rest = frames.rest().await;
    assert!(
        matches!(&rest[..], [.., Frame::Error { data, .. }, Frame::Exit { stopped_by: Some(StoppedBy::Delete), .. }]
        if data.contains("DELETE"))
    );
    assert_eq!(list.runs[1].stopped_by, None, "a run that ended by itself names no cause");

    assert_eq!(server.delete("/runs/old").send().await.unwrap().status(), 200);
    let (status, _) = server.run_info("old").await;
    assert_eq!(status, 404);
    let error: protocol::ErrorBody = json_of(server.get("/runs/old").send().await.unwrap()).await;
    assert_eq!(error.error, "run old is not known: it never existed or ended more than --retain ago");
    assert_eq!(error.code, Some(protocol::ErrorCode::RunNotKnown));
    assert_eq!(server.delete("/runs/old").send().await.unwrap().status(), 404);
    server.stop().await;
}

/// A command that prints nothing for `idle_timeout` seconds is stopped as timed out, and the error says why.
#[tokio::test(flavor = "multi_thread")]
async fn an_idle_command_is_stopped() {
    let server = server().start().await;
    let marker = marker();
    let script = format!("echo hi; {}", sleeper(&marker));
    let reply = server.exec(json!({"cmd": ["sh", "-c", script], "idle_timeout": 1, "timeout": 600})).await;
    assert_eq!((reply.exit_code, reply.timed_out, reply.output.as_str()), (124, true, "hi\n"));
    assert_eq!(reply.error.as_deref(), Some("command produced no output for 1 s (idle_timeout); it was stopped"));
    assert_no_survivors(&marker, Duration::from_secs(10));
    // One too large to count is cut to the timeout (it overflowed the clock once: found by schemathesis).
    let reply = server.exec(json!({"cmd": ["echo", "x"], "idle_timeout": i64::MAX - 1})).await;
    assert_eq!((reply.exit_code, reply.output.as_str()), (0, "x\n"));
    // Output keeps it going: a line every 0.2 s for 2 s outlives an idle timeout of 1 s.
    let chatty = "for i in 1 2 3 4 5 6 7 8 9 10; do echo $i; sleep 0.2; done";
    let reply = server.exec(json!({"cmd": ["sh", "-c", chatty], "idle_timeout": 1})).await;
    assert_eq!((reply.exit_code, reply.timed_out), (0, false));
    // A named run says it in its state and its error frame.
    let frames =
        server.stream(json!({"cmd": ["sh", "-c", sleeper(&marker)], "idle_timeout": 1, "run_id": "idle"})).await;
    assert!(matches!(&frames[..], [Frame::Error { data, .. },
        Frame::Exit { data: 124, timed_out: true, stopped_by: Some(StoppedBy::IdleTimeout), .. }]
        if data.contains("idle_timeout")));
    let info = server.run_info("idle").await.1.unwrap();
    assert_eq!((info.state, info.stopped_by), (RunState::TimedOut, Some(StoppedBy::IdleTimeout)));
    server.stop().await;
}

/// A reader that stops reading for a while loses nothing, even when the command prints far more than the log's
/// cap meanwhile: the command waits for its followers, as an unnamed stream's does for its client (before, it ran on
/// and the reader found the middle dropped).
#[tokio::test(flavor = "multi_thread")]
async fn a_follower_that_pauses_loses_nothing_the_command_waits_for_it() {
    let server = server().arg("--run-log-max", "600000").arg("--max-output", "600000").start().await;
    // 20 888 897 bytes of numbered lines: 35 times the cap, more than any socket buffers hold.
    let mut frames = server.open_stream(json!({"cmd": ["seq", "1", "3000000"], "run_id": "paced"})).await;
    let first = frames.next().await.unwrap();
    // The client stalls; the command cannot end meanwhile, however long that is. What would come after a run that
    // does not wait for its reader: a command printing twice as much, unnamed on the same server, runs to its end.
    let unnamed = server.exec(json!({"cmd": ["seq", "1", "6000000"]})).await;
    assert_eq!((unnamed.exit_code, unnamed.output_truncated), (0, true));
    // (It may be a few MB ahead of what this client took: the sockets' buffers hold that much.)
    let info = server.run_info("paced").await.1.unwrap();
    assert_eq!(info.state, RunState::Running, "the command ran ahead of its reader: {info:?}");
    let mut all = vec![first];
    all.extend(frames.rest().await);
    assert!(!all.iter().any(|f| matches!(f, Frame::Dropped { .. })), "a follower lost bytes");
    let expected: Vec<u8> = (1..=3_000_000).flat_map(|i: u32| format!("{i}\n").into_bytes()).collect();
    assert!(rebuild(&all, true) == expected, "the stream is not exact");
    assert_eq!(exit_totals(&all), (0, Some(expected.len() as u64), Some(0)));
    // Nobody follows a replay of the ended run: it is read from the log (head and tail of the cap).
    let replay = Frames::new(server.get("/runs/paced/stream").send().await.unwrap()).rest().await;
    assert!(replay.iter().any(|f| matches!(f, Frame::Dropped { offset: 300_000, .. })));
    server.stop().await;
}

/// Starts `body` (a command that writes without pause) as a named run, drops its connection, and once the log holds
/// 16 MiB more than any reader took, attaches a follower from offset 0 that reads its first line and never again:
/// it is behind at once, so the command waits for it from then on. Returns that follower and a reader from where
/// the stream is now, which reads all it is given.
async fn hold_back(
    server: &TestServer,
    id: &str,
    body: serde_json::Value,
) -> (std::io::BufReader<std::net::TcpStream>, Frames) {
    let mut owner = server.open_stream(body).await;
    owner.next().await.unwrap();
    drop(owner);
    let info = server.wait_for_run(id, "16 MiB of output", |info| info.stdout_bytes > 16 << 20).await;
    let mut stuck = raw_get(server.addr, &format!("/runs/{id}/stream"));
    read_until(&mut stuck, "data:");
    let reader =
        Frames::new(server.get(&format!("/runs/{id}/stream?stdout={}", info.stdout_bytes)).send().await.unwrap());
    (stuck, reader)
}

/// `future`'s output, or a panic naming `what` after a minute: for an end that, broken, would never come.
async fn within_a_minute<T>(future: impl std::future::Future<Output = T>, what: &str) -> T {
    tokio::time::timeout(Duration::from_secs(60), future).await.unwrap_or_else(|_| panic!("{what} never came"))
}

/// A follower that stops reading, without leaving, holds a run back only while its command runs on: the timeout
/// ends the run for everyone, its state and its `--max-concurrent` slot with it, and a reader that does read gets
/// the end. Before, the processes were killed at the timeout but the run stayed `running`, kept its slot (the next
/// command got 503) and gave a blocking re-POST its reply only once the stuck reader left.
#[tokio::test(flavor = "multi_thread")]
async fn a_follower_that_stops_reading_does_not_hold_a_run_past_its_timeout() {
    let server = server().arg("--max-concurrent", "1").start().await;
    let marker = marker();
    let body = json!({"cmd": ["yes", marker], "timeout": 4, "run_id": "stuck"});
    let (stuck, mut reader) = hold_back(&server, "stuck", body.clone()).await;
    let frames = within_a_minute(reader.rest(), "the reader's end").await;
    assert!(
        matches!(frames.last(), Some(Frame::Exit { data: 124, stopped_by: Some(StoppedBy::Timeout), .. })),
        "the reader got no end: {:?}",
        frames.last()
    );
    let info = server.wait_for_run("stuck", "its end", |info| info.state != RunState::Running).await;
    assert_eq!(info.state, RunState::TimedOut);
    assert_no_survivors(&marker, Duration::from_secs(10));
    // The slot is free (--max-concurrent 1), and the same request again gets the stored end, while the stuck
    // follower is still connected.
    assert_eq!(server.exec(json!({"cmd": ["true"]})).await.exit_code, 0);
    let again = server.exec(body).await;
    assert_eq!((again.exit_code, again.timed_out), (124, true));
    drop(stuck);
    server.stop().await;
}

/// And when the leader exited by itself while a descendant in its group writes on: what it wrote is drained within
/// the run's timeout, whatever the stuck follower does, and the run ends as the leader did.
#[tokio::test(flavor = "multi_thread")]
async fn a_follower_that_stops_reading_does_not_hold_a_drain_past_the_timeout() {
    let server = server().start().await;
    let marker = marker();
    let script = format!("yes {marker} & while [ ! -e go ]; do sleep 0.05; done");
    let body = json!({"cmd": ["sh", "-c", script], "timeout": 5, "run_id": "drained"});
    let (stuck, mut reader) = hold_back(&server, "drained", body).await;
    // The leader exits now; `yes` holds the pipe, and the stuck follower the run's reading of it.
    std::fs::write(server.workspace.path().join("go"), "").unwrap();
    let frames = within_a_minute(reader.rest(), "the reader's end").await;
    assert!(matches!(frames.last(), Some(Frame::Exit { data: 0, stopped_by: None, .. })), "{:?}", frames.last());
    assert_eq!(server.run_info("drained").await.1.unwrap().state, RunState::Exited);
    assert_no_survivors(&marker, Duration::from_secs(10));
    drop(stuck);
    server.stop().await;
}

/// The same for DELETE and at shutdown: a reader gets the end although another follower of the run stopped reading.
#[tokio::test(flavor = "multi_thread")]
async fn a_follower_that_stops_reading_does_not_hold_a_run_past_a_delete_or_the_shutdown() {
    let server = server().start().await;
    let marker = marker();
    let (stuck, mut reader) = hold_back(&server, "deleted", json!({"cmd": ["yes", marker], "run_id": "deleted"})).await;
    let response = server.delete("/runs/deleted").send().await.unwrap();
    assert_eq!(json_of::<RunInfo>(response).await.state, RunState::Cancelled);
    let frames = within_a_minute(reader.rest(), "the reader's end after DELETE").await;
    assert!(
        matches!(frames.last(), Some(Frame::Exit { stopped_by: Some(StoppedBy::Delete), .. })),
        "{:?}",
        frames.last()
    );
    drop(stuck);

    let (stuck, mut reader) = hold_back(&server, "at-exit", json!({"cmd": ["yes", marker], "run_id": "at-exit"})).await;
    let stopping = tokio::spawn(server.stop());
    let frames = within_a_minute(reader.rest(), "the reader's end at shutdown").await;
    assert!(
        matches!(frames.last(), Some(Frame::Exit { stopped_by: Some(StoppedBy::Shutdown), .. })),
        "{:?}",
        frames.last()
    );
    stopping.await.unwrap();
    assert_no_survivors(&marker, Duration::from_secs(10));
    drop(stuck);
}

/// Replaying from any offsets gives exactly the rest of each stream, binary included, and the frames say where
/// they are.
#[tokio::test(flavor = "multi_thread")]
async fn replay_from_offsets_is_the_exact_rest_of_each_stream() {
    let server = server().start().await;
    let out = random_bytes(700_000, 7);
    let mut err = "é line\n".repeat(20_000).into_bytes();
    err.extend_from_slice(b"no newline at the end");
    std::fs::write(server.workspace.path().join("out.bin"), &out).unwrap();
    std::fs::write(server.workspace.path().join("err.txt"), &err).unwrap();
    let body = json!({"cmd": ["sh", "-c", "cat out.bin; cat err.txt >&2"], "run_id": "replay"});
    let direct = server.open_stream(body).await.rest().await;
    assert!(rebuild(&direct, true) == out && rebuild(&direct, false) == err, "the direct stream is exact");
    assert_eq!(exit_totals(&direct), (0, Some(out.len() as u64), Some(err.len() as u64)));
    // Offsets count every byte, frame after frame.
    let mut next = [0u64; 2];
    for frame in &direct {
        let (index, chunk) = match frame {
            Frame::Stdout(chunk) => (0, chunk),
            Frame::Stderr(chunk) => (1, chunk),
            _ => continue,
        };
        assert_eq!(chunk.offset, Some(next[index]));
        let mut bytes = Vec::new();
        chunk.write_bytes(&mut bytes).unwrap();
        next[index] += bytes.len() as u64;
    }
    for (from_out, from_err) in [(0, 0), (1, 3), (123_457, 7), (699_999, 140_001), (700_000, err.len())] {
        let path = format!("/runs/replay/stream?stdout={from_out}&stderr={from_err}");
        let frames = Frames::new(server.get(&path).send().await.unwrap()).rest().await;
        assert!(rebuild(&frames, true) == out[from_out..], "stdout from {from_out}");
        assert!(rebuild(&frames, false) == err[from_err..], "stderr from {from_err}");
        let first_out = frames.iter().find(|f| matches!(f, Frame::Stdout(_))).and_then(offset_of);
        assert!(first_out.is_none_or(|offset| offset == from_out as u64));
    }
    // Query values are percent-decoded, as the path's id is (`%31%32…` is 123457; `tru%65` is true).
    let encoded =
        Frames::new(server.get("/runs/replay/stream?stdout=%31%32%33%34%35%37&stderr=%37").send().await.unwrap())
            .rest()
            .await;
    assert!(rebuild(&encoded, true) == out[123_457..] && rebuild(&encoded, false) == err[7..], "decoded offsets");
    let response = server.get("/runs/replay/stream?stdout=700000&stderr=0&b64_only=tru%65").send().await.unwrap();
    assert_eq!(response.status(), 200);
    let bad = server.get("/runs/replay/stream?stdout=1%2B1").send().await.unwrap();
    assert_eq!(bad.status(), 400);
    let text = bad.text().await.unwrap();
    assert!(text.contains(r#"stdout=\"1+1\" is not a byte offset"#), "{text}");
    // Past the end: 416 with its code (openapi.json lists it), not a 400 for a request the schema calls valid.
    let response = server.get(&format!("/runs/replay/stream?stdout={}", out.len() + 1)).send().await.unwrap();
    assert_eq!(response.status(), 416);
    let error: protocol::ErrorBody = json_of(response).await;
    assert_eq!(error.code, Some(protocol::ErrorCode::OffsetBeyondEnd));
    assert!(error.error.contains("beyond the 700000 bytes"), "{}", error.error);
    server.stop().await;
}

/// Beyond the memory bound a run's output goes to a file in the state folder, which goes when the run is
/// forgotten; beyond --run-log-max the middle is dropped and announced; the folder goes at exit.
#[tokio::test(flavor = "multi_thread")]
async fn large_output_spills_to_disk_and_is_cleaned_up() {
    // 256 KiB of memory for every run's log: beyond it a stream spills. --max-output as low as the cap: the log is
    // never smaller than --max-output (a named reply keeps what an unnamed one would), so a cap below the default
    // 16 MiB needs it lowered too.
    let (server, _state, state_dir) =
        spilling_server("262144", &[("--run-log-max", "600000"), ("--max-output", "600000")]).await;
    let files = || spill_files(&state_dir);
    assert!(files().is_empty());
    // 500 000 bytes: spilled (beyond 256 KiB), all kept (under the cap).
    let spilled = "seq 1 500000 | head -c 500000";
    let reply = server.exec(json!({"cmd": ["sh", "-c", spilled], "run_id": "spill"})).await;
    assert_eq!(reply.output.len(), 500_000);
    let after_spill = files();
    assert_eq!(after_spill, [500_000], "one spill file, without a name");
    assert_eq!(std::fs::metadata(&state_dir).unwrap().permissions().mode() & 0o777, 0o700);

    // 2 000 000 bytes over a cap of 600 000: head 300 000, tail 300 000, 1 400 000 dropped and announced.
    let capped = "seq 1 1000000 | head -c 2000000";
    // /exec of a named run: head and tail of the stored log, its own dropped middle counted in the cut.
    let reply = server.exec(json!({"cmd": ["sh", "-c", capped], "run_id": "capped"})).await;
    assert!(reply.output_truncated && reply.output.contains("bytes dropped"));
    // Replayed once it ended (a live reader may get ahead of the cut, and see more of the middle).
    let frames = Frames::new(server.get("/runs/capped/stream").send().await.unwrap()).rest().await;
    let all: Vec<u8> = (1..=1_000_000).flat_map(|i: u32| format!("{i}\n").into_bytes()).take(2_000_000).collect();
    let dropped: Vec<&Frame> = frames.iter().filter(|f| matches!(f, Frame::Dropped { .. })).collect();
    assert!(matches!(dropped[..], [Frame::Dropped { offset: 300_000, bytes: 1_400_000, .. }]), "{dropped:?}");
    let kept = rebuild(&frames, true);
    assert!(kept[..300_000] == all[..300_000] && kept[300_000..] == all[1_700_000..]);
    assert_eq!(exit_totals(&frames), (0, Some(2_000_000), Some(0)));
    let info = server.run_info("capped").await.1.unwrap();
    assert_eq!((info.stdout_bytes, info.dropped_bytes), (2_000_000, 1_400_000));
    let sizes = files();
    assert!(sizes.len() == 2 && sizes.iter().all(|size| *size <= 600_000), "the cap bounds the file: {sizes:?}");

    assert_eq!(server.delete("/runs/spill").send().await.unwrap().status(), 200);
    // Its descriptor is closed on a blocking thread (freeing a large file's pages takes a while).
    wait_until("forgetting to remove the spill file", || files().len() == 1);
    assert_ne!(files(), [500_000]);
    server.stop().await;
    assert!(!state_dir.exists(), "the state folder is removed at exit");
}

/// A run that ended while its client was away, then was forgotten to make room (`--max-runs 3`, three newer runs)
/// before its `--retain` was up, is not "unknown" (which a client reads as "run it again"): every request for it gets
/// 410 with `run_forgotten` and how it ended, a re-POST of the same command starts nothing, another command under
/// the id is a conflict. Before, it was 404 `run_not_known`, and the re-POST ran the command a second time.
#[tokio::test(flavor = "multi_thread")]
async fn a_run_forgotten_for_room_is_gone_with_its_end_never_unknown() {
    let server = server().arg("--max-runs", "3").start().await;
    let workspace = server.workspace.path();
    let body = json!({"cmd": ["sh", "-c", "echo ran >> counter; while [ ! -e go ]; do sleep 0.05; done"],
                      "run_id": "away"});
    // The client goes while its run goes on (it is back within the window, below, but too late for the result).
    let owner = server.open_stream(body.clone()).await;
    wait_until("the command to start", || workspace.join("counter").exists());
    drop(owner);
    std::fs::write(workspace.join("go"), "").unwrap();
    server.wait_for_run("away", "its end", |info| info.state == RunState::Exited).await;
    for id in ["one", "two", "three"] {
        assert_eq!(server.exec(json!({"cmd": ["true"], "run_id": id})).await.exit_code, 0);
    }
    let gone = |response: reqwest::Response| async move {
        assert_eq!(response.status(), 410);
        let error: protocol::ErrorBody = json_of(response).await;
        assert_eq!(error.code, Some(protocol::ErrorCode::RunForgotten), "{}", error.error);
        assert!(
            error.error.contains("exited with exit code 0") && error.error.contains("no longer kept"),
            "{}",
            error.error
        );
        assert!(!error.error.contains("again") || error.error.contains("not started again"), "{}", error.error);
    };
    gone(server.get("/runs/away").send().await.unwrap()).await;
    gone(server.get("/runs/away/stream?stdout=4").send().await.unwrap()).await;
    gone(server.post("/exec/stream", body.to_string()).send().await.unwrap()).await;
    gone(server.post("/exec", body.to_string()).send().await.unwrap()).await;
    assert_eq!(lines_in(&workspace.join("counter")), 1, "the command ran once");
    let other = json!({"cmd": ["true"], "run_id": "away"});
    let response = server.post("/exec", other.to_string()).send().await.unwrap();
    assert_eq!(response.status(), 409);
    let error: protocol::ErrorBody = json_of(response).await;
    assert!(error.error.contains("run_id away already names another command") && error.error.contains("new id"));
    // The newer runs are kept as before, and the list holds only kept runs.
    assert_eq!(server.run_info("three").await.0, 200);
    let list: RunList = json_of(server.get("/runs").send().await.unwrap()).await;
    assert_eq!(list.runs.len(), 3);
    server.stop().await;
}

/// After `--retain` a forgotten run's id is free again, as a kept run's is: unknown, and a POST starts it anew.
#[tokio::test(flavor = "multi_thread")]
async fn a_forgotten_runs_id_is_free_once_its_retention_ended() {
    let server = server().arg("--max-runs", "1").arg("--retain", "1").start().await;
    let body = json!({"cmd": ["sh", "-c", "echo ran >> counter"], "run_id": "old"});
    server.exec(body.clone()).await;
    server.exec(json!({"cmd": ["true"], "run_id": "new"})).await;
    assert_eq!(server.get("/runs/old").send().await.unwrap().status(), 410);
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while server.get("/runs/old").send().await.unwrap().status() == 410 {
        assert!(std::time::Instant::now() < deadline, "the tombstone outlived --retain");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let response = server.get("/runs/old").send().await.unwrap();
    assert_eq!(response.status(), 404);
    server.exec(body).await;
    assert_eq!(lines_in(&server.workspace.path().join("counter")), 2);
    server.stop().await;
}

/// A spill file that comes back short (cut by something that got to it: only the server can, since it has no name
/// and the server is not dumpable; or a failing disk) ends a replay with an error frame naming it and exit -1, and a
/// re-POST's reply says the same: never a `dropped` frame followed by the command's exit 0, which presented the
/// loss as a complete, successful run. (The in-process server's descriptors are this test's, which is how the test
/// reaches the file.)
#[tokio::test(flavor = "multi_thread")]
async fn a_short_spill_file_ends_the_replay_with_an_error_not_a_dropped_frame() {
    let (server, _state, state_dir) = spilling_server("262144", &[]).await;
    let body = json!({"cmd": ["sh", "-c", "head -c 500000 /dev/zero | tr '\\0' x"], "run_id": "cut"});
    assert_eq!(server.exec(body.clone()).await.output.len(), 500_000);
    let fd = std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .flatten()
        .find(|fd| std::fs::read_link(fd.path()).is_ok_and(|target| target.starts_with(&state_dir)))
        .expect("the spill file's descriptor");
    std::fs::OpenOptions::new().write(true).open(fd.path()).unwrap().set_len(100_000).unwrap();

    let frames = Frames::new(server.get("/runs/cut/stream").send().await.unwrap()).rest().await;
    assert!(!frames.iter().any(|f| matches!(f, Frame::Dropped { .. })), "a dropped frame: {:?}", frames.last());
    let [.., Frame::Error { data, .. }, Frame::Exit { data: -1, stdout_bytes: Some(500_000), .. }] = &frames[..] else {
        panic!("no error and exit -1 at the end: {:?}", &frames[frames.len().saturating_sub(2)..]);
    };
    assert!(data.contains("cannot read run cut's kept stdout from byte 65536") && data.contains("lost"), "{data}");
    assert!(data.contains("the spill file ends before byte 131072"), "{data}");
    assert!(rebuild(&frames, true).len() <= 100_000);
    let again = server.exec(body).await;
    assert_eq!(again.exit_code, -1);
    assert!(again.error.as_deref().is_some_and(|error| error.contains("cannot read run cut's kept stdout")));
    server.stop().await;
}

/// A run keeps a bounded part of its argv, whatever the request held (up to the 1 MiB of a body): `GET /runs` shows
/// it cut where it says so, and the id still names exactly that command (the same request again attaches, one that
/// differs only in the part cut away is a conflict). Before, every kept run held its whole argv outside
/// `--run-memory` (7 × 127 KiB here), and the list sent all of it for every run.
#[tokio::test(flavor = "multi_thread")]
async fn a_kept_run_holds_a_bounded_part_of_its_argv() {
    let server = server().start().await;
    // Just under the kernel's 128 KiB limit on one argument.
    let big = "a".repeat(127 << 10);
    let mut cmd = vec!["sh".to_string(), "-c".into(), "echo ran >> counter".into()];
    cmd.extend((0..7).map(|i| format!("{i}{big}")));
    let body = json!({"cmd": cmd, "run_id": "long"});
    assert_eq!(server.exec(body.clone()).await.exit_code, 0);
    let response = server.get("/runs").send().await.unwrap();
    let listed = response.bytes().await.unwrap();
    assert!(listed.len() < 8 << 10, "GET /runs sent {} bytes for one run", listed.len());
    let list: RunList = serde_json::from_slice(&listed).unwrap();
    let argv = &list.runs[0].argv;
    assert_eq!(argv[..3], cmd[..3]);
    assert!(argv[3].starts_with("0aaa") && argv[3].ends_with(" bytes cut]"), "{}", &argv[3][argv[3].len() - 40..]);
    assert_eq!(argv.last().unwrap(), "…[6 more arguments]");
    // The same command again: the stored result, not a second run; one changed at its very end: 409.
    assert_eq!(server.exec(body).await.exit_code, 0);
    assert_eq!(lines_in(&server.workspace.path().join("counter")), 1);
    cmd.last_mut().unwrap().push('b');
    let response = server.post("/exec", json!({"cmd": cmd, "run_id": "long"}).to_string()).send().await.unwrap();
    assert_eq!(response.status(), 409);
    let error: protocol::ErrorBody = json_of(response).await;
    assert!(error.error.len() < 8 << 10 && error.error.contains("bytes cut]"), "{} bytes", error.error.len());
    server.stop().await;
}

/// 1000 short named runs, a tenth of them spilling: the registry and the state folder stay within --max-runs.
/// Memory is measured where it can be (this server shares its process with the other tests running beside it, so
/// its resident set says nothing): bench/faults.py `named_runs_abuse` runs 1000 named runs against a release server
/// process of its own and checks that its RSS stays flat.
#[tokio::test(flavor = "multi_thread")]
async fn a_thousand_runs_stay_within_max_runs() {
    let (server, _state, state_dir) = spilling_server("262144", &[("--max-runs", "20")]).await;
    let mut most_files = 0;
    for i in 0..1000 {
        let cmd = if i % 10 == 0 { "head -c 300000 /dev/zero" } else { "echo short" };
        let reply = server.exec(json!({"cmd": ["sh", "-c", cmd], "run_id": format!("run-{i}")})).await;
        assert_eq!(reply.exit_code, 0);
        most_files = most_files.max(spill_files(&state_dir).len());
    }
    let list: RunList = json_of(server.get("/runs").send().await.unwrap()).await;
    assert_eq!(list.runs.len(), 20, "--max-runs bounds the registry");
    assert_eq!(list.runs[0].id.as_str(), "run-999");
    assert!(most_files <= 2 * 20, "the state folder held {most_files} files");
    server.stop().await;
    assert!(!state_dir.exists());
}

/// A run_id that is too long, empty, or could name a path is refused with the rule.
#[tokio::test(flavor = "multi_thread")]
async fn abusive_run_ids_are_refused() {
    let server = server().token("secret").start().await;
    for bad in ["a".repeat(65), "../x".to_string(), String::new(), "a/b".to_string(), " x".to_string()] {
        for path in ["/exec", "/exec/stream"] {
            let body = json!({"cmd": ["true"], "run_id": bad});
            let response = server.post(path, body.to_string()).send().await.unwrap();
            assert_eq!(response.status(), 400, "{bad:?} on {path}");
            let error: protocol::ErrorBody = json_of(response).await;
            assert!(error.error.contains("run_id") && error.error.contains("UUID"), "{}", error.error);
        }
    }
    let long = "a".repeat(65);
    assert_eq!(server.get(&format!("/runs/{long}")).send().await.unwrap().status(), 400);
    assert_eq!(server.get("/runs/..%2Fx/stream").send().await.unwrap().status(), 400);
    // Like /exec, the runs need the token.
    let anonymous = server.client().get(format!("{}/runs", server.url)).send().await.unwrap();
    assert_eq!(anonymous.status(), 401);
    server.stop().await;
}

/// Requests without a run_id are as before: no offsets, no totals, no registry entry.
#[tokio::test(flavor = "multi_thread")]
async fn unnamed_requests_are_unchanged() {
    let server = server().start().await;
    let response = server.post("/exec/stream", json!({"cmd": ["echo", "hi"]}).to_string()).send().await.unwrap();
    let body = response.text().await.unwrap();
    assert!(body.starts_with("data: {\"type\":\"stdout\",\"data\":\"hi\"}\n\ndata: {\"type\":\"exit\",\"data\":0,"));
    assert!(!body.contains("offset") && !body.contains("stdout_bytes"), "{body}");
    let list: RunList = json_of(server.get("/runs").send().await.unwrap()).await;
    assert!(list.runs.is_empty());
    server.stop().await;
}

/// `b64_only` belongs to the reader, not the run, named runs included: a named run's frames with offsets, its
/// replay (`GET /runs/{id}/stream?b64_only=true`) and its stored `/exec` reply carry binary output as base64 alone
/// for a reader that asked, and with its lossy twin for one that did not; offsets and bytes are the same either way.
#[tokio::test(flavor = "multi_thread")]
async fn b64_only_is_each_readers_choice_on_a_named_run() {
    let server = server().start().await;
    let cmd = json!(["sh", "-c", "printf 'text\\n'; printf '\\377\\376bin\\n'; printf '\\377' >&2"]);
    let expected = b"text\n\xff\xfebin\n".to_vec();
    let only = server.open_stream(json!({"cmd": cmd, "run_id": "bin", "b64_only": true})).await.rest().await;
    let replay_only = Frames::new(server.get("/runs/bin/stream?b64_only=true").send().await.unwrap()).rest().await;
    let replay_twin = Frames::new(server.get("/runs/bin/stream?stdout=5").send().await.unwrap()).rest().await;
    // The `data` of each frame that needed base64 (how the bytes split into frames depends on the pipe's reads).
    let binary = |frames: &[Frame]| -> Vec<String> {
        frames
            .iter()
            .filter_map(|frame| match frame {
                Frame::Stdout(chunk) | Frame::Stderr(chunk) if chunk.b64.is_some() => Some(chunk.data.clone()),
                _ => None,
            })
            .collect()
    };
    for frames in [&only, &replay_only] {
        assert_eq!(rebuild(frames, true), expected);
        assert_eq!(rebuild(frames, false), b"\xff");
        let data = binary(frames);
        assert!(data.len() >= 2 && data.iter().all(String::is_empty), "{frames:?}");
        assert!(frames.iter().all(|frame| offset_of(frame).is_some() || matches!(frame, Frame::Exit { .. })));
        assert_eq!(exit_totals(frames), (0, Some(11), Some(1)));
    }
    assert_eq!(rebuild(&replay_twin, true), &expected[5..]);
    let data = binary(&replay_twin);
    assert!(data.len() >= 2 && data.iter().all(|data| data.contains('\u{FFFD}')), "{replay_twin:?}");

    // The stored reply: the same header and fields as a fresh one.
    let request = json!({"cmd": cmd, "run_id": "bin", "b64_only": true}).to_string();
    let response = server.post("/exec", request).send().await.unwrap();
    assert_eq!(response.headers().get(protocol::B64_ONLY_HEADER).map(|v| v.as_bytes()), Some(&b"1"[..]));
    let reply: protocol::ExecReply = json_of(response).await;
    assert_eq!((reply.output.as_str(), reply.stderr.as_str()), ("", ""));
    assert_eq!(
        (reply.stdout_bytes().unwrap().as_ref(), reply.stderr_bytes().unwrap().as_ref()),
        (&expected[..], &b"\xff"[..])
    );

    let response = server.get("/runs/bin/stream?b64_only=yes").send().await.unwrap();
    assert_eq!(response.status(), 400);
    let error: protocol::ErrorBody = json_of(response).await;
    assert!(error.error.contains("b64_only=\"yes\""), "{}", error.error);
    server.stop().await;
}

/// A `b64_only` reply whose stdout was cut (head, marker, tail) says where the head ends, and the head is exactly
/// the command's first bytes: a client writing stdout as it arrives stops there, so a resume goes on from it.
#[tokio::test(flavor = "multi_thread")]
async fn a_cut_b64_only_reply_says_where_its_head_ends() {
    let server = server().arg("--max-output", "4096").start().await;
    let script = "awk 'BEGIN { for (i = 1; i <= 2000; i++) printf \"line %06d\\n\", i }'";
    let direct = std::process::Command::new("sh").args(["-c", script]).output().unwrap().stdout;
    for run_id in [None, Some("cut")] {
        let mut request = json!({"cmd": ["sh", "-c", script], "b64_only": true});
        if let Some(id) = run_id {
            request["run_id"] = json!(id);
        }
        let response = server.post("/exec", request.to_string()).send().await.unwrap();
        let head: usize = response.headers()[protocol::OUTPUT_HEAD_HEADER].to_str().unwrap().parse().unwrap();
        let reply: protocol::ExecReply = json_of(response).await;
        assert!(reply.output_truncated);
        let output = reply.output.as_bytes();
        assert!(0 < head && head < output.len(), "head {head} of {}", output.len());
        assert_eq!(&output[..head], &direct[..head], "run_id {run_id:?}");
        assert!(output[head..].starts_with("\n[\u{2026} ".as_bytes()), "run_id {run_id:?}");
    }
    // Without b64_only, or uncut: no such header.
    let response = server.post("/exec", json!({"cmd": ["sh", "-c", script]}).to_string()).send().await.unwrap();
    assert!(response.headers().get(protocol::OUTPUT_HEAD_HEADER).is_none());
    let response = server.post("/exec", json!({"cmd": ["echo", "hi"], "b64_only": true}).to_string()).send().await;
    assert!(response.unwrap().headers().get(protocol::OUTPUT_HEAD_HEADER).is_none());
    server.stop().await;
}

/// The exit frame of a named run names what stopped it: its timeout here, the shutdown there, so a client can tell
/// them apart without reading the message.
#[tokio::test(flavor = "multi_thread")]
async fn the_exit_frame_names_the_timeout_and_the_shutdown() {
    let server = server().start().await;
    let marker = marker();
    let frames = server.stream(json!({"cmd": ["sh", "-c", sleeper(&marker)], "timeout": 1, "run_id": "slow"})).await;
    assert!(
        matches!(frames.last(), Some(Frame::Exit { data: 124, stopped_by: Some(StoppedBy::Timeout), .. })),
        "{frames:?}"
    );
    let mut frames = server
        .open_stream(json!({"cmd": ["sh", "-c", format!("echo up; {}", sleeper(&marker))], "run_id": "last"}))
        .await;
    frames.until_stdout("up").await;
    let stopping = tokio::spawn(server.stop());
    let rest = frames.rest().await;
    assert!(matches!(rest.last(), Some(Frame::Exit { stopped_by: Some(StoppedBy::Shutdown), .. })), "{rest:?}");
    stopping.await.unwrap();
    assert_no_survivors(&marker, Duration::from_secs(10));
}

/// A named run's `/exec` reply says the server keeps it (`x-run-kept: 1`, so a client that has it all may forget
/// it); an unnamed one does not.
#[tokio::test(flavor = "multi_thread")]
async fn a_named_reply_says_the_run_is_kept_an_unnamed_one_does_not() {
    let server = server().start().await;
    let kept = |response: &reqwest::Response| response.headers().get(protocol::RUN_KEPT_HEADER).cloned();
    let named = server.post("/exec", json!({"cmd": ["true"], "run_id": "kept"}).to_string()).send().await.unwrap();
    assert_eq!(kept(&named).as_ref().map(|v| v.as_bytes()), Some(&b"1"[..]));
    let unnamed = server.post("/exec", json!({"cmd": ["true"]}).to_string()).send().await.unwrap();
    assert_eq!(kept(&unnamed), None);
    server.stop().await;
}
