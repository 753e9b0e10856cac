//! sidecarctl: start an agent with its build sidecars in one command, on Docker or Podman; list, read and remove
//! runs; print the same run as a compose file or a Kubernetes Pod. See docs/sidecarctl.md.

use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};
use sidecarctl::down::Scope;
use sidecarctl::engine::{ContainerEngine, EngineError};
use sidecarctl::exit::{Cause, EXIT_FAILED};
use sidecarctl::image::base::BaseOptions;
use sidecarctl::image::{self, BuildOptions};
use sidecarctl::names::{NotRemovable, Ownership, RunOwner};
use sidecarctl::render::emit::{self, EmitOptions};
use sidecarctl::render::kube::KubeOptions;
use sidecarctl::render::{compose, kube};
use sidecarctl::up::{up, UpOptions};
use sidecarctl::{down, logs, ps};

#[derive(Parser)]
#[command(name = "sidecarctl", version, about = "Run an agent container with its build sidecars (Docker or Podman)")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Start the builders, wait until healthy, run the agent attached, then remove everything (unless --detach).
    Up(UpOptions),
    /// List runs, their agent and builders, with health.
    Ps(EngineOption),
    /// Print a run's container logs (one runtime's builder with RT).
    Logs {
        #[command(flatten)]
        engine: EngineOption,
        /// Keep streaming (one container only).
        #[arg(long, short = 'f')]
        follow: bool,
        run: String,
        runtime: Option<String>,
    },
    /// Build images from a sidecar-exec checkout's images/Dockerfile.
    #[command(subcommand)]
    Image(ImageCommand),
    /// Print the run as a compose file (services builder-RT and agent).
    Compose(EmitOptions),
    /// Print the run as a Kubernetes Pod (builders as native sidecars), or as an agent-sandbox SandboxTemplate or
    /// warm pool (--kind).
    Kube(KubeOptions),
    /// Remove a run: its containers, network and token; cache volumes are kept. RUN must be yours and this
    /// folder's (with --all, anyone's). Without RUN, the runs you started from this folder (with --all, every run
    /// on the engine).
    Down {
        #[command(flatten)]
        engine: EngineOption,
        /// Seconds between SIGTERM and SIGKILL.
        #[arg(long, value_name = "SECONDS", default_value_t = 10)]
        stop_grace: u64,
        /// Every run on the engine, whoever started it and from wherever (with RUN: that run, whoever started it).
        #[arg(long, env = "SIDECARCTL_DOWN_ALL")]
        all: bool,
        run: Option<String>,
    },
}

#[derive(Subcommand)]
enum ImageCommand {
    /// Build the builder images (node, python, java, go, rust) and the agent image (agent) on the engine `up` uses,
    /// with BuildKit (Docker) or podman build; --dry-run prints the commands.
    Build(BuildOptions),
    /// Make a local Debian base image with debootstrap (root, Linux), the host's CA certificates carried in, for
    /// `image build --base`: images with no registry at all.
    Base(BaseOptions),
}

#[derive(clap::Args)]
struct EngineOption {
    /// The engine's socket (default: DOCKER_HOST, then Docker's and Podman's usual sockets).
    #[arg(long, value_name = "URL")]
    engine: Option<String>,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build();
    let Ok(runtime) = runtime else { return ExitCode::from(EXIT_FAILED as u8) };
    let code = runtime.block_on(run(cli.command));
    // Not a return: a blocked read of our stdin (the agent's input) must not hold the exit.
    std::process::exit(code)
}

/// Why `ps`, `logs` or `down` failed.
#[derive(Debug, thiserror::Error)]
enum CommandError {
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// `logs RUN [RT]` found nothing to print.
    #[error("no container of run '{run}'{}", .runtime.as_ref().map(|rt| format!(" for {rt}")).unwrap_or_default())]
    NoContainer { run: String, runtime: Option<String> },
    /// `down` needs the current folder (its runs are this folder's).
    #[error("the current folder: {error}")]
    CurrentFolder { error: std::io::Error },
    /// `down RUN` of a run that is not there, or not the caller's.
    #[error(transparent)]
    NotRemovable(NotRemovable),
}

