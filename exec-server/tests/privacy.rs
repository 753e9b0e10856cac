//! What a command can see of the server that runs it, as the same user: not the spill files of other runs (they
//! have no name), not the server's descriptors, memory or environment (it is not dumpable).

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};

use protocol::ExecReply;
use serde_json::json;

use crate::support::*;

const BIN: &str = env!("CARGO_BIN_EXE_exec-server");

/// The real binary, as user nobody when the tests run as root (root may read any process's files, so as root this
/// would prove nothing), with its state folder named. A run spills a secret to disk; then a command, as the same
/// user as the server, looks for it: the state folder is empty, `/proc/<server>/fd`, `environ` and `mem` are closed
/// to it. A command in a subfolder still starts there (its working directory is entered through the server's
/// descriptor, by `/proc/self` in the child). Before, `ls` showed `secret.0.stdout`, `grep` found the secret, and
/// `/proc/$PPID/fd/N` opened it for writing.
#[tokio::test(flavor = "multi_thread")]
async fn a_command_cannot_reach_another_runs_spill_file_or_the_servers_memory() {
    let as_root = nix::unistd::geteuid().is_root();
    let parent = tempfile::tempdir().unwrap();
    let (workspace, state) = (parent.path().join("workspace"), parent.path().join("state"));
    std::fs::create_dir_all(workspace.join("sub")).unwrap();
    std::fs::set_permissions(parent.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    if as_root {
        for path in [parent.path(), &workspace, &workspace.join("sub")] {
            std::os::unix::fs::chown(path, Some(65534), Some(65534)).unwrap();
        }
    }
    let mut command = Command::new(BIN);
    command
        .args(["--host", "127.0.0.1", "--port", "0", "--run-memory", "262144", "--grace", "0.5", "--cwd"])
        .arg(&workspace)
        .arg("--state-dir")
        .arg(&state)
        .env_remove("EXEC_SERVER_TOKEN")
        .stdout(Stdio::null());
    if as_root {
        command.uid(65534).gid(65534);
    }
    let (mut server, line) = Running::start(command, |line| line.contains("addr="));
    let addr = line.split("addr=").nth(1).unwrap().split_whitespace().next().unwrap().to_owned();
    let client = reqwest::Client::builder().no_proxy().build().unwrap();
    let exec = |body: serde_json::Value| {
        let (client, url) = (client.clone(), format!("http://{addr}/exec"));
        async move {
            let response = client.post(url).body(body.to_string()).send().await.unwrap();
            assert_eq!(response.status(), 200);
            serde_json::from_slice::<ExecReply>(&response.bytes().await.unwrap()).unwrap()
        }
    };

    let secret = format!("SECRET-{}", std::process::id());
    let spill = format!("printf {secret}; head -c 400000 /dev/zero | tr '\\0' x");
    let kept = exec(json!({"cmd": ["sh", "-c", spill], "run_id": "secret"})).await;
    assert!(kept.exit_code == 0 && kept.output.starts_with(&secret) && kept.output.len() == secret.len() + 400_000);

    let state = state.display().to_string();
    let listed = exec(json!({"cmd": ["ls", "-A", state]})).await;
    assert_eq!((listed.exit_code, listed.output.as_str()), (0, ""), "{}", listed.stderr);
    let found = exec(json!({"cmd": ["sh", "-c", format!("grep -rl {secret} {state}")]})).await;
    assert_ne!(found.exit_code, 0, "found: {}", found.output);
    // Reading `mem` fails anyway at offset 0 (nothing is mapped there): "Permission denied" is what tells.
    for (path, script) in
        [("fd", "ls /proc/$PPID/fd"), ("environ", "cat /proc/$PPID/environ"), ("mem", "cat /proc/$PPID/mem")]
    {
        let reply = exec(json!({"cmd": ["sh", "-c", script]})).await;
        assert_ne!(reply.exit_code, 0, "/proc/<server>/{path} is readable: {}", reply.output);
        assert!(reply.stderr.contains("Permission denied"), "{path}: {}", reply.stderr);
    }
    let sub = exec(json!({"cmd": ["pwd"], "cwd": "sub"})).await;
    assert_eq!(sub.output.trim_end(), workspace.join("sub").display().to_string(), "{}", sub.stderr);

    // The server itself still reads the file: the replay is whole.
    let replay = client.get(format!("http://{addr}/runs/secret/stream")).send().await.unwrap();
    let frames = parse_sse(&replay.text().await.unwrap());
    let exit = frames.last().unwrap();
    assert!(
        matches!(exit, protocol::Frame::Exit { data: 0, stdout_bytes: Some(n), .. } if *n == secret.len() as u64 + 400_000),
        "{exit:?}"
    );
    let (status, _) = server.stop_with(nix::sys::signal::Signal::SIGTERM, std::time::Duration::from_secs(20));
    assert!(status.success());
}
