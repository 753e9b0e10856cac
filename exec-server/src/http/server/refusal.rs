//! The replies the server layer writes itself, before or outside any route: a connection refused at the cap, a
//! request head that came too slowly, a request on a connection evicted before it started. Each carries the same
//! `{"error": …}` body and headers as the API's errors (`Retry-After: 1` with a 503), plus `connection: close`,
//! since the connection ends with it.

use axum::http::{header, HeaderValue, StatusCode};
use protocol::ErrorBody;

/// A reply that refuses a request or a connection: its status and what to tell the client.
#[derive(Debug, Clone)]
pub struct ServerRefusal {
    pub status: StatusCode,
    pub body: ErrorBody,
}

impl ServerRefusal {
    pub fn new(status: StatusCode, message: impl Into<String>) -> Self {
        ServerRefusal { status, body: ErrorBody::message(message) }
    }

    fn body_bytes(&self) -> Vec<u8> {
        serde_json::to_vec(&self.body).unwrap_or_default()
    }

    /// The reply as raw HTTP/1.1, for a connection written to outside hyper.
    pub fn to_http1_bytes(&self) -> Vec<u8> {
        let body = self.body_bytes();
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

    /// The reply as a response for hyper to write.
    pub fn into_response(self) -> axum::response::Response {
        let mut response = axum::response::Response::new(axum::body::Body::from(self.body_bytes()));
        *response.status_mut() = self.status;
        let headers = response.headers_mut();
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
        if self.status == StatusCode::SERVICE_UNAVAILABLE {
            headers.insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        }
        headers.insert(header::CONNECTION, HeaderValue::from_static("close"));
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_ways_of_writing_a_reply_carry_the_code() {
        let body = ErrorBody {
            error: "run r1 is not known".into(),
            code: Some(protocol::ErrorCode::RunNotKnown),
            received: None,
        };
        let refusal = ServerRefusal { status: StatusCode::NOT_FOUND, body };
        let raw = refusal.to_http1_bytes();
        let raw = String::from_utf8_lossy(&raw);
        assert!(raw.starts_with("HTTP/1.1 404 Not Found\r\n"), "{raw}");
        assert!(raw.ends_with(r#""code":"run_not_known"}"#), "{raw}");
        let plain = ServerRefusal::new(StatusCode::BAD_REQUEST, "x");
        assert!(!plain.to_http1_bytes().windows(6).any(|w| w == b"\"code\""));
        let response = plain.into_response();
        assert_eq!(response.headers()[header::CONTENT_TYPE], "application/json");
        assert_eq!(response.headers()[header::CONNECTION], "close");
    }
}
