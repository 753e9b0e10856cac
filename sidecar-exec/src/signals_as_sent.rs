//! Signals as sent, for both clients: which signals a client takes while its command runs and
//! what it does with each. SIGINT, SIGTERM, SIGHUP and SIGQUIT go to the remote group as the same signal; SIGTSTP
//! (Ctrl-Z) stops the remote group and then the client itself, and SIGCONT on resume continues the remote group.
//! How a signal reaches the remote group is each client's (sidecar-exec: `POST /runs/{id}/signal`; ssh-exec: a
//! second session's `kill`).

use std::future::Future;

use nix::sys::signal::Signal;
use tokio::signal::unix::{signal, SignalKind};

/// A signal the client received.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Received {
    /// Delivered to the remote group as it is.
    Forward(Signal),
    /// Ctrl-Z: stop the remote group, then this process ([`stop_both`]).
    Stop,
}

/// All five handlers, installed together before the command starts (from then on these signals no longer kill or
/// stop the process by themselves): the three stop signals every binary takes ([`process_group::StopSignals`]),
/// forwarded here, and the two beyond them.
pub struct ForwardedSignals {
    stop: process_group::StopSignals,
    beyond: QuitAndStop,
}

impl ForwardedSignals {
    pub fn install() -> std::io::Result<Self> {
        Ok(ForwardedSignals { stop: process_group::StopSignals::install()?, beyond: QuitAndStop::install()? })
    }

    pub async fn recv(&mut self) -> Received {
        tokio::select! {
            signal = self.stop.recv() => Received::Forward(signal),
            received = self.beyond.recv() => received,
        }
    }
}

/// The two beyond the stopping signals ([`crate::interrupt`]): SIGQUIT and SIGTSTP, for a client that takes those
/// three on their own (ssh-exec, which is interrupted by them before its command starts too).
pub struct QuitAndStop {
    quit: tokio::signal::unix::Signal,
    tstp: tokio::signal::unix::Signal,
}

impl QuitAndStop {
    pub fn install() -> std::io::Result<Self> {
        Ok(QuitAndStop {
            quit: signal(SignalKind::quit())?,
            tstp: signal(SignalKind::from_raw(Signal::SIGTSTP as i32))?,
        })
    }

    pub async fn recv(&mut self) -> Received {
        tokio::select! {
            _ = self.quit.recv() => Received::Forward(Signal::SIGQUIT),
            _ = self.tstp.recv() => Received::Stop,
        }
    }
}

/// Ctrl-Z: TSTP to the remote group (`deliver`, waited for), then this process stops (SIGSTOP, which cannot be
/// caught); when it is continued (`fg`, `bg`), CONT to the remote group. `around_stop` runs the stop itself: a
/// client holding the terminal raw gives it back cooked while stopped ([`stop_self`] for one that does not).
pub async fn stop_both<F: Future>(mut deliver: impl FnMut(Signal) -> F, around_stop: impl FnOnce(fn())) {
    deliver(Signal::SIGTSTP).await;
    around_stop(stop_self);
    deliver(Signal::SIGCONT).await;
}

/// Stops this process until it is continued.
pub fn stop_self() {
    let _ = nix::sys::signal::raise(Signal::SIGSTOP);
}
