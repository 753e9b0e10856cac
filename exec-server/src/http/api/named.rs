//! `POST /exec` and `POST /exec/stream` with a `run_id`: the run is claimed in the registry (a new one started, an
//! existing one of the same command attached to), runs in its own task whatever its clients do, and its clients
//! read it from its log. Which run a request gets, named or not, is decided here for both routes ([`request_run`]).

use std::sync::Arc;

use axum::http::StatusCode;
use axum::response::Response;
use protocol::{RunId, StreamKind};
use tokio::sync::OwnedSemaphorePermit;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::reply_budget::{HeadTail, ReplyOutput};
use super::request::{Controls, Unstarted};
use super::{reply, run_stream, AppError, AppState};
use crate::ending::Ending;
use crate::engine::{Job, ProcessEngine, Relay, READ_SIZE};
use crate::runs::{Attachment, Claim, ClaimError, NamedRun, Read, RunInput, SpillWriter};

/// What a `POST /exec` or `POST /exec/stream` replies about, decided once for both ([`request_run`]).
pub enum RequestRun {
    /// A named run: claimed (started, or attached to), or the kept run of a command that cannot start now. The reply
    /// reads it while holding the attachment.
    Named { run: Arc<NamedRun>, attachment: Attachment },
    /// No name: the handler runs the job itself, for as long as its client stays.
    Unnamed(Job),
    /// The command cannot start and no kept run answers for it: counted, and how it ended.
    NeverRan(Ending),
}

/// The run a request gets: with a `run_id`, the named run of that id (claimed for `job`, or the kept one of the same
/// command when `job` cannot start); without one, the job itself; a command that cannot start and names no kept
/// run is counted as not started and never ran.
pub fn request_run(
    state: &AppState,
    job: Result<Job, Unstarted>,
    run_id: Option<RunId>,
    controls: Controls,
) -> Result<RequestRun, AppError> {
    let unstarted = match (job, run_id) {
        (Ok(job), Some(id)) => {
            let (run, attachment) = claim_and_attach(state, &id, job, controls)?;
            return Ok(RequestRun::Named { run, attachment });
        }
        (Ok(job), None) => return Ok(RequestRun::Unnamed(job)),
        (Err(unstarted), Some(id)) => match attach_unstarted(state, &id, &unstarted)? {
            Some((run, attachment)) => return Ok(RequestRun::Named { run, attachment }),
            None => unstarted,
        },
        (Err(unstarted), None) => unstarted,
    };
    state.engine.not_started(&unstarted.error);
    Ok(RequestRun::NeverRan(Ending::not_started(&unstarted.error)))
}

/// The run `id` names for `job`: attached to, or claimed and started (holding the `controls` its clients drive: its
/// streamed stdin, its terminal). The caller reads it while holding the attachment.
fn claim_and_attach(
    state: &AppState,
    id: &RunId,
    job: Job,
    controls: Controls,
) -> Result<(Arc<NamedRun>, Attachment), AppError> {
    let argv: Vec<String> = job.argv.iter().map(|arg| arg.to_string_lossy().into_owned()).collect();
    let window = state.runs.settings().reattach_window;
    match state.runs.claim(id, &argv, job.cwd.path()) {
        Ok(Claim::Existing(run)) => {
            let attachment = run.attach(window);
            Ok((run, attachment))
        }
        Ok(Claim::New(run)) => {
            let permit = match state.permit() {
                Ok(permit) => permit,
                Err(err) => {
                    // A request for the same id may have attached meanwhile: it gets this end, not a wait forever.
                    run.finish(Ending::never_ran(format!("the command was not started: {}", err.message)));
                    state.runs.forget(id);
                    return Err(err);
                }
            };
            let attachment = run.attach(window);
            let Controls { input, terminal } = controls;
            if let Some(feed) = input {
                run.open_input(RunInput::new(feed, terminal.is_some()));
            }
            if let Some(terminal) = terminal {
                run.open_terminal(terminal);
            }
            start(state.engine.clone(), run.clone(), job, permit);
            Ok((run, attachment))
        }
        Err(err) => Err(claim_error(err)),
    }
}

/// A named request whose command cannot start (its cwd is missing): the kept run of that id, attached to, if it is
/// this command (a retry after its folder went gets that run, as any re-POST does); 409 if the id names another
/// command; `None` if the id names no kept run (the caller reports the start failure, and nothing is kept).
fn attach_unstarted(
    state: &AppState,
    id: &RunId,
    unstarted: &Unstarted,
) -> Result<Option<(Arc<NamedRun>, Attachment)>, AppError> {
    let run = state.runs.kept_as(id, &unstarted.argv, &unstarted.cwd).map_err(claim_error)?;
    Ok(run.map(|run| {
        let attachment = run.attach(state.runs.settings().reattach_window);
        (run, attachment)
    }))
}

/// 409 for an id of another command, 503 when every kept run still runs, 410 for the same command as a run
/// forgotten for room (it ended: the message says how).
fn claim_error(err: ClaimError) -> AppError {
    let status = match err {
        ClaimError::Conflict { .. } | ClaimError::Forgotten { same_command: false, .. } => StatusCode::CONFLICT,
        ClaimError::Full { .. } => StatusCode::SERVICE_UNAVAILABLE,
        ClaimError::Forgotten { same_command: true, .. } => return AppError::run_forgotten(err.to_string()),
    };
    AppError::new(status, err.to_string())
}

