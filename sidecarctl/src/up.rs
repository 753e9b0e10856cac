//! `sidecarctl up`: network → builders → health gate → agent → teardown. Every object carries the run's label,
//! and every way out (the agent's exit, Ctrl-C / SIGTERM / SIGHUP at any step, a failed gate, an engine error)
//! goes through the same label-driven teardown, unless `--detach` succeeded. The token folder is this process's:
//! the teardown removes it too, also when the run failed before any container (and so any label) existed.
//! Signals: see [`crate::signals`] (the first stops the run, even in the middle of a pull; a second cuts the
//! grace; a third abandons the teardown).
//!
//! A run's name is its maker's ([`Ownership`]): before anything is created, `up` refuses a name that another user's
//! or folder's run holds, or that a run of this folder still running holds, and removes the leftovers of this
//! folder's own earlier run (nothing of it running). Where the engine may not raise resource limits, the run is
//! retried once with explicit ones ([`crate::limits`]).
//!
//! The policy is in small pure deciders, unit-tested without an engine: `next_step` (what follows an attempt),
//! `agent_request`, `container_user` and `attach_mode`; [`up`] and `start` are the I/O around them.

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use bollard::models::ImageConfig;
use clap::Args;
use futures_util::future::try_join_all;
use tokio_util::sync::CancellationToken;

use crate::agent::{run_attached, AgentEnd};
use crate::down::{remove_objects, remove_run};
use crate::engine::{ContainerEngine, EngineError, PullProblem};
use crate::exit::{Cause, EXIT_FAILED};
use crate::gate::{health_command, wait_healthy, GateError, HealthSource};
use crate::limits::{self, Refused};
use crate::model::Ulimit;
use crate::model::{AgentSsh, ModelError, RunConfig, WorkspaceLookup};
use crate::names::{BadRunName, NameTaken, Ownership, RunName, RunOwner, ROLE_NETWORK};
use crate::options::RunOptions;
use crate::plan::{AgentRequest, Deployment, Plan, User, AGENT_WRAPPERS, STATE_FOLDER};
use crate::progress::Progress;
use crate::render::api::{self, Attach, Context};
use crate::signals::{unless_stopped, StopLevels};
use crate::token::{RunToken, RunTokenError};

#[derive(Args, Debug, Clone)]
pub struct UpOptions {
    #[command(flatten)]
    pub run: RunOptions,

    /// The engine's socket, e.g. unix:///run/podman/podman.sock (default: DOCKER_HOST, then Docker's and
    /// Podman's usual sockets).
    #[arg(long, value_name = "URL")]
    pub engine: Option<String>,

    /// The run's id (names and labels); default: 8 random hex digits. The name is yours and this folder's while
    /// the run exists: another user's or folder's run of that name is refused, and so is one of this folder that
    /// still runs; the leftovers of this folder's own earlier run (nothing running) are replaced.
    #[arg(long, value_name = "RUN")]
    pub name: Option<String>,

    /// Leave the run going once the agent has started, and print its id.
    #[arg(long, short = 'd')]
    pub detach: bool,

    /// Keep the agent's stdin open and attached even when it is not a terminal.
    #[arg(long, short = 'i')]
    pub interactive: bool,

    /// The agent's user (UID:GID); default: the image's.
    #[arg(long, value_name = "UID:GID")]
    pub agent_user: Option<String>,

    /// An environment variable for the agent, NAME=VALUE or NAME (taken from ours); repeatable.
    #[arg(long = "env", short = 'e', value_name = "NAME[=VALUE]")]
    pub env: Vec<String>,

    /// Seconds between SIGTERM and SIGKILL when stopping a container.
    #[arg(long, value_name = "SECONDS", default_value_t = 10)]
    pub stop_grace: u64,

    /// The agent's image, then its command.
    #[arg(required = true, trailing_var_arg = true, value_name = "AGENT_IMAGE [CMD]...")]
    pub agent: Vec<String>,
}

