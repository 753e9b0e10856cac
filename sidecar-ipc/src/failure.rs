//! How a subcommand fails: one `sidecar-ipc: …` line on stderr and an exit code.

/// Exit code for a usage mistake (as clap uses for its own).
pub const USAGE: i32 = 2;
/// Exit code when a prompt got no result in time (as `timeout(1)`).
pub const TIMED_OUT: i32 = 124;

#[derive(Debug)]
pub struct Failure {
    pub code: i32,
    pub message: String,
}

impl Failure {
    /// Exit 1: something went wrong at run time.
    pub fn new(message: impl std::fmt::Display) -> Self {
        Failure { code: 1, message: message.to_string() }
    }

    /// Exit 2: the command line or its inputs are wrong.
    pub fn usage(message: impl std::fmt::Display) -> Self {
        Failure { code: USAGE, message: message.to_string() }
    }

    pub fn with_code(code: i32, message: impl std::fmt::Display) -> Self {
        Failure { code, message: message.to_string() }
    }

    /// Prints the message and returns the exit code.
    pub fn report(&self) -> i32 {
        eprintln!("sidecar-ipc: {}", self.message);
        self.code
    }
}

impl From<String> for Failure {
    fn from(message: String) -> Self {
        Failure::new(message)
    }
}

impl From<crate::ipc::FolderError> for Failure {
    fn from(err: crate::ipc::FolderError) -> Self {
        Failure::new(err)
    }
}

impl From<crate::run_config::RunConfigError> for Failure {
    fn from(err: crate::run_config::RunConfigError) -> Self {
        Failure::new(err)
    }
}
