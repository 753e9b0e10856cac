//! How a command a client asked for ended, in the words the HTTP API tells it: one type for an unnamed request's
//! reply and last frames, and for a named run's record (what its reply, its frames and `GET /runs/{id}` say). Made
//! once, from the engine's outcome or from why there is none; read by everything that tells the end.

use std::time::Duration;

use protocol::{Frame, RunState, StartErrorKind, StoppedBy};
use tokio::task::JoinError;

use crate::engine::{Outcome, StartError};

/// How a command ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ending {
    pub state: RunState,
    /// The exit code; 128+N when a signal ended it; 124 when it timed out; -1 when it never ran to an end of its
    /// own (not started, its task failed).
    pub exit_code: i32,
    pub signal: Option<i32>,
    pub timed_out: bool,
    /// The message of the error frame and of the reply's `error`.
    pub error: Option<String>,
    /// What stopped it, if something did (a named run's exit frame and `RunInfo` say so).
    pub stopped_by: Option<StoppedBy>,
    pub duration: Duration,
    /// With a streamed stdin: the bytes the command took from it (a named run's exit frame says so).
    pub stdin_consumed: Option<u64>,
    /// For a command that could not start: why, as the reply and the error frame name it.
    pub start_error: Option<StartErrorKind>,
}

impl Ending {
    /// A command that ran, granted `timeout` (named in the message when it ran out).
    pub fn ran<K>(outcome: &Outcome<K>, timeout: Duration) -> Self {
        let state = if outcome.timed_out {
            RunState::TimedOut
        } else if outcome.cancelled {
            RunState::Cancelled
        } else {
            RunState::Exited
        };
        Ending {
            state,
            exit_code: outcome.exit_code,
            signal: outcome.signal,
            timed_out: outcome.timed_out,
            error: message_of(outcome, timeout),
            stopped_by: stopped_by(outcome),
            duration: outcome.duration,
            stdin_consumed: outcome.stdin_consumed,
            start_error: None,
        }
    }

    /// A command that never ran, and `message` saying why.
    pub fn never_ran(message: String) -> Self {
        Ending {
            state: RunState::Exited,
            exit_code: protocol::EXIT_NOT_STARTED,
            signal: None,
            timed_out: false,
            error: Some(message),
            stopped_by: None,
            duration: Duration::ZERO,
            stdin_consumed: None,
            start_error: None,
        }
    }

    /// A command that could not start (the engine's reason, or the request's missing cwd).
    pub fn not_started(err: &StartError) -> Self {
        Ending { start_error: Some(err.kind()), ..Ending::never_ran(format!("failed to start command: {err}")) }
    }

    /// The task running the command panicked or was aborted.
    pub fn task_failed(err: &JoinError) -> Self {
        Ending::never_ran(task_failed_message(err))
    }

    /// What the engine returned for a job granted `timeout`.
    pub fn of_engine<K>(ran: &Result<Outcome<K>, StartError>, timeout: Duration) -> Self {
        match ran {
            Ok(outcome) => Ending::ran(outcome, timeout),
            Err(not_started) => Ending::not_started(not_started),
        }
    }

    /// What the engine, run in a task of its own, returned for a job granted `timeout`.
    pub fn of<K>(joined: &Result<Result<Outcome<K>, StartError>, JoinError>, timeout: Duration) -> Self {
        match joined {
            Ok(ran) => Ending::of_engine(ran, timeout),
            Err(err) => Ending::task_failed(err),
        }
    }

    /// A named run whose record is gone while a reader waits for it (cannot happen while a reader holds the run;
    /// no reader is ever left waiting for it).
    pub fn lost() -> Self {
        Ending { state: RunState::Cancelled, ..Ending::never_ran("the run was lost".into()) }
    }

    /// The frames that end a stream: the error frame when there is something to say, then the exit frame. A named
    /// run's (with its streams' `totals`) also carry the totals and what stopped it.
    pub fn frames(&self, totals: Option<[u64; 2]>) -> Vec<Frame> {
        let error = self.error.clone().map(|data| Frame::Error { data, start_error: self.start_error });
        let exit = Frame::Exit {
            data: self.exit_code,
            timed_out: self.timed_out,
            signal: self.signal,
            duration_ms: u64::try_from(self.duration.as_millis()).unwrap_or(u64::MAX),
            stdout_bytes: totals.map(|totals| totals[0]),
            stderr_bytes: totals.map(|totals| totals[1]),
            stopped_by: totals.and(self.stopped_by),
            stdin_consumed: self.stdin_consumed,
        };
        error.into_iter().chain([exit]).collect()
    }
}

/// The message of a command whose task failed: also the 500 of an unnamed `/exec`.
pub fn task_failed_message(err: &JoinError) -> String {
    format!("command task failed: {err}")
}

/// The message for a command that ended early by a timeout or cancellation, if it did.
fn message_of<K>(outcome: &Outcome<K>, timeout: Duration) -> Option<String> {
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

/// What stopped a command, as the engine tells it. A cancellation the engine saw is the shutdown's unless the run
/// was cancelled by someone (DELETE, the reattach window): [`crate::runs::NamedRun::finish`] puts their cause in its
/// place.
fn stopped_by<K>(outcome: &Outcome<K>) -> Option<StoppedBy> {
    if outcome.idle_timed_out.is_some() {
        Some(StoppedBy::IdleTimeout)
    } else if outcome.timed_out {
        Some(StoppedBy::Timeout)
    } else if outcome.cancelled {
        Some(StoppedBy::Shutdown)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn timed_out() -> Ending {
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
            stdin_consumed: None,
        };
        Ending::ran(&outcome, Duration::from_secs(7))
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
            stdin_consumed: None,
        };
        assert_eq!(
            timed_out().frames(None),
            [Frame::Error { data: "command timed out after 7s".into(), start_error: None }, exit]
        );
        let not_started = StartError::Other("nope".into());
        let frames = Ending::not_started(&not_started).frames(None);
        let start_error = Some(StartErrorKind::Other);
        assert_eq!(frames[0], Frame::Error { data: format!("failed to start command: {not_started}"), start_error });
        let missing = StartError::NotFound { program: "npx".into() };
        assert!(matches!(
            &Ending::not_started(&missing).frames(None)[0],
            Frame::Error { start_error: Some(StartErrorKind::NotFound), .. }
        ));
        assert!(matches!(frames[1], Frame::Exit { data: protocol::EXIT_NOT_STARTED, .. }));
    }

    /// A named run's exit frame adds its totals and what stopped it; an unnamed one's has neither.
    #[test]
    fn only_a_named_runs_exit_frame_has_totals_and_a_cause() {
        let ending = timed_out();
        assert_eq!(ending.stopped_by, Some(StoppedBy::Timeout));
        assert!(matches!(
            ending.frames(Some([3, 4])).last(),
            Some(Frame::Exit {
                stdout_bytes: Some(3),
                stderr_bytes: Some(4),
                stopped_by: Some(StoppedBy::Timeout),
                ..
            })
        ));
    }
}
