//! The engines the engine tests run on, each a parameter of the same tests: a real Docker Engine (Debian's
//! dockerd 20.10) and Podman's Docker-API service, with the images images/test.sh builds on each.
//!
//! Each engine is one daemon per test process, started on first use: `SIDECAR_TEST_DOCKER_HOST` /
//! `SIDECAR_TEST_PODMAN_HOST` name a running one (CI's, which also holds the images), else the process starts its
//! own: `images/dockerd.sh run` (a private dockerd on the data root images/test.sh builds into) or `podman --runtime
//! runc system service` on a socket in a temporary folder. A started daemon waits on a pipe whose write end only
//! this process holds, so it stops when the process ends, however it ends.
//!
//! The tests are `#[ignore]`d (they need root, both engines and the images): `cargo test -p sidecarctl --locked --
//! --include-ignored` runs them, and then a missing engine or image is a failure that says what to do.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use sidecarctl::engine::{run_filter, ContainerEngine};

/// The images the tests run, as `up` and the docs name them (podman finds them under `localhost/`).
pub const IMAGES: [&str; 3] = ["sidecar-builder-python:latest", "sidecar-builder-node:latest", "sidecar-agent:latest"];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Docker,
    Podman,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Docker => "Docker",
            Kind::Podman => "Podman",
        }
    }

    fn variable(self) -> &'static str {
        match self {
            Kind::Docker => "SIDECAR_TEST_DOCKER_HOST",
            Kind::Podman => "SIDECAR_TEST_PODMAN_HOST",
        }
    }
}

/// One engine under test: its socket and, when this process started it, the pipe that keeps it alive.
pub struct TestEngine {
    pub kind: Kind,
    host: String,
    _daemon: Option<(Child, ChildStdin)>,
}

/// One engine test at a time, on either engine: each starts containers, and the machine has 2 cores.
static SERIAL: Mutex<()> = Mutex::new(());
static DOCKER: OnceLock<Result<TestEngine, String>> = OnceLock::new();
static PODMAN: OnceLock<Result<TestEngine, String>> = OnceLock::new();

/// Runs `test` on engine `kind` (started if need be), one test at a time.
pub fn run(kind: Kind, test: fn(&TestEngine)) {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let cell = match kind {
        Kind::Docker => &DOCKER,
        Kind::Podman => &PODMAN,
    };
    match cell.get_or_init(|| TestEngine::start(kind)) {
        Ok(engine) => test(engine),
        Err(why) => panic!("{} is not available for this test: {why}", kind.name()),
    }
}

/// `on_both_engines!(name, …)`: a test per engine (`docker::name`, `podman::name`) for each `fn name(&TestEngine)`
/// of the calling module, ignored unless asked for (`--include-ignored`): they need root, the engines and the
/// images.
macro_rules! on_both_engines {
    ($($test:ident),+ $(,)?) => {
        mod docker {
            $(
                #[test]
                #[ignore = "needs a Docker Engine and the images (images/test.sh); CI runs it"]
                fn $test() {
                    crate::engines::run(crate::engines::Kind::Docker, super::$test)
                }
            )+
        }
        mod podman {
            $(
                #[test]
                #[ignore = "needs Podman and the images (images/test.sh); CI runs it"]
                fn $test() {
                    crate::engines::run(crate::engines::Kind::Podman, super::$test)
                }
            )+
        }
    };
}
pub(crate) use on_both_engines;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
}

impl TestEngine {
    fn start(kind: Kind) -> Result<TestEngine, String> {
        let engine = match std::env::var(kind.variable()).ok().filter(|h| !h.is_empty()) {
            Some(host) => {
                let engine = TestEngine { kind, host, _daemon: None };
                engine
                    .connect()
                    .map_err(|e| format!("{} names an engine that does not answer: {e}", kind.variable()))?;
                engine
            }
            None => Self::spawn(kind)?,
        };
        for image in IMAGES {
            if engine.image(image).is_none() {
                return Err(format!(
                    "image {image} is missing on {} at {}: images/test.sh builds it on both engines",
                    kind.name(),
                    engine.host
                ));
            }
        }
        Ok(engine)
    }

