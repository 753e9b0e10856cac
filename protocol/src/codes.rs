//! Machine-readable reasons beside the human messages: the `code` of an error body and the `stopped_by` of a named
//! run's end. Clients decide by these, never by searching the text, which is free to change. Both are additive and
//! optional on the wire: older peers and the contract's clients ignore them, and a value a newer server adds reads as
//! `Other` rather than failing the body.

use serde::{Deserialize, Serialize};

/// What kind of refusal an error body is, when the server names one (`{"error": …, "code": "run_not_known"}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// `404` from `/runs/{id}…`: the server keeps runs, and this one it does not (never existed, or ended more than
    /// `--retain` ago). Any other 404 means no runs endpoint at all, which is why a client must tell them apart.
    RunNotKnown,
    /// `410` from `/runs/{id}…` and from a POST naming the id: the run ended while no client read it and was
    /// forgotten to make room under `--max-runs` before its `--retain` was up. The message says how it ended; it was
    /// not started again, and a client must not advise running it again.
    RunForgotten,
    /// `416` from `GET /runs/{id}/stream`: an offset beyond the bytes that stream holds (so far, while the run goes
    /// on): the reader claims bytes the server never sent, so it is not waited for.
    OffsetBeyondEnd,
    /// `409` from `POST /runs/{id}/stdin`: the chunk starts beyond the bytes the server has taken (the body's
    /// `received`): the client resends from there.
    StdinGap,
    /// `409` from `POST /runs/{id}/stdin`: bytes past an EOF the server already took.
    StdinClosed,
    /// `409` from `POST /runs/{id}/stdin`: the run did not ask for `stdin_stream` (nor `tty`).
    StdinNotOpen,
    /// `409` from `POST /runs/{id}/stdin` with `eof=true` for a TTY run: a terminal has no EOF (Ctrl-D is the byte
    /// 0x04, which the line discipline reads).
    StdinIsATerminal,
    /// `409` from `POST /runs/{id}/resize`: the run has no terminal.
    NotATerminal,
    /// `409` from `POST /runs/{id}/stdin`: the request was held (its bytes did not fit yet) and a newer request to
    /// the same run's stdin took its place; nothing of it was taken. A run holds one waiting request at most, so a
    /// client that resends after a lost connection is never blocked by the request it lost.
    StdinSuperseded,
    /// `400` from `POST /exec` and `/exec/stream`: the request's `env` names more than [`crate::MAX_ENV_VARS`]
    /// variables.
    TooManyEnvVars,
    /// `413` from any endpoint with a body: it is over [`crate::MAX_BODY_BYTES`].
    BodyTooLarge,
    /// `408` from any endpoint with a body: it did not arrive within the server's `--header-timeout`.
    BodyTimeout,
    /// `400` from any endpoint with a body: it could not be read (broken chunked framing, the connection cut).
    BodyUnreadable,
    /// `503` from `POST /exec` and `/exec/stream`: the server is out of file descriptors (its open-file limit is
    /// reached), so nothing can start now; retry once fewer commands run, or raise the server's limit.
    OutOfFileDescriptors,
    /// `503` from `POST /exec` and `/exec/stream`: too many large request bodies (over 16 KiB) wait to be read by the
    /// server's preparer threads; retry after `Retry-After`.
    PreparersBusy,
    /// A code this version does not know.
    #[serde(other)]
    Other,
}

/// Why a command never started (docs/exec-server.md, "Which commands exist"): the `start_error` of the `/exec` reply
/// and of the error frame, beside exit code -1 and the message. A client answers as a shell would: 127 and `<program>:
/// command not found` for `NotFound`, 126 and `<program>: Permission denied` for `PermissionDenied`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StartErrorKind {
    /// No such program on the command's PATH, or at the path given.
    NotFound,
    /// The program is there but may not be executed.
    PermissionDenied,
    /// The working directory is not there, or is not a directory.
    Cwd,
    /// Anything else; also a kind this version does not know.
    #[serde(other)]
    Other,
}

impl StartErrorKind {
    /// The name on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            StartErrorKind::NotFound => "not_found",
            StartErrorKind::PermissionDenied => "permission_denied",
            StartErrorKind::Cwd => "cwd",
            StartErrorKind::Other => "other",
        }
    }
}

