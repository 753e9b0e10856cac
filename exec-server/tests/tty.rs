//! TTY runs (docs/exec-server.md, "TTY runs"): a request with `tty` runs its command on a pseudo-terminal of that size,
//! as its controlling terminal, its output one stream sent as it comes, its keystrokes through `POST /runs/{id}/stdin`,
//! its size changed by `POST /runs/{id}/resize`; and everything a run has (the policy, timeouts, exit codes, replay)
//! holds.
//! "As native" means: the same program on a pty opened here, its bytes compared.

use std::time::Duration;

use crate::runs::Frames;
use crate::support::*;
use protocol::{ErrorBody, ErrorCode, Frame, RunInfo, RunState};
use serde_json::json;
use testkit::{native_on_a_pty, wait_until_reading};

/// The screen of a TTY run: its stdout bytes as they come, with waits for what should appear.
struct Screen {
    frames: Frames,
    bytes: Vec<u8>,
    end: Vec<Frame>,
}

impl Screen {
    /// Waits until `needle` is on the screen after `from`; returns where it ends.
    async fn wait_for(&mut self, needle: &str, from: usize) -> usize {
        let needle = needle.as_bytes();
        loop {
            if let Some(at) = self.bytes[from.min(self.bytes.len())..].windows(needle.len()).position(|w| w == needle) {
                return from + at + needle.len();
            }
            let frame = tokio::time::timeout(Duration::from_secs(20), self.frames.next()).await;
            let frame =
                frame.unwrap_or_else(|_| panic!("{needle:?} never came: {:?}", String::from_utf8_lossy(&self.bytes)));
            match frame {
                Some(Frame::Stdout(chunk)) => chunk.write_bytes(&mut self.bytes).unwrap(),
                Some(Frame::Stderr(chunk)) => panic!("a terminal has one stream: {chunk:?}"),
                Some(other) => self.end.push(other),
                None => panic!("the stream ended before {needle:?}: {:?}", String::from_utf8_lossy(&self.bytes)),
            }
        }
    }

    /// The rest, to the exit frame: the whole screen and the exit code.
    async fn finish(mut self) -> (Vec<u8>, i32, Vec<Frame>) {
        let rest = self.frames.rest().await;
        assert!(rest.iter().all(|frame| !matches!(frame, Frame::Stderr(_))), "one stream");
        self.bytes.extend(rebuild(&rest, true));
        self.end.extend(rest);
        let code = exit_frame(&self.end).0;
        (self.bytes, code, self.end)
    }
}

/// A TTY run's keyboard: bytes sent in order, from the offset the server has.
struct Keyboard<'a> {
    server: &'a TestServer,
    id: String,
    offset: u64,
}

impl Keyboard<'_> {
    async fn press(&mut self, keys: &str) {
        self.offset =
            self.server.send_stdin(&self.id, self.offset, keys.as_bytes().to_vec(), false).await.unwrap().received;
    }
}

impl TestServer {
    /// Starts `cmd` on a `rows` × `cols` terminal as run `id`; the server says it is a terminal and its input open.
    async fn on_terminal(&self, id: &str, cmd: serde_json::Value, rows: u16, cols: u16) -> (Screen, Keyboard<'_>) {
        let body = json!({"cmd": cmd, "run_id": id, "tty": {"rows": rows, "cols": cols, "term": "xterm-256color"}});
        let response = self.post("/exec/stream", body.to_string()).send().await.unwrap();
        assert_eq!(response.headers().get(protocol::TTY_HEADER).map(|v| v.as_bytes()), Some(&b"1"[..]));
        assert_eq!(response.headers().get(protocol::STDIN_STREAM_HEADER).map(|v| v.as_bytes()), Some(&b"1"[..]));
        let screen = Screen { frames: Frames::new(response), bytes: Vec::new(), end: Vec::new() };
        (screen, Keyboard { server: self, id: id.to_owned(), offset: 0 })
    }

    async fn resize(&self, id: &str, rows: u16, cols: u16) -> Result<RunInfo, (u16, ErrorBody)> {
        let body = json!({"rows": rows, "cols": cols}).to_string();
        let response = self.post(&format!("/runs/{id}/resize"), body).send().await.unwrap();
        let status = response.status().as_u16();
        let bytes = response.bytes().await.unwrap();
        match status {
            200 => Ok(serde_json::from_slice(&bytes).unwrap()),
            _ => Err((status, serde_json::from_slice(&bytes).unwrap())),
        }
    }
}

