//! The health gate: a builder is used only once its health command succeeds. Checked at once, then after 0.1,
//! 0.2, 0.4 and 0.8 s, then every 2 s, until `ready_timeout`: a builder that is healthy at once costs no fixed
//! 2 s, and a slow one is polled at the seed's 2 s. Each check first asks the engine (a Docker engine runs the
//! image's HEALTHCHECK itself and reports `healthy`), then runs the health command through the API's exec —
//! Podman without systemd never runs HEALTHCHECKs, and there `State.Health` stays `starting`. Which of the two said
//! healthy is reported ([`HealthSource`]). A builder that exits first is reported with its last log lines.

use std::time::{Duration, Instant};

use bollard::models::{ContainerState, HealthConfig, HealthStatusEnum};
use tokio_util::sync::CancellationToken;

use crate::engine::{ContainerEngine, EngineError};
use crate::plan::{BuilderHealth, HEALTH_INTERVAL, HEALTH_TIMEOUT, IMAGE_HEALTH_TEST};
use crate::progress::Progress;
use crate::runtime::Runtime;

const FIRST_CHECKS: [Duration; 4] =
    [Duration::from_millis(100), Duration::from_millis(200), Duration::from_millis(400), Duration::from_millis(800)];

/// Which check found a builder healthy: `up` and `ps` say so, since the two can disagree (a Docker engine's
/// HEALTHCHECK runs at the image's interval, the exec probe at once).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HealthSource {
    /// The engine's own HEALTHCHECK status (`State.Health.Status`, Docker).
    Engine,
    /// The health command run through the API's exec (Podman without systemd never runs HEALTHCHECKs).
    Probe,
}

impl std::fmt::Display for HealthSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            HealthSource::Engine => "engine",
            HealthSource::Probe => "probe",
        })
    }
}

/// What the engine's view of a builder says before any probe.
#[derive(Debug, PartialEq, Eq)]
pub enum EngineVerdict {
    /// Not running any more: `status` as the message gives it (`exited, exit code 3`).
    Exited { status: String },
    /// The engine's HEALTHCHECK says healthy.
    Healthy,
    /// Running, not known healthy: the probe decides.
    Probe,
}

/// The engine's view of one check, from the container's state.
pub fn engine_verdict(state: &ContainerState) -> EngineVerdict {
    if state.running != Some(true) {
        let status = state.status.map(|s| s.to_string()).unwrap_or_else(|| "unknown".into());
        let code = state.exit_code.map(|c| format!(", exit code {c}")).unwrap_or_default();
        return EngineVerdict::Exited { status: format!("{status}{code}") };
    }
    if state.health.as_ref().and_then(|h| h.status) == Some(HealthStatusEnum::HEALTHY) {
        return EngineVerdict::Healthy;
    }
    EngineVerdict::Probe
}

/// How many of a builder's last log lines an exit before healthy shows: its teardown removes the container, and
/// with it the only record of why it stopped.
pub const EXIT_LOG_LINES: usize = 20;

#[derive(Debug)]
pub enum GateError {
    Exited { runtime: String, status: String, last_logs: String },
    Timeout { runtime: String, seconds: f64, last_output: String },
    Engine(EngineError),
    Cancelled,
}

