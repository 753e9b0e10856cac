//! A server on an ephemeral loopback port inside this process: for tests (of this crate and of the client) and for
//! embedding. Dropping it without [`InProcessServer::stop`] aborts it.

use std::net::SocketAddr;

use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::Config;

pub struct InProcessServer {
    pub addr: SocketAddr,
    /// `http://127.0.0.1:PORT`
    pub url: String,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<std::io::Result<()>>>,
}

impl InProcessServer {
    /// Binds `127.0.0.1:0` and serves `config` there (its host and port are ignored). Returns once every socket
    /// listens (the UNIX ones of `--listen` too) and the file-protocol folder is taken, so a first call never finds
    /// nothing there; an error in `config` (a workspace root that does not exist, a socket path in use) is this
    /// call's error.
    pub async fn start(config: Config) -> std::io::Result<Self> {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        let started = crate::ExecServer::start(config, Some(listener))?;
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(started.serve(async move {
            let _ = stopped.await;
        }));
        Ok(InProcessServer { addr, url: format!("http://{addr}"), stop: Some(stop), task: Some(task) })
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

impl Drop for InProcessServer {
    fn drop(&mut self) {
        if let Some(task) = &self.task {
            task.abort();
        }
    }
}
