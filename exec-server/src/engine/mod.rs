//! The process engine: runs one argv in its own process group, enforces its timeout and cancellation, and collects
//! or streams its output. It knows nothing of HTTP or files: every transport builds a [`Job`], calls
//! [`Engine::run`], and turns the [`Outcome`] (or the stream of chunks) into its own format.

mod escaped;
mod output;

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use process_group::{self as group, Members, Pgid, Tagged};
use protocol::StreamKind;
use tokio::io::AsyncWriteExt;
use tokio::process::Command;
use tokio_util::sync::CancellationToken;

pub use output::{Captured, Output, OutputChunk, READ_SIZE};

use crate::metrics::{CommandOutcome, Metrics};
use crate::workspace::WorkDir;
pub use process_group::{become_subreaper, exit_code_of, reap_adopted_forever};

/// How the engine treats every command.
#[derive(Debug, Clone)]
pub struct Policy {
    /// Between SIGTERM and SIGKILL when a command is stopped (timeout, cancellation, shutdown).
    pub grace: Duration,
    /// After the leader exits, how long to keep reading pipes that a background descendant still holds open.
    pub drain: Duration,
}

/// One command to run.
#[derive(Debug, Clone)]
pub struct Job {
    /// Program and arguments; never run through a shell.
    pub argv: Vec<OsString>,
    /// Working directory (already resolved, and opened and confined where the transport confines it).
    pub cwd: WorkDir,
    /// The complete environment of the command.
    pub env: Vec<(OsString, OsString)>,
    /// Bytes for stdin; `None` means `/dev/null`.
    pub stdin: Option<Vec<u8>>,
    pub timeout: Duration,
}

/// How a command ended.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The exit code; 128+N when a signal ended it; 124 when it timed out.
    pub exit_code: i32,
    /// The signal that ended the leader, if one did.
    pub signal: Option<i32>,
    pub timed_out: bool,
    /// Stopped because its transport asked (client gone, server shutting down).
    pub cancelled: bool,
    pub duration: Duration,
    pub stdout: Captured,
    pub stderr: Captured,
}

/// The command never started: no such program, a working directory that is not there, …
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StartError(pub String);

impl std::fmt::Display for StartError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "failed to start command: {}", self.0)
    }
}

impl std::error::Error for StartError {}

/// Runs commands. Cheap to clone; every clone shares the set of live process groups and the shutdown switch.
#[derive(Clone, Debug)]
pub struct Engine {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    policy: Policy,
    /// Process group → job id of every command not yet cleaned up.
    live_groups: Mutex<HashMap<Pgid, u64>>,
    shutdown: CancellationToken,
    /// When [`Engine::shutdown`] was called: the grace period of everything it stops counts from here.
    shutdown_at: OnceLock<tokio::time::Instant>,
    sweeper: Arc<escaped::Sweeper>,
    sweeper_started: std::sync::Once,
    metrics: Arc<Metrics>,
}

/// How long [`Engine::finish_shutdown`] waits for SIGKILLed processes to disappear: short, since the whole
/// shutdown must fit in the grace period plus a second.
pub const SHUTDOWN_KILL_WAIT: Duration = Duration::from_millis(400);

/// Job ids are unique in the process, not per engine: they tag descendants (see `escaped`), and tests run several
/// engines in one process.
static NEXT_JOB: AtomicU64 = AtomicU64::new(1);

enum Ending {
    Exited(std::io::Result<ExitStatus>),
    TimedOut,
    Cancelled,
}

impl Engine {
    pub fn new(policy: Policy) -> Self {
        Engine {
            inner: Arc::new(Inner {
                policy,
                live_groups: Mutex::new(HashMap::new()),
                shutdown: CancellationToken::new(),
                shutdown_at: OnceLock::new(),
                sweeper: Arc::default(),
                sweeper_started: std::sync::Once::new(),
                metrics: Arc::default(),
            }),
        }
    }