impl std::fmt::Display for GateError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GateError::Exited { runtime, status, last_logs } => {
                write!(f, "build sidecar '{runtime}' exited before becoming healthy (status: {status})")?;
                if !last_logs.trim().is_empty() {
                    write!(f, "; its last log lines:")?;
                    for line in last_logs.trim_end().lines() {
                        write!(f, "\n  {line}")?;
                    }
                }
                Ok(())
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

/// Waits until `container` (the builder of `runtime`) is healthy; returns how long it took, and which check said so.
pub async fn wait_healthy(
    engine: &ContainerEngine,
    container: &str,
    runtime: Runtime,
    health: &BuilderHealth,
    command: &[String],
    progress: &Progress,
    cancel: &CancellationToken,
) -> Result<(Duration, HealthSource), GateError> {
    let start = Instant::now();
    let deadline = start + health.ready_timeout();
    let runtime = runtime.to_string();
    let mut said = None;
    for check in 0usize.. {
        let state = engine.inspect(container).await?.state.unwrap_or_default();
        match engine_verdict(&state) {
            EngineVerdict::Exited { status } => {
                let last_logs = engine.tail(container, EXIT_LOG_LINES).await.unwrap_or_else(|e| e.to_string());
                return Err(GateError::Exited { runtime, status, last_logs });
            }
            EngineVerdict::Healthy => return Ok((start.elapsed(), HealthSource::Engine)),
            EngineVerdict::Probe => {}
        }
        let last_output = match tokio::time::timeout(HEALTH_TIMEOUT, engine.exec(container, command.to_vec())).await {
            Ok(Ok(probe)) if probe.exit_code == Some(0) => return Ok((start.elapsed(), HealthSource::Probe)),
            Ok(Ok(probe)) => probe.output,
            // The container may have stopped between the inspect and the exec: the next inspect says so.
            Ok(Err(e)) => e.to_string(),
            Err(_) => format!("the health command took more than {}s", HEALTH_TIMEOUT.as_secs()),
        };
        let now = Instant::now();
        if now >= deadline {
            return Err(GateError::Timeout { runtime, seconds: health.ready_timeout, last_output });
        }
        progress.waiting(&waiting_line(&runtime, start.elapsed(), health.ready_timeout, &last_output), &mut said);
        let pause = FIRST_CHECKS.get(check).copied().unwrap_or(HEALTH_INTERVAL).min(deadline - now);
        tokio::select! {
            _ = tokio::time::sleep(pause) => {}
            _ = cancel.cancelled() => return Err(GateError::Cancelled),
        }
    }
    unreachable!("the loop returns")
}

/// "waiting for builder-python to be healthy: 2.1s of 60s (last: connection refused)"; no "(last: …)" when the
/// health command said nothing.
fn waiting_line(runtime: &str, waited: Duration, ready_timeout: f64, last_output: &str) -> String {
    let last = last_output.lines().map(str::trim).rfind(|l| !l.is_empty()).map(|l| format!(" (last: {l})"));
    format!(
        "waiting for builder-{runtime} to be healthy: {:.1}s of {ready_timeout}s{}",
        waited.as_secs_f64(),
        last.unwrap_or_default()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wait_line_leaves_out_an_empty_last_output() {
        let waited = Duration::from_millis(2_100);
        assert_eq!(waiting_line("python", waited, 60.0, ""), "waiting for builder-python to be healthy: 2.1s of 60s");
        assert_eq!(
            waiting_line("python", waited, 60.0, "  \n"),
            "waiting for builder-python to be healthy: 2.1s of 60s"
        );
        assert_eq!(
            waiting_line("node", waited, 3.0, "dial: refused\n\n"),
            "waiting for builder-node to be healthy: 2.1s of 3s (last: dial: refused)"
        );
    }

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

    /// Both ways a check can end are the engine's (exited, or its own HEALTHCHECK healthy) before the probe's.
    #[test]
    fn the_engine_speaks_first_then_the_probe() {
        use bollard::models::{ContainerStateStatusEnum, Health};
        let health = |status| Some(Health { status: Some(status), ..Default::default() });
        let running = |h| ContainerState { running: Some(true), health: h, ..Default::default() };
        assert_eq!(engine_verdict(&running(health(HealthStatusEnum::HEALTHY))), EngineVerdict::Healthy);
        assert_eq!(engine_verdict(&running(health(HealthStatusEnum::STARTING))), EngineVerdict::Probe);
        assert_eq!(engine_verdict(&running(health(HealthStatusEnum::UNHEALTHY))), EngineVerdict::Probe);
        assert_eq!(engine_verdict(&running(None)), EngineVerdict::Probe, "no HEALTHCHECK (an OCI-format image)");
        let exited = ContainerState {
            running: Some(false),
            status: Some(ContainerStateStatusEnum::EXITED),
            exit_code: Some(3),
            health: health(HealthStatusEnum::HEALTHY),
            ..Default::default()
        };
        assert_eq!(engine_verdict(&exited), EngineVerdict::Exited { status: "exited, exit code 3".into() });
    }

    #[test]
    fn the_seed_messages() {
        let exited = GateError::Exited {
            runtime: "node".into(),
            status: "exited, exit code 1".into(),
            last_logs: String::new(),
        };
        assert_eq!(
            exited.to_string(),
            "build sidecar 'node' exited before becoming healthy (status: exited, exit code 1)"
        );
        // With its last log lines (the container is removed next): the seed's words first.
        let exited = GateError::Exited {
            runtime: "node".into(),
            status: "exited, exit code 1".into(),
            last_logs: "npm ERR! x\nexec-server: cannot bind\n".into(),
        };
        assert_eq!(
            exited.to_string(),
            "build sidecar 'node' exited before becoming healthy (status: exited, exit code 1); its last log lines:\n  \
             npm ERR! x\n  exec-server: cannot bind"
        );
        let timeout = GateError::Timeout { runtime: "python".into(), seconds: 60.0, last_output: String::new() };
        assert_eq!(timeout.to_string(), "build sidecar 'python' did not become healthy within 60s");
    }
}
