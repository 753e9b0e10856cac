//! `sidecarctl image build NAME…`: the builder images (`node`, `python`, `java`, `go`, `rust`) and the agent image
//! (`agent`) from a checkout's images/Dockerfile, on the engine `up` would use, with that engine's own build tool:
//! `podman build --format docker` for Podman (the default OCI format drops HEALTHCHECK), and for Docker the first
//! `docker` CLI on `PATH` that builds with BuildKit (the buildx plugin, or a CLI older than 23 with
//! `DOCKER_BUILDKIT=1`, which uses the daemon's own BuildKit). A CLI that would fall back to the legacy builder,
//! which cannot build the Dockerfile (`RUN --mount`, `COPY --chmod`), is refused before anything is built.
//!
//! Decision: the build runs the CLI rather than the API's `/build`, because BuildKit over the API needs a
//! session protocol of its own, and the CLI's progress output is what a person knows. `--dry-run` prints exactly
//! the command lines that would run, each runnable as it is; with no engine to ask, the lines for Docker (at
//! `--engine`, `DOCKER_HOST` or Docker's own socket) with a note saying so, since printing needs no engine.
//!
//! `--base IMAGE` builds every stage from one local image (`sidecarctl image base` makes a Debian one) with the
//! binaries prebuilt from this checkout: no registry is needed for any image (see docs/images.md, "Building
//! without a registry"). A build that fails because a base image could not be pulled ends with one line naming
//! that image, the Dockerfile argument that names it, and both ways out ([`pull`]).

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use clap::Args;

use crate::engine::{ContainerEngine, EngineError, EngineKind};
use crate::runtime::Runtime;

pub mod base;
pub mod binaries;
pub mod pull;

#[derive(Args, Debug, Clone)]
pub struct BuildOptions {
    /// What to build: node, python, java, go, rust (builders) and agent.
    #[arg(required = true, value_name = "NAME")]
    pub names: Vec<String>,

    /// The runtime's version, as its base image tags it (node 22 → node:22-bookworm-slim, python 3.12 →
    /// python:3.12-slim-bookworm, java 21 → eclipse-temurin:21-jdk, go 1.23 → golang:1.23-bookworm, rust 1.80 →
    /// rust:1.80-bookworm); also the default tag.
    #[arg(long, value_name = "V", env = "SIDECARCTL_RUNTIME_VERSION")]
    pub runtime_version: Option<String>,

    /// Build every image FROM this local image (e.g. `sidecarctl image base`'s localhost/sidecar-base:bookworm),
    /// with the binaries prebuilt from this checkout (images/binaries.sh runs when they are missing or stale): no
    /// registry needed. The builders then carry Debian's own python, node, java, go and rust.
    #[arg(long, value_name = "IMAGE", env = "SIDECARCTL_BASE_IMAGE")]
    pub base: Option<String>,

    /// The images' tag (default: the runtime version, else latest).
    #[arg(long, value_name = "T", env = "SIDECARCTL_IMAGE_TAG")]
    pub tag: Option<String>,

    /// A registry (and path) to name the images under, e.g. ghcr.io/me: ghcr.io/me/sidecar-builder-node:T.
    #[arg(long, value_name = "R", env = "SIDECARCTL_REGISTRY")]
    pub registry: Option<String>,

    /// More build arguments for every image, NAME=VALUE (e.g. a base image from a mirror); repeatable.
    #[arg(long = "build-arg", value_name = "NAME=VALUE")]
    pub build_args: Vec<String>,

    /// The sidecar-exec checkout to build from (it holds images/Dockerfile).
    #[arg(long, value_name = "DIR", default_value = ".", env = "SIDECARCTL_CONTEXT")]
    pub context: PathBuf,

    /// Print the commands that would run, and run nothing.
    #[arg(long, env = "SIDECARCTL_DRY_RUN")]
    pub dry_run: bool,

    /// The engine's socket (default: as `up` finds it).
    #[arg(long, value_name = "URL")]
    pub engine: Option<String>,
}

/// One image to build.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImageKind {
    Builder(Runtime),
    Agent,
}

/// One command line: variables, program, arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildCommand {
    pub image: String,
    pub env: Vec<(String, String)>,
    pub program: PathBuf,
    pub args: Vec<String>,
}

