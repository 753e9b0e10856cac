//! `sidecar-exec --status`: every configured sidecar, whether it answers, and what it says about itself.

use std::time::Duration;

use crate::config::Sidecars;
use crate::http::{http_client, transport_error};

/// Prints one line per runtime; true when every sidecar is healthy.
pub async fn status(sidecars: &Sidecars) -> bool {
    let client = match http_client(false) {
        Ok(client) => client,
        Err(message) => {
            eprintln!("sidecar-exec: {message}");
            return false;
        }
    };
    let mut all_healthy = true;
    for runtime in sidecars.0.keys() {
        let target = match sidecars.target(runtime) {
            Ok(target) => target,
            Err(err) => {
                println!("{runtime:<8} misconfigured: {err}");
                all_healthy = false;
                continue;
            }
        };
        let get = |path: &str| {
            let request = client.get(format!("{}{path}", target.url)).timeout(Duration::from_secs(3));
            match &target.token {
                Some(token) => request.bearer_auth(&token.value),
                None => request,
            }
        };
        let health = match get("/health").send().await {
            Ok(response) if response.status().is_success() => "healthy".to_owned(),
            Ok(response) => format!("unhealthy: /health answered {}", response.status()),
            Err(err) => format!("unreachable: {}", transport_error(&target, &err)),
        };
        let healthy = health == "healthy";
        all_healthy &= healthy;
        let info = if healthy {
            match get("/info").send().await {
                Ok(response) if response.status().is_success() => match response.json_info().await {
                    Some(info) => format!(
                        "runtime={} version={} cwd={}{}",
                        info.runtime,
                        info.version,
                        info.cwd,
                        info.running.map(|n| format!(" running={n}")).unwrap_or_default()
                    ),
                    None => "info: unreadable reply".to_owned(),
                },
                Ok(response) if response.status() == 401 => {
                    "info: 401, token missing or wrong (SIDECAR_TOKEN, SIDECAR_TOKEN_FILE)".to_owned()
                }
                Ok(response) => format!("info: {}", response.status()),
                Err(err) => format!("info: {err}"),
            }
        } else {
            String::new()
        };
        println!("{runtime:<8} {:<32} {health} {info}", target.url);
    }
    all_healthy
}

trait InfoReply {
    async fn json_info(self) -> Option<protocol::Info>;
}

impl InfoReply for reqwest::Response {
    async fn json_info(self) -> Option<protocol::Info> {
        serde_json::from_slice(&self.bytes().await.ok()?).ok()
    }
}
