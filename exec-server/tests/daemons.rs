//! Build daemons (docs/exec-server.md, "Daemons"): a session a command left behind that looks like a daemon (its own
//! session, a listening socket, none of the command's pipes, a command that ended by itself) is kept, as a native build
//! leaves its Gradle server running; anything else is swept as before, and every way a command is stopped, the bounds
//! on kept daemons and the shutdown still leave nothing behind.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use protocol::Info;
use serde_json::json;

use crate::support::*;

/// A daemon of our own, as Gradle's client starts one: the command forks, the child calls `setsid`, points its
/// stdio at /dev/null (closing the command's pipes), listens on a UNIX socket, and says it is up; the command waits
/// for that, prints `daemon-up` and exits 0. `spawn N` on the socket forks a child (which leaves the session too)
/// that sleeps N. Modes: `no-listen` (a setsid process without a socket), `hold-stdout` (one that keeps the
/// command's stdout).
const DAEMON: &str = r#"
import os, socket, sys, time
path, marker = sys.argv[1], sys.argv[2]
mode = sys.argv[3] if len(sys.argv) > 3 else "daemon"
ready = path + ".ready"
if os.fork():
    while not os.path.exists(ready):
        time.sleep(0.01)
    print("daemon-up", flush=True)
    sys.exit(0)
os.setsid()
null = os.open(os.devnull, os.O_RDWR)
os.dup2(null, 0)
if mode != "hold-stdout":
    os.dup2(null, 1)
os.dup2(null, 2)
if mode != "no-listen":
    server = socket.socket(socket.AF_UNIX)
    server.bind(path)
    server.listen()
open(ready, "w").close()
while mode == "no-listen":
    time.sleep(1)
while True:
    connection, _ = server.accept()
    line = connection.makefile().readline().strip()
    if line.startswith("spawn ") and os.fork() == 0:
        os.setsid()
        os.execvp("sleep", ["sleep", line[6:]])
    connection.sendall(b"pong %d\n" % os.getpid())
    connection.close()
"#;

/// The daemon program in `workspace`, and the argv that starts one on socket `name` carrying `marker`.
fn daemon(workspace: &Path, name: &str, marker: &str, mode: &str) -> (Vec<String>, PathBuf) {
    let script = workspace.join("daemon.py");
    std::fs::write(&script, DAEMON).unwrap();
    let socket = workspace.join(name);
    let argv = ["python3", "daemon.py", name, marker, mode].map(str::to_owned).to_vec();
    (argv, socket)
}

/// A line from the daemon on `socket` (`pong PID`), after sending `line`.
fn ask(socket: &Path, line: &str) -> String {
    let mut stream = UnixStream::connect(socket).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    writeln!(stream, "{line}").unwrap();
    let mut answer = String::new();
    BufReader::new(stream).read_line(&mut answer).unwrap();
    answer
}

impl TestServer {
    async fn info(&self) -> Info {
        let response = self.client().get(format!("{}/info", self.url)).send().await.unwrap();
        serde_json::from_slice(&response.bytes().await.unwrap()).unwrap()
    }