impl BuildCommand {
    /// The line as a POSIX shell runs it: `NAME=VALUE… program args…`, every word quoted where needed.
    pub fn shell_line(&self) -> String {
        let env = self.env.iter().map(|(k, v)| format!("{k}={}", protocol::shell::word(v)));
        let words = std::iter::once(self.program.display().to_string()).chain(self.args.iter().cloned());
        env.chain(words.map(|w| protocol::shell::word(&w))).collect::<Vec<_>>().join(" ")
    }
}

/// The build tool for an engine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Builder {
    pub program: PathBuf,
    pub style: Style,
}

/// How the tool is called.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    /// `podman --url URL build --format docker …`.
    Podman,
    /// `docker buildx build --load …`.
    Buildx,
    /// `DOCKER_BUILDKIT=1 docker build …` (a CLI older than 23: the daemon's BuildKit).
    BuiltinBuildKit,
}

/// A `docker` CLI that was looked at and not used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejected {
    pub program: PathBuf,
    pub version: String,
}

#[derive(Debug)]
pub enum ImageError {
    UnknownName {
        name: String,
    },
    NoDockerfile {
        context: PathBuf,
    },
    /// `--runtime-version` names an official image's tag; `--base` builds on one image with Debian's runtimes.
    RuntimeVersionWithBase {
        version: String,
        base: String,
    },
    /// `--base IMAGE` is not on the engine.
    NoBaseImage {
        image: String,
    },
    /// `images/binaries.sh --dist` failed (its own output said why).
    Binaries {
        line: String,
        code: Option<i32>,
    },
    /// A build failed because base images could not be pulled.
    Pull {
        image: String,
        failed: Vec<(pull::FailedPull, Vec<String>)>,
    },
    BadBuildArg {
        value: String,
    },
    Engine(EngineError),
    /// No tool to build with: `podman` missing for Podman.
    NoPodman,
    /// Every `docker` found would use the legacy builder (or none was found).
    LegacyOnly {
        rejected: Vec<Rejected>,
    },
    /// A build ran and failed.
    Failed {
        image: String,
        code: Option<i32>,
        line: String,
    },
    Spawn {
        program: PathBuf,
        error: std::io::Error,
    },
}

