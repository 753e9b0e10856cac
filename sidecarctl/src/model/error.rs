//! Why a run is invalid: one variant per mistake, its Display the message a user reads (the seed's words where it
//! gives them).

use std::path::PathBuf;

use super::{SshError, UlimitProblem};
use crate::profile::ProfileError;
use crate::runtime::Runtime;

/// `tool_backends.sidecars[i]`, or `tool_backends` itself for a setting of all of them (`index` `None`).
fn sidecar_key(index: &Option<usize>) -> String {
    match index {
        Some(index) => format!("tool_backends.sidecars[{index}]"),
        None => "tool_backends".to_owned(),
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    #[error(transparent)]
    Profile(#[from] ProfileError),
    #[error("tool_backends.sidecars[{index}].runtime '{value}' is invalid (must be one of: {})", Runtime::list())]
    InvalidRuntime { index: usize, value: String },
    #[error("tool_backends.sidecars[{index}]: duplicate runtime '{value}'")]
    DuplicateRuntime { index: usize, value: String },
    #[error("tool_backends.sidecars[{index}].image must be non-empty")]
    EmptyImage { index: usize },
    #[error("tool_backends.sidecars[{index}].port must be between 1 and 65535")]
    PortRange { index: usize },
    /// `tool_backends.ready_timeout` (index `None`) or `tool_backends.sidecars[i].ready_timeout`.
    #[error("{}.ready_timeout must be a positive number of seconds", sidecar_key(.index))]
    ReadyTimeout { index: Option<usize> },
    #[error("tool_backends: no volume targets '{target}' — build sidecars need the workspace bind-mounted")]
    NoWorkspaceVolume { target: String },
    #[error("Build sidecars require the 'docker' or 'compose' runner, but this profile uses the custom runner.")]
    CustomRunner,
    #[error("tool_backends.sidecars[{index}].env.{name} must be a string, number or boolean")]
    InvalidEnv { index: usize, name: String },
    #[error("tool_backends.sidecars[{index}].cache_volumes: '{value}' is not NAME:/PATH or /HOST:/PATH")]
    BadCacheVolume { index: usize, value: String },
    /// `volumes[i].source`: neither a path nor a volume name the engines accept.
    #[error(
        "volumes[{index}].source '{value}' is neither a path (/…, ./…) nor a volume name (letters, digits, '_', '.', \
         '-', starting with a letter or digit)"
    )]
    BadVolumeSource { index: usize, value: String },
    #[error("tool_backends.sidecars[{index}].healthcheck.test must name a command")]
    BadHealthcheck { index: usize },
    /// `--sidecar X` or `--builder-image X=…` with X not a runtime.
    #[error("{flag} runtime '{value}' is invalid (must be one of: {})", Runtime::list())]
    FlagRuntime { flag: &'static str, value: String },
    #[error("--sidecar: duplicate runtime '{value}'")]
    FlagDuplicate { value: String },
    #[error("--builder-image expects <runtime>=<image>, got '{value}'")]
    BuilderImageMalformed { value: String },
    #[error(
        "--builder-image {runtime}=…: this run has no {runtime} sidecar (add --sidecar {runtime} or declare it in the \
         profile)"
    )]
    BuilderImageNoSidecar { runtime: Runtime },
    #[error("ulimit '{value}' {problem}")]
    BadUlimit { value: String, problem: UlimitProblem },
    /// `tool_backends.sidecars[i].env` or `.env_passthrough`: a name that is not a variable name.
    #[error(
        "tool_backends.sidecars[{index}].{key}: '{name}' is not a variable name (letters, digits and '_', not \
         starting with a digit)"
    )]
    BadEnvName { index: usize, key: &'static str, name: String },
    /// The workspace folder (`--workspace`, else the current folder) cannot be resolved.
    #[error("workspace {}: {error}", .path.display())]
    Workspace { path: PathBuf, error: std::io::Error },
    #[error("workspace {}: not a directory", .path.display())]
    WorkspaceNotAFolder { path: PathBuf },
    #[error(transparent)]
    Ssh(#[from] SshError),
}
