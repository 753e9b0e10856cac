//! From a request body to an engine job: the extractor both `POST /exec` and `POST /exec/stream` take, with the
//! parsing, validation, cwd confinement, environment and timeout rules it applies.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{FromRequest, Request};
use axum::http::StatusCode;
use protocol::{ErrorCode, ExecRequest, RunId};

use super::body::Body;
use super::preparers;
use super::trace::RequestContext;
use super::{AppError, AppState};
use crate::engine::stdin::{stdin_stream, StdinFeed};
use crate::engine::terminal::{TerminalHandle, TerminalJob};
use crate::engine::{Job, StartError};
use crate::workspace::{resolve_cwd, CwdError};

/// A request body that passed validation. Anything else wrong with the body is the extractor's rejection, a 4xx
/// [`AppError`] that names what is wrong.
pub struct RequestedJob {
    /// The job to run, or the contract's start failure (a missing cwd) to report as a command that did not start.
    /// The granted timeout is the job's own `timeout` (whole seconds): the messages read it there.
    pub job: Result<Job, Unstarted>,
    /// The run's name, when the request gave one (a named run).
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
    pub terminal: Option<Arc<TerminalHandle>>,
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
        let Body(body) = Body::from_request(request, state).await?;
        if body.len() <= INLINE_BODY_BYTES {
            return prepare(state, &body, traceparent.as_deref());
        }
        // A large body is parsed and checked on a preparer thread, never on a runtime worker: up to 1 MiB of JSON
        // (tens of thousands of variables) takes milliseconds in a release build and far more in a debug one, and
        // the workers serve `/health` (a liveness probe) and every other connection meanwhile.
        let state = state.clone();
        match preparers::off_the_workers(move || prepare(&state, &body, traceparent.as_deref())).await {
            Ok(prepared) => prepared,
            Err(preparers::Unprepared::Busy) => Err(AppError::coded(
                StatusCode::SERVICE_UNAVAILABLE,
                ErrorCode::PreparersBusy,
                "too many large requests are waiting to be read: retry in a second (Retry-After), or send a smaller \
                 request (pass large inputs through the shared workspace)",
            )),
            Err(preparers::Unprepared::Panicked) => Err(AppError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "preparing the request failed (a bug: see the log)",
            )),
        }
    }
}

/// The largest body prepared on the runtime's worker itself: a few microseconds of parsing, less than the hand-off
/// to a preparer thread costs.
const INLINE_BODY_BYTES: usize = 16 * 1024;

/// What a body asks for, once it passed every check that needs the body alone: the request, the command's
/// environment (the server's with the request's laid over it, and `TERM` for a terminal) and its stdin bytes.
#[derive(Debug)]
pub struct CheckedRequest {
    pub request: ExecRequest,
    pub env: Vec<(OsString, OsString)>,
    /// `stdin_b64` decoded, or `stdin`'s bytes.
    pub stdin: Option<Vec<u8>>,
}

