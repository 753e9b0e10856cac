//! Starting a command: the program looked up on the command's own PATH, the leader spawned in a new process group
//! with exactly the job's environment (and the tag that finds its escaped descendants), its stdin fed; and, when it
//! cannot start, why, in the user's terms. The place to add another kind of start (a terminal) or another
//! stdin source (a stream).

use std::ffi::{OsStr, OsString};
use std::path::PathBuf;
use std::process::Stdio;

use process_group::{self as group, program};
use tokio::io::AsyncWriteExt;
use tokio::process::Command;
use tokio_util::sync::CancellationToken;

use super::{escaped, Job};
use crate::workspace::DirProblem;

/// Why a command never started. Each transport turns the variant into its own exit code and words; the text
/// (`Display`) says what was wrong in the user's terms (`npm: not found (is it installed and on PATH?)`), for a
/// transport to put in its own message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StartError {
    /// No such program on the command's PATH, or at the path given.
    NotFound { program: String },
    /// The program is there but may not be run.
    PermissionDenied { program: String },
    /// The working directory is not there, or is no directory: every program would fail the same way.
    WorkingDirectory { path: PathBuf, problem: DirProblem },
    /// Anything else: an empty command, or what the spawn reported.
    Other(String),
}

impl std::fmt::Display for StartError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StartError::NotFound { program } => write!(f, "{program}: not found (is it installed and on PATH?)"),
            StartError::PermissionDenied { program } => write!(f, "{program}: permission denied"),
            StartError::WorkingDirectory { path, problem } => {
                write!(f, "working directory {} {problem}", path.display())
            }
            StartError::Other(detail) => f.write_str(detail),
        }
    }
}

impl std::error::Error for StartError {}

impl StartError {
    /// The kind the wire names, for a client to answer as a shell does without reading the text.
    pub fn kind(&self) -> protocol::StartErrorKind {
        match self {
            StartError::NotFound { .. } => protocol::StartErrorKind::NotFound,
            StartError::PermissionDenied { .. } => protocol::StartErrorKind::PermissionDenied,
            StartError::WorkingDirectory { .. } => protocol::StartErrorKind::Cwd,
            StartError::Other(_) => protocol::StartErrorKind::Other,
        }
    }
}

/// A started leader, and the master of its terminal when it runs on one.
pub struct Spawned {
    pub leader: group::Leader,
    pub terminal: Option<SpawnedTerminal>,
}

/// The master of a TTY run's terminal, and the slave's path (which no daemon it leaves may hold).
pub struct SpawnedTerminal {
    pub master: pty_process::Pty,
    pub slave_path: String,
}

/// The leader of job `id` (its argv, working directory, environment and the job tag): spawned in a new process
/// group with its stdout and stderr piped and its stdin piped when the job has any; or, for a job with a terminal,
/// in a new session on a new pty as its controlling terminal. `program`: the name messages use.
pub fn start_leader(id: u64, job: &Job, program: &str) -> Result<Spawned, StartError> {
    let multi_thread = tokio::runtime::Handle::try_current()
        .is_ok_and(|runtime| runtime.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread);
    if multi_thread && spawn_bytes(job) > LARGE_SPAWN_BYTES {
        // The worker's other tasks move to another worker meanwhile: the spawn of a command with a large
        // environment holds its thread for milliseconds (std sorts and copies every variable, and the kernel copies
        // them again while the parent waits for the exec), and `/health` and every stream must not wait for it.
        return tokio::task::block_in_place(|| start_leader_now(id, job, program));
    }
    start_leader_now(id, job, program)
}

/// Bytes of arguments and environment past which a spawn leaves its worker thread (a usual command has a few KiB;
/// a request may carry up to 1 MiB of them).
const LARGE_SPAWN_BYTES: usize = 64 * 1024;

fn spawn_bytes(job: &Job) -> usize {
    let argv: usize = job.argv.iter().map(|arg| arg.len() + 1).sum();
    argv + job.env.iter().map(|(name, value)| name.len() + value.len() + 2).sum::<usize>()
}

