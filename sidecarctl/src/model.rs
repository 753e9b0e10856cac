//! One validated description of a run: the profile merged with the flags, every value checked, with the seed's
//! messages word for word where it gives them. `up`, `compose` and `kube` all start from a `Run`, so what the tool
//! starts and what it emits cannot disagree.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::options::RunOptions;
use crate::profile::{scalar_string, seconds, Profile, ProfileError, SidecarSpec};
use crate::runtime::Runtime;

#[path = "model_ssh.rs"]
mod ssh;
pub use ssh::{SshBackend, SshError};

pub const DEFAULT_PORT: u16 = 8080;
pub const DEFAULT_WORKSPACE_TARGET: &str = "/workspace";
pub const DEFAULT_READY_TIMEOUT_SECS: f64 = 60.0;

/// One builder, every default applied.
#[derive(Debug, Clone, PartialEq)]
pub struct Sidecar {
    pub runtime: Runtime,
    pub image: String,
    pub port: u16,
    /// `exec-server -port P -cwd W` unless the profile's `command` overrides it.
    pub command: Vec<String>,
    pub env: BTreeMap<String, String>,
    pub env_passthrough: Vec<String>,
    /// `name:/path` (named volume, never removed) or `/host:/path`.
    pub cache_volumes: Vec<String>,
    /// The profile's health command override, compose form (`["CMD", …]`, `["CMD-SHELL", …]`).
    pub healthcheck: Option<Vec<String>>,
    pub workspace_target: String,
    /// Seconds, > 0; kept as written for messages ("within 60s").
    pub ready_timeout: f64,
    pub run_as_caller_uid: bool,
}

impl Sidecar {
    /// A sidecar with every default: what `--sidecar RT` asks for.
    pub fn defaults(runtime: Runtime, ready_timeout: f64) -> Sidecar {
        Sidecar {
            runtime,
            image: runtime.default_image(),
            port: DEFAULT_PORT,
            command: default_command(DEFAULT_PORT, DEFAULT_WORKSPACE_TARGET),
            env: BTreeMap::new(),
            env_passthrough: Vec::new(),
            cache_volumes: Vec::new(),
            healthcheck: None,
            workspace_target: DEFAULT_WORKSPACE_TARGET.to_owned(),
            ready_timeout,
            run_as_caller_uid: true,
        }
    }

    pub fn ready_timeout(&self) -> Duration {
        Duration::from_secs_f64(self.ready_timeout)
    }

    /// The URL the agent uses on the run's private network (the contract's `internal_url`).
    pub fn internal_url(&self) -> String {
        format!("http://{}:{}", self.runtime.alias(), self.port)
    }
}

fn default_command(port: u16, cwd: &str) -> Vec<String> {
    ["exec-server", "-port", &port.to_string(), "-cwd", cwd].map(str::to_owned).to_vec()
}

/// A bind or named volume of the agent; the one at a sidecar's `workspace_target` is shared with that builder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Volume {
    pub source: String,
    pub target: String,
    pub read_only: bool,
}

impl Volume {
    /// The engine's bind syntax, `source:target[:ro]`.
    pub fn bind(&self) -> String {
        format!("{}:{}{}", self.source, self.target, if self.read_only { ":ro" } else { "" })
    }
}

/// A resource limit every container of the run gets (`HostConfig.Ulimits`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ulimit {
    pub name: String,
    pub soft: i64,
    pub hard: i64,
}

/// The validated run.
#[derive(Debug, Clone, PartialEq)]
pub struct Run {
    /// In the order written (profile or flags); runtimes are unique.
    pub sidecars: Vec<Sidecar>,
    /// The agent's volumes; each sidecar's workspace_target is one of their targets.
    pub volumes: Vec<Volume>,
    /// The host folder `--workspace` (or the current folder) names: absolute.
    pub workspace: PathBuf,
    /// A per-run bearer token is created and given to every container (off with `--no-token`).
    pub token: bool,
    pub ulimits: Vec<Ulimit>,
    /// The SSH backend's settings for the agent (the profile's `ssh:` block).
    pub ssh: Option<SshBackend>,
    /// Things a person should know that do not stop the run (printed on stderr).
    pub warnings: Vec<String>,
}

