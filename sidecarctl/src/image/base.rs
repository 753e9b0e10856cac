//! `sidecarctl image base`: a local Debian image to build every other image on (`image build --base`), made with
//! debootstrap from a Debian mirror and imported into the engine `up` uses: no image registry involved.
//!
//! What it runs, in order (`--dry-run` prints exactly these lines, each runnable as it is):
//! 1. `debootstrap --variant=minbase --include=ca-certificates --cache-dir=DIR SUITE ROOTFS [MIRROR]` into a new
//!    folder under /var/tmp (root file systems are large for a tmpfs /tmp); the downloaded packages stay in the
//!    cache folder, so the next run downloads only what changed.
//! 2. When the host trusts certificates of its own (`/usr/local/share/ca-certificates`, the place
//!    `update-ca-certificates` reads: a company's or a TLS proxy's CA), they are carried in and the base's bundle
//!    is remade (`chroot ROOTFS update-ca-certificates`), as a company's own base image would trust them.
//! 3. `tar -C ROOTFS -c . | docker import --change … - TAG` (or `podman --url URL import`): the standard PATH, the
//!    bundle named for the tools that keep one of their own (`SSL_CERT_FILE`, `PIP_CERT`, `REQUESTS_CA_BUNDLE`,
//!    `NODE_EXTRA_CA_CERTS`), and `CMD ["/bin/bash"]`.
//! 4. The folder is removed, unless something is still mounted in it (then it is left, and named).
//!
//! Decision: the image is always made afresh (a base is where security updates come from), and the package cache
//! keeps a second run short. Root and Linux only: debootstrap and chroot need both.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use clap::Args;

use super::{choose_engine, on_path, BuildCommand, ImageError};
use crate::engine::{ContainerEngine, EngineError, EngineKind};

/// The CA bundle Debian's ca-certificates writes.
const BUNDLE: &str = "/etc/ssl/certs/ca-certificates.crt";
/// Where the host's own certificates are, for update-ca-certificates.
const HOST_CERTIFICATES: &str = "/usr/local/share/ca-certificates";

#[derive(Args, Debug, Clone)]
pub struct BaseOptions {
    /// The Debian release (debootstrap's suite): bookworm, trixie, …
    #[arg(long, value_name = "SUITE", default_value = "bookworm")]
    pub suite: String,

    /// The image's name (default: localhost/sidecar-base:SUITE, the same name on Docker and Podman).
    #[arg(long, value_name = "T")]
    pub tag: Option<String>,

    /// The Debian mirror for debootstrap, and for apt in the images built on it (default: debootstrap's own,
    /// deb.debian.org).
    #[arg(long, value_name = "URL", env = "SIDECARCTL_DEBIAN_MIRROR")]
    pub mirror: Option<String>,

    /// Where debootstrap keeps the packages it downloaded, for the next run.
    #[arg(long, value_name = "DIR", default_value = "/var/cache/sidecarctl/debootstrap")]
    pub cache_dir: PathBuf,

    /// Print the commands that would run, and run nothing.
    #[arg(long)]
    pub dry_run: bool,

    /// The engine's socket (default: as `up` finds it).
    #[arg(long, value_name = "URL")]
    pub engine: Option<String>,
}

impl BaseOptions {
    pub fn tag(&self) -> String {
        self.tag.clone().unwrap_or_else(|| format!("localhost/sidecar-base:{}", self.suite))
    }
}

#[derive(Debug)]
pub enum BaseError {
    /// debootstrap and chroot are Linux's.
    NotLinux {
        os: &'static str,
    },
    NotRoot,
    NoDebootstrap,
    /// The engine's CLI, which imports the root file system, is not on PATH.
    NoCli {
        kind: EngineKind,
    },
    BadSuite {
        suite: String,
    },
    Engine(EngineError),
    Image(ImageError),
    /// A step ran and failed.
    Step {
        what: &'static str,
        code: Option<i32>,
        line: String,
    },
    Spawn {
        program: PathBuf,
        error: std::io::Error,
    },
    Folder {
        path: PathBuf,
        error: std::io::Error,
    },
    /// Something is still mounted under the root file system: it is left alone.
    StillMounted {
        rootfs: PathBuf,
        mounts: Vec<String>,
    },
}

