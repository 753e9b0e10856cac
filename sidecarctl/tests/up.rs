//! sidecarctl against real engines, each test once on Docker and once on Podman (`docker::…`, `podman::…`): `up`
//! with the images images/test.sh builds, the health gate, signals, `--detach`/`ps`/`logs`/`down`, teardown.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use sidecarctl::engine::{run_filter, ContainerEngine};

use crate::engines::{on_both_engines, runtime, Kind, TestEngine};

on_both_engines!(
    up_runs_the_agent_after_healthy_builders_and_leaves_only_the_caches,
    a_builder_that_never_gets_healthy_fails_the_gate_and_leaves_nothing,
    ctrl_c_during_the_gate_leaves_nothing,
    a_profiles_health_command_decides_on_both_engines,
    detach_then_ps_then_down,
    ps_reports_health_from_the_engine_or_from_the_health_command,
    the_ssh_block_reaches_the_agent,
    a_run_that_fails_before_any_container_leaves_no_token_folder,
    ctrl_c_during_a_pull_ends_it,
);

pub fn unique(prefix: &str) -> String {
    format!("{prefix}-{}", protocol::random_hex(4).unwrap())
}

/// `up`'s progress lines up to the first that holds `needle` (the step the test waits for).
pub fn read_until(stderr: &mut impl BufRead, needle: &str) -> String {
    let mut seen = String::new();
    while !seen.contains(needle) {
        let mut line = String::new();
        assert!(stderr.read_line(&mut line).unwrap() > 0, "sidecarctl ended early:\n{seen}");
        seen.push_str(&line);
    }
    seen
}

pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn write_profile(dir: &Path, yaml: &str) -> PathBuf {
    let path = dir.join("profile.yaml");
    std::fs::write(&path, yaml).unwrap();
    path
}

/// `up` of run `run` with one python builder described by `fields` (YAML flow mapping entries) and agent `true`.
fn up_one_python(engine: &TestEngine, run: &str, workspace: &Path, fields: &str) -> Command {
    let yaml = format!(
        "tool_backends:\n  sidecars:\n    - {{runtime: python, image: sidecar-builder-python:latest, {fields}}}\n"
    );
    let profile = write_profile(workspace, &yaml).display().to_string();
    let workspace = workspace.display().to_string();
    engine.sidecarctl(&engine.up_args(run, &["-p", &profile, "--workspace", &workspace, "--", "sidecar-agent", "true"]))
}

