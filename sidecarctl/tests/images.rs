//! `sidecarctl image`, the real binary: what it refuses and prints with no engine at all, and, on each engine, the
//! one line of a build whose base image cannot be pulled and the refusal of a `--base` the engine does not have.
//! (The images themselves, `image base` and `image build --base` end to end, are built by images/test.sh on both
//! engines.)

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::engines::{on_both_engines, TestEngine};

on_both_engines!(a_base_that_cannot_be_pulled_is_named_in_one_line, a_base_the_engine_lacks_is_refused_up_front);

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The error line sidecarctl printed last.
fn error_line(output: &Output) -> String {
    let stderr = text(&output.stderr);
    stderr.lines().rfind(|l| l.starts_with("sidecarctl: error: ")).unwrap_or_default().to_owned()
}

fn sidecarctl(args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_sidecarctl"));
    command.args(args);
    command
}

/// Outside a checkout: the folder named once (it was "./images/Dockerfile has no images/Dockerfile") and what to
/// do; a dry run with no engine to ask prints Docker's lines and says so; --runtime-version with --base is refused
/// in one line, before any engine is asked.
#[test]
fn image_build_without_a_checkout_or_an_engine() {
    let elsewhere = tempfile::tempdir().unwrap();
    let outside = sidecarctl(&["image", "build", "python"]).current_dir(elsewhere.path()).output().unwrap();
    assert_eq!(outside.status.code(), Some(125));
    let here = elsewhere.path().canonicalize().unwrap();
    assert_eq!(
        error_line(&outside),
        format!(
            "sidecarctl: error: the current folder ({}) has no images/Dockerfile: run sidecarctl image from a \
             sidecar-exec checkout, or give the checkout's path with --context DIR",
            here.display()
        )
    );

    let nowhere = format!("unix://{}/no-engine.sock", elsewhere.path().display());
    let context = repo().display().to_string();
    let dry = sidecarctl(&["image", "build", "--dry-run", "--context", &context, "python", "agent"])
        .env("DOCKER_HOST", &nowhere)
        .output()
        .unwrap();
    let stderr = text(&dry.stderr);
    assert_eq!(dry.status.code(), Some(0), "{stderr}");
    let lines: Vec<String> = text(&dry.stdout).lines().map(str::to_owned).collect();
    assert_eq!(lines.len(), 2, "{lines:?}");
    for line in &lines {
        assert!(line.starts_with(&format!("DOCKER_HOST={nowhere} ")), "{line}");
        assert!(line.contains(" build ") && line.contains(&format!("-f {context}/images/Dockerfile")), "{line}");
    }
    assert!(
        stderr.contains(&format!("no container engine answered ({nowhere}: no such socket), so these are the commands for Docker at {nowhere}")),
        "{stderr}"
    );

    let both =
        sidecarctl(&["image", "build", "--context", &context, "--base", "b:1", "--runtime-version", "3.12", "python"])
            .env("DOCKER_HOST", &nowhere)
            .output()
            .unwrap();
    assert_eq!(both.status.code(), Some(125));
    assert!(error_line(&both).contains("--runtime-version 3.12 picks an official base image by its tag"), "{both:?}");
    assert_eq!(text(&both.stderr).lines().count(), 1, "{}", text(&both.stderr));
}

