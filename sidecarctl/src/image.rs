//! `sidecarctl image build NAME…`: the builder images (`node`, `python`, `java`, `go`, `rust`) and the agent image
//! (`agent`) from a checkout's images/Dockerfile, on the engine `up` would use, with that engine's own build tool:
//! `podman build --format docker` for Podman (the default OCI format drops HEALTHCHECK), and for Docker the first
//! `docker` CLI on `PATH` that builds with BuildKit (the buildx plugin, or a CLI older than 23 with
//! `DOCKER_BUILDKIT=1`, which uses the daemon's own BuildKit). A CLI that would fall back to the legacy builder,
//! which cannot build the Dockerfile (`RUN --mount`, `COPY --chmod`), is refused before anything is built.
//!
//! Decision: the build runs the CLI rather than the API's `/build`, because BuildKit over the API needs a
//! session protocol of its own, and the CLI's progress output is what a person knows. `--dry-run` prints exactly
//! the command lines that would run, each runnable as it is.

use std::path::{Path, PathBuf};
use std::process::Command;

use clap::Args;

use crate::engine::{ContainerEngine, EngineError, EngineKind};
use crate::runtime::Runtime;

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
pub enum Target {
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
            ImageError::NoDockerfile { context } => write!(
                f,
                "{} has no images/Dockerfile: run from a sidecar-exec checkout, or name one with --context",
                context.join("images/Dockerfile").display()
            ),
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
pub fn parse_target(name: &str) -> Result<Target, ImageError> {
    if name == "agent" {
        return Ok(Target::Agent);
    }
    name.parse::<Runtime>().map(Target::Builder).map_err(|_| ImageError::UnknownName { name: name.to_owned() })
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
pub fn image_name(target: Target, options: &BuildOptions) -> String {
    let base = match target {
        Target::Builder(rt) => format!("sidecar-builder-{rt}"),
        Target::Agent => "sidecar-agent".to_owned(),
    };
    let tag = options.tag.clone().or_else(|| options.runtime_version.clone()).unwrap_or_else(|| "latest".to_owned());
    let registry = options.registry.as_deref().map(|r| format!("{}/", r.trim_end_matches('/'))).unwrap_or_default();
    format!("{registry}{base}:{tag}")
}

/// The base image a runtime version names (the Dockerfile's build argument and its value).
pub fn base_image(runtime: Runtime, version: &str) -> (&'static str, String) {
    match runtime {
        Runtime::Node => ("NODE_IMAGE", format!("node:{version}-bookworm-slim")),
        Runtime::Python => ("PYTHON_IMAGE", format!("python:{version}-slim-bookworm")),
        Runtime::Java => ("JAVA_IMAGE", format!("eclipse-temurin:{version}-jdk")),
        Runtime::Go => ("GO_IMAGE", format!("golang:{version}-bookworm")),
        Runtime::Rust => ("RUST_RUNTIME_IMAGE", format!("rust:{version}-bookworm")),
    }
}

/// The command that builds `target` with `builder` on the engine at `url`. The agent image is built for the
/// caller's uid and gid (`AGENT_UID`/`AGENT_GID`), as `up` runs it.
pub fn command(
    builder: &Builder,
    url: &str,
    target: Target,
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
    match target {
        Target::Builder(rt) => {
            args.extend(["--target".into(), "builder".into()]);
            build_args.push(format!("RUNTIME={rt}"));
            if let Some(version) = &options.runtime_version {
                let (name, value) = base_image(rt, version);
                build_args.push(format!("{name}={value}"));
            }
        }
        Target::Agent => {
            args.extend(["--target".into(), "agent".into()]);
            build_args.push(format!("AGENT_UID={}", nix::unistd::getuid()));
            build_args.push(format!("AGENT_GID={}", nix::unistd::getgid()));
        }
    }
    for value in &options.build_args {
        if value.split_once('=').is_none_or(|(name, _)| name.is_empty()) {
            return Err(ImageError::BadBuildArg { value: value.clone() });
        }
        build_args.push(value.clone());
    }
    for value in build_args {
        args.extend(["--build-arg".into(), value]);
    }
    args.extend(["-t".into(), image.clone(), context]);
    Ok(BuildCommand { image, env, program: builder.program.clone(), args })
}

/// Builds (or, with `--dry-run`, prints) every image named, in order; stops at the first failure. The build
/// tool's own progress goes to our stdout and stderr as it comes.
pub async fn build(options: BuildOptions) -> Result<(), ImageError> {
    let targets = options.names.iter().map(|n| parse_target(n)).collect::<Result<Vec<_>, _>>()?;
    if !options.context.join("images/Dockerfile").is_file() {
        return Err(ImageError::NoDockerfile { context: options.context.clone() });
    }
    let engine = ContainerEngine::connect(options.engine.as_deref()).await?;
    let builder = choose_builder(engine.kind().await?, &std::env::var("PATH").unwrap_or_default())?;
    let commands =
        targets.iter().map(|t| command(&builder, engine.url(), *t, &options)).collect::<Result<Vec<_>, _>>()?;
    for command in commands {
        let line = command.shell_line();
        if options.dry_run {
            println!("{line}");
            continue;
        }
        eprintln!("sidecarctl: building {}: {line}", command.image);
        let mut child = Command::new(&command.program);
        child.args(&command.args).envs(command.env.iter().map(|(k, v)| (k, v)));
        // A build runs for minutes: off the runtime's threads. A Ctrl-C reaches the tool too (our process group).
        let status = tokio::task::spawn_blocking(move || child.status())
            .await
            .expect("the build's waiter does not panic")
            .map_err(|error| ImageError::Spawn { program: command.program.clone(), error })?;
        if !status.success() {
            return Err(ImageError::Failed { image: command.image, code: status.code(), line });
        }
        eprintln!("sidecarctl: built {}", command.image);
    }
    Ok(())
}

#[cfg(test)]
mod tests;
