//! One side of one case: `bash -c LINE` in a process group of its own (on pipes, or leading a session on a terminal:
//! [`super::terminal`]), in the case's folder, with the side's environment; its steps (signals to the group as a
//! terminal sends them, keys typed on the terminal, waits on what the command writes), and what came of it: stdout
//! and stderr (or the screen), how it ended, and whether it stopped when it should have.

use std::ffi::OsString;
use std::fs::File;
use std::hash::Hasher;
use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use process_group::procfs;

/// How long a native run may take before it counts as hung: a hang guard only (natively every case ends by itself,
/// in well under a second on an idle machine).
pub const NATIVE_BOUND: Duration = Duration::from_secs(120);
/// What forwarding may add to an ordinary case before the forwarded run counts as hung, besides
/// [`SLOWER_BY`] times the native run (which says how loaded the machine is right now): far from the hang it
/// guards against (a forwarded `| head -1` whose producer never stops runs into the 600 s timeout), far from what
/// forwarding costs a case on a loaded machine (a debug build's few hundred milliseconds per call). Never a timing
/// assertion.
pub const CASE_BOUND: Duration = Duration::from_secs(10);
/// The same for the 100 MiB cases, which a debug build on 2 loaded cores forwards in tens of seconds.
pub const BIG_BOUND: Duration = Duration::from_secs(240);
/// See [`CASE_BOUND`].
pub const SLOWER_BY: u32 = 5;
/// How long the harness waits for what has no later event to wait on: every process of a group stopping after
/// SIGTSTP (natively at once), and a case's processes being gone once the case ended (natively they already are).
pub const STOP_BOUND: Duration = Duration::from_secs(5);
/// The most of each stream kept for the report; the rest is counted and hashed as it streams by.
pub const KEPT: usize = 64 * 1024;

/// What the case's stdin is.
#[derive(Debug, Clone, Copy)]
pub enum Input {
    /// `/dev/null` (what the line redirects, it redirects itself: files, heredocs, pipes).
    Null,
    /// A pipe that holds these bytes and never closes while the case runs: an agent's runner that keeps stdin open.
    Unclosed(&'static [u8]),
}

/// One thing the harness does while the case runs, in order.
#[derive(Debug, Clone, Copy)]
pub enum Step {
    /// Waits until the command has created this file in its folder (it writes its pid there, as `ready()` in the
    /// corpus's scripts does): its handlers are installed, and the pid names the command wherever it runs.
    Await(&'static str),
    /// Sends the signal to the case's process group, as a terminal sends Ctrl-C (INT), Ctrl-Z (TSTP), or `fg` (CONT),
    /// once the command (the pid in the file last awaited, which a case awaits first) is blocked: waiting for input,
    /// or stopped. *Why:* CPython's handler only sets a flag, which it looks at when a call returns EINTR; a signal
    /// that lands between its last look and the `read` it then blocks in is not handled until the read returns
    /// (natively too), and a case would hang on a race of the harness's. On a terminal, the signals a key sends are
    /// that key, typed ([`super::terminal::key_of`]).
    Signal(Signal),
    /// Types these keys on the case's terminal (terminal cases only), once the command (the pid in the file last
    /// awaited) waits for input: a key typed before would be echoed by whichever line discipline holds it then.
    Type(&'static [u8]),
    /// Waits until the screen shows this after what the last such step saw (terminal cases only): before a key
    /// that must come after the command has handled the one before (a REPL's next prompt), as the command may still
    /// be blocked in the read that the previous key ends.
    AwaitScreen(&'static str),
    /// Waits until every process of the case's group is stopped (after SIGTSTP), at most [`STOP_BOUND`].
    AwaitGroupStopped,
    /// Writes one line into the case's `gate` FIFO, which the command (or a writer in its line) reads.
    Release,
    /// Waits until the command (the pid in `ready`) is stopped, or gone: whether Ctrl-Z reached it.
    AwaitCommandStopped,
}

/// One entry of the corpus.
#[derive(Debug, Clone, Copy)]
pub struct Case {
    /// Unique, the key of the report and of KNOWN_DIFFERENCES.
    pub name: &'static str,
    /// The command line, run by `bash -c` in the case's folder.
    pub line: &'static str,
    pub stdin: Input,
    /// stdout and stderr are one pipe (`2>&1`), compared as their interleaving.
    pub merged: bool,
    /// Each line that arrives on stdout or stderr is acknowledged with a line into `gate`: a command that waits
    /// for its output to be seen before it writes more makes the interleaving deterministic.
    pub ack_lines: bool,
    pub steps: &'static [Step],
    /// What forwarding may add to its time ([`CASE_BOUND`] or [`BIG_BOUND`]).
    pub bound: Duration,
    /// Whether the case runs in the terminal column too: when the command's stdin and stdout are the harness's
    /// (no pipe, file or heredoc in the line for them) and stdin is `/dev/null` in the other columns, so that at a
    /// terminal both are the terminal and sidecar-exec takes its TTY mode. A case whose stdin or stdout is a pipe or
    /// a file is no TTY case for the client (it forwards that stream as in the pipe columns), and a case that feeds
    /// its stdin from a pipe that holds bytes has its terminal twin with the bytes typed (`prompt-*`).
    pub at_a_terminal: bool,
}

impl Case {
    /// The defaults every corpus entry starts from.
    pub const PLAIN: Case = Case {
        name: "",
        line: "",
        stdin: Input::Null,
        merged: false,
        ack_lines: false,
        steps: &[],
        bound: CASE_BOUND,
        at_a_terminal: false,
    };
}

/// One stream as it arrived: its length, a hash of all of it, and its first [`KEPT`] bytes.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Captured {
    pub len: u64,
    pub hash: u64,
    pub head: Vec<u8>,
}

/// How the case's `bash` ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Exit(i32),
    Signal(i32),
    /// Still running at its bound: the harness killed its group.
    Hung,
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Status::Exit(code) => write!(f, "exit {code}"),
            Status::Signal(number) => match Signal::try_from(*number) {
                Ok(signal) => write!(f, "killed by {signal}"),
                Err(_) => write!(f, "killed by signal {number}"),
            },
            Status::Hung => write!(f, "hung (killed at its bound)"),
        }
    }
}

