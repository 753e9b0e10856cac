//! What the client reads of a reply's head (its status line and headers), read in this one place: whether the body
//! is an event stream or something else (a contract server's JSON reply, an error), whether the run is on a
//! terminal, whether its stdin is open, whether the server keeps the run, which server start answered (its boot id),
//! how long a busy server asks to wait, and where a redirect points. Every decision a reply's head feeds reads these
//! fields, and `fuzz/` checks them against a plain model of the rules for any head.

use std::time::Duration;

pub use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
pub use reqwest::StatusCode;

/// The longest boot id the client keeps: exec-server's are 32 hex digits; one much longer is not a boot id.
pub const MAX_BOOT_ID: usize = 64;

/// The bounds of a busy server's `Retry-After` the client waits for: at least a second (never a tight loop), at most
/// ten (a longer wait is checked again after ten).
pub const RETRY_AFTER_BOUNDS: (Duration, Duration) = (Duration::from_secs(1), Duration::from_secs(10));

/// A reply's head, as the client reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplyHead {
    pub status: StatusCode,
    /// `content-type: text/event-stream` (any case, parameters allowed): a stream of frames; anything else is a
    /// JSON reply, an error body, or not a runs endpoint at all.
    pub event_stream: bool,
    /// [`protocol::TTY_HEADER`] on an event stream: the command runs on a remote terminal, so the keys the user types
    /// are the command's (Ctrl-C included) and no longer signals to the client.
    pub terminal: bool,
    /// [`protocol::STDIN_STREAM_HEADER`]: the run's stdin is open for `POST /runs/{id}/stdin`.
    pub stdin_open: bool,
    /// [`protocol::RUN_KEPT_HEADER`]: the server keeps the run (a blocking reply).
    pub run_kept: bool,
    /// [`protocol::BOOT_ID_HEADER`]: which start of the server answered; none when absent or not a boot id (1 to
    /// [`MAX_BOOT_ID`] visible ASCII characters).
    pub boot: Option<String>,
    /// `Retry-After` in whole seconds, within [`RETRY_AFTER_BOUNDS`]; none when absent or not a number of seconds.
    pub retry_after: Option<Duration>,
    /// `Location`, as sent (lossy UTF-8; shown only through [`crate::terminal_safe::terminal_safe`]).
    pub location: Option<String>,
}

/// What a reply is, from its head: what the caller does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplyKind {
    /// 2xx and an event stream: frames follow (on a terminal when `terminal`).
    Stream { terminal: bool },
    /// 2xx and anything else: a JSON reply (the contract's), or, where a stream was asked for, no runs endpoint.
    Other,
    /// Not 2xx: a refusal, whose body says why.
    Refused,
}

impl ReplyHead {
    /// The head of `response`.
    pub fn of_response(response: &reqwest::Response) -> Self {
        Self::of(response.status(), response.headers())
    }

    /// The head made of `status` and `headers`.
    pub fn of(status: StatusCode, headers: &HeaderMap) -> Self {
        let text = |name: &str| headers.get(name).map(|value| String::from_utf8_lossy(value.as_bytes()).into_owned());
        let event_stream = headers
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|value| value.to_str().ok())
            .is_some_and(|value| value.trim_start().to_ascii_lowercase().starts_with("text/event-stream"));
        let retry_after = headers
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.trim().parse::<u64>().ok())
            .map(|secs| Duration::from_secs(secs).clamp(RETRY_AFTER_BOUNDS.0, RETRY_AFTER_BOUNDS.1));
        let boot = headers
            .get(protocol::BOOT_ID_HEADER)
            .and_then(|value| value.to_str().ok())
            .filter(|value| is_boot_id(value))
            .map(str::to_owned);
        ReplyHead {
            status,
            event_stream,
            terminal: event_stream && headers.contains_key(protocol::TTY_HEADER),
            stdin_open: headers.contains_key(protocol::STDIN_STREAM_HEADER),
            run_kept: headers.contains_key(protocol::RUN_KEPT_HEADER),
            boot,
            retry_after,
            location: text(reqwest::header::LOCATION.as_str()),
        }
    }

    /// What the reply is.
    pub fn kind(&self) -> ReplyKind {
        match (self.status.is_success(), self.event_stream) {
            (false, _) => ReplyKind::Refused,
            (true, true) => ReplyKind::Stream { terminal: self.terminal },
            (true, false) => ReplyKind::Other,
        }
    }

    /// Whether this head comes from another start of the server than `known` (a boot id seen before): only when
    /// both are known and differ. A server that sends none (older, or the contract's) never counts as restarted.
    pub fn restarted_since(&self, known: Option<&str>) -> bool {
        matches!((known, self.boot.as_deref()), (Some(known), Some(now)) if known != now)
    }
}

/// Whether `value` can be a boot id: 1 to [`MAX_BOOT_ID`] visible ASCII characters.
pub fn is_boot_id(value: &str) -> bool {
    (1..=MAX_BOOT_ID).contains(&value.len()) && value.bytes().all(|byte| byte.is_ascii_graphic())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(status: u16, headers: &[(&str, &str)]) -> ReplyHead {
        let mut map = HeaderMap::new();
        for (name, value) in headers {
            map.append(HeaderName::from_bytes(name.as_bytes()).unwrap(), HeaderValue::from_str(value).unwrap());
        }
        ReplyHead::of(StatusCode::from_u16(status).unwrap(), &map)
    }

    #[test]
    fn a_terminal_run_is_an_event_stream_that_says_so() {
        let tty = head(200, &[("content-type", "Text/Event-Stream; charset=utf-8"), ("x-tty", "1")]);
        assert_eq!(tty.kind(), ReplyKind::Stream { terminal: true });
        assert_eq!(head(200, &[("content-type", "text/event-stream")]).kind(), ReplyKind::Stream { terminal: false });
        assert_eq!(head(200, &[("content-type", "application/json"), ("x-tty", "1")]).kind(), ReplyKind::Other);
        assert_eq!(head(404, &[("content-type", "text/event-stream"), ("x-tty", "1")]).kind(), ReplyKind::Refused);
    }

    #[test]
    fn retry_after_and_boot_ids_are_read_within_bounds() {
        let wait = |value| head(503, &[("retry-after", value)]).retry_after;
        assert_eq!(wait("0"), Some(Duration::from_secs(1)));
        assert_eq!(wait(" 3 "), Some(Duration::from_secs(3)));
        assert_eq!(wait("86400"), Some(Duration::from_secs(10)));
        assert_eq!(wait("Wed, 21 Oct 2015 07:28:00 GMT"), None);
        let boot = |value: &str| head(200, &[("x-boot-id", value)]).boot;
        assert_eq!(boot("0f8b"), Some("0f8b".to_owned()));
        assert_eq!(boot(&"a".repeat(MAX_BOOT_ID + 1)), None);
        assert_eq!(boot("a b"), None);
        let restarted = head(404, &[("x-boot-id", "b")]);
        assert!(restarted.restarted_since(Some("a")) && !restarted.restarted_since(Some("b")));
        assert!(!restarted.restarted_since(None) && !head(404, &[]).restarted_since(Some("a")));
    }
}
