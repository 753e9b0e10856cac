//! A server-sent-events reader for the client: bytes in, each event's `data` out. Only what `/exec/stream` uses:
//! `data:` fields (several are joined by `\n`), comments (keep-alives) and the blank line that ends an event; other
//! fields are ignored. Lines end with `\n` or `\r\n`.

/// Incremental parser; feed it whatever the socket gives.
#[derive(Debug, Default)]
pub struct SseParser {
    buffer: Vec<u8>,
    data: Vec<u8>,
    has_data: bool,
}

impl SseParser {
    pub fn new() -> Self {
        SseParser::default()
    }

    /// Feeds bytes and appends the data of every event they complete to `out`.
    pub fn feed(&mut self, bytes: &[u8], out: &mut Vec<Vec<u8>>) {
        if self.buffer.is_empty() {
            // Usual case: whole lines straight from the socket's buffer, only an unfinished tail is kept.
            let used = self.lines(bytes, out);
            self.buffer.extend_from_slice(&bytes[used..]);
        } else {
            let mut buffer = std::mem::take(&mut self.buffer);
            buffer.extend_from_slice(bytes);
            let used = self.lines(&buffer, out);
            buffer.drain(..used);
            self.buffer = buffer;
        }
    }

    /// Handles every complete line of `bytes`; returns how many bytes that was.
    fn lines(&mut self, bytes: &[u8], out: &mut Vec<Vec<u8>>) -> usize {
        let mut start = 0;
        while let Some(offset) = memchr::memchr(b'\n', &bytes[start..]) {
            let end = start + offset;
            let line = &bytes[start..end];
            self.line(line.strip_suffix(b"\r").unwrap_or(line), out);
            start = end + 1;
        }
        start
    }

    fn line(&mut self, line: &[u8], out: &mut Vec<Vec<u8>>) {
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
                None => return, // a field named e.g. `database`: not ours
            };
            if self.has_data {
                self.data.push(b'\n');
            }
            self.data.extend_from_slice(value);
            self.has_data = true;
        }
    }

    /// Bytes of an unfinished line or event: a stream that ends with some is cut short.
    pub fn has_partial(&self) -> bool {
        !self.buffer.is_empty() || self.has_data
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_in_pieces(stream: &[u8], piece: usize) -> Vec<Vec<u8>> {
        let mut parser = SseParser::new();
        let mut out = Vec::new();
        for chunk in stream.chunks(piece) {
            parser.feed(chunk, &mut out);
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
        parser.feed(b"data: {\"type\"", &mut out);
        assert!(out.is_empty() && parser.has_partial());
        parser.feed(b":\"exit\"}\n\n", &mut out);
        assert_eq!(out.len(), 1);
        assert!(!parser.has_partial());
    }
}
