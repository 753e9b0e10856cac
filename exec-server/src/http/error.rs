//! The one error type of the HTTP transport: a status and a message that names the problem and what to do.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use protocol::ErrorBody;

#[derive(Debug)]
pub struct AppError {
    pub status: StatusCode,
    pub message: String,
}

impl AppError {
    pub fn new(status: StatusCode, message: impl Into<String>) -> Self {
        AppError { status, message: message.into() }
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        AppError::new(StatusCode::BAD_REQUEST, message)
    }

    pub fn unauthorized(message: impl Into<String>) -> Self {
        AppError::new(StatusCode::UNAUTHORIZED, message)
    }
}

impl AppError {
    /// The reply as raw HTTP/1.1, for the few written outside the router (a connection refused at the connection
    /// cap, a request head that came too slowly): the same status, headers and `{"error": …}` body, plus
    /// `connection: close`, since the connection ends with it.
    pub fn to_http1_bytes(&self) -> Vec<u8> {
        let body = serde_json::to_vec(&ErrorBody { error: self.message.clone() }).unwrap_or_default();
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
        let body = serde_json::to_vec(&ErrorBody { error: self.message }).unwrap_or_default();
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