impl Run {
    /// `BUILD_SIDECARS`: exactly the contract's shape, `{"RT":{"internal_url":"http://builder-RT:PORT"}}`.
    pub fn build_sidecars_json(&self, url: impl Fn(&Sidecar) -> String) -> String {
        let map: serde_json::Map<String, serde_json::Value> = self
            .sidecars
            .iter()
            .map(|s| (s.runtime.to_string(), serde_json::json!({ "internal_url": url(s) })))
            .collect();
        serde_json::Value::Object(map).to_string()
    }

    /// `SIDECAR_ENV_PASSTHROUGH`: the union of the sidecars' `env_passthrough`, in first-seen order.
    pub fn env_passthrough(&self) -> String {
        let mut seen = BTreeSet::new();
        let names: Vec<&str> = self
            .sidecars
            .iter()
            .flat_map(|s| s.env_passthrough.iter().map(String::as_str))
            .filter(|name| seen.insert(*name))
            .collect();
        names.join(",")
    }

    /// The agent's working folder: the first sidecar's workspace, else the target of the volume whose source is the
    /// workspace folder.
    pub fn agent_workdir(&self) -> Option<String> {
        self.sidecars.first().map(|s| s.workspace_target.clone()).or_else(|| {
            self.volumes.iter().find(|v| v.source == self.workspace.display().to_string()).map(|v| v.target.clone())
        })
    }

    /// The volume a sidecar's workspace is (validation guarantees it exists).
    pub fn workspace_volume(&self, sidecar: &Sidecar) -> Option<&Volume> {
        self.volumes.iter().find(|v| v.target == sidecar.workspace_target)
    }
}

/// Why a run is invalid. Display is the message a user reads: the seed's words where it gives them.
#[derive(Debug)]
pub enum ModelError {
    Profile(ProfileError),
    InvalidRuntime {
        index: usize,
        value: String,
    },
    DuplicateRuntime {
        index: usize,
        value: String,
    },
    EmptyImage {
        index: usize,
    },
    PortRange {
        index: usize,
    },
    /// `tool_backends.ready_timeout` (index `None`) or `tool_backends.sidecars[i].ready_timeout`.
    ReadyTimeout {
        index: Option<usize>,
    },
    NoWorkspaceVolume {
        target: String,
    },
    CustomRunner,
    InvalidEnv {
        index: usize,
        name: String,
    },
    BadCacheVolume {
        index: usize,
        value: String,
    },
    BadHealthcheck {
        index: usize,
    },
    /// `--sidecar X` or `--builder-image X=…` with X not a runtime.
    FlagRuntime {
        flag: &'static str,
        value: String,
    },
    FlagDuplicate {
        value: String,
    },
    BuilderImageMalformed {
        value: String,
    },
    BuilderImageNoSidecar {
        runtime: Runtime,
    },
    BadUlimit {
        value: String,
    },
    Workspace {
        path: PathBuf,
        error: String,
    },
    Ssh(SshError),
}

