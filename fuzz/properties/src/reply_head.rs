//! sidecar-exec's reading of a reply's head (`sidecar::wire::reply_head`): for any status line and headers, what it says
//! (an event stream, a terminal run, stdin open, the run kept, a boot id, how long to wait, where a redirect points)
//! is what a plain model of the rules over the header lines says, its bounds hold, and what it shows is safe.

use sidecar_exec::sidecar::config::sidecars::shown_url;
use sidecar_exec::sidecar::wire::reply_head::{
    is_boot_id, HeaderMap, HeaderName, HeaderValue, ReplyHead, ReplyKind, StatusCode, RETRY_AFTER_BOUNDS,
};
use sidecar_exec::terminal_safe::terminal_safe;

/// The input is a reply head as text: a status line, then `name: value` lines (`\n` or `\r\n`). Lines that are not a
/// header the `http` crate takes (a bad name or value) are left out, as hyper would refuse the reply.
pub fn check(input: &[u8]) {
    let mut lines = input.split(|&byte| byte == b'\n').map(|line| line.strip_suffix(b"\r").unwrap_or(line));
    let status_line = lines.next().unwrap_or_default();
    let status = status_of(status_line);
    let (mut map, mut pairs) = (HeaderMap::new(), Vec::new());
    for line in lines {
        let Some(colon) = line.iter().position(|&byte| byte == b':') else { continue };
        let name = line[..colon].trim_ascii();
        let value = line[colon + 1..].trim_ascii();
        let (Ok(header), Ok(header_value)) = (HeaderName::from_bytes(name), HeaderValue::from_bytes(value)) else {
            continue;
        };
        map.append(header, header_value);
        pairs.push((name.to_ascii_lowercase(), value.to_vec()));
    }
    let head = ReplyHead::of(status, &map);
    assert_eq!(head, model(status, &pairs), "read otherwise than the rules say");
    assert!(!head.terminal || head.event_stream, "a terminal run that is no event stream");
    assert_eq!(
        head.kind(),
        match (status.is_success(), head.event_stream) {
            (false, _) => ReplyKind::Refused,
            (true, true) => ReplyKind::Stream { terminal: head.terminal },
            (true, false) => ReplyKind::Other,
        }
    );
    if let Some(wait) = head.retry_after {
        assert!((RETRY_AFTER_BOUNDS.0..=RETRY_AFTER_BOUNDS.1).contains(&wait), "{wait:?} out of bounds");
    }
    if let Some(boot) = &head.boot {
        assert!(is_boot_id(boot));
        assert!(!head.restarted_since(Some(boot)), "the same boot id counts as a restart");
    }
    assert!(!head.restarted_since(None), "an unknown boot id counts as a restart");
    // What a message shows of the head's text, and of any text as a sidecar URL: no control character reaches the
    // terminal.
    let text = String::from_utf8_lossy(status_line);
    for shown in [terminal_safe(head.location.as_deref().unwrap_or_default()), shown_url(&text)] {
        assert!(!shown.chars().any(char::is_control), "a control character shown: {shown:?}");
    }
}

/// The status: the first three digits after the first space of the status line, when they make one; else 200.
fn status_of(line: &[u8]) -> StatusCode {
    let digits = line.iter().position(|&byte| byte == b' ').and_then(|space| line.get(space + 1..space + 4));
    digits.and_then(|digits| StatusCode::from_bytes(digits).ok()).unwrap_or(StatusCode::OK)
}

/// The rules, over the header lines in order (names lowercased): a header's first value counts.
fn model(status: StatusCode, pairs: &[(Vec<u8>, Vec<u8>)]) -> ReplyHead {
    let first = |name: &str| pairs.iter().find(|(n, _)| n == name.as_bytes()).map(|(_, value)| value.as_slice());
    let has = |name: &str| first(name).is_some();
    // `HeaderValue::to_str`: visible ASCII, space and tab only.
    let text = |value: &[u8]| {
        value
            .iter()
            .all(|&byte| byte == b'\t' || (0x20..0x7f).contains(&byte))
            .then(|| String::from_utf8(value.to_vec()).unwrap())
    };
    let event_stream = first("content-type")
        .and_then(text)
        .is_some_and(|value| value.trim_start().to_ascii_lowercase().starts_with("text/event-stream"));
    let retry_after = first("retry-after")
        .and_then(text)
        .and_then(|value| value.trim().parse::<u64>().ok())
        .map(|secs| std::time::Duration::from_secs(secs.clamp(1, 10)));
    let boot = first("x-boot-id")
        .and_then(text)
        .filter(|value| (1..=64).contains(&value.len()) && value.bytes().all(|byte| byte.is_ascii_graphic()));
    ReplyHead {
        status,
        event_stream,
        terminal: event_stream && has("x-tty"),
        stdin_open: has("x-stdin-stream"),
        run_kept: has("x-run-kept"),
        boot,
        retry_after,
        location: first("location").map(|value| String::from_utf8_lossy(value).into_owned()),
    }
}
