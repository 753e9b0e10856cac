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
        base: None,
        dry_run: true,
        engine: None,
    }
}

/// These machines' case: a v28 CLI without buildx first on PATH, Debian's 20.10 after it. The first is passed over,
/// the second used with DOCKER_BUILDKIT=1; with the first alone, the error says what to install.
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
    let line = command(&docker, "unix:///run/d.sock", ImageKind::Builder(Runtime::Node), &o).unwrap().shell_line();
    assert_eq!(
        line,
        "DOCKER_HOST=unix:///run/d.sock DOCKER_BUILDKIT=1 /usr/bin/docker build -f /src/sidecar-exec/images/Dockerfile \
         --target builder --build-arg RUNTIME=node --build-arg NODE_IMAGE=node:20-bookworm-slim --build-arg APT_PINS= \
         -t ghcr.io/me/sidecar-builder-node:20 /src/sidecar-exec"
    );
    let podman = Builder { program: "/usr/bin/podman".into(), style: Style::Podman };
    let mut o = options(&["agent"]);
    o.tag = Some("v1".into());
    let built = command(&podman, "unix:///tmp/p.sock", ImageKind::Agent, &o).unwrap();
    let (uid, gid) = (nix::unistd::getuid(), nix::unistd::getgid());
    assert_eq!(
        built.shell_line(),
        format!(
            "/usr/bin/podman --url unix:///tmp/p.sock build --format docker -f /src/sidecar-exec/images/Dockerfile \
             --target agent --build-arg BINARIES=compiled --build-arg AGENT_UID={uid} --build-arg AGENT_GID={gid} \
             -t sidecar-agent:v1 /src/sidecar-exec"
        )
    );
    let buildx = Builder { program: "/usr/local/bin/docker".into(), style: Style::Buildx };
    let line = command(&buildx, "unix:///d", ImageKind::Builder(Runtime::Go), &options(&["go"])).unwrap().shell_line();
    assert!(line.starts_with("DOCKER_HOST=unix:///d /usr/local/bin/docker buildx build --load -f "), "{line}");
    assert!(line.ends_with("-t sidecar-builder-go:latest /src/sidecar-exec"), "{line}");
    // Mistakes are named.
    let mut o = options(&["go"]);
    o.build_args = vec!["=x".into()];
    assert!(command(&buildx, "u", ImageKind::Builder(Runtime::Go), &o).unwrap_err().to_string().contains("NAME=VALUE"));
    assert_eq!(
        parse_target("ruby").unwrap_err().to_string(),
        "image 'ruby' is not one of: node, python, java, go, rust, agent"
    );
}

/// The repository's images/Dockerfile, whose ARG defaults and compiled stage the deciders read.
fn dockerfile() -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../images/Dockerfile")).unwrap()
}

/// Docker 20.10's own BuildKit (`DOCKER_BUILDKIT=1`, plain progress), as it failed on this machine for a python
/// builder: both bases are named in the progress, only the last in the final line.
const DOCKER_20_10: &str = r#"#4 [internal] load metadata for docker.io/library/rust:1-bookworm
#4 sha256:867359d04a8b065048f743e66028e05e0fd6e25c82143b56f1ca6859d2bee658
#4 ERROR: failed to do request: Head "https://registry-1.docker.io/v2/library/rust/manifests/1-bookworm": dial tcp: lookup registry-1.docker.io on 10.255.255.53:53: no such host

#3 [internal] load metadata for docker.io/library/python:3.13-slim-bookworm
#3 ERROR: failed to do request: Head "https://registry-1.docker.io/v2/library/python/manifests/3.13-slim-bookworm": dial tcp: lookup registry-1.docker.io on 10.255.255.53:53: no such host
------
 > [internal] load metadata for docker.io/library/python:3.13-slim-bookworm:
------
failed to solve with frontend dockerfile.v0: failed to create LLB definition: failed to do request: Head "https://registry-1.docker.io/v2/library/python/manifests/3.13-slim-bookworm": dial tcp: lookup registry-1.docker.io on 10.255.255.53:53: no such host
"#;