/// Why a named run was stopped before its command ended by itself (its exit frame and `RunInfo`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StoppedBy {
    /// Its `timeout`.
    Timeout,
    /// Its `idle_timeout`: no output for that long.
    IdleTimeout,
    /// No client reattached within the server's reattach window.
    ReattachWindow,
    /// `DELETE /runs/{id}`.
    Delete,
    /// The server shut down.
    Shutdown,
    /// A cause this version does not know.
    #[serde(other)]
    Other,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_snake_case_and_unknown_ones_read_as_other() {
        assert_eq!(serde_json::to_string(&ErrorCode::RunNotKnown).unwrap(), r#""run_not_known""#);
        assert_eq!(serde_json::from_str::<ErrorCode>(r#""quota_spent""#).unwrap(), ErrorCode::Other);
        let codes = [
            (ErrorCode::StdinGap, "stdin_gap"),
            (ErrorCode::StdinClosed, "stdin_closed"),
            (ErrorCode::StdinNotOpen, "stdin_not_open"),
            (ErrorCode::StdinIsATerminal, "stdin_is_a_terminal"),
            (ErrorCode::NotATerminal, "not_a_terminal"),
            (ErrorCode::StdinSuperseded, "stdin_superseded"),
            (ErrorCode::TooManyEnvVars, "too_many_env_vars"),
            (ErrorCode::BodyTooLarge, "body_too_large"),
            (ErrorCode::BodyTimeout, "body_timeout"),
            (ErrorCode::BodyUnreadable, "body_unreadable"),
            (ErrorCode::OutOfFileDescriptors, "out_of_file_descriptors"),
            (ErrorCode::PreparersBusy, "preparers_busy"),
        ];
        for (code, name) in codes {
            assert_eq!(serde_json::to_string(&code).unwrap(), format!("\"{name}\""));
            assert_eq!(serde_json::from_str::<ErrorCode>(&format!("\"{name}\"")).unwrap(), code);
        }
        for kind in
            [StartErrorKind::NotFound, StartErrorKind::PermissionDenied, StartErrorKind::Cwd, StartErrorKind::Other]
        {
            assert_eq!(serde_json::to_string(&kind).unwrap(), format!("\"{}\"", kind.as_str()));
            assert_eq!(serde_json::from_str::<StartErrorKind>(&format!("\"{}\"", kind.as_str())).unwrap(), kind);
        }
        assert_eq!(serde_json::from_str::<StartErrorKind>(r#""quota""#).unwrap(), StartErrorKind::Other);
        let causes = [
            (StoppedBy::Timeout, "timeout"),
            (StoppedBy::IdleTimeout, "idle_timeout"),
            (StoppedBy::ReattachWindow, "reattach_window"),
            (StoppedBy::Delete, "delete"),
            (StoppedBy::Shutdown, "shutdown"),
        ];
        for (cause, name) in causes {
            assert_eq!(serde_json::to_string(&cause).unwrap(), format!("\"{name}\""));
            assert_eq!(serde_json::from_str::<StoppedBy>(&format!("\"{name}\"")).unwrap(), cause);
        }
        assert_eq!(serde_json::from_str::<StoppedBy>(r#""oom""#).unwrap(), StoppedBy::Other);
    }

    #[test]
    fn an_error_body_without_a_code_stays_the_contracts() {
        let plain = crate::ErrorBody::message("no");
        assert_eq!(serde_json::to_string(&plain).unwrap(), r#"{"error":"no"}"#);
        assert_eq!(serde_json::from_str::<crate::ErrorBody>(r#"{"error":"no"}"#).unwrap(), plain);
        let coded: crate::ErrorBody = serde_json::from_str(r#"{"error":"gone","code":"run_not_known"}"#).unwrap();
        assert_eq!(coded.code, Some(ErrorCode::RunNotKnown));
        let gap =
            crate::ErrorBody { code: Some(ErrorCode::StdinGap), received: Some(7), ..crate::ErrorBody::message("gap") };
        assert_eq!(serde_json::to_string(&gap).unwrap(), r#"{"error":"gap","code":"stdin_gap","received":7}"#);
    }
}
