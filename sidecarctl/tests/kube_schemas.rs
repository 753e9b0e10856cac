//! `sidecarctl kube`'s Pods against the Kubernetes API's schemas, offline: there is no cluster here, and `kubectl
//! apply --dry-run=client --validate=strict` needs one (it fetches the schemas from the API server). So the same
//! strictness from the schemas kubernetes-validate ships (images/check.sh installs it): `--strict` makes an unknown
//! field an error, a wrong type or a missing required field fails anyway, and a duplicate key — kubectl's other strict
//! error, which the validator's YAML reader would let through — is refused by this file's parse. On every API
//! version from the first with native sidecars on by default to the newest the validator ships, for the example run
//! and for runs that use every field the Pod carries. What a cluster itself checks beyond the schemas (admission,
//! the sidecar ordering) is not run here: docs/images.md says what was and was not.

use std::path::PathBuf;
use std::process::Command;

use crate::emitters::{documents, emit_in, repo, EXAMPLE_ARGS};

/// Kubernetes 1.29: native sidecars (init containers with `restartPolicy: Always`) on by default.
const FIRST_MINOR: u32 = 29;

/// Profiles that reach every part of the Pod: five runtimes, a registry image, ports, env, cache volumes, a health
/// override (the Pod's probes stay HTTP), timeouts, a builder as its image's user, resource limits (no Pod field).
const RICH_PROFILE: &str = r#"ulimits: ["nofile=4096:4096"]
tool_backends:
  ready_timeout: 90
  sidecars:
    - {runtime: node, image: registry.example/sidecar-builder-node:1, port: 9001, cache_volumes: ["npm:/cache/npm"], env: {NODE_OPTIONS: "--max-old-space-size=2048", FLAG: "yes"}}
    - {runtime: python, image: sidecar-builder-python:latest, healthcheck: {test: [CMD-SHELL, "exec-server -healthcheck"]}, ready_timeout: 30, run_as_caller_uid: false}
    - {runtime: java, image: sidecar-builder-java:latest, cache_volumes: ["m2:/cache/m2"]}
    - {runtime: go, image: sidecar-builder-go:latest, env_passthrough: [GOFLAGS]}
    - {runtime: rust, image: sidecar-builder-rust:latest, cache_volumes: ["cargo:/cache/cargo"]}
"#;

fn validator() -> PathBuf {
    let venv = repo().join("target/images-check/venv/bin/kubernetes-validate");
    let validator = if venv.exists() { venv.clone() } else { PathBuf::from("kubernetes-validate") };
    let installed = Command::new(&validator).arg("--version").output().is_ok_and(|o| o.status.success());
    assert!(
        installed,
        "kubernetes-validate is not installed: run images/check.sh (it installs it in {})",
        venv.display()
    );
    validator
}

/// The newest API version the validator has schemas for: its default (`--help`: "Defaults to 1.37.0").
fn newest_minor(validator: &PathBuf) -> u32 {
    let help = String::from_utf8(Command::new(validator).arg("--help").output().unwrap().stdout).unwrap();
    let help = help.split_whitespace().collect::<Vec<_>>().join(" ");
    let version = help.split("Defaults to ").nth(1).and_then(|rest| rest.split_whitespace().next());
    let minor = version.and_then(|v| v.strip_prefix("1.")).and_then(|v| v.split('.').next()?.parse().ok());
    minor.unwrap_or_else(|| panic!("no default version in kubernetes-validate --help:\n{help}"))
}

