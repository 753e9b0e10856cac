//! The health gate: a builder is used only once its health command succeeds. Checked at once, then after 0.1,
//! 0.2, 0.4 and 0.8 s, then every 2 s, until `ready_timeout`: a builder that is healthy at once costs no fixed
//! 2 s, and a slow one is polled at the seed's 2 s. Each check first asks the engine (a Docker engine runs the
//! image's HEALTHCHECK itself and reports `healthy`), then runs the health command through the API's exec —
//! Podman without systemd never runs HEALTHCHECKs, and there `State.Health` stays `starting`.

use std::time::{Duration, Instant};

use bollard::models::{HealthConfig, HealthStatusEnum};
use tokio_util::sync::CancellationToken;

use crate::engine::{ContainerEngine, EngineError};
use crate::plan::{Health, HEALTH_INTERVAL, HEALTH_TIMEOUT, IMAGE_HEALTH_TEST};
use crate::progress::Progress;
use crate::runtime::Runtime;

const FIRST_CHECKS: [Duration; 4] =
    [Duration::from_millis(100), Duration::from_millis(200), Duration::from_millis(400), Duration::from_millis(800)];

#[derive(Debug)]
pub enum GateError {
    Exited { runtime: String, status: String },
    Timeout { runtime: String, seconds: f64, last_output: String },
    Engine(EngineError),
    Cancelled,
}

impl std::fmt::Display for GateError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GateError::Exited { runtime, status } => {
                write!(f, "build sidecar '{runtime}' exited before becoming healthy (status: {status})")
            }
            GateError::Timeout { runtime, seconds, last_output } => {
                write!(f, "build sidecar '{runtime}' did not become healthy within {seconds}s")?;
                if !last_output.trim().is_empty() {
                    write!(f, " (last health output: {})", last_output.trim())?;
                }
                Ok(())
            }
            GateError::Engine(e) => e.fmt(f),
            GateError::Cancelled => f.write_str("interrupted"),
        }
    }
}

impl From<EngineError> for GateError {
    fn from(e: EngineError) -> Self {
        GateError::Engine(e)
    }
}

/// The argv to exec: the profile's override, else the image's HEALTHCHECK, else `exec-server -healthcheck` (the
/// seed's fallback for images without one). `CMD-SHELL` runs under `/bin/sh -c`.
pub fn health_command(profile: Option<&[String]>, image: Option<&HealthConfig>) -> Vec<String> {
    let test = profile
        .map(<[String]>::to_vec)
        .or_else(|| image.and_then(|h| h.test.clone()))
        .filter(|t| !t.is_empty() && t[0] != "NONE")
        .unwrap_or_else(|| IMAGE_HEALTH_TEST.map(str::to_owned).to_vec());
    match test[0].as_str() {
        "CMD" => test[1..].to_vec(),
        "CMD-SHELL" => vec!["/bin/sh".into(), "-c".into(), test[1..].join(" ")],
        _ => test,
    }
}

/// Waits until `container` (the builder of `runtime`) is healthy; returns how long it took.
pub async fn wait_healthy(
    engine: &ContainerEngine,
    container: &str,
    runtime: Runtime,
    health: &Health,
    command: &[String],
    progress: &Progress,
    cancel: &CancellationToken,
) -> Result<Duration, GateError> {
    let start = Instant::now();
    let deadline = start + health.ready_timeout();
    let runtime = runtime.to_string();
    for check in 0usize.. {
        let state = engine.inspect(container).await?.state.unwrap_or_default();
        if state.running != Some(true) {
            let status = state.status.map(|s| s.to_string()).unwrap_or_else(|| "unknown".into());
            let code = state.exit_code.map(|c| format!(", exit code {c}")).unwrap_or_default();
            return Err(GateError::Exited { runtime, status: format!("{status}{code}") });
        }
        if state.health.and_then(|h| h.status) == Some(HealthStatusEnum::HEALTHY) {
            return Ok(start.elapsed());
        }
        let last_output = match tokio::time::timeout(HEALTH_TIMEOUT, engine.exec(container, command.to_vec())).await {
            Ok(Ok(probe)) if probe.exit_code == Some(0) => return Ok(start.elapsed()),
            Ok(Ok(probe)) => probe.output,
            // The container may have stopped between the inspect and the exec: the next inspect says so.
            Ok(Err(e)) => e.to_string(),
            Err(_) => format!("the health command took more than {}s", HEALTH_TIMEOUT.as_secs()),
        };
        let now = Instant::now();
        if now >= deadline {
            return Err(GateError::Timeout { runtime, seconds: health.ready_timeout, last_output });
        }
        progress.status(&format!(
            "waiting for builder-{runtime} to be healthy: {:.1}s of {}s (last: {})",
            start.elapsed().as_secs_f64(),
            health.ready_timeout,
            last_output.lines().last().unwrap_or("").trim()
        ));
        let pause = FIRST_CHECKS.get(check).copied().unwrap_or(HEALTH_INTERVAL).min(deadline - now);
        tokio::select! {
            _ = tokio::time::sleep(pause) => {}
            _ = cancel.cancelled() => return Err(GateError::Cancelled),
        }
    }
    unreachable!("the loop returns")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn the_health_command_comes_from_profile_then_image_then_the_fallback() {
        let image = HealthConfig { test: Some(v(&["CMD", "exec-server", "-healthcheck"])), ..Default::default() };
        assert_eq!(health_command(None, Some(&image)), v(&["exec-server", "-healthcheck"]));
        assert_eq!(health_command(None, None), v(&["exec-server", "-healthcheck"]));
        let none = HealthConfig { test: Some(v(&["NONE"])), ..Default::default() };
        assert_eq!(health_command(None, Some(&none)), v(&["exec-server", "-healthcheck"]));
        let shell = v(&["CMD-SHELL", "curl -sf http://127.0.0.1:8080/health"]);
        assert_eq!(
            health_command(Some(&shell), Some(&image)),
            v(&["/bin/sh", "-c", "curl -sf http://127.0.0.1:8080/health"])
        );
        assert_eq!(health_command(Some(&v(&["true"])), None), v(&["true"]));
    }

    #[test]
    fn the_seed_messages() {
        let exited = GateError::Exited { runtime: "node".into(), status: "exited, exit code 1".into() };
        assert_eq!(
            exited.to_string(),
            "build sidecar 'node' exited before becoming healthy (status: exited, exit code 1)"
        );
        let timeout = GateError::Timeout { runtime: "python".into(), seconds: 60.0, last_output: String::new() };
        assert_eq!(timeout.to_string(), "build sidecar 'python' did not become healthy within 60s");
    }
}
