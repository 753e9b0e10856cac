//! The real exec-server binary: flags as orchestrators pass them, the health probe, the token, signals.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::support::*;

const BIN: &str = env!("CARGO_BIN_EXE_exec-server");

struct RunningBinary {
    child: Child,
    port: u16,
    _workspace: tempfile::TempDir,
}

/// Starts the binary on an ephemeral port and waits for its "listening" log line (the readiness signal).
fn start_binary(args: &[&str], env: &[(&str, &str)]) -> RunningBinary {
    let workspace = tempfile::tempdir().unwrap();
    let mut command = Command::new(BIN);
    command
        .args(["-host", "127.0.0.1", "-port", "0", "-cwd"])
        .arg(workspace.path())
        .args(args)
        .env_remove("EXEC_SERVER_TOKEN")
        .envs(env.iter().copied())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut child = command.spawn().unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    let port = loop {
        line.clear();
        assert!(stderr.read_line(&mut line).unwrap() > 0, "server exited before listening");
        if let Some(addr) = line.split("addr=").nth(1) {
            let addr = addr.split_whitespace().next().unwrap();
            break addr.rsplit(':').next().unwrap().parse().unwrap();
        }
    };
    // Keep draining the log so the server never blocks on a full pipe.
    std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
    RunningBinary { child, port, _workspace: workspace }
}

impl RunningBinary {
    fn addr(&self) -> std::net::SocketAddr {
        ([127, 0, 0, 1], self.port).into()
    }

    fn terminate(&mut self) -> (std::process::ExitStatus, Duration) {
        let started = Instant::now();
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(self.child.id() as i32), nix::sys::signal::Signal::SIGTERM)
            .unwrap();
        let status = self.child.wait().unwrap();
        (status, started.elapsed())
    }
}

impl Drop for RunningBinary {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
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

#[test]
fn the_token_never_reaches_a_command() {
    let server = start_binary(&[], &[("EXEC_SERVER_TOKEN", "tok-123"), ("EXEC_SERVER_RUNTIME", "node")]);
    let body = json!({"cmd": ["env"]}).to_string();
    let mut socket = std::net::TcpStream::connect(server.addr()).unwrap();
    use std::io::{Read, Write};
    write!(
        socket,
        "POST /exec HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer tok-123\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut response = String::new();
    socket.read_to_string(&mut response).unwrap();
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    assert!(response.contains("PATH="), "env did not run: {response}");
    assert!(!response.contains("tok-123") && !response.contains("EXEC_SERVER_"), "{response}");
}

#[test]
fn sigterm_with_commands_running_leaves_no_processes() {
    let mut server = start_binary(&["--grace", "1"], &[]);
    let markers: Vec<String> = (0..4).map(|_| marker()).collect();
    let mut connections = Vec::new();
    for (i, marker) in markers.iter().enumerate() {
        // Half ignore SIGTERM (they need the SIGKILL after the grace period), and each leaves a grandchild.
        let trap = if i % 2 == 0 { "trap '' TERM;" } else { "" };
        let script = format!("{trap} ({} &); echo started; {}", sleeper(marker), sleeper(marker));
        let mut connection = raw_post(server.addr(), "/exec/stream", &json!({"cmd": ["sh", "-c", script]}).to_string());
        read_until(&mut connection, "started");
        connections.push(connection);
    }
    let (status, took) = server.terminate();
    assert!(status.success(), "{status:?}");
    assert!(took < Duration::from_secs(2), "exit took {took:?}, more than grace + 1 s");
    for marker in &markers {
        assert_no_survivors(marker, Duration::from_millis(500));
    }
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

#[test]
fn token_file_is_read_and_help_names_every_variable() {
    let token = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(token.path(), "from-file\n").unwrap();
    let server = start_binary(&["--token-file", token.path().to_str().unwrap()], &[]);
    let client = reqwest::blocking_free_get(server.port, "/info", Some("from-file"));
    assert!(client.starts_with("HTTP/1.1 200"), "{client}");
    let denied = reqwest::blocking_free_get(server.port, "/info", Some("from-fil"));
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
    ] {
        assert!(help.contains(variable), "--help does not mention {variable}");
    }
    let version = Command::new(BIN).arg("-version").output().unwrap();
    assert!(String::from_utf8_lossy(&version.stdout).contains(env!("CARGO_PKG_VERSION")));
}

/// A tiny raw GET, so the CLI tests need no async runtime.
mod reqwest {
    use std::io::{Read, Write};

    pub fn blocking_free_get(port: u16, path: &str, token: Option<&str>) -> String {
        let mut socket = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        let auth = token.map(|t| format!("Authorization: Bearer {}\r\n", t.trim_end())).unwrap_or_default();
        write!(socket, "GET {path} HTTP/1.1\r\nHost: t\r\n{auth}Connection: close\r\n\r\n").unwrap();
        let mut response = String::new();
        socket.read_to_string(&mut response).unwrap();
        response
    }
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
