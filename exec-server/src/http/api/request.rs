//! From a request body to an engine job: the extractor both `POST /exec` and `POST /exec/stream` take, with the
//! parsing, validation, cwd confinement, environment and timeout rules it applies.

use std::ffi::OsString;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{FromRequest, Request};
use axum::http::StatusCode;
use protocol::{ExecRequest, RunId};

use super::trace::RequestContext;
use super::{AppError, AppState};
use crate::engine::stdin::{stdin_stream, StdinFeed};
use crate::engine::terminal::{Terminal, TerminalJob};
use crate::engine::{Job, StartError};
use crate::http::server::BodyTimeout;
use crate::workspace::{resolve_cwd, CwdError};

/// A request body that passed validation. Anything else wrong with the body is the extractor's rejection, a 4xx
/// [`AppError`] that names what is wrong.
pub struct RequestedJob {
    /// The job to run, or the contract's start failure (a missing cwd) to report as a command that did not start.
    /// The granted timeout is the job's own `timeout` (whole seconds): the messages read it there.
    pub job: Result<Job, Unstarted>,
    /// The run's name, when the request gave one (a named run, issue 12).
    pub run_id: Option<RunId>,
    /// The request's `b64_only`: how the reply or frames carry output that is not UTF-8 (a wire matter, not the
    /// job's).
    pub b64_only: bool,
    /// What the run's clients drive while it runs (a named run holds them).
    pub controls: Controls,
}

/// The parts of a job its clients drive while it runs, held by its named run.
#[derive(Default)]
pub struct Controls {
    /// With `stdin_stream` (or `tty`): the feed of the job's stdin (`POST /runs/{id}/stdin`).
    pub input: Option<StdinFeed>,
    /// With `tty`: the terminal's handle (`POST /runs/{id}/resize`, signals to its foreground group).
    pub terminal: Option<Arc<Terminal>>,
}

/// A request whose command cannot start (its cwd is missing): the failure, and the command it named (a named
/// request's id must still not be taken for another command).
pub struct Unstarted {
    pub argv: Vec<String>,
    /// The working directory as resolved (what a kept run of the same command was started in).
    pub cwd: std::path::PathBuf,
    pub error: StartError,
}

impl FromRequest<AppState> for RequestedJob {
    type Rejection = AppError;

    async fn from_request(request: Request, state: &AppState) -> Result<Self, AppError> {
        // Set by the `request_context` middleware on every request the router sees.
        let traceparent = request.extensions().get::<RequestContext>().and_then(|context| context.traceparent.clone());
        let body = Bytes::from_request(request, state).await.map_err(body_error)?;
        prepare(state, &body, traceparent.as_deref())
    }
}

