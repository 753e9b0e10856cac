//! ssh-exec's own configuration mistakes; the kinds both programs share are [`crate::config_error::ConfigError`]'s.

use std::ffi::OsString;
use std::path::PathBuf;

use crate::config_error::ConfigError;
use crate::ssh::key::{KeyCopyError, KeyFileError};
use crate::ssh::paths::PathsError;

/// A mistake only ssh-exec can find.
#[derive(Debug, thiserror::Error)]
pub enum SshConfigError {
    #[error("SSH_HOST is not set: name the host that runs the commands (e.g. SSH_HOST=build-mac)")]
    NoHost,
    /// A value ssh takes as one option word has spaces, control characters or a leading `-`.
    #[error("{name} is {value:?}: it must be one word without spaces and must not start with '-'")]
    NotOneWord { name: &'static str, value: String },
    /// SSH_KEY_PATH names no usable key file.
    #[error(transparent)]
    Key(KeyFileError),
    /// The key cannot be given to ssh as it is, nor copied.
    #[error(transparent)]
    KeyCopy(KeyCopyError),
    #[error(
        "SSH_KNOWN_HOSTS is {} but that is not a readable file: point it at a known_hosts file holding the host's key \
         (ssh-keyscan -p PORT HOST), or unset it",
        .0.display()
    )]
    KnownHostsNotAFile(PathBuf),
    /// SSH_WORKSPACE and SSH_HOST_CWD, or the current directory against them.
    #[error(transparent)]
    Paths(PathsError),
    #[error("cannot read the current directory: {0}")]
    CwdUnreadable(std::io::Error),
    #[error("the current directory {0:?} is not valid UTF-8")]
    CwdNotUtf8(OsString),
    /// The command line and its environment make a script longer than one ssh command carries.
    #[error(
        "the command line is {bytes} bytes with its environment, over the {} KiB one ssh command can carry to any host \
         (Linux limits one exec argument to 128 KiB): write long inputs to a file in the workspace and pass its path",
        crate::ssh::script::MAX_SCRIPT_BYTES / 1024
    )]
    ScriptTooLarge { bytes: usize },
}

impl From<SshConfigError> for ConfigError<SshConfigError> {
    fn from(err: SshConfigError) -> Self {
        ConfigError::Program(err)
    }
}

impl From<KeyFileError> for ConfigError<SshConfigError> {
    fn from(err: KeyFileError) -> Self {
        ConfigError::Program(SshConfigError::Key(err))
    }
}

impl From<KeyCopyError> for ConfigError<SshConfigError> {
    fn from(err: KeyCopyError) -> Self {
        ConfigError::Program(SshConfigError::KeyCopy(err))
    }
}

impl From<PathsError> for ConfigError<SshConfigError> {
    fn from(err: PathsError) -> Self {
        ConfigError::Program(SshConfigError::Paths(err))
    }
}
