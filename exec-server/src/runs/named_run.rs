//! One named run: what it runs, its output logs, how it ended, and who is reading it.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use bytes::Bytes;
use process_group::Pgid;
use protocol::{RunId, RunInfo, RunState, StoppedBy, StreamKind};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::input::RunInput;
use super::kept_argv::KeptArgv;
use super::log::{Found, OutputLog, Pending, Read, MEMORY_PER_STREAM};
use crate::ending::Ending;
use crate::engine::terminal::TerminalHandle;

/// A named run, shared by the task that runs it, its readers and the registry.
#[derive(Debug)]
pub struct NamedRun {
    pub id: RunId,
    /// Its command: a digest to compare with, and the argv cut for people.
    pub command: KeptArgv,
    pub cwd: PathBuf,
    pub started_unix_ms: u64,
    pub started: Instant,
    /// Stops the command by the policy (DELETE, the reattach window).
    pub cancel: CancellationToken,
    /// The command's process group once it started (for signals).
    pub group: Arc<OnceLock<Pgid>>,
    /// Its stdin, when it asked for `stdin_stream`: set before the run is started.
    input: OnceLock<RunInput>,
    /// Its terminal, when it asked for `tty`: set before the run is started.
    terminal: OnceLock<Arc<TerminalHandle>>,
    /// Bumped on every change a reader may wait for (output, the end).
    changed: watch::Sender<u64>,
    /// Bumped when a follower moves or leaves: the command may go on (see [`NamedRun::paced`]).
    followed: watch::Sender<u64>,
    inner: Mutex<Inner>,
}

#[derive(Debug)]
struct Inner {
    stdout: OutputLog,
    stderr: OutputLog,
    end: Option<Ending>,
    /// When it ended (for retention).
    ended_at: Option<Instant>,
    attached: u32,
    /// Bumped at every attach: a window timer started before it no longer applies.
    epoch: u64,
    /// Who cancelled it and their message, when someone did (the end then says so).
    cancel_reason: Option<(StoppedBy, String)>,
    /// A write to the log failed (disk full): said in the end's error.
    log_error: Option<String>,
    /// The readers following the stream, and the offsets they have taken (see [`NamedRun::paced`]).
    followers: Vec<(u64, [u64; 2])>,
    next_follower: u64,
}

impl Inner {
    fn log(&self, kind: StreamKind) -> &OutputLog {
        match kind {
            StreamKind::Stdout => &self.stdout,
            StreamKind::Stderr => &self.stderr,
        }
    }

    fn log_mut(&mut self, kind: StreamKind) -> &mut OutputLog {
        match kind {
            StreamKind::Stdout => &mut self.stdout,
            StreamKind::Stderr => &mut self.stderr,
        }
    }

    /// A write to the log failed: said once in the end's error.
    fn keep_error(&mut self, id: &RunId, err: &std::io::Error) {
        tracing::warn!(run = %id, error = %err, "cannot keep a named run's output");
        self.log_error.get_or_insert_with(|| format!("the server could not keep all output: {err}"));
    }
}

impl NamedRun {
    pub fn new(id: RunId, command: KeptArgv, cwd: PathBuf, stdout: OutputLog, stderr: OutputLog) -> Self {
        let started_unix_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        NamedRun {
            id,
            command,
            cwd,
            started_unix_ms,
            started: Instant::now(),
            cancel: CancellationToken::new(),
            group: Arc::default(),
            input: OnceLock::new(),
            terminal: OnceLock::new(),
            changed: watch::Sender::new(0),
            inner: Mutex::new(Inner {
                stdout,
                stderr,
                end: None,
                ended_at: None,
                attached: 0,
                epoch: 0,
                cancel_reason: None,
                log_error: None,
                followers: Vec::new(),
                next_follower: 0,
            }),
            followed: watch::Sender::new(0),
        }
    }

    fn notify(&self) {
        self.changed.send_modify(|generation| *generation += 1);
    }

    /// A receiver that wakes at every change.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }

    /// Appends output to its stream's log and tells its readers (who take it from memory until it is written).
    /// Returns the spill-file writes it needs, if the stream spilled: the run's [`super::SpillWriter`] makes them,
    /// then [`NamedRun::written`]. Called by the run's only writer, its task.
    pub fn append(&self, kind: StreamKind, chunk: Bytes) -> Option<Pending> {
        let pending = {
            let mut inner = self.inner.lock().unwrap();
            if let Err(err) = inner.log_mut(kind).append(chunk) {
                inner.keep_error(&self.id, &err);
            }
            inner.log_mut(kind).take_writes()
        };
        self.notify();
        (!pending.is_empty()).then_some(pending)
    }

