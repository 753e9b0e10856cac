//! The process engine: runs one argv in its own process group, enforces its timeout and cancellation, and hands
//! its output to the sinks its transport supplies ([`Capture`]). It knows nothing of HTTP or files: every transport
//! builds a [`Job`], calls [`ProcessEngine::run`] with its capture, and turns the [`Outcome`] into its own format.

mod capture;
pub mod daemons;
mod escaped;
mod spawn;
pub mod stdin;
pub mod terminal;

use std::collections::HashMap;
use std::ffi::OsString;
use std::future::Future;
use std::pin::Pin;
use std::process::ExitStatus;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use process_group::{self as group, Members, Pgid, Tagged};
use protocol::StreamKind;
use std::os::fd::AsFd;
use tokio::io::AsyncRead;
use tokio::process::ChildStderr;
use tokio_util::sync::CancellationToken;

pub use capture::{Capture, Collect, Collected, OutputChunk, Relay, Sink, READ_SIZE};
use capture::{LastOutput, Piped};

use crate::metrics::{CommandMetrics, CommandOutcome};
pub use spawn::StartError;

use crate::workspace::WorkDir;
pub use process_group::{become_subreaper, exit_code_of, reap_adopted_forever};

/// How the engine treats every command.
#[derive(Debug, Clone)]
pub struct Policy {
    /// Between SIGTERM and SIGKILL when a command is stopped (timeout, cancellation, shutdown).
    pub grace: Duration,
    /// After the leader exits, how long to keep reading pipes that a background descendant still holds open.
    pub drain: Duration,
    /// What becomes of the daemons commands leave behind.
    pub daemons: daemons::DaemonPolicy,
}

/// One command to run.
#[derive(Debug)]
pub struct Job {
    /// Program and arguments; never run through a shell.
    pub argv: Vec<OsString>,
    /// Working directory (already resolved, and opened and confined where the transport confines it).
    pub cwd: WorkDir,
    /// The complete environment of the command.
    pub env: Vec<(OsString, OsString)>,
    /// Bytes for stdin; `None` means `/dev/null` (unless `stdin_stream`).
    pub stdin: Option<Vec<u8>>,
    /// Stdin fed while the command runs (`stdin_stream`): wins over `stdin`. A TTY run's terminal input too.
    pub stdin_stream: Option<stdin::StdinStream>,
    /// Run the command on a pseudo-terminal (a TTY run): stdin, stdout and stderr on it, its output one stream
    /// (stdout's), its input `stdin_stream`.
    pub terminal: Option<terminal::TerminalJob>,
    pub timeout: Duration,
    /// Stop the command, as timed out, once no output byte (stdout or stderr) arrived for this long.
    pub idle_timeout: Option<Duration>,
    /// Filled with the command's process group once it started, for a transport that signals it (a named run).
    pub group: Option<Arc<OnceLock<Pgid>>>,
    /// Cancelled when the command's output must be taken as fast as it comes: a stop began (timeout, idle
    /// timeout, cancellation, shutdown), or its leader exited and then its deadline passed or the shutdown came
    /// while its pipes were still being read. A transport that paces its reading of the output (a named run, for
    /// its followers) stops pacing then, or the command's end would wait on a reader.
    pub drain_now: Option<CancellationToken>,
    /// End the daemons this command leaves behind even when the server keeps daemons (the request's
    /// `"daemons": "end"`).
    pub end_daemons: bool,
}

/// How a command ended, and what its capture kept of each pipe (`K`: the capture's [`Sink::Kept`]).
#[derive(Debug, Clone)]
pub struct Outcome<K> {
    /// The exit code; 128+N when a signal ended it; 124 when it timed out.
    pub exit_code: i32,
    /// The signal that ended the leader, if one did.
    pub signal: Option<i32>,
    pub timed_out: bool,
    /// Set (with `timed_out`) when the idle timeout ended it: the idle timeout it had.
    pub idle_timed_out: Option<Duration>,
    /// Stopped because its transport asked (client gone, server shutting down).
    pub cancelled: bool,
    pub duration: Duration,
    /// Every byte each pipe carried, kept or not.
    pub stdout_bytes: u64,
    pub stderr_bytes: u64,
    pub stdout: K,
    pub stderr: K,
    /// With a streamed stdin: the bytes the command took from it (see [`stdin::Fed::consumed`]).
    pub stdin_consumed: Option<u64>,
}