/// What a program sees of its terminal: every stream a tty, the size, TERM, its session and group its own; the
/// same bytes as on a pty opened here. A resize reaches it as SIGWINCH, and `stty size` says the new size.
#[tokio::test(flavor = "multi_thread")]
async fn the_command_gets_a_terminal_of_its_size_and_a_resize_reaches_it() {
    let server = server().start().await;
    let probe = "import os, sys\n\
                 print([f.isatty() for f in (sys.stdin, sys.stdout, sys.stderr)], os.environ['TERM'], os.get_terminal_size())\n\
                 print(os.getsid(0) == os.getpid() == os.getpgrp(), os.tcgetpgrp(0) == os.getpid())\n";
    let argv = ["python3", "-c", probe];
    let (native, native_code) = native_on_a_pty(&argv, 30, 100).await;
    let (screen, _) = server.on_terminal("tty-probe", json!(argv), 30, 100).await;
    let (forwarded, code, _) = screen.finish().await;
    assert_eq!((String::from_utf8(forwarded).unwrap(), code), (String::from_utf8(native).unwrap(), native_code));
    assert_eq!(code, 0);

    let script = "import os, signal, sys\n\
                  signal.signal(signal.SIGWINCH, lambda n, f: print('winch', *os.get_terminal_size(), flush=True))\n\
                  print('ready', flush=True)\n\
                  while True:\n    line = sys.stdin.readline().strip()\n    if line == 'stty': os.system('stty size')\n    if line == 'quit': sys.exit(0)\n";
    // Not input(): GNU readline defers a SIGWINCH handler until the line is read; a plain read runs it at once.
    let marker = marker();
    let (mut screen, mut keys) =
        server.on_terminal("tty-resize", json!(["python3", "-c", script, marker]), 30, 100).await;
    let at = screen.wait_for("ready\r\n", 0).await;
    // A narrower window than the REPL's (python looks at its signal flags again once `print` returns, so only a
    // SIGWINCH between that look and the `read` waits for a key), never seen failing, but the same one.
    wait_until_reading(&marker).await;
    let info = server.resize("tty-resize", 40, 120).await.unwrap();
    assert!(info.tty && info.state == RunState::Running);
    let at = screen.wait_for("winch 120 40\r\n", at).await;
    keys.press("stty\r").await;
    let at = screen.wait_for("\r\n40 120\r\n", at).await;
    keys.press("quit\r").await;
    screen.wait_for("quit\r\n", at).await;
    let (_, code, _) = screen.finish().await;
    assert_eq!(code, 0);
    let listed: protocol::RunList =
        serde_json::from_slice(&server.get("/runs").send().await.unwrap().bytes().await.unwrap()).unwrap();
    assert!(listed.runs.iter().any(|run| run.id.as_str() == "tty-resize" && run.tty));
    server.stop().await;
}

/// An interactive python3: `1+1` gives 2, Ctrl-C at the prompt a KeyboardInterrupt and a new prompt (not an exit),
/// Ctrl-D exits 0. The bytes the line discipline turns into signals and EOF arrive as bytes.
#[tokio::test(flavor = "multi_thread")]
async fn a_python_repl_takes_keys_as_a_terminal_does() {
    let server = server().start().await;
    // `-X <marker>`: an option python keeps in sys._xoptions and otherwise ignores, to find the process by.
    let marker = marker();
    let (mut screen, mut keys) = server.on_terminal("tty-repl", json!(["python3", "-q", "-X", marker]), 24, 80).await;
    let at = screen.wait_for(">>> ", 0).await;
    keys.press("1+1\r").await;
    // In steps: readline may put escape sequences (bracketed paste) around what it prints.
    let at = screen.wait_for("1+1\r\n", at).await;
    let at = screen.wait_for("2\r\n", at).await;
    let at = screen.wait_for(">>> ", at).await;
    // The connection drops: the session goes on, and a reader that comes back from the offset it has sees the
    // rest, nothing twice.
    let seen = screen.bytes[..at].to_vec();
    drop(screen);
    server.wait_for_run("tty-repl", "its reader gone", |info| info.attached == 0).await;
    let again = server.get(&format!("/runs/tty-repl/stream?stdout={at}")).send().await.unwrap();
    let mut screen = Screen { frames: Frames::new(again), bytes: seen, end: Vec::new() };
    // Ctrl-C when python reads its keys at the prompt, as a person's comes (see `testkit::wait_until_reading`).
    wait_until_reading(&marker).await;
    keys.press("\u{3}").await;
    let at = screen.wait_for("KeyboardInterrupt\r\n", at).await;
    let at = screen.wait_for(">>> ", at).await;
    keys.press("\u{4}").await;
    let _ = at;
    let (whole, code, _) = screen.finish().await;
    assert_eq!(code, 0, "Ctrl-D at the prompt");
    let replay = server.get("/runs/tty-repl/stream").send().await.unwrap().text().await.unwrap();
    assert_eq!(rebuild(&parse_sse(&replay), true), whole, "the screen as one uncut reader saw it");
    server.stop().await;
}

