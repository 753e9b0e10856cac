//! ssh-exec's own configuration mistakes; the kinds both programs share are [`crate::config_error::ConfigError`]'s.

use std::ffi::OsString;
use std::fmt;
use std::path::PathBuf;

use crate::config_error::ConfigError;
use crate::ssh::key::{KeyCopyError, KeyFileError};
use crate::ssh::paths::PathsError;

/// A mistake only ssh-exec can find.
#[derive(Debug)]
pub enum SshConfigError {
    NoHost,
    /// A value ssh takes as one option word has spaces, control characters or a leading `-`.
    NotOneWord {
        name: &'static str,
        value: String,
    },
    /// SSH_KEY_PATH names no usable key file.
    Key(KeyFileError),
    /// The key cannot be given to ssh as it is, nor copied.
    KeyCopy(KeyCopyError),
    KnownHostsNotAFile(PathBuf),
    /// SSH_WORKSPACE and SSH_HOST_CWD, or the current directory against them.
    Paths(PathsError),
    CwdUnreadable(std::io::Error),
    CwdNotUtf8(OsString),
    /// The command line and its environment make a script longer than one ssh command carries.
    ScriptTooLarge {
        bytes: usize,
    },
}

impl fmt::Display for SshConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SshConfigError::NoHost => {
                write!(f, "SSH_HOST is not set: name the host that runs the commands (e.g. SSH_HOST=build-mac)")
            }
            SshConfigError::NotOneWord { name, value } => {
                write!(f, "{name} is {value:?}: it must be one word without spaces and must not start with '-'")
            }
            SshConfigError::Key(err) => err.fmt(f),
            SshConfigError::KeyCopy(err) => err.fmt(f),
            SshConfigError::KnownHostsNotAFile(file) => write!(
                f,
                "SSH_KNOWN_HOSTS is {} but that is not a readable file: point it at a known_hosts file holding the \
                 host's key (ssh-keyscan -p PORT HOST), or unset it",
                file.display()
            ),
            SshConfigError::Paths(err) => err.fmt(f),
            SshConfigError::CwdUnreadable(err) => write!(f, "cannot read the current directory: {err}"),
            SshConfigError::CwdNotUtf8(cwd) => write!(f, "the current directory {cwd:?} is not valid UTF-8"),
            SshConfigError::ScriptTooLarge { bytes } => write!(
                f,
                "the command line is {bytes} bytes with its environment, over the {} KiB one ssh command can carry to \
                 any host (Linux limits one exec argument to 128 KiB): write long inputs to a file in the workspace \
                 and pass its path",
                crate::ssh::script::MAX_SCRIPT_BYTES / 1024
            ),
        }
    }
}

impl std::error::Error for SshConfigError {}

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