/// Why `up` did not get to the agent.
#[derive(Debug, thiserror::Error)]
pub enum UpError {
    #[error(transparent)]
    Model(ModelError),
    #[error(transparent)]
    Name(BadRunName),
    /// The name is another run's (see [`Ownership::for_up`]).
    #[error(transparent)]
    Taken(NameTaken),
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// A default image (one `sidecarctl image build` makes) is missing and could not be pulled: `build` is the
    /// command that builds it.
    #[error("{error}; it is built, not pulled: `{build}` builds it")]
    Unbuilt { error: EngineError, build: String },
    /// The engine may not raise resource limits, and the run cannot be retried with limits it may set.
    #[error("{0}")]
    Limits(Refused),
    #[error(transparent)]
    Token(#[from] RunTokenError),
    #[error("{0}")]
    Gate(GateError),
    /// A signal arrived before the agent started.
    #[error("interrupted")]
    Interrupted,
}

impl UpError {
    /// The exit code's cause: a signal's own code, else sidecarctl's failure.
    pub fn cause(&self) -> Cause {
        match self {
            UpError::Interrupted => Cause::Signal(nix::sys::signal::Signal::SIGINT as i32),
            _ => Cause::Failed,
        }
    }
}

/// The gate's own end at a signal is `up`'s.
impl From<GateError> for UpError {
    fn from(e: GateError) -> Self {
        match e {
            GateError::Cancelled => UpError::Interrupted,
            other => UpError::Gate(other),
        }
    }
}

/// Runs `up`; returns the process exit code (the agent's, when it ran).
pub async fn up(options: UpOptions) -> i32 {
    let started = Instant::now();
    let progress = Progress::default();
    let run = match RunConfig::from_options(&options.run, WorkspaceLookup::Resolve) {
        Ok(run) => run,
        Err(e) => return fail(&progress, &UpError::Model(e)),
    };
    for warning in &run.warnings {
        progress.step(&format!("warning: {warning}"));
    }
    let id = match options.name.as_deref().map(RunName::named).transpose() {
        Ok(id) => id.unwrap_or_else(RunName::random),
        Err(e) => return fail(&progress, &UpError::Name(e)),
    };
    let signals = StopLevels::install();
    let engine = match unless_stopped(&signals.stop, ContainerEngine::connect(options.engine.as_deref())).await {
        Some(Ok(engine)) => engine,
        Some(Err(e)) => return fail(&progress, &UpError::Engine(e)),
        None => return signals.code(),
    };
    // The name before anything is made (the token folder is named after it too).
    let owner = RunOwner::caller(&run.workspace);
    match unless_stopped(&signals.stop, claim(&engine, &id, &owner, &progress)).await {
        Some(Ok(())) => {}
        Some(Err(e)) => return fail(&progress, &e),
        None => return signals.code(),
    }
    let grace = Duration::from_secs(options.stop_grace);
    let token = match run.token.then(|| RunToken::create(&id)).transpose() {
        Ok(token) => token,
        Err(e) => return fail(&progress, &UpError::Token(e)),
    };
    let down = Teardown {
        engine: &engine,
        id: &id,
        grace,
        progress: &progress,
        signals: &signals,
        token: token.as_ref(),
        down_command: down_command(&id, &run.workspace),
    };

    let mut run = run;
    let mut retried_limits = false;
    let attempt = start(&engine, &run, &id, &options, &progress, &signals.stop, token.as_ref()).await;
    let mut step = next_step(attempt, options.detach, retried_limits);
    loop {
        step = match step {
            Step::Attach(attach) => {
                progress.step(&format!("agent starting ({:.1}s after up)", started.elapsed().as_secs_f64()));
                match attached(attach, &down).await {
                    Ok(code) => return code,
                    Err(refusal) => next_step(Err(UpError::Engine(refusal)), options.detach, retried_limits),
                }
            }
            Step::Detached => {
                println!("{id}");
                progress.step(&format!("run {id} is up; {} removes it", down.down_command));
                return 0;
            }
            Step::Fail(UpError::Interrupted) => {
                down.run(None).await;
                return signals.code();
            }
            Step::Fail(e) => return fail_after(&down, &progress, &e).await,
            Step::RetryWithLimits(refusal) => {
                let limits = match retry_limits(&engine, &run, &refusal, &progress) {
                    Ok(limits) => limits,
                    Err(refused) => return fail_after(&down, &progress, &UpError::Limits(refused)).await,
                };
                // The run is retried whole: what this attempt made goes (the token folder stays: the retry binds
                // it).
                if let Err(e) = remove_objects(&engine, id.as_str(), Duration::ZERO).await {
                    return fail_after(&down, &progress, &UpError::Engine(e)).await;
                }
                run.ulimits.extend(limits);
                retried_limits = true;
                let attempt = start(&engine, &run, &id, &options, &progress, &signals.stop, token.as_ref()).await;
                next_step(attempt, options.detach, retried_limits)
            }
        };
    }
}

/// What `up` does once an attempt to start the run has ended (or its attached agent failed to start).
#[derive(Debug)]
enum Step {
    /// The agent is created: run it attached, then remove the run.
    Attach(Attach),
    /// The agent is started (`--detach`): print the run's id and leave it going.
    Detached,
    /// The engine refused to raise a resource limit at a container's start (a builder's or the agent's): retry
    /// the run whole with limits it may set.
    RetryWithLimits(EngineError),
    /// Remove the run and end with the error's code (a signal's own code for [`UpError::Interrupted`]).
    Fail(UpError),
}

/// The step after an attempt (`retried`: it was the retry with explicit limits). The retry is made once: the
/// retry's own refusal is the engine's last word.
fn next_step(attempt: Result<Attach, UpError>, detach: bool, retried: bool) -> Step {
    match attempt {
        Err(UpError::Engine(refusal)) if refusal.limits_refusal().is_some() && !retried => {
            Step::RetryWithLimits(refusal)
        }
        Err(e) => Step::Fail(e),
        Ok(_) if detach => Step::Detached,
        Ok(attach) => Step::Attach(attach),
    }
}

/// Runs the started agent attached, then removes the run: the agent's code (or the stop signal's), or the
/// engine's refusal to raise a resource limit at the agent's start, for the caller to retry the run with them.
async fn attached(Attach { tty, stdin }: Attach, down: &Teardown<'_>) -> Result<i32, EngineError> {
    let end = run_attached(down.engine, &down.id.agent(), tty, stdin, down.grace, down.signals, down.progress).await;
    let (code, stopped) = match end {
        Err(e) if e.limits_refusal().is_some() => return Err(e),
        Ok(AgentEnd::Exited(code)) => (code as i32, None),
        Ok(AgentEnd::Stopped { since, .. }) => (down.signals.code(), Some(since)),
        Err(e) => {
            down.progress.step(&format!("error: {e}"));
            (EXIT_FAILED, None)
        }
    };
    down.run(stopped).await;
    Ok(code)
}

/// "`sidecarctl down ID`", and where to type it when that is not the current folder: `down RUN` removes only a
/// run of the folder it is typed in (the run's workspace).
fn down_command(id: &RunName, workspace: &std::path::Path) -> String {
    let here = std::env::current_dir().and_then(|d| d.canonicalize()).ok();
    if here.as_deref() == Some(workspace) {
        format!("`sidecarctl down {id}`")
    } else {
        format!("`sidecarctl down {id}` in {}", workspace.display())
    }
}

/// Takes the run's name for the caller (see [`Ownership::for_up`]): refused when another run holds it, and the
/// leftovers of the caller's own earlier run of this folder removed first.
async fn claim(engine: &ContainerEngine, id: &RunName, owner: &RunOwner, progress: &Progress) -> Result<(), UpError> {
    let held = crate::down::held(engine, id.as_str()).await?;
    if Ownership::of(owner, &held).for_up(id.as_str(), owner).map_err(UpError::Taken)? {
        progress.step(&format!("removing the leftovers of this folder's earlier run {id} (nothing of it running)"));
        remove_run(engine, id.as_str(), Duration::ZERO).await?;
    }
    Ok(())
}

/// The limits to retry a run with after the engine's `refusal` to raise one, said in one line; or why the run
/// cannot be retried.
fn retry_limits(
    engine: &ContainerEngine,
    run: &RunConfig,
    refusal: &EngineError,
    progress: &Progress,
) -> Result<Vec<Ulimit>, Refused> {
    let engine_said = refusal.limits_refusal().unwrap_or_default();
    let Some(socket) = engine.local_socket() else { return Err(Refused { engine_said, remote: true }) };
    let limits = limits::fallback(&run.ulimits, &|name| limits::engine_hard_limit(&socket, name));
    if limits.is_empty() {
        return Err(Refused { engine_said, remote: false });
    }
    progress.step(&format!(
        "the engine may not raise resource limits here ({}); retrying with {} (pass them, or `ulimits:` in the \
         profile, to start without this retry)",
        engine_said.trim(),
        limits::as_flags(&limits)
    ));
    Ok(limits)
}

async fn fail_after(down: &Teardown<'_>, progress: &Progress, error: &UpError) -> i32 {
    progress.step(&format!("error: {error}"));
    down.run(None).await;
    error.cause().code()
}

fn fail(progress: &Progress, error: &UpError) -> i32 {
    progress.step(&format!("error: {error}"));
    error.cause().code()
}

/// Everything the run made goes: by label on the engine, and the token folder this process created (which no
/// label names until a container exists). A second signal restarts the removal without the grace; a third
/// abandons it and says what may be left.
struct Teardown<'a> {
    engine: &'a ContainerEngine,
    id: &'a RunName,
    grace: Duration,
    progress: &'a Progress,
    signals: &'a StopLevels,
    token: Option<&'a RunToken>,
    /// What removes the run by hand ([`down_command`]).
    down_command: String,
}

