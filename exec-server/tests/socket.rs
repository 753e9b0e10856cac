//! `--listen unix:PATH`: the real binary on a UNIX socket only: mode, health probe, the same connection limits as
//! TCP, a stale socket replaced, the socket removed on shutdown.

use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::support::{raw_exchange, Running};

const BIN: &str = env!("CARGO_BIN_EXE_exec-server");

/// Starts the binary on `socket` only and waits for its listening line; returns it and that line.
fn start(workspace: &std::path::Path, socket: &std::path::Path, extra: &[&str]) -> (Running, String) {
    let mut command = Command::new(BIN);
    command
        .args(["--grace", "0.5", "--cwd"])
        .arg(workspace)
        .arg("--listen")
        .arg(format!("unix:{}", socket.display()))
        .args(extra)
        .env_remove("EXEC_SERVER_PORT")
        .env_remove("EXEC_SERVER_TOKEN")
        .stdout(Stdio::null());
    Running::start(command, |line| line.contains("exec-server listening"))
}

/// Raw bytes on the socket, and everything the server sends back until it closes.
fn request(socket: &std::path::Path, raw: &str) -> String {
    use std::io::{Read, Write};
    let mut stream = UnixStream::connect(socket).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    stream.write_all(raw.as_bytes()).unwrap();
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response);
    response
}

fn terminate(server: &mut Running) {
    let (status, _) = server.stop_with(nix::sys::signal::Signal::SIGTERM, Duration::from_secs(20));
    assert!(status.success());
}

#[test]
fn a_socket_only_server_serves_probes_limits_and_cleans_up() {
    let workspace = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("exec.sock");
    // A stale socket file, as a server killed by SIGKILL leaves it.
    drop(std::os::unix::net::UnixListener::bind(&socket).unwrap());
    let (mut server, listening) = start(workspace.path(), &socket, &["--header-timeout", "0.5"]);
    assert!(listening.contains("addr=none"), "no TCP port without --port: {listening}");
    assert_eq!(std::fs::metadata(&socket).unwrap().permissions().mode() & 0o777, 0o660);

    let unix = UnixStream::connect(&socket).unwrap();
    let reply = raw_exchange(unix, "POST", "/exec", "", r#"{"cmd":["sh","-c","printf unix"]}"#);
    assert!(reply.starts_with("HTTP/1.1 200") && reply.contains("\"output\":\"unix\""), "{reply}");
    // The same connection limits as TCP: a head that does not arrive in time gets 408.
    let slow = request(&socket, "GET /health HTTP/1.1\r\nHost:");
    assert!(slow.starts_with("HTTP/1.1 408"), "{slow}");

    let probe = Command::new(BIN)
        .arg("-healthcheck")
        .arg("--listen")
        .arg(format!("unix:{}", socket.display()))
        .env_remove("EXEC_SERVER_PORT")
        .output()
        .unwrap();
    assert!(probe.status.success(), "{}", String::from_utf8_lossy(&probe.stderr));

    // A second server refuses a live socket rather than stealing it.
    let second = Command::new(BIN)
        .args(["--cwd"])
        .arg(workspace.path())
        .arg("--listen")
        .arg(format!("unix:{}", socket.display()))
        .env_remove("EXEC_SERVER_PORT")
        .output()
        .unwrap();
    assert!(!second.status.success());
    assert!(String::from_utf8_lossy(&second.stderr).contains("in use"), "{second:?}");

    terminate(&mut server);
    assert!(!socket.exists(), "the socket is removed on shutdown");
}

#[test]
fn socket_mode_is_configurable() {
    let workspace = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("exec.sock");
    let (mut server, _) = start(workspace.path(), &socket, &["--socket-mode", "600"]);
    assert_eq!(std::fs::metadata(&socket).unwrap().permissions().mode() & 0o777, 0o600);
    terminate(&mut server);
}

/// The socket is made where nobody else can reach it, given its mode there, and only then moved into place: its name
/// appears by a rename, never by a create, and is never chmod-ed (before, it was bound at the path with the umask's
/// mode and chmod-ed there by path, which follows a symlink put in its place meanwhile).
#[test]
fn the_socket_appears_with_its_mode_by_a_rename() {
    use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify};
    let workspace = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("exec.sock");
    let inotify = Inotify::init(InitFlags::IN_NONBLOCK).unwrap();
    let watched = AddWatchFlags::IN_CREATE | AddWatchFlags::IN_MOVED_TO | AddWatchFlags::IN_ATTRIB;
    inotify.add_watch(dir.path(), watched).unwrap();
    let (mut server, _) = start(workspace.path(), &socket, &["--socket-mode", "0640"]);
    // The listening line comes after the socket is in place: every event of its making is queued by now.
    let events: Vec<(AddWatchFlags, String)> = inotify
        .read_events()
        .unwrap_or_default()
        .into_iter()
        .map(|event| (event.mask, event.name.map(|name| name.to_string_lossy().into_owned()).unwrap_or_default()))
        .collect();
    let on_socket: Vec<AddWatchFlags> =
        events.iter().filter(|(_, name)| name == "exec.sock").map(|(mask, _)| *mask).collect();
    assert_eq!(on_socket, [AddWatchFlags::IN_MOVED_TO], "events in the folder: {events:?}");
    assert_eq!(std::fs::metadata(&socket).unwrap().permissions().mode() & 0o777, 0o640);
    let staging_left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|entry| entry.unwrap().file_name()).collect();
    assert_eq!(staging_left, ["exec.sock"], "the private folder it was made in is gone");
    terminate(&mut server);
}

/// The in-process server returns from `start` only once its UNIX socket listens: a connect right after it succeeds.
/// On a current-thread runtime nothing else runs between the two, so a socket bound later (by the serving task, as
/// before) is never there yet.
#[tokio::test(flavor = "current_thread")]
async fn the_in_process_server_listens_on_its_unix_socket_when_start_returns() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("exec.sock");
    let server = crate::support::server().arg("--listen", &format!("unix:{}", socket.display())).start().await;
    let unix = UnixStream::connect(&socket).expect("the socket listens once start returned");
    // Read on a blocking thread: this runtime's one thread serves the request meanwhile.
    let reply = tokio::task::spawn_blocking(move || raw_exchange(unix, "GET", "/health", "", "")).await.unwrap();
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
    server.stop().await;
}
