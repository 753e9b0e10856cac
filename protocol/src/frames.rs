//! Stream frames (`data: <json>` events of `/exec/stream`) and the encoder that batches pipe bytes into them.
//!
//! A stdout/stderr frame holds one or more complete lines joined by `\n`, the final newline implied, so a client that
//! prints each frame's `data` plus a newline (the contract's client) reproduces line output exactly. A frame with
//! `"nl": false` holds bytes not followed by a newline: a long line cut for size, a prompt that waited, or the
//! unterminated tail at end of output. Bytes that are not valid UTF-8 travel exactly in `b64` beside lossy `data`.

use std::borrow::Cow;

use serde::de::Error as _;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

/// Which pipe a chunk came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
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
        /// Extension (issue 22): for a command that never started, why (as in the `/exec` reply).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        start_error: Option<crate::StartErrorKind>,
    },
    /// Named runs only (issue 12): bytes `offset..offset + bytes` of `stream` are not kept (the middle of a run
    /// beyond the server's per-run cap). The next frame of that stream starts at `offset + bytes`; a client prints
    /// `[… K bytes dropped …]` and a newline in their place.
    Dropped {
        stream: StreamKind,
        offset: u64,
        bytes: u64,
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
        /// Named runs only: stdout's total length, dropped bytes included, so a client can check it has it all.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        stdout_bytes: Option<u64>,
        /// Named runs only: stderr's total length, dropped bytes included.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        stderr_bytes: Option<u64>,
        /// Named runs only: why the run was stopped, when something stopped it (absent when it ended by itself).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        stopped_by: Option<crate::StoppedBy>,
        /// Runs with streamed stdin only (issue 22): the bytes the command took from its stdin pipe (written into
        /// it, less what was still unread when the command ended).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        stdin_consumed: Option<u64>,
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
    /// Named runs only (issue 12): the offset in its stream of the first byte this frame stands for (the implied
    /// newline counts as a byte). Absent in unnamed runs' frames, which stay the contract's bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset: Option<u64>,
}

fn yes() -> bool {
    true
}

#[allow(clippy::trivially_copy_pass_by_ref)] // serde's skip_serializing_if passes a reference
fn is_true(value: &bool) -> bool {
    *value
}

impl Chunk {
    /// Appends the exact bytes this chunk stands for (payload plus the implied newline) to `out`.
    pub fn write_bytes(&self, out: &mut Vec<u8>) -> Result<(), crate::text::InvalidBase64> {
        match &self.b64 {
            Some(b64) => crate::text::append_from_base64(out, b64.as_bytes())?,
            None => out.extend_from_slice(self.data.as_bytes()),
        }
        if self.nl {
            out.push(b'\n');
        }
        Ok(())
    }
}

impl Frame {
    /// This frame as one SSE event: `data: <json>` and a blank line.
    pub fn to_event(&self) -> Vec<u8> {
        let mut out = b"data: ".to_vec();
        // Serializing these types cannot fail: no maps with non-string keys, no failing Serialize impls.
        out.extend(serde_json::to_vec(self).unwrap_or_default());
        out.extend_from_slice(b"\n\n");
        out
    }

