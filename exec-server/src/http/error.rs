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
