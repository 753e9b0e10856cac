//! The `/exec` reply, streamed: the same JSON as [`protocol::ExecReply::to_json`] (the same layout,
//! [`protocol::ExecReply::parts`]), written a piece at a time from the kept output instead of built whole.
//!
//! Escaped, a command's output can be six times its size; built whole (with its lossy text and base64 twin as
//! Strings first) a reply of 16 MiB of control bytes cost over 200 MB. Streamed, a reply holds the kept bytes and
//! one piece of about 64 KiB. The reply also holds its `--max-concurrent` slot until it is sent or dropped, so
//! replies that a client does not read are counted like the commands that made them.
//!
//! Every `/exec` reply is made here, from the command's [`Ending`]: streamed for a command that ran (or a named
//! run's end, with the output read back from its log), whole and small for one that never started.

use std::collections::VecDeque;
use std::pin::Pin;
use std::task::{Context, Poll};

use axum::body::{Body, Bytes};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use protocol::reply_text::LossyText;
use protocol::{ExecReply, ReplyPart};
use tokio::sync::OwnedSemaphorePermit;

use super::reply_budget::ReplyOutput;
use crate::ending::Ending;

/// The reply of a command that ran: the streamed JSON, holding `permit` (its `--max-concurrent` slot) until it is
/// sent. `b64_only`: the request's, see [`protocol::ExecRequest::b64_only`].
pub fn ran(
    ending: &Ending,
    stdout: ReplyOutput,
    stderr: ReplyOutput,
    permit: Option<OwnedSemaphorePermit>,
    b64_only: bool,
) -> Response {
    // A named run's stored reply (read back from its log) vouches the same as a fresh one. With it, where a cut
    // stdout's head ends: a client writing stdout as it arrives stops there, so what it wrote is always the
    // command's own first bytes (what a resume after a lost reply counts from).
    let head = stdout.head.filter(|_| b64_only);
    let body = ReplyBody::new(ending, stdout, stderr, permit, b64_only);
    let mut response = ([(header::CONTENT_TYPE, "application/json")], Body::from_stream(body)).into_response();
    if b64_only {
        response.headers_mut().insert(protocol::B64_ONLY_HEADER, header::HeaderValue::from_static("1"));
    }
    if let Some(head) = head {
        response.headers_mut().insert(protocol::OUTPUT_HEAD_HEADER, header::HeaderValue::from(head));
    }
    response
}

/// The reply of a command that never started: its exit code and message, and nothing else.
pub fn never_ran(ending: &Ending) -> Response {
    let reply = ExecReply {
        exit_code: ending.exit_code,
        error: ending.error.clone(),
        start_error: ending.start_error,
        ..Default::default()
    };
    ([(header::CONTENT_TYPE, "application/json")], reply.to_json()).into_response()
}

/// Raw bytes of output written per piece (each becomes up to six times as many).
const PIECE: usize = 64 * 1024;
/// Base64 is written in whole groups of three bytes, so the pieces join into the exact encoding of the whole.
const BASE64_PIECE: usize = 48 * 1024;

/// A reply body: a stream of pieces, ending with the closing brace.
pub struct ReplyBody {
    stdout: Vec<u8>,
    stderr: Vec<u8>,
    parts: VecDeque<Part>,
    /// The command's slot, given back once the last piece is out or the body is dropped.
    permit: Option<OwnedSemaphorePermit>,
}

enum Part {
    Literal(Vec<u8>),
    Text(Which, LossyText),
    Base64(Which, usize),
}

#[derive(Clone, Copy)]
enum Which {
    Stdout,
    Stderr,
}

impl ReplyBody {
    /// The reply for `ending` with `stdout` and `stderr`, holding `permit` while it is sent. `b64_only` (the
    /// request's, see [`protocol::ExecRequest::b64_only`]): output that is not UTF-8 goes as base64 with an empty
    /// text field.
    fn new(
        ending: &Ending,
        stdout: ReplyOutput,
        stderr: ReplyOutput,
        permit: Option<OwnedSemaphorePermit>,
        b64_only: bool,
    ) -> Self {
        // The small fields as they are; the output fields' places, filled from the kept bytes as they are sent.
        let layout = ExecReply {
            exit_code: ending.exit_code,
            error: ending.error.clone(),
            timed_out: ending.timed_out,
            signal: ending.signal,
            duration_ms: u64::try_from(ending.duration.as_millis()).unwrap_or(u64::MAX),
            output_truncated: stdout.truncated,
            stderr_truncated: stderr.truncated,
            output_b64: std::str::from_utf8(&stdout.bytes).is_err().then(String::new),
            stderr_b64: std::str::from_utf8(&stderr.bytes).is_err().then(String::new),
            start_error: ending.start_error,
            ..Default::default()
        };
        let text = |which, b64: &Option<String>| match b64 {
            Some(_) if b64_only => Part::Literal(Vec::new()),
            _ => Part::Text(which, LossyText::default()),
        };
        let parts = layout
            .parts()
            .into_iter()
            .map(|part| match part {
                ReplyPart::Json(json) => Part::Literal(json),
                ReplyPart::Output => text(Which::Stdout, &layout.output_b64),
                ReplyPart::Stderr => text(Which::Stderr, &layout.stderr_b64),
                ReplyPart::OutputB64 => Part::Base64(Which::Stdout, 0),
                ReplyPart::StderrB64 => Part::Base64(Which::Stderr, 0),
            })
            .collect();
        ReplyBody { stdout: stdout.bytes, stderr: stderr.bytes, parts, permit }
    }

