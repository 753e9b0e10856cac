//! Named runs (docs/exec-server.md, "Runs"): commands a client named with `run_id`, which outlive their connection for
//! the reattach window, keep their output for replay (memory, then a spill file, then head + tail), and are kept for
//! `--retain` after they end. The registry here is transport-free; `http::api::runs` serves it.

mod input;
mod kept_argv;
mod log;
mod named_run;
mod retention;
pub mod signals;
mod spill_file;
mod state_dir;
mod tombstone;
mod writer;

pub use input::{InputRefusal, RunInput, Taken, MAX_UNWRITTEN};
pub use kept_argv::KeptArgv;
pub use log::{Budget, OutputLog, Read};
pub use named_run::{Attachment, Follower, NamedRun};
pub use tombstone::Tombstone;
pub use writer::SpillWriter;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use protocol::RunId;

use retention::KeptRuns;
use state_dir::StateDir;
use tombstone::Tombstones;

/// The flags that shape named runs.
#[derive(Debug, Clone)]
pub struct Settings {
    pub reattach_window: Duration,
    pub retain: Duration,
    pub max_runs: usize,
    pub run_log_max: u64,
    /// `--run-memory`: the bytes all logs may keep in memory.
    pub run_memory: u64,
    pub state_dir: Option<PathBuf>,
}

/// Every named run this server keeps. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Runs {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    settings: Settings,
    state_dir: Mutex<Option<StateDir>>,
    state_path: PathBuf,
    runs: Mutex<KeptRuns>,
    /// The runs forgotten for room before their retention ended (locked after `runs` when both are).
    tombstones: Mutex<Tombstones>,
    /// The memory all runs' logs share (`--run-memory`).
    budget: Arc<Budget>,
    /// Spill files get a fresh number each, for the name the fallback without `O_TMPFILE` makes for a moment
    /// (`spill_file`): two runs under one id (a forgotten one still being read, a new one) never race for one name.
    next_file: AtomicU64,
}

/// What a request naming a run gets.
pub enum Claim {
    /// A new run, to be started by the caller.
    New(Arc<NamedRun>),
    /// The run of that name, running or ended: attach to it, run nothing.
    Existing(Arc<NamedRun>),
}

/// Why a run could not be claimed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClaimError {
    /// The id names a run of another command or folder (`argv` as the run shows it: see [`KeptArgv`]).
    Conflict { id: RunId, argv: Vec<String>, cwd: PathBuf },
    /// `--max-runs` runs are kept and all still run.
    Full { max_runs: usize },
    /// The id named a run that ended and was forgotten to make room before its `--retain` was up (its tombstone);
    /// `same_command`: the request is that run's command (a client back for its result).
    Forgotten { id: RunId, tombstone: Tombstone, same_command: bool },
}

impl std::fmt::Display for ClaimError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ClaimError::Conflict { id, argv, cwd } => write!(
                f,
                "run_id {id} already names another command ({} in {}); choose a new id",
                serde_json::to_string(argv).unwrap_or_default(),
                cwd.display()
            ),
            ClaimError::Full { max_runs } => write!(
                f,
                "{max_runs} named runs are running (the limit set by --max-runs); retry once one has ended, or \
                 DELETE one"
            ),
            ClaimError::Forgotten { id, tombstone, same_command: true } => write!(
                f,
                "run {id} ended while no client was reading it: it {}; its output is no longer kept (forgotten to make \
                 room for newer runs under --max-runs), and it was not started again",
                tombstone.how_it_ended()
            ),
            ClaimError::Forgotten { id, tombstone, same_command: false } => write!(
                f,
                "run_id {id} already names another command, which {} and is no longer kept; choose a new id",
                tombstone.how_it_ended()
            ),
        }
    }
}

impl Runs {
    /// The registry, with its state folder made now. A sweeper forgets expired runs every second.
    pub fn new(settings: Settings) -> std::io::Result<Self> {
        let state_dir = StateDir::create(settings.state_dir.as_deref())?;
        let state_path = state_dir.path().to_path_buf();
        let run_memory = settings.run_memory;
        let max_runs = settings.max_runs;
        let runs = Runs {
            inner: Arc::new(Inner {
                settings,
                state_dir: Mutex::new(Some(state_dir)),
                state_path,
                runs: Mutex::default(),
                tombstones: Mutex::new(Tombstones::new(max_runs)),
                budget: Budget::new(run_memory),
                next_file: AtomicU64::new(0),
            }),
        };
        let weak = Arc::downgrade(&runs.inner);
        tokio::spawn(sweep(weak));
        Ok(runs)
    }

    pub fn settings(&self) -> &Settings {
        &self.inner.settings
    }

    pub fn state_dir(&self) -> &Path {
        &self.inner.state_path
    }

