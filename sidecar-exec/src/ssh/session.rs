//! One call on the host: runs `ssh`, copies its output to ours without the side channel's markers, delivers the
//! signals we get to the remote command's process group as they came (INT, TERM, HUP, QUIT; Ctrl-Z stops both
//! sides, [`crate::signals_as_sent`]), and stops that group when our stdout closes
//! or when the command leaves processes behind that hold its output open.
//!
//! Signalling and stopping take a second session ([`crate::ssh::script::signal_script`],
//! [`crate::ssh::script::stop_script`]): closing the first does not signal anything on the host (without a terminal
//! sshd sends no SIGHUP), and ssh has no way to send a signal that OpenSSH's sshd acts on.

use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use nix::sys::signal::Signal;
use protocol::StreamKind;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::{sleep_until, timeout, Instant};

use crate::interrupt::{Interrupt, InterruptHandlers};
use crate::signals_as_sent::{self, QuitAndStop, Received};
use crate::ssh::command::{self, Route};
use crate::ssh::markers::{Marker, Scanner};
use crate::ssh::script::{signal_script, stop_script, tstp_script, Nonce};
use crate::ssh::settings::SshSettings;
use crate::terminal_safe::terminal_safe;

/// After the command's exit marker, how long processes it left may keep its output open before they are stopped
/// (exec-server's default `--drain`).
const DRAIN: Duration = Duration::from_millis(250);
/// After ssh exits, how long a read of its output may wait for more (a process ssh started, holding its pipes,
/// would keep them open without end); then the stream is taken as ended. Only the reading is limited: what was read
/// is written to our stdout however slowly it is read there, as its exit code promises all of it (a reader that
/// goes away ends the writing with a broken pipe).
const EOF_WAIT: Duration = Duration::from_secs(1);
/// After the stop session ends, how long the call's own session may take to end before ssh is killed here.
const AFTER_STOP: Duration = Duration::from_secs(2);
/// Output held back before the start marker (login noise, or ssh's own error text) beyond which the oldest bytes
/// are written out.
const MAX_HELD: usize = 64 * 1024;

/// One call to make.
pub struct Launch<'a> {
    pub settings: &'a SshSettings,
    pub key: Option<&'a Path>,
    pub route: &'a Route,
    pub nonce: &'a Nonce,
    pub script: &'a str,
    pub stdin: StdinRoute,
    /// `ssh -tt`: ssh needs the terminal, so it stays in our process group, the terminal's foreground (Ctrl-C is then
    /// a byte the host's terminal turns into SIGINT). Otherwise ssh gets a group of its own, so a Ctrl-C reaches only
    /// us and we deliver it.
    pub tty: bool,
}

/// How our stdin reaches ssh.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StdinRoute {
    /// ssh reads it itself (a pipe, a file, a heredoc, /dev/null; the terminal of a `-tt` call), streamed as ssh
    /// streams it.
    Inherit,
    /// /dev/null (SSH_STDIN=0): the command reads end of file.
    Null,
    /// A terminal, for a call without one on the host: read here, line by line as the terminal gives it in its own
    /// mode (Ctrl-D is end of file), and written to ssh through a pipe, so ssh can stay out of the terminal's
    /// foreground (it would otherwise get the Ctrl-C that is ours to deliver).
    Terminal,
}

/// How a call ended.
#[derive(Debug)]
pub enum SessionEnd {
    /// The command's exit marker: its status, and the last signal we delivered to it (if any).
    Exited { code: i32, delivered: Option<Interrupt> },
    /// The host directory could not be entered; nothing ran.
    NoCwd,
    /// We were interrupted and the command's end did not come back (ssh ended first, or the command never
    /// started); `Some` says why it may still run there.
    Interrupted(Interrupt, Option<StopFailure>),
    /// Our stdout was closed (`| head -1`); the remote command was stopped.
    BrokenPipe,
    /// Started, but no exit marker came: the connection was lost (or the host's shell was killed).
    Lost(Option<i32>),
    /// The command never started: ssh's exit code and what it said on stderr.
    NotStarted(Option<i32>, String),
}

