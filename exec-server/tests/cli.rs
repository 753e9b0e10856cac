//! The real exec-server binary: flags as orchestrators pass them, the health probe, the token, signals.

use std::process::{Command, Stdio};
use std::time::Duration;

use nix::sys::signal::Signal;
use serde_json::json;

use crate::support::*;

const BIN: &str = env!("CARGO_BIN_EXE_exec-server");

/// The binary on an ephemeral port, running until the test drops it.
struct RunningBinary {
    running: Running,
    port: u16,
    _workspace: tempfile::TempDir,
}

/// Starts the binary on an ephemeral port and waits for its "listening" log line (the readiness signal, which
/// carries the address).
fn start_binary(args: &[&str], env: &[(&str, &str)]) -> RunningBinary {
    let workspace = tempfile::tempdir().unwrap();
    let mut command = Command::new(BIN);
    command
        .args(["-host", "127.0.0.1", "-port", "0", "-cwd"])
        .arg(workspace.path())
        .args(args)
        .env_remove("EXEC_SERVER_TOKEN")
        .envs(env.iter().copied())
        .stdout(Stdio::null());
    let (running, line) = Running::start(command, |line| line.contains("addr="));
    let addr = line.split("addr=").nth(1).unwrap().split_whitespace().next().unwrap();
    let port = addr.rsplit(':').next().unwrap().parse().unwrap();
    RunningBinary { running, port, _workspace: workspace }
}

impl RunningBinary {
    fn addr(&self) -> std::net::SocketAddr {
        ([127, 0, 0, 1], self.port).into()
    }

    fn terminate(&mut self) -> (std::process::ExitStatus, Duration) {
        self.stop_with(Signal::SIGTERM)
    }

    /// Sends `signal` until the server exits (panics after 20 s); how it exited, and how long after the signal.
    fn stop_with(&mut self, signal: Signal) -> (std::process::ExitStatus, Duration) {
        self.running.stop_with(signal, Duration::from_secs(20))
    }

    fn pid(&self) -> u32 {
        self.running.pid()
    }
}

fn healthcheck(port: u16) -> std::process::Output {
    Command::new(BIN).args(["-healthcheck", "-port", &port.to_string()]).output().unwrap()
}

#[test]
fn single_dash_flags_and_the_health_probe() {
    let mut server = start_binary(&["-runtime", "go", "-grace", "1"], &[]);
    assert!(healthcheck(server.port).status.success());
    let (status, _) = server.terminate();
    assert!(status.success(), "{status:?}");
    let probe = healthcheck(server.port);
    assert_eq!(probe.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&probe.stderr).contains("unhealthy"));
}

/// POST /exec with a bearer token; the whole raw response.
fn exec_with_token(server: &RunningBinary, token: &str, request: &serde_json::Value) -> String {
    raw_request(server.addr(), "POST", "/exec", Some(token), &request.to_string())
}

#[test]
fn the_token_never_reaches_a_command() {
    let server = start_binary(&[], &[("EXEC_SERVER_TOKEN", "tok-123"), ("EXEC_SERVER_RUNTIME", "node")]);
    let response = exec_with_token(&server, "tok-123", &json!({"cmd": ["env"]}));
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    assert!(response.contains("PATH="), "env did not run: {response}");
    assert!(!response.contains("tok-123") && !response.contains("EXEC_SERVER_"), "{response}");

    // Nor through the server's own environment block, which /proc shows as it was at exec time.
    let script = format!("tr '\\0' '\\n' < /proc/{}/environ", server.pid());
    let response = exec_with_token(&server, "tok-123", &json!({"cmd": ["sh", "-c", script]}));
    assert!(response.starts_with("HTTP/1.1 200") && response.contains("EXEC_SERVER_RUNTIME=node"), "{response}");
    assert!(!response.contains("tok-123"), "the token is readable in /proc/<server>/environ: {response}");

    // Nor through the stdin it was handed over on when the server re-executed itself without the variable.
    let script = format!("ls -l /proc/{pid}/fd/0; cat /proc/{pid}/fd/0", pid = server.pid());
    let response = exec_with_token(&server, "tok-123", &json!({"cmd": ["sh", "-c", script]}));
    assert!(response.starts_with("HTTP/1.1 200") && response.contains("/dev/null"), "{response}");
    assert!(!response.contains("tok-123"), "the token is readable on the server's stdin: {response}");
}