/// buildx's summary line (Docker 23 and later).
const BUILDX: &str = "ERROR: failed to solve: rust:1-bookworm: failed to resolve source metadata for \
    docker.io/library/rust:1-bookworm: failed to do request: Head \"https://registry-1.docker.io/v2/library/rust/\
    manifests/1-bookworm\": dial tcp: lookup registry-1.docker.io: no such host\n";

/// podman 4.3, with and without a search registry for short names, and its retries.
const PODMAN_SHORT: &str = "[1/2] STEP 1/2: FROM rust:1-bookworm AS compiled\nError: creating build container: \
    short-name \"rust:1-bookworm\" did not resolve to an alias and no unqualified-search registries are defined in \
    \"/etc/containers/registries.conf\"\n";
const PODMAN_PULL: &str = "time=\"2026-12-04T01:18:00Z\" level=warning msg=\"Failed, retrying in 2s ... (2/3). Error: \
    initializing source docker://localhost/nosuch:1: pinging container registry localhost: Get \\\"https://localhost/v2/\\\": \
    dial tcp 127.0.0.1:443: connect: connection refused\"\nError: creating build container: initializing source \
    docker://localhost/nosuch:1: pinging container registry localhost: Get \"https://localhost/v2/\": dial tcp \
    127.0.0.1:443: connect: connection refused\n";

#[test]
fn a_failed_pull_is_read_from_buildkits_and_podmans_text() {
    let pulls = |text: &str| {
        pull::failed_pulls(text).into_iter().map(|p| format!("{} / {}", p.image, p.cause)).collect::<Vec<_>>()
    };
    assert_eq!(
        pulls(DOCKER_20_10),
        [
            "docker.io/library/rust:1-bookworm / no such host",
            "docker.io/library/python:3.13-slim-bookworm / no such host"
        ]
    );
    assert_eq!(pulls(BUILDX), ["docker.io/library/rust:1-bookworm / no such host"]);
    assert_eq!(
        pulls(PODMAN_SHORT),
        ["rust:1-bookworm / a short name, and no unqualified-search registries are defined in registries.conf"]
    );
    assert_eq!(pulls(PODMAN_PULL), ["localhost/nosuch:1 / connection refused"]);
    // podman, after the compiled stage failed, reads `FROM compiled` as an image: a stage, not a pull.
    let after_stage = format!("{PODMAN_PULL}{}", PODMAN_SHORT.replace("rust:1-bookworm", "compiled"));
    let failed = pull::failed_pulls_of(&after_stage, &dockerfile());
    assert_eq!(failed.iter().map(|p| p.image.as_str()).collect::<Vec<_>>(), ["localhost/nosuch:1"]);
    // Docker 20.10's last line alone still names the image, from the registry request that failed.
    let last = DOCKER_20_10.lines().last().unwrap();
    assert_eq!(pulls(last), ["registry-1.docker.io/library/python:3.13-slim-bookworm / no such host"]);
    // A build that failed otherwise is no pull failure.
    let failed_step = "#12 ERROR: executor failed running [/bin/sh -c false]: exit code: 1\n------\n > [builder 3/7] \
        RUN false:\n------\nfailed to solve with frontend dockerfile.v0: failed to build LLB: executor failed running \
        [/bin/sh -c false]: exit code: 1\nError: building at STEP \"RUN false\": while running runtime: exit status 1\n";
    assert_eq!(pulls(failed_step), Vec::<String>::new());
    assert_eq!(pull::normalize("docker://docker.io/library/rust:1"), "rust:1");
    assert_eq!(pull::path_on_a_registry("localhost:5000/team/rust:1"), "team/rust:1");
    assert_eq!(pull::path_on_a_registry("docker.io/library/rust:1"), "rust:1");
}

