//! An `/exec` reply read as it arrives, without copying its output into Strings. Kept over
//! `serde_json::from_slice::<ExecReply>` on the A/B of `bench/ab-json.sh` (BENCHMARKS.md): serde_json read a reply
//! of 64 MiB of text 93% slower, of control-heavy text 11% slower.
//!
//! Read into [`protocol::ExecReply`] after the whole body, a reply of 200 MiB of text was parsed into serde_json's
//! scratch buffer, copied into a String, and copied again before it was written: most of the client's time in a
//! large blocking call, and none of it overlapped with the transfer. [`ReplyReader`] decodes stdout's text while
//! the body arrives when the reply starts as exec-server's (and serde's) layout does, `{"exit_code":N,"output":"`;
//! any other contract reply (fields in another order, spaces) is kept and read whole at the end, its output fields
//! borrowed from the body (serde_json's `RawValue`) and decoded from there.

use std::borrow::Cow;
use std::io::Write;

use protocol::ExecReply;
use serde_json::value::RawValue;

use crate::sidecar::wire::json_string::{unescape_into, StringDecoder};

/// How far into a body its layout is decided: `{"exit_code":-2147483648,"output":"` is 37 bytes.
const LAYOUT_WITHIN: usize = 64;

/// A reply's fields: protocol's [`ExecReply`] (its field list, written once), the four output fields borrowed from
/// the body as raw JSON (`Option<&RawValue>`: a `Cow<str>` would be copied), read through `Deref`; and how stdout
/// was decoded while the body arrived. Write the output with [`ReplyView::write_stdout`] and
/// [`ReplyView::write_stderr`], which decode the raw fields: read directly, `output` is absent when stdout's text
/// was decoded on the way ([`ReplyReader`]).
#[derive(Debug)]
pub struct ReplyView<'a> {
    fields: ExecReply<Option<&'a RawValue>>,
    /// stdout's text, decoded while the body arrived (then `output` is absent).
    decoded_output: Option<&'a [u8]>,
    /// Part of that text was already written out ([`ReplyReader::write_output`]).
    output_written: bool,
    /// `output_b64` was decoded while it arrived, into `decoded_output` (its field here is then empty).
    b64_decoded: bool,
}

/// The view is the reply with its decode state: its fields read as the reply's (`view.exit_code`).
impl<'a> std::ops::Deref for ReplyView<'a> {
    type Target = ExecReply<Option<&'a RawValue>>;

    fn deref(&self) -> &Self::Target {
        &self.fields
    }
}

/// Why a reply's output could not be written.
#[derive(Debug)]
pub enum ReplyWriteError {
    /// A text field that is not a JSON string, or base64 that does not decode.
    Invalid,
    /// Writing failed (a closed stdout).
    Write(std::io::Error),
}

impl ReplyView<'_> {
    /// Writes the exact stdout bytes to `out` (the base64 twin wins when present).
    pub fn write_stdout(&self, out: &mut impl Write) -> Result<(), ReplyWriteError> {
        let output_b64 = self.fields.output_b64.flatten();
        match (output_b64, self.decoded_output) {
            (_, Some(bytes)) if self.b64_decoded => out.write_all(bytes).map_err(ReplyWriteError::Write),
            (None, Some(text)) => out.write_all(text).map_err(ReplyWriteError::Write),
            // Text went out as stdout, and it was lossy after all: the server broke its word (B64_ONLY_HEADER).
            (Some(_), _) if self.output_written => Err(ReplyWriteError::Invalid),
            _ => write_exact(self.fields.output, output_b64, out),
        }
    }

    /// Writes the exact stderr bytes to `out`.
    pub fn write_stderr(&self, out: &mut impl Write) -> Result<(), ReplyWriteError> {
        write_exact(self.fields.stderr, self.fields.stderr_b64.flatten(), out)
    }
}

fn write_exact(text: Option<&RawValue>, b64: Option<&RawValue>, out: &mut impl Write) -> Result<(), ReplyWriteError> {
    let bytes = match (b64, text) {
        (Some(b64), _) => {
            let mut bytes = Vec::new();
            protocol::text::append_from_base64(&mut bytes, &unescaped(b64)?).map_err(|_| ReplyWriteError::Invalid)?;
            bytes
        }
        (None, Some(text)) => unescaped(text)?.into_owned(),
        // Absent (or `null`): no output.
        (None, None) => return Ok(()),
    };
    out.write_all(&bytes).map_err(ReplyWriteError::Write)
}

