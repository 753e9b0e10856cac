use std::os::unix::fs::PermissionsExt;

use super::*;

/// A fake CLI in `dir/name` that answers `--version` with `version` and `buildx version` with success only when
/// `buildx`: the real `docker`'s two answers `choose_builder` reads.
fn fake_docker(dir: &Path, version: &str, buildx: bool) {
    let script = format!(
        "#!/bin/sh\ncase \"$1\" in\n  --version) echo '{version}' ;;\n  buildx) {} ;;\nesac\n",
        if buildx {
            "echo 'github.com/docker/buildx v0.17.1'"
        } else {
            "echo 'unknown command: docker buildx' >&2; exit 1"
        }
    );
    std::fs::create_dir_all(dir).unwrap();
    let file = dir.join("docker");
    std::fs::write(&file, script).unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o755)).unwrap();
}

fn options(names: &[&str]) -> BuildOptions {
    BuildOptions {
        names: names.iter().map(|n| n.to_string()).collect(),
        runtime_version: None,
        tag: None,
        registry: None,
        build_args: Vec::new(),
        context: PathBuf::from("/src/sidecar-exec"),
        dry_run: true,
        engine: None,
    }
}

/// The machine's case (issue 25): a v28 CLI without buildx first on PATH, Debian's 20.10 after it. The first is
/// passed over, the second used with DOCKER_BUILDKIT=1; with the first alone, the error says what to install.
#[test]
fn a_legacy_only_docker_is_refused_up_front_and_a_buildkit_one_is_found() {
    let root = tempfile::tempdir().unwrap();
    let (v28, v20, buildx) = (root.path().join("v28"), root.path().join("v20"), root.path().join("buildx"));
    fake_docker(&v28, "Docker version 28.2.2, build e6534b4", false);
    fake_docker(&v20, "Docker version 20.10.24+dfsg1, build 297e128", false);
    fake_docker(&buildx, "Docker version 28.2.2, build e6534b4", true);
    let path = |dirs: &[&Path]| dirs.iter().map(|d| d.display().to_string()).collect::<Vec<_>>().join(":");

    let chosen = choose_builder(EngineKind::Docker, &path(&[&v28, &v20])).unwrap();
    assert_eq!(chosen, Builder { program: v20.join("docker"), style: Style::BuiltinBuildKit });
    let chosen = choose_builder(EngineKind::Docker, &path(&[&buildx, &v20])).unwrap();
    assert_eq!(chosen.style, Style::Buildx);

    let refused = choose_builder(EngineKind::Docker, &path(&[&v28])).unwrap_err().to_string();
    let lines: Vec<&str> = refused.lines().collect();
    assert!(
        lines[0].starts_with("no docker CLI here builds with BuildKit, and the legacy builder cannot"),
        "{refused}"
    );
    assert_eq!(
        lines[1],
        format!("  {} (Docker version 28.2.2, build e6534b4): no buildx plugin", v28.join("docker").display())
    );
    assert!(lines[2].contains("install the buildx plugin") && lines[2].contains("DOCKER_BUILDKIT=1"), "{refused}");
    assert!(choose_builder(EngineKind::Docker, "").unwrap_err().to_string().contains("no `docker` is on PATH"));
    assert!(matches!(choose_builder(EngineKind::Podman, &path(&[&v28])), Err(ImageError::NoPodman)));
}

#[test]
fn the_commands_name_the_version_tag_registry_and_the_callers_uid() {
    let docker = Builder { program: "/usr/bin/docker".into(), style: Style::BuiltinBuildKit };
    let mut o = options(&["node"]);
    o.runtime_version = Some("20".into());
    o.registry = Some("ghcr.io/me/".into());
    o.build_args = vec!["APT_PINS=".into()];
    let line = command(&docker, "unix:///run/d.sock", Target::Builder(Runtime::Node), &o).unwrap().shell_line();
    assert_eq!(
        line,
        "DOCKER_HOST=unix:///run/d.sock DOCKER_BUILDKIT=1 /usr/bin/docker build -f /src/sidecar-exec/images/Dockerfile \
         --target builder --build-arg RUNTIME=node --build-arg NODE_IMAGE=node:20-bookworm-slim --build-arg APT_PINS= \
         -t ghcr.io/me/sidecar-builder-node:20 /src/sidecar-exec"
    );
    let podman = Builder { program: "/usr/bin/podman".into(), style: Style::Podman };
    let mut o = options(&["agent"]);
    o.tag = Some("v1".into());
    let built = command(&podman, "unix:///tmp/p.sock", Target::Agent, &o).unwrap();
    let (uid, gid) = (nix::unistd::getuid(), nix::unistd::getgid());
    assert_eq!(
        built.shell_line(),
        format!(
            "/usr/bin/podman --url unix:///tmp/p.sock build --format docker -f /src/sidecar-exec/images/Dockerfile \
             --target agent --build-arg AGENT_UID={uid} --build-arg AGENT_GID={gid} -t sidecar-agent:v1 /src/sidecar-exec"
        )
    );
    let buildx = Builder { program: "/usr/local/bin/docker".into(), style: Style::Buildx };
    let line = command(&buildx, "unix:///d", Target::Builder(Runtime::Go), &options(&["go"])).unwrap().shell_line();
    assert!(line.starts_with("DOCKER_HOST=unix:///d /usr/local/bin/docker buildx build --load -f "), "{line}");
    assert!(line.ends_with("-t sidecar-builder-go:latest /src/sidecar-exec"), "{line}");
    // Mistakes are named.
    let mut o = options(&["go"]);
    o.build_args = vec!["=x".into()];
    assert!(command(&buildx, "u", Target::Builder(Runtime::Go), &o).unwrap_err().to_string().contains("NAME=VALUE"));
    assert_eq!(
        parse_target("ruby").unwrap_err().to_string(),
        "image 'ruby' is not one of: node, python, java, go, rust, agent"
    );
}