/// A base no registry serves (here one at a port nothing listens on, so it fails anywhere): the build ends with one
/// line naming the image, the argument that names it (RUST_IMAGE, the binaries' stage, for a python builder), and
/// both ways out, not with the tool's own last line. (The python base is one the engine has, so the rust one is
/// the only pull that can fail, wherever this runs.)
fn a_base_that_cannot_be_pulled_is_named_in_one_line(engine: &TestEngine) {
    let context = repo().display().to_string();
    let image = "localhost:1/nosuch/rust:1";
    let output = engine
        .sidecarctl(&["image", "build", "--context", &context, "--tag", "pull-test"])
        .args(["--build-arg", &format!("RUST_IMAGE={image}")])
        .args(["--build-arg", "PYTHON_IMAGE=sidecar-builder-python:latest", "python"])
        .output()
        .unwrap();
    let line = error_line(&output);
    assert_eq!(output.status.code(), Some(125), "{}", text(&output.stderr));
    assert!(
        line.starts_with("sidecarctl: error: building sidecar-builder-python:pull-test: could not pull "),
        "{line}"
    );
    assert!(line.contains(&format!("{image} (RUST_IMAGE; connection refused)")), "{line}");
    assert!(line.contains("`sidecarctl image base`") && line.contains("`--base localhost/sidecar-base:bookworm`"));
    assert!(line.contains("`--build-arg RUST_IMAGE=MIRROR/nosuch/rust:1`"), "{line}");
    assert!(engine.image("sidecar-builder-python:pull-test").is_none());
}

/// `--base` names an image the engine does not have: refused before anything is built, saying how to make it.
fn a_base_the_engine_lacks_is_refused_up_front(engine: &TestEngine) {
    let context = repo().display().to_string();
    let output = engine
        .sidecarctl(&["image", "build", "--context", &context, "--base", "localhost/sidecar-nosuch-base:1", "agent"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(125));
    assert_eq!(
        error_line(&output),
        "sidecarctl: error: --base localhost/sidecar-nosuch-base:1: the engine has no such image; make it with \
         `sidecarctl image base` (--tag localhost/sidecar-nosuch-base:1), or name an image the engine has"
    );
    assert!(!text(&output.stderr).contains("building sidecar-agent"), "{}", text(&output.stderr));
}

/// `image base` refuses a non-root caller in one line before anything runs (debootstrap and chroot need root), and
/// its dry run needs neither root nor an engine: the five command lines, for Docker, with the note.
#[test]
fn image_base_without_root_or_an_engine() {
    let elsewhere = tempfile::tempdir().unwrap();
    let nowhere = format!("unix://{}/no-engine.sock", elsewhere.path().display());
    let as_nobody = |args: &[&str]| {
        let mut command = if nix::unistd::geteuid().is_root() {
            let mut c = Command::new("setpriv");
            c.args(["--reuid=65534", "--regid=65534", "--clear-groups"]).arg(env!("CARGO_BIN_EXE_sidecarctl"));
            c
        } else {
            Command::new(env!("CARGO_BIN_EXE_sidecarctl"))
        };
        command.args(args).env("DOCKER_HOST", &nowhere).current_dir("/").output().unwrap()
    };
    let refused = as_nobody(&["image", "base"]);
    assert_eq!(refused.status.code(), Some(125));
    assert_eq!(
        text(&refused.stderr),
        "sidecarctl: error: image base runs debootstrap and chroot, which need root: run it as root (sudo sidecarctl \
         image base)\n"
    );
    let dry = as_nobody(&["image", "base", "--dry-run", "--suite", "trixie"]);
    let stderr = text(&dry.stderr);
    assert_eq!(dry.status.code(), Some(0), "{stderr}");
    let lines: Vec<String> = text(&dry.stdout).lines().map(str::to_owned).collect();
    assert!(lines.len() == 4 || lines.len() == 5, "{lines:?}");
    assert!(lines[1].starts_with("debootstrap --variant=minbase --include=ca-certificates "), "{lines:?}");
    assert!(lines[1].contains(" trixie /var/tmp/sidecar-base."), "{lines:?}");
    let import = &lines[lines.len() - 2];
    assert!(import.contains(&format!("| DOCKER_HOST={nowhere} ")), "{import}");
    assert!(import.ends_with(" import --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
        --change 'ENV SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt' --change 'ENV PIP_CERT=/etc/ssl/certs/ca-certificates.crt' \
        --change 'ENV REQUESTS_CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt' --change \
        'ENV NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt' --change 'CMD [\"/bin/bash\"]' - localhost/sidecar-base:trixie"), "{import}");
    assert!(stderr.contains("no container engine answered"), "{stderr}");
}
