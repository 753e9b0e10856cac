//! Which commands exist (docs/exec-server.md, "Which commands exist"): `/info` lists the runtime's commands the
//! server's PATH holds (looked up again after at most 10 s), and a command that never started says why in
//! `start_error`, in the reply and the stream.

use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Stdio};

use protocol::{ExecReply, Frame, Info, StartErrorKind};
use serde_json::json;

use crate::support::*;

/// The same PATH the shell searches: `/info` names exactly the table's commands `command -v` finds.
#[tokio::test(flavor = "multi_thread")]
async fn info_lists_the_commands_the_shell_finds() {
    for runtime in ["python", "node", "rust"] {
        let server = server().arg("--runtime", runtime).start().await;
        let response = server.client().get(format!("{}/info", server.url)).send().await.unwrap();
        let info: Info = serde_json::from_slice(&response.bytes().await.unwrap()).unwrap();
        let native: Vec<String> = protocol::commands_for(runtime)
            .unwrap()
            .iter()
            .filter(|name| {
                Command::new("sh")
                    .args(["-c", &format!("command -v {name}")])
                    .stdout(Stdio::null())
                    .status()
                    .unwrap()
                    .success()
            })
            .map(|name| (*name).to_owned())
            .collect();
        assert_eq!(info.commands, Some(native), "{runtime}");
        server.stop().await;
    }
    let server = server().arg("--runtime", "cobol").start().await;
    let info = server.client().get(format!("{}/info", server.url)).send().await.unwrap().text().await.unwrap();
    assert!(!info.contains("commands"), "a runtime the table does not know: nothing said: {info}");
    server.stop().await;
}

/// A command installed while the server runs is listed once the last look is 10 s old.
#[tokio::test(flavor = "multi_thread")]
async fn a_command_installed_later_is_listed_after_the_refresh() {
    let bin = tempfile::tempdir().unwrap();
    let workspace = tempfile::tempdir().unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_exec-server"));
    command
        .args(["--host", "127.0.0.1", "--port", "0", "--runtime", "go", "--cwd"])
        .arg(workspace.path())
        .env_clear()
        .env("PATH", bin.path())
        .stdout(Stdio::null());
    let (_server, line) = Running::start(command, |line| line.contains("addr="));
    let addr = line.split("addr=").nth(1).unwrap().split_whitespace().next().unwrap().to_owned();
    let info = || {
        let response = raw_request(addr.parse().unwrap(), "GET", "/info", None, "");
        let body = response.split_once("\r\n\r\n").unwrap().1;
        serde_json::from_str::<Info>(body).unwrap().commands
    };
    assert_eq!(info(), Some(vec![]), "an empty PATH folder: none of go's commands");
    let gofmt = bin.path().join("gofmt");
    std::fs::write(&gofmt, "#!/bin/sh\n").unwrap();
    std::fs::set_permissions(&gofmt, std::fs::Permissions::from_mode(0o755)).unwrap();
    wait_until("gofmt to be listed", || info() == Some(vec!["gofmt".to_owned()]));
}

/// A command that never started says why: in the reply, in the stream's error frame, and in a named run's reply.
#[tokio::test(flavor = "multi_thread")]
async fn a_command_that_never_started_names_why() {
    let server = server().start().await;
    let script = server.workspace.path().join("not-executable");
    std::fs::write(&script, "#!/bin/sh\n").unwrap();
    let cases = [
        (json!({"cmd": ["no-such-program-22"]}), StartErrorKind::NotFound),
        (json!({"cmd": ["./not-executable"]}), StartErrorKind::PermissionDenied),
        (json!({"cmd": ["true"], "cwd": "missing"}), StartErrorKind::Cwd),
        (json!({"cmd": ["no-such-program-22"], "run_id": "never-1"}), StartErrorKind::NotFound),
    ];
    for (request, kind) in cases {
        let reply: ExecReply = server.exec(request.clone()).await;
        assert_eq!((reply.exit_code, reply.start_error), (-1, Some(kind)), "{request}");
        let mut request = request;
        if request.get("run_id").is_some() {
            request["run_id"] = json!("never-2");
        }
        let frames = server.stream(request.clone()).await;
        assert!(matches!(&frames[0], Frame::Error { start_error: Some(found), .. } if *found == kind), "{frames:?}");
        assert_eq!(exit_frame(&frames).0, -1);
    }
    let ran = server.stream(json!({"cmd": ["sh", "-c", "exit 127"]})).await;
    assert!(ran.iter().all(|frame| !matches!(frame, Frame::Error { .. })), "a command's own 127 is no start error");
    server.stop().await;
}
