//! `sidecar::wire::sse`, the client's event-stream reader: the same events and the same error as a plain model of the
//! format whatever the piece sizes, never an event over its limit, and every event a writer sent given back.

use sidecar_exec::sidecar::wire::sse::{SseError, SseParser, MAX_LINE_BYTES};

use crate::pieces::Cut;

/// Options byte: 0 reads with the default limit, anything else is the limit itself (1-255 bytes, so that lines and
/// events over it are easy to make).
pub fn check(input: &[u8]) {
    let cut = Cut::of(input);
    let limit = if cut.options == 0 { MAX_LINE_BYTES } else { usize::from(cut.options) };
    let expected = model(cut.body, limit);
    for pieces in [cut.pieces(), cut.bytes()] {
        let mut parser = SseParser::with_limit(limit);
        let mut events = Vec::new();
        let result = pieces.into_iter().try_for_each(|piece| parser.feed(piece, &mut events));
        assert_eq!((&events, result), (&expected.events, expected.result), "not what the model reads");
        if result.is_ok() {
            assert_eq!(parser.has_partial(), expected.partial, "an unfinished event or line, or none");
        }
        assert!(events.iter().all(|event| event.len() <= limit), "an event over the limit");
    }
    round_trip(&cut);
}

/// What a stream reads as, written the plain way: split at `\n`, one line at a time.
struct Model {
    events: Vec<Vec<u8>>,
    result: Result<(), SseError>,
    partial: bool,
}

fn model(stream: &[u8], limit: usize) -> Model {
    let mut model = Model { events: Vec::new(), result: Ok(()), partial: false };
    let mut data: Option<Vec<u8>> = None;
    let mut lines = stream.split(|&byte| byte == b'\n').peekable();
    while let Some(line) = lines.next() {
        if line.len() > limit {
            model.result = Err(SseError::LineTooLong { limit });
            return model;
        }
        if lines.peek().is_none() {
            // The bytes after the last `\n`: an unfinished line.
            model.partial = !line.is_empty() || data.is_some();
            return model;
        }
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.is_empty() {
            model.events.extend(data.take());
            continue;
        }
        let value = match line.strip_prefix(b"data:") {
            Some(value) => value.strip_prefix(b" ").unwrap_or(value),
            None if line == b"data" => b"",
            None => continue, // a comment, or another field
        };
        // Several `data` lines are joined by `\n`.
        let mut event = match data.take() {
            Some(mut event) => {
                event.push(b'\n');
                event
            }
            None => Vec::new(),
        };
        event.extend_from_slice(value);
        if event.len() > limit {
            model.result = Err(SseError::EventTooLarge { limit });
            return model;
        }
        data = Some(event);
    }
    model
}

/// Events written as a server writes them — each line of an event's data as a `data:` line, keep-alive comments and
/// unknown fields between them — are read back as they were. The events are the body cut at every `0xff` byte, with
/// no `\r` (a writer never puts one before a line end: the reader strips it).
fn round_trip(cut: &Cut<'_>) {
    let sent: Vec<Vec<u8>> = cut
        .body
        .split(|&byte| byte == 0xff)
        .map(|event| event.iter().copied().filter(|&byte| byte != b'\r').collect())
        .collect();
    let mut stream = Vec::new();
    for (n, event) in sent.iter().enumerate() {
        if n % 3 == 1 {
            stream.extend_from_slice(b": keep-alive\n\n");
        }
        for line in event.split(|&byte| byte == b'\n') {
            // `data:` without its space only where the value does not start with one (the reader strips one).
            let bare = n % 2 == 1 && !line.starts_with(b" ");
            stream.extend_from_slice(if bare { b"data:".as_slice() } else { b"data: " });
            stream.extend_from_slice(line);
            stream.extend_from_slice(if n % 4 == 3 { b"\r\n".as_slice() } else { b"\n" });
            if n % 5 == 4 {
                stream.extend_from_slice(b"event: ignored\n");
            }
        }
        stream.push(b'\n');
    }
    let mut parser = SseParser::new();
    let mut read = Vec::new();
    for piece in cut.split(&stream) {
        parser.feed(piece, &mut read).expect("a well-formed stream is read");
    }
    assert_eq!(read, sent, "events written are not read back");
    assert!(!parser.has_partial(), "a complete stream left something unfinished");
}