impl Teardown<'_> {
    /// Removes the run. The time it reports is the removal's, or, when a signal stopped the agent (`stopped`: when
    /// that stop began), the whole stop's: the agent's own wait (up to the grace) is part of what the person waited.
    async fn run(&self, stopped: Option<Instant>) {
        let (id, progress) = (self.id, self.progress);
        let started = Instant::now();
        let graceful = unless_stopped(&self.signals.hurry, remove_run(self.engine, id.as_str(), self.grace)).await;
        let removed = match graceful {
            Some(removed) => Some(removed),
            None => {
                progress.step(&format!("signal again: removing run {id} without the grace (SIGKILL)"));
                unless_stopped(&self.signals.abandon, remove_run(self.engine, id.as_str(), Duration::ZERO)).await
            }
        };
        if let Some(token) = self.token {
            token.remove();
        }
        match removed {
            Some(Ok(removed)) => progress.step(&format!(
                "removed run {id}: {removed} ({}; cache volumes kept)",
                match stopped {
                    Some(stopped) =>
                        format!("{:.1}s since the stop, the agent's included", stopped.elapsed().as_secs_f64()),
                    None => format!("{:.1}s", started.elapsed().as_secs_f64()),
                }
            )),
            Some(Err(e)) => {
                progress.step(&format!("error: teardown of run {id}: {e} (retry with {})", self.down_command))
            }
            None => progress.step(&format!(
                "teardown of run {id} abandoned: its containers and network may be left (token folder removed); \
                 {} removes them",
                self.down_command
            )),
        }
    }
}

