//! The tool-sidecar file transport: requests appear as `exec-request-{id}.json` in a shared folder, results go back
//! as `exec-result-{id}.json`. A drop-in for the protocol's shell executor, on the same engine as HTTP.
//!
//! Better than the shell executor, by design: the folder is watched with inotify instead of polled (and polled as
//! often as the shell executor polls where inotify cannot be had); a request is read by agent-files' rules with
//! exec-server's parameters ([`files::RULES`]): it is never claimed before its JSON parses (the agent writes
//! non-atomically), and one that stops changing without parsing gets an error result once it has not changed for
//! [`agent_files::QUIET_PERIOD`]; a request that is not a regular file (a FIFO, a symlink, a device), is larger than
//! the limit, or is JSON of another shape is never read beyond that limit nor waited on, and gets one error result;
//! timeouts end the whole process group (TERM, grace, KILL), so no request hangs;
//! output is capped while it is read; parallelism is bounded; claim folders are removed once their request and
//! result are gone; requests older than their own deadline (the agent gave up) are ignored. When the `done` file
//! appears the run is over: nothing new is claimed, running commands are stopped by the policy and get a result
//! saying so, and the server exits, so no command outlives the run.

mod files;
mod request;

use std::collections::HashSet;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use agent_files::{
    Change, FolderChanges, Incomplete, Reading, UnfinishedWrites, Unusable, Verdict, Wake, QUIET_PERIOD,
};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

pub use request::{normalize_target, routed_here, ToolRequest, ToolResult, OUTPUT_CAP, TRUNCATED};

use crate::engine::{Collect, ProcessEngine};
use crate::metrics::{IpcMetrics, IpcOutcome};

/// The tools folder's place among the watched folders.
const TOOLS: usize = 0;
/// The place of the folder that holds the `done` file (the tools folder itself, or another).
const DONE: usize = 1;

/// What the file transport needs to know.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The tools folder, e.g. `/ipc/tools`.
    pub dir: PathBuf,
    /// The file whose appearance ends the run, e.g. `/ipc/done`.
    pub done: PathBuf,
    /// Working directory of a request without `workDir`.
    pub workdir: PathBuf,
    pub min_timeout: u64,
    pub max_timeout: u64,
    pub parallel: usize,
    /// SYMPOZIUM_SKILL_PACK: requests for another target are left to their executor.
    pub skill_pack: Option<String>,
    pub base_env: Arc<Vec<(OsString, OsString)>>,
}

/// The file transport: watches the folder and answers requests.
pub struct Transport {
    settings: Arc<Settings>,
    engine: ProcessEngine,
    metrics: IpcMetrics,
    /// The tools folder ([`TOOLS`]) and the `done` file's ([`DONE`]).
    changes: FolderChanges,
    permits: Arc<Semaphore>,
    /// Ids being handled by a task of ours.
    active: Arc<Mutex<HashSet<String>>>,
    /// Ids whose file is not usable yet (empty, not JSON yet, unreadable), to tell "still being written" from
    /// "broken".
    unfinished: UnfinishedWrites<String>,
    tasks: JoinSet<()>,
    /// Fired when the transport stops: queued requests are then left unclaimed.
    closing: CancellationToken,
}

/// Why the transport stopped.
#[derive(Debug, PartialEq, Eq)]
pub enum StopReason {
    /// The `done` file appeared: the run is over.
    RunDone,
    /// The server is shutting down.
    Stopped,
}

impl Transport {
    /// Creates the folder if needed and starts watching it (and the `done` file's folder) before anything is read,
    /// so no request written from now on can be missed.
    pub fn start(settings: Settings, engine: ProcessEngine, metrics: IpcMetrics) -> std::io::Result<Self> {
        std::fs::create_dir_all(&settings.dir).map_err(|err| {
            std::io::Error::other(format!("cannot create the IPC folder {}: {err}", settings.dir.display()))
        })?;
        let done_dir = settings.done.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
        // In the order of TOOLS and DONE. Without inotify (or a `done` folder that is not there) the first wait says
        // so, and the folder is polled instead.
        let changes = FolderChanges::watch(&[settings.dir.clone(), done_dir.to_path_buf()], files::RULES.recheck);
        tracing::info!(
            dir = %settings.dir.display(),
            done = %settings.done.display(),
            skill_pack = settings.skill_pack.as_deref().unwrap_or("(any)"),
            "exec-server watching for tool requests"
        );
        Ok(Transport {
            permits: Arc::new(Semaphore::new(settings.parallel.max(1))),
            settings: Arc::new(settings),
            engine,
            metrics,
            changes,
            active: Arc::default(),
            unfinished: UnfinishedWrites::default(),
            tasks: JoinSet::new(),
            closing: CancellationToken::new(),
        })
    }

