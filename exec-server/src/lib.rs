//! exec-server: runs commands for sidecar-exec clients. The engine (processes, groups, output) is transport-free;
//! `http` is the first transport over it.

pub mod config;
pub mod engine;
pub mod http;
pub mod local;
pub mod workspace;

use std::future::Future;
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

pub use config::Config;
use engine::{Engine, Policy};

/// Serves the HTTP API on `listener` until `shutdown` resolves, then stops accepting, cancels every running command
/// by the policy (SIGTERM, grace, SIGKILL to its group) and returns within the grace period plus a second.
pub async fn serve(
    config: Config,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let root = config.cwd.canonicalize().map_err(|err| {
        std::io::Error::other(format!(
            "workspace root {} is not usable ({err}): create it, or pass --cwd / EXEC_SERVER_CWD",
            config.cwd.display()
        ))
    })?;
    let token = config.resolve_token().map_err(std::io::Error::other)?;
    let engine = Engine::new(Policy { grace: config.grace, drain: config.drain });
    let max_concurrent = config.max_concurrent as usize;
    let state = http::AppState {
        engine: engine.clone(),
        root,
        allow_any_cwd: config.allow_any_cwd,
        token: token.map(Arc::from),
        runtime: config.runtime.clone(),
        permits: Arc::new(Semaphore::new(max_concurrent)),
        max_concurrent,
        max_timeout: config.max_timeout,
        max_output: config.max_output,
        keepalive: config.keepalive,
        base_env: Arc::new(http::inherited_env()),
    };
    tracing::info!(
        addr = %listener.local_addr()?,
        root = %state.root.display(),
        runtime = %state.runtime,
        auth = state.token.is_some(),
        "exec-server listening"
    );

    let stop = CancellationToken::new();
    let server = axum::serve(listener, http::router(state)).with_graceful_shutdown(stop.clone().cancelled_owned());
    let server = tokio::spawn(async move { server.await });
    tokio::pin!(shutdown);
    let mut server = server;
    tokio::select! {
        result = &mut server => return result.map_err(std::io::Error::other)?,
        () = &mut shutdown => {}
    }
    tracing::info!(running = engine.live_groups(), "shutting down: cancelling running commands");
    stop.cancel();
    engine.shutdown();
    // Open streams end once their commands are gone; do not wait on a client that keeps a connection open.
    let deadline = config.grace + std::time::Duration::from_millis(500);
    let result = match tokio::time::timeout(deadline, &mut server).await {
        Ok(result) => result.map_err(std::io::Error::other)?,
        Err(_) => {
            tracing::warn!("connections still open after the grace period; closing them");
            server.abort();
            Ok(())
        }
    };
    engine.kill_all();
    result
}
