//! A run's name is its user's and folder's, and what `down`, `up` and the exit codes say of runs, against real
//! engines (each test on Docker and on Podman): a name taken elsewhere, a missing run, a missing default image, an
//! agent that ignores SIGTERM, an engine that may not raise resource limits. Also, with no engine at all, one exit
//! code per cause across the commands.

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use sidecarctl::engine::{run_filter, ContainerEngine};
use sidecarctl::names::{RunName, RunOwner, ROLE_NETWORK};

use crate::engines::{on_both_engines, runtime, Kind, TestEngine};
use crate::up::{read_until, text, unique};

on_both_engines!(
    a_run_name_belongs_to_its_folder,
    down_of_a_missing_run_is_exit_1_and_one_line,
    a_missing_default_image_names_its_build,
    ctrl_c_with_an_agent_that_ignores_sigterm_says_so_and_times_the_stop,
    where_limits_may_not_be_raised_the_run_is_retried_with_them,
);

/// The error lines of `stderr` (every line, since each message is one line).
fn lines(stderr: &str) -> Vec<&str> {
    stderr.lines().collect()
}

/// The run's containers: (state, workspace label) each.
fn containers(engine: &TestEngine, run: &str) -> Vec<(String, String)> {
    let client = engine.connect().unwrap();
    let found = runtime().block_on(client.containers(&[run_filter(run)])).unwrap();
    found
        .into_iter()
        .map(|c| {
            let workspace = c.labels.unwrap_or_default().remove("sidecarctl.workspace").unwrap_or_default();
            (c.state.map(|s| s.to_string()).unwrap_or_default(), workspace)
        })
        .collect()
}

/// `up --name dev` in folder B while A's `dev` runs is refused with one line naming A (before, it replaced A's
/// containers and reused A's network); `down dev` in B refuses too, and leaves A's run; a second `up` in A while
/// its run runs is refused; `down --all dev` removes it from anywhere; leftovers of A's own earlier run (a network,
/// nothing running) are replaced by the next `up` in A.
fn a_run_name_belongs_to_its_folder(engine: &TestEngine) {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let a_folder = a.path().canonicalize().unwrap();
    let run = unique("it-owned");
    let in_folder = |dir: &Path, args: &[&str]| -> Output {
        engine.sidecarctl(args).current_dir(dir).stdin(Stdio::null()).output().unwrap()
    };
    let detach = engine.up_args(&run, &["--detach", "--disable-sidecars", "--", "sidecar-agent", "sleep", "600"]);

    let first = in_folder(a.path(), &detach);
    assert_eq!(first.status.code(), Some(0), "{}", text(&first.stderr));
    let a_running = vec![("running".to_owned(), a_folder.display().to_string())];
    assert_eq!(containers(engine, &run), a_running);

    let second = in_folder(b.path(), &detach);
    let stderr = text(&second.stderr);
    assert_eq!(second.status.code(), Some(125), "{stderr}");
    assert_eq!(
        lines(&stderr),
        [format!(
            "sidecarctl: error: run name '{run}' is taken by a run started from {}: choose another --name \
             (`sidecarctl down {run}` there removes that run)",
            a_folder.display()
        )]
    );
    assert_eq!(containers(engine, &run), a_running, "B's up touched A's run");

    let down_b = in_folder(b.path(), &["down", &run]);
    let stderr = text(&down_b.stderr);
    assert_eq!(down_b.status.code(), Some(125), "{stderr}");
    assert_eq!(lines(&stderr).len(), 1, "{stderr}");
    assert!(stderr.contains(&format!("run '{run}' was started from {}, not from here", a_folder.display())));
    assert_eq!(containers(engine, &run), a_running, "B's down removed A's run");

    let again = in_folder(a.path(), &detach);
    let stderr = text(&again.stderr);
    assert_eq!(again.status.code(), Some(125), "{stderr}");
    assert_eq!(
        lines(&stderr),
        [format!(
            "sidecarctl: error: run '{run}' is already running from this folder: `sidecarctl down {run}` ends it \
             first, or choose another --name"
        )]
    );

    let down_all = in_folder(b.path(), &["down", "--all", &run, "--stop-grace", "1"]);
    let stderr = text(&down_all.stderr);
    assert_eq!(down_all.status.code(), Some(0), "{stderr}");
    assert_eq!(lines(&stderr), [format!("sidecarctl: removed run {run}: 1 container, 1 network")]);
    engine.assert_nothing_left(&run);

    // Leftovers of A's earlier run (its network alone, as a run killed between the two leaves it).
    let name = RunName::named(&run).unwrap();
    let client = engine.connect().unwrap();
    let labels = name.labels(ROLE_NETWORK, None, &RunOwner::caller(&a_folder));
    runtime().block_on(client.ensure_network(&name.network(), labels)).unwrap();
    let replaced = in_folder(a.path(), &engine.up_args(&run, &["--disable-sidecars", "--", "sidecar-agent", "true"]));
    let stderr = text(&replaced.stderr);
    assert_eq!(replaced.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains(&format!("removing the leftovers of this folder's earlier run {run}")), "{stderr}");
    engine.assert_nothing_left(&run);
}