    /// Answers requests until `stop` fires or the `done` file appears; then waits for its running requests, which
    /// the engine's shutdown cancels. Nothing here fails: without inotify the folder is polled, not given up on (the
    /// `Result` is its caller's shape).
    pub async fn serve(mut self, stop: CancellationToken) -> std::io::Result<()> {
        let stopped = self.watch(&stop).await;
        self.closing.cancel();
        if stopped == StopReason::RunDone {
            // The run is over: nothing that is still running may outlive it.
            self.engine.shutdown();
        }
        // Running requests still get their (cancelled) results written.
        while self.tasks.join_next().await.is_some() {}
        Ok(())
    }

    async fn watch(&mut self, stop: &CancellationToken) -> StopReason {
        if self.sweep() {
            tracing::info!(done = %self.settings.done.display(), "the run is already done");
            return StopReason::RunDone;
        }
        loop {
            // A request still being written is judged when its quiet period ends, if no change comes first.
            let wake = tokio::select! {
                () = stop.cancelled() => return StopReason::Stopped,
                wake = self.changes.next(self.unfinished.next_verdict()) => wake,
            };
            let done = match wake {
                Wake::Changed(changes) => changes.iter().any(|change| self.on_change(change)),
                Wake::Recheck => self.sweep(),
                Wake::Overflowed => {
                    tracing::warn!("inotify queue overflowed; rescanning the folder");
                    self.sweep()
                }
                Wake::InotifyUnavailable(err) => {
                    let every = self.changes.recheck_interval().as_secs_f64();
                    tracing::warn!("{err}; looking at the folders every {every} s instead");
                    self.sweep()
                }
                Wake::Deadline => false,
            };
            if done {
                return StopReason::RunDone;
            }
            for id in self.unfinished.due(Instant::now()) {
                self.consider(&id);
            }
        }
    }

    /// Handles one change; true when it says the run is done.
    fn on_change(&mut self, change: &Change) -> bool {
        let Some(name) = change.name.to_str() else { return false };
        match change.folder {
            DONE => !change.removed && self.settings.done.file_name().is_some_and(|done| done == name),
            TOOLS => {
                if let Some(id) = files::request_id(name) {
                    if change.removed {
                        self.unfinished.forget(id);
                        self.release_claim(id);
                    } else {
                        let id = id.to_owned();
                        self.consider(&id);
                    }
                } else if let Some(id) = files::result_id(name) {
                    if change.removed {
                        self.release_claim(id);
                    }
                }
                false
            }
            _ => false,
        }
    }

    /// Reads the whole folder: requests to consider, claims to release. True when the run is done: without inotify,
    /// or on a volume that does not report changes, this is how `done` is seen.
    fn sweep(&mut self) -> bool {
        if self.settings.done.exists() {
            return true;
        }
        let Ok(entries) = std::fs::read_dir(&self.settings.dir) else { return false };
        for entry in entries.filter_map(Result::ok) {
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            if let Some(id) = files::request_id(name) {
                let id = id.to_owned();
                self.consider(&id);
            } else if let Some(id) = files::claim_id(name) {
                self.release_claim(id);
            }
        }
        false
    }

    /// Removes `.claim-{id}` once the agent has removed both the request and its result.
    fn release_claim(&self, id: &str) {
        let dir = &self.settings.dir;
        if self.active.lock().unwrap().contains(id) {
            return;
        }
        if !files::request_path(dir, id).exists() && !files::result_path(dir, id).exists() {
            let _ = std::fs::remove_dir(files::claim_path(dir, id));
        }
    }

