//! The installer's three-way order (native > sidecar > SSH) and a generated SSH wrapper at work.

use crate::sshd::*;
use crate::support::{client_run, executable, names};

#[tokio::test(flavor = "multi_thread")]
async fn native_beats_sidecar_beats_ssh() {
    let scratch = tempfile::tempdir().unwrap();
    let wrappers = scratch.path().join("wrappers");
    let native = scratch.path().join("native-bin");
    executable(&native, "node", "#!/bin/sh\n");
    executable(&native, "go", "#!/bin/sh\n");
    let install = |ssh_host: Option<&str>| {
        let client = client_run()
            .env("PATH", format!("{}:{}", wrappers.display(), native.display()))
            .env("BUILD_SIDECARS", r#"{"node":{"internal_url":"http://b:1"},"python":{"internal_url":"http://c:1"}}"#)
            .env("SSH_COMMANDS", "xcodebuild, swift npm");
        let client = match ssh_host {
            Some(host) => client.env("SSH_HOST", host),
            None => client,
        };
        client.args(["--install-wrappers", wrappers.to_str().unwrap()]).run()
    };
    let output = install(Some("build-mac")).await;
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let message = stderr(&output);
    // Nothing answers at b:1 and c:1: one line each says their whole table is wrapped.
    let (unanswered, lines): (Vec<&str>, Vec<&str>) =
        message.lines().partition(|line| line.contains("sidecar gave no /info"));
    assert_eq!((unanswered.len(), lines.len()), (2, 2), "{message}");
    // Said once: node and python could use either backend, and so could npm of SSH_COMMANDS; their sidecar wins.
    assert!(lines[0].contains("both BUILD_SIDECARS and SSH_HOST are set: [node python npm]"), "{message}");
    assert!(
        lines[1].contains(
            "sidecar [npm npx pnpm yarn python python3 pip pip3 poetry pytest ruff black mypy]; \
             ssh [java javac mvn gradle gofmt cargo rustc rustfmt clippy xcodebuild swift host-run auto-run]; \
             native, not wrapped [go node]"
        ),
        "{message}"
    );
    // Each wrapper is a link to its client; the link's name is the command (wrappers/called_as.rs).
    let link = |name: &str| std::fs::read_link(wrappers.join(name)).unwrap();
    let sidecar_exec = std::fs::canonicalize(crate::support::BIN).unwrap();
    assert_eq!(link("npm"), sidecar_exec);
    for ssh_wrapper in ["gofmt", "host-run", "auto-run", "xcodebuild"] {
        assert_eq!(link(ssh_wrapper), sidecar_exec.with_file_name("ssh-exec"), "{ssh_wrapper}");
    }
    assert!(!wrappers.join("node").exists() && !wrappers.join("go").exists());

    // Without SSH_HOST the host's wrappers go; the sidecars' stay.
    let output = install(None).await;
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(stderr(&output).contains("ssh []; native, not wrapped [node]"), "{}", stderr(&output));
    assert!(names(&wrappers).iter().all(|name| protocol::commands_for("node").unwrap().contains(&name.as_str())
        || protocol::commands_for("python").unwrap().contains(&name.as_str())));

    // A bad SSH_COMMANDS entry is refused.
    let output = client_run()
        .env("SSH_HOST", "h")
        .env("SSH_COMMANDS", "ok ../../bin/sh")
        .args(["--install-wrappers", wrappers.to_str().unwrap()])
        .run()
        .await;
    assert_eq!(output.status.code(), Some(1));
    assert!(stderr(&output).contains("SSH_COMMANDS names \"../../bin/sh\""), "{}", stderr(&output));
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs sshd (Debian's openssh-server); CI runs it"]
async fn a_generated_ssh_wrapper_runs_on_the_host_with_arguments_intact() {
    let sshd = sshd!();
    let wrappers = sshd.path("wrappers");
    let host_bin = sshd.host_cwd.path().join("bin");
    executable(&host_bin, "only-on-host", "#!/bin/sh\nprintf 'host:'; printf ' [%s]' \"$@\"; echo\n");
    let path = format!("{}:/usr/bin:/bin", wrappers.display());
    let output = client_run()
        .env("PATH", &path)
        .env("SSH_HOST", "127.0.0.1")
        .env("SSH_COMMANDS", "only-on-host")
        .args(["--install-wrappers", wrappers.to_str().unwrap()])
        .run()
        .await;
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(names(&wrappers).contains(&"only-on-host".to_owned()), "{}", stderr(&output));

    let mut wrapper =
        sshd.client().env("PATH", &path).env("SSH_HOST_PATH", &host_bin).other(wrappers.join("only-on-host"));
    wrapper.args(["a b", "it's", "; echo x"]);
    let output = wrapper.output().await.unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(stdout(&output), "host: [a b] [it's] [; echo x]\n");
}

/// An agent image with only ssh-exec (no HTTP client) installs its wrappers with ssh-exec itself, through the
/// entrypoint as an image runs it; a BUILD_SIDECARS it cannot serve without sidecar-exec is refused.
#[tokio::test(flavor = "multi_thread")]
async fn an_image_with_only_ssh_exec_installs_its_wrappers() {
    let scratch = tempfile::tempdir().unwrap();
    let bin = scratch.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let ssh_exec = bin.join("ssh-exec");
    std::fs::copy(SSH_BIN, &ssh_exec).unwrap();
    let wrappers = scratch.path().join("wrappers");
    let entrypoint = concat!(env!("CARGO_MANIFEST_DIR"), "/../wrappers/entrypoint.sh");
    let boot = |sidecars: Option<&str>| {
        let mut command = tokio::process::Command::new(entrypoint);
        command
            .args(["sh", "-c", "command -v gofmt; command -v host-run"])
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("SSH_HOST", "build-mac")
            .env("SIDECAR_WRAPPERS_DIR", &wrappers)
            .env("SIDECAR_EXEC", &ssh_exec);
        if let Some(sidecars) = sidecars {
            command.env("BUILD_SIDECARS", sidecars);
        }
        command.output()
    };
    let output = boot(None).await.unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(stderr(&output).starts_with("ssh-exec: wrappers in "), "{}", stderr(&output));
    let canonical = wrappers.canonicalize().unwrap();
    assert_eq!(
        stdout(&output),
        format!("{}\n{}\n", canonical.join("gofmt").display(), canonical.join("host-run").display())
    );
    assert_eq!(std::fs::read_link(wrappers.join("gofmt")).unwrap(), ssh_exec.canonicalize().unwrap());

    let output = boot(Some(r#"{"go":{"internal_url":"http://builder-go:8080"}}"#)).await.unwrap();
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let expected = format!(
        "ssh-exec: FATAL: BUILD_SIDECARS is set but {} does not exist: install sidecar-exec beside ssh-exec, or unset \
         BUILD_SIDECARS",
        bin.join("sidecar-exec").display()
    );
    assert!(stderr(&output).starts_with(&expected), "{}", stderr(&output));
    assert!(output.stdout.is_empty(), "the container's command must not run");
}
