//! Why a run is invalid: one variant per mistake, its Display the message a user reads (the seed's words where it
//! gives them).

use std::fmt;
use std::path::PathBuf;

use super::{SshError, UlimitProblem};
use crate::profile::ProfileError;
use crate::runtime::Runtime;

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
    /// `volumes[i].source`: neither a path nor a volume name the engines accept.
    BadVolumeSource {
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
        problem: UlimitProblem,
    },
    /// `tool_backends.sidecars[i].env` or `.env_passthrough`: a name that is not a variable name.
    BadEnvName {
        index: usize,
        key: &'static str,
        name: String,
    },
    /// The workspace folder (`--workspace`, else the current folder) cannot be resolved.
    Workspace {
        path: PathBuf,
        error: std::io::Error,
    },
    WorkspaceNotAFolder {
        path: PathBuf,
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
            ModelError::BadVolumeSource { index, value } => write!(
                f,
                "volumes[{index}].source '{value}' is neither a path (/…, ./…) nor a volume name (letters, digits, \
                 '_', '.', '-', starting with a letter or digit)"
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
            ModelError::BadUlimit { value, problem } => write!(f, "ulimit '{value}' {problem}"),
            ModelError::BadEnvName { index, key, name } => write!(
                f,
                "tool_backends.sidecars[{index}].{key}: '{name}' is not a variable name (letters, digits and '_', \
                 not starting with a digit)"
            ),
            ModelError::Workspace { path, error } => write!(f, "workspace {}: {error}", path.display()),
            ModelError::WorkspaceNotAFolder { path } => write!(f, "workspace {}: not a directory", path.display()),
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
