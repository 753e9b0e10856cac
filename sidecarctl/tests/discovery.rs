//! Engine discovery by the real binary against real engines, each test on Docker and on Podman: without
//! `DOCKER_HOST`, sidecarctl finds the engine where the docker CLI would, the current `docker context`'s endpoint
//! (read from `$DOCKER_CONFIG` as the CLI keeps it), ahead of the machine's default sockets. (The whole order and
//! the error's list of what was tried are unit tests of discovery.rs and engine.rs: which default sockets answer
//! depends on the machine.)

use std::path::Path;
use std::process::{Command, Stdio};

use protocol::random_hex;

use crate::engines::{on_both_engines, TestEngine};

on_both_engines!(the_current_docker_context_finds_the_engine);

/// A docker CLI configuration in `dir` whose current context `name` has the endpoint `host`, as `docker context
/// create NAME --docker host=HOST` and `docker context use NAME` leave it (the folder under contexts/meta is the
/// name's SHA-256 there; discovery reads every meta.json, so any folder name does).
fn docker_config(dir: &Path, name: &str, host: &str) {
    let meta = dir.join("contexts/meta/6d2f0a8b");
    std::fs::create_dir_all(&meta).unwrap();
    let context = serde_json::json!({"Name": name, "Metadata": {}, "Endpoints": {"docker": {"Host": host}}});
    std::fs::write(meta.join("meta.json"), context.to_string()).unwrap();
    std::fs::write(dir.join("config.json"), serde_json::json!({"currentContext": name}).to_string()).unwrap();
}

/// sidecarctl as a user without `DOCKER_HOST` runs it, with the docker CLI configuration in `config` and no
/// runtime folder of its own (so no rootless socket of this machine is found).
fn without_docker_host(engine: &TestEngine, config: &Path, runtime_dir: &Path, args: &[&str]) -> Command {
    let mut command = engine.sidecarctl(args);
    command
        .env_remove("DOCKER_HOST")
        .env_remove("DOCKER_CONTEXT")
        .env("DOCKER_CONFIG", config)
        .env("XDG_RUNTIME_DIR", runtime_dir)
        .stdin(Stdio::null());
    command
}

/// `DOCKER_HOST` unset, the current docker context points at the engine under test: `ps` lists a
/// run started there, and `down` removes it (found through the context, ahead of the machine's default sockets).
fn the_current_docker_context_finds_the_engine(engine: &TestEngine) {
    let workspace = tempfile::tempdir().unwrap();
    let config = tempfile::tempdir().unwrap();
    let runtime_dir = tempfile::tempdir().unwrap();
    let context = format!("it-{}", random_hex(4).unwrap());
    docker_config(config.path(), &context, engine.host());

    let run = format!("it-context-{}", random_hex(4).unwrap());
    let folder = workspace.path().display().to_string();
    let args = engine.up_args(
        &run,
        &["--detach", "--disable-sidecars", "--workspace", &folder, "--", "sidecar-agent", "sleep", "600"],
    );
    let up = without_docker_host(engine, config.path(), runtime_dir.path(), &args).output().unwrap();
    assert_eq!(up.status.code(), Some(0), "{}", String::from_utf8_lossy(&up.stderr));

    let ps = without_docker_host(engine, config.path(), runtime_dir.path(), &["ps"]).output().unwrap();
    let listing = String::from_utf8_lossy(&ps.stdout);
    assert_eq!(ps.status.code(), Some(0), "{}", String::from_utf8_lossy(&ps.stderr));
    assert!(listing.lines().any(|l| l.starts_with(&run) && l.contains("agent")), "no agent of {run} in:\n{listing}");

    let down = without_docker_host(engine, config.path(), runtime_dir.path(), &["down", &run])
        .current_dir(workspace.path())
        .output()
        .unwrap();
    assert_eq!(down.status.code(), Some(0), "{}", String::from_utf8_lossy(&down.stderr));
    engine.assert_nothing_left(&run);
}
