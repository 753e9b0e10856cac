//! How a request's command ended, and the one place that turns it into what the client gets: the `/exec` reply, or
//! the final frames (error, then exit) of `/exec/stream`. Both endpoints say the same thing in the same words.

use std::time::Duration;

use axum::body::Body;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use protocol::{ExecReply, Frame};
use tokio::sync::OwnedSemaphorePermit;
use tokio::task::JoinError;

use super::reply::ReplyBody;
use super::reply_budget::ReplyOutput;
use super::AppError;
use crate::engine::{Outcome, StartError};

/// A command's end as a handler sees it.
pub enum Finished<K = ReplyOutput> {
    /// It ran; `timeout` is the one it was granted (the job's), named when it ran out.
    Ran { outcome: Outcome<K>, timeout: Duration },
    /// It never started (the engine's reason, or the request's missing cwd).
    NotStarted(StartError),
    /// The task running it panicked or was aborted.
    TaskFailed(JoinError),
    /// A named run's stored end: its outcome (output read back from its log) and the message it ended with.
    Stored { outcome: Outcome<K>, error: Option<String> },
}

impl<K> Finished<K> {
    /// What the engine (run in a task) returned for a job granted `timeout`.
    pub fn new(joined: Result<Result<Outcome<K>, StartError>, JoinError>, timeout: Duration) -> Self {
        match joined {
            Ok(Ok(outcome)) => Finished::Ran { outcome, timeout },
            Ok(Err(not_started)) => Finished::NotStarted(not_started),
            Err(err) => Finished::TaskFailed(err),
        }
    }

    /// The last frames of `/exec/stream`: an error frame when there is something to say, then the exit frame.
    pub fn into_frames(self) -> Vec<Frame> {
        match self {
            Finished::Ran { outcome, timeout } => {
                let error = ending_message(&outcome, timeout);
                Finished::Stored { outcome, error }.into_frames()
            }
            Finished::Stored { outcome, error } => {
                let error = error.map(|data| Frame::Error { data });
                let exit = Frame::Exit {
                    data: outcome.exit_code,
                    timed_out: outcome.timed_out,
                    signal: outcome.signal,
                    duration_ms: u64::try_from(outcome.duration.as_millis()).unwrap_or(u64::MAX),
                    stdout_bytes: None,
                    stderr_bytes: None,
                    stopped_by: None,
                };
                error.into_iter().chain([exit]).collect()
            }
            Finished::NotStarted(err) => never_ran(not_started_message(&err)),
            Finished::TaskFailed(err) => never_ran(format!("command task failed: {err}")),
        }
    }
}

impl Finished<ReplyOutput> {
    /// The `/exec` reply; a command that ran keeps `permit` (its `--max-concurrent` slot) until its reply is sent.
    /// `b64_only`: the request's, see [`protocol::ExecRequest::b64_only`].
    pub fn into_reply(self, permit: Option<OwnedSemaphorePermit>, b64_only: bool) -> Result<Response, AppError> {
        let json = [(header::CONTENT_TYPE, "application/json")];
        let (outcome, error) = match self {
            Finished::Ran { outcome, timeout } => {
                let error = ending_message(&outcome, timeout);
                (outcome, error)
            }
            Finished::Stored { outcome, error } => (outcome, error),
            Finished::NotStarted(err) => {
                let reply = ExecReply {
                    exit_code: protocol::EXIT_NOT_STARTED,
                    error: Some(not_started_message(&err)),
                    ..Default::default()
                };
                return Ok((json, reply.to_json()).into_response());
            }
            Finished::TaskFailed(err) => {
                return Err(AppError::new(StatusCode::INTERNAL_SERVER_ERROR, format!("command task failed: {err}")))
            }
        };
        // A named run's stored reply (read back from its log) vouches the same as a fresh one. With it, where a cut
        // stdout's head ends: a client writing stdout as it arrives stops there, so what it wrote is always the
        // command's own first bytes (what a resume after a lost reply counts from).
        let head = outcome.stdout.head.filter(|_| b64_only);
        let mut response = (json, Body::from_stream(ReplyBody::new(outcome, error, permit, b64_only))).into_response();
        if b64_only {
            response.headers_mut().insert(protocol::B64_ONLY_HEADER, header::HeaderValue::from_static("1"));
        }
        if let Some(head) = head {
            response.headers_mut().insert(protocol::OUTPUT_HEAD_HEADER, header::HeaderValue::from(head));
        }
        Ok(response)
    }
}

/// The API's `error` for a command that never started, which clients show as it is.
pub(super) fn not_started_message(err: &StartError) -> String {
    format!("failed to start command: {err}")
}

/// The message for a command that ended early by a timeout or cancellation, if it did.
pub(super) fn ending_message<K>(outcome: &Outcome<K>, timeout: Duration) -> Option<String> {
    if let Some(idle) = outcome.idle_timed_out {
        Some(format!("command produced no output for {} s (idle_timeout); it was stopped", idle.as_secs()))
    } else if outcome.timed_out {
        Some(format!("command timed out after {}s", timeout.as_secs()))
    } else if outcome.cancelled {
        Some("command cancelled: the server is shutting down".into())
    } else {
        None
    }
}

/// The frames of a command that did not run to an end of its own: the message, then exit -1 after no time.
fn never_ran(message: String) -> Vec<Frame> {
    vec![
        Frame::Error { data: message },
        Frame::Exit {
            data: protocol::EXIT_NOT_STARTED,
            timed_out: false,
            signal: None,
            duration_ms: 0,
            stdout_bytes: None,
            stderr_bytes: None,
            stopped_by: None,
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn timed_out() -> Finished<()> {
        let outcome = Outcome {
            exit_code: 124,
            signal: Some(15),
            timed_out: true,
            idle_timed_out: None,
            cancelled: false,
            duration: Duration::from_millis(7_010),
            stdout_bytes: 0,
            stderr_bytes: 0,
            stdout: (),
            stderr: (),
        };
        Finished::Ran { outcome, timeout: Duration::from_secs(7) }
    }

    /// The stream ends with what the reply says: the same message, then the exit frame.
    #[test]
    fn frames_say_what_the_reply_says() {
        let exit = Frame::Exit {
            data: 124,
            timed_out: true,
            signal: Some(15),
            duration_ms: 7_010,
            stdout_bytes: None,
            stderr_bytes: None,
            stopped_by: None,
        };
        assert_eq!(timed_out().into_frames(), [Frame::Error { data: "command timed out after 7s".into() }, exit]);
        let not_started = StartError::Other("nope".into());
        let frames = Finished::<()>::NotStarted(not_started.clone()).into_frames();
        assert_eq!(frames[0], Frame::Error { data: format!("failed to start command: {not_started}") });
        assert!(matches!(frames[1], Frame::Exit { data: protocol::EXIT_NOT_STARTED, .. }));
    }
}