/// `down` and `logs` of a run that does not exist: exit 1 and one line (before: `down` said "removed run nosuch:
/// 0 containers, 0 network", exited 0, and added a line about other folders' runs).
fn down_of_a_missing_run_is_exit_1_and_one_line(engine: &TestEngine) {
    let run = unique("nosuch");
    let here = tempfile::tempdir().unwrap();
    let down = engine.sidecarctl(&["down", &run]).current_dir(here.path()).output().unwrap();
    assert_eq!(down.status.code(), Some(1), "{}", text(&down.stderr));
    assert_eq!(
        text(&down.stderr),
        format!("sidecarctl: error: no run '{run}' on this engine (`sidecarctl ps` lists the runs)\n")
    );
    let logs = engine.sidecarctl(&["logs", &run]).output().unwrap();
    assert_eq!(logs.status.code(), Some(1), "{}", text(&logs.stderr));
    assert_eq!(text(&logs.stderr), format!("sidecarctl: error: no container of run '{run}'\n"));
}

/// A default image that is missing (one `sidecarctl image build` makes) and cannot be pulled: the error names the
/// command that builds it.
fn a_missing_default_image_names_its_build(engine: &TestEngine) {
    let workspace = tempfile::tempdir().unwrap();
    let run = unique("it-unbuilt");
    let tag = format!("missing-{}", protocol::random_hex(4).unwrap());
    let image = format!("python=localhost/sidecar-builder-python:{tag}");
    let folder = workspace.path().display().to_string();
    let args = engine.up_args(
        &run,
        &["--sidecar", "python", "--builder-image", &image, "--workspace", &folder, "--", "sidecar-agent", "true"],
    );
    let output = engine.sidecarctl(&args).stdin(Stdio::null()).output().unwrap();
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(125), "{stderr}");
    let error = stderr.lines().find(|l| l.starts_with("sidecarctl: error:")).unwrap_or_else(|| panic!("{stderr}"));
    assert!(error.contains(&format!("localhost/sidecar-builder-python:{tag} is not present and could not be pulled")));
    assert!(
        error.ends_with(&format!(
            "it is built, not pulled: `sidecarctl image build --runtime-version {tag} python` builds it"
        )),
        "{error}"
    );
    engine.assert_nothing_left(&run);
}

/// The seconds in "… after 3.1s …" following `prefix` in `text`.
fn seconds_after(text: &str, prefix: &str) -> f64 {
    let at = text.find(prefix).unwrap_or_else(|| panic!("no '{prefix}' in:\n{text}")) + prefix.len();
    let figure: String = text[at..].chars().take_while(|c| c.is_ascii_digit() || *c == '.').collect();
    figure.parse().unwrap_or_else(|_| panic!("no figure after '{prefix}' in:\n{text}"))
}