/// The text of a JSON string, borrowed when it holds no escape (base64 never needs one, though `\/` is allowed).
fn unescaped(raw: &RawValue) -> Result<Cow<'_, [u8]>, ReplyWriteError> {
    let literal = raw.get().as_bytes();
    match literal.strip_prefix(b"\"").and_then(|inner| inner.strip_suffix(b"\"")) {
        Some(inner) if !inner.contains(&b'\\') => Ok(Cow::Borrowed(inner)),
        _ => {
            let mut bytes = Vec::with_capacity(literal.len());
            unescape_into(literal, &mut bytes).map_err(|_| ReplyWriteError::Invalid)?;
            Ok(Cow::Owned(bytes))
        }
    }
}

/// The key of stdout's base64 as exec-server writes it. It cannot occur inside a string (a quote there is always
/// escaped, and this one follows `4`), so found in a flat reply it is the key.
const OUTPUT_B64_KEY: &[u8] = b"\"output_b64\":\"";

/// Reads a reply body piece by piece; [`ReplyReader::finish`] gives what [`ReadReply::view`] reads.
#[derive(Debug, Default)]
pub struct ReplyReader {
    /// The body so far, less stdout's string while it is decoded: `{"exit_code":N` then what follows the string.
    body: Vec<u8>,
    /// Where stdout's string was cut out of `body`, once the layout is known.
    layout: Layout,
    decoder: StringDecoder,
    /// stdout's bytes decoded so far (its text, or its base64's bytes), not yet written out.
    output: Vec<u8>,
    output_written: bool,
    /// The server sent [`protocol::B64_ONLY_HEADER`]: stdout's base64 is decoded as it arrives too.
    b64_only: bool,
    /// stdout's text was not empty (then a base64 twin is a broken promise).
    had_text: bool,
    /// `body` up to here holds no [`OUTPUT_B64_KEY`].
    searched: usize,
    /// The last 0-3 characters of stdout's base64, waiting for the rest of their group of four.
    b64_carry: Vec<u8>,
    /// A group with `=` was decoded: stdout's base64 ends there, and a group after it is invalid.
    b64_padded: bool,
    b64_decoded: bool,
    /// stdout's bytes written out so far by [`ReplyReader::write_output`].
    written: u64,
    /// The most of stdout [`ReplyReader::write_output`] writes (the rest is held for the end): see
    /// [`protocol::OUTPUT_HEAD_HEADER`].
    write_limit: Option<u64>,
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum Layout {
    /// Not known yet: `body` holds the start.
    #[default]
    Undecided,
    /// `{"exit_code":N,"output":"`: stdout's text is being decoded into `output`.
    InOutput,
    /// stdout's string has ended; the rest goes to `body`.
    AfterOutput,
    /// `"output_b64":"` (after stdout's empty text, from a server that sent [`protocol::B64_ONLY_HEADER`]): its
    /// base64 is being decoded into `output`.
    InOutputB64,
    /// Another layout: `body` is the whole body.
    Whole,
}

/// A reply that [`ReplyReader`] has read whole.
#[derive(Debug)]
pub struct ReadReply {
    body: Vec<u8>,
    output: Option<Vec<u8>>,
    output_written: bool,
    b64_decoded: bool,
}

impl ReplyReader {
    /// A reader for a reply with [`protocol::B64_ONLY_HEADER`] (`b64_only`), whose stdout base64 is decoded as it
    /// arrives too, or for any other reply.
    pub fn new(b64_only: bool) -> Self {
        ReplyReader { b64_only, ..ReplyReader::default() }
    }

    /// A reader that writes out at most the first `limit` bytes of stdout as they arrive and holds the rest for
    /// the end: the reply's stdout was cut there ([`protocol::OUTPUT_HEAD_HEADER`]), and what was written must stay
    /// the command's own first bytes, so that a resume after a lost reply can count them as stream offsets.
    pub fn write_at_most(mut self, limit: u64) -> Self {
        self.write_limit = Some(limit);
        self
    }

    /// stdout's bytes written out so far: the command's first bytes (see [`ReplyReader::write_at_most`]).
    pub fn written(&self) -> u64 {
        self.written
    }

    /// Bytes held so far: the bound a caller checks (stdout's decoded text counts, not its escapes).
    pub fn held(&self) -> usize {
        self.body.len() + self.output.len()
    }