    /// Reads one event's data. `Ok(None)` for a frame type this version does not know (a newer server's), which a
    /// client should skip. Faster than `serde_json::from_slice::<Frame>`: one pass, no intermediate buffering of
    /// the tagged enum.
    ///
    /// It reads what serde's derived reader reads (the fuzz target `frames` holds it to that): a field the frame's
    /// type does not have is ignored whatever it holds and however often it comes, as a newer server's extensions
    /// must be. One decision of ours: an event's data is a JSON object. Serde's reader of a tagged enum also takes
    /// an array (the tag, then the variant's fields in their order), a form no server writes and this refuses.
    pub fn from_json(json: &[u8]) -> Result<Option<Frame>, serde_json::Error> {
        let FlatFrame { kind, data, fields } = serde_json::from_slice(json)?;
        let chunk = |data: Slot<DataField<'_>>| -> Result<Chunk, serde_json::Error> {
            Ok(Chunk {
                nl: fields.field("nl")?.unwrap_or(true),
                b64: fields.optional("b64")?,
                offset: fields.optional("offset")?,
                data: data.into_text()?,
            })
        };
        let needs = |name: &'static str, what: &'static str| {
            move || serde_json::Error::custom(format!("a dropped frame needs `{name}`: {what}"))
        };
        Ok(Some(match &*kind {
            "stdout" => Frame::Stdout(chunk(data)?),
            "stderr" => Frame::Stderr(chunk(data)?),
            "error" => Frame::Error { start_error: fields.optional("start_error")?, data: data.into_text()? },
            "dropped" => Frame::Dropped {
                stream: fields.field("stream").ok().flatten().ok_or_else(needs("stream", "stdout or stderr"))?,
                offset: fields.field("offset")?.ok_or_else(needs("offset", "an integer"))?,
                bytes: fields.field("bytes")?.ok_or_else(needs("bytes", "an integer"))?,
            },
            "exit" => match data {
                Slot::Once(DataField::Int(code)) => Frame::Exit {
                    data: i32::try_from(code).map_err(|_| serde_json::Error::custom("exit code out of range"))?,
                    timed_out: fields.field("timed_out")?.unwrap_or(false),
                    signal: fields.optional("signal")?,
                    duration_ms: fields.field("duration_ms")?.unwrap_or(0),
                    stdout_bytes: fields.optional("stdout_bytes")?,
                    stderr_bytes: fields.optional("stderr_bytes")?,
                    stopped_by: fields.optional("stopped_by")?,
                    stdin_consumed: fields.optional("stdin_consumed")?,
                },
                Slot::Repeated => return Err(serde_json::Error::duplicate_field("data")),
                _ => return Err(serde_json::Error::custom("an exit frame needs an integer `data`")),
            },
            _ => return Ok(None),
        }))
    }
}

/// One JSON object read as a frame: its type, its `data`, and every other field any frame may have, kept raw until
/// the type says whether it has that field (what [`Frame::from_json`] reads). A field read raw costs a scan of its
/// bytes, which for these (flags, numbers, short names) is next to nothing; `data`, the one that may be long, is
/// read once, as what it is.
struct FlatFrame<'a> {
    kind: Cow<'a, str>,
    data: Slot<DataField<'a>>,
    fields: RawFields<'a>,
}

/// Every field of one frame's object but `type` and `data`, as it came (see [`FlatFrame`]).
struct RawFields<'a>([Slot<&'a RawValue>; RAW_FIELDS.len()]);

/// The fields [`RawFields`] keeps: every field of every frame type but `type` and `data`.
const RAW_FIELDS: [&str; 13] = [
    "nl",
    "b64",
    "timed_out",
    "signal",
    "duration_ms",
    "offset",
    "stream",
    "bytes",
    "stdout_bytes",
    "stderr_bytes",
    "stopped_by",
    "start_error",
    "stdin_consumed",
];

/// A field of one JSON object: not there, there once, or there more than once (an error only in a frame type that
/// has the field, as serde's derived reader has it).
#[derive(Clone, Copy)]
enum Slot<T> {
    Absent,
    Once(T),
    Repeated,
}

impl<T> Slot<T> {
    fn fill(&mut self, value: T) {
        *self = match self {
            Slot::Absent => Slot::Once(value),
            Slot::Once(_) | Slot::Repeated => Slot::Repeated,
        };
    }
}

impl<'a> RawFields<'a> {
    /// Field `name` (one of [`RAW_FIELDS`]) read as a `T`, or `None` when it is not there.
    fn field<T: Deserialize<'a>>(&self, name: &'static str) -> Result<Option<T>, serde_json::Error> {
        let index = RAW_FIELDS.iter().position(|field| *field == name).expect("one of RAW_FIELDS");
        match self.0[index] {
            Slot::Absent => Ok(None),
            Slot::Once(raw) => serde_json::from_str(raw.get())
                .map(Some)
                .map_err(|error| serde_json::Error::custom(format_args!("`{name}`: {error}"))),
            Slot::Repeated => Err(serde_json::Error::duplicate_field(name)),
        }
    }

    /// An optional field, whose `null` is `None` too (as serde reads an `Option`).
    fn optional<T: Deserialize<'a>>(&self, name: &'static str) -> Result<Option<T>, serde_json::Error> {
        Ok(self.field::<Option<T>>(name)?.flatten())
    }
}