#[derive(Debug)]
enum PumpEvent {
    Marker(Marker),
    /// Our stdout is closed.
    BrokenPipe,
    /// A stream ended; what it still held from before the start marker.
    Eof(StreamKind, Vec<u8>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Timer {
    Drain,
    Header,
    AfterStop,
}

/// Everything the event loop has learnt.
#[derive(Default)]
struct CallState {
    pgid: Option<i32>,
    exit_code: Option<i32>,
    no_cwd: bool,
    broken_pipe: bool,
    /// The last signal we got (delivered, or waiting for the start marker in `pending`).
    interrupt: Option<Interrupt>,
    pending: Vec<Signal>,
    /// A Ctrl-Z that came before the start marker (the command may already run: its start line is on its way), done
    /// when the marker comes.
    stop_pending: bool,
    ssh_status: Option<Option<i32>>,
    eofs: usize,
    held_err: Vec<u8>,
    held_out: Vec<u8>,
    stop: Option<oneshot::Receiver<Result<(), StopFailure>>>,
    stop_begun: bool,
    stop_failure: Option<StopFailure>,
    timers: Vec<(Timer, Instant)>,
    /// How long a signal that came before the start marker waits for it (ssh's connect timeout + 5 s).
    header_wait: Duration,
    /// The call was given up (a second interrupt once ssh ended, a deadline): the loop ends now.
    finished: bool,
}

impl CallState {
    /// A signal that came before the command started: it may be about to, and then it gets the signal like any
    /// other; it is waited for only so long.
    fn hold_until_started(&mut self, signal: Signal) {
        self.pending.push(signal);
        self.set_timer(Timer::Header, self.header_wait);
    }

    /// ssh exited with `status`. Unless the call is being stopped here (a signal, our stdout closed), no deadline is
    /// left: no remote process can hold the output any more (sshd ends a session only once its output is closed), so
    /// nothing needs stopping, and what ssh already sent is written out however slowly our reader takes it (the pumps
    /// end at end of file, or [`EOF_WAIT`] after it when something else holds ssh's pipes).
    fn ssh_ended(&mut self, status: Option<i32>) {
        self.ssh_status = Some(status);
        if !self.stopped_by_us() {
            self.timers.clear();
        }
    }

    /// Whether this side stopped the call: our stdout closed (then nobody reads what is left), or a signal came
    /// before the command started (then only the start marker is waited for). A signal delivered to a running
    /// command does not stop the call: the command ends as it does with that signal.
    fn stopped_by_us(&self) -> bool {
        self.broken_pipe || !self.pending.is_empty()
    }

    fn set_timer(&mut self, timer: Timer, after: Duration) {
        self.timers.retain(|(t, _)| *t != timer);
        self.timers.push((timer, Instant::now() + after));
    }

    fn next_timer(&self) -> Option<(Timer, Instant)> {
        self.timers.iter().min_by_key(|(_, at)| *at).copied()
    }
}

/// What the call's event loop waits for, one at a time.
#[derive(Debug)]
enum Event {
    /// From a pump: a marker, our stdout closed, a stream's end.
    Pump(PumpEvent),
    /// ssh exited, with this code (none: killed by a signal).
    SshExited(Option<i32>),
    /// INT, TERM or HUP came.
    Interrupt(Interrupt),
    /// QUIT came (delivered as it is), or Ctrl-Z.
    QuitOrStop(Received),
    /// The stop session ended; why it did not stop the group, if it did not.
    StopDone(Option<StopFailure>),
    /// A timer's deadline passed.
    Timer(Timer),
}

/// What the event loop does for an event ([`CallState::on`] decides, the loop does it, in order).
#[derive(Debug, PartialEq, Eq)]
enum Action {
    /// Send the signal to the command's group (a session of its own, not waited for).
    Deliver(i32, Signal),
    /// Ctrl-Z: stop the command's group, then this process.
    StopBoth(i32),
    /// Start the stop session for the group.
    BeginStop(i32),
    /// Tell the pumps ssh ended (their reads then wait at most [`EOF_WAIT`]).
    SshEnded,
    /// Kill ssh.
    Kill,
    /// Stop this process (Ctrl-Z with nothing left on the host to stop with it).
    StopHere,
}

/// How the call ended, and what to write out before saying so.
#[derive(Debug)]
struct Ending {
    end: SessionEnd,
    /// What the streams held back, to write to our stdout and stderr.
    out: Vec<u8>,
    err: Vec<u8>,
    /// A Ctrl-Z came before the command started: it stops this process alone.
    stop_here: bool,
}

/// The decider of [`run`]: what each event means for the call, with no I/O.
impl CallState {
    /// Whether the loop is over: ssh ended and both streams are read, or the call was given up.
    fn done(&self) -> bool {
        self.finished || (self.ssh_status.is_some() && self.eofs == 2)
    }

    fn on(&mut self, event: Event) -> Vec<Action> {
        let mut actions = Vec::new();
        match event {
            Event::Pump(PumpEvent::Marker(Marker::Started { pgid })) => {
                self.pgid = Some(pgid);
                self.timers.retain(|(timer, _)| *timer != Timer::Header);
                let pending = std::mem::take(&mut self.pending);
                actions.extend(pending.into_iter().map(|signal| Action::Deliver(pgid, signal)));
                if std::mem::take(&mut self.stop_pending) {
                    actions.push(Action::StopBoth(pgid));
                }
                if self.broken_pipe {
                    self.begin_stop(&mut actions);
                }
            }
            Event::Pump(PumpEvent::Marker(Marker::Exited { code })) => {
                self.exit_code = Some(code);
                if self.ssh_status.is_none() {
                    self.set_timer(Timer::Drain, DRAIN);
                }
            }
            Event::Pump(PumpEvent::Marker(Marker::NoCwd)) => self.no_cwd = true,
            Event::Pump(PumpEvent::BrokenPipe) => {
                if !self.broken_pipe {
                    self.broken_pipe = true;
                    self.begin_stop(&mut actions);
                }
            }
            Event::Pump(PumpEvent::Eof(stream, held)) => {
                self.eofs += 1;
                match stream {
                    StreamKind::Stdout => self.held_out = held,
                    StreamKind::Stderr => self.held_err = held,
                }
            }
            Event::SshExited(status) => {
                self.ssh_ended(status);
                actions.push(Action::SshEnded);
            }
            Event::Interrupt(interrupt) => {
                self.interrupt = Some(interrupt);
                if self.ssh_status.is_some() {
                    self.finished = true;
                    return actions;
                }
                match self.pgid {
                    // Delivered as it came, every time (a second Ctrl-C is a second SIGINT, as natively); the call
                    // goes on until the command ends as it does with it.
                    Some(pgid) if self.exit_code.is_none() => actions.push(Action::Deliver(pgid, interrupt.signal())),
                    Some(_) => {}
                    None => self.hold_until_started(interrupt.signal()),
                }
            }
            Event::QuitOrStop(received) => match (received, self.pgid) {
                (Received::Forward(signal), Some(pgid)) if self.exit_code.is_none() => {
                    actions.push(Action::Deliver(pgid, signal));
                }
                (Received::Forward(signal), None) if self.ssh_status.is_none() => self.hold_until_started(signal),
                (Received::Forward(_), _) => {}
                (Received::Stop, Some(pgid)) if self.exit_code.is_none() => actions.push(Action::StopBoth(pgid)),
                (Received::Stop, None) if self.ssh_status.is_none() => self.stop_pending = true,
                // Nothing runs on the host any more to stop with us.
                (Received::Stop, _) => actions.push(Action::StopHere),
            },
            Event::StopDone(failure) => {
                if failure.is_some() {
                    self.stop_failure = failure;
                }
                if self.ssh_status.is_none() {
                    self.set_timer(Timer::AfterStop, AFTER_STOP);
                }
            }
            Event::Timer(timer) => {
                self.timers.retain(|(t, _)| *t != timer);
                match timer {
                    Timer::Drain => self.begin_stop(&mut actions),
                    // ssh's own end and its pipes' end of file finish the call: what it already sent is ours.
                    Timer::AfterStop if !self.stopped_by_us() => actions.push(Action::Kill),
                    Timer::Header | Timer::AfterStop => {
                        actions.push(Action::Kill);
                        self.finished = true;
                    }
                }
            }
        }
        actions
    }

    /// The stop session for the command's group, once, when the group is known.
    fn begin_stop(&mut self, actions: &mut Vec<Action>) {
        if let (Some(pgid), false) = (self.pgid, self.stop_begun) {
            self.stop_begun = true;
            actions.push(Action::BeginStop(pgid));
        }
    }

    /// How the call ended, from what the loop learnt. What the streams held back is written out once the command
    /// started (it is the command's); ssh's own stderr of a call that never started is its message instead.
    fn ending(self) -> Ending {
        let started = self.pgid.is_some() || self.exit_code.is_some();
        let ssh_status = self.ssh_status.flatten();
        let end = if self.broken_pipe {
            SessionEnd::BrokenPipe
        } else if let Some(code) = self.exit_code {
            SessionEnd::Exited { code, delivered: self.interrupt }
        } else if let Some(interrupt) = self.interrupt {
            SessionEnd::Interrupted(interrupt, self.stop_failure)
        } else if self.no_cwd {
            SessionEnd::NoCwd
        } else if self.pgid.is_some() {
            SessionEnd::Lost(ssh_status)
        } else {
            let said = String::from_utf8_lossy(&self.held_err).into_owned();
            let end = SessionEnd::NotStarted(ssh_status, said);
            return Ending { end, out: self.held_out, err: Vec::new(), stop_here: self.stop_pending };
        };
        let (out, err) = if started { (self.held_out, self.held_err) } else { (Vec::new(), Vec::new()) };
        Ending { end, out, err, stop_here: self.stop_pending }
    }
}

/// Runs the call to its end and says how it ended.
pub async fn run(launch: &Launch<'_>, interrupts: &mut InterruptHandlers) -> SessionEnd {
    // Before ssh starts, so that no QUIT or TSTP falls between: a handler caught here is reset in ssh by its exec.
    let Ok(mut quit_and_stop) = QuitAndStop::install() else {
        return SessionEnd::NotStarted(None, "cannot install the SIGQUIT and SIGTSTP handlers".into());
    };
    let mut child = match spawn(launch) {
        Ok(child) => child,
        Err(end) => return end,
    };
    let (Some(stdout), Some(stderr)) = (child.stdout.take(), child.stderr.take()) else {
        return SessionEnd::NotStarted(None, "ssh started without its pipes".into());
    };
    let started = Arc::new(watch::channel(false).0);
    let (events, mut inbox) = mpsc::unbounded_channel();
    let ssh_ended = watch::channel(false).0;
    let links = |events| PumpLinks {
        nonce: launch.nonce.0.clone(),
        started: started.clone(),
        ssh_ended: ssh_ended.subscribe(),
        events,
    };
    tokio::spawn(pump(stdout, StreamKind::Stdout, tokio::io::stdout(), links(events.clone())));
    tokio::spawn(pump(stderr, StreamKind::Stderr, tokio::io::stderr(), links(events)));

    let header_wait = Duration::from_secs(u64::from(launch.settings.connect_timeout) + 5);
    let mut state = CallState { header_wait, ..CallState::default() };
    while !state.done() {
        let next = state.next_timer();
        let event = tokio::select! {
            Some(event) = inbox.recv() => Event::Pump(event),
            status = child.wait(), if state.ssh_status.is_none() => Event::SshExited(status.ok().and_then(|s| s.code())),
            interrupt = interrupts.recv() => Event::Interrupt(interrupt),
            received = quit_and_stop.recv() => Event::QuitOrStop(received),
            result = async { state.stop.as_mut().unwrap().await }, if state.stop.is_some() => {
                state.stop = None;
                Event::StopDone(result.ok().and_then(Result::err))
            }
            _ = sleep_until(next.map_or_else(Instant::now, |(_, at)| at)), if next.is_some() => {
                Event::Timer(next.map_or(Timer::Drain, |(timer, _)| timer))
            }
        };
        for action in state.on(event) {
            match action {
                Action::Deliver(pgid, signal) => drop(deliver(launch, pgid, signal)),
                Action::StopBoth(pgid) => {
                    signals_as_sent::stop_both(|signal| deliver(launch, pgid, signal), |stop| stop()).await;
                }
                Action::BeginStop(pgid) => state.stop = Some(begin_stop(launch, pgid)),
                Action::SshEnded => drop(ssh_ended.send_replace(true)),
                Action::Kill => drop(child.start_kill()),
                Action::StopHere => drop(nix::sys::signal::raise(Signal::SIGSTOP)),
            }
        }
    }
    let ending = state.ending();
    if ending.stop_here {
        // The command never started: the Ctrl-Z stops this process alone, as it came.
        let _ = nix::sys::signal::raise(Signal::SIGSTOP);
    }
    let _ = std::io::Write::write_all(&mut std::io::stdout(), &ending.out);
    let _ = std::io::Write::write_all(&mut std::io::stderr(), &ending.err);
    ending.end
}

/// Starts ssh for the call, its stdin as [`Launch::stdin`] routes it; the end to report when it cannot start.
fn spawn(launch: &Launch<'_>) -> Result<tokio::process::Child, SessionEnd> {
    let mut ssh = command::ssh(launch.settings, launch.key, launch.route);
    ssh.arg(if launch.tty { "-tt" } else { "-T" });
    ssh.arg("--").arg(&launch.settings.host).arg(launch.script);
    let mut terminal_input = None;
    ssh.stdin(match launch.stdin {
        StdinRoute::Inherit => Stdio::inherit(),
        StdinRoute::Null => Stdio::null(),
        // Close-on-exec, so that ssh holds only the reading end: the writing end's close is the command's end of file.
        StdinRoute::Terminal => match nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC) {
            Ok((reader, writer)) => {
                terminal_input = Some(std::fs::File::from(writer));
                Stdio::from(reader)
            }
            Err(err) => return Err(SessionEnd::NotStarted(None, format!("cannot make a pipe for stdin: {err}"))),
        },
    })
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    if !launch.tty {
        ssh.process_group(0);
    }
    let child = ssh.spawn().map_err(|err| {
        SessionEnd::NotStarted(None, format!("cannot run ssh: {err} (is OpenSSH's client installed?)"))
    })?;
    // Dropping the command drops its copy of the pipe's reading end: ssh holds the only one, so a write after ssh
    // ended fails instead of blocking.
    drop(ssh);
    if let Some(writer) = terminal_input {
        copy_terminal_input(writer);
    }
    Ok(child)
}

/// Sends `signal` to the command's process group `pgid` through a session of its own; the call goes on reading
/// unless it waits for the handle (Ctrl-Z does). A failure is said at once on stderr (the command then runs on;
/// another signal tries again).
fn deliver(launch: &Launch<'_>, pgid: i32, signal: Signal) -> tokio::task::JoinHandle<()> {
    let name = signal.as_str().trim_start_matches("SIG");
    let mut session = command::ssh(launch.settings, launch.key, launch.route);
    let script = match signal {
        Signal::SIGTSTP => tstp_script(pgid),
        _ => signal_script(pgid, name),
    };
    session.arg("-T").arg("--").arg(&launch.settings.host).arg(script);
    session.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::piped()).process_group(0).kill_on_drop(true);
    let patience = Duration::from_secs(u64::from(launch.settings.connect_timeout) + 10);
    let address = launch.settings.address();
    tokio::spawn(async move {
        let why = match session.spawn() {
            Err(err) => StopProblem::NoSsh(err),
            Ok(child) => match timeout(patience, child.wait_with_output()).await {
                Ok(Ok(output)) if output.status.success() => return,
                Ok(Ok(output)) => StopProblem::Failed(String::from_utf8_lossy(&output.stderr).into()),
                Ok(Err(err)) => StopProblem::Lost(err),
                Err(_) => StopProblem::TooSlow(patience),
            },
        };
        let failure = StopFailure { address, pgid, why };
        eprintln!("ssh-exec: could not deliver SIG{name} to the command on the host: {failure}");
    })
}

