//! sidecarctl against a `podman system service` of this module's own, with storage and networks of its own: `down`
//! (whose `--all` removes every run on an engine, so no other test's runs may be there) and `image build` (a
//! stand-in `podman` records what runs). `#[ignore]`d, so the summary counts them; CI runs them with
//! `--include-ignored`.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use protocol::random_hex;
use sidecarctl::engine::ContainerEngine;
use sidecarctl::names::{RunName, RunOwner, ROLE_NETWORK};

/// A `podman system service` on its own socket, stopped by its pid on drop.
struct Service {
    child: Child,
    dir: tempfile::TempDir,
}

impl Service {
    fn start() -> Service {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("podman.sock");
        let mut command = Command::new("podman");
        command.args(["--runtime", "runc"]);
        for part in ["root", "runroot", "networks", "tmp"] {
            std::fs::create_dir(dir.path().join(part)).unwrap();
        }
        command.args(["--storage-driver", "vfs", "--root"]).arg(dir.path().join("root"));
        command.arg("--runroot").arg(dir.path().join("runroot"));
        command.arg("--network-config-dir").arg(dir.path().join("networks"));
        command.arg("--tmpdir").arg(dir.path().join("tmp"));
        let child = command
            .args(["system", "service", "--time=0"])
            .arg(format!("unix://{}", socket.display()))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("podman is installed");
        let deadline = Instant::now() + Duration::from_secs(30);
        while !socket.exists() {
            assert!(Instant::now() < deadline, "podman system service did not create {}", socket.display());
            std::thread::sleep(Duration::from_millis(20));
        }
        Service { child, dir }
    }

    fn url(&self) -> String {
        format!("unix://{}", self.dir.path().join("podman.sock").display())
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        let _ = self.child.wait();
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
}

#[test]
#[ignore = "needs podman (CI runs it with --include-ignored)"]
fn a_bare_down_removes_only_this_users_runs_of_this_folder() {
    let service = Service::start();
    let here = tempfile::tempdir().unwrap();
    let here_path = here.path().canonicalize().unwrap();
    let mine = RunName::named(&format!("mine-{}", random_hex(4).unwrap())).unwrap();
    let other_folder = RunName::named(&format!("folder-{}", random_hex(4).unwrap())).unwrap();
    let other_user = RunName::named(&format!("user-{}", random_hex(4).unwrap())).unwrap();
    let me = RunOwner::caller(&here_path);
    let elsewhere = RunOwner { uid: me.uid, workspace: "/somewhere/else".into() };
    let someone = RunOwner { uid: me.uid + 1, workspace: me.workspace.clone() };
    let networks = |engine: &ContainerEngine| {
        runtime().block_on(async {
            let mut names = engine.networks(&["sidecarctl.managed=true".into()]).await.unwrap();
            names.sort();
            names
        })
    };
    let engine = runtime().block_on(async {
        let engine = ContainerEngine::connect(Some(&service.url())).await.unwrap();
        for (run, owner) in [(&mine, &me), (&other_folder, &elsewhere), (&other_user, &someone)] {
            engine.ensure_network(&run.network(), run.labels(ROLE_NETWORK, None, owner)).await.unwrap();
        }
        engine
    });
    let down = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_sidecarctl"))
            .arg("down")
            .args(args)
            .env("DOCKER_HOST", service.url())
            .env_remove("SIDECARCTL_DOWN_ALL")
            .current_dir(here.path())
            .output()
            .unwrap()
    };

    let output = down(&[]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains(&format!("removed run {mine}: no container, 1 network")), "{stderr}");
    assert!(stderr.contains("left 2 run(s) started by another user or from another folder"), "{stderr}");
    let mut left = vec![other_folder.network(), other_user.network()];
    left.sort();
    assert_eq!(networks(&engine), left, "a bare down removed another user's or folder's run:\n{stderr}");

    // Nothing of ours is left: said so, and nothing else goes.
    let output = down(&[]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains(&format!("no run of uid {} started from {} to remove", me.uid, me.workspace)), "{stderr}");
    assert_eq!(networks(&engine), left);

    let output = down(&["--all"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains(&format!("removed run {other_user}"))
            && stderr.contains(&format!("removed run {other_folder}"))
    );
    assert!(networks(&engine).is_empty(), "{stderr}");
}

/// `image build` asks the engine what it is and runs exactly the lines `--dry-run` prints (here with a stand-in
/// `podman` first on PATH that records its arguments and prints a progress line): the output passes through as
/// it comes, and a failing build stops with its exit code and command. (The images themselves are built by
/// images/test.sh.)
#[test]
#[ignore = "needs podman (CI runs it with --include-ignored)"]
fn image_build_runs_what_dry_run_prints() {
    use std::os::unix::fs::PermissionsExt;
    let service = Service::start();
    let tools = tempfile::tempdir().unwrap();
    let log = tools.path().join("calls");
    let fake = tools.path().join("podman");
    std::fs::write(
        &fake,
        format!("#!/bin/sh\necho \"$0 $*\" >> {}\necho 'STEP 1/9: FROM x'\nexit ${{FAKE_EXIT:-0}}\n", log.display()),
    )
    .unwrap();
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf();
    let path = format!("{}:{}", tools.path().display(), std::env::var("PATH").unwrap());
    let build = |args: &[&str], exit: &str| {
        Command::new(env!("CARGO_BIN_EXE_sidecarctl"))
            .args(["image", "build", "--context"])
            .arg(&repo)
            .args(args)
            .env("DOCKER_HOST", service.url())
            .env("PATH", &path)
            .env("FAKE_EXIT", exit)
            .output()
            .unwrap()
    };
    let dry = build(&["--dry-run", "--runtime-version", "3.12", "python", "agent"], "0");
    let printed = String::from_utf8_lossy(&dry.stdout).into_owned();
    assert_eq!(dry.status.code(), Some(0), "{}", String::from_utf8_lossy(&dry.stderr));
    let lines: Vec<&str> = printed.lines().collect();
    assert_eq!(lines.len(), 2, "{printed}");
    assert!(lines[0].starts_with(&format!("{} --url {} build --format docker -f ", fake.display(), service.url())));
    assert!(lines[0].contains("--build-arg PYTHON_IMAGE=python:3.12-slim-bookworm -t sidecar-builder-python:3.12"));
    assert!(!log.exists(), "--dry-run ran something");

    let run = build(&["--runtime-version", "3.12", "python", "agent"], "0");
    assert_eq!(run.status.code(), Some(0), "{}", String::from_utf8_lossy(&run.stderr));
    assert_eq!(std::fs::read_to_string(&log).unwrap(), printed, "what ran is not what --dry-run printed");
    assert_eq!(String::from_utf8_lossy(&run.stdout), "STEP 1/9: FROM x\nSTEP 1/9: FROM x\n", "the tool's own output");

    let failed = build(&["python", "agent"], "3");
    let stderr = String::from_utf8_lossy(&failed.stderr);
    assert_eq!(failed.status.code(), Some(125), "{stderr}");
    assert!(
        stderr.contains("building sidecar-builder-python:latest failed (exit code 3); the command was:"),
        "{stderr}"
    );
    assert!(!stderr.contains("building sidecar-agent"), "it went on after a failure:\n{stderr}");
}
