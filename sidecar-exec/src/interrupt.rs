//! The signals that stop a client and the exit code each gives, shared by both clients: SIGINT 130, SIGTERM 143,
//! SIGHUP 129 (128 + the signal, what a shell reports for a command killed by it). Either client ends the remote
//! command before it exits with one of them.

use tokio::signal::unix::{signal, Signal, SignalKind};

/// A stopping signal the client received.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Interrupt {
    Int,
    Term,
    Hup,
}

impl Interrupt {
    /// The client's exit code for it: 128 + the signal number.
    pub fn code(self) -> i32 {
        match self {
            Interrupt::Int => 130,
            Interrupt::Term => 143,
            Interrupt::Hup => 129,
        }
    }
}

/// Handlers for the three signals, installed together (from then on they no longer kill the process).
pub struct Interrupts {
    int: Signal,
    term: Signal,
    hup: Signal,
}

impl Interrupts {
    /// Installs the handlers; needs a tokio runtime with signals enabled.
    pub fn install() -> std::io::Result<Self> {
        Ok(Interrupts {
            int: signal(SignalKind::interrupt())?,
            term: signal(SignalKind::terminate())?,
            hup: signal(SignalKind::hangup())?,
        })
    }

    /// The next stopping signal.
    pub async fn recv(&mut self) -> Interrupt {
        tokio::select! {
            _ = self.int.recv() => Interrupt::Int,
            _ = self.term.recv() => Interrupt::Term,
            _ = self.hup.recv() => Interrupt::Hup,
        }
    }
}
