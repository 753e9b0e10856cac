//! Request bodies, read the same way by every endpoint that takes one: the bytes within the body limit and the
//! body timeout, every failure answered as the API's JSON error with a code (axum's own rejections are text/plain),
//! and a JSON body read from an object only.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{FromRequest, Request};
use axum::http::StatusCode;
use protocol::ErrorCode;
use serde::de::DeserializeOwned;

use super::AppError;
use crate::http::server::BodyTimeout;

/// The whole body of a request.
pub struct Body(pub Bytes);

impl<S: Send + Sync> FromRequest<S> for Body {
    type Rejection = AppError;

    async fn from_request(request: Request, state: &S) -> Result<Self, AppError> {
        Bytes::from_request(request, state).await.map(Body).map_err(body_error)
    }
}

/// Body-read failures: 413 for the size cap, 408 for a body that did not arrive in time, otherwise 400 (broken
/// chunked framing, a connection cut midway), each with its code.
fn body_error(rejection: BytesRejection) -> AppError {
    let status = rejection.status();
    if status == StatusCode::PAYLOAD_TOO_LARGE {
        return AppError::coded(
            status,
            ErrorCode::BodyTooLarge,
            format!(
                "request body is larger than {} bytes (1 MiB): pass large inputs through the shared workspace, or \
                 send streamed stdin in chunks of at most that",
                protocol::MAX_BODY_BYTES
            ),
        );
    }
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(&rejection);
    while let Some(err) = source {
        if let Some(timeout) = err.downcast_ref::<BodyTimeout>() {
            return AppError::coded(
                StatusCode::REQUEST_TIMEOUT,
                ErrorCode::BodyTimeout,
                format!("{timeout}: send the whole body at once"),
            );
        }
        source = err.source();
    }
    AppError::coded(
        StatusCode::BAD_REQUEST,
        ErrorCode::BodyUnreadable,
        format!("cannot read request body: {}", rejection.body_text()),
    )
}

/// A JSON body of type `T`, or a 400 naming what is wrong and showing `example`. serde would also take a struct
/// written as a JSON array (`["TERM"]`): every body of the API is an object.
pub fn json_object<T: DeserializeOwned>(body: &[u8], example: &str) -> Result<T, AppError> {
    if !body.trim_ascii_start().starts_with(b"{") {
        return Err(AppError::bad_request(format!("invalid request body: it must be a JSON object like {example}")));
    }
    serde_json::from_slice(body)
        .map_err(|err| AppError::bad_request(format!("invalid request body: {err}; expected JSON like {example}")))
}
