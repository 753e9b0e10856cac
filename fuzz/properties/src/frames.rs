//! protocol's stream frames: `Frame::from_json`, the client's reader of one event's data, reads what serde's
//! derived reader reads and gives back what it is serialized as; `FrameEncoder`, the server's writer, turns any
//! pipe bytes, however they arrive, into events that read back as exactly those bytes, with offsets that count them,
//! holding less than its limit of an unfinished line.

use protocol::{Chunk, Frame, FrameEncoder, StreamKind};

use crate::pieces::Cut;

/// The body is one event's data for the reader, and a pipe's bytes for the encoder. Options byte: bits 0-5, the
/// encoder's limit on an unfinished line (4-67 bytes); bit 6, frames carry offsets (a named run's); bit 7,
/// `b64_only` frames.
pub fn check(input: &[u8]) {
    let cut = Cut::of(input);
    read(cut.body);
    encode(&cut);
}

fn read(json: &[u8]) {
    let Ok(frame) = Frame::from_json(json) else {
        // Refused: a frame serde's derived reader reads must not be, unless it is not a JSON object (serde's
        // tagged enum also takes an array, a form no server writes, which `from_json` refuses by decision).
        if let Ok(derived) = serde_json::from_slice::<Frame>(json) {
            let object = serde_json::from_slice::<serde_json::Value>(json).is_ok_and(|value| value.is_object());
            assert!(!object, "refused a frame serde reads: {derived:?}");
        }
        return;
    };
    if let Ok(derived) = serde_json::from_slice::<Frame>(json) {
        assert_eq!(frame.as_ref(), Some(&derived), "read otherwise than serde reads it");
    }
    let Some(frame) = frame else { return };
    let json = serde_json::to_vec(&frame).expect("a frame serializes");
    assert_eq!(Frame::from_json(&json).expect("its own JSON is refused").as_ref(), Some(&frame), "{frame:?}");
    let event = frame.to_event();
    assert_eq!(event.iter().filter(|&&byte| byte == b'\n').count(), 2, "an event of more than one line: {frame:?}");
    if let Frame::Stdout(chunk) | Frame::Stderr(chunk) = &frame {
        let _ = chunk.write_bytes(&mut Vec::new());
    }
}

fn encode(cut: &Cut<'_>) {
    let max_pending = usize::from(cut.options & 0x3f) + 4;
    let offsets = cut.options & 0x40 != 0;
    let b64_only = cut.options & 0x80 != 0;
    let start = if offsets { u64::from(cut.body.first().copied().unwrap_or(0)) * 1000 } else { 0 };
    let mut encoder = FrameEncoder::new(StreamKind::Stderr, max_pending).b64_only(b64_only);
    if offsets {
        encoder = encoder.with_offsets(start);
    }
    let (mut events, mut pushed, mut sent) = (Vec::new(), 0u64, 0u64);
    for piece in cut.pieces() {
        let before = events.len();
        encoder.push(piece, &mut events);
        pushed += piece.len() as u64;
        if let Some(next) = encoder.next_offset() {
            assert_eq!(next, start + pushed, "next offset is not past every byte pushed");
        }
        sent += events[before..].iter().map(|event| stands_for(&chunk_of(event))).sum::<u64>();
        assert!(pushed - sent < max_pending as u64, "{} bytes held, over {max_pending}", pushed - sent);
    }
    encoder.flush(&mut events);
    assert!(!encoder.has_pending());
    let mut bytes = Vec::new();
    let mut offset = start;
    for event in &events {
        let chunk = chunk_of(event);
        assert_eq!(chunk.offset, offsets.then_some(offset), "offset of {chunk:?}");
        offset += stands_for(&chunk);
        if b64_only && chunk.b64.is_some() {
            assert!(chunk.data.is_empty(), "lossy text beside b64 in a b64_only frame");
        }
        chunk.write_bytes(&mut bytes).expect("the encoder's base64 does not decode");
    }
    assert!(bytes == cut.body, "the events stand for other bytes than were pushed");
}

/// The chunk of an encoder's event, which must be one `data:` line of a stderr frame.
fn chunk_of(event: &[u8]) -> Chunk {
    let json = event.strip_prefix(b"data: ").and_then(|rest| rest.strip_suffix(b"\n\n")).expect("not an SSE event");
    assert!(!json.contains(&b'\n') && !json.contains(&b'\r'), "a line end inside an event's data");
    match Frame::from_json(json) {
        Ok(Some(Frame::Stderr(chunk))) => chunk,
        other => panic!("the encoder's event reads as {other:?}"),
    }
}

/// How many bytes of the stream a chunk stands for: its payload and its implied newline.
fn stands_for(chunk: &Chunk) -> u64 {
    let mut bytes = Vec::new();
    chunk.write_bytes(&mut bytes).expect("the encoder's base64 does not decode");
    bytes.len() as u64
}