/// Body-read failures: 413 for the size cap, 408 for a body that did not arrive in time, otherwise the extractor's
/// own status.
fn body_error(rejection: BytesRejection) -> AppError {
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

/// Turns a body into a job (with the run's name and the request's `b64_only`), or a 400 that names what is wrong.
fn prepare(state: &AppState, body: &[u8], traceparent: Option<&str>) -> Result<RequestedJob, AppError> {
    // serde would also take a struct written as a JSON array (`[["ls"]]`): the contract's body is an object.
    if !body.trim_ascii_start().starts_with(b"{") {
        return Err(AppError::bad_request(
            "invalid request body: it must be a JSON object like {\"cmd\": [\"npm\", \"test\"]}",
        ));
    }
    let request: ExecRequest = serde_json::from_slice(body).map_err(|err| {
        AppError::bad_request(format!(
            "invalid request body: {err}; expected JSON like {{\"cmd\": [\"npm\", \"test\"], \"cwd\": \"sub/dir\", \
             \"timeout\": 600, \"env\": {{\"NAME\": \"value\"}}}}"
        ))
    })?;
    validate_cmd(&request.cmd)?;
    if request.stdin_stream && request.run_id.is_none() {
        return Err(AppError::bad_request("stdin_stream needs a run_id: input is sent to /runs/{id}/stdin"));
    }
    if request.tty.is_some() && request.run_id.is_none() {
        return Err(AppError::bad_request("tty needs a run_id: the terminal's input is sent to /runs/{id}/stdin"));
    }
    let timeout_secs = grant_timeout(request.timeout, state.settings.max_timeout);
    let stdin = match (&request.stdin_b64, &request.stdin) {
        (Some(b64), _) => Some(
            protocol::text::from_base64(b64)
                .map_err(|err| AppError::bad_request(format!("stdin_b64 is not valid base64: {err}")))?,
        ),
        (None, Some(text)) => Some(text.clone().into_bytes()),
        (None, None) => None,
    };
    let mut env = build_env(&state.settings.base_env, request.env.iter().flatten())?;
    if let Some(tty) = &request.tty {
        // The request's TERM; else the environment's (the request's env over the server's); else a common one.
        let term = match &tty.term {
            Some(term) if term.is_empty() || term.contains('\0') => {
                return Err(AppError::bad_request("tty.term must be a terminal type like xterm-256color"))
            }
            Some(term) => term.clone(),
            None => env
                .iter()
                .rev()
                .find(|(name, _)| name == "TERM")
                .map_or_else(|| DEFAULT_TERM.to_owned(), |(_, term)| term.to_string_lossy().into_owned()),
        };
        env.retain(|(name, _)| name != "TERM");
        env.push(("TERM".into(), term.into()));
    }
    // The request's trace context is the current one: it wins over a TRACEPARENT in the server's or request's env.
    if let Some(traceparent) = traceparent {
        env.retain(|(name, _)| name != "TRACEPARENT");
        env.push(("TRACEPARENT".into(), traceparent.into()));
    }
    let cwd = match resolve_cwd(&state.settings.root, request.cwd.as_deref(), state.settings.allow_any_cwd) {
        Ok(cwd) => cwd,
        Err(CwdError::Missing { path, problem }) => {
            return Ok(RequestedJob {
                job: Err(Unstarted {
                    argv: request.cmd,
                    cwd: path.clone(),
                    error: StartError::WorkingDirectory { path, problem },
                }),
                run_id: request.run_id,
                b64_only: request.b64_only,
                controls: Controls::default(),
            })
        }
        Err(err) => return Err(AppError::bad_request(err.to_string())),
    };
    // A terminal's input is streamed too: keystrokes come through the same endpoint.
    let (input, stdin_stream) = match request.stdin_stream || request.tty.is_some() {
        true => {
            let (feed, stream) = stdin_stream();
            (Some(feed), Some(stream))
        }
        false => (None, None),
    };
    let handle = request.tty.as_ref().map(|_| Terminal::new());
    let terminal = request.tty.as_ref().zip(handle.clone()).map(|(tty, handle)| TerminalJob {
        rows: tty.rows,
        cols: tty.cols,
        modes: tty.modes.clone(),
        handle,
    });
    let job = Job {
        argv: request.cmd.into_iter().map(OsString::from).collect(),
        cwd,
        env,
        // A streamed stdin wins: `stdin` and `stdin_b64` are then ignored.
        stdin: if stdin_stream.is_some() { None } else { stdin },
        stdin_stream,
        terminal,
        timeout: Duration::from_secs(timeout_secs),
        // Like `timeout`: ≤ 0 means none; beyond the granted timeout it could never fire, so it is cut to that.
        idle_timeout: request
            .idle_timeout
            .and_then(|secs| u64::try_from(secs).ok())
            .filter(|secs| *secs > 0)
            .map(|secs| Duration::from_secs(secs.min(timeout_secs))),
        group: None,
        drain_now: None,
        end_daemons: request.daemons == Some(protocol::DaemonsRequest::End),
    };
    let controls = Controls { input, terminal: handle };
    Ok(RequestedJob { job: Ok(job), run_id: request.run_id, b64_only: request.b64_only, controls })
}

/// The `TERM` of a TTY run whose request and environment name none.
pub const DEFAULT_TERM: &str = "xterm-256color";

fn validate_cmd(cmd: &[String]) -> Result<(), AppError> {
    match cmd.first() {
        None => {
            return Err(AppError::bad_request(
                "cmd is empty: it must hold at least the program to run, e.g. {\"cmd\": [\"npm\", \"test\"]}",
            ))
        }
        Some(program) if program.is_empty() => {
            return Err(AppError::bad_request("cmd[0] is empty: it must name the program to run"))
        }
        Some(_) => {}
    }
    if let Some(index) = cmd.iter().position(|arg| arg.contains('\0')) {
        return Err(AppError::bad_request(format!("cmd[{index}] contains a NUL byte, which no argument can hold")));
    }
    Ok(())
}

/// The contract's rule: absent or ≤ 0 → the default (600, or the cap when that is lower); above the cap → the cap.
pub fn grant_timeout(requested: Option<i64>, max: u64) -> u64 {
    match requested {
        Some(secs) if secs > 0 => u64::try_from(secs).unwrap_or(max).min(max),
        _ => protocol::DEFAULT_TIMEOUT_SECS.min(max),
    }
}

/// The server's environment (already stripped of EXEC_SERVER_*) with the request's variables laid over it.
fn build_env<'a>(
    base: &[(OsString, OsString)],
    extra: impl Iterator<Item = (&'a String, &'a String)>,
) -> Result<Vec<(OsString, OsString)>, AppError> {
    let mut env = base.to_vec();
    for (name, value) in extra {
        if name.is_empty() || name.contains('=') || name.contains('\0') {
            return Err(AppError::bad_request(format!(
                "env name {name:?} is invalid: names must be non-empty and hold no '=' or NUL"
            )));
        }
        if value.contains('\0') {
            return Err(AppError::bad_request(format!("env value of {name} contains a NUL byte")));
        }
        env.retain(|(existing, _)| existing != name.as_str());
        env.push((name.into(), value.into()));
    }
    Ok(env)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeouts_follow_the_contract() {
        assert_eq!(grant_timeout(None, 3600), 600);
        assert_eq!(grant_timeout(Some(0), 3600), 600);
        assert_eq!(grant_timeout(Some(-5), 3600), 600);
        assert_eq!(grant_timeout(Some(7), 3600), 7);
        assert_eq!(grant_timeout(Some(99_999), 3600), 3600);
        assert_eq!(grant_timeout(None, 60), 60);
    }

    #[test]
    fn request_env_overrides_and_bad_names_are_refused() {
        let base = vec![("A".into(), "1".into()), ("B".into(), "2".into())];
        let a = "A".to_string();
        let three = "3".to_string();
        let env = build_env(&base, [(&a, &three)].into_iter()).unwrap();
        assert_eq!(env, [("B".into(), "2".into()), ("A".into(), "3".into())]);
        let bad = "X=Y".to_string();
        assert!(build_env(&base, [(&bad, &three)].into_iter()).is_err());
    }
}
