//! Hand-written on measurement: `bench/ab-sse.sh` reads the same 64 MiB streams with eventsource-stream, the crate the
//! design card names, which was 7× slower on many small frames (95 against 663 MiB/s) and 63× to 737× slower on big
//! ones (it rescans an unfinished line at every piece), and has no bound on a line (BENCHMARKS.md, "A/B:
//! hand-written against the crate").
//!
//! A server-sent-events reader for the client: bytes in, each event's `data` out. Only what `/exec/stream` uses:
//! `data:` fields (several are joined by `\n`), comments (keep-alives) and the blank line that ends an event; other
//! fields are ignored. Lines end with `\n` or `\r\n`.
//!
//! The server is not trusted: every byte is looked at once (a line that arrives in a million pieces is not rescanned
//! a million times), and a line or an event larger than a limit is an error instead of a buffer that grows until
//! memory runs out.

/// The default limit on one line and on one event's data: 16 MiB. An exec-server event holds at most two pipe reads
/// (64 KiB each) of output, escaped (at most 6 bytes a byte) — under 1 MiB; the contract's server sends one line of
/// output per event. 16 MiB leaves either ample room and bounds what a broken server can make the client hold.
pub const MAX_LINE_BYTES: usize = 16 * 1024 * 1024;

/// Why a stream cannot be read on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SseError {
    /// A line is longer than the limit (its `\n` not counted; a `\r` before it is).
    #[error("a line longer than {}", size(*.limit))]
    LineTooLong { limit: usize },
    /// The `data` of one event is larger than the limit.
    #[error("an event larger than {}", size(*.limit))]
    EventTooLarge { limit: usize },
}

fn size(bytes: usize) -> String {
    const MIB: usize = 1024 * 1024;
    if bytes >= MIB && bytes % MIB == 0 {
        format!("{} MiB", bytes / MIB)
    } else {
        format!("{bytes} bytes")
    }
}

/// Incremental parser; feed it whatever the socket gives.
#[derive(Debug)]
pub struct SseParser {
    /// The unfinished line: bytes after the last line end, none of them a `\n`.
    partial: Vec<u8>,
    data: Vec<u8>,
    has_data: bool,
    limit: usize,
}

impl Default for SseParser {
    fn default() -> Self {
        SseParser::with_limit(MAX_LINE_BYTES)
    }
}

impl SseParser {
    /// A parser with the default limit, [`MAX_LINE_BYTES`].
    pub fn new() -> Self {
        SseParser::default()
    }

    /// A parser that refuses a line, or an event's data, longer than `limit` bytes.
    pub fn with_limit(limit: usize) -> Self {
        SseParser { partial: Vec::new(), data: Vec::new(), has_data: false, limit }
    }

    /// Feeds bytes and appends the data of every event they complete to `out`. After an error the stream cannot be
    /// read on: the caller gives up on it.
    pub fn feed(&mut self, bytes: &[u8], out: &mut Vec<Vec<u8>>) -> Result<(), SseError> {
        let mut rest = bytes;
        if !self.partial.is_empty() {
            // Only the new bytes are searched: the held ones are known to hold no line end.
            let Some(end) = memchr::memchr(b'\n', rest) else {
                self.check_line(self.partial.len() + rest.len())?;
                self.partial.extend_from_slice(rest);
                return Ok(());
            };
            self.check_line(self.partial.len() + end)?;
            let mut line = std::mem::take(&mut self.partial);
            line.extend_from_slice(&rest[..end]);
            self.line(line.strip_suffix(b"\r").unwrap_or(&line), out)?;
            line.clear();
            self.partial = line; // keeps its capacity for the next long line
            rest = &rest[end + 1..];
        }
        let mut start = 0;
        while let Some(offset) = memchr::memchr(b'\n', &rest[start..]) {
            let line = &rest[start..start + offset];
            self.check_line(line.len())?;
            self.line(line.strip_suffix(b"\r").unwrap_or(line), out)?;
            start += offset + 1;
        }
        self.check_line(rest.len() - start)?;
        self.partial.extend_from_slice(&rest[start..]);
        Ok(())
    }

    fn check_line(&self, len: usize) -> Result<(), SseError> {
        if len > self.limit {
            return Err(SseError::LineTooLong { limit: self.limit });
        }
        Ok(())
    }

