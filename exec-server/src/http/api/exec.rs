//! `POST /exec`: run to the end, reply with one JSON document (streamed: see `reply`).

use axum::extract::State;
use axum::response::Response;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::finished::Finished;
use super::reply_budget::ReplyCapture;
use super::request::RequestedJob;
use super::{AppError, AppState};

pub async fn exec(
    State(state): State<AppState>,
    RequestedJob(job, run_id, b64_only): RequestedJob,
) -> Result<Response, AppError> {
    let job = match (job, run_id) {
        (Ok(job), Some(run_id)) => return super::named::exec(&state, &run_id, job, b64_only).await,
        (Ok(job), None) => job,
        (Err(not_started), _) => {
            state.engine.not_started(&not_started);
            return Finished::NotStarted(not_started).into_reply(None, b64_only);
        }
    };
    let permit = state.permit()?;
    let cancel = CancellationToken::new();
    // Dropped with this handler when the client goes away: the command is cancelled, not abandoned.
    let _cancel_on_drop = cancel.clone().drop_guard();
    let engine = state.engine.clone();
    let capture = ReplyCapture { budget: state.settings.max_output };
    let timeout = job.timeout;
    // The slot stays with the command until it has ended, then goes to the reply until that is sent.
    let run = tokio::spawn(async move { (engine.run(job, capture, cancel).await, permit) }.in_current_span());
    let (joined, permit) = match run.await {
        Ok((ran, permit)) => (Ok(ran), Some(permit)),
        Err(err) => (Err(err), None),
    };
    Finished::new(joined, timeout).into_reply(permit, b64_only)
}
