//! `sidecarctl down` without a run name against a real engine (a private `podman system service`): it removes only
//! the runs this user started from this folder, says what it left, and `--all` removes the rest (issue 24, "Also").
//! Runs are made of labelled networks alone, as a run killed between its network and its first container is: no
//! image is needed, and the service has storage and networks of its own. `#[ignore]`d without podman in the summary; CI runs it with `--include-ignored`.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use sidecarctl::engine::ContainerEngine;
use sidecarctl::names::{random_hex, Origin, RunName, ROLE_NETWORK};

/// A `podman system service` on its own socket, stopped by its pid on drop.
struct Service {
    child: Child,
    dir: tempfile::TempDir,
}

impl Service {
    fn start() -> Service {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("podman.sock");
        // Storage, state and networks of its own: other runs on this machine's podman are never seen, or removed
        // by the `--all` below.
        for part in ["root", "runroot", "networks", "tmp"] {
            std::fs::create_dir(dir.path().join(part)).unwrap();
        }
        let child = Command::new("podman")
            .args(["--runtime", "runc", "--storage-driver", "vfs", "--root"])
            .arg(dir.path().join("root"))
            .arg("--runroot")
            .arg(dir.path().join("runroot"))
            .arg("--network-config-dir")
            .arg(dir.path().join("networks"))
            .arg("--tmpdir")
            .arg(dir.path().join("tmp"))
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
    let mine = RunName::named(&format!("mine-{}", random_hex(4))).unwrap();
    let other_folder = RunName::named(&format!("folder-{}", random_hex(4))).unwrap();
    let other_user = RunName::named(&format!("user-{}", random_hex(4))).unwrap();
    let me = Origin::caller(&here_path);
    let elsewhere = Origin { uid: me.uid, workspace: "/somewhere/else".into() };
    let someone = Origin { uid: me.uid + 1, workspace: me.workspace.clone() };
    let networks = |engine: &ContainerEngine| {
        runtime().block_on(async {
            let mut names = engine.networks(&["sidecarctl.managed=true".into()]).await.unwrap();
            names.sort();
            names
        })
    };
    let engine = runtime().block_on(async {
        let engine = ContainerEngine::connect(Some(&service.url())).await.unwrap();
        for (run, origin) in [(&mine, &me), (&other_folder, &elsewhere), (&other_user, &someone)] {
            engine.ensure_network(&run.network(), run.labels(ROLE_NETWORK, None, origin)).await.unwrap();
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
    assert!(stderr.contains(&format!("removed run {mine}: 0 containers, 1 network")), "{stderr}");
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