/// Creates the run up to its agent (created, not started): images, network, builders and their health gate, then
/// the agent's container; returns how the agent meets the terminal. Every step is I/O; what each one does is
/// decided by the pure functions below it ([`agent_request`], [`container_user`], [`attach_mode`]).
async fn start(
    engine: &ContainerEngine,
    run: &RunConfig,
    id: &RunName,
    options: &UpOptions,
    progress: &Progress,
    cancel: &CancellationToken,
    token: Option<&RunToken>,
) -> Result<Attach, UpError> {
    let checkpoint = || if cancel.is_cancelled() { Err(UpError::Interrupted) } else { Ok(()) };
    let (request, ssh) = agent_request(options, run.ssh.as_ref(), &|name| std::env::var(name).ok());
    let plan = Plan::new(run, request, Deployment::Up);
    let owner = RunOwner::caller(&run.workspace);

    // Images first: nothing is created for a run whose images are missing.
    let images = ensure_images(engine, &plan, progress, cancel).await?;
    let (agent_config, builder_configs) = images.split_last().expect("the agent image is in the list");

    let caller = format!("{}:{}", nix::unistd::getuid(), nix::unistd::getgid());
    let agent_user = container_user(&plan.agent.user, agent_config.user.as_deref(), &caller);
    // The agent must be able to read the files the block binds; nothing is created for a run where it cannot.
    if let Some(error) = ssh.as_ref().and_then(|ssh| ssh.unreadable_by(&agent_user)) {
        return Err(UpError::Model(error.into()));
    }
    // The agent's token file and what it can do in the workspace, before any builder is started and waited for.
    let agent_token = token.map(|t| t.file_for(&id.agent(), &agent_user)).transpose()?;
    if let Some(warning) = workspace_warning(run, &agent_user) {
        progress.step(&format!("warning: {warning}"));
    }

    let ctx = Context {
        engine: engine.kind().await?,
        plan: &plan,
        name: id,
        owner: &owner,
        workspace: &run.workspace,
        caller: caller.clone(),
        token_dir: token.map(|t| t.dir.display().to_string()),
    };
    checkpoint()?;
    progress.step(&format!("network {}", id.network()));
    engine.ensure_network(&id.network(), id.labels(ROLE_NETWORK, None, &owner)).await?;
    let commands = create_builders(engine, &ctx, builder_configs, token, progress, cancel).await?;
    gate(engine, &plan, id, &commands, progress, cancel).await?;

    checkpoint()?;
    let on_terminal = std::io::stdin().is_terminal() && std::io::stdout().is_terminal();
    let attach = attach_mode(options.detach, options.interactive, on_terminal);
    let body = api::body(&ctx, &plan.agent, agent_token.as_deref(), Some(attach));
    engine.create(&id.agent(), body, options.detach).await?;
    Ok(attach)
}