impl std::fmt::Display for ImageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ImageError::UnknownName { name } => {
                write!(f, "image '{name}' is not one of: {}, agent", Runtime::list())
            }
            ImageError::NoDockerfile { context } => {
                let shown = if context.as_os_str() == "." {
                    let here = std::env::current_dir().map(|d| d.display().to_string()).unwrap_or_default();
                    format!("the current folder ({here})")
                } else {
                    context.display().to_string()
                };
                write!(
                    f,
                    "{shown} has no images/Dockerfile: run sidecarctl image from a sidecar-exec checkout, or give \
                     the checkout's path with --context DIR"
                )
            }
            ImageError::RuntimeVersionWithBase { version, base } => write!(
                f,
                "--runtime-version {version} picks an official base image by its tag, and --base {base} builds every \
                 image on that one base with Debian's own runtime versions: drop one of the two"
            ),
            ImageError::NoBaseImage { image } => write!(
                f,
                "--base {image}: the engine has no such image; make it with `sidecarctl image base` (--tag {image}), \
                 or name an image the engine has"
            ),
            ImageError::Binaries { line, code } => write!(
                f,
                "building the prebuilt binaries for --base failed ({}; its output is above): {line}",
                code.map_or_else(|| "killed by a signal".to_owned(), |c| format!("exit code {c}"))
            ),
            ImageError::Pull { image, failed } => {
                let named = failed
                    .iter()
                    .map(|(pull, args)| match args.as_slice() {
                        [] => format!("{} ({})", pull.image, pull.cause),
                        _ => format!("{} ({}; {})", pull.image, args.join(", "), pull.cause),
                    })
                    .collect::<Vec<_>>()
                    .join(" nor ");
                let rust = failed.iter().any(|(_, args)| args.iter().any(|a| a == "RUST_IMAGE"));
                let why = if rust {
                    ": RUST_IMAGE is where exec-server and sidecar-exec are compiled, for every image unless \
                     BINARIES=prebuilt"
                } else {
                    ""
                };
                let (arg, example) = failed
                    .iter()
                    .find_map(|(pull, args)| args.first().map(|a| (a.clone(), pull.image.clone())))
                    .or_else(|| failed.first().map(|(pull, _)| ("…_IMAGE".to_owned(), pull.image.clone())))
                    .unwrap_or_else(|| ("…_IMAGE".to_owned(), "IMAGE".to_owned()));
                write!(
                    f,
                    "building {image}: could not pull {named}{why}; with no registry, make a local base with \
                     `sidecarctl image base` and build on it with `--base localhost/sidecar-base:bookworm`, or \
                     name a mirror with `--build-arg {arg}=MIRROR/{}`",
                    pull::path_on_a_registry(&example)
                )
            }
            ImageError::BadBuildArg { value } => write!(f, "--build-arg expects NAME=VALUE, got '{value}'"),
            ImageError::Engine(e) => e.fmt(f),
            ImageError::NoPodman => f.write_str(
                "the engine is Podman, whose images are built with the podman CLI, and no `podman` is on PATH: \
                 install podman (the package of the same name)",
            ),
            ImageError::LegacyOnly { rejected } if rejected.is_empty() => f.write_str(
                "the engine is Docker, whose images are built with the docker CLI, and no `docker` is on PATH: \
                 install the docker CLI with its buildx plugin (docker-ce-cli and docker-buildx-plugin)",
            ),
            ImageError::LegacyOnly { rejected } => {
                f.write_str(
                    "no docker CLI here builds with BuildKit, and the legacy builder cannot build images/Dockerfile \
                     (RUN --mount, COPY --chmod):",
                )?;
                for r in rejected {
                    write!(f, "\n  {} ({}): no buildx plugin", r.program.display(), r.version)?;
                }
                f.write_str(
                    "\ninstall the buildx plugin (docker-buildx-plugin from Docker's packages; Debian bookworm has \
                     none), or put a docker CLI older than 23 first on PATH (bookworm's docker.io: /usr/bin/docker, \
                     which sidecarctl runs with DOCKER_BUILDKIT=1), or build on Podman (--engine its socket)",
                )
            }
            ImageError::Failed { image, code, line } => write!(
                f,
                "building {image} failed ({}); the command was:\n  {line}",
                code.map_or_else(|| "killed by a signal".to_owned(), |c| format!("exit code {c}"))
            ),
            ImageError::Spawn { program, error } => write!(f, "cannot run {}: {error}", program.display()),
        }
    }
}

impl std::error::Error for ImageError {}

impl From<EngineError> for ImageError {
    fn from(e: EngineError) -> Self {
        ImageError::Engine(e)
    }
}

/// `agent` or a runtime.
pub fn parse_target(name: &str) -> Result<ImageKind, ImageError> {
    if name == "agent" {
        return Ok(ImageKind::Agent);
    }
    name.parse::<Runtime>().map(ImageKind::Builder).map_err(|_| ImageError::UnknownName { name: name.to_owned() })
}

/// Every `NAME` on `path` (a `PATH` value) that is an executable file, in order, each real file once.
pub fn on_path(name: &str, path: &str) -> Vec<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let mut seen: Vec<PathBuf> = Vec::new();
    let mut found = Vec::new();
    for dir in path.split(':').filter(|d| !d.is_empty()) {
        let candidate = Path::new(dir).join(name);
        let executable = candidate.metadata().is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0);
        let real = candidate.canonicalize().unwrap_or_else(|_| candidate.clone());
        if executable && !seen.contains(&real) {
            seen.push(real);
            found.push(candidate);
        }
    }
    found
}

