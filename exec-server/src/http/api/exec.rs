//! `POST /exec`: run to the end, reply with one JSON document (streamed: see `reply`); or, for a client whose
//! `Accept` prefers it (`negotiate`), the event stream of `POST /exec/stream`.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::named::{self, request_run, RequestRun};
use super::negotiate::PrefersStream;
use super::reply;
use super::reply_budget::ReplyCapture;
use super::request::RequestedJob;
use super::{AppError, AppState};
use crate::ending::{task_failed_message, Ending};

pub async fn exec(
    State(state): State<AppState>,
    PrefersStream(prefers_stream): PrefersStream,
    requested: RequestedJob,
) -> Result<Response, AppError> {
    if prefers_stream {
        return super::exec_stream::exec_stream(State(state), requested).await;
    }
    let RequestedJob { job, run_id, b64_only, controls } = requested;
    let job = match request_run(&state, job, run_id, controls)? {
        RequestRun::Named { run, attachment } => {
            return Ok(named::exec_attached(&state, run, attachment, b64_only).await)
        }
        RequestRun::NeverRan(ending) => return Ok(reply::never_ran(&ending)),
        RequestRun::Unnamed(job) => job,
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
    match run.await {
        Ok((Ok(outcome), permit)) => {
            let ending = Ending::ran(&outcome, timeout);
            Ok(reply::ran(&ending, outcome.stdout, outcome.stderr, Some(permit), b64_only))
        }
        Ok((Err(not_started), _)) => Ok(reply::never_ran(&Ending::not_started(&not_started))),
        Err(err) => Err(AppError::new(StatusCode::INTERNAL_SERVER_ERROR, task_failed_message(&err))),
    }
}