/// The hand-over variable names the process it is meant for: set by anyone else, it is ignored, and stdin is not
/// taken for a token (the server serves without one, as it was asked to).
#[test]
fn a_forged_token_hand_over_is_ignored() {
    let workspace = tempfile::tempdir().unwrap();
    let forged = workspace.path().join("forged");
    std::fs::write(&forged, "forged-token").unwrap();
    let mut command = Command::new(BIN);
    command
        .args(["-host", "127.0.0.1", "-port", "0", "-cwd"])
        .arg(workspace.path())
        .env_remove("EXEC_SERVER_TOKEN")
        .env("EXEC_SERVER_TOKEN_HANDOFF", "1")
        .stdin(std::fs::File::open(&forged).unwrap())
        .stdout(Stdio::null());
    let (running, line) = Running::start(command, |line| line.contains("addr="));
    assert!(line.contains("auth=false"), "{line}");
    let addr = line.split("addr=").nth(1).unwrap().split_whitespace().next().unwrap();
    let reply = raw_request(addr.parse().unwrap(), "POST", "/exec", None, &json!({"cmd": ["true"]}).to_string());
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
    drop(running);
}

/// The variable is trimmed like the token file: a secret written with `echo` still matches.
#[test]
fn a_token_variable_with_a_trailing_newline_is_trimmed() {
    let server = start_binary(&[], &[("EXEC_SERVER_TOKEN", "tok-456\n")]);
    let response = exec_with_token(&server, "tok-456", &json!({"cmd": ["true"]}));
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    let denied = exec_with_token(&server, "tok-45", &json!({"cmd": ["true"]}));
    assert!(denied.starts_with("HTTP/1.1 401"), "{denied}");
}

/// Escapees (`setsid`) that exit on their own are re-parented to the server, the subreaper: it reaps them, found or
/// not by their job tag (`env -i` scrubs it).
#[test]
fn adopted_escapees_that_exit_by_themselves_are_reaped() {
    let server = start_binary(&[], &[]);
    let marker = marker();
    let script = format!(
        "setsid sh -c ': {marker}' & setsid env -i /bin/sh -c '/bin/sleep 0.3; : {marker}' & \
         setsid sh -c 'sleep 0.2; : {marker}' > /dev/null 2>&1 & echo started"
    );
    for _ in 0..10 {
        let response =
            read_all(&mut raw_post(server.addr(), "/exec", &json!({"cmd": ["sh", "-c", script]}).to_string()));
        assert!(response.starts_with("HTTP/1.1 200") && response.contains("started"), "{response}");
    }
    assert_no_survivors(&marker, Duration::from_secs(10));
    let reaped = eventually(Duration::from_secs(5), || zombie_children(server.pid()).is_empty());
    assert!(reaped, "zombie children of the server: {:?}", zombie_children(server.pid()));
}