/// Exit codes as a terminal gives them: 0 and 3 of the command's own, 130 for a Ctrl-C it does not catch, 137 for
/// KILL; each recorded as the command's own end.
#[tokio::test(flavor = "multi_thread")]
async fn exit_codes_are_the_commands() {
    let server = server().start().await;
    for (id, code) in [("tty-0", 0), ("tty-3", 3)] {
        let (screen, _) = server.on_terminal(id, json!(["sh", "-c", format!("exit {code}")]), 24, 80).await;
        assert_eq!(screen.finish().await.1, code);
    }
    let (mut screen, mut keys) =
        server.on_terminal("tty-130", json!(["sh", "-c", "echo ready; exec sleep 30"]), 24, 80).await;
    screen.wait_for("ready\r\n", 0).await;
    keys.press("\u{3}").await;
    let (_, code, frames) = screen.finish().await;
    assert_eq!((code, exit_frame(&frames).2), (130, Some(2)));
    let (mut screen, _) = server.on_terminal("tty-137", json!(["sh", "-c", "echo ready; exec sleep 30"]), 24, 80).await;
    screen.wait_for("ready\r\n", 0).await;
    let response = server.post("/runs/tty-137/signal", json!({"signal": "KILL"}).to_string()).send().await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(screen.finish().await.1, 137);
    let info = server.run_info("tty-137").await.1.unwrap();
    assert_eq!((info.state, info.stopped_by), (RunState::Exited, None));
    server.stop().await;
}

/// An interactive bash ignores SIGTERM and puts its jobs in groups of their own: a timeout still ends it (TERM,
/// grace, KILL) and the job it started (by its tag), and nothing is left.
#[tokio::test(flavor = "multi_thread")]
async fn an_interactive_shell_that_ignores_term_is_still_ended_by_the_policy() {
    let server = server().start().await;
    let marker = marker();
    let body = json!({
        "cmd": ["bash", "--norc", "--noprofile", "-i"],
        "env": {"PS1": "prompt$ "},
        "run_id": "tty-bash",
        "timeout": 3,
        "tty": {"rows": 24, "cols": 80},
    });
    let response = server.post("/exec/stream", body.to_string()).send().await.unwrap();
    let mut screen = Screen { frames: Frames::new(response), bytes: Vec::new(), end: Vec::new() };
    let mut keys = Keyboard { server: &server, id: "tty-bash".into(), offset: 0 };
    let at = screen.wait_for("prompt$ ", 0).await;
    keys.press(&format!("{} &\r", sleeper(&marker))).await;
    // The job's number, then the next prompt (readline wraps prompts in bracketed-paste escapes).
    let at = screen.wait_for("[1] ", at).await;
    screen.wait_for("prompt$ ", at).await;
    wait_for_process(&marker);
    let (_, code, frames) = screen.finish().await;
    assert_eq!(exit_frame(&frames), (124, true, Some(9)), "TERM ignored: KILL after the grace");
    assert_no_survivors(&marker, Duration::from_secs(20));
    server.stop().await;
    let _ = code;
}