    /// The writes of `pending` were made (or failed: said in the end's error).
    pub fn written(&self, kind: StreamKind, pending: &Pending, result: std::io::Result<()>) {
        let mut inner = self.inner.lock().unwrap();
        inner.log_mut(kind).written(pending.end(), result.is_ok());
        if let Err(err) = result {
            inner.keep_error(&self.id, &err);
        }
    }

    /// Waits while a reader following the run's stream is more than [`PACE_LAG`] behind it on either stream, so
    /// that the command goes at the pace of its live readers, as an unnamed stream does (and none of them ever
    /// loses bytes to the log's cap). Not once the run is cancelled, nor once `drain_now` says the output must be
    /// taken at once (a stop began: timeout, idle timeout, cancellation, shutdown; or the command's leader exited
    /// and its deadline or the shutdown came while its pipes drained, see [`crate::engine::Job::drain_now`]): the
    /// command must then drain and end whatever a follower does, so that one which stops reading cannot keep the
    /// run, its slot or its other readers waiting past its timeout. And not while nobody follows it: then the log
    /// takes the output as fast as it comes.
    pub async fn paced(&self, progress: &mut watch::Receiver<u64>, drain_now: &CancellationToken) {
        loop {
            progress.borrow_and_update();
            let behind = {
                let inner = self.inner.lock().unwrap();
                let totals = [inner.stdout.total(), inner.stderr.total()];
                inner.followers.iter().any(|(_, at)| (0..2).any(|i| totals[i].saturating_sub(at[i]) > PACE_LAG))
            };
            if !behind || self.cancel.is_cancelled() || drain_now.is_cancelled() {
                return;
            }
            tokio::select! {
                _ = progress.changed() => {}
                () = self.cancel.cancelled() => return,
                () = drain_now.cancelled() => return,
            }
        }
    }

    /// A receiver that wakes whenever a follower moves or leaves (for [`NamedRun::paced`]).
    pub fn follower_progress(&self) -> watch::Receiver<u64> {
        self.followed.subscribe()
    }

    /// A reader that follows the run's stream from `offsets`: until the returned guard is dropped, the command
    /// waits for it (see [`NamedRun::paced`]).
    pub fn follow(self: &Arc<Self>, offsets: [u64; 2]) -> Follower {
        let mut inner = self.inner.lock().unwrap();
        inner.next_follower += 1;
        let id = inner.next_follower;
        inner.followers.push((id, offsets));
        Follower { run: self.clone(), id }
    }

    /// Up to `max` bytes of stream `kind` from `offset`, or the gap it is in; the spill file is read outside the
    /// lock (and read again from the new place if the rolling tail overtook it meanwhile).
    pub fn read(&self, kind: StreamKind, offset: u64, max: usize) -> std::io::Result<Read> {
        loop {
            let file = match self.inner.lock().unwrap().log(kind).read(offset, max)? {
                Found::Now(read) => return Ok(read),
                Found::File(file) => file,
            };
            let bytes = file.read()?;
            if self.inner.lock().unwrap().log(kind).still_kept(offset) {
                return Ok(Read::Bytes(bytes));
            }
        }
    }

    /// Bytes stream `kind` produced so far.
    pub fn total(&self, kind: StreamKind) -> u64 {
        self.inner.lock().unwrap().log(kind).total()
    }

    /// Both streams' totals and the end, if the run has one.
    pub fn progress(&self) -> ([u64; 2], Option<Ending>) {
        let inner = self.inner.lock().unwrap();
        ([inner.stdout.total(), inner.stderr.total()], inner.end.clone())
    }

    /// Gives the run its streamed stdin (before its command starts; a second one is ignored).
    pub fn open_input(&self, input: RunInput) {
        let _ = self.input.set(input);
    }

    /// Its streamed stdin, if it has one.
    pub fn input(&self) -> Option<&RunInput> {
        self.input.get()
    }

    /// Gives the run its terminal (before its command starts; a second one is ignored).
    pub fn open_terminal(&self, terminal: Arc<TerminalHandle>) {
        let _ = self.terminal.set(terminal);
    }

    /// Its terminal, if it runs on one.
    pub fn terminal(&self) -> Option<&TerminalHandle> {
        self.terminal.get().map(Arc::as_ref)
    }

    /// Records the end; a cancellation by someone carries their cause and message.
    pub fn finish(&self, mut end: Ending) {
        if let Some(input) = self.input.get() {
            input.run_ended();
        }
        {
            let mut inner = self.inner.lock().unwrap();
            if end.state == RunState::Cancelled {
                if let Some((by, reason)) = inner.cancel_reason.clone() {
                    end.stopped_by = Some(by);
                    end.error = Some(reason);
                }
            }
            if let Some(log_error) = inner.log_error.clone() {
                end.error = Some(match end.error {
                    Some(error) => format!("{error}; {log_error}"),
                    None => log_error,
                });
            }
            inner.end = Some(end);
            inner.ended_at = Some(Instant::now());
            inner.stdout.seal();
            inner.stderr.seal();
        }
        self.notify();
    }