impl std::fmt::Display for BaseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BaseError::NotLinux { os } => write!(
                f,
                "image base runs debootstrap and chroot, which need Linux (this is {os}): make the base on a Linux \
                 machine, or build with --build-arg …_IMAGE= images from a mirror"
            ),
            BaseError::NotRoot => f.write_str(
                "image base runs debootstrap and chroot, which need root: run it as root (sudo sidecarctl image base)",
            ),
            BaseError::NoDebootstrap => f.write_str("no debootstrap on PATH: install it (apt-get install debootstrap)"),
            BaseError::NoCli { kind: EngineKind::Podman } => f.write_str(
                "the engine is Podman, whose images are imported with the podman CLI, and no `podman` is on PATH: \
                 install podman",
            ),
            BaseError::NoCli { kind: EngineKind::Docker } => f.write_str(
                "the engine is Docker, whose images are imported with the docker CLI, and no `docker` is on PATH: \
                 install the docker CLI (docker.io or docker-ce-cli)",
            ),
            BaseError::BadSuite { suite } => {
                write!(f, "--suite '{suite}' is not a Debian release name (bookworm, trixie, …)")
            }
            BaseError::Engine(e) => e.fmt(f),
            BaseError::Image(e) => e.fmt(f),
            BaseError::Step { what, code, line } => write!(
                f,
                "{what} failed ({}; its output is above); the command was:\n  {line}",
                code.map_or_else(|| "killed by a signal".to_owned(), |c| format!("exit code {c}"))
            ),
            BaseError::Spawn { program, error } => write!(f, "cannot run {}: {error}", program.display()),
            BaseError::Folder { path, error } => write!(f, "{}: {error}", path.display()),
            BaseError::StillMounted { rootfs, mounts } => write!(
                f,
                "left {}: still mounted there: {} (unmount them, then remove the folder)",
                rootfs.display(),
                mounts.join(", ")
            ),
        }
    }
}

impl std::error::Error for BaseError {}

impl From<EngineError> for BaseError {
    fn from(e: EngineError) -> Self {
        BaseError::Engine(e)
    }
}

/// The commands, in order: debootstrap, the host's certificates (when it has any), the import.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    pub debootstrap: BuildCommand,
    pub certificates: Option<(BuildCommand, BuildCommand)>,
    /// `tar` and the import it feeds.
    pub tar: BuildCommand,
    pub import: BuildCommand,
}

impl Plan {
    /// The lines `--dry-run` prints: the folder made, each step, the folder removed.
    pub fn lines(&self, rootfs: &Path) -> Vec<String> {
        let mut lines = vec![format!("mkdir -m 0755 {}", protocol::shell::word(&rootfs.display().to_string()))];
        lines.push(self.debootstrap.shell_line());
        if let Some((copy, update)) = &self.certificates {
            lines.push(format!("{} && {}", copy.shell_line(), update.shell_line()));
        }
        lines.push(format!("{} | {}", self.tar.shell_line(), self.import.shell_line()));
        lines.push(format!("rm -rf {}", protocol::shell::word(&rootfs.display().to_string())));
        lines
    }
}

fn line(program: &str, args: &[String]) -> BuildCommand {
    BuildCommand { image: String::new(), env: Vec::new(), program: program.into(), args: args.to_vec() }
}