/// Copies our stdin (a terminal, [`StdinRoute::Terminal`]) to ssh's, in a thread of its own: a read of the terminal
/// blocks until a line or Ctrl-D comes, and a plain thread blocked so never holds up the end of the call (the
/// program exits without waiting for it). Our end of the terminal, 0 bytes (Ctrl-D on an empty line) or a failed
/// write (ssh gone) closes the pipe: end of file for the command.
fn copy_terminal_input(mut to_ssh: std::fs::File) {
    std::thread::spawn(move || {
        let mut buffer = vec![0u8; 64 * 1024];
        let mut stdin = std::io::stdin().lock();
        loop {
            match std::io::Read::read(&mut stdin, &mut buffer) {
                Ok(0) => break,
                Ok(n) => {
                    if std::io::Write::write_all(&mut to_ssh, &buffer[..n]).is_err() {
                        break;
                    }
                }
                Err(err) if err.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
    });
}

/// Starts the stop session for the command's group `pgid`; its result comes on the receiver.
fn begin_stop(launch: &Launch<'_>, pgid: i32) -> oneshot::Receiver<Result<(), StopFailure>> {
    let (done, result) = oneshot::channel();
    let mut stop = command::ssh(launch.settings, launch.key, launch.route);
    stop.arg("-T").arg("--").arg(&launch.settings.host).arg(stop_script(pgid, launch.settings.stop_grace_tenths));
    stop.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::piped()).process_group(0).kill_on_drop(true);
    let grace = Duration::from_millis(u64::from(launch.settings.stop_grace_tenths) * 100);
    let patience = Duration::from_secs(u64::from(launch.settings.connect_timeout) + 10) + grace;
    let address = launch.settings.address();
    tokio::spawn(async move {
        let failure = |why| StopFailure { address, pgid, why };
        let result = match stop.spawn() {
            Err(err) => Err(failure(StopProblem::NoSsh(err))),
            Ok(child) => match timeout(patience, child.wait_with_output()).await {
                Ok(Ok(output)) if output.status.success() => Ok(()),
                Ok(Ok(output)) => Err(failure(StopProblem::Failed(String::from_utf8_lossy(&output.stderr).into()))),
                Ok(Err(err)) => Err(failure(StopProblem::Lost(err))),
                Err(_) => Err(failure(StopProblem::TooSlow(patience))),
            },
        };
        let _ = done.send(result);
    });
    result
}

/// Why the stop session did not stop the command's group: the remote command may still run.
#[derive(Debug)]
pub struct StopFailure {
    /// The host, `host:port`.
    address: String,
    pgid: i32,
    why: StopProblem,
}

#[derive(Debug)]
enum StopProblem {
    /// ssh could not be started.
    NoSsh(std::io::Error),
    /// The session failed; what ssh said.
    Failed(String),
    /// Waiting for it failed.
    Lost(std::io::Error),
    /// It did not finish within this long.
    TooSlow(Duration),
}

impl std::fmt::Display for StopFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let address = &self.address;
        match &self.why {
            StopProblem::NoSsh(err) => write!(f, "cannot run ssh: {err}")?,
            StopProblem::Failed(said) => {
                write!(f, "the stop session to {address} failed ({})", terminal_safe(said.trim()))?
            }
            StopProblem::Lost(err) => write!(f, "the stop session to {address} failed: {err}")?,
            StopProblem::TooSlow(patience) => {
                write!(f, "the stop session to {address} did not finish in {} s", patience.as_secs())?
            }
        }
        write!(f, "; process group {} may still be running there", self.pgid)
    }
}