    /// Waits (on the server's answers) until it keeps `count` daemons.
    async fn wait_for_kept(&self, count: usize) {
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while self.info().await.daemons_kept != Some(count) {
            assert!(std::time::Instant::now() < deadline, "the server never kept {count} daemons");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

async fn metric(server: &TestServer, series: &str) -> f64 {
    value(&scrape(server, None).await.1, series)
}

fn gone(marker: &str) {
    assert_no_survivors(marker, Duration::from_secs(20));
}

/// Kept after its command exited 0: it answers on its socket while later commands come and go (their own escapees
/// are still ended, stopping one that used it leaves it alone), and the shutdown ends it with what it forked
/// since.
#[tokio::test(flavor = "multi_thread")]
async fn a_daemon_is_kept_after_its_command_and_ended_at_shutdown() {
    let server = server().start().await;
    let mark = marker();
    let (argv, socket) = daemon(server.workspace.path(), "d.sock", &mark, "daemon");
    let reply = server.exec(json!({"cmd": argv})).await;
    assert_eq!((reply.exit_code, reply.output.as_str()), (0, "daemon-up\n"));
    server.wait_for_kept(1).await;
    assert!(ask(&socket, "ping").starts_with("pong "));
    assert_eq!(metric(&server, "exec_server_daemons_kept").await, 1.0);
    // A later command's escapee (no socket) is ended as before; the daemon is not.
    let stray = marker();
    let script = format!("setsid sleep {stray} </dev/null >/dev/null 2>&1 & echo started");
    assert_eq!(server.exec(json!({"cmd": ["sh", "-c", script]})).await.exit_code, 0);
    gone(&stray);
    // A command stopped (DELETE) once it has used it: its own escapee goes, the daemon it used stays. (Stopped on
    // the event of its use, not by a timeout, which a loaded machine can reach before python3 has even started.)
    let stray = marker();
    let ping = "import socket, sys\ns = socket.socket(socket.AF_UNIX)\ns.connect(sys.argv[1])\ns.sendall(b'ping\\n')\nprint(s.recv(99).decode().strip(), flush=True)\n";
    std::fs::write(server.workspace.path().join("ping.py"), ping).unwrap();
    let script = format!("setsid sleep {stray} </dev/null >/dev/null 2>&1 & python3 ping.py d.sock; sleep 60");
    let mut frames = server.open_stream(json!({"cmd": ["sh", "-c", script], "run_id": "user-d"})).await;
    frames.until_stdout("pong").await;
    wait_for_process(&stray);
    let response = server.client().delete(format!("{}/runs/user-d", server.url)).send().await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(exit_frame(&frames.rest().await).0, 143, "stopped by the policy's TERM");
    gone(&stray);
    assert!(ask(&socket, "ping").starts_with("pong "), "a stopped command's sweep leaves an earlier daemon alone");
    assert_eq!(server.info().await.daemons_kept, Some(1));
    // What it forks later (even out of its session) carries the tag of the command that started it.
    let child = marker();
    ask(&socket, &format!("spawn {child}"));
    wait_for_process(&child);
    server.stop().await;
    gone(&mark);
    gone(&child);
}

/// A setsid process without a socket, and one that keeps the command's stdout, are no daemons: ended as before.
#[tokio::test(flavor = "multi_thread")]
async fn what_does_not_look_like_a_daemon_is_ended_as_before() {
    let server = server().start().await;
    for mode in ["no-listen", "hold-stdout"] {
        let mark = marker();
        let (argv, _) = daemon(server.workspace.path(), &format!("{mode}.sock"), &mark, mode);
        let reply = server.exec(json!({"cmd": argv})).await;
        assert_eq!(reply.exit_code, 0, "{mode}");
        gone(&mark);
    }
    assert_eq!(server.info().await.daemons_kept, Some(0));
    server.stop().await;
}

/// A command that did not end by itself keeps nothing it started; nor does one whose request or server says `end`.
#[tokio::test(flavor = "multi_thread")]
async fn every_stop_and_every_end_switch_still_ends_the_daemon() {
    let server = server().arg("--reattach-window", "1").start().await;
    let workspace = server.workspace.path().to_path_buf();
    let staying = |name: &str, marker: &str| {
        let (argv, _) = daemon(&workspace, name, marker, "daemon");
        json!(["sh", "-c", format!("{}; sleep 60", argv.join(" "))])
    };
    // Timeout: the daemon is seen up before it (5 s: python3 starts in well under that even on a loaded machine;
    // a timeout that came first would fail here, not pass without a daemon).
    let mark = marker();
    let mut frames = server.open_stream(json!({"cmd": staying("t.sock", &mark), "timeout": 5})).await;
    frames.until_stdout("daemon-up").await;
    wait_for_process(&mark);
    assert_eq!(exit_frame(&frames.rest().await), (124, true, Some(15)));
    gone(&mark);
    // DELETE.
    let mark = marker();
    let mut frames = server.open_stream(json!({"cmd": staying("d.sock", &mark), "run_id": "delete-d"})).await;
    frames.until_stdout("daemon-up").await;
    let response = server.client().delete(format!("{}/runs/delete-d", server.url)).send().await.unwrap();
    assert_eq!(response.status(), 200);
    gone(&mark);
    // The reattach window.
    let mark = marker();
    let mut frames = server.open_stream(json!({"cmd": staying("w.sock", &mark), "run_id": "window-d"})).await;
    frames.until_stdout("daemon-up").await;
    drop(frames);
    gone(&mark);
    // The request's "daemons": "end", on a command that ended by itself.
    let mark = marker();
    let (argv, _) = daemon(&workspace, "e.sock", &mark, "daemon");
    assert_eq!(server.exec(json!({"cmd": argv, "daemons": "end"})).await.exit_code, 0);
    gone(&mark);
    assert_eq!(server.info().await.daemons_kept, Some(0));
    let refused = server.post("/exec", json!({"cmd": ["true"], "daemons": "keep"}).to_string()).send().await.unwrap();
    assert_eq!(refused.status(), 400, "a request can only narrow the policy");
    server.stop().await;
    // The server's --daemons end.
    let server = crate::support::server().arg("--daemons", "end").start().await;
    let mark = marker();
    let (argv, _) = daemon(server.workspace.path(), "s.sock", &mark, "daemon");
    assert_eq!(server.exec(json!({"cmd": argv})).await.exit_code, 0);
    gone(&mark);
    assert_eq!(server.info().await.daemons_kept, Some(0));
    server.stop().await;
}

/// `--max-daemons 1`: keeping a second ends the first.
#[tokio::test(flavor = "multi_thread")]
async fn max_daemons_ends_the_oldest() {
    let server = server().arg("--max-daemons", "1").start().await;
    let (first, second) = (marker(), marker());
    let (argv, _) = daemon(server.workspace.path(), "a.sock", &first, "daemon");
    assert_eq!(server.exec(json!({"cmd": argv})).await.exit_code, 0);
    server.wait_for_kept(1).await;
    let (argv, socket) = daemon(server.workspace.path(), "b.sock", &second, "daemon");
    assert_eq!(server.exec(json!({"cmd": argv})).await.exit_code, 0);
    gone(&first);
    assert!(ask(&socket, "ping").starts_with("pong "));
    assert_eq!(server.info().await.daemons_kept, Some(1));
    assert_eq!(metric(&server, "exec_server_daemons_ended_total{reason=\"max_daemons\"}").await, 1.0);
    server.stop().await;
    gone(&second);
}

/// `--daemon-idle`: once no command has run for that long, the kept daemons are ended.
#[tokio::test(flavor = "multi_thread")]
async fn daemon_idle_ends_kept_daemons() {
    let server = server().arg("--daemon-idle", "1").start().await;
    let mark = marker();
    let (argv, _) = daemon(server.workspace.path(), "i.sock", &mark, "daemon");
    assert_eq!(server.exec(json!({"cmd": argv})).await.exit_code, 0);
    gone(&mark);
    assert_eq!(
        metric(&server, "exec_server_daemons_ended_total{reason=\"daemon_idle\"}").await,
        1.0,
        "kept, then idle"
    );
    assert_eq!(server.info().await.daemons_kept, Some(0));
    server.stop().await;
}
