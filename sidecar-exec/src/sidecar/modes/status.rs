//! `sidecar-exec --status`: every configured sidecar, whether it answers, and what it says about itself.

use std::time::Duration;

use crate::sidecar::config::sidecars::{Endpoint, Sidecars};
use crate::sidecar::wire::body::small_text;
use crate::sidecar::wire::http::{http_client, location, refusal, transport_error};
use crate::terminal_safe::terminal_safe;

/// Prints one line per runtime; true only when every sidecar is usable: `/health` answers 200 and `/info` (which
/// needs the token) answers too, so a script can gate on the exit code. A sidecar that is healthy but refuses the
/// token is not usable: every command would fail with 401.
pub async fn status(sidecars: &Sidecars) -> bool {
    let mut all_usable = true;
    for runtime in sidecars.runtimes() {
        let (usable, line) = match sidecars.target(runtime) {
            Ok(target) => match http_client(None, target.socket.as_deref()) {
                Ok(client) => {
                    let (usable, state) = check(&client, &target).await;
                    (usable, format!("{:<32} {state}", target.url))
                }
                Err(err) => (false, err.to_string()),
            },
            Err(err) => (false, format!("misconfigured: {err}")),
        };
        all_usable &= usable;
        println!("{runtime:<8} {line}");
    }
    all_usable
}

/// Whether one sidecar is usable, and the words for it.
async fn check(client: &reqwest::Client, target: &Endpoint) -> (bool, String) {
    let get = |path: &str| {
        let request = client.get(target.endpoint(path)).timeout(Duration::from_secs(3));
        match &target.token {
            Some(token) => request.bearer_auth(&token.value),
            None => request,
        }
    };
    match get("/health").send().await {
        Ok(response) if response.status().is_success() => {}
        Ok(response) => {
            let (status, location) = (response.status(), location(&response));
            let body = small_text(response).await;
            return (false, format!("unhealthy: {}", refusal(target, None, status, location.as_deref(), &body)));
        }
        Err(err) => return (false, format!("unreachable: {}", transport_error(target, &err))),
    }
    let response = match get("/info").send().await {
        Ok(response) => response,
        Err(err) => return (false, format!("healthy, but /info failed: {}", transport_error(target, &err))),
    };
    let (status, location) = (response.status(), location(&response));
    let body = small_text(response).await;
    if !status.is_success() {
        return (false, format!("healthy, but {}", refusal(target, None, status, location.as_deref(), &body)));
    }
    match serde_json::from_str::<protocol::Info>(&body) {
        Ok(info) => (
            true,
            format!(
                "healthy runtime={} version={} cwd={}{}",
                terminal_safe(&info.runtime),
                terminal_safe(&info.version),
                terminal_safe(&info.cwd),
                info.running.map(|n| format!(" running={n}")).unwrap_or_default()
            ),
        ),
        Err(err) => (false, format!("healthy, but /info sent an unreadable reply: {err}")),
    }
}
