//! Reading one event stream (`POST /exec/stream`, `GET /runs/{id}/stream`) into an [`Output`] until its exit frame
//! or until the connection fails: what the caller then does (finish, resume, give up) is its own decision.

use futures_util::StreamExt;
use protocol::Frame;

use crate::shown::shown;
use crate::sidecar::http::STREAM_READ_TIMEOUT;
use crate::sidecar::output::{Output, OutputError};
use crate::sidecar::sidecars::Target;

/// How one stream ended.
#[derive(Debug)]
pub enum StreamEnd {
    /// The exit frame: the command is over.
    Exit(Exit),
    /// The connection failed before the exit frame (reset, EOF, read timeout): `why`, as a message. A named run
    /// can be resumed from the output's position.
    Lost { why: String },
    /// Nothing more can be done with this stream: bad frames, closed stdout, a hole in the output.
    Failed(Failure),
}

/// The exit frame's fields.
#[derive(Debug, Clone)]
pub struct Exit {
    pub code: i32,
    pub timed_out: bool,
    pub stdout_bytes: Option<u64>,
    pub stderr_bytes: Option<u64>,
    /// What stopped a named run, when the server says (see [`protocol::StoppedBy`]).
    pub stopped_by: Option<protocol::StoppedBy>,
}

/// Why a stream cannot go on.
#[derive(Debug)]
pub enum Failure {
    Output(OutputError),
    /// The server sent what is not its event stream (a huge event, an unreadable frame).
    Protocol(String),
}

/// What the stream told besides output: the last `error` frame's text (printed once per distinct text, since a
/// resumed stream replays the error frame that came before a cut).
#[derive(Debug, Default)]
pub struct Errors {
    pub last: Option<String>,
    /// Print each error frame on our stderr as it comes (streaming mode); else they are only kept.
    pub print: bool,
}

/// Reads `response`'s events into `output` until the exit frame or a failure.
pub async fn read(target: &Target, response: reqwest::Response, output: &mut Output, errors: &mut Errors) -> StreamEnd {
    let mut body = response.bytes_stream();
    let mut parser = crate::sidecar::sse::SseParser::new();
    let mut events = Vec::new();
    while let Some(piece) = body.next().await {
        let piece = match piece {
            Ok(piece) => piece,
            Err(err) if err.is_timeout() => {
                return StreamEnd::Lost {
                    why: format!(
                        "sidecar at {} sent nothing for {} s, not even a keep-alive: the connection is lost",
                        target.url,
                        STREAM_READ_TIMEOUT.as_secs()
                    ),
                }
            }
            Err(err) => return StreamEnd::Lost { why: format!("stream from sidecar at {} broke: {err}", target.url) },
        };
        if let Err(err) = parser.feed(&piece, &mut events) {
            return StreamEnd::Failed(Failure::Protocol(format!(
                "sidecar at {} sent {err} in its event stream, far more than any exec-server event (under 1 MiB): \
                 giving up on it",
                target.url
            )));
        }
        for data in events.drain(..) {
            let frame = match Frame::from_json(&data) {
                Ok(Some(frame)) => frame,
                // A frame type from a newer server: not ours to handle.
                Ok(None) => continue,
                Err(err) => {
                    return StreamEnd::Failed(Failure::Protocol(format!(
                        "sidecar at {} sent an unreadable frame ({err})",
                        target.url
                    )))
                }
            };
            let written = match frame {
                Frame::Stdout(chunk) => output.chunk(protocol::StreamKind::Stdout, &chunk),
                Frame::Stderr(chunk) => output.chunk(protocol::StreamKind::Stderr, &chunk),
                Frame::Dropped { stream, offset, bytes } => output.dropped(stream, offset, bytes),
                Frame::Error { data } => {
                    if errors.print && errors.last.as_deref() != Some(&data) {
                        let _ = std::io::Write::flush(&mut std::io::stdout());
                        eprintln!("sidecar-exec: {}", shown(&data));
                    }
                    errors.last = Some(data);
                    Ok(())
                }
                Frame::Exit { data, timed_out, stdout_bytes, stderr_bytes, stopped_by, .. } => {
                    return StreamEnd::Exit(Exit { code: data, timed_out, stdout_bytes, stderr_bytes, stopped_by })
                }
            };
            if let Err(err) = written {
                return StreamEnd::Failed(Failure::Output(err));
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
