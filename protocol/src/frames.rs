//! Stream frames (`data: <json>` events of `/exec/stream`) and the encoder that batches pipe bytes into them.
//!
//! A stdout/stderr frame holds one or more complete lines joined by `\n`, the final newline implied, so a client that
//! prints each frame's `data` plus a newline (the contract's client) reproduces line output exactly. A frame with
//! `"nl": false` holds bytes not followed by a newline: a long line cut for size, a prompt that waited, or the
//! unterminated tail at end of output. Bytes that are not valid UTF-8 travel exactly in `b64` beside lossy `data`.

use serde::{Deserialize, Serialize};

/// Which pipe a chunk came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamKind {
    Stdout,
    Stderr,
}

/// One event of `/exec/stream`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum Frame {
    Stdout(Chunk),
    Stderr(Chunk),
    /// A message about the command (start failure, timeout); never command output.
    Error {
        data: String,
    },
    /// Always the last frame: the exit code, as in the `/exec` reply.
    Exit {
        data: i32,
        #[serde(default)]
        timed_out: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        signal: Option<i32>,
        #[serde(default)]
        duration_ms: u64,
    },
}

/// The payload of a stdout/stderr frame.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Chunk {
    pub data: String,
    /// `false` when the payload is not followed by a newline. Absent means `true` (the contract's one-line frames).
    #[serde(default = "yes", skip_serializing_if = "is_true")]
    pub nl: bool,
    /// The exact payload bytes, base64, when they are not valid UTF-8.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub b64: Option<String>,
}

fn yes() -> bool {
    true
}

#[allow(clippy::trivially_copy_pass_by_ref)] // serde's skip_serializing_if passes a reference
fn is_true(value: &bool) -> bool {
    *value
}

impl Chunk {
    fn new(payload: &[u8], nl: bool) -> Self {
        let (data, b64) = crate::text::encode(payload);
        Chunk { data, nl, b64 }
    }

    /// Appends the exact bytes this chunk stands for (payload plus the implied newline) to `out`.
    pub fn write_bytes(&self, out: &mut Vec<u8>) -> Result<(), base64::DecodeError> {
        match &self.b64 {
            Some(b64) => out.extend(crate::text::from_base64(b64)?),
            None => out.extend_from_slice(self.data.as_bytes()),
        }
        if self.nl {
            out.push(b'\n');
        }
        Ok(())
    }
}

impl Frame {
    fn chunk(kind: StreamKind, chunk: Chunk) -> Self {
        match kind {
            StreamKind::Stdout => Frame::Stdout(chunk),
            StreamKind::Stderr => Frame::Stderr(chunk),
        }
    }
}

/// Batches the bytes of one pipe into frames. Pure: the caller decides when a held partial line has waited enough
/// and calls [`FrameEncoder::flush`].
#[derive(Debug)]
pub struct FrameEncoder {
    kind: StreamKind,
    pending: Vec<u8>,
    max_pending: usize,
}

impl FrameEncoder {
    /// An encoder that holds at most `max_pending` bytes of an unfinished line before sending them as `nl: false`.
    pub fn new(kind: StreamKind, max_pending: usize) -> Self {
        FrameEncoder { kind, pending: Vec::new(), max_pending: max_pending.max(4) }
    }

    /// Feeds bytes read from the pipe and appends the frames that are ready to `out`.
    pub fn push(&mut self, bytes: &[u8], out: &mut Vec<Frame>) {
        if self.pending.is_empty() {
            // Fast path: no copy of the complete lines.
            match bytes.iter().rposition(|&b| b == b'\n') {
                Some(last) => {
                    out.push(Frame::chunk(self.kind, Chunk::new(&bytes[..last], true)));
                    self.pending.extend_from_slice(&bytes[last + 1..]);
                }
                None => self.pending.extend_from_slice(bytes),
            }
        } else {
            self.pending.extend_from_slice(bytes);
            if let Some(last) = self.pending.iter().rposition(|&b| b == b'\n') {
                out.push(Frame::chunk(self.kind, Chunk::new(&self.pending[..last], true)));
                self.pending.drain(..=last);
            }
        }
        while self.pending.len() >= self.max_pending {
            let cut = utf8_safe_cut(&self.pending[..self.max_pending]);
            out.push(Frame::chunk(self.kind, Chunk::new(&self.pending[..cut], false)));
            self.pending.drain(..cut);
        }
    }

