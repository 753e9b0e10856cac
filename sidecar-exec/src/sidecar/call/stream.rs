//! Reading one event stream (`POST /exec/stream`, `GET /runs/{id}/stream`) into a [`RunOutput`] until its exit frame
//! or until the connection fails: what the caller then does (finish, resume, give up) is its own decision.

use futures_util::StreamExt;
use protocol::Frame;

use crate::sidecar::call::output::{RunOutput, RunOutputError};
use crate::sidecar::config::sidecars::Endpoint;
use crate::sidecar::wire::sse::SseError;
use crate::terminal_safe::terminal_safe;

/// How one stream ended.
#[derive(Debug)]
pub enum StreamEnd {
    /// The exit frame: the command is over.
    Exit(ExitFrame),
    /// The connection failed before the exit frame (reset, EOF, read timeout): `why`, as a message. A named run
    /// can be resumed from the output's position.
    Lost { why: String },
    /// Nothing more can be done with this stream: bad frames, closed stdout, a hole in the output.
    Failed(StreamFailure),
}

/// The exit frame's fields.
#[derive(Debug, Clone)]
pub struct ExitFrame {
    pub code: i32,
    pub timed_out: bool,
    pub stdout_bytes: Option<u64>,
    pub stderr_bytes: Option<u64>,
    /// What stopped a named run, when the server says (see [`protocol::StoppedBy`]).
    pub stopped_by: Option<protocol::StoppedBy>,
    /// With streamed stdin: the bytes the command took from its pipe.
    pub stdin_consumed: Option<u64>,
    /// The signal the command died of, when it did.
    pub signal: Option<i32>,
}

/// Why a stream cannot go on.
#[derive(Debug)]
pub enum StreamFailure {
    Output(RunOutputError),
    /// The server at `url` sent a line or an event larger than the reader's bound.
    Oversized {
        url: String,
        err: SseError,
    },
    /// The server at `url` sent a frame that is not one.
    BadFrame {
        url: String,
        err: serde_json::Error,
    },
}

/// What the stream told besides output: the last `error` frame's text (printed once per distinct text, since a
/// resumed stream replays the error frame that came before a cut).
#[derive(Debug, Default)]
pub struct ErrorFrames {
    pub last: Option<String>,
    /// Why the command never started, when an error frame said (`start_error`).
    pub start_error: Option<protocol::StartErrorKind>,
    /// Print each error frame on our stderr as it comes (streaming mode); else they are only kept.
    pub print: bool,
}

/// Reads `response`'s events into `output` until the exit frame or a failure; `silence` without a byte (the server
/// sends keep-alives) counts as a lost connection.
pub async fn read(
    target: &Endpoint,
    response: reqwest::Response,
    output: &mut RunOutput,
    errors: &mut ErrorFrames,
    silence: std::time::Duration,
) -> StreamEnd {
    let mut body = response.bytes_stream();
    let mut parser = crate::sidecar::wire::sse::SseParser::new();
    let mut events = Vec::new();
    loop {
        // The read timeout is kept here rather than on the client: a negotiated `POST /exec` may instead get a
        // contract server's JSON reply, which comes only at the command's end.
        let piece: Result<_, Option<reqwest::Error>> = match tokio::time::timeout(silence, body.next()).await {
            Ok(Some(piece)) => piece.map_err(Some),
            Ok(None) => break,
            Err(_) => Err(None),
        };
        let silent = || StreamEnd::Lost {
            why: format!(
                "sidecar at {} sent nothing for {} s, not even a keep-alive: the connection is lost",
                target.url,
                silence.as_secs()
            ),
        };
        let piece = match piece {
            Ok(piece) => piece,
            Err(None) => return silent(),
            Err(Some(err)) if err.is_timeout() => return silent(),
            Err(Some(err)) => {
                return StreamEnd::Lost { why: format!("stream from sidecar at {} broke: {err}", target.url) }
            }
        };
        if let Err(err) = parser.feed(&piece, &mut events) {
            return StreamEnd::Failed(StreamFailure::Oversized { url: target.url.clone(), err });
        }
        for data in events.drain(..) {
            let frame = match Frame::from_json(&data) {
                Ok(Some(frame)) => frame,
                // A frame type from a newer server: not ours to handle.
                Ok(None) => continue,
                Err(err) => return StreamEnd::Failed(StreamFailure::BadFrame { url: target.url.clone(), err }),
            };
            let written = match frame {
                Frame::Stdout(chunk) => output.chunk(protocol::StreamKind::Stdout, &chunk),
                Frame::Stderr(chunk) => output.chunk(protocol::StreamKind::Stderr, &chunk),
                Frame::Dropped { stream, offset, bytes } => output.dropped(stream, offset, bytes),
                Frame::Error { data, start_error } => {
                    errors.start_error = start_error.or(errors.start_error);
                    // A command that is not there, or may not be run, is told as a shell tells it, at the end.
                    let as_shell = matches!(
                        start_error,
                        Some(protocol::StartErrorKind::NotFound | protocol::StartErrorKind::PermissionDenied)
                    );
                    if errors.print && !as_shell && errors.last.as_deref() != Some(&data) {
                        let _ = std::io::Write::flush(&mut std::io::stdout());
                        crate::sidecar::tty::raw_mode::eprint_line(&format!("sidecar-exec: {}", terminal_safe(&data)));
                    }
                    errors.last = Some(data);
                    Ok(())
                }
                Frame::Exit {
                    data, timed_out, signal, stdout_bytes, stderr_bytes, stopped_by, stdin_consumed, ..
                } => {
                    return StreamEnd::Exit(ExitFrame {
                        code: data,
                        timed_out,
                        stdout_bytes,
                        stderr_bytes,
                        stopped_by,
                        stdin_consumed,
                        signal,
                    })
                }
            };
            if let Err(err) = written {
                return StreamEnd::Failed(StreamFailure::Output(err));
            }
        }
    }
    StreamEnd::Lost {
        why: format!(
            "stream ended without an exit frame: the sidecar at {} closed the connection (was it stopped or \
             restarted?)",
            target.url
        ),
    }
}
