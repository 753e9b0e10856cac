//! Content negotiation on `POST /exec` (issue 22): a client that prefers server-sent events gets the stream of
//! `POST /exec/stream` from the same request, so it learns whether the server streams from the reply's
//! `content-type`, without a probe or a second round trip.
//!
//! *Rule:* stream only when `text/event-stream` is listed with a q strictly higher than `application/json`'s (a type
//! not listed has q 0). A wildcard (`*/*`, `text/*`) selects nothing: the contract's clients send none or `*/*`
//! (curl) and keep getting the JSON reply.

use std::convert::Infallible;

use axum::extract::FromRequestParts;
use axum::http::header::ACCEPT;
use axum::http::request::Parts;

/// Whether the request's `Accept` prefers the event stream to the JSON reply.
pub struct PrefersStream(pub bool);

impl<S: Send + Sync> FromRequestParts<S> for PrefersStream {
    type Rejection = Infallible;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Infallible> {
        let accept = parts.headers.get_all(ACCEPT).iter().filter_map(|value| value.to_str().ok());
        Ok(PrefersStream(prefers_event_stream(accept)))
    }
}

/// The rule above, over every `Accept` header's value (a request may send several; their lists join).
fn prefers_event_stream<'a>(values: impl Iterator<Item = &'a str>) -> bool {
    let (mut stream, mut json) = (0u16, 0u16);
    for range in values.flat_map(|value| value.split(',')) {
        let mut fields = range.split(';');
        let media = fields.next().unwrap_or_default().trim();
        let q = fields
            .filter_map(|param| param.split_once('='))
            .find(|(name, _)| name.trim().eq_ignore_ascii_case("q"))
            .map_or(Some(1000), |(_, value)| quality(value.trim()));
        let Some(q) = q else { continue };
        if media.eq_ignore_ascii_case("text/event-stream") {
            stream = stream.max(q);
        } else if media.eq_ignore_ascii_case("application/json") {
            json = json.max(q);
        }
    }
    stream > json
}

/// A q-value (`0`, `0.5`, `1.000`) in thousandths; `None` when it is not one (the range is then ignored).
fn quality(text: &str) -> Option<u16> {
    let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
    if fraction.len() > 3 || !fraction.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let thousandths = format!("{fraction:0<3}").parse::<u16>().ok()?;
    match whole {
        "0" => Some(thousandths),
        "1" if thousandths == 0 => Some(1000),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prefers(accept: &[&str]) -> bool {
        prefers_event_stream(accept.iter().copied())
    }

    #[test]
    fn only_an_explicit_stronger_preference_selects_the_stream() {
        assert!(prefers(&[protocol::STREAM_ACCEPT]), "what sidecar-exec sends");
        assert!(prefers(&["text/event-stream"]));
        assert!(prefers(&["Text/Event-Stream ; q=0.9", "application/json;q=0.8"]));
        assert!(prefers(&["text/event-stream, */*"]), "a wildcard is no mention of JSON");
        assert!(!prefers(&[]), "no Accept: the contract's reply");
        assert!(!prefers(&["*/*"]), "curl");
        assert!(!prefers(&["text/*"]));
        assert!(!prefers(&["application/json"]));
        assert!(!prefers(&["text/event-stream;q=0.5, application/json;q=0.5"]), "a tie is no preference");
        assert!(!prefers(&["application/json, text/event-stream"]), "both q 1");
        assert!(!prefers(&["text/event-stream;q=0"]), "q 0: not acceptable");
        assert!(!prefers(&["text/event-stream;q=2"]), "not a q-value: ignored");
        assert!(prefers(&["text/event-stream;q=0.001"]));
        assert!(!prefers(&["text/event-stream;q=0.0001"]));
        assert!(prefers(&["text/event-stream;charset=utf-8;q=1.0, application/json;q=0.999"]));
    }
}