impl Slot<DataField<'_>> {
    /// `data` of an output or error frame: text (empty when absent), moved out, not copied (it may be long).
    fn into_text(self) -> Result<String, serde_json::Error> {
        match self {
            Slot::Absent => Ok(String::new()),
            Slot::Once(DataField::Text(text)) => Ok(text.into_owned()),
            Slot::Once(_) => Err(serde_json::Error::custom("data must be a string in this frame")),
            Slot::Repeated => Err(serde_json::Error::duplicate_field("data")),
        }
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for FlatFrame<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> serde::de::Visitor<'de> for Visitor<'a> {
            type Value = FlatFrame<'a>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a frame: a JSON object with a `type`")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let (mut kind, mut data) = (None, Slot::Absent);
                let mut raw = [Slot::Absent; RAW_FIELDS.len()];
                while let Some(key) = map.next_key::<Key>()? {
                    match key {
                        Key::Type if kind.is_some() => return Err(A::Error::duplicate_field("type")),
                        Key::Type => kind = Some(map.next_value::<Tag<'a>>()?.0),
                        Key::Data => data.fill(map.next_value()?),
                        Key::Raw(index) => raw[index].fill(map.next_value()?),
                        Key::Other => {
                            map.next_value::<serde::de::IgnoredAny>()?;
                        }
                    }
                }
                let kind = kind.ok_or_else(|| A::Error::missing_field("type"))?;
                Ok(FlatFrame { kind, data, fields: RawFields(raw) })
            }
        }
        deserializer.deserialize_map(Visitor(std::marker::PhantomData))
    }
}

/// A frame's `type`, borrowed from the event when it has no escapes.
#[derive(Deserialize)]
struct Tag<'a>(#[serde(borrow)] Cow<'a, str>);

/// A key of a frame's object, named without allocating.
enum Key {
    Type,
    Data,
    /// Index in [`RAW_FIELDS`].
    Raw(usize),
    Other,
}

impl<'de> Deserialize<'de> for Key {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = Key;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a field name")
            }
            fn visit_str<E>(self, name: &str) -> Result<Key, E> {
                Ok(match name {
                    "type" => Key::Type,
                    "data" => Key::Data,
                    _ => RAW_FIELDS.iter().position(|field| *field == name).map_or(Key::Other, Key::Raw),
                })
            }
        }
        deserializer.deserialize_identifier(Visitor)
    }
}

/// `data` is text in output and error frames and an integer in exit frames; anything else is kept as `Other`, which
/// only a frame type without `data` (dropped) accepts.
enum DataField<'a> {
    Text(Cow<'a, str>),
    Int(i64),
    Other,
}

impl<'de: 'a, 'a> Deserialize<'de> for DataField<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> serde::de::Visitor<'de> for Visitor<'a> {
            type Value = DataField<'a>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_borrowed_str<E>(self, text: &'de str) -> Result<Self::Value, E> {
                Ok(DataField::Text(Cow::Borrowed(text)))
            }
            fn visit_str<E>(self, text: &str) -> Result<Self::Value, E> {
                Ok(DataField::Text(Cow::Owned(text.to_owned())))
            }
            fn visit_string<E>(self, text: String) -> Result<Self::Value, E> {
                Ok(DataField::Text(Cow::Owned(text)))
            }
            fn visit_i64<E>(self, value: i64) -> Result<Self::Value, E> {
                Ok(DataField::Int(value))
            }
            fn visit_u64<E>(self, value: u64) -> Result<Self::Value, E> {
                // Out of i64's range is out of an exit code's too: refused where a frame needs an integer.
                Ok(i64::try_from(value).map_or(DataField::Other, DataField::Int))
            }
            fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
                Ok(DataField::Other)
            }
            fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
                Ok(DataField::Other)
            }
            fn visit_unit<E>(self) -> Result<Self::Value, E> {
                Ok(DataField::Other)
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
                Ok(DataField::Other)
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                while map.next_entry::<serde::de::IgnoredAny, serde::de::IgnoredAny>()?.is_some() {}
                Ok(DataField::Other)
            }
        }
        deserializer.deserialize_any(Visitor(std::marker::PhantomData))
    }
}

impl StreamKind {
    fn name(self) -> &'static [u8] {
        match self {
            StreamKind::Stdout => b"stdout",
            StreamKind::Stderr => b"stderr",
        }
    }

    /// The stream's name on the wire: `stdout` or `stderr`.
    pub fn as_str(self) -> &'static str {
        match self {
            StreamKind::Stdout => "stdout",
            StreamKind::Stderr => "stderr",
        }
    }
}