/// All a command writes before it exits reaches the client (the master is read to its end, not closed at the
/// leader's exit), exactly as on a pty here; a replay from an offset gives the exact rest.
#[tokio::test(flavor = "multi_thread")]
async fn no_output_is_lost_at_exit_and_a_replay_is_exact() {
    let server = server().start().await;
    let argv = ["python3", "-c", "import sys\nfor i in range(2000): sys.stdout.write('line %d %s\\n' % (i, 'x' * 40))"];
    let (native, _) = native_on_a_pty(&argv, 24, 80).await;
    assert!(native.len() > 90_000);
    for round in 0..5 {
        let id = format!("tty-tail-{round}");
        let (screen, _) = server.on_terminal(&id, json!(argv), 24, 80).await;
        let (forwarded, code, _) = screen.finish().await;
        assert_eq!(code, 0);
        assert!(forwarded == native, "round {round}: {} bytes against {}", forwarded.len(), native.len());
    }
    let replay = server.get("/runs/tty-tail-0/stream?stdout=5000").send().await.unwrap().text().await.unwrap();
    assert_eq!(rebuild(&parse_sse(&replay), true), native[5000..]);
    server.stop().await;
}

/// What only a terminal takes, and what a terminal refuses.
#[tokio::test(flavor = "multi_thread")]
async fn terminal_refusals_name_what_is_wrong() {
    let server = server().start().await;
    let response =
        server.post("/exec", json!({"cmd": ["true"], "tty": {"rows": 1, "cols": 1}}).to_string()).send().await.unwrap();
    assert_eq!(response.status(), 400);
    let plain = server.exec(json!({"cmd": ["true"], "run_id": "not-a-tty"})).await;
    assert_eq!(plain.exit_code, 0);
    let (status, error) = server.resize("not-a-tty", 10, 10).await.unwrap_err();
    assert_eq!((status, error.code), (409, Some(ErrorCode::NotATerminal)));
    let (mut screen, _) =
        server.on_terminal("tty-eof", json!(["sh", "-c", "echo ready; read x; echo got $x"]), 24, 80).await;
    screen.wait_for("ready\r\n", 0).await;
    let (status, error) = server.send_stdin("tty-eof", 0, Vec::new(), true).await.unwrap_err();
    assert_eq!((status, error.code), (409, Some(ErrorCode::StdinIsATerminal)));
    let response = server.post("/runs/tty-eof/resize", "{\"rows\": -1}").send().await.unwrap();
    assert_eq!(response.status(), 400);
    server.send_stdin("tty-eof", 0, b"abc\r".to_vec(), false).await.unwrap();
    let at = screen.wait_for("got abc\r\n", 0).await;
    let _ = at;
    assert_eq!(screen.finish().await.1, 0);
    let (status, _) = server.resize("tty-eof", 10, 10).await.unwrap_err();
    assert_eq!(status, 409, "an ended run's terminal is gone");
    server.stop().await;
}

/// Reads run `id`'s stream from `url` (a proxy) from the screen's end until the connection is cut or the stream
/// ends; every frame must start where the screen ends. Returns whether the exit frame came.
async fn read_until_cut(url: &str, id: &str, screen: &mut Vec<u8>, end: &mut Vec<Frame>) -> bool {
    let client = reqwest::Client::builder().no_proxy().build().unwrap();
    let Ok(mut response) = client.get(format!("{url}/runs/{id}/stream?stdout={}", screen.len())).send().await else {
        return false;
    };
    let mut buffer = Vec::new();
    loop {
        while let Some(at) = buffer.windows(2).position(|w| w == b"\n\n") {
            let event: Vec<u8> = buffer.drain(..at + 2).collect();
            let Some(json) = event.strip_prefix(b"data: ") else { continue };
            match Frame::from_json(&json[..json.len() - 2]).unwrap().unwrap() {
                Frame::Stdout(chunk) => {
                    assert_eq!(chunk.offset, Some(screen.len() as u64), "a frame starts where the screen ends");
                    chunk.write_bytes(screen).unwrap();
                }
                Frame::Stderr(chunk) => panic!("a terminal has one stream: {chunk:?}"),
                Frame::Exit { .. } => {
                    end.push(Frame::from_json(&json[..json.len() - 2]).unwrap().unwrap());
                    return true;
                }
                other => end.push(other),
            }
        }
        match response.chunk().await {
            Ok(Some(chunk)) => buffer.extend_from_slice(&chunk),
            Ok(None) | Err(_) => return false,
        }
    }
}

