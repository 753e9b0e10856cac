//! `POST /exec/stream`: output as server-sent events while the command runs, then one exit frame.
//!
//! Backpressure runs end to end: the SSE body pulls events from a small channel, the pump pulls chunks from the
//! engine's small channel, the engine stops reading the pipe, and the command blocks in `write`. Dropping the body
//! (client gone) cancels the command.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use protocol::{Frame, FrameEncoder, StreamKind};
use tokio::sync::{mpsc, OwnedSemaphorePermit};
use tokio::time::Instant;
use tokio_util::sync::{CancellationToken, DropGuard};

use super::exec::{body_error, ending_message};
use super::request::prepare;
use super::{AppError, AppState};
use crate::engine::{Engine, Job, Output, OutputChunk, StartError, READ_SIZE};

/// How long an unfinished line (a prompt, a progress bar) waits for its newline before it is sent as `nl: false`.
const PARTIAL_LINE_WAIT: Duration = Duration::from_millis(20);
/// Chunks and events in flight between the pipe and the socket; with 64 KiB reads this bounds memory per stream.
const CHANNEL_DEPTH: usize = 4;

pub async fn exec_stream(
    State(state): State<AppState>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, AppError> {
    let body = body.map_err(body_error)?;
    let prepared = prepare(&state, &body)?;
    let permit = match &prepared.job {
        Ok(_) => Some(state.permit()?),
        Err(_) => None,
    };
    let cancel = CancellationToken::new();
    let (events, rx) = mpsc::channel(CHANNEL_DEPTH);
    tokio::spawn(pump(state.engine.clone(), prepared.job, prepared.timeout_secs, permit, cancel.clone(), events));
    let body = EventStream { rx, _cancel_on_drop: cancel.drop_guard() };
    Ok(Sse::new(body).keep_alive(KeepAlive::new().interval(state.keepalive)).into_response())
}

/// The SSE body: events from the pump; dropping it cancels the command.
struct EventStream {
    rx: mpsc::Receiver<Event>,
    _cancel_on_drop: DropGuard,
}

impl futures_util::Stream for EventStream {
    type Item = Result<Event, std::convert::Infallible>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.rx.poll_recv(cx).map(|event| event.map(Ok))
    }
}

fn event(frame: &Frame) -> Event {
    // JSON never holds a raw CR or LF, so the event is exactly one `data:` line.
    Event::default().data(serde_json::to_string(frame).unwrap_or_default())
}

async fn pump(
    engine: Engine,
    job: Result<Job, StartError>,
    timeout_secs: u64,
    permit: Option<OwnedSemaphorePermit>,
    cancel: CancellationToken,
    events: mpsc::Sender<Event>,
) {
    let job = match job {
        Ok(job) => job,
        Err(not_started) => return send_not_started(&events, &not_started).await,
    };
    let (chunks_tx, mut chunks) = mpsc::channel::<OutputChunk>(CHANNEL_DEPTH);
    let run = tokio::spawn(async move {
        let _permit = permit;
        engine.run(job, Output::Stream(chunks_tx), cancel).await
    });

    let mut stdout = FrameEncoder::new(StreamKind::Stdout, READ_SIZE);
    let mut stderr = FrameEncoder::new(StreamKind::Stderr, READ_SIZE);
    let mut frames = Vec::new();
    let mut flush_at: Option<Instant> = None;
    loop {
        let chunk = match flush_at {
            Some(at) => tokio::select! {
                chunk = chunks.recv() => chunk,
                () = tokio::time::sleep_until(at) => {
                    stdout.flush(&mut frames);
                    stderr.flush(&mut frames);
                    flush_at = None;
                    if !send_all(&events, &mut frames).await { return }
                    continue;
                }
            },
            None => chunks.recv().await,
        };
        let Some(chunk) = chunk else { break };
        let encoder = match chunk.kind {
            StreamKind::Stdout => &mut stdout,
            StreamKind::Stderr => &mut stderr,
        };
        encoder.push(&chunk.bytes, &mut frames);
        if !send_all(&events, &mut frames).await {
            return;
        }
        if stdout.has_pending() || stderr.has_pending() {
            flush_at.get_or_insert_with(|| Instant::now() + PARTIAL_LINE_WAIT);
        } else {
            flush_at = None;
        }
    }
    stdout.flush(&mut frames);
    stderr.flush(&mut frames);
    match run.await {
        Ok(Ok(outcome)) => {
            if let Some(message) = ending_message(&outcome, timeout_secs) {
                frames.push(Frame::Error { data: message });
            }
            frames.push(Frame::Exit {
                data: outcome.exit_code,
                timed_out: outcome.timed_out,
                signal: outcome.signal,
                duration_ms: u64::try_from(outcome.duration.as_millis()).unwrap_or(u64::MAX),
            });
        }
        Ok(Err(not_started)) => return send_not_started(&events, &not_started).await,
        Err(err) => {
            frames.push(Frame::Error { data: format!("command task failed: {err}") });
            frames.push(Frame::Exit { data: -1, timed_out: false, signal: None, duration_ms: 0 });
        }
    }
    send_all(&events, &mut frames).await;
}

async fn send_not_started(events: &mpsc::Sender<Event>, err: &StartError) {
    let mut frames = vec![
        Frame::Error { data: err.to_string() },
        Frame::Exit { data: protocol::EXIT_NOT_STARTED, timed_out: false, signal: None, duration_ms: 0 },
    ];
    send_all(events, &mut frames).await;
}

/// Sends and clears `frames`; false when the client is gone.
async fn send_all(events: &mpsc::Sender<Event>, frames: &mut Vec<Frame>) -> bool {
    for frame in frames.drain(..) {
        if events.send(event(&frame)).await.is_err() {
            return false;
        }
    }
    true
}