/// The README's `image build python node agent` with no registry: the one line names rust (and why a python
/// builder needs it: RUST_IMAGE, not RUST_RUNTIME_IMAGE, though both default to rust:1-bookworm), python, and
/// both ways out.
#[test]
fn a_failed_pull_is_one_line_naming_the_image_its_argument_and_the_ways_out() {
    let docker = Builder { program: "/usr/bin/docker".into(), style: Style::BuiltinBuildKit };
    let target = ImageKind::Builder(Runtime::Python);
    let built = command(&docker, "unix:///d", target, &options(&["python"])).unwrap();
    let args = effective_args(&dockerfile_image_args(&dockerfile()), &built.args);
    let relevant = image_args_of(target, false);
    let failed = pull::failed_pulls(DOCKER_20_10)
        .into_iter()
        .map(|p| {
            let names = args_naming(&args, &p.image, &relevant);
            (p, names)
        })
        .collect();
    let error = ImageError::Pull { image: built.image, failed }.to_string();
    assert_eq!(error.lines().count(), 1, "{error}");
    assert!(
        error.starts_with(
            "building sidecar-builder-python:latest: could not pull docker.io/library/rust:1-bookworm (RUST_IMAGE; no \
             such host) nor docker.io/library/python:3.13-slim-bookworm (PYTHON_IMAGE; no such host): RUST_IMAGE is \
             where exec-server and sidecar-exec are compiled"
        ),
        "{error}"
    );
    assert!(error.contains("`sidecarctl image base`") && error.contains("`--base localhost/sidecar-base:bookworm`"));
    assert!(error.ends_with("`--build-arg RUST_IMAGE=MIRROR/rust:1-bookworm`"), "{error}");
    // The agent's bases share a default: both are named. An image no argument names gets the general form.
    let agent_args = effective_args(&dockerfile_image_args(&dockerfile()), &[]);
    let agent = image_args_of(ImageKind::Agent, true);
    assert_eq!(
        args_naming(&agent_args, "docker.io/library/debian:bookworm-slim", &agent),
        ["AGENT_IMAGE", "INIT_IMAGE"]
    );
    let unknown = pull::FailedPull { image: "x/y:1".into(), cause: "not found".into() };
    let error = ImageError::Pull { image: "sidecar-agent:latest".into(), failed: vec![(unknown, Vec::new())] };
    assert!(error.to_string().ends_with("`--build-arg …_IMAGE=MIRROR/x/y:1`"), "{error}");
}

#[test]
fn with_a_base_every_stage_is_built_from_it_with_the_prebuilt_binaries() {
    let podman = Builder { program: "/usr/bin/podman".into(), style: Style::Podman };
    let mut o = options(&["python", "java", "agent"]);
    o.base = Some("localhost/sidecar-base:bookworm".into());
    o.build_args = vec!["NODE_IMAGE=elsewhere:1".into()];
    let line = |target| command(&podman, "unix:///p", target, &o).unwrap().shell_line();
    let base = "localhost/sidecar-base:bookworm";
    assert!(
        line(ImageKind::Builder(Runtime::Python)).contains(&format!(
            "--build-arg RUNTIME=python --build-arg BINARIES=prebuilt --build-arg PYTHON_IMAGE={base} \
             --build-arg NODE_IMAGE=elsewhere:1 -t sidecar-builder-python:latest"
        )),
        "{}",
        line(ImageKind::Builder(Runtime::Python))
    );
    assert!(line(ImageKind::Builder(Runtime::Java))
        .contains(&format!("--build-arg JAVA_IMAGE={base} --build-arg MAVEN_VERSION= --build-arg GRADLE_VERSION= ")));
    assert!(line(ImageKind::Agent).contains(&format!(
        "--build-arg BINARIES=prebuilt --build-arg AGENT_IMAGE={base} --build-arg INIT_IMAGE={base} "
    )));
    // --runtime-version names an official image's tag: refused with --base, in one line saying why.
    o.runtime_version = Some("3.12".into());
    let refused = check(&o).unwrap_err().to_string();
    assert_eq!(
        refused,
        "--runtime-version 3.12 picks an official base image by its tag, and --base localhost/sidecar-base:bookworm \
         builds every image on that one base with Debian's own runtime versions: drop one of the two"
    );
    assert!(command(&podman, "u", ImageKind::Agent, &o).is_err());
}

