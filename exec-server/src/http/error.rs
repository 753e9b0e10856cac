//! The one error type of the HTTP transport: a status, a message that names the problem and what to do, and for
//! the refusals a client acts on, a code it matches (the message is for people and free to change).

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use protocol::{ErrorBody, ErrorCode, RunId};

#[derive(Debug)]
pub struct AppError {
    pub status: StatusCode,
    pub message: String,
    /// Written as the body's `code` when set.
    pub code: Option<ErrorCode>,
}

impl AppError {
    pub fn new(status: StatusCode, message: impl Into<String>) -> Self {
        AppError { status, message: message.into(), code: None }
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

    pub fn bad_request(message: impl Into<String>) -> Self {
        AppError::new(StatusCode::BAD_REQUEST, message)
    }

    pub fn unauthorized(message: impl Into<String>) -> Self {
        AppError::new(StatusCode::UNAUTHORIZED, message)
    }
}

impl AppError {
    /// The `{"error": …, "code": …}` body both ways of writing the reply send.
    fn body(&self) -> ErrorBody {
        ErrorBody { error: self.message.clone(), code: self.code }
    }

    /// The reply as raw HTTP/1.1, for the few written outside the router (a connection refused at the connection
    /// cap, a request head that came too slowly): the same status, headers and `{"error": …}` body, plus
    /// `connection: close`, since the connection ends with it.
    pub fn to_http1_bytes(&self) -> Vec<u8> {
        let body = serde_json::to_vec(&self.body()).unwrap_or_default();
        let mut head = format!(
            "HTTP/1.1 {} {}\r\ncontent-type: application/json\r\nconnection: close\r\ncontent-length: {}\r\n",
            self.status.as_u16(),
            self.status.canonical_reason().unwrap_or(""),
            body.len()
        );
        if self.status == StatusCode::SERVICE_UNAVAILABLE {
            head.push_str("retry-after: 1\r\n");
        }
        head.push_str("\r\n");
        let mut bytes = head.into_bytes();
        bytes.extend_from_slice(&body);
        bytes
    }
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
    fn both_ways_of_writing_a_reply_carry_the_code() {
        let error = AppError::run_not_known(&RunId::new("r1").unwrap());
        let raw = error.to_http1_bytes();
        let raw = String::from_utf8_lossy(&raw);
        assert!(raw.starts_with("HTTP/1.1 404 Not Found\r\n"), "{raw}");
        assert!(raw.ends_with(r#""code":"run_not_known"}"#), "{raw}");
        assert!(!AppError::bad_request("x").to_http1_bytes().windows(6).any(|w| w == b"\"code\""));
    }
}