/// The build tool for `kind`, from the executables on `path`. For Docker each `docker` is asked its version
/// (`docker --version`) and whether it has buildx (`docker buildx version`); the first that builds with BuildKit
/// wins.
pub fn choose_builder(kind: EngineKind, path: &str) -> Result<Builder, ImageError> {
    match kind {
        EngineKind::Podman => {
            let program = on_path("podman", path).into_iter().next().ok_or(ImageError::NoPodman)?;
            Ok(Builder { program, style: Style::Podman })
        }
        EngineKind::Docker => {
            let mut rejected = Vec::new();
            for program in on_path("docker", path) {
                let quiet = |args: &[&str]| Command::new(&program).args(args).env_remove("DOCKER_HOST").output();
                if quiet(&["buildx", "version"]).is_ok_and(|o| o.status.success()) {
                    return Ok(Builder { program, style: Style::Buildx });
                }
                let version = quiet(&["--version"])
                    .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
                    .unwrap_or_default();
                if major_version(&version).is_some_and(|major| major < 23) {
                    return Ok(Builder { program, style: Style::BuiltinBuildKit });
                }
                rejected.push(Rejected { program, version });
            }
            Err(ImageError::LegacyOnly { rejected })
        }
    }
}

/// `Docker version 20.10.24+dfsg1, build 297e128` → 20.
fn major_version(text: &str) -> Option<u32> {
    let version = text.strip_prefix("Docker version ")?;
    version.split(['.', ',', ' ']).next()?.parse().ok()
}

/// The image's name: `[REGISTRY/]sidecar-builder-RT:TAG` or `[REGISTRY/]sidecar-agent:TAG`.
pub fn image_name(target: ImageKind, options: &BuildOptions) -> String {
    let base = match target {
        ImageKind::Builder(rt) => format!("sidecar-builder-{rt}"),
        ImageKind::Agent => "sidecar-agent".to_owned(),
    };
    let tag = options.tag.clone().or_else(|| options.runtime_version.clone()).unwrap_or_else(|| "latest".to_owned());
    let registry = options.registry.as_deref().map(|r| format!("{}/", r.trim_end_matches('/'))).unwrap_or_default();
    format!("{registry}{base}:{tag}")
}

/// The Dockerfile's build argument that names a runtime's base image.
pub fn image_arg(runtime: Runtime) -> &'static str {
    match runtime {
        Runtime::Node => "NODE_IMAGE",
        Runtime::Python => "PYTHON_IMAGE",
        Runtime::Java => "JAVA_IMAGE",
        Runtime::Go => "GO_IMAGE",
        Runtime::Rust => "RUST_RUNTIME_IMAGE",
    }
}

/// The base image a runtime version names (the Dockerfile's build argument and its value).
pub fn base_image(runtime: Runtime, version: &str) -> (&'static str, String) {
    let value = match runtime {
        Runtime::Node => format!("node:{version}-bookworm-slim"),
        Runtime::Python => format!("python:{version}-slim-bookworm"),
        Runtime::Java => format!("eclipse-temurin:{version}-jdk"),
        Runtime::Go => format!("golang:{version}-bookworm"),
        Runtime::Rust => format!("rust:{version}-bookworm"),
    };
    (image_arg(runtime), value)
}

/// The build arguments naming an image that `target` is built from, as `command` passes them: the binaries'
/// stage (`RUST_IMAGE`, unless `BINARIES=prebuilt`) and the target's own bases.
fn image_args_of(target: ImageKind, binaries_prebuilt: bool) -> Vec<&'static str> {
    let mut args = if binaries_prebuilt { Vec::new() } else { vec!["RUST_IMAGE"] };
    match target {
        ImageKind::Builder(rt) => args.push(image_arg(rt)),
        ImageKind::Agent => args.extend(["AGENT_IMAGE", "INIT_IMAGE"]),
    }
    args
}

/// Refuses what cannot go together, before any engine is asked.
pub fn check(options: &BuildOptions) -> Result<(), ImageError> {
    if let (Some(version), Some(base)) = (&options.runtime_version, &options.base) {
        return Err(ImageError::RuntimeVersionWithBase { version: version.clone(), base: base.clone() });
    }
    for value in &options.build_args {
        if value.split_once('=').is_none_or(|(name, _)| name.is_empty()) {
            return Err(ImageError::BadBuildArg { value: value.clone() });
        }
    }
    Ok(())
}

