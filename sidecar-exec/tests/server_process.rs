//! A real exec-server in a process of its own, for the tests that stop it (SIGSTOP: a server that no longer answers),
//! kill it (SIGKILL) and start it again on the same port (a builder restarted under a run). It is this test binary
//! run again with only [`serve_when_asked`] selected, which serves with exec-server's own `serve`, as its binary does
//! once it has bound its port: the server's code as built now, whatever was built of the exec-server binary.

use std::path::Path;
use std::process::{Command, Stdio};

use clap::Parser;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use testkit::Running;

/// Names the port, the workspace and the extra arguments of the server [`serve_when_asked`] starts.
const SERVE: &str = "SIDECAR_EXEC_TEST_SERVE";

/// The line the server process prints once it listens.
const READY: &str = "test server listening on ";

/// A server process: killed when dropped.
pub struct ServerProcess {
    running: Running,
    pub port: u16,
}

impl ServerProcess {
    /// Starts a server for `workspace` on 127.0.0.1:`port` (0: any), with `args` added to its command line, and
    /// waits until it listens.
    pub fn start(workspace: &Path, port: u16, args: &[&str]) -> Self {
        let mut command = Command::new(std::env::current_exe().unwrap());
        command
            .args(["server_process::serve_when_asked", "--exact", "--ignored", "--nocapture", "--test-threads=1"])
            .env(SERVE, format!("{port}\n{}\n{}", workspace.display(), args.join("\n")))
            .stdin(Stdio::null())
            .stdout(Stdio::null());
        let (running, line) = Running::start(command, |line| line.starts_with(READY));
        let port = line.rsplit(':').next().unwrap().trim().parse().unwrap();
        ServerProcess { running, port }
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub fn signal(&self, signal: Signal) {
        kill(Pid::from_raw(i32::try_from(self.running.pid()).unwrap()), signal).unwrap();
    }

    /// SIGKILL, and waits until it is gone (its port is free again).
    pub fn kill(mut self) {
        self.running.child.kill().unwrap();
        self.running.child.wait().unwrap();
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        // A stopped server must be continued to die of a SIGKILL promptly (it does anyway, but its pid stays).
        let _ = kill(Pid::from_raw(i32::try_from(self.running.pid()).unwrap()), Signal::SIGCONT);
    }
}

/// The server process of [`ServerProcess::start`]; nothing unless [`SERVE`] is set, so running every test (with
/// `--ignored` too) does not start a server that never ends.
#[test]
#[ignore = "the server process that ServerProcess::start runs: it serves only when SIDECAR_EXEC_TEST_SERVE asks"]
fn serve_when_asked() {
    let Ok(asked) = std::env::var(SERVE) else { return };
    let mut lines = asked.lines();
    let port: u16 = lines.next().unwrap().parse().unwrap();
    let workspace = lines.next().unwrap().to_owned();
    let mut argv = vec!["exec-server".to_owned(), "--grace".into(), "0.5".into(), "--cwd".into(), workspace];
    argv.extend(lines.filter(|line| !line.is_empty()).map(str::to_owned));
    let config = exec_server::Config::parse_from(argv);
    let _ = exec_server::engine::become_subreaper();
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    runtime
        .block_on(async {
            tokio::spawn(exec_server::engine::reap_adopted_forever());
            let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
            eprintln!("{READY}{}", listener.local_addr()?);
            exec_server::serve(config, listener, std::future::pending()).await
        })
        .unwrap();
}