/// Runs commands. Cheap to clone; every clone shares the set of live process groups and the shutdown switch.
#[derive(Clone, Debug)]
pub struct ProcessEngine {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    policy: Policy,
    /// Process group → job id of every command not yet cleaned up.
    live_groups: Mutex<HashMap<Pgid, u64>>,
    shutdown: CancellationToken,
    /// When [`ProcessEngine::shutdown`] was called: the grace period of everything it stops counts from here.
    shutdown_at: OnceLock<tokio::time::Instant>,
    sweeper: Arc<escaped::Sweeper>,
    sweeper_started: std::sync::Once,
    metrics: CommandMetrics,
}

/// How long [`ProcessEngine::finish_shutdown`] waits for SIGKILLed processes to disappear: short, since the whole
/// shutdown must fit in the grace period plus a second.
pub const SHUTDOWN_KILL_WAIT: Duration = Duration::from_millis(400);

/// Job ids are unique in the process, not per engine: they tag descendants (see `escaped`), and tests run several
/// engines in one process.
static NEXT_JOB: AtomicU64 = AtomicU64::new(1);

/// How the wait for a command's leader ended.
struct LeaderEnd {
    status: std::io::Result<ExitStatus>,
    timed_out: bool,
    idle_timed_out: bool,
    /// Its transport or the shutdown stopped it.
    cancelled: bool,
    /// The policy already ran on its group (a timeout or a cancellation).
    group_stopped: bool,
}

impl LeaderEnd {
    fn exited(status: std::io::Result<ExitStatus>) -> Self {
        LeaderEnd { status, timed_out: false, idle_timed_out: false, cancelled: false, group_stopped: false }
    }
}

/// Why the engine stopped a leader that had not exited.
#[derive(PartialEq, Eq)]
enum Stop {
    TimedOut,
    IdleTimedOut,
    Cancelled,
}

impl ProcessEngine {
    /// An engine that counts its commands into `metrics`.
    pub fn new(policy: Policy, metrics: CommandMetrics) -> Self {
        let daemons = daemons::Daemons::new(policy.daemons.clone(), metrics.clone());
        ProcessEngine {
            inner: Arc::new(Inner {
                policy,
                live_groups: Mutex::new(HashMap::new()),
                shutdown: CancellationToken::new(),
                shutdown_at: OnceLock::new(),
                sweeper: Arc::new(escaped::Sweeper::new(daemons)),
                sweeper_started: std::sync::Once::new(),
                metrics,
            }),
        }
    }

    /// How many process groups are alive (running commands and leftovers being terminated).
    pub fn live_groups(&self) -> usize {
        self.inner.live_groups.lock().unwrap().len()
    }

    /// Stops every running command by the policy, and refuses none: transports stop accepting work themselves.
    /// Escapees of running commands and of finished jobs not yet swept get their SIGTERM now too, so that one grace
    /// period, counted from here, covers everything; [`ProcessEngine::finish_shutdown`] completes the policy. Each process
    /// gets one SIGTERM: members of a live group get theirs from their command's own termination, and escapees
    /// being swept already had theirs.
    pub fn shutdown(&self) {
        let _ = self.inner.shutdown_at.set(tokio::time::Instant::now());
        self.inner.shutdown.cancel();
        let (groups, mut jobs): (Vec<i32>, Vec<u64>) = {
            let live = self.inner.live_groups.lock().unwrap();
            (live.keys().map(|pgid| pgid.get()).collect(), live.values().copied().collect())
        };
        jobs.extend(self.inner.sweeper.pending());
        // Kept daemons end with the commands, within the same grace.
        let (daemon_jobs, sessions) = self.inner.sweeper.end_every_daemon();
        jobs.extend(daemon_jobs);
        let mut escapees =
            Tagged::new(jobs.into_iter().map(escaped::tag).collect()).with_sessions(sessions).outside_groups(groups);
        group::ask_to_stop(&mut escapees);
    }

    /// How many daemons (sessions commands left behind) the server keeps now.
    pub fn daemons_kept(&self) -> usize {
        self.inner.sweeper.daemons().len()
    }