    /// What this engine (and the transports over it) counts.
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.inner.metrics
    }

    /// How many process groups are alive (running commands and leftovers being terminated).
    pub fn live_groups(&self) -> usize {
        self.inner.live_groups.lock().unwrap().len()
    }

    /// Stops every running command by the policy, and refuses none: transports stop accepting work themselves.
    /// Escapees of every job not yet swept — running, finished, or being swept — get their SIGTERM now too, so that
    /// one grace period, counted from here, covers everything; [`Engine::finish_shutdown`] completes the policy.
    pub fn shutdown(&self) {
        let _ = self.inner.shutdown_at.set(tokio::time::Instant::now());
        self.inner.shutdown.cancel();
        group::ask_to_stop(&mut self.unfinished());
    }

    /// Completes the shutdown before the process exits: waits until the grace period that [`Engine::shutdown`]
    /// started has passed for whatever still carries the tag of an unfinished job (commands, what escaped them,
    /// sweeps under way), SIGKILLs what is left, and gives up on what survives SIGKILL for [`SHUTDOWN_KILL_WAIT`].
    /// Returns within the grace period plus that wait, counted from [`Engine::shutdown`].
    pub async fn finish_shutdown(&self) {
        let started = *self.inner.shutdown_at.get_or_init(tokio::time::Instant::now);
        let mut unfinished = self.unfinished();
        if !group::settle(&mut unfinished, started + self.inner.policy.grace, SHUTDOWN_KILL_WAIT).await {
            tracing::warn!(left = unfinished.find().len(), "processes survive SIGKILL at shutdown; leaving them");
        }
        self.kill_all();
    }

    /// Last resort when the process is about to exit: SIGKILL to every group and tagged process still known.
    pub fn kill_all(&self) {
        for pgid in self.inner.live_groups.lock().unwrap().keys() {
            pgid.signal(Signal::SIGKILL);
        }
        self.unfinished().signal(Signal::SIGKILL);
    }

    /// Whatever carries the tag of a job that is running, or finished but not yet swept.
    fn unfinished(&self) -> Tagged {
        let mut jobs: Vec<u64> = self.inner.live_groups.lock().unwrap().values().copied().collect();
        jobs.extend(self.inner.sweeper.unfinished());
        Tagged::new(jobs.into_iter().map(escaped::tag).collect())
    }

    /// Runs `job` to its end. `cancel` stops it early (TERM → grace → KILL to its whole group), as does
    /// [`Engine::shutdown`]. Returns once the leader is reaped and the output is read; leftover members of the group
    /// are terminated in the background by the same policy.
    ///
    /// Transports should run this in its own task, so that the timeout is enforced even while the transport is
    /// blocked on a slow peer, and so that dropping the transport's future (a client gone) can only cancel, never
    /// abandon, a command.
    pub async fn run(&self, job: Job, output: Output, cancel: CancellationToken) -> Result<Outcome, StartError> {
        let _running = self.inner.metrics.running();
        let result = self.run_job(job, output, cancel).await;
        let metrics = &self.inner.metrics;
        match &result {
            Ok(outcome) => {
                let ran = (outcome.duration, outcome.stdout.total, outcome.stderr.total);
                metrics.command_ended(outcome_of(outcome), Some(ran));
            }
            Err(not_started) => self.not_started(not_started),
        }
        result
    }

    /// Logs and counts a command that never started; transports call it for the failures they find before the
    /// engine (a working directory that is not there).
    pub fn not_started(&self, err: &StartError) {
        tracing::info!(error = %err, "command not started");
        self.inner.metrics.command_ended(CommandOutcome::NotStarted, None);
    }

    async fn run_job(&self, job: Job, output: Output, cancel: CancellationToken) -> Result<Outcome, StartError> {
        let id = NEXT_JOB.fetch_add(1, Ordering::Relaxed);
        self.inner.sweeper_started.call_once(|| {
            tokio::spawn(self.inner.sweeper.clone().run(self.inner.policy.grace, self.inner.metrics.clone()));
        });
        let program = job.argv.first().map(|p| p.to_string_lossy().into_owned()).unwrap_or_default();
        let started = Instant::now();
        let grace = self.inner.policy.grace;

        let first = job.argv.first().ok_or_else(|| StartError("empty command".into()))?;
        let mut command = Command::new(resolve_program(first, &job)?);
        command
            .arg0(first)
            .args(&job.argv[1..])
            .current_dir(job.cwd.enter())
            .env_clear()
            .envs(job.env.iter().map(|(k, v)| (k, v)))
            .env(escaped::JOB_VARIABLE, escaped::tag_value(id))
            .stdin(if job.stdin.is_some() { Stdio::piped() } else { Stdio::null() })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut leader = group::spawn_leader(&mut command).map_err(|err| start_error(&job, &program, &err))?;
        let pgid = leader.pgid();
        let guard = GroupGuard::register(self.clone(), pgid, id);

        if let (Some(bytes), Some(mut stdin)) = (job.stdin, leader.child().stdin.take()) {
            // A command that exits without reading its stdin is not an error.
            tokio::spawn(async move {
                let _ = stdin.write_all(&bytes).await;
            });
        }
        let stop_reading = CancellationToken::new();
        let sink = output::Sink::from(&output);
        drop(output);
        let stdout =
            leader.child().stdout.take().map(|pipe| {
                tokio::spawn(output::read_pipe(pipe, StreamKind::Stdout, sink.clone(), stop_reading.clone()))
            });
        let stderr = leader
            .child()
            .stderr
            .take()
            .map(|pipe| tokio::spawn(output::read_pipe(pipe, StreamKind::Stderr, sink, stop_reading.clone())));

        let ending = tokio::select! {
            status = leader.wait() => Ending::Exited(status),
            () = tokio::time::sleep(job.timeout) => Ending::TimedOut,
            () = cancel.cancelled() => Ending::Cancelled,
            () = self.inner.shutdown.cancelled() => Ending::Cancelled,
        };
        let (status, timed_out, cancelled, group_done) = match ending {
            Ending::Exited(status) => (status, false, false, false),
            Ending::TimedOut => (group::terminate_group(&mut leader, grace).await, true, false, true),
            Ending::Cancelled => (group::terminate_group(&mut leader, grace).await, false, true, true),
        };
        let leader_gone = Instant::now();

        // Pipes held open by a background descendant must not hold the result: drain briefly, then stop reading.
        let readers = async { (join_reader(stdout).await, join_reader(stderr).await) };
        tokio::pin!(readers);
        let (stdout, stderr) = tokio::select! {
            both = &mut readers => both,
            () = tokio::time::sleep(self.inner.policy.drain) => {
                stop_reading.cancel();
                readers.await
            }
        };
        let duration = leader_gone.duration_since(started);

        // Whatever the command left behind, in its group or escaped from it, is terminated by the same policy,
        // after the result is out.
        tokio::spawn(async move {
            if !group_done && !group::terminate(&mut pgid.clone(), grace).await {
                tracing::warn!(%pgid, "process group still has members after SIGKILL; giving up on it");
            }
            guard.engine.inner.sweeper.job_finished(id);
            guard.release();
        });

        let (exit_code, signal) = match &status {
            Ok(status) => exit_code_of(*status),
            Err(_) => (-1, None),
        };
        let exit_code = if timed_out { protocol::EXIT_TIMED_OUT } else { exit_code };
        tracing::info!(
            id,
            program,
            cwd = %job.cwd.path().display(),
            exit_code,
            signal,
            timed_out,
            cancelled,
            duration_ms = duration.as_millis() as u64,
            stdout_bytes = stdout.total,
            stderr_bytes = stderr.total,
            "command finished"
        );
        Ok(Outcome { exit_code, signal, timed_out, cancelled, duration, stdout, stderr })
    }
}