/// The plan's images, inspected (each image's config, in the plan's order: the builders', then the agent's); a
/// missing image is pulled, and one that `sidecarctl image build` makes names that command when it cannot be.
async fn ensure_images(
    engine: &ContainerEngine,
    plan: &Plan,
    progress: &Progress,
    cancel: &CancellationToken,
) -> Result<Vec<ImageConfig>, UpError> {
    // The engine calls that can take long (inspect and pull: a registry may be slow or silent) end at a signal.
    let interruptible = |work| async move { unless_stopped(cancel, work).await.ok_or(UpError::Interrupted) };
    let mut images = Vec::new();
    for image in plan.containers().map(|c| c.image.as_str()) {
        if cancel.is_cancelled() {
            return Err(UpError::Interrupted);
        }
        let inspected = match interruptible(engine.image(image)).await?? {
            Some(found) => found,
            None => {
                progress.step(&format!("pulling {image}"));
                let mut said = None;
                let pull = engine.pull(image, |line| progress.waiting(&format!("pulling {image}: {line}"), &mut said));
                let pulled = unless_stopped(cancel, pull).await.ok_or(UpError::Interrupted)?;
                pulled.map_err(|error| match build_command(image) {
                    Some(build) => UpError::Unbuilt { error, build },
                    None => UpError::Engine(error),
                })?;
                interruptible(engine.image(image))
                    .await??
                    .ok_or_else(|| EngineError::Pull { image: image.to_owned(), error: PullProblem::Absent })?
            }
        };
        images.push(inspected.config.unwrap_or_default());
    }
    Ok(images)
}

/// Creates and starts the plan's builders (each with its token file, as its user), and returns the health command
/// of each, in order, for the gate.
async fn create_builders(
    engine: &ContainerEngine,
    ctx: &Context<'_>,
    configs: &[ImageConfig],
    token: Option<&RunToken>,
    progress: &Progress,
    cancel: &CancellationToken,
) -> Result<Vec<Vec<String>>, UpError> {
    let mut commands = Vec::new();
    for (builder, config) in ctx.plan.builders.iter().zip(configs) {
        if cancel.is_cancelled() {
            return Err(UpError::Interrupted);
        }
        let name = ctx.name.container(&builder.name);
        let user = container_user(&builder.user, config.user.as_deref(), &ctx.caller);
        let token_file = token.map(|t| t.file_for(&name, &user)).transpose()?;
        if let Some(home) = builder.home.as_ref().and_then(|home| home.source.host_path(ctx.workspace)) {
            make_caller_home(&home);
        }
        let body = api::body(ctx, builder, token_file.as_deref(), None);
        progress.step(&format!(
            "builder {name} ({}) as {}",
            builder.image,
            if user.is_empty() { "root" } else { &user }
        ));
        engine.create(&name, body, true).await?;
        let test = builder.health.as_ref().and_then(|h| h.test.as_deref());
        commands.push(health_command(test, config.healthcheck.as_ref()));
    }
    Ok(commands)
}

/// The gate: all builders at once, so the slowest one sets the wait (`commands`: each builder's health command).
async fn gate(
    engine: &ContainerEngine,
    plan: &Plan,
    id: &RunName,
    commands: &[Vec<String>],
    progress: &Progress,
    cancel: &CancellationToken,
) -> Result<(), UpError> {
    try_join_all(plan.builders.iter().zip(commands).filter_map(|(builder, command)| {
        let (runtime, health) = (builder.runtime()?, builder.health.as_ref()?);
        Some(async move {
            let name = id.container(&builder.name);
            let (took, source) = wait_healthy(engine, &name, runtime, health, command, progress, cancel).await?;
            let by = match source {
                HealthSource::Engine => "the engine's HEALTHCHECK",
                HealthSource::Probe => "the health command",
            };
            progress.step(&format!("{} healthy after {:.1}s ({by})", builder.name, took.as_secs_f64()));
            Ok::<_, UpError>(())
        })
    }))
    .await?;
    Ok(())
}