/// A dry run needs no engine: without one, Docker's lines (at the place asked for, else Docker's socket) and a
/// note; a real build still needs the engine.
#[test]
fn a_dry_run_without_an_engine_prints_dockers_commands_with_a_note() {
    let refused = || EngineError::Connect {
        url: "unix:///nowhere.sock".into(),
        error: bollard::errors::Error::IOError { err: std::io::Error::other("no such socket") },
    };
    let choice = choose_engine(Err(refused()), true, Some("unix:///nowhere.sock")).unwrap();
    assert_eq!((choice.kind, choice.url.as_str()), (EngineKind::Docker, "unix:///nowhere.sock"));
    let note = choice.note.unwrap();
    assert!(
        note.starts_with(
            "no container engine answered (unix:///nowhere.sock: no such socket), so these are the \
        commands for Docker at unix:///nowhere.sock"
        ),
        "{note}"
    );
    let choice = choose_engine(Err(EngineError::NotFound { tried: Vec::new() }), true, None).unwrap();
    assert_eq!(choice.url, "unix:///var/run/docker.sock");
    assert!(matches!(choose_engine(Err(refused()), false, None), Err(ImageError::Engine(_))));
    let live = choose_engine(Ok((EngineKind::Podman, "unix:///p".into())), true, None).unwrap();
    assert_eq!((live.kind, live.note), (EngineKind::Podman, None));
    // With --base and binaries to build, that command comes first.
    let docker = Builder { program: "docker".into(), style: Style::Buildx };
    let mut o = options(&["agent"]);
    o.base = Some("b".into());
    let agent = command(&docker, "unix:///d", ImageKind::Agent, &o).unwrap();
    let lines = dry_run_lines(Some(&binaries_command(&o.context)), &[agent]);
    assert_eq!(lines[0], "/src/sidecar-exec/images/binaries.sh --dist");
    assert!(lines[1].starts_with("DOCKER_HOST=unix:///d docker buildx build --load -f "), "{}", lines[1]);
}

/// Outside a checkout the message names the folder once, and what to do.
#[test]
fn no_dockerfile_names_the_folder_and_what_to_do() {
    let error = ImageError::NoDockerfile { context: PathBuf::from("/home/me/project") }.to_string();
    assert_eq!(
        error,
        "/home/me/project has no images/Dockerfile: run sidecarctl image from a sidecar-exec checkout, or give the \
         checkout's path with --context DIR"
    );
    let here = ImageError::NoDockerfile { context: PathBuf::from(".") }.to_string();
    assert!(here.starts_with("the current folder (/") && !here.contains("./images"), "{here}");
}