    fn line(&mut self, line: &[u8], out: &mut Vec<Vec<u8>>) -> Result<(), SseError> {
        if line.is_empty() {
            if self.has_data {
                out.push(std::mem::take(&mut self.data));
                self.has_data = false;
            }
        } else if let Some(value) = line.strip_prefix(b"data") {
            // `data` alone, `data:value` or `data: value` (one leading space is not part of the value).
            let value = match value.strip_prefix(b":") {
                Some(value) => value.strip_prefix(b" ").unwrap_or(value),
                None if value.is_empty() => value,
                None => return Ok(()), // a field named e.g. `database`: not ours
            };
            if self.data.len() + usize::from(self.has_data) + value.len() > self.limit {
                return Err(SseError::EventTooLarge { limit: self.limit });
            }
            if self.has_data {
                self.data.push(b'\n');
            }
            self.data.extend_from_slice(value);
            self.has_data = true;
        }
        Ok(())
    }

    /// Bytes of an unfinished line or event: a stream that ends with some is cut short.
    pub fn has_partial(&self) -> bool {
        !self.partial.is_empty() || self.has_data
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_in_pieces(stream: &[u8], piece: usize) -> Vec<Vec<u8>> {
        let mut parser = SseParser::new();
        let mut out = Vec::new();
        for chunk in stream.chunks(piece) {
            parser.feed(chunk, &mut out).unwrap();
        }
        out
    }

    #[test]
    fn events_survive_any_split() {
        let stream = b": keep-alive\n\ndata: {\"a\":1}\n\ndata:x\r\n\r\nevent: ignored\ndata: one\ndata: two\n\n:\n\n";
        for piece in 1..stream.len() {
            let events = parse_in_pieces(stream, piece);
            assert_eq!(events, [b"{\"a\":1}".to_vec(), b"x".to_vec(), b"one\ntwo".to_vec()], "piece {piece}");
        }
    }

    #[test]
    fn an_unfinished_event_is_reported() {
        let mut parser = SseParser::new();
        let mut out = Vec::new();
        parser.feed(b"data: {\"type\"", &mut out).unwrap();
        assert!(out.is_empty() && parser.has_partial());
        parser.feed(b":\"exit\"}\n\n", &mut out).unwrap();
        assert_eq!(out.len(), 1);
        assert!(!parser.has_partial());
    }

    #[test]
    fn a_line_or_an_event_over_the_limit_is_an_error_however_it_is_split() {
        let cases: [(&[u8], SseError); 3] = [
            (b"data: 0123456789\n\n", SseError::LineTooLong { limit: 10 }),
            (b": a comment too long\n", SseError::LineTooLong { limit: 10 }),
            (b"data:12345\ndata:67890\n\n", SseError::EventTooLarge { limit: 10 }),
        ];
        for (stream, expected) in cases {
            for piece in 1..=stream.len() {
                let mut parser = SseParser::with_limit(10);
                let mut out = Vec::new();
                let result = stream.chunks(piece).try_for_each(|chunk| parser.feed(chunk, &mut out));
                assert_eq!(result, Err(expected), "{:?} in pieces of {piece}", String::from_utf8_lossy(stream));
            }
        }
        // Exactly at the limit is fine.
        let mut parser = SseParser::with_limit(10);
        let mut out = Vec::new();
        parser.feed(b"data:12345\ndata:6789\r\n\n", &mut out).unwrap();
        assert_eq!(out, [b"12345\n6789".to_vec()]);
        assert_eq!(SseError::LineTooLong { limit: MAX_LINE_BYTES }.to_string(), "a line longer than 16 MiB");
    }

    /// One line just under the limit, in 64-byte pieces: rescanning the held line at every piece (what this parser
    /// did) is ~2·10¹² bytes of scanning, minutes; one pass is 16 MiB, well under a second even unoptimised. The
    /// check is by outcome: a generous deadline that only a quadratic parser misses.
    #[test]
    fn a_long_line_in_small_pieces_is_parsed_in_linear_time() {
        let (done, finished) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let payload_len = MAX_LINE_BYTES - b"data: ".len();
            let mut parser = SseParser::new();
            let mut out = Vec::new();
            parser.feed(b"data: ", &mut out).unwrap();
            let piece = [b'x'; 64];
            let mut left = payload_len;
            while left > 0 {
                let n = left.min(piece.len());
                parser.feed(&piece[..n], &mut out).unwrap();
                left -= n;
            }
            parser.feed(b"\n\n", &mut out).unwrap();
            let _ = done.send(out.first().map(Vec::len));
        });
        let parsed = finished.recv_timeout(std::time::Duration::from_secs(60)).expect("quadratic: not done in 60 s");
        assert_eq!(parsed, Some(MAX_LINE_BYTES - b"data: ".len()));
    }
}