/// The agent the options ask for, and the profile's `ssh:` block as it applies to it: the agent's variables are
/// the block's unless `-e` names them too, then `-e`'s (`env` reads ours, for `-e NAME`); an agent run as another
/// user (`--agent-user`) gets its own wrapper folder.
fn agent_request(
    options: &UpOptions,
    ssh: Option<&AgentSsh>,
    env: &dyn Fn(&str) -> Option<String>,
) -> (AgentRequest, Option<AgentSsh>) {
    let (agent_image, agent_cmd) = options.agent.split_first().expect("clap requires AGENT_IMAGE");
    let flag_env: Vec<(String, String)> = options.env.iter().filter_map(|e| agent_env(e, env)).collect();
    let flag_names: Vec<&str> = flag_env.iter().map(|(name, _)| name.as_str()).collect();
    let ssh = ssh.map(|ssh| ssh.without(&flag_names));
    let request = AgentRequest {
        image: agent_image.clone(),
        command: agent_cmd.to_vec(),
        user: options.agent_user.clone(),
        env: ssh.iter().flat_map(|ssh| ssh.env.clone()).chain(flag_env).collect(),
        mounts: ssh.iter().flat_map(|ssh| ssh.mounts()).collect(),
        tmpfs: options.agent_user.iter().map(|_| AGENT_WRAPPERS.to_owned()).collect(),
    };
    (request, ssh)
}

/// The user a container runs as, for its token file: the plan's (`caller`: `uid:gid`), or the image's (`""`, the
/// engine's root, when the image names none).
fn container_user(user: &User, image_user: Option<&str>, caller: &str) -> String {
    match user {
        User::Caller => caller.to_owned(),
        User::Given(user) => user.clone(),
        User::Image => image_user.unwrap_or_default().to_owned(),
    }
}

/// How the agent meets our terminal: a detached agent is not attached at all; otherwise it gets a TTY when both
/// our stdin and stdout are a terminal (`on_terminal`), and stdin with the TTY or with `-i`.
fn attach_mode(detach: bool, interactive: bool, on_terminal: bool) -> Attach {
    let tty = !detach && on_terminal;
    Attach { tty, stdin: !detach && (tty || interactive) }
}

/// The `sidecarctl image build` command that makes `image` when it is one of the names that command gives
/// (`sidecar-builder-RT[:TAG]`, `sidecar-agent[:TAG]`, podman's `localhost/` before them): such an image is built,
/// not pulled, so its missing is a step not taken yet.
fn build_command(image: &str) -> Option<String> {
    let image = image.strip_prefix("localhost/").unwrap_or(image);
    let (name, tag) = image.split_once(':').unwrap_or((image, "latest"));
    // A builder's tag is its runtime's version by default (`--runtime-version` sets both); the agent's is a tag.
    let (target, flag) = match name.strip_prefix("sidecar-builder-") {
        Some(rt) => (rt.parse::<crate::runtime::Runtime>().ok()?.as_str(), "--runtime-version"),
        None if name == "sidecar-agent" => ("agent", "--tag"),
        None => return None,
    };
    let tag = if tag == "latest" { String::new() } else { format!(" {flag} {tag}") };
    Some(format!("sidecarctl image build{tag} {target}"))
}

/// `NAME=VALUE` as is; `NAME` takes our value (`env`), and is dropped when we have none (as `docker run -e NAME`).
fn agent_env(entry: &str, env: &dyn Fn(&str) -> Option<String>) -> Option<(String, String)> {
    match entry.split_once('=') {
        Some((name, value)) => Some((name.to_owned(), value.to_owned())),
        None => env(entry).map(|value| (entry.to_owned(), value)),
    }
}

/// Whether the agent's user (the engine's `User`: "", "uid", "uid:gid" or a name) can write the workspace it works
/// in, as the container sees it: every capability is dropped, so not even its root writes past the folder's mode.
/// A warning, not an error: an agent may only read. A user given by name passes (its ids are the image's).
fn workspace_warning(run: &RunConfig, user: &str) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let workdir = run.agent_workdir()?;
    let volume = run.volumes.iter().find(|v| v.target == workdir && !v.read_only)?;
    let folder = volume.source.host_path(&run.workspace)?;
    let (uid_text, gid_text) = user.split_once(':').map_or((user, None), |(u, g)| (u, Some(g)));
    let uid: u32 = if uid_text.is_empty() { 0 } else { uid_text.parse().ok()? };
    let gid: Option<u32> = gid_text.and_then(|g| g.parse().ok());
    let meta = std::fs::metadata(&folder).ok()?;
    let mode = meta.mode() & 0o7777;
    let writable = (meta.uid() == uid && mode & 0o300 == 0o300)
        || (gid.is_none_or(|g| g == meta.gid()) && mode & 0o030 == 0o030)
        || mode & 0o003 == 0o003;
    (!writable).then(|| {
        format!(
            "the agent runs as uid {uid}, which cannot write the workspace {} (uid {}, gid {}, mode {mode:o}): run it \
             as the folder's owner (--agent-user {}:{}), give that uid the folder, or build the agent image with \
             AGENT_UID={}",
            folder.display(),
            meta.uid(),
            meta.gid(),
            meta.uid(),
            meta.gid(),
            meta.uid()
        )
    })
}

