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
    /// A code this version does not know.
    #[serde(other)]
    Other,
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
    }
}