/// Runs `job` for `run` in its own task: its output goes to the run's log at the pace of the readers following it
/// (as an unnamed stream goes at its client's), or as fast as it comes while none does or once the engine says it
/// must (see [`NamedRun::paced`]), and its end is recorded. The slot is held until the command has ended, which no
/// follower can hold up: a timeout, DELETE or shutdown ends the run for everyone. The command and the log's filling
/// are one task (joined), not two: a second task was one more hand-off before the spawn and after the exit, ~0.1 ms
/// of a forwarded `true` (BENCHMARKS.md, "P1: where a forwarded call's time goes").
fn start(engine: ProcessEngine, run: Arc<NamedRun>, mut job: Job, permit: OwnedSemaphorePermit) {
    job.group = Some(run.group.clone());
    // Once the engine says so (a stop began, or the command is past its deadline or the shutdown while its pipes
    // drain), its followers no longer pace it: whatever they do, the end comes.
    let drain_now = CancellationToken::new();
    job.drain_now = Some(drain_now.clone());
    let timeout = job.timeout;
    let task = async move {
        let _permit = permit;
        let (capture, mut chunks) = Relay::channel();
        let command = engine.run(job, capture, run.cancel.clone());
        let log = async {
            let mut progress = run.follower_progress();
            let mut writer: Option<SpillWriter> = None;
            while let Some(chunk) = chunks.recv().await {
                run.paced(&mut progress, &drain_now).await;
                if let Some(pending) = run.append(chunk.kind, chunk.bytes.into()) {
                    writer.get_or_insert_with(|| SpillWriter::start(run.clone())).write(chunk.kind, pending).await;
                }
            }
            // Every byte is in the log before the end is: a reader that sees the end has all there is.
            if let Some(writer) = writer {
                writer.finish().await;
            }
        };
        let (ran, ()) = tokio::join!(command, log);
        run.finish(Ending::of_engine(&ran, timeout));
    };
    tokio::spawn(task.in_current_span());
}

/// `POST /exec/stream` of a named run ([`RequestRun::Named`]): its frames from the start, in the form this request
/// asked for (`b64_only` belongs to the reader, not the run: a re-POST or a `GET /runs/{id}/stream` chooses its
/// own).
pub async fn stream_attached(state: &AppState, run: Arc<NamedRun>, attachment: Attachment, b64_only: bool) -> Response {
    let headers = run_headers(&run);
    let mut response = run_stream::response(run, [0, 0], b64_only, attachment, state.settings.keepalive).await;
    response.headers_mut().extend(headers);
    response
}

/// What a reply says of the run: its stdin is open for `POST /runs/{id}/stdin` (`x-stdin-stream`), it runs on a
/// terminal (`x-tty`).
fn run_headers(run: &NamedRun) -> axum::http::HeaderMap {
    let mut headers = axum::http::HeaderMap::new();
    let one = axum::http::HeaderValue::from_static("1");
    if run.input().is_some() {
        headers.insert(protocol::STDIN_STREAM_HEADER, one.clone());
    }
    if run.terminal().is_some() {
        headers.insert(protocol::TTY_HEADER, one);
    }
    headers
}

/// `POST /exec` of a named run ([`RequestRun::Named`]): waits for its end (attached meanwhile), then replies with
/// what its log holds, cut to `--max-output` like any reply, in the form this request asked for (`b64_only`).
pub async fn exec_attached(state: &AppState, run: Arc<NamedRun>, attachment: Attachment, b64_only: bool) -> Response {
    let mut end = wait_for_end(&run).await;
    drop(attachment);
    let (stdout, stderr) = (
        kept(&run, StreamKind::Stdout, state.settings.max_output),
        kept(&run, StreamKind::Stderr, state.settings.max_output),
    );
    // Kept output that cannot be read is a server failure, said as one (exit -1 and the error), as a replay says it.
    let unreadable = [&stdout, &stderr].into_iter().find_map(|(_, unreadable)| unreadable.clone());
    if let Some(message) = unreadable {
        end = Ending { exit_code: -1, error: Some(message), ..end };
    }
    let mut reply = reply::ran(&end, stdout.0, stderr.0, None, b64_only);
    reply.headers_mut().insert(protocol::RUN_KEPT_HEADER, axum::http::HeaderValue::from_static("1"));
    reply.headers_mut().extend(run_headers(&run));
    reply
}

/// The run's end, once it has one.
pub async fn wait_for_end(run: &NamedRun) -> Ending {
    let mut changed = run.subscribe();
    loop {
        changed.borrow_and_update();
        if let Some(end) = run.end() {
            return end;
        }
        if changed.changed().await.is_err() {
            // The run is gone with its sender: cannot happen while we hold it, but never wait forever.
            return run.end().unwrap_or_else(Ending::lost);
        }
    }
}

/// What a reply keeps of a stream's log: all of it, or head and tail within `budget` (its own dropped middle
/// counted in the cut); and the message when the kept bytes could not be read from some offset on.
fn kept(run: &NamedRun, kind: StreamKind, budget: usize) -> (ReplyOutput, Option<String>) {
    let mut kept = HeadTail::new(budget);
    let mut offset = 0;
    loop {
        match run.read(kind, offset, READ_SIZE) {
            Ok(Read::Bytes(bytes)) => {
                offset += bytes.len() as u64;
                kept.push(&bytes);
            }
            Ok(Read::Dropped(gap)) => {
                offset += gap;
                kept.skip(gap);
            }
            Ok(Read::End) => return (kept.into_reply_output(), None),
            Err(err) => {
                kept.skip(run.total(kind).saturating_sub(offset));
                let message = run_stream::unreadable(run, kind, offset, &err);
                return (kept.into_reply_output(), Some(message));
            }
        }
    }
}