fn up_runs_the_agent_after_healthy_builders_and_leaves_only_the_caches(engine: &TestEngine) {
    let run = unique("it-up");
    let (npm_cache, pip_cache) = (format!("{run}-npm"), format!("{run}-pip"));
    let workspace = tempfile::tempdir().unwrap();
    let profile = write_profile(
        workspace.path(),
        &format!(
            "tool_backends:\n  sidecars:\n    - {{runtime: python, image: sidecar-builder-python:latest, cache_volumes: [\"{pip_cache}:/cache/pip\"]}}\n    - {{runtime: node, image: sidecar-builder-node:latest, cache_volumes: [\"{npm_cache}:/cache/npm\"]}}\n"
        ),
    );
    // python3 and npm are not in the agent image: they run in the builders. The last line proves /exec is closed
    // to a client without the run's token.
    let script = "python3 -c 'print(1)'; npm --version; \
                  SIDECAR_TOKEN_FILE= /opt/sidecar/sidecar-exec python true 2>/dev/null && echo open || echo closed; exit 7";
    let profile_arg = profile.display().to_string();
    let workspace_arg = workspace.path().display().to_string();
    let args = engine
        .up_args(&run, &["-p", &profile_arg, "--workspace", &workspace_arg, "--", "sidecar-agent", "sh", "-c", script]);
    let output: Output = engine.sidecarctl(&args).stdin(Stdio::null()).output().unwrap();
    let (stdout, stderr) = (text(&output.stdout), text(&output.stderr));
    assert_eq!(output.status.code(), Some(7), "stdout:\n{stdout}\nstderr:\n{stderr}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 3, "stdout is the agent's output only:\n{stdout}\nstderr:\n{stderr}");
    assert_eq!(lines[0], "1");
    assert!(lines[1].split('.').all(|part| part.parse::<u32>().is_ok()), "npm --version: {}", lines[1]);
    assert_eq!(lines[2], "closed", "/exec answered without the token");
    // Both builders were healthy before the agent started.
    let position = |needle: &str| stderr.find(needle).unwrap_or_else(|| panic!("no '{needle}' in:\n{stderr}"));
    let agent = position("agent starting");
    assert!(position("builder-python healthy") < agent && position("builder-node healthy") < agent, "{stderr}");
    engine.assert_nothing_left(&run);
    assert!(engine.volume_exists(&npm_cache) && engine.volume_exists(&pip_cache), "the cache volumes were removed");
    engine.remove_volume(&npm_cache);
    engine.remove_volume(&pip_cache);
}

fn a_builder_that_never_gets_healthy_fails_the_gate_and_leaves_nothing(engine: &TestEngine) {
    let workspace = tempfile::tempdir().unwrap();

    // Running, but its exec-server never listens.
    let run = unique("it-unhealthy");
    let started = Instant::now();
    let output =
        up_one_python(engine, &run, workspace.path(), "ready_timeout: 3, command: [sleep, '600']").output().unwrap();
    let took = started.elapsed();
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(125), "{stderr}");
    assert!(stderr.contains("build sidecar 'python' did not become healthy within 3s"), "{stderr}");
    assert!(!stderr.contains("agent starting"), "{stderr}");
    // Without a terminal the wait is still said (a line when it starts), and no empty "(last: )".
    assert!(stderr.contains("sidecarctl: waiting for builder-python to be healthy: "), "{stderr}");
    assert!(!stderr.contains("(last: )"), "{stderr}");
    assert!(output.stdout.is_empty());
    // Not before the timeout; the upper bound is generous (a loaded machine), far from a hang.
    assert!(took >= Duration::from_secs(3) && took < Duration::from_secs(60), "took {took:?}");
    engine.assert_nothing_left(&run);

    // Exits at once.
    let run = unique("it-exited");
    let output = up_one_python(engine, &run, workspace.path(), "command: [sh, -c, 'exit 3']").output().unwrap();
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(125), "{stderr}");
    assert!(
        stderr.contains("build sidecar 'python' exited before becoming healthy (status: exited, exit code 3)"),
        "{stderr}"
    );
    engine.assert_nothing_left(&run);
}

/// Waits until `up` (its progress on `stderr`) has created run `run`'s builder, which is then in the health gate;
/// returns the progress read so far. The builder line is printed just before the creation, and the engine has the
/// container once the call returns (a state of the engine, polled).
fn wait_for_builder(engine: &TestEngine, run: &str, stderr: &mut impl BufRead) -> String {
    let seen = read_until(stderr, "builder sidecarctl-");
    let engine_has_builder = || {
        runtime().block_on(async {
            let engine = ContainerEngine::connect(Some(engine.host())).await.unwrap();
            !engine.containers(&[run_filter(run)]).await.unwrap().is_empty()
        })
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    while !engine_has_builder() {
        assert!(Instant::now() < deadline, "the builder never appeared");
        std::thread::sleep(Duration::from_millis(50));
    }
    seen
}

fn ctrl_c_during_the_gate_leaves_nothing(engine: &TestEngine) {
    let workspace = tempfile::tempdir().unwrap();
    let run = unique("it-sigint");
    let mut child = up_one_python(engine, &run, workspace.path(), "ready_timeout: 300, command: [sleep, '600']")
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let seen = wait_for_builder(engine, &run, &mut stderr);
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).unwrap();
    let status = child.wait().unwrap();
    let mut rest = String::new();
    let _ = std::io::Read::read_to_string(&mut stderr, &mut rest);
    assert_eq!(status.code(), Some(130), "{seen}{rest}");
    assert!(rest.contains(&format!("removed run {run}")), "{seen}{rest}");
    engine.assert_nothing_left(&run);
}

