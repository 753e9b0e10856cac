//! One named run: what it runs, its output logs, how it ended, and who is reading it.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use process_group::Pgid;
use protocol::{RunId, RunInfo, RunState, StoppedBy, StreamKind};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::log::StreamLog;

/// How a run ended.
#[derive(Debug, Clone)]
pub struct RunEnd {
    pub state: RunState,
    /// `None` for a run that never started.
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub timed_out: bool,
    /// The message of the error frame and of the reply's `error`.
    pub error: Option<String>,
    /// What stopped it, if something did: its exit frame's and `RunInfo`'s `stopped_by`.
    pub stopped_by: Option<StoppedBy>,
    pub duration: Duration,
}

/// A named run, shared by the task that runs it, its readers and the registry.
#[derive(Debug)]
pub struct Run {
    pub id: RunId,
    pub argv: Vec<String>,
    pub cwd: PathBuf,
    pub started_unix_ms: u64,
    pub started: Instant,
    /// Stops the command by the policy (DELETE, the reattach window).
    pub cancel: CancellationToken,
    /// The command's process group once it started (for signals).
    pub group: Arc<OnceLock<Pgid>>,
    /// Bumped on every change a reader may wait for (output, the end).
    changed: watch::Sender<u64>,
    inner: Mutex<Inner>,
}

#[derive(Debug)]
struct Inner {
    stdout: StreamLog,
    stderr: StreamLog,
    end: Option<RunEnd>,
    /// When it ended (for retention).
    ended_at: Option<Instant>,
    attached: u32,
    /// Bumped at every attach: a window timer started before it no longer applies.
    epoch: u64,
    /// Who cancelled it and their message, when someone did (the end then says so).
    cancel_reason: Option<(StoppedBy, String)>,
    /// A write to the log failed (disk full): said in the end's error.
    log_error: Option<String>,
}

impl Run {
    pub fn new(id: RunId, argv: Vec<String>, cwd: PathBuf, stdout: StreamLog, stderr: StreamLog) -> Self {
        let started_unix_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        Run {
            id,
            argv,
            cwd,
            started_unix_ms,
            started: Instant::now(),
            cancel: CancellationToken::new(),
            group: Arc::default(),
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
            }),
        }
    }

    fn notify(&self) {
        self.changed.send_modify(|generation| *generation += 1);
    }

    /// A receiver that wakes at every change.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }

    /// Appends output to its stream's log.
    pub fn append(&self, kind: StreamKind, bytes: &[u8]) {
        {
            let mut inner = self.inner.lock().unwrap();
            let log = match kind {
                StreamKind::Stdout => &mut inner.stdout,
                StreamKind::Stderr => &mut inner.stderr,
            };
            if let Err(err) = log.append(bytes) {
                tracing::warn!(run = %self.id, error = %err, "cannot keep a named run's output");
                inner.log_error.get_or_insert_with(|| format!("the server could not keep all output: {err}"));
            }
        }
        self.notify();
    }

    /// Records the end; a cancellation by someone carries their cause and message.
    pub fn finish(&self, mut end: RunEnd) {
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
        }
        self.notify();
    }

    /// Cancels it by the policy, saying who (`by`) and why (the first reason wins).
    pub fn cancel_because(&self, by: StoppedBy, reason: String) {
        self.inner.lock().unwrap().cancel_reason.get_or_insert((by, reason));
        self.cancel.cancel();
    }

    pub fn end(&self) -> Option<RunEnd> {
        self.inner.lock().unwrap().end.clone()
    }

    pub fn ended_at(&self) -> Option<Instant> {
        self.inner.lock().unwrap().ended_at
    }

    /// Runs `read` on the two logs and the end, under the lock.
    pub fn with_logs<T>(&self, read: impl FnOnce(&StreamLog, &StreamLog, Option<&RunEnd>) -> T) -> T {
        let inner = self.inner.lock().unwrap();
        read(&inner.stdout, &inner.stderr, inner.end.as_ref())
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
            argv: self.argv.clone(),
            cwd: self.cwd.display().to_string(),
            started_unix_ms: self.started_unix_ms,
            state: end.map_or(RunState::Running, |end| end.state),
            exit_code: end.and_then(|end| end.exit_code),
            signal: end.and_then(|end| end.signal),
            error: end.and_then(|end| end.error.clone()),
            stdout_bytes: inner.stdout.total(),
            stderr_bytes: inner.stderr.total(),
            dropped_bytes: inner.stdout.dropped() + inner.stderr.dropped(),
            attached: inner.attached,
            duration_ms: u64::try_from(duration.as_millis()).unwrap_or(u64::MAX),
            stopped_by: end.and_then(|end| end.stopped_by),
        }
    }
}

/// A reader of a run; dropping it detaches (and may start the reattach window).
#[derive(Debug)]
pub struct Attachment {
    run: Arc<Run>,
    window: Duration,
}

impl Drop for Attachment {
    fn drop(&mut self) {
        self.run.detached(self.window);
    }
}
