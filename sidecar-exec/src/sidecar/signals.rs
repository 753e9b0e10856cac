//! Signals as sent (issue 22, design §7): what the client does with a signal it receives while it follows a
//! streamed run. SIGINT, SIGTERM, SIGHUP and SIGQUIT go to the remote group as the same signal and the client keeps
//! printing until the command ends by itself (a second Ctrl-C is delivered again); SIGTSTP stops the remote group
//! and then the client itself, and SIGCONT on resume continues the remote group.

use nix::sys::signal::Signal;
use protocol::RunId;
use tokio::signal::unix::{signal, SignalKind};

use crate::sidecar::http::authorized;
use crate::sidecar::runs::CANCEL_WITHIN;
use crate::sidecar::settings::CallSettings;
use crate::sidecar::sidecars::Target;

/// A signal the client received.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Received {
    /// Delivered to the remote group as it is.
    Forward(Signal),
    /// Ctrl-Z: stop the remote group, then this process.
    Stop,
}

/// The handlers, installed together before the request goes out (from then on these signals no longer kill or
/// stop the process by themselves).
pub struct ForwardedSignals {
    int: tokio::signal::unix::Signal,
    term: tokio::signal::unix::Signal,
    hup: tokio::signal::unix::Signal,
    quit: tokio::signal::unix::Signal,
    tstp: tokio::signal::unix::Signal,
}

impl ForwardedSignals {
    pub fn install() -> std::io::Result<Self> {
        Ok(ForwardedSignals {
            int: signal(SignalKind::interrupt())?,
            term: signal(SignalKind::terminate())?,
            hup: signal(SignalKind::hangup())?,
            quit: signal(SignalKind::quit())?,
            tstp: signal(SignalKind::from_raw(Signal::SIGTSTP as i32))?,
        })
    }

    pub async fn recv(&mut self) -> Received {
        tokio::select! {
            _ = self.int.recv() => Received::Forward(Signal::SIGINT),
            _ = self.term.recv() => Received::Forward(Signal::SIGTERM),
            _ = self.hup.recv() => Received::Forward(Signal::SIGHUP),
            _ = self.quit.recv() => Received::Forward(Signal::SIGQUIT),
            _ = self.tstp.recv() => Received::Stop,
        }
    }
}

/// The wire's name of a signal (`POST /runs/{id}/signal {"signal": "INT"}`).
fn wire_name(signal: Signal) -> &'static str {
    signal.as_str().trim_start_matches("SIG")
}

/// Whether the server took the signal for the run: `true` for 200, and for 409 (the run has just ended: its exit
/// frame is on its way). Anything else (no runs endpoint, an unnamed run, no answer) is `false`: the caller falls
/// back to cancelling.
pub async fn deliver(
    target: &Target,
    client: &reqwest::Client,
    settings: &CallSettings,
    id: &RunId,
    signal: Signal,
) -> bool {
    let body = format!(r#"{{"signal":"{}"}}"#, wire_name(signal));
    let request = authorized(client.post(target.endpoint(&format!("/runs/{id}/signal"))), target, Some(settings))
        .header("content-type", "application/json")
        .body(body);
    match tokio::time::timeout(CANCEL_WITHIN, request.send()).await {
        Ok(Ok(response)) => response.status().is_success() || response.status() == reqwest::StatusCode::CONFLICT,
        _ => false,
    }
}

/// Ctrl-Z: TSTP to the remote group, then this process stops (SIGSTOP, which cannot be caught); when it is
/// continued (`fg`, `bg`), CONT to the remote group. While stopped, the run's timeout still counts.
pub async fn stop_both(target: &Target, client: &reqwest::Client, settings: &CallSettings, id: &RunId) {
    deliver(target, client, settings, id, Signal::SIGTSTP).await;
    // In a TTY run the shell that continues us expects its terminal cooked.
    crate::sidecar::tty::raw_mode::cooked_while(|| {
        let _ = nix::sys::signal::raise(Signal::SIGSTOP);
    });
    deliver(target, client, settings, id, Signal::SIGCONT).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_names_are_the_servers() {
        let names =
            [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP, Signal::SIGQUIT, Signal::SIGTSTP, Signal::SIGCONT]
                .map(wire_name);
        assert_eq!(names, ["INT", "TERM", "HUP", "QUIT", "TSTP", "CONT"]);
    }
}