/// The binaries are current when all three exist and are no older than any input of the compiled stage (or
/// than `.built`, which binaries.sh --dist touches).
#[test]
fn the_prebuilt_binaries_are_stale_when_missing_or_older_than_the_sources() {
    let inputs = binaries::compiled_inputs(&dockerfile());
    for input in ["Cargo.toml", "Cargo.lock", "exec-server", "sidecar-exec", "protocol", "sidecarctl"] {
        assert!(inputs.iter().any(|i| i == input), "{input} not in {inputs:?}");
    }
    let root = tempfile::tempdir().unwrap();
    let context = root.path();
    let hour_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
    let write = |path: &str, time: std::time::SystemTime| {
        let file = context.join(path);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(&file, path).unwrap();
        std::fs::File::options().write(true).open(&file).unwrap().set_modified(time).unwrap();
    };
    std::fs::create_dir_all(context.join("images")).unwrap();
    std::fs::write(context.join("images/Dockerfile"), dockerfile()).unwrap();
    for input in &inputs {
        match input.as_str() {
            "Cargo.toml" | "Cargo.lock" => write(input, hour_ago),
            crate_folder => write(&format!("{crate_folder}/src/lib.rs"), hour_ago),
        }
    }
    assert!(matches!(binaries::stale(context), Some(binaries::Stale::Missing { .. })));
    for name in binaries::BINARIES {
        write(&format!("images/dist/{name}"), std::time::SystemTime::now());
    }
    assert_eq!(binaries::stale(context), None);
    // A source edited after the build; cargo's own target folder does not count.
    write("exec-server/target/release/x", std::time::SystemTime::now() + std::time::Duration::from_secs(60));
    assert_eq!(binaries::stale(context), None);
    write("exec-server/src/main.rs", std::time::SystemTime::now() + std::time::Duration::from_secs(60));
    assert_eq!(
        binaries::stale(context).map(|s| s.to_string()),
        Some(format!("{}/exec-server/src/main.rs is newer than the binaries in images/dist", context.display()))
    );
    // binaries.sh --dist found them current (left them as they were) and touched .built.
    write("images/dist/.built", std::time::SystemTime::now() + std::time::Duration::from_secs(120));
    assert_eq!(binaries::stale(context), None);
}

#[test]
fn image_base_runs_debootstrap_carries_the_certificates_in_and_imports_on_either_engine() {
    let options = base::BaseOptions {
        suite: "bookworm".into(),
        tag: None,
        mirror: Some("http://mirror.example/debian".into()),
        cache_dir: "/var/cache/sidecarctl/debootstrap".into(),
        dry_run: true,
        engine: None,
    };
    let rootfs = Path::new("/var/tmp/sidecar-base.1");
    let plan =
        base::plan(&options, EngineKind::Podman, Path::new("/usr/bin/podman"), "unix:///p", rootfs, true).unwrap();
    let lines = plan.lines(rootfs);
    assert_eq!(
        lines[..3],
        [
            "mkdir -m 0755 /var/tmp/sidecar-base.1".to_owned(),
            "debootstrap --variant=minbase --include=ca-certificates --cache-dir=/var/cache/sidecarctl/debootstrap \
             bookworm /var/tmp/sidecar-base.1 http://mirror.example/debian"
                .to_owned(),
            "cp -a /usr/local/share/ca-certificates/. /var/tmp/sidecar-base.1/usr/local/share/ca-certificates/ && \
             chroot /var/tmp/sidecar-base.1 update-ca-certificates"
                .to_owned(),
        ]
    );
    assert!(
        lines[3].starts_with(
            "tar -C /var/tmp/sidecar-base.1 -c . | /usr/bin/podman --url unix:///p import \
        --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' --change \
        'ENV SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt' "
        ),
        "{}",
        lines[3]
    );
    assert!(lines[3].ends_with(" --change 'CMD [\"/bin/bash\"]' - localhost/sidecar-base:bookworm"), "{}", lines[3]);
    assert_eq!(lines[4], "rm -rf /var/tmp/sidecar-base.1");
    // Docker: the engine through DOCKER_HOST; no certificates of the host's own: no step for them.
    let mut trixie = options.clone();
    trixie.suite = "trixie".into();
    trixie.tag = Some("mine/base:13".into());
    let plan =
        base::plan(&trixie, EngineKind::Docker, Path::new("/usr/bin/docker"), "unix:///d", rootfs, false).unwrap();
    let lines = plan.lines(rootfs);
    assert_eq!(lines.len(), 4, "{lines:?}");
    assert!(lines[2].contains("| DOCKER_HOST=unix:///d /usr/bin/docker import --change "), "{}", lines[2]);
    assert!(lines[2].ends_with(" - mine/base:13") && lines[1].contains(" trixie "), "{lines:?}");
    let mut bad = options;
    bad.suite = "bookworm; rm -rf /".into();
    assert!(base::plan(&bad, EngineKind::Docker, Path::new("d"), "u", rootfs, false).is_err());
}