/// A profile's health command decides on both engines: `up` writes it into the container's health
/// check, as compose does, so a builder whose profile says `[CMD, "false"]` is never healthy, on Docker as on
/// Podman. Before, it went only to the exec probe: Docker's own status came from the image's HEALTHCHECK (every
/// 5 s), which passed, and the gate said "healthy after 6.3s (the engine's HEALTHCHECK)" where Podman timed out.
/// `ready_timeout` is well past the image's interval, so the image's check would have had its say.
fn a_profiles_health_command_decides_on_both_engines(engine: &TestEngine) {
    let workspace = tempfile::tempdir().unwrap();
    let run = unique("it-health-override");
    let mut child =
        up_one_python(engine, &run, workspace.path(), "ready_timeout: 12, healthcheck: {test: [CMD, 'false']}")
            .stderr(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut seen = wait_for_builder(engine, &run, &mut stderr);
    let inspected = runtime().block_on(engine.connect().unwrap().inspect(&format!("sidecarctl-{run}-builder-python")));
    let check = inspected.ok().and_then(|c| c.config).and_then(|c| c.healthcheck).unwrap_or_default();
    std::io::Read::read_to_string(&mut stderr, &mut seen).unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(125), "{seen}");
    assert!(seen.contains("build sidecar 'python' did not become healthy within 12s"), "{seen}");
    assert!(!seen.contains("healthy after"), "{seen}");
    // The container's own check is the profile's, at the gate's pace, on either engine.
    assert_eq!(check.test.as_deref(), Some(&["CMD".to_owned(), "false".into()][..]), "{check:?}");
    assert_eq!(check.interval, Some(2_000_000_000), "{check:?}");
    engine.assert_nothing_left(&run);
}

/// `up --detach` of a run named `prefix-…` with a python builder and an agent that sleeps: the run's name, once
/// `up` has printed it (and only it) and exited 0, and its progress. The workspace must outlive the run.
pub fn detach_python(engine: &TestEngine, prefix: &str, workspace: &Path) -> (String, String) {
    let workspace_arg = workspace.display().to_string();
    let run = unique(prefix);
    let args = engine.up_args(
        &run,
        &["--detach", "--sidecar", "python", "--workspace", &workspace_arg, "--", "sidecar-agent", "sleep", "600"],
    );
    let output = engine.sidecarctl(&args).output().unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    assert_eq!(text(&output.stdout), format!("{run}\n"));
    (run, text(&output.stderr))
}

fn detach_then_ps_then_down(engine: &TestEngine) {
    let workspace = tempfile::tempdir().unwrap();
    let (run, _) = detach_python(engine, "it-detach", workspace.path());

    let ps = engine.sidecarctl(&["ps"]).output().unwrap();
    let listing = text(&ps.stdout);
    let row = |role: &str| {
        listing
            .lines()
            .find(|l| l.starts_with(&run) && l.contains(role))
            .unwrap_or_else(|| panic!("no {role} of {run} in:\n{listing}"))
            .split_whitespace()
            .collect::<Vec<_>>()
    };
    // The source of the verdict is named: the engine's HEALTHCHECK (Docker) or the health command (any engine).
    let builder = row("build-sidecar");
    assert_eq!(builder[3..6], ["python", "running", "healthy"], "{listing}");
    assert!(["(engine)", "(probe)"].contains(&builder[6]), "{listing}");
    assert_eq!(row("agent")[3..5], ["running", "-"], "{listing}");
    // Whose run it is: the caller's uid and the run's folder, on every line of it.
    let folder = workspace.path().canonicalize().unwrap().display().to_string();
    let owner = nix::unistd::getuid().to_string();
    for role in ["agent", "build-sidecar"] {
        assert_eq!(row(role)[row(role).len() - 2..], [owner.as_str(), folder.as_str()], "{listing}");
    }
    assert!(listing.starts_with("RUN ") && listing.lines().next().unwrap().ends_with("OWNER  FOLDER"), "{listing}");

    let logs = engine.sidecarctl(&["logs", &run, "python"]).output().unwrap();
    assert_eq!(logs.status.code(), Some(0), "{}", text(&logs.stderr));

    // From the run's folder: a run's name is its folder's.
    let down = engine.sidecarctl(&["down", &run, "--stop-grace", "3"]).current_dir(workspace.path()).output().unwrap();
    assert_eq!(down.status.code(), Some(0), "{}", text(&down.stderr));
    assert!(text(&down.stderr).contains("2 containers, 1 network"), "{}", text(&down.stderr));
    engine.assert_nothing_left(&run);
}