/// The commands that make `options`' base in `rootfs`, importing with `cli` into the engine (`kind`) at `url`.
/// `host_certificates`: whether the host has certificates of its own to carry in.
pub fn plan(
    options: &BaseOptions,
    kind: EngineKind,
    cli: &Path,
    url: &str,
    rootfs: &Path,
    host_certificates: bool,
) -> Result<Plan, BaseError> {
    let suite = &options.suite;
    if suite.is_empty() || !suite.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
        return Err(BaseError::BadSuite { suite: suite.clone() });
    }
    let root = rootfs.display().to_string();
    let mut args = vec![
        "--variant=minbase".to_owned(),
        "--include=ca-certificates".to_owned(),
        format!("--cache-dir={}", options.cache_dir.display()),
        suite.clone(),
        root.clone(),
    ];
    args.extend(options.mirror.iter().cloned());
    let debootstrap = line("debootstrap", &args);
    let certificates = host_certificates.then(|| {
        (
            line("cp", &["-a".into(), format!("{HOST_CERTIFICATES}/."), format!("{root}{HOST_CERTIFICATES}/")]),
            line("chroot", &[root.clone(), "update-ca-certificates".into()]),
        )
    });
    let tar = line("tar", &["-C".into(), root, "-c".into(), ".".into()]);
    let mut import_args = Vec::new();
    let mut env = Vec::new();
    match kind {
        EngineKind::Podman => import_args.extend(["--url".to_owned(), url.to_owned()]),
        EngineKind::Docker => env.push(("DOCKER_HOST".to_owned(), url.to_owned())),
    }
    import_args.push("import".into());
    let changes = [
        "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".to_owned(),
        format!("ENV SSL_CERT_FILE={BUNDLE}"),
        format!("ENV PIP_CERT={BUNDLE}"),
        format!("ENV REQUESTS_CA_BUNDLE={BUNDLE}"),
        format!("ENV NODE_EXTRA_CA_CERTS={BUNDLE}"),
        r#"CMD ["/bin/bash"]"#.to_owned(),
    ];
    for change in changes {
        import_args.extend(["--change".to_owned(), change]);
    }
    import_args.extend(["-".to_owned(), options.tag()]);
    let import = BuildCommand { image: options.tag(), env, program: cli.to_path_buf(), args: import_args };
    Ok(Plan { debootstrap, certificates, tar, import })
}

/// Whether the host has certificates of its own in /usr/local/share/ca-certificates.
fn host_has_certificates() -> bool {
    std::fs::read_dir(HOST_CERTIFICATES).is_ok_and(|mut entries| entries.next().is_some())
}

/// The mount points at or under `dir`, from /proc/self/mountinfo.
fn mounts_under(dir: &Path) -> Vec<String> {
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let dir = dir.display().to_string();
    info.lines()
        .filter_map(|l| l.split(' ').nth(4))
        .filter(|m| *m == dir || m.starts_with(&format!("{dir}/")))
        .map(str::to_owned)
        .collect()
}

fn run(what: &'static str, command: &BuildCommand) -> Result<(), BaseError> {
    let status = Command::new(&command.program)
        .args(&command.args)
        .envs(command.env.iter().map(|(k, v)| (k, v)))
        .status()
        .map_err(|error| BaseError::Spawn { program: command.program.clone(), error })?;
    if status.success() {
        Ok(())
    } else {
        Err(BaseError::Step { what, code: status.code(), line: command.shell_line() })
    }
}

/// `tar … | import …`.
fn run_import(tar: &BuildCommand, import: &BuildCommand) -> Result<(), BaseError> {
    let line = format!("{} | {}", tar.shell_line(), import.shell_line());
    let spawn = |c: &BuildCommand, e: std::io::Error| BaseError::Spawn { program: c.program.clone(), error: e };
    let mut tar_child =
        Command::new(&tar.program).args(&tar.args).stdout(Stdio::piped()).spawn().map_err(|e| spawn(tar, e))?;
    let input = tar_child.stdout.take().expect("tar's stdout is piped");
    let imported = Command::new(&import.program)
        .args(&import.args)
        .envs(import.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::from(input))
        .status()
        .map_err(|e| spawn(import, e));
    let tarred = tar_child.wait().map_err(|e| spawn(tar, e))?;
    let imported = imported?;
    if !tarred.success() {
        return Err(BaseError::Step { what: "packing the root file system", code: tarred.code(), line });
    }
    if !imported.success() {
        return Err(BaseError::Step { what: "importing the root file system", code: imported.code(), line });
    }
    Ok(())
}

