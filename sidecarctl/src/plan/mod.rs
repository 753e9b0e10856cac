//! The one container plan of a run: for each container (the builders, then the agent) its image, command, user,
//! groups, working folder, environment, mounts, token, port and health, decided here once for where it will run
//! ([`Deployment`]). `up` renders it as Engine API bodies, `compose` and `kube` as files; none of them decides any of
//! these again, so the three cannot disagree (`render/tests.rs` reads each rendering back and compares).

use std::collections::BTreeSet;
use std::time::Duration;

use protocol::vars;

use crate::model::{RunConfig, Sidecar, Ulimit, Volume};
use crate::runtime::Runtime;

/// The images' builder group (`BUILDER_GID` of images/Dockerfile), added to every builder that runs as the caller:
/// the images share cache volumes between uids through it (cache folders setgid to it, commands under umask 0002),
/// so folders another uid created in a cache volume stay writable (docs/images.md, "Caches and uids").
pub const BUILDER_GROUP: &str = "1000";

/// The folder `up` keeps in the workspace (the builders' `HOME`s); it holds a `.gitignore` of `*`, so a workspace
/// that is a git checkout does not show it.
pub const STATE_FOLDER: &str = ".sidecarctl";

/// The health gate's pace after its quick first checks, and compose's and the Pod's probe period: the seed's 2 s.
pub const HEALTH_INTERVAL: Duration = Duration::from_secs(2);
/// How long one health command may take (compose's `timeout: 3s`, the Pod's `timeoutSeconds: 3`).
pub const HEALTH_TIMEOUT: Duration = Duration::from_secs(3);
/// The images' own HEALTHCHECK (images/Dockerfile), compose form: the probe when the profile names none.
pub const IMAGE_HEALTH_TEST: [&str; 3] = ["CMD", "exec-server", "-healthcheck"];

/// Where the run will run: the facts that differ between the three, and only those.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Deployment {
    /// `up`: containers on the run's private network, each builder at its alias; the caller is `uid:gid`.
    Up,
    /// A compose project: the same network shape; the caller is the one `.env` names.
    Compose,
    /// A Kubernetes Pod: one network namespace (each builder on its own port, reached at 127.0.0.1), and no caller:
    /// every container runs as the images' uid 1000.
    Pod,
}

impl Deployment {
    /// Where every container sees the run's token file: `up` binds a host file there, compose mounts its secret
    /// (under `/run/secrets/`, named as a compose identifier), a Pod mounts its Secret as a folder.
    pub fn token_path(self) -> &'static str {
        match self {
            Deployment::Up => "/run/secrets/sidecar-token",
            Deployment::Compose => "/run/secrets/sidecar_token",
            Deployment::Pod => "/run/secrets/sidecar/token",
        }
    }

    fn has_caller(self) -> bool {
        self != Deployment::Pod
    }

    /// The builders' ports: each its own on a network. In a Pod the configured ones when they are distinct, else
    /// 8081, 8082, … in order, skipping the port of a builder whose profile gives its own `command`: that command
    /// names its port, which is kept.
    fn ports(self, sidecars: &[Sidecar]) -> Vec<u16> {
        let configured: Vec<u16> = sidecars.iter().map(|s| s.port).collect();
        let distinct = configured.iter().collect::<BTreeSet<_>>().len() == configured.len();
        if self != Deployment::Pod || distinct {
            return configured;
        }
        let fixed: BTreeSet<u16> = sidecars.iter().filter(|s| s.command.is_some()).map(|s| s.port).collect();
        let mut free = (8081..=u16::MAX).filter(|port| !fixed.contains(port));
        sidecars.iter().map(|s| if s.command.is_some() { s.port } else { free.next().unwrap_or(s.port) }).collect()
    }

    /// The URL the agent reaches a builder at (the contract's `internal_url`).
    fn url(self, runtime: Runtime, port: u16) -> String {
        match self {
            Deployment::Pod => format!("http://127.0.0.1:{port}"),
            Deployment::Up | Deployment::Compose => format!("http://{}:{port}", runtime.alias()),
        }
    }
}

/// What a container is in the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Builder(Runtime),
    Agent,
}

/// Whom a container runs as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum User {
    /// The image's user.
    Image,
    /// The caller of `up` (`uid:gid`), or of `docker compose up` (`.env`).
    Caller,
    /// As given (`--agent-user`).
    Given(String),
}