/// The checks of a body that need nothing but it and the server's environment (`base_env`); `traceparent` is the
/// request's trace context, which wins over any `TRACEPARENT` in either environment. Every refusal is a 400.
pub fn check_request(
    body: &[u8],
    base_env: &[(OsString, OsString)],
    traceparent: Option<&str>,
) -> Result<CheckedRequest, AppError> {
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
    let stdin = match (&request.stdin_b64, &request.stdin) {
        (Some(b64), _) => Some(
            protocol::text::from_base64(b64)
                .map_err(|err| AppError::bad_request(format!("stdin_b64 is not valid base64: {err}")))?,
        ),
        (None, Some(text)) => Some(text.clone().into_bytes()),
        (None, None) => None,
    };
    let mut env = build_env(base_env, request.env.as_ref())?;
    if let Some(tty) = &request.tty {
        // The request's TERM; else the environment's (the request's env over the server's); else a common one.
        let term = match &tty.term {
            Some(term) if !is_terminal_type(term) => {
                return Err(AppError::bad_request(format!(
                    "tty.term must be a terminal type like xterm-256color: 1 to {MAX_TERM_BYTES} printable ASCII \
                     characters, no spaces or control characters"
                )))
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
    Ok(CheckedRequest { request, env, stdin })
}

/// The longest `tty.term`: terminfo's names are a few to 30 characters (`rxvt-unicode-256color`).
pub const MAX_TERM_BYTES: usize = 64;

/// A terminal type's name: 1 to [`MAX_TERM_BYTES`] printable ASCII characters without spaces, so that nothing a
/// request sends as `TERM` can hold a newline or an escape sequence for a program that prints it.
fn is_terminal_type(term: &str) -> bool {
    (1..=MAX_TERM_BYTES).contains(&term.len()) && term.bytes().all(|byte| byte.is_ascii_graphic())
}

/// Turns a body into a job (with the run's name and the request's `b64_only`), or a 4xx that names what is wrong.
fn prepare(state: &AppState, body: &[u8], traceparent: Option<&str>) -> Result<RequestedJob, AppError> {
    let CheckedRequest { request, env, stdin } = check_request(body, &state.settings.base_env, traceparent)?;
    let timeout_secs = grant_timeout(request.timeout, state.settings.max_timeout);
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
        Err(err @ CwdError::OutOfDescriptors(_)) => {
            tracing::warn!(%err, "a request was refused: no file descriptor left to open its working directory");
            return Err(AppError::coded(
                StatusCode::SERVICE_UNAVAILABLE,
                ErrorCode::OutOfFileDescriptors,
                err.to_string(),
            ));
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
    let handle = request.tty.as_ref().map(|_| TerminalHandle::new());
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

/// The server's environment (already stripped of EXEC_SERVER_*) with the request's variables laid over it: the
/// server's in their order, less those the request names, then the request's (a map, so each name once). In time
/// proportional to the variables (each name looked up in the request's map), at most [`protocol::MAX_ENV_VARS`] of
/// them: a removal from the list per request variable made 80 000 of them take seconds of a worker.
fn build_env(
    base: &[(OsString, OsString)],
    extra: Option<&BTreeMap<String, String>>,
) -> Result<Vec<(OsString, OsString)>, AppError> {
    let Some(extra) = extra else { return Ok(base.to_vec()) };
    if extra.len() > protocol::MAX_ENV_VARS {
        return Err(AppError::coded(
            StatusCode::BAD_REQUEST,
            ErrorCode::TooManyEnvVars,
            format!(
                "env names {} variables, more than the {} a request may set: send only the variables the command \
                 needs",
                extra.len(),
                protocol::MAX_ENV_VARS
            ),
        ));
    }
    for (name, value) in extra {
        if name.is_empty() || name.contains('=') || name.contains('\0') {
            return Err(AppError::bad_request(format!(
                "env name {name:?} is invalid: names must be non-empty and hold no '=' or NUL"
            )));
        }
        if value.contains('\0') {
            return Err(AppError::bad_request(format!("env value of {name} contains a NUL byte")));
        }
    }
    let kept = base.iter().filter(|(name, _)| name.to_str().is_none_or(|name| !extra.contains_key(name)));
    let mut env = Vec::with_capacity(base.len() + extra.len());
    env.extend(kept.cloned());
    env.extend(extra.iter().map(|(name, value)| (OsString::from(name), OsString::from(value))));
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
        let base = vec![("A".into(), "1".into()), ("B".into(), "2".into()), ("C".into(), "4".into())];
        let map = |pairs: &[(&str, &str)]| pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let env = build_env(&base, Some(&map(&[("A", "3"), ("D", "5")]))).unwrap();
        let expected: Vec<(OsString, OsString)> = vec![
            ("B".into(), "2".into()),
            ("C".into(), "4".into()),
            ("A".into(), "3".into()),
            ("D".into(), "5".into()),
        ];
        assert_eq!(env, expected, "the server's in order less the overridden, then the request's");
        assert_eq!(build_env(&base, None).unwrap(), base);
        assert!(build_env(&base, Some(&map(&[("X=Y", "3")]))).is_err());
    }

    #[test]
    fn more_variables_than_the_bound_are_refused_with_the_code() {
        let many: BTreeMap<String, String> =
            (0..=protocol::MAX_ENV_VARS).map(|i| (format!("V{i}"), String::new())).collect();
        let err = build_env(&[], Some(&many)).unwrap_err();
        assert_eq!((err.status, err.code), (StatusCode::BAD_REQUEST, Some(ErrorCode::TooManyEnvVars)));
        let fewer: BTreeMap<String, String> = many.into_iter().skip(1).collect();
        assert_eq!(build_env(&[], Some(&fewer)).unwrap().len(), protocol::MAX_ENV_VARS);
    }

    #[test]
    fn a_terminal_type_is_a_short_printable_name() {
        for good in ["xterm-256color", "screen.xterm-256color", "hp+color", &"x".repeat(MAX_TERM_BYTES)] {
            assert!(is_terminal_type(good), "{good}");
        }
        for bad in ["", "xterm\n", "a b", "x\u{1b}[31m", "\u{e9}", &"x".repeat(MAX_TERM_BYTES + 1)] {
            assert!(!is_terminal_type(bad), "{bad:?}");
        }
    }
}