    /// The run `id` names if it is that of `argv` in `cwd`, or a new one (not started).
    pub fn claim(&self, id: &RunId, argv: &[String], cwd: &Path) -> Result<Claim, ClaimError> {
        let settings = &self.inner.settings;
        let mut runs = self.inner.runs.lock().unwrap();
        runs.forget_expired(settings.retain, Instant::now());
        if let Some(run) = runs.get(id) {
            return same_command(run, argv, cwd).map(Claim::Existing);
        }
        let mut tombstones = self.inner.tombstones.lock().unwrap();
        tombstones.expire(settings.retain, Instant::now());
        if let Some(tombstone) = tombstones.get(id) {
            return Err(forgotten(id, tombstone, argv, cwd));
        }
        if !runs.make_room(settings.max_runs, |run| tombstones.bury(run)) {
            return Err(ClaimError::Full { max_runs: settings.max_runs });
        }
        drop(tombstones);
        let log = |stream: &str| {
            let number = self.inner.next_file.fetch_add(1, Ordering::Relaxed);
            let path = self.inner.state_path.join(format!("{id}.{number}.{stream}"));
            OutputLog::new(settings.run_log_max, self.inner.budget.clone(), path)
        };
        let run = Arc::new(NamedRun::new(
            id.clone(),
            KeptArgv::new(argv, cwd),
            cwd.to_path_buf(),
            log("stdout"),
            log("stderr"),
        ));
        runs.insert(id.clone(), run.clone());
        Ok(Claim::New(run))
    }

    /// The run `id` names if it is kept and is that of `argv` in `cwd`; [`ClaimError::Conflict`] if it is another's;
    /// `None` if none is kept. For a request that can start nothing (its cwd is missing), which must still not take
    /// a kept id for another command.
    pub fn kept_as(&self, id: &RunId, argv: &[String], cwd: &Path) -> Result<Option<Arc<NamedRun>>, ClaimError> {
        if let Some(tombstone) = self.forgotten(id) {
            return Err(forgotten(id, &tombstone, argv, cwd));
        }
        self.get(id).map(|run| same_command(&run, argv, cwd)).transpose()
    }

    /// The tombstone of `id`, if it names a run forgotten for room within its retention.
    pub fn forgotten(&self, id: &RunId) -> Option<Tombstone> {
        let mut tombstones = self.inner.tombstones.lock().unwrap();
        tombstones.expire(self.inner.settings.retain, Instant::now());
        tombstones.get(id).cloned()
    }

    /// The run `id` names, if kept.
    pub fn get(&self, id: &RunId) -> Option<Arc<NamedRun>> {
        let mut runs = self.inner.runs.lock().unwrap();
        runs.forget_expired(self.inner.settings.retain, Instant::now());
        runs.get(id).cloned()
    }

    /// Every kept run, newest first.
    pub fn list(&self) -> Vec<Arc<NamedRun>> {
        let mut runs = self.inner.runs.lock().unwrap();
        runs.forget_expired(self.inner.settings.retain, Instant::now());
        let mut list: Vec<Arc<NamedRun>> = runs.runs().cloned().collect();
        list.sort_by_key(|run| std::cmp::Reverse(run.started));
        list
    }

    /// Forgets `id` (its spill files go once no reader holds it).
    pub fn forget(&self, id: &RunId) {
        self.inner.runs.lock().unwrap().remove(id);
    }

    /// How many runs are kept.
    pub fn len(&self) -> usize {
        self.inner.runs.lock().unwrap().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// At exit: forgets every run and removes the state folder (if it is ours).
    pub fn close(&self) {
        self.inner.runs.lock().unwrap().clear();
        *self.inner.tombstones.lock().unwrap() = Tombstones::new(self.inner.settings.max_runs);
        self.inner.state_dir.lock().unwrap().take();
    }
}

/// `run`, if it is that of `argv` in `cwd` (an id always names one command in one folder), else the conflict.
fn same_command(run: &Arc<NamedRun>, argv: &[String], cwd: &Path) -> Result<Arc<NamedRun>, ClaimError> {
    if !run.command.is_of(argv, cwd) {
        let shown = run.command.shown().to_vec();
        return Err(ClaimError::Conflict { id: run.id.clone(), argv: shown, cwd: run.cwd.clone() });
    }
    Ok(run.clone())
}

/// The refusal for a request naming a forgotten run: a client back for it is told how it ended; another command is
/// a conflict.
fn forgotten(id: &RunId, tombstone: &Tombstone, argv: &[String], cwd: &Path) -> ClaimError {
    ClaimError::Forgotten { id: id.clone(), tombstone: tombstone.clone(), same_command: tombstone.is_of(argv, cwd) }
}

/// Forgets expired runs once a second, until the registry is gone.
async fn sweep(registry: Weak<Inner>) {
    loop {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let Some(registry) = registry.upgrade() else { return };
        let mut runs = registry.runs.lock().unwrap();
        runs.forget_expired(registry.settings.retain, Instant::now());
        registry.tombstones.lock().unwrap().expire(registry.settings.retain, Instant::now());
    }
}
