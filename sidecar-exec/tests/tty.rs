//! TTY mode from the user's side: the real client on a terminal this test opens (a pty pair whose slave is
//! the client's controlling terminal), against the real server. "As native" means the same program with the same
//! keys on a terminal of the same size opened here, its screen compared byte for byte.

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use testkit::{catches, native_on_a_pty, wait_until_reading, Ended, Session, Terminal};

use crate::support::*;

/// The client forwarding `argv` to `server` (through `url` when given: a proxy), on a `rows` × `cols` terminal of
/// its own, and the terminal's modes from before it started.
fn client_on_a_terminal(
    server: &TestServer,
    url: Option<&str>,
    argv: &[&str],
    rows: u16,
    cols: u16,
) -> (Session, String) {
    let terminal = Terminal::open(rows, cols);
    let before = terminal.modes();
    let mut client = server.client().env("TERM", "xterm-256color").args(["python"]).args(argv);
    if let Some(url) = url {
        client = client.env("BUILD_SIDECARS", format!(r#"{{"python":{{"internal_url":"{url}"}}}}"#));
    }
    (terminal.spawn(client.into_command()), before)
}

/// `argv` natively on a terminal of the same kind, nothing else in between.
fn native_on_a_terminal(argv: &[&str], rows: u16, cols: u16) -> Session {
    let mut command = tokio::process::Command::new(argv[0]);
    command.args(&argv[1..]).env("TERM", "xterm-256color").kill_on_drop(true);
    Terminal::open(rows, cols).spawn(command)
}

/// One step of a user at a terminal: keys to type, then what to wait for on the screen.
type Step = (&'static [u8], &'static str);

/// Types `steps` one after the other, each once the previous one's screen came and the program carrying `marker`
/// waits for a key; what it left.
async fn type_steps(mut session: Session, marker: &str, steps: &[Step]) -> Ended {
    let mut at = 0;
    for (keys, then) in steps {
        wait_until_reading(marker).await;
        session.press(keys).await;
        at = session.wait_for(then, at).await;
    }
    session.finish().await
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// What a program sees: every stream a terminal, the local window's size, TERM; the screen is the native one's, and
/// the local terminal's modes are exactly back afterwards.
#[tokio::test(flavor = "multi_thread")]
async fn a_command_at_a_terminal_gets_a_terminal_of_the_local_size() {
    let server = server().await;
    let probe = "import os, sys\n\
                 print([f.isatty() for f in (sys.stdin, sys.stdout, sys.stderr)], os.environ['TERM'])\n\
                 print(os.get_terminal_size())\n\
                 os.system('stty size')\n";
    let argv = ["python3", "-c", probe];
    let (native, native_code) = native_on_a_pty(&argv, 30, 100).await;
    assert!(text(&native).starts_with("[True, True, True] xterm-256color\r\n"), "{:?}", text(&native));
    let (client, before) = client_on_a_terminal(&server, None, &argv, 30, 100);
    let ended = client.finish().await;
    assert_eq!((text(&ended.screen), ended.code), (text(&native), native_code));
    assert_eq!(ended.code, 0);
    assert_eq!(ended.modes, before, "the terminal's modes are back");
    server.stop().await;
}

/// `SIDECAR_TTY=0` at a terminal: the pipe behaviour (no terminal on the far side, the local one left
/// as it is).
#[tokio::test(flavor = "multi_thread")]
async fn sidecar_tty_0_at_a_terminal_gives_pipes() {
    let server = server().await;
    let terminal = Terminal::open(30, 100);
    let before = terminal.modes();
    let probe = "import sys; print([f.isatty() for f in (sys.stdin, sys.stdout, sys.stderr)])";
    let client = server.client().env("SIDECAR_TTY", "0").args(["python", "python3", "-c", probe]);
    let ended = terminal.spawn(client.into_command()).finish().await;
    assert_eq!((text(&ended.screen), ended.code), ("[False, False, False]\r\n".to_owned(), 0));
    assert_eq!(ended.modes, before);
    server.stop().await;
}

/// The local terminal resized (TIOCSWINSZ on the master: SIGWINCH to the client) resizes the remote one: the
/// command gets SIGWINCH, and `stty size` says the new size. Raw while the run has the terminal.
#[tokio::test(flavor = "multi_thread")]
async fn a_local_resize_reaches_the_command() {
    let server = server().await;
    let script = "import os, signal, sys\n\
                  signal.signal(signal.SIGWINCH, lambda n, f: print('winch', *os.get_terminal_size(), flush=True))\n\
                  os.system('stty size')\n\
                  print('ready', flush=True)\n\
                  while True:\n    line = sys.stdin.readline().strip()\n    if line == 'stty': os.system('stty size')\n    if line == 'quit': sys.exit(0)\n";
    // Not input(): GNU readline defers a SIGWINCH handler until the line is read; a plain read runs it at once.
    let mark = marker();
    let (mut client, before) = client_on_a_terminal(&server, None, &["python3", "-c", script, &mark], 30, 100);
    let at = client.wait_for("30 100\r\nready\r\n", 0).await;
    wait_until_reading(&mark).await;
    let raw = client.modes();
    assert!(raw.contains("-icanon") && raw.contains("-echo ") && raw.contains("-isig"), "raw while it runs: {raw}");
    client.resize(40, 120);
    let at = client.wait_for("winch 120 40\r\n", at).await;
    client.press(b"stty\r").await;
    let at = client.wait_for("\r\n40 120\r\n", at).await;
    wait_until_reading(&mark).await;
    client.resize(20, 60);
    let at = client.wait_for("winch 60 20\r\n", at).await;
    client.press(b"stty\r").await;
    let at = client.wait_for("\r\n20 60\r\n", at).await;
    client.press(b"quit\r").await;
    client.wait_for("quit\r\n", at).await;
    let ended = client.finish().await;
    assert_eq!(ended.code, 0);
    assert_eq!(ended.modes, before);
    server.stop().await;
}

/// A user at an interactive python3: `1+1` gives 2, Ctrl-C at the prompt a KeyboardInterrupt and a new prompt,
/// `input()` shows its prompt and returns the line, Ctrl-D exits 0. The screen is the native one's, keystroke for
/// keystroke.
#[tokio::test(flavor = "multi_thread")]
async fn a_python_repl_behaves_as_natively() {
    let server = server().await;
    let mark = format!("mark={}", marker());
    // -X takes any name: the marker on the command line, to find the program wherever it runs.
    let argv = ["python3", "-q", "-X", &mark];
    let steps: &[Step] = &[
        (b"", ">>> "),
        (b"1+1\r", "\r\n2\r\n>>> "),
        (b"\x03", "KeyboardInterrupt\r\n>>> "),
        (b"print(input('name? '))\r", "\r\nname? "),
        (b"Ada\r", "Ada\r\nAda\r\n>>> "),
        (b"\x04", ""),
    ];
    let native = type_steps(native_on_a_terminal(&argv, 24, 80), &mark, steps).await;
    let (client, before) = client_on_a_terminal(&server, None, &argv, 24, 80);
    let forwarded = type_steps(client, &mark, steps).await;
    assert_eq!((text(&forwarded.screen), forwarded.code), (text(&native.screen), native.code));
    assert_eq!(forwarded.code, 0);
    assert_eq!(forwarded.modes, before);
    server.stop().await;
}

/// Exit codes are the command's: 0, 3, 130 for a Ctrl-C the program does not catch (the byte 0x03 through the
/// remote line discipline, not a signal to the client), 137 for a command killed.
#[tokio::test(flavor = "multi_thread")]
async fn exit_codes_are_the_commands() {
    let server = server().await;
    for (script, keys, code) in [
        ("echo ready; exit 0", &b""[..], 0),
        ("echo ready; exit 3", b"", 3),
        ("echo ready; exec sleep 60", b"\x03", 130),
        ("echo ready; kill -KILL $$", b"", 137),
    ] {
        let (mut client, before) = client_on_a_terminal(&server, None, &["sh", "-c", script], 24, 80);
        client.wait_for("ready\r\n", 0).await;
        client.press(keys).await;
        let ended = client.finish().await;
        assert_eq!(ended.code, code, "{script}: {:?}", text(&ended.screen));
        assert_eq!(ended.modes, before, "{script}");
    }
    server.stop().await;
}

/// SIGTERM and SIGHUP to the client are delivered to the command as signals; the client exits with the command's
/// code, and the local terminal is restored. So it is when the client cannot reach the server at all.
#[tokio::test(flavor = "multi_thread")]
async fn signals_and_errors_restore_the_terminal() {
    let server = server().await;
    for (signal, code) in [(Signal::SIGTERM, 143), (Signal::SIGHUP, 129)] {
        let (mut client, before) =
            client_on_a_terminal(&server, None, &["sh", "-c", "echo ready; exec sleep 60"], 24, 80);
        client.wait_for("ready\r\n", 0).await;
        assert_ne!(client.modes(), before, "raw while it runs");
        kill(Pid::from_raw(client.pid()), signal).unwrap();
        let ended = client.finish().await;
        assert_eq!(ended.code, code, "{signal}: {:?}", text(&ended.screen));
        assert_eq!(ended.modes, before, "{signal}");
    }
    // Nothing listens there: the client's own error, printed on a cooked terminal (ONLCR back: one CR per line),
    // after the reset of screen modes a client that ends without the command's exit sends.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let (client, before) = client_on_a_terminal(&server, Some(&url), &["true"], 24, 80);
    let ended = client.finish().await;
    assert_eq!(ended.code, 1, "{:?}", text(&ended.screen));
    let screen = text(&ended.screen);
    let line = screen.rsplit('>').next().unwrap();
    assert!(line.starts_with("sidecar-exec: failed to connect") && line.ends_with(")\r\n"), "{screen:?}");
    assert_eq!(ended.modes, before);
    server.stop().await;
}

/// Runs `argv[1:]` on this terminal (the session's controlling one) in a process group of its own whose parent left
/// the session: an orphaned background group, the one place Linux refuses `tcsetattr` (EIO) to a process that does
/// not ignore SIGTTOU. Exits with the program's code. Each step waits on an event (a pipe, a pidfd), never a sleep.
const IN_AN_ORPHANED_GROUP: &str = r#"
import os, select, sys
done_r, done_w = os.pipe()
ready_r, ready_w = os.pipe()
middle = os.fork()
if middle == 0:
    if os.fork() == 0:
        os.setpgid(0, 0)
        parent = os.pidfd_open(os.getppid())
        os.write(ready_w, b"x")
        select.select([parent], [], [])
        program = os.fork()
        if program == 0:
            os.execv(sys.argv[1], sys.argv[1:])
        _, status = os.waitpid(program, 0)
        os.write(done_w, str(os.waitstatus_to_exitcode(status)).encode())
        os._exit(0)
    os.read(ready_r, 1)
    os._exit(0)
os.close(done_w)
os.waitpid(middle, 0)
code = b""
while chunk := os.read(done_r, 16):
    code += chunk
sys.exit(int(code))
"#;

/// A terminal that refuses raw mode: the client says so and what to do, on the terminal it left as it was, and
/// sends nothing (the command never ran); with the `SIDECAR_TTY=0` the line names, the same call runs.
#[tokio::test(flavor = "multi_thread")]
async fn a_terminal_that_refuses_raw_mode_is_named_and_nothing_runs() {
    let server = server().await;
    let ran = server.workspace.path().join("ran");
    let on_a_refusing_terminal = |tty: Option<&str>| {
        let mut client = server.client().env("TERM", "xterm-256color");
        if let Some(tty) = tty {
            client = client.env("SIDECAR_TTY", tty);
        }
        let mut command = client.other("python3");
        command.args(["-c", IN_AN_ORPHANED_GROUP, BIN, "python", "touch", "ran"]);
        let terminal = Terminal::open(24, 80);
        let before = terminal.modes();
        (terminal.spawn(command), before)
    };
    let (refused, before) = on_a_refusing_terminal(None);
    let ended = refused.finish().await;
    let screen = text(&ended.screen);
    assert_eq!(ended.code, 1, "{screen:?}");
    assert!(
        screen.starts_with("sidecar-exec: cannot put the terminal in raw mode (")
            && screen.ends_with("): set SIDECAR_TTY=0\r\n"),
        "{screen:?}"
    );
    assert_eq!(ended.modes, before, "the terminal is as it was");
    assert!(!ran.exists(), "the command ran on a terminal the client could not make raw");
    let (pipes, _) = on_a_refusing_terminal(Some("0"));
    let ended = pipes.finish().await;
    assert_eq!(ended.code, 0, "{:?}", text(&ended.screen));
    assert!(ran.exists(), "SIDECAR_TTY=0, as the line says, runs the command");
    server.stop().await;
}

/// The connection cut mid-session (testkit's CutProxy), twice, once with keys typed while it is down: the session
/// goes on, the screen is the native one's byte for byte (nothing shown twice, nothing missing), and every key
/// arrived once (a key sent twice would show twice in the REPL's echo and its result).
#[tokio::test(flavor = "multi_thread")]
async fn a_cut_connection_keeps_the_screen_and_delivers_each_key_once() {
    let server = server_with(&["--reattach-window", "30"], None).await;
    let upstream: std::net::SocketAddr = server.url.trim_start_matches("http://").parse().unwrap();
    let proxy = CutProxy::start(upstream).await.unwrap();
    let mark = format!("mark={}", marker());
    let argv = ["python3", "-q", "-X", &mark];
    let steps: &[Step] = &[
        (b"", ">>> "),
        (b"1+1\r", "\r\n2\r\n>>> "),
        (b"6*7\r", "\r\n42\r\n>>> "),
        (b"\x03", "KeyboardInterrupt\r\n>>> "),
        (b"\x04", ""),
    ];
    let native = type_steps(native_on_a_terminal(&argv, 24, 80), &mark, steps).await;

    let (mut client, before) = client_on_a_terminal(&server, Some(&proxy.url()), &argv, 24, 80);
    let mut at = 0;
    for (step, (keys, then)) in steps.iter().enumerate() {
        wait_until_reading(&mark).await;
        match step {
            // Cut, then type at once: the keys are typed while the connections are down.
            2 => {
                assert!(proxy.cut_all() > 0, "the session's connections were live");
                client.press(keys).await;
            }
            // Cut while nothing is typed: only the output stream resumes.
            3 => {
                assert!(proxy.cut_all() > 0);
                client.press(keys).await;
            }
            _ => client.press(keys).await,
        }
        at = client.wait_for(then, at).await;
    }
    let forwarded = client.finish().await;
    assert_eq!((text(&forwarded.screen), forwarded.code), (text(&native.screen), native.code));
    assert_eq!(forwarded.code, 0);
    assert_eq!(forwarded.modes, before);
    assert!(proxy.cuts() >= 2, "cut {} connections", proxy.cuts());
    server.stop().await;
}

/// A password prompt (`read -s`: no echo) shows its prompt, hides what is typed, and gets the line: as natively.
#[tokio::test(flavor = "multi_thread")]
async fn a_password_prompt_hides_the_keys_as_natively() {
    let server = server().await;
    let mark = marker();
    let script = format!("read -r -s -p 'password: ' p; echo; echo \"got $p\" # {mark}");
    let argv = ["bash", "-c", &script];
    let steps: &[Step] = &[(b"", "password: "), (b"s3cret\r", "got s3cret\r\n")];
    let native = type_steps(native_on_a_terminal(&argv, 24, 80), &mark, steps).await;
    let (client, before) = client_on_a_terminal(&server, None, &argv, 24, 80);
    let forwarded = type_steps(client, &mark, steps).await;
    assert_eq!((text(&forwarded.screen), forwarded.code), (text(&native.screen), native.code));
    assert!(!text(&forwarded.screen).contains("password: s3cret"), "not echoed");
    assert_eq!(forwarded.modes, before);
    server.stop().await;
}

/// SIGTSTP to the client (in raw mode the terminal sends none, so only `kill` does): the remote command is stopped,
/// the client stops with the terminal cooked for the shell (exactly the modes from before), and SIGCONT makes it
/// raw again and continues the command.
#[tokio::test(flavor = "multi_thread")]
async fn a_stopped_client_leaves_the_terminal_cooked_and_goes_raw_on_continue() {
    let server = server().await;
    let script =
        "import sys\nprint('ready', flush=True)\nfor line in sys.stdin:\n    print('got', line.strip(), flush=True)\n";
    let (mut client, before) = client_on_a_terminal(&server, None, &["python3", "-c", script], 24, 80);
    let at = client.wait_for("ready\r\n", 0).await;
    let pid = Pid::from_raw(client.pid());
    kill(pid, Signal::SIGTSTP).unwrap();
    let stopped = || process_group::procfs::stat(pid.as_raw()).is_some_and(|stat| stat.state == 'T');
    tokio::task::block_in_place(|| wait_until("the client stopped", stopped));
    assert_eq!(client.modes(), before, "cooked while stopped");
    kill(pid, Signal::SIGCONT).unwrap();
    // Raw again once it runs: the typed line reaches the remote terminal, which echoes it and hands it over.
    tokio::task::block_in_place(|| wait_until("the client raw again", || client.modes() != before));
    client.press(b"hello\r").await;
    client.wait_for("hello\r\ngot hello\r\n", at).await;
    client.press(b"\x04").await;
    let ended = client.finish().await;
    assert_eq!(ended.code, 0, "{:?}", text(&ended.screen));
    assert_eq!(ended.modes, before);
    server.stop().await;
}

/// A full-screen program (`less`, on the alternate screen) starts, pages on a key, quits on `q`: the screen equals
/// native byte for byte, and the local terminal's modes are exactly back.
#[tokio::test(flavor = "multi_thread")]
async fn a_full_screen_program_behaves_as_natively() {
    let server = server().await;
    // The marker in the file's name finds less wherever it runs; `env -i` gives both sides the same environment.
    let file = server.workspace.path().join(format!("{}.txt", marker()));
    std::fs::write(&file, (1..=60).map(|n| format!("line {n:02}\n")).collect::<String>()).unwrap();
    let file = file.to_str().unwrap();
    let path = format!("PATH={}", std::env::var("PATH").unwrap());
    let argv = ["env", "-i", &path, "TERM=xterm-256color", "less", file];
    let steps: &[Step] = &[(b"", "line 23"), (b" ", "line 46"), (b"q", "")];
    let native = type_steps(native_on_a_terminal(&argv, 24, 80), file, steps).await;
    assert!(text(&native.screen).contains("\x1b[?1049h"), "less uses the alternate screen");
    let (client, before) = client_on_a_terminal(&server, None, &argv, 24, 80);
    let forwarded = type_steps(client, file, steps).await;
    assert_eq!((text(&forwarded.screen), forwarded.code), (text(&native.screen), native.code));
    assert_eq!(forwarded.code, 0);
    assert_eq!(forwarded.modes, before);
    server.stop().await;
}

/// A panic of the client while the terminal is raw, on the call's task and on a thread of its own (the debug build's
/// `SIDECAR_DEBUG_PANIC_ON_USR1`, then SIGUSR1: see `sidecar/tty/panic_on_request.rs`): the terminal's modes are
/// exactly back, the message prints on the cooked terminal (one CR per line) after the reset of the screen modes, and
/// the client ends (SIGABRT, as a release build's `panic = "abort"` ends it) rather than running on cooked.
#[tokio::test(flavor = "multi_thread")]
async fn a_panic_restores_the_terminal_and_ends_the_client() {
    let server = server().await;
    for place in ["main", "thread"] {
        let terminal = Terminal::open(24, 80);
        let before = terminal.modes();
        let client = server.client().env("TERM", "xterm-256color").env("SIDECAR_DEBUG_PANIC_ON_USR1", place).args([
            "python",
            "sh",
            "-c",
            "echo ready; exec sleep 60",
        ]);
        let mut client = terminal.spawn(client.into_command());
        client.wait_for("ready\r\n", 0).await;
        assert_ne!(client.modes(), before, "raw while it runs");
        kill(Pid::from_raw(client.pid()), Signal::SIGUSR1).unwrap();
        let ended = client.finish().await;
        let screen = text(&ended.screen);
        assert_eq!(ended.code, 128 + Signal::SIGABRT as i32, "{place}: {screen:?}");
        assert_eq!(ended.modes, before, "{place}");
        let (_, message) = screen.split_once("\x1b>").expect("the screen reset");
        assert!(message.contains(&format!("SIDECAR_DEBUG_PANIC_ON_USR1={place}")), "{place}: {screen:?}");
        assert!(message.ends_with("\r\n") && !message.replace("\r\n", "").contains('\n'), "cooked: {message:?}");
    }
    server.stop().await;
}

/// `argv` natively and forwarded, each on a 24 × 80 terminal of its own, nothing typed: both screens and exit codes.
async fn native_and_forwarded(server: &TestServer, argv: &[&str]) -> ((String, i32), (String, i32)) {
    let (native, native_code) = native_on_a_pty(argv, 24, 80).await;
    let (client, before) = client_on_a_terminal(server, None, argv, 24, 80);
    let forwarded = client.finish().await;
    assert_eq!(forwarded.modes, before, "{argv:?}: the terminal's modes are back");
    ((text(&native), native_code), (text(&forwarded.screen), forwarded.code))
}

/// Colour: `ls --color=auto` at a terminal on a folder with a directory, an executable and a file emits its
/// escapes (LS_COLORS unset on both sides: ls's own colours), forwarded as natively, byte for byte.
#[tokio::test(flavor = "multi_thread")]
async fn ls_color_auto_colours_as_natively() {
    let server = server().await;
    let dir = server.workspace.path().join(marker());
    std::fs::create_dir_all(dir.join("sub")).unwrap();
    std::fs::write(dir.join("notes.txt"), "notes\n").unwrap();
    std::fs::write(dir.join("run.sh"), "#!/bin/sh\n").unwrap();
    let executable = <std::fs::Permissions as std::os::unix::fs::PermissionsExt>::from_mode(0o755);
    std::fs::set_permissions(dir.join("run.sh"), executable).unwrap();
    let argv = ["env", "-u", "LS_COLORS", "ls", "--color=auto", dir.to_str().unwrap()];
    let (native, forwarded) = native_and_forwarded(&server, &argv).await;
    assert!(native.0.contains("\x1b[") && native.0.contains("sub") && native.0.contains("run.sh"), "{native:?}");
    assert_eq!(forwarded, native);
    assert_eq!(native.1, 0);
    server.stop().await;
}

/// A progress bar that redraws in place (`\r`, no newline until the end) shows as natively, byte for byte.
#[tokio::test(flavor = "multi_thread")]
async fn a_progress_bar_redraws_in_place_as_natively() {
    let server = server().await;
    let bar = "import sys\n\
               for i in range(0, 101, 10):\n    sys.stdout.write('\\r[%-10s] %3d%%' % ('#' * (i // 10), i)); sys.stdout.flush()\n\
               print()\n";
    let (native, forwarded) = native_and_forwarded(&server, &["python3", "-c", bar]).await;
    assert!(native.0.starts_with("\r[          ]   0%\r[#         ]  10%"), "{native:?}");
    assert!(native.0.ends_with("\r[##########] 100%\r\n"), "{native:?}");
    assert_eq!(forwarded, native);
    server.stop().await;
}

/// pytest's colours at a terminal (a passing and a failing test: green, red, the highlighted source), forwarded as
/// natively, byte for byte but for the run's time in the last line. Needs pytest for `python3` (.ci/run installs it
/// from PyPI before the ignored tests).
#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs pytest (`python3 -m pytest`; .ci/run installs it)"]
async fn pytest_colours_as_natively() {
    let server = server().await;
    let dir = server.workspace.path().join(marker());
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("test_colours.py"),
        "def test_passes():\n    assert 1 + 1 == 2\n\ndef test_fails():\n    assert 1 + 1 == 3\n",
    )
    .unwrap();
    // In the tests' folder on both sides, so that the paths pytest prints are the same.
    let script =
        format!("cd '{}' && exec python3 -m pytest -p no:cacheprovider --no-header -q test_colours.py", dir.display());
    let argv = ["sh", "-c", &script];
    let ((native, native_code), (forwarded, forwarded_code)) = native_and_forwarded(&server, &argv).await;
    assert!(!native.contains("No module named pytest"), "pytest is not installed for python3: {native:?}");
    assert!(native.contains("\x1b[32m") && native.contains("\x1b[31m"), "green and red: {native:?}");
    // `… in 0.16s`: the run's own time, the one byte range that differs between any two runs.
    let untimed = |screen: &str| {
        let (head, tail) = screen.rsplit_once(" in ").expect("pytest's last line gives its time");
        format!("{head} in …{}", tail.trim_start_matches(|c: char| c.is_ascii_digit() || c == '.'))
    };
    assert_eq!((untimed(&forwarded), forwarded_code), (untimed(&native), native_code));
    assert_eq!(native_code, 1, "one test fails");
    server.stop().await;
}

/// The remote terminal has the local terminal's modes, as ssh's `pty-req` gives them: `stty -a` forwarded is
/// `stty -a` natively, on a fresh terminal and on one where `stty` changed the erase character (and more) before
/// the client started. Read before the client makes the terminal raw: the remote one is cooked as the local was.
#[tokio::test(flavor = "multi_thread")]
async fn the_remote_terminal_has_the_local_terminals_modes() {
    let server = server().await;
    for set in ["", "stty erase '^H' intr '^G' werase undef -ixon ixany imaxbel -echoctl iutf8 -onlcr 9600; "] {
        let mut native = tokio::process::Command::new("sh");
        native.args(["-c", &format!("{set}exec stty -a")]).env("TERM", "xterm-256color").kill_on_drop(true);
        let native = Terminal::open(24, 80).spawn(native).finish().await;
        let mut client = server.client().env("TERM", "xterm-256color").other("sh");
        client.args(["-c", &format!("{set}exec \"$0\" \"$@\""), BIN, "python", "stty", "-a"]);
        let forwarded = Terminal::open(24, 80).spawn(client).finish().await;
        assert_eq!((text(&forwarded.screen), forwarded.code), (text(&native.screen), native.code), "{set}");
        assert_eq!(native.code, 0);
        assert!(set.is_empty() || text(&native.screen).contains("erase = ^H;"), "{:?}", text(&native.screen));
    }
    server.stop().await;
}

/// The client on a terminal of its own against the server at `url`, forwarding `argv` with `env` added.
fn on_a_terminal_against(
    url: &str,
    workspace: &std::path::Path,
    argv: &[&str],
    env: &[(&str, &str)],
) -> (Session, String) {
    let terminal = Terminal::open(24, 80);
    let before = terminal.modes();
    let mut client = client_run()
        .env("TERM", "xterm-256color")
        .env("BUILD_SIDECARS", format!(r#"{{"python":{{"internal_url":"{url}"}}}}"#))
        .current_dir(workspace)
        .args(["python"])
        .args(argv);
    for (name, value) in env {
        client = client.env(name, value);
    }
    (terminal.spawn(client.into_command()), before)
}

/// Before the reply head (here: a server that stopped answering, SIGSTOP) Ctrl-C and Ctrl-\ are the keyboard's
/// signals to the client, as to a native program that waits: Ctrl-C ends it as SIGINT ends a program (it dies of
/// it, 130), Ctrl-\ with 131 (SIGQUIT, without leaving a core of its own), the terminal exactly as it was. (Before,
/// the terminal was raw from the start and the keys were bytes for a remote terminal that did not exist yet: the
/// client held the terminal until SIDECAR_TIMEOUT + 30 s.)
#[tokio::test(flavor = "multi_thread")]
async fn ctrl_c_before_the_reply_interrupts_the_client() {
    let workspace = tempfile::tempdir().unwrap();
    let server = crate::server_process::ServerProcess::start(workspace.path(), 0, &[]);
    server.signal(Signal::SIGSTOP);
    for (key, code) in [(&b"\x03"[..], 130), (b"\x1c", 131)] {
        let (mut client, before) = on_a_terminal_against(&server.url(), workspace.path(), &["true"], &[]);
        let pid = client.pid();
        // Raw (the keys typed from now on are kept) and its signal handlers in place: it waits for the reply.
        tokio::task::block_in_place(|| {
            wait_until("the client raw and waiting", || {
                client.modes() != before && catches(pid as u32, Signal::SIGQUIT)
            })
        });
        let raw = client.modes();
        assert!(raw.contains("-icanon") && !raw.contains("-isig"), "raw with the signal keys on: {raw}");
        client.press(key).await;
        let ended = client.finish().await;
        assert_eq!(ended.code, code, "{:?}", text(&ended.screen));
        assert_eq!(ended.modes, before);
    }
    server.signal(Signal::SIGCONT);
    server.kill();
}

/// A terminal run whose server stops answering (SIGSTOP) after the reply head: the keys are the command's, and the
/// stream's silence bound ends the client (SIDECAR_SILENCE=2: the bound, then as long of reconnecting), with the
/// terminal restored and one line, on the cooked terminal, of what it last knew.
#[tokio::test(flavor = "multi_thread")]
async fn a_terminal_run_whose_server_stops_ends_with_the_terminal_restored() {
    let workspace = tempfile::tempdir().unwrap();
    let server = crate::server_process::ServerProcess::start(workspace.path(), 0, &[]);
    let mark = marker();
    let script = format!("echo started; sleep {mark}");
    let (mut client, before) =
        on_a_terminal_against(&server.url(), workspace.path(), &["sh", "-c", &script], &[("SIDECAR_SILENCE", "2")]);
    client.wait_for("started\r\n", 0).await;
    server.signal(Signal::SIGSTOP);
    let ended = client.finish().await;
    let screen = text(&ended.screen);
    assert_eq!(ended.code, 1, "{screen:?}");
    assert_eq!(ended.modes, before);
    let line = screen.rsplit("\x1b>").next().unwrap();
    assert!(line.starts_with("sidecar-exec: sidecar at ") && line.contains("sent nothing for 2 s"), "{screen:?}");
    assert!(line.ends_with("passes)\r\n") && !line.trim_end().contains('\n'), "one cooked line: {screen:?}");
    server.signal(Signal::SIGCONT);
    server.kill();
    for pid in processes_matching(&mark) {
        let _ = kill(Pid::from_raw(pid as i32), Signal::SIGKILL);
    }
}

/// A line the client prints while the terminal is raw (here the server's error frame in a terminal run) ends with
/// `\r\n`, so it starts at the left edge of the next line (before: `\n` alone, and raw mode adds no carriage return).
#[tokio::test(flavor = "multi_thread")]
async fn a_line_printed_while_raw_ends_with_a_carriage_return() {
    let server = crate::raw_server::raw_server(|request| {
        if request.starts_with("POST /exec") {
            let events = "data: {\"type\":\"stdout\",\"data\":\"out\",\"offset\":0}\n\n\
                          data: {\"type\":\"error\",\"data\":\"the server could not keep all output\"}\n\n\
                          data: {\"type\":\"exit\",\"data\":0,\"stdout_bytes\":4,\"stderr_bytes\":0}\n\n";
            crate::raw_server::Reply::full("200 OK", &[("content-type", "text/event-stream"), ("x-tty", "1")], events)
        } else {
            crate::raw_server::Reply::full("404 Not Found", &[], "")
        }
    })
    .await;
    let workspace = tempfile::tempdir().unwrap();
    let (client, before) = on_a_terminal_against(&server.url, workspace.path(), &["true"], &[]);
    let ended = client.finish().await;
    assert_eq!(ended.code, 0, "{:?}", text(&ended.screen));
    assert!(
        text(&ended.screen).contains("out\nsidecar-exec: the server could not keep all output\r\n"),
        "{:?}",
        text(&ended.screen)
    );
    assert_eq!(ended.modes, before);
}

/// A terminal left raw (as a client killed while raw leaves it: `stty raw -echo`) before a call: one line says so and
/// names `stty sane`; the command gets the terminal's modes as they are (as natively), and the terminal is left as
/// it was found. `stty -echo` alone (a password script's) gets no line.
#[tokio::test(flavor = "multi_thread")]
async fn a_terminal_left_raw_is_noted_and_passed_on_as_it_is() {
    let server = server().await;
    for (set, noted) in [("stty raw -echo", true), ("stty -echo", false)] {
        let mut client = server.client().env("TERM", "xterm-256color").other("sh");
        client.args(["-c", &format!("{set}; exec \"$0\" \"$@\""), BIN, "python", "stty", "-a"]);
        let terminal = Terminal::open(24, 80);
        let mut native = tokio::process::Command::new("sh");
        native.args(["-c", &format!("{set}; exec stty -a")]).kill_on_drop(true);
        let native = Terminal::open(24, 80).spawn(native).finish().await;
        let forwarded = terminal.spawn(client).finish().await;
        let screen = text(&forwarded.screen);
        let note = "sidecar-exec: this terminal is raw (-icanon -isig -echo), as a program killed while it had the \
                    terminal raw leaves it, and the command gets it so; run `stty sane` (or `reset`) if that was not \
                    meant\r\n";
        assert_eq!(screen.starts_with(note), noted, "{set}: {screen:?}");
        assert_eq!(screen.trim_start_matches(note), text(&native.screen), "{set}: the modes as they are");
        assert_eq!(forwarded.modes, native.modes, "{set}: left as it was found");
    }
    server.stop().await;
}

/// `--attach` to a terminal run: refused, with a line saying why, while its client follows it (two keyboards on one
/// terminal would mix their keys) and from a pipe; from a terminal once no client has it, a take-over: the kept
/// screen, then the keys typed here reach the command (from where its stdin was), the local window's size is sent,
/// and the run's exit is the client's, with the terminal restored. (Before: output only, and its Ctrl-C cancelled
/// the run.)
#[tokio::test(flavor = "multi_thread")]
async fn attach_takes_over_a_terminal_run_only_when_no_client_has_it() {
    let server = server().await;
    let mark = format!("mark={}", marker());
    let script = "import os, sys\nprint('ready', flush=True)\nfor line in sys.stdin:\n    line = line.strip()\n    \
                  if line == 'size': os.system('stty size')\n    elif line == 'quit': sys.exit(4)\n    \
                  else: print('got', line, flush=True)\n";
    let (mut first, _) = client_on_a_terminal(&server, None, &["python3", "-X", &mark, "-c", script], 24, 80);
    let at = first.wait_for("ready\r\n", 0).await;
    wait_until_reading(&mark).await;
    first.press(b"one\r").await;
    first.wait_for("got one\r\n", at).await;
    let runs = stdout(&server.client().args(["--runs"]).run().await);
    let id = runs.lines().find(|line| line.contains(&mark)).unwrap().split_whitespace().nth(1).unwrap().to_owned();
    let piped = server.client().args(["--attach", "python", &id]).run().await;
    assert_eq!(piped.status.code(), Some(1));
    assert!(stderr(&piped).contains("runs on a terminal and 1 client follows it now"), "{}", stderr(&piped));
    kill(Pid::from_raw(first.pid()), Signal::SIGKILL).unwrap();
    let _ = first.finish().await;
    let detached = || {
        let runs = std::process::Command::new(BIN)
            .args(["--runs"])
            .env("BUILD_SIDECARS", format!(r#"{{"python":{{"internal_url":"{}"}}}}"#, server.url))
            .output()
            .unwrap();
        String::from_utf8_lossy(&runs.stdout).lines().any(|line| line.contains(&id) && line.contains(" attached=0 "))
    };
    tokio::task::block_in_place(|| wait_until("the first client gone", detached));
    let piped = server.client().args(["--attach", "python", &id]).run().await;
    assert_eq!(piped.status.code(), Some(1));
    assert!(stderr(&piped).contains("runs on a terminal: attach to it from a terminal"), "{}", stderr(&piped));

    let terminal = Terminal::open(30, 100);
    let before = terminal.modes();
    let mut second = terminal.spawn(server.client().args(["--attach", "python", &id]).into_command());
    let at = second.wait_for("got one\r\n", 0).await;
    wait_until_reading(&mark).await;
    second.press(b"two\r").await;
    let at = second.wait_for("got two\r\n", at).await;
    wait_until_reading(&mark).await;
    second.press(b"size\r").await;
    let at = second.wait_for("30 100\r\n", at).await;
    wait_until_reading(&mark).await;
    second.press(b"quit\r").await;
    second.wait_for("quit\r\n", at).await;
    let ended = second.finish().await;
    assert_eq!(ended.code, 4, "{:?}", text(&ended.screen));
    assert_eq!(ended.modes, before);
    server.stop().await;
}

/// Ctrl-C before the reply head also cancels the run the request may have started: the client sends
/// `DELETE /runs/{id}` (for the id its request named) before it dies of SIGINT, against a server that took the
/// request and never answered it.
#[tokio::test(flavor = "multi_thread")]
async fn ctrl_c_before_the_reply_cancels_what_the_request_may_have_started() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let (requests, mut seen) = tokio::sync::mpsc::unbounded_channel::<String>();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let requests = requests.clone();
            tokio::spawn(async move {
                let Some(request) = crate::raw_server::read_request(&mut socket).await else { return };
                let _ = requests.send(request.clone());
                if request.starts_with("DELETE ") {
                    use tokio::io::AsyncWriteExt;
                    let _ = socket.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n").await;
                } else {
                    // The request is held: no head ever comes.
                    std::future::pending::<()>().await;
                }
            });
        }
    });
    let workspace = tempfile::tempdir().unwrap();
    let (mut client, before) = on_a_terminal_against(&url, workspace.path(), &["true"], &[]);
    let posted = tokio::time::timeout(HANG, seen.recv()).await.unwrap().unwrap();
    assert!(posted.starts_with("POST /exec "), "{posted}");
    let body = posted.split("\r\n\r\n").nth(1).unwrap();
    let id = serde_json::from_str::<serde_json::Value>(body).unwrap()["run_id"].as_str().unwrap().to_owned();
    let pid = client.pid();
    tokio::task::block_in_place(|| {
        wait_until("the client raw", || client.modes() != before && catches(pid as u32, Signal::SIGINT))
    });
    client.press(b"\x03").await;
    let deleted = tokio::time::timeout(HANG, seen.recv()).await.unwrap().unwrap();
    assert!(deleted.starts_with(&format!("DELETE /runs/{id} ")), "{deleted}");
    let ended = client.finish().await;
    assert_eq!(ended.code, 130, "{:?}", text(&ended.screen));
    assert_eq!(ended.modes, before);
}
