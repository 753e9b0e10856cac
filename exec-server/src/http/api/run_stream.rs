//! A named run's output as server-sent events, read from its log: replayed from the offsets asked for, then followed
//! live, ending with the error and exit frames. The frames are those of `/exec/stream`, with offsets, `dropped`
//! frames where the log lost its middle, and the streams' totals in the exit frame.

use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use protocol::{Frame, FrameEncoder, StreamKind};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::StreamExt;

use super::stream::{CHANNEL_DEPTH, KEEP_ALIVE, PARTIAL_LINE_WAIT};
use crate::engine::READ_SIZE;
use crate::runs::{Attachment, Read, Run, RunEnd};

/// The SSE response for `run` from `offsets` (stdout, stderr). `attachment` is held while the client reads.
/// `b64_only`: this reader's choice (see [`protocol::ExecRequest::b64_only`]); the log keeps raw bytes, so each
/// reader of the same run gets the frames it asked for.
pub fn response(
    run: Arc<Run>,
    offsets: [u64; 2],
    b64_only: bool,
    attachment: Attachment,
    keepalive: Duration,
) -> Response {
    let (events, rx) = mpsc::channel(CHANNEL_DEPTH);
    let encoders = [
        FrameEncoder::new(StreamKind::Stdout, READ_SIZE).with_offsets(offsets[0]).b64_only(b64_only),
        FrameEncoder::new(StreamKind::Stderr, READ_SIZE).with_offsets(offsets[1]).b64_only(b64_only),
    ];
    tokio::spawn(pump(run, offsets, encoders, events, keepalive, attachment));
    let body = ReceiverStream::new(rx).map(Ok::<_, std::convert::Infallible>);
    let headers = [(header::CONTENT_TYPE, "text/event-stream"), (header::CACHE_CONTROL, "no-cache")];
    (headers, Body::from_stream(body)).into_response()
}

/// The frames that end a run's stream: the error (if any), then the exit frame with both totals.
pub fn final_frames(end: &RunEnd, totals: [u64; 2]) -> Vec<Frame> {
    let error = end.error.clone().map(|data| Frame::Error { data });
    let exit = Frame::Exit {
        data: end.exit_code.unwrap_or(protocol::EXIT_NOT_STARTED),
        timed_out: end.timed_out,
        signal: end.signal,
        duration_ms: u64::try_from(end.duration.as_millis()).unwrap_or(u64::MAX),
        stdout_bytes: Some(totals[0]),
        stderr_bytes: Some(totals[1]),
        stopped_by: end.stopped_by,
    };
    error.into_iter().chain([exit]).collect()
}

/// What one pass over the logs found.
enum Pass {
    /// Frames were made (or gaps passed): look again at once.
    Progress,
    /// Nothing new, the run still going.
    CaughtUp,
    /// Nothing new and the run has ended: these are the last frames.
    Ended(Vec<Frame>),
}

async fn pump(
    run: Arc<Run>,
    mut offsets: [u64; 2],
    mut encoders: [FrameEncoder; 2],
    events: mpsc::Sender<Bytes>,
    keepalive: Duration,
    _attachment: Attachment,
) {
    let mut changed = run.subscribe();
    let follower = run.follow(offsets);
    let mut out: Vec<Vec<u8>> = Vec::new();
    let mut flush_at: Option<Instant> = None;
    let mut quiet_until = Instant::now() + keepalive;
    loop {
        changed.borrow_and_update();
        // The bytes are taken under the run's lock, encoded outside it: the command's output never waits for a
        // reader's encoding.
        let mut progress = false;
        for (index, kind) in [StreamKind::Stdout, StreamKind::Stderr].into_iter().enumerate() {
            progress |= read_some(&run, kind, &mut offsets[index], &mut encoders[index], &mut out);
        }
        let pass = match run.progress() {
            _ if progress => Pass::Progress,
            (_, None) => Pass::CaughtUp,
            // Bytes may have come between the reads above and the end: read on until both are at their totals.
            (totals, Some(_)) if offsets[0] < totals[0] || offsets[1] < totals[1] => Pass::Progress,
            (totals, Some(end)) => Pass::Ended(final_frames(&end, totals)),
        };
        match pass {
            Pass::Progress => {}
            Pass::Ended(frames) => {
                for encoder in &mut encoders {
                    encoder.flush(&mut out);
                }
                out.extend(frames.iter().map(Frame::to_event));
                send_all(&events, &mut out).await;
                return;
            }
            Pass::CaughtUp => {
                if !send_all(&events, &mut out).await {
                    return;
                }
                let wake_at = flush_at.map_or(quiet_until, |at| at.min(quiet_until));
                tokio::select! {
                    _ = changed.changed() => {}
                    () = events.closed() => return,
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
                }
            }
        }
        if !out.is_empty() {
            if !send_all(&events, &mut out).await {
                return;
            }
            quiet_until = Instant::now() + keepalive;
        }
        follower.at(offsets);
        if encoders.iter().any(FrameEncoder::has_pending) {
            flush_at.get_or_insert_with(|| Instant::now() + PARTIAL_LINE_WAIT);
        } else {
            flush_at = None;
        }
    }
}

/// Reads the next piece of stream `kind` from `offset` into frames; false when there was nothing.
fn read_some(
    run: &Run,
    kind: StreamKind,
    offset: &mut u64,
    encoder: &mut FrameEncoder,
    out: &mut Vec<Vec<u8>>,
) -> bool {
    let gap = match run.read(kind, *offset, READ_SIZE) {
        Ok(Read::Bytes(bytes)) => {
            *offset += bytes.len() as u64;
            encoder.push(&bytes, out);
            return true;
        }
        Ok(Read::End) => return false,
        Ok(Read::Dropped(gap)) => gap,
        Err(err) => {
            // The spill file could not be read: what is left of it is reported as dropped, never made up.
            tracing::warn!(error = %err, "cannot read a named run's output");
            run.total(kind).saturating_sub(*offset)
        }
    };
    if gap == 0 {
        return false;
    }
    encoder.flush(out);
    out.push(Frame::Dropped { stream: kind, offset: *offset, bytes: gap }.to_event());
    *offset += gap;
    encoder.jump_to(*offset);
    true
}

/// Sends and clears `events`; false when the client is gone.
async fn send_all(events: &mpsc::Sender<Bytes>, out: &mut Vec<Vec<u8>>) -> bool {
    for event in out.drain(..) {
        if events.send(Bytes::from(event)).await.is_err() {
            return false;
        }
    }
    true
}