/// A connection cut again and again while a TTY run writes: each time the reader resumes from the bytes it has, and
/// the screen is exactly what the same program writes on a pty here.
#[tokio::test(flavor = "multi_thread")]
async fn a_screen_resumed_after_cuts_is_exact() {
    let server = server().start().await;
    let proxy = CutProxy::start(server.addr).await.unwrap();
    let argv = ["python3", "-c", "import sys\nfor i in range(3000): sys.stdout.write('line %d %s\\n' % (i, 'y' * 40))"];
    let (native, _) = native_on_a_pty(&argv, 24, 80).await;
    // Every new connection is cut after 10–40 KB towards the client, four times (the POST's included).
    proxy.cut_randomly(23, 10_000, 40_000, 4);
    let body = json!({"cmd": argv, "run_id": "tty-cut", "tty": {"rows": 24, "cols": 80}});
    let client = reqwest::Client::builder().no_proxy().build().unwrap();
    let response = client.post(format!("{}/exec/stream", proxy.url())).body(body.to_string()).send().await.unwrap();
    assert_eq!(response.headers().get(protocol::TTY_HEADER).map(|v| v.as_bytes()), Some(&b"1"[..]));
    drop(response);
    let (mut screen, mut end) = (Vec::new(), Vec::new());
    let mut attempts = 0;
    while !read_until_cut(&proxy.url(), "tty-cut", &mut screen, &mut end).await {
        attempts += 1;
        assert!(attempts < 50, "never reached the end: {} bytes", screen.len());
    }
    assert!(proxy.cuts() >= 2, "cut {} times", proxy.cuts());
    assert_eq!(exit_frame(&end).0, 0);
    assert!(screen == native, "{} bytes against {}", screen.len(), native.len());
    server.stop().await;
}

/// What every run has, on a terminal: the idle timeout (124), the blocking `POST /exec` (the screen as its output,
/// its exit code, `x-tty`), the reattach window (no client: stopped, nothing left), and the resize in the metrics.
#[tokio::test(flavor = "multi_thread")]
async fn a_tty_run_keeps_every_run_property() {
    let server = server().arg("--reattach-window", "1").start().await;
    let body = json!({"cmd": ["sh", "-c", "echo ready; exec sleep 30"], "run_id": "tty-idle", "idle_timeout": 1,
                      "tty": {"rows": 24, "cols": 80}});
    let response = server.post("/exec/stream", body.to_string()).send().await.unwrap();
    let screen = Screen { frames: Frames::new(response), bytes: Vec::new(), end: Vec::new() };
    let (bytes, _, frames) = screen.finish().await;
    assert_eq!((bytes.as_slice(), exit_frame(&frames).0, exit_frame(&frames).1), (&b"ready\r\n"[..], 124, true));

    let body = json!({"cmd": ["sh", "-c", "tty; exit 3"], "run_id": "tty-blocking", "tty": {"rows": 24, "cols": 80}});
    let response = server.post("/exec", body.to_string()).send().await.unwrap();
    assert_eq!(response.headers().get(protocol::TTY_HEADER).map(|v| v.as_bytes()), Some(&b"1"[..]));
    let reply: protocol::ExecReply = serde_json::from_slice(&response.bytes().await.unwrap()).unwrap();
    assert!(reply.output.starts_with("/dev/pts/") && reply.stderr.is_empty(), "{reply:?}");
    assert_eq!(reply.exit_code, 3);

    let marker = marker();
    let cmd = json!(["sh", "-c", format!("echo ready; {}", sleeper(&marker))]);
    let (mut screen, _) = server.on_terminal("tty-window", cmd, 24, 80).await;
    screen.wait_for("ready\r\n", 0).await;
    wait_for_process(&marker);
    server.resize("tty-window", 30, 90).await.unwrap();
    drop(screen);
    assert_no_survivors(&marker, Duration::from_secs(15));
    let info = server.wait_for_run("tty-window", "its end", |info| info.state != RunState::Running).await;
    assert_eq!(
        (info.state, info.stopped_by, info.tty),
        (RunState::Cancelled, Some(protocol::StoppedBy::ReattachWindow), true)
    );
    let resized = value(
        &scrape(&server, None).await.1,
        "exec_server_http_requests_total{endpoint=\"/runs/{id}/resize\",status=\"200\"}",
    );
    assert_eq!(resized, 1.0);
    server.stop().await;
}

