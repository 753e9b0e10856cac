//! `POST /runs/{id}/resize` `{"rows": R, "cols": C}`: a TTY run's new window size (docs/exec-server.md, "TTY runs").
//! The kernel sends the command SIGWINCH (none when the size did not change, so a client may send its size whenever,
//! e.g. after every reconnect).

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use protocol::{ErrorCode, ResizeRequest, RunInfo};

use super::body::{json_object, Body};
use super::runs::find;
use super::{AppError, AppState};

pub async fn resize(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Body(body): Body,
) -> Result<Json<RunInfo>, AppError> {
    let (id, run) = find(&state, &id)?;
    let request: ResizeRequest = json_object(&body, r#"{"rows": 30, "cols": 100} (0 to 65535 each)"#)?;
    let Some(terminal) = run.terminal() else {
        return Err(AppError::conflict(
            ErrorCode::NotATerminal,
            format!("run {id} has no terminal: only a run started with `tty` can be resized"),
        ));
    };
    if terminal.resize(request.rows, request.cols).is_err() {
        return Err(AppError::new(StatusCode::CONFLICT, format!("run {id} has ended: its terminal is gone")));
    }
    Ok(Json(run.info()))
}
