//! The process engine: runs one argv in its own process group, enforces its timeout and cancellation, and hands
//! its output to the sinks its transport supplies ([`Capture`]). It knows nothing of HTTP or files: every transport
//! builds a [`Job`], calls [`ProcessEngine::run`] with its capture, and turns the [`Outcome`] into its own format.
//!
//! The module by job: the API types are here ([`Job`], [`Policy`], [`Outcome`], [`ProcessEngine`]); `live` keeps the
//! set of live process groups and the shutdown that stops them; `pipeline` runs one job from spawn to its outcome.

mod capture;
pub mod daemons;
mod escaped;
mod live;
mod pipeline;
mod spawn;
pub mod stdin;
pub mod terminal;

use std::collections::HashMap;
use std::ffi::OsString;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use process_group::Pgid;
use tokio_util::sync::CancellationToken;

pub use capture::{Capture, Collect, Collected, OutputChunk, Relay, Sink, READ_SIZE};

use crate::metrics::CommandMetrics;
pub use live::SHUTDOWN_KILL_WAIT;
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
}

/// What a capture's sinks keep of one pipe.
pub type Kept<C> = <<C as Capture>::Sink as Sink>::Kept;
