//! The one error type of the API: a status, a message that names the problem and what to do, and for the refusals a
//! client acts on, a code it matches (the message is for people and free to change). The server layer's own
//! refusals (`server::refusal`) carry the same body.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use protocol::{ErrorBody, ErrorCode, RunId};

#[derive(Debug)]
pub struct AppError {
    pub status: StatusCode,
    pub message: String,
    /// Written as the body's `code` when set.
    pub code: Option<ErrorCode>,
    /// Written as the body's `received` when set (with [`ErrorCode::StdinGap`]).
    pub received: Option<u64>,
}

impl AppError {
    pub fn new(status: StatusCode, message: impl Into<String>) -> Self {
        AppError { status, message: message.into(), code: None, received: None }
    }

    /// `status` with `code`.
    pub fn coded(status: StatusCode, code: ErrorCode, message: impl Into<String>) -> Self {
        AppError { code: Some(code), ..AppError::new(status, message) }
    }

    /// `409` with `code`: a refusal a client acts on by its code.
    pub fn conflict(code: ErrorCode, message: impl Into<String>) -> Self {
        AppError { code: Some(code), ..AppError::new(StatusCode::CONFLICT, message) }
    }

    /// `404` for a run this server does not keep, with the code that tells it from "no runs endpoint" (a client
    /// re-POSTs only on this one).
    pub fn run_not_known(id: &RunId) -> Self {
        AppError {
            code: Some(ErrorCode::RunNotKnown),
            ..AppError::new(
                StatusCode::NOT_FOUND,
                format!("run {id} is not known: it never existed or ended more than --retain ago"),
            )
        }
    }

    /// `416` for a replay offset past what the stream holds: a valid number (to the schema) that no reader can have
    /// reached, with its own code.
    pub fn offset_beyond_end(stream: &str, offset: u64, total: u64) -> Self {
        AppError {
            code: Some(ErrorCode::OffsetBeyondEnd),
            ..AppError::new(
                StatusCode::RANGE_NOT_SATISFIABLE,
                format!(
                    "{stream} offset {offset} is beyond the {total} bytes that stream holds so far: resume from at \
                     most {total}"
                ),
            )
        }
    }

    /// `410` for a run forgotten to make room, within its retention: how it ended, with its own code.
    pub fn run_forgotten(message: String) -> Self {
        AppError { code: Some(ErrorCode::RunForgotten), ..AppError::new(StatusCode::GONE, message) }
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        AppError::new(StatusCode::BAD_REQUEST, message)
    }

    pub fn unauthorized(message: impl Into<String>) -> Self {
        AppError::new(StatusCode::UNAUTHORIZED, message)
    }
}

impl AppError {
    /// The `{"error": …, "code": …}` body.
    fn body(&self) -> ErrorBody {
        ErrorBody { error: bounded(&self.message), code: self.code, received: self.received }
    }
}

/// The longest message an error body carries. Some messages quote what the request sent (serde's errors quote a
/// string of the wrong type, an env name its value): a 1 MiB name would come back as a 1 MiB error.
const MAX_MESSAGE_BYTES: usize = 4096;

/// `message`, cut at [`MAX_MESSAGE_BYTES`] (on a character boundary) with `…` when longer.
fn bounded(message: &str) -> String {
    if message.len() <= MAX_MESSAGE_BYTES {
        return message.to_owned();
    }
    let cut = (0..=MAX_MESSAGE_BYTES).rev().find(|&at| message.is_char_boundary(at)).unwrap_or(0);
    format!("{}…", &message[..cut])
}

impl IntoResponse for AppError {
    fn into_response(self) -> Response {
        let body = serde_json::to_vec(&self.body()).unwrap_or_default();
        let mut response = (self.status, [(header::CONTENT_TYPE, "application/json")], body).into_response();
        let headers = response.headers_mut();
        match self.status {
            StatusCode::UNAUTHORIZED => {
                headers.insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer realm=\"exec-server\""));
            }
            StatusCode::SERVICE_UNAVAILABLE => {
                headers.insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
            }
            _ => {}
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_quoting_a_huge_value_is_cut() {
        let long = format!("env name {:?} is invalid", "é".repeat(600_000));
        let body = AppError::bad_request(long).body();
        assert!(body.error.len() <= MAX_MESSAGE_BYTES + '…'.len_utf8(), "{} bytes", body.error.len());
        assert!(body.error.starts_with("env name \"é") && body.error.ends_with('…'));
        assert_eq!(AppError::bad_request("short").body().error, "short");
    }
}