    /// Whether an unfinished line is held back.
    pub fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    /// Sends the held unfinished line, if any, as an `nl: false` frame.
    pub fn flush(&mut self, out: &mut Vec<Frame>) {
        if !self.pending.is_empty() {
            out.push(Frame::chunk(self.kind, Chunk::new(&self.pending, false)));
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

    fn encode_all(pieces: &[&[u8]], max: usize) -> Vec<Frame> {
        let mut encoder = FrameEncoder::new(StreamKind::Stdout, max);
        let mut frames = Vec::new();
        for piece in pieces {
            encoder.push(piece, &mut frames);
        }
        encoder.flush(&mut frames);
        frames
    }

    fn rebuild(frames: &[Frame]) -> Vec<u8> {
        let mut out = Vec::new();
        for frame in frames {
            if let Frame::Stdout(chunk) = frame {
                chunk.write_bytes(&mut out).unwrap();
            }
        }
        out
    }

    /// What the contract's client prints: each frame's data and a newline.
    fn print_like_old_client(frames: &[Frame]) -> String {
        frames.iter().map(|f| if let Frame::Stdout(c) = f { format!("{}\n", c.data) } else { String::new() }).collect()
    }

    #[test]
    fn complete_lines_batch_into_one_frame_with_the_last_newline_implied() {
        let frames = encode_all(&[b"a\nb\n"], 1024);
        assert_eq!(frames, [Frame::Stdout(Chunk { data: "a\nb".into(), nl: true, b64: None })]);
        assert_eq!(serde_json::to_string(&frames[0]).unwrap(), r#"{"type":"stdout","data":"a\nb"}"#);
        assert_eq!(print_like_old_client(&frames), "a\nb\n");
    }

    #[test]
    fn missing_final_newline_and_crlf_survive() {
        let input: &[&[u8]] = &[b"one\r\ntw", b"o\r\nthree"];
        let frames = encode_all(input, 1024);
        assert_eq!(rebuild(&frames), b"one\r\ntwo\r\nthree");
        assert!(matches!(&frames[2], Frame::Stdout(c) if !c.nl && c.data == "three"));
    }

    #[test]
    fn long_lines_are_cut_without_splitting_a_character() {
        let line = "é".repeat(10); // 20 bytes
        let frames = encode_all(&[line.as_bytes()], 7);
        assert!(frames.iter().all(|f| matches!(f, Frame::Stdout(c) if c.b64.is_none())), "{frames:?}");
        assert_eq!(rebuild(&frames), line.as_bytes());
    }

    #[test]
    fn binary_bytes_round_trip_exactly() {
        let bytes: Vec<u8> = (0..=255u8).cycle().take(5000).collect();
        let pieces: Vec<&[u8]> = bytes.chunks(333).collect();
        let frames = encode_all(&pieces, 1000);
        assert_eq!(rebuild(&frames), bytes);
        let json: Vec<String> = frames.iter().map(|f| serde_json::to_string(f).unwrap()).collect();
        let back: Vec<Frame> = json.iter().map(|j| serde_json::from_str(j).unwrap()).collect();
        assert_eq!(rebuild(&back), bytes);
    }

    #[test]
    fn contract_frames_without_nl_mean_one_line() {
        let frame: Frame = serde_json::from_str(r#"{"type":"stdout","data":"hi"}"#).unwrap();
        assert_eq!(rebuild(&[frame]), b"hi\n");
        let exit: Frame = serde_json::from_str(r#"{"type":"exit","data":3}"#).unwrap();
        assert_eq!(exit, Frame::Exit { data: 3, timed_out: false, signal: None, duration_ms: 0 });
    }

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
