//! The tool-sidecar file transport: requests appear as `exec-request-{id}.json` in a shared folder, results go back
//! as `exec-result-{id}.json`. A drop-in for the protocol's shell executor, on the same engine as HTTP.
//!
//! Better than the shell executor, by design: the folder is watched with inotify instead of polled; a request is
//! never claimed before its JSON parses (the agent writes non-atomically), and one that never parses gets an error
//! result after [`PARSE_WAIT`]; a request that is not a regular file (a FIFO, a symlink, a device) or is larger than
//! [`files::REQUEST_LIMIT`] is never read beyond that limit nor waited on, and gets one error result; timeouts end the whole process group (TERM, grace, KILL), so no request hangs;
//! output is capped while it is read; parallelism is bounded; claim folders are removed once their request and
//! result are gone; requests older than their own deadline (the agent gave up) are ignored. When the `done` file
//! appears the run is over: nothing new is claimed, running commands are stopped by the policy and get a result
//! saying so, and the server exits, so no command outlives the run.

mod files;
mod request;

use std::collections::{HashMap, HashSet};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use agent_files::watch::{AddWatchFlags, FolderWatch, InotifyEvent, WatchDescriptor, CONTENT_CHANGES};
use agent_files::ReadError;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

pub use request::{normalize_target, routed_here, ToolRequest, ToolResult, OUTPUT_CAP, TRUNCATED};

use crate::engine::{Collect, ProcessEngine};
use crate::metrics::{IpcMetrics, IpcOutcome};