/// The metrics' name for how a command that started ended.
fn outcome_of(outcome: &Outcome) -> CommandOutcome {
    if outcome.timed_out {
        CommandOutcome::TimedOut
    } else if outcome.cancelled {
        CommandOutcome::Cancelled
    } else if outcome.signal.is_some() {
        CommandOutcome::Signal
    } else if outcome.exit_code == 0 {
        CommandOutcome::Success
    } else {
        CommandOutcome::Failure
    }
}

async fn join_reader(reader: Option<tokio::task::JoinHandle<Captured>>) -> Captured {
    match reader {
        Some(handle) => handle.await.unwrap_or_default(),
        None => Captured::default(),
    }
}

/// The program to execute: a name without a `/` is looked up on the command's own PATH here, so that the spawn
/// can use `posix_spawn` (std falls back to `fork`, which copies the server's page tables, whenever the child's
/// PATH differs from ours and the program is not a path). Names with a `/` are left to the spawn, relative to the
/// command's working directory.
fn resolve_program(program: &OsString, job: &Job) -> Result<PathBuf, StartError> {
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::PermissionsExt;
    if program.as_bytes().contains(&b'/') {
        return Ok(PathBuf::from(program));
    }
    let path = job.env.iter().rev().find(|(name, _)| name == "PATH").map(|(_, value)| value.as_os_str());
    // A command without PATH gets the shell's usual default.
    let path = path.unwrap_or(std::ffi::OsStr::new("/usr/local/bin:/usr/bin:/bin"));
    let cwd = job.cwd.enter();
    for dir in std::env::split_paths(path) {
        let dir = if dir.as_os_str().is_empty() { cwd.clone() } else { cwd.join(dir) };
        let candidate = dir.join(program);
        if let Ok(meta) = std::fs::metadata(&candidate) {
            if meta.is_file() && meta.permissions().mode() & 0o111 != 0 {
                return Ok(candidate);
            }
        }
    }
    Err(cwd_problem(job).unwrap_or_else(|| not_found(&program.to_string_lossy())))
}