/// What a [`pump`] shares with the call and the other pump.
struct PumpLinks {
    /// The markers' nonce.
    nonce: String,
    /// Set by the pump that sees the start marker; held output waits for it.
    started: Arc<watch::Sender<bool>>,
    /// Set once ssh has ended: a read then waits at most [`EOF_WAIT`].
    ssh_ended: watch::Receiver<bool>,
    /// To the call's event loop.
    events: mpsc::UnboundedSender<PumpEvent>,
}

/// Copies one of ssh's output streams to ours: markers out, and everything before the start marker held back (it
/// is ssh's own error text when the command never starts). It ends at the stream's end of file (or once ssh has
/// ended and a read waited [`EOF_WAIT`] in vain), after everything read is written.
async fn pump<R: AsyncRead + Unpin, W: AsyncWrite + Unpin>(mut from: R, stream: StreamKind, sink: W, links: PumpLinks) {
    let PumpLinks { nonce, started, ssh_ended, events } = links;
    let mut scanner = Scanner::new(&nonce);
    let mut output = LocalOutput { stream, sink, broken: false, events: events.clone() };
    let mut buffer = vec![0u8; 64 * 1024];
    let (mut out, mut markers, mut held) = (Vec::new(), Vec::new(), Vec::new());
    let mut start_seen = started.subscribe();
    loop {
        out.clear();
        let read = tokio::select! {
            // Data that is there is always read first: the wait only ends a read that finds nothing.
            biased;
            read = from.read(&mut buffer) => read,
            // What this stream held waits for the start marker, which the other stream may bring while this one
            // is quiet (`echo ready; sleep 30`): then it is written at once, not with this stream's next bytes.
            () = async { drop(start_seen.wait_for(|started| *started).await) }, if !held.is_empty() => {
                output.write(&std::mem::take(&mut held)).await;
                continue;
            }
            () = eof_wait_after(ssh_ended.clone()) => Ok(0),
        };
        let n = match read {
            Ok(0) | Err(_) => {
                scanner.finish(&mut out);
                0
            }
            Ok(n) => {
                scanner.feed(&buffer[..n], &mut out, &mut markers);
                n
            }
        };
        for marker in markers.drain(..) {
            if matches!(marker, Marker::Started { .. }) {
                started.send_replace(true);
            }
            let _ = events.send(PumpEvent::Marker(marker));
        }
        if *started.borrow() {
            if !held.is_empty() {
                output.write(&std::mem::take(&mut held)).await;
            }
            output.write(&out).await;
        } else {
            held.extend_from_slice(&out);
            if held.len() > MAX_HELD {
                let excess: Vec<u8> = held.drain(..held.len() - MAX_HELD).collect();
                output.write(&excess).await;
            }
        }
        if n == 0 {
            break;
        }
    }
    let _ = events.send(PumpEvent::Eof(stream, held));
}

