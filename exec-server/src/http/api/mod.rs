//! The API: the router, its middleware (request ids and trace context, request counts, the body limit, the bearer
//! token), the endpoints' handlers, and what they share ([`AppState`]).
//!
//! The layers are axum's and ours, not tower-http's, layer by layer for a reason:
//! - body limit: axum's `DefaultBodyLimit` is the same bound and lets the body extractor answer 413 with our JSON
//!   error; tower-http's `RequestBodyLimitLayer` answers with its own plain-text body.
//! - request ids and trace context (`trace`): tower-http's request-id layers take any incoming id as is, and an id
//!   that lands on every log line must be checked first.
//! - bearer token (`auth`): tower-http's `ValidateRequestHeaderLayer::bearer` compares with `==` and answers an
//!   empty 401; ours compares in constant time and names what was wrong and how to send the token.
//! - timeouts: the header and idle timeouts belong to the connection (the server layer's `connection` and
//!   `activity`), not a request; tower-http's `TimeoutLayer` would also cut a 20-minute `/exec` stream, which must
//!   live as long as its command.
//! - compression and CORS: an SSE stream must not be buffered by a compressor, and no browser calls this server.

mod auth;
mod body;
mod boot;
mod commands;
mod cut_cost;
mod error;
mod exec;
mod exec_stream;
mod metrics;
mod named;
mod negotiate;
mod openapi;
mod preparers;
mod query;
mod reply;
mod reply_budget;
mod request;
mod resize;
mod run_stream;
mod runs;
mod sse;
mod stdin;
mod trace;

use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{DefaultBodyLimit, State};
use axum::http::{Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use protocol::{Health, Info};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::engine::ProcessEngine;
use crate::metrics::Metrics;
use crate::runs::Runs;
pub use error::AppError;
pub use request::{check_request, CheckedRequest, MAX_TERM_BYTES};

/// What the API's handlers are configured with.
#[derive(Debug)]
pub struct ApiSettings {
    /// Canonical workspace root.
    pub root: PathBuf,
    pub allow_any_cwd: bool,
    pub token: Option<String>,
    pub runtime: String,
    pub max_concurrent: usize,
    pub max_timeout: u64,
    pub max_output: usize,
    pub keepalive: Duration,
    /// `GET /metrics` needs no token (`--metrics-open`).
    pub metrics_open: bool,
    /// The server's own environment minus its EXEC_SERVER_* settings: what every command starts from.
    pub base_env: Arc<Vec<(OsString, OsString)>>,
}

/// What every handler shares.
#[derive(Clone)]
pub struct AppState {
    pub engine: ProcessEngine,
    /// The server's metrics: HTTP counts its requests and serves them all.
    pub metrics: Arc<Metrics>,
    pub runs: Runs,
    /// One per command that may run (`--max-concurrent`).
    pub permits: Arc<Semaphore>,
    pub settings: Arc<ApiSettings>,
    /// Which of the runtime's commands are on the PATH (`/info`).
    pub commands: Arc<commands::Commands>,
    /// This start of the server ([`protocol::BOOT_ID_HEADER`], `/info`).
    pub boot_id: Arc<str>,
}

impl AppState {
    pub fn new(engine: ProcessEngine, metrics: Arc<Metrics>, runs: Runs, settings: ApiSettings) -> Self {
        let permits = Arc::new(Semaphore::new(settings.max_concurrent));
        let commands = Arc::new(commands::Commands::new(&settings.runtime, &settings.base_env, settings.root.clone()));
        let boot_id = boot::new_boot_id().into();
        AppState { engine, metrics, runs, permits, settings: Arc::new(settings), commands, boot_id }
    }

    /// A slot for one more running command, or 503. An `/exec` reply keeps its command's slot until it is sent.
    fn permit(&self) -> Result<OwnedSemaphorePermit, AppError> {
        self.permits.clone().try_acquire_owned().map_err(|_| {
            AppError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                format!(
                    "too many commands running or replies still being sent (limit {}, set by --max-concurrent); \
                     retry shortly",
                    self.settings.max_concurrent
                ),
            )
        })
    }

    fn running(&self) -> usize {
        self.settings.max_concurrent - self.permits.available_permits()
    }
}

pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/health", get(health))
        .route("/info", get(info))
        .route("/exec", post(exec::exec))
        .route("/exec/stream", post(exec_stream::exec_stream))
        .route("/runs", get(runs::list))
        .route("/runs/{id}", get(runs::show).delete(runs::delete))
        .route("/runs/{id}/stream", get(runs::stream))
        .route("/runs/{id}/signal", post(runs::signal))
        .route("/runs/{id}/stdin", post(stdin::stdin))
        .route("/runs/{id}/resize", post(resize::resize))
        .route("/metrics", get(metrics::metrics))
        .route("/openapi.json", get(openapi::document))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        // Inside the token check: a caller without the token learns nothing, not even when the server started.
        .layer(axum::middleware::from_fn_with_state(state.clone(), boot::stamp))
        .layer(axum::middleware::from_fn_with_state(state.clone(), auth::require_token))
        .layer(DefaultBodyLimit::max(protocol::MAX_BODY_BYTES))
        .layer(axum::middleware::from_fn_with_state(state.clone(), metrics::count_requests))
        .layer(axum::middleware::from_fn(trace::request_context))
        .with_state(state)
}

async fn health() -> impl IntoResponse {
    axum::Json(Health { status: "ok".into() })
}

async fn info(State(state): State<AppState>) -> impl IntoResponse {
    let settings = &state.settings;
    axum::Json(Info {
        cwd: settings.root.display().to_string(),
        runtime: settings.runtime.clone(),
        version: env!("CARGO_PKG_VERSION").into(),
        max_timeout: Some(settings.max_timeout),
        max_concurrent: Some(settings.max_concurrent),
        running: Some(state.running()),
        commands: state.commands.current(),
        daemons_kept: Some(state.engine.daemons_kept()),
        boot_id: Some(state.boot_id.to_string()),
    })
}

const ENDPOINTS: &str = "GET /health, GET /info, POST /exec, POST /exec/stream, GET /runs, GET /runs/{id}, \
                         GET /runs/{id}/stream, POST /runs/{id}/signal, POST /runs/{id}/stdin, POST /runs/{id}/resize, \
                         DELETE /runs/{id}, GET /metrics, GET /openapi.json";

async fn not_found(method: Method, uri: Uri) -> Response {
    AppError::new(
        StatusCode::NOT_FOUND,
        format!("no such endpoint: {method} {}; the endpoints are {ENDPOINTS}", uri.path()),
    )
    .into_response()
}

async fn method_not_allowed(method: Method, uri: Uri) -> Response {
    AppError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        format!("{method} is not allowed on {}; the endpoints are {ENDPOINTS}", uri.path()),
    )
    .into_response()
}
