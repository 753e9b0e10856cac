//! Test helpers: an in-process exec-server, and a builder that runs the real client binary against it.

use clap::Parser;
use exec_server::in_process::InProcessServer;
pub use testkit::*;

pub const BIN: &str = env!("CARGO_BIN_EXE_sidecar-exec");

pub struct TestServer {
    pub server: Option<InProcessServer>,
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
    let server = InProcessServer::start(config).await.unwrap();
    TestServer { url: server.url.clone(), server: Some(server), workspace }
}

impl TestServer {
    /// A client call for `runtime` "python" pointing at this server, working in the workspace root.
    pub fn client(&self) -> BinaryRun {
        client_run()
            .env("BUILD_SIDECARS", format!(r#"{{"python":{{"internal_url":"{}/"}}}}"#, self.url))
            .current_dir(self.workspace.path())
    }

    /// The client running a command that ignores SIGTERM and leaves a second sleeper in its group, both carrying
    /// `marker` (in a forwarded variable, so the client's own argv does not): what only the whole group's end removes.
    pub fn sleepers(&self, stream: bool, marker: &str) -> tokio::process::Child {
        self.client()
            .stream(stream)
            .env("MARK", marker)
            .env("SIDECAR_ENV_PASSTHROUGH", "MARK")
            .args(["python", "sh", "-c", r#"trap '' TERM; (sleep "$MARK" &); sleep "$MARK""#])
            .spawn()
    }

    /// `sidecar-exec python sh -c '(sleep MARKER &); yes line' | head -1` in a shell: the client's stdout closes
    /// while the command still writes. Streaming, the command's timeout is far away, so only the client can end it
    /// in time; blocking, nothing is written before the reply, so the command ends by its 3 s timeout.
    pub async fn piped_to_head(&self, stream: bool, marker: &str) -> std::process::Output {
        let shell = format!("{BIN} python sh -c '({} &); yes line' | head -1", sleeper(marker));
        let output = tokio::process::Command::new("sh")
            .arg("-c")
            .arg(&shell)
            .env("BUILD_SIDECARS", format!(r#"{{"python":{{"internal_url":"{}"}}}}"#, self.url))
            .env("SIDECAR_STREAM", if stream { "1" } else { "0" })
            .env("SIDECAR_TIMEOUT", if stream { "600" } else { "3" })
            .env("SIDECAR_CWD", self.workspace.path())
            .output();
        tokio::time::timeout(HANG, output).await.unwrap().unwrap()
    }

    pub async fn stop(mut self) {
        self.server.take().unwrap().stop().await.unwrap();
    }
}

/// One run of the client, sidecar-exec, with a clean environment (testkit's [`BinaryRun`]).
pub fn client_run() -> BinaryRun {
    BinaryRun::new(BIN)
}

/// Streaming forced on or off for a client run (SIDECAR_STREAM=1 / 0): the tests that hold for both modes run
/// both. Without it, the client's default: negotiated (a stream from exec-server).
pub trait Streaming {
    fn stream(self, on: bool) -> Self;
}

impl Streaming for BinaryRun {
    fn stream(self, on: bool) -> Self {
        self.env("SIDECAR_STREAM", if on { "1" } else { "0" })
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

/// Runs the generated wrapper `name` in `wrappers` as an agent's shell would: a clean environment whose PATH is the
/// wrappers, then `fallback` (where the real tool is not), and BUILD_SIDECARS.
pub async fn run_wrapper<S: AsRef<std::ffi::OsStr>>(
    wrappers: &std::path::Path,
    name: &str,
    args: impl IntoIterator<Item = S>,
    fallback: &std::path::Path,
    sidecars: &str,
    cwd: &std::path::Path,
) -> std::process::Output {
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

/// `stderr` without the lines SIDECAR_VERBOSE=1 prints before a call (what is sent: see `--explain`).
pub fn without_explain(stderr: &str) -> String {
    stderr
        .lines()
        .filter(|line| {
            let Some(rest) = line.strip_prefix("sidecar-exec: ") else { return true };
            !(rest.contains(" runs on the ") || rest.starts_with("output: ") || rest.starts_with("variables sent: "))
        })
        .map(|line| format!("{line}\n"))
        .collect()
}

/// Reads the child's stdout until `expected` has arrived; returns what was read.
pub async fn read_until(stdout: &mut tokio::process::ChildStdout, expected: &[u8]) -> Vec<u8> {
    use tokio::io::AsyncReadExt;
    let mut got = Vec::new();
    let mut buf = [0u8; 256];
    while !got.ends_with(expected) {
        let n = tokio::time::timeout(HANG, stdout.read(&mut buf)).await.unwrap().unwrap();
        assert!(n > 0, "stdout ended before {expected:?}: {got:?}");
        got.extend_from_slice(&buf[..n]);
    }
    got
}

/// A client for runtime "go" against the server at `url` (a scripted or hostile one), working in `/workspace`.
pub fn go_client(url: &str) -> BinaryRun {
    client_run()
        .env("BUILD_SIDECARS", format!(r#"{{"go":{{"internal_url":"{url}"}}}}"#))
        .env("SIDECAR_CWD", "/workspace")
}
