//! `POST /runs/{id}/stdin?offset=N[&eof=true]`: the next bytes of a named run's stdin (the raw body);
//! docs/exec-server.md, "Streamed stdin". The request is held while the run holds [`crate::runs::MAX_UNWRITTEN`] bytes
//! its command has not read, so a sender waits instead of retrying; it is answered once its bytes are taken, or once
//! stdin closes.

use axum::extract::{Path, State};
use axum::Json;
use protocol::{ErrorCode, StdinReply};

use super::body::Body;
use super::query::Query;
use super::runs::find;
use super::{AppError, AppState};
use crate::runs::{InputRefusal, Taken};

pub async fn stdin(
    State(state): State<AppState>,
    Path(id): Path<String>,
    query: Query,
    Body(body): Body,
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
    // Held: the run's one held request (see `Hold`), counted while it waits.
    let mut held = None;
    loop {
        match input.try_take(offset, &body, eof) {
            Ok(Taken::Done(reply)) => return Ok(Json(reply)),
            Ok(Taken::Wait(mut changes)) => {
                // Counted before it supersedes the one held before it, so the count never shows none held between.
                let (_waiting, hold) = held.get_or_insert_with(|| (state.metrics.http().stdin_waiting(), input.hold()));
                tokio::select! {
                    _ = changes.changed() => {}
                    () = hold.superseded() => return Err(superseded(&id)),
                }
            }
            Err(refusal) => return Err(refused(&id, refusal)),
        }
    }
}

fn superseded(id: &protocol::RunId) -> AppError {
    AppError::conflict(
        ErrorCode::StdinSuperseded,
        format!(
            "a newer request to run {id}'s stdin is waiting for the command to read in place of this one, and \
             nothing of this one was taken: send one request at a time, each after the reply to the one before"
        ),
    )
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