/// One stdout/stderr frame as an SSE event, written by hand (against serde_json: `bench/ab-json.sh`, which is 88% slower
/// on text): the payload is copied once, escaped (or base64-encoded) on the way. The same JSON as serde's for
/// [`Frame::Stdout`]/[`Frame::Stderr`] (field order included). Without `lossy_twin`, bytes that are not valid UTF-8
/// get an empty `data` (see [`crate::ExecRequest::b64_only`]); `offset` is written when the frame carries one.
fn chunk_event(kind: StreamKind, payload: &[u8], nl: bool, lossy_twin: bool, offset: Option<u64>) -> Vec<u8> {
    let exact = std::str::from_utf8(payload);
    let capacity = match exact {
        Ok(_) => payload.len() + 64,
        Err(_) => crate::reply_text::base64_len(payload.len()) + if lossy_twin { payload.len() * 2 } else { 0 } + 64,
    };
    let mut out = Vec::with_capacity(capacity);
    out.extend_from_slice(b"data: {\"type\":\"");
    out.extend_from_slice(kind.name());
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

    fn encode_all(pieces: &[&[u8]], max: usize) -> Vec<Frame> {
        let mut encoder = FrameEncoder::new(StreamKind::Stdout, max);
        let mut events = Vec::new();
        for piece in pieces {
            encoder.push(piece, &mut events);
        }
        encoder.flush(&mut events);
        events.iter().map(|event| parse_event(event)).collect()
    }

    /// An event's frame, read both ways (the fast reader and serde's derived one must agree).
    fn parse_event(event: &[u8]) -> Frame {
        let json = event.strip_prefix(b"data: ").unwrap().strip_suffix(b"\n\n").unwrap();
        assert!(!json.contains(&b'\n') && !json.contains(&b'\r'), "an event must be one line");
        let derived: Frame = serde_json::from_slice(json).unwrap();
        let fast = Frame::from_json(json).unwrap().unwrap();
        assert_eq!(derived, fast);
        derived
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
        assert_eq!(frames, [Frame::Stdout(Chunk { data: "a\nb".into(), nl: true, b64: None, offset: None })]);
        assert_eq!(serde_json::to_string(&frames[0]).unwrap(), r#"{"type":"stdout","data":"a\nb"}"#);
        let mut events = Vec::new();
        FrameEncoder::new(StreamKind::Stdout, 1024).push(b"a\nb\n", &mut events);
        assert_eq!(events, [b"data: {\"type\":\"stdout\",\"data\":\"a\\nb\"}\n\n".to_vec()]);
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
        assert!(frames.iter().any(|f| matches!(f, Frame::Stdout(c) if c.b64.is_some())));
    }

    /// A client that reads `b64` gets the same bytes without the lossy twin; text frames are unchanged.
    #[test]
    fn b64_only_frames_leave_out_the_lossy_twin_and_keep_the_bytes() {
        let bytes: Vec<u8> = (0..=255u8).cycle().take(5000).chain(*b"\nplain line\n").collect();
        let pieces: Vec<&[u8]> = bytes.chunks(333).collect();
        let encode = |b64_only: bool| {
            let mut encoder = FrameEncoder::new(StreamKind::Stdout, 1000).b64_only(b64_only);
            let mut events = Vec::new();
            for piece in &pieces {
                encoder.push(piece, &mut events);
            }
            encoder.flush(&mut events);
            events
        };
        let (twin, only) = (encode(false), encode(true));
        assert_eq!(twin.len(), only.len());
        let frames: Vec<Frame> = only.iter().map(|event| parse_event(event)).collect();
        assert_eq!(rebuild(&frames), bytes);
        for (with, without) in twin.iter().zip(&only) {
            match parse_event(without) {
                Frame::Stdout(Chunk { data, b64: Some(_), .. }) => {
                    assert_eq!(data, "");
                    assert!(without.len() < with.len());
                }
                _ => assert_eq!(with, without, "a frame of text is the same either way"),
            }
        }
        assert!(frames.iter().any(|f| matches!(f, Frame::Stdout(c) if c.b64.is_some())));
    }

    #[test]
    fn contract_frames_without_nl_mean_one_line() {
        let frame: Frame = serde_json::from_str(r#"{"type":"stdout","data":"hi"}"#).unwrap();
        assert_eq!(rebuild(&[frame]), b"hi\n");
        let exit: Frame = serde_json::from_str(r#"{"type":"exit","data":3}"#).unwrap();
        assert_eq!(
            exit,
            Frame::Exit {
                data: 3,
                timed_out: false,
                signal: None,
                duration_ms: 0,
                stdout_bytes: None,
                stderr_bytes: None,
                stopped_by: None,
                stdin_consumed: None,
            }
        );
        assert_eq!(Frame::from_json(br#"{"type":"exit","data":3}"#).unwrap(), Some(exit));
        assert_eq!(Frame::from_json(br#"{"type":"progress","data":50}"#).unwrap(), None);
        assert!(Frame::from_json(br#"{"type":"exit"}"#).is_err());
        let error = Frame::Error { data: "timed out".into(), start_error: None };
        assert_eq!(error.to_event(), b"data: {\"type\":\"error\",\"data\":\"timed out\"}\n\n");
        assert_eq!(parse_event(&error.to_event()), error);
    }

    #[test]
    fn frames_of_a_named_run_carry_offsets_that_count_every_byte() {
        let bytes: Vec<u8> = b"ab\ncd\xff\nlong-line-without-end".to_vec();
        let mut encoder = FrameEncoder::new(StreamKind::Stderr, 8).with_offsets(100);
        let mut events = Vec::new();
        encoder.push(&bytes[..4], &mut events);
        encoder.push(&bytes[4..], &mut events);
        assert_eq!(encoder.next_offset(), Some(100 + bytes.len() as u64));
        encoder.flush(&mut events);
        let frames: Vec<Frame> = events.iter().map(|event| parse_event(event)).collect();
        let mut expected = 100;
        let mut rebuilt = Vec::new();
        for frame in &frames {
            let Frame::Stderr(chunk) = frame else { panic!("{frame:?}") };
            assert_eq!(chunk.offset, Some(expected), "{frames:?}");
            let before = rebuilt.len();
            chunk.write_bytes(&mut rebuilt).unwrap();
            expected += (rebuilt.len() - before) as u64;
        }
        assert_eq!(rebuilt, bytes);
        assert_eq!(events[0], b"data: {\"type\":\"stderr\",\"data\":\"ab\",\"offset\":100}\n\n".to_vec());
        encoder.jump_to(500);
        encoder.push(b"x\n", &mut events);
        assert!(matches!(parse_event(events.last().unwrap()), Frame::Stderr(Chunk { offset: Some(500), .. })));
    }

    #[test]
    fn frames_without_offsets_keep_their_bytes() {
        let mut events = Vec::new();
        FrameEncoder::new(StreamKind::Stdout, 4).push(b"\xffabcdef\n", &mut events);
        assert!(events.iter().all(|event| !event.windows(8).any(|w| w == b"\"offset\"")), "{events:?}");
        let exit = Frame::Exit {
            data: 0,
            timed_out: false,
            signal: None,
            duration_ms: 5,
            stdout_bytes: None,
            stderr_bytes: None,
            stopped_by: None,
            stdin_consumed: None,
        };
        assert_eq!(exit.to_event(), b"data: {\"type\":\"exit\",\"data\":0,\"timed_out\":false,\"duration_ms\":5}\n\n");
    }

    #[test]
    fn dropped_frames_and_exit_totals_round_trip() {
        let dropped = Frame::Dropped { stream: StreamKind::Stdout, offset: 10, bytes: 20 };
        assert_eq!(
            dropped.to_event(),
            b"data: {\"type\":\"dropped\",\"stream\":\"stdout\",\"offset\":10,\"bytes\":20}\n\n"
        );
        assert_eq!(parse_event(&dropped.to_event()), dropped);
        let exit = Frame::Exit {
            data: 1,
            timed_out: false,
            signal: None,
            duration_ms: 5,
            stdout_bytes: Some(7),
            stderr_bytes: Some(0),
            stopped_by: Some(crate::StoppedBy::ReattachWindow),
            stdin_consumed: None,
        };
        assert!(exit.to_event().ends_with(b",\"stopped_by\":\"reattach_window\"}\n\n"));
        assert_eq!(parse_event(&exit.to_event()), exit);
        let Frame::Exit { data, timed_out, signal, duration_ms, stdout_bytes, stderr_bytes, stopped_by, .. } = exit
        else {
            unreachable!()
        };
        let consumed = Frame::Exit {
            data,
            timed_out,
            signal,
            duration_ms,
            stdout_bytes,
            stderr_bytes,
            stopped_by,
            stdin_consumed: Some(12),
        };
        assert!(consumed.to_event().ends_with(b",\"stopped_by\":\"reattach_window\",\"stdin_consumed\":12}\n\n"));
        assert_eq!(parse_event(&consumed.to_event()), consumed);
        let newer = Frame::from_json(br#"{"type":"exit","data":1,"stopped_by":"oom"}"#).unwrap();
        assert!(matches!(newer, Some(Frame::Exit { stopped_by: Some(crate::StoppedBy::Other), .. })), "{newer:?}");
        assert!(Frame::from_json(br#"{"type":"dropped","stream":"stdin","offset":1,"bytes":2}"#).is_err());
        assert!(Frame::from_json(br#"{"type":"dropped","stream":"stdout","bytes":2}"#).is_err());
    }

    /// A start error's kind rides in the error frame; a kind this version does not know reads as `other`.
    #[test]
    fn error_frames_carry_the_start_error_kind() {
        let frame = Frame::Error {
            data: "failed to start command: x: not found".into(),
            start_error: Some(crate::StartErrorKind::NotFound),
        };
        assert_eq!(
            frame.to_event(),
            b"data: {\"type\":\"error\",\"data\":\"failed to start command: x: not found\",\"start_error\":\"not_found\"}\n\n"
        );
        assert_eq!(parse_event(&frame.to_event()), frame);
        let newer = Frame::from_json(br#"{"type":"error","data":"x","start_error":"quota"}"#).unwrap();
        assert_eq!(newer, Some(Frame::Error { data: "x".into(), start_error: Some(crate::StartErrorKind::Other) }));
    }

    /// A field the frame's type does not have is ignored whatever it holds and however often it comes, as serde's
    /// derived reader ignores it (the fuzz target `frames` found an error frame with a string `bytes` refused);
    /// a field the type has is still read strictly.
    #[test]
    fn fields_of_other_frame_types_are_ignored_as_serde_ignores_them() {
        for json in [
            &br#"{"type":"error","data":"x","bytes":"stdout","nl":[1],"timed_out":"no"}"#[..],
            br#"{"type":"stdout","data":"hi","timed_out":1,"timed_out":2,"stream":{}}"#,
            br#"{"type":"dropped","stream":"stdout","offset":1,"bytes":2,"data":{"a":[1,null]},"data":true}"#,
            br#"{"type":"exit","data":0,"offset":"far","b64":7,"start_error":5}"#,
            br#"{"d\u0061ta":"hi","type":"std\u006fut","newer":{"deep":[[]]}}"#,
        ] {
            let derived: Frame = serde_json::from_slice(json).unwrap();
            assert_eq!(Frame::from_json(json).unwrap(), Some(derived), "{}", String::from_utf8_lossy(json));
        }
        for (json, says) in [
            (&br#"{"type":"stdout","data":"a","data":"b"}"#[..], "duplicate field `data`"),
            (br#"{"type":"stdout","data":"a","nl":"no"}"#, "`nl`"),
            (br#"{"type":"stdout","data":null}"#, "data must be a string"),
            (br#"{"type":"exit","data":0,"signal":"TERM"}"#, "`signal`"),
            (br#"{"type":"exit","data":0,"timed_out":true,"timed_out":false}"#, "duplicate field `timed_out`"),
            (br#"{"type":"exit","data":1.5}"#, "integer `data`"),
            (br#"{"type":"dropped","stream":"stdout","bytes":2}"#, "needs `offset`"),
            (br#"{"data":"hi"}"#, "missing field `type`"),
            (br#"{"type":"stdout","type":"stdout"}"#, "duplicate field `type`"),
            (br#"["stdout","hi"]"#, "a JSON object"),
        ] {
            let error = Frame::from_json(json).unwrap_err().to_string();
            assert!(error.contains(says), "{}: {error}", String::from_utf8_lossy(json));
        }
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