/// Whether the case stopped when it should have.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Stopping {
    /// Still running at its bound.
    pub hung: bool,
    /// Processes in the case's folder (the command, wherever it ran) still there [`STOP_BOUND`] after the end.
    pub left_behind: usize,
    /// The step the case ended before (a command that should have outlived a signal, or a wait it never reached).
    pub ended_before_step: Option<usize>,
    /// After SIGTSTP: whether every process of the group stopped.
    pub group_stopped: Option<bool>,
    /// After SIGTSTP: whether the command itself (the pid it wrote) stopped, rather than running on or ending.
    pub command_stopped: Option<bool>,
}

/// Everything one side of a case showed.
#[derive(Debug, Clone)]
pub struct Observed {
    /// stdout, or the screen at a terminal.
    pub stdout: Captured,
    /// `None` for a merged case, whose stderr is in `stdout`, and at a terminal (one stream).
    pub stderr: Option<Captured>,
    pub status: Status,
    pub stopping: Stopping,
    /// How long it ran (reported, never compared).
    pub took: Duration,
}

/// Where and how one side runs: its environment (PATH decides native or wrapped), and which processes in a
/// case's folder are not the case's (ssh-exec's shared connection, started elsewhere, may be adopted there).
pub struct Side {
    pub env: Vec<(OsString, OsString)>,
    pub not_the_cases: fn(i32) -> bool,
}

/// Where a case's stdin, stdout and stderr are.
#[derive(Clone, Copy)]
pub enum At<'a> {
    /// Pipes (stdin `/dev/null` or the case's unclosed pipe).
    Pipes,
    /// A terminal of the harness's ([`super::terminal`]), its screen read and its keys typed on this runtime.
    Terminal(&'a tokio::runtime::Handle),
}