/// [`EOF_WAIT`] after ssh has ended (counted from now if it already has); never if it does not.
async fn eof_wait_after(mut ssh_ended: watch::Receiver<bool>) {
    if ssh_ended.wait_for(|ended| *ended).await.is_err() {
        std::future::pending::<()>().await;
    }
    tokio::time::sleep(EOF_WAIT).await;
}

/// Our stdout or stderr (`sink`). A write error on stdout means our reader is gone: reported once, then output is
/// dropped (ssh's is still read, so the host side never blocks on it). Errors on stderr are ignored. A write takes as
/// long as our reader does: no deadline cuts it.
struct LocalOutput<W> {
    stream: StreamKind,
    sink: W,
    broken: bool,
    events: mpsc::UnboundedSender<PumpEvent>,
}

impl<W: AsyncWrite + Unpin> LocalOutput<W> {
    async fn write(&mut self, bytes: &[u8]) {
        if self.broken || bytes.is_empty() {
            return;
        }
        let result = write_all(&mut self.sink, bytes).await;
        if result.is_err() && self.stream == StreamKind::Stdout {
            self.broken = true;
            let _ = self.events.send(PumpEvent::BrokenPipe);
        }
    }
}

async fn write_all(mut to: impl AsyncWrite + Unpin, bytes: &[u8]) -> std::io::Result<()> {
    to.write_all(bytes).await?;
    to.flush().await
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reader far slower than every deadline of the call (an hour of the paused clock between reads; the clock jumps
    /// to each timer as soon as nothing else can run, so any deadline the pump had would pass): what ssh sent before
    /// it ended all arrives, and only then does the stream end.
    #[tokio::test(start_paused = true)]
    async fn what_ssh_sent_waits_for_a_stalled_reader_however_long() {
        let sent = testkit::random_bytes(300_000, 3);
        let (mut ssh_side, from_ssh) = tokio::io::duplex(64 * 1024);
        let (to_reader, mut reader) = tokio::io::duplex(4 * 1024);
        let (events, mut inbox) = mpsc::unbounded_channel();
        let ssh_ended = watch::channel(true).0;
        let started = Arc::new(watch::channel(true).0);
        let writer = tokio::spawn({
            let sent = sent.clone();
            async move { ssh_side.write_all(&sent).await.unwrap() }
        });
        let copy = tokio::spawn(pump(
            from_ssh,
            StreamKind::Stdout,
            to_reader,
            PumpLinks { nonce: "nonce".into(), started, ssh_ended: ssh_ended.subscribe(), events },
        ));
        // The reader takes an hour for each 4 KiB: every deadline the pump could have passes between two reads.
        let mut received = Vec::new();
        let mut piece = vec![0u8; 4096];
        loop {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            match reader.read(&mut piece).await.unwrap() {
                0 => break,
                n => received.extend_from_slice(&piece[..n]),
            }
            if received.len() < sent.len() {
                assert!(
                    inbox.try_recv().is_err(),
                    "the stream ended at byte {} while our reader was slow",
                    received.len()
                );
            }
        }
        assert!(received == sent, "{} of {} bytes arrived", received.len(), sent.len());
        writer.await.unwrap();
        copy.await.unwrap();
        assert!(matches!(inbox.recv().await, Some(PumpEvent::Eof(StreamKind::Stdout, held)) if held.is_empty()));
    }

    fn started(pgid: i32) -> Event {
        Event::Pump(PumpEvent::Marker(Marker::Started { pgid }))
    }

    /// A signal that comes before the command started waits for its start marker (so long), then goes to its group.
    #[test]
    fn a_signal_before_the_start_is_delivered_at_the_start() {
        let mut state = CallState::default();
        assert_eq!(state.on(Event::Interrupt(Interrupt::Int)), []);
        assert_eq!(state.on(Event::QuitOrStop(Received::Forward(Signal::SIGQUIT))), []);
        assert!(matches!(state.next_timer(), Some((Timer::Header, _))), "the start is waited for only so long");
        let delivered = state.on(started(42));
        assert_eq!(delivered, [Action::Deliver(42, Signal::SIGINT), Action::Deliver(42, Signal::SIGQUIT)]);
        assert_eq!(state.next_timer(), None);
        assert_eq!(state.on(Event::Interrupt(Interrupt::Term)), [Action::Deliver(42, Signal::SIGTERM)]);
        state.on(Event::Pump(PumpEvent::Marker(Marker::Exited { code: 143 })));
        assert_eq!(state.on(Event::Interrupt(Interrupt::Int)), [], "the command ended: nothing to deliver to");
    }

    /// The start never came: the call is given up when the wait for it ends, and ssh is killed.
    #[test]
    fn a_call_that_never_starts_is_given_up_after_a_signal() {
        let mut state = CallState::default();
        state.on(Event::Interrupt(Interrupt::Int));
        assert_eq!(state.on(Event::Timer(Timer::Header)), [Action::Kill]);
        assert!(state.done());
        assert!(matches!(state.ending().end, SessionEnd::Interrupted(Interrupt::Int, None)));
    }

    /// Our stdout closed: the command's group is stopped once, as soon as it is known.
    #[test]
    fn a_closed_stdout_stops_the_group_once_it_is_known() {
        let mut state = CallState::default();
        assert_eq!(state.on(Event::Pump(PumpEvent::BrokenPipe)), [], "no group to stop yet");
        assert_eq!(state.on(started(7)), [Action::BeginStop(7)]);
        assert_eq!(state.on(Event::Pump(PumpEvent::BrokenPipe)), []);
        assert_eq!(state.on(Event::Timer(Timer::Drain)), [], "begun once");
        state.on(Event::StopDone(None));
        assert_eq!(state.on(Event::Timer(Timer::AfterStop)), [Action::Kill]);
        assert!(state.done(), "nobody reads what is left");
        assert!(matches!(state.ending().end, SessionEnd::BrokenPipe));
    }

    /// After the exit marker, processes the command left may hold its output only for the drain; once ssh ended and
    /// both streams are read, the call is over with the command's code.
    #[test]
    fn the_exit_marker_drains_then_stops_what_the_command_left() {
        let mut state = CallState::default();
        state.on(started(7));
        state.on(Event::Pump(PumpEvent::Marker(Marker::Exited { code: 3 })));
        assert!(matches!(state.next_timer(), Some((Timer::Drain, _))));
        assert_eq!(state.on(Event::Timer(Timer::Drain)), [Action::BeginStop(7)]);
        assert_eq!(state.on(Event::SshExited(Some(3))), [Action::SshEnded]);
        assert!(!state.done(), "the streams are still read");
        state.on(Event::Pump(PumpEvent::Eof(StreamKind::Stdout, Vec::new())));
        state.on(Event::Pump(PumpEvent::Eof(StreamKind::Stderr, Vec::new())));
        assert!(state.done());
        assert!(matches!(state.ending().end, SessionEnd::Exited { code: 3, delivered: None }));
    }

    /// Ctrl-Z before the start stops the group at its start; once nothing runs on the host it stops this process.
    #[test]
    fn ctrl_z_waits_for_the_group_or_stops_this_process_alone() {
        let mut state = CallState::default();
        assert_eq!(state.on(Event::QuitOrStop(Received::Stop)), []);
        assert_eq!(state.on(started(9)), [Action::StopBoth(9)]);
        assert_eq!(state.on(Event::QuitOrStop(Received::Stop)), [Action::StopBoth(9)]);
        state.on(Event::Pump(PumpEvent::Marker(Marker::Exited { code: 0 })));
        assert_eq!(state.on(Event::QuitOrStop(Received::Stop)), [Action::StopHere]);
        let mut never = CallState::default();
        never.on(Event::QuitOrStop(Received::Stop));
        never.on(Event::SshExited(Some(255)));
        assert!(never.ending().stop_here, "the command never started: the Ctrl-Z stops this process as it came");
    }

    /// A call that never started says what ssh said (its stderr), and writes what came on stdout.
    #[test]
    fn a_call_that_never_started_reports_what_ssh_said() {
        let mut state = CallState::default();
        state.on(Event::Pump(PumpEvent::Eof(StreamKind::Stdout, b"banner".to_vec())));
        state.on(Event::Pump(PumpEvent::Eof(StreamKind::Stderr, b"Permission denied".to_vec())));
        state.on(Event::SshExited(Some(255)));
        assert!(state.done());
        let ending = state.ending();
        assert!(matches!(&ending.end, SessionEnd::NotStarted(Some(255), said) if said == "Permission denied"));
        assert_eq!((ending.out.as_slice(), ending.err.as_slice()), (&b"banner"[..], &b""[..]));
        let mut lost = CallState::default();
        lost.on(started(5));
        lost.on(Event::Pump(PumpEvent::Eof(StreamKind::Stderr, b"held".to_vec())));
        lost.on(Event::SshExited(Some(255)));
        let ending = lost.ending();
        assert!(matches!(ending.end, SessionEnd::Lost(Some(255))));
        assert_eq!(ending.err, b"held", "the command's own output, written out");
    }

    /// A second interrupt once ssh has ended stops waiting for the streams.
    #[test]
    fn an_interrupt_after_ssh_ended_ends_the_call() {
        let mut state = CallState::default();
        state.on(started(5));
        state.on(Event::SshExited(None));
        assert_eq!(state.on(Event::Interrupt(Interrupt::Int)), []);
        assert!(state.done());
        assert!(matches!(state.ending().end, SessionEnd::Interrupted(Interrupt::Int, None)));
    }

    /// Once ssh has ended, a call that was not stopped here has no deadline left: nothing will cut its output.
    #[test]
    fn no_deadline_outlives_ssh_unless_the_call_is_being_stopped() {
        let mut state = CallState::default();
        state.set_timer(Timer::Drain, DRAIN);
        state.set_timer(Timer::AfterStop, AFTER_STOP);
        state.ssh_ended(Some(0));
        assert_eq!(state.next_timer(), None);
        let mut interrupted = CallState { broken_pipe: true, ..CallState::default() };
        interrupted.set_timer(Timer::AfterStop, AFTER_STOP);
        interrupted.ssh_ended(Some(0));
        assert!(matches!(interrupted.next_timer(), Some((Timer::AfterStop, _))), "a stop in progress keeps its");
        let mut signalled = CallState { interrupt: Some(Interrupt::Int), pgid: Some(7), ..CallState::default() };
        signalled.set_timer(Timer::Drain, DRAIN);
        signalled.ssh_ended(Some(0));
        assert_eq!(signalled.next_timer(), None, "a delivered signal is no stop: nothing cuts the output");
    }

    /// A stream something else still holds open once ssh has ended (nothing more comes) is taken as ended: the
    /// call does not wait for it without end.
    #[tokio::test]
    async fn a_stream_held_open_after_ssh_ended_is_given_up() {
        let (_holder, held_open) = tokio::io::duplex(64);
        let (events, mut inbox) = mpsc::unbounded_channel();
        let ssh_ended = watch::channel(true).0;
        let started = Arc::new(watch::channel(true).0);
        let sink = tokio::io::sink();
        let copy = tokio::spawn(pump(
            held_open,
            StreamKind::Stderr,
            sink,
            PumpLinks { nonce: "nonce".into(), started, ssh_ended: ssh_ended.subscribe(), events },
        ));
        timeout(Duration::from_secs(30), copy).await.expect("the copy waited for end of file without end").unwrap();
        assert!(matches!(inbox.recv().await, Some(PumpEvent::Eof(StreamKind::Stderr, held)) if held.is_empty()));
    }
}