fn start_leader_now(id: u64, job: &Job, program: &str) -> Result<Spawned, StartError> {
    let first = job.argv.first().ok_or_else(|| StartError::Other("empty command".into()))?;
    let resolved = resolve_program(first, job).ok_or_else(|| start_error(job, program, None))?;
    let mut command = Command::new(resolved);
    command
        .arg0(first)
        .args(&job.argv[1..])
        .current_dir(job.cwd.enter())
        .env_clear()
        .envs(job.env.iter().map(|(k, v)| (k, v)))
        .env(escaped::JOB_VARIABLE, escaped::tag_value(id));
    let failed = |err: std::io::Error| start_error(job, program, Some(&err));
    if let Some(terminal) = &job.terminal {
        let pty = group::open_pty(terminal.rows, terminal.cols).map_err(failed)?;
        terminal.set_modes(&pty.master);
        let slave_path = pty.path.display().to_string();
        let leader = group::spawn_pty_leader(command, pty.slave).map_err(failed)?;
        return Ok(Spawned { leader, terminal: Some(SpawnedTerminal { master: pty.master, slave_path }) });
    }
    command
        .stdin(if job.stdin.is_some() || job.stdin_stream.is_some() { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let leader = group::spawn_leader(&mut command).map_err(failed)?;
    Ok(Spawned { leader, terminal: None })
}

/// Feeds the job's stdin (taken from `job`) to the leader in the background: its bytes, or its stream, whose
/// feeder is returned (to be stopped when the command has ended).
pub fn feed_stdin(job: &mut Job, leader: &mut group::Leader) -> Option<Feeder> {
    if let Some(stream) = job.stdin_stream.take() {
        let pipe = leader.child().stdin.take()?;
        let stop = CancellationToken::new();
        let task = tokio::spawn(super::stdin::feed_pipe(stream, pipe, stop.clone()));
        return Some(Feeder { task, stop });
    }
    if let (Some(bytes), Some(mut stdin)) = (job.stdin.take(), leader.child().stdin.take()) {
        // A command that exits without reading its stdin is not an error.
        tokio::spawn(async move {
            let _ = stdin.write_all(&bytes).await;
        });
    }
    None
}

/// The command's pipes as its descriptors name them in `/proc/<pid>/fd` (`pipe:[INODE]`): what a daemon the command
/// leaves must not hold (see `daemons`).
pub fn pipe_identities(child: &tokio::process::Child) -> Vec<String> {
    use std::os::fd::AsFd;
    let fds = [
        child.stdin.as_ref().map(AsFd::as_fd),
        child.stdout.as_ref().map(AsFd::as_fd),
        child.stderr.as_ref().map(AsFd::as_fd),
    ];
    fds.into_iter()
        .flatten()
        .filter_map(|fd| nix::sys::stat::fstat(fd).ok())
        .map(|stat| format!("pipe:[{}]", stat.st_ino))
        .collect()
}

/// The task writing a streamed stdin into the command's pipe.
pub struct Feeder {
    task: tokio::task::JoinHandle<super::stdin::Fed>,
    stop: CancellationToken,
}

impl Feeder {
    /// Feeds `stream` into a TTY run's terminal.
    pub fn terminal(stream: super::stdin::StdinStream, master: pty_process::OwnedWritePty) -> Self {
        let stop = CancellationToken::new();
        let task = tokio::spawn(super::stdin::feed_terminal(stream, master, stop.clone()));
        Feeder { task, stop }
    }

    /// The command has ended: stops the feeding and counts the bytes the command took.
    pub async fn finish(self) -> Option<u64> {
        self.stop.cancel();
        self.task.await.ok().and_then(|fed| fed.consumed())
    }
}

/// The program to execute: a name without a `/` is looked up on the command's own PATH here, so that the spawn
/// can use `posix_spawn` (std falls back to `fork`, which copies the server's page tables, whenever the child's
/// PATH differs from ours and the program is not a path). Names with a `/` are left to the spawn, relative to the
/// command's working directory. `None`: not found.
fn resolve_program(program: &OsString, job: &Job) -> Option<PathBuf> {
    if !program::is_bare_name(program) {
        return Some(PathBuf::from(program));
    }
    let path = job.env.iter().rev().find(|(name, _)| name == "PATH").map(|(_, value)| value.as_os_str());
    let cwd = job.cwd.enter();
    let found =
        program::executables_on_path(program, path.unwrap_or(OsStr::new(program::DEFAULT_PATH)), &cwd).next()?;
    // Found through a relative entry: named by the folder's own path, not the descriptor's `/proc/self/fd/N`, which
    // means nothing to the interpreter a `#!` script runs in (another process, after the descriptor closed).
    Some(found.strip_prefix(&cwd).map_or_else(|_| found.clone(), |rest| job.cwd.path().join(rest)))
}

/// Why a command did not start (`spawn`: what the spawn reported; `None` when the lookup on PATH found nothing), in
/// the user's terms. The working directory is checked first, and only here: a missing one fails every program, and
/// the spawn reports it as the program's own ENOENT.
fn start_error(job: &Job, program: &str, spawn: Option<&std::io::Error>) -> StartError {
    if let Some(problem) = DirProblem::of(job.cwd.path()) {
        return StartError::WorkingDirectory { path: job.cwd.path().to_path_buf(), problem };
    }
    let program = program.to_owned();
    match spawn {
        None => StartError::NotFound { program },
        Some(err) => match err.kind() {
            std::io::ErrorKind::NotFound => StartError::NotFound { program },
            std::io::ErrorKind::PermissionDenied => StartError::PermissionDenied { program },
            _ if matches!(err.raw_os_error(), Some(nix::libc::EMFILE | nix::libc::ENFILE)) => {
                StartError::Other(format!(
                "{program}: cannot start: the server is out of file descriptors ({err}); retry once fewer commands \
                 run, or raise the server's open-file limit (ulimit -n)"
            ))
            }
            _ => StartError::Other(format!("{program}: {err}")),
        },
    }
}
