//! Bearer-token check for every endpoint but /health (and /metrics when `--metrics-open`).

use axum::extract::{Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::error::AppError;
use super::AppState;

/// Whether `path` is answered without the token: `/health` (for probes), and `/metrics` with `--metrics-open` (for a
/// scraper that cannot send one). What such a reply holds is all a caller without the token learns of the server.
pub fn open_without_token(state: &AppState, path: &str) -> bool {
    path == "/health" || (state.settings.metrics_open && path == "/metrics")
}

pub async fn require_token(State(state): State<AppState>, request: Request, next: Next) -> Response {
    if let Some(expected) = state.settings.token.as_deref() {
        if !open_without_token(&state, request.uri().path()) {
            if let Err(err) = check(request.headers().get(header::AUTHORIZATION), expected) {
                return err.into_response();
            }
        }
    }
    next.run(request).await
}

fn check(header: Option<&header::HeaderValue>, expected: &str) -> Result<(), AppError> {
    let Some(header) = header else {
        return Err(AppError::unauthorized(
            "missing Authorization header: this server needs `Authorization: Bearer <token>` \
             (sidecar-exec sends it from SIDECAR_TOKEN or SIDECAR_TOKEN_FILE)",
        ));
    };
    let text = header.to_str().map_err(|_| AppError::unauthorized("Authorization header is not valid text"))?;
    let (scheme, credentials) = text.trim().split_once(' ').unwrap_or((text.trim(), ""));
    if !scheme.eq_ignore_ascii_case("bearer") {
        return Err(AppError::unauthorized(format!(
            "Authorization scheme {scheme:?} is not supported: send `Authorization: Bearer <token>`"
        )));
    }
    if !constant_time_eq(credentials.trim().as_bytes(), expected.as_bytes()) {
        return Err(AppError::unauthorized("invalid bearer token: check the token given to the client"));
    }
    Ok(())
}

/// Compares in time that depends only on the length of `given` (the caller's own input), never on where the first
/// difference is or on the expected token's length.
fn constant_time_eq(given: &[u8], expected: &[u8]) -> bool {
    let mut diff = u8::from(given.len() != expected.len());
    if expected.is_empty() {
        return false;
    }
    for (i, byte) in given.iter().enumerate() {
        diff |= byte ^ expected[i % expected.len()];
    }
    std::hint::black_box(diff) == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    #[test]
    fn schemes_are_case_insensitive_and_tokens_exact() {
        let ok = |h: &str| check(Some(&HeaderValue::from_str(h).unwrap()), "s3cret").is_ok();
        assert!(ok("Bearer s3cret") && ok("bearer s3cret") && ok("BEARER  s3cret "));
        assert!(!ok("Bearer s3cre") && !ok("Bearer s3cret2") && !ok("Basic s3cret") && !ok("s3cret") && !ok("Bearer"));
        assert!(check(None, "s3cret").is_err());
    }

    #[test]
    fn constant_time_eq_is_plain_equality() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abcabc", b"abc"));
        assert!(!constant_time_eq(b"", b"abc"));
        assert!(!constant_time_eq(b"abd", b"abc"));
    }
}