/// A side of a case, started: its group, its end, its keyboard (at a terminal), and how to collect its output once
/// it is over.
pub struct Running {
    pub group: Pid,
    pub end: Arc<End>,
    /// Types keys on the case's terminal; `None` on pipes.
    pub keys: Option<Box<dyn Fn(&'static [u8])>>,
    /// The screen so far (its first [`KEPT`] bytes); `None` on pipes.
    pub screen: Option<Arc<Mutex<Vec<u8>>>>,
    /// stdout and stderr (or the screen and `None`), read to their end.
    pub output: Box<dyn FnOnce() -> (Captured, Option<Captured>)>,
}

/// Runs one side of `case` in `dir` (emptied first and given `files`), to its end or `bound`.
pub fn run(case: &Case, side: &Side, dir: &Path, files: &[(&str, &str)], bound: Duration, at: At) -> Observed {
    prepare(dir, files);
    // Held read-write by the harness for the whole case: opening it never blocks the command, and a released line
    // waits in it until the command reads.
    let gate = Arc::new(File::options().read(true).write(true).open(dir.join("gate")).unwrap());
    let started = Instant::now();
    let running = match at {
        At::Pipes => on_pipes(case, side, dir, &gate),
        At::Terminal(runtime) => super::terminal::start(case, side, dir, &gate, runtime),
    };
    let (group, end) = (running.group, &*running.end);
    let deadline = started + bound;
    let mut stopping = Stopping::default();
    let mut progress = Progress { awaited: "ready", seen: 0 };
    for (index, step) in case.steps.iter().enumerate() {
        if !perform(*step, dir, &running, &gate, deadline, &mut stopping, &mut progress) {
            stopping.ended_before_step = Some(index);
            break;
        }
    }
    let status = match end.wait_until(deadline) {
        Some(status) => status_of(status),
        None => {
            stopping.hung = true;
            let _ = killpg(group, Signal::SIGKILL);
            end.wait_until(Instant::now() + STOP_BOUND).expect("a case's group that was sent SIGKILL did not end");
            Status::Hung
        }
    };
    let took = started.elapsed();
    stopping.left_behind = sweep_leftovers(dir, side.not_the_cases);
    let (stdout, stderr) = (running.output)();
    Observed { stdout, stderr, status, stopping, took }
}

/// Starts `bash -c LINE` in a process group of its own, on pipes.
fn on_pipes(case: &Case, side: &Side, dir: &Path, gate: &Arc<File>) -> Running {
    let mut command = Command::new("bash");
    command.arg("-c").arg(case.line).env_clear().envs(side.env.iter().cloned()).current_dir(dir).process_group(0);
    // The write end of an unclosed stdin, held until the case is over.
    let mut held_stdin = None;
    match case.stdin {
        Input::Null => {
            command.stdin(Stdio::null());
        }
        Input::Unclosed(bytes) => {
            let (read, write) = cloexec_pipe();
            File::from(write.try_clone().unwrap()).write_all(bytes).unwrap();
            held_stdin = Some(write);
            command.stdin(Stdio::from(read));
        }
    }
    let (stdout_reader, stderr_reader) = if case.merged {
        let (read, write) = cloexec_pipe();
        command.stdout(Stdio::from(write.try_clone().unwrap())).stderr(Stdio::from(write));
        (File::from(read), None)
    } else {
        let (out_read, out_write) = cloexec_pipe();
        let (err_read, err_write) = cloexec_pipe();
        command.stdout(Stdio::from(out_write)).stderr(Stdio::from(err_write));
        (File::from(out_read), Some(File::from(err_read)))
    };
    let mut child = command.spawn().unwrap();
    // The command's ends of the pipes were moved into `command`: drop it so only the case holds them.
    drop(command);
    let group = Pid::from_raw(i32::try_from(child.id()).unwrap());
    let ack = case.ack_lines.then(|| gate.clone());
    let stdout = capture(stdout_reader, ack.clone());
    let stderr = stderr_reader.map(|reader| capture(reader, ack));
    let end = Arc::new(End::default());
    let waiter = {
        let end = end.clone();
        std::thread::spawn(move || end.set(child.wait().unwrap()))
    };
    let output = move || {
        waiter.join().unwrap();
        drop(held_stdin);
        (stdout.join().unwrap(), stderr.map(|reader| reader.join().unwrap()))
    };
    Running { group, end, keys: None, screen: None, output: Box::new(output) }
}

/// Empties `dir` and writes the corpus's files and the `gate` FIFO into it.
pub fn prepare(dir: &Path, files: &[(&str, &str)]) {
    if dir.exists() {
        std::fs::remove_dir_all(dir).unwrap();
    }
    std::fs::create_dir_all(dir).unwrap();
    for (name, text) in files {
        std::fs::write(dir.join(name), text).unwrap();
    }
    nix::unistd::mkfifo(&dir.join("gate"), nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
}

/// A pipe whose ends no other child inherits: cases run side by side, and an end leaked into another case's
/// process would keep this case's stream open.
fn cloexec_pipe() -> (OwnedFd, OwnedFd) {
    nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).unwrap()
}

/// Reads `reader` to its end on a thread: counts, hashes and keeps the head; acknowledges each line on `ack`.
fn capture(mut reader: File, ack: Option<Arc<File>>) -> std::thread::JoinHandle<Captured> {
    std::thread::spawn(move || {
        let mut capturing = Capturing::default();
        let mut buffer = vec![0; 64 * 1024];
        loop {
            let read = match reader.read(&mut buffer) {
                Ok(0) => break,
                Ok(read) => read,
                Err(err) if err.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(err) => panic!("reading a case's output: {err}"),
            };
            capturing.add(&buffer[..read], ack.as_deref());
        }
        capturing.done()
    })
}

/// A stream as it streams by: counted, hashed, its first [`KEPT`] bytes kept.
#[derive(Default)]
pub struct Capturing {
    captured: Captured,
    hasher: std::hash::DefaultHasher,
}

impl Capturing {
    /// Takes the next piece; acknowledges each line in it on `ack` (see [`Case::ack_lines`]).
    pub fn add(&mut self, chunk: &[u8], ack: Option<&File>) {
        self.hasher.write(chunk);
        self.captured.len += chunk.len() as u64;
        let room = KEPT.saturating_sub(self.captured.head.len());
        self.captured.head.extend_from_slice(&chunk[..room.min(chunk.len())]);
        if let Some(mut gate) = ack {
            let lines = chunk.iter().filter(|byte| **byte == b'\n').count();
            // The command may be gone: an acknowledgement nobody reads is not an error.
            let _ = gate.write_all(&b"\n".repeat(lines));
        }
    }

