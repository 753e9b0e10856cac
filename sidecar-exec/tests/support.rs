//! Test helpers: an in-process exec-server, and a builder that runs the real client binary against it.

use std::process::{Output, Stdio};
use std::time::Duration;

use clap::Parser;
use exec_server::local::LocalServer;
pub use testkit::*;

pub const BIN: &str = env!("CARGO_BIN_EXE_sidecar-exec");

pub struct TestServer {
    pub server: Option<LocalServer>,
    pub url: String,
    pub workspace: tempfile::TempDir,
}

pub async fn server() -> TestServer {
    server_with(&[], None).await
}

pub async fn server_with(args: &[&str], token: Option<&str>) -> TestServer {
    let _ = exec_server::engine::become_subreaper();
    let workspace = tempfile::tempdir().unwrap();
    let mut argv = vec!["exec-server", "--grace", "0.5", "--cwd", workspace.path().to_str().unwrap()];
    argv.extend_from_slice(args);
    let mut config = exec_server::Config::parse_from(argv);
    config.token = token.map(str::to_owned);
    let server = LocalServer::start(config).await.unwrap();
    TestServer { url: server.url.clone(), server: Some(server), workspace }
}

impl TestServer {
    /// A client call for `runtime` "python" pointing at this server, working in the workspace root.
    pub fn client(&self) -> Client {
        Client::new()
            .env("BUILD_SIDECARS", &format!(r#"{{"python":{{"internal_url":"{}/"}}}}"#, self.url))
            .current_dir(self.workspace.path())
    }

    pub async fn stop(mut self) {
        self.server.take().unwrap().stop().await.unwrap();
    }
}

/// Builder for one run of a client binary (sidecar-exec, or ssh-exec), with a clean environment.
pub struct Client {
    pub command: tokio::process::Command,
}

impl Client {
    pub fn new() -> Self {
        Self::of(BIN)
    }

    pub fn of(binary: &str) -> Self {
        Client { command: isolated_command(binary) }
    }

    pub fn env(mut self, name: &str, value: &str) -> Self {
        self.command.env(name, value);
        self
    }

    pub fn env_os(mut self, name: &str, value: impl AsRef<std::ffi::OsStr>) -> Self {
        self.command.env(name, value);
        self
    }

    pub fn env_remove(mut self, name: &str) -> Self {
        self.command.env_remove(name);
        self
    }

    pub fn stream(self, on: bool) -> Self {
        if on {
            self.env("SIDECAR_STREAM", "1")
        } else {
            self
        }
    }

    pub fn current_dir(mut self, dir: &std::path::Path) -> Self {
        self.command.current_dir(dir);
        self
    }

    pub fn stdin(mut self, stdin: Stdio) -> Self {
        self.command.stdin(stdin);
        self
    }

    pub fn args<I: IntoIterator<Item = S>, S: AsRef<std::ffi::OsStr>>(mut self, args: I) -> Self {
        self.command.args(args);
        self
    }

    pub async fn run(mut self) -> Output {
        tokio::time::timeout(Duration::from_secs(60), self.command.output()).await.expect("client hung").unwrap()
    }

    pub fn spawn(mut self) -> tokio::process::Child {
        self.command.spawn().unwrap()
    }

    /// Another program with this call's environment and directory (a generated wrapper, a shell pipeline).
    pub fn other(mut self, program: impl AsRef<std::ffi::OsStr>) -> tokio::process::Command {
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

/// The names in `dir`, sorted.
pub fn names(dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> =
        std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    names
}

/// An executable file `dir/name` holding `script`.
pub fn executable(dir: &std::path::Path, name: &str, script: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, script).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

pub fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Runs the generated wrapper `name` in `wrappers` as an agent's shell would: a clean environment whose PATH is the
/// wrappers, then `fallback` (where the real tool is not), and BUILD_SIDECARS.
pub async fn run_wrapper<S: AsRef<std::ffi::OsStr>>(
    wrappers: &std::path::Path,
    name: &str,
    args: impl IntoIterator<Item = S>,
    fallback: &std::path::Path,
    sidecars: &str,
    cwd: &std::path::Path,
) -> Output {
    tokio::process::Command::new(wrappers.join(name))
        .args(args)
        .env_clear()
        .env("PATH", format!("{}:{}", wrappers.display(), fallback.display()))
        .env("BUILD_SIDECARS", sidecars)
        .current_dir(cwd)
        .output()
        .await
        .unwrap()
}