/// `files` through the validator, strictly, on every API version from [`FIRST_MINOR`] to `newest`.
fn validate_on_every_version(validator: &PathBuf, files: &[PathBuf], newest: u32) {
    for minor in FIRST_MINOR..=newest {
        let output = Command::new(validator)
            .args(["--strict", "--kubernetes-version", &format!("1.{minor}")])
            .args(files)
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "Kubernetes 1.{minor}:\n{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

#[test]
#[ignore = "needs kubernetes-validate (images/check.sh installs it); CI runs it"]
fn emitted_pods_validate_strictly_on_every_version_with_native_sidecars() {
    let validator = validator();
    let newest = newest_minor(&validator);
    assert!(newest >= 33, "kubernetes-validate has schemas up to 1.{newest} only: native sidecars are GA in 1.33");
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("rich.yaml"), RICH_PROFILE).unwrap();
    let runs: [(&str, String); 4] = [
        ("example", emit_in(&repo(), "kube", &EXAMPLE_ARGS)),
        (
            "rich",
            emit_in(
                dir.path(),
                "kube",
                &["-p", "rich.yaml", "--workspace", "./ws", "--", "agent:1", "sh", "-c", "echo 'a: b'; exit 0"],
            ),
        ),
        ("no-token", emit_in(dir.path(), "kube", &["--no-token", "--sidecar", "go", "--", "agent:1"])),
        ("no-builders", emit_in(dir.path(), "kube", &["--disable-sidecars", "--", "agent:1", "true"])),
    ];
    let mut files = Vec::new();
    for (name, text) in &runs {
        let docs = documents(text).unwrap_or_else(|e| panic!("the {name} Pod does not parse strictly: {e}\n{text}"));
        assert!(docs.iter().any(|d| d["kind"] == "Pod"), "no Pod in the {name} run:\n{text}");
        let file = dir.path().join(format!("{name}.out.yaml"));
        std::fs::write(&file, text).unwrap();
        files.push(file);
    }
    validate_on_every_version(&validator, &files, newest);
    println!("{} emitted files valid (strict) on Kubernetes 1.{FIRST_MINOR} to 1.{newest}", files.len());
}

/// The validator fails on what kubectl's strict validation refuses: a field the API does not have (here a typo of
/// a real one), and this file's parse on a duplicate key. Without this, a validator that accepted anything would
/// pass the test above.
#[test]
#[ignore = "needs kubernetes-validate (images/check.sh installs it); CI runs it"]
fn an_unknown_field_and_a_duplicate_key_are_refused() {
    let validator = validator();
    let pod = emit_in(&repo(), "kube", &EXAMPLE_ARGS);
    let field = "\n      restartPolicy: Always\n";
    let typo = pod.replacen(field, "\n      restartPolicy: Always\n      restartPolicyy: Always\n", 1);
    assert_ne!(typo, pod, "the example has a native sidecar");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("typo.yaml");
    std::fs::write(&file, &typo).unwrap();
    let output =
        Command::new(&validator).args(["--strict", "--kubernetes-version", "1.33"]).arg(&file).output().unwrap();
    let said = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert!(!output.status.success() && said.contains("restartPolicyy"), "an unknown field passed:\n{said}");

    let duplicate = pod.replacen(field, "\n      restartPolicy: Always\n      restartPolicy: Never\n", 1);
    let error = documents(&duplicate).expect_err("a duplicate key parsed");
    assert!(error.to_string().contains("duplicate"), "{error}");
}

/// `kube --kind sandbox-template|warm-pool`: each SandboxTemplate's pod, as the Pod the controller will create
/// from it, against the same schemas on every version with native sidecars. The template and the pool themselves
/// are custom resources, outside these schemas: images/agent-sandbox-check.py checks them against the CRDs.
#[test]
#[ignore = "needs kubernetes-validate (images/check.sh installs it); CI runs it"]
fn sandbox_templates_pods_validate_strictly_on_every_version_with_native_sidecars() {
    let validator = validator();
    let newest = newest_minor(&validator);
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("rich.yaml"), RICH_PROFILE).unwrap();
    let runs: [(&str, Vec<&str>); 3] = [
        ("example", ["--kind", "sandbox-template"].into_iter().chain(EXAMPLE_ARGS).collect()),
        ("rich", vec!["--kind", "warm-pool", "-p", "rich.yaml", "--", "agent:1", "sh", "-c", "echo $HOME"]),
        ("no-token", vec!["--kind", "warm-pool", "--no-token", "--sidecar", "go", "--", "agent:1"]),
    ];
    let mut files = Vec::new();
    for (name, args) in &runs {
        let here = if *name == "example" { repo() } else { dir.path().to_path_buf() };
        let text = emit_in(&here, "kube", args);
        let docs = documents(&text).unwrap_or_else(|e| panic!("the {name} template does not parse strictly: {e}"));
        let template = docs.iter().find(|d| d["kind"] == "SandboxTemplate").expect("a SandboxTemplate");
        // As JSON (which YAML readers take as it is): written back as YAML, a "yes" in an env value would lose its
        // quotes and read as a boolean in the validator's YAML 1.1.
        let pod = serde_json::json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "sandbox", "labels": template["spec"]["podTemplate"]["metadata"]["labels"]},
            "spec": template["spec"]["podTemplate"]["spec"],
        });
        let pod = serde_json::to_string_pretty(&pod).unwrap();
        let file = dir.path().join(format!("{name}.pod.yaml"));
        std::fs::write(&file, pod).unwrap();
        files.push(file);
    }
    validate_on_every_version(&validator, &files, newest);
    println!("{} sandbox pods valid (strict) on Kubernetes 1.{FIRST_MINOR} to 1.{newest}", files.len());
}
