//! The container engine, through the Docker Engine API (bollard); Podman serves the same API with
//! `podman system service`. Thin, named operations with errors that say what was being done; no CLI scraping.

use std::collections::HashMap;
use std::time::Duration;

use bollard::errors::Error as ApiError;
use bollard::exec::{CreateExecOptions, StartExecResults};
use bollard::models::{
    ContainerCreateBody, ContainerInspectResponse, ContainerSummary, ImageInspect, NetworkCreateRequest,
};
use bollard::query_parameters::{
    CreateContainerOptionsBuilder, CreateImageOptionsBuilder, ListContainersOptionsBuilder, ListNetworksOptionsBuilder,
    LogsOptionsBuilder, RemoveContainerOptionsBuilder, StopContainerOptionsBuilder,
};
use bollard::Docker;
use futures_util::StreamExt;

use crate::discovery::{self, EnginePlace};
use crate::names::LABEL_RUN;

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The one place asked for (`--engine`, `DOCKER_HOST`) did not answer.
    #[error("cannot reach the container engine at {url}: {}", api_message(.error))]
    Connect { url: String, error: ApiError },
    /// No place answered (each with its reason).
    #[error(
        "no container engine answered; tried:{}\nstart one (dockerd, or `podman system service --time=0 unix:///…`), \
         or name it with DOCKER_HOST or --engine",
        .tried.iter().map(|t| format!("\n  {} ({}): {}", t.place.url, t.place.from, t.problem)).collect::<String>()
    )]
    NotFound { tried: Vec<Tried> },
    /// An API call failed: `what` names the operation and the object.
    #[error("{what}: {}", api_message(.error))]
    Api { what: String, error: ApiError },
    /// An image is neither present nor pullable.
    #[error("image {image} is not present and could not be pulled: {error}")]
    Pull { image: String, error: PullProblem },
}

/// A place tried, and why it did not do.
#[derive(Debug)]
pub struct Tried {
    pub place: EnginePlace,
    pub problem: Unanswered,
}

/// Why a place did not do.
#[derive(Debug, thiserror::Error)]
pub enum Unanswered {
    /// A UNIX socket that is not there: not tried.
    #[error("no such socket")]
    NoSocket,
    /// Connecting, negotiating the API version or the ping failed.
    #[error("{}", api_message(.0))]
    Api(ApiError),
}

/// Why a pull did not make the image present.
#[derive(Debug, thiserror::Error)]
pub enum PullProblem {
    /// The API call failed.
    #[error("{}", api_message(.0))]
    Api(ApiError),
    /// The engine's own words, in the pull's progress stream (an unknown image, a registry's refusal).
    #[error("{0}")]
    Engine(String),
    /// The engine reported success, but the image is not there.
    #[error("the engine reported success but the image is absent")]
    Absent,
}

impl EngineError {
    /// The engine's words when it failed because the OCI runtime may not raise a resource limit
    /// ([`crate::limits`]).
    pub fn limits_refusal(&self) -> Option<String> {
        match self {
            EngineError::Api { error, .. } => Some(api_message(error)).filter(|text| crate::limits::is_refusal(text)),
            _ => None,
        }
    }
}

/// The engine's own message when it sent one, rather than bollard's wrapper text.
fn api_message(error: &ApiError) -> String {
    match error {
        ApiError::DockerResponseServerError { status_code, message } => format!("{message} (HTTP {status_code})"),
        other => other.to_string(),
    }
}

fn is_not_found(error: &ApiError) -> bool {
    matches!(error, ApiError::DockerResponseServerError { status_code: 404, .. })
}

/// How long a reply the client cannot decode is asked for again (see [`past_unknown_states`]).
const UNDECODABLE_FOR: Duration = Duration::from_secs(10);

