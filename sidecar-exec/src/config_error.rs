//! The one usage or configuration error of both programs: a mistake in how the client was called or configured,
//! found before anything is sent, printed as one `<program>: …` line, exit [`crate::exit::EXIT_CONFIG`].

use std::fmt;

use crate::argv::UsageError;
use crate::env::VariableError;
use crate::exit::EXIT_CONFIG;

/// A mistake that stops a call before it starts. The kinds both programs share are named here; `P` is the program's
/// own (sidecar-exec: [`crate::sidecar::config_error::SidecarConfigError`], ssh-exec:
/// [`crate::ssh::config_error::SshConfigError`]).
#[derive(Debug)]
pub enum ConfigError<P> {
    /// The command line.
    Usage(UsageError),
    /// A variable's value.
    Variable(VariableError),
    /// The program's own configuration.
    Program(P),
}

impl<P: fmt::Display> fmt::Display for ConfigError<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::Usage(err) => err.fmt(f),
            ConfigError::Variable(err) => err.fmt(f),
            ConfigError::Program(err) => err.fmt(f),
        }
    }
}

impl<P: fmt::Debug + fmt::Display> std::error::Error for ConfigError<P> {}

impl<P: fmt::Display> ConfigError<P> {
    /// Prints the mistake as `program`'s one line (followed by its `usage` lines for a command line that says
    /// nothing to run) and gives [`EXIT_CONFIG`].
    pub fn report(&self, program: &str, usage: &str) -> i32 {
        match self {
            ConfigError::Usage(mistake) if mistake.shows_usage() => eprintln!("{program}: {self}\n{usage}"),
            _ => eprintln!("{program}: {self}"),
        }
        EXIT_CONFIG
    }
}

impl<P> From<UsageError> for ConfigError<P> {
    fn from(err: UsageError) -> Self {
        ConfigError::Usage(err)
    }
}

impl<P> From<VariableError> for ConfigError<P> {
    fn from(err: VariableError) -> Self {
        ConfigError::Variable(err)
    }
}
