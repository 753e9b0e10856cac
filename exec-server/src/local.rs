//! A server on an ephemeral loopback port inside this process: for tests (of this crate and of the client) and for
//! embedding. Dropping it without [`LocalServer::stop`] aborts it.

use std::net::SocketAddr;

use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::Config;

pub struct LocalServer {
    pub addr: SocketAddr,
    /// `http://127.0.0.1:PORT`
    pub url: String,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<std::io::Result<()>>>,
}

impl LocalServer {
    /// Binds `127.0.0.1:0` and serves `config` there (its host and port are ignored).
    pub async fn start(config: Config) -> std::io::Result<Self> {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(crate::serve(config, listener, async move {
            let _ = stopped.await;
        }));
        Ok(LocalServer { addr, url: format!("http://{addr}"), stop: Some(stop), task: Some(task) })
    }

    /// Shuts down as on SIGTERM and waits for it.
    pub async fn stop(mut self) -> std::io::Result<()> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        match self.task.take() {
            Some(task) => task.await.map_err(std::io::Error::other)?,
            None => Ok(()),
        }
    }
}

impl Drop for LocalServer {
    fn drop(&mut self) {
        if let Some(task) = &self.task {
            task.abort();
        }
    }
}

/// Pids of live processes whose command line contains `marker` (a test's way to prove nothing it started is left).
pub fn processes_matching(marker: &str) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    entries
        .filter_map(Result::ok)
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            cmdline.contains(marker) && !is_zombie(*pid)
        })
        .collect()
}

fn is_zombie(pid: u32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The state follows the parenthesised command name, which may itself hold spaces or parentheses.
    stat.rsplit_once(')').and_then(|(_, rest)| rest.trim_start().chars().next()) == Some('Z')
}
