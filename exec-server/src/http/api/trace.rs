//! Request ids and W3C trace context: every request gets an id (the client's `X-Request-Id` when it is a safe one,
//! else one made here), echoed in the reply and carried by every log line of the request, its command's included
//! (a tracing span). A valid `traceparent` is kept on those lines and given to the command as `TRACEPARENT`, so a
//! build tool that traces joins the agent's trace: its four fields only, as version 00, never the text as sent. Refused requests (4xx, 5xx) get one log line: method, endpoint,
//! status; never a body, a token or an env value.
//!
//! This is one middleware rather than tower-http's request-id layers: those take any incoming id as is, and an id
//! that lands on every log line must be checked first (length, characters), as must the trace context.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

use axum::extract::Request;
use axum::http::{HeaderName, HeaderValue};
use axum::middleware::Next;
use axum::response::Response;
use tracing::Instrument;

use super::metrics::endpoint_of;

pub const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");
pub const TRACEPARENT: HeaderName = HeaderName::from_static("traceparent");

/// The longest request id taken from a client.
pub const MAX_REQUEST_ID: usize = 128;

/// What a handler needs of its request's identity (the id is on the span).
#[derive(Debug, Clone)]
pub struct RequestContext {
    /// A valid `traceparent` header, as version 00 (see [`Traceparent`]).
    pub traceparent: Option<String>,
}

pub async fn request_context(mut request: Request, next: Next) -> Response {
    let headers = request.headers();
    let given = headers.get(REQUEST_ID).and_then(|value| value.to_str().ok());
    let (id, replaced) = match given {
        Some(id) if valid_request_id(id) => (id.to_owned(), false),
        other => (generate_id(), other.is_some() || headers.contains_key(REQUEST_ID)),
    };
    let given_trace = headers.get(TRACEPARENT).map(|value| value.to_str().unwrap_or(""));
    let traceparent = given_trace.and_then(Traceparent::parse).map(|fields| fields.to_string());
    let (method, endpoint) = (request.method().clone(), endpoint_of(request.uri().path()));
    let span = tracing::info_span!("request", request_id = %id, traceparent = tracing::field::Empty);
    if let Some(traceparent) = &traceparent {
        span.record("traceparent", traceparent.as_str());
    }
    span.in_scope(|| {
        if replaced {
            tracing::debug!("X-Request-Id is not 1 to {MAX_REQUEST_ID} of A-Z a-z 0-9 - _ . : ; replaced");
        }
        if given_trace.is_some() && traceparent.is_none() {
            tracing::debug!("traceparent is not valid W3C trace context; ignored");
        }
    });
    request.extensions_mut().insert(RequestContext { traceparent });
    let mut response = next.run(request).instrument(span.clone()).await;
    let status = response.status();
    if status.is_client_error() || status.is_server_error() {
        span.in_scope(|| tracing::info!(%method, endpoint, status = status.as_u16(), "request refused"));
    }
    if let Ok(value) = HeaderValue::from_str(&id) {
        response.headers_mut().insert(REQUEST_ID, value);
    }
    response
}

/// 1 to [`MAX_REQUEST_ID`] characters of `A-Z a-z 0-9 - _ . :`: UUIDs, ULIDs and hex ids fit, and nothing that
/// could forge or break a log line does.
pub fn valid_request_id(id: &str) -> bool {
    (1..=MAX_REQUEST_ID).contains(&id.len())
        && id.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b':'))
}

/// The fields of a W3C Trace Context `traceparent` (`version-traceid-parentid-flags`, lowercase hex), as this server
/// passes them on: always as version `00`, the one it knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Traceparent<'a> {
    trace_id: &'a str,
    parent_id: &'a str,
    flags: &'a str,
}

impl<'a> Traceparent<'a> {
    /// The four fields of `value`, or `None` when it is not valid trace context: the ids all zeros, version `ff`, or
    /// anything not lowercase hex where the spec says hex. A version above `00` is read as the spec asks, its first
    /// 55 characters as version 00's fields, anything it appends after a `-` ignored (only the fields known are
    /// taken: an appended text never reaches a log line or a command); version `00` itself has exactly those 55.
    pub fn parse(value: &'a str) -> Option<Self> {
        let bytes = value.as_bytes();
        if bytes.len() < 55 || (bytes.len() > 55 && bytes[55] != b'-') {
            return None;
        }
        let hex = |range: std::ops::Range<usize>| bytes[range].iter().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
        let zeros = |range: std::ops::Range<usize>| bytes[range].iter().all(|b| *b == b'0');
        let version = &bytes[0..2];
        let valid = hex(0..2)
            && version != b"ff"
            && (version != b"00" || bytes.len() == 55)
            && bytes[2] == b'-'
            && hex(3..35)
            && !zeros(3..35)
            && bytes[35] == b'-'
            && hex(36..52)
            && !zeros(36..52)
            && bytes[52] == b'-'
            && hex(53..55);
        // Every byte up to 55 is ASCII (checked above), so the slices fall on character boundaries.
        valid.then(|| Traceparent { trace_id: &value[3..35], parent_id: &value[36..52], flags: &value[53..55] })
    }
}

impl std::fmt::Display for Traceparent<'_> {
    /// Version `00`, whatever version it came in: W3C has a vendor propagate the version it supports.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "00-{}-{}-{}", self.trace_id, self.parent_id, self.flags)
    }
}

/// `<pid>-<start time>-<n>` in hex: unique in the process, and across restarts of it.
fn generate_id() -> String {
    static START: OnceLock<u64> = OnceLock::new();
    static NEXT: AtomicU64 = AtomicU64::new(1);
    let start = *START.get_or_init(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |since| since.as_millis() as u64)
    });
    format!("{:x}-{start:x}-{:x}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_ids_are_short_and_safe() {
        assert!(valid_request_id("0f8b7c3e-1d2a-4b5c-9e8f-7a6b5c4d3e2f"));
        assert!(valid_request_id("build:42.step_7"));
        assert!(!valid_request_id(""));
        assert!(!valid_request_id(&"a".repeat(MAX_REQUEST_ID + 1)));
        assert!(!valid_request_id("id with space") && !valid_request_id("a\"b") && !valid_request_id("é"));
        assert!(valid_request_id(&generate_id()));
    }

    #[test]
    fn traceparent_follows_w3c() {
        let good = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let valid = |value: &str| Traceparent::parse(value).is_some();
        assert_eq!(Traceparent::parse(good).unwrap().to_string(), good);
        assert!(!valid(&format!("{good}-extra")), "version 00 has exactly four fields");
        assert!(!valid("ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"));
        assert!(!valid("00-00000000000000000000000000000000-00f067aa0ba902b7-01"));
        assert!(!valid("00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01"));
        assert!(!valid("00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01"));
        assert!(!valid("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7"));
        assert!(!valid("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x"), "a 56th character must be -");
    }

    /// A later version is read for the fields version 00 has, and passed on as version 00: what it appends (text
    /// that could forge a log field, or 20 000 characters) goes nowhere.
    #[test]
    fn a_later_version_is_passed_on_as_version_00_without_its_suffix() {
        let fields = "4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        for suffix in ["", "-extra", "- request_id=forged \"x\"", &format!("-{}", "a".repeat(20_000))] {
            let given = format!("cc-{fields}{suffix}");
            let parsed = Traceparent::parse(&given).unwrap_or_else(|| panic!("{given:.80}"));
            assert_eq!(parsed.to_string(), format!("00-{fields}"));
        }
    }
}