    /// The next piece of at least `PIECE` bytes (unless it is the last), or `None` at the end.
    fn next_piece(&mut self) -> Option<Vec<u8>> {
        // A piece ends past PIECE by at most one part's piece (escaped text of PIECE bytes: most often ~PIECE).
        let mut out = Vec::with_capacity(2 * PIECE + 256);
        while out.len() < PIECE {
            let Some(part) = self.parts.front_mut() else { break };
            let done = match part {
                Part::Literal(bytes) => {
                    out.append(bytes);
                    true
                }
                Part::Text(which, text) => {
                    let bytes = match which {
                        Which::Stdout => &self.stdout,
                        Which::Stderr => &self.stderr,
                    };
                    !text.write_next(bytes, PIECE, &mut out)
                }
                Part::Base64(which, pos) => {
                    let bytes = match which {
                        Which::Stdout => &self.stdout,
                        Which::Stderr => &self.stderr,
                    };
                    let end = (*pos + BASE64_PIECE).min(bytes.len());
                    protocol::text::append_base64(&mut out, &bytes[*pos..end]);
                    *pos = end;
                    end == bytes.len()
                }
            };
            if done {
                self.parts.pop_front();
            }
        }
        if self.parts.is_empty() {
            // Everything is out: the slot goes back now, not when the connection lets go of the body.
            self.permit = None;
            self.stdout = Vec::new();
            self.stderr = Vec::new();
        }
        (!out.is_empty()).then_some(out)
    }
}

impl futures_util::Stream for ReplyBody {
    type Item = Result<Bytes, std::convert::Infallible>;

    fn poll_next(mut self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        Poll::Ready(self.next_piece().map(|piece| Ok(Bytes::from(piece))))
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn collect(mut body: ReplyBody) -> Vec<u8> {
        let mut out = Vec::new();
        while let Some(piece) = body.next_piece() {
            out.extend_from_slice(&piece);
        }
        out
    }

    /// A body for `stdout` and `stderr` (the first cut, the second whole) of a command that exited 3 (`duration_ms` 42).
    fn reply_body(
        stdout: Vec<u8>,
        stderr: Vec<u8>,
        signal: Option<i32>,
        error: Option<String>,
        permit: Option<OwnedSemaphorePermit>,
        b64_only: bool,
    ) -> ReplyBody {
        let ending = Ending {
            state: protocol::RunState::Exited,
            exit_code: 3,
            signal,
            timed_out: signal.is_some(),
            error,
            stopped_by: None,
            duration: Duration::from_millis(42),
            stdin_consumed: None,
            start_error: None,
        };
        let stdout = ReplyOutput { bytes: stdout, truncated: true, head: None };
        let stderr = ReplyOutput { bytes: stderr, truncated: false, head: None };
        ReplyBody::new(&ending, stdout, stderr, permit, b64_only)
    }

    /// Byte for byte the JSON the whole reply would have been.
    #[test]
    fn the_streamed_reply_is_the_whole_reply() {
        let mixed: Vec<u8> =
            (0..300_000u32).map(|i| [b'a', 1, 0xff, b'\n', 0xc3, 0xa9, b'"'][i as usize % 7]).collect();
        let text = "ünïcode line\n".repeat(20_000).into_bytes();
        let cases = [
            (Vec::new(), Vec::new(), None, None),
            (text.clone(), mixed.clone(), Some(9), Some("command timed out after 1s".to_string())),
            (mixed.clone(), text, None, None),
            (vec![0xff; 200_001], vec![1; 70_000], None, Some("a \"quoted\"\nerror".to_string())),
        ];
        for (stdout, stderr, signal, error) in cases {
            let (output, output_b64) = protocol::text::encode(&stdout);
            let (stderr_text, stderr_b64) = protocol::text::encode(&stderr);
            let mut whole = ExecReply {
                exit_code: 3,
                output,
                stderr: stderr_text,
                error: error.clone(),
                timed_out: signal.is_some(),
                signal,
                duration_ms: 42,
                output_truncated: true,
                stderr_truncated: false,
                output_b64,
                stderr_b64,
                start_error: None,
            };
            let streamed = collect(reply_body(stdout.clone(), stderr.clone(), signal, error.clone(), None, false));
            assert!(
                streamed == whole.to_json(),
                "streamed reply differs ({} vs {} bytes)",
                streamed.len(),
                whole.to_json().len()
            );
            // A client that reads base64 gets the same reply less the lossy text of what is not UTF-8.
            for (text, b64) in [(&mut whole.output, &whole.output_b64), (&mut whole.stderr, &whole.stderr_b64)] {
                if b64.is_some() {
                    text.clear();
                }
            }
            let b64_only = collect(reply_body(stdout, stderr, signal, error, None, true));
            assert!(b64_only == whole.to_json(), "b64-only reply differs");
        }
    }

    #[test]
    fn the_slot_is_given_back_when_the_last_piece_is_out() {
        let permits = std::sync::Arc::new(tokio::sync::Semaphore::new(1));
        let permit = permits.clone().try_acquire_owned().unwrap();
        let mut body = reply_body(vec![1; 300_000], Vec::new(), None, None, Some(permit), false);
        assert!(body.next_piece().is_some());
        assert_eq!(permits.available_permits(), 0, "held while pieces remain");
        while body.next_piece().is_some() {}
        assert_eq!(permits.available_permits(), 1);
        let permit = permits.clone().try_acquire_owned().unwrap();
        drop(reply_body(vec![1; 10], Vec::new(), None, None, Some(permit), false));
        assert_eq!(permits.available_permits(), 1, "given back when dropped");
    }
}