    /// Completes the shutdown before the process exits: waits until the grace period that [`ProcessEngine::shutdown`]
    /// started has passed for whatever still carries the tag of an unfinished job (commands, what escaped them,
    /// sweeps under way), SIGKILLs what is left, and gives up on what survives SIGKILL for [`SHUTDOWN_KILL_WAIT`].
    /// Returns within the grace period plus that wait, counted from [`ProcessEngine::shutdown`].
    pub async fn finish_shutdown(&self) {
        let started = *self.inner.shutdown_at.get_or_init(tokio::time::Instant::now);
        let mut unfinished = self.unfinished();
        if !group::wait_then_kill(&mut unfinished, started + self.inner.policy.grace, SHUTDOWN_KILL_WAIT).await {
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

    /// Whatever carries the tag of a job that is running, or finished but not yet swept, and the kept daemons being
    /// ended.
    fn unfinished(&self) -> Tagged {
        let mut jobs: Vec<u64> = self.inner.live_groups.lock().unwrap().values().copied().collect();
        let (swept, sessions) = self.inner.sweeper.unfinished();
        jobs.extend(swept);
        Tagged::new(jobs.into_iter().map(escaped::tag).collect()).with_sessions(sessions)
    }

    /// Runs `job` to its end. `cancel` stops it early (TERM → grace → KILL to its whole group), as does
    /// [`ProcessEngine::shutdown`]. Returns once the leader is reaped and the output is read; leftover members of the group
    /// are terminated in the background by the same policy.
    ///
    /// Transports should run this in its own task, so that the timeout is enforced even while the transport is
    /// blocked on a slow peer, and so that dropping the transport's future (a client gone) can only cancel, never
    /// abandon, a command.
    pub async fn run<C: Capture>(
        &self,
        job: Job,
        capture: C,
        cancel: CancellationToken,
    ) -> Result<Outcome<Kept<C>>, StartError> {
        let _running = self.inner.metrics.running();
        let _active = Active::new(&self.inner.sweeper);
        let result = self.run_job(job, capture, cancel).await;
        let metrics = &self.inner.metrics;
        match &result {
            Ok(outcome) => {
                let ran = (outcome.duration, outcome.stdout_bytes, outcome.stderr_bytes);
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

    async fn run_job<C: Capture>(
        &self,
        mut job: Job,
        capture: C,
        cancel: CancellationToken,
    ) -> Result<Outcome<Kept<C>>, StartError> {
        let id = NEXT_JOB.fetch_add(1, Ordering::Relaxed);
        self.inner.sweeper_started.call_once(|| {
            tokio::spawn(self.inner.sweeper.clone().run(self.inner.policy.grace, self.inner.metrics.clone()));
        });
        let program = job.argv.first().map(|p| p.to_string_lossy().into_owned()).unwrap_or_default();
        let started = Instant::now();

        let last_output = Arc::new(LastOutput::new());
        let (mut running, mut readers) = self.spawn(id, &mut job, &program, capture, &last_output)?;
        let deadline = tokio::time::Instant::now() + job.timeout;
        // The pipes are read while the leader is waited for, in this same task (see `Readers`).
        let mut read = None;
        let end = {
            let waiting = self.wait(&mut running.leader, &job, deadline, &last_output, &cancel);
            tokio::pin!(waiting);
            loop {
                tokio::select! {
                    end = &mut waiting => break end,
                    both = &mut readers.reading, if read.is_none() => read = Some(both),
                }
            }
        };
        let duration = started.elapsed();
        // The command has ended: nothing more goes into its stdin, and what it took is counted now.
        let stdin_consumed = match running.feeder.take() {
            Some(feeder) => feeder.finish().await,
            None => None,
        };
        let (stdout, stderr) = match read {
            Some(both) => both,
            None => self.drain(readers, &job, deadline).await,
        };
        // Its output is read (to the terminal's end, or the drain window's): the transport's handle lets go of it.
        if let Some(terminal) = &job.terminal {
            terminal.handle.detach();
        }
        // Its daemons may be kept only if it ended by itself and nobody asked to end them (see `daemons`).
        let may_keep = !end.group_stopped && !job.end_daemons;
        self.clean_up_after(running, end.group_stopped, may_keep);

        let (exit_code, signal) = match &end.status {
            Ok(status) => exit_code_of(*status),
            Err(_) => (-1, None),
        };
        let LeaderEnd { timed_out, idle_timed_out, cancelled, .. } = end;
        let idle_timed_out = if idle_timed_out { job.idle_timeout } else { None };
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
        Ok(Outcome {
            exit_code,
            signal,
            timed_out,
            idle_timed_out,
            cancelled,
            duration,
            stdout_bytes: stdout.total,
            stderr_bytes: stderr.total,
            stdout: stdout.kept,
            stderr: stderr.kept,
            stdin_consumed,
        })
    }

    /// Spawn (see [`spawn`]): the leader in a new process group, registered as live; its stdin fed in the
    /// background (taken from `job`); one reader per output pipe, into the capture's sinks.
    fn spawn<C: Capture>(
        &self,
        id: u64,
        job: &mut Job,
        program: &str,
        capture: C,
        last_output: &Arc<LastOutput>,
    ) -> Result<(Running, Readers<Kept<C>>), StartError> {
        let spawn::Spawned { mut leader, terminal } = spawn::start_leader(id, job, program)?;
        let guard = GroupGuard::register(self.clone(), leader.pgid(), id);
        if let Some(group) = &job.group {
            let _ = group.set(leader.pgid());
        }
        let stop = CancellationToken::new();
        let Some(spawn::SpawnedTerminal { master, slave_path }) = terminal else {
            // What no daemon the command leaves may hold: its pipes (before they are taken and, later, closed).
            let descriptors = spawn::pipe_identities(leader.child());
            let feeder = spawn::feed_stdin(job, &mut leader);
            let (stdout, stderr) = (leader.child().stdout.take(), leader.child().stderr.take());
            let reading = Box::pin(read_both(stdout, stderr, capture, stop.clone(), last_output.clone()));
            return Ok((Running { id, leader, guard, feeder, descriptors, session: None }, Readers { reading, stop }));
        };
        // A terminal: one output stream (stdout's), the input written into the master, and the transport's handle
        // (a duplicate of the master) for resizes.
        if let (Some(handle), Ok(master)) = (&job.terminal, master.as_fd().try_clone_to_owned()) {
            handle.handle.attach(master);
        }
        let (output, input) = master.into_split();
        let feeder = job.stdin_stream.take().map(|stream| spawn::Feeder::terminal(stream, input));
        let output = Some(terminal::TerminalOutput(output));
        let reading = Box::pin(read_both(output, None::<ChildStderr>, capture, stop.clone(), last_output.clone()));
        // Its session is its own (pid = sid): no process of it is a daemon to keep, nor one holding its terminal.
        let session = Some(leader.pgid().get());
        Ok((Running { id, leader, guard, feeder, descriptors: vec![slave_path], session }, Readers { reading, stop }))
    }

    /// Wait: for the leader to exit, or else its timeout, its idle timeout (no output for that long), its
    /// cancellation or the shutdown, which stop its whole group by the policy (TERM → grace → KILL).
    async fn wait(
        &self,
        leader: &mut group::Leader,
        job: &Job,
        deadline: tokio::time::Instant,
        last_output: &LastOutput,
        cancel: &CancellationToken,
    ) -> LeaderEnd {
        let grace = self.inner.policy.grace;
        let idle = async {
            let Some(idle) = job.idle_timeout else { return std::future::pending().await };
            // Sleeps until the idle limit counted from the last output; output since then moves the limit on.
            loop {
                // An idle timeout too far off to count is none.
                let Some(until) = last_output.at().checked_add(idle) else { return std::future::pending().await };
                if until <= Instant::now() {
                    return;
                }
                tokio::time::sleep_until(until.into()).await;
            }
        };
        let stop = tokio::select! {
            status = leader.wait() => return LeaderEnd::exited(status),
            () = tokio::time::sleep_until(deadline) => Stop::TimedOut,
            () = idle => Stop::IdleTimedOut,
            () = cancel.cancelled() => Stop::Cancelled,
            () = self.inner.shutdown.cancelled() => Stop::Cancelled,
        };
        job.drain_now.iter().for_each(CancellationToken::cancel);
        // The leader may have exited by itself before the stop came, its exit not yet seen here: then it was not
        // stopped, and the outcome says so (what is left of its group is ended after it, as after any exit).
        if let Ok(Some(status)) = leader.child().try_wait() {
            return LeaderEnd::exited(Ok(status));
        }
        let status = group::term_then_kill_group(leader, grace).await;
        LeaderEnd {
            status,
            timed_out: stop != Stop::Cancelled,
            idle_timed_out: stop == Stop::IdleTimedOut,
            cancelled: stop == Stop::Cancelled,
            group_stopped: true,
        }
    }

    /// Drain: pipes held open by a background descendant must not hold the result, so once the leader is gone
    /// they are read for the drain window at most, then no more. What was read still goes to the capture, which may
    /// be slow to take it (a paced transport): at the command's deadline, or at the shutdown, it is told to take it
    /// at once ([`Job::drain_now`]), so nothing a transport waits for holds the end past them.
    async fn drain<K>(&self, readers: Readers<K>, job: &Job, deadline: tokio::time::Instant) -> BothPipes<K> {
        let Readers { mut reading, stop } = readers;
        let window = tokio::time::sleep(self.inner.policy.drain);
        tokio::pin!(window);
        let hurry = async {
            tokio::select! {
                () = tokio::time::sleep_until(deadline) => {}
                () = self.inner.shutdown.cancelled() => {}
            }
            job.drain_now.iter().for_each(CancellationToken::cancel);
        };
        tokio::pin!(hurry);
        let mut hurried = job.drain_now.is_none();
        loop {
            tokio::select! {
                both = &mut reading => return both,
                () = &mut window, if !stop.is_cancelled() => stop.cancel(),
                () = &mut hurry, if !hurried => hurried = true,
            }
        }
    }

    /// Whatever the command left behind, in its group (unless the wait already stopped it) or escaped from it, is
    /// terminated by the same policy, in the background: the result does not wait for it.
    fn clean_up_after(&self, running: Running, group_stopped: bool, may_keep: bool) {
        let Running { id, leader, guard, descriptors, session, .. } = running;
        let pgid = leader.pgid();
        let grace = self.inner.policy.grace;
        // The leader (reaped) is let go only now, as before the split: after its pipes were drained.
        drop(leader);
        let finished = move |guard: GroupGuard| {
            let finished = daemons::Finished { job: id, may_keep, descriptors, session };
            guard.engine.inner.sweeper.job_finished(finished);
            guard.release();
        };
        // The common case, a group that ended with its leader, is settled here and now: the same first look as
        // `term_then_kill` (reap, then is it empty?), without a task whose start would wake another worker thread while
        // the reply is being made.
        let mut group = pgid;
        if group_stopped || {
            group.reap();
            group.is_empty()
        } {
            finished(guard);
            return;
        }
        tokio::spawn(async move {
            if !group::term_then_kill(&mut group, grace).await {
                tracing::warn!(%pgid, "process group still has members after SIGKILL; giving up on it");
            }
            finished(guard);
        });
    }
}

/// The metrics' name for how a command that started ended.
fn outcome_of<K>(outcome: &Outcome<K>) -> CommandOutcome {
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

/// A started command: its leader, its place in the engine's live set, the feeder of a streamed stdin, and what its
/// descriptors were (for the daemon rule).
struct Running {
    id: u64,
    leader: group::Leader,
    guard: GroupGuard,
    feeder: Option<spawn::Feeder>,
    descriptors: Vec<String>,
    /// A terminal run's own session (its leader's pid).
    session: Option<i32>,
}

/// A command counted as running for `--daemon-idle` until dropped (also when its run is abandoned).
struct Active(Arc<escaped::Sweeper>);

impl Active {
    fn new(sweeper: &Arc<escaped::Sweeper>) -> Self {
        sweeper.daemons().command_started();
        Active(sweeper.clone())
    }
}

impl Drop for Active {
    fn drop(&mut self) {
        self.0.daemons().command_ended();
    }
}

/// The reading of a command's pipes, and the switch that ends it early.
///
/// *Decision:* the pipes are read by a future that the command's own task polls next to the wait for its leader,
/// not by tasks of their own. A task per pipe cost every command two spawns and two join wake-ups, each of which
/// can wake the other worker thread: measured, that was a large part of the time between a short command's exit
/// and its reply (see BENCHMARKS.md, P1). Both pipes still progress independently (`join`), and in the stream mode
/// a reader that waits on a slow client holds up neither the other pipe nor the wait.
struct Readers<K> {
    reading: Pin<Box<dyn Future<Output = BothPipes<K>> + Send>>,
    stop: CancellationToken,
}

/// Stdout and stderr, read to their ends.
type BothPipes<K> = (Piped<K>, Piped<K>);

/// What a capture's sinks keep of one pipe.
pub type Kept<C> = <<C as Capture>::Sink as Sink>::Kept;

/// Reads both pipes (those the command has; a terminal run's one output is stdout's) to their ends, together.
async fn read_both<C: Capture, O: AsyncRead + Unpin + Send, E: AsyncRead + Unpin + Send>(
    stdout: Option<O>,
    stderr: Option<E>,
    capture: C,
    stop: CancellationToken,
    last_output: Arc<LastOutput>,
) -> BothPipes<Kept<C>> {
    // Each reader owns its sink and drops it when it ends: no stream sender is left behind to hold the stream open.
    let stdout = read(stdout, capture.sink(StreamKind::Stdout), stop.clone(), last_output.clone());
    let stderr = read(stderr, capture.sink(StreamKind::Stderr), stop, last_output);
    drop(capture);
    tokio::join!(stdout, stderr)
}

async fn read<R: AsyncRead + Unpin, S: Sink>(
    pipe: Option<R>,
    sink: S,
    stop: CancellationToken,
    last_output: Arc<LastOutput>,
) -> Piped<S::Kept> {
    match pipe {
        Some(pipe) => capture::read_pipe(pipe, sink, stop, last_output).await,
        None => Piped { total: 0, kept: sink.finish() },
    }
}

/// Keeps a process group in the engine's live set until its members are gone; if the run is abandoned before
/// that (its task dropped at runtime shutdown), SIGKILLs the group so nothing outlives us unnoticed.
struct GroupGuard {
    engine: ProcessEngine,
    pgid: Pgid,
    released: bool,
}

impl GroupGuard {
    fn register(engine: ProcessEngine, pgid: Pgid, job: u64) -> Self {
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

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;
    use crate::metrics::Metrics;

    /// Whether process `pid` has exited and waits to be reaped.
    fn is_zombie(pid: i32) -> bool {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .is_ok_and(|stat| stat.rsplit_once(')').is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')))
    }

    /// A stop asked for once the leader has exited by itself, before the engine noticed, is not what ended it: the
    /// outcome is its own exit, not a cancellation (a DELETE racing a normal exit recorded `cancelled` with exit
    /// code 0). On a current-thread runtime the engine cannot notice the exit while this test holds the thread, so
    /// the cancellation always comes first.
    #[tokio::test]
    async fn a_stop_after_the_leader_exited_by_itself_is_not_its_end() {
        let engine = ProcessEngine::new(
            Policy {
                grace: Duration::from_secs(5),
                drain: Duration::from_millis(50),
                daemons: daemons::DaemonPolicy { keep: false, max: 0, idle: None },
            },
            Metrics::default().commands().clone(),
        );
        for round in 0..10 {
            let group = Arc::new(OnceLock::new());
            let job = Job {
                argv: vec!["sh".into(), "-c".into(), "exit 3".into()],
                cwd: PathBuf::from("/").into(),
                env: vec![("PATH".into(), std::env::var_os("PATH").unwrap_or_default())],
                stdin: None,
                stdin_stream: None,
                terminal: None,
                timeout: Duration::from_secs(60),
                idle_timeout: None,
                group: Some(group.clone()),
                drain_now: None,
                end_daemons: false,
            };
            let cancel = CancellationToken::new();
            let run = tokio::spawn({
                let (engine, cancel) = (engine.clone(), cancel.clone());
                async move { engine.run(job, Collect { cap: 64 }, cancel).await }
            });
            // The task started the command and waits on it.
            while group.get().is_none() {
                tokio::task::yield_now().await;
            }
            let pid = group.get().unwrap().get();
            while !is_zombie(pid) {
                std::thread::sleep(Duration::from_millis(1));
            }
            cancel.cancel();
            let outcome = run.await.unwrap().unwrap();
            assert_eq!((outcome.exit_code, outcome.cancelled, outcome.signal), (3, false, None), "round {round}");
        }
    }
}
