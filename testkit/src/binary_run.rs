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

    pub fn env_remove(mut self, name: impl AsRef<OsStr>) -> Self {
        self.command.env_remove(name);
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

    /// The command itself, for a caller that starts it its own way (on a test's terminal: [`crate::Terminal::spawn`],
    /// which replaces its stdin, stdout and stderr with the terminal).
    pub fn into_command(self) -> tokio::process::Command {
        self.command
    }

    pub fn spawn(mut self) -> tokio::process::Child {
        self.command.spawn().unwrap()
    }

    /// Another program with this run's environment and directory (a generated wrapper, a shell pipeline), killed
    /// if the test drops it.
    pub fn other(mut self, program: impl AsRef<OsStr>) -> tokio::process::Command {
        let std = self.command.as_std_mut();
        let mut other = tokio::process::Command::new(program);
        other.env_clear().envs(std.get_envs().filter_map(|(name, value)| Some((name, value?))));
        if let Some(dir) = std.get_current_dir() {
            other.current_dir(dir);
        }
        other.kill_on_drop(true);
        other
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
