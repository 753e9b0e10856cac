//! `POST /exec/stream`: output as server-sent events while the command runs, then the error and exit frames. The
//! source of the frames is the command's pipes (the engine's [`Relay`] capture); [`super::sse`] pumps them. The
//! source holds the command's cancellation: when the client goes away the pump ends, and with it the command.

use axum::extract::State;
use axum::response::Response;
use protocol::{Frame, FrameEncoder, StreamKind};
use tokio::sync::{mpsc, OwnedSemaphorePermit};
use tokio::task::JoinHandle;
use tokio_util::sync::{CancellationToken, DropGuard};
use tracing::Instrument;

use super::named::{self, request_run, RequestRun};
use super::request::RequestedJob;
use super::sse::{self, FrameSource, Head, Step};
use super::{AppError, AppState};
use crate::ending::Ending;
use crate::engine::{Job, Outcome, OutputChunk, Relay, StartError, READ_SIZE};

pub async fn exec_stream(
    State(state): State<AppState>,
    RequestedJob { job, run_id, b64_only, controls }: RequestedJob,
) -> Result<Response, AppError> {
    let encoders = [
        FrameEncoder::new(StreamKind::Stdout, READ_SIZE).b64_only(b64_only),
        FrameEncoder::new(StreamKind::Stderr, READ_SIZE).b64_only(b64_only),
    ];
    let keepalive = state.settings.keepalive;
    let job = match request_run(&state, job, run_id, controls)? {
        RequestRun::Named { run, attachment } => {
            return Ok(named::stream_attached(&state, run, attachment, b64_only).await)
        }
        RequestRun::NeverRan(ending) => {
            return Ok(sse::response(Ended(Some(ending.frames(None))), encoders, keepalive, Head::WithFirstEvents).await)
        }
        RequestRun::Unnamed(job) => job,
    };
    let permit = state.permit()?;
    // An unnamed run takes no streamed stdin and has no terminal: nothing waits for its head.
    Ok(sse::response(CommandOutput::start(&state, job, permit), encoders, keepalive, Head::WithFirstEvents).await)
}

/// A running command's output, then its end.
struct CommandOutput {
    chunks: mpsc::Receiver<OutputChunk>,
    /// The command's task: its outcome once the pipes are done.
    run: JoinHandle<Result<Outcome<()>, StartError>>,
    timeout: std::time::Duration,
    /// Cancels the command when the stream is dropped (the client is gone): cancelled, not abandoned.
    _cancel_on_drop: DropGuard,
}

impl CommandOutput {
    /// Runs `job` in its own task, which holds the command's `--max-concurrent` slot until it has ended.
    fn start(state: &AppState, job: Job, permit: OwnedSemaphorePermit) -> Self {
        let timeout = job.timeout;
        let cancel = CancellationToken::new();
        let (capture, chunks) = Relay::channel();
        let engine = state.engine.clone();
        let command = cancel.clone();
        let run = tokio::spawn(
            async move {
                let _permit = permit;
                engine.run(job, capture, command).await
            }
            .in_current_span(),
        );
        CommandOutput { chunks, run, timeout, _cancel_on_drop: cancel.drop_guard() }
    }
}

impl FrameSource for CommandOutput {
    async fn next(&mut self, encoders: &mut [FrameEncoder; 2], out: &mut Vec<Vec<u8>>) -> Step {
        match self.chunks.recv().await {
            Some(chunk) => {
                let encoder = match chunk.kind {
                    StreamKind::Stdout => &mut encoders[0],
                    StreamKind::Stderr => &mut encoders[1],
                };
                encoder.push(&chunk.bytes, out);
                Step::More
            }
            None => Step::End(Ending::of(&(&mut self.run).await, self.timeout).frames(None)),
        }
    }
}

/// A stream that is over before it began: only its last frames.
struct Ended(Option<Vec<Frame>>);

impl FrameSource for Ended {
    async fn next(&mut self, _encoders: &mut [FrameEncoder; 2], _out: &mut Vec<Vec<u8>>) -> Step {
        Step::End(self.0.take().unwrap_or_default())
    }
}