    /// Looks at one request: skipped (answered, claimed elsewhere, not ours, given up on), waited for (perhaps
    /// still being written), refused (unusable, or abandoned unfinished), or handed to a task that claims and runs
    /// it.
    fn consider(&mut self, id: &str) {
        let dir = self.settings.dir.clone();
        if self.active.lock().unwrap().contains(id)
            || files::result_path(&dir, id).exists()
            || files::claim_path(&dir, id).exists()
        {
            self.unfinished.forget(id);
            return;
        }
        let path = files::request_path(&dir, id);
        let (request, version) = match files::read_request(&dir, id) {
            Reading::Ready { value, version } => {
                self.unfinished.forget(id);
                (value, version)
            }
            Reading::Missing => {
                self.unfinished.forget(id);
                return;
            }
            // Empty, not JSON yet, or not readable yet (a permission not set, no descriptor free): read again when it
            // changes, and answered once it has not changed for the quiet period.
            Reading::Incomplete { why, version } => {
                if self.unfinished.judge(id.to_owned(), version) == Verdict::Abandoned {
                    self.refuse(id, abandoned_message(&path, &why));
                }
                return;
            }
            // Final for this file (not a regular file, too large, JSON that is no request): answered once, and the
            // claim keeps it from being looked at again.
            Reading::Unusable(why) => {
                self.unfinished.forget(id);
                self.refuse(id, unusable_message(&path, &why));
                return;
            }
        };
        if !routed_here(request.target.as_deref(), self.settings.skill_pack.as_deref()) {
            return;
        }
        let settings = &self.settings;
        let timeout = request::timeout_of(request.timeout.as_ref(), settings.min_timeout, settings.max_timeout);
        let given_up = version
            .modified()
            .and_then(|m| SystemTime::now().duration_since(m).ok())
            .is_some_and(|age| age > Duration::from_secs(timeout) + request::AGENT_PATIENCE);
        if given_up {
            tracing::debug!(id, "ignoring a request older than its own deadline");
            return;
        }
        let job = request::job_of(
            &request,
            &settings.workdir,
            &settings.base_env,
            settings.min_timeout,
            settings.max_timeout,
        )
        .map_err(|bad| ToolResult::refused(id, request::EXIT_BAD_REQUEST, bad.to_string()));
        self.spawn(id, job);
    }

    /// Answers a request with an error result saying why nothing ran.
    fn refuse(&mut self, id: &str, message: String) {
        self.spawn(id, Err(ToolResult::refused(id, request::EXIT_BAD_REQUEST, message)));
    }

    /// A task that waits for a slot, claims the request, runs it (or reports why it cannot) and writes its result.
    fn spawn(&mut self, id: &str, job: Result<crate::engine::Job, ToolResult>) {
        self.active.lock().unwrap().insert(id.to_owned());
        let id = id.to_owned();
        let dir = self.settings.dir.clone();
        let engine = self.engine.clone();
        let metrics = self.metrics.clone();
        let permits = self.permits.clone();
        let active = self.active.clone();
        let closing = self.closing.clone();
        self.tasks.spawn(async move {
            let _permit = permits.acquire_owned().await;
            let claimed = if closing.is_cancelled() { Ok(false) } else { files::claim(&dir, &id) };
            match claimed {
                Ok(true) => {
                    let (result, mut outcome) = match job {
                        Err(refused) => (refused, IpcOutcome::Refused),
                        Ok(job) => match engine.run(job, Collect { cap: OUTPUT_CAP }, CancellationToken::new()).await {
                            Ok(outcome) => (ToolResult::from_outcome(&id, &outcome), IpcOutcome::Ran),
                            Err(not_started) => (ToolResult::not_started(&id, &not_started), IpcOutcome::NotStarted),
                        },
                    };
                    if let Err(err) = files::write_result(&dir, &result) {
                        tracing::error!(id, "cannot write the result: {err}");
                        outcome = IpcOutcome::IoError;
                    }
                    metrics.request(outcome);
                }
                Ok(false) => metrics.request(IpcOutcome::NotClaimed),
                Err(err) => {
                    tracing::error!(id, "cannot claim the request: {err}");
                    metrics.request(IpcOutcome::IoError);
                }
            }
            active.lock().unwrap().remove(&id);
        });
    }
}

/// Why a request that stayed incomplete for the quiet period is refused.
fn abandoned_message(path: &Path, why: &Incomplete) -> String {
    let (path, quiet) = (path.display(), QUIET_PERIOD.as_secs());
    match why {
        Incomplete::Empty => format!("request file {path} stayed empty for {quiet} s"),
        Incomplete::NotJson { error, .. } => {
            format!("request file {path} is not a valid request after {quiet} s without a change: {error}")
        }
        Incomplete::Unreadable(err) => {
            format!("request file {path} cannot be read after {quiet} s without a change: {err}")
        }
    }
}

/// Why a request that can never be used is refused.
fn unusable_message(path: &Path, why: &Unusable) -> String {
    match why {
        Unusable::Refused(refusal) => format!("request file {} {refusal}", path.display()),
        Unusable::WrongShape { error, .. } => {
            format!("request file {} is not a valid request: {error}", path.display())
        }
    }
}
