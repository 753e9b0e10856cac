//! The `/runs` endpoints: list named runs, show one, replay and follow its output, signal its process group, and
//! cancel or forget it.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use nix::sys::signal::Signal;
use protocol::{RunId, RunList, SignalRequest, StoppedBy};

use super::body::{json_object, Body};
use super::named::wait_for_end;
use super::query::Query;
use super::{run_stream, AppError, AppState};
use crate::runs::{signals, ClaimError, NamedRun};

/// The run a path names, or 404 (400 for a name no run can have; 410 for one forgotten for room, which ended).
pub(super) fn find(state: &AppState, id: &str) -> Result<(RunId, Arc<NamedRun>), AppError> {
    let id: RunId = id.parse().map_err(|err: protocol::RunIdError| AppError::bad_request(err.to_string()))?;
    match state.runs.get(&id) {
        Some(run) => Ok((id, run)),
        None => match state.runs.forgotten(&id) {
            Some(tombstone) => {
                let forgotten = ClaimError::Forgotten { id, tombstone, same_command: true };
                Err(AppError::run_forgotten(forgotten.to_string()))
            }
            None => Err(AppError::run_not_known(&id)),
        },
    }
}

/// `GET /runs`: every kept run, newest first.
pub async fn list(State(state): State<AppState>) -> Json<RunList> {
    Json(RunList { runs: state.runs.list().iter().map(|run| run.info()).collect() })
}

/// `GET /runs/{id}`.
pub async fn show(State(state): State<AppState>, Path(id): Path<String>) -> Result<Response, AppError> {
    let (_, run) = find(&state, &id)?;
    Ok(Json(run.info()).into_response())
}

/// `GET /runs/{id}/stream?stdout=N&stderr=M&b64_only=true`: replay from those offsets, then follow to the exit
/// frame. `b64_only` (default false) is this reader's, like the request field of the POSTs: a client that resumes
/// reads the frames it asked for the first time, whoever started the run.
pub async fn stream(State(state): State<AppState>, Path(id): Path<String>, query: Query) -> Result<Response, AppError> {
    let (_, run) = find(&state, &id)?;
    let offsets = [query.offset("stdout")?.unwrap_or(0), query.offset("stderr")?.unwrap_or(0)];
    let b64_only = query.boolean("b64_only")?;
    // Attach before checking, so that a run reaching its window's end meanwhile is not stopped under us.
    let attachment = run.attach(state.runs.settings().reattach_window);
    let (totals, _) = run.progress();
    for ((name, offset), total) in ["stdout", "stderr"].iter().zip(offsets).zip(totals) {
        if offset > total {
            return Err(AppError::offset_beyond_end(name, offset, total));
        }
    }
    Ok(run_stream::response(run, offsets, b64_only, attachment, state.settings.keepalive).await)
}

/// `POST /runs/{id}/signal` `{"signal": "TERM"}`: to the run's whole process group.
pub async fn signal(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Body(body): Body,
) -> Result<Response, AppError> {
    let (id, run) = find(&state, &id)?;
    let request: SignalRequest = json_object(&body, r#"{"signal": "TERM"}"#)?;
    let Some(signal) = signals::parse(&request.signal) else {
        return Err(AppError::bad_request(format!(
            "signal {:?} is not one this server sends: use {}",
            request.signal,
            signals::ALLOWED
        )));
    };
    let ended = || AppError::new(StatusCode::CONFLICT, format!("run {id} has ended: there is nothing to signal"));
    if run.end().is_some() {
        return Err(ended());
    }
    // On a terminal the signals a terminal makes (^C, ^\, ^Z, a resize) go where the terminal sends them: to its
    // foreground group (a job's, under a shell with job control); the others to the leader's group.
    let foreground = match signal {
        Signal::SIGINT | Signal::SIGQUIT | Signal::SIGTSTP | Signal::SIGWINCH => {
            run.terminal().and_then(|terminal| terminal.foreground_group())
        }
        _ => None,
    };
    match foreground.or_else(|| run.group.get().copied()) {
        Some(group) => group.signal(signal),
        // Claimed, not spawned yet: a moment away; the signal would have nowhere to go.
        None => {
            return Err(AppError::new(
                StatusCode::CONFLICT,
                format!("run {id} has not started its command yet: retry in a moment"),
            ))
        }
    }
    tracing::info!(run = %id, signal = %signal, "signal sent to a named run's group");
    Ok(Json(run.info()).into_response())
}

/// `DELETE /runs/{id}`: a running run is cancelled by the policy and answered once stopped; an ended one is
/// forgotten.
pub async fn delete(State(state): State<AppState>, Path(id): Path<String>) -> Result<Response, AppError> {
    let (id, run) = find(&state, &id)?;
    if run.end().is_none() {
        run.cancel_because(StoppedBy::Delete, format!("cancelled by DELETE /runs/{id}"));
        wait_for_end(&run).await;
        return Ok(Json(run.info()).into_response());
    }
    let info = run.info();
    state.runs.forget(&id);
    Ok(Json(info).into_response())
}
