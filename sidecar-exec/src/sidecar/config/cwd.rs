//! The working directory a call sends: SIDECAR_CWD, else the current directory, as the UTF-8 the request carries,
//! and why it cannot be sent ([`SentCwdError`]).

use std::path::PathBuf;

/// The working directory to send.
#[derive(Debug, Clone)]
pub struct Cwd {
    pub path: String,
    /// Whether it came from SIDECAR_CWD (else from the current directory): the fix for a refused cwd differs.
    pub from_env: bool,
}

/// SIDECAR_CWD when it is set and not empty, else the current directory.
pub fn from_env() -> Result<Cwd, SentCwdError> {
    let set = std::env::var_os("SIDECAR_CWD").filter(|c| !c.is_empty());
    let from_env = set.is_some();
    let path = match set {
        Some(cwd) => PathBuf::from(cwd),
        None => std::env::current_dir().map_err(SentCwdError::Unreadable)?,
    };
    let path = path.into_os_string().into_string().map_err(SentCwdError::NotUtf8)?;
    Ok(Cwd { path, from_env })
}

/// Why the working directory cannot be sent.
#[derive(Debug, thiserror::Error)]
pub enum SentCwdError {
    #[error("cannot read the current directory ({0}): set SIDECAR_CWD")]
    Unreadable(std::io::Error),
    #[error("the working directory {0:?} is not valid UTF-8: set SIDECAR_CWD")]
    NotUtf8(std::ffi::OsString),
}
