//! `GET /metrics` and the count of every request the router answers, by endpoint and status.

use axum::extract::{Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::AppState;
use crate::metrics::CONTENT_TYPE;

/// The routes, as the `endpoint` label names them; any other path is `other`, so that clients cannot grow the
/// series by inventing paths. Replies written on the connection itself are `connection` (see the server layer's `connection`).
const ROUTES: [&str; 7] = ["/health", "/info", "/exec", "/exec/stream", "/runs", "/metrics", "/openapi.json"];

pub async fn metrics(State(state): State<AppState>) -> impl IntoResponse {
    ([(header::CONTENT_TYPE, CONTENT_TYPE)], state.metrics.encode())
}

/// Counts the request once its reply head is ready (401s and 413s included: this wraps the token check).
pub async fn count_requests(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let endpoint = endpoint_of(request.uri().path());
    let response = next.run(request).await;
    state.metrics.http().request(endpoint, response.status().as_u16());
    response
}

pub(super) fn endpoint_of(path: &str) -> &'static str {
    if let Some(route) = ROUTES.into_iter().find(|route| *route == path) {
        return route;
    }
    // A run's routes by their pattern: the id is the client's, and would grow the series.
    match path.strip_prefix("/runs/").map(|rest| rest.split_once('/')) {
        Some(None) => "/runs/{id}",
        Some(Some((_, "stream"))) => "/runs/{id}/stream",
        Some(Some((_, "signal"))) => "/runs/{id}/signal",
        Some(Some((_, "stdin"))) => "/runs/{id}/stdin",
        Some(Some((_, "resize"))) => "/runs/{id}/resize",
        _ => "other",
    }
}
