//! Signals as sent over the runs API: how sidecar-exec delivers to the remote group what
//! [`crate::signals_as_sent`] says goes there, while it follows a streamed run; the client keeps printing until the
//! command ends by itself (a second Ctrl-C is delivered again).

use std::time::Duration;

use nix::sys::signal::Signal;
use protocol::RunId;

use crate::sidecar::config::settings::CallSettings;
use crate::sidecar::config::sidecars::Endpoint;
use crate::sidecar::wire::http::authorized;
use crate::signals_as_sent;

/// How long cancelling a run may take: the client is on its way out (a signal, a closed stdout), and a sidecar that
/// does not answer soon stops the run itself when its reattach window passes.
pub const CANCEL_WITHIN: Duration = Duration::from_secs(3);

/// The wire's name of a signal (`POST /runs/{id}/signal {"signal": "INT"}`).
fn wire_name(signal: Signal) -> &'static str {
    signal.as_str().trim_start_matches("SIG")
}

/// Whether the server took the signal for the run: `true` for 200, and for 409 (the run has just ended: its exit
/// frame is on its way). Anything else (no runs endpoint, an unnamed run, no answer) is `false`: the caller falls
/// back to cancelling.
pub async fn deliver(
    target: &Endpoint,
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

/// Ctrl-Z ([`signals_as_sent::stop_both`]) over the runs API. While stopped, the run's timeout still counts.
pub async fn stop_both(target: &Endpoint, client: &reqwest::Client, settings: &CallSettings, id: &RunId) {
    // In a TTY run the shell that continues us expects its terminal cooked.
    let cooked = |stop: fn()| crate::sidecar::tty::raw_mode::cooked_while(stop);
    signals_as_sent::stop_both(|signal| deliver(target, client, settings, id, signal), cooked).await;
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