/// How long a request file that does not parse yet (empty, or half written) is waited for before it is answered
/// with an error.
pub const PARSE_WAIT: Duration = Duration::from_secs(2);
/// How often files waiting to parse are read again (they usually complete with an inotify event first).
const PARSE_RETRY: Duration = Duration::from_millis(25);
/// A full rescan of the folder, for events lost to a queue overflow or a filesystem that does not report them,
/// and to remove claims whose request and result are gone.
const SWEEP: Duration = Duration::from_secs(5);

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
    inotify: FolderWatch,
    tools_watch: WatchDescriptor,
    done_watch: WatchDescriptor,
    permits: Arc<Semaphore>,
    /// Ids being handled by a task of ours.
    active: Arc<Mutex<HashSet<String>>>,
    /// Ids whose file did not parse yet, with when it was first seen.
    unparsed: HashMap<String, Instant>,
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
        let inotify = FolderWatch::new()?;
        let tools_mask = CONTENT_CHANGES;
        let watch = |path: &Path, mask: AddWatchFlags| {
            inotify
                .add(path, mask)
                .map_err(|err| std::io::Error::other(format!("cannot watch {} with inotify: {err}", path.display())))
        };
        let done_mask = AddWatchFlags::IN_CREATE | AddWatchFlags::IN_MOVED_TO | AddWatchFlags::IN_CLOSE_WRITE;
        // One folder may hold both; its watch then needs both masks.
        let same = done_dir.canonicalize().ok() == settings.dir.canonicalize().ok();
        let tools_watch = watch(&settings.dir, if same { tools_mask | done_mask } else { tools_mask })?;
        let done_watch = if same { tools_watch } else { watch(done_dir, done_mask)? };
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
            inotify,
            tools_watch,
            done_watch,
            active: Arc::default(),
            unparsed: HashMap::new(),
            tasks: JoinSet::new(),
            closing: CancellationToken::new(),
        })
    }

    /// Answers requests until `stop` fires or the `done` file appears; then waits for its running requests, which
    /// the engine's shutdown cancels.
    pub async fn serve(mut self, stop: CancellationToken) -> std::io::Result<()> {
        let stopped = self.watch(&stop).await;
        self.closing.cancel();
        if matches!(stopped, Ok(StopReason::RunDone)) {
            // The run is over: nothing that is still running may outlive it.
            self.engine.shutdown();
        }
        // Running requests still get their (cancelled) results written.
        while self.tasks.join_next().await.is_some() {}
        stopped.map(|_| ())
    }

    async fn watch(&mut self, stop: &CancellationToken) -> std::io::Result<StopReason> {
        if self.settings.done.exists() {
            tracing::info!(done = %self.settings.done.display(), "the run is already done");
            return Ok(StopReason::RunDone);
        }
        self.sweep();
        let mut next_sweep = Instant::now() + SWEEP;
        loop {
            let retry_at =
                if self.unparsed.is_empty() { next_sweep } else { (Instant::now() + PARSE_RETRY).min(next_sweep) };
            let events = tokio::select! {
                () = stop.cancelled() => return Ok(StopReason::Stopped),
                batch = self.inotify.next_batch() => {
                    batch.map_err(|err| std::io::Error::other(format!("inotify failed: {err}")))?
                }
                () = tokio::time::sleep_until(retry_at.into()) => Vec::new(),
            };
            for event in events {
                if self.on_event(&event) {
                    return Ok(StopReason::RunDone);
                }
            }
            let unparsed: Vec<String> = self.unparsed.keys().cloned().collect();
            for id in unparsed {
                self.consider(&id);
            }
            if Instant::now() >= next_sweep {
                self.sweep();
                next_sweep = Instant::now() + SWEEP;
            }
        }
    }

    /// Handles one event; true when it says the run is done.
    fn on_event(&mut self, event: &InotifyEvent) -> bool {
        if event.mask.contains(AddWatchFlags::IN_Q_OVERFLOW) {
            tracing::warn!("inotify queue overflowed; rescanning the folder");
            self.sweep();
            return self.settings.done.exists();
        }
        let Some(name) = event.name.as_ref().and_then(|n| n.to_str()) else { return false };
        if event.wd == self.done_watch && self.settings.done.file_name().is_some_and(|done| done == name) {
            return true;
        }
        if event.wd != self.tools_watch {
            return false;
        }
        if let Some(id) = files::request_id(name) {
            if event.mask.contains(AddWatchFlags::IN_DELETE) {
                self.unparsed.remove(id);
                self.release_claim(id);
            } else {
                let id = id.to_owned();
                self.consider(&id);
            }
        } else if let Some(id) = files::result_id(name) {
            if event.mask.contains(AddWatchFlags::IN_DELETE) {
                self.release_claim(id);
            }
        }
        false
    }

    /// Reads the whole folder: requests to consider, claims to release.
    fn sweep(&mut self) {
        let Ok(entries) = std::fs::read_dir(&self.settings.dir) else { return };
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

    /// Looks at one request: skipped (answered, claimed elsewhere, not ours, given up on), waited for (does not
    /// parse yet), refused (never parsed), or handed to a task that claims and runs it.
    fn consider(&mut self, id: &str) {
        let dir = self.settings.dir.clone();
        if self.active.lock().unwrap().contains(id)
            || files::result_path(&dir, id).exists()
            || files::claim_path(&dir, id).exists()
        {
            self.unparsed.remove(id);
            return;
        }
        let path = files::request_path(&dir, id);
        let (bytes, modified) = match files::read_request(&dir, id) {
            Ok(contents) => (contents.bytes, contents.metadata.modified().ok()),
            Err(err) if err.is_not_found() => {
                self.unparsed.remove(id);
                return;
            }
            // Perhaps passing (a permission not set yet, no descriptor free): tried again like a half-written file.
            Err(ReadError::Io(err)) => {
                if !self.keep_waiting(id) {
                    let message = format!(
                        "request file {} cannot be read after {} s: {err}",
                        path.display(),
                        PARSE_WAIT.as_secs()
                    );
                    self.refuse(id, message);
                }
                return;
            }
            // Final for this file (not a regular file, too large): answered once, and the claim keeps it from being
            // looked at again.
            Err(refused) => {
                self.unparsed.remove(id);
                self.refuse(id, format!("request file {} {refused}", path.display()));
                return;
            }
        };
        let request = match serde_json::from_slice::<ToolRequest>(&bytes) {
            Ok(request) => {
                self.unparsed.remove(id);
                request
            }
            Err(err) => {
                if !self.keep_waiting(id) {
                    let message = if bytes.is_empty() {
                        format!("request file {} stayed empty for {} s", path.display(), PARSE_WAIT.as_secs())
                    } else {
                        format!(
                            "request file {} is not a valid request after {} s: {err}",
                            path.display(),
                            PARSE_WAIT.as_secs()
                        )
                    };
                    self.refuse(id, message);
                }
                return;
            }
        };
        if !routed_here(request.target.as_deref(), self.settings.skill_pack.as_deref()) {
            return;
        }
        let settings = &self.settings;
        let timeout = request::timeout_of(request.timeout.as_ref(), settings.min_timeout, settings.max_timeout);
        let given_up = modified
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
        .map_err(|message| ToolResult::refused(id, request::EXIT_BAD_REQUEST, message));
        self.spawn(id, job);
    }

    /// Whether a request that cannot be used yet (does not parse, cannot be read) is still within [`PARSE_WAIT`] of
    /// when it was first seen; once it is not, it is forgotten here and the caller answers it.
    fn keep_waiting(&mut self, id: &str) -> bool {
        let first_seen = *self.unparsed.entry(id.to_owned()).or_insert_with(Instant::now);
        if first_seen.elapsed() < PARSE_WAIT {
            return true;
        }
        self.unparsed.remove(id);
        false
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
