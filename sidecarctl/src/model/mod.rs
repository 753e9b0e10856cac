//! The validated configuration of a run: the profile merged with the flags, every value checked, with the seed's
//! messages word for word where it gives them. [`crate::plan`] turns it into the one container plan that `up`,
//! `compose` and `kube` render.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::options::RunOptions;
use crate::profile::{seconds, Profile};

mod error;
mod sidecar;
mod ssh;
mod ulimit;
mod volume;

pub use error::ModelError;
pub use sidecar::{Sidecar, DEFAULT_PORT, DEFAULT_READY_TIMEOUT_SECS, DEFAULT_WORKSPACE_TARGET};
pub use ssh::{AgentSsh, FileProblem, SshError};
pub use ulimit::{Ulimit, UlimitProblem};
pub use volume::{Volume, VolumeSource};

/// The validated configuration of one run.
#[derive(Debug, Clone, PartialEq)]
pub struct RunConfig {
    /// In the order written (profile or flags); runtimes are unique.
    pub sidecars: Vec<Sidecar>,
    /// The agent's volumes; each sidecar's workspace_target is one of their targets.
    pub volumes: Vec<Volume>,
    /// The host folder `--workspace` (or the current folder) names: absolute. For an emitted file
    /// ([`WorkspaceLookup::AsWritten`]) the current folder, which only places `${CWD}` and relative paths.
    pub workspace: PathBuf,
    /// A per-run bearer token is created and given to every container (off with `--no-token`).
    pub token: bool,
    pub ulimits: Vec<Ulimit>,
    /// The SSH backend's settings for the agent (the profile's `ssh:` block).
    pub ssh: Option<AgentSsh>,
    /// Things a person should know that do not stop the run (printed on stderr).
    pub warnings: Vec<String>,
}

/// Whether the workspace folder is looked up on this machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkspaceLookup {
    /// `up`: `--workspace` (else the current folder) must exist; it is resolved and bound.
    Resolve,
    /// `compose`/`kube`: the file is for another machine and folder, which need not exist here; `--workspace` is
    /// still the source of every workspace bind, and the file names it as written.
    AsWritten,
}

impl RunConfig {
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

    /// The agent's working folder, for every way of running it: the first sidecar's workspace, else the target of
    /// the workspace volume, else none (the image's).
    pub fn agent_workdir(&self) -> Option<String> {
        self.sidecars
            .first()
            .map(|s| s.workspace_target.clone())
            .or_else(|| self.volumes.iter().find(|v| v.source.is_workspace()).map(|v| v.target.clone()))
    }

    /// The volume a sidecar's workspace is (validation guarantees it exists).
    pub fn workspace_volume(&self, sidecar: &Sidecar) -> Option<&Volume> {
        self.volumes.iter().find(|v| v.target == sidecar.workspace_target)
    }

    /// Reads the profile the options name (if any) and builds the run from the current folder.
    pub fn from_options(options: &RunOptions, lookup: WorkspaceLookup) -> Result<RunConfig, ModelError> {
        let profile = options.profile.as_deref().map(Profile::load).transpose()?;
        let cwd = std::env::current_dir().map_err(|error| ModelError::Workspace { path: PathBuf::from("."), error })?;
        RunConfig::build(options, profile.unwrap_or_default(), &cwd, lookup)
    }