/// `tty.modes`: the client's terminal modes, laid over the pty's before the command starts (as sshd applies a
/// `pty-req`'s). The command's `stty -a` is that of a pty here set the same way by `stty`; names this server does not
/// know are ignored; without modes the pty is a fresh one with `iutf8`, as before the field.
#[tokio::test(flavor = "multi_thread")]
async fn a_tty_run_gets_the_modes_its_request_names() {
    let server = server().start().await;
    let stty = |id: &str, modes: Option<serde_json::Value>| {
        let mut tty = json!({"rows": 24, "cols": 80});
        if let Some(modes) = modes {
            tty["modes"] = modes;
        }
        let body = json!({"cmd": ["stty", "-a"], "run_id": id, "tty": tty});
        let server = &server;
        async move {
            let response = server.post("/exec/stream", body.to_string()).send().await.unwrap();
            assert_eq!(response.status(), 200);
            let screen = Screen { frames: Frames::new(response), bytes: Vec::new(), end: Vec::new() };
            let (bytes, code, _) = screen.finish().await;
            (String::from_utf8(bytes).unwrap(), code)
        }
    };
    let native = |set: &str| {
        let line = format!("stty {set}; stty -a");
        async move {
            let (screen, code) = native_on_a_pty(&["sh", "-c", &line], 24, 80).await;
            (String::from_utf8(screen).unwrap(), code)
        }
    };
    let set = "erase ^H intr ^G eol ^A kill undef -ixon -echoctl -iutf8 igncr -onlcr noflsh 9600";
    let modes = json!({
        "chars": {"erase": 8, "intr": 7, "eol": 1, "kill": null, "status": 20},
        "flags": {"ixon": false, "echoctl": false, "iutf8": false, "igncr": true, "onlcr": false, "noflsh": true,
                  "someday": true},
        "ispeed": 9600, "ospeed": 9600,
        "later": {"what": "a newer client sends"},
    });
    let (expected, forwarded) = (native(set).await, stty("tty-modes", Some(modes)).await);
    assert_eq!(forwarded, expected);
    assert!(expected.0.contains("erase = ^H") && expected.0.contains("speed 9600 baud"), "{expected:?}");
    let (expected, forwarded) = (native("iutf8").await, stty("tty-no-modes", None).await);
    assert_eq!(forwarded, expected, "no modes: a fresh pty's, and iutf8");
    assert_eq!(stty("tty-empty-modes", Some(json!({}))).await, expected);
    server.stop().await;
}

/// A known mode with a value it cannot have is refused before anything runs, with a 400 that names it.
#[tokio::test(flavor = "multi_thread")]
async fn a_bad_mode_is_refused_by_its_name() {
    let server = server().start().await;
    for (modes, named) in [
        (json!({"chars": {"erase": 300}}), "tty.modes.chars.erase must be the byte its key sends"),
        (json!({"chars": {"intr": "^C"}}), "tty.modes.chars.intr must be the byte its key sends"),
        (json!({"flags": {"echo": "yes"}}), "tty.modes.flags.echo must be true or false"),
        (json!({"flags": {"cs7": true, "cs8": true}}), "cs7 and cs8 are both true"),
        (json!({"ospeed": 0}), "tty.modes.ospeed must be a speed in baud"),
        (json!({"chars": [8]}), "invalid request body"),
    ] {
        let body = json!({"cmd": ["true"], "run_id": "tty-bad-modes", "tty": {"rows": 24, "cols": 80, "modes": modes}});
        let response = server.post("/exec/stream", body.to_string()).send().await.unwrap();
        assert_eq!(response.status(), 400, "{modes}");
        let error: ErrorBody = serde_json::from_slice(&response.bytes().await.unwrap()).unwrap();
        assert!(error.error.contains(named), "{modes}: {}", error.error);
    }
    let (status, _) = server.run_info("tty-bad-modes").await;
    assert_eq!(status, 404, "nothing ran");
    server.stop().await;
}
