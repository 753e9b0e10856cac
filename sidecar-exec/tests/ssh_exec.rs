//! ssh-exec against a real sshd: output, exit codes, transport failures, paths, environment, quoting, stdin,
//! --check, --probe and auto-run.

use std::process::Stdio;
use std::time::Duration;

use crate::sshd::*;

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs sshd (Debian's openssh-server); CI runs it"]
async fn output_and_exit_codes_are_the_commands() {
    let sshd = sshd!();
    let blob = testkit::random_bytes(300_000, 5);
    std::fs::write(sshd.host_cwd.path().join("blob"), &blob).unwrap();
    let output = sshd.client().args(["sh", "-c", "cat blob; cat blob >&2; printf 'no newline' >&2"]).run().await;
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(output.stdout == blob, "stdout differs");
    assert!(output.stderr[..blob.len()] == blob[..] && output.stderr.ends_with(b"no newline"), "stderr differs");
    assert_eq!(output.stderr.len(), blob.len() + 10, "nothing added to stderr");

    let cases: [(&str, i32); 5] =
        [("exit 0", 0), ("exit 7", 7), ("kill -SEGV $$", 139), ("kill -KILL $$", 137), ("exit 255", 255)];
    for (script, code) in cases {
        let output = sshd.client().args(["sh", "-c", script]).run().await;
        assert_eq!(output.status.code(), Some(code), "{script}: {}", stderr(&output));
        // A remote 255 is the command's: no ssh-exec line, unlike a transport failure.
        assert_eq!(stderr(&output), "", "{script}");
    }
    let output = sshd.client().args(["no-such-command-xyz"]).run().await;
    assert_eq!(output.status.code(), Some(127));
    assert!(stderr(&output).contains("no-such-command-xyz") && !stderr(&output).contains("ssh-exec:"));
}

/// A reader slower than the command: the command and ssh have ended and the exit line is in, but the end of the
/// output still waits for the reader. All of it arrives, and the exit code is the command's. (Before issue 26 a
/// reader that waited more than ~2.3 s lost the last 18 928 bytes: the stop session's deadline ended the call.)
#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs sshd (Debian's openssh-server); CI runs it"]
async fn a_slow_reader_gets_all_the_output() {
    let sshd = sshd!();
    // 150 000 bytes fit in the pipes between the host's command and the reader (ssh's stdout, ssh-exec's copy
    // buffer, the reader's pipe: 64 KiB each), so ssh can end while nothing is read.
    let blob = testkit::random_bytes(150_000, 9);
    std::fs::write(sshd.host_cwd.path().join("blob"), &blob).unwrap();
    let fifo = sshd.host_cwd.path().join("go");
    testkit::mkfifo(&fifo);
    let child = sshd.client().args(["sh", "-c", "cat blob; read line < go"]).spawn();
    let pid = child.id().unwrap();
    // The command has written everything when it opens the FIFO; it ends when the test writes a line.
    let opened = tokio::task::spawn_blocking(move || std::fs::write(fifo, "go\n"));
    tokio::time::timeout(Duration::from_secs(30), opened)
        .await
        .expect("the command never got to the FIFO")
        .unwrap()
        .unwrap();
    // The stall, by its events: ssh (and any session ssh-exec started) has ended, and ssh-exec waits on us, blocked
    // writing its stdout. From there ssh-exec has no deadline left (a call whose ssh ended and that nobody stopped
    // waits only for its reader; the unit tests of ssh/session.rs pass every deadline on a paused clock), so when
    // this reader starts does not matter.
    testkit::wait_until("ssh to end", || testkit::children_of(pid).is_empty());
    testkit::wait_until("ssh-exec to wait on its reader", || blocked_writing(pid));
    let output = tokio::time::timeout(Duration::from_secs(30), child.wait_with_output()).await.unwrap().unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(output.stdout.len(), blob.len(), "bytes read");
    assert!(output.stdout == blob, "stdout differs");
}

/// Whether a thread of process `pid` is blocked writing to a full pipe (the kernel's wait channel says so).
fn blocked_writing(pid: u32) -> bool {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).into_iter().flatten().flatten();
    tasks
        .into_iter()
        .any(|task| std::fs::read_to_string(task.path().join("wchan")).is_ok_and(|w| w.contains("pipe_write")))
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs sshd (Debian's openssh-server); CI runs it"]
async fn transport_failures_are_told_apart_from_a_remote_255() {
    let mut sshd = sshd!();
    let one_line = |output: &std::process::Output, needle: &str| {
        let text = stderr(output);
        assert_eq!(output.status.code(), Some(255), "{text}");
        assert_eq!(text.lines().count(), 1, "{text}");
        assert!(
            text.starts_with("ssh-exec: connection failed, the command did not run: ") && text.contains(needle),
            "{text}"
        );
    };
    // A key the host does not know.
    let stranger = stranger_key(sshd.dir.path());
    let output = sshd.client().env("SSH_KEY_PATH", &stranger).args(["true"]).run().await;
    one_line(&output, "refused the login with the key");

    // A host key other than the recorded one.
    let other = sshd.path("other_known_hosts");
    let fake = std::fs::read_to_string(format!("{}.pub", stranger.display())).unwrap();
    let fake: Vec<&str> = fake.split_whitespace().take(2).collect();
    std::fs::write(&other, format!("[127.0.0.1]:{} {}\n", sshd.port, fake.join(" "))).unwrap();
    let output = sshd.client().env("SSH_KNOWN_HOSTS", &other).args(["true"]).run().await;
    one_line(&output, "does not match the one in SSH_KNOWN_HOSTS");

    // A stopped sshd (the shared master goes with it).
    let works = sshd.client().args(["true"]).run().await;
    assert_eq!(works.status.code(), Some(0), "{}", stderr(&works));
    sshd.stop();
    let output = sshd.client().args(["true"]).run().await;
    one_line(&output, "refused the connection");
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs sshd (Debian's openssh-server); CI runs it"]
async fn the_cwd_and_workspace_arguments_are_mapped_and_outside_refused() {
    let sshd = sshd!();
    let (workspace, host) = (sshd.workspace.path(), sshd.host_cwd.path());
    std::fs::create_dir_all(workspace.join("sub")).unwrap();
    std::fs::create_dir_all(host.join("sub")).unwrap();
    std::fs::write(host.join("sub/file"), "on the host\n").unwrap();
    let arg = format!("{}/sub/file", workspace.display());
    let flag = format!("--out={}/sub", workspace.display());
    let output = sshd
        .client()
        .current_dir(&workspace.join("sub"))
        .args(["sh", "-c", "pwd; cat \"$1\"; echo \"$2\"", "sh", &arg, &flag])
        .run()
        .await;
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let host = host.canonicalize().unwrap();
    assert_eq!(stdout(&output), format!("{0}/sub\non the host\n--out={0}/sub\n", host.display()));

    // Outside the workspace: refused before connecting.
    let elsewhere = tempfile::tempdir().unwrap();
    let output = sshd.client().current_dir(elsewhere.path()).args(["true"]).run().await;
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).starts_with("ssh-exec: the current directory")
            && stderr(&output).contains("outside the workspace")
    );

    // A folder the host does not have.
    std::fs::create_dir_all(workspace.join("only-here")).unwrap();
    let output = sshd.client().current_dir(&workspace.join("only-here")).args(["true"]).run().await;
    assert_eq!(output.status.code(), Some(1));
    assert!(stderr(&output).contains("does not exist on 127.0.0.1"), "{}", stderr(&output));
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs sshd (Debian's openssh-server); CI runs it"]
async fn only_listed_variables_arrive() {
    let sshd = sshd!();
    let value = "it's $HOME; `id`\nsecond line";
    let output = sshd
        .client()
        .env("LISTED", value)
        .env("UNLISTED", "secret")
        .env("SSH_ENV_PASSTHROUGH", "LISTED, ALSO_LISTED")
        .args(["sh", "-c", "printf '%s|%s|%s' \"$LISTED\" \"${UNLISTED-unset}\" \"${ALSO_LISTED-unset}\""])
        .run()
        .await;
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(stdout(&output), format!("{value}|unset|unset"));

    let output = sshd.client().env("SSH_ENV_PASSTHROUGH", "OK,NOT-A-NAME").args(["true"]).run().await;
    assert_eq!(output.status.code(), Some(1));
    assert!(stderr(&output).contains("\"NOT-A-NAME\", which is not a variable name"), "{}", stderr(&output));
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs sshd (Debian's openssh-server); CI runs it"]
async fn hostile_arguments_stay_literal() {
    let sshd = sshd!();
    let hostile = [
        "; touch pwned1",
        "$(touch pwned2)",
        "`touch pwned3`",
        "a\nb\n",
        "'",
        "\"",
        "*",
        "",
        "-n",
        "\\",
        "$HOME",
        "x' ; touch pwned4 ; '",
        "é ✓",
    ];
    let output = sshd.client().args(["printf", "%s\\0"]).args(hostile).run().await;
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let back: Vec<&str> = std::str::from_utf8(&output.stdout).unwrap().split_terminator('\0').collect();
    assert_eq!(back, hostile);
    let created: Vec<_> = std::fs::read_dir(sshd.host_cwd.path()).unwrap().collect();
    assert!(created.is_empty(), "{created:?}");
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs sshd (Debian's openssh-server); CI runs it"]
async fn stdin_is_forwarded_from_a_file_or_when_asked() {
    let sshd = sshd!();
    let data = testkit::random_bytes(200_000, 9);
    let file = sshd.path("input");
    std::fs::write(&file, &data).unwrap();
    let output = sshd.client().stdin(Stdio::from(std::fs::File::open(&file).unwrap())).args(["cat"]).run().await;
    assert_eq!(output.status.code(), Some(0));
    assert!(output.stdout == data, "a regular file is forwarded byte for byte");

    // A pipe that never closes is not read: the command sees end of file at once, and a hint names SSH_STDIN.
    let mut child = sshd.client().stdin(Stdio::piped()).args(["sh", "-c", "wc -c"]).spawn();
    let mut pipe = child.stdin.take().unwrap();
    tokio::io::AsyncWriteExt::write_all(&mut pipe, b"unread").await.unwrap();
    let output = tokio::time::timeout(Duration::from_secs(30), child.wait_with_output()).await.unwrap().unwrap();
    assert_eq!(stdout(&output).trim(), "0");
    assert!(stderr(&output).contains("SSH_STDIN=1"), "{}", stderr(&output));
    drop(pipe);

    // SSH_STDIN=1: the pipe is the command's.
    let mut child = sshd.client().env("SSH_STDIN", "1").stdin(Stdio::piped()).args(["cat"]).spawn();
    let mut pipe = child.stdin.take().unwrap();
    tokio::io::AsyncWriteExt::write_all(&mut pipe, b"through a pipe").await.unwrap();
    drop(pipe);
    let output = tokio::time::timeout(Duration::from_secs(30), child.wait_with_output()).await.unwrap().unwrap();
    assert_eq!(stdout(&output), "through a pipe");
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs sshd (Debian's openssh-server); CI runs it"]
async fn check_and_probe() {
    let sshd = sshd!();
    let output = sshd.client().args(["--check"]).run().await;
    assert_eq!((output.status.code(), stdout(&output).as_str(), stderr(&output).as_str()), (Some(0), "ok\n", ""));
    let output = sshd.client().args(["--probe", "sh", "no-such-tool-xyz", "cat"]).run().await;
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(stdout(&output), "sh\ncat\n");
    // --check fails like a command: here on a cwd the host lacks.
    std::fs::create_dir_all(sshd.workspace.path().join("missing")).unwrap();
    let output = sshd.client().current_dir(&sshd.workspace.path().join("missing")).args(["--check"]).run().await;
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(stdout(&output), "");
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs sshd (Debian's openssh-server); CI runs it"]
async fn auto_run_runs_what_this_machine_can_execute_here_and_the_rest_on_the_host() {
    let sshd = sshd!();
    let (workspace, host) = (sshd.workspace.path(), sshd.host_cwd.path());
    // A Mach-O file in the workspace (what a macOS host builds): not for this machine, so it runs on the host,
    // where (this test's host being Linux) the same path holds a script.
    std::fs::write(workspace.join("app"), [0xcf, 0xfa, 0xed, 0xfe, 7, 0, 0, 1, 3, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0])
        .unwrap();
    std::fs::write(host.join("app"), "#!/bin/sh\necho \"on the host in $(pwd) with $*\"\n").unwrap();
    for file in [workspace.join("app"), host.join("app")] {
        std::fs::set_permissions(&file, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    }
    let output = sshd.client().args(["--auto-run", "./app", "x"]).run().await;
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(stdout(&output), format!("on the host in {} with x\n", host.canonicalize().unwrap().display()));

    // An ELF for this CPU runs here, in the local cwd.
    let output = sshd.client().args(["--auto-run", "pwd"]).run().await;
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(stdout(&output).trim(), workspace.canonicalize().unwrap().display().to_string());
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs sshd (Debian's openssh-server); CI runs it"]
async fn without_a_control_socket_calls_connect_directly() {
    let sshd = sshd!();
    let blocker = sshd.path("a-file");
    std::fs::write(&blocker, "").unwrap();
    for (name, value) in [("XDG_RUNTIME_DIR", blocker.to_str().unwrap()), ("SSH_CONTROL_PERSIST", "0")] {
        let output = sshd.client().env(name, value).args(["sh", "-c", "echo direct; exit 4"]).run().await;
        assert_eq!(output.status.code(), Some(4), "{name}: {}", stderr(&output));
        assert_eq!((stdout(&output).as_str(), stderr(&output).as_str()), ("direct\n", ""), "{name}");
    }
    assert!(sshd.masters().is_empty(), "no master was started");
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs sshd (Debian's openssh-server); CI runs it"]
async fn a_key_others_can_read_is_used_through_a_private_copy_and_an_empty_one_refused() {
    let sshd = sshd!();
    let loose = sshd.path("loose_key");
    std::fs::copy(sshd.path("user_key"), &loose).unwrap();
    std::fs::set_permissions(&loose, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
    let output = sshd.client().env("SSH_KEY_PATH", &loose).args(["echo", "in"]).run().await;
    assert_eq!((output.status.code(), stdout(&output).as_str()), (Some(0), "in\n"), "{}", stderr(&output));

    let empty = sshd.path("empty_key");
    std::fs::write(&empty, "").unwrap();
    let output = sshd.client().env("SSH_KEY_PATH", &empty).args(["true"]).run().await;
    assert_eq!(output.status.code(), Some(1));
    assert!(stderr(&output).contains("is empty"), "{}", stderr(&output));
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs sshd (Debian's openssh-server); CI runs it"]
async fn configuration_mistakes_exit_1_with_one_line() {
    let sshd = sshd!();
    let cases: [(&str, Option<&str>, &str); 5] = [
        ("SSH_HOST", None, "SSH_HOST is not set"),
        ("SSH_STOP_GRACE", Some("2s"), "SSH_STOP_GRACE must be seconds from 0 to 600"),
        ("SSH_PORT", Some("70000"), "SSH_PORT must be a whole number from 1 to 65535"),
        ("SSH_HOST_CWD", Some("relative"), "SSH_HOST_CWD must be the absolute path"),
        ("SSH_MAX_SESSIONS", Some("0"), "SSH_MAX_SESSIONS must be"),
    ];
    for (name, value, needle) in cases {
        let client = match value {
            Some(value) => sshd.client().env(name, value),
            None => sshd.client().env_remove(name),
        };
        let output = client.args(["true"]).run().await;
        assert_eq!(output.status.code(), Some(1), "{name}");
        assert!(stderr(&output).starts_with("ssh-exec: ") && stderr(&output).contains(needle), "{}", stderr(&output));
        assert_eq!(stderr(&output).lines().count(), 1);
    }
    let output = sshd.client().run().await;
    assert_eq!(output.status.code(), Some(1));
    assert!(stderr(&output).contains("usage: ssh-exec"));
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs sshd (Debian's openssh-server); CI runs it"]
async fn a_terminal_or_a_login_shell_keeps_output_and_exit_codes() {
    let sshd = sshd!();
    // With a terminal the streams merge into stdout (as over `ssh -tt`), markers included: they are still taken out.
    let output = sshd.client().env("SSH_TTY", "1").args(["sh", "-c", "tty; echo err >&2; exit 3"]).run().await;
    assert_eq!(output.status.code(), Some(3), "{}", stderr(&output));
    let text = stdout(&output);
    assert!(text.starts_with("/dev/pts/") && text.contains("err") && !text.contains(":exit:"), "{text:?}");
    assert_eq!(stderr(&output), "");

    let output = sshd.client().env("SSH_LOGIN_SHELL", "1").args(["sh", "-c", "echo login; exit 5"]).run().await;
    assert_eq!((output.status.code(), stdout(&output).as_str()), (Some(5), "login\n"), "{}", stderr(&output));
}
