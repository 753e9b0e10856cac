//! `POST /exec`: run to the end, reply with one JSON document.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use protocol::ExecReply;
use tokio_util::sync::CancellationToken;

use super::request::prepare;
use super::{AppError, AppState};
use crate::engine::{Outcome, Output, StartError};

pub async fn exec(State(state): State<AppState>, body: Result<Bytes, BytesRejection>) -> Result<Response, AppError> {
    let body = body.map_err(body_error)?;
    let prepared = prepare(&state, &body)?;
    let reply = match prepared.job {
        Err(not_started) => not_started_reply(&not_started),
        Ok(job) => {
            let permit = state.permit()?;
            let cancel = CancellationToken::new();
            // Dropped with this handler when the client goes away: the command is cancelled, not abandoned.
            let _cancel_on_drop = cancel.clone().drop_guard();
            let engine = state.engine.clone();
            let output = Output::Collect { cap: state.max_output };
            let run = tokio::spawn(async move {
                let _permit = permit;
                engine.run(job, output, cancel).await
            });
            match run.await {
                Ok(Ok(outcome)) => reply_from(outcome, prepared.timeout_secs),
                Ok(Err(not_started)) => not_started_reply(&not_started),
                Err(err) => {
                    return Err(AppError::new(StatusCode::INTERNAL_SERVER_ERROR, format!("command task failed: {err}")))
                }
            }
        }
    };
    Ok(([(header::CONTENT_TYPE, "application/json")], reply.to_json()).into_response())
}

/// Body-read failures: 413 for the size cap, otherwise the extractor's own status.
pub fn body_error(rejection: BytesRejection) -> AppError {
    let status = rejection.status();
    if status == StatusCode::PAYLOAD_TOO_LARGE {
        AppError::new(
            status,
            format!(
                "request body is larger than {} bytes (1 MiB): pass large inputs through the shared workspace",
                protocol::MAX_BODY_BYTES
            ),
        )
    } else {
        AppError::new(status, format!("cannot read request body: {}", rejection.body_text()))
    }
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

fn reply_from(outcome: Outcome, timeout_secs: u64) -> ExecReply {
    let error = ending_message(&outcome, timeout_secs);
    let (output, output_b64) = protocol::text::encode(&outcome.stdout.bytes);
    let (stderr, stderr_b64) = protocol::text::encode(&outcome.stderr.bytes);
    ExecReply {
        exit_code: outcome.exit_code,
        output,
        stderr,
        error,
        timed_out: outcome.timed_out,
        signal: outcome.signal,
        duration_ms: u64::try_from(outcome.duration.as_millis()).unwrap_or(u64::MAX),
        output_truncated: outcome.stdout.truncated,
        stderr_truncated: outcome.stderr.truncated,
        output_b64,
        stderr_b64,
    }
}