/// The command that builds `target` with `builder` on the engine at `url`. The agent image is built for the
/// caller's uid and gid (`AGENT_UID`/`AGENT_GID`), as `up` runs it.
pub fn command(
    builder: &Builder,
    url: &str,
    target: ImageKind,
    options: &BuildOptions,
) -> Result<BuildCommand, ImageError> {
    let image = image_name(target, options);
    let context = options.context.display().to_string();
    let dockerfile = options.context.join("images/Dockerfile").display().to_string();
    let mut args: Vec<String> = Vec::new();
    let mut env = Vec::new();
    match builder.style {
        Style::Podman => {
            args.extend(["--url".into(), url.to_owned(), "build".into(), "--format".into(), "docker".into()])
        }
        Style::Buildx => {
            env.push(("DOCKER_HOST".to_owned(), url.to_owned()));
            args.extend(["buildx".into(), "build".into(), "--load".into()]);
        }
        Style::BuiltinBuildKit => {
            env.push(("DOCKER_HOST".to_owned(), url.to_owned()));
            env.push(("DOCKER_BUILDKIT".to_owned(), "1".to_owned()));
            args.push("build".into());
        }
    }
    args.extend(["-f".into(), dockerfile]);
    let mut build_args: Vec<String> = Vec::new();
    // Podman 4.3 (buildah) finds the stage a `FROM ${BINARIES}` names only through a build argument given on its
    // command line, not through the ARG's default: without one it reads `compiled` as an image to pull (`short-name
    // "compiled" did not resolve`) and never builds the stage. So the default is passed explicitly there.
    if builder.style == Style::Podman && options.base.is_none() {
        build_args.push("BINARIES=compiled".to_owned());
    }
    match target {
        ImageKind::Builder(rt) => {
            args.extend(["--target".into(), "builder".into()]);
            build_args.push(format!("RUNTIME={rt}"));
            if let Some(version) = &options.runtime_version {
                let (name, value) = base_image(rt, version);
                build_args.push(format!("{name}={value}"));
            }
        }
        ImageKind::Agent => {
            args.extend(["--target".into(), "agent".into()]);
            build_args.push(format!("AGENT_UID={}", nix::unistd::getuid()));
            build_args.push(format!("AGENT_GID={}", nix::unistd::getgid()));
        }
    }
    // Every stage from the one base, the binaries from images/dist. Java takes Debian's Maven and Gradle (the
    // upstream downloads need the internet); the caller's own --build-arg values come after these and win.
    if let Some(base) = &options.base {
        build_args.push("BINARIES=prebuilt".to_owned());
        build_args.extend(image_args_of(target, true).into_iter().map(|name| format!("{name}={base}")));
        if target == ImageKind::Builder(Runtime::Java) {
            build_args.extend(["MAVEN_VERSION=".to_owned(), "GRADLE_VERSION=".to_owned()]);
        }
    }
    check(options)?;
    build_args.extend(options.build_args.iter().cloned());
    for value in build_args {
        args.extend(["--build-arg".into(), value]);
    }
    args.extend(["-t".into(), image.clone(), context]);
    Ok(BuildCommand { image, env, program: builder.program.clone(), args })
}

/// The engine the commands are for: the one that answered, or (a dry run with none) Docker, with the note that
/// says so.
#[derive(Debug)]
pub struct EngineChoice {
    pub kind: EngineKind,
    pub url: String,
    pub note: Option<String>,
}

/// Decides the engine from what connecting gave: a dry run needs no engine, so without one it prints the lines for
/// Docker at the place asked for (`--engine`, `DOCKER_HOST`) or Docker's own socket, and says so; a real build
/// needs the engine.
pub fn choose_engine(
    connected: Result<(EngineKind, String), EngineError>,
    dry_run: bool,
    asked: Option<&str>,
) -> Result<EngineChoice, ImageError> {
    match connected {
        Ok((kind, url)) => Ok(EngineChoice { kind, url, note: None }),
        Err(error) if dry_run => {
            let url = asked.unwrap_or("unix:///var/run/docker.sock").to_owned();
            let why = match &error {
                EngineError::Connect { url, error } => format!("{url}: {error}"),
                EngineError::NotFound { tried } if tried.len() == 1 => {
                    format!("{}: {}", tried[0].place.url, tried[0].problem)
                }
                _ => "at none of the usual places; `sidecarctl ps` lists them".to_owned(),
            };
            Ok(EngineChoice {
                kind: EngineKind::Docker,
                url: url.clone(),
                note: Some(format!(
                    "no container engine answered ({why}), so these are the commands for Docker at {url} (on Podman, \
                     `podman --url URL` runs them, and builds with --format docker)"
                )),
            })
        }
        Err(error) => Err(error.into()),
    }
}