/// Makes (or, with `--dry-run`, prints) the base.
pub async fn base(options: BaseOptions) -> Result<(), BaseError> {
    if std::env::consts::OS != "linux" {
        return Err(BaseError::NotLinux { os: std::env::consts::OS });
    }
    let path = std::env::var("PATH").unwrap_or_default();
    if !options.dry_run {
        if !nix::unistd::geteuid().is_root() {
            return Err(BaseError::NotRoot);
        }
        if on_path("debootstrap", &format!("{path}:/usr/sbin:/sbin")).is_empty() {
            return Err(BaseError::NoDebootstrap);
        }
    }
    let asked = options.engine.clone().or_else(|| std::env::var("DOCKER_HOST").ok().filter(|h| !h.is_empty()));
    let connected = match ContainerEngine::connect(options.engine.as_deref()).await {
        Ok(engine) => engine.kind().await.map(|kind| (kind, engine.url().to_owned())),
        Err(error) => Err(error),
    };
    let choice = choose_engine(connected, options.dry_run, asked.as_deref()).map_err(BaseError::Image)?;
    if let Some(note) = &choice.note {
        eprintln!("sidecarctl: note: {note}");
    }
    let name = match choice.kind {
        EngineKind::Podman => "podman",
        EngineKind::Docker => "docker",
    };
    let cli = match on_path(name, &path).into_iter().next() {
        Some(cli) => cli,
        None if options.dry_run => PathBuf::from(name),
        None => return Err(BaseError::NoCli { kind: choice.kind }),
    };
    if options.dry_run {
        let rootfs = PathBuf::from(format!("/var/tmp/sidecar-base.{}", std::process::id()));
        let plan = plan(&options, choice.kind, &cli, &choice.url, &rootfs, host_has_certificates())?;
        for line in plan.lines(&rootfs) {
            println!("{line}");
        }
        return Ok(());
    }
    let started = Instant::now();
    std::fs::create_dir_all(&options.cache_dir)
        .map_err(|error| BaseError::Folder { path: options.cache_dir.clone(), error })?;
    // A new folder of our own (create_dir fails on an existing one), removed below: never while something is
    // mounted in it.
    let suffix = protocol::random_hex(6).map_err(|error| BaseError::Folder { path: "/dev/urandom".into(), error })?;
    let rootfs = PathBuf::from(format!("/var/tmp/sidecar-base.{suffix}"));
    std::fs::create_dir(&rootfs).map_err(|error| BaseError::Folder { path: rootfs.clone(), error })?;
    // It becomes the image's `/`: 0755 whatever the caller's umask (a 0700 `/` locks every other uid out).
    std::fs::set_permissions(&rootfs, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .map_err(|error| BaseError::Folder { path: rootfs.clone(), error })?;
    let rootfs_kept = rootfs.clone();
    let plan = plan(&options, choice.kind, &cli, &choice.url, &rootfs, host_has_certificates())?;
    let tag = options.tag();
    let steps = tokio::task::spawn_blocking(move || -> Result<(), BaseError> {
        eprintln!("sidecarctl: debootstrap of Debian {} into {}", options.suite, rootfs_kept.display());
        run("debootstrap", &plan.debootstrap)?;
        if let Some((copy, update)) = &plan.certificates {
            eprintln!("sidecarctl: carrying in the host's certificates from {HOST_CERTIFICATES}");
            run("copying the host's certificates", copy)?;
            run("update-ca-certificates in the root file system", update)?;
        }
        eprintln!(
            "sidecarctl: importing {}: {} | {}",
            plan.import.image,
            plan.tar.shell_line(),
            plan.import.shell_line()
        );
        run_import(&plan.tar, &plan.import)
    })
    .await
    .expect("the base's steps do not panic");
    let mounts = mounts_under(&rootfs);
    if !mounts.is_empty() {
        steps?;
        return Err(BaseError::StillMounted { rootfs, mounts });
    }
    let removed = std::fs::remove_dir_all(&rootfs);
    steps?;
    removed.map_err(|error| BaseError::Folder { path: rootfs, error })?;
    eprintln!(
        "sidecarctl: made {tag} on {} in {} s; build on it: sidecarctl image build --base {tag} python node agent",
        choice.url,
        started.elapsed().as_secs()
    );
    Ok(())
}