/// Calls `call` again while its reply cannot be decoded, for up to [`UNDECODABLE_FOR`]. Podman reports a
/// container whose process has exited but which it has not cleaned up yet as `"stopped"`, a state the Docker API
/// (and so bollard's enum) does not have; the state becomes `exited` moments later. Failing on it would turn a
/// builder that exited into a confusing decode error in the health gate and make teardown's listing fail, leaving
/// the run's containers behind. Any other error is returned at once.
async fn past_unknown_states<T, F>(mut call: impl FnMut() -> F) -> Result<T, ApiError>
where
    F: std::future::Future<Output = Result<T, ApiError>>,
{
    let deadline = tokio::time::Instant::now() + UNDECODABLE_FOR;
    loop {
        match call().await {
            Err(ApiError::JsonDataError { .. } | ApiError::JsonSerdeError { .. })
                if tokio::time::Instant::now() < deadline =>
            {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            other => return other,
        }
    }
}

fn api(what: impl Into<String>) -> impl FnOnce(ApiError) -> EngineError {
    let what = what.into();
    move |error| EngineError::Api { what, error }
}

/// One connection to the engine.
#[derive(Clone)]
pub struct ContainerEngine {
    docker: Docker,
    url: String,
}

/// Which engine serves the API: what `image build` runs, and what the health gate can expect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EngineKind {
    Docker,
    Podman,
}

/// The result of running a command in a container through exec: the health probe.
#[derive(Debug)]
pub struct ExecOutput {
    pub exit_code: Option<i64>,
    pub output: String,
}

impl ContainerEngine {
    /// The first place of [`discovery::places`] that answers (`--engine` or `DOCKER_HOST` alone when given). The
    /// API version is negotiated, so an older engine (Podman 4 speaks 1.41) is addressed in its own version.
    pub async fn connect(url: Option<&str>) -> Result<ContainerEngine, EngineError> {
        ContainerEngine::connect_from(discovery::places(url, &|name| std::env::var(name).ok())).await
    }

    /// The first of `places` that answers.
    pub async fn connect_from(places: Vec<EnginePlace>) -> Result<ContainerEngine, EngineError> {
        let explicit = places.len() == 1 && matches!(places[0].from.as_str(), "--engine" | "DOCKER_HOST");
        let mut tried = Vec::new();
        for place in places {
            let problem = if discovery::absent(&place) {
                Unanswered::NoSocket
            } else {
                match ContainerEngine::answer(&place.url).await {
                    Ok(docker) => return Ok(ContainerEngine { docker, url: place.url }),
                    Err(error) if explicit => return Err(EngineError::Connect { url: place.url, error }),
                    Err(error) => Unanswered::Api(error),
                }
            };
            tried.push(Tried { place, problem });
        }
        Err(EngineError::NotFound { tried })
    }

    async fn answer(url: &str) -> Result<Docker, ApiError> {
        let docker = Docker::connect_with_host(url)?.negotiate_version().await?;
        docker.ping().await?;
        Ok(docker)
    }

    /// The URL this engine answered at (`DOCKER_HOST` for the CLIs `image build` runs).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Docker or Podman, from the engine's own version report.
    pub async fn kind(&self) -> Result<EngineKind, EngineError> {
        let version = self.docker.version().await.map_err(api("asking the engine its version"))?;
        let podman = version.components.unwrap_or_default().iter().any(|c| c.name.to_lowercase().contains("podman"));
        Ok(if podman { EngineKind::Podman } else { EngineKind::Docker })
    }

    pub fn docker(&self) -> &Docker {
        &self.docker
    }

    /// The image's configuration; `None` when it is not present locally.
    pub async fn image(&self, image: &str) -> Result<Option<ImageInspect>, EngineError> {
        match self.docker.inspect_image(image).await {
            Ok(found) => Ok(Some(found)),
            Err(e) if is_not_found(&e) => Ok(None),
            Err(e) => Err(api(format!("inspecting image {image}"))(e)),
        }
    }

    /// Pulls `image`, reporting each status line the engine sends to `progress`.
    pub async fn pull(&self, image: &str, mut progress: impl FnMut(&str)) -> Result<(), EngineError> {
        let options = CreateImageOptionsBuilder::default().from_image(image).build();
        let mut stream = self.docker.create_image(Some(options), None, None);
        while let Some(item) = stream.next().await {
            let info = item.map_err(|e| EngineError::Pull { image: image.to_owned(), error: PullProblem::Api(e) })?;
            if let Some(detail) = info.error_detail.and_then(|d| d.message) {
                return Err(EngineError::Pull { image: image.to_owned(), error: PullProblem::Engine(detail) });
            }
            if let Some(status) = info.status {
                progress(&format!("{}{status}", info.id.map(|id| format!("{id}: ")).unwrap_or_default()));
            }
        }
        Ok(())
    }