/// What a dry run prints, in order: the binaries' build when `--base` needs it, then one line per image.
pub fn dry_run_lines(binaries: Option<&BuildCommand>, commands: &[BuildCommand]) -> Vec<String> {
    binaries.into_iter().chain(commands).map(BuildCommand::shell_line).collect()
}

/// `images/binaries.sh --dist` in `context`.
pub fn binaries_command(context: &Path) -> BuildCommand {
    BuildCommand {
        image: "images/dist".to_owned(),
        env: Vec::new(),
        program: context.join("images/binaries.sh"),
        args: vec!["--dist".to_owned()],
    }
}

/// Builds (or, with `--dry-run`, prints) every image named, in order; stops at the first failure. The build
/// tool's own progress goes to our stdout and stderr as it comes (stderr through us, so that a failed pull can be
/// named).
pub async fn build(options: BuildOptions) -> Result<(), ImageError> {
    let targets = options.names.iter().map(|n| parse_target(n)).collect::<Result<Vec<_>, _>>()?;
    check(&options)?;
    let dockerfile = options.context.join("images/Dockerfile");
    if !dockerfile.is_file() {
        return Err(ImageError::NoDockerfile { context: options.context.clone() });
    }
    let asked = options.engine.clone().or_else(|| std::env::var("DOCKER_HOST").ok().filter(|h| !h.is_empty()));
    let (connected, engine) = match ContainerEngine::connect(options.engine.as_deref()).await {
        Ok(engine) => (engine.kind().await.map(|kind| (kind, engine.url().to_owned())), Some(engine)),
        Err(error) => (Err(error), None),
    };
    let choice = choose_engine(connected, options.dry_run, asked.as_deref())?;
    let path = std::env::var("PATH").unwrap_or_default();
    let builder = match choose_builder(choice.kind, &path) {
        Ok(builder) => builder,
        Err(error) if options.dry_run && choice.note.is_some() => {
            eprintln!("sidecarctl: note: {error}");
            Builder { program: "docker".into(), style: Style::Buildx }
        }
        Err(error) => return Err(error),
    };
    if let Some(note) = &choice.note {
        eprintln!("sidecarctl: note: {note}");
    }
    if let (Some(base), Some(engine)) = (&options.base, &engine) {
        if engine.image(base).await?.is_none() {
            if !options.dry_run {
                return Err(ImageError::NoBaseImage { image: base.clone() });
            }
            eprintln!("sidecarctl: note: {}", ImageError::NoBaseImage { image: base.clone() });
        }
    }
    let commands =
        targets.iter().map(|t| command(&builder, &choice.url, *t, &options)).collect::<Result<Vec<_>, _>>()?;
    let binaries = options.base.as_ref().and_then(|_| binaries::stale(&options.context)).map(|stale| {
        eprintln!("sidecarctl: --base takes the binaries from images/dist, and {stale}: images/binaries.sh --dist builds them");
        binaries_command(&options.context)
    });
    if options.dry_run {
        for line in dry_run_lines(binaries.as_ref(), &commands) {
            println!("{line}");
        }
        return Ok(());
    }
    if let Some(binaries) = binaries {
        let line = binaries.shell_line();
        eprintln!("sidecarctl: building the binaries (a release build on this host: minutes the first time): {line}");
        let mut child = Command::new(&binaries.program);
        // (binaries.sh works in its own checkout, wherever it is called from; what it prints is images/dist.)
        child.args(&binaries.args).stdout(Stdio::null());
        let status = tokio::task::spawn_blocking(move || child.status())
            .await
            .expect("the binaries' waiter does not panic")
            .map_err(|error| ImageError::Spawn { program: binaries.program.clone(), error })?;
        if !status.success() {
            return Err(ImageError::Binaries { line, code: status.code() });
        }
    }
    let dockerfile = std::fs::read_to_string(&dockerfile).unwrap_or_default();
    let defaults = dockerfile_image_args(&dockerfile);
    for (target, command) in targets.iter().zip(commands) {
        let line = command.shell_line();
        eprintln!("sidecarctl: building {}: {line}", command.image);
        let mut child = Command::new(&command.program);
        child.args(&command.args).envs(command.env.iter().map(|(k, v)| (k, v)));
        // A build runs for minutes: off the runtime's threads. A Ctrl-C reaches the tool too (our process group).
        let (status, stderr) = tokio::task::spawn_blocking(move || run_teeing_stderr(child))
            .await
            .expect("the build's waiter does not panic")
            .map_err(|error| ImageError::Spawn { program: command.program.clone(), error })?;
        if !status.success() {
            let failed = pull::failed_pulls_of(&stderr, &dockerfile);
            if !failed.is_empty() {
                let args = effective_args(&defaults, &command.args);
                let prebuilt = args.iter().any(|(k, v)| k == "BINARIES" && v == "prebuilt");
                let relevant = image_args_of(*target, prebuilt);
                let failed = failed
                    .into_iter()
                    .map(|pull| {
                        let names = args_naming(&args, &pull.image, &relevant);
                        (pull, names)
                    })
                    .collect();
                return Err(ImageError::Pull { image: command.image, failed });
            }
            return Err(ImageError::Failed { image: command.image, code: status.code(), line });
        }
        eprintln!("sidecarctl: built {}", command.image);
    }
    Ok(())
}