impl fmt::Display for ModelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let list = Runtime::list();
        match self {
            ModelError::Profile(e) => e.fmt(f),
            ModelError::InvalidRuntime { index, value } => {
                write!(f, "tool_backends.sidecars[{index}].runtime '{value}' is invalid (must be one of: {list})")
            }
            ModelError::DuplicateRuntime { index, value } => {
                write!(f, "tool_backends.sidecars[{index}]: duplicate runtime '{value}'")
            }
            ModelError::EmptyImage { index } => write!(f, "tool_backends.sidecars[{index}].image must be non-empty"),
            ModelError::PortRange { index } => {
                write!(f, "tool_backends.sidecars[{index}].port must be between 1 and 65535")
            }
            ModelError::ReadyTimeout { index: None } => {
                write!(f, "tool_backends.ready_timeout must be a positive number of seconds")
            }
            ModelError::ReadyTimeout { index: Some(index) } => {
                write!(f, "tool_backends.sidecars[{index}].ready_timeout must be a positive number of seconds")
            }
            ModelError::NoWorkspaceVolume { target } => {
                write!(f, "tool_backends: no volume targets '{target}' — build sidecars need the workspace bind-mounted")
            }
            ModelError::CustomRunner => write!(
                f,
                "Build sidecars require the 'docker' or 'compose' runner, but this profile uses the custom runner."
            ),
            ModelError::InvalidEnv { index, name } => {
                write!(f, "tool_backends.sidecars[{index}].env.{name} must be a string, number or boolean")
            }
            ModelError::BadCacheVolume { index, value } => write!(
                f,
                "tool_backends.sidecars[{index}].cache_volumes: '{value}' is not NAME:/PATH or /HOST:/PATH"
            ),
            ModelError::BadHealthcheck { index } => {
                write!(f, "tool_backends.sidecars[{index}].healthcheck.test must name a command")
            }
            ModelError::FlagRuntime { flag, value } => {
                write!(f, "{flag} runtime '{value}' is invalid (must be one of: {list})")
            }
            ModelError::FlagDuplicate { value } => write!(f, "--sidecar: duplicate runtime '{value}'"),
            ModelError::BuilderImageMalformed { value } => {
                write!(f, "--builder-image expects <runtime>=<image>, got '{value}'")
            }
            ModelError::BuilderImageNoSidecar { runtime } => write!(
                f,
                "--builder-image {runtime}=…: this run has no {runtime} sidecar (add --sidecar {runtime} or declare it in the profile)"
            ),
            ModelError::BadUlimit { value } => {
                write!(f, "ulimit '{value}' is not NAME=SOFT[:HARD] with numbers (e.g. nofile=4096:4096)")
            }
            ModelError::Workspace { path, error } => write!(f, "workspace {}: {error}", path.display()),
            ModelError::Ssh(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for ModelError {}

impl From<SshError> for ModelError {
    fn from(e: SshError) -> Self {
        ModelError::Ssh(e)
    }
}

impl From<ProfileError> for ModelError {
    fn from(e: ProfileError) -> Self {
        ModelError::Profile(e)
    }
}

impl Run {
    /// Reads the profile the options name (if any) and builds the run from the current folder.
    pub fn from_options(options: &RunOptions) -> Result<Run, ModelError> {
        let profile = options.profile.as_deref().map(Profile::load).transpose()?;
        let cwd = std::env::current_dir()
            .map_err(|e| ModelError::Workspace { path: PathBuf::from("."), error: e.to_string() })?;
        Run::build(options, profile.unwrap_or_default(), &cwd)
    }

    /// The merge rules: `--disable-sidecars` wins; `--sidecar` replaces the profile's list; `--builder-image`
    /// retargets whichever list results; `--workspace` (default `cwd`) is `${CWD}` in volume sources and the
    /// implicit workspace volume when the profile declares none.
    pub fn build(options: &RunOptions, profile: Profile, cwd: &Path) -> Result<Run, ModelError> {
        let workspace = resolve_workspace(options.workspace.as_deref(), cwd)?;
        let mut warnings = Vec::new();
        let default_timeout = match &profile.tool_backends.ready_timeout {
            None => DEFAULT_READY_TIMEOUT_SECS,
            Some(v) => positive_seconds(v).ok_or(ModelError::ReadyTimeout { index: None })?,
        };

        let mut sidecars = if options.disable_sidecars {
            Vec::new()
        } else if !options.sidecars.is_empty() {
            from_flags(&options.sidecars, default_timeout)?
        } else {
            let specs = profile.tool_backends.sidecars.clone().unwrap_or_default();
            let sidecars = specs
                .iter()
                .enumerate()
                .map(|(i, spec)| from_spec(i, spec, default_timeout))
                .collect::<Result<Vec<_>, _>>()?;
            check_unique(&sidecars)?;
            sidecars
        };
        if !options.disable_sidecars {
            retarget(&mut sidecars, &options.builder_images)?;
        }
        if !sidecars.is_empty() && profile.runner.as_deref() == Some("custom") {
            return Err(ModelError::CustomRunner);
        }

        let workspace_text = workspace.display().to_string();
        let volumes = match &profile.volumes {
            Some(volumes) => volumes
                .iter()
                .map(|v| Volume {
                    source: host_source(&v.source.replace("${CWD}", &workspace_text), cwd),
                    target: v.target.clone(),
                    read_only: v.read_only,
                })
                .collect(),
            None => vec![Volume {
                source: workspace_text,
                target: sidecars.first().map_or(DEFAULT_WORKSPACE_TARGET.to_owned(), |s| s.workspace_target.clone()),
                read_only: false,
            }],
        };
        let mut volumes: Vec<Volume> = volumes;
        if options.workspace.is_some() {
            // An explicit --workspace is the source of every workspace bind, whatever the profile wrote there.
            for volume in &mut volumes {
                if sidecars.iter().any(|s| s.workspace_target == volume.target) {
                    volume.source = workspace.display().to_string();
                }
            }
        }
        for sidecar in &sidecars {
            if !volumes.iter().any(|v| v.target == sidecar.workspace_target) {
                return Err(ModelError::NoWorkspaceVolume { target: sidecar.workspace_target.clone() });
            }
        }
        let mut run = Run {
            sidecars,
            volumes,
            workspace,
            token: !options.no_token,
            ulimits: Vec::new(),
            ssh: None,
            warnings: Vec::new(),
        };
        run.ssh = SshBackend::from_profile(profile.ssh.as_ref(), cwd, &run.workspace, run.agent_workdir().as_deref())?;
        if !run.sidecars.is_empty() && run.ssh.is_some() {
            warnings.push(
                "both tool_backends.sidecars and ssh are configured: a single build would then span two filesystems"
                    .to_owned(),
            );
        }

        for text in profile.ulimits.iter().chain(&options.ulimits) {
            let limit = parse_ulimit(text)?;
            run.ulimits.retain(|u: &Ulimit| u.name != limit.name); // a flag overrides the profile's value
            run.ulimits.push(limit);
        }
        run.warnings = warnings;
        Ok(run)
    }
}

fn resolve_workspace(flag: Option<&Path>, cwd: &Path) -> Result<PathBuf, ModelError> {
    let path = match flag {
        Some(p) if p.is_absolute() => p.to_path_buf(),
        Some(p) => cwd.join(p),
        None => cwd.to_path_buf(),
    };
    let canonical =
        path.canonicalize().map_err(|e| ModelError::Workspace { path: path.clone(), error: e.to_string() })?;
    if !canonical.is_dir() {
        return Err(ModelError::Workspace { path, error: "not a directory".to_owned() });
    }
    Ok(canonical)
}

/// A relative host path (`./x`, `../x`) is relative to the current folder; a bare name is a named volume.
fn host_source(source: &str, cwd: &Path) -> String {
    if source.starts_with("./") || source.starts_with("../") || source == "." {
        cwd.join(source).display().to_string()
    } else {
        source.to_owned()
    }
}

fn positive_seconds(value: &serde_norway::Value) -> Option<f64> {
    seconds(value).filter(|s| *s > 0.0 && s.is_finite())
}

fn from_flags(names: &[String], ready_timeout: f64) -> Result<Vec<Sidecar>, ModelError> {
    let mut sidecars: Vec<Sidecar> = Vec::new();
    for name in names {
        let runtime =
            name.parse::<Runtime>().map_err(|_| ModelError::FlagRuntime { flag: "--sidecar", value: name.clone() })?;
        if sidecars.iter().any(|s| s.runtime == runtime) {
            return Err(ModelError::FlagDuplicate { value: name.clone() });
        }
        sidecars.push(Sidecar::defaults(runtime, ready_timeout));
    }
    Ok(sidecars)
}

fn from_spec(index: usize, spec: &SidecarSpec, default_timeout: f64) -> Result<Sidecar, ModelError> {
    let runtime = spec
        .runtime
        .parse::<Runtime>()
        .map_err(|_| ModelError::InvalidRuntime { index, value: spec.runtime.clone() })?;
    if spec.image.trim().is_empty() {
        return Err(ModelError::EmptyImage { index });
    }
    let port = match spec.port {
        None => DEFAULT_PORT,
        Some(p) => u16::try_from(p).ok().filter(|p| *p >= 1).ok_or(ModelError::PortRange { index })?,
    };
    let ready_timeout = match &spec.ready_timeout {
        None => default_timeout,
        Some(v) => positive_seconds(v).ok_or(ModelError::ReadyTimeout { index: Some(index) })?,
    };
    let workspace_target = spec.workspace_target.clone().unwrap_or_else(|| DEFAULT_WORKSPACE_TARGET.to_owned());
    let mut env = BTreeMap::new();
    for (name, value) in &spec.env {
        let value = scalar_string(value).ok_or_else(|| ModelError::InvalidEnv { index, name: name.clone() })?;
        env.insert(name.clone(), value);
    }
    for cache in &spec.cache_volumes {
        let valid = cache.split_once(':').is_some_and(|(source, target)| !source.is_empty() && target.starts_with('/'));
        if !valid {
            return Err(ModelError::BadCacheVolume { index, value: cache.clone() });
        }
    }
    let healthcheck = match &spec.healthcheck {
        None => None,
        Some(h) => {
            let command_named = match h.test.first().map(String::as_str) {
                Some("CMD" | "CMD-SHELL") => h.test.len() > 1,
                Some("NONE") | None => false,
                Some(_) => true,
            };
            if !command_named {
                return Err(ModelError::BadHealthcheck { index });
            }
            Some(h.test.clone())
        }
    };
    Ok(Sidecar {
        runtime,
        image: spec.image.trim().to_owned(),
        port,
        command: spec.command.clone().unwrap_or_else(|| default_command(port, &workspace_target)),
        env,
        env_passthrough: spec.env_passthrough.clone(),
        cache_volumes: spec.cache_volumes.clone(),
        healthcheck,
        workspace_target,
        ready_timeout,
        run_as_caller_uid: spec.run_as_caller_uid.unwrap_or(true),
    })
}

fn check_unique(sidecars: &[Sidecar]) -> Result<(), ModelError> {
    for (index, sidecar) in sidecars.iter().enumerate() {
        if sidecars[..index].iter().any(|earlier| earlier.runtime == sidecar.runtime) {
            return Err(ModelError::DuplicateRuntime { index, value: sidecar.runtime.to_string() });
        }
    }
    Ok(())
}

fn retarget(sidecars: &mut [Sidecar], values: &[String]) -> Result<(), ModelError> {
    for value in values {
        let malformed = || ModelError::BuilderImageMalformed { value: value.clone() };
        let (name, image) = value.split_once('=').ok_or_else(malformed)?;
        if name.is_empty() || image.trim().is_empty() {
            return Err(malformed());
        }
        let runtime = name
            .parse::<Runtime>()
            .map_err(|_| ModelError::FlagRuntime { flag: "--builder-image", value: name.to_owned() })?;
        let sidecar =
            sidecars.iter_mut().find(|s| s.runtime == runtime).ok_or(ModelError::BuilderImageNoSidecar { runtime })?;
        sidecar.image = image.trim().to_owned();
    }
    Ok(())
}

/// `NAME=SOFT[:HARD]`, HARD defaulting to SOFT (as `docker run --ulimit`).
pub fn parse_ulimit(text: &str) -> Result<Ulimit, ModelError> {
    let bad = || ModelError::BadUlimit { value: text.to_owned() };
    let (name, limits) = text.split_once('=').ok_or_else(bad)?;
    let (soft, hard) = limits.split_once(':').unwrap_or((limits, limits));
    let soft: i64 = soft.trim().parse().map_err(|_| bad())?;
    let hard: i64 = hard.trim().parse().map_err(|_| bad())?;
    let name = name.trim();
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') || soft > hard {
        return Err(bad());
    }
    Ok(Ulimit { name: name.to_owned(), soft, hard })
}

#[cfg(test)]
#[path = "model_tests.rs"]
mod tests;