/// Ctrl-C with an agent that ignores SIGTERM: `up` says at once that it is stopping the agent and that a second
/// Ctrl-C kills it, then how long the stop took, and the teardown's time counts from the stop (before: the grace's
/// silence, then a time that left the wait out). The grace (3 s) is a lower bound of both figures, whatever the
/// machine's load: the engine kills the agent only once it has passed.
fn ctrl_c_with_an_agent_that_ignores_sigterm_says_so_and_times_the_stop(engine: &TestEngine) {
    let workspace = tempfile::tempdir().unwrap();
    let run = unique("it-stubborn");
    let folder = workspace.path().display().to_string();
    let script = "trap '' TERM; echo ready; while :; do sleep 1; done";
    let args = engine
        .up_args(&run, &["--disable-sidecars", "--workspace", &folder, "--", "sidecar-agent", "sh", "-c", script]);
    let mut child =
        engine.sidecarctl(&args).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut ready = String::new();
    stdout.read_line(&mut ready).unwrap();
    assert_eq!(ready, "ready\n", "the agent did not start");
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), nix::sys::signal::Signal::SIGINT).unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let seen = read_until(&mut stderr, "stopping the agent");
    // Said before the stop's end: the agent still runs when the line is there (3 s of grace, SIGTERM ignored).
    let state = containers(engine, &run).into_iter().map(|(state, _)| state).collect::<Vec<_>>();
    let mut rest = String::new();
    stderr.read_to_string(&mut rest).unwrap();
    let status = child.wait().unwrap();
    let all = format!("{seen}{rest}");
    assert_eq!(status.code(), Some(130), "{all}");
    assert!(
        all.contains("sidecarctl: stopping the agent (Ctrl-C again to kill): SIGTERM, then SIGKILL after 3s\n"),
        "{all}"
    );
    // (Podman shows a container in its stop as "stopping".)
    assert!(state == ["running"] || state == ["stopping"], "the line came only after the stop ({state:?}):\n{all}");
    let stopped = seconds_after(&rest, "agent stopped after ");
    let removed = seconds_after(&rest, &format!("removed run {run}: 1 container, 1 network ("));
    assert!(stopped >= 3.0, "the agent was stopped before the grace ended ({stopped}s):\n{all}");
    assert!(removed >= stopped, "the teardown's time leaves the stop out:\n{all}");
    assert!(rest.contains("s since the stop, the agent's included; cache volumes kept)"), "{all}");
    engine.assert_nothing_left(&run);
}

/// A `podman system service` on the engine's own storage whose hard `nofile` limit is 2048, so that Podman's
/// default (1048576) cannot be set on a container; stopped by its pid on drop.
struct LowLimitPodman {
    child: Child,
    dir: tempfile::TempDir,
}

