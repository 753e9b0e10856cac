//! How a subcommand ends when it fails: its exit code, and one `sidecar-ipc: …` line on stderr.

use std::fmt::Display;

use crate::ipc::FolderError;
use crate::run_config::RunConfigError;

/// Exit code for a usage mistake (as clap uses for its own).
pub const USAGE: i32 = 2;
/// Exit code when a prompt got no result in time (as `timeout(1)`).
pub const TIMED_OUT: i32 = 124;

/// A failed subcommand, by the exit code it ends with; the message says what was wrong and what to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExitError {
    /// Exit 1: something went wrong at run time.
    Failed(String),
    /// Exit 2: the command line or its inputs are wrong.
    Usage(String),
    /// Exit 124: a prompt got no result in time.
    TimedOut(String),
}

impl ExitError {
    pub fn failed(message: impl Display) -> Self {
        ExitError::Failed(message.to_string())
    }

    pub fn usage(message: impl Display) -> Self {
        ExitError::Usage(message.to_string())
    }

    pub fn code(&self) -> i32 {
        match self {
            ExitError::Failed(_) => 1,
            ExitError::Usage(_) => USAGE,
            ExitError::TimedOut(_) => TIMED_OUT,
        }
    }

    pub fn message(&self) -> &str {
        match self {
            ExitError::Failed(message) | ExitError::Usage(message) | ExitError::TimedOut(message) => message,
        }
    }

    /// Prints the message and returns the exit code.
    pub fn report(&self) -> i32 {
        eprintln!("sidecar-ipc: {}", self.message());
        self.code()
    }
}

impl From<FolderError> for ExitError {
    fn from(err: FolderError) -> Self {
        ExitError::failed(err)
    }
}

impl From<RunConfigError> for ExitError {
    fn from(err: RunConfigError) -> Self {
        ExitError::failed(err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_of_failure_has_its_exit_code() {
        let codes = [ExitError::failed("x"), ExitError::usage("x"), ExitError::TimedOut("x".into())].map(|e| e.code());
        assert_eq!(codes, [1, 2, 124]);
        assert_eq!(ExitError::usage(format!("--schema: {}", "bad")).message(), "--schema: bad");
    }
}