    /// The run's bridge network; an existing one of that name is reused (a crashed run must not block start-up).
    pub async fn ensure_network(&self, name: &str, labels: HashMap<String, String>) -> Result<(), EngineError> {
        match self.docker.inspect_network(name, None).await {
            Ok(_) => return Ok(()),
            Err(e) if is_not_found(&e) => {}
            Err(e) => return Err(api(format!("inspecting network {name}"))(e)),
        }
        let request = NetworkCreateRequest {
            name: name.to_owned(),
            driver: Some("bridge".to_owned()),
            labels: Some(labels),
            ..Default::default()
        };
        self.docker.create_network(request).await.map_err(api(format!("creating network {name}")))?;
        Ok(())
    }

    /// Creates container `name`, force-removing a stale one of the same name first, and starts it unless
    /// `start` is false (the agent is attached before it starts).
    pub async fn create(&self, name: &str, body: ContainerCreateBody, start: bool) -> Result<(), EngineError> {
        self.remove(name).await?;
        let options = CreateContainerOptionsBuilder::default().name(name).build();
        self.docker.create_container(Some(options), body).await.map_err(api(format!("creating container {name}")))?;
        if start {
            self.start(name).await?;
        }
        Ok(())
    }

    pub async fn start(&self, name: &str) -> Result<(), EngineError> {
        self.docker.start_container(name, None).await.map_err(api(format!("starting container {name}")))
    }

    pub async fn inspect(&self, name: &str) -> Result<ContainerInspectResponse, EngineError> {
        let docker = &self.docker;
        past_unknown_states(|| docker.inspect_container(name, None))
            .await
            .map_err(api(format!("inspecting container {name}")))
    }

    /// Runs `cmd` in the running container (its environment and user) and collects its exit code and output.
    pub async fn exec(&self, name: &str, cmd: Vec<String>) -> Result<ExecOutput, EngineError> {
        let options = CreateExecOptions {
            cmd: Some(cmd),
            attach_stdout: Some(true),
            attach_stderr: Some(true),
            ..Default::default()
        };
        let what = || format!("running the health command in {name}");
        let created = self.docker.create_exec(name, options).await.map_err(api(what()))?;
        let mut output = String::new();
        if let StartExecResults::Attached { output: mut stream, .. } =
            self.docker.start_exec(&created.id, None).await.map_err(api(what()))?
        {
            while let Some(Ok(chunk)) = stream.next().await {
                output.push_str(&String::from_utf8_lossy(&chunk.into_bytes()));
            }
        }
        let inspected = self.docker.inspect_exec(&created.id).await.map_err(api(what()))?;
        Ok(ExecOutput { exit_code: inspected.exit_code, output })
    }

