//! The local terminal's window size, and following it: every SIGWINCH becomes `POST /runs/{id}/resize`.

use std::time::Instant;

use protocol::{ResizeRequest, RunId};
use tokio::signal::unix::{signal, SignalKind};

use crate::sidecar::config::settings::CallSettings;
use crate::sidecar::config::sidecars::Endpoint;
use crate::sidecar::wire::backoff::Backoff;
use crate::sidecar::wire::http::authorized;

/// The size a terminal has when none can be read (`SIDECAR_TTY=1` without a terminal): the VT100's, which is what
/// a fresh pty and most programs assume.
pub const FALLBACK: ResizeRequest = ResizeRequest { rows: 24, cols: 80 };

/// The window size of stdout's terminal, else stdin's, else [`FALLBACK`]. A size of 0×0 (a pty nobody sized) counts
/// as none.
pub fn size() -> ResizeRequest {
    [rustix::termios::tcgetwinsize(std::io::stdout()), rustix::termios::tcgetwinsize(std::io::stdin())]
        .into_iter()
        .flatten()
        .find(|size| size.ws_row > 0 && size.ws_col > 0)
        .map_or(FALLBACK, |size| ResizeRequest { rows: size.ws_row, cols: size.ws_col })
}

/// Sends the window size to run `id` on every SIGWINCH, for as long as it is polled (the call's end drops it). The
/// size is a state, so SIGWINCHes that come while one is sent are one resize, read when it is sent. A resize that
/// cannot reach the server is retried (a cut connection) for the reconnect window, each try answered within the
/// follow-up bound ([`crate::sidecar::config::patience::Patience`]); one the server refuses (the run ended) is dropped.
/// `at_once`: send the size once before the first SIGWINCH (a client that takes over a run on another terminal).
pub async fn follow(target: &Endpoint, client: &reqwest::Client, settings: &CallSettings, id: &RunId, at_once: bool) {
    let Ok(mut changes) = signal(SignalKind::window_change()) else { return std::future::pending().await };
    if at_once {
        send(target, client, settings, id).await;
    }
    while changes.recv().await.is_some() {
        send(target, client, settings, id).await;
    }
    std::future::pending().await
}

/// Sends the current size, retried as [`follow`] says.
async fn send(target: &Endpoint, client: &reqwest::Client, settings: &CallSettings, id: &RunId) {
    let mut backoff = Backoff::new();
    let started = Instant::now();
    loop {
        let body = serde_json::to_vec(&size()).unwrap_or_default();
        let request = authorized(client.post(target.endpoint(&format!("/runs/{id}/resize"))), target, Some(settings))
            .header("content-type", "application/json")
            .timeout(settings.patience.follow_up())
            .body(body);
        match request.send().await {
            Ok(response) if !response.status().is_server_error() => break,
            _ if started.elapsed() >= settings.patience.reconnect_for() => break,
            _ => tokio::time::sleep(backoff.next_wait()).await,
        }
    }
}