impl CommandError {
    fn cause(&self) -> Cause {
        match self {
            CommandError::NoContainer { .. } | CommandError::NotRemovable(NotRemovable::NoSuchRun { .. }) => {
                Cause::NoSuchRun
            }
            CommandError::Engine(_) | CommandError::CurrentFolder { .. } | CommandError::NotRemovable(_) => {
                Cause::Failed
            }
        }
    }
}

async fn run(command: Command) -> i32 {
    match command {
        Command::Up(options) => up(options).await,
        Command::Ps(engine) => {
            report(async {
                let rows = ps::rows(&connect(engine).await?).await?;
                print!("{}", ps::render(&rows));
                Ok(())
            })
            .await
        }
        Command::Logs { engine, follow, run, runtime } => {
            report(async {
                let found = logs::logs(&connect(engine).await?, &run, runtime.as_deref(), follow).await?;
                if found == 0 {
                    return Err(CommandError::NoContainer { run, runtime });
                }
                Ok(())
            })
            .await
        }
        Command::Image(ImageCommand::Build(options)) => match image::build(options).await {
            Ok(()) => 0,
            Err(e) => {
                eprintln!("sidecarctl: error: {e}");
                EXIT_FAILED
            }
        },
        Command::Image(ImageCommand::Base(options)) => match image::base::base(options).await {
            Ok(()) => 0,
            Err(e) => {
                eprintln!("sidecarctl: error: {e}");
                EXIT_FAILED
            }
        },
        Command::Compose(options) => emit::main(options, compose::emit),
        Command::Kube(options) => match options.replicas() {
            Ok(replicas) => emit::main(options.emit, |run, emit| kube::emit_kind(run, emit, options.kind, replicas)),
            Err(e) => {
                eprintln!("sidecarctl: error: {e}");
                EXIT_FAILED
            }
        },
        Command::Down { engine, stop_grace, all, run } => {
            report(async {
                let engine = connect(engine).await?;
                let here = std::env::current_dir()
                    .and_then(|d| d.canonicalize())
                    .map_err(|error| CommandError::CurrentFolder { error })?;
                let caller = RunOwner::caller(&here);
                let grace = Duration::from_secs(stop_grace);
                if let Some(run) = run {
                    let ownership = Ownership::of(&caller, &down::held(&engine, &run).await?);
                    ownership.for_down(&run, &caller, all).map_err(CommandError::NotRemovable)?;
                    let removed = down::remove_run(&engine, &run, grace).await?;
                    eprintln!("sidecarctl: removed run {run}: {removed}");
                    return Ok(());
                }
                let scope = if all { Scope::All } else { Scope::Owner(caller.clone()) };
                let runs = down::runs(&engine, &scope).await?;
                if !all {
                    if runs.is_empty() {
                        eprintln!(
                            "sidecarctl: no run of uid {} started from {} to remove",
                            caller.uid, caller.workspace
                        );
                    }
                    let everywhere = down::runs(&engine, &Scope::All).await?;
                    let elsewhere = everywhere.iter().filter(|r| !runs.contains(r)).count();
                    if elsewhere > 0 {
                        eprintln!(
                            "sidecarctl: left {elsewhere} run(s) started by another user or from another folder \
                             (`sidecarctl ps` lists them; `sidecarctl down --all RUN` removes one, `--all` alone every \
                             one)"
                        );
                    }
                }
                for run in runs {
                    let removed = down::remove_run(&engine, &run, grace).await?;
                    eprintln!("sidecarctl: removed run {run}: {removed}");
                }
                Ok(())
            })
            .await
        }
    }
}

async fn connect(option: EngineOption) -> Result<ContainerEngine, EngineError> {
    ContainerEngine::connect(option.engine.as_deref()).await
}

async fn report(work: impl std::future::Future<Output = Result<(), CommandError>>) -> i32 {
    match work.await {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("sidecarctl: error: {e}");
            e.cause().code()
        }
    }
}
