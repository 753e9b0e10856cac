//! One run of one of our binaries, as a builder: a clean environment (only PATH), no stdin, captured output, killed
//! if the test drops it, and a hang guard on its output.

use std::ffi::OsStr;
use std::path::Path;
use std::process::{Output, Stdio};
use std::time::Duration;

use crate::isolated_command;

/// How long one run may take before the test fails as hung (never a timing assertion).
pub const HANG: Duration = Duration::from_secs(60);

pub struct BinaryRun {
    command: tokio::process::Command,
}

impl BinaryRun {
    pub fn new(binary: &str) -> Self {
        BinaryRun { command: isolated_command(binary) }
    }

    pub fn args<I: IntoIterator<Item = S>, S: AsRef<OsStr>>(mut self, args: I) -> Self {
        self.command.args(args);
        self
    }

    pub fn env(mut self, name: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> Self {
        self.command.env(name, value);
        self
    }

    pub fn current_dir(mut self, dir: &Path) -> Self {
        self.command.current_dir(dir);
        self
    }

    pub fn stdin(mut self, stdin: Stdio) -> Self {
        self.command.stdin(stdin);
        self
    }

    /// Runs it to its end and returns what it printed.
    pub async fn run(mut self) -> Output {
        let program = self.command.as_std().get_program().to_string_lossy().into_owned();
        tokio::time::timeout(HANG, self.command.output()).await.unwrap_or_else(|_| panic!("{program} hung")).unwrap()
    }

    pub fn spawn(mut self) -> tokio::process::Child {
        self.command.spawn().unwrap()
    }
}

/// What a run printed on stdout, as text.
pub fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// What a run printed on stderr, as text.
pub fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}