    /// The merge rules: `--disable-sidecars` wins; `--sidecar` replaces the profile's list; `--builder-image`
    /// retargets whichever list results; `--workspace` (default `cwd`) is `${CWD}` in volume sources and the
    /// implicit workspace volume when the profile declares none.
    pub fn build(
        options: &RunOptions,
        profile: Profile,
        cwd: &Path,
        lookup: WorkspaceLookup,
    ) -> Result<RunConfig, ModelError> {
        let workspace = match lookup {
            WorkspaceLookup::Resolve => resolve_workspace(options.workspace.as_deref(), cwd)?,
            WorkspaceLookup::AsWritten => resolve_workspace(None, cwd)?,
        };
        let mut warnings = Vec::new();
        let default_timeout = match &profile.tool_backends.ready_timeout {
            None => DEFAULT_READY_TIMEOUT_SECS,
            Some(v) => positive_seconds(v).ok_or(ModelError::ReadyTimeout { index: None })?,
        };

        let mut sidecars = if options.disable_sidecars {
            Vec::new()
        } else if !options.sidecars.is_empty() {
            sidecar::from_flags(&options.sidecars, default_timeout)?
        } else {
            let specs = profile.tool_backends.sidecars.clone().unwrap_or_default();
            let sidecars = specs
                .iter()
                .enumerate()
                .map(|(i, spec)| Sidecar::from_spec(i, spec, default_timeout, cwd, &workspace))
                .collect::<Result<Vec<_>, _>>()?;
            sidecar::check_unique(&sidecars)?;
            sidecars
        };
        if !options.disable_sidecars {
            sidecar::retarget(&mut sidecars, &options.builder_images)?;
        }
        if !sidecars.is_empty() && profile.runner.as_deref() == Some("custom") {
            return Err(ModelError::CustomRunner);
        }

        let workspace_text = workspace.display().to_string();
        let mut volumes = match &profile.volumes {
            Some(volumes) => volumes
                .iter()
                .enumerate()
                .map(|(index, v)| {
                    let source = VolumeSource::parse(&v.source.replace("${CWD}", &workspace_text), cwd, &workspace);
                    match &source {
                        VolumeSource::Named(name) if !volume_name_ok(name) => {
                            Err(ModelError::BadVolumeSource { index, value: v.source.clone() })
                        }
                        _ => Ok(Volume { source, target: v.target.clone(), read_only: v.read_only }),
                    }
                })
                .collect::<Result<Vec<_>, _>>()?,
            None => vec![Volume {
                source: VolumeSource::Workspace { under: String::new() },
                target: sidecars.first().map_or(DEFAULT_WORKSPACE_TARGET.to_owned(), |s| s.workspace_target.clone()),
                read_only: false,
            }],
        };
        if options.workspace.is_some() {
            // An explicit --workspace is the source of every workspace bind, whatever the profile wrote there.
            for volume in &mut volumes {
                if sidecars.iter().any(|s| s.workspace_target == volume.target) {
                    volume.source = VolumeSource::Workspace { under: String::new() };
                }
            }
        }
        for sidecar in &sidecars {
            if !volumes.iter().any(|v| v.target == sidecar.workspace_target) {
                return Err(ModelError::NoWorkspaceVolume { target: sidecar.workspace_target.clone() });
            }
        }
        let mut run = RunConfig {
            sidecars,
            volumes,
            workspace,
            token: !options.no_token,
            ulimits: Vec::new(),
            ssh: None,
            warnings: Vec::new(),
        };
        run.ssh = AgentSsh::from_profile(profile.ssh.as_ref(), cwd, &run.workspace, run.agent_workdir().as_deref())?;
        if !run.sidecars.is_empty() && run.ssh.is_some() {
            warnings.push(
                "both tool_backends.sidecars and ssh are configured: a single build would then span two filesystems"
                    .to_owned(),
            );
        }

        for text in profile.ulimits.iter().chain(&options.ulimits) {
            let limit =
                Ulimit::parse(text).map_err(|problem| ModelError::BadUlimit { value: text.clone(), problem })?;
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
    let canonical = path.canonicalize().map_err(|error| ModelError::Workspace { path: path.clone(), error })?;
    if !canonical.is_dir() {
        return Err(ModelError::WorkspaceNotAFolder { path });
    }
    Ok(canonical)
}

/// A name Docker and Podman accept for a volume: `[A-Za-z0-9][A-Za-z0-9_.-]*`.
fn volume_name_ok(name: &str) -> bool {
    name.chars().next().is_some_and(|c| c.is_ascii_alphanumeric())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c))
}

fn positive_seconds(value: &serde_norway::Value) -> Option<f64> {
    seconds(value).filter(|s| *s > 0.0 && s.is_finite())
}

#[cfg(test)]
mod tests;
