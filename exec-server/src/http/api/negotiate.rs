//! Content negotiation on `POST /exec` (docs/exec-server.md, "Content negotiation"): a client that prefers server-sent
//! events gets the stream of `POST /exec/stream` from the same request, so it learns whether the server streams from
//! the reply's `content-type`, without a probe or a second round trip.
//!
//! *Rule:* each of the two types gets the q-value of the most specific range that matches it, as HTTP (RFC 9110
//! §12.5.1) has it: `application/json` before `application/*` before `*/*`; no match is q 0, not acceptable. The
//! stream is chosen only when `text/event-stream` itself is listed, with a q above 0 and above JSON's, or equal to a
//! JSON q that only a wildcard gave (`text/event-stream, */*`: the one named is the one meant). So a wildcard alone
//! (`*/*`, `text/*`) selects nothing: the contract's clients send none or `*/*` (curl) and keep getting the JSON
//! reply; and `text/event-stream;q=0.5, application/*` gets JSON, which it prefers.

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

/// How specifically a range matched a type: a wildcard of both parts, of the subtype, or the type itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Match {
    Any,
    Subtype,
    Exact,
}

/// A range's match of a type and its q-value.
type Matched = (Match, u16);

/// The rule above, over every `Accept` header's value (a request may send several; their lists join).
fn prefers_event_stream<'a>(values: impl Iterator<Item = &'a str>) -> bool {
    // Per type: the most specific match so far and its q (the highest, when one range is listed twice).
    let (mut stream, mut json): (Option<Matched>, Option<Matched>) = (None, None);
    for range in values.flat_map(|value| value.split(',')) {
        let mut fields = range.split(';');
        let media = fields.next().unwrap_or_default().trim();
        let q = fields
            .filter_map(|param| param.split_once('='))
            .find(|(name, _)| name.trim().eq_ignore_ascii_case("q"))
            .map_or(Some(1000), |(_, value)| quality(value.trim()));
        let Some(q) = q else { continue };
        for (best, kind) in [(&mut stream, "text/event-stream"), (&mut json, "application/json")] {
            let Some(matched) = matches(media, kind) else { continue };
            *best = match *best {
                Some((seen, _)) if seen > matched => *best,
                Some((seen, seen_q)) if seen == matched => Some((seen, seen_q.max(q))),
                _ => Some((matched, q)),
            };
        }
    }
    let Some((Match::Exact, stream_q)) = stream else { return false };
    let (json_match, json_q) = json.unwrap_or((Match::Any, 0));
    stream_q > 0 && (stream_q > json_q || (stream_q == json_q && json_match != Match::Exact))
}

/// How the range `media` matches the type `kind` (both `type/subtype`), if it does.
fn matches(media: &str, kind: &str) -> Option<Match> {
    let (family, _) = kind.split_once('/')?;
    let (range_family, range_sub) = media.split_once('/')?;
    if media.eq_ignore_ascii_case(kind) {
        Some(Match::Exact)
    } else if range_sub.trim() == "*" && range_family.trim().eq_ignore_ascii_case(family) {
        Some(Match::Subtype)
    } else if media == "*/*" {
        Some(Match::Any)
    } else {
        None
    }
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

    #[test]
    fn wildcards_give_json_its_q_value() {
        assert!(!prefers(&["text/event-stream;q=0.5, application/*"]), "application/* is q 1 for JSON");
        assert!(!prefers(&["text/event-stream;q=0.5, */*"]), "*/* is q 1 for JSON");
        assert!(prefers(&["text/event-stream;q=0.5, */*;q=0.4"]));
        assert!(prefers(&["text/event-stream;q=0.5, application/*;q=0.1, */*"]), "the most specific range counts");
        assert!(prefers(&["application/json;q=0.2, */*", "text/event-stream;q=0.3"]));
        assert!(!prefers(&["text/event-stream;q=0, */*"]), "q 0: not acceptable, whatever the wildcard says");
        assert!(!prefers(&["*/*, text/event-stream;q=0"]));
        assert!(prefers(&["application/json;q=0, text/event-stream;q=0.1"]));
    }
}