/// `ps` reports a builder's health and says where it came from: `healthy (engine)` from the
/// engine's own HEALTHCHECK where the engine runs it (Docker: its status turns healthy once its first check passed,
/// after the image's interval), `healthy (probe)` from the health command through exec where it has not spoken
/// (Docker before its first check; Podman without systemd always, its status staying `starting`). `up`'s progress
/// says the same of the gate.
fn ps_reports_health_from_the_engine_or_from_the_health_command(engine: &TestEngine) {
    let workspace = tempfile::tempdir().unwrap();
    let (run, progress) = detach_python(engine, "it-health", workspace.path());
    let builder = format!("sidecarctl-{run}-builder-python");
    let client = engine.connect().unwrap();
    let engine_status = || {
        let inspected = runtime().block_on(client.inspect(&builder)).unwrap();
        inspected.state.and_then(|s| s.health).and_then(|h| h.status).map(|s| s.to_string()).unwrap_or_default()
    };
    // The builder's HEALTH column ("healthy (probe)"), with the engine's own status read before and after it.
    let listed = || {
        let before = engine_status();
        let listing = text(&engine.sidecarctl(&["ps"]).output().unwrap().stdout);
        let after = engine_status();
        let row = listing.lines().find(|l| l.starts_with(&run) && l.contains("build-sidecar")).unwrap_or("");
        let cells: Vec<&str> = row.split_whitespace().skip(3).collect();
        assert_eq!(cells[..cells.len().min(2)], ["python", "running"], "{listing}");
        // HEALTH, then OWNER and FOLDER.
        (before, cells[2..cells.len().saturating_sub(2).max(2)].join(" "), after)
    };
    let gate = progress.lines().find(|l| l.contains("builder-python healthy after")).unwrap_or_default();
    match engine.kind {
        Kind::Podman => {
            assert!(gate.ends_with("(the health command)"), "{progress}");
            let (_, health, after) = listed();
            assert_eq!(health, "healthy (probe)");
            assert_eq!(after, "starting", "podman ran a HEALTHCHECK by itself: the probe path is untested");
        }
        Kind::Docker => {
            assert!(
                gate.ends_with("(the health command)") || gate.ends_with("(the engine's HEALTHCHECK)"),
                "{progress}"
            );
            // Before Docker's first check (start period 3 s, interval 5 s) the probe answers, and says so.
            let (before, health, after) = listed();
            match (before.as_str(), after.as_str()) {
                ("healthy", _) => assert_eq!(health, "healthy (engine)"),
                (_, "healthy") => assert!(health == "healthy (engine)" || health == "healthy (probe)", "{health}"),
                _ => assert_eq!(health, "healthy (probe)", "the engine's status was {after}"),
            }
            // The image's HEALTHCHECK runs in the engine: its verdict is a state the engine reaches, polled for.
            let deadline = Instant::now() + Duration::from_secs(60);
            while engine_status() != "healthy" {
                assert!(Instant::now() < deadline, "Docker never ran the HEALTHCHECK: {}", engine_status());
                std::thread::sleep(Duration::from_millis(200));
            }
            assert_eq!(listed().1, "healthy (engine)");
        }
    }
    // From the run's folder: a run's name is its folder's.
    let down = engine.sidecarctl(&["down", &run, "--stop-grace", "3"]).current_dir(workspace.path()).output().unwrap();
    assert_eq!(down.status.code(), Some(0), "{}", text(&down.stderr));
    engine.assert_nothing_left(&run);
}

