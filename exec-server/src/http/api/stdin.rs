//! `POST /runs/{id}/stdin?offset=N[&eof=true]`: the next bytes of a named run's stdin (the raw body), issue 22. The
//! request is held while the run holds [`crate::runs::MAX_UNWRITTEN`] bytes its command has not read, so a sender waits instead
//! of retrying; it is answered once its bytes are taken, or once stdin closes.

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::Json;
use protocol::{ErrorCode, StdinReply};

use super::query::Query;
use super::runs::find;
use super::{AppError, AppState};
use crate::runs::{InputRefusal, Taken};

pub async fn stdin(
    State(state): State<AppState>,
    Path(id): Path<String>,
    query: Query,
    body: Bytes,
) -> Result<Json<StdinReply>, AppError> {
    let (id, run) = find(&state, &id)?;
    let offset = query.offset("offset")?.ok_or_else(|| {
        AppError::bad_request("offset is missing: give the position in the run's stdin of the body's first byte")
    })?;
    let eof = query.boolean("eof")?;
    let Some(input) = run.input() else {
        return Err(AppError::conflict(
            ErrorCode::StdinNotOpen,
            format!("run {id} did not ask for stdin_stream: its stdin is not open for input"),
        ));
    };
    let mut waiting = None;
    loop {
        match input.try_take(offset, &body, eof) {
            Ok(Taken::Done(reply)) => return Ok(Json(reply)),
            Ok(Taken::Wait(mut changes)) => {
                waiting.get_or_insert_with(|| state.metrics.http().stdin_waiting());
                let _ = changes.changed().await;
            }
            Err(refusal) => return Err(refused(&id, refusal)),
        }
    }
}

fn refused(id: &protocol::RunId, refusal: InputRefusal) -> AppError {
    match refusal {
        InputRefusal::Gap { received } => AppError {
            received: Some(received),
            ..AppError::conflict(
                ErrorCode::StdinGap,
                format!(
                    "the chunk starts beyond the {received} bytes of run {id}'s stdin taken so far: resend from \
                     offset {received}"
                ),
            )
        },
        InputRefusal::PastEof { received } => AppError {
            received: Some(received),
            ..AppError::conflict(
                ErrorCode::StdinClosed,
                format!("run {id}'s stdin was closed by an EOF at offset {received}: no bytes may follow it"),
            )
        },
        InputRefusal::IsATerminal => AppError::conflict(
            ErrorCode::StdinIsATerminal,
            format!(
                "run {id} runs on a terminal, which has no EOF: send the byte 0x04 (Ctrl-D) for the line \
                 discipline to read"
            ),
        ),
    }
}
