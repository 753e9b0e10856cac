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
/// output still waits for the reader. All of it arrives, and the exit code is the command's. (With the stop
/// session's deadline on every call, a reader that waited more than ~2.3 s lost the last 18 928 bytes.)
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
    assert!(stderr(&output).contains("\"NOT-A-NAME\", which is neither a variable name"), "{}", stderr(&output));
}

/// sidecar-exec's policy: `PREFIX*` patterns and the default allowlist (SSH_ENV_DEFAULTS=0: off); a variable a
/// pattern matches whose name a shell cannot assign is left out, not an error.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs sshd (Debian's openssh-server); CI runs it"]
async fn patterns_and_the_default_allowlist_arrive() {
    let sshd = sshd!();
    let script = "printf '%s|%s|%s|%s' \"${PAT_A-unset}\" \"${PAT_B-unset}\" \"${TZ-unset}\" \"${OTHER-unset}\"";
    let run = |defaults: Option<&str>| {
        let mut client = sshd.client();
        client = client
            .env("PAT_A", "a")
            .env("PAT_B", "b; $(id)")
            .env("PAT_x.y", "no shell name")
            .env("TZ", "Pacific/Chatham")
            .env("OTHER", "secret")
            .env("SSH_ENV_PASSTHROUGH", "PAT_*");
        if let Some(defaults) = defaults {
            client = client.env("SSH_ENV_DEFAULTS", defaults);
        }
        client.args(["sh", "-c", script]).run()
    };
    let output = run(None).await;
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(stdout(&output), "a|b; $(id)|Pacific/Chatham|unset");
    let output = run(Some("0")).await;
    assert_eq!(stdout(&output), "a|b; $(id)|unset|unset", "{}", stderr(&output));
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

/// `line` run by `sh -c` twice, natively and with `{X}` replaced by ssh-exec: (exit code, stdout, stderr) of each.
/// ssh-exec runs in the workspace and the command on the host in its folder; natively it runs in that folder too.
async fn native_and_forwarded(sshd: &Sshd, line: &str) -> [(Option<i32>, Vec<u8>, Vec<u8>); 2] {
    let run = |mut command: tokio::process::Command| async move {
        let output = tokio::time::timeout(Duration::from_secs(60), command.output()).await.unwrap().unwrap();
        (output.status.code(), output.stdout, output.stderr)
    };
    let mut native = tokio::process::Command::new("sh");
    native.arg("-c").arg(line.replace("{X}", "")).current_dir(sshd.host_cwd.path());
    let mut forwarded = sshd.client().other("sh");
    forwarded.arg("-c").arg(line.replace("{X}", &protocol::shell::quote(SSH_BIN)));
    [run(native).await, run(forwarded).await]
}

/// stdin is the command's, as natively and as ssh streams it: a file, a pipe, a heredoc, a slow writer, 20 MiB;
/// each the same bytes and exit code as the same line run natively. SSH_STDIN=0 forwards nothing.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs sshd (Debian's openssh-server); CI runs it"]
async fn stdin_is_the_commands_as_natively() {
    let sshd = sshd!();
    let data = testkit::random_bytes(200_000, 9);
    std::fs::write(sshd.host_cwd.path().join("input"), &data).unwrap();
    std::fs::write(sshd.workspace.path().join("input"), &data).unwrap();
    let lines = [
        "{X} cat < input",
        "printf 'a\nb\n' | {X} sh -c 'cat; echo done; exit 3'",
        "{X} sh -s <<'EOF'\necho from a heredoc \"$0\"\nread line; echo \"read $line\"\nEOF",
        "(sleep 0.3; echo late; sleep 0.3; echo later) | {X} cat",
        "head -c 20971520 /dev/zero | {X} sha256sum",
        "printf 'x\ny\n' | {X} head -1",
        "true | {X} wc -c",
    ];
    for line in lines {
        let [native, forwarded] = native_and_forwarded(&sshd, line).await;
        assert_eq!(forwarded, native, "{line}");
    }
    let [_, forwarded] = native_and_forwarded(&sshd, "printf unread | SSH_STDIN=0 {X} wc -c").await;
    assert_eq!(forwarded, (Some(0), b"0\n".to_vec(), Vec::new()));
}

/// A command that does not read its stdin ends the call at once, even when stdin never closes (as natively: the
/// command's end is the call's end).
#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs sshd (Debian's openssh-server); CI runs it"]
async fn a_never_closing_stdin_does_not_hold_a_command_that_does_not_read_it() {
    let sshd = sshd!();
    let mut child = sshd.client().stdin(Stdio::piped()).args(["sh", "-c", "echo hi; exit 4"]).spawn();
    let mut pipe = child.stdin.take().unwrap();
    tokio::io::AsyncWriteExt::write_all(&mut pipe, b"never read").await.unwrap();
    let output = tokio::time::timeout(Duration::from_secs(30), child.wait_with_output()).await.unwrap().unwrap();
    assert_eq!((output.status.code(), stdout(&output).as_str(), stderr(&output).as_str()), (Some(4), "hi\n", ""));
    drop(pipe);
}

/// A command that cannot run gets the shell's codes, as natively: 127 for a name not found and a path that does not
/// exist, 126 for a file that is not executable and a folder; with one line naming it.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs sshd (Debian's openssh-server); CI runs it"]
async fn commands_that_cannot_run_exit_127_and_126_as_natively() {
    let sshd = sshd!();
    std::fs::write(sshd.host_cwd.path().join("not-executable"), "echo x\n").unwrap();
    std::fs::create_dir(sshd.host_cwd.path().join("folder")).unwrap();
    let cases = [
        ("no-such-command-xyz", "no-such-command-xyz: command not found\n"),
        ("./missing", "./missing: No such file or directory\n"),
        ("./not-executable", "./not-executable: Permission denied\n"),
        ("./folder", "./folder: Permission denied\n"),
    ];
    for (command, said) in cases {
        let [native, forwarded] = native_and_forwarded(&sshd, &format!("{{X}} {command}")).await;
        assert_eq!(forwarded.0, native.0, "{command}");
        assert!(matches!(forwarded.0, Some(126 | 127)), "{command}: {:?}", forwarded.0);
        assert_eq!(
            (String::from_utf8_lossy(&forwarded.1), String::from_utf8_lossy(&forwarded.2)),
            ("".into(), said.into())
        );
    }
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

/// A known_hosts file in a folder with a space, and a key whose path holds `%` tokens, are the
/// files ssh reads, literally: no false "something is in between" alarm (ssh split the path at the space into two
/// files), no key looked up under the expansion of `%d`. Through the shared connection and directly.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs sshd (Debian's openssh-server); CI runs it"]
async fn paths_with_spaces_and_percent_signs_reach_ssh_literally() {
    let sshd = sshd!();
    let odd = sshd.path("with space %d %% \"quoted\" 'single'");
    std::fs::create_dir(&odd).unwrap();
    let known_hosts = odd.join("known hosts %h");
    let key = odd.join("key %d%r");
    std::fs::copy(sshd.path("known_hosts"), &known_hosts).unwrap();
    std::fs::copy(sshd.path("user_key"), &key).unwrap();
    for persist in ["60", "0"] {
        let output = sshd
            .client()
            .env("SSH_KNOWN_HOSTS", &known_hosts)
            .env("SSH_KEY_PATH", &key)
            .env("SSH_CONTROL_PERSIST", persist)
            .args(["echo", "in"])
            .run()
            .await;
        assert_eq!(
            (output.status.code(), stdout(&output).as_str(), stderr(&output).as_str()),
            (Some(0), "in\n", ""),
            "SSH_CONTROL_PERSIST={persist}"
        );
    }
}

/// A private copy of a key is removed once the key it copies changes or goes (a rotated key must
/// not live on in ssh-exec's folder), and the copy of the key in use stays.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs sshd (Debian's openssh-server); CI runs it"]
async fn stale_private_key_copies_are_removed() {
    let sshd = sshd!();
    let copies = || -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(sshd.runtime_dir().join("ssh-exec"))
            .map(|entries| {
                entries.filter_map(Result::ok).map(|e| e.file_name().to_string_lossy().into_owned()).collect()
            })
            .unwrap_or_default();
        // A copy, and its note of the key's path (`.source`), which goes with it.
        names.retain(|name| name.starts_with("key-"));
        names.sort();
        names
    };
    let loose = sshd.path("loose_key");
    std::fs::copy(sshd.path("user_key"), &loose).unwrap();
    std::fs::set_permissions(&loose, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
    let call = || sshd.client().env("SSH_KEY_PATH", &loose).env("SSH_CONTROL_PERSIST", "0").args(["true"]).run();
    let output = call().await;
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let first = copies();
    assert_eq!(first.len(), 2, "{first:?}");

    // The key is rotated: the old copy goes, the new key's copy is the one left.
    let rotated = sshd.path("rotated_key");
    let status = std::process::Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-f"])
        .arg(&rotated)
        .stdin(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    let mut authorized = std::fs::read_to_string(sshd.path("authorized_keys")).unwrap();
    authorized.push_str(&std::fs::read_to_string(sshd.path("rotated_key.pub")).unwrap());
    std::fs::write(sshd.path("authorized_keys"), authorized).unwrap();
    std::fs::copy(&rotated, &loose).unwrap();
    std::fs::set_permissions(&loose, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
    let output = call().await;
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let second = copies();
    assert_eq!(second, first, "one copy per key path");
    let copy = sshd.runtime_dir().join("ssh-exec").join(&first[0]);
    assert_eq!(std::fs::read(copy).unwrap(), std::fs::read(&rotated).unwrap(), "the old key's bytes are gone");

    // The key is gone, and the call that finds it gone still removes its copy: nothing of it stays on disk.
    std::fs::remove_file(&loose).unwrap();
    sshd.client().env("SSH_KEY_PATH", "").env("SSH_CONTROL_PERSIST", "0").args(["true"]).run().await;
    assert_eq!(copies(), Vec::<String>::new(), "a copy of a deleted key lives on");
}

/// `line` run by sh under `script` (a real terminal for its stdin and stdout, as a person at a prompt has), with
/// ssh-exec's configuration: the running child, its stdin (what is typed) and its stdout (the screen).
fn at_a_terminal(sshd: &Sshd, line: &str) -> tokio::process::Child {
    let mut script = sshd.client().env("SHELL", "/bin/sh").other("script");
    script.args(["-qefc", &line.replace("{X}", &protocol::shell::quote(SSH_BIN)), "/dev/null"]);
    script.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).kill_on_drop(true);
    script.spawn().unwrap()
}

/// Reads `from` until what was read contains `awaited`.
async fn read_until(from: &mut tokio::process::ChildStdout, seen: &mut Vec<u8>, awaited: &str) {
    use tokio::io::AsyncReadExt;
    let mut piece = [0u8; 4096];
    while !String::from_utf8_lossy(seen).contains(awaited) {
        let n = tokio::time::timeout(Duration::from_secs(30), from.read(&mut piece)).await.unwrap().unwrap();
        assert!(n > 0, "ended before {awaited:?}: {:?}", String::from_utf8_lossy(seen));
        seen.extend_from_slice(&piece[..n]);
    }
}

/// TTY mode for ssh-exec: at a terminal (stdin and stdout both terminals) the command gets one on the host by
/// default (`ssh -tt`), as it would natively; SSH_TTY=0 gives it the plain streams, and a pipe on our side means no
/// terminal unless SSH_TTY=1 forces one. Ctrl-C is then a byte the host's terminal turns into SIGINT.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs sshd (Debian's openssh-server); CI runs it"]
async fn at_a_terminal_the_command_gets_a_terminal() {
    let sshd = sshd!();
    let probe = "{X} sh -c 'tty; [ -t 0 ] && [ -t 1 ] && echo both-terminals; exit 3'";
    let output = at_a_terminal(&sshd, probe).wait_with_output().await.unwrap();
    let screen = stdout(&output);
    assert_eq!(output.status.code(), Some(3), "{screen}");
    assert!(screen.contains("/dev/pts/") && screen.contains("both-terminals"), "{screen:?}");

    let output = at_a_terminal(&sshd, &format!("SSH_TTY=0 {probe}")).wait_with_output().await.unwrap();
    let screen = stdout(&output);
    assert!(screen.contains("not a tty") && !screen.contains("both-terminals"), "{screen:?}");
    let output = at_a_terminal(&sshd, &format!("{probe} | cat")).wait_with_output().await.unwrap();
    assert!(stdout(&output).contains("not a tty"), "a pipe on stdout: {:?}", stdout(&output));

    // Ctrl-C typed at the terminal reaches the command as SIGINT: its handler runs and its code comes back.
    let mut child = at_a_terminal(&sshd, "{X} sh -c 'trap \"echo caught; exit 3\" INT; echo ready; sleep 30'");
    let mut screen = child.stdout.take().unwrap();
    let mut seen = Vec::new();
    read_until(&mut screen, &mut seen, "ready").await;
    let mut keys = child.stdin.take().unwrap();
    tokio::io::AsyncWriteExt::write_all(&mut keys, b"\x03").await.unwrap();
    read_until(&mut screen, &mut seen, "caught").await;
    let status = tokio::time::timeout(Duration::from_secs(30), child.wait()).await.unwrap().unwrap();
    assert_eq!(status.code(), Some(3), "{:?}", String::from_utf8_lossy(&seen));
    drop(keys);
}

/// The terminal is put back however the call ends: in order, and when ssh (which restores it itself on its way out)
/// is killed while it holds the terminal in raw mode. `stty -g` before and after, in the same terminal.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs sshd (Debian's openssh-server); CI runs it"]
async fn the_terminal_is_restored_on_every_way_out() {
    let sshd = sshd!();
    let check = |call: &str| {
        format!(
            "before=$(stty -g); {call}; code=$?; after=$(stty -g); \
             if [ \"$before\" = \"$after\" ]; then echo restored-$code; else echo changed-$code; fi"
        )
    };
    let output = at_a_terminal(&sshd, &check("{X} sh -c 'exit 4'")).wait_with_output().await.unwrap();
    assert!(stdout(&output).contains("restored-4"), "{:?}", stdout(&output));

    let marker = testkit::marker();
    let mut child = at_a_terminal(&sshd, &check(&format!("{{X}} sh -c 'echo ready; sleep 30; : {marker}'")));
    let mut screen = child.stdout.take().unwrap();
    let mut seen = Vec::new();
    read_until(&mut screen, &mut seen, "ready").await;
    let ssh: Vec<u32> = testkit::processes_matching(&marker)
        .into_iter()
        .filter(|pid| std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|comm| comm.trim() == "ssh"))
        .collect();
    assert_eq!(ssh.len(), 1, "{ssh:?}");
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(ssh[0] as i32), nix::sys::signal::Signal::SIGKILL).unwrap();
    read_until(&mut screen, &mut seen, "-255").await;
    let screen = String::from_utf8_lossy(&seen);
    assert!(screen.contains("restored-255"), "{screen:?}");
    let _ = child.wait().await;
}

/// stdin a terminal, stdout not (`> file`): no terminal on the host, and stdin is the terminal's lines as typed
/// (read by ssh-exec, so ssh stays out of the terminal's foreground); a Ctrl-C the terminal turns into SIGINT for
/// ssh-exec reaches the command as SIGINT, and what it prints then is kept.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs sshd (Debian's openssh-server); CI runs it"]
async fn a_terminal_stdin_without_a_terminal_stdout_gives_its_lines_and_its_ctrl_c() {
    let sshd = sshd!();
    let out = sshd.workspace.path().join("out");
    // (The outer shell outlives the Ctrl-C, as an interactive one does, to print the code.)
    let line = "trap : INT; {X} sh -c 'read l; echo \"got $l\"; tty; trap \"echo caught; exit 3\" INT; echo ready; \
                sleep 30' > out; echo code=$?";
    let mut child = at_a_terminal(&sshd, line);
    let mut keys = child.stdin.take().unwrap();
    tokio::io::AsyncWriteExt::write_all(&mut keys, b"hello\n").await.unwrap();
    // Waits for the file to say so (polled: nothing else announces it), at most 30 s.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !std::fs::read_to_string(&out).is_ok_and(|text| text.contains("ready")) {
        assert!(std::time::Instant::now() < deadline, "{:?}", std::fs::read_to_string(&out));
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    tokio::io::AsyncWriteExt::write_all(&mut keys, b"\x03").await.unwrap();
    let mut screen = child.stdout.take().unwrap();
    let mut seen = Vec::new();
    read_until(&mut screen, &mut seen, "code=").await;
    read_until(&mut screen, &mut seen, "\n").await;
    let _ = child.wait().await;
    assert!(String::from_utf8_lossy(&seen).contains("code=3"), "{:?}", String::from_utf8_lossy(&seen));
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "got hello\nnot a tty\nready\ncaught\n");
    drop(keys);
}