    /// The last `lines` lines of a container's output (stdout and stderr, in order), as text.
    pub async fn tail(&self, name: &str, lines: usize) -> Result<String, EngineError> {
        let options = LogsOptionsBuilder::default().stdout(true).stderr(true).tail(&lines.to_string()).build();
        let mut stream = self.docker.logs(name, Some(options));
        let mut text = Vec::new();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(api(format!("reading the logs of {name}")))?;
            text.extend_from_slice(&chunk.into_bytes());
        }
        Ok(String::from_utf8_lossy(&text).into_owned())
    }

    /// Stops with the image's stop signal (SIGTERM), `grace` seconds, then SIGKILL; a missing or already stopped
    /// container is fine.
    pub async fn stop(&self, name: &str, grace: Duration) -> Result<(), EngineError> {
        let options = StopContainerOptionsBuilder::default().t(grace.as_secs().try_into().unwrap_or(i32::MAX)).build();
        match self.docker.stop_container(name, Some(options)).await {
            Ok(()) => Ok(()),
            Err(e) if is_not_found(&e) => Ok(()),
            Err(ApiError::DockerResponseServerError { status_code: 304, .. }) => Ok(()),
            Err(e) => Err(api(format!("stopping container {name}"))(e)),
        }
    }

    /// Removes a container and its anonymous volumes (named volumes, the caches, are never removed); missing is
    /// fine.
    pub async fn remove(&self, name: &str) -> Result<(), EngineError> {
        let options = RemoveContainerOptionsBuilder::default().force(true).v(true).build();
        match self.docker.remove_container(name, Some(options)).await {
            Ok(()) => Ok(()),
            Err(e) if is_not_found(&e) => Ok(()),
            Err(e) => Err(api(format!("removing container {name}"))(e)),
        }
    }

    pub async fn remove_network(&self, name: &str) -> Result<(), EngineError> {
        match self.docker.remove_network(name).await {
            Ok(()) => Ok(()),
            Err(e) if is_not_found(&e) => Ok(()),
            Err(e) => Err(api(format!("removing network {name}"))(e)),
        }
    }

    /// Containers carrying every label of `labels` (`key=value` or `key`), running or not.
    pub async fn containers(&self, labels: &[String]) -> Result<Vec<ContainerSummary>, EngineError> {
        let filters = HashMap::from([("label".to_owned(), labels.to_vec())]);
        let options = ListContainersOptionsBuilder::default().all(true).filters(&filters).build();
        let docker = &self.docker;
        past_unknown_states(|| docker.list_containers(Some(options.clone()))).await.map_err(api("listing containers"))
    }

    /// Names of the networks carrying every label of `labels`.
    pub async fn networks(&self, labels: &[String]) -> Result<Vec<String>, EngineError> {
        Ok(self.labelled_networks(labels).await?.into_iter().map(|(name, _)| name).collect())
    }

    /// The networks carrying every label of `labels`, each with all its labels.
    pub async fn labelled_networks(
        &self,
        labels: &[String],
    ) -> Result<Vec<(String, HashMap<String, String>)>, EngineError> {
        let filters = HashMap::from([("label".to_owned(), labels.to_vec())]);
        let options = ListNetworksOptionsBuilder::default().filters(&filters).build();
        let networks = self.docker.list_networks(Some(options)).await.map_err(api("listing networks"))?;
        Ok(networks.into_iter().filter_map(|n| Some((n.name?, n.labels.unwrap_or_default()))).collect())
    }

    /// The engine's socket path when it is on this machine (`unix://PATH`).
    pub fn local_socket(&self) -> Option<std::path::PathBuf> {
        self.url.strip_prefix("unix://").map(std::path::PathBuf::from)
    }
}

/// The label filter of one run.
pub fn run_filter(run: &str) -> String {
    format!("{LABEL_RUN}={run}")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every place is tried, and the error says what each one said: a missing socket, a stale one
    /// nobody listens on.
    #[tokio::test]
    async fn a_failure_lists_every_place_tried() {
        let dir = tempfile::tempdir().unwrap();
        let stale = dir.path().join("stale.sock");
        drop(std::os::unix::net::UnixListener::bind(&stale).unwrap());
        let place = |url: String, from: &str| EnginePlace { url, from: from.to_owned() };
        let places = vec![
            place(format!("unix://{}/none.sock", dir.path().display()), "Docker"),
            place(format!("unix://{}", stale.display()), "Podman"),
        ];
        let Err(error) = ContainerEngine::connect_from(places).await else { panic!("connected to nothing") };
        let text = error.to_string();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "no container engine answered; tried:");
        assert!(lines[1].ends_with("none.sock (Docker): no such socket"), "{text}");
        assert!(lines[2].contains("stale.sock (Podman): ") && lines[2].len() > 30, "{text}");
        assert!(lines[3].contains("DOCKER_HOST"), "{text}");
        // An explicit choice that does not answer is that error alone, not a fall-back to another engine.
        let explicit = vec![place(format!("unix://{}", stale.display()), "DOCKER_HOST")];
        let Err(error) = ContainerEngine::connect_from(explicit).await else { panic!() };
        assert!(matches!(error, EngineError::Connect { .. }), "{error}");
    }
}