/// The profile's `ssh:` block reaches the agent: its variables in the environment, its key and known_hosts files
/// bound read-only at the paths the variables name. A key the agent's user cannot read stops the run before anything
/// is created. (What the agent image's entrypoint makes of SSH_HOST, the SSH wrappers, is images/test.sh's to check.)
fn the_ssh_block_reaches_the_agent(engine: &TestEngine) {
    use std::os::unix::fs::PermissionsExt;
    let workspace = tempfile::tempdir().unwrap();
    let (key, known) = (workspace.path().join("id_test"), workspace.path().join("known_hosts"));
    std::fs::write(&key, "KEY-MARKER\n").unwrap();
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    std::fs::write(&known, "[mac.example]:2222 ssh-ed25519 AAAA\n").unwrap();
    let yaml = format!(
        "ssh: {{host: mac.example, port: 2222, key_path: {}, known_hosts: {}, commands: [xcodebuild]}}\n",
        key.display(),
        known.display()
    );
    let profile = write_profile(workspace.path(), &yaml).display().to_string();
    let workspace_arg = workspace.path().display().to_string();
    let script = r#"echo "$SSH_HOST:$SSH_PORT $SSH_WORKSPACE $SSH_COMMANDS"; cat "$SSH_KEY_PATH" "$SSH_KNOWN_HOSTS"
                    echo x >>"$SSH_KEY_PATH" 2>/dev/null || echo read-only"#;
    let up = |run: &str| {
        let args = engine
            .up_args(run, &["-p", &profile, "--workspace", &workspace_arg, "--", "sidecar-agent", "sh", "-c", script]);
        engine.sidecarctl(&args).stdin(Stdio::null()).output().unwrap()
    };

    // The image's user (not the caller) cannot read a 0600 key of the caller's: refused, nothing created.
    let image_user = engine.image("sidecar-agent:latest").and_then(|i| i.config).and_then(|c| c.user);
    let image_uid: u32 = image_user.unwrap_or_default().split(':').next().unwrap_or("").parse().unwrap_or(0);
    let caller = nix::unistd::getuid().as_raw();
    if image_uid != caller {
        let run = unique("it-ssh-refused");
        let output = up(&run);
        let stderr = text(&output.stderr);
        assert_eq!(output.status.code(), Some(125), "{stderr}");
        assert!(stderr.contains("ssh.key_path") && stderr.contains("cannot be read by the agent's user"), "{stderr}");
        assert!(!stderr.contains("network sidecarctl-"), "something was created:\n{stderr}");
        engine.assert_nothing_left(&run);
        assert_eq!(caller, 0, "the rest gives the key to uid {image_uid}, which needs root (as the engines do)");
        std::os::unix::fs::chown(&key, Some(image_uid), None).unwrap();
    }

    let run = unique("it-ssh");
    let output = up(&run);
    let (stdout, stderr) = (text(&output.stdout), text(&output.stderr));
    assert_eq!(output.status.code(), Some(0), "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert_eq!(
        stdout.lines().collect::<Vec<_>>(),
        ["mac.example:2222 /workspace xcodebuild", "KEY-MARKER", "[mac.example]:2222 ssh-ed25519 AAAA", "read-only",],
        "stderr:\n{stderr}"
    );
    engine.assert_nothing_left(&run);
}

/// A run that fails before any container exists (the agent's user cannot read the token) leaves no token folder:
/// no label names it yet, so the teardown removes the one this `up` created.
fn a_run_that_fails_before_any_container_leaves_no_token_folder(engine: &TestEngine) {
    let workspace = tempfile::tempdir().unwrap();
    let run = unique("it-early");
    let workspace_arg = workspace.path().display().to_string();
    let args = engine.up_args(
        &run,
        &["--disable-sidecars", "--workspace", &workspace_arg, "--agent-user", "agent", "--", "sidecar-agent", "true"],
    );
    let output = engine.sidecarctl(&args).stdin(Stdio::null()).output().unwrap();
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(125), "{stderr}");
    assert!(stderr.contains("--no-token"), "refused for the token: {stderr}");
    engine.assert_nothing_left(&run);
}

/// Ctrl-C ends `up` while the engine is pulling from a registry that never answers (a listener here that accepts
/// and stays silent): the pull is abandoned at once, the exit code is 130 and nothing is left. Before, the pull
/// ran on until the engine gave up, and the signal was only seen after it.
fn ctrl_c_during_a_pull_ends_it(engine: &TestEngine) {
    let registry = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = registry.local_addr().unwrap().port();
    let (connected, accepted) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in registry.incoming().flatten() {
            held.push(stream);
            let _ = connected.send(());
        }
    });
    let workspace = tempfile::tempdir().unwrap();
    let run = unique("it-pull");
    let image = format!("127.0.0.1:{port}/sidecarctl-never-{run}:latest");
    let workspace_arg = workspace.path().display().to_string();
    let args = engine.up_args(&run, &["--disable-sidecars", "--workspace", &workspace_arg, "--", &image, "true"]);
    let mut child =
        engine.sidecarctl(&args).stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let seen = read_until(&mut stderr, "pulling ");
    // The engine is talking to the silent registry: the pull is in flight.
    accepted.recv_timeout(Duration::from_secs(120)).expect("the engine never connected to the registry");
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).unwrap();
    let mut rest = String::new();
    let _ = std::io::Read::read_to_string(&mut stderr, &mut rest);
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130), "{seen}{rest}");
    assert!(!rest.contains("error:"), "the pull failed instead of being abandoned:\n{seen}{rest}");
    engine.assert_nothing_left(&run);
}