/// A builder's health: the profile's probe or the image's, and how long the gate waits.
#[derive(Debug, Clone, PartialEq)]
pub struct BuilderHealth {
    /// The profile's `healthcheck.test` (compose form); `None`: the image's HEALTHCHECK.
    pub test: Option<Vec<String>>,
    /// Seconds, > 0, as written (messages quote it).
    pub ready_timeout: f64,
}

impl BuilderHealth {
    pub fn ready_timeout(&self) -> Duration {
        Duration::from_secs_f64(self.ready_timeout)
    }

    /// Probe tries within `ready_timeout` at one try per [`HEALTH_INTERVAL`] (at least one).
    pub fn retries(&self) -> u64 {
        ((self.ready_timeout / HEALTH_INTERVAL.as_secs_f64()).ceil() as u64).max(1)
    }

    /// The test a file writes: the profile's, else the images' own (an image built in podman's default OCI format
    /// has no HEALTHCHECK, so a file cannot rely on it).
    pub fn test_or_images(&self) -> Vec<String> {
        self.test.clone().unwrap_or_else(|| IMAGE_HEALTH_TEST.map(str::to_owned).to_vec())
    }
}

/// One container of the plan.
#[derive(Debug, Clone, PartialEq)]
pub struct Container {
    pub role: Role,
    /// `builder-RT` or `agent`: the compose service, the Pod's container, the network alias, and the end of the
    /// container's name in `up`.
    pub name: String,
    pub image: String,
    /// Empty: the image's own command.
    pub command: Vec<String>,
    pub user: User,
    /// Supplementary groups.
    pub groups: Vec<String>,
    pub working_dir: Option<String>,
    /// In order, each name once.
    pub env: Vec<(String, String)>,
    pub mounts: Vec<Volume>,
    /// Where the run's token file is seen, when the run has one (the token variable names this path).
    pub token: Option<&'static str>,
    /// A builder's exec-server port.
    pub port: Option<u16>,
    pub health: Option<BuilderHealth>,
    /// Memory-backed folders owned by the container's user.
    pub tmpfs: Vec<String>,
    /// A folder that must exist, owned by the caller, before the container starts (a builder's `HOME` in the
    /// workspace): its source on the host side, and its path in the container.
    pub home: Option<Volume>,
}

impl Container {
    pub fn runtime(&self) -> Option<Runtime> {
        match self.role {
            Role::Builder(runtime) => Some(runtime),
            Role::Agent => None,
        }
    }

    pub fn env_value(&self, name: &str) -> Option<&str> {
        self.env.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }
}

/// What the run's configuration does not say about the agent: what follows `--`, and `up`'s own flags.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AgentRequest {
    pub image: String,
    pub command: Vec<String>,
    /// `--agent-user`; `None` keeps the image's user.
    pub user: Option<String>,
    /// The operator's variables (the `ssh:` block's, then `-e`), in order. They win over the contract's variables
    /// of the same name, which are then not set: the operator asked for that value.
    pub env: Vec<(String, String)>,
    /// More volumes (the `ssh:` block's files, read-only).
    pub mounts: Vec<Volume>,
    /// Memory-backed folders owned by the agent's user (`up` only: [`AGENT_WRAPPERS`] for an agent run as another
    /// user than the image's, which could not write the image's folder).
    pub tmpfs: Vec<String>,
}

/// Where the agent image's entrypoint writes the wrappers (`SIDECAR_WRAPPERS_DIR`'s default, on the image's
/// `PATH`): owned by the image's `AGENT_UID`, so an agent run as another user gets a folder of its own there.
pub const AGENT_WRAPPERS: &str = "/opt/sidecar/wrappers";

/// The plan: every container of the run as it will be created.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub deployment: Deployment,
    /// In the run's order.
    pub builders: Vec<Container>,
    pub agent: Container,
    /// Every container gets these.
    pub ulimits: Vec<Ulimit>,
}

