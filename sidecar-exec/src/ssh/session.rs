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
}

impl CallState {
    /// A signal that came before the command started: it may be about to, and then it gets the signal like any
    /// other; it is waited for only so long.
    fn hold_until_started(&mut self, launch: &Launch<'_>, signal: Signal) {
        self.pending.push(signal);
        let patience = Duration::from_secs(u64::from(launch.settings.connect_timeout) + 5);
        self.set_timer(Timer::Header, patience);
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

/// Runs the call to its end and says how it ended.
pub async fn run(launch: &Launch<'_>, interrupts: &mut InterruptHandlers) -> SessionEnd {
    // Before ssh starts, so that no QUIT or TSTP falls between: a handler caught here is reset in ssh by its exec.
    let Ok(mut quit_and_stop) = QuitAndStop::install() else {
        return SessionEnd::NotStarted(None, "cannot install the SIGQUIT and SIGTSTP handlers".into());
    };
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
            Err(err) => return SessionEnd::NotStarted(None, format!("cannot make a pipe for stdin: {err}")),
        },
    })
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    if !launch.tty {
        ssh.process_group(0);
    }
    let mut child = match ssh.spawn() {
        Ok(child) => child,
        Err(err) => {
            return SessionEnd::NotStarted(None, format!("cannot run ssh: {err} (is OpenSSH's client installed?)"))
        }
    };
    // Dropping the command drops its copy of the pipe's reading end: ssh holds the only one, so a write after ssh
    // ended fails instead of blocking.
    drop(ssh);
    if let Some(writer) = terminal_input {
        copy_terminal_input(writer);
    }
    let started = Arc::new(watch::channel(false).0);
    let (events, mut inbox) = mpsc::unbounded_channel();
    let (Some(stdout), Some(stderr)) = (child.stdout.take(), child.stderr.take()) else {
        return SessionEnd::NotStarted(None, "ssh started without its pipes".into());
    };
    let nonce = launch.nonce.0.clone();
    let ssh_ended = watch::channel(false).0;
    let (out, err) = (tokio::io::stdout(), tokio::io::stderr());
    tokio::spawn(pump(
        stdout,
        StreamKind::Stdout,
        out,
        nonce.clone(),
        started.clone(),
        ssh_ended.subscribe(),
        events.clone(),
    ));
    tokio::spawn(pump(stderr, StreamKind::Stderr, err, nonce, started.clone(), ssh_ended.subscribe(), events));

    let mut state = CallState::default();
    loop {
        if state.ssh_status.is_some() && state.eofs == 2 {
            break;
        }
        let next = state.next_timer();
        tokio::select! {
            Some(event) = inbox.recv() => match event {
                PumpEvent::Marker(Marker::Started { pgid }) => {
                    state.pgid = Some(pgid);
                    state.timers.retain(|(timer, _)| *timer != Timer::Header);
                    for signal in std::mem::take(&mut state.pending) {
                        deliver(launch, pgid, signal);
                    }
                    if std::mem::take(&mut state.stop_pending) {
                        signals_as_sent::stop_both(|signal| deliver(launch, pgid, signal), |stop| stop()).await;
                    }
                    if state.broken_pipe {
                        begin_stop(launch, &mut state);
                    }
                }
                PumpEvent::Marker(Marker::Exited { code }) => {
                    state.exit_code = Some(code);
                    if state.ssh_status.is_none() {
                        state.set_timer(Timer::Drain, DRAIN);
                    }
                }
                PumpEvent::Marker(Marker::NoCwd) => state.no_cwd = true,
                PumpEvent::BrokenPipe => {
                    if !state.broken_pipe {
                        state.broken_pipe = true;
                        begin_stop(launch, &mut state);
                    }
                }
                PumpEvent::Eof(stream, held) => {
                    state.eofs += 1;
                    match stream {
                        StreamKind::Stdout => state.held_out = held,
                        StreamKind::Stderr => state.held_err = held,
                    }
                }
            },
            status = child.wait(), if state.ssh_status.is_none() => {
                state.ssh_ended(status.ok().and_then(|s| s.code()));
                ssh_ended.send_replace(true);
            }
            interrupt = interrupts.recv() => {
                state.interrupt = Some(interrupt);
                if state.ssh_status.is_some() {
                    break;
                }
                match state.pgid {
                    // Delivered as it came, every time (a second Ctrl-C is a second SIGINT, as natively); the call
                    // goes on until the command ends as it does with it.
                    Some(pgid) if state.exit_code.is_none() => drop(deliver(launch, pgid, interrupt.signal())),
                    Some(_) => {}
                    None => state.hold_until_started(launch, interrupt.signal()),
                }
            }
            received = quit_and_stop.recv() => match (received, state.pgid) {
                (Received::Forward(signal), Some(pgid)) if state.exit_code.is_none() => {
                    drop(deliver(launch, pgid, signal));
                }
                (Received::Forward(signal), None) if state.ssh_status.is_none() => {
                    state.hold_until_started(launch, signal);
                }
                (Received::Forward(_), _) => {}
                (Received::Stop, Some(pgid)) if state.exit_code.is_none() => {
                    signals_as_sent::stop_both(|signal| deliver(launch, pgid, signal), |stop| stop()).await;
                }
                (Received::Stop, None) if state.ssh_status.is_none() => state.stop_pending = true,
                // Nothing runs on the host any more to stop with us.
                (Received::Stop, _) => {
                    let _ = nix::sys::signal::raise(Signal::SIGSTOP);
                }
            },
            result = async { state.stop.as_mut().unwrap().await }, if state.stop.is_some() => {
                state.stop = None;
                if let Ok(Err(why)) = result {
                    state.stop_failure = Some(why);
                }
                if state.ssh_status.is_none() {
                    state.set_timer(Timer::AfterStop, AFTER_STOP);
                }
            }
            _ = sleep_until(next.map_or_else(Instant::now, |(_, at)| at)), if next.is_some() => {
                let (timer, _) = next.unwrap_or((Timer::Drain, Instant::now()));
                state.timers.retain(|(t, _)| *t != timer);
                match timer {
                    Timer::Drain => begin_stop(launch, &mut state),
                    Timer::AfterStop if !state.stopped_by_us() => {
                        // ssh's own end and its pipes' end of file finish the call: what it already sent is ours.
                        let _ = child.start_kill();
                    }
                    Timer::Header | Timer::AfterStop => {
                        let _ = child.start_kill();
                        break;
                    }
                }
            }
        }
    }

    if state.stop_pending {
        // The command never started: the Ctrl-Z stops this process alone, as it came.
        let _ = nix::sys::signal::raise(Signal::SIGSTOP);
    }
    if state.pgid.is_some() || state.exit_code.is_some() {
        let _ = std::io::Write::write_all(&mut std::io::stdout(), &state.held_out);
        let _ = std::io::Write::write_all(&mut std::io::stderr(), &state.held_err);
    }
    let ssh_status = state.ssh_status.flatten();
    if state.broken_pipe {
        SessionEnd::BrokenPipe
    } else if let Some(code) = state.exit_code {
        SessionEnd::Exited { code, delivered: state.interrupt }
    } else if let Some(interrupt) = state.interrupt {
        SessionEnd::Interrupted(interrupt, state.stop_failure)
    } else if state.no_cwd {
        SessionEnd::NoCwd
    } else if state.pgid.is_some() {
        SessionEnd::Lost(ssh_status)
    } else {
        let _ = std::io::Write::write_all(&mut std::io::stdout(), &state.held_out);
        SessionEnd::NotStarted(ssh_status, String::from_utf8_lossy(&state.held_err).into_owned())
    }
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