    pub fn done(mut self) -> Captured {
        self.captured.hash = self.hasher.finish();
        self.captured
    }
}

/// The case's end, set by its waiter.
#[derive(Default)]
pub struct End {
    status: Mutex<Option<ExitStatus>>,
    changed: Condvar,
}

impl End {
    pub fn set(&self, status: ExitStatus) {
        *self.status.lock().unwrap() = Some(status);
        self.changed.notify_all();
    }

    fn ended(&self) -> bool {
        self.status.lock().unwrap().is_some()
    }

    /// The status once the case has ended, or `None` at `deadline`.
    fn wait_until(&self, deadline: Instant) -> Option<ExitStatus> {
        let mut status = self.status.lock().unwrap();
        loop {
            if let Some(status) = *status {
                return Some(status);
            }
            let left = deadline.checked_duration_since(Instant::now()).filter(|left| !left.is_zero())?;
            status = self.changed.wait_timeout(status, left).unwrap().0;
        }
    }
}

fn status_of(status: ExitStatus) -> Status {
    match (status.code(), status.signal()) {
        (Some(code), _) => Status::Exit(code),
        (None, Some(signal)) => Status::Signal(signal),
        (None, None) => unreachable!("a waited-for process exited or was killed"),
    }
}

/// Where a case's steps have got to.
struct Progress {
    /// The file last awaited, whose pid a typed key waits on.
    awaited: &'static str,
    /// How much of the screen the last [`Step::AwaitScreen`] saw.
    seen: usize,
}

/// Does one step; `false` when the case ended (or its bound passed) before the step could be done.
fn perform(
    step: Step,
    dir: &Path,
    running: &Running,
    gate: &File,
    deadline: Instant,
    stopping: &mut Stopping,
    progress: &mut Progress,
) -> bool {
    let (group, end, last_awaited) = (running.group, &*running.end, progress.awaited);
    // Waits for `done` while the case runs, within its bound; polled, as the file or state has no event to block on.
    let until = |within: Instant, mut done: Box<dyn FnMut() -> bool + '_>| loop {
        if done() {
            return true;
        }
        if end.ended() || Instant::now() >= within {
            return false;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    // Waits until the command is blocked (see Step::Signal): waiting for input, stopped, or gone (what is sent then
    // cannot race it either).
    let blocked = || {
        let blocked = |pid| match procfs::stat(pid) {
            Some(stat) => stat.is_zombie() || matches!(stat.state, 'T' | 't') || testkit::waits_for_input(pid),
            None => true,
        };
        until(deadline, Box::new(|| pid_in(dir, last_awaited).is_some_and(blocked)))
    };
    let type_keys = |keys: &'static [u8], typist: &dyn Fn(&'static [u8])| {
        let reading = blocked();
        if reading {
            typist(keys);
        }
        reading
    };
    match step {
        Step::Await(name) => {
            progress.awaited = name;
            until(deadline, Box::new(|| dir.join(name).exists()))
        }
        Step::Signal(signal) => match (&running.keys, super::terminal::key_of(signal)) {
            (Some(typist), Some(key)) => type_keys(key, &**typist),
            _ => blocked() && !end.ended() && killpg(group, signal).is_ok(),
        },
        Step::Type(keys) => {
            let typist = running.keys.as_ref().expect("a case that types keys runs on a terminal");
            type_keys(keys, &**typist)
        }
        Step::AwaitScreen(text) => {
            let screen = running.screen.as_ref().expect("a case that awaits the screen runs on a terminal");
            let (from, text) = (progress.seen, text.as_bytes());
            let mut end_of_it = None;
            let shown = until(
                deadline,
                Box::new(|| {
                    let screen = screen.lock().unwrap();
                    let found = screen.get(from..).and_then(|part| part.windows(text.len()).position(|w| w == text));
                    end_of_it = found.map(|at| from + at + text.len());
                    end_of_it.is_some()
                }),
            );
            progress.seen = end_of_it.unwrap_or(from);
            shown
        }
        Step::AwaitGroupStopped => {
            let within = (Instant::now() + STOP_BOUND).min(deadline);
            let stopped = until(within, Box::new(|| group_stopped(group)));
            stopping.group_stopped = Some(stopped);
            !end.ended()
        }
        Step::Release => {
            let _ = (&*gate).write_all(b"go\n");
            true
        }
        Step::AwaitCommandStopped => {
            let pid = pid_in(dir, "ready");
            let mut stopped = false;
            let seen = until(
                deadline,
                Box::new(|| match pid.and_then(procfs::stat) {
                    Some(stat) if matches!(stat.state, 'T' | 't') => {
                        stopped = true;
                        true
                    }
                    Some(stat) => stat.is_zombie(),
                    None => true,
                }),
            );
            stopping.command_stopped = Some(stopped);
            seen || !end.ended()
        }
    }
}

/// The pid the command wrote into the file `name` (`ready`, or a later one).
fn pid_in(dir: &Path, name: &str) -> Option<i32> {
    std::fs::read_to_string(dir.join(name)).ok()?.trim().parse().ok()
}

/// Whether every live process of `group` is stopped (and there is one).
fn group_stopped(group: Pid) -> bool {
    let members: Vec<procfs::Stat> = procfs::pids()
        .into_iter()
        .filter_map(procfs::stat)
        .filter(|stat| stat.group == group.as_raw() && !stat.is_zombie())
        .collect();
    !members.is_empty() && members.iter().all(|stat| matches!(stat.state, 'T' | 't'))
}

/// Waits up to [`STOP_BOUND`] for the processes whose working directory is in `dir` (the command and anything it
/// left, wherever it ran: here, under the exec-server, under sshd) to be gone; kills what is left and says how many.
fn sweep_leftovers(dir: &Path, not_the_cases: fn(i32) -> bool) -> usize {
    let dir = dir.canonicalize().unwrap();
    let inside = || -> Vec<i32> {
        procfs::pids()
            .into_iter()
            .filter(|pid| !not_the_cases(*pid))
            .filter(|pid| procfs::stat(*pid).is_some_and(|stat| !stat.is_zombie()))
            .filter(|pid| {
                std::fs::read_link(format!("/proc/{pid}/cwd")).is_ok_and(|cwd: PathBuf| cwd.starts_with(&dir))
            })
            .collect()
    };
    if testkit::eventually(STOP_BOUND, || inside().is_empty()) {
        return 0;
    }
    let left = inside();
    for pid in &left {
        let _ = nix::sys::signal::kill(Pid::from_raw(*pid), Signal::SIGKILL);
    }
    testkit::wait_until("the processes a case left behind to die of SIGKILL", || inside().is_empty());
    left.len()
}
