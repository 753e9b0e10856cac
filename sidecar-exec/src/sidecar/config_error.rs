//! sidecar-exec's own configuration mistakes; the kinds both programs share are
//! `crate::config_error::ConfigError`'s.

use crate::config_error::ConfigError;
use crate::sidecar::config::cwd::SentCwdError;
use crate::sidecar::config::sidecars::SidecarsError;
use crate::sidecar::stdin::whole::StdinError;
use crate::sidecar::wire::request::RequestError;

/// A mistake only sidecar-exec can find.
#[derive(Debug, thiserror::Error)]
pub enum SidecarConfigError {
    /// BUILD_SIDECARS, an entry's URL or token.
    #[error(transparent)]
    Sidecars(SidecarsError),
    /// The working directory to send.
    #[error(transparent)]
    Cwd(SentCwdError),
    /// stdin could not be read, or holds more than one request can carry.
    #[error(transparent)]
    Stdin(StdinError),
    /// The request would not fit the server's body limit.
    #[error(transparent)]
    Request(RequestError),
    /// /dev/urandom could not be read to name the run.
    #[error("cannot read /dev/urandom to name the run ({0}); set SIDECAR_RESUME=0 to run without a name")]
    NoRunId(std::io::Error),
    /// `--attach`'s run id is not one.
    #[error(transparent)]
    RunId(protocol::RunIdError),
}

impl From<SidecarConfigError> for ConfigError<SidecarConfigError> {
    fn from(err: SidecarConfigError) -> Self {
        ConfigError::Program(err)
    }
}

impl From<SidecarsError> for ConfigError<SidecarConfigError> {
    fn from(err: SidecarsError) -> Self {
        ConfigError::Program(SidecarConfigError::Sidecars(err))
    }
}

impl From<SentCwdError> for ConfigError<SidecarConfigError> {
    fn from(err: SentCwdError) -> Self {
        ConfigError::Program(SidecarConfigError::Cwd(err))
    }
}

/// The settings' mistakes (`CallSettings::from_env`): the working directory is
/// the only one of sidecar-exec's own kinds they can hold.
impl From<ConfigError<SentCwdError>> for ConfigError<SidecarConfigError> {
    fn from(err: ConfigError<SentCwdError>) -> Self {
        match err {
            ConfigError::Usage(err) => ConfigError::Usage(err),
            ConfigError::Variable(err) => ConfigError::Variable(err),
            ConfigError::Program(err) => err.into(),
        }
    }
}

impl From<StdinError> for ConfigError<SidecarConfigError> {
    fn from(err: StdinError) -> Self {
        ConfigError::Program(SidecarConfigError::Stdin(err))
    }
}

impl From<RequestError> for ConfigError<SidecarConfigError> {
    fn from(err: RequestError) -> Self {
        ConfigError::Program(SidecarConfigError::Request(err))
    }
}

impl From<protocol::RunIdError> for ConfigError<SidecarConfigError> {
    fn from(err: protocol::RunIdError) -> Self {
        ConfigError::Program(SidecarConfigError::RunId(err))
    }
}