/// Starts the stop session for the command's group, once, when the group is known.
fn begin_stop(launch: &Launch<'_>, state: &mut CallState) {
    let Some(pgid) = state.pgid else { return };
    if state.stop_begun {
        return;
    }
    state.stop_begun = true;
    let (done, result) = oneshot::channel();
    state.stop = Some(result);
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

/// Copies one of ssh's output streams to ours: markers out, and everything before the start marker held back (it
/// is ssh's own error text when the command never starts). It ends at the stream's end of file (or once ssh has
/// ended and a read waited [`EOF_WAIT`] in vain), after everything read is written.
async fn pump<R: AsyncRead + Unpin, W: AsyncWrite + Unpin>(
    mut from: R,
    stream: StreamKind,
    sink: W,
    nonce: String,
    started: Arc<watch::Sender<bool>>,
    ssh_ended: watch::Receiver<bool>,
    events: mpsc::UnboundedSender<PumpEvent>,
) {
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
            "nonce".into(),
            started,
            ssh_ended.subscribe(),
            events,
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
            "nonce".into(),
            started,
            ssh_ended.subscribe(),
            events,
        ));
        timeout(Duration::from_secs(30), copy).await.expect("the copy waited for end of file without end").unwrap();
        assert!(matches!(inbox.recv().await, Some(PumpEvent::Eof(StreamKind::Stderr, held)) if held.is_empty()));
    }
}
