//! The run pipeline: one job from its spawn to its outcome. Spawn (the leader in a group of its own, registered as
//! live), wait (for the exit, or else the timeout, idle timeout, cancellation or shutdown that stop the group),
//! drain (the pipes, for the drain window at most), clean up (what the command left behind), and the outcome.

use std::future::Future;
use std::os::fd::AsFd;
use std::pin::Pin;
use std::process::ExitStatus;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use process_group::{self as group, Members};
use protocol::StreamKind;
use tokio::io::AsyncRead;
use tokio::process::ChildStderr;
use tokio_util::sync::CancellationToken;

use super::capture::{self, LastOutput, Piped};
use super::live::{Active, GroupGuard};
use super::{daemons, exit_code_of, spawn, terminal, Capture, Job, Kept, Outcome, ProcessEngine, Sink, StartError};
use crate::metrics::CommandOutcome;

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

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;
    use crate::engine::{daemons, Collect, Policy};
    use crate::metrics::Metrics;
    use std::sync::OnceLock;
    use std::time::Duration;

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