    /// Starts this process's own daemon and waits until it answers.
    fn spawn(kind: Kind) -> Result<TestEngine, String> {
        let dir = tempfile::Builder::new().prefix("sidecarctl-engine-").tempdir().unwrap().keep();
        let mut command = match kind {
            Kind::Docker => {
                // Prints its socket once GET /_ping answers, then stays until stdin closes; then the folder goes.
                let mut c = Command::new("bash");
                c.arg("-c").arg(r#""$0" run "$1"; status=$?; rm -rf "$1"; exit $status"#);
                c.arg(repo().join("images/dockerd.sh")).arg(&dir);
                c
            }
            Kind::Podman => {
                if Command::new("podman").arg("--version").output().is_err() {
                    return Err("podman is not installed (apt-get install -y podman runc catatonit)".into());
                }
                let mut c = Command::new("sh");
                c.arg("-c").arg(
                    r#"podman --runtime runc system service --time=0 "unix://$0/podman.sock" 2>"$0/podman.log" &
                       pid=$!; echo "unix://$0/podman.sock"; cat >/dev/null; kill "$pid"; wait "$pid"; rm -rf "$0""#,
                );
                c.arg(&dir);
                c
            }
        };
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot start the {} daemon: {e}", kind.name()))?;
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut host = String::new();
        stdout.read_line(&mut host).unwrap();
        if host.trim().is_empty() {
            let mut stderr = String::new();
            let _ = child.stderr.take().unwrap().read_to_string(&mut stderr);
            let _ = child.wait();
            return Err(format!(
                "the {} daemon did not start: {}(or name a running one with {})",
                kind.name(),
                stderr,
                kind.variable()
            ));
        }
        let stdin = child.stdin.take().unwrap();
        let engine = TestEngine { kind, host: host.trim().to_owned(), _daemon: Some((child, stdin)) };
        // dockerd.sh printed the socket once the API answered; podman's service only once it is started: wait for
        // its answer (a state to poll: the service writes no ready line).
        let deadline = Instant::now() + Duration::from_secs(60);
        while let Err(e) = engine.connect() {
            if Instant::now() > deadline {
                let log = std::fs::read_to_string(dir.join("podman.log")).unwrap_or_default();
                return Err(format!("{} did not answer at {} within 60 s: {e}\n{log}", kind.name(), engine.host));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(engine)
    }

    /// The `DOCKER_HOST` value of this engine.
    pub fn host(&self) -> &str {
        &self.host
    }

    pub fn connect(&self) -> Result<ContainerEngine, sidecarctl::engine::EngineError> {
        runtime().block_on(ContainerEngine::connect(Some(&self.host)))
    }

    /// sidecarctl pointed at this engine.
    pub fn sidecarctl(&self, args: &[&str]) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_sidecarctl"));
        command.env("DOCKER_HOST", &self.host).args(args);
        command
    }

    /// `up --name NAME --stop-grace 3` and, on Podman, the explicit limits it needs on hosts that may not raise them
    /// (Docker sets its defaults itself), then `rest`.
    pub fn up_args<'a>(&self, name: &'a str, rest: &[&'a str]) -> Vec<&'a str> {
        let mut args = vec!["up", "--name", name, "--stop-grace", "3"];
        args.extend(self.limit_args());
        args.extend(rest);
        args
    }

    /// The `--ulimit` flags a run needs on this engine (`up`, `compose`): Podman's explicit limits, none on Docker.
    pub fn limit_args(&self) -> Vec<&'static str> {
        match self.kind {
            Kind::Podman => vec!["--ulimit", "nofile=4096:4096", "--ulimit", "nproc=4096:4096"],
            Kind::Docker => Vec::new(),
        }
    }

    /// The image's configuration on this engine, or `None` when it has no such image.
    pub fn image(&self, image: &str) -> Option<bollard::models::ImageInspect> {
        let engine = self.connect().unwrap();
        runtime().block_on(engine.image(image)).unwrap()
    }

    pub fn volume_exists(&self, name: &str) -> bool {
        let engine = self.connect().unwrap();
        runtime().block_on(engine.docker().inspect_volume(name)).is_ok()
    }

    pub fn remove_volume(&self, name: &str) {
        let engine = self.connect().unwrap();
        let _ = runtime()
            .block_on(engine.docker().remove_volume(name, None::<bollard::query_parameters::RemoveVolumeOptions>));
    }

    /// Nothing labelled with the run is left on the engine, and its token folder is gone.
    pub fn assert_nothing_left(&self, run: &str) {
        let engine = self.connect().unwrap();
        let (containers, networks) = runtime().block_on(async {
            let containers = engine.containers(&[run_filter(run)]).await.unwrap();
            let networks = engine.networks(&[run_filter(run)]).await.unwrap();
            (containers.len(), networks.len())
        });
        assert_eq!((containers, networks), (0, 0), "containers and networks of run {run} left behind");
        let token_dir = sidecarctl::token::state_root().unwrap().join(run);
        assert!(!token_dir.exists(), "the token folder {} is left", token_dir.display());
    }
}
