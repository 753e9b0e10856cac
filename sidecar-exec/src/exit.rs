//! How both clients end: the exit code and the one line that says why, the contract they share.

/// How a client ends: the code to exit with, and a message for stderr (none when the command's own output says it
/// all). Each client prefixes the message with its name.
#[derive(Debug)]
pub struct ClientExit {
    pub code: i32,
    pub message: Option<String>,
}

impl ClientExit {
    pub fn code(code: i32) -> Self {
        ClientExit { code, message: None }
    }

    /// sidecar-exec's configuration or transport failure: exit 1 with a line.
    pub fn fail(message: impl Into<String>) -> Self {
        ClientExit { code: 1, message: Some(message.into()) }
    }
}

/// Exit code for stdout closed early (`| head -1`), as a native command killed by SIGPIPE reports.
pub const EXIT_BROKEN_PIPE: i32 = 128 + 13;