/// Why a spawn failed, in the user's terms: a missing working directory first, since that fails every program.
fn start_error(job: &Job, program: &str, err: &std::io::Error) -> StartError {
    if let Some(problem) = cwd_problem(job) {
        return problem;
    }
    match err.kind() {
        std::io::ErrorKind::NotFound => not_found(program),
        std::io::ErrorKind::PermissionDenied => StartError(format!("{program}: permission denied")),
        _ => StartError(format!("{program}: {err}")),
    }
}

fn cwd_problem(job: &Job) -> Option<StartError> {
    let cwd = job.cwd.path();
    if cwd.is_dir() {
        return None;
    }
    let what = if cwd.exists() { "is not a directory" } else { "does not exist" };
    Some(StartError(format!("working directory {} {what}", cwd.display())))
}

fn not_found(program: &str) -> StartError {
    StartError(format!("{program}: not found (is it installed and on PATH?)"))
}

/// Keeps a process group in the engine's live set until its members are gone; if the run is abandoned before
/// that (its task dropped at runtime shutdown), SIGKILLs the group so nothing outlives us unnoticed.
struct GroupGuard {
    engine: Engine,
    pgid: Pgid,
    released: bool,
}

impl GroupGuard {
    fn register(engine: Engine, pgid: Pgid, job: u64) -> Self {
        engine.inner.live_groups.lock().unwrap().insert(pgid, job);
        GroupGuard { engine, pgid, released: false }
    }

    fn release(mut self) {
        self.released = true;
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if !self.released {
            self.pgid.signal(Signal::SIGKILL);
        }
        self.engine.inner.live_groups.lock().unwrap().remove(&self.pgid);
    }
}