/// SIGTERM and SIGHUP both stop the server the same way: running commands, what escaped them (a TERM-ignoring
/// `setsid` daemon) and what escaped a command that had already finished (its sweep under way) are all gone when
/// the server has exited, and an open stream gets its ending first.
#[test]
fn sigterm_and_sighup_leave_no_escapee_and_end_streams() {
    for signal in [Signal::SIGTERM, Signal::SIGHUP] {
        let mut server = start_binary(&["--grace", "2"], &[]);
        // A finished command's escapee that survives SIGTERM (its trap notes it, then it carries on): the server's
        // sweep of it is in its grace period when the server is told to stop.
        let (swept, noted) = (marker(), server._workspace.path().join("term-noted"));
        // The command ends once the escapee has its trap in place (until then, SIGTERM to the group would end it).
        let script = format!(
            "setsid sh -c \"trap 'echo > {noted}' TERM; echo > ready; while :; do {} & wait; done\" > /dev/null 2>&1 & \
             while [ ! -e ready ]; do sleep 0.01; done",
            sleeper(&swept),
            noted = noted.display()
        );
        let reply = read_all(&mut raw_post(server.addr(), "/exec", &json!({"cmd": ["sh", "-c", script]}).to_string()));
        assert!(reply.contains(r#""exit_code":0"#), "{reply}");
        assert!(eventually(Duration::from_secs(10), || noted.exists()), "the sweep never sent SIGTERM");

        // A running command with a TERM-ignoring escapee of its own.
        let (daemon, leader) = (marker(), marker());
        let script = format!(
            "setsid sh -c \"trap '' TERM; {}\" > /dev/null 2>&1 & echo started; {}",
            sleeper(&daemon),
            sleeper(&leader)
        );
        let mut stream = raw_post(server.addr(), "/exec/stream", &json!({"cmd": ["sh", "-c", script]}).to_string());
        read_until(&mut stream, "started");
        wait_for_process(&daemon);

        let (status, took) = server.stop_with(signal);
        assert!(status.success(), "{signal}: {status:?}");
        // By design within grace + 1 s; the bound leaves a loaded machine room and is far from the escapees' own
        // sleeps.
        assert!(took < Duration::from_secs(15), "{signal}: exit took {took:?} (grace 2 s)");
        // Checked at once: the server must not exit before its sweeps are done.
        for (what, marker) in
            [("the swept escapee", &swept), ("the running escapee", &daemon), ("the command", &leader)]
        {
            assert_eq!(processes_matching(marker), Vec::<u32>::new(), "{signal}: {what} survived");
        }
        let rest = read_all(&mut stream);
        assert!(rest.contains("cancelled") && rest.contains(r#""type":"exit""#), "{signal}: {rest}");
    }
}

/// At shutdown a running command gets one SIGTERM, from its own termination, not a second one by its tag: many
/// tools read a second interrupt as "exit now, skip the clean-up".
#[test]
fn shutdown_sends_a_running_command_one_sigterm() {
    let mut server = start_binary(&["--grace", "3"], &[]);
    let count = server._workspace.path().join("terms");
    let leader = marker();
    // Each SIGTERM appends a line; the command keeps running until the grace period ends with SIGKILL.
    let script = format!(
        "trap 'echo term >> {count}' TERM; echo started; while :; do {} & wait; done",
        sleeper(&leader),
        count = count.display()
    );
    let mut stream = raw_post(server.addr(), "/exec/stream", &json!({"cmd": ["sh", "-c", script]}).to_string());
    read_until(&mut stream, "started");
    let (status, _) = server.terminate();
    assert!(status.success(), "{status:?}");
    let terms = std::fs::read_to_string(&count).unwrap_or_default();
    assert_eq!(terms.lines().count(), 1, "SIGTERMs the command got: {terms:?}");
    assert_eq!(processes_matching(&leader), Vec::<u32>::new());
}

#[test]
fn configuration_errors_are_clear() {
    let output = Command::new(BIN).args(["-port", "0", "-cwd", "/definitely/not/here"]).output().unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("workspace root /definitely/not/here") && stderr.contains("--cwd"), "{stderr}");

    let empty = tempfile::NamedTempFile::new().unwrap();
    let output =
        Command::new(BIN).args(["-port", "0", "-cwd", "/tmp", "--token-file"]).arg(empty.path()).output().unwrap();
    assert!(String::from_utf8_lossy(&output.stderr).contains("is empty"), "{output:?}");

    let output = Command::new(BIN).args(["--max-timeout", "99999"]).output().unwrap();
    assert_eq!(output.status.code(), Some(2));
}

/// `--token-file` naming what is not a token file fails at once with one line saying why, instead of reading for
/// ever (`/dev/zero`, a 1 GB file), blocking (a FIFO with no writer) or failing late (a folder); a Kubernetes
/// Secret's file, a link into `..data/`, is followed.
#[tokio::test(flavor = "multi_thread")]
async fn token_files_that_are_not_small_regular_files_are_refused_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo");
    assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let huge = dir.path().join("huge");
    std::fs::File::create(&huge).unwrap().set_len(1 << 30).unwrap();
    let cases = [
        (std::path::PathBuf::from("/dev/zero"), "is a character device, not a regular file"),
        (fifo, "is a FIFO (named pipe), not a regular file"),
        (dir.path().to_path_buf(), "is a directory, not a regular file"),
        (huge, "is larger than 65536 bytes"),
    ];
    for (path, why) in cases {
        let output = BinaryRun::new(BIN)
            .args(["-host", "127.0.0.1", "-port", "0", "-cwd", "/tmp", "--token-file"])
            .args([&path])
            .run()
            .await;
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{}: {stderr}", path.display());
        assert!(stderr.contains(&format!("token file {} {why}", path.display())), "{stderr}");
    }

    std::fs::create_dir(dir.path().join("..2026_12_04")).unwrap();
    std::fs::write(dir.path().join("..2026_12_04/token"), "linked\n").unwrap();
    std::os::unix::fs::symlink("..2026_12_04", dir.path().join("..data")).unwrap();
    let secret = dir.path().join("token");
    std::os::unix::fs::symlink("..data/token", &secret).unwrap();
    let server = start_binary(&["--token-file", secret.to_str().unwrap()], &[]);
    let reply = raw_request(server.addr(), "GET", "/info", Some("linked"), "");
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
}

/// A flood of large bodies (80 at once, 937 KiB each, the real binary: its preparer threads are the process's own)
/// is not all held: past the bounded queue a body gets 503 `preparers_busy` with `Retry-After`, every other one its
/// 400, and a request after the flood is answered.
#[test]
fn a_flood_of_large_bodies_gets_503_past_the_bounded_queue() {
    let server = start_binary(&[], &[]);
    let body = std::sync::Arc::new(crate::requests::eighty_thousand_variables());
    let senders: Vec<_> = (0..80)
        .map(|_| {
            let (addr, body) = (server.addr(), body.clone());
            std::thread::spawn(move || raw_request(addr, "POST", "/exec", None, &body))
        })
        .collect();
    let (mut busy, mut refused) = (0, 0);
    for sender in senders {
        let reply = sender.join().unwrap();
        if reply.starts_with("HTTP/1.1 503") {
            assert!(reply.contains("\"code\":\"preparers_busy\"") && reply.contains("retry-after: 1"), "{reply}");
            busy += 1;
        } else {
            assert!(reply.starts_with("HTTP/1.1 400") && reply.contains("too_many_env_vars"), "{reply}");
            refused += 1;
        }
    }
    assert!(busy > 0, "all {refused} bodies were held: the queue has no bound");
    let after = raw_request(server.addr(), "POST", "/exec", None, r#"{"cmd":["true"]}"#);
    assert!(after.starts_with("HTTP/1.1 200"), "{after}");
}

#[test]
fn token_file_is_read_and_help_names_every_variable() {
    let token = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(token.path(), "from-file\n").unwrap();
    let server = start_binary(&["--token-file", token.path().to_str().unwrap()], &[]);
    let client = raw_request(server.addr(), "GET", "/info", Some("from-file"), "");
    assert!(client.starts_with("HTTP/1.1 200"), "{client}");
    let denied = raw_request(server.addr(), "GET", "/info", Some("from-fil"), "");
    assert!(denied.starts_with("HTTP/1.1 401"), "{denied}");

    let help = Command::new(BIN).arg("--help").output().unwrap();
    let help = String::from_utf8(help.stdout).unwrap();
    for variable in [
        "EXEC_SERVER_PORT",
        "EXEC_SERVER_HOST",
        "EXEC_SERVER_CWD",
        "EXEC_SERVER_RUNTIME",
        "EXEC_SERVER_TOKEN",
        "EXEC_SERVER_TOKEN_FILE",
        "EXEC_SERVER_MAX_CONCURRENT",
        "EXEC_SERVER_GRACE",
        "EXEC_SERVER_DRAIN",
        "EXEC_SERVER_MAX_TIMEOUT",
        "EXEC_SERVER_MAX_OUTPUT",
        "EXEC_SERVER_ALLOW_ANY_CWD",
        "EXEC_SERVER_KEEPALIVE",
        "EXEC_SERVER_LOG",
        "EXEC_SERVER_LOG_FORMAT",
        "EXEC_SERVER_METRICS_OPEN",
    ] {
        assert!(help.contains(variable), "--help does not mention {variable}");
    }
    let version = Command::new(BIN).arg("-version").output().unwrap();
    assert!(String::from_utf8_lossy(&version.stdout).contains(env!("CARGO_PKG_VERSION")));
}

#[test]
fn the_health_probe_finds_a_port_given_only_on_the_servers_command_line() {
    // As in an image: EXEC_SERVER_PORT says one port, the server was started with `-port` (here 0: any free one).
    let dir = tempfile::tempdir().unwrap();
    let port_file = dir.path().join("exec-server.port");
    let port_file = port_file.to_str().unwrap();
    let mut server = start_binary(&["--port-file", port_file], &[]);
    let probe = |args: &[&str]| {
        Command::new(BIN)
            .arg("-healthcheck")
            .args(args)
            .env("EXEC_SERVER_PORT", "1")
            .env("EXEC_SERVER_PORT_FILE", port_file)
            .output()
            .unwrap()
    };
    let found = probe(&[]);
    assert!(found.status.success(), "{}", String::from_utf8_lossy(&found.stderr));
    assert_eq!(std::fs::read_to_string(port_file).unwrap().trim(), server.port.to_string());
    let explicit = probe(&["-port", "1"]);
    assert_eq!(explicit.status.code(), Some(1), "the probe's own -port wins over the file");
    assert!(String::from_utf8_lossy(&explicit.stderr).contains("127.0.0.1:1/health"), "{explicit:?}");

    let (status, _) = server.terminate();
    assert!(status.success(), "{status:?}");
    assert!(!std::path::Path::new(port_file).exists(), "a clean exit removes the port file");
    assert_eq!(probe(&[]).status.code(), Some(1));
}

#[test]
fn a_workspace_the_server_cannot_write_is_named_in_a_warning() {
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::process::CommandExt;
    // Root writes anywhere, so as root the server runs as nobody; otherwise the folder is made read-only.
    let as_root = nix::unistd::geteuid().is_root();
    let parent = tempfile::tempdir().unwrap();
    std::fs::set_permissions(parent.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let workspace = parent.path().join("workspace");
    std::fs::create_dir(&workspace).unwrap();
    let start = |mode: u32| {
        std::fs::set_permissions(&workspace, std::fs::Permissions::from_mode(mode)).unwrap();
        // A missing token file ends the server right after its start-up checks, so the whole log is there.
        let mut command = Command::new(BIN);
        command
            .args(["-port", "0", "-host", "127.0.0.1", "--token-file", "/nonexistent/token", "-cwd"])
            .arg(&workspace);
        if as_root {
            command.uid(65534).gid(65534);
        }
        let output = command.output().unwrap();
        assert_eq!(output.status.code(), Some(1), "{output:?}");
        String::from_utf8(output.stderr).unwrap()
    };
    let unwritable = start(if as_root { 0o755 } else { 0o555 });
    let uid = if as_root { 65534 } else { nix::unistd::geteuid().as_raw() };
    assert!(
        unwritable.contains(&format!("the workspace {} is not writable by uid {uid}", workspace.display())),
        "{unwritable}"
    );
    let writable = start(0o777);
    assert!(!writable.contains("not writable"), "{writable}");
}