    /// Cancels it by the policy, saying who (`by`) and why (the first reason wins).
    pub fn cancel_because(&self, by: StoppedBy, reason: String) {
        self.inner.lock().unwrap().cancel_reason.get_or_insert((by, reason));
        self.cancel.cancel();
    }

    pub fn end(&self) -> Option<Ending> {
        self.inner.lock().unwrap().end.clone()
    }

    pub fn ended_at(&self) -> Option<Instant> {
        self.inner.lock().unwrap().ended_at
    }

    /// A reader arrives; the returned guard leaves when dropped. While any is attached the reattach window does
    /// not run.
    pub fn attach(self: &Arc<Self>, window: Duration) -> Attachment {
        let mut inner = self.inner.lock().unwrap();
        inner.attached += 1;
        inner.epoch += 1;
        Attachment { run: self.clone(), window }
    }

    /// The last reader left a run still running: unless one attaches within `window`, stop it.
    fn detached(self: &Arc<Self>, window: Duration) {
        let epoch = {
            let mut inner = self.inner.lock().unwrap();
            inner.attached -= 1;
            if inner.attached > 0 || inner.end.is_some() {
                return;
            }
            inner.epoch
        };
        let run = self.clone();
        let expire = async move {
            tokio::select! {
                () = tokio::time::sleep(window) => {}
                () = run.cancel.cancelled() => return,
            }
            let still_alone = {
                let inner = run.inner.lock().unwrap();
                inner.attached == 0 && inner.epoch == epoch && inner.end.is_none()
            };
            if still_alone {
                tracing::info!(run = %run.id, window_s = window.as_secs_f64(), "no client reattached: stopping the run");
                run.cancel_because(
                    StoppedBy::ReattachWindow,
                    format!("no client reattached within {} s; the command was stopped", window.as_secs_f64()),
                );
            }
        };
        // Outside a runtime (a test dropping the last guard after its runtime) there is nothing left to stop.
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            handle.spawn(expire);
        }
    }

    /// What `GET /runs/{id}` shows.
    pub fn info(&self) -> RunInfo {
        let inner = self.inner.lock().unwrap();
        let end = inner.end.as_ref();
        let duration = end.map_or_else(|| self.started.elapsed(), |end| end.duration);
        RunInfo {
            id: self.id.clone(),
            argv: self.command.shown().to_vec(),
            cwd: self.cwd.display().to_string(),
            started_unix_ms: self.started_unix_ms,
            state: end.map_or(RunState::Running, |end| end.state),
            exit_code: end.map(|end| end.exit_code),
            signal: end.and_then(|end| end.signal),
            error: end.and_then(|end| end.error.clone()),
            stdout_bytes: inner.stdout.total(),
            stderr_bytes: inner.stderr.total(),
            dropped_bytes: inner.stdout.dropped() + inner.stderr.dropped(),
            attached: inner.attached,
            duration_ms: u64::try_from(duration.as_millis()).unwrap_or(u64::MAX),
            stopped_by: end.and_then(|end| end.stopped_by),
            tty: self.terminal.get().is_some(),
        }
    }
}

/// How far a follower may be behind the stream before the command waits for it: with the next chunk (up to
/// `READ_SIZE`, 64 KiB) it is then at most the memory a stream keeps of its latest chunks behind, so a follower is
/// always served from memory, never from the spill file.
pub const PACE_LAG: u64 = MEMORY_PER_STREAM - 64 * 1024;

/// A reader following a run's stream (see [`NamedRun::follow`]).
#[derive(Debug)]
pub struct Follower {
    run: Arc<NamedRun>,
    id: u64,
}

impl Follower {
    /// The reader has taken the stream up to `offsets`.
    pub fn at(&self, offsets: [u64; 2]) {
        {
            let mut inner = self.run.inner.lock().unwrap();
            if let Some((_, at)) = inner.followers.iter_mut().find(|(id, _)| *id == self.id) {
                *at = offsets;
            }
        }
        self.run.followed.send_modify(|generation| *generation += 1);
    }
}

impl Drop for Follower {
    fn drop(&mut self) {
        self.run.inner.lock().unwrap().followers.retain(|(id, _)| *id != self.id);
        self.run.followed.send_modify(|generation| *generation += 1);
    }
}

/// A reader of a run; dropping it detaches (and may start the reattach window).
#[derive(Debug)]
pub struct Attachment {
    run: Arc<NamedRun>,
    window: Duration,
}

impl Drop for Attachment {
    fn drop(&mut self) {
        self.run.detached(self.window);
    }
}