/// The Dockerfile's `ARG NAME=VALUE` defaults, in order.
pub fn dockerfile_image_args(dockerfile: &str) -> Vec<(String, String)> {
    dockerfile
        .lines()
        .filter_map(|l| l.trim().strip_prefix("ARG "))
        .filter_map(|a| a.split_once('='))
        .map(|(k, v)| (k.trim().to_owned(), v.trim().trim_matches('"').to_owned()))
        .collect()
}

/// The build arguments in force: the Dockerfile's defaults, then each `--build-arg` of `args` (the last wins).
pub fn effective_args(defaults: &[(String, String)], args: &[String]) -> Vec<(String, String)> {
    let mut effective = defaults.to_vec();
    for pair in args.windows(2).filter(|w| w[0] == "--build-arg") {
        if let Some((name, value)) = pair[1].split_once('=') {
            effective.retain(|(k, _)| k != name);
            effective.push((name.to_owned(), value.to_owned()));
        }
    }
    effective
}

/// The `*_IMAGE` arguments whose value is `image`: those `relevant` to the target first, else any.
pub fn args_naming(args: &[(String, String)], image: &str, relevant: &[&str]) -> Vec<String> {
    let wanted = pull::normalize(image);
    let matching: Vec<&String> =
        args.iter().filter(|(k, v)| k.ends_with("_IMAGE") && pull::normalize(v) == wanted).map(|(k, _)| k).collect();
    let chosen: Vec<String> =
        matching.iter().filter(|k| relevant.contains(&k.as_str())).map(|k| k.to_string()).collect();
    if chosen.is_empty() {
        matching.into_iter().cloned().collect()
    } else {
        chosen
    }
}

/// Runs `command` with its stderr passed through to ours as it comes, and returns the last 64 KiB of it too.
fn run_teeing_stderr(mut command: Command) -> std::io::Result<(std::process::ExitStatus, String)> {
    const KEEP: usize = 64 * 1024;
    let mut child = command.stderr(Stdio::piped()).spawn()?;
    let mut pipe = child.stderr.take().expect("stderr is piped");
    let mut kept: Vec<u8> = Vec::new();
    let mut buffer = [0u8; 8192];
    let mut ours = std::io::stderr();
    loop {
        match pipe.read(&mut buffer) {
            Ok(0) => break,
            Ok(n) => {
                let _ = ours.write_all(&buffer[..n]);
                kept.extend_from_slice(&buffer[..n]);
                if kept.len() > 2 * KEEP {
                    kept.drain(..kept.len() - KEEP);
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        }
    }
    let status = child.wait()?;
    Ok((status, String::from_utf8_lossy(&kept).into_owned()))
}

#[cfg(test)]
mod tests;