    /// Feeds the next piece of the body. A string that is not valid JSON is an error now; anything else wrong is
    /// found by [`ReadReply::view`].
    pub fn feed(&mut self, mut piece: &[u8]) -> Result<(), serde_json::Error> {
        while !piece.is_empty() {
            match self.layout {
                Layout::Undecided => {
                    let take = piece.len().min(LAYOUT_WITHIN - self.body.len());
                    self.body.extend_from_slice(&piece[..take]);
                    piece = &piece[take..];
                    match output_start(&self.body) {
                        Some(start) => {
                            // `body` keeps `{"exit_code":N`; the bytes after the quote are stdout's text.
                            let text = self.body.split_off(start);
                            self.body.truncate(start - b",\"output\":\"".len());
                            self.layout = Layout::InOutput;
                            let used = self.decode(&text)?;
                            // What follows stdout's string goes the way of every later byte.
                            self.feed(&text[used..])?;
                        }
                        None if self.body.len() >= LAYOUT_WITHIN || !could_be_ours(&self.body) => {
                            self.layout = Layout::Whole;
                        }
                        None => {}
                    }
                }
                Layout::InOutput => {
                    let used = self.decode(piece)?;
                    piece = &piece[used..];
                }
                Layout::AfterOutput if self.b64_only && !self.b64_decoded => {
                    self.body.extend_from_slice(piece);
                    piece = &[];
                    let from = self.searched.saturating_sub(OUTPUT_B64_KEY.len());
                    match memchr::memmem::find(&self.body[from..], OUTPUT_B64_KEY) {
                        None => self.searched = self.body.len(),
                        Some(at) => {
                            if self.had_text {
                                use serde::de::Error as _;
                                return Err(serde_json::Error::custom(
                                    "lossy `output` beside `output_b64` though the server sent x-b64-only",
                                ));
                            }
                            let b64 = self.body.split_off(from + at + OUTPUT_B64_KEY.len());
                            self.layout = Layout::InOutputB64;
                            self.decode_b64(&b64)?;
                        }
                    }
                }
                Layout::InOutputB64 => {
                    self.decode_b64(piece)?;
                    piece = &[];
                }
                Layout::AfterOutput | Layout::Whole => {
                    self.body.extend_from_slice(piece);
                    piece = &[];
                }
            }
        }
        Ok(())
    }

    /// Decodes stdout's base64 from `piece` into `output`, in whole groups of four; at its closing quote, `body`
    /// gets an empty `output_b64` and what follows.
    fn decode_b64(&mut self, piece: &[u8]) -> Result<(), serde_json::Error> {
        use serde::de::Error as _;
        let invalid = || serde_json::Error::custom("`output_b64` is not valid base64");
        let end = memchr::memchr(b'"', piece);
        let mut data = &piece[..end.unwrap_or(piece.len())];
        if data.contains(&b'\\') {
            return Err(invalid());
        }
        if !self.b64_carry.is_empty() {
            let take = (4 - self.b64_carry.len()).min(data.len());
            self.b64_carry.extend_from_slice(&data[..take]);
            data = &data[take..];
            if self.b64_carry.len() == 4 {
                protocol::text::append_from_base64(&mut self.output, &self.b64_carry).map_err(|_| invalid())?;
                self.b64_padded = self.b64_carry[3] == b'=';
                self.b64_carry.clear();
            }
        }
        let whole = data.len() / 4 * 4;
        if whole > 0 {
            // Decoded a piece at a time, `AA==` then `AAAA` would each pass: padding must end the whole base64.
            if self.b64_padded {
                return Err(invalid());
            }
            protocol::text::append_from_base64(&mut self.output, &data[..whole]).map_err(|_| invalid())?;
            self.b64_padded = data[whole - 1] == b'=';
        }
        self.b64_carry.extend_from_slice(&data[whole..]);
        if self.b64_padded && !self.b64_carry.is_empty() {
            return Err(invalid());
        }
        if let Some(end) = end {
            if !self.b64_carry.is_empty() {
                return Err(invalid());
            }
            self.body.push(b'"');
            self.body.extend_from_slice(&piece[end + 1..]);
            self.layout = Layout::AfterOutput;
            self.b64_decoded = true;
        }
        Ok(())
    }

    /// Decodes stdout's text from `piece`; how much of it was the string's, closing quote included.
    fn decode(&mut self, piece: &[u8]) -> Result<usize, serde_json::Error> {
        use serde::de::Error as _;
        let end = self
            .decoder
            .feed(piece, &mut self.output)
            .map_err(|_| serde_json::Error::custom("`output` is not a valid JSON string"))?;
        match end {
            None => Ok(piece.len()),
            Some(quote) => {
                self.layout = Layout::AfterOutput;
                self.had_text = self.output_written || !self.output.is_empty();
                self.searched = self.body.len();
                Ok(quote + 1)
            }
        }
    }

