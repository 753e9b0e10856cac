//! The server's line batcher: [`FrameEncoder`] turns the bytes of one pipe into stdout/stderr events, complete
//! lines together, an unfinished one held back until it ends or the caller flushes it.

use super::StreamKind;

/// One stdout/stderr frame as an SSE event, written by hand (against serde_json: `bench/ab-json.sh`, which is 88%
/// slower on text): the payload is copied once, escaped (or base64-encoded) on the way. The same JSON as serde's for
/// [`Frame::Stdout`](super::Frame::Stdout)/[`Frame::Stderr`](super::Frame::Stderr) (field order included). Without
/// `lossy_twin`, bytes that are not valid UTF-8 get an empty `data` (see [`crate::ExecRequest::b64_only`]); `offset` is
/// written when the frame carries one.
fn chunk_event(kind: StreamKind, payload: &[u8], nl: bool, lossy_twin: bool, offset: Option<u64>) -> Vec<u8> {
    let exact = std::str::from_utf8(payload);
    let capacity = match exact {
        Ok(_) => payload.len() + 64,
        Err(_) => crate::reply_text::base64_len(payload.len()) + if lossy_twin { payload.len() * 2 } else { 0 } + 64,
    };
    let mut out = Vec::with_capacity(capacity);
    out.extend_from_slice(b"data: {\"type\":\"");
    out.extend_from_slice(kind.as_str().as_bytes());
    out.extend_from_slice(b"\",\"data\":");
    match exact {
        Ok(text) => crate::json::write_str(&mut out, text),
        Err(_) if lossy_twin => crate::json::write_str(&mut out, &String::from_utf8_lossy(payload)),
        Err(_) => out.extend_from_slice(b"\"\""),
    }
    if !nl {
        out.extend_from_slice(b",\"nl\":false");
    }
    if exact.is_err() {
        out.extend_from_slice(b",\"b64\":\"");
        crate::text::append_base64(&mut out, payload);
        out.push(b'"');
    }
    if let Some(offset) = offset {
        use std::io::Write as _;
        let _ = write!(out, ",\"offset\":{offset}");
    }
    out.extend_from_slice(b"}\n\n");
    out
}

/// Batches the bytes of one pipe into frames, each already an SSE event (`data: <json>` and a blank line). Pure:
/// the caller decides when a held partial line has waited enough and calls [`FrameEncoder::flush`].
#[derive(Debug)]
pub struct FrameEncoder {
    kind: StreamKind,
    pending: Vec<u8>,
    max_pending: usize,
    /// The stream offset of the next byte a frame will stand for, when frames carry offsets (named runs).
    offset: Option<u64>,
    /// Whether non-UTF-8 bytes also travel as lossy `data` (the contract's frames) or as `b64` alone.
    lossy_twin: bool,
}

impl FrameEncoder {
    /// An encoder that holds at most `max_pending` bytes of an unfinished line before sending them as `nl: false`.
    pub fn new(kind: StreamKind, max_pending: usize) -> Self {
        FrameEncoder { kind, pending: Vec::new(), max_pending: max_pending.max(4), offset: None, lossy_twin: true }
    }

    /// The same encoder whose frames carry `"offset"`, the first one `start` (a named run's stream, read from
    /// `start`).
    pub fn with_offsets(mut self, start: u64) -> Self {
        self.offset = Some(start);
        self
    }

    /// The stream offset just past every byte pushed so far (held bytes included), when frames carry offsets.
    pub fn next_offset(&self) -> Option<u64> {
        self.offset.map(|offset| offset + self.pending.len() as u64)
    }

    /// Skips the stream to `offset` (past a dropped gap): the held unfinished line, if any, must have been flushed.
    pub fn jump_to(&mut self, offset: u64) {
        debug_assert!(self.pending.is_empty(), "flush before jumping over a gap");
        if self.offset.is_some() {
            self.offset = Some(offset);
        }
    }

    /// The offset of a frame standing for `payload_len` bytes (plus the newline when `nl`), advanced past it.
    fn take_offset(&mut self, payload_len: usize, nl: bool) -> Option<u64> {
        let offset = self.offset;
        if let Some(next) = &mut self.offset {
            *next += payload_len as u64 + u64::from(nl);
        }
        offset
    }

    /// Frames for a client that reads `b64` ([`crate::ExecRequest::b64_only`]): bytes that are not valid UTF-8 go
    /// as `b64` with an empty `data`, not with their lossy text too.
    pub fn b64_only(mut self, b64_only: bool) -> Self {
        self.lossy_twin = !b64_only;
        self
    }

    /// Feeds bytes read from the pipe and appends the events that are ready to `out`.
    pub fn push(&mut self, bytes: &[u8], out: &mut Vec<Vec<u8>>) {
        if self.pending.is_empty() {
            // Fast path: no copy of the complete lines.
            match memchr::memrchr(b'\n', bytes) {
                Some(last) => {
                    let offset = self.take_offset(last, true);
                    out.push(chunk_event(self.kind, &bytes[..last], true, self.lossy_twin, offset));
                    self.pending.extend_from_slice(&bytes[last + 1..]);
                }
                None => self.pending.extend_from_slice(bytes),
            }
        } else {
            self.pending.extend_from_slice(bytes);
            if let Some(last) = memchr::memrchr(b'\n', &self.pending) {
                let offset = self.take_offset(last, true);
                out.push(chunk_event(self.kind, &self.pending[..last], true, self.lossy_twin, offset));
                self.pending.drain(..=last);
            }
        }
        while self.pending.len() >= self.max_pending {
            let cut = utf8_safe_cut(&self.pending[..self.max_pending]);
            let offset = self.take_offset(cut, false);
            out.push(chunk_event(self.kind, &self.pending[..cut], false, self.lossy_twin, offset));
            self.pending.drain(..cut);
        }
    }

    /// Whether an unfinished line is held back.
    pub fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    /// Sends the held unfinished line, if any, as an `nl: false` frame.
    pub fn flush(&mut self, out: &mut Vec<Vec<u8>>) {
        if !self.pending.is_empty() {
            let offset = self.take_offset(self.pending.len(), false);
            out.push(chunk_event(self.kind, &self.pending, false, self.lossy_twin, offset));
            self.pending.clear();
        }
    }
}
/// The length of the longest prefix of `bytes` that does not end inside a UTF-8 sequence (never 0 for a
/// non-empty input, so progress is guaranteed even for binary data).
fn utf8_safe_cut(bytes: &[u8]) -> usize {
    let len = bytes.len();
    for back in 1..=3.min(len) {
        let byte = bytes[len - back];
        if byte & 0xC0 != 0x80 {
            let width = match byte {
                b if b >= 0xF8 => 1,
                b if b >= 0xF0 => 4,
                b if b >= 0xE0 => 3,
                b if b >= 0xC0 => 2,
                _ => 1,
            };
            return if width > back && len - back > 0 { len - back } else { len };
        }
    }
    len
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utf8_cut_points() {
        assert_eq!(utf8_safe_cut(b"abc"), 3);
        assert_eq!(utf8_safe_cut(&[b'a', 0xC3]), 1);
        assert_eq!(utf8_safe_cut(&[b'a', 0xE2, 0x82]), 1);
        assert_eq!(utf8_safe_cut(&[0xE2, 0x82]), 2);
        assert_eq!(utf8_safe_cut(&[b'a', 0xC3, 0xA9]), 3);
        assert_eq!(utf8_safe_cut(&[0xff, 0xff]), 2);
    }
}
