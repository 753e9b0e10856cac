//! How both clients end: the exit code and the one line that says why. The codes they share:
//!
//! - the command's own, and 128+N when it died of signal N;
//! - [`EXIT_CONFIG`] (1) for a usage or configuration mistake, with one line saying what to fix;
//! - 128+N when the client itself is stopped by signal N ([`crate::interrupt`]), after it has ended the remote
//!   command;
//! - [`EXIT_BROKEN_PIPE`] (141) when its stdout closes early (`| head -1`), quietly.
//!
//! What a lost connection gives is each program's: 1 for sidecar-exec (the contract's client), 255 for ssh-exec (as
//! for `ssh` itself).

use std::fmt;

use crate::interrupt::Interrupt;

/// A usage or configuration mistake ([`crate::config_error::ConfigError`]), in both programs.
///
/// *Decision:* 1. The build-sidecar contract's client exits 1 on "transport or configuration errors", and
/// sidecar-exec is that client, so its 1 stays; ssh-exec, which used 2, now gives 1 too. A wrapper (`npm`) goes to
/// either backend depending on the configuration (native > sidecar > SSH), so the same kind of mistake must give the
/// same code whichever it is. 2 was chosen for ssh-exec as "not a common command code", but no code below 126 is
/// free of commands' own (`grep`, `diff` and pytest's usage errors are 2); what tells a client's mistake from the
/// command's failure is the one `sidecar-exec:` / `ssh-exec:` line on stderr.
pub const EXIT_CONFIG: i32 = 1;

/// Exit code for stdout closed early (`| head -1`), as a native command killed by SIGPIPE reports.
pub const EXIT_BROKEN_PIPE: i32 = 128 + 13;

/// How a client ends: the code to exit with, and a message for stderr (none when the command's own output says it
/// all). Each program prefixes the message with its name ([`ClientExit::report`]).
#[derive(Debug)]
pub struct ClientExit {
    pub code: i32,
    pub message: Option<String>,
}

impl ClientExit {
    /// The code alone, nothing to say.
    pub fn code(code: i32) -> Self {
        ClientExit { code, message: None }
    }

    /// The code with a line saying why.
    pub fn with_line(code: i32, message: impl Into<String>) -> Self {
        ClientExit { code, message: Some(message.into()) }
    }

    /// A failure the client itself reports: exit 1 with a line (sidecar-exec's code for transport failures as well,
    /// the contract's).
    pub fn fail(message: impl Into<String>) -> Self {
        ClientExit::with_line(EXIT_CONFIG, message)
    }

    /// A usage or configuration mistake: [`EXIT_CONFIG`] with its line.
    pub fn config(mistake: impl fmt::Display) -> Self {
        ClientExit::with_line(EXIT_CONFIG, mistake.to_string())
    }

    /// Stopped here by `interrupt`: 128 + the signal; `why` when the remote command may not have been ended.
    pub fn interrupted(interrupt: Interrupt, why: Option<String>) -> Self {
        ClientExit { code: interrupt.code(), message: why }
    }

    /// Prints the line, if any, as `<program>: <message>` on stderr, and gives the code to exit with.
    pub fn report(self, program: &str) -> i32 {
        if let Some(message) = &self.message {
            eprintln!("{program}: {message}");
        }
        self.code
    }
}
