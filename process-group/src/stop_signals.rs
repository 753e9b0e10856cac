//! The signals that ask one of our processes to stop: SIGTERM (a container stop), SIGINT (Ctrl-C) and SIGHUP (a
//! closed terminal or session). Every binary takes the three alike — exec-server stops serving, `sidecar-ipc run`
//! passes the signal on to the orchestrator's group, the prompt server and sidecarctl stop — because SIGHUP's
//! default action, like the others', would end the process at once, before it could end what it started.

use nix::sys::signal::Signal;
use tokio::signal::unix::{signal, SignalKind};

/// Handlers for the three stop signals.
#[derive(Debug)]
pub struct StopSignals {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
    hup: tokio::signal::unix::Signal,
}

impl StopSignals {
    /// Installs the handlers now: from here on, for the life of the process, the three signals no longer end it by
    /// their default action, and one that arrives before [`StopSignals::recv`] is first polled is kept for it.
    pub fn install() -> std::io::Result<Self> {
        Ok(StopSignals {
            term: signal(SignalKind::terminate())?,
            int: signal(SignalKind::interrupt())?,
            hup: signal(SignalKind::hangup())?,
        })
    }

    /// The next stop signal.
    pub async fn recv(&mut self) -> Signal {
        tokio::select! {
            Some(()) = self.term.recv() => Signal::SIGTERM,
            Some(()) = self.int.recv() => Signal::SIGINT,
            Some(()) = self.hup.recv() => Signal::SIGHUP,
            else => std::future::pending().await,
        }
    }
}

/// The next stop signal from `signals`; never, without handlers (a process that could not install them can only be
/// killed).
pub async fn next_stop_signal(signals: Option<&mut StopSignals>) -> Signal {
    match signals {
        Some(signals) => signals.recv().await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn a_signal_sent_before_the_wait_is_kept_and_named() {
        let mut signals = StopSignals::install().unwrap();
        nix::sys::signal::raise(Signal::SIGHUP).unwrap();
        let received = tokio::time::timeout(Duration::from_secs(20), signals.recv()).await.unwrap();
        assert_eq!(received, Signal::SIGHUP);
    }
}
