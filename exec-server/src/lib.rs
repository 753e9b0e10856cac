//! exec-server: runs commands for sidecar-exec clients and tool-sidecar agents.
//!
//! - [`engine`]: processes, groups, timeouts, and each pipe's bytes into the capture its transport supplies; it
//!   knows no transport.
//! - [`http`] and [`ipc`]: the two transports over it, each `start(settings, engine, metrics)` then `serve(stop)`.
//!   HTTP has two layers: `http::server` (sockets, connections, their cap and timeouts) and `http::api` (routes,
//!   handlers, the SSE pump, the `/exec` reply).
//! - [`runs`]: the named-run registry and logs (HTTP's, transport-free); [`ending`]: how a command ended, as the
//!   API tells it.
//! - [`metrics`], [`environment`], [`workspace`], [`token`], [`config`]: what the parts share; [`run`] makes the
//!   shared parts and hands them out. [`privacy`] closes the server's memory to the commands it runs.
//! - [`in_process`]: a server on a loopback port inside this process (tests, embedding).
//!
//! The binary (`main.rs`, with `startup.rs`: the port file and the health probe) parses the flags and calls [`run`].

pub mod config;
pub mod ending;
pub mod engine;
pub mod environment;
pub mod http;
pub mod in_process;
pub mod ipc;
pub mod metrics;
pub mod privacy;
pub mod runs;
pub mod token;
pub mod workspace;

use std::future::Future;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

pub use config::Config;
use engine::{Policy, ProcessEngine};
use metrics::Metrics;

/// Serves the HTTP API on `listener` (and the file protocol too when `config.ipc_dir` is set) until `shutdown`
/// resolves. See [`run`].
pub async fn serve(
    config: Config,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    run(config, Some(listener), shutdown).await
}

/// Serves HTTP on `listener` when given, and the file protocol when `config.ipc_dir` is set, on one engine, until
/// `shutdown` resolves or the IPC `done` file appears: [`ExecServer::start`], then [`ExecServer::serve`].
pub async fn run(
    config: Config,
    listener: Option<TcpListener>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    ExecServer::start(config, listener)?.serve(shutdown).await
}

/// A server whose every socket is bound (TCP and `--listen unix:`) and whose file-protocol folder is taken, not yet
/// serving: a caller that must know it listens (a test, an embedding) waits for [`ExecServer::start`], not for a
/// spawned task.
pub struct ExecServer {
    config: Config,
    engine: ProcessEngine,
    http: Option<http::Server>,
    ipc: Option<ipc::Transport>,
    named_runs: Option<runs::Runs>,
}

impl ExecServer {
    /// Makes the server's shared parts and hands them out: the metrics (each part gets its own handle), the engine,
    /// the environment commands start from, and, when HTTP is served, the named-run registry; binds the UNIX
    /// sockets and takes the file-protocol folder. Must be called inside a tokio runtime.
    pub fn start(config: Config, listener: Option<TcpListener>) -> std::io::Result<Self> {
        let root = config.cwd.canonicalize().map_err(|err| {
            std::io::Error::other(format!(
                "workspace root {} is not usable ({err}): create it, or pass --cwd / EXEC_SERVER_CWD",
                config.cwd.display()
            ))
        })?;
        let serves_http = listener.is_some() || !config.listen.is_empty();
        if !serves_http && config.ipc_dir.is_none() {
            return Err(std::io::Error::other(
                "nothing to serve: give a port, --listen unix:PATH, or --ipc-dir for the file protocol",
            ));
        }
        let metrics = Arc::new(Metrics::default());
        let policy = Policy { grace: config.grace, drain: config.drain, daemons: config.daemon_policy() };
        let engine = ProcessEngine::new(policy, metrics.commands().clone());
        let base_env = Arc::new(environment::inherited());

        // Named runs are HTTP's: a file-protocol-only server makes no state folder.
        let (http, named_runs) = if serves_http {
            let settings = http_settings(&config, listener, &root, &base_env)?;
            let runs = settings.runs.clone();
            (Some(http::Server::start(settings, engine.clone(), metrics.clone())?), Some(runs))
        } else {
            (None, None)
        };
        let ipc = match &config.ipc_dir {
            Some(dir) => {
                let settings = ipc_settings(&config, dir, &root, &base_env);
                Some(ipc::Transport::start(settings, engine.clone(), metrics.ipc().clone())?)
            }
            None => None,
        };
        Ok(ExecServer { config, engine, http, ipc, named_runs })
    }

