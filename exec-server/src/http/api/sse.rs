//! Server-sent events: the one pump from a source of frames to an SSE response, for every stream the API serves (a
//! command's output as it runs, a named run's log replayed and followed).
//!
//! The pump batches lines (the encoders), sends an unfinished line (a prompt, a progress bar) after
//! [`PARTIAL_LINE_WAIT`], keeps a quiet stream alive with a comment, and ends with the source's last frames.
//! Backpressure runs end to end: the body pulls events from a small channel, the pump pulls from its source only when
//! the channel has room, and a source that is a command's pipes stops reading them, so the command blocks in
//! `write`. The pump ends when the client is gone (the body dropped); the source ends with it, and whatever it holds
//! (the command's cancellation, a run's attachment) goes with it.

use std::future::Future;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use protocol::{Frame, FrameEncoder};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::StreamExt;
use tracing::Instrument;

/// How long an unfinished line waits for its newline before it is sent as `nl: false`.
pub const PARTIAL_LINE_WAIT: Duration = Duration::from_millis(20);
/// Events in flight between the pump and the socket; with 64 KiB frames this bounds memory per stream.
const EVENTS_IN_FLIGHT: usize = 4;
/// An SSE comment: keeps proxies and the client's read timeout from closing a quiet stream.
const KEEP_ALIVE: &[u8] = b": keep-alive\n\n";

/// What [`FrameSource::next`] found.
pub enum Step {
    /// Output (or nothing yet, when it was not a whole line): look again.
    More,
    /// The stream is over: these frames end it (the error, if any, then the exit frame).
    End(Vec<Frame>),
}

/// Where a stream's frames come from.
pub trait FrameSource: Send + 'static {
    /// Waits for more output and encodes it into `out` with `encoders` (stdout's, then stderr's), or returns the last
    /// frames. Must be cancel-safe: the pump drops the future to flush a partial line or keep the stream alive, and
    /// calls again.
    fn next(&mut self, encoders: &mut [FrameEncoder; 2], out: &mut Vec<Vec<u8>>) -> impl Future<Output = Step> + Send;

    /// Everything encoded so far is handed to the client's connection.
    fn sent(&mut self) {}
}

/// How long a stream's head waits for its first events (see [`Head::WithFirstEvents`]): long enough for a short
/// command to end, short enough that a command still running has its head at once in human terms.
pub const HEAD_WAITS_FOR: Duration = Duration::from_millis(5);

/// When a stream's response head goes out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Head {
    /// With the first events, if they come within [`HEAD_WAITS_FOR`]: a command that ends (or prints) at once goes
    /// out as one write, head, frames and the body's end together, so its client reads one segment, not two (issue
    /// 22's P1; BENCHMARKS.md, "P1: where a forwarded call's time goes"). Nothing is held back: what has come is
    /// sent, and the head goes alone when nothing has.
    WithFirstEvents,
    /// At once: the client acts on the head before the command can go on (it starts streaming stdin, or a
    /// terminal's keys, once the head says the run takes them).
    Now,
}

/// The SSE response that pumps `source` through `encoders`, with a keep-alive comment after `keepalive` of quiet.
/// Each event is `data: <json>` and a blank line: JSON never holds a raw CR or LF, so an event is one `data:` line.
pub async fn response(
    source: impl FrameSource,
    encoders: [FrameEncoder; 2],
    keepalive: Duration,
    head: Head,
) -> Response {
    let (events, mut rx) = mpsc::channel(EVENTS_IN_FLIGHT);
    tokio::spawn(pump(source, encoders, events, keepalive).in_current_span());
    let mut first = Vec::new();
    if head == Head::WithFirstEvents {
        if let Ok(Some(event)) = tokio::time::timeout(HEAD_WAITS_FOR, rx.recv()).await {
            first.push(event);
            while let Ok(event) = rx.try_recv() {
                first.push(event);
            }
        }
    }
    let body = tokio_stream::iter(first).chain(ReceiverStream::new(rx)).map(Ok::<_, std::convert::Infallible>);
    let headers = [(header::CONTENT_TYPE, "text/event-stream"), (header::CACHE_CONTROL, "no-cache")];
    (headers, Body::from_stream(body)).into_response()
}

async fn pump(
    mut source: impl FrameSource,
    mut encoders: [FrameEncoder; 2],
    events: mpsc::Sender<Bytes>,
    keepalive: Duration,
) {
    let mut out: Vec<Vec<u8>> = Vec::new();
    let mut flush_at: Option<Instant> = None;
    let mut quiet_until = Instant::now() + keepalive;
    loop {
        let wake_at = flush_at.map_or(quiet_until, |at| at.min(quiet_until));
        tokio::select! {
            step = source.next(&mut encoders, &mut out) => {
                if let Step::End(frames) = step {
                    for encoder in &mut encoders {
                        encoder.flush(&mut out);
                    }
                    out.extend(frames.iter().map(Frame::to_event));
                    send_all(&events, &mut out).await;
                    return;
                }
            }
            () = tokio::time::sleep_until(wake_at) => {
                if flush_at.is_some_and(|at| at <= Instant::now()) {
                    for encoder in &mut encoders {
                        encoder.flush(&mut out);
                    }
                    flush_at = None;
                } else {
                    out.push(KEEP_ALIVE.to_vec());
                }
            }
            () = events.closed() => return,
        }
        if !out.is_empty() {
            if !send_all(&events, &mut out).await {
                return;
            }
            quiet_until = Instant::now() + keepalive;
        }
        source.sent();
        if encoders.iter().any(FrameEncoder::has_pending) {
            flush_at.get_or_insert_with(|| Instant::now() + PARTIAL_LINE_WAIT);
        } else {
            flush_at = None;
        }
    }
}

/// Sends and clears `out`; false when the client is gone.
async fn send_all(events: &mpsc::Sender<Bytes>, out: &mut Vec<Vec<u8>>) -> bool {
    for event in out.drain(..) {
        if events.send(Bytes::from(event)).await.is_err() {
            return false;
        }
    }
    true
}
