//! The wrapper installer and the wrappers it writes.

use crate::support::*;

#[tokio::test(flavor = "multi_thread")]
async fn native_commands_win_and_stale_wrappers_go() {
    let scratch = tempfile::tempdir().unwrap();
    let wrappers = scratch.path().join("wrappers");
    let native = scratch.path().join("native-bin");
    executable(&native, "node", "#!/bin/sh\necho native\n");
    executable(&native, "go", "#!/bin/sh\necho native\n");
    // An executable in the wrapper folder itself does not count as native.
    executable(&wrappers, "npx", "#!/bin/sh\necho native\n");
    let path = format!("{}:{}", wrappers.display(), native.display());
    let install = |sidecars: &str| {
        client_run()
            .env("PATH", &path)
            .env("BUILD_SIDECARS", sidecars)
            .args(["--install-wrappers", wrappers.to_str().unwrap()])
            .run()
    };
    let output = install(r#"{"node":{"internal_url":"http://x:1"},"go":{"internal_url":"http://y:1"}}"#).await;
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    // go and node are native; npx (not ours) was overwritten by our wrapper since it is not native outside DIR.
    assert_eq!(names(&wrappers), ["gofmt", "npm", "npx", "pnpm", "yarn"]);
    assert!(stderr(&output).contains("native, not wrapped [go node]"), "{}", stderr(&output));

    // A file of someone else's stays; our wrappers for runtimes no longer configured go.
    std::fs::write(wrappers.join("README"), "not a wrapper\n").unwrap();
    let output = install(r#"{"python":{"internal_url":"http://z:1"}}"#).await;
    assert_eq!(output.status.code(), Some(0));
    assert_eq!(
        names(&wrappers),
        ["README", "black", "mypy", "pip", "pip3", "poetry", "pytest", "python", "python3", "ruff"]
    );
    assert!(stderr(&output).contains("removed [gofmt npm npx pnpm yarn]"), "{}", stderr(&output));

    // No BUILD_SIDECARS at all: not an error (an agent image may run without builders), every wrapper of ours goes,
    // and one line says what happened and what to set.
    let output = client_run().env("PATH", &path).args(["--install-wrappers", wrappers.to_str().unwrap()]).run().await;
    assert_eq!(output.status.code(), Some(0));
    let message = stderr(&output);
    assert_eq!(message.lines().count(), 1, "{message}");
    assert!(
        message.starts_with("sidecar-exec: BUILD_SIDECARS is not set, so no build sidecar is configured: no wrappers")
            && message.contains("removed the stale ones [black mypy pip pip3 poetry pytest python python3 ruff]")
            && message.contains("set BUILD_SIDECARS"),
        "{message}"
    );
    assert_eq!(names(&wrappers), ["README"]);
}

/// The wrapper folder is writable by the agent's user, and so by anything running as that user: a name planted there
/// beforehand must not redirect the installer's writes. The installer used to write through `.{command}.tmp`, a
/// name known in advance: a symlink planted under it made the installer overwrite the file it pointed to.
#[tokio::test(flavor = "multi_thread")]
async fn a_planted_temporary_name_redirects_nothing() {
    use std::os::unix::fs::PermissionsExt;
    let scratch = tempfile::tempdir().unwrap();
    let wrappers = scratch.path().join("wrappers");
    std::fs::create_dir(&wrappers).unwrap();
    let canary = scratch.path().join("canary");
    std::fs::write(&canary, "canary\n").unwrap();
    for command in ["go", "gofmt"] {
        std::os::unix::fs::symlink(&canary, wrappers.join(format!(".{command}.tmp"))).unwrap();
    }
    let output = client_run()
        .env("BUILD_SIDECARS", r#"{"go":{"internal_url":"http://x:1"}}"#)
        .env("PATH", "/nonexistent")
        .args(["--install-wrappers", wrappers.to_str().unwrap()])
        .run()
        .await;
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(std::fs::read_to_string(&canary).unwrap(), "canary\n", "written through a planted symlink");
    for command in ["go", "gofmt"] {
        let meta = std::fs::symlink_metadata(wrappers.join(command)).unwrap();
        assert!(meta.is_file(), "{command} is not a regular file");
        assert_eq!(meta.permissions().mode() & 0o7777, 0o755, "{command}");
    }
    // The planted names are left alone (not ours to remove), and no temporary of the installer is left.
    assert_eq!(names(&wrappers), [".go.tmp", ".gofmt.tmp", "go", "gofmt"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unwritable_folder_is_refused_loudly() {
    let scratch = tempfile::tempdir().unwrap();
    let file = scratch.path().join("a-file");
    std::fs::write(&file, "").unwrap();
    let output = client_run()
        .env("BUILD_SIDECARS", r#"{"go":{"internal_url":"http://x:1"}}"#)
        .env("PATH", "/nonexistent")
        .args(["--install-wrappers", file.join("wrappers").to_str().unwrap()])
        .run()
        .await;
    assert_eq!(output.status.code(), Some(1));
    assert!(stderr(&output).starts_with("sidecar-exec: FATAL: cannot write wrappers to"), "{}", stderr(&output));
    assert!(stderr(&output).contains("uid"));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_generated_wrapper_forwards_with_arguments_intact() {
    let server = server().await;
    let wrappers = server.workspace.path().join(".wrappers");
    let empty = tempfile::tempdir().unwrap();
    let sidecars = format!(r#"{{"python":{{"internal_url":"{}"}}}}"#, server.url);
    let output = client_run()
        .env("PATH", empty.path().to_str().unwrap())
        .env("BUILD_SIDECARS", &sidecars)
        .args(["--install-wrappers", wrappers.to_str().unwrap()])
        .run()
        .await;
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let wrapper = std::fs::read_to_string(wrappers.join("python3")).unwrap();
    assert!(
        wrapper.starts_with("#!/bin/sh\n") && wrapper.contains("exec '") && wrapper.contains("python python3 \"$@\"")
    );

    let tricky = ["a b", "it's", "\"quoted\"", "", "$HOME", "*", "line\nbreak", "-c"];
    let script = "import json, os, sys; print(json.dumps(sys.argv[1:])); print(os.getcwd())";
    let args = ["-c", script].into_iter().chain(tricky);
    let output = run_wrapper(&wrappers, "python3", args, empty.path(), &sidecars, server.workspace.path()).await;
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let mut lines = stdout.lines();
    let argv: Vec<String> = serde_json::from_str(lines.next().unwrap()).unwrap();
    assert_eq!(argv, tricky);
    assert_eq!(lines.next().unwrap(), server.workspace.path().canonicalize().unwrap().display().to_string());
    server.stop().await;
}

#[test]
fn every_runtime_in_the_table_gets_wrappers() {
    let scratch = tempfile::tempdir().unwrap();
    let sidecars: String = format!(
        "{{{}}}",
        protocol::RUNTIMES
            .iter()
            .map(|(runtime, _)| format!(r#""{runtime}":{{"internal_url":"http://builder-{runtime}:8080"}}"#))
            .collect::<Vec<_>>()
            .join(",")
    );
    let status = std::process::Command::new(BIN)
        .env_clear()
        .env("PATH", "/nonexistent")
        .env("BUILD_SIDECARS", sidecars)
        .args(["--install-wrappers", scratch.path().to_str().unwrap()])
        .output()
        .unwrap();
    assert!(status.status.success());
    let mut expected: Vec<String> =
        protocol::RUNTIMES.iter().flat_map(|(_, commands)| commands.iter().map(|c| (*c).to_owned())).collect();
    expected.sort();
    assert_eq!(names(scratch.path()), expected);
}

const ENTRYPOINT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../wrappers/entrypoint.sh");

#[tokio::test(flavor = "multi_thread")]
async fn the_entrypoint_installs_wrappers_then_becomes_the_command() {
    let scratch = tempfile::tempdir().unwrap();
    let wrappers = scratch.path().join("wrappers");
    let empty = scratch.path().join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let output = tokio::process::Command::new(ENTRYPOINT)
        .args(["/bin/sh", "-c", "echo \"$PATH\"; command -v go"])
        .env_clear()
        .env("PATH", &empty)
        .env("BUILD_SIDECARS", r#"{"go":{"internal_url":"http://builder-go:8080"}}"#)
        .env("SIDECAR_WRAPPERS_DIR", &wrappers)
        .env("SIDECAR_EXEC", BIN)
        .output()
        .await
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let mut lines = stdout.lines();
    let canonical = wrappers.canonicalize().unwrap();
    assert_eq!(lines.next().unwrap(), format!("{}:{}", wrappers.display(), empty.display()));
    assert_eq!(lines.next().unwrap(), canonical.join("go").display().to_string());

    // A folder that cannot be written stops the container before its command runs.
    let blocker = scratch.path().join("file");
    std::fs::write(&blocker, "").unwrap();
    let output = tokio::process::Command::new(ENTRYPOINT)
        .args(["echo", "must not run"])
        .env_clear()
        .env("BUILD_SIDECARS", r#"{"go":{"internal_url":"http://builder-go:8080"}}"#)
        .env("SIDECAR_WRAPPERS_DIR", blocker.join("wrappers"))
        .env("SIDECAR_EXEC", BIN)
        .output()
        .await
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert!(output.stdout.is_empty());
    assert!(stderr(&output).contains("FATAL"), "{}", stderr(&output));
}

/// The entrypoint execs its command: the command replaces the shell (same pid) and gets signals directly.
#[tokio::test(flavor = "multi_thread")]
async fn the_entrypoint_execs_rather_than_forks() {
    let scratch = tempfile::tempdir().unwrap();
    let child = tokio::process::Command::new(ENTRYPOINT)
        .args(["sh", "-c", "echo $$"])
        .env_clear()
        .env("SIDECAR_WRAPPERS_DIR", scratch.path().join("w"))
        .env("SIDECAR_EXEC", BIN)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id().unwrap();
    let output = child.wait_with_output().await.unwrap();
    assert_eq!(String::from_utf8_lossy(&output.stdout).trim(), pid.to_string());
}

/// Whether the agent's shell finds `command` on `path`, and what running it gives when it does not: `command -v`'s
/// status and bash's for a call (127 for a command not found). Run the same way natively and through the wrappers.
async fn shell_finds(command: &str, path: &str) -> (Option<i32>, Option<i32>) {
    let run = |script: String| {
        tokio::process::Command::new("/bin/bash").args(["-c", &script]).env_clear().env("PATH", path).output()
    };
    let found = run(format!("command -v {command} >/dev/null")).await.unwrap().status.code();
    let called = match found {
        Some(0) => None,
        _ => run(format!("{command} --version")).await.unwrap().status.code(),
    };
    (found, called)
}

/// Only what the builder has is wrapped. The installer asks each real server's `/info`, whose `commands` are those
/// of its runtime on the server's PATH, here this test's own: so the builder's truth is what bash finds on this
/// PATH, and through the wrappers bash must find exactly that: `command -v` fails and a call gives 127 for what the
/// builder lacks, as natively. With SSH_HOST also set, what a builder lacks goes to the host instead.
#[tokio::test(flavor = "multi_thread")]
async fn only_commands_the_builder_has_are_wrapped() {
    let node = server_with(&["--runtime", "node"], None).await;
    let rust = server_with(&["--runtime", "rust"], None).await;
    let scratch = tempfile::tempdir().unwrap();
    let wrappers = scratch.path().join("wrappers");
    let empty = scratch.path().join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let sidecars = format!(r#"{{"node":{{"internal_url":"{}"}},"rust":{{"internal_url":"{}"}}}}"#, node.url, rust.url);
    let builder_path = std::env::var("PATH").unwrap();
    let table: Vec<&str> =
        ["node", "rust"].iter().flat_map(|rt| protocol::commands_for(rt).unwrap().to_vec()).collect();
    let mut has = Vec::new();
    let mut lacks = Vec::new();
    for command in &table {
        match shell_finds(command, &builder_path).await {
            (Some(0), _) => has.push(command.to_string()),
            _ => lacks.push(command.to_string()),
        }
    }
    assert!(!lacks.is_empty(), "this machine has every command of node and rust ({has:?}): nothing to prove");

    let install = |ssh_host: Option<&str>| {
        let client = client_run().env("PATH", &empty).env("BUILD_SIDECARS", &sidecars);
        let client = match ssh_host {
            Some(host) => client.env("SSH_HOST", host),
            None => client,
        };
        client.args(["--install-wrappers", wrappers.to_str().unwrap()]).run()
    };
    let output = install(None).await;
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let message = stderr(&output);
    assert_eq!(message.lines().count(), 1, "{message}");
    let mut sorted = has.clone();
    sorted.sort();
    assert_eq!(names(&wrappers), sorted, "{message}");
    assert!(message.contains(&format!("not on the builder, not wrapped [{}]", lacks.join(" "))), "{message}");
    let through_wrappers = format!("{}:{}", wrappers.display(), empty.display());
    for command in &table {
        let native = shell_finds(command, &builder_path).await;
        assert_eq!(shell_finds(command, &through_wrappers).await, native, "{command}");
    }

    // With the SSH host configured, a command the builder lacks falls through to it.
    let output = install(Some("build-mac")).await;
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let message = stderr(&output);
    assert!(message.contains("not on the builder, not wrapped []"), "{message}");
    for command in &lacks {
        let wrapper = std::fs::read_to_string(wrappers.join(command)).unwrap();
        assert!(wrapper.contains(&format!("ssh-exec' -- {command} ")), "{command}: {wrapper}");
    }
    node.stop().await;
    rust.stop().await;
}

/// A sidecar that accepts the connection and never answers (a builder still starting) costs the installer at most
/// its 2 s bound: its whole table is wrapped, with one line that says so.
#[tokio::test(flavor = "multi_thread")]
async fn a_sidecar_that_does_not_answer_gets_its_whole_table_and_one_line() {
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let scratch = tempfile::tempdir().unwrap();
    let wrappers = scratch.path().join("wrappers");
    let sidecars = format!(r#"{{"go":{{"internal_url":"http://{}"}}}}"#, silent.local_addr().unwrap());
    let output = client_run()
        .env("PATH", "/nonexistent")
        .env("BUILD_SIDECARS", &sidecars)
        .args(["--install-wrappers", wrappers.to_str().unwrap()])
        .run()
        .await;
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let message = stderr(&output);
    let lines: Vec<&str> = message.lines().collect();
    assert_eq!(lines.len(), 2, "{message}");
    assert!(
        lines[0].starts_with("sidecar-exec: the go sidecar gave no /info (no answer within 2 s)")
            && lines[0].contains("wrapping all its commands [go gofmt]"),
        "{message}"
    );
    assert_eq!(names(&wrappers), ["go", "gofmt"]);
    drop(silent);
}
