//! The container engine, through the Docker Engine API (bollard); Podman serves the same API with
//! `podman system service`. Thin, named operations with errors that say what was being done; no CLI scraping.

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use bollard::errors::Error as ApiError;
use bollard::exec::{CreateExecOptions, StartExecResults};
use bollard::models::{
    ContainerCreateBody, ContainerInspectResponse, ContainerSummary, ImageInspect, NetworkCreateRequest,
};
use bollard::query_parameters::{
    CreateContainerOptionsBuilder, CreateImageOptionsBuilder, ListContainersOptionsBuilder, ListNetworksOptionsBuilder,
    RemoveContainerOptionsBuilder, StopContainerOptionsBuilder,
};
use bollard::Docker;
use futures_util::StreamExt;

use crate::names::LABEL_RUN;

/// Sockets tried, in order, when neither `--engine` nor `DOCKER_HOST` names one: Docker's, then rootful and
/// rootless Podman's.
pub fn default_sockets() -> Vec<String> {
    let mut sockets = vec!["/var/run/docker.sock".to_owned(), "/run/podman/podman.sock".to_owned()];
    if let Some(dir) = std::env::var_os("XDG_RUNTIME_DIR") {
        sockets.push(Path::new(&dir).join("podman/podman.sock").display().to_string());
    }
    sockets
}

#[derive(Debug)]
pub enum EngineError {
    /// No socket to talk to, or it did not answer.
    Connect {
        url: String,
        error: String,
    },
    NoSocket {
        tried: Vec<String>,
    },
    /// An API call failed: `what` names the operation and the object.
    Api {
        what: String,
        error: ApiError,
    },
    /// An image is neither present nor pullable.
    Pull {
        image: String,
        error: String,
    },
}

impl std::fmt::Display for EngineError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EngineError::Connect { url, error } => write!(f, "cannot reach the container engine at {url}: {error}"),
            EngineError::NoSocket { tried } => write!(
                f,
                "no container engine socket found (tried {}): set DOCKER_HOST or --engine unix:///…, e.g. the socket of \
                 `podman system service`",
                tried.join(", ")
            ),
            EngineError::Api { what, error } => write!(f, "{what}: {}", api_message(error)),
            EngineError::Pull { image, error } => write!(f, "image {image} is not present and could not be pulled: {error}"),
        }
    }
}

impl std::error::Error for EngineError {}

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
}

/// The result of running a command in a container through exec: the health probe.
#[derive(Debug)]
pub struct ExecOutput {
    pub exit_code: Option<i64>,
    pub output: String,
}

impl ContainerEngine {
    /// `--engine` beats `DOCKER_HOST`; otherwise the first existing default socket. The API version is
    /// negotiated, so an older engine (Podman 4 speaks 1.41) is addressed in its own version.
    pub async fn connect(url: Option<&str>) -> Result<ContainerEngine, EngineError> {
        let url = match url.map(str::to_owned).or_else(|| std::env::var("DOCKER_HOST").ok().filter(|h| !h.is_empty())) {
            Some(url) => url,
            None => {
                let tried = default_sockets();
                let found = tried.iter().find(|s| Path::new(s).exists()).cloned();
                format!("unix://{}", found.ok_or(EngineError::NoSocket { tried })?)
            }
        };
        let connect_error = |error: ApiError| EngineError::Connect { url: url.clone(), error: api_message(&error) };
        let docker = Docker::connect_with_host(&url).map_err(connect_error)?;
        let docker = docker.negotiate_version().await.map_err(connect_error)?;
        docker.ping().await.map_err(connect_error)?;
        Ok(ContainerEngine { docker })
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
            let info = item.map_err(|e| EngineError::Pull { image: image.to_owned(), error: api_message(&e) })?;
            if let Some(detail) = info.error_detail.and_then(|d| d.message) {
                return Err(EngineError::Pull { image: image.to_owned(), error: detail });
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
        let filters = HashMap::from([("label".to_owned(), labels.to_vec())]);
        let options = ListNetworksOptionsBuilder::default().filters(&filters).build();
        let networks = self.docker.list_networks(Some(options)).await.map_err(api("listing networks"))?;
        Ok(networks.into_iter().filter_map(|n| n.name).collect())
    }
}

/// The label filter of one run.
pub fn run_filter(run: &str) -> String {
    format!("{LABEL_RUN}={run}")
}
