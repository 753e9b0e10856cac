//! The working directory a call sends: SIDECAR_CWD, else the current directory, as the UTF-8 the request carries,
//! and why it cannot be sent ([`SentCwdError`]).

use std::fmt;
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
#[derive(Debug)]
pub enum SentCwdError {
    Unreadable(std::io::Error),
    NotUtf8(std::ffi::OsString),
}

impl fmt::Display for SentCwdError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SentCwdError::Unreadable(err) => write!(f, "cannot read the current directory ({err}): set SIDECAR_CWD"),
            SentCwdError::NotUtf8(cwd) => {
                write!(f, "the working directory {cwd:?} is not valid UTF-8: set SIDECAR_CWD")
            }
        }
    }
}

impl std::error::Error for SentCwdError {}