    /// Writes stdout's text decoded so far to `out` and lets go of it: for a reply whose text is known not to be
    /// lossy (the server sent [`protocol::B64_ONLY_HEADER`]), so it need not be held until the end.
    pub fn write_output(&mut self, out: &mut impl Write) -> std::io::Result<()> {
        let room = self.write_limit.map_or(u64::MAX, |limit| limit.saturating_sub(self.written));
        let take = self.output.len().min(usize::try_from(room).unwrap_or(usize::MAX));
        if take > 0 {
            out.write_all(&self.output[..take])?;
            self.output.drain(..take);
            self.written += take as u64;
            self.output_written = true;
        }
        Ok(())
    }

    /// The body is complete.
    pub fn finish(self) -> ReadReply {
        let (output_written, b64_decoded) = (self.output_written, self.b64_decoded);
        let (body, output) = match self.layout {
            Layout::AfterOutput => (self.body, Some(self.output)),
            // Still undecided (a short body) or another layout: read whole.
            Layout::Undecided | Layout::Whole => (self.body, None),
            // Cut inside stdout's string: not JSON, and reading it says so.
            Layout::InOutput | Layout::InOutputB64 => (b"{\"output\":\"".to_vec(), None),
        };
        ReadReply { body, output, output_written, b64_decoded }
    }
}

/// Where stdout's text starts when `body` starts `{"exit_code":N,"output":"`.
fn output_start(body: &[u8]) -> Option<usize> {
    let rest = body.strip_prefix(b"{\"exit_code\":")?;
    let digits = rest.strip_prefix(b"-").unwrap_or(rest);
    let count = digits.iter().take_while(|b| b.is_ascii_digit()).count();
    let after = digits[count..].strip_prefix(b",\"output\":\"")?;
    (count > 0).then(|| body.len() - after.len())
}

/// Whether `body` (shorter than a decided layout) can still become `{"exit_code":N,"output":"`.
fn could_be_ours(body: &[u8]) -> bool {
    const HEAD: &[u8] = b"{\"exit_code\":";
    let Some(rest) = body.strip_prefix(HEAD) else { return HEAD.starts_with(body) };
    let digits = rest.strip_prefix(b"-").unwrap_or(rest);
    let count = digits.iter().take_while(|b| b.is_ascii_digit()).count();
    b",\"output\":\"".starts_with(&digits[count..])
}

impl ReadReply {
    /// The reply's fields.
    pub fn view(&self) -> Result<ReplyView<'_>, serde_json::Error> {
        use serde::de::Error as _;
        let fields: ExecReply<Option<&RawValue>> = serde_json::from_slice(&self.body)?;
        if self.output.is_some() && fields.output.is_some() {
            return Err(serde_json::Error::custom("duplicate field `output`"));
        }
        Ok(ReplyView {
            fields,
            decoded_output: self.output.as_deref(),
            output_written: self.output_written,
            b64_decoded: self.b64_decoded,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use protocol::ExecReply;

    fn read(json: &[u8], piece: usize) -> ReadReply {
        read_as(false, json, piece)
    }

    fn read_as(b64_only: bool, json: &[u8], piece: usize) -> ReadReply {
        let mut reader = ReplyReader::new(b64_only);
        for chunk in json.chunks(piece.max(1)) {
            reader.feed(chunk).unwrap();
        }
        reader.finish()
    }

    fn both(reply: &ExecReply, json: &[u8]) {
        for (piece, b64_only) in [1, 2, 7, 64, usize::MAX].into_iter().flat_map(|p| [(p, false), (p, true)]) {
            if b64_only && reply.output_b64.is_some() && !reply.output.is_empty() {
                continue; // not what a server that sent the header sends (see text_written_as_it_arrives…)
            }
            let read = read_as(b64_only, json, piece.min(json.len()));
            let view = read.view().unwrap();
            let (mut stdout, mut stderr) = (Vec::new(), Vec::new());
            view.write_stdout(&mut stdout).unwrap();
            view.write_stderr(&mut stderr).unwrap();
            assert_eq!(stdout, *reply.stdout_bytes().unwrap());
            assert_eq!(stderr, *reply.stderr_bytes().unwrap());
            assert_eq!(
                (view.exit_code, view.error.as_ref(), view.timed_out, view.signal, view.duration_ms),
                (reply.exit_code, reply.error.as_ref(), reply.timed_out, reply.signal, reply.duration_ms)
            );
            assert_eq!(
                (view.output_truncated, view.stderr_truncated),
                (reply.output_truncated, reply.stderr_truncated)
            );
        }
    }

    #[test]
    fn reads_what_exec_reply_reads_however_it_arrives() {
        let binary: Vec<u8> = (0..=255u8).cycle().take(1000).collect();
        let (lossy, b64) = protocol::text::encode(&binary);
        let replies = [
            ExecReply::default(),
            ExecReply {
                exit_code: -3,
                output: "line \"one\"\n\ttwo\u{1}\n😀".into(),
                stderr: lossy.clone(),
                stderr_b64: b64.clone(),
                error: Some("command timed out after 1s".into()),
                timed_out: true,
                signal: Some(9),
                duration_ms: 5,
                output_truncated: true,
                ..Default::default()
            },
            ExecReply { exit_code: 0, output: lossy, output_b64: b64.clone(), ..Default::default() },
            // What a server sends for b64_only: empty text, stdout in base64 (after stderr's, which has the key's
            // words in it).
            ExecReply {
                exit_code: 0,
                stderr: "\"output_b64\":\"x".into(),
                stderr_b64: Some("AAAA".into()),
                output_b64: protocol::text::encode(&binary).1,
                ..Default::default()
            },
        ];
        for reply in &replies {
            both(reply, &reply.to_json());
        }
        // Another server's layout: other order, spaces, escapes serde_json does not write, fields missing.
        let others: [&[u8]; 4] = [
            br#"{ "stderr" : "\u00e9\/", "output_truncated": false, "exit_code" : 0, "output": "a\ud83d\ude00" }"#,
            br#"{"exit_code":-1}"#,
            br#"{"exit_code":1, "output":"x"}"#,
            br#"{"exit_code":7,"output":"a\"b","output":"again"}"#,
        ];
        for json in &others[..3] {
            both(&serde_json::from_slice(json).unwrap(), json);
        }
        // A field twice is refused however the body is read.
        assert!(serde_json::from_slice::<ExecReply>(others[3]).is_err());
        assert!(read(others[3], 5).view().is_err());
    }

    /// Text written out as it arrives is all of it; lossy text written out that way (a server that sent the
    /// header and a twin anyway) is an error, not wrong output passed off as right.
    #[test]
    fn text_written_as_it_arrives_is_the_whole_text() {
        let reply = ExecReply { output: "a\nb\u{1}\"c\n".repeat(50), stderr: "e".into(), ..Default::default() };
        let json = reply.to_json();
        let (mut reader, mut stdout) = (ReplyReader::default(), Vec::new());
        for chunk in json.chunks(7) {
            reader.feed(chunk).unwrap();
            reader.write_output(&mut stdout).unwrap();
        }
        let read = reader.finish();
        read.view().unwrap().write_stdout(&mut stdout).unwrap();
        assert_eq!(stdout, reply.output.as_bytes());
        let (lossy, b64) = protocol::text::encode(&[0xff, b'a']);
        let twin = ExecReply { output: lossy, output_b64: b64, ..Default::default() }.to_json();
        let mut reader = ReplyReader::default();
        reader.feed(&twin).unwrap();
        reader.write_output(&mut Vec::new()).unwrap();
        let read = reader.finish();
        assert!(matches!(read.view().unwrap().write_stdout(&mut Vec::new()), Err(ReplyWriteError::Invalid)));
        // Read as from a server that promised b64_only: refused while it arrives.
        assert!(ReplyReader::new(true).feed(&twin).is_err());
    }

    #[test]
    fn bad_output_is_an_error() {
        let view = |json: &[u8]| read(json, 3).view().map(|_| ()).map_err(|_| ());
        assert!(view(br#"{"exit_code":0,"output":"cut"#).is_err());
        let mut reader = ReplyReader::default();
        assert!(reader.feed(br#"{"exit_code":0,"output":"\x"}"#).is_err());
        for json in [br#"{"exit_code":0,"output":5}"#.as_slice(), br#"{"exit_code":0,"output":"","output_b64":"!!"}"#] {
            let reply = read(json, 4);
            assert!(matches!(reply.view().unwrap().write_stdout(&mut Vec::new()), Err(ReplyWriteError::Invalid)));
        }
    }
}