    /// Serves until `shutdown` resolves or the IPC `done` file appears. Then it stops accepting work, cancels every
    /// running command by the policy (SIGTERM, grace, SIGKILL to its group) and returns within the grace period
    /// plus a second.
    pub async fn serve(self, shutdown: impl Future<Output = ()> + Send + 'static) -> std::io::Result<()> {
        let ExecServer { config, engine, http, ipc, named_runs } = self;
        let stop = CancellationToken::new();
        let mut http_task = http.map(|server| tokio::spawn(server.serve(stop.clone())));
        let mut ipc_task = ipc.map(|transport| tokio::spawn(transport.serve(stop.clone())));

        let (http_early, ipc_early) = {
            let http_wait = async {
                match http_task.as_mut() {
                    Some(task) => task.await,
                    None => std::future::pending().await,
                }
            };
            let ipc_wait = async {
                match ipc_task.as_mut() {
                    Some(task) => task.await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                () = shutdown => {
                    tracing::info!(running = engine.live_groups(), "shutting down: cancelling running commands");
                    (None, None)
                }
                result = ipc_wait => {
                    tracing::info!(running = engine.live_groups(), "the run is done: cancelling running commands");
                    (None, Some(result))
                }
                result = http_wait => (Some(result), None),
            }
        };
        stop.cancel();
        engine.shutdown();
        // Open streams end once their commands are gone; do not wait on a client that keeps a connection open.
        let deadline = tokio::time::Instant::now() + config.grace + Duration::from_millis(500);
        let http_result = finish(http_task, http_early, deadline).await;
        let ipc_result = finish(ipc_task, ipc_early, deadline).await;
        engine.finish_shutdown().await;
        if let Some(runs) = named_runs {
            runs.close();
        }
        http_result.and(ipc_result)
    }
}

/// HTTP's settings from the flags; makes the named-run registry (and its state folder).
fn http_settings(
    config: &Config,
    tcp: Option<TcpListener>,
    root: &Path,
    base_env: &Arc<Vec<(std::ffi::OsString, std::ffi::OsString)>>,
) -> std::io::Result<http::Settings> {
    let runs = runs::Runs::new(runs::Settings {
        reattach_window: config.reattach_window,
        retain: config.retain,
        max_runs: config.max_runs as usize,
        // A named run's `/exec` reply is cut from its log: a log smaller than `--max-output` would cut a named
        // reply where an unnamed one keeps everything (the budget counts encoded bytes, the log raw ones, so a
        // log of `--max-output` bytes holds all a reply can carry). The log beyond memory is on disk.
        run_log_max: config.run_log_max.max(config.max_output as u64),
        run_memory: config.run_memory,
        state_dir: config.state_dir.clone(),
    })?;
    let token = config.resolve_token().map_err(std::io::Error::other)?;
    Ok(http::Settings {
        tcp,
        listen: config.listen.clone(),
        socket_mode: config.socket_mode,
        limits: connection_limits(config),
        api: http::ApiSettings {
            root: root.to_path_buf(),
            allow_any_cwd: config.allow_any_cwd,
            token,
            runtime: config.runtime.clone(),
            max_concurrent: config.max_concurrent as usize,
            max_timeout: config.max_timeout,
            max_output: config.max_output,
            keepalive: config.keepalive,
            metrics_open: config.metrics_open,
            base_env: base_env.clone(),
        },
        runs,
    })
}

/// The file protocol's settings from the flags.
fn ipc_settings(
    config: &Config,
    dir: &Path,
    root: &Path,
    base_env: &Arc<Vec<(std::ffi::OsString, std::ffi::OsString)>>,
) -> ipc::Settings {
    ipc::Settings {
        dir: dir.to_path_buf(),
        done: config.ipc_done_path().unwrap_or_else(|| dir.join("done")),
        workdir: root.to_path_buf(),
        min_timeout: config.ipc_min_timeout,
        max_timeout: config.ipc_max_timeout.max(config.ipc_min_timeout),
        parallel: config.ipc_parallel as usize,
        skill_pack: config.skill_pack.clone(),
        base_env: base_env.clone(),
    }
}

/// The connection cap and timeouts: the cap as asked (or the default), within what the open-file limit leaves
/// after a reserve for every command that may run (HTTP and file protocol).
fn connection_limits(config: &Config) -> http::Limits {
    let budget =
        http::server::fds::ConnectionBudget::current(config.max_connections.map(|n| n as usize), config.max_commands());
    if budget.starved() {
        tracing::warn!(
            nofile = budget.nofile,
            reserve = budget.reserve,
            "the open-file limit is too low for the commands that may run at once: commands may fail with \
             \"Too many open files\"; raise the limit (ulimit -n) or lower --max-concurrent"
        );
    } else if budget.clamped && config.max_connections.is_some() {
        tracing::warn!(
            max_connections = budget.cap,
            nofile = budget.nofile,
            reserve = budget.reserve,
            "--max-connections lowered to what the open-file limit leaves after the reserve for commands"
        );
    }
    let nonzero = |limit: Duration| (!limit.is_zero()).then_some(limit);
    http::Limits {
        max_connections: budget.cap,
        timeouts: http::Timeouts { header: nonzero(config.header_timeout), idle: nonzero(config.idle_timeout) },
    }
}

type Task = tokio::task::JoinHandle<std::io::Result<()>>;

/// The result of a transport's task: the one it already gave, or what it gives by `deadline` (after which it is
/// aborted: a client holding a connection open must not hold the process).
async fn finish(
    task: Option<Task>,
    early: Option<Result<std::io::Result<()>, tokio::task::JoinError>>,
    deadline: tokio::time::Instant,
) -> std::io::Result<()> {
    let joined = match (early, task) {
        (Some(joined), _) => joined,
        (None, None) => return Ok(()),
        (None, Some(mut task)) => match tokio::time::timeout_at(deadline, &mut task).await {
            Ok(joined) => joined,
            Err(_) => {
                tracing::warn!("connections still open after the grace period; closing them");
                task.abort();
                return Ok(());
            }
        },
    };
    joined.map_err(std::io::Error::other)?
}
