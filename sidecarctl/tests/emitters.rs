//! The emitters: what they print parses back to the run, validates with the tools images/check.sh uses
//! (`docker-compose config`, `kubernetes-validate --strict`), and is what images/compose.yaml and
//! images/kubernetes.yaml hold. A missing validator is a printed skip, unless SIDECARCTL_ENGINE_TESTS=1 (CI).

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_norway::Value;

const EXAMPLE_ARGS: [&str; 8] =
    ["-p", "PROFILE", "--workspace", "./workspace", "--", "sidecar-agent:latest", "sleep", "infinity"];

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

/// `sidecarctl compose|kube` for the example run, from a folder that has `./workspace`.
fn emit(kind: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("workspace")).unwrap();
    let profile = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/node-python.yaml");
    let args: Vec<String> = EXAMPLE_ARGS
        .iter()
        .map(|a| if *a == "PROFILE" { profile.display().to_string() } else { a.to_string() })
        .collect();
    let output =
        Command::new(env!("CARGO_BIN_EXE_sidecarctl")).arg(kind).args(&args).current_dir(dir.path()).output().unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout).unwrap()
}

fn skip_or_fail(why: &str) {
    assert!(std::env::var("SIDECARCTL_ENGINE_TESTS").as_deref() != Ok("1"), "SIDECARCTL_ENGINE_TESTS=1 but {why}");
    eprintln!("SKIPPED: {why}");
}

#[test]
fn compose_holds_the_run() {
    let doc: Value = serde_norway::from_str(&emit("compose")).unwrap();
    let services = &doc["services"];
    for rt in ["node", "python"] {
        let builder = &services[format!("builder-{rt}").as_str()];
        assert_eq!(builder["cap_drop"][0], "ALL");
        assert_eq!(builder["security_opt"][0], "no-new-privileges:true");
        assert_eq!(builder["healthcheck"]["interval"], "2s");
        assert_eq!(builder["healthcheck"]["timeout"], "3s");
        assert_eq!(builder["healthcheck"]["retries"], 30, "ready_timeout 60 s at one try per 2 s");
        assert_eq!(builder["labels"]["sidecarctl.role"], "build-sidecar");
        assert_eq!(builder["volumes"][0], "${WORKSPACE:-./workspace}:/workspace");
        assert!(builder.get("ports").is_none() && builder.get("restart").is_none(), "nothing published, no restart");
        assert_eq!(services["agent"]["depends_on"][format!("builder-{rt}").as_str()]["condition"], "service_healthy");
    }
    assert_eq!(services["builder-node"]["volumes"][1], "npm-cache:/cache/npm");
    assert_eq!(services["agent"]["environment"]["SIDECAR_TOKEN_FILE"], "/run/secrets/sidecar_token");
    assert_eq!(doc["secrets"]["sidecar_token"]["file"], "./sidecar-token");
    assert!(doc["volumes"].get("npm-cache").is_some() && doc["volumes"].get("pip-cache").is_some());
}

#[test]
fn kube_holds_the_run() {
    let doc: Value = serde_norway::from_str(&emit("kube")).unwrap();
    let init = doc["spec"]["initContainers"].as_sequence().unwrap();
    let names: Vec<&str> = init.iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["builder-node", "builder-python"]);
    for (container, port) in init.iter().zip([8081, 8082]) {
        assert_eq!(container["restartPolicy"], "Always");
        assert_eq!(container["ports"][0]["containerPort"], port);
        assert_eq!(container["startupProbe"]["httpGet"]["port"], port);
    }
    let agent = &doc["spec"]["containers"][0];
    assert_eq!(
        agent["env"][0]["value"],
        r#"{"node":{"internal_url":"http://127.0.0.1:8081"},"python":{"internal_url":"http://127.0.0.1:8082"}}"#
    );
    let token = doc["spec"]["volumes"].as_sequence().unwrap().iter().find(|v| v["name"] == "token").unwrap();
    assert_eq!(token["secret"]["secretName"], "sidecar-token");
}

#[test]
fn emitted_compose_validates_with_docker_compose() {
    if Command::new("docker-compose").arg("version").output().is_err() {
        return skip_or_fail("docker-compose is not installed");
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("compose.yaml"), emit("compose")).unwrap();
    std::fs::write(dir.path().join("sidecar-token"), "placeholder").unwrap();
    let output = Command::new("docker-compose")
        .args(["-f", "compose.yaml", "config", "-q"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
}

#[test]
fn emitted_pod_validates_with_kubernetes_validate() {
    let venv = repo().join("target/images-check/venv/bin/kubernetes-validate");
    let validator = if venv.exists() { venv } else { PathBuf::from("kubernetes-validate") };
    if Command::new(&validator).arg("--version").output().is_err() {
        return skip_or_fail("kubernetes-validate is not installed (images/check.sh installs it)");
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("pod.yaml");
    std::fs::write(&file, emit("kube")).unwrap();
    let output =
        Command::new(&validator).args(["--strict", "--kubernetes-version", "1.33"]).arg(&file).output().unwrap();
    assert!(
        output.status.success(),
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The examples can never drift from the tool: each file is exactly what its emitter prints for the example run.
#[test]
#[ignore = "images/compose.yaml and images/kubernetes.yaml are being reworked by the images helper; the lead \
            replaces them with this output (sidecarctl compose|kube -p sidecarctl/tests/node-python.yaml \
            --workspace ./workspace -- sidecar-agent:latest sleep infinity), then removes this ignore"]
fn the_image_examples_are_what_the_emitters_print() {
    for (kind, file) in [("compose", "images/compose.yaml"), ("kube", "images/kubernetes.yaml")] {
        let expected = emit(kind);
        let actual = std::fs::read_to_string(repo().join(file)).unwrap();
        assert!(actual == expected, "{file} differs from `sidecarctl {kind}`; the emitter prints:\n{expected}");
    }
}
