//! The agent and its builders against real engines, each test on Docker and on Podman: a builder that exits early
//! shows its last log lines, the agent's user is checked before anything starts and `--agent-user` works, and the
//! attached agent's TTY follows the window size under a real pty.

use std::process::{Command, Stdio};
use std::time::Duration;

use protocol::random_hex;

use crate::engines::{on_both_engines, TestEngine};

on_both_engines!(
    a_builder_that_exits_early_shows_its_last_log_lines,
    the_agent_user_is_checked_first_and_agent_user_works,
    the_agents_tty_follows_the_window_size,
);

/// A builder that exits before it is healthy is removed with its logs: the error now carries its last lines
/// where before it gave only the exit code.
fn a_builder_that_exits_early_shows_its_last_log_lines(engine: &TestEngine) {
    let workspace = tempfile::tempdir().unwrap();
    let profile = workspace.path().join("profile.yaml");
    std::fs::write(
        &profile,
        "tool_backends:\n  sidecars:\n    - {runtime: python, image: sidecar-builder-python:latest, \
         command: [sh, -c, 'echo first-marker; echo second-marker >&2; exit 3']}\n",
    )
    .unwrap();
    let run = format!("early-{}", random_hex(4).unwrap());
    let (profile, folder) = (profile.display().to_string(), workspace.path().display().to_string());
    let args = engine.up_args(&run, &["-p", &profile, "--workspace", &folder, "--", "sidecar-agent", "true"]);
    let output = engine.sidecarctl(&args).stdin(Stdio::null()).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(125), "{stderr}");
    let seed =
        "build sidecar 'python' exited before becoming healthy (status: exited, exit code 3); its last log lines:";
    assert!(stderr.contains(seed), "{stderr}");
    assert!(stderr.contains("\n  first-marker") && stderr.contains("\n  second-marker"), "{stderr}");
    assert!(stderr.contains(&format!("removed run {run}")), "{stderr}");
}

/// `up` of a fresh run on `engine`, `rest` after its name; the exit code, stdout and stderr.
fn up(engine: &TestEngine, rest: &[&str]) -> (Option<i32>, String, String) {
    let run = format!("agent-user-{}", random_hex(4).unwrap());
    let output = engine.sidecarctl(&engine.up_args(&run, rest)).stdin(Stdio::null()).output().unwrap();
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (output.status.code(), text(&output.stdout), text(&output.stderr))
}

/// The agent's user against the workspace: a workspace the image's uid cannot write is named
/// before anything starts, with the fix; following it (`--agent-user`) works, the wrappers included (before, the
/// entrypoint failed with "could not install the sidecar wrappers" unless SIDECAR_WRAPPERS_DIR was set too).
fn the_agent_user_is_checked_first_and_agent_user_works(engine: &TestEngine) {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let workspace = tempfile::tempdir().unwrap();
    let folder = workspace.path().display().to_string();
    std::fs::set_permissions(workspace.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let owner = std::fs::metadata(workspace.path()).unwrap().uid();
    let image_user =
        engine.image("sidecar-agent:latest").and_then(|i| i.config).and_then(|c| c.user).unwrap_or_default();
    let image_uid: u32 = image_user.split(':').next().unwrap_or("0").parse().unwrap_or(0);
    assert_ne!(image_uid, owner, "the test needs an agent image built for another uid than the caller's");

    let (code, _, stderr) = up(engine, &["--disable-sidecars", "--workspace", &folder, "--", "sidecar-agent", "true"]);
    assert_eq!(code, Some(0), "{stderr}");
    let warning = stderr.find(&format!("warning: the agent runs as uid {image_uid}, which cannot write the workspace"));
    let network = stderr.find("network sidecarctl-");
    assert!(warning.is_some() && warning < network, "the warning comes before anything is created:\n{stderr}");
    assert!(stderr.contains(&format!("--agent-user {owner}:")), "{stderr}");

    // The advice, followed: another uid owns the folder, and the agent runs as it, with its wrappers.
    let uid = 4321;
    std::os::unix::fs::chown(workspace.path(), Some(uid), Some(uid)).unwrap();
    let user = format!("{uid}:{uid}");
    let script = "id -u; python3 -c 'print(2)'; touch made";
    let args = [
        "--sidecar",
        "python",
        "--agent-user",
        &user,
        "--workspace",
        &folder,
        "--",
        "sidecar-agent",
        "sh",
        "-c",
        script,
    ];
    let (code, stdout, stderr) = up(engine, &args);
    assert_eq!(code, Some(0), "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert_eq!(stdout, format!("{uid}\n2\n"), "{stderr}");
    assert!(!stderr.contains("warning: the agent runs as"), "{stderr}");
    assert_eq!(std::fs::metadata(workspace.path().join("made")).unwrap().uid(), uid);
}

/// The attached agent's TTY follows the window: run under a real pty of 30×100 (its controlling
/// terminal, through `setsid -c`), the agent's `stty size` says `30 100`; after the window becomes 40×120 (the
/// kernel's SIGWINCH to sidecarctl), the agent's own SIGWINCH trap says `40 120`. Before, the agent saw the
/// engine's default size and never a change.
fn the_agents_tty_follows_the_window_size(engine: &TestEngine) {
    use std::io::Read;
    use std::os::fd::AsFd;
    let workspace = tempfile::tempdir().unwrap();
    let size = nix::pty::Winsize { ws_row: 30, ws_col: 100, ws_xpixel: 0, ws_ypixel: 0 };
    let pty = nix::pty::openpty(&size, None).unwrap();
    // Every size the agent's TTY has, whenever it changes (sidecarctl's first resize may come before or after the
    // first line); it ends once it has seen the new size.
    let script = "trap 's=$(stty size); echo \"size $s\"; [ \"$s\" = \"40 120\" ] && exit 0' WINCH; \
                  echo \"size $(stty size)\"; while :; do sleep 600 & wait $!; done";
    let run = format!("winsize-{}", random_hex(4).unwrap());
    let tty = || Stdio::from(pty.slave.try_clone().unwrap());
    let folder = workspace.path().display().to_string();
    let rest = ["--no-token", "--disable-sidecars", "--workspace", &folder, "--", "sidecar-agent", "sh", "-c", script];
    let mut child = Command::new("setsid")
        .arg("-c")
        .arg(env!("CARGO_BIN_EXE_sidecarctl"))
        .args(engine.up_args(&run, &rest))
        .env("DOCKER_HOST", engine.host())
        .stdin(tty())
        .stdout(tty())
        .stderr(tty())
        .spawn()
        .unwrap();
    drop(pty.slave);
    // The screen, as the terminal shows it, read on a thread; each wait is for a line to appear.
    let (sender, screen) = std::sync::mpsc::channel::<String>();
    let mut master = std::fs::File::from(pty.master.try_clone().unwrap());
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = master.read(&mut buf) {
            if n == 0 || sender.send(String::from_utf8_lossy(&buf[..n]).into_owned()).is_err() {
                break;
            }
        }
    });
    let mut seen = String::new();
    let mut wait_for = |needle: &str| {
        while !seen.contains(needle) {
            match screen.recv_timeout(Duration::from_secs(120)) {
                Ok(text) => seen.push_str(&text),
                Err(_) => panic!("no '{needle}' on the terminal:\n{seen}"),
            }
        }
    };
    wait_for("size 30 100");
    let bigger = rustix::termios::Winsize { ws_row: 40, ws_col: 120, ws_xpixel: 0, ws_ypixel: 0 };
    rustix::termios::tcsetwinsize(pty.master.as_fd(), bigger).unwrap();
    wait_for("size 40 120");
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0));
}
