//! Which backends the configuration asks for (BUILD_SIDECARS; SSH_HOST with SSH_COMMANDS) and the client binary each
//! kind of wrapper execs: the program that runs the installer, or its sibling of the other name in the same folder.

use std::path::{Path, PathBuf};

use crate::env::{self, Entry, VariableError};
use crate::sidecar::config::sidecars::{Sidecars, SidecarsError};

/// One of the two clients.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Client {
    SidecarExec,
    SshExec,
}

impl Client {
    /// Its binary's name (and the prefix of its lines).
    pub fn name(self) -> &'static str {
        match self {
            Client::SidecarExec => "sidecar-exec",
            Client::SshExec => "ssh-exec",
        }
    }
}

/// The build sidecars, and the sidecar-exec their wrappers exec.
#[derive(Debug, Clone)]
pub struct SidecarBackend {
    pub sidecars: Sidecars,
    pub exe: PathBuf,
}

/// The SSH host (SSH_HOST, for messages), its commands beyond the runtime table (SSH_COMMANDS), and the ssh-exec
/// their wrappers exec.
#[derive(Debug, Clone)]
pub struct SshHostBackend {
    pub host: String,
    pub extra_commands: Vec<String>,
    pub exe: PathBuf,
}

/// What the configuration asks for: neither, either or both backends.
#[derive(Debug, Clone)]
pub struct Backends {
    pub sidecar: Option<SidecarBackend>,
    pub ssh: Option<SshHostBackend>,
}

impl Backends {
    /// The backends the environment configures, for the installer running as `running` from `exe`. BUILD_SIDECARS
    /// unset or blank, and SSH_HOST unset or blank, configure none; a BUILD_SIDECARS that is set must parse, and each
    /// backend's client must be there: `exe` when it is that client, else the one beside it.
    pub fn from_env(running: Client, exe: &Path) -> Result<Self, BackendsError> {
        let client = |needed: Client, variable| {
            let path = if needed == running { exe.to_owned() } else { exe.with_file_name(needed.name()) };
            match path.is_file() {
                true => Ok(path),
                false => Err(BackendsError::ClientMissing { path, needed, running, variable }),
            }
        };
        let sidecar = match Sidecars::from_env() {
            Ok(sidecars) => Some(SidecarBackend { sidecars, exe: client(Client::SidecarExec, "BUILD_SIDECARS")? }),
            Err(SidecarsError::NotSet) => None,
            Err(err) => return Err(BackendsError::Sidecars(err)),
        };
        let ssh = match env::text("SSH_HOST") {
            Some(host) => {
                let extra_commands = env::names("SSH_COMMANDS", Entry::Command).map_err(BackendsError::Variable)?;
                Some(SshHostBackend { host, extra_commands, exe: client(Client::SshExec, "SSH_HOST")? })
            }
            None => None,
        };
        Ok(Backends { sidecar, ssh })
    }
}

/// Why the configured backends cannot get wrappers.
#[derive(Debug, thiserror::Error)]
pub enum BackendsError {
    /// BUILD_SIDECARS is set but not valid.
    #[error(transparent)]
    Sidecars(SidecarsError),
    /// SSH_COMMANDS names something that is not a command.
    #[error(transparent)]
    Variable(VariableError),
    /// `variable` configures a backend whose client, `needed`, is not at `path` beside the `running` one.
    #[error(
        "FATAL: {variable} is set but {} does not exist: install {} beside {}, or unset {variable}",
        .path.display(),
        .needed.name(),
        .running.name()
    )]
    ClientMissing { path: PathBuf, needed: Client, running: Client, variable: &'static str },
}
