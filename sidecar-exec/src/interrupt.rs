//! The signals that stop a client and the exit code each gives, shared by both clients: SIGINT 130, SIGTERM 143,
//! SIGHUP 129 (128 + the signal, what a shell reports for a command killed by it). Either client ends the remote
//! command before it exits with one of them. Which signals stop a process, and how they are waited for, is
//! [`process_group::StopSignals`], as in exec-server and sidecar-ipc.

use nix::sys::signal::Signal;
use process_group::StopSignals;

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
        128 + self.signal() as i32
    }

    /// The signal itself.
    pub fn signal(self) -> Signal {
        match self {
            Interrupt::Int => Signal::SIGINT,
            Interrupt::Term => Signal::SIGTERM,
            Interrupt::Hup => Signal::SIGHUP,
        }
    }
}

/// Handlers for the three signals, installed together (from then on they no longer kill the process). The client's
/// policy for each one that comes is its own (sidecar-exec ends its call at the first; ssh-exec stops the remote
/// group, and a second one stops waiting for the host); sidecarctl's escalating `Interrupts` are another policy.
pub struct InterruptHandlers(StopSignals);

impl InterruptHandlers {
    /// Installs the handlers; needs a tokio runtime with signals enabled.
    pub fn install() -> std::io::Result<Self> {
        StopSignals::install().map(InterruptHandlers)
    }

    /// The next stopping signal.
    pub async fn recv(&mut self) -> Interrupt {
        match self.0.recv().await {
            Signal::SIGINT => Interrupt::Int,
            Signal::SIGTERM => Interrupt::Term,
            _ => Interrupt::Hup,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_128_plus_the_signal() {
        assert_eq!([Interrupt::Int, Interrupt::Term, Interrupt::Hup].map(Interrupt::code), [130, 143, 129]);
    }
}
