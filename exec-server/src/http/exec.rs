//! `POST /exec`: run to the end, reply with one JSON document (streamed: see `reply`).

use axum::body::{Body, Bytes};
use axum::extract::rejection::BytesRejection;
use axum::extract::{Extension, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use protocol::ExecReply;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::connection::BodyTimeout;
use super::reply::ReplyBody;
use super::request::prepare;
use super::trace::RequestContext;
use super::{AppError, AppState};
use crate::engine::{Outcome, Output, StartError};

pub async fn exec(
    State(state): State<AppState>,
    Extension(context): Extension<RequestContext>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, AppError> {
    let body = body.map_err(body_error)?;
    let prepared = prepare(&state, &body, &context)?;
    let job = match prepared.job {
        Ok(job) => job,
        Err(not_started) => {
            state.engine.not_started(&not_started);
            return Ok(json_reply(not_started_reply(&not_started).to_json()));
        }
    };
    let permit = state.permit()?;
    let cancel = CancellationToken::new();
    // Dropped with this handler when the client goes away: the command is cancelled, not abandoned.
    let _cancel_on_drop = cancel.clone().drop_guard();
    let engine = state.engine.clone();
    let output = Output::Json { budget: state.max_output };
    // The slot stays with the command until it has ended, then goes to the reply until that is sent.
    let run = tokio::spawn(async move { (engine.run(job, output, cancel).await, permit) }.in_current_span());
    match run.await {
        Ok((Ok(outcome), permit)) => {
            let error = ending_message(&outcome, prepared.timeout_secs);
            let body = ReplyBody::new(outcome, error, Some(permit));
            Ok(([(header::CONTENT_TYPE, "application/json")], Body::from_stream(body)).into_response())
        }
        Ok((Err(not_started), _)) => Ok(json_reply(not_started_reply(&not_started).to_json())),
        Err(err) => Err(AppError::new(StatusCode::INTERNAL_SERVER_ERROR, format!("command task failed: {err}"))),
    }
}

fn json_reply(json: Vec<u8>) -> Response {
    ([(header::CONTENT_TYPE, "application/json")], json).into_response()
}

/// Body-read failures: 413 for the size cap, 408 for a body that did not arrive in time, otherwise the extractor's
/// own status.
pub fn body_error(rejection: BytesRejection) -> AppError {
    let status = rejection.status();
    if status == StatusCode::PAYLOAD_TOO_LARGE {
        return AppError::new(
            status,
            format!(
                "request body is larger than {} bytes (1 MiB): pass large inputs through the shared workspace",
                protocol::MAX_BODY_BYTES
            ),
        );
    }
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(&rejection);
    while let Some(err) = source {
        if let Some(timeout) = err.downcast_ref::<BodyTimeout>() {
            return AppError::new(StatusCode::REQUEST_TIMEOUT, format!("{timeout}: send the whole body at once"));
        }
        source = err.source();
    }
    AppError::new(status, format!("cannot read request body: {}", rejection.body_text()))
}

fn not_started_reply(err: &StartError) -> ExecReply {
    ExecReply { exit_code: protocol::EXIT_NOT_STARTED, error: Some(err.to_string()), ..Default::default() }
}

/// The message for a command that ended early by a timeout or cancellation, if it did.
pub fn ending_message(outcome: &Outcome, timeout_secs: u64) -> Option<String> {
    if outcome.timed_out {
        Some(format!("command timed out after {timeout_secs}s"))
    } else if outcome.cancelled {
        Some("command cancelled: the server is shutting down".into())
    } else {
        None
    }
}
