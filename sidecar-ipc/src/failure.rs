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
    pub fn new(message: impl Into<String>) -> Self {
        Failure { code: 1, message: message.into() }
    }

    /// Exit 2: the command line or its inputs are wrong.
    pub fn usage(message: impl Into<String>) -> Self {
        Failure { code: USAGE, message: message.into() }
    }

    pub fn with_code(code: i32, message: impl Into<String>) -> Self {
        Failure { code, message: message.into() }
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
