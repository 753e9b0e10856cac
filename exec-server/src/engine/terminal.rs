//! A command on a pseudo-terminal (docs/exec-server.md, "TTY runs"): what a job asks for, the handle a transport keeps
//! to resize the terminal and to find its foreground group while the command runs, and the master's output as a stream
//! that ends where a pty's ends (EIO, not a zero read).

use std::os::fd::{AsFd, OwnedFd};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use process_group::Pgid;
use tokio::io::{AsyncRead, ReadBuf};

/// A job's terminal: its first size, the client's modes, and the handle the transport keeps.
#[derive(Debug, Clone)]
pub struct TerminalJob {
    pub rows: u16,
    pub cols: u16,
    /// The request's `tty.modes`: laid over the pty's before the command starts ([`TerminalJob::set_modes`]).
    pub modes: Option<protocol::TerminalModes>,
    pub handle: Arc<TerminalHandle>,
}

/// The terminal of a running command, for its transport: resize it, ask its foreground group. Set when the
/// command starts, let go when it has ended (the master is then closed once the output is read).
#[derive(Debug, Default)]
pub struct TerminalHandle {
    /// A descriptor of the master (a duplicate: the engine's halves read and write).
    master: Mutex<Option<OwnedFd>>,
}

/// The terminal is gone: the command has ended (or never started).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TerminalGone;

impl TerminalHandle {
    pub fn new() -> Arc<Self> {
        Arc::default()
    }

    pub(super) fn attach(&self, master: OwnedFd) {
        *self.master.lock().unwrap() = Some(master);
    }

    pub(super) fn detach(&self) {
        self.master.lock().unwrap().take();
    }

    /// Sets the window size; the kernel sends SIGWINCH to the foreground group (none when it did not change).
    pub fn resize(&self, rows: u16, cols: u16) -> Result<(), TerminalGone> {
        let master = self.master.lock().unwrap();
        let master = master.as_ref().ok_or(TerminalGone)?;
        let size = rustix::termios::Winsize { ws_row: rows, ws_col: cols, ws_xpixel: 0, ws_ypixel: 0 };
        rustix::termios::tcsetwinsize(master, size).map_err(|_| TerminalGone)
    }

    /// The terminal's foreground process group (the one Ctrl-C reaches): the leader's, or a job's under a shell
    /// with job control.
    pub fn foreground_group(&self) -> Option<Pgid> {
        let master = self.master.lock().unwrap();
        let group = rustix::termios::tcgetpgrp(master.as_ref()?).ok()?;
        Pgid::new(group.as_raw_nonzero().get())
    }
}

impl TerminalJob {
    /// Sets the pty's modes before the command starts: first what a fresh pty lacks, IUTF8, so that the line
    /// discipline erases a whole UTF-8 character on Backspace (without it `é` then Backspace leaves a stray byte);
    /// then the client's modes over that, as sshd applies a `pty-req`'s. *Decisions:* IUTF8 is the default because
    /// UTF-8 is what terminals speak now, and a client's modes win over it (a local terminal without `iutf8` gets a
    /// remote one without, as under ssh); like sshd, a mode the system refuses is logged and the command runs.
    pub(super) fn set_modes(&self, master: &impl AsFd) {
        use rustix::termios::{tcgetattr, tcsetattr, InputModes, OptionalActions};
        let Ok(mut modes) = tcgetattr(master) else { return };
        modes.input_modes |= InputModes::IUTF8;
        if let Some(Err(err)) = self.modes.as_ref().map(|requested| requested.apply(&mut modes)) {
            tracing::warn!(%err, "a TTY request's speed was refused; the pty keeps its own");
        }
        if let Err(err) = tcsetattr(master, OptionalActions::Now, &modes) {
            tracing::warn!(%err, "cannot set a TTY run's terminal modes; the command runs with the pty's");
        }
    }
}

/// The master's output: ends (a zero read) at EIO, which is how a pty says every slave descriptor is closed.
pub struct TerminalOutput(pub pty_process::OwnedReadPty);

impl AsyncRead for TerminalOutput {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        match Pin::new(&mut self.0).poll_read(cx, buf) {
            Poll::Ready(Err(err)) if err.raw_os_error() == Some(nix::libc::EIO) => Poll::Ready(Ok(())),
            other => other,
        }
    }
}
