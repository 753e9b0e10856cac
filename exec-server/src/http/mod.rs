//! The HTTP transport, in two layers: [`server`] accepts connections (TCP and UNIX sockets) and serves each with
//! hyper within the connection cap and timeouts, knowing nothing of routes; `api` is the router, its middleware and
//! handlers, which turn requests into engine jobs and outcomes back into replies or frames. [`Server`] puts them
//! together: `start` binds and builds, `serve` serves until stopped (the shape of the file protocol's transport).

mod api;
pub mod server;

use std::sync::Arc;

use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

pub use api::{check_request, ApiSettings, AppError, CheckedRequest, MAX_TERM_BYTES};
pub use server::{Limits, Timeouts};

use crate::engine::ProcessEngine;
use crate::metrics::Metrics;
use crate::runs::Runs;
use server::socket;

/// What HTTP serves, where, and how.
pub struct Settings {
    /// The TCP socket, already bound (the binary binds it first, to publish its port).
    pub tcp: Option<TcpListener>,
    /// `--listen unix:PATH` addresses: UNIX sockets to create, with `socket_mode`.
    pub listen: Vec<String>,
    pub socket_mode: u32,
    /// The connection cap and timeouts.
    pub limits: Limits,
    pub api: ApiSettings,
    /// The named runs (requests with a `run_id`): the server closes the registry at exit.
    pub runs: Runs,
}

/// The HTTP transport, started: its sockets bound, its router built. [`Server::serve`] serves them.
pub struct Server {
    listeners: Vec<socket::Listener>,
    router: axum::Router,
    limits: Limits,
    metrics: Arc<Metrics>,
}

impl Server {
    /// Creates the UNIX sockets and builds the router over `engine`; counts into `metrics` (and serves them).
    pub fn start(settings: Settings, engine: ProcessEngine, metrics: Arc<Metrics>) -> std::io::Result<Self> {
        let Settings { tcp, listen, socket_mode, limits, api, runs } = settings;
        let mut listeners: Vec<socket::Listener> = tcp.into_iter().map(socket::Listener::Tcp).collect();
        for listen in &listen {
            let path = socket::parse_listen(listen).map_err(std::io::Error::other)?;
            let socket = socket::UnixSocket::bind(&path, socket_mode).map_err(std::io::Error::other)?;
            listeners.push(socket::Listener::Unix(socket));
        }
        let addr = listeners.iter().find_map(socket::Listener::tcp_addr);
        let sockets: Vec<String> = listeners.iter().filter_map(socket::Listener::unix_path).collect();
        tracing::info!(
            addr = %addr.map_or("none".into(), |addr| addr.to_string()),
            sockets = %sockets.join(" "),
            root = %api.root.display(),
            runtime = %api.runtime,
            auth = api.token.is_some(),
            max_connections = limits.max_connections,
            "exec-server listening"
        );
        let state = api::AppState::new(engine, metrics.clone(), runs, api);
        Ok(Server { listeners, router: api::router(state), limits, metrics })
    }

    /// Serves until `stop`; then stops accepting, lets every connection finish its request in flight, and returns
    /// once all are closed (the caller aborts this when they take too long, which closes them).
    pub async fn serve(self, stop: CancellationToken) -> std::io::Result<()> {
        server::serve(self.listeners, self.router, self.limits, self.metrics.http().clone(), stop).await
    }
}