/// A builder's `HOME` (in the workspace) exists before it starts, owned by the caller who creates it; the state
/// folder above it ignores itself for git. Best effort: a builder whose `HOME` is missing still runs.
fn make_caller_home(home: &std::path::Path) {
    let _ = std::fs::create_dir_all(home);
    let state = home.ancestors().find(|p| p.file_name().is_some_and(|n| n == STATE_FOLDER));
    if let Some(ignore) = state.map(|folder| folder.join(".gitignore")).filter(|file| !file.exists()) {
        let _ = std::fs::write(ignore, "# sidecarctl's own folder (the builders' HOME): not part of the project\n*\n");
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use clap::Parser;

    use super::*;
    use crate::model::{Volume, VolumeSource};

    #[derive(Parser)]
    struct Up {
        #[command(flatten)]
        up: UpOptions,
    }

    fn options(args: &[&str]) -> UpOptions {
        Up::try_parse_from(std::iter::once("up").chain(args.iter().copied())).unwrap().up
    }

    /// The agent's variables: the `ssh:` block's, less those `-e` names (their files too), then `-e`'s in order;
    /// `-e NAME` takes our value, and is dropped when we have none. A wrapper folder only for `--agent-user`.
    #[test]
    fn the_agent_request_lets_e_win_over_the_ssh_block() {
        let key = Volume {
            source: VolumeSource::Host("/home/me/.ssh/id".into()),
            target: "/run/secrets/ssh-key".into(),
            read_only: true,
        };
        let ssh = AgentSsh {
            env: BTreeMap::from([
                ("SSH_HOST".into(), "build.example".into()),
                ("SSH_KEY_PATH".into(), "/run/secrets/ssh-key".into()),
                ("SSH_PORT".into(), "22".into()),
            ]),
            files: BTreeMap::from([("SSH_KEY_PATH".to_owned(), key.clone())]),
        };
        let ours = |name: &str| (name == "FROM_US").then(|| "ours".to_owned());
        let pairs = |env: &[(&str, &str)]| env.iter().map(|(n, v)| (n.to_string(), v.to_string())).collect::<Vec<_>>();

        let asked = options(&["-e", "SSH_PORT=2222", "-e", "FROM_US", "-e", "NOT_OURS", "agent:1", "run", "--fast"]);
        let (request, applied) = agent_request(&asked, Some(&ssh), &ours);
        assert_eq!(
            (request.image.as_str(), request.command.clone()),
            ("agent:1", vec!["run".to_owned(), "--fast".to_owned()])
        );
        assert_eq!(
            request.env,
            pairs(&[
                ("SSH_HOST", "build.example"),
                ("SSH_KEY_PATH", "/run/secrets/ssh-key"),
                ("SSH_PORT", "2222"),
                ("FROM_US", "ours")
            ])
        );
        assert_eq!(request.mounts, [key]);
        assert_eq!(applied.unwrap().env.get("SSH_PORT"), None, "the block as applied has -e's variables out");
        assert_eq!((request.user, request.tmpfs), (None, vec![]));

        let asked = options(&["-e", "SSH_KEY_PATH=/mine", "--agent-user", "1000:1000", "agent:1"]);
        let (request, _) = agent_request(&asked, Some(&ssh), &ours);
        assert!(request.mounts.is_empty(), "a key file -e replaced is not bound");
        assert_eq!(request.env.last(), Some(&("SSH_KEY_PATH".to_owned(), "/mine".to_owned())));
        assert_eq!((request.user.as_deref(), request.tmpfs), (Some("1000:1000"), vec![AGENT_WRAPPERS.to_owned()]));

        let (request, applied) = agent_request(&options(&["agent:1"]), None, &ours);
        assert!(request.env.is_empty() && request.mounts.is_empty() && applied.is_none());
    }

    /// The user each container's token file is made for: the caller, the given user, or the image's (root's ""
    /// when it names none).
    #[test]
    fn a_containers_user_is_the_plans_else_the_images() {
        assert_eq!(container_user(&User::Caller, Some("node"), "1000:1000"), "1000:1000");
        assert_eq!(container_user(&User::Given("0:0".into()), Some("node"), "1000:1000"), "0:0");
        assert_eq!(container_user(&User::Image, Some("node"), "1000:1000"), "node");
        assert_eq!(container_user(&User::Image, None, "1000:1000"), "");
    }

    /// After an attempt: the agent attached, or left going with `--detach`; the engine's refusal to raise a
    /// resource limit retried once, and its second refusal a failure like any other error.
    #[test]
    fn a_limits_refusal_is_retried_once_and_everything_else_ends_the_run() {
        let api = |message: &str| {
            Err(UpError::Engine(EngineError::Api {
                what: "starting container sidecarctl-x-builder-node".into(),
                error: bollard::errors::Error::DockerResponseServerError { status_code: 500, message: message.into() },
            }))
        };
        let refusal = "crun: setrlimit `RLIMIT_NOFILE`: Operation not permitted: OCI permission denied";
        let attach = Attach { tty: true, stdin: true };
        assert!(matches!(next_step(Ok(attach), false, false), Step::Attach(Attach { tty: true, stdin: true })));
        assert!(matches!(next_step(Ok(attach), false, true), Step::Attach(_)), "the retry's agent is attached too");
        assert!(matches!(next_step(Ok(Attach::default()), true, false), Step::Detached));
        assert!(
            matches!(next_step(api(refusal), false, false), Step::RetryWithLimits(e) if e.limits_refusal().is_some())
        );
        assert!(matches!(next_step(api(refusal), true, false), Step::RetryWithLimits(_)), "detached too");
        assert!(matches!(next_step(api(refusal), false, true), Step::Fail(UpError::Engine(_))), "only once");
        assert!(matches!(next_step(api("no such image"), false, false), Step::Fail(UpError::Engine(_))));
        assert!(matches!(next_step(Err(UpError::Interrupted), false, false), Step::Fail(UpError::Interrupted)));
    }

    /// A TTY only on a terminal and never detached; stdin with the TTY or with `-i`, never detached.
    #[test]
    fn the_agent_is_attached_by_the_terminal_and_the_flags() {
        let mode = |detach, interactive, on_terminal| {
            let Attach { tty, stdin } = attach_mode(detach, interactive, on_terminal);
            (tty, stdin)
        };
        assert_eq!(mode(false, false, true), (true, true));
        assert_eq!(mode(false, false, false), (false, false));
        assert_eq!(mode(false, true, false), (false, true));
        assert_eq!(mode(false, true, true), (true, true));
        for (interactive, on_terminal) in [(false, false), (false, true), (true, false), (true, true)] {
            assert_eq!(mode(true, interactive, on_terminal), (false, false), "detached");
        }
    }

    /// A missing image that `image build` makes gets the command that builds it; another image gets none.
    #[test]
    fn a_missing_default_image_names_its_build() {
        let build = build_command;
        assert_eq!(build("sidecar-builder-python:latest").as_deref(), Some("sidecarctl image build python"));
        assert_eq!(build("localhost/sidecar-builder-node").as_deref(), Some("sidecarctl image build node"));
        assert_eq!(build("sidecar-agent").as_deref(), Some("sidecarctl image build agent"));
        assert_eq!(
            build("sidecar-builder-go:1.22").as_deref(),
            Some("sidecarctl image build --runtime-version 1.22 go")
        );
        assert_eq!(build("sidecar-agent:v2").as_deref(), Some("sidecarctl image build --tag v2 agent"));
        assert_eq!(build("sidecar-builder-cobol:latest"), None);
        assert_eq!(build("python:3.12-slim"), None);
        assert_eq!(build("registry.example/sidecar-agent:latest"), None);
    }

    /// `git status` in a workspace that is a git checkout does not show the builders' HOME folder.
    #[test]
    fn the_state_folder_ignores_itself() {
        let workspace = tempfile::tempdir().unwrap();
        let git = |args: &[&str]| {
            std::process::Command::new("git").args(args).current_dir(workspace.path()).output().expect("git runs")
        };
        git(&["init", "-q"]);
        make_caller_home(&workspace.path().join(".sidecarctl/home/node"));
        std::fs::write(workspace.path().join(".sidecarctl/home/node/.npmrc"), "x").unwrap();
        assert!(workspace.path().join(".sidecarctl/home/node").is_dir());
        let status = git(&["status", "--porcelain", "--untracked-files=all"]);
        assert_eq!(String::from_utf8_lossy(&status.stdout), "", "git status shows the state folder");
    }
}
