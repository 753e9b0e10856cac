//! `POST /exec/stream`: output as server-sent events while the command runs, then one exit frame.
//!
//! Backpressure runs end to end: the SSE body pulls events from a small channel, the pump pulls chunks from the
//! engine's small channel, the engine stops reading the pipe, and the command blocks in `write`. Dropping the body
//! (client gone) cancels the command.

use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use protocol::{Frame, FrameEncoder, StreamKind};
use tokio::sync::{mpsc, OwnedSemaphorePermit};
use tokio::time::Instant;
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::StreamExt;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::finished::Finished;
use super::request::RequestedJob;
use super::{AppError, AppState};
use crate::engine::{Engine, Job, StartError, Stream, READ_SIZE};

/// How long an unfinished line (a prompt, a progress bar) waits for its newline before it is sent as `nl: false`.
pub(super) const PARTIAL_LINE_WAIT: Duration = Duration::from_millis(20);
/// Chunks and events in flight between the pipe and the socket; with 64 KiB reads this bounds memory per stream.
pub(super) const CHANNEL_DEPTH: usize = 4;

pub async fn exec_stream(
    State(state): State<AppState>,
    RequestedJob(job, run_id, b64_only): RequestedJob,
) -> Result<Response, AppError> {
    if let (Ok(_), Some(run_id)) = (&job, &run_id) {
        let Ok(job) = job else { unreachable!("matched above") };
        return super::named::stream(&state, run_id, job, b64_only);
    }
    let permit = match &job {
        Ok(_) => Some(state.permit()?),
        Err(_) => None,
    };
    let cancel = CancellationToken::new();
    let (events, rx) = mpsc::channel(CHANNEL_DEPTH);
    let pump = Pump { events, keepalive: state.settings.keepalive };
    let run = pump.run(state.engine.clone(), job, b64_only, permit, cancel.clone());
    tokio::spawn(run.in_current_span());
    // The SSE body: events from the pump, each already `data: <json>` and a blank line (JSON never holds a raw CR
    // or LF, so an event is exactly one `data:` line). It owns the guard: dropping it (client gone) cancels the
    // command.
    let cancel_on_drop = cancel.drop_guard();
    let body = ReceiverStream::new(rx).map(move |event| {
        let _ = &cancel_on_drop;
        Ok::<_, std::convert::Infallible>(event)
    });
    let headers = [(header::CONTENT_TYPE, "text/event-stream"), (header::CACHE_CONTROL, "no-cache")];
    Ok((headers, Body::from_stream(body)).into_response())
}

/// An SSE comment: keeps proxies and the client's read timeout from closing a quiet stream.
pub(super) const KEEP_ALIVE: &[u8] = b": keep-alive\n\n";

/// Turns engine chunks into events, batching lines, flushing partial lines after a moment, keeping a quiet stream
/// alive, and ending with the error and exit frames.
struct Pump {
    events: mpsc::Sender<Bytes>,
    keepalive: Duration,
}

impl Pump {
    async fn run(
        self,
        engine: Engine,
        job: Result<Job, StartError>,
        b64_only: bool,
        permit: Option<OwnedSemaphorePermit>,
        cancel: CancellationToken,
    ) {
        let job = match job {
            Ok(job) => job,
            Err(not_started) => {
                engine.not_started(&not_started);
                let mut events: Vec<_> =
                    Finished::<()>::NotStarted(not_started).into_frames().iter().map(Frame::to_event).collect();
                self.send_all(&mut events).await;
                return;
            }
        };
        let timeout = job.timeout;
        let (capture, mut chunks) = Stream::channel();
        let run = tokio::spawn(
            async move {
                let _permit = permit;
                engine.run(job, capture, cancel).await
            }
            .in_current_span(),
        );

        let mut stdout = FrameEncoder::new(StreamKind::Stdout, READ_SIZE).b64_only(b64_only);
        let mut stderr = FrameEncoder::new(StreamKind::Stderr, READ_SIZE).b64_only(b64_only);
        let mut events = Vec::new();
        let mut flush_at: Option<Instant> = None;
        let mut quiet_until = Instant::now() + self.keepalive;
        loop {
            let wake_at = flush_at.map_or(quiet_until, |at| at.min(quiet_until));
            let chunk = tokio::select! {
                chunk = chunks.recv() => chunk,
                () = tokio::time::sleep_until(wake_at) => {
                    if flush_at.is_some_and(|at| at <= Instant::now()) {
                        stdout.flush(&mut events);
                        stderr.flush(&mut events);
                        flush_at = None;
                    } else {
                        events.push(KEEP_ALIVE.to_vec());
                    }
                    if !self.send_all(&mut events).await {
                        return;
                    }
                    quiet_until = Instant::now() + self.keepalive;
                    continue;
                }
            };
            let Some(chunk) = chunk else { break };
            let encoder = match chunk.kind {
                StreamKind::Stdout => &mut stdout,
                StreamKind::Stderr => &mut stderr,
            };
            encoder.push(&chunk.bytes, &mut events);
            if !events.is_empty() {
                if !self.send_all(&mut events).await {
                    return;
                }
                quiet_until = Instant::now() + self.keepalive;
            }
            if stdout.has_pending() || stderr.has_pending() {
                flush_at.get_or_insert_with(|| Instant::now() + PARTIAL_LINE_WAIT);
            } else {
                flush_at = None;
            }
        }
        stdout.flush(&mut events);
        stderr.flush(&mut events);
        let frames = Finished::new(run.await, timeout).into_frames();
        events.extend(frames.iter().map(Frame::to_event));
        self.send_all(&mut events).await;
    }

    /// Sends and clears `events`; false when the client is gone.
    async fn send_all(&self, events: &mut Vec<Vec<u8>>) -> bool {
        for event in events.drain(..) {
            if self.events.send(Bytes::from(event)).await.is_err() {
                return false;
            }
        }
        true
    }
}