impl LowLimitPodman {
    fn start() -> LowLimitPodman {
        let dir = tempfile::tempdir().unwrap();
        let log = std::fs::File::create(dir.path().join("podman.log")).unwrap();
        let child = Command::new("sh")
            .arg("-c")
            .arg(r#"ulimit -n 2048 && exec podman --runtime runc system service --time=0 "unix://$0/podman.sock""#)
            .arg(dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        let service = LowLimitPodman { child, dir };
        // The service writes no ready line: its answer is the state to poll.
        let deadline = Instant::now() + Duration::from_secs(60);
        while runtime().block_on(ContainerEngine::connect(Some(&service.url()))).is_err() {
            let log = std::fs::read_to_string(service.dir.path().join("podman.log")).unwrap_or_default();
            assert!(Instant::now() < deadline, "podman did not answer at {}:\n{log}", service.url());
            std::thread::sleep(Duration::from_millis(50));
        }
        service
    }

    fn url(&self) -> String {
        format!("unix://{}/podman.sock", self.dir.path().display())
    }
}

impl Drop for LowLimitPodman {
    fn drop(&mut self) {
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        let _ = self.child.wait();
    }
}

/// Where the engine may not raise resource limits (Podman whose hard `nofile` is below its own default), `up`
/// without `--ulimit` says so in one line and retries with the documented limits, `nofile` at most the engine's
/// hard limit (read from the engine's process, its socket being local); the builder and the agent get them (before:
/// "error setting rlimit type 7: operation not permitted", passed raw). Docker sets no limits of its own: there the
/// same run starts at once, with no retry.
fn where_limits_may_not_be_raised_the_run_is_retried_with_them(engine: &TestEngine) {
    let workspace = tempfile::tempdir().unwrap();
    let run = unique("it-limits");
    let folder = workspace.path().display().to_string();
    let rest = [
        "--sidecar",
        "python",
        "--workspace",
        &folder,
        "--",
        "sidecar-agent",
        "sh",
        "-c",
        "ulimit -n; python3 -c 'import resource; print(resource.getrlimit(resource.RLIMIT_NOFILE)[1])'",
    ];
    let mut args = vec!["up", "--name", &run, "--stop-grace", "3"];
    args.extend(rest);
    let (output, service) = match engine.kind {
        Kind::Podman => {
            let service = LowLimitPodman::start();
            let output = engine.sidecarctl(&args).env("DOCKER_HOST", service.url()).stdin(Stdio::null()).output();
            (output.unwrap(), Some(service))
        }
        Kind::Docker => (engine.sidecarctl(&args).stdin(Stdio::null()).output().unwrap(), None),
    };
    let (stdout, stderr) = (text(&output.stdout), text(&output.stderr));
    assert_eq!(output.status.code(), Some(0), "stdout:\n{stdout}\nstderr:\n{stderr}");
    let retry = stderr.lines().find(|l| l.contains("the engine may not raise resource limits here"));
    match engine.kind {
        Kind::Podman => {
            let retry = retry.unwrap_or_else(|| panic!("no retry line:\n{stderr}"));
            assert!(retry.contains("operation not permitted"), "the engine's words are kept: {retry}");
            assert!(retry.contains("retrying with --ulimit nofile=2048:2048 --ulimit nproc=4096:4096"), "{retry}");
            assert_eq!(stderr.matches("the engine may not raise").count(), 1, "{stderr}");
            assert!(!stderr.contains("error:"), "{stderr}");
            // The agent's own limit, and the builder's (python3 runs there).
            assert_eq!(stdout, "2048\n2048\n", "{stderr}");
        }
        Kind::Docker => assert!(retry.is_none(), "{stderr}"),
    }
    drop(service);
    engine.assert_nothing_left(&run);
}

/// One cause, one exit code, whichever command met it: with no engine answering at the named socket, `up`, `ps`, `logs`
/// and `down` all exit 125 with the same line (before: `up` 125, the others 1); a wrong command line is clap's 2.
#[test]
fn no_engine_is_the_same_exit_code_for_every_command() {
    let dir = tempfile::tempdir().unwrap();
    // A socket nobody listens on (a stopped engine's).
    let path = dir.path().join("stale.sock");
    drop(std::os::unix::net::UnixListener::bind(&path).unwrap());
    let socket = format!("unix://{}", path.display());
    let run = |args: &[&str]| {
        let output = Command::new(env!("CARGO_BIN_EXE_sidecarctl"))
            .args(args)
            .env("DOCKER_HOST", &socket)
            .current_dir(dir.path())
            .stdin(Stdio::null())
            .output()
            .unwrap();
        (output.status.code(), text(&output.stderr))
    };
    for args in [
        &["up", "--disable-sidecars", "--no-token", "--", "sidecar-agent", "true"][..],
        &["ps"],
        &["logs", "some-run"],
        &["down"],
        &["down", "some-run"],
    ] {
        let (code, stderr) = run(args);
        assert_eq!(code, Some(sidecarctl::exit::EXIT_FAILED), "{args:?}: {stderr}");
        assert!(
            stderr.starts_with(&format!("sidecarctl: error: cannot reach the container engine at {socket}: ")),
            "{args:?}: {stderr}"
        );
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
    }
    assert_eq!(run(&["ps", "--no-such-flag"]).0, Some(sidecarctl::exit::EXIT_USAGE));
}

/// The README puts sidecarctl on PATH and runs `up` from a project folder, not from the checkout (which would
/// become the agent's workspace); docs/sidecarctl.md says the same.
#[test]
fn the_readme_installs_sidecarctl_and_runs_up_from_a_project() {
    let repo = crate::emitters::repo();
    for page in ["README.md", "docs/sidecarctl.md"] {
        let text = std::fs::read_to_string(repo.join(page)).unwrap();
        assert!(text.contains("cargo install --path sidecarctl"), "{page}: how to put sidecarctl on PATH");
        assert!(text.contains("images/binaries.sh"), "{page}: the static binary");
        let cargo_run_up = text.lines().any(|l| l.starts_with("cargo run") && l.contains("-p sidecarctl -- up"));
        assert!(!cargo_run_up, "{page}: `up` through cargo run in the checkout makes the checkout the workspace");
        assert!(text.contains("cd ~/src/my-project"), "{page}: `up` from a project folder");
    }
}