impl Plan {
    pub fn new(run: &RunConfig, agent: AgentRequest, deployment: Deployment) -> Plan {
        let token = run.token.then(|| deployment.token_path());
        let ports = deployment.ports(&run.sidecars);
        let builders: Vec<Container> = run
            .sidecars
            .iter()
            .zip(&ports)
            .map(|(sidecar, port)| builder(run, sidecar, *port, deployment, token))
            .collect();

        let mut contract = Vec::new();
        if !run.sidecars.is_empty() {
            let map: serde_json::Map<String, serde_json::Value> = run
                .sidecars
                .iter()
                .zip(&ports)
                .map(|(s, port)| {
                    (s.runtime.to_string(), serde_json::json!({ "internal_url": deployment.url(s.runtime, *port) }))
                })
                .collect();
            contract.push((vars::BUILD_SIDECARS, serde_json::Value::Object(map).to_string()));
        }
        let passthrough = run.env_passthrough();
        if !passthrough.is_empty() {
            contract.push((vars::SIDECAR_ENV_PASSTHROUGH, passthrough));
        }
        if let Some(path) = token {
            contract.push((vars::SIDECAR_TOKEN_FILE, path.to_owned()));
        }
        let mut env = agent.env;
        for (name, value) in contract {
            if !env.iter().any(|(n, _)| n == name) {
                env.push((name.to_owned(), value));
            }
        }
        let agent = Container {
            role: Role::Agent,
            name: "agent".to_owned(),
            image: agent.image,
            command: agent.command,
            user: agent.user.map_or(User::Image, User::Given),
            groups: Vec::new(),
            working_dir: run.agent_workdir(),
            env,
            mounts: run.volumes.iter().cloned().chain(agent.mounts).collect(),
            tmpfs: agent.tmpfs,
            token,
            port: None,
            health: None,
            home: None,
        };
        Plan { deployment, builders, agent, ulimits: run.ulimits.clone() }
    }

    /// The builders, then the agent.
    pub fn containers(&self) -> impl Iterator<Item = &Container> {
        self.builders.iter().chain(std::iter::once(&self.agent))
    }

    /// Every named volume a container mounts, once each, in the order of first use.
    pub fn named_volumes(&self) -> Vec<&str> {
        let mut names: Vec<&str> = Vec::new();
        for mount in self.containers().flat_map(|c| &c.mounts) {
            if let crate::model::VolumeSource::Named(name) = &mount.source {
                if !names.contains(&name.as_str()) {
                    names.push(name);
                }
            }
        }
        names
    }
}

/// `exec-server -port P -cwd W`: a builder's command unless the profile gives one.
fn default_command(port: u16, cwd: &str) -> Vec<String> {
    ["exec-server", "-port", &port.to_string(), "-cwd", cwd].map(str::to_owned).to_vec()
}

fn builder(
    run: &RunConfig,
    sidecar: &Sidecar,
    port: u16,
    deployment: Deployment,
    token: Option<&'static str>,
) -> Container {
    let as_caller = sidecar.run_as_caller_uid && deployment.has_caller();
    let workspace = run.workspace_volume(sidecar).cloned();
    let mut env: Vec<(String, String)> = sidecar.env.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    env.push((vars::EXEC_SERVER_PORT.to_owned(), port.to_string()));
    // `HOME` of a builder that runs as the caller: the image's home belongs to another uid, so a folder in the
    // workspace (which the caller owns) is the one place the caller's tools can always write.
    let home = as_caller.then(|| {
        let relative = format!("{STATE_FOLDER}/home/{}", sidecar.runtime);
        let path = format!("{}/{relative}", sidecar.workspace_target.trim_end_matches('/'));
        env.push(("HOME".to_owned(), path.clone()));
        workspace.as_ref().and_then(|w| w.source.join(&relative)).map(|source| Volume {
            source,
            target: path,
            read_only: false,
        })
    });
    if let Some(path) = token {
        env.push((vars::EXEC_SERVER_TOKEN_FILE.to_owned(), path.to_owned()));
    }
    Container {
        role: Role::Builder(sidecar.runtime),
        name: sidecar.runtime.alias(),
        image: sidecar.image.clone(),
        command: sidecar.command.clone().unwrap_or_else(|| default_command(port, &sidecar.workspace_target)),
        user: if as_caller { User::Caller } else { User::Image },
        groups: if as_caller { vec![BUILDER_GROUP.to_owned()] } else { Vec::new() },
        working_dir: None,
        env,
        mounts: workspace.into_iter().chain(sidecar.cache_volumes.iter().cloned()).collect(),
        tmpfs: Vec::new(),
        token,
        port: Some(port),
        health: Some(BuilderHealth { test: sidecar.healthcheck.clone(), ready_timeout: sidecar.ready_timeout }),
        home: home.flatten(),
    }
}

#[cfg(test)]
mod tests;
